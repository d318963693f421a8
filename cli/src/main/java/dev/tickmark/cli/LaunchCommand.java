package dev.tickmark.cli;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.UUID;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Parameters;

/**
 * {@code tickmark launch}: asks for a rental, prints the match (cards, region, frozen price), then,
 * like {@code docker run}, follows the rental until it runs, printing each status change. Exits 1
 * with one readable line if it ends first ({@code no_capacity}, {@code provisioning_failed}, …).
 * With {@code --follow}, as {@code docker run} without {@code -d}: the workload's output until it
 * ends, and the workload's exit status as the CLI's (1 when the rental ended otherwise). The
 * request carries an {@code Idempotency-Key}, so a retry after a lost answer never creates a second
 * rental.
 */
@Command(
    name = "launch",
    description = {
      "Rent GPUs: match with the cheapest verified host at or below --max-price, then wait until the "
          + "workload runs (or only until the match with --detach).",
      "Put the workload's command after --, e.g. -- python train.py."
    })
final class LaunchCommand extends ApiCommand {
  static final String DEFAULT_IMAGE = "ubuntu:24.04";

  @Option(
      names = "--gpu",
      required = true,
      paramLabel = "CODE",
      description = "GPU model (see 'tickmark catalog').")
  String gpu;

  @Option(names = "--count", paramLabel = "N", description = "Cards, all on one host (default 1).")
  Integer count;

  @Option(
      names = "--tier",
      paramLabel = "TIER",
      description = "on_demand (default) or spot (cheaper, can be preempted with notice).")
  String tier;

  @Option(
      names = "--region",
      paramLabel = "CODE",
      description = "Only hosts in this region (default: any).")
  String region;

  @Option(
      names = "--max-price",
      required = true,
      paramLabel = "EUR",
      description = "Your ceiling per GPU-hour; you pay the host's floor.")
  String maxPrice;

  @Option(
      names = "--image",
      paramLabel = "IMAGE",
      description = "Container image (default " + DEFAULT_IMAGE + ").")
  String image = DEFAULT_IMAGE;

  @Option(
      names = "--max-total",
      paramLabel = "EUR",
      description = "Stop the rental once it has cost this much.")
  String maxTotal;

  @Option(
      names = "--wait-seconds",
      paramLabel = "N",
      description = "How long to wait for capacity, 0 to 600 (default 30).")
  Integer waitSeconds;

  @Option(
      names = "--ssh-key",
      paramLabel = "FILE",
      description = "A public key file to authorise on the workload.")
  Path sshKey;

  @Option(
      names = "--ssh",
      description =
          "Once the workload runs, open a shell on it (tickmark ssh); implies waiting until it runs.")
  boolean ssh;

  @Option(
      names = "-i",
      paramLabel = "KEY",
      description = "With --ssh: the private key file ssh uses (as ssh -i).")
  Path identity;

  @Option(
      names = "--network",
      description = "Allow the workload outbound network (off by default).")
  boolean network;

  @Option(
      names = "--runtime",
      paramLabel = "NAME",
      description =
          "Run only on hosts that use this runtime: docker runs --image; sandbox and process run the"
              + " command on the host's own system without it (default: any).")
  String runtime;

  @Option(
      names = "--restore",
      paramLabel = "SNAPSHOT",
      description =
          "Start from a ready snapshot of yours (snap_...): its workspace is unpacked before the command runs.")
  String restore;

  @Option(
      names = {"-f", "--follow"},
      description =
          "Once the workload runs, show its output until it ends (its stdout on stdout, the rest on"
              + " stderr) and exit with the workload's exit status, or 1 if the rental ended"
              + " otherwise (stopped, cap reached, preempted, host lost). Ctrl-C stops following,"
              + " not the rental.")
  boolean follow;

  @Option(
      names = {"-d", "--detach"},
      description = "Return once matched instead of waiting until it runs.")
  boolean detach;

  @Option(
      names = "--idempotency-key",
      paramLabel = "KEY",
      description =
          "Sent as Idempotency-Key (default: a fresh one). Reuse it to retry a launch without renting twice.")
  String idempotencyKey;

