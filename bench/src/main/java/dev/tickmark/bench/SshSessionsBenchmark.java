package dev.tickmark.bench;

import dev.tickmark.agent.Agent;
import dev.tickmark.bench.MarketBenchSupport.Args;
import dev.tickmark.bench.MarketBenchSupport.BenchDatabase;
import dev.tickmark.bench.MarketBenchSupport.DbConfig;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/**
 * Many SSH sessions at once through one node: {@code --rentals} rentals (1 card each) on real
 * agents in this JVM ({@code h100-80gb:8} each, process runtime, their embedded SSH servers), and
 * {@code --sessions-per-rental} OpenSSH sessions on each, all started together, each running a
 * short loop ({@code echo ready; for i in $(seq 1 N); do echo $i; sleep 0.1; done}). The node is a
 * separate process ({@code dev.tickmark.node.Main}) on a fresh PostgreSQL database.
 *
 * <p>Two ways for ssh to reach the node, each a phase of its own ({@code --proxy}):
 *
 * <ul>
 *   <li>{@code bridge}: {@code tickmark connect}'s websocket made inside this JVM ({@link
 *       SshBenchSupport.Bridge}), ssh connecting to its loopback port: what the engine costs, with
 *       no client JVM per session;
 *   <li>{@code cli}: the real {@code tickmark connect} as ssh's ProxyCommand, one CLI JVM per
 *       session, as renters run it.
 * </ul>
 *
 * Prints, per phase, sessions set up per second, the setup latency (ssh started → the remote
 * shell's first line read) at p50/p99/max, how many exited 0 with every line, the peak of sessions
 * open at once, and the CPU of the node, PostgreSQL and the machine.
 */
public final class SshSessionsBenchmark {
  static {
    dev.tickmark.node.CommonPool.ensureParallelism();
  }

  private static final PrintStream OUT = System.out;

  static final String USAGE =
      """
      Usage: SshSessionsBenchmark [--option=value ...]
        --rentals=N              rentals, 1 card each (default 50)
        --sessions-per-rental=N  ssh sessions on each, started together (default 2; at most 8 per rental)
        --loop=N                 lines each session prints, 0.1 s apart (default 50)
        --proxy=bridge,cli       the phases, in order (default both)
        --start-rate=N           ssh processes started per second (default 0: all at once)
        --node-heap=SIZE         -Xmx of the node (default 768m)
        --db-url=URL --db-user=U --db-password=P --keep-database
      """;

  private SshSessionsBenchmark() {}

  /** One session's times (nanoTime) and outcome. */
  static final class Session {
    long started;
    volatile long ready;
    volatile long ended;
    volatile int lines;
    volatile int exit = -1;
    final StringBuilder firstLines = new StringBuilder();
  }

