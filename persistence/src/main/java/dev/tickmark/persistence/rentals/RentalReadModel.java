package dev.tickmark.persistence.rentals;

import dev.tickmark.engine.rental.Rental;
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

/**
 * The renter's rentals, newest first, with cursor paging (refused requests are not listed), and the
 * rentals that ran on one host, for its provider.
 */
public final class RentalReadModel {
  public record RentalRow(
      long rowId,
      String rentalId,
      String status,
      String gpu,
      int count,
      String tier,
      String region,
      long maxPricePerGpuHour,
      Long pricePerGpuHour,
      boolean simulated,
      Instant createdAt,
      Instant matchedAt,
      Instant startedAt,
      Instant endedAt,
      String endReason,
      long billedSeconds,
      long cost,
      Instant preemptionDeadline,
      String snapshotId,
      Integer exitCode,
      String image,
      List<String> command,
      Boolean network,
      Long maxTotal,
      String restore,
      String runtime,
      String hostRuntime,
      long refunded) {}

  /**
   * A rental that ran on a host: what its provider sees (no image or command), what it earned the
   * provider (µ€, through its latest settlement, less what refunds took back), and its renter,
   * which only an operator is shown.
   */
  public record HostRentalRow(
      long rowId,
      String rentalId,
      String renterId,
      String status,
      String gpu,
      int count,
      String tier,
      Long pricePerGpuHour,
      boolean simulated,
      Instant matchedAt,
      Instant startedAt,
      Instant endedAt,
      String endReason,
      long billedSeconds,
      long providerEarned) {}

  /**
   * Everything that ran on one host: how many rentals were matched to it, the card-seconds billed
   * (seconds × cards) and what they earned the provider (µ€).
   */
  public record HostTotals(long rentals, long cardSeconds, long providerEarned) {}

  private final Jdbc jdbc;
  private final ProjectionProgress progress;

  public RentalReadModel(Jdbc jdbc) {
    this.jdbc = jdbc;
    this.progress = new ProjectionProgress(jdbc);
  }

  /**
   * Until the table holds every rental event in the journal now, or {@code within} has passed
   * ({@code false}). All slices: a rental just launched is a new entity, which the renter's id does
   * not lead to; see {@link ProjectionProgress}.
   */
  public CompletionStage<Boolean> awaitWritten(Duration within) {
    return progress.awaitAll(RentalProjection.NAME, Rental.allTags(), within);
  }

  /**
   * {@code after}: the {@code rowId} of the last row of the previous page (0 for the first page).
   */
  public CompletionStage<List<RentalRow>> byRenter(
      String renterId, String status, long after, int limit) {
    String sql =
        "SELECT row_id, rental_id, status, gpu, card_count, tier, region, max_price_per_gpu_hour, price_per_gpu_hour,"
            + " simulated, created_at, matched_at, started_at, ended_at, end_reason, billed_seconds, cost, preemption_deadline,"
            // the snapshot kept at its stop, from the snapshots read model (one per rental)
            + " (SELECT s.snapshot_id FROM snapshots s WHERE s.rental_id = rentals.rental_id LIMIT 1),"
            + " exit_code, image, command, network, max_total, restore, runtime, host_runtime, refunded"
            + " FROM rentals WHERE renter_id = ? AND status <> 'refused'"
            + (status == null ? "" : " AND status = ?")
            + (after > 0 ? " AND row_id < ?" : "")
            + " ORDER BY row_id DESC LIMIT ?";
    return jdbc.run(
        connection -> {
          try (PreparedStatement st = connection.prepareStatement(sql)) {
            int i = 1;
            st.setString(i++, renterId);
            if (status != null) st.setString(i++, status);
            if (after > 0) st.setLong(i++, after);
            st.setInt(i, limit);
            try (ResultSet rs = st.executeQuery()) {
              List<RentalRow> rows = new ArrayList<>();
              while (rs.next()) rows.add(row(rs));
              return rows;
            }
          }
        });
  }

