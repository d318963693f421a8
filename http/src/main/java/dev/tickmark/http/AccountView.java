package dev.tickmark.http;

import dev.tickmark.engine.account.Account;
import dev.tickmark.engine.account.Iban;
import dev.tickmark.engine.account.PayoutReturns;
import dev.tickmark.engine.money.Money;

/**
 * {@code GET /v1/account}: amounts as strings with exactly six decimals; {@code status} is {@code
 * active} or {@code suspended}; payout details show the IBAN's last four characters only; {@code
 * payout_returned}: the bank sent the last payout to the details in force back, and payouts wait
 * until they are given again (null otherwise).
 */
public record AccountView(
    String id,
    String name,
    String currency,
    String balance,
    String held,
    String available,
    String earnings,
    String spendCapMonthly,
    String spentThisMonth,
    String status,
    PayoutDetailsView payoutDetails,
    PendingPayoutDetailsView pendingPayoutDetails,
    PayoutReturnedView payoutReturned) {

  /**
   * A payout the bank returned: {@code reason} its ISO 20022 code, {@code reason_text} in words.
   */
  public record PayoutReturnedView(
      String payoutId, String amount, String reason, String reasonText, java.time.Instant at) {
    static PayoutReturnedView of(Account.ReturnedPayout r) {
      return r == null
          ? null
          : new PayoutReturnedView(
              r.payoutId(),
              Money.format(r.amount()),
              r.reason(),
              PayoutReturns.meaning(r.reason()),
              r.at());
    }
  }

  /** Details that replace {@code payout_details} for payouts from {@code effective_at}. */
  public record PendingPayoutDetailsView(
      String holderName, String iban, String bic, java.time.Instant effectiveAt) {
    static PendingPayoutDetailsView of(Account.PendingPayoutDetails p) {
      return p == null
          ? null
          : new PendingPayoutDetailsView(
              p.details().holderName(),
              Iban.masked(p.details().iban()),
              p.details().bic(),
              p.effectiveAt());
    }
  }

  public record PayoutDetailsView(String holderName, String iban, String bic) {
    static PayoutDetailsView of(Account.PayoutDetails d) {
      return d == null
          ? null
          : new PayoutDetailsView(d.holderName(), Iban.masked(d.iban()), d.bic());
    }
  }

  static String status(Account.Summary s) {
    return s.suspended() ? "suspended" : "active";
  }

  public static AccountView of(Account.Summary s) {
    return new AccountView(
        s.id(),
        s.name(),
        "EUR",
        Money.format(s.balance()),
        Money.format(s.held()),
        Money.format(s.available()),
        Money.format(s.earnings()),
        s.spendCapMonthly() == null ? null : Money.format(s.spendCapMonthly()),
        Money.format(s.spentThisMonth()),
        status(s),
        PayoutDetailsView.of(s.payoutDetails()),
        PendingPayoutDetailsView.of(s.pendingPayoutDetails()),
        PayoutReturnedView.of(s.payoutReturned()));
  }
}
