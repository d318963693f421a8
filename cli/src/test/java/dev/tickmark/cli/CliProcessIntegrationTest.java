package dev.tickmark.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.io.Reader;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The CLI as a real process, with a real stdin, environment and exit status. In Maven's {@code
 * package} phase this runs the shaded {@code cli/target/tickmark.jar} itself ({@code
 * -Dtickmark.cli.jar}, set by cli/pom.xml); in the {@code test} phase, before the jar exists, it
 * runs {@link Main} in a child JVM on the test class path.
 */
class CliProcessIntegrationTest {
  static TestMarket market;

  @TempDir Path temp;

  @BeforeAll
  static void startNode() throws Exception {
    market = TestMarket.start("cli_process");
  }

  @AfterAll
  static void stopNode() throws Exception {
    if (market != null) market.close();
  }

  record Run(int exit, String out, String err) {}

  @Test
  void loginFromAPipeThenAccountAndCatalogAsJson() throws Exception {
    TestMarket.Customer renter = market.signUp("Shell user");
    Path config = temp.resolve("cfg").resolve("config.json");
    Map<String, String> env = Map.of("TICKMARK_CONFIG", config.toString());

    Run login = tickmark(env, renter.apiKey() + "\n", "login", "--url", market.url());
    assertEquals(0, login.exit(), login.err());
    assertTrue(
        login
            .out()
            .startsWith("Logged in to " + market.url() + " as Shell user (" + renter.id() + ")."),
        login.out());
    assertFalse((login.out() + login.err()).contains(renter.apiKey()), "the key is never echoed");
    assertEquals("rw-------", PosixFilePermissions.toString(Files.getPosixFilePermissions(config)));

    Run account = tickmark(env, "", "account");
    assertEquals(0, account.exit(), account.err());
    assertTrue(account.out().contains("Balance:           0.000000 EUR"), account.out());

    Run catalog = tickmark(env, "", "catalog", "--json");
    assertEquals(0, catalog.exit(), catalog.err());
    JsonNode gpus = Http.JSON.readTree(catalog.out()).get("gpus");
    assertTrue(gpus.size() >= 8, catalog.out());
  }

  @Test
  void exitStatusesAreTheDocumentedOnes() throws Exception {
    Map<String, String> env =
        Map.of(
            "TICKMARK_CONFIG", temp.resolve("none.json").toString(), "TICKMARK_URL", market.url());

    Run version = tickmark(env, "", "--version");
    assertEquals(0, version.exit());
    assertTrue(version.out().startsWith("tickmark "), version.out());

    Run badKey = tickmark(env, "", "--api-key", "tmk_nokey_nosecret", "account");
    assertEquals(1, badKey.exit());
    assertEquals("error: unauthorized: the API key is unknown or revoked\n", badKey.err());

    Run usage = tickmark(env, "", "launch");
    assertEquals(2, usage.exit());
    assertTrue(usage.err().startsWith("error: Missing required options"), usage.err());

    String closed;
    try (ServerSocket socket = new ServerSocket(0)) {
      closed = "http://127.0.0.1:" + socket.getLocalPort();
    }
    Run unreachable = tickmark(env, "", "--url", closed, "offers");
    assertEquals(3, unreachable.exit());
    assertEquals(1, unreachable.err().lines().count(), unreachable.err());
    assertTrue(
        unreachable.err().startsWith("error: cannot reach the engine at " + closed),
        unreachable.err());
  }

