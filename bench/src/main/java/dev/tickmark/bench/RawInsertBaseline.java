package dev.tickmark.bench;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.sql.Types;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;

/**
 * The ceiling the journal is compared with: plain JDBC batch inserts of rows shaped exactly like
 * the plugin's {@code event_journal} rows (same columns, primary key and unique ordering index, the
 * same serialized event as payload), on one connection, one transaction per batch, with {@code
 * reWriteBatchedInserts=true}. More variants take apart what tags cost: a batch that also returns
 * each row's generated {@code ordering}; that plus a batch of one {@code event_tag} row per event,
 * with the plugin's foreign key to the journal and without it (as Tickmark's since migration V20);
 * and what the plugin really does for tagged events (Slick never batches an insert that returns
 * keys): one {@code INSERT … RETURNING} round trip per row, then the tag batch, in one transaction
 * per batch.
 */
final class RawInsertBaseline {
  enum Variant {
    PLAIN("raw JDBC journal rows"),
    RETURNING("raw batch, RETURNING ordering"),
    TAGGED("raw batch RETURNING + tag rows"),
    TAGGED_NO_FK("the same, tags without foreign key"),
    ROW_BY_ROW("row-by-row RETURNING + tags (=plugin)");

    final String label;

    Variant(String label) {
      this.label = label;
    }
  }

  record Payload(byte[] bytes, int serializerId, String manifest) {}

  record Result(Variant variant, long rows, double seconds, CpuSample.Usage cpu) {
    double perSecond() {
      return rows / seconds;
    }
  }

  private static final String COLUMNS =
      "(deleted, persistence_id, sequence_number, writer, write_timestamp,"
          + " adapter_manifest, event_payload, event_ser_id, event_ser_manifest, meta_payload, meta_ser_id, meta_ser_manifest)";

  private RawInsertBaseline() {}

  static Result run(
      Connection c, String database, Variant variant, int rows, int batchSize, Payload payload)
      throws SQLException {
    String journal = "bench_raw_journal_" + variant.name().toLowerCase();
    String tags = "bench_raw_tag_" + variant.name().toLowerCase();
    try (Statement st = c.createStatement()) {
      st.execute("DROP TABLE IF EXISTS " + tags);
      st.execute("DROP TABLE IF EXISTS " + journal);
      st.execute(
          "CREATE TABLE "
              + journal
              + " (ordering BIGSERIAL, persistence_id VARCHAR(255) NOT NULL,"
              + " sequence_number BIGINT NOT NULL, deleted BOOLEAN DEFAULT FALSE NOT NULL, writer VARCHAR(255) NOT NULL,"
              + " write_timestamp BIGINT, adapter_manifest VARCHAR(255), event_ser_id INTEGER NOT NULL,"
              + " event_ser_manifest VARCHAR(255) NOT NULL, event_payload BYTEA NOT NULL, meta_ser_id INTEGER,"
              + " meta_ser_manifest VARCHAR(255), meta_payload BYTEA, PRIMARY KEY(persistence_id, sequence_number))");
      st.execute("CREATE UNIQUE INDEX " + journal + "_ordering_idx ON " + journal + "(ordering)");
      st.execute(
          "CREATE TABLE "
              + tags
              + " (event_id BIGINT, tag VARCHAR(256), PRIMARY KEY(event_id, tag)"
              + (variant == Variant.TAGGED_NO_FK
                  ? ")"
                  : ", FOREIGN KEY(event_id) REFERENCES "
                      + journal
                      + "(ordering) ON DELETE CASCADE)"));
    }
    String insert = "INSERT INTO " + journal + " " + COLUMNS + " VALUES (?,?,?,?,?,?,?,?,?,?,?,?)";
    boolean returning = variant != Variant.PLAIN;
    if (variant == Variant.ROW_BY_ROW) rows = Math.min(rows, 20_000); // a round trip per row: slow
    c.setAutoCommit(false);
    String writer = UUID.randomUUID().toString();
    int warmupBatches = variant == Variant.ROW_BY_ROW ? 2 : Math.max(1, 20_000 / batchSize);
    long[] sequence = {0};
    try (PreparedStatement ins =
            returning
                ? c.prepareStatement(insert, new String[] {"ordering"})
                : c.prepareStatement(insert);
        PreparedStatement tag =
            c.prepareStatement("INSERT INTO " + tags + " (event_id, tag) VALUES (?, ?)")) {
      // Warm the driver and the server (JIT, plan cache) on batches that are not counted.
      for (int b = 0; b < warmupBatches; b++)
        batch(c, ins, tag, variant, batchSize, sequence, writer, payload);
      CpuSample before = CpuSample.take(database);
      long t0 = System.nanoTime();
      long written = 0;
      while (written < rows) {
        int n = (int) Math.min(batchSize, rows - written);
        batch(c, ins, tag, variant, n, sequence, writer, payload);
        written += n;
      }
      long t1 = System.nanoTime();
      return new Result(variant, written, (t1 - t0) / 1e9, before.until(CpuSample.take(database)));
    } finally {
      c.setAutoCommit(true);
    }
  }

  private static void batch(
      Connection c,
      PreparedStatement ins,
      PreparedStatement tag,
      Variant variant,
      int n,
      long[] sequence,
      String writer,
      Payload payload)
      throws SQLException {
    // 1000 writers, like 1000 entities; within a batch the rows are in sequence-number order, as
    // the plugin sorts them.
    List<Long> orderings = new ArrayList<>(n);
    for (int i = 0; i < n; i++) {
      long k = sequence[0]++;
      ins.setBoolean(1, false);
      ins.setString(2, "Account|bench-raw-" + (k % 1000));
      ins.setLong(3, k / 1000 + 1);
      ins.setString(4, writer);
      ins.setLong(5, System.currentTimeMillis());
      ins.setString(6, "");
      ins.setBytes(7, payload.bytes());
      ins.setInt(8, payload.serializerId());
      ins.setString(9, payload.manifest());
      ins.setNull(10, Types.BINARY);
      ins.setNull(11, Types.INTEGER);
      ins.setNull(12, Types.VARCHAR);
      if (variant == Variant.ROW_BY_ROW) {
        ins.executeUpdate();
        readKeys(ins, orderings);
      } else {
        ins.addBatch();
      }
    }
    if (variant != Variant.ROW_BY_ROW) ins.executeBatch();
    boolean tagged = variant == Variant.TAGGED || variant == Variant.TAGGED_NO_FK;
    if (variant == Variant.RETURNING || tagged) readKeys(ins, orderings);
    if (tagged || variant == Variant.ROW_BY_ROW) {
      for (long ordering : orderings) {
        tag.setLong(1, ordering);
        tag.setString(2, "account-" + Math.floorMod(Long.hashCode(ordering), 4));
        tag.addBatch();
      }
      tag.executeBatch();
    }
    c.commit();
  }

  private static void readKeys(PreparedStatement ins, List<Long> into) throws SQLException {
    try (ResultSet keys = ins.getGeneratedKeys()) {
      while (keys.next()) into.add(keys.getLong(1));
    }
  }
}
