package dev.tickmark.cli;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.io.PrintWriter;
import java.net.ConnectException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Set;
import java.util.UUID;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.ScopeType;

/** {@code tickmark ops …}: operator commands, with the operator token instead of an API key. */
@Command(
    name = "ops",
    description =
        "Operator commands (/ops): deposits, suspensions, ledger audit, evictions, rentals, refunds,"
            + " payout runs.",
    subcommands = {
      OpsCommands.Deposit.class,
      OpsCommands.Suspend.class,
      OpsCommands.Resume.class,
      OpsCommands.Audit.class,
      OpsCommands.Evict.class,
      OpsCommands.Rental.class,
      OpsCommands.HostRentals.class,
      OpsCommands.Payout.class,
      OpsCommands.Payouts.class,
      OpsCommands.PayoutReturn.class,
      OpsCommands.Refund.class
    })
final class OpsCommands extends ApiCommand {
  @Option(
      names = "--operator-token",
      paramLabel = "TOKEN",
      scope = ScopeType.INHERIT,
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
      if (token == null)
        throw new CliException(
            "no_operator_token", "pass --operator-token or set TICKMARK_OPERATOR_TOKEN");
      return http(url(), token);
    }
  }

  @Command(
      name = "deposit",
      description =
          "Credit ACCOUNT with AMOUNT euros; idempotent on --reference (a bank transfer's id, say).")
  static final class Deposit extends OpsCommand {
    @Parameters(index = "0", paramLabel = "ACCOUNT", description = "The account (acc_...).")
    String account;

    @Parameters(
        index = "1",
        paramLabel = "AMOUNT",
        description = "Euros, up to 6 decimals, e.g. 25.00.")
    String amount;

    @Option(
        names = "--reference",
        required = true,
        paramLabel = "REF",
        description = "Names the deposit: the same reference credits once.")
    String reference;

    @Override
    int execute() {
      ObjectNode body = object();
      body.put("amount", amount);
      body.put("reference", reference);
      Http.Reply reply =
          operator()
              .postIdempotent(
                  "/ops/accounts/" + segment(account) + "/deposits",
                  body,
                  "cli-deposit-" + UUID.randomUUID());
      if (json()) {
        printJson(reply);
        return Cli.EXIT_OK;
      }
      JsonNode d = reply.json();
      if (d.path("duplicate").asBoolean()) {
        out()
            .println(
                "Reference "
                    + reference
                    + " was already deposited ("
                    + d.path("amount").asText()
                    + " EUR to "
                    + account
                    + "); nothing credited again.");
      } else {
        out()
            .println(
                "Deposited "
                    + d.path("amount").asText()
                    + " EUR to "
                    + account
                    + " (reference "
                    + reference
                    + ").");
      }
      return Cli.EXIT_OK;
    }
  }

  @Command(
      name = "audit",
      description = "Totals of every ledger entry kind, and whether the books balance (conserved).")
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
          .add("Storage revenue", AccountCommands.eur(a.get("storage_revenue")))
          .add("Holds placed", AccountCommands.eur(a.get("holds_placed")))
          .add("Holds released", AccountCommands.eur(a.get("holds_released")))
          .add("Holds open", AccountCommands.eur(a.get("holds_open")))
          .add("Payouts", AccountCommands.eur(a.get("payouts")))
          .add("Payouts returned", AccountCommands.eur(a.get("payouts_returned")))
          .add("Refunds", AccountCommands.eur(a.get("refunds")))
          .add("Earnings reversed", AccountCommands.eur(a.get("earnings_reversed")))
          .add("Platform fees reversed", AccountCommands.eur(a.get("platform_fees_reversed")))
          .add("Provider debt", AccountCommands.eur(a.get("provider_debt")))
          .add("Renter balances", AccountCommands.eur(a.get("renter_balances")))
          .add("Provider earnings owed", AccountCommands.eur(a.get("provider_earnings_owed")))
          .add("Pending captures", AccountCommands.eur(a.get("pending_captures")))
          .add("Pending credits", AccountCommands.eur(a.get("pending_credits")))
          .add("Pending refunds", AccountCommands.eur(a.get("pending_refunds")))
          .add("Pending reversals", AccountCommands.eur(a.get("pending_reversals")))
          .add("Mismatched settlements", a.get("mismatched_settlements"))
          .add("Accounts below zero", a.get("accounts_below_zero"))
          .add("Entries", a.get("entries"))
          .print(out());
      return Cli.EXIT_OK;
    }
  }

  @Command(
      name = "evict",
      description = "Take a host off the market at once (fail-closed); its rentals end host_lost.")
  static final class Evict extends OpsCommand {
    @Parameters(paramLabel = "HOST", description = "The host (host_...).")
    String host;

    @Option(
        names = "--reason",
        paramLabel = "TEXT",
        description = "Why, kept on the host (at most 500 characters).")
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
      out()
          .println(
              "Host "
                  + host
                  + " is "
                  + h.path("status").asText()
                  + (h.hasNonNull("eviction_reason")
                      ? ": " + h.get("eviction_reason").asText()
                      : "")
                  + ".");
      return Cli.EXIT_OK;
    }
  }

  @Command(
      name = "rental",
      description = "Any rental in full, live, with its renter, its host and the host's provider.")
  static final class Rental extends OpsCommand {
    @Parameters(paramLabel = "ID", description = "The rental (rnt_...).")
    String id;

    @Override
    int execute() {
      Http.Reply reply = operator().get("/ops/rentals/" + segment(id));
      if (json()) {
        printJson(reply);
        return Cli.EXIT_OK;
      }
      JsonNode r = reply.json();
      new Table.Details()
          .add("Renter", r.get("renter_id"))
          .add("Host", r.hasNonNull("host_id") ? r.get("host_id") : "not matched yet")
          .add("Provider", r.get("provider_id"))
          .print(out());
      RentalCommands.details(r.path("rental"), out());
      // each refund, oldest first: what a dispute decided, and why
      for (JsonNode refund : r.path("refunds"))
        out()
            .println(
                "Refund "
                    + refund.get("reference").asText()
                    + ": "
                    + AccountCommands.eur(refund.get("amount"))
                    + " at "
                    + refund.get("at").asText()
                    + " ("
                    + refund.get("reason").asText()
                    + ")");
      return Cli.EXIT_OK;
    }
  }

  @Command(
      name = "host-rentals",
      description = {
        "The rentals that ran on any host, newest first, each with its renter and what it earned",
        "the provider, and the host's totals."
      })
  static final class HostRentals extends OpsCommand {
    @Parameters(paramLabel = "HOST", description = "The host (host_...).")
    String host;

    @Option(
        names = {"-a", "--all"},
        description =
            "Every rental that ran on the host, not only the newest "
                + HostCommands.Rentals.NEWEST
                + ".")
    boolean all;

    @Override
    int execute() {
      return HostCommands.Rentals.print(
          this, operator(), "/ops/hosts/" + segment(host) + "/rentals", host, all, true);
    }
  }

  @Command(
      name = "suspend",
      description = {
        "Suspend ACCOUNT: no new rentals, no payouts; running rentals go on.",
        "Suspending a suspended account keeps the first reason."
      })
  static final class Suspend extends OpsCommand {
    @Parameters(paramLabel = "ACCOUNT", description = "The account (acc_...).")
    String account;

    @Option(
        names = "--reason",
        paramLabel = "TEXT",
        description = "Why, kept on the account (at most 500 characters).")
    String reason;

    @Override
    int execute() {
      ObjectNode body = object();
      if (reason != null) body.put("reason", reason);
      Http.Reply reply = operator().post("/ops/accounts/" + segment(account) + "/suspend", body);
      if (json()) {
        printJson(reply);
        return Cli.EXIT_OK;
      }
      JsonNode a = reply.json();
      out()
          .println(
              "Account "
                  + account
                  + " is "
                  + a.path("status").asText()
                  + (a.hasNonNull("suspension_reason")
                      ? ": " + a.get("suspension_reason").asText()
                      : "")
                  + ". No new rentals, no payouts; running rentals go on.");
      return Cli.EXIT_OK;
    }
  }

  @Command(
      name = "resume",
      description =
          "Lift ACCOUNT's suspension: it may rent again, and the next payout run pays it.")
  static final class Resume extends OpsCommand {
    @Parameters(paramLabel = "ACCOUNT", description = "The account (acc_...).")
    String account;

    @Override
    int execute() {
      Http.Reply reply = operator().post("/ops/accounts/" + segment(account) + "/resume", null);
      if (json()) {
        printJson(reply);
        return Cli.EXIT_OK;
      }
      out().println("Account " + account + " is " + reply.json().path("status").asText() + ".");
      return Cli.EXIT_OK;
    }
  }

  /**
   * {@code POST /ops/payouts {"minimum"}} under an {@code Idempotency-Key}; answers the completed
   * run (see docs/payouts.md). A run that paid nobody is no failure: it says so and exits 0, and
   * writes no pain.001 (the engine has none: 409 {@code nothing_to_export}).
   */
  @Command(
      name = "payout",
      description = {
        "Pay every provider owed at least --minimum euros (whole cents), as one payout run.",
        "--csv and --pain001 save the run's exports (CSV, ISO 20022 pain.001 XML) for the bank.",
        "A run that pays nobody says so and exits 0; it has no pain.001, so none is written."
      })
  static final class Payout extends OpsCommand {
    @Option(
        names = "--minimum",
        required = true,
        paramLabel = "EUR",
        description = "Pay only earnings of at least this much.")
    String minimum;

    @Option(
        names = "--csv",
        paramLabel = "FILE",
        description = "Save the run's paid payouts as CSV.")
    Path csv;

    @Option(
        names = "--pain001",
        paramLabel = "FILE",
        description = "Save the run as a pain.001.001.03 SEPA credit-transfer file.")
    Path pain001;

    @Option(
        names = "--idempotency-key",
        paramLabel = "KEY",
        description =
            "Names the run (default: a fresh key). The same key again answers the same run: a retry never pays twice.")
    String idempotencyKey;

    /** Answers after which the run may exist and be paying: only the same key reaches it again. */
    private static final Set<String> IN_DOUBT =
        Set.of("unavailable", "database_unavailable", "idempotency_key_in_progress");

    private static String retryHint(String key) {
      return "the run may be under way: run the command again with --idempotency-key "
          + key
          + " to reach it (it never pays twice)";
    }

    @Override
    int execute() {
      Http http = operator();
      ObjectNode body = object();
      body.put("minimum", minimum);
      String key = idempotencyKey != null ? idempotencyKey : "cli-payout-" + UUID.randomUUID();
      Http.Reply reply;
      try {
        reply = http.postIdempotent("/ops/payouts", body, key);
      } catch (CliException e) {
        if (!IN_DOUBT.contains(e.code())) throw e;
        throw new CliException(e.code(), e.detail() + "; " + retryHint(key));
      } catch (UnreachableException e) {
        if (e.getCause() instanceof ConnectException) throw e; // nothing was sent
        throw new UnreachableException(e.getMessage() + "; " + retryHint(key), e.getCause());
      }
      JsonNode run = reply.json();
      if (json()) printJson(reply);
      else Payouts.printRun(out(), run);
      Payouts.export(this, http, run, csv, pain001);
      return Cli.EXIT_OK;
    }
  }

  /**
   * {@code POST /ops/payouts/{run}/returns {"account_id","reason"}}: the bank sent a payout back
   * (docs/payouts.md, "A payout the bank returns"). Safe to run again.
   */
  @Command(
      name = "payout-return",
      description = {
        "Record that the bank returned RUN's payout to ACCOUNT: its amount is owed to the provider again,",
        "and their next payouts wait until they give payout details again. Safe to run again."
      })
  static final class PayoutReturn extends OpsCommand {
    @Parameters(index = "0", paramLabel = "RUN", description = "The payout run (pr_...).")
    String runId;

    @Parameters(index = "1", paramLabel = "ACCOUNT", description = "The provider (acc_...).")
    String account;

    @Option(
        names = "--reason",
        required = true,
        paramLabel = "CODE",
        description =
            "The bank's ISO 20022 return reason code, e.g. AC04 (account closed), AC01 (wrong IBAN).")
    String reason;

    @Override
    int execute() {
      ObjectNode body = object();
      body.put("account_id", account);
      body.put("reason", reason);
      Http.Reply reply = operator().post("/ops/payouts/" + segment(runId) + "/returns", body);
      if (json()) {
        printJson(reply);
        return Cli.EXIT_OK;
      }
      JsonNode run = reply.json();
      String amount = "";
      for (JsonNode p : run.path("payouts"))
        if (account.equals(p.path("account_id").asText())) amount = p.path("amount").asText();
      out()
          .println(
              "Payout of "
                  + amount
                  + " EUR to "
                  + account
                  + " (run "
                  + runId
                  + ") recorded as returned by the bank ("
                  + reason
                  + "): it is owed to the provider again; their payouts wait until they give"
                  + " payout details again.");
      return Cli.EXIT_OK;
    }
  }

  /**
   * {@code POST /ops/rentals/{id}/refunds {"reference","amount","reason"}}: gives back part or all
   * of what an ended rental charged (a dispute's outcome). Idempotent on the reference: safe to run
   * again.
   */
  @Command(
      name = "refund",
      description = {
        "Refund part or all of what the ended rental RENTAL charged: the renter has it back at once,",
        "the provider's earnings and the platform fee give back their shares. Safe to run again",
        "with the same --reference."
      })
  static final class Refund extends OpsCommand {
    @Parameters(paramLabel = "RENTAL", description = "The rental (rnt_...).")
    String rentalId;

    @Option(
        names = "--reference",
        required = true,
        paramLabel = "REF",
        description =
            "Names the refund, e.g. a ticket number (at most 200 characters): the same reference"
                + " refunds once.")
    String reference;

    @Option(
        names = "--amount",
        paramLabel = "EUR",
        description =
            "Euros, up to 6 decimals, e.g. 1.50 (default: all that is left of the rental's charge).")
    String amount;

    @Option(
        names = "--reason",
        required = true,
        paramLabel = "TEXT",
        description = "Why, kept with the refund (at most 500 characters).")
    String reason;

    @Override
    int execute() {
      ObjectNode body = object();
      body.put("reference", reference);
      if (amount != null) body.put("amount", amount);
      body.put("reason", reason);
      Http.Reply reply = operator().post("/ops/rentals/" + segment(rentalId) + "/refunds", body);
      if (json()) {
        printJson(reply);
        return Cli.EXIT_OK;
      }
      JsonNode r = reply.json();
      out()
          .println(
              "Refunded "
                  + r.path("amount").asText()
                  + " EUR of rental "
                  + rentalId
                  + " ("
                  + reference
                  + "): "
                  + r.path("refunded").asText()
                  + " of "
                  + r.path("charged").asText()
                  + " EUR charged is refunded; provider gave back "
                  + r.path("provider_reversed").asText()
                  + ", platform "
                  + r.path("platform_reversed").asText()
                  + ".");
      return Cli.EXIT_OK;
    }
  }

  @Command(
      name = "payouts",
      description =
          "Payout runs, newest first; 'payouts show RUN' shows one and saves its exports.",
      subcommands = Payouts.Show.class)
  static final class Payouts extends OpsCommand {
    @Option(
        names = "--limit",
        paramLabel = "N",
        description = "Runs to list, 1 to 200 (default 50).")
    Integer limit;

    @Override
    int execute() {
      Http.Reply reply = operator().get("/ops/payouts" + query(params("limit", limit)));
      if (json()) {
        printJson(reply);
        return Cli.EXIT_OK;
      }
      Table table =
          new Table(
              "ID",
              "STATUS",
              "CREATED",
              "MINIMUM EUR",
              "TOTAL EUR",
              "PAID",
              "REFUSED",
              "SKIPPED",
              "RETURNED");
      for (JsonNode r : reply.json().path("runs")) {
        table.row(
            r.get("id"),
            r.get("status"),
            r.get("created_at"),
            r.get("minimum"),
            r.get("total"),
            r.get("count"),
            r.get("refused_count"),
            r.get("skipped_count"),
            r.get("returned_count"));
      }
      if (table.isEmpty()) out().println("No payout runs yet.");
      else table.print(out());
      return Cli.EXIT_OK;
    }

    @Command(
        name = "show",
        description =
            "One payout run: its payouts with status and bank reference, and who was skipped.")
    static final class Show extends ApiCommand {
      @Parameters(paramLabel = "RUN", description = "The run (pr_...).")
      String runId;

      @Option(
          names = "--csv",
          paramLabel = "FILE",
          description = "Save the run's paid payouts as CSV.")
      Path csv;

      @Option(
          names = "--pain001",
          paramLabel = "FILE",
          description = "Save the run as a pain.001.001.03 SEPA credit-transfer file.")
      Path pain001;

      @Override
      int execute() {
        Http http = ((Payouts) spec.parent().userObject()).operator();
        Http.Reply reply = http.get("/ops/payouts/" + segment(runId));
        if (json()) printJson(reply);
        else printRun(out(), reply.json());
        export(this, http, reply.json(), csv, pain001);
        return Cli.EXIT_OK;
      }
    }

    static void printRun(PrintWriter out, JsonNode run) {
      String id = run.path("id").asText();
      int paid = 0;
      int refused = 0;
      int returned = 0;
      for (JsonNode p : run.path("payouts")) {
        if ("refused".equals(p.path("status").asText())) refused++;
        else paid++;
        if ("returned".equals(p.path("status").asText())) returned++;
      }
      int skipped = run.path("skipped").size();
      String status = run.path("status").asText();
      if (!"completed".equals(status)) {
        out.println(
            "Payout run "
                + id
                + " is "
                + status
                + " (created "
                + run.path("created_at").asText()
                + ", minimum "
                + run.path("minimum").asText()
                + " EUR): "
                + paid
                + " payout(s) decided so far, total "
                + run.path("total").asText()
                + " EUR.");
      } else if (paid == 0) {
        out.println(
            "Nothing paid: "
                + (skipped > 0
                    ? "every provider owed at least "
                        + run.path("minimum").asText()
                        + " EUR was skipped"
                    : "no provider is owed at least " + run.path("minimum").asText() + " EUR")
                + " (payout run "
                + id
                + ", completed "
                + run.path("completed_at").asText()
                + ").");
      } else {
        out.println(
            "Payout run "
                + id
                + " completed "
                + run.path("completed_at").asText()
                + ": paid "
                + run.path("total").asText()
                + " EUR to "
                + paid
                + " provider(s), minimum "
                + run.path("minimum").asText()
                + " EUR.");
      }
      Table payouts = new Table("ACCOUNT", "AMOUNT EUR", "STATUS", "END-TO-END ID", "REASON");
      for (JsonNode p : run.path("payouts")) {
        payouts.row(
            p.get("account_id"),
            p.get("amount"),
            p.get("status"),
            p.get("end_to_end_id"),
            p.get("reason"));
      }
      if (!payouts.isEmpty()) payouts.print(out);
      if (refused > 0) out.println(refused + " payout(s) refused by the account; they stay owed.");
      if (returned > 0)
        out.println(
            returned
                + " payout(s) returned by the bank ("
                + run.path("returned").asText()
                + " EUR); owed to their providers again.");
      if (skipped > 0) {
        out.println("Skipped " + skipped + " provider(s), still owed:");
        Table skips = new Table("ACCOUNT", "AMOUNT EUR", "REASON");
        for (JsonNode s : run.path("skipped"))
          skips.row(s.get("account_id"), s.get("amount"), s.get("reason"));
        skips.print(out);
      }
    }

    /**
     * Saves the run's exports. They exist once the run completed; a run that paid nobody has no
     * pain.001 (409 {@code nothing_to_export}), which is said instead of failing. Any other refusal
     * (503 {@code payout_debtor_not_configured}) fails the command, after the run it reports has
     * been printed.
     */
    static void export(ApiCommand command, Http http, JsonNode run, Path csv, Path pain001) {
      String id = run.path("id").asText();
      String exports = "/ops/payouts/" + segment(id);
      if (csv != null) save(command, http, exports + "/export.csv", csv, "CSV");
      if (pain001 == null) return;
      try {
        save(command, http, exports + "/export.xml", pain001, "pain.001");
      } catch (CliException e) {
        if (!e.code().equals("nothing_to_export")) {
          throw new CliException(
              e.code(),
              e.detail()
                  + " (payout run "
                  + id
                  + " itself is done; export it later with"
                  + " 'tickmark ops payouts show "
                  + id
                  + " --pain001 FILE')");
        }
        command
            .notes()
            .println(
                "No pain.001 written to "
                    + pain001
                    + ": payout run "
                    + id
                    + " paid nobody, so there is nothing to transfer.");
      }
    }

    private static void save(ApiCommand command, Http http, String path, Path file, String what) {
      byte[] content = http.download(path);
      try {
        Files.write(file, content);
      } catch (IOException e) {
        throw new CliException(
            "cannot_write",
            "the " + what + " export could not be written to " + file + ": " + e.getMessage());
      }
      command
          .notes()
          .println(what + " export written to " + file + " (" + content.length + " bytes).");
    }
  }
}
