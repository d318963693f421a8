package dev.tickmark.node;

import static dev.tickmark.node.Eventually.eventually;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import dev.tickmark.agent.Agent;
import dev.tickmark.agent.AgentConfig;
import dev.tickmark.engine.money.Money;
import dev.tickmark.persistence.TestDatabase;
import java.io.ByteArrayInputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import javax.xml.parsers.DocumentBuilderFactory;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.w3c.dom.Element;

/**
 * Operators' tools end to end on a real node, PostgreSQL, agent and HTTP: a provider earns from a
 * real rental, names where to be paid, and payout runs pay it exactly once (the same
 * Idempotency-Key gives the same run; a new run finds nothing left); the ledger and audit agree and
 * both exports carry the payout. Suspending the renter refuses a new launch; resuming allows it
 * again.
 */
class PayoutIntegrationTest {
  static final Duration WAIT = Duration.ofSeconds(40);
  static final String OPS = TestNodes.OPERATOR_TOKEN;

  /** 0.10 EUR per second, so a few seconds earn whole cents. */
  static final String PRICE = "360.00";

  static final String IBAN = "DE89370400440532013000";

  static Node node;
  static ApiClient api;
  static Agent agent;
  static Path temp;

  @BeforeAll
  static void start() throws Exception {
    temp = Files.createTempDirectory("tickmark-payouts");
    node =
        Node.start(
            TestNodes.settings(TestDatabase.fresh("payouts"))
                .withConfig("tickmark.market.allow-simulated-hosts", true)
                .withConfig("tickmark.verification.min-disk-write-mib-per-s", 10)
                .withConfig("tickmark.hosts.heartbeat-timeout", "3s")
                .withConfig("tickmark.hosts.heartbeat-interval", "1s")
                .withConfig("tickmark.rentals.settle-interval", "2s")
                .withConfig("tickmark.rentals.hold-duration", "8s")
                .withConfig("tickmark.rentals.stop-timeout", "5s")
                .withConfig("tickmark.payouts.debtor.name", "Tickmark Operations B.V.")
                .withConfig("tickmark.payouts.debtor.iban", "NL91 ABNA 0417 1643 00")
                .withConfig("tickmark.payouts.debtor.bic", "ABNANL2A"));
    api = new ApiClient(node.baseUrl());
  }

  @AfterAll
  static void stop() throws Exception {
    if (agent != null) agent.close();
    if (node != null) node.close();
  }

