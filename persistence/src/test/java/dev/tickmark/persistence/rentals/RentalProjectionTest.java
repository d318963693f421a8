package dev.tickmark.persistence.rentals;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import dev.tickmark.engine.Rejection;
import dev.tickmark.engine.host.Listing;
import dev.tickmark.engine.rental.Rental;
import dev.tickmark.persistence.Jdbc;
import dev.tickmark.persistence.Migrations;
import dev.tickmark.persistence.StatementBatch;
import dev.tickmark.persistence.TestDatabase;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.Executors;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** Rental events into the {@code rentals} table, a group of them at a time, on PostgreSQL. */
class RentalProjectionTest {
  static Jdbc jdbc;
  static RentalReadModel readModel;
  static final Instant AT = Instant.parse("2026-01-01T00:00:00Z");

  @BeforeAll
  static void start() throws Exception {
    var db = TestDatabase.fresh("rentalprojection");
    Migrations.migrate(db);
    jdbc = Jdbc.create(db, "rentalprojection-test", Executors.newFixedThreadPool(2));
    readModel = new RentalReadModel(jdbc);
  }

  @AfterAll
  static void stop() {
    if (jdbc != null) jdbc.close();
  }

  static <T> T join(CompletionStage<T> stage) {
    return stage.toCompletableFuture().join();
  }

  record Fed(String rentalId, Rental.Event event) {}

  /** One projection group: the round trips it took. */
  static int group(List<Fed> events) {
    StatementBatch batch = new StatementBatch();
    for (Fed f : events) RentalProjection.apply(batch, f.rentalId(), f.event());
    return join(jdbc.transaction(batch::send));
  }

  static Rental.Requested requested(String renter, String region) {
    return new Rental.Requested(
        renter,
        new Rental.Spec(
            "h100-80gb",
            2,
            Listing.Tier.ON_DEMAND,
            region,
            3_000_000,
            "ubuntu:24.04",
            List.of("sleep", "1"),
            null,
            null,
            30,
            false),
        1_000_000,
        AT);
  }

  static Rental.Matched matched(String host, long price) {
    return new Rental.Matched(
        new Rental.Terms(
            host,
            "acc_provider",
            List.of(0, 1),
            price,
            true,
            AT.plusSeconds(1),
            "eu-nl",
            "sandbox"),
        AT.plusSeconds(1));
  }

  /** A whole life: launched, matched, started, settled, given notice, ended, proven, closed. */
  static List<Fed> life(String id, String renter) {
    return List.of(
        new Fed(id, requested(renter, null)),
        new Fed(id, matched("h-1", 2_500_000)),
        new Fed(id, new Rental.Started(AT.plusSeconds(5), AT.plusSeconds(6), null)),
        new Fed(
            id,
            new Rental.Settled(
                new Rental.Checkpoint(10, 13_888, 11_805, 2_083, AT.plusSeconds(15)),
                AT.plusSeconds(15))),
        new Fed(id, new Rental.HoldExtended(2_000_000, AT.plusSeconds(16))),
        new Fed(id, new Rental.PreemptionScheduled(AT.plusSeconds(200), AT.plusSeconds(17))),
        new Fed(
            id,
            new Rental.Ended(
                Rental.EndReason.HOST_LOST, AT.plusSeconds(25), 20, AT.plusSeconds(26), false)),
        new Fed(id, new Rental.EndProven(12, AT.plusSeconds(27))),
        new Fed(id, new Rental.Closed(AT.plusSeconds(28))));
  }

  static RentalReadModel.RentalRow only(String renter) {
    List<RentalReadModel.RentalRow> rows = join(readModel.byRenter(renter, null, 0, 10));
    assertEquals(1, rows.size());
    return rows.get(0);
  }

