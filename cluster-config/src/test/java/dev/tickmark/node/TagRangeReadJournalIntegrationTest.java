package dev.tickmark.node;

import static dev.tickmark.node.Eventually.eventually;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.typesafe.config.ConfigFactory;
import dev.tickmark.persistence.Migrations;
import dev.tickmark.persistence.TestDatabase;
import dev.tickmark.persistence.journal.TagRangeReadJournalDao;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.apache.pekko.Done;
import org.apache.pekko.actor.testkit.typed.javadsl.TestProbe;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.Props;
import org.apache.pekko.actor.typed.javadsl.AskPattern;
import org.apache.pekko.persistence.jdbc.config.ReadJournalConfig;
import org.apache.pekko.persistence.query.EventEnvelope;
import org.apache.pekko.persistence.query.Offset;
import org.apache.pekko.persistence.query.PersistenceQuery;
import org.apache.pekko.persistence.query.Sequence;
import org.apache.pekko.stream.javadsl.Sink;
import org.apache.pekko.stream.javadsl.Source;
import org.junit.jupiter.api.Test;

/**
 * The projections read events by tag through {@link TagRangeReadJournalDao}: each query reads the
 * tag's own rows in the offset range by the {@code (tag, event_id)} index, and returns exactly what
 * the plugin's query returned: the tag's events after the offset, in journal order, paged by the
 * read journal's buffer.
 */
class TagRangeReadJournalIntegrationTest {
  private static final Duration TIMEOUT = Duration.ofSeconds(30);

  @Test
  void eventsByTagReturnsTheTagsOwnEventsAfterTheOffsetInJournalOrder() throws Exception {
    var database = TestDatabase.fresh("tag_range_read");
    try (Node node =
        Node.start(TestNodes.settings(database).withConfig(JOURNAL, readJournal(Map.of())))) {
      ActorSystem<Void> system = node.system();
      assertEquals(
          TagRangeReadJournalDao.class.getName(),
          system.settings().config().getString("jdbc-read-journal.dao"));

      // Four writers tag every event "batch-test-twice" too, 160 each, interleaved with 30 writers
      // of their own tag only: "batch-test-twice" has 640 events, more than the read journal's
      // buffer (500), so reading it takes more than one query.
      List<ActorRef<JournalBatchingIntegrationTest.Writer.Command>> both = new ArrayList<>();
      List<ActorRef<JournalBatchingIntegrationTest.Writer.Command>> own = new ArrayList<>();
      for (int i = 0; i < 4; i++) both.add(spawn(system, "both" + i, true));
      for (int i = 0; i < 30; i++) own.add(spawn(system, "own" + i, false));
      for (int round = 0; round < 160; round++) {
        List<CompletableFuture<Done>> acks = new ArrayList<>();
        for (var w : both) acks.add(write(system, w));
        if (round < 5) for (var w : own) acks.add(write(system, w));
        CompletableFuture.allOf(acks.toArray(CompletableFuture[]::new))
            .get(TIMEOUT.toSeconds(), TimeUnit.SECONDS);
      }

      long queriesBefore = dao(system, JOURNAL).tagQueries();
      List<EventEnvelope> twice = byTag(system, "batch-test-twice", Offset.noOffset());
      assertEquals(640, twice.size());
      assertTrue(
          dao(system, JOURNAL).tagQueries() - queriesBefore >= 2,
          "640 events are read in pages of at most 500");
      Map<String, Long> nextSeq = new HashMap<>();
      long previous = 0;
      for (EventEnvelope e : twice) {
        long offset = ((Sequence) e.offset()).value();
        assertTrue(offset > previous, "journal order: " + offset + " after " + previous);
        previous = offset;
        assertTrue(e.persistenceId().startsWith("BatchTest|both"), e.persistenceId());
        long expected = nextSeq.merge(e.persistenceId(), 1L, Long::sum);
        assertEquals(expected, e.sequenceNr(), "one writer's events in order");
      }
      assertEquals(4, nextSeq.size());

      List<EventEnvelope> one = byTag(system, "batch-test-own7", Offset.noOffset());
      assertEquals(5, one.size());
      for (int k = 0; k < 5; k++) {
        assertEquals("BatchTest|own7", one.get(k).persistenceId());
        assertEquals(k + 1, one.get(k).sequenceNr());
      }
      // After an offset: only the events after it (the offset is exclusive).
      long third = ((Sequence) one.get(2).offset()).value();
      List<EventEnvelope> after = byTag(system, "batch-test-own7", Offset.sequence(third));
      assertEquals(List.of(4L, 5L), after.stream().map(EventEnvelope::sequenceNr).toList());
      long last = ((Sequence) twice.get(twice.size() - 1).offset()).value();
      assertTrue(byTag(system, "batch-test-twice", Offset.sequence(last)).isEmpty());
      assertTrue(byTag(system, "batch-test-nobody", Offset.noOffset()).isEmpty());
    }
  }

