package dev.tickmark.persistence.payouts;

import dev.tickmark.persistence.Jdbc;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Timestamp;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletionStage;

/** The operator's list of payout runs, newest first, and the runs not yet completed. */
public final class PayoutRunReadModel {
  /**
   * {@code total}/{@code count}: decided payouts not refused, as {@code PayoutRun.RunView} counts
   * them; {@code returnedTotal}/{@code returnedCount}: those the bank sent back.
   */
  public record RunRow(
      String runId,
      String status,
      long minimum,
      long total,
      int count,
      long paidTotal,
      int paidCount,
      int refusedCount,
      int skippedCount,
      Instant createdAt,
      Instant completedAt,
      long returnedTotal,
      int returnedCount) {}

  private final Jdbc jdbc;

  public PayoutRunReadModel(Jdbc jdbc) {
    this.jdbc = jdbc;
  }

  /** The latest {@code limit} runs, newest first. */
  public CompletionStage<List<RunRow>> latest(int limit) {
    return jdbc.run(
        connection -> {
          try (PreparedStatement st =
              connection.prepareStatement(
                  "SELECT run_id, status, minimum, decided_total - refused_total,"
                      + " decided_count - refused_count, paid_total, paid_count, refused_count, skipped_count, created_at, completed_at,"
                      + " returned_total, returned_count"
                      + " FROM payout_runs ORDER BY created_at DESC, run_id LIMIT ?")) {
            st.setInt(1, limit);
            try (ResultSet rs = st.executeQuery()) {
              List<RunRow> rows = new ArrayList<>();
              while (rs.next()) rows.add(row(rs));
              return rows;
            }
          }
        });
  }

  public CompletionStage<List<String>> unfinished() {
    return jdbc.run(
        connection -> {
          try (PreparedStatement st =
                  connection.prepareStatement(
                      "SELECT run_id FROM payout_runs WHERE status <> 'completed'");
              ResultSet rs = st.executeQuery()) {
            List<String> ids = new ArrayList<>();
            while (rs.next()) ids.add(rs.getString(1));
            return ids;
          }
        });
  }

  private static RunRow row(ResultSet rs) throws SQLException {
    Timestamp completed = rs.getTimestamp(11);
    return new RunRow(
        rs.getString(1),
        rs.getString(2),
        rs.getLong(3),
        rs.getLong(4),
        rs.getInt(5),
        rs.getLong(6),
        rs.getInt(7),
        rs.getInt(8),
        rs.getInt(9),
        rs.getTimestamp(10).toInstant(),
        completed == null ? null : completed.toInstant(),
        rs.getLong(12),
        rs.getInt(13));
  }
}
