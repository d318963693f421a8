package dev.tickmark.engine.host;

import static dev.tickmark.engine.host.HostDriver.H100;
import static dev.tickmark.engine.host.HostDriver.NEVER;
import static dev.tickmark.engine.host.HostDriver.ON_DEMAND;
import static dev.tickmark.engine.host.HostDriver.OWNER;
import static dev.tickmark.engine.host.HostDriver.REGION;
import static dev.tickmark.engine.host.HostDriver.SPOT;
import static dev.tickmark.engine.host.HostDriver.START;
import static dev.tickmark.engine.host.HostDriver.assertRejected;
import static dev.tickmark.engine.host.HostDriver.ok;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import dev.tickmark.engine.Rejection;
import dev.tickmark.engine.TestClock;
import dev.tickmark.engine.host.Host.Attached;
import dev.tickmark.engine.host.Host.CardView;
import dev.tickmark.engine.host.Host.CardsReleased;
import dev.tickmark.engine.host.Host.CloseSession;
import dev.tickmark.engine.host.Host.HostView;
import dev.tickmark.engine.host.Host.Identity;
import dev.tickmark.engine.host.Host.Registration;
import dev.tickmark.engine.host.Host.Reservation;
import dev.tickmark.engine.host.Host.ToSession;
import dev.tickmark.engine.host.HostDriver.Signed;
import dev.tickmark.engine.host.verification.Verification;
import dev.tickmark.wire.Ed25519;
import java.security.KeyPairGenerator;
import java.time.DayOfWeek;
import java.time.Duration;
import java.time.Instant;
import java.util.Base64;
import java.util.List;
import org.apache.pekko.Done;
import org.apache.pekko.actor.testkit.typed.annotations.JUnit5TestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.JUnit5TestKitBuilder;
import org.apache.pekko.actor.testkit.typed.javadsl.TestKitJUnit5Extension;
import org.apache.pekko.actor.testkit.typed.javadsl.TestProbe;
import org.apache.pekko.pattern.StatusReply;
import org.apache.pekko.persistence.testkit.javadsl.EventSourcedBehaviorTestKit;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The rules of the {@link Host} entity, one per test, through {@link EventSourcedBehaviorTestKit}:
 * registration, sessions, verification, health, listing, provider and operator controls, and the
 * card reservations the matcher asks for.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@ExtendWith(TestKitJUnit5Extension.class)
class HostTest {
  /**
   * The testkit's in-memory journal first; application.conf (test resources) supplies the
   * serialization bindings.
   */
  static final Config CONFIG =
      EventSourcedBehaviorTestKit.config().withFallback(ConfigFactory.load());

  @JUnit5TestKit
  final ActorTestKit testKit =
      new JUnit5TestKitBuilder().withName("HostTest").withCustomConfig(CONFIG).build();

  private TestClock clock;
  private HostDriver host;

  @BeforeEach
  void freshHost() {
    clock = new TestClock(START);
    host = new HostDriver(testKit, HostDriver.settings(NEVER, false), clock, 4);
  }

  private TestProbe<ToSession> session() {
    return testKit.createTestProbe();
  }

  // ---------------------------------------------------------------------------------------------
  // Invitation and registration

  @Test
  void registersWithTheTokenPinsTheKeyAndAnswersACredentialThatAuthenticates() {
    var invited = host.invite();
    ok(invited);
    assertEquals(
        List.of(
            new Host.Invited(
                OWNER,
                REGION,
                "rack-1",
                host.tokenHash(),
                START.plus(Duration.ofHours(24)),
                START)),
        invited.events());
    HostView invitation = ok(host.get(OWNER));
    assertEquals("invited", invitation.status());
    assertFalse(invitation.online());

    ok(host.checkToken(host.tokenHash()));
    var registered = host.register();
    Registration registration = ok(registered);
    assertEquals(host.hostId, registration.hostId());
    String prefix = "tmkhost_" + host.hostId + "_";
    assertTrue(registration.hostCredential().startsWith(prefix), registration.hostCredential());
    String secret = registration.hostCredential().substring(prefix.length());
    assertTrue(secret.matches("[0-9a-f]{48}"), secret);
    assertFalse(registration.toString().contains(secret), "the credential is never logged");

    assertEquals(
        List.of(new Host.Registered(host.publicKey, Host.sha256(secret), START)),
        registered.events());
    assertEquals(host.publicKey, host.enrolled().enrollment().publicKey());
    assertEquals(Host.Status.REGISTERED, host.enrolled().status());
    assertEquals(
        new Identity(host.hostId, host.publicKey, OWNER),
        ok(host.authenticate(Host.sha256(secret))));

    HostView view = ok(host.get(OWNER));
    assertEquals("registered", view.status());
    assertEquals(START, view.registeredAt());
    assertFalse(view.online());
    assertEquals(List.of(), view.cards());
    host.assertRecovers();
  }

  @Test
  void theAgentThatRegisteredGetsANewCredentialWithItsSpentTokenForAnHour() {
    // the registration was persisted but its answer never reached the agent (the node died)
    String lost = host.registered();
    clock.advance(Host.REREGISTRATION_WINDOW.minusSeconds(1));
    ok(host.checkToken(host.tokenHash()));
    String again = ok(host.register()).hostCredential();
    assertFalse(again.equals(lost), "a new credential");
    assertTrue(
        host.journal().stream().anyMatch(e -> e instanceof Host.CredentialReissued),
        "kept in the journal");
    host.credential = again;
    ok(host.authenticate(host.credentialHash()));
    host.credential = lost;
    assertRejected(Rejection.UNAUTHORIZED, host.authenticate(host.credentialHash()));
    // another key with the same token is refused, even within the hour
    assertRejected(
        Rejection.TOKEN_USED,
        host.register(host.tokenHash(), Ed25519.encodePublic(Ed25519.generate().getPublic())));
    host.assertRecovers();
    clock.advance(Duration.ofSeconds(1));
    assertRejected(Rejection.TOKEN_USED, host.checkToken(host.tokenHash()));
    assertRejected(Rejection.TOKEN_USED, host.register());
  }

  @Test
  void refusesASecondRegistrationWithTokenUsed() {
    host.registered();
    clock.advance(Host.REREGISTRATION_WINDOW);
    assertRejected(Rejection.TOKEN_USED, host.register());
    assertRejected(
        Rejection.TOKEN_USED,
        host.register(host.tokenHash(), Ed25519.encodePublic(Ed25519.generate().getPublic())));
    assertRejected(Rejection.TOKEN_USED, host.checkToken(host.tokenHash()));
    // only the token's holder learns it was spent; a guess at the host id learns nothing
    assertRejected(Rejection.UNAUTHORIZED, host.checkToken(Host.sha256("guess")));
    assertRejected(
        Rejection.UNAUTHORIZED,
        host.register(Host.sha256("guess"), Ed25519.encodePublic(Ed25519.generate().getPublic())));
    assertEquals(
        host.publicKey, host.enrolled().enrollment().publicKey(), "the first key stays pinned");
  }

  @Test
  void refusesAnExpiredTokenAndAcceptsItUntilItsLastInstant() {
    Instant expiresAt = START.plus(Duration.ofHours(1));
    ok(host.invite(expiresAt));
    clock.set(expiresAt.minusMillis(1));
    ok(host.checkToken(host.tokenHash()));
    clock.set(expiresAt);
    assertRejected(Rejection.TOKEN_EXPIRED, host.checkToken(host.tokenHash()));
    assertRejected(Rejection.TOKEN_EXPIRED, host.register());
    assertInstanceOf(Host.Invitation.class, host.kit.getState());
  }

  @Test
  void refusesAWrongTokenAsUnauthorized() {
    ok(host.invite());
    assertRejected(
        Rejection.UNAUTHORIZED, host.register(Host.sha256("tmkreg-guess"), host.publicKey));
    assertRejected(Rejection.UNAUTHORIZED, host.register(null, host.publicKey));
    assertRejected(Rejection.UNAUTHORIZED, host.checkToken(Host.sha256("tmkreg-guess")));
    // Nothing was spent: the right token still registers.
    ok(host.register());
  }

  @Test
  void refusesCommandsToAHostThatWasNeverInvited() {
    assertRejected(Rejection.UNAUTHORIZED, host.register());
    assertRejected(Rejection.UNAUTHORIZED, host.checkToken(host.tokenHash()));
    assertRejected(Rejection.UNAUTHORIZED, host.authenticate(Host.sha256("x")));
    assertRejected(Rejection.NOT_FOUND, host.get(null));
    assertRejected(Rejection.NOT_FOUND, host.reserve("r1", 1));
    assertTrue(host.heartbeat(session().getRef(), 1, HostDriver.healthy(4)).hasNoEvents());
  }

  @Test
  void refusesASecondInvitationForTheSameHost() {
    ok(host.invite());
    assertRejected(Rejection.ALREADY_EXISTS, host.invite());
    host.register();
    assertRejected(Rejection.ALREADY_EXISTS, host.invite());
  }

  @Test
  void refusesAPublicKeyThatIsNotEd25519WithoutSpendingTheToken() throws Exception {
    ok(host.invite());
    var rsa = KeyPairGenerator.getInstance("RSA");
    rsa.initialize(1024);
    String rsaKey =
        Base64.getEncoder().encodeToString(rsa.generateKeyPair().getPublic().getEncoded());
    assertRejected(Rejection.BAD_PUBLIC_KEY, host.register(host.tokenHash(), rsaKey));
    assertRejected(Rejection.BAD_PUBLIC_KEY, host.register(host.tokenHash(), "not base64 at all!"));
    assertRejected(Rejection.BAD_PUBLIC_KEY, host.register(host.tokenHash(), null));
    ok(host.register());
  }