  static void assertLived(RentalReadModel.RentalRow r, String id) {
    assertEquals(id, r.rentalId());
    assertEquals("ended", r.status());
    assertEquals("h100-80gb", r.gpu());
    assertEquals(2, r.count());
    assertEquals("on_demand", r.tier());
    assertEquals("eu-nl", r.region()); // none asked for: the host's
    assertEquals("sandbox", r.hostRuntime(), "how the host it was matched to runs rentals");
    assertNull(r.runtime(), "none asked for");
    assertEquals(3_000_000, r.maxPricePerGpuHour());
    assertEquals(2_500_000L, r.pricePerGpuHour());
    assertEquals(true, r.simulated());
    assertEquals(AT, r.createdAt());
    assertEquals(AT.plusSeconds(1), r.matchedAt());
    assertEquals(AT.plusSeconds(5), r.startedAt());
    assertEquals(AT.plusSeconds(25), r.endedAt());
    assertEquals("host_lost", r.endReason());
    assertEquals(12, r.billedSeconds()); // what the host proved, after the end's 20
    assertEquals(13_888, r.cost()); // the last settlement's
    assertEquals(AT.plusSeconds(200), r.preemptionDeadline());
    assertNull(r.exitCode(), "a lost host's rental has no exit status");
    assertEquals("ubuntu:24.04", r.image());
    assertEquals(List.of("sleep", "1"), r.command());
    assertEquals(false, r.network());
    assertNull(r.maxTotal());
    assertNull(r.restore());
  }

  /** What it was launched with, as the renter's list shows it. */
  @Test
  void listsWhatARentalWasLaunchedWith() {
    Rental.Spec spec =
        new Rental.Spec(
                "h100-80gb",
                1,
                Listing.Tier.SPOT,
                "eu-de",
                3_000_000,
                "ghcr.io/acme/train:1",
                List.of("python", "train.py", "--name", "it's \"quoted\""),
                null,
                5_000_000L,
                30,
                true)
            .withRestore(new Rental.Restore("snap_0123456789abcdef01234567", "ab", 10))
            .withRuntime("docker");
    Rental.Spec ownCommand =
        new Rental.Spec(
            "h100-80gb",
            1,
            Listing.Tier.ON_DEMAND,
            null,
            3_000_000,
            "ubuntu:24.04",
            null,
            null,
            null,
            30,
            false);
    group(
        List.of(
            new Fed("rnt_with1", new Rental.Requested("acc_launched_with", spec, 1_000_000, AT)),
            new Fed(
                "rnt_with2",
                new Rental.Requested(
                    "acc_launched_with", ownCommand, 1_000_000, AT.plusSeconds(1)))));
    Map<String, RentalReadModel.RentalRow> rows = new java.util.HashMap<>();
    for (RentalReadModel.RentalRow r : join(readModel.byRenter("acc_launched_with", null, 0, 10)))
      rows.put(r.rentalId(), r);
    RentalReadModel.RentalRow one = rows.get("rnt_with1");
    assertEquals("ghcr.io/acme/train:1", one.image());
    assertEquals(List.of("python", "train.py", "--name", "it's \"quoted\""), one.command());
    assertEquals(true, one.network());
    assertEquals(5_000_000L, one.maxTotal());
    assertEquals("snap_0123456789abcdef01234567", one.restore());
    assertEquals("docker", one.runtime());
    RentalReadModel.RentalRow two = rows.get("rnt_with2");
    assertEquals(List.of(), two.command(), "the image's own command");
    assertEquals(false, two.network());
    assertNull(two.maxTotal());
    assertNull(two.restore());
    assertNull(two.runtime(), "any runtime");
  }

  @Test
  void followsARentalThroughItsLifeEventByEvent() {
    for (Fed f : life("rnt_onebyone", "acc_onebyone")) group(List.of(f));
    assertLived(only("acc_onebyone"), "rnt_onebyone");
  }

