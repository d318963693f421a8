package dev.tickmark.bench;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.time.Instant;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;
import java.util.stream.Collectors;

/**
 * Runs every benchmark of this module in a short mode, each in its own JVM (so one's warm JIT and
 * heap do not help the next, and a crash or a hang does not stop the rest), reads the {@link
 * BenchResult} lines each prints, and prints one summary table: benchmark, measure, value, same-run
 * baseline, ratio, the target of issue 15 where there is one, and pass/miss. A benchmark whose
 * tools (ssh, scp, socat) or database are missing is listed as skipped, with why. Each child's
 * whole output is kept in a log file.
 *
 * <p>{@code bench/all.sh} builds the class path and runs this; {@code --help} lists the options.
 */
public final class AllBenchmarks {
  private static final PrintStream OUT = System.out;

  private AllBenchmarks() {}

  static final String USAGE =
      """
      Usage: AllBenchmarks [--option=value ...]   (bench/all.sh runs it with the right class path)
        --only=a,b          run only these benchmarks (names as --list prints them)
        --skip=a,b          leave these out
        --timeout=S         the longest any one benchmark may run (default: each one's own, 240-420 s);
                            one that runs over is stopped (SIGTERM, then SIGKILL) and listed as timed out
        --logs=DIR          where each benchmark's whole output goes (default bench/target/all-benchmarks/<time>)
        --echo              also copy every child's output here, prefixed with its name
        --list              list the benchmarks and their short arguments, and exit
        --db-url=URL --db-user=U --db-password=P   the PostgreSQL each benchmark creates its database on
                            (default: $TICKMARK_BENCH_DB_URL, else $TICKMARK_DB_URL, else
                            jdbc:postgresql://127.0.0.1:5432/postgres as postgres)
      """;

  /**
   * One benchmark in its short mode: the program, its arguments, JVM options, what it needs, and
   * how long it may take.
   */
  record Bench(
      String name,
      String main,
      List<String> args,
      List<String> jvm,
      List<String> tools,
      boolean database,
      int timeoutSeconds) {}

