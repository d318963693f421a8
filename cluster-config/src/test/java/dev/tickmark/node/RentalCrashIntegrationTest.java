package dev.tickmark.node;

import static dev.tickmark.node.Eventually.eventually;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import dev.tickmark.agent.Agent;
import dev.tickmark.agent.AgentConfig;
import dev.tickmark.engine.money.Metering;
import dev.tickmark.engine.money.Money;
import dev.tickmark.persistence.DatabaseSettings;
import dev.tickmark.persistence.TestDatabase;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * A node killed with SIGKILL in the middle of a rental, and started again on the same PostgreSQL
 * and the same port: the rental resumes metering by itself (woken from the read side; the agent
 * reconnects and re-sends {@code rental_started}), the workload that kept running through the
 * outage is billed for it, and no second is charged twice or lost — the ledger holds one capture
 * per settled second key and exactly the cost in total.
 *
 * <p>The node runs as its own JVM ({@link Main}, configured through the environment) so that it can
 * be killed abruptly; the agent runs in this JVM with simulated GPUs and reconnects by itself.
 */
class RentalCrashIntegrationTest {
  static final Duration WAIT = Duration.ofSeconds(40);

  /** The agent's backoff reaches 30 s: after a restart it is back within about 40 s. */
  static final Duration RECONNECT = Duration.ofSeconds(90);

  static final String PRICE = "2.49";
  static final long PRICE_MICROS = Money.parse(PRICE);
  static final int FEE_BPS = 1500;

  private final List<Process> nodes = new ArrayList<>();
  private Agent agent;

  @AfterEach
  void cleanUp() throws Exception {
    if (agent != null) agent.close();
    for (Process p : nodes) {
      if (p.isAlive()) {
        p.destroy();
        if (!p.waitFor(30, TimeUnit.SECONDS)) p.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
      }
    }
  }

