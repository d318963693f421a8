package dev.tickmark.persistence.logs;

import dev.tickmark.persistence.Jdbc;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Timestamp;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CompletionStage;

/**
 * The rentals' log lines in PostgreSQL ({@code rental_logs}, see {@code V8__rental_logs.sql}):
 * stored once per {@code (rental_id, seq)} however often they arrive, read oldest first, trimmed to
 * the newest {@link Retention#maxLines()} lines and {@link Retention#maxBytes()} bytes of text per
 * rental as lines come, and deleted a while after their rental ended ({@link #deleteEndedBefore}).
 * Shared by every node: any node can serve any rental's logs.
 */
public final class RentalLogs {
  public record Line(long seq, Instant at, String stream, String text) {}

  /** How much of a rental's log is kept. */
  public record Retention(int maxLines, long maxBytes) {
    public static final Retention DEFAULT = new Retention(10_000, 4L * 1024 * 1024);
  }

  private final Jdbc jdbc;
  private final Retention retention;

  public RentalLogs(Jdbc jdbc, Retention retention) {
    this.jdbc = jdbc;
    this.retention = retention;
  }

  public Retention retention() {
    return retention;
  }

  /**
   * Stores {@code lines} of {@code rentalId} (a line already stored is left as it is) and trims the
   * rental's log to its retention, in one transaction; completes once it committed.
   */
  public CompletionStage<Void> append(String rentalId, List<Line> lines) {
    return jdbc.transaction(
        connection -> {
          try (PreparedStatement st =
              connection.prepareStatement(
                  "INSERT INTO rental_logs (rental_id, seq, at, stream, text) VALUES (?, ?, ?, ?, ?)"
                      + " ON CONFLICT (rental_id, seq) DO NOTHING")) {
            for (Line line : lines) {
              st.setString(1, rentalId);
              st.setLong(2, line.seq());
              st.setTimestamp(3, Timestamp.from(line.at()));
              st.setString(4, line.stream());
              st.setString(5, line.text());
              st.addBatch();
            }
            st.executeBatch();
          }
          trim(connection, rentalId);
          return null;
        });
  }

  /** Deletes the lines older than the newest {@code maxLines}, or beyond {@code maxBytes}. */
  private void trim(Connection connection, String rentalId) throws SQLException {
    try (PreparedStatement st =
        connection.prepareStatement(
            """
            DELETE FROM rental_logs WHERE rental_id = ? AND seq <= (
              SELECT seq FROM (
                SELECT seq, row_number() OVER w AS n, sum(octet_length(text)) OVER w AS bytes
                FROM rental_logs WHERE rental_id = ? WINDOW w AS (ORDER BY seq DESC)) newest_first
              WHERE n > ? OR bytes > ? ORDER BY seq DESC LIMIT 1)
            """)) {
      st.setString(1, rentalId);
      st.setString(2, rentalId);
      st.setInt(3, retention.maxLines());
      st.setLong(4, retention.maxBytes());
      st.executeUpdate();
    }
  }

  /** The lines with seq above {@code after}, oldest first, at most {@code limit}. */
  public CompletionStage<List<Line>> after(String rentalId, long after, int limit) {
    return jdbc.run(
        connection -> {
          try (PreparedStatement st =
              connection.prepareStatement(
                  "SELECT seq, at, stream, text FROM rental_logs WHERE rental_id = ? AND seq > ?"
                      + " ORDER BY seq LIMIT ?")) {
            st.setString(1, rentalId);
            st.setLong(2, after);
            st.setInt(3, limit);
            return read(st);
          }
        });
  }

  /** The last {@code n} lines, oldest first. */
  public CompletionStage<List<Line>> tail(String rentalId, int n) {
    return jdbc.run(
        connection -> {
          try (PreparedStatement st =
              connection.prepareStatement(
                  "SELECT seq, at, stream, text FROM rental_logs WHERE rental_id = ?"
                      + " ORDER BY seq DESC LIMIT ?")) {
            st.setString(1, rentalId);
            st.setInt(2, n);
            List<Line> lines = read(st);
            Collections.reverse(lines);
            return lines;
          }
        });
  }

  /**
   * Deletes the logs of every rental that ended before {@code cutoff} (by the rentals table);
   * answers how many lines went.
   */
  public CompletionStage<Integer> deleteEndedBefore(Instant cutoff) {
    return jdbc.run(
        connection -> {
          try (PreparedStatement st =
              connection.prepareStatement(
                  "DELETE FROM rental_logs l USING rentals r"
                      + " WHERE r.rental_id = l.rental_id AND r.ended_at < ?")) {
            st.setTimestamp(1, Timestamp.from(cutoff));
            return st.executeUpdate();
          }
        });
  }

  private static List<Line> read(PreparedStatement st) throws SQLException {
    try (ResultSet rs = st.executeQuery()) {
      List<Line> lines = new ArrayList<>();
      while (rs.next()) {
        lines.add(
            new Line(
                rs.getLong(1), rs.getTimestamp(2).toInstant(), rs.getString(3), rs.getString(4)));
      }
      return lines;
    }
  }
}
