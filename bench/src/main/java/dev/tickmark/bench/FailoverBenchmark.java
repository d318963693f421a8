package dev.tickmark.bench;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.tickmark.bench.MarketBenchSupport.Args;
import dev.tickmark.bench.MarketBenchSupport.BenchDatabase;
import dev.tickmark.bench.MarketBenchSupport.DbConfig;
import dev.tickmark.bench.MarketBenchmark.Model;
import dev.tickmark.wire.AgentFrame;
import dev.tickmark.wire.CanonicalJson;
import dev.tickmark.wire.Ed25519;
import dev.tickmark.wire.Frames;
import java.io.IOException;
import java.io.PrintStream;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.net.http.WebSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyPair;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.time.Duration;
import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.pekko.cluster.sharding.typed.HashCodeMessageExtractor;

/**
 * Failover time of a real cluster: {@code --nodes} node processes ({@code dev.tickmark.node.Main},
 * production cluster settings unless {@code --node-opts} says otherwise) on one fresh PostgreSQL
 * database, light simulated host agents in this process (the agent protocol over websockets: many
 * cards each, {@code rental_started} for every {@code start_rental}, heartbeats, reconnecting to
 * the next node when theirs is gone), and {@code --rentals} rentals launched over HTTP and running.
 * Then one node is killed with SIGKILL, and the read side is polled until every rental has settled
 * seconds past the kill (a settlement never bills the future, so such a settlement happened after
 * the kill). Prints, for the rentals the killed node hosted and for all, the time from the kill to
 * that settlement (its own timestamp) and to its visibility on the read side, at p50/p90/p99/max.
 */
public final class FailoverBenchmark {
  static {
    dev.tickmark.node.CommonPool.ensureParallelism(); // as the node's Main does
  }

  private static final PrintStream OUT = System.out;
  private static final ObjectMapper JSON = new ObjectMapper();
  static final String OPERATOR = "tmkop_failover_bench_operator_token_0123456789";

  static final String USAGE =
      """
      Usage: FailoverBenchmark [--option=value ...]
        --rentals=N            running rentals before the kill (default 1000)
        --cards=N              cards per simulated host (default 16); hosts = rentals / cards, rounded up
        --models=N             GPU models the hosts and rentals are spread over, 1-4 (default 4: one matcher each)
        --nodes=N              node processes (default 3; nodes 1 and 2 are the seeds)
        --kill=I               the node to SIGKILL (default 1: the oldest, which runs the shard coordinators)
        --node-heap=SIZE       -Xmx of each node (default 768m)
        --node-opts="-D..."    extra JVM options for every node (e.g. shorter stable-after), space-separated
        --renters=N            renter accounts the rentals are spread over (default rentals / 20: one renter account
                               settling thousands of rentals is a hot spot of its own, not what this measures)
        --launch-parallel=N    launches in flight at once (default 16)
        --timeout=S            give up waiting for the rentals to resume after S seconds (default 300)
        --logs=DIR             node logs (default target/failover-bench)
        --cluster-tls          the nodes talk over mutual TLS (TICKMARK_CLUSTER_TLS_*), certificates from the
                               runbook's openssl recipe (needs openssl)
        --db-url=URL --db-user=U --db-password=P --keep-database
      """;

  private FailoverBenchmark() {}

  public static void main(String[] argv) throws Exception {
    MarketBenchSupport.quietLogs();
    Args args = new Args(argv);
    if (args.flag("help")) {
      OUT.print(USAGE);
      return;
    }
    int rentals = args.integer("rentals", 1000);
    int cards = args.integer("cards", 16);
    int models = Math.max(1, Math.min(4, args.integer("models", 4)));
    int nodeCount = args.integer("nodes", 3);
    int kill = args.integer("kill", 1);
    String heap = args.string("node-heap", "768m");
    String nodeOpts = args.string("node-opts", "");
    int renters = args.integer("renters", Math.max(1, rentals / 20));
    int parallel = args.integer("launch-parallel", 16);
    int timeout = args.integer("timeout", 300);
    Path logs = Path.of(args.string("logs", "target/failover-bench"));
    boolean clusterTls = args.flag("cluster-tls");
    DbConfig dbConfig = DbConfig.of(args);
    args.requireEmpty();
    Map<String, String> nodeEnv =
        clusterTls
            ? RemotingTlsBenchmark.clusterTlsEnvironment(logs.resolve("cluster-tls"))
            : Map.of();

    OUT.println("machine: " + MarketBenchSupport.machine());
    try (BenchDatabase db = BenchDatabase.create(dbConfig, "tickmark_failover");
        Cluster cluster = new Cluster(db, nodeCount, heap, nodeOpts, logs, nodeEnv)) {
      db.analyzeEvery(10, true);
      // Ctrl-C or a timeout must not leave node processes behind.
      Runtime.getRuntime()
          .addShutdownHook(
              new Thread(
                  () -> {
                    for (Process p : cluster.processes) if (p != null) p.destroyForcibly();
                  },
                  "stop-nodes"));
      long t0 = System.nanoTime();
      cluster.startAll();
      OUT.printf(
          Locale.ROOT,
          "%d nodes up in %.1f s (logs in %s)%n",
          nodeCount,
          secondsSince(t0),
          logs.toAbsolutePath());
      new Run(db, cluster, rentals, renters, cards, models, parallel, timeout).run(kill);
    }
  }

  static double secondsSince(long nanos) {
    return (System.nanoTime() - nanos) / 1e9;
  }

  // ---------------------------------------------------------------------------------------------

