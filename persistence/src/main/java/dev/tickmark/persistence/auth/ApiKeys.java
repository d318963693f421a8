package dev.tickmark.persistence.auth;

import dev.tickmark.persistence.Jdbc;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.security.SecureRandom;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.Timestamp;
import java.time.Clock;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CompletionStage;

/**
 * API keys {@code tmk_<key id>_<secret>}. The key id is public; only a SHA-256 of the secret is
 * stored (the secret is 192 random bits, so a fast hash is the right tool), and the full key is
 * returned once, at creation.
 *
 * <p>A key may expire ({@code expires_at}); past it {@link #principal} says so and the edge answers
 * 401 {@code key_expired}. Each key's last use is recorded off the request path, at most once per
 * {@link #LAST_USE_RESOLUTION} per key and node, so a busy key costs one UPDATE a minute, not one a
 * request.
 */
public final class ApiKeys {
  public static final String PREFIX = "tmk_";

  /** Shown once, never stored. */
  public record CreatedKey(
      String keyId, String apiKey, String accountId, Instant createdAt, Instant expiresAt) {
    @Override
    public String toString() {
      return "CreatedKey[keyId=" + keyId + ", accountId=" + accountId + "]";
    }
  }

  public record KeyInfo(
      String keyId,
      String prefix,
      String label,
      Instant createdAt,
      Instant revokedAt,
      Set<String> scopes,
      Instant lastUsedAt,
      Instant expiresAt) {}

  /**
   * Who a presented key speaks for, and what it may do; {@code expired} when its {@code expires_at}
   * has passed (it then speaks for nobody). {@code sshPublicKeys}: the account's SSH public keys,
   * oldest first, where {@link #principalWithSshKeys} read them with the key; else empty.
   */
  public record Principal(
      String accountId,
      String keyId,
      Set<String> scopes,
      Instant expiresAt,
      boolean expired,
      List<String> sshPublicKeys) {
    public Principal {
      sshPublicKeys = List.copyOf(sshPublicKeys);
    }
  }

  /** A key's last use is written at most this often per key (and node). */
  public static final java.time.Duration LAST_USE_RESOLUTION = java.time.Duration.ofMinutes(1);

  /** Keys whose last recorded use this node remembers; past it the memory starts over. */
  static final int MAX_REMEMBERED_USES = 100_000;

  /** Every scope; an account's first key has all of them. */
  public static final Set<String> ALL_SCOPES = Set.of("read", "rent", "provide", "payouts");

  private static final SecureRandom RANDOM = new SecureRandom();
  private static final HexFormat HEX = HexFormat.of();

  private final Jdbc jdbc;
  private final Clock clock;

  /** Key id → when this node last wrote its {@code last_used_at}. */
  private final java.util.concurrent.ConcurrentHashMap<String, Instant> usesRecorded =
      new java.util.concurrent.ConcurrentHashMap<>();

  public ApiKeys(Jdbc jdbc, Clock clock) {
    this.jdbc = jdbc;
    this.clock = clock;
  }

  /** A key with every scope (an account's first key, the dev node's). */
  public CompletionStage<CreatedKey> create(String accountId, String label) {
    return create(accountId, label, ALL_SCOPES);
  }

  public CompletionStage<CreatedKey> create(String accountId, String label, Set<String> scopes) {
    return create(accountId, label, scopes, null);
  }

  /** A key that is refused from {@code expiresAt} on (null: never). */
  public CompletionStage<CreatedKey> create(
      String accountId, String label, Set<String> scopes, Instant expiresAt) {
    if (scopes.isEmpty() || !ALL_SCOPES.containsAll(scopes))
      throw new IllegalArgumentException("scopes must be a non-empty subset of " + ALL_SCOPES);
    String stored = String.join(",", new java.util.TreeSet<>(scopes));
    String keyId = random(6);
    String secret = random(24);
    Instant now = clock.instant();
    return jdbc.run(
        connection -> {
          try (PreparedStatement st =
              connection.prepareStatement(
                  "INSERT INTO api_keys(key_id, account_id, secret_hash, label, created_at, scopes, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?)")) {
            st.setString(1, keyId);
            st.setString(2, accountId);
            st.setBytes(3, sha256(secret));
            st.setString(4, label);
            st.setTimestamp(5, Timestamp.from(now));
            st.setString(6, stored);
            st.setTimestamp(7, expiresAt == null ? null : Timestamp.from(expiresAt));
            st.executeUpdate();
          }
          return new CreatedKey(keyId, PREFIX + keyId + "_" + secret, accountId, now, expiresAt);
        });
  }

