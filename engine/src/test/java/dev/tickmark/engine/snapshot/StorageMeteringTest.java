package dev.tickmark.engine.snapshot;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.math.BigInteger;
import java.util.Arrays;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * Storage metering: worked values, then properties over seeded random cases (the project uses no
 * property-testing library; a failure prints its seed and inputs): exact floor, cumulative and
 * monotone, any split of the seconds adds up to the whole, and holds cover what they claim.
 */
class StorageMeteringTest {
  static final long GIB = 1L << 30;
  static final long MONTH = 2_592_000;
  static final long DEFAULT_PRICE = 100_000; // 0.10 EUR per GiB-month
  static final long SEED = 0x5EED_12L;
  static final int CASES = 20_000;

  @Test
  void aGibMonthCostsThePrice() {
    assertEquals(DEFAULT_PRICE, StorageMetering.cost(DEFAULT_PRICE, GIB, MONTH));
    assertEquals(10 * DEFAULT_PRICE, StorageMetering.cost(DEFAULT_PRICE, 10 * GIB, MONTH));
    assertEquals(DEFAULT_PRICE / 2, StorageMetering.cost(DEFAULT_PRICE, GIB / 2, MONTH));
  }

  @Test
  void costsAreFlooredPerCumulativeSecond() {
    // 10 GiB at 0.10: 1 EUR a month, 1,000,000 / 2,592,000 µ€ a second
    assertEquals(0, StorageMetering.cost(DEFAULT_PRICE, 10 * GIB, 1));
    assertEquals(0, StorageMetering.cost(DEFAULT_PRICE, 10 * GIB, 2));
    assertEquals(1, StorageMetering.cost(DEFAULT_PRICE, 10 * GIB, 3));
    assertEquals(1_388, StorageMetering.cost(DEFAULT_PRICE, 10 * GIB, 3_600));
    assertEquals(0, StorageMetering.cost(DEFAULT_PRICE, 0, 3_600));
    assertEquals(0, StorageMetering.cost(0, 10 * GIB, 3_600));
  }

  @Test
  void aHundredGibForTenYearsDoesNotOverflow() {
    long tenYears = 120 * MONTH; // P·b·s ≈ 3.5e24, far past 2^63
    assertEquals(
        DEFAULT_PRICE * 100 * 120, StorageMetering.cost(DEFAULT_PRICE, 100 * GIB, tenYears));
    assertEquals(
        1_000_000_000L * 100 * 120 * 100,
        StorageMetering.cost(1_000_000_000L, 100 * GIB, 100 * tenYears));
  }

  @Test
  void aCostBeyondALongThrowsAndNegativeInputsAreRefused() {
    assertThrows(
        ArithmeticException.class,
        () -> StorageMetering.cost(Long.MAX_VALUE, Long.MAX_VALUE, Long.MAX_VALUE));
    assertThrows(IllegalArgumentException.class, () -> StorageMetering.cost(-1, GIB, 1));
    assertThrows(IllegalArgumentException.class, () -> StorageMetering.cost(1, -1, 1));
    assertThrows(IllegalArgumentException.class, () -> StorageMetering.cost(1, GIB, -1));
    assertThrows(IllegalArgumentException.class, () -> StorageMetering.secondsCovered(1, 1, -1));
  }

  @Test
  void holdsCoverTheirSecondsAndNoMore() {
    // 1 GiB at 2.592 EUR: 1 µ€ a second
    assertEquals(600, StorageMetering.holdFor(MONTH, GIB, 600));
    assertEquals(600, StorageMetering.secondsCovered(MONTH, GIB, 600));
    assertEquals(1, StorageMetering.holdFor(DEFAULT_PRICE, 1, 600), "never an empty hold");
    assertEquals(Long.MAX_VALUE, StorageMetering.secondsCovered(0, GIB, 1), "free storage");
    assertEquals(Long.MAX_VALUE, StorageMetering.secondsCovered(DEFAULT_PRICE, 0, 1));
  }

  // ---- properties

