package dev.tickmark.bench;

import dev.tickmark.bench.MarketBenchSupport.Args;
import dev.tickmark.bench.MarketBenchSupport.BenchDatabase;
import dev.tickmark.bench.MarketBenchSupport.HistogramSnapshot;
import dev.tickmark.engine.metrics.EngineMetrics;
import dev.tickmark.node.Node;
import dev.tickmark.node.NodeSettings;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.PrintStream;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

/**
 * How many host agents one node holds: N simulated agents keep websocket sessions and heartbeat
 * every 5 s against one in-JVM node, for each N in {@code --agents} (ascending; the swarm only
 * grows). Not a test: a program that measures and prints.
 *
 * <p>The agents are an {@link AgentSwarm} in a child JVM (its own heap, CPU and file descriptors),
 * so this JVM's CPU and heap are the node's. Per N: ramp up (registration over HTTP and the
 * websocket, concurrently {@code --registration} at a time), let every agent heartbeat at least
 * once, then measure a window: sessions held (the node's count and the swarm's), heartbeats handled
 * per second against the N/5 expected, heartbeat handling latency p50/p99/p999 (socket read → host
 * entity, from {@link EngineMetrics#heartbeatHandling}, only what was recorded in the window),
 * cores used by the node JVM, this database's PostgreSQL, the swarm and everything else, and the
 * node's heap after a full GC. The baseline, measured in the same run, is the idle node before the
 * first agent.
 */
public final class AgentHeartbeatBenchmark {
  static {
    dev.tickmark.node.CommonPool.ensureParallelism(); // as the node's Main does
  }

  private static final PrintStream OUT = System.out;

  static final String USAGE =
      """
      Usage: AgentHeartbeatBenchmark [--option=value ...]
        --agents=1000,5000,10000   swarm sizes, ascending (default 1000,5000,10000)
        --window=S                 measured seconds per size (default 30)
        --settle=S                 seconds between reaching a size and its window (default 8; at least one interval)
        --interval=S               heartbeat interval the node announces and the swarm keeps (default 5)
        --registration=N           concurrent registrations while ramping up (default 100)
        --ramp-timeout=S           stop growing toward a size after S seconds and measure what was reached (default 600)
        --clients=N                HttpClients the swarm shares among its websockets (default 4)
        --swarm-heap=SIZE          the swarm JVM's -Xmx (default 2g)
        --max-connections=N        pekko.http.server.max-connections for the node (default: largest size + 1000;
                                   Pekko's own default, 1024, caps a node at ~1000 agents; "default" keeps it)
        --db-url=URL --db-user=U --db-password=P   admin connection (default $TICKMARK_DB_URL or
                                   jdbc:postgresql://127.0.0.1:5432/postgres); a fresh database is created and dropped
        --keep-database
      """;

  private AgentHeartbeatBenchmark() {}

  record Stage(
      int target,
      int verified,
      int nodeSessions,
      int swarmOpen,
      double rampSeconds,
      long heartbeats,
      double seconds,
      HistogramSnapshot latency,
      CpuSample.Usage cpu,
      double swarmCores,
      double heapMib,
      int nodeFds,
      String swarmStats) {}