  /** The nodes' own shard extractor: the same number of shards, the same hash. */
  static final HashCodeMessageExtractor<Object> SHARDS =
      new HashCodeMessageExtractor<>(
          com.typesafe.config.ConfigFactory.load()
              .getInt("pekko.cluster.sharding.number-of-shards"));

  static final class Run {
    final BenchDatabase db;
    final Cluster cluster;
    final int rentals;
    final int renters;
    final int cards;
    final List<Model> models;
    final int parallel;
    final int timeout;
    final Http http = new Http();
    final List<BenchAgent> agents = new ArrayList<>();

    Run(
        BenchDatabase db,
        Cluster cluster,
        int rentals,
        int renters,
        int cards,
        int models,
        int parallel,
        int timeout) {
      this.db = db;
      this.cluster = cluster;
      this.rentals = rentals;
      this.renters = renters;
      this.cards = cards;
      this.models = MarketBenchmark.MODELS.subList(0, models);
      this.parallel = parallel;
      this.timeout = timeout;
    }

    void run(int kill) throws Exception {
      String node1 = cluster.url(1);
      JsonNode provider =
          http.post(node1 + "/v1/accounts", null, "{\"name\":\"bench provider\"}", 201);
      String providerKey = provider.get("api_key").asText();
      String providerId = provider.get("account").get("id").asText();
      List<String> renterKeys = new ArrayList<>();
      for (int i = 0; i < renters; i++) {
        JsonNode renter =
            http.post(
                cluster.url(i % cluster.size() + 1) + "/v1/accounts",
                null,
                "{\"name\":\"bench renter " + i + "\"}",
                201);
        renterKeys.add(renter.get("api_key").asText());
        http.post(
            node1 + "/ops/accounts/" + renter.get("account").get("id").asText() + "/deposits",
            OPERATOR,
            "{\"amount\":\"100000\",\"reference\":\"bench\"}",
            201);
      }

      // Hosts: agent i starts on node (i mod nodes) and knows every node.
      int perModel = (rentals + models.size() - 1) / models.size();
      int hosts = models.size() * ((perModel + cards - 1) / cards); // enough cards of every model
      long t0 = System.nanoTime();
      BenchAgent.startTicker();
      Semaphore permits = new Semaphore(20);
      List<CompletableFuture<Void>> ready = new ArrayList<>();
      for (int i = 0; i < hosts; i++) {
        permits.acquire();
        Model model = models.get(i % models.size());
        int home = i % cluster.size() + 1;
        List<URI> engines = new ArrayList<>();
        for (int k = 0; k < cluster.size(); k++)
          engines.add(URI.create(cluster.ws((home - 1 + k) % cluster.size() + 1)));
        String token =
            http.post(
                    cluster.url(home) + "/v1/hosts/registration-tokens",
                    providerKey,
                    "{\"region\":\"eu-nl\"}",
                    201)
                .get("token")
                .asText();
        BenchAgent agent = new BenchAgent(i, engines, token, cards, model);
        agents.add(agent);
        CompletableFuture<Void> listed =
            agent
                .start()
                .thenCompose(
                    hostId ->
                        http.<JsonNode>postAsync(
                            "PUT",
                            cluster.url(home) + "/v1/hosts/" + hostId + "/listing",
                            providerKey,
                            "{\"on_demand_price_per_gpu_hour\":\"2.49\",\"listed\":true}",
                            200))
                .thenApply(x -> (Void) null);
        listed.whenComplete((x, e) -> permits.release());
        ready.add(listed);
      }
      CompletableFuture.allOf(ready.toArray(CompletableFuture[]::new)).get(600, TimeUnit.SECONDS);
      OUT.printf(
          Locale.ROOT,
          "hosts: %,d verified and listed (%d cards each, %d models) in %.1f s%n",
          hosts,
          cards,
          models.size(),
          secondsSince(t0));
      awaitOffers(hosts * cards, 300);

      // Rentals, launched round-robin over the nodes.
      t0 = System.nanoTime();
      Semaphore inFlight = new Semaphore(parallel);
      AtomicInteger failures = new AtomicInteger();
      List<CompletableFuture<JsonNode>> launches = new ArrayList<>();
      for (int i = 0; i < rentals; i++) {
        inFlight.acquire();
        String body =
            "{\"gpu\":\""
                + models.get(i % models.size()).code()
                + "\",\"count\":1,\"max_price_per_gpu_hour\":\"3.00\","
                + "\"image\":\"bench/noop:latest\",\"wait_seconds\":600}";
        CompletableFuture<JsonNode> launch =
            http.launch(
                cluster.url(i % cluster.size() + 1) + "/v1/rentals",
                renterKeys.get(i % renters),
                body,
                "bench-launch-" + i,
                failures);
        launch.whenComplete((x, e) -> inFlight.release());
        launches.add(launch);
      }
      CompletableFuture.allOf(launches.toArray(CompletableFuture[]::new))
          .get(1200, TimeUnit.SECONDS);
      OUT.printf(
          Locale.ROOT,
          "rentals: %,d launched for %d renters in %.1f s (%,.0f/s, %d retried)%n",
          rentals,
          renters,
          secondsSince(t0),
          rentals / secondsSince(t0),
          failures.get());
      awaitRunningAndSettled(rentals, 600);

      // Where each rental lives, then the kill.
      Map<String, Integer> placement = placement();
      Map<Integer, Integer> perNode = new HashMap<>();
      placement.values().forEach(n -> perNode.merge(n, 1, Integer::sum));
      OUT.println(
          "rentals per node: " + perNode + " (" + (rentals - placement.size()) + " not located)");
      Set<String> onKilled = new HashSet<>();
      placement.forEach(
          (id, n) -> {
            if (n == kill) onKilled.add(id);
          });
      Map<String, String> dependencies = dependencies(kill, providerId);
      int connectedBefore = connectedAgents();
      // The agents whose socket is on the node about to die: "back" only after a welcome since the
      // kill (until its socket notices, such an agent still reads as connected).
      URI killedEngine = URI.create(cluster.ws(kill));
      List<BenchAgent> onKilledEngine =
          agents.stream().filter(a -> killedEngine.equals(a.engineNow)).toList();
      cluster.kill(kill);
      Instant killedAt = Instant.now();
      long killNanos = System.nanoTime();
      OUT.printf(
          "killed node%d (SIGKILL) at %s; it hosted %,d rentals; %d of %d agents were connected%n",
          kill, killedAt, onKilled.size(), connectedBefore, agents.size());

      Map<String, Long> settledMs = new HashMap<>();
      Map<String, Long> visibleMs = new HashMap<>();
      Map<String, Instant> startedAt = new HashMap<>();
      long downedMs = -1;
      long agentsBackMs = -1;
      int survivor = kill == 1 ? 2 : 1;
      while (settledMs.size() < rentals && secondsSince(killNanos) < timeout) {
        try (Connection c = DriverManager.getConnection(db.url, db.user, db.password);
            PreparedStatement st =
                c.prepareStatement(
                    "SELECT rental_id, started_at, billed_seconds, updated_at FROM rentals"
                        + " WHERE status = 'running'")) {
          try (ResultSet rs = st.executeQuery()) {
            long now = Duration.between(killedAt, Instant.now()).toMillis();
            while (rs.next()) {
              String id = rs.getString(1);
              if (settledMs.containsKey(id)) continue;
              Instant started = rs.getTimestamp(2).toInstant();
              startedAt.putIfAbsent(id, started);
              if (rs.getLong(3) > Duration.between(started, killedAt).getSeconds()) {
                settledMs.put(
                    id, Duration.between(killedAt, rs.getTimestamp(4).toInstant()).toMillis());
                visibleMs.put(id, now);
              }
            }
          }
        }
        if (downedMs < 0 && cluster.members(survivor).size() == cluster.size() - 1)
          downedMs = Duration.between(killedAt, Instant.now()).toMillis();
        if (agentsBackMs < 0
            && connectedAgents() == agents.size()
            && onKilledEngine.stream().allMatch(a -> a.welcomedAtNanos - killNanos > 0))
          agentsBackMs = Duration.between(killedAt, Instant.now()).toMillis();
        Thread.sleep(500);
      }
      OUT.printf(
          Locale.ROOT,
          "node%d removed from the survivors' membership after %s; all agents connected again after %s%n",
          kill,
          downedMs < 0 ? "(not seen)" : ms(downedMs),
          agentsBackMs < 0 ? "(not seen)" : ms(agentsBackMs));
      for (int n = 1; n <= cluster.size(); n++)
        if (n != kill) OUT.println(phases(cluster.logs.resolve("node-" + n + ".log"), n, killedAt));
      report("rentals the killed node hosted", onKilled, settledMs, visibleMs);
      report("all rentals", placement.keySet(), settledMs, visibleMs);
      // What the last to settle again waited for: the rental moved, or only what it talks to.
      Map<String, Set<String>> byDependency = new java.util.TreeMap<>();
      dependencies.forEach(
          (id, lost) ->
              byDependency
                  .computeIfAbsent(
                      (onKilled.contains(id) ? "moved, " : "stayed, ") + lost + " on node" + kill,
                      k -> new HashSet<>())
                  .add(id));
      byDependency.forEach(
          (what, ids) -> {
            long[] t =
                ids.stream()
                    .filter(settledMs::containsKey)
                    .mapToLong(settledMs::get)
                    .sorted()
                    .toArray();
            OUT.printf(
                Locale.ROOT,
                "  rentals %s: %,d, first settlement p50 %s max %s%n",
                what,
                ids.size(),
                ms(MarketBenchSupport.quantile(t, 0.5)),
                ms(t.length == 0 ? 0 : t[t.length - 1]));
          });
      if (settledMs.size() < rentals)
        OUT.printf("NOT RESUMED within %d s: %,d rentals%n", timeout, rentals - settledMs.size());
      long[] all = settledMs.values().stream().mapToLong(Long::longValue).sorted().toArray();
      long[] killed =
          onKilled.stream()
              .filter(settledMs::containsKey)
              .mapToLong(settledMs::get)
              .sorted()
              .toArray();
      String note =
          String.format(
              Locale.ROOT,
              "%,d rentals, %,d on node%d; resumed %,d; node%d out of the membership after %s",
              rentals,
              onKilled.size(),
              kill,
              settledMs.size(),
              kill,
              downedMs < 0 ? "(not seen)" : ms(downedMs));
      // Every rental settling again is the figure: unresumed rentals count as the timeout.
      double allMax =
          settledMs.size() < rentals
              ? timeout
              : (all.length == 0 ? Double.NaN : all[all.length - 1] / 1000.0);
      BenchResult.absolute(
              "failover",
              "failover.all-settled",
              "kill -9 -> every rental settled again (max)",
              allMax,
              "s")
          .withNote(note)
          .print(OUT);
      BenchResult.absolute(
              "failover",
              "failover.killed-p50",
              "kill -9 -> first settlement, killed node's rentals p50",
              killed.length == 0 ? Double.NaN : MarketBenchSupport.quantile(killed, 0.5) / 1000.0,
              "s")
          .withNote(note)
          .print(OUT);
      for (BenchAgent a : agents) a.close();
    }

