package dev.tickmark.node;

import static dev.tickmark.node.Eventually.eventually;
import static dev.tickmark.node.MultiNodeFailoverIntegrationTest.awaitListedStatus;
import static dev.tickmark.node.MultiNodeFailoverIntegrationTest.awaitStatus;
import static dev.tickmark.node.MultiNodeFailoverIntegrationTest.capturesNotMatchingCheckpoints;
import static dev.tickmark.node.MultiNodeFailoverIntegrationTest.duplicateLedgerKeys;
import static dev.tickmark.node.MultiNodeFailoverIntegrationTest.launch;
import static dev.tickmark.node.MultiNodeFailoverIntegrationTest.listedAll;
import static dev.tickmark.node.MultiNodeFailoverIntegrationTest.offered;
import static dev.tickmark.node.MultiNodeFailoverIntegrationTest.rental;
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
import dev.tickmark.node.ClusterProcesses.Placement;
import dev.tickmark.persistence.DatabaseSettings;
import dev.tickmark.persistence.TestDatabase;
import java.net.InetAddress;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.pekko.cluster.sharding.typed.HashCodeMessageExtractor;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Three nodes, each in a Linux network namespace of its own on a bridge the test makes ({@link
 * NetworkNamespaces}), one PostgreSQL reached through a forwarder on the bridge's address, three
 * simulated hosts whose agents (in the test's JVM) each connect to another node first and know all
 * three, and rentals on every node. Then node 1 — the oldest member, running the shard coordinators
 * — is cut off from the other two nodes (nftables drops every packet between them), while it keeps
 * its database and its agents: the worst case for a split brain, since both sides can still write
 * the journal and hear the hosts.
 *
 * <ol>
 *   <li>the minority side downs itself (the split brain resolver's keep-majority: node 1 exits on
 *       its own), the majority downs node 1 and takes over its shards: every rental, node 1's
 *       included, settles seconds past node 1's exit on the majority, and the agents that were on
 *       node 1 reconnect to the majority;
 *   <li>the partition heals and node 1 is started again (a new incarnation, as a supervisor would):
 *       the cluster is three again, and node 1 launches rentals;
 *   <li>every rental is stopped: each is billed exactly its wall-clock window, every second of
 *       which a heartbeat covered (the agents heartbeated throughout and each end was proven by its
 *       agent), the ledger holds every posting key once, the audit says the money is conserved; and
 *       no rental ran on both sides: the journal shows, for every entity, sequence numbers without
 *       gaps written by one incarnation after another, never two at once; no journal write
 *       conflicted in any node's log; each rental was matched, started and ended once, and runs on
 *       at most one host.
 * </ol>
 *
 * The cluster runs with short failure detection (2 s pause, SBR stable-after 3 s), as {@link
 * MultiNodeFailoverIntegrationTest} does; the production values are in docs/runbook.md ("Network
 * partition"). Skipped, saying why, where network namespaces cannot be made (not root, no {@code
 * ip} or {@code nft}), except where {@code TICKMARK_TESTS_REQUIRE} names {@code netns} (CI): there
 * it fails.
 */
class NetworkPartitionIntegrationTest {
  static final Duration WAIT = Duration.ofSeconds(40);

  /** Detection (≈3 s) + stable-after (3 s) + the minority's shutdown + hand-over margin (3 s). */
  static final Duration FAILOVER = Duration.ofSeconds(40);

  static final String PRICE = MultiNodeFailoverIntegrationTest.PRICE;
  static final long PRICE_MICROS = Money.parse(PRICE);
  static final int CARDS_PER_HOST = 6;
  static final int MAX_FIRST_RENTALS = 12;
  static final List<String> REGIONS = MultiNodeFailoverIntegrationTest.REGIONS;
  static final Path LOGS = Path.of("target", "network-partition");

  private NetworkNamespaces net;
  private TcpProxy databaseForwarder;
  private ClusterProcesses cluster;
  private final List<Agent> agents = new ArrayList<>();

