package dev.tickmark.cli;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.UUID;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.ScopeType;

/** {@code tickmark ops …}: operator commands, with the operator token instead of an API key. */
@Command(name = "ops", description = "Operator commands (/ops): deposits, ledger audit, evictions, payout runs.",
    subcommands = {OpsCommands.Deposit.class, OpsCommands.Audit.class, OpsCommands.Evict.class, OpsCommands.Payout.class})
final class OpsCommands extends ApiCommand {
  @Option(names = "--operator-token", paramLabel = "TOKEN", scope = ScopeType.INHERIT,
      description = "The node's operator token (else $TICKMARK_OPERATOR_TOKEN).")
  String operatorToken;

  @Override
  int execute() {
    throw new ParameterException(spec.commandLine(), "Missing ops command");
  }

  /** What every {@code ops} subcommand shares: the client with the operator token. */
  abstract static class OpsCommand extends ApiCommand {
    final Http operator() {
      OpsCommands ops = (OpsCommands) spec.parent().userObject();
      String token = firstOf(ops.operatorToken, cli().env.get("TICKMARK_OPERATOR_TOKEN"));
      if (token == null) throw new CliException("no_operator_token", "pass --operator-token or set TICKMARK_OPERATOR_TOKEN");
      return new Http(url(), token);
    }
  }

  @Command(name = "deposit", description = "Credit ACCOUNT with AMOUNT euros; idempotent on --reference (a bank transfer's id, say).")
  static final class Deposit extends OpsCommand {
    @Parameters(index = "0", paramLabel = "ACCOUNT", description = "The account (acc_...).")
    String account;

    @Parameters(index = "1", paramLabel = "AMOUNT", description = "Euros, up to 6 decimals, e.g. 25.00.")
    String amount;

    @Option(names = "--reference", required = true, paramLabel = "REF", description = "Names the deposit: the same reference credits once.")
    String reference;

    @Override
    int execute() {
      ObjectNode body = object();
      body.put("amount", amount);
      body.put("reference", reference);
      Http.Reply reply = operator().postIdempotent("/ops/accounts/" + segment(account) + "/deposits", body, "cli-deposit-" + UUID.randomUUID());
      if (json()) {
        printJson(reply);
        return Cli.EXIT_OK;
      }
      JsonNode d = reply.json();
      if (d.path("duplicate").asBoolean()) {
        out().println("Reference " + reference + " was already deposited (" + d.path("amount").asText() + " EUR to " + account + "); nothing credited again.");
      } else {
        out().println("Deposited " + d.path("amount").asText() + " EUR to " + account + " (reference " + reference + ").");
      }
      return Cli.EXIT_OK;
    }
  }

  @Command(name = "audit", description = "Totals of every ledger entry kind, and whether the books balance (conserved).")
  static final class Audit extends OpsCommand {
    @Override
    int execute() {
      Http.Reply reply = operator().get("/ops/ledger/audit");
      if (json()) {
        printJson(reply);
        return Cli.EXIT_OK;
      }
      JsonNode a = reply.json();
      new Table.Details()
          .add("Conserved", a.path("conserved").asBoolean() ? "yes" : "NO")
          .add("Deposits", AccountCommands.eur(a.get("deposits")))
          .add("Captures", AccountCommands.eur(a.get("captures")))
          .add("Provider earnings", AccountCommands.eur(a.get("provider_earnings")))
          .add("Platform revenue", AccountCommands.eur(a.get("platform_revenue")))
          .add("Holds placed", AccountCommands.eur(a.get("holds_placed")))
          .add("Holds released", AccountCommands.eur(a.get("holds_released")))
          .add("Holds open", AccountCommands.eur(a.get("holds_open")))
          .add("Payouts", AccountCommands.eur(a.get("payouts")))
          .add("Renter balances", AccountCommands.eur(a.get("renter_balances")))
          .add("Provider earnings owed", AccountCommands.eur(a.get("provider_earnings_owed")))
          .add("Pending captures", AccountCommands.eur(a.get("pending_captures")))
          .add("Pending credits", AccountCommands.eur(a.get("pending_credits")))
          .add("Mismatched settlements", a.get("mismatched_settlements"))
          .add("Accounts below zero", a.get("accounts_below_zero"))
          .add("Entries", a.get("entries"))
          .print(out());
      return Cli.EXIT_OK;
    }
  }

