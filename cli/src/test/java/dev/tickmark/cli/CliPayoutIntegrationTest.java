package dev.tickmark.cli;

import static dev.tickmark.cli.Eventually.eventually;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import java.math.BigDecimal;
import java.math.RoundingMode;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The CLI's payout and suspension commands against a real node with a payout debtor configured: a
 * provider sets its payout details, a renter (suspended, then resumed) rents its host, and operator
 * payout runs pay the provider its whole-cent earnings once, with CSV and pain.001 exports,
 * skipping it while suspended.
 */
class CliPayoutIntegrationTest {
  static final Duration WAIT = Duration.ofSeconds(30);
  static final String DEBTOR_IBAN = "DE89370400440532013000";
  static final Pattern RENTAL_ID = Pattern.compile("Rental (rnt_[A-Za-z0-9]+)");

  static TestMarket market;

  @TempDir Path temp;

  @BeforeAll
  static void startNode() throws Exception {
    market =
        TestMarket.start(
            "cli_payout",
            Map.of(
                "tickmark.payouts.debtor.name", "Tickmark Operations GmbH",
                "tickmark.payouts.debtor.iban", DEBTOR_IBAN,
                "tickmark.payouts.debtor.bic", "COBADEFFXXX"));
  }

  @AfterAll
  static void stopNode() throws Exception {
    if (market != null) market.close();
  }