  static final List<Bench> BENCHMARKS =
      List.of(
          new Bench(
              "settlement",
              "SettlementBenchmark",
              // a minute's warm-up: on 2 cores the JIT compiles the posting path for that long
              // (docs/benchmarks.md, "The settlement write path, warm")
              List.of(
                  "--warmup=60",
                  "--duration=20",
                  "--probe=0",
                  "--raw-rows=20000",
                  "--ledger-wait=30"),
              List.of(),
              List.of(),
              true,
              360),
          new Bench(
              "ledger-write",
              "LedgerWriteBenchmark",
              List.of("--settlements=50000", "--rounds=2"),
              List.of(),
              List.of(),
              true,
              300),
          new Bench(
              "projection-write",
              "ProjectionWriteBenchmark",
              List.of("--rentals=5000", "--rounds=2"),
              List.of(),
              List.of(),
              true,
              300),
          new Bench(
              "market-match",
              "MarketBenchmark",
              // warmed up at saturation: in the first minutes C2 takes a quarter of the node's CPU
              // (docs/benchmarks.md, "The launch, warm"); 16 cards a host leave free ones after it
              List.of(
                  "--parts=match",
                  "--hosts=1000",
                  "--cards=16",
                  "--rates=20,200,1000",
                  "--duration=10",
                  "--warmup=45",
                  "--warmup-rate=1000",
                  "--drain=10",
                  "--floor=5",
                  "--idle=5"),
              List.of("-Xmx4g"),
              List.of(),
              true,
              360),
          new Bench(
              "market-small-hosts",
              "MarketBenchmark",
              // 10,000 hosts of 2 cards: the cheapest fill within the host read side's lag, so the
              // matcher must look past them (docs/benchmarks.md, "Small hosts under load")
              List.of(
                  "--parts=match",
                  "--hosts=10000",
                  "--cards=2",
                  "--rates=200",
                  "--duration=10",
                  "--warmup=30",
                  "--warmup-rate=1000",
                  "--drain=10",
                  "--floor=0",
                  "--idle=0"),
              List.of("-Xmx4g"),
              List.of(),
              true,
              360),
          new Bench(
              "market-meter",
              "MarketBenchmark",
              List.of(
                  "--parts=meter",
                  "--meter-sizes=1000",
                  "--meter-window=20",
                  "--ramp-timeout=120",
                  "--raw-rows=20000",
                  "--probes=50"),
              List.of("-Xmx4g"),
              List.of(),
              true,
              360),
          new Bench(
              "meter-ticks",
              "MeterTicksBenchmark",
              // the target's size; the window covers one stretched settle interval (50 s at 25,000)
              List.of("--sizes=25000", "--window=50", "--probes=50", "--ramp-timeout=240"),
              List.of("-Xmx6g"),
              List.of(),
              false,
              600),
          new Bench(
              "agent-heartbeat",
              "AgentHeartbeatBenchmark",
              List.of("--agents=500", "--window=15", "--ramp-timeout=180"),
              List.of("-Xmx4g"),
              List.of(),
              true,
              360),
          new Bench(
              "failover",
              "FailoverBenchmark",
              List.of("--rentals=300", "--timeout=120", "--logs=bench/target/failover-bench"),
              List.of(),
              List.of(),
              true,
              420),
          new Bench(
              "simulation",
              "SimulationBenchmark",
              List.of("--steps=10000", "--seeds=4", "--threads=2"),
              List.of(
                  "-Djava.util.concurrent.ForkJoinPool.common.parallelism=2",
                  // each seed starts an actor system; on a saturated machine its logger may take
                  // longer than Pekko's default 5 s to answer
                  "-Dpekko.logger-startup-timeout=30s"),
              List.of(),
              false,
              240),
          new Bench(
              "relay",
              "RelayBenchmark",
              List.of("--mib=32", "--bridge"),
              List.of(),
              List.of("ssh", "scp", "socat"),
              true,
              360),
          new Bench(
              "ssh-sessions",
              "SshSessionsBenchmark",
              List.of(
                  "--rentals=10",
                  "--sessions-per-rental=2",
                  "--loop=20",
                  "--start-rate=4",
                  "--proxy=bridge,cli"),
              List.of(),
              List.of("ssh"),
              true,
              360),
          new Bench(
              "log-ingest",
              "LogIngestBenchmark",
              List.of("--rentals=100", "--warmup=5", "--duration=15"),
              List.of(),
              List.of(),
              true,
              300),
          new Bench(
              "snapshot",
              "SnapshotBenchmark",
              List.of("--mib=64"),
              List.of(),
              List.of(),
              true,
              300),
          new Bench(
              "event-codec",
              "EventCodecBenchmark",
              List.of("--events=50000", "--rounds=3"),
              List.of(),
              List.of(),
              false,
              180),
          new Bench(
              "remoting-tls",
              "RemotingTlsBenchmark",
              List.of("--rounds=2", "--pings=2000", "--messages=50000"),
              List.of(),
              List.of("openssl"),
              false,
              240));

  /** A target of issue 15, for the figures it applies to. */
  record Target(Predicate<BenchResult> appliesTo, String text, Predicate<BenchResult> met) {}

  /** Issue 15's targets ("on this 2-core machine", each with a same-run baseline). */
  static final List<Target> TARGETS =
      List.of(
          new Target(
              r -> r.key().equals("launch.p99@20"), "≤ 10 ms (10,000 hosts)", r -> r.value() <= 10),
          new Target(
              r -> r.key().equals("launch.p99@200"),
              "≤ 25 ms (10,000 hosts)",
              r -> r.value() <= 25),
          new Target(
              r -> r.key().startsWith("launch.matched-per-s@") && atLeast(r.key(), 500),
              "≥ 500/s per node",
              r -> r.value() >= 500),
          new Target(
              r -> r.key().startsWith("ticks.lag-p99@") && atLeast(r.key(), 25_000),
              "≤ 1,000 ms at 25,000",
              r -> r.value() <= 1000),
          new Target(
              r -> r.key().startsWith("ticks.lag-p99@"),
              "≤ 1,000 ms at 25,000 (not this size)",
              null),
          new Target(
              r -> r.key().startsWith("ticks.metered@") && atLeast(r.key(), 25_000),
              "on time (ratio ≥ 0.99) at 25,000",
              r -> r.ratio() >= 0.99),
          new Target(
              r -> r.key().equals("settlement.write-path"),
              "ratio ≥ 0.15 (aim 0.25)",
              r -> r.ratio() >= 0.15),
          new Target(
              r -> r.key().equals("failover.all-settled"),
              "≤ 15 s (aim 10 s; 1,000 rentals)",
              r -> r.value() <= 15));

  /** Whether the size or rate after the key's '@' is at least {@code n}. */
  static boolean atLeast(String key, int n) {
    int at = key.indexOf('@');
    if (at < 0) return false;
    try {
      return Integer.parseInt(key.substring(at + 1)) >= n;
    } catch (NumberFormatException e) {
      return false;
    }
  }

