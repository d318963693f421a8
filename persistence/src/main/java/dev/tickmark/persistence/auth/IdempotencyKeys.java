package dev.tickmark.persistence.auth;

import dev.tickmark.persistence.Jdbc;
import java.security.SecureRandom;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.Timestamp;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.Arrays;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ThreadLocalRandom;

/**
 * The {@code Idempotency-Key} store: the first request with a key claims it, its response is kept,
 * and later requests with the same key and the same body get that response again.
 *
 * <p>A record lives {@code ttl} from its claim: after that it is ignored (the next request with the
 * key claims it afresh, whatever its body) and {@link #deleteExpired} removes it. A claim still
 * without an answer after {@code inProgressTimeout} was left by a request that will not answer (its
 * node crashed): the next request with the same key and body takes it over instead of being told
 * {@code InProgress}. Both happen in the claim's single upsert, so of two requests racing for a key
 * exactly one gets it; each claim has its own id, so a request that answers after its claim was
 * taken over changes nothing.
 *
 * <p>Each record also draws a {@code seed} once, which a request may derive the ids it creates from
 * (a launch derives its rental's id): a request that got no answer worth keeping (a 5xx: the engine
 * may or may not have acted) {@link #release releases} the key without forgetting the seed, and so
 * does an abandoned claim, so the request that takes the key over lands on what the first one may
 * have created instead of creating it twice. Only an expired record, a different body after a
 * release, or a release that {@link #forget knows nothing was done} starts with a new seed.
 */
public final class IdempotencyKeys {
  public static final Duration DEFAULT_TTL = Duration.ofHours(24);
  public static final Duration DEFAULT_IN_PROGRESS_TIMEOUT = Duration.ofSeconds(60);

  public sealed interface Claim permits Fresh, Replay, Conflict, InProgress {}

  /**
   * The key was free (or expired, released, or abandoned) and is now claimed by this request, as
   * {@code claimId}; {@code seed} is the record's (kept from the earlier claim when it was released
   * or abandoned with the same body). {@code seedDrawn}: the seed is new, drawn by this claim, so
   * no earlier request with this key derived anything from it.
   */
  public record Fresh(long claimId, long seed, boolean seedDrawn) implements Claim {}

  public record Replay(int status, String body) implements Claim {}

  /** The key was used with a different request body. */
  public record Conflict() implements Claim {}

  /** The first request with this key has not finished yet. */
  public record InProgress() implements Claim {}

  /** Seeds become ids that must stay unguessable. */
  private static final SecureRandom SEEDS = new SecureRandom();

  private final Jdbc jdbc;
  private final Clock clock;
  private final Duration ttl;
  private final Duration inProgressTimeout;

  public IdempotencyKeys(Jdbc jdbc, Clock clock) {
    this(jdbc, clock, DEFAULT_TTL, DEFAULT_IN_PROGRESS_TIMEOUT);
  }

  public IdempotencyKeys(Jdbc jdbc, Clock clock, Duration ttl, Duration inProgressTimeout) {
    if (ttl.isNegative() || ttl.isZero())
      throw new IllegalArgumentException("the Idempotency-Key ttl must be positive");
    if (inProgressTimeout.isNegative() || inProgressTimeout.isZero())
      throw new IllegalArgumentException(
          "the Idempotency-Key in-progress timeout must be positive");
    this.jdbc = jdbc;
    this.clock = clock;
    this.ttl = ttl;
    this.inProgressTimeout = inProgressTimeout;
  }

  public Duration ttl() {
    return ttl;
  }