  @Test
  void refusesAWrongCredentialAsUnauthorized() {
    String credential = host.registered();
    String secret = credential.substring(("tmkhost_" + host.hostId + "_").length());
    assertRejected(Rejection.UNAUTHORIZED, host.authenticate(Host.sha256(secret + "0")));
    assertRejected(Rejection.UNAUTHORIZED, host.authenticate(Host.sha256(credential)));
    assertRejected(Rejection.UNAUTHORIZED, host.authenticate(secret));
    assertRejected(Rejection.UNAUTHORIZED, host.authenticate(null));
  }

  @Test
  void refusesCredentialsBeforeRegistration() {
    ok(host.invite());
    assertRejected(Rejection.UNAUTHORIZED, host.authenticate(host.tokenHash()));
  }

  // ---------------------------------------------------------------------------------------------
  // Sessions

  @Test
  void attachPutsTheHostOnlineAndStartsVerification() {
    host.registered();
    TestProbe<ToSession> session = session();
    var attached = host.attach(session.getRef());
    assertEquals(new Attached(host.hostId, 5), ok(attached));
    assertEquals(List.of(new Host.WentOnline(START)), attached.events());
    HostView view = host.view();
    assertTrue(view.online());
    assertEquals("verifying", view.status());
    assertEquals(START, view.lastHeartbeatAt());

    // Attaching again (the same or a new session) while online persists nothing.
    assertTrue(host.attach(session.getRef()).hasNoEvents());
    session.expectNoMessage(Duration.ofMillis(50));
  }

  @Test
  void aSecondAttachTellsTheFirstSessionToClose() {
    TestProbe<ToSession> first = host.attached();
    TestProbe<ToSession> second = session();
    var replaced = host.attach(second.getRef());
    ok(replaced);
    assertTrue(replaced.hasNoEvents());
    CloseSession close = first.expectMessageClass(CloseSession.class);
    assertEquals(Rejection.REPLACED, close.code());
    second.expectNoMessage(Duration.ofMillis(50));

    // The replaced session can no longer report.
    assertRejected(Rejection.REPLACED, host.verify(first.getRef(), host.signedReport()));
    assertTrue(ok(host.verify(second.getRef(), host.signedReport())).passed());
  }

  @Test
  void aReportFromAnUnattachedSessionIsRefused() {
    host.registered();
    assertRejected(Rejection.REPLACED, host.verify(session().getRef(), host.signedReport()));
  }

  // ---------------------------------------------------------------------------------------------
  // Verification

  @Test
  void aValidSignedReportVerifiesTheHostWithItsCards() {
    TestProbe<ToSession> session = host.attached();
    var verified = host.verify(session.getRef(), host.signedReport());
    Verification.Outcome outcome = ok(verified);
    assertTrue(outcome.passed(), () -> outcome.checks().toString());
    assertEquals(Verification.Status.PASS, outcome.check("signature").orElseThrow().status());
    assertEquals(
        Verification.Status.NOT_MEASURED, outcome.check("benchmark").orElseThrow().status());
    assertEquals(1, verified.events().size());
    Host.ReportVerified event =
        assertInstanceOf(Host.ReportVerified.class, verified.events().get(0));
    assertEquals(outcome, event.outcome());

    HostView view = host.view();
    assertEquals("verified", view.status());
    assertEquals(H100, view.gpu());
    assertFalse(view.simulated());
    assertEquals(outcome.checks(), view.checks());
    assertEquals(4, view.cards().size());
    for (int i = 0; i < 4; i++) {
      assertEquals(
          new CardView(i, HostDriver.h100(i).uuid(), H100, "free", null), view.cards().get(i));
    }
  }

  @Test
  void theSameReportAgainGetsTheSameOutcomeAndPersistsNothing() {
    TestProbe<ToSession> session = host.attached();
    Signed report = host.signedReport();
    Verification.Outcome first = ok(host.verify(session.getRef(), report));
    var again = host.verify(session.getRef(), report);
    assertEquals(first, ok(again));
    assertTrue(again.hasNoEvents());

    // A rejected report delivered twice is also one event.
    HostDriver other = new HostDriver(testKit, HostDriver.settings(NEVER, false), clock, 4);
    TestProbe<ToSession> otherSession = other.attached();
    Signed bad = HostDriver.tampered(other.signedReport());
    Verification.Outcome failed = ok(other.verify(otherSession.getRef(), bad));
    var failedAgain = other.verify(otherSession.getRef(), bad);
    assertEquals(failed, ok(failedAgain));
    assertTrue(failedAgain.hasNoEvents());
  }

  @Test
  void aTamperedReportFailsOnItsSignature() {
    TestProbe<ToSession> session = host.attached();
    var result = host.verify(session.getRef(), HostDriver.tampered(host.signedReport()));
    Verification.Outcome outcome = ok(result);
    assertFalse(outcome.passed());
    assertEquals(Verification.Status.FAIL, outcome.check("signature").orElseThrow().status());
    // Everything else in the altered report would pass: only the signature fails it.
    assertEquals(
        1, outcome.checks().stream().filter(c -> c.status() == Verification.Status.FAIL).count());
    Host.ReportRejected event = assertInstanceOf(Host.ReportRejected.class, result.events().get(0));
    assertFalse(event.evict());

    HostView view = host.view();
    assertEquals("failed", view.status());
    assertNull(view.evictionReason());
    assertEquals(List.of(), view.cards(), "a host that never passed has no rentable cards");

    // A report signed with another key fails the same way.
    Signed foreign = HostDriver.sign(HostDriver.report(4, false), Ed25519.generate().getPrivate());
    assertEquals(
        Verification.Status.FAIL,
        ok(host.verify(session.getRef(), foreign)).check("signature").orElseThrow().status());

    // Retries are unlimited: the genuine report verifies the host.
    assertTrue(ok(host.verify(session.getRef(), host.signedReport())).passed());
    assertEquals("verified", host.view().status());
  }

  @Test
  void aSimulatedHostIsRejectedUnlessThePolicyAllowsIt() {
    TestProbe<ToSession> session = host.attached();
    Signed simulated = HostDriver.sign(HostDriver.report(4, true), host.key.getPrivate());
    Verification.Outcome refused = ok(host.verify(session.getRef(), simulated));
    assertFalse(refused.passed());
    assertEquals(Verification.Status.FAIL, refused.check("simulated").orElseThrow().status());
    assertEquals("failed", host.view().status());

    HostDriver dev = new HostDriver(testKit, HostDriver.settings(NEVER, true), clock, 4);
    TestProbe<ToSession> devSession = dev.attached();
    Verification.Outcome accepted =
        ok(
            dev.verify(
                devSession.getRef(),
                HostDriver.sign(HostDriver.report(4, true), dev.key.getPrivate())));
    assertTrue(accepted.passed(), () -> accepted.checks().toString());
    assertTrue(accepted.simulated());
    ok(dev.updateListing(OWNER, HostDriver.listed()));
    HostView view = dev.view();
    assertEquals("verified", view.status());
    assertTrue(view.simulated(), "every view of a simulated host says so");
    Reservation reservation = ok(dev.reserve("r1", 1));
    assertTrue(reservation.simulated(), "and so does every reservation on it");
  }

  @Test
  void aVerifiedHostThatFailsReverificationIsEvicted() {
    TestProbe<ToSession> session = host.onMarket();
    Signed hot =
        HostDriver.sign(
            HostDriver.eachGpu(HostDriver.report(4, false), g -> HostDriver.temperature(g, 95)),
            host.key.getPrivate());
    var result = host.verify(session.getRef(), hot);
    Verification.Outcome outcome = ok(result);
    assertFalse(outcome.passed());
    assertEquals(
        Verification.Status.FAIL, outcome.check("gpu[0].temperature").orElseThrow().status());
    Host.ReportRejected event = assertInstanceOf(Host.ReportRejected.class, result.events().get(0));
    assertTrue(event.evict());
    HostView view = host.view();
    assertEquals("evicted", view.status());
    assertNotNull(view.evictionReason());
    assertRejected(Rejection.HOST_NOT_AVAILABLE, host.reserve("r1", 1));

    // Fail-closed: passing again does not lift the eviction; only an operator does.
    assertTrue(ok(host.verify(session.getRef(), host.signedReport())).passed());
    assertEquals("evicted", host.view().status());
    assertRejected(Rejection.HOST_NOT_AVAILABLE, host.reserve("r1", 1));
    ok(host.reinstate());
    assertEquals("verified", host.view().status());
    ok(host.reserve("r1", 1));
  }

  // ---------------------------------------------------------------------------------------------
  // Health

  @Test
  void heartbeatsFromAReplacedSessionAreIgnored() {
    TestProbe<ToSession> first = host.onMarket();
    TestProbe<ToSession> second = session();
    ok(host.attach(second.getRef()));
    first.expectMessageClass(CloseSession.class);

    clock.advance(Duration.ofSeconds(5));
    assertTrue(host.heartbeat(second.getRef(), 1, HostDriver.healthy(4)).hasNoEvents());
    Instant beat = clock.instant();
    assertEquals(beat, host.view().lastHeartbeatAt());

    clock.advance(Duration.ofSeconds(5));
    var stale = host.heartbeat(first.getRef(), 100, HostDriver.faulty(4, 2));
    assertTrue(stale.hasNoEvents(), "a replaced session's fault is not believed");
    assertEquals("verified", host.view().status());
    assertEquals(beat, host.view().lastHeartbeatAt(), "nor does it count as a heartbeat");
  }

