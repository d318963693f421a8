package dev.tickmark.engine.host;

import static dev.tickmark.engine.host.HostDriver.NEVER;
import static dev.tickmark.engine.host.HostDriver.OWNER;
import static dev.tickmark.engine.host.HostDriver.START;
import static dev.tickmark.engine.host.HostDriver.assertRejected;
import static dev.tickmark.engine.host.HostDriver.ok;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import dev.tickmark.engine.Rejection;
import dev.tickmark.engine.TestClock;
import dev.tickmark.engine.host.Host.HostView;
import dev.tickmark.engine.host.Host.MeasureAgainOnAgent;
import dev.tickmark.engine.host.Host.ToSession;
import dev.tickmark.engine.host.verification.Verification;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
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
 * Check again ({@link Host.RequestVerification}): the request is recorded, the agent is told to
 * measure again, and its new report is judged like any other.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@ExtendWith(TestKitJUnit5Extension.class)
class HostCheckAgainTest {
  static final Config CONFIG =
      EventSourcedBehaviorTestKit.config().withFallback(ConfigFactory.load());

  @JUnit5TestKit
  final ActorTestKit testKit =
      new JUnit5TestKitBuilder().withName("HostCheckAgainTest").withCustomConfig(CONFIG).build();

  private TestClock clock;
  private HostDriver host;

  @BeforeEach
  void freshHost() {
    clock = new TestClock(START);
    host = new HostDriver(testKit, HostDriver.settings(NEVER, false), clock, 4);
  }

  @Test
  void aFailedHostChecksAgainAndItsNewReportVerifiesIt() {
    TestProbe<ToSession> session = host.attached();
    assertFalse(
        ok(host.verify(session.getRef(), HostDriver.tampered(host.signedReport()))).passed());
    Instant failedAt = clock.instant();
    assertEquals("failed", host.view().status());
    assertEquals(failedAt, host.view().lastVerificationAt());

    clock.advance(Duration.ofMinutes(5));
    Instant askedAt = clock.instant();
    var requested = host.requestVerification(OWNER);
    HostView view = ok(requested);
    assertEquals(List.of(new Host.VerificationRequested(askedAt)), requested.events());
    assertEquals(askedAt, view.verificationRequestedAt());
    assertEquals("failed", view.status(), "nothing changes until the new report is judged");
    assertInstanceOf(MeasureAgainOnAgent.class, session.receiveMessage());
    host.assertRecovers();
    ok(host.attach(session.getRef())); // the restarted entity takes its agent back

    clock.advance(Duration.ofSeconds(10));
    var judged = host.verify(session.getRef(), host.signedReport());
    assertTrue(ok(judged).passed());
    assertInstanceOf(Host.ReportVerified.class, judged.events().get(0));
    HostView after = host.view();
    assertEquals("verified", after.status());
    assertEquals(4, after.cards().size(), "its cards are rentable again");
    assertNull(after.verificationRequestedAt(), "the request is answered");
    assertEquals(clock.instant(), after.lastVerificationAt());
    assertTrue(
        after.checks().stream().allMatch(c -> c.status() != Verification.Status.FAIL),
        () -> after.checks().toString());
  }

  @Test
  void aHostThatFailsAgainStaysFailedWithTheNewFigures() {
    TestProbe<ToSession> session = host.attached();
    ok(host.verify(session.getRef(), HostDriver.tampered(host.signedReport())));
    ok(host.requestVerification(OWNER));
    session.receiveMessage();
    clock.advance(Duration.ofSeconds(5));
    var hot =
        HostDriver.sign(
            HostDriver.eachGpu(HostDriver.report(4, false), g -> HostDriver.temperature(g, 95)),
            host.key.getPrivate());
    var judged = host.verify(session.getRef(), hot);
    assertFalse(ok(judged).passed());
    Host.ReportRejected rejected =
        assertInstanceOf(Host.ReportRejected.class, judged.events().get(0));
    assertFalse(rejected.evict(), "a host that was not verified is not evicted");
    HostView view = host.view();
    assertEquals("failed", view.status());
    assertEquals(
        Verification.Status.FAIL,
        view.checks().stream()
            .filter(c -> c.check().equals("gpu[0].temperature"))
            .findFirst()
            .orElseThrow()
            .status());
    assertEquals(clock.instant(), view.lastVerificationAt());
  }

  @Test
  void theSameReportAfterACheckAgainIsJudgedAgainNotTakenForADuplicate() {
    TestProbe<ToSession> session = host.verified();
    var report = host.signedReport();
    ok(host.requestVerification(OWNER));
    session.receiveMessage();
    clock.advance(Duration.ofSeconds(3));
    // verified() sent this very report: without the request it would be a duplicate delivery.
    var judged = host.verify(session.getRef(), report);
    assertEquals(1, judged.events().size(), () -> judged.events().toString());
    assertEquals(clock.instant(), host.view().lastVerificationAt());
    assertNull(host.view().verificationRequestedAt());
    assertTrue(host.verify(session.getRef(), report).hasNoEvents(), "a redelivery still is one");
  }

  @Test
  void aSecondRequestWithinTheWindowIsANoOpAndOneAfterItAsksAgain() {
    TestProbe<ToSession> session = host.attached();
    Instant first = clock.instant();
    ok(host.requestVerification(OWNER));
    assertInstanceOf(MeasureAgainOnAgent.class, session.receiveMessage());

    clock.advance(Host.REQUEST_VERIFICATION_WINDOW.minusSeconds(1));
    var again = host.requestVerification(OWNER);
    assertEquals(first, ok(again).verificationRequestedAt());
    assertTrue(again.hasNoEvents());
    session.expectNoMessage(Duration.ofMillis(200));

    // Unanswered past the window (a frame lost with a connection): the agent is asked again.
    clock.advance(Duration.ofSeconds(1));
    var later = host.requestVerification(OWNER);
    assertEquals(List.of(new Host.VerificationRequested(clock.instant())), later.events());
    assertInstanceOf(MeasureAgainOnAgent.class, session.receiveMessage());
  }

  @Test
  void refusesAnotherProviderAHostWithoutAnAgentAndAnEvictedHost() {
    ok(host.invite());
    assertRejected(Rejection.HOST_OFFLINE, host.requestVerification(OWNER));
    assertRejected(Rejection.NOT_FOUND, host.requestVerification("prov-other"));
    host.credential = ok(host.register()).hostCredential();
    assertRejected(Rejection.HOST_OFFLINE, host.requestVerification(OWNER));

    TestProbe<ToSession> session = testKit.createTestProbe();
    ok(host.attach(session.getRef()));
    assertTrue(ok(host.verify(session.getRef(), host.signedReport())).passed());
    assertRejected(Rejection.NOT_FOUND, host.requestVerification("prov-other"));
    host.kit.runCommand(new Host.Detach(session.getRef()));
    assertRejected(Rejection.HOST_OFFLINE, host.requestVerification(OWNER));

    ok(host.attach(session.getRef()));
    ok(host.evict("audit"));
    assertRejected(Rejection.HOST_NOT_AVAILABLE, host.requestVerification(OWNER));
    session.expectNoMessage(Duration.ofMillis(200));

    ok(host.reinstate());
    ok(host.remove(OWNER));
    assertRejected(Rejection.NOT_FOUND, host.requestVerification(OWNER));
  }
}