  @AfterEach
  void cleanUp() throws Exception {
    for (Agent a : agents) a.close();
    if (cluster != null) cluster.close();
    if (databaseForwarder != null) databaseForwarder.close();
    if (net != null) net.close();
  }

  @Test
  void theMinorityDownsItselfAndTheMajorityCarriesOn() throws Exception {
    NetworkNamespaces.assumeAvailable();
    net = NetworkNamespaces.create(3);
    DatabaseSettings db = TestDatabase.fresh("network_partition");
    DatabaseSettings nodesDb = throughForwarder(db);
    List<Placement> placements = new ArrayList<>();
    for (int i = 1; i <= 3; i++) placements.add(new Placement(net.address(i), net.inNamespace(i)));
    cluster =
        new ClusterProcesses(
            nodesDb,
            placements,
            LOGS,
            Map.of("TICKMARK_SETTLE_INTERVAL", "2s", "TICKMARK_DB_POOL_SIZE", "4"),
            List.of(
                "-Dpekko.cluster.failure-detector.acceptable-heartbeat-pause=2s",
                "-Dpekko.cluster.split-brain-resolver.stable-after=3s",
                "-Dtickmark.rentals.wake-interval=2s",
                "-Dtickmark.rentals.provisioning-timeout=15s",
                "-Dpekko.cluster.sharded-daemon-process.keep-alive-interval=2s"));
    try {
      scenario(db);
    } catch (Throwable t) {
      System.out.println(diagnostics());
      throw t;
    }
  }

