package dev.tickmark.node;

import static dev.tickmark.node.Eventually.eventually;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import dev.tickmark.agent.Agent;
import dev.tickmark.agent.AgentConfig;
import java.io.IOException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.TimeUnit;

/**
 * What the runtime tests (metrics, database outage) share: a real agent with simulated GPUs listed
 * on a node, a funded renter, a launched rental, and a free port for Pekko Management.
 */
final class RentingSupport {
  static final Duration WAIT = Duration.ofSeconds(40);
  static final String PRICE = "2.49";

  private RentingSupport() {}

  /**
   * Node settings for renting against simulated hosts with short settle and heartbeat intervals.
   */
  static NodeSettings renting(NodeSettings settings) {
    return settings
        .withConfig("tickmark.market.allow-simulated-hosts", true)
        .withConfig("tickmark.verification.min-disk-write-mib-per-s", 10)
        .withConfig("tickmark.hosts.heartbeat-interval", "1s")
        .withConfig("tickmark.rentals.settle-interval", "2s")
        .withConfig("tickmark.rentals.provisioning-timeout", "20s")
        .withConfig("tickmark.rentals.stop-timeout", "5s")
        .withConfig("tickmark.metrics.journal-probe-interval", "1s");
  }

  /**
   * A verified, listed host with {@code cards} simulated H100s in {@code region}, run by a real
   * agent.
   */
  static Agent listedHost(
      Node node,
      ApiClient api,
      ApiClient.Customer provider,
      Path stateDir,
      String region,
      int cards)
      throws Exception {
    return listedHostAt(node.httpPort(), api, provider, stateDir, region, cards);
  }

  /** The same, for a node on {@code httpPort} (one running as its own process). */
  static Agent listedHostAt(
      int httpPort,
      ApiClient api,
      ApiClient.Customer provider,
      Path stateDir,
      String region,
      int cards)
      throws Exception {
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
                "ws://127.0.0.1:" + httpPort, token, stateDir, "h100-80gb:" + cards));
    String hostId = agent.welcomed().get(WAIT.toSeconds(), TimeUnit.SECONDS).hostId();
    assertEquals("verified", agent.verified().get(WAIT.toSeconds(), TimeUnit.SECONDS).status());
    api.put(
            "/v1/hosts/" + hostId + "/listing",
            provider.apiKey(),
            "{\"on_demand_price_per_gpu_hour\":\"" + PRICE + "\",\"listed\":true}")
        .expect(200);
    eventually(
        WAIT,
        () -> {
          JsonNode offers =
              api.get("/v1/offers?gpu=h100-80gb&region=" + region, null)
                  .expect(200)
                  .json()
                  .get("offers");
          assertTrue(offers.size() > 0, "host listed in " + region);
        });
    return agent;
  }

  static ApiClient.Customer renter(ApiClient api, String name, String deposit) {
    ApiClient.Customer renter = api.signUp(name);
    api.opsDeposit(renter.id(), deposit, "welcome-" + renter.id()).expect(201);
    return renter;
  }

  static String launchBody(String region) {
    return "{\"gpu\":\"h100-80gb\",\"count\":1,\"region\":\""
        + region
        + "\",\"max_price_per_gpu_hour\":\"3.00\","
        + "\"image\":\"ubuntu:24.04\",\"command\":[\"sleep\",\"3600\"]}";
  }

  static String launch(ApiClient api, ApiClient.Customer renter, String region) {
    return api.post("/v1/rentals", renter.apiKey(), launchBody(region))
        .expect(201)
        .json()
        .get("rental")
        .get("id")
        .asText();
  }

  static JsonNode awaitStatus(ApiClient api, ApiClient.Customer renter, String id, String status) {
    JsonNode[] last = new JsonNode[1];
    eventually(
        WAIT,
        () -> {
          last[0] = api.get("/v1/rentals/" + id, renter.apiKey()).expect(200).json();
          assertEquals(status, last[0].get("status").asText(), last[0].toString());
        });
    return last[0];
  }

  static int freePort() throws IOException {
    return TestPorts.free();
  }
}
