package dev.tickmark.bench;

import com.typesafe.config.Config;
import dev.tickmark.engine.account.Account;
import dev.tickmark.engine.money.Metering;
import dev.tickmark.engine.money.Money;
import dev.tickmark.node.Node;
import dev.tickmark.node.NodeSettings;
import dev.tickmark.persistence.DatabaseSettings;
import dev.tickmark.persistence.Jdbc;
import dev.tickmark.persistence.ledger.LedgerReadModel;
import java.io.PrintStream;
import java.security.SecureRandom;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.IntFunction;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.pekko.Done;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.Props;
import org.apache.pekko.actor.typed.javadsl.Adapter;
import org.apache.pekko.actor.typed.javadsl.AskPattern;
import org.apache.pekko.cluster.sharding.typed.javadsl.ClusterSharding;
import org.apache.pekko.cluster.sharding.typed.javadsl.EntityRef;
import org.apache.pekko.serialization.Serialization;
import org.apache.pekko.serialization.SerializationExtension;
import org.apache.pekko.serialization.Serializer;
import org.apache.pekko.serialization.Serializers;

/**
 * Drives settlement postings through sharded {@link Account} entities of a full in-JVM node and, in
 * the same run and against the same PostgreSQL, raw JDBC batch inserts of journal-shaped rows, and
 * prints both rates and their ratio. Not a test: a program that measures and prints.
 *
 * <p>A run: create a fresh database {@code tickmark_bench_<random>}; start a node on it ({@link
 * Node#start}: migrations, cluster, sharded accounts, ledger projection, HTTP); run the raw JDBC
 * baselines once (the node idle); open {@code accounts} renters and as many providers, fund the
 * renters and place one hold per rental; then {@code rentals} concurrent rentals each keep one
 * settlement posting in flight (a {@code Capture} on the renter and a {@code CreditEarnings} on the
 * provider, same key, cumulative amounts from {@link Metering}) for a warm-up and a measured
 * window; check that the books balance (entity totals and the ledger projection's audit);
 * optionally run a minimal journal probe without and with tags; stop the node; run the raw
 * baselines again; drop the database; print the table. Ratios are against the better of the two
 * plain raw runs, so a burst of unrelated load during one of them does not inflate the ratio.
 *
 * <p>Journal settings come from the node's configuration, so {@code -D} system properties change
 * them, e.g. {@code -Djdbc-journal.parallelism=2}.
 */
public final class SettlementBenchmark {
  static {
    dev.tickmark.node.CommonPool.ensureParallelism(); // as the node's Main does
  }

  private static final PrintStream OUT = System.out;
  private static final Duration ASK_TIMEOUT = Duration.ofSeconds(30);
  private static final int FEE_BPS = Metering.DEFAULT_FEE_BPS;

  /** Every hold covers this many settlements, so no rental runs out of hold during a run. */
  private static final long POSTINGS_PER_HOLD = 1_000_000;

  private SettlementBenchmark() {}

  // ---------------------------------------------------------------------------------------------
  // Options