  /**
   * A live query polls every {@code refresh-interval}, up to the highest ordering its journal
   * sequence actor has seen. Once it has read up to there, and until that moves, its range is
   * empty: those polls are answered without PostgreSQL. (Here the actor looks once, at start, so
   * the highest ordering never moves; in a node it moves once a {@code query-delay}.) A range with
   * something in it is still read.
   */
  @Test
  void aLiveQueryThatHasReadEverythingAsksPostgresqlNothingUntilThereIsMore() throws Exception {
    var database = TestDatabase.fresh("tag_range_idle");
    String journalId = "tag-range-idle-read-journal";
    Map<String, Object> plugin =
        readJournal(
            Map.of("refresh-interval", "20ms", "journal-sequence-retrieval.query-delay", "1h"));
    try (Node node = Node.start(TestNodes.settings(database).withConfig(journalId, plugin))) {
      ActorSystem<Void> system = node.system();
      ActorRef<JournalBatchingIntegrationTest.Writer.Command> writer = spawn(system, "idle", false);
      for (int i = 0; i < 3; i++) write(system, writer).get(TIMEOUT.toSeconds(), TimeUnit.SECONDS);

      TagRangeReadJournalDao dao = dao(system, journalId);
      TestProbe<EventEnvelope> seen = TestProbe.create(system);
      Source.fromGraph(journal(system, journalId).eventsByTag("batch-test-idle", Offset.noOffset()))
          .to(Sink.foreach(seen.ref()::tell))
          .run(system);
      for (long seq = 1; seq <= 3; seq++)
        assertEquals(seq, seen.expectMessageClass(EventEnvelope.class, TIMEOUT).sequenceNr());

      // Read up to the highest ordering: from here on every poll is an empty range.
      long skippedAtFirst = dao.skippedTagQueries();
      eventually(
          TIMEOUT, () -> assertTrue(dao.skippedTagQueries() >= skippedAtFirst + 2, "empty polls"));
      long queries = dao.tagQueries();
      long skipped = dao.skippedTagQueries();
      eventually(TIMEOUT, () -> assertTrue(dao.skippedTagQueries() >= skipped + 20, "empty polls"));
      assertEquals(queries, dao.tagQueries(), "20 polls of an empty range, no query");
      seen.expectNoMessage(Duration.ZERO);

      // The same range through the DAO itself, and one with events in it.
      long max = Long.MAX_VALUE;
      assertEquals(0, read(system, dao, "batch-test-idle", max, max).size());
      assertEquals(queries, dao.tagQueries());
      assertEquals(3, read(system, dao, "batch-test-idle", 0, max).size());
      assertEquals(queries + 1, dao.tagQueries());
    }
  }

