package dev.tickmark.node;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import dev.tickmark.engine.catalog.Catalog;
import dev.tickmark.engine.host.Host;
import dev.tickmark.engine.host.verification.Verification;
import dev.tickmark.engine.market.Matcher;
import dev.tickmark.engine.payout.PayoutRun;
import dev.tickmark.engine.rental.Rental;
import dev.tickmark.http.ApiSettings;
import dev.tickmark.http.agent.AgentSession;
import dev.tickmark.persistence.DatabaseSettings;
import java.time.Duration;
import java.util.Map;
import org.apache.pekko.cluster.sharding.typed.ShardedDaemonProcessSettings;
import org.junit.jupiter.api.Test;

/**
 * The shipped configuration gives each entity the settings the node wired by hand before {@code
 * Settings.fromConfig} (the figures below are those of tickmark.conf at that time); an override
 * reaches them; the pool size reaches both pools; dev mode gets its values from dev.conf.
 */
class EntitySettingsDefaultsTest {
  private static final Duration ASK = Duration.ofSeconds(5);
  private static final long GIB = 1024L * 1024 * 1024;

  private static Config shipped() {
    return Node.config(NodeSettings.fromEnvironment(Map.of()));
  }

  private static DatabaseSettings database(int poolSize) {
    return new DatabaseSettings("jdbc:postgresql://127.0.0.1/x", "u", "", poolSize);
  }

  @Test
  void theShippedSerializationReadsAndWritesInstantsByHandAfterJavaTimeModule() {
    // Jackson picks the (de)serializer of the module registered last: IsoInstants must come after
    // JavaTimeModule, or instants go through java.time's formatter again.
    var modules = shipped().getStringList("pekko.serialization.jackson.jackson-modules");
    int javaTime = modules.indexOf("com.fasterxml.jackson.datatype.jsr310.JavaTimeModule");
    int isoInstants = modules.indexOf(dev.tickmark.engine.IsoInstants.class.getName());
    assertTrue(javaTime >= 0 && isoInstants > javaTime, modules.toString());
  }

  @Test
  void theShippedDefaultsAreTheSettingsTheNodeUsedBefore() {
    Config c = shipped();
    assertEquals(
        new Rental.Settings(
            Duration.ofSeconds(10),
            300,
            1500,
            Duration.ofSeconds(120),
            Duration.ofSeconds(30),
            Duration.ofSeconds(1),
            ASK,
            Duration.ofSeconds(60),
            Duration.ofSeconds(60),
            5_000),
        Rental.Settings.fromConfig(c));
    assertEquals(
        new Matcher.Settings(ASK, 64, 10_000, Duration.ofSeconds(2)),
        Matcher.Settings.fromConfig(c));
    assertEquals(Matcher.Settings.defaults(ASK), Matcher.Settings.fromConfig(c));
    assertEquals(
        new PayoutRun.Settings(ASK, Duration.ofSeconds(1), 16), PayoutRun.Settings.fromConfig(c));
    assertEquals(Verification.Policy.defaults(false), Verification.Policy.fromConfig(c));
    Host.Settings host = Host.Settings.fromConfig(c, Catalog.load(), Host.RentalLink.NONE);
    assertEquals(Duration.ofSeconds(30), host.heartbeatTimeout());
    assertEquals(2, host.heartbeatIntervalSeconds());
    assertEquals(
        new AgentSession.Limits(65536, 20, 40, Duration.ofSeconds(10), ASK),
        AgentSession.Limits.fromConfig(c));
    ApiSettings api = ApiSettings.fromConfig(c, 8080, "tmkop_x", null);
    assertEquals("127.0.0.1", api.interfaceName());
    assertEquals(ASK, api.askTimeout());
    assertEquals(Duration.ofMinutes(5), api.webhookTolerance());
    assertEquals(Duration.ofHours(24), api.registrationTokenValidity());
    assertEquals(new ApiSettings.PayoutDebtor(null, null, null), api.payoutDebtor());
    assertEquals(8, c.getInt("tickmark.database.pool-size"));
  }