  public static void main(String[] argv) throws Exception {
    MarketBenchSupport.quietLogs();
    Args args;
    int[] sizes;
    int window, settle, interval, registration, clients;
    String swarmHeap, maxConnections;
    int rampTimeout;
    try {
      args = new Args(argv);
      if (args.has("help")) {
        OUT.print(USAGE);
        return;
      }
      sizes = args.integers("agents", "1000,5000,10000");
      Arrays.sort(sizes);
      window = args.integer("window", 30);
      interval = args.integer("interval", 5);
      settle = Math.max(args.integer("settle", 8), interval + 1);
      registration = args.integer("registration", 100);
      rampTimeout = args.integer("ramp-timeout", 600);
      clients = args.integer("clients", 4);
      swarmHeap = args.string("swarm-heap", "2g");
      maxConnections =
          args.string("max-connections", Integer.toString(sizes[sizes.length - 1] + 1000));
    } catch (RuntimeException e) {
      System.err.println(e.getMessage());
      System.err.print(USAGE);
      System.exit(2);
      return;
    }

    OUT.println("== AgentHeartbeatBenchmark ==");
    OUT.println("machine: " + MarketBenchSupport.machine());
    OUT.println(
        "open files limit (node JVM): "
            + MarketBenchSupport.openFilesLimit()
            + "; each agent costs the node one socket and the swarm one socket (separate processes, separate limits)");
    List<Stage> stages = new ArrayList<>();
    String stopReason = null;
    double idleNodeCores = Double.NaN;
    double idleHeap;
    MarketBenchSupport.DbConfig dbConfig;
    try {
      dbConfig = MarketBenchSupport.DbConfig.of(args);
      args.requireEmpty();
    } catch (RuntimeException e) {
      System.err.println(e.getMessage());
      System.err.print(USAGE);
      System.exit(2);
      return;
    }
    try (BenchDatabase db = BenchDatabase.create(dbConfig, "tickmark_bench_agents")) {
      OUT.println("database: " + db.name + " on PostgreSQL " + db.serverVersion);
      NodeSettings ns =
          NodeSettings.fromEnvironment(
                  Map.of(
                      "TICKMARK_OPERATOR_TOKEN",
                      "tmkop_bench_operator_token_0123456789abcdef",
                      "TICKMARK_ALLOW_SIMULATED_HOSTS",
                      "true"))
              .withDatabase(db.url, db.user, db.password)
              .withPorts(0, -1, 0)
              .withExitJvmOnShutdown(false)
              .withConfig("tickmark.hosts.heartbeat-interval", interval + "s")
              // enrolling thousands of hosts with one key is no abuse here
              .withRateLimits(1_000_000, 1_000_000, 1_000_000, 1_000_000);
      if (!maxConnections.equals("default"))
        ns = ns.withConfig("pekko.http.server.max-connections", Integer.parseInt(maxConnections));
      Node node = Node.start(ns);
      Process swarm = null;
      try {
        db.analyzeEvery(10, true);
        EngineMetrics metrics = EngineMetrics.get(node.system());
        OUT.println(
            "node: "
                + node.baseUrl()
                + ", pekko.http.server.max-connections="
                + node.system().settings().config().getInt("pekko.http.server.max-connections")
                + ", heartbeat interval "
                + interval
                + " s, agent frame limit "
                + node.system()
                    .settings()
                    .config()
                    .getInt("tickmark.agent-socket.frames-per-second")
                + "/s");

        // Baseline: the idle node, same run.
        Thread.sleep(3000);
        CpuSample a = CpuSample.take(db.name);
        Thread.sleep(10_000);
        CpuSample.Usage idle = a.until(CpuSample.take(db.name));
        idleNodeCores = idle.known() ? idle.jvmCores() : Double.NaN;
        idleHeap = MarketBenchSupport.heapAfterGcMib();
        OUT.printf(
            Locale.ROOT,
            "baseline (idle node, 10 s): %s; node heap after GC %.0f MiB%n",
            MarketBenchSupport.cores(idle),
            idleHeap);

        swarm = startSwarm(node.baseUrl(), swarmHeap, clients, registration, interval);
        SwarmIo io = new SwarmIo(swarm);
        io.expect("#", 60); // its first log line: it is up

        for (int n : sizes) {
          OUT.printf("-- %,d agents: ramping up%n", n);
          io.send("ramp " + n + " " + rampTimeout);
          Map<String, String> ramped = io.expect("RAMPED", rampTimeout + 120);
          int verified = Integer.parseInt(ramped.get("verified"));
          double rampSeconds = Double.parseDouble(ramped.get("seconds"));
          OUT.printf(
              Locale.ROOT,
              "   %,d verified (%s failed, %s retried) after %.1f s (%.0f/s); node sessions open %d; mean ms per"
                  + " registration: token %s, websocket open %s, to welcome %s, to verified %s%n",
              verified,
              ramped.get("failed"),
              ramped.get("retries"),
              rampSeconds,
              (verified - (stages.isEmpty() ? 0 : stages.get(stages.size() - 1).verified()))
                  / rampSeconds,
              metrics.agentSessionsOpen(),
              ramped.get("ms_token"),
              ramped.get("ms_open"),
              ramped.get("ms_welcome"),
              ramped.get("ms_verified"));
          Thread.sleep(settle * 1000L);

          long hb0 = metrics.heartbeats.sum();
          HistogramSnapshot h0 = HistogramSnapshot.of(metrics.heartbeatHandling);
          CpuSample c0 = CpuSample.take(db.name);
          double s0 = MarketBenchSupport.processCpuSeconds(swarm.pid());
          long t0 = System.nanoTime();
          Thread.sleep(window * 1000L);
          long t1 = System.nanoTime();
          CpuSample c1 = CpuSample.take(db.name);
          double s1 = MarketBenchSupport.processCpuSeconds(swarm.pid());
          HistogramSnapshot h1 = HistogramSnapshot.of(metrics.heartbeatHandling);
          long hb1 = metrics.heartbeats.sum();
          int nodeSessions = (int) metrics.agentSessionsOpen();
          io.send("stats");
          Map<String, String> stats = io.expect("STATS", 60);
          double seconds = (t1 - t0) / 1e9;
          CpuSample.Usage cpu = c0.until(c1);
          double swarmCores = s0 < 0 || s1 < 0 ? Double.NaN : (s1 - s0) / seconds;
          int fds = MarketBenchSupport.openFileDescriptors();
          double heap = MarketBenchSupport.heapAfterGcMib();
          Stage st =
              new Stage(
                  n,
                  verified,
                  nodeSessions,
                  Integer.parseInt(stats.get("open")),
                  rampSeconds,
                  hb1 - hb0,
                  seconds,
                  h1.minus(h0),
                  cpu,
                  swarmCores,
                  heap,
                  fds,
                  stats.toString());
          stages.add(st);
          printStage(st, interval);
          if (verified < n) {
            stopReason =
                String.format(
                    Locale.ROOT,
                    "stopped at %,d of %,d agents: %s",
                    verified,
                    n,
                    "true".equals(ramped.get("timed_out"))
                        ? "registration did not get there within --ramp-timeout="
                            + rampTimeout
                            + " s"
                        : ramped.get("last_error"));
            break;
          }
          double handled = st.heartbeats() / st.seconds();
          if (handled < 0.9 * n / (double) interval) {
            stopReason =
                String.format(
                    Locale.ROOT,
                    "the node handled only %.0f of the %.0f heartbeats/s due at %,d agents",
                    handled,
                    n / (double) interval,
                    n);
            break;
          }
        }
        io.send("quit");
        swarm.waitFor(30, TimeUnit.SECONDS);
      } finally {
        if (swarm != null && swarm.isAlive()) swarm.destroyForcibly();
        node.close();
      }
      OUT.println("database: " + db.analyzeSummary());
    }
    report(stages, interval, idleNodeCores, stopReason);
    System.exit(0);
  }

