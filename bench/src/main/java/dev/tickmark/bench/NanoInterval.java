package dev.tickmark.bench;

/**
 * An interval on {@link System#nanoTime()}'s scale, ends included: a launch from its due time to
 * its answer, a collector's pause, a look of the autovacuum stand-in.
 */
record NanoInterval(long fromNanos, long toNanos) {
  boolean overlaps(NanoInterval other) {
    return fromNanos <= other.toNanos && toNanos >= other.fromNanos;
  }

  long micros() {
    return (toNanos - fromNanos) / 1000;
  }
}
