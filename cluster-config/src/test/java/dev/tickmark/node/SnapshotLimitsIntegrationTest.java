package dev.tickmark.node;

import static org.junit.jupiter.api.Assertions.assertEquals;

import com.fasterxml.jackson.databind.JsonNode;
import dev.tickmark.agent.Agent;
import dev.tickmark.persistence.DatabaseSettings;
import dev.tickmark.persistence.TestDatabase;
import java.nio.file.Path;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The size limit and the account quota of snapshots, against a real node, PostgreSQL and agent: a
 * workspace over the limit and one past the quota fail with their stable codes, are never
 * restorable and cost nothing; deleting a snapshot frees its share of the quota.
 */
class SnapshotLimitsIntegrationTest {
  static Node node;
  static ApiClient api;
  static Agent agent;
  @TempDir static Path temp;

  @BeforeAll
  static void start() throws Exception {
    DatabaseSettings db = TestDatabase.fresh("snapshot_limits");
    node =
        Node.start(
            RentingSupport.renting(TestNodes.settings(db))
                .withConfig("tickmark.snapshots.max-bytes", "4 MiB")
                .withConfig("tickmark.snapshots.quota-bytes", "5 MiB")
                .withConfig("tickmark.snapshots.settle-interval", "2s")
                .withConfig("tickmark.snapshots.upload-reminder", "1s"));
    api = new ApiClient(node.baseUrl());
    ApiClient.Customer provider = api.signUp("Limits provider");
    agent = RentingSupport.listedHost(node, api, provider, temp.resolve("agent"), "eu-de", 1);
  }

  @AfterAll
  static void stop() throws Exception {
    if (agent != null) agent.close();
    if (node != null) node.close();
  }

  /** Runs a rental that writes {@code megabytes} MB of random bytes and keeps its workspace. */
  static String keep(ApiClient.Customer renter, int megabytes) {
    String id = SnapshotSupport.launch(api, renter, "eu-de", SnapshotSupport.writer(megabytes), "");
    SnapshotSupport.awaitLine(api, renter, id, "written ");
    String snapshotId = SnapshotSupport.stopWithSnapshot(api, renter, id);
    RentingSupport.awaitStatus(api, renter, id, "ended");
    return snapshotId;
  }

  static void assertFailedWith(ApiClient.Customer renter, String snapshotId, String code) {
    JsonNode failed = SnapshotSupport.awaitSnapshot(api, renter, snapshotId, "failed");
    assertEquals(code, failed.get("failure").get("code").asText(), failed.toString());
    assertEquals("0.000000", failed.get("cost").asText(), "a failed snapshot costs nothing");
    api.post(
            "/v1/rentals",
            renter.apiKey(),
            "{\"gpu\":\"h100-80gb\",\"count\":1,\"max_price_per_gpu_hour\":\"3.00\","
                + "\"image\":\"ubuntu:24.04\",\"restore\":\""
                + snapshotId
                + "\"}")
        .expectProblem(409, "snapshot_not_ready");
  }

  @Test
  void aSnapshotOverTheSizeLimitFails() {
    ApiClient.Customer renter = RentingSupport.renter(api, "Big", "50.00");
    assertFailedWith(renter, keep(renter, 5), "snapshot_too_large");
    SnapshotSupport.assertConserved(api);
  }

  @Test
  void aSnapshotPastTheAccountsQuotaFailsUntilAnotherIsDeleted() {
    ApiClient.Customer renter = RentingSupport.renter(api, "Hoarder", "50.00");
    String first = keep(renter, 3);
    SnapshotSupport.awaitSnapshot(api, renter, first, "ready");
    assertFailedWith(renter, keep(renter, 3), "quota_exceeded");

    api.delete("/v1/snapshots/" + first, renter.apiKey()).expect(200);
    SnapshotSupport.awaitSnapshot(api, renter, keep(renter, 3), "ready");
    SnapshotSupport.assertConserved(api);
  }
}
