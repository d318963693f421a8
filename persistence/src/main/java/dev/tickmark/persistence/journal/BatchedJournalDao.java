package dev.tickmark.persistence.journal;

import java.sql.Array;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.sql.Types;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.atomic.LongAdder;
import org.apache.pekko.persistence.jdbc.config.EventJournalTableColumnNames;
import org.apache.pekko.persistence.jdbc.config.EventJournalTableConfiguration;
import org.apache.pekko.persistence.jdbc.config.EventTagTableConfiguration;
import org.apache.pekko.persistence.jdbc.config.JournalConfig;
import org.apache.pekko.persistence.jdbc.journal.dao.DefaultJournalDao;
import org.apache.pekko.persistence.jdbc.journal.dao.JournalTables.JournalPekkoSerializationRow;
import org.apache.pekko.serialization.Serialization;
import org.apache.pekko.stream.Materializer;
import scala.Option;
import scala.Tuple2;
import scala.collection.Iterator;
import scala.collection.immutable.Seq;
import scala.collection.immutable.Set;
import scala.concurrent.ExecutionContext;
import scala.concurrent.Future;
import scala.runtime.BoxedUnit;
import slick.dbio.DBIOAction;
import slick.jdbc.JdbcBackend;
import slick.jdbc.JdbcProfile;
import slick.jdbc.SimpleJdbcAction;

/**
 * The plugin's journal DAO with one change: a batch of <em>tagged</em> events is written in two
 * statements instead of one round trip per event. pekko-persistence-jdbc 1.1 inserts tagged events
 * with {@code INSERT … RETURNING ordering} to learn the ids its {@code event_tag} rows point to,
 * and Slick never batches an insert that returns keys: every event is its own round trip (the
 * "row-by-row RETURNING + tags" baseline of {@code SettlementBenchmark}, a fifth of what batched
 * inserts reach). Every Tickmark event is tagged, so that was the write path of every settlement.
 *
 * <p>Here one transaction per batch, as the plugin's: the events as one JDBC batch without {@code
 * RETURNING} (the driver's {@code reWriteBatchedInserts} makes it multi-row inserts), then every
 * tag row of the batch in one {@code INSERT … SELECT} that finds each event's {@code ordering} by
 * its primary key ({@code persistence_id, sequence_number}) from arrays. Rows, columns, orderings
 * and tags are exactly what the plugin writes, so its read journal, recovery and projections read
 * them unchanged; the rows are sorted by sequence number first, as the plugin sorts them, so one
 * entity's events get increasing orderings. A batch without tags, reads and deletes are the
 * plugin's own code. Chosen with {@code jdbc-journal.dao}.
 */
public class BatchedJournalDao extends DefaultJournalDao {
  private static final LongAdder TAGGED_BATCHES = new LongAdder();
  private static final LongAdder TAGGED_EVENTS = new LongAdder();

  /** Batches of tagged events this JVM's journals wrote in two statements. */
  public static long taggedBatchesWritten() {
    return TAGGED_BATCHES.sum();
  }

  /** The events in {@link #taggedBatchesWritten}. */
  public static long taggedEventsWritten() {
    return TAGGED_EVENTS.sum();
  }

  private final String insertEvents;
  private final String insertTags;

  public BatchedJournalDao(
      JdbcBackend.JdbcDatabaseDef db,
      JdbcProfile profile,
      JournalConfig journalConfig,
      Serialization serialization,
      ExecutionContext ec,
      Materializer mat) {
    super(db, profile, journalConfig, serialization, ec, mat);
    EventJournalTableConfiguration journal = journalConfig.eventJournalTableConfiguration();
    EventTagTableConfiguration tags = journalConfig.eventTagTableConfiguration();
    EventJournalTableColumnNames c = journal.columnNames();
    String journalTable = qualified(journal.schemaName(), journal.tableName());
    String tagTable = qualified(tags.schemaName(), tags.tableName());
    insertEvents =
        "INSERT INTO "
            + journalTable
            + " ("
            + String.join(
                ", ",
                c.deleted(),
                c.persistenceId(),
                c.sequenceNumber(),
                c.writer(),
                c.writeTimestamp(),
                c.adapterManifest(),
                c.eventPayload(),
                c.eventSerId(),
                c.eventSerManifest(),
                c.metaPayload(),
                c.metaSerId(),
                c.metaSerManifest())
            + ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";
    insertTags =
        "INSERT INTO "
            + tagTable
            + " ("
            + tags.columnNames().eventId()
            + ", "
            + tags.columnNames().tag()
            + ") SELECT j."
            + c.ordering()
            + ", t.tag FROM unnest(?::varchar[], ?::bigint[], ?::varchar[]) AS t(pid, seq, tag)"
            + " JOIN "
            + journalTable
            + " j ON j."
            + c.persistenceId()
            + " = t.pid AND j."
            + c.sequenceNumber()
            + " = t.seq";
  }

  private static String qualified(Option<String> schema, String table) {
    return schema.isDefined() && !schema.get().isEmpty() ? schema.get() + "." + table : table;
  }

