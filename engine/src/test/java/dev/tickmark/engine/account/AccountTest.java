package dev.tickmark.engine.account;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import dev.tickmark.engine.Rejection;
import dev.tickmark.engine.TestClock;
import dev.tickmark.engine.account.Account.Active;
import dev.tickmark.engine.account.Account.Capture;
import dev.tickmark.engine.account.Account.Captured;
import dev.tickmark.engine.account.Account.Command;
import dev.tickmark.engine.account.Account.CreditEarnings;
import dev.tickmark.engine.account.Account.Deposit;
import dev.tickmark.engine.account.Account.Deposited;
import dev.tickmark.engine.account.Account.EarningsCredited;
import dev.tickmark.engine.account.Account.Event;
import dev.tickmark.engine.account.Account.ExtendHold;
import dev.tickmark.engine.account.Account.GetHold;
import dev.tickmark.engine.account.Account.GetSummary;
import dev.tickmark.engine.account.Account.Hold;
import dev.tickmark.engine.account.Account.HoldExtended;
import dev.tickmark.engine.account.Account.HoldPlaced;
import dev.tickmark.engine.account.Account.HoldReleased;
import dev.tickmark.engine.account.Account.HoldView;
import dev.tickmark.engine.account.Account.Open;
import dev.tickmark.engine.account.Account.Opened;
import dev.tickmark.engine.account.Account.PaidOut;
import dev.tickmark.engine.account.Account.Payout;
import dev.tickmark.engine.account.Account.PlaceHold;
import dev.tickmark.engine.account.Account.Posting;
import dev.tickmark.engine.account.Account.ReleaseHold;
import dev.tickmark.engine.account.Account.SetSpendCap;
import dev.tickmark.engine.account.Account.SourceMark;
import dev.tickmark.engine.account.Account.SpendCapSet;
import dev.tickmark.engine.account.Account.State;
import dev.tickmark.engine.account.Account.Summary;
import dev.tickmark.engine.account.Account.Unopened;
import dev.tickmark.engine.money.Metering;
import dev.tickmark.engine.money.Money;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.pekko.Done;
import org.apache.pekko.actor.testkit.typed.annotations.JUnit5TestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.JUnit5TestKitBuilder;
import org.apache.pekko.actor.testkit.typed.javadsl.SerializationTestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.TestKitJUnit5Extension;
import org.apache.pekko.actor.testkit.typed.javadsl.TestProbe;
import org.apache.pekko.actor.typed.javadsl.Adapter;
import org.apache.pekko.pattern.StatusReply;
import org.apache.pekko.persistence.testkit.javadsl.EventSourcedBehaviorTestKit;
import org.apache.pekko.persistence.testkit.javadsl.EventSourcedBehaviorTestKit.CommandResultWithReply;
import org.apache.pekko.persistence.typed.PersistenceId;
import org.apache.pekko.serialization.Serialization;
import org.apache.pekko.serialization.SerializationExtension;
import org.apache.pekko.serialization.jackson.JacksonCborSerializer;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * One rule of the {@link Account} entity per test, through {@link EventSourcedBehaviorTestKit},
 * which also round-trips every command, event and state through the configured (jackson-cbor)
 * serializer.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@ExtendWith(TestKitJUnit5Extension.class)
class AccountTest {
  /**
   * The testkit's in-memory journal and snapshot store must win over the empty plugin ids of
   * pekko-persistence's reference.conf, so they come first; application.conf (test resources)
   * supplies the serialization bindings.
   */
  static final Config CONFIG =
      EventSourcedBehaviorTestKit.config().withFallback(ConfigFactory.load());

  @JUnit5TestKit
  final ActorTestKit testKit =
      new JUnit5TestKitBuilder().withName("AccountTest").withCustomConfig(CONFIG).build();

  private static final AtomicInteger IDS = new AtomicInteger();
  private static final Instant START = Instant.parse("2025-03-14T10:00:00Z");

  private TestClock clock;
  private String accountId;
  private EventSourcedBehaviorTestKit<Command, Event, State> kit;

  @BeforeEach
  void freshAccount() {
    clock = new TestClock(START);
    accountId = "acc-" + IDS.incrementAndGet();
    kit = EventSourcedBehaviorTestKit.create(testKit.system(), Account.create(accountId, clock));
  }

  // ---------------------------------------------------------------------------------------------
  // Lifecycle

  @Test
  void opensOnceAndRejectsSecondOpenWithOtherName() {
    var opened = open("Ada");
    Summary summary = ok(opened);
    assertEquals(
        new Summary(accountId, true, "Ada", 0, 0, 0, 0, null, 0, 0, 0, 0, 0, 0, null, null),
        summary);
    assertEquals(new Opened("Ada", START), opened.event());
    assertRecovers();

    var again = open("Ada");
    assertTrue(again.hasNoEvents());
    assertEquals(summary, ok(again));

    assertRejected(Rejection.ALREADY_EXISTS, open("Bob"));
    assertEquals("Ada", summary().name());
  }

  @Test
  void rejectsOpenWithoutName() {
    assertRejected(Rejection.INVALID_NAME, open(""));
    assertRejected(Rejection.INVALID_NAME, open("   "));
    assertRejected(Rejection.INVALID_NAME, open(null));
    assertSame(Unopened.INSTANCE, kit.getState());
    assertFalse(summary().open());
  }

  @Test
  void rejectsCommandsOnUnopenedAccountWithNotFound() {
    assertRejected(Rejection.NOT_FOUND, deposit("p1", 1));
    assertRejected(Rejection.NOT_FOUND, placeHold("h1", 1));
    assertRejected(Rejection.NOT_FOUND, extendHold("h1", 2));
    assertRejected(Rejection.NOT_FOUND, capture("h1", 1, 1));
    assertRejected(Rejection.NOT_FOUND, release("h1"));
    assertRejected(Rejection.NOT_FOUND, credit("r1", 1, 1, 1, false));
    assertRejected(Rejection.NOT_FOUND, payout("po1", 1));
    assertRejected(Rejection.NOT_FOUND, setCap(100L));
    assertRejected(Rejection.NOT_FOUND, getHold("h1"));
    assertEquals(
        new Summary(accountId, false, null, 0, 0, 0, 0, null, 0, 0, 0, 0, 0, 0, null, null),
        summary());
    assertSame(Unopened.INSTANCE, kit.restart().state());
  }

  // ---------------------------------------------------------------------------------------------
  // Deposits

  @Test
  void depositIsIdempotentOnReference() {
    open("Ada");
    var first = deposit("pay-1", 20_000_000);
    assertEquals(new Posting("deposit:pay-1", 20_000_000, false), ok(first));
    assertEquals(new Deposited("pay-1", 20_000_000, START), first.event());
    assertRecovers();

    var replay = deposit("pay-1", 20_000_000);
    assertTrue(replay.hasNoEvents());
    assertEquals(new Posting("deposit:pay-1", 20_000_000, true), ok(replay));

    ok(deposit("pay-2", 5));
    Summary summary = summary();
    assertEquals(20_000_005, summary.balance());
    assertEquals(20_000_005, summary.available());
    assertEquals(20_000_005, summary.deposited());
  }

  @Test
  void depositReplayWithDifferentAmountIsIdempotencyConflict() {
    open("Ada");
    ok(deposit("pay-1", 20_000_000));
    assertRejected(Rejection.IDEMPOTENCY_CONFLICT, deposit("pay-1", 20_000_001));
    assertRejected(Rejection.IDEMPOTENCY_CONFLICT, deposit("pay-1", 0));
    assertEquals(20_000_000, summary().balance());
  }

  @Test
  void rejectsNonPositiveDeposit() {
    open("Ada");
    assertRejected(Rejection.INVALID_AMOUNT, deposit("zero", 0));
    assertRejected(Rejection.INVALID_AMOUNT, deposit("negative", -1));
    // a refused reference is not remembered: it may be used later with a valid amount
    assertEquals(new Posting("deposit:zero", 7, false), ok(deposit("zero", 7)));
  }

  @Test
  void rejectsDepositBeyondLargestAmount() {
    open("Ada");
    assertRejected(Rejection.AMOUNT_TOO_LARGE, deposit("huge", Money.MAX_AMOUNT + 1));
    ok(deposit("max", Money.MAX_AMOUNT - 10));
    assertRejected(Rejection.AMOUNT_TOO_LARGE, deposit("over", 11));
    ok(deposit("exact", 10));
    assertEquals(Money.MAX_AMOUNT, summary().balance());
  }

  // ---------------------------------------------------------------------------------------------
  // Holds

