package dev.tickmark.persistence.ledger;

import dev.tickmark.engine.account.Account;
import dev.tickmark.persistence.Jdbc;
import dev.tickmark.persistence.PooledJdbcSession;
import dev.tickmark.persistence.SlicedProjections;
import java.sql.PreparedStatement;
import java.sql.Timestamp;
import java.util.List;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.persistence.jdbc.query.javadsl.JdbcReadJournal;
import org.apache.pekko.persistence.query.Offset;
import org.apache.pekko.persistence.typed.PersistenceId;
import org.apache.pekko.projection.ProjectionId;
import org.apache.pekko.projection.eventsourced.EventEnvelope;
import org.apache.pekko.projection.eventsourced.javadsl.EventSourcedProvider;
import org.apache.pekko.projection.javadsl.GroupedProjection;
import org.apache.pekko.projection.javadsl.SourceProvider;
import org.apache.pekko.projection.jdbc.javadsl.JdbcHandler;
import org.apache.pekko.projection.jdbc.javadsl.JdbcProjection;

/**
 * Writes the ledger table from account events, one projection instance per tag slice. Rows and
 * offsets commit in one transaction (exactly-once); events are written in groups to batch the
 * inserts. (The {@link org.apache.pekko.cluster.sharding.typed.javadsl.ShardedDaemonProcess} runs
 * each slice once in the cluster.)
 */
public final class LedgerProjection {
  public static final String NAME = "ledger";

  private LedgerProjection() {}

  public static void init(ActorSystem<?> system, Jdbc jdbc) {
    SlicedProjections.init(
        system, "ledger-writer", Account.allTags(), tag -> projection(system, jdbc, tag));
  }

  static GroupedProjection<Offset, EventEnvelope<Account.Event>> projection(
      ActorSystem<?> system, Jdbc jdbc, String tag) {
    SourceProvider<Offset, EventEnvelope<Account.Event>> source =
        EventSourcedProvider.eventsByTag(system, JdbcReadJournal.Identifier(), tag);
    return JdbcProjection.groupedWithin(
            ProjectionId.of(NAME, tag),
            source,
            () -> new PooledJdbcSession(jdbc.dataSource()),
            Writer::new,
            system)
        .withGroup(SlicedProjections.GROUP_SIZE, SlicedProjections.GROUP_WITHIN);
  }

  static final class Writer
      extends JdbcHandler<List<EventEnvelope<Account.Event>>, PooledJdbcSession> {
    private static final String INSERT =
        "INSERT INTO ledger_entries"
            + " (account_id, kind, amount, entry_key, rental_id, at, persistence_id, sequence_number, leg)"
            + " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (persistence_id, sequence_number, leg) DO NOTHING";

    private static final String AUDIT =
        "INSERT INTO account_audit"
            + " (persistence_id, sequence_number, account_id, kind, detail, effective_at, at)"
            + " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING";

    @Override
    public void process(PooledJdbcSession session, List<EventEnvelope<Account.Event>> envelopes)
        throws Exception {
      session.withConnection(
          connection -> {
            try (PreparedStatement audit = connection.prepareStatement(AUDIT)) {
              int lines = 0;
              for (EventEnvelope<Account.Event> envelope : envelopes) {
                var entry = AccountAudit.of(envelope.event());
                if (entry.isEmpty()) continue;
                audit.setString(1, envelope.persistenceId());
                audit.setLong(2, envelope.sequenceNr());
                audit.setString(3, PersistenceId.extractEntityId(envelope.persistenceId()));
                audit.setString(4, entry.get().kind());
                audit.setString(5, entry.get().detail());
                audit.setTimestamp(
                    6,
                    entry.get().effectiveAt() == null
                        ? null
                        : Timestamp.from(entry.get().effectiveAt()));
                audit.setTimestamp(7, Timestamp.from(entry.get().at()));
                audit.addBatch();
                lines++;
              }
              if (lines > 0) audit.executeBatch();
            }
            try (PreparedStatement insert = connection.prepareStatement(INSERT)) {
              int rows = 0;
              for (EventEnvelope<Account.Event> envelope : envelopes) {
                String accountId = PersistenceId.extractEntityId(envelope.persistenceId());
                List<LedgerLegs.Leg> legs = LedgerLegs.of(accountId, envelope.event());
                for (int leg = 0; leg < legs.size(); leg++) {
                  LedgerLegs.Leg l = legs.get(leg);
                  insert.setString(1, l.accountId());
                  insert.setString(2, l.kind());
                  insert.setLong(3, l.amount());
                  insert.setString(4, l.key());
                  insert.setString(5, l.rentalId());
                  insert.setTimestamp(6, Timestamp.from(l.at()));
                  insert.setString(7, envelope.persistenceId());
                  insert.setLong(8, envelope.sequenceNr());
                  insert.setShort(9, (short) leg);
                  insert.addBatch();
                  rows++;
                }
              }
              if (rows > 0) insert.executeBatch();
            }
            return null;
          });
    }
  }
}