  public static void main(String[] argv) throws Exception {
    MarketBenchSupport.quietLogs();
    Args args = new Args(argv);
    if (args.flag("help")) {
      OUT.print(USAGE);
      return;
    }
    int rentals = args.integer("rentals", 50);
    int perRental = args.integer("sessions-per-rental", 2);
    int loop = args.integer("loop", 50);
    List<String> phases = Arrays.asList(args.string("proxy", "bridge,cli").split(","));
    int startRate = args.integer("start-rate", 0);
    String heap = args.string("node-heap", "768m");
    DbConfig dbConfig = DbConfig.of(args);
    args.requireEmpty();

    OUT.println("machine: " + MarketBenchSupport.machine());
    Path temp = Files.createTempDirectory("tickmark-ssh-sessions-bench");
    FailoverBenchmark.Http http = new FailoverBenchmark.Http();
    List<Agent> agents = new ArrayList<>();
    try (BenchDatabase db = BenchDatabase.create(dbConfig, "tickmark_sessions");
        FailoverBenchmark.Cluster cluster =
            new FailoverBenchmark.Cluster(
                db,
                1,
                heap,
                "-Dtickmark.verification.min-disk-write-mib-per-s=10",
                Path.of("target/ssh-sessions-bench"));
        SshBenchSupport.Bridge bridge = new SshBenchSupport.Bridge()) {
      Runtime.getRuntime()
          .addShutdownHook(
              new Thread(
                  () -> {
                    for (Process p : cluster.processes) if (p != null) p.destroyForcibly();
                  }));
      cluster.startAll();
      String url = cluster.url(1);
      long nodePid = cluster.processes[0].pid();
      String providerKey =
          http.post(url + "/v1/accounts", null, "{\"name\":\"ssh provider\"}", 201)
              .get("api_key")
              .asText();
      int hosts = (rentals + 7) / 8;
      long t0 = System.nanoTime();
      for (int i = 0; i < hosts; i++)
        agents.add(
            SshBenchSupport.listedAgent(
                http, url, cluster.ws(1), providerKey, "h100-80gb:8", temp.resolve("agent-" + i)));
      OUT.printf(
          Locale.ROOT,
          "%d agents (8 cards each) verified and listed in %.1f s%n",
          hosts,
          secondsSince(t0));
      awaitCards(http, url, hosts * 8);

      String renterKey = SshBenchSupport.renter(http, url, FailoverBenchmark.OPERATOR, "renter");
      Path key = SshBenchSupport.keygen(temp, "renter");
      String publicKey = Files.readString(Path.of(key + ".pub")).strip();
      t0 = System.nanoTime();
      List<CompletableFuture<String>> launches = new ArrayList<>();
      for (int i = 0; i < rentals; i++)
        launches.add(SshBenchSupport.launch(http, url, renterKey, publicKey, "ssh-bench-" + i));
      List<String> ids = new ArrayList<>();
      for (var l : launches) ids.add(l.get(300, TimeUnit.SECONDS));
      Map<String, String> hostKeys = new LinkedHashMap<>();
      for (String id : ids)
        hostKeys.put(id, SshBenchSupport.awaitRunning(http, url, renterKey, id, 300));
      Path knownHosts = temp.resolve("known_hosts");
      SshBenchSupport.writeKnownHosts(knownHosts, hostKeys);
      OUT.printf(Locale.ROOT, "%d rentals running in %.1f s%n", ids.size(), secondsSince(t0));
      Map<String, String> env = SshBenchSupport.renterEnv(url, renterKey, temp);
      Map<String, Integer> bridgePorts = new LinkedHashMap<>();
      for (String id : ids) bridgePorts.put(id, bridge.open(cluster.ws(1), id, renterKey));

      String remote = "echo ready; for i in $(seq 1 " + loop + "); do echo $i; sleep 0.1; done";
      for (String phase : phases) {
        Thread.sleep(3000); // let the previous phase's sessions close
        List<Session> sessions = new ArrayList<>();
        List<Thread> readers = new ArrayList<>();
        CpuSample m0 = CpuSample.take(db.name);
        double n0 = MarketBenchSupport.processCpuSeconds(nodePid);
        long phaseStart = System.nanoTime();
        for (int s = 0; s < perRental; s++) {
          for (String id : ids) {
            List<String> command = new ArrayList<>(List.of("ssh", "-T"));
            String host = "tickmark@" + id;
            String proxy = null;
            if (phase.equals("bridge")) {
              command.addAll(List.of("-p", Integer.toString(bridgePorts.get(id))));
              host = "tickmark@127.0.0.1";
            } else if (phase.equals("cli")) {
              proxy = SshBenchSupport.cliProxy(id);
            } else {
              throw new IllegalArgumentException("--proxy: bridge or cli, not " + phase);
            }
            command.addAll(SshBenchSupport.options(proxy, id, knownHosts, key));
            command.add(host);
            command.add(remote);
            if (startRate > 0) {
              long due = phaseStart + sessions.size() * 1_000_000_000L / startRate;
              long wait = due - System.nanoTime();
              if (wait > 0) Thread.sleep(wait / 1_000_000, (int) (wait % 1_000_000));
            }
            Session session = new Session();
            session.started = System.nanoTime();
            Process p = SshBenchSupport.start(command, env);
            sessions.add(session);
            Thread reader =
                new Thread(
                    () -> {
                      try (BufferedReader r =
                          new BufferedReader(
                              new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
                        for (String line; (line = r.readLine()) != null; ) {
                          if (line.equals("ready") && session.ready == 0)
                            session.ready = System.nanoTime();
                          else if (session.ready != 0 && line.matches("\\d+")) session.lines++;
                          else if (session.firstLines.length() < 500)
                            session.firstLines.append(line).append(" | ");
                        }
                        session.exit = p.waitFor();
                      } catch (Exception e) {
                        session.firstLines.append(e);
                      }
                      session.ended = System.nanoTime();
                    },
                    "ssh-reader");
            reader.setDaemon(true);
            reader.start();
            readers.add(reader);
          }
        }
        long spawned = System.nanoTime();
        for (Thread t : readers) t.join(600_000);
        double n1 = MarketBenchSupport.processCpuSeconds(nodePid);
        CpuSample.Usage u = m0.until(CpuSample.take(db.name));
        report(phase, sessions, loop, phaseStart, spawned, n1 - n0, u);
      }
      for (Agent a : agents) a.close();
      agents.clear();
    } finally {
      for (Agent a : agents) a.close();
    }
  }

  static void report(
      String phase,
      List<Session> sessions,
      int loop,
      long phaseStart,
      long spawned,
      double nodeCpuSeconds,
      CpuSample.Usage u) {
    int ok = 0;
    long lastReady = phaseStart;
    List<Long> setup = new ArrayList<>();
    List<long[]> open = new ArrayList<>();
    String sample = null;
    for (Session s : sessions) {
      boolean good = s.exit == 0 && s.ready != 0 && s.lines == loop;
      if (good) ok++;
      else if (sample == null)
        sample = "exit " + s.exit + ", " + s.lines + " lines: " + s.firstLines;
      if (s.ready != 0) {
        setup.add((s.ready - s.started) / 1000);
        lastReady = Math.max(lastReady, s.ready);
        open.add(new long[] {s.ready, s.ended});
      }
    }
    long[] sorted = setup.stream().mapToLong(Long::longValue).sorted().toArray();
    // the most sessions whose shells were running at one instant
    List<long[]> events = new ArrayList<>();
    for (long[] o : open) {
      events.add(new long[] {o[0], 1});
      events.add(new long[] {o[1], -1});
    }
    events.sort((a, b) -> a[0] != b[0] ? Long.compare(a[0], b[0]) : Long.compare(a[1], b[1]));
    int now = 0;
    int peak = 0;
    for (long[] e : events) peak = Math.max(peak, now += (int) e[1]);
    double setupWindow = (lastReady - phaseStart) / 1e9;
    double phaseSeconds = (System.nanoTime() - phaseStart) / 1e9;
    OUT.printf(
        Locale.ROOT,
        "PHASE %s: %d sessions (spawned in %.1f s), %d exited 0 with all %d lines; %d set up in"
            + " %.1f s = %.1f sessions/s; setup p50 %s p99 %s max %s ms; peak %d open at once;"
            + " phase %.1f s, node CPU %.1f s (%.2f cores), PostgreSQL %.2f cores, this JVM (agents'"
            + " SSH servers, bridge) %.2f cores, machine %.2f cores%n",
        phase,
        sessions.size(),
        (spawned - phaseStart) / 1e9,
        ok,
        loop,
        sorted.length,
        setupWindow,
        sorted.length / setupWindow,
        MarketBenchSupport.ms(MarketBenchSupport.quantile(sorted, 0.5)),
        MarketBenchSupport.ms(MarketBenchSupport.quantile(sorted, 0.99)),
        MarketBenchSupport.ms(sorted.length == 0 ? 0 : sorted[sorted.length - 1]),
        peak,
        phaseSeconds,
        nodeCpuSeconds,
        nodeCpuSeconds / phaseSeconds,
        u.postgresCores(),
        u.jvmCores(),
        u.machineCores());
    if (sample != null) OUT.println("  a failed session: " + sample);
    String note =
        String.format(
            Locale.ROOT,
            "%d sessions started in %.1f s; setup p99 %s ms; node %.2f cores",
            sessions.size(),
            (spawned - phaseStart) / 1e9,
            MarketBenchSupport.ms(MarketBenchSupport.quantile(sorted, 0.99)),
            nodeCpuSeconds / phaseSeconds);
    BenchResult.against(
            "ssh-sessions",
            "ssh-sessions." + phase,
            "ssh sessions completed ÷ started, via "
                + (phase.equals("cli") ? "tickmark connect" : "in-JVM bridge"),
            ok,
            "sessions",
            sessions.size(),
            "sessions started")
        .withNote(note)
        .print(OUT);
  }

  static void awaitCards(FailoverBenchmark.Http http, String url, int cards) throws Exception {
    long t0 = System.nanoTime();
    while (secondsSince(t0) < 120) {
      int seen = 0;
      for (var o : http.get(url + "/v1/offers?gpu=h100-80gb&tier=on_demand").get("offers"))
        seen += o.get("available_cards").asInt();
      if (seen >= cards) return;
      Thread.sleep(500);
    }
    OUT.println("# not every card is offered after 120 s");
  }

  static double secondsSince(long nanos) {
    return (System.nanoTime() - nanos) / 1e9;
  }
}
