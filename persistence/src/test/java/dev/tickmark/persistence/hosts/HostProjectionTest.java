package dev.tickmark.persistence.hosts;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.tickmark.engine.host.Host;
import dev.tickmark.engine.host.Listing;
import dev.tickmark.engine.host.verification.Verification;
import dev.tickmark.persistence.Jdbc;
import dev.tickmark.persistence.Migrations;
import dev.tickmark.persistence.StatementBatch;
import dev.tickmark.persistence.TestDatabase;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.Executors;
import java.util.stream.Collectors;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** Host events into the {@code hosts} table, a group at a time, on PostgreSQL. */
class HostProjectionTest {
  static Jdbc jdbc;
  static HostReadModel readModel;
  static final Instant AT = Instant.parse("2026-01-01T00:00:00Z");

  @BeforeAll
  static void start() throws Exception {
    var db = TestDatabase.fresh("hostprojection");
    Migrations.migrate(db);
    jdbc = Jdbc.create(db, "hostprojection-test", Executors.newFixedThreadPool(2));
    readModel = new HostReadModel(jdbc);
  }

  @AfterAll
  static void stop() {
    if (jdbc != null) jdbc.close();
  }

  static <T> T join(CompletionStage<T> stage) {
    return stage.toCompletableFuture().join();
  }

  record Fed(String hostId, Host.Event event) {}

  static int group(List<Fed> events) {
    StatementBatch batch = new StatementBatch();
    for (Fed f : events) HostProjection.apply(batch, f.hostId(), f.event());
    return join(jdbc.transaction(batch::send));
  }

  static Host.CardsReserved reserved(String rental, int cards, int second) {
    return new Host.CardsReserved(
        rental,
        java.util.stream.IntStream.range(0, cards).boxed().toList(),
        2_000_000,
        Listing.Tier.ON_DEMAND,
        AT.plusSeconds(second));
  }

  static Map<String, HostReadModel.HostRow> rows(String owner) {
    return join(readModel.byOwner(owner, null, 100)).stream()
        .collect(Collectors.toMap(HostReadModel.HostRow::hostId, r -> r));
  }

  @Test
  void writesAGroupOfReservationsReleasesAndExpiriesInOneRoundTrip() {
    group(
        List.of(
            new Fed("h-a", new Host.Invited("acc_cards", "eu-nl", "a", "x", AT, AT)),
            new Fed("h-b", new Host.Invited("acc_cards", "eu-nl", "b", "x", AT, AT))));

    int trips =
        group(
            List.of(
                new Fed("h-a", reserved("rnt_1", 2, 1)),
                new Fed("h-b", reserved("rnt_2", 1, 2)),
                new Fed("h-a", reserved("rnt_3", 1, 3)),
                new Fed("h-a", new Host.CardsReleased("rnt_1", List.of(0, 1), AT.plusSeconds(4))),
                new Fed("h-b", new Host.CardsExpired("rnt_2", List.of(0), AT.plusSeconds(5))),
                new Fed("h-b", new Host.CardsReleased("rnt_2", List.of(0), AT.plusSeconds(6)))));

    assertEquals(1, trips);
    Map<String, HostReadModel.HostRow> rows = rows("acc_cards");
    assertEquals(1, rows.get("h-a").cardsTaken()); // 2 + 1 - 2
    assertEquals(0, rows.get("h-b").cardsTaken()); // 1 - 1, and a release past zero stays at zero
    // the row's instant is its last event's: the matcher counts the cards reserved after it
    assertEquals(AT.plusSeconds(4), rows.get("h-a").updatedAt());
    assertEquals(AT.plusSeconds(6), rows.get("h-b").updatedAt());
  }

  /**
   * The host's record, the matcher's tie-break: each release of a rental that ran counts as ended,
   * and as lost when it was lost; other releases and expiries count as neither. In the same batch
   * as the cards' releases (one round trip).
   */
  @Test
  void countsEachRentalThatRanAndEndedAndThoseLost() {
    group(List.of(new Fed("h-r", new Host.Invited("acc_record", "eu-nl", "r", "x", AT, AT))));
    int trips =
        group(
            List.of(
                new Fed("h-r", reserved("rnt_a", 1, 1)),
                new Fed("h-r", reserved("rnt_b", 1, 2)),
                new Fed("h-r", reserved("rnt_c", 1, 3)),
                new Fed("h-r", reserved("rnt_d", 1, 4)),
                new Fed(
                    "h-r",
                    new Host.CardsReleased("rnt_a", List.of(0), AT.plusSeconds(5), true, true)),
                new Fed(
                    "h-r",
                    new Host.CardsReleased("rnt_b", List.of(1), AT.plusSeconds(6), true, false)),
                new Fed("h-r", new Host.CardsReleased("rnt_c", List.of(2), AT.plusSeconds(7))),
                new Fed("h-r", new Host.CardsExpired("rnt_d", List.of(3), AT.plusSeconds(8)))));
    assertEquals(1, trips);
    HostReadModel.HostRow row = rows("acc_record").get("h-r");
    assertEquals(new dev.tickmark.engine.market.Reliability(2, 1), row.reliability());
    assertEquals(0, row.cardsTaken());

    group(
        List.of(
            new Fed(
                "h-r",
                new Host.CardsReleased("rnt_e", List.of(0), AT.plusSeconds(9), true, false))));
    assertEquals(
        new dev.tickmark.engine.market.Reliability(3, 1),
        rows("acc_record").get("h-r").reliability());
  }

  /**
   * How a host runs rentals comes from its passed reports: the latest one's, and a report that does
   * not say (an older agent's) leaves it unknown again, which the matcher takes as able.
   */
  @Test
  void keepsTheRuntimeOfTheLatestPassedReport() {
    group(List.of(new Fed("h-rt", new Host.Invited("acc_runtime", "eu-nl", "rt", "x", AT, AT))));
    assertEquals(null, rows("acc_runtime").get("h-rt").runtime(), "not reported yet");

    group(List.of(new Fed("h-rt", verified(new Verification.WorkloadRuntime("sandbox", false)))));
    HostReadModel.HostRow row = rows("acc_runtime").get("h-rt");
    assertEquals("sandbox", row.runtime());
    assertEquals(Boolean.FALSE, row.offersNetwork());

    group(List.of(new Fed("h-rt", verified(new Verification.WorkloadRuntime("sandbox", true)))));
    assertEquals(Boolean.TRUE, rows("acc_runtime").get("h-rt").offersNetwork());

    group(List.of(new Fed("h-rt", verified(null))));
    row = rows("acc_runtime").get("h-rt");
    assertEquals(null, row.runtime());
    assertEquals(null, row.offersNetwork());

    // a failed report's runtime is shown too: an unisolated one is often why it failed
    var failed =
        new Verification.Outcome(
            false, List.of(), List.of(), false, new Verification.WorkloadRuntime("process", true));
    group(
        List.of(
            new Fed("h-rt", new Host.ReportRejected(failed, "hash2", false, AT.plusSeconds(2)))));
    row = rows("acc_runtime").get("h-rt");
    assertEquals("failed", row.status());
    assertEquals(0, row.cardsTotal());
    assertEquals("process", row.runtime());
  }

  static Host.ReportVerified verified(Verification.WorkloadRuntime runtime) {
    var outcome =
        new Verification.Outcome(
            true,
            List.of(),
            List.of(new Verification.Card(0, "GPU-0", "h100-80gb")),
            true,
            runtime);
    return new Host.ReportVerified(outcome, "hash", AT.plusSeconds(1));
  }
}
