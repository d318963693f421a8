package dev.tickmark.engine.account;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.HashMap;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * The account state's map: behaves as an immutable java.util.Map, and updates leave the original
 * untouched.
 */
class PersistentMapTest {

  @Test
  void randomUpdatesAgreeWithAHashMapAndNeverChangeEarlierVersions() {
    Random random = new Random(42);
    Map<String, Long> model = new HashMap<>();
    PersistentMap<Long> map = PersistentMap.empty();
    for (int i = 0; i < 5_000; i++) {
      String key = "rnt_" + random.nextInt(700);
      PersistentMap<Long> before = map;
      Map<String, Long> modelBefore = Map.copyOf(model);
      if (random.nextInt(3) == 0) {
        map = map.without(key);
        model.remove(key);
      } else {
        long value = random.nextLong();
        map = map.with(key, value);
        model.put(key, value);
      }
      assertEquals(modelBefore, before, "an update left the earlier version as it was");
      assertEquals(model.size(), map.size());
      assertEquals(model.get(key), map.get(key));
      assertEquals(model.containsKey(key), map.containsKey(key));
    }
    assertEquals(model, map);
    assertEquals(map, model);
    assertEquals(model.hashCode(), map.hashCode());
  }

  @Test
  void readsLikeAnImmutableMap() {
    PersistentMap<String> map = PersistentMap.<String>empty().with("a", "1").with("b", "2");
    assertNull(map.get("c"));
    assertNull(map.get(7), "a key of another type is simply absent");
    assertFalse(map.containsKey(7));
    assertSame(map, map.without("c"), "removing an absent key changes nothing");
    assertSame(map, PersistentMap.of(map));
    assertEquals(map, PersistentMap.of(Map.of("a", "1", "b", "2")));
    assertThrows(UnsupportedOperationException.class, () -> map.put("c", "3"));
    assertThrows(
        UnsupportedOperationException.class, () -> map.entrySet().iterator().next().setValue("x"));
    assertTrue(PersistentMap.empty().isEmpty());
  }
}
