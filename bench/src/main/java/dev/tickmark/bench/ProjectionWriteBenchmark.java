package dev.tickmark.bench;

import dev.tickmark.bench.MarketBenchSupport.Args;
import dev.tickmark.bench.MarketBenchSupport.BenchDatabase;
import dev.tickmark.bench.MarketBenchSupport.DbConfig;
import dev.tickmark.engine.host.Host;
import dev.tickmark.engine.host.Listing;
import dev.tickmark.engine.rental.Rental;
import dev.tickmark.persistence.DatabaseSettings;
import dev.tickmark.persistence.Migrations;
import dev.tickmark.persistence.StatementBatch;
import dev.tickmark.persistence.hosts.HostProjection;
import dev.tickmark.persistence.rentals.RentalProjection;
import java.io.PrintStream;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.sql.Statement;
import java.sql.Timestamp;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * The {@code rentals} and {@code hosts} projections' writes alone, against the shape they had
 * before: a busy node's rental and host events, in time order, in groups, each group one
 * transaction on one connection, into the real tables of a fresh, migrated database. Variants,
 * alternated round by round on emptied tables:
 *
 * <ul>
 *   <li>{@code statement a event}: the write before, each event its own statement and round trip;
 *   <li>{@code batched}: {@code RentalProjection} and {@code HostProjection} through {@link
 *       StatementBatch};
 *   <li>with {@code --fillfactor=N}, {@code batched} again into tables of that fillfactor (room
 *       left in each page for heap-only updates).
 * </ul>
 *
 * The events: rentals launched at {@code --launch-rate} a second for as long as it takes to launch
 * {@code --rentals}, each on one of 1,000 hosts (a reservation), started a second later, settled
 * every 10 s for a minute, ended and closed (a release). Prints events a second, the JVM's and
 * PostgreSQL's CPU per thousand events and the share of the rentals table's updates that were
 * heap-only (HOT), per run and as means.
 *
 * <pre>
 * java -cp "bench/target/classes:cluster-config/target/tickmark-node.jar:$third_party_cp" \
 *   dev.tickmark.bench.ProjectionWriteBenchmark [--rentals=20000] [--launch-rate=200] [--group=50] [--rounds=3] [--fillfactor=70]
 * </pre>
 */
public final class ProjectionWriteBenchmark {
  private static final PrintStream OUT = System.out;
  private static final String BEFORE = "statement a event";
  private static final String AFTER = "batched";
  private static final int HOSTS = 1_000;

  private ProjectionWriteBenchmark() {}

  /** One event of either projection. */
  record Fed(Instant at, String entityId, Object event) {}

  interface Write {
    void group(Connection c, List<Fed> group) throws SQLException;
  }

  /** A way to write, into tables of the given fillfactor (percent; PostgreSQL's default 100). */
  record Variant(String name, Write write, int fillfactor) {}

  /** {@code hotShare}: the share of the rentals table's updates that were heap-only (HOT). */
  record Run(
      double eventsPerSecond, double jvmMsPerThousand, double pgMsPerThousand, double hotShare) {}

