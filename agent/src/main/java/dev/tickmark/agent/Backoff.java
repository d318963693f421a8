package dev.tickmark.agent;

import java.time.Duration;
import java.util.concurrent.ThreadLocalRandom;
import java.util.function.DoubleSupplier;

/**
 * Reconnect delays: 0.5 s doubling up to 30 s, each with ±20 % jitter (never above 30 s) so that
 * many agents cut off by one node do not all come back in the same instant. {@link #reset()} after
 * a successful welcome.
 */
final class Backoff {
  static final Duration INITIAL = Duration.ofMillis(500);
  static final Duration MAX = Duration.ofSeconds(30);
  static final double JITTER = 0.2;

  private final DoubleSupplier random;
  private int failures;

  /** {@code random} yields values in [0, 1). */
  Backoff(DoubleSupplier random) {
    this.random = random;
  }

  Backoff() {
    this(() -> ThreadLocalRandom.current().nextDouble());
  }

  /** The delay before the next attempt, without jitter: 0.5 s × 2^failures, at most 30 s. */
  static Duration base(int failures) {
    long millis = INITIAL.toMillis() << Math.min(failures, 16);
    return Duration.ofMillis(Math.min(millis, MAX.toMillis()));
  }

  /** The delay before the next attempt; counts one more failure. */
  Duration next() {
    long base = base(failures).toMillis();
    failures = Math.min(failures + 1, 64);
    double factor = 1 - JITTER + 2 * JITTER * random.getAsDouble();
    return Duration.ofMillis(Math.min(Math.round(base * factor), MAX.toMillis()));
  }

  /**
   * Jumps to the longest delay (used when another agent took this host's session: do not fight over
   * it).
   */
  Duration longest() {
    failures = 64;
    return next();
  }

  void reset() {
    failures = 0;
  }
}
