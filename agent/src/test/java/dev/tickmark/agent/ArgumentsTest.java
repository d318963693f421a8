package dev.tickmark.agent;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

class ArgumentsTest {
  @TempDir Path tmp;

  private static Arguments parse(String... args) throws Arguments.UsageException {
    return Arguments.parse(List.of(args), Map.of());
  }

  @Test
  void printReportNeedsNoEngineAndPrintsThisMachinesReportAsJson() throws Exception {
    Arguments a = parse("--print-report", "--state-dir", tmp.toString());
    assertTrue(a.printReport());
    assertEquals(tmp, a.reportStateDir());
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    ByteArrayOutputStream err = new ByteArrayOutputStream();
    int status =
        Main.run(
            List.of("--print-report", "--state-dir", tmp.toString()),
            Map.of(),
            new PrintStream(out, true, StandardCharsets.UTF_8),
            new PrintStream(err, true, StandardCharsets.UTF_8));
    assertEquals(Main.EXIT_OK, status, err.toString(StandardCharsets.UTF_8));
    var report =
        dev.tickmark.wire.Frames.readReport(
            dev.tickmark.wire.Frames.MAPPER.readTree(out.toString(StandardCharsets.UTF_8)));
    assertEquals(false, report.simulated(), "the machine's own report");
    assertTrue(report.memoryTotalMib() > 0, "read from /proc/meminfo");
  }

  @Test
  void repeatedAndCommaSeparatedEnginesKeepTheirOrder() throws Exception {
    AgentConfig c =
        parse(
                "--engine",
                "ws://a:8080",
                "--engine=ws://b:8080,wss://c",
                "--engine",
                "d:9090/",
                "--token",
                "tmkreg_h_s")
            .config();
    assertEquals(
        List.of(
            URI.create("ws://a:8080"),
            URI.create("ws://b:8080"),
            URI.create("wss://c"),
            URI.create("ws://d:9090")),
        c.engines());
    assertEquals("tmkreg_h_s", c.token());
    assertEquals(AgentConfig.defaultStateDir(), c.stateDir());
    assertNull(c.simulatedGpus());
  }

  @Test
  void httpSchemesMeanTheWebsocketOnesAndTheConnectPathIsAppended() throws Exception {
    AgentConfig c =
        parse(
                "--engine",
                "https://node.example/tickmark/",
                "--engine",
                "http://127.0.0.1:8080/v1/agent/connect")
            .config();
    assertEquals(
        URI.create("wss://node.example/tickmark/v1/agent/connect"),
        AgentConfig.connectUri(c.engines().get(0)));
    assertEquals(
        URI.create("ws://127.0.0.1:8080/v1/agent/connect"),
        AgentConfig.connectUri(c.engines().get(1)));
  }

  @Test
  void stateDirAndSimulatedGpus() throws Exception {
    AgentConfig c =
        parse("--engine", "ws://a", "--state-dir", tmp.toString(), "--simulate-gpus", "h100-80gb:2")
            .config();
    assertEquals(tmp, c.stateDir());
    assertEquals("h100-80gb:2", c.simulatedGpus().toString());
    assertTrue(c.simulated());
  }

  @Test
  void withoutRuntimeFlagTheRuntimeIsChosenWhenTheAgentStarts() throws Exception {
    // null: RuntimeChoice picks one for the machine (RuntimeChoiceTest)
    assertEquals(null, parse("--engine", "ws://a").config().runtime());
    assertEquals(
        null, parse("--engine", "ws://a", "--simulate-gpus", "h100-80gb:2").config().runtime());
    assertEquals(null, AgentConfig.of("ws://a", null, tmp).runtime());
    assertEquals(null, AgentConfig.simulated("ws://a", null, tmp, "h100-80gb:1").runtime());
    assertEquals(
        java.time.Duration.ofSeconds(10), parse("--engine", "ws://a").config().stopGrace());
  }

  @Test
  void runtimeAndStopGraceFlags() throws Exception {
    AgentConfig c =
        parse(
                "--engine",
                "ws://a",
                "--simulate-gpus",
                "h100-80gb:2",
                "--runtime",
                "docker",
                "--stop-grace",
                "30")
            .config();
    assertEquals(AgentConfig.RuntimeKind.DOCKER, c.runtime());
    assertEquals(java.time.Duration.ofSeconds(30), c.stopGrace());
    assertEquals(
        AgentConfig.RuntimeKind.PROCESS,
        parse("--engine", "ws://a", "--runtime=process").config().runtime());
    assertEquals(
        AgentConfig.RuntimeKind.PROCESS,
        AgentConfig.of("ws://a", null, tmp).withRuntime(AgentConfig.RuntimeKind.PROCESS).runtime());
    assertEquals(
        AgentConfig.RuntimeKind.SANDBOX,
        parse("--engine", "ws://a", "--runtime", "sandbox").config().runtime());
  }

