package dev.tickmark.persistence.snapshots;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import dev.tickmark.engine.snapshot.Snapshot;
import dev.tickmark.persistence.DatabaseSettings;
import dev.tickmark.persistence.Jdbc;
import dev.tickmark.persistence.Migrations;
import dev.tickmark.persistence.TestDatabase;
import java.time.Instant;
import java.util.List;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.Executors;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** Snapshot events into the {@code snapshots} table, its list and the account's bytes. */
class SnapshotProjectionTest {
  static DatabaseSettings db;
  static Jdbc jdbc;
  static SnapshotReadModel readModel;
  static final Instant AT = Instant.parse("2026-01-01T00:00:00Z");

  @BeforeAll
  static void start() throws Exception {
    db = TestDatabase.fresh("snapshotprojection");
    Migrations.migrate(db);
    jdbc = Jdbc.create(db, "snapshotprojection-test", Executors.newFixedThreadPool(2));
    readModel = new SnapshotReadModel(jdbc);
  }

  @AfterAll
  static void stop() {
    if (jdbc != null) jdbc.close();
  }

  static <T> T join(CompletionStage<T> stage) {
    return stage.toCompletableFuture().join();
  }

  static void feed(String id, Snapshot.Event... events) {
    join(
        jdbc.transaction(
            c -> {
              for (Snapshot.Event e : events) SnapshotProjection.apply(c, id, e);
              return null;
            }));
  }

  static Snapshot.Created created(String renter, int n) {
    return new Snapshot.Created(
        renter, "rnt_" + n, "host_" + n, "h100", "eu-west", AT.plusSeconds(n));
  }

  static SnapshotReadModel.SnapshotRow only(String renter, String id) {
    return join(readModel.byRenter(renter, null, 0, 100)).stream()
        .filter(r -> r.snapshotId().equals(id))
        .findFirst()
        .orElseThrow();
  }

  @Test
  void followsASnapshotThroughItsLife() {
    String id = "snap_life";
    feed(id, created("acc_life", 1));
    SnapshotReadModel.SnapshotRow r = only("acc_life", id);
    assertEquals("uploading", r.status());
    assertEquals("rnt_1", r.rentalId());
    assertEquals("host_1", r.hostId());
    assertEquals(0, r.sizeBytes());

    feed(
        id,
        new Snapshot.ManifestRecorded(5_000_000, "ab".repeat(32), 2, AT.plusSeconds(10)),
        new Snapshot.Ready(AT.plusSeconds(20), 1000, AT.plusSeconds(20), 100_000L),
        new Snapshot.Settled(3600, 17, AT.plusSeconds(3620)),
        new Snapshot.HoldExtended(2000, AT.plusSeconds(3620)),
        new Snapshot.Suspended("insufficient_funds", AT.plusSeconds(7220)));
    r = only("acc_life", id);
    assertEquals("suspended", r.status());
    assertEquals(5_000_000, r.sizeBytes());
    assertEquals("ab".repeat(32), r.sha256());
    assertEquals(2, r.chunkCount());
    assertEquals(AT.plusSeconds(20), r.readyAt());
    assertEquals(3600, r.billedSeconds());
    assertEquals(17, r.cost());
    assertEquals(AT.plusSeconds(7220), r.suspendedAt());

    feed(id, new Snapshot.Resumed(AT.plusSeconds(8000)));
    assertEquals("ready", only("acc_life", id).status());
    assertNull(only("acc_life", id).suspendedAt());

    feed(id, new Snapshot.Deleted(true, 9000, 42, AT.plusSeconds(9020)));
    r = only("acc_life", id);
    assertEquals("deleted", r.status());
    assertEquals(9000, r.billedSeconds());
    assertEquals(42, r.cost());
    assertEquals(AT.plusSeconds(9020), r.endedAt());
  }

  @Test
  void aFailedUploadKeepsItsCodeAndDetail() {
    feed(
        "snap_fail",
        created("acc_fail", 2),
        new Snapshot.UploadFailed("quota_exceeded", "over 100 GiB", AT.plusSeconds(5)));
    SnapshotReadModel.SnapshotRow r = only("acc_fail", "snap_fail");
    assertEquals("failed", r.status());
    assertEquals("quota_exceeded", r.failure());
    assertEquals("over 100 GiB", r.failureDetail());
    assertEquals(AT.plusSeconds(5), r.endedAt());
  }

  @Test
  void aCreatedDeliveredTwiceIsOneRow() {
    feed("snap_twice", created("acc_twice", 3), created("acc_twice", 3));
    assertEquals(1, join(readModel.byRenter("acc_twice", null, 0, 100)).size());
  }

  @Test
  void listsARentersSnapshotsNewestFirstByPageAndStatus() {
    String renter = "acc_pages";
    for (int i = 0; i < 5; i++) feed("snap_p" + i, created(renter, 10 + i));
    feed("snap_p1", new Snapshot.UploadFailed("agent_failed", "x", AT));
    feed("snap_elsewhere", created("acc_someone_else", 20));

    List<SnapshotReadModel.SnapshotRow> first = join(readModel.byRenter(renter, null, 0, 2));
    assertEquals(List.of("snap_p4", "snap_p3"), ids(first));
    List<SnapshotReadModel.SnapshotRow> second =
        join(readModel.byRenter(renter, null, first.get(1).rowId(), 2));
    assertEquals(List.of("snap_p2", "snap_p1"), ids(second));
    List<SnapshotReadModel.SnapshotRow> third =
        join(readModel.byRenter(renter, null, second.get(1).rowId(), 2));
    assertEquals(List.of("snap_p0"), ids(third));
    assertEquals(List.of("snap_p1"), ids(join(readModel.byRenter(renter, "failed", 0, 10))));
    assertEquals(4, join(readModel.byRenter(renter, "uploading", 0, 10)).size());
  }