  @Test
  void aProviderIsPaidItsWholeCentsExactlyOnceAndASuspendedRenterCannotLaunch() throws Exception {
    ApiClient.Customer provider = api.signUp("Provider");
    String hostId = host(provider);
    ApiClient.Customer renter = api.signUp("Renter");
    api.opsDeposit(renter.id(), "100", "welcome-" + renter.id()).expect(201);

    // ---- the provider earns from a real rental
    String rentalId = launch(renter).expect(201).json().get("rental").get("id").asText();
    awaitStatus(renter, rentalId, "running");
    eventually(
        WAIT, () -> assertTrue(rental(renter, rentalId).get("billed_seconds").asLong() >= 4));
    api.post("/v1/rentals/" + rentalId + "/stop", renter.apiKey(), null).expect(202);
    awaitStatus(renter, rentalId, "ended");
    long earnings = awaitEarningsInLedger(provider);
    long payable = earnings - earnings % 10_000;
    assertTrue(payable >= 100_000, "earned at least 0.10 EUR: " + Money.format(earnings));

    // ---- without payout details the provider is skipped, and there is nothing to send the bank
    JsonNode skippedRun = payouts("key-no-details", "{\"minimum\":\"0.10\"}").expect(201).json();
    assertEquals("completed", skippedRun.get("status").asText());
    assertEquals(0, skippedRun.get("payouts").size());
    assertEquals(1, skippedRun.get("skipped").size(), skippedRun.toString());
    assertEquals(provider.id(), skippedRun.get("skipped").get(0).get("account_id").asText());
    assertEquals("no_payout_details", skippedRun.get("skipped").get(0).get("reason").asText());
    assertEquals(Money.format(payable), skippedRun.get("skipped").get(0).get("amount").asText());
    api.get("/ops/payouts/" + skippedRun.get("id").asText() + "/export.xml", OPS)
        .expectProblem(409, "nothing_to_export");

    // ---- payout details: a bad IBAN is refused, a good one is kept and shown masked
    api.put(
            "/v1/account/payout-details",
            provider.apiKey(),
            "{\"holder_name\":\"Ada Lovelace\",\"iban\":\"DE89370400440532013001\"}")
        .expectProblem(400, "invalid_iban");
    api.put(
            "/v1/account/payout-details",
            provider.apiKey(),
            "{\"holder_name\":\"Ada Lovelace\",\"iban\":\"US64SVBKUS6S3300958879\"}")
        .expectProblem(400, "invalid_iban");
    api.put(
            "/v1/account/payout-details",
            provider.apiKey(),
            "{\"holder_name\":\"Ada Lovelace\",\"iban\":\"" + IBAN + "\",\"bic\":\"DEUT\"}")
        .expectProblem(400, "invalid_bic");
    api.put(
            "/v1/account/payout-details",
            provider.apiKey(),
            "{\"holder_name\":\"Ada Lovelace\",\"iban\":\"" + IBAN + "\",\"extra\":1}")
        .expectProblem(400, "unknown_field");
    JsonNode details =
        api.put(
                "/v1/account/payout-details",
                provider.apiKey(),
                "{\"holder_name\":\"Ada Lovelace\",\"iban\":\"de89 3704 0044 0532 0130 00\",\"bic\":\"COBADEFFXXX\"}")
            .expect(200)
            .json();
    assertEquals("******************3000", details.get("payout_details").get("iban").asText());
    assertEquals(
        "Ada Lovelace",
        api.account(provider.apiKey()).get("payout_details").get("holder_name").asText());
    assertFalse(
        api.account(provider.apiKey()).toString().contains(IBAN),
        "the full IBAN is never shown back");

    // ---- redirecting the payouts (issue 17, item 3): a key without the payouts scope may not; the
    // owner's full key may, but the new IBAN is paid only after the hold period (24 h): the run
    // below still pays the first one
    JsonNode rentKey =
        api.post("/v1/account/api-keys", provider.apiKey(), "{\"label\":\"ci\"}")
            .expect(201)
            .json();
    assertEquals(List.of("provide", "read", "rent"), texts(rentKey.get("scopes")));
    String limited = rentKey.get("api_key").asText();
    api.put(
            "/v1/account/payout-details",
            limited,
            "{\"holder_name\":\"Mallory\",\"iban\":\"FR1420041010050500013M02606\"}")
        .expectProblem(403, "insufficient_scope");
    api.post("/v1/account/api-keys", limited, "{\"scopes\":[\"payouts\"]}")
        .expectProblem(403, "insufficient_scope");
    JsonNode changed =
        api.put(
                "/v1/account/payout-details",
                provider.apiKey(),
                "{\"holder_name\":\"Mallory\",\"iban\":\"FR1420041010050500013M02606\"}")
            .expect(200)
            .json();
    assertEquals("******************3000", changed.get("payout_details").get("iban").asText());
    assertEquals(
        "Mallory",
        changed.get("pending_payout_details").get("holder_name").asText(),
        changed.toString());
    assertTrue(changed.get("pending_payout_details").hasNonNull("effective_at"));
    eventually(
        WAIT,
        () -> {
          JsonNode trail =
              api.get("/v1/account/audit", provider.apiKey()).expect(200).json().get("entries");
          assertEquals(2, trail.size(), trail.toString());
          assertEquals("payout_details_set", trail.get(0).get("kind").asText());
          assertTrue(trail.get(0).get("detail").asText().contains("Mallory"), trail.toString());
          assertTrue(trail.get(0).hasNonNull("effective_at"), trail.toString());
          assertTrue(trail.get(1).get("detail").asText().contains("in force at once"));
        });

    // ---- bad run requests
    payouts("bad-1", "{\"minimum\":\"abc\"}").expectProblem(400, "invalid_amount");
    payouts("bad-2", "{\"minimum\":\"-1\"}").expectProblem(400, "invalid_amount");
    payouts("bad-3", "{\"minimum\":\"0\"}").expectProblem(400, "invalid_amount");
    payouts("bad-4", "{\"minimum\":10}").expectProblem(400, "invalid_amount");
    payouts("bad-5", "{}").expectProblem(400, "invalid_amount");
    api.post("/ops/payouts", provider.apiKey(), "{\"minimum\":\"0.10\"}")
        .expectProblem(401, "unauthorized");

    // ---- the run pays the whole cents once; the same key is the same run
    ApiClient.Reply first = payouts("run-key-1", "{\"minimum\":\"0.10\"}").expect(201);
    JsonNode run = first.json();
    String runId = run.get("id").asText();
    assertEquals("completed", run.get("status").asText(), run.toString());
    assertEquals("0.100000", run.get("minimum").asText());
    assertEquals(1, run.get("count").asInt());
    assertEquals(Money.format(payable), run.get("total").asText());
    JsonNode payout = run.get("payouts").get(0);
    assertEquals(provider.id(), payout.get("account_id").asText());
    assertEquals(Money.format(payable), payout.get("amount").asText());
    assertEquals(runId + ":" + provider.id(), payout.get("payout_id").asText());
    assertEquals("paid", payout.get("status").asText());
    ApiClient.Reply again = payouts("run-key-1", "{\"minimum\":\"0.10\"}").expect(201);
    assertEquals(first.body(), again.body(), "the same Idempotency-Key answers the same run");
    payouts("run-key-1", "{\"minimum\":\"0.20\"}").expectProblem(409, "idempotency_key_reused");
    assertEquals(
        Money.format(earnings - payable),
        api.account(provider.apiKey()).get("earnings").asText(),
        "the sub-cent rest stays owed");

    // ---- the ledger has one payout entry under the payout id, and the books balance
    eventually(
        WAIT,
        () -> {
          long paidOut = 0;
          int entries = 0;
          for (JsonNode e : api.ledger(provider.apiKey(), "?limit=500").get("entries")) {
            if (e.get("kind").asText().equals("payout")) {
              entries++;
              paidOut -= Money.parse(e.get("amount").asText().substring(1)); // "-0.510000"
              assertEquals("payout:" + runId + ":" + provider.id(), e.get("key").asText());
            }
          }
          assertEquals(1, entries);
          assertEquals(-payable, paidOut);
          JsonNode audit = api.audit();
          assertTrue(audit.get("conserved").asBoolean(), audit.toString());
          assertEquals(Money.format(payable), audit.get("payouts").asText(), audit.toString());
          assertEquals(
              Money.format(earnings - payable),
              audit.get("provider_earnings_owed").asText(),
              audit.toString());
        });

    // ---- a new run finds nothing left to pay
    JsonNode second = payouts("run-key-2", "{\"minimum\":\"0.10\"}").expect(201).json();
    assertFalse(second.get("id").asText().equals(runId));
    assertEquals(0, second.get("payouts").size(), second.toString());
    assertEquals("0.000000", second.get("total").asText());
    assertEquals(
        Money.format(earnings - payable), api.account(provider.apiKey()).get("earnings").asText());

    // ---- the runs are listed, newest first, and each can be read back
    eventually(
        WAIT,
        () -> {
          JsonNode runs = api.get("/ops/payouts", OPS).expect(200).json().get("runs");
          assertEquals(3, runs.size(), runs.toString());
          assertEquals(second.get("id").asText(), runs.get(0).get("id").asText());
          assertEquals(runId, runs.get(1).get("id").asText());
          assertEquals("completed", runs.get(1).get("status").asText());
          assertEquals(Money.format(payable), runs.get(1).get("total").asText());
        });
    assertEquals(run, api.get("/ops/payouts/" + runId, OPS).expect(200).json());
    api.get("/ops/payouts/pr_nope", OPS).expectProblem(404, "not_found");
    api.get("/ops/payouts?limit=0", OPS).expectProblem(400, "invalid_parameter");

    // ---- the exports carry the payout, the same bytes each time
    ApiClient.Reply csv = api.get("/ops/payouts/" + runId + "/export.csv", OPS).expect(200);
    assertTrue(csv.contentType().startsWith("text/csv"), csv.contentType());
    assertTrue(
        csv.header("Content-Disposition").contains(runId + ".csv"),
        csv.header("Content-Disposition"));
    String[] lines = csv.body().split("\r\n");
    assertEquals(2, lines.length, csv.body());
    String[] row = lines[1].split(",");
    assertEquals(runId, row[0]);
    assertEquals(runId + ":" + provider.id(), row[1]);
    assertEquals(payout.get("end_to_end_id").asText(), row[2]);
    assertEquals(provider.id(), row[3]);
    assertEquals("Ada Lovelace", row[4]);
    assertEquals(IBAN, row[5]);
    assertEquals("COBADEFFXXX", row[6]);
    assertEquals(Money.format(payable), row[7]);
    assertEquals(euros(payable), row[8]);
    assertEquals("EUR", row[9]);

    ApiClient.Reply xml = api.get("/ops/payouts/" + runId + "/export.xml", OPS).expect(200);
    assertTrue(xml.contentType().startsWith("application/xml"), xml.contentType());
    assertEquals(
        xml.body(), api.get("/ops/payouts/" + runId + "/export.xml", OPS).expect(200).body());
    Element doc = parse(xml.body());
    assertEquals("urn:iso:std:iso:20022:tech:xsd:pain.001.001.03", doc.getNamespaceURI());
    assertEquals("1", text(doc, "NbOfTxs"));
    assertEquals(euros(payable), text(doc, "CtrlSum"));
    assertEquals(euros(payable), text(doc, "InstdAmt"));
    assertEquals(payout.get("end_to_end_id").asText(), text(doc, "EndToEndId"));
    assertEquals(
        "NL91ABNA0417164300",
        ((Element) doc.getElementsByTagNameNS("*", "DbtrAcct").item(0)).getTextContent().strip());
    assertEquals(
        IBAN,
        ((Element) doc.getElementsByTagNameNS("*", "CdtrAcct").item(0)).getTextContent().strip());
    assertEquals(
        "Ada Lovelace",
        ((Element) doc.getElementsByTagNameNS("*", "Cdtr").item(0)).getTextContent().strip());

    // ---- the bank returns the transfer (account closed): the provider is owed it again, once
    String returns = "/ops/payouts/" + runId + "/returns";
    String closed = "{\"account_id\":\"" + provider.id() + "\",\"reason\":\"AC04\"}";
    api.post(returns, provider.apiKey(), closed).expectProblem(401, "unauthorized");
    api.post(returns, OPS, "{\"account_id\":\"" + provider.id() + "\",\"reason\":\"closed\"}")
        .expectProblem(400, "invalid_reason");
    api.post(returns, OPS, "{\"reason\":\"AC04\"}").expectProblem(400, "invalid_field");
    api.post(returns, OPS, "{\"account_id\":\"x\",\"reason\":\"AC04\",\"extra\":1}")
        .expectProblem(400, "unknown_field");
    api.post("/ops/payouts/pr_nope/returns", OPS, closed).expectProblem(404, "not_found");
    api.post(returns, OPS, "{\"account_id\":\"" + renter.id() + "\",\"reason\":\"AC04\"}")
        .expectProblem(404, "not_found");
    ApiClient.Reply returnedReply = api.post(returns, OPS, closed).expect(200);
    JsonNode returnedRun = returnedReply.json();
    JsonNode returnedPayout = returnedRun.get("payouts").get(0);
    assertEquals("returned", returnedPayout.get("status").asText(), returnedRun.toString());
    assertEquals("AC04", returnedPayout.get("reason").asText());
    assertTrue(returnedPayout.hasNonNull("returned_at"));
    assertEquals(Money.format(payable), returnedRun.get("returned").asText());
    assertEquals(Money.format(payable), returnedRun.get("total").asText(), "it was sent");
    assertEquals(
        returnedRun,
        api.post(returns, OPS, closed).expect(200).json(),
        "the same return again changes nothing");
    api.post(returns, OPS, "{\"account_id\":\"" + provider.id() + "\",\"reason\":\"AC01\"}")
        .expectProblem(409, "idempotency_conflict");
    JsonNode owedAgain = api.account(provider.apiKey());
    assertEquals(Money.format(earnings), owedAgain.get("earnings").asText(), owedAgain.toString());
    assertEquals(Money.format(payable), owedAgain.get("payout_returned").get("amount").asText());
    assertEquals("AC04", owedAgain.get("payout_returned").get("reason").asText());
    assertEquals("account closed", owedAgain.get("payout_returned").get("reason_text").asText());
    assertEquals(
        "AC04",
        api.get("/ops/accounts/" + provider.id(), OPS)
            .expect(200)
            .json()
            .get("payout_returned")
            .get("reason")
            .asText());
    eventually(
        WAIT,
        () -> {
          long back = 0;
          for (JsonNode e : api.ledger(provider.apiKey(), "?limit=500").get("entries")) {
            if (e.get("kind").asText().equals("payout_returned")) {
              back += Money.parse(e.get("amount").asText());
              assertEquals("payout_returned:" + runId + ":" + provider.id(), e.get("key").asText());
            }
          }
          assertEquals(payable, back);
          JsonNode audit = api.audit();
          assertTrue(audit.get("conserved").asBoolean(), audit.toString());
          assertEquals(Money.format(payable), audit.get("payouts_returned").asText());
          assertEquals(
              Money.format(earnings),
              audit.get("provider_earnings_owed").asText(),
              audit.toString());
          JsonNode listed = api.get("/ops/payouts", OPS).expect(200).json().get("runs").get(1);
          assertEquals(runId, listed.get("id").asText());
          assertEquals(1, listed.get("returned_count").asInt(), listed.toString());
          assertEquals(Money.format(payable), listed.get("returned").asText());
        });
    assertEquals(
        csv.body(),
        api.get("/ops/payouts/" + runId + "/export.csv", OPS).expect(200).body(),
        "the export still shows what was sent");
    // the next run does not send it to the account that bounced (the change to Mallory's is still
    // on hold, so those are the details in force)
    JsonNode held = payouts("run-key-3", "{\"minimum\":\"0.10\"}").expect(201).json();
    assertEquals(0, held.get("payouts").size(), held.toString());
    assertEquals("payout_returned", held.get("skipped").get(0).get("reason").asText());
    assertEquals(Money.format(payable), held.get("skipped").get(0).get("amount").asText());
    // the provider gives the details again (cancelling the pending change): the next run pays
    JsonNode given =
        api.put(
                "/v1/account/payout-details",
                provider.apiKey(),
                "{\"holder_name\":\"Ada Lovelace\",\"iban\":\""
                    + IBAN
                    + "\",\"bic\":\"COBADEFFXXX\"}")
            .expect(200)
            .json();
    assertTrue(given.get("payout_returned").isNull(), given.toString());
    JsonNode repaid = payouts("run-key-4", "{\"minimum\":\"0.10\"}").expect(201).json();
    assertEquals(Money.format(payable), repaid.get("total").asText(), repaid.toString());
    assertEquals(
        Money.format(earnings - payable), api.account(provider.apiKey()).get("earnings").asText());

    // ---- suspension: no new launch; resumed, launches work again
    api.post("/ops/accounts/acc_nobody/suspend", OPS, "{\"reason\":\"x\"}")
        .expectProblem(404, "not_found");
    api.post("/ops/accounts/" + renter.id() + "/suspend", OPS, "{\"reason\":\"x\",\"extra\":true}")
        .expectProblem(400, "unknown_field");
    JsonNode suspended =
        api.post(
                "/ops/accounts/" + renter.id() + "/suspend",
                OPS,
                "{\"reason\":\"chargeback under review\"}")
            .expect(200)
            .json();
    assertEquals("suspended", suspended.get("status").asText());
    assertTrue(suspended.get("suspended").asBoolean());
    assertEquals("chargeback under review", suspended.get("suspension_reason").asText());
    assertEquals(
        "suspended",
        api.get("/ops/accounts/" + renter.id(), OPS).expect(200).json().get("status").asText());
    assertEquals("suspended", api.account(renter.apiKey()).get("status").asText());
    launch(renter).expectProblem(403, "account_suspended");

    JsonNode resumed =
        api.post("/ops/accounts/" + renter.id() + "/resume", OPS, null).expect(200).json();
    assertEquals("active", resumed.get("status").asText());
    assertFalse(resumed.get("suspended").asBoolean());
    String relaunched = launch(renter).expect(201).json().get("rental").get("id").asText();
    awaitStatus(renter, relaunched, "running");
    api.post("/v1/rentals/" + relaunched + "/stop", renter.apiKey(), null).expect(202);
    awaitStatus(renter, relaunched, "ended");

    // ---- the operator's host queues answer by status
    JsonNode verified = api.get("/ops/hosts?status=verified", OPS).expect(200).json().get("hosts");
    assertEquals(hostId, verified.get(0).get("id").asText());
    assertEquals(provider.id(), verified.get(0).get("owner_id").asText());
    assertTrue(verified.get(0).hasNonNull("registered_at"), verified.toString());
    for (String status : new String[] {"verifying", "registered", "failed"}) {
      assertEquals(
          0, api.get("/ops/hosts?status=" + status, OPS).expect(200).json().get("hosts").size());
    }
    api.get("/ops/hosts?status=sleeping", OPS).expectProblem(400, "invalid_parameter");
  }

