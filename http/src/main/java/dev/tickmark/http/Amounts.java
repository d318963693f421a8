package dev.tickmark.http;

import dev.tickmark.engine.money.Money;

/** Wire amounts: strict parsing with the field name in the problem. */
final class Amounts {
  private Amounts() {}

  static long parse(String field, String text) {
    if (text == null) throw Problem.badRequest("invalid_amount", "\"" + field + "\" is required");
    try {
      return Money.parse(text);
    } catch (Money.InvalidAmount e) {
      throw Problem.badRequest("invalid_amount", "\"" + field + "\": " + e.getMessage());
    }
  }

  static long parsePositive(String field, String text) {
    long amount = parse(field, text);
    if (amount == 0)
      throw Problem.badRequest("invalid_amount", "\"" + field + "\" must be more than zero");
    return amount;
  }
}
