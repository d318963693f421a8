package dev.tickmark.http;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import com.fasterxml.jackson.databind.JsonNode;
import dev.tickmark.engine.snapshot.Snapshot;
import java.time.Instant;
import org.junit.jupiter.api.Test;

/** A snapshot's JSON: money as euros, failure only when failed, deletes_at only when suspended. */
class SnapshotViewTest {
  static final Instant AT = Instant.parse("2026-12-01T10:00:00Z");

  static Snapshot.View view(Snapshot.Status status) {
    return new Snapshot.View(
        "snap_1",
        "acc_1",
        status,
        "rnt_1",
        "host_1",
        "h100-80gb",
        "eu-nl",
        1024,
        "ab".repeat(32),
        1,
        AT,
        AT.plusSeconds(60),
        null,
        3600,
        33_333,
        "quota_exceeded",
        "over",
        AT,
        AT.plusSeconds(7 * 86400));
  }

  static JsonNode json(Snapshot.Status status) throws Exception {
    return Json.MAPPER.readTree(Json.write(SnapshotRoutes.view(view(status))));
  }

  @Test
  void writesTheFieldsDesignNames() throws Exception {
    JsonNode j = json(Snapshot.Status.READY);
    assertEquals("snap_1", j.get("id").asText());
    assertEquals("ready", j.get("status").asText());
    assertEquals(1024, j.get("size_bytes").asLong());
    assertEquals("ab".repeat(32), j.get("sha256").asText());
    assertEquals("rnt_1", j.get("rental_id").asText());
    assertEquals("h100-80gb", j.get("gpu").asText());
    assertEquals("eu-nl", j.get("region").asText());
    assertEquals("2026-12-01T10:00:00Z", j.get("created_at").asText());
    assertEquals("2026-12-01T10:01:00Z", j.get("ready_at").asText());
    assertEquals("0.033333", j.get("cost").asText());
    assertEquals(3600, j.get("billed_seconds").asLong());
    assertEquals(true, j.get("failure").isNull());
    assertEquals(true, j.get("deletes_at").isNull());
  }

  @Test
  void aFailedOneSaysWhyAndASuspendedOneWhenItGoes() throws Exception {
    JsonNode failed = json(Snapshot.Status.FAILED);
    assertEquals("quota_exceeded", failed.get("failure").get("code").asText());
    assertEquals("over", failed.get("failure").get("detail").asText());
    JsonNode suspended = json(Snapshot.Status.SUSPENDED);
    assertEquals("2026-12-08T10:00:00Z", suspended.get("deletes_at").asText());
    assertEquals(true, suspended.get("failure").isNull());
    assertNull(SnapshotRoutes.view(view(Snapshot.Status.DELETED)).deletesAt());
  }
}