  @Test
  void aHeartbeatWhoseSeqIsNotAboveTheLastIsIgnored() {
    TestProbe<ToSession> session = host.onMarket();
    clock.advance(Duration.ofSeconds(5));
    assertTrue(host.heartbeat(session.getRef(), 5, HostDriver.healthy(4)).hasNoEvents());
    Instant beat = clock.instant();

    clock.advance(Duration.ofSeconds(5));
    assertTrue(
        host.heartbeat(session.getRef(), 5, HostDriver.faulty(4, 0)).hasNoEvents(),
        "a duplicate is ignored");
    assertTrue(
        host.heartbeat(session.getRef(), 3, HostDriver.faulty(4, 0)).hasNoEvents(),
        "an old one too");
    HostView view = host.view();
    assertEquals("verified", view.status());
    assertEquals(beat, view.lastHeartbeatAt());

    assertTrue(host.heartbeat(session.getRef(), 6, HostDriver.healthy(4)).hasNoEvents());
    assertEquals(clock.instant(), host.view().lastHeartbeatAt());
  }

  @Test
  void aSessionTheRestartedHostDoesNotKnowIsToldToReconnectOnItsNextHeartbeat() {
    TestProbe<ToSession> session = host.onMarket();
    host.kit.restart(); // e.g. the shard moved to another node; the agent's websocket lives on
    assertTrue(host.view().online(), "the host keeps its market place for a full timeout");
    clock.advance(Duration.ofSeconds(5));
    assertTrue(
        host.heartbeat(session.getRef(), 1, HostDriver.faulty(4, 0)).hasNoEvents(),
        "an unknown session is not believed");
    assertEquals("verified", host.view().status());
    assertEquals(
        Rejection.RECONNECT,
        session.expectMessageClass(CloseSession.class).code(),
        "but told to reconnect");

    TestProbe<ToSession> reconnected = session();
    assertTrue(host.attach(reconnected.getRef()).hasNoEvents());
    assertTrue(host.heartbeat(reconnected.getRef(), 1, HostDriver.healthy(4)).hasNoEvents());
    assertEquals(clock.instant(), host.view().lastHeartbeatAt());
    reconnected.expectNoMessage(Duration.ofMillis(50));
  }

  @Test
  void afterARestartARentedHostVouchesOnlyForItsLastRecordedHeartbeat() {
    TestProbe<ToSession> session = host.onMarket();
    ok(host.reserve("r1", 1));
    ok(host.confirm("r1"));
    clock.advance(Duration.ofSeconds(11));
    host.heartbeat(session.getRef(), 1, HostDriver.healthy(4));
    Instant recorded = clock.instant();
    host.kit.restart(); // the node died; whether the agent is still alive is unknown
    clock.advance(Duration.ofSeconds(20));
    Host.Liveness liveness = host.kit.<Host.Liveness>runCommand(Host.GetLiveness::new).reply();
    assertEquals(
        recorded,
        liveness.lastHeartbeatAt(),
        "rentals are not billed for the outage unless the agent returns");
    TestProbe<ToSession> back = session();
    ok(host.attach(back.getRef()));
    assertEquals(
        clock.instant(),
        host.kit.<Host.Liveness>runCommand(Host.GetLiveness::new).reply().lastHeartbeatAt());
  }

  /**
   * Finding E of the simulation: a workload that stopped on its own was billed past its stop when a
   * settlement landed before the agent's report, because the host ignored the rentals its
   * heartbeats list. A liveness answer now names the last heartbeat that listed the asked rental,
   * and a host lost bills each rental no further than that. The notice also says when the host
   * declared the loss (finding F).
   */
  @Test
  void livenessAndHostLostNameTheLastHeartbeatThatListedTheRental() {
    List<String> lost = new java.util.concurrent.CopyOnWriteArrayList<>();
    Host.RentalLink link =
        new Host.RentalLink() {
          @Override
          public void hostLost(String rentalId, String hostId, Instant lastHeartbeatAt) {
            throw new AssertionError("the notice says when the host was lost");
          }

          @Override
          public void hostLost(
              String rentalId, String hostId, Instant lastHeartbeatAt, Instant lostAt) {
            lost.add(rentalId + " " + lastHeartbeatAt + " " + lostAt);
          }

          @Override
          public void preempt(String rentalId, String hostId, Instant deadline) {}
        };
    Host.Settings base = HostDriver.settings(NEVER, false);
    HostDriver listing = new HostDriver(testKit, HostDriver.withRentals(base, link), clock, 4);
    TestProbe<ToSession> session = listing.onMarket();
    ok(listing.reserve("r1", 1));
    ok(listing.reserve("r2", 1));
    ok(listing.confirm("r1"));
    ok(listing.confirm("r2"));
    clock.advance(Duration.ofSeconds(5));
    listing.heartbeat(session.getRef(), 1, HostDriver.healthy(4), List.of("r1", "r2"));
    Instant both = clock.instant();
    clock.advance(Duration.ofSeconds(5));
    listing.heartbeat(session.getRef(), 2, HostDriver.healthy(4), List.of("r2", "unknown"));
    Instant onlyR2 = clock.instant();

    assertEquals(new Host.Liveness(true, onlyR2, both, onlyR2), liveness(listing, "r1"));
    assertEquals(new Host.Liveness(true, onlyR2, onlyR2, null), liveness(listing, "r2"));
    assertEquals(new Host.Liveness(true, onlyR2, null, null), liveness(listing, "r9"));
    assertEquals(
        new Host.Liveness(true, onlyR2),
        listing.kit.<Host.Liveness>runCommand(Host.GetLiveness::new).reply());
    clock.advance(Duration.ofSeconds(5));
    listing.heartbeat(session.getRef(), 3, HostDriver.healthy(4), List.of("r2"));
    Instant third = clock.instant();
    assertEquals(
        new Host.Liveness(true, third, both, onlyR2),
        liveness(listing, "r1"),
        "gone since the first heartbeat that no longer listed it");

    clock.advance(Duration.ofSeconds(3));
    ok(listing.evict("operator"));
    java.util.Collections.sort(lost);
    assertEquals(
        List.of("r1 " + both + " " + clock.instant(), "r2 " + third + " " + clock.instant()), lost);
  }

  /**
   * Finding E across a restart of the host entity (a node lost, the shard recovering elsewhere):
   * what a heartbeat proved about a rental's workload is not forgotten with the actor. r1's
   * workload stops being listed before the restart; r2's is listed by the last heartbeat in the
   * journal and omitted by the first heartbeat after the restart. Neither is billed past what a
   * heartbeat showed of it.
   */
  @Test
  void aRestartedHostStillBoundsRentalsByTheLastHeartbeatThatListedThem() {
    List<String> lost = new java.util.concurrent.CopyOnWriteArrayList<>();
    Host.RentalLink link =
        new Host.RentalLink() {
          @Override
          public void hostLost(String rentalId, String hostId, Instant lastHeartbeatAt) {
            throw new AssertionError("the notice says when the host was lost");
          }

          @Override
          public void hostLost(
              String rentalId, String hostId, Instant lastHeartbeatAt, Instant lostAt) {
            lost.add(rentalId + " " + lastHeartbeatAt);
          }

          @Override
          public void preempt(String rentalId, String hostId, Instant deadline) {}
        };
    Host.Settings base = HostDriver.settings(NEVER, false);
    HostDriver listing = new HostDriver(testKit, HostDriver.withRentals(base, link), clock, 4);
    TestProbe<ToSession> session = listing.onMarket();
    ok(listing.reserve("r1", 1));
    ok(listing.reserve("r2", 1));
    ok(listing.confirm("r1"));
    ok(listing.confirm("r2"));
    clock.advance(Duration.ofSeconds(5));
    listing.heartbeat(session.getRef(), 1, HostDriver.healthy(4), List.of("r1", "r2"));
    Instant both = clock.instant();
    clock.advance(Duration.ofSeconds(5));
    // Recorded in the journal (a rented host's heartbeat, 10 s after the last record): after the
    // restart it is the host's last proof of life, later than r1's last listing.
    listing.heartbeat(session.getRef(), 2, HostDriver.healthy(4), List.of("r2"));
    Instant onlyR2 = clock.instant();
    clock.advance(Duration.ofSeconds(5));
    listing.heartbeat(session.getRef(), 3, HostDriver.healthy(4), List.of("r2"));
    assertEquals(1, unlistedEvents(listing), "once per rental, not per heartbeat");

    listing.kit.restart();
    assertEquals(
        new Host.Liveness(true, onlyR2, both, onlyR2),
        liveness(listing, "r1"),
        "the restarted host still knows r1's workload was gone");
    assertEquals(onlyR2, liveness(listing, "r2").lastHeartbeatAt());

    TestProbe<ToSession> again = testKit.createTestProbe();
    ok(listing.attach(again.getRef())); // the agent reconnects to the new incarnation
    clock.advance(Duration.ofSeconds(5));
    listing.heartbeat(again.getRef(), 1, HostDriver.healthy(4), List.of());
    Instant afterRestart = clock.instant();
    assertEquals(
        new Host.Liveness(true, afterRestart, both, onlyR2),
        liveness(listing, "r1"),
        "r1 keeps the bound recorded before the restart");
    assertEquals(
        new Host.Liveness(true, afterRestart, onlyR2, afterRestart),
        liveness(listing, "r2"),
        "r2, omitted after the restart, is proven only to the last heartbeat in the journal");
    clock.advance(Duration.ofSeconds(5));
    listing.heartbeat(again.getRef(), 2, HostDriver.healthy(4), List.of());
    assertEquals(2, unlistedEvents(listing));

    listing.kit.restart();
    ok(listing.evict("operator"));
    java.util.Collections.sort(lost);
    assertEquals(List.of("r1 " + both, "r2 " + onlyR2), lost);

    // A rental proving its end asks while its cards go back: the bound outlives the release.
    ok(listing.release("r1"));
    listing.kit.restart();
    assertEquals(both, liveness(listing, "r1").rentalListedAt());
    assertEquals(onlyR2, liveness(listing, "r1").rentalGoneAt());
  }

