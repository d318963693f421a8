package dev.tickmark.node;

import static dev.tickmark.node.Eventually.eventually;
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
import java.time.Duration;
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
  static final Duration WAIT = Duration.ofSeconds(60);
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

  /** Writes {@code megabytes} MB of random bytes, a note and a link, and prints the sha256. */
  static String writer(int megabytes) {
    return "head -c "
        + megabytes * 1_000_000
        + " /dev/urandom > data.bin && mkdir -p sub && echo hello > sub/note"
        + " && ln -s data.bin link && echo \"written $(sha256sum data.bin | cut -c1-64)\";"
        + " sleep 3600";
  }

  static String launch(ApiClient.Customer renter, String region, String script, String extra) {
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
  static String awaitLine(ApiClient.Customer renter, String id, String prefix) {
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

  static JsonNode awaitSnapshot(ApiClient.Customer renter, String snapshotId, String status) {
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
  static String stopWithSnapshot(ApiClient.Customer renter, String id) {
    JsonNode stopped =
        api.post("/v1/rentals/" + id + "/stop", renter.apiKey(), "{\"snapshot\":true}")
            .expect(202)
            .json()
            .get("rental");
    String snapshotId = stopped.get("snapshot_id").asText();
    assertTrue(snapshotId.startsWith("snap_"), stopped.toString());
    return snapshotId;
  }

  static void assertConserved() {
    eventually(
        WAIT,
        () -> {
          JsonNode audit = api.audit();
          assertTrue(audit.get("conserved").asBoolean(), audit.toString());
          assertEquals(
              Money.format(0), audit.get("pending_captures").asText(), "settled: " + audit);
        });
  }

  @Test
  void aWorkspaceKeptOnOneHostIsRestoredIntactOnAnotherInAnotherRegion() throws Exception {
    ApiClient.Customer renter = RentingSupport.renter(api, "Keeper", "100.00");
    String first = launch(renter, "eu-nl", writer(6), "");
    String written = awaitLine(renter, first, "written ").substring("written ".length());

    String snapshotId = stopWithSnapshot(renter, first);
    JsonNode ended = RentingSupport.awaitStatus(api, renter, first, "ended");
    assertEquals("stopped_by_renter", ended.get("end_reason").asText());
    assertEquals(snapshotId, ended.get("snapshot_id").asText(), "the rental names its snapshot");

    JsonNode ready = awaitSnapshot(renter, snapshotId, "ready");
    assertTrue(
        ready.get("size_bytes").asLong() > 6_000_000,
        "random bytes do not compress: " + ready);
    assertEquals(first, ready.get("rental_id").asText());
    assertEquals("eu-nl", ready.get("region").asText());
    assertTrue(ready.get("sha256").asText().matches("[0-9a-f]{64}"), ready.toString());

    // restored on the other host, in the other region, before the command runs
    String second =
        launch(
            renter,
            "us-east",
            "echo \"restored $(sha256sum data.bin | cut -c1-64) $(cat sub/note) $(readlink link)\";"
                + " sleep 3600",
            ",\"restore\":\"" + snapshotId + "\"");
    String restored = awaitLine(renter, second, "restored ");
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
    assertConserved();
    JsonNode audit = api.audit();
    assertTrue(Money.parse(audit.get("storage_revenue").asText()) >= cost, audit.toString());

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
    JsonNode listed =
        api.get("/v1/snapshots?status=deleted", renter.apiKey()).expect(200).json();
    assertEquals(snapshotId, listed.get("snapshots").get(0).get("id").asText(), listed.toString());
  }

  @Test
  void anotherRentersSnapshotIsNotFoundAnywhere() throws Exception {
    ApiClient.Customer owner = RentingSupport.renter(api, "Owner", "50.00");
    ApiClient.Customer other = RentingSupport.renter(api, "Other", "50.00");
    String id = launch(owner, "eu-nl", writer(1), "");
    awaitLine(owner, id, "written ");
    String snapshotId = stopWithSnapshot(owner, id);
    awaitSnapshot(owner, snapshotId, "ready");

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
    assertConserved();
  }

  @Test
  void anAgentClosedInTheMiddleOfAnUploadResumesItWhenItStartsAgain() throws Exception {
    Path state = temp.resolve("agent-restarting");
    Agent agent = host("eu-fr", state);
    agents.add(agent);
    ApiClient.Customer renter = RentingSupport.renter(api, "Interrupted", "100.00");
    String id = launch(renter, "eu-fr", writer(24), "");
    String written = awaitLine(renter, id, "written ").substring("written ".length());
    String snapshotId = stopWithSnapshot(renter, id);
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
    awaitSnapshot(renter, snapshotId, "ready");

    String restored =
        launch(
            renter,
            "eu-fr",
            "echo \"restored $(sha256sum data.bin | cut -c1-64)\"; sleep 3600",
            ",\"restore\":\"" + snapshotId + "\"");
    assertEquals("restored " + written, awaitLine(renter, restored, "restored "));
    api.post("/v1/rentals/" + restored + "/stop", renter.apiKey(), "{}").expect(202);
    RentingSupport.awaitStatus(api, renter, restored, "ended");
    api.delete("/v1/snapshots/" + snapshotId, renter.apiKey()).expect(200);
    assertConserved();
  }
}
