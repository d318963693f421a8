package dev.tickmark.node;

import static dev.tickmark.node.Eventually.eventually;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import dev.tickmark.node.ApiClient.Customer;
import dev.tickmark.node.ApiClient.Reply;
import dev.tickmark.persistence.TestDatabase;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.TestMethodOrder;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The account, payment and operator HTTP API of one real node (real PostgreSQL, real port), through
 * the JDK HTTP client. One node serves the whole class; every test signs up its own accounts.
 */
class AccountHttpIntegrationTest {
  private static final Duration READ_SIDE = Duration.ofSeconds(15);

  private static Node node;
  private static ApiClient api;

  /** Every account this class opened: their balances must add up to the ledger's deposits. */
  private static final List<Customer> customers = new CopyOnWriteArrayList<>();

  private static final AtomicInteger ids = new AtomicInteger();

  @BeforeAll
  static void startNode() throws Exception {
    node = Node.start(TestNodes.settings(TestDatabase.fresh("account_http")));
    api = new ApiClient(node.baseUrl());
  }

  @AfterAll
  static void stopNode() throws Exception {
    if (node != null) node.close();
  }

  private static Customer signUp(String name) {
    Customer customer = api.signUp(name);
    customers.add(customer);
    return customer;
  }

  private static String unique(String prefix) {
    return prefix + "-" + ids.incrementAndGet() + "-" + System.nanoTime();
  }

  // ---- sign-up and the account ------------------------------------------------------------------

  @Test
  void signUpOpensAnEmptyEuroAccountWithAnApiKey() {
    Reply reply = api.post("/v1/accounts", null, "{\"name\":\"Ada\"}").expect(201);
    JsonNode account = reply.json().get("account");
    String apiKey = reply.text("api_key");
    customers.add(new Customer(account.get("id").asText(), apiKey));
    assertTrue(apiKey.matches("tmk_[0-9a-f]+_[0-9a-f]+"), apiKey);
    assertTrue(account.get("id").asText().startsWith("acc_"));

    JsonNode me = api.account(apiKey);
    assertEquals(account.get("id").asText(), me.get("id").asText());
    assertEquals("Ada", me.get("name").asText());
    assertEquals("EUR", me.get("currency").asText());
    assertEquals("0.000000", me.get("balance").asText());
    assertEquals("0.000000", me.get("held").asText());
    assertEquals("0.000000", me.get("available").asText());
    assertEquals("0.000000", me.get("earnings").asText());
    assertEquals("0.000000", me.get("spent_this_month").asText());
    assertTrue(me.get("spend_cap_monthly").isNull());
  }

  @Test
  void signUpRefusesAMissingName() {
    api.post("/v1/accounts", null, "{\"name\":\"   \"}").expectProblem(400, "invalid_name");
    api.post("/v1/accounts", null, "{}").expectProblem(400, "invalid_name");
  }

  @Test
  void accountNeedsAValidApiKey() {
    api.get("/v1/account", null).expectProblem(401, "unauthorized");
    api.get("/v1/account", "tmk_00_00").expectProblem(401, "unauthorized");
    api.get("/v1/account", "not-a-key").expectProblem(401, "unauthorized");
    Customer c = signUp("Tampered");
    api.get("/v1/account", c.apiKey() + "0").expectProblem(401, "unauthorized");
  }

  // ---- the payment webhook ----------------------------------------------------------------------

  @Test
  void signedWebhookCreditsThePaymentOnceHoweverOftenItIsReplayed() {
    Customer c = signUp("Payer");
    String paymentId = unique("pay");
    String body = ApiClient.paymentBody(paymentId, c.id(), "25.50", "EUR", "succeeded");

    Reply first = api.webhook(body).expect(200);
    assertTrue(first.json().get("received").asBoolean());
    assertTrue(first.json().get("credited").asBoolean());
    assertEquals("25.500000", first.text("amount"));
    assertEquals(paymentId, first.text("payment_id"));
    assertEquals("25.500000", api.balance(c.apiKey()));

    Reply replayed = api.webhook(body).expect(200);
    assertTrue(replayed.json().get("received").asBoolean());
    assertFalse(replayed.json().get("credited").asBoolean());
    assertEquals("25.500000", api.balance(c.apiKey()));

    eventually(
        READ_SIDE,
        () -> {
          JsonNode entries = api.ledger(c.apiKey(), "").get("entries");
          assertEquals(1, entries.size(), entries.toString());
          assertEquals("deposit:payment:" + paymentId, entries.get(0).get("key").asText());
          assertEquals("25.500000", entries.get(0).get("amount").asText());
        });
  }

