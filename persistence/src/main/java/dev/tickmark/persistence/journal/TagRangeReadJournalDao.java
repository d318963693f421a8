package dev.tickmark.persistence.journal;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.LongAdder;
import org.apache.pekko.NotUsed;
import org.apache.pekko.persistence.PersistentRepr;
import org.apache.pekko.persistence.jdbc.PekkoSerialization;
import org.apache.pekko.persistence.jdbc.config.EventJournalTableColumnNames;
import org.apache.pekko.persistence.jdbc.config.EventJournalTableConfiguration;
import org.apache.pekko.persistence.jdbc.config.EventTagTableConfiguration;
import org.apache.pekko.persistence.jdbc.config.ReadJournalConfig;
import org.apache.pekko.persistence.jdbc.journal.dao.JournalTables.JournalPekkoSerializationRow;
import org.apache.pekko.persistence.jdbc.query.dao.DefaultReadJournalDao;
import org.apache.pekko.serialization.Serialization;
import org.apache.pekko.stream.Materializer;
import org.apache.pekko.stream.scaladsl.Source;
import scala.Option;
import scala.Tuple3;
import scala.collection.immutable.Set;
import scala.collection.immutable.Set$;
import scala.concurrent.ExecutionContext;
import scala.concurrent.Future;
import scala.jdk.javaapi.FutureConverters;
import scala.util.Try;
import slick.dbio.DBIOAction;
import slick.jdbc.JdbcBackend;
import slick.jdbc.JdbcProfile;
import slick.jdbc.SimpleJdbcAction;

/**
 * The plugin's read-journal DAO with one change: {@code eventsByTag} reads the tag's rows of {@code
 * event_tag} in the offset range, through the {@code (tag, event_id)} index (V18), and joins each
 * to its event. The plugin puts the range on the journal's {@code ordering} only, so PostgreSQL
 * either walks every event in the range and probes {@code event_tag} for each (every projection
 * slice touching every new event: 16 probes an event with Tickmark's 17 slices), or, with fresh
 * statistics on a young journal, scans all of {@code event_tag} per query (6 ms for a tag without
 * events at 133,000 events, every 200 ms per slice). Here a slice's query costs what its own tag's
 * new rows cost. Same rows, same order, same limit; everything else is the plugin's code. Chosen
 * with {@code jdbc-read-journal.dao}.
 */
public class TagRangeReadJournalDao extends DefaultReadJournalDao {
  private final LongAdder queries = new LongAdder();
  private final LongAdder skipped = new LongAdder();

  /** How many eventsByTag queries this DAO (one a read journal) has sent PostgreSQL. */
  public long tagQueries() {
    return queries.sum();
  }

  /** How many eventsByTag polls this DAO has answered without PostgreSQL, their range empty. */
  public long skippedTagQueries() {
    return skipped.sum();
  }

  private final Serialization serialization;
  private final String eventsByTag;

  public TagRangeReadJournalDao(
      JdbcBackend.JdbcDatabaseDef db,
      JdbcProfile profile,
      ReadJournalConfig config,
      Serialization serialization,
      ExecutionContext ec,
      Materializer mat) {
    super(db, profile, config, serialization, ec, mat);
    this.serialization = serialization;
    this.eventsByTag = eventsByTagSql(config);
  }

  /**
   * The query: the tag, the offset (exclusive), the highest ordering (inclusive) and the limit as
   * parameters; public for the test that looks at its plan.
   */
  public static String eventsByTagSql(ReadJournalConfig config) {
    EventJournalTableConfiguration journal = config.eventJournalTableConfiguration();
    EventTagTableConfiguration tags = config.eventTagTableConfiguration();
    EventJournalTableColumnNames c = journal.columnNames();
    String eventId = "t." + tags.columnNames().eventId();
    return "SELECT "
        + String.join(
            ", ",
            "j." + c.ordering(),
            "j." + c.deleted(),
            "j." + c.persistenceId(),
            "j." + c.sequenceNumber(),
            "j." + c.writer(),
            "j." + c.writeTimestamp(),
            "j." + c.adapterManifest(),
            "j." + c.eventPayload(),
            "j." + c.eventSerId(),
            "j." + c.eventSerManifest(),
            "j." + c.metaPayload(),
            "j." + c.metaSerId(),
            "j." + c.metaSerManifest())
        + " FROM "
        + BatchedJournalDao.qualified(tags.schemaName(), tags.tableName())
        + " t JOIN "
        + BatchedJournalDao.qualified(journal.schemaName(), journal.tableName())
        + " j ON j."
        + c.ordering()
        + " = "
        + eventId
        + " WHERE t."
        + tags.columnNames().tag()
        + " = ? AND "
        + eventId
        + " > ? AND "
        + eventId
        + " <= ? AND NOT j."
        + c.deleted()
        + " ORDER BY "
        + eventId
        + " LIMIT ?";
  }

