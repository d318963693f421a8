package dev.tickmark.cli;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import picocli.CommandLine.ArgGroup;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

/** {@code tickmark host …}: a provider's machines, with the provider's API key. */
@Command(
    name = "host",
    description =
        "Your hosts (as a provider): registration tokens, status, prices, the rentals that ran"
            + " on them and what each earned, check again, drain.",
    subcommands = {
      HostCommands.Token.class,
      HostCommands.Ls.class,
      HostCommands.Show.class,
      HostCommands.Rentals.class,
      HostCommands.Price.class,
      HostCommands.Verify.class,
      HostCommands.Drain.class
    })
final class HostCommands extends ApiCommand {
  @Override
  int execute() {
    throw new picocli.CommandLine.ParameterException(spec.commandLine(), "Missing host command");
  }

  @Command(
      name = "token",
      description = {
        "A one-time registration token for a new host in REGION (valid 24 h),",
        "and the commands that install or start the agent with it."
      })
  static final class Token extends ApiCommand {
    @Option(
        names = "--region",
        required = true,
        paramLabel = "CODE",
        description = "Where the machine is (see 'tickmark catalog regions').")
    String region;

    @Option(
        names = "--label",
        paramLabel = "TEXT",
        description = "Your name for the machine, e.g. rack-3/node-7.")
    String label;

    @Override
    int execute() {
      ObjectNode body = object();
      body.put("region", region);
      if (label != null) body.put("label", label);
      Http http = withApiKey();
      Http.Reply reply = http.post("/v1/hosts/registration-tokens", body);
      if (json()) {
        printJson(reply);
        return Cli.EXIT_OK;
      }
      JsonNode t = reply.json();
      out()
          .println(
              "Host "
                  + t.path("host_id").asText()
                  + " in "
                  + t.path("region").asText()
                  + ": registration token (one use, expires "
                  + t.path("expires_at").asText()
                  + "):");
      out().println(t.path("token").asText());
      out().println();
      out()
          .println(
              "On the machine, install the agent as a service with it (from a Tickmark checkout):");
      out().println("  " + installCommand(agentUrl(http.baseUrl()), t.path("token").asText()));
      out().println("or start it by hand:");
      out()
          .println(
              "  java -jar tickmark-agent.jar --engine "
                  + agentUrl(http.baseUrl())
                  + " --token "
                  + t.path("token").asText()
                  + " --state-dir /var/lib/tickmark-agent");
      return Cli.EXIT_OK;
    }

    /** {@code deploy/agent/install.sh}'s command line (docs/provider-guide.md). */
    static String installCommand(String engine, String token) {
      return "sudo deploy/agent/install.sh --engine " + engine + " --token " + token;
    }

    /** The websocket address of the node the CLI talks to. */
    static String agentUrl(String baseUrl) {
      if (baseUrl.startsWith("https://")) return "wss://" + baseUrl.substring(8);
      if (baseUrl.startsWith("http://")) return "ws://" + baseUrl.substring(7);
      return baseUrl;
    }
  }

  @Command(
      name = "ls",
      description = "Your hosts: status, online, listed, draining, cards free, prices.")
  static final class Ls extends ApiCommand {
    /** Hosts asked for at once; the list follows {@code next_after} to the end. */
    static final int PAGE = 200;

    @Override
    int execute() {
      Http http = withApiKey();
      ArrayNode hosts = Http.JSON.createArrayNode();
      String after = null;
      do {
        JsonNode page = http.get("/v1/hosts" + query(params("limit", PAGE, "after", after))).json();
        for (JsonNode h : page.path("hosts")) hosts.add(h);
        after = page.hasNonNull("next_after") ? page.get("next_after").asText() : null;
      } while (after != null);
      if (json()) {
        ObjectNode list = object();
        list.set("hosts", hosts);
        out().println(list);
        return Cli.EXIT_OK;
      }
      Table table =
          new Table(
              "ID",
              "REGION",
              "LABEL",
              "STATUS",
              "FLAGS",
              "GPU",
              "FREE",
              "TOTAL",
              "ON-DEMAND",
              "SPOT",
              "RUNTIME",
              "LOST");
      for (JsonNode h : hosts) {
        table.row(
            h.get("id"),
            h.get("region"),
            h.get("label"),
            h.get("status"),
            flags(h),
            h.get("gpu"),
            h.get("cards_free"),
            h.get("cards_total"),
            h.get("on_demand_price_per_gpu_hour"),
            h.get("spot_price_per_gpu_hour"),
            runtimeCell(h.path("runtime")),
            lost(h));
      }
      if (table.isEmpty())
        out().println("No hosts yet: 'tickmark host token --region CODE' registers one.");
      else table.print(out());
      return Cli.EXIT_OK;
    }
  }

