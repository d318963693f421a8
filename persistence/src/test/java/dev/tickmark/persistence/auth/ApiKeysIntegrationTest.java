package dev.tickmark.persistence.auth;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.tickmark.persistence.DatabaseSettings;
import dev.tickmark.persistence.Jdbc;
import dev.tickmark.persistence.Migrations;
import dev.tickmark.persistence.TestDatabase;
import java.time.Clock;
import java.util.Optional;
import java.util.concurrent.Executors;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * API keys on a real PostgreSQL: authentication by the secret's hash, revocation by the owner only.
 */
class ApiKeysIntegrationTest {
  static DatabaseSettings db;
  static Jdbc jdbc;

  @BeforeAll
  static void start() throws Exception {
    db = TestDatabase.fresh("apikeys");
    Migrations.migrate(db);
    jdbc = Jdbc.create(db, "apikeys-test", Executors.newFixedThreadPool(2));
  }

  @AfterAll
  static void stop() {
    if (jdbc != null) jdbc.close();
  }

  static Optional<String> auth(ApiKeys keys, String key) {
    return keys.authenticate(key).toCompletableFuture().join();
  }

  @Test
  void aKeyAuthenticatesItsAccountAndNothingElseDoes() {
    ApiKeys keys = new ApiKeys(jdbc, Clock.systemUTC());
    ApiKeys.CreatedKey created = keys.create("acc-1", "laptop").toCompletableFuture().join();
    assertEquals(Optional.of("acc-1"), auth(keys, created.apiKey()));
    String wrongSecret =
        created.apiKey().substring(0, created.apiKey().length() - 1)
            + (created.apiKey().endsWith("0") ? "1" : "0");
    assertEquals(Optional.empty(), auth(keys, wrongSecret), "the key id with another secret");
    assertEquals(Optional.empty(), auth(keys, "tmk_ffffff_00"));
    assertEquals(Optional.empty(), auth(keys, "not a key"));
    String secret = created.apiKey().substring(created.apiKey().lastIndexOf('_') + 1);
    assertFalse(created.toString().contains(secret), "toString hides the secret");
  }

  /**
   * A launch reads the account's SSH keys with its API key, in one statement: the keys come oldest
   * first and only with a key whose secret matches; the plain lookup reads none.
   */
  @Test
  void theKeyCanBeReadWithItsAccountsSshKeysInOneStatement() {
    MovableClock clock = new MovableClock();
    ApiKeys keys = new ApiKeys(jdbc, clock);
    SshKeys sshKeys = new SshKeys(jdbc, clock);
    ApiKeys.CreatedKey created = keys.create("acc-ssh", "laptop").toCompletableFuture().join();
    ApiKeys.Principal none =
        keys.principalWithSshKeys(created.apiKey()).toCompletableFuture().join().orElseThrow();
    assertEquals("acc-ssh", none.accountId());
    assertEquals(java.util.List.of(), none.sshPublicKeys(), "an account without SSH keys");

    // added newest-named first, so that the order can only come from the times
    clock.now = clock.now.plusSeconds(1);
    sshKeys
        .add("acc-ssh", "second", "ssh-ed25519 AAAAsecond a@b", "SHA256:second")
        .toCompletableFuture()
        .join();
    clock.now = clock.now.minusSeconds(1);
    sshKeys
        .add("acc-ssh", "first", "ssh-ed25519 AAAAfirst a@b", "SHA256:first")
        .toCompletableFuture()
        .join();
    sshKeys
        .add("acc-other", "theirs", "ssh-ed25519 AAAAtheirs a@b", "SHA256:theirs")
        .toCompletableFuture()
        .join();
    assertEquals(
        java.util.List.of("ssh-ed25519 AAAAfirst a@b", "ssh-ed25519 AAAAsecond a@b"),
        keys.principalWithSshKeys(created.apiKey())
            .toCompletableFuture()
            .join()
            .orElseThrow()
            .sshPublicKeys());
    assertEquals(
        java.util.List.of(),
        keys.principal(created.apiKey()).toCompletableFuture().join().orElseThrow().sshPublicKeys(),
        "the plain lookup reads no SSH keys");
    String wrongSecret =
        created.apiKey().substring(0, created.apiKey().length() - 1)
            + (created.apiKey().endsWith("0") ? "1" : "0");
    assertEquals(
        Optional.empty(),
        keys.principalWithSshKeys(wrongSecret).toCompletableFuture().join(),
        "the key id with another secret gets nothing, keys included");
  }

