package dev.tickmark.node;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.tickmark.engine.account.Account;
import dev.tickmark.persistence.TestDatabase;
import dev.tickmark.persistence.journal.BatchedJournalDao;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.apache.pekko.Done;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.Props;
import org.apache.pekko.actor.typed.javadsl.AskPattern;
import org.apache.pekko.persistence.jdbc.query.javadsl.JdbcReadJournal;
import org.apache.pekko.persistence.query.EventEnvelope;
import org.apache.pekko.persistence.query.Offset;
import org.apache.pekko.persistence.query.PersistenceQuery;
import org.apache.pekko.persistence.typed.PersistenceId;
import org.apache.pekko.persistence.typed.javadsl.CommandHandler;
import org.apache.pekko.persistence.typed.javadsl.EventHandler;
import org.apache.pekko.persistence.typed.javadsl.EventSourcedBehavior;
import org.apache.pekko.persistence.typed.javadsl.RetentionCriteria;
import org.apache.pekko.stream.javadsl.Sink;
import org.junit.jupiter.api.Test;

/**
 * The node's journal writes tagged events in batches ({@link BatchedJournalDao}) and what it writes
 * reads back exactly as the plugin's own rows: every event once, its tags pointing at its own
 * ordering, one entity's events in increasing order, by tag and on recovery.
 */
class JournalBatchingIntegrationTest {
  private static final Duration TIMEOUT = Duration.ofSeconds(30);
  private static final int WRITERS = 200;
  private static final int EVENTS_EACH = 15;

  @Test
  void concurrentTaggedWritesReadBackByTagAndOnRecovery() throws Exception {
    var database = TestDatabase.fresh("journal_batching");
    try (Node node = Node.start(TestNodes.settings(database))) {
      ActorSystem<Void> system = node.system();
      assertEquals(
          BatchedJournalDao.class.getName(),
          system.settings().config().getString("jdbc-journal.dao"));

      // Every writer keeps one event in flight, so the journal's batches mix many entities; every
      // third writer tags its events twice.
      long batchesBefore = BatchedJournalDao.taggedBatchesWritten();
      long eventsBefore = BatchedJournalDao.taggedEventsWritten();
      List<ActorRef<Writer.Command>> writers = new ArrayList<>();
      for (int i = 0; i < WRITERS; i++) writers.add(spawn(system, i, "a"));
      for (int round = 1; round <= EVENTS_EACH; round++) {
        List<CompletableFuture<Done>> acks = new ArrayList<>();
        for (ActorRef<Writer.Command> w : writers) acks.add(write(system, w));
        CompletableFuture.allOf(acks.toArray(CompletableFuture[]::new))
            .get(TIMEOUT.toSeconds(), TimeUnit.SECONDS);
      }

      long batches = BatchedJournalDao.taggedBatchesWritten() - batchesBefore;
      long batched = BatchedJournalDao.taggedEventsWritten() - eventsBefore;
      assertTrue(
          batched >= (long) WRITERS * EVENTS_EACH,
          "every event went through the batched write: " + batched);
      assertTrue(
          batches < batched / 2,
          batched + " events in " + batches + " batches: concurrent writers share batches");

      long taggedTwice = (WRITERS + 2) / 3;
      try (Connection c =
              DriverManager.getConnection(database.url(), database.user(), database.password());
          Statement st = c.createStatement()) {
        assertEquals(
            (long) WRITERS * EVENTS_EACH,
            count(
                st, "SELECT count(*) FROM event_journal WHERE persistence_id LIKE 'BatchTest|%'"));
        // Each tag row points at its own event's ordering: the tag names the writer.
        assertEquals(
            (long) (WRITERS + taggedTwice) * EVENTS_EACH,
            count(
                st,
                "SELECT count(*) FROM event_tag t JOIN event_journal j ON j.ordering = t.event_id"
                    + " WHERE j.persistence_id LIKE 'BatchTest|%'"
                    + " AND (t.tag = 'batch-test-' || split_part(j.persistence_id, '|', 2)"
                    + " OR t.tag = 'batch-test-twice')"));
        // No tag row names a missing event: what event_tag's foreign key enforced before V20.
        assertEquals(
            0,
            count(
                st,
                "SELECT count(*) FROM event_tag t LEFT JOIN event_journal j ON j.ordering = t.event_id"
                    + " WHERE j.ordering IS NULL"));
        // One entity's events have increasing orderings.
        assertEquals(0, count(st, OUT_OF_ORDER), "events whose ordering is below the one before");
      }

      JdbcReadJournal query =
          PersistenceQuery.get(system.classicSystem())
              .getReadJournalFor(JdbcReadJournal.class, JdbcReadJournal.Identifier());
      for (int i : new int[] {0, 1, WRITERS - 1}) {
        List<EventEnvelope> byTag =
            query
                .currentEventsByTag("batch-test-w" + i, Offset.noOffset())
                .runWith(Sink.seq(), system)
                .toCompletableFuture()
                .get(TIMEOUT.toSeconds(), TimeUnit.SECONDS);
        assertEquals(EVENTS_EACH, byTag.size(), "events tagged for writer " + i);
        for (int k = 0; k < byTag.size(); k++) {
          assertEquals("BatchTest|w" + i, byTag.get(k).persistenceId());
          assertEquals(k + 1, byTag.get(k).sequenceNr());
        }
      }
      Map<String, Integer> twice = new HashMap<>();
      query
          .currentEventsByTag("batch-test-twice", Offset.noOffset())
          .runWith(Sink.seq(), system)
          .toCompletableFuture()
          .get(TIMEOUT.toSeconds(), TimeUnit.SECONDS)
          .forEach(e -> twice.merge(e.persistenceId(), 1, Integer::sum));
      assertEquals(taggedTwice, twice.size());
      twice.values().forEach(n -> assertEquals(EVENTS_EACH, n));

      // A fresh incarnation recovers every event, and writes on after them.
      ActorRef<Writer.Command> again = spawn(system, 7, "b");
      assertEquals(
          (long) EVENTS_EACH,
          AskPattern.<Writer.Command, Long>ask(
                  again, Writer.Count::new, TIMEOUT, system.scheduler())
              .toCompletableFuture()
              .get(TIMEOUT.toSeconds(), TimeUnit.SECONDS));
      write(system, again).get(TIMEOUT.toSeconds(), TimeUnit.SECONDS);
      try (Connection c =
              DriverManager.getConnection(database.url(), database.user(), database.password());
          Statement st = c.createStatement()) {
        assertEquals(
            EVENTS_EACH + 1,
            count(
                st,
                "SELECT max(sequence_number) FROM event_journal WHERE persistence_id = 'BatchTest|w7'"));
      }
    }
  }