  record Options(
      String dbUrl,
      String dbUser,
      String dbPassword,
      int accounts,
      int rentals,
      Duration warmup,
      Duration duration,
      long postings,
      int settleSeconds,
      long pricePerGpuHour,
      int cards,
      int rawRows,
      int rawBatch,
      Duration probe,
      Duration ledgerWait,
      Duration waitQuiet,
      int analyzeEvery,
      boolean keepDatabase) {

    static final String USAGE =
        """
        Usage: SettlementBenchmark [--option=value ...]
          --db-url=URL        an existing database to connect to for CREATE/DROP DATABASE
                              (default: $TICKMARK_BENCH_DB_URL, else $TICKMARK_DB_URL, else
                              jdbc:postgresql://127.0.0.1:5432/postgres); the run uses a fresh
                              database tickmark_bench_<random> on the same server and drops it
          --db-user=NAME      (default: $TICKMARK_DB_USER, else postgres)
          --db-password=PW    (default: $TICKMARK_DB_PASSWORD, else empty)
          --accounts=N        renter accounts, and as many provider accounts (default 500)
          --rentals=N         concurrent rentals = settlement postings in flight (default 1000)
          --warmup=S          unmeasured seconds before the window (default 10; on 2 cores the JIT
                              compiles for about a minute, so a steady-state figure wants 60)
          --duration=S        measured seconds (default 30)
          --postings=N        measure N postings instead of a duration (default 0 = use duration)
          --settle-seconds=S  seconds each settlement covers (default 10)
          --price=EUR         price per GPU-hour (default 2.89), --cards=N (default 1)
          --raw-rows=N        rows per raw JDBC variant and pass (default 100000), --raw-batch=N (default 1000)
          --probe=S           seconds per journal-probe variant, untagged and tagged (default 10; 0 = skip)
          --ledger-wait=S     how long to wait for the ledger projection to catch up (default 60; 0 = skip)
          --wait-quiet=S      first wait up to S seconds for the machine to be idle (under 0.25 cores
                              busy for 5 s), so that other builds do not skew the figures (default 0)
          --analyze-every=S   with the server's autovacuum off, what stands in for it while the node runs:
                              "auto" (the default) does what autovacuum would, once every autovacuum_naptime
                              (AutovacuumStandIn); S > 0: ANALYZE of the journal's and ledger's tables every
                              S s, unthrottled (before 2026-12-06: 10); 0 = nothing
          --keep-database     do not drop the benchmark database at the end
        Journal settings: -Djdbc-journal.batchSize=.. -Djdbc-journal.parallelism=..
          -Dpekko-persistence-jdbc.shared-databases.slick.db.numThreads=.. (and .maxConnections=.., equal)
        """;

    static Options parse(String[] args, Map<String, String> env) {
      Map<String, String> o = new LinkedHashMap<>();
      for (int i = 0; i < args.length; i++) {
        String a = args[i];
        if (a.equals("-h") || a.equals("--help")) throw new UsageException(null);
        if (!a.startsWith("--")) throw new UsageException("unexpected argument " + a);
        String key;
        String value;
        int eq = a.indexOf('=');
        if (eq > 0) {
          key = a.substring(2, eq);
          value = a.substring(eq + 1);
        } else if (a.equals("--keep-database")) {
          key = "keep-database";
          value = "true";
        } else if (i + 1 < args.length) {
          key = a.substring(2);
          value = args[++i];
        } else {
          throw new UsageException("missing value for " + a);
        }
        o.put(key, value);
      }
      String url =
          firstNonBlank(
              o.remove("db-url"),
              env.get("TICKMARK_BENCH_DB_URL"),
              env.get("TICKMARK_DB_URL"),
              "jdbc:postgresql://127.0.0.1:5432/postgres");
      String user = firstNonBlank(o.remove("db-user"), env.get("TICKMARK_DB_USER"), "postgres");
      String password = firstNonBlank(o.remove("db-password"), env.get("TICKMARK_DB_PASSWORD"), "");
      Options opts =
          new Options(
              url,
              user,
              password,
              positive(o, "accounts", 500),
              positive(o, "rentals", 1000),
              Duration.ofSeconds(nonNegative(o, "warmup", 10)),
              Duration.ofSeconds(positive(o, "duration", 30)),
              nonNegative(o, "postings", 0),
              positive(o, "settle-seconds", 10),
              Money.parse(o.getOrDefault("price", "2.89")),
              positive(o, "cards", 1),
              positive(o, "raw-rows", 100_000),
              positive(o, "raw-batch", 1000),
              Duration.ofSeconds(nonNegative(o, "probe", 10)),
              Duration.ofSeconds(nonNegative(o, "ledger-wait", 60)),
              Duration.ofSeconds(nonNegative(o, "wait-quiet", 0)),
              analyzeEvery(o),
              Boolean.parseBoolean(o.getOrDefault("keep-database", "false")));
      o.remove("price");
      o.remove("keep-database");
      if (!o.isEmpty()) throw new UsageException("unknown option(s) " + o.keySet());
      return opts;
    }

    /** Seconds between ANALYZE runs; -1 for "auto". */
    private static int analyzeEvery(Map<String, String> o) {
      String v = o.get("analyze-every");
      if (v == null || v.equals("auto")) {
        o.remove("analyze-every");
        return -1;
      }
      return (int) nonNegative(o, "analyze-every", 0);
    }

    private static int positive(Map<String, String> o, String name, int fallback) {
      int v = (int) nonNegative(o, name, fallback);
      if (v < 1) throw new UsageException("--" + name + " must be at least 1");
      return v;
    }

    private static long nonNegative(Map<String, String> o, String name, long fallback) {
      String v = o.remove(name);
      if (v == null) return fallback;
      try {
        long n = Long.parseLong(v.trim());
        if (n < 0) throw new UsageException("--" + name + " must not be negative");
        return n;
      } catch (NumberFormatException e) {
        throw new UsageException("--" + name + " must be a whole number, got \"" + v + "\"");
      }
    }

    private static String firstNonBlank(String... values) {
      for (String v : values) if (v != null && !v.isBlank()) return v;
      return null;
    }
  }

  static final class UsageException extends RuntimeException {
    UsageException(String message) {
      super(message);
    }
  }

  // ---------------------------------------------------------------------------------------------

  public static void main(String[] args) throws Exception {
    Options options;
    try {
      options = Options.parse(args, System.getenv());
    } catch (UsageException | IllegalArgumentException e) {
      if (e.getMessage() != null) System.err.println(e.getMessage());
      System.err.print(Options.USAGE);
      System.exit(e.getMessage() == null ? 0 : 2);
      return;
    }
    int status = new Run(options).call();
    System.exit(status);
  }