  @Test
  void placesHoldFromAvailableBalance() {
    open("Ada");
    ok(deposit("pay-1", 1_000));
    var placed = placeHold("r1", 400);
    assertEquals(new HoldView("r1", 400, 0, 0, true), ok(placed));
    assertEquals(new HoldPlaced("r1", 400, START), placed.event());
    assertRecovers();
    Summary summary = summary();
    assertEquals(1_000, summary.balance());
    assertEquals(400, summary.held());
    assertEquals(600, summary.available());
    assertEquals(new HoldView("r1", 400, 0, 0, true), ok(getHold("r1")));
    assertRejected(Rejection.HOLD_NOT_FOUND, getHold("nope"));
  }

  @Test
  void rejectsHoldAboveAvailableBalance() {
    open("Ada");
    ok(deposit("pay-1", 1_000));
    assertRejected(Rejection.INSUFFICIENT_FUNDS, placeHold("r1", 1_001));
    ok(placeHold("r1", 700));
    assertRejected(Rejection.INSUFFICIENT_FUNDS, placeHold("r2", 301));
    ok(placeHold("r2", 300));
    assertEquals(0, summary().available());
    assertRejected(Rejection.INSUFFICIENT_FUNDS, placeHold("r3", 1));
    assertRejected(Rejection.INSUFFICIENT_FUNDS, placeHold("r4", Long.MAX_VALUE));
  }

  @Test
  void rejectsNonPositiveHold() {
    open("Ada");
    ok(deposit("pay-1", 1_000));
    assertRejected(Rejection.INVALID_AMOUNT, placeHold("r1", 0));
    assertRejected(Rejection.INVALID_AMOUNT, placeHold("r1", -5));
    assertEquals(0, summary().held());
  }

  @Test
  void placeHoldReplayAnswersTheHoldAsItStands() {
    open("Ada");
    ok(deposit("pay-1", 1_000));
    ok(placeHold("r1", 400));
    var replay = placeHold("r1", 400);
    assertTrue(replay.hasNoEvents());
    assertEquals(new HoldView("r1", 400, 0, 0, true), ok(replay));
    assertRejected(Rejection.IDEMPOTENCY_CONFLICT, placeHold("r1", 401));

    ok(extendHold("r1", 600));
    // the original request still answers the (grown) hold
    assertEquals(new HoldView("r1", 600, 0, 0, true), ok(placeHold("r1", 400)));
    ok(release("r1"));
    assertRejected(Rejection.IDEMPOTENCY_CONFLICT, placeHold("r1", 400));
    assertEquals(0, summary().held());
  }

  /**
   * Issue 17 item 5: one account must not flood the market. Every live rental holds one open hold,
   * so the account caps its open holds: a new one past the cap is refused, a retried placement of
   * an open one still answers as it stands, extending is not affected, and a released hold makes
   * room again.
   */
  @Test
  void capsOpenHoldsSoAnAccountCannotFloodTheMarketWithRentals() {
    kit =
        EventSourcedBehaviorTestKit.create(
            testKit.system(),
            Account.create(accountId, clock, Account.DEFAULT_PAYOUT_DETAILS_HOLD, 2));
    open("Ada");
    ok(deposit("pay-1", 1_000));
    ok(placeHold("r1", 100));
    ok(placeHold("r2", 100));

    var third = placeHold("r3", 100);
    assertRejected(Rejection.TOO_MANY_RENTALS, third);
    String message = third.reply().getError().getMessage();
    assertTrue(message.contains("2 live rentals"), message);
    assertEquals(200, summary().held(), "the refusal holds nothing");
    assertRejected(Rejection.HOLD_NOT_FOUND, getHold("r3"));

    // a retry of an open hold is answered as today, and extending one is not a new rental
    var retried = placeHold("r2", 100);
    assertTrue(retried.hasNoEvents());
    assertEquals(new HoldView("r2", 100, 0, 0, true), ok(retried));
    ok(extendHold("r1", 300));
    assertRecovers();
    assertRejected(Rejection.TOO_MANY_RENTALS, placeHold("r3", 100)); // still full after recovery

    // a released hold makes room; a closed hold does not count
    ok(release("r1"));
    ok(placeHold("r3", 100));
    assertRejected(Rejection.TOO_MANY_RENTALS, placeHold("r4", 100));
    assertEquals(200, summary().held());
  }

  @Test
  void theDefaultCapIsAHundredLiveRentals() {
    open("Ada");
    ok(deposit("pay-1", 1_000));
    for (int i = 0; i < Account.DEFAULT_MAX_LIVE_RENTALS; i++) ok(placeHold("r" + i, 1));
    assertRejected(Rejection.TOO_MANY_RENTALS, placeHold("one-too-many", 1));
    ok(placeHold("r0", 1)); // a retry of an open one still answers
  }

  @Test
  void extendHoldIsIdempotentOnNewAmount() {
    open("Ada");
    ok(deposit("pay-1", 1_000));
    ok(placeHold("r1", 100));
    var extended = extendHold("r1", 300);
    assertEquals(new HoldView("r1", 300, 0, 0, true), ok(extended));
    assertEquals(new HoldExtended("r1", 300, 200, START), extended.event());
    assertRecovers();

    var replay = extendHold("r1", 300);
    assertTrue(replay.hasNoEvents());
    assertEquals(new HoldView("r1", 300, 0, 0, true), ok(replay));
    var smaller = extendHold("r1", 150);
    assertTrue(smaller.hasNoEvents());
    assertEquals(new HoldView("r1", 300, 0, 0, true), ok(smaller));
    assertEquals(300, summary().held());
    assertEquals(700, summary().available());
  }

  @Test
  void extendHoldIsLimitedByAvailableBalance() {
    open("Ada");
    ok(deposit("pay-1", 1_000));
    ok(placeHold("r1", 100));
    ok(placeHold("r2", 500));
    assertRejected(Rejection.INSUFFICIENT_FUNDS, extendHold("r1", 501));
    ok(extendHold("r1", 500));
    assertEquals(0, summary().available());
  }

  @Test
  void extendUnknownHoldIsNotFoundAndReleasedHoldIsClosed() {
    open("Ada");
    ok(deposit("pay-1", 1_000));
    assertRejected(Rejection.HOLD_NOT_FOUND, extendHold("r1", 100));
    ok(placeHold("r1", 100));
    ok(release("r1"));
    assertRejected(Rejection.HOLD_CLOSED, extendHold("r1", 200));
  }

  // ---------------------------------------------------------------------------------------------
  // Captures

  @Test
  void capturesCumulativelyAndDeduplicatesLatestKey() {
    open("Ada");
    ok(deposit("pay-1", 1_000));
    ok(placeHold("r1", 100));
    var first = capture("r1", 10, 30);
    assertEquals(new Posting("r1:10", 30, false), ok(first));
    assertEquals(new Captured("r1", 10, 30, 30, START), first.event());
    assertRecovers();

    var second = capture("r1", 20, 50);
    assertEquals(new Posting("r1:20", 20, false), ok(second));
    var replay = capture("r1", 20, 50);
    assertTrue(replay.hasNoEvents());
    assertEquals(new Posting("r1:20", 20, true), ok(replay));

    Summary summary = summary();
    assertEquals(950, summary.balance());
    assertEquals(50, summary.captured());
    assertEquals(50, summary.held());
    assertEquals(900, summary.available());
    assertEquals(new HoldView("r1", 100, 50, 0, true), ok(getHold("r1")));
  }

  @Test
  void captureOfUnchangedTotalAdvancesTheMarkWithoutMoney() {
    open("Ada");
    ok(deposit("pay-1", 1_000));
    ok(placeHold("r1", 100));
    ok(capture("r1", 10, 30));
    var idle = capture("r1", 11, 30);
    assertEquals(new Posting("r1:11", 0, false), ok(idle));
    assertEquals(new Captured("r1", 11, 30, 0, START), idle.event());
    assertEquals(new Posting("r1:11", 0, true), ok(capture("r1", 11, 30)));
    assertEquals(new Posting("r1:10", 0, true), ok(capture("r1", 10, 30)));
    assertEquals(30, summary().captured());
  }

  @Test
  void olderCaptureKeyIsAcknowledgedAsDuplicate() {
    open("Ada");
    ok(deposit("pay-1", 1_000));
    ok(placeHold("r1", 100));
    ok(capture("r1", 10, 30));
    ok(capture("r1", 20, 50));
    var older = capture("r1", 10, 30);
    assertTrue(older.hasNoEvents());
    assertEquals(new Posting("r1:10", 0, true), ok(older));
    // an unseen second below the mark is covered by the later cumulative total
    assertEquals(new Posting("r1:15", 0, true), ok(capture("r1", 15, 40)));
    assertEquals(50, summary().captured());
  }

  @Test
  void olderCaptureKeyClaimingMoreIsConflict() {
    open("Ada");
    ok(deposit("pay-1", 1_000));
    ok(placeHold("r1", 100));
    ok(capture("r1", 20, 50));
    assertRejected(Rejection.IDEMPOTENCY_CONFLICT, capture("r1", 10, 51));
    assertEquals(50, summary().captured());
  }

