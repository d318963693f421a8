package dev.tickmark.engine.market;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;

/** The order of hosts' records: the share of ended rentals lost, then the longer record. */
class ReliabilityTest {
  static int compare(long endedA, long lostA, long endedB, long lostB) {
    return Integer.signum(
        Reliability.compare(new Reliability(endedA, lostA), new Reliability(endedB, lostB)));
  }

  @Test
  void theSmallerShareLostComesFirst() {
    assertEquals(-1, compare(40, 1, 4, 1)); // 1/40 before 1/4
    assertEquals(1, compare(3, 2, 3, 1));
    assertEquals(-1, compare(1_000, 0, 1_000, 1));
  }

  @Test
  void equalSharesGoToTheLongerRecord() {
    assertEquals(1, compare(10, 1, 5, 0)); // a tenth lost against none: the shorter record first
    assertEquals(-1, compare(20, 2, 10, 1)); // both a tenth: the longer record first
    assertEquals(-1, compare(50, 0, 0, 0)); // nothing lost in 50 before no record at all
    assertEquals(0, compare(7, 0, 7, 0));
  }

  @Test
  void aHostWithNoRecordComesBeforeEveryHostThatLostOne() {
    assertEquals(-1, compare(0, 0, 1_000_000, 1));
  }

  @Test
  void comparesExactlyWhereFloatingPointWouldNot() {
    // a third each: equal shares, so the longer record first
    assertEquals(-1, compare(999_999_999_999L, 333_333_333_333L, 3, 1));
    // big / (big + 1) against (big - 1) / big: the second is smaller by 1 / (big * (big + 1)),
    // past what a double can tell apart, and the products are past 2^63
    long big = Long.MAX_VALUE / 2;
    assertEquals(1, compare(big + 1, big, big, big - 1));
  }

  @Test
  void isATotalOrderConsistentWithTheShare() {
    Random random = new Random(7);
    List<Reliability> records = new ArrayList<>();
    for (int i = 0; i < 300; i++) {
      long ended = random.nextInt(30);
      records.add(new Reliability(ended, ended == 0 ? 0 : random.nextInt((int) ended + 1)));
    }
    List<Reliability> sorted = new ArrayList<>(records);
    sorted.sort(Reliability.MOST_RELIABLE_FIRST);
    for (int i = 1; i < sorted.size(); i++) {
      Reliability a = sorted.get(i - 1);
      Reliability b = sorted.get(i);
      double shareA = (double) a.rentalsLost() / Math.max(a.rentalsEnded(), 1);
      double shareB = (double) b.rentalsLost() / Math.max(b.rentalsEnded(), 1);
      assertTrue(shareA <= shareB, a + " before " + b);
      if (shareA == shareB) assertTrue(a.rentalsEnded() >= b.rentalsEnded(), a + " before " + b);
    }
  }

  @Test
  void refusesNegativeCounts() {
    assertThrows(IllegalArgumentException.class, () -> new Reliability(-1, 0));
    assertThrows(IllegalArgumentException.class, () -> new Reliability(1, -1));
  }
}
