package dev.tickmark.node;

import static dev.tickmark.node.Eventually.eventually;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.tickmark.persistence.EmbeddedDatabase;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A node on its embedded PostgreSQL (the quick start's {@code bin/dev}, or {@code java -jar} with
 * no {@code TICKMARK_DB_URL}) stopped with {@code SIGTERM} finishes its coordinated shutdown
 * against a running database, then stops it. Its shard leases, given back in the shutdown's
 * cluster-shutdown phase, are gone from the database, and the server stopped cleanly. (The
 * library's own JVM shutdown hook used to stop the server as the JVM began to shut down, at the
 * same time as the node's shutdown, so every write of it failed and the leases stayed taken until
 * they expired.)
 */
class EmbeddedDatabaseShutdownIntegrationTest {
  @TempDir Path temp;

  @Test
  void aNodeStoppedWithSigtermGivesItsLeasesBackBeforeItStopsItsEmbeddedDatabase()
      throws Exception {
    Path data = temp.resolve("data"); // the default ./data of a node run in temp
    Path pid = data.resolve("postgres").resolve("postmaster.pid");
    Path log = temp.resolve("node.log");
    Process node = SingleNodeProcess.startEmbedded(temp, SingleNodeProcess.freePort(), log);
    try {
      int port = Integer.parseInt(Files.readAllLines(pid).get(3).strip()); // postmaster.pid: port
      String url = "jdbc:postgresql://127.0.0.1:" + port + "/postgres";
      eventually(
          Duration.ofSeconds(30),
          () -> assertTrue(count(url, "leases") > 0, "the node holds its shards' leases"));
      node.destroy(); // SIGTERM
      assertTrue(node.waitFor(90, TimeUnit.SECONDS), "the node exits");
    } finally {
      node.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
    }
    assertFalse(
        Files.exists(pid),
        "the node stopped its PostgreSQL cleanly:\n" + SingleNodeProcess.tail(log));
    try (EmbeddedDatabase db = EmbeddedDatabase.start(data.resolve("postgres"), 0, false)) {
      String url = db.settings("postgres", 1).url();
      assertEquals(
          List.of(0L, 0L),
          List.of(count(url, "leases"), count(url, "lease_holders")),
          "leases given back at shutdown:\n" + SingleNodeProcess.tail(log));
    }
  }

  /**
   * A node killed with {@code kill -9} runs no shutdown at all, and its PostgreSQL outlives it,
   * holding the data directory. The next start on that directory stops the orphan first and comes
   * up (it used to wait 60 s for the directory's lock and give up, so {@code bin/dev} could not be
   * started again after a crash).
   */
  @Test
  void aNodeStartsAgainOnTheDataOfOneThatWasKilled() throws Exception {
    Path data = temp.resolve("data"); // the default ./data of a node run in temp
    Path pid = data.resolve("postgres").resolve("postmaster.pid");
    Path log = temp.resolve("node.log");
    Process killed = SingleNodeProcess.startEmbedded(temp, SingleNodeProcess.freePort(), log);
    long orphan = Long.parseLong(Files.readAllLines(pid).get(0).strip());
    killed.destroyForcibly().waitFor(30, TimeUnit.SECONDS); // SIGKILL: no hook runs
    assertTrue(
        ProcessHandle.of(orphan).map(ProcessHandle::isAlive).orElse(false),
        "its PostgreSQL outlived it");

    Path againLog = temp.resolve("again.log");
    Process again = null;
    try {
      again = SingleNodeProcess.startEmbedded(temp, SingleNodeProcess.freePort(), againLog);
      assertFalse(
          ProcessHandle.of(orphan).map(ProcessHandle::isAlive).orElse(false),
          "the orphan was stopped");
      again.destroy();
      assertTrue(again.waitFor(90, TimeUnit.SECONDS), "the node exits");
    } finally {
      if (again != null) again.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
      ProcessHandle.of(orphan).ifPresent(ProcessHandle::destroyForcibly);
    }
    assertFalse(Files.exists(pid), "stopped cleanly:\n" + SingleNodeProcess.tail(againLog));
  }

  private static long count(String url, String table) {
    try (Connection c = DriverManager.getConnection(url, "postgres", "");
        Statement st = c.createStatement();
        ResultSet rs = st.executeQuery("SELECT count(*) FROM " + table)) {
      rs.next();
      return rs.getLong(1);
    } catch (SQLException e) {
      throw new AssertionError("cannot count " + table + ": " + e.getMessage(), e);
    }
  }
}
