package dev.tickmark.node;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import com.typesafe.config.ConfigValueFactory;
import dev.tickmark.engine.account.Account;
import dev.tickmark.engine.catalog.Catalog;
import dev.tickmark.engine.host.Host;
import dev.tickmark.engine.market.Matcher;
import dev.tickmark.engine.metrics.JournalProbe;
import dev.tickmark.engine.payout.PayoutRun;
import dev.tickmark.engine.rental.Rental;
import dev.tickmark.engine.snapshot.ChunkStore;
import dev.tickmark.engine.snapshot.Snapshot;
import dev.tickmark.http.ApiSettings;
import dev.tickmark.http.HttpApi;
import dev.tickmark.persistence.DatabaseSettings;
import dev.tickmark.persistence.EmbeddedDatabase;
import dev.tickmark.persistence.Jdbc;
import dev.tickmark.persistence.Migrations;
import dev.tickmark.persistence.auth.ApiKeys;
import dev.tickmark.persistence.auth.IdempotencyKeys;
import dev.tickmark.persistence.auth.SshKeys;
import dev.tickmark.persistence.hosts.HostProjection;
import dev.tickmark.persistence.hosts.HostReadModel;
import dev.tickmark.persistence.ledger.LedgerProjection;
import dev.tickmark.persistence.ledger.LedgerReadModel;
import dev.tickmark.persistence.logs.RentalLogs;
import dev.tickmark.persistence.payments.PaymentIds;
import dev.tickmark.persistence.payouts.PayoutRunProjection;
import dev.tickmark.persistence.payouts.PayoutRunReadModel;
import dev.tickmark.persistence.rentals.RentalProjection;
import dev.tickmark.persistence.rentals.RentalReadModel;
import dev.tickmark.persistence.snapshots.PgChunkStore;
import dev.tickmark.persistence.snapshots.SnapshotProjection;
import dev.tickmark.persistence.snapshots.SnapshotReadModel;
import java.io.IOException;
import java.time.Clock;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.apache.pekko.Done;
import org.apache.pekko.actor.BootstrapSetup;
import org.apache.pekko.actor.CoordinatedShutdown;
import org.apache.pekko.actor.setup.ActorSystemSetup;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.DispatcherSelector;
import org.apache.pekko.actor.typed.Props;
import org.apache.pekko.actor.typed.RecipientRef;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.cluster.typed.Cluster;
import org.apache.pekko.cluster.typed.Join;
import org.apache.pekko.http.javadsl.ServerBinding;
import org.apache.pekko.management.cluster.bootstrap.ClusterBootstrap;
import org.apache.pekko.management.javadsl.PekkoManagement;
import org.apache.pekko.remote.artery.tcp.SSLEngineProviderSetup;
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
  private final ServerTls tls;

  private Node(
      ActorSystem<Void> system,
      ServerBinding binding,
      NodeSettings settings,
      ApiKeys apiKeys,
      DatabaseSettings database,
      String managementUrl,
      ServerTls tls) {
    this.system = system;
    this.binding = binding;
    this.settings = settings;
    this.apiKeys = apiKeys;
    this.database = database;
    this.managementUrl = managementUrl;
    this.tls = tls;
  }

  /**
   * Starts a node and returns once its HTTP API is bound. Any failure stops what was started and
   * throws.
   */
  public static Node start(NodeSettings settings) throws Exception {
    if (CommonPool.startsAThreadPerCallback()) {
      log.warn(
          "The JDK common pool has parallelism {}: every async callback (each ask from an actor) starts a thread."
              + " Start the JVM with -D{}=2 or call CommonPool.ensureParallelism() first in main.",
          CommonPool.parallelism(),
          CommonPool.PROPERTY);
    }
    Config config = config(settings);
    checkIdempotencySettings(config);
    checkFailoverSettings(config);
    // before the database: a wrong certificate or key file stops the node at once
    ServerTls tls = ServerTls.fromConfig(config).orElse(null);
    if (tls != null) {
      log.info("TLS on: HTTPS and WSS only, certificate {}", tls.describe());
      String warning = tls.validityWarning(java.time.Instant.now());
      if (warning != null) log.warn(warning);
    }
    ClusterTls clusterTls = ClusterTls.fromConfig(config).orElse(null);
    if (clusterTls != null) {
      log.info(
          "Cluster TLS on: remoting (port {}) over mutual TLS 1.3, certificate {}",
          settings.remotePort(),
          clusterTls.describe());
      String warning = clusterTls.expiryWarning(java.time.Instant.now());
      if (warning != null) log.warn(warning);
    } else if (!settings.seedNodes().isEmpty()
        || settings.discovery() != NodeSettings.Discovery.SEED_NODES) {
      log.info(
          "Remoting between the nodes is plain TCP: keep port {} on a private network, or set {}, {} and {}"
              + " (docs/runbook.md \"TLS between the nodes\")",
          settings.remotePort(),
          ClusterTls.CERT_ENV,
          ClusterTls.KEY_ENV,
          ClusterTls.CA_ENV);
    }
    int poolSize = config.getInt("tickmark.database.pool-size");
    EmbeddedDatabase embedded = null;
    DatabaseSettings database;
    CompletableFuture<Void> systemDone = new CompletableFuture<>();
    if (settings.dbUrl() == null) {
      embedded = EmbeddedDatabase.start(settings.dataDir().resolve("postgres"), 0, true, false);
      stopAtJvmExit(embedded, systemDone);
      database = embedded.settings("postgres", poolSize);
    } else {
      database =
          new DatabaseSettings(
              settings.dbUrl(), settings.dbUser(), settings.dbPassword(), poolSize);
    }
    ActorSystem<Void> system = null;
    try {
      int ran = Migrations.migrate(database);
      log.info("Schema is current ({} migrations applied now)", ran);
      system =
          ActorSystem.create(
              Behaviors.empty(), SYSTEM_NAME, setup(config(settings, database), clusterTls));
      system.getWhenTerminated().whenComplete((done, failure) -> systemDone.complete(null));
      return init(system, settings, database, embedded, tls);
    } catch (Exception | Error e) {
      if (system != null) system.terminate();
      if (embedded != null) embedded.close();
      systemDone.complete(null);
      throw e;
    }
  }

  /**
   * The actor system's setup: its configuration and, with cluster TLS, remoting over {@code
   * tls-tcp} with the already checked {@link ClusterTls} as its engine provider.
   */
  static ActorSystemSetup setup(Config config, ClusterTls clusterTls) {
    if (clusterTls == null) return ActorSystemSetup.create(BootstrapSetup.create(config));
    Config tls =
        ConfigFactory.parseMap(Map.of("pekko.remote.artery.transport", "tls-tcp"))
            .withFallback(config);
    return ActorSystemSetup.create(
        BootstrapSetup.create(tls), SSLEngineProviderSetup.create(system -> clusterTls));
  }

  /** How long the JVM's exit waits for the actor system before it stops the embedded PostgreSQL. */
  static final Duration EMBEDDED_STOP_WAIT = Duration.ofSeconds(60);

  /**
   * The embedded PostgreSQL is stopped by the coordinated shutdown, after everything that writes to
   * it ({@link #closeDatabaseOnShutdown}). The JVM runs the coordinated shutdown on a shutdown hook
   * of its own, concurrently with every other hook: this one stops the server only once the actor
   * system has terminated (or after {@link #EMBEDDED_STOP_WAIT}), so that no PostgreSQL process
   * outlives a node that exits some other way.
   */
  private static void stopAtJvmExit(EmbeddedDatabase embedded, CompletableFuture<Void> systemDone) {
    Runtime.getRuntime()
        .addShutdownHook(
            new Thread(
                () -> {
                  try {
                    systemDone.get(EMBEDDED_STOP_WAIT.toMillis(), TimeUnit.MILLISECONDS);
                  } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                  } catch (ExecutionException | TimeoutException e) {
                    log.warn("The actor system did not terminate in time: {}", e.toString());
                  }
                  try {
                    embedded.close();
                  } catch (IOException | RuntimeException e) {
                    log.warn("Embedded PostgreSQL did not stop cleanly: {}", e.getMessage());
                  }
                },
                "stop-embedded-postgres"));
  }

  /** Without shard leases the downed side must be given time to stop (docs/runbook.md). */
  static final Duration MARGIN_WITHOUT_LEASES = Duration.ofSeconds(5);

  /**
   * Without shard leases, only {@code down-removal-margin} keeps a lost node's shards from starting
   * on the survivors while the downed side may still run them: refuse to start with the 1 ms margin
   * that only leases make safe.
   */
  static void checkFailoverSettings(Config config) {
    boolean leases = !config.getString("pekko.cluster.sharding.use-lease").isBlank();
    Duration margin = config.getDuration("pekko.cluster.down-removal-margin");
    if (!leases && margin.compareTo(MARGIN_WITHOUT_LEASES) < 0)
      throw new IllegalArgumentException(
          "pekko.cluster.down-removal-margin ("
              + margin
              + ") must be at least "
              + MARGIN_WITHOUT_LEASES.toSeconds()
              + " s when shards run without leases (TICKMARK_SHARD_LEASE is empty):"
              + " set TICKMARK_DOWN_REMOVAL_MARGIN=5s; see docs/runbook.md \"Failover timing and split brain\"");
  }

  /**
   * A claim on an Idempotency-Key must not be taken over while its request can still be running:
   * the longest an idempotent POST waits is a payout run's start, 6 x ask-timeout.
   */
  static void checkIdempotencySettings(Config config) {
    Duration inProgressTimeout =
        config.getDuration("tickmark.http.idempotency.in-progress-timeout");
    Duration longest = config.getDuration("tickmark.http.ask-timeout").multipliedBy(6);
    if (inProgressTimeout.compareTo(longest) <= 0)
      throw new IllegalArgumentException(
          "tickmark.http.idempotency.in-progress-timeout ("
              + inProgressTimeout
              + ") must be longer than 6 x tickmark.http.ask-timeout ("
              + longest
              + "), the longest an idempotent request runs");
  }

  /**
   * Wires the modules into a started actor system: management, entities, projections, then HTTP.
   * Each entity reads its settings from the system's config ({@code Settings.fromConfig}); see
   * {@code tickmark.conf}.
   */
  static Node init(
      ActorSystem<Void> system,
      NodeSettings settings,
      DatabaseSettings database,
      EmbeddedDatabase embedded,
      ServerTls tls)
      throws Exception {
    Config config = system.settings().config();
    Cluster cluster = Cluster.get(system);
    boolean kubernetes = settings.discovery() == NodeSettings.Discovery.KUBERNETES;
    if (!kubernetes && settings.seedNodes().isEmpty())
      cluster.manager().tell(Join.create(cluster.selfMember().address()));
    Clock clock = Clock.systemUTC();
    Jdbc jdbc =
        Jdbc.create(
            database,
            "tickmark-read-side",
            system
                .dispatchers()
                .lookup(
                    DispatcherSelector.fromConfig(
                        "pekko.projection.jdbc.blocking-jdbc-dispatcher")));
    DatabaseReadinessCheck.Registered.get(system).jdbc.set(jdbc); // before management serves /ready
    String managementUrl = null;
    if (settings.managementPort() >= 0 || kubernetes) {
      managementUrl =
          PekkoManagement.get(system)
              .start()
              .toCompletableFuture()
              .get(30, TimeUnit.SECONDS)
              .toString();
      log.info("Pekko Management on {}", managementUrl);
    }
    // Bootstrap asks the Kubernetes API for the pods of this service, probes their management
    // endpoints and then
    // joins (or, the lowest address, forms) the cluster: no seed node list to keep in step with the
    // Deployment.
    if (kubernetes) ClusterBootstrap.get(system).start();

    Catalog catalog = Catalog.load();
    ShardedLinks links = new ShardedLinks(system);
    HostReadModel hostReadModel = new HostReadModel(jdbc);
    LedgerReadModel ledgerReadModel = new LedgerReadModel(jdbc);
    ApiSettings api =
        ApiSettings.fromConfig(
            config, settings.httpPort(), settings.operatorTokens(), settings.webhookSecret());

    Account.init(
        system,
        clock,
        config.getDuration("tickmark.accounts.payout-details-hold"),
        config.getInt("tickmark.accounts.max-live-rentals"));
    Host.init(system, Host.Settings.fromConfig(config, catalog, links), clock);
    Matcher.init(
        system,
        (gpu, region, tier, maxPrice, count, renterId, needs, held) ->
            hostReadModel.candidates(
                gpu, region, tier, maxPrice, count, renterId, needs, held, clock.instant()),
        links::host,
        Matcher.Settings.fromConfig(config),
        clock);
    Rental.init(system, Rental.Settings.fromConfig(config), links, clock);
    Snapshot.init(system, Snapshot.Settings.fromConfig(config), links, clock);
    startJournalProbe(
        system, cluster, config.getDuration("tickmark.metrics.journal-probe-interval"));
    LedgerProjection.init(system, jdbc);
    HostProjection.init(system, jdbc);
    RentalProjection.init(system, jdbc);
    PayoutRun.init(
        system, PayoutRun.Settings.fromConfig(config), payoutPorts(ledgerReadModel, links), clock);
    PayoutRunProjection.init(system, jdbc);
    SnapshotProjection.init(system, jdbc);

    RentalLogs rentalLogs =
        new RentalLogs(
            jdbc,
            new RentalLogs.Retention(
                config.getInt("tickmark.logs.max-lines"),
                config.getBytes("tickmark.logs.max-bytes")));
    ApiKeys apiKeys = new ApiKeys(jdbc, clock);
    SshKeys sshKeys = new SshKeys(jdbc, clock);
    PayoutRunReadModel payoutRuns = new PayoutRunReadModel(jdbc);
    IdempotencyKeys idempotencyKeys =
        new IdempotencyKeys(
            jdbc,
            clock,
            config.getDuration("tickmark.http.idempotency.ttl"),
            config.getDuration("tickmark.http.idempotency.in-progress-timeout"));
    PgChunkStore chunkStore = new PgChunkStore(jdbc);
    HttpApi httpApi =
        new HttpApi(
            system,
            api,
            apiKeys,
            sshKeys,
            idempotencyKeys,
            new PaymentIds(jdbc, clock),
            ledgerReadModel,
            hostReadModel,
            new RentalReadModel(jdbc),
            rentalLogs,
            payoutRuns,
            new dev.tickmark.persistence.ops.OperatorAudit(jdbc),
            snapshotStorage(config, chunkStore, new SnapshotReadModel(jdbc)),
            catalog,
            clock);
    ServerBinding binding =
        (tls == null
                ? HttpApi.bind(system, httpApi.route(), api.interfaceName(), api.port())
                : HttpApi.bindHttps(
                    system,
                    httpApi.route(),
                    api.interfaceName(),
                    api.port(),
                    tls.connectionContext()))
            .toCompletableFuture()
            .get(30, TimeUnit.SECONDS);
    binding.addToCoordinatedShutdown(Duration.ofSeconds(10), system);

    closeDatabaseOnShutdown(system, jdbc, embedded);
    RentalWaker.start(
        system,
        new RentalReadModel(jdbc),
        new SnapshotReadModel(jdbc),
        config.getDuration("tickmark.rentals.wake-interval"));
    wakeUnfinishedPayoutRuns(
        system, payoutRuns, config.getDuration("tickmark.payouts.wake-interval"));
    deleteOldLogs(
        system,
        rentalLogs,
        clock,
        config.getDuration("tickmark.logs.keep-after-end"),
        config.getDuration("tickmark.logs.cleanup-interval"));
    deleteExpiredIdempotencyKeys(
        system, idempotencyKeys, config.getDuration("tickmark.http.idempotency.cleanup-interval"));
    collectOrphanChunks(
        system,
        chunkStore,
        config.getDuration("tickmark.snapshots.collect-interval"),
        config.getDuration("tickmark.snapshots.orphan-grace"));
    log.info(
        "Tickmark node up: {} on {}:{}",
        tls == null ? "HTTP" : "HTTPS",
        api.interfaceName(),
        binding.localAddress().getPort());
    return new Node(system, binding, settings, apiKeys, database, managementUrl, tls);
  }

  /**
   * What a payout run asks of the rest of the node: the ledger's owed providers, and accounts
   * through sharding.
   */
  private static PayoutRun.Ports payoutPorts(LedgerReadModel ledger, ShardedLinks links) {
    return new PayoutRun.Ports() {
      @Override
      public CompletionStage<List<String>> providersOwed(long minimum) {
        return ledger.providersOwed(minimum);
      }

      @Override
      public RecipientRef<Account.Command> account(String accountId) {
        return links.account(accountId);
      }
    };
  }

  /**
   * The read side's pool, then the embedded PostgreSQL (if any), last of all: the journal is done
   * with them by then.
   */
  private static void closeDatabaseOnShutdown(
      ActorSystem<Void> system, Jdbc jdbc, EmbeddedDatabase embedded) {
    CoordinatedShutdown.get(system)
        .addTask(
            CoordinatedShutdown.PhaseBeforeActorSystemTerminate(),
            "close-database",
            () -> {
              jdbc.close();
              if (embedded != null) {
                try {
                  embedded.close();
                } catch (Exception e) {
                  log.warn("Embedded PostgreSQL did not stop cleanly: {}", e.getMessage());
                }
              }
              return CompletableFuture.completedFuture(Done.getInstance());
            });
  }

  /**
   * One journal probe per node, named by the node's address so that nodes never share its stream.
   */
  private static void startJournalProbe(
      ActorSystem<Void> system, Cluster cluster, Duration interval) {
    String nodeId = cluster.selfMember().address().hostPort(); // e.g. tickmark@10.0.0.5:25520
    system.systemActorOf(JournalProbe.create(nodeId, interval), "journal-probe", Props.empty());
  }

  /**
   * Like rentals, a run lost with its node resumes when woken; waking a live or finished run
   * changes nothing.
   */
  private static void wakeUnfinishedPayoutRuns(
      ActorSystem<Void> system, PayoutRunReadModel runs, Duration every) {
    var sharding = org.apache.pekko.cluster.sharding.typed.javadsl.ClusterSharding.get(system);
    system
        .scheduler()
        .scheduleWithFixedDelay(
            Duration.ofSeconds(2),
            every,
            () ->
                runs.unfinished()
                    .thenAccept(
                        ids ->
                            ids.forEach(
                                id ->
                                    sharding
                                        .entityRefFor(PayoutRun.ENTITY_KEY, id)
                                        .tell(PayoutRun.Wake.INSTANCE))),
            system.executionContext());
  }

  /** The snapshot routes' store, list and limits ({@code tickmark.snapshots.*}). */
  private static HttpApi.SnapshotStorage snapshotStorage(
      Config config, ChunkStore chunks, SnapshotReadModel readModel) {
    return new HttpApi.SnapshotStorage(
        chunks,
        readModel,
        config.getBytes("tickmark.snapshots.max-bytes"),
        config.getDuration("tickmark.snapshots.suspended-grace"));
  }

  /**
   * Every {@code every}, drops the manifests of failed and deleted snapshots and the chunks no
   * manifest names that are older than {@code grace} ({@link ChunkStore#collectOrphans}). Each node
   * runs it; the deletes are idempotent and safe beside an upload.
   */
  private static void collectOrphanChunks(
      ActorSystem<Void> system, ChunkStore chunks, Duration every, Duration grace) {
    system
        .scheduler()
        .scheduleWithFixedDelay(
            Duration.ofSeconds(60),
            every,
            () ->
                chunks
                    .collectOrphans(grace.toSeconds())
                    .whenComplete(
                        (deleted, failure) -> {
                          if (failure != null)
                            log.warn(
                                "Collecting orphan snapshot chunks failed: {}", failure.toString());
                          else if (deleted > 0)
                            log.info(
                                "Deleted {} snapshot chunks no live snapshot names (older than {})",
                                deleted,
                                grace);
                        }),
            system.executionContext());
  }

  /**
   * Every {@code every}, deletes the Idempotency-Key records past their ttl (they are ignored from
   * then on anyway; this keeps the table small). Each node runs it; the deletes are idempotent.
   */
  private static void deleteExpiredIdempotencyKeys(
      ActorSystem<Void> system, IdempotencyKeys keys, Duration every) {
    system
        .scheduler()
        .scheduleWithFixedDelay(
            Duration.ofSeconds(45),
            every,
            () ->
                keys.deleteExpired()
                    .whenComplete(
                        (deleted, failure) -> {
                          if (failure != null)
                            log.warn(
                                "Deleting expired Idempotency-Key records failed: {}",
                                failure.toString());
                          else if (deleted > 0)
                            log.info(
                                "Deleted {} Idempotency-Key records older than {}",
                                deleted,
                                keys.ttl());
                        }),
            system.executionContext());
  }

  /**
   * Every {@code every}, deletes the logs of rentals that ended more than {@code keep} ago. Each
   * node runs it (the deletes are idempotent; the first to run does the work).
   */
  private static void deleteOldLogs(
      ActorSystem<Void> system, RentalLogs logs, Clock clock, Duration keep, Duration every) {
    system
        .scheduler()
        .scheduleWithFixedDelay(
            Duration.ofSeconds(30),
            every,
            () ->
                logs.deleteEndedBefore(clock.instant().minus(keep))
                    .whenComplete(
                        (deleted, failure) -> {
                          if (failure != null)
                            log.warn("Deleting old rental logs failed: {}", failure.toString());
                          else if (deleted > 0)
                            log.info(
                                "Deleted {} log lines of rentals that ended over {} ago",
                                deleted,
                                keep);
                        }),
            system.executionContext());
  }

  /**
   * The node's configuration: {@link #config(NodeSettings)} with the database's connection and pool
   * size. The pool size ({@code tickmark.database.pool-size}) sizes the journal's Slick pool
   * ({@code numThreads == maxConnections}) and the blocking JDBC dispatcher the read side's pool
   * (of as many connections) and the projections run on.
   */
  static Config config(NodeSettings settings, DatabaseSettings database) {
    String slick = "pekko-persistence-jdbc.shared-databases.slick.db.";
    Map<String, Object> db = new HashMap<>();
    db.put(slick + "url", database.tunedUrl());
    db.put(slick + "user", database.user());
    db.put(slick + "password", database.password());
    db.put(slick + "numThreads", database.poolSize());
    db.put(slick + "maxConnections", database.poolSize());
    db.put(slick + "minConnections", Math.min(2, database.poolSize()));
    db.put(
        "pekko.projection.jdbc.blocking-jdbc-dispatcher.thread-pool-executor.fixed-pool-size",
        database.poolSize());
    return ConfigFactory.parseMap(settings.configOverrides()) // explicit overrides win
        .withFallback(ConfigFactory.parseMap(db))
        .withFallback(config(settings));
  }

  /**
   * The node's configuration before its database is known: its profile (with {@code dev.conf} over
   * it in dev mode, see {@link NodeSettings#load}), then the settings' addresses and ports, then
   * their explicit overrides.
   */
  static Config config(NodeSettings settings) {
    Map<String, Object> overrides = new HashMap<>();
    overrides.put("pekko.remote.artery.canonical.hostname", settings.hostname());
    overrides.put("pekko.remote.artery.canonical.port", settings.remotePort());
    overrides.put("pekko.management.http.hostname", settings.hostname());
    overrides.put("pekko.management.http.port", Math.max(settings.managementPort(), 0));
    overrides.put("pekko.coordinated-shutdown.exit-jvm", settings.exitJvmOnShutdown());
    overrides.put("tickmark.market.allow-simulated-hosts", settings.allowSimulatedHosts());
    overrides.putAll(settings.configOverrides()); // explicit overrides win
    List<String> seeds =
        settings.seedNodes().stream().map(s -> "pekko://" + SYSTEM_NAME + "@" + s).toList();
    return ConfigFactory.parseMap(overrides)
        .withValue("pekko.cluster.seed-nodes", ConfigValueFactory.fromIterable(seeds))
        .withFallback(NodeSettings.load(settings.profile(), settings.dev()));
  }

  public ActorSystem<Void> system() {
    return system;
  }

  public int httpPort() {
    return binding.localAddress().getPort();
  }

  /** {@code https://…} when the node serves TLS, else {@code http://…}. */
  public String baseUrl() {
    return (tls == null ? "http://" : "https://") + settings.hostname() + ":" + httpPort();
  }

  /** The node's TLS identity, or null when it serves plain HTTP. */
  public ServerTls tls() {
    return tls;
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
