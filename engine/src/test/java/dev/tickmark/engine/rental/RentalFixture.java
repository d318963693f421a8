package dev.tickmark.engine.rental;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.tickmark.engine.Rejection;
import dev.tickmark.engine.TestClock;
import dev.tickmark.engine.account.Account;
import dev.tickmark.engine.host.Host;
import dev.tickmark.engine.host.Listing;
import dev.tickmark.engine.market.Matcher;
import dev.tickmark.engine.rental.Rental.Checkpoint;
import dev.tickmark.engine.rental.Rental.Command;
import dev.tickmark.engine.rental.Rental.Event;
import dev.tickmark.engine.rental.Rental.Settings;
import dev.tickmark.engine.rental.Rental.Spec;
import dev.tickmark.engine.rental.Rental.State;
import dev.tickmark.engine.rental.Rental.View;
import dev.tickmark.engine.snapshot.Snapshot;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Function;
import java.util.function.Predicate;
import java.util.stream.IntStream;
import org.apache.pekko.Done;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.FishingOutcomes;
import org.apache.pekko.actor.testkit.typed.javadsl.TestProbe;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.Behavior;
import org.apache.pekko.actor.typed.RecipientRef;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.pattern.StatusReply;
import org.apache.pekko.persistence.testkit.javadsl.EventSourcedBehaviorTestKit;
import org.apache.pekko.persistence.testkit.javadsl.PersistenceTestKit;
import org.apache.pekko.persistence.typed.PersistenceId;

/**
 * One rental under test: the {@link Rental} in an {@link EventSourcedBehaviorTestKit} (every
 * command, event and state round-trips through jackson-cbor; {@code restart()} recovers it from the
 * in-memory journal) or, where several rentals run at once, spawned on its own (the testkit wipes
 * the whole in-memory journal whenever one is created) and restarted by stopping and respawning it;
 * the REAL renter and provider {@link Account}s on the same journal so money is checked end to end,
 * a scripted host that answers like {@link Host} and reports what it was told, a matcher probe the
 * test answers, and a {@link TestClock} the test moves. The rental's timers are real (it wakes at
 * least every {@link #MAX_WAKE_GAP} here), so tests advance the clock and then wait for the effect.
 */
final class RentalFixture {
  static final Instant START = Instant.parse("2025-03-14T10:00:00Z");
  static final String GPU = "h100-80gb";
  static final String REGION = "eu-nl";
  static final Duration WAIT = Duration.ofSeconds(5);

  /** How soon a rental sees the test's clock moved: each wait for its effect costs up to this. */
  static final Duration MAX_WAKE_GAP = Duration.ofMillis(250);

  private static final AtomicInteger IDS = new AtomicInteger();

  static Settings settings() {
    return new Settings(
        Duration.ofSeconds(10),
        300,
        1_500,
        Duration.ofSeconds(30),
        Duration.ofSeconds(30),
        Duration.ofMillis(200),
        Duration.ofSeconds(2),
        // The tests move a TestClock by hand; the rental's timers run on real time, so it wakes at
        // least every quarter second to see the moved clock (a node's wall clock moves by itself).
        MAX_WAKE_GAP);
  }

  static Settings withMaxWakeGap(Settings s, Duration maxWakeGap) {
    return new Settings(
        s.settleInterval(),
        s.holdSeconds(),
        s.feeBps(),
        s.provisioningTimeout(),
        s.stopTimeout(),
        s.retryInterval(),
        s.askTimeout(),
        maxWakeGap);
  }

  static Settings settings(Function<Settings, Settings> change) {
    return change.apply(settings());
  }

  static Settings withSettleInterval(Settings s, Duration settleInterval) {
    return new Settings(
        settleInterval,
        s.holdSeconds(),
        s.feeBps(),
        s.provisioningTimeout(),
        s.stopTimeout(),
        s.retryInterval(),
        s.askTimeout(),
        s.maxWakeGap());
  }

  static Settings withHoldSeconds(Settings s, long holdSeconds) {
    return new Settings(
        s.settleInterval(),
        holdSeconds,
        s.feeBps(),
        s.provisioningTimeout(),
        s.stopTimeout(),
        s.retryInterval(),
        s.askTimeout(),
        s.maxWakeGap());
  }

