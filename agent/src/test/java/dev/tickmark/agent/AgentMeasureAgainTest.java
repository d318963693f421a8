package dev.tickmark.agent;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.tickmark.wire.AgentFrame;
import dev.tickmark.wire.CanonicalJson;
import dev.tickmark.wire.Ed25519;
import dev.tickmark.wire.Frames;
import dev.tickmark.wire.HardwareReport;
import java.io.IOException;
import java.nio.file.Path;
import java.time.Clock;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Check again over a real socket: the node's {@code measure_again} makes the agent measure again
 * and send a new report, signed with its pinned key, with the best of the new disk samples.
 */
class AgentMeasureAgainTest {
  private static final long WAIT_S = 15;

  @TempDir Path tmp;
  private ScriptedNode node;
  private Agent agent;

  @AfterEach
  void stop() throws IOException {
    if (agent != null) agent.close();
    if (node != null) node.close();
  }

  /** The next frame of {@code type} the node receives (skipping others). */
  private <T extends AgentFrame> T next(Class<T> type) throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT_S);
    while (true) {
      ScriptedNode.Received r =
          node.received.poll(Math.max(1, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
      if (r == null)
        throw new AssertionError("no " + type.getSimpleName() + " within " + WAIT_S + " s");
      if (type.isInstance(r.frame())) return type.cast(r.frame());
    }
  }

  /** Simulated GPUs, and disk write rates from {@code writes}. */
  private static java.util.function.Function<StateDir, Hardware> hardware(
      AgentConfig config, HardwareProbe.WriteSampler writes) {
    return s ->
        new SimulatedHardware(
            config.simulatedGpus(),
            s.key().getPublic(),
            new HardwareProbe(
                Agent.VERSION,
                s.path(),
                (c, t) -> Optional.empty(),
                Path.of("/proc"),
                64 * 1024,
                Clock.systemUTC(),
                writes),
            Agent.VERSION);
  }

  @Test
  void measureAgainIsAnsweredWithANewSignedReportOfTheBestNewSamples() throws Exception {
    node = new ScriptedNode();
    // Disk write rates, three per report: the first report's disk is busy, the second's is not.
    ConcurrentLinkedQueue<Double> rates =
        new ConcurrentLinkedQueue<>(List.of(40.0, 55.5, 38.0, 420.0, 610.5, 598.0));
    AgentConfig config =
        new AgentConfig(
            List.of(node.uri()),
            node.newToken("host_m"),
            tmp.resolve("state"),
            SimulatedGpus.parse("h100-80gb:2"));
    agent = Agent.start(config, hardware(config, (dir, bytes) -> rates.poll()));
    assertEquals("verified", agent.verified().get(WAIT_S, TimeUnit.SECONDS).status());
    AgentFrame.HardwareReportFrame first = next(AgentFrame.HardwareReportFrame.class);
    assertEquals(55.5, first.report().get("disk").get("write_mib_per_s").asDouble());

    CompletableFuture<AgentFrame.VerificationResult> again = agent.nextVerification();
    node.send(new AgentFrame.MeasureAgain("requested by the provider"));
    AgentFrame.HardwareReportFrame second = next(AgentFrame.HardwareReportFrame.class);
    assertEquals(610.5, second.report().get("disk").get("write_mib_per_s").asDouble());
    assertTrue(
        Ed25519.verify(
            node.pinnedKeys.get("host_m"),
            CanonicalJson.bytes(second.report()),
            second.signature()),
        "signed with the pinned key");
    assertEquals("verified", again.get(WAIT_S, TimeUnit.SECONDS).status());
    assertTrue(rates.isEmpty(), "three samples per report");
    assertTrue(agent.connected(), "the session goes on");
  }

  /**
   * Every report says how this agent runs rentals, under the signature: the runtime's name and
   * whether it can give a rental network (the engine matches rentals with network elsewhere when it
   * cannot), at the welcome and after a check again.
   */
  @Test
  void everyReportSaysHowRentalsRunHereAndWhetherTheyCanHaveNetwork() throws Exception {
    node = new ScriptedNode();
    AgentConfig config =
        new AgentConfig(
            List.of(node.uri()),
            node.newToken("host_r"),
            tmp.resolve("state"),
            SimulatedGpus.parse("h100-80gb:1"));
    RentalsTest.FakeRuntime runtime = new RentalsTest.FakeRuntime();
    runtime.network = false;
    agent = Agent.start(config, hardware(config, (dir, bytes) -> 500.0), s -> runtime);
    AgentFrame.HardwareReportFrame first = next(AgentFrame.HardwareReportFrame.class);
    assertEquals(
        new HardwareReport.WorkloadRuntime("fake", false),
        Frames.readReport(first.report()).runtime());

    runtime.network = true; // slirp4netns installed meanwhile
    node.send(new AgentFrame.MeasureAgain("requested by the provider"));
    AgentFrame.HardwareReportFrame second = next(AgentFrame.HardwareReportFrame.class);
    assertEquals(
        new HardwareReport.WorkloadRuntime("fake", true),
        Frames.readReport(second.report()).runtime());
    assertTrue(
        Ed25519.verify(
            node.pinnedKeys.get("host_r"),
            CanonicalJson.bytes(second.report()),
            second.signature()),
        "the runtime is signed with the rest");
  }
}
