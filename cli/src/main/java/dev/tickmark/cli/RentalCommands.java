package dev.tickmark.cli;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.PrintWriter;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

/** The caller's rentals: {@code ps}, {@code show}, {@code stop}, {@code usage}. */
final class RentalCommands {
  static final int PAGE = 200;

  private RentalCommands() {}

  @Command(
      name = "ps",
      description = "Your rentals, newest first: those not ended yet, or all with --all.")
  static final class Ps extends ApiCommand {
    @Option(
        names = "--status",
        paramLabel = "STATUS",
        description = "Only this status: pending, provisioning, running, stopping, ended.")
    String status;

    @Option(
        names = {"-a", "--all"},
        description = "Include ended rentals.")
    boolean all;

    @Override
    int execute() {
      Http http = withApiKey();
      ArrayNode rentals = Http.JSON.createArrayNode();
      String after = null;
      do {
        JsonNode page =
            http.get("/v1/rentals" + query(params("status", status, "limit", PAGE, "after", after)))
                .json();
        for (JsonNode r : page.path("rentals")) {
          if (all || status != null || !RentalEvents.ended(r)) rentals.add(r);
        }
        after = page.hasNonNull("next_after") ? page.get("next_after").asText() : null;
      } while (after != null);
      if (json()) {
        ObjectNode list = object();
        list.set("rentals", rentals);
        out().println(list);
        return Cli.EXIT_OK;
      }
      Table table =
          new Table(
              "ID",
              "STATUS",
              "GPU",
              "CARDS",
              "TIER",
              "REGION",
              "EUR/GPU-H",
              "BILLED S",
              "COST EUR",
              "CREATED",
              "END REASON");
      for (JsonNode r : rentals) {
        table.row(
            r.get("id"),
            r.get("status"),
            r.get("gpu"),
            r.get("count"),
            r.get("tier"),
            r.get("region"),
            r.get("price_per_gpu_hour"),
            r.get("billed_seconds"),
            r.get("cost"),
            r.get("created_at"),
            r.hasNonNull("end_reason") ? RentalEvents.endReason(r) : null);
      }
      if (table.isEmpty())
        out()
            .println(
                all || status != null
                    ? "No rentals."
                    : "No rentals running (tickmark ps --all shows ended ones).");
      else table.print(out());
      return Cli.EXIT_OK;
    }
  }

  @Command(name = "show", description = "One rental in full.")
  static final class Show extends ApiCommand {
    @Parameters(paramLabel = "ID", description = "The rental (rnt_...).")
    String id;

    @Override
    int execute() {
      Http.Reply reply = withApiKey().get("/v1/rentals/" + segment(id));
      if (json()) printJson(reply);
      else details(reply.json(), out());
      return Cli.EXIT_OK;
    }
  }

  @Command(
      name = "stop",
      description =
          "Stop a rental: metering stops now; waits until it has ended and prints the bill.")
  static final class Stop extends ApiCommand {
    @Parameters(paramLabel = "ID", description = "The rental (rnt_...).")
    String id;

    @Option(names = "--no-wait", description = "Return at once, while the rental is stopping.")
    boolean noWait;

    @Option(
        names = "--snapshot",
        description =
            "Keep the workspace as a snapshot (storage is billed by the second once it is ready; see tickmark snapshots).")
    boolean snapshot;

    @Override
    int execute() {
      Http http = withApiKey();
      ObjectNode body = null;
      if (snapshot) {
        body = object();
        body.put("snapshot", true);
      }
      Http.Reply reply = http.post("/v1/rentals/" + segment(id) + "/stop", body);
      JsonNode rental = reply.json().path("rental");
      if (!noWait && !RentalEvents.ended(rental))
        rental = RentalEvents.follow(http, id, RentalEvents::ended, event -> {});
      if (json()) {
        if (noWait) printJson(reply);
        else out().println(object().set("rental", rental));
      } else if (RentalEvents.ended(rental)) {
        out().println("Rental " + id + " " + RentalEvents.ending(rental, "ended") + ".");
      } else {
        out()
            .println(
                "Rental "
                    + id
                    + " is "
                    + rental.path("status").asText()
                    + "; metering has stopped.");
      }
      if (!json() && rental.hasNonNull("snapshot_id"))
        out()
            .println(
                "Snapshot "
                    + rental.get("snapshot_id").asText()
                    + " is uploading: tickmark snapshots shows when it is ready.");
      return Cli.EXIT_OK;
    }
  }