  @Test
  void writesTheSameRowFromOneGroupInTwoRoundTrips() {
    // the insert, then every later event as one statement: one run each
    assertEquals(2, group(life("rnt_onegroup", "acc_onegroup")));
    assertLived(only("acc_onegroup"), "rnt_onegroup");
  }

  @Test
  void writesAGroupOfLaunchesInTwoRoundTrips() {
    List<Fed> launches = new ArrayList<>();
    for (int i = 0; i < 20; i++) {
      String id = "rnt_launch" + i;
      launches.add(new Fed(id, requested("acc_launches", i % 2 == 0 ? "eu-de" : null)));
      launches.add(new Fed(id, matched("h-" + i, 2_000_000 + i)));
    }
    assertEquals(2, group(launches));

    List<RentalReadModel.RentalRow> rows = join(readModel.byRenter("acc_launches", null, 0, 100));
    assertEquals(20, rows.size());
    for (RentalReadModel.RentalRow r : rows) {
      int i = Integer.parseInt(r.rentalId().substring("rnt_launch".length()));
      assertEquals("provisioning", r.status());
      assertEquals(2_000_000L + i, r.pricePerGpuHour());
      // a region asked for stays; none asked for becomes the host's
      assertEquals(i % 2 == 0 ? "eu-de" : "eu-nl", r.region());
      assertEquals(AT.plusSeconds(1), r.matchedAt());
      assertNull(r.startedAt());
      assertEquals(0, r.billedSeconds());
    }
    // newest first, in the order they were launched
    assertEquals("rnt_launch19", rows.get(0).rentalId());
    assertEquals("rnt_launch0", rows.get(19).rentalId());
  }

  /**
   * A workload's exit status is listed with its end; in one batch with ends that have none (the
   * statement binds both alike).
   */
  @Test
  void listsTheExitStatusOfAWorkloadThatEndedByItself() {
    List<Fed> batch = new ArrayList<>();
    for (String id : List.of("rnt_exit3", "rnt_exit0", "rnt_lost")) {
      batch.add(new Fed(id, requested("acc_exits", null)));
      batch.add(new Fed(id, matched("h-x", 2_000_000)));
      batch.add(new Fed(id, new Rental.Started(AT.plusSeconds(5), AT.plusSeconds(6), null)));
    }
    batch.add(new Fed("rnt_exit3", ended(Rental.EndReason.WORKLOAD_EXITED, 3)));
    batch.add(new Fed("rnt_lost", ended(Rental.EndReason.HOST_LOST, null)));
    batch.add(new Fed("rnt_exit0", ended(Rental.EndReason.WORKLOAD_EXITED, 0)));
    batch.add(new Fed("rnt_exit3", new Rental.Closed(AT.plusSeconds(30))));
    group(batch);

    Map<String, Integer> codes = new java.util.HashMap<>();
    for (RentalReadModel.RentalRow r : join(readModel.byRenter("acc_exits", null, 0, 10)))
      codes.put(r.rentalId(), r.exitCode());
    Map<String, Integer> expected = new java.util.HashMap<>();
    expected.put("rnt_exit3", 3);
    expected.put("rnt_exit0", 0);
    expected.put("rnt_lost", null);
    assertEquals(expected, codes);
  }

  private static Rental.Ended ended(Rental.EndReason reason, Integer exitCode) {
    return new Rental.Ended(
        reason, AT.plusSeconds(20), 15, AT.plusSeconds(21), exitCode != null, exitCode);
  }

  @Test
  void marksARefusedLaunchAndLeavesItOutOfTheList() {
    group(
        List.of(
            new Fed("rnt_refused", requested("acc_refused", null)),
            new Fed("rnt_refused", new Rental.Refused(Rejection.INSUFFICIENT_FUNDS, AT))));
    assertEquals(List.of(), join(readModel.byRenter("acc_refused", null, 0, 10)));
    assertEquals(Map.of("rnt_refused", "refused"), statuses("acc_refused"));
  }

