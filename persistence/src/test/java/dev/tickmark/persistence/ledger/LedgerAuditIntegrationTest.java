package dev.tickmark.persistence.ledger;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.tickmark.engine.account.Account;
import dev.tickmark.persistence.DatabaseSettings;
import dev.tickmark.persistence.Jdbc;
import dev.tickmark.persistence.Migrations;
import dev.tickmark.persistence.TestDatabase;
import java.time.Instant;
import java.util.List;
import java.util.concurrent.Executors;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The audit on a real PostgreSQL, over the rows {@link LedgerLegs} makes of account events (as the
 * ledger projection writes them): a rental's captures matched by its credits and a snapshot's
 * storage captures matched by the platform's storage legs, both conserved; a storage leg that
 * disagrees with its capture is caught.
 */
class LedgerAuditIntegrationTest {
  static DatabaseSettings db;
  static Jdbc jdbc;
  static LedgerBooks books;
  static final Instant AT = Instant.parse("2026-01-01T00:00:00Z");

  @BeforeAll
  static void start() throws Exception {
    db = TestDatabase.fresh("ledgeraudit");
    Migrations.migrate(db);
    jdbc = Jdbc.create(db, "ledgeraudit-test", Executors.newFixedThreadPool(2));
    books = new LedgerBooks(jdbc);
  }

  @AfterAll
  static void stop() {
    if (jdbc != null) jdbc.close();
  }

  @Test
  void aPayoutTheBankReturnedIsOwedToItsProviderAgainAndTheBooksStillBalance() {
    LedgerReadModel.Audit before = books.audit();
    books.book(
        "returned-renter",
        List.of(
            new Account.Deposited("payment:p9", 5_000, AT),
            new Account.HoldPlaced("rnt_9", 2_000, AT),
            new Account.Captured("rnt_9", 60, 2_000, 2_000, AT),
            new Account.HoldReleased("rnt_9", 0, AT)));
    books.book(
        "returned-provider",
        List.of(
            new Account.EarningsCredited("rnt_9", 60, 1_700, 300, 1_700, 300, true, AT),
            new Account.PaidOut("pr_1:returned-provider", 1_700, AT)));
    LedgerReadModel ledger = new LedgerReadModel(jdbc);
    assertFalse(
        ledger.providersOwed(1_000).toCompletableFuture().join().contains("returned-provider"));

    books.book(
        "returned-provider",
        List.of(new Account.PayoutReturned("pr_1:returned-provider", 1_700, "AC04", null, AT)));

    LedgerReadModel.Audit a = books.audit();
    assertEquals(1_700, a.payouts() - before.payouts());
    assertEquals(1_700, a.payoutsReturned() - before.payoutsReturned());
    assertEquals(
        1_700,
        a.providerEarningsOwed() - before.providerEarningsOwed(),
        "paid, returned: owed again");
    assertTrue(a.conserved(), a.toString());
    assertTrue(
        ledger.providersOwed(1_000).toCompletableFuture().join().contains("returned-provider"),
        "the next payout run finds it again");
  }

  @Test
  void storageRevenueIsCountedAndConservedBesideRentalSettlements() {
    LedgerReadModel.Audit before = books.audit(); // the other test's rows may be there already
    books.book(
        "renter",
        List.of(
            new Account.Deposited("payment:p1", 10_000, AT),
            new Account.HoldPlaced("rnt_1", 3_000, AT),
            new Account.Captured("rnt_1", 60, 1_000, 1_000, AT),
            new Account.Captured("rnt_1", 120, 2_000, 1_000, AT),
            new Account.HoldReleased("rnt_1", 1_000, AT),
            new Account.HoldPlaced("snap_1", 600, AT),
            new Account.StorageCaptured("snap_1", 3_600, 100, 100, AT),
            new Account.StorageCaptured("snap_1", 7_200, 250, 150, AT),
            new Account.StorageCaptured("snap_1", 10_800, 250, 0, AT),
            new Account.HoldReleased("snap_1", 350, AT)));
    books.book(
        "provider",
        List.of(
            new Account.EarningsCredited("rnt_1", 60, 850, 150, 850, 150, false, AT),
            new Account.EarningsCredited("rnt_1", 120, 1_700, 300, 850, 150, true, AT)));

    LedgerReadModel.Audit a = books.audit();
    assertEquals(2_250, a.captures() - before.captures());
    assertEquals(1_700, a.providerEarnings() - before.providerEarnings());
    assertEquals(300, a.platformRevenue() - before.platformRevenue());
    assertEquals(250, a.storageRevenue() - before.storageRevenue());
    assertEquals(0, a.holdsOpen());
    assertEquals(0, a.mismatchedSettlements());
    assertEquals(0, a.pendingCaptures());
    assertTrue(a.conserved(), a.toString());

    // A storage leg that books more than its capture: the snapshot's two sides disagree.
    books.book("renter", List.of(new Account.StorageCaptured("snap_2", 3_600, 10, 10, AT)));
    jdbc.run(
            c -> {
              try (var st = c.createStatement()) {
                st.executeUpdate(
                    "UPDATE ledger_entries SET amount = 11 WHERE kind = 'storage'"
                        + " AND entry_key = 'snap_2:3600'");
              }
              return null;
            })
        .toCompletableFuture()
        .join();
    LedgerReadModel.Audit broken = books.audit();
    assertEquals(1, broken.mismatchedSettlements());
    assertFalse(broken.conserved());
  }
}
