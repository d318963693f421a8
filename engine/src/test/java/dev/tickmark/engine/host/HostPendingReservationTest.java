package dev.tickmark.engine.host;

import static dev.tickmark.engine.host.HostDriver.H100;
import static dev.tickmark.engine.host.HostDriver.NEVER;
import static dev.tickmark.engine.host.HostDriver.ON_DEMAND;
import static dev.tickmark.engine.host.HostDriver.START;
import static dev.tickmark.engine.host.HostDriver.assertRejected;
import static dev.tickmark.engine.host.HostDriver.ok;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import dev.tickmark.engine.Rejection;
import dev.tickmark.engine.TestClock;
import dev.tickmark.engine.host.Host.CardsClaimed;
import dev.tickmark.engine.host.Host.CardsExpired;
import dev.tickmark.engine.host.Host.Reservation;
import dev.tickmark.engine.host.Host.ToSession;
import java.time.Duration;
import java.util.List;
import org.apache.pekko.Done;
import org.apache.pekko.actor.testkit.typed.annotations.JUnit5TestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.JUnit5TestKitBuilder;
import org.apache.pekko.actor.testkit.typed.javadsl.TestKitJUnit5Extension;
import org.apache.pekko.actor.testkit.typed.javadsl.TestProbe;
import org.apache.pekko.pattern.StatusReply;
import org.apache.pekko.persistence.testkit.javadsl.EventSourcedBehaviorTestKit;
import org.apache.pekko.persistence.testkit.javadsl.EventSourcedBehaviorTestKit.CommandResultWithReply;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Pending reservations (issue 15, decision 1): the matcher reserves cards for a launch that has not
 * recorded anything yet, so a reservation its rental never claims (its first start) goes back by
 * itself, exactly once, and a claim that comes after that is refused: the cards are never booked
 * twice.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@ExtendWith(TestKitJUnit5Extension.class)
class HostPendingReservationTest {
  static final Config CONFIG =
      EventSourcedBehaviorTestKit.config().withFallback(ConfigFactory.load());

  @JUnit5TestKit
  final ActorTestKit testKit =
      new JUnit5TestKitBuilder()
          .withName("HostPendingReservationTest")
          .withCustomConfig(CONFIG)
          .build();

  private static final Duration WITHIN = Duration.ofSeconds(60);
  private static final Duration WAIT = Duration.ofSeconds(10);

  private HostDriver host() {
    HostDriver host =
        new HostDriver(testKit, HostDriver.settings(NEVER, false), new TestClock(START), 2);
    return host;
  }

  @Test
  void anUnclaimedReservationGoesBackExactlyOnceAndALateClaimIsRefusedWhileAnotherHoldsTheCards() {
    HostDriver host = host();
    TestProbe<ToSession> session = host.onMarket();
    Reservation first = ok(reservePending(host, "r-1", 2));
    assertEquals(List.of(0, 1), first.cards());
    assertRejected(Rejection.INSUFFICIENT_CARDS, reservePending(host, "r-2", 2));

    host.clock.advance(WITHIN);
    CardsExpired expired = awaitOne(host, CardsExpired.class);
    assertEquals(new CardsExpired("r-1", List.of(0, 1), START.plus(WITHIN)), expired);

    // The cards are free again: another rental takes them.
    Reservation second = ok(reservePending(host, "r-2", 2));
    assertEquals(List.of(0, 1), second.cards());
    // The first rental's start comes too late: refused, and the cards stay the second's.
    assertRejected(Rejection.RESERVATION_EXPIRED, start(host, "r-1"));
    assertEquals(List.of("r-2"), List.copyOf(host.enrolled().reservations().keySet()));
    // A late proposal for the first rental is refused too (its release is remembered).
    assertRejected(Rejection.HOST_NOT_AVAILABLE, reservePending(host, "r-1", 1));

    // The second claims its cards with its start: they no longer expire.
    ok(start(host, "r-2"));
    assertInstanceOf(Host.RunWorkload.class, session.receiveMessage(WAIT));
    host.clock.advance(WITHIN.multipliedBy(2));
    testKit.createTestProbe().expectNoMessage(Duration.ofMillis(1_200)); // past one look
    assertEquals(1, events(host, CardsExpired.class).size(), "only the first expired, once");
    assertEquals(1, events(host, CardsClaimed.class).size());
    assertEquals(List.of("r-2"), List.copyOf(host.enrolled().reservations().keySet()));
    host.assertRecovers();
  }

