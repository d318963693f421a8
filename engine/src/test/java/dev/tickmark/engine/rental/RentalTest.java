package dev.tickmark.engine.rental;

import static dev.tickmark.engine.rental.RentalFixture.GPU;
import static dev.tickmark.engine.rental.RentalFixture.REGION;
import static dev.tickmark.engine.rental.RentalFixture.START;
import static dev.tickmark.engine.rental.RentalFixture.assertRejected;
import static dev.tickmark.engine.rental.RentalFixture.ok;
import static dev.tickmark.engine.rental.RentalFixture.onDemand;
import static dev.tickmark.engine.rental.RentalFixture.settings;
import static dev.tickmark.engine.rental.RentalFixture.spec;
import static dev.tickmark.engine.rental.RentalFixture.withAskTimeout;
import static dev.tickmark.engine.rental.RentalFixture.withProvisioningTimeout;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import dev.tickmark.engine.Rejection;
import dev.tickmark.engine.account.Account;
import dev.tickmark.engine.host.Host;
import dev.tickmark.engine.host.Listing;
import dev.tickmark.engine.market.Matcher;
import dev.tickmark.engine.metrics.EngineMetrics;
import dev.tickmark.engine.money.Metering;
import dev.tickmark.engine.rental.Rental.Checkpoint;
import dev.tickmark.engine.rental.Rental.Ended;
import dev.tickmark.engine.rental.Rental.Settings;
import dev.tickmark.engine.rental.Rental.Spec;
import dev.tickmark.engine.rental.Rental.State;
import dev.tickmark.engine.rental.Rental.View;
import java.time.Duration;
import java.time.Instant;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.pekko.actor.testkit.typed.annotations.JUnit5TestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.JUnit5TestKitBuilder;
import org.apache.pekko.actor.testkit.typed.javadsl.TestKitJUnit5Extension;
import org.apache.pekko.actor.testkit.typed.javadsl.TestProbe;
import org.apache.pekko.pattern.StatusReply;
import org.apache.pekko.persistence.testkit.javadsl.EventSourcedBehaviorTestKit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * One behaviour of the {@link Rental} entity per test, each through {@link RentalFixture}: the
 * rental in an {@link EventSourcedBehaviorTestKit}, the real renter and provider {@link Account}s
 * on the in-memory journal (so every amount is checked where the money lands), a scripted host, a
 * matcher probe and a test clock.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@ExtendWith(TestKitJUnit5Extension.class)
class RentalTest {
  /**
   * The testkit's in-memory journal first, then application.conf (test resources) for the
   * serialization bindings.
   */
  static final Config CONFIG =
      EventSourcedBehaviorTestKit.config().withFallback(ConfigFactory.load());

  @JUnit5TestKit
  final ActorTestKit testKit =
      new JUnit5TestKitBuilder().withName("RentalTest").withCustomConfig(CONFIG).build();

  /** µ€ per GPU-hour: the renter's ceiling and the host's (lower) floor. */
  private static final long CEILING = 3_000_000;

  private static final long FLOOR = 2_890_000;
  private static final int CARDS = 2;
  private static final long DEPOSIT = 100_000_000;

  /** 1 µ€ per GPU-second, so hold arithmetic reads plainly. */
  private static final long ONE_PER_SECOND = 3_600;

  private static final int FEE = Metering.DEFAULT_FEE_BPS;

  private RentalFixture fixture() {
    return new RentalFixture(testKit, settings(), DEPOSIT);
  }

  private RentalFixture fixture(Settings settings, long deposit) {
    return new RentalFixture(testKit, settings, deposit);
  }

  private static long cost(long seconds) {
    return Metering.cost(FLOOR, CARDS, seconds);
  }

  private static Checkpoint checkpoint(long price, int cards, long seconds, Instant at) {
    long cost = Metering.cost(price, cards, seconds);
    long provider = Metering.providerShare(cost, FEE);
    return new Checkpoint(seconds, cost, provider, cost - provider, at);
  }

  private static Instant at(long seconds) {
    return START.plusSeconds(seconds);
  }

  /**
   * Conservation: the renter's captures equal the provider's credits plus the platform's, and both
   * equal {@code total}.
   */
  private static void assertConserved(RentalFixture f, long total) {
    Account.Summary renter = f.renter.summary();
    Account.Summary provider = f.provider.summary();
    assertEquals(total, renter.captured(), "captured from the renter");
    assertEquals(
        total,
        provider.credited() + provider.platformCredited(),
        "credited to the provider and the platform");
    assertEquals(Metering.providerShare(total, FEE), provider.credited(), "the provider's share");
  }

  private static void assertHoldReleased(RentalFixture f, long deposit, long charged) {
    Account.Summary renter = f.renter.summary();
    assertEquals(0, renter.held(), "nothing stays held");
    assertEquals(deposit - charged, renter.balance());
    assertEquals(deposit - charged, renter.available());
    // The hold's story from the account's journal: once the rental closes, the account forgets the
    // closed hold.
    String id = f.rentalId;
    long placed =
        f.renter.events(Account.HoldPlaced.class).stream()
                .filter(e -> e.holdId().equals(id))
                .mapToLong(Account.HoldPlaced::amount)
                .sum()
            + f.renter.events(Account.HoldExtended.class).stream()
                .filter(e -> e.holdId().equals(id))
                .mapToLong(Account.HoldExtended::added)
                .sum();
    long captured =
        f.renter.events(Account.Captured.class).stream()
            .filter(e -> e.holdId().equals(id))
            .mapToLong(Account.Captured::amount)
            .sum();
    List<Account.HoldReleased> released =
        f.renter.events(Account.HoldReleased.class).stream()
            .filter(e -> e.holdId().equals(id))
            .toList();
    assertEquals(charged, captured, "captured from the hold");
    assertEquals(1, released.size(), "released once");
    assertEquals(placed - charged, released.get(0).released(), "the rest released");
  }

  // ---------------------------------------------------------------------------------------------
  // Create: the hold and the match at once, both pending; nothing recorded before their answers

  private static final Duration CONFIRM_WITHIN = Rental.Settings.DEFAULT_CONFIRM_WITHIN;

  @Test
  void createAsksForAPendingHoldAndAMatchAtOnceAndRecordsNothingUntilTheyAnswer() {
    RentalFixture f = fixture();
    Spec spec = onDemand(CARDS, CEILING);
    f.create(spec);

    long hold = Metering.cost(CEILING, CARDS, 300);
    assertEquals(500_000, hold, "3 EUR per GPU-hour on 2 cards for 300 s");
    Matcher.Match match = f.expectMatch();
    assertEquals(
        new Matcher.Match(
            f.rentalId,
            f.renterId,
            GPU,
            CARDS,
            Listing.Tier.ON_DEMAND,
            REGION,
            CEILING,
            match.deadline(),
            CONFIRM_WITHIN,
            match.replyTo()),
        match);
    org.junit.jupiter.api.Assertions.assertNotNull(
        match.deadline(), "the matcher knows when the rental stops waiting");
    Account.PlaceHold placed = f.renter.expect(Account.PlaceHold.class, c -> true);
    assertEquals(new Account.PlaceHold(f.rentalId, hold, CONFIRM_WITHIN, placed.replyTo()), placed);
    f.awaitAccountEvent(Account.HoldPlaced.class);
    assertEquals(
        new Account.HoldPlaced(f.rentalId, hold, START, START.plus(CONFIRM_WITHIN)),
        f.renter.events(Account.HoldPlaced.class).get(0),
        "pending: it goes back unless the rental confirms it");
    assertEquals(List.of(), f.events(), "nothing recorded while the match is out");

    // No capacity now: the request is recorded alone, and the hold confirmed (a waiting rental).
    match.replyTo().tell(new Matcher.NoMatch(f.rentalId, "no host has the capacity now"));
    assertEquals(Rental.Status.PENDING, ok(f.creator.receiveMessage(RentalFixture.WAIT)).status());
    assertEquals(List.of(new Rental.Requested(f.renterId, spec, hold, START)), f.events());
    f.awaitAccountEvent(Account.HoldConfirmed.class);
    Account.HoldView view = ok(f.renter.hold(f.rentalId));
    assertEquals(new Account.HoldView(f.rentalId, hold, 0, 0, true), view);
    Account.Summary renter = f.renter.summary();
    assertEquals(hold, renter.held());
    assertEquals(DEPOSIT - hold, renter.available());
    assertEquals(Rental.Status.PENDING, f.get().status());
  }

  @Test
  void aLaunchRecordsTheRequestAndTheMatchInOneWriteThenConfirmsTheHoldBeforeTheStart() {
    RentalFixture f = fixture();
    Spec spec = onDemand(CARDS, CEILING);
    f.recordWrites();
    try {
      f.create(spec);
      f.expectMatch().replyTo().tell(new Matcher.Matched(f.rentalId, f.reservation(spec, FLOOR)));
      assertEquals(
          Rental.Status.PROVISIONING, ok(f.creator.receiveMessage(RentalFixture.WAIT)).status());
    } finally {
      f.stopRecording();
    }
    assertEquals(
        List.of(Rental.Requested.class, Rental.Matched.class),
        f.events().stream().map(Object::getClass).toList());
    assertEquals(
        List.of(List.of(Rental.Requested.class, Rental.Matched.class)),
        f.writes.stream().map(w -> w.stream().map(Object::getClass).toList()).toList(),
        "the request and its match are one atomic write");
    // The start goes out only once the account confirmed the hold: it may not expire under a
    // workload.
    f.host.expect(Host.StartWorkload.class);
    assertEquals(1, f.renter.events(Account.HoldConfirmed.class).size());
  }

  @Test
  void aLaunchLostBeforeItRecordedAnythingLeavesItsPendingHoldToExpire() {
    RentalFixture f = fixture();
    Spec spec = onDemand(CARDS, CEILING);
    f.create(spec);
    f.expectMatch(); // out when the node goes (its reservation expires at the host, likewise)
    f.awaitAccountEvent(Account.HoldPlaced.class);
    assertEquals(Rental.Empty.INSTANCE, f.kit.restart().state(), "nothing was recorded");
    assertEquals(List.of(), f.events());
    // The pending hold goes back by itself, once, and nothing was charged.
    f.clock.advance(CONFIRM_WITHIN);
    f.awaitAccountEvent(Account.HoldExpired.class);
    Account.Summary renter = f.renter.summary();
    assertEquals(0, renter.held());
    assertEquals(DEPOSIT, renter.available());
    assertEquals(1, f.renter.events(Account.HoldExpired.class).size());
    assertEquals(List.of(), f.events());
  }

  @Test
  void aMatchWhoseHoldExpiredBeforeItsConfirmationEndsUnstartedAndChargesNothing() {
    RentalFixture f = fixture();
    Spec spec = onDemand(CARDS, CEILING);
    f.renter.drop.set(c -> c instanceof Account.ConfirmHold); // the confirmations are lost
    f.create(spec);
    f.expectMatch().replyTo().tell(new Matcher.Matched(f.rentalId, f.reservation(spec, FLOOR)));
    assertEquals(
        Rental.Status.PROVISIONING, ok(f.creator.receiveMessage(RentalFixture.WAIT)).status());
    f.renter.expect(Account.ConfirmHold.class, c -> true);
    f.clock.advance(CONFIRM_WITHIN);
    f.awaitAccountEvent(Account.HoldExpired.class);
    f.renter.drop.set(c -> false); // the next confirmation arrives, too late

    Ended ended = f.awaitEvent(Ended.class);
    assertEquals(Rental.EndReason.PROVISIONING_FAILED, ended.reason());
    assertEquals(0, ended.billedSeconds());
    f.host.seen.fishForMessage(
        RentalFixture.WAIT,
        c ->
            c instanceof Host.StartWorkload
                ? org.apache.pekko.actor.testkit.typed.javadsl.FishingOutcomes.fail(
                    "started on a hold that went back")
                : c instanceof Host.ReleaseCards
                    ? org.apache.pekko.actor.testkit.typed.javadsl.FishingOutcomes.complete()
                    : org.apache.pekko.actor.testkit.typed.javadsl.FishingOutcomes
                        .continueAndIgnore());
    f.awaitState(Rental.Finished.class);
    Account.Summary renter = f.renter.summary();
    assertEquals(0, renter.held());
    assertEquals(DEPOSIT, renter.balance());
    assertEquals(0, renter.captured());
  }

  @Test
  void aStartRefusedBecauseTheReservationExpiredEndsUnstartedAndReleasesTheHold() {
    RentalFixture f = fixture();
    Spec spec = onDemand(CARDS, CEILING);
    f.host.startRefusal.set(Rejection.RESERVATION_EXPIRED);
    f.create(spec);
    f.expectMatch().replyTo().tell(new Matcher.Matched(f.rentalId, f.reservation(spec, FLOOR)));
    f.host.expect(Host.StartWorkload.class);

    Ended ended = f.awaitEvent(Ended.class);
    assertEquals(Rental.EndReason.PROVISIONING_FAILED, ended.reason());
    assertEquals(0, ended.billedSeconds());
    f.awaitState(Rental.Finished.class);
    assertHoldReleased(f, DEPOSIT, 0);
  }

  @Test
  void holdIsCappedByTheRentalsMaxTotal() {
    RentalFixture f = fixture();
    Spec spec = spec(Listing.Tier.ON_DEMAND, CARDS, CEILING, 123_456L, 30);
    f.create(spec);
    f.expectMatch().replyTo().tell(new Matcher.NoMatch(f.rentalId, "none"));
    f.awaitEvent(Rental.Requested.class);
    assertEquals(new Rental.Requested(f.renterId, spec, 123_456, START), f.events().get(0));
    assertEquals(123_456, ok(f.renter.hold(f.rentalId)).amount());
  }

  @Test
  void refusedHoldAnswersInsufficientFundsAndChargesNothing() {
    RentalFixture f = fixture(settings(), 100_000);
    f.create(onDemand(CARDS, CEILING));

    assertRejected(Rejection.INSUFFICIENT_FUNDS, f.creator.receiveMessage(RentalFixture.WAIT));
    Rental.RefusedRental refused = f.awaitState(Rental.RefusedRental.class);
    assertEquals(Rejection.INSUFFICIENT_FUNDS, refused.code());
    assertEquals(
        List.of(Rental.Requested.class, Rental.Refused.class),
        f.events().stream().map(Object::getClass).toList());
    View view = f.get();
    assertEquals(Rental.Status.REFUSED, view.status());
    assertEquals(0, view.cost());
    assertNull(view.terms());

    Account.Summary renter = f.renter.summary();
    assertEquals(100_000, renter.balance());
    assertEquals(0, renter.held());
    assertEquals(0, renter.captured());
    assertRejected(Rejection.HOLD_NOT_FOUND, f.renter.hold(f.rentalId));
    // The match was asked for with the hold; its reservation, when it comes, goes back at once.
    Matcher.Match match = f.expectMatch();
    Spec spec = onDemand(CARDS, CEILING);
    match.replyTo().tell(new Matcher.Matched(f.rentalId, f.reservation(spec, FLOOR)));
    f.host.expect(Host.ReleaseCards.class);
    f.matcher.expectNoMessage(Duration.ofMillis(200));

    assertEquals(refused, f.kit.restart().state());
    assertEquals(Rental.Status.REFUSED, ok(f.stop(f.renterId)).status());

    // A retried launch (an Idempotency-Key's retry reaches the same rental) gets the same refusal,
    // and nothing is placed or recorded again.
    int recorded = f.events().size();
    f.create(spec);
    assertRejected(Rejection.INSUFFICIENT_FUNDS, f.creator.receiveMessage(RentalFixture.WAIT));
    assertEquals(recorded, f.events().size());
    assertEquals(0, f.renter.summary().held());
  }