  static Settings withProvisioningTimeout(Settings s, Duration timeout) {
    return new Settings(
        s.settleInterval(),
        s.holdSeconds(),
        s.feeBps(),
        timeout,
        s.stopTimeout(),
        s.retryInterval(),
        s.askTimeout(),
        s.maxWakeGap());
  }

  static Settings withAskTimeout(Settings s, Duration timeout) {
    return new Settings(
        s.settleInterval(),
        s.holdSeconds(),
        s.feeBps(),
        s.provisioningTimeout(),
        s.stopTimeout(),
        s.retryInterval(),
        timeout,
        s.maxWakeGap());
  }

  static Settings withStopTimeout(Settings s, Duration timeout) {
    return new Settings(
        s.settleInterval(),
        s.holdSeconds(),
        s.feeBps(),
        s.provisioningTimeout(),
        timeout,
        s.retryInterval(),
        s.askTimeout(),
        s.maxWakeGap());
  }

  static Settings withFeeBps(Settings s, int feeBps) {
    return new Settings(
        s.settleInterval(),
        s.holdSeconds(),
        feeBps,
        s.provisioningTimeout(),
        s.stopTimeout(),
        s.retryInterval(),
        s.askTimeout(),
        s.maxWakeGap());
  }

  static Spec spec(Listing.Tier tier, int count, long maxPrice, Long maxTotal, int waitSeconds) {
    return new Spec(
        GPU,
        count,
        tier,
        REGION,
        maxPrice,
        "ghcr.io/acme/train:1",
        List.of("python", "train.py"),
        "ssh-ed25519 AAAA",
        maxTotal,
        waitSeconds,
        false);
  }

  /** The same launch, asking for outbound network. */
  static Spec withNetwork(Spec s) {
    return new Spec(
        s.gpu(),
        s.count(),
        s.tier(),
        s.region(),
        s.maxPricePerGpuHour(),
        s.image(),
        s.command(),
        s.sshPublicKey(),
        s.maxTotal(),
        s.waitSeconds(),
        true,
        s.restore());
  }

  static Spec onDemand(int count, long maxPrice) {
    return spec(Listing.Tier.ON_DEMAND, count, maxPrice, null, 30);
  }

  // ---------------------------------------------------------------------------------------------

  final ActorTestKit testKit;
  final TestClock clock;
  final Settings settings;
  final String rentalId;
  final String renterId;
  final String providerId;
  final String hostId;
  final AccountPort renter;
  final AccountPort provider;
  final FakeHost host;
  final TestProbe<Matcher.Command> matcher;
  final TestProbe<Snapshot.Command> snapshots;
  final TestProbe<StatusReply<View>> creator;

  /** The rental in the testkit; {@code null} when it is spawned on its own. */
  final EventSourcedBehaviorTestKit<Command, Event, State> kit;

  private final Behavior<Command> behavior;
  private volatile ActorRef<Command> spawned;
  private final TestProbe<Object> awaiter;
  private final Map<String, RecipientRef<Account.Command>> accounts = new ConcurrentHashMap<>();
  private final Map<String, RecipientRef<Host.Command>> hosts = new ConcurrentHashMap<>();

  RentalFixture(ActorTestKit testKit, Settings settings, long deposit) {
    this(testKit, settings, deposit, new TestClock(START));
  }

  RentalFixture(ActorTestKit testKit, Settings settings, long deposit, TestClock clock) {
    this(testKit, settings, deposit, clock, false);
  }