  /**
   * "lost of ended": the rentals that ran here and ended {@code host_lost}, out of those that ran
   * here and ended (the matcher's tie-break between equal floors); blank from an engine that does
   * not say.
   */
  static String lost(JsonNode h) {
    if (!h.hasNonNull("rentals_ended") || !h.hasNonNull("rentals_lost")) return null;
    return h.get("rentals_lost").asLong() + " of " + h.get("rentals_ended").asLong();
  }

  @Command(
      name = "show",
      description =
          "One host: cards and their state, listing, verification checks, last heartbeat.")
  static final class Show extends ApiCommand {
    @Parameters(paramLabel = "ID", description = "The host (host_...).")
    String id;

    @Override
    int execute() {
      Http.Reply reply = withApiKey().get("/v1/hosts/" + segment(id));
      if (json()) printJson(reply);
      else detail(reply.json(), out());
      return Cli.EXIT_OK;
    }
  }

  @Command(
      name = "rentals",
      description = {
        "The rentals that ran on one of your hosts, newest first, with what each earned you",
        "(through its latest settlement), and the host's totals. Renters are never named."
      })
  static final class Rentals extends ApiCommand {
    /** Rentals asked for at once. */
    static final int PAGE = 200;

    /** Rentals shown without {@code --all}. */
    static final int NEWEST = 50;

    @Parameters(paramLabel = "ID", description = "The host (host_...).")
    String id;

    @Option(
        names = {"-a", "--all"},
        description = "Every rental that ran on the host, not only the newest " + NEWEST + ".")
    boolean all;

    @Override
    int execute() {
      return print(this, withApiKey(), "/v1/hosts/" + segment(id) + "/rentals", id, all, false);
    }

    /**
     * Prints the host's rentals from {@code path} (the newest {@link #NEWEST}, or every one with
     * {@code all}) as a table and a totals line, or as JSON; {@code withRenters}: the operator's
     * page, each row its renter and the provider's row, shown with a RENTER column.
     */
    static int print(
        ApiCommand command, Http http, String path, String id, boolean all, boolean withRenters) {
      ArrayNode rentals = Http.JSON.createArrayNode();
      JsonNode totals = null;
      String after = null;
      do {
        JsonNode page =
            http.get(path + query(params("limit", all ? PAGE : NEWEST, "after", after))).json();
        for (JsonNode r : page.path("rentals")) rentals.add(r);
        totals = page.path("totals");
        after = all && page.hasNonNull("next_after") ? page.get("next_after").asText() : null;
      } while (after != null);
      PrintWriter out = command.out();
      if (command.json()) {
        ObjectNode list = object();
        list.put("host_id", id);
        list.set("rentals", rentals);
        list.set("totals", totals);
        out.println(list);
        return Cli.EXIT_OK;
      }
      if (rentals.isEmpty()) {
        out.println("No rentals have run on host " + id + " yet.");
        return Cli.EXIT_OK;
      }
      List<String> headers =
          new ArrayList<>(
              List.of(
                  "ID",
                  "STATUS",
                  "GPU",
                  "CARDS",
                  "TIER",
                  "EUR/GPU-H",
                  "STARTED",
                  "BILLED S",
                  "EARNED EUR",
                  "END REASON"));
      if (withRenters) headers.add(1, "RENTER");
      Table table = new Table(headers.toArray(String[]::new));
      for (JsonNode item : rentals) {
        JsonNode r = withRenters ? item.path("rental") : item;
        List<Object> row =
            new ArrayList<>(
                Arrays.asList(
                    r.get("id"),
                    r.get("status"),
                    r.get("gpu"),
                    r.get("count"),
                    r.get("tier"),
                    r.get("price_per_gpu_hour"),
                    r.get("started_at"),
                    r.get("billed_seconds"),
                    r.get("earned"),
                    r.get("end_reason")));
        if (withRenters) row.add(1, item.get("renter_id"));
        table.row(row.toArray());
      }
      table.print(out);
      long count = totals.path("rentals").asLong();
      out.println(
          (rentals.size() < count
                  ? "The newest " + rentals.size() + " of " + count + " (--all for every one). "
                  : "")
              + "Host "
              + id
              + ": "
              + count
              + (count == 1 ? " rental, " : " rentals, ")
              + totals.path("card_seconds").asLong()
              + " card-seconds billed, earned "
              + totals.path("earned").asText()
              + " EUR.");
      return Cli.EXIT_OK;
    }
  }

  @Command(
      name = "price",
      description = {
        "Set a host's floor prices (EUR per GPU-hour) and list it, or take it off the market with --unlist.",
        "What you do not pass (spot price, spot notice, availability windows) is kept as it is."
      })
  static final class Price extends ApiCommand {
    @Parameters(paramLabel = "ID", description = "The host (host_...).")
    String id;

    @Option(
        names = "--on-demand",
        required = true,
        paramLabel = "EUR",
        description = "On-demand floor per GPU-hour.")
    String onDemand;

