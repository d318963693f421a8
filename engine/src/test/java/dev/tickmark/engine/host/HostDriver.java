package dev.tickmark.engine.host;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.tickmark.engine.Rejection;
import dev.tickmark.engine.TestClock;
import dev.tickmark.engine.catalog.Catalog;
import dev.tickmark.engine.host.Host.Attach;
import dev.tickmark.engine.host.Host.Attached;
import dev.tickmark.engine.host.Host.CheckToken;
import dev.tickmark.engine.host.Host.Command;
import dev.tickmark.engine.host.Host.ConfirmCards;
import dev.tickmark.engine.host.Host.Drain;
import dev.tickmark.engine.host.Host.Event;
import dev.tickmark.engine.host.Host.Evict;
import dev.tickmark.engine.host.Host.Get;
import dev.tickmark.engine.host.Host.GpuHealth;
import dev.tickmark.engine.host.Host.Heartbeat;
import dev.tickmark.engine.host.Host.HostView;
import dev.tickmark.engine.host.Host.Identity;
import dev.tickmark.engine.host.Host.Invite;
import dev.tickmark.engine.host.Host.Register;
import dev.tickmark.engine.host.Host.Registration;
import dev.tickmark.engine.host.Host.Reinstate;
import dev.tickmark.engine.host.Host.ReleaseCards;
import dev.tickmark.engine.host.Host.Remove;
import dev.tickmark.engine.host.Host.Reservation;
import dev.tickmark.engine.host.Host.ReserveCards;
import dev.tickmark.engine.host.Host.State;
import dev.tickmark.engine.host.Host.ToSession;
import dev.tickmark.engine.host.Host.UpdateListing;
import dev.tickmark.engine.host.Host.VerifyReport;
import dev.tickmark.engine.host.verification.Verification;
import dev.tickmark.wire.CanonicalJson;
import dev.tickmark.wire.Ed25519;
import dev.tickmark.wire.Frames;
import dev.tickmark.wire.HardwareReport;
import dev.tickmark.wire.HardwareReport.Gpu;
import java.security.KeyPair;
import java.security.PrivateKey;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.UnaryOperator;
import org.apache.pekko.Done;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.TestProbe;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.pattern.StatusReply;
import org.apache.pekko.persistence.testkit.javadsl.EventSourcedBehaviorTestKit;
import org.apache.pekko.persistence.testkit.javadsl.EventSourcedBehaviorTestKit.CommandResult;
import org.apache.pekko.persistence.testkit.javadsl.EventSourcedBehaviorTestKit.CommandResultWithReply;
import org.apache.pekko.persistence.typed.PersistenceId;

/**
 * Drives one {@link Host} through {@link EventSourcedBehaviorTestKit} (which round-trips every
 * command, event and state through jackson-cbor), with the agent's Ed25519 key, a registration
 * token and signed hardware reports. Also holds the fixtures the host tests share.
 */
final class HostDriver {
  static final Catalog CATALOG = Catalog.load();

  /** A Friday. */
  static final Instant START = Instant.parse("2025-03-14T10:00:00Z");

  static final String OWNER = "prov-1";
  static final String REGION = "eu-nl";
  static final String H100 = "h100-80gb";
  static final String H100_SMI = "NVIDIA H100 80GB HBM3";

  /** A timeout no test lives long enough to reach in real time: heartbeat checks never fire. */
  static final Duration NEVER = Duration.ofHours(1);

  static final long ON_DEMAND = 2_000_000L;
  static final long SPOT = 1_200_000L;

  private static final AtomicInteger IDS = new AtomicInteger();

  static Host.Settings settings(Duration heartbeatTimeout, boolean allowSimulated) {
    return new Host.Settings(
        heartbeatTimeout, 5, CATALOG, Verification.Policy.defaults(allowSimulated));
  }

  /** {@code base}'s settings, with the host telling its rentals through {@code link}. */
  static Host.Settings withRentals(Host.Settings base, Host.RentalLink link) {
    return new Host.Settings(
        base.heartbeatTimeout(),
        base.heartbeatIntervalSeconds(),
        base.catalog(),
        base.policy(),
        link);
  }

  static String nextHostId() {
    return "host" + IDS.incrementAndGet();
  }

  static String persistenceId(String hostId) {
    return PersistenceId.of(Host.ENTITY_KEY.name(), hostId).id();
  }

  // ---- reports

