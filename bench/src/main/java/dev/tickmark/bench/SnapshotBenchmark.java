package dev.tickmark.bench;

import com.fasterxml.jackson.databind.JsonNode;
import dev.tickmark.agent.Agent;
import dev.tickmark.bench.MarketBenchSupport.Args;
import dev.tickmark.bench.MarketBenchSupport.BenchDatabase;
import dev.tickmark.bench.MarketBenchSupport.DbConfig;
import java.io.PrintStream;
import java.net.URI;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Locale;
import java.util.Random;

/**
 * Snapshot throughput through one node, against the raw PostgreSQL rate of the same bytes in the
 * same run, and how much a second snapshot of a mostly unchanged workspace stores again.
 *
 * <ol>
 *   <li>A real agent (in this JVM, simulated cards) runs a rental that writes {@code --mib} MiB of
 *       random bytes (incompressible: the archive is as large) into its workspace; the renter stops
 *       it with {@code snapshot: true}. Measured: stop → {@code ready} (archive, chunking, upload,
 *       completion) and the upload alone (first to last chunk stored, from the chunks' {@code
 *       stored_at}).
 *   <li>Baseline: the same number of 4 MiB random chunks inserted by JDBC into a table of the same
 *       shape, one transaction each (as the node stores a chunk), and read back.
 *   <li>Restore: a rental launched with {@code restore} (download, verify, unpack before the
 *       command); measured launch → running, and the download alone: every chunk fetched by this
 *       program through the node's restore endpoint with the host's credential.
 *   <li>Dedup: the restored rental adds a small file and is stopped with a snapshot again: the
 *       share of the second manifest's chunks (and bytes) the store did not have.
 * </ol>
 *
 * The node is a separate process ({@code dev.tickmark.node.Main}) on a fresh database.
 */
public final class SnapshotBenchmark {
  static {
    dev.tickmark.node.CommonPool.ensureParallelism();
  }

  private static final PrintStream OUT = System.out;
  private static final String OPERATOR = FailoverBenchmark.OPERATOR;
  private static final int CHUNK = 4 * 1024 * 1024;

  static final String USAGE =
      """
      Usage: SnapshotBenchmark [--option=value ...]
        --mib=N           size of the workspace's random file (default 256; the issue's figure: 1024)
        --changed-mib=N   size of the file added before the second snapshot (default 8)
        --node-heap=SIZE  -Xmx of the node (default 768m)
        --node-opts="-D..." extra JVM options for the node
        --db-url=URL --db-user=U --db-password=P --keep-database
      """;

  private SnapshotBenchmark() {}

