package dev.tickmark.cli;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;

/** The caller's own account: {@code login}, {@code account}, {@code ledger}. */
final class AccountCommands {
  private AccountCommands() {}

  @Command(
      name = "login",
      description = {
        "Check an API key against the node (GET /v1/account) and save it with the URL.",
        "The key comes from --api-key or stdin (typed without echo on a terminal); it is never printed.",
        "Saved to ~/.config/tickmark/config.json (or $TICKMARK_CONFIG), folder 0700, file 0600."
      })
  static final class Login extends ApiCommand {
    @Override
    int execute() {
      String url = url();
      String key = root().apiKey != null ? root().apiKey.strip() : readKey();
      if (key.isEmpty())
        throw new ParameterException(
            spec.commandLine(), "No API key: pass --api-key or write it to stdin");
      Http http = http(url, key);
      Http.Reply reply = http.get("/v1/account");
      JsonNode account = reply.json();
      new Config(url, key, http.caFile() == null ? null : http.caFile().toString())
          .save(configPath());
      if (json()) {
        printJson(reply);
      } else {
        out()
            .println(
                "Logged in to "
                    + url
                    + " as "
                    + account.path("name").asText()
                    + " ("
                    + account.path("id").asText()
                    + ").");
        out().println("Saved to " + configPath() + ".");
      }
      return Cli.EXIT_OK;
    }

    private String readKey() {
      if (cli().console != null) {
        char[] typed = cli().console.readPassword("API key: ");
        if (typed == null) return "";
        String key = new String(typed).strip();
        Arrays.fill(typed, ' ');
        return key;
      }
      try {
        String line =
            new BufferedReader(new InputStreamReader(cli().in, StandardCharsets.UTF_8)).readLine();
        return line == null ? "" : line.strip();
      } catch (IOException e) {
        return "";
      }
    }
  }

  @Command(
      name = "account",
      description = {
        "Your balance, held amount, what is available, provider earnings, spend cap and payout details.",
        "'account payout-details' sets where your earnings are paid."
      },
      subcommands = AccountCommands.PayoutDetails.class)
  static final class Show extends ApiCommand {
    @Override
    int execute() {
      Http.Reply reply = withApiKey().get("/v1/account");
      if (json()) {
        printJson(reply);
        return Cli.EXIT_OK;
      }
      JsonNode a = reply.json();
      Table.Details details =
          new Table.Details()
              .add("Account", a.path("id").asText() + " (" + a.path("name").asText() + ")")
              .add("Status", a.path("status").asText("active"))
              .add("Balance", eur(a.get("balance")))
              .add("Held", eur(a.get("held")))
              .add("Available", eur(a.get("available")))
              .add("Earnings", eur(a.get("earnings")))
              .add(
                  "Spend cap",
                  a.path("spend_cap_monthly").isNull()
                      ? "none"
                      : eur(a.get("spend_cap_monthly")) + " a month")
              .add("Spent this month", eur(a.get("spent_this_month")))
              .add("Payout details", payoutDetails(a.get("payout_details")));
      JsonNode returned = a.path("payout_returned");
      if (returned.isObject()) details.add("Payout returned", payoutReturned(returned));
      details.print(out());
      return Cli.EXIT_OK;
    }
  }

  /** What the bank said of a returned payout, and what to do. */
  static String payoutReturned(JsonNode r) {
    String text =
        r.path("reason_text").isTextual() ? " (" + r.get("reason_text").asText() + ")" : "";
    return eur(r.get("amount"))
        + " returned by the bank "
        + r.path("at").asText()
        + ", reason "
        + r.path("reason").asText()
        + text
        + "; it is owed to you again, and payouts wait until you give payout details again"
        + " (tickmark account payout-details)";
  }

  @Command(
      name = "payout-details",
      description = {
        "Set where payout runs pay your earnings: a SEPA bank account in euros (PUT /v1/account/payout-details).",
        "The IBAN may have spaces and lower case; it is checked (SEPA country, length, checksum) and shown masked.",
        "Replacing the details affects later payout runs only."
      })
  static final class PayoutDetails extends ApiCommand {
    @Option(
        names = "--holder",
        required = true,
        paramLabel = "NAME",
        description = "The account holder's name, 1 to 70 characters.")
    String holder;

    @Option(
        names = "--iban",
        required = true,
        paramLabel = "IBAN",
        description = "e.g. \"DE89 3704 0044 0532 0130 00\".")
    String iban;

    @Option(
        names = "--bic",
        paramLabel = "BIC",
        description = "The bank's BIC, 8 or 11 characters (optional in SEPA).")
    String bic;

    @Override
    int execute() {
      ObjectNode body = object();
      body.put("holder_name", holder);
      body.put("iban", iban);
      if (bic != null) body.put("bic", bic);
      Http.Reply reply = withApiKey().put("/v1/account/payout-details", body);
      if (json()) {
        printJson(reply);
        return Cli.EXIT_OK;
      }
      out()
          .println("Payouts will go to " + payoutDetails(reply.json().get("payout_details")) + ".");
      return Cli.EXIT_OK;
    }
  }

  @Command(
      name = "ledger",
      description =
          "Your ledger entries, oldest first (deposit, hold, hold_released, capture, earning, payout).")
  static final class Ledger extends ApiCommand {
    @Option(
        names = "--limit",
        paramLabel = "N",
        description = "Entries per page, 1 to 500 (default 100).")
    Integer limit;

    @Option(
        names = "--after",
        paramLabel = "CURSOR",
        description = "Start after this entry (the cursor a previous page printed).")
    String after;

    @Override
    int execute() {
      Http.Reply reply =
          withApiKey().get("/v1/account/ledger" + query(params("limit", limit, "after", after)));
      if (json()) {
        printJson(reply);
        return Cli.EXIT_OK;
      }
      JsonNode page = reply.json();
      Table table = new Table("ID", "AT", "KIND", "AMOUNT", "RENTAL", "KEY");
      for (JsonNode e : page.path("entries")) {
        table.row(
            e.get("id"),
            e.get("at"),
            e.get("kind"),
            e.get("amount"),
            e.get("rental_id"),
            e.get("key"));
      }
      if (table.isEmpty()) out().println("No ledger entries.");
      else table.print(out());
      if (page.hasNonNull("next_after"))
        out().println("More: tickmark ledger --after " + page.get("next_after").asText());
      return Cli.EXIT_OK;
    }
  }

  /**
   * {@code Ada Lovelace, ******************3000 (COBADEFFXXX)}: the engine masks the IBAN but for
   * its last four characters.
   */
  static String payoutDetails(JsonNode details) {
    if (details == null || details.isNull())
      return "none (set them with 'tickmark account payout-details')";
    return details.path("holder_name").asText()
        + ", "
        + details.path("iban").asText()
        + (details.hasNonNull("bic") ? " (" + details.get("bic").asText() + ")" : "");
  }

  /** {@code "12.500000"} as {@code 12.500000 EUR}. */
  static String eur(JsonNode amount) {
    return amount == null || amount.isNull() ? "-" : amount.asText() + " EUR";
  }
}