  private static Process startSwarm(
      String baseUrl, String heap, int clients, int registration, int interval) throws Exception {
    String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
    List<String> cmd =
        new ArrayList<>(
            List.of(
                java,
                "-Xmx" + heap,
                "-XX:+UseSerialGC",
                "-cp",
                System.getProperty("java.class.path"),
                AgentSwarm.class.getName(),
                "--url",
                baseUrl,
                "--clients",
                Integer.toString(clients),
                "--registration",
                Integer.toString(registration),
                "--interval",
                Integer.toString(interval)));
    ProcessBuilder pb = new ProcessBuilder(cmd).redirectError(ProcessBuilder.Redirect.INHERIT);
    return pb.start();
  }

  /** The swarm's stdin and stdout: commands out, answers in (log lines are echoed). */
  static final class SwarmIo {
    private final Writer in;
    private final BlockingQueue<String> lines = new LinkedBlockingQueue<>();

    SwarmIo(Process p) {
      this.in = new OutputStreamWriter(p.getOutputStream(), StandardCharsets.UTF_8);
      Thread reader =
          new Thread(
              () -> {
                try (BufferedReader r =
                    new BufferedReader(
                        new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
                  String line;
                  while ((line = r.readLine()) != null) {
                    if (line.startsWith("#")) OUT.println("   [swarm] " + line.substring(1).trim());
                    lines.add(line);
                  }
                } catch (Exception e) {
                  // the swarm ended
                }
                lines.add("EOF");
              },
              "swarm-reader");
      reader.setDaemon(true);
      reader.start();
    }

    void send(String command) throws Exception {
      in.write(command + "\n");
      in.flush();
    }

    /** Waits for a line starting with {@code prefix}; answers its key=value pairs. */
    Map<String, String> expect(String prefix, int seconds) throws Exception {
      long deadline = System.nanoTime() + seconds * 1_000_000_000L;
      while (true) {
        long left = deadline - System.nanoTime();
        String line = left <= 0 ? null : lines.poll(left, TimeUnit.NANOSECONDS);
        if (line == null)
          throw new IllegalStateException(
              "the swarm did not answer " + prefix + " within " + seconds + " s");
        if (line.equals("EOF")) throw new IllegalStateException("the swarm ended");
        if (line.startsWith(prefix)) {
          Map<String, String> kv = new HashMap<>();
          for (String word : line.split("\\s+")) {
            int eq = word.indexOf('=');
            if (eq > 0) kv.put(word.substring(0, eq), word.substring(eq + 1));
          }
          return kv;
        }
      }
    }
  }