  record Signed(HardwareReport report, String canonical, String signature) {}

  static Gpu h100(int index) {
    return new Gpu(
        index,
        "GPU-6f1e5a3c-0000-4000-8000-0000000000" + (10 + index),
        H100_SMI,
        "nvidia",
        81559L,
        "550.54.15",
        "12.4",
        34,
        0L,
        5,
        16);
  }

  /** {@code cards} × H100 80GB HBM3 on a big server: passes every check. */
  static HardwareReport report(int cards, boolean simulated) {
    List<Gpu> gpus = new ArrayList<>();
    for (int i = 0; i < cards; i++) gpus.add(h100(i));
    return new HardwareReport(
        "0.1.0",
        simulated,
        "2026-11-29T18:00:00Z",
        gpus,
        new HardwareReport.Cpu("AMD EPYC 9454 48-Core Processor", 96),
        1_031_000L,
        new HardwareReport.Disk("/var/lib/tickmark", 1_800_000_000_000L, 1450.2),
        null);
  }

  static HardwareReport eachGpu(HardwareReport r, UnaryOperator<Gpu> change) {
    return new HardwareReport(
        r.agentVersion(),
        r.simulated(),
        r.collectedAt(),
        r.gpus().stream().map(change).toList(),
        r.cpu(),
        r.memoryTotalMib(),
        r.disk(),
        r.benchmark());
  }

  static Gpu temperature(Gpu g, int celsius) {
    return new Gpu(
        g.index(),
        g.uuid(),
        g.name(),
        g.vendor(),
        g.memoryTotalMib(),
        g.driverVersion(),
        g.runtimeVersion(),
        celsius,
        g.eccErrorsUncorrected(),
        g.pcieLinkGen(),
        g.pcieLinkWidth());
  }

  static String canonical(HardwareReport report) {
    return new String(CanonicalJson.bytes(Frames.reportTree(report)), UTF_8);
  }

  static Signed sign(HardwareReport report, PrivateKey key) {
    String canonical = canonical(report);
    return new Signed(report, canonical, Ed25519.sign(key, canonical.getBytes(UTF_8)));
  }

  /**
   * The report altered in transit (one GPU a degree warmer, still healthy) under the original
   * signature.
   */
  static Signed tampered(Signed original) {
    HardwareReport altered =
        eachGpu(original.report(), g -> g.index() == 0 ? temperature(g, g.temperatureC() + 1) : g);
    return new Signed(altered, canonical(altered), original.signature());
  }

  static Listing listed() {
    return new Listing(ON_DEMAND, SPOT, 300, List.of(), true);
  }

  static List<GpuHealth> healthy(int cards) {
    List<GpuHealth> gpus = new ArrayList<>();
    for (int i = 0; i < cards; i++) gpus.add(new GpuHealth(i, 90, 60, null));
    return gpus;
  }

  static List<GpuHealth> faulty(int cards, int faultyIndex) {
    List<GpuHealth> gpus = new ArrayList<>();
    for (int i = 0; i < cards; i++)
      gpus.add(new GpuHealth(i, 90, 60, i == faultyIndex ? "Xid 79: fallen off the bus" : null));
    return gpus;
  }

  // ---- the driven host

  final ActorTestKit testKit;
  final String hostId;
  final TestClock clock;
  final int cards;
  final KeyPair key = Ed25519.generate();
  final String publicKey = Ed25519.encodePublic(key.getPublic());
  final String tokenSecret = "tmkreg-secret-" + IDS.incrementAndGet();
  final EventSourcedBehaviorTestKit<Command, Event, State> kit;

  /** The host credential answered at registration. */
  String credential;

  HostDriver(ActorTestKit testKit, Host.Settings settings, TestClock clock, int cards) {
    this.testKit = testKit;
    this.hostId = nextHostId();
    this.clock = clock;
    this.cards = cards;
    this.kit =
        EventSourcedBehaviorTestKit.create(testKit.system(), Host.create(hostId, settings, clock));
  }

  String tokenHash() {
    return Host.sha256(tokenSecret);
  }

  Signed signedReport() {
    return sign(report(cards, false), key.getPrivate());
  }

  CommandResultWithReply<Command, Event, State, StatusReply<Done>> invite(Instant expiresAt) {
    return kit.runCommand(r -> new Invite(OWNER, REGION, "rack-1", tokenHash(), expiresAt, r));
  }

