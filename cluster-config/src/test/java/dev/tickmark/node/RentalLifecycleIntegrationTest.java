package dev.tickmark.node;

import static dev.tickmark.node.Eventually.eventually;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import dev.tickmark.agent.Agent;
import dev.tickmark.agent.AgentConfig;
import dev.tickmark.engine.Rejection;
import dev.tickmark.engine.account.Account;
import dev.tickmark.engine.money.Metering;
import dev.tickmark.engine.money.Money;
import dev.tickmark.persistence.DatabaseSettings;
import dev.tickmark.persistence.TestDatabase;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.apache.pekko.cluster.sharding.typed.javadsl.ClusterSharding;
import org.apache.pekko.pattern.StatusReply;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Rentals end to end: a real node on real PostgreSQL, a real agent (in-process, simulated GPUs,
 * process runtime) over the real websocket, and the HTTP API. Each test checks the rental's billed
 * seconds against the wall-clock window it ran, the ledger, the released hold, and a conserved
 * audit.
 */
class RentalLifecycleIntegrationTest {
  static final Duration WAIT = Duration.ofSeconds(40);
  static final String PRICE = "2.49";
  static final long PRICE_MICROS = Money.parse(PRICE);

  static Node node;
  static ApiClient api;
  static ApiClient.Customer provider;
  static final List<Agent> agents = new ArrayList<>();
  static Path temp;

  @BeforeAll
  static void start() throws Exception {
    temp = Files.createTempDirectory("tickmark-rentals");
    DatabaseSettings db = TestDatabase.fresh("rentals");
    node =
        Node.start(
            TestNodes.settings(db)
                .withConfig("tickmark.market.allow-simulated-hosts", true)
                // the simulated host reports this machine's real disk, which a loaded CI machine
                // may write slowly
                .withConfig("tickmark.verification.min-disk-write-mib-per-s", 10)
                .withConfig("tickmark.hosts.heartbeat-timeout", "3s")
                .withConfig("tickmark.hosts.heartbeat-interval", "1s")
                .withConfig("tickmark.rentals.settle-interval", "2s")
                .withConfig("tickmark.rentals.hold-duration", "8s")
                .withConfig("tickmark.rentals.provisioning-timeout", "20s")
                .withConfig("tickmark.rentals.stop-timeout", "5s"));
    api = new ApiClient(node.baseUrl());
    provider = api.signUp("Provider");
  }

  @AfterAll
  static void stop() throws Exception {
    agents.forEach(Agent::close);
    if (node != null) node.close();
  }

  /** A verified, listed host with {@code cards} simulated H100s in {@code region}. */
  static Agent host(String region, int cards) throws Exception {
    return host("h100-80gb", region, cards, "");
  }

  /**
   * A verified host listed at {@link #PRICE} (spot 1.00) with {@code extraListing} added to its
   * listing.
   */
  static Agent host(String gpu, String region, int cards, String extraListing) throws Exception {
    String token =
        api.post(
                "/v1/hosts/registration-tokens",
                provider.apiKey(),
                "{\"region\":\"" + region + "\"}")
            .expect(201)
            .json()
            .get("token")
            .asText();
    Agent agent =
        Agent.start(
            AgentConfig.simulated(
                "ws://127.0.0.1:" + node.httpPort(),
                token,
                temp.resolve("agent-" + region + "-" + agents.size()),
                gpu + ":" + cards));
    agents.add(agent);
    String hostId = agent.welcomed().get(WAIT.toSeconds(), TimeUnit.SECONDS).hostId();
    assertEquals("verified", agent.verified().get(WAIT.toSeconds(), TimeUnit.SECONDS).status());
    api.put(
            "/v1/hosts/" + hostId + "/listing",
            provider.apiKey(),
            "{\"on_demand_price_per_gpu_hour\":\""
                + PRICE
                + "\",\"spot_price_per_gpu_hour\":\"1.00\",\"listed\":true"
                + extraListing
                + "}")
        .expect(200);
    eventually(WAIT, () -> assertTrue(offered(gpu, region) >= cards, "host listed in " + region));
    return agent;
  }

  static int offered(String region) {
    return offered("h100-80gb", region);
  }

  static int offered(String gpu, String region) {
    JsonNode offers =
        api.get("/v1/offers?gpu=" + gpu + "&region=" + region + "&tier=on_demand", null)
            .expect(200)
            .json()
            .get("offers");
    int cards = 0;
    for (JsonNode o : offers) cards += o.get("available_cards").asInt();
    return cards;
  }

  static ApiClient.Customer renter(String name, String deposit) {
    ApiClient.Customer renter = api.signUp(name);
    api.opsDeposit(renter.id(), deposit, "welcome-" + renter.id()).expect(201);
    return renter;
  }

  static JsonNode launch(ApiClient.Customer renter, String region, String extra) {
    return launch(renter, "h100-80gb", region, extra);
  }