  private static void printStage(Stage s, int interval) {
    double due = s.verified() / (double) interval;
    OUT.printf(
        Locale.ROOT,
        "   window %.0f s: sessions node %,d / swarm %,d; heartbeats %,.0f/s of %,.0f/s due (%.3f);"
            + " handling p50 %s ms, p99 %s ms, p999 %s ms, max %s ms (%,d recorded)%n",
        s.seconds(),
        s.nodeSessions(),
        s.swarmOpen(),
        s.heartbeats() / s.seconds(),
        due,
        s.heartbeats() / s.seconds() / due,
        MarketBenchSupport.ms(s.latency().quantileMicros(0.50)),
        MarketBenchSupport.ms(s.latency().quantileMicros(0.99)),
        MarketBenchSupport.ms(s.latency().quantileMicros(0.999)),
        MarketBenchSupport.ms(s.latency().maxMicros()),
        s.latency().count());
    OUT.printf(
        Locale.ROOT,
        "   cores: %s (of which the swarm %.2f); node heap after GC %.0f MiB; node open fds %,d%n",
        MarketBenchSupport.cores(s.cpu()),
        s.swarmCores(),
        s.heapMib(),
        s.nodeFds());
    OUT.println("   swarm: " + s.swarmStats());
  }

  private static void report(
      List<Stage> stages, int interval, double idleNodeCores, String stopReason) {
    OUT.println();
    OUT.println("== Agent sessions and heartbeats on one node ==");
    OUT.printf(Locale.ROOT, "baseline: idle node JVM %.2f cores%n", idleNodeCores);
    String header =
        String.format(
            Locale.ROOT,
            "%8s %8s %8s %8s %9s %6s %8s %8s %8s %8s %9s %6s %6s %6s %6s %8s %10s",
            "agents",
            "verified",
            "node ses",
            "ramp s",
            "hb/s",
            "ratio",
            "p50 ms",
            "p99 ms",
            "p999 ms",
            "max ms",
            "node cpu",
            "pg",
            "swarm",
            "other",
            "mach",
            "heap MiB",
            "µs/hb(cpu)");
    OUT.println(header);
    OUT.println("-".repeat(header.length()));
    for (Stage s : stages) {
      double hbs = s.heartbeats() / s.seconds();
      double nodeCores = s.cpu().known() ? s.cpu().jvmCores() : Double.NaN;
      double other =
          s.cpu().known() ? Math.max(0, s.cpu().otherCores() - s.swarmCores()) : Double.NaN;
      OUT.printf(
          Locale.ROOT,
          "%,8d %,8d %,8d %8.1f %,9.0f %6.3f %8s %8s %8s %8s %9.2f %6.2f %6.2f %6.2f %6.2f %,8.0f %10.0f%n",
          s.target(),
          s.verified(),
          s.nodeSessions(),
          s.rampSeconds(),
          hbs,
          hbs / (s.verified() / (double) interval),
          MarketBenchSupport.ms(s.latency().quantileMicros(0.50)),
          MarketBenchSupport.ms(s.latency().quantileMicros(0.99)),
          MarketBenchSupport.ms(s.latency().quantileMicros(0.999)),
          MarketBenchSupport.ms(s.latency().maxMicros()),
          nodeCores,
          s.cpu().postgresCores(),
          s.swarmCores(),
          other,
          s.cpu().machineCores(),
          s.heapMib(),
          hbs > 0 ? (nodeCores - idleNodeCores) * 1e6 / hbs : Double.NaN);
    }
    OUT.println(
        "ratio = heartbeats handled / heartbeats due (agents / interval); µs/hb(cpu) = node JVM CPU above the idle"
            + " baseline per heartbeat handled");
    if (stopReason != null) OUT.println("stopped: " + stopReason);
    StringBuilder line = new StringBuilder("RESULT");
    for (Stage s : stages) {
      line.append(
          String.format(
              Locale.ROOT,
              " n%d_sessions=%d n%d_hb_per_s=%.0f n%d_p99_ms=%s n%d_node_cores=%.2f",
              s.target(),
              s.nodeSessions(),
              s.target(),
              s.heartbeats() / s.seconds(),
              s.target(),
              MarketBenchSupport.ms(s.latency().quantileMicros(0.99)),
              s.target(),
              s.cpu().jvmCores()));
    }
    OUT.println(line);
    for (Stage s : stages) {
      double due = s.verified() / (double) interval;
      BenchResult.against(
              "agent-heartbeat",
              "heartbeats@" + s.target(),
              "heartbeats handled ÷ due, " + s.target() + " agents",
              s.heartbeats() / s.seconds(),
              "heartbeats/s",
              due,
              "heartbeats due/s (verified agents ÷ interval)")
          .withNote(
              String.format(
                  Locale.ROOT,
                  "%,d verified, %,d sessions; handling p99 %s ms",
                  s.verified(),
                  s.nodeSessions(),
                  MarketBenchSupport.ms(s.latency().quantileMicros(0.99))))
          .print(OUT);
    }
  }
}
