package dev.tickmark.engine.metrics;

import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.atomic.LongAdder;

/**
 * A lock-free latency histogram in microseconds with log-linear buckets (16 sub-buckets per power
 * of two, so any quantile is within ~6 % of the true value). Recording is one array increment:
 * cheap enough for every heartbeat and every match.
 */
public final class LatencyHistogram {
  private static final int SUB_BUCKETS = 16;
  private static final int POWERS = 40; // up to 2^40 µs ≈ 12.7 days
  private final AtomicLongArray counts = new AtomicLongArray(POWERS * SUB_BUCKETS);
  private final LongAdder total = new LongAdder();
  private final LongAdder sumMicros = new LongAdder();

  public void recordMicros(long micros) {
    long v = Math.max(0, micros);
    counts.incrementAndGet(indexOf(v));
    total.increment();
    sumMicros.add(v);
  }

  public long count() {
    return total.sum();
  }

  public long sumMicros() {
    return sumMicros.sum();
  }

  /**
   * The value at quantile {@code q} (0..1) in µs: the upper bound of the bucket that holds it; 0
   * when empty.
   */
  public long quantileMicros(double q) {
    long n = total.sum();
    if (n == 0) return 0;
    long rank = (long) Math.ceil(q * n);
    long seen = 0;
    for (int i = 0; i < counts.length(); i++) {
      seen += counts.get(i);
      if (seen >= Math.max(1, rank)) return upperBound(i);
    }
    return upperBound(counts.length() - 1);
  }

  /**
   * Cumulative counts for Prometheus-style buckets: {@code result[i]} counts the values recorded in
   * buckets whose upper bound is at most {@code boundsMicros[i]} (ascending), and the last element
   * is the count of every value (the {@code +Inf} bucket). One pass over the buckets; since a
   * bucket is counted only once it lies wholly below a bound, a cumulative count may lag the exact
   * one by the values of one bucket (~6 % of the bound's width).
   */
  public long[] cumulativeCounts(long[] boundsMicros) {
    long[] result = new long[boundsMicros.length + 1];
    int b = 0;
    long seen = 0;
    for (int i = 0; i < counts.length(); i++) {
      long upper = upperBound(i);
      while (b < boundsMicros.length && upper > boundsMicros[b]) result[b++] = seen;
      seen += counts.get(i);
    }
    while (b < boundsMicros.length) result[b++] = seen;
    result[boundsMicros.length] = seen;
    return result;
  }

  static int indexOf(long v) {
    if (v < SUB_BUCKETS) return (int) v;
    int power = 63 - Long.numberOfLeadingZeros(v); // ≥ 4
    int sub = (int) ((v >>> (power - 4)) & (SUB_BUCKETS - 1));
    int index = (power - 3) * SUB_BUCKETS + sub;
    return Math.min(index, POWERS * SUB_BUCKETS - 1);
  }

  static long upperBound(int index) {
    if (index < SUB_BUCKETS) return index;
    int power = index / SUB_BUCKETS + 3;
    int sub = index % SUB_BUCKETS;
    return ((long) (SUB_BUCKETS + sub + 1) << (power - 4)) - 1;
  }
}
