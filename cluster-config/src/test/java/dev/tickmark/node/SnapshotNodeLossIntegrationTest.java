package dev.tickmark.node;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import dev.tickmark.agent.Agent;
import dev.tickmark.persistence.DatabaseSettings;
import dev.tickmark.persistence.TestDatabase;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * A node killed with SIGKILL while a host uploads a snapshot through it, then started again on the
 * same PostgreSQL and port: the agent goes on from the chunks the engine already holds and the
 * snapshot becomes ready with every chunk of its manifest stored (never ready with one missing),
 * restored intact; the audit is conserved.
 */
class SnapshotNodeLossIntegrationTest {
  static final Duration RECONNECT = Duration.ofSeconds(90);

  private final List<Process> nodes = new ArrayList<>();
  private Agent agent;

  @AfterEach
  void cleanUp() throws Exception {
    if (agent != null) agent.close();
    for (Process p : nodes) {
      if (p.isAlive()) {
        p.destroy();
        if (!p.waitFor(30, TimeUnit.SECONDS)) p.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
      }
    }
  }

  private Process startNode(DatabaseSettings db, int httpPort, Path log) throws Exception {
    Process process =
        SingleNodeProcess.start(
            db, httpPort, log, List.of("tickmark.snapshots.upload-reminder=1s"));
    nodes.add(process);
    return process;
  }

  @Test
  void anUploadCutByANodeLossGoesOnFromWhatWasStoredOnceTheNodeIsBack() throws Exception {
    DatabaseSettings db = TestDatabase.fresh("snapshot_node_loss");
    int httpPort = SingleNodeProcess.freePort();
    Path logs = Files.createDirectories(Path.of("target", "snapshot-node-loss"));
    Path temp = Files.createTempDirectory("tickmark-snapshot-node-loss");
    Process first = startNode(db, httpPort, logs.resolve("node-1.log"));
    // the node's client address: ApiClient is the only thing the helpers need of a node
    ApiClient api = new ApiClient("http://127.0.0.1:" + httpPort);
    ApiClient.Customer provider = api.signUp("Provider");
    agent = RentingSupport.listedHostAt(httpPort, api, provider, temp.resolve("agent"), "eu-nl", 1);

    ApiClient.Customer renter = RentingSupport.renter(api, "Renter", "50");
    String id = SnapshotSupport.launch(api, renter, "eu-nl", SnapshotSupport.writer(40), "");
    String written =
        SnapshotSupport.awaitLine(api, renter, id, "written ").substring("written ".length());
    String snapshotId = SnapshotSupport.stopWithSnapshot(api, renter, id);

    // killed as soon as the manifest is in and a first chunk is stored: most of the ten are still
    // on their way (polled often, so that the kill lands in the middle of the upload)
    long until = System.nanoTime() + RECONNECT.toNanos();
    while (manifestChunks(db, snapshotId) == 0
        || manifestChunks(db, snapshotId) == missingChunks(db, snapshotId)) {
      assertTrue(System.nanoTime() < until, "the upload did not start");
      Thread.sleep(10); // polling the database with a deadline
    }
    first.destroyForcibly();
    assertTrue(first.waitFor(30, TimeUnit.SECONDS), "the killed node is gone");
    int storedAtKill = manifestChunks(db, snapshotId) - missingChunks(db, snapshotId);
    System.out.printf(
        "snapshot %s: node killed with %d of %d chunks stored%n",
        snapshotId, storedAtKill, manifestChunks(db, snapshotId));

    startNode(db, httpPort, logs.resolve("node-2.log"));
    JsonNode ready = null;
    long deadline = System.nanoTime() + RECONNECT.toNanos();
    while (ready == null) {
      ApiClient.Reply reply = api.get("/v1/snapshots/" + snapshotId, renter.apiKey());
      if (reply.status() == 503) {
        // the killed node's shard leases run out before its entities come back here: until then
        // the API says so (503 unavailable, retry), as a client sees after a node loss
        reply.expectProblem(503, "unavailable");
        assertTrue(System.nanoTime() < deadline, "the snapshot never answered again");
        Thread.sleep(200); // polling with a deadline
        continue;
      }
      JsonNode now = reply.expect(200).json();
      String status = now.get("status").asText();
      // whatever the timing, the snapshot is never ready while a chunk of it is missing
      if (status.equals("ready")) {
        assertEquals(0, missingChunks(db, snapshotId), "ready with every chunk: " + now);
        ready = now;
      } else {
        assertEquals("uploading", status, "resumed, not failed: " + now);
        assertTrue(System.nanoTime() < deadline, "not ready in time: " + now);
        Thread.sleep(200); // polling with a deadline, every status looked at
      }
    }

    String restored =
        SnapshotSupport.launch(
            api,
            renter,
            "eu-nl",
            "echo \"restored $(sha256sum data.bin | cut -c1-64)\"; sleep 3600",
            ",\"restore\":\"" + snapshotId + "\"");
    assertEquals(
        "restored " + written, SnapshotSupport.awaitLine(api, renter, restored, "restored "));
    api.post("/v1/rentals/" + restored + "/stop", renter.apiKey(), "{}").expect(202);
    RentingSupport.awaitStatus(api, renter, restored, "ended");
    api.delete("/v1/snapshots/" + snapshotId, renter.apiKey()).expect(200);
    SnapshotSupport.assertConserved(api);
  }

  private static int manifestChunks(DatabaseSettings db, String snapshotId) {
    return count(db, "SELECT count(*) FROM snapshot_manifests WHERE snapshot_id = ?", snapshotId);
  }

  private static int missingChunks(DatabaseSettings db, String snapshotId) {
    return count(
        db,
        "SELECT count(*) FROM snapshot_manifests m LEFT JOIN snapshot_chunks c ON c.sha256 = m.sha256"
            + " WHERE m.snapshot_id = ? AND c.sha256 IS NULL",
        snapshotId);
  }

  /** Read from the database itself: the node may be down. */
  private static int count(DatabaseSettings db, String sql, String snapshotId) {
    try (Connection c = DriverManager.getConnection(db.url(), db.user(), db.password());
        PreparedStatement st = c.prepareStatement(sql)) {
      st.setString(1, snapshotId);
      try (ResultSet rs = st.executeQuery()) {
        rs.next();
        return rs.getInt(1);
      }
    } catch (java.sql.SQLException e) {
      throw new IllegalStateException(e);
    }
  }
}