  /**
   * The account a presented key belongs to, if the key is well-formed, known, unrevoked and its
   * secret matches.
   */
  public CompletionStage<Optional<String>> authenticate(String presented) {
    return principal(presented)
        .thenApply(p -> p.filter(principal -> !principal.expired()).map(Principal::accountId));
  }

  /**
   * The key's account and scopes, under the same conditions as {@link #authenticate} but for
   * expiry: an expired key is returned with {@code expired} set, so the caller can say why it is
   * refused. A key that is let in has its use recorded ({@link #LAST_USE_RESOLUTION}).
   */
  public CompletionStage<Optional<Principal>> principal(String presented) {
    return principal(presented, false);
  }

  /**
   * The same, with the account's SSH public keys (oldest first) read in the same statement: a
   * launch that names no key of its own gets them, and this spares it a second round trip to the
   * database (docs/benchmarks.md, "The launch's SSH keys read with its API key").
   */
  public CompletionStage<Optional<Principal>> principalWithSshKeys(String presented) {
    return principal(presented, true);
  }

  private static final String PRINCIPAL =
      "SELECT account_id, secret_hash, scopes, expires_at FROM api_keys"
          + " WHERE key_id = ? AND revoked_at IS NULL";

  private static final String PRINCIPAL_WITH_SSH_KEYS =
      "SELECT k.account_id, k.secret_hash, k.scopes, k.expires_at,"
          + " ARRAY(SELECT s.public_key FROM ssh_keys s WHERE s.account_id = k.account_id"
          + " ORDER BY s.created_at, s.key_id)"
          + " FROM api_keys k WHERE k.key_id = ? AND k.revoked_at IS NULL";

  private CompletionStage<Optional<Principal>> principal(String presented, boolean withSshKeys) {
    Optional<String[]> parts = parse(presented);
    if (parts.isEmpty())
      return java.util.concurrent.CompletableFuture.completedFuture(Optional.empty());
    String keyId = parts.get()[0];
    byte[] hash = sha256(parts.get()[1]);
    return jdbc.run(
            connection -> {
              try (PreparedStatement st =
                  connection.prepareStatement(withSshKeys ? PRINCIPAL_WITH_SSH_KEYS : PRINCIPAL)) {
                st.setString(1, keyId);
                try (ResultSet rs = st.executeQuery()) {
                  if (!rs.next() || !MessageDigest.isEqual(hash, rs.getBytes(2)))
                    return Optional.<Principal>empty();
                  Timestamp expires = rs.getTimestamp(4);
                  Instant expiresAt = expires == null ? null : expires.toInstant();
                  boolean expired = expiresAt != null && !clock.instant().isBefore(expiresAt);
                  List<String> sshPublicKeys =
                      withSshKeys ? List.of((String[]) rs.getArray(5).getArray()) : List.of();
                  return Optional.of(
                      new Principal(
                          rs.getString(1),
                          keyId,
                          scopes(rs.getString(3)),
                          expiresAt,
                          expired,
                          sshPublicKeys));
                }
              }
            })
        .thenApply(
            principal -> {
              principal.filter(p -> !p.expired()).ifPresent(p -> noteUse(p.keyId()));
              return principal;
            });
  }