  @Command(
      name = "usage",
      description = {
        "What a rental has cost: billed seconds, cost, the same job billed per started hour, "
            + "and the settlement checkpoints.",
        "--follow shows the meter live until the rental ends: one line rewritten every second on a "
            + "terminal, one line per second into a pipe or a file."
      })
  static final class Usage extends ApiCommand {
    @Parameters(paramLabel = "ID", description = "The rental (rnt_...).")
    String id;

    @Option(
        names = {"-f", "--follow"},
        description = "Follow the live meter (GET /v1/rentals/ID/events) until the rental ends.")
    boolean follow;

    @Override
    int execute() {
      Http http = withApiKey();
      return follow ? follow(http) : summary(http);
    }

    private int summary(Http http) {
      Http.Reply reply = http.get("/v1/rentals/" + segment(id) + "/usage");
      if (json()) {
        printJson(reply);
        return Cli.EXIT_OK;
      }
      JsonNode u = reply.json();
      new Table.Details()
          .add("Rental", u.get("rental_id"))
          .add("Status", u.get("status"))
          .add("Billed", u.path("billed_seconds").asLong() + " s")
          .add("Cost", AccountCommands.eur(u.get("cost")))
          .add(
              "Price",
              u.hasNonNull("price_per_gpu_hour")
                  ? u.get("price_per_gpu_hour").asText()
                      + " EUR/GPU-hour x "
                      + u.path("cards").asInt()
                  : null)
          .add(
              "Billed per started hour",
              u.path("started_hours").asLong()
                  + " h = "
                  + AccountCommands.eur(u.get("cost_per_started_hour")))
          .print(out());
      Table checkpoints = new Table("THROUGH SECOND", "COST EUR", "AT");
      for (JsonNode c : u.path("checkpoints"))
        checkpoints.row(c.get("through_second"), c.get("cost"), c.get("at"));
      if (!checkpoints.isEmpty()) {
        out().println();
        checkpoints.print(out());
      }
      return Cli.EXIT_OK;
    }

    /**
     * Follows the event stream until the rental ends: a live line for a person, one JSON line per
     * event with --json.
     */
    private int follow(Http http) {
      Meter meter = new Meter(out());
      JsonNode last =
          RentalEvents.follow(
              http, id, RentalEvents::ended, json() ? this::printEvent : meter::show);
      if (!json()) {
        meter.end();
        out().println("Rental " + id + " " + RentalEvents.ending(last, "ended") + ".");
      }
      return Cli.EXIT_OK;
    }

    private void printEvent(Http.Event event) {
      ObjectNode line = object();
      line.put("event", event.type());
      line.set("data", event.json());
      out().println(line);
      out().flush();
    }

    /**
     * The live meter: {@code <id> <status> <seconds> s <cost> EUR}, rewritten on every tick and
     * status change.
     */
    private final class Meter {
      private final LiveLine line;
      private String status = "?";

      Meter(PrintWriter out) {
        this.line = new LiveLine(out, cli().terminal);
      }

      void show(Http.Event event) {
        JsonNode data = event.json();
        switch (event.type()) {
          case "tick" ->
              line.show(
                  id
                      + "  "
                      + status
                      + "  "
                      + data.path("second").asLong()
                      + " s  "
                      + data.path("cost").asText()
                      + " EUR");
          case "status" -> {
            status = data.path("status").asText();
            line.show(
                id
                    + "  "
                    + status
                    + "  "
                    + data.path("billed_seconds").asLong()
                    + " s  "
                    + data.path("cost").asText()
                    + " EUR");
          }
          case "preemption" -> {
            line.end();
            out()
                .println(
                    "Preemption notice: the host takes its cards back at "
                        + data.path("deadline").asText());
          }
          default -> {} // "end": the caller prints the bill
        }
      }

