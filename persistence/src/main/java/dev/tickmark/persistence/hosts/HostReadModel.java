package dev.tickmark.persistence.hosts;

import dev.tickmark.engine.host.Host;
import dev.tickmark.engine.host.Listing;
import dev.tickmark.engine.host.WorkloadNeeds;
import dev.tickmark.engine.market.Matcher;
import dev.tickmark.engine.market.Reliability;
import dev.tickmark.persistence.Jdbc;
import dev.tickmark.persistence.ProjectionProgress;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CompletionStage;

/** Host lists and live market capacity, from the {@code hosts} table. */
public final class HostReadModel {
  public record HostRow(
      String hostId,
      String ownerId,
      String region,
      String label,
      String status,
      boolean online,
      boolean listed,
      boolean draining,
      boolean simulated,
      String gpu,
      int cardsTotal,
      int cardsTaken,
      Long onDemandPrice,
      Long spotPrice,
      List<Listing.Window> availability,
      Instant createdAt,
      Instant updatedAt,
      Reliability reliability,
      String runtime,
      Boolean offersNetwork) {

    public int cardsFree() {
      return Math.max(0, cardsTotal - cardsTaken);
    }
  }

  /** Capacity for one (gpu, region, tier, simulated), without any host identity. */
  public record Offer(
      String gpu,
      String region,
      Listing.Tier tier,
      int availableCards,
      long lowestPricePerGpuHour,
      int hosts,
      boolean simulated) {}

  /**
   * {@code network}: only hosts that can give a rental outbound network; {@code runtime}: only
   * hosts that run rentals in it (null: any); as the matcher picks.
   */
  public record OfferFilter(
      String gpu,
      String region,
      Listing.Tier tier,
      Long maxPrice,
      boolean network,
      String runtime) {
    public OfferFilter(String gpu, String region, Listing.Tier tier, Long maxPrice) {
      this(gpu, region, tier, maxPrice, false, null);
    }
  }

  private static final String COLUMNS =
      "host_id, owner_id, region, label, status, online, listed, draining, simulated, gpu,"
          + " cards_total, cards_taken, on_demand_price, spot_price, availability, created_at, updated_at,"
          + " rentals_ended, rentals_lost, runtime, offers_network";

  private final Jdbc jdbc;
  private final ProjectionProgress progress;

  public HostReadModel(Jdbc jdbc) {
    this.jdbc = jdbc;
    this.progress = new ProjectionProgress(jdbc);
  }

  /**
   * Until the table holds every host event in the journal now, or {@code within} has passed ({@code
   * false}).
   */
  public CompletionStage<Boolean> awaitWritten(Duration within) {
    return progress.awaitAll(HostProjection.NAME, Host.allTags(), within);
  }

  /**
   * One page of the provider's hosts (not removed), oldest first: up to {@code limit} rows after
   * the host {@code after} (a host id from the previous page's last row; {@code null} for the first
   * page). An unknown {@code after} gives an empty page.
   */
  public CompletionStage<List<HostRow>> byOwner(String ownerId, String after, int limit) {
    return page("owner_id = ? AND status <> 'removed'", ownerId, after, limit);
  }

  /**
   * One page of all hosts, or those with {@code status}, for operators, in the same order and with
   * the same cursor as {@link #byOwner}.
   */
  public CompletionStage<List<HostRow>> byStatus(String status, String after, int limit) {
    return status == null
        ? page(null, null, after, limit)
        : page("status = ?", status, after, limit);
  }