  public static void main(String[] argv) throws Exception {
    MarketBenchSupport.quietLogs();
    Args args = new Args(argv);
    if (args.flag("help")) {
      OUT.print(USAGE);
      return;
    }
    int mib = args.integer("mib", 256);
    int changedMib = args.integer("changed-mib", 8);
    String heap = args.string("node-heap", "768m");
    String nodeOpts =
        "-Dtickmark.verification.min-disk-write-mib-per-s=10"
            + " -Dtickmark.snapshots.upload-reminder=1s "
            + args.string("node-opts", "");
    DbConfig dbConfig = DbConfig.of(args);
    args.requireEmpty();

    OUT.println("machine: " + MarketBenchSupport.machine());
    Path temp = Files.createTempDirectory("tickmark-snapshot-bench");
    FailoverBenchmark.Http http = new FailoverBenchmark.Http();
    Agent agent = null;
    try (BenchDatabase db = BenchDatabase.create(dbConfig, "tickmark_snapshots");
        FailoverBenchmark.Cluster cluster =
            new FailoverBenchmark.Cluster(
                db, 1, heap, nodeOpts, Path.of("target/snapshot-bench"))) {
      Runtime.getRuntime()
          .addShutdownHook(
              new Thread(
                  () -> {
                    for (Process p : cluster.processes) if (p != null) p.destroyForcibly();
                  }));
      long t0 = System.nanoTime();
      cluster.startAll();
      OUT.printf(Locale.ROOT, "node up in %.1f s%n", secondsSince(t0));
      String url = cluster.url(1);
      String providerKey =
          http.post(url + "/v1/accounts", null, "{\"name\":\"snapshot provider\"}", 201)
              .get("api_key")
              .asText();
      Path agentState = temp.resolve("agent");
      agent =
          SshBenchSupport.listedAgent(
              http, url, cluster.ws(1), providerKey, "h100-80gb:1", agentState);
      String credential = Files.readString(agentState.resolve("host-credential")).strip();
      String renter = SshBenchSupport.renter(http, url, OPERATOR, "snapshot renter");

      // 1. keep a workspace of mib MiB
      long bytes = (long) mib * 1024 * 1024;
      String first =
          launch(
              http,
              url,
              renter,
              "head -c " + bytes + " /dev/urandom > data.bin && echo written; sleep 3600",
              "");
      awaitLine(http, url, renter, first, "written", 600);
      long s0 = System.nanoTime();
      String snap1 = stopWithSnapshot(http, url, renter, first);
      JsonNode ready1 = awaitSnapshot(http, url, renter, snap1, 1800);
      double stopToReady = secondsSince(s0);
      long archive1 = ready1.get("size_bytes").asLong();
      double[] window1 = storedWindow(db, snap1);
      OUT.printf(
          Locale.ROOT,
          "snapshot %s: %d MiB workspace, archive %.1f MB in %d chunks; stop → ready %.1f s"
              + " (%.1f MB/s); chunks stored over %.1f s (%.1f MB/s)%n",
          snap1,
          mib,
          archive1 / 1e6,
          (int) window1[2],
          stopToReady,
          archive1 / 1e6 / stopToReady,
          window1[0],
          window1[1] / 1e6 / window1[0]);

      // 2. the raw PostgreSQL rate of the same bytes, in this run
      int chunks = (int) Math.ceil(archive1 / (double) CHUNK);
      double[] raw = rawPostgres(db, chunks);
      OUT.printf(
          Locale.ROOT,
          "raw PostgreSQL, %d × 4 MiB: insert (one transaction each) %.1f MB/s; read %.1f MB/s%n",
          chunks,
          raw[0],
          raw[1]);

      // 3. restore on launch, and the download alone
      long r0 = System.nanoTime();
      String second =
          launch(
              http,
              url,
              renter,
              "echo restored; head -c "
                  + (long) changedMib * 1024 * 1024
                  + " /dev/urandom > zz-changed.bin && echo changed; sleep 3600",
              ",\"restore\":\"" + snap1 + "\"");
      awaitStatus(http, url, renter, second, "running", 1800);
      double restoreSeconds = secondsSince(r0);
      awaitLine(http, url, renter, second, "changed", 600);
      double[] download = download(http, url, credential, second);
      OUT.printf(
          Locale.ROOT,
          "restore: launch → running %.1f s (%.1f MB/s of archive, download + verify + unpack);"
              + " download alone through the node %.1f MB/s%n",
          restoreSeconds,
          archive1 / 1e6 / restoreSeconds,
          download[0] / 1e6 / download[1]);

      // 4. a second snapshot of the mostly unchanged workspace
      String snap2 = stopWithSnapshot(http, url, renter, second);
      JsonNode ready2 = awaitSnapshot(http, url, renter, snap2, 1800);
      long[] again = storedAgain(db, snap1, snap2);
      OUT.printf(
          Locale.ROOT,
          "second snapshot %s (%d MiB added): %d of %d chunks stored again (%.1f %%),"
              + " %.1f of %.1f MB%n",
          snap2,
          changedMib,
          again[0],
          again[1],
          100.0 * again[0] / again[1],
          again[2] / 1e6,
          ready2.get("size_bytes").asLong() / 1e6);

      OUT.println();
      OUT.printf(Locale.ROOT, "SUMMARY %d MiB workspace, one node%n", mib);
      OUT.printf(
          Locale.ROOT,
          "| upload (chunks stored) | %.1f MB/s | ÷ raw insert %.2f |%n",
          window1[1] / 1e6 / window1[0],
          window1[1] / 1e6 / window1[0] / raw[0]);
      OUT.printf(
          Locale.ROOT,
          "| stop → ready (archive + upload) | %.1f MB/s | ÷ raw insert %.2f |%n",
          archive1 / 1e6 / stopToReady,
          archive1 / 1e6 / stopToReady / raw[0]);
      OUT.printf(
          Locale.ROOT,
          "| download through the node | %.1f MB/s | ÷ raw read %.2f |%n",
          download[0] / 1e6 / download[1],
          download[0] / 1e6 / download[1] / raw[1]);
      OUT.printf(
          Locale.ROOT,
          "| launch with restore → running | %.1f MB/s | ÷ raw read %.2f |%n",
          archive1 / 1e6 / restoreSeconds,
          archive1 / 1e6 / restoreSeconds / raw[1]);
      OUT.printf(
          Locale.ROOT,
          "| second snapshot stored again | %.1f %% of chunks | %.1f %% of bytes |%n",
          100.0 * again[0] / again[1],
          100.0 * again[2] / ready2.get("size_bytes").asLong());
      String note = String.format(Locale.ROOT, "%d MiB workspace, one node", mib);
      BenchResult.against(
              "snapshot",
              "snapshot.upload",
              "snapshot upload (chunks stored) ÷ raw 4 MiB inserts",
              window1[1] / 1e6 / window1[0],
              "MB/s",
              raw[0],
              "raw insert MB/s")
          .withNote(note)
          .print(OUT);
      BenchResult.against(
              "snapshot",
              "snapshot.download",
              "snapshot download through the node ÷ raw read",
              download[0] / 1e6 / download[1],
              "MB/s",
              raw[1],
              "raw read MB/s")
          .withNote(note)
          .print(OUT);
      BenchResult.against(
              "snapshot",
              "snapshot.restore",
              "launch with restore -> running ÷ raw read",
              archive1 / 1e6 / restoreSeconds,
              "MB/s",
              raw[1],
              "raw read MB/s")
          .withNote(note)
          .print(OUT);
    } finally {
      if (agent != null) agent.close();
    }
  }

