package dev.tickmark.agent;

import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import java.util.function.Supplier;

/**
 * Waits up to a deadline for what nothing signals: a file a workload writes, a line in its log, a
 * frame the scripted node received. Looks every 20 ms; a timeout says what was awaited.
 */
final class Eventually {
  private static final Duration POLL = Duration.ofMillis(20);

  private Eventually() {}

  static void until(long waitS, Supplier<String> what, BooleanSupplier condition)
      throws InterruptedException {
    found(waitS, what, () -> condition.getAsBoolean() ? Optional.of(true) : Optional.empty());
  }

  /** The first value {@code find} finds within the wait. */
  static <T> T found(long waitS, Supplier<String> what, Supplier<Optional<T>> find)
      throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(waitS);
    while (true) {
      Optional<T> value = find.get();
      if (value.isPresent()) return value.get();
      if (System.nanoTime() - deadline > 0)
        throw new AssertionError("not within " + waitS + " s: " + what.get());
      Thread.sleep(POLL.toMillis());
    }
  }
}