  // ---------------------------------------------------------------------------------------------

  static ApiClient.Reply payouts(String idempotencyKey, String body) {
    return api.send("POST", "/ops/payouts", OPS, body, Map.of("Idempotency-Key", idempotencyKey));
  }

  static String host(ApiClient.Customer provider) throws Exception {
    String token =
        api.post("/v1/hosts/registration-tokens", provider.apiKey(), "{\"region\":\"eu-nl\"}")
            .expect(201)
            .json()
            .get("token")
            .asText();
    agent =
        Agent.start(
            AgentConfig.simulated(
                "ws://127.0.0.1:" + node.httpPort(), token, temp.resolve("agent"), "h100-80gb:1"));
    String hostId = agent.welcomed().get(WAIT.toSeconds(), TimeUnit.SECONDS).hostId();
    assertEquals("verified", agent.verified().get(WAIT.toSeconds(), TimeUnit.SECONDS).status());
    api.put(
            "/v1/hosts/" + hostId + "/listing",
            provider.apiKey(),
            "{\"on_demand_price_per_gpu_hour\":\"" + PRICE + "\",\"listed\":true}")
        .expect(200);
    eventually(
        WAIT,
        () ->
            assertEquals(
                1,
                api.get("/v1/offers?gpu=h100-80gb&region=eu-nl", null)
                    .expect(200)
                    .json()
                    .get("offers")
                    .size()));
    return hostId;
  }

