package dev.tickmark.engine.account;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import dev.tickmark.engine.Rejection;
import dev.tickmark.engine.TestClock;
import dev.tickmark.engine.account.Account.Command;
import dev.tickmark.engine.account.Account.Event;
import dev.tickmark.engine.account.Account.HoldConfirmed;
import dev.tickmark.engine.account.Account.HoldExpired;
import dev.tickmark.engine.account.Account.HoldPlaced;
import dev.tickmark.engine.account.Account.HoldView;
import dev.tickmark.engine.account.Account.State;
import dev.tickmark.engine.account.Account.Summary;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.pekko.actor.testkit.typed.annotations.JUnit5TestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.JUnit5TestKitBuilder;
import org.apache.pekko.actor.testkit.typed.javadsl.TestKitJUnit5Extension;
import org.apache.pekko.actor.testkit.typed.javadsl.TestProbe;
import org.apache.pekko.pattern.StatusReply;
import org.apache.pekko.persistence.testkit.javadsl.EventSourcedBehaviorTestKit;
import org.apache.pekko.persistence.testkit.javadsl.EventSourcedBehaviorTestKit.CommandResultWithReply;
import org.apache.pekko.persistence.testkit.javadsl.PersistenceTestKit;
import org.apache.pekko.persistence.typed.PersistenceId;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Pending holds (issue 15, decision 1): a launch asks for its hold before it has recorded anything,
 * so a hold its rental never confirms goes back to the balance by itself, exactly once, and a
 * confirmation that comes after that is refused. The expiry runs on the account's own timer (real
 * time) against its clock (moved by hand here).
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@ExtendWith(TestKitJUnit5Extension.class)
class AccountPendingHoldTest {
  static final Config CONFIG =
      EventSourcedBehaviorTestKit.config().withFallback(ConfigFactory.load());

  @JUnit5TestKit
  final ActorTestKit testKit =
      new JUnit5TestKitBuilder()
          .withName("AccountPendingHoldTest")
          .withCustomConfig(CONFIG)
          .build();

  private static final AtomicInteger IDS = new AtomicInteger();
  private static final Instant START = Instant.parse("2025-03-14T10:00:00Z");
  private static final long DEPOSIT = 10_000_000;
  private static final long HOLD = 500_000;
  private static final Duration WITHIN = Duration.ofSeconds(60);
  private static final Duration WAIT = Duration.ofSeconds(10);

  private TestClock clock;
  private String accountId;
  private EventSourcedBehaviorTestKit<Command, Event, State> kit;

  @BeforeEach
  void fundedAccount() {
    clock = new TestClock(START);
    accountId = "acc-pending-" + IDS.incrementAndGet();
    kit = EventSourcedBehaviorTestKit.create(testKit.system(), Account.create(accountId, clock));
    kit.<StatusReply<Summary>>runCommand(replyTo -> new Account.Open("Ada", replyTo));
    kit.<StatusReply<Account.Posting>>runCommand(
        replyTo -> new Account.Deposit("dep-1", DEPOSIT, replyTo));
  }

  @Test
  void aPendingHoldNobodyConfirmsGoesBackExactlyOnceAndALateConfirmationIsRefused() {
    HoldView placed = ok(placePending("r-1"));
    assertEquals(new HoldView("r-1", HOLD, 0, 0, true), placed);
    assertEquals(
        List.of(new HoldPlaced("r-1", HOLD, START, START.plus(WITHIN))), events(HoldPlaced.class));
    assertEquals(HOLD, summary().held());

    // Not yet due: the account keeps it (it looks again at least every second).
    clock.advance(WITHIN.minusSeconds(1));
    testKit.createTestProbe().expectNoMessage(Duration.ofMillis(1_200)); // one look, at least
    assertEquals(HOLD, summary().held());
    assertTrue(events(HoldExpired.class).isEmpty());

    clock.advance(Duration.ofSeconds(1));
    HoldExpired expired = awaitOne(HoldExpired.class);
    assertEquals(new HoldExpired("r-1", HOLD, START.plus(WITHIN)), expired);
    Summary after = summary();
    assertEquals(0, after.held());
    assertEquals(DEPOSIT, after.available());
    assertEquals(DEPOSIT, after.balance());

    // The rental's confirmation comes too late: refused, nothing booked again.
    assertRejected(Rejection.HOLD_EXPIRED, confirm("r-1"));
    assertEquals(0, summary().held());

    // A restart neither expires it again nor brings it back.
    kit.restart();
    clock.advance(WITHIN.multipliedBy(2));
    assertEquals(0, summary().held());
    assertEquals(1, events(HoldExpired.class).size(), "released exactly once");
    assertEquals(DEPOSIT, summary().available());
  }

  @Test
  void aConfirmedHoldStaysAndConfirmingAgainAnswersAsItStands() {
    ok(placePending("r-2"));
    HoldView confirmed = ok(confirm("r-2"));
    assertEquals(new HoldView("r-2", HOLD, 0, 0, true), confirmed);
    assertEquals(List.of(new HoldConfirmed("r-2", START)), events(HoldConfirmed.class));

    var again = confirm("r-2");
    assertEquals(confirmed, ok(again));
    assertTrue(again.hasNoEvents(), "a second confirmation writes nothing");

    clock.advance(WITHIN.multipliedBy(3));
    // Nothing expires however long one waits (an unconfirmed hold would within a second's look).
    TestProbe<Object> probe = testKit.createTestProbe();
    probe.expectNoMessage(Duration.ofMillis(1_200));
    assertEquals(HOLD, summary().held());
    assertTrue(events(HoldExpired.class).isEmpty());
  }