  /**
   * The rentals matched to {@code hostId}, newest first; {@code after}: the {@code rowId} of the
   * last row of the previous page (0 for the first page).
   */
  public CompletionStage<List<HostRentalRow>> byHost(String hostId, long after, int limit) {
    String sql =
        "SELECT row_id, rental_id, status, gpu, card_count, tier, price_per_gpu_hour, simulated,"
            + " matched_at, started_at, ended_at, end_reason, billed_seconds,"
            + " provider_earned - provider_reversed, renter_id"
            + " FROM rentals WHERE host_id = ?"
            + (after > 0 ? " AND row_id < ?" : "")
            + " ORDER BY row_id DESC LIMIT ?";
    return jdbc.run(
        connection -> {
          try (PreparedStatement st = connection.prepareStatement(sql)) {
            int i = 1;
            st.setString(i++, hostId);
            if (after > 0) st.setLong(i++, after);
            st.setInt(i, limit);
            try (ResultSet rs = st.executeQuery()) {
              List<HostRentalRow> rows = new ArrayList<>();
              while (rs.next()) {
                long price = rs.getLong(7);
                Long pricePerGpuHour = rs.wasNull() ? null : price;
                rows.add(
                    new HostRentalRow(
                        rs.getLong(1),
                        rs.getString(2),
                        rs.getString(15),
                        rs.getString(3),
                        rs.getString(4),
                        rs.getInt(5),
                        rs.getString(6),
                        pricePerGpuHour,
                        rs.getBoolean(8),
                        instant(rs.getTimestamp(9)),
                        instant(rs.getTimestamp(10)),
                        instant(rs.getTimestamp(11)),
                        rs.getString(12),
                        rs.getLong(13),
                        rs.getLong(14)));
              }
              return rows;
            }
          }
        });
  }

  /** One page of a host's rentals, and the host's totals over all of them (not only the page). */
  public record HostPage(List<HostRentalRow> rows, HostTotals totals) {}

  /** {@link #byHost} and {@link #hostTotals} together: what a host's rentals page shows. */
  public CompletionStage<HostPage> hostPage(String hostId, long after, int limit) {
    return byHost(hostId, after, limit).thenCombine(hostTotals(hostId), HostPage::new);
  }

  /** {@link HostTotals} of every rental matched to {@code hostId}. */
  public CompletionStage<HostTotals> hostTotals(String hostId) {
    return jdbc.run(
        connection -> {
          try (PreparedStatement st =
              connection.prepareStatement(
                  "SELECT count(*), COALESCE(SUM(billed_seconds * card_count), 0),"
                      + " COALESCE(SUM(provider_earned - provider_reversed), 0) FROM rentals"
                      + " WHERE host_id = ?")) {
            st.setString(1, hostId);
            try (ResultSet rs = st.executeQuery()) {
              rs.next();
              return new HostTotals(rs.getLong(1), rs.getLong(2), rs.getLong(3));
            }
          }
        });
  }

  /** Ids of rentals that have not finished, for waking them after a node was lost. */
  public CompletionStage<List<String>> unfinished() {
    return jdbc.run(
        connection -> {
          try (PreparedStatement st =
                  connection.prepareStatement(
                      "SELECT rental_id FROM rentals WHERE status IN ('pending', 'provisioning', 'running', 'stopping')");
              ResultSet rs = st.executeQuery()) {
            List<String> ids = new ArrayList<>();
            while (rs.next()) ids.add(rs.getString(1));
            return ids;
          }
        });
  }

  /**
   * How many rentals the read side holds in each status (the whole cluster's, as projected so far).
   */
  public CompletionStage<java.util.Map<String, Long>> countByStatus() {
    return jdbc.run(
        connection -> {
          try (PreparedStatement st =
                  connection.prepareStatement(
                      "SELECT status, count(*) FROM rentals GROUP BY status");
              ResultSet rs = st.executeQuery()) {
            java.util.Map<String, Long> counts = new java.util.TreeMap<>();
            while (rs.next()) counts.put(rs.getString(1), rs.getLong(2));
            return counts;
          }
        });
  }

  private static RentalRow row(ResultSet rs) throws SQLException {
    long price = rs.getLong(9);
    Long pricePerGpuHour = rs.wasNull() ? null : price;
    return new RentalRow(
        rs.getLong(1),
        rs.getString(2),
        rs.getString(3),
        rs.getString(4),
        rs.getInt(5),
        rs.getString(6),
        rs.getString(7),
        rs.getLong(8),
        pricePerGpuHour,
        rs.getBoolean(10),
        instant(rs.getTimestamp(11)),
        instant(rs.getTimestamp(12)),
        instant(rs.getTimestamp(13)),
        instant(rs.getTimestamp(14)),
        rs.getString(15),
        rs.getLong(16),
        rs.getLong(17),
        instant(rs.getTimestamp(18)),
        rs.getString(19),
        rs.getObject(20, Integer.class),
        rs.getString(21),
        RentalProjection.commandFrom(rs.getString(22)),
        rs.getObject(23, Boolean.class),
        rs.getObject(24, Long.class),
        rs.getString(25),
        rs.getString(26),
        rs.getString(27),
        rs.getLong(28));
  }

  private static Instant instant(Timestamp t) {
    return t == null ? null : t.toInstant();
  }
}
