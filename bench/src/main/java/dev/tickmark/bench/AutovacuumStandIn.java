package dev.tickmark.bench;

import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;

/**
 * Does what autovacuum would on a server where it is off (as on this project's CI server), so that
 * a benchmark's database gets the upkeep, and only the upkeep, a production one would: once every
 * {@code autovacuum_naptime} it vacuums and analyzes the tables that autovacuum's own rules ({@code
 * relation_needs_vacanalyze}, with the server's thresholds and scale factors) find due, throttled
 * by autovacuum's cost delay and limit. One worker, the tables one after another.
 *
 * <p>Without it, nothing refreshes the planner's statistics on a young journal, and the read
 * journal's cached eventsByTag plan degrades into scans as it grows. The benchmarks' older
 * stand-ins (an {@code ANALYZE} every 10 s) looked six times as often as autovacuum can with the
 * default naptime of a minute, and never vacuumed.
 */
final class AutovacuumStandIn implements AutoCloseable {
  private final Connection connection;
  private final ScheduledExecutorService timer;
  private final int naptimeSeconds;
  private int looks;
  private int looksThatWorked;
  private int vacuumed;
  private int analyzed;
  private long nanos;
  private final List<String> failures = new ArrayList<>();
  private final ConcurrentLinkedQueue<NanoInterval> work = new ConcurrentLinkedQueue<>();
  private volatile long workingSince = -1;
  private volatile Statement running;

  private AutovacuumStandIn(Connection connection, int naptimeSeconds) {
    this.connection = connection;
    this.naptimeSeconds = naptimeSeconds;
    this.timer =
        Executors.newSingleThreadScheduledExecutor(
            r -> {
              Thread t = new Thread(r, "bench-autovacuum");
              t.setDaemon(true);
              return t;
            });
    // The first look a second in (the database is new); then a naptime after each look ends.
    timer.scheduleWithFixedDelay(this::look, 1, naptimeSeconds, TimeUnit.SECONDS);
  }

  /** Starts looking at the database at {@code url}, with the server's own autovacuum settings. */
  static AutovacuumStandIn start(String url, String user, String password) throws SQLException {
    Connection c = DriverManager.getConnection(url, user, password);
    try (Statement st = c.createStatement()) {
      int naptime;
      try (ResultSet rs =
          st.executeQuery(
              "SELECT setting::int FROM pg_settings WHERE name = 'autovacuum_naptime'")) {
        rs.next();
        naptime = rs.getInt(1);
      }
      throttleAsAutovacuum(st);
      return new AutovacuumStandIn(c, naptime);
    } catch (SQLException | RuntimeException e) {
      c.close();
      throw e;
    }
  }

  /**
   * Gives the statement's session autovacuum's own throttle, its cost delay and limit: it pauses so
   * that it does not crowd out the commits.
   */
  static void throttleAsAutovacuum(Statement st) throws SQLException {
    String delay;
    String limit;
    try (ResultSet rs =
        st.executeQuery(
            "SELECT current_setting('autovacuum_vacuum_cost_delay'),"
                + " CASE WHEN current_setting('autovacuum_vacuum_cost_limit') = '-1'"
                + " THEN current_setting('vacuum_cost_limit')"
                + " ELSE current_setting('autovacuum_vacuum_cost_limit') END")) {
      rs.next();
      delay = rs.getString(1);
      limit = rs.getString(2);
    }
    st.execute("SET vacuum_cost_delay = '" + delay + "'");
    st.execute("SET vacuum_cost_limit = " + limit);
  }

  /**
   * The looks that vacuumed or analyzed something and overlap {@code window}; one still at work
   * ends at the window's end.
   */
  List<NanoInterval> workWithin(NanoInterval window) {
    List<NanoInterval> overlapping = new ArrayList<>();
    for (NanoInterval w : work) if (w.overlaps(window)) overlapping.add(w);
    long since = workingSince;
    if (since >= 0 && since <= window.toNanos())
      overlapping.add(new NanoInterval(since, window.toNanos()));
    return overlapping;
  }

  /** A table autovacuum would vacuum, analyze, or both. */
  record Due(String table, boolean vacuum, boolean analyze) {}

