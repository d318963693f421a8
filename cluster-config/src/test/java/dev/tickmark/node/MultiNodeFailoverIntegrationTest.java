package dev.tickmark.node;

import static dev.tickmark.node.Eventually.eventually;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.fasterxml.jackson.databind.JsonNode;
import dev.tickmark.agent.Agent;
import dev.tickmark.agent.AgentConfig;
import dev.tickmark.agent.SimulatedGpus;
import dev.tickmark.engine.money.Metering;
import dev.tickmark.engine.money.Money;
import dev.tickmark.engine.rental.Rental;
import dev.tickmark.node.ClusterProcesses.NodeProcess;
import dev.tickmark.persistence.DatabaseSettings;
import dev.tickmark.persistence.TestDatabase;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.pekko.cluster.sharding.typed.HashCodeMessageExtractor;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Three nodes (separate JVMs) on one PostgreSQL, three simulated hosts whose agents are each
 * connected to another node and know all three, and rentals spread over all nodes. Then:
 *
 * <ol>
 *   <li>node 1 — the oldest member, which also runs the shard coordinators — is killed with
 *       SIGKILL: the split brain resolver downs it, and within {@link #FAILOVER} every rental
 *       (those it hosted included) settles seconds past the kill on a survivor, without anyone
 *       touching the rental: the survivors wake it from the read side;
 *   <li>node 3 is terminated (SIGTERM) while launches and stops go to it and to node 2: every
 *       command a node accepted (2xx) took effect;
 *   <li>every rental is stopped: each is billed exactly its wall-clock window (the agents kept
 *       heartbeating through the survivors, so no rental ended {@code host_lost}), the ledger holds
 *       every settlement key once, and the audit says the money is conserved.
 * </ol>
 *
 * The cluster runs with short failure detection (2 s pause, SBR stable-after 3 s) so that the test
 * is quick; the production values and the failover time they give are in deploy/README.md and
 * docs/benchmarks.md.
 */
class MultiNodeFailoverIntegrationTest {
  static final Duration WAIT = Duration.ofSeconds(40);
  static final Duration FAILOVER = Duration.ofSeconds(30);
  static final String PRICE = "2.49";
  static final long PRICE_MICROS = Money.parse(PRICE);
  static final int CARDS_PER_HOST = 8;
  static final int MAX_FIRST_RENTALS = 18;
  static final String RENTAL_TYPE =
      "Rental"; // Rental.ENTITY_KEY's name, as Pekko Management knows the region

  /**
   * Host i is in region i: launches that name the regions in turn spread the rentals over the three
   * hosts.
   */
  static final List<String> REGIONS = List.of("eu-nl", "eu-de", "eu-fr");

  private ClusterProcesses cluster;
  private final List<Agent> agents = new ArrayList<>();

  @AfterEach
  void cleanUp() throws Exception {
    for (Agent a : agents) a.close();
    if (cluster != null) cluster.close();
  }

  @Test
  void rentalsSurviveAKilledAndATerminatedNode() throws Exception {
    DatabaseSettings db = TestDatabase.fresh("multi_node_failover");
    Path logs = Path.of("target", "multi-node-failover");
    cluster =
        new ClusterProcesses(
            db,
            3,
            logs,
            Map.of("TICKMARK_SETTLE_INTERVAL", "2s"),
            List.of(
                // Fast failure detection and downing, so that the test takes seconds, not the
                // production ~30 s.
                "-Dpekko.cluster.failure-detector.acceptable-heartbeat-pause=2s",
                "-Dpekko.cluster.split-brain-resolver.stable-after=3s",
                "-Dtickmark.rentals.wake-interval=2s",
                "-Dtickmark.rentals.provisioning-timeout=15s",
                // Sharded daemon processes (the read-side projections) are restarted on survivors
                // by this keep-alive.
                "-Dpekko.cluster.sharded-daemon-process.keep-alive-interval=2s"));
    Instant clusterStart = Instant.now();
    cluster.startAll();
    NodeProcess node1 = cluster.node(1);
    NodeProcess node2 = cluster.node(2);
    NodeProcess node3 = cluster.node(3);
    eventually(
        WAIT,
        () ->
            assertEquals(
                Map.of(node1.remotePort, "Up", node2.remotePort, "Up", node3.remotePort, "Up"),
                cluster.members(node2)));
    System.out.printf(
        "three nodes up in %d ms%n", Duration.between(clusterStart, Instant.now()).toMillis());

    // A provider with three simulated hosts; agent i connects to node i first and knows the other
    // two.
    ApiClient api2 = node2.api;
    ApiClient.Customer provider = api2.signUp("Provider");
    Path temp = Files.createTempDirectory("tickmark-multi-node");
    for (NodeProcess home : cluster.nodes()) {
      NodeProcess via = cluster.nodes().get(home.index % 3);
      String region = REGIONS.get(home.index - 1);
      String token =
          via.api
              .post(
                  "/v1/hosts/registration-tokens",
                  provider.apiKey(),
                  "{\"region\":\"" + region + "\"}")
              .expect(201)
              .json()
              .get("token")
              .asText();
      List<URI> engines = new ArrayList<>();
      for (int i = 0; i < 3; i++)
        engines.add(AgentConfig.engine(cluster.nodes().get((home.index - 1 + i) % 3).engine()));
      Agent agent =
          Agent.start(
              new AgentConfig(
                  engines,
                  token,
                  temp.resolve("agent-" + home.index),
                  SimulatedGpus.parse("h100-80gb:" + CARDS_PER_HOST)));
      agents.add(agent);
    }
    for (Agent agent : agents) {
      String hostId = agent.welcomed().get(WAIT.toSeconds(), TimeUnit.SECONDS).hostId();
      assertEquals("verified", agent.verified().get(WAIT.toSeconds(), TimeUnit.SECONDS).status());
      api2.put(
              "/v1/hosts/" + hostId + "/listing",
              provider.apiKey(),
              "{\"on_demand_price_per_gpu_hour\":\"" + PRICE + "\",\"listed\":true}")
          .expect(200);
    }
    eventually(
        WAIT, () -> assertEquals(3 * CARDS_PER_HOST, offered(api2), "every card is on the market"));

    ApiClient.Customer renter = api2.signUp("Renter");
    api2.opsDeposit(renter.id(), "200", "welcome-" + renter.id()).expect(201);

    // Launch through every node in turn until rentals run on all three nodes.
    List<String> rentals = new ArrayList<>();
    Map<String, NodeProcess> hostedOn = Map.of();
    while (rentals.size() < MAX_FIRST_RENTALS) {
      for (NodeProcess n : cluster.nodes())
        rentals.add(launch(n.api, renter, REGIONS.get(rentals.size() % 3)));
      for (String id : rentals) awaitListedStatus(api2, renter, id, "running");
      hostedOn = whereRentalsLive(rentals);
      if (Set.copyOf(hostedOn.values()).size() == 3) break;
    }
    Map<String, NodeProcess> placement = hostedOn;
    for (Agent agent : agents)
      assertFalse(agent.runningRentals().isEmpty(), "every host runs rentals");
    assertEquals(3, Set.copyOf(placement.values()).size(), "rentals on every node: " + placement);
    List<String> onNode1 = rentals.stream().filter(id -> placement.get(id) == node1).toList();
    System.out.printf("%d rentals; on node1: %s%n", rentals.size(), onNode1);

    Map<String, Instant> startedAt = new HashMap<>();
    for (String id : rentals)
      startedAt.put(id, Instant.parse(rental(api2, renter, id).get("started_at").asText()));
    // Some seconds settled everywhere before the crash.
    eventually(
        WAIT,
        () ->
            rentals.forEach(
                id -> assertTrue(listed(api2, renter, id).get("billed_seconds").asLong() >= 2)));

    // ---- 1. SIGKILL the oldest node (shard coordinators, a third of the rentals, some hosts and
    // agent sessions).
    cluster.kill(node1);
    Instant killedAt = Instant.now();
    Map<String, Long> resumedAfterMillis = new ConcurrentHashMap<>();
    // Settled beyond the second of the kill = settled after the kill (a settlement never bills the
    // future). Only the
    // survivors' read side is looked at: nothing sends the rentals a message.
    eventually(
        FAILOVER,
        () -> {
          for (JsonNode row : listedAll(api2, renter)) {
            String id = row.get("id").asText();
            if (!startedAt.containsKey(id) || resumedAfterMillis.containsKey(id)) continue;
            assertEquals("running", row.get("status").asText(), row.toString());
            long atKill = Duration.between(startedAt.get(id), killedAt).getSeconds();
            if (row.get("billed_seconds").asLong() > atKill) {
              resumedAfterMillis.put(id, Duration.between(killedAt, Instant.now()).toMillis());
            }
          }
          assertEquals(
              Set.copyOf(rentals),
              resumedAfterMillis.keySet(),
              "rentals metering again after the kill");
        });
    System.out.printf(
        "after SIGKILL of node1: rentals it hosted metered again after %s ms; the others after %s ms%n",
        onNode1.stream().map(resumedAfterMillis::get).toList(),
        rentals.stream().filter(id -> !onNode1.contains(id)).map(resumedAfterMillis::get).toList());
    eventually(
        WAIT,
        () ->
            assertEquals(
                Map.of(node2.remotePort, "Up", node3.remotePort, "Up"),
                cluster.members(node2),
                "the split brain resolver downed node1"));
    URI lost = AgentConfig.engine(node1.engine());
    for (Agent agent : agents) {
      eventually(
          WAIT,
          () ->
              assertTrue(
                  agent.connected() && !agent.engine().orElseThrow().equals(lost),
                  "agent on a survivor"));
    }
    // A shard that does not answer Pekko Management's stats query in time is left out of its
    // answer: the placement is read again until every one of node1's rentals is found.
    eventually(
        WAIT,
        () -> {
          Map<String, NodeProcess> afterKill = whereRentalsLive(rentals);
          assertTrue(
              onNode1.stream()
                  .allMatch(id -> afterKill.get(id) == node2 || afterKill.get(id) == node3),
              "node1's rentals live on the survivors: " + afterKill);
        });

    // ---- 2. SIGTERM node3 while launches and stops go to it and to node2.
    List<Command> commands = new CopyOnWriteArrayList<>();
    AtomicBoolean driving = new AtomicBoolean(true);
    Thread driver =
        new Thread(() -> drive(List.of(node2, node3), renter, commands, driving), "command-driver");
    driver.start();
    eventually(
        WAIT,
        () ->
            assertTrue(
                commands.stream().filter(c -> c.accepted() && c.node() == node3).count() >= 2,
                "commands accepted by node3 before it is terminated"));
    cluster.terminate(node3);
    assertTrue(
        node3.process.waitFor(60, TimeUnit.SECONDS),
        "node3 shut down gracefully:\n" + ClusterProcesses.tail(node3.log));
    Instant terminatedAt = Instant.now();
    eventually(
        WAIT,
        () ->
            assertTrue(
                commands.stream()
                    .anyMatch(
                        c -> c.accepted() && c.node() == node2 && c.at().isAfter(terminatedAt)),
                "node2 accepts commands after node3 left"));
    driving.set(false);
    driver.join(30_000);
    System.out.printf(
        "node3 exited with %d; commands: %d accepted, %d refused or failed%n",
        node3.process.exitValue(),
        commands.stream().filter(Command::accepted).count(),
        commands.stream().filter(c -> !c.accepted()).count());
    eventually(
        WAIT,
        () -> assertEquals(Map.of(node2.remotePort, "Up"), cluster.members(node2), "node3 left"));

    // Every accepted launch exists and runs, unless an accepted stop ended it. A stop that failed
    // on the wire
    // (refused, or cut by the shutdown) may or may not have been applied. A launch matched to a
    // host whose agent
    // session was on node3 as it shut down may have had its start_rental lost with that session:
    // nothing sends it
    // again, so that rental ends provisioning_failed (nothing charged) at the provisioning timeout.
    Set<String> stopped = ConcurrentHashMap.newKeySet();
    commands.stream()
        .filter(c -> c.accepted() && c.kind().equals("stop"))
        .forEach(c -> stopped.add(c.rentalId()));
    Set<String> maybeStopped = ConcurrentHashMap.newKeySet();
    commands.stream()
        .filter(c -> !c.accepted() && c.kind().equals("stop"))
        .forEach(c -> maybeStopped.add(c.rentalId()));
    List<String> launchedDuringShutdown =
        commands.stream()
            .filter(c -> c.accepted() && c.kind().equals("launch"))
            .map(Command::rentalId)
            .toList();
    assertFalse(launchedDuringShutdown.isEmpty());
    List<String> startLost = new ArrayList<>();
    for (String id : launchedDuringShutdown) {
      JsonNode[] now = new JsonNode[1];
      Set<String> expected = stopped.contains(id) ? Set.of("ended") : Set.of("running", "ended");
      eventually(
          WAIT,
          () -> {
            now[0] = rental(api2, renter, id);
            assertTrue(
                expected.contains(now[0].get("status").asText()),
                "expected " + expected + ": " + now[0]);
          });
      String reason = now[0].path("end_reason").asText(null);
      if (now[0].get("status").asText().equals("running")) {
        startedAt.put(id, Instant.parse(now[0].get("started_at").asText()));
        rentals.add(id);
      } else if (Rental.EndReason.PROVISIONING_FAILED.wire().equals(reason)) {
        assertEquals("0.000000", now[0].get("cost").asText(), now[0].toString());
        startLost.add(id);
      } else {
        assertTrue(
            stopped.contains(id) || maybeStopped.contains(id), "only a stop ends it: " + now[0]);
        assertTrue(
            Set.of(Rental.EndReason.STOPPED_BY_RENTER.wire(), Rental.EndReason.CANCELLED.wire())
                .contains(reason),
            now[0].toString());
      }
    }
    System.out.printf(
        "launches accepted around the shutdown: %d, of which %d ended provisioning_failed %s%n",
        launchedDuringShutdown.size(), startLost.size(), startLost);

    // ---- 3. Stop every running rental through node2 and check the money.
    Map<String, Instant[]> stopWindows = new LinkedHashMap<>();
    for (String id : rentals) {
      Instant before = Instant.now();
      api2.post("/v1/rentals/" + id + "/stop", renter.apiKey(), null).expect(202);
      stopWindows.put(id, new Instant[] {before, Instant.now()});
    }
    long totalCost = 0;
    for (String id : stopWindows.keySet()) {
      JsonNode ended = awaitStatus(api2, renter, id, "ended");
      assertEquals(
          Rental.EndReason.STOPPED_BY_RENTER.wire(),
          ended.get("end_reason").asText(),
          "the agent kept heartbeating: " + ended);
      long billed = ended.get("billed_seconds").asLong();
      Instant started = startedAt.get(id);
      long earliest = Duration.between(started, stopWindows.get(id)[0]).getSeconds();
      long latest = Duration.between(started, stopWindows.get(id)[1]).getSeconds();
      assertTrue(
          billed >= earliest - 1 && billed <= latest + 1,
          "rental "
              + id
              + " billed "
              + billed
              + " s for a window of "
              + earliest
              + ".."
              + latest
              + " s: "
              + ended);
      assertEquals(
          Money.format(Metering.cost(PRICE_MICROS, 1, billed)),
          ended.get("cost").asText(),
          ended.toString());
      totalCost += Metering.cost(PRICE_MICROS, 1, billed);
    }
    assertTrue(
        stopWindows.keySet().containsAll(onNode1), "node1's rentals ran to the end: " + onNode1);

    eventually(
        WAIT,
        () -> {
          JsonNode audit = api2.audit();
          assertTrue(audit.get("conserved").asBoolean(), audit.toString());
          assertEquals("0.000000", audit.get("pending_captures").asText(), audit.toString());
          assertEquals("0.000000", audit.get("pending_credits").asText(), audit.toString());
          assertEquals(0, audit.get("mismatched_settlements").asLong(), audit.toString());
          assertEquals("0.000000", audit.get("holds_open").asText(), audit.toString());
        });
    // The rental list is the rentals projection, which may still be catching up with the ledger's
    // (its slice may
    // have moved with a node): the two agree once it has.
    long expectedAtLeast = totalCost;
    eventually(
        WAIT,
        () -> {
          JsonNode audit = api2.audit();
          long allCosts = 0;
          for (JsonNode row : listedAll(api2, renter))
            allCosts += Money.parse(row.get("cost").asText());
          assertEquals(
              Money.format(allCosts),
              audit.get("captures").asText(),
              "captured = what the rentals cost: " + audit);
          assertTrue(allCosts >= expectedAtLeast);
        });
    assertEquals(List.of(), duplicateLedgerKeys(db), "no posting key applied twice");
    assertEquals(
        List.of(),
        capturesNotMatchingCheckpoints(db),
        "each rental's captures add up to its billed seconds");
  }

  // ---- where rentals live
  // -------------------------------------------------------------------------

  /**
   * Each rental's node: the node whose shard region hosts the rental's shard (Pekko Management).
   */
  private Map<String, NodeProcess> whereRentalsLive(List<String> rentals) {
    int shardsTotal =
        com.typesafe.config.ConfigFactory.load().getInt("pekko.cluster.sharding.number-of-shards");
    HashCodeMessageExtractor<Object> extractor = new HashCodeMessageExtractor<>(shardsTotal);
    Map<String, NodeProcess> shardOwner = new HashMap<>();
    for (NodeProcess n : cluster.nodes()) {
      if (!n.alive()) continue;
      for (String shard : cluster.shards(n, RENTAL_TYPE).keySet()) {
        NodeProcess other = shardOwner.put(shard, n);
        if (other != null) fail("shard " + shard + " on " + other + " and " + n);
      }
    }
    Map<String, NodeProcess> placement = new LinkedHashMap<>();
    for (String id : rentals) {
      NodeProcess n = shardOwner.get(extractor.shardId(id));
      if (n != null) placement.put(id, n);
    }
    return placement;
  }

  // ---- commands during the graceful shutdown
  // ------------------------------------------------------

  record Command(
      String kind,
      String rentalId,
      NodeProcess node,
      boolean accepted,
      Instant at,
      String outcome) {}

  /**
   * Launches a rental on one node and stops the oldest of the last three launched on the other,
   * alternating, until told to stop: at most three of these rentals hold cards at a time.
   */
  private static void drive(
      List<NodeProcess> nodes,
      ApiClient.Customer renter,
      List<Command> log,
      AtomicBoolean driving) {
    List<String> launched = new ArrayList<>();
    int step = 0;
    while (driving.get()) {
      NodeProcess n = nodes.get(step++ % nodes.size());
      try {
        Thread.sleep(100); // pacing, to leave the two cores to the nodes
      } catch (InterruptedException e) {
        return;
      }
      try {
        ApiClient.Reply reply =
            n.api.post("/v1/rentals", renter.apiKey(), launchBody(REGIONS.get(step % 3)));
        boolean ok = reply.status() == 201;
        String id = ok ? reply.json().get("rental").get("id").asText() : null;
        log.add(new Command("launch", id, n, ok, Instant.now(), reply.status() + ""));
        if (ok) launched.add(id);
      } catch (AssertionError refused) {
        log.add(new Command("launch", null, n, false, Instant.now(), refused.getMessage()));
      }
      if (launched.size() >= 3) {
        String id = launched.remove(0);
        NodeProcess m = nodes.get(step % nodes.size());
        try {
          ApiClient.Reply reply = m.api.post("/v1/rentals/" + id + "/stop", renter.apiKey(), null);
          log.add(
              new Command(
                  "stop", id, m, reply.status() == 202, Instant.now(), reply.status() + ""));
        } catch (AssertionError refused) {
          log.add(new Command("stop", id, m, false, Instant.now(), refused.getMessage()));
        }
      }
    }
  }

  // ---- the database, read directly
  // ------------------------------------------------------------------

  /** Ledger legs whose (account, kind, key) appears more than once: a posting applied twice. */
  static List<String> duplicateLedgerKeys(DatabaseSettings db) throws Exception {
    return query(
        db,
        "SELECT account_id || ' ' || kind || ' ' || entry_key || ' x' || COUNT(*) FROM ledger_entries"
            + " GROUP BY account_id, kind, entry_key HAVING COUNT(*) > 1");
  }

  /**
   * Rentals whose captures do not add up to the cost of their billed seconds, or whose last capture
   * is not the end.
   */
  static List<String> capturesNotMatchingCheckpoints(DatabaseSettings db) throws Exception {
    return query(
        db,
        "SELECT r.rental_id || ' billed ' || r.billed_seconds || ' cost ' || r.cost || ' captured '"
            + " || COALESCE(-SUM(l.amount), 0) FROM rentals r LEFT JOIN ledger_entries l ON l.rental_id = r.rental_id AND l.kind = 'capture'"
            + " WHERE r.status = 'ended' GROUP BY r.rental_id, r.billed_seconds, r.cost HAVING COALESCE(-SUM(l.amount), 0) <> r.cost");
  }

  static List<String> query(DatabaseSettings db, String sql) throws Exception {
    List<String> rows = new ArrayList<>();
    try (Connection c = DriverManager.getConnection(db.url(), db.user(), db.password());
        Statement st = c.createStatement();
        ResultSet rs = st.executeQuery(sql)) {
      while (rs.next()) rows.add(rs.getString(1));
    }
    return rows;
  }

  // ---- API helpers
  // ----------------------------------------------------------------------------------

  static String launch(ApiClient api, ApiClient.Customer renter, String region) {
    return api.post("/v1/rentals", renter.apiKey(), launchBody(region))
        .expect(201)
        .json()
        .get("rental")
        .get("id")
        .asText();
  }

  static String launchBody(String region) {
    return "{\"gpu\":\"h100-80gb\",\"count\":1,\"region\":\""
        + region
        + "\",\"max_price_per_gpu_hour\":\"3.00\","
        + "\"image\":\"ubuntu:24.04\",\"command\":[\"sleep\",\"3600\"]}";
  }

  static int offered(ApiClient api) {
    int cards = 0;
    for (JsonNode o :
        api.get("/v1/offers?gpu=h100-80gb&tier=on_demand", null).expect(200).json().get("offers")) {
      cards += o.get("available_cards").asInt();
    }
    return cards;
  }

  static JsonNode rental(ApiClient api, ApiClient.Customer renter, String id) {
    return api.get("/v1/rentals/" + id, renter.apiKey()).expect(200).json();
  }

  /** The renter's rentals as the read side lists them (no message reaches a rental entity). */
  static List<JsonNode> listedAll(ApiClient api, ApiClient.Customer renter) {
    List<JsonNode> rows = new ArrayList<>();
    String after = null;
    do {
      JsonNode page =
          api.get(
                  "/v1/rentals?limit=100" + (after == null ? "" : "&after=" + after),
                  renter.apiKey())
              .expect(200)
              .json();
      page.get("rentals").forEach(rows::add);
      after = page.hasNonNull("next_after") ? page.get("next_after").asText() : null;
    } while (after != null);
    return rows;
  }

  static JsonNode listed(ApiClient api, ApiClient.Customer renter, String id) {
    for (JsonNode r : listedAll(api, renter)) if (r.get("id").asText().equals(id)) return r;
    throw new AssertionError("rental " + id + " not listed yet");
  }

  static void awaitListedStatus(
      ApiClient api, ApiClient.Customer renter, String id, String status) {
    eventually(
        WAIT, () -> assertEquals(status, listed(api, renter, id).get("status").asText(), id));
  }

  static JsonNode awaitStatus(ApiClient api, ApiClient.Customer renter, String id, String status) {
    JsonNode[] last = new JsonNode[1];
    eventually(
        WAIT,
        () -> {
          last[0] = rental(api, renter, id);
          assertEquals(status, last[0].get("status").asText(), last[0].toString());
        });
    return last[0];
  }
}
