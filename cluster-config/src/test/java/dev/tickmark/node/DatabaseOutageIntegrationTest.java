package dev.tickmark.node;

import static dev.tickmark.node.Eventually.eventually;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import dev.tickmark.agent.Agent;
import dev.tickmark.engine.money.Metering;
import dev.tickmark.engine.money.Money;
import dev.tickmark.persistence.DatabaseSettings;
import dev.tickmark.persistence.EmbeddedDatabase;
import dev.tickmark.persistence.TestDatabase;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.Statement;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneOffset;
import java.time.ZonedDateTime;
import java.time.temporal.ChronoUnit;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import java.util.stream.IntStream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Degrade, don't die: a node whose PostgreSQL goes away mid-rental answers every API request with a
 * 503 problem (and Retry-After) within 5 s, reports itself not ready on Pekko Management, keeps
 * serving /alive and /metrics, and resumes by itself when the database returns: the rental keeps
 * its place, is billed for the seconds its agent proved it ran (heartbeats through the outage), no
 * settlement is applied twice, and the books are conserved. The database is our own embedded
 * PostgreSQL, stopped and started again on the same port and data folder.
 */
class DatabaseOutageIntegrationTest {
  private static final Duration ANSWER_WITHIN = Duration.ofSeconds(5);
  private static final Duration RECOVERY = Duration.ofSeconds(60);
  private static final int BURST = 40;

  /** Agent heartbeats (1 s apart) the outage lasts at least: four settle intervals. */
  private static final int OUTAGE_HEARTBEATS = 8;

  private static final long PRICE_MICROS = Money.parse(RentingSupport.PRICE);

  private EmbeddedDatabase database;
  private Node node;
  private Agent agent;

  @AfterEach
  void stop() throws Exception {
    if (agent != null) agent.close();
    if (node != null) node.close();
    if (database != null) database.close();
  }