  /**
   * An entity's several events of one write go into one batch with orderings in their sequence
   * order, and read back by tag in that order.
   */
  @Test
  void oneWritesEventsKeepTheirOrder() throws Exception {
    var database = TestDatabase.fresh("journal_batching_many");
    try (Node node = Node.start(TestNodes.settings(database))) {
      ActorSystem<Void> system = node.system();
      List<ActorRef<Writer.Command>> writers = new ArrayList<>();
      for (int i = 0; i < 20; i++) writers.add(spawn(system, i, "many"));
      List<CompletableFuture<Done>> acks = new ArrayList<>();
      for (int round = 0; round < 4; round++) {
        for (ActorRef<Writer.Command> w : writers)
          acks.add(
              AskPattern.<Writer.Command, Done>ask(
                      w, r -> new Writer.WriteMany(7, r), TIMEOUT, system.scheduler())
                  .toCompletableFuture());
      }
      CompletableFuture.allOf(acks.toArray(CompletableFuture[]::new))
          .get(TIMEOUT.toSeconds(), TimeUnit.SECONDS);
      try (Connection c =
              DriverManager.getConnection(database.url(), database.user(), database.password());
          Statement st = c.createStatement()) {
        assertEquals(
            20L * 4 * 7,
            count(
                st, "SELECT count(*) FROM event_journal WHERE persistence_id LIKE 'BatchTest|%'"));
        assertEquals(0, count(st, OUT_OF_ORDER), "events whose ordering is below the one before");
      }
      JdbcReadJournal query =
          PersistenceQuery.get(system.classicSystem())
              .getReadJournalFor(JdbcReadJournal.class, JdbcReadJournal.Identifier());
      List<EventEnvelope> byTag =
          query
              .currentEventsByTag("batch-test-w5", Offset.noOffset())
              .runWith(Sink.seq(), system)
              .toCompletableFuture()
              .get(TIMEOUT.toSeconds(), TimeUnit.SECONDS);
      assertEquals(4 * 7, byTag.size());
      for (int k = 0; k < byTag.size(); k++) assertEquals(k + 1, byTag.get(k).sequenceNr());
    }
  }