  @Test
  void sshIdleTimeoutFlag() throws Exception {
    assertEquals(
        AgentConfig.DEFAULT_SSH_IDLE_TIMEOUT,
        parse("--engine", "ws://a").config().sshIdleTimeout());
    assertEquals(
        java.time.Duration.ofMinutes(5),
        parse("--engine", "ws://a", "--ssh-idle-timeout", "5").config().sshIdleTimeout());
  }

  @Test
  void tokenFromTheEnvironmentWhenNotGiven() throws Exception {
    assertEquals(
        "tmkreg_x_y",
        Arguments.parse(List.of("--engine", "ws://a"), Map.of("TICKMARK_AGENT_TOKEN", "tmkreg_x_y"))
            .config()
            .token());
    assertEquals(
        "tmkreg_flag",
        Arguments.parse(
                List.of("--engine", "ws://a", "--token", "tmkreg_flag"),
                Map.of("TICKMARK_AGENT_TOKEN", "tmkreg_env"))
            .config()
            .token());
  }

  @Test
  void helpAndVersion() throws Exception {
    assertTrue(parse("--help").help());
    assertTrue(parse("--engine", "ws://a", "--version").version());
  }

  @ParameterizedTest
  @ValueSource(
      strings = {
        "", // no engine
        "--engine", // no value
        "--engine ftp://a", // bad scheme
        "--engine ws://a?x=1", // query
        "--engine ws://a --simulate-gpus h100:2", // unknown model
        "--engine ws://a --simulate-gpus h100-80gb:0", // no cards
        "--engine ws://a --simulate-gpus", // no value
        "--engine ws://a --frobnicate", // unknown flag
        "--engine ws://a --token --state-dir /tmp", // flag where a value belongs
        "--engine ws://a --runtime podman", // unknown runtime
        "--engine ws://a --runtime", // no value
        "--engine ws://a --stop-grace -1", // negative
        "--engine ws://a --stop-grace 10s", // not a number
        "--engine ws://a --stop-grace 100000", // too long
        "--engine ws://a --ssh-idle-timeout 0", // not positive
        "--engine ws://a --ssh-idle-timeout 5m", // not a number
      })
  void badUsage(String line) {
    List<String> args = line.isEmpty() ? List.of() : List.of(line.split(" "));
    assertThrows(Arguments.UsageException.class, () -> Arguments.parse(args, Map.of()));
  }

  // ---- Main: exit statuses

  private int main(List<String> args, ByteArrayOutputStream out, ByteArrayOutputStream err) {
    return Main.run(
        args,
        Map.of(),
        new PrintStream(out, true, StandardCharsets.UTF_8),
        new PrintStream(err, true, StandardCharsets.UTF_8));
  }

  @Test
  void badSimulateGpusExitsWithUsageStatus() {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    ByteArrayOutputStream err = new ByteArrayOutputStream();
    assertEquals(
        2,
        main(
            List.of("--engine", "ws://127.0.0.1:1", "--simulate-gpus", "h100-80gb:two"), out, err));
    String text = err.toString(StandardCharsets.UTF_8);
    assertTrue(text.startsWith("tickmark-agent: bad --simulate-gpus"), text);
  }

  @Test
  void firstStartWithoutTokenExitsWithUsageStatus() {
    ByteArrayOutputStream err = new ByteArrayOutputStream();
    assertEquals(
        2,
        main(
            List.of("--engine", "ws://127.0.0.1:1", "--state-dir", tmp.toString()),
            new ByteArrayOutputStream(),
            err));
    assertTrue(
        err.toString(StandardCharsets.UTF_8).contains("needs --token"),
        err.toString(StandardCharsets.UTF_8));
  }

  @Test
  void helpPrintsUsageAndExitsZero() {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    assertEquals(0, main(List.of("--help"), out, new ByteArrayOutputStream()));
    String usage = out.toString(StandardCharsets.UTF_8);
    assertTrue(
        usage.contains("--engine URL")
            && usage.contains("--simulate-gpus")
            && usage.contains("h100-80gb"),
        usage);
    assertTrue(usage.contains("--runtime KIND") && usage.contains("--stop-grace SECONDS"), usage);
  }
}
