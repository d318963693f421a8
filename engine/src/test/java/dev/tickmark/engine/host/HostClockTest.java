package dev.tickmark.engine.host;

import static dev.tickmark.engine.host.HostDriver.H100;
import static dev.tickmark.engine.host.HostDriver.ON_DEMAND;
import static dev.tickmark.engine.host.HostDriver.SPOT;
import static dev.tickmark.engine.host.HostDriver.START;
import static dev.tickmark.engine.host.HostDriver.assertRejected;
import static dev.tickmark.engine.host.HostDriver.ok;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import dev.tickmark.engine.Rejection;
import dev.tickmark.engine.TestClock;
import dev.tickmark.engine.host.Host.CloseSession;
import dev.tickmark.engine.host.Host.ToSession;
import java.time.DayOfWeek;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.apache.pekko.actor.testkit.typed.annotations.JUnit5TestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.JUnit5TestKitBuilder;
import org.apache.pekko.actor.testkit.typed.javadsl.TestKitJUnit5Extension;
import org.apache.pekko.actor.testkit.typed.javadsl.TestProbe;
import org.apache.pekko.persistence.testkit.javadsl.EventSourcedBehaviorTestKit;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The node's clock steps (NTP, a VM resumed) while a host is rented: the {@link Host} judges
 * silence, proof of life and availability windows on that clock, so a step forward must not make a
 * heartbeat prove the hour it skipped, a step back must not hide a silent host for an hour, and a
 * step past a window's end must not preempt a spot rental without notice.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@ExtendWith(TestKitJUnit5Extension.class)
class HostClockTest {
  static final Config CONFIG =
      EventSourcedBehaviorTestKit.config().withFallback(ConfigFactory.load());

  /** The default heartbeat timeout: longer than any test lives, so its timer never fires. */
  static final Duration TIMEOUT = Duration.ofSeconds(30);

  @JUnit5TestKit
  final ActorTestKit testKit =
      new JUnit5TestKitBuilder().withName("HostClockTest").withCustomConfig(CONFIG).build();

  private TestClock clock;
  private final List<String> lost = new CopyOnWriteArrayList<>();
  private final List<String> preempted = new CopyOnWriteArrayList<>();

  @BeforeEach
  void freshClock() {
    clock = new TestClock(START);
    lost.clear();
    preempted.clear();
  }

  private HostDriver host(Duration heartbeatTimeout) {
    Host.Settings base = HostDriver.settings(heartbeatTimeout, false);
    Host.RentalLink link =
        new Host.RentalLink() {
          @Override
          public void hostLost(String rentalId, String hostId, Instant lastHeartbeatAt) {
            lost.add(rentalId + " " + lastHeartbeatAt);
          }

          @Override
          public void preempt(String rentalId, String hostId, Instant deadline) {
            preempted.add(rentalId + "@" + deadline);
          }
        };
    return new HostDriver(testKit, HostDriver.withRentals(base, link), clock, 4);
  }

  private static Host.Liveness liveness(HostDriver host, String rentalId) {
    return host.kit.<Host.Liveness>runCommand(r -> new Host.GetLiveness(rentalId, r)).reply();
  }

  /** On the market with rental r1 running on one card, and one heartbeat listing it. */
  private TestProbe<ToSession> rented(HostDriver host) {
    TestProbe<ToSession> session = host.onMarket();
    ok(host.reserve("r1", 1));
    ok(host.confirm("r1"));
    clock.advance(Duration.ofSeconds(5));
    host.heartbeat(session.getRef(), 1, HostDriver.healthy(4), List.of("r1"));
    return session;
  }

  /**
   * +1 h between two heartbeats five real seconds apart: the second one is an hour after the first
   * on the clock. It proves none of that hour: the host is offline at the first, as if its check
   * had run first, and r1 is told it was lost there.
   */
  @Test
  void aHeartbeatAnHourLateOnTheClockProvesNoneOfTheHour() {
    HostDriver host = host(TIMEOUT);
    TestProbe<ToSession> session = rented(host);
    Instant beforeStep = clock.instant();

    clock.advance(Duration.ofHours(1).plusSeconds(5));
    host.heartbeat(session.getRef(), 2, HostDriver.healthy(4), List.of("r1"));

    Host.Liveness after = liveness(host, "r1");
    assertFalse(after.online(), "offline: silent past the timeout on the clock");
    assertEquals(beforeStep, after.lastHeartbeatAt(), "proven to the heartbeat before the step");
    assertEquals(List.of("r1 " + beforeStep), lost);
    assertEquals(
        new Host.WentOffline(beforeStep, clock.instant()),
        host.journal().get(host.journal().size() - 1));
    assertEquals(
        Rejection.HEARTBEAT_TIMEOUT, session.expectMessageClass(CloseSession.class).code());

    // The agent reconnects: online again from now, nothing of the hour vouched for.
    TestProbe<ToSession> again = testKit.createTestProbe();
    ok(host.attach(again.getRef()));
    assertTrue(liveness(host, "r1").online());
    host.assertRecovers();
  }

  /** The same step while the agent reconnects: a new session does not bridge the hour either. */
  @Test
  void aReconnectAnHourLateOnTheClockIsAnOutage() {
    HostDriver host = host(TIMEOUT);
    rented(host);
    Instant beforeStep = clock.instant();

    clock.advance(Duration.ofHours(1).plusSeconds(2));
    TestProbe<ToSession> again = testKit.createTestProbe();
    var attached = host.attach(again.getRef());
    assertEquals(
        List.of(
            new Host.WentOffline(beforeStep, clock.instant()),
            new Host.WentOnline(clock.instant())),
        attached.events());
    assertEquals(List.of("r1 " + beforeStep), lost);
    host.assertRecovers();
  }

