package dev.tickmark.engine.money;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.math.BigInteger;
import java.util.Random;
import java.util.function.Supplier;
import org.junit.jupiter.api.Test;

class MeteringTest {
  private static final BigInteger LONG_MAX = BigInteger.valueOf(Long.MAX_VALUE);
  private static final BigInteger HOUR = BigInteger.valueOf(3_600);
  private static final BigInteger BPS = BigInteger.valueOf(10_000);

  /** floor(a·b/d) in exact arithmetic, or null where it does not fit a long. */
  private static Long reference(long a, long b, long d) {
    BigInteger q =
        BigInteger.valueOf(a).multiply(BigInteger.valueOf(b)).divide(BigInteger.valueOf(d));
    return q.compareTo(LONG_MAX) > 0 ? null : q.longValueExact();
  }

  private static Long referenceCost(long price, int cards, long seconds) {
    BigInteger q =
        BigInteger.valueOf(price)
            .multiply(BigInteger.valueOf(cards))
            .multiply(BigInteger.valueOf(seconds))
            .divide(HOUR);
    return q.compareTo(LONG_MAX) > 0 ? null : q.longValueExact();
  }

  /** A non-negative long whose magnitude is spread evenly over all bit lengths. */
  private static long anyMagnitude(Random random) {
    return (random.nextLong() & Long.MAX_VALUE) >>> random.nextInt(64);
  }

  @Test
  void costMatchesTheDesignFormulaOnKnownValues() {
    // 2.89 EUR per GPU-hour: 802.77... micro-euros per second.
    assertEquals(802, Metering.cost(2_890_000, 1, 1));
    assertEquals(1_605, Metering.cost(2_890_000, 1, 2));
    assertEquals(2_890_000, Metering.cost(2_890_000, 1, 3_600));
    assertEquals(23_120_000, Metering.cost(2_890_000, 8, 3_600));
    assertEquals(0, Metering.cost(2_890_000, 1, 0));
    assertEquals(0, Metering.cost(0, 8, 86_400));
    assertEquals(0, Metering.cost(3_599, 1, 1));
    assertEquals(1, Metering.cost(3_600, 1, 1));
    assertEquals(803, Metering.chargeForSecond(2_890_000, 1, 2));
  }

  @Test
  void costEqualsBigIntegerReferenceForRandomInputsIncludingNearOverflow() {
    long seed = 0xC057L;
    Random random = new Random(seed);
    int overflows = 0;
    int wideProducts = 0;
    for (int i = 0; i < 100_000; i++) {
      long price = anyMagnitude(random);
      int cards = random.nextInt(4) == 0 ? random.nextInt(Integer.MAX_VALUE) : random.nextInt(65);
      long seconds = anyMagnitude(random);
      BigInteger perSecond = BigInteger.valueOf(price).multiply(BigInteger.valueOf(cards));
      String context =
          "seed "
              + seed
              + " iteration "
              + i
              + ": cost("
              + price
              + ", "
              + cards
              + ", "
              + seconds
              + ")";
      if (perSecond.compareTo(LONG_MAX) > 0) {
        // p·c itself does not fit: multiplyExact refuses it.
        assertThrows(
            ArithmeticException.class, () -> Metering.cost(price, cards, seconds), context);
        overflows++;
        continue;
      }
      if (perSecond.multiply(BigInteger.valueOf(seconds)).compareTo(LONG_MAX) > 0) wideProducts++;
      Long expected = referenceCost(price, cards, seconds);
      if (expected == null) {
        assertThrows(
            ArithmeticException.class, () -> Metering.cost(price, cards, seconds), context);
        overflows++;
      } else {
        assertEquals(expected.longValue(), Metering.cost(price, cards, seconds), context);
      }
    }
    assertTrue(overflows > 500, "the generator must reach the overflow path, got " + overflows);
    assertTrue(
        wideProducts > 5_000, "the generator must reach the 128-bit path, got " + wideProducts);
  }