  CommandResultWithReply<Command, Event, State, StatusReply<Done>> invite() {
    return invite(clock.instant().plus(Duration.ofHours(24)));
  }

  CommandResultWithReply<Command, Event, State, StatusReply<Done>> checkToken(String tokenHash) {
    return kit.runCommand(r -> new CheckToken(tokenHash, r));
  }

  CommandResultWithReply<Command, Event, State, StatusReply<Registration>> register(
      String tokenHash, String publicKey) {
    return kit.runCommand(r -> new Register(tokenHash, publicKey, r));
  }

  CommandResultWithReply<Command, Event, State, StatusReply<Registration>> register() {
    return register(tokenHash(), publicKey);
  }

  CommandResultWithReply<Command, Event, State, StatusReply<Identity>> authenticate(
      String credentialHash) {
    return kit.runCommand(r -> new Host.Authenticate(credentialHash, r));
  }

  CommandResultWithReply<Command, Event, State, StatusReply<Attached>> attach(
      ActorRef<ToSession> session) {
    return kit.runCommand(r -> new Attach(session, r));
  }

  CommandResultWithReply<Command, Event, State, StatusReply<Verification.Outcome>> verify(
      ActorRef<ToSession> session, Signed signed) {
    return kit.runCommand(
        r -> new VerifyReport(session, signed.report(), signed.canonical(), signed.signature(), r));
  }

  /** A heartbeat that says nothing of the workloads (as from an agent that does not list them). */
  CommandResult<Command, Event, State> heartbeat(
      ActorRef<ToSession> session, long seq, List<GpuHealth> gpus) {
    return heartbeat(session, seq, gpus, null);
  }

  /** A heartbeat listing {@code rentals} as the workloads the agent runs. */
  CommandResult<Command, Event, State> heartbeat(
      ActorRef<ToSession> session, long seq, List<GpuHealth> gpus, List<String> rentals) {
    return kit.runCommand(
        new Heartbeat(session, seq, gpus, rentals, Host.micros(java.time.Instant.now())));
  }

  /** A heartbeat the agent stamped {@code agentAt} (its own clock). */
  CommandResult<Command, Event, State> heartbeat(
      ActorRef<ToSession> session,
      long seq,
      List<GpuHealth> gpus,
      List<String> rentals,
      java.time.Instant agentAt) {
    return kit.runCommand(
        new Heartbeat(session, seq, gpus, rentals, agentAt, Host.micros(java.time.Instant.now())));
  }

  CommandResultWithReply<Command, Event, State, StatusReply<HostView>> updateListing(
      String owner, Listing listing) {
    return kit.runCommand(r -> new UpdateListing(owner, listing, r));
  }

  CommandResultWithReply<Command, Event, State, StatusReply<HostView>> drain(String owner) {
    return kit.runCommand(r -> new Drain(owner, r));
  }

  CommandResultWithReply<Command, Event, State, StatusReply<HostView>> remove(String owner) {
    return kit.runCommand(r -> new Remove(owner, r));
  }

  CommandResultWithReply<Command, Event, State, StatusReply<HostView>> evict(String reason) {
    return kit.runCommand(r -> new Evict(reason, r));
  }

  CommandResultWithReply<Command, Event, State, StatusReply<HostView>> reinstate() {
    return kit.runCommand(Reinstate::new);
  }

  CommandResultWithReply<Command, Event, State, StatusReply<HostView>> requestVerification(
      String owner) {
    return kit.runCommand(r -> new Host.RequestVerification(owner, r));
  }

  CommandResultWithReply<Command, Event, State, StatusReply<HostView>> get(String owner) {
    return kit.runCommand(r -> new Get(owner, r));
  }

  /** The operator's view. */
  HostView view() {
    return ok(get(null));
  }

  CommandResultWithReply<Command, Event, State, StatusReply<Reservation>> reserve(
      String rentalId, String gpu, int count, Listing.Tier tier, long maxPrice) {
    return kit.runCommand(r -> new ReserveCards(rentalId, gpu, count, tier, maxPrice, r));
  }

  /** Proposals that reached the host together ({@link Host.ReserveCardsBatch}). */
  /** A proposal built by the test, given its reply address. */
  CommandResultWithReply<Command, Event, State, StatusReply<Reservation>> propose(
      java.util.function.Function<ActorRef<StatusReply<Reservation>>, ReserveCards> proposal) {
    return kit.runCommand(proposal::apply);
  }