  /**
   * Payment ids are the provider's, unique across the platform: a payment credited to one account,
   * replayed (correctly signed) for another account or another amount, credits nothing more.
   */
  @Test
  void aPaymentIdCreditedToOneAccountIsRefusedForAnother() {
    Customer payer = signUp("First payer");
    Customer other = signUp("Replayer");
    String paymentId = unique("pay");
    api.webhook(ApiClient.paymentBody(paymentId, payer.id(), "40", "EUR", "succeeded")).expect(200);
    assertEquals("40.000000", api.balance(payer.apiKey()));

    api.webhook(ApiClient.paymentBody(paymentId, other.id(), "40", "EUR", "succeeded"))
        .expectProblem(409, "payment_id_reused");
    api.webhook(ApiClient.paymentBody(paymentId, payer.id(), "41", "EUR", "succeeded"))
        .expectProblem(409, "payment_id_reused");
    assertEquals("0.000000", api.balance(other.apiKey()), "the replay credited nothing");
    assertEquals("40.000000", api.balance(payer.apiKey()));
    // the provider's own retry of the real payment is still received, and still credits once
    Reply retry =
        api.webhook(ApiClient.paymentBody(paymentId, payer.id(), "40", "EUR", "succeeded"))
            .expect(200);
    assertFalse(retry.json().get("credited").asBoolean());
    assertEquals("40.000000", api.balance(payer.apiKey()));
  }

  /** Responses that carry an API key say no cache may keep them; others say nothing. */
  @Test
  void responsesCarryingAKeyAreNeverCached() {
    Reply signedUp = api.post("/v1/accounts", null, "{\"name\":\"Cautious\"}").expect(201);
    assertEquals("no-store", signedUp.header("Cache-Control"));
    String key = signedUp.text("api_key");
    Reply created = api.post("/v1/account/api-keys", key, "{\"label\":\"ci\"}").expect(201);
    assertEquals("no-store", created.header("Cache-Control"));
    assertEquals(null, api.get("/v1/account", key).expect(200).header("Cache-Control"));
  }

  /**
   * A launch whose hourly ceiling ({@code max_price_per_gpu_hour × count}) is over 1 000 000 EUR is
   * refused at the edge: it used to overflow the hold arithmetic inside the rental (503).
   */
  @Test
  void aLaunchWhoseHourlyCeilingCouldOverflowIsRefused400() {
    Customer renter = signUp("Overflowing renter");
    api.opsDeposit(renter.id(), "10", unique("wire")).expect(201);
    for (String[] priceAndCount :
        new String[][] {
          {"1000000000000", "10"}, // the largest amount there is, on 10 cards
          {"1000000000000", "1"},
          {"100000.000001", "10"}
        }) {
      api.post("/v1/rentals", renter.apiKey(), launch(priceAndCount[0], priceAndCount[1]))
          .expectProblem(400, "invalid_amount");
    }
    // exactly at the bound the edge lets it through, and the account answers (no overflow)
    api.post("/v1/rentals", renter.apiKey(), launch("100000", "10"))
        .expectProblem(402, "insufficient_funds");
    assertEquals("10.000000", api.balance(renter.apiKey()));
  }

  private static String launch(String maxPrice, String count) {
    return "{\"gpu\":\"h100-80gb\",\"count\":"
        + count
        + ",\"max_price_per_gpu_hour\":\""
        + maxPrice
        + "\",\"image\":\"ubuntu:24.04\",\"wait_seconds\":0}";
  }

  @Test
  void webhookWithABadSignatureIsRefusedAndCreditsNothing() {
    Customer c = signUp("Forger");
    String body = ApiClient.paymentBody(unique("pay"), c.id(), "100", "EUR", "succeeded");
    byte[] bytes = body.getBytes(StandardCharsets.UTF_8);
    long now = Instant.now().getEpochSecond();

    api.webhookWithHeader(bytes, null).expectProblem(401, "invalid_signature");
    api.webhookWithHeader(bytes, "t=" + now + ",v1=" + "00".repeat(32))
        .expectProblem(401, "invalid_signature");
    api.webhookWithHeader(bytes, "t=" + now + ",v1=not-hex")
        .expectProblem(401, "invalid_signature");
    api.webhookWithHeader(bytes, "v1=" + "00".repeat(32)).expectProblem(401, "invalid_signature");
    // Signed for one body, sent with another.
    String signed = api.signatureFor(bytes);
    byte[] tampered = body.replace("\"100\"", "\"1000\"").getBytes(StandardCharsets.UTF_8);
    api.webhookWithHeader(tampered, signed).expectProblem(401, "invalid_signature");
    // Signed with another secret.
    String foreign =
        new dev.tickmark.http.WebhookSignature("whsec_someone_else", Duration.ofMinutes(5))
            .header(now, bytes);
    api.webhookWithHeader(bytes, foreign).expectProblem(401, "invalid_signature");

    assertEquals("0.000000", api.balance(c.apiKey()));
  }

