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
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code tickmark host verify} against a stub API: it asks for a check again, waits until the host
 * no longer shows the request pending, and prints the new verdict.
 */
class HostVerifyCommandTest {
  static final String HOST = "host_0123456789ab";

  record Seen(String method, String path) {}

  @TempDir Path temp;
  HttpServer server;
  final List<Seen> seen = new CopyOnWriteArrayList<>();

  /** How many reads still show the request pending (the agent measuring). */
  final AtomicInteger pendingReads = new AtomicInteger(1);

  static String host(String status, String requestedAt, String checkStatus) {
    return "{\"id\":\""
        + HOST
        + "\",\"region\":\"eu-nl\",\"label\":\"rack-1\",\"status\":\""
        + status
        + "\",\"online\":true,\"listed\":false,\"draining\":false,\"simulated\":true,"
        + "\"gpu\":\"h100-80gb\",\"cards\":[],\"listing\":{\"listed\":false,\"availability\":[]},"
        + "\"verification\":[{\"check\":\"disk_write\",\"status\":\""
        + checkStatus
        + "\",\"observed\":\"612.0 MiB/s\",\"expected\":\">= 200 MiB/s\"}],"
        + "\"verification_requested_at\":"
        + (requestedAt == null ? "null" : "\"" + requestedAt + "\"")
        + ",\"last_verification_at\":\"2026-12-01T10:00:07Z\"}";
  }

  @BeforeEach
  void start() throws Exception {
    server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
    server.createContext(
        "/v1/",
        exchange -> {
          String method = exchange.getRequestMethod();
          String path = exchange.getRequestURI().getPath();
          seen.add(new Seen(method, path));
          int status = 200;
          String answer;
          if (method.equals("POST") && path.equals("/v1/hosts/" + HOST + "/verify")) {
            status = 202;
            answer = host("failed", "2026-12-01T10:00:00Z", "fail");
          } else if (pendingReads.getAndDecrement() > 0) {
            answer = host("failed", "2026-12-01T10:00:00Z", "fail");
          } else answer = host("verified", null, "pass");
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

  @Test
  void asksForACheckAgainWaitsForTheNewVerdictAndPrintsIt() {
    String out = cli().run("host", "verify", HOST).ok().out();
    assertEquals(new Seen("POST", "/v1/hosts/" + HOST + "/verify"), seen.get(0));
    assertEquals(
        List.of(new Seen("GET", "/v1/hosts/" + HOST), new Seen("GET", "/v1/hosts/" + HOST)),
        seen.subList(1, seen.size()),
        "read until the request is no longer pending");
    assertTrue(
        out.contains("Host " + HOST + " checked again at 2026-12-01T10:00:07Z: verified."), out);
    assertTrue(out.contains("disk_write") && out.contains("pass"), out);
    assertTrue(out.contains("Last verified:"), out);
  }

  @Test
  void withoutWaitingItSaysTheCheckWasRequested() throws Exception {
    String out = cli().run("host", "verify", HOST, "--wait", "0").ok().out();
    assertEquals(List.of(new Seen("POST", "/v1/hosts/" + HOST + "/verify")), seen);
    assertTrue(out.contains("Check again requested at 2026-12-01T10:00:00Z"), out);

    JsonNode json =
        Http.JSON.readTree(cli().run("host", "verify", HOST, "--wait", "0", "--json").ok().out());
    assertEquals("failed", json.path("status").asText());
    assertEquals("2026-12-01T10:00:00Z", json.path("verification_requested_at").asText());
  }
}
