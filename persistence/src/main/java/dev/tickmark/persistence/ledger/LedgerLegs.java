package dev.tickmark.persistence.ledger;

import dev.tickmark.engine.account.Account;
import java.time.Instant;
import java.util.List;

/**
 * How each account event becomes ledger rows. Amounts are signed as the account sees them: a
 * deposit adds to the balance, a hold takes from what is available, a capture takes from the
 * balance, an earning adds to the provider side, a payout takes from it, and a payout the bank
 * returned gives it back; a refund gives the renter's balance back what a rental charged and takes
 * its shares back from the provider's earnings and the platform's fee. The platform's share is
 * booked on the {@value #PLATFORM_ACCOUNT} account by the provider's own event, so no single actor
 * collects it. Storage is all platform revenue: the renter's own event books its {@code capture}
 * and the platform's {@value #STORAGE} leg under the same key, so a source's two sides still match.
 */
public final class LedgerLegs {
  public static final String PLATFORM_ACCOUNT = "platform";

  public static final String DEPOSIT = "deposit";
  public static final String HOLD = "hold";
  public static final String HOLD_RELEASED = "hold_released";
  public static final String CAPTURE = "capture";
  public static final String EARNING = "earning";
  public static final String PLATFORM_FEE = "platform_fee";
  public static final String STORAGE = "storage";
  public static final String PAYOUT = "payout";
  public static final String PAYOUT_RETURNED = "payout_returned";
  public static final String REFUND = "refund";
  public static final String EARNING_REVERSED = "earning_reversed";
  public static final String PLATFORM_FEE_REVERSED = "platform_fee_reversed";

  /**
   * The kinds whose sum is a provider's earnings still owed: credits, less payouts, plus returns,
   * less what refunds took back.
   */
  public static final String EARNINGS_KINDS =
      "('earning', 'payout', 'payout_returned', 'earning_reversed')";

  public record Leg(
      String accountId, String kind, long amount, String key, String rentalId, Instant at) {}

  private LedgerLegs() {}

  public static List<Leg> of(String accountId, Account.Event event) {
    if (event instanceof Account.Deposited e) {
      return List.of(
          new Leg(accountId, DEPOSIT, e.amount(), "deposit:" + e.reference(), null, e.at()));
    } else if (event instanceof Account.HoldPlaced e) {
      return List.of(
          new Leg(accountId, HOLD, -e.amount(), "hold:" + e.holdId(), e.holdId(), e.at()));
    } else if (event instanceof Account.HoldExtended e) {
      return List.of(
          new Leg(
              accountId,
              HOLD,
              -e.added(),
              "hold:" + e.holdId() + ":" + e.newAmount(),
              e.holdId(),
              e.at()));
    } else if (event instanceof Account.Captured e) {
      return List.of(
          new Leg(
              accountId,
              CAPTURE,
              -e.amount(),
              e.holdId() + ":" + e.throughSecond(),
              e.holdId(),
              e.at()));
    } else if (event instanceof Account.StorageCaptured e) {
      String key = e.holdId() + ":" + e.throughSecond();
      if (e.amount() == 0) return List.of(); // a repeat of a second already captured: nothing moved
      return List.of(
          new Leg(accountId, CAPTURE, -e.amount(), key, e.holdId(), e.at()),
          new Leg(PLATFORM_ACCOUNT, STORAGE, e.amount(), key, e.holdId(), e.at()));
    } else if (event instanceof Account.HoldReleased e) {
      return List.of(
          new Leg(
              accountId, HOLD_RELEASED, e.released(), "release:" + e.holdId(), e.holdId(), e.at()));
    } else if (event instanceof Account.HoldExpired e) {
      // A pending hold its rental never confirmed: the money goes back as a release does.
      return List.of(
          new Leg(
              accountId, HOLD_RELEASED, e.released(), "expire:" + e.holdId(), e.holdId(), e.at()));
    } else if (event instanceof Account.EarningsCredited e) {
      // A source that ends on a second it already settled is closed by a credit of nothing under
      // that second's key:
      // no money moves, and a second row under the same key would read as the key applied twice.
      if (e.providerAmount() == 0 && e.platformAmount() == 0) return List.of();
      String key = e.sourceId() + ":" + e.throughSecond();
      return List.of(
          new Leg(accountId, EARNING, e.providerAmount(), key, e.sourceId(), e.at()),
          new Leg(PLATFORM_ACCOUNT, PLATFORM_FEE, e.platformAmount(), key, e.sourceId(), e.at()));
    } else if (event instanceof Account.PaidOut e) {
      return List.of(
          new Leg(accountId, PAYOUT, -e.amount(), "payout:" + e.payoutId(), null, e.at()));
    } else if (event instanceof Account.PayoutReturned e) {
      return List.of(
          new Leg(
              accountId,
              PAYOUT_RETURNED,
              e.amount(),
              "payout_returned:" + e.payoutId(),
              null,
              e.at()));
    } else if (event instanceof Account.ChargeRefunded e) {
      return List.of(
          new Leg(
              accountId,
              REFUND,
              e.amount(),
              "refund:" + e.rentalId() + ":" + e.cumulativeAmount(),
              e.rentalId(),
              e.at()));
    } else if (event instanceof Account.EarningsReversed e) {
      // The provider's own event books the platform's side too, as its credits do.
      String key =
          "reversal:" + e.rentalId() + ":" + (e.cumulativeProvider() + e.cumulativePlatform());
      return List.of(
          new Leg(accountId, EARNING_REVERSED, -e.providerAmount(), key, e.rentalId(), e.at()),
          new Leg(
              PLATFORM_ACCOUNT,
              PLATFORM_FEE_REVERSED,
              -e.platformAmount(),
              key,
              e.rentalId(),
              e.at()));
    }
    return List.of(); // Opened, SpendCapSet: no money moves
  }
}
