package dev.tickmark.node;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import dev.tickmark.node.ApiClient.Customer;
import dev.tickmark.persistence.DatabaseSettings;
import dev.tickmark.persistence.TestDatabase;
import dev.tickmark.wire.Ed25519;
import java.security.KeyPair;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * What the host and agent integration tests share: a node that accepts simulated hosts, declares a
 * host offline after {@link #HEARTBEAT_TIMEOUT} and closes a session without hello after {@link
 * #HELLO_TIMEOUT}; and the provider steps that bring a host on line.
 */
final class HostTestSupport {
  static final Duration HEARTBEAT_TIMEOUT = Duration.ofSeconds(3);
  static final Duration HEARTBEAT_PERIOD = Duration.ofMillis(500);
  static final Duration READ_SIDE = Duration.ofSeconds(15);
  static final Duration HELLO_TIMEOUT = Duration.ofSeconds(2);

  private static final String TIMEOUT_KEY = "tickmark.hosts.heartbeat-timeout";
  private static final String INTERVAL_KEY = "tickmark.hosts.heartbeat-interval";
  private static final String HELLO_KEY = "tickmark.agent-socket.hello-timeout";

  private HostTestSupport() {}

  /**
   * Starts a node on a fresh database with simulated hosts allowed and the short timeouts above.
   */
  static Node startNode(String purpose) throws Exception {
    return startNode(purpose, Map.of());
  }

  /** The same, with these HOCON values overridden too. */
  static Node startNode(String purpose, Map<String, Object> config) throws Exception {
    DatabaseSettings db = TestDatabase.fresh(purpose);
    NodeSettings settings =
        NodeSettings.fromEnvironment(
                Map.of(
                    "TICKMARK_OPERATOR_TOKEN", TestNodes.OPERATOR_TOKEN,
                    "TICKMARK_PAYMENT_WEBHOOK_SECRET", TestNodes.WEBHOOK_SECRET,
                    "TICKMARK_ALLOW_SIMULATED_HOSTS", "true"))
            .withDatabase(db.url(), db.user(), db.password())
            .withPorts(0, -1, 0)
            .withExitJvmOnShutdown(false)
            // As every test node: a suite fires requests faster than the defaults allow (on a
            // quiet machine OpenApiIntegrationTest's sweep of paths passed 100 in a second).
            .withRateLimits(
                TestNodes.UNLIMITED_RATE,
                TestNodes.UNLIMITED_RATE,
                TestNodes.UNLIMITED_RATE,
                TestNodes.UNLIMITED_RATE)
            .withConfig(TIMEOUT_KEY, HEARTBEAT_TIMEOUT.toMillis() + "ms")
            .withConfig(INTERVAL_KEY, "1s")
            .withConfig(HELLO_KEY, HELLO_TIMEOUT.toMillis() + "ms");
    for (Map.Entry<String, Object> e : config.entrySet())
      settings = settings.withConfig(e.getKey(), e.getValue());
    Node node = Node.start(settings);
    try {
      assertEquals(HEARTBEAT_TIMEOUT, node.system().settings().config().getDuration(TIMEOUT_KEY));
      assertEquals(HELLO_TIMEOUT, node.system().settings().config().getDuration(HELLO_KEY));
      return node;
    } catch (AssertionError e) {
      node.close();
      throw e;
    }
  }

  /** {@code POST /v1/hosts/registration-tokens}: the token's JSON. */
  static JsonNode registrationToken(ApiClient api, Customer provider, String region) {
    return api.post(
            "/v1/hosts/registration-tokens",
            provider.apiKey(),
            "{\"region\":" + ApiClient.quote(region) + ",\"label\":\"rack-1/node-1\"}")
        .expect(201)
        .json();
  }

  /**
   * A registered host: its id, its agent's key and host credential, and the live session that
   * registered it.
   */
  record Registered(String hostId, KeyPair key, String credential, AgentTestClient agent) {}

  /** Token, connect, hello: a registered host whose first session is open (no report sent yet). */
  static Registered register(Node node, ApiClient api, Customer provider, String region) {
    JsonNode token = registrationToken(api, provider, region);
    KeyPair key = Ed25519.generate();
    AgentTestClient agent = AgentTestClient.connect(node, token.get("token").asText(), key);
    JsonNode welcome = agent.handshake();
    assertEquals(token.get("host_id").asText(), welcome.get("host_id").asText());
    String credential = welcome.get("host_credential").asText();
    return new Registered(welcome.get("host_id").asText(), key, credential, agent);
  }

  /** A registered, verified host whose agent heartbeats in the background. */
  static Registered verifiedHost(Node node, ApiClient api, Customer provider, String region) {
    Registered host = register(node, api, provider, region);
    JsonNode verdict = host.agent().verify(AgentTestClient.simulatedReport());
    assertEquals("verified", verdict.get("status").asText(), verdict.toString());
    host.agent().startHeartbeats(HEARTBEAT_PERIOD);
    return host;
  }

  /**
   * {@code PUT /v1/hosts/{id}/listing} with these prices (a null spot price offers on-demand only).
   */
  static JsonNode list(
      ApiClient api, Customer provider, String hostId, String onDemand, String spot) {
    String body =
        "{\"on_demand_price_per_gpu_hour\":"
            + ApiClient.quote(onDemand)
            + (spot == null
                ? ""
                : ",\"spot_price_per_gpu_hour\":"
                    + ApiClient.quote(spot)
                    + ",\"spot_notice_seconds\":300")
            + ",\"listed\":true}";
    return api.put("/v1/hosts/" + hostId + "/listing", provider.apiKey(), body).expect(200).json();
  }

  static JsonNode host(ApiClient api, Customer provider, String hostId) {
    return api.get("/v1/hosts/" + hostId, provider.apiKey()).expect(200).json();
  }

  /** The offers of {@code GET /v1/offers<query>} in {@code region}. */
  static List<JsonNode> offersIn(ApiClient api, String query, String region) {
    JsonNode offers = api.get("/v1/offers" + query, null).expect(200).json().get("offers");
    List<JsonNode> out = new ArrayList<>();
    offers.forEach(
        o -> {
          if (region.equals(o.get("region").asText())) out.add(o);
        });
    return out;
  }

  static void assertNoOffersIn(ApiClient api, String region) {
    List<JsonNode> offers = offersIn(api, "", region);
    assertTrue(offers.isEmpty(), "no offers in " + region + " but " + offers);
  }
}
