package dev.tickmark.node;

import static dev.tickmark.node.Eventually.eventually;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import dev.tickmark.agent.Agent;
import dev.tickmark.agent.AgentConfig;
import dev.tickmark.persistence.DatabaseSettings;
import dev.tickmark.persistence.TestDatabase;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The real agent program (in-process, simulated GPUs, real websocket) against a real node and
 * PostgreSQL: register with a token, pass verification, list, appear in the offers, go offline when
 * the agent dies, come back with the kept key, and be refused with a spent or expired token or a
 * foreign key.
 */
class AgentProgramIntegrationTest {
  static final Duration HEARTBEAT_TIMEOUT = Duration.ofSeconds(3);
  static final Duration TOKEN_VALIDITY = Duration.ofSeconds(6);
  static final Duration WAIT = Duration.ofSeconds(30);

  static Node node;
  static ApiClient api;
  final List<Agent> agents = new ArrayList<>();

  @TempDir Path temp;

  @BeforeAll
  static void startNode() throws Exception {
    DatabaseSettings db = TestDatabase.fresh("agent_program");
    node =
        Node.start(
            TestNodes.settings(db)
                .withConfig("tickmark.market.allow-simulated-hosts", true)
                // the simulated host reports this machine's real disk, which a loaded CI machine
                // may write slowly
                .withConfig("tickmark.verification.min-disk-write-mib-per-s", 10)
                .withConfig("tickmark.hosts.heartbeat-timeout", HEARTBEAT_TIMEOUT.toMillis() + "ms")
                .withConfig("tickmark.hosts.heartbeat-interval", "1s")
                .withConfig(
                    "tickmark.hosts.registration-token-validity",
                    TOKEN_VALIDITY.toMillis() + "ms"));
    api = new ApiClient(node.baseUrl());
  }

  @AfterAll
  static void stopNode() throws Exception {
    if (node != null) node.close();
  }

  @AfterEach
  void stopAgents() {
    agents.forEach(Agent::close);
  }

  @Test
  void hostLifecycleWithTheRealAgent() throws Exception {
    ApiClient.Customer provider = api.signUp("Provider");
    String token = token(provider);
    Path state = temp.resolve("agent");

    Agent agent = start(token, state);
    String hostId = agent.welcomed().get(WAIT.toSeconds(), TimeUnit.SECONDS).hostId();
    assertEquals("verified", agent.verified().get(WAIT.toSeconds(), TimeUnit.SECONDS).status());
    assertTrue(AgentConfig.hasCredential(state), "the agent keeps its host credential");

    JsonNode host = host(provider, hostId);
    assertEquals("verified", host.get("status").asText());
    assertTrue(host.get("online").asBoolean());
    assertTrue(host.get("simulated").asBoolean(), "a simulated host says so");
    assertEquals(2, host.get("cards").size());

    api.put(
            "/v1/hosts/" + hostId + "/listing",
            provider.apiKey(),
            "{\"on_demand_price_per_gpu_hour\":\"3.10\",\"listed\":true}")
        .expect(200);
    eventually(WAIT, () -> assertEquals(2, offeredCards()));

    // the agent dies: the host goes offline after the heartbeat timeout and leaves the market
    agent.close();
    eventually(WAIT, () -> assertFalse(host(provider, hostId).get("online").asBoolean()));
    eventually(WAIT, () -> assertEquals(0, offeredCards()));

    // it restarts with its kept key and credential, no token
    Agent again = start(null, state);
    assertEquals(hostId, again.welcomed().get(WAIT.toSeconds(), TimeUnit.SECONDS).hostId());
    assertEquals("verified", again.verified().get(WAIT.toSeconds(), TimeUnit.SECONDS).status());
    eventually(WAIT, () -> assertTrue(host(provider, hostId).get("online").asBoolean()));
    eventually(WAIT, () -> assertEquals(2, offeredCards()));

    // the spent token registers nothing, whoever presents it
    Agent reuse = start(token, temp.resolve("other-agent"));
    Agent.Stopped refused = reuse.stopped().get(WAIT.toSeconds(), TimeUnit.SECONDS);
    assertEquals("token_used", refused.code());
    assertTrue(refused.rejected());

    // the host's credential with a different key is refused
    Path foreign = temp.resolve("foreign-key");
    Files.createDirectories(foreign);
    Files.copy(state.resolve("host-credential"), foreign.resolve("host-credential"));
    Agent impostor = start(null, foreign);
    assertEquals("key_mismatch", impostor.stopped().get(WAIT.toSeconds(), TimeUnit.SECONDS).code());
    assertTrue(
        host(provider, hostId).get("online").asBoolean(), "the real agent's session is untouched");
  }

  @Test
  void anExpiredTokenRegistersNothing() throws Exception {
    ApiClient.Customer provider = api.signUp("Late provider");
    JsonNode created =
        api.post("/v1/hosts/registration-tokens", provider.apiKey(), "{\"region\":\"eu-fr\"}")
            .expect(201)
            .json();
    Instant expiresAt = Instant.parse(created.get("expires_at").asText());
    eventually(
        TOKEN_VALIDITY.plusSeconds(10),
        () -> assertTrue(Instant.now().isAfter(expiresAt), "waiting for the token to expire"));

    Agent late = start(created.get("token").asText(), temp.resolve("late"));
    assertEquals("token_expired", late.stopped().get(WAIT.toSeconds(), TimeUnit.SECONDS).code());
    assertEquals("invited", host(provider, created.get("host_id").asText()).get("status").asText());
  }

  private Agent start(String token, Path state) {
    Agent agent =
        Agent.start(
            AgentConfig.simulated(
                "ws://127.0.0.1:" + node.httpPort(), token, state, "h100-80gb:2"));
    agents.add(agent);
    return agent;
  }

  private static String token(ApiClient.Customer provider) {
    return api.post(
            "/v1/hosts/registration-tokens",
            provider.apiKey(),
            "{\"region\":\"eu-de\",\"label\":\"real agent\"}")
        .expect(201)
        .json()
        .get("token")
        .asText();
  }

  private static JsonNode host(ApiClient.Customer provider, String hostId) {
    return api.get("/v1/hosts/" + hostId, provider.apiKey()).expect(200).json();
  }

  /** Cards offered on demand for H100s in eu-de (this test's region). */
  private static int offeredCards() {
    JsonNode offers =
        api.get("/v1/offers?gpu=h100-80gb&region=eu-de&tier=on_demand", null)
            .expect(200)
            .json()
            .get("offers");
    int cards = 0;
    for (JsonNode o : offers) cards += o.get("available_cards").asInt();
    return cards;
  }
}