  @Test
  void webhookSignedOutsideTheFiveMinuteWindowIsRefused() {
    Customer c = signUp("Late");
    String body = ApiClient.paymentBody(unique("pay"), c.id(), "10", "EUR", "succeeded");
    long now = Instant.now().getEpochSecond();

    api.webhookSignedAt(body, now - 6 * 60).expectProblem(401, "invalid_signature");
    api.webhookSignedAt(body, now + 6 * 60).expectProblem(401, "invalid_signature");
    assertEquals("0.000000", api.balance(c.apiKey()));

    // The same payment signed now is still accepted: the refusals kept no trace of it.
    assertTrue(api.webhook(body).expect(200).json().get("credited").asBoolean());
    assertEquals("10.000000", api.balance(c.apiKey()));
  }

  @Test
  void failedPaymentIsAcknowledgedAndCreditsNothing() {
    Customer c = signUp("Declined");
    String paymentId = unique("pay");
    Reply reply =
        api.webhook(ApiClient.paymentBody(paymentId, c.id(), "50", "EUR", "failed")).expect(200);
    assertTrue(reply.json().get("received").asBoolean());
    assertFalse(reply.json().get("credited").asBoolean());
    assertEquals("0.000000", api.balance(c.apiKey()));

    // Once it succeeds, it is credited (the failed notice did not burn the payment id).
    Reply succeeded =
        api.webhook(ApiClient.paymentBody(paymentId, c.id(), "50", "EUR", "succeeded")).expect(200);
    assertTrue(succeeded.json().get("credited").asBoolean());
    assertEquals("50.000000", api.balance(c.apiKey()));
  }

  @Test
  void nonEuroPaymentIsRefused() {
    Customer c = signUp("Dollar");
    api.webhook(ApiClient.paymentBody(unique("pay"), c.id(), "10", "USD", "succeeded"))
        .expectProblem(400, "unsupported_currency");
    assertEquals("0.000000", api.balance(c.apiKey()));
    assertEquals(0, api.ledger(c.apiKey(), "").get("entries").size());
  }

  @Test
  void webhookForAnUnknownAccountIsNotFound() {
    api.webhook(
            ApiClient.paymentBody(
                unique("pay"), "acc_000000000000000000000000", "10", "EUR", "succeeded"))
        .expectProblem(404, "not_found");
  }

  // ---- the ledger -------------------------------------------------------------------------------

  @Test
  void ledgerListsDepositsOldestFirstWithCursorPaging() {
    Customer c = signUp("Ledger");
    String paymentId = unique("pay");
    api.webhook(ApiClient.paymentBody(paymentId, c.id(), "1.25", "EUR", "succeeded")).expect(200);
    String wire = unique("wire");
    api.opsDeposit(c.id(), "2", wire).expect(201);
    String cash = unique("cash");
    api.opsDeposit(c.id(), "0.000003", cash).expect(201);
    assertEquals("3.250003", api.balance(c.apiKey()));

    List<String> keys =
        List.of("deposit:payment:" + paymentId, "deposit:manual:" + wire, "deposit:manual:" + cash);
    List<String> amounts = List.of("1.250000", "2.000000", "0.000003");
    eventually(
        READ_SIDE,
        () -> {
          JsonNode statement = api.ledger(c.apiKey(), "");
          JsonNode entries = statement.get("entries");
          assertEquals(3, entries.size(), entries.toString());
          for (int i = 0; i < 3; i++) {
            JsonNode e = entries.get(i);
            assertEquals("deposit", e.get("kind").asText());
            assertEquals(keys.get(i), e.get("key").asText());
            assertEquals(amounts.get(i), e.get("amount").asText());
            assertNotNull(Instant.parse(e.get("at").asText()));
            assertFalse(e.get("id").asText().isEmpty());
          }
          assertTrue(statement.get("next_after").isNull(), "a short page has no next cursor");
        });

    // Walk it one entry at a time.
    List<String> walked = new ArrayList<>();
    String after = null;
    for (int page = 0; page < 10; page++) {
      JsonNode statement =
          api.ledger(c.apiKey(), "?limit=1" + (after == null ? "" : "&after=" + after));
      JsonNode entries = statement.get("entries");
      if (entries.isEmpty()) {
        assertTrue(statement.get("next_after").isNull());
        break;
      }
      assertEquals(1, entries.size());
      walked.add(entries.get(0).get("key").asText());
      after = statement.get("next_after").asText();
      assertEquals(entries.get(0).get("id").asText(), after);
    }
    assertEquals(keys, walked);

    api.get("/v1/account/ledger?limit=0", c.apiKey()).expectProblem(400, "invalid_parameter");
    api.get("/v1/account/ledger?limit=501", c.apiKey()).expectProblem(400, "invalid_parameter");
    api.get("/v1/account/ledger?limit=ten", c.apiKey()).expectProblem(400, "invalid_parameter");
    api.get("/v1/account/ledger?after=-1", c.apiKey()).expectProblem(400, "invalid_parameter");
  }

