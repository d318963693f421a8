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