  @Test
  void captureWithDifferentContentForSameKeyIsConflict() {
    open("Ada");
    ok(deposit("pay-1", 1_000));
    ok(placeHold("r1", 100));
    ok(capture("r1", 10, 30));
    assertRejected(Rejection.IDEMPOTENCY_CONFLICT, capture("r1", 10, 31));
    assertRejected(Rejection.IDEMPOTENCY_CONFLICT, capture("r1", 10, 29));
    assertEquals(30, summary().captured());
  }

  @Test
  void cumulativeCaptureThatGoesDownIsConflict() {
    open("Ada");
    ok(deposit("pay-1", 1_000));
    ok(placeHold("r1", 100));
    ok(capture("r1", 10, 30));
    assertRejected(Rejection.IDEMPOTENCY_CONFLICT, capture("r1", 11, 29));
    assertEquals(30, summary().captured());
  }

  @Test
  void captureBeyondHoldIsRejected() {
    open("Ada");
    ok(deposit("pay-1", 1_000));
    ok(placeHold("r1", 100));
    ok(capture("r1", 10, 60));
    assertRejected(Rejection.HOLD_EXCEEDED, capture("r1", 20, 101));
    // the refused second was not recorded: the same key may come again within the hold
    assertEquals(new Posting("r1:20", 40, false), ok(capture("r1", 20, 100)));
    assertRejected(Rejection.HOLD_EXCEEDED, capture("r1", 21, 101));
    Summary summary = summary();
    assertEquals(100, summary.captured());
    assertEquals(0, summary.held());
    assertEquals(900, summary.available());
  }

  @Test
  void rejectsMalformedOrUnknownCaptures() {
    open("Ada");
    ok(deposit("pay-1", 1_000));
    assertRejected(Rejection.HOLD_NOT_FOUND, capture("r1", 1, 1));
    ok(placeHold("r1", 100));
    assertRejected(Rejection.INVALID_AMOUNT, capture("r1", 0, 1));
    assertRejected(Rejection.INVALID_AMOUNT, capture("r1", -1, 1));
    assertRejected(Rejection.INVALID_AMOUNT, capture("r1", 1, -1));
  }

  // ---------------------------------------------------------------------------------------------
  // Releases

  @Test
  void releaseResolvesAtMostOnce() {
    open("Ada");
    ok(deposit("pay-1", 1_000));
    ok(placeHold("r1", 100));
    ok(capture("r1", 5, 30));
    var released = release("r1");
    assertEquals(new HoldView("r1", 100, 30, 70, false), ok(released));
    assertEquals(new HoldReleased("r1", 70, START), released.event());
    assertRecovers();

    var again = release("r1");
    assertTrue(again.hasNoEvents());
    assertEquals(new HoldView("r1", 100, 30, 70, false), ok(again));
    assertEquals(new HoldView("r1", 100, 30, 70, false), ok(getHold("r1")));
    Summary summary = summary();
    assertEquals(970, summary.balance());
    assertEquals(0, summary.held());
    assertEquals(970, summary.available());
  }

  /**
   * Finding C of the simulation: a cancelled rental's ReleaseHold overtook its PlaceHold. The
   * release of a hold never placed leaves a tombstone, and the late placement is refused instead of
   * opening a hold that nobody releases.
   */
  @Test
  void aReleaseOfAHoldNeverPlacedRefusesItsLatePlacement() {
    open("Ada");
    ok(deposit("pay-1", 1_000));
    var released = release("r1");
    assertEquals(
        Rejection.HOLD_NOT_FOUND, Rejection.codeOf(released.reply().getError().getMessage()));
    assertEquals(List.of(new Account.UnplacedHoldReleased("r1", START)), released.events());
    assertRecovers();
    assertRejected(Rejection.HOLD_NOT_FOUND, release("r1")); // remembered once
    assertRejected(Rejection.HOLD_CLOSED, placeHold("r1", 100));
    Summary summary = summary();
    assertEquals(0, summary.held());
    assertEquals(1_000, summary.available());
    ok(placeHold("r2", 100)); // other holds are not affected
  }

  @Test
  void captureAfterReleaseIsRejectedButDuplicateIsAcknowledged() {
    open("Ada");
    ok(deposit("pay-1", 1_000));
    ok(placeHold("r1", 100));
    ok(capture("r1", 10, 30));
    ok(capture("r1", 20, 50));
    ok(release("r1"));
    assertRejected(Rejection.HOLD_CLOSED, capture("r1", 30, 60));
    assertRejected(Rejection.HOLD_CLOSED, capture("r1", 30, 50));
    assertEquals(new Posting("r1:20", 20, true), ok(capture("r1", 20, 50)));
    assertEquals(new Posting("r1:10", 0, true), ok(capture("r1", 10, 30)));
    assertRejected(Rejection.IDEMPOTENCY_CONFLICT, capture("r1", 20, 55));
    assertEquals(50, summary().captured());
    assertEquals(0, summary().held());
  }

  // ---------------------------------------------------------------------------------------------
  // Earnings and payouts

  @Test
  void earningsCreditSplitsProviderAndPlatform() {
    open("Host");
    long price = 2_890_000; // 2.89 EUR per GPU-hour
    int cards = 2;
    long cost60 = Metering.cost(price, cards, 60);
    long provider60 = Metering.providerShare(cost60, Metering.DEFAULT_FEE_BPS);
    long platform60 = Metering.platformShare(cost60, Metering.DEFAULT_FEE_BPS);
    assertEquals(96_333, cost60);
    assertEquals(81_883, provider60);
    assertEquals(14_450, platform60);

    var first = credit("rent-1", 60, provider60, platform60, false);
    assertEquals(new Posting("rent-1:60", provider60, false), ok(first));
    assertEquals(
        new EarningsCredited(
            "rent-1", 60, provider60, platform60, provider60, platform60, false, START),
        first.event());
    assertRecovers();

    long cost120 = Metering.cost(price, cards, 120);
    long provider120 = Metering.providerShare(cost120, Metering.DEFAULT_FEE_BPS);
    long platform120 = Metering.platformShare(cost120, Metering.DEFAULT_FEE_BPS);
    var second = credit("rent-1", 120, provider120, platform120, false);
    assertEquals(new Posting("rent-1:120", provider120 - provider60, false), ok(second));
    EarningsCredited event = second.eventOfType(EarningsCredited.class);
    assertEquals(provider120 - provider60, event.providerAmount());
    assertEquals(platform120 - platform60, event.platformAmount());

    Summary summary = summary();
    assertEquals(provider120, summary.credited());
    assertEquals(platform120, summary.platformCredited());
    assertEquals(cost120, summary.credited() + summary.platformCredited());
    assertEquals(provider120, summary.earnings());
    assertEquals(0, summary.balance(), "provider earnings are not renter balance");
  }

  @Test
  void earningsCreditIsIdempotentOnSourceAndSecond() {
    open("Host");
    ok(credit("rent-1", 60, 850, 150, false));
    ok(credit("rent-1", 120, 1_700, 300, false));
    var replay = credit("rent-1", 120, 1_700, 300, false);
    assertTrue(replay.hasNoEvents());
    assertEquals(new Posting("rent-1:120", 850, true), ok(replay));
    assertEquals(new Posting("rent-1:60", 0, true), ok(credit("rent-1", 60, 850, 150, false)));
    assertRejected(Rejection.IDEMPOTENCY_CONFLICT, credit("rent-1", 120, 1_701, 300, false));
    assertRejected(Rejection.IDEMPOTENCY_CONFLICT, credit("rent-1", 120, 1_700, 299, false));
    // an older key is judged against the latest totals: it may not claim more than they do
    assertEquals(new Posting("rent-1:60", 0, true), ok(credit("rent-1", 60, 851, 150, false)));
    assertRejected(Rejection.IDEMPOTENCY_CONFLICT, credit("rent-1", 60, 1_701, 150, false));
    assertRejected(Rejection.IDEMPOTENCY_CONFLICT, credit("rent-1", 60, 850, 301, false));
    assertRejected(Rejection.IDEMPOTENCY_CONFLICT, credit("rent-1", 180, 1_699, 400, false));
    assertRejected(Rejection.INVALID_AMOUNT, credit("rent-1", 0, 1, 1, false));
    assertRejected(Rejection.INVALID_AMOUNT, credit("rent-1", 200, -1, 1, false));
    assertRejected(Rejection.INVALID_AMOUNT, credit("rent-1", 200, 1, -1, false));
    Summary summary = summary();
    assertEquals(1_700, summary.credited());
    assertEquals(300, summary.platformCredited());
  }