  /** The rows matching {@code where} (one string parameter, or none), a keyset page at a time. */
  private CompletionStage<List<HostRow>> page(
      String where, String whereParam, String after, int limit) {
    List<String> conditions = new ArrayList<>();
    if (where != null) conditions.add(where);
    // the cursor is the last row's host id; its (created_at, host_id) is where the page starts
    if (after != null)
      conditions.add(
          "(created_at, host_id) > (SELECT c.created_at, c.host_id FROM hosts c WHERE c.host_id = ?)");
    String sql =
        "SELECT "
            + COLUMNS
            + " FROM hosts"
            + (conditions.isEmpty() ? "" : " WHERE " + String.join(" AND ", conditions))
            + " ORDER BY created_at, host_id LIMIT ?";
    return jdbc.run(
        connection -> {
          try (PreparedStatement st = connection.prepareStatement(sql)) {
            int i = 1;
            if (where != null) st.setString(i++, whereParam);
            if (after != null) st.setString(i++, after);
            st.setInt(i, limit);
            try (ResultSet rs = st.executeQuery()) {
              List<HostRow> rows = new ArrayList<>();
              while (rs.next()) rows.add(row(rs));
              return rows;
            }
          }
        });
  }

  /**
   * Live capacity at {@code now}: verified, online, listed, not draining hosts inside an
   * availability window with free cards.
   */
  public CompletionStage<List<Offer>> offers(OfferFilter filter, Instant now) {
    return query(
            "SELECT "
                + COLUMNS
                + " FROM hosts"
                + " WHERE status = 'verified' AND online AND listed AND NOT draining"
                + " AND cards_total > cards_taken")
        .thenApply(rows -> aggregate(rows, filter, now));
  }

  /**
   * Candidates are read a page at a time, cheapest first, until this many are inside their
   * availability windows.
   */
  static final int CANDIDATE_PAGE = 32;

  static final int ENOUGH_CANDIDATES = 8;

  /**
   * At most this many rows of a page make room for the hosts a matcher holds cards on; where more
   * are hidden, the next page is read.
   */
  static final int MAX_HELD_ROWS = 4 * CANDIDATE_PAGE;

  /**
   * Hosts that may have {@code count} free cards of {@code gpu} at or below {@code maxPrice} now,
   * as the read side sees them, cheapest first, and only as many as a match can use (about {@value
   * #ENOUGH_CANDIDATES}): the cost of a match does not grow with the size of the market. The
   * matcher's proposal to each host is what decides.
   */
  public CompletionStage<List<dev.tickmark.engine.market.Matcher.Candidate>> candidates(
      String gpu, String region, Listing.Tier tier, long maxPrice, int count, Instant now) {
    return candidates(gpu, region, tier, maxPrice, count, null, now);
  }

  /**
   * The same, leaving out the hosts {@code renterId} owns (when not null): nobody is matched to
   * their own host. The host entity refuses such a proposal anyway; this keeps the matcher from
   * spending a proposal, and a renter's own cheap host from hiding the others.
   */
  public CompletionStage<List<dev.tickmark.engine.market.Matcher.Candidate>> candidates(
      String gpu,
      String region,
      Listing.Tier tier,
      long maxPrice,
      int count,
      String renterId,
      Instant now) {
    return candidates(
        gpu,
        region,
        tier,
        maxPrice,
        count,
        renterId,
        WorkloadNeeds.ANY,
        Matcher.Holdings.NONE,
        now);
  }