  /**
   * With stdout a pipe (a script, {@code | tee}, a file), the live meter is one line per tick, each
   * written as it happens: the lines are read from the process's stdout while the rental runs, not
   * after the process has ended.
   */
  @Test
  void usageFollowIntoAPipePrintsOneLinePerTick() throws Exception {
    TestMarket.Customer provider = market.signUp("Piped provider");
    market.listedHost(provider, "eu-de", "2.49", temp.resolve("agent"));
    TestMarket.Customer renter = market.signUp("Piped renter");
    market.call(
        "POST",
        "/ops/accounts/" + renter.id() + "/deposits",
        TestMarket.OPERATOR_TOKEN,
        "{\"amount\":\"20\",\"reference\":\"pipe\"}");
    String id =
        market
            .call(
                "POST",
                "/v1/rentals",
                renter.apiKey(),
                "{\"gpu\":\"h100-80gb\",\"region\":\"eu-de\","
                    + "\"max_price_per_gpu_hour\":\"3.00\",\"image\":\"ubuntu:24.04\",\"command\":[\"sleep\",\"600\"]}")
            .get("rental")
            .get("id")
            .asText();
    Map<String, String> env =
        Map.of(
            "TICKMARK_CONFIG",
            temp.resolve("none.json").toString(),
            "TICKMARK_URL",
            market.url(),
            "TICKMARK_API_KEY",
            renter.apiKey());

    Process follow = start(env, "usage", id, "--follow");
    BlockingQueue<String> lines = new LinkedBlockingQueue<>();
    Thread reader =
        new Thread(
            () -> {
              // lines end at '\n' only, so that a carriage return would show in a line (readLine()
              // would end a line there)
              try (Reader out =
                  new InputStreamReader(follow.getInputStream(), StandardCharsets.UTF_8)) {
                StringBuilder line = new StringBuilder();
                for (int c = out.read(); c != -1; c = out.read()) {
                  if (c != '\n') {
                    line.append((char) c);
                  } else {
                    lines.add(line.toString());
                    line.setLength(0);
                  }
                }
                if (line.length() > 0) lines.add(line.toString());
              } catch (IOException e) {
                lines.add("read failed: " + e);
              }
            },
            "tickmark-stdout");
    reader.setDaemon(true);
    reader.start();
    try {
      // the meter's lines: "<id>  <status>  <seconds> s  <cost> EUR"; three seconds metered while
      // it runs
      Pattern meter =
          Pattern.compile(Pattern.quote(id) + "  (\\w+)  (\\d+) s  (\\d+\\.\\d{6}) EUR");
      List<Long> ticks = new ArrayList<>();
      List<String> seen = new ArrayList<>();
      while (ticks.size() < 3) {
        String line = lines.poll(TestMarket.WAIT.toSeconds(), TimeUnit.SECONDS);
        assertTrue(
            line != null,
            "a line within " + TestMarket.WAIT + " while the rental runs; so far " + seen);
        seen.add(line);
        assertFalse(line.contains("\r"), "no carriage returns into a pipe: " + seen);
        Matcher m = meter.matcher(line);
        assertTrue(m.matches(), "a meter line: " + seen);
        long second = Long.parseLong(m.group(2));
        if (m.group(1).equals("running")
            && second > 0
            && (ticks.isEmpty() || second > ticks.get(ticks.size() - 1))) ticks.add(second);
      }
      assertTrue(follow.isAlive(), "the lines came while the rental runs");

      market.call("POST", "/v1/rentals/" + id + "/stop", renter.apiKey(), "");
      assertTrue(
          follow.waitFor(TestMarket.WAIT.toSeconds(), TimeUnit.SECONDS),
          "follow ends with the rental");
      assertEquals(
          0,
          follow.exitValue(),
          new String(follow.getErrorStream().readAllBytes(), StandardCharsets.UTF_8));
      reader.join(TestMarket.WAIT.toMillis());
      List<String> rest = new ArrayList<>(lines);
      assertFalse(rest.isEmpty(), "the bill after the meter");
      assertTrue(
          rest.get(rest.size() - 1)
              .startsWith("Rental " + id + " ended (stopped_by_renter): billed "),
          rest.toString());
      assertTrue(rest.stream().noneMatch(l -> l.contains("\r")), rest.toString());
    } finally {
      follow.destroyForcibly();
    }
  }

  /**
   * Runs the CLI as a child process with exactly {@code env} (no TICKMARK_* from the developer's
   * shell) and {@code stdin}.
   */
  private static Run tickmark(Map<String, String> env, String stdin, String... args)
      throws IOException, InterruptedException {
    Process process = start(env, args);
    try (OutputStream in = process.getOutputStream()) {
      in.write(stdin.getBytes(StandardCharsets.UTF_8));
    }
    // the outputs are small; read them fully, then the exit status
    String out = new String(process.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    String err = new String(process.getErrorStream().readAllBytes(), StandardCharsets.UTF_8);
    if (!process.waitFor(120, TimeUnit.SECONDS)) {
      process.destroyForcibly();
      throw new AssertionError("tickmark " + String.join(" ", args) + " did not finish");
    }
    return new Run(process.exitValue(), out, err);
  }

  /**
   * Starts the CLI as a child process with exactly {@code env}; its stdin, stdout and stderr are
   * pipes.
   */
  private static Process start(Map<String, String> env, String... args) throws IOException {
    List<String> command = new ArrayList<>();
    command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
    command.addAll(
        List.of("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")); // as bin/tickmark starts it
    String jar = System.getProperty("tickmark.cli.jar");
    if (jar != null) {
      assertTrue(Files.isRegularFile(Path.of(jar)), "the shaded jar exists: " + jar);
      command.addAll(List.of("-jar", jar));
    } else {
      command.addAll(
          List.of(
              "-cp",
              System.getProperty("surefire.test.class.path", System.getProperty("java.class.path")),
              Main.class.getName()));
    }
    command.addAll(List.of(args));
    ProcessBuilder builder = new ProcessBuilder(command);
    builder.environment().keySet().removeIf(name -> name.startsWith("TICKMARK_"));
    builder.environment().putAll(env);
    return builder.start();
  }
}