  @Test
  void lastCreditClosesSource() {
    open("Host");
    ok(credit("rent-1", 60, 850, 150, false));
    var last = credit("rent-1", 90, 1_275, 225, true);
    assertEquals(new Posting("rent-1:90", 425, false), ok(last));
    assertTrue(last.eventOfType(EarningsCredited.class).last());
    assertRecovers();
    Active state = (Active) kit.getState();
    assertFalse(state.marks().sources().open().containsKey("rent-1"));
    assertEquals(
        new SourceMark(90, 1_275, 225, 425, 75), state.marks().sources().closed().get("rent-1"));

    assertRejected(Rejection.HOLD_CLOSED, credit("rent-1", 120, 1_700, 300, false));
    assertEquals(new Posting("rent-1:90", 425, true), ok(credit("rent-1", 90, 1_275, 225, true)));
    assertEquals(new Posting("rent-1:60", 0, true), ok(credit("rent-1", 60, 850, 150, false)));
    // a source whose first credit is its last closes at once
    ok(credit("rent-2", 5, 10, 2, true));
    assertRejected(Rejection.HOLD_CLOSED, credit("rent-2", 6, 12, 2, true));
    assertEquals(1_285, summary().credited());
  }

  // ---------------------------------------------------------------------------------------------
  // Forgetting closed rentals

  @Test
  void aClosedHoldIsForgottenOnceItsRentalClosedAndCannotBeOpenedAgain() {
    open("Ada");
    ok(deposit("pay-1", 1_000));
    ok(placeHold("r1", 100));
    ok(capture("r1", 10, 30));
    assertTrue(forget("r1").hasNoEvents(), "an open hold is kept");
    ok(release("r1"));
    Summary before = summary();

    var forgotten = forget("r1");
    assertEquals(List.of(new Account.ClosedForgotten("r1", START)), forgotten.events());
    assertEquals(Done.getInstance(), forgotten.reply());
    assertRecovers();
    Active state = (Active) kit.getState();
    assertFalse(state.marks().holds().closed().containsKey("r1"));
    assertEquals(before, summary(), "no money moves");
    assertTrue(forget("r1").hasNoEvents(), "forgotten already");
    assertTrue(forget("never-seen").hasNoEvents());

    // A late duplicate of the placement is refused rather than opening a new hold; the rest answer
    // not found.
    assertRejected(Rejection.HOLD_CLOSED, placeHold("r1", 100));
    assertRejected(Rejection.HOLD_NOT_FOUND, getHold("r1"));
    assertRejected(Rejection.HOLD_NOT_FOUND, release("r1"));
    assertRejected(Rejection.HOLD_NOT_FOUND, capture("r1", 10, 30));
    assertEquals(before, summary());
  }

  @Test
  void aClosedSourceIsForgottenAndALateCreditMovesNoMoney() {
    open("Host");
    ok(credit("rent-1", 60, 850, 150, false));
    assertTrue(forget("rent-1").hasNoEvents(), "an open source is kept");
    ok(credit("rent-1", 90, 1_275, 225, true));
    assertEquals(List.of(new Account.ClosedForgotten("rent-1", START)), forget("rent-1").events());
    assertRecovers();
    assertFalse(((Active) kit.getState()).marks().sources().closed().containsKey("rent-1"));

    // Without the tombstone these would open "rent-1" as a new source and credit it all again.
    assertRejected(Rejection.HOLD_CLOSED, credit("rent-1", 90, 1_275, 225, true));
    assertRejected(Rejection.HOLD_CLOSED, credit("rent-1", 60, 850, 150, false));
    assertEquals(1_275, summary().credited());
    assertEquals(225, summary().platformCredited());
  }

  @Test
  void forgottenIdsAreRememberedForAtLeastADayThenDropped() {
    open("Host");
    ok(credit("a", 10, 10, 2, true));
    ok(credit("b", 10, 10, 2, true));
    ok(credit("c", 10, 10, 2, true));
    forget("a"); // the first generation starts now
    clock.advance(Duration.ofDays(1).minusSeconds(1));
    forget("b"); // same generation
    clock.advance(Duration.ofSeconds(1));
    forget("c"); // a day after the first: a new generation, "a" and "b" are the older one
    assertRejected(Rejection.HOLD_CLOSED, credit("a", 10, 10, 2, true));
    assertRecovers();
    Account.Forgotten forgotten = ((Active) kit.getState()).marks().forgotten();
    assertEquals(java.util.Set.of("c"), forgotten.recent().keySet());
    assertEquals(java.util.Set.of("a", "b"), forgotten.older().keySet());

    ok(credit("d", 10, 10, 2, true));
    clock.advance(Duration.ofDays(1));
    forget(
        "d"); // another day: the generation of "a" and "b" is dropped, so the state stays bounded
    forgotten = ((Active) kit.getState()).marks().forgotten();
    assertEquals(java.util.Set.of("d"), forgotten.recent().keySet());
    assertEquals(java.util.Set.of("c"), forgotten.older().keySet());
    assertRejected(Rejection.HOLD_CLOSED, credit("c", 10, 10, 2, true));
    assertEquals(
        new Posting("a:10", 10, false),
        ok(credit("a", 10, 10, 2, true)),
        "two days on, \"a\" is unknown again");
  }

  @Test
  void rejectsCreditsBeyondLargestAmount() {
    open("Host");
    ok(credit("rent-1", 1, Money.MAX_AMOUNT, 0, false));
    assertRejected(Rejection.AMOUNT_TOO_LARGE, credit("rent-2", 1, 1, 0, false));
    ok(credit("rent-3", 1, 0, Money.MAX_AMOUNT, false));
    assertRejected(Rejection.AMOUNT_TOO_LARGE, credit("rent-3", 2, 0, Money.MAX_AMOUNT + 1, false));
  }

  @Test
  void payoutDebitsEarningsAndRejectsOverdraw() {
    open("Host");
    ok(credit("rent-1", 60, 1_000, 200, true));
    assertRejected(Rejection.INSUFFICIENT_EARNINGS, payout("po-1", 1_001));
    var paid = payout("po-1", 600);
    assertEquals(new Posting("payout:po-1", 600, false), ok(paid));
    assertEquals(new PaidOut("po-1", 600, START), paid.event());
    assertRecovers();

    var replay = payout("po-1", 600);
    assertTrue(replay.hasNoEvents());
    assertEquals(new Posting("payout:po-1", 600, true), ok(replay));
    assertRejected(Rejection.IDEMPOTENCY_CONFLICT, payout("po-1", 400));
    assertRejected(Rejection.INSUFFICIENT_EARNINGS, payout("po-2", 401));
    assertRejected(Rejection.INVALID_AMOUNT, payout("po-3", 0));
    assertRejected(Rejection.INVALID_AMOUNT, payout("po-3", -1));
    ok(payout("po-2", 400));
    Summary summary = summary();
    assertEquals(0, summary.earnings());
    assertEquals(1_000, summary.credited());
    assertEquals(1_000, summary.paidOut());
  }

  @Test
  void aReturnedPayoutIsOwedAgainOnceAndHoldsPayoutsToTheSameDetailsUntilTheyAreGivenAgain() {
    open("Host");
    ok(setDetails("Ada Lovelace", "DE89370400440532013000", null));
    var payee = new Account.PayoutDetails("Ada Lovelace", "DE89370400440532013000", null);
    ok(credit("rent-1", 60, 1_000, 200, true));
    ok(payout("po-1", 600));
    assertEquals(400, summary().earnings());

    assertRejected(Rejection.NOT_FOUND, returnPayout("po-9", "AC04", payee));
    assertRejected(Rejection.INVALID_REASON, returnPayout("po-1", "closed", payee));
    assertRejected(Rejection.INVALID_REASON, returnPayout("po-1", null, payee));
    clock.advance(Duration.ofDays(3));
    var returned = returnPayout("po-1", "AC04", payee);
    assertEquals(new Posting("payout_returned:po-1", 600, false), ok(returned));
    assertEquals(
        new Account.PayoutReturned("po-1", 600, "AC04", payee, clock.instant()), returned.event());
    Summary s = summary();
    assertEquals(1_000, s.earnings(), "the returned 600 is owed again");
    assertEquals(0, s.paidOut());
    assertEquals(
        new Account.ReturnedPayout("po-1", 600, "AC04", payee, clock.instant()),
        s.payoutReturned(),
        "payouts to the details it came back from wait");
    assertRecovers();

    // once only: a repeat (any reason) is the same posting, and nothing moves again
    var again = returnPayout("po-1", "AC01", payee);
    assertTrue(again.hasNoEvents());
    assertEquals(new Posting("payout_returned:po-1", 600, true), ok(again));
    assertEquals(1_000, summary().earnings());
    // the payout id stays used: a late repeat of the payout itself pays nothing again
    assertTrue(payout("po-1", 600).hasNoEvents());
    assertEquals(1_000, summary().earnings());

    // the same details again are the provider's word that they are right now
    var confirmed = setDetails("Ada Lovelace", "DE89370400440532013000", null);
    assertEquals(List.of(new Account.PayoutDetailsSet(payee, clock.instant())), confirmed.events());
    assertNull(ok(confirmed).payoutReturned());
    assertRecovers();
    assertNull(summary().payoutReturned());
    ok(payout("po-2", 1_000));
    assertEquals(0, summary().earnings());
  }

