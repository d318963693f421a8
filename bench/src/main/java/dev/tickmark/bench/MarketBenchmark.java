package dev.tickmark.bench;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.tickmark.bench.MarketBenchSupport.Args;
import dev.tickmark.bench.MarketBenchSupport.BenchDatabase;
import dev.tickmark.bench.MarketBenchSupport.HistogramSnapshot;
import dev.tickmark.engine.account.Account;
import dev.tickmark.engine.host.Host;
import dev.tickmark.engine.host.Listing;
import dev.tickmark.engine.host.verification.Verification;
import dev.tickmark.engine.metrics.EngineMetrics;
import dev.tickmark.engine.metrics.LatencyHistogram;
import dev.tickmark.engine.rental.Rental;
import dev.tickmark.node.Node;
import dev.tickmark.node.NodeSettings;
import dev.tickmark.wire.CanonicalJson;
import dev.tickmark.wire.Ed25519;
import dev.tickmark.wire.Frames;
import dev.tickmark.wire.HardwareReport;
import java.io.PrintStream;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.security.KeyPair;
import java.time.Duration;
import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Executor;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;
import java.util.function.IntFunction;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.Behavior;
import org.apache.pekko.actor.typed.Props;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.cluster.sharding.typed.javadsl.ClusterSharding;
import org.apache.pekko.cluster.sharding.typed.javadsl.EntityRef;

/**
 * The market on one node: (a) launch → matched latency at fixed open-loop arrival rates with 1k and
 * 10k listed hosts, and (b) how many concurrently running rentals one node meters while the
 * per-second ticks stay within 1 s, with the settlement throughput that takes and, in the same run
 * and on the same PostgreSQL, raw JDBC batch inserts as the ceiling to compare the write path with.
 * Not a test: a program that measures and prints.
 *
 * <p>Listed hosts are made through the {@link Host} entities directly (invite → register with an
 * Ed25519 key → attach a session that is an actor ignoring what it is sent → a signed simulated
 * report → a listing), not through websockets, which would make thousands of hosts slow to set up;
 * see {@link AgentHeartbeatBenchmark} for the websocket side. Each part starts its own node on its
 * own fresh database.
 */
public final class MarketBenchmark {
  static {
    dev.tickmark.node.CommonPool.ensureParallelism(); // as the node's Main does
  }

  private static final PrintStream OUT = System.out;
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final Duration ASK = Duration.ofSeconds(30);
  private static final Executor DIRECT = Runnable::run;
  private static final String[] REGIONS = {
    "eu-nl", "eu-de", "eu-fr", "us-east", "us-west", "ap-sg"
  };

  /** A catalog GPU model as a simulated host reports it. */
  record Model(String code, String smiName, long vramMib) {}

  static final Model H100 = new Model("h100-80gb", "NVIDIA H100 80GB HBM3", 81559);

  /**
   * Models for the metering part: each has its own matcher, so rentals spread over them are matched
   * in parallel.
   */
  static final List<Model> MODELS =
      List.of(
          H100,
          new Model("a100-80gb", "NVIDIA A100-SXM4-80GB", 81920),
          new Model("h200-141gb", "NVIDIA H200", 143771),
          new Model("l40s-48gb", "NVIDIA L40S", 46068));

  static final long CEILING = 3_000_000; // 3.00 EUR per GPU-hour; host floors are 1.50–2.50

  static final String USAGE =
      """
      Usage: MarketBenchmark [--option=value ...]
        --parts=match,meter        which parts to run (default both)
        (a) match: launch -> matched latency at open-loop arrival rates
        --hosts=1000,10000         listed hosts, ascending (the same node grows) (default 1000,10000)
        --rates=20,200,1000        arrivals per second, each for --duration seconds (default 20,200,1000)
        --duration=S               seconds per rate (default 15)
        --warmup=S                 unmeasured launches first, at --warmup-rate/s (default 20 s at 20/s)
        --warmup-rounds=N          that many warm-ups, each ending with its rentals stopped (default 1)
        --drain=S                  at most S seconds to wait for answers after a rate's arrivals (default 20)
        --cards=N                  cards per host (default 8)
        --via=http|sharding        POST /v1/rentals with API keys (default), or Rental.Create through sharding
        --cold-shards=true|false   leave the rental shards to be placed by the measured launches (default false:
                                   every shard is started first, as on a node that has run for a while)
        --max-in-flight=N          launches in flight at once; arrivals beyond are shed and counted (default 1000)
        --wait-seconds=N           the rentals' wait_seconds (default 10)
        --floor=S                  before each rate up to --floor-max-rate, S seconds of the launch's durable writes
                                   alone at the same rate (two single-row commits side by side, then a third), the
                                   baseline of the launch's latency (default 10; 0 = none); via http, then as long
                                   the HTTP floor: the same POST without an API key, answered 401 at the node's
                                   edge (the client, the connection and Pekko HTTP's routing, nothing else)
        --floor-max-rate=N         the highest rate with a commit floor and an HTTP floor (default 200)
        --idempotency-keys=true    every launch under an Idempotency-Key of its own, as the CLI sends (default false)
        --heartbeat-every=S        every listed host heartbeats every S s from when it is listed, as its agent would
                                   (tickmark.hosts.heartbeat-interval is 2 s); 0 = never (default 0, as before)
        --idle=S                   after the warm-up, S seconds with the hosts online and no launches: what the node
                                   and PostgreSQL do for nothing (transactions a second, cores; default 10; 0 = none)
        (b) meter: concurrently running rentals
        --meter-sizes=1000,2000,5000,10000   running rentals K, ascending (the same rentals keep running)
        --meter-window=S           measured seconds per K (default 30; settlements are every 10 s)
        --meter-cards=N            cards per host (default 8); hosts = 1.05 x largest K / cards
        --meter-models=N           GPU models the rentals are spread over, 1-4 (default 4: H100, A100 80GB, H200, L40S);
                                   there is one matcher per model, so this is how many match in parallel
        --probes=N                 rentals whose ticks are subscribed to per K (default 100)
        --ramp-timeout=S           give up growing to K after S seconds (default 300)
        --max-lag-ms=MS            stop growing once tick lag p99 exceeds this (default 1000)
        --raw-rows=N               rows per raw JDBC baseline pass, batches of 1000 (default 100000)
        common
        --renters=N --providers=N  accounts (default 200 renters, 100 providers)
        --analyze=autovacuum|auto|whole   with the server's autovacuum off, what stands in for it:
                                   autovacuum (the default): what autovacuum would do, once every
                                   autovacuum_naptime, vacuum and analyze included (AutovacuumStandIn);
                                   auto: every --analyze-every s, ANALYZE of the tables autoanalyze would,
                                   throttled (2026-12-06, nineteenth session); whole: every --analyze-every s,
                                   ANALYZE of the whole database, unthrottled (before that)
        --analyze-every=S          for auto and whole (default 10)
        --db-url=URL --db-user=U --db-password=P --keep-database
      """;

  private MarketBenchmark() {}

  public static void main(String[] argv) throws Exception {
    MarketBenchSupport.quietLogs();
    Args a;
    Options o;
    MarketBenchSupport.DbConfig dbConfig;
    try {
      a = new Args(argv);
      if (a.has("help")) {
        OUT.print(USAGE);
        return;
      }
      o = Options.of(a);
      dbConfig = MarketBenchSupport.DbConfig.of(a);
      a.requireEmpty();
    } catch (RuntimeException e) {
      System.err.println(e.getMessage());
      System.err.print(USAGE);
      System.exit(2);
      return;
    }
    OUT.println("== MarketBenchmark ==");
    OUT.println("machine: " + MarketBenchSupport.machine());
    List<String> summary = new ArrayList<>();
    if (o.parts.contains("match")) {
      try (BenchDatabase db = BenchDatabase.create(dbConfig, "tickmark_bench_match")) {
        summary.addAll(new MatchPart(o, db).run());
      }
    }
    if (o.parts.contains("meter")) {
      try (BenchDatabase db = BenchDatabase.create(dbConfig, "tickmark_bench_meter")) {
        summary.addAll(new MeterPart(o, db).run());
      }
    }
    OUT.println();
    OUT.println("== MarketBenchmark summary ==");
    summary.forEach(OUT::println);
    System.exit(0);
  }

  record Options(
      List<String> parts,
      int[] hosts,
      int[] rates,
      int duration,
      int warmup,
      int warmupRate,
      int warmupRounds,
      int drain,
      int cards,
      String via,
      int maxInFlight,
      int waitSeconds,
      int[] meterSizes,
      int meterWindow,
      int meterCards,
      int meterModels,
      int probes,
      int rampTimeout,
      int maxLagMs,
      int rawRows,
      int renters,
      int providers,
      boolean coldShards,
      int floorSeconds,
      int floorMaxRate,
      int idleSeconds,
      boolean idempotencyKeys,
      int heartbeatEvery,
      int analyzeEvery,
      String analyze) {
    static Options of(Args a) {
      String analyze = a.string("analyze", "autovacuum");
      if (!List.of("autovacuum", "auto", "whole").contains(analyze))
        throw new IllegalArgumentException("--analyze is autovacuum, auto or whole");
      Options o =
          new Options(
              List.of(a.string("parts", "match,meter").split(",")),
              sorted(a.integers("hosts", "1000,10000")),
              a.integers("rates", "20,200,1000"),
              a.integer("duration", 15),
              a.integer("warmup", 20),
              a.integer("warmup-rate", 20),
              a.integer("warmup-rounds", 1),
              a.integer("drain", 20),
              a.integer("cards", 8),
              a.string("via", "http"),
              a.integer("max-in-flight", 1000),
              a.integer("wait-seconds", 10),
              sorted(a.integers("meter-sizes", "1000,2000,5000,10000")),
              a.integer("meter-window", 30),
              a.integer("meter-cards", 8),
              a.integer("meter-models", 4),
              a.integer("probes", 100),
              a.integer("ramp-timeout", 300),
              a.integer("max-lag-ms", 1000),
              a.integer("raw-rows", 100_000),
              a.integer("renters", 200),
              a.integer("providers", 100),
              Boolean.parseBoolean(a.string("cold-shards", "false")),
              a.integer("floor", 10),
              a.integer("floor-max-rate", 200),
              a.integer("idle", 10),
              Boolean.parseBoolean(a.string("idempotency-keys", "false")),
              a.integer("heartbeat-every", 0),
              a.integer("analyze-every", 10),
              analyze);
      if (!o.via.equals("http") && !o.via.equals("sharding"))
        throw new IllegalArgumentException("--via is http or sharding");
      return o;
    }

    private static int[] sorted(int[] v) {
      Arrays.sort(v);
      return v;
    }
  }

