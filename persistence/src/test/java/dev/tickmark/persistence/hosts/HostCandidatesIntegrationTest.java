package dev.tickmark.persistence.hosts;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.tickmark.engine.host.Listing;
import dev.tickmark.engine.host.WorkloadNeeds;
import dev.tickmark.engine.market.Matcher;
import dev.tickmark.engine.market.Matcher.Candidate;
import dev.tickmark.persistence.DatabaseSettings;
import dev.tickmark.persistence.Jdbc;
import dev.tickmark.persistence.Migrations;
import dev.tickmark.persistence.TestDatabase;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.Timestamp;
import java.time.Instant;
import java.time.ZoneOffset;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The matcher's candidate query on a real PostgreSQL: market rules, cheapest first, bounded,
 * availability windows.
 */
class HostCandidatesIntegrationTest {
  static DatabaseSettings db;
  static Jdbc jdbc;
  static HostReadModel hosts;
  static final Instant NOW = Instant.parse("2026-11-25T12:00:00Z"); // a Wednesday, noon UTC

  @BeforeAll
  static void start() throws Exception {
    db = TestDatabase.fresh("candidates");
    Migrations.migrate(db);
    jdbc = Jdbc.create(db, "candidates-test", Executors.newFixedThreadPool(2));
    hosts = new HostReadModel(jdbc);
    // 300 on-market H100 hosts, prices 1.000000 + i µ€ descending with i, so the cheapest are the
    // last inserted.
    for (int i = 0; i < 300; i++)
      insert(
          "h-" + i,
          "h100-80gb",
          i % 2 == 0 ? "eu-nl" : "eu-de",
          "verified",
          true,
          true,
          false,
          8,
          i % 8,
          2_000_000L - i * 1_000,
          i % 3 == 0 ? 1_000_000L - i * 1_000 : null,
          "[]");
    insert("h-offline", "h100-80gb", "eu-nl", "verified", false, true, false, 8, 0, 1, 1L, "[]");
    insert("h-unlisted", "h100-80gb", "eu-nl", "verified", true, false, false, 8, 0, 1, 1L, "[]");
    insert("h-draining", "h100-80gb", "eu-nl", "verified", true, true, true, 8, 0, 1, 1L, "[]");
    insert("h-unverified", "h100-80gb", "eu-nl", "verifying", true, true, false, 8, 0, 1, 1L, "[]");
    insert("h-other-gpu", "a100-80gb", "eu-nl", "verified", true, true, false, 8, 0, 1, 1L, "[]");
    // Cheapest of all, but only available on Mondays: never a candidate on a Wednesday.
    insert(
        "h-mondays",
        "h100-80gb",
        "eu-nl",
        "verified",
        true,
        true,
        false,
        8,
        0,
        2,
        2L,
        "[{\"day\":\"MONDAY\",\"startMinute\":0,\"endMinute\":1440}]");
    // Cheap and available now (Wednesday 11:00-13:00).
    insert(
        "h-noon",
        "h100-80gb",
        "eu-nl",
        "verified",
        true,
        true,
        false,
        8,
        0,
        3,
        3L,
        "[{\"day\":\"WEDNESDAY\",\"startMinute\":660,\"endMinute\":780}]");
  }

  @AfterAll
  static void stop() {
    if (jdbc != null) jdbc.close();
  }

  static void insert(
      String id,
      String gpu,
      String region,
      String status,
      boolean online,
      boolean listed,
      boolean draining,
      int total,
      int taken,
      long onDemand,
      Long spot,
      String availability)
      throws Exception {
    try (Connection c = DriverManager.getConnection(db.url(), db.user(), db.password());
        PreparedStatement st =
            c.prepareStatement(
                "INSERT INTO hosts (host_id, owner_id, region, status, online, listed, draining, gpu,"
                    + " cards_total, cards_taken, on_demand_price, spot_price, availability, created_at, updated_at)"
                    + " VALUES (?, 'acc_p', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")) {
      Timestamp at = Timestamp.from(NOW.atZone(ZoneOffset.UTC).toInstant());
      st.setString(1, id);
      st.setString(2, region);
      st.setString(3, status);
      st.setBoolean(4, online);
      st.setBoolean(5, listed);
      st.setBoolean(6, draining);
      st.setString(7, gpu);
      st.setInt(8, total);
      st.setInt(9, taken);
      st.setLong(10, onDemand);
      if (spot == null) st.setNull(11, java.sql.Types.BIGINT);
      else st.setLong(11, spot);
      st.setString(12, availability);
      st.setTimestamp(13, at);
      st.setTimestamp(14, at);
      st.executeUpdate();
    }
  }

