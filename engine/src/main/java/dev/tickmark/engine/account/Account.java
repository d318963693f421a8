package dev.tickmark.engine.account;

import static dev.tickmark.engine.Rejection.reply;

import com.fasterxml.jackson.annotation.JsonCreator;
import dev.tickmark.engine.CborSerializable;
import dev.tickmark.engine.Rejection;
import dev.tickmark.engine.money.Money;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneOffset;
import java.time.ZonedDateTime;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.BiFunction;
import java.util.stream.IntStream;
import org.apache.pekko.Done;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.Behavior;
import org.apache.pekko.actor.typed.SupervisorStrategy;
import org.apache.pekko.actor.typed.javadsl.ActorContext;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.cluster.sharding.typed.javadsl.ClusterSharding;
import org.apache.pekko.cluster.sharding.typed.javadsl.Entity;
import org.apache.pekko.cluster.sharding.typed.javadsl.EntityTypeKey;
import org.apache.pekko.pattern.StatusReply;
import org.apache.pekko.persistence.typed.PersistenceId;
import org.apache.pekko.persistence.typed.RecoveryCompleted;
import org.apache.pekko.persistence.typed.javadsl.CommandHandlerWithReply;
import org.apache.pekko.persistence.typed.javadsl.CommandHandlerWithReplyBuilderByState;
import org.apache.pekko.persistence.typed.javadsl.EventHandler;
import org.apache.pekko.persistence.typed.javadsl.EventSourcedBehaviorWithEnforcedReplies;
import org.apache.pekko.persistence.typed.javadsl.ReplyEffect;
import org.apache.pekko.persistence.typed.javadsl.RetentionCriteria;
import org.apache.pekko.persistence.typed.javadsl.SignalHandler;

/**
 * A euro account: the renter side (deposits, holds, captures) and the provider side (earnings,
 * payouts) of one customer. It is the single writer of its own money, so every rule of the Money
 * section that concerns one account is checked here, atomically, before an event is persisted.
 *
 * <p>Idempotency: settlement postings (captures and earnings credits) arrive in monotonically
 * increasing seconds per source (one rental), carry cumulative totals, and are deduplicated by a
 * high-water mark per source; deposits and payouts are human-scale events keyed by a reference and
 * remembered with their amount. The same key with the same content answers the first result; the
 * same key with different content answers {@code idempotency_conflict}.
 *
 * <p>Suspension (an operator's decision) refuses new holds and payouts. Everything already under way
 * goes on: open holds may still be extended, captured and released, and earnings still accrue, so a
 * running rental runs until it is stopped or its balance runs out, and its provider is credited for it.
 */