  /** What one benchmark run came to. */
  record Outcome(
      Bench bench,
      String status,
      List<BenchResult> results,
      double seconds,
      double loadAtStart,
      Path log) {}

  public static void main(String[] argv) throws Exception {
    MarketBenchSupport.Args args;
    try {
      args = new MarketBenchSupport.Args(argv);
    } catch (RuntimeException e) {
      System.err.println(e.getMessage());
      System.err.print(USAGE);
      System.exit(2);
      return;
    }
    if (args.has("help")) {
      OUT.print(USAGE);
      return;
    }
    if (args.has("list")) {
      for (Bench b : BENCHMARKS)
        OUT.printf(
            "%-16s %s %s %s%n",
            b.name(), String.join(" ", b.jvm()), b.main(), String.join(" ", b.args()));
      return;
    }
    Set<String> only = names(args.string("only", ""));
    Set<String> skip = names(args.string("skip", ""));
    int timeout = args.integer("timeout", 0);
    boolean echo = args.has("echo");
    args.string("echo", null);
    String stamp =
        DateTimeFormatter.ofPattern("yyyyMMdd-HHmmss")
            .withZone(ZoneOffset.UTC)
            .format(Instant.now());
    Path logs = Path.of(args.string("logs", "bench/target/all-benchmarks/" + stamp));
    Map<String, String> env = new LinkedHashMap<>(System.getenv());
    String dbUrl =
        first(
            args.string("db-url", null),
            env.get("TICKMARK_BENCH_DB_URL"),
            env.get("TICKMARK_DB_URL"),
            "jdbc:postgresql://127.0.0.1:5432/postgres");
    String dbUser = first(args.string("db-user", null), env.get("TICKMARK_DB_USER"), "postgres");
    String dbPassword = first(args.string("db-password", null), env.get("TICKMARK_DB_PASSWORD"));
    try {
      args.requireEmpty();
    } catch (RuntimeException e) {
      System.err.println(e.getMessage());
      System.err.print(USAGE);
      System.exit(2);
      return;
    }
    for (String n : only) if (BENCHMARKS.stream().noneMatch(b -> b.name().equals(n))) unknown(n);
    for (String n : skip) if (BENCHMARKS.stream().noneMatch(b -> b.name().equals(n))) unknown(n);
    env.put("TICKMARK_BENCH_DB_URL", dbUrl);
    env.put("TICKMARK_DB_USER", dbUser);
    if (dbPassword != null) env.put("TICKMARK_DB_PASSWORD", dbPassword);
    Files.createDirectories(logs);

    String commit = System.getProperty("tickmark.bench.commit", "?");
    String startLoad = loadAverage();
    long t0 = System.nanoTime();
    OUT.println("== All benchmarks, short ==");
    OUT.println(
        "started "
            + DateTimeFormatter.ISO_INSTANT.format(
                Instant.now().truncatedTo(java.time.temporal.ChronoUnit.SECONDS))
            + ", commit "
            + commit
            + "; machine: "
            + MarketBenchSupport.machine());
    OUT.println("load average at start: " + startLoad);
    OUT.println("logs: " + logs.toAbsolutePath());
    String dbProblem = databaseProblem(dbUrl, dbUser, dbPassword == null ? "" : dbPassword);
    if (dbProblem != null) OUT.println("database: " + dbProblem);

    List<Outcome> outcomes = new ArrayList<>();
    for (Bench b : BENCHMARKS) {
      if ((!only.isEmpty() && !only.contains(b.name())) || skip.contains(b.name())) continue;
      String why = null;
      List<String> missing = b.tools().stream().filter(t -> !onPath(t)).toList();
      if (!missing.isEmpty()) why = "skipped: " + String.join(", ", missing) + " not installed";
      else if (b.database() && dbProblem != null) why = "skipped: " + dbProblem;
      if (why != null) {
        OUT.printf("-- %s: %s%n", b.name(), why);
        outcomes.add(new Outcome(b, why, List.of(), 0, load1(), null));
        continue;
      }
      outcomes.add(run(b, timeout > 0 ? timeout : b.timeoutSeconds(), logs, env, echo));
    }
    String endLoad = loadAverage();
    double total = (System.nanoTime() - t0) / 1e9;

    OUT.println();
    OUT.println("== All benchmarks, short: summary ==");
    OUT.printf(
        Locale.ROOT,
        "commit %s, %s; %.0f s in all; load average (1, 5, 15 min) at start %s, at end %s%n",
        commit,
        DateTimeFormatter.ofPattern("yyyy-MM-dd HH:mm 'UTC'")
            .withZone(ZoneOffset.UTC)
            .format(Instant.now()),
        total,
        startLoad,
        endLoad);
    OUT.println();
    table(outcomes).forEach(OUT::println);
    OUT.println();
    OUT.println(
        "ratio = value ÷ the baseline measured in the same run (same JVM or same PostgreSQL); load = 1-minute"
            + " load average when the benchmark started; a target applies at the size the issue names, so"
            + " rows of other sizes say 'n/a'. Short runs: figures are indicative, not the documented ones.");
    try (PrintWriter w =
        new PrintWriter(
            Files.newBufferedWriter(logs.resolve("summary.md"), StandardCharsets.UTF_8))) {
      w.printf(
          Locale.ROOT,
          "commit %s; load average at start %s, at end %s; %.0f s%n%n",
          commit,
          startLoad,
          endLoad,
          total);
      table(outcomes).forEach(w::println);
    }
    boolean anyFailed =
        outcomes.stream()
            .anyMatch(o -> !o.status().equals("ok") && !o.status().startsWith("skipped"));
    System.exit(anyFailed ? 1 : 0);
  }

