package dev.tickmark.node;

import static dev.tickmark.node.Eventually.eventually;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
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
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Workloads that end without the renter asking, through a real agent process. A workload whose
 * command finishes ends {@code workload_exited}, billed to its stop. A workload that vanishes
 * without a report: the agent process is killed ({@code kill -9}) under a running rental and
 * started again well within the heartbeat timeout. The new agent wipes the workload's leftovers,
 * and its heartbeats no longer list it; nobody reports a stop. The rental must end {@code
 * host_lost}, billed no further than the last heartbeat that listed the workload, with its hold
 * released and its card back on the market — not run on as {@code running} with its hold and card
 * taken (found with the quick start: it stayed {@code running} for minutes, its shown cost
 * growing).
 */
class WorkloadVanishedIntegrationTest {
  static final Duration WAIT = Duration.ofSeconds(60);
  static final String DEPOSIT = "10";

  @TempDir Path temp;
  final List<Process> agents = new ArrayList<>();

  @AfterEach
  void stopAgents() throws InterruptedException {
    for (Process p : agents) p.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
  }

  @Test
  void aRentalWhoseWorkloadVanishedWithItsAgentEndsAtTheLastHeartbeatThatListedIt()
      throws Exception {
    DatabaseSettings db = TestDatabase.fresh("vanished");
    try (Node node =
        Node.start(
            RentingSupport.renting(TestNodes.settings(db))
                // long enough that the restarted agent is back before the host would go offline
                .withConfig("tickmark.hosts.heartbeat-timeout", "60s"))) {
      ApiClient api = new ApiClient(node.baseUrl());
      ApiClient.Customer provider = api.signUp("Provider");
      Path state = temp.resolve("agent");
      Process[] agent = new Process[1];
      String hostId = listedHost(api, provider, token -> agent[0] = startAgent(node, state, token));

      ApiClient.Customer renter = RentingSupport.renter(api, "Renter", DEPOSIT);
      String id = RentingSupport.launch(api, renter, "eu-nl");
      JsonNode running = RentingSupport.awaitStatus(api, renter, id, "running");
      Instant startedAt = Instant.parse(running.get("started_at").asText());
      // settled at least once: a heartbeat that listed the workload reached the host
      eventually(WAIT, () -> assertTrue(captures(api, renter) >= 1, "settled"));

      Instant killedAt = Instant.now();
      agent[0].destroyForcibly().waitFor(10, TimeUnit.SECONDS); // no rental_stopped, no close frame
      startAgent(node, state, null); // the kept credential; it wipes the workload's leftovers

      JsonNode ended = RentingSupport.awaitStatus(api, renter, id, "ended");
      assertEquals("host_lost", ended.get("end_reason").asText(), ended.toString());
      assertTrue(ended.get("exit_code").isNull(), "a vanished workload has no exit status");
      long billed = ended.get("billed_seconds").asLong();
      long untilKilled = Duration.between(startedAt, killedAt).toSeconds();
      assertTrue(
          billed <= untilKilled + 1,
          "billed " + billed + " s, the workload was gone after " + untilKilled + " s");
      assertTrue(billed >= 1, "billed " + billed + " s: what was proven is paid");
      assertTrue(
          api.get("/v1/hosts/" + hostId, provider.apiKey())
              .expect(200)
              .json()
              .get("online")
              .asBoolean(),
          "the host itself was never lost");

      assertPaidAndFreed(api, renter, ended, provider, hostId);
    }
  }

  /**
   * Its exit status, as the agent's runtime saw it, is the renter's: in the rental and in the list.
   */
  @Test
  void aWorkloadWhoseCommandFinishedEndsWorkloadExitedBilledToItsStop() throws Exception {
    DatabaseSettings db = TestDatabase.fresh("exited");
    try (Node node = Node.start(RentingSupport.renting(TestNodes.settings(db)))) {
      ApiClient api = new ApiClient(node.baseUrl());
      ApiClient.Customer provider = api.signUp("Provider");
      String hostId =
          listedHost(api, provider, token -> startAgent(node, temp.resolve("agent"), token));

      ApiClient.Customer renter = RentingSupport.renter(api, "Renter", DEPOSIT);
      String id =
          api.post(
                  "/v1/rentals",
                  renter.apiKey(),
                  RentingSupport.launchBody("eu-nl")
                      .replace(
                          "[\"sleep\",\"3600\"]", "[\"sh\",\"-c\",\"sleep 4; echo done; exit 3\"]"))
              .expect(201)
              .json()
              .get("rental")
              .get("id")
              .asText();
      JsonNode running = RentingSupport.awaitStatus(api, renter, id, "running");
      Instant startedAt = Instant.parse(running.get("started_at").asText());

      JsonNode ended = RentingSupport.awaitStatus(api, renter, id, "ended");
      assertEquals("workload_exited", ended.get("end_reason").asText(), ended.toString());
      assertEquals(3, ended.get("exit_code").asInt(), ended.toString());
      JsonNode listed =
          api.get("/v1/rentals?status=ended", renter.apiKey()).expect(200).json().get("rentals");
      assertEquals(1, listed.size(), listed.toString());
      assertEquals(3, listed.get(0).get("exit_code").asInt(), listed.toString());
      Instant endedAt = Instant.parse(ended.get("ended_at").asText());
      long billed = ended.get("billed_seconds").asLong();
      long untilStop = Duration.between(startedAt, endedAt).toSeconds();
      // Billed to the stop, unless a heartbeat sent after the exit (they are 1 s apart here)
      // reached
      // the host before the report: then to the last heartbeat that listed the workload.
      assertTrue(
          billed <= untilStop && billed >= untilStop - 2,
          "billed " + billed + " s, stopped after " + untilStop + " s: " + ended);
      assertTrue(billed >= 2 && billed <= 10, "the command ran about 4 s: billed " + billed);

      assertPaidAndFreed(api, renter, ended, provider, hostId);
    }
  }

