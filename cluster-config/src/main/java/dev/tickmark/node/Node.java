package dev.tickmark.node;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import com.typesafe.config.ConfigValueFactory;
import dev.tickmark.engine.account.Account;
import dev.tickmark.engine.catalog.Catalog;
import dev.tickmark.engine.host.Host;
import dev.tickmark.engine.host.verification.Verification;
import dev.tickmark.engine.market.Matcher;
import dev.tickmark.engine.account.Iban;
import dev.tickmark.engine.payout.PayoutRun;
import dev.tickmark.persistence.payouts.PayoutRunProjection;
import dev.tickmark.persistence.payouts.PayoutRunReadModel;
import dev.tickmark.engine.metrics.JournalProbe;
import dev.tickmark.engine.rental.Rental;
import dev.tickmark.persistence.rentals.RentalProjection;
import dev.tickmark.persistence.rentals.RentalReadModel;
import dev.tickmark.http.agent.AgentSession;
import dev.tickmark.persistence.hosts.HostProjection;
import dev.tickmark.persistence.hosts.HostReadModel;
import dev.tickmark.http.ApiSettings;
import dev.tickmark.http.HttpApi;
import dev.tickmark.persistence.DatabaseSettings;
import dev.tickmark.persistence.EmbeddedDatabase;
import dev.tickmark.persistence.Jdbc;
import dev.tickmark.persistence.Migrations;
import dev.tickmark.persistence.auth.ApiKeys;
import dev.tickmark.persistence.auth.IdempotencyKeys;
import dev.tickmark.persistence.ledger.LedgerProjection;
import dev.tickmark.persistence.ledger.LedgerReadModel;
import java.time.Clock;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.apache.pekko.Done;
import org.apache.pekko.actor.CoordinatedShutdown;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.DispatcherSelector;
import org.apache.pekko.actor.typed.Props;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.cluster.typed.Cluster;
import org.apache.pekko.cluster.typed.Join;
import org.apache.pekko.http.javadsl.ServerBinding;
import org.apache.pekko.management.cluster.bootstrap.ClusterBootstrap;
import org.apache.pekko.management.javadsl.PekkoManagement;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One running Tickmark node: its database (external or embedded), migrations, actor system, cluster
 * membership, entities, projections and HTTP API. {@code Main} starts one for the process; tests
 * start several in one JVM.
 */
