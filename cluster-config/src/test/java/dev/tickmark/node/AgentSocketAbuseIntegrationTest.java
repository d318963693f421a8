package dev.tickmark.node;

import static dev.tickmark.node.Eventually.eventually;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import dev.tickmark.node.AgentTestClient.Refusal;
import dev.tickmark.node.ApiClient.Customer;
import dev.tickmark.node.HostTestSupport.Registered;
import dev.tickmark.wire.AgentFrame;
import dev.tickmark.wire.Ed25519;
import dev.tickmark.wire.Frames;
import java.nio.charset.StandardCharsets;
import java.security.KeyPair;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Abuse of the agent websocket on a real node: refused upgrades, malformed, binary, oversized,
 * out-of-order, badly signed and flooding frames. Each ends only the offending session, with the
 * documented {@code error} code; the node stays healthy and a well-behaved host, heartbeating all
 * along on its own session, stays connected and online throughout (the class outlives its 3 s
 * heartbeat timeout several times over, so its heartbeats are what keeps it online).
 */
class AgentSocketAbuseIntegrationTest {
  private static Node node;
  private static ApiClient api;
  private static Customer provider;

  /** The well-behaved host: verified, heartbeating every 500 ms from the first test to the last. */
  private static Registered good;

  /** The abused host: registered once, its credential reused for every abusive session. */
  private static Registered target;

  @BeforeAll
  static void start() throws Exception {
    node = HostTestSupport.startNode("agent_abuse");
    api = new ApiClient(node.baseUrl());
    provider = api.signUp("abuse-provider");
    good = HostTestSupport.verifiedHost(node, api, provider, "eu-nl");
    target = HostTestSupport.register(node, api, provider, "eu-de");
    target.agent().close();
  }

  @AfterAll
  static void stop() throws Exception {
    if (good != null) good.agent().close();
    if (node != null) node.close();
  }

  /** After every abuse: the node answers, and the good session is still open, silent and online. */
  @AfterEach
  void nodeAndOtherSessionsUnharmed() {
    api.get("/health", null).expect(200);
    assertFalse(
        good.agent().isClosed(),
        "the well-behaved session was closed: " + good.agent().closed().getNow(null));
    assertNull(good.agent().poll(Duration.ZERO), "the well-behaved session got a frame");
    Instant before = lastHeartbeat();
    eventually(
        Duration.ofSeconds(5),
        () -> {
          JsonNode host = HostTestSupport.host(api, provider, good.hostId());
          assertTrue(host.get("online").asBoolean(), host.toString());
          assertEquals("verified", host.get("status").asText(), host.toString());
          assertTrue(
              Instant.parse(host.get("last_heartbeat_at").asText()).isAfter(before),
              "heartbeats still land: " + host);
        });
  }

  private static Instant lastHeartbeat() {
    return Instant.parse(
        HostTestSupport.host(api, provider, good.hostId()).get("last_heartbeat_at").asText());
  }

  /** A new session of the abused host, authenticated by its credential, before hello. */
  private static AgentTestClient targetSession() {
    return AgentTestClient.connect(node, target.credential(), target.key());
  }

  /** A new session of the abused host past hello and welcome. */
  private static AgentTestClient welcomedTargetSession() {
    AgentTestClient agent = targetSession();
    JsonNode welcome = agent.handshake();
    assertEquals(target.hostId(), welcome.get("host_id").asText());
    assertFalse(welcome.has("host_credential"), "a credential is handed out once: " + welcome);
    return agent;
  }

  // ---- refused upgrades -----------------------------------------------------------------------

  @Test
  void anUpgradeWithoutAuthorizationIsRefusedWith401() {
    Refusal refusal = AgentTestClient.refusedUpgrade(node, null);
    assertEquals(401, refusal.status());
    // The same request without the upgrade headers shows the problem the refusal carries.
    api.get("/v1/agent/connect", null).expectProblem(401, "unauthorized");
  }

  @Test
  void anUnknownTokenOrCredentialIsRefusedWith401() {
    String secret = "0123456789abcdef0123456789abcdef0123456789abcdef";
    // a well-formed registration token for a host nobody invited
    assertEquals(
        401,
        AgentTestClient.refusedUpgrade(
                node, "Bearer tmkreg_host_000000000000000000000000_" + secret)
            .status());
    // a well-formed credential for a host nobody invited
    assertEquals(
        401,
        AgentTestClient.refusedUpgrade(
                node, "Bearer tmkhost_host_000000000000000000000000_" + secret)
            .status());
    // the real host with a wrong credential secret
    assertEquals(
        401,
        AgentTestClient.refusedUpgrade(node, "Bearer tmkhost_" + target.hostId() + "_" + secret)
            .status());
    // a customer API key is not an agent credential
    assertEquals(401, AgentTestClient.refusedUpgrade(node, "Bearer " + provider.apiKey()).status());
    api.get("/v1/agent/connect", "tmkhost_" + target.hostId() + "_" + secret)
        .expectProblem(401, "unauthorized");
  }

