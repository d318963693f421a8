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
    String hostId = market.listedHost(provider, "eu-nl", "2.49", temp.resolve("agent"));
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
                    // the test market's host runs rentals as processes (TestMarket)
                    "--runtime",
                    "process",
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
    // what it was launched with
    assertTrue(shown.lines().anyMatch(l -> l.matches("Image:\\s+ubuntu:24.04")), shown);
    assertTrue(
        shown
            .lines()
            .anyMatch(
                l ->
                    l.matches("Command:\\s+sh -c '" + java.util.regex.Pattern.quote(script) + "'")),
        shown);
    assertTrue(shown.lines().anyMatch(l -> l.matches("Network:\\s+off")), shown);
    assertTrue(
        shown
            .lines()
            .anyMatch(
                l ->
                    l.matches(
                        "Runtime:\\s+process \\(the host's own system: the image is not used\\)")),
        shown);
    JsonNode listed = null;
    for (JsonNode r : json(cli.run("ps", "--all", "--json").ok().out()).get("rentals"))
      if (r.get("id").asText().equals(id)) listed = r;
    assertEquals(
        List.of("sh", "-c", script),
        Http.JSON.convertValue(listed.get("command"), List.class),
        String.valueOf(listed));
    assertEquals("ubuntu:24.04", listed.get("image").asText());
    String ps = cli.run("ps", "--all").ok().out();
    assertTrue(
        ps.lines().anyMatch(l -> l.startsWith(id) && l.endsWith("workload_exited, exit code 4")),
        "the exit status in the list: " + ps);
    String usage = cli.run("usage", id, "--follow").ok().out();
    assertTrue(
        usage.contains("Rental " + id + " ended (workload_exited, exit code 4): billed "), usage);
    assertEquals(2, cli.run("logs", id, "--tail", "0").exit(), "bad usage");
    assertEquals(1, cli.run("logs", "rnt_nosuchrental1").exit(), "an API error: not_found");

    // the provider's view of its host: the rental, what it earned them, the host's totals
    CliRunner providerCli =
        new CliRunner(temp.resolve("provider.json"))
            .withEnv("TICKMARK_URL", market.url())
            .withEnv("TICKMARK_API_KEY", provider.apiKey());
    JsonNode bill = json(cli.run("show", id, "--json").ok().out());
    String earned =
        dev.tickmark.engine.money.Money.format(
            dev.tickmark.engine.money.Metering.providerShare(
                dev.tickmark.engine.money.Money.parse(bill.get("cost").asText()), 1500));
    String hostRentals = providerCli.run("host", "rentals", hostId).ok().out();
    String row =
        hostRentals
            .lines()
            .filter(l -> l.startsWith(id))
            .findFirst()
            .orElseThrow(() -> new AssertionError(hostRentals));
    assertTrue(
        row.matches(
            java.util.regex.Pattern.quote(id)
                + "\\s+ended\\s+h100-80gb\\s+1\\s+on_demand\\s+2\\.490000\\s+\\S+\\s+"
                + bill.get("billed_seconds").asLong()
                + "\\s+"
                + java.util.regex.Pattern.quote(earned)
                + "\\s+workload_exited"),
        hostRentals);
    assertTrue(
        hostRentals.endsWith(
            "Host "
                + hostId
                + ": 1 rental, "
                + bill.get("billed_seconds").asLong()
                + " card-seconds billed, earned "
                + earned
                + " EUR.\n"),
        hostRentals);
    JsonNode hostJson = json(providerCli.run("host", "rentals", hostId, "--json").ok().out());
    assertEquals(earned, hostJson.get("totals").get("earned").asText());
    assertEquals(id, hostJson.get("rentals").get(0).get("id").asText());
    CliRunner.Result notTheirs = cli.run("host", "rentals", hostId).expect(Cli.EXIT_API_ERROR);
    assertTrue(notTheirs.err().startsWith("error: not_found: "), notTheirs.err());

    // an operator's view: the same row with the renter in it, and the rental whole
    String opsRentals = operator.run("ops", "host-rentals", hostId).ok().out();
    assertTrue(
        opsRentals
            .lines()
            .anyMatch(
                l ->
                    l.startsWith(id)
                        && l.matches(
                            java.util.regex.Pattern.quote(id)
                                + "\\s+"
                                + renter.id()
                                + "\\s+ended\\s+h100-80gb\\s+1\\s+on_demand\\s+2\\.490000\\s+\\S+\\s+"
                                + bill.get("billed_seconds").asLong()
                                + "\\s+"
                                + java.util.regex.Pattern.quote(earned)
                                + "\\s+workload_exited")),
        opsRentals);
    assertTrue(opsRentals.lines().findFirst().orElseThrow().matches("ID\\s+RENTER\\s+STATUS.*"));
    assertTrue(opsRentals.endsWith(hostRentals.lines().reduce((a, b) -> b).orElseThrow() + "\n"));
    JsonNode opsJson = json(operator.run("ops", "host-rentals", hostId, "--json").ok().out());
    assertEquals(renter.id(), opsJson.get("rentals").get(0).get("renter_id").asText());
    assertEquals(id, opsJson.get("rentals").get(0).get("rental").get("id").asText());
    String whole = operator.run("ops", "rental", id).ok().out();
    assertTrue(whole.lines().anyMatch(l -> l.matches("Renter:\\s+" + renter.id())), whole);
    assertTrue(whole.lines().anyMatch(l -> l.matches("Host:\\s+" + hostId)), whole);
    assertTrue(whole.lines().anyMatch(l -> l.matches("Provider:\\s+" + provider.id())), whole);
    assertTrue(whole.lines().anyMatch(l -> l.matches("Rental:\\s+" + id)), whole);
    assertEquals(
        bill.get("cost"),
        json(operator.run("ops", "rental", id, "--json").ok().out()).get("rental").get("cost"));
    CliRunner.Result noOperator = cli.run("ops", "rental", id).expect(Cli.EXIT_API_ERROR);
    assertTrue(noOperator.err().startsWith("error: no_operator_token: "), noOperator.err());
  }

  /**
   * {@code launch --follow} is {@code docker run} for a rental: the workload's stdout on stdout,
   * the rest (its stderr, the launch's own lines) on stderr, until it ends; the CLI then exits with
   * the workload's exit status, or 1 when the rental ended otherwise (here: the renter stopped it).
   */
  @Test
  void launchFollowShowsTheWorkloadsOutputAndExitsWithItsStatus() throws Exception {
    TestMarket.Customer provider = market.signUp("Follow provider");
    market.listedHost(provider, "eu-de", "2.49", temp.resolve("agent"));
    TestMarket.Customer renter = market.signUp("Follow renter");
    new CliRunner(temp.resolve("operator.json"))
        .withEnv("TICKMARK_OPERATOR_TOKEN", TestMarket.OPERATOR_TOKEN)
        .withEnv("TICKMARK_URL", market.url())
        .run("ops", "deposit", renter.id(), "20", "--reference", "follow-1")
        .ok();
    CliRunner cli =
        new CliRunner(temp.resolve("renter.json"))
            .withEnv("TICKMARK_URL", market.url())
            .withEnv("TICKMARK_API_KEY", renter.apiKey());
    String[] launch = {"launch", "--gpu", "h100-80gb", "--region", "eu-de", "--max-price", "3.00"};

    CliRunner.Result failed =
        cli.run(
            concat(
                launch,
                "--follow",
                "--",
                "sh",
                "-c",
                "echo out; echo err >&2; sleep 0.2; echo done; exit 7"));
    failed.expect(7);
    assertEquals("out\ndone\n", failed.out(), "only the workload's stdout: " + failed.err());
    assertTrue(failed.err().contains("\nerr\n"), failed.err());
    assertTrue(
        failed.err().contains(" ended (workload_exited, exit code 7): billed "), failed.err());

    CliRunner.Result succeeded = cli.run(concat(launch, "-f", "--", "true"));
    succeeded.ok();
    assertEquals("", succeeded.out());

    // Without --follow, a workload that ends at once succeeds too, also when it ended before the
    // launch saw it run (LaunchQuickWorkloadTest makes that happen every time).
    CliRunner.Result quick = cli.run(concat(launch, "--", "true"));
    quick.ok();

    // JSON: the log lines, then the ended rental
    List<String> jsonLines =
        cli.run(concat(launch, "--follow", "--json", "--", "sh", "-c", "echo one; exit 3"))
            .expect(3)
            .out()
            .lines()
            .toList();
    assertEquals(2, jsonLines.size(), jsonLines.toString());
    assertEquals("one", json(jsonLines.get(0)).get("text").asText());
    assertEquals(3, json(jsonLines.get(1)).get("rental").get("exit_code").asInt());

    // Stopped while followed: 1, and the end reason on stderr
    CliRunner.Background following =
        cli.start(concat(launch, "--follow", "--", "sh", "-c", "echo started; sleep 600"));
    Eventually.eventually(
        TestMarket.WAIT, () -> assertTrue(following.out().toString().contains("started")));
    java.util.regex.Matcher id =
        java.util.regex.Pattern.compile("Rental (rnt_\\w+) ").matcher(following.err().toString());
    assertTrue(id.find(), following.err().toString());
    cli.run("stop", id.group(1)).ok();
    CliRunner.Result stopped =
        following.result().get(TestMarket.WAIT.toSeconds(), TimeUnit.SECONDS).expect(1);
    assertEquals("started\n", stopped.out());
    assertTrue(stopped.err().contains(" ended (stopped"), stopped.err());

    assertEquals(
        2, cli.run(concat(launch, "--follow", "--detach", "--", "true")).exit(), "bad usage");
  }

  private static String[] concat(String[] first, String... more) {
    String[] all = java.util.Arrays.copyOf(first, first.length + more.length);
    System.arraycopy(more, 0, all, first.length, more.length);
    return all;
  }

  private static JsonNode json(String line) {
    try {
      return Http.JSON.readTree(line);
    } catch (Exception e) {
      throw new AssertionError(line, e);
    }
  }
}