  @Test
  void newDetailsEndTheWaitOfAReturnedPayoutWhenTheyComeIntoForce() {
    open("Host");
    ok(setDetails("Ada Lovelace", "DE89370400440532013000", null));
    var payee = new Account.PayoutDetails("Ada Lovelace", "DE89370400440532013000", null);
    ok(credit("rent-1", 60, 1_000, 200, true));
    ok(payout("po-1", 1_000));
    ok(returnPayout("po-1", "AC04", payee));

    ok(setDetails("Ada Lovelace", "FR1420041010050500013M02606", null));
    assertNotNull(
        summary().payoutReturned(),
        "the returned details stay in force during the hold: payouts still wait");
    clock.advance(Account.DEFAULT_PAYOUT_DETAILS_HOLD);
    assertNull(summary().payoutReturned(), "the new details are in force");
    assertRecovers();
    assertNull(summary().payoutReturned());
  }

  @Test
  void aSuspendedAccountTakesItsReturnedPayoutBackToo() {
    open("Host");
    ok(credit("rent-1", 60, 1_000, 200, true));
    ok(payout("po-1", 1_000));
    ok(suspend("review"));
    ok(returnPayout("po-1", "MS03", null));
    assertEquals(1_000, summary().earnings());
  }

  @Test
  void renterBalanceCannotBePaidOut() {
    open("Ada");
    ok(deposit("pay-1", 1_000));
    assertRejected(Rejection.INSUFFICIENT_EARNINGS, payout("po-1", 1));
  }

  // ---------------------------------------------------------------------------------------------
  // Spend caps

  @Test
  void setsAndRemovesSpendCap() {
    open("Ada");
    var set = setCap(100L);
    assertEquals(100L, ok(set).spendCapMonthly());
    assertEquals(new SpendCapSet(100L, START), set.event());
    assertRecovers();
    var same = setCap(100L);
    assertTrue(same.hasNoEvents());
    assertEquals(100L, ok(same).spendCapMonthly());
    assertRejected(Rejection.INVALID_AMOUNT, setCap(-1L));
    assertRejected(Rejection.INVALID_AMOUNT, setCap(Money.MAX_AMOUNT + 1));
    var removed = setCap(null);
    assertNull(ok(removed).spendCapMonthly());
    assertEquals(new SpendCapSet(null, START), removed.event());
    assertRecovers();
    assertTrue(setCap(null).hasNoEvents());
    assertNull(summary().spendCapMonthly());
  }

  @Test
  void spendCapRefusesHoldThatWouldExceedMonth() {
    open("Ada");
    ok(deposit("pay-1", 1_000));
    ok(setCap(100L));
    ok(placeHold("r1", 60));
    assertRejected(Rejection.SPEND_CAP_REACHED, placeHold("r2", 41));
    ok(placeHold("r2", 40));
    assertRejected(Rejection.SPEND_CAP_REACHED, extendHold("r1", 61));
    ok(capture("r1", 10, 60));
    ok(release("r1"));
    ok(release("r2"));
    Summary summary = summary();
    assertEquals(60, summary.spentThisMonth());
    assertEquals(0, summary.held());
    // captures count against the month even after their hold is gone
    assertRejected(Rejection.SPEND_CAP_REACHED, placeHold("r3", 41));
    ok(placeHold("r3", 40));
    assertRejected(Rejection.SPEND_CAP_REACHED, placeHold("r4", 1));
    // a zero cap refuses every new hold; funds are checked first
    ok(setCap(0L));
    assertRejected(Rejection.INSUFFICIENT_FUNDS, placeHold("r5", 10_000));
    assertRejected(Rejection.SPEND_CAP_REACHED, placeHold("r5", 1));
    ok(setCap(null));
    ok(placeHold("r5", 1));
  }

  @Test
  void spendCapResetsInNewUtcMonth() {
    clock.set(Instant.parse("2025-01-31T23:59:00Z"));
    open("Ada");
    ok(deposit("pay-1", 1_000));
    ok(setCap(100L));
    ok(placeHold("r1", 100));
    ok(capture("r1", 30, 100));
    ok(release("r1"));
    assertEquals(100, summary().spentThisMonth());
    assertRejected(Rejection.SPEND_CAP_REACHED, placeHold("r2", 1));

    clock.set(Instant.parse("2025-01-31T23:59:59.999Z"));
    assertRejected(Rejection.SPEND_CAP_REACHED, placeHold("r2", 1));

    clock.set(Instant.parse("2025-02-01T00:00:00Z"));
    assertEquals(0, summary().spentThisMonth());
    assertRecovers();
    assertEquals(0, summary().spentThisMonth());
    ok(placeHold("r2", 100));
    assertRejected(Rejection.SPEND_CAP_REACHED, placeHold("r3", 1));
    ok(capture("r2", 10, 70));
    assertEquals(70, summary().spentThisMonth());
    assertRecovers();
    assertEquals(70, summary().spentThisMonth());
  }

  @Test
  void aClockThatLagsIntoThePreviousMonthDoesNotResetTheMonthsSpending() {
    clock.set(Instant.parse("2025-02-01T00:00:05Z"));
    open("Ada");
    ok(deposit("pay-1", 1_000));
    ok(setCap(100L));
    ok(placeHold("r1", 100));
    ok(capture("r1", 5, 60));
    // the entity moves to a node whose clock is a few seconds behind, still in January
    clock.set(Instant.parse("2025-01-31T23:59:58Z"));
    ok(capture("r1", 10, 70));
    clock.set(Instant.parse("2025-02-01T00:00:20Z"));
    assertEquals(70, summary().spentThisMonth(), "February's captures are all still counted");
    assertRecovers();
    assertEquals(70, summary().spentThisMonth());
  }

  /**
   * The node's clock steps forward an hour across the month's end, then back: the month of a spend
   * cap is the latest month the account has seen (the clock's, or a capture's when the clock lags
   * behind it), so the step forward opens February and the step back does not forget what February
   * spent.
   */
  @Test
  void aClockSteppingAnHourAcrossTheMonthsEndAndBackKeepsTheLaterMonthsSpending() {
    clock.set(Instant.parse("2025-01-31T23:30:00Z"));
    open("Ada");
    ok(deposit("pay-1", 1_000));
    ok(setCap(100L));
    ok(placeHold("r1", 100));
    ok(capture("r1", 10, 100));
    ok(release("r1"));
    assertRejected(Rejection.SPEND_CAP_REACHED, placeHold("r2", 1));

    clock.advance(Duration.ofHours(1)); // 2025-02-01T00:30Z: a new month, a fresh cap
    assertEquals(0, summary().spentThisMonth());
    ok(placeHold("r2", 100));
    ok(capture("r2", 10, 60));
    ok(release("r2"));
    assertEquals(60, summary().spentThisMonth());

    clock.advance(Duration.ofHours(-1)); // back to 2025-01-31T23:30Z
    assertEquals(60, summary().spentThisMonth(), "February's spending, not forgotten");
    assertRejected(Rejection.SPEND_CAP_REACHED, placeHold("r3", 41));
    ok(placeHold("r3", 40));
    assertRecovers();
    assertEquals(60, summary().spentThisMonth());
    assertRejected(Rejection.SPEND_CAP_REACHED, placeHold("r4", 1));
  }

  @Test
  void rejectsMissingOrBlankPostingKeysWithoutPersisting() {
    open("Ada");
    ok(deposit("pay-1", 1_000));
    ok(placeHold("r1", 100));
    assertRejected(Rejection.INVALID_KEY, deposit(null, 10));
    assertRejected(Rejection.INVALID_KEY, deposit(" ", 10));
    assertRejected(Rejection.INVALID_KEY, placeHold(null, 10));
    assertRejected(Rejection.INVALID_KEY, extendHold("", 200));
    assertRejected(Rejection.INVALID_KEY, capture(null, 1, 1));
    assertRejected(Rejection.INVALID_KEY, release(null));
    assertRejected(Rejection.INVALID_KEY, credit(null, 1, 1, 0, false));
    assertRejected(Rejection.INVALID_KEY, payout("x".repeat(257), 1));
    assertEquals(1_000, summary().balance());
  }

