package dev.tickmark.persistence.ledger;

import dev.tickmark.engine.account.Account;
import dev.tickmark.engine.account.Iban;
import dev.tickmark.engine.money.Money;
import java.time.Instant;
import java.util.Optional;

/**
 * The audit line of an account event that moves no money but decides where money goes or whether it
 * moves (table {@code account_audit}): payout details (masked, and from when they apply),
 * suspensions, spend caps. Pure: the ledger projection writes what it returns.
 */
public final class AccountAudit {
  private AccountAudit() {}

  public record Entry(String kind, String detail, Instant effectiveAt, Instant at) {}

  public static Optional<Entry> of(Account.Event event) {
    if (event instanceof Account.PayoutDetailsSet e) {
      Account.PayoutDetails d = e.details();
      String detail =
          d.holderName()
              + ", "
              + Iban.masked(d.iban())
              + (d.bic() == null ? "" : ", " + d.bic())
              + (e.effectiveAt() == null
                  ? ", in force at once"
                  : ", in force from " + e.effectiveAt() + " (the previous ones until then)");
      return Optional.of(new Entry("payout_details_set", detail, e.effectiveAt(), e.at()));
    }
    if (event instanceof Account.Suspended e)
      return Optional.of(
          new Entry("suspended", e.reason() == null ? "suspended" : e.reason(), null, e.at()));
    if (event instanceof Account.Resumed e)
      return Optional.of(new Entry("resumed", "resumed", null, e.at()));
    if (event instanceof Account.SpendCapSet e)
      return Optional.of(
          new Entry(
              "spend_cap_set",
              e.monthlyCap() == null
                  ? "no monthly spend cap"
                  : "monthly spend cap " + Money.format(e.monthlyCap()) + " EUR",
              null,
              e.at()));
    return Optional.empty();
  }
}
