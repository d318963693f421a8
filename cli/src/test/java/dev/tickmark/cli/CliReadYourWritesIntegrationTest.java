package dev.tickmark.cli;

import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import java.nio.file.Path;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A script's {@code tickmark launch; tickmark ps} and {@code tickmark ops deposit; tickmark ledger}
 * see what the first command did, with no retry in between. The node's read side is slowed down on
 * purpose (new events reach the projections one to four seconds after they are written), so a list
 * that did not wait for its projection would miss it.
 */
class CliReadYourWritesIntegrationTest {
  static final Pattern RENTAL_ID = Pattern.compile("Rental (rnt_[A-Za-z0-9]+)");

  static TestMarket market;

  @TempDir Path temp;

  @BeforeAll
  static void startNode() throws Exception {
    market =
        TestMarket.start(
            "cli_read_your_writes",
            Map.of(
                "jdbc-read-journal.refresh-interval", "2s",
                "jdbc-read-journal.journal-sequence-retrieval.query-delay", "2s",
                "tickmark.http.read-your-writes-wait", "15s"));
  }

  @AfterAll
  static void stopNode() throws Exception {
    if (market != null) market.close();
  }

  @Test
  void ledgerShowsTheDepositJustMade() {
    TestMarket.Customer renter = market.signUp("Depositor");
    CliRunner operator =
        new CliRunner(temp.resolve("operator.json"))
            .withEnv("TICKMARK_OPERATOR_TOKEN", TestMarket.OPERATOR_TOKEN)
            .withEnv("TICKMARK_URL", market.url());
    CliRunner cli =
        new CliRunner(temp.resolve("renter.json"))
            .withEnv("TICKMARK_URL", market.url())
            .withEnv("TICKMARK_API_KEY", renter.apiKey());

    operator.run("ops", "deposit", renter.id(), "50", "--reference", "script-1").ok();
    String ledger = cli.run("ledger").ok().out();
    assertTrue(
        ledger.lines().anyMatch(l -> l.matches("\\s*\\d+\\s+\\S+\\s+deposit\\s+50\\.000000\\s+.*")),
        ledger);
  }

  @Test
  void psListsTheRentalJustLaunched() throws Exception {
    TestMarket.Customer provider = market.signUp("Provider");
    market.listedHost(provider, "eu-fr", "2.49", temp.resolve("agent"));
    TestMarket.Customer renter = market.signUp("Scripted renter");
    market.call(
        "POST",
        "/ops/accounts/" + renter.id() + "/deposits",
        TestMarket.OPERATOR_TOKEN,
        "{\"amount\":\"50\",\"reference\":\"ps\"}");
    CliRunner cli =
        new CliRunner(temp.resolve("renter.json"))
            .withEnv("TICKMARK_URL", market.url())
            .withEnv("TICKMARK_API_KEY", renter.apiKey());

    // --detach: back as soon as the rental is matched
    String detached =
        cli.run(
                "launch",
                "--gpu",
                "h100-80gb",
                "--region",
                "eu-fr",
                "--max-price",
                "3.00",
                "--detach",
                "--json")
            .ok()
            .out();
    String first = Http.JSON.readTree(detached).get("rental").get("id").asText();
    String ps = cli.run("ps").ok().out();
    assertTrue(
        ps.lines().anyMatch(l -> l.startsWith(first + " ")),
        "ps right after launch --detach:\n" + ps);

    // a launch that waits until the workload runs: ps shows it running
    String launched =
        cli.run("launch", "--gpu", "h100-80gb", "--region", "eu-fr", "--max-price", "3.00")
            .ok()
            .out();
    Matcher second = RENTAL_ID.matcher(launched);
    assertTrue(second.find(), launched);
    JsonNode listed = null;
    for (JsonNode r : Http.JSON.readTree(cli.run("ps", "--json").ok().out()).get("rentals")) {
      if (r.get("id").asText().equals(second.group(1))) listed = r;
    }
    assertTrue(
        listed != null && listed.get("status").asText().equals("running"),
        "ps right after launch: " + listed);
  }
}