  static String launch(
      FailoverBenchmark.Http http, String url, String renter, String script, String extra)
      throws Exception {
    String body =
        "{\"gpu\":\"h100-80gb\",\"count\":1,\"region\":\"eu-nl\",\"max_price_per_gpu_hour\":\"3.00\","
            + "\"image\":\"ubuntu:24.04\",\"wait_seconds\":600,\"command\":[\"sh\",\"-c\","
            + SshBenchSupport.json(script)
            + "]"
            + extra
            + "}";
    return http.post(url + "/v1/rentals", renter, body, 201).get("rental").get("id").asText();
  }

  static String stopWithSnapshot(
      FailoverBenchmark.Http http, String url, String renter, String rental) throws Exception {
    return http.post(url + "/v1/rentals/" + rental + "/stop", renter, "{\"snapshot\":true}", 202)
        .get("rental")
        .get("snapshot_id")
        .asText();
  }

  static void awaitLine(
      FailoverBenchmark.Http http,
      String url,
      String renter,
      String rental,
      String line,
      int seconds)
      throws Exception {
    long deadline = System.nanoTime() + seconds * 1_000_000_000L;
    while (System.nanoTime() < deadline) {
      JsonNode lines =
          SshBenchSupport.getAs(http, url + "/v1/rentals/" + rental + "/logs?tail=50", renter)
              .get("lines");
      for (JsonNode l : lines) if (l.get("text").asText().equals(line)) return;
      JsonNode r = SshBenchSupport.getAs(http, url + "/v1/rentals/" + rental, renter);
      if (r.get("status").asText().equals("ended"))
        throw new IllegalStateException("rental " + rental + " ended: " + r + " " + lines);
      Thread.sleep(250);
    }
    throw new IllegalStateException("no line \"" + line + "\" from " + rental);
  }

  static void awaitStatus(
      FailoverBenchmark.Http http,
      String url,
      String renter,
      String rental,
      String status,
      int seconds)
      throws Exception {
    long deadline = System.nanoTime() + seconds * 1_000_000_000L;
    JsonNode r = null;
    while (System.nanoTime() < deadline) {
      r = SshBenchSupport.getAs(http, url + "/v1/rentals/" + rental, renter);
      if (r.get("status").asText().equals(status)) return;
      if (r.get("status").asText().equals("ended"))
        throw new IllegalStateException("rental " + rental + " ended: " + r);
      Thread.sleep(100);
    }
    throw new IllegalStateException("rental " + rental + " not " + status + ": " + r);
  }

  static JsonNode awaitSnapshot(
      FailoverBenchmark.Http http, String url, String renter, String snapshot, int seconds)
      throws Exception {
    long deadline = System.nanoTime() + seconds * 1_000_000_000L;
    JsonNode s = null;
    while (System.nanoTime() < deadline) {
      s = SshBenchSupport.getAs(http, url + "/v1/snapshots/" + snapshot, renter);
      String status = s.get("status").asText();
      if (status.equals("ready")) return s;
      if (!status.equals("uploading"))
        throw new IllegalStateException("snapshot " + snapshot + " is " + status + ": " + s);
      Thread.sleep(100);
    }
    throw new IllegalStateException("snapshot " + snapshot + " not ready: " + s);
  }

  /** Seconds from the first to the last chunk of the snapshot stored, bytes, and chunk count. */
  static double[] storedWindow(BenchDatabase db, String snapshot) throws Exception {
    try (Connection c = DriverManager.getConnection(db.url, db.user, db.password);
        PreparedStatement st =
            c.prepareStatement(
                "SELECT EXTRACT(EPOCH FROM max(c.stored_at) - min(c.stored_at)), sum(c.size_bytes),"
                    + " count(*) FROM snapshot_manifests m JOIN snapshot_chunks c ON c.sha256 = m.sha256"
                    + " WHERE m.snapshot_id = ?")) {
      st.setString(1, snapshot);
      try (ResultSet rs = st.executeQuery()) {
        rs.next();
        int count = rs.getInt(3);
        // the window runs from the first chunk's commit to the last's: one chunk's worth is missing
        double seconds = rs.getDouble(1) * count / Math.max(1, count - 1);
        return new double[] {seconds, rs.getLong(2), count};
      }
    }
  }

