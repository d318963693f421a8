package dev.tickmark.node;

import static dev.tickmark.node.Eventually.eventually;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import dev.tickmark.agent.Agent;
import dev.tickmark.persistence.TestDatabase;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * {@code GET /metrics} after a real rental ran (real node, PostgreSQL, agent): well-formed
 * Prometheus text, the figures the runbook names, no tenant data; and Pekko Management's health and
 * cluster routes.
 */
class MetricsIntegrationTest {
  private static final Pattern SAMPLE =
      Pattern.compile("^([a-zA-Z_:][a-zA-Z0-9_:]*)(\\{[^}]*\\})? (\\S+)$");
  private static final Pattern LABEL =
      Pattern.compile("([a-zA-Z_][a-zA-Z0-9_]*)=\"((?:[^\"\\\\]|\\\\.)*)\"");

  static Node node;
  static ApiClient api;
  static ApiClient management;
  static Agent agent;
  static ApiClient.Customer renter;
  static String rentalId;

  @BeforeAll
  static void start() throws Exception {
    Path temp = Files.createTempDirectory("tickmark-metrics");
    NodeSettings settings =
        RentingSupport.renting(TestNodes.settings(TestDatabase.fresh("metrics")))
            .withPorts(0, RentingSupport.freePort(), 0);
    node = Node.start(settings);
    api = new ApiClient(node.baseUrl());
    management = new ApiClient(node.managementUrl().replaceAll("/$", ""));
    ApiClient.Customer provider = api.signUp("Provider");
    agent = RentingSupport.listedHost(node, api, provider, temp.resolve("agent"), "eu-nl", 1);
    renter = RentingSupport.renter(api, "Metered", "10");
    rentalId = RentingSupport.launch(api, renter, "eu-nl");
    RentingSupport.awaitStatus(api, renter, rentalId, "running");
    // A periodic settlement first (it waits on the host's heartbeat), and the meter a second past
    // it, so that the stop adds the final one: a stop within the checkpoint's own second bills no
    // second more, and then records no checkpoint of its own (seen in CI).
    eventually(
        RentingSupport.WAIT,
        () -> {
          JsonNode usage =
              api.get("/v1/rentals/" + rentalId + "/usage", renter.apiKey()).expect(200).json();
          JsonNode checkpoints = usage.get("checkpoints");
          assertTrue(checkpoints.size() >= 1, usage.toString());
          long settled = checkpoints.get(checkpoints.size() - 1).get("through_second").asLong();
          assertTrue(usage.get("billed_seconds").asLong() >= settled + 2, usage.toString());
        });
    api.post("/v1/rentals/" + rentalId + "/stop", renter.apiKey(), null).expect(202);
    RentingSupport.awaitStatus(api, renter, rentalId, "ended");
  }

  @AfterAll
  static void stop() throws Exception {
    if (agent != null) agent.close();
    if (node != null) node.close();
  }

  /** One parsed sample: family name as written, labels, value. */
  record Sample(String name, Map<String, String> labels, double value) {}

  @Test
  void metricsAreWellFormedPrometheusTextWithTheDocumentedFigures() {
    eventually(
        RentingSupport.WAIT,
        () -> {
          ApiClient.Reply reply = api.get("/metrics", null).expect(200);
          assertTrue(
              reply.contentType().startsWith("text/plain")
                  && reply.contentType().contains("version=0.0.4"),
              reply.contentType());
          List<Sample> samples = parse(reply.body());

          assertTrue(
              value(samples, "tickmark_rentals", Map.of("status", "ended")) >= 1,
              "ended rentals counted from the read side");
          double lag = value(samples, "tickmark_ledger_projection_lag_seconds", Map.of());
          assertTrue(lag >= 0 && lag < 30, "ledger projection lag " + lag);
          assertTrue(value(samples, "tickmark_read_side_age_seconds", Map.of()) < 15);
          long billed =
              api.get("/v1/rentals/" + rentalId, renter.apiKey())
                  .expect(200)
                  .json()
                  .get("billed_seconds")
                  .asLong();
          assertTrue(billed >= 2, "billed " + billed);
          assertEquals(
              billed,
              value(samples, "tickmark_metered_seconds_total", Map.of()),
              "metered seconds = the rental's billed seconds");
          assertTrue(value(samples, "tickmark_metered_micro_euros_total", Map.of()) > 0);
          assertEquals(
              value(samples, "tickmark_metered_micro_euros_total", Map.of()) / 1e6,
              value(samples, "tickmark_metered_euros_total", Map.of()),
              1e-9);
          // The node's only rental: its counter is exactly the checkpoints the rental recorded.
          int checkpoints =
              api.get("/v1/rentals/" + rentalId + "/usage", renter.apiKey())
                  .expect(200)
                  .json()
                  .get("checkpoints")
                  .size();
          assertTrue(checkpoints >= 2, "periodic and final settlements: " + checkpoints);
          assertEquals(
              checkpoints,
              value(samples, "tickmark_settlements_total", Map.of()),
              "settlements counted");
          assertTrue(value(samples, "tickmark_match_latency_seconds_count", Map.of()) >= 1);
          // The node's only launch, matched at its first attempt: each of its steps timed once; its
          // request was recorded with its match (issue 15), so no request-only write was timed.
          assertEquals(
              0,
              value(samples, "tickmark_launch_step_seconds_count", Map.of("step", "recorded")),
              "recorded alone");
          for (String step : List.of("hold", "match", "matched_recorded")) {
            assertEquals(
                1,
                value(samples, "tickmark_launch_step_seconds_count", Map.of("step", step)),
                step);
            assertTrue(
                value(samples, "tickmark_launch_step_seconds_sum", Map.of("step", step)) > 0, step);
          }
          // ... and its rental recovered (from nothing) before the launch's first command.
          assertTrue(value(samples, "tickmark_rental_recovery_seconds_count", Map.of()) >= 1);
          assertTrue(value(samples, "tickmark_rental_recovery_seconds_sum", Map.of()) > 0);
          assertEquals(1, value(samples, "tickmark_agent_sessions_open", Map.of()));
          assertTrue(value(samples, "tickmark_heartbeats_total", Map.of()) >= 1);
          assertTrue(value(samples, "tickmark_heartbeat_lag_seconds_count", Map.of()) >= 1);
          assertTrue(
              value(samples, "tickmark_journal_write_seconds_count", Map.of()) >= 1,
              "the journal probe wrote");
          assertEquals(0, value(samples, "tickmark_journal_failures_total", Map.of()));
          assertTrue(value(samples, "tickmark_jvm_heap_used_bytes", Map.of()) > 0);
          assertTrue(value(samples, "tickmark_jvm_heap_committed_bytes", Map.of()) > 0);
          assertTrue(value(samples, "tickmark_jvm_threads", Map.of()) > 0);
          assertTrue(value(samples, "tickmark_process_uptime_seconds", Map.of()) > 0);
          assertTrue(value(samples, "tickmark_process_cpu_seconds_total", Map.of()) > 0);
          assertTrue(value(samples, "tickmark_process_open_fds", Map.of()) > 0);
          assertTrue(
              samples.stream().anyMatch(s -> s.name().equals("tickmark_jvm_gc_collections_total")),
              "GC by collector");

          assertFalse(reply.body().contains(rentalId), "no rental ids");
          assertFalse(reply.body().contains(renter.id()), "no account ids");
        });
  }

