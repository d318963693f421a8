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
                "tmkreg_h_s",
                "--insecure") // plain ws:// off loopback
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
  void caFromTheFlagOrTheEnvironmentAndABrokenBundleIsBadUsage() throws Exception {
    Path ca = tmp.resolve("ca.pem");
    javax.net.ssl.TrustManagerFactory system =
        javax.net.ssl.TrustManagerFactory.getInstance(
            javax.net.ssl.TrustManagerFactory.getDefaultAlgorithm());
    system.init((java.security.KeyStore) null);
    var anyCa =
        ((javax.net.ssl.X509TrustManager) system.getTrustManagers()[0]).getAcceptedIssuers()[0];
    java.nio.file.Files.writeString(
        ca,
        "-----BEGIN CERTIFICATE-----\n"
            + java.util.Base64.getMimeEncoder().encodeToString(anyCa.getEncoded())
            + "\n-----END CERTIFICATE-----\n");
    assertEquals(
        ca,
        parse("--engine", "wss://n", "--token", "tmkreg_h_s", "--ca", ca.toString())
            .config()
            .caFile());
    assertEquals(
        ca,
        Arguments.parse(
                List.of("--engine", "wss://n", "--token", "tmkreg_h_s"),
                Map.of(Arguments.CA_ENV, ca.toString()))
            .config()
            .caFile());
    assertNull(parse("--engine", "wss://n", "--token", "tmkreg_h_s").config().caFile());
    Path junk = tmp.resolve("junk.pem");
    java.nio.file.Files.writeString(junk, "not a certificate\n");
    Arguments.UsageException bad =
        assertThrows(
            Arguments.UsageException.class,
            () -> parse("--engine", "wss://n", "--token", "tmkreg_h_s", "--ca", junk.toString()));
    assertTrue(bad.getMessage().startsWith("bad --ca: "), bad.getMessage());
    assertThrows(
        Arguments.UsageException.class,
        () ->
            parse(
                "--engine",
                "wss://n",
                "--token",
                "tmkreg_h_s",
                "--ca",
                tmp.resolve("missing.pem").toString()));
  }

  @Test
  void stateDirAndSimulatedGpus() throws Exception {
    AgentConfig c =
        parse(
                "--engine",
                "wss://a",
                "--state-dir",
                tmp.toString(),
                "--simulate-gpus",
                "h100-80gb:2")
            .config();
    assertEquals(tmp, c.stateDir());
    assertEquals("h100-80gb:2", c.simulatedGpus().toString());
    assertTrue(c.simulated());
  }

  @Test
  void withoutRuntimeFlagTheRuntimeIsChosenWhenTheAgentStarts() throws Exception {
    // null: RuntimeChoice picks one for the machine (RuntimeChoiceTest)
    assertEquals(null, parse("--engine", "wss://a").config().runtime());
    assertEquals(
        null, parse("--engine", "wss://a", "--simulate-gpus", "h100-80gb:2").config().runtime());
    assertEquals(null, AgentConfig.of("wss://a", null, tmp).runtime());
    assertEquals(null, AgentConfig.simulated("wss://a", null, tmp, "h100-80gb:1").runtime());
    assertEquals(
        java.time.Duration.ofSeconds(10), parse("--engine", "wss://a").config().stopGrace());
  }

  @Test
  void runtimeAndStopGraceFlags() throws Exception {
    AgentConfig c =
        parse(
                "--engine",
                "wss://a",
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
        parse("--engine", "wss://a", "--runtime=process", "--simulate-gpus", "h100-80gb:1")
            .config()
            .runtime());
    assertEquals(
        AgentConfig.RuntimeKind.PROCESS,
        AgentConfig.simulated("wss://a", null, tmp, "h100-80gb:1")
            .withRuntime(AgentConfig.RuntimeKind.PROCESS)
            .runtime());
    assertEquals(
        AgentConfig.RuntimeKind.SANDBOX,
        parse("--engine", "wss://a", "--runtime", "sandbox").config().runtime());
  }

  @Test
  void sshIdleTimeoutFlag() throws Exception {
    assertEquals(
        AgentConfig.DEFAULT_SSH_IDLE_TIMEOUT,
        parse("--engine", "wss://a").config().sshIdleTimeout());
    assertEquals(
        java.time.Duration.ofMinutes(5),
        parse("--engine", "wss://a", "--ssh-idle-timeout", "5").config().sshIdleTimeout());
  }

  @Test
  void tokenFromTheEnvironmentWhenNotGiven() throws Exception {
    assertEquals(
        "tmkreg_x_y",
        Arguments.parse(
                List.of("--engine", "wss://a"), Map.of("TICKMARK_AGENT_TOKEN", "tmkreg_x_y"))
            .config()
            .token());
    assertEquals(
        "tmkreg_flag",
        Arguments.parse(
                List.of("--engine", "wss://a", "--token", "tmkreg_flag"),
                Map.of("TICKMARK_AGENT_TOKEN", "tmkreg_env"))
            .config()
            .token());
  }

  @Test
  void helpAndVersion() throws Exception {
    assertTrue(parse("--help").help());
    assertTrue(parse("--engine", "wss://a", "--version").version());
  }

  @ParameterizedTest
  @ValueSource(
      strings = {
        "", // no engine
        "--engine", // no value
        "--engine ftp://a", // bad scheme
        "--engine wss://a?x=1", // query
        "--engine wss://a --simulate-gpus h100:2", // unknown model
        "--engine wss://a --simulate-gpus h100-80gb:0", // no cards
        "--engine wss://a --simulate-gpus", // no value
        "--engine wss://a --frobnicate", // unknown flag
        "--engine wss://a --token --state-dir /tmp", // flag where a value belongs
        "--engine wss://a --runtime podman", // unknown runtime
        "--engine wss://a --runtime", // no value
        "--engine wss://a --stop-grace -1", // negative
        "--engine wss://a --stop-grace 10s", // not a number
        "--engine wss://a --stop-grace 100000", // too long
        "--engine wss://a --ssh-idle-timeout 0", // not positive
        "--engine wss://a --ssh-idle-timeout 5m", // not a number
      })
  void badUsage(String line) {
    List<String> args = line.isEmpty() ? List.of() : List.of(line.split(" "));
    assertThrows(Arguments.UsageException.class, () -> Arguments.parse(args, Map.of()));
  }

  // ---- plain ws:// engines off loopback (issue 17, item 6)

  @Test
  void aPlainWsEngineOffLoopbackIsRefusedWithOneLine() {
    Arguments.UsageException e =
        assertThrows(
            Arguments.UsageException.class,
            () -> parse("--engine", "ws://host.example:8080", "--token", "tmkreg_h_s"));
    assertTrue(e.getMessage().contains("'ws://host.example:8080'"), e.getMessage());
    assertTrue(e.getMessage().contains("clear text"), e.getMessage());
    assertTrue(e.getMessage().contains("wss://"), e.getMessage());
    assertTrue(e.getMessage().contains("--insecure"), e.getMessage());
    assertEquals(1, e.getMessage().lines().count(), "one line");
  }

  @ParameterizedTest
  @ValueSource(
      strings = {
        "http://host.example", // http means ws
        "host.example:8080", // no scheme means ws
        "ws://10.0.0.5:8080", // a private address is still off loopback
        "ws://128.0.0.1:8080",
        "ws://127.0.0.1.example:8080", // a name, not the literal
        "ws://localhost.example:8080",
        "ws://[::2]:8080",
        "ws://[::ffff:10.0.0.1]:8080",
        "ws://0.0.0.0:8080",
      })
  void everyPlainEngineOffLoopbackIsRefused(String engine) {
    assertThrows(Arguments.UsageException.class, () -> parse("--engine", engine));
    // also when it is not the first in the list
    assertThrows(
        Arguments.UsageException.class,
        () -> parse("--engine", "wss://a," + engine, "--engine", "ws://127.0.0.1:1"));
  }

  @ParameterizedTest
  @ValueSource(
      strings = {
        "ws://127.0.0.1:8080",
        "ws://127.255.0.9:8080",
        "ws://localhost:8080",
        "ws://LOCALHOST:8080",
        "ws://[::1]:8080",
        "ws://[0:0:0:0:0:0:0:1]:8080",
        "http://127.0.0.1:8080/v1/agent/connect",
        "wss://host.example",
        "https://host.example:8443/tickmark",
        "wss://10.0.0.5:8080",
      })
  void loopbackAndTlsEnginesAreAccepted(String engine) throws Exception {
    AgentConfig c = parse("--engine", engine).config();
    assertEquals(false, c.insecure());
    assertNull(c.insecureWarning(), "nothing travels in clear text off this machine");
  }

  @Test
  void inProcessConfigsOnLoopbackKeepWorkingAndOthersAreRefused() {
    assertEquals(
        URI.create("ws://127.0.0.1:8080"),
        AgentConfig.simulated("ws://127.0.0.1:8080", null, tmp, "h100-80gb:1").engines().get(0));
    assertEquals(
        URI.create("ws://localhost:9"),
        AgentConfig.of("ws://localhost:9", null, tmp).engines().get(0));
    IllegalArgumentException e =
        assertThrows(
            IllegalArgumentException.class,
            () ->
                new AgentConfig(
                    List.of(URI.create("ws://127.0.0.1:1"), URI.create("ws://host.example:1")),
                    null,
                    tmp,
                    null));
    assertTrue(e.getMessage().contains("ws://host.example:1"), e.getMessage());
  }

  @Test
  void insecureAcceptsAPlainEngineOffLoopbackAndWarnsAtStart() throws Exception {
    AgentConfig c =
        parse("--engine", "ws://host.example", "--engine", "wss://b", "--insecure").config();
    assertTrue(c.insecure());
    assertEquals(List.of(URI.create("ws://host.example"), URI.create("wss://b")), c.engines());
    String warning = c.insecureWarning();
    assertTrue(warning.contains("clear text"), warning);
    assertTrue(warning.contains("ws://host.example"), warning);
    assertTrue(!warning.contains("wss://b"), "names only the plain ones: " + warning);
    // the carried flags survive the with… copies
    assertTrue(c.withStopGrace(java.time.Duration.ofSeconds(1)).insecure());

    // logged as a WARN when the agent starts (here it then stops: no token, no credential)
    ch.qos.logback.classic.Logger logger =
        (ch.qos.logback.classic.Logger) org.slf4j.LoggerFactory.getLogger(Agent.class);
    ch.qos.logback.core.read.ListAppender<ch.qos.logback.classic.spi.ILoggingEvent> appender =
        new ch.qos.logback.core.read.ListAppender<>();
    appender.start();
    logger.addAppender(appender);
    try {
      ByteArrayOutputStream err = new ByteArrayOutputStream();
      int status =
          main(
              List.of(
                  "--engine",
                  "ws://host.example:1",
                  "--insecure",
                  "--state-dir",
                  tmp.resolve("state").toString()),
              new ByteArrayOutputStream(),
              err);
      assertEquals(Main.EXIT_USAGE, status, "stopped by the missing token, after the warning");
      assertTrue(
          appender.list.stream()
              .anyMatch(
                  ev ->
                      ev.getLevel() == ch.qos.logback.classic.Level.WARN
                          && ev.getFormattedMessage().contains("clear text")
                          && ev.getFormattedMessage().contains("ws://host.example:1")),
          appender.list.toString());
    } finally {
      logger.detachAppender(appender);
    }
  }

  @Test
  void refusedPlainEngineExitsWithUsageStatusAndOneLine() {
    ByteArrayOutputStream err = new ByteArrayOutputStream();
    assertEquals(
        Main.EXIT_USAGE,
        main(List.of("--engine", "ws://host.example:8080"), new ByteArrayOutputStream(), err));
    String text = err.toString(StandardCharsets.UTF_8);
    assertTrue(text.startsWith("tickmark-agent: refusing the plain engine address"), text);
    assertEquals(2, text.lines().count(), "the reason and 'Try --help.': " + text);
  }

  // ---- --runtime process with real GPUs (issue 17, item 6)

  @Test
  void processRuntimeWithRealGpusIsRefusedUnlessAllowUnsandboxed() throws Exception {
    Arguments.UsageException e =
        assertThrows(
            Arguments.UsageException.class,
            () -> parse("--engine", "wss://a", "--runtime", "process"));
    assertTrue(e.getMessage().contains("--allow-unsandboxed"), e.getMessage());
    assertTrue(e.getMessage().contains("isolates nothing"), e.getMessage());
    assertEquals(1, e.getMessage().lines().count(), "one line");
    assertThrows(
        IllegalArgumentException.class,
        () -> AgentConfig.of("wss://a", null, tmp).withRuntime(AgentConfig.RuntimeKind.PROCESS));

    AgentConfig allowed =
        parse("--engine", "wss://a", "--runtime", "process", "--allow-unsandboxed").config();
    assertEquals(AgentConfig.RuntimeKind.PROCESS, allowed.runtime());
    assertTrue(allowed.allowUnsandboxed());
    assertTrue(allowed.withStopGrace(java.time.Duration.ofSeconds(1)).allowUnsandboxed());

    AgentConfig simulated =
        parse("--engine", "wss://a", "--runtime", "process", "--simulate-gpus", "h100-80gb:1")
            .config();
    assertEquals(AgentConfig.RuntimeKind.PROCESS, simulated.runtime());
    assertEquals(false, simulated.allowUnsandboxed());

    // the other runtimes, and the default, need no flag
    assertEquals(
        AgentConfig.RuntimeKind.SANDBOX,
        parse("--engine", "wss://a", "--runtime", "sandbox").config().runtime());
    assertNull(parse("--engine", "wss://a").config().runtime());
  }

  @Test
  void refusedProcessRuntimeExitsWithUsageStatus() {
    ByteArrayOutputStream err = new ByteArrayOutputStream();
    assertEquals(
        Main.EXIT_USAGE,
        main(
            List.of("--engine", "ws://127.0.0.1:1", "--runtime", "process"),
            new ByteArrayOutputStream(),
            err));
    String text = err.toString(StandardCharsets.UTF_8);
    assertTrue(text.startsWith("tickmark-agent: refusing --runtime process"), text);
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
    assertTrue(usage.contains("--insecure") && usage.contains("--allow-unsandboxed"), usage);
  }
}
