package dev.tickmark.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

class FreshEntitiesTest {
  @Test
  void aClaimIsTakenOnceAndOnlyForItsOwnId() {
    FreshEntities fresh = new FreshEntities();
    assertFalse(fresh.take("Rental|rnt_a"), "nothing claimed");
    assertTrue(fresh.starting("Rental|rnt_a"));
    assertFalse(fresh.take("Rental|rnt_b"), "another id");
    assertTrue(fresh.take("Rental|rnt_a"));
    assertFalse(fresh.take("Rental|rnt_a"), "a second recovery reads the store");
    assertEquals(1, fresh.taken());
    assertEquals(0, fresh.outstanding());
  }

  @Test
  void aClaimNotTakenInTimeIsDropped() {
    long[] now = {0};
    FreshEntities fresh = new FreshEntities(() -> now[0]);
    fresh.starting("Rental|rnt_late");
    fresh.starting("Rental|rnt_in_time");
    now[0] = FreshEntities.MAX_AGE_NANOS;
    assertTrue(fresh.take("Rental|rnt_in_time"));
    now[0] = FreshEntities.MAX_AGE_NANOS + 1;
    assertFalse(fresh.take("Rental|rnt_late"), "too old: that recovery reads the store");
  }

  @Test
  void beyondTheCapNothingIsClaimedUntilOldClaimsAreDropped() {
    long[] now = {0};
    FreshEntities fresh = new FreshEntities(() -> now[0]);
    for (int i = 0; i < FreshEntities.MAX_CLAIMS; i++) assertTrue(fresh.starting("Rental|" + i));
    assertFalse(fresh.starting("Rental|one-too-many"), "none is old enough to drop");
    assertFalse(fresh.take("Rental|one-too-many"), "so that one recovers from the store");
    assertTrue(fresh.take("Rental|0"));
    assertTrue(fresh.starting("Rental|now-there-is-room"));
    assertTrue(fresh.take("Rental|now-there-is-room"));

    for (int i = 0; i < 2; i++) fresh.starting("Rental|more-" + i);
    assertFalse(fresh.starting("Rental|later"), "full again");
    now[0] = FreshEntities.MAX_AGE_NANOS + 1;
    assertTrue(fresh.starting("Rental|later"), "the old claims are dropped to make room");
    assertEquals(1, fresh.outstanding());
  }
}
