package dev.tickmark.node;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.tickmark.node.AgentAuthProbe.Answer;
import dev.tickmark.node.ApiClient.Customer;
import dev.tickmark.node.HostTestSupport.Registered;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Failed agent authentications are throttled per client address: a bucket of {@link #BURST}
 * failures, refilled so slowly here (one a minute) that no refill happens during a test. Each test
 * connects from its own loopback address, so each is a client of its own.
 */
class AgentAuthThrottleIntegrationTest {
  private static final int BURST = 5;
  private static final String MALFORMED = "Bearer tmkhost_0123456789abcdef01234567_x";

  private static Node node;
  private static Registered host;

  @BeforeAll
  static void start() throws Exception {
    node =
        HostTestSupport.startNode(
            "agent_auth_throttle",
            Map.of(
                "tickmark.agent-socket.failed-auth.per-second",
                1.0 / 60,
                "tickmark.agent-socket.failed-auth.burst",
                BURST));
    ApiClient api = new ApiClient(node.baseUrl());
    Customer provider = api.signUp("throttle-provider");
    host = HostTestSupport.register(node, api, provider, "eu-nl");
    host.agent().close();
  }

  @AfterAll
  static void stop() throws Exception {
    if (node != null) node.close();
  }

  @Test
  void anAddressPastItsFailedAuthenticationsIsAnswered429() {
    String client = "127.0.0.11";
    for (int i = 0; i < BURST; i++) {
      Answer refused = AgentAuthProbe.connect(node, client, MALFORMED, true);
      assertEquals(401, refused.status(), refused.toString());
    }
    Answer throttled = AgentAuthProbe.connect(node, client, MALFORMED, true);
    assertEquals(429, throttled.status(), throttled.toString());
    assertTrue(
        throttled.headers().get("content-type").startsWith("application/problem+json"),
        throttled.toString());
    assertTrue(throttled.body().contains("\"code\":\"rate_limited\""), throttled.body());
    long retryAfter = Long.parseLong(throttled.headers().get("retry-after"));
    assertTrue(retryAfter >= 1 && retryAfter <= 60, "Retry-After " + retryAfter);
    // a well-formed guess and the real credential from that address wait their turn too
    assertEquals(
        429,
        AgentAuthProbe.connect(node, client, "Bearer " + wrongSecret(), true).status(),
        "a guess of the real host's secret");
    assertEquals(
        429, AgentAuthProbe.connect(node, client, "Bearer " + host.credential(), true).status());
  }

  @Test
  void theThrottleIsPerAddress() {
    String noisy = "127.0.0.21";
    for (int i = 0; i <= BURST; i++) AgentAuthProbe.connect(node, noisy, MALFORMED, false);
    assertEquals(429, AgentAuthProbe.connect(node, noisy, MALFORMED, false).status());
    // another address is unaffected: refused for what it sends, and its host connects
    String other = "127.0.0.22";
    assertEquals(401, AgentAuthProbe.connect(node, other, MALFORMED, false).status());
    Answer upgraded = AgentAuthProbe.connect(node, other, "Bearer " + host.credential(), true);
    assertEquals(101, upgraded.status(), upgraded.toString());
  }

  @Test
  void successfulAuthenticationsDoNotDrainTheBucket() {
    String client = "127.0.0.31";
    for (int i = 0; i < 3 * BURST; i++) {
      Answer upgraded = AgentAuthProbe.connect(node, client, "Bearer " + host.credential(), true);
      assertEquals(101, upgraded.status(), "connect " + i + ": " + upgraded);
    }
    // the failures still have their whole bucket
    for (int i = 0; i < BURST; i++)
      assertEquals(401, AgentAuthProbe.connect(node, client, MALFORMED, false).status());
    assertEquals(429, AgentAuthProbe.connect(node, client, MALFORMED, false).status());
  }

  /** The real host's id with a secret of the right shape that is not its own. */
  private static String wrongSecret() {
    return "tmkhost_" + host.hostId() + "_" + "0".repeat(48);
  }
}
