package dev.tickmark.engine.money;

/**
 * Cumulative metering and split, as DESIGN.md defines them. Every function is a pure function of
 * cumulative quantities, so sums of per-second charges equal the total exactly and a settlement can
 * be recomputed from any checkpoint.
 */
public final class Metering {
  public static final int BPS_DENOMINATOR = 10_000;
  public static final int DEFAULT_FEE_BPS = 1_500;
  private static final long SECONDS_PER_HOUR = 3_600;

  private Metering() {}

  /**
   * {@code cost(s) = floor(p·c·s / 3600)} for a price {@code p} in µ€ per GPU-hour on {@code c}
   * cards after {@code s} seconds. The product is computed in 128 bits, so it never overflows
   * silently; a result beyond {@code long} throws.
   */
  public static long cost(long pricePerGpuHour, int cards, long seconds) {
    if (pricePerGpuHour < 0 || cards < 0 || seconds < 0)
      throw new IllegalArgumentException("negative metering input");
    long perSecondNumerator = Math.multiplyExact(pricePerGpuHour, (long) cards);
    return floorMulDiv(perSecondNumerator, seconds, SECONDS_PER_HOUR);
  }

  /**
   * The most whole seconds whose cumulative cost fits in {@code budget}: the largest {@code s} with
   * {@code cost(s) ≤ budget}, capped at {@code limit}. A free rental (price 0) is capped only by
   * {@code limit}.
   */
  public static long maxSecondsWithin(long pricePerGpuHour, int cards, long budget, long limit) {
    if (budget < 0) return 0;
    long perHour = Math.multiplyExact(pricePerGpuHour, (long) cards);
    if (perHour == 0) return limit;
    // cost(s) ≤ B  ⇔  p·c·s < (B+1)·3600  ⇔  s ≤ ((B+1)·3600 − 1) / (p·c); searched to stay exact
    // without overflow.
    long lo = 0;
    long hi = limit;
    while (lo < hi) {
      long mid =
          hi - (hi - lo) / 2; // the upper middle, without overflow when limit is Long.MAX_VALUE
      if (costOrMax(pricePerGpuHour, cards, mid) <= budget) lo = mid;
      else hi = mid - 1;
    }
    return lo;
  }

  private static long costOrMax(long pricePerGpuHour, int cards, long seconds) {
    try {
      return cost(pricePerGpuHour, cards, seconds);
    } catch (ArithmeticException overflow) {
      return Long.MAX_VALUE;
    }
  }

  /** The charge for second {@code s} alone: {@code cost(s) − cost(s−1)}. */
  public static long chargeForSecond(long pricePerGpuHour, int cards, long second) {
    if (second <= 0) throw new IllegalArgumentException("seconds are numbered from 1");
    return cost(pricePerGpuHour, cards, second) - cost(pricePerGpuHour, cards, second - 1);
  }

  /** Provider share of a cumulative cost: {@code floor(cost·(10000−fee_bps)/10000)}. */
  public static long providerShare(long cumulativeCost, int feeBps) {
    if (feeBps < 0 || feeBps > BPS_DENOMINATOR)
      throw new IllegalArgumentException("fee_bps must be within 0..10000");
    if (cumulativeCost < 0) throw new IllegalArgumentException("negative cost");
    return floorMulDiv(cumulativeCost, BPS_DENOMINATOR - feeBps, BPS_DENOMINATOR);
  }

  /**
   * Platform share of a cumulative cost: whatever the provider does not get, so the two always add
   * up.
   */
  public static long platformShare(long cumulativeCost, int feeBps) {
    return cumulativeCost - providerShare(cumulativeCost, feeBps);
  }

  /** {@code floor(a·b / d)} for non-negative operands with a 128-bit intermediate. */
  static long floorMulDiv(long a, long b, long d) {
    long high = Math.multiplyHigh(a, b);
    long low = a * b;
    if (high == 0 && low >= 0) return low / d;
    // Long division of the 128-bit value (high:low) by d; high must be < d for a long result.
    if (Long.compareUnsigned(high, d) >= 0) throw new ArithmeticException("metering overflow");
    long quotient = 0;
    long remainder = high;
    for (int bit = 63; bit >= 0; bit--) {
      boolean carry = remainder < 0; // remainder << 1 would overflow 64 bits
      remainder = (remainder << 1) | ((low >>> bit) & 1);
      if (carry || Long.compareUnsigned(remainder, d) >= 0) {
        remainder -= d;
        quotient |= 1L << bit;
      }
    }
    if (quotient < 0) throw new ArithmeticException("metering overflow");
    return quotient;
  }
}