  static JsonNode launch(ApiClient.Customer renter, String gpu, String region, String extra) {
    return api.post(
            "/v1/rentals",
            renter.apiKey(),
            "{\"gpu\":\""
                + gpu
                + "\",\"count\":1,\"region\":\""
                + region
                + "\","
                + "\"max_price_per_gpu_hour\":\"3.00\",\"image\":\"ubuntu:24.04\",\"command\":[\"sleep\",\"3600\"]"
                + extra
                + "}")
        .expect(201)
        .json()
        .get("rental");
  }

  static JsonNode rental(ApiClient.Customer renter, String id) {
    return api.get("/v1/rentals/" + id, renter.apiKey()).expect(200).json();
  }

  static JsonNode awaitStatus(ApiClient.Customer renter, String id, String status) {
    return awaitStatus(renter, id, status, WAIT);
  }

  static JsonNode awaitStatus(
      ApiClient.Customer renter, String id, String status, Duration within) {
    JsonNode[] last = new JsonNode[1];
    eventually(
        within,
        () -> {
          last[0] = rental(renter, id);
          assertEquals(status, last[0].get("status").asText(), last[0].toString());
        });
    return last[0];
  }

  /**
   * Billed seconds are whole seconds of the server's own window, and the cost is exactly
   * cost(billed).
   */
  static void assertBilledWithin(JsonNode ended, Instant startedAt, Instant endedAt) {
    long billed = ended.get("billed_seconds").asLong();
    long window = Duration.between(startedAt, endedAt).getSeconds();
    assertTrue(
        Math.abs(billed - window) <= 1, "billed " + billed + " s for a window of " + window + " s");
    assertEquals(Money.format(Metering.cost(PRICE_MICROS, 1, billed)), ended.get("cost").asText());
  }

  /**
   * The renter's ledger holds the captures of exactly the cost, nothing is held, and the books
   * balance.
   */
  static void assertMoneySettled(ApiClient.Customer renter, JsonNode ended, String deposit) {
    long cost = Money.parse(ended.get("cost").asText());
    eventually(
        WAIT,
        () -> {
          JsonNode account = api.account(renter.apiKey());
          assertEquals("0.000000", account.get("held").asText(), "hold released");
          assertEquals(Money.format(Money.parse(deposit) - cost), account.get("balance").asText());
          long captured = 0;
          for (JsonNode e : api.ledger(renter.apiKey(), "?limit=500").get("entries")) {
            if (e.get("kind").asText().equals("capture"))
              captured += Money.parse(e.get("amount").asText().substring(1)); // "-0.006916"
          }
          assertEquals(cost, captured, "ledger captures add up to the cost");
          JsonNode audit = api.audit();
          assertTrue(audit.get("conserved").asBoolean(), audit.toString());
          assertEquals("0.000000", audit.get("pending_captures").asText(), audit.toString());
          assertEquals("0.000000", audit.get("pending_credits").asText(), audit.toString());
        });
  }

  @Test
  void stoppedByRenterIsBilledForTheSecondsItRan() throws Exception {
    host("eu-nl", 2);
    ApiClient.Customer renter = renter("Stopper", "10");
    JsonNode launched = launch(renter, "eu-nl", "");
    assertEquals("provisioning", launched.get("status").asText(), launched.toString());
    assertEquals(
        "2.490000", launched.get("price_per_gpu_hour").asText(), "the host's floor, frozen");
    String id = launched.get("id").asText();
    JsonNode running = awaitStatus(renter, id, "running");
    Instant startedAt = Instant.parse(running.get("started_at").asText());
    api.post(
            "/ops/rentals/" + id + "/refunds",
            TestNodes.OPERATOR_TOKEN,
            "{\"reference\":\"ticket-0\",\"reason\":\"too early\"}")
        .expectProblem(409, "rental_not_ended");
    eventually(WAIT, () -> assertTrue(rental(renter, id).get("billed_seconds").asLong() >= 5));
    Instant stopAt = Instant.now();
    JsonNode stopping =
        api.post("/v1/rentals/" + id + "/stop", renter.apiKey(), null)
            .expect(202)
            .json()
            .get("rental");
    assertTrue(
        List.of("stopping", "ended").contains(stopping.get("status").asText()),
        stopping.toString());
    JsonNode ended = awaitStatus(renter, id, "ended");
    assertEquals("stopped_by_renter", ended.get("end_reason").asText());
    assertBilledWithin(ended, startedAt, stopAt);
    assertMoneySettled(renter, ended, "10");
    JsonNode usage = api.get("/v1/rentals/" + id + "/usage", renter.apiKey()).expect(200).json();
    assertEquals(ended.get("billed_seconds").asLong(), usage.get("billed_seconds").asLong());
    assertEquals(1, usage.get("started_hours").asLong());
    assertEquals("2.490000", usage.get("cost_per_started_hour").asText());
    assertTrue(usage.get("checkpoints").size() >= 2, usage.toString());
    eventually(WAIT, () -> assertEquals(2, offered("eu-nl"), "the card is free again"));
    // Closed, it let the renter's account forget its hold (the ledger above keeps the history).
    eventually(
        WAIT,
        () -> {
          StatusReply<Account.HoldView> hold =
              ClusterSharding.get(node.system())
                  .entityRefFor(Account.ENTITY_KEY, renter.id())
                  .<StatusReply<Account.HoldView>>ask(
                      r -> new Account.GetHold(id, r), Duration.ofSeconds(5))
                  .toCompletableFuture()
                  .join();
          assertTrue(
              hold.isError()
                  && Rejection.codeOf(hold.getError().getMessage()) == Rejection.HOLD_NOT_FOUND,
              hold.toString());
        });

    assertRefundedByAnOperator(renter, id, Money.parse(ended.get("cost").asText()), "10");
  }

