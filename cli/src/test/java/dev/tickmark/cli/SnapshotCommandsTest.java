package dev.tickmark.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.sun.net.httpserver.HttpServer;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code tickmark snapshots}, {@code snapshots delete}, {@code stop --snapshot} and {@code launch
 * --restore} against a stub API: what they send and what they print.
 */
class SnapshotCommandsTest {
  static final String SNAP = "snap_0123456789abcdef01234567";
  static final String RENTAL = "rnt_0123456789abcdef01234567";

  record Seen(String method, String path, String query, String body) {}

  @TempDir Path temp;
  HttpServer server;
  final List<Seen> seen = new CopyOnWriteArrayList<>();

  static final String SNAPSHOT =
      "{\"id\":\""
          + SNAP
          + "\",\"status\":\"failed\",\"size_bytes\":3355443,\"sha256\":null,\"rental_id\":\""
          + RENTAL
          + "\",\"gpu\":\"h100-80gb\",\"region\":\"eu-nl\",\"created_at\":\"2026-12-01T10:00:00Z\","
          + "\"ready_at\":null,\"ended_at\":null,\"billed_seconds\":7,\"cost\":\"0.000001\","
          + "\"failure\":{\"code\":\"quota_exceeded\",\"detail\":\"over\"},\"deletes_at\":null}";

  static final String RENTAL_VIEW =
      "{\"id\":\""
          + RENTAL
          + "\",\"status\":\"stopping\",\"gpu\":\"h100-80gb\",\"count\":1,\"tier\":\"on_demand\","
          + "\"region\":\"eu-nl\",\"price_per_gpu_hour\":\"2.000000\",\"max_price_per_gpu_hour\":\"3.000000\","
          + "\"billed_seconds\":5,\"cost\":\"0.002000\",\"simulated\":true,\"snapshot_id\":\""
          + SNAP
          + "\"}";

  @BeforeEach
  void start() throws Exception {
    server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
    server.createContext(
        "/v1/",
        exchange -> {
          String method = exchange.getRequestMethod();
          String path = exchange.getRequestURI().getPath();
          String body =
              new String(exchange.getRequestBody().readAllBytes(), StandardCharsets.UTF_8);
          seen.add(new Seen(method, path, exchange.getRequestURI().getRawQuery(), body));
          String answer;
          int status = 200;
          if (path.equals("/v1/snapshots"))
            answer = "{\"snapshots\":[" + SNAPSHOT + "],\"next_after\":null}";
          else if (path.startsWith("/v1/snapshots/")) answer = SNAPSHOT;
          else if (path.endsWith("/stop")) {
            answer = "{\"rental\":" + RENTAL_VIEW + "}";
            status = 202;
          } else if (path.equals("/v1/rentals")) {
            answer = "{\"rental\":" + RENTAL_VIEW.replace("stopping", "provisioning") + "}";
            status = 201;
          } else answer = RENTAL_VIEW; // GET /v1/rentals/{id}: the view itself
          byte[] bytes = answer.getBytes(StandardCharsets.UTF_8);
          exchange.getResponseHeaders().add("Content-Type", "application/json");
          exchange.sendResponseHeaders(status, bytes.length);
          exchange.getResponseBody().write(bytes);
          exchange.close();
        });
    server.start();
  }

  @AfterEach
  void stop() {
    server.stop(0);
  }

  CliRunner cli() {
    return new CliRunner(temp.resolve("cli.json"))
        .withEnv("TICKMARK_URL", "http://127.0.0.1:" + server.getAddress().getPort())
        .withEnv(
            "TICKMARK_API_KEY",
            "tmk_0123456789abcdef01234567_0123456789abcdef0123456789abcdef01234567");
  }

  Seen only(String method) {
    List<Seen> matching = seen.stream().filter(s -> s.method().equals(method)).toList();
    assertEquals(1, matching.size(), seen.toString());
    return matching.get(0);
  }

  @Test
  void listsSnapshotsAsATableWithStatusSizeAndCost() {
    String table = cli().run("snapshots", "--status", "failed").ok().out();
    assertTrue(table.startsWith("ID"), table);
    for (String cell :
        List.of(SNAP, "failed (quota_exceeded)", "3.2 MiB", "h100-80gb", "eu-nl", "0.000001"))
      assertTrue(table.contains(cell), cell + " in\n" + table);
    Seen get = only("GET");
    assertEquals("/v1/snapshots", get.path());
    assertTrue(
        get.query().contains("status=failed") && get.query().contains("limit=200"), get.query());
  }

  @Test
  void deletesASnapshot() throws Exception {
    String out = cli().run("snapshots", "delete", SNAP).ok().out();
    assertEquals("/v1/snapshots/" + SNAP, only("DELETE").path());
    assertTrue(out.contains("Snapshot " + SNAP + " deleted: billed 7 s"), out);
    JsonNode json = Http.JSON.readTree(cli().run("snapshots", "delete", SNAP, "--json").ok().out());
    assertEquals(SNAP, json.path("id").asText());
  }

  @Test
  void stopWithSnapshotAsksForItAndSaysWhichSnapshot() throws Exception {
    String out = cli().run("stop", RENTAL, "--snapshot", "--no-wait").ok().out();
    Seen post = only("POST");
    assertEquals("/v1/rentals/" + RENTAL + "/stop", post.path());
    assertTrue(Http.JSON.readTree(post.body()).path("snapshot").asBoolean(), post.body());
    assertTrue(out.contains("Snapshot " + SNAP + " is uploading"), out);
  }

  @Test
  void stopWithoutSnapshotSendsNoBody() {
    cli().run("stop", RENTAL, "--no-wait").ok();
    assertEquals("", only("POST").body());
  }

  @Test
  void launchRestoresTheNamedSnapshot() throws Exception {
    cli().run("launch", "--gpu", "h100-80gb", "--max-price", "3.00", "--restore", SNAP, "-d").ok();
    JsonNode body = Http.JSON.readTree(only("POST").body());
    assertEquals(SNAP, body.path("restore").asText());
  }

  @Test
  void showPrintsTheRentalsSnapshot() {
    String out = cli().run("show", RENTAL).ok().out();
    assertTrue(out.contains("Snapshot:") && out.contains(SNAP), out);
  }

  @Test
  void sizesReadForAPerson() {
    assertEquals("0 B", SnapshotCommands.size(0));
    assertEquals("1023 B", SnapshotCommands.size(1023));
    assertEquals("1.0 KiB", SnapshotCommands.size(1024));
    assertEquals("20.0 GiB", SnapshotCommands.size(20L << 30));
  }
}
