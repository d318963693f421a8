package dev.tickmark.cli;

import static dev.tickmark.cli.Eventually.eventually;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import dev.tickmark.agent.Agent;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The CLI in-process against a real node, PostgreSQL and real agents with simulated GPUs: a
 * renter's whole journey (login, account, offers, launch until running, usage, the live meter,
 * stop, ledger), a provider's (registration token, the agent connecting with it, host ls/show,
 * price, drain) and the operator's deposit, audit and eviction.
 */
class CliJourneyIntegrationTest {
  static final Duration WAIT = Duration.ofSeconds(30);
  static final Pattern RENTAL_ID = Pattern.compile("Rental (rnt_[A-Za-z0-9]+)");

  static TestMarket market;

  @TempDir Path temp;

  @BeforeAll
  static void startNode() throws Exception {
    market = TestMarket.start("cli_journey");
  }

  @AfterAll
  static void stopNode() throws Exception {
    if (market != null) market.close();
  }

  @Test
  void renterJourneyFromLoginToLedger() throws Exception {
    TestMarket.Customer provider = market.signUp("GPU provider");
    String hostId = market.listedHost(provider, "eu-nl", "2.49", temp.resolve("agent-nl"));
    TestMarket.Customer renter = market.signUp("Renter");
    CliRunner operator =
        new CliRunner(temp.resolve("operator.json"))
            .withEnv("TICKMARK_OPERATOR_TOKEN", TestMarket.OPERATOR_TOKEN)
            .withEnv("TICKMARK_URL", market.url());

    CliRunner.Result deposit =
        operator.run("ops", "deposit", renter.id(), "50", "--reference", "bank-1").ok();
    assertEquals(
        "Deposited 50.000000 EUR to " + renter.id() + " (reference bank-1).\n", deposit.out());
    assertTrue(
        operator
            .run("ops", "deposit", renter.id(), "50", "--reference", "bank-1")
            .ok()
            .out()
            .contains("already deposited"));

    // login reads the key from stdin, checks it, saves it privately and never prints it
    Path config = temp.resolve("renter").resolve("config.json");
    CliRunner cli = new CliRunner(config);
    CliRunner.Result login =
        cli.runWithInput(renter.apiKey() + "\n", "login", "--url", market.url()).ok();
    assertTrue(
        login
            .out()
            .startsWith("Logged in to " + market.url() + " as Renter (" + renter.id() + ")."),
        login.out());
    assertFalse(
        login.out().contains(renter.apiKey()) || login.err().contains(renter.apiKey()),
        "the key is never echoed");
    assertEquals("rw-------", PosixFilePermissions.toString(Files.getPosixFilePermissions(config)));
    assertEquals(
        "rwx------",
        PosixFilePermissions.toString(Files.getPosixFilePermissions(config.getParent())));

    String account = cli.run("account").ok().out();
    assertTrue(account.contains("Balance:") && account.contains("50.000000 EUR"), account);
    assertTrue(account.contains("Spend cap:         none"), account);
    JsonNode accountJson = Http.JSON.readTree(cli.run("account", "--json").ok().out());
    assertEquals("50.000000", accountJson.get("available").asText());

    eventually(
        WAIT,
        () -> {
          String offers = cli.run("offers", "--gpu", "h100-80gb", "--region", "eu-nl").ok().out();
          assertTrue(
              offers
                  .lines()
                  .anyMatch(
                      l ->
                          l.matches(
                              "h100-80gb\\s+eu-nl\\s+on_demand\\s+2\\s+2\\.490000\\s+1\\s+yes")),
              offers);
        });

    // launch prints the match, then waits like docker run until the workload runs
    CliRunner.Result launch =
        cli.run("launch", "--gpu", "h100-80gb", "--region", "eu-nl", "--max-price", "3.00").ok();
    assertTrue(
        launch
            .out()
            .contains(
                "matched: 1 x h100-80gb in eu-nl at 2.490000 EUR/GPU-hour (on_demand, price frozen for the rental)"),
        launch.out());
    assertTrue(launch.out().contains(" is running since "), launch.out());
    String rentalId = rentalId(launch.out());
    assertEquals("running", rental(cli, rentalId).get("status").asText());
    // ps reads the rentals read side, which has caught up with the launch before it answers
    String ps = cli.run("ps").ok().out();
    assertTrue(ps.lines().anyMatch(l -> l.startsWith(rentalId) && l.contains("running")), ps);
    assertTrue(cli.run("show", rentalId).ok().out().contains("2.490000 EUR/GPU-hour (frozen)"));

    // the live meter: a line a second while it runs (not a terminal here: lines, not one line
    // rewritten); it ends with the rental
    CliRunner.Background follow = cli.start("usage", rentalId, "--follow");
    eventually(
        WAIT,
        () ->
            assertTrue(
                follow
                    .out()
                    .toString()
                    .matches("(?s)(.*\n)?" + rentalId + "  running  [3-9] s  0\\.\\d{6} EUR\n.*"),
                "three seconds metered: " + follow.out()));
    String usage = cli.run("usage", rentalId).ok().out();
    assertTrue(usage.contains("Billed per started hour:  1 h = 2.490000 EUR"), usage);

    CliRunner.Result stop = cli.run("stop", rentalId).ok();
    Matcher billed =
        Pattern.compile(
                "Rental "
                    + rentalId
                    + " ended \\(stopped_by_renter\\): billed (\\d+) s, cost (\\d+\\.\\d{6}) EUR\\.\n")
            .matcher(stop.out());
    assertTrue(billed.matches(), stop.out());
    CliRunner.Result followed = follow.result().get(WAIT.toSeconds(), TimeUnit.SECONDS).ok();
    assertTrue(
        followed
            .out()
            .endsWith(
                "Rental "
                    + rentalId
                    + " ended (stopped_by_renter): billed "
                    + billed.group(1)
                    + " s, cost "
                    + billed.group(2)
                    + " EUR.\n"),
        followed.out());
    long seconds = Long.parseLong(billed.group(1));
    assertTrue(seconds >= 3, "billed " + seconds);
    // cost(s) = floor(2.49 EUR/h x 1 card x s / 3600), in micro-euros
    assertEquals(
        String.format(
            "%d.%06d",
            2_490_000L * seconds / 3600 / 1_000_000, 2_490_000L * seconds / 3600 % 1_000_000),
        billed.group(2));

    // for scripts: the follow of an ended rental is its one "end" event, as a JSON line
    JsonNode end = Http.JSON.readTree(cli.run("usage", rentalId, "--follow", "--json").ok().out());
    assertEquals("end", end.get("event").asText());
    assertEquals("stopped_by_renter", end.get("data").get("end_reason").asText());

    // --detach returns once matched; --json gives scripts the rental
    CliRunner.Result detached =
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
                "sleep",
                "600")
            .ok();
    JsonNode second = Http.JSON.readTree(detached.out()).get("rental");
    assertEquals("2.490000", second.get("price_per_gpu_hour").asText());
    assertTrue(
        detached.err().contains("matched: 1 x h100-80gb in eu-nl"),
        "progress goes to stderr with --json: " + detached.err());
    JsonNode stopped =
        Http.JSON
            .readTree(cli.run("stop", second.get("id").asText(), "--json").ok().out())
            .get("rental");
    assertEquals("ended", stopped.get("status").asText());

