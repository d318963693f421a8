package dev.tickmark.node;

import static dev.tickmark.node.Eventually.eventually;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.tickmark.persistence.TestDatabase;
import dev.tickmark.wire.Ed25519;
import java.io.InputStream;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * One renter cannot hold more long-lived streams than its share (issue 17, item 5): past the
 * per-rental and per-account caps its event and log streams are refused with 429 {@code
 * too_many_streams}, a closed stream gives its place back, another renter is not affected, and an
 * agent still connects while the renter holds all it may.
 */
class StreamLimitsIntegrationTest {
  static Node node;
  static ApiClient api;
  static final HttpClient HTTP = HttpClient.newHttpClient();

  @BeforeAll
  static void start() throws Exception {
    node =
        Node.start(
            RentingSupport.renting(TestNodes.settings(TestDatabase.fresh("stream_limits")))
                .withConfig("tickmark.http.streams.per-account", 4)
                .withConfig("tickmark.http.streams.per-rental", 3));
    api = new ApiClient(node.baseUrl());
  }

  @AfterAll
  static void stop() throws Exception {
    if (node != null) node.close();
  }

  @Test
  void aRenterPastItsStreamCapsIsRefusedWhileOthersAndAgentsStillConnect() throws Exception {
    ApiClient.Customer renter = RentingSupport.renter(api, "Stream hog", "50");
    String first = waitingRental(renter);
    String second = waitingRental(renter);
    List<HttpResponse<InputStream>> held = new ArrayList<>();
    try {
      for (int i = 0; i < 3; i++) held.add(expect(200, renter, "/v1/rentals/" + first + "/events"));
      HttpResponse<InputStream> fourthOnRental = open(renter, "/v1/rentals/" + first + "/events");
      assertEquals(429, fourthOnRental.statusCode());
      assertTrue(body(fourthOnRental).contains("too_many_streams"));

      held.add(expect(200, renter, "/v1/rentals/" + second + "/logs?follow=true"));
      HttpResponse<InputStream> fifthOnAccount = open(renter, "/v1/rentals/" + second + "/events");
      assertEquals(429, fifthOnAccount.statusCode(), "the account's cap (4) across its rentals");
      assertTrue(body(fifthOnAccount).contains("too_many_streams"));

      // another renter is not held back, and an agent still connects
      ApiClient.Customer other = RentingSupport.renter(api, "Someone else", "50");
      String theirs = waitingRental(other);
      held.add(expect(200, other, "/v1/rentals/" + theirs + "/events"));
      ApiClient.Customer provider = api.signUp("Provider");
      String token =
          HostTestSupport.registrationToken(api, provider, "eu-nl").get("token").asText();
      try (AgentTestClient agent = AgentTestClient.connect(node, token, Ed25519.generate())) {
        assertTrue(agent.handshake().has("host_id"), "the agent is welcomed");
      }

      // a stream the client closes gives its place back: at the latest once the node's next
      // keep-alive (every 15 s) finds the connection gone
      held.remove(0).body().close();
      eventually(
          Duration.ofSeconds(45),
          () -> {
            HttpResponse<InputStream> again = open(renter, "/v1/rentals/" + first + "/events");
            held.add(again);
            assertEquals(200, again.statusCode());
          });
    } finally {
      for (HttpResponse<InputStream> r : held) r.body().close();
    }
  }

  /** A rental that waits for capacity (there is none): it exists and has event and log streams. */
  static String waitingRental(ApiClient.Customer renter) {
    return api.post(
            "/v1/rentals",
            renter.apiKey(),
            "{\"gpu\":\"h100-80gb\",\"count\":1,\"max_price_per_gpu_hour\":\"3.00\","
                + "\"image\":\"ubuntu:24.04\",\"wait_seconds\":600}")
        .expect(201)
        .json()
        .get("rental")
        .get("id")
        .asText();
  }

  static HttpResponse<InputStream> open(ApiClient.Customer who, String path) {
    try {
      return HTTP.send(
          HttpRequest.newBuilder(URI.create(node.baseUrl() + path))
              .header("Authorization", "Bearer " + who.apiKey())
              .header("Accept", "text/event-stream")
              .timeout(Duration.ofSeconds(20))
              .build(),
          HttpResponse.BodyHandlers.ofInputStream());
    } catch (java.io.IOException e) {
      throw new AssertionError(path + ": " + e, e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new AssertionError(e);
    }
  }

  static HttpResponse<InputStream> expect(int status, ApiClient.Customer who, String path) {
    HttpResponse<InputStream> response = open(who, path);
    assertEquals(status, response.statusCode(), path);
    return response;
  }

  static String body(HttpResponse<InputStream> response) throws java.io.IOException {
    try (InputStream in = response.body()) {
      return new String(in.readAllBytes(), java.nio.charset.StandardCharsets.UTF_8);
    }
  }
}
