package dev.tickmark.engine.rental;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.tickmark.engine.host.Listing;
import dev.tickmark.engine.money.Metering;
import dev.tickmark.engine.rental.Rental.Checkpoint;
import dev.tickmark.engine.rental.Rental.EndReason;
import dev.tickmark.engine.rental.Rental.Order;
import dev.tickmark.engine.rental.Rental.Running;
import dev.tickmark.engine.rental.Rental.Spec;
import dev.tickmark.engine.rental.Rental.Terms;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The billing rules alone, without an actor: every instant is given, every figure computed by hand.
 */
class RentalBillingTest {
  private static final Instant START = Instant.parse("2025-03-14T10:00:00Z");

  /** 1 µ€ per GPU-second. */
  private static final long ONE_PER_SECOND = 3_600;

  private final RentalBilling billing = new RentalBilling(300, 1_500, Duration.ofSeconds(10));

  private static Spec spec(int count, long maxPrice, Long maxTotal) {
    return new Spec(
        "h100-80gb",
        count,
        Listing.Tier.ON_DEMAND,
        "eu-nl",
        maxPrice,
        "img",
        List.of(),
        null,
        maxTotal,
        30,
        false);
  }

  private static Terms terms(int cards, long price) {
    return new Terms(
        "host-1",
        "provider-1",
        java.util.stream.IntStream.range(0, cards).boxed().toList(),
        price,
        false,
        START,
        "eu-nl");
  }

  private static Running running(
      Spec spec,
      long hold,
      Terms terms,
      List<Checkpoint> checkpoints,
      EndReason refused,
      Instant preemption) {
    return new Running(
        new Order("renter-1", spec, hold, START),
        terms,
        START,
        checkpoints,
        refused,
        preemption,
        null);
  }

  private static Running running(long hold, List<Checkpoint> checkpoints) {
    return running(
        spec(2, ONE_PER_SECOND, null), hold, terms(2, ONE_PER_SECOND), checkpoints, null, null);
  }

  private Checkpoint at(long second) {
    return billing.checkpoint(terms(2, ONE_PER_SECOND), second, START.plusSeconds(second));
  }

  @Test
  void theFirstHoldIsHoldSecondsAtTheCeilingCappedByMaxTotalAndAtLeastOneMicroEuro() {
    assertEquals(600, billing.initialHold(spec(2, ONE_PER_SECOND, null)), "300 s x 2 cards x 1 µ€");
    assertEquals(250, billing.initialHold(spec(2, ONE_PER_SECOND, 250L)));
    assertEquals(
        1,
        billing.initialHold(spec(1, 1, null)),
        "300 s at 1 µ€ per GPU-hour rounds down to 0: held 1");
  }

  @Test
  void aRunningRentalIsLimitedByItsCapAndOnceItsHoldCannotGrowByTheHold() {
    Terms terms = terms(2, ONE_PER_SECOND);
    Running unbounded = running(spec(2, ONE_PER_SECOND, null), 600, terms, List.of(), null, null);
    assertEquals(
        new RentalBilling.Limit(RentalBilling.BOUND_SECONDS, EndReason.RENTAL_CAP_REACHED),
        RentalBilling.limit(unbounded));

    Running capped = running(spec(2, ONE_PER_SECOND, 1_001L), 600, terms, List.of(), null, null);
    assertEquals(
        new RentalBilling.Limit(500, EndReason.RENTAL_CAP_REACHED),
        RentalBilling.limit(capped),
        "1,001 µ€ pays 500 s on 2 cards");

    Running exhausted =
        running(
            spec(2, ONE_PER_SECOND, 1_001L),
            600,
            terms,
            List.of(),
            EndReason.BALANCE_EXHAUSTED,
            null);
    assertEquals(
        new RentalBilling.Limit(300, EndReason.BALANCE_EXHAUSTED), RentalBilling.limit(exhausted));

    Running tie =
        running(
            spec(2, ONE_PER_SECOND, 600L),
            600,
            terms,
            List.of(),
            EndReason.SPEND_CAP_REACHED,
            null);
    assertEquals(
        new RentalBilling.Limit(300, EndReason.RENTAL_CAP_REACHED),
        RentalBilling.limit(tie),
        "the cap wins a tie");
  }