  /**
   * A rental that asks for outbound network says so to the matcher, at its launch and at every
   * later attempt while it waits, so that it only ever lands on a host that can give it.
   */
  @Test
  void aRentalWithNetworkAsksTheMatcherForAHostThatCanGiveIt() {
    RentalFixture f = fixture();
    Spec spec = RentalFixture.withNetwork(onDemand(CARDS, CEILING));
    f.create(spec);
    Matcher.Match first = f.expectMatch();
    assertTrue(first.network(), "at the launch");
    first.replyTo().tell(new Matcher.NoMatch(f.rentalId, "no host has the capacity now"));
    assertEquals(Rental.Status.PENDING, ok(f.creator.receiveMessage(RentalFixture.WAIT)).status());
    Matcher.Match again = f.expectMatch();
    assertTrue(again.network(), "while it waits");
    again.replyTo().tell(new Matcher.Matched(f.rentalId, f.reservation(spec, FLOOR)));
    assertTrue(f.host.expect(Host.StartWorkload.class).network(), "and the host starts it so");
  }

  /**
   * A rental that names a runtime asks the matcher for it at its launch and while it waits, and
   * keeps it through a restart (it is part of the recorded request); its view says it.
   */
  @Test
  void aRentalThatNamesARuntimeAsksTheMatcherForIt() {
    RentalFixture f = fixture();
    Spec spec = onDemand(CARDS, CEILING).withRuntime("docker");
    f.create(spec);
    Matcher.Match first = f.expectMatch();
    assertEquals("docker", first.runtime(), "at the launch");
    first.replyTo().tell(new Matcher.NoMatch(f.rentalId, "no host has the capacity now"));
    assertEquals("docker", ok(f.creator.receiveMessage(RentalFixture.WAIT)).spec().runtime());
    f.restart();
    Matcher.Match again = f.expectMatch();
    assertEquals("docker", again.runtime(), "while it waits, after a restart too");
    assertEquals(new dev.tickmark.engine.host.WorkloadNeeds(false, "docker"), again.needs());
  }

  @Test
  void aRetriedLaunchOfAMatchedRentalAnswersTheRentalAsItStands() {
    RentalFixture f = fixture();
    Spec spec = onDemand(CARDS, CEILING);
    f.create(spec);
    Matcher.Match match = f.expectMatch();
    match.replyTo().tell(new Matcher.Matched(f.rentalId, f.reservation(spec, FLOOR)));
    View first = ok(f.creator.receiveMessage(RentalFixture.WAIT));
    assertEquals(Rental.Status.PROVISIONING, first.status());
    int recorded = f.events().size();
    long held = f.renter.summary().held();

    f.create(spec);
    View again = ok(f.creator.receiveMessage(RentalFixture.WAIT));
    assertEquals(first.id(), again.id());
    assertEquals(Rental.Status.PROVISIONING, again.status());
    f.matcher.expectNoMessage(Duration.ofMillis(200));
    assertEquals(recorded, f.events().size(), "a retried launch records nothing");
    assertEquals(held, f.renter.summary().held(), "and places no second hold");
  }

  // ---------------------------------------------------------------------------------------------
  // Matching

  @Test
  void noMatchWithinWaitSecondsEndsNoCapacityAndReleasesTheHold() {
    RentalFixture f = fixture();
    f.create(spec(Listing.Tier.ON_DEMAND, CARDS, CEILING, null, 30));
    f.expectMatch().replyTo().tell(new Matcher.NoMatch(f.rentalId, "no host has the capacity now"));
    // The creator hears after the first attempt, then the rental keeps asking.
    assertEquals(Rental.Status.PENDING, ok(f.creator.receiveMessage(RentalFixture.WAIT)).status());
    f.awaitAccountEvent(Account.HoldConfirmed.class); // waiting, from the confirmed hold on
    f.clock.advance(Duration.ofSeconds(31));
    f.expectMatch().replyTo().tell(new Matcher.NoMatch(f.rentalId, "no host has the capacity now"));

    Ended ended = f.awaitEvent(Ended.class);
    assertEquals(new Ended(Rental.EndReason.NO_CAPACITY, at(31), 0, at(31)), ended);
    f.awaitState(Rental.Finished.class);
    assertHoldReleased(f, DEPOSIT, 0);
    assertConserved(f, 0);
    View view = f.get();
    assertEquals(Rental.Status.ENDED, view.status());
    assertEquals(Rental.EndReason.NO_CAPACITY, view.endReason());
    assertTrue(f.events(Rental.Settled.class).isEmpty());
  }

  @Test
  void aMatcherLostWithoutAnswerIsAskedAgain() {
    RentalFixture f = fixture();
    f.create(spec(Listing.Tier.ON_DEMAND, CARDS, CEILING, null, 30));
    Matcher.Match first = f.expectMatch(); // the matcher's node dies: no answer, ever
    Matcher.Match again = f.expectMatch(); // after twice the ask timeout the rental asks again
    assertEquals(first.rentalId(), again.rentalId());
    again.replyTo().tell(new Matcher.NoMatch(f.rentalId, "no host has the capacity now"));
    assertEquals(Rental.Status.PENDING, ok(f.creator.receiveMessage(RentalFixture.WAIT)).status());
  }

  @Test
  void silentMatcherEndsNoCapacityWhenTheWaitExpires() {
    RentalFixture f = fixture();
    f.create(spec(Listing.Tier.ON_DEMAND, CARDS, CEILING, null, 1));
    f.expectMatch(); // never answered: the wait timer (1 s) ends the rental
    assertEquals(Rental.EndReason.NO_CAPACITY, f.awaitEvent(Ended.class).reason());
    f.awaitState(Rental.Finished.class);
    assertHoldReleased(f, DEPOSIT, 0);
  }

  /** What a matcher answers while the host read side cannot be queried. */
  private static Matcher.Unavailable unavailable(RentalFixture f) {
    return new Matcher.Unavailable(f.rentalId, "the host read side is unavailable");
  }

  /**
   * A 1 s wait; the first attempt finds no capacity (the launch answers pending), then the read
   * side goes away: the clock passes the deadline and the real wait timer fires (1 s, while ten
   * attempts 200 ms apart are answered unavailable). The rental is still pending, still asking, and
   * holds what it held.
   */
  private Matcher.Match waitThroughAnOutagePastTheDeadline(RentalFixture f) {
    f.create(spec(Listing.Tier.ON_DEMAND, CARDS, CEILING, null, 1));
    f.expectMatch().replyTo().tell(new Matcher.NoMatch(f.rentalId, "no host has the capacity now"));
    assertEquals(Rental.Status.PENDING, ok(f.creator.receiveMessage(RentalFixture.WAIT)).status());
    f.awaitAccountEvent(Account.HoldConfirmed.class);
    f.clock.advance(Duration.ofSeconds(2));
    for (int i = 0; i < 10; i++) f.expectMatch().replyTo().tell(unavailable(f));
    Matcher.Match next = f.expectMatch();
    assertEquals(
        List.of(Rental.Requested.class),
        f.events().stream().map(Object::getClass).toList(),
        "not ended: " + f.events());
    assertEquals(Rental.Status.PENDING, f.get().status());
    assertEquals(Metering.cost(CEILING, CARDS, 300), f.renter.summary().held());
    return next;
  }

  @Test
  void aReadSideOutagePastTheWaitDeadlineDoesNotEndNoCapacityARealEmptyAnswerThenDoes() {
    RentalFixture f = fixture();
    Matcher.Match match = waitThroughAnOutagePastTheDeadline(f);
    // The read side is back and really has nothing: now the wait is over.
    match.replyTo().tell(new Matcher.NoMatch(f.rentalId, "no host has the capacity now"));
    Ended ended = f.awaitEvent(Ended.class);
    assertEquals(Rental.EndReason.NO_CAPACITY, ended.reason());
    assertEquals(0, ended.billedSeconds());
    f.awaitState(Rental.Finished.class);
    assertHoldReleased(f, DEPOSIT, 0);
    assertConserved(f, 0);
  }

  @Test
  void aReadSideOutagePastTheWaitDeadlineStillMatchesWhenCapacityAppears() {
    RentalFixture f = fixture();
    Spec spec = spec(Listing.Tier.ON_DEMAND, CARDS, CEILING, null, 1);
    Matcher.Match match = waitThroughAnOutagePastTheDeadline(f);
    // Past its wait, the rental still asks for what it asked (no deadline the matcher would drop it
    // on).
    assertNull(match.deadline(), "past the wait, the request must not be dropped as expired");
    match.replyTo().tell(new Matcher.Matched(f.rentalId, f.reservation(spec, FLOOR)));
    f.awaitState(Rental.Provisioning.class);
    assertTrue(f.events(Ended.class).isEmpty(), () -> "not ended: " + f.events());
    f.host.expect(Host.StartWorkload.class);
    f.tell(new Rental.WorkloadStarted(f.hostId, f.clock.instant()));
    assertEquals(Rental.Status.RUNNING, f.get().status());
  }

  @Test
  void aLaunchWhoseFirstMatchFindsTheReadSideUnavailableAnswersUnavailableOnceItsHoldIsReleased() {
    // A long ask timeout: the launch's own timer (half of it) and the retry it starts must not run
    // before this test answers the first match, or a loaded machine sends a second one while the
    // rental still waits (seen in CI), which is not what this test is about.
    RentalFixture f = fixture(withAskTimeout(settings(), Duration.ofSeconds(30)), DEPOSIT);
    f.create(onDemand(CARDS, CEILING));
    f.expectMatch().replyTo().tell(unavailable(f));

    // Not a 201 for a rental that would wait on a read side it cannot reach: the launch is refused
    // (HTTP 503) ...
    assertRejected(Rejection.UNAVAILABLE, f.creator.receiveMessage(RentalFixture.WAIT));
    // ... and by the time it hears so, the rental has ended cancelled, charged nothing, and its
    // hold is released,
    // so a retry with the same Idempotency-Key (a new rental) never finds a second hold beside it.
    assertInstanceOf(Rental.Finished.class, f.kit.getState());
    Ended ended = f.awaitEvent(Ended.class);
    assertEquals(Rental.EndReason.CANCELLED, ended.reason());
    assertEquals(0, ended.billedSeconds());
    assertTrue(f.events(Rental.Settled.class).isEmpty());
    assertHoldReleased(f, DEPOSIT, 0);
    assertConserved(f, 0);
    assertEquals(Rental.Status.ENDED, f.get().status());
    // One match asked for in all. Seen twice in CI before it was fixed: the launch recorded its
    // request with the matcher's answer in hand, asked for the hold, then handed itself that
    // answer;
    // when the account answered in between, the hold's answer asked the matcher again.
    f.matcher.expectNoMessage(Duration.ofMillis(500));
  }

  @Test
  void matchAnsweredAfterTheRentalEndedReleasesTheReservedCards() {
    RentalFixture f = fixture();
    Spec spec = onDemand(CARDS, CEILING);
    f.create(spec);
    Matcher.Match match = f.expectMatch();
    View stopping = f.stop();
    assertEquals(Rental.EndReason.CANCELLED, stopping.endReason());
    f.awaitState(Rental.Finished.class);

    // The matcher was mid-proposal: the host reserved cards for a rental that no longer wants them.
    match.replyTo().tell(new Matcher.Matched(f.rentalId, f.reservation(spec, FLOOR)));
    assertEquals(f.rentalId, f.host.expect(Host.ReleaseCards.class).rentalId());
    assertInstanceOf(Rental.Finished.class, f.kit.getState());
    assertHoldReleased(f, DEPOSIT, 0);
  }

  /**
   * Findings D and G of the simulation: a host asks the rental of a reservation it never heard
   * confirmed whether it still wants it. Waiting for a match it may (the answer may be on its way);
   * matched to that host it does, running there it confirms it; matched elsewhere, closed or never
   * created it never will.
   */
  @Test
  void aHostAskingAboutItsReservationHearsWhetherTheRentalStillWantsIt() {
    RentalFixture f = fixture();
    assertEquals(
        new Host.ReservationWanted(f.rentalId, false, false),
        checkReservation(f, f.hostId),
        "no such rental");
    Spec spec = onDemand(CARDS, CEILING);
    f.create(spec);
    Matcher.Match match = f.expectMatch();
    assertEquals(new Host.ReservationWanted(f.rentalId, true, false), checkReservation(f, "h-9"));
    match.replyTo().tell(new Matcher.Matched(f.rentalId, f.reservation(spec, FLOOR)));
    f.awaitState(Rental.Provisioning.class);
    assertEquals(
        new Host.ReservationWanted(f.rentalId, true, false), checkReservation(f, f.hostId));
    assertEquals(
        new Host.ReservationWanted(f.rentalId, false, false),
        checkReservation(f, "h-9"),
        "matched elsewhere");
    f.tell(new Rental.WorkloadStarted(f.hostId, f.clock.instant()));
    assertEquals(
        new Host.ReservationWanted(f.rentalId, true, true, null, f.get().startedAt()),
        checkReservation(f, f.hostId));
    f.stop();
    assertEquals(
        new Host.ReservationWanted(f.rentalId, true, false),
        checkReservation(f, f.hostId),
        "stopping: it releases the cards itself");
    f.agentStopped();
    f.awaitState(Rental.Finished.class);
    assertEquals(
        new Host.ReservationWanted(f.rentalId, false, false), checkReservation(f, f.hostId));
  }

  /**
   * The agent's {@code listed_from} and the rental's start go to the host with the confirmation of
   * the cards, and with the answer that the workload runs there, also after a restart of the
   * rental: the host uses them to tell a heartbeat that omits a gone workload from one built before
   * the workload ran, and to bound its bill.
   */
  @Test
  void theAgentsListedFromReachesTheHostWithTheConfirmationAndSurvivesARestart() {
    RentalFixture f = fixture();
    Instant listedFrom = f.clock.instant().minusSeconds(30); // the agent's clock, not this one
    f.running(onDemand(CARDS, CEILING), FLOOR, listedFrom);

    Host.ConfirmCards confirm = f.host.expect(Host.ConfirmCards.class);
    assertEquals(f.rentalId, confirm.rentalId());
    assertEquals(listedFrom, confirm.listedFrom());
    Instant startedAt = f.get().startedAt();
    assertEquals(startedAt, confirm.startedAt());
    assertEquals(
        new Host.ReservationWanted(f.rentalId, true, true, listedFrom, startedAt),
        checkReservation(f, f.hostId));
    f.restart();
    assertEquals(
        new Host.ReservationWanted(f.rentalId, true, true, listedFrom, startedAt),
        checkReservation(f, f.hostId));
  }

  /**
   * Simulation seed 109 (+steps-back, 20,000 steps): the confirmation was lost and the host
   * restarted before any heartbeat of its new incarnation listed the workload, so the host could
   * not see one omit it, and the rental was billed 45 s past the heartbeat that did. A host that
   * answers so proves nothing; the rental tells it again and settles once the host knows.
   */
  @Test
  void aHostThatWasNeverToldTheWorkloadRunsProvesNothingUntilItIsToldAgain() {
    RentalFixture f = fixture();
    f.host.liveness.set(now -> new Host.Liveness(true, now, null, null, true));
    f.running(onDemand(CARDS, CEILING), FLOOR);
    f.host.expect(Host.ConfirmCards.class); // at the start: lost, as far as the host knows
    int asked = f.host.livenessAsks.get();
    f.clock.advance(Duration.ofSeconds(25));
    Host.ConfirmCards again = f.host.expect(Host.ConfirmCards.class);
    assertEquals(f.rentalId, again.rentalId());
    assertEquals(f.get().startedAt(), again.startedAt());
    assertTrue(f.host.livenessAsks.get() > asked, "the host was asked");
    assertEquals(List.of(), f.checkpointSeconds(), "nothing settled on an unconfirmed host's word");

    f.host.liveness.set(now -> new Host.Liveness(true, now, now, null, false));
    f.clock.advance(Duration.ofSeconds(5));
    f.awaitCheckpoints(30L);
  }