  /** A clock the test moves. */
  static final class MovableClock extends Clock {
    volatile java.time.Instant now = java.time.Instant.parse("2026-06-01T12:00:00Z");

    @Override
    public java.time.ZoneId getZone() {
      return java.time.ZoneOffset.UTC;
    }

    @Override
    public Clock withZone(java.time.ZoneId zone) {
      return this;
    }

    @Override
    public java.time.Instant instant() {
      return now;
    }
  }

  static ApiKeys.KeyInfo info(ApiKeys keys, String account, String keyId) {
    return keys.list(account).toCompletableFuture().join().stream()
        .filter(k -> k.keyId().equals(keyId))
        .findFirst()
        .orElseThrow();
  }

  /** Polls the key list until {@code lastUsedAt} is {@code expected} (the write is not awaited). */
  static void awaitLastUse(ApiKeys keys, String account, String keyId, java.time.Instant expected)
      throws InterruptedException {
    long deadline = System.nanoTime() + 10_000_000_000L;
    while (!expected.equals(info(keys, account, keyId).lastUsedAt())) {
      if (System.nanoTime() - deadline > 0)
        assertEquals(expected, info(keys, account, keyId).lastUsedAt());
      Thread.sleep(50);
    }
  }

  @Test
  void aKeysLastUseIsRecordedAndMovesOnOnceAMinuteHasPassed() throws Exception {
    MovableClock clock = new MovableClock();
    ApiKeys keys = new ApiKeys(jdbc, clock);
    ApiKeys.CreatedKey created = keys.create("acc-use", "ci").toCompletableFuture().join();
    assertEquals(null, info(keys, "acc-use", created.keyId()).lastUsedAt());
    java.time.Instant first = clock.now;
    auth(keys, created.apiKey());
    awaitLastUse(keys, "acc-use", created.keyId(), first);
    clock.now = first.plusSeconds(61);
    auth(keys, created.apiKey());
    awaitLastUse(keys, "acc-use", created.keyId(), first.plusSeconds(61));
  }

  @Test
  void aKeyIsRefusedFromItsExpiryOn() {
    MovableClock clock = new MovableClock();
    ApiKeys keys = new ApiKeys(jdbc, clock);
    java.time.Instant expiry = clock.now.plusSeconds(3600);
    ApiKeys.CreatedKey created =
        keys.create("acc-exp", null, ApiKeys.ALL_SCOPES, expiry).toCompletableFuture().join();
    assertEquals(expiry, info(keys, "acc-exp", created.keyId()).expiresAt());
    assertEquals(Optional.of("acc-exp"), auth(keys, created.apiKey()));
    clock.now = expiry;
    assertEquals(Optional.empty(), auth(keys, created.apiKey()), "expired at its expiry");
    ApiKeys.Principal p =
        keys.principal(created.apiKey()).toCompletableFuture().join().orElseThrow();
    assertTrue(p.expired(), "the principal says why");
    assertEquals(expiry, p.expiresAt());
  }

  @Test
  void aRevokedKeyIsRefusedAndOnlyItsOwnerCanRevokeIt() {
    ApiKeys keys = new ApiKeys(jdbc, Clock.systemUTC());
    ApiKeys.CreatedKey created = keys.create("acc-2", null).toCompletableFuture().join();
    assertEquals(Optional.of("acc-2"), auth(keys, created.apiKey()));
    assertFalse(
        keys.revoke("acc-other", created.keyId()).toCompletableFuture().join(),
        "another account's key");
    assertEquals(Optional.of("acc-2"), auth(keys, created.apiKey()));
    assertTrue(keys.revoke("acc-2", created.keyId()).toCompletableFuture().join());
    assertEquals(Optional.empty(), auth(keys, created.apiKey()));
    assertFalse(
        keys.revoke("acc-2", created.keyId()).toCompletableFuture().join(), "already revoked");
    assertEquals(
        1,
        keys.list("acc-2").toCompletableFuture().join().stream()
            .filter(k -> k.revokedAt() != null)
            .count());
  }
}