  // ---------------------------------------------------------------------------------------------
  // A node with accounts and hosts made through the entities.

  static class Fixture {
    final Options o;
    final BenchDatabase db;
    Node node;
    ActorSystem<Void> system;
    ClusterSharding sharding;
    EngineMetrics metrics;
    ActorRef<Host.ToSession> session;
    ScheduledExecutorService heartbeats;
    final List<String> renters = new ArrayList<>();
    final List<String> renterKeys = new ArrayList<>();
    final List<String> providers = new ArrayList<>();
    final List<String> hostIds = new ArrayList<>();
    final Map<String, Long> cardsOf = new ConcurrentHashMap<>();
    final HttpClient http =
        HttpClient.newBuilder()
            .version(HttpClient.Version.HTTP_1_1)
            .connectTimeout(Duration.ofSeconds(30))
            .executor(
                Executors.newFixedThreadPool(
                    4,
                    r -> {
                      Thread t = new Thread(r, "bench-http");
                      t.setDaemon(true);
                      return t;
                    }))
            .build();
    private final Random random = new Random(42);

    Fixture(Options o, BenchDatabase db) {
      this.o = o;
      this.db = db;
    }

    void startNode() throws Exception {
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
              .withConfig("tickmark.hosts.heartbeat-interval", "5s")
              // Hosts made here have no agent: they must not go offline while the benchmark does
              // not heartbeat them.
              .withConfig("tickmark.hosts.heartbeat-timeout", "1h")
              .withConfig("pekko.http.server.max-connections", 8192)
              // the load is many renters behind one address: the API's rate limits would measure
              // themselves
              .withRateLimits(1_000_000, 1_000_000, 1_000_000, 1_000_000);
      node = Node.start(ns);
      system = node.system();
      sharding = ClusterSharding.get(system);
      metrics = EngineMetrics.get(system);
      session =
          system.systemActorOf(
              Behaviors.<Host.ToSession>ignore(), "bench-agent-session", Props.empty());
      if (o.analyze().equals("autovacuum")) db.standInForAutovacuum();
      else db.analyzeEvery(o.analyzeEvery(), o.analyze().equals("whole"));
      var c = system.settings().config();
      OUT.printf(
          "node %s: settle-interval %s, hold %s, journal batchSize %d parallelism %d, slick pool %d, wake-interval %s%n",
          node.baseUrl(),
          c.getDuration("tickmark.rentals.settle-interval").toSeconds() + "s",
          c.getDuration("tickmark.rentals.hold-duration").toSeconds() + "s",
          c.getInt("jdbc-journal.batchSize"),
          c.getInt("jdbc-journal.parallelism"),
          c.getInt("pekko-persistence-jdbc.shared-databases.slick.db.maxConnections"),
          c.getDuration("tickmark.rentals.wake-interval").toSeconds() + "s");
    }

    /**
     * Heartbeats for every host every {@code everySeconds}, spread evenly (10 ms slots), sent to
     * the host entities as its session would: what a market's online hosts cost the node whatever
     * the launches.
     */
    void startHeartbeats(int gpusPerHost, int everySeconds) {
      List<String> hosts = new ArrayList<>(hostIds);
      long[] seq = new long[hosts.size()];
      int slots = everySeconds * 100;
      AtomicInteger position = new AtomicInteger();
      List<Host.GpuHealth> gpus = new ArrayList<>();
      for (int i = 0; i < gpusPerHost; i++) gpus.add(new Host.GpuHealth(i, 100, 60, null));
      List<Host.GpuHealth> health = List.copyOf(gpus);
      heartbeats =
          Executors.newSingleThreadScheduledExecutor(
              r -> {
                Thread t = new Thread(r, "bench-heartbeats");
                t.setDaemon(true);
                return t;
              });
      heartbeats.scheduleAtFixedRate(
          () -> {
            int slot = position.getAndIncrement() % slots;
            long now = Host.micros(Instant.now());
            for (int i = slot; i < hosts.size(); i += slots) {
              host(hosts.get(i))
                  // null: no workload list (none runs), so none of its rentals is ever unlisted
                  .tell(new Host.Heartbeat(session, ++seq[i], health, null, now));
            }
          },
          10,
          10,
          TimeUnit.MILLISECONDS);
      OUT.printf(
          Locale.ROOT,
          "heartbeats: %,d hosts every %d s, spread evenly (%,.0f/s)%n",
          hosts.size(),
          everySeconds,
          hosts.size() / (double) everySeconds);
    }

    /**
     * Stops the node and waits for it (a loaded node takes a while), so the database is not dropped
     * under it.
     */
    void closeNode() {
      if (heartbeats != null) heartbeats.shutdownNow();
      if (node == null) return;
      long t0 = System.nanoTime();
      try {
        node.close();
      } catch (Exception e) {
        try {
          system.getWhenTerminated().toCompletableFuture().get(180, TimeUnit.SECONDS);
        } catch (Exception again) {
          OUT.println("node did not stop within 240 s: " + again);
        }
      }
      OUT.printf(Locale.ROOT, "node stopped in %.1f s%n", (System.nanoTime() - t0) / 1e9);
      node = null;
    }

    /**
     * Renters (funded, with API keys when driving HTTP) and providers, opened through the account
     * entities.
     */
    void openAccounts(boolean apiKeys) throws Exception {
      long t0 = System.nanoTime();
      for (int i = 0; i < o.renters(); i++) renters.add("acc_bench_renter_" + i);
      for (int i = 0; i < o.providers(); i++) providers.add("acc_bench_provider_" + i);
      List<String> all = new ArrayList<>(renters);
      all.addAll(providers);
      bounded(
          64,
          all.size(),
          i ->
              plain(
                  account(all.get(i))
                      .<Account.Summary>askWithStatus(r -> new Account.Open(all.get(i), r), ASK)));
      bounded(
          64,
          renters.size(),
          i ->
              plain(
                  account(renters.get(i))
                      .<Account.Posting>askWithStatus(
                          r -> new Account.Deposit("bench-deposit", 1_000_000_000_000L, r),
                          ASK))); // 1 000 000 EUR each
      if (apiKeys) {
        for (String r : renters)
          renterKeys.add(
              node.apiKeys()
                  .create(r, "bench")
                  .toCompletableFuture()
                  .get(30, TimeUnit.SECONDS)
                  .apiKey());
      }
      OUT.printf(
          Locale.ROOT,
          "accounts: %d renters (1 000 000 EUR each%s), %d providers in %.1f s%n",
          renters.size(),
          apiKeys ? ", API keys" : "",
          providers.size(),
          (System.nanoTime() - t0) / 1e9);
    }

    EntityRef<Account.Command> account(String id) {
      return sharding.entityRefFor(Account.ENTITY_KEY, id);
    }

    EntityRef<Host.Command> host(String id) {
      return sharding.entityRefFor(Host.ENTITY_KEY, id);
    }

    EntityRef<Rental.Command> rental(String id) {
      return sharding.entityRefFor(Rental.ENTITY_KEY, id);
    }

    /**
     * Adds {@code count} listed, verified, online hosts of {@code model} × {@code cards}, floors
     * 1.50–2.50 EUR.
     */
    void addHosts(int count, int cards, Model model) throws Exception {
      int from = hostIds.size();
      int total = from + count;
      if (count <= 0) return;
      long t0 = System.nanoTime();
      long events0 = db.journalOrdering();
      List<String> added = new ArrayList<>();
      for (int i = from; i < total; i++)
        added.add(String.format(Locale.ROOT, "host_bench_%06d", i));
      List<Long> prices = new ArrayList<>();
      for (int i = from; i < total; i++) prices.add(1_500_000L + 10_000L * random.nextInt(101));
      for (int chunk = 0; chunk < added.size(); chunk += 1000) {
        int first = chunk;
        int n = Math.min(1000, added.size() - chunk);
        long c0 = System.nanoTime();
        bounded(
            100,
            n,
            i ->
                makeHost(
                    added.get(first + i), from + first + i, cards, prices.get(first + i), model));
        if (added.size() > 1000) {
          OUT.printf(
              Locale.ROOT,
              "   hosts %,d..%,d made at %,.0f/s%n",
              from + first,
              from + first + n - 1,
              n / ((System.nanoTime() - c0) / 1e9));
        }
      }
      hostIds.addAll(added);
      double seconds = (System.nanoTime() - t0) / 1e9;
      long events = db.journalOrdering() - events0;
      OUT.printf(
          Locale.ROOT,
          "hosts: %,d %s x %d made (%,d in all) in %.1f s, %,.0f hosts/s, %,d journal events%n",
          added.size(),
          model.code(),
          cards,
          total,
          seconds,
          added.size() / seconds,
          events);
      long w0 = System.nanoTime();
      cardsOf.merge(model.code(), (long) count * cards, Long::sum);
      int cardsListed = waitForOffers(model.code(), cardsOf.get(model.code()), 300);
      OUT.printf(
          Locale.ROOT,
          "read side: GET /v1/offers shows %,d free %s cards after %.1f s more%n",
          cardsListed,
          model.code(),
          (System.nanoTime() - w0) / 1e9);
    }