  static ApiClient.Reply launch(ApiClient.Customer renter) {
    return api.post(
        "/v1/rentals",
        renter.apiKey(),
        "{\"gpu\":\"h100-80gb\",\"count\":1,\"region\":\"eu-nl\","
            + "\"max_price_per_gpu_hour\":\""
            + PRICE
            + "\",\"image\":\"ubuntu:24.04\",\"command\":[\"sleep\",\"3600\"]}");
  }

  static JsonNode rental(ApiClient.Customer renter, String id) {
    return api.get("/v1/rentals/" + id, renter.apiKey()).expect(200).json();
  }

  static List<String> texts(JsonNode array) {
    List<String> out = new java.util.ArrayList<>();
    array.forEach(n -> out.add(n.asText()));
    return out;
  }

  static void awaitStatus(ApiClient.Customer renter, String id, String status) {
    eventually(WAIT, () -> assertEquals(status, rental(renter, id).get("status").asText()));
  }

  /**
   * The provider's earnings once the ledger (which proposes payout candidates) shows all of them.
   */
  static long awaitEarningsInLedger(ApiClient.Customer provider) {
    long[] earnings = new long[1];
    eventually(
        WAIT,
        () -> {
          JsonNode audit = api.audit();
          assertEquals("0.000000", audit.get("pending_credits").asText(), audit.toString());
          assertEquals("0.000000", audit.get("pending_captures").asText(), audit.toString());
          earnings[0] = Money.parse(api.account(provider.apiKey()).get("earnings").asText());
          long inLedger = 0;
          for (JsonNode e : api.ledger(provider.apiKey(), "?limit=500").get("entries")) {
            if (e.get("kind").asText().equals("earning"))
              inLedger += Money.parse(e.get("amount").asText());
          }
          assertEquals(earnings[0], inLedger);
          assertTrue(earnings[0] > 0);
        });
    return earnings[0];
  }

  static String euros(long micros) {
    long cents = micros / 10_000;
    return String.format(java.util.Locale.ROOT, "%d.%02d", cents / 100, cents % 100);
  }

  static Element parse(String xml) throws Exception {
    DocumentBuilderFactory factory = DocumentBuilderFactory.newInstance();
    factory.setNamespaceAware(true);
    factory.setFeature("http://apache.org/xml/features/disallow-doctype-decl", true);
    return factory
        .newDocumentBuilder()
        .parse(new ByteArrayInputStream(xml.getBytes(StandardCharsets.UTF_8)))
        .getDocumentElement();
  }

  static String text(Element doc, String name) {
    return doc.getElementsByTagNameNS("*", name).item(0).getTextContent();
  }
}