  /**
   * The same, for a matcher that holds cards the read side may not show yet ({@code held}, each
   * compared with the row's last update): enough candidates that still have {@code count} free
   * cards after those, read past the held hosts, cheapest first; the held hosts only when no other
   * is found (the matcher's count may be stale, and the host decides). Each held host hides at most
   * one row, so a page of {@value #CANDIDATE_PAGE} plus one row per held host usually suffices.
   * {@code needs}: only hosts that have not said they cannot give a rental outbound network, and
   * only those that said they run rentals in the runtime asked for by name.
   */
  public CompletionStage<List<dev.tickmark.engine.market.Matcher.Candidate>> candidates(
      String gpu,
      String region,
      Listing.Tier tier,
      long maxPrice,
      int count,
      String renterId,
      WorkloadNeeds needs,
      Matcher.Holdings held,
      Instant now) {
    String sql = candidateSql(tier, region != null, renterId != null, needs);
    int page = CANDIDATE_PAGE + Math.min(held.hosts(), MAX_HELD_ROWS);
    int wanted = Math.max(1, count);
    return jdbc.run(
        connection -> {
          List<Matcher.Candidate> free = new ArrayList<>();
          List<Matcher.Candidate> full = new ArrayList<>();
          try (PreparedStatement st = connection.prepareStatement(sql)) {
            int i = 1;
            st.setString(i++, gpu);
            st.setInt(i++, wanted);
            st.setLong(i++, maxPrice);
            if (region != null) st.setString(i++, region);
            if (renterId != null) st.setString(i++, renterId);
            if (needs.runtime() != null) st.setString(i++, needs.runtime());
            int fetchIndex = i++;
            st.setInt(i++, page);
            int offsetIndex = i;
            for (int offset = 0; free.size() < ENOUGH_CANDIDATES; offset += page) {
              st.setInt(fetchIndex, offset + page);
              st.setInt(offsetIndex, offset);
              int rows = 0;
              try (ResultSet rs = st.executeQuery()) {
                while (rs.next()) {
                  rows++;
                  String availability = rs.getString(4);
                  // Windows are rare and checked here; a host without any is always available.
                  if (availability != null
                      && !availability.equals("[]")
                      && !new Listing(
                              0,
                              null,
                              Listing.DEFAULT_SPOT_NOTICE_SECONDS,
                              HostProjection.windowsFrom(availability),
                              true)
                          .availableAt(now)) continue;
                  var candidate =
                      new Matcher.Candidate(
                          rs.getString(1),
                          rs.getLong(2),
                          rs.getInt(3),
                          rs.getTimestamp(5).toInstant(),
                          new Reliability(rs.getLong(6), rs.getLong(7)));
                  if (candidate.freeCards() - held.beyond(candidate.hostId(), candidate.asOf())
                      >= wanted) free.add(candidate);
                  else if (full.size() < CANDIDATE_PAGE) full.add(candidate);
                }
              }
              if (rows < page) break;
            }
          }
          return free.isEmpty() ? full : free;
        });
  }

  /**
   * The candidate query: one page of the market, cheapest first, and among hosts at one price the
   * more reliable first (Matcher.ordered's order), then the freer, then by id. Its parameters: the
   * gpu, the cards wanted, the price ceiling, the region and renter when asked for, the runtime
   * when named, then how many rows in price order the page ends within (offset + page), the page
   * and the offset.
   *
   * <p>The inner query reads the hosts in the price index's order and stops after that many,
   * keeping every host tied at the last price, so the outer sort sees exactly the hosts the page
   * can hold, in any plan. Written as one query with the whole order, the plan depended on the
   * table's statistics: without them (a young table, or a cached generic plan that an {@code
   * ANALYZE} did not invalidate, which happens when the table's page and row counts stay the same)
   * PostgreSQL estimated one row and sorted every host of the gpu for every match, 30 ms each with
   * 10,000 hosts; with them it read a page's worth in order (docs/benchmarks.md, "The launch's two
   * modes").
   */
  static String candidateSql(
      Listing.Tier tier, boolean region, boolean renter, WorkloadNeeds needs) {
    String price = tier == Listing.Tier.SPOT ? "spot_price" : "on_demand_price";
    return "SELECT host_id, price, free, availability, updated_at, rentals_ended, rentals_lost"
        + " FROM (SELECT host_id, "
        + price
        + " AS price, cards_total - cards_taken AS free, availability, updated_at,"
        + " rentals_ended, rentals_lost"
        + " FROM hosts"
        + " WHERE gpu = ? AND status = 'verified' AND online AND listed AND NOT draining"
        + " AND cards_total - cards_taken >= ? AND "
        + price
        + " <= ?"
        + (region ? " AND region = ?" : "")
        + (renter ? " AND owner_id <> ?" : "")
        + (needs.network() ? " AND offers_network IS NOT FALSE" : "")
        + (needs.runtime() == null ? "" : " AND runtime = ?")
        + " ORDER BY "
        + price
        + " FETCH FIRST ? ROWS WITH TIES) cheapest"
        // Matcher.ordered's order (Reliability): the share of ended rentals lost, then the longer
        // record. As a double, which tells every two shares apart while a host has ended fewer
        // than 2^26 rentals, and costs the query less than numeric (the matcher orders the page
        // exactly)
        + " ORDER BY price, rentals_lost::float8 / GREATEST(rentals_ended, 1), rentals_ended DESC,"
        + " free DESC, host_id LIMIT ? OFFSET ?";
  }

