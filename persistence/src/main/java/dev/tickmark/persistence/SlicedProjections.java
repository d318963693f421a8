package dev.tickmark.persistence;

import java.sql.Connection;
import java.sql.SQLException;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.function.Function;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.cluster.sharding.typed.ShardedDaemonProcessSettings;
import org.apache.pekko.cluster.sharding.typed.javadsl.ShardedDaemonProcess;
import org.apache.pekko.persistence.jdbc.query.javadsl.JdbcReadJournal;
import org.apache.pekko.persistence.query.Offset;
import org.apache.pekko.persistence.typed.PersistenceId;
import org.apache.pekko.projection.Projection;
import org.apache.pekko.projection.ProjectionBehavior;
import org.apache.pekko.projection.ProjectionId;
import org.apache.pekko.projection.eventsourced.EventEnvelope;
import org.apache.pekko.projection.eventsourced.javadsl.EventSourcedProvider;
import org.apache.pekko.projection.javadsl.GroupedProjection;
import org.apache.pekko.projection.jdbc.javadsl.JdbcHandler;
import org.apache.pekko.projection.jdbc.javadsl.JdbcProjection;

/**
 * Runs one projection per tag slice, each exactly once in the cluster, through a {@link
 * ShardedDaemonProcess}.
 */
public final class SlicedProjections {
  private SlicedProjections() {}

  /**
   * {@code daemonName} must not be {@code projection-<name>}: ProjectionManagement owns that actor
   * name.
   */
  public static <E> void init(
      ActorSystem<?> system,
      String daemonName,
      List<String> tags,
      Function<String, Projection<E>> projection) {
    ShardedDaemonProcess.get(system)
        .init(
            ProjectionBehavior.Command.class,
            daemonName,
            tags.size(),
            i -> ProjectionBehavior.create(projection.apply(tags.get(i))),
            ShardedDaemonProcessSettings.create(system),
            Optional.of(ProjectionBehavior.stopMessage()));
  }

  /**
   * Writes one event of the entity {@code entityId} on the projection's connection, inside its
   * offset's transaction.
   */
  @FunctionalInterface
  public interface EventWriter<E> {
    void write(Connection connection, String entityId, E event) throws SQLException;
  }

  /**
   * The projection {@code name} of the events tagged {@code tag}: events are written by {@code
   * writer} in groups (up to {@value #GROUP_SIZE} events or {@code GROUP_WITHIN}), in journal
   * order, in the same transaction as the projection's offset (exactly once), on a pooled
   * connection. One transaction per group rather than per event: per-event commits (and their
   * fsyncs) were most of the read side's cost under steady metering.
   */
  public static <E> GroupedProjection<Offset, EventEnvelope<E>> exactlyOnceInGroups(
      ActorSystem<?> system, Jdbc jdbc, String name, String tag, EventWriter<E> writer) {
    return inGroups(
        system,
        jdbc,
        name,
        tag,
        (connection, envelopes) -> {
          for (EventEnvelope<E> envelope : envelopes)
            writer.write(
                connection,
                PersistenceId.extractEntityId(envelope.persistenceId()),
                envelope.event());
        });
  }

  /** Writes a whole group of events on the projection's connection. */
  @FunctionalInterface
  private interface GroupWriter<E> {
    void write(Connection connection, List<EventEnvelope<E>> envelopes) throws SQLException;
  }

  private static <E> GroupedProjection<Offset, EventEnvelope<E>> inGroups(
      ActorSystem<?> system, Jdbc jdbc, String name, String tag, GroupWriter<E> writer) {
    return JdbcProjection.groupedWithin(
            ProjectionId.of(name, tag),
            EventSourcedProvider.<E>eventsByTag(system, JdbcReadJournal.Identifier(), tag),
            () -> new PooledJdbcSession(jdbc.dataSource()),
            () -> new InGroups<>(writer),
            system)
        .withGroup(GROUP_SIZE, GROUP_WITHIN);
  }

  /**
   * Adds the statements one event of the entity {@code entityId} needs to its group's {@link
   * StatementBatch}.
   */
  @FunctionalInterface
  public interface BatchedEventWriter<E> {
    void write(StatementBatch out, String entityId, E event);
  }

  /**
   * As {@link #exactlyOnceInGroups}, but a group's statements go to PostgreSQL in {@link
   * StatementBatch}es, a round trip for each run of one statement rather than one for each event:
   * for the projections that see every launch and every settlement.
   */
  public static <E> GroupedProjection<Offset, EventEnvelope<E>> exactlyOnceInBatches(
      ActorSystem<?> system, Jdbc jdbc, String name, String tag, BatchedEventWriter<E> writer) {
    return inGroups(
        system,
        jdbc,
        name,
        tag,
        (connection, envelopes) -> {
          StatementBatch batch = new StatementBatch();
          for (EventEnvelope<E> envelope : envelopes)
            writer.write(
                batch, PersistenceId.extractEntityId(envelope.persistenceId()), envelope.event());
          batch.send(connection);
        });
  }

  /**
   * How the read side's projections group events into transactions (the ledger's batching writer
   * too).
   */
  public static final int GROUP_SIZE = 500;

  public static final Duration GROUP_WITHIN = Duration.ofMillis(50);

  private static final class InGroups<E>
      extends JdbcHandler<List<EventEnvelope<E>>, PooledJdbcSession> {
    private final GroupWriter<E> writer;

    InGroups(GroupWriter<E> writer) {
      this.writer = writer;
    }

    @Override
    public void process(PooledJdbcSession session, List<EventEnvelope<E>> envelopes)
        throws Exception {
      session.withConnection(
          c -> {
            writer.write(c, envelopes);
            return null;
          });
    }
  }
}