  private static Host.ReservationWanted checkReservation(RentalFixture f, String hostId) {
    return f.kit
        .<Host.ReservationWanted>runCommand(r -> new Rental.CheckReservation(hostId, r))
        .reply();
  }

  @Test
  void matchFreezesTheHostsFloorNotTheCeilingAndStartsTheWorkload() {
    RentalFixture f = fixture();
    Spec spec = onDemand(CARDS, CEILING);
    f.create(spec);
    f.expectMatch().replyTo().tell(new Matcher.Matched(f.rentalId, f.reservation(spec, FLOOR)));

    View created = ok(f.creator.receiveMessage(RentalFixture.WAIT));
    assertEquals(Rental.Status.PROVISIONING, created.status());
    Rental.Terms terms =
        new Rental.Terms(f.hostId, f.providerId, List.of(0, 1), FLOOR, false, START, REGION);
    assertEquals(terms, created.terms());
    assertEquals(new Rental.Matched(terms, START), f.events().get(1));
    assertEquals(
        new Rental.Provisioning(
            new Rental.Order(f.renterId, spec, Metering.cost(CEILING, CARDS, 300), START),
            terms,
            null),
        f.kit.getState());

    Host.StartWorkload start = f.host.expect(Host.StartWorkload.class);
    assertEquals(
        new Host.StartWorkload(
            f.rentalId, spec.image(), spec.command(), spec.sshPublicKey(), false, start.replyTo()),
        start);
  }

  // ---------------------------------------------------------------------------------------------
  // Provisioning

  @Test
  void workloadFailureEndsProvisioningFailedChargingNothing() {
    RentalFixture f = fixture();
    Spec spec = onDemand(CARDS, CEILING);
    f.create(spec);
    f.expectMatch().replyTo().tell(new Matcher.Matched(f.rentalId, f.reservation(spec, FLOOR)));
    f.host.expect(Host.StartWorkload.class);

    assertTrue(
        f.kit
            .runCommand(new Rental.WorkloadFailed("some-other-host", "image pull failed"))
            .hasNoEvents());
    f.clock.advance(Duration.ofSeconds(4));
    var failed = f.kit.runCommand(new Rental.WorkloadFailed(f.hostId, "image pull failed"));
    // The fixture's accounts and host answer at once, so Closed may already follow.
    assertEquals(
        new Ended(Rental.EndReason.PROVISIONING_FAILED, at(4), 0, at(4)), failed.events().get(0));

    assertEquals(f.rentalId, f.host.expect(Host.StopWorkload.class).rentalId());
    assertEquals(f.rentalId, f.host.expect(Host.ReleaseCards.class).rentalId());
    f.awaitState(Rental.Finished.class);
    assertHoldReleased(f, DEPOSIT, 0);
    assertConserved(f, 0);
    assertTrue(f.events(Rental.Settled.class).isEmpty());
    View view = f.get();
    assertEquals(0, view.billedSeconds());
    assertEquals(0, view.cost());
  }

  @Test
  void provisioningTimeoutEndsProvisioningFailedAndStopsALateWorkload() {
    RentalFixture f =
        fixture(RentalFixture.withProvisioningTimeout(settings(), Duration.ofMillis(500)), DEPOSIT);
    Spec spec = onDemand(CARDS, CEILING);
    f.create(spec);
    f.expectMatch().replyTo().tell(new Matcher.Matched(f.rentalId, f.reservation(spec, FLOOR)));
    f.host.expect(Host.StartWorkload.class);

    assertEquals(Rental.EndReason.PROVISIONING_FAILED, f.awaitEvent(Ended.class).reason());
    f.host.expect(Host.ReleaseCards.class);
    f.awaitState(Rental.Finished.class);
    assertHoldReleased(f, DEPOSIT, 0);

    // The agent starts it after all: it is stopped again, and nothing is metered.
    var late = f.kit.runCommand(new Rental.WorkloadStarted(f.hostId, f.clock.instant()));
    assertTrue(late.hasNoEvents());
    assertEquals(f.rentalId, f.host.expect(Host.StopWorkload.class).rentalId());
    assertConserved(f, 0);
  }

  @Test
  void refusedStartIsRetriedUntilTheHostTakesIt() {
    RentalFixture f = fixture();
    f.host.startRefusal.set(Rejection.HOST_NOT_AVAILABLE);
    Spec spec = onDemand(CARDS, CEILING);
    f.create(spec);
    f.expectMatch().replyTo().tell(new Matcher.Matched(f.rentalId, f.reservation(spec, FLOOR)));
    f.host.expect(Host.StartWorkload.class);
    f.host.startRefusal.set(null);
    f.host.expect(Host.StartWorkload.class);
    f.kit.runCommand(new Rental.WorkloadStarted(f.hostId, f.clock.instant()));
    assertEquals(Rental.Status.RUNNING, f.get().status());
  }

  // ---------------------------------------------------------------------------------------------
  // Running: metering and settlements

  @Test
  void settlesCumulativeCheckpointsDeliveredToBothAccountsUnderOneKey() {
    RentalFixture f = fixture();
    View running = f.running(onDemand(CARDS, CEILING), FLOOR);
    assertEquals(START, running.startedAt());
    assertEquals(f.rentalId, f.host.expect(Host.ConfirmCards.class).rentalId());

    f.clock.advance(Duration.ofSeconds(10));
    f.awaitCheckpoints(10L);
    Checkpoint first = checkpoint(FLOOR, CARDS, 10, at(10));
    assertEquals(first, f.lastCheckpoint());
    assertEquals(16_055, first.cost(), "2.89 EUR per GPU-hour on 2 cards for 10 s");
    f.awaitAssert(() -> assertConserved(f, first.cost()));

    f.clock.advance(Duration.ofSeconds(7)); // 17 s: less than an interval since the last checkpoint
    f.clock.advance(Duration.ofMillis(5_900)); // 22.9 s: whole seconds only
    f.awaitCheckpoints(10L, 22L);
    Checkpoint second = checkpoint(FLOOR, CARDS, 22, at(22).plusMillis(900));
    assertEquals(second, f.lastCheckpoint());
    f.awaitAssert(() -> assertConserved(f, second.cost()));

    // Both accounts posted each checkpoint once, cumulatively, under the key rentalId:second.
    List<Account.Captured> captures = f.renter.events(Account.Captured.class);
    assertEquals(
        List.of(
            new Account.Captured(f.rentalId, 10, first.cost(), first.cost(), at(10)),
            new Account.Captured(
                f.rentalId,
                22,
                second.cost(),
                second.cost() - first.cost(),
                at(22).plusMillis(900))),
        captures);
    List<Account.EarningsCredited> credits = f.provider.events(Account.EarningsCredited.class);
    assertEquals(
        List.of(
            new Account.EarningsCredited(
                f.rentalId,
                10,
                first.provider(),
                first.platform(),
                first.provider(),
                first.platform(),
                false,
                at(10)),
            new Account.EarningsCredited(
                f.rentalId,
                22,
                second.provider(),
                second.platform(),
                second.provider() - first.provider(),
                second.platform() - first.platform(),
                false,
                at(22).plusMillis(900))),
        credits);
    Account.Posting captureAgain = ok(f.renter.capture(f.rentalId, 22, second.cost()));
    assertEquals(
        new Account.Posting(f.rentalId + ":22", second.cost() - first.cost(), true), captureAgain);
    Account.Posting creditAgain =
        ok(f.provider.credit(f.rentalId, 22, second.provider(), second.platform(), false));
    assertEquals(
        new Account.Posting(f.rentalId + ":22", second.provider() - first.provider(), true),
        creditAgain);

    View view = f.get();
    assertEquals(22, view.billedSeconds());
    assertEquals(second.cost(), view.cost());
    assertEquals(List.of(first, second), view.checkpoints());
  }

  @Test
  void stopByTheRenterBillsToTheStopInstantReleasesTheHoldAndCloses() {
    RentalFixture f = fixture();
    f.running(onDemand(CARDS, CEILING), FLOOR);
    f.clock.advance(Duration.ofSeconds(10));
    f.awaitCheckpoints(10L);
    f.clock.advance(Duration.ofMillis(13_700));

    View stopping = f.stop();
    assertEquals(Rental.Status.STOPPING, stopping.status());
    assertEquals(Rental.EndReason.STOPPED_BY_RENTER, stopping.endReason());
    assertEquals(23, stopping.billedSeconds());
    assertEquals(cost(23), stopping.cost());
    Instant stopAt = at(23).plusMillis(700);
    // The final checkpoint follows the host's next word (the fake host's heartbeat is always now).
    f.awaitAssert(() -> assertEquals(List.of(10L, 23L), f.checkpointSeconds()));
    assertEquals(
        new Ended(Rental.EndReason.STOPPED_BY_RENTER, stopAt, 23, stopAt),
        f.awaitEvent(Ended.class));

    assertEquals(f.rentalId, f.host.expect(Host.StopWorkload.class).rentalId());
    assertFalse(f.host.expect(Host.ReleaseCards.class).hostLost(), "not lost: the renter stopped");
    f.awaitAssert(() -> assertHoldReleased(f, DEPOSIT, cost(23)));
    f.awaitAssert(() -> assertConserved(f, cost(23)));
    List<Account.EarningsCredited> credits = f.provider.events(Account.EarningsCredited.class);
    assertTrue(
        credits.get(credits.size() - 1).last(), "the final credit closes the source: " + credits);
    assertEquals(1, credits.stream().filter(Account.EarningsCredited::last).count());

    // Metering is over, the rental waits for the agent to confirm the stop.
    assertInstanceOf(Rental.Ending.class, f.kit.getState());
    f.agentStopped();
    f.awaitState(Rental.Finished.class);
    View ended = f.get();
    assertEquals(Rental.Status.ENDED, ended.status());
    assertEquals(stopAt, ended.endedAt());
    assertEquals(23, ended.billedSeconds());
    assertEquals(cost(23), ended.cost());
    f.clock.advance(Duration.ofSeconds(60));
    assertEquals(23, f.get().billedSeconds(), "an ended rental's bill does not grow");
  }

  // ---------------------------------------------------------------------------------------------
  // Refunds: an operator gives back what a closed rental charged, split back like the charge

  @Test
  void anOperatorRefundsAClosedRentalInPartsSplitLikeItsChargeAndNeverBeyondIt() {
    RentalFixture f = fixture();
    f.running(onDemand(CARDS, CEILING), FLOOR);
    f.clock.advance(Duration.ofSeconds(10));
    f.awaitCheckpoints(10L);
    assertRejected(Rejection.RENTAL_NOT_ENDED, f.refund("ticket-0", 1L));
    f.clock.advance(Duration.ofSeconds(13));
    f.stopUntilClosed();
    long charged = cost(23);
    Checkpoint charge = checkpoint(FLOOR, CARDS, 23, at(23));
    f.awaitAssert(() -> assertConserved(f, charged));

    // A third: the provider gives back floor(third × its share / charge), the platform the rest.
    long third = charged / 3;
    Rental.RefundView first = ok(f.refund("ticket-1", third));
    long providerBack = third * charge.provider() / charge.cost();
    assertEquals(third, first.amount());
    assertEquals(charged, first.charged());
    assertEquals(third, first.cumulativeRefunded());
    assertEquals(providerBack, first.providerReversed());
    assertEquals(third - providerBack, first.platformReversed());
    assertEquals(f.renterId, first.renterId());
    assertEquals(f.providerId, first.providerId());
    // Answered once both accounts have it: they show it at once.
    assertEquals(DEPOSIT - charged + third, f.renter.summary().balance());
    assertEquals(charge.provider() - providerBack, f.provider.summary().earnings());
    assertEquals(
        charge.platform() - (third - providerBack), f.provider.summary().platformCredited());
    assertEquals(third, f.get().refunded());

    // The same reference again is the same refund, and moves nothing; another amount under it is a
    // conflict; more than is left is refused.
    assertEquals(first, ok(f.refund("ticket-1", third)));
    assertEquals(first, ok(f.refund("ticket-1", null)));
    assertRejected(Rejection.IDEMPOTENCY_CONFLICT, f.refund("ticket-1", third + 1));
    assertRejected(Rejection.REFUND_EXCEEDS_CHARGE, f.refund("ticket-2", charged - third + 1));
    assertRejected(Rejection.INVALID_AMOUNT, f.refund("ticket-2", 0L));
    assertEquals(1, f.renter.events(Account.ChargeRefunded.class).size());
    assertEquals(1, f.provider.events(Account.EarningsReversed.class).size());

    // The rest: every µ€ of the charge is back, and the provider's and platform's shares are back
    // exactly (the cumulative split, whatever the parts' rounding).
    Rental.RefundView rest = ok(f.refund("ticket-2", null));
    assertEquals(charged - third, rest.amount());
    assertEquals(charged, rest.cumulativeRefunded());
    assertEquals(charge.provider(), rest.providerReversed());
    assertEquals(charge.platform(), rest.platformReversed());
    assertEquals(DEPOSIT, f.renter.summary().balance());
    assertEquals(0, f.provider.summary().earnings());
    assertEquals(0, f.provider.summary().platformCredited());
    assertRejected(Rejection.REFUND_EXCEEDS_CHARGE, f.refund("ticket-3", null));

    // The view carries the refunds across nodes (the edge asks the rental wherever it runs).
    View refundedView = f.get();
    assertEquals(
        List.of("ticket-1", "ticket-2"),
        refundedView.refunds().stream().map(Rental.Refunded::reference).toList());
    assertEquals(
        refundedView,
        new org.apache.pekko.actor.testkit.typed.javadsl.SerializationTestKit(testKit.system())
            .verifySerialization(refundedView, true));

    // After a crash the rental knows its refunds and sends the latest again: nothing moves twice.
    f.restart();
    assertEquals(charged, f.get().refunded());
    assertEquals(rest, ok(f.refund("ticket-2", null)));
    assertEquals(DEPOSIT, f.renter.summary().balance());
    assertEquals(2, f.renter.events(Account.ChargeRefunded.class).size());
    assertEquals(2, f.provider.events(Account.EarningsReversed.class).size());
  }

  @Test
  void aRefundAnAccountDidNotAcknowledgeIsSentAgainAndAnsweredOnceItIs() {
    RentalFixture f = fixture();
    f.running(onDemand(CARDS, CEILING), FLOOR);
    f.clock.advance(Duration.ofSeconds(5));
    f.stopUntilClosed();
    long charged = cost(5);
    f.awaitAssert(() -> assertConserved(f, charged));

    // The provider's account loses the first reversal: the operator waits, the rental retries.
    java.util.concurrent.atomic.AtomicInteger lost =
        new java.util.concurrent.atomic.AtomicInteger();
    f.provider.drop.set(c -> c instanceof Account.ReverseEarnings && lost.getAndIncrement() == 0);
    TestProbe<StatusReply<Rental.RefundView>> operator = testKit.createTestProbe();
    f.tell(new Rental.Refund("ticket-9", null, "host broke down", operator.getRef()));
    Rental.RefundView view = ok(operator.receiveMessage(RentalFixture.WAIT.multipliedBy(3)));
    assertEquals(charged, view.cumulativeRefunded());
    assertTrue(lost.get() >= 2, "sent again after the loss: " + lost.get());
    assertEquals(1, f.provider.events(Account.EarningsReversed.class).size());
    assertEquals(DEPOSIT, f.renter.summary().balance());
    assertEquals(0, f.provider.summary().earnings());
  }

