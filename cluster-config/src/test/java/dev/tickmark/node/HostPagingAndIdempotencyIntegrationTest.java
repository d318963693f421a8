package dev.tickmark.node;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import dev.tickmark.node.ApiClient.Customer;
import dev.tickmark.node.ApiClient.Reply;
import dev.tickmark.persistence.DatabaseSettings;
import dev.tickmark.persistence.TestDatabase;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * One real node on PostgreSQL: {@code GET /v1/hosts} and {@code /ops/hosts} a page at a time
 * ({@code limit}, {@code after}, {@code next_after}); and the lifetime of {@code Idempotency-Key}
 * records: an expired one no longer replays, one left in progress by a crash is taken over, a fresh
 * one still answers 409. Time passes by moving the records' {@code created_at} back in the
 * database, as the node's clock moving on would, not by sleeping.
 */
class HostPagingAndIdempotencyIntegrationTest {
  private static final int HOSTS = 7;

  private static DatabaseSettings db;
  private static Node node;
  private static ApiClient api;
  private static Customer provider;
  private static final List<String> hostIds = new ArrayList<>();

  @BeforeAll
  static void startNode() throws Exception {
    db = TestDatabase.fresh("host_paging_idem");
    node = Node.start(TestNodes.settings(db));
    api = new ApiClient(node.baseUrl());
    provider = api.signUp("Provider");
    for (int i = 0; i < HOSTS; i++)
      hostIds.add(
          api.post(
                  "/v1/hosts/registration-tokens",
                  provider.apiKey(),
                  "{\"region\":\"eu-nl\",\"label\":\"h" + i + "\"}")
              .expect(201)
              .text("host_id"));
  }

  @AfterAll
  static void stopNode() throws Exception {
    if (node != null) node.close();
  }

  /** Every host id the pages of {@code path} list, following next_after; asserts page sizes. */
  private static List<String> allPages(String path, String bearer, int limit) {
    List<String> seen = new ArrayList<>();
    String after = null;
    for (int pages = 0; ; pages++) {
      assertTrue(pages <= HOSTS + 1, "paging ends");
      String sep = path.contains("?") ? "&" : "?";
      JsonNode page =
          api.get(path + sep + "limit=" + limit + (after == null ? "" : "&after=" + after), bearer)
              .expect(200)
              .json();
      assertTrue(page.has("next_after"), "next_after is always present: " + page);
      assertTrue(page.get("hosts").size() <= limit);
      page.get("hosts").forEach(h -> seen.add(h.get("id").asText()));
      if (page.get("next_after").isNull()) return seen;
      after = page.get("next_after").asText();
    }
  }

  @Test
  void theProvidersHostsComeAPageAtATimeEachOnce() {
    Eventually.eventually(
        Duration.ofSeconds(15),
        () -> assertEquals(HOSTS, allPages("/v1/hosts", provider.apiKey(), 200).size()));
    for (int limit : new int[] {1, 2, 3, HOSTS, HOSTS + 1, 200}) {
      List<String> seen = allPages("/v1/hosts", provider.apiKey(), limit);
      assertEquals(HOSTS, seen.size(), "limit " + limit + ": " + seen);
      assertEquals(new HashSet<>(hostIds), new HashSet<>(seen), "limit " + limit);
    }
    // the default page holds them all, with no next page
    JsonNode first = api.get("/v1/hosts", provider.apiKey()).expect(200).json();
    assertEquals(HOSTS, first.get("hosts").size());
    assertTrue(first.get("next_after").isNull());
    // another provider sees none of them
    Customer other = api.signUp("Other provider");
    JsonNode none = api.get("/v1/hosts", other.apiKey()).expect(200).json();
    assertEquals(0, none.get("hosts").size());
  }

  @Test
  void operatorsPageTheHostsToo() {
    Eventually.eventually(
        Duration.ofSeconds(15),
        () -> {
          Set<String> seen =
              new HashSet<>(allPages("/ops/hosts?status=invited", TestNodes.OPERATOR_TOKEN, 2));
          assertTrue(seen.containsAll(hostIds), seen.toString());
        });
    List<String> all = allPages("/ops/hosts", TestNodes.OPERATOR_TOKEN, 3);
    assertEquals(all.size(), new HashSet<>(all).size(), "each host once");
  }

