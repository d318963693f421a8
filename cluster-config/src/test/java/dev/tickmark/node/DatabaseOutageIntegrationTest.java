package dev.tickmark.node;

import static dev.tickmark.node.Eventually.eventually;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import dev.tickmark.agent.Agent;
import dev.tickmark.engine.money.Metering;
import dev.tickmark.engine.money.Money;
import dev.tickmark.persistence.EmbeddedDatabase;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.HashSet;
import java.util.List;
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
 * 503 problem (and Retry-After) within 5 s, reports itself not ready on Pekko Management, keeps serving
 * /alive and /metrics, and resumes by itself when the database returns: the rental keeps its place,
 * is billed for the seconds its agent proved it ran (heartbeats through the outage), no settlement is
 * applied twice, and the books are conserved. The database is our own embedded PostgreSQL, stopped and
 * started again on the same port and data folder.
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
    node = Node.start(RentingSupport.renting(TestNodes.settings(database.settings("postgres", 8)))
        // the agent may be between reconnect attempts (backoff up to 30 s) when the database returns
        .withConfig("tickmark.hosts.heartbeat-timeout", "20s")
        .withPorts(0, RentingSupport.freePort(), 0));
    ApiClient api = new ApiClient(node.baseUrl());
    ApiClient management = new ApiClient(node.managementUrl().replaceAll("/$", ""));
    eventually(RECOVERY, () -> management.get("/ready", null).expect(200));

    ApiClient.Customer provider = api.signUp("Provider");
    agent = RentingSupport.listedHost(node, api, provider, temp.resolve("agent"), "eu-nl", 1);
    ApiClient.Customer renter = RentingSupport.renter(api, "Renter", "10");
    String id = RentingSupport.launch(api, renter, "eu-nl");
    Instant startedAt = Instant.parse(RentingSupport.awaitStatus(api, renter, id, "running").get("started_at").asText());
    eventually(RentingSupport.WAIT, () -> assertTrue(billed(api, renter, id) >= 3));

    // ---- the database goes away
    database.close();
    Instant outageStarted = Instant.now();
    long heartbeatsBefore = agent.heartbeatsSent();
    assertUnavailableWithin(() -> api.get("/v1/account", renter.apiKey()));
    assertUnavailableWithin(() -> api.post("/v1/rentals", renter.apiKey(), RentingSupport.launchBody("eu-nl")));
    assertUnavailableWithin(() -> api.get("/v1/rentals/" + id, renter.apiKey()));
    assertUnavailableWithin(() -> api.post("/v1/rentals/" + id + "/stop", renter.apiKey(), null));
    // a burst does not queue up behind the pool (8 connections, each wait bounded): every answer within 5 s
    ExecutorService callers = Executors.newFixedThreadPool(BURST);
    try {
      CompletableFuture.allOf(IntStream.range(0, BURST).mapToObj(i -> CompletableFuture.runAsync(
          () -> assertUnavailableWithin(() -> api.get(i % 2 == 0 ? "/v1/account" : "/v1/rentals/" + id, renter.apiKey())), callers))
          .toArray(CompletableFuture[]::new)).get(30, TimeUnit.SECONDS);
    } finally {
      callers.shutdownNow();
    }
    // Pekko Management answers a failed check with 500 "Not Healthy: …"; any non-2xx fails a readiness probe.
    eventually(ANSWER_WITHIN, () -> assertTrue(management.get("/ready", null).expect(500).body().startsWith("Not Healthy")));
    management.get("/alive", null).expect(200);
    api.get("/metrics", null).expect(200); // served from memory and the last cached counts
    eventually(RentingSupport.WAIT, () -> assertTrue(journalFailures(api) > 0, "the journal probe saw the outage"));
    // The outage lasts several settle intervals, during which the agent keeps its workload and heartbeats.
    eventually(RentingSupport.WAIT, () -> assertTrue(agent.heartbeatsSent() >= heartbeatsBefore + OUTAGE_HEARTBEATS));
    assertTrue(agent.runningRentals().contains(id), "the workload kept running: " + agent.runningRentals());
    Duration outage = Duration.between(outageStarted, Instant.now());

    // ---- it returns on the same port and data folder
    database = EmbeddedDatabase.start(dataDir, port, false);
    eventually(RECOVERY, () -> management.get("/ready", null).expect(200));
    long afterOutage = Duration.between(startedAt, Instant.now()).getSeconds();
    eventually(RECOVERY, () -> {
      JsonNode rental = api.get("/v1/rentals/" + id, renter.apiKey()).expect(200).json();
      assertEquals("running", rental.get("status").asText(), rental.toString());
      assertTrue(rental.get("billed_seconds").asLong() > afterOutage, "metering resumed past the outage: " + rental);
    });

    Instant stopAt = Instant.now();
    api.post("/v1/rentals/" + id + "/stop", renter.apiKey(), null).expect(202);
    JsonNode ended = RentingSupport.awaitStatus(api, renter, id, "ended");
    assertEquals("stopped_by_renter", ended.get("end_reason").asText(), ended.toString());
    long billed = ended.get("billed_seconds").asLong();
    long window = Duration.between(startedAt, stopAt).getSeconds();
    // The agent ran the workload through the outage and heartbeats prove it: the outage is billed.
    assertTrue(Math.abs(billed - window) <= 2, "billed " + billed + " s for a window of " + window + " s (outage " + outage + ")");
    assertEquals(Money.format(Metering.cost(PRICE_MICROS, 1, billed)), ended.get("cost").asText());

    long cost = Money.parse(ended.get("cost").asText());
    eventually(RECOVERY, () -> {
      JsonNode account = api.get("/v1/account", renter.apiKey()).expect(200).json();
      assertEquals("0.000000", account.get("held").asText(), "hold released");
      assertEquals(Money.format(Money.parse("10") - cost), account.get("balance").asText());
      Set<String> keys = new HashSet<>();
      long captured = 0;
      for (JsonNode e : api.get("/v1/account/ledger?limit=500", renter.apiKey()).expect(200).json().get("entries")) {
        if (!e.get("kind").asText().equals("capture")) continue;
        assertTrue(keys.add(e.get("key").asText()), "settlement key applied twice: " + e);
        captured += Money.parse(e.get("amount").asText().substring(1));
      }
      assertEquals(cost, captured, "captures add up to the cost");
      JsonNode audit = api.get("/ops/ledger/audit", TestNodes.OPERATOR_TOKEN).expect(200).json();
      assertTrue(audit.get("conserved").asBoolean(), audit.toString());
      assertEquals("0.000000", audit.get("pending_captures").asText(), audit.toString());
      assertEquals("0.000000", audit.get("pending_credits").asText(), audit.toString());
    });
  }

  private static long billed(ApiClient api, ApiClient.Customer renter, String id) {
    return api.get("/v1/rentals/" + id, renter.apiKey()).expect(200).json().get("billed_seconds").asLong();
  }

  /** A 503 problem with a stable code and Retry-After, answered within {@link #ANSWER_WITHIN}. */
  private static void assertUnavailableWithin(Supplier<ApiClient.Reply> call) {
    long started = System.nanoTime();
    ApiClient.Reply reply = call.get();
    Duration took = Duration.ofNanos(System.nanoTime() - started);
    assertTrue(took.compareTo(ANSWER_WITHIN) < 0, "answered in " + took.toMillis() + " ms: " + reply.body());
    assertEquals(503, reply.status(), reply.body());
    assertTrue(reply.contentType().startsWith("application/problem+json"), reply.contentType());
    assertTrue(List.of("unavailable", "database_unavailable").contains(reply.text("code")), reply.body());
    assertNotNull(reply.header("Retry-After"), "Retry-After on " + reply.body());
  }

  private static double journalFailures(ApiClient api) {
    List<MetricsIntegrationTest.Sample> samples = MetricsIntegrationTest.parse(api.get("/metrics", null).expect(200).body());
    return MetricsIntegrationTest.value(samples, "tickmark_journal_failures_total", java.util.Map.of());
  }
}
