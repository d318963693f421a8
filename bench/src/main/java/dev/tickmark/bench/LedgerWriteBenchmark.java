package dev.tickmark.bench;

import dev.tickmark.bench.MarketBenchSupport.Args;
import dev.tickmark.bench.MarketBenchSupport.BenchDatabase;
import dev.tickmark.bench.MarketBenchSupport.DbConfig;
import dev.tickmark.engine.account.Account;
import dev.tickmark.persistence.DatabaseSettings;
import dev.tickmark.persistence.Migrations;
import dev.tickmark.persistence.ledger.LedgerLegs;
import dev.tickmark.persistence.ledger.LedgerProjection;
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
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import org.apache.pekko.persistence.query.Offset;
import org.apache.pekko.persistence.typed.PersistenceId;
import org.apache.pekko.projection.eventsourced.EventEnvelope;

/**
 * The ledger projection's write alone, against the shape it had before: settlement events (a
 * renter's capture, a provider's credit with the platform's fee: three legs a settlement) in groups
 * of 500, each group one transaction on one connection, into the real {@code ledger_entries} of a
 * fresh, migrated database. Variants, alternated round by round on an emptied table:
 *
 * <ul>
 *   <li>{@code rows}: the write before, a JDBC batch of one-row inserts that the driver rewrites
 *       into multi-row {@code VALUES} ({@code reWriteBatchedInserts}), nine parameters a leg;
 *   <li>{@code arrays}: {@link LedgerProjection#insertLegs}, one statement over column arrays;
 *   <li>each again with the {@code entry_key} index that migration V19 dropped ({@code +key
 *       index}).
 * </ul>
 *
 * Prints legs a second, and the JVM's and PostgreSQL's CPU per thousand legs, per run and as means.
 *
 * <pre>
 * java -cp "bench/target/classes:cluster-config/target/tickmark-node.jar:$third_party_cp" \
 *   dev.tickmark.bench.LedgerWriteBenchmark [--settlements=100000] [--rounds=3] [--db-url=...]
 * </pre>
 */
public final class LedgerWriteBenchmark {
  private static final PrintStream OUT = System.out;
  private static final int GROUP = 500;
  private static final String BEFORE = "rows +key index";
  private static final String AFTER = "arrays";
  private static final String ROWS_INSERT =
      "INSERT INTO ledger_entries"
          + " (account_id, kind, amount, entry_key, rental_id, at, persistence_id, sequence_number, leg)"
          + " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (persistence_id, sequence_number, leg) DO NOTHING";
  private static final String KEY_INDEX =
      "CREATE INDEX IF NOT EXISTS ledger_entries_key_idx ON ledger_entries (entry_key)";

  private LedgerWriteBenchmark() {}

  interface Write {
    void group(Connection c, List<EventEnvelope<Account.Event>> group) throws SQLException;
  }

  record Variant(String name, Write write, boolean keyIndex) {}

  record Run(double legsPerSecond, double jvmMsPerThousand, double pgMsPerThousand) {}