  @Test
  void aMalformedBearerIsRefusedWith401() {
    for (String header :
        new String[] {
          "Bearer",
          "Bearer ",
          "Basic dXNlcjpwYXNz",
          "Bearer tmkhost_",
          "Bearer tmkhost_" + target.hostId(),
          "Bearer tmkhost_" + target.hostId() + "_",
          "Bearer tmkreg__abc",
          "bearer-" + target.credential(),
          "Bearer " + target.credential() + "x".repeat(300)
        }) {
      assertEquals(401, AgentTestClient.refusedUpgrade(node, header).status(), header);
    }
    api.get("/v1/agent/connect", "not-a-token").expectProblem(401, "unauthorized");
  }

  // ---- frames that end the session ------------------------------------------------------------

  @Test
  void garbageTextAfterTheChallengeIsMalformed() {
    try (AgentTestClient agent = targetSession()) {
      agent.expect("challenge");
      agent.sendText("this is not json {");
      agent.expectErrorAndClose("malformed_frame");
    }
  }

  @Test
  void jsonThatIsNoFrameIsMalformed() {
    try (AgentTestClient agent = targetSession()) {
      agent.expect("challenge");
      agent.sendText("{\"type\":\"launch_missiles\"}");
      agent.expectErrorAndClose("malformed_frame");
    }
    try (AgentTestClient agent = welcomedTargetSession()) {
      // a known frame with a field the protocol does not have
      agent.sendText(
          "{\"type\":\"heartbeat\",\"seq\":1,\"at\":\"2026-01-01T00:00:00Z\",\"gpus\":[],\"rentals\":[],\"evil\":true}");
      agent.expectErrorAndClose("malformed_frame");
    }
  }

  @Test
  void aBinaryFrameIsRefused() {
    try (AgentTestClient agent = targetSession()) {
      agent.expect("challenge");
      agent.sendBinary("{\"type\":\"heartbeat\"}".getBytes(StandardCharsets.UTF_8));
      agent.expectErrorAndClose("malformed_frame");
    }
  }

  @Test
  void aFrameOver64KiBIsTooLarge() {
    try (AgentTestClient agent = welcomedTargetSession()) {
      // exactly at the limit is still a frame: a heartbeat padded with whitespace to 65 536
      // characters
      String heartbeat = Frames.write(agent.heartbeatFrame());
      String atLimit = heartbeat + " ".repeat(64 * 1024 - heartbeat.length());
      assertEquals(65536, atLimit.length());
      agent.sendText(atLimit);
      assertNull(agent.poll(Duration.ofMillis(500)), "a frame of exactly 64 KiB is accepted");
      assertFalse(agent.isClosed());
      // one character more is not
      String over = Frames.write(agent.heartbeatFrame());
      agent.sendText(over + " ".repeat(64 * 1024 + 1 - over.length()));
      agent.expectErrorAndClose("frame_too_large");
    }
    try (AgentTestClient agent = targetSession()) {
      agent.expect("challenge");
      agent.sendText("x".repeat(200_000));
      agent.expectErrorAndClose("frame_too_large");
    }
  }

  @Test
  void aFragmentedMessageIsOneFrameAndItsLimitIsTheWhole() {
    try (AgentTestClient agent = welcomedTargetSession()) {
      // a heartbeat in continuation frames arrives as one (streamed) message and is accepted
      String heartbeat = Frames.write(agent.heartbeatFrame());
      agent.sendTextInFragments(heartbeat + " ".repeat(60_000), 7_000);
      assertNull(
          agent.poll(Duration.ofMillis(500)), "a fragmented frame under the limit is accepted");
      assertFalse(agent.isClosed());
      // fragments that add up to more than 64 KiB are one frame too large, whatever their sizes
      agent.sendTextInFragments(Frames.write(agent.heartbeatFrame()) + " ".repeat(300_000), 10_000);
      agent.expectErrorAndClose("frame_too_large");
    }
    try (AgentTestClient agent = targetSession()) {
      agent.expect("challenge");
      agent.sendTextInFragments("y".repeat(1_000_000), 50_000);
      agent.expectErrorAndClose("frame_too_large");
    }
  }

  @Test
  void aHeartbeatBeforeHelloIsUnexpected() {
    try (AgentTestClient agent = targetSession()) {
      agent.expect("challenge");
      agent.heartbeat();
      agent.expectErrorAndClose("unexpected_frame");
    }
  }

  @Test
  void aSecondHelloOrAnEngineFrameFromTheAgentIsUnexpected() {
    try (AgentTestClient agent = welcomedTargetSession()) {
      agent.send(
          new AgentFrame.Hello("AAAA", "test", Ed25519.encodePublic(target.key().getPublic())));
      agent.expectErrorAndClose("unexpected_frame");
    }
    try (AgentTestClient agent = welcomedTargetSession()) {
      agent.send(new AgentFrame.Welcome(target.hostId(), null, 1));
      agent.expectErrorAndClose("unexpected_frame");
    }
  }