  @Test
  void aClaimedReservationAnswersItsStartAgainWithoutAnotherWrite() {
    HostDriver host = host();
    TestProbe<ToSession> session = host.onMarket();
    ok(reservePending(host, "r-3", 1));
    ok(start(host, "r-3"));
    session.receiveMessage(WAIT);
    var again = start(host, "r-3"); // the rental's resend
    ok(again);
    assertTrue(again.hasNoEvents(), () -> "claimed once: " + again.events());
    assertEquals(1, events(host, CardsClaimed.class).size());
  }

  @Test
  void anUnclaimedReservationStillExpiresAfterTheHostRestarts() {
    HostDriver host = host();
    host.onMarket();
    ok(reservePending(host, "r-4", 1));
    host.kit.restart();
    host.clock.advance(WITHIN);
    assertEquals(
        new CardsExpired("r-4", List.of(0), START.plus(WITHIN)),
        awaitOne(host, CardsExpired.class));
    assertTrue(host.enrolled().reservations().isEmpty());
  }

  @Test
  void aReservationThatIsNotPendingNeverExpires() {
    HostDriver host = host();
    host.onMarket();
    ok(host.reserve("r-5", 1)); // no claim time: as reservations were before pending ones
    host.clock.advance(WITHIN.multipliedBy(5));
    testKit.createTestProbe().expectNoMessage(Duration.ofMillis(1_200));
    assertTrue(events(host, CardsExpired.class).isEmpty());
    assertEquals(List.of("r-5"), List.copyOf(host.enrolled().reservations().keySet()));
  }

  /**
   * Seed 34 of the whole-market simulation (with clock steps back): a pending reservation's expiry
   * is an instant on the host's clock, so when the clock stepped back an hour the cards of a rental
   * that never learned of them (its match answer lost) stayed reserved for that hour. The host's
   * check with the rentals now covers pending reservations too: a rental that will not use them
   * gives them back within a check, whatever the clock says.
   */
  @Test
  void aPendingReservationWhoseClockSteppedBackIsCheckedWithItsRental() {
    RecordingRentalLink link = new RecordingRentalLink();
    HostDriver host =
        new HostDriver(
            testKit,
            HostDriver.withRentals(HostDriver.settings(NEVER, false), link),
            new TestClock(START),
            2);
    host.onMarket();
    ok(reservePending(host, "r-6", 1));
    host.clock.set(START.minus(Duration.ofHours(1))); // the wall clock steps back an hour

    assertTrue(host.kit.runCommand(Host.ReservationCheck.INSTANCE).hasNoEvents());
    assertEquals(List.of("r-6"), link.checked, "the pending reservation is asked about too");
    var unwanted = host.kit.runCommand(new Host.ReservationWanted("r-6", false, false));
    assertEquals(
        List.of(new Host.CardsReleased("r-6", List.of(0), START.minus(Duration.ofHours(1)))),
        unwanted.events());
    assertTrue(host.enrolled().reservations().isEmpty());
    assertTrue(events(host, CardsExpired.class).isEmpty(), "released once, never also expired");
    host.assertRecovers();
  }

  // ---------------------------------------------------------------------------------------------

  private static CommandResultWithReply<
          Host.Command, Host.Event, Host.State, StatusReply<Reservation>>
      reservePending(HostDriver host, String rentalId, int count) {
    return host.kit.runCommand(
        r ->
            new Host.ReserveCards(
                rentalId, null, H100, count, Listing.Tier.ON_DEMAND, ON_DEMAND, WITHIN, r));
  }

  private static CommandResultWithReply<Host.Command, Host.Event, Host.State, StatusReply<Done>>
      start(HostDriver host, String rentalId) {
    return host.kit.runCommand(
        r -> new Host.StartWorkload(rentalId, "img:1", List.of("run"), null, false, null, r));
  }

  private static <E> List<E> events(HostDriver host, Class<E> type) {
    return host.journal().stream().filter(type::isInstance).map(type::cast).toList();
  }

  private <E> E awaitOne(HostDriver host, Class<E> type) {
    return testKit
        .createTestProbe()
        .awaitAssert(
            WAIT,
            () -> {
              List<E> found = events(host, type);
              assertEquals(1, found.size(), () -> "one " + type.getSimpleName());
              return found.get(0);
            });
  }
}