  @Parameters(
      paramLabel = "COMMAND",
      arity = "0..*",
      description = "The workload's command and arguments (after --).")
  List<String> command;

  @Override
  int execute() {
    if (ssh && detach)
      throw new ParameterException(
          spec.commandLine(), "--ssh waits until the rental runs: drop --detach");
    if (follow && (detach || ssh))
      throw new ParameterException(
          spec.commandLine(),
          "--follow shows the workload's output until it ends: drop "
              + (ssh ? "--ssh" : "--detach"));
    Http http = withApiKey();
    String key = idempotencyKey != null ? idempotencyKey : "cli-launch-" + UUID.randomUUID();
    JsonNode rental = http.postIdempotent("/v1/rentals", request(), key).json().path("rental");
    String id = rental.path("id").asText();
    if (matched(rental)) printMatch(rental);
    else if (!RentalEvents.ended(rental)) {
      say()
          .println(
              "Rental "
                  + id
                  + " is waiting for capacity: "
                  + cards(rental)
                  + " at or below "
                  + maxPrice
                  + " EUR/GPU-hour"
                  + (waitSeconds == null ? "" : " (up to " + waitSeconds + " s)")
                  + "...");
      say().flush();
    }
    JsonNode last =
        done(rental)
            ? rental
            : RentalEvents.follow(http, id, this::done, new Progress(rental)::show);
    boolean ran = last.hasNonNull("started_at");
    if (RentalEvents.ended(last) && !ran) throw endedEarly(last);
    if (follow) return followToTheEnd(http, id, last.path("status").asText().equals("running"));
    if (json()) out().println(Http.JSON.createObjectNode().set("rental", last));
    if (RentalEvents.ended(last)) {
      // a short workload can end before its launch sees it run: it ran, so this is no failure
      if (!json())
        out()
            .println(
                "Rental "
                    + id
                    + " "
                    + RentalEvents.ending(last, "ran and has ended")
                    + ". Output: tickmark logs "
                    + id);
      out().flush();
      return Cli.EXIT_OK;
    }
    String status = last.path("status").asText();
    if (!json()) {
      if (status.equals("running")) {
        out()
            .println(
                "Rental "
                    + id
                    + " is running"
                    + (last.hasNonNull("started_at")
                        ? " since " + last.get("started_at").asText()
                        : "")
                    + ". Meter: tickmark usage "
                    + id
                    + " --follow   Stop: tickmark stop "
                    + id);
      } else {
        out()
            .println(
                "Rental "
                    + id
                    + " is "
                    + status
                    + ". Watch: tickmark show "
                    + id
                    + "   Stop: tickmark stop "
                    + id);
      }
    }
    out().flush();
    if (ssh && status.equals("running"))
      return SshCommand.run(this, http, id, identity, List.of(), false, List.of());
    return Cli.EXIT_OK;
  }

  /** Where the launch's own lines go: stderr while stdout carries the workload's or JSON. */
  private java.io.PrintWriter say() {
    return follow ? err() : notes();
  }

  /**
   * The workload's output as it comes, until the rental has ended and its last line was shown; then
   * how it ended, and the exit status: the workload's own when it exited by itself.
   */
  private int followToTheEnd(Http http, String id, boolean running) {
    if (!json()) {
      err()
          .println(
              "Rental "
                  + id
                  + (running ? " is running" : " has run")
                  + "; its output follows (Ctrl-C stops following).");
      err().flush();
    }
    LogsCommand.follow(
        http,
        "/v1/rentals/" + segment(id) + "/logs",
        null,
        line -> LogsCommand.printLine(line, json(), out(), err()));
    JsonNode ended = http.get("/v1/rentals/" + segment(id)).json();
    if (!RentalEvents.ended(ended)) // the log ends with the rental: this is a moment at most
    ended = RentalEvents.follow(http, id, RentalEvents::ended, event -> {});
    if (json()) out().println(Http.JSON.createObjectNode().set("rental", ended));
    err().println("Rental " + id + " " + RentalEvents.ending(ended, "ended") + ".");
    out().flush();
    err().flush();
    return exitStatus(ended);
  }