public final class Node implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(Node.class);
  static final String SYSTEM_NAME = "tickmark";

  private final ActorSystem<Void> system;
  private final ServerBinding binding;
  private final NodeSettings settings;
  private final ApiKeys apiKeys;
  private final DatabaseSettings database;
  private final String managementUrl;

  private Node(ActorSystem<Void> system, ServerBinding binding, NodeSettings settings, ApiKeys apiKeys, DatabaseSettings database,
      String managementUrl) {
    this.system = system;
    this.binding = binding;
    this.settings = settings;
    this.apiKeys = apiKeys;
    this.database = database;
    this.managementUrl = managementUrl;
  }

  /** Starts a node and returns once its HTTP API is bound. Any failure stops what was started and throws. */
  public static Node start(NodeSettings settings) throws Exception {
    if (CommonPool.startsAThreadPerCallback()) {
      log.warn("The JDK common pool has parallelism {}: every async callback (each ask from an actor) starts a thread."
          + " Start the JVM with -D{}=2 or call CommonPool.ensureParallelism() first in main.", CommonPool.parallelism(), CommonPool.PROPERTY);
    }
    EmbeddedDatabase embedded = null;
    DatabaseSettings database;
    int poolSize = 8;
    if (settings.dbUrl() == null) {
      embedded = EmbeddedDatabase.start(settings.dataDir().resolve("postgres"), 0, true);
      database = embedded.settings("postgres", poolSize);
    } else {
      database = new DatabaseSettings(settings.dbUrl(), settings.dbUser(), settings.dbPassword(), poolSize);
    }
    ActorSystem<Void> system = null;
    try {
      int ran = Migrations.migrate(database);
      log.info("Schema is current ({} migrations applied now)", ran);
      system = ActorSystem.create(Behaviors.empty(), SYSTEM_NAME, config(settings, database));
      return init(system, settings, database, embedded);
    } catch (Exception | Error e) {
      if (system != null) system.terminate();
      if (embedded != null) embedded.close();
      throw e;
    }
  }

  /** Wires the modules into a started actor system: management, entities, projections, then HTTP. */
  static Node init(ActorSystem<Void> system, NodeSettings settings, DatabaseSettings database, EmbeddedDatabase embedded)
      throws Exception {
    Cluster cluster = Cluster.get(system);
    boolean kubernetes = settings.discovery() == NodeSettings.Discovery.KUBERNETES;
    if (!kubernetes && settings.seedNodes().isEmpty()) cluster.manager().tell(Join.create(cluster.selfMember().address()));
    Clock clock = Clock.systemUTC();
    Jdbc jdbc = Jdbc.create(database, "tickmark-read-side",
        system.dispatchers().lookup(DispatcherSelector.fromConfig("pekko.projection.jdbc.blocking-jdbc-dispatcher")));
    DatabaseReadinessCheck.Registered.get(system).jdbc.set(jdbc); // before management serves /ready
    String managementUrl = null;
    if (settings.managementPort() >= 0 || kubernetes) {
      managementUrl = PekkoManagement.get(system).start().toCompletableFuture().get(30, TimeUnit.SECONDS).toString();
      log.info("Pekko Management on {}", managementUrl);
    }
    // Bootstrap asks the Kubernetes API for the pods of this service, probes their management endpoints and then
    // joins (or, the lowest address, forms) the cluster: no seed node list to keep in step with the Deployment.
    if (kubernetes) ClusterBootstrap.get(system).start();

    Config tickmark = system.settings().config().getConfig("tickmark");
    Catalog catalog = Catalog.load();
    Config hostConfig = tickmark.getConfig("hosts");
    ShardedLinks links = new ShardedLinks(system);
    Host.Settings hostSettings = new Host.Settings(
        hostConfig.getDuration("heartbeat-timeout"),
        (int) hostConfig.getDuration("heartbeat-interval").toSeconds(),
        catalog,
        policy(tickmark.getConfig("verification"), tickmark.getBoolean("market.allow-simulated-hosts")),
        links);
    Config rentalConfig = tickmark.getConfig("rentals");
    Duration askTimeout = tickmark.getDuration("http.ask-timeout");
    Rental.Settings rentalSettings = new Rental.Settings(
        rentalConfig.getDuration("settle-interval"),
        rentalConfig.getDuration("hold-duration").toSeconds(),
        tickmark.getInt("market.fee-bps"),
        rentalConfig.getDuration("provisioning-timeout"),
        rentalConfig.getDuration("stop-timeout"),
        rentalConfig.getDuration("retry-interval"),
        askTimeout);
    HostReadModel hostReadModel = new HostReadModel(jdbc);
    LedgerReadModel ledgerReadModel = new LedgerReadModel(jdbc);
    Config payouts = tickmark.getConfig("payouts");
    ApiSettings.PayoutDebtor debtor = debtor(payouts.getConfig("debtor"));

    Account.init(system, clock);
    Host.init(system, hostSettings, clock);
    Config matcherConfig = tickmark.getConfig("matcher");
    Matcher.init(system, (gpu, region, tier, maxPrice, count) -> hostReadModel.candidates(gpu, region, tier, maxPrice, count, clock.instant()),
        links::host, new Matcher.Settings(askTimeout, matcherConfig.getInt("max-in-flight"), matcherConfig.getInt("max-queued"),
            matcherConfig.getDuration("read-side-lag")), clock);
    Rental.init(system, rentalSettings, links, clock);
    startJournalProbe(system, cluster, tickmark.getDuration("metrics.journal-probe-interval"));
    LedgerProjection.init(system, jdbc);
    HostProjection.init(system, jdbc);
    RentalProjection.init(system, jdbc);
    PayoutRun.init(system, new PayoutRun.Settings(askTimeout, payouts.getDuration("retry-interval"), payouts.getInt("parallelism")),
        new PayoutRun.Ports() {
          @Override
          public java.util.concurrent.CompletionStage<List<String>> providersOwed(long minimum) {
            return ledgerReadModel.providersOwed(minimum);
          }

          @Override
          public org.apache.pekko.actor.typed.RecipientRef<Account.Command> account(String accountId) {
            return links.account(accountId);
          }
        },
        clock);
    PayoutRunProjection.init(system, jdbc);

    ApiKeys apiKeys = new ApiKeys(jdbc, clock);
    Config http = tickmark.getConfig("http");
    Config socket = tickmark.getConfig("agent-socket");
    AgentSession.Limits agentLimits = new AgentSession.Limits(socket.getInt("max-frame-chars"), socket.getInt("frames-per-second"),
        socket.getInt("burst"), socket.getDuration("hello-timeout"), http.getDuration("ask-timeout"));
    ApiSettings api = new ApiSettings(
        http.getString("interface"), settings.httpPort(), http.getDuration("ask-timeout"), settings.operatorToken(),
        settings.webhookSecret(), tickmark.getDuration("payments.tolerance"), agentLimits,
        hostConfig.getDuration("registration-token-validity"), debtor, http.getDuration("read-your-writes-wait"));
    PayoutRunReadModel payoutRuns = new PayoutRunReadModel(jdbc);
    HttpApi httpApi = new HttpApi(system, api, apiKeys, new IdempotencyKeys(jdbc, clock), ledgerReadModel,
        hostReadModel, new RentalReadModel(jdbc), payoutRuns, catalog, clock);
    ServerBinding binding = HttpApi.bind(system, httpApi.route(), api.interfaceName(), api.port())
        .toCompletableFuture().get(30, TimeUnit.SECONDS);
    binding.addToCoordinatedShutdown(Duration.ofSeconds(10), system);

    EmbeddedDatabase embeddedDb = embedded;
    CoordinatedShutdown.get(system).addTask(CoordinatedShutdown.PhaseBeforeActorSystemTerminate(), "close-database", () -> {
      jdbc.close();
      if (embeddedDb != null) {
        try {
          embeddedDb.close();
        } catch (Exception e) {
          log.warn("Embedded PostgreSQL did not stop cleanly: {}", e.getMessage());
        }
      }
      return CompletableFuture.completedFuture(Done.getInstance());
    });
    RentalWaker.start(system, new RentalReadModel(jdbc), rentalConfig.getDuration("wake-interval"));
    wakeUnfinishedPayoutRuns(system, payoutRuns, payouts.getDuration("wake-interval"));
    log.info("Tickmark node up: HTTP on {}:{}", api.interfaceName(), binding.localAddress().getPort());
    return new Node(system, binding, settings, apiKeys, database, managementUrl);
  }

  /** One journal probe per node, named by the node's address so that nodes never share its stream. */
  private static void startJournalProbe(ActorSystem<Void> system, Cluster cluster, Duration interval) {
    String nodeId = cluster.selfMember().address().hostPort(); // e.g. tickmark@10.0.0.5:25520
    system.systemActorOf(JournalProbe.create(nodeId, interval), "journal-probe", Props.empty());
  }

  /** Like rentals, a run lost with its node resumes when woken; waking a live or finished run changes nothing. */
  private static void wakeUnfinishedPayoutRuns(ActorSystem<Void> system, PayoutRunReadModel runs, Duration every) {
    var sharding = org.apache.pekko.cluster.sharding.typed.javadsl.ClusterSharding.get(system);
    system.scheduler().scheduleWithFixedDelay(Duration.ofSeconds(2), every, () -> runs.unfinished().thenAccept(ids ->
        ids.forEach(id -> sharding.entityRefFor(PayoutRun.ENTITY_KEY, id).tell(PayoutRun.Wake.INSTANCE))), system.executionContext());
  }

  /** The payouts' debtor account, checked at start: a typo in the IBAN must not wait for the first export to show. */
  static ApiSettings.PayoutDebtor debtor(Config c) {
    String name = c.getString("name").strip();
    String iban = c.getString("iban").isBlank() ? null : Iban.normalize(c.getString("iban"));
    String bic = c.getString("bic").isBlank() ? null : c.getString("bic").strip().toUpperCase(java.util.Locale.ROOT);
    if (iban != null && Iban.problem(iban).isPresent()) {
      throw new IllegalArgumentException("tickmark.payouts.debtor.iban (TICKMARK_PAYOUT_DEBTOR_IBAN) is not a SEPA IBAN: "
          + Iban.problem(iban).get());
    }
    if (bic != null && !Iban.isValidBic(bic)) {
      throw new IllegalArgumentException("tickmark.payouts.debtor.bic (TICKMARK_PAYOUT_DEBTOR_BIC) is not a BIC");
    }
    if (iban != null && name.isEmpty()) {
      throw new IllegalArgumentException("tickmark.payouts.debtor.name (TICKMARK_PAYOUT_DEBTOR_NAME) is required with an IBAN");
    }
    return new ApiSettings.PayoutDebtor(name.isEmpty() ? null : name, iban, bic);
  }

  static Verification.Policy policy(Config v, boolean allowSimulated) {
    return new Verification.Policy(allowSimulated, v.getString("min-nvidia-driver"), v.getString("min-rocm"),
        v.getInt("max-temperature-c"), v.getInt("vram-tolerance-permille"), v.getBytes("min-free-disk"),
        v.getLong("min-disk-write-mib-per-s"));
  }

  static Config config(NodeSettings settings, DatabaseSettings database) {
    Map<String, Object> overrides = new HashMap<>();
    overrides.put("pekko.remote.artery.canonical.hostname", settings.hostname());
    overrides.put("pekko.remote.artery.canonical.port", settings.remotePort());
    overrides.put("pekko.management.http.hostname", settings.hostname());
    overrides.put("pekko.management.http.port", Math.max(settings.managementPort(), 0));
    overrides.put("pekko.coordinated-shutdown.exit-jvm", settings.exitJvmOnShutdown());
    overrides.put("tickmark.market.allow-simulated-hosts", settings.allowSimulatedHosts());
    if (settings.dev()) {
      // A developer's laptop disk is what the simulated host reports: judge it by what a demo needs.
      overrides.put("tickmark.verification.min-free-disk", "1 GiB");
      overrides.put("tickmark.verification.min-disk-write-mib-per-s", 10);
    }
    String slick = "pekko-persistence-jdbc.shared-databases.slick.db.";
    overrides.put(slick + "url", database.tunedUrl());
    overrides.put(slick + "user", database.user());
    overrides.put(slick + "password", database.password());
    overrides.putAll(settings.configOverrides()); // explicit overrides win
    List<String> seeds = settings.seedNodes().stream().map(s -> "pekko://" + SYSTEM_NAME + "@" + s).toList();
    return ConfigFactory.parseMap(overrides)
        .withValue("pekko.cluster.seed-nodes", ConfigValueFactory.fromIterable(seeds))
        .withFallback(NodeSettings.load(settings.profile()));
  }

  public ActorSystem<Void> system() {
    return system;
  }

  public int httpPort() {
    return binding.localAddress().getPort();
  }

  public String baseUrl() {
    return "http://" + settings.hostname() + ":" + httpPort();
  }

  public NodeSettings settings() {
    return settings;
  }

  public ApiKeys apiKeys() {
    return apiKeys;
  }

  /** Pekko Management's base URL (its bound port), or null when the node runs without it. */
  public String managementUrl() {
    return managementUrl;
  }

  public DatabaseSettings database() {
    return database;
  }

  /** Leaves the cluster and stops, running every coordinated-shutdown task. */
  @Override
  public void close() throws Exception {
    system.terminate();
    system.getWhenTerminated().toCompletableFuture().get(60, TimeUnit.SECONDS);
  }
}