  @Test
  void malformedLogsAndLogsOfARentalNotOnThisHostCloseThatSessionOnly() {
    String at = Instant.now().toString();
    List<List<AgentFrame.LogLine>> malformed =
        List.of(
            List.of(), // no lines
            List.of(
                new AgentFrame.LogLine(2, at, "stdout", "b"),
                new AgentFrame.LogLine(1, at, "stdout", "a")), // seq not increasing
            List.of(new AgentFrame.LogLine(0, at, "stdout", "a")), // seq not positive
            List.of(new AgentFrame.LogLine(1, at, "video", "a")), // no such stream
            List.of(new AgentFrame.LogLine(1, "yesterday", "stdout", "a")), // not an instant
            List.of(new AgentFrame.LogLine(1, at, "stdout", "x".repeat(40_001)))); // too long
    for (List<AgentFrame.LogLine> lines : malformed) {
      try (AgentTestClient agent = welcomedTargetSession()) {
        agent.send(new AgentFrame.Logs("rnt_whatever", lines));
        agent.expectErrorAndClose("malformed_frame");
      }
    }
    try (AgentTestClient agent = welcomedTargetSession()) {
      agent.send(
          new AgentFrame.Logs(
              "rnt_notonthishost", List.of(new AgentFrame.LogLine(1, at, "stdout", "a"))));
      agent.expectErrorAndClose("not_found");
    }
    try (AgentTestClient agent = welcomedTargetSession()) {
      agent.send(new AgentFrame.LogsAck("rnt_whatever", 1)); // an engine frame
      agent.expectErrorAndClose("unexpected_frame");
    }
  }

  @Test
  void aHelloWithABadSignatureIsRefused() {
    // signed by the right key, but over another nonce
    try (AgentTestClient agent = targetSession()) {
      agent.expect("challenge");
      agent.send(
          new AgentFrame.Hello(
              Ed25519.sign(target.key().getPrivate(), Ed25519.helloMessage("another nonce")),
              "test",
              Ed25519.encodePublic(target.key().getPublic())));
      agent.expectErrorAndClose("bad_signature");
    }
    // signed by another key than the one it names
    try (AgentTestClient agent = targetSession()) {
      String nonce = agent.expect("challenge").get("nonce").asText();
      KeyPair other = Ed25519.generate();
      agent.send(
          new AgentFrame.Hello(
              Ed25519.sign(other.getPrivate(), Ed25519.helloMessage(nonce)),
              "test",
              Ed25519.encodePublic(target.key().getPublic())));
      agent.expectErrorAndClose("bad_signature");
    }
    // not a signature at all
    try (AgentTestClient agent = targetSession()) {
      agent.expect("challenge");
      agent.send(
          new AgentFrame.Hello(
              "%%% not base64 %%%", "test", Ed25519.encodePublic(target.key().getPublic())));
      agent.expectErrorAndClose("bad_signature");
    }
  }

  @Test
  void aFloodOfHeartbeatsIsRateLimited() {
    try (AgentTestClient agent = welcomedTargetSession()) {
      int sent = 0;
      for (int i = 0; i < 200 && !agent.isClosed(); i++) {
        if (!agent.heartbeat()) break;
        sent++;
      }
      JsonNode error = agent.expectErrorAndClose("rate_limited");
      assertTrue(sent > 40, "the burst of 40 passes before the limit: sent " + sent + ", " + error);
    }
    // the host itself is not harmed: a new, calm session is welcomed
    try (AgentTestClient agent = welcomedTargetSession()) {
      assertTrue(agent.heartbeat());
      assertNull(agent.poll(Duration.ofMillis(300)));
    }
  }

  @Test
  void aSessionThatNeverSaysHelloIsClosedAfterTheHelloTimeout() {
    try (AgentTestClient agent = targetSession()) {
      agent.expect("challenge");
      long start = System.nanoTime();
      agent.expectErrorAndClose("unauthorized");
      Duration waited = Duration.ofNanos(System.nanoTime() - start);
      assertTrue(
          waited.compareTo(HostTestSupport.HELLO_TIMEOUT.minusMillis(300)) >= 0,
          "closed only after the hello timeout: " + waited);
    }
  }

  @Test
  void aSessionThatNeverSaysHelloDoesNotBlockOthers() {
    // Several idle sessions at once, before hello, next to the good one: they hold nothing of the
    // host.
    AgentTestClient[] idle = new AgentTestClient[5];
    try {
      for (int i = 0; i < idle.length; i++) {
        idle[i] = targetSession();
        idle[i].expect("challenge");
      }
      try (AgentTestClient agent = welcomedTargetSession()) {
        JsonNode verdict = agent.verify(AgentTestClient.simulatedReport());
        assertNotNull(verdict.get("checks"));
      }
    } finally {
      for (AgentTestClient a : idle) if (a != null) a.close();
    }
  }
}