  public CompletionStage<Claim> claim(String principal, String key, byte[] requestHash) {
    Instant now = clock.instant();
    long claimId = ThreadLocalRandom.current().nextLong();
    long newSeed = SEEDS.nextLong();
    return jdbc.run(
        connection -> {
          // One statement: a new key is inserted; an expired record (any body), a released one or
          // an abandoned claim (same body, no answer) is taken over. The conflicting row is locked
          // while the WHERE is checked, so a concurrent claim sees the taken-over row and is
          // refused. The seed survives a takeover with the same body of a record that has not
          // expired: whatever the earlier request created is found again.
          try (PreparedStatement upsert =
              connection.prepareStatement(
                  "INSERT INTO idempotency_keys AS k"
                      + " (principal, idempotency_key, request_hash, created_at, claim_id, seed)"
                      + " VALUES (?, ?, ?, ?, ?, ?)"
                      + " ON CONFLICT (principal, idempotency_key) DO UPDATE SET"
                      + " request_hash = EXCLUDED.request_hash, status = NULL,"
                      + " response_body = NULL, created_at = EXCLUDED.created_at,"
                      + " claim_id = EXCLUDED.claim_id, released = FALSE,"
                      + " seed = CASE WHEN k.created_at >= ? AND k.request_hash = EXCLUDED.request_hash"
                      + " THEN COALESCE(k.seed, EXCLUDED.seed) ELSE EXCLUDED.seed END"
                      + " WHERE k.created_at < ?"
                      + " OR (k.status IS NULL AND k.released)"
                      + " OR (k.status IS NULL AND k.request_hash = EXCLUDED.request_hash"
                      + " AND k.created_at < ?)"
                      + " RETURNING seed")) {
            upsert.setString(1, principal);
            upsert.setString(2, key);
            upsert.setBytes(3, requestHash);
            upsert.setTimestamp(4, Timestamp.from(now));
            upsert.setLong(5, claimId);
            upsert.setLong(6, newSeed);
            upsert.setTimestamp(7, Timestamp.from(now.minus(ttl)));
            upsert.setTimestamp(8, Timestamp.from(now.minus(ttl)));
            upsert.setTimestamp(9, Timestamp.from(now.minus(inProgressTimeout)));
            try (ResultSet claimed = upsert.executeQuery()) {
              if (claimed.next()) {
                long seed = claimed.getLong(1);
                return new Fresh(claimId, seed, seed == newSeed);
              }
            }
          }
          try (PreparedStatement select =
              connection.prepareStatement(
                  "SELECT request_hash, status, response_body FROM idempotency_keys WHERE principal = ? AND idempotency_key = ?")) {
            select.setString(1, principal);
            select.setString(2, key);
            try (ResultSet rs = select.executeQuery()) {
              // forgotten or deleted between our two statements: let the client retry
              if (!rs.next()) return new InProgress();
              if (!Arrays.equals(rs.getBytes(1), requestHash)) return new Conflict();
              int status = rs.getInt(2);
              if (rs.wasNull()) return new InProgress();
              return new Replay(status, rs.getString(3));
            }
          }
        });
  }

  /** Keeps the answer of the request holding {@code claimId}; nothing if its claim was taken. */
  public CompletionStage<Void> complete(
      String principal, String key, long claimId, int status, String body) {
    return jdbc.run(
        connection -> {
          try (PreparedStatement st =
              connection.prepareStatement(
                  "UPDATE idempotency_keys SET status = ?, response_body = ?"
                      + " WHERE principal = ? AND idempotency_key = ? AND claim_id = ? AND status IS NULL")) {
            st.setInt(1, status);
            st.setString(2, body);
            st.setString(3, principal);
            st.setString(4, key);
            st.setLong(5, claimId);
            st.executeUpdate();
          }
          return null;
        });
  }

  /**
   * Frees a key whose request failed without an answer worth keeping (a 5xx), so a retry can run;
   * its seed stays, for the retry with the same body to find what this request may have created.
   * Nothing if its claim was taken.
   */
  public CompletionStage<Void> release(String principal, String key, long claimId) {
    return onOwnClaim("UPDATE idempotency_keys SET released = TRUE WHERE", principal, key, claimId);
  }

  /**
   * Frees a key whose request is known to have done nothing that lasts (a 5xx after which nothing
   * it created is left to find): the record goes, and the next request with the key starts afresh,
   * with a new seed. Nothing if its claim was taken.
   */
  public CompletionStage<Void> forget(String principal, String key, long claimId) {
    return onOwnClaim("DELETE FROM idempotency_keys WHERE", principal, key, claimId);
  }

  /** Runs {@code statement} on the key's record while {@code claimId} still holds it unanswered. */
  private CompletionStage<Void> onOwnClaim(
      String statement, String principal, String key, long claimId) {
    return jdbc.run(
        connection -> {
          try (PreparedStatement st =
              connection.prepareStatement(
                  statement
                      + " principal = ? AND idempotency_key = ? AND claim_id = ? AND status IS NULL")) {
            st.setString(1, principal);
            st.setString(2, key);
            st.setLong(3, claimId);
            st.executeUpdate();
          }
          return null;
        });
  }

  /** Deletes the records older than the ttl; returns how many. */
  public CompletionStage<Integer> deleteExpired() {
    Timestamp cutoff = Timestamp.from(clock.instant().minus(ttl));
    return jdbc.run(
        connection -> {
          try (PreparedStatement st =
              connection.prepareStatement("DELETE FROM idempotency_keys WHERE created_at < ?")) {
            st.setTimestamp(1, cutoff);
            return st.executeUpdate();
          }
        });
  }
}
