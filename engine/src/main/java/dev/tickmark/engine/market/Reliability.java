package dev.tickmark.engine.market;

import java.util.Comparator;

/**
 * A host's record as its renters lived it: how many rentals ran their workload on it and have
 * ended, and how many of those ended {@code host_lost} (the host went silent or was evicted under
 * them, or their workload vanished from its heartbeats). The host counts both as it takes each
 * rental's cards back ({@code Host.CardsReleased}). Among hosts of equal floor the matcher proposes
 * to the most reliable first (DESIGN.md, "Matching": "break ties by reliability, then
 * deterministically").
 *
 * <p>More reliable means the smaller share of its ended rentals lost, then, for equal shares, the
 * longer record. A host with no record has lost nothing: it ranks with the hosts that never lost a
 * rental, after those that have shown it longer, and before every host that has lost one. The
 * shares are compared exactly, cross-multiplied, never as floating-point numbers.
 */
public record Reliability(long rentalsEnded, long rentalsLost) {
  /** A host with no record yet. */
  public static final Reliability NONE = new Reliability(0, 0);

  /** The most reliable first; equal records compare equal (the caller breaks the tie). */
  public static final Comparator<Reliability> MOST_RELIABLE_FIRST = Reliability::compare;

  public Reliability {
    if (rentalsEnded < 0 || rentalsLost < 0)
      throw new IllegalArgumentException("a host's rental counts cannot be negative");
  }

  /**
   * Negative when {@code a} is the more reliable: the smaller share lost ({@code lost / max(ended,
   * 1)}), then more rentals ended.
   */
  public static int compare(Reliability a, Reliability b) {
    int share =
        compareProducts(
            a.rentalsLost, Math.max(b.rentalsEnded, 1), b.rentalsLost, Math.max(a.rentalsEnded, 1));
    if (share != 0) return share;
    return Long.compare(b.rentalsEnded, a.rentalsEnded);
  }

  /** {@code x1 * y1} against {@code x2 * y2} for non-negative longs, in 128 bits. */
  private static int compareProducts(long x1, long y1, long x2, long y2) {
    int high = Long.compare(Math.multiplyHigh(x1, y1), Math.multiplyHigh(x2, y2));
    return high != 0 ? high : Long.compareUnsigned(x1 * y1, x2 * y2);
  }
}