  public static void main(String[] argv) throws Exception {
    Args args = new Args(argv);
    int rentals = args.integer("rentals", 20_000);
    int launchRate = args.integer("launch-rate", 200);
    int groupSize = args.integer("group", 50);
    int rounds = args.integer("rounds", 3);
    int fillfactor = args.integer("fillfactor", 0);
    List<Fed> events = events(rentals, launchRate);
    List<List<Fed>> groups = new ArrayList<>();
    for (int i = 0; i < events.size(); i += groupSize)
      groups.add(events.subList(i, Math.min(events.size(), i + groupSize)));
    List<Variant> variants = new ArrayList<>();
    variants.add(new Variant(BEFORE, ProjectionWriteBenchmark::statementAnEvent, 100));
    variants.add(new Variant(AFTER, ProjectionWriteBenchmark::batched, 100));
    if (fillfactor > 0)
      variants.add(
          new Variant(
              AFTER + ", fillfactor " + fillfactor, ProjectionWriteBenchmark::batched, fillfactor));
    Map<String, List<Run>> runs = new LinkedHashMap<>();
    try (BenchDatabase db = BenchDatabase.create(DbConfig.of(args), "tickmark_bench_projections")) {
      Migrations.migrate(new DatabaseSettings(db.url, db.user, db.password, 1));
      String url = db.url + (db.url.contains("?") ? "&" : "?") + "reWriteBatchedInserts=true";
      try (Connection c = DriverManager.getConnection(url, db.user, db.password)) {
        c.setAutoCommit(false);
        for (Variant v : variants) run(c, db.name, v, groups.subList(0, groups.size() / 10)); // JIT
        for (int r = 1; r <= rounds; r++)
          for (Variant v : variants) {
            Run run = run(c, db.name, v, groups);
            runs.computeIfAbsent(v.name(), k -> new ArrayList<>()).add(run);
            OUT.printf(
                Locale.ROOT,
                "round %d  %-22s %,9.0f events/s  JVM %.1f ms, PG %.1f ms per 1,000 events,"
                    + " %.0f%% of the rentals' updates HOT%n",
                r,
                v.name(),
                run.eventsPerSecond(),
                run.jvmMsPerThousand(),
                run.pgMsPerThousand(),
                100 * run.hotShare());
          }
      }
    }
    OUT.printf(
        Locale.ROOT,
        "%nmeans over %d rounds, %,d rentals (%,d events) in groups of %d events:%n",
        rounds,
        rentals,
        events.size(),
        groupSize);
    Run base = mean(runs.get(BEFORE));
    for (Map.Entry<String, List<Run>> e : runs.entrySet()) {
      Run m = mean(e.getValue());
      OUT.printf(
          Locale.ROOT,
          "%-22s %,9.0f events/s (%.2fx before)  JVM %.1f ms, PG %.1f ms per 1,000 events (%.2fx"
              + " before), %.0f%% HOT%n",
          e.getKey(),
          m.eventsPerSecond(),
          m.eventsPerSecond() / base.eventsPerSecond(),
          m.jvmMsPerThousand(),
          m.pgMsPerThousand(),
          (m.jvmMsPerThousand() + m.pgMsPerThousand())
              / (base.jvmMsPerThousand() + base.pgMsPerThousand()),
          100 * m.hotShare());
    }
    Run batched = mean(runs.get(AFTER));
    BenchResult.against(
            "projection-write",
            "projections.events-per-second",
            "rentals and hosts projections' events/s, batched ÷ a statement an event",
            batched.eventsPerSecond(),
            "events/s",
            base.eventsPerSecond(),
            "a statement an event, events/s")
        .withNote("same run, alternated, " + rounds + " rounds, groups of " + groupSize)
        .print(OUT);
  }

  /** A busy node's rental and host events in time order. */
  static List<Fed> events(int rentals, int launchRate) {
    Instant t0 = Instant.parse("2026-12-05T00:00:00Z");
    List<Fed> events = new ArrayList<>();
    for (int i = 0; i < rentals; i++) {
      String id = "rnt_" + i;
      String host = "host_" + (i % HOSTS);
      Instant launched = t0.plusNanos(1_000_000_000L / launchRate * i);
      Rental.Spec spec =
          new Rental.Spec(
              "h100-80gb",
              1,
              Listing.Tier.ON_DEMAND,
              null,
              3_000_000,
              "ubuntu:24.04",
              List.of("sleep", "60"),
              null,
              null,
              30,
              false);
      events.add(
          new Fed(
              launched,
              host,
              new Host.CardsReserved(id, List.of(0), 2_500_000, Listing.Tier.ON_DEMAND, launched)));
      events.add(
          new Fed(launched, id, new Rental.Requested("acc_" + (i % 500), spec, 250_000, launched)));
      events.add(
          new Fed(
              launched,
              id,
              new Rental.Matched(
                  new Rental.Terms(host, "acc_p", List.of(0), 2_500_000, false, launched, "eu-nl"),
                  launched)));
      Instant started = launched.plusSeconds(1);
      events.add(new Fed(started, id, new Rental.Started(started, started, null)));
      for (int s = 1; s <= 6; s++) {
        Instant at = started.plusSeconds(10L * s);
        long cost = 6_944L * s;
        events.add(
            new Fed(
                at,
                id,
                new Rental.Settled(
                    new Rental.Checkpoint(
                        10L * s, cost, cost * 85 / 100, cost - cost * 85 / 100, at),
                    at)));
      }
      Instant end = started.plusSeconds(60);
      events.add(
          new Fed(
              end, id, new Rental.Ended(Rental.EndReason.STOPPED_BY_RENTER, end, 60, end, false)));
      events.add(new Fed(end.plusMillis(5), id, new Rental.Closed(end.plusMillis(5))));
      events.add(
          new Fed(
              end.plusMillis(5), host, new Host.CardsReleased(id, List.of(0), end.plusMillis(5))));
    }
    events.sort(Comparator.comparing(Fed::at)); // stable: an entity's events keep their order
    return events;
  }