  static List<Candidate> candidates(String region, Listing.Tier tier, long max, int count)
      throws Exception {
    return hosts
        .candidates("h100-80gb", region, tier, max, count, NOW)
        .toCompletableFuture()
        .get(10, TimeUnit.SECONDS);
  }

  @Test
  void returnsAFewOnMarketHostsCheapestFirst() throws Exception {
    List<Candidate> found = candidates(null, Listing.Tier.ON_DEMAND, 3_000_000, 1);
    // One page (less the host outside its window), whatever the size of the market.
    assertEquals(HostReadModel.CANDIDATE_PAGE - 1, found.size(), found.toString());
    assertEquals("h-noon", found.get(0).hostId(), "the cheapest host available now");
    assertEquals(3, found.get(0).floorPricePerGpuHour());
    for (int i = 1; i < found.size(); i++) {
      assertTrue(
          found.get(i - 1).floorPricePerGpuHour() <= found.get(i).floorPricePerGpuHour(),
          found.toString());
    }
    assertEquals("h-299", found.get(1).hostId());
    assertTrue(
        found.stream()
            .noneMatch(
                c ->
                    List.of(
                            "h-offline",
                            "h-unlisted",
                            "h-draining",
                            "h-unverified",
                            "h-other-gpu",
                            "h-mondays")
                        .contains(c.hostId())),
        found.toString());
  }

  @Test
  void honoursRegionCeilingCardCountAndTier() throws Exception {
    List<Candidate> found = candidates("eu-de", Listing.Tier.ON_DEMAND, 1_750_000, 7);
    assertTrue(!found.isEmpty());
    for (Candidate c : found) {
      int i = Integer.parseInt(c.hostId().substring(2));
      assertEquals(1, i % 2, "eu-de hosts only: " + c);
      assertTrue(c.floorPricePerGpuHour() <= 1_750_000, c.toString());
      assertTrue(c.freeCards() >= 7, c.toString());
      assertEquals(2_000_000L - i * 1_000, c.floorPricePerGpuHour());
    }
    List<Candidate> spot = candidates(null, Listing.Tier.SPOT, 3_000_000, 1);
    assertEquals("h-noon", spot.get(0).hostId());
    for (Candidate c : spot.subList(1, spot.size())) {
      int i = Integer.parseInt(c.hostId().substring(2));
      assertEquals(0, i % 3, "only hosts with a spot price: " + c);
      assertEquals(1_000_000L - i * 1_000, c.floorPricePerGpuHour());
    }
    assertEquals(
        List.of(), candidates(null, Listing.Tier.ON_DEMAND, 2, 1), "nothing at or below 0.000002");
  }

  @Test
  void aRentalWithNetworkIsNeverOfferedAHostThatSaidItCannotGiveIt() throws Exception {
    // Three hosts of a model of their own: the cheapest said it cannot give network (a sandbox
    // without slirp4netns), the next has not said (an older agent), the dearest can.
    insert("n-none", "l40s-48gb", "eu-nl", "verified", true, true, false, 4, 0, 100, null, "[]");
    insert("n-unsaid", "l40s-48gb", "eu-nl", "verified", true, true, false, 4, 0, 200, null, "[]");
    insert("n-able", "l40s-48gb", "eu-nl", "verified", true, true, false, 4, 0, 300, null, "[]");
    try (Connection c = DriverManager.getConnection(db.url(), db.user(), db.password());
        PreparedStatement st =
            c.prepareStatement(
                "UPDATE hosts SET runtime = ?, offers_network = ? WHERE host_id = ?")) {
      st.setString(1, "sandbox");
      st.setBoolean(2, false);
      st.setString(3, "n-none");
      st.addBatch();
      st.setString(1, "docker");
      st.setBoolean(2, true);
      st.setString(3, "n-able");
      st.addBatch();
      st.executeBatch();
    }
    List<String> withNetwork = needing("l40s-48gb", new WorkloadNeeds(true, null));
    assertEquals(List.of("n-unsaid", "n-able"), withNetwork, "cheapest first, never n-none");
    List<String> without =
        hosts
            .candidates("l40s-48gb", null, Listing.Tier.ON_DEMAND, 3_000_000, 1, NOW)
            .toCompletableFuture()
            .get(10, TimeUnit.SECONDS)
            .stream()
            .map(Candidate::hostId)
            .toList();
    assertEquals(
        List.of("n-none", "n-unsaid", "n-able"), without, "a rental without network: all three");
  }