  @Test
  void costAtTheEdgeOfTheLongRange() {
    // The largest seconds for which cost still fits, for a price whose product needs 128 bits.
    long price = 1_000_000_000_000_000L; // a wildly high 1e12 EUR per GPU-hour
    int cards = 9;
    long perSecond = price * cards; // 9e18 < Long.MAX_VALUE
    BigInteger maxSeconds =
        LONG_MAX
            .add(BigInteger.ONE)
            .multiply(HOUR)
            .subtract(BigInteger.ONE)
            .divide(BigInteger.valueOf(perSecond));
    long fits = maxSeconds.longValueExact();
    assertEquals(referenceCost(price, cards, fits).longValue(), Metering.cost(price, cards, fits));
    assertThrows(ArithmeticException.class, () -> Metering.cost(price, cards, fits + 1));
    assertThrows(ArithmeticException.class, () -> Metering.cost(Long.MAX_VALUE, 2, 1));
    assertThrows(ArithmeticException.class, () -> Metering.cost(Long.MAX_VALUE, 1, Long.MAX_VALUE));
    assertEquals(Long.MAX_VALUE / 3_600, Metering.cost(Long.MAX_VALUE, 1, 1));
    assertEquals(Long.MAX_VALUE, Metering.cost(Long.MAX_VALUE, 1, 3_600));
    assertThrows(ArithmeticException.class, () -> Metering.cost(Long.MAX_VALUE, 1, 3_601));
  }

  @Test
  void floorMulDivMatchesBigIntegerBeyondTheLongRange() {
    long seed = 0x128B175L;
    Random random = new Random(seed);
    int wide = 0;
    for (int i = 0; i < 200_000; i++) {
      long a = anyMagnitude(random);
      long b = anyMagnitude(random);
      long d =
          Math.max(1, random.nextInt(3) == 0 ? anyMagnitude(random) : random.nextInt(20_000) + 1);
      if (Math.multiplyHigh(a, b) != 0 || a * b < 0) wide++;
      Long expected = reference(a, b, d);
      Supplier<String> context =
          () -> "seed " + seed + ": floorMulDiv(" + a + ", " + b + ", " + d + ")";
      if (expected == null) {
        assertThrows(ArithmeticException.class, () -> Metering.floorMulDiv(a, b, d), context);
      } else {
        assertEquals(expected.longValue(), Metering.floorMulDiv(a, b, d), context);
      }
    }
    assertTrue(wide > 30_000, "the generator must reach 128-bit products, got " + wide);
  }

  @Test
  void floorMulDivOnHandPickedBoundaries() {
    long max = Long.MAX_VALUE;
    long[][] cases = {
      {max, max, max}, // exactly max
      {max, max, max - 1}, // just above max
      {max, 2, 2}, // product 2^64 - 2, result max
      {max, 2, 1}, // result 2^64 - 2: overflow
      {1L << 62, 4, 2}, // 2^64 / 2 = 2^63: overflow by one
      {1L << 62, 4, 3}, // floor(2^64 / 3)
      {(1L << 62) + 1, 2, 1}, // low word with the sign bit set, high word zero
      {max, max, 3_600},
      {max, 10_000, 10_000},
      {max, 8_500, 10_000},
      {max, 1, 1},
      {0, max, 7},
      {max, 0, 7},
      {3, 5, 15},
      {3, 5, 16},
    };
    for (long[] c : cases) {
      Long expected = reference(c[0], c[1], c[2]);
      String context = "floorMulDiv(" + c[0] + ", " + c[1] + ", " + c[2] + ")";
      if (expected == null) {
        assertThrows(
            ArithmeticException.class, () -> Metering.floorMulDiv(c[0], c[1], c[2]), context);
      } else {
        assertEquals(expected.longValue(), Metering.floorMulDiv(c[0], c[1], c[2]), context);
      }
    }
  }

  @Test
  void perSecondChargesSumToTheCumulativeCost() {
    long seed = 0x71C5L;
    Random random = new Random(seed);
    for (int run = 0; run < 200; run++) {
      long price =
          random.nextInt(5) == 0
              ? anyMagnitude(random) % 100_000_000_000L
              : random.nextInt(50_000_000);
      int cards = 1 + random.nextInt(16);
      long start = random.nextInt(4) == 0 ? anyMagnitude(random) % 1_000_000_000L : 0;
      int length = 1 + random.nextInt(4_000);
      long sum = 0;
      for (long s = start + 1; s <= start + length; s++) {
        long charge = Metering.chargeForSecond(price, cards, s);
        assertTrue(charge >= 0, "seed " + seed + ": negative charge");
        assertTrue(
            charge <= price * cards / 3_600 + 1,
            "seed " + seed + ": a second never costs more than ceil(p·c/3600)");
        sum += charge;
      }
      long total = Metering.cost(price, cards, start + length) - Metering.cost(price, cards, start);
      assertEquals(
          total,
          sum,
          "seed " + seed + " run " + run + ": p=" + price + " c=" + cards + " from " + start
              + " for " + length);
    }
  }

