package dev.tickmark.engine.host;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;

import java.time.Instant;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.junit.jupiter.api.Test;

/**
 * The inventory's maps iterate by rental id whatever map they were made from, and an inventory made
 * from another keeps the maps an event did not change instead of copying them again.
 */
class InventoryTest {
  private static final Instant T0 = Instant.parse("2026-12-07T10:00:00Z");

  private static Host.Held held(int card) {
    return new Host.Held(List.of(card), 1_000_000, Listing.Tier.ON_DEMAND, false);
  }

  private static Host.Inventory inventory() {
    Map<String, Host.Held> reservations = new HashMap<>();
    for (String id : List.of("rnt_c", "rnt_a", "rnt_b")) reservations.put(id, held(id.charAt(4)));
    return new Host.Inventory(
        List.of(),
        reservations,
        new HashMap<>(Map.of("rnt_z", T0, "rnt_y", T0)),
        Map.of(),
        new HashMap<>(Map.of("rnt_c", T0.plusSeconds(60), "rnt_a", T0.plusSeconds(60))));
  }

  @Test
  void itsMapsIterateByRentalId() {
    Host.Inventory inventory = inventory();
    assertEquals(
        List.of("rnt_a", "rnt_b", "rnt_c"), List.copyOf(inventory.reservations().keySet()));
    assertEquals(List.of("rnt_y", "rnt_z"), List.copyOf(inventory.released().keySet()));
    assertEquals(List.of("rnt_a", "rnt_c"), List.copyOf(inventory.unclaimed().keySet()));
  }

  @Test
  void anEventKeepsTheMapsItDidNotChange() {
    Host.Inventory before = inventory();
    Host.Inventory after =
        before.reserving(
            new Host.CardsReserved(
                "rnt_0", List.of(7), 1_000_000, Listing.Tier.ON_DEMAND, T0, T0.plusSeconds(60)));
    assertSame(before.released(), after.released());
    assertSame(before.unlisted(), after.unlisted());
    assertEquals(
        List.of("rnt_0", "rnt_a", "rnt_b", "rnt_c"), List.copyOf(after.reservations().keySet()));
    assertEquals(List.of("rnt_0", "rnt_a", "rnt_c"), List.copyOf(after.unclaimed().keySet()));

    Host.Inventory recounted = after.withCards(List.of());
    assertSame(after.reservations(), recounted.reservations());
    assertSame(after.unclaimed(), recounted.unclaimed());
  }

  @Test
  void aSortedMapFromElsewhereIsStillCopied() {
    TreeMap<String, Host.Held> mine = new TreeMap<>(Map.of("rnt_a", held(1)));
    Host.Inventory inventory = new Host.Inventory(List.of(), mine);
    assertNotSame(mine, inventory.reservations());
    mine.put("rnt_b", held(2));
    assertEquals(List.of("rnt_a"), List.copyOf(inventory.reservations().keySet()));
  }
}
