package dev.tickmark.persistence.ledger;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.tickmark.engine.account.Account;
import java.time.Instant;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * Each account event becomes the ledger rows the audit sums, with the signs the statement shows.
 */
class LedgerLegsTest {
  static final Instant AT = Instant.parse("2026-11-29T12:00:00Z");

  @Test
  void depositsHoldsCapturesReleasesAndPayoutsAreSignedAsTheAccountSeesThem() {
    assertEquals(
        List.of(new LedgerLegs.Leg("a", "deposit", 500, "deposit:payment:p1", null, AT)),
        LedgerLegs.of("a", new Account.Deposited("payment:p1", 500, AT)));
    assertEquals(
        List.of(new LedgerLegs.Leg("a", "hold", -300, "hold:r1", "r1", AT)),
        LedgerLegs.of("a", new Account.HoldPlaced("r1", 300, AT)));
    assertEquals(
        List.of(new LedgerLegs.Leg("a", "hold", -100, "hold:r1:400", "r1", AT)),
        LedgerLegs.of("a", new Account.HoldExtended("r1", 400, 100, AT)));
    assertEquals(
        List.of(new LedgerLegs.Leg("a", "capture", -42, "r1:10", "r1", AT)),
        LedgerLegs.of("a", new Account.Captured("r1", 10, 42, 42, AT)));
    assertEquals(
        List.of(new LedgerLegs.Leg("a", "hold_released", 358, "release:r1", "r1", AT)),
        LedgerLegs.of("a", new Account.HoldReleased("r1", 358, AT)));
    assertEquals(
        List.of(new LedgerLegs.Leg("a", "payout", -20, "payout:po1", null, AT)),
        LedgerLegs.of("a", new Account.PaidOut("po1", 20, AT)));
    assertEquals(
        List.of(new LedgerLegs.Leg("a", "payout_returned", 20, "payout_returned:po1", null, AT)),
        LedgerLegs.of("a", new Account.PayoutReturned("po1", 20, "AC04", null, AT)));
  }

  @Test
  void aRefundBooksTheRenterAndItsReversalTheProviderAndThePlatformUnderCumulativeKeys() {
    assertEquals(
        List.of(new LedgerLegs.Leg("r", "refund", 30, "refund:rnt_1:50", "rnt_1", AT)),
        LedgerLegs.of("r", new Account.ChargeRefunded("rnt_1", 50, 30, AT)));
    assertEquals(
        List.of(
            new LedgerLegs.Leg("p", "earning_reversed", -25, "reversal:rnt_1:50", "rnt_1", AT),
            new LedgerLegs.Leg(
                "platform", "platform_fee_reversed", -5, "reversal:rnt_1:50", "rnt_1", AT)),
        LedgerLegs.of("p", new Account.EarningsReversed("rnt_1", 42, 8, 25, 5, AT)));
  }

  @Test
  void anEarningsCreditBooksTheProviderAndThePlatformUnderTheSettlementKey() {
    List<LedgerLegs.Leg> legs =
        LedgerLegs.of("prov", new Account.EarningsCredited("r1", 10, 35, 7, 35, 7, false, AT));
    assertEquals(
        List.of(
            new LedgerLegs.Leg("prov", "earning", 35, "r1:10", "r1", AT),
            new LedgerLegs.Leg(LedgerLegs.PLATFORM_ACCOUNT, "platform_fee", 7, "r1:10", "r1", AT)),
        legs);
  }

  @Test
  void aStorageCaptureBooksTheRenterAndThePlatformsStorageUnderTheSnapshotKey() {
    assertEquals(
        List.of(
            new LedgerLegs.Leg("a", "capture", -42, "snap_1:3600", "snap_1", AT),
            new LedgerLegs.Leg(
                LedgerLegs.PLATFORM_ACCOUNT, "storage", 42, "snap_1:3600", "snap_1", AT)),
        LedgerLegs.of("a", new Account.StorageCaptured("snap_1", 3600, 100, 42, AT)));
    // a settlement that added no cost (a tiny snapshot's hour) moves nothing
    assertEquals(
        List.of(), LedgerLegs.of("a", new Account.StorageCaptured("snap_1", 7200, 100, 0, AT)));
  }

  @Test
  void eventsThatMoveNoMoneyWriteNoRows() {
    assertEquals(List.of(), LedgerLegs.of("a", new Account.Opened("Ada", AT)));
    assertEquals(List.of(), LedgerLegs.of("a", new Account.SpendCapSet(100L, AT)));
    assertEquals(List.of(), LedgerLegs.of("a", new Account.ClosedForgotten("r1", AT)));
    assertEquals(List.of(), LedgerLegs.of("a", new Account.UnplacedHoldReleased("r1", AT)));
    // The source closed on the second it had already been credited for: same key, nothing moved, no
    // second row.
    assertEquals(
        List.of(),
        LedgerLegs.of("prov", new Account.EarningsCredited("r1", 10, 35, 7, 0, 0, true, AT)));
  }
}