  private static long price(SplittableRandom r) {
    return r.nextInt(4) == 0 ? r.nextLong(0, 100) : r.nextLong(0, 10_000_000_000L);
  }

  private static long bytes(SplittableRandom r) {
    return r.nextInt(4) == 0 ? r.nextLong(0, 10_000) : r.nextLong(0, 200 * GIB);
  }

  private static long seconds(SplittableRandom r) {
    return r.nextInt(4) == 0 ? r.nextLong(0, 10_000) : r.nextLong(0, 10 * 12 * MONTH);
  }

  @Test
  void costIsTheExactFloor() {
    SplittableRandom r = new SplittableRandom(SEED);
    BigInteger d = BigInteger.valueOf(GIB).multiply(BigInteger.valueOf(MONTH));
    for (int i = 0; i < CASES; i++) {
      long p = price(r), b = bytes(r), s = seconds(r);
      BigInteger product =
          BigInteger.valueOf(p).multiply(BigInteger.valueOf(b)).multiply(BigInteger.valueOf(s));
      BigInteger c = BigInteger.valueOf(StorageMetering.cost(p, b, s));
      String why = "seed " + SEED + " case " + i + ": P=" + p + " b=" + b + " s=" + s;
      // floor(x / d) = c  ⇔  c·d ≤ x < (c+1)·d
      assertTrue(c.multiply(d).compareTo(product) <= 0, why);
      assertTrue(c.add(BigInteger.ONE).multiply(d).compareTo(product) > 0, why);
    }
  }

  @Test
  void costIsMonotoneInSecondsAndBytes() {
    SplittableRandom r = new SplittableRandom(SEED + 1);
    for (int i = 0; i < CASES; i++) {
      long p = price(r), b = bytes(r), s = seconds(r);
      long c = StorageMetering.cost(p, b, s);
      String why = "case " + i + ": P=" + p + " b=" + b + " s=" + s;
      assertTrue(c <= StorageMetering.cost(p, b, s + 1 + r.nextLong(0, 3_600)), why);
      assertTrue(c <= StorageMetering.cost(p, b + 1 + r.nextLong(0, GIB), s), why);
    }
  }

  /**
   * Settling at any points and capturing the differences charges exactly the cost of the total: no
   * µ€ is lost or charged twice, whatever the settle interval, restarts or retries.
   */
  @Test
  void anySplitOfTheSecondsAddsUpToTheWhole() {
    SplittableRandom r = new SplittableRandom(SEED + 2);
    for (int i = 0; i < CASES / 10; i++) {
      long p = price(r), b = bytes(r), total = seconds(r);
      long[] points = new long[r.nextInt(1, 40)];
      for (int k = 0; k < points.length; k++) points[k] = r.nextLong(0, total + 1);
      Arrays.sort(points);
      long captured = 0;
      long previous = 0;
      for (long point : points) {
        long step = StorageMetering.cost(p, b, point) - StorageMetering.cost(p, b, previous);
        assertTrue(step >= 0);
        captured += step;
        previous = point;
      }
      captured += StorageMetering.cost(p, b, total) - StorageMetering.cost(p, b, previous);
      assertEquals(
          StorageMetering.cost(p, b, total),
          captured,
          "case " + i + ": P=" + p + " b=" + b + " s=" + total);
    }
  }

  @Test
  void aHoldCoversExactlyTheSecondsItClaims() {
    SplittableRandom r = new SplittableRandom(SEED + 3);
    for (int i = 0; i < CASES; i++) {
      long p = price(r) + 1, b = bytes(r) + 1, s = seconds(r);
      String why = "case " + i + ": P=" + p + " b=" + b + " s=" + s;
      long hold = StorageMetering.holdFor(p, b, s);
      long covered = StorageMetering.secondsCovered(p, b, hold);
      assertTrue(covered >= s, why);
      assertTrue(StorageMetering.cost(p, b, covered) <= hold, why);
      assertTrue(StorageMetering.cost(p, b, covered + 1) > hold, why + " (the most seconds)");
    }
  }
}