  RentalFixture(
      ActorTestKit testKit, Settings settings, long deposit, TestClock clock, boolean spawn) {
    int n = IDS.incrementAndGet();
    this.testKit = testKit;
    this.clock = clock;
    this.settings = settings;
    this.rentalId = "rental-" + n;
    this.renterId = "renter-" + n;
    this.providerId = "provider-" + n;
    this.hostId = "host-" + n;
    this.awaiter = testKit.createTestProbe();
    this.renter = new AccountPort(testKit, renterId, clock);
    this.provider = new AccountPort(testKit, providerId, clock);
    accounts.put(renterId, renter.ref);
    accounts.put(providerId, provider.ref);
    this.host = new FakeHost(testKit, hostId, clock);
    hosts.put(hostId, host.ref);
    this.matcher = testKit.createTestProbe();
    this.snapshots = testKit.createTestProbe();
    this.creator = testKit.createTestProbe();
    Rental.Ports ports =
        new Rental.Ports() {
          @Override
          public RecipientRef<Account.Command> account(String accountId) {
            return accounts.getOrDefault(accountId, testKit.system().deadLetters());
          }

          @Override
          public RecipientRef<Host.Command> host(String id) {
            return hosts.getOrDefault(id, testKit.system().deadLetters());
          }

          @Override
          public RecipientRef<Matcher.Command> matcher(String gpu) {
            return GPU.equals(gpu) ? matcher.getRef() : testKit.system().deadLetters();
          }

          @Override
          public RecipientRef<Snapshot.Command> snapshot(String snapshotId) {
            return snapshotId.equals(Snapshot.idForRental(rentalId))
                ? snapshots.getRef()
                : testKit.system().deadLetters();
          }
        };
    this.behavior = Rental.create(rentalId, settings, ports, clock);
    // Created before the accounts post anything: creating the testkit clears the in-memory journal.
    this.kit = spawn ? null : EventSourcedBehaviorTestKit.create(testKit.system(), behavior);
    this.spawned = spawn ? testKit.spawn(behavior) : null;
    renter.open("Renter " + n);
    if (deposit > 0) renter.deposit("pay-" + n, deposit);
    provider.open("Provider " + n);
  }

  /** Sends a command and, in the testkit, waits until it was handled. */
  void tell(Command command) {
    if (kit != null) kit.runCommand(command);
    else spawned.tell(command);
  }

  StatusReply<View> ask(Function<ActorRef<StatusReply<View>>, Command> command) {
    if (kit != null) return kit.<StatusReply<View>>runCommand(command::apply).reply();
    TestProbe<StatusReply<View>> probe = testKit.createTestProbe();
    spawned.tell(command.apply(probe.getRef()));
    return probe.receiveMessage(WAIT);
  }

  /**
   * A crash: the rental stops wherever it is (in-flight asks are lost) and recovers from its
   * journal.
   */
  void restart() {
    if (kit != null) {
      kit.restart();
    } else {
      testKit.stop(spawned, WAIT);
      spawned = testKit.spawn(behavior);
    }
  }

  String persistenceId() {
    return PersistenceId.of(Rental.ENTITY_KEY.name(), rentalId).id();
  }

  // ---- driving the rental

  void create(Spec spec) {
    tell(new Rental.Create(renterId, spec, creator.getRef()));
  }

  Matcher.Match expectMatch() {
    Matcher.Match match = matcher.expectMessageClass(Matcher.Match.class, WAIT);
    assertEquals(rentalId, match.rentalId());
    return match;
  }

  Host.Reservation reservation(Spec spec, long floor) {
    List<Integer> cards = IntStream.range(0, spec.count()).boxed().toList();
    return new Host.Reservation(
        hostId, providerId, rentalId, cards, floor, spec.tier(), false, false, REGION);
  }

  /**
   * Creates the rental, answers its match at {@code floor}, and lets the agent report the workload
   * running.
   */
  View running(Spec spec, long floor) {
    return running(spec, floor, null);
  }

  /**
   * As {@link #running(Spec, long)}, the agent saying its heartbeats list it from {@code
   * listedFrom}.
   */
  View running(Spec spec, long floor, Instant listedFrom) {
    create(spec);
    Matcher.Match match = expectMatch();
    match.replyTo().tell(new Matcher.Matched(rentalId, reservation(spec, floor)));
    View provisioning = ok(creator.receiveMessage(WAIT));
    assertEquals(Rental.Status.PROVISIONING, provisioning.status());
    host.expect(Host.StartWorkload.class);
    tell(new Rental.WorkloadStarted(hostId, clock.instant(), listedFrom));
    View running = get();
    assertEquals(Rental.Status.RUNNING, running.status());
    return running;
  }

