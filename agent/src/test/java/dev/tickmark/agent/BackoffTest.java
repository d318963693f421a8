package dev.tickmark.agent;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;

class BackoffTest {

  private static List<Long> delays(Backoff b, int n) {
    List<Long> out = new ArrayList<>();
    for (int i = 0; i < n; i++) out.add(b.next().toMillis());
    return out;
  }

  @Test
  void doublesFromHalfASecondToThirtySeconds() {
    Backoff noJitter = new Backoff(() -> 0.5);
    assertEquals(
        List.of(500L, 1000L, 2000L, 4000L, 8000L, 16000L, 30000L, 30000L, 30000L),
        delays(noJitter, 9));
  }

  @Test
  void resetsAfterASuccessfulWelcome() {
    Backoff b = new Backoff(() -> 0.5);
    delays(b, 5);
    b.reset();
    assertEquals(List.of(500L, 1000L), delays(b, 2));
  }

  @Test
  void jitterStaysWithinTwentyPercentAndNeverAboveTheMaximum() {
    Random random = new Random(42);
    for (int run = 0; run < 200; run++) {
      Backoff b = new Backoff(random::nextDouble);
      for (int i = 0; i < 12; i++) {
        long base = Backoff.base(i).toMillis();
        long d = b.next().toMillis();
        assertTrue(
            d >= Math.round(base * 0.8) && d <= Math.min(Math.round(base * 1.2), 30_000),
            i + ": " + d);
      }
    }
    assertEquals(400L, new Backoff(() -> 0.0).next().toMillis());
    assertEquals(600L, new Backoff(() -> 0.999999).next().toMillis());
  }

  @Test
  void jitterSpreadsAgentsApart() {
    Random random = new Random(7);
    long distinct =
        java.util.stream.IntStream.range(0, 50)
            .mapToObj(i -> new Backoff(random::nextDouble).next())
            .distinct()
            .count();
    assertTrue(distinct > 20, "50 agents cut off at once do not all retry in the same millisecond");
  }

  @Test
  void longestIsTheMaximumWithJitterBelowIt() {
    Duration d = new Backoff(() -> 0.5).longest();
    assertEquals(Duration.ofSeconds(30), d);
    assertTrue(new Backoff(() -> 0.0).longest().toMillis() >= 24_000);
  }
}
