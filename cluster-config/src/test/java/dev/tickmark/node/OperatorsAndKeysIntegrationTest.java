package dev.tickmark.node;

import static dev.tickmark.node.Eventually.eventually;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import dev.tickmark.node.ApiClient.Customer;
import dev.tickmark.persistence.DatabaseSettings;
import dev.tickmark.persistence.TestDatabase;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Operators and keys on a real node: every mutating operator request is in the audit log with who
 * (named operator tokens), what, target, outcome and address; an API key's last use is listed; a
 * key may expire, and is then refused 401 key_expired.
 */
class OperatorsAndKeysIntegrationTest {
  static final Duration WAIT = Duration.ofSeconds(15);
  static final String ALICE = "tmkop_alice_0123456789abcdef0123456789abcdef";
  static final String BOB = "tmkop_bob_0123456789abcdef0123456789abcdef012";

  private static DatabaseSettings db;
  private static Node node;
  private static ApiClient api;

  @BeforeAll
  static void startNode() throws Exception {
    db = TestDatabase.fresh("operators_keys");
    node =
        Node.start(
            TestNodes.settings(
                db, Map.of("TICKMARK_OPERATOR_TOKENS", "alice:" + ALICE + ",bob:" + BOB)));
    api = new ApiClient(node.baseUrl());
  }

  @AfterAll
  static void stopNode() throws Exception {
    if (node != null) node.close();
  }

  /** The audit log's entries for {@code target}, oldest first. */
  static List<JsonNode> actionsOn(String target) {
    List<JsonNode> out = new ArrayList<>();
    for (JsonNode e : api.get("/ops/audit?limit=200", ALICE).expect(200).json().get("entries"))
      if (target.equals(e.get("target").asText(null))) out.add(0, e);
    return out;
  }

  @Test
  void recordsEveryMutatingOperatorRequestWithWhoWhatTargetOutcomeAndAddress() {
    Customer c = api.signUp("audited");
    String deposits = "/ops/accounts/" + c.id() + "/deposits";
    Instant before = Instant.now().minusSeconds(1);
    api.post(deposits, ALICE, "{\"amount\":\"10.00\",\"reference\":\"a-1\"}").expect(201);
    api.post("/ops/accounts/" + c.id() + "/suspend", BOB, "{\"reason\":\"checking\"}").expect(200);
    api.post("/ops/accounts/" + c.id() + "/resume", TestNodes.OPERATOR_TOKEN, null).expect(200);
    api.post(deposits, ALICE, "{\"amount\":\"-1\",\"reference\":\"bad\"}")
        .expectProblem(400, "invalid_amount");
    // reads are not actions, and a customer key or a wrong token never reaches /ops
    api.get("/ops/accounts/" + c.id(), BOB).expect(200);
    api.post(deposits, c.apiKey(), "{\"amount\":\"1.00\",\"reference\":\"x\"}")
        .expectProblem(401, "unauthorized");
    api.get("/ops/audit", c.apiKey()).expectProblem(401, "unauthorized");

    eventually(WAIT, () -> assertEquals(4, actionsOn(c.id()).size(), "" + actionsOn(c.id())));
    List<JsonNode> actions = actionsOn(c.id());
    String[][] expected = {
      {"alice", "POST /ops/accounts/{id}/deposits", "201"},
      {"bob", "POST /ops/accounts/{id}/suspend", "200"},
      {"operator", "POST /ops/accounts/{id}/resume", "200"},
      {"alice", "POST /ops/accounts/{id}/deposits", "400"}
    };
    for (int i = 0; i < expected.length; i++) {
      JsonNode a = actions.get(i);
      assertEquals(expected[i][0], a.get("operator").asText(), a.toString());
      assertEquals(expected[i][1], a.get("action").asText(), a.toString());
      assertEquals(c.id(), a.get("target").asText(), a.toString());
      assertEquals(Integer.parseInt(expected[i][2]), a.get("status").asInt(), a.toString());
      assertEquals("127.0.0.1", a.get("client_address").asText(), a.toString());
      Instant at = Instant.parse(a.get("at").asText());
      assertTrue(!at.isBefore(before) && !at.isAfter(Instant.now()), a.toString());
    }
    // a host eviction is recorded with its outcome even when the host does not exist
    api.post("/ops/hosts/h_nosuchhost/evict", BOB, "{\"reason\":\"test\"}")
        .expectProblem(404, "not_found");
    eventually(
        WAIT,
        () -> {
          List<JsonNode> evictions = actionsOn("h_nosuchhost");
          assertEquals(1, evictions.size());
          assertEquals("POST /ops/hosts/{id}/evict", evictions.get(0).get("action").asText());
          assertEquals(404, evictions.get(0).get("status").asInt());
        });
  }

