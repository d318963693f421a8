package dev.tickmark.node;

import static dev.tickmark.node.Eventually.eventually;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import dev.tickmark.agent.Agent;
import dev.tickmark.agent.AgentConfig;
import dev.tickmark.persistence.DatabaseSettings;
import dev.tickmark.persistence.TestDatabase;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.stream.LongStream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A rental's logs end to end: a real agent (in-process, process runtime) runs a shell command that
 * writes to stdout and stderr; the node stores the lines in PostgreSQL; the renter reads them with
 * GET and follows them over SSE, resumes with Last-Event-ID, and sees {@code event: end} after the
 * rental ended. The agent's connection is cut half-way (through a TCP proxy) and nothing is lost or
 * doubled. Another renter gets 404.
 */
class RentalLogsIntegrationTest {
  static final Duration WAIT = RentingSupport.WAIT;
  static final String REGION = "eu-de";

  static Node node;
  static ApiClient api;
  static TcpProxy proxy;
  static Agent agent;
  @TempDir static Path temp;

  @BeforeAll
  static void start() throws Exception {
    DatabaseSettings db = TestDatabase.fresh("rental_logs");
    node = Node.start(RentingSupport.renting(TestNodes.settings(db)));
    api = new ApiClient(node.baseUrl());
    proxy = new TcpProxy(node.httpPort());
    ApiClient.Customer provider = api.signUp("Log provider");
    String token =
        api.post("/v1/hosts/registration-tokens", provider.apiKey(), "{\"region\":\"eu-de\"}")
            .expect(201)
            .json()
            .get("token")
            .asText();
    agent =
        Agent.start(
            AgentConfig.simulated(
                    "ws://127.0.0.1:" + proxy.port(), token, temp.resolve("agent"), "h100-80gb:1")
                // the workload waits for a file of this test's folder, which a sandbox cannot see
                .withRuntime(AgentConfig.RuntimeKind.PROCESS));
    String hostId = agent.welcomed().get(WAIT.toSeconds(), TimeUnit.SECONDS).hostId();
    assertEquals("verified", agent.verified().get(WAIT.toSeconds(), TimeUnit.SECONDS).status());
    api.put(
            "/v1/hosts/" + hostId + "/listing",
            provider.apiKey(),
            "{\"on_demand_price_per_gpu_hour\":\"2.49\",\"listed\":true}")
        .expect(200);
    eventually(
        WAIT,
        () ->
            assertTrue(
                api.get("/v1/offers?gpu=h100-80gb&region=eu-de", null)
                        .expect(200)
                        .json()
                        .get("offers")
                        .size()
                    > 0));
  }

  @AfterAll
  static void stop() throws Exception {
    if (agent != null) agent.close();
    if (proxy != null) proxy.close();
    if (node != null) node.close();
  }

