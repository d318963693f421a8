package dev.tickmark.persistence.lease;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import dev.tickmark.persistence.DatabaseSettings;
import dev.tickmark.persistence.Migrations;
import dev.tickmark.persistence.TestDatabase;
import java.sql.Connection;
import java.sql.DriverManager;
import java.time.Duration;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.pekko.actor.testkit.typed.javadsl.TestProbe;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.javadsl.Adapter;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.coordination.lease.javadsl.Lease;
import org.apache.pekko.coordination.lease.javadsl.LeaseProvider;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * {@link PostgresLease} as Pekko's sharding uses it, two nodes (actor systems) on one real
 * PostgreSQL: one holder at a time, a lost-lease callback exactly once when the other node takes a
 * lapsed lease over, a late acquire refused, and every lease given back when a node shuts down.
 */
class PostgresLeaseIntegrationTest {
  static DatabaseSettings db;
  static ActorSystem<Void> nodeA;
  static ActorSystem<Void> nodeB;

  @BeforeAll
  static void start() throws Exception {
    db = TestDatabase.fresh("pglease");
    Migrations.migrate(db);
    nodeA = node("a");
    nodeB = node("b");
  }

  @AfterAll
  static void stop() {
    if (nodeA != null) nodeA.terminate();
    if (nodeB != null) nodeB.terminate();
  }

  /**
   * A heartbeat slower than the test, so that the test decides when a node renews ({@link
   * ShardLeases#renewNow}) and when its row lapses ({@link #lapse}).
   */
  static ActorSystem<Void> node(String name) {
    return node(name, db.password());
  }

  /** {@code password} null: as the node's config has it for the embedded database (trust auth). */
  static ActorSystem<Void> node(String name, String password) {
    Map<String, Object> database = new java.util.HashMap<>();
    database.put("test-db.url", db.url());
    database.put("test-db.user", db.user());
    database.put("test-db.password", password);
    Config config =
        ConfigFactory.parseMap(database)
            .withFallback(
                ConfigFactory.parseString(
                    """
                    pekko.actor.provider = cluster
                    pekko.remote.artery.canonical.hostname = 127.0.0.1
                    pekko.remote.artery.canonical.port = 0
                    pekko.loglevel = WARNING
                    tickmark.shard-lease {
                      lease-class = "dev.tickmark.persistence.lease.PostgresLease"
                      heartbeat-interval = 10 minutes
                      heartbeat-timeout = 30 minutes
                      lease-operation-timeout = 5s
                      database = test-db
                      connections = 2
                    }
                    """))
            .withFallback(ConfigFactory.load());
    return ActorSystem.create(Behaviors.empty(), "lease-" + name, config);
  }

  static Lease lease(ActorSystem<?> node, String name) {
    return LeaseProvider.get(Adapter.toClassic(node))
        .getLease(name, ShardLeases.CONFIG_PATH, node.name());
  }

  static <T> T answer(java.util.concurrent.CompletionStage<T> stage) throws Exception {
    return stage.toCompletableFuture().get(10, TimeUnit.SECONDS);
  }

  static Connection connection() throws Exception {
    return DriverManager.getConnection(db.url(), db.user(), db.password());
  }

  static final LeaseRows rows = new LeaseRows(PostgresLeaseIntegrationTest::connection);

  static void lapse(ActorSystem<?> node) throws Exception {
    rows.lapse(ShardLeases.get(node).holder());
  }

  static String holderOf(String lease) throws Exception {
    return rows.holderOf(lease);
  }

