package dev.tickmark.persistence.journal;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
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
 * The plugin's journal DAO with one change: a batch of <em>tagged</em> events is written in one
 * statement instead of one round trip per event. pekko-persistence-jdbc 1.1 inserts tagged events
 * with {@code INSERT … RETURNING ordering} to learn the ids its {@code event_tag} rows point to,
 * and Slick never batches an insert that returns keys: every event is its own round trip (the
 * "row-by-row RETURNING + tags" baseline of {@code SettlementBenchmark}, a fifth of what batched
 * inserts reach). Every Tickmark event is tagged, so that was the write path of every settlement.
 *
 * <p>Here one statement per batch, hence one transaction and one round trip: a data-modifying
 * {@code WITH} inserts the batch's events from arrays, in batch order, and returns the {@code
 * ordering} each was given, and the same statement inserts every tag row against those orderings.
 * (It replaced two statements in an explicit transaction, events then tags found by primary key:
 * the same PostgreSQL time per event, two round trips more; docs/benchmarks.md.) Rows, columns,
 * orderings and tags are exactly what the plugin writes, so its read journal, recovery and
 * projections read them unchanged; the rows are sorted by sequence number first, as the plugin
 * sorts them, so one entity's events get increasing orderings. A batch without tags, reads and
 * deletes are the plugin's own code. Chosen with {@code jdbc-journal.dao}.
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

  private final String insertEventsAndTags;
  private final HighestSequenceNrs highestRead;

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
    highestRead = HighestSequenceNrs.of(serialization.system(), journalTable);
    String columns =
        String.join(
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
            c.metaSerManifest());
    // The events are inserted in array order (ORDER BY the ordinality), so their orderings follow
    // the batch's; the tag rows join what the insert returns, never the table.
    insertEventsAndTags =
        "WITH events AS (INSERT INTO "
            + journalTable
            + " ("
            + columns
            + ") SELECT "
            + columns
            + " FROM unnest(?::bool[], ?::varchar[], ?::int8[], ?::varchar[], ?::int8[],"
            + " ?::varchar[], ?::bytea[], ?::int4[], ?::varchar[], ?::bytea[], ?::int4[], ?::varchar[])"
            + " WITH ORDINALITY AS e("
            + columns
            + ", position) ORDER BY position RETURNING "
            + c.ordering()
            + ", "
            + c.persistenceId()
            + ", "
            + c.sequenceNumber()
            + ") INSERT INTO "
            + tagTable
            + " ("
            + tags.columnNames().eventId()
            + ", "
            + tags.columnNames().tag()
            + ") SELECT events."
            + c.ordering()
            + ", t.tag FROM unnest(?::varchar[], ?::int8[], ?::varchar[]) AS t(pid, seq, tag)"
            + " JOIN events ON events."
            + c.persistenceId()
            + " = t.pid AND events."
            + c.sequenceNumber()
            + " = t.seq";
  }

  /** A table's name as SQL names it: with its schema, if the plugin's configuration gives one. */
  static String qualified(Option<String> schema, String table) {
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
    // Tracked until done, so that a highest sequence number read meanwhile is not used
    // (HighestSequenceNrs). The journal queues one persist's rows at a time: one entity, as a rule.
    List<String> persistenceIds = new ArrayList<>(1);
    for (Iterator<Tuple2<JournalPekkoSerializationRow, Set<String>>> it = xs.iterator();
        it.hasNext(); ) {
      String pid = it.next()._1().persistenceId();
      if (!persistenceIds.contains(pid)) persistenceIds.add(pid);
    }
    for (String pid : persistenceIds) highestRead.writeQueued(pid);
    Future<BoxedUnit> written;
    try {
      written = super.queueWriteJournalRows(xs.toVector());
    } catch (RuntimeException e) {
      for (String pid : persistenceIds) highestRead.writeDone(pid);
      throw e;
    }
    written.onComplete(
        done -> {
          for (String pid : persistenceIds) highestRead.writeDone(pid);
          return null;
        },
        HighestSequenceNrs.ON_COMPLETING_THREAD);
    return written;
  }

  /**
   * The number a recovery's snapshot read found with its snapshot ({@link RecoverySnapshotDao}), if
   * no write of this journal can have moved it since; else the plugin's own query.
   */
  @Override
  public Future<Object> highestSequenceNr(String persistenceId, long fromSequenceNr) {
    Long read = highestRead.take(persistenceId);
    return read != null
        ? Future.successful(read)
        : super.highestSequenceNr(persistenceId, fromSequenceNr);
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

  /**
   * The batch's events and tags in one statement, hence one transaction and one round trip: the
   * events from arrays in batch order, each given its {@code ordering} as it is inserted, and the
   * tag rows from the orderings the insert returns.
   */
  void write(Connection connection, List<Row> rows) throws SQLException {
    int n = rows.size();
    int tagCount = 0;
    for (Row r : rows) tagCount += r.tags().size();
    boolean[] deleted = new boolean[n];
    long[] seqs = new long[n], stamps = new long[n];
    int[] serIds = new int[n];
    Integer[] metaSerIds = new Integer[n];
    String[] pids = new String[n], writers = new String[n], adapters = new String[n];
    String[] manifests = new String[n], metaManifests = new String[n];
    byte[][] payloads = new byte[n][], metaPayloads = new byte[n][];
    String[] tagPids = new String[tagCount], tagNames = new String[tagCount];
    long[] tagSeqs = new long[tagCount];
    for (int i = 0, t = 0; i < n; i++) {
      JournalPekkoSerializationRow e = rows.get(i).row();
      deleted[i] = e.deleted();
      pids[i] = e.persistenceId();
      seqs[i] = e.sequenceNumber();
      writers[i] = e.writer();
      stamps[i] = e.writeTimestamp();
      adapters[i] = e.adapterManifest();
      payloads[i] = e.eventPayload();
      serIds[i] = e.eventSerId();
      manifests[i] = e.eventSerManifest();
      metaPayloads[i] = e.metaPayload().isDefined() ? e.metaPayload().get() : null;
      metaSerIds[i] = e.metaSerId().isDefined() ? (Integer) e.metaSerId().get() : null;
      metaManifests[i] = e.metaSerManifest().isDefined() ? e.metaSerManifest().get() : null;
      for (String tag : rows.get(i).tags()) {
        tagPids[t] = e.persistenceId();
        tagSeqs[t] = e.sequenceNumber();
        tagNames[t++] = tag;
      }
    }
    // Java arrays go to the driver as they are (setObject): it encodes them by their Java type,
    // most in binary, without the type-name lookup of createArrayOf (4 % of a node's CPU at 150
    // launches/s, under JFR).
    Object[] columns = {
      deleted,
      pids,
      seqs,
      writers,
      stamps,
      adapters,
      payloads,
      serIds,
      manifests,
      metaPayloads,
      metaSerIds,
      metaManifests,
      tagPids,
      tagSeqs,
      tagNames
    };
    try (PreparedStatement ps = connection.prepareStatement(insertEventsAndTags)) {
      for (int c = 0; c < columns.length; c++) ps.setObject(c + 1, columns[c]);
      int inserted = ps.executeUpdate();
      if (inserted != tagCount)
        throw new SQLException(
            "wrote "
                + inserted
                + " of "
                + tagCount
                + " tag rows: an event of the batch is missing");
      if (!connection.getAutoCommit()) connection.commit();
      TAGGED_BATCHES.increment();
      TAGGED_EVENTS.add(n);
    } catch (SQLException | RuntimeException e) {
      if (!connection.getAutoCommit()) {
        try {
          connection.rollback();
        } catch (SQLException rollback) {
          e.addSuppressed(rollback);
        }
      }
      throw e;
    }
  }

  /** A failed batch: the plugin fails every write in it, as for its own batches. */
  static final class JournalWriteException extends RuntimeException {
    JournalWriteException(SQLException cause) {
      super(cause.getMessage(), cause);
    }
  }
}