    private CompletionStage<?> makeHost(
        String hostId, int index, int cards, long floor, Model model) {
      String owner = providers.get(index % providers.size());
      String tokenHash = Host.sha256("bench-token-" + hostId);
      KeyPair key = Ed25519.generate();
      String publicKey = Ed25519.encodePublic(key.getPublic());
      HardwareReport report = report(hostId, cards, model);
      JsonNode tree = Frames.reportTree(report);
      byte[] canonical = CanonicalJson.bytes(tree);
      String signature = Ed25519.sign(key.getPrivate(), canonical);
      String canonicalText = new String(canonical, StandardCharsets.UTF_8);
      Listing listing =
          new Listing(floor, null, Listing.DEFAULT_SPOT_NOTICE_SECONDS, List.of(), true);
      EntityRef<Host.Command> ref = host(hostId);
      String region = REGIONS[index % REGIONS.length];
      return plain(
              ref.<org.apache.pekko.Done>askWithStatus(
                  r ->
                      new Host.Invite(
                          owner,
                          region,
                          "bench",
                          tokenHash,
                          Instant.now().plus(Duration.ofDays(1)),
                          r),
                  ASK))
          .thenCompose(
              d ->
                  plain(
                      ref.<Host.Registration>askWithStatus(
                          r -> new Host.Register(tokenHash, publicKey, r), ASK)))
          .thenCompose(
              reg -> plain(ref.<Host.Attached>askWithStatus(r -> new Host.Attach(session, r), ASK)))
          .thenCompose(
              att ->
                  plain(
                      ref.<Verification.Outcome>askWithStatus(
                          r -> new Host.VerifyReport(session, report, canonicalText, signature, r),
                          ASK)))
          .thenCompose(
              outcome -> {
                if (!outcome.passed()) {
                  throw new IllegalStateException(
                      "host "
                          + hostId
                          + " failed verification: "
                          + outcome.checks().stream()
                              .filter(c -> c.status() != Verification.Status.PASS)
                              .map(Verification.Check::check)
                              .toList());
                }
                return plain(
                    ref.<Host.HostView>askWithStatus(
                        r -> new Host.UpdateListing(owner, listing, r), ASK));
              });
    }

    /**
     * Polls {@code GET /v1/offers?gpu=…&tier=on_demand} until it shows {@code cards} free cards;
     * answers what it last saw.
     */
    int waitForOffers(String gpu, long cards, int seconds) throws Exception {
      long deadline = System.nanoTime() + seconds * 1_000_000_000L;
      int seen = 0;
      while (System.nanoTime() < deadline) {
        seen = offeredCards(gpu);
        if (seen >= cards) return seen;
        Thread.sleep(500);
      }
      OUT.printf("read side: only %,d of %,d cards offered after %d s%n", seen, cards, seconds);
      return seen;
    }

    /**
     * Polls the offers until {@code cards} are free or the count stops moving for 6 s; answers the
     * last count.
     */
    int waitForFreeCards(String gpu, long cards, int seconds) throws Exception {
      long deadline = System.nanoTime() + seconds * 1_000_000_000L;
      int seen = -1;
      int still = 0;
      while (System.nanoTime() < deadline) {
        int now = offeredCards(gpu);
        if (now >= cards) return now;
        still = now == seen ? still + 1 : 0;
        seen = now;
        if (still >= 6) break;
        Thread.sleep(1000);
      }
      return seen;
    }

    int offeredCards(String gpu) throws Exception {
      HttpRequest req =
          HttpRequest.newBuilder(
                  URI.create(node.baseUrl() + "/v1/offers?gpu=" + gpu + "&tier=on_demand"))
              .timeout(Duration.ofSeconds(30))
              .GET()
              .build();
      HttpResponse<String> resp = http.send(req, HttpResponse.BodyHandlers.ofString());
      if (resp.statusCode() != 200)
        throw new IllegalStateException("GET /v1/offers answered " + resp.statusCode());
      int cards = 0;
      for (JsonNode offer : JSON.readTree(resp.body()).get("offers"))
        cards += offer.get("available_cards").asInt();
      return cards;
    }

    Rental.Spec spec(String gpu) {
      return new Rental.Spec(
          gpu,
          1,
          Listing.Tier.ON_DEMAND,
          null,
          CEILING,
          "bench/noop:latest",
          List.of(),
          null,
          null,
          o.waitSeconds(),
          false);
    }
  }

  /**
   * Simulated GPUs: {@code cards} × the model, driver 550.54.15, RAM enough for them, 500 GiB free,
   * 1000 MiB/s.
   */
  static HardwareReport report(String hostId, int cards, Model model) {
    List<HardwareReport.Gpu> gpus = new ArrayList<>();
    for (int i = 0; i < cards; i++) {
      String uuid =
          String.format(Locale.ROOT, "GPU-%08x-%04x-4000-8000-000000000000", hostId.hashCode(), i);
      gpus.add(
          new HardwareReport.Gpu(
              i,
              uuid,
              model.smiName(),
              "nvidia",
              model.vramMib(),
              "550.54.15",
              "12.4",
              35,
              0L,
              5,
              16));
    }
    long ram = Math.max(200_000L, model.vramMib() * cards); // the rule is RAM >= 0.95 x VRAM
    return new HardwareReport(
        "bench",
        true,
        Instant.now().truncatedTo(ChronoUnit.SECONDS).toString(),
        gpus,
        new HardwareReport.Cpu("bench CPU", 64),
        ram,
        new HardwareReport.Disk("/scratch", 500L * 1024 * 1024 * 1024, 1000.0),
        null);
  }

  /**
   * The ask's answer as a plain {@link CompletableFuture} whose callbacks run on the thread that
   * completes it. Pekko's Java API answers with Scala-backed futures that run even non-async
   * callbacks asynchronously on the common ForkJoinPool, and on a machine with fewer than 3 cores
   * that pool has parallelism 1, so the JDK starts a new thread for every callback: the benchmark
   * must not pay that on its side of every ask.
   */
  static <T> CompletableFuture<T> plain(CompletionStage<T> stage) {
    CompletableFuture<T> f = new CompletableFuture<>();
    stage.whenCompleteAsync(
        (v, e) -> {
          if (e != null) f.completeExceptionally(e);
          else f.complete(v);
        },
        DIRECT);
    return f;
  }

  /** Runs {@code n} operations, at most {@code parallel} at a time; throws if any failed. */
  static void bounded(int parallel, int n, IntFunction<CompletionStage<?>> op) throws Exception {
    Semaphore permits = new Semaphore(parallel);
    AtomicReference<Throwable> failure = new AtomicReference<>();
    AtomicInteger failures = new AtomicInteger();
    for (int i = 0; i < n; i++) {
      if (!permits.tryAcquire(120, TimeUnit.SECONDS))
        throw new IllegalStateException("no progress in 120 s");
      CompletionStage<?> stage;
      try {
        stage = op.apply(i);
      } catch (RuntimeException e) {
        stage = CompletableFuture.failedFuture(e);
      }
      stage.whenComplete(
          (ok, e) -> {
            if (e != null) {
              failures.incrementAndGet();
              failure.compareAndSet(null, e);
            }
            permits.release();
          });
    }
    if (!permits.tryAcquire(parallel, 300, TimeUnit.SECONDS))
      throw new IllegalStateException("operations did not finish in 300 s");
    if (failure.get() != null)
      throw new IllegalStateException(
          failures.get() + " of " + n + " failed: " + failure.get(), failure.get());
  }

  // ---------------------------------------------------------------------------------------------
  // (a) launch -> matched

  static final class MatchPart extends Fixture {
    MatchPart(Options o, BenchDatabase db) {
      super(o, db);
    }

    record Launched(String rentalId, String status, String error, String endReason) {}

    record RateResult(
        int hosts,
        int rate,
        int offered,
        int sent,
        int shed,
        int matched,
        int pending,
        int otherStatus,
        Map<String, Integer> errors,
        long[] matchedMicros,
        long[] allMicros,
        double seconds,
        double drainSeconds,
        HistogramSnapshot matcher,
        CpuSample.Usage cpu,
        int rentalsStopped,
        List<HistogramSnapshot> steps,
        GcSample.Usage gc,
        CommitFloor.Result floor,
        CommitFloor.Result httpFloor,
        long transactions,
        TailAttribution attribution) {}

    /** The launch steps of {@link EngineMetrics}, in order, with the names printed. */
    private List<LatencyHistogram> steps() {
      return List.of(
          metrics.rentalRecovery,
          metrics.launchRecorded,
          metrics.launchHold,
          metrics.launchMatch,
          metrics.launchMatchedRecorded);
    }

    /** "recovery" is every rental's that started meanwhile: the launches' new rentals here. */
    private static final List<String> STEP_NAMES =
        List.of("recovery", "recorded", "hold", "match", "matched_recorded");

