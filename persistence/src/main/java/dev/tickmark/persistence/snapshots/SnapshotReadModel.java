package dev.tickmark.persistence.snapshots;

import dev.tickmark.engine.snapshot.Snapshot;
import dev.tickmark.persistence.Jdbc;
import dev.tickmark.persistence.ProjectionProgress;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Timestamp;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletionStage;

/** A renter's snapshots, newest first, with cursor paging; and the bytes an account keeps. */
public final class SnapshotReadModel {
  public record SnapshotRow(
      long rowId,
      String snapshotId,
      String renterId,
      String status,
      String rentalId,
      String hostId,
      String gpu,
      String region,
      long sizeBytes,
      String sha256,
      int chunkCount,
      Instant createdAt,
      Instant readyAt,
      Instant endedAt,
      long billedSeconds,
      long cost,
      String failure,
      String failureDetail,
      Instant suspendedAt) {}

  private static final String COLUMNS =
      "row_id, snapshot_id, renter_id, status, rental_id, host_id, gpu, region, size_bytes, sha256,"
          + " chunk_count, created_at, ready_at, ended_at, billed_seconds, cost, failure, failure_detail,"
          + " suspended_at";

  private final Jdbc jdbc;
  private final ProjectionProgress progress;

  public SnapshotReadModel(Jdbc jdbc) {
    this.jdbc = jdbc;
    this.progress = new ProjectionProgress(jdbc);
  }

  /**
   * Until the table holds every snapshot event in the journal now, or {@code within} has passed
   * ({@code false}); as {@code RentalReadModel.awaitWritten}: a snapshot just created is a new
   * entity the renter's id does not lead to.
   */
  public CompletionStage<Boolean> awaitWritten(Duration within) {
    return progress.awaitAll(SnapshotProjection.NAME, Snapshot.allTags(), within);
  }

  /**
   * {@code after}: the {@code rowId} of the last row of the previous page (0 for the first page);
   * {@code status} null for all.
   */
  public CompletionStage<List<SnapshotRow>> byRenter(
      String renterId, String status, long after, int limit) {
    String sql =
        "SELECT "
            + COLUMNS
            + " FROM snapshots WHERE renter_id = ?"
            + (status == null ? "" : " AND status = ?")
            + (after > 0 ? " AND row_id < ?" : "")
            + " ORDER BY row_id DESC LIMIT ?";
    return jdbc.run(
        c -> {
          try (PreparedStatement st = c.prepareStatement(sql)) {
            int i = 1;
            st.setString(i++, renterId);
            if (status != null) st.setString(i++, status);
            if (after > 0) st.setLong(i++, after);
            st.setInt(i, limit);
            try (ResultSet rs = st.executeQuery()) {
              List<SnapshotRow> rows = new ArrayList<>();
              while (rs.next()) rows.add(row(rs));
              return rows;
            }
          }
        });
  }

  /**
   * The bytes of {@code renterId}'s uploading, ready and suspended snapshots other than {@code
   * exceptSnapshotId}: what counts against the quota beside that one (an uploading snapshot whose
   * manifest is not recorded yet counts 0).
   */
  public CompletionStage<Long> accountBytesElsewhere(String renterId, String exceptSnapshotId) {
    return jdbc.run(
        c -> {
          try (PreparedStatement st =
              c.prepareStatement(
                  "SELECT coalesce(sum(size_bytes), 0) FROM snapshots WHERE renter_id = ?"
                      + " AND snapshot_id <> ? AND status IN ('uploading', 'ready', 'suspended')")) {
            st.setString(1, renterId);
            st.setString(2, exceptSnapshotId);
            try (ResultSet rs = st.executeQuery()) {
              rs.next();
              return rs.getLong(1);
            }
          }
        });
  }

  /**
   * Snapshots whose entity still has work of its own (an upload to wait for, a meter to settle, a
   * last capture and release after a deletion): the ones a waker brings back after a node loss.
   */
  public CompletionStage<List<String>> unfinished() {
    return jdbc.run(
        c -> {
          try (PreparedStatement st =
                  c.prepareStatement(
                      "SELECT snapshot_id FROM snapshots WHERE status IN ('uploading', 'ready', 'suspended')"
                          // one never ready had no meter and no hold: nothing to close
                          + " OR (status = 'deleted' AND closed_at IS NULL AND ready_at IS NOT NULL)");
              ResultSet rs = st.executeQuery()) {
            List<String> ids = new ArrayList<>();
            while (rs.next()) ids.add(rs.getString(1));
            return ids;
          }
        });
  }

  private static SnapshotRow row(ResultSet rs) throws SQLException {
    return new SnapshotRow(
        rs.getLong(1),
        rs.getString(2),
        rs.getString(3),
        rs.getString(4),
        rs.getString(5),
        rs.getString(6),
        rs.getString(7),
        rs.getString(8),
        rs.getLong(9),
        rs.getString(10),
        rs.getInt(11),
        instant(rs.getTimestamp(12)),
        instant(rs.getTimestamp(13)),
        instant(rs.getTimestamp(14)),
        rs.getLong(15),
        rs.getLong(16),
        rs.getString(17),
        rs.getString(18),
        instant(rs.getTimestamp(19)));
  }

  private static Instant instant(Timestamp t) {
    return t == null ? null : t.toInstant();
  }
}
