package dev.tickmark.persistence.snapshots;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.tickmark.engine.snapshot.Snapshot;
import dev.tickmark.persistence.DatabaseSettings;
import dev.tickmark.persistence.Jdbc;
import dev.tickmark.persistence.Migrations;
import dev.tickmark.persistence.TestDatabase;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.time.Instant;
import java.util.HexFormat;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** The PostgreSQL chunk store: idempotent writes, manifests, what is missing, the collector. */
class PgChunkStoreTest {
  static DatabaseSettings db;
  static Jdbc jdbc;
  static PgChunkStore store;
  static final Instant AT = Instant.parse("2026-01-01T00:00:00Z");

  @BeforeAll
  static void start() throws Exception {
    db = TestDatabase.fresh("chunkstore");
    Migrations.migrate(db);
    jdbc = Jdbc.create(db, "chunkstore-test", Executors.newFixedThreadPool(2));
    store = new PgChunkStore(jdbc);
  }

  @AfterAll
  static void stop() {
    if (jdbc != null) jdbc.close();
  }

  static byte[] bytes(String text) {
    return text.getBytes(StandardCharsets.UTF_8);
  }

  static String sha(byte[] b) throws Exception {
    return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(b));
  }

  static <T> T join(CompletionStage<T> stage) {
    return stage.toCompletableFuture().join();
  }

  static int count(String sql, String arg) {
    return join(
        jdbc.run(
            c -> {
              try (PreparedStatement st = c.prepareStatement(sql)) {
                if (arg != null) st.setString(1, arg);
                try (ResultSet rs = st.executeQuery()) {
                  rs.next();
                  return rs.getInt(1);
                }
              }
            }));
  }

  /** Makes a chunk look stored {@code seconds} ago, past or within a grace. */
  static void age(String sha, long seconds) {
    join(
        jdbc.run(
            c -> {
              try (PreparedStatement st =
                  c.prepareStatement(
                      "UPDATE snapshot_chunks SET stored_at = now() - make_interval(secs => ?) WHERE sha256 = ?")) {
                st.setDouble(1, seconds);
                st.setString(2, sha);
                return st.executeUpdate();
              }
            }));
  }

  static void snapshotRow(String id, Snapshot.Event... events) {
    join(
        jdbc.run(
            c -> {
              SnapshotProjection.apply(
                  c, id, new Snapshot.Created("acc_r", "rnt_" + id, "host_h", "h100", "eu", AT));
              for (Snapshot.Event e : events) SnapshotProjection.apply(c, id, e);
              return null;
            }));
  }

  @Test
  void storesAChunkOnceHoweverOftenItIsPut() throws Exception {
    byte[] b = bytes("chunk-once");
    String sha = sha(b);
    join(store.putChunk(sha, b));
    join(store.putChunk(sha, b));
    assertEquals(1, count("SELECT count(*) FROM snapshot_chunks WHERE sha256 = ?", sha));
    assertArrayEquals(b, join(store.chunk(sha)).orElseThrow());
    assertEquals(Optional.empty(), join(store.chunk(sha(bytes("never stored")))));
  }

  @Test
  void answersMissingChunksInManifestOrderWithoutDuplicates() throws Exception {
    String a = sha(bytes("m-a")), b = sha(bytes("m-b")), c = sha(bytes("m-c"));
    join(store.putChunk(b, bytes("m-b")));
    List<String> manifest = List.of(c, a, b, c, a);

    assertEquals(List.of(c, a), join(store.putManifest("snap_m", manifest)));
    assertEquals(Optional.of(manifest), join(store.manifest("snap_m")));
    assertEquals(List.of(c, a), join(store.missing("snap_m")));

    join(store.putChunk(c, bytes("m-c")));
    assertEquals(List.of(a), join(store.putManifest("snap_m", manifest)), "the same list again");
    join(store.putChunk(a, bytes("m-a")));
    assertEquals(List.of(), join(store.missing("snap_m")));
    assertEquals(Optional.empty(), join(store.manifest("snap_none")));
    assertTrue(join(store.names("snap_m", b)));
    assertEquals(false, join(store.names("snap_m", sha(bytes("not in it")))));
    assertEquals(false, join(store.names("snap_none", a)));
  }

  @Test
  void identicalChunksOfTwoSnapshotsAreStoredOnce() throws Exception {
    byte[] shared = bytes("shared-base-layer");
    String s = sha(shared), own = sha(bytes("own-1"));
    join(store.putManifest("snap_one", List.of(s, own)));
    join(store.putChunk(s, shared));
    join(store.putChunk(own, bytes("own-1")));

    assertEquals(List.of(), join(store.putManifest("snap_two", List.of(s))));
    assertEquals(1, count("SELECT count(*) FROM snapshot_chunks WHERE sha256 = ?", s));
    assertEquals(2, count("SELECT count(*) FROM snapshot_manifests WHERE sha256 = ?", s));
  }

  @Test
  void aDifferentManifestReplacesTheFirst() throws Exception {
    String a = sha(bytes("r-a")), b = sha(bytes("r-b")), c = sha(bytes("r-c"));
    join(store.putManifest("snap_r", List.of(a, b, c)));
    assertEquals(List.of(c, a), join(store.putManifest("snap_r", List.of(c, a))));
    assertEquals(Optional.of(List.of(c, a)), join(store.manifest("snap_r")));
    assertEquals(
        2, count("SELECT count(*) FROM snapshot_manifests WHERE snapshot_id = ?", "snap_r"));
  }

  @Test
  void collectsOnlyChunksNoLiveManifestNamesOnceTheyArePastTheGrace() throws Exception {
    byte[] live = bytes("c-live"), both = bytes("c-both"), dead = bytes("c-dead");
    byte[] young = bytes("c-young"), stray = bytes("c-stray");
    String l = sha(live), bo = sha(both), d = sha(dead), y = sha(young), st = sha(stray);
    snapshotRow("snap_live");
    snapshotRow("snap_failed", new Snapshot.UploadFailed("agent_failed", "disk full", AT));
    snapshotRow(
        "snap_deleted",
        new Snapshot.Ready(AT, 100, AT, 100_000L),
        new Snapshot.Deleted(true, 60, 3, AT.plusSeconds(60)));
    join(store.putManifest("snap_live", List.of(l, bo)));
    join(store.putManifest("snap_failed", List.of(bo, d, y)));
    join(store.putManifest("snap_deleted", List.of(d)));
    join(store.putManifest("snap_other", List.of(bo))); // no read-model row yet: kept
    for (byte[] b : List.of(live, both, dead, young, stray)) join(store.putChunk(sha(b), b));
    for (String s : List.of(l, bo, d, st)) age(s, 7200);

    int deleted = join(store.collectOrphans(3600));

    assertEquals(2, deleted, "the failed/deleted snapshots' own old chunk, and the stray one");
    assertTrue(join(store.chunk(l)).isPresent(), "a live snapshot's chunk");
    assertTrue(join(store.chunk(bo)).isPresent(), "named by live manifests too");
    assertTrue(join(store.chunk(y)).isPresent(), "within the grace");
    assertTrue(join(store.chunk(d)).isEmpty());
    assertTrue(join(store.chunk(st)).isEmpty());
    assertEquals(Optional.empty(), join(store.manifest("snap_failed")));
    assertEquals(Optional.empty(), join(store.manifest("snap_deleted")));
    assertEquals(Optional.of(List.of(l, bo)), join(store.manifest("snap_live")));

    age(y, 7200);
    assertEquals(1, join(store.collectOrphans(3600)), "past the grace now");
    assertEquals(0, join(store.collectOrphans(3600)));
  }

  @Test
  void aManifestNamingAnOldOrphanGivesItTheGraceAgain() throws Exception {
    byte[] b = bytes("reused-orphan");
    String s = sha(b);
    join(store.putChunk(s, b));
    age(s, 7200);
    // An upload started over names a chunk the store has long held unreferenced: naming it
    // refreshes (and, while the manifest's transaction runs, locks) it, so a collector running
    // alongside cannot delete it under the manifest that just answered it present.
    assertEquals(List.of(), join(store.putManifest("snap_reuse", List.of(s))));
    assertEquals(
        1,
        count(
            "SELECT count(*) FROM snapshot_chunks WHERE sha256 = ? AND stored_at > now() - interval '1 minute'",
            s));
  }

  /**
   * The collector and a manifest naming an old unreferenced chunk, run together: the chunk is held
   * (row-locked) so both are queued on it, then let go. Whichever wins, a chunk the manifest
   * answered as stored is still stored.
   */
  @Test
  void aCollectorRunningBesideAManifestNeverDeletesAChunkItAnsweredPresent() throws Exception {
    byte[] b = bytes("race-orphan");
    String s = sha(b);
    join(store.putChunk(s, b));
    age(s, 7200);
    try (Connection holder = DriverManager.getConnection(db.url(), db.user(), db.password());
        Connection watcher = DriverManager.getConnection(db.url(), db.user(), db.password())) {
      holder.setAutoCommit(false);
      try (PreparedStatement st =
          holder.prepareStatement("SELECT 1 FROM snapshot_chunks WHERE sha256 = ? FOR UPDATE")) {
        st.setString(1, s);
        st.executeQuery().close();
      }
      CompletableFuture<Integer> collected = store.collectOrphans(3600).toCompletableFuture();
      awaitWaiting(watcher, "DELETE FROM snapshot_chunks%", () -> collected.isDone());
      CompletableFuture<List<String>> missing =
          store.putManifest("snap_race", List.of(s)).toCompletableFuture();
      awaitWaiting(watcher, "UPDATE snapshot_chunks%", missing::isDone);
      holder.rollback();

      List<String> answered = missing.get(10, TimeUnit.SECONDS);
      collected.get(10, TimeUnit.SECONDS);
      assertTrue(
          answered.contains(s) || join(store.chunk(s)).isPresent(),
          "answered present (" + answered + ") but collected");
    }
  }

  /** Until a statement like {@code query} waits on a lock, or {@code done}; 10 s at most. */
  static void awaitWaiting(Connection watcher, String query, BooleanSupplier done)
      throws Exception {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    while (System.nanoTime() < deadline) {
      if (done.getAsBoolean()) return;
      try (PreparedStatement st =
          watcher.prepareStatement(
              "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                  + " AND wait_event_type = 'Lock' AND query LIKE ?")) {
        st.setString(1, query);
        try (ResultSet rs = st.executeQuery()) {
          rs.next();
          if (rs.getInt(1) > 0) return;
        }
      }
      LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(5));
    }
    throw new AssertionError("no statement like " + query + " waited on the held chunk");
  }
}