  @Test
  void aConfirmedPlacementOverAPendingHoldConfirmsItAndACaptureDoesToo() {
    ok(placePending("r-3"));
    var placedAgain =
        kit.<StatusReply<HoldView>>runCommand(r -> new Account.PlaceHold("r-3", HOLD, r));
    assertEquals(new HoldView("r-3", HOLD, 0, 0, true), ok(placedAgain));
    assertEquals(List.of(new HoldConfirmed("r-3", START)), placedAgain.events());

    ok(placePending("r-4"));
    ok(kit.<StatusReply<Account.Posting>>runCommand(r -> new Account.Capture("r-4", 10, 1_000, r)));
    clock.advance(WITHIN.multipliedBy(2));
    TestProbe<Object> probe = testKit.createTestProbe();
    probe.expectNoMessage(Duration.ofMillis(1_200)); // past one look of the account
    assertTrue(events(HoldExpired.class).isEmpty(), "a hold in use never expires");
    assertEquals(2 * HOLD - 1_000, summary().held());
  }

  /**
   * Simulation seed 16 (clock steps back, snapshots): a launch's pending hold lost every answer,
   * then the wall clock stepped back an hour. The expiry instant, on that clock, was an hour away
   * again; the hold's window is timed in real time as well, so the money goes back when the window
   * is over, and a late confirmation is refused.
   */
  @Test
  void aClockSteppedBackDoesNotKeepAPendingHoldPastItsWindow() {
    ok(
        kit.<StatusReply<HoldView>>runCommand(
            r -> new Account.PlaceHold("r-7", HOLD, Duration.ofMillis(500), r)));
    clock.advance(Duration.ofHours(-1));
    HoldExpired expired = awaitOne(HoldExpired.class);
    assertEquals(new HoldExpired("r-7", HOLD, START.minus(Duration.ofHours(1))), expired);
    assertEquals(0, summary().held());
    assertRejected(Rejection.HOLD_EXPIRED, confirm("r-7"));
    assertEquals(1, events(HoldExpired.class).size(), "released exactly once");
  }

  @Test
  void aPendingHoldStillExpiresAfterTheAccountRestarts() {
    ok(placePending("r-5"));
    kit.restart(); // the timer is the incarnation's: recovery sets it again
    clock.advance(WITHIN);
    assertEquals(new HoldExpired("r-5", HOLD, START.plus(WITHIN)), awaitOne(HoldExpired.class));
    assertEquals(0, summary().held());
  }

  @Test
  void aLatePendingPlacementAfterTheExpiryOpensAHoldThatExpiresAgain() {
    // A duplicate of the launch's PlaceHold delivered after the expiry: it is a hold again,
    // pending, that goes back the same way; never two at once.
    ok(placePending("r-6"));
    clock.advance(WITHIN);
    awaitOne(HoldExpired.class);
    ok(placePending("r-6"));
    assertEquals(HOLD, summary().held());
    assertEquals(2, events(HoldPlaced.class).size());
    clock.advance(WITHIN);
    testKit
        .createTestProbe()
        .awaitAssert(
            WAIT,
            () -> {
              assertEquals(2, events(HoldExpired.class).size());
              return null;
            });
    assertEquals(0, summary().held());
    assertFalse(events(HoldExpired.class).isEmpty());
  }

  // ---------------------------------------------------------------------------------------------

  private CommandResultWithReply<Command, Event, State, StatusReply<HoldView>> placePending(
      String holdId) {
    return kit.runCommand(replyTo -> new Account.PlaceHold(holdId, HOLD, WITHIN, replyTo));
  }

  private CommandResultWithReply<Command, Event, State, StatusReply<HoldView>> confirm(
      String holdId) {
    return kit.runCommand(replyTo -> new Account.ConfirmHold(holdId, replyTo));
  }

  private Summary summary() {
    return kit.<Summary>runCommand(Account.GetSummary::new).reply();
  }

  private List<Event> events() {
    List<Event> events = new ArrayList<>();
    for (Object o :
        PersistenceTestKit.create(testKit.system())
            .persistedInStorage(PersistenceId.of(Account.ENTITY_KEY.name(), accountId).id()))
      events.add((Event) o);
    return events;
  }

  private <E extends Event> List<E> events(Class<E> type) {
    return events().stream().filter(type::isInstance).map(type::cast).toList();
  }

  private <E extends Event> E awaitOne(Class<E> type) {
    return testKit
        .createTestProbe()
        .awaitAssert(
            WAIT,
            () -> {
              List<E> found = events(type);
              assertEquals(1, found.size(), () -> "one " + type.getSimpleName() + ": " + events());
              return found.get(0);
            });
  }

  private static <T> T ok(CommandResultWithReply<Command, Event, State, StatusReply<T>> result) {
    StatusReply<T> reply = result.reply();
    assertTrue(reply.isSuccess(), () -> result.command() + " refused: " + reply.getError());
    return reply.getValue();
  }

  private static void assertRejected(
      Rejection code,
      CommandResultWithReply<Command, Event, State, ? extends StatusReply<?>> result) {
    StatusReply<?> reply = result.reply();
    assertTrue(reply.isError(), () -> "expected " + code + ", got " + reply);
    assertEquals(code, Rejection.codeOf(reply.getError().getMessage()));
    assertTrue(result.hasNoEvents());
  }
}