  /** One benchmark run and everything it measured. */
  static final class Run {
    final Options o;
    final String database =
        "tickmark_bench_" + HexFormat.of().formatHex(new SecureRandom().generateSeed(4));
    final String url;
    final List<String> settings = new ArrayList<>();
    String serverVersion = "?";
    String autovacuum = "?";
    int analyzeEvery;
    String analyzed = "";
    String tableScans = "";
    double setupSeconds;
    LoadDriver.Result postings;
    final List<LoadDriver.Result> probes = new ArrayList<>();
    final List<RawInsertBaseline.Result> rawBefore = new ArrayList<>();
    final List<RawInsertBaseline.Result> rawAfter = new ArrayList<>();
    String balances = "not checked";
    boolean balanced;
    String ledger = "not checked";
    boolean ledgerOk = true;
    volatile boolean dropped;

    Run(Options o) {
      this.o = o;
      this.url = databaseUrl(o.dbUrl(), database);
    }

    int call() throws Exception {
      if (!o.waitQuiet().isZero()) waitQuiet();
      try (Connection admin = DriverManager.getConnection(o.dbUrl(), o.dbUser(), o.dbPassword());
          Statement st = admin.createStatement()) {
        serverVersion = admin.getMetaData().getDatabaseProductVersion();
        try (var rs = st.executeQuery("SHOW autovacuum")) {
          if (rs.next()) autovacuum = rs.getString(1);
        }
        analyzeEvery = o.analyzeEvery() >= 0 || "off".equals(autovacuum) ? o.analyzeEvery() : 0;
        st.execute("CREATE DATABASE " + database);
      }
      OUT.printf("Benchmark database %s created on %s%n", database, o.dbUrl());
      Thread dropOnExit =
          new Thread(
              () -> {
                // Interrupted (Ctrl-C, SIGTERM): do not leave the database behind.
                if (!dropped && !o.keepDatabase()) dropDatabase();
              },
              "bench-drop-database");
      Runtime.getRuntime().addShutdownHook(dropOnExit);
      try {
        runNodePhases();
        runRawPhases("after");
      } finally {
        if (!o.keepDatabase()) dropDatabase();
      }
      report();
      return balanced && ledgerOk ? 0 : 1;
    }

    /**
     * Waits until the whole machine was nearly idle for 5 s, or gives up after {@code
     * --wait-quiet}.
     */
    private void waitQuiet() throws InterruptedException {
      long t0 = System.nanoTime();
      long deadline = t0 + o.waitQuiet().toNanos();
      while (true) {
        CpuSample a = CpuSample.take();
        Thread.sleep(5_000);
        CpuSample.Usage u = a.until(CpuSample.take());
        if (!u.known() || u.machineCores() < 0.25) {
          quiet =
              String.format(
                  Locale.ROOT, "waited %.0f s for an idle machine", (System.nanoTime() - t0) / 1e9);
          break;
        }
        if (System.nanoTime() > deadline) {
          quiet =
              String.format(
                  Locale.ROOT,
                  "machine still busy (%.2f cores) after waiting %.0f s; ran anyway",
                  u.machineCores(),
                  (System.nanoTime() - t0) / 1e9);
          break;
        }
      }
      OUT.println(quiet);
    }

    String quiet;

    private void runNodePhases() throws Exception {
      NodeSettings ns =
          NodeSettings.fromEnvironment(
                  Map.of("TICKMARK_OPERATOR_TOKEN", "tmkop_bench_operator_token_0123456789abcdef"))
              .withDatabase(url, o.dbUser(), o.dbPassword())
              .withPorts(0, -1, 0)
              .withExitJvmOnShutdown(false);
      Node node = Node.start(ns);
      try {
        ActorSystem<Void> system = node.system();
        describeSettings(system.settings().config());
        rawPayload = payload(system);
        runRawPhases("before");
        List<Rental> rentals = setUp(system);
        try (Analyzer analyzer = new Analyzer(analyzeEvery)) {
          postings =
              new LoadDriver(rentals, OUT, database)
                  .run("postings", o.warmup(), o.duration(), o.postings());
          checkBalances(system, rentals);
          if (!o.ledgerWait().isZero()) checkLedger(node, rentals);
          tableScans = tableScans();
          OUT.println("Tables: " + tableScans);

          if (!o.probe().isZero()) {
            probes.add(probe(system, false));
            probes.add(probe(system, true));
          }
          analyzed = analyzer.summary();
        }
      } finally {
        node.close();
      }
    }

    /**
     * Stands in for autovacuum on a server where it is off: by default as autovacuum would ({@link
     * AutovacuumStandIn}); with {@code --analyze-every=S}, as this benchmark did until 2026-12-06,
     * an ANALYZE of the journal's and ledger's tables every S seconds. Without fresh statistics
     * PostgreSQL keeps the generic plan it cached for the read journal's eventsByTag query while
     * the tables were nearly empty, and that plan scans event_tag once per journal row.
     */
    final class Analyzer implements AutoCloseable {
      private final java.util.concurrent.ScheduledExecutorService timer;
      private final Connection connection;
      private final AutovacuumStandIn autovacuum;
      private int runs;
      private long nanos;

