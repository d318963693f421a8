package dev.tickmark.engine.money;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Random;
import org.junit.jupiter.api.Test;

class MoneyTest {

  @Test
  void parsesValidAmountsIntoMicroEuros() {
    Object[][] table = {
      {"20", 20_000_000L},
      {"2.89", 2_890_000L},
      {"0.000803", 803L},
      {"0", 0L},
      {"0.0", 0L},
      {"0.000001", 1L},
      {"12.5", 12_500_000L},
      {"12.50", 12_500_000L},
      {"999999.999999", 999_999_999_999L},
      {"1000000000000", Money.MAX_AMOUNT},
      {"1000000000000.000000", Money.MAX_AMOUNT},
      {"999999999999.999999", Money.MAX_AMOUNT - 1},
    };
    for (Object[] row : table) {
      assertEquals((long) row[1], Money.parse((String) row[0]), () -> "parse(\"" + row[0] + "\")");
    }
  }

  @Test
  void rejectsEveryMalformedOrOutOfRangeAmount() {
    String[] invalid = {
      "",
      "-1",
      "-0.5",
      "+1",
      "1.",
      ".5",
      ".",
      "1.0000001",
      "0.0000001",
      "1e3",
      "1E3",
      " 1",
      "1 ",
      "abc",
      "1,5",
      "1.2.3",
      "0x10",
      "1_000",
      "NaN",
      "Infinity",
      "\uff11", // a full-width digit one
      "99999999999999999999",
      "1000000000001",
      "1000000000000.000001",
      "9223372036854.775807",
      "0".repeat(33),
    };
    for (String text : invalid) {
      Money.InvalidAmount e =
          assertThrows(
              Money.InvalidAmount.class,
              () -> Money.parse(text),
              () -> "parse(\"" + text + "\") must fail");
      assertTrue(e instanceof IllegalArgumentException);
    }
    assertThrows(Money.InvalidAmount.class, () -> Money.parse(null));
  }

  @Test
  void formatsWithExactlySixDecimals() {
    Object[][] table = {
      {20_000_000L, "20.000000"},
      {2_890_000L, "2.890000"},
      {803L, "0.000803"},
      {0L, "0.000000"},
      {1L, "0.000001"},
      {Money.MAX_AMOUNT, "1000000000000.000000"},
      {-1L, "-0.000001"},
      {-2_890_000L, "-2.890000"},
      {Long.MAX_VALUE, "9223372036854.775807"},
      {Long.MIN_VALUE, "-9223372036854.775808"},
    };
    for (Object[] row : table) {
      assertEquals(row[1], Money.format((long) row[0]), () -> "format(" + row[0] + ")");
    }
  }

  @Test
  void formatThenParseIsIdentityForEveryAmountInRange() {
    long seed = 0x5EED_0001L;
    Random random = new Random(seed);
    for (int i = 0; i < 20_000; i++) {
      long amount = (random.nextLong() & Long.MAX_VALUE) >>> random.nextInt(64);
      if (amount > Money.MAX_AMOUNT) amount %= Money.MAX_AMOUNT + 1;
      String text = Money.format(amount);
      final long expected = amount;
      assertEquals(expected, Money.parse(text), () -> "seed " + seed + ": " + text);
      // The wire also accepts the short form: strip trailing zeros (and the dot if nothing is
      // left).
      String shortForm = text.replaceAll("0+$", "").replaceAll("\\.$", "");
      assertEquals(expected, Money.parse(shortForm), () -> "seed " + seed + ": " + shortForm);
    }
  }
}