  @Test
  void aRefusedRentalHasNothingToRefundAndAnUnknownOneIsNotFound() {
    RentalFixture f = fixture(settings(), 100_000);
    f.create(onDemand(CARDS, CEILING));
    assertRejected(Rejection.INSUFFICIENT_FUNDS, f.creator.receiveMessage(RentalFixture.WAIT));
    f.awaitState(Rental.RefusedRental.class);
    assertRejected(Rejection.REFUND_EXCEEDS_CHARGE, f.refund("ticket-1", null));

    RentalFixture unknown = fixture();
    assertRejected(Rejection.NOT_FOUND, unknown.refund("ticket-1", null));
  }

  @Test
  void settlesOnlyUpToTheHostsLastHeartbeat() {
    RentalFixture f = fixture();
    f.running(onDemand(CARDS, CEILING), FLOOR);
    Instant lastHeartbeat = at(15).plusMillis(400);
    f.host.liveness.set(now -> new Host.Liveness(true, lastHeartbeat));
    f.clock.advance(Duration.ofSeconds(40));
    f.awaitCheckpoints(15L);
    f.awaitAssert(() -> assertConserved(f, cost(15)));

    // The heartbeat catches up: so does the settlement.
    f.host.liveness.set(now -> new Host.Liveness(true, now));
    f.awaitCheckpoints(15L, 40L);
  }

  @Test
  void aHostThatNeverAnswersIsNotSettledPastItsLastHeartbeat() {
    RentalFixture f =
        fixture(RentalFixture.withAskTimeout(settings(), Duration.ofMillis(300)), DEPOSIT);
    f.running(onDemand(CARDS, CEILING), FLOOR);
    // The host's entity does not answer (its shard is moving after a node loss): every liveness ask
    // times out.
    f.host.holdLiveness.set(true);
    f.clock.advance(Duration.ofSeconds(40));
    int asks = f.host.livenessAsks.get();
    f.awaitAssert(
        () ->
            assertTrue(
                f.host.livenessAsks.get() >= asks + 2 || !f.checkpointSeconds().isEmpty(),
                "asked again (so a timed-out ask was handled), or settled"));
    assertEquals(List.of(), f.checkpointSeconds(), "no answer, no settlement");
    assertEquals(0, f.renter.summary().captured());

    // The host answers again, with a heartbeat 25 s in: the settlement goes that far and no
    // further.
    Instant lastHeartbeat = at(25);
    f.host.liveness.set(now -> new Host.Liveness(true, lastHeartbeat));
    f.host.letLivenessThrough();
    f.awaitCheckpoints(25L);
    f.awaitAssert(() -> assertConserved(f, cost(25)));
  }

  @Test
  void aHostThatAnswersOfflineWithNoHeartbeatIsNotSettled() {
    RentalFixture f = fixture();
    f.running(onDemand(CARDS, CEILING), FLOOR);
    f.host.liveness.set(now -> new Host.Liveness(false, null));
    f.clock.advance(Duration.ofSeconds(40));
    int asks = f.host.livenessAsks.get();
    f.awaitAssert(
        () ->
            assertTrue(
                f.host.livenessAsks.get() >= asks + 2 || !f.checkpointSeconds().isEmpty(),
                "asked twice (so the first answer was handled), or settled"));
    assertEquals(List.of(), f.checkpointSeconds(), "an answer with no heartbeat proves no second");
    assertEquals(0, f.renter.summary().captured());
    assertEquals(0, f.provider.summary().credited());
  }

  /**
   * Failover (issue 15): a running rental's question to its host went to an entity on a node that
   * was lost, and is never answered. The rental asks again within a few seconds however long the
   * ask timeout is, so it settles again soon after the host's entity starts on a survivor.
   */
  @Test
  void anUnansweredLivenessQuestionIsAskedAgainWithoutWaitingOutALongAskTimeout() {
    RentalFixture f = fixture(withAskTimeout(settings(), Duration.ofSeconds(30)), DEPOSIT);
    f.running(onDemand(CARDS, CEILING), FLOOR);
    f.host.holdLiveness.set(true); // unanswered, as by an entity on a lost node
    f.clock.advance(Duration.ofSeconds(12));
    f.awaitAssert(() -> assertEquals(1, f.host.heldLivenessAsks(), "asked once"));
    long asked = System.nanoTime();
    f.awaitAssert(() -> assertEquals(2, f.host.heldLivenessAsks(), "asked again"));
    Duration between = Duration.ofNanos(System.nanoTime() - asked);
    assertTrue(
        between.compareTo(Rental.LIVENESS_ASK_AT_MOST.plusSeconds(3)) < 0,
        "asked again after " + between + ", not after the 30 s ask timeout");
    f.host.letLivenessThrough();
    f.awaitCheckpoints(12L);
  }

  /**
   * Failover: the rental's question went unanswered (to its host's entity on a lost node); when the
   * host's agent attaches to the entity's new incarnation, the host tells its rentals, and the
   * rental asks at once rather than after the earlier question's timeout. Two answers settle once.
   */
  @Test
  void whenItsHostsAgentAttachesARentalAsksAtOnceThoughAQuestionIsUnanswered() {
    RentalFixture f = fixture();
    f.running(onDemand(CARDS, CEILING), FLOOR);
    f.host.holdLiveness.set(true); // unanswered, as by an entity on a lost node
    f.clock.advance(Duration.ofSeconds(12));
    f.awaitAssert(() -> assertEquals(1, f.host.heldLivenessAsks(), "asked once"));
    long attached = System.nanoTime();
    f.tell(new Rental.HostAttached(f.host.id));
    f.awaitAssert(() -> assertEquals(2, f.host.heldLivenessAsks(), "asked again"));
    Duration between = Duration.ofNanos(System.nanoTime() - attached);
    // The first question times out 2 s after it went (LIVENESS_ASK_AT_MOST), at least 1.8 s after
    // it was seen here; an answer to the attach takes milliseconds.
    assertTrue(
        between.compareTo(Duration.ofSeconds(1)) < 0,
        "asked again " + between + " after the attach, not once the first question timed out");
    f.host.letLivenessThrough();
    f.awaitCheckpoints(12L);
    f.awaitAssert(() -> assertConserved(f, cost(12)));
    assertEquals(List.of(12L), f.checkpointSeconds(), "both answers, one checkpoint");
  }

  @Test
  void aLivenessAnswerThatArrivesAfterTheStopSettlesNothingMore() {
    RentalFixture f = fixture();
    f.running(onDemand(CARDS, CEILING), FLOOR);
    f.host.holdLiveness.set(true);
    f.clock.advance(Duration.ofSeconds(12));
    f.awaitAssert(() -> assertEquals(1, f.host.heldLivenessAsks(), "a liveness ask is on its way"));
    View stopping = f.stop();
    assertEquals(12, stopping.billedSeconds());
    // The answer (a heartbeat that claims the host is still going, 30 s later) reaches the rental
    // after the stop.
    f.clock.advance(Duration.ofSeconds(30));
    f.host.letLivenessThrough();
    f.agentStopped();
    f.awaitState(Rental.Finished.class);
    assertEquals(List.of(12L), f.checkpointSeconds(), "settled to the stop instant once");
    assertEquals(12, f.get().billedSeconds());
    assertHoldReleased(f, DEPOSIT, cost(12));
    assertConserved(f, cost(12));
  }

  @Test
  void checkpointsStayASettleIntervalApartWhenHeartbeatsLagTheClock() {
    RentalFixture f = fixture();
    f.running(onDemand(CARDS, CEILING), FLOOR);
    // Heartbeats every 5 s, at 2, 7, 12, 17 ... seconds into the rental.
    f.host.liveness.set(
        now -> {
          long second = RentalBilling.secondsBetween(at(0), now);
          return new Host.Liveness(true, second < 2 ? at(0) : at(second - (second - 2) % 5));
        });
    f.clock.advance(
        Duration.ofSeconds(10)); // heard up to 7: too little since the start to checkpoint
    int asks = f.host.livenessAsks.get();
    f.awaitAskedTwiceSince(asks, "asked twice, so the first answer was handled");
    assertEquals(List.of(), f.checkpointSeconds());
    f.clock.advance(Duration.ofSeconds(2)); // heard up to 12
    f.awaitCheckpoints(12L);
    f.clock.advance(Duration.ofSeconds(11)); // at 23, heard up to 22
    f.awaitCheckpoints(12L, 22L);
    f.awaitAssert(() -> assertConserved(f, cost(22)));
  }

  @Test
  void underTheNodesLoadCheckpointsComeAStretchedIntervalApartAndStayExact() {
    Settings s = settings();
    // 10 s, growing from 1,000,000 running rentals on the node, up to 40 s (the 300 s hold allows
    // 75 s).
    Settings stretching =
        new Settings(
            s.settleInterval(),
            s.holdSeconds(),
            s.feeBps(),
            s.provisioningTimeout(),
            s.stopTimeout(),
            s.retryInterval(),
            s.askTimeout(),
            s.maxWakeGap(),
            Duration.ofSeconds(40),
            1_000_000);
    // A system of its own: its node metrics count this rental's wakes and load alone.
    ActorTestKit own = ActorTestKit.create("RentalStretchTest", CONFIG);
    try {
      EngineMetrics metrics = EngineMetrics.get(own.system());
      RentalFixture f = new RentalFixture(own, stretching, DEPOSIT);
      f.running(onDemand(CARDS, CEILING), FLOOR);
      f.awaitAssert(() -> assertEquals(1, metrics.runningRentals.sum(), "this rental runs"));
      // The node runs 3,000,000 more rentals: settle every 30 s.
      metrics.runningRentals.add(3_000_000);
      f.clock.advance(Duration.ofSeconds(29));
      long wakes = metrics.rentalWakes.sum();
      f.awaitAssert(
          () ->
              assertTrue(
                  metrics.rentalWakes.sum() >= wakes + 2, "woke at 29 s, the heartbeat at 29 s"));
      assertEquals(List.of(), f.checkpointSeconds(), "29 s: not due under this load");
      f.clock.advance(Duration.ofSeconds(1));
      f.awaitCheckpoints(30L);
      // The load is gone: back to 10 s.
      metrics.runningRentals.add(-3_000_000);
      f.clock.advance(Duration.ofSeconds(10));
      f.awaitCheckpoints(30L, 40L);
      f.awaitAssert(() -> assertConserved(f, cost(40)));
    } finally {
      own.shutdownTestKit();
    }
  }

  @Test
  void aStopAfterTheHostFellSilentBillsOnlyToItsLastHeartbeat() {
    Settings settings =
        new Settings(
            Duration.ofSeconds(10),
            300,
            FEE,
            Duration.ofSeconds(30),
            Duration.ofSeconds(2),
            Duration.ofMillis(200),
            Duration.ofSeconds(2),
            Duration.ofSeconds(1)); // wakes every second to see the hand-moved clock
    RentalFixture f = fixture(settings, DEPOSIT);
    f.running(onDemand(CARDS, CEILING), FLOOR);
    f.clock.advance(Duration.ofSeconds(10));
    f.awaitCheckpoints(10L);
    // The host dies 15 s in; before its heartbeat timeout notices, the renter stops the rental at
    // 22 s.
    f.host.liveness.set(now -> new Host.Liveness(true, at(15)));
    f.clock.advance(Duration.ofSeconds(12));
    View stopping = f.stop();
    assertEquals(Rental.Status.STOPPING, stopping.status());

    // No heartbeat at or after the stop, no report from the agent: after its stop timeout, billed
    // to the last heartbeat.
    Rental.Finished finished = (Rental.Finished) f.awaitState(Rental.Finished.class);
    assertEquals(15, finished.billedSeconds());
    assertEquals(List.of(10L, 15L), f.checkpointSeconds());
    assertEquals(15, f.awaitEvent(Rental.EndProven.class).billedSeconds());
    assertEquals(15, f.get().billedSeconds());
    assertEquals(cost(15), f.get().cost());
    assertHoldReleased(f, DEPOSIT, cost(15));
    assertConserved(f, cost(15));
  }

  @Test
  void aHostLostWhileTheStopAwaitsItsProofBillsToTheLastHeartbeatAtOnce() {
    RentalFixture f = fixture(); // stop timeout 30 s: the proof must not wait for it
    f.running(onDemand(CARDS, CEILING), FLOOR);
    f.host.liveness.set(now -> new Host.Liveness(true, at(15)));
    f.clock.advance(Duration.ofSeconds(22));
    f.awaitCheckpoints(15L);
    f.stop();
    f.kit.runCommand(
        new Rental.HostLost(f.hostId, at(17))); // the heartbeat timeout noticed the host was gone
    f.awaitAssert(() -> assertEquals(17, f.awaitEvent(Rental.EndProven.class).billedSeconds()));
    assertEquals(List.of(15L, 17L), f.checkpointSeconds());
    f.agentStopped();
    f.awaitState(Rental.Finished.class);
    assertHoldReleased(f, DEPOSIT, cost(17));
    assertConserved(f, cost(17));
  }

  @Test
  void aStopIsSettledOnceAHeartbeatAfterItProvesIt() {
    RentalFixture f = fixture();
    f.running(onDemand(CARDS, CEILING), FLOOR);
    f.host.liveness.set(now -> new Host.Liveness(true, at(15))); // heartbeats lag
    f.clock.advance(Duration.ofSeconds(22));
    f.awaitCheckpoints(15L);
    f.stop();
    int asks = f.host.livenessAsks.get();
    f.awaitAskedTwiceSince(asks, "the end waits for a heartbeat after it");
    assertEquals(
        List.of(15L), f.checkpointSeconds(), "nothing settled past the last heartbeat yet");

    f.host.liveness.set(now -> new Host.Liveness(true, now)); // the next heartbeat comes
    f.awaitCheckpoints(15L, 22L);
    f.agentStopped();
    f.awaitState(Rental.Finished.class);
    assertEquals(List.of(), f.events(Rental.EndProven.class), "the whole claim was proven");
    assertHoldReleased(f, DEPOSIT, cost(22));
    assertConserved(f, cost(22));
  }

  @Test
  void theAgentReportingTheStopProvesTheEnd() {
    RentalFixture f = fixture();
    f.running(onDemand(CARDS, CEILING), FLOOR);
    f.host.liveness.set(
        now -> new Host.Liveness(true, at(0))); // no heartbeat since the start reached the host yet
    f.clock.advance(Duration.ofSeconds(22));
    f.stop();
    f.clock.advance(Duration.ofSeconds(1));
    f.agentStopped(); // rental_stopped, at 23 s by the agent's clock: it ran until it was told
    // to stop
    f.awaitState(Rental.Finished.class);
    assertEquals(List.of(22L), f.checkpointSeconds());
    assertHoldReleased(f, DEPOSIT, cost(22));
    assertConserved(f, cost(22));
  }