  @Command(name = "evict", description = "Take a host off the market at once (fail-closed); its rentals end host_lost.")
  static final class Evict extends OpsCommand {
    @Parameters(paramLabel = "HOST", description = "The host (host_...).")
    String host;

    @Option(names = "--reason", paramLabel = "TEXT", description = "Why, kept on the host (at most 500 characters).")
    String reason;

    @Override
    int execute() {
      ObjectNode body = null;
      if (reason != null) {
        body = object();
        body.put("reason", reason);
      }
      Http.Reply reply = operator().post("/ops/hosts/" + segment(host) + "/evict", body);
      if (json()) {
        printJson(reply);
        return Cli.EXIT_OK;
      }
      JsonNode h = reply.json();
      out().println("Host " + host + " is " + h.path("status").asText() + (h.hasNonNull("eviction_reason") ? ": " + h.get("eviction_reason").asText() : "") + ".");
      return Cli.EXIT_OK;
    }
  }

  /**
   * {@code POST /ops/payouts {"minimum"}} under an {@code Idempotency-Key}; answers {@code 201 {id, created_at, minimum,
   * total, count, payouts: [{account_id, amount, payout_id, status}], skipped}}. The run's exports are
   * {@code GET /ops/payouts/{id}/export.csv} and {@code /export.xml} (ISO 20022 pain.001).
   */
  @Command(name = "payout", description = {"Pay every provider owed at least --minimum euros, as one payout run.",
      "--csv and --pain001 save the run's exports (CSV, ISO 20022 pain.001 XML) for the bank."})
  static final class Payout extends OpsCommand {
    @Option(names = "--minimum", required = true, paramLabel = "EUR", description = "Pay only earnings of at least this much.")
    String minimum;

    @Option(names = "--csv", paramLabel = "FILE", description = "Save the run as CSV.")
    Path csv;

    @Option(names = "--pain001", paramLabel = "FILE", description = "Save the run as a pain.001 credit-transfer file.")
    Path pain001;

    @Option(names = "--idempotency-key", paramLabel = "KEY",
        description = "Sent as Idempotency-Key (default: a fresh one). Reuse it to retry a run without paying twice.")
    String idempotencyKey;

    @Override
    int execute() {
      Http http = operator();
      ObjectNode body = object();
      body.put("minimum", minimum);
      String key = idempotencyKey != null ? idempotencyKey : "cli-payout-" + UUID.randomUUID();
      Http.Reply reply = http.postIdempotent("/ops/payouts", body, key);
      JsonNode run = reply.json();
      String id = run.path("id").asText();
      if (json()) printJson(reply);
      else summary(run);
      if (csv != null) save(http, "/ops/payouts/" + segment(id) + "/export.csv", csv, "CSV");
      if (pain001 != null) save(http, "/ops/payouts/" + segment(id) + "/export.xml", pain001, "pain.001");
      return Cli.EXIT_OK;
    }

    private void summary(JsonNode run) {
      out().println("Payout run " + run.path("id").asText() + " (" + run.path("created_at").asText() + "): " + run.path("count").asInt()
          + " payout(s), total " + run.path("total").asText() + " EUR, minimum " + run.path("minimum").asText() + " EUR.");
      Table payouts = new Table("ACCOUNT", "AMOUNT EUR", "PAYOUT", "STATUS");
      for (JsonNode p : run.path("payouts")) payouts.row(p.get("account_id"), p.get("amount"), p.get("payout_id"), p.get("status"));
      if (!payouts.isEmpty()) payouts.print(out());
      int skipped = run.path("skipped").size();
      if (skipped > 0) out().println(skipped + " account(s) skipped (below the minimum or nothing owed); --json lists them.");
    }

    private void save(Http http, String path, Path file, String what) {
      byte[] content = http.download(path);
      try {
        Files.write(file, content);
      } catch (IOException e) {
        throw new CliException("cannot_write", "the " + what + " export could not be written to " + file + ": " + e.getMessage());
      }
      notes().println(what + " export written to " + file + " (" + content.length + " bytes).");
    }
  }
}