  View get() {
    return ok(get(renterId));
  }

  StatusReply<View> get(String asRenter) {
    return ask(r -> new Rental.Get(asRenter, r));
  }

  StatusReply<View> stop(String asRenter) {
    return ask(r -> new Rental.Stop(asRenter, r));
  }

  /** The renter stops it, the agent reports the workload stopped, and the rental closes. */
  State stopUntilClosed() {
    stop();
    agentStopped();
    return awaitState(Rental.Finished.class);
  }

  View stop() {
    return ok(stop(renterId));
  }

  /**
   * An operator's refund of {@code amount} (null: the rest), answered once both accounts have it.
   */
  StatusReply<Rental.RefundView> refund(String reference, Long amount) {
    TestProbe<StatusReply<Rental.RefundView>> probe = testKit.createTestProbe();
    tell(new Rental.Refund(reference, amount, "the card was faulty", probe.getRef()));
    return probe.receiveMessage(WAIT);
  }

  void agentStopped() {
    tell(new Rental.WorkloadStopped(hostId, clock.instant()));
  }

  // ---- what the journal says

  List<Event> events() {
    List<Event> events = new ArrayList<>();
    for (Object o : PersistenceTestKit.create(testKit.system()).persistedInStorage(persistenceId()))
      events.add((Event) o);
    return events;
  }

  <E extends Event> List<E> events(Class<E> type) {
    return events().stream().filter(type::isInstance).map(type::cast).toList();
  }

  List<Long> checkpointSeconds() {
    return events(Rental.Settled.class).stream().map(s -> s.checkpoint().throughSecond()).toList();
  }

  Checkpoint lastCheckpoint() {
    List<Rental.Settled> settled = events(Rental.Settled.class);
    return settled.isEmpty() ? null : settled.get(settled.size() - 1).checkpoint();
  }

  /** Waits until the checkpoints persisted so far are exactly {@code expected}. */
  void awaitCheckpoints(Long... expected) {
    awaitAssert(() -> assertEquals(List.of(expected), checkpointSeconds()));
  }

  /**
   * Waits until the host was asked twice more than {@code asked}: the first of those questions may
   * have been out already, so the second shows that an answer was handled since.
   */
  void awaitAskedTwiceSince(int asked, String why) {
    awaitAssert(() -> assertTrue(host.livenessAsks.get() >= asked + 2, why));
  }

  <E extends Event> E awaitEvent(Class<E> type) {
    return awaitAssert(
        () -> {
          List<E> found = events(type);
          assertEquals(1, found.size(), () -> "one " + type.getSimpleName() + " in " + events());
          return found.get(0);
        });
  }

  /** Waits until the renter's account has recorded an event of {@code type}; the first one. */
  <E extends Account.Event> E awaitAccountEvent(Class<E> type) {
    return awaitAssert(
        () -> {
          List<E> found = renter.events(type);
          assertTrue(
              !found.isEmpty(), () -> "no " + type.getSimpleName() + " in " + renter.events());
          return found.get(0);
        });
  }

  /** Each journal write of this rental so far, as the events it wrote at once (recordWrites). */
  final List<List<Object>> writes = new java.util.concurrent.CopyOnWriteArrayList<>();

  /**
   * From now on, records each write of this rental to the journal; until {@link #stopRecording}.
   * The policy is the test journal's, so only one test at a time may use it (they run in order).
   */
  void recordWrites() {
    String pid = persistenceId();
    PersistenceTestKit.create(testKit.system())
        .withPolicy(
            new org.apache.pekko.persistence.testkit.ProcessingPolicy<
                org.apache.pekko.persistence.testkit.JournalOperation>() {
              @Override
              public org.apache.pekko.persistence.testkit.ProcessingResult tryProcess(
                  String persistenceId, org.apache.pekko.persistence.testkit.JournalOperation op) {
                if (persistenceId.equals(pid)
                    && op instanceof org.apache.pekko.persistence.testkit.WriteEvents w)
                  writes.add(List.copyOf(scala.jdk.javaapi.CollectionConverters.asJava(w.batch())));
                return org.apache.pekko.persistence.testkit.ProcessingSuccess$.MODULE$;
              }
            });
  }