  /**
   * The second shape of finding E's restart gap (the snapshot simulation, seed 1): the only
   * heartbeat that listed r1's workload reached a restarted incarnation that knew no session, which
   * told the agent to reconnect; the workload died before the new session's first heartbeat, and
   * its report was lost. The host had never seen it listed, so it bounded nothing and r1 was billed
   * for a dead workload. The refused heartbeat now counts as the last listing.
   */
  @Test
  void aWorkloadListedOnlyByAHeartbeatTheRestartedHostRefusedIsStillBounded() {
    TestProbe<ToSession> session = host.onMarket();
    ok(host.reserve("r1", 1));
    host.kit.restart(); // before the confirmation: not assumed listed at recovery
    ok(host.confirm("r1"));
    clock.advance(Duration.ofSeconds(3));
    assertTrue(
        host.heartbeat(session.getRef(), 7, HostDriver.healthy(4), List.of("r1")).hasNoEvents());
    Instant refusedListing = clock.instant();
    assertEquals(Rejection.RECONNECT, session.expectMessageClass(CloseSession.class).code());

    TestProbe<ToSession> again = session();
    ok(host.attach(again.getRef()));
    clock.advance(Duration.ofSeconds(3));
    var omitted = host.heartbeat(again.getRef(), 1, HostDriver.healthy(4), List.of());
    Instant gone = clock.instant();
    assertTrue(
        omitted.events().contains(new Host.WorkloadUnlisted("r1", refusedListing, gone)),
        "the first heartbeat that omits it records it gone: " + omitted.events());
    host.kit.restart();
    Host.Liveness liveness = liveness(host, "r1");
    assertEquals(refusedListing, liveness.rentalListedAt());
    assertEquals(gone, liveness.rentalGoneAt());
  }

  /**
   * The simulation's open hole (docs/simulation.md, "What is left"): the host entity restarted
   * after r1's workload started and before its rental confirmed the cards, so the new incarnation
   * did not take r1 as listed; the workload then died, its report was lost, and heartbeats that
   * never listed it went on proving its seconds. The confirmation now carries the agent's {@code
   * listed_from}: a heartbeat the agent stamped after it that omits r1 proves the workload gone,
   * and the bill stops at the rental's start, the last instant the agent said it ran. A heartbeat
   * stamped before it (sent before the workload ran, arriving late) or with no stamp proves
   * nothing.
   */
  @Test
  void aConfirmedWorkloadNoHeartbeatHereListedIsGoneOnceOneStampedAfterItsListedFromOmitsIt() {
    TestProbe<ToSession> session = host.onMarket();
    ok(host.reserve("r1", 1));
    host.kit.restart(); // between the workload's start and its confirmation
    TestProbe<ToSession> again = session();
    ok(host.attach(again.getRef()));
    // The agent's clock is its own: 40 s behind this node's here, compared only with itself.
    Instant listedFrom = clock.instant().minusSeconds(40);
    Instant startedAt = clock.instant(); // when the rental heard rental_started
    clock.advance(Duration.ofSeconds(1));
    ok(host.confirm("r1", listedFrom, startedAt));

    clock.advance(Duration.ofSeconds(1));
    assertTrue(
        host.heartbeat(
                again.getRef(), 1, HostDriver.healthy(4), List.of(), listedFrom.minusMillis(1))
            .hasNoEvents(),
        "a heartbeat stamped before listed_from may have been built before the workload ran");
    clock.advance(Duration.ofSeconds(1));
    assertTrue(
        host.heartbeat(again.getRef(), 2, HostDriver.healthy(4), List.of(), listedFrom)
            .hasNoEvents(),
        "nor one stamped in the same millisecond");
    clock.advance(Duration.ofSeconds(1));
    assertTrue(
        host.heartbeat(again.getRef(), 3, HostDriver.healthy(4), List.of()).hasNoEvents(),
        "nor one without a stamp (an older agent)");
    assertEquals(new Host.Liveness(true, clock.instant(), null, null), liveness(host, "r1"));

    clock.advance(Duration.ofSeconds(5));
    var omitted =
        host.heartbeat(
            again.getRef(), 4, HostDriver.healthy(4), List.of(), listedFrom.plusSeconds(8));
    Instant gone = clock.instant();
    assertEquals(
        List.of(new Host.WorkloadUnlisted("r1", startedAt, gone)),
        omitted.events().stream().filter(e -> e instanceof Host.WorkloadUnlisted).toList());
    clock.advance(Duration.ofSeconds(5));
    host.heartbeat(again.getRef(), 5, HostDriver.healthy(4), List.of(), listedFrom.plusSeconds(13));
    assertEquals(1, unlistedEvents(host), "once");
    host.kit.restart();
    assertEquals(startedAt, liveness(host, "r1").rentalListedAt());
    assertEquals(gone, liveness(host, "r1").rentalGoneAt());
    session.expectNoMessage(Duration.ZERO);
  }

  /**
   * The simulation's seed 109: a host that holds a rental's cards, was never told its workload runs
   * (the confirmation lost) and heard no heartbeat list it since it restarted cannot see one omit
   * it, and says so; a heartbeat that lists it, or the confirmation, ends that.
   */
  @Test
  void aHostNeverToldThatAWorkloadRunsSaysSoUntilAHeartbeatListsItOrItIsConfirmed() {
    host.onMarket();
    ok(host.reserve("r1", 1));
    ok(host.reserve("r2", 1));
    host.kit.restart(); // both confirmations lost, and the host restarted
    TestProbe<ToSession> again = session();
    ok(host.attach(again.getRef()));
    clock.advance(Duration.ofSeconds(1));
    host.heartbeat(again.getRef(), 1, HostDriver.healthy(4), List.of());
    assertTrue(liveness(host, "r1").rentalUnconfirmed(), "its omission proved nothing here");
    assertTrue(liveness(host, "r2").rentalUnconfirmed());

    clock.advance(Duration.ofSeconds(1));
    host.heartbeat(again.getRef(), 2, HostDriver.healthy(4), List.of("r2"));
    assertFalse(liveness(host, "r2").rentalUnconfirmed(), "listed here: an omission now counts");
    assertTrue(liveness(host, "r1").rentalUnconfirmed());

    ok(host.confirm("r1", clock.instant().minusSeconds(5), clock.instant()));
    assertFalse(liveness(host, "r1").rentalUnconfirmed());
    assertFalse(liveness(host, "r3").rentalUnconfirmed(), "holds no cards for r3: nothing to say");
  }

  /**
   * The simulation's seed 4 (docs/simulation.md): r1's workload died (its report lost) just before
   * the host entity restarted, so the new incarnation took r1 as listed by the last heartbeat in
   * its journal. The agent's next heartbeat, which omitted r1, came from the old session and was
   * refused; the omission did not count, and the renter's stop was proven by the next session's
   * heartbeat to its instant, seconds after the workload died. The listed_from kept with the
   * confirmation now tells a refused heartbeat built after the workload ran (its omission proves
   * the workload gone) from a late one built before (proves nothing). A rental confirmed without a
   * listed_from (an older agent) is left as before.
   */
  @Test
  void aRefusedHeartbeatStampedAfterListedFromThatOmitsAWorkloadProvesItGone() {
    TestProbe<ToSession> session = host.onMarket();
    ok(host.reserve("r1", 1));
    ok(host.reserve("r2", 1));
    Instant listedFrom = clock.instant().minusSeconds(40); // the agent's clock
    Instant startedAt = clock.instant();
    ok(host.confirm("r1", listedFrom, startedAt));
    ok(host.confirm("r2"));
    clock.advance(Duration.ofSeconds(10));
    var recorded =
        host.heartbeat(
            session.getRef(),
            1,
            HostDriver.healthy(4),
            List.of("r1", "r2"),
            listedFrom.plusSeconds(10));
    Instant listed = clock.instant();
    assertTrue(
        recorded.events().contains(new Host.HeartbeatRecorded(listed)),
        "a rented host's heartbeat is recorded: " + recorded.events());

    host.kit.restart(); // the node is lost; r1's workload died just before
    assertEquals(listed, liveness(host, "r1").rentalListedAt(), "taken as listed at recovery");

    clock.advance(Duration.ofSeconds(1));
    assertTrue(
        host.heartbeat(
                session.getRef(), 0, HostDriver.healthy(4), List.of(), listedFrom.minusMillis(1))
            .hasNoEvents(),
        "a late heartbeat built before the workload ran proves nothing");
    assertEquals(Rejection.RECONNECT, session.expectMessageClass(CloseSession.class).code());
    clock.advance(Duration.ofSeconds(1));
    var omitted =
        host.heartbeat(
            session.getRef(), 2, HostDriver.healthy(4), List.of(), listedFrom.plusSeconds(12));
    Instant gone = clock.instant();
    assertEquals(List.<Object>of(new Host.WorkloadUnlisted("r1", listed, gone)), omitted.events());
    assertEquals(Rejection.RECONNECT, session.expectMessageClass(CloseSession.class).code());
    clock.advance(Duration.ofSeconds(1));
    assertTrue(
        host.heartbeat(
                session.getRef(), 3, HostDriver.healthy(4), List.of(), listedFrom.plusSeconds(13))
            .hasNoEvents(),
        "once");

    host.kit.restart();
    assertEquals(listed, liveness(host, "r1").rentalListedAt());
    assertEquals(gone, liveness(host, "r1").rentalGoneAt());
    assertEquals(listed, liveness(host, "r2").rentalListedAt(), "no listed_from: as before");
    assertEquals(null, liveness(host, "r2").rentalGoneAt());
  }