  @Test
  void heldSecondsAreWhatTheHoldPaysForAtTheAgreedPrice() {
    assertEquals(300, RentalBilling.heldSeconds(running(600, List.of())));
    assertEquals(
        300, RentalBilling.heldSeconds(running(601, List.of())), "a half second is not paid for");
  }

  @Test
  void aCheckpointIsCumulativeCostAndSplit() {
    Checkpoint c =
        new RentalBilling(300, 1_500, Duration.ofSeconds(10))
            .checkpoint(terms(2, 2_890_000), 23, START);
    long cost = Metering.cost(2_890_000, 2, 23);
    assertEquals(36_927, cost, "2.89 EUR/GPU-h x 2 x 23 s, floored");
    assertEquals(
        new Checkpoint(23, cost, cost * 8_500 / 10_000, cost - cost * 8_500 / 10_000, START), c);
    assertEquals(c.cost(), c.provider() + c.platform());
  }

  @Test
  void aSettlementIsDueASettleIntervalAfterTheLastCheckpoint() {
    assertEquals(false, billing.settlementDue(running(600, List.of()), 9));
    assertEquals(true, billing.settlementDue(running(600, List.of()), 10));
    assertEquals(false, billing.settlementDue(running(600, List.of(at(10))), 19));
    assertEquals(true, billing.settlementDue(running(600, List.of(at(10))), 20));
  }

  @Test
  void settlesUpToTheLastHeartbeatASettleIntervalApart() {
    Running r = running(10_000, List.of());
    assertEquals(
        17,
        billing.settleThrough(r, START.plusMillis(17_900), START.plusSeconds(25)),
        "whole seconds to the heartbeat");
    assertEquals(
        RentalBilling.NONE,
        billing.settleThrough(r, START.plusSeconds(7), START.plusSeconds(25)),
        "7 s: under an interval");
    assertEquals(
        25,
        billing.settleThrough(r, START.plusSeconds(40), START.plusSeconds(25)),
        "a heartbeat ahead of the clock: now");
    Running settled = running(10_000, List.of(at(17)));
    assertEquals(
        RentalBilling.NONE,
        billing.settleThrough(settled, START.plusSeconds(26), START.plusSeconds(30)));
    assertEquals(27, billing.settleThrough(settled, START.plusSeconds(27), START.plusSeconds(30)));
    assertEquals(
        RentalBilling.NONE,
        billing.settleThrough(settled, START.plusSeconds(12), START.plusSeconds(30)),
        "never backwards");
  }

  @Test
  void settlementStopsAtThePreemptionDeadlineAndAtWhatTheHoldCovers() {
    Running spot =
        running(
            spec(2, ONE_PER_SECOND, null),
            10_000,
            terms(2, ONE_PER_SECOND),
            List.of(),
            null,
            START.plusSeconds(14));
    assertEquals(14, billing.settleThrough(spot, START.plusSeconds(30), START.plusSeconds(30)));
    // Held for 300 s, a cap far away: 8 s past the last checkpoint at 292 s is less than an
    // interval, but all there is.
    Running nearlyUsed = running(600, List.of(at(292)));
    assertEquals(
        300, billing.settleThrough(nearlyUsed, START.plusSeconds(400), START.plusSeconds(400)));
    Running used = running(600, List.of(at(300)));
    assertEquals(
        RentalBilling.NONE,
        billing.settleThrough(used, START.plusSeconds(400), START.plusSeconds(400)));
  }

