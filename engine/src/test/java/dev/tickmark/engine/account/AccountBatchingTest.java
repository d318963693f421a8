package dev.tickmark.engine.account;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.tickmark.engine.TestClock;
import dev.tickmark.engine.account.Account.Capture;
import dev.tickmark.engine.account.Account.CreditEarnings;
import dev.tickmark.engine.account.Account.Deposit;
import dev.tickmark.engine.account.Account.GetSummary;
import dev.tickmark.engine.account.Account.Open;
import dev.tickmark.engine.account.Account.PlaceHold;
import dev.tickmark.engine.account.Account.Posting;
import dev.tickmark.engine.account.Account.Summary;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.apache.pekko.Done;
import org.apache.pekko.actor.testkit.typed.annotations.JUnit5TestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.JUnit5TestKitBuilder;
import org.apache.pekko.actor.testkit.typed.javadsl.TestKitJUnit5Extension;
import org.apache.pekko.actor.testkit.typed.javadsl.TestProbe;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.pattern.StatusReply;
import org.apache.pekko.persistence.testkit.JournalOperation;
import org.apache.pekko.persistence.testkit.ProcessingResult;
import org.apache.pekko.persistence.testkit.ProcessingSuccess$;
import org.apache.pekko.persistence.testkit.WriteEvents;
import org.apache.pekko.persistence.testkit.javadsl.PersistenceTestKit;
import org.apache.pekko.persistence.typed.PersistenceId;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Settlement postings that reach an account together are written together (one journal write, not
 * one each), answered only once written, and never reordered with the other commands around them.
 * Single entity on the testkit's in-memory journal, whose policy hook shows each write's size.
 */
@ExtendWith(TestKitJUnit5Extension.class)
class AccountBatchingTest {
  @JUnit5TestKit
  final ActorTestKit testKit =
      new JUnit5TestKitBuilder()
          .withName("AccountBatchingTest")
          .withCustomConfig(AccountTest.CONFIG)
          .build();

  static final Duration WAIT = Duration.ofSeconds(10);

  /** Sizes of the writes to one persistence id, in order. */
  static List<Integer> recordWrites(PersistenceTestKit journal, String persistenceId) {
    List<Integer> writes = Collections.synchronizedList(new ArrayList<>());
    journal.withPolicy(
        (String pid, JournalOperation op) -> {
          if (pid.equals(persistenceId) && op instanceof WriteEvents w)
            writes.add(w.batch().size());
          return (ProcessingResult) ProcessingSuccess$.MODULE$;
        });
    return writes;
  }

  @Test
  void creditsArrivingTogetherAreOneWriteAndACommandBetweenThemSeesExactlyThoseBeforeIt() {
    String id = "acc-batch-1";
    PersistenceTestKit journal = PersistenceTestKit.create(testKit.system());
    List<Integer> writes =
        recordWrites(journal, PersistenceId.of(Account.ENTITY_KEY.name(), id).id());
    ActorRef<Account.Command> account =
        testKit.spawn(Account.create(id, new TestClock(Instant.parse("2026-11-30T10:00:00Z"))));
    TestProbe<StatusReply<Summary>> opened = testKit.createTestProbe();
    TestProbe<StatusReply<Posting>> postings = testKit.createTestProbe();
    TestProbe<Summary> summaries = testKit.createTestProbe();

    // All sent at once: while Opened is being written they wait in the entity's stash, then arrive
    // together.
    account.tell(new Open("Provider", opened.ref()));
    long before = 0;
    for (int i = 0; i < 300; i++) {
      if (i == 150) account.tell(new GetSummary(summaries.ref()));
      account.tell(new CreditEarnings("rnt-" + i, 10, 850 + i, 150, false, postings.ref()));
      if (i < 150) before += 850 + i;
    }
    assertTrue(opened.expectMessageClass(StatusReply.class, WAIT).isSuccess());
    Set<String> keys = new HashSet<>();
    for (int i = 0; i < 300; i++) {
      StatusReply<Posting> reply = postings.expectMessageClass(StatusReply.class, WAIT);
      assertTrue(reply.isSuccess(), reply.toString());
      assertFalse(reply.getValue().duplicate());
      assertTrue(keys.add(reply.getValue().key()));
    }
    Summary between = summaries.expectMessageClass(Summary.class, WAIT);
    assertEquals(
        before, between.credited(), "the summary sent after 150 credits shows exactly those 150");

    account.tell(new GetSummary(summaries.ref()));
    long all = 0;
    for (int i = 0; i < 300; i++) all += 850 + i;
    assertEquals(all, summaries.expectMessageClass(Summary.class, WAIT).credited());
    assertEquals(
        301,
        writes.stream().mapToInt(Integer::intValue).sum(),
        "Opened and 300 credits: " + writes);
    assertTrue(writes.size() <= 10, "credits written in a few writes, not one each: " + writes);
    assertEquals(1, (int) writes.get(0), "Opened alone first: " + writes);
    assertEquals(
        301,
        journal.persistedInStorage(PersistenceId.of(Account.ENTITY_KEY.name(), id).id()).size());
  }

