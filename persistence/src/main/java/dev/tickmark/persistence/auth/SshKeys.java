package dev.tickmark.persistence.auth;

import dev.tickmark.persistence.Jdbc;
import java.security.SecureRandom;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Timestamp;
import java.time.Clock;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletionStage;

/**
 * An account's SSH public keys ({@code /v1/account/ssh-keys}): the keys a rental's SSH server
 * accepts when its launch named none. Public halves only; the caller checks a key's shape ({@code
 * SshPublicKeys}) before it is added.
 */
public final class SshKeys {
  /** At most this many keys per account (every rental's server is given all of them). */
  public static final int MAX_PER_ACCOUNT = 32;

  public record SshKey(
      String keyId, String name, String publicKey, String fingerprint, Instant createdAt) {}

  /** Why a key was not added. */
  public enum Refusal {
    DUPLICATE,
    TOO_MANY
  }

  /** The key added, or why not. */
  public record Added(Optional<SshKey> key, Refusal refusal) {}

  private static final SecureRandom RANDOM = new SecureRandom();

  private final Jdbc jdbc;
  private final Clock clock;

  public SshKeys(Jdbc jdbc, Clock clock) {
    this.jdbc = jdbc;
    this.clock = clock;
  }

  public CompletionStage<Added> add(
      String accountId, String name, String publicKey, String fingerprint) {
    byte[] id = new byte[12];
    RANDOM.nextBytes(id);
    String keyId = "ssh_" + HexFormat.of().formatHex(id);
    Instant now = clock.instant();
    return jdbc.run(
        connection -> {
          // one account's adds take turns, so that the limit holds under concurrent requests
          try (PreparedStatement lock =
              connection.prepareStatement("SELECT pg_advisory_xact_lock(hashtext(?))")) {
            lock.setString(1, "ssh_keys:" + accountId);
            lock.execute();
          }
          try (PreparedStatement count =
              connection.prepareStatement("SELECT count(*) FROM ssh_keys WHERE account_id = ?")) {
            count.setString(1, accountId);
            try (ResultSet rs = count.executeQuery()) {
              rs.next();
              if (rs.getInt(1) >= MAX_PER_ACCOUNT)
                return new Added(Optional.empty(), Refusal.TOO_MANY);
            }
          }
          try (PreparedStatement st =
              connection.prepareStatement(
                  "INSERT INTO ssh_keys(key_id, account_id, name, public_key, fingerprint, created_at)"
                      + " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (account_id, fingerprint) DO NOTHING")) {
            st.setString(1, keyId);
            st.setString(2, accountId);
            st.setString(3, name);
            st.setString(4, publicKey);
            st.setString(5, fingerprint);
            st.setTimestamp(6, Timestamp.from(now));
            if (st.executeUpdate() == 0) return new Added(Optional.empty(), Refusal.DUPLICATE);
          }
          return new Added(Optional.of(new SshKey(keyId, name, publicKey, fingerprint, now)), null);
        });
  }

  public CompletionStage<List<SshKey>> list(String accountId) {
    return jdbc.run(
        connection -> {
          try (PreparedStatement st =
              connection.prepareStatement(
                  "SELECT key_id, name, public_key, fingerprint, created_at FROM ssh_keys"
                      + " WHERE account_id = ? ORDER BY created_at, key_id")) {
            st.setString(1, accountId);
            try (ResultSet rs = st.executeQuery()) {
              List<SshKey> keys = new ArrayList<>();
              while (rs.next()) keys.add(key(rs));
              return keys;
            }
          }
        });
  }

  /** Deletes a key of {@code accountId}; false if that account has no such key. */
  public CompletionStage<Boolean> delete(String accountId, String keyId) {
    return jdbc.run(
        connection -> {
          try (PreparedStatement st =
              connection.prepareStatement(
                  "DELETE FROM ssh_keys WHERE key_id = ? AND account_id = ?")) {
            st.setString(1, keyId);
            st.setString(2, accountId);
            return st.executeUpdate() == 1;
          }
        });
  }

  private static SshKey key(ResultSet rs) throws SQLException {
    return new SshKey(
        rs.getString(1),
        rs.getString(2),
        rs.getString(3),
        rs.getString(4),
        rs.getTimestamp(5).toInstant());
  }
}