  @Test
  void holdsOpenAcrossMonthBoundaryStillCountButOldCapturesDoNot() {
    clock.set(Instant.parse("2024-12-31T23:00:00Z"));
    open("Ada");
    ok(deposit("pay-1", 1_000));
    ok(setCap(100L));
    ok(placeHold("r1", 80));
    ok(capture("r1", 60, 50));
    assertRejected(Rejection.SPEND_CAP_REACHED, placeHold("r2", 21));

    clock.set(Instant.parse("2025-01-01T00:30:00Z"));
    // December's 50 are forgotten, the 30 still held count
    assertEquals(0, summary().spentThisMonth());
    ok(placeHold("r2", 70));
    assertRejected(Rejection.SPEND_CAP_REACHED, placeHold("r3", 1));
    // capturing what is held does not change what is committed
    ok(capture("r1", 120, 80));
    assertEquals(30, summary().spentThisMonth());
    assertRejected(Rejection.SPEND_CAP_REACHED, placeHold("r3", 1));
    assertRecovers();
    assertEquals(30, summary().spentThisMonth());
  }

  @Test
  void monthOfIsTheUtcCalendarMonth() {
    assertEquals(202501, Account.monthOf(Instant.parse("2025-01-31T23:59:59.999999999Z")));
    assertEquals(202502, Account.monthOf(Instant.parse("2025-02-01T00:00:00Z")));
    assertEquals(202412, Account.monthOf(Instant.parse("2024-12-31T23:59:59Z")));
    assertEquals(202501, Account.monthOf(Instant.parse("2025-01-01T00:00:00Z")));
    assertEquals(202402, Account.monthOf(Instant.parse("2024-02-29T12:00:00Z")));
  }

  // ---------------------------------------------------------------------------------------------
  // Recovery and serialization

  @Test
  void aRefundGivesTheBalanceBackCumulativelyOnceEvenAfterTheRentalsHoldIsForgotten() {
    open("Ada");
    ok(deposit("pay-1", 10_000));
    ok(placeHold("rent-1", 1_000));
    ok(capture("rent-1", 60, 700));
    ok(release("rent-1"));
    kit.runCommand(new Account.ForgetClosed("rent-1", testKit.<Done>createTestProbe().ref()));
    assertEquals(9_300, summary().balance());

    var first = refund("rent-1", 300);
    assertEquals(new Posting("refund:rent-1:300", 300, false), ok(first));
    assertEquals(new Account.ChargeRefunded("rent-1", 300, 300, START), first.event());
    assertEquals(9_600, summary().balance());
    assertEquals(400, summary().captured(), "captured is net of refunds");
    assertRecovers();

    // cumulative: a repeat or an older figure moves nothing, a later one only the difference
    assertTrue(refund("rent-1", 300).hasNoEvents());
    assertEquals(new Posting("refund:rent-1:200", 0, true), ok(refund("rent-1", 200)));
    var rest = refund("rent-1", 700);
    assertEquals(new Account.ChargeRefunded("rent-1", 700, 400, START), rest.event());
    assertEquals(10_000, summary().balance());
    assertEquals(10_000, summary().available());
    assertRejected(Rejection.INVALID_AMOUNT, refund("rent-2", 0));
    assertRecovers();

    // a suspended account takes its refund too: the money is the renter's either way
    ok(kit.<StatusReply<Summary>>runCommand(r -> new Account.Suspend("review", r)));
    assertFalse(refund("rent-3", 50).hasNoEvents());
    assertEquals(10_050, summary().balance());
  }

  @Test
  void aReversalTakesTheProvidersAndPlatformsSharesBackAndMayLeaveEarningsBelowZero() {
    open("Host");
    ok(credit("rent-1", 60, 1_000, 200, true));
    ok(payout("po-1", 1_000));
    assertEquals(0, summary().earnings());

    var reversed = reverse("rent-1", 500, 100);
    assertEquals(new Posting("reversal:rent-1:600", 600, false), ok(reversed));
    assertEquals(
        new Account.EarningsReversed("rent-1", 500, 100, 500, 100, START), reversed.event());
    Summary s = summary();
    assertEquals(-500, s.earnings(), "paid out before the refund: the provider owes it");
    assertEquals(100, s.platformCredited());
    assertRejected(Rejection.INSUFFICIENT_EARNINGS, payout("po-2", 1));
    assertRecovers();

    assertTrue(reverse("rent-1", 500, 100).hasNoEvents(), "a repeat moves nothing");
    var more = reverse("rent-1", 1_000, 200);
    assertEquals(new Account.EarningsReversed("rent-1", 1_000, 200, 500, 100, START), more.event());
    // later earnings make up for it before anything is paid again
    ok(credit("rent-2", 60, 1_200, 240, true));
    assertEquals(200, summary().earnings());
    ok(payout("po-2", 200));
    assertRejected(Rejection.INVALID_AMOUNT, reverse("rent-3", 0, 0));
    assertRecovers();
  }

  @Test
  void recoversIdenticalStateAfterEveryKindOfEvent() {
    List<Class<? extends Event>> seen = new ArrayList<>();
    seen.add(open("Ada").event().getClass());
    assertRecovers();
    seen.add(deposit("pay-1", 10_000).event().getClass());
    assertRecovers();
    seen.add(placeHold("r1", 1_000).event().getClass());
    assertRecovers();
    seen.add(extendHold("r1", 2_000).event().getClass());
    assertRecovers();
    clock.advance(Duration.ofMinutes(1));
    seen.add(capture("r1", 60, 700).event().getClass());
    assertRecovers();
    seen.add(release("r1").event().getClass());
    assertRecovers();
    seen.add(credit("rent-1", 60, 595, 105, false).event().getClass());
    assertRecovers();
    seen.add(credit("rent-1", 61, 600, 106, true).event().getClass());
    assertRecovers();
    seen.add(payout("po-1", 500).event().getClass());
    assertRecovers();
    seen.add(returnPayout("po-1", "AC04", null).event().getClass());
    assertRecovers();
    seen.add(payout("po-2", 500).event().getClass());
    assertRecovers();
    seen.add(setCap(5_000L).event().getClass());
    assertRecovers();
    seen.add(refund("r1", 100).event().getClass());
    assertRecovers();
    seen.add(reverse("rent-1", 50, 10).event().getClass());
    assertRecovers();
    assertEquals(
        List.of(
            Opened.class,
            Deposited.class,
            HoldPlaced.class,
            HoldExtended.class,
            Captured.class,
            HoldReleased.class,
            EarningsCredited.class,
            EarningsCredited.class,
            PaidOut.class,
            Account.PayoutReturned.class,
            PaidOut.class,
            SpendCapSet.class,
            Account.ChargeRefunded.class,
            Account.EarningsReversed.class),
        seen);
    assertEquals(
        new Summary(
            accountId,
            true,
            "Ada",
            9_400,
            0,
            9_400,
            50,
            5_000L,
            700,
            10_000,
            600,
            550,
            96,
            500,
            null,
            null,
            null,
            new Account.ReturnedPayout(
                "po-1", 500, "AC04", null, START.plus(Duration.ofMinutes(1)))),
        summary());
  }

  @Test
  void recoversFromSnapshotAndLaterEvents() {
    open("Ada");
    // snapshotEvery(200): Opened + 199 deposits puts the 200th event in the journal
    for (int i = 1; i < 200; i++) ok(deposit("pay-" + i, i));
    ok(placeHold("r1", 1_000));
    ok(capture("r1", 10, 400));
    ok(credit("rent-1", 10, 340, 60, false));
    String persistenceId = PersistenceId.of(Account.ENTITY_KEY.name(), accountId).id();
    Active snapshot =
        kit.snapshotTestKit().orElseThrow().expectNextPersistedClass(persistenceId, Active.class);
    assertEquals(199, snapshot.marks().deposits().size());
    assertEquals(19_900, snapshot.totals().deposited());
    assertRecovers();
    Summary summary = summary();
    assertEquals(19_900 - 400, summary.balance());
    assertEquals(600, summary.held());
    assertEquals(340, summary.earnings());
    // dedup state survives the snapshot
    assertEquals(new Posting("deposit:pay-7", 7, true), ok(deposit("pay-7", 7)));
    assertEquals(new Posting("r1:10", 400, true), ok(capture("r1", 10, 400)));
  }

