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
 * Refunds in the audit on a real PostgreSQL, in a database of their own (the steps below leave the
 * books unbalanced on purpose at the end): the renter's refund matched by the provider's and the
 * platform's reversals, a provider whose refunded earnings were paid out already in debt but not in
 * violation, a refund on its way counted as pending, and a rental refunded beyond its charge
 * caught.
 */
class LedgerRefundAuditIntegrationTest {
  static DatabaseSettings db;
  static Jdbc jdbc;
  static LedgerBooks books;
  static final Instant AT = Instant.parse("2026-01-01T00:00:00Z");

  @BeforeAll
  static void start() throws Exception {
    db = TestDatabase.fresh("ledgerrefunds");
    Migrations.migrate(db);
    jdbc = Jdbc.create(db, "ledgerrefunds-test", Executors.newFixedThreadPool(2));
    books = new LedgerBooks(jdbc);
  }

  @AfterAll
  static void stop() {
    if (jdbc != null) jdbc.close();
  }

  @Test
  void aRefundBalancesAgainstItsReversalsAndAProviderPaidBeforeItOwesTheDifference() {
    books.book(
        "renter",
        List.of(
            new Account.Deposited("payment:p1", 5_000, AT),
            new Account.HoldPlaced("rnt_1", 2_000, AT),
            new Account.Captured("rnt_1", 60, 2_000, 2_000, AT),
            new Account.HoldReleased("rnt_1", 0, AT)));
    books.book(
        "provider",
        List.of(
            new Account.EarningsCredited("rnt_1", 60, 1_700, 300, 1_700, 300, true, AT),
            new Account.PaidOut("pr_1:provider", 1_700, AT)));
    assertTrue(books.audit().conserved());

    // Half the charge back: the renter's side first, the provider's still on its way.
    books.book("renter", List.of(new Account.ChargeRefunded("rnt_1", 1_000, 1_000, AT)));
    LedgerReadModel.Audit onItsWay = books.audit();
    assertEquals(1_000, onItsWay.refunds());
    assertEquals(1_000, onItsWay.pendingRefunds());
    assertEquals(4_000, onItsWay.renterBalances());
    assertTrue(onItsWay.conserved(), onItsWay.toString());

    books.book("provider", List.of(new Account.EarningsReversed("rnt_1", 850, 150, 850, 150, AT)));
    LedgerReadModel.Audit a = books.audit();
    assertEquals(1_000, a.refunds());
    assertEquals(850, a.earningsReversed());
    assertEquals(150, a.platformFeesReversed());
    assertEquals(0, a.pendingRefunds());
    assertEquals(0, a.pendingReversals());
    assertEquals(-850, a.providerEarningsOwed(), "paid out before the refund");
    assertEquals(850, a.providerDebt());
    assertEquals(0, a.accountsBelowZero(), "a debt from a refund is no violation");
    assertTrue(a.conserved(), a.toString());
    assertFalse(
        new LedgerReadModel(jdbc)
            .providersOwed(1)
            .toCompletableFuture()
            .join()
            .contains("provider"),
        "no payout while in debt");

    // A rental refunded beyond what it charged disagrees with itself.
    books.book("renter", List.of(new Account.ChargeRefunded("rnt_1", 2_500, 1_500, AT)));
    books.book(
        "provider", List.of(new Account.EarningsReversed("rnt_1", 2_125, 375, 1_275, 225, AT)));
    LedgerReadModel.Audit broken = books.audit();
    assertEquals(1, broken.mismatchedSettlements());
    assertFalse(broken.conserved());
  }
}
