package dev.tickmark.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * API errors through the CLI against a real node: exit 1 and exactly one line, {@code error:
 * <code>: <detail>}, with the problem's own code; stdout stays empty, also with {@code --json}.
 */
class CliErrorsIntegrationTest {
  static TestMarket market;

  @TempDir Path temp;

  @BeforeAll
  static void startNode() throws Exception {
    market = TestMarket.start("cli_errors");
  }

  @AfterAll
  static void stopNode() throws Exception {
    if (market != null) market.close();
  }

  private CliRunner cli(String apiKey) {
    CliRunner runner =
        new CliRunner(temp.resolve("config.json")).withEnv("TICKMARK_URL", market.url());
    return apiKey == null ? runner : runner.withEnv("TICKMARK_API_KEY", apiKey);
  }

  private static void assertProblem(CliRunner.Result result, String code) {
    result.expect(Cli.EXIT_API_ERROR);
    assertEquals("", result.out(), "nothing on stdout");
    assertEquals(1, result.err().lines().count(), result.err());
    assertTrue(result.err().startsWith("error: " + code + ": "), result.err());
  }

  @Test
  void anUnknownKeyIsUnauthorizedAndLoginSavesNothing() {
    assertProblem(cli("tmk_nokey_nosecret").run("account"), "unauthorized");
    assertProblem(cli("tmk_nokey_nosecret").run("account", "--json"), "unauthorized");
    CliRunner.Result login = cli(null).runWithInput("tmk_nokey_nosecret\n", "login");
    assertProblem(login, "unauthorized");
    assertFalse(login.err().contains("nosecret"), "the key is never echoed");
    assertFalse(Files.exists(temp.resolve("config.json")), "a refused key is not saved");
  }

  @Test
  void anEmptyKeyOnStdinIsBadUsage() {
    cli(null).runWithInput("\n", "login").expect(Cli.EXIT_USAGE);
  }

  @Test
  void anUnknownGpuIsRefusedByTheEngine() {
    TestMarket.Customer renter = market.signUp("Typo");
    CliRunner.Result result =
        cli(renter.apiKey()).run("launch", "--gpu", "h100-80gbx", "--max-price", "3");
    assertProblem(result, "unknown_gpu");
    assertEquals("error: unknown_gpu: no GPU model \"h100-80gbx\" in the catalog\n", result.err());
    assertProblem(cli(null).run("offers", "--gpu", "nope"), "unknown_gpu");
    assertProblem(cli(null).run("offers", "--tier", "cheap"), "invalid_tier");
  }

  @Test
  void aLaunchWithoutFundsIsInsufficientFunds() {
    TestMarket.Customer renter = market.signUp("Broke");
    assertProblem(
        cli(renter.apiKey()).run("launch", "--gpu", "h100-80gb", "--max-price", "3.00"),
        "insufficient_funds");
  }

  @Test
  void aLaunchThatFindsNoCapacityEndsNonZeroWithTheReason() {
    TestMarket.Customer renter = market.signUp("Patient");
    CliRunner operator = cli(null).withEnv("TICKMARK_OPERATOR_TOKEN", TestMarket.OPERATOR_TOKEN);
    operator.run("ops", "deposit", renter.id(), "10", "--reference", "seed").ok();
    CliRunner cli = cli(renter.apiKey());
    String[] launch = {
      "launch",
      "--gpu",
      "a10-24gb",
      "--region",
      "ap-sg",
      "--max-price",
      "0.50",
      "--wait-seconds",
      "1",
      "--idempotency-key",
      "patient-1"
    };
    CliRunner.Result first = cli.run(launch).expect(Cli.EXIT_API_ERROR);
    assertTrue(
        first
            .out()
            .contains(
                "is waiting for capacity: 1 x a10-24gb at or below 0.50 EUR/GPU-hour (up to 1 s)"),
        first.out());
    String reason = first.err().lines().reduce((a, b) -> b).orElseThrow();
    assertTrue(
        reason.matches(
            "error: no_capacity: no host offered 1 x a10-24gb at or below 0\\.500000 EUR/GPU-hour in time; "
                + "nothing was charged \\(rental rnt_\\w+\\)"),
        reason);
    // the same Idempotency-Key answers with the same rental rather than renting again
    CliRunner.Result again = cli.run(launch).expect(Cli.EXIT_API_ERROR);
    assertEquals(reason, again.err().lines().reduce((a, b) -> b).orElseThrow());
    assertTrue(cli.run("account").ok().out().contains("Balance:           10.000000 EUR"));
  }

  @Test
  void someoneElsesOrAMissingResourceIsNotFound() {
    TestMarket.Customer renter = market.signUp("Nosy");
    assertProblem(cli(renter.apiKey()).run("show", "rnt_doesnotexist"), "not_found");
    assertProblem(cli(renter.apiKey()).run("host", "drain", "host_doesnotexist"), "not_found");
    assertProblem(cli(renter.apiKey()).run("usage", "../account"), "not_found");
  }

  @Test
  void badAmountsAndReferencesAreTheEnginesToJudge() {
    TestMarket.Customer renter = market.signUp("Depositor");
    CliRunner operator = cli(null).withEnv("TICKMARK_OPERATOR_TOKEN", TestMarket.OPERATOR_TOKEN);
    assertProblem(
        operator.run("ops", "deposit", renter.id(), "1.1234567", "--reference", "r1"),
        "invalid_amount");
    assertProblem(
        operator.run("ops", "deposit", renter.id(), "-5", "--reference", "r1"), "invalid_amount");
    operator.run("ops", "deposit", renter.id(), "5", "--reference", "r2").ok();
    assertProblem(
        operator.run("ops", "deposit", renter.id(), "6", "--reference", "r2"),
        "idempotency_conflict");
    assertProblem(
        cli(null).withEnv("TICKMARK_OPERATOR_TOKEN", "wrong").run("ops", "audit"), "unauthorized");
  }
}