    void report(
        String what, Set<String> ids, Map<String, Long> settledMs, Map<String, Long> visibleMs) {
      long[] settled =
          ids.stream().filter(settledMs::containsKey).mapToLong(settledMs::get).sorted().toArray();
      long[] visible =
          ids.stream().filter(visibleMs::containsKey).mapToLong(visibleMs::get).sorted().toArray();
      // seconds after the kill -> rentals whose first settlement fell in that second
      java.util.TreeMap<Long, Integer> perSecond = new java.util.TreeMap<>();
      for (long t : settled) perSecond.merge(t / 1000, 1, Integer::sum);
      OUT.println("  first settlements per second after the kill (" + what + "): " + perSecond);
      OUT.printf(
          Locale.ROOT,
          "%s (%,d, resumed %,d): kill -> first settlement p50 %s p90 %s p99 %s max %s;"
              + " -> on the read side p50 %s p99 %s max %s%n",
          what,
          ids.size(),
          settled.length,
          ms(MarketBenchSupport.quantile(settled, 0.5)),
          ms(MarketBenchSupport.quantile(settled, 0.9)),
          ms(MarketBenchSupport.quantile(settled, 0.99)),
          ms(settled.length == 0 ? 0 : settled[settled.length - 1]),
          ms(MarketBenchSupport.quantile(visible, 0.5)),
          ms(MarketBenchSupport.quantile(visible, 0.99)),
          ms(visible.length == 0 ? 0 : visible[visible.length - 1]));
    }

