package dev.tickmark.node;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.tickmark.agent.Agent;
import dev.tickmark.agent.AgentConfig;
import dev.tickmark.engine.account.Account;
import dev.tickmark.engine.money.Money;
import dev.tickmark.wire.CaBundle;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.apache.pekko.Done;
import org.apache.pekko.actor.CoordinatedShutdown;
import org.apache.pekko.cluster.sharding.typed.javadsl.ClusterSharding;
import org.apache.pekko.cluster.sharding.typed.javadsl.EntityRef;

/**
 * Dev mode: a demo renter with a welcome credit, and a demo provider whose simulated host (an
 * in-process agent with two simulated H100s) is verified and listed, so that a new user sees
 * capacity in {@code GET /v1/offers} at once. Idempotent: a restart keeps the same accounts,
 * balance and host (the agent keeps its key and credential under the data folder) and prints a
 * fresh API key.
 */
final class DevBootstrap {
  static final String DEMO_RENTER = "acc_demo";
  static final String DEMO_PROVIDER = "acc_demo_provider";
  static final long WELCOME_CREDIT = Money.parse("100");
  static final String SIMULATED_GPUS = "h100-80gb:2";
  private static final Duration TIMEOUT = Duration.ofSeconds(60);
  private static final ObjectMapper JSON = new ObjectMapper();

  /** {@code runtime}: how the simulated host runs rentals ({@code sandbox} or {@code process}). */
  record Demo(
      String renterId,
      String apiKey,
      Account.Summary renter,
      String hostId,
      String hostStatus,
      String runtime) {}

  private DevBootstrap() {}

  static Demo seed(Node node) throws Exception {
    ClusterSharding sharding = ClusterSharding.get(node.system());
    EntityRef<Account.Command> renter = sharding.entityRefFor(Account.ENTITY_KEY, DEMO_RENTER);
    await(
        renter.<Account.Summary>askWithStatus(
            reply -> new Account.Open("Demo renter", reply), TIMEOUT));
    await(
        renter.<Account.Posting>askWithStatus(
            reply -> new Account.Deposit("manual:dev-welcome-credit", WELCOME_CREDIT, reply),
            TIMEOUT));
    String apiKey = await(node.apiKeys().create(DEMO_RENTER, "dev")).apiKey();
    Account.Summary summary = await(renter.ask(Account.GetSummary::new, TIMEOUT));

    EntityRef<Account.Command> provider = sharding.entityRefFor(Account.ENTITY_KEY, DEMO_PROVIDER);
    await(
        provider.<Account.Summary>askWithStatus(
            reply -> new Account.Open("Demo provider", reply), TIMEOUT));
    String providerKey = await(node.apiKeys().create(DEMO_PROVIDER, "dev")).apiKey();
    Agent agent = startSimulatedAgent(node, providerKey);
    String hostId = agent.welcomed().get(TIMEOUT.toSeconds(), TimeUnit.SECONDS).hostId();
    String status = agent.verified().get(TIMEOUT.toSeconds(), TimeUnit.SECONDS).status();
    call(
        node,
        "PUT",
        "/v1/hosts/" + hostId + "/listing",
        providerKey,
        "{\"on_demand_price_per_gpu_hour\":\"2.49\",\"spot_price_per_gpu_hour\":\"1.19\",\"spot_notice_seconds\":300,\"listed\":true}");
    return new Demo(DEMO_RENTER, apiKey, summary, hostId, status, agent.runtimeName());
  }

  private static Agent startSimulatedAgent(Node node, String providerKey) throws Exception {
    Path stateDir = node.settings().dataDir().resolve("dev-agent");
    String token = null;
    if (!AgentConfig.hasCredential(stateDir)) {
      JsonNode created =
          call(
              node,
              "POST",
              "/v1/hosts/registration-tokens",
              providerKey,
              "{\"region\":\"eu-nl\",\"label\":\"dev simulated host\"}");
      token = created.get("token").asText();
    }
    String engine =
        (node.tls() == null ? "ws://" : "wss://")
            + node.settings().hostname()
            + ":"
            + node.httpPort();
    AgentConfig config = AgentConfig.simulated(engine, token, stateDir, SIMULATED_GPUS);
    // with TLS on, the dev agent trusts the node's own certificate chain
    if (node.tls() != null) config = config.withCa(node.tls().certificateFile());
    Agent agent = Agent.start(config);
    CoordinatedShutdown.get(node.system())
        .addTask(
            CoordinatedShutdown.PhaseServiceUnbind(),
            "stop-dev-agent",
            () -> {
              agent.close();
              return CompletableFuture.completedFuture(Done.getInstance());
            });
    return agent;
  }

  /** Calls the node's own API, as any client would. */
  private static JsonNode call(Node node, String method, String path, String apiKey, String body)
      throws IOException, InterruptedException {
    HttpRequest request =
        HttpRequest.newBuilder(URI.create(node.baseUrl() + path))
            .timeout(TIMEOUT)
            .header("Authorization", "Bearer " + apiKey)
            .header("Content-Type", "application/json")
            .method(method, HttpRequest.BodyPublishers.ofString(body))
            .build();
    HttpResponse<String> response =
        (node.tls() == null
                ? HttpClient.newHttpClient()
                : HttpClient.newBuilder()
                    .sslContext(CaBundle.sslContext(node.tls().certificateFile()))
                    .build())
            .send(request, HttpResponse.BodyHandlers.ofString());
    if (response.statusCode() >= 300)
      throw new IOException(
          method + " " + path + " answered " + response.statusCode() + ": " + response.body());
    return JSON.readTree(response.body());
  }

  private static <T> T await(java.util.concurrent.CompletionStage<T> stage) throws Exception {
    return stage.toCompletableFuture().get(TIMEOUT.toSeconds(), TimeUnit.SECONDS);
  }
}
