package dev.tickmark.bench;

import dev.tickmark.engine.metrics.LatencyHistogram;
import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * What {@link AgentHeartbeatBenchmark} and {@link MarketBenchmark} share: argument parsing, a fresh
 * database per run (created, ANALYZEd while autovacuum is off, dropped), the raw JDBC batch-insert
 * baseline, windowed quantiles of the node's cumulative {@link LatencyHistogram}s, a process's CPU
 * time from {@code /proc}, and heap after GC.
 */
final class MarketBenchSupport {
  private MarketBenchSupport() {}

  /**
   * Logs WARN and above from the node, ERROR from Pekko's internals (a loaded node logs a warning
   * per retried projection query), unless {@code -Dlogback.configurationFile} names another
   * configuration. Must run before the first logger is made.
   */
  static void quietLogs() {
    if (System.getProperty("logback.configurationFile") != null) return;
    try {
      Path f = Files.createTempFile("tickmark-bench-logback", ".xml");
      f.toFile().deleteOnExit();
      Files.writeString(
          f,
          """
          <configuration>
            <appender name="OUT" class="ch.qos.logback.core.ConsoleAppender">
              <encoder><pattern>%d{HH:mm:ss.SSS} %-5level %logger{24} - %msg%n</pattern></encoder>
            </appender>
            <logger name="org.apache.pekko" level="ERROR"/>
            <logger name="slick" level="ERROR"/>
            <logger name="com.zaxxer" level="ERROR"/>
            <root level="WARN"><appender-ref ref="OUT"/></root>
          </configuration>
          """);
      System.setProperty("logback.configurationFile", f.toString());
    } catch (IOException e) {
      // keep the default configuration
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Arguments: --name=value (or --name value); flags without a value are "true".

  static final class Args {
    private final Map<String, String> values = new LinkedHashMap<>();

    Args(String[] args) {
      for (int i = 0; i < args.length; i++) {
        String a = args[i];
        if (!a.startsWith("--")) throw new IllegalArgumentException("unexpected argument " + a);
        int eq = a.indexOf('=');
        if (eq > 0) {
          values.put(a.substring(2, eq), a.substring(eq + 1));
        } else if (i + 1 < args.length && !args[i + 1].startsWith("--")) {
          values.put(a.substring(2), args[++i]);
        } else {
          values.put(a.substring(2), "true");
        }
      }
    }

    boolean has(String name) {
      return values.containsKey(name);
    }

    String string(String name, String fallback) {
      String v = values.remove(name);
      return v == null || v.isBlank() ? fallback : v;
    }

    int integer(String name, int fallback) {
      String v = values.remove(name);
      return v == null ? fallback : Integer.parseInt(v.trim().replace("_", ""));
    }

    boolean flag(String name) {
      String v = values.remove(name);
      return v != null && !v.equals("false");
    }

    int[] integers(String name, String fallback) {
      String v = string(name, fallback);
      if (v.equals("none") || v.isBlank()) return new int[0];
      return Arrays.stream(v.split(","))
          .map(String::trim)
          .filter(s -> !s.isEmpty())
          .mapToInt(s -> Integer.parseInt(s.replace("_", "").replace("k", "000")))
          .toArray();
    }

    void requireEmpty() {
      if (!values.isEmpty())
        throw new IllegalArgumentException("unknown option(s) " + values.keySet());
    }
  }

  static String firstNonBlank(String... values) {
    for (String v : values) if (v != null && !v.isBlank()) return v;
    return null;
  }

  // ---------------------------------------------------------------------------------------------
  // A fresh database on the server the admin url points at.

  /**
   * Where to create databases: --db-url/--db-user/--db-password, else
   * TICKMARK_DB_URL/_USER/_PASSWORD, else the local server.
   */
  record DbConfig(String adminUrl, String user, String password, boolean keep) {
    static DbConfig of(Args args) {
      Map<String, String> env = System.getenv();
      String adminUrl =
          firstNonBlank(
              args.string("db-url", null),
              env.get("TICKMARK_BENCH_DB_URL"),
              env.get("TICKMARK_DB_URL"),
              "jdbc:postgresql://127.0.0.1:5432/postgres");
      String user =
          firstNonBlank(args.string("db-user", null), env.get("TICKMARK_DB_USER"), "postgres");
      String password =
          firstNonBlank(args.string("db-password", null), env.get("TICKMARK_DB_PASSWORD"), "");
      return new DbConfig(adminUrl, user, password, args.flag("keep-database"));
    }
  }

  static final class BenchDatabase implements AutoCloseable {
    final String adminUrl;
    final String user;
    final String password;
    final String name;
    final String url;
    final String autovacuum;
    final String serverVersion;
    private ScheduledExecutorService analyzer;
    private AutovacuumStandIn autovacuumStandIn;
    private Connection analyzeConnection;
    private boolean analyzeWholeDatabase;
    private int analyzeRuns;
    private int analyzeRunsThatAnalyzed;
    private int tablesAnalyzed;
    private long analyzeNanos;
    private final boolean keep;

    private BenchDatabase(
        String adminUrl,
        String user,
        String password,
        String name,
        String autovacuum,
        String version,
        boolean keep) {
      this.adminUrl = adminUrl;
      this.user = user;
      this.password = password;
      this.name = name;
      this.url = databaseUrl(adminUrl, name);
      this.autovacuum = autovacuum;
      this.serverVersion = version;
      this.keep = keep;
    }

    static BenchDatabase create(DbConfig config, String prefix) throws SQLException {
      String adminUrl = config.adminUrl();
      String user = config.user();
      String password = config.password();
      boolean keep = config.keep();
      String name = prefix + "_" + HexFormat.of().formatHex(new SecureRandom().generateSeed(4));
      try (Connection admin = DriverManager.getConnection(adminUrl, user, password);
          Statement st = admin.createStatement()) {
        String version = admin.getMetaData().getDatabaseProductVersion();
        String autovacuum = "?";
        try (ResultSet rs = st.executeQuery("SHOW autovacuum")) {
          if (rs.next()) autovacuum = rs.getString(1);
        }
        st.execute("CREATE DATABASE " + name);
        return new BenchDatabase(adminUrl, user, password, name, autovacuum, version, keep);
      }
    }

    /**
     * Transactions committed or rolled back in this database so far, as PostgreSQL's statistics
     * show them (each backend reports within about a second, so a window of many seconds read at
     * both ends is counted fairly); -1 if they cannot be read. A read-side query in auto-commit is
     * one transaction, so this counts the round trips that commit.
     */
    long transactions() {
      try (Connection c = DriverManager.getConnection(adminUrl, user, password);
          PreparedStatement st =
              c.prepareStatement(
                  "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = ?")) {
        st.setString(1, name);
        try (ResultSet rs = st.executeQuery()) {
          return rs.next() ? rs.getLong(1) : -1;
        }
      } catch (SQLException e) {
        return -1;
      }
    }

    /**
     * With autovacuum off (as on this project's CI server) nothing refreshes the planner's
     * statistics, and the read journal's cached eventsByTag plan degrades into scans as the journal
     * grows: every {@code seconds}, stand in for autoanalyze. {@code wholeDatabase}: a plain {@code
     * ANALYZE} of every table, unthrottled, as the benchmark did until 2026-12-06; otherwise as
     * autoanalyze itself would with the server's settings: only the tables with more rows changed
     * since their last analyze than {@code autovacuum_analyze_threshold +
     * autovacuum_analyze_scale_factor × rows}, throttled by autovacuum's cost delay and limit.
     */
    /**
     * With autovacuum off (as on this project's CI server), do what autovacuum would: see {@link
     * AutovacuumStandIn}.
     */
    void standInForAutovacuum() throws SQLException {
      if ("off".equals(autovacuum))
        autovacuumStandIn = AutovacuumStandIn.start(url, user, password);
    }

    /** The autovacuum stand-in's looks that did work within the window; none without it. */
    List<NanoInterval> standInWorkWithin(NanoInterval window) {
      return autovacuumStandIn == null ? List.of() : autovacuumStandIn.workWithin(window);
    }

    void analyzeEvery(int seconds, boolean wholeDatabase) throws SQLException {
      if (seconds <= 0 || !"off".equals(autovacuum)) return;
      analyzeConnection = DriverManager.getConnection(url, user, password);
      analyzeWholeDatabase = wholeDatabase;
      if (!wholeDatabase) {
        try (Statement st = analyzeConnection.createStatement()) {
          AutovacuumStandIn.throttleAsAutovacuum(st);
        }
      }
      analyzer =
          Executors.newSingleThreadScheduledExecutor(
              r -> {
                Thread t = new Thread(r, "bench-analyze");
                t.setDaemon(true);
                return t;
              });
      analyzer.scheduleWithFixedDelay(
          () -> {
            long t0 = System.nanoTime();
            try (Statement st = analyzeConnection.createStatement()) {
              int tables = 0;
              if (wholeDatabase) {
                st.execute("ANALYZE");
              } else {
                for (String table : tablesDueForAnalyze(st)) {
                  st.execute("ANALYZE " + table);
                  tables++;
                }
              }
              synchronized (this) {
                analyzeRuns++;
                if (tables > 0) analyzeRunsThatAnalyzed++;
                tablesAnalyzed += tables;
                analyzeNanos += System.nanoTime() - t0;
              }
            } catch (SQLException e) {
              System.out.println("# ANALYZE failed: " + e.getMessage());
            }
          },
          1,
          seconds,
          TimeUnit.SECONDS);
    }

    /** The tables autoanalyze would analyze now: as {@code relation_needs_vacanalyze} decides. */
    private static List<String> tablesDueForAnalyze(Statement st) throws SQLException {
      return AutovacuumStandIn.due(st).stream()
          .filter(AutovacuumStandIn.Due::analyze)
          .map(AutovacuumStandIn.Due::table)
          .toList();
    }

    synchronized String analyzeSummary() {
      if (autovacuumStandIn != null)
        return "autovacuum=off, so the benchmark stood in for it " + autovacuumStandIn.summary();
      if (analyzer == null) return "autovacuum=" + autovacuum + ", the benchmark ran no ANALYZE";
      double each = analyzeRuns == 0 ? 0.0 : analyzeNanos / 1e6 / analyzeRuns;
      if (analyzeWholeDatabase)
        return String.format(
            Locale.ROOT,
            "autovacuum=%s, so the benchmark ran ANALYZE on the whole database %d times (%.0f ms"
                + " each on average)",
            autovacuum,
            analyzeRuns,
            each);
      return String.format(
          Locale.ROOT,
          "autovacuum=%s, so the benchmark looked %d times for the tables autoanalyze would analyze,"
              + " and analyzed %d tables in %d of those looks (%.0f ms each look on average)",
          autovacuum,
          analyzeRuns,
          tablesAnalyzed,
          analyzeRunsThatAnalyzed,
          each);
    }

    void stopAnalyzer() {
      if (autovacuumStandIn != null) autovacuumStandIn.close();
      if (analyzer == null) return;
      analyzer.shutdownNow();
      try {
        analyzer.awaitTermination(30, TimeUnit.SECONDS);
        analyzeConnection.close();
      } catch (InterruptedException | SQLException e) {
        // best effort
      }
    }

    /** The journal's highest ordering: events written so far (the sequence never goes back). */
    long journalOrdering() {
      try (Connection c = DriverManager.getConnection(url, user, password);
          Statement st = c.createStatement();
          ResultSet rs = st.executeQuery("SELECT COALESCE(MAX(ordering), 0) FROM event_journal")) {
        return rs.next() ? rs.getLong(1) : 0;
      } catch (SQLException e) {
        return -1;
      }
    }

    /**
     * The write path's ceiling on this server: {@code rows} rows shaped like journal rows (a text
     * key, a sequence number, a 200-byte payload, unique ordering), inserted into a scratch table
     * on one connection in JDBC batches of {@code batch} with {@code reWriteBatchedInserts=true},
     * one transaction per batch. Rows per second.
     */
    double rawInsertRowsPerSecond(int rows, int batch) throws SQLException {
      String tuned = url + (url.contains("?") ? "&" : "?") + "reWriteBatchedInserts=true";
      try (Connection c = DriverManager.getConnection(tuned, user, password)) {
        try (Statement st = c.createStatement()) {
          st.execute("DROP TABLE IF EXISTS bench_raw_rows");
          st.execute(
              "CREATE TABLE bench_raw_rows (ordering BIGSERIAL UNIQUE, persistence_id VARCHAR(255) NOT NULL,"
                  + " sequence_number BIGINT NOT NULL, write_timestamp BIGINT, payload BYTEA NOT NULL,"
                  + " PRIMARY KEY (persistence_id, sequence_number))");
        }
        byte[] payload = new byte[200];
        new SecureRandom().nextBytes(payload);
        c.setAutoCommit(false);
        long seq = 0;
        try (PreparedStatement ins =
            c.prepareStatement(
                "INSERT INTO bench_raw_rows (persistence_id, sequence_number, write_timestamp, payload) VALUES (?,?,?,?)")) {
          long t0 = 0;
          int warm = Math.max(1, 20_000 / batch);
          long measured = 0;
          for (int b = 0; measured < rows; b++) {
            if (b == warm) t0 = System.nanoTime();
            for (int i = 0; i < batch; i++, seq++) {
              ins.setString(1, "Rental|raw-" + (seq % 1000));
              ins.setLong(2, seq / 1000 + 1);
              ins.setLong(3, System.currentTimeMillis());
              ins.setBytes(4, payload);
              ins.addBatch();
            }
            ins.executeBatch();
            c.commit();
            if (b >= warm) measured += batch;
          }
          return measured / ((System.nanoTime() - t0) / 1e9);
        } finally {
          c.setAutoCommit(true);
          try (Statement st = c.createStatement()) {
            st.execute("DROP TABLE IF EXISTS bench_raw_rows");
          }
        }
      }
    }

    @Override
    public void close() {
      stopAnalyzer();
      if (keep) {
        System.out.println("Kept database " + name);
        return;
      }
      try (Connection admin = DriverManager.getConnection(adminUrl, user, password);
          Statement st = admin.createStatement()) {
        try {
          st.execute("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)");
        } catch (SQLException olderServer) {
          st.execute("DROP DATABASE IF EXISTS " + name);
        }
        System.out.println("Dropped database " + name);
      } catch (SQLException e) {
        System.out.println("Could not drop " + name + ": " + e.getMessage());
      }
    }
  }

  private static final Pattern JDBC_URL =
      Pattern.compile("^(jdbc:postgresql://[^/?]*)(/[^?]*)?(\\?.*)?$");

  static String databaseUrl(String adminUrl, String database) {
    Matcher m = JDBC_URL.matcher(adminUrl);
    if (!m.matches()) throw new IllegalArgumentException("not a PostgreSQL JDBC url: " + adminUrl);
    return m.group(1) + "/" + database + (m.group(3) == null ? "" : m.group(3));
  }

  // ---------------------------------------------------------------------------------------------
  // Windows over the node's cumulative histograms.

  /**
   * A copy of a {@link LatencyHistogram}'s bucket counts. The histogram only answers quantiles
   * since the node started; two snapshots give the quantiles of what was recorded between them.
   * Reads the private bucket array by reflection (benchmark code, same class path), so the bucket
   * layout stays the histogram's own.
   */
  record HistogramSnapshot(long[] counts) {
    private static final Field COUNTS;
    private static final Method UPPER_BOUND;

    static {
      try {
        COUNTS = LatencyHistogram.class.getDeclaredField("counts");
        COUNTS.setAccessible(true);
        UPPER_BOUND = LatencyHistogram.class.getDeclaredMethod("upperBound", int.class);
        UPPER_BOUND.setAccessible(true);
      } catch (ReflectiveOperationException e) {
        throw new ExceptionInInitializerError(e);
      }
    }

    static HistogramSnapshot of(LatencyHistogram h) {
      try {
        AtomicLongArray a = (AtomicLongArray) COUNTS.get(h);
        long[] c = new long[a.length()];
        for (int i = 0; i < c.length; i++) c[i] = a.get(i);
        return new HistogramSnapshot(c);
      } catch (IllegalAccessException e) {
        throw new IllegalStateException(e);
      }
    }

    /** What was recorded after {@code earlier} and up to this snapshot. */
    HistogramSnapshot minus(HistogramSnapshot earlier) {
      long[] d = new long[counts.length];
      for (int i = 0; i < d.length; i++) d[i] = counts[i] - earlier.counts[i];
      return new HistogramSnapshot(d);
    }

    long count() {
      long n = 0;
      for (long c : counts) n += c;
      return n;
    }

    /** Upper bound of the bucket holding quantile {@code q}, in µs (within ~6 %); 0 when empty. */
    long quantileMicros(double q) {
      long n = count();
      if (n == 0) return 0;
      long rank = Math.max(1, (long) Math.ceil(q * n));
      long seen = 0;
      for (int i = 0; i < counts.length; i++) {
        seen += counts[i];
        if (seen >= rank) return upperBound(i);
      }
      return upperBound(counts.length - 1);
    }

    long maxMicros() {
      for (int i = counts.length - 1; i >= 0; i--) if (counts[i] > 0) return upperBound(i);
      return 0;
    }

    private static long upperBound(int index) {
      try {
        return (long) UPPER_BOUND.invoke(null, index);
      } catch (ReflectiveOperationException e) {
        throw new IllegalStateException(e);
      }
    }
  }

  /** Quantile of sorted values (nearest rank). */
  static long quantile(long[] sorted, double q) {
    if (sorted.length == 0) return 0;
    int i = (int) Math.ceil(q * sorted.length) - 1;
    return sorted[Math.max(0, Math.min(i, sorted.length - 1))];
  }

  /** A growable array of longs behind a lock (thousands of appends a second at most). */
  static final class LongBuffer {
    private long[] values = new long[1024];
    private int size;

    synchronized void add(long v) {
      if (size == values.length) values = Arrays.copyOf(values, size * 2);
      values[size++] = v;
    }

    synchronized int size() {
      return size;
    }

    synchronized long[] toArray() {
      return Arrays.copyOf(values, size);
    }
  }

  static String ms(long micros) {
    return String.format(
        Locale.ROOT,
        micros >= 100_000 ? "%.0f" : micros >= 10_000 ? "%.1f" : "%.2f",
        micros / 1000.0);
  }

  // ---------------------------------------------------------------------------------------------
  // Processes and memory.

  /**
   * CPU seconds (user + system) a process used so far, from {@code /proc/<pid>/stat}; -1 if
   * unknown.
   */
  static double processCpuSeconds(long pid) {
    try {
      String s = Files.readString(Path.of("/proc/" + pid + "/stat"));
      String[] f = s.substring(s.lastIndexOf(')') + 2).split(" ");
      return (Long.parseLong(f[11]) + Long.parseLong(f[12])) / CpuSample.TICKS_PER_SECOND;
    } catch (IOException | RuntimeException e) {
      return -1;
    }
  }

  /** Heap in use right after a full GC, in MiB. */
  static double heapAfterGcMib() {
    System.gc();
    return ManagementFactory.getMemoryMXBean().getHeapMemoryUsage().getUsed() / (1024.0 * 1024.0);
  }

  static double heapMaxMib() {
    return ManagementFactory.getMemoryMXBean().getHeapMemoryUsage().getMax() / (1024.0 * 1024.0);
  }

  /** "soft/hard" open-files limit of this process, from /proc/self/limits. */
  static String openFilesLimit() {
    try {
      for (String line : Files.readAllLines(Path.of("/proc/self/limits"))) {
        if (line.startsWith("Max open files")) {
          String[] f = line.substring("Max open files".length()).trim().split("\\s+");
          return f[0] + " soft / " + f[1] + " hard";
        }
      }
    } catch (IOException e) {
      // fall through
    }
    return "unknown";
  }

  static int openFileDescriptors() {
    try (var s = Files.list(Path.of("/proc/self/fd"))) {
      return (int) s.count();
    } catch (IOException e) {
      return -1;
    }
  }

  static String cpuModel() {
    try {
      for (String line : Files.readAllLines(Path.of("/proc/cpuinfo"))) {
        if (line.startsWith("model name")) return line.substring(line.indexOf(':') + 1).trim();
      }
    } catch (IOException e) {
      // fall through
    }
    return "unknown CPU";
  }

  static String memTotal() {
    try {
      for (String line : Files.readAllLines(Path.of("/proc/meminfo"))) {
        if (line.startsWith("MemTotal")) {
          long kb = Long.parseLong(line.replaceAll("\\D", ""));
          return String.format(Locale.ROOT, "%.0f GiB RAM", kb / 1024.0 / 1024.0);
        }
      }
    } catch (IOException | RuntimeException e) {
      // fall through
    }
    return "unknown RAM";
  }

  static String machine() {
    return String.format(
        Locale.ROOT,
        "%d cores (%s), %s, Java %s (%s), max heap %.0f MiB",
        Runtime.getRuntime().availableProcessors(),
        cpuModel(),
        memTotal(),
        System.getProperty("java.version"),
        System.getProperty("java.vm.name"),
        heapMaxMib());
  }

  static String cores(CpuSample.Usage u) {
    if (!u.known()) return "?";
    return String.format(
        Locale.ROOT,
        "machine %.2f, node JVM %.2f, PostgreSQL %.2f, other %.2f",
        u.machineCores(),
        u.jvmCores(),
        u.postgresCores(),
        u.otherCores());
  }
}