  void stopRecording() {
    PersistenceTestKit.create(testKit.system()).resetPolicy();
  }

  <S extends State> S awaitState(Class<S> type) {
    return awaitAssert(() -> assertInstanceOf(type, kit.getState()));
  }

  <T> T awaitAssert(java.util.function.Supplier<T> check) {
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

  // ---------------------------------------------------------------------------------------------

  /**
   * A real {@link Account} behind a forwarder that shows every command to a probe and can lose
   * chosen commands on the way in (a crashed node, a dropped message).
   */
  static final class AccountPort {
    final String id;
    final ActorRef<Account.Command> account;
    final ActorRef<Account.Command> ref;
    final TestProbe<Account.Command> seen;
    final AtomicReference<Predicate<Account.Command>> drop = new AtomicReference<>(c -> false);
    private final ActorTestKit testKit;

    AccountPort(ActorTestKit testKit, String id, TestClock clock) {
      this.testKit = testKit;
      this.id = id;
      this.seen = testKit.createTestProbe();
      this.account = testKit.spawn(Account.create(id, clock), "account-" + id);
      ActorRef<Account.Command> target = account;
      this.ref =
          testKit.spawn(
              Behaviors.receive(Account.Command.class)
                  .onAnyMessage(
                      c -> {
                        seen.getRef().tell(c);
                        if (!drop.get().test(c)) target.tell(c);
                        return Behaviors.same();
                      })
                  .build(),
              "port-" + id);
    }

    String persistenceId() {
      return PersistenceId.of(Account.ENTITY_KEY.name(), id).id();
    }

    void open(String name) {
      TestProbe<StatusReply<Account.Summary>> probe = testKit.createTestProbe();
      account.tell(new Account.Open(name, probe.getRef()));
      ok(probe.receiveMessage(WAIT));
    }

    void deposit(String reference, long amount) {
      TestProbe<StatusReply<Account.Posting>> probe = testKit.createTestProbe();
      account.tell(new Account.Deposit(reference, amount, probe.getRef()));
      ok(probe.receiveMessage(WAIT));
    }

    void setSpendCap(Long cap) {
      TestProbe<StatusReply<Account.Summary>> probe = testKit.createTestProbe();
      account.tell(new Account.SetSpendCap(cap, probe.getRef()));
      ok(probe.receiveMessage(WAIT));
    }

    Account.Summary summary() {
      TestProbe<Account.Summary> probe = testKit.createTestProbe();
      account.tell(new Account.GetSummary(probe.getRef()));
      return probe.receiveMessage(WAIT);
    }

    StatusReply<Account.HoldView> hold(String holdId) {
      TestProbe<StatusReply<Account.HoldView>> probe = testKit.createTestProbe();
      account.tell(new Account.GetHold(holdId, probe.getRef()));
      return probe.receiveMessage(WAIT);
    }

    StatusReply<Account.HoldView> placeHold(String holdId, long amount) {
      TestProbe<StatusReply<Account.HoldView>> probe = testKit.createTestProbe();
      account.tell(new Account.PlaceHold(holdId, amount, probe.getRef()));
      return probe.receiveMessage(WAIT);
    }

    StatusReply<Account.Posting> capture(String holdId, long through, long cumulative) {
      TestProbe<StatusReply<Account.Posting>> probe = testKit.createTestProbe();
      account.tell(new Account.Capture(holdId, through, cumulative, probe.getRef()));
      return probe.receiveMessage(WAIT);
    }

    StatusReply<Account.Posting> credit(
        String sourceId, long through, long provider, long platform, boolean last) {
      TestProbe<StatusReply<Account.Posting>> probe = testKit.createTestProbe();
      account.tell(
          new Account.CreditEarnings(sourceId, through, provider, platform, last, probe.getRef()));
      return probe.receiveMessage(WAIT);
    }

    List<Account.Event> events() {
      List<Account.Event> events = new ArrayList<>();
      for (Object o :
          PersistenceTestKit.create(testKit.system()).persistedInStorage(persistenceId())) {
        events.add((Account.Event) o);
      }
      return events;
    }

    <E extends Account.Event> List<E> events(Class<E> type) {
      return events().stream().filter(type::isInstance).map(type::cast).toList();
    }

    /** The next command of {@code type} the account is shown, skipping others. */
    <T extends Account.Command> T expect(Class<T> type, Predicate<T> which) {
      List<Account.Command> fished =
          seen.fishForMessage(
              WAIT,
              c ->
                  type.isInstance(c) && which.test(type.cast(c))
                      ? FishingOutcomes.complete()
                      : FishingOutcomes.continueAndIgnore());
      return type.cast(fished.get(fished.size() - 1));
    }
  }

  /**
   * Answers like a {@link Host} entity would for a reserved rental and shows every command but the
   * liveness asks to a probe. Liveness is "online, last heartbeat now" unless a test freezes it; a
   * test may also hold liveness asks back and let them through later.
   */
  static final class FakeHost {
    final String id;
    final TestProbe<Host.Command> seen;
    final ActorRef<Host.Command> ref;
    final AtomicInteger livenessAsks = new AtomicInteger();
    final AtomicReference<Function<Instant, Host.Liveness>> liveness =
        new AtomicReference<>(now -> new Host.Liveness(true, now));
    final AtomicReference<Rejection> startRefusal = new AtomicReference<>();
    final AtomicBoolean holdLiveness = new AtomicBoolean();
    private final ConcurrentLinkedQueue<Host.GetLiveness> held = new ConcurrentLinkedQueue<>();
    private final TestClock clock;

    /** Lets the held liveness asks through, answered as of the clock's now. */
    private record LetLivenessThrough() implements Host.Command {}

    FakeHost(ActorTestKit testKit, String id, TestClock clock) {
      this.id = id;
      this.clock = clock;
      this.seen = testKit.createTestProbe();
      this.ref = testKit.spawn(behavior(), "fake-" + id);
    }

    private Behavior<Host.Command> behavior() {
      return Behaviors.receive(Host.Command.class)
          .onMessage(
              Host.GetLiveness.class,
              ask -> {
                livenessAsks.incrementAndGet();
                if (holdLiveness.get()) held.add(ask);
                else ask.replyTo().tell(liveness.get().apply(clock.instant()));
                return Behaviors.same();
              })
          .onMessage(
              LetLivenessThrough.class,
              m -> {
                for (Host.GetLiveness ask; (ask = held.poll()) != null; )
                  ask.replyTo().tell(liveness.get().apply(clock.instant()));
                return Behaviors.same();
              })
          .onMessage(
              Host.StartWorkload.class,
              c -> {
                Rejection refusal =
                    startRefusal.get(); // read before the test can see the command and change it
                seen.getRef().tell(c);
                c.replyTo()
                    .tell(
                        refusal == null
                            ? StatusReply.ack()
                            : Rejection.reply(refusal, "refused by the test"));
                return Behaviors.same();
              })
          .onMessage(
              Host.ReleaseCards.class,
              c -> {
                seen.getRef().tell(c);
                c.replyTo().tell(StatusReply.<Done>ack());
                return Behaviors.same();
              })
          .onAnyMessage(
              c -> {
                seen.getRef().tell(c);
                return Behaviors.same();
              })
          .build();
    }

    int heldLivenessAsks() {
      return held.size();
    }

    void letLivenessThrough() {
      holdLiveness.set(false);
      ref.tell(new LetLivenessThrough());
    }

    /** The next command of {@code type} the host is told, skipping others. */
    <T extends Host.Command> T expect(Class<T> type) {
      List<Host.Command> fished =
          seen.fishForMessage(
              WAIT,
              c ->
                  type.isInstance(c)
                      ? FishingOutcomes.complete()
                      : FishingOutcomes.continueAndIgnore());
      return type.cast(fished.get(fished.size() - 1));
    }
  }
}
