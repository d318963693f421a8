package dev.tickmark.persistence.hosts;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.tickmark.engine.host.Listing;
import dev.tickmark.engine.host.WorkloadNeeds;
import dev.tickmark.engine.market.Matcher;
import dev.tickmark.persistence.DatabaseSettings;
import dev.tickmark.persistence.Jdbc;
import dev.tickmark.persistence.Migrations;
import dev.tickmark.persistence.TestDatabase;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The matcher's candidate query reads a page's worth of hosts in price order whatever PostgreSQL
 * knows of the table: before any {@code ANALYZE} (a young market), with a generic plan cached then
 * (which an {@code ANALYZE} that leaves the table's page and row counts as they were does not
 * invalidate), and with statistics. Written as one query with the whole order, the plans without
 * column statistics estimated one row and sorted every host of the gpu for every match.
 */
class HostCandidatesPlanIntegrationTest {
  static final int HOSTS = 3_000;
  static final Instant NOW = Instant.parse("2026-11-25T12:00:00Z");
  static DatabaseSettings db;
  static Jdbc jdbc;
  static HostReadModel hosts;

  @BeforeAll
  static void start() throws Exception {
    db = TestDatabase.fresh("candidate_plans");
    Migrations.migrate(db);
    jdbc = Jdbc.create(db, "candidate-plans-test", Executors.newFixedThreadPool(2));
    hosts = new HostReadModel(jdbc);
    try (Connection c = connect();
        Statement st = c.createStatement()) {
      // Only this test decides when the table has statistics.
      st.execute("ALTER TABLE hosts SET (autovacuum_enabled = false)");
      // 3,000 hosts of 100 providers at 101 prices (1.50 to 2.50 EUR), so about 30 tie at each;
      // those at the 20
      // cheapest prices are full, so that a match reads past them.
      st.execute(
          "INSERT INTO hosts (host_id, owner_id, region, status, online, listed, draining, gpu,"
              + " cards_total, cards_taken, on_demand_price, availability, created_at, updated_at,"
              + " rentals_ended, rentals_lost)"
              + " SELECT 'h-' || lpad(i::text, 5, '0'), 'acc_p' || (i % 100), 'eu-nl', 'verified', true, true, false, 'h100-80gb',"
              + " 16, CASE WHEN (i * 7919) % 101 < 20 THEN 16 ELSE i % 4 END,"
              + " 1500000 + ((i * 7919) % 101) * 10000, '[]', now(), now(), i % 13, i % 3"
              + " FROM generate_series(1, "
              + HOSTS
              + ") i");
    }
  }

  @AfterAll
  static void stop() {
    if (jdbc != null) jdbc.close();
  }

  @Test
  void aMatchReadsAPagesWorthOfHostsInPriceOrderWithOrWithoutStatistics() throws Exception {
    String sql = HostReadModel.candidateSql(Listing.Tier.ON_DEMAND, false, true, WorkloadNeeds.ANY);
    // A match's first page: 32 rows, past the full hosts (about 600).
    String execute = "EXECUTE candidates('h100-80gb', 1, 3000000, 'acc_x', 32, 32, 0)";
    try (Connection c = connect();
        Statement st = c.createStatement()) {
      // What a young market's table has: its size, from a vacuum, but no column statistics yet.
      st.execute("VACUUM hosts");
      assertEquals(0, analyzedCount(st), "no column statistics yet");
      st.execute("PREPARE candidates AS " + numbered(sql));
      assertReadsAPage(st, execute, "without statistics");
      // The same page and row counts: this connection's cached generic plan may outlive it.
      st.execute("ANALYZE hosts");
      assertEquals(1, analyzedCount(st));
      assertReadsAPage(st, execute, "after ANALYZE, on a connection that had planned before");
    }
    try (Connection c = connect();
        Statement st = c.createStatement()) {
      st.execute("PREPARE candidates AS " + numbered(sql));
      assertReadsAPage(st, execute, "with statistics");
    }
  }