  @Test
  void hostLostBillsOnlyUpToTheLastHeartbeat() {
    RentalFixture f = fixture();
    f.running(onDemand(CARDS, CEILING), FLOOR);
    Instant lastHeartbeat = at(12).plusMillis(500);
    assertTrue(
        f.kit.runCommand(new Rental.HostLost("some-other-host", lastHeartbeat)).hasNoEvents());
    f.host.liveness.set(now -> new Host.Liveness(false, lastHeartbeat));
    f.clock.advance(Duration.ofSeconds(45)); // the heartbeat timeout noticed it 32.5 s later
    f.kit.runCommand(new Rental.HostLost(f.hostId, lastHeartbeat));
    Ended ended = f.awaitEvent(Ended.class);
    assertEquals(Rental.EndReason.HOST_LOST, ended.reason());
    assertEquals(lastHeartbeat, ended.endAt());
    assertEquals(12, ended.billedSeconds());
    assertEquals(List.of(12L), f.checkpointSeconds());
    // the host keeps it in its record, the matcher's tie-break between equal floors
    assertTrue(f.host.expect(Host.ReleaseCards.class).hostLost(), "released as lost");
    f.awaitAssert(() -> assertHoldReleased(f, DEPOSIT, cost(12)));
    f.awaitAssert(() -> assertConserved(f, cost(12)));
  }

  /**
   * Finding H of the simulation: a host recovered after a crash names the last heartbeat it had
   * recorded (every 10 s) as its last, older than the one this rental's settlements saw. The end
   * instant of the host_lost rental is then what it settled, never before it.
   */
  @Test
  void aHostLostNamingAnOlderHeartbeatThanTheSettledOnesEndsAtWhatWasSettled() {
    RentalFixture f = fixture();
    f.running(onDemand(CARDS, CEILING), FLOOR);
    Instant seen = at(25).plusMillis(300);
    f.host.liveness.set(now -> new Host.Liveness(true, seen));
    f.clock.advance(Duration.ofSeconds(30));
    f.awaitCheckpoints(25L);
    f.kit.runCommand(new Rental.HostLost(f.hostId, at(18)));
    Ended ended = f.awaitEvent(Ended.class);
    assertEquals(Rental.EndReason.HOST_LOST, ended.reason());
    assertEquals(at(25), ended.endAt(), "not the older heartbeat at 18 s");
    assertEquals(25, ended.billedSeconds());
    assertEquals(List.of(25L), f.checkpointSeconds());
    f.awaitAssert(() -> assertHoldReleased(f, DEPOSIT, cost(25)));
  }

  /**
   * Finding E of the simulation, and a workload that vanished (the agent restarted and wiped it,
   * and never reported its stop): heartbeats after 12 s no longer list it. The rental does not run
   * on with its hold and cards taken: the host's answer ends it host_lost, billed to the last
   * heartbeat that listed it, and the agent's late report changes nothing.
   */
  @Test
  void aWorkloadTheHostNoLongerListsEndsBilledToTheLastHeartbeatThatListedIt() {
    RentalFixture f = fixture();
    f.running(onDemand(CARDS, CEILING), FLOOR);
    f.host.liveness.set(now -> new Host.Liveness(true, now, at(12), at(15)));
    f.clock.advance(Duration.ofSeconds(30));
    Ended ended = f.awaitEvent(Ended.class);
    assertEquals(Rental.EndReason.HOST_LOST, ended.reason());
    assertEquals(at(12), ended.endAt());
    assertEquals(12, ended.billedSeconds());
    assertEquals(List.of(12L), f.checkpointSeconds());
    f.awaitAssert(() -> assertHoldReleased(f, DEPOSIT, cost(12)));
    var late = f.kit.runCommand(new Rental.WorkloadStopped(f.hostId, at(12).plusMillis(600)));
    assertTrue(
        late.events().stream()
            .noneMatch(
                e ->
                    e instanceof Ended
                        || e instanceof Rental.Settled
                        || e instanceof Rental.EndProven),
        () -> "" + late.events());
    f.awaitState(Rental.Finished.class);
    assertEquals(1, f.events(Ended.class).size());
    assertEquals(List.of(12L), f.checkpointSeconds());
  }

  /**
   * Simulation seed 5 (clock steps back, snapshots): the agent reports the workload stopped at 8.3
   * s, but a heartbeat that no longer listed it (the last one that did came at 5 s) reached the
   * host before the report reached the rental. Which of the two arrives first must not decide the
   * bill: the end is recorded at the report, and settled only to the last heartbeat that listed it.
   */
  @Test
  void aReportThatRacesTheHeartbeatThatNoLongerListedTheWorkloadIsBoundedByTheLastListing() {
    RentalFixture f = fixture();
    f.running(onDemand(CARDS, CEILING), FLOOR);
    f.clock.advance(Duration.ofSeconds(9));
    f.host.holdLiveness.set(true);
    var reported = f.kit.runCommand(new Rental.WorkloadStopped(f.hostId, at(8).plusMillis(300)));
    assertEquals(
        List.of(new Ended(Rental.EndReason.HOST_LOST, at(8).plusMillis(300), 8, at(9), true)),
        reported.events(),
        "recorded at the report, not settled before the host answered");
    f.host.liveness.set(now -> new Host.Liveness(true, now, at(5), at(8).plusMillis(700)));
    f.host.letLivenessThrough();
    Rental.EndProven proven = f.awaitEvent(Rental.EndProven.class);
    assertEquals(5, proven.billedSeconds());
    assertEquals(List.of(5L), f.checkpointSeconds());
    f.awaitAssert(() -> assertHoldReleased(f, DEPOSIT, cost(5)));
  }

  /** The same report, with no heartbeat that stopped listing the workload: billed to the stop. */
  @Test
  void aReportTheHostsHeartbeatsDoNotContradictIsBilledToTheStop() {
    RentalFixture f = fixture();
    f.running(onDemand(CARDS, CEILING), FLOOR);
    f.clock.advance(Duration.ofSeconds(9));
    f.kit.runCommand(new Rental.WorkloadStopped(f.hostId, at(8).plusMillis(300)));
    f.awaitCheckpoints(8L);
    assertTrue(f.events(Rental.EndProven.class).isEmpty());
    f.awaitAssert(() -> assertHoldReleased(f, DEPOSIT, cost(8)));
  }

  /**
   * A workload whose command finished (or died) by itself ends workload_exited, not host_lost: the
   * host did not fail the renter. Billed to the stop, as any end on the agent's report.
   */
  @Test
  void aWorkloadThatEndedByItselfEndsWorkloadExitedBilledToItsStop() {
    RentalFixture f = fixture();
    f.running(onDemand(CARDS, CEILING), FLOOR);
    f.clock.advance(Duration.ofSeconds(9));
    f.host.holdLiveness.set(true); // else the settlement can land in the same batch of events
    var reported =
        f.kit.runCommand(new Rental.WorkloadStopped(f.hostId, at(8).plusMillis(300), false, true));
    assertEquals(
        List.of(new Ended(Rental.EndReason.WORKLOAD_EXITED, at(8).plusMillis(300), 8, at(9), true)),
        reported.events());
    f.host.letLivenessThrough();
    f.awaitCheckpoints(8L);
    f.awaitAssert(() -> assertHoldReleased(f, DEPOSIT, cost(8)));
    assertEquals(Rental.EndReason.WORKLOAD_EXITED, f.get().endReason());
  }

  /**
   * The agent's exit status of a workload that ended by itself is the renter's to see: on the end,
   * in the view while the money is finished and once it is, and after a restart.
   */
  @Test
  void aWorkloadThatEndedByItselfKeepsItsExitStatus() {
    RentalFixture f = fixture();
    f.running(onDemand(CARDS, CEILING), FLOOR);
    f.clock.advance(Duration.ofSeconds(9));
    f.host.holdLiveness.set(true);
    var reported =
        f.kit.runCommand(
            new Rental.WorkloadStopped(f.hostId, at(8).plusMillis(300), false, true, 3));
    assertEquals(
        List.of(
            new Ended(Rental.EndReason.WORKLOAD_EXITED, at(8).plusMillis(300), 8, at(9), true, 3)),
        reported.events());
    assertEquals(3, f.get().exitCode(), "while stopping");
    f.host.letLivenessThrough();
    f.agentStopped(); // the agent answers the host's stop: the workload is gone
    f.awaitState(Rental.Finished.class);
    assertEquals(3, f.get().exitCode(), "once ended");
    f.restart();
    assertEquals(3, f.get().exitCode(), "after a restart");
  }

  /** Only a workload_exited end has an exit status: after a notice the rental was preempted. */
  @Test
  void anExitStatusGoesOnlyWithAWorkloadExitedEnd() {
    RentalFixture f = fixture();
    f.running(spec(Listing.Tier.SPOT, CARDS, CEILING, null, 30), FLOOR);
    f.clock.advance(Duration.ofSeconds(6));
    var stopped = f.kit.runCommand(new Rental.WorkloadStopped(f.hostId, at(6), true, true, 0));
    Ended ended =
        stopped.events().stream()
            .filter(e -> e instanceof Ended)
            .map(Ended.class::cast)
            .findFirst()
            .orElseThrow();
    assertEquals(Rental.EndReason.PREEMPTED, ended.reason());
    assertNull(ended.exitCode());
    assertNull(f.get().exitCode());
  }

  /** A spot workload that exited on its preemption notice was preempted, whatever else it says. */
  @Test
  void aSpotWorkloadThatExitedOnItsNoticeEndsPreempted() {
    RentalFixture f = fixture();
    f.running(spec(Listing.Tier.SPOT, CARDS, CEILING, null, 30), FLOOR);
    f.clock.advance(Duration.ofSeconds(6));
    var stopped = f.kit.runCommand(new Rental.WorkloadStopped(f.hostId, at(6), true, true));
    assertEquals(
        Rental.EndReason.PREEMPTED,
        stopped.events().stream()
            .filter(e -> e instanceof Ended)
            .map(e -> ((Ended) e).reason())
            .findFirst()
            .orElseThrow());
  }

  /**
   * Finding V of the simulation (seed 68, {@code +steps-back}, 20,000 steps): the agent's report is
   * stamped ahead of this node's clock (the clock stepped back after the workload died), so the end
   * is the rental's own now, 9 s, which the report does not prove. The host's last heartbeat, 8.7
   * s, came before it: the rental waits for the host's heartbeats, and the next one no longer lists
   * the workload, so it is billed to the last one that did, not to 9 s.
   */
  @Test
  void aReportStampedAheadOfTheClockIsBilledOnlyAsFarAsTheHostsHeartbeats() {
    reportAheadOfTheClockWaitsForTheHostsHeartbeats(false);
  }

  /**
   * Finding V across a restart: the rule that such an end waits for the host's heartbeats is
   * derived from what the rental recorded (its end is the instant it was recorded), so a rental
   * that restarts while it waits does not then take the report as proof.
   */
  @Test
  void aReportStampedAheadOfTheClockStaysUnprovenAcrossARestart() {
    reportAheadOfTheClockWaitsForTheHostsHeartbeats(true);
  }

  private void reportAheadOfTheClockWaitsForTheHostsHeartbeats(boolean restartWhileWaiting) {
    RentalFixture f = fixture();
    f.running(onDemand(CARDS, CEILING), FLOOR);
    Instant lastBeat = at(8).plusMillis(700);
    f.host.liveness.set(now -> new Host.Liveness(true, lastBeat, lastBeat, null));
    f.clock.advance(Duration.ofSeconds(9));
    var reported = f.kit.runCommand(new Rental.WorkloadStopped(f.hostId, at(30)));
    assertEquals(
        List.of(new Ended(Rental.EndReason.HOST_LOST, at(9), 9, at(9), true)), reported.events());
    if (restartWhileWaiting) f.restart();
    int asked = f.host.livenessAsks.get();
    f.awaitAskedTwiceSince(asked, "asks the host again: its answer proved nothing past 8.7 s");
    assertTrue(f.events(Rental.EndProven.class).isEmpty());
    assertFalse(f.checkpointSeconds().contains(9L), f.checkpointSeconds().toString());

    f.host.liveness.set(now -> new Host.Liveness(true, now, lastBeat, now));
    Rental.EndProven proven = f.awaitEvent(Rental.EndProven.class);
    assertEquals(8, proven.billedSeconds());
    assertEquals(8L, f.checkpointSeconds().get(f.checkpointSeconds().size() - 1));
  }

  /**
   * Found with finding E's check (seed 7): an agent that re-attached after an outage (its machine
   * lost, its workloads with it) proves itself alive, not the workload; until a heartbeat lists the
   * workload again the rental settles no further than the last one that did.
   */
  @Test
  void anAgentThatReattachedIsNoProofOfTheWorkloadUntilAHeartbeatListsIt() {
    RentalFixture f = fixture();
    f.running(onDemand(CARDS, CEILING), FLOOR);
    f.host.liveness.set(now -> new Host.Liveness(true, now, at(12), null));
    f.clock.advance(Duration.ofSeconds(30));
    f.awaitCheckpoints(12L);
    f.host.liveness.set(now -> new Host.Liveness(true, now, now, null)); // listed again
    f.awaitCheckpoints(12L, 30L);
  }

  /**
   * Finding E at the end: the workload stopped on its own at about 6 s (a heartbeat at 7 s no
   * longer listed it) and its report was lost; the renter stops the rental at 8 s. A heartbeat
   * after the stop does not prove the seconds after the workload was gone: billed to the last
   * heartbeat that listed it.
   */
  @Test
  void aStopAfterTheWorkloadWasGoneIsBilledToTheLastHeartbeatThatListedIt() {
    RentalFixture f = fixture();
    f.running(onDemand(CARDS, CEILING), FLOOR);
    f.host.liveness.set(now -> new Host.Liveness(true, now, at(5), at(7)));
    f.clock.advance(Duration.ofSeconds(8));
    f.stop();
    Rental.EndProven proven = f.awaitEvent(Rental.EndProven.class);
    assertEquals(5, proven.billedSeconds());
    assertEquals(List.of(5L), f.checkpointSeconds());
  }

  /**
   * The same, with the agent's answer to the stop (its workload died at 6 s, on its own) arriving
   * before the host's liveness answer (simulation seed 5): the report is no proof past the last
   * heartbeat that listed the workload; the bill does not depend on which of the two comes first.
   */
  @Test
  void aReportThatTheWorkloadDiedBeforeTheStopIsBoundedByTheLastHeartbeatThatListedIt() {
    RentalFixture f = fixture();
    f.running(onDemand(CARDS, CEILING), FLOOR);
    f.host.liveness.set(now -> new Host.Liveness(true, now, at(5), at(7)));
    f.clock.advance(Duration.ofSeconds(8));
    f.host.holdLiveness.set(true);
    f.stop();
    var reported = f.kit.runCommand(new Rental.WorkloadStopped(f.hostId, at(6)));
    assertTrue(reported.hasNoEvents(), () -> "waits for the host: " + reported.events());
    f.host.letLivenessThrough();
    Rental.EndProven proven = f.awaitEvent(Rental.EndProven.class);
    assertEquals(5, proven.billedSeconds());
    assertEquals(List.of(5L), f.checkpointSeconds());
  }

  /**
   * A report that the workload died before the stop is a bound too: a heartbeat after the stop that
   * never stopped listing it before the end (the report beat the heartbeat) bills to the death.
   */
  @Test
  void aReportThatTheWorkloadDiedBeforeTheStopBoundsTheBill() {
    RentalFixture f = fixture();
    f.running(onDemand(CARDS, CEILING), FLOOR);
    f.clock.advance(Duration.ofSeconds(8));
    f.host.holdLiveness.set(true);
    f.stop();
    f.kit.runCommand(new Rental.WorkloadStopped(f.hostId, at(6)));
    f.host.letLivenessThrough(); // online, last heartbeat now, no listing known
    Rental.EndProven proven = f.awaitEvent(Rental.EndProven.class);
    assertEquals(6, proven.billedSeconds());
    assertEquals(List.of(6L), f.checkpointSeconds());
  }

