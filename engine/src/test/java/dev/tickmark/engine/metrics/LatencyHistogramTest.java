package dev.tickmark.engine.metrics;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Arrays;
import java.util.Random;
import org.junit.jupiter.api.Test;

class LatencyHistogramTest {
  @Test
  void bucketsCoverEveryValueAndUpperBoundsAreTight() {
    for (long v = 0; v < 1_000_000; v += 7) {
      int i = LatencyHistogram.indexOf(v);
      assertTrue(LatencyHistogram.upperBound(i) >= v, "bucket of " + v + " ends below it");
      if (i > 0)
        assertTrue(
            LatencyHistogram.upperBound(i - 1) < v,
            "bucket of " + v + " is not the first that holds it");
    }
  }

  @Test
  void quantilesAreWithinSevenPercentOfTheExactOnes() {
    Random random = new Random(42);
    long[] values = new long[50_000];
    LatencyHistogram h = new LatencyHistogram();
    for (int i = 0; i < values.length; i++) {
      values[i] = (long) Math.exp(random.nextDouble() * 14); // 1 µs .. ~1.2 s, log-spread
      h.recordMicros(values[i]);
    }
    Arrays.sort(values);
    for (double q : new double[] {0.5, 0.9, 0.99, 0.999}) {
      long exact = values[(int) Math.ceil(q * values.length) - 1];
      long estimate = h.quantileMicros(q);
      assertTrue(
          estimate >= exact && estimate <= exact * 1.07 + 1,
          "q" + q + ": exact " + exact + ", estimate " + estimate);
    }
    assertEquals(values.length, h.count());
    assertEquals(Arrays.stream(values).sum(), h.sumMicros());
  }

  @Test
  void anEmptyHistogramAnswersZero() {
    assertEquals(0, new LatencyHistogram().quantileMicros(0.99));
  }

  @Test
  void cumulativeCountsAreMonotoneEndWithTheTotalAndNeverCountAValueAboveItsBound() {
    Random random = new Random(7);
    long[] values = new long[20_000];
    LatencyHistogram h = new LatencyHistogram();
    for (int i = 0; i < values.length; i++) {
      values[i] = (long) Math.exp(random.nextDouble() * 16);
      h.recordMicros(values[i]);
    }
    long[] bounds = {100, 250, 1_000, 10_000, 100_000, 1_000_000, 10_000_000};
    long[] cumulative = h.cumulativeCounts(bounds);
    assertEquals(bounds.length + 1, cumulative.length);
    assertEquals(values.length, cumulative[bounds.length]);
    for (int b = 0; b < bounds.length; b++) {
      long bound = bounds[b];
      long exact = Arrays.stream(values).filter(v -> v <= bound).count();
      long within =
          Arrays.stream(values).filter(v -> v <= bound * 0.93).count(); // one bucket is ~6 % wide
      assertTrue(cumulative[b] <= exact, "never above the exact count at " + bound);
      assertTrue(
          cumulative[b] >= within,
          "at most one bucket short at " + bound + ": " + cumulative[b] + " < " + within);
      if (b > 0) assertTrue(cumulative[b] >= cumulative[b - 1], "cumulative");
    }
  }
}
