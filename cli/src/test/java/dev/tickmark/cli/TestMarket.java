package dev.tickmark.cli;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.tickmark.agent.Agent;
import dev.tickmark.agent.AgentConfig;
import dev.tickmark.node.Node;
import dev.tickmark.node.NodeSettings;
import dev.tickmark.persistence.TestDatabase;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * A real node on a fresh PostgreSQL database (ports from 0, as cluster-config's TestNodes starts
 * them), plus what the CLI tests arrange around it without the CLI: sign-ups and simulated hosts
 * run by the real agent program.
 */
final class TestMarket {
  static final String OPERATOR_TOKEN = "tmkop_cli_test_operator_token_0123456789";
  static final Duration WAIT = Duration.ofSeconds(30);
  private static final ObjectMapper JSON = new ObjectMapper();

  record Customer(String id, String apiKey) {}

  final Node node;
  private final HttpClient http;
  private final List<Agent> agents = new ArrayList<>();

  private TestMarket(Node node) {
    this.node = node;
    // a node with TLS on: trust its own chain, as its dev agent does
    this.http =
        node.tls() == null
            ? HttpClient.newHttpClient()
            : HttpClient.newBuilder()
                .sslContext(dev.tickmark.wire.CaBundle.sslContext(node.tls().certificateFile()))
                .build();
  }

  /**
   * A node that accepts simulated hosts, with a 1 s heartbeat and 2 s settlements so tests see them
   * quickly.
   */
  static TestMarket start(String purpose) throws Exception {
    return start(purpose, Map.of());
  }

  /** The same node with more configuration ({@code tickmark.…} paths), e.g. the payout debtor. */
  static TestMarket start(String purpose, Map<String, Object> config) throws Exception {
    var db = TestDatabase.fresh(purpose);
    NodeSettings settings =
        NodeSettings.fromEnvironment(Map.of("TICKMARK_OPERATOR_TOKEN", OPERATOR_TOKEN))
            .withDatabase(db.url(), db.user(), db.password())
            .withPorts(0, -1, 0)
            .withExitJvmOnShutdown(false)
            .withConfig("tickmark.market.allow-simulated-hosts", true)
            // the simulated host reports this machine's real disk, which a loaded CI machine may
            // write slowly
            .withConfig("tickmark.verification.min-disk-write-mib-per-s", 10)
            .withConfig("tickmark.hosts.heartbeat-interval", "1s")
            .withConfig("tickmark.rentals.settle-interval", "2s")
            // the CLI's tests sign up and poll far faster than a person (all from one address)
            .withRateLimits(1_000_000, 1_000_000, 1_000_000, 1_000_000);
    for (var entry : config.entrySet())
      settings = settings.withConfig(entry.getKey(), entry.getValue());
    return new TestMarket(Node.start(settings));
  }

  String url() {
    return node.baseUrl();
  }

  Customer signUp(String name) {
    JsonNode created = call("POST", "/v1/accounts", null, "{\"name\":" + quote(name) + "}");
    return new Customer(created.get("account").get("id").asText(), created.get("api_key").asText());
  }

  /**
   * A verified host of two simulated H100s in {@code region}, run by the real agent, listed at
   * {@code price}.
   */
  String listedHost(Customer provider, String region, String price, Path stateDir)
      throws Exception {
    String token =
        call(
                "POST",
                "/v1/hosts/registration-tokens",
                provider.apiKey(),
                "{\"region\":" + quote(region) + "}")
            .get("token")
            .asText();
    Agent agent = startAgent(token, stateDir);
    String hostId = agent.welcomed().get(WAIT.toSeconds(), TimeUnit.SECONDS).hostId();
    String verdict = agent.verified().get(WAIT.toSeconds(), TimeUnit.SECONDS).status();
    if (!"verified".equals(verdict))
      throw new AssertionError("the simulated host was not verified: " + verdict);
    call(
        "PUT",
        "/v1/hosts/" + hostId + "/listing",
        provider.apiKey(),
        "{\"on_demand_price_per_gpu_hour\":" + quote(price) + ",\"listed\":true}");
    return hostId;
  }

  Agent startAgent(String token, Path stateDir) {
    Agent agent =
        Agent.start(
            AgentConfig.simulated(
                    "ws://127.0.0.1:" + node.httpPort(), token, stateDir, "h100-80gb:2")
                // the CLI's tests read the process runtime's paths (pwd, tty); the sandbox has its
                // own tests in the agent module
                .withRuntime(AgentConfig.RuntimeKind.PROCESS));
    agents.add(agent);
    return agent;
  }

  JsonNode call(String method, String path, String bearer, String body) {
    HttpRequest.Builder request = HttpRequest.newBuilder(URI.create(url() + path)).timeout(WAIT);
    if (bearer != null) request.header("Authorization", "Bearer " + bearer);
    request.header("Content-Type", "application/json");
    request.method(
        method,
        body == null
            ? HttpRequest.BodyPublishers.noBody()
            : HttpRequest.BodyPublishers.ofString(body));
    try {
      HttpResponse<String> response =
          http.send(request.build(), HttpResponse.BodyHandlers.ofString());
      if (response.statusCode() >= 300)
        throw new AssertionError(
            method + " " + path + " answered " + response.statusCode() + ": " + response.body());
      return JSON.readTree(response.body());
    } catch (IOException e) {
      throw new AssertionError(method + " " + path + " failed: " + e, e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new AssertionError("interrupted", e);
    }
  }

  static String quote(String text) {
    try {
      return JSON.writeValueAsString(text);
    } catch (IOException e) {
      throw new IllegalStateException(e);
    }
  }

  /** Stops the agents, then the node. */
  void close() throws Exception {
    agents.forEach(Agent::close);
    node.close();
  }
}
