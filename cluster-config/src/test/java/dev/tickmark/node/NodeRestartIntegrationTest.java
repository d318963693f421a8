package dev.tickmark.node;

import static dev.tickmark.node.Eventually.eventually;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import dev.tickmark.node.ApiClient.Customer;
import dev.tickmark.node.ApiClient.Reply;
import dev.tickmark.persistence.TestDatabase;
import java.time.Duration;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * A node stopped and started again on the same database loses nothing: balances, spend caps, API
 * keys (live and revoked), ledger entries, the audit, and the dedup state of payments, deposits and
 * Idempotency-Keys.
 */
class NodeRestartIntegrationTest {
  private static final Duration READ_SIDE = Duration.ofSeconds(15);

  private Node node;

  @AfterEach
  void stopNode() throws Exception {
    if (node != null) node.close();
  }

  @Test
  void everythingSurvivesARestartOnTheSameDatabase() throws Exception {
    NodeSettings settings = TestNodes.settings(TestDatabase.fresh("node_restart"));
    node = Node.start(settings);
    ApiClient api = new ApiClient(node.baseUrl());

    Customer renter = api.signUp("Renter");
    Customer other = api.signUp("Other");
    api.opsDeposit(renter.id(), "100", "wire-1").expect(201);
    api.opsDeposit(other.id(), "40.000001", "wire-2").expect(201);
    String payment =
        ApiClient.paymentBody("pay-restart-1", renter.id(), "25.5", "EUR", "succeeded");
    assertTrue(api.webhook(payment).expect(200).json().get("credited").asBoolean());
    String idempotent = "{\"amount\":\"3\",\"reference\":\"wire-3\"}";
    Map<String, String> idempotencyKey = Map.of("Idempotency-Key", "restart-key-1");
    Reply firstIdempotent =
        api.send(
                "POST",
                "/ops/accounts/" + other.id() + "/deposits",
                TestNodes.OPERATOR_TOKEN,
                idempotent,
                idempotencyKey)
            .expect(201);
    api.put("/v1/account/spend-cap", renter.apiKey(), "{\"monthly\":\"300\"}").expect(200);
    api.put("/v1/account/spend-cap", other.apiKey(), "{\"monthly\":\"0.5\"}").expect(200);
    String extraKey =
        api.post("/v1/account/api-keys", renter.apiKey(), "{\"label\":\"laptop\"}")
            .expect(201)
            .text("api_key");
    String revokedKey =
        api.post("/v1/account/api-keys", other.apiKey(), "{\"label\":\"old\"}")
            .expect(201)
            .text("api_key");
    api.delete("/v1/account/api-keys/" + ApiClient.keyIdOf(revokedKey), other.apiKey()).expect(204);

    eventually(
        READ_SIDE,
        () -> {
          assertEquals(2, api.ledger(renter.apiKey(), "").get("entries").size());
          assertEquals(2, api.ledger(other.apiKey(), "").get("entries").size());
          assertTrue(api.audit().get("conserved").asBoolean());
        });
    JsonNode renterBefore = api.account(renter.apiKey());
    JsonNode otherBefore = api.account(other.apiKey());
    assertEquals("125.500000", renterBefore.get("balance").asText());
    assertEquals("43.000001", otherBefore.get("balance").asText());
    JsonNode renterLedger = api.ledger(renter.apiKey(), "");
    JsonNode otherLedger = api.ledger(other.apiKey(), "");
    JsonNode renterKeys = api.get("/v1/account/api-keys", renter.apiKey()).expect(200).json();
    JsonNode otherKeys = api.get("/v1/account/api-keys", other.apiKey()).expect(200).json();
    JsonNode auditBefore = api.audit();

    node.close();
    node = null;
    node = Node.start(settings);
    ApiClient again = new ApiClient(node.baseUrl());

    // The entities recover their state; the keys still authenticate (and the revoked one still does
    // not).
    assertEquals(renterBefore, again.account(renter.apiKey()));
    assertEquals(otherBefore, again.account(other.apiKey()));
    assertEquals(renter.id(), again.account(extraKey).get("id").asText());
    again.get("/v1/account", revokedKey).expectProblem(401, "unauthorized");
    assertEquals("300.000000", again.account(renter.apiKey()).get("spend_cap_monthly").asText());
    assertEquals("0.500000", again.account(other.apiKey()).get("spend_cap_monthly").asText());
    // Every key as it was, but its last use: the keys were used again since (a node writes a key's
    // last use at most once a minute, and this incarnation had not written it yet).
    assertEquals(
        withoutLastUse(renterKeys),
        withoutLastUse(again.get("/v1/account/api-keys", renter.apiKey()).expect(200).json()));
    assertEquals(
        withoutLastUse(otherKeys),
        withoutLastUse(again.get("/v1/account/api-keys", other.apiKey()).expect(200).json()));

    // The read side is still there, unchanged: the projection resumed from its offsets, adding
    // nothing twice.
    assertEquals(renterLedger, again.ledger(renter.apiKey(), ""));
    assertEquals(otherLedger, again.ledger(other.apiKey(), ""));
    JsonNode auditAfter = again.audit();
    assertEquals(auditBefore, auditAfter);
    assertTrue(auditAfter.get("conserved").asBoolean(), auditAfter.toString());

    // Dedup state survived too: a replayed payment, deposit reference or Idempotency-Key credits
    // nothing.
    Reply replayedPayment = again.webhook(payment).expect(200);
    assertFalse(replayedPayment.json().get("credited").asBoolean());
    assertTrue(
        again
            .opsDeposit(renter.id(), "100", "wire-1")
            .expect(200)
            .json()
            .get("duplicate")
            .asBoolean());
    Reply replayedIdempotent =
        again
            .send(
                "POST",
                "/ops/accounts/" + other.id() + "/deposits",
                TestNodes.OPERATOR_TOKEN,
                idempotent,
                idempotencyKey)
            .expect(201);
    assertEquals("true", replayedIdempotent.header("Idempotent-Replayed"));
    assertEquals(firstIdempotent.body(), replayedIdempotent.body());
    assertEquals("125.500000", again.balance(renter.apiKey()));
    assertEquals("43.000001", again.balance(other.apiKey()));

    // New money after the restart is booked once, after the old entries.
    again.opsDeposit(renter.id(), "0.5", "wire-4").expect(201);
    assertEquals("126.000000", again.balance(renter.apiKey()));
    eventually(
        READ_SIDE,
        () -> {
          JsonNode entries = again.ledger(renter.apiKey(), "").get("entries");
          assertEquals(3, entries.size(), entries.toString());
          assertEquals("deposit:manual:wire-1", entries.get(0).get("key").asText());
          assertEquals("deposit:payment:pay-restart-1", entries.get(1).get("key").asText());
          assertEquals("deposit:manual:wire-4", entries.get(2).get("key").asText());
          JsonNode audit = again.audit();
          assertEquals("169.000001", audit.get("deposits").asText());
          assertEquals(auditBefore.get("entries").asLong() + 1, audit.get("entries").asLong());
          assertTrue(audit.get("conserved").asBoolean(), audit.toString());
        });
  }

  private static JsonNode withoutLastUse(JsonNode keys) {
    JsonNode copy = keys.deepCopy();
    copy.get("keys")
        .forEach(k -> ((com.fasterxml.jackson.databind.node.ObjectNode) k).remove("last_used_at"));
    return copy;
  }
}
