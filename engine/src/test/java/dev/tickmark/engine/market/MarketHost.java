package dev.tickmark.engine.market;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.tickmark.engine.catalog.Catalog;
import dev.tickmark.engine.host.Host;
import dev.tickmark.engine.host.Listing;
import dev.tickmark.engine.host.verification.Verification;
import dev.tickmark.wire.CanonicalJson;
import dev.tickmark.wire.Ed25519;
import dev.tickmark.wire.Frames;
import dev.tickmark.wire.HardwareReport;
import java.security.KeyPair;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import org.apache.pekko.Done;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.TestProbe;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.pattern.StatusReply;

/**
 * A REAL {@link Host} entity spawned on the in-memory journal and brought onto the market the way
 * an agent does it: invited, registered with its Ed25519 key, attached, verified from a signed
 * report of {@code cards} H100s, and listed at an on-demand floor.
 */
final class MarketHost {
  static final String GPU = "h100-80gb";
  static final String REGION = "eu-nl";
  private static final Catalog CATALOG = Catalog.load();
  private static final Duration WAIT = Duration.ofSeconds(5);

  final String hostId;
  final String ownerId;
  final long floor;
  final ActorRef<Host.Command> ref;
  private final ActorTestKit testKit;

  MarketHost(ActorTestKit testKit, String hostId, int cards, long floor) {
    this.testKit = testKit;
    this.hostId = hostId;
    this.ownerId = "owner-" + hostId;
    this.floor = floor;
    Host.Settings settings =
        new Host.Settings(Duration.ofHours(1), 5, CATALOG, Verification.Policy.defaults(false));
    this.ref =
        testKit.spawn(Host.create(hostId, settings, java.time.Clock.systemUTC()), "host-" + hostId);

    KeyPair key = Ed25519.generate();
    String token = "tmkreg-" + hostId;
    ok(
        this.<Done>ask(
            r ->
                new Host.Invite(
                    ownerId,
                    REGION,
                    "rack",
                    Host.sha256(token),
                    Instant.now().plusSeconds(3_600),
                    r)));
    ok(
        this.<Host.Registration>ask(
            r -> new Host.Register(Host.sha256(token), Ed25519.encodePublic(key.getPublic()), r)));
    TestProbe<Host.ToSession> session = testKit.createTestProbe();
    ok(this.<Host.Attached>ask(r -> new Host.Attach(session.getRef(), r)));
    HardwareReport report = report(cards);
    String canonical = new String(CanonicalJson.bytes(Frames.reportTree(report)), UTF_8);
    String signature = Ed25519.sign(key.getPrivate(), canonical.getBytes(UTF_8));
    Verification.Outcome outcome =
        ok(
            this.<Verification.Outcome>ask(
                r -> new Host.VerifyReport(session.getRef(), report, canonical, signature, r)));
    assertTrue(outcome.passed(), () -> "verification: " + outcome.checks());
    ok(
        this.<Host.HostView>ask(
            r ->
                new Host.UpdateListing(
                    ownerId, new Listing(floor, null, 300, List.of(), true), r)));
  }

  private static HardwareReport report(int cards) {
    List<HardwareReport.Gpu> gpus = new ArrayList<>();
    for (int i = 0; i < cards; i++) {
      gpus.add(
          new HardwareReport.Gpu(
              i,
              "GPU-6f1e5a3c-0000-4000-8000-0000000000" + (10 + i),
              "NVIDIA H100 80GB HBM3",
              "nvidia",
              81559L,
              "550.54.15",
              "12.4",
              34,
              0L,
              5,
              16));
    }
    return new HardwareReport(
        "0.1.0",
        false,
        "2026-11-29T18:00:00Z",
        gpus,
        new HardwareReport.Cpu("AMD EPYC 9454 48-Core Processor", 96),
        1_031_000L,
        new HardwareReport.Disk("/var/lib/tickmark", 1_800_000_000_000L, 1450.2),
        null);
  }

  Host.HostView view() {
    return ok(this.<Host.HostView>ask(r -> new Host.Get(ownerId, r)));
  }

  private <T> StatusReply<T> ask(
      java.util.function.Function<ActorRef<StatusReply<T>>, Host.Command> command) {
    TestProbe<StatusReply<T>> probe = testKit.createTestProbe();
    ref.tell(command.apply(probe.getRef()));
    return probe.receiveMessage(WAIT);
  }

  private static <T> T ok(StatusReply<T> reply) {
    assertTrue(reply.isSuccess(), () -> "refused: " + reply.getError().getMessage());
    return reply.getValue();
  }
}
