package dev.tickmark.cli;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.Locale;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

/**
 * {@code tickmark snapshots [delete ID]}: the workspaces kept by {@code tickmark stop --snapshot}
 * ({@code /v1/snapshots}), restorable with {@code tickmark launch --restore ID}.
 */
@Command(
    name = "snapshots",
    description = {
      "Your snapshots (workspaces kept by tickmark stop --snapshot), newest first.",
      "Without a subcommand: list them. Restore one with tickmark launch --restore ID."
    },
    subcommands = {SnapshotCommands.Delete.class})
final class SnapshotCommands extends ApiCommand {
  static final int PAGE = 200;

  @Option(
      names = "--status",
      paramLabel = "STATUS",
      description = "Only this status: uploading, ready, failed, suspended, deleted.")
  String status;

  @Override
  int execute() {
    Http http = withApiKey();
    ArrayNode snapshots = Http.JSON.createArrayNode();
    String after = null;
    do {
      JsonNode page =
          http.get("/v1/snapshots" + query(params("status", status, "limit", PAGE, "after", after)))
              .json();
      for (JsonNode s : page.path("snapshots")) snapshots.add(s);
      after = page.hasNonNull("next_after") ? page.get("next_after").asText() : null;
    } while (after != null);
    if (json()) {
      ObjectNode list = object();
      list.set("snapshots", snapshots);
      out().println(list);
      return Cli.EXIT_OK;
    }
    Table table = new Table("ID", "STATUS", "SIZE", "GPU", "REGION", "COST EUR", "CREATED");
    for (JsonNode s : snapshots) {
      table.row(
          s.get("id"),
          status(s),
          size(s.path("size_bytes").asLong()),
          s.get("gpu"),
          s.get("region"),
          s.get("cost"),
          s.get("created_at"));
    }
    if (table.isEmpty()) notes().println("No snapshots. Keep one: tickmark stop ID --snapshot");
    else table.print(out());
    out().flush();
    return Cli.EXIT_OK;
  }

  /** The status, with why it failed or when a suspended one goes. */
  static String status(JsonNode s) {
    String status = s.path("status").asText();
    if (s.path("failure").hasNonNull("code"))
      return status + " (" + s.path("failure").path("code").asText() + ")";
    if (s.hasNonNull("deletes_at"))
      return status + " (deleted " + s.get("deletes_at").asText() + ")";
    return status;
  }

  /** Bytes for a person: {@code 0 B}, {@code 512 B}, {@code 3.2 MiB}, {@code 1.5 GiB}. */
  static String size(long bytes) {
    if (bytes < 1024) return bytes + " B";
    String[] units = {"KiB", "MiB", "GiB", "TiB"};
    double v = bytes;
    int unit = -1;
    while (v >= 1024 && unit < units.length - 1) {
      v /= 1024;
      unit++;
    }
    return String.format(Locale.ROOT, "%.1f %s", v, units[unit]);
  }

  @Command(
      name = "delete",
      description =
          "Delete a snapshot: its storage billing stops now (the last second is charged).")
  static final class Delete extends ApiCommand {
    @Parameters(paramLabel = "ID", description = "The snapshot (snap_...).")
    String id;

    @Override
    int execute() {
      Http.Reply reply = withApiKey().delete("/v1/snapshots/" + segment(id));
      if (json()) printJson(reply);
      else {
        JsonNode s = reply.json();
        out()
            .println(
                "Snapshot "
                    + id
                    + " deleted: billed "
                    + s.path("billed_seconds").asLong()
                    + " s, cost "
                    + s.path("cost").asText()
                    + " EUR.");
        out().flush();
      }
      return Cli.EXIT_OK;
    }
  }
}