  @Test
  void aRentalThatNamesARuntimeIsOfferedOnlyHostsThatSaidTheyRunIt() throws Exception {
    // Four hosts of a model of their own, cheapest first: a sandbox without network, one whose
    // agent has not said, a docker host, a sandbox with network.
    insert(
        "r-sandbox",
        "rtx-4090-24gb",
        "eu-nl",
        "verified",
        true,
        true,
        false,
        4,
        0,
        100,
        null,
        "[]");
    insert(
        "r-unsaid", "rtx-4090-24gb", "eu-nl", "verified", true, true, false, 4, 0, 200, null, "[]");
    insert(
        "r-docker", "rtx-4090-24gb", "eu-nl", "verified", true, true, false, 4, 0, 300, null, "[]");
    insert(
        "r-slirp", "rtx-4090-24gb", "eu-nl", "verified", true, true, false, 4, 0, 400, null, "[]");
    try (Connection c = DriverManager.getConnection(db.url(), db.user(), db.password());
        PreparedStatement st =
            c.prepareStatement(
                "UPDATE hosts SET runtime = ?, offers_network = ? WHERE host_id = ?")) {
      for (String[] h :
          List.of(
              new String[] {"r-sandbox", "sandbox", "false"},
              new String[] {"r-docker", "docker", "true"},
              new String[] {"r-slirp", "sandbox", "true"})) {
        st.setString(1, h[1]);
        st.setBoolean(2, Boolean.parseBoolean(h[2]));
        st.setString(3, h[0]);
        st.addBatch();
      }
      st.executeBatch();
    }
    assertEquals(List.of("r-docker"), needing("rtx-4090-24gb", new WorkloadNeeds(false, "docker")));
    assertEquals(
        List.of("r-sandbox", "r-slirp"),
        needing("rtx-4090-24gb", new WorkloadNeeds(false, "sandbox")),
        "never the host that did not say");
    assertEquals(
        List.of("r-slirp"),
        needing("rtx-4090-24gb", new WorkloadNeeds(true, "sandbox")),
        "a sandbox that can give network");
    assertEquals(List.of(), needing("rtx-4090-24gb", new WorkloadNeeds(false, "process")));
    assertEquals(
        List.of("r-sandbox", "r-unsaid", "r-docker", "r-slirp"),
        needing("rtx-4090-24gb", WorkloadNeeds.ANY),
        "any runtime: all four, cheapest first");
  }

  /** The ids of the candidates for a rental of one {@code gpu} with these needs. */
  static List<String> needing(String gpu, WorkloadNeeds needs) throws Exception {
    return hosts
        .candidates(
            gpu,
            null,
            Listing.Tier.ON_DEMAND,
            3_000_000,
            1,
            null,
            needs,
            Matcher.Holdings.NONE,
            NOW)
        .toCompletableFuture()
        .get(10, TimeUnit.SECONDS)
        .stream()
        .map(Candidate::hostId)
        .toList();
  }

  /** Candidates for a matcher holding {@code cards} on each host, reserved at {@code at}. */
  static List<Candidate> candidatesBeyond(Map<String, Integer> cards, Instant at) throws Exception {
    Map<String, List<Matcher.Holding>> byHost = new HashMap<>();
    cards.forEach((host, n) -> byHost.put(host, List.of(new Matcher.Holding(n, at))));
    return hosts
        .candidates(
            "h100-80gb",
            null,
            Listing.Tier.ON_DEMAND,
            3_000_000,
            1,
            null,
            WorkloadNeeds.ANY,
            new Matcher.Holdings(byHost),
            NOW)
        .toCompletableFuture()
        .get(10, TimeUnit.SECONDS);
  }

  /** Cards proposed, with no answer yet: the read side cannot show them. */
  static List<Candidate> candidatesBeyond(Map<String, Integer> cards) throws Exception {
    return candidatesBeyond(cards, null);
  }

  /**
   * Cards reserved at or before the row's last update are on the read side already; counted again
   * they would hide a host's last free cards.
   */
  @Test
  void countsOnlyTheCardsReservedAfterTheRowsLastUpdate() throws Exception {
    // every row was last updated at NOW; h-299 has 5 free cards
    assertEquals(
        "h-299",
        candidatesBeyond(Map.of("h-299", 5), NOW).get(1).hostId(),
        "reserved at the row's update: shown already");
    assertEquals(
        "h-298",
        candidatesBeyond(Map.of("h-299", 5), NOW.plusMillis(1)).get(1).hostId(),
        "reserved after it: not shown yet");
    assertEquals(
        "h-299", candidatesBeyond(Map.of("h-299", 5), NOW.minusSeconds(1)).get(1).hostId());
  }

