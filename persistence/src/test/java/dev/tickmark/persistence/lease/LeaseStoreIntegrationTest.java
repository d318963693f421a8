package dev.tickmark.persistence.lease;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.tickmark.persistence.DatabaseSettings;
import dev.tickmark.persistence.Jdbc;
import dev.tickmark.persistence.Migrations;
import dev.tickmark.persistence.TestDatabase;
import java.time.Duration;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The lease tables on a real PostgreSQL: one holder per lease, take-over only after the holder's
 * row lapsed, and a lapsed holder told exactly which leases it lost, even when its renewal races
 * the take-over.
 */
class LeaseStoreIntegrationTest {
  static final Duration TTL = Duration.ofSeconds(30);
  static Jdbc jdbc;
  static LeaseStore store;
  static ExecutorService threads;
  static LeaseRows rows;

  @BeforeAll
  static void start() throws Exception {
    DatabaseSettings db = TestDatabase.fresh("leases");
    Migrations.migrate(db);
    jdbc = Jdbc.create(db, "lease-test", Executors.newFixedThreadPool(2));
    store = new LeaseStore(jdbc.dataSource());
    rows = new LeaseRows(() -> jdbc.dataSource().getConnection());
    threads = Executors.newFixedThreadPool(2);
  }

  @AfterAll
  static void stop() {
    if (jdbc != null) jdbc.close();
    if (threads != null) threads.shutdownNow();
  }

  static void lapse(String holder) throws Exception {
    rows.lapse(holder);
  }

  static String holderOf(String lease) throws Exception {
    return rows.holderOf(lease);
  }

  @Test
  void aLeaseHasOneHolderUntilItIsReleased() throws Exception {
    store.register("a1", TTL);
    store.register("b1", TTL);
    assertTrue(store.acquire("one", "a1"));
    assertFalse(store.acquire("one", "b1"), "held by a live holder");
    assertTrue(store.acquire("one", "a1"), "acquiring what one holds is a yes");
    assertFalse(store.release("one", "b1"), "only the holder releases");
    assertEquals("a1", holderOf("one"));
    assertTrue(store.release("one", "a1"));
    assertTrue(store.acquire("one", "b1"), "free after the release");
    assertFalse(store.acquire("one", "a1"));
    assertEquals(Set.of(), store.renew("a1", TTL, List.of()));
    assertEquals(Set.of(), store.renew("b1", TTL, List.of("one")));
  }

  @Test
  void aLapsedHolderLosesOnlyWhatWasTakenOverLearnsItOnceAndCannotTakeItBack() throws Exception {
    store.register("a2", TTL);
    store.register("b2", TTL);
    assertTrue(store.acquire("two-x", "a2"));
    assertTrue(store.acquire("two-y", "a2"));
    assertFalse(store.acquire("two-x", "b2"), "a2 is alive");
    lapse("a2");
    assertTrue(store.acquire("two-x", "b2"), "a2's row lapsed: taken over");
    assertEquals("b2", holderOf("two-x"));
    assertEquals(
        Set.of("two-x"), store.renew("a2", TTL, List.of("two-x", "two-y")), "told what it lost");
    assertEquals(Set.of(), store.renew("a2", TTL, List.of("two-y")), "told once");
    assertFalse(store.acquire("two-x", "a2"), "a late acquire after the take-over is refused");
    assertFalse(store.acquire("two-y", "b2"), "a2 renewed: what it kept is still its own");
    assertEquals("a2", holderOf("two-y"));
  }

  @Test
  void renewalsThatFailedForLongerThanTheTtlLoseNothingWhenNoOneTookOver() throws Exception {
    store.register("a3", TTL);
    store.register("b3", TTL);
    assertTrue(store.acquire("three", "a3"));
    lapse("a3"); // e.g. PostgreSQL was away for longer than the TTL
    assertEquals(Set.of(), store.renew("a3", TTL, List.of("three")));
    assertFalse(store.acquire("three", "b3"), "re-armed: no take-over after the renewal");
    assertEquals("a3", holderOf("three"));
  }

  @Test
  void aHolderWithoutARowLeavesItsLeasesFreeToTake() throws Exception {
    store.register("a4", TTL);
    store.register("b4", TTL);
    assertTrue(store.acquire("four", "a4"));
    assertEquals(1, store.releaseAll("a4"));
    assertEquals(null, holderOf("four"));
    assertTrue(store.acquire("four", "b4"));
    // a holder whose row is gone (never registered, or left) loses nothing it does not hold
    assertEquals(Set.of(), store.renew("a4", TTL, List.of()));
  }

  @Test
  void aRefusedHolderMarksTheLeaseWantedUntilTheHolderKeepsOrGivesItUp() throws Exception {
    store.register("a6", TTL);
    store.register("b6", TTL);
    assertTrue(store.acquire("six", "a6"));
    assertTrue(store.acquire("six-other", "a6"));
    assertEquals(Set.of(), store.wanted("a6"));
    assertFalse(store.acquire("six", "b6"));
    assertEquals(Set.of("six"), store.wanted("a6"), "b6 asked for it");
    store.keep("six", "b6");
    assertEquals(Set.of("six"), store.wanted("a6"), "only the holder answers");
    store.keep("six", "a6");
    assertEquals(Set.of(), store.wanted("a6"), "kept: answered");
    assertFalse(store.acquire("six", "b6"));
    assertTrue(store.release("six", "a6"));
    assertTrue(store.acquire("six", "b6"));
    assertEquals(Set.of(), store.wanted("b6"), "a new holder starts unwanted");
  }

  /**
   * The race the locks are for: a lapsed holder renewing while another node takes its lease over.
   * Whichever wins, exactly one of them holds the lease afterwards, and the other knows.
   */
  @Test
  void aRenewalRacingATakeOverLeavesExactlyOneHolder() throws Exception {
    store.register("a5", TTL);
    store.register("b5", TTL);
    int takenOver = 0;
    int kept = 0;
    for (int round = 0; round < 150; round++) {
      String lease = "five-" + round;
      assertTrue(store.acquire(lease, "a5"));
      lapse("a5");
      CyclicBarrier start = new CyclicBarrier(2);
      CompletableFuture<Set<String>> renewal =
          CompletableFuture.supplyAsync(
              () -> {
                await(start);
                return sql(() -> store.renew("a5", TTL, List.of(lease)));
              },
              threads);
      CompletableFuture<Boolean> takeOver =
          CompletableFuture.supplyAsync(
              () -> {
                await(start);
                return sql(() -> store.acquire(lease, "b5"));
              },
              threads);
      boolean bHolds = takeOver.join();
      boolean aLost = renewal.join().contains(lease);
      assertEquals(bHolds, aLost, "round " + round + ": b5 holds iff a5 was told it lost");
      assertEquals(bHolds ? "b5" : "a5", holderOf(lease), "round " + round);
      if (bHolds) takenOver++;
      else kept++;
    }
    System.out.printf("renewal vs take-over: %d taken over, %d kept%n", takenOver, kept);
  }

  interface Sql<T> {
    T run() throws Exception;
  }

  static <T> T sql(Sql<T> call) {
    try {
      return call.run();
    } catch (Exception e) {
      throw new IllegalStateException(e);
    }
  }

  static void await(CyclicBarrier barrier) {
    try {
      barrier.await();
    } catch (Exception e) {
      throw new IllegalStateException(e);
    }
  }
}