    /**
     * Where a survivor's seconds went, from its log (lines start with the local time of day): the
     * first time after the kill it marked the node unreachable, its resolver downed it (only the
     * leader logs that), it saw the node removed (RentalWaker's line), it started a singleton it
     * took over (only the new oldest), and the first wake of the rentals.
     */
    static String phases(Path log, int node, Instant killedAt) {
      java.time.LocalTime kill =
          java.time.LocalTime.ofInstant(killedAt, java.time.ZoneId.systemDefault());
      String[][] marks = {
        {"unreachable", "Marking node as UNREACHABLE"},
        {"SBR decision", "SBR took decision"},
        {"removed", "left the cluster: waking"},
        {"singleton taken over", "Singleton manager starting singleton actor"},
      };
      StringBuilder out = new StringBuilder("phases on node" + node + " (kill +):");
      List<String> lines;
      try {
        lines = Files.readAllLines(log);
      } catch (IOException e) {
        return out.append(" (log unreadable: ").append(e.getMessage()).append(')').toString();
      }
      for (String[] mark : marks) {
        String seen = "-";
        for (String line : lines) {
          if (line.length() < 12 || !line.contains(mark[1])) continue;
          java.time.LocalTime at;
          try {
            at = java.time.LocalTime.parse(line.substring(0, 12));
          } catch (java.time.format.DateTimeParseException e) {
            continue;
          }
          long millis = Duration.between(kill, at).toMillis();
          if (millis < 0) continue;
          seen = ms(millis);
          break;
        }
        out.append(' ').append(mark[0]).append(' ').append(seen).append(';');
      }
      return out.toString();
    }

    static String ms(long millis) {
      return String.format(Locale.ROOT, "%.1f s", millis / 1000.0);
    }

    int connectedAgents() {
      int n = 0;
      for (BenchAgent a : agents) if (a.connected) n++;
      return n;
    }

    void awaitOffers(int expected, int seconds) throws Exception {
      long t0 = System.nanoTime();
      int seen = 0;
      while (secondsSince(t0) < seconds) {
        seen = 0;
        for (Model m : models) {
          for (JsonNode o :
              http.get(cluster.url(1) + "/v1/offers?gpu=" + m.code() + "&tier=on_demand")
                  .get("offers")) {
            seen += o.get("available_cards").asInt();
          }
        }
        if (seen >= expected) break;
        Thread.sleep(500);
      }
      OUT.printf(
          Locale.ROOT,
          "offers: %,d of %,d cards on the read side after %.1f s%n",
          seen,
          expected,
          secondsSince(t0));
    }

    /** Until every rental runs and has a first settlement on the read side. */
    void awaitRunningAndSettled(int expected, int seconds) throws Exception {
      long t0 = System.nanoTime();
      long running = 0;
      long settled = 0;
      while (secondsSince(t0) < seconds) {
        try (Connection c = DriverManager.getConnection(db.url, db.user, db.password);
            PreparedStatement st =
                c.prepareStatement(
                    "SELECT COUNT(*), COUNT(*) FILTER (WHERE billed_seconds > 0) FROM rentals"
                        + " WHERE status = 'running'");
            ResultSet rs = st.executeQuery()) {
          rs.next();
          running = rs.getLong(1);
          settled = rs.getLong(2);
        }
        if (running >= expected && settled >= expected) break;
        Thread.sleep(1000);
      }
      OUT.printf(
          Locale.ROOT,
          "running: %,d, of which %,d settled at least once, after %.1f s more%n",
          running,
          settled,
          secondsSince(t0));
    }

    /**
     * Rental id -> the node whose shard region hosts its shard (Pekko Management's
     * /cluster/shards/Rental).
     */
    Map<String, Integer> placement() throws Exception {
      Map<String, Integer> rentalShards = shardOwners("Rental");
      Map<String, Integer> placement = new HashMap<>();
      try (Connection c = DriverManager.getConnection(db.url, db.user, db.password);
          PreparedStatement st =
              c.prepareStatement("SELECT rental_id FROM rentals WHERE status = 'running'");
          ResultSet rs = st.executeQuery()) {
        while (rs.next()) {
          Integer n = rentalShards.get(SHARDS.shardId(rs.getString(1)));
          if (n != null) placement.put(rs.getString(1), n);
        }
      }
      return placement;
    }