  /**
   * Under load the read side lags: the cheapest hosts it shows free were filled by the matcher
   * moments ago. Told what the matcher holds, it reads past them, cheapest first.
   */
  @Test
  void readsPastTheHostsTheMatcherHoldsEveryFreeCardOf() throws Exception {
    Map<String, Integer> held = new HashMap<>();
    held.put("h-noon", 8);
    for (int i = 200; i < 300; i++) held.put("h-" + i, 8 - i % 8); // every free card
    List<Candidate> found = candidatesBeyond(held);
    assertTrue(found.size() >= HostReadModel.ENOUGH_CANDIDATES, found.toString());
    assertEquals("h-199", found.get(0).hostId(), "the cheapest host not held");
    assertTrue(found.stream().noneMatch(c -> held.containsKey(c.hostId())), found.toString());
    for (int i = 1; i < found.size(); i++)
      assertTrue(
          found.get(i - 1).floorPricePerGpuHour() <= found.get(i).floorPricePerGpuHour(),
          found.toString());

    // A host with a card left after what the matcher holds there is still offered.
    assertEquals(
        List.of("h-noon", "h-299", "h-298"),
        candidatesBeyond(Map.of("h-299", 4)).subList(0, 3).stream().map(Candidate::hostId).toList(),
        "h-299 has 5 free cards, 4 held");
    assertEquals(
        List.of("h-noon", "h-298"),
        candidatesBeyond(Map.of("h-299", 5)).subList(0, 2).stream()
            .map(Candidate::hostId)
            .toList());
  }

  /** The matcher's count may be stale: when it holds every host, they are offered anyway. */
  @Test
  void offersTheHeldHostsWhenNoOtherIsFree() throws Exception {
    Map<String, Integer> held = new HashMap<>();
    held.put("h-noon", 8);
    for (int i = 0; i < 300; i++) held.put("h-" + i, 8);
    List<Candidate> plain = candidates(null, Listing.Tier.ON_DEMAND, 3_000_000, 1);
    List<Candidate> offered = candidatesBeyond(held);
    assertTrue(offered.size() <= HostReadModel.CANDIDATE_PAGE, offered.toString());
    assertEquals(plain, offered.subList(0, plain.size()), "the cheapest, as without the held");
  }

  /**
   * DESIGN.md: "break ties by reliability". Forty hosts at one floor, more than a page: the query
   * itself orders them by the share of their ended rentals lost, then the longer record, so the
   * reliable ones are in the page even where their free cards and ids would put them last.
   */
  @Test
  void ordersEqualFloorsByReliabilityBeforeFreeCards() throws Exception {
    String gpu = "rtx4090-24gb";
    for (int i = 0; i < 36; i++) host(gpu, String.format("r-%02d", i), 8, 10, 5); // lost half
    host(gpu, "r-36", 2, 0, 0); // no record yet
    host(gpu, "r-37", 1, 100, 0); // a hundred, none lost
    host(gpu, "r-38", 8, 100, 1); // one in a hundred lost
    host(gpu, "r-39", 8, 3, 1); // one in three lost
    List<Candidate> found =
        hosts
            .candidates(gpu, null, Listing.Tier.ON_DEMAND, 3_000_000, 1, NOW)
            .toCompletableFuture()
            .get(10, TimeUnit.SECONDS);
    assertEquals(HostReadModel.CANDIDATE_PAGE, found.size());
    assertEquals(
        List.of("r-37", "r-36", "r-38", "r-39", "r-00"),
        found.subList(0, 5).stream().map(Candidate::hostId).toList());
    assertEquals(new dev.tickmark.engine.market.Reliability(100, 0), found.get(0).reliability());
    assertEquals(dev.tickmark.engine.market.Reliability.NONE, found.get(1).reliability());
  }

  static void host(String gpu, String id, int free, long ended, long lost) throws Exception {
    insert(id, gpu, "eu-nl", "verified", true, true, false, 8, 8 - free, 2_000_000L, null, "[]");
    try (Connection c = DriverManager.getConnection(db.url(), db.user(), db.password());
        PreparedStatement st =
            c.prepareStatement(
                "UPDATE hosts SET rentals_ended = ?, rentals_lost = ? WHERE host_id = ?")) {
      st.setLong(1, ended);
      st.setLong(2, lost);
      st.setString(3, id);
      st.executeUpdate();
    }
  }

  @Test
  void neverOffersARenterItsOwnHosts() throws Exception {
    // every host here is acc_p's
    List<Candidate> anyone = candidates(null, Listing.Tier.ON_DEMAND, 3_000_000, 1);
    assertEquals(
        anyone,
        hosts
            .candidates("h100-80gb", null, Listing.Tier.ON_DEMAND, 3_000_000, 1, "acc_r", NOW)
            .toCompletableFuture()
            .get(10, TimeUnit.SECONDS));
    assertEquals(
        List.of(),
        hosts
            .candidates("h100-80gb", null, Listing.Tier.ON_DEMAND, 3_000_000, 1, "acc_p", NOW)
            .toCompletableFuture()
            .get(10, TimeUnit.SECONDS),
        "the owner is offered none of its hosts");
  }
}