public final class Account
    extends EventSourcedBehaviorWithEnforcedReplies<Account.Command, Account.Event, Account.State> {

  public static final EntityTypeKey<Command> ENTITY_KEY = EntityTypeKey.create(Command.class, "Account");

  /** Events are tagged into a fixed number of slices, one projection instance each. Changing it needs an offset migration. */
  public static final int TAG_SLICES = 4;

  public static final String TAG_PREFIX = "account-";

  public static String tagFor(String accountId) {
    return TAG_PREFIX + Math.floorMod(accountId.hashCode(), TAG_SLICES);
  }

  public static List<String> allTags() {
    return IntStream.range(0, TAG_SLICES).mapToObj(i -> TAG_PREFIX + i).toList();
  }

  // ---------------------------------------------------------------------------------------------
  // Protocol

  public interface Command extends CborSerializable {}

  public record Open(String name, ActorRef<StatusReply<Summary>> replyTo) implements Command {}

  /** Credits {@code amount} to the renter balance; idempotent on {@code reference}. */
  public record Deposit(String reference, long amount, ActorRef<StatusReply<Posting>> replyTo) implements Command {}

  /** Reserves {@code amount} of the available balance for one rental. */
  public record PlaceHold(String holdId, long amount, ActorRef<StatusReply<HoldView>> replyTo) implements Command {}

  /** Grows a hold to {@code newAmount} in total; asking for an amount the hold already has is a no-op. */
  public record ExtendHold(String holdId, long newAmount, ActorRef<StatusReply<HoldView>> replyTo) implements Command {}

  /**
   * Captures from a hold so that the total captured through {@code throughSecond} is
   * {@code cumulativeAmount}. Key: {@code holdId:throughSecond}.
   */
  public record Capture(String holdId, long throughSecond, long cumulativeAmount, ActorRef<StatusReply<Posting>> replyTo)
      implements Command {}

  /** Returns what is left of a hold to the available balance. A hold resolves at most once. */
  public record ReleaseHold(String holdId, ActorRef<StatusReply<HoldView>> replyTo) implements Command {}

  /**
   * Credits the provider side for one source (a rental) so that its cumulative provider and
   * platform shares through {@code throughSecond} are as given. {@code last} marks the source's
   * final settlement. Key: {@code sourceId:throughSecond}.
   */
  public record CreditEarnings(
      String sourceId,
      long throughSecond,
      long cumulativeProviderAmount,
      long cumulativePlatformAmount,
      boolean last,
      ActorRef<StatusReply<Posting>> replyTo)
      implements Command {}

  /**
   * Pays exactly {@code amount} of the earnings out; idempotent on {@code payoutId}. Refused when the
   * earnings do not cover it or the account is suspended (a payout applied before still answers).
   */
  public record Payout(String payoutId, long amount, ActorRef<StatusReply<Posting>> replyTo) implements Command {}

  /** Sets (or with {@code null}, removes) the monthly spend cap in µ€. */
  public record SetSpendCap(Long monthlyCap, ActorRef<StatusReply<Summary>> replyTo) implements Command {}

  /** Where the provider side is paid: validated here, so only a SEPA IBAN with a good checksum is ever kept. */
  public record SetPayoutDetails(String holderName, String iban, String bic, ActorRef<StatusReply<Summary>> replyTo)
      implements Command {}

  /** An operator freezes the account: no new holds and no payouts until {@link Resume}. */
  public record Suspend(String reason, ActorRef<StatusReply<Summary>> replyTo) implements Command {}

  public record Resume(ActorRef<StatusReply<Summary>> replyTo) implements Command {}

  public record GetSummary(ActorRef<Summary> replyTo) implements Command {}

  public record GetHold(String holdId, ActorRef<StatusReply<HoldView>> replyTo) implements Command {}

  /**
   * From a rental that has closed: every settlement of it is acknowledged and it sends nothing more, so its closed
   * hold (renter) or closed source (provider) need not be kept for idempotency any longer. Without it an account
   * would keep an entry for every rental it ever had. An id still open, unknown or already forgotten changes nothing.
   * The answer ({@code Done}) comes either way.
   */
  public record ForgetClosed(String id, ActorRef<Done> replyTo) implements Command {}

  /** Sent by the account to itself: persist the settlement postings buffered since the last write, together. */
  enum FlushPostings implements Command {
    INSTANCE
  }

  /** Everything a client may know of an account; {@code open == false} means it does not exist. */
  public record Summary(
      String id,
      boolean open,
      String name,
      long balance,
      long held,
      long available,
      long earnings,
      Long spendCapMonthly,
      long spentThisMonth,
      long deposited,
      long captured,
      long credited,
      long platformCredited,
      long paidOut,
      PayoutDetails payoutDetails,
      Suspension suspension)
      implements CborSerializable {
    public boolean suspended() {
      return suspension != null;
    }
  }

  /** A SEPA payee: the IBAN in electronic form (no spaces, upper case); {@code bic} is optional in SEPA. */
  public record PayoutDetails(String holderName, String iban, String bic) implements CborSerializable {}

  public record Suspension(String reason, Instant at) implements CborSerializable {}

  /** The result of a money posting. {@code duplicate} says the key had been applied before. */
  public record Posting(String key, long amount, boolean duplicate) implements CborSerializable {}

  public record HoldView(String holdId, long amount, long captured, long released, boolean open)
      implements CborSerializable {}

  // ---------------------------------------------------------------------------------------------
  // Events: facts, each with the instant it happened (the spend-cap month derives from it).

  public interface Event extends CborSerializable {
    Instant at();
  }

  public record Opened(String name, Instant at) implements Event {}

  public record Deposited(String reference, long amount, Instant at) implements Event {}

  public record HoldPlaced(String holdId, long amount, Instant at) implements Event {}

  public record HoldExtended(String holdId, long newAmount, long added, Instant at) implements Event {}

  public record Captured(String holdId, long throughSecond, long cumulativeAmount, long amount, Instant at)
      implements Event {}

  public record HoldReleased(String holdId, long released, Instant at) implements Event {}

  public record EarningsCredited(
      String sourceId,
      long throughSecond,
      long cumulativeProviderAmount,
      long cumulativePlatformAmount,
      long providerAmount,
      long platformAmount,
      boolean last,
      Instant at)
      implements Event {}

  public record PaidOut(String payoutId, long amount, Instant at) implements Event {}

  public record SpendCapSet(Long monthlyCap, Instant at) implements Event {}

  public record PayoutDetailsSet(PayoutDetails details, Instant at) implements Event {}

  public record Suspended(String reason, Instant at) implements Event {}

  public record Resumed(Instant at) implements Event {}

  /** The closed hold and closed source of {@code id} (a rental) were dropped; see {@link Forgotten}. */
  public record ClosedForgotten(String id, Instant at) implements Event {}

  // ---------------------------------------------------------------------------------------------
  // State: immutable (snapshots are written asynchronously), with the lifecycle as types.

  public interface State extends CborSerializable {}

  public enum Unopened implements State {
    INSTANCE
  }

  /** A hold's progress; {@code throughSecond}/{@code lastAmount} are the high-water mark of its captures. */
  public record Hold(long amount, long captured, long throughSecond, long lastCumulative, long lastAmount, long released)
      implements CborSerializable {
    long remaining() {
      return amount - captured;
    }

    HoldView view(String holdId, boolean open) {
      return new HoldView(holdId, amount, captured, released, open);
    }
  }

  /** The high-water mark of one earnings source, with the latest posting for exact duplicate answers. */
  public record SourceMark(
      long throughSecond, long cumulativeProvider, long cumulativePlatform, long lastProvider, long lastPlatform)
      implements CborSerializable {}

  /**
   * Ids whose closed hold and source were dropped once their rental closed ({@link ForgetClosed}): remembered for
   * one to two days, in two generations of a day each (the older one is dropped as a whole when the newer is a day
   * old, by the events' own time, so replay gives the same state), so that a late duplicate of a
   * {@link PlaceHold} or {@link CreditEarnings} cannot open them again. Any message of a closed rental is long
   * delivered or dropped by then (asks time out in seconds, sharding buffers hand over within a minute).
   */
  public record Forgotten(Map<String, Instant> recent, Map<String, Instant> older, Instant recentSince)
      implements CborSerializable {
    static final Duration GENERATION = Duration.ofDays(1);
    static final Forgotten NONE = new Forgotten(Map.of(), Map.of(), null);

    @JsonCreator
    public Forgotten {
      recent = PersistentMap.of(recent == null ? Map.of() : recent);
      older = PersistentMap.of(older == null ? Map.of() : older);
    }

    boolean contains(String id) {
      return recent.containsKey(id) || older.containsKey(id);
    }

    Forgotten with(String id, Instant at) {
      if (recentSince == null || !at.isBefore(recentSince.plus(GENERATION))) {
        return new Forgotten(PersistentMap.<Instant>empty().with(id, at), recentSince == null ? older : recent, at);
      }
      return new Forgotten(Account.with(recent, id, at), older, recentSince);
    }
  }

  public record OpenAccount(
      String name,
      long deposited,
      long captured,
      long held,
      long credited,
      long platformCredited,
      long paidOut,
      Long spendCap,
      int month,
      long capturedInMonth,
      Map<String, Long> deposits,
      Map<String, Long> payouts,
      Map<String, Hold> openHolds,
      Map<String, Hold> closedHolds,
      Map<String, SourceMark> openSources,
      Map<String, SourceMark> closedSources,
      PayoutDetails payoutDetails,
      Suspension suspension,
      Forgotten forgotten)
      implements State {

    /**
     * Keyed by rental: open holds and sources, closed ones until their rental has closed too (then forgotten), and
     * deposits and payouts. Kept as {@link PersistentMap}s, updated in O(log n).
     */
    @JsonCreator
    public OpenAccount {
      deposits = PersistentMap.of(deposits);
      payouts = PersistentMap.of(payouts);
      openHolds = PersistentMap.of(openHolds);
      closedHolds = PersistentMap.of(closedHolds);
      openSources = PersistentMap.of(openSources);
      closedSources = PersistentMap.of(closedSources);
      if (forgotten == null) forgotten = Forgotten.NONE; // snapshots from before forgetting
    }

    static OpenAccount opened(String name) {
      return new OpenAccount(name, 0, 0, 0, 0, 0, 0, null, 0, 0, Map.of(), Map.of(), Map.of(), Map.of(), Map.of(), Map.of(), null,
          null, Forgotten.NONE);
    }

    long balance() {
      return deposited - captured;
    }

    long available() {
      return balance() - held;
    }

    long earnings() {
      return credited - paidOut;
    }

    long spentIn(int currentMonth) {
      return month == currentMonth ? capturedInMonth : 0;
    }

    /** Whether growing the holds by {@code additional} would commit more than the cap this month. */
    boolean exceedsCap(long additional, int currentMonth) {
      if (spendCap == null) return false;
      long committed = spentIn(currentMonth) + held;
      return committed > spendCap - additional;
    }

    Hold hold(String holdId) {
      Hold open = openHolds.get(holdId);
      return open != null ? open : closedHolds.get(holdId);
    }

    SourceMark source(String sourceId) {
      SourceMark open = openSources.get(sourceId);
      return open != null ? open : closedSources.get(sourceId);
    }

    Summary summary(String id, int currentMonth) {
      return new Summary(
          id, true, name, balance(), held, available(), earnings(), spendCap, spentIn(currentMonth),
          deposited, captured, credited, platformCredited, paidOut, payoutDetails, suspension);
    }

    boolean suspended() {
      return suspension != null;
    }

    OpenAccount withDeposit(Deposited e) {
      return new OpenAccount(
          name, deposited + e.amount(), captured, held, credited, platformCredited, paidOut, spendCap, month,
          capturedInMonth, with(deposits, e.reference(), e.amount()), payouts, openHolds, closedHolds, openSources,
          closedSources, payoutDetails, suspension, forgotten);
    }

    OpenAccount withHold(String holdId, Hold hold, long heldDelta) {
      return new OpenAccount(
          name, deposited, captured, held + heldDelta, credited, platformCredited, paidOut, spendCap, month,
          capturedInMonth, deposits, payouts, with(openHolds, holdId, hold), closedHolds, openSources, closedSources, payoutDetails, suspension, forgotten);
    }

    OpenAccount withCapture(Captured e) {
      Hold h = openHolds.get(e.holdId());
      Hold updated = new Hold(h.amount(), h.captured() + e.amount(), e.throughSecond(), e.cumulativeAmount(), e.amount(), 0);
      // The month never goes backwards: a node whose clock lags must not reset the month's spending.
      int eventMonth = Math.max(monthOf(e.at()), month);
      long inMonth = eventMonth == month ? capturedInMonth + e.amount() : e.amount();
      return new OpenAccount(
          name, deposited, captured + e.amount(), held - e.amount(), credited, platformCredited, paidOut, spendCap,
          eventMonth, inMonth, deposits, payouts, with(openHolds, e.holdId(), updated), closedHolds, openSources,
          closedSources, payoutDetails, suspension, forgotten);
    }

    OpenAccount withRelease(HoldReleased e) {
      Hold h = openHolds.get(e.holdId());
      Hold closed = new Hold(h.amount(), h.captured(), h.throughSecond(), h.lastCumulative(), h.lastAmount(), e.released());
      return new OpenAccount(
          name, deposited, captured, held - e.released(), credited, platformCredited, paidOut, spendCap, month,
          capturedInMonth, deposits, payouts, without(openHolds, e.holdId()), with(closedHolds, e.holdId(), closed),
          openSources, closedSources, payoutDetails, suspension, forgotten);
    }

    OpenAccount withEarnings(EarningsCredited e) {
      SourceMark mark = new SourceMark(
          e.throughSecond(), e.cumulativeProviderAmount(), e.cumulativePlatformAmount(), e.providerAmount(),
          e.platformAmount());
      Map<String, SourceMark> open = e.last() ? without(openSources, e.sourceId()) : with(openSources, e.sourceId(), mark);
      Map<String, SourceMark> closed = e.last() ? with(closedSources, e.sourceId(), mark) : closedSources;
      return new OpenAccount(
          name, deposited, captured, held, credited + e.providerAmount(), platformCredited + e.platformAmount(),
          paidOut, spendCap, month, capturedInMonth, deposits, payouts, openHolds, closedHolds, open, closed, payoutDetails, suspension, forgotten);
    }

    OpenAccount withPayout(PaidOut e) {
      return new OpenAccount(
          name, deposited, captured, held, credited, platformCredited, paidOut + e.amount(), spendCap, month,
          capturedInMonth, deposits, with(payouts, e.payoutId(), e.amount()), openHolds, closedHolds, openSources,
          closedSources, payoutDetails, suspension, forgotten);
    }

    OpenAccount withSpendCap(SpendCapSet e) {
      return new OpenAccount(
          name, deposited, captured, held, credited, platformCredited, paidOut, e.monthlyCap(), month, capturedInMonth,
          deposits, payouts, openHolds, closedHolds, openSources, closedSources, payoutDetails, suspension, forgotten);
    }

    OpenAccount withPayoutDetails(PayoutDetailsSet e) {
      return new OpenAccount(
          name, deposited, captured, held, credited, platformCredited, paidOut, spendCap, month, capturedInMonth,
          deposits, payouts, openHolds, closedHolds, openSources, closedSources, e.details(), suspension, forgotten);
    }

    OpenAccount withForgotten(ClosedForgotten e) {
      return new OpenAccount(
          name, deposited, captured, held, credited, platformCredited, paidOut, spendCap, month, capturedInMonth,
          deposits, payouts, openHolds, without(closedHolds, e.id()), openSources, without(closedSources, e.id()), payoutDetails,
          suspension, forgotten.with(e.id(), e.at()));
    }

    OpenAccount withSuspension(Suspension newSuspension) {
      return new OpenAccount(
          name, deposited, captured, held, credited, platformCredited, paidOut, spendCap, month, capturedInMonth,
          deposits, payouts, openHolds, closedHolds, openSources, closedSources, payoutDetails, newSuspension, forgotten);
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Behaviour

  /** SEPA allows 70 characters for a creditor's name. */
  static final int MAX_HOLDER_NAME = 70;

  /**
   * At most this many events go into one write. High on purpose: a write in the middle of handling a long stash
   * sends the rest of the stash round again, so small batches cost quadratic time exactly when an account is
   * behind (seen with one provider account and 6,000 rentals retrying on three overloaded nodes).
   */
  static final int MAX_EVENTS_PER_WRITE = 10_000;

  private final String accountId;
  private final Clock clock;
  private final ActorContext<Command> context;

  // Settlement postings (captures, earnings credits, and forgetting closed rentals) are validated as they
  // arrive, against the state as it will be once the ones before them are persisted, and written together:
  // one write per batch instead of one per posting, so an account with thousands of running rentals keeps up
  // (a provider with 10,000 rentals is credited 1,000 times a second). Answers go out after the write. Any
  // other command waits (stashed) until the batch is written, so commands still take effect in arrival order.
  private final List<Event> pendingEvents = new ArrayList<>();
  private final List<Runnable> pendingAnswers = new ArrayList<>();
  /** The state once {@link #pendingEvents} are persisted; null when nothing is buffered. */
  private OpenAccount pendingState;
  /** A command was stashed behind the buffer: everything after it waits too, to keep the order. */
  private boolean holdingBack;
  private EventHandler<State, Event> events;

  public static void init(ActorSystem<?> system, Clock clock) {
    ClusterSharding.get(system).init(Entity.of(ENTITY_KEY, ctx -> create(ctx.getEntityId(), clock)));
  }

  public static Behavior<Command> create(String accountId, Clock clock) {
    return Behaviors.setup(context -> new Account(accountId, clock, context));
  }

  private Account(String accountId, Clock clock, ActorContext<Command> context) {
    super(
        PersistenceId.of(ENTITY_KEY.name(), accountId),
        SupervisorStrategy.restartWithBackoff(Duration.ofMillis(200), Duration.ofSeconds(5), 0.1));
    this.accountId = accountId;
    this.clock = clock;
    this.context = context;
  }

  /** An answer, and the event to persist before giving it (null: nothing to persist). */
  record Outcome<R>(Event event, R answer) {
    static <R> Outcome<R> answer(R answer) {
      return new Outcome<>(null, answer);
    }
  }

  @Override
  public SignalHandler<State> signalHandler() {
    // After a restart (a failed write), whatever was buffered was never persisted nor answered: its senders retry.
    return newSignalHandlerBuilder().onSignal(RecoveryCompleted.instance(), state -> forgetBuffer()).build();
  }

  private <R> ReplyEffect<Event, State> buffer(OpenAccount state, ActorRef<R> replyTo,
      BiFunction<OpenAccount, Instant, Outcome<R>> posting) {
    if (holdingBack) return Effect().stash();
    if (pendingState == null) {
      pendingState = state;
      context.getSelf().tell(FlushPostings.INSTANCE);
    }
    Outcome<R> outcome = posting.apply(pendingState, now());
    if (outcome.event() != null) {
      pendingEvents.add(outcome.event());
      pendingState = (OpenAccount) eventHandlerOnce().apply(pendingState, outcome.event());
    }
    pendingAnswers.add(() -> replyTo.tell(outcome.answer()));
    if (pendingEvents.size() >= MAX_EVENTS_PER_WRITE) return flush();
    return Effect().noReply();
  }

  private ReplyEffect<Event, State> flush() {
    if (pendingState == null) return Effect().noReply().thenUnstashAll(); // written already (a full batch, or a restart)
    List<Event> toPersist = List.copyOf(pendingEvents);
    List<Runnable> answers = List.copyOf(pendingAnswers);
    forgetBuffer();
    if (toPersist.isEmpty()) {
      answers.forEach(Runnable::run);
      return Effect().noReply().thenUnstashAll();
    }
    return Effect().persist(toPersist).thenRun(s -> answers.forEach(Runnable::run)).thenNoReply().thenUnstashAll();
  }

  /** Any command other than a posting waits until the buffered postings are written. */
  private ReplyEffect<Event, State> waitForBuffer() {
    holdingBack = true;
    return Effect().stash();
  }

  private void forgetBuffer() {
    pendingEvents.clear();
    pendingAnswers.clear();
    pendingState = null;
    holdingBack = false;
  }

  private EventHandler<State, Event> eventHandlerOnce() {
    if (events == null) events = eventHandler();
    return events;
  }

  @Override
  public State emptyState() {
    return Unopened.INSTANCE;
  }

  @Override
  public Set<String> tagsFor(Event event) {
    return Set.of(tagFor(accountId));
  }

  @Override
  public RetentionCriteria retentionCriteria() {
    // Snapshots bound recovery time; events of a money-bearing entity are never deleted.
    return RetentionCriteria.snapshotEvery(200, 2);
  }

  /** A posting key that is missing, blank or absurdly long is refused before any rule runs. */
  private static boolean badKey(String key) {
    return key == null || key.isBlank() || key.length() > 256;
  }

  private static <T> StatusReply<T> badKeyReply(String what) {
    return reply("invalid_key", what + " must be 1 to 256 characters");
  }

  @Override
  public CommandHandlerWithReply<Command, Event, State> commandHandler() {
    CommandHandlerWithReplyBuilderByState<Command, Event, Unopened, State> unopened =
        newCommandHandlerWithReplyBuilder().forStateType(Unopened.class);
    unopened
        .onCommand(Open.class, this::onOpen)
        .onCommand(GetSummary.class, (state, cmd) -> Effect().reply(cmd.replyTo(), notOpen()))
        .onCommand(Deposit.class, cmd -> Effect().reply(cmd.replyTo(), notFound()))
        .onCommand(PlaceHold.class, cmd -> Effect().reply(cmd.replyTo(), notFound()))
        .onCommand(ExtendHold.class, cmd -> Effect().reply(cmd.replyTo(), notFound()))
        .onCommand(Capture.class, cmd -> Effect().reply(cmd.replyTo(), notFound()))
        .onCommand(ReleaseHold.class, cmd -> Effect().reply(cmd.replyTo(), notFound()))
        .onCommand(CreditEarnings.class, cmd -> Effect().reply(cmd.replyTo(), notFound()))
        .onCommand(Payout.class, cmd -> Effect().reply(cmd.replyTo(), notFound()))
        .onCommand(SetSpendCap.class, cmd -> Effect().reply(cmd.replyTo(), notFound()))
        .onCommand(SetPayoutDetails.class, cmd -> Effect().reply(cmd.replyTo(), notFound()))
        .onCommand(Suspend.class, cmd -> Effect().reply(cmd.replyTo(), notFound()))
        .onCommand(Resume.class, cmd -> Effect().reply(cmd.replyTo(), notFound()))
        .onCommand(GetHold.class, cmd -> Effect().reply(cmd.replyTo(), notFound()))
        .onCommand(ForgetClosed.class, cmd -> Effect().reply(cmd.replyTo(), Done.getInstance()))
        .onCommand(FlushPostings.class, cmd -> Effect().noReply());

    CommandHandlerWithReplyBuilderByState<Command, Event, OpenAccount, State> open =
        newCommandHandlerWithReplyBuilder().forStateType(OpenAccount.class);
    open.onCommand(Capture.class, (state, cmd) -> buffer(state, cmd.replyTo(), (pending, now) -> capture(pending, cmd, now)))
        .onCommand(CreditEarnings.class, (state, cmd) -> buffer(state, cmd.replyTo(), (pending, now) -> credit(pending, cmd, now)))
        .onCommand(ForgetClosed.class, (state, cmd) -> buffer(state, cmd.replyTo(), (pending, now) -> forget(pending, cmd, now)))
        .onCommand(FlushPostings.class, (state, cmd) -> flush())
        .onCommand(cmd -> pendingState != null, (state, cmd) -> waitForBuffer())
        .onCommand(Open.class, this::onReopen)
        .onCommand(GetSummary.class, (state, cmd) -> Effect().reply(cmd.replyTo(), summary(state)))
        .onCommand(Deposit.class, this::onDeposit)
        .onCommand(PlaceHold.class, this::onPlaceHold)
        .onCommand(ExtendHold.class, this::onExtendHold)
        .onCommand(ReleaseHold.class, this::onReleaseHold)
        .onCommand(Payout.class, this::onPayout)
        .onCommand(SetSpendCap.class, this::onSetSpendCap)
        .onCommand(SetPayoutDetails.class, this::onSetPayoutDetails)
        .onCommand(Suspend.class, this::onSuspend)
        .onCommand(Resume.class, this::onResume)
        .onCommand(GetHold.class, this::onGetHold);

    return unopened.orElse(open).build();
  }

  private ReplyEffect<Event, State> onOpen(Unopened state, Open cmd) {
    if (cmd.name() == null || cmd.name().isBlank()) {
      return Effect().reply(cmd.replyTo(), reply("invalid_name", "an account needs a name"));
    }
    return Effect().persist(new Opened(cmd.name(), now()))
        .thenReply(cmd.replyTo(), s -> StatusReply.success(summary((OpenAccount) s)));
  }

  private ReplyEffect<Event, State> onReopen(OpenAccount state, Open cmd) {
    if (state.name().equals(cmd.name())) return Effect().reply(cmd.replyTo(), StatusReply.success(summary(state)));
    return Effect().reply(cmd.replyTo(), reply(Rejection.ALREADY_EXISTS, "account " + accountId + " is already open"));
  }

  private ReplyEffect<Event, State> onDeposit(OpenAccount state, Deposit cmd) {
    if (badKey(cmd.reference())) return Effect().reply(cmd.replyTo(), badKeyReply("a deposit reference"));
    String key = "deposit:" + cmd.reference();
    Long earlier = state.deposits().get(cmd.reference());
    if (earlier != null) {
      if (earlier == cmd.amount()) return Effect().reply(cmd.replyTo(), StatusReply.success(new Posting(key, earlier, true)));
      return Effect().reply(cmd.replyTo(), conflict(key, "was applied with amount " + Money.format(earlier)));
    }
    if (cmd.amount() <= 0) return Effect().reply(cmd.replyTo(), reply(Rejection.INVALID_AMOUNT, "a deposit must be positive"));
    if (cmd.amount() > Money.MAX_AMOUNT - state.deposited()) {
      return Effect().reply(cmd.replyTo(), reply(Rejection.AMOUNT_TOO_LARGE, "the balance would exceed the largest amount kept"));
    }
    return Effect().persist(new Deposited(cmd.reference(), cmd.amount(), now()))
        .thenReply(cmd.replyTo(), s -> StatusReply.success(new Posting(key, cmd.amount(), false)));
  }

  private ReplyEffect<Event, State> onPlaceHold(OpenAccount state, PlaceHold cmd) {
    if (badKey(cmd.holdId())) return Effect().reply(cmd.replyTo(), badKeyReply("a hold id"));
    Hold existing = state.hold(cmd.holdId());
    if (existing != null) {
      // A retried PlaceHold answers the hold as it stands (even once suspended: the hold exists and its
      // rental must be able to go on, or release it); a different amount is a conflict.
      if (existing.amount() >= cmd.amount() && state.openHolds().containsKey(cmd.holdId())) {
        return Effect().reply(cmd.replyTo(), StatusReply.success(existing.view(cmd.holdId(), true)));
      }
      return Effect().reply(cmd.replyTo(), conflict("hold:" + cmd.holdId(), "the hold already exists"));
    }
    if (state.forgotten().contains(cmd.holdId())) {
      return Effect().reply(cmd.replyTo(), reply(Rejection.HOLD_CLOSED, "hold " + cmd.holdId() + " belonged to a rental that has closed"));
    }
    if (state.suspended()) {
      return Effect().reply(cmd.replyTo(), reply(Rejection.ACCOUNT_SUSPENDED, "account " + accountId + " is suspended"));
    }
    if (cmd.amount() <= 0) return Effect().reply(cmd.replyTo(), reply(Rejection.INVALID_AMOUNT, "a hold must be positive"));
    ReplyEffect<Event, State> refused = refuseHoldGrowth(state, cmd.amount(), cmd.replyTo());
    if (refused != null) return refused;
    return Effect().persist(new HoldPlaced(cmd.holdId(), cmd.amount(), now()))
        .thenReply(cmd.replyTo(), s -> holdView((OpenAccount) s, cmd.holdId()));
  }

  private ReplyEffect<Event, State> onExtendHold(OpenAccount state, ExtendHold cmd) {
    if (badKey(cmd.holdId())) return Effect().reply(cmd.replyTo(), badKeyReply("a hold id"));
    Hold hold = state.openHolds().get(cmd.holdId());
    if (hold == null) return Effect().reply(cmd.replyTo(), missingOrClosed(state, cmd.holdId()));
    if (cmd.newAmount() <= hold.amount()) return Effect().reply(cmd.replyTo(), StatusReply.success(hold.view(cmd.holdId(), true)));
    long added = cmd.newAmount() - hold.amount();
    ReplyEffect<Event, State> refused = refuseHoldGrowth(state, added, cmd.replyTo());
    if (refused != null) return refused;
    return Effect().persist(new HoldExtended(cmd.holdId(), cmd.newAmount(), added, now()))
        .thenReply(cmd.replyTo(), s -> holdView((OpenAccount) s, cmd.holdId()));
  }

  private ReplyEffect<Event, State> refuseHoldGrowth(OpenAccount state, long additional, ActorRef<StatusReply<HoldView>> replyTo) {
    if (additional > state.available()) {
      return Effect().reply(replyTo, reply(Rejection.INSUFFICIENT_FUNDS,
          "available " + Money.format(state.available()) + " EUR, the hold needs " + Money.format(additional) + " EUR"));
    }
    if (state.exceedsCap(additional, monthOf(now()))) {
      return Effect().reply(replyTo, reply(Rejection.SPEND_CAP_REACHED,
          "the monthly spend cap of " + Money.format(state.spendCap()) + " EUR would be exceeded"));
    }
    return null;
  }

  /** What a capture does to {@code state}: at most one event, and the answer once it is persisted. */
  private static Outcome<StatusReply<Posting>> capture(OpenAccount state, Capture cmd, Instant now) {
    if (badKey(cmd.holdId())) return Outcome.answer(badKeyReply("a hold id"));
    String key = cmd.holdId() + ":" + cmd.throughSecond();
    if (cmd.throughSecond() <= 0 || cmd.cumulativeAmount() < 0) {
      return Outcome.answer(reply(Rejection.INVALID_AMOUNT, "captures name a second from 1 and a non-negative total"));
    }
    Hold hold = state.hold(cmd.holdId());
    if (hold == null) return Outcome.answer(reply(Rejection.HOLD_NOT_FOUND, "no hold " + cmd.holdId()));
    if (cmd.throughSecond() == hold.throughSecond() && hold.throughSecond() > 0) {
      if (cmd.cumulativeAmount() == hold.lastCumulative()) {
        return Outcome.answer(StatusReply.success(new Posting(key, hold.lastAmount(), true)));
      }
      return Outcome.answer(conflict(key, "was captured with cumulative " + Money.format(hold.lastCumulative())));
    }
    if (cmd.throughSecond() < hold.throughSecond()) {
      // Below the high-water mark: applied before. Cumulative totals only grow, so a larger one is a lie.
      if (cmd.cumulativeAmount() <= hold.lastCumulative()) {
        return Outcome.answer(StatusReply.success(new Posting(key, 0, true)));
      }
      return Outcome.answer(conflict(key, "is older than the latest capture but claims more"));
    }
    if (!state.openHolds().containsKey(cmd.holdId())) {
      return Outcome.answer(reply(Rejection.HOLD_CLOSED, "hold " + cmd.holdId() + " was released"));
    }
    long amount = cmd.cumulativeAmount() - hold.captured();
    if (amount < 0) return Outcome.answer(conflict(key, "cumulative capture went down"));
    if (amount > hold.remaining()) {
      return Outcome.answer(reply(Rejection.HOLD_EXCEEDED,
          "capture of " + Money.format(amount) + " EUR exceeds the " + Money.format(hold.remaining()) + " EUR left on the hold"));
    }
    return new Outcome<>(new Captured(cmd.holdId(), cmd.throughSecond(), cmd.cumulativeAmount(), amount, now),
        StatusReply.success(new Posting(key, amount, false)));
  }

  private ReplyEffect<Event, State> onReleaseHold(OpenAccount state, ReleaseHold cmd) {
    if (badKey(cmd.holdId())) return Effect().reply(cmd.replyTo(), badKeyReply("a hold id"));
    Hold open = state.openHolds().get(cmd.holdId());
    if (open == null) {
      Hold closed = state.closedHolds().get(cmd.holdId());
      if (closed != null) return Effect().reply(cmd.replyTo(), StatusReply.success(closed.view(cmd.holdId(), false)));
      return Effect().reply(cmd.replyTo(), reply(Rejection.HOLD_NOT_FOUND, "no hold " + cmd.holdId()));
    }
    return Effect().persist(new HoldReleased(cmd.holdId(), open.remaining(), now()))
        .thenReply(cmd.replyTo(), s -> holdView((OpenAccount) s, cmd.holdId()));
  }

  /** What an earnings credit does to {@code state}: at most one event, and the answer once it is persisted. */
  private static Outcome<StatusReply<Posting>> credit(OpenAccount state, CreditEarnings cmd, Instant now) {
    if (badKey(cmd.sourceId())) return Outcome.answer(badKeyReply("a source id"));
    String key = cmd.sourceId() + ":" + cmd.throughSecond();
    if (cmd.throughSecond() <= 0 || cmd.cumulativeProviderAmount() < 0 || cmd.cumulativePlatformAmount() < 0) {
      return Outcome.answer(reply(Rejection.INVALID_AMOUNT, "credits name a second from 1 and non-negative totals"));
    }
    SourceMark mark = state.source(cmd.sourceId());
    if (mark == null && state.forgotten().contains(cmd.sourceId())) {
      return Outcome.answer(reply(Rejection.HOLD_CLOSED, "source " + cmd.sourceId() + " belonged to a rental that has closed"));
    }
    long throughSecond = mark == null ? -1 : mark.throughSecond();
    if (mark != null && cmd.throughSecond() == throughSecond) {
      if (cmd.cumulativeProviderAmount() == mark.cumulativeProvider() && cmd.cumulativePlatformAmount() == mark.cumulativePlatform()) {
        if (cmd.last() && state.openSources().containsKey(cmd.sourceId())) {
          // The source ends on a second it already settled: close it, moving no money.
          return new Outcome<>(new EarningsCredited(cmd.sourceId(), cmd.throughSecond(), mark.cumulativeProvider(),
                  mark.cumulativePlatform(), 0, 0, true, now),
              StatusReply.success(new Posting(key, mark.lastProvider(), true)));
        }
        return Outcome.answer(StatusReply.success(new Posting(key, mark.lastProvider(), true)));
      }
      return Outcome.answer(conflict(key, "was credited with different cumulative shares"));
    }
    if (mark != null && cmd.throughSecond() < throughSecond) {
      if (cmd.cumulativeProviderAmount() <= mark.cumulativeProvider() && cmd.cumulativePlatformAmount() <= mark.cumulativePlatform()) {
        return Outcome.answer(StatusReply.success(new Posting(key, 0, true)));
      }
      return Outcome.answer(conflict(key, "is older than the latest credit but claims more"));
    }
    if (mark != null && !state.openSources().containsKey(cmd.sourceId())) {
      return Outcome.answer(reply(Rejection.HOLD_CLOSED, "source " + cmd.sourceId() + " has settled for the last time"));
    }
    long providerBefore = mark == null ? 0 : mark.cumulativeProvider();
    long platformBefore = mark == null ? 0 : mark.cumulativePlatform();
    long provider = cmd.cumulativeProviderAmount() - providerBefore;
    long platform = cmd.cumulativePlatformAmount() - platformBefore;
    if (provider < 0 || platform < 0) return Outcome.answer(conflict(key, "cumulative shares went down"));
    if (provider > Money.MAX_AMOUNT - state.credited() || platform > Money.MAX_AMOUNT - state.platformCredited()) {
      return Outcome.answer(reply(Rejection.AMOUNT_TOO_LARGE, "earnings would exceed the largest amount kept"));
    }
    return new Outcome<>(new EarningsCredited(cmd.sourceId(), cmd.throughSecond(), cmd.cumulativeProviderAmount(),
            cmd.cumulativePlatformAmount(), provider, platform, cmd.last(), now),
        StatusReply.success(new Posting(key, provider, false)));
  }

  /**
   * Buffered with the postings, like them: closing rentals on a busy provider account are as frequent as its
   * credits, and a single write each would break up its batches.
   */
  private static Outcome<Done> forget(OpenAccount state, ForgetClosed cmd, Instant now) {
    String id = cmd.id();
    boolean open = state.openHolds().containsKey(id) || state.openSources().containsKey(id);
    boolean closed = state.closedHolds().containsKey(id) || state.closedSources().containsKey(id);
    if (badKey(id) || open || !closed) return Outcome.answer(Done.getInstance());
    return new Outcome<>(new ClosedForgotten(id, now), Done.getInstance());
  }

  private ReplyEffect<Event, State> onPayout(OpenAccount state, Payout cmd) {
    if (badKey(cmd.payoutId())) return Effect().reply(cmd.replyTo(), badKeyReply("a payout id"));
    String key = "payout:" + cmd.payoutId();
    Long earlier = state.payouts().get(cmd.payoutId());
    if (earlier != null) {
      if (earlier == cmd.amount()) return Effect().reply(cmd.replyTo(), StatusReply.success(new Posting(key, earlier, true)));
      return Effect().reply(cmd.replyTo(), conflict(key, "was paid with amount " + Money.format(earlier)));
    }
    if (cmd.amount() <= 0) return Effect().reply(cmd.replyTo(), reply(Rejection.INVALID_AMOUNT, "a payout must be positive"));
    if (state.suspended()) {
      return Effect().reply(cmd.replyTo(), reply(Rejection.ACCOUNT_SUSPENDED, "account " + accountId + " is suspended"));
    }
    if (cmd.amount() > state.earnings()) {
      return Effect().reply(cmd.replyTo(), reply(Rejection.INSUFFICIENT_EARNINGS,
          "earnings are " + Money.format(state.earnings()) + " EUR, the payout asks " + Money.format(cmd.amount()) + " EUR"));
    }
    return Effect().persist(new PaidOut(cmd.payoutId(), cmd.amount(), now()))
        .thenReply(cmd.replyTo(), s -> StatusReply.success(new Posting(key, cmd.amount(), false)));
  }

  private ReplyEffect<Event, State> onSetSpendCap(OpenAccount state, SetSpendCap cmd) {
    if (cmd.monthlyCap() != null && (cmd.monthlyCap() < 0 || cmd.monthlyCap() > Money.MAX_AMOUNT)) {
      return Effect().reply(cmd.replyTo(), reply(Rejection.INVALID_AMOUNT, "a spend cap must be between 0 and the largest amount"));
    }
    if (java.util.Objects.equals(state.spendCap(), cmd.monthlyCap())) {
      return Effect().reply(cmd.replyTo(), StatusReply.success(summary(state)));
    }
    return Effect().persist(new SpendCapSet(cmd.monthlyCap(), now()))
        .thenReply(cmd.replyTo(), s -> StatusReply.success(summary((OpenAccount) s)));
  }

  private ReplyEffect<Event, State> onSetPayoutDetails(OpenAccount state, SetPayoutDetails cmd) {
    String holder = cmd.holderName() == null ? "" : cmd.holderName().strip();
    if (holder.isEmpty() || holder.length() > MAX_HOLDER_NAME || holder.chars().anyMatch(Character::isISOControl)) {
      return Effect().reply(cmd.replyTo(), reply("invalid_holder_name", "the holder name must be 1 to " + MAX_HOLDER_NAME + " printable characters"));
    }
    var ibanProblem = Iban.problem(cmd.iban());
    if (ibanProblem.isPresent()) return Effect().reply(cmd.replyTo(), reply(Rejection.INVALID_IBAN, ibanProblem.get()));
    String bic = cmd.bic() == null || cmd.bic().isBlank() ? null : cmd.bic().strip().toUpperCase(java.util.Locale.ROOT);
    if (bic != null && !Iban.isValidBic(bic)) {
      return Effect().reply(cmd.replyTo(), reply(Rejection.INVALID_BIC, "a BIC has 8 or 11 characters, like DEUTDEFF or DEUTDEFF500"));
    }
    PayoutDetails details = new PayoutDetails(holder, Iban.normalize(cmd.iban()), bic);
    if (details.equals(state.payoutDetails())) return Effect().reply(cmd.replyTo(), StatusReply.success(summary(state)));
    return Effect().persist(new PayoutDetailsSet(details, now()))
        .thenReply(cmd.replyTo(), s -> StatusReply.success(summary((OpenAccount) s)));
  }

  private ReplyEffect<Event, State> onSuspend(OpenAccount state, Suspend cmd) {
    String reason = cmd.reason() == null || cmd.reason().isBlank() ? null : cmd.reason().strip();
    if (reason != null && reason.length() > 500) return Effect().reply(cmd.replyTo(), reply("invalid_reason", "a reason is at most 500 characters"));
    if (state.suspended()) return Effect().reply(cmd.replyTo(), StatusReply.success(summary(state)));
    return Effect().persist(new Suspended(reason, now()))
        .thenReply(cmd.replyTo(), s -> StatusReply.success(summary((OpenAccount) s)));
  }

  private ReplyEffect<Event, State> onResume(OpenAccount state, Resume cmd) {
    if (!state.suspended()) return Effect().reply(cmd.replyTo(), StatusReply.success(summary(state)));
    return Effect().persist(new Resumed(now()))
        .thenReply(cmd.replyTo(), s -> StatusReply.success(summary((OpenAccount) s)));
  }

  private ReplyEffect<Event, State> onGetHold(OpenAccount state, GetHold cmd) {
    return Effect().reply(cmd.replyTo(), holdView(state, cmd.holdId()));
  }

  @Override
  public EventHandler<State, Event> eventHandler() {
    var builder = newEventHandlerBuilder();
    builder.forStateType(Unopened.class).onEvent(Opened.class, (state, e) -> OpenAccount.opened(e.name()));
    builder.forStateType(OpenAccount.class)
        .onEvent(Deposited.class, OpenAccount::withDeposit)
        .onEvent(HoldPlaced.class, (s, e) -> s.withHold(e.holdId(), new Hold(e.amount(), 0, 0, 0, 0, 0), e.amount()))
        .onEvent(HoldExtended.class, (s, e) -> s.withHold(e.holdId(), extended(s.openHolds().get(e.holdId()), e), e.added()))
        .onEvent(Captured.class, OpenAccount::withCapture)
        .onEvent(HoldReleased.class, OpenAccount::withRelease)
        .onEvent(EarningsCredited.class, OpenAccount::withEarnings)
        .onEvent(PaidOut.class, OpenAccount::withPayout)
        .onEvent(SpendCapSet.class, OpenAccount::withSpendCap)
        .onEvent(PayoutDetailsSet.class, OpenAccount::withPayoutDetails)
        .onEvent(Suspended.class, (s, e) -> s.withSuspension(new Suspension(e.reason(), e.at())))
        .onEvent(Resumed.class, (s, e) -> s.withSuspension(null))
        .onEvent(ClosedForgotten.class, OpenAccount::withForgotten);
    return builder.build();
  }

  private static Hold extended(Hold hold, HoldExtended e) {
    return new Hold(e.newAmount(), hold.captured(), hold.throughSecond(), hold.lastCumulative(), hold.lastAmount(), 0);
  }

  // ---------------------------------------------------------------------------------------------

  private Instant now() {
    return clock.instant();
  }

  private Summary summary(OpenAccount state) {
    return state.summary(accountId, monthOf(now()));
  }

  private Summary notOpen() {
    return new Summary(accountId, false, null, 0, 0, 0, 0, null, 0, 0, 0, 0, 0, 0, null, null);
  }

  private <T> StatusReply<T> notFound() {
    return reply(Rejection.NOT_FOUND, "no account " + accountId);
  }

  private static <T> StatusReply<T> conflict(String key, String detail) {
    return reply(Rejection.IDEMPOTENCY_CONFLICT, "posting " + key + " " + detail);
  }

  private static StatusReply<HoldView> holdView(OpenAccount state, String holdId) {
    Hold open = state.openHolds().get(holdId);
    if (open != null) return StatusReply.success(open.view(holdId, true));
    Hold closed = state.closedHolds().get(holdId);
    if (closed != null) return StatusReply.success(closed.view(holdId, false));
    return reply(Rejection.HOLD_NOT_FOUND, "no hold " + holdId);
  }

  private static StatusReply<HoldView> missingOrClosed(OpenAccount state, String holdId) {
    if (state.closedHolds().containsKey(holdId)) return reply(Rejection.HOLD_CLOSED, "hold " + holdId + " was released");
    return reply(Rejection.HOLD_NOT_FOUND, "no hold " + holdId);
  }

  /** The UTC calendar month as {@code yyyymm}; spend caps reset when it changes. */
  public static int monthOf(Instant instant) {
    ZonedDateTime utc = instant.atZone(ZoneOffset.UTC);
    return utc.getYear() * 100 + utc.getMonthValue();
  }

  private static <V> Map<String, V> with(Map<String, V> map, String key, V value) {
    return PersistentMap.of(map).with(key, value);
  }

  private static <V> Map<String, V> without(Map<String, V> map, String key) {
    return PersistentMap.of(map).without(key);
  }
}
