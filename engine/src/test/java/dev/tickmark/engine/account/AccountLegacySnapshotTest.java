package dev.tickmark.engine.account;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import dev.tickmark.engine.Rejection;
import dev.tickmark.engine.TestClock;
import dev.tickmark.engine.account.Account.Active;
import dev.tickmark.engine.account.Account.Capture;
import dev.tickmark.engine.account.Account.Command;
import dev.tickmark.engine.account.Account.CreditEarnings;
import dev.tickmark.engine.account.Account.Deposit;
import dev.tickmark.engine.account.Account.Event;
import dev.tickmark.engine.account.Account.Forgotten;
import dev.tickmark.engine.account.Account.GetHold;
import dev.tickmark.engine.account.Account.GetSummary;
import dev.tickmark.engine.account.Account.Hold;
import dev.tickmark.engine.account.Account.HoldView;
import dev.tickmark.engine.account.Account.Holds;
import dev.tickmark.engine.account.Account.Marks;
import dev.tickmark.engine.account.Account.OpenAccount;
import dev.tickmark.engine.account.Account.Payout;
import dev.tickmark.engine.account.Account.PayoutDetails;
import dev.tickmark.engine.account.Account.PlaceHold;
import dev.tickmark.engine.account.Account.Posting;
import dev.tickmark.engine.account.Account.Profile;
import dev.tickmark.engine.account.Account.Resume;
import dev.tickmark.engine.account.Account.SourceMark;
import dev.tickmark.engine.account.Account.Sources;
import dev.tickmark.engine.account.Account.Spending;
import dev.tickmark.engine.account.Account.State;
import dev.tickmark.engine.account.Account.Summary;
import dev.tickmark.engine.account.Account.Suspension;
import dev.tickmark.engine.account.Account.Totals;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
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
 * A snapshot written before the state was grouped ({@link OpenAccount}, one flat record) recovers
 * to the same account: the same money, holds, sources and deduplication marks, and the same
 * answers. The bytes in {@code snapshots/account-OpenAccount-fbae5a9.cbor.hex} were written by
 * Account.java as of commit fbae5a9 through the node's jackson-cbor serializer (its classes
 * compiled alone and run with the values of {@link #legacy()}).
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@ExtendWith(TestKitJUnit5Extension.class)
class AccountLegacySnapshotTest {
  static final Config CONFIG =
      EventSourcedBehaviorTestKit.config().withFallback(ConfigFactory.load());

  @JUnit5TestKit
  final ActorTestKit testKit =
      new JUnit5TestKitBuilder()
          .withName("AccountLegacySnapshotTest")
          .withCustomConfig(CONFIG)
          .build();

  private static final Instant START = Instant.parse("2025-03-14T10:00:00Z");
  private static final String LEGACY_MANIFEST = "dev.tickmark.engine.account.Account$OpenAccount";
  private static final PayoutDetails DETAILS =
      new PayoutDetails("Ada Lovelace", "DE89370400440532013000", "COBADEFFXXX");
  private static final Suspension SUSPENSION =
      new Suspension("chargeback review", Instant.parse("2025-03-10T08:00:00Z"));
  private static final Instant FORGOTTEN_RECENTLY = Instant.parse("2025-03-13T09:00:00Z");
  private static final Instant FORGOTTEN_EARLIER = Instant.parse("2025-03-12T08:00:00Z");

  /**
   * The values the stored snapshot was written with, every total distinct so that two swapped ones
   * would show.
   */
  static OpenAccount legacy() {
    return new OpenAccount(
        "Ada",
        100_003,
        20_011,
        5_021,
        7_039,
        1_249,
        2_063,
        90_001L,
        202503,
        3_001,
        Map.of("pay-1", 60_001L, "pay-2", 40_002L),
        Map.of("po-1", 2_063L),
        Map.of("r1", new Hold(8_000, 2_979, 60, 2_979, 979, 0)),
        Map.of("r0", new Hold(20_000, 17_032, 90, 17_032, 32, 2_968)),
        Map.of("rent-1", new SourceMark(30, 4_000, 700, 400, 70)),
        Map.of("rent-0", new SourceMark(45, 3_039, 549, 39, 9)),
        DETAILS,
        SUSPENSION,
        new Forgotten(
            Map.of("r-old", FORGOTTEN_RECENTLY),
            Map.of("r-older", FORGOTTEN_EARLIER),
            FORGOTTEN_RECENTLY));
  }

  /** The same account written out by hand in today's shape. */
  static Active expected() {
    return new Active(
        new Profile("Ada", 90_001L, DETAILS, SUSPENSION),
        new Totals(100_003, 20_011, 5_021, 7_039, 1_249, 2_063),
        new Spending(202503, 3_001),
        new Marks(
            Map.of("pay-1", 60_001L, "pay-2", 40_002L),
            Map.of("po-1", 2_063L),
            new Holds(
                Map.of("r1", new Hold(8_000, 2_979, 60, 2_979, 979, 0)),
                Map.of("r0", new Hold(20_000, 17_032, 90, 17_032, 32, 2_968))),
            new Sources(
                Map.of("rent-1", new SourceMark(30, 4_000, 700, 400, 70)),
                Map.of("rent-0", new SourceMark(45, 3_039, 549, 39, 9))),
            new Forgotten(
                Map.of("r-old", FORGOTTEN_RECENTLY),
                Map.of("r-older", FORGOTTEN_EARLIER),
                FORGOTTEN_RECENTLY)));
  }

  private EventSourcedBehaviorTestKit<Command, Event, State> kit;

  @Test
  void theOldAndTheNewShapeHaveDifferentManifests() {
    Serialization serialization = serialization();
    Serializer serializer = serialization.findSerializerFor(legacy());
    assertInstanceOf(JacksonCborSerializer.class, serializer);
    assertEquals(LEGACY_MANIFEST, Serializers.manifestFor(serializer, legacy()));
    String current =
        Serializers.manifestFor(serialization.findSerializerFor(expected()), expected());
    assertNotEquals(
        LEGACY_MANIFEST,
        current,
        "a snapshot in today's shape must not be read as the old one, nor the reverse");
  }

  @Test
  void theStoredOldSnapshotDecodesToTheValuesItWasWrittenWith() throws IOException {
    assertEquals(legacy(), oldSnapshot());
  }

  @Test
  void recoversAnOldSnapshotToTheSameStateAndAnswers() throws IOException {
    String accountId = "acc-legacy";
    kit =
        EventSourcedBehaviorTestKit.create(
            testKit.system(), Account.create(accountId, new TestClock(START)));
    String persistenceId = PersistenceId.of(Account.ENTITY_KEY.name(), accountId).id();
    kit.snapshotTestKit()
        .orElseThrow()
        .persistForRecovery(
            persistenceId, List.of(Pair.create(SnapshotMeta.create(400), oldSnapshot())));

    State recovered = kit.restart().state();
    assertEquals(expected(), recovered);

    Summary summary = kit.<Summary>runCommand(GetSummary::new).reply();
    assertEquals(
        new Summary(
            accountId,
            true,
            "Ada",
            79_992,
            5_021,
            74_971,
            4_976,
            90_001L,
            3_001,
            100_003,
            20_011,
            7_039,
            1_249,
            2_063,
            DETAILS,
            SUSPENSION),
        summary);

    // Deduplication marks: retries answer as the first time, different content is a conflict.
    assertEquals(new Posting("deposit:pay-2", 40_002, true), ok(deposit("pay-2", 40_002)));
    assertRejected(Rejection.IDEMPOTENCY_CONFLICT, deposit("pay-2", 40_001));
    assertEquals(new Posting("payout:po-1", 2_063, true), ok(payout("po-1", 2_063)));
    assertEquals(new Posting("r1:60", 979, true), ok(capture("r1", 60, 2_979)));
    assertEquals(new Posting("r0:90", 32, true), ok(capture("r0", 90, 17_032)));
    assertEquals(new Posting("rent-1:30", 400, true), ok(credit("rent-1", 30, 4_000, 700, false)));
    assertEquals(new Posting("rent-0:45", 39, true), ok(credit("rent-0", 45, 3_039, 549, true)));
    assertEquals(new HoldView("r1", 8_000, 2_979, 0, true), ok(getHold("r1")));
    assertEquals(new HoldView("r0", 20_000, 17_032, 2_968, false), ok(getHold("r0")));
    // Forgotten rentals stay closed, in both generations; the suspension holds.
    assertRejected(Rejection.HOLD_CLOSED, placeHold("r-old", 100));
    assertRejected(Rejection.HOLD_CLOSED, placeHold("r-older", 100));
    assertRejected(Rejection.ACCOUNT_SUSPENDED, placeHold("r9", 100));
    assertEquals(
        summary,
        kit.<Summary>runCommand(GetSummary::new).reply(),
        "answering retries moved no money");

    // Money moves on from the recovered totals, and this month's spending from the recovered month.
    assertEquals(new Posting("r1:61", 1_000, false), ok(capture("r1", 61, 3_979)));
    assertEquals(new Posting("rent-1:31", 100, false), ok(credit("rent-1", 31, 4_100, 720, true)));
    ok(resume());
    ok(placeHold("r9", 74_971));
    assertRejected(Rejection.INSUFFICIENT_FUNDS, placeHold("r10", 1));
    Summary after = kit.<Summary>runCommand(GetSummary::new).reply();
    assertEquals(
        new Summary(
            accountId, true, "Ada", 78_992, 78_992, 0, 5_076, 90_001L, 4_001, 100_003, 21_011,
            7_139, 1_269, 2_063, DETAILS, null),
        after);

    // The old snapshot and the events after it recover to the same state again.
    State before = kit.getState();
    assertEquals(before, kit.restart().state());
    assertEquals(after, kit.<Summary>runCommand(GetSummary::new).reply());
  }

  private Serialization serialization() {
    return SerializationExtension.get(Adapter.toClassic(testKit.system()));
  }

  /**
   * The stored bytes, read the way the snapshot store reads them: by serializer id and manifest.
   */
  private Object oldSnapshot() throws IOException {
    byte[] bytes = hex("/snapshots/account-OpenAccount-fbae5a9.cbor.hex");
    Serialization serialization = serialization();
    int serializerId = serialization.serializerFor(OpenAccount.class).identifier();
    Object decoded = serialization.deserialize(bytes, serializerId, LEGACY_MANIFEST).get();
    assertInstanceOf(OpenAccount.class, decoded);
    return decoded;
  }

  static byte[] hex(String resource) throws IOException {
    try (InputStream in = AccountLegacySnapshotTest.class.getResourceAsStream(resource)) {
      String text = new String(in.readAllBytes(), StandardCharsets.US_ASCII).replaceAll("\\s", "");
      return HexFormat.of().parseHex(text);
    }
  }

  private CommandResultWithReply<Command, Event, State, StatusReply<Posting>> deposit(
      String reference, long amount) {
    return kit.runCommand(r -> new Deposit(reference, amount, r));
  }

  private CommandResultWithReply<Command, Event, State, StatusReply<Posting>> payout(
      String payoutId, long amount) {
    return kit.runCommand(r -> new Payout(payoutId, amount, r));
  }

  private CommandResultWithReply<Command, Event, State, StatusReply<HoldView>> placeHold(
      String holdId, long amount) {
    return kit.runCommand(r -> new PlaceHold(holdId, amount, r));
  }

  private CommandResultWithReply<Command, Event, State, StatusReply<HoldView>> getHold(
      String holdId) {
    return kit.runCommand(r -> new GetHold(holdId, r));
  }

  private CommandResultWithReply<Command, Event, State, StatusReply<Summary>> resume() {
    return kit.runCommand(Resume::new);
  }

  private CommandResultWithReply<Command, Event, State, StatusReply<Posting>> capture(
      String holdId, long second, long cumulative) {
    return kit.runCommand(r -> new Capture(holdId, second, cumulative, r));
  }

  private CommandResultWithReply<Command, Event, State, StatusReply<Posting>> credit(
      String sourceId, long second, long provider, long platform, boolean last) {
    return kit.runCommand(r -> new CreditEarnings(sourceId, second, provider, platform, last, r));
  }

  private static <T> T ok(CommandResultWithReply<Command, Event, State, StatusReply<T>> result) {
    StatusReply<T> reply = result.reply();
    assertTrue(
        reply.isSuccess(),
        () -> result.command() + " was refused: " + reply.getError().getMessage());
    return reply.getValue();
  }

  private static void assertRejected(
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
