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
import java.util.ArrayList;
import java.util.HashSet;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Semaphore;
import java.util.concurrent.ThreadLocalRandom;
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
    // Every test here fails authentications on purpose, the flood below 10 000 of them: the
    // per-address throttle (AgentAuthThrottleIntegrationTest) is opened wide so each attempt
    // reaches the shape check.
    node =
        HostTestSupport.startNode(
            "agent_abuse",
            Map.of(
                "tickmark.agent-socket.failed-auth.per-second", 1_000_000,
                "tickmark.agent-socket.failed-auth.burst", 1_000_000));
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

  /**
   * Tokens and credentials of a shape the engine never hands out (a host id without {@code host_}
   * or with a non-hex digit, a secret too short, too long or upper-case), each naming a fresh id:
   * 10 000 of them are all refused 401 and start no {@code Host} entity, neither for the ids they
   * name nor any other; the real host still connects.
   */
  @Test
  void tenThousandMalformedConnectsWakeNoHostEntity() throws Exception {
    Set<String> before = AgentAuthProbe.hostEntities(node);
    int attempts = 10_000;
    List<String> named = new ArrayList<>(attempts);
    List<CompletableFuture<java.net.http.HttpResponse<String>>> answers = new ArrayList<>();
    java.net.http.HttpClient client =
        java.net.http.HttpClient.newBuilder()
            .version(java.net.http.HttpClient.Version.HTTP_1_1)
            .build();
    Semaphore inFlight = new Semaphore(32);
    for (int i = 0; i < attempts; i++) {
      String id = hex(12);
      String bearer =
          switch (i % 5) {
            case 0 -> "tmkhost_" + id + "_x"; // the probe: any id, any secret
            case 1 -> "tmkhost_host_" + id + "_" + hex(24).substring(1); // secret 47 digits
            case 2 -> "tmkreg_host_" + id + "_" + hex(24).toUpperCase(); // secret not lower hex
            case 3 -> "tmkhost_host_" + id.substring(1) + "z_" + hex(24); // id not hex
            default -> "tmkreg_host_" + id + "_" + hex(24) + "0"; // secret 49 digits
          };
      // the entity id the old edge asked sharding for: everything between prefix and last '_'
      String rest = bearer.substring(bearer.indexOf('_') + 1);
      named.add(rest.substring(0, rest.lastIndexOf('_')));
      inFlight.acquire();
      answers.add(
          client
              .sendAsync(
                  java.net.http.HttpRequest.newBuilder(
                          java.net.URI.create(node.baseUrl() + "/v1/agent/connect"))
                      .header("Authorization", "Bearer " + bearer)
                      .timeout(Duration.ofSeconds(30))
                      .GET()
                      .build(),
                  java.net.http.HttpResponse.BodyHandlers.ofString())
              .whenComplete((r, t) -> inFlight.release()));
    }
    Map<Integer, Integer> statuses = new java.util.TreeMap<>();
    for (var answer : answers) statuses.merge(answer.get().statusCode(), 1, Integer::sum);
    Set<String> after = AgentAuthProbe.hostEntities(node);
    Set<String> woken = new HashSet<>(after);
    woken.removeAll(before);
    assertTrue(
        woken.isEmpty(),
        woken.size()
            + " Host entities started by malformed connects, e.g. "
            + woken.stream().limit(5).toList());
    Set<String> asked = new HashSet<>(named);
    asked.retainAll(after);
    assertTrue(asked.isEmpty(), "entities for ids the malformed tokens name: " + asked.size());
    assertEquals(Map.of(401, attempts), statuses, "every malformed connect is refused 401");
    api.get("/v1/agent/connect", "tmkhost_" + hex(12) + "_x").expectProblem(401, "unauthorized");
    // and the real host still connects
    try (AgentTestClient agent = welcomedTargetSession()) {
      assertFalse(agent.isClosed());
    }
  }

  private static String hex(int bytes) {
    byte[] b = new byte[bytes];
    ThreadLocalRandom.current().nextBytes(b);
    return HexFormat.of().formatHex(b);
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

  /**
   * {@code listed_from} is compared with the host's heartbeats to prove a workload gone, so one
   * that is no instant is a malformed frame, like a malformed {@code at}.
   */
  @Test
  void aRentalStartedWhoseListedFromIsNoInstantIsMalformed() {
    String at = Instant.now().toString();
    for (AgentFrame.RentalStarted started :
        List.of(
            new AgentFrame.RentalStarted("rnt_whatever", at, "soon"),
            new AgentFrame.RentalStarted("rnt_whatever", "now", at))) {
      try (AgentTestClient agent = welcomedTargetSession()) {
        agent.send(started);
        agent.expectErrorAndClose("malformed_frame");
      }
    }
  }

  /** An exit status is 0-255; anything else is no report of one, and closes that session. */
  @Test
  void aRentalStoppedWhoseExitCodeIsNoExitStatusIsMalformed() {
    String at = Instant.now().toString();
    for (int code : List.of(-1, 256, Integer.MAX_VALUE)) {
      try (AgentTestClient agent = welcomedTargetSession()) {
        agent.send(new AgentFrame.RentalStopped("rnt_whatever", at, null, true, code));
        agent.expectErrorAndClose("malformed_frame");
      }
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