  CommandResultWithReply<Command, Event, State, StatusReply<Host.Reservations>> reserveTogether(
      List<ReserveCards> proposals) {
    return kit.runCommand(r -> new Host.ReserveCardsBatch(proposals, r));
  }

  CommandResultWithReply<Command, Event, State, StatusReply<Reservation>> reserve(
      String rentalId, int count) {
    return reserve(rentalId, H100, count, Listing.Tier.ON_DEMAND, ON_DEMAND);
  }

  CommandResultWithReply<Command, Event, State, StatusReply<Reservation>> confirm(String rentalId) {
    return kit.runCommand(r -> new ConfirmCards(rentalId, r));
  }

  /** The rental's confirmation with the agent's {@code listed_from} and its own start. */
  CommandResultWithReply<Command, Event, State, StatusReply<Reservation>> confirm(
      String rentalId, java.time.Instant listedFrom, java.time.Instant startedAt) {
    return kit.runCommand(r -> new ConfirmCards(rentalId, listedFrom, startedAt, r));
  }

  CommandResultWithReply<Command, Event, State, StatusReply<Done>> release(String rentalId) {
    return kit.runCommand(r -> new ReleaseCards(rentalId, r));
  }

  /** The release of a rental that ended, {@code host_lost} or not. */
  CommandResultWithReply<Command, Event, State, StatusReply<Done>> releaseEnded(
      String rentalId, boolean hostLost) {
    return kit.runCommand(r -> ReleaseCards.ended(rentalId, hostLost, r));
  }

  // ---- composite steps

  /** Invited and registered with this driver's key; answers the host credential. */
  String registered() {
    ok(invite());
    credential = ok(register()).hostCredential();
    return credential;
  }

  /** The hash a node keeps of the credential's secret part (what {@code Authenticate} carries). */
  String credentialHash() {
    return Host.sha256(credential.substring(("tmkhost_" + hostId + "_").length()));
  }

  /** Registered and attached: online, verifying. */
  TestProbe<ToSession> attached() {
    registered();
    TestProbe<ToSession> session = testKit.createTestProbe();
    ok(attach(session.getRef()));
    return session;
  }

  /** Attached and verified with a valid signed report. */
  TestProbe<ToSession> verified() {
    TestProbe<ToSession> session = attached();
    assertTrue(ok(verify(session.getRef(), signedReport())).passed());
    return session;
  }

  /** On the market, its report saying how its agent runs rentals. */
  TestProbe<ToSession> onMarket(HardwareReport.WorkloadRuntime runtime) {
    TestProbe<ToSession> session = attached();
    Signed signed = sign(report(cards, false).withRuntime(runtime), key.getPrivate());
    assertTrue(ok(verify(session.getRef(), signed)).passed());
    ok(updateListing(OWNER, listed()));
    return session;
  }

  /** Verified, online and listed with {@link #listed()}: on the market. */
  TestProbe<ToSession> onMarket() {
    TestProbe<ToSession> session = verified();
    ok(updateListing(OWNER, listed()));
    return session;
  }

  Host.Active enrolled() {
    return (Host.Active) kit.getState();
  }

  List<Object> journal() {
    return kit.persistenceTestKit().persistedInStorage(persistenceId(hostId));
  }

  /** Restarts the entity from its journal (and snapshots) and checks that nothing changed. */
  void assertRecovers() {
    State before = kit.getState();
    StatusReply<HostView> viewBefore = get(null).reply();
    State recovered = kit.restart().state();
    assertEquals(before, recovered, "state after recovery");
    StatusReply<HostView> viewAfter = get(null).reply();
    assertEquals(viewBefore.isSuccess(), viewAfter.isSuccess(), "view after recovery");
    if (viewBefore.isSuccess())
      assertEquals(viewBefore.getValue(), viewAfter.getValue(), "view after recovery");
    else
      assertEquals(
          viewBefore.getError().getMessage(),
          viewAfter.getError().getMessage(),
          "view after recovery");
  }

  static <T> T ok(CommandResultWithReply<Command, Event, State, StatusReply<T>> result) {
    StatusReply<T> reply = result.reply();
    assertTrue(
        reply.isSuccess(),
        () -> result.command() + " was refused: " + reply.getError().getMessage());
    return reply.getValue();
  }

  static void assertRejected(
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
}
