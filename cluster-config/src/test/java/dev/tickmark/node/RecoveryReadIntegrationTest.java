package dev.tickmark.node;

import static dev.tickmark.node.Eventually.eventually;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.tickmark.engine.FreshEntities;
import dev.tickmark.node.JournalBatchingIntegrationTest.Writer;
import dev.tickmark.persistence.DatabaseSettings;
import dev.tickmark.persistence.TestDatabase;
import dev.tickmark.persistence.journal.BatchedJournalDao;
import dev.tickmark.persistence.journal.HighestSequenceNrs;
import dev.tickmark.persistence.journal.RecoverySnapshotDao;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.pekko.Done;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.Props;
import org.apache.pekko.actor.typed.Terminated;
import org.apache.pekko.actor.typed.javadsl.AskPattern;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.junit.jupiter.api.Test;

/**
 * A recovery reads its snapshot and its highest sequence number in one statement ({@link
 * RecoverySnapshotDao}), and the journal uses that number only where no write can have moved it: an
 * entity recovers every event, with or without a snapshot, and writes on without reusing a sequence
 * number, also when its last incarnation's write is still in flight.
 */
class RecoveryReadIntegrationTest {
  private static final Duration TIMEOUT = Duration.ofSeconds(30);
  private static final AtomicInteger NAMES = new AtomicInteger();

  @Test
  void aRecoveryTakesItsHighestSequenceNumberFromItsSnapshotRead() throws Exception {
    var database = TestDatabase.fresh("recovery_read");
    try (Node node = Node.start(TestNodes.settings(database))) {
      ActorSystem<Void> system = node.system();
      assertEquals(
          RecoverySnapshotDao.class.getName(),
          system.settings().config().getString("jdbc-snapshot-store.dao"));
      HighestSequenceNrs numbers = numbers(system);

      // A new entity: no snapshot, no events.
      long taken = numbers.taken();
      ActorRef<Writer.Command> fresh = spawn(system, "fresh");
      assertEquals(0L, count(system, fresh));
      assertTrue(numbers.taken() > taken, "the new entity's recovery took the number it read");
      write(system, fresh).get(TIMEOUT.toSeconds(), TimeUnit.SECONDS);

      // Six events, a snapshot after the fourth: recovered from the snapshot and two events.
      ActorRef<Writer.Command> first = spawn(system, "snapshotted");
      for (int i = 0; i < 6; i++) write(system, first).get(TIMEOUT.toSeconds(), TimeUnit.SECONDS);
      eventually(TIMEOUT, () -> assertEquals(1L, snapshots(database, "snapshotted")));
      stop(system, first);

      taken = numbers.taken();
      ActorRef<Writer.Command> again = spawn(system, "snapshotted");
      assertEquals(6L, count(system, again));
      assertTrue(numbers.taken() > taken, "the recovery took the number it read");
      write(system, again).get(TIMEOUT.toSeconds(), TimeUnit.SECONDS);
      assertEquals(7L, count(system, again));
      assertEquals(
          7L, events(database, "snapshotted"), "the seventh event has a number of its own");
    }
  }

  /**
   * The incarnation before is still writing when the next recovers (its write held up by a table
   * lock that lets reads through): the snapshot read sees the write in flight and leaves no number,
   * so the journal reads the highest after the write, as the plugin does. A number read then would
   * say 2, and the entity would recover without its third event.
   */
  @Test
  void aWriteInFlightWhenTheRecoveryBeginsIsRecovered() throws Exception {
    var database = TestDatabase.fresh("recovery_read_in_flight");
    try (Node node = Node.start(TestNodes.settings(database))) {
      ActorSystem<Void> system = node.system();
      HighestSequenceNrs numbers = numbers(system);
      ActorRef<Writer.Command> before = spawn(system, "busy");
      write(system, before).get(TIMEOUT.toSeconds(), TimeUnit.SECONDS);
      write(system, before).get(TIMEOUT.toSeconds(), TimeUnit.SECONDS);

      CompletableFuture<Done> third;
      ActorRef<Writer.Command> after;
      try (Connection lock =
          DriverManager.getConnection(database.url(), database.user(), database.password())) {
        lock.setAutoCommit(false);
        try (Statement st = lock.createStatement()) {
          st.execute("LOCK TABLE event_journal IN EXCLUSIVE MODE"); // reads pass, writes wait
        }
        third = write(system, before);
        eventually(TIMEOUT, () -> assertEquals(1L, waitingInserts(database)));

        long declined = numbers.declined();
        after = spawn(system, "busy");
        eventually(
            TIMEOUT,
            () -> assertTrue(numbers.declined() > declined, "the snapshot read left no number"));
        lock.commit();
      }
      third.get(TIMEOUT.toSeconds(), TimeUnit.SECONDS);
      assertEquals(3L, count(system, after), "the write in flight is recovered");
      write(system, after).get(TIMEOUT.toSeconds(), TimeUnit.SECONDS);
      assertEquals(4L, events(database, "busy"));
    }
  }