  @Test
  void forgettingClosedRentalsGoesInTheSameWritesAsTheCreditsAroundIt() {
    String id = "acc-batch-3";
    PersistenceTestKit journal = PersistenceTestKit.create(testKit.system());
    String persistenceId = PersistenceId.of(Account.ENTITY_KEY.name(), id).id();
    List<Integer> writes = recordWrites(journal, persistenceId);
    ActorRef<Account.Command> account =
        testKit.spawn(Account.create(id, new TestClock(Instant.parse("2026-11-30T10:00:00Z"))));
    TestProbe<StatusReply<Summary>> opened = testKit.createTestProbe();
    TestProbe<StatusReply<Posting>> postings = testKit.createTestProbe();
    TestProbe<Done> forgets = testKit.createTestProbe();

    // 100 rentals each settle for the last time and close, all in one burst: final credit, then
    // forget.
    account.tell(new Open("Provider", opened.ref()));
    for (int i = 0; i < 100; i++) {
      account.tell(new CreditEarnings("rnt-" + i, 10, 850, 150, true, postings.ref()));
      account.tell(new Account.ForgetClosed("rnt-" + i, forgets.ref()));
    }
    assertTrue(opened.expectMessageClass(StatusReply.class, WAIT).isSuccess());
    for (int i = 0; i < 100; i++) {
      assertTrue(postings.expectMessageClass(StatusReply.class, WAIT).isSuccess());
      forgets.expectMessage(WAIT, Done.getInstance());
    }
    assertEquals(
        201,
        writes.stream().mapToInt(Integer::intValue).sum(),
        "Opened, 100 credits, 100 forgets: " + writes);
    assertTrue(writes.size() <= 10, "written together, not one each: " + writes);
    List<Object> events = journal.persistedInStorage(persistenceId);
    assertEquals(100, events.stream().filter(e -> e instanceof Account.ClosedForgotten).count());
    TestProbe<Summary> summaries = testKit.createTestProbe();
    account.tell(new GetSummary(summaries.ref()));
    assertEquals(
        85_000,
        summaries.expectMessageClass(Summary.class, WAIT).credited(),
        "forgetting moves no money");
  }

  @Test
  void duplicatesAndConflictsInsideABatchAnswerAsTheyWouldOneByOne() {
    String id = "acc-batch-2";
    ActorRef<Account.Command> account =
        testKit.spawn(Account.create(id, new TestClock(Instant.parse("2026-11-30T10:00:00Z"))));
    TestProbe<StatusReply<Summary>> opened = testKit.createTestProbe();
    TestProbe<StatusReply<Posting>> postings = testKit.createTestProbe();
    TestProbe<StatusReply<Account.HoldView>> holds = testKit.createTestProbe();
    account.tell(new Open("Renter", opened.ref()));
    account.tell(new Deposit("pay-1", 10_000, postings.ref()));
    account.tell(new PlaceHold("rnt-a", 1_000, holds.ref()));
    assertTrue(opened.expectMessageClass(StatusReply.class, WAIT).isSuccess());
    assertTrue(postings.expectMessageClass(StatusReply.class, WAIT).isSuccess());
    assertTrue(holds.expectMessageClass(StatusReply.class, WAIT).isSuccess());

    // One burst: a capture, its exact duplicate, a later one, an older one claiming more, one
    // beyond the hold.
    account.tell(new Capture("rnt-a", 10, 100, postings.ref()));
    account.tell(new Capture("rnt-a", 10, 100, postings.ref()));
    account.tell(new Capture("rnt-a", 20, 250, postings.ref()));
    account.tell(new Capture("rnt-a", 15, 999, postings.ref()));
    account.tell(new Capture("rnt-a", 30, 5_000, postings.ref()));
    StatusReply<Posting> first = postings.expectMessageClass(StatusReply.class, WAIT);
    StatusReply<Posting> duplicate = postings.expectMessageClass(StatusReply.class, WAIT);
    StatusReply<Posting> later = postings.expectMessageClass(StatusReply.class, WAIT);
    StatusReply<Posting> older = postings.expectMessageClass(StatusReply.class, WAIT);
    StatusReply<Posting> beyond = postings.expectMessageClass(StatusReply.class, WAIT);
    assertEquals(new Posting("rnt-a:10", 100, false), first.getValue());
    assertEquals(
        new Posting("rnt-a:10", 100, true),
        duplicate.getValue(),
        "the duplicate of a posting in the same batch");
    assertEquals(new Posting("rnt-a:20", 150, false), later.getValue());
    assertTrue(
        older.isError() && older.getError().getMessage().contains("older"), older.toString());
    assertTrue(beyond.isError(), "5,000 exceeds the 1,000 hold: " + beyond);

    TestProbe<Summary> summaries = testKit.createTestProbe();
    account.tell(new GetSummary(summaries.ref()));
    Summary summary = summaries.expectMessageClass(Summary.class, WAIT);
    assertEquals(250, summary.captured());
    assertEquals(10_000 - 250, summary.balance());
  }
}
