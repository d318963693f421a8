package dev.tickmark.engine.host;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotEquals;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import dev.tickmark.engine.Rejection;
import dev.tickmark.engine.TestClock;
import dev.tickmark.engine.host.Host.Authenticate;
import dev.tickmark.engine.host.Host.CardView;
import dev.tickmark.engine.host.Host.CheckToken;
import dev.tickmark.engine.host.Host.Command;
import dev.tickmark.engine.host.Host.ConfirmCards;
import dev.tickmark.engine.host.Host.Enrolled;
import dev.tickmark.engine.host.Host.Event;
import dev.tickmark.engine.host.Host.Get;
import dev.tickmark.engine.host.Host.GetLiveness;
import dev.tickmark.engine.host.Host.HostView;
import dev.tickmark.engine.host.Host.Identity;
import dev.tickmark.engine.host.Host.Liveness;
import dev.tickmark.engine.host.Host.Reinstate;
import dev.tickmark.engine.host.Host.ReleaseCards;
import dev.tickmark.engine.host.Host.Reservation;
import dev.tickmark.engine.host.Host.ReserveCards;
import dev.tickmark.engine.host.Host.State;
import dev.tickmark.engine.host.verification.Verification;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import org.apache.pekko.Done;
import org.apache.pekko.actor.testkit.typed.annotations.JUnit5TestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.JUnit5TestKitBuilder;
import org.apache.pekko.actor.testkit.typed.javadsl.TestKitJUnit5Extension;
import org.apache.pekko.actor.typed.javadsl.Adapter;
import org.apache.pekko.japi.Pair;
import org.apache.pekko.pattern.StatusReply;
import org.apache.pekko.persistence.testkit.SnapshotMeta;
import org.apache.pekko.persistence.testkit.javadsl.EventSourcedBehaviorTestKit;
import org.apache.pekko.persistence.testkit.javadsl.EventSourcedBehaviorTestKit.CommandResultWithReply;
import org.apache.pekko.persistence.typed.PersistenceId;
import org.apache.pekko.serialization.Serialization;
import org.apache.pekko.serialization.SerializationExtension;
import org.apache.pekko.serialization.Serializer;
import org.apache.pekko.serialization.Serializers;
import org.apache.pekko.serialization.jackson.JacksonCborSerializer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * A snapshot written before the state was grouped ({@link Enrolled}, one flat record) recovers to
 * the same host: its secrets, standing, presence, cards and reservations, and the same answers. The
 * bytes in {@code snapshots/host-Enrolled-fbae5a9.cbor.hex} were written by Host.java as of commit
 * fbae5a9 through the node's jackson-cbor serializer (its classes compiled alone and run with the
 * values of {@link #legacy()}).
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@ExtendWith(TestKitJUnit5Extension.class)
class HostLegacySnapshotTest {
  static final Config CONFIG =
      EventSourcedBehaviorTestKit.config().withFallback(ConfigFactory.load());

  @JUnit5TestKit
  final ActorTestKit testKit =
      new JUnit5TestKitBuilder()
          .withName("HostLegacySnapshotTest")
          .withCustomConfig(CONFIG)
          .build();

  private static final String LEGACY_MANIFEST = "dev.tickmark.engine.host.Host$Enrolled";
  private static final String GPU = "h100-80gb";
  private static final Instant REGISTERED_AT = Instant.parse("2025-03-01T12:00:00Z");
  private static final Instant LAST_HEARTBEAT = Instant.parse("2025-03-14T09:59:50Z");
  private static final String CREDENTIAL_HASH = Host.sha256("secret-legacy");
  private static final String TOKEN_HASH = Host.sha256("token-legacy");
  private static final Verification.Outcome OUTCOME =
      new Verification.Outcome(
          true,
          List.of(
              new Verification.Check(
                  "gpu_model", Verification.Status.PASS, "NVIDIA H100 80GB HBM3", GPU)),
          List.of(
              new Verification.Card(0, "GPU-a", GPU),
              new Verification.Card(1, "GPU-b", GPU),
              new Verification.Card(2, "GPU-c", GPU)),
          false);
  private static final List<Host.Card> CARDS =
      List.of(
          new Host.Card(0, "GPU-a", GPU),
          new Host.Card(1, "GPU-b", GPU),
          new Host.Card(2, "GPU-c", GPU));
  private static final Map<String, Host.Held> RESERVATIONS =
      Map.of(
          "r1", new Host.Held(List.of(0, 1), 2_000_000, Listing.Tier.ON_DEMAND, true),
          "r2", new Host.Held(List.of(2), 1_200_000, Listing.Tier.SPOT, false));
  private static final Listing LISTING = new Listing(2_000_000, 1_200_000L, 600, List.of(), true);

  /**
   * The values the stored snapshot was written with: evicted, draining and online, so that no flag
   * can hide another.
   */
  static Enrolled legacy() {
    return new Enrolled(
        "prov-1",
        "eu-nl",
        "rack-7",
        "pk-legacy",
        CREDENTIAL_HASH,
        Host.Status.EVICTED,
        OUTCOME,
        "abc:signed",
        CARDS,
        RESERVATIONS,
        LISTING,
        true,
        LAST_HEARTBEAT,
        true,
        "GPU 2: Xid 79",
        REGISTERED_AT,
        TOKEN_HASH);
  }

  /** The same host written out by hand in today's shape. */
  static Host.Active expected() {
    return new Host.Active(
        new Host.Enrollment(
            "prov-1", "eu-nl", "rack-7", "pk-legacy", CREDENTIAL_HASH, REGISTERED_AT, TOKEN_HASH),
        new Host.Standing(Host.Status.EVICTED, OUTCOME, "abc:signed", "GPU 2: Xid 79"),
        new Host.Presence(true, LAST_HEARTBEAT),
        new Host.Inventory(CARDS, RESERVATIONS),
        LISTING,
        true);
  }

  private EventSourcedBehaviorTestKit<Command, Event, State> kit;

  @Test
  void theOldAndTheNewShapeHaveDifferentManifests() {
    Serialization serialization = serialization();
    Serializer serializer = serialization.findSerializerFor(legacy());
    assertInstanceOf(JacksonCborSerializer.class, serializer);
    assertEquals(LEGACY_MANIFEST, Serializers.manifestFor(serializer, legacy()));
    assertNotEquals(
        LEGACY_MANIFEST,
        Serializers.manifestFor(serialization.findSerializerFor(expected()), expected()));
  }

  @Test
  void theStoredOldSnapshotDecodesToTheValuesItWasWrittenWith() throws IOException {
    assertEquals(legacy(), oldSnapshot());
  }

  @Test
  void recoversAnOldSnapshotToTheSameStateAndAnswers() throws IOException {
    String hostId = "host-legacy";
    TestClock clock = new TestClock(HostDriver.START);
    kit =
        EventSourcedBehaviorTestKit.create(
            testKit.system(),
            Host.create(hostId, HostDriver.settings(HostDriver.NEVER, false), clock));
    String persistenceId = PersistenceId.of(Host.ENTITY_KEY.name(), hostId).id();
    kit.snapshotTestKit()
        .orElseThrow()
        .persistForRecovery(
            persistenceId, List.of(Pair.create(SnapshotMeta.create(300), oldSnapshot())));

    assertEquals(expected(), kit.restart().state());

    List<CardView> cards =
        List.of(
            new CardView(0, "GPU-a", GPU, "rented", "r1"),
            new CardView(1, "GPU-b", GPU, "rented", "r1"),
            new CardView(2, "GPU-c", GPU, "reserved", "r2"));
    assertEquals(
        new HostView(
            hostId,
            "prov-1",
            "eu-nl",
            "rack-7",
            "evicted",
            true,
            true,
            true,
            false,
            GPU,
            cards,
            LISTING,
            OUTCOME.checks(),
            LAST_HEARTBEAT,
            REGISTERED_AT,
            "GPU 2: Xid 79"),
        view());
    assertEquals(
        new Liveness(true, LAST_HEARTBEAT), kit.<Liveness>runCommand(GetLiveness::new).reply());

    // Its secrets: the credential still authenticates, the spent token is recognised as spent.
    assertEquals(
        new Identity(hostId, "pk-legacy", "prov-1"), HostDriver.ok(authenticate(CREDENTIAL_HASH)));
    HostDriver.assertRejected(Rejection.UNAUTHORIZED, authenticate(TOKEN_HASH));
    HostDriver.assertRejected(Rejection.TOKEN_USED, checkToken(TOKEN_HASH));

    // Its reservations: a retried reservation answers the one it holds; the pending one can be
    // confirmed.
    assertEquals(
        new Reservation(
            hostId,
            "prov-1",
            "r1",
            List.of(0, 1),
            2_000_000,
            Listing.Tier.ON_DEMAND,
            true,
            false,
            "eu-nl"),
        HostDriver.ok(reserve("r1", 2)));
    assertEquals(
        new Reservation(
            hostId, "prov-1", "r2", List.of(2), 1_200_000, Listing.Tier.SPOT, true, false, "eu-nl"),
        HostDriver.ok(confirm("r2")));
    HostDriver.ok(release("r1"));
    HostDriver.ok(reinstate());
    List<CardView> after =
        List.of(
            new CardView(0, "GPU-a", GPU, "free", null),
            new CardView(1, "GPU-b", GPU, "free", null),
            new CardView(2, "GPU-c", GPU, "rented", "r2"));
    HostView reinstated = view();
    assertEquals(
        new HostView(
            hostId,
            "prov-1",
            "eu-nl",
            "rack-7",
            "verified",
            true,
            true,
            true,
            false,
            GPU,
            after,
            LISTING,
            OUTCOME.checks(),
            LAST_HEARTBEAT,
            REGISTERED_AT,
            null),
        reinstated);

    // The old snapshot and the events after it recover to the same state again.
    State before = kit.getState();
    assertEquals(before, kit.restart().state());
    assertEquals(reinstated, view());
  }

  /** {@link Host.CardsReleased} as it was before it carried the host's record. */
  public record CardsReleasedBeforeTheRecord(String rentalId, List<Integer> cards, Instant at)
      implements dev.tickmark.engine.CborSerializable {}

  /**
   * A release in the journal from before {@code ran} and {@code lost} existed reads as neither: the
   * host's record counts from the upgrade on, and old events still recover.
   */
  @Test
  void aReleaseWrittenBeforeTheRecordReadsAsNeitherRanNorLost() {
    Serialization serialization = serialization();
    Instant at = Instant.parse("2026-11-01T10:00:00Z");
    CardsReleasedBeforeTheRecord old = new CardsReleasedBeforeTheRecord("r-old", List.of(0, 1), at);
    Serializer serializer = serialization.findSerializerFor(old);
    assertInstanceOf(JacksonCborSerializer.class, serializer);
    byte[] bytes = serialization.serialize(old).get();
    Object decoded =
        serialization
            .deserialize(bytes, serializer.identifier(), Host.CardsReleased.class.getName())
            .get();
    assertEquals(new Host.CardsReleased("r-old", List.of(0, 1), at, false, false), decoded);
  }

  private Serialization serialization() {
    return SerializationExtension.get(Adapter.toClassic(testKit.system()));
  }

  /**
   * The stored bytes, read the way the snapshot store reads them: by serializer id and manifest.
   */
  private Object oldSnapshot() throws IOException {
    byte[] bytes;
    try (InputStream in =
        getClass().getResourceAsStream("/snapshots/host-Enrolled-fbae5a9.cbor.hex")) {
      bytes =
          HexFormat.of()
              .parseHex(
                  new String(in.readAllBytes(), StandardCharsets.US_ASCII).replaceAll("\\s", ""));
    }
    Serialization serialization = serialization();
    int serializerId = serialization.serializerFor(Enrolled.class).identifier();
    Object decoded = serialization.deserialize(bytes, serializerId, LEGACY_MANIFEST).get();
    assertInstanceOf(Enrolled.class, decoded);
    return decoded;
  }

  private HostView view() {
    return HostDriver.ok(kit.<StatusReply<HostView>>runCommand(r -> new Get(null, r)));
  }

  private CommandResultWithReply<Command, Event, State, StatusReply<Identity>> authenticate(
      String credentialHash) {
    return kit.runCommand(r -> new Authenticate(credentialHash, r));
  }

  private CommandResultWithReply<Command, Event, State, StatusReply<Done>> checkToken(
      String tokenHash) {
    return kit.runCommand(r -> new CheckToken(tokenHash, r));
  }

  private CommandResultWithReply<Command, Event, State, StatusReply<Reservation>> reserve(
      String rentalId, int count) {
    return kit.runCommand(
        r -> new ReserveCards(rentalId, GPU, count, Listing.Tier.ON_DEMAND, 3_000_000, r));
  }

  private CommandResultWithReply<Command, Event, State, StatusReply<Reservation>> confirm(
      String rentalId) {
    return kit.runCommand(r -> new ConfirmCards(rentalId, r));
  }

  private CommandResultWithReply<Command, Event, State, StatusReply<Done>> release(
      String rentalId) {
    return kit.runCommand(r -> new ReleaseCards(rentalId, r));
  }

  private CommandResultWithReply<Command, Event, State, StatusReply<HostView>> reinstate() {
    return kit.runCommand(Reinstate::new);
  }
}