  /**
   * An entity started under an id claimed fresh ({@link FreshEntities}: a launch's new rental)
   * recovers without reading the store: it answers while the journal and snapshot tables are locked
   * against reads, where an entity not claimed waits. It writes from number 1, and its next start
   * reads the store as always.
   */
  @Test
  void aFreshEntityRecoversWithoutReadingTheStore() throws Exception {
    var database = TestDatabase.fresh("recovery_fresh");
    try (Node node = Node.start(TestNodes.settings(database))) {
      ActorSystem<Void> system = node.system();
      FreshEntities fresh = FreshEntities.get(system);
      CompletableFuture<Long> unclaimed;
      ActorRef<Writer.Command> claimed;
      try (Connection lock =
          DriverManager.getConnection(database.url(), database.user(), database.password())) {
        lock.setAutoCommit(false);
        lockAgainstReads(lock);
        unclaimed = countLater(system, spawn(system, "unclaimed"));
        // (the node's own entities starting meanwhile may wait too)
        eventually(TIMEOUT, () -> assertTrue(waitingRecoveryReads(database) >= 1));

        long taken = fresh.taken();
        assertTrue(fresh.starting("BatchTest|recovery-new"));
        claimed = spawn(system, "new");
        assertEquals(0L, count(system, claimed), "recovered while the store cannot be read");
        assertEquals(taken + 1, fresh.taken());
        assertFalse(unclaimed.isDone(), "the entity not claimed fresh waits to read");
        lock.commit();
      }
      assertEquals(0L, unclaimed.get(TIMEOUT.toSeconds(), TimeUnit.SECONDS));
      write(system, claimed).get(TIMEOUT.toSeconds(), TimeUnit.SECONDS);
      write(system, claimed).get(TIMEOUT.toSeconds(), TimeUnit.SECONDS);
      assertEquals(2L, events(database, "new"));
      stop(system, claimed);

      long taken = fresh.taken();
      assertEquals(2L, count(system, spawn(system, "new")), "a later start reads the store");
      assertEquals(taken, fresh.taken());
    }
  }

  /**
   * A claim that is wrong (the id has events) cannot write over them: the entity believes it and
   * recovers empty, but its first event is number 1 again, which the journal's primary key refuses,
   * and the entity stops. Its history is intact, and the next start recovers it.
   */
  @Test
  void aWrongFreshClaimCannotWriteOverAHistory() throws Exception {
    var database = TestDatabase.fresh("recovery_fresh_wrong");
    try (Node node = Node.start(TestNodes.settings(database))) {
      ActorSystem<Void> system = node.system();
      ActorRef<Writer.Command> first = spawn(system, "claimed-wrongly");
      for (int i = 0; i < 3; i++) write(system, first).get(TIMEOUT.toSeconds(), TimeUnit.SECONDS);
      stop(system, first);

      assertTrue(FreshEntities.get(system).starting("BatchTest|recovery-claimed-wrongly"));
      ActorRef<Writer.Command> believer = spawn(system, "claimed-wrongly");
      assertEquals(0L, count(system, believer), "the claim is believed");
      CompletableFuture<Done> stopped = terminated(system, believer);
      CompletableFuture<Done> refused = write(system, believer);
      stopped.get(TIMEOUT.toSeconds(), TimeUnit.SECONDS);
      assertFalse(refused.isDone() && !refused.isCompletedExceptionally(), "not written");

      assertEquals(3L, events(database, "claimed-wrongly"));
      assertEquals(3L, count(system, spawn(system, "claimed-wrongly")), "recovered in full");
    }
  }