  /**
   * The ended rental's cost is all the renter paid, its hold is released, the books are conserved
   * and its card is free again.
   */
  private static void assertPaidAndFreed(
      ApiClient api,
      ApiClient.Customer renter,
      JsonNode ended,
      ApiClient.Customer provider,
      String hostId) {
    long cost = Money.parse(ended.get("cost").asText());
    eventually(
        WAIT,
        () -> {
          JsonNode account = api.account(renter.apiKey());
          assertEquals("0.000000", account.get("held").asText(), "hold released");
          assertEquals(Money.format(Money.parse(DEPOSIT) - cost), account.get("balance").asText());
          JsonNode audit = api.audit();
          assertTrue(audit.get("conserved").asBoolean(), audit.toString());
        });
    eventually(WAIT, () -> assertEquals(1, freeCards(api, hostId, provider), "card free"));
  }

  /** Something that starts an agent process with a registration token. */
  @FunctionalInterface
  interface AgentStarter {
    void start(String token) throws Exception;
  }

  /** A provider's host, its agent started, verified and listed with its one card free. */
  private static String listedHost(ApiClient api, ApiClient.Customer provider, AgentStarter agent)
      throws Exception {
    agent.start(HostTestSupport.registrationToken(api, provider, "eu-nl").get("token").asText());
    String hostId = verifiedHostId(api, provider);
    api.put(
            "/v1/hosts/" + hostId + "/listing",
            provider.apiKey(),
            "{\"on_demand_price_per_gpu_hour\":\"" + RentingSupport.PRICE + "\",\"listed\":true}")
        .expect(200);
    eventually(WAIT, () -> assertEquals(1, freeCards(api, hostId, provider)));
    return hostId;
  }

  private Process startAgent(Node node, Path state, String token) throws Exception {
    Files.createDirectories(state);
    List<String> command = new ArrayList<>();
    command.add(ProcessHandle.current().info().command().orElse("java"));
    command.add("-cp");
    command.add(System.getProperty("java.class.path"));
    command.add("dev.tickmark.agent.Main");
    command.add("--engine");
    command.add("ws://127.0.0.1:" + node.httpPort());
    if (token != null) {
      command.add("--token");
      command.add(token);
    }
    command.add("--state-dir");
    command.add(state.toString());
    command.add("--simulate-gpus");
    command.add("h100-80gb:1");
    Process p =
        new ProcessBuilder(command)
            .redirectErrorStream(true)
            .redirectOutput(ProcessBuilder.Redirect.appendTo(temp.resolve("agent.log").toFile()))
            .start();
    agents.add(p);
    return p;
  }

  private static String verifiedHostId(ApiClient api, ApiClient.Customer provider) {
    String[] id = new String[1];
    eventually(
        WAIT,
        () -> {
          JsonNode hosts = api.get("/v1/hosts", provider.apiKey()).expect(200).json().get("hosts");
          assertEquals(1, hosts.size(), hosts.toString());
          assertEquals("verified", hosts.get(0).get("status").asText(), hosts.toString());
          id[0] = hosts.get(0).get("id").asText();
        });
    return id[0];
  }

  private static long freeCards(ApiClient api, String hostId, ApiClient.Customer provider) {
    JsonNode host = api.get("/v1/hosts/" + hostId, provider.apiKey()).expect(200).json();
    long free = 0;
    for (JsonNode card : host.get("cards")) if (card.get("state").asText().equals("free")) free++;
    return free;
  }

  private static long captures(ApiClient api, ApiClient.Customer renter) {
    long captured = 0;
    for (JsonNode e : api.ledger(renter.apiKey(), "?limit=500").get("entries"))
      if (e.get("kind").asText().equals("capture")) captured++;
    return captured;
  }
}