    List<String> run() throws Exception {
      OUT.println();
      OUT.println("== (a) launch -> matched latency, via " + o.via() + " ==");
      startNode();
      List<RateResult> results = new ArrayList<>();
      try {
        openAccounts(o.via().equals("http"));
        if (!o.coldShards()) startRentalShards();
        boolean warm = o.warmup() == 0;
        for (int hosts : o.hosts()) {
          addHosts(hosts - hostIds.size(), o.cards(), H100);
          if (o.heartbeatEvery() > 0) {
            if (heartbeats != null) heartbeats.shutdownNow();
            startHeartbeats(o.cards(), o.heartbeatEvery());
          }
          if (!warm) {
            // The JIT compiles the launch path first: the first seconds run interpreted code at
            // several times the CPU cost.
            for (int round = 1; round <= o.warmupRounds(); round++) {
              OUT.printf(
                  "-- warm-up %d of %d (not measured): %d launches/s for %d s%n",
                  round, o.warmupRounds(), o.warmupRate(), o.warmup());
              runRate(hosts, o.warmupRate(), o.warmup(), null, null);
            }
            warm = true;
          }
          idle(hosts);
          for (int rate : o.rates()) {
            // Each rate starts from a market with every card free again, and a few quiet seconds.
            Thread.sleep(3000);
            CommitFloor.Result floor = commitFloor(rate);
            CommitFloor.Result httpFloor = httpFloor(rate);
            RateResult r = runRate(hosts, rate, o.duration(), floor, httpFloor);
            results.add(r);
            print(r);
          }
        }
      } finally {
        pauses.close();
        closeNode();
        OUT.println("database: " + db.analyzeSummary());
      }
      return summary(results);
    }

    /**
     * {@code --idle} seconds with no launches, after a quiet moment: PostgreSQL's transactions a
     * second and the cores used, what a node costs that nobody uses (its projections' polls, the
     * journal probe, the hosts' sessions).
     */
    private void idle(int hosts) throws InterruptedException {
      if (o.idleSeconds() <= 0) return;
      Thread.sleep(3000);
      OUT.printf("-- idle: %,d hosts online, no launches, for %d s%n", hosts, o.idleSeconds());
      CpuSample c0 = CpuSample.take(db.name);
      long x0 = db.transactions();
      Thread.sleep(o.idleSeconds() * 1000L);
      long x1 = db.transactions();
      CpuSample.Usage cpu = c0.until(CpuSample.take(db.name));
      double perSecond = (double) (x1 - x0) / o.idleSeconds();
      idleLine =
          String.format(
              Locale.ROOT,
              "idle (%,d hosts online, no launches, %d s): %.1f PostgreSQL transactions/s; cores %s",
              hosts,
              o.idleSeconds(),
              perSecond,
              MarketBenchSupport.cores(cpu));
      OUT.println("   " + idleLine);
      BenchResult.absolute(
              "market-match",
              "idle.pg-transactions-per-s",
              "PostgreSQL transactions a second, no launches",
              perSecond,
              "transactions/s")
          .withNote(String.format(Locale.ROOT, "%,d hosts online, %d s", hosts, o.idleSeconds()))
          .print(OUT);
    }

    private String idleLine;

    /** The launch's durable writes alone at {@code rate}, just before its launches; null if off. */
    private CommitFloor.Result commitFloor(int rate) throws Exception {
      if (o.floorSeconds() <= 0 || rate > o.floorMaxRate()) return null;
      OUT.printf(
          "-- commit floor: the launch's three commits alone, %,d/s for %d s%n",
          rate, o.floorSeconds());
      try (CommitFloor floor = new CommitFloor(db.url, db.user, db.password, 16)) {
        return floor.run(rate, o.floorSeconds());
      }
    }

    /**
     * The launch's own request at {@code rate} without an API key, just before its launches: the
     * node answers 401 at its edge (no database, no entity), so this is what the client, the
     * connection and Pekko HTTP's parsing, routing and rendering cost at that rate; null if off.
     * Latency counts from each arrival's due time, as the launches' does.
     */
    private CommitFloor.Result httpFloor(int rate) throws InterruptedException {
      if (!o.via().equals("http") || o.floorSeconds() <= 0 || rate > o.floorMaxRate()) return null;
      OUT.printf(
          "-- HTTP floor: the launch's request without an API key (401 at the edge), %,d/s for %d s%n",
          rate, o.floorSeconds());
      HttpRequest req =
          HttpRequest.newBuilder(URI.create(node.baseUrl() + "/v1/rentals"))
              .timeout(Duration.ofSeconds(30))
              .header("Content-Type", "application/json")
              .POST(HttpRequest.BodyPublishers.ofString(launchBody()))
              .build();
      int offered = rate * o.floorSeconds();
      ConcurrentLinkedQueue<Long> micros = new ConcurrentLinkedQueue<>();
      AtomicInteger failed = new AtomicInteger();
      AtomicReference<String> firstFailure = new AtomicReference<>();
      CountDownLatch answered = new CountDownLatch(offered);
      long t0 = System.nanoTime() + 50_000_000L;
      long step = 1_000_000_000L / rate;
      for (int i = 0; i < offered; i++) {
        long due = t0 + i * step;
        long wait;
        while ((wait = due - System.nanoTime()) > 0) LockSupport.parkNanos(wait);
        http.sendAsync(req, HttpResponse.BodyHandlers.ofString())
            .whenComplete(
                (resp, e) -> {
                  if (e == null && resp.statusCode() == 401)
                    micros.add((System.nanoTime() - due) / 1000);
                  else {
                    failed.incrementAndGet();
                    firstFailure.compareAndSet(
                        null, e != null ? errorCode(e) : "HTTP " + resp.statusCode());
                  }
                  answered.countDown();
                });
      }
      if (!answered.await(o.drain(), TimeUnit.SECONDS))
        firstFailure.compareAndSet(null, answered.getCount() + " unanswered after the drain");
      return new CommitFloor.Result(sortedArray(micros), failed.get(), firstFailure.get());
    }

    /**
     * Starts every shard of the rentals before measuring. Rental ids are random, so on a fresh node
     * the first few thousand launches keep landing in shards that are not placed yet, and each such
     * launch waits for the coordinator to allocate one; a node that has run for a while has them
     * all. One {@code Get} per shard, for an id that does not exist (it answers not-found and
     * passivates later). {@code --cold-shards=true} skips this.
     */
    private void startRentalShards() throws Exception {
      int shards = system.settings().config().getInt("pekko.cluster.sharding.number-of-shards");
      Map<Integer, String> idPerShard = new HashMap<>();
      Random random = new Random(1);
      while (idPerShard.size() < shards) {
        String id =
            o.via().equals("sharding")
                ? "rnt_shard_" + random.nextInt(Integer.MAX_VALUE)
                : String.format(Locale.ROOT, "rnt_%024x", new java.math.BigInteger(96, random));
        // Pekko's default: the shard is the entity id's hash code modulo the number of shards.
        idPerShard.putIfAbsent(Math.abs(id.hashCode() % shards), id);
      }
      List<String> ids = new ArrayList<>(idPerShard.values());
      long t0 = System.nanoTime();
      bounded(
          64,
          ids.size(),
          i ->
              plain(
                      rental(ids.get(i))
                          .<Rental.View>askWithStatus(r -> new Rental.Get(null, r), ASK))
                  .handle((v, e) -> null)); // not found, as expected
      OUT.printf(
          Locale.ROOT,
          "-- started all %,d rental shards in %.1f s (--cold-shards=true leaves them to the launches)%n",
          shards,
          (System.nanoTime() - t0) / 1e9);
    }

    private CompletionStage<Launched> launch(int index) {
      int renter = index % renters.size();
      if (o.via().equals("sharding")) {
        String id = "rnt_bench_" + index;
        return plain(
                rental(id)
                    .<Rental.View>askWithStatus(
                        r -> new Rental.Create(renters.get(renter), spec(H100.code()), r),
                        Duration.ofSeconds(15)))
            .handle(
                (v, e) ->
                    e == null
                        ? new Launched(
                            id,
                            v.status().wire(),
                            null,
                            v.endReason() == null ? null : v.endReason().wire())
                        : new Launched(id, null, errorCode(e), null));
      }
      String body = launchBody();
      HttpRequest.Builder builder =
          HttpRequest.newBuilder(URI.create(node.baseUrl() + "/v1/rentals"))
              .timeout(Duration.ofSeconds(30))
              .header("Authorization", "Bearer " + renterKeys.get(renter))
              .header("Content-Type", "application/json");
      if (o.idempotencyKeys()) builder.header("Idempotency-Key", "bench-launch-" + index);
      HttpRequest req = builder.POST(HttpRequest.BodyPublishers.ofString(body)).build();
      return http.sendAsync(req, HttpResponse.BodyHandlers.ofString())
          .handle(
              (resp, e) -> {
                if (e != null) return new Launched(null, null, errorCode(e), null);
                if (resp.statusCode() != 201) {
                  String code = "http_" + resp.statusCode();
                  try {
                    JsonNode p = JSON.readTree(resp.body());
                    if (p.has("code")) code += "_" + p.get("code").asText();
                  } catch (Exception ignored) {
                    // not problem+json
                  }
                  return new Launched(null, null, code, null);
                }
                try {
                  JsonNode rental = JSON.readTree(resp.body()).get("rental");
                  JsonNode reason = rental.get("end_reason");
                  return new Launched(
                      rental.get("id").asText(),
                      rental.get("status").asText(),
                      null,
                      reason == null || reason.isNull() ? null : reason.asText());
                } catch (Exception ex) {
                  return new Launched(null, null, "unreadable_answer", null);
                }
              });
    }

    private String launchBody() {
      return "{\"gpu\":\""
          + H100.code()
          + "\",\"count\":1,\"tier\":\"on_demand\",\"max_price_per_gpu_hour\":\"3.00\","
          + "\"image\":\"bench/noop:latest\",\"wait_seconds\":"
          + o.waitSeconds()
          + "}";
    }

