package dev.tickmark.node;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import dev.tickmark.engine.metrics.EngineMetrics;
import dev.tickmark.node.ApiClient.Customer;
import dev.tickmark.node.HostTestSupport.Registered;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * A host entity that forgets its agent's live session (here it passivates between two heartbeats;
 * after a node loss it has moved to a survivor) answers the next heartbeat with {@code reconnect}.
 * The session then attaches itself again: the agent's socket stays open, it gets no error and no
 * second welcome, and its heartbeats count again. Before, the session closed with {@code reconnect}
 * and the agent had to back off, reconnect, say hello and report its hardware again: seconds of
 * every failover.
 */
class SessionReattachIntegrationTest {
  private static Node node;
  private static ApiClient api;

  @BeforeAll
  static void start() throws Exception {
    // Host entities passivate when idle this long, so that one forgets its session between two
    // heartbeats further apart than that.
    node =
        HostTestSupport.startNode(
            "session_reattach",
            Map.of(
                "pekko.cluster.sharding.passivation.default-idle-strategy.idle-entity.timeout",
                "1s"));
    api = new ApiClient(node.baseUrl());
  }

  @AfterAll
  static void stop() throws Exception {
    if (node != null) node.close();
  }

  @Test
  void aSessionItsHostForgotAttachesItselfAgainWithoutTheAgentReconnecting() {
    Customer provider = api.signUp("reattach-provider");
    // Registered, its session attached, heartbeating at once so that the entity stays awake until
    // the
    // test lets it sleep.
    Registered host = HostTestSupport.register(node, api, provider, "eu-nl");
    AgentTestClient agent = host.agent();
    agent.startHeartbeats(HostTestSupport.HEARTBEAT_PERIOD);
    Eventually.eventually(
        Duration.ofSeconds(10),
        () ->
            assertTrue(EngineMetrics.get(node.system()).heartbeats.sum() > 0, "heartbeats count"));
    agent.stopHeartbeats();
    EngineMetrics metrics = EngineMetrics.get(node.system());
    long before = metrics.agentSessionsReattached.sum();
    long heartbeatsBefore = metrics.heartbeats.sum();
    List<JsonNode> frames = new ArrayList<>(agent.drain());

    // Heartbeats 2.5 s apart (the idle timeout is 1 s, the heartbeat timeout 3 s): the entity
    // passivates between two, and the next heartbeat meets an incarnation that knows no session.
    for (int i = 0; i < 8 && metrics.agentSessionsReattached.sum() == before; i++) {
      assertTrue(agent.heartbeat(), "the socket is open");
      JsonNode frame = agent.poll(Duration.ofMillis(2500));
      if (frame != null) frames.add(frame);
    }
    assertTrue(
        metrics.agentSessionsReattached.sum() > before,
        "the session attached itself again; frames: " + frames);

    // The same socket goes on: its heartbeats are the host's again.
    long handled = metrics.heartbeats.sum();
    Eventually.eventually(
        Duration.ofSeconds(10),
        () -> {
          assertTrue(agent.heartbeat(), "the socket is open");
          assertTrue(metrics.heartbeats.sum() > handled, "a heartbeat counted after re-attaching");
        });
    frames.addAll(agent.drain());
    assertFalse(agent.isClosed(), "the agent's socket stayed open: " + frames);
    assertEquals(
        List.of(),
        frames.stream()
            .filter(f -> List.of("error", "welcome").contains(f.path("type").asText()))
            .toList(),
        "no error (reconnect) and no second welcome");
    assertTrue(metrics.heartbeats.sum() > heartbeatsBefore);
    Eventually.eventually(
        HostTestSupport.READ_SIDE,
        () ->
            assertTrue(
                HostTestSupport.host(api, provider, host.hostId()).get("online").asBoolean(),
                "the host stayed online"));
  }
}