  /**
   * Finding L of the simulation (the million-step run, seed 54): a spot rental's host went offline
   * (last heartbeat 30 s earlier), its HostLost was lost, the rental reached its preemption
   * deadline and the agent's report that it stopped the workload there billed it to the deadline,
   * past the host's last heartbeat. A report at or after the end is proven only as far as the
   * host's heartbeats go.
   */
  @Test
  void aReportAtTheEndFromAHostThatWentSilentIsBilledToItsLastHeartbeat() {
    RentalFixture f = fixture();
    f.running(onDemand(CARDS, CEILING), FLOOR);
    f.host.liveness.set(now -> new Host.Liveness(false, at(5)));
    f.clock.advance(Duration.ofSeconds(8));
    f.host.holdLiveness.set(true);
    f.stop();
    var reported = f.kit.runCommand(new Rental.WorkloadStopped(f.hostId, at(8)));
    assertTrue(reported.hasNoEvents(), () -> "waits for the host: " + reported.events());
    f.host.letLivenessThrough();
    Rental.EndProven proven = f.awaitEvent(Rental.EndProven.class);
    assertEquals(5, proven.billedSeconds());
    assertEquals(List.of(5L), f.checkpointSeconds());
  }

  /**
   * Finding F of the simulation: a HostLost the host sent when it went offline at 20 s arrives
   * after the agent came back and this rental saw a heartbeat at 25.3 s: it is stale and changes
   * nothing. A later loss still ends the rental.
   */
  @Test
  void aStaleHostLostFromBeforeTheAgentCameBackChangesNothing() {
    RentalFixture f = fixture();
    f.running(onDemand(CARDS, CEILING), FLOOR);
    Instant seen = at(25).plusMillis(300);
    f.host.liveness.set(now -> new Host.Liveness(true, seen));
    f.clock.advance(Duration.ofSeconds(30));
    f.awaitCheckpoints(25L);
    assertTrue(
        f.kit.runCommand(new Rental.HostLost(f.hostId, at(5), at(20))).hasNoEvents(), "stale");
    assertInstanceOf(Rental.Running.class, f.kit.getState());

    f.clock.advance(Duration.ofSeconds(30));
    f.kit.runCommand(new Rental.HostLost(f.hostId, seen, f.clock.instant()));
    Ended ended = f.awaitEvent(Ended.class);
    assertEquals(Rental.EndReason.HOST_LOST, ended.reason());
    assertEquals(seen, ended.endAt());
    assertEquals(25, ended.billedSeconds());
  }

  // ---------------------------------------------------------------------------------------------
  // Tiers

  @Test
  void spotPreemptionEndsAtTheDeadlineBilledUntilThen() {
    RentalFixture f = fixture();
    f.running(spec(Listing.Tier.SPOT, CARDS, CEILING, null, 30), FLOOR);
    f.clock.advance(Duration.ofSeconds(5));
    Instant deadline = at(30);
    var scheduled = f.kit.runCommand(new Rental.Preempt(f.hostId, deadline));
    assertEquals(List.of(new Rental.PreemptionScheduled(deadline, at(5))), scheduled.events());
    assertEquals(deadline, f.get().preemptionDeadline());
    assertTrue(
        f.kit.runCommand(new Rental.Preempt(f.hostId, at(90))).hasNoEvents(),
        "a later deadline changes nothing");
    assertTrue(f.kit.runCommand(new Rental.Preempt("some-other-host", at(10))).hasNoEvents());

    f.clock.advance(Duration.ofSeconds(40)); // 45 s, 15 s past the deadline
    Ended ended = f.awaitEvent(Ended.class);
    assertEquals(new Ended(Rental.EndReason.PREEMPTED, deadline, 30, at(45)), ended);
    // Settled once a heartbeat at or after the deadline proves the seconds up to it (the fake
    // host's is always now).
    f.awaitAssert(() -> assertEquals(List.of(30L), f.checkpointSeconds()));
    f.awaitAssert(() -> assertHoldReleased(f, DEPOSIT, cost(30)));
    f.awaitAssert(() -> assertConserved(f, cost(30)));
  }

  /** A spot rental matched and asked to start, the agent not having reported the start yet. */
  private RentalFixture provisioningSpotRental() {
    RentalFixture f = fixture();
    Spec spec = spec(Listing.Tier.SPOT, CARDS, CEILING, null, 30);
    f.create(spec);
    f.expectMatch().replyTo().tell(new Matcher.Matched(f.rentalId, f.reservation(spec, FLOOR)));
    f.host.expect(Host.StartWorkload.class);
    f.awaitState(Rental.Provisioning.class);
    return f;
  }

  @Test
  void aSpotNoticeThatComesBeforeTheWorkloadStartsIsKeptForWhenItRuns() {
    RentalFixture f = provisioningSpotRental();
    // The host checks its availability window on a heartbeat before the agent reported the start.
    Instant deadline = at(40);
    var noticed = f.kit.runCommand(new Rental.Preempt(f.hostId, deadline));
    assertEquals(List.of(new Rental.PreemptionScheduled(deadline, at(0))), noticed.events());
    assertEquals(Rental.Status.PROVISIONING, f.get().status());
    assertEquals(deadline, f.get().preemptionDeadline());
    assertTrue(
        f.kit.runCommand(new Rental.Preempt(f.hostId, deadline)).hasNoEvents(),
        "told again: changes nothing");
    assertTrue(f.kit.runCommand(new Rental.Preempt("some-other-host", at(5))).hasNoEvents());

    f.clock.advance(Duration.ofSeconds(10));
    f.kit.runCommand(new Rental.WorkloadStarted(f.hostId, f.clock.instant()));
    View running = f.get();
    assertEquals(Rental.Status.RUNNING, running.status());
    assertEquals(deadline, running.preemptionDeadline(), "carried into the running rental");
    assertEquals(
        deadline,
        f.kit.restart().state() instanceof Rental.Running r ? r.preemptionDeadline() : null,
        "and recovered");

    f.clock.advance(Duration.ofSeconds(35)); // 45 s, 5 s past the deadline
    Ended ended = f.awaitEvent(Ended.class);
    assertEquals(
        new Ended(Rental.EndReason.PREEMPTED, deadline, 30, at(45)),
        ended,
        "billed from the start (10 s) to the deadline (40 s)");
    f.awaitAssert(() -> assertHoldReleased(f, DEPOSIT, cost(30)));
    f.awaitAssert(() -> assertConserved(f, cost(30)));
  }

  @Test
  void aSpotRentalWhoseWindowClosesBeforeItStartsEndsPreemptedWithNothingCharged() {
    RentalFixture f = provisioningSpotRental();
    // A notice whose deadline is (about to be) past: the workload never started in time.
    f.kit.runCommand(new Rental.Preempt(f.hostId, at(0)));

    Ended ended = f.awaitEvent(Ended.class);
    assertEquals(Rental.EndReason.PREEMPTED, ended.reason());
    assertEquals(0, ended.billedSeconds());
    f.host.expect(Host.ReleaseCards.class);
    f.awaitState(Rental.Finished.class);
    assertHoldReleased(f, DEPOSIT, 0);
    assertConserved(f, 0);
  }

  @Test
  void theAgentStoppingTheWorkloadAtThePreemptionDeadlineEndsItPreempted() {
    RentalFixture f = fixture();
    f.running(spec(Listing.Tier.SPOT, CARDS, CEILING, null, 30), FLOOR);
    f.clock.advance(Duration.ofSeconds(5));
    f.kit.runCommand(new Rental.Preempt(f.hostId, at(20)));
    // The agent keeps the notice: it stops the workload at the deadline (its clock a little behind)
    // and reports it before this rental's own tick notices the deadline.
    f.clock.advance(Duration.ofMillis(15_200));
    var stopped = f.kit.runCommand(new Rental.WorkloadStopped(f.hostId, at(19).plusMillis(800)));
    assertEquals(
        new Ended(
            Rental.EndReason.PREEMPTED, at(19).plusMillis(800), 19, at(20).plusMillis(200), true),
        stopped.events().stream().filter(e -> e instanceof Ended).findFirst().orElseThrow());
    f.awaitAssert(() -> assertConserved(f, cost(19)));
  }

  @Test
  void aWorkloadThatStopsAfterItsPreemptionNoticeEndsPreemptedBilledToItsStop() {
    // the agent gave the workload its notice (a file and SIGTERM 30 s early): a job that
    // checkpoints and exits long before the deadline was preempted, not lost by its host
    RentalFixture f = fixture();
    f.running(spec(Listing.Tier.SPOT, CARDS, CEILING, null, 30), FLOOR);
    f.clock.advance(Duration.ofSeconds(5));
    f.kit.runCommand(new Rental.Preempt(f.hostId, at(200)));
    f.clock.advance(Duration.ofSeconds(3));
    var stopped = f.kit.runCommand(new Rental.WorkloadStopped(f.hostId, at(8)));
    assertEquals(
        new Ended(Rental.EndReason.PREEMPTED, at(8), 8, at(8), true),
        stopped.events().stream().filter(e -> e instanceof Ended).findFirst().orElseThrow());
    f.awaitAssert(() -> assertConserved(f, cost(8)));
  }

  @Test
  void aSpotWorkloadTheAgentSaysItPreemptedEndsPreemptedEvenBeforeTheHostsNoticeArrives() {
    // the host tells the rental and the agent at once; the agent's SIGTERM and the workload's exit
    // can overtake the notice on its way to the rental
    RentalFixture f = fixture();
    f.running(spec(Listing.Tier.SPOT, CARDS, CEILING, null, 30), FLOOR);
    f.clock.advance(Duration.ofSeconds(6));
    var stopped = f.kit.runCommand(new Rental.WorkloadStopped(f.hostId, at(6), true));
    assertEquals(
        new Ended(Rental.EndReason.PREEMPTED, at(6), 6, at(6), true),
        stopped.events().stream().filter(e -> e instanceof Ended).findFirst().orElseThrow());
    f.awaitAssert(() -> assertConserved(f, cost(6)));
  }

  @Test
  void anOnDemandWorkloadIsNeverPreemptedOnTheAgentsWord() {
    RentalFixture f = fixture();
    f.running(spec(Listing.Tier.ON_DEMAND, CARDS, CEILING, null, 30), FLOOR);
    f.clock.advance(Duration.ofSeconds(6));
    var stopped = f.kit.runCommand(new Rental.WorkloadStopped(f.hostId, at(6), true));
    assertEquals(
        Rental.EndReason.HOST_LOST,
        stopped.events().stream()
            .filter(e -> e instanceof Ended)
            .map(e -> ((Ended) e).reason())
            .findFirst()
            .orElseThrow());
  }

  @Test
  void settlementNeverPassesThePreemptionDeadline() {
    RentalFixture f = fixture();
    f.running(spec(Listing.Tier.SPOT, CARDS, CEILING, null, 30), FLOOR);
    f.kit.runCommand(new Rental.Preempt(f.hostId, at(15)));
    f.host.holdLiveness.set(true);
    f.clock.advance(Duration.ofSeconds(12)); // a tick asks the host how far to settle...
    f.awaitAssert(() -> assertTrue(f.host.heldLivenessAsks() > 0));
    f.clock.advance(Duration.ofSeconds(28)); // ...and hears back only after the deadline passed
    f.host.letLivenessThrough();

    Ended ended = f.awaitEvent(Ended.class);
    assertEquals(Rental.EndReason.PREEMPTED, ended.reason());
    assertEquals(15, ended.billedSeconds(), "billed until the deadline: " + f.events());
    f.awaitAssert(() -> assertEquals(15, f.lastCheckpoint().throughSecond()));
    f.awaitAssert(() -> assertConserved(f, cost(15)));
  }

  @Test
  void onDemandRentalIgnoresPreemption() {
    RentalFixture f = fixture();
    f.running(onDemand(CARDS, CEILING), FLOOR);
    assertTrue(f.kit.runCommand(new Rental.Preempt(f.hostId, at(5))).hasNoEvents());
    assertNull(f.get().preemptionDeadline());
    f.clock.advance(Duration.ofSeconds(30));
    f.awaitCheckpoints(30L);
    assertInstanceOf(Rental.Running.class, f.kit.getState());
    assertTrue(f.events(Ended.class).isEmpty());
  }

  // ---------------------------------------------------------------------------------------------
  // Holds and caps

  @Test
  void holdIsExtendedWhenLessThanHalfRemains() {
    RentalFixture f = fixture();
    f.running(onDemand(1, ONE_PER_SECOND), ONE_PER_SECOND);
    assertEquals(300, ok(f.renter.hold(f.rentalId)).amount());

    f.clock.advance(Duration.ofSeconds(140)); // 160 left of 300: no extension yet
    f.awaitCheckpoints(140L);
    f.clock.advance(Duration.ofSeconds(20)); // 140 left: under half
    f.awaitCheckpoints(140L, 160L);
    Rental.HoldExtended extended = f.awaitEvent(Rental.HoldExtended.class);
    assertEquals(160 + 300, extended.holdAmount(), "spent plus another hold window");
    f.awaitAssert(() -> assertEquals(460, ok(f.renter.hold(f.rentalId)).amount()));
    Account.Summary renter = f.renter.summary();
    assertEquals(460 - 160, renter.held());
    assertEquals(DEPOSIT - 460, renter.available());
    assertEquals(460, ((Rental.Running) f.kit.getState()).order().holdAmount());
  }

  /** Ceiling 3600, floor 2500 µ€/GPU-hour, one card: the 300 µ€ hold covers 433 s at the floor. */
  private RentalFixture runningOnAThinHold(long deposit) {
    RentalFixture f = fixture(settings(), deposit);
    f.running(onDemand(1, ONE_PER_SECOND), 2_500);
    assertEquals(300, ok(f.renter.hold(f.rentalId)).amount());
    return f;
  }

  @Test
  void refusedExtensionRunsUntilTheHoldIsUsedThenEndsBalanceExhausted() {
    RentalFixture f = runningOnAThinHold(350);
    long covered = Metering.maxSecondsWithin(2_500, 1, 300, Long.MAX_VALUE);
    assertEquals(433, covered);

    f.clock.advance(
        Duration.ofSeconds(
            290)); // cost 201 of 300: the extension asks for 109 more, 50 are available
    f.awaitCheckpoints(290L);
    assertEquals(
        new Rental.ExtensionRefused(Rental.EndReason.BALANCE_EXHAUSTED, at(290)),
        f.awaitEvent(Rental.ExtensionRefused.class));
    assertInstanceOf(Rental.Running.class, f.kit.getState());

    f.clock.advance(Duration.ofSeconds(210)); // 500 s
    Ended ended = f.awaitEvent(Ended.class);
    assertEquals(new Ended(Rental.EndReason.BALANCE_EXHAUSTED, at(433), 433, at(500)), ended);
    f.awaitAssert(
        () -> assertEquals(300, f.lastCheckpoint().cost(), "exactly what the hold covers"));
    f.awaitAssert(() -> assertHoldReleased(f, 350, 300));
    f.awaitAssert(() -> assertConserved(f, 300));
  }

  @Test
  void extensionRefusedBySpendCapEndsSpendCapReached() {
    RentalFixture f = fixture(settings(), 0);
    f.renter.deposit("top-up", 10_000);
    f.renter.setSpendCap(320L);
    f.running(onDemand(1, ONE_PER_SECOND), 2_500);

    f.clock.advance(Duration.ofSeconds(290));
    f.awaitCheckpoints(290L);
    assertEquals(
        Rental.EndReason.SPEND_CAP_REACHED, f.awaitEvent(Rental.ExtensionRefused.class).reason());
    f.clock.advance(Duration.ofSeconds(210));
    Ended ended = f.awaitEvent(Ended.class);
    assertEquals(new Ended(Rental.EndReason.SPEND_CAP_REACHED, at(433), 433, at(500)), ended);
    f.awaitAssert(() -> assertHoldReleased(f, 10_000, 300));
    f.awaitAssert(() -> assertConserved(f, 300));
  }