  // ---- spend cap --------------------------------------------------------------------------------

  @Test
  void spendCapCanBeSetAndRemoved() {
    Customer c = signUp("Capped");
    JsonNode set =
        api.put("/v1/account/spend-cap", c.apiKey(), "{\"monthly\":\"100.00\"}").expect(200).json();
    assertEquals("100.000000", set.get("spend_cap_monthly").asText());
    assertEquals("100.000000", api.account(c.apiKey()).get("spend_cap_monthly").asText());

    JsonNode zero =
        api.put("/v1/account/spend-cap", c.apiKey(), "{\"monthly\":\"0\"}").expect(200).json();
    assertEquals("0.000000", zero.get("spend_cap_monthly").asText());

    JsonNode removed =
        api.put("/v1/account/spend-cap", c.apiKey(), "{\"monthly\":null}").expect(200).json();
    assertTrue(removed.get("spend_cap_monthly").isNull());
    assertTrue(api.account(c.apiKey()).get("spend_cap_monthly").isNull());

    api.put("/v1/account/spend-cap", c.apiKey(), "{}").expectProblem(400, "missing_field");
    api.put("/v1/account/spend-cap", null, "{\"monthly\":\"1\"}")
        .expectProblem(401, "unauthorized");

    JsonNode byOperator =
        api.put(
                "/ops/accounts/" + c.id() + "/spend-cap",
                TestNodes.OPERATOR_TOKEN,
                "{\"monthly\":\"7.5\"}")
            .expect(200)
            .json();
    assertEquals("7.500000", byOperator.get("spend_cap_monthly").asText());
    assertEquals("7.500000", api.account(c.apiKey()).get("spend_cap_monthly").asText());
  }

  // ---- API keys ---------------------------------------------------------------------------------

  @Test
  void apiKeysAreShownOnceListedByPrefixOnlyAndRevocable() {
    Customer c = signUp("Keys");
    Reply created = api.post("/v1/account/api-keys", c.apiKey(), "{\"label\":\"ci\"}").expect(201);
    String secondKey = created.text("api_key");
    String secondId = created.text("id");
    assertTrue(secondKey.startsWith("tmk_" + secondId + "_"), secondKey);
    assertEquals("tmk_" + secondId, created.text("prefix"));
    assertEquals("ci", created.text("label"));
    assertEquals(c.id(), api.account(secondKey).get("id").asText());

    // A key without a body gets no label.
    String thirdId = api.post("/v1/account/api-keys", c.apiKey(), null).expect(201).text("id");

    Reply list = api.get("/v1/account/api-keys", c.apiKey()).expect(200);
    JsonNode keys = list.json().get("keys");
    assertEquals(3, keys.size(), keys.toString());
    List<String> listed = new ArrayList<>();
    for (JsonNode k : keys) {
      listed.add(k.get("id").asText());
      assertEquals("tmk_" + k.get("id").asText(), k.get("prefix").asText());
      assertNull(k.get("api_key"), "a listed key never shows its secret");
      assertNull(k.get("secret"));
      assertTrue(k.get("revoked_at").isNull());
    }
    assertTrue(listed.containsAll(List.of(c.keyId(), secondId, thirdId)), listed.toString());
    for (String full : List.of(c.apiKey(), secondKey)) {
      String secret = full.substring(full.lastIndexOf('_') + 1);
      assertFalse(list.body().contains(secret), "the key list leaks a secret");
    }

    api.delete("/v1/account/api-keys/" + secondId, c.apiKey()).expect(204);
    api.get("/v1/account", secondKey).expectProblem(401, "unauthorized");
    api.get("/v1/account/api-keys", secondKey).expectProblem(401, "unauthorized");
    api.get("/v1/account", c.apiKey()).expect(200);
    api.delete("/v1/account/api-keys/" + secondId, c.apiKey()).expectProblem(404, "not_found");

    JsonNode after = api.get("/v1/account/api-keys", c.apiKey()).expect(200).json().get("keys");
    for (JsonNode k : after) {
      boolean revoked = k.get("id").asText().equals(secondId);
      assertEquals(revoked, !k.get("revoked_at").isNull(), k.toString());
    }

    // A key can revoke itself; after that it is refused.
    api.delete("/v1/account/api-keys/" + c.keyId(), c.apiKey()).expect(204);
    api.get("/v1/account", c.apiKey()).expectProblem(401, "unauthorized");
  }