    private static String errorCode(Throwable e) {
      Throwable t = e;
      while (t.getCause() != null && t instanceof java.util.concurrent.CompletionException)
        t = t.getCause();
      String m =
          t.getMessage() == null
              ? ""
              : "(" + t.getMessage().replaceAll("[^A-Za-z ]", "").trim().replace(' ', '_') + ")";
      return t.getClass().getSimpleName() + (m.length() > 40 ? m.substring(0, 40) + ")" : m);
    }

    /**
     * Open loop: arrival i is due at t0 + i/rate whatever happened to the earlier ones; latency
     * counts from when it was due. {@code floor}: the commit floor measured just before (null:
     * none).
     */
    RateResult runRate(
        int hosts, int rate, int duration, CommitFloor.Result floor, CommitFloor.Result httpFloor)
        throws Exception {
      OUT.printf(
          "-- %,d hosts, %,d launches/s for %d s (from %s)%n",
          hosts,
          rate,
          duration,
          java.time.LocalTime.now().truncatedTo(java.time.temporal.ChronoUnit.SECONDS));
      int offered = rate * duration;
      AtomicInteger inFlight = new AtomicInteger();
      AtomicInteger sent = new AtomicInteger(),
          shed = new AtomicInteger(),
          matched = new AtomicInteger(),
          pending = new AtomicInteger(),
          other = new AtomicInteger();
      Map<String, Integer> errors = new ConcurrentHashMap<>();
      ConcurrentLinkedQueue<Long> matchedMicros = new ConcurrentLinkedQueue<>();
      ConcurrentLinkedQueue<Long> allMicros = new ConcurrentLinkedQueue<>();
      ConcurrentLinkedQueue<NanoInterval> matchedSpans = new ConcurrentLinkedQueue<>();
      ConcurrentLinkedQueue<String> created = new ConcurrentLinkedQueue<>();
      AtomicInteger base = new AtomicInteger(launchCounter.getAndAdd(offered));

      HistogramSnapshot m0 = HistogramSnapshot.of(metrics.matchLatency);
      List<HistogramSnapshot> steps0 = steps().stream().map(HistogramSnapshot::of).toList();
      GcSample g0 = GcSample.take();
      CpuSample c0 = CpuSample.take(db.name);
      long x0 = db.transactions();
      long t0 = System.nanoTime() + 50_000_000L;
      long step = 1_000_000_000L / rate;
      long lastPrint = t0;
      for (int i = 0; i < offered; i++) {
        long due = t0 + i * step;
        long wait;
        while ((wait = due - System.nanoTime()) > 0) LockSupport.parkNanos(wait);
        if (inFlight.get() >= o.maxInFlight()) {
          shed.incrementAndGet();
          continue;
        }
        inFlight.incrementAndGet();
        sent.incrementAndGet();
        launch(base.get() + i)
            .whenComplete(
                (l, e) -> {
                  long answered = System.nanoTime();
                  long micros = (answered - due) / 1000;
                  inFlight.decrementAndGet();
                  if (l.rentalId() != null) created.add(l.rentalId());
                  if (l.error() != null) {
                    errors.merge(l.error(), 1, Integer::sum);
                    return;
                  }
                  allMicros.add(micros);
                  switch (l.status()) {
                    case "provisioning" -> {
                      matched.incrementAndGet();
                      matchedMicros.add(micros);
                      matchedSpans.add(new NanoInterval(due, answered));
                    }
                    case "pending" -> pending.incrementAndGet();
                    default -> {
                      other.incrementAndGet();
                      errors.merge(
                          "answered_"
                              + l.status()
                              + (l.endReason() == null ? "" : "_" + l.endReason()),
                          1,
                          Integer::sum);
                    }
                  }
                });
        if (System.nanoTime() - lastPrint > 5_000_000_000L) {
          lastPrint = System.nanoTime();
          OUT.printf(
              Locale.ROOT,
              "   t=%.0fs sent %,d, answered %,d (matched %,d), in flight %,d, shed %,d%n",
              (lastPrint - t0) / 1e9,
              sent.get(),
              allMicros.size() + errors.values().stream().mapToInt(Integer::intValue).sum(),
              matched.get(),
              inFlight.get(),
              shed.get());
        }
      }
      double seconds = (System.nanoTime() - t0) / 1e9;
      CpuSample c1 = CpuSample.take(db.name);
      GcSample g1 = GcSample.take();
      long x1 = db.transactions();
      long drainStart = System.nanoTime();
      long drainDeadline = drainStart + o.drain() * 1_000_000_000L;
      while (inFlight.get() > 0 && System.nanoTime() < drainDeadline) Thread.sleep(50);
      double drainSeconds = (System.nanoTime() - drainStart) / 1e9;
      if (inFlight.get() > 0) errors.merge("no_answer_after_drain", inFlight.get(), Integer::sum);
      NanoInterval window = new NanoInterval(t0, System.nanoTime());
      TailAttribution attribution =
          TailAttribution.of(
              List.copyOf(matchedSpans), pauses.within(window), db.standInWorkWithin(window));
      HistogramSnapshot m1 = HistogramSnapshot.of(metrics.matchLatency);
      List<HistogramSnapshot> steps1 = steps().stream().map(HistogramSnapshot::of).toList();
      List<HistogramSnapshot> steps = new ArrayList<>();
      for (int k = 0; k < steps0.size(); k++) steps.add(steps1.get(k).minus(steps0.get(k)));

      // Give the cards back: stop every rental this rate created, then wait for the read side to
      // show them free.
      List<String> ids = new ArrayList<>(created);
      long s0 = System.nanoTime();
      bounded(
          64,
          ids.size(),
          i ->
              plain(
                  rental(ids.get(i))
                      .<Rental.View>askWithStatus(r -> new Rental.Stop(null, r), ASK)));
      long total = (long) hosts * o.cards();
      int free = waitForFreeCards(H100.code(), total, 90);
      OUT.printf(
          Locale.ROOT,
          "   stopped %,d rentals in %.1f s; %,d of %,d cards free again%n",
          ids.size(),
          (System.nanoTime() - s0) / 1e9,
          free,
          total);
      if (free < total) diagnoseHeldCards();
      return new RateResult(
          hosts,
          rate,
          offered,
          sent.get(),
          shed.get(),
          matched.get(),
          pending.get(),
          other.get(),
          new TreeMap<>(errors),
          sortedArray(matchedMicros),
          sortedArray(allMicros),
          seconds,
          drainSeconds,
          m1.minus(m0),
          c0.until(c1),
          ids.size(),
          steps,
          g0.until(g1),
          floor,
          httpFloor,
          x0 < 0 || x1 < 0 ? -1 : x1 - x0,
          attribution);
    }

    /** The collector's pauses, from the benchmark's start (the node runs in this JVM). */
    private final GcPauses pauses = GcPauses.start();

    private final AtomicInteger launchCounter = new AtomicInteger();

    /**
     * After every rental was stopped, cards still held: asks every host which rental holds them,
     * and each such rental where it stands and which host it names. A card held for a rental that
     * ended, or that names another host, is held by nothing that will release it.
     */
    void diagnoseHeldCards() throws Exception {
      Map<String, List<String>> held =
          new ConcurrentHashMap<>(); // rental -> hosts holding cards for it
      bounded(
          64,
          hostIds.size(),
          i ->
              plain(
                      host(hostIds.get(i))
                          .<Host.HostView>askWithStatus(r -> new Host.Get(null, r), ASK))
                  .thenAccept(
                      v ->
                          v.cards().stream()
                              .filter(c -> c.rentalId() != null)
                              .map(Host.CardView::rentalId)
                              .distinct()
                              .forEach(
                                  rid ->
                                      held.computeIfAbsent(
                                              rid,
                                              k -> Collections.synchronizedList(new ArrayList<>()))
                                          .add(v.hostId()))));
      int orphans = 0;
      int shown = 0;
      for (Map.Entry<String, List<String>> e : held.entrySet()) {
        Rental.View v =
            rental(e.getKey())
                .<Rental.View>askWithStatus(r -> new Rental.Get(null, r), ASK)
                .toCompletableFuture()
                .get(30, TimeUnit.SECONDS);
        String named = v.terms() == null ? null : v.terms().hostId();
        for (String h : e.getValue()) {
          boolean orphan = !h.equals(named) || v.status() == Rental.Status.ENDED;
          if (orphan) orphans++;
          if (orphan && shown++ < 5) {
            OUT.printf(
                "   held card: host %s holds a card for rental %s, which is %s (%s) and names host %s%n",
                h, e.getKey(), v.status(), v.endReason(), named);
          }
        }
      }
      OUT.printf(
          "   cards still held after every rental was stopped: %,d rentals hold cards on %,d hosts; %,d holdings belong to"
              + " rentals that ended or name another host (leaked)%n",
          held.size(), held.values().stream().mapToInt(List::size).sum(), orphans);
    }

