package dev.tickmark.persistence.ledger;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.tickmark.engine.account.Account;
import dev.tickmark.persistence.DatabaseSettings;
import dev.tickmark.persistence.Jdbc;
import dev.tickmark.persistence.Migrations;
import dev.tickmark.persistence.TestDatabase;
import java.sql.ResultSet;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Executors;
import org.apache.pekko.persistence.query.Offset;
import org.apache.pekko.projection.eventsourced.EventEnvelope;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The ledger projection's write on a real PostgreSQL: a group's legs are one statement over arrays,
 * and the rows it leaves are exactly what {@link LedgerLegs} makes of the events, in their order,
 * with their instants to the microsecond, and a replayed group adds nothing.
 */
class LedgerProjectionWriterIntegrationTest {
  static DatabaseSettings db;
  static Jdbc jdbc;

  @BeforeAll
  static void start() throws Exception {
    db = TestDatabase.fresh("ledgerwriter");
    Migrations.migrate(db);
    jdbc = Jdbc.create(db, "ledgerwriter-test", Executors.newFixedThreadPool(2));
  }

  @AfterAll
  static void stop() {
    if (jdbc != null) jdbc.close();
  }

  /** Events of two accounts, as a projection group delivers them (sequence numbers per account). */
  static List<EventEnvelope<Account.Event>> group() {
    Instant micros = Instant.parse("2026-03-01T12:00:00.123456Z");
    Instant nanos = Instant.parse("2026-03-01T12:00:01.999999700Z"); // rounds up to the next second
    return List.of(
        envelope("renter-1", 1, new Account.Deposited("payment:p1", 10_000, micros)),
        envelope("renter-1", 2, new Account.HoldPlaced("rnt_1", 3_000, micros)),
        envelope(
            "provider-1",
            7,
            new Account.EarningsCredited("rnt_1", 60, 850, 150, 850, 150, false, nanos)),
        envelope("renter-1", 3, new Account.Captured("rnt_1", 60, 1_000, 1_000, nanos)),
        envelope(
            "provider-1",
            8,
            new Account.EarningsCredited("rnt_1", 60, 850, 150, 0, 0, true, nanos)),
        envelope("renter-1", 4, new Account.HoldReleased("rnt_1", 2_000, nanos)));
  }

  static EventEnvelope<Account.Event> envelope(String account, long seq, Account.Event event) {
    return EventEnvelope.create(Offset.noOffset(), "Account|" + account, seq, event, 0L);
  }

  /** What LedgerLegs says the group's rows are, one line a leg, in the group's order. */
  static List<String> expected(List<EventEnvelope<Account.Event>> group) {
    List<String> lines = new ArrayList<>();
    for (EventEnvelope<Account.Event> e : group) {
      String account = e.persistenceId().substring("Account|".length());
      List<LedgerLegs.Leg> legs = LedgerLegs.of(account, e.event());
      for (int leg = 0; leg < legs.size(); leg++) {
        LedgerLegs.Leg l = legs.get(leg);
        Instant at = Instant.ofEpochSecond(0, LedgerProjection.micros(l.at()) * 1000);
        lines.add(
            String.join(
                " ",
                l.accountId(),
                l.kind(),
                Long.toString(l.amount()),
                l.key(),
                String.valueOf(l.rentalId()),
                at.toString(),
                e.persistenceId(),
                Long.toString(e.sequenceNr()),
                Integer.toString(leg)));
      }
    }
    return lines;
  }

  static List<String> rows() {
    return jdbc.run(
            c -> {
              List<String> lines = new ArrayList<>();
              try (var st = c.createStatement();
                  ResultSet rs =
                      st.executeQuery(
                          "SELECT account_id, kind, amount, entry_key, rental_id, at,"
                              + " persistence_id, sequence_number, leg FROM ledger_entries ORDER BY id")) {
                while (rs.next())
                  lines.add(
                      String.join(
                          " ",
                          rs.getString(1),
                          rs.getString(2),
                          Long.toString(rs.getLong(3)),
                          rs.getString(4),
                          String.valueOf(rs.getString(5)),
                          rs.getTimestamp(6).toInstant().toString(),
                          rs.getString(7),
                          Long.toString(rs.getLong(8)),
                          Integer.toString(rs.getShort(9))));
              }
              return lines;
            })
        .toCompletableFuture()
        .join();
  }

  static void write(List<EventEnvelope<Account.Event>> group) {
    jdbc.run(
            c -> {
              LedgerProjection.insertLegs(c, group);
              return null;
            })
        .toCompletableFuture()
        .join();
  }

  @Test
  void aGroupsLegsAreWhatLedgerLegsMakesInOrderAndOnceOnly() {
    List<EventEnvelope<Account.Event>> group = group();
    List<String> expected = expected(group);
    assertEquals(
        6, expected.size(), "legs: 1+1+2+1+0 (a credit of nothing)+1, with the platform's");
    assertEquals("2026-03-01T12:00:02Z", expected.get(5).split(" ")[5], "the 700 ns round up");

    write(group);
    assertEquals(expected, rows());

    write(group); // a replay after a lost offset: the constraint drops every leg again
    write(group.subList(2, 4));
    assertEquals(expected, rows());
  }
}