  static void batched(Connection c, List<Fed> group) throws SQLException {
    StatementBatch rentals = new StatementBatch();
    StatementBatch hosts = new StatementBatch();
    for (Fed f : group) {
      if (f.event() instanceof Rental.Event e) RentalProjection.apply(rentals, f.entityId(), e);
      else HostProjection.apply(hosts, f.entityId(), (Host.Event) f.event());
    }
    rentals.send(c);
    hosts.send(c);
  }

  /** The write before: each event its own statement (the events {@link #events} makes). */
  static void statementAnEvent(Connection c, List<Fed> group) throws SQLException {
    for (Fed f : group) {
      Timestamp at = Timestamp.from(f.at());
      String id = f.entityId();
      if (f.event() instanceof Rental.Requested e) {
        try (PreparedStatement st =
            c.prepareStatement(
                "INSERT INTO rentals(rental_id, renter_id, status, gpu, card_count, tier, region,"
                    + " max_price_per_gpu_hour, created_at, updated_at) VALUES (?, ?, 'pending', ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING")) {
          st.setString(1, id);
          st.setString(2, e.renterId());
          st.setString(3, e.spec().gpu());
          st.setInt(4, e.spec().count());
          st.setString(5, e.spec().tier().wire());
          st.setString(6, e.spec().region());
          st.setLong(7, e.spec().maxPricePerGpuHour());
          st.setTimestamp(8, at);
          st.setTimestamp(9, at);
          st.executeUpdate();
        }
      } else if (f.event() instanceof Rental.Matched e) {
        try (PreparedStatement st =
            c.prepareStatement(
                "UPDATE rentals SET status = 'provisioning', price_per_gpu_hour = ?, host_id = ?,"
                    + " simulated = ?, matched_at = ?, region = COALESCE(region, ?), updated_at = ? WHERE rental_id = ?")) {
          st.setLong(1, e.terms().pricePerGpuHour());
          st.setString(2, e.terms().hostId());
          st.setBoolean(3, e.terms().simulated());
          st.setTimestamp(4, Timestamp.from(e.terms().matchedAt()));
          st.setString(5, e.terms().region());
          st.setTimestamp(6, at);
          st.setString(7, id);
          st.executeUpdate();
        }
      } else if (f.event() instanceof Rental.Started e) {
        try (PreparedStatement st =
            c.prepareStatement(
                "UPDATE rentals SET status = 'running', started_at = ?, updated_at = ? WHERE rental_id = ?")) {
          st.setTimestamp(1, Timestamp.from(e.startedAt()));
          st.setTimestamp(2, at);
          st.setString(3, id);
          st.executeUpdate();
        }
      } else if (f.event() instanceof Rental.Settled e) {
        try (PreparedStatement st =
            c.prepareStatement(
                "UPDATE rentals SET billed_seconds = ?, cost = ?, updated_at = ? WHERE rental_id = ?")) {
          st.setLong(1, e.checkpoint().throughSecond());
          st.setLong(2, e.checkpoint().cost());
          st.setTimestamp(3, at);
          st.setString(4, id);
          st.executeUpdate();
        }
      } else if (f.event() instanceof Rental.Ended e) {
        try (PreparedStatement st =
            c.prepareStatement(
                "UPDATE rentals SET status = 'stopping', ended_at = ?, end_reason = ?,"
                    + " billed_seconds = ?, updated_at = ? WHERE rental_id = ?")) {
          st.setTimestamp(1, Timestamp.from(e.endAt()));
          st.setString(2, e.reason().wire());
          st.setLong(3, e.billedSeconds());
          st.setTimestamp(4, at);
          st.setString(5, id);
          st.executeUpdate();
        }
      } else if (f.event() instanceof Rental.Closed) {
        update(
            c, "UPDATE rentals SET status = 'ended', updated_at = ? WHERE rental_id = ?", at, id);
      } else if (f.event() instanceof Host.CardsReserved e) {
        update(
            c,
            "UPDATE hosts SET cards_taken = cards_taken + "
                + e.cards().size()
                + ", updated_at = ? WHERE host_id = ?",
            at,
            id);
      } else if (f.event() instanceof Host.CardsReleased e) {
        update(
            c,
            "UPDATE hosts SET cards_taken = GREATEST(0, cards_taken - "
                + e.cards().size()
                + "), updated_at = ? WHERE host_id = ?",
            at,
            id);
      } else {
        throw new IllegalArgumentException("not an event this benchmark makes: " + f.event());
      }
    }
  }