  @Test
  void badPagingParametersAre400() {
    for (String query :
        List.of(
            "limit=0",
            "limit=201",
            "limit=-1",
            "limit=ten",
            "limit=",
            "after=",
            "after=42",
            "after=host_xyz",
            "after=rnt_000000000000000000000000")) {
      api.get("/v1/hosts?" + query, provider.apiKey()).expectProblem(400, "invalid_parameter");
      api.get("/ops/hosts?" + query, TestNodes.OPERATOR_TOKEN)
          .expectProblem(400, "invalid_parameter");
    }
    // a well-formed cursor nobody returned is an empty last page
    JsonNode page =
        api.get("/v1/hosts?after=host_ffffffffffffffffffffffff", provider.apiKey())
            .expect(200)
            .json();
    assertEquals(0, page.get("hosts").size());
    assertTrue(page.get("next_after").isNull());
  }

  // ---- Idempotency-Key lifetime -------------------------------------------------------------

  /** Moves the record of {@code key} back in time, and optionally makes it look unanswered. */
  private static void age(String key, Duration by, boolean unanswered) throws Exception {
    try (Connection c = DriverManager.getConnection(db.url(), db.user(), db.password());
        PreparedStatement st =
            c.prepareStatement(
                "UPDATE idempotency_keys SET created_at = created_at - (? * interval '1 second')"
                    + (unanswered ? ", status = NULL, response_body = NULL" : "")
                    + " WHERE idempotency_key = ?")) {
      st.setLong(1, by.toSeconds());
      st.setString(2, key);
      assertEquals(1, st.executeUpdate(), "the record of " + key);
    }
  }

  private static Reply deposit(String accountId, String key, String body) {
    return api.send(
        "POST",
        "/ops/accounts/" + accountId + "/deposits",
        TestNodes.OPERATOR_TOKEN,
        body,
        Map.of("Idempotency-Key", key));
  }

  @Test
  void anExpiredRecordNoLongerReplaysAndTheKeyActsAfresh() throws Exception {
    Customer c = api.signUp("Expiring");
    String key = "expiring-" + System.nanoTime();
    String first = "{\"amount\":\"10\",\"reference\":\"exp-1-" + System.nanoTime() + "\"}";
    deposit(c.id(), key, first).expect(201);
    assertEquals("true", deposit(c.id(), key, first).expect(201).header("Idempotent-Replayed"));
    String second = "{\"amount\":\"5\",\"reference\":\"exp-2-" + System.nanoTime() + "\"}";
    deposit(c.id(), key, second).expectProblem(409, "idempotency_key_reused");

    age(key, Duration.ofHours(23), false);
    assertEquals("true", deposit(c.id(), key, first).expect(201).header("Idempotent-Replayed"));

    age(key, Duration.ofHours(1).plusSeconds(1), false); // now over 24 h old
    Reply afresh = deposit(c.id(), key, second).expect(201);
    assertNull(afresh.header("Idempotent-Replayed"));
    assertFalse(afresh.json().get("duplicate").asBoolean());
    assertEquals("15.000000", api.balance(c.apiKey()));
    // and the new answer is what the key replays now
    assertEquals("true", deposit(c.id(), key, second).expect(201).header("Idempotent-Replayed"));
    assertEquals("15.000000", api.balance(c.apiKey()));
  }

  @Test
  void aRecordLeftInProgressByACrashIsTakenOverAndAFreshOneStillAnswers409() throws Exception {
    Customer c = api.signUp("Crashed");
    String key = "crashed-" + System.nanoTime();
    String body = "{\"amount\":\"7\",\"reference\":\"crash-" + System.nanoTime() + "\"}";
    deposit(c.id(), key, body).expect(201);
    // as a node that crashed after the deposit and before keeping its answer leaves it
    age(key, Duration.ofSeconds(30), true);
    deposit(c.id(), key, body).expectProblem(409, "idempotency_key_in_progress");

    age(key, Duration.ofSeconds(31), true); // over the 60 s in-progress timeout
    // the request runs again (200: the engine's posting key keeps it from crediting twice)
    Reply takenOver = deposit(c.id(), key, body).expect(200);
    assertNull(takenOver.header("Idempotent-Replayed"));
    assertTrue(takenOver.json().get("duplicate").asBoolean(), takenOver.body());
    assertEquals("7.000000", api.balance(c.apiKey()));
    // and its answer is kept: the key replays it from now on
    assertEquals("true", deposit(c.id(), key, body).expect(200).header("Idempotent-Replayed"));
  }
}
