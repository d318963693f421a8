package dev.tickmark.agent;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.tickmark.wire.AgentFrame;
import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A real {@link Agent} over a real websocket against {@link ScriptedNode}, a protocol-level
 * stand-in for a node.
 */
class AgentSocketTest {
  private static final long WAIT_S = 15;

  @TempDir Path tmp;
  private ScriptedNode node;
  private Agent agent;

  @AfterEach
  void stop() throws IOException {
    if (agent != null) agent.close();
    if (node != null) node.close();
  }

  private Agent start(List<URI> engines, String token, Path dir) {
    AgentConfig config = new AgentConfig(engines, token, dir, SimulatedGpus.parse("h100-80gb:2"));
    return Agent.start(
        config,
        s ->
            new SimulatedHardware(
                config.simulatedGpus(),
                s.key().getPublic(),
                new HardwareProbe(
                    Agent.VERSION,
                    s.path(),
                    (c, t) -> Optional.empty(),
                    Path.of("/proc"),
                    64 * 1024,
                    Clock.systemUTC()),
                Agent.VERSION));
  }

  /** The next frame of {@code type} the node receives (skipping others). */
  private <T extends AgentFrame> ScriptedNode.Received next(ScriptedNode n, Class<T> type)
      throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT_S);
    while (true) {
      ScriptedNode.Received r =
          n.received.poll(Math.max(1, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
      if (r == null)
        throw new AssertionError("no " + type.getSimpleName() + " within " + WAIT_S + " s");
      if (type.isInstance(r.frame())) return r;
    }
  }

  @Test
  void registersStoresTheCredentialReportsAndHeartbeats() throws Exception {
    node = new ScriptedNode();
    Path dir = tmp.resolve("state");
    String token = node.newToken("host_a");
    agent = start(List.of(node.uri()), token, dir);

    Agent.Welcomed welcomed = agent.welcomed().get(WAIT_S, TimeUnit.SECONDS);
    assertEquals("host_a", welcomed.hostId());
    assertEquals(node.uri(), welcomed.engine());
    assertEquals("verified", agent.verified().get(WAIT_S, TimeUnit.SECONDS).status());
    assertTrue(agent.connected());
    assertEquals(Optional.of("host_a"), agent.hostId());

    AgentFrame.HardwareReportFrame report =
        (AgentFrame.HardwareReportFrame) next(node, AgentFrame.HardwareReportFrame.class).frame();
    assertTrue(report.report().get("simulated").asBoolean());
    AgentFrame.Heartbeat h1 = (AgentFrame.Heartbeat) next(node, AgentFrame.Heartbeat.class).frame();
    AgentFrame.Heartbeat h2 = (AgentFrame.Heartbeat) next(node, AgentFrame.Heartbeat.class).frame();
    assertEquals(1, h1.seq());
    assertEquals(2, h2.seq());
    assertEquals(
        List.of(new AgentFrame.GpuSample(0, 0, 35, null), new AgentFrame.GpuSample(1, 0, 35, null)),
        h2.gpus());
    assertEquals(List.of(), h2.rentals());

    assertEquals("Bearer " + token, node.authorizations.get(0));
    assertEquals("/v1/agent/connect", node.paths.get(0));
    String credential = Files.readString(dir.resolve("host-credential")).trim();
    assertTrue(credential.startsWith("tmkhost_host_a_"), credential);

    agent.close();
    Agent.Stopped stopped = agent.stopped().get(WAIT_S, TimeUnit.SECONDS);
    assertFalse(stopped.rejected());
    assertFalse(agent.connected());

    // a restart with the same (now spent) token uses the stored credential instead
    agent = start(List.of(node.uri()), token, dir);
    assertEquals("host_a", agent.welcomed().get(WAIT_S, TimeUnit.SECONDS).hostId());
    assertEquals("Bearer " + credential, node.authorizations.get(node.authorizations.size() - 1));
    assertEquals("verified", agent.verified().get(WAIT_S, TimeUnit.SECONDS).status());
  }

  @Test
  void aSpentTokenStopsTheAgentForGood() throws Exception {
    node = new ScriptedNode();
    String token = node.newToken("host_b");
    node.unusedTokens.remove(token);
    node.usedTokens.add(token);
    agent = start(List.of(node.uri()), token, tmp.resolve("fresh"));

    Agent.Stopped stopped = agent.stopped().get(WAIT_S, TimeUnit.SECONDS);
    assertTrue(stopped.rejected());
    assertEquals("token_used", stopped.code());
    assertTrue(stopped.message().contains("already used"), stopped.message());
    ExecutionException e =
        assertThrows(ExecutionException.class, () -> agent.welcomed().get(1, TimeUnit.SECONDS));
    assertInstanceOf(Agent.StoppedException.class, e.getCause());
    assertEquals(1, node.connectionCount(), "no retry");
  }

  @Test
  void aRefusedUpgradeWithAFatalCodeStopsTheAgent() throws Exception {
    node = new ScriptedNode();
    node.rejectUpgradeWithCode = "token_expired";
    agent = start(List.of(node.uri()), node.newToken("host_c"), tmp.resolve("c"));

    Agent.Stopped stopped = agent.stopped().get(WAIT_S, TimeUnit.SECONDS);
    assertEquals("token_expired", stopped.code());
    assertTrue(stopped.message().contains("expired"), stopped.message());
  }

  @Test
  void failsOverToTheNextEngineWhenOneIsDown() throws Exception {
    URI dead;
    try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      dead = URI.create("ws://127.0.0.1:" + s.getLocalPort());
    }
    node = new ScriptedNode();
    agent = start(List.of(dead, node.uri()), node.newToken("host_d"), tmp.resolve("d"));

    Agent.Welcomed welcomed = agent.welcomed().get(WAIT_S, TimeUnit.SECONDS);
    assertEquals(node.uri(), welcomed.engine());
    assertEquals(Optional.of(node.uri()), agent.engine());
  }

  @Test
  void reconnectsToAnotherNodeWhenItsNodeGoesAwayAndReportsAgain() throws Exception {
    node = new ScriptedNode();
    try (ScriptedNode second = node.sibling()) {
      agent = start(List.of(node.uri(), second.uri()), node.newToken("host_e"), tmp.resolve("e"));
      assertEquals(node.uri(), agent.welcomed().get(WAIT_S, TimeUnit.SECONDS).engine());
      agent.verified().get(WAIT_S, TimeUnit.SECONDS);
      var reverified = agent.nextVerification();

      node.close();

      assertEquals("verified", reverified.get(WAIT_S, TimeUnit.SECONDS).status());
      assertEquals(Optional.of(second.uri()), agent.engine());
      assertTrue(
          second.authorizations.get(0).startsWith("Bearer tmkhost_host_e_"),
          "the credential, not the spent token");
      assertNotNull(next(second, AgentFrame.HardwareReportFrame.class));
      assertEquals(
          1,
          ((AgentFrame.Heartbeat) next(second, AgentFrame.Heartbeat.class).frame()).seq(),
          "seq restarts per session");
      agent.close();
    }
  }

  @Test
  void aHostIdIsUnknownUntilWelcomed() throws Exception {
    node = new ScriptedNode();
    node.rejectUpgradeWithCode = null;
    agent = start(List.of(URI.create("ws://127.0.0.1:9")), "tmkreg_x_y", tmp.resolve("f"));
    assertEquals(Optional.empty(), agent.hostId());
    assertFalse(agent.connected());
    assertNull(agent.lastVerification().orElse(null));
    agent.close();
    assertFalse(agent.stopped().get(WAIT_S, TimeUnit.SECONDS).rejected());
  }

  /** The next heartbeat whose rentals are {@code rentals}. */
  private AgentFrame.Heartbeat heartbeatListing(ScriptedNode n, List<String> rentals)
      throws InterruptedException {
    while (true) {
      AgentFrame.Heartbeat h = (AgentFrame.Heartbeat) next(n, AgentFrame.Heartbeat.class).frame();
      if (h.rentals().equals(rentals)) return h;
    }
  }

  @Test
  void startsAndStopsARentalOverTheSocket() throws Exception {
    node = new ScriptedNode();
    Path dir = tmp.resolve("r");
    agent = start(List.of(node.uri()), node.newToken("host_r"), dir);
    agent.verified().get(WAIT_S, TimeUnit.SECONDS);
    AgentFrame.StartRental startRental =
        new AgentFrame.StartRental(
            "rnt_ws", List.of(1), "pytorch/pytorch", List.of(), null, false, null);

    node.send(startRental);

    AgentFrame.RentalStarted started =
        (AgentFrame.RentalStarted) next(node, AgentFrame.RentalStarted.class).frame();
    assertEquals("rnt_ws", started.rentalId());
    java.time.Instant.parse(started.at());
    assertTrue(Files.isDirectory(dir.resolve("rentals/rnt_ws/scratch")));
    heartbeatListing(node, List.of("rnt_ws"));
    assertEquals(List.of("rnt_ws"), agent.runningRentals());

    node.send(startRental); // delivered twice
    assertEquals(
        started,
        next(node, AgentFrame.RentalStarted.class).frame(),
        "the same answer, no second workload");

    node.send(new AgentFrame.StopRental("rnt_ws", false));

    AgentFrame.RentalStopped stopped =
        (AgentFrame.RentalStopped) next(node, AgentFrame.RentalStopped.class).frame();
    assertEquals("rnt_ws", stopped.rentalId());
    assertFalse(
        java.time.Instant.parse(stopped.at()).isBefore(java.time.Instant.parse(started.at())));
    assertFalse(Files.exists(dir.resolve("rentals/rnt_ws/scratch")), "wiped");
    heartbeatListing(node, List.of());
    node.send(new AgentFrame.StopRental("rnt_ws", false));
    assertEquals(
        stopped,
        next(node, AgentFrame.RentalStopped.class).frame(),
        "a second stop gets the same answer");

    node.send(
        new AgentFrame.StartRental(
            "rnt_bad", List.of(5), "pytorch/pytorch", List.of(), null, false, null));
    AgentFrame.RentalFailed failed =
        (AgentFrame.RentalFailed) next(node, AgentFrame.RentalFailed.class).frame();
    assertEquals(
        new AgentFrame.RentalFailed("rnt_bad", "card 5 is not on this host (cards: 0, 1)"), failed);
  }

  @Test
  void aRunningRentalIsReportedAgainAfterAReconnectAndStoppedWhenTheAgentCloses() throws Exception {
    node = new ScriptedNode();
    Path dir = tmp.resolve("s");
    agent = start(List.of(node.uri()), node.newToken("host_s"), dir);
    agent.verified().get(WAIT_S, TimeUnit.SECONDS);
    node.send(
        new AgentFrame.StartRental(
            "rnt_long",
            List.of(0, 1),
            "pytorch/pytorch",
            List.of("sleep", "300"),
            null,
            false,
            null));
    ScriptedNode.Received first = next(node, AgentFrame.RentalStarted.class);
    var reverified = agent.nextVerification();

    node.dropConnections();

    ScriptedNode.Received again = next(node, AgentFrame.RentalStarted.class);
    assertEquals(first.frame(), again.frame(), "the same rental_started, same at");
    assertTrue(again.connection() > first.connection(), "on the new connection");
    reverified.get(WAIT_S, TimeUnit.SECONDS);

    agent.close();

    AgentFrame.RentalStopped stopped =
        (AgentFrame.RentalStopped) next(node, AgentFrame.RentalStopped.class).frame();
    assertEquals("rnt_long", stopped.rentalId());
    assertFalse(
        Files.exists(dir.resolve("rentals/rnt_long/scratch")),
        "closing the agent stops and wipes its workloads");
  }

  @Test
  void sendsTheWorkloadsOutputAndAfterAReconnectResendsWhatWasNotAcknowledged() throws Exception {
    node = new ScriptedNode();
    Path dir = tmp.resolve("l");
    agent = start(List.of(node.uri()), node.newToken("host_l"), dir);
    agent.verified().get(WAIT_S, TimeUnit.SECONDS);
    node.send(
        new AgentFrame.StartRental(
            "rnt_log",
            List.of(0),
            "pytorch/pytorch",
            List.of("sh", "-c", "echo one; echo two >&2; sleep 0.2; echo three; sleep 300"),
            null,
            false,
            null));
    List<AgentFrame.LogLine> first = linesThrough(node, "rnt_log", 3);
    assertEquals(List.of(1L, 2L, 3L), first.stream().map(AgentFrame.LogLine::seq).toList());
    assertEquals(
        java.util.Set.of("one", "two"), java.util.Set.of(first.get(0).text(), first.get(1).text()));
    assertEquals("three", first.get(2).text());
    node.send(new AgentFrame.LogsAck("rnt_log", 1)); // only the first is stored

    var reconnected = agent.nextVerification();
    node.dropConnections();

    List<AgentFrame.LogLine> again = linesThrough(node, "rnt_log", 3);
    assertEquals(
        first.subList(1, 3), again, "what was not acknowledged, the same lines with the same seq");
    node.send(new AgentFrame.LogsAck("rnt_log", 3));
    // The first reconnection's verification must be in before asking for the next one: asked
    // earlier, the "next" verification would be that one, and the frame below would go to the
    // connection just dropped.
    reconnected.get(WAIT_S, TimeUnit.SECONDS);
    var reverified = agent.nextVerification();
    node.dropConnections();
    reverified.get(WAIT_S, TimeUnit.SECONDS);
    node.send(new AgentFrame.StopRental("rnt_log", false));
    next(node, AgentFrame.RentalStopped.class);
    for (ScriptedNode.Received r : node.received)
      assertFalse(
          r.frame() instanceof AgentFrame.Logs, "acknowledged lines are not sent again: " + r);
  }

  /** The lines the node receives for {@code rentalId}, in order, until one has seq {@code last}. */
  private List<AgentFrame.LogLine> linesThrough(ScriptedNode n, String rentalId, long last)
      throws InterruptedException {
    List<AgentFrame.LogLine> lines = new java.util.ArrayList<>();
    while (lines.isEmpty() || lines.get(lines.size() - 1).seq() < last) {
      AgentFrame.Logs logs = (AgentFrame.Logs) next(n, AgentFrame.Logs.class).frame();
      assertEquals(rentalId, logs.rentalId());
      lines.addAll(logs.lines());
    }
    return lines;
  }
}
