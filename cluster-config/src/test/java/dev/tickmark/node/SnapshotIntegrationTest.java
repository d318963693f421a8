package dev.tickmark.node;

import static dev.tickmark.node.Eventually.eventually;
import static dev.tickmark.node.SnapshotSupport.*;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import dev.tickmark.agent.Agent;
import dev.tickmark.agent.AgentConfig;
import dev.tickmark.engine.money.Money;
import dev.tickmark.persistence.DatabaseSettings;
import dev.tickmark.persistence.TestDatabase;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Snapshots end to end against a real node and PostgreSQL, with two real agents (in-process,
 * simulated GPUs, each its own state folder, in two regions): a workspace holding a multi-MB file
 * is kept on one host and restored intact (sha256) on the other; storage is metered and the audit
 * conserved; a deleted snapshot cannot be restored; another renter's is 404; an agent closed in the
 * middle of an upload resumes it when started again on its state folder.
 */
class SnapshotIntegrationTest {
  // A price high enough that a few MB for a few seconds cost whole micro-euros.
  static final String STORAGE_PRICE = "100000.00";

  static Node node;
  static ApiClient api;
  static ApiClient.Customer provider;
  static final List<Agent> agents = new ArrayList<>();
  @TempDir static Path temp;

  @BeforeAll
  static void start() throws Exception {
    DatabaseSettings db = TestDatabase.fresh("snapshots");
    node =
        Node.start(
            RentingSupport.renting(TestNodes.settings(db))
                .withConfig("tickmark.snapshots.price-per-gib-month", STORAGE_PRICE)
                .withConfig("tickmark.snapshots.settle-interval", "2s")
                .withConfig("tickmark.snapshots.hold-duration", "60s")
                .withConfig("tickmark.snapshots.upload-reminder", "1s")
                .withConfig("tickmark.snapshots.collect-interval", "2s")
                .withConfig("tickmark.snapshots.orphan-grace", "0s"));
    api = new ApiClient(node.baseUrl());
    provider = api.signUp("Snapshot provider");
    agents.add(host("eu-nl", temp.resolve("agent-nl")));
    agents.add(host("us-east", temp.resolve("agent-us")));
  }

  @AfterAll
  static void stop() throws Exception {
    agents.forEach(Agent::close);
    if (node != null) node.close();
  }

  static Agent host(String region, Path state) throws Exception {
    return RentingSupport.listedHost(node, api, provider, state, region, 1);
  }

  @Test
  void aWorkspaceKeptOnOneHostIsRestoredIntactOnAnotherInAnotherRegion() throws Exception {
    ApiClient.Customer renter = RentingSupport.renter(api, "Keeper", "100.00");
    String first = launch(api, renter, "eu-nl", writer(6), "");
    String written = awaitLine(api, renter, first, "written ").substring("written ".length());

    String snapshotId = stopWithSnapshot(api, renter, first);
    JsonNode ended = RentingSupport.awaitStatus(api, renter, first, "ended");
    assertEquals("stopped_by_renter", ended.get("end_reason").asText());
    assertEquals(snapshotId, ended.get("snapshot_id").asText(), "the rental names its snapshot");

    JsonNode ready = awaitSnapshot(api, renter, snapshotId, "ready");
    assertTrue(
        ready.get("size_bytes").asLong() > 6_000_000, "random bytes do not compress: " + ready);
    assertEquals(first, ready.get("rental_id").asText());
    assertEquals("eu-nl", ready.get("region").asText());
    assertTrue(ready.get("sha256").asText().matches("[0-9a-f]{64}"), ready.toString());

    // restored on the other host, in the other region, before the command runs
    String second =
        launch(
            api,
            renter,
            "us-east",
            "echo \"restored $(sha256sum data.bin | cut -c1-64) $(cat sub/note) $(readlink link)\";"
                + " sleep 3600",
            ",\"restore\":\"" + snapshotId + "\"");
    String restored = awaitLine(api, renter, second, "restored ");
    assertEquals("restored " + written + " hello data.bin", restored);
    api.post("/v1/rentals/" + second + "/stop", renter.apiKey(), "{}").expect(202);
    RentingSupport.awaitStatus(api, renter, second, "ended");

    // storage is metered by the second while it is kept, and paid from the balance
    eventually(
        WAIT,
        () -> {
          JsonNode now = api.get("/v1/snapshots/" + snapshotId, renter.apiKey()).json();
          assertTrue(Money.parse(now.get("cost").asText()) > 0, now.toString());
        });
    JsonNode deleted =
        api.delete("/v1/snapshots/" + snapshotId, renter.apiKey()).expect(200).json();
    assertEquals("deleted", deleted.get("status").asText(), deleted.toString());
    long cost = Money.parse(deleted.get("cost").asText());
    assertTrue(cost > 0, deleted.toString());
    // the deletion's last capture lands after its answer, and the audit reads the ledger's read
    // side: both are waited for
    eventually(
        WAIT,
        () -> {
          JsonNode audit = api.audit();
          assertTrue(Money.parse(audit.get("storage_revenue").asText()) >= cost, audit.toString());
        });
    assertConserved(api);

    // a deleted snapshot is never restored, and costs nothing more
    api.post(
            "/v1/rentals",
            renter.apiKey(),
            "{\"gpu\":\"h100-80gb\",\"count\":1,\"max_price_per_gpu_hour\":\"3.00\","
                + "\"image\":\"ubuntu:24.04\",\"restore\":\""
                + snapshotId
                + "\"}")
        .expectProblem(409, "snapshot_not_ready");
    assertEquals(
        deleted.get("cost").asText(),
        api.get("/v1/snapshots/" + snapshotId, renter.apiKey()).json().get("cost").asText());
    JsonNode listed = api.get("/v1/snapshots?status=deleted", renter.apiKey()).expect(200).json();
    assertEquals(snapshotId, listed.get("snapshots").get(0).get("id").asText(), listed.toString());
  }