  /**
   * A dispute's outcome on the closed rental {@code id}: half its cost refunded, then the rest; the
   * renter's balance has it back at once, the ledger books the refund and the provider's and
   * platform's reversals, the books balance, and bad requests lose nothing.
   */
  static void assertRefundedByAnOperator(
      ApiClient.Customer renter, String id, long cost, String deposit) {
    String path = "/ops/rentals/" + id + "/refunds";
    String op = TestNodes.OPERATOR_TOKEN;
    long half = cost / 2;
    String body =
        "{\"reference\":\"ticket-1\",\"amount\":\""
            + Money.format(half)
            + "\",\"reason\":\"the card was faulty\"}";
    JsonNode first = api.post(path, op, body).expect(200).json();
    assertEquals(id, first.get("rental_id").asText());
    assertEquals(renter.id(), first.get("renter_id").asText());
    assertEquals(provider.id(), first.get("provider_id").asText());
    assertEquals(Money.format(half), first.get("amount").asText());
    assertEquals(Money.format(cost), first.get("charged").asText());
    assertEquals(Money.format(half), first.get("refunded").asText());
    long providerBack = Money.parse(first.get("provider_reversed").asText());
    long platformBack = Money.parse(first.get("platform_reversed").asText());
    assertEquals(half, providerBack + platformBack, first.toString());
    assertTrue(providerBack > platformBack, "the provider's share is the larger: " + first);
    assertEquals(
        Money.format(Money.parse(deposit) - cost + half),
        api.account(renter.apiKey()).get("balance").asText(),
        "the balance has it back at once");
    assertEquals(Money.format(half), rental(renter, id).get("refunded").asText());

    // the same request again is the same refund; another amount under its reference, more than
    // is left, a renter's key, a bad body: refused, nothing moves
    assertEquals(first, api.post(path, op, body).expect(200).json());
    api.post(path, op, body.replace(Money.format(half), Money.format(half + 1)))
        .expectProblem(409, "idempotency_conflict");
    api.post(
            path,
            op,
            "{\"reference\":\"ticket-2\",\"amount\":\""
                + Money.format(cost - half + 1)
                + "\",\"reason\":\"x\"}")
        .expectProblem(409, "refund_exceeds_charge");
    api.post(path, renter.apiKey(), body).expectProblem(401, "unauthorized");
    api.post(path, op, "{\"reference\":\"ticket-2\"}").expectProblem(400, "invalid_reason");
    api.post(path, op, "{\"reference\":\"ticket-2\",\"reason\":\"x\",\"amount\":\"-1\"}")
        .expectProblem(400, "invalid_amount");
    api.post(path, op, "{\"reference\":\"ticket-2\",\"reason\":\"x\",\"to\":\"me\"}")
        .expectProblem(400, "unknown_field");
    api.post("/ops/rentals/rnt_" + "0".repeat(24) + "/refunds", op, body)
        .expectProblem(404, "not_found");

    // the rest: the whole charge is back
    JsonNode rest =
        api.post(path, op, "{\"reference\":\"ticket-2\",\"reason\":\"host broke down\"}")
            .expect(200)
            .json();
    assertEquals(Money.format(cost - half), rest.get("amount").asText());
    assertEquals(Money.format(cost), rest.get("refunded").asText());
    assertEquals(
        Money.format(Money.parse(deposit)), api.account(renter.apiKey()).get("balance").asText());
    api.post(path, op, "{\"reference\":\"ticket-3\",\"reason\":\"again\"}")
        .expectProblem(409, "refund_exceeds_charge");
    // the operator sees each refund with its reason; the renter, their total
    JsonNode refunds = api.get("/ops/rentals/" + id, op).expect(200).json().get("refunds");
    assertEquals(2, refunds.size(), refunds.toString());
    assertEquals("ticket-1", refunds.get(0).get("reference").asText());
    assertEquals(Money.format(half), refunds.get(0).get("amount").asText());
    assertEquals("the card was faulty", refunds.get(0).get("reason").asText());
    assertEquals("ticket-2", refunds.get(1).get("reference").asText());
    assertEquals(Money.format(cost - half), refunds.get(1).get("amount").asText());
    assertEquals("host broke down", refunds.get(1).get("reason").asText());
    assertFalse(rental(renter, id).has("refunds"), "the renter sees the total only");
    eventually(
        WAIT,
        () -> {
          assertEquals(
              cost, inLedger(renter, "refund", id), "the renter's ledger books both refunds");
          assertEquals(
              -Money.parse(rest.get("provider_reversed").asText()),
              inLedger(provider, "earning_reversed", id),
              "the provider's ledger books what its earnings gave back");
          JsonNode listed = api.get("/v1/rentals", renter.apiKey()).expect(200).json();
          assertEquals(Money.format(cost), listed.get("rentals").get(0).get("refunded").asText());
          JsonNode audit = api.audit();
          assertTrue(audit.get("conserved").asBoolean(), audit.toString());
          assertEquals("0.000000", audit.get("pending_refunds").asText(), audit.toString());
          assertEquals("0.000000", audit.get("pending_reversals").asText(), audit.toString());
        });
  }