  @Test
  void anOutageAnswers503AndEverythingResumesWhenTheDatabaseReturns() throws Exception {
    Path temp = Files.createTempDirectory("tickmark-outage");
    Path dataDir = temp.resolve("postgres");
    int port = RentingSupport.freePort();
    database = EmbeddedDatabase.start(dataDir, port, false);
    node =
        Node.start(
            RentingSupport.renting(TestNodes.settings(database.settings("postgres", 8)))
                // the agent may be between reconnect attempts (backoff up to 30 s) when the
                // database returns
                .withConfig("tickmark.hosts.heartbeat-timeout", "20s")
                .withPorts(0, RentingSupport.freePort(), 0));
    ApiClient api = new ApiClient(node.baseUrl());
    ApiClient management = new ApiClient(node.managementUrl().replaceAll("/$", ""));
    eventually(RECOVERY, () -> management.get("/ready", null).expect(200));

    ApiClient.Customer provider = api.signUp("Provider");
    agent = RentingSupport.listedHost(node, api, provider, temp.resolve("agent"), "eu-nl", 1);
    ApiClient.Customer renter = RentingSupport.renter(api, "Renter", "10");
    String id = RentingSupport.launch(api, renter, "eu-nl");
    Instant startedAt =
        Instant.parse(
            RentingSupport.awaitStatus(api, renter, id, "running").get("started_at").asText());
    eventually(RentingSupport.WAIT, () -> assertTrue(billed(api, renter, id) >= 3));

    // ---- the database goes away
    database.close();
    Instant outageStarted = Instant.now();
    long heartbeatsBefore = agent.heartbeatsSent();
    assertUnavailableWithin(() -> api.get("/v1/account", renter.apiKey()));
    assertUnavailableWithin(
        () -> api.post("/v1/rentals", renter.apiKey(), RentingSupport.launchBody("eu-nl")));
    assertUnavailableWithin(() -> api.get("/v1/rentals/" + id, renter.apiKey()));
    assertUnavailableWithin(() -> api.post("/v1/rentals/" + id + "/stop", renter.apiKey(), null));
    // a burst does not queue up behind the pool (8 connections, each wait bounded): every answer
    // within 5 s
    ExecutorService callers = Executors.newFixedThreadPool(BURST);
    try {
      CompletableFuture.allOf(
              IntStream.range(0, BURST)
                  .mapToObj(
                      i ->
                          CompletableFuture.runAsync(
                              () ->
                                  assertUnavailableWithin(
                                      () ->
                                          api.get(
                                              i % 2 == 0 ? "/v1/account" : "/v1/rentals/" + id,
                                              renter.apiKey())),
                              callers))
                  .toArray(CompletableFuture[]::new))
          .get(30, TimeUnit.SECONDS);
    } finally {
      callers.shutdownNow();
    }
    // Pekko Management answers a failed check with 500 "Not Healthy: …"; any non-2xx fails a
    // readiness probe.
    eventually(
        ANSWER_WITHIN,
        () ->
            assertTrue(
                management.get("/ready", null).expect(500).body().startsWith("Not Healthy")));
    management.get("/alive", null).expect(200);
    api.get("/metrics", null).expect(200); // served from memory and the last cached counts
    eventually(
        RentingSupport.WAIT,
        () -> assertTrue(journalFailures(api) > 0, "the journal probe saw the outage"));
    // The outage lasts several settle intervals, during which the agent keeps its workload and
    // heartbeats.
    eventually(
        RentingSupport.WAIT,
        () -> assertTrue(agent.heartbeatsSent() >= heartbeatsBefore + OUTAGE_HEARTBEATS));
    assertTrue(
        agent.runningRentals().contains(id),
        "the workload kept running: " + agent.runningRentals());
    Duration outage = Duration.between(outageStarted, Instant.now());

    // ---- it returns on the same port and data folder
    database = EmbeddedDatabase.start(dataDir, port, false);
    eventually(RECOVERY, () -> management.get("/ready", null).expect(200));
    long afterOutage = Duration.between(startedAt, Instant.now()).getSeconds();
    eventually(
        RECOVERY,
        () -> {
          JsonNode rental = api.get("/v1/rentals/" + id, renter.apiKey()).expect(200).json();
          assertEquals("running", rental.get("status").asText(), rental.toString());
          assertTrue(
              rental.get("billed_seconds").asLong() > afterOutage,
              "metering resumed past the outage: " + rental);
        });

    Instant stopAt = Instant.now();
    api.post("/v1/rentals/" + id + "/stop", renter.apiKey(), null).expect(202);
    JsonNode ended = RentingSupport.awaitStatus(api, renter, id, "ended");
    assertEquals("stopped_by_renter", ended.get("end_reason").asText(), ended.toString());
    long billed = ended.get("billed_seconds").asLong();
    long window = Duration.between(startedAt, stopAt).getSeconds();
    // The agent ran the workload through the outage and heartbeats prove it: the outage is billed.
    assertTrue(
        Math.abs(billed - window) <= 2,
        "billed " + billed + " s for a window of " + window + " s (outage " + outage + ")");
    assertEquals(Money.format(Metering.cost(PRICE_MICROS, 1, billed)), ended.get("cost").asText());

    long cost = Money.parse(ended.get("cost").asText());
    eventually(
        RECOVERY,
        () -> {
          JsonNode account = api.get("/v1/account", renter.apiKey()).expect(200).json();
          assertEquals("0.000000", account.get("held").asText(), "hold released");
          assertEquals(Money.format(Money.parse("10") - cost), account.get("balance").asText());
          Set<String> keys = new HashSet<>();
          long captured = 0;
          for (JsonNode e :
              api.get("/v1/account/ledger?limit=500", renter.apiKey())
                  .expect(200)
                  .json()
                  .get("entries")) {
            if (!e.get("kind").asText().equals("capture")) continue;
            assertTrue(keys.add(e.get("key").asText()), "settlement key applied twice: " + e);
            captured += Money.parse(e.get("amount").asText().substring(1));
          }
          assertEquals(cost, captured, "captures add up to the cost");
          JsonNode audit =
              api.get("/ops/ledger/audit", TestNodes.OPERATOR_TOKEN).expect(200).json();
          assertTrue(audit.get("conserved").asBoolean(), audit.toString());
          assertEquals("0.000000", audit.get("pending_captures").asText(), audit.toString());
          assertEquals("0.000000", audit.get("pending_credits").asText(), audit.toString());
        });
  }

