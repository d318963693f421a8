package dev.tickmark.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.IOException;
import java.io.OutputStream;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The CLI as a real process, with a real stdin, environment and exit status. In Maven's {@code package} phase this runs
 * the shaded {@code cli/target/tickmark.jar} itself ({@code -Dtickmark.cli.jar}, set by cli/pom.xml); in the
 * {@code test} phase, before the jar exists, it runs {@link Main} in a child JVM on the test class path.
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
    assertTrue(login.out().startsWith("Logged in to " + market.url() + " as Shell user (" + renter.id() + ")."), login.out());
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
    Map<String, String> env = Map.of("TICKMARK_CONFIG", temp.resolve("none.json").toString(), "TICKMARK_URL", market.url());

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
    assertTrue(unreachable.err().startsWith("error: cannot reach the engine at " + closed), unreachable.err());
  }

  /** Runs the CLI as a child process with exactly {@code env} (no TICKMARK_* from the developer's shell) and {@code stdin}. */
  private static Run tickmark(Map<String, String> env, String stdin, String... args) throws IOException, InterruptedException {
    List<String> command = new ArrayList<>();
    command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
    command.addAll(List.of("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")); // as bin/tickmark starts it
    String jar = System.getProperty("tickmark.cli.jar");
    if (jar != null) {
      assertTrue(Files.isRegularFile(Path.of(jar)), "the shaded jar exists: " + jar);
      command.addAll(List.of("-jar", jar));
    } else {
      command.addAll(List.of("-cp", System.getProperty("surefire.test.class.path", System.getProperty("java.class.path")),
          Main.class.getName()));
    }
    command.addAll(List.of(args));
    ProcessBuilder builder = new ProcessBuilder(command);
    builder.environment().keySet().removeIf(name -> name.startsWith("TICKMARK_"));
    builder.environment().putAll(env);
    Process process = builder.start();
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
}
