package dev.tickmark.node;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import java.security.MessageDigest;
import java.util.HexFormat;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The snapshot routes as a node serves them (its config, its wiring, its schema), as far as they go
 * without the Snapshot entity: the renter's empty list and refusals, and the agent transfer routes'
 * authentication and body limits under the node's 64 KiB server limit.
 */
class SnapshotHttpIntegrationTest {
  static final String SID = "snap_0123456789abcdef01234567";

  static Node node;
  static ApiClient api;
  static ApiClient.Customer renter;
  static HostTestSupport.Registered host;

  @BeforeAll
  static void start() throws Exception {
    node = HostTestSupport.startNode("snapshot_http");
    api = new ApiClient(node.baseUrl());
    renter = api.signUp("Snapshot renter");
    host = HostTestSupport.register(node, api, api.signUp("Snapshot provider"), "eu-nl");
  }

  @AfterAll
  static void stop() throws Exception {
    if (host != null) host.agent().close();
    if (node != null) node.close();
  }

  static String sha(byte[] b) throws Exception {
    return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(b));
  }

  ApiClient.Reply putChunk(String sha, byte[] bytes, String bearer) {
    return api.sendBytes(
        "PUT",
        "/v1/agent/snapshots/" + SID + "/chunks/" + sha,
        bearer,
        bytes,
        Map.of()); // sendBytes labels it JSON; the route reads any body as bytes
  }

  @Test
  void aNewRenterHasNoSnapshotsAndBadRequestsAreProblems() {
    JsonNode list = api.get("/v1/snapshots", renter.apiKey()).expect(200).json();
    assertEquals(0, list.get("snapshots").size());
    assertTrue(list.get("next_after").isNull());
    api.get("/v1/snapshots?status=bogus", renter.apiKey()).expectProblem(400, "invalid_parameter");
    api.get("/v1/snapshots?limit=0", renter.apiKey()).expectProblem(400, "invalid_parameter");
    api.get("/v1/snapshots/snap_nope", renter.apiKey()).expectProblem(404, "not_found");
    api.delete("/v1/snapshots/snap_nope", renter.apiKey()).expectProblem(404, "not_found");
    api.get("/v1/snapshots", null).expectProblem(401, "unauthorized");
  }

  @Test
  void aLaunchNamingAMalformedSnapshotIsRefused() {
    api.post(
            "/v1/rentals",
            renter.apiKey(),
            "{\"gpu\":\"h100-80gb\",\"max_price_per_gpu_hour\":\"3.00\",\"image\":\"ubuntu:24.04\","
                + "\"restore\":\"rnt_0123456789abcdef01234567\"}")
        .expectProblem(400, "invalid_restore");
  }

  @Test
  void aStopBodyMustBeWellFormed() {
    api.post(
            "/v1/rentals/rnt_0123456789abcdef01234567/stop",
            renter.apiKey(),
            "{\"snapshot\":\"yes\"}")
        .expectProblem(400, "invalid_field");
  }

  @Test
  void agentTransfersNeedTheHostCredential() {
    byte[] b = "x".getBytes();
    putChunk("ab".repeat(32), b, null).expectProblem(401, "unauthorized");
    putChunk("ab".repeat(32), b, renter.apiKey()).expectProblem(401, "unauthorized");
    api.get("/v1/agent/rentals/rnt_0123456789abcdef01234567/restore", renter.apiKey())
        .expectProblem(401, "unauthorized");
    // the right shape, a wrong secret: the host's entity says no
    String forged = host.credential().substring(0, host.credential().length() - 4) + "0000";
    if (forged.equals(host.credential()))
      forged = host.credential().substring(0, host.credential().length() - 4) + "1111";
    putChunk("ab".repeat(32), b, forged).expectProblem(401, "unauthorized");
  }

  @Test
  void aChunkMayBeFourMebibytesButNoMoreAndMustHashToItsName() throws Exception {
    // over the node's 64 KiB body limit, under a chunk's: read whole and checked
    byte[] body = new byte[100 * 1024];
    putChunk("ab".repeat(32), body, host.credential()).expectProblem(422, "chunk_mismatch");
    byte[] big = new byte[4 * 1024 * 1024 + 1];
    ApiClient.Reply tooBig =
        putChunk(sha(big), big, host.credential()).expectProblem(413, "payload_too_large");
    assertTrue(tooBig.text("detail").contains("4194304"), "the chunk limit's answer: " + tooBig);
    putChunk("AB".repeat(32), body, host.credential()).expectProblem(400, "invalid_sha256");
    api.put("/v1/agent/snapshots/snap_bad/manifest", host.credential(), "{}")
        .expectProblem(404, "not_found");
    api.put("/v1/agent/snapshots/" + SID + "/manifest", host.credential(), "{\"chunks\":[]}")
        .expectProblem(400, "invalid_rental_id");
  }
}