  // ---- operator endpoints -----------------------------------------------------------------------

  @Test
  void operatorEndpointsNeedTheOperatorToken() {
    Customer c = signUp("NotAnOperator");
    for (String path : List.of("/ops/ledger/audit", "/ops/accounts/" + c.id())) {
      api.get(path, null).expectProblem(401, "unauthorized");
      api.get(path, c.apiKey()).expectProblem(401, "unauthorized");
      api.get(path, TestNodes.OPERATOR_TOKEN + "x").expectProblem(401, "unauthorized");
    }
    String body = "{\"amount\":\"1000\",\"reference\":\"" + unique("steal") + "\"}";
    api.post("/ops/accounts/" + c.id() + "/deposits", null, body)
        .expectProblem(401, "unauthorized");
    api.post("/ops/accounts/" + c.id() + "/deposits", c.apiKey(), body)
        .expectProblem(401, "unauthorized");
    api.put("/ops/accounts/" + c.id() + "/spend-cap", c.apiKey(), "{\"monthly\":null}")
        .expectProblem(401, "unauthorized");
    // The operator token is not an API key either.
    api.get("/v1/account", TestNodes.OPERATOR_TOKEN).expectProblem(401, "unauthorized");
    assertEquals("0.000000", api.balance(c.apiKey()));

    JsonNode view = api.get("/ops/accounts/" + c.id(), TestNodes.OPERATOR_TOKEN).expect(200).json();
    assertEquals(c.id(), view.get("id").asText());
    assertEquals("0.000000", view.get("deposited").asText());
  }

  @Test
  void operatorDepositIsIdempotentOnItsReference() {
    Customer c = signUp("Wired");
    String reference = unique("wire");
    Reply first = api.opsDeposit(c.id(), "40", reference).expect(201);
    assertFalse(first.json().get("duplicate").asBoolean());
    assertEquals("40.000000", first.text("amount"));
    assertEquals("deposit:manual:" + reference, first.text("key"));
    assertEquals(c.id(), first.text("account_id"));

    Reply second = api.opsDeposit(c.id(), "40", reference).expect(200);
    assertTrue(second.json().get("duplicate").asBoolean());
    assertEquals("deposit:manual:" + reference, second.text("key"));
    assertEquals("40.000000", api.balance(c.apiKey()));

    // The same reference with another amount is a conflict, not a second deposit.
    api.opsDeposit(c.id(), "41", reference).expectProblem(409, "idempotency_conflict");
    assertEquals("40.000000", api.balance(c.apiKey()));
    eventually(READ_SIDE, () -> assertEquals(1, api.ledger(c.apiKey(), "").get("entries").size()));
  }

  @Test
  void idempotencyKeyReplaysTheFirstAnswerAndRefusesAnotherBody() {
    Customer c = signUp("Retried");
    String path = "/ops/accounts/" + c.id() + "/deposits";
    String idempotencyKey = unique("idem");
    String body = "{\"amount\":\"12.34\",\"reference\":\"" + unique("wire") + "\"}";
    Map<String, String> header = Map.of("Idempotency-Key", idempotencyKey);

    Reply first = api.send("POST", path, TestNodes.OPERATOR_TOKEN, body, header).expect(201);
    assertNull(first.header("Idempotent-Replayed"));
    Reply replay = api.send("POST", path, TestNodes.OPERATOR_TOKEN, body, header).expect(201);
    assertEquals("true", replay.header("Idempotent-Replayed"));
    assertEquals(first.body(), replay.body());
    assertEquals(first.json(), replay.json());
    assertEquals("12.340000", api.balance(c.apiKey()));

    String other = "{\"amount\":\"99\",\"reference\":\"" + unique("wire") + "\"}";
    api.send("POST", path, TestNodes.OPERATOR_TOKEN, other, header)
        .expectProblem(409, "idempotency_key_reused");
    assertEquals("12.340000", api.balance(c.apiKey()));

    // The same key for the same body on another account is another request.
    Customer d = signUp("RetriedToo");
    api.send(
            "POST", "/ops/accounts/" + d.id() + "/deposits", TestNodes.OPERATOR_TOKEN, body, header)
        .expectProblem(409, "idempotency_key_reused");
    assertEquals("0.000000", api.balance(d.apiKey()));

    api.send(
            "POST",
            path,
            TestNodes.OPERATOR_TOKEN,
            body,
            Map.of("Idempotency-Key", "k".repeat(256)))
        .expectProblem(400, "invalid_idempotency_key");
  }

