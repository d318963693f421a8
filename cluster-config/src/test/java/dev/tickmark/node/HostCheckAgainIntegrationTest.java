package dev.tickmark.node;

import static dev.tickmark.node.Eventually.eventually;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import dev.tickmark.agent.Agent;
import dev.tickmark.agent.AgentConfig;
import dev.tickmark.wire.AgentFrame;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Check again against a real node and PostgreSQL: {@code POST /v1/hosts/{id}/verify} makes the
 * agent measure again, and its new report is verified as at registration — a host that failed
 * passes and is listable again; the real agent answers with a second verification.
 */
class HostCheckAgainIntegrationTest {
  static final Duration WAIT = Duration.ofSeconds(30);

  static Node node;
  static ApiClient api;

  @TempDir Path temp;

  @BeforeAll
  static void startNode() throws Exception {
    // the real agent reports this machine's disk, which a loaded CI machine may write slowly
    node =
        HostTestSupport.startNode(
            "check_again", Map.of("tickmark.verification.min-disk-write-mib-per-s", 10));
    api = new ApiClient(node.baseUrl());
  }

  @AfterAll
  static void stopNode() throws Exception {
    if (node != null) node.close();
  }

  @Test
  void aFailedHostChecksAgainPassesAndIsListedWhileOthersAndOfflineHostsAreRefused() {
    ApiClient.Customer provider = api.signUp("Provider");
    HostTestSupport.Registered host = HostTestSupport.register(node, api, provider, "eu-fr");
    String path = "/v1/hosts/" + host.hostId() + "/verify";
    AgentTestClient agent = host.agent();
    // An old driver fails the first report.
    JsonNode first = agent.verify(AgentTestClient.report(true, "470.0"));
    assertEquals("failed", first.get("status").asText(), first.toString());
    agent.startHeartbeats(HostTestSupport.HEARTBEAT_PERIOD);
    JsonNode failed = HostTestSupport.host(api, provider, host.hostId());
    assertEquals("failed", failed.get("status").asText());
    Instant failedAt = Instant.parse(failed.get("last_verification_at").asText());

    ApiClient.Customer other = api.signUp("Other provider");
    api.post(path, other.apiKey(), "").expectProblem(404, "not_found");

    JsonNode requested = api.post(path, provider.apiKey(), "").expect(202).json();
    assertEquals(host.hostId(), requested.get("id").asText());
    assertEquals("failed", requested.get("status").asText());
    assertFalse(requested.get("verification_requested_at").isNull(), requested.toString());
    JsonNode measure = agent.expect("measure_again");
    assertTrue(measure.hasNonNull("reason"), measure.toString());
    // A second request while the first is unanswered is the same request: nothing more is sent.
    JsonNode again = api.post(path, provider.apiKey(), "").expect(202).json();
    assertEquals(
        requested.get("verification_requested_at"), again.get("verification_requested_at"));

    // The agent measures again (the driver was upgraded meanwhile) and resubmits.
    JsonNode second = agent.verify(AgentTestClient.simulatedReport());
    assertEquals("verified", second.get("status").asText(), second.toString());
    JsonNode verified = HostTestSupport.host(api, provider, host.hostId());
    assertEquals("verified", verified.get("status").asText());
    assertNull(nullIfJsonNull(verified.get("verification_requested_at")));
    assertTrue(
        Instant.parse(verified.get("last_verification_at").asText()).isAfter(failedAt),
        verified.toString());
    assertTrue(containsCheck(verified, "gpu[0].driver", "pass"), verified.toString());
    assertEquals(2, verified.get("cards").size());

    HostTestSupport.list(api, provider, host.hostId(), "2.50", null);
    eventually(
        HostTestSupport.READ_SIDE,
        () -> assertEquals(1, HostTestSupport.offersIn(api, "", "eu-fr").size()));

    // The agent goes away: nothing can measure again.
    agent.close();
    eventually(
        WAIT,
        () ->
            assertFalse(
                HostTestSupport.host(api, provider, host.hostId()).get("online").asBoolean()));
    api.post(path, provider.apiKey(), "").expectProblem(409, "host_offline");
  }

  @Test
  void theRealAgentMeasuresAgainAndIsVerifiedASecondTime() throws Exception {
    ApiClient.Customer provider = api.signUp("Agent provider");
    String token = HostTestSupport.registrationToken(api, provider, "eu-de").get("token").asText();
    try (Agent agent =
        Agent.start(
            AgentConfig.simulated(
                "ws://127.0.0.1:" + node.httpPort(),
                token,
                temp.resolve("agent"),
                "h100-80gb:2"))) {
      String hostId = agent.welcomed().get(WAIT.toSeconds(), TimeUnit.SECONDS).hostId();
      assertEquals("verified", agent.verified().get(WAIT.toSeconds(), TimeUnit.SECONDS).status());
      Instant firstAt =
          Instant.parse(
              HostTestSupport.host(api, provider, hostId).get("last_verification_at").asText());

      CompletableFuture<AgentFrame.VerificationResult> next = agent.nextVerification();
      api.post("/v1/hosts/" + hostId + "/verify", provider.apiKey(), "").expect(202);
      assertEquals("verified", next.get(WAIT.toSeconds(), TimeUnit.SECONDS).status());
      JsonNode after = HostTestSupport.host(api, provider, hostId);
      assertNull(nullIfJsonNull(after.get("verification_requested_at")), after.toString());
      assertTrue(
          Instant.parse(after.get("last_verification_at").asText()).isAfter(firstAt),
          after.toString());
      assertTrue(containsCheck(after, "disk_write", "pass"), after.toString());
    }
  }

  /** Whether the host's verification breakdown has {@code check} with {@code status}. */
  private static boolean containsCheck(JsonNode host, String check, String status) {
    for (JsonNode c : host.path("verification"))
      if (check.equals(c.path("check").asText()) && status.equals(c.path("status").asText()))
        return true;
    return false;
  }

  private static JsonNode nullIfJsonNull(JsonNode node) {
    return node == null || node.isNull() ? null : node;
  }
}