  @Test
  void rentalCapEndsTheRentalAtTheLastSecondItCovers() throws Exception {
    host("eu-de", 1);
    ApiClient.Customer renter = renter("Capped", "10");
    long maxTotal = Metering.cost(PRICE_MICROS, 1, 4); // exactly four seconds
    String id =
        launch(renter, "eu-de", ",\"max_total\":\"" + Money.format(maxTotal) + "\"")
            .get("id")
            .asText();
    JsonNode ended = awaitStatus(renter, id, "ended");
    assertEquals("rental_cap_reached", ended.get("end_reason").asText(), ended.toString());
    assertEquals(4, ended.get("billed_seconds").asLong());
    assertEquals(Money.format(maxTotal), ended.get("cost").asText());
    assertMoneySettled(renter, ended, "10");
  }

  @Test
  void balanceExhaustedWhenTheHoldCannotGrow() throws Exception {
    host("eu-fr", 1);
    long hold = Metering.cost(Money.parse("3.00"), 1, 8);
    // enough for the first hold and a little more, not for an extension
    String deposit = Money.format(hold + 100);
    ApiClient.Customer renter = renter("Thrifty", deposit);
    String id = launch(renter, "eu-fr", "").get("id").asText();
    JsonNode ended = awaitStatus(renter, id, "ended");
    assertEquals("balance_exhausted", ended.get("end_reason").asText(), ended.toString());
    long billed = ended.get("billed_seconds").asLong();
    assertEquals(
        Metering.maxSecondsWithin(PRICE_MICROS, 1, hold, 1_000_000),
        billed,
        "exactly the seconds the hold covered");
    assertMoneySettled(renter, ended, deposit);
  }

  @Test
  void spendCapReachedWhenTheMonthlyCapStopsTheHoldGrowing() throws Exception {
    host("a100-40gb", "eu-nl", 1, "");
    long hold = Metering.cost(Money.parse("3.00"), 1, 8);
    ApiClient.Customer renter = renter("Budgeted", "10");
    // The cap allows the first hold and a little more, never an extension.
    api.put(
            "/v1/account/spend-cap",
            renter.apiKey(),
            "{\"monthly\":\"" + Money.format(hold + 100) + "\"}")
        .expect(200);
    JsonNode launched = launch(renter, "a100-40gb", "eu-nl", "");
    String id = launched.get("id").asText();
    JsonNode ended = awaitStatus(renter, id, "ended");
    assertEquals("spend_cap_reached", ended.get("end_reason").asText(), ended.toString());
    assertEquals(
        Metering.maxSecondsWithin(PRICE_MICROS, 1, hold, 1_000_000),
        ended.get("billed_seconds").asLong(),
        "exactly the seconds the hold covered");
    assertMoneySettled(renter, ended, "10");
    JsonNode account = api.account(renter.apiKey());
    assertTrue(
        Money.parse(account.get("spent_this_month").asText()) <= hold + 100, account.toString());
  }

