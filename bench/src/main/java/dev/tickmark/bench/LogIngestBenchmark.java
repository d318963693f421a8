package dev.tickmark.bench;

import com.fasterxml.jackson.databind.JsonNode;
import dev.tickmark.bench.FailoverBenchmark.BenchAgent;
import dev.tickmark.bench.MarketBenchSupport.Args;
import dev.tickmark.bench.MarketBenchSupport.BenchDatabase;
import dev.tickmark.bench.MarketBenchSupport.DbConfig;
import java.io.PrintStream;
import java.net.URI;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;

/**
 * Log ingest on one node: {@code --rentals} running rentals on light scripted agents in this JVM
 * ({@link BenchAgent}: the agent protocol over websockets, {@code --cards} cards each, no
 * processes), every rental printing {@code --lines-per-second} lines, sent as {@code logs} frames
 * (the agents' free frame slots, 10 a second each, under the node's 20 a second; at most 300 lines
 * a frame) and stored by the node in PostgreSQL ({@code rental_logs}). The node is a separate
 * process on a fresh database. After {@code --warmup} seconds it measures {@code --duration}
 * seconds: lines acknowledged ({@code logs_ack}: stored and committed) per second against lines
 * offered, lines in the table, what is due but not yet sent or sent but not yet acknowledged at the
 * end (growing = not keeping up), and the CPU of the node, PostgreSQL and the machine.
 */
public final class LogIngestBenchmark {
  static {
    dev.tickmark.node.CommonPool.ensureParallelism();
  }

  private static final PrintStream OUT = System.out;

  static final String USAGE =
      """
      Usage: LogIngestBenchmark [--option=value ...]
        --rentals=N           running rentals (default 1000)
        --lines-per-second=N  lines each rental prints a second (default 100)
        --cards=N             cards per scripted agent (default 8; agents = rentals / cards)
        --warmup=S            seconds of logs before measuring (default 10)
        --duration=S          seconds measured (default 30)
        --node-heap=SIZE      -Xmx of the node (default 768m)
        --db-url=URL --db-user=U --db-password=P --keep-database
      """;

  private LogIngestBenchmark() {}