    /**
     * Running rental id -> what of it was on node {@code killed} besides the rental itself: its
     * host's entity ("host"), its renter's account ("renter"), the provider's account ("provider"),
     * joined with "+", or "nothing". A rental cannot settle again before its host's entity hears a
     * heartbeat, and its deliveries go to both accounts, so this says what each rental waited for.
     */
    Map<String, String> dependencies(int killed, String providerId) throws Exception {
      Map<String, Integer> hostShards = shardOwners("Host");
      Map<String, Integer> accountShards = shardOwners("Account");
      boolean providerLost =
          Integer.valueOf(killed).equals(accountShards.get(SHARDS.shardId(providerId)));
      Map<String, String> dependencies = new HashMap<>();
      try (Connection c = DriverManager.getConnection(db.url, db.user, db.password);
          PreparedStatement st =
              c.prepareStatement(
                  "SELECT rental_id, host_id, renter_id FROM rentals WHERE status = 'running'");
          ResultSet rs = st.executeQuery()) {
        while (rs.next()) {
          List<String> lost = new ArrayList<>();
          if (Integer.valueOf(killed).equals(hostShards.get(SHARDS.shardId(rs.getString(2)))))
            lost.add("host");
          if (Integer.valueOf(killed).equals(accountShards.get(SHARDS.shardId(rs.getString(3)))))
            lost.add("renter");
          if (providerLost) lost.add("provider");
          dependencies.put(rs.getString(1), lost.isEmpty() ? "nothing" : String.join("+", lost));
        }
      }
      return dependencies;
    }

    /** Shard id -> the node whose region hosts it (Pekko Management's /cluster/shards/{type}). */
    private Map<String, Integer> shardOwners(String entityType) throws Exception {
      Map<String, Integer> shardOwner = new HashMap<>();
      for (int n = 1; n <= cluster.size(); n++) {
        for (JsonNode r :
            http.get(cluster.management(n) + "/cluster/shards/" + entityType).get("regions")) {
          shardOwner.put(r.get("shardId").asText(), n);
        }
      }
      return shardOwner;
    }
  }

  // ---------------------------------------------------------------------------------------------

  /** Node processes on 127.0.0.1: node i has HTTP, management and remoting ports of its own. */
  static final class Cluster implements AutoCloseable {
    final BenchDatabase db;
    final String heap;
    final String nodeOpts;
    final Path logs;
    final Map<String, String> nodeEnv;
    final int[][] ports;
    final Process[] processes;
    final Http http = new Http();

    Cluster(BenchDatabase db, int size, String heap, String nodeOpts, Path logs)
        throws IOException {
      this(db, size, heap, nodeOpts, logs, Map.of());
    }

    /** {@code nodeEnv}: more environment for every node (the cluster's TLS files). */
    Cluster(
        BenchDatabase db,
        int size,
        String heap,
        String nodeOpts,
        Path logs,
        Map<String, String> nodeEnv)
        throws IOException {
      this.db = db;
      this.nodeEnv = Map.copyOf(nodeEnv);
      this.heap = heap;
      this.nodeOpts = nodeOpts;
      this.logs = Files.createDirectories(logs);
      this.ports = new int[size][];
      this.processes = new Process[size];
      for (int i = 0; i < size; i++) ports[i] = new int[] {freePort(), freePort(), freePort()};
    }

    int size() {
      return ports.length;
    }

    String url(int node) {
      return "http://127.0.0.1:" + ports[node - 1][0];
    }

    String ws(int node) {
      return "ws://127.0.0.1:" + ports[node - 1][0];
    }

    String management(int node) {
      return "http://127.0.0.1:" + ports[node - 1][1];
    }

    void startAll() throws Exception {
      String seeds = "127.0.0.1:" + ports[0][2] + (size() > 1 ? ",127.0.0.1:" + ports[1][2] : "");
      for (int i = 0; i < size(); i++) {
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        List<String> command = new ArrayList<>(List.of(java, "-Xmx" + heap, "-XX:+UseSerialGC"));
        if (!nodeOpts.isBlank()) command.addAll(Arrays.asList(nodeOpts.trim().split("\\s+")));
        command.addAll(
            List.of("-cp", System.getProperty("java.class.path"), "dev.tickmark.node.Main"));
        ProcessBuilder b = new ProcessBuilder(command);
        Map<String, String> env = b.environment();
        env.keySet().removeIf(k -> k.startsWith("TICKMARK_"));
        env.put("TICKMARK_DB_URL", db.url);
        env.put("TICKMARK_DB_USER", db.user);
        env.put("TICKMARK_DB_PASSWORD", db.password == null ? "" : db.password);
        env.put("TICKMARK_HTTP_PORT", Integer.toString(ports[i][0]));
        env.put("TICKMARK_MANAGEMENT_PORT", Integer.toString(ports[i][1]));
        env.put("TICKMARK_REMOTE_PORT", Integer.toString(ports[i][2]));
        env.put("TICKMARK_SEED_NODES", seeds);
        env.put("TICKMARK_OPERATOR_TOKEN", OPERATOR);
        env.put("TICKMARK_ALLOW_SIMULATED_HOSTS", "true");
        // every client of the benchmark shares one address and polls hard: no rate limits
        for (String limit :
            List.of(
                "TICKMARK_RATE_LIMIT_KEY_PER_SECOND",
                "TICKMARK_RATE_LIMIT_KEY_BURST",
                "TICKMARK_RATE_LIMIT_ADDRESS_PER_SECOND",
                "TICKMARK_RATE_LIMIT_ADDRESS_BURST")) env.put(limit, "1000000");
        env.putAll(nodeEnv);
        b.redirectErrorStream(true)
            .redirectOutput(logs.resolve("node-" + (i + 1) + ".log").toFile());
        processes[i] = b.start();
      }
      for (int i = 1; i <= size(); i++) {
        long t0 = System.nanoTime();
        while (true) {
          if (!processes[i - 1].isAlive())
            throw new IllegalStateException("node" + i + " exited; see " + logs);
          if (http.status(management(i) + "/ready") == 200
              && http.status(url(i) + "/health") == 200) break;
          if (secondsSince(t0) > 180)
            throw new IllegalStateException("node" + i + " not ready in 180 s; see " + logs);
          Thread.sleep(500);
        }
      }
    }