  @Test
  void theActorsDispatcherHasAThreadPerCore() {
    Config dispatcher = shipped().getConfig("pekko.actor.default-dispatcher.fork-join-executor");
    int cores = Runtime.getRuntime().availableProcessors();
    assertEquals(2, dispatcher.getInt("parallelism-min"));
    assertEquals(
        Math.min(Math.max(2, cores), dispatcher.getInt("parallelism-max")),
        org.apache.pekko.dispatch.ThreadPoolConfig.scaledPoolSize(
            dispatcher.getInt("parallelism-min"),
            dispatcher.getDouble("parallelism-factor"),
            dispatcher.getInt("parallelism-max")));
  }

  /**
   * The journal and snapshot store actors run on the actors' dispatcher, resolved as Pekko resolves
   * a plugin's: its own section over the fallback, which names a pinned dispatcher
   * (pekko-persistence-jdbc's own setting sits inside {@code tables}, where it is never read).
   * Sharding and the cluster stay on the internal dispatcher (a failover was slower without it).
   */
  @Test
  void theJournalAndSnapshotStoreActorsRunOnTheActorsDispatcher() {
    Config c = shipped();
    String actors = "pekko.actor.default-dispatcher";
    assertEquals(
        "pekko.persistence.dispatchers.default-plugin-dispatcher",
        c.getString("pekko.persistence.journal-plugin-fallback.plugin-dispatcher"));
    assertEquals(
        "PinnedDispatcher",
        c.getString("pekko.persistence.dispatchers.default-plugin-dispatcher.type"));
    assertEquals(actors, c.getString("jdbc-journal.tables.plugin-dispatcher"));
    assertEquals(
        actors,
        c.getConfig("jdbc-journal")
            .withFallback(c.getConfig("pekko.persistence.journal-plugin-fallback"))
            .getString("plugin-dispatcher"));
    assertEquals(
        actors,
        c.getConfig("jdbc-snapshot-store")
            .withFallback(c.getConfig("pekko.persistence.snapshot-store-plugin-fallback"))
            .getString("plugin-dispatcher"));
    assertEquals(
        "pekko.actor.internal-dispatcher", c.getString("pekko.cluster.sharding.use-dispatcher"));
    assertEquals("pekko.actor.internal-dispatcher", c.getString("pekko.cluster.use-dispatcher"));
  }

  @Test
  void anOverrideReachesTheEntitiesSettings() {
    NodeSettings settings =
        NodeSettings.fromEnvironment(Map.of())
            .withConfig("tickmark.rentals.settle-interval", "2s")
            .withConfig("tickmark.http.ask-timeout", "3s")
            .withConfig("tickmark.matcher.max-in-flight", 4)
            .withConfig("tickmark.payouts.parallelism", 2)
            .withConfig("tickmark.hosts.heartbeat-interval", "1s")
            .withConfig("tickmark.verification.min-disk-write-mib-per-s", 10)
            .withConfig("tickmark.verification.allow-unisolated-hosts", true);
    Config c = Node.config(settings, database(8));
    Rental.Settings rental = Rental.Settings.fromConfig(c);
    assertEquals(Duration.ofSeconds(2), rental.settleInterval());
    assertEquals(Duration.ofSeconds(3), rental.askTimeout());
    assertEquals(Duration.ofSeconds(60), rental.maxSettleInterval());
    assertEquals(4, Matcher.Settings.fromConfig(c).maxInFlight());
    assertEquals(2, PayoutRun.Settings.fromConfig(c).parallelism());
    assertEquals(
        1,
        Host.Settings.fromConfig(c, Catalog.load(), Host.RentalLink.NONE)
            .heartbeatIntervalSeconds());
    assertEquals(10, Verification.Policy.fromConfig(c).minDiskWriteMibPerS());
    assertTrue(Verification.Policy.fromConfig(c).allowUnisolatedHosts());
  }