  /**
   * What one heartbeat derives from the host's reservations comes in rental-id order, the same on
   * every JVM. The reservations were a {@code Map.copyOf}, whose order each JVM salts: a heartbeat
   * that omitted two workloads journaled their {@code WorkloadUnlisted} in one order or the other,
   * and the simulation's seed 10 gave one trace or another with the command line
   * (docs/simulation.md, "Determinism"). With eight, salted order is rental-id order by chance in
   * one JVM of 40,320.
   */
  @Test
  void theWorkloadsOneHeartbeatOmitsAreUnlistedInRentalIdOrder() {
    HostDriver eight = new HostDriver(testKit, HostDriver.settings(NEVER, false), clock, 8);
    TestProbe<ToSession> session = eight.onMarket();
    List<String> rentals = List.of("r3", "r8", "r1", "r6", "r2", "r7", "r4", "r5");
    for (String id : rentals) {
      ok(eight.reserve(id, 1));
      ok(eight.confirm(id));
    }
    clock.advance(Duration.ofSeconds(1));
    eight.heartbeat(session.getRef(), 1, HostDriver.healthy(8), rentals);
    Instant listed = clock.instant();
    clock.advance(Duration.ofSeconds(1));
    var omitted = eight.heartbeat(session.getRef(), 2, HostDriver.healthy(8), List.of());
    Instant gone = clock.instant();
    assertEquals(
        rentals.stream()
            .sorted()
            .<Object>map(id -> new Host.WorkloadUnlisted(id, listed, gone))
            .toList(),
        omitted.events());
  }

  /**
   * The same through the host's own question (its confirmation lost with the node): the rental's
   * answer that it runs here carries {@code listed_from}. A heartbeat that lists the workload first
   * makes the usual bound apply: the last heartbeat that listed it.
   */
  @Test
  void theRentalsAnswerThatItRunsHereCarriesListedFromAndAListingTakesOver() {
    host.onMarket();
    ok(host.reserve("r1", 1));
    ok(host.reserve("r2", 1));
    host.kit.restart();
    TestProbe<ToSession> again = session();
    ok(host.attach(again.getRef()));
    Instant listedFrom = clock.instant().plusSeconds(7); // the agent's clock
    Instant startedAt = clock.instant();
    clock.advance(Duration.ofSeconds(1));
    host.kit.runCommand(new Host.ReservationWanted("r1", true, true, listedFrom, startedAt));
    ok(host.confirm("r2", listedFrom, startedAt));
    assertTrue(host.view().cards().stream().noneMatch(c -> "reserved".equals(c.state())));

    clock.advance(Duration.ofSeconds(5));
    host.heartbeat(
        again.getRef(), 1, HostDriver.healthy(4), List.of("r2"), listedFrom.plusSeconds(6));
    Instant r2Listed = clock.instant();
    clock.advance(Duration.ofSeconds(5));
    host.heartbeat(again.getRef(), 2, HostDriver.healthy(4), List.of(), listedFrom.plusSeconds(11));
    Instant gone = clock.instant();
    assertEquals(new Host.Liveness(true, gone, startedAt, r2Listed), liveness(host, "r1"));
    assertEquals(new Host.Liveness(true, gone, r2Listed, gone), liveness(host, "r2"));
  }

  private static long unlistedEvents(HostDriver host) {
    return host.journal().stream().filter(Host.WorkloadUnlisted.class::isInstance).count();
  }

  private static Host.Liveness liveness(HostDriver host, String rentalId) {
    return host.kit.<Host.Liveness>runCommand(r -> new Host.GetLiveness(rentalId, r)).reply();
  }

  @Test
  void spotRentalsAreNoticedWhenTheAvailabilityWindowClosesWithinTheNotice() {
    List<String> preempted = new java.util.concurrent.CopyOnWriteArrayList<>();
    Host.RentalLink link =
        new Host.RentalLink() {
          @Override
          public void hostLost(String rentalId, String hostId, Instant lastHeartbeatAt) {}

          @Override
          public void preempt(String rentalId, String hostId, Instant deadline) {
            preempted.add(rentalId + "@" + deadline);
          }
        };
    Host.Settings base = HostDriver.settings(NEVER, false);
    HostDriver windowed = new HostDriver(testKit, HostDriver.withRentals(base, link), clock, 4);
    TestProbe<ToSession> session = windowed.verified();
    // Friday 09:00–10:04 UTC; the clock reads Friday 10:00, so the window closes in 4 minutes,
    // within the 5-minute notice.
    ok(
        windowed.updateListing(
            HostDriver.OWNER,
            new Listing(
                ON_DEMAND,
                SPOT,
                300,
                List.of(new Listing.Window(java.time.DayOfWeek.FRIDAY, 9 * 60, 10 * 60 + 4)),
                true)));
    ok(windowed.reserve("spot-1", H100, 1, Listing.Tier.SPOT, SPOT));
    ok(windowed.reserve("ondemand-1", H100, 1, Listing.Tier.ON_DEMAND, ON_DEMAND));
    windowed.heartbeat(session.getRef(), 1, HostDriver.healthy(4));
    Instant closes = Instant.parse("2025-03-14T10:04:00Z");
    assertEquals(
        List.of("spot-1@" + closes),
        preempted,
        "only the spot rental, once, with the window's end as deadline");
    Host.PreemptWorkload notice = session.expectMessageClass(Host.PreemptWorkload.class);
    assertEquals(new Host.PreemptWorkload("spot-1", closes), notice);
    // Until the rental runs (confirms its cards) it is told again with every heartbeat, since a
    // rental still being
    // created can miss a message; then once more, and never again. The agent is told once.
    windowed.heartbeat(session.getRef(), 2, HostDriver.healthy(4));
    assertEquals(
        List.of("spot-1@" + closes, "spot-1@" + closes), preempted, "told again: not running yet");
    ok(windowed.confirm("spot-1"));
    windowed.heartbeat(session.getRef(), 3, HostDriver.healthy(4));
    windowed.heartbeat(session.getRef(), 4, HostDriver.healthy(4));
    assertEquals(3, preempted.size(), "once more after it runs, then not again: " + preempted);
    session.expectNoMessage(Duration.ofMillis(200));
  }

  @Test
  void aHeartbeatReportingAGpuFaultEvictsTheHost() {
    TestProbe<ToSession> session = host.onMarket();
    clock.advance(Duration.ofSeconds(5));
    var result = host.heartbeat(session.getRef(), 1, HostDriver.faulty(4, 2));
    assertEquals(
        2,
        result.events().size(),
        "the heartbeat that reported the fault is kept with the eviction");
    assertEquals(new Host.HeartbeatRecorded(clock.instant()), result.events().get(0));
    Host.Evicted evicted = assertInstanceOf(Host.Evicted.class, result.events().get(1));
    assertTrue(evicted.reason().contains("GPU 2"), evicted.reason());
    assertEquals(clock.instant(), evicted.at());
    HostView view = host.view();
    assertEquals("evicted", view.status());
    assertEquals(evicted.reason(), view.evictionReason());
    assertRejected(Rejection.HOST_NOT_AVAILABLE, host.reserve("r1", 1));

    // Further faults do not evict it again.
    assertTrue(host.heartbeat(session.getRef(), 2, HostDriver.faulty(4, 2)).hasNoEvents());
    host.assertRecovers();
  }

  @Test
  void aSilentHostGoesOfflineAtItsLastHeartbeatAndItsSessionIsClosed() {
    HostDriver fast =
        new HostDriver(testKit, HostDriver.settings(Duration.ofMillis(300), false), clock, 4);
    TestProbe<ToSession> session = fast.onMarket();
    clock.advance(Duration.ofMillis(100));
    assertTrue(fast.heartbeat(session.getRef(), 1, HostDriver.healthy(4)).hasNoEvents());
    Instant lastBeat = clock.instant();

    // Real time passes, but the host is judged by its clock: the timer's checks find it fresh.
    session.expectNoMessage(Duration.ofMillis(700));
    assertTrue(fast.view().online());

    clock.advance(Duration.ofSeconds(1));
    CloseSession close = session.expectMessageClass(CloseSession.class, Duration.ofSeconds(5));
    assertEquals(Rejection.HEARTBEAT_TIMEOUT, close.code());

    HostView view = fast.view();
    assertFalse(view.online());
    assertEquals(lastBeat, view.lastHeartbeatAt());
    assertEquals(
        new Host.WentOffline(lastBeat, clock.instant()),
        fast.journal().get(fast.journal().size() - 1));
    assertRejected(Rejection.HOST_NOT_AVAILABLE, fast.reserve("r1", 1));

    // The dropped session's heartbeats are not believed any more (it is told again to go); a new
    // session brings it back.
    assertTrue(fast.heartbeat(session.getRef(), 2, HostDriver.healthy(4)).hasNoEvents());
    assertEquals(Rejection.RECONNECT, session.expectMessageClass(CloseSession.class).code());
    assertFalse(fast.view().online());
    fast.assertRecovers();
    TestProbe<ToSession> again = session();
    var attached = fast.attach(again.getRef());
    assertEquals(List.of(new Host.WentOnline(clock.instant())), attached.events());
    assertEquals(
        "verified", fast.view().status(), "going offline and back does not re-open verification");
    ok(fast.reserve("r1", 1));
  }

  // ---------------------------------------------------------------------------------------------
  // Listing, drain, remove, evict