  @Test
  void aLapsedLeaseTakenOverIsReportedLostOnceAndALateAcquireIsRefused() throws Exception {
    Lease onA = lease(nodeA, "shard-1");
    Lease onB = lease(nodeB, "shard-1");
    AtomicInteger lostOnA = new AtomicInteger();
    TestProbe<Optional<Throwable>> lost = TestProbe.create(nodeA);
    assertTrue(
        answer(
            onA.acquire(
                reason -> {
                  lostOnA.incrementAndGet();
                  lost.getRef().tell(reason);
                })));
    assertTrue(onA.checkLease());
    assertEquals(ShardLeases.get(nodeA).holder(), holderOf("shard-1"));
    assertFalse(answer(onB.acquire()), "node a holds it and is alive");
    assertFalse(onB.checkLease());

    lapse(nodeA);
    answer(ShardLeases.get(nodeA).renewNow());
    lost.expectNoMessage(Duration.ofMillis(200)); // lapsed, but nobody took it: still node a's
    assertTrue(onA.checkLease());
    assertFalse(answer(onB.acquire()), "renewed again");

    lapse(nodeA);
    assertTrue(answer(onB.acquire()), "node a's row lapsed: node b takes the lease over");
    assertTrue(onB.checkLease());
    answer(ShardLeases.get(nodeA).renewNow());
    lost.expectMessage(Optional.empty());
    assertFalse(onA.checkLease());
    answer(ShardLeases.get(nodeA).renewNow());
    lost.expectNoMessage(Duration.ofMillis(200));
    assertEquals(1, lostOnA.get(), "reported once");
    assertFalse(answer(onA.acquire()), "a late acquire after the take-over is refused");
    assertEquals(ShardLeases.get(nodeB).holder(), holderOf("shard-1"));
  }

  @Test
  void aReleasedLeaseIsFreeAndAStoppedNodeGivesBackAllItHeld() throws Exception {
    Lease onA = lease(nodeA, "shard-2");
    assertTrue(answer(onA.acquire()));
    assertTrue(answer(onA.release()));
    assertFalse(onA.checkLease());
    assertNull(holderOf("shard-2"));

    ActorSystem<Void> nodeC = node("c", null);
    assertTrue(answer(lease(nodeC, "shard-3").acquire()));
    assertTrue(answer(lease(nodeC, "shard-4").acquire()));
    assertEquals(ShardLeases.get(nodeC).holder(), holderOf("shard-3"));
    nodeC.terminate();
    nodeC.getWhenTerminated().toCompletableFuture().get(30, TimeUnit.SECONDS);
    assertNull(holderOf("shard-3"), "released at the end of its coordinated shutdown");
    assertNull(holderOf("shard-4"));
    assertTrue(answer(lease(nodeA, "shard-3").acquire()), "free for the next node at once");
  }

  interface Sql<T> {
    T run() throws Exception;
  }

  static <T> T unchecked(Sql<T> call) {
    try {
      return call.run();
    } catch (Exception e) {
      throw new IllegalStateException(e);
    }
  }

  static String wantedBy(String lease) throws Exception {
    return rows.wantedBy(lease);
  }

  /**
   * Pekko 1.2's shards do not release their lease when they stop; the holder releases a shard lease
   * that another node was refused once its shard no longer runs here (here: no such region at all).
   */
  @Test
  void aWantedShardLeaseWhoseShardDoesNotRunHereIsReleasedToTheNodeThatWantsIt() throws Exception {
    String name = nodeA.name() + "-shard-Ghost-7";
    Lease onA = lease(nodeA, name);
    Lease onB = lease(nodeB, name);
    assertTrue(answer(onA.acquire()));
    answer(ShardLeases.get(nodeA).renewNow());
    assertTrue(onA.checkLease(), "nobody wants it: kept");
    assertFalse(answer(onB.acquire()));
    assertEquals(ShardLeases.get(nodeB).holder(), wantedBy(name));
    answer(ShardLeases.get(nodeA).renewNow());
    TestProbe<Void> probe = TestProbe.create(nodeA);
    probe.awaitAssert(
        Duration.ofSeconds(10),
        () -> {
          assertNull(unchecked(() -> holderOf(name)), "released");
          return null;
        });
    assertFalse(onA.checkLease());
    assertTrue(answer(onB.acquire()));
  }

  /** A lease that is not a shard's (a coordinator's singleton) is released by its manager. */
  @Test
  void aWantedLeaseThatIsNotAShardsIsKeptAndTheRequestAnswered() throws Exception {
    String name = "coordinator-lease";
    assertTrue(answer(lease(nodeA, name).acquire()));
    assertFalse(answer(lease(nodeB, name).acquire()));
    answer(ShardLeases.get(nodeA).renewNow());
    TestProbe<Void> probe = TestProbe.create(nodeA);
    probe.awaitAssert(
        Duration.ofSeconds(10),
        () -> {
          assertNull(unchecked(() -> wantedBy(name)), "answered");
          return null;
        });
    assertEquals(ShardLeases.get(nodeA).holder(), holderOf(name));
    assertTrue(lease(nodeA, name).checkLease());
  }
}