  @Test
  void bothStreamsArriveInOrderAcrossAReconnectAndCanBeReadFollowedAndResumed() throws Exception {
    ApiClient.Customer renter = RentingSupport.renter(api, "Log renter", "50.00");
    Path go = temp.resolve("go");
    String script =
        "for i in 1 2 3 4 5; do echo out-$i; echo err-$i >&2; sleep 0.05; done;"
            + " while [ ! -f "
            + go
            + " ]; do sleep 0.05; done;"
            + " for i in 6 7 8 9 10; do echo out-$i; echo err-$i >&2; sleep 0.05; done";
    String id = launch(renter, script, "");
    // a follower from the start, while the rental runs
    CompletableFuture<List<String[]>> followed =
        CompletableFuture.supplyAsync(() -> sse(renter, id, null, Map.of()));

    eventually(WAIT, () -> assertEquals(10, lines(renter, id, "").size()));

    // the connection is cut while the workload writes the rest: the agent reconnects and sends
    // what was not stored
    Files.writeString(go, "");
    proxy.dropConnections();
    RentingSupport.awaitStatus(api, renter, id, "ended");

    List<JsonNode> all = lines(renter, id, "");
    assertEquals(20, all.size(), all.toString());
    assertEquals(
        LongStream.rangeClosed(1, 20).boxed().toList(),
        all.stream().map(l -> l.get("seq").asLong()).toList(),
        "every line once, numbered from 1");
    assertEquals(
        List.of(
            "out-1", "out-2", "out-3", "out-4", "out-5", "out-6", "out-7", "out-8", "out-9",
            "out-10"),
        texts(all, "stdout"));
    assertEquals(
        List.of(
            "err-1", "err-2", "err-3", "err-4", "err-5", "err-6", "err-7", "err-8", "err-9",
            "err-10"),
        texts(all, "stderr"));

    // paging: the tail, and after a cursor with a limit
    JsonNode tail =
        api.get("/v1/rentals/" + id + "/logs?tail=3", renter.apiKey()).expect(200).json();
    assertEquals(List.of(18L, 19L, 20L), seqs(tail.get("lines")));
    assertEquals(20, tail.get("next_after").asLong());
    JsonNode page =
        api.get("/v1/rentals/" + id + "/logs?after=4&limit=5", renter.apiKey()).expect(200).json();
    assertEquals(List.of(5L, 6L, 7L, 8L, 9L), seqs(page.get("lines")));
    assertEquals(9, page.get("next_after").asLong());

    // the follower got every line in order, then the end
    List<String[]> events = followed.get(WAIT.toSeconds(), TimeUnit.SECONDS);
    assertEquals(
        LongStream.rangeClosed(1, 20).mapToObj(Long::toString).toList(), ids(events, "log"));
    assertEquals("end", events.get(events.size() - 1)[0]);

    // resuming with Last-Event-ID gives exactly the rest, then the end
    List<String[]> resumed = sse(renter, id, null, Map.of("Last-Event-ID", "12"));
    assertEquals(
        LongStream.rangeClosed(13, 20).mapToObj(Long::toString).toList(), ids(resumed, "log"));
    assertEquals("end", resumed.get(resumed.size() - 1)[0]);
    // Accept: text/event-stream also follows
    List<String[]> accepted = sse(renter, id, "?tail=2", Map.of("Accept", "text/event-stream"));
    assertEquals(List.of("19", "20"), ids(accepted, "log"));

    // owner only
    ApiClient.Customer other = RentingSupport.renter(api, "Other renter", "1.00");
    api.get("/v1/rentals/" + id + "/logs", other.apiKey()).expectProblem(404, "not_found");
    api.get("/v1/rentals/" + id + "/logs?follow=true", other.apiKey())
        .expectProblem(404, "not_found");
    api.get("/v1/rentals/rnt_nosuchrental1/logs", renter.apiKey()).expectProblem(404, "not_found");
    // bad parameters
    api.get("/v1/rentals/" + id + "/logs?tail=0", renter.apiKey())
        .expectProblem(400, "invalid_parameter");
    api.get("/v1/rentals/" + id + "/logs?tail=1&after=2", renter.apiKey())
        .expectProblem(400, "invalid_parameter");
    api.get("/v1/rentals/" + id + "/logs?follow=maybe", renter.apiKey())
        .expectProblem(400, "invalid_parameter");
  }

  @Test
  void outputOverTheRateIsDroppedAndSystemLinesCountEveryByteThatWasNot() {
    ApiClient.Customer renter = RentingSupport.renter(api, "Loud renter", "50.00");
    // 1 MiB of x as fast as the pipe takes it, folded into 1025 lines of 1023 (fold adds their line
    // ends; the last x shares its line with the marker)
    String script = "head -c 1048576 /dev/zero | tr '\\0' x | fold -w 1023; echo done-marker";
    String id = launch(renter, script, "\"wait_seconds\":60,");
    RentingSupport.awaitStatus(api, renter, id, "ended");

    List<JsonNode> all = new ArrayList<>();
    for (long after = 0; ; ) {
      List<JsonNode> page = lines(renter, id, "?after=" + after + "&limit=1000");
      if (page.isEmpty()) break;
      all.addAll(page);
      after = page.get(page.size() - 1).get("seq").asLong();
    }
    long kept = 0;
    long dropped = 0;
    int notes = 0;
    java.util.regex.Pattern note =
        java.util.regex.Pattern.compile(
            "tickmark: (\\d+) bytes of output dropped \\(more than 256 KiB/s\\)");
    for (JsonNode l : all) {
      String text = l.get("text").asText();
      if (l.get("stream").asText().equals("system")) {
        java.util.regex.Matcher m = note.matcher(text);
        assertTrue(m.matches(), text);
        dropped += Long.parseLong(m.group(1));
        notes++;
      } else {
        kept += text.getBytes(StandardCharsets.UTF_8).length + 1;
      }
    }
    assertTrue(notes >= 1, "a system line says what was dropped");
    // a full bucket (256 KiB) plus 256 KiB/s while the workload writes (well under 2 s for 1 MiB)
    assertTrue(kept < 768 * 1024, "no more than the rate left the host: " + kept);
    assertTrue(kept >= 200 * 1024, "a full bucket's worth passed: " + kept);
    long written = 1048576 + 1048576 / 1023 + "done-marker\n".length();
    assertEquals(written, kept + dropped, "every byte written was kept or counted as dropped");
  }