  /**
   * The workload's exit status when it ended by itself and the host's agent reported it (as {@code
   * docker run} exits with the container's); 1 for every other end, and for a workload whose status
   * the host did not report (agents older than 2026-12-07): a script never takes a job whose
   * outcome is unknown for a success.
   */
  static int exitStatus(JsonNode ended) {
    JsonNode code = ended.path("exit_code");
    if ("workload_exited".equals(ended.path("end_reason").asText()) && code.isIntegralNumber())
      return code.asInt();
    return Cli.EXIT_API_ERROR;
  }

  /** Prints each status change once, and the match when a waiting rental finds its host. */
  private final class Progress {
    private String shown;

    Progress(JsonNode launched) {
      shown = launched.path("status").asText();
    }

    void show(Http.Event event) {
      if (!event.type().equals("status") && !event.type().equals("end")) return;
      JsonNode view = event.json();
      String status = view.path("status").asText();
      if (status.equals(shown)) return;
      if (shown.equals("pending") && matched(view)) printMatch(view);
      if (!status.equals("ended")) {
        say().println("Status: " + status);
        say().flush();
      }
      shown = status;
    }
  }

  private boolean done(JsonNode rental) {
    if (RentalEvents.ended(rental)) return true;
    String status = rental.path("status").asText();
    // a rental that never matched passes through "stopping" on its way to no_capacity: only one
    // that ran is done
    boolean ran =
        status.equals("running") || (status.equals("stopping") && rental.hasNonNull("started_at"));
    return detach ? matched(rental) : ran;
  }

  private ObjectNode request() {
    ObjectNode body = object();
    body.put("gpu", gpu);
    if (count != null) body.put("count", count);
    if (tier != null) body.put("tier", tier);
    if (region != null) body.put("region", region);
    body.put("max_price_per_gpu_hour", maxPrice);
    body.put("image", image);
    if (command != null && !command.isEmpty()) {
      ArrayNode args = body.putArray("command");
      command.forEach(args::add);
    }
    if (sshKey != null) body.put("ssh_public_key", readKey(sshKey));
    if (maxTotal != null) body.put("max_total", maxTotal);
    if (waitSeconds != null) body.put("wait_seconds", waitSeconds);
    if (network) body.put("network", true);
    if (runtime != null) body.put("runtime", runtime);
    if (restore != null) body.put("restore", restore);
    return body;
  }

  private String readKey(Path file) {
    try {
      return Files.readString(file, StandardCharsets.UTF_8).strip();
    } catch (IOException e) {
      throw new ParameterException(
          spec.commandLine(), "Cannot read --ssh-key " + file + ": " + e.getMessage());
    }
  }

  private void printMatch(JsonNode rental) {
    say()
        .println(
            "Rental "
                + rental.path("id").asText()
                + " matched: "
                + cards(rental)
                + " in "
                + rental.path("region").asText("?")
                + " at "
                + rental.path("price_per_gpu_hour").asText()
                + " EUR/GPU-hour ("
                + rental.path("tier").asText()
                + ", price frozen for the rental)"
                + (rental.path("simulated").asBoolean() ? " on a simulated host" : ""));
    say().flush();
  }

  private static boolean matched(JsonNode rental) {
    return RentalEvents.matched(rental);
  }

  private static String cards(JsonNode rental) {
    return rental.path("count").asInt(1) + " x " + rental.path("gpu").asText();
  }

  private CliException endedEarly(JsonNode rental) {
    String id = rental.path("id").asText();
    String reason = rental.path("end_reason").asText("ended");
    String detail =
        switch (reason) {
          case "no_capacity" ->
              "no host offered "
                  + cards(rental)
                  + " at or below "
                  + rental.path("max_price_per_gpu_hour").asText()
                  + " EUR/GPU-hour in time; nothing was charged (rental "
                  + id
                  + ")";
          case "provisioning_failed" ->
              "the host could not start the workload; nothing was charged (rental " + id + ")";
          default ->
              "rental "
                  + id
                  + " ended before it ran; billed "
                  + rental.path("billed_seconds").asLong()
                  + " s, "
                  + rental.path("cost").asText()
                  + " EUR";
        };
    return new CliException(reason, detail);
  }
}