  @Test
  void thePoolSizeSizesTheJournalsSlickPoolAndTheJdbcDispatcher() {
    Config defaults = Node.config(NodeSettings.fromEnvironment(Map.of()), database(8));
    assertEquals(
        8, defaults.getInt("pekko-persistence-jdbc.shared-databases.slick.db.maxConnections"));
    NodeSettings settings =
        NodeSettings.fromEnvironment(Map.of()).withConfig("tickmark.database.pool-size", 3);
    int poolSize =
        Node.config(settings)
            .getInt("tickmark.database.pool-size"); // what Node.start gives DatabaseSettings
    assertEquals(3, poolSize);
    Config c = Node.config(settings, database(poolSize));
    String slick = "pekko-persistence-jdbc.shared-databases.slick.db.";
    assertEquals(3, c.getInt(slick + "numThreads"));
    assertEquals(3, c.getInt(slick + "maxConnections"));
    assertEquals(2, c.getInt(slick + "minConnections"));
    assertEquals(
        3,
        c.getInt(
            "pekko.projection.jdbc.blocking-jdbc-dispatcher.thread-pool-executor.fixed-pool-size"));
    assertEquals(1, Node.config(settings, database(1)).getInt(slick + "minConnections"));
  }

  @Test
  void thePoolSizeHasAnEnvironmentOverride() {
    // ${?TICKMARK_DB_POOL_SIZE} finds a root key of that name before the environment
    Config tickmark =
        ConfigFactory.parseMap(Map.of("TICKMARK_DB_POOL_SIZE", "5"))
            .withFallback(ConfigFactory.parseResources("tickmark.conf"))
            .resolve();
    assertEquals(5, tickmark.getInt("tickmark.database.pool-size"));
  }

  @Test
  void devModeTakesDevConfAllowingSimulatedHostsOnALaptopsDisk() {
    NodeSettings dev = NodeSettings.fromEnvironment(Map.of("TICKMARK_DEV", "true"));
    assertTrue(dev.allowSimulatedHosts());
    assertTrue(dev.webhookSecret().startsWith("whsec_dev_"));
    Config c = Node.config(dev);
    assertEquals(
        new Verification.Policy(true, "535.0", "6.0", 85, 30, GIB, 10),
        Verification.Policy.fromConfig(c));
    // Everything else is the shipped configuration.
    assertEquals(Rental.Settings.fromConfig(shipped()), Rental.Settings.fromConfig(c));
    assertEquals(8080, dev.httpPort());
  }

  @Test
  void withoutDevModeNothingOfDevConfApplies() {
    NodeSettings production = NodeSettings.fromEnvironment(Map.of());
    assertFalse(production.allowSimulatedHosts());
    assertNull(production.webhookSecret());
    assertEquals(
        Verification.Policy.defaults(false),
        Verification.Policy.fromConfig(Node.config(production)));
  }

  @Test
  void inDevModeTheEnvironmentAndTheProfileStillWin() {
    NodeSettings dev =
        NodeSettings.fromEnvironment(
            Map.of("TICKMARK_DEV", "true", "TICKMARK_ALLOW_SIMULATED_HOSTS", "false"));
    assertFalse(dev.allowSimulatedHosts());
    assertFalse(Verification.Policy.fromConfig(Node.config(dev)).allowSimulatedHosts());
    NodeSettings local =
        NodeSettings.fromEnvironment(Map.of("TICKMARK_DEV", "true", "TICKMARK_PROFILE", "local2"));
    assertEquals(8082, local.httpPort());
    assertEquals(25522, Node.config(local).getInt("pekko.remote.artery.canonical.port"));
    assertEquals(10, Verification.Policy.fromConfig(Node.config(local)).minDiskWriteMibPerS());
  }

  @Test
  void idempotencyKeysLiveADayAndAnInProgressTimeoutShorterThanARequestIsRefused() {
    Config c = Node.config(NodeSettings.fromEnvironment(Map.of()), database(8));
    assertEquals(Duration.ofHours(24), c.getDuration("tickmark.http.idempotency.ttl"));
    assertEquals(
        Duration.ofSeconds(60), c.getDuration("tickmark.http.idempotency.in-progress-timeout"));
    assertEquals(Duration.ofHours(1), c.getDuration("tickmark.http.idempotency.cleanup-interval"));
    Node.checkIdempotencySettings(c); // the defaults pass: 60 s > 6 x 5 s

    Config tooShort =
        Node.config(
            NodeSettings.fromEnvironment(Map.of())
                .withConfig("tickmark.http.ask-timeout", "10s")
                .withConfig("tickmark.http.idempotency.in-progress-timeout", "60s"),
            database(8));
    IllegalArgumentException refused =
        org.junit.jupiter.api.Assertions.assertThrows(
            IllegalArgumentException.class, () -> Node.checkIdempotencySettings(tooShort));
    assertTrue(refused.getMessage().contains("in-progress-timeout"), refused.getMessage());
  }

