package dev.tickmark.node;

import static dev.tickmark.node.Eventually.eventually;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import dev.tickmark.engine.money.Money;
import java.time.Duration;

/** What the snapshot integration tests share: workloads that write a workspace, and waits. */
final class SnapshotSupport {
  static final Duration WAIT = Duration.ofSeconds(60);

  private SnapshotSupport() {}

  /** Writes {@code megabytes} MB of random bytes, a note and a link, and prints the sha256. */
  static String writer(int megabytes) {
    return "head -c "
        + megabytes * 1_000_000
        + " /dev/urandom > data.bin && mkdir -p sub && echo hello > sub/note"
        + " && ln -s data.bin link && echo \"written $(sha256sum data.bin | cut -c1-64)\";"
        + " sleep 3600";
  }

  static String launch(
      ApiClient api, ApiClient.Customer renter, String region, String script, String extra) {
    return api.post(
            "/v1/rentals",
            renter.apiKey(),
            "{\"gpu\":\"h100-80gb\",\"count\":1,\"region\":\""
                + region
                + "\",\"max_price_per_gpu_hour\":\"3.00\",\"image\":\"ubuntu:24.04\","
                + "\"command\":[\"sh\",\"-c\","
                + ApiClient.quote(script)
                + "]"
                + extra
                + "}")
        .expect(201)
        .json()
        .get("rental")
        .get("id")
        .asText();
  }

  /** The text of the first log line of {@code id} that starts with {@code prefix}. */
  static String awaitLine(ApiClient api, ApiClient.Customer renter, String id, String prefix) {
    String[] found = new String[1];
    eventually(
        WAIT,
        () -> {
          JsonNode lines =
              api.get("/v1/rentals/" + id + "/logs?tail=100", renter.apiKey())
                  .expect(200)
                  .json()
                  .get("lines");
          for (JsonNode l : lines) {
            if (l.get("text").asText().startsWith(prefix)) {
              found[0] = l.get("text").asText();
              return;
            }
          }
          throw new AssertionError("no line starting with " + prefix + " in " + lines);
        });
    return found[0];
  }

  static JsonNode awaitSnapshot(
      ApiClient api, ApiClient.Customer renter, String snapshotId, String status) {
    JsonNode[] last = new JsonNode[1];
    eventually(
        WAIT,
        () -> {
          last[0] = api.get("/v1/snapshots/" + snapshotId, renter.apiKey()).expect(200).json();
          assertEquals(status, last[0].get("status").asText(), last[0].toString());
        });
    return last[0];
  }

  /** Stops a running rental with a snapshot; answers the snapshot id the rental shows. */
  static String stopWithSnapshot(ApiClient api, ApiClient.Customer renter, String id) {
    JsonNode stopped =
        api.post("/v1/rentals/" + id + "/stop", renter.apiKey(), "{\"snapshot\":true}")
            .expect(202)
            .json()
            .get("rental");
    String snapshotId = stopped.get("snapshot_id").asText();
    assertTrue(snapshotId.startsWith("snap_"), stopped.toString());
    return snapshotId;
  }

  static void assertConserved(ApiClient api) {
    eventually(
        WAIT,
        () -> {
          JsonNode audit = api.audit();
          assertTrue(audit.get("conserved").asBoolean(), audit.toString());
          assertEquals(
              Money.format(0), audit.get("pending_captures").asText(), "settled: " + audit);
        });
  }
}