  @Test
  void refusesAListingWithASpotNoticeOutsideItsBounds() {
    host.verified();
    assertRejected(
        Rejection.INVALID_LISTING,
        host.updateListing(OWNER, new Listing(ON_DEMAND, SPOT, 119, List.of(), true)));
    assertRejected(
        Rejection.INVALID_LISTING,
        host.updateListing(OWNER, new Listing(ON_DEMAND, SPOT, 3601, List.of(), true)));
    assertEquals(
        120,
        ok(host.updateListing(OWNER, new Listing(ON_DEMAND, SPOT, 120, List.of(), true)))
            .listing()
            .spotNoticeSeconds());
    assertEquals(
        3600,
        ok(host.updateListing(OWNER, new Listing(ON_DEMAND, SPOT, 3600, List.of(), true)))
            .listing()
            .spotNoticeSeconds());
  }

  @Test
  void refusesAZeroPriceWhileListed() {
    host.verified();
    assertRejected(
        Rejection.INVALID_LISTING,
        host.updateListing(OWNER, new Listing(0, null, 300, List.of(), true)));
    assertRejected(
        Rejection.INVALID_LISTING,
        host.updateListing(OWNER, new Listing(ON_DEMAND, 0L, 300, List.of(), true)));
    assertRejected(
        Rejection.INVALID_LISTING,
        host.updateListing(OWNER, new Listing(-1, null, 300, List.of(), false)));
    assertRejected(
        Rejection.INVALID_LISTING,
        host.updateListing(
            OWNER,
            new Listing(
                ON_DEMAND,
                null,
                300,
                List.of(new Listing.Window(DayOfWeek.MONDAY, 600, 600)),
                true)));
    // Unlisted, a zero price is fine.
    HostView unlisted = ok(host.updateListing(OWNER, new Listing(0, null, 600, List.of(), false)));
    assertFalse(unlisted.listed());
  }

  @Test
  void updatesTheListingOnceAndOnlyForItsOwner() {
    host.verified();
    assertRejected(Rejection.NOT_FOUND, host.updateListing("prov-2", HostDriver.listed()));
    var updated = host.updateListing(OWNER, HostDriver.listed());
    HostView view = ok(updated);
    assertTrue(view.listed());
    assertEquals(HostDriver.listed(), view.listing());
    assertEquals(List.of(new Host.ListingUpdated(HostDriver.listed(), START)), updated.events());
    assertTrue(
        host.updateListing(OWNER, HostDriver.listed()).hasNoEvents(),
        "the same terms again change nothing");

    assertRejected(Rejection.NOT_FOUND, host.get("prov-2"));
    assertRejected(Rejection.NOT_FOUND, host.drain("prov-2"));
    assertRejected(Rejection.NOT_FOUND, host.remove("prov-2"));
    assertEquals(view, ok(host.get(OWNER)));
    assertEquals(view, host.view());
  }

  @Test
  void repricingDoesNotChangeAReservedRentalsPrice() {
    host.onMarket();
    Reservation reservation = ok(host.reserve("r1", 2));
    assertEquals(ON_DEMAND, reservation.pricePerGpuHour());
    ok(host.updateListing(OWNER, new Listing(ON_DEMAND * 2, SPOT, 300, List.of(), true)));
    assertEquals(ON_DEMAND, ok(host.confirm("r1")).pricePerGpuHour());
    assertRejected(Rejection.PRICE_ABOVE_CEILING, host.reserve("r2", 1));
    assertEquals(
        ON_DEMAND * 2,
        ok(host.reserve("r2", H100, 1, Listing.Tier.ON_DEMAND, ON_DEMAND * 2)).pricePerGpuHour());
  }

  @Test
  void refusesToReserveCardsForItsOwnOwner() {
    host.onMarket();
    var own =
        host.kit.<org.apache.pekko.pattern.StatusReply<Reservation>>runCommand(
            r ->
                new Host.ReserveCards(
                    "r-own", OWNER, H100, 1, Listing.Tier.ON_DEMAND, ON_DEMAND, r));
    assertRejected(Rejection.OWN_HOST, own);
    assertTrue(own.hasNoEvents(), "nothing reserved");
    assertEquals("free", host.view().cards().get(0).state());
    // another renter gets the cards
    var other =
        host.kit.<org.apache.pekko.pattern.StatusReply<Reservation>>runCommand(
            r ->
                new Host.ReserveCards(
                    "r-other", "renter-2", H100, 1, Listing.Tier.ON_DEMAND, ON_DEMAND, r));
    assertEquals("r-other", ok(other).rentalId());
  }

  @Test
  void drainingStopsNewReservationsButKeepsRunningOnes() {
    host.onMarket();
    ok(host.reserve("r1", 2));
    var drained = host.drain(OWNER);
    assertTrue(ok(drained).draining());
    assertEquals(List.of(new Host.DrainStarted(START)), drained.events());
    assertTrue(host.drain(OWNER).hasNoEvents(), "draining twice is one drain");
    assertRejected(Rejection.HOST_NOT_AVAILABLE, host.reserve("r2", 1));
    assertTrue(ok(host.confirm("r1")).confirmed(), "a matched rental still starts");
    assertEquals("rented", host.view().cards().get(0).state());
    ok(host.release("r1"));
    assertTrue(host.view().draining());
  }

  @Test
  void removalIsRefusedWhileCardsAreReservedAndFinalAfterwards() {
    TestProbe<ToSession> session = host.onMarket();
    ok(host.reserve("r1", 1));
    assertRejected(Rejection.HOST_BUSY, host.remove(OWNER));
    ok(host.confirm("r1"));
    assertRejected(Rejection.HOST_BUSY, host.remove(OWNER));
    ok(host.release("r1"));

    var removed = host.remove(OWNER);
    HostView last = ok(removed);
    assertEquals("removed", last.status());
    assertFalse(last.online());
    assertEquals(List.of(new Host.Removed(START)), removed.events());
    assertEquals(Rejection.HOST_REMOVED, session.expectMessageClass(CloseSession.class).code());
    assertInstanceOf(Host.Gone.class, host.kit.getState());

    assertRejected(Rejection.NOT_FOUND, host.get(OWNER));
    assertRejected(Rejection.NOT_FOUND, host.get(null));
    assertRejected(Rejection.NOT_FOUND, host.remove(OWNER));
    assertRejected(Rejection.NOT_FOUND, host.updateListing(OWNER, HostDriver.listed()));
    assertRejected(Rejection.NOT_FOUND, host.reserve("r2", 1));
    assertRejected(Rejection.NOT_FOUND, host.attach(session().getRef()));
    assertRejected(Rejection.NOT_FOUND, host.verify(session.getRef(), host.signedReport()));
    assertRejected(Rejection.HOST_REMOVED, host.authenticate(host.credentialHash()));
    assertRejected(Rejection.HOST_REMOVED, host.register());
    assertRejected(Rejection.HOST_REMOVED, host.checkToken(host.tokenHash()));
    assertRejected(Rejection.UNAUTHORIZED, host.authenticate(Host.sha256("guess")));
    assertRejected(Rejection.UNAUTHORIZED, host.checkToken(Host.sha256("guess")));
    assertTrue(host.release("r1").reply().isSuccess(), "a late release is still acknowledged");
    assertTrue(host.heartbeat(session.getRef(), 1, HostDriver.healthy(4)).hasNoEvents());
    host.assertRecovers();
    assertInstanceOf(Host.Gone.class, host.kit.getState());
  }

  @Test
  void anOperatorEvictsAndReinstatesAHost() {
    host.onMarket();
    var evicted = host.evict("suspicious benchmark");
    HostView view = ok(evicted);
    assertEquals("evicted", view.status());
    assertEquals("suspicious benchmark", view.evictionReason());
    assertEquals(List.of(new Host.Evicted("suspicious benchmark", START)), evicted.events());
    assertTrue(host.evict("again").hasNoEvents());
    assertEquals("suspicious benchmark", host.view().evictionReason());
    assertRejected(Rejection.HOST_NOT_AVAILABLE, host.reserve("r1", 1));

    var reinstated = host.reinstate();
    HostView back = ok(reinstated);
    assertEquals("verified", back.status());
    assertNull(back.evictionReason());
    assertEquals(List.of(new Host.Reinstated(START)), reinstated.events());
    assertTrue(
        host.reinstate().hasNoEvents(), "reinstating a host that is not evicted changes nothing");
    ok(host.reserve("r1", 1));

    assertEquals("evicted by an operator", ok(host.evict(" ")).evictionReason());
  }

  @Test
  void reinstatingAHostWhoseLastReportFailedLeavesItFailed() {
    TestProbe<ToSession> session = host.attached();
    ok(host.verify(session.getRef(), HostDriver.tampered(host.signedReport())));
    ok(host.evict(null));
    assertEquals("failed", ok(host.reinstate()).status());
  }

  // ---------------------------------------------------------------------------------------------
  // Reservations

  @Test
  void reservesFreeCardsAtTheHostsFloor() {
    host.onMarket();
    var reserved = host.reserve("r1", H100, 2, Listing.Tier.ON_DEMAND, ON_DEMAND * 3);
    Reservation reservation = ok(reserved);
    assertEquals(
        new Reservation(
            host.hostId,
            HostDriver.OWNER,
            "r1",
            List.of(0, 1),
            ON_DEMAND,
            Listing.Tier.ON_DEMAND,
            false,
            false,
            HostDriver.REGION,
            START),
        reservation,
        "reservedAt: the reservation's event's instant, for the matcher to compare with the read side");
    assertEquals(
        List.of(
            new Host.CardsReserved("r1", List.of(0, 1), ON_DEMAND, Listing.Tier.ON_DEMAND, START)),
        reserved.events());

    Reservation spot = ok(host.reserve("r2", H100, 1, Listing.Tier.SPOT, SPOT));
    assertEquals(SPOT, spot.pricePerGpuHour());
    assertEquals(List.of(2), spot.cards());

    var confirmed = host.confirm("r1");
    assertTrue(ok(confirmed).confirmed());
    assertEquals(List.of(new Host.CardsRented("r1", START)), confirmed.events());
    assertTrue(host.confirm("r1").hasNoEvents(), "confirming twice is one confirmation");
    assertRejected(Rejection.NOT_FOUND, host.confirm("r9"));

    List<String> states = host.view().cards().stream().map(CardView::state).toList();
    assertEquals(List.of("rented", "rented", "reserved", "free"), states);

    var released = host.release("r1");
    assertTrue(released.reply().isSuccess());
    // its workload ran here (confirmed): the release counts it in the host's record, not as lost
    assertEquals(
        List.of(new Host.CardsReleased("r1", List.of(0, 1), START, true, false)),
        released.events());
    assertTrue(host.release("r1").hasNoEvents(), "releasing twice is one release");
    var unknown = host.release("never");
    assertTrue(unknown.reply().isSuccess());
    assertEquals(
        List.of(new Host.CardsReleased("never", List.of(), START)),
        unknown.events(),
        "a release that finds nothing is remembered");
    assertTrue(host.release("never").hasNoEvents());
    host.assertRecovers();
  }