  @Test
  void aProviderIsPaidItsWholeCentEarningsOnceWithBankExports() throws Exception {
    TestMarket.Customer provider = market.signUp("Ada Lovelace");
    // 900 EUR/GPU-hour: a few seconds earn well over a cent
    market.listedHost(provider, "eu-nl", "900.00", temp.resolve("agent"));
    TestMarket.Customer renter = market.signUp("Renter");
    CliRunner operator =
        new CliRunner(temp.resolve("operator.json"))
            .withEnv("TICKMARK_URL", market.url())
            .withEnv("TICKMARK_OPERATOR_TOKEN", TestMarket.OPERATOR_TOKEN);
    CliRunner providerCli =
        new CliRunner(temp.resolve("provider.json"))
            .withEnv("TICKMARK_URL", market.url())
            .withEnv("TICKMARK_API_KEY", provider.apiKey());
    CliRunner renterCli =
        new CliRunner(temp.resolve("renter.json"))
            .withEnv("TICKMARK_URL", market.url())
            .withEnv("TICKMARK_API_KEY", renter.apiKey());

    // payout details: checked by the engine, shown masked
    CliRunner.Result badIban =
        providerCli
            .run(
                "account",
                "payout-details",
                "--holder",
                "Ada Lovelace",
                "--iban",
                "NL91 ABNA 0417 1643 01")
            .expect(Cli.EXIT_API_ERROR);
    assertTrue(badIban.err().startsWith("error: invalid_iban: "), badIban.err());
    assertTrue(providerCli.run("account").ok().out().contains("Payout details:    none"));
    assertEquals(
        "Payouts will go to Ada Lovelace, **************4300 (ABNANL2A).\n",
        providerCli
            .run(
                "account",
                "payout-details",
                "--holder",
                "Ada Lovelace",
                "--iban",
                "nl91 abna 0417 1643 00",
                "--bic",
                "ABNANL2A")
            .ok()
            .out());
    assertTrue(
        providerCli
            .run("account")
            .ok()
            .out()
            .contains("Payout details:    Ada Lovelace, **************4300 (ABNANL2A)\n"));

    // a suspended renter cannot launch; resumed, it can
    operator.run("ops", "deposit", renter.id(), "200", "--reference", "bank-1").ok();
    assertEquals(
        "Account "
            + renter.id()
            + " is suspended: chargeback under review. No new rentals, no payouts; running rentals go on.\n",
        operator
            .run("ops", "suspend", renter.id(), "--reason", "chargeback under review")
            .ok()
            .out());
    assertTrue(renterCli.run("account").ok().out().contains("Status:            suspended\n"));
    CliRunner.Result refused =
        renterCli
            .run("launch", "--gpu", "h100-80gb", "--region", "eu-nl", "--max-price", "900.00")
            .expect(Cli.EXIT_API_ERROR);
    assertTrue(refused.err().startsWith("error: account_suspended: "), refused.err());
    assertEquals(
        "Account " + renter.id() + " is active.\n",
        operator.run("ops", "resume", renter.id()).ok().out());
    String rentalId =
        rentalId(
            renterCli
                .run("launch", "--gpu", "h100-80gb", "--region", "eu-nl", "--max-price", "900.00")
                .ok()
                .out());
    eventually(
        WAIT,
        () ->
            assertTrue(
                json(renterCli.run("show", rentalId, "--json")).get("billed_seconds").asLong()
                    >= 5));
    // a running rental cannot be refunded yet: what it will charge is not known
    CliRunner.Result tooEarly =
        operator
            .run("ops", "refund", rentalId, "--reference", "ticket-0", "--reason", "too early")
            .expect(Cli.EXIT_API_ERROR);
    assertTrue(tooEarly.err().startsWith("error: rental_not_ended: "), tooEarly.err());
    String cost =
        json(renterCli.run("stop", rentalId, "--json")).get("rental").get("cost").asText();

    // settled on both sides and seen by the ledger read side, which names a run's candidates
    eventually(
        WAIT,
        () -> {
          JsonNode audit = json(operator.run("ops", "audit", "--json"));
          assertEquals(cost, audit.get("captures").asText());
          assertTrue(audit.get("conserved").asBoolean(), audit.toString());
          assertEquals(
              earnings(providerCli), new BigDecimal(audit.get("provider_earnings_owed").asText()));
        });
    BigDecimal earned = earnings(providerCli);
    BigDecimal owed = earned.setScale(2, RoundingMode.DOWN);
    assertTrue(owed.compareTo(new BigDecimal("0.01")) >= 0, "earned " + earned);
    String owed6 = owed.setScale(6).toPlainString();

    // a suspended provider is skipped with its reason, and paid nothing
    operator.run("ops", "suspend", provider.id()).ok();
    String skippedRun = operator.run("ops", "payout", "--minimum", "0.01").ok().out();
    assertTrue(
        skippedRun.startsWith(
            "Nothing paid: every provider owed at least 0.010000 EUR was skipped (payout run pr_"),
        skippedRun);
    assertTrue(
        skippedRun
            .lines()
            .anyMatch(
                l ->
                    l.matches(
                        provider.id() + "\\s+" + Pattern.quote(owed6) + "\\s+account_suspended")),
        skippedRun);
    assertEquals(earned, earnings(providerCli));
    operator.run("ops", "resume", provider.id()).ok();

    // paid: exactly the whole cents, the sub-cent rest stays owed; the exports name the payout
    Path csv = temp.resolve("payout.csv");
    Path pain001 = temp.resolve("payout.xml");
    String[] payout = {
      "ops",
      "payout",
      "--minimum",
      "0.01",
      "--csv",
      csv.toString(),
      "--pain001",
      pain001.toString(),
      "--idempotency-key",
      "payout-2026-11-29"
    };
    CliRunner.Result paid = operator.run(payout).ok();
    Matcher summary =
        Pattern.compile(
                "Payout run (pr_[0-9a-f]{24}) completed \\S+: paid "
                    + Pattern.quote(owed6)
                    + " EUR to 1 provider\\(s\\)")
            .matcher(paid.out());
    assertTrue(summary.find(), paid.out());
    String runId = summary.group(1);
    Matcher line =
        Pattern.compile(
                provider.id() + "\\s+" + Pattern.quote(owed6) + "\\s+paid\\s+(TM[0-9A-F]{32})\\s+-")
            .matcher(paid.out());
    assertTrue(line.find(), paid.out());
    String endToEndId = line.group(1);
    assertTrue(
        paid.out().contains("CSV export written to " + csv)
            && paid.out().contains("pain.001 export written to " + pain001),
        paid.out());
    assertEquals(earned.subtract(owed), earnings(providerCli));

    String csvText = Files.readString(csv, StandardCharsets.UTF_8);
    assertTrue(
        csvText.startsWith(
            "run_id,payout_id,end_to_end_id,account_id,holder_name,iban,bic,amount,amount_eur,currency\r\n"),
        csvText);
    assertTrue(
        csvText.contains(
            runId
                + ","
                + runId
                + ":"
                + provider.id()
                + ","
                + endToEndId
                + ","
                + provider.id()
                + ",Ada Lovelace,NL91ABNA0417164300,ABNANL2A,"
                + owed6
                + ","
                + owed.toPlainString()
                + ",EUR\r\n"),
        csvText);
    String xml = Files.readString(pain001, StandardCharsets.UTF_8);
    assertTrue(xml.contains("urn:iso:std:iso:20022:tech:xsd:pain.001.001.03"), xml);
    assertTrue(xml.contains("<EndToEndId>" + endToEndId + "</EndToEndId>"), xml);
    assertTrue(xml.contains("<InstdAmt Ccy=\"EUR\">" + owed.toPlainString() + "</InstdAmt>"), xml);
    assertTrue(
        xml.contains("<IBAN>" + DEBTOR_IBAN + "</IBAN>")
            && xml.contains("<IBAN>NL91ABNA0417164300</IBAN>"),
        xml);

    // the same key is the same run: answered again, nothing paid twice
    JsonNode again = json(operator.run(withJson(payout)));
    assertEquals(runId, again.get("id").asText());
    assertEquals(1, again.get("payouts").size());
    assertEquals(endToEndId, again.get("payouts").get(0).get("end_to_end_id").asText());
    assertEquals(earned.subtract(owed), earnings(providerCli));

    // a new run finds nothing owed: it says so, exits 0 and writes no pain.001 (there is no
    // transfer to make)
    Path none = temp.resolve("nothing.xml");
    CliRunner.Result nothing =
        operator.run("ops", "payout", "--minimum", "0.01", "--pain001", none.toString()).ok();
    assertTrue(
        nothing
            .out()
            .startsWith("Nothing paid: no provider is owed at least 0.010000 EUR (payout run pr_"),
        nothing.out());
    assertTrue(
        nothing.out().contains("No pain.001 written to " + none + ": payout run pr_"),
        nothing.out());
    assertFalse(Files.exists(none));
    assertEquals(earned.subtract(owed), earnings(providerCli));

    // the runs, newest first (a read side), and one of them in full
    eventually(
        WAIT,
        () -> {
          String runs = operator.run("ops", "payouts").ok().out();
          assertEquals(4, runs.lines().count(), runs); // header and three runs
          assertTrue(
              runs.lines()
                  .anyMatch(
                      l ->
                          l.matches(
                              runId
                                  + "\\s+completed\\s+\\S+\\s+0\\.010000\\s+"
                                  + Pattern.quote(owed6)
                                  + "\\s+1\\s+0\\s+0\\s+0")),
              runs);
        });
    Path later = temp.resolve("later.csv");
    String shown =
        operator.run("ops", "payouts", "show", runId, "--csv", later.toString()).ok().out();
    assertTrue(shown.contains(endToEndId), shown);
    assertEquals(
        csvText,
        Files.readString(later, StandardCharsets.UTF_8),
        "an export is the same every time");
    CliRunner.Result unknown =
        operator
            .run("ops", "payouts", "show", "pr_000000000000000000000000")
            .expect(Cli.EXIT_API_ERROR);
    assertTrue(unknown.err().startsWith("error: not_found: "), unknown.err());

    // the bank sends the transfer back: the operator records it, the provider is owed it again
    CliRunner.Result badReason =
        operator
            .run("ops", "payout-return", runId, provider.id(), "--reason", "closed")
            .expect(Cli.EXIT_API_ERROR);
    assertTrue(badReason.err().startsWith("error: invalid_reason: "), badReason.err());
    String recorded =
        operator.run("ops", "payout-return", runId, provider.id(), "--reason", "AC04").ok().out();
    assertTrue(
        recorded.startsWith(
            "Payout of "
                + owed6
                + " EUR to "
                + provider.id()
                + " (run "
                + runId
                + ") recorded as returned by the bank (AC04)"),
        recorded);
    assertEquals(earned, earnings(providerCli));
    String account = providerCli.run("account").ok().out();
    assertTrue(
        account.contains("Payout returned:  ") && account.contains("reason AC04 (account closed)"),
        account);
    String afterReturn = operator.run("ops", "payouts", "show", runId).ok().out();
    assertTrue(
        afterReturn.contains("1 payout(s) returned by the bank (" + owed6 + " EUR)"), afterReturn);
    assertTrue(afterReturn.lines().anyMatch(l -> l.contains(endToEndId) && l.contains("returned")));

    // a dispute's outcome: half the rental's cost refunded, then the rest; the renter has it back
    // at once, the provider's earnings give back their share
    BigDecimal charged = new BigDecimal(cost);
    String half = charged.divide(BigDecimal.valueOf(2), 6, RoundingMode.DOWN).toPlainString();
    String[] refund = {
      "ops",
      "refund",
      rentalId,
      "--reference",
      "ticket-1",
      "--amount",
      half,
      "--reason",
      "faulty card"
    };
    String refunded = operator.run(refund).ok().out();
    Matcher refundLine =
        Pattern.compile(
                "Refunded "
                    + Pattern.quote(half)
                    + " EUR of rental "
                    + rentalId
                    + " \\(ticket-1\\): "
                    + Pattern.quote(half)
                    + " of "
                    + Pattern.quote(cost)
                    + " EUR charged is refunded; provider gave back ([0-9.]+), platform ([0-9.]+)\\.\n")
            .matcher(refunded);
    assertTrue(refundLine.matches(), refunded);
    BigDecimal providerBack = new BigDecimal(refundLine.group(1));
    assertEquals(
        new BigDecimal(half), providerBack.add(new BigDecimal(refundLine.group(2))), refunded);
    assertEquals(earned.subtract(providerBack), earnings(providerCli));
    assertEquals(
        new BigDecimal("200").subtract(charged).add(new BigDecimal(half)),
        new BigDecimal(json(renterCli.run("account", "--json")).get("balance").asText()));
    assertEquals(refunded, operator.run(refund).ok().out(), "the same reference, the same refund");
    String refundedLine = "Refunded:\\s+" + Pattern.quote(half) + " EUR";
    String shownRental = renterCli.run("show", rentalId).ok().out();
    assertTrue(shownRental.lines().anyMatch(l -> l.matches(refundedLine)), shownRental);
    String opsRental = operator.run("ops", "rental", rentalId).ok().out();
    assertTrue(opsRental.lines().anyMatch(l -> l.matches(refundedLine)), opsRental);
    assertTrue(
        opsRental
            .lines()
            .anyMatch(
                l ->
                    l.startsWith("Refund ticket-1: " + half + " EUR at ")
                        && l.endsWith(" (faulty card)")),
        opsRental);

    // another amount under the reference, an unknown rental: refused, nothing moves
    CliRunner.Result conflict =
        operator
            .run(
                "ops",
                "refund",
                rentalId,
                "--reference",
                "ticket-1",
                "--amount",
                "0.000001",
                "--reason",
                "faulty card")
            .expect(Cli.EXIT_API_ERROR);
    assertTrue(conflict.err().startsWith("error: idempotency_conflict: "), conflict.err());
    CliRunner.Result unknownRental =
        operator
            .run(
                "ops",
                "refund",
                "rnt_" + "0".repeat(24),
                "--reference",
                "ticket-9",
                "--reason",
                "x")
            .expect(Cli.EXIT_API_ERROR);
    assertTrue(unknownRental.err().startsWith("error: not_found: "), unknownRental.err());

    // the rest, without --amount: the whole charge is back, and nothing is left to refund
    JsonNode rest =
        json(
            operator.run(
                "ops",
                "refund",
                rentalId,
                "--reference",
                "ticket-2",
                "--reason",
                "host broke down",
                "--json"));
    assertEquals(
        charged.subtract(new BigDecimal(half)), new BigDecimal(rest.get("amount").asText()));
    assertEquals(cost, rest.get("refunded").asText());
    assertEquals(cost, rest.get("charged").asText());
    assertEquals(
        new BigDecimal("200").setScale(6),
        new BigDecimal(json(renterCli.run("account", "--json")).get("balance").asText()));
    assertEquals(
        earned.subtract(new BigDecimal(rest.get("provider_reversed").asText())),
        earnings(providerCli));
    CliRunner.Result exceeds =
        operator
            .run("ops", "refund", rentalId, "--reference", "ticket-3", "--reason", "again")
            .expect(Cli.EXIT_API_ERROR);
    assertTrue(exceeds.err().startsWith("error: refund_exceeds_charge: "), exceeds.err());
    // the books: the refunds balance against their reversals
    eventually(
        WAIT,
        () -> {
          String audit = operator.run("ops", "audit").ok().out();
          assertTrue(audit.startsWith("Conserved:"), audit);
          assertTrue(audit.lines().findFirst().orElseThrow().endsWith("yes"), audit);
          assertTrue(
              audit.lines().anyMatch(l -> l.matches("Refunds:\\s+" + Pattern.quote(cost) + " EUR")),
              audit);
          assertTrue(
              audit.lines().anyMatch(l -> l.matches("Pending refunds:\\s+0\\.000000 EUR")), audit);
        });
  }

  private static String[] withJson(String[] args) {
    String[] more = java.util.Arrays.copyOf(args, args.length + 1);
    more[args.length] = "--json";
    return more;
  }

  private static BigDecimal earnings(CliRunner cli) {
    return new BigDecimal(json(cli.run("account", "--json")).get("earnings").asText());
  }

  private static JsonNode json(CliRunner.Result result) {
    try {
      return Http.JSON.readTree(result.ok().out());
    } catch (java.io.IOException e) {
      throw new AssertionError("not JSON: " + result.out(), e);
    }
  }

  private static String rentalId(String output) {
    Matcher m = RENTAL_ID.matcher(output);
    assertTrue(m.find(), output);
    return m.group(1);
  }
}
