package dev.tickmark.persistence.auth;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.tickmark.persistence.DatabaseSettings;
import dev.tickmark.persistence.Jdbc;
import dev.tickmark.persistence.Migrations;
import dev.tickmark.persistence.TestDatabase;
import java.nio.charset.StandardCharsets;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneId;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The Idempotency-Key store on a real PostgreSQL, on a clock the test moves: records expire after
 * the ttl, a claim left without an answer is taken over after the in-progress timeout, a fresh one
 * is not, and of many racing claims exactly one wins.
 */
class IdempotencyKeysIntegrationTest {
  static final Duration TTL = Duration.ofHours(24);
  static final Duration IN_PROGRESS = Duration.ofSeconds(60);

  /** A clock that moves only when the test says. */
  static final class MovableClock extends Clock {
    volatile Instant now = Instant.parse("2026-12-01T12:00:00Z");

    void advance(Duration by) {
      now = now.plus(by);
    }

    @Override
    public ZoneId getZone() {
      return ZoneOffset.UTC;
    }

    @Override
    public Clock withZone(ZoneId zone) {
      return this;
    }

    @Override
    public Instant instant() {
      return now;
    }
  }

  static DatabaseSettings db;
  static Jdbc jdbc;
  static final MovableClock clock = new MovableClock();
  static IdempotencyKeys keys;

  @BeforeAll
  static void start() throws Exception {
    db = TestDatabase.fresh("idempotency");
    Migrations.migrate(db);
    jdbc = Jdbc.create(db, "idempotency-test", Executors.newFixedThreadPool(4));
    keys = new IdempotencyKeys(jdbc, clock, TTL, IN_PROGRESS);
  }

  @AfterAll
  static void stop() {
    if (jdbc != null) jdbc.close();
  }

  static byte[] hash(String body) {
    return body.getBytes(StandardCharsets.UTF_8);
  }

  static IdempotencyKeys.Claim claim(String principal, String key, String body) throws Exception {
    return keys.claim(principal, key, hash(body)).toCompletableFuture().get(10, TimeUnit.SECONDS);
  }

  static String principal() {
    return "acc_" + UUID.randomUUID().toString().substring(0, 8);
  }

  @Test
  void anAnswerIsReplayedUntilTheTtlThenTheKeyActsAfresh() throws Exception {
    String p = principal();
    var first = assertInstanceOf(IdempotencyKeys.Fresh.class, claim(p, "k", "a"));
    keys.complete(p, "k", first.claimId(), 201, "{\"id\":1}").toCompletableFuture().get();

    clock.advance(TTL.minusSeconds(1));
    var replay = assertInstanceOf(IdempotencyKeys.Replay.class, claim(p, "k", "a"));
    assertEquals(201, replay.status());
    assertEquals("{\"id\":1}", replay.body());
    assertInstanceOf(IdempotencyKeys.Conflict.class, claim(p, "k", "other body"));

    clock.advance(Duration.ofSeconds(2));
    // expired: ignored, whatever the body; the new request holds the key and its answer is kept
    var again = assertInstanceOf(IdempotencyKeys.Fresh.class, claim(p, "k", "other body"));
    assertNotEquals(first.claimId(), again.claimId());
    keys.complete(p, "k", again.claimId(), 200, "{\"id\":2}").toCompletableFuture().get();
    var second = assertInstanceOf(IdempotencyKeys.Replay.class, claim(p, "k", "other body"));
    assertEquals("{\"id\":2}", second.body());
  }

  @Test
  void anAbandonedClaimIsTakenOverAndAFreshOneIsNot() throws Exception {
    String p = principal();
    var crashed = assertInstanceOf(IdempotencyKeys.Fresh.class, claim(p, "k", "a"));

    clock.advance(IN_PROGRESS.minusSeconds(1));
    assertInstanceOf(IdempotencyKeys.InProgress.class, claim(p, "k", "a"));
    // another body is still a misuse of the key, abandoned or not
    assertInstanceOf(IdempotencyKeys.Conflict.class, claim(p, "k", "b"));

    clock.advance(Duration.ofSeconds(2));
    assertInstanceOf(IdempotencyKeys.Conflict.class, claim(p, "k", "b"));
    var takeover = assertInstanceOf(IdempotencyKeys.Fresh.class, claim(p, "k", "a"));
    // the taken-over claim is fresh again: a third request waits for the second
    assertInstanceOf(IdempotencyKeys.InProgress.class, claim(p, "k", "a"));

    // the first request answering late changes nothing, nor does its release
    keys.complete(p, "k", crashed.claimId(), 201, "{\"late\":true}").toCompletableFuture().get();
    keys.release(p, "k", crashed.claimId()).toCompletableFuture().get();
    assertInstanceOf(IdempotencyKeys.InProgress.class, claim(p, "k", "a"));

    keys.complete(p, "k", takeover.claimId(), 201, "{\"id\":3}").toCompletableFuture().get();
    var replay = assertInstanceOf(IdempotencyKeys.Replay.class, claim(p, "k", "a"));
    assertEquals("{\"id\":3}", replay.body());

    // an answered record is not "abandoned": it replays until the ttl
    clock.advance(IN_PROGRESS.multipliedBy(10));
    assertInstanceOf(IdempotencyKeys.Replay.class, claim(p, "k", "a"));
  }

