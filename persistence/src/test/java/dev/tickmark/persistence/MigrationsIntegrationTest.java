package dev.tickmark.persistence;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.Statement;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.junit.jupiter.api.Test;

/** The versioned migrations against a real PostgreSQL. */
class MigrationsIntegrationTest {

  @Test
  void appliesEveryMigrationOnceAndIsANoOpAfterwards() throws Exception {
    DatabaseSettings db = TestDatabase.fresh("migrations");
    assertEquals(Migrations.FILES.size(), Migrations.migrate(db));
    assertEquals(0, Migrations.migrate(db));
    try (Connection c = DriverManager.getConnection(db.url(), db.user(), db.password());
        Statement st = c.createStatement()) {
      for (String table :
          List.of(
              "event_journal",
              "event_tag",
              "snapshot",
              "pekko_projection_offset_store",
              "pekko_projection_management",
              "ledger_entries",
              "api_keys",
              "idempotency_keys",
              "hosts")) {
        try (ResultSet rs =
            st.executeQuery("SELECT to_regclass('public." + table + "') IS NOT NULL")) {
          rs.next();
          assertTrue(rs.getBoolean(1), table + " exists");
        }
      }
      try (ResultSet rs = st.executeQuery("SELECT count(*) FROM schema_migrations")) {
        rs.next();
        assertEquals(Migrations.FILES.size(), rs.getInt(1));
      }
      // V20: a tag row is not checked against the journal (the check was 0.4 of a tagged batch's
      // time); the journal's DAO writes tags only from the orderings of their own events.
      try (ResultSet rs =
          st.executeQuery(
              "SELECT count(*) FROM pg_constraint WHERE conrelid = 'event_tag'::regclass"
                  + " AND contype = 'f'")) {
        rs.next();
        assertEquals(0, rs.getInt(1), "foreign keys on event_tag");
      }
    }
  }

  @Test
  void nodesStartingTogetherApplyEachMigrationExactlyOnce() throws Exception {
    DatabaseSettings db = TestDatabase.fresh("migrations_race");
    ExecutorService pool = Executors.newFixedThreadPool(3);
    try {
      List<Future<Integer>> runs =
          pool.invokeAll(
              List.<Callable<Integer>>of(
                  () -> Migrations.migrate(db),
                  () -> Migrations.migrate(db),
                  () -> Migrations.migrate(db)));
      int applied = 0;
      for (Future<Integer> run : runs) applied += run.get();
      assertEquals(
          Migrations.FILES.size(), applied, "the advisory lock lets one node apply each migration");
    } finally {
      pool.shutdownNow();
    }
  }

  @Test
  void refusesToStartWhenAnAppliedMigrationWasEdited() throws Exception {
    DatabaseSettings db = TestDatabase.fresh("migrations_edit");
    Migrations.migrate(db);
    try (Connection c = DriverManager.getConnection(db.url(), db.user(), db.password());
        Statement st = c.createStatement()) {
      st.executeUpdate("UPDATE schema_migrations SET checksum = 'edited' WHERE version = 3");
    }
    IllegalStateException e =
        assertThrows(IllegalStateException.class, () -> Migrations.migrate(db));
    assertTrue(e.getMessage().contains("V3__ledger_and_credentials.sql"), e.getMessage());
  }
}