  @Test
  void nulBytesAndBytesThatAreNotUtf8ReachTheRenterAsReplacementCharactersOnTheSameSession() {
    ApiClient.Customer renter = RentingSupport.renter(api, "Binary renter", "50.00");
    // PostgreSQL stores no U+0000 in text: such a line once failed every store, and the engine
    // closed the host's session again on each resend of it, for every rental on the host
    String script = "printf 'before\\000after\\n'; printf 'bad\\377byte\\n' >&2; echo done-marker";
    int connections = proxy.connectionsAccepted();
    String id = launch(renter, script, "");
    RentingSupport.awaitStatus(api, renter, id, "ended");
    eventually(WAIT, () -> assertEquals(3, lines(renter, id, "").size()));

    List<JsonNode> all = lines(renter, id, "");
    assertEquals(List.of("before\uFFFDafter", "done-marker"), texts(all, "stdout"));
    assertEquals(List.of("bad\uFFFDbyte"), texts(all, "stderr"));
    assertEquals(connections, proxy.connectionsAccepted(), "the agent's session was never closed");
    assertTrue(agent.connected());
  }

  /** Launches {@code sh -c script} on the test's host; {@code extra}: more fields, with a comma. */
  private static String launch(ApiClient.Customer renter, String script, String extra) {
    return api.post(
            "/v1/rentals",
            renter.apiKey(),
            "{\"gpu\":\"h100-80gb\",\"count\":1,\"region\":\"eu-de\","
                + "\"max_price_per_gpu_hour\":\"3.00\",\"image\":\"ubuntu:24.04\","
                + extra
                + "\"command\":[\"sh\",\"-c\","
                + ApiClient.quote(script)
                + "]}")
        .expect(201)
        .json()
        .get("rental")
        .get("id")
        .asText();
  }

  private static List<JsonNode> lines(ApiClient.Customer renter, String id, String query) {
    JsonNode page =
        api.get("/v1/rentals/" + id + "/logs" + query, renter.apiKey()).expect(200).json();
    List<JsonNode> out = new ArrayList<>();
    page.get("lines").forEach(out::add);
    return out;
  }

  private static List<String> texts(List<JsonNode> lines, String stream) {
    return lines.stream()
        .filter(l -> l.get("stream").asText().equals(stream))
        .map(l -> l.get("text").asText())
        .toList();
  }

  private static List<Long> seqs(JsonNode lines) {
    List<Long> out = new ArrayList<>();
    lines.forEach(l -> out.add(l.get("seq").asLong()));
    return out;
  }

  private static List<String> ids(List<String[]> events, String type) {
    return events.stream().filter(e -> e[0].equals(type)).map(e -> e[1]).toList();
  }

  /**
   * Follows {@code /logs} over SSE until {@code event: end}: each event as {type, id, data}; a log
   * event's id must match its data's seq.
   */
  static List<String[]> sse(
      ApiClient.Customer renter, String id, String query, Map<String, String> headers) {
    String q = query == null ? "?follow=true" : query;
    HttpRequest.Builder request =
        HttpRequest.newBuilder(URI.create(node.baseUrl() + "/v1/rentals/" + id + "/logs" + q))
            .header("Authorization", "Bearer " + renter.apiKey())
            .timeout(WAIT);
    headers.forEach(request::header);
    List<String[]> events = new ArrayList<>();
    try {
      HttpResponse<java.io.InputStream> response =
          HttpClient.newHttpClient()
              .send(request.build(), HttpResponse.BodyHandlers.ofInputStream());
      assertEquals(200, response.statusCode());
      assertTrue(
          response.headers().firstValue("Content-Type").orElse("").startsWith("text/event-stream"));
      try (BufferedReader in =
          new BufferedReader(new InputStreamReader(response.body(), StandardCharsets.UTF_8))) {
        String type = null;
        String eventId = null;
        String data = null;
        String line;
        while ((line = in.readLine()) != null) {
          if (line.startsWith("event:")) type = line.substring(6).trim();
          else if (line.startsWith("id:")) eventId = line.substring(3).trim();
          else if (line.startsWith("data:")) data = line.substring(5).trim();
          else if (line.isEmpty() && type != null) {
            if (type.equals("log"))
              assertEquals(
                  eventId, ApiClient.JSON.readTree(data).get("seq").asText(), "id is the seq");
            events.add(new String[] {type, eventId, data});
            if (type.equals("end")) return events;
            type = null;
            eventId = null;
            data = null;
          }
        }
      }
    } catch (Exception e) {
      throw new AssertionError("following the logs failed: " + e, e);
    }
    throw new AssertionError("the stream ended without event: end: " + events.size() + " events");
  }
}