      void end() {
        line.end();
      }
    }
  }

  /**
   * On a terminal, a line rewritten in place with a carriage return, padded over what it showed
   * before. Anywhere else (a pipe, a file) each update is a line of its own, flushed at once:
   * whatever reads it gets one line per update as it happens, with no carriage returns.
   */
  static final class LiveLine {
    private final PrintWriter out;
    private final boolean rewrite;
    private int shown;

    LiveLine(PrintWriter out, boolean rewrite) {
      this.out = out;
      this.rewrite = rewrite;
    }

    void show(String text) {
      if (!rewrite) {
        out.println(text);
        out.flush();
        return;
      }
      out.print("\r" + text + " ".repeat(Math.max(0, shown - text.length())));
      out.flush();
      shown = text.length();
    }

    void end() {
      if (shown > 0) out.println();
      out.flush();
      shown = 0;
    }
  }

  /**
   * The workload's command as a shell would read it back (arguments with spaces or quotes in single
   * quotes); the image's own when it has none; null from an engine that does not say.
   */
  static String command(JsonNode args) {
    if (!args.isArray()) return null;
    if (args.isEmpty()) return "(the image's own)";
    StringBuilder line = new StringBuilder();
    for (JsonNode a : args) {
      String arg = a.asText();
      if (line.length() > 0) line.append(' ');
      line.append(
          arg.matches("[A-Za-z0-9_./:=@%+,-]+") ? arg : "'" + arg.replace("'", "'\\''") + "'");
    }
    return line.toString();
  }

  /**
   * What the rental runs in: its host's runtime once matched (where that host's agent said), else
   * the one asked for, or "any"; null from a node that predates runtimes. Only docker runs the
   * image.
   */
  static String runtime(JsonNode r) {
    if (!r.has("runtime")) return null;
    String ran = r.path("host_runtime").isTextual() ? r.get("host_runtime").asText() : null;
    if (ran == null) return r.get("runtime").isNull() ? "any" : r.get("runtime").asText();
    return ran.equals("docker") ? ran : ran + " (the host's own system: the image is not used)";
  }

  static void details(JsonNode r, PrintWriter out) {
    Table.Details details =
        new Table.Details()
            .add("Rental", r.get("id"))
            .add("Status", r.get("status"))
            .add("GPU", r.path("count").asInt() + " x " + r.path("gpu").asText())
            .add("Tier", r.get("tier"))
            .add("Region", r.get("region"))
            .add("Image", r.get("image"))
            .add("Command", command(r.path("command")))
            .add("Runtime", runtime(r))
            .add(
                "Network",
                r.path("network").isBoolean()
                    ? (r.get("network").asBoolean() ? "outbound" : "off")
                    : null)
            .add(
                "Spend limit",
                r.hasNonNull("max_total") ? r.get("max_total").asText() + " EUR" : null)
            .add("Restored from", r.get("restore"))
            .add(
                "Price",
                r.hasNonNull("price_per_gpu_hour")
                    ? r.get("price_per_gpu_hour").asText() + " EUR/GPU-hour (frozen)"
                    : "not matched yet")
            .add("Max price", r.get("max_price_per_gpu_hour").asText() + " EUR/GPU-hour")
            .add("Created", r.get("created_at"))
            .add("Matched", r.get("matched_at"))
            .add("Started", r.get("started_at"))
            .add("Ended", r.get("ended_at"))
            .add("End reason", r.get("end_reason"))
            .add("Exit code", r.get("exit_code"))
            .add("Billed", r.path("billed_seconds").asLong() + " s")
            .add("Cost", AccountCommands.eur(r.get("cost")));
    JsonNode refunded = r.path("refunded");
    if (refunded.isTextual() && !refunded.asText().equals("0.000000"))
      details.add("Refunded", AccountCommands.eur(refunded));
    details
        .add("Preemption deadline", r.get("preemption_deadline"))
        .add("Simulated host", r.path("simulated").asBoolean() ? "yes" : "no")
        .add("Snapshot", r.get("snapshot_id"))
        .print(out);
  }
}