  /**
   * The point of the DAO: a slice's query does not scan {@code event_tag}, for a tag with no events
   * (most slices most of the time) nor for a busy one, with the statistics of a 60,000-event
   * journal and with the generic plan a prepared statement falls back to.
   */
  @Test
  void aTagsQueryDoesNotScanTheTagTable() throws Exception {
    var database = TestDatabase.fresh("tag_range_plan");
    Migrations.migrate(database);
    try (Connection c =
            DriverManager.getConnection(database.url(), database.user(), database.password());
        Statement st = c.createStatement()) {
      st.execute(
          "INSERT INTO event_journal (persistence_id, sequence_number, writer, write_timestamp,"
              + " adapter_manifest, event_ser_id, event_ser_manifest, event_payload)"
              + " SELECT 'Plan|' || (i % 600), i / 600 + 1, 'w', 0, '', 1, 'm', '\\x00'::bytea"
              + " FROM generate_series(0, 59999) AS i");
      st.execute(
          "INSERT INTO event_tag (event_id, tag) SELECT ordering, 'slice-' || (ordering % 4)"
              + " FROM event_journal");
      st.execute("ANALYZE event_journal, event_tag");

      String sql =
          TagRangeReadJournalDao.eventsByTagSql(
              new ReadJournalConfig(ConfigFactory.load().getConfig("jdbc-read-journal")));
      // Over the last 1,000 events: a tag without events, and one with a quarter of them.
      for (String tag : List.of("slice-9", "slice-1")) {
        String custom = plan(st, "EXPLAIN " + bound(sql, "'" + tag + "'", "59000", "60000", "500"));
        assertFalse(custom.contains("Seq Scan on event_tag"), tag + ":\n" + custom);
      }
      // A slice catching up from the start, for a tag without events.
      String catchingUp = plan(st, "EXPLAIN " + bound(sql, "'slice-9'", "0", "60000", "500"));
      assertFalse(catchingUp.contains("Seq Scan on event_tag"), catchingUp);
      st.execute(
          "PREPARE by_tag (varchar, bigint, bigint, bigint) AS "
              + bound(sql, "$1", "$2", "$3", "$4"));
      st.execute("SET plan_cache_mode = force_generic_plan");
      for (String tag : List.of("slice-9", "slice-1")) {
        String generic = plan(st, "EXPLAIN EXECUTE by_tag('" + tag + "', 59000, 60000, 500)");
        assertFalse(generic.contains("Seq Scan on event_tag"), tag + " (generic):\n" + generic);
      }
    }
  }

  /** The query with its four parameters written in (EXPLAIN takes no bind parameters). */
  private static String bound(String sql, String... values) {
    for (String v : values)
      sql = sql.replaceFirst("\\?", java.util.regex.Matcher.quoteReplacement(v));
    return sql;
  }

  private static String plan(Statement st, String explain) throws Exception {
    StringBuilder plan = new StringBuilder();
    try (ResultSet rs = st.executeQuery(explain)) {
      while (rs.next()) plan.append(rs.getString(1)).append('\n');
    }
    return plan.toString();
  }

  /**
   * A read journal of the tests' own, configured as the node's with {@code overrides}, which they
   * use through the Scala API alone: its DAO's counts are then theirs alone. (The node's
   * projections use {@code jdbc-read-journal} through the Java API, which makes an instance of its
   * own.)
   */
  private static final String JOURNAL = "tag-range-read-journal";

  private static Map<String, Object> readJournal(Map<String, String> overrides) {
    return ConfigFactory.parseMap(overrides)
        .withFallback(ConfigFactory.load().getConfig("jdbc-read-journal"))
        .root()
        .unwrapped();
  }

  private static org.apache.pekko.persistence.jdbc.query.scaladsl.JdbcReadJournal journal(
      ActorSystem<Void> system, String journalId) {
    return PersistenceQuery.get(system.classicSystem()).readJournalFor(journalId);
  }

  private static TagRangeReadJournalDao dao(ActorSystem<Void> system, String journalId) {
    return (TagRangeReadJournalDao) journal(system, journalId).readJournalDao();
  }

  private static List<?> read(
      ActorSystem<Void> system, TagRangeReadJournalDao dao, String tag, long from, long to)
      throws Exception {
    return Source.fromGraph(dao.eventsByTag(tag, from, to, 500))
        .runWith(Sink.seq(), system)
        .toCompletableFuture()
        .get(TIMEOUT.toSeconds(), TimeUnit.SECONDS);
  }

  private static List<EventEnvelope> byTag(ActorSystem<Void> system, String tag, Offset from)
      throws Exception {
    return Source.fromGraph(journal(system, JOURNAL).currentEventsByTag(tag, from))
        .runWith(Sink.seq(), system)
        .toCompletableFuture()
        .get(TIMEOUT.toSeconds(), TimeUnit.SECONDS);
  }

  private static ActorRef<JournalBatchingIntegrationTest.Writer.Command> spawn(
      ActorSystem<Void> system, String id, boolean twice) {
    return system.systemActorOf(
        new JournalBatchingIntegrationTest.Writer(id, twice), "tag-range-" + id, Props.empty());
  }

  private static CompletableFuture<Done> write(
      ActorSystem<Void> system, ActorRef<JournalBatchingIntegrationTest.Writer.Command> w) {
    return AskPattern.<JournalBatchingIntegrationTest.Writer.Command, Done>ask(
            w, JournalBatchingIntegrationTest.Writer.Write::new, TIMEOUT, system.scheduler())
        .toCompletableFuture();
  }
}