    void kill(int node) throws InterruptedException {
      processes[node - 1].destroyForcibly().waitFor(30, TimeUnit.SECONDS);
    }

    List<String> members(int node) {
      List<String> up = new ArrayList<>();
      try {
        for (JsonNode m : http.get(management(node) + "/cluster/members").get("members"))
          up.add(m.get("node").asText());
      } catch (Exception e) {
        // not answering: nothing known
      }
      return up;
    }

    @Override
    public void close() {
      for (Process p : processes) if (p != null && p.isAlive()) p.destroy();
      try {
        for (Process p : processes) {
          if (p != null && !p.waitFor(60, TimeUnit.SECONDS))
            p.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
        }
      } catch (InterruptedException e) {
        for (Process p : processes) if (p != null) p.destroyForcibly();
        Thread.currentThread().interrupt();
      }
    }

    static int freePort() throws IOException {
      try (ServerSocket s = new ServerSocket(0)) {
        return s.getLocalPort();
      }
    }
  }

  /** JSON over HTTP/1.1 with the JDK client. */
  static final class Http {
    final HttpClient client =
        HttpClient.newBuilder()
            .version(HttpClient.Version.HTTP_1_1)
            .connectTimeout(Duration.ofSeconds(10))
            .executor(
                Executors.newFixedThreadPool(
                    4,
                    r -> {
                      Thread t = new Thread(r, "bench-http");
                      t.setDaemon(true);
                      return t;
                    }))
            .build();

    JsonNode get(String url) throws Exception {
      HttpResponse<String> r =
          client.send(
              HttpRequest.newBuilder(URI.create(url)).timeout(Duration.ofSeconds(30)).build(),
              HttpResponse.BodyHandlers.ofString());
      if (r.statusCode() != 200)
        throw new IllegalStateException(
            "GET " + url + " answered " + r.statusCode() + ": " + r.body());
      return JSON.readTree(r.body());
    }

    int status(String url) {
      try {
        return client
            .send(
                HttpRequest.newBuilder(URI.create(url)).timeout(Duration.ofSeconds(5)).build(),
                HttpResponse.BodyHandlers.discarding())
            .statusCode();
      } catch (IOException e) {
        return -1;
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return -1;
      }
    }

    JsonNode post(String url, String bearer, String body, int expected) throws Exception {
      return this.<JsonNode>postAsync("POST", url, bearer, body, expected)
          .get(60, TimeUnit.SECONDS);
    }

    <T> CompletableFuture<T> postAsync(
        String method, String url, String bearer, String body, int expected) {
      HttpRequest.Builder b =
          HttpRequest.newBuilder(URI.create(url))
              .timeout(Duration.ofSeconds(60))
              .header("Content-Type", "application/json")
              .method(method, HttpRequest.BodyPublishers.ofString(body));
      if (bearer != null) b.header("Authorization", "Bearer " + bearer);
      return client
          .sendAsync(b.build(), HttpResponse.BodyHandlers.ofString())
          .thenApply(
              r -> {
                if (r.statusCode() != expected)
                  throw new IllegalStateException(
                      method + " " + url + " answered " + r.statusCode() + ": " + r.body());
                try {
                  @SuppressWarnings("unchecked")
                  T json = (T) JSON.readTree(r.body());
                  return json;
                } catch (IOException e) {
                  throw new IllegalStateException(e);
                }
              });
    }

    /**
     * POST /v1/rentals, retried (up to 5 times, 1 s apart) when not answered 201, under one
     * Idempotency-Key: a launch whose answer was lost is not made twice.
     */
    CompletableFuture<JsonNode> launch(
        String url, String bearer, String body, String idempotencyKey, AtomicInteger retries) {
      CompletableFuture<JsonNode> result = new CompletableFuture<>();
      attempt(url, bearer, body, idempotencyKey, retries, 0, result);
      return result;
    }

    private void attempt(
        String url,
        String bearer,
        String body,
        String key,
        AtomicInteger retries,
        int tries,
        CompletableFuture<JsonNode> result) {
      HttpRequest request =
          HttpRequest.newBuilder(URI.create(url))
              .timeout(Duration.ofSeconds(60))
              .header("Content-Type", "application/json")
              .header("Authorization", "Bearer " + bearer)
              .header("Idempotency-Key", key)
              .POST(HttpRequest.BodyPublishers.ofString(body))
              .build();
      client
          .sendAsync(request, HttpResponse.BodyHandlers.ofString())
          .thenApply(
              r -> {
                if (r.statusCode() != 201)
                  throw new IllegalStateException(
                      "POST " + url + " answered " + r.statusCode() + ": " + r.body());
                try {
                  return JSON.readTree(r.body());
                } catch (IOException e) {
                  throw new IllegalStateException(e);
                }
              })
          .whenComplete(
              (json, e) -> {
                if (e == null) {
                  result.complete(json);
                } else if (tries >= 5) {
                  result.completeExceptionally(e);
                } else {
                  retries.incrementAndGet();
                  if (retries.get() <= 3) OUT.println("# launch retried: " + e.getMessage());
                  CompletableFuture.delayedExecutor(1, TimeUnit.SECONDS)
                      .execute(() -> attempt(url, bearer, body, key, retries, tries + 1, result));
                }
              });
    }
  }