  @Test
  void anEndBillsToTheEndWithinTheHoldAndNeverLessThanWasSettled() {
    assertEquals(
        23, RentalBilling.billedAtEnd(running(10_000, List.of(at(10))), START.plusMillis(23_999)));
    assertEquals(
        300,
        RentalBilling.billedAtEnd(running(600, List.of(at(10))), START.plusSeconds(1_000)),
        "the hold pays 300 s");
    assertEquals(
        20,
        RentalBilling.billedAtEnd(running(10_000, List.of(at(20))), START.plusSeconds(12)),
        "totals never go down");
  }

  @Test
  void theHoldGrowsBySpentPlusAWindowWhenLessThanHalfAWindowIsLeft() {
    // A window is 300 s x 2 cards x 1 µ€ = 600 µ€.
    assertEquals(
        0,
        billing.extensionTarget(running(600, List.of(at(150)))),
        "300 of 600 left: half a window");
    assertEquals(902, billing.extensionTarget(running(600, List.of(at(151)))), "302 spent + 600");
    Running capped =
        running(
            spec(2, ONE_PER_SECOND, 700L),
            600,
            terms(2, ONE_PER_SECOND),
            List.of(at(151)),
            null,
            null);
    assertEquals(700, billing.extensionTarget(capped), "up to the rental's cap");
    Running atCap =
        running(
            spec(2, ONE_PER_SECOND, 600L),
            600,
            terms(2, ONE_PER_SECOND),
            List.of(at(151)),
            null,
            null);
    assertEquals(0, billing.extensionTarget(atCap), "the cap is already held");
  }

  // ---- the settle interval under load (issue 15, decision 3)

  /** 10 s, growing from 1,000 running rentals up to 60 s (the 300 s hold allows 75). */
  private final RentalBilling stretching =
      new RentalBilling(300, 1_500, Duration.ofSeconds(10), Duration.ofSeconds(60), 1_000);

  private Checkpoint atStretching(long second) {
    return stretching.checkpoint(terms(2, ONE_PER_SECOND), second, START.plusSeconds(second));
  }

  @Test
  void theSettleIntervalGrowsInProportionToTheRunningRentalsBeyondTheThresholdUpToItsMaximum() {
    assertEquals(10, RentalBilling.stretchedSeconds(10, 60, 5_000, 0));
    assertEquals(10, RentalBilling.stretchedSeconds(10, 60, 5_000, 5_000), "up to the threshold");
    assertEquals(10, RentalBilling.stretchedSeconds(10, 60, 5_000, 5_499), "10.99 s: floored");
    assertEquals(20, RentalBilling.stretchedSeconds(10, 60, 5_000, 10_000));
    assertEquals(50, RentalBilling.stretchedSeconds(10, 60, 5_000, 25_000));
    assertEquals(60, RentalBilling.stretchedSeconds(10, 60, 5_000, 30_001), "the maximum");
    assertEquals(60, RentalBilling.stretchedSeconds(10, 60, 5_000, Long.MAX_VALUE), "no overflow");
    assertEquals(10, RentalBilling.stretchedSeconds(10, 60, 0, 1_000_000), "0: never grows");
    assertEquals(10, RentalBilling.stretchedSeconds(10, 5, 5_000, 1_000_000), "max below base");
    // The node keeps settling about threshold / base = 500 times a second until the maximum.
    for (long k = 5_000; k <= 30_000; k += 2_500)
      assertEquals(
          500.0, (double) k / RentalBilling.stretchedSeconds(10, 60, 5_000, k), 50.0, "at " + k);
  }

  @Test
  void aStretchedIntervalStopsAtWhatTheHoldCoversAndNeverGoesBelowTheConfiguredOne() {
    // 2 cards at 1 µ€ per GPU-second, 600 µ€ held: the hold covers 300 s.
    assertEquals(10, stretching.intervalSeconds(running(600, List.of()), 500), "no load");
    assertEquals(30, stretching.intervalSeconds(running(600, List.of()), 3_000));
    assertEquals(60, stretching.intervalSeconds(running(600, List.of()), 1_000_000));
    assertEquals(
        20,
        stretching.intervalSeconds(running(600, List.of(atStretching(280))), 1_000_000),
        "20 s held ahead");
    assertEquals(
        10,
        stretching.intervalSeconds(running(600, List.of(atStretching(295))), 1_000_000),
        "5 s held ahead: the configured interval (the settlement itself stops at the hold)");
  }