      Analyzer(int everySeconds) throws SQLException {
        autovacuum =
            everySeconds < 0 ? AutovacuumStandIn.start(url, o.dbUser(), o.dbPassword()) : null;
        if (everySeconds <= 0) {
          timer = null;
          connection = null;
          return;
        }
        connection = DriverManager.getConnection(url, o.dbUser(), o.dbPassword());
        timer =
            Executors.newSingleThreadScheduledExecutor(
                r -> {
                  Thread t = new Thread(r, "bench-analyze");
                  t.setDaemon(true);
                  return t;
                });
        timer.scheduleWithFixedDelay(this::analyze, 0, everySeconds, TimeUnit.SECONDS);
      }

      private void analyze() {
        long t0 = System.nanoTime();
        try (Statement st = connection.createStatement()) {
          st.execute(
              "ANALYZE event_journal, event_tag, snapshot, ledger_entries, pekko_projection_offset_store");
          synchronized (this) {
            runs++;
            nanos += System.nanoTime() - t0;
          }
        } catch (SQLException e) {
          OUT.println("ANALYZE failed: " + e.getMessage());
        }
      }

      synchronized String summary() {
        if (autovacuum != null) return autovacuum.summary();
        if (timer == null) return "never";
        return String.format(
            Locale.ROOT,
            "ANALYZE every %d s (%d times, %.0f ms each on average)",
            analyzeEvery,
            runs,
            runs == 0 ? 0.0 : nanos / 1e6 / runs);
      }

      @Override
      public void close() throws Exception {
        if (autovacuum != null) autovacuum.close();
        if (timer == null) return;
        timer.shutdownNow();
        timer.awaitTermination(30, TimeUnit.SECONDS);
        connection.close();
      }
    }

    /**
     * How often the journal tables were scanned sequentially: the symptom of a stale cached plan.
     */
    private String tableScans() {
      try (Connection c = DriverManager.getConnection(url, o.dbUser(), o.dbPassword());
          Statement st = c.createStatement();
          var rs =
              st.executeQuery(
                  "SELECT relname, n_live_tup, seq_scan, seq_tup_read, COALESCE(idx_scan, 0)"
                      + " FROM pg_stat_user_tables WHERE relname IN ('event_journal', 'event_tag') ORDER BY relname")) {
        StringBuilder b = new StringBuilder();
        while (rs.next()) {
          if (b.length() > 0) b.append("; ");
          b.append(
              String.format(
                  Locale.ROOT,
                  "%s %,d rows, %,d seq scans reading %,d rows, %,d index scans",
                  rs.getString(1),
                  rs.getLong(2),
                  rs.getLong(3),
                  rs.getLong(4),
                  rs.getLong(5)));
        }
        return b.toString();
      } catch (SQLException e) {
        return "unknown (" + e.getMessage() + ")";
      }
    }

    RawInsertBaseline.Payload rawPayload;

    private void runRawPhases(String pass) throws SQLException {
      DatabaseSettings db = new DatabaseSettings(url, o.dbUser(), o.dbPassword(), 1);
      try (Connection c = DriverManager.getConnection(db.tunedUrl(), o.dbUser(), o.dbPassword())) {
        for (RawInsertBaseline.Variant v : RawInsertBaseline.Variant.values()) {
          RawInsertBaseline.Result r =
              RawInsertBaseline.run(c, database, v, o.rawRows(), o.rawBatch(), rawPayload);
          OUT.printf(
              "  [raw %s] %s: %,d rows in batches of %d: %,.0f rows/s%n",
              pass, v.label, r.rows(), o.rawBatch(), r.perSecond());
          (pass.equals("before") ? rawBefore : rawAfter).add(r);
        }
      }
    }

    private void describeSettings(Config c) {
      String slick = "pekko-persistence-jdbc.shared-databases.slick.db.";
      settings.add("jdbc-journal.batchSize=" + c.getInt("jdbc-journal.batchSize"));
      settings.add("jdbc-journal.parallelism=" + c.getInt("jdbc-journal.parallelism"));
      settings.add("jdbc-journal.bufferSize=" + c.getInt("jdbc-journal.bufferSize"));
      settings.add(
          "slick numThreads="
              + c.getInt(slick + "numThreads")
              + " maxConnections="
              + c.getInt(slick + "maxConnections")
              + " minConnections="
              + c.getInt(slick + "minConnections"));
      String fj = "pekko.actor.default-dispatcher.fork-join-executor.";
      settings.add(
          "default-dispatcher parallelism-min="
              + c.getInt(fj + "parallelism-min")
              + " factor="
              + c.getDouble(fj + "parallelism-factor")
              + " max="
              + c.getInt(fj + "parallelism-max"));
      settings.add(
          "accounts="
              + o.accounts()
              + "+"
              + o.accounts()
              + " rentals(in flight)="
              + o.rentals()
              + " warmup="
              + o.warmup().toSeconds()
              + "s "
              + (o.postings() > 0
                  ? "postings=" + o.postings()
                  : "duration=" + o.duration().toSeconds() + "s")
              + " settle="
              + o.settleSeconds()
              + "s price="
              + Money.format(o.pricePerGpuHour())
              + " cards="
              + o.cards());
      OUT.println("Settings:");
      for (String s : settings) OUT.println("  " + s);
    }

    // -------------------------------------------------------------------------------------------
    // Set-up: accounts, deposits, holds