  static List<Offer> aggregate(List<HostRow> rows, OfferFilter filter, Instant now) {
    record Key(String gpu, String region, Listing.Tier tier, boolean simulated) {}
    Map<Key, long[]> acc =
        new TreeMap<>(
            Comparator.comparing(Key::gpu)
                .thenComparing(Key::region)
                .thenComparing(Key::tier)
                .thenComparing(Key::simulated));
    for (HostRow row : rows) {
      if (filter.gpu() != null && !filter.gpu().equals(row.gpu())) continue;
      if (filter.region() != null && !filter.region().equals(row.region())) continue;
      if (filter.network() && Boolean.FALSE.equals(row.offersNetwork())) continue;
      if (filter.runtime() != null && !filter.runtime().equals(row.runtime())) continue;
      Listing listing =
          new Listing(
              row.onDemandPrice() == null ? 0 : row.onDemandPrice(),
              row.spotPrice(),
              Listing.DEFAULT_SPOT_NOTICE_SECONDS,
              row.availability(),
              true);
      if (!listing.availableAt(now)) continue;
      for (Listing.Tier tier : Listing.Tier.values()) {
        if (filter.tier() != null && filter.tier() != tier) continue;
        Long floor = listing.floorFor(tier);
        if (floor == null || (filter.maxPrice() != null && floor > filter.maxPrice())) continue;
        long[] a =
            acc.computeIfAbsent(
                new Key(row.gpu(), row.region(), tier, row.simulated()),
                k -> new long[] {0, Long.MAX_VALUE, 0});
        a[0] += row.cardsFree();
        a[1] = Math.min(a[1], floor);
        a[2] += 1;
      }
    }
    List<Offer> offers = new ArrayList<>(acc.size());
    acc.forEach(
        (k, a) ->
            offers.add(
                new Offer(
                    k.gpu(), k.region(), k.tier(), (int) a[0], a[1], (int) a[2], k.simulated())));
    return offers;
  }

  private CompletionStage<List<HostRow>> query(String sql, String... params) {
    return jdbc.run(
        connection -> {
          try (PreparedStatement st = connection.prepareStatement(sql)) {
            for (int i = 0; i < params.length; i++) st.setString(i + 1, params[i]);
            try (ResultSet rs = st.executeQuery()) {
              List<HostRow> rows = new ArrayList<>();
              while (rs.next()) rows.add(row(rs));
              return rows;
            }
          }
        });
  }

  private static HostRow row(ResultSet rs) throws SQLException {
    long onDemand = rs.getLong(13);
    Long onDemandPrice = rs.wasNull() ? null : onDemand;
    long spot = rs.getLong(14);
    Long spotPrice = rs.wasNull() ? null : spot;
    return new HostRow(
        rs.getString(1),
        rs.getString(2),
        rs.getString(3),
        rs.getString(4),
        rs.getString(5),
        rs.getBoolean(6),
        rs.getBoolean(7),
        rs.getBoolean(8),
        rs.getBoolean(9),
        rs.getString(10),
        rs.getInt(11),
        rs.getInt(12),
        onDemandPrice,
        spotPrice,
        HostProjection.windowsFrom(rs.getString(15)),
        rs.getTimestamp(16).toInstant(),
        rs.getTimestamp(17).toInstant(),
        new Reliability(rs.getLong(18), rs.getLong(19)),
        rs.getString(20),
        rs.getObject(21, Boolean.class));
  }
}