  private static void unknown(String n) {
    System.err.println(
        "unknown benchmark "
            + n
            + "; known: "
            + BENCHMARKS.stream().map(Bench::name).collect(Collectors.joining(", ")));
    System.exit(2);
  }

  /** Runs one benchmark in a JVM of its own; its output goes to a log file. */
  static Outcome run(Bench b, int timeout, Path logs, Map<String, String> env, boolean echo)
      throws Exception {
    List<String> command = new ArrayList<>();
    command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
    command.addAll(b.jvm());
    command.add("-cp");
    command.add(System.getProperty("java.class.path"));
    command.add("dev.tickmark.bench." + b.main());
    command.addAll(b.args());
    Path log = logs.resolve(b.name() + ".log");
    double load = load1();
    OUT.printf(
        Locale.ROOT,
        "-- %s: %s %s (load %.2f, at most %d s, log %s)%n",
        b.name(),
        b.main(),
        String.join(" ", b.args()),
        load,
        timeout,
        log);
    ProcessBuilder pb = new ProcessBuilder(command).redirectErrorStream(true);
    pb.environment().clear();
    pb.environment().putAll(env);
    pb.redirectInput(ProcessBuilder.Redirect.from(new java.io.File("/dev/null")));
    long t0 = System.nanoTime();
    Process p = pb.start();
    List<BenchResult> results = new ArrayList<>();
    Thread reader =
        new Thread(
            () -> {
              try (BufferedReader r =
                      new BufferedReader(
                          new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8));
                  PrintWriter w =
                      new PrintWriter(Files.newBufferedWriter(log, StandardCharsets.UTF_8), true)) {
                w.println("# " + String.join(" ", command));
                for (String line; (line = r.readLine()) != null; ) {
                  w.println(line);
                  BenchResult res = BenchResult.parse(line);
                  if (res != null) {
                    synchronized (results) {
                      results.add(res);
                    }
                  }
                  if (echo) OUT.println("   " + b.name() + "| " + line);
                }
              } catch (IOException e) {
                OUT.println("   " + b.name() + ": reading its output failed: " + e);
              }
            },
            "read-" + b.name());
    reader.setDaemon(true);
    reader.start();
    String status;
    if (p.waitFor(timeout, TimeUnit.SECONDS)) {
      status = p.exitValue() == 0 ? "ok" : "exit " + p.exitValue();
    } else {
      status = "timed out after " + timeout + " s";
      stop(p);
    }
    reader.join(10_000);
    double seconds = (System.nanoTime() - t0) / 1e9;
    List<BenchResult> copy;
    synchronized (results) {
      copy = List.copyOf(results);
    }
    OUT.printf(
        Locale.ROOT, "   %s: %s in %.0f s, %d figure(s)%n", b.name(), status, seconds, copy.size());
    return new Outcome(b, status, copy, seconds, load, log);
  }

  /**
   * Stops a benchmark that ran over: SIGTERM first (its shutdown hooks stop the node processes it
   * started and drop its database), then SIGKILL for it and whatever it started that is left.
   */
  static void stop(Process p) throws InterruptedException {
    List<ProcessHandle> children = p.descendants().toList();
    p.destroy();
    if (!p.waitFor(30, TimeUnit.SECONDS)) p.destroyForcibly();
    p.waitFor(10, TimeUnit.SECONDS);
    for (ProcessHandle c : children) if (c.isAlive()) c.destroyForcibly();
  }

  /** The summary as a Markdown table. */
  static List<String> table(List<Outcome> outcomes) {
    List<String> lines = new ArrayList<>();
    lines.add(
        "| benchmark | measure | value | same-run baseline | ratio | target (issue 15) | result | load | s |");
    lines.add("|---|---|---:|---:|---:|---|---|---:|---:|");
    for (Outcome o : outcomes) {
      String load = String.format(Locale.ROOT, "%.1f", o.loadAtStart());
      String secs = o.seconds() == 0 ? "" : String.format(Locale.ROOT, "%.0f", o.seconds());
      if (o.results().isEmpty()) {
        String why = o.status().equals("ok") ? "no figures printed" : o.status();
        if (o.log() != null && !o.status().startsWith("skipped")) why += " (log " + o.log() + ")";
        lines.add(
            "| "
                + o.bench().name()
                + " | — | — | — | — | — | "
                + why
                + " | "
                + load
                + " | "
                + secs
                + " |");
        continue;
      }
      boolean first = true;
      for (BenchResult r : o.results()) {
        Target t = TARGETS.stream().filter(x -> x.appliesTo().test(r)).findFirst().orElse(null);
        String result;
        if (t == null) result = "";
        else if (t.met() == null) result = "n/a";
        else result = t.met().test(r) ? "**pass**" : "**miss**";
        if (!o.status().equals("ok")) result = (result.isEmpty() ? "" : result + "; ") + o.status();
        String measure = r.measure() + (r.note().isEmpty() ? "" : " (" + r.note() + ")");
        lines.add(
            "| "
                + (first ? o.bench().name() : "")
                + " | "
                + measure
                + " | "
                + number(r.value())
                + " "
                + r.unit()
                + " | "
                + (Double.isNaN(r.baseline()) ? "—" : number(r.baseline()) + " " + r.baselineOf())
                + " | "
                + (Double.isNaN(r.ratio()) ? "—" : String.format(Locale.ROOT, "%.3f", r.ratio()))
                + " | "
                + (t == null ? "" : t.text())
                + " | "
                + result
                + " | "
                + (first ? load : "")
                + " | "
                + (first ? secs : "")
                + " |");
        first = false;
      }
    }
    return lines;
  }

  static String number(double v) {
    if (Double.isNaN(v)) return "—";
    double a = Math.abs(v);
    if (v == Math.rint(v)) return String.format(Locale.ROOT, "%,.0f", v);
    if (a >= 100) return String.format(Locale.ROOT, "%,.0f", v);
    if (a >= 10) return String.format(Locale.ROOT, "%.1f", v);
    return String.format(Locale.ROOT, "%.2f", v);
  }

  /** Why the benchmarks cannot reach the database, or null when they can. */
  static String databaseProblem(String url, String user, String password) {
    try (Connection c = DriverManager.getConnection(url, user, password)) {
      return c.isValid(5) ? null : "PostgreSQL at " + url + " does not answer";
    } catch (Exception e) {
      return "PostgreSQL at " + url + " not reachable (" + e.getMessage() + ")";
    }
  }

  static boolean onPath(String tool) {
    String path = System.getenv("PATH");
    if (path == null) return false;
    for (String dir : path.split(java.io.File.pathSeparator)) {
      if (!dir.isEmpty() && Files.isExecutable(Path.of(dir, tool))) return true;
    }
    return false;
  }

  /** The three load averages, as /proc/loadavg has them. */
  static String loadAverage() {
    try {
      String[] f = Files.readString(Path.of("/proc/loadavg")).trim().split("\\s+");
      return f[0] + ", " + f[1] + ", " + f[2];
    } catch (Exception e) {
      return String.format(
          Locale.ROOT,
          "%.2f",
          java.lang.management.ManagementFactory.getOperatingSystemMXBean().getSystemLoadAverage());
    }
  }

  static double load1() {
    return java.lang.management.ManagementFactory.getOperatingSystemMXBean().getSystemLoadAverage();
  }

  private static Set<String> names(String csv) {
    return Arrays.stream(csv.split(","))
        .map(String::trim)
        .filter(s -> !s.isEmpty())
        .collect(Collectors.toCollection(java.util.LinkedHashSet::new));
  }

  @SafeVarargs
  private static List<String> concat(List<String>... parts) {
    List<String> all = new ArrayList<>();
    for (List<String> p : parts) all.addAll(p);
    return all;
  }

  private static String first(String... values) {
    for (String v : values) if (v != null && !v.isBlank()) return v;
    return null;
  }
}