  @Test
  void operatorDepositToAnUnknownAccountIsNotFound() {
    String unknown = "acc_ffffffffffffffffffffffff";
    api.opsDeposit(unknown, "5", unique("wire")).expectProblem(404, "not_found");
    api.get("/ops/accounts/" + unknown, TestNodes.OPERATOR_TOKEN).expectProblem(404, "not_found");
    api.put(
            "/ops/accounts/" + unknown + "/spend-cap",
            TestNodes.OPERATOR_TOKEN,
            "{\"monthly\":\"1\"}")
        .expectProblem(404, "not_found");
  }

  @Test
  void depositBeyondTheLargestKeptBalanceIsRefused() {
    Customer c = signUp("Whale");
    api.opsDeposit(c.id(), "1000000000000.000001", unique("wire"))
        .expectProblem(400, "invalid_amount");
    api.opsDeposit(c.id(), "1000000000000", unique("wire")).expect(201);
    api.opsDeposit(c.id(), "0.000001", unique("wire")).expectProblem(422, "amount_too_large");
    api.webhook(ApiClient.paymentBody(unique("pay"), c.id(), "0.000001", "EUR", "succeeded"))
        .expectProblem(422, "amount_too_large");
    assertEquals("1000000000000.000000", api.balance(c.apiKey()));
  }

  @Test
  void unknownRoutesAndMethodsAnswerProblems() {
    Customer c = signUp("Lost");
    api.get("/v1/nowhere", c.apiKey()).expectProblem(404, "no_such_route");
    api.delete("/v1/account/spend-cap", c.apiKey()).expectProblem(405, "method_not_allowed");
    api.get("/v1/payments/webhook", null).expectProblem(405, "method_not_allowed");
    api.post("/v1/accounts", null, "{\"name\":\"x\",\"admin\":true}")
        .expectProblem(400, "unknown_field");
    api.post("/v1/account/api-keys", c.apiKey(), "{\"label\":\"" + "l".repeat(201) + "\"}")
        .expectProblem(400, "invalid_label");
    api.opsDeposit(c.id(), "1", "r".repeat(201)).expectProblem(400, "invalid_field");
    api.opsDeposit(c.id(), "1", " ").expectProblem(400, "invalid_field");
    assertEquals("0.000000", api.balance(c.apiKey()));
  }

  // ---- tenancy ----------------------------------------------------------------------------------

  @Test
  void anotherTenantsKeyNeverReadsOrChangesAnAccount() {
    Customer a = signUp("Alice");
    Customer b = signUp("Bob");
    api.opsDeposit(a.id(), "30", unique("wire")).expect(201);
    api.put("/v1/account/spend-cap", a.apiKey(), "{\"monthly\":\"20\"}").expect(200);

    JsonNode asB = api.account(b.apiKey());
    assertEquals(b.id(), asB.get("id").asText());
    assertNotEquals(a.id(), asB.get("id").asText());
    assertEquals("0.000000", asB.get("balance").asText());

    // B's keys, ledger and spend cap are B's alone.
    JsonNode bKeys = api.get("/v1/account/api-keys", b.apiKey()).expect(200).json().get("keys");
    assertEquals(1, bKeys.size());
    assertEquals(b.keyId(), bKeys.get(0).get("id").asText());
    eventually(READ_SIDE, () -> assertEquals(1, api.ledger(a.apiKey(), "").get("entries").size()));
    assertEquals(0, api.ledger(b.apiKey(), "").get("entries").size());
    String aEntry = api.ledger(a.apiKey(), "").get("entries").get(0).get("id").asText();
    long before = Long.parseLong(aEntry) - 1;
    assertEquals(0, api.ledger(b.apiKey(), "?after=" + before).get("entries").size());

    api.put("/v1/account/spend-cap", b.apiKey(), "{\"monthly\":null}").expect(200);
    assertEquals("20.000000", api.account(a.apiKey()).get("spend_cap_monthly").asText());

    // Revoking A's key with B's key: 404, and A's key still works.
    api.delete("/v1/account/api-keys/" + a.keyId(), b.apiKey()).expectProblem(404, "not_found");
    assertEquals(a.id(), api.account(a.apiKey()).get("id").asText());

    // A key built from A's key id and B's secret is not A's key.
    String bSecret = b.apiKey().substring(b.apiKey().lastIndexOf('_') + 1);
    api.get("/v1/account", "tmk_" + a.keyId() + "_" + bSecret).expectProblem(401, "unauthorized");

    assertEquals("30.000000", api.balance(a.apiKey()));
  }