  @Test
  void spotRentalIsPreemptedWhenTheHostsAvailabilityWindowCloses() throws Exception {
    // (the workload is told: a notice file and SIGTERM 30 s before the deadline)
    // A window that closes at the next whole minute at least 40 s away: well inside the 120 s
    // minimum notice, and beyond the agent's 30 s SIGTERM lead, so the rental runs with its notice
    // for a while (nearer, the agent stopped the workload at once and its report could end the
    // rental before the host's notice reached it: CI failed on that race).
    java.time.ZonedDateTime now = java.time.ZonedDateTime.now(java.time.ZoneOffset.UTC);
    int endMinute = (now.toLocalTime().toSecondOfDay() + 40 + 59) / 60;
    org.junit.jupiter.api.Assumptions.assumeTrue(
        endMinute <= 1440, "not in the last 40 s of a UTC day");
    String day = now.getDayOfWeek().name().substring(0, 3).toLowerCase(java.util.Locale.ROOT);
    String end = String.format("%02d:%02d", endMinute / 60, endMinute % 60);
    Instant closes =
        now.toLocalDate()
            .atStartOfDay(java.time.ZoneOffset.UTC)
            .toInstant()
            .plusSeconds(endMinute * 60L);
    host(
        "l40s-48gb",
        "eu-nl",
        1,
        ",\"availability\":[{\"day\":\""
            + day
            + "\",\"start\":\"00:00\",\"end\":\""
            + end
            + "\"}]");
    ApiClient.Customer renter = renter("Spotter", "10");
    String id = launch(renter, "l40s-48gb", "eu-nl", ",\"tier\":\"spot\"").get("id").asText();
    JsonNode running = awaitStatus(renter, id, "running");
    assertEquals("1.000000", running.get("price_per_gpu_hour").asText(), "the spot floor, frozen");
    Instant startedAt = Instant.parse(running.get("started_at").asText());
    eventually(
        WAIT,
        () -> {
          JsonNode seen = rental(renter, id);
          // the rental as it stands is in the message: a wait that runs out says why
          assertTrue(seen.hasNonNull("preemption_deadline"), "no notice yet: " + seen);
          assertEquals(
              closes,
              Instant.parse(seen.get("preemption_deadline").asText()),
              "the notice names the window's end");
        });
    // The window closes up to 100 s from the start of the test.
    JsonNode ended =
        awaitStatus(renter, id, "ended", Duration.between(Instant.now(), closes).plus(WAIT));
    assertEquals("preempted", ended.get("end_reason").asText(), ended.toString());
    long billed = ended.get("billed_seconds").asLong();
    long window = Duration.between(startedAt, closes).getSeconds();
    // The agent gives the workload SIGTERM 30 s before the deadline (at once when less remains);
    // this one (sleep) exits on it, so it is billed to its exit, never past the deadline.
    assertTrue(
        billed <= window && billed >= Math.max(0, window - 32),
        "billed " + billed + " s, the deadline " + window + " s in, SIGTERM 30 s before it");
    assertEquals(
        Money.format(Metering.cost(Money.parse("1.00"), 1, billed)), ended.get("cost").asText());
    assertMoneySettled(renter, ended, "10");
  }

  @Test
  void aRentalLaunchedForAnyRegionShowsTheRegionItRunsIn() throws Exception {
    host("rtx4090-24gb", "us-east", 1, "");
    ApiClient.Customer renter = renter("Anywhere", "10");
    JsonNode launched =
        api.post(
                "/v1/rentals",
                renter.apiKey(),
                "{\"gpu\":\"rtx4090-24gb\",\"max_price_per_gpu_hour\":\"3.00\","
                    + "\"image\":\"ubuntu:24.04\",\"command\":[\"sleep\",\"3600\"]}")
            .expect(201)
            .json()
            .get("rental");
    assertEquals("provisioning", launched.get("status").asText(), launched.toString());
    assertEquals("us-east", launched.get("region").asText(), "the matched host's region");
    String id = launched.get("id").asText();
    eventually(
        WAIT,
        () -> {
          JsonNode listed =
              api.get("/v1/rentals", renter.apiKey()).expect(200).json().get("rentals").get(0);
          assertEquals("us-east", listed.get("region").asText(), listed.toString());
        });
    api.post("/v1/rentals/" + id + "/stop", renter.apiKey(), null).expect(202);
    assertMoneySettled(renter, awaitStatus(renter, id, "ended"), "10");
  }

  @Test
  void noCapacityWhenNothingMatchesInTime() {
    ApiClient.Customer renter = renter("Patient", "10");
    JsonNode launched =
        api.post(
                "/v1/rentals",
                renter.apiKey(),
                "{\"gpu\":\"a100-80gb\",\"max_price_per_gpu_hour\":\"3.00\","
                    + "\"image\":\"ubuntu:24.04\",\"wait_seconds\":2}")
            .expect(201)
            .json()
            .get("rental");
    assertEquals("pending", launched.get("status").asText());
    JsonNode ended = awaitStatus(renter, launched.get("id").asText(), "ended");
    assertEquals("no_capacity", ended.get("end_reason").asText());
    assertEquals(0, ended.get("billed_seconds").asLong());
    assertMoneySettled(renter, ended, "10");
  }

