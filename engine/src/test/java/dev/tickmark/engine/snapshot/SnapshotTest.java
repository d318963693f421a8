package dev.tickmark.engine.snapshot;

import static dev.tickmark.engine.snapshot.SnapshotFixture.GIB;
import static dev.tickmark.engine.snapshot.SnapshotFixture.START;
import static dev.tickmark.engine.snapshot.SnapshotFixture.WAIT;
import static dev.tickmark.engine.snapshot.SnapshotFixture.assertRejected;
import static dev.tickmark.engine.snapshot.SnapshotFixture.ok;
import static dev.tickmark.engine.snapshot.SnapshotFixture.settings;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import dev.tickmark.engine.Rejection;
import dev.tickmark.engine.account.Account;
import dev.tickmark.engine.host.Host;
import dev.tickmark.engine.snapshot.Snapshot.Status;
import dev.tickmark.engine.snapshot.Snapshot.View;
import java.time.Duration;
import java.util.List;
import org.apache.pekko.actor.testkit.typed.annotations.JUnit5TestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.JUnit5TestKitBuilder;
import org.apache.pekko.actor.testkit.typed.javadsl.TestKitJUnit5Extension;
import org.apache.pekko.persistence.testkit.javadsl.EventSourcedBehaviorTestKit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * One behaviour of the {@link Snapshot} entity per test, through {@link SnapshotFixture}: the
 * snapshot in the testkit, the real renter {@link Account} (every amount is checked where it
 * lands), a host probe and a test clock. At {@link SnapshotFixture#ONE_PER_GIB_SECOND} a 1 GiB
 * snapshot costs exactly 1 µ€ a second, and a hold covers 600 seconds.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@ExtendWith(TestKitJUnit5Extension.class)
class SnapshotTest {
  static final Config CONFIG =
      EventSourcedBehaviorTestKit.config().withFallback(ConfigFactory.load());

  @JUnit5TestKit
  final ActorTestKit testKit =
      new JUnit5TestKitBuilder().withName("SnapshotTest").withCustomConfig(CONFIG).build();

  private SnapshotFixture fixture(long deposit) {
    return new SnapshotFixture(testKit, settings(), deposit);
  }

  // ---- creation and upload

  @Test
  void createStartsTheUploadAndRemindsTheHost() {
    SnapshotFixture f = fixture(0);
    View v = f.create();
    assertEquals(Status.UPLOADING, v.status());
    assertEquals(f.rentalId, v.rentalId());
    assertEquals(START, v.createdAt());
    assertEquals(
        new Host.UploadSnapshot(f.rentalId, f.snapshotId, List.of()),
        f.host.expectMessageClass(Host.UploadSnapshot.class, WAIT));
    f.tell(Snapshot.Timer.REMIND);
    f.host.expectMessageClass(Host.UploadSnapshot.class, WAIT);
  }

  @Test
  void createIsIdempotent() {
    SnapshotFixture f = fixture(0);
    View first = f.create();
    f.clock.advance(Duration.ofSeconds(5));
    assertEquals(first, f.create());
    assertEquals(1, f.events().size());
  }

  @Test
  void remindsTheHostEveryReminderWhileUploadingAndStopsOnceReady() {
    SnapshotFixture f =
        new SnapshotFixture(
            testKit, SnapshotFixture.withReminder(settings(), Duration.ofMillis(50)), 10_000);
    f.create();
    for (int i = 0; i < 3; i++) f.host.expectMessageClass(Host.UploadSnapshot.class, WAIT);
    ok(f.manifest(GIB, 0));
    ok(f.complete());
    // Reminders already on their way may still arrive; then none for several reminder intervals.
    f.awaitAssert(() -> f.host.expectNoMessage(Duration.ofMillis(300)));
  }

  @Test
  void uploadNotCompleteInTimeFails() {
    SnapshotFixture f = fixture(0);
    f.create();
    f.clock.advance(Duration.ofMinutes(61));
    f.tell(Snapshot.Timer.UPLOAD_EXPIRED);
    View v = f.get();
    assertEquals(Status.FAILED, v.status());
    assertEquals("upload_timeout", v.failure());
    assertRejected(Rejection.SNAPSHOT_NOT_READY, f.ask(r -> new Snapshot.Restore(f.renterId, r)));
  }

  @Test
  void uploadDeadlineSurvivesARestart() {
    SnapshotFixture f = fixture(0);
    f.create();
    f.clock.advance(Duration.ofHours(2));
    f.kit.restart(); // the deadline passed while down: it fires at once
    f.awaitState(Snapshot.State.Failed.class);
    assertEquals("upload_timeout", f.get().failure());
  }

  @Test
  void anotherHostsManifestCompleteAndFailureAreNotFound() {
    SnapshotFixture f = fixture(0);
    f.create();
    assertRejected(
        Rejection.NOT_FOUND,
        f.ask(r -> new Snapshot.RecordManifest("host-x", GIB, "ab".repeat(32), 1, 0, r)));
    assertRejected(Rejection.NOT_FOUND, f.ask(r -> new Snapshot.Complete("host-x", r)));
    assertRejected(Rejection.NOT_FOUND, f.ask(r -> new Snapshot.Fail("host-x", "no", r)));
    assertEquals(1, f.events().size());
  }

  @Test
  void unknownSnapshotIsNotFound() {
    SnapshotFixture f = fixture(0);
    assertRejected(Rejection.NOT_FOUND, f.ask(r -> new Snapshot.Get(null, r)));
    assertRejected(Rejection.NOT_FOUND, f.ask(r -> new Snapshot.Restore(f.renterId, r)));
    assertRejected(Rejection.NOT_FOUND, f.manifest(GIB, 0));
  }

  @Test
  void manifestAboveTheSizeLimitFailsAndAnswersAlikeWhenRepeated() {
    SnapshotFixture f = fixture(0);
    f.create();
    var first = f.manifest(20 * GIB + 1, 0);
    assertRejected(Rejection.SNAPSHOT_TOO_LARGE, first);
    assertEquals(Status.FAILED, f.get().status());
    assertEquals("snapshot_too_large", f.get().failure());
    var again = f.manifest(20 * GIB + 1, 0);
    assertEquals(first.getError().getMessage(), again.getError().getMessage());
    assertRejected(Rejection.SNAPSHOT_NOT_READY, f.complete());
  }

  @Test
  void manifestPastTheAccountQuotaFails() {
    SnapshotFixture f = fixture(0);
    f.create();
    ok(f.manifest(10 * GIB, 90 * GIB)); // exactly the quota
    SnapshotFixture g = fixture(0);
    g.create();
    assertRejected(Rejection.QUOTA_EXCEEDED, g.manifest(10 * GIB, 90 * GIB + 1));
    assertRejected(Rejection.QUOTA_EXCEEDED, g.manifest(10 * GIB, 90 * GIB + 1));
    assertEquals("quota_exceeded", g.get().failure());
  }

  @Test
  void sameManifestAgainIsANoOp() {
    SnapshotFixture f = fixture(0);
    f.create();
    View first = ok(f.manifest(GIB, 0));
    assertEquals(GIB, first.sizeBytes());
    assertEquals(first, ok(f.manifest(GIB, 0)));
    assertEquals(2, f.events().size());
  }

  @Test
  void agentFailureFails() {
    SnapshotFixture f = fixture(0);
    f.create();
    View v = ok(f.ask(r -> new Snapshot.Fail(f.hostId, "workspace_gone", r)));
    assertEquals(Status.FAILED, v.status());
    assertEquals("workspace_gone", v.failure());
  }

  @Test
  void completeWithoutAManifestIsRefused() {
    SnapshotFixture f = fixture(0);
    f.create();
    assertRejected(Rejection.CHUNKS_MISSING, f.complete());
  }

  // ---- ready: the hold and the meter

  @Test
  void completePlacesAHoldForTheHoldDurationAndIsReady() {
    SnapshotFixture f = fixture(10_000);
    View v = f.ready(GIB);
    assertEquals(Status.READY, v.status());
    assertEquals(START, v.readyAt());
    Account.HoldView hold = ok(f.hold());
    assertEquals(600, hold.amount());
    assertEquals(600, f.summary().held());
    assertEquals(v, ok(f.ask(r -> new Snapshot.Restore(f.renterId, r))));
    assertRejected(Rejection.NOT_FOUND, f.ask(r -> new Snapshot.Restore("renter-other", r)));
    assertRejected(Rejection.NOT_FOUND, f.ask(r -> new Snapshot.Get("renter-other", r)));
  }

  @Test
  void completeTwiceIsReadyOnceWithOneHold() {
    SnapshotFixture f = fixture(10_000);
    View v = f.ready(GIB);
    assertEquals(v, ok(f.complete()));
    assertEquals(1, f.events(Snapshot.Ready.class).size());
    assertEquals(1, f.accountEvents(Account.HoldPlaced.class).size());
  }

  @Test
  void holdRefusedAtReadySuspendsAtOnce() {
    SnapshotFixture f = fixture(0);
    View v = f.ready(GIB);
    assertEquals(Status.SUSPENDED, v.status());
    assertEquals("insufficient_funds", v.failure());
    assertEquals(START.plus(Duration.ofDays(7)), v.deletesAt());
    assertRejected(Rejection.SNAPSHOT_NOT_READY, f.ask(r -> new Snapshot.Restore(f.renterId, r)));
    f.settleAt(100);
    assertEquals(0, f.get().cost(), "no hold, nothing billable");
  }

  @Test
  void settlementsAreExactCumulativeAndCapturedAsStorage() {
    SnapshotFixture f = fixture(100_000);
    f.ready(GIB);
    f.settleAt(100);
    f.settleAt(250);
    f.awaitAssert(() -> assertEquals(250, f.summary().captured()));
    List<Account.StorageCaptured> captures = f.accountEvents(Account.StorageCaptured.class);
    assertEquals(
        List.of(100L, 150L), captures.stream().map(Account.StorageCaptured::amount).toList());
    assertEquals(
        List.of(100L, 250L),
        captures.stream().map(Account.StorageCaptured::cumulativeAmount).toList());
    assertEquals(
        List.of(
            new Snapshot.Settled(100, 100, START.plusSeconds(100)),
            new Snapshot.Settled(250, 250, START.plusSeconds(250))),
        f.events(Snapshot.Settled.class));
    assertEquals(250, f.get().cost());
    assertEquals(250, f.summary().spentThisMonth());
    assertEquals(0, f.accountEvents(Account.Captured.class).size(), "storage is no plain capture");
  }

  @Test
  void settlingTwiceAtTheSameSecondRecordsOnce() {
    SnapshotFixture f = fixture(100_000);
    f.ready(GIB);
    f.settleAt(100);
    f.settleAt(100);
    assertEquals(1, f.events(Snapshot.Settled.class).size());
  }

  @Test
  void extendsTheHoldWhenLessThanHalfIsLeft() {
    SnapshotFixture f = fixture(100_000);
    f.ready(GIB);
    f.settleAt(299); // 301 s left of 600: no extension
    assertEquals(0, f.events(Snapshot.HoldExtended.class).size());
    f.settleAt(301); // 299 left
    f.awaitAssert(() -> assertEquals(1, f.events(Snapshot.HoldExtended.class).size()));
    assertEquals(301 + 600, f.events(Snapshot.HoldExtended.class).get(0).newAmount());
    f.awaitAssert(() -> assertEquals(901, ok(f.hold()).amount()));
  }

  @Test
  void restartDeliversTheLastSettlementAgainWithoutChargingTwice() {
    SnapshotFixture f = fixture(100_000);
    f.ready(GIB);
    f.settleAt(120);
    f.awaitAssert(() -> assertEquals(120, f.summary().captured()));
    f.kit.restart();
    f.awaitAssert(() -> assertEquals(120, ok(f.hold()).captured()));
    f.settleAt(200);
    f.awaitAssert(() -> assertEquals(200, f.summary().captured()));
    assertEquals(100_000, f.summary().balance() + f.summary().captured(), "conserved");
  }

  @Test
  void suspendsWhenTheBalanceRunsOutAndResumesAfterADeposit() {
    SnapshotFixture f = fixture(700); // the first hold (600) and 100 more
    f.ready(GIB);
    f.settleAt(350); // extension to 950 needs 350 more: refused
    f.awaitState(Snapshot.State.Suspended.class);
    View suspended = f.get();
    assertEquals(Status.SUSPENDED, suspended.status());
    assertEquals(START.plusSeconds(350), suspended.suspendedAt());
    assertEquals(START.plusSeconds(350).plus(Duration.ofDays(7)), suspended.deletesAt());
    f.settleAt(700); // billed only as far as the hold covers; the retry is refused
    f.awaitAssert(() -> assertEquals(600, f.summary().captured()));
    assertEquals(600, f.get().cost());
    assertEquals(Status.SUSPENDED, f.get().status());
    f.deposit("pay-1", 2_000);
    f.settleAt(800); // covers 800 + 600 now
    f.awaitState(Snapshot.State.Ready.class);
    f.awaitAssert(() -> assertEquals(800, f.summary().captured()));
    assertEquals(1, f.events(Snapshot.Resumed.class).size());
    Account.Summary s = f.summary();
    assertEquals(2_700 - 800, s.balance());
    // Resumed with the full hold (800 + 600), or with the least that covers the next settle
    // interval
    // (700 + 300) when the fallback asked for at 700 s, refused so far, reaches the account only
    // after the deposit (seen once in CI): either covers the seconds since, and the next settle
    // grows
    // it.
    assertTrue(
        s.held() == 1_400 - 800 || s.held() == 1_000 - 800, "held " + s.held() + " after 800 s");
    assertNull(f.get().deletesAt());
  }

  @Test
  void resumesWithTheLeastThatCoversTheSecondsSinceWhenMoreIsNotThere() {
    SnapshotFixture f = fixture(700);
    f.ready(GIB);
    f.settleAt(350);
    f.awaitState(Snapshot.State.Suspended.class);
    // 850 available: growing the hold to 1000 + 600 needs 1000 more, to 1000 + 300 only 700
    f.deposit("pay-1", 750);
    f.settleAt(1_000);
    f.awaitState(Snapshot.State.Ready.class);
    f.awaitAssert(() -> assertEquals(1_000, f.summary().captured()));
    assertEquals(1_300, ok(f.hold()).amount());
  }

  // ---- deletion

  @Test
  void deletedOnceSuspendedForTheGrace() {
    SnapshotFixture f = fixture(700);
    f.ready(GIB);
    f.settleAt(350);
    f.awaitState(Snapshot.State.Suspended.class);
    f.clock.set(START.plusSeconds(350).plus(Duration.ofDays(7)));
    f.kit.restart(); // the grace ran out while down: the deadline fires at once
    Snapshot.State.Deleted d =
        f.awaitAssert(
            () -> {
              Snapshot.State.Deleted s = (Snapshot.State.Deleted) f.kit.getState();
              assertEquals(true, s.closed());
              return s;
            });
    assertEquals(600, d.meter().settledThrough(), "the last covered second");
    Snapshot.Deleted deleted = f.events(Snapshot.Deleted.class).get(0);
    assertFalse(deleted.byRenter());
    assertEquals(600, deleted.cumulativeCost());
    Account.Summary s = f.summary();
    assertEquals(600, s.captured());
    assertEquals(0, s.held());
    assertEquals(100, s.balance());
    assertFalse(ok(f.hold()).open());
    assertEquals(Status.DELETED, f.get().status());
    assertEquals(600, f.get().cost());
  }

  @Test
  void renterDeleteCapturesTheLastSecondAndReleasesTheHold() {
    SnapshotFixture f = fixture(10_000);
    f.ready(GIB);
    f.settleAt(100);
    f.clock.set(START.plusSeconds(123));
    assertRejected(Rejection.NOT_FOUND, f.ask(r -> new Snapshot.Delete("renter-other", r)));
    View v = ok(f.ask(r -> new Snapshot.Delete(f.renterId, r)));
    assertEquals(Status.DELETED, v.status());
    assertEquals(123, v.cost());
    assertEquals(123, v.billedSeconds());
    f.awaitState(Snapshot.State.Deleted.class);
    f.awaitAssert(() -> assertEquals(1, f.events(Snapshot.Closed.class).size()));
    Account.Summary s = f.summary();
    assertEquals(123, s.captured());
    assertEquals(0, s.held());
    assertEquals(10_000 - 123, s.balance());
    f.clock.advance(Duration.ofHours(1));
    assertEquals(
        v, ok(f.ask(r -> new Snapshot.Delete(f.renterId, r))), "deleting again answers it");
    assertEquals(123, f.get().cost(), "no meter after deletion");
  }

  @Test
  void deletingWhileUploadingStopsTheUploadAndChargesNothing() {
    SnapshotFixture f = fixture(10_000);
    f.create();
    f.host.expectMessageClass(Host.UploadSnapshot.class, WAIT);
    View v = ok(f.ask(r -> new Snapshot.Delete(f.renterId, r)));
    assertEquals(Status.DELETED, v.status());
    f.tell(Snapshot.Timer.REMIND);
    f.host.expectNoMessage(Duration.ofMillis(200));
    assertRejected(Rejection.NOT_FOUND, f.manifest(GIB, 0));
    assertEquals(0, f.summary().captured());
    assertEquals(0, f.accountEvents(Account.HoldPlaced.class).size());
  }

  @Test
  void wakeChangesNothing() {
    SnapshotFixture f = fixture(10_000);
    View ready = f.ready(GIB);
    f.tell(Snapshot.Wake.INSTANCE);
    assertEquals(ready, f.get());
    SnapshotFixture g = fixture(0);
    g.tell(Snapshot.Wake.INSTANCE);
    assertEquals(0, g.events().size());
  }

  @Test
  void aPlacementWhoseAnswerWasLostIsGrownWhenResuming() {
    SnapshotFixture f = fixture(0);
    f.ready(GIB); // suspended at once: nothing to hold with
    f.deposit("pay-1", 5_000);
    // as if an earlier placement of this hold had landed and its answer been lost
    ok(f.<Account.HoldView>askAccount(r -> new Account.PlaceHold(f.snapshotId, 50, r)));
    f.settleAt(100); // placing 700 conflicts with the 50 there: it is grown instead
    f.awaitState(Snapshot.State.Ready.class);
    assertEquals(700, ok(f.hold()).amount());
    f.awaitAssert(() -> assertEquals(100, f.summary().captured()));
    assertEquals(700 - 100, f.summary().held());
  }

  @Test
  void deletionReleasesAHoldItNeverHeardPlaced() {
    SnapshotFixture f = fixture(0);
    f.ready(GIB);
    f.deposit("pay-1", 5_000);
    ok(f.<Account.HoldView>askAccount(r -> new Account.PlaceHold(f.snapshotId, 50, r)));
    ok(f.ask(r -> new Snapshot.Delete(f.renterId, r)));
    f.awaitAssert(() -> assertEquals(1, f.events(Snapshot.Closed.class).size()));
    assertFalse(ok(f.hold()).open());
    assertEquals(0, f.summary().held());
    assertEquals(5_000, f.summary().balance());
  }

  @Test
  void deletionWithNoHoldAtAllCloses() {
    SnapshotFixture f = fixture(0);
    f.ready(GIB);
    ok(f.ask(r -> new Snapshot.Delete(f.renterId, r)));
    f.awaitAssert(() -> assertEquals(1, f.events(Snapshot.Closed.class).size()));
    assertEquals(0, f.summary().captured());
  }

  @Test
  void deletingWhileUploadingReleasesAHoldAnEarlierIncarnationPlaced() {
    SnapshotFixture f = uploadingWithManifestAndFunds();
    // The agent's complete made an earlier incarnation ask the hold; the account placed it, and the
    // answer was lost with that incarnation (its node went down): this one is still uploading.
    ok(f.<Account.HoldView>askAccount(r -> new Account.PlaceHold(f.snapshotId, 50, r)));
    assertEquals(Status.DELETED, ok(f.ask(r -> new Snapshot.Delete(f.renterId, r))).status());
    f.awaitAssert(() -> assertEquals(1, f.events(Snapshot.Closed.class).size()));
    assertFalse(ok(f.hold()).open());
    assertEquals(0, f.summary().held());
    assertEquals(5_000, f.summary().balance());
  }

  /**
   * Seed 7 of the whole-market simulation (with snapshots and clock steps back) left a renter's
   * money held at rest: the account placed a snapshot's hold, its answer was lost, the agent then
   * reported the workspace gone, and neither the failure nor the later delete released it.
   */
  @Test
  void anUploadThatFailsAfterItsHoldWasPlacedReleasesTheHold() {
    SnapshotFixture f = uploadingWithManifestAndFunds();
    // The agent's complete made the snapshot ask the hold; the account placed it, its answer lost.
    ok(f.<Account.HoldView>askAccount(r -> new Account.PlaceHold(f.snapshotId, 50, r)));
    assertEquals(
        Status.FAILED, ok(f.ask(r -> new Snapshot.Fail(f.hostId, "workspace_gone", r))).status());
    f.awaitAssert(() -> assertFalse(ok(f.hold()).open()));
    assertEquals(0, f.summary().held());
    assertEquals(5_000, f.summary().balance());

    assertEquals(Status.DELETED, ok(f.ask(r -> new Snapshot.Delete(f.renterId, r))).status());
    f.awaitAssert(() -> assertEquals(1, f.events(Snapshot.Closed.class).size()));
    assertEquals(5_000, f.summary().balance());
  }

  @Test
  void aFailedUploadWhoseHoldIsPlacedLateDoesNotKeepIt() {
    SnapshotFixture f = uploadingWithManifestAndFunds();
    assertEquals(
        Status.FAILED, ok(f.ask(r -> new Snapshot.Fail(f.hostId, "workspace_gone", r))).status());
    f.awaitAssert(
        () -> assertEquals(1, f.accountEvents(Account.UnplacedHoldReleased.class).size()));
    // A placement asked before the failure (by an earlier incarnation) lands now: refused.
    assertRejected(
        Rejection.HOLD_CLOSED,
        f.<Account.HoldView>askAccount(r -> new Account.PlaceHold(f.snapshotId, 50, r)));
    assertEquals(0, f.summary().held());
  }

  /** Uploading, its manifest recorded (so a complete may ask for the hold), the renter funded. */
  private SnapshotFixture uploadingWithManifestAndFunds() {
    SnapshotFixture f = fixture(0);
    f.create();
    f.host.expectMessageClass(Host.UploadSnapshot.class, WAIT);
    ok(f.manifest(GIB, 0));
    f.deposit("pay-1", 5_000);
    return f;
  }
}
