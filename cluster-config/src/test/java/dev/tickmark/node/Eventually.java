package dev.tickmark.node;

import java.time.Duration;

/**
 * Polls an assertion until it holds or a deadline passes, for read sides that are eventually
 * consistent (the ledger projection). The last failure is rethrown, so a timeout says what was
 * wrong.
 */
final class Eventually {
  private static final Duration POLL = Duration.ofMillis(100);

  private Eventually() {}

  static void eventually(Duration within, Runnable assertion) {
    long deadline = System.nanoTime() + within.toNanos();
    while (true) {
      try {
        assertion.run();
        return;
      } catch (AssertionError | RuntimeException e) {
        if (System.nanoTime() - deadline >= 0) throw e;
      }
      try {
        Thread.sleep(POLL.toMillis());
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new AssertionError("interrupted while waiting for an assertion to hold", e);
      }
    }
  }
}