  @Test
  void anotherRentersSnapshotIsNotFoundAnywhere() throws Exception {
    ApiClient.Customer owner = RentingSupport.renter(api, "Owner", "50.00");
    ApiClient.Customer other = RentingSupport.renter(api, "Other", "50.00");
    String id = launch(api, owner, "eu-nl", writer(1), "");
    awaitLine(api, owner, id, "written ");
    String snapshotId = stopWithSnapshot(api, owner, id);
    awaitSnapshot(api, owner, snapshotId, "ready");

    api.get("/v1/snapshots/" + snapshotId, other.apiKey()).expectProblem(404, "not_found");
    api.delete("/v1/snapshots/" + snapshotId, other.apiKey()).expectProblem(404, "not_found");
    api.post(
            "/v1/rentals",
            other.apiKey(),
            "{\"gpu\":\"h100-80gb\",\"count\":1,\"max_price_per_gpu_hour\":\"3.00\","
                + "\"image\":\"ubuntu:24.04\",\"restore\":\""
                + snapshotId
                + "\"}")
        .expectProblem(404, "not_found");
    JsonNode theirs = api.get("/v1/snapshots", other.apiKey()).expect(200).json();
    assertEquals(0, theirs.get("snapshots").size(), theirs.toString());
    // still the owner's, untouched
    assertEquals(
        "ready",
        api.get("/v1/snapshots/" + snapshotId, owner.apiKey()).json().get("status").asText());
    api.delete("/v1/snapshots/" + snapshotId, owner.apiKey()).expect(200);
    assertConserved(api);
  }

  @Test
  void anAgentClosedInTheMiddleOfAnUploadResumesItWhenItStartsAgain() throws Exception {
    Path state = temp.resolve("agent-restarting");
    Agent agent = host("eu-fr", state);
    agents.add(agent);
    ApiClient.Customer renter = RentingSupport.renter(api, "Interrupted", "100.00");
    String id = launch(api, renter, "eu-fr", writer(24), "");
    String written = awaitLine(api, renter, id, "written ").substring("written ".length());
    String snapshotId = stopWithSnapshot(api, renter, id);
    RentingSupport.awaitStatus(api, renter, id, "ended");

    // the agent goes away while the snapshot is still uploading (or just after it finished:
    // either way nothing may be lost)
    agent.close();
    agents.remove(agent);
    JsonNode meanwhile = api.get("/v1/snapshots/" + snapshotId, renter.apiKey()).json();
    assertNotEquals("failed", meanwhile.get("status").asText(), meanwhile.toString());

    Agent again =
        Agent.start(
            AgentConfig.simulated("ws://127.0.0.1:" + node.httpPort(), null, state, "h100-80gb:1"));
    agents.add(again);
    again.verified().get(WAIT.toSeconds(), TimeUnit.SECONDS);
    awaitSnapshot(api, renter, snapshotId, "ready");

    String restored =
        launch(
            api,
            renter,
            "eu-fr",
            "echo \"restored $(sha256sum data.bin | cut -c1-64)\"; sleep 3600",
            ",\"restore\":\"" + snapshotId + "\"");
    assertEquals("restored " + written, awaitLine(api, renter, restored, "restored "));
    api.post("/v1/rentals/" + restored + "/stop", renter.apiKey(), "{}").expect(202);
    RentingSupport.awaitStatus(api, renter, restored, "ended");
    api.delete("/v1/snapshots/" + snapshotId, renter.apiKey()).expect(200);
    assertConserved(api);
  }
}