  @Test
  void aKilledNodeResumesTheRentalAndBillsEverySecondExactlyOnce() throws Exception {
    DatabaseSettings db = TestDatabase.fresh("rental_crash");
    int httpPort = SingleNodeProcess.freePort();
    Path logs = Files.createDirectories(Path.of("target", "rental-crash"));
    Path temp = Files.createTempDirectory("tickmark-rental-crash");

    Process first = startNode(db, httpPort, logs.resolve("node-1.log"));
    ApiClient api = new ApiClient("http://127.0.0.1:" + httpPort);

    // A provider with a verified, listed host of one simulated H100.
    ApiClient.Customer provider = api.signUp("Provider");
    String token =
        api.post("/v1/hosts/registration-tokens", provider.apiKey(), "{\"region\":\"eu-nl\"}")
            .expect(201)
            .json()
            .get("token")
            .asText();
    agent =
        Agent.start(
            AgentConfig.simulated(
                "ws://127.0.0.1:" + httpPort, token, temp.resolve("agent"), "h100-80gb:1"));
    String hostId = agent.welcomed().get(WAIT.toSeconds(), TimeUnit.SECONDS).hostId();
    assertEquals("verified", agent.verified().get(WAIT.toSeconds(), TimeUnit.SECONDS).status());
    api.put(
            "/v1/hosts/" + hostId + "/listing",
            provider.apiKey(),
            "{\"on_demand_price_per_gpu_hour\":\"" + PRICE + "\",\"listed\":true}")
        .expect(200);
    eventually(WAIT, () -> assertEquals(1, offered(api), "the host is on the market"));

    // A funded renter launches a long workload.
    ApiClient.Customer renter = api.signUp("Renter");
    api.opsDeposit(renter.id(), "10", "welcome-" + renter.id()).expect(201);
    JsonNode launched =
        api.post(
                "/v1/rentals",
                renter.apiKey(),
                "{\"gpu\":\"h100-80gb\",\"count\":1,\"region\":\"eu-nl\","
                    + "\"max_price_per_gpu_hour\":\"3.00\",\"image\":\"ubuntu:24.04\",\"command\":[\"sleep\",\"3600\"]}")
            .expect(201)
            .json()
            .get("rental");
    String id = launched.get("id").asText();
    JsonNode running = awaitStatus(api, renter, id, "running");
    Instant startedAt = Instant.parse(running.get("started_at").asText());
    // A few settled seconds, on the read side, which is what the restarted node wakes rentals from.
    // Read from the table:
    // the list shows a running rental's live meter, asked of the entity, which would wake it.
    eventually(
        WAIT,
        () -> {
          ReadSideRow row = readSide(db, id);
          assertEquals("running", row.status(), row.toString());
          assertTrue(row.billedSeconds() >= 4, row.toString());
        });
    assertTrue(agent.runningRentals().contains(id), "the workload runs on the agent");

    // Crash: no coordinated shutdown, no final settlement, sockets cut.
    first.destroyForcibly();
    assertTrue(first.waitFor(30, TimeUnit.SECONDS), "the killed node is gone");
    Instant killedAt = Instant.now();
    long billedBeforeCrash = readSideBilledSeconds(db, id);
    assertTrue(billedBeforeCrash >= 4, "settled before the crash: " + billedBeforeCrash);

    // The workload outlives the node: the agent keeps it running while it tries to reconnect.
    eventually(WAIT, () -> assertFalse(agent.connected(), "the agent noticed the node is gone"));
    assertTrue(agent.runningRentals().contains(id), "the workload kept running through the outage");

    startNode(db, httpPort, logs.resolve("node-2.log"));
    Instant restartedAt = Instant.now();

    // Nobody touches the rental (the table is read, not the list, which asks the entity): the read
    // side shows new
    // settlements once the node woke it by itself.
    boolean[] agentBackFirst = new boolean[1];
    eventually(
        RECONNECT,
        () -> {
          ReadSideRow row = readSide(db, id);
          assertEquals("running", row.status(), row.toString());
          assertTrue(
              row.billedSeconds() > billedBeforeCrash,
              "metering resumed after the restart: " + row);
          agentBackFirst[0] = agent.connected();
        });
    System.out.printf(
        "rental %s resumed %s the agent reconnected (killed at %s, restarted at %s)%n",
        id, agentBackFirst[0] ? "after" : "before", killedAt, restartedAt);

    // The agent reconnects to the same address by itself, and its heartbeats reach the new node.
    eventually(RECONNECT, () -> assertTrue(agent.connected(), "the agent reconnected"));
    long heartbeatsAtReconnect = agent.heartbeatsSent();
    eventually(
        WAIT,
        () -> {
          JsonNode host = api.get("/v1/hosts/" + hostId, provider.apiKey()).expect(200).json();
          assertTrue(host.get("online").asBoolean(), host.toString());
          assertEquals("verified", host.get("status").asText(), host.toString());
          assertTrue(
              agent.connected() && agent.heartbeatsSent() >= heartbeatsAtReconnect + 2,
              "heartbeats to the new node");
        });
    assertTrue(agent.runningRentals().contains(id), "still the same workload");

    // A few more seconds of metering on the new node, then the renter stops it.
    long resumedFrom = Duration.between(startedAt, Instant.now()).getSeconds();
    eventually(
        WAIT,
        () ->
            assertTrue(rental(api, renter, id).get("billed_seconds").asLong() >= resumedFrom + 3));
    Instant stopAt = Instant.now();
    api.post("/v1/rentals/" + id + "/stop", renter.apiKey(), null).expect(202);
    JsonNode ended = awaitStatus(api, renter, id, "ended");
    assertEquals("stopped_by_renter", ended.get("end_reason").asText(), ended.toString());
    eventually(
        WAIT, () -> assertFalse(agent.runningRentals().contains(id), "the workload was stopped"));

    // Billed: the whole wall-clock window, outage included (the workload ran through it).
    long billed = ended.get("billed_seconds").asLong();
    long window = Duration.between(startedAt, stopAt).getSeconds();
    assertTrue(
        Math.abs(billed - window) <= 1, "billed " + billed + " s for a window of " + window + " s");
    assertTrue(
        billed > Duration.between(startedAt, killedAt).getSeconds() + 5,
        "the outage is billed: " + billed + " s");
    long cost = Metering.cost(PRICE_MICROS, 1, billed);
    assertEquals(Money.format(cost), ended.get("cost").asText());
    long providerShare = Metering.providerShare(cost, FEE_BPS);

    // The checkpoints are cumulative and strictly increasing, and the last one is the end.
    JsonNode usage = api.get("/v1/rentals/" + id + "/usage", renter.apiKey()).expect(200).json();
    long previous = 0;
    boolean settledAfterRestart = false;
    for (JsonNode c : usage.get("checkpoints")) {
      long through = c.get("through_second").asLong();
      assertTrue(through > previous, "checkpoints strictly increase: " + usage);
      assertEquals(
          Money.format(Metering.cost(PRICE_MICROS, 1, through)),
          c.get("cost").asText(),
          usage.toString());
      previous = through;
      if (Instant.parse(c.get("at").asText()).isAfter(restartedAt)) settledAfterRestart = true;
    }
    assertEquals(billed, previous, "the last checkpoint is the billed total: " + usage);
    assertTrue(settledAfterRestart, "the restarted node settled: " + usage);

    eventually(
        WAIT,
        () -> {
          // Renter: captures of exactly the cost, one per settled second key, each the difference
          // of cumulative costs.
          JsonNode account = api.account(renter.apiKey());
          assertEquals("0.000000", account.get("held").asText(), "hold released: " + account);
          assertEquals(
              Money.format(Money.parse("10") - cost),
              account.get("balance").asText(),
              account.toString());
          JsonNode entries = api.ledger(renter.apiKey(), "?limit=500").get("entries");
          Set<String> keys = new HashSet<>();
          long captured = 0;
          long lastSecond = 0;
          int holds = 0;
          long held = 0;
          long released = 0;
          for (JsonNode e : entries) {
            String kind = e.get("kind").asText();
            String key = e.get("key").asText();
            assertTrue(keys.add(key), "ledger key " + key + " appears once: " + entries);
            long amount = Money.parse(e.get("amount").asText().replace("-", ""));
            switch (kind) {
              case "capture" -> {
                assertTrue(key.startsWith(id + ":"), key);
                long second = Long.parseLong(key.substring(id.length() + 1));
                assertTrue(second > lastSecond, "capture seconds strictly increase: " + entries);
                assertEquals(
                    Metering.cost(PRICE_MICROS, 1, second)
                        - Metering.cost(PRICE_MICROS, 1, lastSecond),
                    amount,
                    "capture " + key + " charges exactly the seconds since the previous one");
                lastSecond = second;
                captured += amount;
              }
              case "hold" -> {
                holds++;
                held += amount;
              }
              case "hold_released" -> released += amount;
              default -> {}
            }
          }
          assertEquals(billed, lastSecond, "the last capture is the billed second: " + entries);
          assertEquals(cost, captured, "ledger captures add up to the cost");
          assertTrue(holds >= 1, entries.toString());
          assertEquals(
              held,
              captured + released,
              "every held micro-euro was captured or released: " + entries);

          // Provider: the credits under the same keys, and earnings + platform fee = cost.
          JsonNode providerAccount = api.account(provider.apiKey());
          assertEquals(
              Money.format(providerShare),
              providerAccount.get("earnings").asText(),
              providerAccount.toString());
          Set<String> creditKeys = new HashSet<>();
          long earned = 0;
          for (JsonNode e : api.ledger(provider.apiKey(), "?limit=500").get("entries")) {
            if (!e.get("kind").asText().equals("earning")) continue;
            assertTrue(creditKeys.add(e.get("key").asText()), "credit key appears once: " + e);
            earned += Money.parse(e.get("amount").asText());
          }
          assertEquals(providerShare, earned);
          assertEquals(
              creditKeys.size(),
              keys.stream().filter(k -> k.startsWith(id + ":")).count(),
              "one credit per capture");

          JsonNode audit = api.audit();
          assertTrue(audit.get("conserved").asBoolean(), audit.toString());
          assertEquals("0.000000", audit.get("pending_captures").asText(), audit.toString());
          assertEquals("0.000000", audit.get("pending_credits").asText(), audit.toString());
          assertEquals(0, audit.get("mismatched_settlements").asLong(), audit.toString());
          assertEquals(Money.format(cost), audit.get("captures").asText(), audit.toString());
          assertEquals(
              Money.format(providerShare),
              audit.get("provider_earnings").asText(),
              audit.toString());
          assertEquals(
              Money.format(cost - providerShare),
              audit.get("platform_revenue").asText(),
              audit.toString());
          assertEquals("0.000000", audit.get("holds_open").asText(), audit.toString());
        });
    eventually(WAIT, () -> assertEquals(1, offered(api), "the card is free again"));
  }

