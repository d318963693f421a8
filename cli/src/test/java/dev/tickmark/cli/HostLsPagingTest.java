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

/** {@code tickmark host ls} follows {@code next_after} to the last page, against a stub API. */
class HostLsPagingTest {
  static final String A = "host_aaaaaaaaaaaaaaaaaaaaaaaa";
  static final String B = "host_bbbbbbbbbbbbbbbbbbbbbbbb";
  static final String C = "host_cccccccccccccccccccccccc";

  @TempDir Path temp;
  HttpServer server;
  final List<String> queries = new CopyOnWriteArrayList<>();

  static String host(String id) {
    return "{\"id\":\""
        + id
        + "\",\"region\":\"eu-nl\",\"status\":\"invited\",\"online\":false,"
        + "\"listed\":false,\"draining\":false,\"simulated\":false,\"cards_total\":0,\"cards_free\":0"
        // the host's runtime (A's agent has not said)
        + (id.equals(B) ? ",\"runtime\":{\"name\":\"docker\",\"network\":true}" : "")
        + (id.equals(C) ? ",\"runtime\":{\"name\":\"sandbox\",\"network\":false}" : "")
        // the host's record (an engine from before it sends none: A and B)
        + (id.equals(C) ? ",\"rentals_ended\":3,\"rentals_lost\":1}" : "}");
  }

  @BeforeEach
  void start() throws Exception {
    server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
    server.createContext(
        "/v1/hosts",
        exchange -> {
          String query = exchange.getRequestURI().getRawQuery();
          queries.add(query);
          String body;
          if (query == null || !query.contains("after="))
            body = "{\"hosts\":[" + host(A) + "," + host(B) + "],\"next_after\":\"" + B + "\"}";
          else if (query.contains("after=" + B))
            body = "{\"hosts\":[" + host(C) + "],\"next_after\":null}";
          else body = "{\"hosts\":[],\"next_after\":null}";
          byte[] bytes = body.getBytes(StandardCharsets.UTF_8);
          exchange.getResponseHeaders().add("Content-Type", "application/json");
          exchange.sendResponseHeaders(200, bytes.length);
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
  void everyPageIsListed() throws Exception {
    String table = cli().run("host", "ls").ok().out();
    for (String id : List.of(A, B, C)) assertTrue(table.contains(id), table);
    String lineOfC = table.lines().filter(l -> l.contains(C)).findFirst().orElseThrow();
    assertTrue(lineOfC.endsWith("1 of 3"), "LOST is rentals lost of ended: " + table);
    assertTrue(lineOfC.matches(".*\\s+sandbox/no-net\\s+1 of 3"), "RUNTIME: " + table);
    String lineOfB = table.lines().filter(l -> l.contains(B)).findFirst().orElseThrow();
    assertTrue(lineOfB.matches(".*\\s+docker\\s+-"), table);
    String lineOfA = table.lines().filter(l -> l.contains(A)).findFirst().orElseThrow();
    assertTrue(lineOfA.matches(".*\\s+-\\s+-"), "no runtime said, no record: " + table);
    assertTrue(table.lines().findFirst().orElseThrow().endsWith("LOST"), table);

    JsonNode json = Http.JSON.readTree(cli().run("host", "ls", "--json").ok().out());
    assertEquals(3, json.get("hosts").size());
    assertEquals(C, json.get("hosts").get(2).get("id").asText());
    assertTrue(
        queries.stream().allMatch(q -> q != null && q.contains("limit=200")), queries.toString());
  }
}