  /**
   * A host's provider sees the rentals that ran on it, newest first and a page at a time, each with
   * what it earned them (the latest settlement's provider share), and the host's totals.
   */
  @Test
  void listsTheRentalsOfAHostWithWhatEachEarnedItsProvider() {
    List<Fed> batch = new ArrayList<>();
    for (String id : List.of("rnt_onhost1", "rnt_onhost2", "rnt_onhost3", "rnt_elsewhere")) {
      batch.add(new Fed(id, requested("acc_hostrentals", null)));
      batch.add(
          new Fed(id, matched(id.equals("rnt_elsewhere") ? "h-other" : "h-earns", 2_500_000)));
    }
    for (String id : List.of("rnt_onhost1", "rnt_onhost2", "rnt_elsewhere"))
      batch.add(new Fed(id, new Rental.Started(AT.plusSeconds(5), AT.plusSeconds(6), null)));
    // two settlements of one rental: the second's cumulative share is its figure, not their sum
    batch.add(new Fed("rnt_onhost1", settled(10, 13_888, 11_805)));
    batch.add(new Fed("rnt_onhost1", settled(20, 27_777, 23_610)));
    batch.add(new Fed("rnt_onhost2", settled(10, 13_888, 11_805)));
    batch.add(new Fed("rnt_elsewhere", settled(10, 13_888, 11_805)));
    batch.add(new Fed("rnt_onhost1", ended(Rental.EndReason.STOPPED_BY_RENTER, null)));
    group(batch);
    // rnt_onhost3 never started (still provisioning): listed, nothing earned

    List<RentalReadModel.HostRentalRow> rows = join(readModel.byHost("h-earns", 0, 10));
    assertEquals(
        List.of("rnt_onhost3", "rnt_onhost2", "rnt_onhost1"),
        rows.stream().map(RentalReadModel.HostRentalRow::rentalId).toList());
    RentalReadModel.HostRentalRow one = rows.get(2);
    assertEquals("stopping", one.status());
    assertEquals("stopped_by_renter", one.endReason());
    assertEquals(2, one.count());
    assertEquals(2_500_000L, one.pricePerGpuHour());
    assertEquals(15, one.billedSeconds(), "the end's");
    assertEquals(23_610, one.providerEarned());
    assertEquals(AT.plusSeconds(5), one.startedAt());
    assertEquals(11_805, rows.get(1).providerEarned());
    assertEquals(0, rows.get(0).providerEarned());
    assertEquals("provisioning", rows.get(0).status());

    List<RentalReadModel.HostRentalRow> first = join(readModel.byHost("h-earns", 0, 2));
    List<RentalReadModel.HostRentalRow> rest =
        join(readModel.byHost("h-earns", first.get(1).rowId(), 2));
    assertEquals(
        List.of("rnt_onhost1"),
        rest.stream().map(RentalReadModel.HostRentalRow::rentalId).toList());

    RentalReadModel.HostTotals totals = join(readModel.hostTotals("h-earns"));
    assertEquals(3, totals.rentals());
    assertEquals((15 + 10) * 2, totals.cardSeconds(), "seconds billed times the cards");
    assertEquals(23_610 + 11_805, totals.providerEarned());
    assertEquals(
        new RentalReadModel.HostTotals(0, 0, 0), join(readModel.hostTotals("h-never-rented")));
    assertEquals(List.of(), join(readModel.byHost("h-never-rented", 0, 10)));
  }