  /**
   * The plugin's write queue gathers what is queued while a write runs into one batch by appending
   * each request's rows to the first one's ({@code rows ++ newRows}): with the first a {@code
   * List}, as the plugin passes them, that copies the whole batch on every append, quadratic in the
   * batch (5 % of a node's CPU under settlement load, {@code SettlementBenchmark} under JFR). As a
   * {@code Vector} the append is amortized constant per row.
   */
  @Override
  public Future<BoxedUnit> queueWriteJournalRows(
      Seq<Tuple2<JournalPekkoSerializationRow, Set<String>>> xs) {
    return super.queueWriteJournalRows(xs.toVector());
  }

  /** One event row and its tags, in Java terms. */
  record Row(JournalPekkoSerializationRow row, List<String> tags) {}

  @Override
  public Future<BoxedUnit> writeJournalRows(
      Seq<Tuple2<JournalPekkoSerializationRow, Set<String>>> xs) {
    List<Row> rows = new ArrayList<>(xs.size());
    boolean tagged = false;
    for (Iterator<Tuple2<JournalPekkoSerializationRow, Set<String>>> it = xs.iterator();
        it.hasNext(); ) {
      Tuple2<JournalPekkoSerializationRow, Set<String>> x = it.next();
      List<String> tags = new ArrayList<>(x._2().size());
      for (Iterator<String> t = x._2().iterator(); t.hasNext(); ) tags.add(t.next());
      tagged |= !tags.isEmpty();
      rows.add(new Row(x._1(), tags));
    }
    if (!tagged) return super.writeJournalRows(xs); // the plugin batches untagged rows already
    rows.sort(Comparator.comparingLong(r -> r.row().sequenceNumber())); // stable, as the plugin's
    SimpleJdbcAction<BoxedUnit> write =
        new SimpleJdbcAction<>(
            ctx -> {
              try {
                write(ctx.connection(), rows);
              } catch (SQLException e) {
                throw new JournalWriteException(e);
              }
              return BoxedUnit.UNIT;
            });
    return run(write);
  }

  /**
   * Slick's {@code run} takes an action whose effect type is {@code Nothing}, which Java cannot
   * name within the parameter's bounds; the effect type exists at compile time only.
   */
  @SuppressWarnings({"unchecked", "rawtypes"})
  private Future<BoxedUnit> run(SimpleJdbcAction<BoxedUnit> write) {
    return db().run((DBIOAction) write);
  }

  /** The batch's events and tags in one transaction. */
  void write(Connection connection, List<Row> rows) throws SQLException {
    boolean autoCommit = connection.getAutoCommit();
    connection.setAutoCommit(false);
    try {
      insertEvents(connection, rows);
      insertTags(connection, rows);
      connection.commit();
      TAGGED_BATCHES.increment();
      TAGGED_EVENTS.add(rows.size());
    } catch (SQLException | RuntimeException e) {
      try {
        connection.rollback();
      } catch (SQLException rollback) {
        e.addSuppressed(rollback);
      }
      throw e;
    } finally {
      connection.setAutoCommit(autoCommit);
    }
  }

  private void insertEvents(Connection connection, List<Row> rows) throws SQLException {
    try (PreparedStatement ps = connection.prepareStatement(insertEvents)) {
      for (Row r : rows) {
        JournalPekkoSerializationRow e = r.row();
        ps.setBoolean(1, e.deleted());
        ps.setString(2, e.persistenceId());
        ps.setLong(3, e.sequenceNumber());
        ps.setString(4, e.writer());
        ps.setLong(5, e.writeTimestamp());
        ps.setString(6, e.adapterManifest());
        ps.setBytes(7, e.eventPayload());
        ps.setInt(8, e.eventSerId());
        ps.setString(9, e.eventSerManifest());
        if (e.metaPayload().isDefined()) ps.setBytes(10, e.metaPayload().get());
        else ps.setNull(10, Types.BINARY);
        if (e.metaSerId().isDefined()) ps.setInt(11, (Integer) e.metaSerId().get());
        else ps.setNull(11, Types.INTEGER);
        if (e.metaSerManifest().isDefined()) ps.setString(12, e.metaSerManifest().get());
        else ps.setNull(12, Types.VARCHAR);
        ps.addBatch();
      }
      ps.executeBatch();
    }
  }

  private void insertTags(Connection connection, List<Row> rows) throws SQLException {
    List<String> pids = new ArrayList<>();
    List<Long> seqs = new ArrayList<>();
    List<String> tags = new ArrayList<>();
    for (Row r : rows) {
      for (String tag : r.tags()) {
        pids.add(r.row().persistenceId());
        seqs.add(r.row().sequenceNumber());
        tags.add(tag);
      }
    }
    Array pidArray = connection.createArrayOf("varchar", pids.toArray());
    Array seqArray = connection.createArrayOf("bigint", seqs.toArray());
    Array tagArray = connection.createArrayOf("varchar", tags.toArray());
    try (PreparedStatement ps = connection.prepareStatement(insertTags)) {
      ps.setArray(1, pidArray);
      ps.setArray(2, seqArray);
      ps.setArray(3, tagArray);
      int inserted = ps.executeUpdate();
      if (inserted != tags.size())
        throw new SQLException(
            "wrote "
                + inserted
                + " of "
                + tags.size()
                + " tag rows: an event of the batch is missing");
    } finally {
      pidArray.free();
      seqArray.free();
      tagArray.free();
    }
  }

  /** A failed batch: the plugin fails every write in it, as for its own batches. */
  static final class JournalWriteException extends RuntimeException {
    JournalWriteException(SQLException cause) {
      super(cause.getMessage(), cause);
    }
  }
}