  @Test
  void provisioningFailedChargesNothing() throws Exception {
    host("us-east", 1);
    ApiClient.Customer renter = renter("Unlucky", "10");
    JsonNode launched =
        api.post(
                "/v1/rentals",
                renter.apiKey(),
                "{\"gpu\":\"h100-80gb\",\"region\":\"us-east\","
                    + "\"max_price_per_gpu_hour\":\"3.00\",\"image\":\"ubuntu:24.04\",\"command\":[\"/no/such/program\"]}")
            .expect(201)
            .json()
            .get("rental");
    JsonNode ended = awaitStatus(renter, launched.get("id").asText(), "ended");
    assertEquals("provisioning_failed", ended.get("end_reason").asText(), ended.toString());
    assertEquals("0.000000", ended.get("cost").asText());
    assertMoneySettled(renter, ended, "10");
  }

  @Test
  void hostLostBillsOnlyUpToTheLastHeartbeat() throws Exception {
    Agent agent = host("us-west", 1);
    ApiClient.Customer renter = renter("Stranded", "10");
    String id = launch(renter, "us-west", "").get("id").asText();
    JsonNode running = awaitStatus(renter, id, "running");
    Instant startedAt = Instant.parse(running.get("started_at").asText());
    eventually(WAIT, () -> assertTrue(rental(renter, id).get("billed_seconds").asLong() >= 3));
    Instant lastSeen = Instant.now();
    agent.close(); // the machine disappears
    JsonNode ended = awaitStatus(renter, id, "ended");
    assertEquals("host_lost", ended.get("end_reason").asText(), ended.toString());
    long billed = ended.get("billed_seconds").asLong();
    long upToLastHeartbeat = Duration.between(startedAt, lastSeen).getSeconds();
    assertTrue(
        billed <= upToLastHeartbeat + 1,
        "billed " + billed + " s, the host was last heard about " + upToLastHeartbeat + " s in");
    assertTrue(
        billed >= upToLastHeartbeat - 2,
        "billed " + billed + " s, heartbeats every second until " + upToLastHeartbeat + " s");
    assertMoneySettled(renter, ended, "10");
  }

  /**
   * The host's record that the matcher breaks ties between equal floors by (DESIGN.md, "Matching"):
   * each rental that ran on it counts once it has ended, and each of those that ended {@code
   * host_lost} counts as lost; the provider sees both in the host list, and so does the operator.
   */
  @Test
  void aHostsRecordCountsTheRentalsThatRanOnItAndThoseItLost() throws Exception {
    // a model of its own: no other test's host can take these launches
    Agent agent = host("l40s-48gb", "eu-nl", 2, "");
    String hostId = agent.welcomed().get(WAIT.toSeconds(), TimeUnit.SECONDS).hostId();
    assertEquals(List.of(0L, 0L), record(hostId, provider.apiKey(), "/v1/hosts"));
    ApiClient.Customer renter = renter("Recorded", "10");
    String stopped = launch(renter, "l40s-48gb", "eu-nl", "").get("id").asText();
    String lost = launch(renter, "l40s-48gb", "eu-nl", "").get("id").asText();
    awaitStatus(renter, stopped, "running");
    awaitStatus(renter, lost, "running");
    api.post("/v1/rentals/" + stopped + "/stop", renter.apiKey(), null).expect(202);
    assertEquals(
        "stopped_by_renter", awaitStatus(renter, stopped, "ended").get("end_reason").asText());
    // ended and gave its cards back: one ended, none lost (the running one counts when it ends)
    eventually(
        WAIT, () -> assertEquals(List.of(1L, 0L), record(hostId, provider.apiKey(), "/v1/hosts")));
    agent.close(); // the machine disappears under the second rental
    assertEquals("host_lost", awaitStatus(renter, lost, "ended").get("end_reason").asText());
    eventually(
        WAIT, () -> assertEquals(List.of(2L, 1L), record(hostId, provider.apiKey(), "/v1/hosts")));
    assertEquals(List.of(2L, 1L), record(hostId, TestNodes.OPERATOR_TOKEN, "/ops/hosts"));
  }