  /**
   * Both tables, so that reads wait too; in the order the recovery's read takes them. A recovery of
   * the node's own that holds one of them meanwhile may still make PostgreSQL call it a deadlock
   * and abort this lock, which then is taken again.
   */
  private static void lockAgainstReads(Connection lock) throws SQLException {
    for (int attempt = 1; ; attempt++) {
      try (Statement st = lock.createStatement()) {
        st.execute("LOCK TABLE snapshot, event_journal IN ACCESS EXCLUSIVE MODE");
        return;
      } catch (SQLException e) {
        if (!"40P01".equals(e.getSQLState()) || attempt == 5) throw e;
        lock.rollback();
      }
    }
  }

  private static HighestSequenceNrs numbers(ActorSystem<Void> system) {
    assertEquals(
        BatchedJournalDao.class.getName(),
        system.settings().config().getString("jdbc-journal.dao"));
    return HighestSequenceNrs.of(system.classicSystem(), "event_journal");
  }

  private static ActorRef<Writer.Command> spawn(ActorSystem<Void> system, String id) {
    return system.systemActorOf(
        new Writer("recovery-" + id, false, 4),
        "recovery-read-" + id + "-" + NAMES.incrementAndGet(),
        Props.empty());
  }

  private static CompletableFuture<Done> write(
      ActorSystem<Void> system, ActorRef<Writer.Command> w) {
    return AskPattern.<Writer.Command, Done>ask(w, Writer.Write::new, TIMEOUT, system.scheduler())
        .toCompletableFuture();
  }

  private static long count(ActorSystem<Void> system, ActorRef<Writer.Command> w) throws Exception {
    return AskPattern.<Writer.Command, Long>ask(w, Writer.Count::new, TIMEOUT, system.scheduler())
        .toCompletableFuture()
        .get(TIMEOUT.toSeconds(), TimeUnit.SECONDS);
  }

  private static CompletableFuture<Long> countLater(
      ActorSystem<Void> system, ActorRef<Writer.Command> w) {
    return AskPattern.<Writer.Command, Long>ask(w, Writer.Count::new, TIMEOUT, system.scheduler())
        .toCompletableFuture();
  }

  private static CompletableFuture<Done> terminated(ActorSystem<Void> system, ActorRef<?> w) {
    CompletableFuture<Done> done = new CompletableFuture<>();
    system.systemActorOf(
        Behaviors.setup(
            ctx -> {
              ctx.watch(w);
              return Behaviors.receive(Object.class)
                  .onSignal(
                      Terminated.class,
                      t -> {
                        done.complete(Done.getInstance());
                        return Behaviors.stopped();
                      })
                  .build();
            }),
        "recovery-read-watch-" + NAMES.incrementAndGet(),
        Props.empty());
    return done;
  }

  private static void stop(ActorSystem<Void> system, ActorRef<Writer.Command> w) throws Exception {
    AskPattern.<Writer.Command, Done>ask(w, Writer.Stop::new, TIMEOUT, system.scheduler())
        .toCompletableFuture()
        .get(TIMEOUT.toSeconds(), TimeUnit.SECONDS);
  }

  private static long events(DatabaseSettings db, String id) {
    return single(
        db,
        "SELECT count(*) FROM event_journal WHERE persistence_id = 'BatchTest|recovery-"
            + id
            + "'");
  }

  private static long snapshots(DatabaseSettings db, String id) {
    return single(
        db, "SELECT count(*) FROM snapshot WHERE persistence_id = 'BatchTest|recovery-" + id + "'");
  }

  private static long waitingInserts(DatabaseSettings db) {
    return single(
        db,
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            + " AND wait_event_type = 'Lock' AND query ILIKE '%INSERT INTO event_journal%'");
  }

  /** Recovery reads (the snapshot with the highest number) waiting for a lock. */
  private static long waitingRecoveryReads(DatabaseSettings db) {
    return single(
        db,
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            + " AND wait_event_type = 'Lock' AND query ILIKE '%LEFT JOIN LATERAL%'");
  }

  /** The one number {@code sql} answers, read on a connection of its own. */
  static long single(DatabaseSettings db, String sql) {
    try (Connection c = DriverManager.getConnection(db.url(), db.user(), db.password());
        Statement st = c.createStatement()) {
      return JournalBatchingIntegrationTest.count(st, sql);
    } catch (Exception e) {
      throw new AssertionError(e);
    }
  }
}