  private void scenario(DatabaseSettings db) throws Exception {
    Instant began = Instant.now();
    cluster.startAll();
    NodeProcess node1 = cluster.node(1);
    NodeProcess node2 = cluster.node(2);
    NodeProcess node3 = cluster.node(3);
    Map<Integer, String> allUp =
        Map.of(node1.remotePort, "Up", node2.remotePort, "Up", node3.remotePort, "Up");
    eventually(WAIT, () -> assertEquals(allUp, cluster.members(node2)));
    System.out.printf(
        "three nodes up in namespaces %s after %d ms%n",
        List.of(net.namespace(1), net.namespace(2), net.namespace(3)),
        Duration.between(began, Instant.now()).toMillis());

    // Agent i connects to node i first and knows the other two.
    ApiClient api2 = node2.api;
    ApiClient.Customer provider = api2.signUp("Provider");
    Path temp = Files.createTempDirectory("tickmark-partition");
    for (NodeProcess home : cluster.nodes()) {
      String token =
          home.api
              .post(
                  "/v1/hosts/registration-tokens",
                  provider.apiKey(),
                  "{\"region\":\"" + REGIONS.get(home.index - 1) + "\"}")
              .expect(201)
              .json()
              .get("token")
              .asText();
      List<URI> engines = new ArrayList<>();
      for (int i = 0; i < 3; i++)
        engines.add(AgentConfig.engine(cluster.nodes().get((home.index - 1 + i) % 3).engine()));
      // Plain ws:// off loopback needs --insecure: the bridge is the test's own, nothing else on
      // it.
      agents.add(
          Agent.start(
              new AgentConfig(
                  engines,
                  token,
                  temp.resolve("agent-" + home.index),
                  SimulatedGpus.parse("h100-80gb:" + CARDS_PER_HOST),
                  null,
                  null,
                  null,
                  true,
                  false)));
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
    URI node1Engine = AgentConfig.engine(node1.engine());
    Agent onMinority = agents.get(0);
    assertEquals(
        Set.of(node1Engine), Set.of(onMinority.engine().orElseThrow()), "agent 1 on node1");

    ApiClient.Customer renter = api2.signUp("Renter");
    api2.opsDeposit(renter.id(), "200", "welcome-" + renter.id()).expect(201);

    // Launch through every node in turn until rentals live on all three nodes.
    List<String> rentals = new ArrayList<>();
    Map<String, NodeProcess> placement = Map.of();
    while (rentals.size() < MAX_FIRST_RENTALS) {
      for (NodeProcess n : cluster.nodes())
        rentals.add(launch(n.api, renter, REGIONS.get(rentals.size() % 3)));
      for (String id : rentals) awaitListedStatus(api2, renter, id, "running");
      placement = whereRentalsLive(rentals);
      if (Set.copyOf(placement.values()).size() == 3
          && Collections.frequency(placement.values(), node1) >= 2) break;
    }
    Map<String, NodeProcess> before = placement;
    assertEquals(3, Set.copyOf(before.values()).size(), "rentals on every node: " + before);
    List<String> onNode1 = rentals.stream().filter(id -> before.get(id) == node1).toList();
    assertTrue(onNode1.size() >= 2, "two rentals or more on node1: " + before);
    Set<String> node1Shards =
        cluster.shards(node1, MultiNodeFailoverIntegrationTest.RENTAL_TYPE).keySet();
    Map<String, Instant> startedAt = new HashMap<>();
    for (String id : rentals)
      startedAt.put(id, Instant.parse(rental(api2, renter, id).get("started_at").asText()));
    eventually(
        WAIT,
        () -> {
          for (String id : rentals) assertTrue(listedBilled(api2, renter, id) >= 2, id);
        });
    System.out.printf(
        "%d rentals; on node1: %s (shards %s)%n", rentals.size(), onNode1, node1Shards);

    // ---- 1. Cut node1 off from nodes 2 and 3. It keeps the database and its agents.
    Instant cutAt = Instant.now();
    net.isolate(1);
    // Until it downs itself node1 still owns its shards, and it has the database: a stop it takes
    // now is written by the minority side, and the majority must carry it on, not run the rental.
    String stoppedOnMinority = onNode1.get(0);
    Instant stopAskedAt = Instant.now();
    node1.api.post("/v1/rentals/" + stoppedOnMinority + "/stop", renter.apiKey(), null).expect(202);
    Instant[] minorityStop = {stopAskedAt, Instant.now()};
    System.out.printf(
        "node1, cut off, accepted the stop of %s in %d ms%n",
        stoppedOnMinority, Duration.between(stopAskedAt, minorityStop[1]).toMillis());
    eventually(
        FAILOVER,
        () ->
            assertEquals(
                Map.of(node2.remotePort, "Up", node3.remotePort, "Up"),
                cluster.members(node2),
                "the majority downed and removed node1"));
    assertTrue(
        node1.process.waitFor(FAILOVER.toSeconds(), TimeUnit.SECONDS),
        "node1, alone, downed itself and exited");
    Instant node1Exited = Instant.now();
    String node1Log = Files.readString(node1.log, StandardCharsets.UTF_8);
    assertTrue(
        node1Log.contains("SBR took decision DownReachable")
            && node1Log.contains("including myself"),
        "node1's own split brain resolver downed its side (itself):\n"
            + ClusterProcesses.tail(node1.log));
    System.out.printf(
        "cut at %s: node2 saw node1 removed, node1 downed itself and exited (code %d) %d ms after the"
            + " cut%n",
        cutAt, node1.process.exitValue(), Duration.between(cutAt, node1Exited).toMillis());

    // Settled beyond the second node1 exited: only the majority can have settled it.
    Map<String, Long> resumedAfterMillis = new HashMap<>();
    eventually(
        FAILOVER,
        () -> {
          for (JsonNode row : listedAll(api2, renter)) {
            String id = row.get("id").asText();
            if (!startedAt.containsKey(id)
                || id.equals(stoppedOnMinority)
                || resumedAfterMillis.containsKey(id)) continue;
            assertEquals("running", row.get("status").asText(), row.toString());
            long atExit = Duration.between(startedAt.get(id), node1Exited).getSeconds();
            if (row.get("billed_seconds").asLong() > atExit)
              resumedAfterMillis.put(id, Duration.between(node1Exited, Instant.now()).toMillis());
          }
          Set<String> expected = new HashSet<>(rentals);
          expected.remove(stoppedOnMinority);
          assertEquals(expected, resumedAfterMillis.keySet(), "rentals metering on the majority");
        });
    System.out.printf(
        "after node1's exit: its rentals metered on the majority after %s ms, the others after %s ms%n",
        onNode1.stream().map(resumedAfterMillis::get).toList(),
        rentals.stream().filter(id -> !onNode1.contains(id)).map(resumedAfterMillis::get).toList());
    // The rental node1 stopped is not required here: if node1 finished the stop before it exited,
    // nothing wakes that ended rental on the majority (the waker wakes unfinished ones), so its
    // shard may have no home until someone asks; its bill is checked with the others' below. And a
    // shard that does not answer Pekko Management's stats query in time is left out of that answer,
    // so the placement is read again until every running rental of node1's is found.
    List<String> runningOnNode1 =
        onNode1.stream().filter(id -> !id.equals(stoppedOnMinority)).toList();
    eventually(
        WAIT,
        () -> {
          Map<String, NodeProcess> after = whereRentalsLive(rentals);
          for (String id : runningOnNode1)
            assertTrue(
                after.get(id) == node2 || after.get(id) == node3,
                "node1's rental " + id + " lives on the majority: " + after);
        });
    System.out.printf(
        "the rental stopped on node1 is %s on the majority (%s)%n",
        whereRentalsLive(List.of(stoppedOnMinority)).containsKey(stoppedOnMinority)
            ? "placed"
            : "not placed",
        rental(api2, renter, stoppedOnMinority).get("status").asText());
    for (Agent agent : agents)
      eventually(
          WAIT,
          () ->
              assertTrue(
                  agent.connected() && !agent.engine().orElseThrow().equals(node1Engine),
                  "agent on the majority"));

    // ---- 2. Heal, and start node1 again (a new incarnation on the same address).
    net.heal(1);
    Instant healedAt = Instant.now();
    cluster.start(node1);
    eventually(WAIT, () -> assertEquals(allUp, cluster.members(node2), "three again"));
    eventually(WAIT, () -> assertEquals(allUp, cluster.members(node1), "node1 sees all three"));
    System.out.printf(
        "healed: node1 rejoined %d ms after the heal%n",
        Duration.between(healedAt, Instant.now()).toMillis());
    List<String> afterHeal = new ArrayList<>();
    for (int i = 0; i < 3; i++) afterHeal.add(launch(node1.api, renter, REGIONS.get(i)));
    for (String id : afterHeal) {
      awaitListedStatus(api2, renter, id, "running");
      startedAt.put(id, Instant.parse(rental(node1.api, renter, id).get("started_at").asText()));
      rentals.add(id);
    }

    // ---- 3. Stop every rental and check the money and the journal.
    Map<String, Instant[]> stopWindows = new LinkedHashMap<>();
    stopWindows.put(stoppedOnMinority, minorityStop);
    for (String id : rentals) {
      if (id.equals(stoppedOnMinority)) continue;
      Instant requested = Instant.now();
      node1.api.post("/v1/rentals/" + id + "/stop", renter.apiKey(), null).expect(202);
      stopWindows.put(id, new Instant[] {requested, Instant.now()});
    }
    for (String id : rentals) {
      JsonNode ended = awaitStatus(api2, renter, id, "ended");
      assertEquals(
          Rental.EndReason.STOPPED_BY_RENTER.wire(),
          ended.get("end_reason").asText(),
          "the agent kept heartbeating: " + ended);
      long billed = ended.get("billed_seconds").asLong();
      long earliest = Duration.between(startedAt.get(id), stopWindows.get(id)[0]).getSeconds();
      long latest = Duration.between(startedAt.get(id), stopWindows.get(id)[1]).getSeconds();
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
    }
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
    assertEquals(List.of(), duplicateLedgerKeys(db), "no posting key applied twice");
    assertEquals(
        List.of(),
        capturesNotMatchingCheckpoints(db),
        "each rental's captures add up to its billed seconds");

    // No rental ran on both sides, and none runs on after its end (the one stopped by the minority
    // included: its stop reached the agent).
    for (Agent agent : agents)
      eventually(
          WAIT, () -> assertEquals(List.of(), agent.runningRentals(), "workloads left on a host"));
    assertEquals(
        List.of(), rentalEventsRecordedTwice(db), "each rental matched, started and ended once");
    Journal journal = journal(db);
    assertEquals(List.of(), journal.violations(), "one writer at a time per entity, no gaps");
    for (NodeProcess n : cluster.nodes()) {
      String log = Files.readString(n.log, StandardCharsets.UTF_8);
      for (String sign : List.of("Failed to persist", "Key (persistence_id, sequence_number)"))
        assertFalse(log.contains(sign), n + " logged a journal write conflict (" + sign + ")");
    }
    // The minority kept writing while cut off (it had the database): the check above is not empty.
    Journal.Handover handover =
        journal.handover(rentals.stream().filter(onNode1::contains).toList(), cutAt);
    System.out.printf(
        "journal: %d entities, %d moved between incarnations; node1's rentals: %d events written by the"
            + " cut-off side after the cut, the majority's first write %s ms after the minority's last%n",
        journal.entities(), journal.moved(), handover.minorityWrites(), handover.gapMillis());
    assertTrue(handover.minorityWrites() > 0, "the cut-off node wrote while cut off: " + handover);
  }

  // ---- the journal, read directly ----------------------------------------------------------

  /** Each rental's events that must be recorded at most once. */
  private static List<String> rentalEventsRecordedTwice(DatabaseSettings db) throws Exception {
    return MultiNodeFailoverIntegrationTest.query(
        db,
        "SELECT persistence_id || ' ' || event_ser_manifest || ' x' || COUNT(*) FROM event_journal"
            + " WHERE persistence_id LIKE 'Rental|%' AND (event_ser_manifest LIKE '%$Matched'"
            + " OR event_ser_manifest LIKE '%$Started' OR event_ser_manifest LIKE '%$Ended')"
            + " GROUP BY persistence_id, event_ser_manifest HAVING COUNT(*) > 1");
  }

  record Row(long sequenceNumber, String writer, long writtenAtMillis) {}

  /** The journal's events per persistence id, in sequence order. */
  record Journal(Map<String, List<Row>> events) {
    record Handover(int minorityWrites, List<Long> gapMillis) {}

    int entities() {
      return events.size();
    }

    /** Entities whose events more than one incarnation wrote. */
    long moved() {
      return events.values().stream()
          .filter(rows -> rows.stream().map(Row::writer).distinct().count() > 1)
          .count();
    }

    /**
     * Per entity: sequence numbers 1..n without gaps, and its writers (one per incarnation) one
     * after another: a writer never comes back after another wrote, and writes no later than the
     * next one's first write.
     */
    List<String> violations() {
      List<String> found = new ArrayList<>();
      events.forEach(
          (pid, rows) -> {
            for (int i = 0; i < rows.size(); i++) {
              if (rows.get(i).sequenceNumber() != i + 1) {
                found.add(
                    pid + ": sequence number " + rows.get(i).sequenceNumber() + " at " + (i + 1));
                return;
              }
            }
            Set<String> done = new HashSet<>();
            for (int i = 1; i < rows.size(); i++) {
              Row previous = rows.get(i - 1);
              Row row = rows.get(i);
              if (row.writer().equals(previous.writer())) continue;
              done.add(previous.writer());
              if (done.contains(row.writer()))
                found.add(
                    pid + ": writer " + row.writer() + " came back at " + row.sequenceNumber());
              if (row.writtenAtMillis() < previous.writtenAtMillis())
                found.add(
                    pid
                        + ": seq "
                        + row.sequenceNumber()
                        + " written before seq "
                        + previous.sequenceNumber());
            }
          });
      return found;
    }

    /**
     * For rentals that lived on the cut-off node: the events its incarnations wrote after the cut,
     * and per rental how long after its last such write the majority's incarnation first wrote.
     */
    Handover handover(List<String> rentalIds, Instant cut) {
      int minorityWrites = 0;
      List<Long> gaps = new ArrayList<>();
      for (String id : rentalIds) {
        List<Row> rows = events.getOrDefault("Rental|" + id, List.of());
        Set<String> writersBeforeCut = new HashSet<>();
        for (Row r : rows)
          if (r.writtenAtMillis() < cut.toEpochMilli()) writersBeforeCut.add(r.writer());
        long lastMinority = -1;
        long firstMajority = -1;
        for (Row r : rows) {
          if (r.writtenAtMillis() < cut.toEpochMilli()) continue;
          if (writersBeforeCut.contains(r.writer())) {
            minorityWrites++;
            lastMinority = r.writtenAtMillis();
          } else if (firstMajority < 0) firstMajority = r.writtenAtMillis();
        }
        if (lastMinority >= 0 && firstMajority >= 0) gaps.add(firstMajority - lastMinority);
      }
      return new Handover(minorityWrites, gaps);
    }
  }

  private static Journal journal(DatabaseSettings db) throws Exception {
    Map<String, List<Row>> events = new LinkedHashMap<>();
    try (Connection c = DriverManager.getConnection(db.url(), db.user(), db.password());
        Statement st = c.createStatement();
        ResultSet rs =
            st.executeQuery(
                "SELECT persistence_id, sequence_number, writer, write_timestamp FROM event_journal"
                    + " ORDER BY persistence_id, sequence_number")) {
      while (rs.next()) {
        events
            .computeIfAbsent(rs.getString(1), k -> new ArrayList<>())
            .add(new Row(rs.getLong(2), rs.getString(3), rs.getLong(4)));
      }
    }
    return new Journal(events);
  }

  // ---- helpers -------------------------------------------------------------------------------

  /**
   * The test database as the nodes reach it: through a forwarder on the bridge's address (the
   * server listens on the root namespace's loopback, which the namespaces do not share).
   */
  private DatabaseSettings throughForwarder(DatabaseSettings db) throws Exception {
    Matcher m = Pattern.compile("jdbc:postgresql://([^/:]+)(?::(\\d+))?/(.*)").matcher(db.url());
    if (!m.matches()) throw new IllegalStateException("unexpected database url " + db.url());
    int port = m.group(2) == null ? 5432 : Integer.parseInt(m.group(2));
    databaseForwarder = new TcpProxy(net.gatewayAddress(), InetAddress.getByName(m.group(1)), port);
    String url =
        "jdbc:postgresql://" + net.gateway() + ":" + databaseForwarder.port() + "/" + m.group(3);
    return new DatabaseSettings(url, db.user(), db.password(), db.poolSize());
  }

  private Map<String, NodeProcess> whereRentalsLive(List<String> rentals) {
    int shardsTotal =
        com.typesafe.config.ConfigFactory.load().getInt("pekko.cluster.sharding.number-of-shards");
    HashCodeMessageExtractor<Object> extractor = new HashCodeMessageExtractor<>(shardsTotal);
    Map<String, NodeProcess> shardOwner = new HashMap<>();
    for (NodeProcess n : cluster.nodes()) {
      if (!n.alive()) continue;
      for (String shard :
          cluster.shards(n, MultiNodeFailoverIntegrationTest.RENTAL_TYPE).keySet()) {
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

  private static long listedBilled(ApiClient api, ApiClient.Customer renter, String id) {
    for (JsonNode r : listedAll(api, renter))
      if (r.get("id").asText().equals(id)) return r.get("billed_seconds").asLong();
    throw new AssertionError("rental " + id + " not listed yet");
  }

  private String diagnostics() {
    StringBuilder out = new StringBuilder("---- diagnostics\n");
    if (cluster != null) {
      for (NodeProcess n : cluster.nodes()) {
        out.append("-- ").append(n).append(n.alive() ? " alive" : " not running").append('\n');
        if (n.alive()) {
          try {
            out.append("members: ").append(cluster.members(n)).append('\n');
          } catch (AssertionError | RuntimeException e) {
            out.append("members: ").append(e.getMessage()).append('\n');
          }
        }
        out.append(ClusterProcesses.tail(n.log)).append('\n');
      }
    }
    if (net != null) out.append("-- nftables in node1's namespace:\n").append(net.rules(1));
    return out.toString();
  }
}