  /**
   * −1 h right after a heartbeat, then the agent falls silent: the silence counts from the step, so
   * the host still goes offline about a timeout later (not an hour and a timeout), at the heartbeat
   * it last had.
   */
  @Test
  void aSilentHostStillGoesOfflineAfterTheClockStepsBack() {
    HostDriver fast = host(Duration.ofMillis(300));
    TestProbe<ToSession> session = fast.onMarket();
    clock.advance(Duration.ofMillis(100));
    fast.heartbeat(session.getRef(), 1, HostDriver.healthy(4));
    Instant lastBeat = clock.instant();

    clock.advance(Duration.ofHours(-1));
    // The checks run on real time; the clock has not moved since the step: not yet silent on it.
    session.expectNoMessage(Duration.ofMillis(700));
    assertTrue(fast.view().online());

    clock.advance(Duration.ofSeconds(1));
    CloseSession close = session.expectMessageClass(CloseSession.class, Duration.ofSeconds(5));
    assertEquals(Rejection.HEARTBEAT_TIMEOUT, close.code());
    assertEquals(
        new Host.WentOffline(lastBeat, clock.instant()),
        fast.journal().get(fast.journal().size() - 1),
        "offline at the last heartbeat, which the step did not move");
  }

  /**
   * −1 h while a rental runs: the record of the last heartbeat lies an hour ahead of the clock. The
   * next heartbeat is recorded at once, not once the clock has caught up, so a restart finds the
   * host alive, and r1 listed, up to it. Before, the simulation's seed 50 (20,000 steps) restarted
   * such a host, took it as alive and r1 as listed up to the heartbeat before the step, an hour
   * ahead, and billed r1 twenty minutes past the last heartbeat that listed its workload.
   */
  @Test
  void aHeartbeatAfterTheClockStepsBackIsRecordedAtOnce() {
    HostDriver host = host(TIMEOUT);
    TestProbe<ToSession> session = rented(host);

    clock.advance(Duration.ofHours(-1).plusSeconds(5));
    var beat = host.heartbeat(session.getRef(), 2, HostDriver.healthy(4), List.of("r1"));
    Instant afterStep = clock.instant();
    assertEquals(List.<Object>of(new Host.HeartbeatRecorded(afterStep)), beat.events());

    host.kit.restart();
    Host.Liveness recovered = liveness(host, "r1");
    assertEquals(afterStep, recovered.lastHeartbeatAt());
    assertEquals(afterStep, recovered.rentalListedAt());
  }

  /**
   * Availability is read on the clock: a step into Friday 11:00–12:00 opens the host, a step back
   * out closes it to new rentals, and a step past the window's end before any notice went out gives
   * the spot rental its full notice from then, not a deadline already due.
   */
  @Test
  void stepsIntoAndOutOfTheAvailabilityWindow() {
    // A timeout longer than the steps here: this test is about the window, not the silence.
    HostDriver windowed = host(Duration.ofHours(3));
    TestProbe<ToSession> session = windowed.verified();
    ok(
        windowed.updateListing(
            HostDriver.OWNER,
            new Listing(
                ON_DEMAND,
                SPOT,
                300,
                List.of(new Listing.Window(DayOfWeek.FRIDAY, 11 * 60, 12 * 60)),
                true)));
    // Friday 10:00: outside.
    assertRejected(
        Rejection.HOST_NOT_AVAILABLE, windowed.reserve("spot-1", H100, 1, Listing.Tier.SPOT, SPOT));

    clock.advance(Duration.ofHours(1)); // 11:00: inside
    ok(windowed.reserve("spot-1", H100, 1, Listing.Tier.SPOT, SPOT));
    ok(windowed.confirm("spot-1"));
    ok(windowed.reserve("ondemand-1", H100, 1, Listing.Tier.ON_DEMAND, ON_DEMAND));
    ok(windowed.confirm("ondemand-1"));
    clock.advance(Duration.ofMinutes(5));
    windowed.heartbeat(session.getRef(), 1, HostDriver.healthy(4));
    assertEquals(List.of(), preempted, "the window closes beyond the notice");

    clock.advance(Duration.ofHours(-1)); // 10:05: outside again
    assertRejected(
        Rejection.HOST_NOT_AVAILABLE,
        windowed.reserve("ondemand-2", H100, 1, Listing.Tier.ON_DEMAND, ON_DEMAND));

    clock.set(Instant.parse("2025-03-14T12:04:00Z")); // past the end, no notice given yet
    windowed.heartbeat(session.getRef(), 2, HostDriver.healthy(4));
    Instant deadline = clock.instant().plusSeconds(300);
    assertEquals(List.of("spot-1@" + deadline), preempted, "the full notice, from now");
    assertEquals(
        new Host.PreemptWorkload("spot-1", deadline),
        session.expectMessageClass(Host.PreemptWorkload.class));
    assertRejected(
        Rejection.HOST_NOT_AVAILABLE,
        windowed.reserve("ondemand-2", H100, 1, Listing.Tier.ON_DEMAND, ON_DEMAND));
  }
}
