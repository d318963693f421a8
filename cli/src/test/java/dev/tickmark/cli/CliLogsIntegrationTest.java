package dev.tickmark.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code tickmark logs} against a real node and the real agent: {@code -f} follows a running
 * rental's output until it ends (stdout lines on stdout, stderr lines on stderr), then the whole
 * log, the tail and the JSON lines are read back.
 */
class CliLogsIntegrationTest {
  static TestMarket market;

  @TempDir Path temp;

  @BeforeAll
  static void startNode() throws Exception {
    market = TestMarket.start("cli_logs");
  }

  @AfterAll
  static void stopNode() throws Exception {
    if (market != null) market.close();
  }

  @Test
  void followsARentalsOutputUntilItEndsAndReadsItBack() throws Exception {
    TestMarket.Customer provider = market.signUp("Log provider");
    market.listedHost(provider, "eu-nl", "2.49", temp.resolve("agent"));
    TestMarket.Customer renter = market.signUp("Log renter");
    CliRunner operator =
        new CliRunner(temp.resolve("operator.json"))
            .withEnv("TICKMARK_OPERATOR_TOKEN", TestMarket.OPERATOR_TOKEN)
            .withEnv("TICKMARK_URL", market.url());
    operator.run("ops", "deposit", renter.id(), "20", "--reference", "logs-1").ok();
    CliRunner cli =
        new CliRunner(temp.resolve("renter.json"))
            .withEnv("TICKMARK_URL", market.url())
            .withEnv("TICKMARK_API_KEY", renter.apiKey());
    Path go = temp.resolve("go");
    String script =
        "echo hello; sleep 0.2; echo oops >&2; while [ ! -f "
            + go
            + " ]; do sleep 0.05; done; echo bye; exit 4";
    JsonNode launched =
        Http.JSON.readTree(
            cli.run(
                    "launch",
                    "--gpu",
                    "h100-80gb",
                    "--region",
                    "eu-nl",
                    "--max-price",
                    "3.00",
                    "--detach",
                    "--json",
                    "--",
                    "sh",
                    "-c",
                    script)
                .ok()
                .out());
    String id = launched.get("rental").get("id").asText();

    CliRunner.Background following = cli.start("logs", id, "-f");
    // Both earlier lines are in before the last is let out: stdout and stderr are two pipes, which
    // the agent reads apart, so a "bye" written just after "oops" may be read first (it was, once,
    // in CI: the tail's last line was then "oops", on stderr).
    Eventually.eventually(
        TestMarket.WAIT,
        () -> {
          assertTrue(following.out().toString().contains("hello"));
          assertTrue(following.err().toString().contains("oops"));
        });
    Files.writeString(go, ""); // the workload prints its last line and exits: the rental ends

    CliRunner.Result followed =
        following.result().get(TestMarket.WAIT.toSeconds(), TimeUnit.SECONDS);
    followed.ok();
    assertEquals("hello\nbye\n", followed.out(), "stdout lines, in order, once each");
    assertEquals("oops\n", followed.err(), "stderr lines on stderr");

    CliRunner.Result all = cli.run("logs", id).ok();
    assertEquals("hello\nbye\n", all.out());
    assertEquals("oops\n", all.err());
    assertEquals("bye\n", cli.run("logs", id, "--tail", "1").ok().out());
    List<JsonNode> lines =
        cli.run("logs", id, "--json").ok().out().lines().map(CliLogsIntegrationTest::json).toList();
    assertEquals(List.of(1L, 2L, 3L), lines.stream().map(l -> l.get("seq").asLong()).toList());
    assertEquals(
        List.of("stdout", "stderr", "stdout"),
        lines.stream().map(l -> l.get("stream").asText()).toList());
    String shown = cli.run("show", id).ok().out();
    assertTrue(
        shown.lines().anyMatch(l -> l.matches("Exit code:\\s+4")),
        "the workload's exit status: " + shown);
    assertTrue(shown.lines().anyMatch(l -> l.matches("End reason:\\s+workload_exited")), shown);
    String usage = cli.run("usage", id, "--follow").ok().out();
    assertTrue(
        usage.contains("Rental " + id + " ended (workload_exited, exit code 4): billed "), usage);
    assertEquals(2, cli.run("logs", id, "--tail", "0").exit(), "bad usage");
    assertEquals(1, cli.run("logs", "rnt_nosuchrental1").exit(), "an API error: not_found");
  }

  private static JsonNode json(String line) {
    try {
      return Http.JSON.readTree(line);
    } catch (Exception e) {
      throw new AssertionError(line, e);
    }
  }
}