  public static void main(String[] argv) throws Exception {
    Args args = new Args(argv);
    int settlements = args.integer("settlements", 100_000);
    int rounds = args.integer("rounds", 3);
    List<List<EventEnvelope<Account.Event>>> groups = groups(settlements);
    List<Variant> variants =
        List.of(
            new Variant(BEFORE, LedgerWriteBenchmark::rows, true),
            new Variant("arrays +key index", LedgerProjection::insertLegs, true),
            new Variant("rows", LedgerWriteBenchmark::rows, false),
            new Variant(AFTER, LedgerProjection::insertLegs, false));
    Map<String, List<Run>> runs = new LinkedHashMap<>();
    try (BenchDatabase db = BenchDatabase.create(DbConfig.of(args), "tickmark_bench_ledger")) {
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
                "round %d  %-18s %,9.0f legs/s  JVM %.1f ms, PG %.1f ms per 1,000 legs%n",
                r,
                v.name(),
                run.legsPerSecond(),
                run.jvmMsPerThousand(),
                run.pgMsPerThousand());
          }
      }
    }
    OUT.printf(
        Locale.ROOT,
        "%nmeans over %d rounds, %,d settlements (%,d legs) in groups of %d events:%n",
        rounds,
        settlements,
        settlements * 3L,
        GROUP);
    Run base = mean(runs.get(BEFORE));
    for (Map.Entry<String, List<Run>> e : runs.entrySet()) {
      Run m = mean(e.getValue());
      OUT.printf(
          Locale.ROOT,
          "%-18s %,9.0f legs/s (%.2fx before)  JVM %.1f ms, PG %.1f ms per 1,000 legs (%.2fx before)%n",
          e.getKey(),
          m.legsPerSecond(),
          m.legsPerSecond() / base.legsPerSecond(),
          m.jvmMsPerThousand(),
          m.pgMsPerThousand(),
          (m.jvmMsPerThousand() + m.pgMsPerThousand())
              / (base.jvmMsPerThousand() + base.pgMsPerThousand()));
    }
    Run arrays = mean(runs.get(AFTER));
    BenchResult.against(
            "ledger-write",
            "ledger.legs-per-second",
            "ledger legs/s, one statement over arrays without the key index ÷ before",
            arrays.legsPerSecond(),
            "legs/s",
            base.legsPerSecond(),
            "multi-row insert with the key index legs/s")
        .withNote("same run, alternated, " + rounds + " rounds")
        .print(OUT);
  }

  /** Capture on renter i, credit with fee on provider i; sequence numbers per account. */
  static List<List<EventEnvelope<Account.Event>>> groups(int settlements) {
    int accounts = 500;
    long[] renterSeq = new long[accounts], providerSeq = new long[accounts];
    Instant at = Instant.parse("2026-12-04T00:00:00.000001Z");
    List<List<EventEnvelope<Account.Event>>> groups = new ArrayList<>();
    List<EventEnvelope<Account.Event>> group = new ArrayList<>(GROUP);
    for (int s = 0; s < settlements; s++) {
      int a = s % accounts;
      String rental = "rnt_" + (s % 1000);
      long second = 10L * (s / 1000 + 1);
      long amount = 8_028;
      add(
          group,
          "Account|renter-" + a,
          ++renterSeq[a],
          new Account.Captured(rental, second, amount * (s / 1000 + 1), amount, at));
      add(
          group,
          "Account|provider-" + a,
          ++providerSeq[a],
          new Account.EarningsCredited(rental, second, 0, 0, 6_824, 1_204, false, at));
      if (group.size() >= GROUP) {
        groups.add(group);
        group = new ArrayList<>(GROUP);
      }
    }
    if (!group.isEmpty()) groups.add(group);
    return groups;
  }

  private static void add(
      List<EventEnvelope<Account.Event>> group, String pid, long seq, Account.Event event) {
    group.add(EventEnvelope.create(Offset.noOffset(), pid, seq, event, 0L));
  }

  /** The write before V19's release: one-row inserts in a JDBC batch. */
  static void rows(Connection c, List<EventEnvelope<Account.Event>> group) throws SQLException {
    try (PreparedStatement insert = c.prepareStatement(ROWS_INSERT)) {
      for (EventEnvelope<Account.Event> envelope : group) {
        String accountId = PersistenceId.extractEntityId(envelope.persistenceId());
        List<LedgerLegs.Leg> legs = LedgerLegs.of(accountId, envelope.event());
        for (int leg = 0; leg < legs.size(); leg++) {
          LedgerLegs.Leg l = legs.get(leg);
          insert.setString(1, l.accountId());
          insert.setString(2, l.kind());
          insert.setLong(3, l.amount());
          insert.setString(4, l.key());
          insert.setString(5, l.rentalId());
          insert.setTimestamp(6, Timestamp.from(l.at()));
          insert.setString(7, envelope.persistenceId());
          insert.setLong(8, envelope.sequenceNr());
          insert.setShort(9, (short) leg);
          insert.addBatch();
        }
      }
      insert.executeBatch();
    }
  }

  static Run run(
      Connection c, String database, Variant v, List<List<EventEnvelope<Account.Event>>> groups)
      throws SQLException {
    try (Statement st = c.createStatement()) {
      st.execute("TRUNCATE ledger_entries");
      st.execute(v.keyIndex() ? KEY_INDEX : "DROP INDEX IF EXISTS ledger_entries_key_idx");
      c.commit();
      st.execute("CHECKPOINT");
    }
    ThreadMXBean threads = ManagementFactory.getThreadMXBean();
    CpuSample before = CpuSample.take(database);
    long jvm0 = threads.getCurrentThreadCpuTime();
    long legs = 0;
    for (List<EventEnvelope<Account.Event>> group : groups) {
      v.write().group(c, group);
      c.commit();
      legs += group.size() / 2 * 3L;
    }
    long jvmNanos = threads.getCurrentThreadCpuTime() - jvm0;
    CpuSample after = CpuSample.take(database);
    double seconds = (after.nanos() - before.nanos()) / 1e9;
    double pgMs = (after.postgres() - before.postgres()) / CpuSample.TICKS_PER_SECOND * 1000;
    return new Run(legs / seconds, jvmNanos / 1e6 / (legs / 1000.0), pgMs / (legs / 1000.0));
  }

  static Run mean(List<Run> runs) {
    return new Run(
        runs.stream().mapToDouble(Run::legsPerSecond).average().orElse(Double.NaN),
        runs.stream().mapToDouble(Run::jvmMsPerThousand).average().orElse(Double.NaN),
        runs.stream().mapToDouble(Run::pgMsPerThousand).average().orElse(Double.NaN));
  }
}