  // ---------------------------------------------------------------------------------------------

  /**
   * A light simulated host agent: one websocket, the agent protocol through the wire module, {@code
   * cards} simulated cards of one model. Its rentals "run" as entries in a set: {@code
   * start_rental} is answered {@code rental_started}, {@code stop_rental} {@code rental_stopped};
   * heartbeats list them, the first right after the hardware report that follows a welcome, as the
   * agent's. When its node goes away it reconnects, after about a second, to the next node it
   * knows, with its host credential. Outgoing frames are paced (one per agent per 100 ms, under the
   * node's per-session rate limit) by one ticker shared by all agents.
   */
  static final class BenchAgent implements WebSocket.Listener {
    private static final HttpClient SOCKETS =
        HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();
    private static final List<BenchAgent> ALL = new java.util.concurrent.CopyOnWriteArrayList<>();
    private static final ScheduledExecutorService TICKER =
        Executors.newSingleThreadScheduledExecutor(
            r -> {
              Thread t = new Thread(r, "bench-agents");
              t.setDaemon(true);
              return t;
            });
    private static final AtomicLong TICKS = new AtomicLong();

    final int index;
    final List<URI> engines;
    final String token;
    final Model model;
    final int cards;
    final KeyPair key = Ed25519.generate();
    final Set<String> running = ConcurrentHashMap.newKeySet();
    final ConcurrentLinkedQueue<AgentFrame> outbox = new ConcurrentLinkedQueue<>();
    final CompletableFuture<String> verified = new CompletableFuture<>();
    final AtomicLong seq = new AtomicLong();
    volatile boolean connected;
    volatile boolean closed;
    volatile URI engineNow; // the engine of the latest connection attempt
    volatile long welcomedAtNanos; // System.nanoTime() of the latest welcome

    /** Ticker ticks (100 ms) between heartbeats: the welcome's interval, as the real agent does. */
    volatile int heartbeatTicks = 50;

    volatile String credential;
    volatile String hostId;
    private int attempts;
    private WebSocket socket;
    private CompletableFuture<WebSocket> sending = CompletableFuture.completedFuture(null);
    private final StringBuilder partial = new StringBuilder();

    /**
     * Lines each running rental prints a second (0, the default: no logs), for {@link
     * LogIngestBenchmark}: they are due by the clock from the rental's start, and sent in the
     * agent's free frame slots as {@code logs} frames of at most {@link #MAX_LOG_LINES} lines, the
     * agent's rentals in turn.
     */
    static volatile int logLinesPerSecond;

    static final int MAX_LOG_LINES = 300;
    static final AtomicLong LOG_LINES_SENT = new AtomicLong();
    static final AtomicLong LOG_LINES_ACKED = new AtomicLong();
    static final AtomicLong LOG_FRAMES_SENT = new AtomicLong();

    /** A rental's log: when it started, the last seq sent and acknowledged. */
    static final class LogState {
      final long startNanos = System.nanoTime();
      long sent;
      long acked;
    }

    final Map<String, LogState> logs = new ConcurrentHashMap<>();
    final List<String> logRentals = new java.util.concurrent.CopyOnWriteArrayList<>();
    private int logCursor;

    /** Its running rentals start printing now. */
    void startLogs() {
      for (String id : running)
        if (logs.putIfAbsent(id, new LogState()) == null) logRentals.add(id);
    }

    /** Lines due and not yet sent, over this agent's rentals. */
    long logBacklog() {
      long now = System.nanoTime();
      long behind = 0;
      for (LogState st : logs.values()) behind += due(st, now) - st.sent;
      return behind;
    }

    static long due(LogState st, long now) {
      return (now - st.startNanos) * logLinesPerSecond / 1_000_000_000L;
    }

    /** The next rental's due lines, or null when none is due. */
    AgentFrame nextLogs() {
      int n = logRentals.size();
      long now = System.nanoTime();
      for (int k = 0; k < n; k++) {
        String id = logRentals.get(logCursor++ % n);
        LogState st = logs.get(id);
        if (st == null) continue;
        long through = Math.min(due(st, now), st.sent + MAX_LOG_LINES);
        if (through <= st.sent) continue;
        String at = Instant.now().truncatedTo(ChronoUnit.MILLIS).toString();
        List<AgentFrame.LogLine> lines = new ArrayList<>((int) (through - st.sent));
        for (long seq = st.sent + 1; seq <= through; seq++)
          lines.add(
              new AgentFrame.LogLine(
                  seq,
                  at,
                  "stdout",
                  "step " + seq + " loss=0." + (seq * 7919 % 10000) + " lr=3e-4 tokens/s=41234"));
        LOG_LINES_SENT.addAndGet(through - st.sent);
        LOG_FRAMES_SENT.incrementAndGet();
        st.sent = through;
        return new AgentFrame.Logs(id, lines);
      }
      return null;
    }

    BenchAgent(int index, List<URI> engines, String token, int cards, Model model) {
      this.index = index;
      this.engines = engines;
      this.token = token;
      this.cards = cards;
      this.model = model;
    }