  static void assertReadsAPage(Statement st, String execute, String when) throws Exception {
    for (String mode : List.of("force_custom_plan", "force_generic_plan")) {
      st.execute("SET plan_cache_mode = " + mode);
      long read = hostRowsRead(st, execute);
      // The full hosts, a page and the hosts tied with its last: well under the 3,000.
      assertTrue(read <= 1_000, when + ", " + mode + ": read " + read + " of " + HOSTS);
    }
  }

  @Test
  void thePagesAreTheMarketsOrderExactlyAcrossPriceTies() throws Exception {
    // Every host, in Matcher.ordered's order, computed here from the whole table.
    List<String[]> all = new ArrayList<>();
    try (Connection c = connect();
        Statement st = c.createStatement();
        ResultSet rs =
            st.executeQuery(
                "SELECT host_id, on_demand_price, cards_total - cards_taken, rentals_ended,"
                    + " rentals_lost FROM hosts")) {
      while (rs.next())
        all.add(
            new String[] {
              rs.getString(1), rs.getString(2), rs.getString(3), rs.getString(4), rs.getString(5)
            });
    }
    Comparator<String[]> order =
        Comparator.<String[]>comparingLong(r -> Long.parseLong(r[1]))
            .thenComparingDouble(
                r -> Long.parseLong(r[4]) / (double) Math.max(1, Long.parseLong(r[3])))
            .thenComparing(r -> Long.parseLong(r[3]), Comparator.reverseOrder())
            .thenComparing(r -> Long.parseLong(r[2]), Comparator.reverseOrder())
            .thenComparing(r -> r[0]);
    List<String> expected =
        all.stream().filter(r -> Long.parseLong(r[2]) >= 1).sorted(order).map(r -> r[0]).toList();

    List<Matcher.Candidate> found =
        hosts
            .candidates("h100-80gb", null, Listing.Tier.ON_DEMAND, 3_000_000, 1, NOW)
            .toCompletableFuture()
            .get(10, TimeUnit.SECONDS);

    assertTrue(found.size() >= HostReadModel.ENOUGH_CANDIDATES, "found " + found.size());
    assertEquals(
        expected.subList(0, found.size()),
        found.stream().map(Matcher.Candidate::hostId).toList(),
        "the first free hosts of the whole market's order: past the full ones, and among the hosts"
            + " tied at the cheapest free price the most reliable first");
  }

  /** Rows PostgreSQL read from {@code hosts} to answer {@code execute}: returned and filtered. */
  static long hostRowsRead(Statement st, String execute) throws Exception {
    try (ResultSet rs = st.executeQuery("EXPLAIN (ANALYZE, FORMAT JSON) " + execute)) {
      rs.next();
      JsonNode plan = new ObjectMapper().readTree(rs.getString(1)).get(0).get("Plan");
      return rowsFrom(plan, "hosts");
    }
  }

  static long rowsFrom(JsonNode node, String table) {
    long rows = 0;
    if (table.equals(node.path("Relation Name").asText()))
      rows +=
          node.path("Actual Rows").asLong() * Math.max(1, node.path("Actual Loops").asLong())
              + node.path("Rows Removed by Filter").asLong()
              + node.path("Rows Removed by Index Recheck").asLong();
    for (JsonNode child : node.path("Plans")) rows += rowsFrom(child, table);
    return rows;
  }

  static int analyzedCount(Statement st) throws Exception {
    try (ResultSet rs =
        st.executeQuery(
            "SELECT count(*) FROM pg_stats WHERE tablename = 'hosts' AND attname = 'on_demand_price'")) {
      rs.next();
      return rs.getInt(1);
    }
  }

  /** JDBC's placeholders as PREPARE's. */
  static String numbered(String sql) {
    StringBuilder out = new StringBuilder();
    int n = 0;
    for (char ch : sql.toCharArray()) {
      if (ch == '?') out.append('$').append(++n);
      else out.append(ch);
    }
    return out.toString();
  }

  static Connection connect() throws Exception {
    return DriverManager.getConnection(db.url(), db.user(), db.password());
  }
}
