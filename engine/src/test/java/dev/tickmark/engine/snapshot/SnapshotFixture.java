package dev.tickmark.engine.snapshot;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.tickmark.engine.Rejection;
import dev.tickmark.engine.TestClock;
import dev.tickmark.engine.account.Account;
import dev.tickmark.engine.host.Host;
import dev.tickmark.engine.snapshot.Snapshot.Command;
import dev.tickmark.engine.snapshot.Snapshot.Event;
import dev.tickmark.engine.snapshot.Snapshot.Settings;
import dev.tickmark.engine.snapshot.Snapshot.State;
import dev.tickmark.engine.snapshot.Snapshot.View;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Function;
import java.util.function.Supplier;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.TestProbe;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.RecipientRef;
import org.apache.pekko.pattern.StatusReply;
import org.apache.pekko.persistence.testkit.javadsl.EventSourcedBehaviorTestKit;
import org.apache.pekko.persistence.testkit.javadsl.PersistenceTestKit;
import org.apache.pekko.persistence.typed.PersistenceId;

/**
 * One snapshot under test: the {@link Snapshot} in an {@link EventSourcedBehaviorTestKit} (every
 * command, event and state round-trips through jackson-cbor; {@code restart()} recovers it), the
 * REAL renter {@link Account} on the same in-memory journal so every µ€ is checked where it lands,
 * a host probe, and a {@link TestClock} the test moves. Timers are long in real time; tests send
 * the timer message themselves after moving the clock.
 */
final class SnapshotFixture {
  static final Instant START = Instant.parse("2026-03-14T10:00:00Z");
  static final Duration WAIT = Duration.ofSeconds(5);
  static final long GIB = 1L << 30;

  /** 2.592 EUR per GiB-month: exactly 1 µ€ per GiB-second, so amounts read plainly. */
  static final long ONE_PER_GIB_SECOND = 2_592_000;

  private static final AtomicInteger IDS = new AtomicInteger();

  static Settings settings() {
    return new Settings(
        ONE_PER_GIB_SECOND,
        20 * GIB,
        100 * GIB,
        Duration.ofSeconds(300),
        600,
        Duration.ofHours(1),
        Duration.ofHours(1),
        Duration.ofDays(7),
        Duration.ofSeconds(3));
  }

  static Settings withReminder(Settings s, Duration reminder) {
    return new Settings(
        s.pricePerGibMonth(),
        s.maxBytes(),
        s.quotaBytes(),
        s.settleInterval(),
        s.holdSeconds(),
        s.uploadTimeout(),
        reminder,
        s.suspendedGrace(),
        s.askTimeout());
  }

  static Settings withPrice(Settings s, long price) {
    return new Settings(
        price,
        s.maxBytes(),
        s.quotaBytes(),
        s.settleInterval(),
        s.holdSeconds(),
        s.uploadTimeout(),
        s.uploadReminder(),
        s.suspendedGrace(),
        s.askTimeout());
  }

  final ActorTestKit testKit;
  final TestClock clock = new TestClock(START);
  final Settings settings;
  final String rentalId;
  final String snapshotId;
  final String renterId;
  final String hostId;
  final ActorRef<Account.Command> account;
  final TestProbe<Host.Command> host;
  final EventSourcedBehaviorTestKit<Command, Event, State> kit;
  private final TestProbe<Object> awaiter;

  SnapshotFixture(ActorTestKit testKit, Settings settings, long deposit) {
    int n = IDS.incrementAndGet();
    this.testKit = testKit;
    this.settings = settings;
    this.rentalId = "rnt_" + n + "x" + System.nanoTime();
    this.snapshotId = Snapshot.idForRental(rentalId);
    this.renterId = "renter-" + rentalId;
    this.hostId = "host-" + n;
    this.host = testKit.createTestProbe();
    this.awaiter = testKit.createTestProbe();
    Snapshot.Ports ports =
        new Snapshot.Ports() {
          @Override
          public RecipientRef<Account.Command> account(String accountId) {
            return accountId.equals(renterId) ? accountRef() : testKit.system().deadLetters();
          }

          @Override
          public RecipientRef<Host.Command> host(String id) {
            return id.equals(hostId) ? host.getRef() : testKit.system().deadLetters();
          }
        };
    // Created before the account posts anything: creating the testkit clears the in-memory journal.
    this.kit =
        EventSourcedBehaviorTestKit.create(
            testKit.system(), Snapshot.create(snapshotId, settings, ports, clock));
    this.account = testKit.spawn(Account.create(renterId, clock), "account-" + renterId);
    ok(this.<Account.Summary>askAccount(r -> new Account.Open("Renter", r)));
    if (deposit > 0) deposit("pay-0", deposit);
  }

