package dev.tickmark.agent;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.tickmark.agent.snapshot.Chunks;
import dev.tickmark.agent.snapshot.Manifest;
import dev.tickmark.agent.snapshot.Snapshots;
import dev.tickmark.agent.snapshot.WorkspaceArchive;
import dev.tickmark.wire.AgentFrame;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.util.HashSet;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Snapshots end to end: real agents (process runtime) against {@link ScriptedNode}, whose {@link
 * SnapshotStore} serves the engine's snapshot endpoints. A workload writes a file of random bytes
 * (incompressible: three 4 MiB chunks) in its workspace; it is stopped with a snapshot, uploaded,
 * and restored on another host.
 */
class AgentSnapshotTest {
  private static final long WAIT_S = 30;
  private static final int DATA_BYTES = 10_000_000;

  @TempDir Path tmp;
  @TempDir Path marks; // outside every workspace: what the workloads tell the test

  private ScriptedNode node;
  private Agent agent;

  @BeforeEach
  void startNode() throws IOException {
    node = new ScriptedNode();
  }

  @AfterEach
  void stop() throws IOException {
    node.snapshots.release.countDown();
    if (agent != null) agent.close();
    node.close();
  }

  private Agent start(String token, Path dir) throws Exception {
    AgentConfig config =
        new AgentConfig(List.of(node.uri()), token, dir, SimulatedGpus.parse("h100-80gb:1"));
    Agent a =
        Agent.start(
            config,
            s ->
                new SimulatedHardware(
                    config.simulatedGpus(),
                    s.key().getPublic(),
                    new HardwareProbe(
                        Agent.VERSION,
                        s.path(),
                        (c, t) -> Optional.empty(),
                        Path.of("/proc"),
                        64 * 1024,
                        Clock.systemUTC()),
                    Agent.VERSION),
            s -> new ProcessRuntime(s.path(), Duration.ofMillis(500)));
    a.welcomed().get(WAIT_S, TimeUnit.SECONDS);
    return a;
  }