  @Test
  void maxTotalEndsRentalCapReached() {
    RentalFixture f = fixture();
    f.running(spec(Listing.Tier.ON_DEMAND, 1, ONE_PER_SECOND, 250L, 30), 2_500);
    assertEquals(250, ok(f.renter.hold(f.rentalId)).amount());
    long covered = Metering.maxSecondsWithin(2_500, 1, 250, Long.MAX_VALUE);
    assertEquals(361, covered);

    f.clock.advance(Duration.ofSeconds(300));
    f.awaitCheckpoints(300L);
    f.clock.advance(Duration.ofSeconds(200));
    Ended ended = f.awaitEvent(Ended.class);
    assertEquals(new Ended(Rental.EndReason.RENTAL_CAP_REACHED, at(361), 361, at(500)), ended);
    assertTrue(
        f.events(Rental.HoldExtended.class).isEmpty(), "the hold never grows past max_total");
    f.awaitAssert(() -> assertHoldReleased(f, DEPOSIT, 250));
    f.awaitAssert(() -> assertConserved(f, 250));
  }

  @Test
  void settlesNoMoreThanTheHoldCoversAfterAnOutage() {
    // The node was down (or the ticks stalled) for far longer than the hold covers, and the balance
    // cannot pay for more: the renter pays the hold, the provider is credited for the same seconds.
    RentalFixture f = fixture(settings(), 350);
    f.running(onDemand(1, ONE_PER_SECOND), ONE_PER_SECOND);
    f.clock.advance(Duration.ofSeconds(1_000));

    Ended ended = f.awaitEvent(Ended.class);
    assertEquals(Rental.EndReason.BALANCE_EXHAUSTED, ended.reason());
    assertEquals(300, ended.billedSeconds());
    f.agentStopped();
    f.awaitState(Rental.Finished.class);
    assertHoldReleased(f, 350, 300);
    assertConserved(f, 300);
  }

  // ---------------------------------------------------------------------------------------------
  // Agent messages, other renters

  @Test
  void duplicateAgentMessagesChangeNothing() {
    RentalFixture f = fixture();
    f.running(onDemand(CARDS, CEILING), FLOOR);
    f.clock.advance(Duration.ofSeconds(3));
    assertTrue(
        f.kit.runCommand(new Rental.WorkloadStarted(f.hostId, f.clock.instant())).hasNoEvents());
    assertEquals(START, f.get().startedAt(), "a repeated start does not restart metering");

    f.clock.advance(Duration.ofSeconds(8));
    f.stop();
    f.awaitAssert(
        () ->
            assertEquals(
                List.of(11L),
                f.checkpointSeconds(),
                "the final settlement, once the host proved it"));
    int events = f.events().size();
    f.agentStopped();
    f.agentStopped();
    f.awaitState(Rental.Finished.class);
    assertEquals(events + 1, f.events().size(), "one Closed: " + f.events());
    f.agentStopped();
    assertTrue(
        f.kit.runCommand(new Rental.WorkloadStarted(f.hostId, f.clock.instant())).hasNoEvents());
    assertEquals(events + 1, f.events().size());
    f.awaitAssert(() -> assertConserved(f, cost(11)));
  }

  @Test
  void workloadStoppedTwiceWhileRunningEndsTheRentalOnce() {
    RentalFixture f = fixture();
    f.running(onDemand(CARDS, CEILING), FLOOR);
    f.clock.advance(Duration.ofSeconds(7));
    var first = f.kit.runCommand(new Rental.WorkloadStopped(f.hostId, at(6)));
    var again = f.kit.runCommand(new Rental.WorkloadStopped(f.hostId, at(6)));
    assertEquals(1, first.events().stream().filter(Ended.class::isInstance).count());
    assertEquals(
        6,
        f.events(Ended.class).get(0).billedSeconds(),
        "billed to the instant the agent saw it stop");
    assertTrue(again.events().stream().noneMatch(e -> e instanceof Ended), "" + again.events());
    f.awaitState(Rental.Finished.class);
    assertEquals(1, f.events(Ended.class).size());
    assertEquals(List.of(6L), f.checkpointSeconds(), "settled once, whichever report proved it");
    assertEquals(1, f.events(Rental.Closed.class).size());
    f.awaitAssert(() -> assertConserved(f, cost(6)));
  }

  @Test
  void anotherRentersGetAndStopAreNotFound() {
    RentalFixture f = fixture();
    Spec spec = onDemand(CARDS, CEILING);
    f.create(spec);
    f.expectMatch().replyTo().tell(new Matcher.Matched(f.rentalId, f.reservation(spec, FLOOR)));
    assertRejected(Rejection.NOT_FOUND, f.get("renter-someone-else"));
    assertRejected(Rejection.NOT_FOUND, f.stop("renter-someone-else"));
    f.host.expect(Host.StartWorkload.class);
    f.kit.runCommand(new Rental.WorkloadStarted(f.hostId, f.clock.instant()));

    State before = f.kit.getState();
    assertRejected(Rejection.NOT_FOUND, f.get("renter-someone-else"));
    assertRejected(Rejection.NOT_FOUND, f.stop("renter-someone-else"));
    assertEquals(before, f.kit.getState(), "another renter's stop changes nothing");
    assertEquals(Rental.Status.RUNNING, ok(f.get(null)).status(), "the operator sees it");

    f.stop();
    assertRejected(Rejection.NOT_FOUND, f.get("renter-someone-else"));
    assertRejected(Rejection.NOT_FOUND, f.stop("renter-someone-else"));
    f.agentStopped();
    f.awaitState(Rental.Finished.class);
    assertRejected(Rejection.NOT_FOUND, f.get("renter-someone-else"));
    assertRejected(Rejection.NOT_FOUND, f.stop("renter-someone-else"));
    var otherCreate =
        f.kit.<StatusReply<View>>runCommand(r -> new Rental.Create("renter-someone-else", spec, r));
    assertRejected(Rejection.ALREADY_EXISTS, otherCreate.reply());
  }

  @Test
  void unknownRentalIsNotFound() {
    RentalFixture f = fixture();
    assertRejected(Rejection.NOT_FOUND, f.get(f.renterId));
    assertRejected(Rejection.NOT_FOUND, f.stop(f.renterId));
    assertEquals(Rental.Empty.INSTANCE, f.kit.getState());
  }

  // ---------------------------------------------------------------------------------------------
  // Money delivery under failures

  @Test
  void lostFinalCaptureIsRetriedBeforeTheHoldIsReleased() {
    RentalFixture f =
        fixture(RentalFixture.withAskTimeout(settings(), Duration.ofMillis(500)), DEPOSIT);
    f.running(onDemand(CARDS, CEILING), FLOOR);
    f.clock.advance(Duration.ofSeconds(10));
    f.awaitCheckpoints(10L);
    f.awaitAssert(() -> assertConserved(f, cost(10)));
    // The final capture is lost once on its way to the account (a node crash, a rebalance).
    AtomicBoolean lost = new AtomicBoolean();
    f.renter.drop.set(
        c ->
            c instanceof Account.Capture capture
                && capture.throughSecond() == 23
                && lost.compareAndSet(false, true));

    f.clock.advance(Duration.ofSeconds(13));
    f.stopUntilClosed();
    assertTrue(lost.get());
    assertHoldReleased(f, DEPOSIT, cost(23));
    assertConserved(f, cost(23));
  }

  @Test
  void aCreditThatKeepsFailingIsRetriedLessAndLessOftenUntilItLands() {
    Duration askTimeout = Duration.ofMillis(300);
    RentalFixture f =
        fixture(
            RentalFixture.withAskTimeout(settings(), askTimeout), DEPOSIT); // retry interval 200 ms
    f.running(onDemand(CARDS, CEILING), FLOOR);
    // The provider's account does not answer the first four credit attempts (it is overloaded, or
    // its node is gone).
    List<Long> attempts = new CopyOnWriteArrayList<>();
    f.provider.drop.set(
        c -> {
          if (!(c instanceof Account.CreditEarnings)) return false;
          attempts.add(System.nanoTime());
          return attempts.size() <= 4;
        });
    f.clock.advance(Duration.ofSeconds(10));
    f.awaitCheckpoints(10L);
    f.awaitAssert(() -> assertConserved(f, cost(10)));

    assertEquals(5, attempts.size(), "four lost, the fifth acknowledged");
    // Each retry waits the ask timeout plus at least 0.8 x (200 ms doubled per failure in a row).
    for (int failure = 0; failure < 4; failure++) {
      long gapMillis = (attempts.get(failure + 1) - attempts.get(failure)) / 1_000_000;
      long atLeast =
          askTimeout.toMillis() + 160L * (1 << Math.min(failure, 3)); // 80 % of 200 ms, doubled
      assertTrue(
          gapMillis >= atLeast,
          "retry "
              + (failure + 1)
              + " came after "
              + gapMillis
              + " ms, expected at least "
              + atLeast);
    }
    assertEquals(1, f.provider.events(Account.EarningsCredited.class).size());
  }

  @Test
  void theAgentSilenceDeadlineCountsFromTheStopNotFromTheLastRedelivery() {
    Duration stopTimeout = Duration.ofSeconds(4);
    // Redeliveries come at most 0.2 s + 8 x 0.12 s apart, well inside the stop timeout.
    Settings settings =
        new Settings(
            Duration.ofSeconds(10),
            300,
            FEE,
            Duration.ofSeconds(30),
            stopTimeout,
            Duration.ofMillis(100),
            Duration.ofMillis(200),
            Duration.ofSeconds(1)); // wakes every second to see the hand-moved clock
    RentalFixture f = fixture(settings, DEPOSIT);
    f.running(onDemand(CARDS, CEILING), FLOOR);
    f.clock.advance(Duration.ofSeconds(13));
    // The provider's account refuses the final credit for 6 s after the stop; the agent never
    // reports the workload stopped.
    long[] stoppedAt = {Long.MAX_VALUE};
    AtomicLong landedAt = new AtomicLong();
    f.provider.drop.set(
        c -> {
          if (!(c instanceof Account.CreditEarnings credit) || !credit.last()) return false;
          if (System.nanoTime() - stoppedAt[0] < Duration.ofSeconds(6).toNanos()) return true;
          landedAt.compareAndSet(0, System.nanoTime());
          return false;
        });
    stoppedAt[0] = System.nanoTime();
    assertEquals(13, f.stop().billedSeconds());

    testKit
        .createTestProbe()
        .awaitAssert(
            Duration.ofSeconds(15),
            () -> assertInstanceOf(Rental.Finished.class, f.kit.getState()));
    long closedAt = System.nanoTime();
    assertTrue(landedAt.get() > 0, "the final credit landed");
    // The agent's silence passed its deadline (4 s after the stop) while the credit was still
    // refused, so the rental
    // closes as soon as the credit lands; a deadline restarted by each redelivery would still be
    // 2.8 s or more away.
    long afterCreditMillis = (closedAt - landedAt.get()) / 1_000_000;
    assertTrue(
        afterCreditMillis < 2_000,
        "closed " + afterCreditMillis + " ms after the final credit landed");
    assertHoldReleased(f, DEPOSIT, cost(13));
    assertConserved(f, cost(13));
  }

  @Test
  void redeliveryWaitsDoubleUpToEightRetryIntervalsAndSpreadTwentyPercent() {
    Duration interval = Duration.ofSeconds(1);
    assertEquals(Duration.ofMillis(800), SettlementDelivery.redeliveryDelay(interval, 0, 0));
    assertEquals(Duration.ofMillis(1_000), SettlementDelivery.redeliveryDelay(interval, 0, 200));
    assertEquals(
        Duration.ofMillis(1_200),
        SettlementDelivery.redeliveryDelay(
            interval, 0, SettlementDelivery.REDELIVERY_SPREAD_PERMILLE));
    assertEquals(Duration.ofMillis(2_000), SettlementDelivery.redeliveryDelay(interval, 1, 200));
    assertEquals(Duration.ofMillis(4_000), SettlementDelivery.redeliveryDelay(interval, 2, 200));
    assertEquals(Duration.ofMillis(8_000), SettlementDelivery.redeliveryDelay(interval, 3, 200));
    assertEquals(
        Duration.ofMillis(8_000),
        SettlementDelivery.redeliveryDelay(interval, 30, 200),
        "capped at eight intervals");
    assertEquals(
        Duration.ofMillis(9_600),
        SettlementDelivery.redeliveryDelay(
            interval, Integer.MAX_VALUE, SettlementDelivery.REDELIVERY_SPREAD_PERMILLE));
    assertEquals(
        Duration.ofMillis(160), SettlementDelivery.redeliveryDelay(Duration.ofMillis(200), 0, 0));
  }

  @Test
  void redeliveriesOfRentalsThatFailedTogetherSpreadOverTheWholeRange() {
    int[] quarters = new int[4];
    int moved = 0;
    for (int i = 0; i < 10_000; i++) {
      String id = "r-" + i;
      int spread = SettlementDelivery.redeliverySpread(id, 0);
      assertTrue(
          spread >= 0 && spread <= SettlementDelivery.REDELIVERY_SPREAD_PERMILLE, "" + spread);
      quarters[Math.min(3, spread * 4 / (SettlementDelivery.REDELIVERY_SPREAD_PERMILLE + 1))]++;
      if (SettlementDelivery.redeliverySpread(id, 1) != spread) moved++;
    }
    for (int q : quarters)
      assertTrue(q > 2_200 && q < 2_800, "a quarter of the spread: " + Arrays.toString(quarters));
    assertTrue(moved > 9_900, "a rental's next retry lands elsewhere in the spread: " + moved);
  }

  @Test
  void cancelWhileTheHoldIsUnansweredCloses() {
    RentalFixture f =
        fixture(RentalFixture.withAskTimeout(settings(), Duration.ofMillis(300)), DEPOSIT);
    // The renter's account does not answer yet: the hold is retried, then the renter cancels.
    f.renter.drop.set(c -> c instanceof Account.PlaceHold);
    f.create(onDemand(CARDS, CEILING));
    f.renter.expect(Account.PlaceHold.class, c -> true);
    assertEquals(Rental.EndReason.CANCELLED, f.stop().endReason());
    f.renter.drop.set(c -> false);

    f.awaitState(Rental.Finished.class);
    Account.Summary renter = f.renter.summary();
    assertEquals(0, renter.held());
    assertEquals(DEPOSIT, renter.balance());
  }