  @Test
  void theAuditLogPagesNewestFirstAndNarrowsToOneOperator() {
    Customer c = api.signUp("paged");
    for (int i = 0; i < 3; i++)
      api.post(
              "/ops/accounts/" + c.id() + "/deposits",
              BOB,
              "{\"amount\":\"1.00\",\"reference\":\"p-" + i + "\"}")
          .expect(201);
    eventually(WAIT, () -> assertEquals(3, actionsOn(c.id()).size()));
    JsonNode first = api.get("/ops/audit?limit=2&operator=bob", ALICE).expect(200).json();
    assertEquals(2, first.get("entries").size());
    String next = first.get("next_before").asText();
    JsonNode second =
        api.get("/ops/audit?limit=2&operator=bob&before=" + next, ALICE).expect(200).json();
    List<Instant> times = new ArrayList<>();
    java.util.Set<String> ids = new java.util.HashSet<>();
    for (JsonNode page : List.of(first, second))
      for (JsonNode e : page.get("entries")) {
        assertEquals("bob", e.get("operator").asText());
        assertTrue(ids.add(e.get("id").asText()), "no entry twice: " + e);
        times.add(Instant.parse(e.get("at").asText()));
      }
    assertTrue(ids.size() >= 3, "bob's three deposits over two pages: " + ids);
    for (int i = 1; i < times.size(); i++)
      assertTrue(!times.get(i).isAfter(times.get(i - 1)), "newest first: " + times);
    api.get("/ops/audit?limit=0", ALICE).expectProblem(400, "invalid_parameter");
    api.get("/ops/audit?before=x", ALICE).expectProblem(400, "invalid_parameter");
    // a NUL reached PostgreSQL, which cannot hold it in text, and answered 503 (the fuzzer's find)
    api.get("/ops/audit?operator=%00", ALICE).expectProblem(400, "invalid_parameter");
  }

  static JsonNode keyInList(String apiKey, String keyId) {
    for (JsonNode k : api.get("/v1/account/api-keys", apiKey).expect(200).json().get("keys"))
      if (k.get("id").asText().equals(keyId)) return k;
    throw new AssertionError("no key " + keyId);
  }

  @Test
  void listsWhenEachKeyWasLastUsed() {
    Customer c = api.signUp("last-use");
    JsonNode created =
        api.post("/v1/account/api-keys", c.apiKey(), "{\"label\":\"ci\"}").expect(201).json();
    String second = created.get("api_key").asText();
    String secondId = created.get("id").asText();
    eventually(
        WAIT, () -> assertFalse(keyInList(c.apiKey(), c.keyId()).get("last_used_at").isNull()));
    assertTrue(keyInList(c.apiKey(), secondId).get("last_used_at").isNull(), "never used yet");
    Instant before = Instant.now().minusSeconds(1);
    api.get("/v1/account", second).expect(200);
    eventually(
        WAIT,
        () -> {
          JsonNode k = keyInList(c.apiKey(), secondId);
          assertFalse(k.get("last_used_at").isNull(), k.toString());
          assertFalse(Instant.parse(k.get("last_used_at").asText()).isBefore(before), k.toString());
        });
  }

  @Test
  void aKeyPastItsExpiryIsRefusedWithKeyExpired() throws Exception {
    Customer c = api.signUp("expiring");
    JsonNode created =
        api.post("/v1/account/api-keys", c.apiKey(), "{\"expires_in_days\":30}").expect(201).json();
    String key = created.get("api_key").asText();
    Instant expiresAt = Instant.parse(created.get("expires_at").asText());
    Duration ahead = Duration.between(Instant.now(), expiresAt);
    assertTrue(
        ahead.compareTo(Duration.ofDays(29)) > 0 && ahead.compareTo(Duration.ofDays(30)) <= 0);
    assertEquals(
        expiresAt.toString(),
        Instant.parse(keyInList(key, created.get("id").asText()).get("expires_at").asText())
            .toString());
    api.get("/v1/account", key).expect(200);

    // thirty days pass for this key: its expiry is moved to a moment ago in the database
    try (Connection connection = DriverManager.getConnection(db.url(), db.user(), db.password());
        PreparedStatement st =
            connection.prepareStatement(
                "UPDATE api_keys SET expires_at = now() - interval '1 second' WHERE key_id = ?")) {
      st.setString(1, created.get("id").asText());
      assertEquals(1, st.executeUpdate());
    }
    api.get("/v1/account", key).expectProblem(401, "key_expired");
    api.get("/v1/account", c.apiKey()).expect(200); // the account's other key is unaffected

    String future =
        Instant.now()
            .plus(Duration.ofDays(2))
            .truncatedTo(java.time.temporal.ChronoUnit.SECONDS)
            .toString();
    JsonNode dated =
        api.post("/v1/account/api-keys", c.apiKey(), "{\"expires_at\":\"" + future + "\"}")
            .expect(201)
            .json();
    assertEquals(Instant.parse(future), Instant.parse(dated.get("expires_at").asText()));
    assertTrue(
        api.post("/v1/account/api-keys", c.apiKey(), "{}")
            .expect(201)
            .json()
            .get("expires_at")
            .isNull(),
        "no expiry unless asked for");
  }

  @Test
  void refusesABadExpiryWith400() {
    Customer c = api.signUp("bad-expiry");
    for (String body :
        List.of(
            "{\"expires_at\":\"2020-01-01T00:00:00Z\"}",
            "{\"expires_at\":\"next tuesday\"}",
            "{\"expires_at\":\"" + Instant.now().plus(Duration.ofDays(4000)) + "\"}",
            "{\"expires_in_days\":0}",
            "{\"expires_in_days\":3651}",
            "{\"expires_in_days\":1,\"expires_at\":\"" + Instant.now().plusSeconds(3600) + "\"}"))
      api.post("/v1/account/api-keys", c.apiKey(), body).expectProblem(400, "invalid_expiry");
    assertNotNull(
        api.post("/v1/account/api-keys", c.apiKey(), "{\"expires_in_days\":\"soon\"}")
            .expect(400)
            .text("code"));
  }
}
