package dev.tickmark.node;

import static dev.tickmark.node.Eventually.eventually;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import dev.tickmark.node.ApiClient.Customer;
import dev.tickmark.node.ApiClient.Reply;
import dev.tickmark.persistence.TestDatabase;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Issue 17 item 5: one account cannot flood the market with rentals. A real node on PostgreSQL with
 * {@code tickmark.accounts.max-live-rentals = 2} and no capacity at all: two launches wait
 * (pending), the third is answered 429 {@code too_many_rentals}, charges nothing and leaves no
 * rental live; once one of the two is stopped, a launch succeeds again. Another account is not
 * affected by the first one's cap.
 */
class RentalCapIntegrationTest {
  private static final Set<String> LIVE = Set.of("pending", "provisioning", "running", "stopping");

  private static Node node;
  private static ApiClient api;

  @BeforeAll
  static void startNode() throws Exception {
    node =
        Node.start(
            TestNodes.settings(TestDatabase.fresh("rental_cap"))
                .withConfig("tickmark.accounts.max-live-rentals", 2));
    api = new ApiClient(node.baseUrl());
  }

  @AfterAll
  static void stopNode() throws Exception {
    if (node != null) node.close();
  }

  @Test
  void aLaunchPastTheAccountsCapOnLiveRentalsIsRefusedWith429AndChargesNothing() {
    Customer renter = RentingSupport.renter(api, "Flooder", "50");
    String first = launch(renter).expect(201).json().get("rental").get("id").asText();
    String second = launch(renter).expect(201).json().get("rental").get("id").asText();
    assertEquals("pending", rental(renter, first).get("status").asText());
    assertEquals("pending", rental(renter, second).get("status").asText());
    JsonNode before = api.account(renter.apiKey());

    Reply refused = launch(renter).expectProblem(429, "too_many_rentals");
    assertTrue(refused.text("detail").contains("live rentals"), refused.body());

    JsonNode after = api.account(renter.apiKey());
    assertEquals(before.get("balance").asText(), after.get("balance").asText(), after.toString());
    assertEquals(before.get("held").asText(), after.get("held").asText(), after.toString());
    assertEquals(List.of(first, second).stream().sorted().toList(), liveRentals(renter));

    // another account has its own cap
    Customer other = RentingSupport.renter(api, "Someone else", "50");
    launch(other).expect(201);

    // stopping one makes room (its hold is released as it ends)
    api.post("/v1/rentals/" + first + "/stop", renter.apiKey(), "{}").expect(202);
    RentingSupport.awaitStatus(api, renter, first, "ended");
    String[] third = new String[1];
    eventually(
        Duration.ofSeconds(20),
        () -> third[0] = launch(renter).expect(201).json().get("rental").get("id").asText());
    assertEquals("pending", rental(renter, third[0]).get("status").asText());
    launch(renter).expectProblem(429, "too_many_rentals");
  }

  /** Waits for capacity that never comes: nothing is listed on this node. */
  private static Reply launch(Customer who) {
    return api.post(
        "/v1/rentals",
        who.apiKey(),
        "{\"gpu\":\"h100-80gb\",\"count\":1,\"region\":\"eu-nl\","
            + "\"max_price_per_gpu_hour\":\"3.00\",\"image\":\"ubuntu:24.04\","
            + "\"command\":[\"sleep\",\"3600\"],\"wait_seconds\":600}");
  }

  private static JsonNode rental(Customer who, String id) {
    return api.get("/v1/rentals/" + id, who.apiKey()).expect(200).json();
  }

  private static List<String> liveRentals(Customer who) {
    List<String> live = new ArrayList<>();
    for (JsonNode r :
        api.get("/v1/rentals?limit=100", who.apiKey()).expect(200).json().get("rentals"))
      if (LIVE.contains(r.get("status").asText())) live.add(r.get("id").asText());
    return live.stream().sorted().toList();
  }
}