  /** Chunks (and bytes) of {@code second}'s manifest that {@code first}'s did not name, and all. */
  static long[] storedAgain(BenchDatabase db, String first, String second) throws Exception {
    try (Connection c = DriverManager.getConnection(db.url, db.user, db.password);
        PreparedStatement st =
            c.prepareStatement(
                "SELECT count(*) FILTER (WHERE NOT EXISTS (SELECT 1 FROM snapshot_manifests o"
                    + "   WHERE o.snapshot_id = ? AND o.sha256 = m.sha256)),"
                    + " count(*),"
                    + " coalesce(sum(c.size_bytes) FILTER (WHERE NOT EXISTS (SELECT 1 FROM snapshot_manifests o"
                    + "   WHERE o.snapshot_id = ? AND o.sha256 = m.sha256)), 0)"
                    + " FROM snapshot_manifests m JOIN snapshot_chunks c ON c.sha256 = m.sha256"
                    + " WHERE m.snapshot_id = ?")) {
      st.setString(1, first);
      st.setString(2, first);
      st.setString(3, second);
      try (ResultSet rs = st.executeQuery()) {
        rs.next();
        return new long[] {rs.getLong(1), rs.getLong(2), rs.getLong(3)};
      }
    }
  }

  /**
   * MB/s of inserting {@code chunks} random 4 MiB chunks one transaction each, and reading them.
   */
  static double[] rawPostgres(BenchDatabase db, int chunks) throws Exception {
    Random random = new Random(42);
    byte[] data = new byte[CHUNK];
    try (Connection c = DriverManager.getConnection(db.url, db.user, db.password)) {
      try (Statement st = c.createStatement()) {
        st.execute(
            "CREATE TABLE bench_raw_chunks (sha256 TEXT PRIMARY KEY, data BYTEA NOT NULL,"
                + " size_bytes INTEGER NOT NULL, stored_at TIMESTAMPTZ NOT NULL DEFAULT now())");
      }
      List<String> names = new ArrayList<>();
      long w0 = System.nanoTime();
      try (PreparedStatement st =
          c.prepareStatement(
              "INSERT INTO bench_raw_chunks(sha256, data, size_bytes) VALUES (?, ?, ?)"
                  + " ON CONFLICT DO NOTHING")) {
        for (int i = 0; i < chunks; i++) {
          random.nextBytes(data);
          String sha = HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(data));
          names.add(sha);
          st.setString(1, sha);
          st.setBytes(2, data);
          st.setInt(3, data.length);
          st.executeUpdate(); // autocommit: one transaction a chunk, as the node's PUT
        }
      }
      double write = (double) chunks * CHUNK / 1e6 / secondsSince(w0);
      long r0 = System.nanoTime();
      long read = 0;
      try (PreparedStatement st =
          c.prepareStatement("SELECT data FROM bench_raw_chunks WHERE sha256 = ?")) {
        for (String sha : names) {
          st.setString(1, sha);
          try (ResultSet rs = st.executeQuery()) {
            rs.next();
            read += rs.getBytes(1).length;
          }
        }
      }
      double readRate = read / 1e6 / secondsSince(r0);
      try (Statement st = c.createStatement()) {
        st.execute("DROP TABLE bench_raw_chunks");
      }
      return new double[] {write, readRate};
    }
  }

  /** Every chunk of the rental's restore fetched through the node: bytes and seconds. */
  static double[] download(
      FailoverBenchmark.Http http, String url, String credential, String rental) throws Exception {
    JsonNode manifest =
        SshBenchSupport.getAs(http, url + "/v1/agent/rentals/" + rental + "/restore", credential);
    long bytes = 0;
    long d0 = System.nanoTime();
    for (JsonNode chunk : manifest.get("chunks")) {
      HttpResponse<byte[]> r =
          http.client.send(
              HttpRequest.newBuilder(
                      URI.create(
                          url
                              + "/v1/agent/rentals/"
                              + rental
                              + "/restore/chunks/"
                              + chunk.asText()))
                  .timeout(Duration.ofSeconds(60))
                  .header("Authorization", "Bearer " + credential)
                  .build(),
              HttpResponse.BodyHandlers.ofByteArray());
      if (r.statusCode() != 200)
        throw new IllegalStateException("chunk " + chunk + " answered " + r.statusCode());
      bytes += r.body().length;
    }
    return new double[] {bytes, secondsSince(d0)};
  }

  static double secondsSince(long nanos) {
    return (System.nanoTime() - nanos) / 1e9;
  }
}