    void print(RateResult r) {
      OUT.printf(
          Locale.ROOT,
          "   offered %,d, sent %,d, shed by the driver %,d; answered: matched %,d, pending %,d, other %,d; errors %s%n",
          r.offered(),
          r.sent(),
          r.shed(),
          r.matched(),
          r.pending(),
          r.otherStatus(),
          r.errors());
      OUT.printf(
          Locale.ROOT,
          "   launch -> matched (HTTP 201 provisioning) p50 %s ms, p99 %s ms, p999 %s ms, max %s ms;"
              + " matched/s %.0f%n",
          MarketBenchSupport.ms(MarketBenchSupport.quantile(r.matchedMicros(), 0.5)),
          MarketBenchSupport.ms(MarketBenchSupport.quantile(r.matchedMicros(), 0.99)),
          MarketBenchSupport.ms(MarketBenchSupport.quantile(r.matchedMicros(), 0.999)),
          MarketBenchSupport.ms(
              r.matchedMicros().length == 0 ? 0 : r.matchedMicros()[r.matchedMicros().length - 1]),
          r.matched() / (r.seconds() + r.drainSeconds()));
      OUT.printf(
          Locale.ROOT,
          "   matcher-side (EngineMetrics.matchLatency, %,d matches): p50 %s ms, p99 %s ms, p999 %s ms, max %s ms%n",
          r.matcher().count(),
          MarketBenchSupport.ms(r.matcher().quantileMicros(0.5)),
          MarketBenchSupport.ms(r.matcher().quantileMicros(0.99)),
          MarketBenchSupport.ms(r.matcher().quantileMicros(0.999)),
          MarketBenchSupport.ms(r.matcher().maxMicros()));
      StringBuilder steps =
          new StringBuilder(
              "   launch steps at the rental (EngineMetrics.rentalRecovery, launch*; p50 / p99 / max ms):");
      for (int k = 0; k < r.steps().size(); k++) {
        HistogramSnapshot h = r.steps().get(k);
        steps
            .append(' ')
            .append(STEP_NAMES.get(k))
            .append(' ')
            .append(MarketBenchSupport.ms(h.quantileMicros(0.5)))
            .append(" / ")
            .append(MarketBenchSupport.ms(h.quantileMicros(0.99)))
            .append(" / ")
            .append(MarketBenchSupport.ms(h.maxMicros()))
            .append(k + 1 < r.steps().size() ? ";" : "");
      }
      OUT.println(steps);
      if (r.floor() != null)
        OUT.printf(
            Locale.ROOT,
            "   commit floor (two commits side by side, then one; same rate, just before): p50 %s ms,"
                + " p99 %s ms, p999 %s ms, max %s ms; %,d failed%s%n",
            MarketBenchSupport.ms(MarketBenchSupport.quantile(r.floor().micros(), 0.5)),
            MarketBenchSupport.ms(MarketBenchSupport.quantile(r.floor().micros(), 0.99)),
            MarketBenchSupport.ms(MarketBenchSupport.quantile(r.floor().micros(), 0.999)),
            MarketBenchSupport.ms(
                r.floor().micros().length == 0
                    ? 0
                    : r.floor().micros()[r.floor().micros().length - 1]),
            r.floor().failed(),
            r.floor().firstFailure() == null ? "" : " (first: " + r.floor().firstFailure() + ")");
      if (r.httpFloor() != null)
        OUT.printf(
            Locale.ROOT,
            "   HTTP floor (the same request without a key, 401 at the edge; same rate, just before): p50 %s ms,"
                + " p99 %s ms, p999 %s ms; %,d failed%s%n",
            MarketBenchSupport.ms(MarketBenchSupport.quantile(r.httpFloor().micros(), 0.5)),
            MarketBenchSupport.ms(MarketBenchSupport.quantile(r.httpFloor().micros(), 0.99)),
            MarketBenchSupport.ms(MarketBenchSupport.quantile(r.httpFloor().micros(), 0.999)),
            r.httpFloor().failed(),
            r.httpFloor().firstFailure() == null
                ? ""
                : " (first: " + r.httpFloor().firstFailure() + ")");
      if (r.transactions() >= 0)
        OUT.printf(
            Locale.ROOT,
            "   PostgreSQL transactions during arrivals: %,d, %.2f per launch sent (the launches' and"
                + " all else the node did meanwhile)%n",
            r.transactions(),
            r.sent() == 0 ? 0.0 : (double) r.transactions() / r.sent());
      OUT.println("   garbage collection during arrivals: " + r.gc());
      OUT.println("   " + r.attribution().describe());
      OUT.println("   cores during arrivals: " + MarketBenchSupport.cores(r.cpu()));
    }

    List<String> summary(List<RateResult> results) {
      List<String> lines = new ArrayList<>();
      lines.add(
          "(a) launch -> matched, via "
              + o.via()
              + ", 1 card each, any region, ceiling 3.00 EUR, hosts "
              + o.cards()
              + " cards each with floors 1.50-2.50 EUR; latency from the arrival's due time to the answer");
      String h =
          String.format(
              Locale.ROOT,
              "%7s %6s %7s %7s %6s %8s %7s %8s %8s %8s %9s %8s %8s %8s %8s %6s %6s",
              "hosts",
              "rate/s",
              "offered",
              "sent",
              "shed",
              "matched",
              "pending",
              "errors",
              "p50 ms",
              "p99 ms",
              "p999 ms",
              "match/s",
              "m.p50",
              "m.p99",
              "m.p999",
              "node",
              "pg");
      lines.add(h);
      lines.add("-".repeat(h.length()));
      for (RateResult r : results) {
        int errors =
            r.errors().entrySet().stream()
                .filter(e -> !e.getKey().startsWith("answered_"))
                .mapToInt(Map.Entry::getValue)
                .sum();
        lines.add(
            String.format(
                Locale.ROOT,
                "%,7d %,6d %,7d %,7d %,6d %,8d %,7d %,8d %8s %8s %9s %8.0f %8s %8s %8s %6.2f %6.2f",
                r.hosts(),
                r.rate(),
                r.offered(),
                r.sent(),
                r.shed(),
                r.matched(),
                r.pending(),
                errors,
                MarketBenchSupport.ms(MarketBenchSupport.quantile(r.matchedMicros(), 0.5)),
                MarketBenchSupport.ms(MarketBenchSupport.quantile(r.matchedMicros(), 0.99)),
                MarketBenchSupport.ms(MarketBenchSupport.quantile(r.matchedMicros(), 0.999)),
                r.matched() / (r.seconds() + r.drainSeconds()),
                MarketBenchSupport.ms(r.matcher().quantileMicros(0.5)),
                MarketBenchSupport.ms(r.matcher().quantileMicros(0.99)),
                MarketBenchSupport.ms(r.matcher().quantileMicros(0.999)),
                r.cpu().jvmCores(),
                r.cpu().postgresCores()));
      }
      for (RateResult r : results) {
        String note =
            String.format(
                Locale.ROOT,
                "%,d hosts of %d cards, %.0f s at %d/s, via %s; %,d of %,d offered matched, %,d shed",
                r.hosts(),
                o.cards(),
                r.seconds(),
                r.rate(),
                o.via(),
                r.matched(),
                r.offered(),
                r.shed());
        BenchResult.absolute(
                "market-match",
                "launch.p99@" + r.rate(),
                "launch -> matched p99 at " + r.rate() + "/s",
                MarketBenchSupport.quantile(r.matchedMicros(), 0.99) / 1000.0,
                "ms")
            .withNote(note)
            .print(OUT);
        if (r.floor() != null && r.floor().micros().length > 0)
          BenchResult.against(
                  "market-match",
                  "launch.p99-over-commit-floor@" + r.rate(),
                  "launch -> matched p99 at " + r.rate() + "/s",
                  MarketBenchSupport.quantile(r.matchedMicros(), 0.99) / 1000.0,
                  "ms",
                  MarketBenchSupport.quantile(r.floor().micros(), 0.99) / 1000.0,
                  "p99 of the launch's three commits alone, same rate (ms)")
              .withNote(note)
              .print(OUT);
        if (r.httpFloor() != null && r.httpFloor().micros().length > 0)
          BenchResult.against(
                  "market-match",
                  "launch.p99-over-http-floor@" + r.rate(),
                  "launch -> matched p99 at " + r.rate() + "/s",
                  MarketBenchSupport.quantile(r.matchedMicros(), 0.99) / 1000.0,
                  "ms",
                  MarketBenchSupport.quantile(r.httpFloor().micros(), 0.99) / 1000.0,
                  "p99 of the same request answered 401 at the edge, same rate (ms)")
              .withNote(note)
              .print(OUT);
        BenchResult.against(
                "market-match",
                "launch.matched-per-s@" + r.rate(),
                "matched/s at " + r.rate() + "/s offered",
                r.matched() / (r.seconds() + r.drainSeconds()),
                "matches/s",
                r.rate(),
                "offered launches/s")
            .withNote(note)
            .print(OUT);
      }
      for (RateResult r : results) {
        if (r.floor() == null || r.floor().micros().length == 0) continue;
        long launchP99 = MarketBenchSupport.quantile(r.matchedMicros(), 0.99);
        long floorP99 = MarketBenchSupport.quantile(r.floor().micros(), 0.99);
        lines.add(
            String.format(
                Locale.ROOT,
                "commit floor at %,d/s (%,d hosts): p50 %s ms, p99 %s ms; launch p99 / floor p99 = %.2f",
                r.rate(),
                r.hosts(),
                MarketBenchSupport.ms(MarketBenchSupport.quantile(r.floor().micros(), 0.5)),
                MarketBenchSupport.ms(floorP99),
                (double) launchP99 / floorP99));
      }
      for (RateResult r : results) {
        if (r.httpFloor() == null || r.httpFloor().micros().length == 0) continue;
        long launchP50 = MarketBenchSupport.quantile(r.matchedMicros(), 0.5);
        long edgeP50 = MarketBenchSupport.quantile(r.httpFloor().micros(), 0.5);
        lines.add(
            String.format(
                Locale.ROOT,
                "HTTP floor at %,d/s (%,d hosts): p50 %s ms, p99 %s ms; launch p50 / floor p50 = %.2f",
                r.rate(),
                r.hosts(),
                MarketBenchSupport.ms(edgeP50),
                MarketBenchSupport.ms(MarketBenchSupport.quantile(r.httpFloor().micros(), 0.99)),
                (double) launchP50 / edgeP50));
      }
      if (idleLine != null) lines.add(idleLine);
      lines.add(
          "m.* = matcher-side EngineMetrics.matchLatency (request at the matcher -> answer); node/pg = cores during arrivals;"
              + " errors = "
              + results.stream().map(r -> r.errors().toString()).toList());
      return lines;
    }
  }