  private static void update(Connection c, String sql, Timestamp at, String id)
      throws SQLException {
    try (PreparedStatement st = c.prepareStatement(sql)) {
      st.setTimestamp(1, at);
      st.setString(2, id);
      st.executeUpdate();
    }
  }

  static Run run(Connection c, String database, Variant v, List<List<Fed>> groups)
      throws SQLException {
    try (Statement st = c.createStatement()) {
      st.execute("TRUNCATE rentals, hosts");
      st.execute("ALTER TABLE rentals SET (fillfactor = " + v.fillfactor() + ")");
      st.execute("ALTER TABLE hosts SET (fillfactor = " + v.fillfactor() + ")");
      st.execute(
          "INSERT INTO hosts(host_id, owner_id, region, label, status, created_at, updated_at)"
              + " SELECT 'host_' || i, 'acc_p', 'eu-nl', 'h', 'verified', now(), now()"
              + " FROM generate_series(0, "
              + (HOSTS - 1)
              + ") i");
      c.commit();
      st.execute("CHECKPOINT");
    }
    ThreadMXBean threads = ManagementFactory.getThreadMXBean();
    long[] updates0 = rentalUpdates(c);
    CpuSample before = CpuSample.take(database);
    long jvm0 = threads.getCurrentThreadCpuTime();
    long events = 0;
    for (List<Fed> group : groups) {
      v.write().group(c, group);
      c.commit();
      events += group.size();
    }
    long jvmNanos = threads.getCurrentThreadCpuTime() - jvm0;
    CpuSample after = CpuSample.take(database);
    long[] updates1 = rentalUpdates(c);
    double seconds = (after.nanos() - before.nanos()) / 1e9;
    double pgMs = (after.postgres() - before.postgres()) / CpuSample.TICKS_PER_SECOND * 1000;
    return new Run(
        events / seconds,
        jvmNanos / 1e6 / (events / 1000.0),
        pgMs / (events / 1000.0),
        (updates1[1] - updates0[1]) / (double) Math.max(1, updates1[0] - updates0[0]));
  }

  /**
   * The rentals table's updates and heap-only ones so far, as the statistics say once this
   * connection's are flushed (they are, at most once a second, on an idle connection).
   */
  private static long[] rentalUpdates(Connection c) throws SQLException {
    try (Statement st = c.createStatement()) {
      try {
        st.execute("SELECT pg_stat_force_next_flush()");
        c.commit();
      } catch (SQLException beforePostgres15) {
        c.rollback(); // the statistics then trail by up to half a second
      }
      st.execute("SELECT pg_stat_clear_snapshot()");
      try (var rs =
          st.executeQuery(
              "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'rentals'")) {
        rs.next();
        long[] counts = {rs.getLong(1), rs.getLong(2)};
        c.commit();
        return counts;
      }
    }
  }

  static Run mean(List<Run> runs) {
    return new Run(
        runs.stream().mapToDouble(Run::eventsPerSecond).average().orElse(Double.NaN),
        runs.stream().mapToDouble(Run::jvmMsPerThousand).average().orElse(Double.NaN),
        runs.stream().mapToDouble(Run::pgMsPerThousand).average().orElse(Double.NaN),
        runs.stream().mapToDouble(Run::hotShare).average().orElse(Double.NaN));
  }
}