  @Test
  void aStretchedIntervalStopsAtTheLimitAndThePreemptionDeadline() {
    Running capped =
        running(
            spec(2, ONE_PER_SECOND, 1_001L),
            2_000,
            terms(2, ONE_PER_SECOND),
            List.of(atStretching(470)),
            null,
            null);
    assertEquals(30, stretching.intervalSeconds(capped, 1_000_000), "the cap ends it at 500 s");
    Running spot =
        running(
            spec(2, ONE_PER_SECOND, null),
            10_000,
            terms(2, ONE_PER_SECOND),
            List.of(atStretching(70)),
            null,
            START.plusSeconds(100));
    assertEquals(30, stretching.intervalSeconds(spot, 1_000_000), "preempted at 100 s");
  }

  @Test
  void theMaximumStaysWithinAQuarterOfTheHoldWindow() {
    RentalBilling shortHold =
        new RentalBilling(120, 1_500, Duration.ofSeconds(10), Duration.ofSeconds(60), 1_000);
    assertEquals(30, shortHold.intervalSeconds(running(100_000, List.of()), 1_000_000));
    RentalBilling tinyHold =
        new RentalBilling(20, 1_500, Duration.ofSeconds(10), Duration.ofSeconds(60), 1_000);
    assertEquals(
        10,
        tinyHold.intervalSeconds(running(100_000, List.of()), 1_000_000),
        "never below the configured interval");
  }

  @Test
  void dueNextAndHowFarFollowTheStretchedInterval() {
    Running r = running(600, List.of());
    assertEquals(false, stretching.settlementDue(r, 29, 3_000));
    assertEquals(true, stretching.settlementDue(r, 30, 3_000));
    assertEquals(true, stretching.settlementDue(r, 10, 500), "no load: every 10 s");
    assertEquals(START.plusSeconds(30), stretching.nextSettlementAt(r, 3_000));
    assertEquals(START.plusSeconds(10), stretching.nextSettlementAt(r, 0));
    assertEquals(
        RentalBilling.NONE,
        stretching.settleThrough(r, START.plusSeconds(25), START.plusSeconds(40), 3_000),
        "25 s proven: under the stretched interval");
    assertEquals(
        31, stretching.settleThrough(r, START.plusSeconds(31), START.plusSeconds(40), 3_000));
    assertEquals(
        25,
        stretching.settleThrough(r, START.plusSeconds(25), START.plusSeconds(40), 0),
        "the same proof settles at no load");
  }

  @Test
  void underAnyLoadASettlementNeverPassesTheProofOrTheHoldAndNeverGoesBack() {
    long[] loads = {0, 999, 1_000, 2_500, 6_000, 1_000_000, Long.MAX_VALUE};
    for (long load : loads) {
      for (long settled : new long[] {0, 10, 150, 280, 295, 300}) {
        Running r = running(600, settled == 0 ? List.of() : List.of(atStretching(settled)));
        for (long proof = 0; proof <= 400; proof += 7) {
          long second =
              stretching.settleThrough(
                  r, START.plusSeconds(proof), START.plusSeconds(proof + 3), load);
          if (second == RentalBilling.NONE) continue;
          String where = "load " + load + ", settled " + settled + ", proof " + proof;
          assertEquals(true, second <= proof, where + ": never past the heartbeat");
          assertEquals(true, second <= 300, where + ": never past the hold");
          assertEquals(true, second > settled, where + ": never back");
          long interval = stretching.intervalSeconds(r, load);
          assertEquals(
              true,
              second - settled >= interval || second == 300,
              where + ": a full interval apart unless the hold stops it");
        }
      }
    }
  }
}