  private void look() {
    long t0 = System.nanoTime();
    try (Statement st = connection.createStatement()) {
      running = st;
      List<Due> due = due(st);
      if (!due.isEmpty()) workingSince = t0;
      for (Due d : due) {
        if (d.vacuum && d.analyze) st.execute("VACUUM (ANALYZE) " + d.table);
        else if (d.vacuum) st.execute("VACUUM " + d.table);
        else st.execute("ANALYZE " + d.table);
      }
      if (!due.isEmpty())
        System.out.printf(
            Locale.ROOT,
            "# autovacuum stand-in: %d tables in %.1f s, ended %s%n",
            due.size(),
            (System.nanoTime() - t0) / 1e9,
            java.time.LocalTime.now().truncatedTo(java.time.temporal.ChronoUnit.SECONDS));
      if (!due.isEmpty()) work.add(new NanoInterval(t0, System.nanoTime()));
      synchronized (this) {
        looks++;
        if (!due.isEmpty()) looksThatWorked++;
        for (Due d : due) {
          if (d.vacuum) vacuumed++;
          if (d.analyze) analyzed++;
        }
        nanos += System.nanoTime() - t0;
      }
    } catch (SQLException e) {
      if (timer.isShutdown()) return; // cancelled by close()
      synchronized (this) {
        if (failures.size() < 3) failures.add(e.getMessage());
      }
    } finally {
      workingSince = -1;
      running = null;
    }
  }

  /**
   * The tables autovacuum would vacuum or analyze now (PostgreSQL 13 and later): dead rows over
   * {@code autovacuum_vacuum_threshold + autovacuum_vacuum_scale_factor × rows}, rows inserted
   * since the last vacuum over the insert threshold and scale factor, rows changed since the last
   * analyze over the analyze threshold and scale factor; a table never analyzed counts as empty.
   */
  static List<Due> due(Statement st) throws SQLException {
    List<Due> due = new ArrayList<>();
    try (ResultSet rs =
        st.executeQuery(
            "SELECT quote_ident(s.schemaname) || '.' || quote_ident(s.relname),"
                + " s.n_dead_tup > current_setting('autovacuum_vacuum_threshold')::float8"
                + "   + current_setting('autovacuum_vacuum_scale_factor')::float8 * r.tuples"
                + " OR s.n_ins_since_vacuum >"
                + "   current_setting('autovacuum_vacuum_insert_threshold')::float8"
                + "   + current_setting('autovacuum_vacuum_insert_scale_factor')::float8 * r.tuples,"
                + " s.n_mod_since_analyze > current_setting('autovacuum_analyze_threshold')::float8"
                + "   + current_setting('autovacuum_analyze_scale_factor')::float8 * r.tuples"
                + " FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid,"
                + " LATERAL (SELECT greatest(c.reltuples, 0) AS tuples) r"
                + " ORDER BY s.relname")) {
      while (rs.next()) {
        boolean vacuum = rs.getBoolean(2);
        boolean analyze = rs.getBoolean(3);
        if (vacuum || analyze) due.add(new Due(rs.getString(1), vacuum, analyze));
      }
    }
    return due;
  }

  /** What it did, for the benchmark's report. */
  synchronized String summary() {
    return String.format(
        Locale.ROOT,
        "as autovacuum would: looked %d times, once every autovacuum_naptime (%d s), and found work"
            + " %d times:"
            + " %d tables vacuumed, %d analyzed (%.0f ms each look on average, throttled as"
            + " autovacuum is)%s",
        looks,
        naptimeSeconds,
        looksThatWorked,
        vacuumed,
        analyzed,
        looks == 0 ? 0.0 : nanos / 1e6 / looks,
        (running == null ? "" : "; one more look under way")
            + (failures.isEmpty() ? "" : "; failed: " + failures));
  }

  @Override
  public void close() {
    timer.shutdownNow();
    Statement st = running;
    if (st != null) {
      try {
        st.cancel(); // a vacuum under way must not keep the benchmark's database from being dropped
      } catch (SQLException e) {
        // it ends on its own
      }
    }
    try {
      timer.awaitTermination(60, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    try {
      connection.close();
    } catch (SQLException e) {
      // best effort
    }
  }
}
