package dev.tickmark.persistence.auth;

import dev.tickmark.persistence.Jdbc;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.Timestamp;
import java.time.Clock;
import java.util.Arrays;
import java.util.concurrent.CompletionStage;

/**
 * The {@code Idempotency-Key} store: the first request with a key claims it, its response is kept,
 * and later requests with the same key and the same body get that response again.
 */
public final class IdempotencyKeys {
  public sealed interface Claim permits Fresh, Replay, Conflict, InProgress {}

  /** The key was free and is now claimed by this request. */
  public record Fresh() implements Claim {}

  public record Replay(int status, String body) implements Claim {}

  /** The key was used with a different request body. */
  public record Conflict() implements Claim {}

  /** The first request with this key has not finished yet. */
  public record InProgress() implements Claim {}

  private final Jdbc jdbc;
  private final Clock clock;

  public IdempotencyKeys(Jdbc jdbc, Clock clock) {
    this.jdbc = jdbc;
    this.clock = clock;
  }

  public CompletionStage<Claim> claim(String principal, String key, byte[] requestHash) {
    Timestamp now = Timestamp.from(clock.instant());
    return jdbc.run(
        connection -> {
          try (PreparedStatement insert =
              connection.prepareStatement(
                  "INSERT INTO idempotency_keys(principal, idempotency_key, request_hash, created_at) VALUES (?, ?, ?, ?)"
                      + " ON CONFLICT DO NOTHING")) {
            insert.setString(1, principal);
            insert.setString(2, key);
            insert.setBytes(3, requestHash);
            insert.setTimestamp(4, now);
            if (insert.executeUpdate() == 1) return new Fresh();
          }
          try (PreparedStatement select =
              connection.prepareStatement(
                  "SELECT request_hash, status, response_body FROM idempotency_keys WHERE principal = ? AND idempotency_key = ?")) {
            select.setString(1, principal);
            select.setString(2, key);
            try (ResultSet rs = select.executeQuery()) {
              if (!rs.next())
                return new InProgress(); // released between our two statements: let the client
              // retry
              if (!Arrays.equals(rs.getBytes(1), requestHash)) return new Conflict();
              int status = rs.getInt(2);
              if (rs.wasNull()) return new InProgress();
              return new Replay(status, rs.getString(3));
            }
          }
        });
  }

  public CompletionStage<Void> complete(String principal, String key, int status, String body) {
    return jdbc.run(
        connection -> {
          try (PreparedStatement st =
              connection.prepareStatement(
                  "UPDATE idempotency_keys SET status = ?, response_body = ? WHERE principal = ? AND idempotency_key = ?")) {
            st.setInt(1, status);
            st.setString(2, body);
            st.setString(3, principal);
            st.setString(4, key);
            st.executeUpdate();
          }
          return null;
        });
  }

  /**
   * Frees a key whose request failed without an answer worth keeping (a 5xx), so a retry can run.
   */
  public CompletionStage<Void> release(String principal, String key) {
    return jdbc.run(
        connection -> {
          try (PreparedStatement st =
              connection.prepareStatement(
                  "DELETE FROM idempotency_keys WHERE principal = ? AND idempotency_key = ? AND status IS NULL")) {
            st.setString(1, principal);
            st.setString(2, key);
            st.executeUpdate();
          }
          return null;
        });
  }
}