  /**
   * Seed 5 of the whole-market simulation (with snapshots and clock steps back) left a renter's
   * money held at rest: a waiting rental's confirmed {@code PlaceHold} went unanswered (held in a
   * moving shard's buffer), its retry was refused, the rental ended refused, and then the first one
   * landed and opened a hold nobody would release. A refused rental now releases its hold id, so
   * the late placement is refused ({@code hold_closed}).
   */
  @Test
  void aPlacementThatLandsAfterItsRentalWasRefusedOpensNoHold() {
    long deposit = 1_000;
    RentalFixture f =
        fixture(RentalFixture.withAskTimeout(settings(), Duration.ofMillis(300)), deposit);
    // The launch's pending hold is lost (the request is recorded, the rental waits), and so is the
    // first confirmed one: it is kept here, to land late.
    AtomicReference<Account.PlaceHold> late = new AtomicReference<>();
    f.renter.drop.set(
        c ->
            c instanceof Account.PlaceHold p
                && (p.confirmWithin() != null || late.compareAndSet(null, p)));
    f.create(onDemand(CARDS, CEILING));
    f.expectMatch().replyTo().tell(new Matcher.NoMatch(f.rentalId, "none"));

    // Recorded, the rental waits; the retried placement reaches the account, which refuses it:
    // the renter cannot pay.
    assertEquals(Rental.Status.PENDING, ok(f.creator.receiveMessage(RentalFixture.WAIT)).status());
    assertEquals(Rejection.INSUFFICIENT_FUNDS, f.awaitState(Rental.RefusedRental.class).code());
    assertNotNull(late.get(), "the first confirmed placement was kept back");
    f.awaitAccountEvent(Account.UnplacedHoldReleased.class);

    // The renter pays in; the first placement lands now.
    f.renter.deposit("top-up", DEPOSIT);
    TestProbe<StatusReply<Account.HoldView>> answer = testKit.createTestProbe();
    Account.PlaceHold first = late.get();
    f.renter.account.tell(
        new Account.PlaceHold(first.holdId(), first.amount(), null, answer.getRef()));
    assertRejected(Rejection.HOLD_CLOSED, answer.receiveMessage(RentalFixture.WAIT));
    Account.Summary renter = f.renter.summary();
    assertEquals(0, renter.held());
    assertEquals(deposit + DEPOSIT, renter.balance());
  }

  // ---------------------------------------------------------------------------------------------
  // Recovery

  @Test
  void restartRecoversPendingAndResumesMatching() {
    RentalFixture f = fixture();
    Spec spec = onDemand(CARDS, CEILING);
    f.create(spec);
    f.expectMatch(); // never answered: the launch records its request and waits
    f.awaitState(Rental.Pending.class);
    State before = f.kit.getState();
    assertEquals(before, f.kit.restart().state());

    // It asks again (the matcher may have lost the request), placing the same hold once.
    Matcher.Match again = f.expectMatch();
    Account.Summary renter = f.renter.summary();
    assertEquals(Metering.cost(CEILING, CARDS, 300), renter.held());
    assertEquals(1, f.renter.events(Account.HoldPlaced.class).size());
    again.replyTo().tell(new Matcher.Matched(f.rentalId, f.reservation(spec, FLOOR)));
    f.awaitState(Rental.Provisioning.class);
  }

  @Test
  void aStartTheAgentNeverHeardOfIsSentAgainUntilItReportsTheStart() {
    RentalFixture f = fixture(); // retry interval 200 ms: a resend every 2 s
    Spec spec = onDemand(CARDS, CEILING);
    f.create(spec);
    f.expectMatch().replyTo().tell(new Matcher.Matched(f.rentalId, f.reservation(spec, FLOOR)));
    f.host.expect(
        Host.StartWorkload
            .class); // accepted, but lost on its way to the agent (its node shut down)
    assertEquals(f.rentalId, f.host.expect(Host.StartWorkload.class).rentalId(), "sent again");
    f.kit.runCommand(new Rental.WorkloadStarted(f.hostId, f.clock.instant()));
    assertEquals(Rental.Status.RUNNING, f.get().status());
  }

  @Test
  void provisioningTimeoutCountsFromTheMatchAcrossRestarts() {
    RentalFixture f =
        fixture(
            settings(
                s ->
                    withProvisioningTimeout(
                        withAskTimeout(s, Duration.ofMillis(500)), Duration.ofSeconds(60))),
            DEPOSIT);
    Spec spec = onDemand(CARDS, CEILING);
    f.create(spec);
    f.expectMatch().replyTo().tell(new Matcher.Matched(f.rentalId, f.reservation(spec, FLOOR)));
    f.host.expect(Host.StartWorkload.class);
    f.clock.advance(Duration.ofSeconds(61)); // the node was down longer than the whole timeout
    f.kit.restart();
    // Not another 60 s: only the ask timeout the agent gets to report a start.
    assertEquals(Rental.EndReason.PROVISIONING_FAILED, f.awaitEvent(Ended.class).reason());
  }

  @Test
  void stateKeepsTheLatestCheckpointsOnly() {
    List<Rental.Checkpoint> kept = List.of();
    for (int i = 1; i <= Rental.CHECKPOINTS_KEPT + 5; i++) {
      kept = Rental.append(kept, new Rental.Checkpoint(i, cost(i), 0, cost(i), at(i)));
      assertEquals(Math.min(i, Rental.CHECKPOINTS_KEPT), kept.size());
    }
    assertEquals(6, kept.get(0).throughSecond(), "the oldest make room");
    assertEquals(Rental.CHECKPOINTS_KEPT + 5, kept.get(kept.size() - 1).throughSecond());
  }

  @Test
  void restartRecoversProvisioningAndStartsTheWorkloadAgain() {
    RentalFixture f = fixture();
    Spec spec = onDemand(CARDS, CEILING);
    f.create(spec);
    f.expectMatch().replyTo().tell(new Matcher.Matched(f.rentalId, f.reservation(spec, FLOOR)));
    f.host.expect(Host.StartWorkload.class);
    State before = f.awaitState(Rental.Provisioning.class);
    assertEquals(before, f.kit.restart().state());
    assertEquals(f.rentalId, f.host.expect(Host.StartWorkload.class).rentalId());
    f.kit.runCommand(new Rental.WorkloadStarted(f.hostId, f.clock.instant()));
    assertEquals(Rental.Status.RUNNING, f.get().status());
  }

  @Test
  void restartRecoversRunningAndRedeliversTheLastSettlementWithoutDoubleCharging() {
    RentalFixture f = fixture();
    f.running(onDemand(CARDS, CEILING), FLOOR);
    f.clock.advance(Duration.ofSeconds(10));
    f.awaitCheckpoints(10L);
    f.renter.expect(Account.Capture.class, c -> c.throughSecond() == 10);
    f.provider.expect(Account.CreditEarnings.class, c -> c.throughSecond() == 10);
    f.awaitAssert(() -> assertConserved(f, cost(10)));

    State before = f.kit.getState();
    View viewBefore = f.get();
    assertEquals(before, f.kit.restart().state());
    assertEquals(viewBefore, f.get());
    // The last settlement goes out again; the accounts recognise it.
    Account.Capture redelivered = f.renter.expect(Account.Capture.class, c -> true);
    assertEquals(10, redelivered.throughSecond());
    assertEquals(cost(10), redelivered.cumulativeAmount());
    assertEquals(10, f.provider.expect(Account.CreditEarnings.class, c -> true).throughSecond());
    assertConserved(f, cost(10));
    assertEquals(1, f.renter.events(Account.Captured.class).size());

    // Metering goes on from the recorded start: the seconds of the restart are billed once.
    f.clock.advance(Duration.ofSeconds(15));
    f.awaitCheckpoints(10L, 25L);
    f.awaitAssert(() -> assertConserved(f, cost(25)));
    assertEquals(2, f.renter.events(Account.Captured.class).size());
  }

  @Test
  void aRentalStoppedOnTheSecondItLastSettledClosesTheSourceWithoutMovingMoney() {
    RentalFixture f = fixture();
    f.running(onDemand(CARDS, CEILING), FLOOR);
    f.clock.advance(Duration.ofSeconds(10));
    f.awaitCheckpoints(10L);
    f.provider.expect(Account.CreditEarnings.class, c -> c.throughSecond() == 10);
    f.stopUntilClosed(); // still second 10: nothing more to settle, but the source must close
    List<Account.EarningsCredited> credits = f.provider.events(Account.EarningsCredited.class);
    assertEquals(2, credits.size(), credits.toString());
    assertEquals(10, credits.get(1).throughSecond());
    assertTrue(credits.get(1).last());
    assertEquals(
        0,
        credits.get(1).providerAmount() + credits.get(1).platformAmount(),
        "the close moves no money");
    assertConserved(f, cost(10));
  }

  @Test
  void aClosedRentalLetsBothAccountsForgetItsHoldAndSource() {
    RentalFixture f = fixture();
    f.running(onDemand(CARDS, CEILING), FLOOR);
    f.clock.advance(Duration.ofSeconds(12));
    f.stopUntilClosed();
    f.awaitAssert(
        () -> {
          assertEquals(
              List.of(f.rentalId),
              f.renter.events(Account.ClosedForgotten.class).stream()
                  .map(Account.ClosedForgotten::id)
                  .toList());
          assertEquals(
              List.of(f.rentalId),
              f.provider.events(Account.ClosedForgotten.class).stream()
                  .map(Account.ClosedForgotten::id)
                  .toList());
        });
    assertRejected(Rejection.HOLD_NOT_FOUND, f.renter.hold(f.rentalId));
    // Late duplicates cannot open them again, and the money stands.
    assertRejected(Rejection.HOLD_CLOSED, f.renter.placeHold(f.rentalId, 1_000));
    Checkpoint last = f.lastCheckpoint();
    assertRejected(
        Rejection.HOLD_CLOSED,
        f.provider.credit(
            f.rentalId, last.throughSecond(), last.provider(), last.platform(), true));
    assertHoldReleased(f, DEPOSIT, cost(12));
    assertConserved(f, cost(12));
  }

  @Test
  void restartRecoversEndingAndFinishesTheMoneyOnce() {
    RentalFixture f = fixture();
    f.running(onDemand(CARDS, CEILING), FLOOR);
    f.clock.advance(Duration.ofSeconds(17));
    f.stop();
    f.awaitAssert(() -> assertHoldReleased(f, DEPOSIT, cost(17)));
    f.awaitAssert(() -> assertConserved(f, cost(17)));
    int accountEvents = postings(f);

    State before = f.awaitState(Rental.Ending.class);
    assertEquals(before, f.kit.restart().state());
    assertEquals(Rental.Status.STOPPING, f.get().status());
    f.host.expect(Host.ReleaseCards.class);
    f.agentStopped();
    f.awaitState(Rental.Finished.class);
    assertHoldReleased(f, DEPOSIT, cost(17));
    assertConserved(f, cost(17));
    assertEquals(accountEvents, postings(f), "nothing posted twice");
  }

  /** The events of the two accounts other than their forgetting the closed rental. */
  private static int postings(RentalFixture f) {
    return (int)
        java.util.stream.Stream.concat(f.renter.events().stream(), f.provider.events().stream())
            .filter(e -> !(e instanceof Account.ClosedForgotten))
            .count();
  }

  @Test
  void restartRecoversEndedRentalUnchanged() {
    RentalFixture f = fixture();
    f.running(onDemand(CARDS, CEILING), FLOOR);
    f.clock.advance(Duration.ofSeconds(12));
    State before = f.stopUntilClosed();
    View view = f.get();
    int events = f.events().size();
    assertEquals(before, f.kit.restart().state());
    assertEquals(view, f.get());
    assertEquals(events, f.events().size());
    assertConserved(f, cost(12));
    assertHoldReleased(f, DEPOSIT, cost(12));
  }

  // ---- keeping the workspace (snapshots)

  @Test
  void stopWithSnapshotKeepsTheWorkspaceAndCreatesTheSnapshot() {
    RentalFixture f = fixture();
    f.running(onDemand(CARDS, CEILING), FLOOR);
    f.clock.advance(Duration.ofSeconds(30));
    String snapshotId = dev.tickmark.engine.snapshot.Snapshot.idForRental(f.rentalId);
    View stopped = ok(f.ask(r -> new Rental.Stop(f.renterId, true, r)));
    assertEquals(snapshotId, stopped.snapshotId());
    assertEquals(Rental.Status.STOPPING, stopped.status());
    Host.StopWorkload stop = f.host.expect(Host.StopWorkload.class);
    assertEquals(new Host.StopWorkload(f.rentalId, true), stop);
    var create =
        f.snapshots.expectMessageClass(
            dev.tickmark.engine.snapshot.Snapshot.Create.class, RentalFixture.WAIT);
    assertEquals(f.renterId, create.renterId());
    assertEquals(f.rentalId, create.rentalId());
    assertEquals(f.hostId, create.hostId());
    assertEquals(GPU, create.gpu());
    assertEquals(REGION, create.region());
    assertEquals(
        List.of(new Rental.SnapshotKept(snapshotId, at(30))), f.events(Rental.SnapshotKept.class));
    // a repeated stop answers the same snapshot; metering stopped at the first
    assertEquals(snapshotId, ok(f.ask(r -> new Rental.Stop(f.renterId, true, r))).snapshotId());
    assertEquals(30, f.get().billedSeconds());
    // recovery asks the snapshot again (Create is idempotent there): the first may be lost
    f.restart();
    var again =
        f.snapshots.expectMessageClass(
            dev.tickmark.engine.snapshot.Snapshot.Create.class, RentalFixture.WAIT);
    assertEquals(snapshotId, f.get().snapshotId());
    f.agentStopped();
    // the money is done, but the rental closes only once the snapshot acknowledged; a refusal is
    // retried
    f.clock.advance(Duration.ofSeconds(40));
    f.awaitAssert(() -> assertEquals(0, f.renter.summary().held()));
    again.replyTo().tell(StatusReply.error("unavailable: the shard is moving"));
    var retried =
        f.snapshots.expectMessageClass(
            dev.tickmark.engine.snapshot.Snapshot.Create.class, RentalFixture.WAIT);
    assertInstanceOf(Rental.Ending.class, f.kit.getState(), "not closed before the snapshot");
    retried.replyTo().tell(StatusReply.success(snapshotView(f, snapshotId)));
    f.awaitState(Rental.Finished.class);
    assertEquals(snapshotId, f.get().snapshotId());
    assertConserved(f, cost(30));
  }

  private static dev.tickmark.engine.snapshot.Snapshot.View snapshotView(
      RentalFixture f, String snapshotId) {
    return new dev.tickmark.engine.snapshot.Snapshot.View(
        snapshotId,
        f.renterId,
        dev.tickmark.engine.snapshot.Snapshot.Status.UPLOADING,
        f.rentalId,
        f.hostId,
        GPU,
        REGION,
        0,
        null,
        0,
        START,
        null,
        null,
        0,
        0,
        null,
        null,
        null,
        null);
  }

  @Test
  void stopWithoutSnapshotDropsTheWorkspace() {
    RentalFixture f = fixture();
    f.running(onDemand(CARDS, CEILING), FLOOR);
    assertNull(f.stop().snapshotId());
    assertEquals(new Host.StopWorkload(f.rentalId, false), f.host.expect(Host.StopWorkload.class));
    f.snapshots.expectNoMessage(java.time.Duration.ofMillis(100));
    assertRejected(
        Rejection.SNAPSHOT_NOT_POSSIBLE, f.ask(r -> new Rental.Stop(f.renterId, true, r)));
  }

  @Test
  void onlyARunningRentalCanBeStoppedWithASnapshot() {
    RentalFixture f = fixture();
    f.create(onDemand(CARDS, CEILING));
    f.expectMatch();
    assertRejected(
        Rejection.SNAPSHOT_NOT_POSSIBLE, f.ask(r -> new Rental.Stop(f.renterId, true, r)));
    assertRejected(Rejection.NOT_FOUND, f.ask(r -> new Rental.Stop("someone-else", true, r)));
    assertInstanceOf(Rental.Pending.class, f.kit.getState(), "still waiting for its match");
  }

  @Test
  void restoreGoesToTheHostWithTheStart() {
    RentalFixture f = fixture();
    Rental.Restore restore = new Rental.Restore("snap_abc", "cd".repeat(32), 12_345);
    Spec spec = onDemand(CARDS, CEILING).withRestore(restore);
    f.create(spec);
    f.expectMatch().replyTo().tell(new Matcher.Matched(f.rentalId, f.reservation(spec, FLOOR)));
    ok(f.creator.receiveMessage(RentalFixture.WAIT));
    assertEquals(restore, f.host.expect(Host.StartWorkload.class).restore());
  }
}