  /**
   * The host's record with renters (the matcher's tie-break, {@code market.Reliability}) comes from
   * its releases: a rental whose workload ran here counts as ended, and as lost when it ended
   * {@code host_lost}; a rental that never ran here counts as neither, whatever it ended by; a
   * second release of the same rental writes nothing.
   */
  @Test
  void aReleaseSaysWhetherTheRentalRanHereAndWasLost() {
    host.onMarket();
    ok(host.reserve("ran-lost", 1));
    ok(host.confirm("ran-lost"));
    ok(host.reserve("ran-stopped", 1));
    ok(host.confirm("ran-stopped"));
    ok(host.reserve("never-ran", 1));

    assertEquals(
        List.of(new CardsReleased("ran-lost", List.of(0), clock.instant(), true, true)),
        host.releaseEnded("ran-lost", true).events());
    assertEquals(
        List.of(new CardsReleased("ran-stopped", List.of(1), clock.instant(), true, false)),
        host.releaseEnded("ran-stopped", false).events());
    assertEquals(
        List.of(new CardsReleased("never-ran", List.of(2), clock.instant(), false, false)),
        host.releaseEnded("never-ran", true).events());
    assertEquals(List.of(), host.releaseEnded("ran-lost", true).events(), "released once");
    host.assertRecovers();
  }

  /**
   * Finding I of the simulation: a duplicated ReserveCards of the matcher reached the host after
   * the rental's ReleaseCards and reserved its cards again, for a rental that had closed. A host
   * refuses to reserve for a rental it released, or whose release came before the proposal, for a
   * day.
   */
  @Test
  void aRentalWhoseCardsWereReleasedIsNotReservedAgain() {
    host.onMarket();
    ok(host.reserve("r1", 2));
    ok(host.release("r1"));
    ok(host.release("r2")); // the release overtook the proposal
    host.assertRecovers();
    assertRejected(Rejection.HOST_NOT_AVAILABLE, host.reserve("r1", 2));
    assertRejected(Rejection.HOST_NOT_AVAILABLE, host.reserve("r2", 1));
    assertEquals(4, host.view().cards().stream().filter(c -> c.state().equals("free")).count());
    ok(host.reserve("r3", 1));

    // Bounded: a release a day later forgets the older ones.
    clock.advance(Host.REMEMBER_RELEASES);
    ok(host.release("r3"));
    assertEquals(java.util.Set.of("r3"), host.enrolled().inventory().released().keySet(), "pruned");
    ok(host.reserve("r1", 1));
  }

  /**
   * An attach proves the host alive now: the rentals running on it are told, so that one waiting
   * for that proof (after a node loss, its host's entity moved) settles at once rather than at its
   * next look. Only rentals whose reservation is confirmed run here.
   */
  @Test
  void anAttachTellsTheRentalsRunningHere() {
    RecordingRentalLink link = new RecordingRentalLink();
    HostDriver host = onMarketTelling(link);
    ok(host.reserve("r1", 1));
    ok(host.confirm("r1"));
    ok(host.reserve("r2", 1)); // reserved, not running here
    link.attached.clear();

    ok(host.attach(testKit.<Host.ToSession>createTestProbe().getRef())); // a new session
    assertEquals(List.of("r1"), link.attached);
  }

  /**
   * After a restart the host knows its workloads' listings only from the journal's last recorded
   * heartbeat, so the attach proves a running rental's seconds only that far; the session's first
   * heartbeat that lists workloads proves them to now, and the rentals are told again at once
   * instead of finding out at their next look. Later heartbeats tell nothing.
   */
  @Test
  void theFirstListingOfASessionTellsTheRentalsRunningHereAgain() {
    RecordingRentalLink link = new RecordingRentalLink();
    HostDriver host = onMarketTelling(link);
    ok(host.reserve("r1", 1));
    ok(host.confirm("r1"));
    host.assertRecovers(); // the entity moved: a new incarnation
    TestProbe<Host.ToSession> session = testKit.createTestProbe();
    ok(host.attach(session.getRef()));
    link.attached.clear();

    clock.advance(Duration.ofSeconds(1));
    host.heartbeat(session.getRef(), 1, List.of(), List.of("r1"));
    assertEquals(List.of("r1"), link.attached, "told on the session's first listing");
    Instant listed = clock.instant();
    assertEquals(
        listed,
        host.kit
            .<Host.Liveness>runCommand(r -> new Host.GetLiveness("r1", r))
            .reply()
            .rentalListedAt(),
        "the proof the rental will get");

    clock.advance(Duration.ofSeconds(1));
    host.heartbeat(session.getRef(), 2, List.of(), List.of("r1"));
    assertEquals(List.of("r1"), link.attached, "not on later ones");
  }

  /**
   * Findings D and G of the simulation: cards reserved for a rental that never learned of it (the
   * matcher or the rental crashed before the Matched answer) or whose one-way release was lost
   * stayed reserved forever. The host asks the rental of every reservation not confirmed; a rental
   * that will never use it gets its cards back, one that runs there confirms it, and a confirmed
   * reservation is never released that way.
   */
  @Test
  void unconfirmedReservationsAreCheckedWithTheirRentals() {
    RecordingRentalLink link = new RecordingRentalLink();
    List<String> asked = link.checked;
    HostDriver checked = onMarketTelling(link);
    ok(checked.reserve("r2", 1));
    ok(checked.reserve("r1", 1));
    ok(checked.reserve("r3", 1));
    ok(checked.confirm("r3"));
    assertTrue(checked.kit.runCommand(Host.ReservationCheck.INSTANCE).hasNoEvents());
    assertEquals(List.of("r1", "r2"), asked, "the unconfirmed ones, by rental id");

    var unwanted = checked.kit.runCommand(new Host.ReservationWanted("r1", false, false));
    assertEquals(List.of(new Host.CardsReleased("r1", List.of(1), START)), unwanted.events());
    var running = checked.kit.runCommand(new Host.ReservationWanted("r2", true, true));
    assertEquals(List.of(new Host.CardsRented("r2", START)), running.events());
    assertTrue(
        checked.kit.runCommand(new Host.ReservationWanted("r3", false, false)).hasNoEvents(),
        "a confirmed reservation is the rental's to release");
    assertTrue(
        checked.kit.runCommand(new Host.ReservationWanted("r9", false, false)).hasNoEvents());
    checked.assertRecovers();
    assertEquals(
        java.util.Set.of("r2", "r3"), checked.enrolled().inventory().reservations().keySet());
    assertRejected(Rejection.HOST_NOT_AVAILABLE, checked.reserve("r1", 1));

    ok(checked.reserve("r4", 1));
    assertTrue(
        checked.kit.runCommand(new Host.ReservationWanted("r4", true, false)).hasNoEvents(),
        "still waiting for its match: kept");
    asked.clear();
    checked.kit.runCommand(Host.ReservationCheck.INSTANCE);
    assertEquals(List.of("r4"), asked);
  }

  /**
   * Finding X of the simulation: a rental's confirmation lost before the host restarted leaves its
   * running workload's cards unconfirmed, and the host cannot see a heartbeat omit it until it
   * knows. The restarted host asks the rentals of its unconfirmed reservations at once, not a
   * minute later.
   */
  @Test
  void aRestartedHostChecksItsUnconfirmedReservationsAtOnce() {
    RecordingRentalLink link = new RecordingRentalLink();
    HostDriver checked = onMarketTelling(link);
    ok(checked.reserve("r1", 1));
    ok(checked.reserve("r2", 1));
    ok(checked.confirm("r2"));
    checked.kit.restart();
    testKit
        .createTestProbe()
        .awaitAssert(
            Duration.ofSeconds(10),
            () -> {
              assertEquals(List.of("r1"), link.checked);
              return null;
            });
  }

