package dev.tickmark.engine.host;

import static dev.tickmark.engine.host.HostDriver.ON_DEMAND;
import static dev.tickmark.engine.host.HostDriver.OWNER;
import static dev.tickmark.engine.host.HostDriver.REGION;
import static dev.tickmark.engine.host.HostDriver.SPOT;
import static dev.tickmark.engine.host.HostDriver.START;
import static dev.tickmark.engine.host.HostDriver.ok;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import dev.tickmark.engine.Rejection;
import dev.tickmark.engine.TestClock;
import dev.tickmark.engine.host.Host.CloseSession;
import dev.tickmark.engine.host.Host.Event;
import dev.tickmark.engine.host.Host.ToSession;
import dev.tickmark.engine.host.verification.Verification;
import java.time.DayOfWeek;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.pekko.actor.testkit.typed.annotations.JUnit5TestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.JUnit5TestKitBuilder;
import org.apache.pekko.actor.testkit.typed.javadsl.SerializationTestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.TestKitJUnit5Extension;
import org.apache.pekko.actor.testkit.typed.javadsl.TestProbe;
import org.apache.pekko.persistence.testkit.javadsl.EventSourcedBehaviorTestKit;
import org.apache.pekko.serialization.SerializationExtension;
import org.apache.pekko.serialization.jackson.JacksonCborSerializer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * A host recovers the same state after every kind of event, and everything it persists or sends
 * survives jackson-cbor.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@ExtendWith(TestKitJUnit5Extension.class)
class HostRecoveryTest {
  static final Config CONFIG =
      EventSourcedBehaviorTestKit.config().withFallback(ConfigFactory.load());

  @JUnit5TestKit
  final ActorTestKit testKit =
      new JUnit5TestKitBuilder().withName("HostRecoveryTest").withCustomConfig(CONFIG).build();

  private static final List<Class<? extends Event>> EVERY_EVENT =
      List.of(
          Host.Invited.class,
          Host.Registered.class,
          Host.ReportVerified.class,
          Host.ReportRejected.class,
          Host.WentOnline.class,
          Host.VerificationRequested.class,
          Host.WentOffline.class,
          Host.ListingUpdated.class,
          Host.DrainStarted.class,
          Host.Evicted.class,
          Host.Reinstated.class,
          Host.Removed.class,
          Host.CardsReserved.class,
          Host.CardsRented.class,
          Host.CardsReleased.class,
          Host.HeartbeatRecorded.class,
          Host.WorkloadUnlisted.class);

  @Test
  void recoversTheSameStateAfterEveryKindOfEvent() {
    TestClock clock = new TestClock(START);
    // A short timeout so that the host can go offline here; the clock stands still until then, so
    // checks find it fresh.
    HostDriver host =
        new HostDriver(testKit, HostDriver.settings(Duration.ofMillis(300), false), clock, 4);
    Map<Class<?>, Integer> recovered = new HashMap<>();
    Runnable check =
        () -> {
          Object last = host.journal().get(host.journal().size() - 1);
          host.assertRecovers();
          recovered.merge(last.getClass(), 1, Integer::sum);
        };

    ok(host.invite());
    check.run(); // Invited
    host.credential = ok(host.register()).hostCredential();
    check.run(); // Registered
    TestProbe<ToSession> session = testKit.createTestProbe();
    ok(host.attach(session.getRef()));
    check.run(); // WentOnline
    assertTrue(
        ok(host.attach(session.getRef())).heartbeatIntervalSeconds() > 0,
        "the restarted host takes its agent back");
    ok(host.verify(session.getRef(), host.signedReport()));
    check.run(); // ReportVerified
    ok(host.attach(session.getRef())); // the restarted host takes its agent back
    ok(host.requestVerification(OWNER));
    session.expectMessageClass(Host.MeasureAgainOnAgent.class);
    check.run(); // VerificationRequested
    ok(host.attach(session.getRef()));
    ok(host.verify(session.getRef(), host.signedReport())); // answers it (recorded again)
    ok(
        host.updateListing(
            OWNER,
            new Listing(
                ON_DEMAND,
                SPOT,
                900,
                List.of(new Listing.Window(DayOfWeek.FRIDAY, 0, 1440)),
                true)));
    check.run(); // ListingUpdated
    ok(host.reserve("r1", 2));
    check.run(); // CardsReserved
    ok(host.confirm("r1"));
    check.run(); // CardsRented
    ok(host.attach(session.getRef())); // the restarted host takes its agent back
    // Past the recording interval in heartbeats closer than the timeout: a heartbeat that comes
    // after the timeout on the clock takes the host offline (HostClockTest).
    for (int seq = 1; seq <= 40; seq++) {
      clock.advance(Duration.ofMillis(250));
      host.heartbeat(session.getRef(), seq, HostDriver.healthy(4));
    }
    assertEquals(
        Host.HeartbeatRecorded.class,
        host.journal().get(host.journal().size() - 1).getClass(),
        "a rented host's heartbeat is kept");
    check.run(); // HeartbeatRecorded
    ok(host.attach(session.getRef())); // the restarted host takes its agent back
    host.heartbeat(session.getRef(), 2, HostDriver.healthy(4), List.of("r1"));
    host.heartbeat(session.getRef(), 3, HostDriver.healthy(4), List.of());
    assertInstanceOf(
        Host.WorkloadUnlisted.class,
        host.journal().get(host.journal().size() - 1),
        "a heartbeat no longer lists r1's workload");
    check.run(); // WorkloadUnlisted
    ok(host.reserve("r2", 1));
    ok(host.release("r2"));
    check.run(); // CardsReleased
    ok(host.drain(OWNER));
    check.run(); // DrainStarted
    ok(host.evict("audit"));
    check.run(); // Evicted
    ok(host.reinstate());
    check.run(); // Reinstated
    ok(host.attach(session.getRef()));
    ok(host.verify(session.getRef(), HostDriver.tampered(host.signedReport())));
    assertEquals("evicted", host.view().status());
    check.run(); // ReportRejected

    ok(host.attach(session.getRef()));
    Instant lastSeen = clock.instant();
    clock.advance(Duration.ofSeconds(2));
    assertEquals(
        Rejection.HEARTBEAT_TIMEOUT,
        session.expectMessageClass(CloseSession.class, Duration.ofSeconds(5)).code());
    assertInstanceOf(Host.WentOffline.class, host.journal().get(host.journal().size() - 1));
    assertEquals(lastSeen, host.view().lastHeartbeatAt());
    check.run(); // WentOffline

    ok(host.release("r1"));
    ok(host.remove(OWNER));
    check.run(); // Removed
    assertInstanceOf(Host.Gone.class, host.kit.getState());

    Set<Class<?>> persisted = new LinkedHashSet<>();
    host.journal().forEach(e -> persisted.add(e.getClass()));
    assertEquals(Set.copyOf(EVERY_EVENT), persisted, "the scenario persists every kind of event");
    assertEquals(Set.copyOf(EVERY_EVENT), recovered.keySet(), "and recovers after each");
  }

