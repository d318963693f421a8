package dev.tickmark.persistence.lease;

import com.typesafe.config.Config;
import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import org.apache.pekko.Done;
import org.apache.pekko.actor.ActorRef;
import org.apache.pekko.actor.CoordinatedShutdown;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.Extension;
import org.apache.pekko.actor.typed.ExtensionId;
import org.apache.pekko.actor.typed.javadsl.Adapter;
import org.apache.pekko.cluster.Cluster;
import org.apache.pekko.cluster.sharding.ClusterSharding;
import org.apache.pekko.cluster.sharding.ShardRegion;
import org.apache.pekko.pattern.Patterns;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * This node's side of the PostgreSQL shard leases ({@link PostgresLease}): one holder row per node
 * incarnation, renewed every {@code heartbeat-interval} on a thread of its own, and the leases this
 * node holds. A lease is lost only when a renewal finds that another node has taken it over (which
 * needs this node's row to have lapsed for {@code heartbeat-timeout}); a renewal that fails, for
 * instance while PostgreSQL is down, loses nothing, so a database outage stops no shard
 * (docs/runbook.md "Failover timing and split brain" argues why that is safe). The node gives all
 * its leases up in its coordinated shutdown's {@code cluster-shutdown} phase: after its shards and
 * singletons have stopped, before the node closes its database (an embedded one included).
 */
public final class ShardLeases implements Extension {
  private static final Logger log = LoggerFactory.getLogger(ShardLeases.class);

  /** Where the lease settings are (the path {@code pekko.cluster.sharding.use-lease} names). */
  public static final String CONFIG_PATH = "tickmark.shard-lease";

  /** How long a shard region may take to say which shards it runs. */
  private static final Duration REGION_QUESTION = Duration.ofSeconds(10);

  private final String holder;
  private final Duration ttl;
  private final LeaseStore store;
  private final HikariDataSource dataSource;
  private final ExecutorService calls;
  private final ScheduledExecutorService heartbeat;
  private final ConcurrentHashMap<String, PostgresLease> held = new ConcurrentHashMap<>();

  /** Every lease this node has created (Pekko's LeaseProvider makes one per name and node). */
  private final ConcurrentHashMap<String, PostgresLease> known = new ConcurrentHashMap<>();

  /** Shard leases checked against their region now: one check per lease at a time. */
  private final Set<String> checking = ConcurrentHashMap.newKeySet();

  private final org.apache.pekko.actor.ActorSystem classic;
  private final String shardLeasePrefix;
  private final ConcurrentHashMap<String, PostgresLease> releasesToRetry =
      new ConcurrentHashMap<>();
  private volatile boolean registered;
  private volatile boolean closed;

  private ShardLeases(ActorSystem<?> system) {
    Config config = system.settings().config();
    Config lease = config.getConfig(CONFIG_PATH);
    this.ttl = lease.getDuration("heartbeat-timeout");
    Duration interval = lease.getDuration("heartbeat-interval");
    if (interval.multipliedBy(2).compareTo(ttl) > 0)
      throw new IllegalArgumentException(
          CONFIG_PATH + ".heartbeat-interval must be at most half of heartbeat-timeout");
    this.classic = Adapter.toClassic(system);
    this.shardLeasePrefix = system.name() + "-shard-"; // Pekko's Shard names its lease so
    Cluster cluster = Cluster.get(classic);
    // one holder per incarnation: a node restarted on the same address is not its predecessor
    this.holder =
        cluster.selfAddress().hostPort()
            + "#"
            + Long.toHexString(cluster.selfUniqueAddress().longUid());
    Config db = config.getConfig(lease.getString("database"));
    HikariConfig hikari = new HikariConfig();
    hikari.setPoolName("tickmark-shard-leases");
    hikari.setJdbcUrl(db.getString("url"));
    hikari.setUsername(stringOrNull(db, "user"));
    hikari.setPassword(
        stringOrNull(db, "password")); // none with trust auth (the embedded database)
    hikari.setMaximumPoolSize(lease.getInt("connections"));
    hikari.setMinimumIdle(1);
    hikari.setConnectionTimeout(2_000);
    hikari.setValidationTimeout(1_000);
    hikari.setInitializationFailTimeout(-1); // start even while the database is briefly away
    this.dataSource = new HikariDataSource(hikari);
    this.store = new LeaseStore(dataSource);
    this.calls = Executors.newFixedThreadPool(lease.getInt("connections"), daemon("call"));
    this.heartbeat = Executors.newSingleThreadScheduledExecutor(daemon("heartbeat"));
    heartbeat.scheduleWithFixedDelay(this::renew, 0, interval.toMillis(), TimeUnit.MILLISECONDS);
    CoordinatedShutdown.get(Adapter.toClassic(system))
        .addTask(
            CoordinatedShutdown.PhaseClusterShutdown(),
            "release-shard-leases",
            // a thread of its own: not queued behind releases waiting for a database gone already
            () ->
                CompletableFuture.supplyAsync(
                    this::releaseAllAndClose,
                    task -> daemon("release-all").newThread(task).start()));
    system.getWhenTerminated().thenRun(this::close);
  }

  private static String stringOrNull(Config config, String path) {
    return config.hasPath(path) ? config.getString(path) : null; // hasPath is false for null
  }

  public static ShardLeases get(ActorSystem<?> system) {
    return Id.INSTANCE.apply(system);
  }

  /** This node incarnation's name in {@code lease_holders}. */
  public String holder() {
    return holder;
  }

  /**
   * Runs in {@code lease}'s own order (see {@link PostgresLease}): an acquire and a release of one
   * lease never overtake each other.
   */
  CompletableFuture<Boolean> acquire(PostgresLease lease) {
    return CompletableFuture.supplyAsync(
        () -> {
          ensureRegistered();
          boolean acquired = call(() -> store.acquire(lease.name(), holder));
          log.debug("Lease {} acquired: {}", lease.name(), acquired);
          if (acquired) {
            releasesToRetry.remove(lease.name(), lease);
            held.put(lease.name(), lease);
          }
          return acquired;
        },
        calls);
  }

  /** Runs in {@code lease}'s own order, after {@link #forget}. */
  CompletableFuture<Boolean> release(PostgresLease lease) {
    return CompletableFuture.supplyAsync(
        () -> {
          try {
            boolean released = store.release(lease.name(), holder);
            log.debug("Lease {} released: {}", lease.name(), released);
            releasesToRetry.remove(lease.name(), lease);
            return released;
          } catch (Exception e) {
            if (leaving()) { // the shutdown's release of all leases, or their lapse, follows
              log.debug("Releasing lease {} failed while leaving: {}", lease.name(), e.toString());
              return false;
            }
            // kept, or the next node to start this shard would wait until this node's row lapses
            releasesToRetry.put(lease.name(), lease);
            log.warn("Releasing lease {} failed, retrying: {}", lease.name(), e.toString());
            return false;
          }
        },
        calls);
  }

  /** Stops counting {@code lease} as held, at once (its shard has stopped). */
  void forget(PostgresLease lease) {
    held.remove(lease.name(), lease);
  }

  boolean holds(PostgresLease lease) {
    return held.get(lease.name()) == lease;
  }

  void created(PostgresLease lease) {
    known.put(lease.name(), lease);
  }

  /** A renewal now, on the heartbeat's thread (tests; the heartbeat runs it every interval). */
  CompletableFuture<Void> renewNow() {
    return CompletableFuture.runAsync(this::renew, heartbeat);
  }

  private void renew() {
    if (closed) return;
    try {
      ensureRegistered();
      Set<String> lost = store.renew(holder, ttl, List.copyOf(held.keySet()));
      for (String name : lost) {
        PostgresLease lease = held.get(name);
        if (lease != null && held.remove(name, lease)) {
          log.warn("Lease {} was taken over while this node's lease row had lapsed", name);
          lease.lost(Optional.empty());
        }
      }
      releasesToRetry.values().forEach(PostgresLease::retryRelease);
      for (String name : store.wanted(holder)) {
        PostgresLease lease = known.get(name);
        if (lease != null && checking.add(name))
          releaseUnlessRunning(lease).whenComplete((x, e) -> checking.remove(name));
      }
    } catch (Exception e) {
      // Nothing is lost for a failed renewal: no other node can take a lease over without the
      // database either.
      log.warn("Renewing this node's shard leases failed: {}", e.toString());
    }
  }

  /**
   * Another node was refused {@code lease}. Pekko 1.2's shards do not release their lease when they
   * stop (a rebalance moves a shard without giving its lease back), so ask the shard's region here
   * whether the shard still runs: if not, release the lease; if it does (e.g. the other node's
   * coordinator moved it during a partition), keep it. A shard that started here after the question
   * was asked holds the lease anew ({@link PostgresLease#releaseIfNotAcquiredSince}).
   */
  private CompletableFuture<Boolean> releaseUnlessRunning(PostgresLease lease) {
    long generation = lease.generation();
    String name = lease.name();
    if (!name.startsWith(shardLeasePrefix)) return keep(name); // a singleton's manager releases it
    String rest = name.substring(shardLeasePrefix.length());
    ClusterSharding sharding = ClusterSharding.get(classic);
    String type =
        sharding.getShardTypeNames().stream()
            .filter(t -> rest.startsWith(t + "-"))
            .max(java.util.Comparator.comparingInt(String::length))
            .orElse(null);
    if (type == null) return lease.releaseIfNotAcquiredSince(generation);
    String shardId = rest.substring(type.length() + 1);
    ActorRef region;
    try {
      region = sharding.shardRegion(type);
    } catch (IllegalStateException | IllegalArgumentException notHere) {
      return lease.releaseIfNotAcquiredSince(generation);
    }
    return Patterns.ask(region, ShardRegion.getRegionStatsInstance(), REGION_QUESTION)
        .toCompletableFuture()
        .thenCompose(
            answer -> {
              ShardRegion.ShardRegionStats stats = (ShardRegion.ShardRegionStats) answer;
              boolean running =
                  stats.getStats().containsKey(shardId) || stats.getFailed().contains(shardId);
              if (running) return keep(name);
              log.info("Releasing lease {}: its shard no longer runs on this node", name);
              return lease.releaseIfNotAcquiredSince(generation);
            });
  }

  private CompletableFuture<Boolean> keep(String name) {
    return CompletableFuture.supplyAsync(
        () ->
            call(
                () -> {
                  store.keep(name, holder);
                  return false;
                }),
        calls);
  }

  /** The node's coordinated shutdown has begun. */
  private boolean leaving() {
    return closed || CoordinatedShutdown.get(classic).getShutdownReason().isPresent();
  }

  private synchronized void ensureRegistered() {
    if (registered) return;
    call(
        () -> {
          store.register(holder, ttl);
          return null;
        });
    registered = true;
    log.info("Shard leases held as {} (lapse after {})", holder, ttl);
  }

  private Done releaseAllAndClose() {
    closed = true;
    held.clear();
    try {
      int released = store.releaseAll(holder);
      log.info("Released {} shard leases of {}", released, holder);
    } catch (Exception e) {
      log.warn(
          "Releasing this node's shard leases failed; they lapse after {}: {}", ttl, e.toString());
    }
    return Done.getInstance();
  }

  private void close() {
    closed = true;
    heartbeat.shutdownNow();
    calls.shutdown();
    dataSource.close();
  }

  private interface SqlCall<T> {
    T call() throws Exception;
  }

  private static <T> T call(SqlCall<T> call) {
    try {
      return call.call();
    } catch (RuntimeException e) {
      throw e;
    } catch (Exception e) {
      throw new LeaseStoreException(e);
    }
  }

  /** A lease call that could not reach or use the database. */
  static final class LeaseStoreException extends RuntimeException {
    LeaseStoreException(Exception cause) {
      super(cause.getMessage(), cause);
    }
  }

  private static java.util.concurrent.ThreadFactory daemon(String role) {
    return runnable -> {
      Thread thread = new Thread(runnable, "tickmark-shard-lease-" + role);
      thread.setDaemon(true);
      return thread;
    };
  }

  private static final class Id extends ExtensionId<ShardLeases> {
    private static final Id INSTANCE = new Id();

    @Override
    public ShardLeases createExtension(ActorSystem<?> system) {
      return new ShardLeases(system);
    }
  }
}
