package dev.tickmark.engine.snapshot;

import java.math.BigInteger;

/**
 * Storage metering (DESIGN.md, "Snapshots and storage"): a snapshot of {@code b} bytes at {@code P}
 * µ€ per GiB-month (a 30-day month) costs {@code floor(P·b·s / (2^30 · 2,592,000))} µ€ cumulatively
 * after {@code s} seconds. Pure and cumulative like {@code Metering}: settling any sequence of
 * seconds adds up to the cost of their total. The product is exact in {@link BigInteger} (100 GiB
 * for years at any sane price passes 2^63 before the division).
 */
public final class StorageMetering {
  /** 2^30 bytes · 2,592,000 seconds: one GiB-month. */
  static final BigInteger GIB_MONTH =
      BigInteger.valueOf(1L << 30).multiply(BigInteger.valueOf(2_592_000L));

  private static final BigInteger LONG_MAX = BigInteger.valueOf(Long.MAX_VALUE);

  private StorageMetering() {}

  /** The cumulative cost of {@code seconds} of storage; beyond {@code long} throws. */
  public static long cost(long pricePerGibMonth, long bytes, long seconds) {
    if (pricePerGibMonth < 0 || bytes < 0 || seconds < 0)
      throw new IllegalArgumentException("negative metering input");
    BigInteger cost =
        BigInteger.valueOf(pricePerGibMonth)
            .multiply(BigInteger.valueOf(bytes))
            .multiply(BigInteger.valueOf(seconds))
            .divide(GIB_MONTH);
    if (cost.compareTo(LONG_MAX) > 0) throw new ArithmeticException("storage metering overflow");
    return cost.longValue();
  }

  /**
   * The hold that covers storage through second {@code throughSecond}: its cumulative cost, at
   * least 1 µ€ (an account refuses an empty hold; a snapshot too small to cost anything in that
   * time still has one, so every snapshot's money is handled alike).
   */
  public static long holdFor(long pricePerGibMonth, long bytes, long throughSecond) {
    return Math.max(1, cost(pricePerGibMonth, bytes, throughSecond));
  }

  /**
   * The most seconds a hold of {@code amount} covers: the largest {@code s} with {@code cost(s) ≤
   * amount}, {@link Long#MAX_VALUE} when storage is free. {@code cost(s) ≤ H ⇔ P·b·s < (H+1)·D ⇔ s
   * ≤ ((H+1)·D − 1) / (P·b)}.
   */
  public static long secondsCovered(long pricePerGibMonth, long bytes, long amount) {
    if (pricePerGibMonth < 0 || bytes < 0 || amount < 0)
      throw new IllegalArgumentException("negative metering input");
    BigInteger perSecond = BigInteger.valueOf(pricePerGibMonth).multiply(BigInteger.valueOf(bytes));
    if (perSecond.signum() == 0) return Long.MAX_VALUE;
    BigInteger s =
        BigInteger.valueOf(amount)
            .add(BigInteger.ONE)
            .multiply(GIB_MONTH)
            .subtract(BigInteger.ONE)
            .divide(perSecond);
    return s.min(LONG_MAX).longValue();
  }
}