  @Test
  void managementAnswersHealthAndClusterRoutes() {
    eventually(RentingSupport.WAIT, () -> management.get("/ready", null).expect(200));
    management.get("/alive", null).expect(200);
    JsonNode members = management.get("/cluster/members", null).expect(200).json();
    assertEquals(1, members.get("members").size(), members.toString());
    assertEquals("Up", members.get("members").get(0).get("status").asText(), members.toString());
    JsonNode shards = management.get("/cluster/shards/Rental", null).expect(200).json();
    assertNotNull(shards.get("regions"), shards.toString());
  }

  /**
   * Parses exposition text line by line: every sample's family has a TYPE (histogram samples belong
   * to their family through _bucket, _sum and _count), TYPE and HELP come once and before the
   * samples, values are numbers, and each histogram's buckets are cumulative and end in +Inf =
   * _count.
   */
  static List<Sample> parse(String text) {
    Map<String, String> types = new HashMap<>();
    List<String> helped = new ArrayList<>();
    List<Sample> samples = new ArrayList<>();
    assertTrue(text.endsWith("\n"), "the text ends with a newline");
    for (String line : text.split("\n")) {
      if (line.startsWith("# HELP ")) {
        String name = line.substring(7).split(" ", 2)[0];
        assertFalse(helped.contains(name), "one HELP for " + name);
        helped.add(name);
      } else if (line.startsWith("# TYPE ")) {
        String[] parts = line.substring(7).split(" ");
        assertEquals(2, parts.length, line);
        assertTrue(
            List.of("counter", "gauge", "histogram", "summary", "untyped").contains(parts[1]),
            line);
        assertEquals(null, types.put(parts[0], parts[1]), "one TYPE for " + parts[0]);
      } else {
        assertFalse(line.isBlank() || line.startsWith("#"), "unexpected line: " + line);
        Matcher m = SAMPLE.matcher(line);
        assertTrue(m.matches(), "not a sample line: " + line);
        String name = m.group(1);
        String family =
            types.containsKey(name) ? name : name.replaceFirst("_(bucket|sum|count)$", "");
        assertTrue(types.containsKey(family), "no TYPE line before " + line);
        if (!family.equals(name)) assertEquals("histogram", types.get(family), line);
        Map<String, String> labels = new HashMap<>();
        if (m.group(2) != null) {
          Matcher l = LABEL.matcher(m.group(2));
          while (l.find()) labels.put(l.group(1), l.group(2));
        }
        samples.add(new Sample(name, labels, number(m.group(3))));
      }
    }
    types.forEach(
        (family, type) -> {
          if (!type.equals("histogram")) return;
          // One series per set of labels besides "le".
          Map<Map<String, String>, Double> previous = new HashMap<>();
          Map<Map<String, String>, Double> inf = new HashMap<>();
          for (Sample s : samples) {
            if (!s.name().equals(family + "_bucket")) continue;
            Map<String, String> series = new HashMap<>(s.labels());
            String le = series.remove("le");
            assertTrue(
                s.value() >= previous.getOrDefault(series, 0.0),
                family + series + " buckets are cumulative");
            previous.put(series, s.value());
            if (le.equals("+Inf")) inf.put(series, s.value());
          }
          assertEquals(previous.keySet(), inf.keySet(), family + ": every series ends in +Inf");
          inf.forEach(
              (series, count) ->
                  assertEquals(
                      count,
                      value(samples, family + "_count", series),
                      family + series + ": +Inf bucket equals _count"));
        });
    return samples;
  }

  static double number(String text) {
    return switch (text) {
      case "+Inf" -> Double.POSITIVE_INFINITY;
      case "-Inf" -> Double.NEGATIVE_INFINITY;
      case "NaN" -> Double.NaN;
      default -> Double.parseDouble(text);
    };
  }

  static double value(List<Sample> samples, String name, Map<String, String> labels) {
    return samples.stream()
        .filter(s -> s.name().equals(name) && s.labels().equals(labels))
        .findFirst()
        .orElseThrow(() -> new AssertionError("no sample " + name + labels))
        .value();
  }
}