  @Test
  void everyEventStateAndReplyRoundTripsThroughJacksonCbor() {
    TestClock clock = new TestClock(START);
    HostDriver host =
        new HostDriver(testKit, HostDriver.settings(HostDriver.NEVER, false), clock, 4);
    TestProbe<ToSession> session = host.onMarket();
    ok(host.reserve("r1", 2));
    ok(host.confirm("r1"));
    ok(host.reserve("r2", 1));
    Host.Active enrolled = host.enrolled();
    assertFalse(enrolled.reservations().isEmpty());
    Verification.Outcome passed = enrolled.standing().outcome();
    Verification.Outcome failed =
        Verification.verify(
            HostDriver.report(4, true),
            false,
            HostDriver.CATALOG,
            Verification.Policy.defaults(false));
    Listing listing =
        new Listing(
            ON_DEMAND, SPOT, 600, List.of(new Listing.Window(DayOfWeek.SATURDAY, 60, 1440)), true);
    Instant at = START.plusMillis(1234);

    List<Object> messages =
        new ArrayList<>(
            List.of(
                new Host.Invited(
                    OWNER,
                    REGION,
                    "rack-1",
                    host.tokenHash(),
                    START.plus(Duration.ofHours(24)),
                    at),
                new Host.Invited(OWNER, REGION, null, host.tokenHash(), START, at),
                new Host.Registered(host.publicKey, Host.sha256("secret"), at),
                new Host.VerificationRequested(at),
                enrolled.withStanding(enrolled.standing().checkRequested(at)),
                new Host.MeasureAgainOnAgent("requested by the provider"),
                new Host.ReportVerified(passed, "abc:signed", at),
                new Host.ReportRejected(failed, "def:unsigned", true, at),
                new Host.WentOnline(at),
                new Host.WentOffline(START, at),
                new Host.ListingUpdated(listing, at),
                new Host.ListingUpdated(Listing.unlisted(), at),
                new Host.DrainStarted(at),
                new Host.Evicted("GPU 2: Xid 79", at),
                new Host.Reinstated(at),
                new Host.Removed(at),
                new Host.CardsReserved("r1", List.of(0, 3), ON_DEMAND, Listing.Tier.SPOT, at),
                new Host.CardsRented("r1", at),
                new Host.CardsReleased("r1", List.of(0, 3), at),
                new Host.HeartbeatRecorded(at),
                new Host.WorkloadUnlisted("r1", START, at),
                // states
                Host.Empty.INSTANCE,
                new Host.Invitation(OWNER, REGION, "rack-1", host.tokenHash(), at),
                enrolled,
                new Host.Gone(OWNER, "credential-hash", "token-hash"),
                // replies and session messages
                host.view(),
                ok(host.reserve("r1", 2)),
                new Host.Registration(host.hostId, "tmkhost_x_y"),
                new Host.Identity(host.hostId, host.publicKey, OWNER),
                new Host.Attached(host.hostId, 5),
                new CloseSession(Rejection.REPLACED, "a newer session for this host connected"),
                // commands from the edge carrying refs
                new Host.Heartbeat(
                    session.getRef(),
                    7,
                    HostDriver.faulty(4, 1),
                    List.of("r1"),
                    1_700_000_000_000_000L),
                new Host.ReserveCards(
                    "r3",
                    HostDriver.H100,
                    1,
                    Listing.Tier.ON_DEMAND,
                    ON_DEMAND,
                    testKit
                        .<org.apache.pekko.pattern.StatusReply<Host.Reservation>>createTestProbe()
                        .getRef())));
    for (Class<? extends Event> type : EVERY_EVENT) {
      assertTrue(
          messages.stream().anyMatch(type::isInstance), type.getSimpleName() + " is covered");
    }

    var serialization = SerializationExtension.get(testKit.system());
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
}