  // ---- the node as a separate process
  // ------------------------------------------------------------

  private Process startNode(DatabaseSettings db, int httpPort, Path log) throws Exception {
    Process process = SingleNodeProcess.start(db, httpPort, log, List.of());
    nodes.add(process);
    return process;
  }

  /**
   * What the read side had settled when the node died, read from the database itself (no node is
   * running).
   */
  record ReadSideRow(String status, long billedSeconds) {}

  private static ReadSideRow readSide(DatabaseSettings db, String rentalId) {
    try (Connection c = DriverManager.getConnection(db.url(), db.user(), db.password());
        PreparedStatement st =
            c.prepareStatement("SELECT status, billed_seconds FROM rentals WHERE rental_id = ?")) {
      st.setString(1, rentalId);
      try (ResultSet rs = st.executeQuery()) {
        assertTrue(rs.next(), "the rental is on the read side");
        return new ReadSideRow(rs.getString(1), rs.getLong(2));
      }
    } catch (java.sql.SQLException e) {
      throw new AssertionError("read side: " + e, e);
    }
  }

  private static long readSideBilledSeconds(DatabaseSettings db, String rentalId) throws Exception {
    try (Connection c = DriverManager.getConnection(db.url(), db.user(), db.password());
        PreparedStatement st =
            c.prepareStatement("SELECT billed_seconds FROM rentals WHERE rental_id = ?")) {
      st.setString(1, rentalId);
      try (ResultSet rs = st.executeQuery()) {
        assertTrue(rs.next(), "the rental is on the read side");
        return rs.getLong(1);
      }
    }
  }

  // ---- API helpers
  // --------------------------------------------------------------------------------

  private static int offered(ApiClient api) {
    int cards = 0;
    for (JsonNode o :
        api.get("/v1/offers?gpu=h100-80gb&region=eu-nl&tier=on_demand", null)
            .expect(200)
            .json()
            .get("offers")) {
      cards += o.get("available_cards").asInt();
    }
    return cards;
  }

  private static JsonNode rental(ApiClient api, ApiClient.Customer renter, String id) {
    return api.get("/v1/rentals/" + id, renter.apiKey()).expect(200).json();
  }

  private static JsonNode awaitStatus(
      ApiClient api, ApiClient.Customer renter, String id, String status) {
    JsonNode[] last = new JsonNode[1];
    eventually(
        WAIT,
        () -> {
          last[0] = rental(api, renter, id);
          assertEquals(status, last[0].get("status").asText(), last[0].toString());
        });
    assertNotNull(last[0]);
    return last[0];
  }
}