    private List<Rental> setUp(ActorSystem<Void> system) throws Exception {
      ClusterSharding sharding = ClusterSharding.get(system);
      int n = o.accounts();
      List<EntityRef<Account.Command>> renters = new ArrayList<>(n);
      List<EntityRef<Account.Command>> providers = new ArrayList<>(n);
      for (int i = 0; i < n; i++) {
        renters.add(sharding.entityRefFor(Account.ENTITY_KEY, "bench-renter-" + i));
        providers.add(sharding.entityRefFor(Account.ENTITY_KEY, "bench-provider-" + i));
      }
      long holdAmount =
          Metering.cost(o.pricePerGpuHour(), o.cards(), POSTINGS_PER_HOLD * o.settleSeconds());
      int holdsPerRenter = (o.rentals() + n - 1) / n;
      long deposit = Math.multiplyExact(holdAmount, (long) holdsPerRenter);
      long t0 = System.nanoTime();
      bounded(
          200,
          2 * n,
          i ->
              (i < n ? renters.get(i) : providers.get(i - n))
                  .<Account.Summary>askWithStatus(
                      reply ->
                          new Account.Open(i < n ? "renter " + i : "provider " + (i - n), reply),
                      ASK_TIMEOUT));
      bounded(
          200,
          n,
          i ->
              renters
                  .get(i)
                  .<Account.Posting>askWithStatus(
                      reply -> new Account.Deposit("bench-deposit", deposit, reply), ASK_TIMEOUT));
      List<Rental> rentals = new ArrayList<>(o.rentals());
      for (int r = 0; r < o.rentals(); r++) {
        rentals.add(
            new Rental("bench-rental-" + r, renters.get(r % n), providers.get((r + r / n) % n)));
      }
      bounded(
          200,
          rentals.size(),
          i ->
              rentals
                  .get(i)
                  .renter
                  .<Account.HoldView>askWithStatus(
                      reply -> new Account.PlaceHold(rentals.get(i).id, holdAmount, reply),
                      ASK_TIMEOUT));
      setupSeconds = (System.nanoTime() - t0) / 1e9;
      OUT.printf(
          "Set up %d accounts, %d deposits and %d holds in %.1f s%n",
          2 * n, n, rentals.size(), setupSeconds);
      return rentals;
    }

    /**
     * A rental that settles every {@code settleSeconds}: one capture and one earnings credit per
     * posting.
     */
    final class Rental implements LoadDriver.Worker {
      final String id;
      final EntityRef<Account.Command> renter;
      final EntityRef<Account.Command> provider;
      long next = 1;
      long settledSeconds;
      long postings;

      Rental(String id, EntityRef<Account.Command> renter, EntityRef<Account.Command> provider) {
        this.id = id;
        this.renter = renter;
        this.provider = provider;
      }

      @Override
      public CompletionStage<?> attempt() {
        long second = next * o.settleSeconds();
        long cost = Metering.cost(o.pricePerGpuHour(), o.cards(), second);
        long prov = Metering.providerShare(cost, FEE_BPS);
        long plat = cost - prov;
        CompletionStage<Account.Posting> capture =
            renter.askWithStatus(
                reply -> new Account.Capture(id, second, cost, reply), ASK_TIMEOUT);
        CompletionStage<Account.Posting> credit =
            provider.askWithStatus(
                reply -> new Account.CreditEarnings(id, second, prov, plat, false, reply),
                ASK_TIMEOUT);
        return capture.thenCombineAsync(credit, (a, b) -> a, LoadDriver.DIRECT);
      }

      @Override
      public void succeeded() {
        settledSeconds = next * o.settleSeconds();
        next++;
        postings++;
      }
    }

    // -------------------------------------------------------------------------------------------
    // Checks

    private void checkBalances(ActorSystem<Void> system, List<Rental> rentals) throws Exception {
      long expectedCost = 0, expectedProvider = 0, expectedPlatform = 0;
      for (Rental r : rentals) {
        long cost = Metering.cost(o.pricePerGpuHour(), o.cards(), r.settledSeconds);
        expectedCost += cost;
        expectedProvider += Metering.providerShare(cost, FEE_BPS);
        expectedPlatform += Metering.platformShare(cost, FEE_BPS);
      }
      ClusterSharding sharding = ClusterSharding.get(system);
      int n = o.accounts();
      Account.Summary[] summaries = new Account.Summary[2 * n];
      bounded(
          200,
          2 * n,
          i ->
              sharding
                  .entityRefFor(
                      Account.ENTITY_KEY, i < n ? "bench-renter-" + i : "bench-provider-" + (i - n))
                  .ask(Account.GetSummary::new, ASK_TIMEOUT)
                  .thenAcceptAsync(s -> summaries[i] = s, LoadDriver.DIRECT));
      long captured = 0, credited = 0, platform = 0, held = 0;
      for (int i = 0; i < 2 * n; i++) {
        Account.Summary s = summaries[i];
        if (i < n) {
          captured += s.captured();
          held += s.held();
        } else {
          credited += s.credited();
          platform += s.platformCredited();
        }
      }
      balanced =
          captured == credited + platform
              && captured == expectedCost
              && credited == expectedProvider
              && platform == expectedPlatform;
      balances =
          String.format(
              Locale.ROOT,
              "renters captured %s EUR = providers credited %s + platform %s EUR (driver expected %s): %s",
              Money.format(captured),
              Money.format(credited),
              Money.format(platform),
              Money.format(expectedCost),
              balanced ? "OK" : "MISMATCH");
      OUT.println("Balances: " + balances);
    }