  // ---- the audit --------------------------------------------------------------------------------

  @Test
  void auditTotalsMatchEveryBalanceAndAreConserved() {
    Customer c = signUp("Audited");
    api.opsDeposit(c.id(), "5", unique("wire")).expect(201);
    eventually(
        READ_SIDE,
        () -> {
          long sum = 0;
          for (Customer each : customers) {
            JsonNode view =
                api.get("/ops/accounts/" + each.id(), TestNodes.OPERATOR_TOKEN).expect(200).json();
            sum += micros(view.get("balance").asText());
          }
          JsonNode audit = api.audit();
          assertEquals("EUR", audit.get("currency").asText());
          assertEquals(sum, micros(audit.get("deposits").asText()), audit.toString());
          assertEquals(sum, micros(audit.get("renter_balances").asText()), audit.toString());
          assertEquals(0, micros(audit.get("captures").asText()));
          assertEquals(0, micros(audit.get("holds_open").asText()));
          assertEquals(0, audit.get("mismatched_settlements").asLong());
          assertEquals(0, audit.get("accounts_below_zero").asLong());
          assertTrue(audit.get("conserved").asBoolean(), audit.toString());
        });
  }

  /** Parses a six-decimal output amount ("12.340000") into micro-euros, exactly. */
  static long micros(String amount) {
    assertTrue(amount.matches("-?\\d+\\.\\d{6}"), "outputs carry exactly six decimals: " + amount);
    return Long.parseLong(amount.replace(".", ""));
  }

  // ---- bad input --------------------------------------------------------------------------------

  /**
   * Every malformed request is a 4xx problem with a stable code, never a 500, and moves no money.
   */
  @Nested
  @TestInstance(TestInstance.Lifecycle.PER_CLASS)
  @TestMethodOrder(MethodOrderer.OrderAnnotation.class)
  class BadInput {
    private Customer target;
    private final AtomicInteger row = new AtomicInteger();

    @BeforeAll
    void fundTarget() {
      target = signUp("Target");
      api.opsDeposit(target.id(), "10", unique("wire")).expect(201);
      eventually(
          READ_SIDE, () -> assertEquals(1, api.ledger(target.apiKey(), "").get("entries").size()));
    }

    /** Where a bad amount can be sent, and how the body around it looks. */
    enum Endpoint {
      OPS_DEPOSIT,
      WEBHOOK,
      SPEND_CAP,
      OPS_SPEND_CAP;

      String body(String accountId, String amountJson, String uniqueId) {
        return switch (this) {
          case OPS_DEPOSIT -> "{\"amount\":" + amountJson + ",\"reference\":\"" + uniqueId + "\"}";
          case WEBHOOK ->
              "{\"payment_id\":\""
                  + uniqueId
                  + "\",\"account_id\":\""
                  + accountId
                  + "\",\"amount\":"
                  + amountJson
                  + ",\"currency\":\"EUR\",\"status\":\"succeeded\"}";
          case SPEND_CAP, OPS_SPEND_CAP -> "{\"monthly\":" + amountJson + "}";
        };
      }
    }