  public static void main(String[] argv) throws Exception {
    MarketBenchSupport.quietLogs();
    Args args = new Args(argv);
    if (args.flag("help")) {
      OUT.print(USAGE);
      return;
    }
    int rentals = args.integer("rentals", 1000);
    int rate = args.integer("lines-per-second", 100);
    int cards = args.integer("cards", 8);
    int warmup = args.integer("warmup", 10);
    int duration = args.integer("duration", 30);
    String heap = args.string("node-heap", "768m");
    DbConfig dbConfig = DbConfig.of(args);
    args.requireEmpty();

    OUT.println("machine: " + MarketBenchSupport.machine());
    FailoverBenchmark.Http http = new FailoverBenchmark.Http();
    List<BenchAgent> agents = new ArrayList<>();
    try (BenchDatabase db = BenchDatabase.create(dbConfig, "tickmark_logs");
        FailoverBenchmark.Cluster cluster =
            new FailoverBenchmark.Cluster(db, 1, heap, "", Path.of("target/log-ingest-bench"))) {
      db.analyzeEvery(10, true);
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
      long nodePid = cluster.processes[0].pid();
      String providerKey =
          http.post(url + "/v1/accounts", null, "{\"name\":\"log provider\"}", 201)
              .get("api_key")
              .asText();
      int renters = Math.max(1, rentals / 20);
      List<String> renterKeys = new ArrayList<>();
      for (int i = 0; i < renters; i++)
        renterKeys.add(
            SshBenchSupport.renter(http, url, FailoverBenchmark.OPERATOR, "log renter " + i));

      int hosts = (rentals + cards - 1) / cards;
      MarketBenchmark.Model h100 = MarketBenchmark.MODELS.get(0);
      BenchAgent.startTicker();
      t0 = System.nanoTime();
      Semaphore permits = new Semaphore(20);
      List<CompletableFuture<JsonNode>> ready = new ArrayList<>();
      for (int i = 0; i < hosts; i++) {
        permits.acquire();
        String token =
            http.post(
                    url + "/v1/hosts/registration-tokens",
                    providerKey,
                    "{\"region\":\"eu-nl\"}",
                    201)
                .get("token")
                .asText();
        BenchAgent agent =
            new BenchAgent(i, List.of(URI.create(cluster.ws(1))), token, cards, h100);
        agents.add(agent);
        CompletableFuture<JsonNode> listed =
            agent
                .start()
                .thenCompose(
                    hostId ->
                        http.<JsonNode>postAsync(
                            "PUT",
                            url + "/v1/hosts/" + hostId + "/listing",
                            providerKey,
                            "{\"on_demand_price_per_gpu_hour\":\"2.49\",\"listed\":true}",
                            200));
        listed.whenComplete((x, e) -> permits.release());
        ready.add(listed);
      }
      CompletableFuture.allOf(ready.toArray(CompletableFuture[]::new)).get(600, TimeUnit.SECONDS);
      OUT.printf(
          Locale.ROOT,
          "%d scripted agents (%d cards each) listed in %.1f s%n",
          hosts,
          cards,
          secondsSince(t0));
      SshSessionsBenchmark.awaitCards(http, url, hosts * cards);

      t0 = System.nanoTime();
      Semaphore inFlight = new Semaphore(16);
      List<CompletableFuture<JsonNode>> launches = new ArrayList<>();
      java.util.concurrent.atomic.AtomicInteger retries =
          new java.util.concurrent.atomic.AtomicInteger();
      for (int i = 0; i < rentals; i++) {
        inFlight.acquire();
        var launch =
            http.launch(
                url + "/v1/rentals",
                renterKeys.get(i % renters),
                "{\"gpu\":\"h100-80gb\",\"count\":1,\"max_price_per_gpu_hour\":\"3.00\","
                    + "\"image\":\"bench/noop:latest\",\"wait_seconds\":600}",
                "log-bench-" + i,
                retries);
        launch.whenComplete((x, e) -> inFlight.release());
        launches.add(launch);
      }
      CompletableFuture.allOf(launches.toArray(CompletableFuture[]::new))
          .get(1200, TimeUnit.SECONDS);
      long running = 0;
      while (secondsSince(t0) < 600) {
        running = agents.stream().mapToLong(a -> a.running.size()).sum();
        if (running >= rentals) break;
        Thread.sleep(500);
      }
      OUT.printf(
          Locale.ROOT,
          "%d rentals launched and running on the agents in %.1f s%n",
          running,
          secondsSince(t0));

      agents.forEach(BenchAgent::startLogs);
      BenchAgent.logLinesPerSecond = rate;
      long offered = (long) running * rate;
      OUT.printf(
          Locale.ROOT,
          "logs on: %d rentals x %d lines/s = %,d lines/s offered; %d s warm-up, %d s measured%n",
          running,
          rate,
          offered,
          warmup,
          duration);
      Thread.sleep(warmup * 1000L);

      long acked0 = BenchAgent.LOG_LINES_ACKED.get();
      long sent0 = BenchAgent.LOG_LINES_SENT.get();
      long frames0 = BenchAgent.LOG_FRAMES_SENT.get();
      long rows0 = storedThrough(db);
      long lag0 = lag(agents);
      CpuSample m0 = CpuSample.take(db.name);
      double n0 = MarketBenchSupport.processCpuSeconds(nodePid);
      long w0 = System.nanoTime();
      for (int s = 10; s <= duration; s += 10) {
        Thread.sleep(Math.min(10, duration - s + 10) * 1000L);
        OUT.printf(
            Locale.ROOT,
            "# %3d s: %,d lines acknowledged/s so far; due not sent %,d, sent not acknowledged %,d%n",
            s,
            (long) ((BenchAgent.LOG_LINES_ACKED.get() - acked0) / secondsSince(w0)),
            backlog(agents),
            BenchAgent.LOG_LINES_SENT.get() - BenchAgent.LOG_LINES_ACKED.get());
      }
      double window = secondsSince(w0);
      double n1 = MarketBenchSupport.processCpuSeconds(nodePid);
      CpuSample.Usage u = m0.until(CpuSample.take(db.name));
      long acked = BenchAgent.LOG_LINES_ACKED.get() - acked0;
      long sent = BenchAgent.LOG_LINES_SENT.get() - sent0;
      long frames = BenchAgent.LOG_FRAMES_SENT.get() - frames0;
      long rows1 = storedThrough(db);
      long lag1 = lag(agents);
      int connected = (int) agents.stream().filter(a -> a.connected).count();
      BenchAgent.logLinesPerSecond = 0;
      double stored = acked / window;
      OUT.printf(
          Locale.ROOT,
          "RESULT %d rentals x %d lines/s: offered %,d lines/s; sent %,.0f lines/s in %,.0f frames/s"
              + " (%.0f lines a frame); acknowledged (stored) %,.0f lines/s = %.2f of offered;"
              + " rental_logs grew by %,.0f lines/s; lines due but not yet acknowledged %,d at the"
              + " start, %,d at the end (%s); %d of %d agents connected; node %.2f cores,"
              + " PostgreSQL %.2f cores, this JVM (agents) %.2f cores, machine %.2f cores; node CPU"
              + " %.1f µs a line; %s%n",
          running,
          rate,
          offered,
          sent / window,
          frames / window,
          frames == 0 ? 0.0 : (double) sent / frames,
          stored,
          stored / offered,
          (rows1 - rows0) / window,
          lag0,
          lag1,
          lag1 > lag0 + offered * 2 ? "growing: NOT keeping up" : "bounded: keeping up",
          connected,
          agents.size(),
          (n1 - n0) / window,
          u.postgresCores(),
          u.jvmCores(),
          u.machineCores(),
          acked == 0 ? 0.0 : (n1 - n0) * 1e6 / acked,
          db.analyzeSummary());
      BenchResult.against(
              "log-ingest",
              "logs.stored",
              "log lines stored ÷ offered, " + running + " rentals x " + rate + " lines/s",
              stored,
              "lines/s",
              offered,
              "lines offered/s")
          .withNote(
              String.format(
                  Locale.ROOT,
                  "%d of %d agents connected at the end; %s",
                  connected,
                  agents.size(),
                  lag1 > lag0 + offered * 2 ? "backlog growing" : "backlog bounded"))
          .print(OUT);
      for (BenchAgent a : agents) a.close();
    }
  }

  /** Lines due and not yet sent, over all agents. */
  static long backlog(List<BenchAgent> agents) {
    long b = 0;
    for (BenchAgent a : agents) b += a.logBacklog();
    return b;
  }

  /** Lines due and not yet acknowledged: what the engine is behind the workloads by. */
  static long lag(List<BenchAgent> agents) {
    return backlog(agents) + BenchAgent.LOG_LINES_SENT.get() - BenchAgent.LOG_LINES_ACKED.get();
  }

  /** The sum over rentals of the highest seq stored (trimming keeps the newest lines). */
  static long storedThrough(BenchDatabase db) {
    try (Connection c = DriverManager.getConnection(db.url, db.user, db.password);
        Statement st = c.createStatement();
        ResultSet rs =
            st.executeQuery(
                "SELECT COALESCE(SUM(m), 0) FROM (SELECT MAX(seq) m FROM rental_logs GROUP BY"
                    + " rental_id) t")) {
      return rs.next() ? rs.getLong(1) : -1;
    } catch (Exception e) {
      return -1;
    }
  }

  static double secondsSince(long nanos) {
    return (System.nanoTime() - nanos) / 1e9;
  }
}