  @Test
  void aReleasedKeyIsTakenOverAtOnceWithItsSeedAndOnlyAFreshStartDrawsANewOne() throws Exception {
    String p = principal();
    var first = assertInstanceOf(IdempotencyKeys.Fresh.class, claim(p, "k", "a"));
    assertTrue(first.seedDrawn(), "a new key draws its seed");
    // a 5xx: the engine may have acted, so the retry with the same body gets the same seed, at once
    keys.release(p, "k", first.claimId()).toCompletableFuture().get();
    var retry = assertInstanceOf(IdempotencyKeys.Fresh.class, claim(p, "k", "a"));
    assertNotEquals(first.claimId(), retry.claimId());
    assertEquals(first.seed(), retry.seed(), "a released key keeps its seed for the same body");
    assertFalse(retry.seedDrawn(), "and says so: the first attempt may have used it");
    // the retry holds the key: a concurrent one waits, as for any claim
    assertInstanceOf(IdempotencyKeys.InProgress.class, claim(p, "k", "a"));

    // abandoned (its node crashed): the takeover keeps the seed too
    clock.advance(IN_PROGRESS.plusSeconds(1));
    var takeover = assertInstanceOf(IdempotencyKeys.Fresh.class, claim(p, "k", "a"));
    assertEquals(first.seed(), takeover.seed(), "an abandoned claim keeps its seed");
    assertFalse(takeover.seedDrawn());

    // a release, then another body: nothing of the first request is wanted, a new seed
    keys.release(p, "k", takeover.claimId()).toCompletableFuture().get();
    var other = assertInstanceOf(IdempotencyKeys.Fresh.class, claim(p, "k", "b"));
    assertNotEquals(first.seed(), other.seed(), "another body starts afresh");
    assertTrue(other.seedDrawn());

    // known to have done nothing: forgotten, the next request starts afresh
    keys.forget(p, "k", other.claimId()).toCompletableFuture().get();
    assertEquals(0, count(p, "k"));
    var afresh = assertInstanceOf(IdempotencyKeys.Fresh.class, claim(p, "k", "b"));
    assertNotEquals(other.seed(), afresh.seed(), "a forgotten key draws a new seed");
    assertTrue(afresh.seedDrawn());

    // released and then expired: a new seed even for the same body
    keys.release(p, "k", afresh.claimId()).toCompletableFuture().get();
    clock.advance(TTL.plusSeconds(1));
    var expired = assertInstanceOf(IdempotencyKeys.Fresh.class, claim(p, "k", "b"));
    assertNotEquals(afresh.seed(), expired.seed(), "an expired record draws a new seed");
    assertTrue(expired.seedDrawn());
  }

  @Test
  void aLateReleaseOrForgetOfATakenOverClaimChangesNothing() throws Exception {
    String p = principal();
    var crashed = assertInstanceOf(IdempotencyKeys.Fresh.class, claim(p, "k", "a"));
    clock.advance(IN_PROGRESS.plusSeconds(1));
    var takeover = assertInstanceOf(IdempotencyKeys.Fresh.class, claim(p, "k", "a"));
    keys.forget(p, "k", crashed.claimId()).toCompletableFuture().get();
    keys.release(p, "k", crashed.claimId()).toCompletableFuture().get();
    assertInstanceOf(IdempotencyKeys.InProgress.class, claim(p, "k", "a"));
    keys.complete(p, "k", takeover.claimId(), 201, "{}").toCompletableFuture().get();
    assertInstanceOf(IdempotencyKeys.Replay.class, claim(p, "k", "a"));
  }

  @Test
  void ofManyRacingTakeoversExactlyOneWins() throws Exception {
    String p = principal();
    assertInstanceOf(IdempotencyKeys.Fresh.class, claim(p, "race", "a"));
    clock.advance(IN_PROGRESS.plusSeconds(1));
    List<CompletableFuture<IdempotencyKeys.Claim>> claims = new ArrayList<>();
    for (int i = 0; i < 16; i++) claims.add(keys.claim(p, "race", hash("a")).toCompletableFuture());
    long fresh = 0;
    for (var c : claims) {
      IdempotencyKeys.Claim result = c.get(10, TimeUnit.SECONDS);
      if (result instanceof IdempotencyKeys.Fresh) fresh++;
      else assertInstanceOf(IdempotencyKeys.InProgress.class, result);
    }
    assertEquals(1, fresh);
  }

  @Test
  void theCleanupDeletesOnlyExpiredRecords() throws Exception {
    String p = principal();
    var old = assertInstanceOf(IdempotencyKeys.Fresh.class, claim(p, "old", "a"));
    keys.complete(p, "old", old.claimId(), 200, "{}").toCompletableFuture().get();
    clock.advance(TTL.minusHours(1));
    var recent = assertInstanceOf(IdempotencyKeys.Fresh.class, claim(p, "recent", "a"));
    keys.complete(p, "recent", recent.claimId(), 200, "{}").toCompletableFuture().get();
    clock.advance(Duration.ofHours(2));

    int deleted = keys.deleteExpired().toCompletableFuture().get(10, TimeUnit.SECONDS);
    org.junit.jupiter.api.Assertions.assertTrue(deleted >= 1, "the expired record is deleted");
    assertEquals(0, count(p, "old"));
    assertEquals(1, count(p, "recent"));
  }

  static int count(String principal, String key) throws Exception {
    return jdbc.run(
            connection -> {
              try (var st =
                  connection.prepareStatement(
                      "SELECT count(*) FROM idempotency_keys WHERE principal = ? AND idempotency_key = ?")) {
                st.setString(1, principal);
                st.setString(2, key);
                try (var rs = st.executeQuery()) {
                  rs.next();
                  return rs.getInt(1);
                }
              }
            })
        .toCompletableFuture()
        .get(10, TimeUnit.SECONDS);
  }
}