  /**
   * An operator's refunds of an ended rental: the renter's list shows what they gave back, and the
   * host's rental and totals what it earned less what they took back from the provider.
   */
  @Test
  void aRefundShowsInTheRentersListAndLowersWhatTheRentalEarnedItsHost() {
    String id = "rnt_refunded";
    group(
        List.of(
            new Fed(id, requested("acc_refunded", null)),
            new Fed(id, matched("h-refunds", 2_500_000)),
            new Fed(id, new Rental.Started(AT.plusSeconds(5), AT.plusSeconds(6), null)),
            new Fed(id, settled(20, 27_777, 23_610)),
            new Fed(id, ended(Rental.EndReason.STOPPED_BY_RENTER, null)),
            new Fed(id, new Rental.Closed(AT.plusSeconds(40)))));
    assertEquals(0, only("acc_refunded").refunded());
    assertEquals(23_610, join(readModel.hostTotals("h-refunds")).providerEarned());

    group(
        List.of(
            new Fed(
                id,
                new Rental.Refunded(
                    "t-1", 10_000, "faulty", 10_000, 8_500, 1_500, AT.plusSeconds(50)))));
    assertEquals(10_000, only("acc_refunded").refunded());
    assertEquals("ended", only("acc_refunded").status());
    assertEquals(
        23_610 - 8_500, join(readModel.byHost("h-refunds", 0, 10)).get(0).providerEarned());

    group(
        List.of(
            new Fed(
                id,
                new Rental.Refunded(
                    "t-2", 17_777, "faulty", 27_777, 23_610, 4_167, AT.plusSeconds(60)))));
    assertEquals(27_777, only("acc_refunded").refunded());
    assertEquals(0, join(readModel.byHost("h-refunds", 0, 10)).get(0).providerEarned());
    assertEquals(0, join(readModel.hostTotals("h-refunds")).providerEarned());
  }

  private static Rental.Settled settled(long second, long cost, long provider) {
    return new Rental.Settled(
        new Rental.Checkpoint(second, cost, provider, cost - provider, AT.plusSeconds(5 + second)),
        AT.plusSeconds(5 + second));
  }

  /**
   * The migration that added the provider's figure takes it, for rentals settled before it, from
   * the ledger's earning legs of each rental.
   */
  @Test
  void theMigrationFillsInWhatRentalsSettledBeforeItEarnedFromTheLedger() throws Exception {
    group(
        List.of(
            new Fed("rnt_before", requested("acc_before", null)),
            new Fed("rnt_before", matched("h-before", 2_500_000))));
    String migration;
    try (var in = Migrations.class.getResourceAsStream("/db/migration/V26__host_rentals.sql")) {
      migration = new String(in.readAllBytes(), java.nio.charset.StandardCharsets.UTF_8);
    }
    join(
        jdbc.run(
            c -> {
              try (var st = c.createStatement()) {
                st.execute(
                    "INSERT INTO ledger_entries(account_id, kind, amount, entry_key, rental_id, at,"
                        + " persistence_id, sequence_number, leg) VALUES"
                        + " ('acc_p', 'earning', 11805, 'rnt_before:10', 'rnt_before', now(), 'Account|acc_p', 1, 0),"
                        + " ('platform', 'platform_fee', 2083, 'rnt_before:10', 'rnt_before', now(), 'Account|acc_p', 1, 1),"
                        + " ('acc_p', 'earning', 11806, 'rnt_before:20', 'rnt_before', now(), 'Account|acc_p', 2, 0),"
                        + " ('acc_r', 'capture', -13888, 'rnt_before:10', 'rnt_before', now(), 'Account|acc_r', 1, 0)");
                st.execute(migration);
              }
              return null;
            }));
    assertEquals(11805 + 11806, join(readModel.byHost("h-before", 0, 1)).get(0).providerEarned());
  }

  static Map<String, String> statuses(String renter) {
    return join(
        jdbc.run(
            c -> {
              try (PreparedStatement st =
                  c.prepareStatement("SELECT rental_id, status FROM rentals WHERE renter_id = ?")) {
                st.setString(1, renter);
                try (ResultSet rs = st.executeQuery()) {
                  Map<String, String> m = new java.util.HashMap<>();
                  while (rs.next()) m.put(rs.getString(1), rs.getString(2));
                  return m;
                }
              }
            }));
  }
}