    static void startTicker() {
      TICKER.scheduleAtFixedRate(
          () -> {
            long tick = TICKS.incrementAndGet();
            for (BenchAgent a : ALL) {
              if (!a.connected) continue;
              if ((tick + a.index) % a.heartbeatTicks == 0)
                a.outbox.add(a.heartbeat()); // as the welcome says, spread over the agents
              AgentFrame next = a.outbox.poll();
              if (next == null && logLinesPerSecond > 0) next = a.nextLogs();
              if (next != null) a.send(next);
            }
          },
          100,
          100,
          TimeUnit.MILLISECONDS);
    }

    /** Connects; completes with the host id once verified. */
    CompletableFuture<String> start() {
      ALL.add(this);
      connect();
      return verified;
    }

    private synchronized void connect() {
      if (closed) return;
      URI engine = engines.get(attempts++ % engines.size());
      engineNow = engine;
      String bearer = credential != null ? credential : token;
      SOCKETS
          .newWebSocketBuilder()
          .header("Authorization", "Bearer " + bearer)
          .connectTimeout(Duration.ofSeconds(10))
          .buildAsync(URI.create(engine + "/v1/agent/connect"), this)
          .whenComplete(
              (ws, e) -> {
                if (e != null) reconnectLater();
              });
    }

    private void reconnectLater() {
      connected = false;
      if (!closed)
        CompletableFuture.delayedExecutor(800 + (index * 37L) % 400, TimeUnit.MILLISECONDS)
            .execute(this::connect);
    }

    private synchronized void sendNow(AgentFrame frame) {
      WebSocket ws = socket;
      if (ws == null) return;
      String text = Frames.write(frame);
      sending = sending.handle((x, e) -> null).thenCompose(x -> ws.sendText(text, true));
    }

    void send(AgentFrame frame) {
      sendNow(frame);
    }

    AgentFrame heartbeat() {
      return new AgentFrame.Heartbeat(
          seq.incrementAndGet(),
          Instant.now().truncatedTo(ChronoUnit.MILLIS).toString(),
          List.of(),
          List.copyOf(running));
    }

    @Override
    public void onOpen(WebSocket webSocket) {
      synchronized (this) {
        socket = webSocket;
        sending = CompletableFuture.completedFuture(webSocket);
      }
      webSocket.request(1);
    }

    @Override
    public CompletionStage<?> onText(WebSocket webSocket, CharSequence data, boolean last) {
      partial.append(data);
      if (last) {
        String text = partial.toString();
        partial.setLength(0);
        try {
          handle(Frames.read(text));
        } catch (Frames.MalformedFrame e) {
          OUT.println("# agent " + index + ": unreadable frame " + e.getMessage());
        }
      }
      webSocket.request(1);
      return null;
    }

    private void handle(AgentFrame frame) {
      if (frame instanceof AgentFrame.Challenge c) {
        sendNow(
            new AgentFrame.Hello(
                Ed25519.sign(key.getPrivate(), Ed25519.helloMessage(c.nonce())),
                "bench",
                Ed25519.encodePublic(key.getPublic())));
      } else if (frame instanceof AgentFrame.Welcome w) {
        if (w.hostCredential() != null) credential = w.hostCredential();
        if (w.heartbeatIntervalS() > 0) heartbeatTicks = w.heartbeatIntervalS() * 10;
        hostId = w.hostId();
        JsonNode tree =
            Frames.reportTree(MarketBenchmark.report("bench-host-" + index, cards, model));
        sendNow(
            new AgentFrame.HardwareReportFrame(
                tree, Ed25519.sign(key.getPrivate(), CanonicalJson.bytes(tree))));
        // The agent's first heartbeat follows its report at once, then one every interval.
        outbox.add(heartbeat());
        welcomedAtNanos = System.nanoTime();
        connected = true;
      } else if (frame instanceof AgentFrame.VerificationResult v) {
        if ("verified".equals(v.status())) verified.complete(hostId);
        else
          verified.completeExceptionally(
              new IllegalStateException("host " + hostId + ": " + v.status() + " " + v.checks()));
      } else if (frame instanceof AgentFrame.StartRental s) {
        running.add(s.rentalId());
        outbox.add(new AgentFrame.RentalStarted(s.rentalId(), Instant.now().toString()));
      } else if (frame instanceof AgentFrame.StopRental s) {
        running.remove(s.rentalId());
        outbox.add(new AgentFrame.RentalStopped(s.rentalId(), Instant.now().toString()));
      } else if (frame instanceof AgentFrame.LogsAck ack) {
        LogState st = logs.get(ack.rentalId());
        if (st != null) {
          synchronized (st) {
            if (ack.throughSeq() > st.acked) {
              LOG_LINES_ACKED.addAndGet(ack.throughSeq() - st.acked);
              st.acked = ack.throughSeq();
            }
          }
        }
      } else if (frame instanceof AgentFrame.Error e) {
        OUT.println("# agent " + index + ": error " + e.code() + " " + e.message());
      }
    }

    @Override
    public CompletionStage<?> onClose(WebSocket webSocket, int statusCode, String reason) {
      lost(webSocket);
      return null;
    }

    @Override
    public void onError(WebSocket webSocket, Throwable error) {
      lost(webSocket);
    }

    /** The current socket is gone (a stale one's callbacks are ignored): reconnect once. */
    private void lost(WebSocket webSocket) {
      synchronized (this) {
        if (webSocket != socket) return;
        socket = null;
      }
      webSocket.abort();
      reconnectLater();
    }

    void close() {
      closed = true;
      connected = false;
      WebSocket ws = socket;
      if (ws != null) ws.abort();
    }
  }
}