    private void checkLedger(Node node, List<Rental> rentals) throws Exception {
      long postingsTotal = rentals.stream().mapToLong(r -> r.postings).sum();
      // One leg per deposit, hold and capture; two per earnings credit (provider and platform).
      long expected = o.accounts() + rentals.size() + 3 * postingsTotal;
      ExecutorService executor = Executors.newFixedThreadPool(2);
      DatabaseSettings db =
          new DatabaseSettings(node.database().url(), o.dbUser(), o.dbPassword(), 2);
      try (Jdbc jdbc = Jdbc.create(db, "bench-audit", executor)) {
        LedgerReadModel model = new LedgerReadModel(jdbc);
        long t0 = System.nanoTime();
        long deadline = t0 + o.ledgerWait().toNanos();
        LedgerReadModel.Audit audit = model.audit().toCompletableFuture().get(30, TimeUnit.SECONDS);
        while (audit.entries() < expected && System.nanoTime() < deadline) {
          Thread.sleep(250);
          audit = model.audit().toCompletableFuture().get(30, TimeUnit.SECONDS);
        }
        double lag = (System.nanoTime() - t0) / 1e9;
        boolean caughtUp = audit.entries() >= expected;
        // Behind is a figure, not a failure (pending settlements are not violations); a wrong sum
        // is.
        ledgerOk = audit.conserved() && (!caughtUp || audit.entries() == expected);
        ledger =
            caughtUp
                ? String.format(
                    Locale.ROOT,
                    "projection caught up %.1f s after the load stopped: %,d entries, conserved=%s",
                    lag,
                    audit.entries(),
                    audit.conserved())
                : String.format(
                    Locale.ROOT,
                    "projection still behind after %.0f s: %,d of %,d entries, conserved=%s",
                    lag,
                    audit.entries(),
                    expected,
                    audit.conserved());
      } finally {
        executor.shutdown();
      }
      OUT.println("Ledger: " + ledger);
    }

    // -------------------------------------------------------------------------------------------
    // Journal probe: the journal alone, with and without a tag

    private LoadDriver.Result probe(ActorSystem<Void> system, boolean tagged)
        throws InterruptedException {
      String variant = tagged ? "tagged" : "untagged";
      int n = 2 * o.accounts(); // as many writers as there are accounts
      List<ProbeWriter> writers = new ArrayList<>(n);
      for (int i = 0; i < n; i++) {
        String id = variant + "-" + i;
        ActorRef<JournalProbe.Command> ref =
            system.systemActorOf(
                new JournalProbe(
                    id,
                    tagged ? "bench-" + Math.floorMod(id.hashCode(), Account.TAG_SLICES) : null),
                "bench-probe-" + id,
                Props.empty());
        writers.add(new ProbeWriter(system, ref));
      }
      Duration warmup = Duration.ofSeconds(Math.min(5, o.warmup().toSeconds()));
      return new LoadDriver(writers, OUT, database).run("probe " + variant, warmup, o.probe(), 0);
    }

    static final class ProbeWriter implements LoadDriver.Worker {
      final ActorSystem<Void> system;
      final ActorRef<JournalProbe.Command> ref;
      long next = 1;

      ProbeWriter(ActorSystem<Void> system, ActorRef<JournalProbe.Command> ref) {
        this.system = system;
        this.ref = ref;
      }

      @Override
      public CompletionStage<?> attempt() {
        long second = next;
        return AskPattern.<JournalProbe.Command, Done>ask(
            ref, reply -> new JournalProbe.Write(second, reply), ASK_TIMEOUT, system.scheduler());
      }

      @Override
      public void succeeded() {
        next++;
      }
    }

    /**
     * The bytes the journal stores for one settlement event, to give the raw inserts the same
     * payload.
     */
    private static RawInsertBaseline.Payload payload(ActorSystem<Void> system) {
      Serialization serialization = SerializationExtension.get(Adapter.toClassic(system));
      Account.Captured event =
          new Account.Captured("bench-rental-123", 1230, 987_654, 8_030, Instant.now());
      Serializer serializer = serialization.findSerializerFor(event);
      byte[] bytes = serialization.serialize(event).get();
      return new RawInsertBaseline.Payload(
          bytes, serializer.identifier(), Serializers.manifestFor(serializer, event));
    }