  /**
   * A crash is acted on at the cluster's ticks: Pekko's 1 s ticks added about a second and a half
   * before the removal; the detector's and the resolver's thresholds are not these.
   */
  @Test
  void theClusterNoticesAndActsOnAFailureAtQuickerTicksThanPekkos() {
    Config c = Node.config(NodeSettings.fromEnvironment(Map.of()), database(8));
    assertEquals(
        Duration.ofMillis(250), c.getDuration("pekko.cluster.unreachable-nodes-reaper-interval"));
    assertEquals(Duration.ofMillis(250), c.getDuration("pekko.cluster.leader-actions-interval"));
    assertEquals(Duration.ofMillis(500), c.getDuration("pekko.cluster.gossip-interval"));
    assertEquals(
        Duration.ofSeconds(2),
        c.getDuration("pekko.cluster.failure-detector.acceptable-heartbeat-pause"));
    assertEquals(
        Duration.ofSeconds(4), c.getDuration("pekko.cluster.split-brain-resolver.stable-after"));
    assertEquals(100, c.getInt("pekko.cluster.sharding.number-of-shards"));
  }

  @Test
  void shardsRunUnderLeasesWithoutAMarginAndWithoutLeasesAMarginIsRequired() {
    Config c = Node.config(NodeSettings.fromEnvironment(Map.of()), database(8));
    assertEquals("tickmark.shard-lease", c.getString("pekko.cluster.sharding.use-lease"));
    assertEquals(
        "tickmark.shard-lease",
        c.getString("pekko.cluster.sharding.coordinator-singleton.use-lease"));
    assertEquals(
        "tickmark.shard-lease",
        c.getString("pekko.cluster.sharded-daemon-process.sharding.use-lease"),
        "the projections' daemon processes shard under the same leases");
    assertEquals(Duration.ofMillis(1), c.getDuration("pekko.cluster.down-removal-margin"));
    assertEquals(
        1000L,
        ShardedDaemonProcessSettings.fromConfig(c.getConfig("pekko.cluster.sharded-daemon-process"))
            .keepAliveInterval()
            .toMillis(),
        "a lost node's projections start on a survivor within a second of its shards, not up to 10 s later");
    assertTrue(
        c.getDuration("tickmark.shard-lease.heartbeat-timeout").toMillis()
            < c.getDuration("pekko.cluster.failure-detector.acceptable-heartbeat-pause").toMillis()
                + c.getDuration("pekko.cluster.split-brain-resolver.stable-after").toMillis(),
        "a crashed node's leases lapse before the survivors can remove it");
    Node.checkFailoverSettings(c);

    Config withoutLeases =
        Node.config(
            NodeSettings.fromEnvironment(Map.of())
                .withConfig("pekko.cluster.sharding.use-lease", "")
                .withConfig("pekko.cluster.sharding.coordinator-singleton.use-lease", ""),
            database(8));
    IllegalArgumentException refused =
        org.junit.jupiter.api.Assertions.assertThrows(
            IllegalArgumentException.class, () -> Node.checkFailoverSettings(withoutLeases));
    assertTrue(refused.getMessage().contains("TICKMARK_DOWN_REMOVAL_MARGIN"), refused.getMessage());
    Node.checkFailoverSettings(
        Node.config(
            NodeSettings.fromEnvironment(Map.of())
                .withConfig("pekko.cluster.sharding.use-lease", "")
                .withConfig("pekko.cluster.down-removal-margin", "5s"),
            database(8)));
  }
}