    eventually(WAIT, () -> assertTrue(cli.run("ps").ok().out().startsWith("No rentals running")));
    assertTrue(
        cli.run("ps", "--all")
            .ok()
            .out()
            .lines()
            .anyMatch(l -> l.startsWith(rentalId) && l.contains("stopped_by_renter")));

    // the ledger (a read side) shows the deposit, the hold, its release and the capture
    eventually(
        WAIT,
        () -> {
          String ledger = cli.run("ledger").ok().out();
          for (String kind : new String[] {"deposit", "hold", "hold_released", "capture"}) {
            assertTrue(
                ledger.lines().anyMatch(l -> l.matches("\\s*\\d+\\s+\\S+\\s+" + kind + "\\s+.*")),
                kind + " in\n" + ledger);
          }
        });
    JsonNode page = Http.JSON.readTree(cli.run("ledger", "--limit", "1", "--json").ok().out());
    assertEquals(1, page.get("entries").size());
    assertTrue(
        cli.run("ledger", "--limit", "1")
            .ok()
            .out()
            .contains("More: tickmark ledger --after " + page.get("next_after").asText()));

    eventually(
        WAIT,
        () ->
            assertTrue(
                operator
                    .run("ops", "audit")
                    .ok()
                    .out()
                    .startsWith("Conserved:               yes")));
    assertTrue(
        Http.JSON
            .readTree(operator.run("ops", "audit", "--json").ok().out())
            .get("conserved")
            .asBoolean());
    assertTrue(hostId.startsWith("host_"));
  }

  @Test
  void providerRegistersListsAndDrainsAHostThatTheOperatorThenEvicts() throws Exception {
    TestMarket.Customer provider = market.signUp("Provider with a CLI");
    CliRunner cli =
        new CliRunner(temp.resolve("provider.json"))
            .withEnv("TICKMARK_URL", market.url())
            .withEnv("TICKMARK_API_KEY", provider.apiKey());
    assertTrue(cli.run("host", "ls").ok().out().startsWith("No hosts yet"));

    CliRunner.Result token =
        cli.run("host", "token", "--region", "eu-de", "--label", "rack-3/node-7").ok();
    String tokenLine =
        token
            .out()
            .lines()
            .filter(l -> l.startsWith("tmkreg_"))
            .findFirst()
            .orElseThrow(() -> new AssertionError(token.out()));
    assertTrue(
        token
            .out()
            .contains(
                "--engine ws://127.0.0.1:" + market.node.httpPort() + " --token " + tokenLine),
        token.out());
    assertTrue(
        token
            .out()
            .contains(
                "  sudo deploy/agent/install.sh --engine ws://127.0.0.1:"
                    + market.node.httpPort()
                    + " --token "
                    + tokenLine
                    + "\n"),
        "the one-command install: " + token.out());
    Agent agent = market.startAgent(tokenLine, temp.resolve("agent-de"));
    String hostId = agent.welcomed().get(WAIT.toSeconds(), TimeUnit.SECONDS).hostId();
    assertTrue(token.out().startsWith("Host " + hostId + " in eu-de"), token.out());

    eventually(
        WAIT,
        () -> {
          String ls = cli.run("host", "ls").ok().out();
          assertTrue(
              ls.lines()
                  .anyMatch(
                      l ->
                          l.matches(
                              hostId
                                  + "\\s+eu-de\\s+rack-3/node-7\\s+verified\\s+online,simulated\\s+h100-80gb\\s+2\\s+2\\s+-\\s+-\\s+"
                                  + "\\S+\\s+0 of 0")),
              ls);
        });
    String show = cli.run("host", "show", hostId).ok().out();
    assertTrue(show.contains("Status:") && show.contains("verified"), show);
    assertTrue(
        show.lines().anyMatch(l -> l.matches("\\s+0\\s+h100-80gb\\s+free\\s+\\S+")),
        "cards table:\n" + show);
    assertTrue(
        show.lines().anyMatch(l -> l.matches("signature\\s+pass\\s+.*")), "checks table:\n" + show);
    assertTrue(show.lines().anyMatch(l -> l.matches("benchmark\\s+not_measured\\s+.*")), show);
    // how the agent runs rentals, and whether one with network can run here, as its report said
    boolean network =
        Http.JSON
            .readTree(cli.run("host", "show", hostId, "--json").ok().out())
            .at("/runtime/network")
            .asBoolean();
    assertTrue(
        show.lines()
            .anyMatch(
                l ->
                    l.matches(
                        "Runtime:\\s+"
                            + agent.runtimeName()
                            + (network
                                ? ", rentals with network run here"
                                : ", no network for rentals: those that ask for it go to other hosts"))),
        show);
    // and in the list, briefly (the RUNTIME column)
    String runtimeCell = agent.runtimeName() + (network ? "" : "/no-net");
    String listed = cli.run("host", "ls").ok().out();
    assertTrue(
        listed
            .lines()
            .anyMatch(
                l ->
                    l.startsWith(hostId)
                        && l.matches(
                            ".*\\s" + java.util.regex.Pattern.quote(runtimeCell) + "\\s+0 of 0")),
        listed);

    CliRunner.Result price =
        cli.run(
                "host",
                "price",
                hostId,
                "--on-demand",
                "2.10",
                "--spot",
                "1.20",
                "--spot-notice",
                "300")
            .ok();
    assertEquals(
        "Host "
            + hostId
            + " listed: on demand 2.100000 EUR/GPU-hour, spot 1.200000 EUR/GPU-hour with 300 s notice.\n",
        price.out());
    // re-pricing keeps what is not named (the spot terms)
    assertTrue(
        cli.run("host", "price", hostId, "--on-demand", "2.20")
            .ok()
            .out()
            .contains("on demand 2.200000 EUR/GPU-hour, spot 1.200000"));
    eventually(
        WAIT,
        () -> {
          String offers = cli.run("offers", "--region", "eu-de").ok().out();
          assertTrue(
              offers
                  .lines()
                  .anyMatch(
                      l ->
                          l.matches(
                              "h100-80gb\\s+eu-de\\s+on_demand\\s+2\\s+2\\.200000\\s+1\\s+yes")),
              offers);
          assertTrue(
              offers
                  .lines()
                  .anyMatch(
                      l -> l.matches("h100-80gb\\s+eu-de\\s+spot\\s+2\\s+1\\.200000\\s+1\\s+yes")),
              offers);
        });
    // capacity for rentals with network: this host's, if it can give it (CI: slirp4netns)
    String withNetwork = cli.run("offers", "--region", "eu-de", "--network").ok().out();
    if (network)
      assertTrue(
          withNetwork
              .lines()
              .anyMatch(
                  l -> l.matches("h100-80gb\\s+eu-de\\s+on_demand\\s+2\\s+2\\.200000\\s+1\\s+yes")),
          withNetwork);
    else assertEquals("No offers match.\n", withNetwork);
    // capacity by runtime: this host's own, and none where another is asked for
    String ownRuntime =
        cli.run("offers", "--region", "eu-de", "--runtime", agent.runtimeName()).ok().out();
    assertTrue(
        ownRuntime
            .lines()
            .anyMatch(
                l -> l.matches("h100-80gb\\s+eu-de\\s+on_demand\\s+2\\s+2\\.200000\\s+1\\s+yes")),
        ownRuntime);
    String other = agent.runtimeName().equals("docker") ? "sandbox" : "docker";
    assertEquals(
        "No offers match.\n",
        cli.run("offers", "--region", "eu-de", "--runtime", other).ok().out());
    CliRunner.Result unknown = cli.run("offers", "--runtime", "podman").expect(Cli.EXIT_API_ERROR);
    assertTrue(
        unknown.err().contains("runtime must be one of docker, sandbox, process"), unknown.err());

    assertEquals(
        "Host " + hostId + " is draining: no new rentals; 0 card(s) still rented.\n",
        cli.run("host", "drain", hostId).ok().out());
    eventually(
        WAIT,
        () ->
            assertEquals("No offers match.\n", cli.run("offers", "--region", "eu-de").ok().out()));
    assertTrue(
        Http.JSON
            .readTree(cli.run("host", "show", hostId, "--json").ok().out())
            .get("draining")
            .asBoolean());

    CliRunner operator = cli.withEnv("TICKMARK_OPERATOR_TOKEN", TestMarket.OPERATOR_TOKEN);
    assertEquals(
        "Host " + hostId + " is evicted: failed burn-in.\n",
        operator.run("ops", "evict", hostId, "--reason", "failed burn-in").ok().out());
    assertEquals(
        "evicted",
        Http.JSON
            .readTree(cli.run("host", "show", hostId, "--json").ok().out())
            .get("status")
            .asText());
    // a provider's key is no operator token
    CliRunner.Result refused =
        cli.withEnv("TICKMARK_OPERATOR_TOKEN", provider.apiKey())
            .run("ops", "evict", hostId)
            .expect(Cli.EXIT_API_ERROR);
    assertTrue(refused.err().startsWith("error: unauthorized: "), refused.err());
  }

  @Test
  void withoutAPayoutDebtorARunStillCompletesButHasNoPain001() throws Exception {
    CliRunner operator =
        new CliRunner(temp.resolve("operator.json"))
            .withEnv("TICKMARK_OPERATOR_TOKEN", TestMarket.OPERATOR_TOKEN)
            .withEnv("TICKMARK_URL", market.url());
    Path csv = temp.resolve("run.csv");
    Path pain001 = temp.resolve("run.xml");
    CliRunner.Result result =
        operator
            .run(
                "ops",
                "payout",
                "--minimum",
                "1000.00",
                "--csv",
                csv.toString(),
                "--pain001",
                pain001.toString())
            .expect(Cli.EXIT_API_ERROR);
    assertTrue(
        result
            .out()
            .startsWith(
                "Nothing paid: no provider is owed at least 1000.000000 EUR (payout run pr_"),
        result.out());
    assertTrue(
        Files.readString(csv).startsWith("run_id,payout_id,end_to_end_id,"),
        "the CSV needs no debtor");
    assertTrue(
        result
            .err()
            .matches(
                "error: payout_debtor_not_configured: .+ \\(payout run (pr_\\w+) itself is done; export it later with"
                    + " 'tickmark ops payouts show \\1 --pain001 FILE'\\)\n"),
        result.err());
    assertFalse(Files.exists(pain001));
  }

  private static String rentalId(String output) {
    Matcher m = RENTAL_ID.matcher(output);
    assertTrue(m.find(), output);
    return m.group(1);
  }

  private static JsonNode rental(CliRunner cli, String id) throws Exception {
    return Http.JSON.readTree(cli.run("show", id, "--json").ok().out());
  }
}