  static long[] sortedArray(java.util.Collection<Long> values) {
    long[] a = values.stream().mapToLong(Long::longValue).toArray();
    Arrays.sort(a);
    return a;
  }

  // ---------------------------------------------------------------------------------------------
  // (b) concurrently running rentals

  static final class MeterPart extends Fixture {
    MeterPart(Options o, BenchDatabase db) {
      super(o, db);
    }

    record Stage(
        int target,
        int running,
        double rampSeconds,
        double seconds,
        long settlements,
        long secondsMetered,
        long journalEvents,
        long[] lagMicros,
        long missedSeconds,
        long pendingSeconds,
        int probes,
        CpuSample.Usage cpu,
        double heapMib,
        HistogramSnapshot heartbeatHandling) {
      double settlementsPerSecond() {
        return settlements / seconds;
      }

      double meteredRatio() {
        return secondsMetered / seconds / running;
      }
    }

    final List<String> running = Collections.synchronizedList(new ArrayList<>());
    final Map<String, String> hostOf = new ConcurrentHashMap<>();
    private final AtomicInteger created = new AtomicInteger();
    private final AtomicLong notMatched = new AtomicLong();
    private final AtomicReference<String> lastRampError = new AtomicReference<>("none");
    private List<Model> models = List.of(H100);

    List<String> run() throws Exception {
      OUT.println();
      OUT.println("== (b) concurrently running rentals ==");
      double rawBefore = db.rawInsertRowsPerSecond(o.rawRows(), 1000);
      OUT.printf(
          Locale.ROOT,
          "raw JDBC baseline (before the node): %,.0f rows/s (%,d rows, batches of 1000, reWriteBatchedInserts)%n",
          rawBefore,
          o.rawRows());
      List<Stage> stages = new ArrayList<>();
      String stop = null;
      startNode();
      try {
        openAccounts(false);
        int maxK = o.meterSizes()[o.meterSizes().length - 1];
        models = MODELS.subList(0, Math.max(1, Math.min(MODELS.size(), o.meterModels())));
        int hostsPerModel = (int) Math.ceil(maxK * 1.05 / o.meterCards() / models.size());
        for (Model m : models) addHosts(hostsPerModel, o.meterCards(), m);
        startHeartbeats(o.meterCards(), 5);
        for (int k : o.meterSizes()) {
          long r0 = System.nanoTime();
          boolean reached = growRentals(k);
          double rampSeconds = (System.nanoTime() - r0) / 1e9;
          OUT.printf(
              Locale.ROOT,
              "-- %,d running rentals (%.1f s to grow; %,d launches answered pending and were followed up)%n",
              running.size(),
              rampSeconds,
              notMatched.get());
          Thread.sleep(12_000); // every new rental has settled once and ticks steadily
          Stage s = measure(k, rampSeconds);
          stages.add(s);
          print(s);
          if (!reached) {
            stop =
                String.format(
                    Locale.ROOT,
                    "could not grow to %,d running rentals in %d s (reached %,d; last error %s)",
                    k,
                    o.rampTimeout(),
                    running.size(),
                    lastRampError.get());
            break;
          }
          if (MarketBenchSupport.quantile(s.lagMicros(), 0.99) > o.maxLagMs() * 1000L) {
            stop =
                String.format(
                    Locale.ROOT,
                    "tick lag p99 %s ms > %d ms at %,d rentals",
                    MarketBenchSupport.ms(MarketBenchSupport.quantile(s.lagMicros(), 0.99)),
                    o.maxLagMs(),
                    s.running());
            break;
          }
          if (s.meteredRatio() < 0.9) {
            stop =
                String.format(
                    Locale.ROOT,
                    "metering fell behind at %,d rentals: %.2f of the seconds due were settled",
                    s.running(),
                    s.meteredRatio());
            break;
          }
        }
      } finally {
        closeNode();
        OUT.println("database: " + db.analyzeSummary());
      }
      double rawAfter = db.rawInsertRowsPerSecond(o.rawRows(), 1000);
      OUT.printf(Locale.ROOT, "raw JDBC baseline (after the node): %,.0f rows/s%n", rawAfter);
      return summary(stages, Math.max(rawBefore, rawAfter), rawBefore, rawAfter, stop);
    }

    /**
     * Launches rentals through sharding ({@code Rental.Create}), 64 at a time, until {@code target}
     * run: each matched one is told {@code WorkloadStarted} from its host, as its agent would; one
     * answered pending is looked at again until it matches.
     */
    boolean growRentals(int target) throws Exception {
      long deadline = System.nanoTime() + o.rampTimeout() * 1_000_000_000L;
      Semaphore permits = new Semaphore(64);
      long lastPrint = System.nanoTime();
      while (running.size() < target && System.nanoTime() < deadline) {
        int inFlight = 64 - permits.availablePermits();
        if (running.size() + inFlight >= target) {
          Thread.sleep(10);
          continue;
        }
        if (!permits.tryAcquire(100, TimeUnit.MILLISECONDS)) continue;
        String id = "rnt_bench_" + created.getAndIncrement();
        String renter = renters.get(created.get() % renters.size());
        String gpu = models.get(created.get() % models.size()).code();
        plain(
                rental(id)
                    .<Rental.View>askWithStatus(r -> new Rental.Create(renter, spec(gpu), r), ASK))
            .thenCompose(
                v ->
                    v.status() == Rental.Status.PENDING
                        ? followUp(id, v, 0)
                        : CompletableFuture.completedFuture(v))
            .whenComplete(
                (v, e) -> {
                  if (e == null && v.status() == Rental.Status.PROVISIONING && v.terms() != null) {
                    hostOf.put(id, v.terms().hostId());
                    rental(id).tell(new Rental.WorkloadStarted(v.terms().hostId(), Instant.now()));
                    running.add(id);
                  } else {
                    lastRampError.set(
                        e != null ? e.toString() : "status " + v.status() + " " + v.endReason());
                  }
                  permits.release();
                });
        if (System.nanoTime() - lastPrint > 5_000_000_000L) {
          lastPrint = System.nanoTime();
          OUT.printf(
              Locale.ROOT,
              "   growing: %,d running, %,d in flight, settlements so far %,d%n",
              running.size(),
              64 - permits.availablePermits(),
              metrics.settlements.sum());
        }
      }
      permits.tryAcquire(64, 60, TimeUnit.SECONDS);
      return running.size() >= target;
    }

    private CompletionStage<Rental.View> followUp(String id, Rental.View v, int attempt) {
      if (attempt == 0) notMatched.incrementAndGet();
      if (v.status() != Rental.Status.PENDING || attempt > 60)
        return CompletableFuture.completedFuture(v);
      Executor later = CompletableFuture.delayedExecutor(500, TimeUnit.MILLISECONDS);
      return CompletableFuture.supplyAsync(() -> null, later)
          .thenCompose(
              x -> plain(rental(id).<Rental.View>askWithStatus(r -> new Rental.Get(null, r), ASK)))
          .thenCompose(next -> followUp(id, next, attempt + 1));
    }

    /** Subscribes to a few rentals' ticks and measures a window. */
    Stage measure(int target, double rampSeconds) throws Exception {
      List<String> sample = new ArrayList<>(running);
      Collections.shuffle(sample, new Random(target));
      sample = sample.subList(0, Math.min(o.probes(), sample.size()));
      LagRecorder recorder = new LagRecorder();
      List<Probe> states = new ArrayList<>();
      for (int i = 0; i < sample.size(); i++) states.add(new Probe(recorder));
      // The probes are children of one group actor: stopping it stops them, and each rental drops
      // its watched subscriber.
      CompletableFuture<List<ActorRef<Rental.Update>>> spawned = new CompletableFuture<>();
      ActorRef<String> group =
          system.systemActorOf(
              Behaviors.<String>setup(
                  ctx -> {
                    List<ActorRef<Rental.Update>> refs = new ArrayList<>();
                    for (int i = 0; i < states.size(); i++)
                      refs.add(ctx.spawn(states.get(i).behavior(), "probe-" + i));
                    spawned.complete(refs);
                    return Behaviors.receiveMessage(m -> Behaviors.stopped());
                  }),
              "bench-tick-probes-" + target,
              Props.empty());
      List<ActorRef<Rental.Update>> probes = spawned.get(30, TimeUnit.SECONDS);
      List<CompletableFuture<?>> subscribed = new ArrayList<>();
      for (int i = 0; i < sample.size(); i++) {
        Probe p = states.get(i);
        ActorRef<Rental.Update> ref = probes.get(i);
        subscribed.add(
            plain(
                    rental(sample.get(i))
                        .<Rental.View>askWithStatus(r -> new Rental.Subscribe(null, ref, r), ASK))
                .thenAccept(
                    v ->
                        p.startedAtMicros =
                            v.startedAt() == null ? 0 : Host.micros(v.startedAt())));
      }
      CompletableFuture.allOf(subscribed.toArray(CompletableFuture[]::new))
          .get(60, TimeUnit.SECONDS);
      Thread.sleep(2000); // every probe has seen a tick: lags count from here

      long set0 = metrics.settlements.sum();
      long met0 = metrics.secondsMetered.sum();
      long ev0 = db.journalOrdering();
      HistogramSnapshot hb0 = HistogramSnapshot.of(metrics.heartbeatHandling);
      CpuSample c0 = CpuSample.take(db.name);
      long t0 = System.nanoTime();
      recorder.active = true;
      for (int s = 0; s < o.meterWindow(); s += 5) {
        Thread.sleep(Math.min(5, o.meterWindow() - s) * 1000L);
        OUT.printf(
            Locale.ROOT,
            "   t=%2ds settlements %,d (+%,d), seconds metered +%,d, tick lags recorded %,d%n",
            s + 5,
            metrics.settlements.sum(),
            metrics.settlements.sum() - set0,
            metrics.secondsMetered.sum() - met0,
            recorder.size());
      }
      recorder.active = false;
      long t1 = System.nanoTime();
      CpuSample c1 = CpuSample.take(db.name);
      HistogramSnapshot hb1 = HistogramSnapshot.of(metrics.heartbeatHandling);
      long set1 = metrics.settlements.sum();
      long met1 = metrics.secondsMetered.sum();
      long ev1 = db.journalOrdering();
      // Seconds that elapsed without a tick by the end of the window count with the lag they had so
      // far.
      long now = Host.micros(Instant.now());
      long pending = 0;
      for (Probe p : states) pending += p.closeWindow(now);
      long[] lags = recorder.sorted();
      group.tell("stop");
      double heap = MarketBenchSupport.heapAfterGcMib();
      return new Stage(
          target,
          running.size(),
          rampSeconds,
          (t1 - t0) / 1e9,
          set1 - set0,
          met1 - met0,
          ev1 - ev0,
          lags,
          recorder.missed.get(),
          pending,
          sample.size(),
          c0.until(c1),
          heap,
          hb1.minus(hb0));
    }

