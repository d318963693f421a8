package dev.tickmark.node;

import static org.junit.jupiter.api.Assertions.assertEquals;

import com.fasterxml.jackson.databind.JsonNode;
import dev.tickmark.agent.Agent;
import dev.tickmark.persistence.TestDatabase;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Nobody rents their own host: a provider who is also a renter, with its own host the only capacity
 * in the region, waits and ends {@code no_capacity}; another renter gets that host at once.
 */
class SelfDealingIntegrationTest {
  private static Node node;
  private static ApiClient api;
  private static Agent agent;

  @BeforeAll
  static void start() throws Exception {
    node =
        Node.start(RentingSupport.renting(TestNodes.settings(TestDatabase.fresh("self_dealing"))));
    api = new ApiClient(node.baseUrl());
  }

  @AfterAll
  static void stop() throws Exception {
    if (agent != null) agent.close();
    if (node != null) node.close();
  }

  @Test
  void aProviderIsNeverMatchedToItsOwnHost() throws Exception {
    ApiClient.Customer provider = RentingSupport.renter(api, "Provider and renter", "50");
    Path state = Files.createTempDirectory("tickmark-self-dealing");
    agent = RentingSupport.listedHost(node, api, provider, state, "eu-nl", 1);

    JsonNode own = launch(provider);
    assertEquals("pending", own.get("status").asText());
    JsonNode ended = RentingSupport.awaitStatus(api, provider, own.get("id").asText(), "ended");
    assertEquals("no_capacity", ended.get("end_reason").asText(), ended.toString());
    assertEquals(0, ended.get("billed_seconds").asLong());

    ApiClient.Customer renter = RentingSupport.renter(api, "Someone else", "50");
    JsonNode other = launch(renter);
    JsonNode running = RentingSupport.awaitStatus(api, renter, other.get("id").asText(), "running");
    assertEquals("eu-nl", running.get("region").asText(), running.toString());
  }

  private static JsonNode launch(ApiClient.Customer who) {
    return api.post(
            "/v1/rentals",
            who.apiKey(),
            "{\"gpu\":\"h100-80gb\",\"count\":1,\"region\":\"eu-nl\","
                + "\"max_price_per_gpu_hour\":\"3.00\",\"image\":\"ubuntu:24.04\","
                + "\"command\":[\"sleep\",\"3600\"],\"wait_seconds\":3}")
        .expect(201)
        .json()
        .get("rental");
  }
}