    private synchronized void dropDatabase() {
      if (dropped) return;
      try (Connection admin = DriverManager.getConnection(o.dbUrl(), o.dbUser(), o.dbPassword());
          Statement st = admin.createStatement()) {
        try {
          st.execute("DROP DATABASE IF EXISTS " + database + " WITH (FORCE)");
        } catch (SQLException olderServer) {
          st.execute("DROP DATABASE IF EXISTS " + database);
        }
        dropped = true;
      } catch (SQLException e) {
        OUT.println("Could not drop " + database + ": " + e.getMessage());
      }
    }

    // -------------------------------------------------------------------------------------------
    // Report

    private void report() {
      double baseRate =
          Math.max(
              rawBefore.isEmpty() ? Double.NaN : rawBefore.get(0).perSecond(),
              rawAfter.isEmpty() ? Double.NaN : rawAfter.get(0).perSecond());
      OUT.println();
      OUT.println("== Tickmark settlement benchmark ==");
      OUT.printf(
          "machine: %d cores, Java %s, PostgreSQL %s, database %s (%s)%n",
          Runtime.getRuntime().availableProcessors(),
          System.getProperty("java.version"),
          serverVersion,
          database,
          dropped ? "dropped" : "kept");
      for (String s : settings) OUT.println("settings: " + s);
      OUT.println(
          "server: autovacuum=" + autovacuum + "; the benchmark's stand-in for it: " + analyzed);
      if (quiet != null) OUT.println("before the run: " + quiet);
      OUT.printf("set-up: %.1f s%n", setupSeconds);
      OUT.printf(
          Locale.ROOT,
          "quiet seconds: those in which other processes used < %.2f cores; ratios use them when"
              + " there are at least %d, else all seconds; raw ratios are against the better plain raw pass%n",
          LoadDriver.QUIET_OTHER_CORES,
          MIN_QUIET_SECONDS);
      OUT.println();
      String header =
          String.format(
              Locale.ROOT,
              "%-44s %9s %6s %9s %7s %7s %7s %7s %7s  %s",
              "phase",
              "count",
              "secs",
              "per sec",
              "vs raw",
              "p50 ms",
              "p99 ms",
              "JVM ms",
              "PG ms",
              "cores machine/jvm/pg/other");
      OUT.println(header);
      OUT.println(
          String.format(
              "%-44s %9s %6s %9s %7s %7s %7s %7s %7s",
              "", "", "", "", "", "", "", "per op", "per op"));
      OUT.println("-".repeat(header.length() + 2));
      if (postings != null) {
        loadRows("Account postings", postings, Double.NaN);
        LoadDriver.Figures f = best(postings);
        OUT.println(
            String.format(
                Locale.ROOT,
                "%-44s %,9d %6.1f %,9.0f %7.3f %7s %7s %7.3f %7.3f",
                "  = events (capture +" + " credit), " + (f == postings.quiet() ? "quiet" : "all"),
                2 * f.completed(),
                f.seconds(),
                2 * f.perSecond(),
                2 * f.perSecond() / baseRate,
                "",
                "",
                f.jvmMillisPerOp() / 2,
                f.postgresMillisPerOp() / 2));
      }
      for (LoadDriver.Result p : probes) loadRows(p.label() + " events", p, baseRate);
      for (RawInsertBaseline.Result r : rawBefore) rawRow(r, "before", baseRate);
      for (RawInsertBaseline.Result r : rawAfter) rawRow(r, "after", baseRate);
      OUT.println();
      if (postings != null) {
        OUT.printf(
            "errors during postings: %d%s%n",
            postings.errors(),
            postings.lastError() == null ? "" : " (last: " + postings.lastError() + ")");
      }
      OUT.println("balances: " + balances);
      OUT.println("ledger:   " + ledger);
      OUT.println("tables:   " + tableScans);
      // Every figure on one line, for logs, scripts and docs/benchmarks.md.
      StringBuilder line = new StringBuilder("RESULT");
      if (postings != null) {
        LoadDriver.Figures f = best(postings);
        line.append(
            String.format(
                Locale.ROOT,
                " postings/s=%.0f events/s=%.0f quiet_s=%.0f of=%.0f p50ms=%.0f p99ms=%.0f jvm_ms/ev=%.3f pg_ms/ev=%.3f"
                    + " all_postings/s=%.0f",
                f.perSecond(),
                2 * f.perSecond(),
                postings.quiet().seconds(),
                postings.all().seconds(),
                f.percentileMillis(50),
                f.percentileMillis(99),
                f.jvmMillisPerOp() / 2,
                f.postgresMillisPerOp() / 2,
                postings.all().perSecond()));
      }
      for (LoadDriver.Result p : probes) {
        LoadDriver.Figures f = best(p);
        line.append(
            String.format(
                Locale.ROOT,
                " %s/s=%.0f %s_jvm_ms=%.3f",
                p.label().replace(' ', '-'),
                f.perSecond(),
                p.label().replace(' ', '-'),
                f.jvmMillisPerOp()));
      }
      for (int i = 0; i < rawBefore.size(); i++) {
        RawInsertBaseline.Variant v = rawBefore.get(i).variant();
        line.append(
            String.format(
                Locale.ROOT,
                " raw-%s/s=%.0f",
                v.name().toLowerCase(),
                Math.max(
                    rawBefore.get(i).perSecond(),
                    i < rawAfter.size() ? rawAfter.get(i).perSecond() : 0)));
      }
      if (postings != null)
        line.append(
            String.format(Locale.ROOT, " ratio=%.3f", 2 * best(postings).perSecond() / baseRate));
      line.append(" balanced=").append(balanced).append(" ledger=").append(ledgerOk);
      OUT.println(line);
      if (postings != null) {
        LoadDriver.Figures f = best(postings);
        BenchResult.against(
                "settlement",
                "settlement.write-path",
                "settlement events/s (capture + credit) ÷ raw plain batched rows/s",
                2 * f.perSecond(),
                "events/s",
                baseRate,
                "raw plain rows/s")
            .withNote(
                (f == postings.quiet() ? "quiet seconds" : "all seconds")
                    + "; balanced="
                    + balanced
                    + " ledger="
                    + ledgerOk)
            .print(OUT);
      }
    }

