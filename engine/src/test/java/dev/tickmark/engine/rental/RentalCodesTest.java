package dev.tickmark.engine.rental;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.tickmark.engine.rental.Rental.EndReason;
import dev.tickmark.engine.rental.Rental.Status;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The wire names the journal, the read side and the API carry: they must never change. */
class RentalCodesTest {
  @Test
  void endReasonsKeepTheirWireNames() {
    assertEquals(
        List.of(
            "stopped_by_renter",
            "balance_exhausted",
            "spend_cap_reached",
            "rental_cap_reached",
            "host_lost",
            "workload_exited",
            "preempted",
            "provisioning_failed",
            "no_capacity",
            "cancelled"),
        Arrays.stream(EndReason.values()).map(EndReason::wire).toList());
    for (EndReason r : EndReason.values()) assertEquals(r, EndReason.fromWire(r.wire()));
    assertThrows(IllegalArgumentException.class, () -> EndReason.fromWire("finished"));
  }

  @Test
  void statusesKeepTheirWireNames() {
    assertEquals(
        List.of("pending", "provisioning", "running", "stopping", "ended", "refused", "unknown"),
        Arrays.stream(Status.values()).map(Status::wire).toList());
    for (Status s : Status.values()) assertEquals(s, Status.fromWire(s.wire()));
  }
}
