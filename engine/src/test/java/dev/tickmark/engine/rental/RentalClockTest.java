package dev.tickmark.engine.rental;

import static dev.tickmark.engine.rental.RentalFixture.START;
import static dev.tickmark.engine.rental.RentalFixture.onDemand;
import static dev.tickmark.engine.rental.RentalFixture.settings;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import dev.tickmark.engine.account.Account;
import dev.tickmark.engine.host.Host;
import dev.tickmark.engine.money.Metering;
import dev.tickmark.engine.rental.Rental.Ended;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
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
 * The node's clock steps ±1 h or drifts while a rental runs ({@link RentalFixture}: the real
 * accounts, a scripted host answering as the real {@link Host} does, the rental's timers on real
 * time and its clock where the test puts it). Metering is cumulative, so settled seconds only grow:
 * a step back never bills a settled second again nor ends a rental before it; a step forward bills
 * no second the host did not prove by a heartbeat ({@code HostClockTest} shows the host's side);
 * under drift the rental bills what its clock measured, exactly.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@ExtendWith(TestKitJUnit5Extension.class)
class RentalClockTest {
  static final Config CONFIG =
      EventSourcedBehaviorTestKit.config().withFallback(ConfigFactory.load());

  @JUnit5TestKit
  final ActorTestKit testKit =
      new JUnit5TestKitBuilder().withName("RentalClockTest").withCustomConfig(CONFIG).build();

  private static final long CEILING = 3_000_000;
  private static final long FLOOR = 2_890_000;
  private static final int CARDS = 2;
  private static final long DEPOSIT = 100_000_000;

  private static long cost(long seconds) {
    return Metering.cost(FLOOR, CARDS, seconds);
  }

  private static Instant at(long seconds) {
    return START.plusSeconds(seconds);
  }

  private RentalFixture running() {
    RentalFixture f = new RentalFixture(testKit, settings(), DEPOSIT);
    f.running(onDemand(CARDS, CEILING), FLOOR);
    return f;
  }

  /**
   * Simulation seed 38 (`+steps-back`): a stopped rental whose agent never reported the stop waits
   * the stop timeout from its end, then closes billed to the last heartbeat. Recovered after the
   * clock stepped back an hour, it read that deadline as an hour away and stayed {@code stopping}
   * for the hour, with nothing left to do. A recovered rental waits at most one stop timeout.
   */
  @Test
  void aStoppedRentalRecoveredAfterABackwardStepStillClosesWithinTheStopTimeout() {
    RentalFixture f =
        new RentalFixture(
            testKit, RentalFixture.withStopTimeout(settings(), Duration.ofSeconds(2)), DEPOSIT);
    f.running(onDemand(CARDS, CEILING), FLOOR);
    f.clock.advance(Duration.ofSeconds(12));
    f.awaitCheckpoints(12L);
    f.stop(); // the agent never answers
    f.awaitEvent(Ended.class);
    f.clock.advance(Duration.ofHours(-1));
    f.restart();
    f.awaitState(Rental.Finished.class);
  }

  /** Nothing stays held, the renter paid {@code charged}, and it all went to provider and fee. */
  private static void assertSettledAt(RentalFixture f, long charged) {
    Account.Summary renter = f.renter.summary();
    assertEquals(0, renter.held(), "nothing stays held");
    assertEquals(DEPOSIT - charged, renter.balance());
    assertEquals(charged, renter.captured());
    Account.Summary provider = f.provider.summary();
    assertEquals(charged, provider.credited() + provider.platformCredited());
    long placed =
        f.renter.events(Account.HoldPlaced.class).stream()
                .mapToLong(Account.HoldPlaced::amount)
                .sum()
            + f.renter.events(Account.HoldExtended.class).stream()
                .mapToLong(Account.HoldExtended::added)
                .sum();
    List<Account.HoldReleased> released = f.renter.events(Account.HoldReleased.class);
    assertEquals(1, released.size(), "released once");
    assertEquals(placed - charged, released.get(0).released(), "the rest released, never less");
  }

  /** Seconds of every checkpoint strictly grow, and each costs exactly its cumulative cost. */
  private static void assertCumulative(RentalFixture f) {
    long previous = 0;
    for (Rental.Settled s : f.events(Rental.Settled.class)) {
      long second = s.checkpoint().throughSecond();
      assertTrue(second > previous, "checkpoints only grow: " + f.checkpointSeconds());
      assertEquals(cost(second), s.checkpoint().cost());
      previous = second;
    }
  }

  /**
   * +1 h while running: the clock says an hour passed, the host proved 25 s (its heartbeat after
   * the step takes it offline, as HostClockTest shows). The rental settles nothing past the
   * heartbeat and, told the host is lost, ends there.
   */
  @Test
  void aForwardStepBillsNoSecondPastTheLastHeartbeat() {
    RentalFixture f = running();
    f.clock.advance(Duration.ofSeconds(22));
    f.awaitCheckpoints(22L);
    f.clock.advance(Duration.ofSeconds(3));
    f.host.liveness.set(now -> new Host.Liveness(true, at(25))); // the last heartbeat before it
    int asks = f.host.livenessAsks.get();

    f.clock.advance(Duration.ofHours(1));
    // A settlement looks due by the clock; the second question comes once the first was answered.
    f.awaitAssert(() -> assertTrue(f.host.livenessAsks.get() > asks + 1, "asked twice"));
    assertEquals(List.of(22L), f.checkpointSeconds(), "nothing settled past the heartbeat");

    f.host.liveness.set(now -> new Host.Liveness(false, at(25)));
    f.tell(new Rental.HostLost(f.hostId, at(25), f.clock.instant()));
    Ended ended = f.awaitEvent(Ended.class);
    assertEquals(new Ended(Rental.EndReason.HOST_LOST, at(25), 25, ended.at()), ended);
    assertEquals(List.of(22L, 25L), f.checkpointSeconds());
    assertCumulative(f);
    f.awaitAssert(() -> assertSettledAt(f, cost(25)));
  }

  /**
   * −1 h while running, then the renter stops: 22 s were settled; the step neither shows the meter
   * going back (view and live ticks) nor bills those seconds again, and the end is not before them.
   * The renter pays 22 s (the host loses the seconds the clock took back).
   */
  @Test
  void aBackwardStepNeverBillsASettledSecondAgainNorEndsBeforeIt() {
    RentalFixture f = running();
    f.clock.advance(Duration.ofSeconds(22));
    f.awaitCheckpoints(22L);
    TestProbe<Rental.Update> updates = testKit.createTestProbe();
    TestProbe<StatusReply<Rental.View>> subscribed = testKit.createTestProbe();
    f.tell(new Rental.Subscribe(f.renterId, updates.getRef(), subscribed.getRef()));
    RentalFixture.ok(subscribed.receiveMessage(RentalFixture.WAIT));
    assertEquals(
        22,
        ((Rental.Tick) updates.receiveMessage(RentalFixture.WAIT)).second(),
        "a new subscriber gets the current second at once");

    f.clock.advance(Duration.ofHours(-1));
    f.clock.advance(Duration.ofSeconds(1));
    // The rental ticks every real second: no tick may show the meter going back below 22 s, and
    // none beyond it is due before the clock passes 22 s again.
    updates.expectNoMessage(Duration.ofMillis(1_500));
    assertEquals(22, f.get().billedSeconds(), "the live meter stays at what was settled");
    f.clock.advance(Duration.ofSeconds(30));
    updates.expectNoMessage(Duration.ofMillis(1_500));
    assertEquals(List.of(22L), f.checkpointSeconds(), "nothing is due: the clock is behind it");

    f.stop();
    // The agent's own clock did not step: it stopped the workload after the end.
    f.tell(new Rental.WorkloadStopped(f.hostId, at(23)));
    Ended ended = f.awaitEvent(Ended.class);
    assertEquals(at(22), ended.endAt(), "not before the last settled second");
    assertEquals(22, ended.billedSeconds());
    f.awaitState(Rental.Finished.class);
    assertEquals(List.of(22L), f.checkpointSeconds());
    assertCumulative(f);
    f.awaitAssert(() -> assertSettledAt(f, cost(22)));
  }

  /**
   * −1 h while running, then the host dies: its loss is declared (on the stepped-back clock)
   * earlier than the heartbeat the rental saw before the step. That is no sign of a loss the host
   * recovered from: the rental ends host_lost, billed what was settled.
   */
  @Test
  void aHostLostAfterABackwardStepIsNotTakenForAStaleOne() {
    RentalFixture f = running();
    f.clock.advance(Duration.ofSeconds(22));
    f.awaitCheckpoints(22L); // its liveness answer showed the heartbeat at 22 s

    f.clock.advance(Duration.ofHours(-1));
    Instant lastHeartbeat = f.clock.instant().plusSeconds(5);
    f.clock.advance(Duration.ofSeconds(35));
    f.host.liveness.set(now -> new Host.Liveness(false, lastHeartbeat));
    f.tell(new Rental.HostLost(f.hostId, lastHeartbeat, f.clock.instant()));

    Ended ended = f.awaitEvent(Ended.class);
    assertEquals(Rental.EndReason.HOST_LOST, ended.reason());
    assertEquals(at(22), ended.endAt(), "not before the last settled second");
    assertEquals(22, ended.billedSeconds());
    assertEquals(List.of(22L), f.checkpointSeconds());
    f.awaitAssert(() -> assertSettledAt(f, cost(22)));
  }

  /**
   * A clock 10 % fast against the timers: 30 steps of 1.1 s, settled as they pass, are 33 s billed
   * (the node's clock is the meter; NTP keeps real drift to parts per million).
   */
  @Test
  void aFastClockBillsTheSecondsItMeasured() {
    assertDrift(Duration.ofMillis(1_100), 33);
  }

  /** A clock 10 % slow: 30 steps of 0.9 s are 27 s billed. */
  @Test
  void aSlowClockBillsTheSecondsItMeasured() {
    assertDrift(Duration.ofMillis(900), 27);
  }

  private void assertDrift(Duration step, long billed) {
    RentalFixture f = running();
    for (int i = 1; i <= 30; i++) {
      f.clock.advance(step);
      if (i == 15) { // past the settle interval either way: settled, never beyond the clock
        long measured = step.multipliedBy(i).toSeconds();
        f.awaitAssert(
            () -> {
              long last = f.lastCheckpoint() == null ? 0 : f.lastCheckpoint().throughSecond();
              assertTrue(last >= 10 && last <= measured, "settled as it passes: " + last);
            });
      }
    }
    f.stopUntilClosed();
    assertEquals(billed, f.lastCheckpoint().throughSecond());
    assertEquals(billed, f.awaitEvent(Ended.class).billedSeconds());
    assertCumulative(f);
    f.awaitAssert(() -> assertSettledAt(f, cost(billed)));
  }
}