  @Test
  void countsTheAccountsLiveBytesOtherThanTheOneAsked() {
    String renter = "acc_quota";
    feed(
        "snap_q_up",
        created(renter, 30),
        new Snapshot.ManifestRecorded(100, "a".repeat(64), 1, AT));
    feed(
        "snap_q_ready",
        created(renter, 31),
        new Snapshot.ManifestRecorded(1_000, "b".repeat(64), 1, AT),
        new Snapshot.Ready(AT, 1, AT, 100_000L));
    feed(
        "snap_q_susp",
        created(renter, 32),
        new Snapshot.ManifestRecorded(10_000, "c".repeat(64), 1, AT),
        new Snapshot.Ready(AT, 1, AT, 100_000L),
        new Snapshot.Suspended("insufficient_funds", AT));
    feed(
        "snap_q_failed",
        created(renter, 33),
        new Snapshot.ManifestRecorded(100_000, "d".repeat(64), 1, AT),
        new Snapshot.UploadFailed("snapshot_too_large", "x", AT));
    feed(
        "snap_q_deleted",
        created(renter, 34),
        new Snapshot.ManifestRecorded(1_000_000, "e".repeat(64), 1, AT),
        new Snapshot.Ready(AT, 1, AT, 100_000L),
        new Snapshot.Deleted(true, 1, 0, AT));
    feed(
        "snap_q_other",
        created("acc_quota_other", 35),
        new Snapshot.ManifestRecorded(10_000_000, "f".repeat(64), 1, AT));

    assertEquals(11_000, join(readModel.accountBytesElsewhere(renter, "snap_q_up")));
    assertEquals(10_100, join(readModel.accountBytesElsewhere(renter, "snap_q_ready")));
    assertEquals(11_100, join(readModel.accountBytesElsewhere(renter, "snap_new")));
    assertEquals(0, join(readModel.accountBytesElsewhere("acc_nobody", "snap_new")));
  }

  @Test
  void unfinishedAreTheSnapshotsWhoseEntityStillHasWorkOfItsOwn() {
    String renter = "acc_wake";
    feed("snap_w_up", created(renter, 40));
    feed("snap_w_ready", created(renter, 41), new Snapshot.Ready(AT, 1, AT, 100_000L));
    feed(
        "snap_w_susp",
        created(renter, 42),
        new Snapshot.Ready(AT, 1, AT, 100_000L),
        new Snapshot.Suspended("insufficient_funds", AT));
    feed(
        "snap_w_deleting",
        created(renter, 43),
        new Snapshot.Ready(AT, 1, AT, 100_000L),
        new Snapshot.Deleted(true, 5, 1, AT));
    feed(
        "snap_w_closed",
        created(renter, 44),
        new Snapshot.Ready(AT, 1, AT, 100_000L),
        new Snapshot.Deleted(true, 5, 1, AT),
        new Snapshot.Closed(AT));
    feed("snap_w_unready", created(renter, 45), new Snapshot.Deleted(true, 0, 0, AT));
    feed(
        "snap_w_failed", created(renter, 46), new Snapshot.UploadFailed("upload_timeout", "x", AT));

    List<String> unfinished =
        join(readModel.unfinished()).stream()
            .filter(id -> id.startsWith("snap_w_"))
            .sorted()
            .toList();
    // a deleted one is woken until its last capture and release are done (Closed); one deleted
    // before it was ever ready, and a failed one, have no money to move
    assertEquals(
        List.of("snap_w_deleting", "snap_w_ready", "snap_w_susp", "snap_w_up"), unfinished);
  }

  @Test
  void aRentalInTheRentersListShowsTheSnapshotItsStopKept() {
    join(
        jdbc.run(
            c -> {
              try (var st =
                  c.prepareStatement(
                      "INSERT INTO rentals(rental_id, renter_id, status, gpu, card_count, tier,"
                          + " max_price_per_gpu_hour, created_at, updated_at)"
                          + " VALUES (?, 'acc_kept', 'ended', 'h100', 1, 'on_demand', 1, now(), now())")) {
                for (String id : List.of("rnt_kept", "rnt_plain")) {
                  st.setString(1, id);
                  st.executeUpdate();
                }
              }
              return null;
            }));
    feed("snap_kept", new Snapshot.Created("acc_kept", "rnt_kept", "host_1", "h100", "eu", AT));
    var rows =
        join(
            new dev.tickmark.persistence.rentals.RentalReadModel(jdbc)
                .byRenter("acc_kept", null, 0, 10));
    assertEquals(2, rows.size());
    for (var r : rows)
      assertEquals(
          r.rentalId().equals("rnt_kept") ? "snap_kept" : null, r.snapshotId(), r.rentalId());
  }

  static List<String> ids(List<SnapshotReadModel.SnapshotRow> rows) {
    return rows.stream().map(SnapshotReadModel.SnapshotRow::snapshotId).toList();
  }
}