    @ArgGroup(exclusive = true)
    SpotChoice spot;

    static final class SpotChoice {
      @Option(
          names = "--spot",
          paramLabel = "EUR",
          description = "Also offer spot at this floor per GPU-hour.")
      String price;

      @Option(names = "--no-spot", description = "Stop offering spot.")
      boolean none;
    }

    @Option(
        names = "--spot-notice",
        paramLabel = "SECONDS",
        description = "Notice a spot rental gets before its cards are taken back, 120 to 3600.")
    Integer spotNotice;

    @Option(
        names = "--unlist",
        description = "Take the host off the market (running rentals are untouched).")
    boolean unlist;

    @Override
    int execute() {
      Http http = withApiKey();
      String path = "/v1/hosts/" + segment(id);
      JsonNode current = http.get(path).json().path("listing");
      ObjectNode body = object();
      body.put("on_demand_price_per_gpu_hour", onDemand);
      String spotPrice =
          spot == null
              ? text(current.get("spot_price_per_gpu_hour"))
              : spot.none ? null : spot.price;
      if (spotPrice != null) body.put("spot_price_per_gpu_hour", spotPrice);
      Integer notice =
          spotNotice != null
              ? spotNotice
              : current.hasNonNull("spot_notice_seconds")
                  ? current.get("spot_notice_seconds").asInt()
                  : null;
      if (notice != null) body.put("spot_notice_seconds", notice);
      if (current.hasNonNull("availability")) body.set("availability", current.get("availability"));
      body.put("listed", !unlist);
      Http.Reply reply = http.put(path + "/listing", body);
      if (json()) {
        printJson(reply);
        return Cli.EXIT_OK;
      }
      JsonNode listing = reply.json().path("listing");
      out()
          .println(
              "Host "
                  + id
                  + (listing.path("listed").asBoolean() ? " listed" : " unlisted")
                  + ": on demand "
                  + listing.path("on_demand_price_per_gpu_hour").asText()
                  + " EUR/GPU-hour"
                  + (listing.hasNonNull("spot_price_per_gpu_hour")
                      ? ", spot "
                          + listing.get("spot_price_per_gpu_hour").asText()
                          + " EUR/GPU-hour with "
                          + listing.path("spot_notice_seconds").asInt()
                          + " s notice"
                      : ", no spot")
                  + ".");
      return Cli.EXIT_OK;
    }

    private static String text(JsonNode node) {
      return node == null || node.isNull() ? null : node.asText();
    }
  }

  @Command(
      name = "drain",
      description = "No new rentals on the host; on-demand rentals keep running to their end.")
  static final class Drain extends ApiCommand {
    @Parameters(paramLabel = "ID", description = "The host (host_...).")
    String id;

    @Override
    int execute() {
      Http.Reply reply = withApiKey().post("/v1/hosts/" + segment(id) + "/drain", null);
      if (json()) printJson(reply);
      else
        out()
            .println(
                "Host "
                    + id
                    + " is draining: no new rentals; "
                    + rented(reply.json())
                    + " card(s) still rented.");
      return Cli.EXIT_OK;
    }
  }

  @Command(
      name = "verify",
      description = {
        "Check again: the host's agent measures the machine again and resubmits its report,",
        "which is verified as at registration. Waits for the new verdict and prints it."
      })
  static final class Verify extends ApiCommand {
    /** How often the host is read while its agent measures. */
    static final java.time.Duration POLL = java.time.Duration.ofMillis(500);

    @Parameters(paramLabel = "ID", description = "The host (host_...).")
    String id;

    @Option(
        names = "--wait",
        paramLabel = "SECONDS",
        defaultValue = "60",
        description =
            "How long to wait for the new verdict, 0 to 600 (default 60; 0: do not wait).")
    int waitSeconds;

    @Override
    int execute() {
      if (waitSeconds < 0 || waitSeconds > 600)
        throw new picocli.CommandLine.ParameterException(
            spec.commandLine(), "--wait is 0 to 600 seconds");
      Http http = withApiKey();
      String path = "/v1/hosts/" + segment(id);
      Http.Reply reply = http.post(path + "/verify", null);
      JsonNode host = reply.json();
      long deadline = System.nanoTime() + waitSeconds * 1_000_000_000L;
      // The request is answered when the host no longer shows it pending (its new report judged).
      while (host.hasNonNull("verification_requested_at") && System.nanoTime() < deadline) {
        pause();
        host = http.get(path).json();
      }
      boolean answered = !host.hasNonNull("verification_requested_at");
      if (json()) {
        out().println(host);
        return Cli.EXIT_OK;
      }
      if (!answered) {
        out()
            .println(
                "Check again requested at "
                    + host.path("verification_requested_at").asText()
                    + (waitSeconds > 0 ? "; no new report within " + waitSeconds + " s" : "")
                    + ". 'tickmark host show "
                    + id
                    + "' shows the verdict once the agent has measured.");
        return Cli.EXIT_OK;
      }
      out()
          .println(
              "Host "
                  + id
                  + " checked again at "
                  + host.path("last_verification_at").asText()
                  + ": "
                  + host.path("status").asText()
                  + ".");
      out().println();
      detail(host, out());
      return Cli.EXIT_OK;
    }