    static final int MIN_QUIET_SECONDS = 5;

    /** The quiet seconds' figures when there are enough of them, else all seconds'. */
    static LoadDriver.Figures best(LoadDriver.Result r) {
      return r.quiet().seconds() >= MIN_QUIET_SECONDS ? r.quiet() : r.all();
    }

    private static void loadRows(String label, LoadDriver.Result r, double baseRate) {
      loadRow(label + ", all seconds", r.all(), r.all() == best(r) ? baseRate : Double.NaN);
      loadRow(label + ", quiet seconds", r.quiet(), r.quiet() == best(r) ? baseRate : Double.NaN);
    }

    private static void loadRow(String label, LoadDriver.Figures f, double baseRate) {
      CpuSample.Usage cpu = f.cpu();
      OUT.println(
          String.format(
              Locale.ROOT,
              "%-44s %,9d %6.1f %9s %7s %7s %7s %7s %7s  %s",
              label,
              f.completed(),
              f.seconds(),
              num("%,.0f", f.perSecond()),
              num("%.3f", f.perSecond() / baseRate),
              num("%.1f", f.percentileMillis(50)),
              num("%.1f", f.percentileMillis(99)),
              num("%.3f", f.jvmMillisPerOp()),
              num("%.3f", f.postgresMillisPerOp()),
              cores(cpu)));
    }

    private static void rawRow(RawInsertBaseline.Result r, String pass, double baseRate) {
      CpuSample.Usage cpu = r.cpu();
      OUT.println(
          String.format(
              Locale.ROOT,
              "%-44s %,9d %6.1f %,9.0f %7.3f %7s %7s %7s %7s  %s",
              r.variant().label + ", " + pass,
              r.rows(),
              r.seconds(),
              r.perSecond(),
              r.perSecond() / baseRate,
              "",
              "",
              num("%.3f", cpu.known() ? cpu.jvmSeconds() * 1000 / r.rows() : Double.NaN),
              num("%.3f", cpu.known() ? cpu.postgresSeconds() * 1000 / r.rows() : Double.NaN),
              cores(cpu)));
    }

    private static String num(String format, double v) {
      return Double.isNaN(v) || Double.isInfinite(v) ? "" : String.format(Locale.ROOT, format, v);
    }

    private static String cores(CpuSample.Usage cpu) {
      return cpu == null || !cpu.known()
          ? ""
          : String.format(
              Locale.ROOT,
              "%.2f / %.2f / %.2f / %.2f",
              cpu.machineCores(),
              cpu.jvmCores(),
              cpu.postgresCores(),
              cpu.otherCores());
    }
  }

  // ---------------------------------------------------------------------------------------------

  /** Runs {@code op(0..n-1)} with at most {@code parallel} in flight; throws the first failure. */
  static void bounded(int parallel, int n, IntFunction<CompletionStage<?>> op) throws Exception {
    Semaphore permits = new Semaphore(parallel);
    AtomicReference<Throwable> failure = new AtomicReference<>();
    for (int i = 0; i < n && failure.get() == null; i++) {
      permits.acquire();
      op.apply(i)
          .whenCompleteAsync(
              (v, e) -> {
                if (e != null) failure.compareAndSet(null, e);
                permits.release();
              },
              LoadDriver.DIRECT);
    }
    if (!permits.tryAcquire(parallel, 120, TimeUnit.SECONDS))
      throw new IllegalStateException("set-up did not finish in 120 s");
    if (failure.get() != null)
      throw new IllegalStateException("set-up failed: " + failure.get(), failure.get());
  }

  private static final Pattern JDBC_URL =
      Pattern.compile("^(jdbc:postgresql://[^/?]*)(/[^?]*)?(\\?.*)?$");

  /** The same server and parameters as {@code adminUrl}, with the database replaced. */
  static String databaseUrl(String adminUrl, String database) {
    Matcher m = JDBC_URL.matcher(adminUrl);
    if (!m.matches()) throw new IllegalArgumentException("not a PostgreSQL JDBC url: " + adminUrl);
    return m.group(1) + "/" + database + (m.group(3) == null ? "" : m.group(3));
  }
}