  @Test
  void providerAndPlatformSharesAlwaysAddUpToTheCost() {
    long seed = 0x5B117L;
    Random random = new Random(seed);
    int[] fees = {0, 1, 1_500, 2_500, 9_999, 10_000};
    for (int i = 0; i < 100_000; i++) {
      long cost = anyMagnitude(random);
      int fee = random.nextBoolean() ? fees[random.nextInt(fees.length)] : random.nextInt(10_001);
      long provider = Metering.providerShare(cost, fee);
      long platform = Metering.platformShare(cost, fee);
      String context = "seed " + seed + ": cost " + cost + " fee " + fee;
      BigInteger expected =
          BigInteger.valueOf(cost).multiply(BigInteger.valueOf(10_000 - fee)).divide(BPS);
      assertEquals(expected.longValueExact(), provider, context);
      assertEquals(cost, provider + platform, context);
      assertTrue(provider >= 0 && platform >= 0, context);
    }
    assertEquals(0, Metering.platformShare(123_456, 0));
    assertEquals(0, Metering.providerShare(123_456, 10_000));
    assertEquals(850_000, Metering.providerShare(1_000_000, Metering.DEFAULT_FEE_BPS));
    assertEquals(150_000, Metering.platformShare(1_000_000, Metering.DEFAULT_FEE_BPS));
    // floor(999·0.85) = 849: the rounding remainder goes to the platform
    assertEquals(849, Metering.providerShare(999, Metering.DEFAULT_FEE_BPS));
    assertEquals(150, Metering.platformShare(999, Metering.DEFAULT_FEE_BPS));
  }

  @Test
  void cumulativeSplitNeverDriftsAcrossSettlements() {
    long seed = 0xD21F7L;
    Random random = new Random(seed);
    for (int run = 0; run < 500; run++) {
      long price = random.nextInt(100_000_000);
      int cards = 1 + random.nextInt(8);
      int fee = random.nextInt(10_001);
      long second = 0;
      long providerSum = 0;
      long platformSum = 0;
      for (int settlement = 0; settlement < 50; settlement++) {
        long previousCost = Metering.cost(price, cards, second);
        long previousProvider = Metering.providerShare(previousCost, fee);
        second += 1 + random.nextInt(120);
        long cost = Metering.cost(price, cards, second);
        long provider = Metering.providerShare(cost, fee);
        long providerDelta = provider - previousProvider;
        long platformDelta = (cost - previousCost) - providerDelta;
        assertTrue(providerDelta >= 0, "seed " + seed + ": provider share went down");
        assertTrue(platformDelta >= 0, "seed " + seed + ": platform share went down");
        providerSum += providerDelta;
        platformSum += platformDelta;
      }
      long total = Metering.cost(price, cards, second);
      assertEquals(total, providerSum + platformSum, "seed " + seed + " run " + run);
      assertEquals(Metering.providerShare(total, fee), providerSum, "seed " + seed + " run " + run);
    }
  }

  @Test
  void rejectsNegativeInputsAndBadFees() {
    assertThrows(IllegalArgumentException.class, () -> Metering.cost(-1, 1, 1));
    assertThrows(IllegalArgumentException.class, () -> Metering.cost(1, -1, 1));
    assertThrows(IllegalArgumentException.class, () -> Metering.cost(1, 1, -1));
    assertThrows(IllegalArgumentException.class, () -> Metering.chargeForSecond(1, 1, 0));
    assertThrows(IllegalArgumentException.class, () -> Metering.providerShare(1, -1));
    assertThrows(IllegalArgumentException.class, () -> Metering.providerShare(1, 10_001));
    assertThrows(IllegalArgumentException.class, () -> Metering.providerShare(-1, 1_500));
    assertThrows(IllegalArgumentException.class, () -> Metering.platformShare(-1, 1_500));
  }
}