  /**
   * Writes the key's {@code last_used_at} unless this node did so within {@link
   * #LAST_USE_RESOLUTION}; the write is not waited for (a failed one is tried again on a later
   * use).
   */
  private void noteUse(String keyId) {
    Instant now = clock.instant();
    Instant last = usesRecorded.get(keyId);
    if (last != null && now.isBefore(last.plus(LAST_USE_RESOLUTION))) return;
    if (last == null
        ? usesRecorded.putIfAbsent(keyId, now) != null
        : !usesRecorded.replace(keyId, last, now)) return; // another request records it
    if (usesRecorded.size() > MAX_REMEMBERED_USES) usesRecorded.clear();
    jdbc.run(
            connection -> {
              try (PreparedStatement st =
                  connection.prepareStatement(
                      "UPDATE api_keys SET last_used_at = ? WHERE key_id = ? AND (last_used_at IS NULL OR last_used_at < ?)")) {
                st.setTimestamp(1, Timestamp.from(now));
                st.setString(2, keyId);
                st.setTimestamp(3, Timestamp.from(now));
                return st.executeUpdate();
              }
            })
        .whenComplete(
            (updated, failure) -> {
              if (failure != null) usesRecorded.remove(keyId, now);
            });
  }

  public CompletionStage<List<KeyInfo>> list(String accountId) {
    return jdbc.run(
        connection -> {
          try (PreparedStatement st =
              connection.prepareStatement(
                  "SELECT key_id, label, created_at, revoked_at, scopes, last_used_at, expires_at FROM api_keys WHERE account_id = ? ORDER BY created_at, key_id")) {
            st.setString(1, accountId);
            try (ResultSet rs = st.executeQuery()) {
              List<KeyInfo> keys = new ArrayList<>();
              while (rs.next()) {
                Timestamp revoked = rs.getTimestamp(4);
                keys.add(
                    new KeyInfo(
                        rs.getString(1),
                        PREFIX + rs.getString(1),
                        rs.getString(2),
                        rs.getTimestamp(3).toInstant(),
                        revoked == null ? null : revoked.toInstant(),
                        scopes(rs.getString(5)),
                        instant(rs.getTimestamp(6)),
                        instant(rs.getTimestamp(7))));
              }
              return keys;
            }
          }
        });
  }

  /** Revokes a key of {@code accountId}; false if that account has no such live key. */
  public CompletionStage<Boolean> revoke(String accountId, String keyId) {
    Instant now = clock.instant();
    return jdbc.run(
        connection -> {
          try (PreparedStatement st =
              connection.prepareStatement(
                  "UPDATE api_keys SET revoked_at = ? WHERE key_id = ? AND account_id = ? AND revoked_at IS NULL")) {
            st.setTimestamp(1, Timestamp.from(now));
            st.setString(2, keyId);
            st.setString(3, accountId);
            return st.executeUpdate() == 1;
          }
        });
  }

  private static Instant instant(Timestamp t) {
    return t == null ? null : t.toInstant();
  }

  private static Set<String> scopes(String stored) {
    return Set.of(stored.split(","));
  }

  /** Whether {@code presented} has the shape of a key ({@code tmk_<hex>_<hex>}); no lookup. */
  public static boolean wellFormed(String presented) {
    return parse(presented).isPresent();
  }

  static Optional<String[]> parse(String presented) {
    if (presented == null || !presented.startsWith(PREFIX) || presented.length() > 200)
      return Optional.empty();
    int split = presented.indexOf('_', PREFIX.length());
    if (split < 0) return Optional.empty();
    String keyId = presented.substring(PREFIX.length(), split);
    String secret = presented.substring(split + 1);
    if (keyId.isEmpty() || secret.isEmpty() || !isHex(keyId) || !isHex(secret))
      return Optional.empty();
    return Optional.of(new String[] {keyId, secret});
  }

  private static boolean isHex(String s) {
    for (int i = 0; i < s.length(); i++) {
      if (Character.digit(s.charAt(i), 16) < 0) return false;
    }
    return true;
  }

  private static String random(int bytes) {
    byte[] b = new byte[bytes];
    RANDOM.nextBytes(b);
    return HEX.formatHex(b);
  }

  private static byte[] sha256(String secret) {
    try {
      return MessageDigest.getInstance("SHA-256")
          .digest(secret.getBytes(StandardCharsets.US_ASCII));
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }
}