  private <T extends AgentFrame> T next(Class<T> type, String rentalId) throws Exception {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT_S);
    while (true) {
      ScriptedNode.Received r =
          node.received.poll(Math.max(1, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
      if (r == null) throw new AssertionError("no " + type.getSimpleName() + " for " + rentalId);
      if (type.isInstance(r.frame()) && r.frame().toString().contains(rentalId))
        return type.cast(r.frame());
      if (r.frame() instanceof AgentFrame.RentalFailed f
          && f.rentalId().equals(rentalId)
          && type != AgentFrame.RentalFailed.class)
        throw new AssertionError("rental " + rentalId + " failed: " + f.reason());
    }
  }

  private static void await(String what, BooleanSupplier done) throws InterruptedException {
    Eventually.until(WAIT_S, () -> what, done);
  }

  private static AgentFrame.StartRental startRental(
      String rentalId, String script, AgentFrame.Restore restore) {
    return new AgentFrame.StartRental(
        rentalId, List.of(0), null, List.of("sh", "-c", script), null, false, restore);
  }

  /** Starts a workload that writes {@code data.bin}, and waits for its sha256 (in marks). */
  private String runWriter(String rentalId) throws Exception {
    Path sum = marks.resolve(rentalId + ".sum");
    node.send(
        startRental(
            rentalId,
            "mkdir -p sub/empty && ln -s ../data.bin sub/link && head -c "
                + DATA_BYTES
                + " /dev/urandom > data.bin && sha256sum data.bin > "
                + sum
                + ".tmp && mv "
                + sum
                + ".tmp "
                + sum
                + " && exec sleep infinity",
            null));
    next(AgentFrame.RentalStarted.class, rentalId);
    await("the workload wrote its file", () -> Files.exists(sum));
    return Files.readString(sum).split("\\s+")[0];
  }

  private void stopWithSnapshot(String rentalId) throws Exception {
    node.send(new AgentFrame.StopRental(rentalId, true));
    next(AgentFrame.RentalStopped.class, rentalId);
  }

  private Path snapshotFolder(Path state, String sid) {
    return state.resolve(Snapshots.FOLDER).resolve(sid);
  }

  /** The uploaded snapshot: every chunk hashes to its name, and the whole to the manifest's. */
  private void assertStoredWhole(String sid) {
    SnapshotStore.Stored s = node.snapshots.manifests.get(sid);
    assertNotNull(s);
    for (String c : s.chunks()) assertEquals(c, Chunks.sha256(node.snapshots.chunks.get(c)));
    byte[] whole = node.snapshots.archive(sid);
    assertEquals(s.sizeBytes(), whole.length);
    assertEquals(s.sha256(), Chunks.sha256(whole));
    assertTrue(s.chunks().size() >= 3, "chunks: " + s.chunks().size());
  }

  @Test
  void uploadsTheKeptWorkspaceAndRestoresItOnAnotherHost() throws Exception {
    Path stateA = tmp.resolve("a");
    agent = start(node.newToken("host_a"), stateA);
    String sum = runWriter("rnt_a");
    stopWithSnapshot("rnt_a");
    Path kept = stateA.resolve("rentals/rnt_a/scratch");
    assertTrue(Files.isRegularFile(kept.resolve("data.bin")), "the workspace is kept");

    node.send(new AgentFrame.UploadSnapshot("rnt_a", "snap_a", List.of()));
    await("the upload completed", () -> node.snapshots.completed.containsKey("snap_a"));
    assertStoredWhole("snap_a");
    assertEquals("rnt_a", node.snapshots.manifests.get("snap_a").rentalId());
    await("the archive deleted", () -> !Files.exists(snapshotFolder(stateA, "snap_a")));
    assertFalse(Files.exists(stateA.resolve("rentals/rnt_a")), "the workspace is deleted");
    assertEquals(
        node.snapshots.manifests.get("snap_a").chunks().size(), node.snapshots.chunkPuts.size());
    agent.close();

    // another host restores it
    SnapshotStore.Stored s = node.snapshots.manifests.get("snap_a");
    node.snapshots.restores.put("rnt_b", "snap_a");
    agent = start(node.newToken("host_b"), tmp.resolve("b"));
    Path restoredSum = marks.resolve("rnt_b.sum");
    node.send(
        startRental(
            "rnt_b",
            "test -L sub/link && test -d sub/empty && sha256sum sub/link > "
                + restoredSum
                + ".tmp && mv "
                + restoredSum
                + ".tmp "
                + restoredSum
                + "; exec sleep infinity",
            new AgentFrame.Restore("snap_a", s.sha256(), s.sizeBytes())));
    next(AgentFrame.RentalStarted.class, "rnt_b");
    await("the restored workload read its file", () -> Files.exists(restoredSum));
    assertEquals(sum, Files.readString(restoredSum).split("\\s+")[0]);
    assertEquals(s.chunks().size(), node.snapshots.chunkGets.size());
    assertFalse(
        Files.exists(tmp.resolve("b").resolve(Snapshots.RESTORES).resolve("rnt_b.tar.zst")),
        "the downloaded archive is deleted once unpacked");
  }

  @Test
  void aBrokenUploadResumesWithoutResendingStoredChunks() throws Exception {
    Path state = tmp.resolve("a");
    agent = start(node.newToken("host_a"), state);
    runWriter("rnt_a");
    stopWithSnapshot("rnt_a");
    node.snapshots.dropChunkPutAfter = 1; // the second chunk's connection breaks
    node.send(new AgentFrame.UploadSnapshot("rnt_a", "snap_a", List.of()));
    await("the upload completed", () -> node.snapshots.completed.containsKey("snap_a"));
    assertStoredWhole("snap_a");
    List<String> puts = node.snapshots.chunkPuts;
    List<String> chunks = node.snapshots.manifests.get("snap_a").chunks();
    assertEquals(chunks.size() + 1, puts.size(), "one chunk sent again: " + puts);
    assertEquals(puts.get(1), puts.get(2), "the broken one, and only it, is sent again");
    assertEquals(Set.copyOf(chunks), new HashSet<>(puts));
  }

  @Test
  void anAgentRestartedMidUploadResumesAtTheNextReminder() throws Exception {
    Path state = tmp.resolve("a");
    String token = node.newToken("host_a");
    agent = start(token, state);
    runWriter("rnt_a");
    stopWithSnapshot("rnt_a");
    node.snapshots.holdChunkPutsAfter = 1;
    node.send(new AgentFrame.UploadSnapshot("rnt_a", "snap_a", List.of()));
    assertTrue(node.snapshots.held.await(WAIT_S, TimeUnit.SECONDS), "no chunk held");
    // a reminder while it is under way changes nothing; the stop_rental after it (answered once the
    // reminder has been handled: frames are handled in order) tells when it has been seen
    node.send(new AgentFrame.UploadSnapshot("rnt_a", "snap_a", List.of()));
    node.send(new AgentFrame.StopRental("rnt_probe", false));
    next(AgentFrame.RentalStopped.class, "rnt_probe");
    agent.close();
    Manifest m = readManifest(snapshotFolder(state, "snap_a"));
    assertNotNull(m, "the archive and its manifest outlive the agent");
    assertEquals(1, node.snapshots.chunks.size());
    String stored = node.snapshots.chunkPuts.get(0);
    assertEquals(1, node.snapshots.manifestPuts.size(), "the reminder under way was ignored");
    node.snapshots.holdChunkPutsAfter = -1;
    node.snapshots.release.countDown();

    agent = start(token, state);
    int putsBefore = node.snapshots.chunkPuts.size();
    node.send(new AgentFrame.UploadSnapshot("rnt_a", "snap_a", List.of(stored)));
    await("the upload completed", () -> node.snapshots.completed.containsKey("snap_a"));
    assertStoredWhole("snap_a");
    List<String> after =
        node.snapshots.chunkPuts.subList(putsBefore, node.snapshots.chunkPuts.size());
    assertFalse(after.contains(stored), "a stored chunk was sent again: " + after);
    assertEquals(m.chunks().size() - 1, after.size());
    await("the archive deleted", () -> !Files.exists(snapshotFolder(state, "snap_a")));
  }

  @Test
  void transientErrorsAndChunksMissingAtCompleteAreRetried() throws Exception {
    Path state = tmp.resolve("a");
    agent = start(node.newToken("host_a"), state);
    runWriter("rnt_a");
    stopWithSnapshot("rnt_a");
    node.snapshots.unavailableManifests.set(2);
    node.snapshots.loseAChunkAtComplete = true;
    node.send(new AgentFrame.UploadSnapshot("rnt_a", "snap_a", List.of()));
    await("the upload completed", () -> node.snapshots.completed.containsKey("snap_a"));
    assertStoredWhole("snap_a");
    assertEquals(3, node.snapshots.manifestPuts.size(), "two 503s, then the manifest");
    List<String> chunks = node.snapshots.manifests.get("snap_a").chunks();
    List<String> puts = node.snapshots.chunkPuts;
    assertEquals(chunks.size() + 1, puts.size(), puts.toString());
    assertEquals(chunks.get(0), puts.get(puts.size() - 1), "the chunk the engine missed, again");
  }

  private static Manifest readManifest(Path dir) throws IOException {
    Path f = dir.resolve(Manifest.FILE);
    if (!Files.exists(f)) return null;
    return dev.tickmark.wire.Frames.MAPPER.readValue(f.toFile(), Manifest.class);
  }

  @Test
  void aCorruptedChunkFailsTheRentalAndItsCommandNeverRuns() throws Exception {
    Path ws = Files.createDirectories(tmp.resolve("ws"));
    byte[] data = new byte[DATA_BYTES];
    new java.util.Random(7).nextBytes(data);
    Files.write(ws.resolve("data.bin"), data);
    Path archive = tmp.resolve("archive.tar.zst");
    WorkspaceArchive.write(ws, archive);
    SnapshotStore.Stored s = node.snapshots.put("snap_c", "rnt_old", archive);
    node.snapshots.restores.put("rnt_c", "snap_c");
    node.snapshots.corruptChunk = s.chunks().get(1);

    agent = start(node.newToken("host_c"), tmp.resolve("c"));
    Path ran = marks.resolve("ran");
    node.send(
        startRental(
            "rnt_c",
            "touch " + ran + "; exec sleep infinity",
            new AgentFrame.Restore("snap_c", s.sha256(), s.sizeBytes())));
    AgentFrame.RentalFailed failed = next(AgentFrame.RentalFailed.class, "rnt_c");
    assertTrue(failed.reason().startsWith("restore failed"), failed.reason());
    assertTrue(failed.reason().contains("chunk 1"), failed.reason());
    assertFalse(Files.exists(ran), "the command ran on a partial workspace");
    assertFalse(Files.exists(tmp.resolve("c/rentals/rnt_c/scratch"), LinkOption.NOFOLLOW_LINKS));

    // and a restore whose frame disagrees with the engine's manifest fails as well
    node.snapshots.corruptChunk = null;
    node.snapshots.restores.put("rnt_d", "snap_c");
    node.send(
        startRental(
            "rnt_d",
            "touch " + ran + "; exec sleep infinity",
            new AgentFrame.Restore("snap_c", "0".repeat(64), s.sizeBytes())));
    failed = next(AgentFrame.RentalFailed.class, "rnt_d");
    assertTrue(failed.reason().contains("does not match"), failed.reason());
    assertFalse(Files.exists(ran));
  }

  @Test
  void tooLargeDeletesTheArchiveAndSendsNoChunk() throws Exception {
    Path state = tmp.resolve("a");
    agent = start(node.newToken("host_a"), state);
    runWriter("rnt_a");
    stopWithSnapshot("rnt_a");
    node.snapshots.manifestStatus = 413;
    node.send(new AgentFrame.UploadSnapshot("rnt_a", "snap_a", List.of()));
    await("the manifest refused", () -> !node.snapshots.manifestPuts.isEmpty());
    await("the archive deleted", () -> !Files.exists(snapshotFolder(state, "snap_a")));
    assertEquals(List.of(), node.snapshots.chunkPuts);
    assertEquals(1, node.snapshots.manifestPuts.size());
    assertFalse(node.snapshots.completed.containsKey("snap_a"));
    // the upload deletes its archive just before it ends, and a reminder while it is under way is
    // ignored: the next reminder must come after it has ended
    await("the upload ended", () -> !agent.snapshotUploading("snap_a"));

    // nothing is left to upload: a later reminder says the workspace is gone
    node.send(new AgentFrame.UploadSnapshot("rnt_a", "snap_a", List.of()));
    await("failed told", () -> node.snapshots.failed.containsKey("snap_a"));
    assertEquals(Snapshots.WORKSPACE_GONE, node.snapshots.failed.get("snap_a"));
    assertEquals(1, node.snapshots.manifestPuts.size());
    assertEquals(List.of(), node.snapshots.chunkPuts);
  }
}
