package dev.tickmark.http;

import dev.tickmark.engine.account.Account;
import dev.tickmark.engine.money.Money;

/** {@code GET /v1/account}: amounts as strings with exactly six decimals. */
public record AccountView(
    String id,
    String name,
    String currency,
    String balance,
    String held,
    String available,
    String earnings,
    String spendCapMonthly,
    String spentThisMonth) {

  public static AccountView of(Account.Summary s) {
    return new AccountView(s.id(), s.name(), "EUR", Money.format(s.balance()), Money.format(s.held()),
        Money.format(s.available()), Money.format(s.earnings()),
        s.spendCapMonthly() == null ? null : Money.format(s.spendCapMonthly()), Money.format(s.spentThisMonth()));
  }
}