    static Stream<Arguments> badRequests() {
      String tooBig = "\"" + "9".repeat(20) + "\"";
      List<Arguments> rows = new ArrayList<>();
      for (Endpoint e : Endpoint.values()) {
        rows.add(Arguments.of(e, "JSON number", "amount:12", 400, "invalid_amount"));
        rows.add(Arguments.of(e, "JSON fraction", "amount:12.5", 400, "invalid_amount"));
        rows.add(Arguments.of(e, "seven decimals", "amount:\"1.0000001\"", 400, "invalid_amount"));
        rows.add(Arguments.of(e, "negative", "amount:\"-5\"", 400, "invalid_amount"));
        rows.add(Arguments.of(e, "absurdly large", "amount:" + tooBig, 400, "invalid_amount"));
        rows.add(Arguments.of(e, "non-numeric", "amount:\"ten\"", 400, "invalid_amount"));
        rows.add(Arguments.of(e, "exponent", "amount:\"1e3\"", 400, "invalid_amount"));
        rows.add(Arguments.of(e, "empty amount", "amount:\"\"", 400, "invalid_amount"));
        rows.add(Arguments.of(e, "boolean", "amount:true", 400, "invalid_amount"));
        rows.add(Arguments.of(e, "unknown field", "extra", 400, "unknown_field"));
        rows.add(Arguments.of(e, "malformed JSON", "raw:{\"amount\": ", 400, "malformed_json"));
        rows.add(Arguments.of(e, "JSON array", "raw:[]", 400, "malformed_json"));
        rows.add(Arguments.of(e, "JSON null", "raw:null", 400, "malformed_json"));
        rows.add(Arguments.of(e, "trailing tokens", "trailing", 400, "malformed_json"));
        rows.add(Arguments.of(e, "empty body", "raw:", 400, "malformed_json"));
        rows.add(
            Arguments.of(
                e,
                "duplicate key",
                "raw:{\"amount\":\"1\",\"amount\":\"1000\"}",
                400,
                "malformed_json"));
        rows.add(Arguments.of(e, "body over 64 KiB", "huge", 413, "payload_too_large"));
      }
      for (Endpoint e : List.of(Endpoint.OPS_DEPOSIT, Endpoint.WEBHOOK)) {
        rows.add(Arguments.of(e, "zero", "amount:\"0\"", 400, "invalid_amount"));
        rows.add(Arguments.of(e, "missing amount", "amount:null", 400, "invalid_amount"));
      }
      return rows.stream();
    }

    @Order(1)
    @ParameterizedTest(name = "{0}: {1} -> {3} {4}")
    @MethodSource("badRequests")
    void badRequestIsAProblemWithAStableCode(
        Endpoint endpoint, String caseName, String shape, int status, String code) {
      String uniqueId = "bad-" + row.incrementAndGet() + "-" + System.nanoTime();
      byte[] body = bodyFor(endpoint, shape, uniqueId);
      Reply reply =
          switch (endpoint) {
            case OPS_DEPOSIT ->
                api.sendBytes(
                    "POST",
                    "/ops/accounts/" + target.id() + "/deposits",
                    TestNodes.OPERATOR_TOKEN,
                    body,
                    Map.of());
            case WEBHOOK -> api.webhookWithHeader(body, api.signatureFor(body));
            case SPEND_CAP ->
                api.sendBytes("PUT", "/v1/account/spend-cap", target.apiKey(), body, Map.of());
            case OPS_SPEND_CAP ->
                api.sendBytes(
                    "PUT",
                    "/ops/accounts/" + target.id() + "/spend-cap",
                    TestNodes.OPERATOR_TOKEN,
                    body,
                    Map.of());
          };
      assertTrue(
          reply.status() >= 400 && reply.status() < 500,
          caseName + " answered " + reply.status() + ": " + reply.body());
      reply.expectProblem(status, code);
    }

    private byte[] bodyFor(Endpoint endpoint, String shape, String uniqueId) {
      String valid = endpoint.body(target.id(), "\"1\"", uniqueId);
      String body;
      if (shape.startsWith("raw:")) {
        body = shape.substring(4);
      } else if (shape.startsWith("amount:")) {
        body = endpoint.body(target.id(), shape.substring(7), uniqueId);
      } else if (shape.equals("extra")) {
        body = valid.substring(0, valid.length() - 1) + ",\"surprise\":\"1\"}";
      } else if (shape.equals("trailing")) {
        body = valid + "{}";
      } else if (shape.equals("huge")) {
        body =
            valid.substring(0, valid.length() - 1)
                + ",\"padding\":\""
                + "x".repeat(70 * 1024)
                + "\"}";
      } else {
        throw new IllegalArgumentException(shape);
      }
      return body.getBytes(StandardCharsets.UTF_8);
    }

    @Order(2)
    @Test
    void badRequestsMovedNoMoneyAndTheBooksStillBalance() {
      JsonNode account = api.account(target.apiKey());
      assertEquals("10.000000", account.get("balance").asText());
      assertTrue(account.get("spend_cap_monthly").isNull(), account.toString());
      eventually(
          READ_SIDE,
          () -> {
            assertEquals(1, api.ledger(target.apiKey(), "").get("entries").size());
            JsonNode audit = api.audit();
            assertTrue(audit.get("conserved").asBoolean(), audit.toString());
          });
    }
  }
}