  private RecipientRef<Account.Command> accountRef() {
    return account;
  }

  // ---- the account

  void deposit(String reference, long amount) {
    ok(this.<Account.Posting>askAccount(r -> new Account.Deposit(reference, amount, r)));
  }

  <T> StatusReply<T> askAccount(Function<ActorRef<StatusReply<T>>, Account.Command> command) {
    TestProbe<StatusReply<T>> probe = testKit.createTestProbe();
    account.tell(command.apply(probe.getRef()));
    return probe.receiveMessage(WAIT);
  }

  Account.Summary summary() {
    TestProbe<Account.Summary> probe = testKit.createTestProbe();
    account.tell(new Account.GetSummary(probe.getRef()));
    return probe.receiveMessage(WAIT);
  }

  StatusReply<Account.HoldView> hold() {
    return askAccount(r -> new Account.GetHold(snapshotId, r));
  }

  List<Object> accountEvents() {
    return PersistenceTestKit.create(testKit.system())
        .persistedInStorage(PersistenceId.of(Account.ENTITY_KEY.name(), renterId).id());
  }

  <E> List<E> accountEvents(Class<E> type) {
    return accountEvents().stream().filter(type::isInstance).map(type::cast).toList();
  }

  // ---- the snapshot

  StatusReply<View> ask(Function<ActorRef<StatusReply<View>>, Command> command) {
    return kit.<StatusReply<View>>runCommand(command::apply).reply();
  }

  /** Sends a command whose reply comes later (after an ask of the account) to a probe. */
  TestProbe<StatusReply<View>> send(Function<ActorRef<StatusReply<View>>, Command> command) {
    TestProbe<StatusReply<View>> probe = testKit.createTestProbe();
    kit.runCommand(command.apply(probe.getRef()));
    return probe;
  }

  void tell(Command command) {
    kit.runCommand(command);
  }

  View create() {
    return ok(ask(r -> new Snapshot.Create(renterId, rentalId, hostId, "h100-80gb", "eu-nl", r)));
  }

  StatusReply<View> manifest(long sizeBytes, long elsewhere) {
    return ask(
        r -> new Snapshot.RecordManifest(hostId, sizeBytes, "ab".repeat(32), 3, elsewhere, r));
  }

  StatusReply<View> complete() {
    return send(r -> new Snapshot.Complete(hostId, r)).receiveMessage(WAIT);
  }

  /** Created, uploaded ({@code sizeBytes}), completed: ready (or suspended) at the clock's now. */
  View ready(long sizeBytes) {
    create();
    host.expectMessageClass(Host.UploadSnapshot.class, WAIT);
    ok(manifest(sizeBytes, 0));
    return ok(complete());
  }

  View get() {
    return ok(ask(r -> new Snapshot.Get(renterId, r)));
  }

  /** Moves the clock to {@code seconds} after START and settles. */
  void settleAt(long seconds) {
    clock.set(START.plusSeconds(seconds));
    tell(Snapshot.Timer.SETTLE);
  }

  List<Event> events() {
    List<Event> events = new ArrayList<>();
    for (Object o :
        PersistenceTestKit.create(testKit.system())
            .persistedInStorage(PersistenceId.of(Snapshot.ENTITY_KEY.name(), snapshotId).id()))
      events.add((Event) o);
    return events;
  }

  <E extends Event> List<E> events(Class<E> type) {
    return events().stream().filter(type::isInstance).map(type::cast).toList();
  }

  <S extends State> S awaitState(Class<S> type) {
    return awaitAssert(() -> assertInstanceOf(type, kit.getState()));
  }

  <T> T awaitAssert(Supplier<T> check) {
    return awaiter.awaitAssert(WAIT, check::get);
  }

  void awaitAssert(Runnable check) {
    awaiter.awaitAssert(
        WAIT,
        () -> {
          check.run();
          return null;
        });
  }

  static <T> T ok(StatusReply<T> reply) {
    assertTrue(reply.isSuccess(), () -> "refused: " + reply.getError().getMessage());
    return reply.getValue();
  }

  static void assertRejected(Rejection code, StatusReply<?> reply) {
    assertTrue(reply.isError(), () -> "expected " + code + ", got " + reply);
    assertEquals(
        code, Rejection.codeOf(reply.getError().getMessage()), reply.getError().getMessage());
  }
}