  /**
   * The host read side fails while the rest of PostgreSQL answers: its table is renamed away, so
   * every candidate query fails while the journal, the accounts and the API keys work (the one
   * state in which a launch gets as far as the matcher while its query fails). A new launch answers
   * 503 {@code unavailable} and moves no money, a retry with the same Idempotency-Key too; a
   * request that was already waiting keeps waiting past its wait_seconds, and matches once the read
   * side is back (its host's availability window opened meanwhile, with no write at all).
   */
  @Test
  void aLaunchWhileTheHostReadSideIsDownAnswers503AndAWaitingRequestMatchesWhenItReturns()
      throws Exception {
    Path temp = Files.createTempDirectory("tickmark-read-side-outage");
    DatabaseSettings db = TestDatabase.fresh("read_side_outage");
    node = Node.start(RentingSupport.renting(TestNodes.settings(db)));
    ApiClient api = new ApiClient(node.baseUrl());
    ApiClient.Customer provider = api.signUp("Provider");
    agent = RentingSupport.listedHost(node, api, provider, temp.resolve("agent"), "eu-de", 1);
    String hostId =
        agent.welcomed().get(RentingSupport.WAIT.toSeconds(), TimeUnit.SECONDS).hostId();

    // Capacity that appears without a write: the host's only window opens at a minute boundary a
    // little ahead.
    Instant opens =
        Instant.now().plusSeconds(12).truncatedTo(ChronoUnit.MINUTES).plus(Duration.ofMinutes(1));
    ZonedDateTime start = opens.atZone(ZoneOffset.UTC);
    int from = start.getHour() * 60 + start.getMinute();
    int to = Math.min(from + 60, 24 * 60);
    api.put(
            "/v1/hosts/" + hostId + "/listing",
            provider.apiKey(),
            "{\"on_demand_price_per_gpu_hour\":\""
                + RentingSupport.PRICE
                + "\",\"listed\":true,\"availability\":[{\"day\":\""
                + start.getDayOfWeek().name().substring(0, 3).toLowerCase(Locale.ROOT)
                + "\",\"start\":\""
                + hhmm(from)
                + "\",\"end\":\""
                + hhmm(to)
                + "\"}]}")
        .expect(200);
    eventually(
        RentingSupport.WAIT,
        () ->
            assertEquals(
                0,
                api.get("/v1/offers?gpu=h100-80gb&region=eu-de", null)
                    .expect(200)
                    .json()
                    .get("offers")
                    .size(),
                "outside the window"));

    // A request that waits 3 s for capacity: the read side answers, and there is none yet.
    ApiClient.Customer waiting = RentingSupport.renter(api, "Waiting", "10");
    JsonNode pending =
        api.post("/v1/rentals", waiting.apiKey(), launchBody(3)).expect(201).json().get("rental");
    assertEquals("pending", pending.get("status").asText(), pending.toString());
    String waitingId = pending.get("id").asText();
    Instant waitEnds = Instant.parse(pending.get("created_at").asText()).plusSeconds(3);

    // ---- the host read side goes away
    try (Connection c = DriverManager.getConnection(db.url(), db.user(), db.password());
        Statement st = c.createStatement()) {
      st.execute("ALTER TABLE hosts RENAME TO hosts_away");
    }
    ApiClient.Customer renter = RentingSupport.renter(api, "Renter", "10");
    Map<String, String> key = Map.of("Idempotency-Key", "launch-during-outage");
    for (int attempt = 0;
        attempt < 2;
        attempt++) { // a retry with the same key is refused the same way, and holds nothing either
      ApiClient.Reply refused =
          api.send("POST", "/v1/rentals", renter.apiKey(), launchBody(30), key)
              .expectProblem(503, "unavailable");
      assertNotNull(refused.header("Retry-After"), refused.body());
      assertNothingHeldOrCharged(
          api, renter); // the refused launch released its hold before it answered
    }
    // The waiting request outlives its wait (and the window opening) while the read side cannot say
    // there is no capacity.
    Instant until = (opens.isAfter(waitEnds) ? opens : waitEnds).plusSeconds(3);
    while (Instant.now().isBefore(until)) {
      JsonNode rental = api.get("/v1/rentals/" + waitingId, waiting.apiKey()).expect(200).json();
      assertEquals(
          "pending", rental.get("status").asText(), "an outage is not no capacity: " + rental);
      Thread.sleep(
          200); // polling a state that must hold for the whole outage, not waiting for an event
    }

    // ---- it returns
    Instant returned = Instant.now();
    try (Connection c = DriverManager.getConnection(db.url(), db.user(), db.password());
        Statement st = c.createStatement()) {
      st.execute("ALTER TABLE hosts_away RENAME TO hosts");
    }
    JsonNode running = RentingSupport.awaitStatus(api, waiting, waitingId, "running");
    assertTrue(
        Instant.parse(running.get("matched_at").asText()).isAfter(returned), running.toString());
    api.post("/v1/rentals/" + waitingId + "/stop", waiting.apiKey(), null).expect(202);
    JsonNode ended = RentingSupport.awaitStatus(api, waiting, waitingId, "ended");
    assertEquals("stopped_by_renter", ended.get("end_reason").asText(), ended.toString());
    long cost = Money.parse(ended.get("cost").asText());
    eventually(
        RECOVERY,
        () -> {
          JsonNode account = api.get("/v1/account", waiting.apiKey()).expect(200).json();
          assertEquals("0.000000", account.get("held").asText(), account.toString());
          assertEquals(
              Money.format(Money.parse("10") - cost),
              account.get("balance").asText(),
              account.toString());
          assertNothingHeldOrCharged(api, renter);
          assertLedgerMovedNothingButTheDeposit(api, renter, 2);
          JsonNode audit =
              api.get("/ops/ledger/audit", TestNodes.OPERATOR_TOKEN).expect(200).json();
          assertTrue(audit.get("conserved").asBoolean(), audit.toString());
        });
  }

