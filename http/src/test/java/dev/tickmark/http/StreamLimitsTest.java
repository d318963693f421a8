package dev.tickmark.http;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

class StreamLimitsTest {
  @Test
  void eachCapHoldsAndAReleasedPlaceIsGivenBackOnce() {
    StreamLimits limits = new StreamLimits(new StreamLimits.Settings(3, 2, 5));
    StreamLimits.Permit a1 = limits.acquire("a", "r1");
    limits.acquire("a", "r1");
    assertEquals(429, assertThrows(Problem.class, () -> limits.acquire("a", "r1")).status());
    limits.acquire("a", "r2");
    assertEquals(429, assertThrows(Problem.class, () -> limits.acquire("a", "r3")).status());
    limits.acquire("b", "r4");
    limits.acquire("b", "r4");
    assertEquals(
        429,
        assertThrows(Problem.class, () -> limits.acquire("c", "r5")).status(),
        "all renters together");
    assertEquals(5, limits.held());
    a1.release();
    a1.release(); // twice gives back one place only
    assertEquals(4, limits.held());
    limits.acquire("a", "r1");
    assertEquals(429, assertThrows(Problem.class, () -> limits.acquire("a", "r1")).status());
  }

  @Test
  void concurrentAcquiresNeverExceedACap() throws Exception {
    StreamLimits limits = new StreamLimits(new StreamLimits.Settings(1000, 10, 1000));
    ExecutorService pool = Executors.newFixedThreadPool(8);
    ConcurrentLinkedQueue<StreamLimits.Permit> granted = new ConcurrentLinkedQueue<>();
    List<java.util.concurrent.Future<?>> tasks = new ArrayList<>();
    for (int i = 0; i < 200; i++)
      tasks.add(
          pool.submit(
              () -> {
                try {
                  StreamLimits.Permit p = limits.acquire("a", "r");
                  granted.add(p);
                  if (granted.size() % 3 == 0) {
                    granted.remove(p);
                    p.release();
                  }
                } catch (Problem refused) {
                  // over the cap
                }
              }));
    for (var t : tasks) t.get();
    pool.shutdown();
    pool.awaitTermination(10, TimeUnit.SECONDS);
    assertEquals(granted.size(), limits.held());
    assertEquals(true, limits.held() <= 10, "held " + limits.held());
  }
}