  /**
   * The provider sees each rental that ran on its host, newest first and a page at a time, with
   * what it earned them (as their ledger booked it) and the host's totals; never the renter;
   * another account gets 404.
   */
  @Test
  void aProviderSeesTheRentalsThatRanOnItsHostAndWhatEachEarnedItAndAnOperatorAlsoWhoRentedThem()
      throws Exception {
    // a model of its own: no other test's host can take these launches
    Agent agent = host("a10-24gb", "eu-fr", 2, "");
    String hostId = agent.welcomed().get(WAIT.toSeconds(), TimeUnit.SECONDS).hostId();
    String path = "/v1/hosts/" + hostId + "/rentals";
    JsonNode none = api.get(path, provider.apiKey()).expect(200).json();
    assertEquals(0, none.get("rentals").size(), none.toString());
    assertEquals("0.000000", none.get("totals").get("earned").asText());

    ApiClient.Customer renter = renter("Host history", "10");
    String stopped = launch(renter, "a10-24gb", "eu-fr", "").get("id").asText();
    String running = launch(renter, "a10-24gb", "eu-fr", "").get("id").asText();
    awaitStatus(renter, stopped, "running");
    awaitStatus(renter, running, "running");
    eventually(WAIT, () -> assertTrue(rental(renter, stopped).get("billed_seconds").asLong() >= 3));
    api.post("/v1/rentals/" + stopped + "/stop", renter.apiKey(), null).expect(202);
    JsonNode ended = awaitStatus(renter, stopped, "ended");
    long endedEarned =
        Metering.providerShare(Money.parse(ended.get("cost").asText()), 1500); // default fee
    assertTrue(endedEarned > 0, ended.toString());

    eventually(
        WAIT,
        () -> {
          JsonNode page = api.get(path, provider.apiKey()).expect(200).json();
          assertEquals(hostId, page.get("host_id").asText());
          JsonNode rows = page.get("rentals");
          assertEquals(2, rows.size(), page.toString());
          // newest first as the read side recorded them: two launches a moment apart may be
          // recorded by different slices of the projection in either order
          int stoppedAt = rows.get(0).get("id").asText().equals(stopped) ? 0 : 1;
          JsonNode first = rows.get(stoppedAt);
          JsonNode other = rows.get(1 - stoppedAt);
          assertEquals(stopped, first.get("id").asText());
          assertEquals(running, other.get("id").asText());
          assertEquals("ended", first.get("status").asText());
          assertEquals("stopped_by_renter", first.get("end_reason").asText());
          assertEquals(ended.get("billed_seconds").asLong(), first.get("billed_seconds").asLong());
          assertEquals(Money.format(endedEarned), first.get("earned").asText());
          assertEquals(Money.format(earnedInLedger(stopped)), first.get("earned").asText());
          assertEquals("2.490000", first.get("price_per_gpu_hour").asText());
          // a running rental's figure is its latest settlement's
          assertEquals(Money.format(earnedInLedger(running)), other.get("earned").asText());
          JsonNode totals = page.get("totals");
          assertEquals(2, totals.get("rentals").asLong());
          assertEquals(
              first.get("billed_seconds").asLong() + other.get("billed_seconds").asLong(),
              totals.get("card_seconds").asLong());
          assertEquals(
              Money.format(earnedInLedger(stopped) + earnedInLedger(running)),
              totals.get("earned").asText());
        });
    JsonNode row = api.get(path, provider.apiKey()).expect(200).json().get("rentals").get(0);
    List<String> fields = new ArrayList<>();
    row.fieldNames().forEachRemaining(fields::add);
    assertEquals(
        List.of(
            "id",
            "status",
            "gpu",
            "count",
            "tier",
            "price_per_gpu_hour",
            "simulated",
            "matched_at",
            "started_at",
            "ended_at",
            "end_reason",
            "billed_seconds",
            "earned"),
        fields,
        "no renter, no image, no command");

    JsonNode onePage = api.get(path + "?limit=1", provider.apiKey()).expect(200).json();
    JsonNode next =
        api.get(path + "?limit=1&after=" + onePage.get("next_after").asText(), provider.apiKey())
            .expect(200)
            .json();
    assertEquals(
        java.util.Set.of(running, stopped),
        java.util.Set.of(
            onePage.get("rentals").get(0).get("id").asText(),
            next.get("rentals").get(0).get("id").asText()),
        "one a page, each once");
    assertEquals(2, next.get("totals").get("rentals").asLong(), "the host's, not the page's");

    api.get(path, renter.apiKey()).expectProblem(404, "not_found");
    api.get("/v1/hosts/host_nothex/rentals", provider.apiKey()).expectProblem(404, "not_found");
    api.get(path + "?limit=0", provider.apiKey()).expectProblem(400, "invalid_parameter");

    // an operator sees the same page with each rental's renter, and any one rental whole
    String opsPath = "/ops/hosts/" + hostId + "/rentals";
    JsonNode providers = api.get(path, provider.apiKey()).expect(200).json();
    JsonNode ops = api.get(opsPath, TestNodes.OPERATOR_TOKEN).expect(200).json();
    assertEquals(hostId, ops.get("host_id").asText());
    assertEquals(providers.get("totals"), ops.get("totals"));
    assertEquals(2, ops.get("rentals").size(), ops.toString());
    for (int i = 0; i < 2; i++) {
      JsonNode r = ops.get("rentals").get(i);
      List<String> names = new ArrayList<>();
      r.fieldNames().forEachRemaining(names::add);
      assertEquals(List.of("renter_id", "rental"), names);
      assertEquals(renter.id(), r.get("renter_id").asText());
      assertEquals(providers.get("rentals").get(i), r.get("rental"), "the provider's row");
    }
    JsonNode opsPage = api.get(opsPath + "?limit=1", TestNodes.OPERATOR_TOKEN).expect(200).json();
    assertEquals(1, opsPage.get("rentals").size());
    assertEquals(
        providers.get("rentals").get(1).get("id"),
        api.get(
                opsPath + "?limit=1&after=" + opsPage.get("next_after").asText(),
                TestNodes.OPERATOR_TOKEN)
            .expect(200)
            .json()
            .get("rentals")
            .get(0)
            .get("rental")
            .get("id"));
    JsonNode whole =
        api.get("/ops/rentals/" + stopped, TestNodes.OPERATOR_TOKEN).expect(200).json();
    assertEquals(renter.id(), whole.get("renter_id").asText());
    assertEquals(hostId, whole.get("host_id").asText());
    assertEquals(provider.id(), whole.get("provider_id").asText());
    JsonNode seenByRenter = rental(renter, stopped);
    for (String field :
        List.of(
            "id", "status", "billed_seconds", "cost", "end_reason", "price_per_gpu_hour", "gpu"))
      assertEquals(seenByRenter.get(field), whole.get("rental").get(field), field);
    // the operator's token only: a renter's or the provider's key is no operator
    api.get("/ops/rentals/" + stopped, renter.apiKey()).expectProblem(401, "unauthorized");
    api.get(opsPath, provider.apiKey()).expectProblem(401, "unauthorized");
    api.get("/ops/rentals/rnt_nothex", TestNodes.OPERATOR_TOKEN).expectProblem(404, "not_found");
    api.get("/ops/rentals/rnt_" + "0".repeat(24), TestNodes.OPERATOR_TOKEN)
        .expectProblem(404, "not_found");
    api.get("/ops/hosts/host_" + "0".repeat(24) + "/rentals", TestNodes.OPERATOR_TOKEN)
        .expectProblem(404, "not_found");
    api.get(opsPath + "?limit=0", TestNodes.OPERATOR_TOKEN).expectProblem(400, "invalid_parameter");
    api.post("/v1/rentals/" + running + "/stop", renter.apiKey(), null).expect(202);
    awaitStatus(renter, running, "ended");
  }