    private static void pause() {
      try {
        Thread.sleep(POLL.toMillis());
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new CliException("interrupted", "interrupted while waiting for the new verdict");
      }
    }
  }

  static String flags(JsonNode h) {
    StringBuilder flags = new StringBuilder();
    flags.append(h.path("online").asBoolean() ? "online" : "offline");
    if (h.path("listed").asBoolean()) flags.append(",listed");
    if (h.path("draining").asBoolean()) flags.append(",draining");
    if (h.path("simulated").asBoolean()) flags.append(",simulated");
    return flags.toString();
  }

  static long rented(JsonNode host) {
    long n = 0;
    for (JsonNode c : host.path("cards")) if (!"free".equals(c.path("state").asText())) n++;
    return n;
  }

  /**
   * The runtime in a list: {@code sandbox}, {@code sandbox/no-net} (rentals with network go to
   * other hosts), or blank until the agent has said (as the console's host list).
   */
  static String runtimeCell(JsonNode runtime) {
    if (!runtime.hasNonNull("name")) return null;
    return runtime.get("name").asText() + (runtime.path("network").asBoolean() ? "" : "/no-net");
  }

  /**
   * How the host's agent runs rentals, and whether rentals with network can run there (the engine
   * sends them elsewhere when not); blank until the agent has said.
   */
  static String runtime(JsonNode runtime) {
    if (!runtime.hasNonNull("name")) return null;
    return runtime.get("name").asText()
        + (runtime.path("network").asBoolean()
            ? ", rentals with network run here"
            : ", no network for rentals: those that ask for it go to other hosts");
  }

  /** A host in full, as {@code host show} and {@code ops evict} print it. */
  static void detail(JsonNode h, PrintWriter out) {
    JsonNode listing = h.path("listing");
    Table.Details details =
        new Table.Details()
            .add("Host", h.get("id"))
            .add("Label", h.get("label"))
            .add("Region", h.get("region"))
            .add("Status", h.get("status"))
            .add("Flags", flags(h))
            .add("GPU", h.path("cards").size() + " x " + Table.cell(h.get("gpu")))
            .add("Runtime", runtime(h.path("runtime")));
    if (h.hasNonNull("owner_id")) details.add("Owner", h.get("owner_id"));
    details
        .add("Listed", listing.path("listed").asBoolean() ? "yes" : "no")
        .add(
            "On demand",
            listing.hasNonNull("on_demand_price_per_gpu_hour")
                ? listing.get("on_demand_price_per_gpu_hour").asText() + " EUR/GPU-hour"
                : null)
        .add(
            "Spot",
            listing.hasNonNull("spot_price_per_gpu_hour")
                ? listing.get("spot_price_per_gpu_hour").asText()
                    + " EUR/GPU-hour, "
                    + listing.path("spot_notice_seconds").asInt()
                    + " s notice"
                : null)
        .add("Availability", availability(listing.path("availability")))
        .add("Last heartbeat", h.get("last_heartbeat_at"))
        .add("Last verified", h.get("last_verification_at"))
        .add("Registered", h.get("registered_at"))
        .add("Eviction reason", h.get("eviction_reason"));
    if (h.hasNonNull("verification_requested_at"))
      details.add("Check again asked", h.get("verification_requested_at"));
    details.print(out);
    Table cards = new Table("CARD", "GPU", "STATE", "UUID");
    for (JsonNode c : h.path("cards"))
      cards.row(c.get("index"), c.get("gpu"), c.get("state"), c.get("uuid"));
    if (!cards.isEmpty()) {
      out.println();
      cards.print(out);
    }
    Table checks = new Table("CHECK", "STATUS", "OBSERVED", "EXPECTED");
    for (JsonNode c : h.path("verification"))
      checks.row(c.get("check"), c.get("status"), c.get("observed"), c.get("expected"));
    if (!checks.isEmpty()) {
      out.println();
      checks.print(out);
    }
    out.flush();
  }

  private static String availability(JsonNode windows) {
    if (!windows.isArray() || windows.isEmpty()) return "always";
    StringBuilder text = new StringBuilder();
    for (JsonNode w : windows) {
      if (text.length() > 0) text.append(", ");
      text.append(w.path("day").asText())
          .append(' ')
          .append(w.path("start").asText())
          .append('-')
          .append(w.path("end").asText());
    }
    return text.append(" UTC").toString();
  }
}
