package dev.tickmark.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import java.nio.file.Path;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The snapshot journey with the CLI against a real node, PostgreSQL and agent: {@code stop
 * --snapshot} keeps the workspace, {@code snapshots} lists it until it is ready, {@code launch
 * --restore} starts a rental from it that sees the file the first one wrote, and {@code snapshots
 * delete} ends its storage bill.
 */
class CliSnapshotIntegrationTest {
  static TestMarket market;

  @TempDir Path temp;

  @BeforeAll
  static void startNode() throws Exception {
    market =
        TestMarket.start(
            "cli_snapshots",
            java.util.Map.of(
                "tickmark.snapshots.upload-reminder", "1s",
                "tickmark.snapshots.settle-interval", "2s"));
  }

  @AfterAll
  static void stopNode() throws Exception {
    if (market != null) market.close();
  }

  @Test
  void keepsAWorkspaceListsItRestoresItAndDeletesIt() throws Exception {
    TestMarket.Customer provider = market.signUp("Snapshot provider");
    market.listedHost(provider, "eu-nl", "2.49", temp.resolve("agent"));
    TestMarket.Customer renter = market.signUp("Snapshot renter");
    new CliRunner(temp.resolve("operator.json"))
        .withEnv("TICKMARK_OPERATOR_TOKEN", TestMarket.OPERATOR_TOKEN)
        .withEnv("TICKMARK_URL", market.url())
        .run("ops", "deposit", renter.id(), "20", "--reference", "snapshots-1")
        .ok();
    CliRunner cli =
        new CliRunner(temp.resolve("renter.json"))
            .withEnv("TICKMARK_URL", market.url())
            .withEnv("TICKMARK_API_KEY", renter.apiKey());

    String first =
        launch(cli, "echo kept-by-the-first > note.txt && echo written; sleep 3600", null);
    Eventually.eventually(
        TestMarket.WAIT,
        () -> assertTrue(cli.run("logs", first).ok().out().contains("written"), "the file is in"));

    String stopped = cli.run("stop", first, "--snapshot").ok().out();
    assertTrue(stopped.contains("snap_"), stopped);
    JsonNode rental = Http.JSON.readTree(cli.run("show", first, "--json").ok().out());
    String snapshot = rental.get("snapshot_id").asText();
    assertTrue(stopped.contains(snapshot), "the stop names the snapshot: " + stopped);

    Eventually.eventually(
        TestMarket.WAIT,
        () -> {
          String table = cli.run("snapshots").ok().out();
          assertTrue(table.contains(snapshot) && table.contains("ready"), table);
        });

    String second = launch(cli, "cat note.txt; sleep 3600", snapshot);
    Eventually.eventually(
        TestMarket.WAIT,
        () ->
            assertTrue(
                cli.run("logs", second).ok().out().contains("kept-by-the-first"),
                "the restored workspace holds the first rental's file"));
    cli.run("stop", second).ok();

    String deleted = cli.run("snapshots", "delete", snapshot).ok().out();
    assertTrue(deleted.contains("Snapshot " + snapshot + " deleted"), deleted);
    JsonNode after = Http.JSON.readTree(cli.run("snapshots", "--json").ok().out());
    assertEquals("deleted", after.get("snapshots").get(0).get("status").asText(), after.toString());
    // restoring it again is refused with the API's code, as a CLI error (exit 1)
    CliRunner.Result refused =
        cli.run(
            "launch",
            "--gpu",
            "h100-80gb",
            "--max-price",
            "3.00",
            "--restore",
            snapshot,
            "--detach",
            "--",
            "true");
    assertEquals(1, refused.exit(), refused.toString());
    assertTrue(refused.err().contains("snapshot_not_ready"), refused.toString());
  }

  private static String launch(CliRunner cli, String script, String restore) throws Exception {
    java.util.List<String> args =
        new java.util.ArrayList<>(
            java.util.List.of(
                "launch",
                "--gpu",
                "h100-80gb",
                "--region",
                "eu-nl",
                "--max-price",
                "3.00",
                "--detach",
                "--json"));
    if (restore != null) args.addAll(java.util.List.of("--restore", restore));
    args.addAll(java.util.List.of("--", "sh", "-c", script));
    JsonNode launched = Http.JSON.readTree(cli.run(args.toArray(String[]::new)).ok().out());
    return launched.get("rental").get("id").asText();
  }
}