  /**
   * Finding J of the simulation: a duplicated Match proposed to this host again after the rental
   * had been matched here, started and confirmed its cards; that proposal was lost, the matcher's
   * ask timed out, and its undo released the confirmed reservation, so the card went to a second
   * rental. The matcher's undo now leaves a reservation the host holds to the rental: a confirmed
   * one is kept, an unconfirmed one is checked with the rental at once.
   */
  @Test
  void theMatchersUndoOfAProposalLeavesTheRentalsReservationToTheRental() {
    RecordingRentalLink link = new RecordingRentalLink();
    List<String> asked = link.checked;
    HostDriver undone = onMarketTelling(link);
    ok(undone.reserve("r1", 1));
    ok(undone.confirm("r1"));
    var keep =
        undone.kit.<StatusReply<Done>>runCommand(r -> Host.ReleaseCards.undoingProposal("r1", r));
    assertTrue(keep.reply().isSuccess());
    assertTrue(keep.hasNoEvents(), "a confirmed reservation is the rental's: the undo keeps it");
    assertTrue(asked.isEmpty());

    ok(undone.reserve("r2", 1));
    var check =
        undone.kit.<StatusReply<Done>>runCommand(r -> Host.ReleaseCards.undoingProposal("r2", r));
    assertTrue(check.reply().isSuccess());
    assertTrue(check.hasNoEvents());
    assertEquals(List.of("r2"), asked, "an unconfirmed one is checked with its rental at once");
    assertEquals(
        List.of(new Host.CardsReleased("r2", List.of(1), START)),
        undone.kit.runCommand(new Host.ReservationWanted("r2", false, false)).events(),
        "and released when the rental does not want it");

    var nothing =
        undone.kit.<StatusReply<Done>>runCommand(r -> Host.ReleaseCards.undoingProposal("r3", r));
    assertEquals(
        List.of(new Host.CardsReleased("r3", List.of(), START)),
        nothing.events(),
        "an undo that finds nothing is remembered, so the late proposal reserves nothing");
    assertRejected(Rejection.HOST_NOT_AVAILABLE, undone.reserve("r3", 1));
    undone.assertRecovers();
    assertEquals(java.util.Set.of("r1"), undone.enrolled().inventory().reservations().keySet());
    assertTrue(undone.enrolled().inventory().reservations().get("r1").confirmed());
  }

  @Test
  void reservingIsIdempotentPerRental() {
    host.onMarket();
    Reservation first = ok(host.reserve("r1", 2));
    assertEquals(START, first.reservedAt());
    // The same reservation, answered again: no new instant (nothing reserved now).
    Reservation same =
        new Reservation(
            first.hostId(),
            first.providerId(),
            first.rentalId(),
            first.cards(),
            first.pricePerGpuHour(),
            first.tier(),
            first.confirmed(),
            first.simulated(),
            first.region());
    var again = host.reserve("r1", 2);
    assertEquals(same, ok(again));
    assertTrue(again.hasNoEvents());
    // A re-sent proposal with other terms still answers the reservation the rental holds.
    assertEquals(same, ok(host.reserve("r1", H100, 4, Listing.Tier.SPOT, 1)));
    assertEquals(List.of(2, 3), ok(host.reserve("r2", 2)).cards());
    assertRejected(Rejection.INSUFFICIENT_CARDS, host.reserve("r3", 1));
  }

  @Test
  void refusesToReserveOnAHostThatIsNotVerified() {
    TestProbe<ToSession> session = host.attached();
    ok(host.updateListing(OWNER, HostDriver.listed()));
    assertRejected(Rejection.HOST_NOT_AVAILABLE, host.reserve("r1", 1));
    ok(host.verify(session.getRef(), HostDriver.tampered(host.signedReport())));
    assertEquals("failed", host.view().status());
    assertRejected(Rejection.HOST_NOT_AVAILABLE, host.reserve("r1", 1));
  }

  @Test
  void refusesToReserveOnAnUnlistedHost() {
    host.verified();
    assertRejected(Rejection.HOST_NOT_AVAILABLE, host.reserve("r1", 1));
    ok(host.updateListing(OWNER, HostDriver.listed()));
    ok(host.reserve("r1", 1));
    ok(host.updateListing(OWNER, new Listing(ON_DEMAND, SPOT, 300, List.of(), false)));
    assertRejected(Rejection.HOST_NOT_AVAILABLE, host.reserve("r2", 1));
  }

  @Test
  void refusesToReserveOutsideTheAvailabilityWindows() {
    host.verified();
    // START is Friday 10:00 UTC; the host offers Fridays 09:00-11:00 and Mondays all day.
    List<Listing.Window> windows =
        List.of(
            new Listing.Window(DayOfWeek.FRIDAY, 9 * 60, 11 * 60),
            new Listing.Window(DayOfWeek.MONDAY, 0, 1440));
    ok(host.updateListing(OWNER, new Listing(ON_DEMAND, SPOT, 300, windows, true)));
    ok(host.reserve("r1", 1));
    clock.set(Instant.parse("2025-03-14T11:00:00Z"));
    assertRejected(Rejection.HOST_NOT_AVAILABLE, host.reserve("r2", 1));
    clock.set(Instant.parse("2025-03-14T08:59:59Z"));
    assertRejected(Rejection.HOST_NOT_AVAILABLE, host.reserve("r2", 1));
    clock.set(Instant.parse("2025-03-17T23:59:59Z"));
    ok(host.reserve("r2", 1));
  }

  @Test
  void refusesAPriceCeilingBelowTheFloor() {
    host.onMarket();
    assertRejected(
        Rejection.PRICE_ABOVE_CEILING,
        host.reserve("r1", H100, 1, Listing.Tier.ON_DEMAND, ON_DEMAND - 1));
    assertRejected(
        Rejection.PRICE_ABOVE_CEILING, host.reserve("r1", H100, 1, Listing.Tier.SPOT, SPOT - 1));
    assertEquals(
        ON_DEMAND,
        ok(host.reserve("r1", H100, 1, Listing.Tier.ON_DEMAND, ON_DEMAND)).pricePerGpuHour());
  }

  @Test
  void refusesATierTheHostDoesNotOffer() {
    host.verified();
    ok(host.updateListing(OWNER, new Listing(ON_DEMAND, null, 300, List.of(), true)));
    assertRejected(
        Rejection.HOST_NOT_AVAILABLE,
        host.reserve("r1", H100, 1, Listing.Tier.SPOT, Long.MAX_VALUE));
  }

  @Test
  void refusesAnotherGpuModelAndMoreCardsThanAreFree() {
    host.onMarket();
    assertRejected(
        Rejection.INSUFFICIENT_CARDS,
        host.reserve("r1", "a100-80gb", 1, Listing.Tier.ON_DEMAND, ON_DEMAND));
    assertRejected(
        Rejection.INSUFFICIENT_CARDS,
        host.reserve("r1", null, 1, Listing.Tier.ON_DEMAND, ON_DEMAND));
    assertRejected(Rejection.INSUFFICIENT_CARDS, host.reserve("r1", 5));
    assertRejected(Rejection.INSUFFICIENT_CARDS, host.reserve("r1", 0));
    assertRejected(Rejection.INSUFFICIENT_CARDS, host.reserve("r1", -1));
    ok(host.reserve("r1", 3));
    assertRejected(Rejection.INSUFFICIENT_CARDS, host.reserve("r2", 2));
    assertEquals(List.of(3), ok(host.reserve("r2", 1)).cards());
  }

  // ---------------------------------------------------------------------------------------------
  // Snapshots: what the agent is told

  private static <T extends ToSession> T expectOnSession(TestProbe<ToSession> session, Class<T> t) {
    List<ToSession> fished =
        session.fishForMessage(
            Duration.ofSeconds(5),
            m ->
                t.isInstance(m)
                    ? org.apache.pekko.actor.testkit.typed.javadsl.FishingOutcomes.complete()
                    : org.apache.pekko.actor.testkit.typed.javadsl.FishingOutcomes
                        .continueAndIgnore());
    return t.cast(fished.get(fished.size() - 1));
  }

  @Test
  void passesRestoreKeepWorkspaceAndUploadRemindersToTheAgent() {
    TestProbe<ToSession> session = host.onMarket();
    ok(host.reserve("rnt_1", 1));
    var restore = new dev.tickmark.engine.rental.Rental.Restore("snap_0", "ab".repeat(32), 99);
    ok(
        host.kit.<org.apache.pekko.pattern.StatusReply<org.apache.pekko.Done>>runCommand(
            r ->
                new Host.StartWorkload("rnt_1", "img:1", List.of("run"), null, false, restore, r)));
    assertEquals(restore, expectOnSession(session, Host.RunWorkload.class).restore());

    host.kit.runCommand(new Host.StopWorkload("rnt_1", true));
    assertEquals(
        new Host.StopWorkloadOnAgent("rnt_1", true),
        expectOnSession(session, Host.StopWorkloadOnAgent.class));
    host.kit.runCommand(new Host.UploadSnapshot("rnt_1", "snap_1", List.of()));
    assertEquals(
        new Host.UploadSnapshotOnAgent("rnt_1", "snap_1", List.of()),
        expectOnSession(session, Host.UploadSnapshotOnAgent.class));
    host.kit.runCommand(new Host.StopWorkload("rnt_1"));
    assertFalse(expectOnSession(session, Host.StopWorkloadOnAgent.class).keepWorkspace());
  }

  @Test
  void aWorkloadStillListedAfterItsRentalReturnedTheCardsIsStopped() {
    TestProbe<ToSession> session = host.onMarket();
    ok(host.reserve("rnt_1", 1));
    ok(host.confirm("rnt_1"));
    host.heartbeat(session.getRef(), 1, HostDriver.healthy(4), List.of("rnt_1"));
    session.expectNoMessage(Duration.ofMillis(50));

    // The rental ended and returned its cards, but its stop never reached the agent (e.g. it was
    // handed to a node cut off by a partition): the agent still lists the workload.
    ok(host.release("rnt_1"));
    host.heartbeat(session.getRef(), 2, HostDriver.healthy(4), List.of("rnt_1"));
    assertEquals(
        new Host.StopWorkloadOnAgent("rnt_1", false),
        expectOnSession(session, Host.StopWorkloadOnAgent.class));
  }

  /** A host with four cards on the market, telling its rentals through {@code link}. */
  private HostDriver onMarketTelling(RecordingRentalLink link) {
    HostDriver host =
        new HostDriver(
            testKit, HostDriver.withRentals(HostDriver.settings(NEVER, false), link), clock, 4);
    host.onMarket();
    return host;
  }
}