  private static ActorRef<Writer.Command> spawn(ActorSystem<Void> system, int i, String round) {
    return system.systemActorOf(
        new Writer("w" + i, i % 3 == 0), "batch-test-" + round + "-" + i, Props.empty());
  }

  private static CompletableFuture<Done> write(
      ActorSystem<Void> system, ActorRef<Writer.Command> w) {
    return AskPattern.<Writer.Command, Done>ask(w, Writer.Write::new, TIMEOUT, system.scheduler())
        .toCompletableFuture();
  }

  /** One entity's events whose ordering is not above that of its previous event. */
  private static final String OUT_OF_ORDER =
      "SELECT count(*) FROM (SELECT ordering, lag(ordering) OVER (PARTITION BY persistence_id"
          + " ORDER BY sequence_number) AS before FROM event_journal"
          + " WHERE persistence_id LIKE 'BatchTest|%') x WHERE x.before >= x.ordering";

  static long count(Statement st, String sql) throws Exception {
    try (ResultSet rs = st.executeQuery(sql)) {
      rs.next();
      return rs.getLong(1);
    }
  }

  /**
   * Persists one tagged event per write; counts its events; a snapshot every {@code snapshotEvery}
   * events if above 0 (RecoveryReadIntegrationTest recovers it).
   */
  static final class Writer extends EventSourcedBehavior<Writer.Command, Account.Captured, Long> {
    interface Command {}

    record Write(ActorRef<Done> replyTo) implements Command {}

    record Count(ActorRef<Long> replyTo) implements Command {}

    /** Persists {@code events} tagged events in one write. */
    record WriteMany(int events, ActorRef<Done> replyTo) implements Command {}

    /** Stops, answering once stopped. */
    record Stop(ActorRef<Done> replyTo) implements Command {}

    private final String id;
    private final Set<String> tags;
    private final int snapshotEvery;

    Writer(String id, boolean twice) {
      this(id, twice, 0);
    }

    Writer(String id, boolean twice, int snapshotEvery) {
      super(PersistenceId.of("BatchTest", id));
      this.id = id;
      this.tags =
          twice ? Set.of("batch-test-" + id, "batch-test-twice") : Set.of("batch-test-" + id);
      this.snapshotEvery = snapshotEvery;
    }

    @Override
    public RetentionCriteria retentionCriteria() {
      return snapshotEvery > 0
          ? RetentionCriteria.snapshotEvery(snapshotEvery, 2)
          : RetentionCriteria.disabled();
    }

    @Override
    public Long emptyState() {
      return 0L;
    }

    @Override
    public Set<String> tagsFor(Account.Captured event) {
      return tags;
    }

    @Override
    public CommandHandler<Command, Account.Captured, Long> commandHandler() {
      return newCommandHandlerBuilder()
          .forAnyState()
          .onCommand(
              Write.class,
              (state, cmd) ->
                  Effect()
                      .persist(
                          new Account.Captured(
                              id, state + 1, 803 * (state + 1), 8030, Instant.now()))
                      .thenReply(cmd.replyTo(), s -> Done.getInstance()))
          .onCommand(
              WriteMany.class,
              (state, cmd) -> {
                List<Account.Captured> events = new ArrayList<>();
                for (long k = state + 1; k <= state + cmd.events(); k++)
                  events.add(new Account.Captured(id, k, 803 * k, 8030, Instant.now()));
                return Effect().persist(events).thenReply(cmd.replyTo(), s -> Done.getInstance());
              })
          .onCommand(Count.class, (state, cmd) -> Effect().reply(cmd.replyTo(), state))
          .onCommand(
              Stop.class,
              (state, cmd) -> Effect().stop().thenRun(s -> cmd.replyTo().tell(Done.getInstance())))
          .build();
    }

    @Override
    public EventHandler<Long, Account.Captured> eventHandler() {
      return newEventHandlerBuilder().forAnyState().onAnyEvent((state, e) -> state + 1);
    }
  }
}