  /** What the provider's ledger booked as earnings from {@code rentalId}. */
  static long earnedInLedger(String rentalId) {
    return inLedger(provider, "earning", rentalId);
  }

  static long signed(String amount) {
    return amount.startsWith("-") ? -Money.parse(amount.substring(1)) : Money.parse(amount);
  }

  /** The sum of {@code who}'s ledger entries of {@code kind} for {@code rentalId}, in µ€. */
  static long inLedger(ApiClient.Customer who, String kind, String rentalId) {
    long sum = 0;
    String after = null;
    do {
      JsonNode page =
          api.ledger(who.apiKey(), "?limit=500" + (after == null ? "" : "&after=" + after));
      for (JsonNode e : page.get("entries")) {
        if (e.get("kind").asText().equals(kind)
            && rentalId.equals(e.path("rental_id").asText(null)))
          sum += signed(e.get("amount").asText());
      }
      after = page.hasNonNull("next_after") ? page.get("next_after").asText() : null;
    } while (after != null);
    return sum;
  }

  /** {@code [rentals_ended, rentals_lost]} of the host in the list at {@code path}. */
  static List<Long> record(String hostId, String token, String path) {
    for (JsonNode h : api.get(path + "?limit=200", token).expect(200).json().get("hosts"))
      if (h.get("id").asText().equals(hostId))
        return List.of(h.get("rentals_ended").asLong(), h.get("rentals_lost").asLong());
    throw new AssertionError(hostId + " is not in " + path);
  }

  @Test
  void aRenterCannotSeeStopOrStreamAnotherRentersRental() throws Exception {
    host("ap-sg", 1);
    ApiClient.Customer owner = renter("Owner", "10");
    ApiClient.Customer other = renter("Other", "10");
    String id = launch(owner, "ap-sg", "").get("id").asText();
    api.get("/v1/rentals/" + id, other.apiKey()).expectProblem(404, "not_found");
    api.post("/v1/rentals/" + id + "/stop", other.apiKey(), null).expectProblem(404, "not_found");
    api.get("/v1/rentals/" + id + "/usage", other.apiKey()).expectProblem(404, "not_found");
    api.get("/v1/rentals/" + id + "/events", other.apiKey()).expectProblem(404, "not_found");
    eventually(
        WAIT,
        () ->
            assertEquals(
                0,
                api.get("/v1/rentals", other.apiKey()).expect(200).json().get("rentals").size()));
    api.post("/v1/rentals/" + id + "/stop", owner.apiKey(), null).expect(202);
    awaitStatus(owner, id, "ended");
  }
}