  @Test
  void everyEventAndANonTrivialStateRoundTripThroughJacksonCbor() {
    // build a state with every map and optional filled in
    open("Ada");
    ok(deposit("pay-1", 10_000));
    ok(setCap(9_000L));
    ok(placeHold("r1", 1_000));
    ok(placeHold("r2", 500));
    ok(extendHold("r2", 800));
    ok(capture("r1", 60, 300));
    ok(capture("r2", 30, 200));
    ok(release("r2"));
    ok(credit("rent-1", 60, 850, 150, false));
    ok(credit("rent-2", 90, 1_700, 300, true));
    ok(payout("po-1", 1_000));
    ok(setDetails("Ada Lovelace", "DE89370400440532013000", "DEUTDEFF"));
    var payee = new Account.PayoutDetails("Ada Lovelace", "DE89370400440532013000", "DEUTDEFF");
    ok(returnPayout("po-1", "AC04", payee));
    ok(refund("r1", 100));
    ok(reverse("rent-1", 85, 15));
    Active state = (Active) kit.getState();
    assertEquals(1, state.marks().refunds().size());
    assertEquals(1, state.marks().reversals().size());
    assertEquals(1, state.marks().returns().size());
    assertNotNull(state.profile().returnedPayout());
    assertEquals(1, state.marks().holds().open().size());
    assertEquals(1, state.marks().holds().closed().size());
    assertEquals(1, state.marks().sources().open().size());
    assertEquals(1, state.marks().sources().closed().size());

    TestProbe<StatusReply<Posting>> postings = testKit.createTestProbe();
    TestProbe<Summary> summaries = testKit.createTestProbe();
    Instant at = Instant.parse("2025-03-14T10:15:30.123456789Z");
    List<Object> messages =
        List.of(
            new Opened("Ada", at),
            new Deposited("pay-1", 10_000, at),
            new HoldPlaced("r1", 1_000, at),
            new HoldExtended("r1", 1_500, 500, at),
            new Captured("r1", 60, 300, 300, at),
            new HoldReleased("r1", 1_200, at),
            new EarningsCredited("rent-1", 60, 850, 150, 850, 150, true, at),
            new PaidOut("po-1", 1_000, at),
            new Account.PayoutReturned("po-1", 1_000, "AC04", payee, at),
            new Account.UnplacedHoldReleased("r9", at),
            new Account.ChargeRefunded("r1", 300, 100, at),
            new Account.EarningsReversed("rent-1", 85, 15, 85, 15, at),
            new Account.RefundCharge("r1", 300, postings.ref()),
            new Account.ReverseEarnings("rent-1", 85, 15, postings.ref()),
            new SpendCapSet(9_000L, at),
            new SpendCapSet(null, at),
            state,
            Active.opened("Bob"),
            Unopened.INSTANCE,
            new Hold(1_000, 300, 60, 300, 300, 0),
            new SourceMark(90, 1_700, 300, 1_700, 300),
            summary(),
            new Posting("deposit:pay-1", 10_000, true),
            new HoldView("r1", 1_000, 300, 0, true),
            new Deposit("pay-1", 10_000, postings.ref()),
            new Capture("r1", 60, 300, postings.ref()),
            new CreditEarnings("rent-1", 60, 850, 150, false, postings.ref()),
            new Account.ReturnPayout("po-1", "AC04", payee, postings.ref()),
            new GetSummary(summaries.ref()));

    Serialization serialization = SerializationExtension.get(Adapter.toClassic(testKit.system()));
    SerializationTestKit serializationTestKit = new SerializationTestKit(testKit.system());
    for (Object message : messages) {
      assertInstanceOf(
          JacksonCborSerializer.class,
          serialization.findSerializerFor(message),
          message.getClass().getName());
      Object copy = serializationTestKit.verifySerialization(message, true);
      assertEquals(message, copy);
    }
  }

  @Test
  void rejectionsCarryAStableCodeAndAReadableDetail() {
    open("Ada");
    ok(deposit("pay-1", 1_000));
    StatusReply<HoldView> reply = placeHold("r1", 2_000).reply();
    assertTrue(reply.isError());
    String message = reply.getError().getMessage();
    assertEquals(Rejection.INSUFFICIENT_FUNDS, Rejection.codeOf(message));
    assertEquals(
        "available 0.001000 EUR, the hold needs 0.002000 EUR", Rejection.detailOf(message));
    assertEquals(Rejection.INTERNAL, Rejection.codeOf("Boom"));
    assertEquals(Rejection.INTERNAL, Rejection.codeOf((String) null));
  }

  // ---------------------------------------------------------------------------------------------
  // Payout details and suspension

  @Test
  void keepsPayoutDetailsInElectronicFormAndShowsThemInTheSummary() {
    ok(open("Ada"));
    var result = setDetails(" Ada Lovelace ", "de89 3704 0044 0532 0130 00", "deutdeff");
    Summary s = ok(result);
    var expected = new Account.PayoutDetails("Ada Lovelace", "DE89370400440532013000", "DEUTDEFF");
    assertEquals(expected, s.payoutDetails());
    assertEquals(List.of(new Account.PayoutDetailsSet(expected, START)), result.events());
    // Setting the same details again records nothing.
    assertTrue(setDetails("Ada Lovelace", "DE89370400440532013000", "DEUTDEFF").hasNoEvents());
    assertRecovers();
  }

  @Test
  void changedPayoutDetailsApplyOnlyAfterTheHoldPeriodWhileTheOldOnesStayInForce() {
    ok(open("Ada"));
    var first = new Account.PayoutDetails("Ada Lovelace", "DE89370400440532013000", null);
    ok(setDetails("Ada Lovelace", "DE89370400440532013000", null));
    // a stolen key changes them: the next payouts still go to the first ones for a day
    clock.advance(Duration.ofHours(1));
    var changed = setDetails("Mallory", "FR1420041010050500013M02606", null);
    var attacker = new Account.PayoutDetails("Mallory", "FR1420041010050500013M02606", null);
    Instant effective = clock.instant().plus(Account.DEFAULT_PAYOUT_DETAILS_HOLD);
    assertEquals(
        List.of(new Account.PayoutDetailsSet(attacker, clock.instant(), effective)),
        changed.events());
    Summary during = ok(changed);
    assertEquals(first, during.payoutDetails(), "the old details stay in force");
    assertEquals(
        new Account.PendingPayoutDetails(attacker, effective), during.pendingPayoutDetails());
    assertRecovers();
    clock.advance(Account.DEFAULT_PAYOUT_DETAILS_HOLD.minusSeconds(1));
    assertEquals(first, summary().payoutDetails(), "one second before the end of the hold");
    // the owner notices and sets the first ones back: the change is cancelled at once
    var reverted = setDetails("Ada Lovelace", "DE89370400440532013000", null);
    assertEquals(first, ok(reverted).payoutDetails());
    assertEquals(null, ok(reverted).pendingPayoutDetails());
    clock.advance(Duration.ofDays(2));
    assertEquals(first, summary().payoutDetails(), "the reverted change never applies");

    // a change nobody reverts applies once its hold is over
    ok(setDetails("Ada Byron", "DE89370400440532013000", null));
    clock.advance(Account.DEFAULT_PAYOUT_DETAILS_HOLD);
    assertEquals("Ada Byron", summary().payoutDetails().holderName());
    assertEquals(null, summary().pendingPayoutDetails());
    assertRecovers();
    assertEquals("Ada Byron", summary().payoutDetails().holderName());
  }

  @Test
  void refusesAnIbanThatIsNotSepaOrFailsItsChecksumAndABadBicOrHolder() {
    ok(open("Ada"));
    assertRejected(Rejection.INVALID_IBAN, setDetails("Ada", "DE89370400440532013001", null));
    assertRejected(Rejection.INVALID_IBAN, setDetails("Ada", "US12345678901234567890", null));
    assertRejected(Rejection.INVALID_IBAN, setDetails("Ada", null, null));
    assertRejected(Rejection.INVALID_BIC, setDetails("Ada", "DE89370400440532013000", "DEUT"));
    assertRejected(Rejection.INVALID_HOLDER_NAME, setDetails(" ", "DE89370400440532013000", null));
    assertRejected(
        Rejection.INVALID_HOLDER_NAME, setDetails("x".repeat(71), "DE89370400440532013000", null));
    assertEquals(null, summary().payoutDetails());
  }

  @Test
  void aSuspendedAccountPlacesNoNewHoldAndGetsNoPayoutButFinishesWhatRuns() {
    ok(open("Ada"));
    ok(deposit("pay-1", 10_000));
    ok(placeHold("rental-1", 1_000));
    ok(credit("rental-9", 10, 5_000, 800, false));
    var suspended = suspend("chargeback");
    assertEquals(new Account.Suspension("chargeback", START), ok(suspended).suspension());
    assertTrue(ok(suspended).suspended());

    assertRejected(Rejection.ACCOUNT_SUSPENDED, placeHold("rental-2", 1_000));
    assertRejected(Rejection.ACCOUNT_SUSPENDED, payout("run-1:acc", 1_000));
    // What runs goes on: a retried PlaceHold of the open hold is answered, the hold grows, is
    // captured
    // and released; earnings still accrue.
    assertTrue(placeHold("rental-1", 1_000).hasNoEvents());
    assertEquals(1_000, ok(placeHold("rental-1", 1_000)).amount());
    ok(extendHold("rental-1", 2_000));
    ok(capture("rental-1", 10, 1_500));
    ok(release("rental-1"));
    ok(credit("rental-9", 20, 6_000, 900, true));
    assertRecovers();

    var resumed = resume();
    assertEquals(null, ok(resumed).suspension());
    ok(placeHold("rental-2", 1_000));
    ok(payout("run-1:acc", 1_000));
  }