    void print(Stage s) {
      OUT.printf(
          Locale.ROOT,
          "   window %.0f s: settlements %,.0f/s (due %,.0f/s), seconds metered %,.0f/s (due %,d/s, ratio %.3f),"
              + " journal %,.0f events/s%n",
          s.seconds(),
          s.settlementsPerSecond(),
          s.running() / 10.0,
          s.secondsMetered() / s.seconds(),
          s.running(),
          s.meteredRatio(),
          s.journalEvents() / s.seconds());
      OUT.printf(
          Locale.ROOT,
          "   tick lag over %d probes (%,d seconds): p50 %s ms, p99 %s ms, p999 %s ms, max %s ms; seconds whose tick"
              + " came more than 1 s late or not by the end: %,d + %,d%n",
          s.probes(),
          s.lagMicros().length,
          MarketBenchSupport.ms(MarketBenchSupport.quantile(s.lagMicros(), 0.5)),
          MarketBenchSupport.ms(MarketBenchSupport.quantile(s.lagMicros(), 0.99)),
          MarketBenchSupport.ms(MarketBenchSupport.quantile(s.lagMicros(), 0.999)),
          MarketBenchSupport.ms(
              s.lagMicros().length == 0 ? 0 : s.lagMicros()[s.lagMicros().length - 1]),
          s.missedSeconds(),
          s.pendingSeconds());
      OUT.printf(
          Locale.ROOT,
          "   heartbeat handling p99 %s ms; cores: %s; node heap after GC %.0f MiB%n",
          MarketBenchSupport.ms(s.heartbeatHandling().quantileMicros(0.99)),
          MarketBenchSupport.cores(s.cpu()),
          s.heapMib());
    }

    List<String> summary(
        List<Stage> stages, double raw, double rawBefore, double rawAfter, String stop) {
      List<String> lines = new ArrayList<>();
      lines.add(
          String.format(
              Locale.ROOT,
              "(b) running rentals, settle interval 10 s, 1 card each; raw JDBC baseline %,.0f rows/s"
                  + " (better of before %,.0f / after %,.0f)",
              raw,
              rawBefore,
              rawAfter));
      String h =
          String.format(
              Locale.ROOT,
              "%7s %7s %8s %9s %7s %9s %7s %9s %7s %8s %8s %8s %8s %6s %6s %6s %8s",
              "target",
              "running",
              "ramp s",
              "settle/s",
              "due",
              "metered/s",
              "ratio",
              "events/s",
              "vs raw",
              "lag p50",
              "lag p99",
              "lag p999",
              "lag max",
              "node",
              "pg",
              "mach",
              "heap MiB");
      lines.add(h);
      lines.add("-".repeat(h.length()));
      for (Stage s : stages) {
        double ev = s.journalEvents() / s.seconds();
        lines.add(
            String.format(
                Locale.ROOT,
                "%,7d %,7d %8.1f %9.0f %7.0f %9.0f %7.3f %,9.0f %7.3f %8s %8s %8s %8s %6.2f %6.2f %6.2f %,8.0f",
                s.target(),
                s.running(),
                s.rampSeconds(),
                s.settlementsPerSecond(),
                s.running() / 10.0,
                s.secondsMetered() / s.seconds(),
                s.meteredRatio(),
                ev,
                ev / raw,
                MarketBenchSupport.ms(MarketBenchSupport.quantile(s.lagMicros(), 0.5)),
                MarketBenchSupport.ms(MarketBenchSupport.quantile(s.lagMicros(), 0.99)),
                MarketBenchSupport.ms(MarketBenchSupport.quantile(s.lagMicros(), 0.999)),
                MarketBenchSupport.ms(
                    s.lagMicros().length == 0 ? 0 : s.lagMicros()[s.lagMicros().length - 1]),
                s.cpu().jvmCores(),
                s.cpu().postgresCores(),
                s.cpu().machineCores(),
                s.heapMib()));
      }
      lines.add(
          "ratio = seconds metered / (running x window); events/s = journal rows written by the node in the window;"
              + " lag = tick arrival - (started_at + second), per second of the probed rentals");
      if (stop != null) lines.add("stopped: " + stop);
      for (Stage s : stages) {
        String note =
            String.format(
                Locale.ROOT,
                "%,d running (target %,d), %.0f s window%s",
                s.running(),
                s.target(),
                s.seconds(),
                stop == null ? "" : "; stopped: " + stop);
        BenchResult.against(
                "market-meter",
                "meter.metered@" + s.target(),
                "seconds metered ÷ due, " + s.target() + " rentals over HTTP + PostgreSQL",
                s.secondsMetered() / s.seconds(),
                "s/s",
                s.running(),
                "seconds due per second")
            .withNote(note)
            .print(OUT);
        BenchResult.absolute(
                "market-meter",
                "meter.tick-lag-p99@" + s.target(),
                "tick lag p99, " + s.target() + " rentals",
                MarketBenchSupport.quantile(s.lagMicros(), 0.99) / 1000.0,
                "ms")
            .withNote(note)
            .print(OUT);
        BenchResult.against(
                "market-meter",
                "meter.events-vs-raw@" + s.target(),
                "journal events/s ÷ raw batched rows/s, " + s.target() + " rentals",
                s.journalEvents() / s.seconds(),
                "events/s",
                raw,
                "raw plain rows/s")
            .withNote(note)
            .print(OUT);
      }
      return lines;
    }
  }

  /** Tick lags of the probed rentals in the window, µs. */
  static final class LagRecorder {
    volatile boolean active;
    final AtomicLong missed = new AtomicLong();
    private final MarketBenchSupport.LongBuffer lags = new MarketBenchSupport.LongBuffer();

    void record(long micros) {
      if (!active) return;
      lags.add(micros);
      if (micros > 1_000_000) missed.incrementAndGet();
    }

    int size() {
      return lags.size();
    }

    long[] sorted() {
      long[] a = lags.toArray();
      Arrays.sort(a);
      return a;
    }
  }

  /**
   * Subscribed to one rental's updates. For every second {@code s} of the rental, its lag is when
   * the first tick numbered {@code s} or later arrived, minus {@code started_at + s}: what a renter
   * watching the meter sees. A tick delayed past the next second's start skips a number; the
   * skipped second then counts with the later tick's lag.
   */
  static final class Probe {
    final LagRecorder recorder;
    volatile long startedAtMicros;
    volatile long lastSecond = -1;

    Probe(LagRecorder recorder) {
      this.recorder = recorder;
    }

    Behavior<Rental.Update> behavior() {
      return Behaviors.receive(Rental.Update.class)
          .onMessage(
              Rental.Tick.class,
              t -> {
                long now = Host.micros(Instant.now());
                if (startedAtMicros > 0 && lastSecond >= 0) {
                  for (long s = lastSecond + 1; s <= t.second(); s++)
                    recorder.record(now - (startedAtMicros + s * 1_000_000L));
                }
                lastSecond = Math.max(lastSecond, t.second());
                return Behaviors.same();
              })
          .onAnyMessage(m -> Behaviors.same())
          .build();
    }

    /**
     * Seconds elapsed at {@code nowMicros} with no tick yet: recorded with the lag they have so
     * far; answers how many.
     */
    long closeWindow(long nowMicros) {
      if (startedAtMicros <= 0 || lastSecond < 0) return 0;
      long elapsed = (nowMicros - startedAtMicros) / 1_000_000L;
      long n = 0;
      boolean was = recorder.active;
      recorder.active = true;
      for (long s = lastSecond + 1; s <= elapsed; s++) {
        long lag = nowMicros - (startedAtMicros + s * 1_000_000L);
        if (lag > 1_000_000L) {
          recorder.record(lag);
          n++;
        }
      }
      recorder.active = was;
      lastSecond = Long.MAX_VALUE / 2; // no more recording
      return n;
    }
  }
}