  /**
   * At most {@code max} events (the read journal's buffer, 500) come back at once, so the rows are
   * read in one action and then emitted, as the plugin's own stream would.
   *
   * <p>A range with nothing in it ({@code offset >= maxOffset}) is answered without PostgreSQL. A
   * live query polls every {@code refresh-interval} (200 ms) up to the highest ordering its journal
   * sequence actor has seen, which moves once per {@code query-delay} (1 s); once a slice has read
   * up to it, the plugin asks again from there, for an empty range, until it moves. That was three
   * or four polls in five of each of the 17 slices, and every poll on an idle node.
   */
  @Override
  public Source<Try<Tuple3<PersistentRepr, Set<String>, Object>>, NotUsed> eventsByTag(
      String tag, long offset, long maxOffset, long max) {
    if (offset >= maxOffset) {
      skipped.increment();
      return org.apache.pekko.stream.javadsl.Source
          .<Try<Tuple3<PersistentRepr, Set<String>, Object>>>empty()
          .asScala();
    }
    SimpleJdbcAction<List<JournalPekkoSerializationRow>> query =
        new SimpleJdbcAction<>(ctx -> read(ctx.connection(), tag, offset, maxOffset, max));
    Set<String> noTags = Set$.MODULE$.empty(); // as the plugin's: the envelopes carry no tags
    return org.apache.pekko.stream.javadsl.Source.completionStage(
            FutureConverters.asJava(run(query)))
        .<JournalPekkoSerializationRow>mapConcat(rows -> rows)
        .map(
            row ->
                PekkoSerialization.fromRow(serialization, row)
                    .map(
                        r ->
                            new Tuple3<PersistentRepr, Set<String>, Object>(
                                r._1(), noTags, r._2())))
        .asScala();
  }

  /**
   * Slick's {@code run} takes an action whose effect type Java cannot name (see the journal DAO).
   */
  @SuppressWarnings({"unchecked", "rawtypes"})
  private Future<List<JournalPekkoSerializationRow>> run(
      SimpleJdbcAction<List<JournalPekkoSerializationRow>> query) {
    return db().run((DBIOAction) query);
  }

  private List<JournalPekkoSerializationRow> read(
      Connection connection, String tag, long offset, long maxOffset, long max) {
    queries.increment();
    try (PreparedStatement ps = connection.prepareStatement(eventsByTag)) {
      ps.setString(1, tag);
      ps.setLong(2, offset);
      ps.setLong(3, maxOffset);
      ps.setLong(4, max);
      List<JournalPekkoSerializationRow> rows = new ArrayList<>();
      try (ResultSet rs = ps.executeQuery()) {
        while (rs.next()) rows.add(row(rs));
      }
      return rows;
    } catch (SQLException e) {
      throw new JournalReadException(e);
    }
  }

  private static JournalPekkoSerializationRow row(ResultSet rs) throws SQLException {
    byte[] metaPayload = rs.getBytes(11);
    int metaSerId = rs.getInt(12);
    boolean noMetaSerId = rs.wasNull();
    String metaSerManifest = rs.getString(13);
    return new JournalPekkoSerializationRow(
        rs.getLong(1),
        rs.getBoolean(2),
        rs.getString(3),
        rs.getLong(4),
        rs.getString(5),
        rs.getLong(6),
        rs.getString(7),
        rs.getBytes(8),
        rs.getInt(9),
        rs.getString(10),
        Option.apply(metaPayload),
        noMetaSerId ? Option.empty() : Option.apply((Object) metaSerId),
        Option.apply(metaSerManifest));
  }

  /** A failed query fails the stream, as the plugin's does; the read journal retries it. */
  static final class JournalReadException extends RuntimeException {
    JournalReadException(SQLException cause) {
      super(cause.getMessage(), cause);
    }
  }
}