  @Test
  void aPayoutAppliedBeforeASuspensionStillAnswersAsADuplicate() {
    ok(open("Ada"));
    ok(credit("rental-9", 10, 5_000, 800, true));
    ok(payout("run-1:acc", 1_000));
    ok(suspend(null));
    assertTrue(ok(payout("run-1:acc", 1_000)).duplicate());
  }

  @Test
  void suspendingTwiceOrResumingAnActiveAccountRecordsNothing() {
    ok(open("Ada"));
    assertTrue(resume().hasNoEvents());
    ok(suspend("a"));
    assertTrue(suspend("b").hasNoEvents());
    assertEquals("a", summary().suspension().reason());
  }

  // ---------------------------------------------------------------------------------------------
  // Helpers

  // ---------------------------------------------------------------------------------------------
  // Storage captures (snapshots)

  /**
   * Compute and storage captured from one account: the same hold rules, one balance, and every µ€
   * either still on the balance or captured; storage is its own event so the ledger books it as
   * platform revenue.
   */
  @Test
  void computeAndStorageCapturesInOneAccountConserve() {
    open("Ada");
    ok(deposit("pay-1", 10_000));
    ok(placeHold("rnt_1", 3_000));
    ok(placeHold("snap_1", 600));
    ok(capture("rnt_1", 60, 1_000));
    var storage = captureStorage("snap_1", 3_600, 100);
    assertEquals(new Posting("snap_1:3600", 100, false), ok(storage));
    assertEquals(
        List.of(new Account.StorageCaptured("snap_1", 3_600, 100, 100, START)), storage.events());
    ok(captureStorage("snap_1", 7_200, 250));
    // a repeat answers as the first time; an older one is applied already
    var again = captureStorage("snap_1", 7_200, 250);
    assertTrue(again.hasNoEvents());
    assertEquals(new Posting("snap_1:7200", 150, true), ok(again));
    assertEquals(new Posting("snap_1:3600", 0, true), ok(captureStorage("snap_1", 3_600, 100)));
    assertRejected(Rejection.IDEMPOTENCY_CONFLICT, captureStorage("snap_1", 7_200, 251));
    assertRejected(Rejection.HOLD_EXCEEDED, captureStorage("snap_1", 10_800, 601));
    assertRejected(Rejection.HOLD_NOT_FOUND, captureStorage("snap_other", 1, 1));
    ok(capture("rnt_1", 120, 2_000));

    Summary s = summary();
    assertEquals(2_250, s.captured());
    assertEquals(2_250, s.spentThisMonth(), "storage counts toward the month's spending");
    assertEquals(10_000, s.balance() + s.captured(), "conserved");
    assertEquals((3_000 - 2_000) + (600 - 250), s.held());
    assertEquals(0, s.credited() + s.platformCredited(), "no provider is credited for storage");
    ok(release("snap_1"));
    ok(release("rnt_1"));
    assertEquals(0, summary().held());
    assertEquals(10_000 - 2_250, summary().available());
    assertRejected(Rejection.HOLD_CLOSED, captureStorage("snap_1", 10_800, 300));
    assertRecovers();
  }

  @Test
  void aSnapshotsHoldIsNoLiveRental() {
    kit =
        EventSourcedBehaviorTestKit.create(
            testKit.system(),
            Account.create(accountId, clock, Account.DEFAULT_PAYOUT_DETAILS_HOLD, 1));
    open("Ada");
    ok(deposit("pay-1", 1_000));
    ok(placeHold("snap_1", 10));
    ok(placeHold("snap_2", 10));
    ok(placeHold("r1", 100));
    assertRejected(Rejection.TOO_MANY_RENTALS, placeHold("r2", 100));
  }

  private CommandResultWithReply<Command, Event, State, StatusReply<Posting>> captureStorage(
      String holdId, long throughSecond, long cumulative) {
    return kit.runCommand(
        replyTo -> new Account.CaptureStorage(holdId, throughSecond, cumulative, replyTo));
  }

  private CommandResultWithReply<Command, Event, State, StatusReply<Summary>> open(String name) {
    return kit.runCommand(replyTo -> new Open(name, replyTo));
  }

  private CommandResultWithReply<Command, Event, State, StatusReply<Posting>> deposit(
      String reference, long amount) {
    return kit.runCommand(replyTo -> new Deposit(reference, amount, replyTo));
  }

  private CommandResultWithReply<Command, Event, State, StatusReply<HoldView>> placeHold(
      String holdId, long amount) {
    return kit.runCommand(replyTo -> new PlaceHold(holdId, amount, replyTo));
  }

  private CommandResultWithReply<Command, Event, State, StatusReply<HoldView>> extendHold(
      String holdId, long newAmount) {
    return kit.runCommand(replyTo -> new ExtendHold(holdId, newAmount, replyTo));
  }

  private CommandResultWithReply<Command, Event, State, StatusReply<Posting>> capture(
      String holdId, long throughSecond, long cumulative) {
    return kit.runCommand(replyTo -> new Capture(holdId, throughSecond, cumulative, replyTo));
  }

  private CommandResultWithReply<Command, Event, State, StatusReply<HoldView>> release(
      String holdId) {
    return kit.runCommand(replyTo -> new ReleaseHold(holdId, replyTo));
  }

  private CommandResultWithReply<Command, Event, State, StatusReply<HoldView>> getHold(
      String holdId) {
    return kit.runCommand(replyTo -> new GetHold(holdId, replyTo));
  }

  private CommandResultWithReply<Command, Event, State, StatusReply<Posting>> credit(
      String sourceId, long throughSecond, long provider, long platform, boolean last) {
    return kit.runCommand(
        replyTo -> new CreditEarnings(sourceId, throughSecond, provider, platform, last, replyTo));
  }

  private CommandResultWithReply<Command, Event, State, Done> forget(String id) {
    return kit.runCommand(replyTo -> new Account.ForgetClosed(id, replyTo));
  }

  private CommandResultWithReply<Command, Event, State, StatusReply<Posting>> payout(
      String payoutId, long amount) {
    return kit.runCommand(replyTo -> new Payout(payoutId, amount, replyTo));
  }

  private CommandResultWithReply<Command, Event, State, StatusReply<Posting>> returnPayout(
      String payoutId, String reason, Account.PayoutDetails payee) {
    return kit.runCommand(replyTo -> new Account.ReturnPayout(payoutId, reason, payee, replyTo));
  }

  private CommandResultWithReply<Command, Event, State, StatusReply<Posting>> refund(
      String rentalId, long cumulative) {
    return kit.runCommand(replyTo -> new Account.RefundCharge(rentalId, cumulative, replyTo));
  }

  private CommandResultWithReply<Command, Event, State, StatusReply<Posting>> reverse(
      String rentalId, long provider, long platform) {
    return kit.runCommand(
        replyTo -> new Account.ReverseEarnings(rentalId, provider, platform, replyTo));
  }

  private CommandResultWithReply<Command, Event, State, StatusReply<Summary>> setCap(Long cap) {
    return kit.runCommand(replyTo -> new SetSpendCap(cap, replyTo));
  }

  private CommandResultWithReply<Command, Event, State, StatusReply<Summary>> setDetails(
      String holder, String iban, String bic) {
    return kit.runCommand(replyTo -> new Account.SetPayoutDetails(holder, iban, bic, replyTo));
  }

  private CommandResultWithReply<Command, Event, State, StatusReply<Summary>> suspend(
      String reason) {
    return kit.runCommand(replyTo -> new Account.Suspend(reason, replyTo));
  }

  private CommandResultWithReply<Command, Event, State, StatusReply<Summary>> resume() {
    return kit.runCommand(Account.Resume::new);
  }

  private Summary summary() {
    return kit.<Summary>runCommand(GetSummary::new).reply();
  }

  private static <T> T ok(CommandResultWithReply<Command, Event, State, StatusReply<T>> result) {
    StatusReply<T> reply = result.reply();
    assertTrue(
        reply.isSuccess(),
        () -> result.command() + " was refused: " + reply.getError().getMessage());
    return reply.getValue();
  }

  private static void assertRejected(
      Rejection code,
      CommandResultWithReply<Command, Event, State, ? extends StatusReply<?>> result) {
    StatusReply<?> reply = result.reply();
    assertTrue(
        reply.isError(),
        () -> result.command() + " should be refused with " + code + ", got " + reply.getValue());
    assertEquals(
        code, Rejection.codeOf(reply.getError().getMessage()), () -> reply.getError().getMessage());
    assertTrue(result.hasNoEvents(), () -> "a refusal persists nothing, got " + result.events());
  }

  /** Restarts the entity from its journal (and snapshots) and checks that nothing changed. */
  private void assertRecovers() {
    State before = kit.getState();
    Summary summaryBefore = summary();
    State recovered = kit.restart().state();
    assertEquals(before, recovered, "state after recovery");
    assertEquals(summaryBefore, summary(), "summary after recovery");
  }
}
