package dev.tickmark.engine.host;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import java.time.Instant;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The listing rules alone; HostTest drives them through the entity, its restarts and sessions. */
class WorkloadListingsTest {
  private static final Instant T0 = Instant.parse("2026-12-04T10:00:00Z");
  // The agent's clock, compared only with itself.
  private static final Instant LISTED_FROM = Instant.parse("2026-12-04T09:00:00Z");

  private static Host.Held running(Instant listedFrom) {
    return new Host.Held(List.of(0), 1_000_000, Listing.Tier.ON_DEMAND, true, listedFrom, T0);
  }

  private static Host.Active host(
      Instant lastRecorded, Map<String, Host.Held> reservations, Map<String, Host.Unlisted> gone) {
    return new Host.Active(
        new Host.Enrollment("prov-1", "eu-nl", "rack", "pk", "hash", T0, "token"),
        new Host.Standing(Host.Status.VERIFIED, null, null, null),
        new Host.Presence(true, lastRecorded),
        new Host.Inventory(List.of(), reservations, Map.of(), gone, Map.of()),
        Listing.unlisted(),
        false);
  }

  @Test
  void theLiveSessionsOmissionEndsAListingAtItsLastHeartbeatOnce() {
    var state = host(null, Map.of("r1", running(null), "r2", running(null)), Map.of());
    var listings = new WorkloadListings();
    Instant first = T0.plusSeconds(5);
    assertEquals(List.of(), listings.noteHeartbeat(state, List.of("r1", "r2"), null, first, true));
    Instant second = T0.plusSeconds(10);
    assertEquals(
        List.of(new Host.WorkloadUnlisted("r1", first, second)),
        listings.noteHeartbeat(state, List.of("r2"), null, second, true));
    assertEquals(second, listings.lastListed(state, "r2"));
    assertNull(listings.lastListed(state, "r1"), "until the state records the event");
    assertEquals(
        List.of(),
        listings.noteHeartbeat(state, null, null, T0.plusSeconds(15), true),
        "a heartbeat that lists nothing says nothing");
  }

  @Test
  void aRefusedHeartbeatsOmissionCountsOnlyWhenStampedAfterListedFrom() {
    Instant recorded = T0.plusSeconds(20);
    var state = host(recorded, Map.of("r1", running(LISTED_FROM), "r2", running(null)), Map.of());
    var listings = new WorkloadListings();
    listings.assumeListedAtRecovery(state);
    assertEquals(recorded, listings.lastListed(state, "r1"));

    Instant arrived = T0.plusSeconds(21);
    assertEquals(
        List.of(),
        listings.noteHeartbeat(state, List.of(), LISTED_FROM, arrived, false),
        "stamped at listed_from: may have been built before the workload ran");
    assertEquals(
        List.of(new Host.WorkloadUnlisted("r1", recorded, arrived)),
        listings.noteHeartbeat(state, List.of(), LISTED_FROM.plusMillis(1), arrived, false),
        "r2 has no listed_from: a refused heartbeat cannot tell it is newer than the listing");
    assertEquals(recorded, listings.lastListed(state, "r2"));
  }

  @Test
  void aRentalNoHeartbeatListedIsBoundedAtItsStart() {
    var state = host(null, Map.of("r1", running(LISTED_FROM)), Map.of());
    var listings = new WorkloadListings();
    listings.assumeListedAtRecovery(state); // no heartbeat in the journal: nothing assumed
    assertNull(listings.lastListed(state, "r1"));
    Instant at = T0.plusSeconds(3);
    assertEquals(
        List.of(new Host.WorkloadUnlisted("r1", T0, at)),
        listings.noteHeartbeat(state, List.of(), LISTED_FROM.plusSeconds(1), at, true));
  }

  @Test
  void recoveryAssumesOnlyConfirmedRentalsNotAlreadyUnlisted() {
    Instant recorded = T0.plusSeconds(20);
    var reserved = new Host.Held(List.of(1), 1_000_000, Listing.Tier.ON_DEMAND, false);
    var state =
        host(
            recorded,
            Map.of("running", running(null), "reserved", reserved, "gone", running(null)),
            Map.of("gone", new Host.Unlisted(T0, T0.plusSeconds(1))));
    var listings = new WorkloadListings();
    listings.assumeListedAtRecovery(state);
    assertEquals(recorded, listings.lastListed(state, "running"));
    assertNull(listings.lastListed(state, "reserved"));
    assertEquals(T0, listings.lastListed(state, "gone"), "the recorded bound stands");
    assertEquals(
        List.of(new Host.WorkloadUnlisted("running", recorded, T0.plusSeconds(30))),
        listings.noteHeartbeat(state, List.of(), null, T0.plusSeconds(30), true));
  }
}