  private static String launchBody(int waitSeconds) {
    return "{\"gpu\":\"h100-80gb\",\"count\":1,\"region\":\"eu-de\",\"max_price_per_gpu_hour\":\"3.00\","
        + "\"image\":\"ubuntu:24.04\",\"command\":[\"sleep\",\"3600\"],\"wait_seconds\":"
        + waitSeconds
        + "}";
  }

  private static String hhmm(int minuteOfDay) {
    return String.format(Locale.ROOT, "%02d:%02d", minuteOfDay / 60, minuteOfDay % 60);
  }

  /**
   * The renter's account as the account entity has it: the 10 EUR deposit, nothing held, nothing
   * captured.
   */
  private static void assertNothingHeldOrCharged(ApiClient api, ApiClient.Customer renter) {
    JsonNode account = api.get("/v1/account", renter.apiKey()).expect(200).json();
    assertEquals("10.000000", account.get("balance").asText(), account.toString());
    assertEquals("0.000000", account.get("held").asText(), account.toString());
    assertEquals("10.000000", account.get("available").asText(), account.toString());
  }

  /**
   * The ledger (a read side, so eventually): the deposit, and each refused launch's hold released
   * in full; no capture.
   */
  private static void assertLedgerMovedNothingButTheDeposit(
      ApiClient api, ApiClient.Customer renter, int refusedLaunches) {
    JsonNode entries =
        api.get("/v1/account/ledger?limit=50", renter.apiKey()).expect(200).json().get("entries");
    long sum = 0;
    int holds = 0;
    int releases = 0;
    for (JsonNode e : entries) {
      String kind = e.get("kind").asText();
      assertTrue(
          List.of("deposit", "hold", "hold_released").contains(kind), "no money moved: " + entries);
      if (kind.equals("hold")) holds++;
      if (kind.equals("hold_released")) releases++;
      String amount = e.get("amount").asText();
      sum += amount.startsWith("-") ? -Money.parse(amount.substring(1)) : Money.parse(amount);
    }
    assertEquals(refusedLaunches, holds, entries.toString());
    assertEquals(refusedLaunches, releases, entries.toString());
    assertEquals(Money.parse("10"), sum, "every hold released in full: " + entries);
  }

  private static long billed(ApiClient api, ApiClient.Customer renter, String id) {
    return api.get("/v1/rentals/" + id, renter.apiKey())
        .expect(200)
        .json()
        .get("billed_seconds")
        .asLong();
  }

  /** A 503 problem with a stable code and Retry-After, answered within {@link #ANSWER_WITHIN}. */
  private static void assertUnavailableWithin(Supplier<ApiClient.Reply> call) {
    long started = System.nanoTime();
    ApiClient.Reply reply = call.get();
    Duration took = Duration.ofNanos(System.nanoTime() - started);
    assertTrue(
        took.compareTo(ANSWER_WITHIN) < 0,
        "answered in " + took.toMillis() + " ms: " + reply.body());
    assertEquals(503, reply.status(), reply.body());
    assertTrue(reply.contentType().startsWith("application/problem+json"), reply.contentType());
    assertTrue(
        List.of("unavailable", "database_unavailable").contains(reply.text("code")), reply.body());
    assertNotNull(reply.header("Retry-After"), "Retry-After on " + reply.body());
  }

  private static double journalFailures(ApiClient api) {
    List<MetricsIntegrationTest.Sample> samples =
        MetricsIntegrationTest.parse(api.get("/metrics", null).expect(200).body());
    return MetricsIntegrationTest.value(
        samples, "tickmark_journal_failures_total", java.util.Map.of());
  }
}
