package dev.tickmark.engine.rental;

import static dev.tickmark.engine.Rejection.reply;

import dev.tickmark.engine.CborSerializable;
import dev.tickmark.engine.Rejection;
import dev.tickmark.engine.account.Account;
import dev.tickmark.engine.host.Host;
import dev.tickmark.engine.host.Listing;
import dev.tickmark.engine.market.Matcher;
import dev.tickmark.engine.metrics.EngineMetrics;
import dev.tickmark.engine.metrics.LatencyHistogram;
import dev.tickmark.engine.money.Metering;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ThreadLocalRandom;
import java.util.stream.IntStream;
import org.apache.pekko.Done;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.Behavior;
import org.apache.pekko.actor.typed.RecipientRef;
import org.apache.pekko.actor.typed.SupervisorStrategy;
import org.apache.pekko.actor.typed.javadsl.ActorContext;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.actor.typed.javadsl.TimerScheduler;
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
 * One rental, from request to the last micro-euro. It places the renter's hold, asks its GPU's
 * matcher for a host, starts the workload through the host, meters every second from the agent's
 * {@code rental_started}, and coordinates the money: each settlement is recorded here first (cumulative
 * seconds, cost and split), then delivered to the renter's account (a capture) and the provider's
 * (an earnings credit) under the same key until both acknowledge — exactly once in effect, because the
 * accounts deduplicate on that key and totals are cumulative. After a crash it recovers, re-delivers
 * the last settlement, and settles the seconds it missed.
 */
public final class Rental extends EventSourcedBehaviorWithEnforcedReplies<Rental.Command, Rental.Event, Rental.State> {

  public static final EntityTypeKey<Command> ENTITY_KEY = EntityTypeKey.create(Command.class, "Rental");
  public static final int TAG_SLICES = 4;
  public static final String TAG_PREFIX = "rental-";

  public static String tagFor(String rentalId) {
    return TAG_PREFIX + Math.floorMod(rentalId.hashCode(), TAG_SLICES);
  }

  public static List<String> allTags() {
    return IntStream.range(0, TAG_SLICES).mapToObj(i -> TAG_PREFIX + i).toList();
  }

  // End reasons (DESIGN.md)
  public static final String STOPPED_BY_RENTER = "stopped_by_renter";
  public static final String BALANCE_EXHAUSTED = "balance_exhausted";
  public static final String SPEND_CAP_REACHED = "spend_cap_reached";
  public static final String RENTAL_CAP_REACHED = "rental_cap_reached";
  public static final String HOST_LOST = "host_lost";
  public static final String PREEMPTED = "preempted";
  public static final String PROVISIONING_FAILED = "provisioning_failed";
  public static final String NO_CAPACITY = "no_capacity";
  public static final String CANCELLED = "cancelled";

  public record Settings(Duration settleInterval, long holdSeconds, int feeBps, Duration provisioningTimeout,
      Duration stopTimeout, Duration retryInterval, Duration askTimeout) {}

  /** How a rental reaches the other entities; sharding in a node, probes in unit tests. */
  public interface Ports {
    RecipientRef<Account.Command> account(String accountId);

    RecipientRef<Host.Command> host(String hostId);

    RecipientRef<Matcher.Command> matcher(String gpu);
  }

  /** What the renter asked for. Prices are µ€ per GPU-hour; {@code maxTotal} (µ€) is optional. */
  public record Spec(String gpu, int count, Listing.Tier tier, String region, long maxPricePerGpuHour, String image,
      List<String> command, String sshPublicKey, Long maxTotal, int waitSeconds, boolean network) implements CborSerializable {}

  /** The match, frozen for the whole rental; {@code region} is the host's (null in events recorded before it was kept). */
  public record Terms(String hostId, String providerId, List<Integer> cards, long pricePerGpuHour, boolean simulated,
      Instant matchedAt, String region) implements CborSerializable {}

  /** A settlement checkpoint: cumulative seconds, cost and split, from which every second's charge can be recomputed. */
  public record Checkpoint(long throughSecond, long cost, long provider, long platform, Instant at) implements CborSerializable {}

  // ---------------------------------------------------------------------------------------------
  // Protocol

  public interface Command extends CborSerializable {}

  public record Create(String renterId, Spec spec, ActorRef<StatusReply<View>> replyTo) implements Command {}

  /** {@code renterId == null}: an operator or the system. Another renter's rental answers not_found. */
  public record Get(String renterId, ActorRef<StatusReply<View>> replyTo) implements Command {}

  public record Stop(String renterId, ActorRef<StatusReply<View>> replyTo) implements Command {}

  /** Live updates (SSE): the subscriber gets {@link Update}s until the rental ends or it unsubscribes. */
  public record Subscribe(String renterId, ActorRef<Update> subscriber, ActorRef<StatusReply<View>> replyTo) implements Command {}

  public record Unsubscribe(ActorRef<Update> subscriber) implements Command {}

  /** Brings an unfinished rental back after its node was lost: recovery resumes metering and money. */
  public enum Wake implements Command {
    INSTANCE
  }

  // From the host's agent (through its session) and the host entity; each is safe to deliver twice.
  public record WorkloadStarted(String hostId, Instant at) implements Command {}

  public record WorkloadFailed(String hostId, String reason) implements Command {}

  public record WorkloadStopped(String hostId, Instant at) implements Command {}

  public record HostLost(String hostId, Instant lastHeartbeatAt) implements Command {}

  public record Preempt(String hostId, Instant deadline) implements Command {}

  private record HoldAnswer(long amount, String refusal) implements Command {}

  private record MatchAnswer(Matcher.Result result) implements Command {}

  private record StartAnswer(String refusal) implements Command {}

  private record LivenessAnswer(Host.Liveness liveness) implements Command {}

  private record Delivered(String side, long throughSecond, String refusal) implements Command {}

  private record ExtendAnswer(long newAmount, String refusal) implements Command {}

  private record Released(String what, boolean ok) implements Command {}

  private enum Timer implements Command {
    TICK, RETRY_HOLD, RETRY_MATCH, RESEND_START, WAIT_EXPIRED, PROVISION_EXPIRED, PREEMPTION_DUE, STOP_EXPIRED, REDELIVER
  }

  /** What a client may see of a rental. Amounts in µ€. */
  public record View(String id, String renterId, String status, Spec spec, Terms terms, Instant createdAt,
      Instant startedAt, Instant endedAt, String endReason, long billedSeconds, long cost, Instant preemptionDeadline,
      List<Checkpoint> checkpoints) implements CborSerializable {}

  public sealed interface Update extends CborSerializable permits StatusChanged, Tick, PreemptionNotice {}

  public record StatusChanged(View rental) implements Update {}

  public record Tick(long second, long cost) implements Update {}

  public record PreemptionNotice(Instant deadline) implements Update {}

  // ---------------------------------------------------------------------------------------------
  // Events

  public interface Event extends CborSerializable {
    Instant at();
  }

  public record Requested(String renterId, Spec spec, long holdAmount, Instant at) implements Event {}

  /** The first hold could not be placed: nothing was ever charged or held. */
  public record Refused(String code, Instant at) implements Event {}

  public record Matched(Terms terms, Instant at) implements Event {}

  public record Started(Instant startedAt, Instant at) implements Event {}

  public record Settled(Checkpoint checkpoint, Instant at) implements Event {}

  public record HoldExtended(long holdAmount, Instant at) implements Event {}

  /** The hold could not grow: the rental runs until what is held is used, then ends with {@code reason}. */
  public record ExtensionRefused(String reason, Instant at) implements Event {}

  public record PreemptionScheduled(Instant deadline, Instant at) implements Event {}

  /** Metering stopped at {@code endAt}, {@code billedSeconds} after the start; the money is being finished. */
  public record Ended(String reason, Instant endAt, long billedSeconds, Instant at) implements Event {}

  /** Final settlement acknowledged by both accounts, hold released, cards returned. */
  public record Closed(Instant at) implements Event {}

  // ---------------------------------------------------------------------------------------------
  // State: the lifecycle as types

  public interface State extends CborSerializable {}

  public enum Empty implements State {
    INSTANCE
  }

  /** Everything a live rental carries; each state type adds what its phase knows. */
  public record Order(String renterId, Spec spec, long holdAmount, Instant createdAt) implements CborSerializable {}

  public record RefusedRental(Order order, String code) implements State {}

  public record Pending(Order order) implements State {}

  /** {@code preemptionDeadline}: a spot notice that came before the workload started (null: none). */
  public record Provisioning(Order order, Terms terms, Instant preemptionDeadline) implements State {}

  public record Running(Order order, Terms terms, Instant startedAt, List<Checkpoint> checkpoints, String extensionRefused,
      Instant preemptionDeadline) implements State {
    Checkpoint last() {
      return checkpoints.isEmpty() ? null : checkpoints.get(checkpoints.size() - 1);
    }
  }

  /** Metering is over; the final settlement, the hold and the cards are being finished ("stopping"). */
  public record Ending(Order order, Terms terms, Instant startedAt, List<Checkpoint> checkpoints, String reason, Instant endAt,
      long billedSeconds) implements State {
    Checkpoint last() {
      return checkpoints.isEmpty() ? null : checkpoints.get(checkpoints.size() - 1);
    }
  }

  public record Finished(Order order, Terms terms, Instant startedAt, List<Checkpoint> checkpoints, String reason, Instant endAt,
      long billedSeconds, Instant closedAt) implements State {}

  // ---------------------------------------------------------------------------------------------

  private final String rentalId;
  private final Settings settings;
  private final Ports ports;
  private final Clock clock;
  private final ActorContext<Command> context;
  private final TimerScheduler<Command> timers;
  private final EngineMetrics metrics;
  // Actor-local: who waits for the first match answer, live subscribers, and what the accounts acknowledged.
  private ActorRef<StatusReply<View>> creator;
  private long launchStepStarted; // System.nanoTime() when the launch's current step began; 0 outside a launch
  private final Set<ActorRef<Update>> subscribers = new HashSet<>();
  private long capturedThrough = -1;
  private long creditedThrough = -1;
  private boolean extending;
  private boolean holdReleased;
  private boolean cardsReleased;
  private boolean workloadStopped;
  private long lastTick = -1;
  private boolean askingLiveness; // one liveness question at a time, however slow the host's node answers
  private int failedDeliveries; // in a row, since the last acknowledgement: each waits longer before it is retried
  // The last match answer was Matcher.Unavailable: the read side could not look, so the wait deadline waits for a real answer.
  private boolean readSideDown;
  // A launch refused because its first match could not look: told 503 once the rental closed (hold released).
  private ActorRef<StatusReply<View>> refusedCreator;

  public static void init(ActorSystem<?> system, Settings settings, Ports ports, Clock clock) {
    ClusterSharding.get(system).init(Entity.of(ENTITY_KEY, ctx -> create(ctx.getEntityId(), settings, ports, clock)));
  }

  public static Behavior<Command> create(String rentalId, Settings settings, Ports ports, Clock clock) {
    return Behaviors.setup(ctx -> Behaviors.withTimers(timers -> new Rental(rentalId, settings, ports, clock, ctx, timers)));
  }

  private Rental(String rentalId, Settings settings, Ports ports, Clock clock, ActorContext<Command> context,
      TimerScheduler<Command> timers) {
    super(PersistenceId.of(ENTITY_KEY.name(), rentalId),
        SupervisorStrategy.restartWithBackoff(Duration.ofMillis(200), Duration.ofSeconds(5), 0.1));
    this.rentalId = rentalId;
    this.settings = settings;
    this.ports = ports;
    this.clock = clock;
    this.context = context;
    this.timers = timers;
    this.metrics = EngineMetrics.get(context.getSystem());
  }

  @Override
  public State emptyState() {
    return Empty.INSTANCE;
  }

  @Override
  public Set<String> tagsFor(Event event) {
    return Set.of(tagFor(rentalId));
  }

  @Override
  public RetentionCriteria retentionCriteria() {
    return RetentionCriteria.snapshotEvery(100, 2);
  }

  @Override
  public SignalHandler<State> signalHandler() {
    return newSignalHandlerBuilder().onSignal(RecoveryCompleted.instance(), this::resume).build();
  }

  /** After a restart, pick up where the journal says we are; every step below is idempotent. */
  private void resume(State state) {
    if (state instanceof Pending p) {
      placeHold(p.order()); // then matching resumes
    } else if (state instanceof Provisioning p) {
      startWorkload(p.order(), p.terms());
      // What is left of the timeout since the match, not a fresh one: a node that keeps crashing must not
      // keep a rental provisioning forever. The agent gets at least one ask timeout to report a start.
      Duration left = Duration.between(now(), p.terms().matchedAt().plus(settings.provisioningTimeout()));
      timers.startSingleTimer(Timer.PROVISION_EXPIRED, Timer.PROVISION_EXPIRED,
          left.compareTo(settings.askTimeout()) < 0 ? settings.askTimeout() : left);
      if (p.preemptionDeadline() != null) preemptionDueAt(p.preemptionDeadline());
    } else if (state instanceof Running r) {
      if (r.last() != null) deliver(r.order(), r.terms(), r.last(), false);
      timers.startTimerAtFixedRate(Timer.TICK, Timer.TICK, Duration.ofSeconds(1));
    } else if (state instanceof Ending e) {
      finish(e);
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Commands

  @Override
  public CommandHandlerWithReply<Command, Event, State> commandHandler() {
    CommandHandlerWithReplyBuilderByState<Command, Event, Empty, State> empty = newCommandHandlerWithReplyBuilder().forStateType(Empty.class);
    empty.onCommand(Create.class, this::onCreate)
        .onCommand(Get.class, c -> Effect().reply(c.replyTo(), notFound()))
        .onCommand(Stop.class, c -> Effect().reply(c.replyTo(), notFound()))
        .onCommand(Subscribe.class, c -> Effect().reply(c.replyTo(), notFound()))
        .onAnyCommand(c -> Effect().noReply());

    CommandHandlerWithReplyBuilderByState<Command, Event, Pending, State> pending = newCommandHandlerWithReplyBuilder().forStateType(Pending.class);
    pending.onCommand(HoldAnswer.class, this::onHoldAnswer)
        .onCommand(MatchAnswer.class, this::onMatchAnswer)
        .onCommand(Timer.class, this::onPendingTimer)
        .onCommand(Stop.class, (s, c) -> owns(s.order(), c.renterId())
            ? end(s.order(), null, null, List.of(), CANCELLED, now(), 0, c.replyTo())
            : Effect().reply(c.replyTo(), notFound()));

    CommandHandlerWithReplyBuilderByState<Command, Event, Provisioning, State> provisioning =
        newCommandHandlerWithReplyBuilder().forStateType(Provisioning.class);
    provisioning.onCommand(WorkloadStarted.class, this::onStarted)
        .onCommand(WorkloadFailed.class, (s, c) -> fromHost(s.terms(), c.hostId())
            ? end(s.order(), s.terms(), null, List.of(), PROVISIONING_FAILED, now(), 0, null) : Effect().noReply())
        .onCommand(StartAnswer.class, this::onStartAnswer)
        .onCommand(HostLost.class, (s, c) -> fromHost(s.terms(), c.hostId())
            ? end(s.order(), s.terms(), null, List.of(), PROVISIONING_FAILED, now(), 0, null) : Effect().noReply())
        .onCommand(Preempt.class, this::onPreemptProvisioning)
        .onCommand(Timer.class, (s, t) -> t == Timer.PROVISION_EXPIRED
            ? end(s.order(), s.terms(), null, List.of(), PROVISIONING_FAILED, now(), 0, null)
            // The window closed before the workload started: nothing ran, nothing is charged.
            : t == Timer.PREEMPTION_DUE ? end(s.order(), s.terms(), null, List.of(), PREEMPTED, now(), 0, null)
            : retryStart(s, t))
        .onCommand(Stop.class, (s, c) -> owns(s.order(), c.renterId())
            ? end(s.order(), s.terms(), null, List.of(), STOPPED_BY_RENTER, now(), 0, c.replyTo())
            : Effect().reply(c.replyTo(), notFound()));

    CommandHandlerWithReplyBuilderByState<Command, Event, Running, State> running = newCommandHandlerWithReplyBuilder().forStateType(Running.class);
    running.onCommand(Timer.class, this::onRunningTimer)
        .onCommand(LivenessAnswer.class, this::onLiveness)
        .onCommand(Delivered.class, this::onDeliveredRunning)
        .onCommand(ExtendAnswer.class, this::onExtendAnswer)
        .onCommand(Stop.class, (s, c) -> owns(s.order(), c.renterId())
            ? endRunning(s, STOPPED_BY_RENTER, now(), c.replyTo())
            : Effect().reply(c.replyTo(), notFound()))
        .onCommand(HostLost.class, (s, c) -> fromHost(s.terms(), c.hostId())
            ? endRunning(s, HOST_LOST, c.lastHeartbeatAt(), null) : Effect().noReply())
        .onCommand(WorkloadStopped.class, this::onWorkloadStoppedRunning)
        .onCommand(WorkloadStarted.class, c -> Effect().noReply()) // a duplicate
        .onCommand(Preempt.class, this::onPreempt);

    CommandHandlerWithReplyBuilderByState<Command, Event, Ending, State> ending = newCommandHandlerWithReplyBuilder().forStateType(Ending.class);
    ending.onCommand(Delivered.class, this::onDeliveredEnding)
        .onCommand(Released.class, this::onReleased)
        .onCommand(WorkloadStopped.class, (s, c) -> {
          workloadStopped = true;
          return maybeClose(s);
        })
        .onCommand(Timer.class, (s, t) -> {
          if (t == Timer.STOP_EXPIRED) workloadStopped = true; // the agent is gone or silent; money does not wait for it
          if (t == Timer.REDELIVER) finish(s);
          return maybeClose(s);
        })
        .onCommand(Stop.class, (s, c) -> owns(s.order(), c.renterId())
            ? Effect().reply(c.replyTo(), StatusReply.success(view(s)))
            : Effect().reply(c.replyTo(), notFound()));

    // Commands every non-empty state answers the same way.
    CommandHandlerWithReplyBuilderByState<Command, Event, State, State> any = newCommandHandlerWithReplyBuilder().forStateType(State.class);
    any.onCommand(Get.class, (s, c) -> Effect().reply(c.replyTo(), visibleTo(s, c.renterId()) ? StatusReply.success(view(s)) : notFound()))
        .onCommand(Subscribe.class, this::onSubscribe)
        .onCommand(Unsubscribe.class, (s, c) -> {
          subscribers.remove(c.subscriber());
          return Effect().noReply();
        })
        .onCommand(Create.class, (s, c) -> Effect().reply(c.replyTo(), owns(s, c.renterId())
            ? StatusReply.success(view(s)) : reply(Rejection.ALREADY_EXISTS, "rental " + rentalId + " exists")))
        .onCommand(Stop.class, (s, c) -> Effect().reply(c.replyTo(), visibleTo(s, c.renterId()) ? StatusReply.success(view(s)) : notFound()))
        .onCommand(WorkloadStarted.class, this::onLateWorkloadMessage)
        .onCommand(WorkloadStopped.class, c -> Effect().noReply())
        .onCommand(WorkloadFailed.class, c -> Effect().noReply())
        .onCommand(Released.class, c -> Effect().noReply())
        .onCommand(MatchAnswer.class, this::onLateMatch)
        .onAnyCommand(c -> Effect().noReply());

    return empty.orElse(pending).orElse(provisioning).orElse(running).orElse(ending).orElse(any).build();
  }

  // ---- creation, hold and matching

  private ReplyEffect<Event, State> onCreate(Empty state, Create cmd) {
    // Recorded before the hold is asked for, so a crash between the two cannot leave a hold nobody releases.
    Order order = new Order(cmd.renterId(), cmd.spec(), initialHold(cmd.spec()), now());
    creator = cmd.replyTo();
    launchStepStarted = System.nanoTime();
    return Effect().persist(new Requested(order.renterId(), order.spec(), order.holdAmount(), order.createdAt()))
        .thenRun(s -> {
          launchStep(metrics.launchRecorded);
          placeHold(order);
        })
        .thenNoReply();
  }

  /** Idempotent: an open hold of at least this amount answers as it stands. */
  private void placeHold(Order order) {
    context.askWithStatus(Account.HoldView.class, ports.account(order.renterId()), settings.askTimeout(),
        reply -> new Account.PlaceHold(rentalId, order.holdAmount(), reply),
        (view, failure) -> new HoldAnswer(order.holdAmount(), failure == null ? null : codeOf(failure)));
  }

  /** Records the launch step that just ended and starts timing the next one. */
  private void launchStep(LatencyHistogram step) {
    if (launchStepStarted == 0) return;
    long now = System.nanoTime();
    step.recordMicros((now - launchStepStarted) / 1_000);
    launchStepStarted = now;
  }

  private ReplyEffect<Event, State> onHoldAnswer(Pending state, HoldAnswer answer) {
    if (answer.refusal() == null) {
      launchStep(metrics.launchHold);
      timers.startSingleTimer(Timer.WAIT_EXPIRED, Timer.WAIT_EXPIRED, remainingWait(state.order()));
      requestMatch(state.order());
      return Effect().noReply();
    }
    if (answer.refusal().equals(Rejection.UNAVAILABLE)) {
      timers.startSingleTimer(Timer.RETRY_HOLD, Timer.RETRY_HOLD, settings.retryInterval());
      return Effect().noReply();
    }
    ActorRef<StatusReply<View>> waiting = creator;
    creator = null;
    return Effect().persist(new Refused(answer.refusal(), now())).thenRun(s -> {
      if (waiting != null) waiting.tell(reply(answer.refusal(), refusalDetail(answer.refusal())));
    }).thenNoReply();
  }

  private long initialHold(Spec spec) {
    long hold = Metering.cost(spec.maxPricePerGpuHour(), spec.count(), settings.holdSeconds());
    if (spec.maxTotal() != null) hold = Math.min(hold, spec.maxTotal());
    return Math.max(hold, 1);
  }

  private void requestMatch(Order order) {
    Spec s = order.spec();
    // Past its wait only because the read side was down, the rental still takes a match: no deadline to drop it on.
    Instant deadline = readSideDown && !now().isBefore(waitEnds(order)) ? null : waitEnds(order);
    ports.matcher(s.gpu()).tell(new Matcher.Match(rentalId, s.gpu(), s.count(), s.tier(), s.region(), s.maxPricePerGpuHour(),
        deadline, context.messageAdapter(Matcher.Result.class, MatchAnswer::new)));
    // A matcher lost with its node never answers: ask again. A late duplicate answer releases its cards (onLateMatch).
    timers.startSingleTimer(Timer.RETRY_MATCH, Timer.RETRY_MATCH, settings.askTimeout().multipliedBy(2));
  }

  private ReplyEffect<Event, State> onMatchAnswer(Pending state, MatchAnswer answer) {
    launchStep(metrics.launchMatch);
    if (answer.result() instanceof Matcher.Matched m) {
      Host.Reservation r = m.reservation();
      Terms terms = new Terms(r.hostId(), r.providerId(), r.cards(), r.pricePerGpuHour(), r.simulated(), now(), r.region());
      timers.cancel(Timer.WAIT_EXPIRED);
      timers.cancel(Timer.RETRY_MATCH);
      return Effect().persist(new Matched(terms, now())).thenRun(s -> {
        launchStep(metrics.launchMatchedRecorded);
        launchStepStarted = 0;
        answerCreator(s);
        notifySubscribers(s);
        timers.startSingleTimer(Timer.PROVISION_EXPIRED, Timer.PROVISION_EXPIRED, settings.provisioningTimeout());
        startWorkload(state.order(), terms);
      }).thenNoReply();
    }
    if (answer.result() instanceof Matcher.Unavailable) return onReadSideDown(state);
    readSideDown = false;
    if (remainingWait(state.order()).isNegative() || remainingWait(state.order()).isZero()) {
      return end(state.order(), null, null, List.of(), NO_CAPACITY, now(), 0, null);
    }
    launchStepStarted = 0; // later attempts are not the launch's
    answerCreator(state);
    timers.startSingleTimer(Timer.RETRY_MATCH, Timer.RETRY_MATCH, settings.retryInterval());
    return Effect().noReply();
  }

  /**
   * The matcher could not read the candidates (PostgreSQL unreachable): no answer about capacity. A launch still
   * waiting for its first answer is refused (HTTP 503) rather than promised a wait on an outage; it ends
   * {@code cancelled}, nothing charged, and hears so only once closed, its hold released, so a retried POST never
   * finds a second hold beside it. A rental already waiting keeps waiting and asks again; while its last answer is
   * this one its wait deadline does not end it (WAIT_EXPIRED), and the first real answer decides.
   */
  private ReplyEffect<Event, State> onReadSideDown(Pending state) {
    launchStepStarted = 0;
    if (creator != null) {
      refusedCreator = creator;
      creator = null;
      return end(state.order(), null, null, List.of(), CANCELLED, now(), 0, null);
    }
    readSideDown = true;
    timers.startSingleTimer(Timer.RETRY_MATCH, Timer.RETRY_MATCH, settings.retryInterval());
    return Effect().noReply();
  }

  /** A match that lands after the rental stopped waiting for one (cancelled, no_capacity): the host gets its cards back. */
  private ReplyEffect<Event, State> onLateMatch(State state, MatchAnswer answer) {
    if (answer.result() instanceof Matcher.Matched m) {
      Terms terms = termsOf(state);
      String hostId = m.reservation().hostId();
      if (terms == null || !terms.hostId().equals(hostId)) {
        ports.host(hostId).tell(new Host.ReleaseCards(rentalId, context.getSystem().ignoreRef()));
      }
    }
    return Effect().noReply();
  }

  private ReplyEffect<Event, State> onPendingTimer(Pending state, Timer timer) {
    if (timer == Timer.RETRY_HOLD) {
      placeHold(state.order());
      return Effect().noReply();
    }
    if (timer == Timer.RETRY_MATCH) {
      requestMatch(state.order());
      return Effect().noReply();
    }
    // An outage is not no capacity: past the deadline, the next real "no candidates" ends it (onMatchAnswer).
    if (timer == Timer.WAIT_EXPIRED && !readSideDown) return end(state.order(), null, null, List.of(), NO_CAPACITY, now(), 0, null);
    return Effect().noReply();
  }

  private Duration remainingWait(Order order) {
    return Duration.between(now(), waitEnds(order));
  }

  private static Instant waitEnds(Order order) {
    return order.createdAt().plusSeconds(order.spec().waitSeconds());
  }

  // ---- provisioning

  /**
   * Until the agent reports the start, the request is sent again now and then: a {@code start_rental} handed to
   * a session on a node that was shutting down, or to an agent that was reconnecting, is otherwise lost. The
   * agent answers a duplicate with the same {@code rental_started}. Every ten retry intervals (10 s by default).
   */
  private Duration startResendInterval() {
    return settings.retryInterval().multipliedBy(10);
  }

  private void startWorkload(Order order, Terms terms) {
    if (!timers.isTimerActive(Timer.RESEND_START)) {
      timers.startTimerWithFixedDelay(Timer.RESEND_START, Timer.RESEND_START, startResendInterval());
    }
    Spec s = order.spec();
    context.askWithStatus(Done.class, ports.host(terms.hostId()), settings.askTimeout(),
        reply -> new Host.StartWorkload(rentalId, s.image(), s.command(), s.sshPublicKey(), s.network(), reply),
        (done, failure) -> new StartAnswer(failure == null ? null : codeOf(failure)));
  }

  private ReplyEffect<Event, State> onStartAnswer(Provisioning state, StartAnswer answer) {
    // The host is offline or busy reconnecting: try again until the provisioning timeout.
    if (answer.refusal() != null) timers.startSingleTimer(Timer.RETRY_MATCH, Timer.RETRY_MATCH, settings.retryInterval());
    return Effect().noReply();
  }

  private ReplyEffect<Event, State> retryStart(Provisioning state, Timer timer) {
    if (timer == Timer.RETRY_MATCH || timer == Timer.RESEND_START) startWorkload(state.order(), state.terms());
    return Effect().noReply();
  }

  private ReplyEffect<Event, State> onStarted(Provisioning state, WorkloadStarted cmd) {
    if (!fromHost(state.terms(), cmd.hostId())) return Effect().noReply();
    // Metering starts when this node hears the agent say so: an agent's clock cannot move the start earlier.
    Instant startedAt = now();
    timers.cancel(Timer.PROVISION_EXPIRED);
    timers.cancel(Timer.RETRY_MATCH);
    timers.cancel(Timer.RESEND_START);
    timers.cancel(Timer.PREEMPTION_DUE); // from now on the tick ends it at the deadline, billed until then
    return Effect().persist(new Started(startedAt, now())).thenRun(s -> {
      ports.host(state.terms().hostId()).tell(new Host.ConfirmCards(rentalId, context.getSystem().ignoreRef()));
      timers.startTimerAtFixedRate(Timer.TICK, Timer.TICK, Duration.ofSeconds(1));
      notifySubscribers(s);
    }).thenNoReply();
  }

  // ---- running: ticks, settlements, hold extension

  private ReplyEffect<Event, State> onRunningTimer(Running state, Timer timer) {
    if (timer != Timer.TICK) {
      if (timer == Timer.REDELIVER && state.last() != null) deliver(state.order(), state.terms(), state.last(), false);
      return Effect().noReply();
    }
    Instant now = now();
    long second = secondsBetween(state.startedAt(), now);
    long limit = limitSeconds(state);
    String limitReason = limitReason(state);
    if (state.preemptionDeadline() != null && !now.isBefore(state.preemptionDeadline())) {
      return endRunning(state, PREEMPTED, state.preemptionDeadline(), null);
    }
    if (second >= limit) return endRunning(state, limitReason, state.startedAt().plusSeconds(limit), null);
    publishTick(state, second);
    long settled = state.last() == null ? 0 : state.last().throughSecond();
    if (second - settled >= settings.settleInterval().toSeconds() && !askingLiveness) {
      // Settle only what the host is known to have run: up to its last heartbeat.
      askingLiveness = true;
      context.ask(Host.Liveness.class, ports.host(state.terms().hostId()), settings.askTimeout(), Host.GetLiveness::new,
          (liveness, failure) -> new LivenessAnswer(liveness));
    }
    return Effect().noReply();
  }

  private ReplyEffect<Event, State> onLiveness(Running state, LivenessAnswer answer) {
    askingLiveness = false;
    Instant now = now();
    Instant upTo = now;
    if (answer.liveness() != null && answer.liveness().lastHeartbeatAt() != null) upTo = min(now, answer.liveness().lastHeartbeatAt());
    // A spot rental is never billed past its preemption deadline, even when this answer arrives after it.
    if (state.preemptionDeadline() != null) upTo = min(upTo, state.preemptionDeadline());
    long covered = secondsBetween(state.startedAt(), upTo);
    // Never settle more than the hold covers: the capture would be refused while the provider is credited.
    long second = Math.min(covered, Math.min(limitSeconds(state), heldSeconds(state)));
    long settled = state.last() == null ? 0 : state.last().throughSecond();
    // Checkpoints are a settle-interval apart: the last heartbeat may lag the clock by a few seconds, and
    // settling whatever it covers would checkpoint more often than configured. Only a hold or cap that
    // stops the rental short of that settles less.
    boolean stoppedShort = second < covered;
    if (second <= settled || (second - settled < settings.settleInterval().toSeconds() && !stoppedShort)) {
      maybeExtend(state); // the hold may be what holds the settlement back
      return Effect().noReply();
    }
    Checkpoint checkpoint = checkpoint(state.terms(), second, now);
    return Effect().persist(new Settled(checkpoint, now)).thenRun(s -> {
      countSettlement(state.last(), checkpoint);
      Running r = (Running) s;
      deliver(r.order(), r.terms(), checkpoint, false);
      maybeExtend(r);
    }).thenNoReply();
  }

  /** Node metrics of a persisted settlement: its seconds and cost beyond the previous checkpoint. */
  private void countSettlement(Checkpoint previous, Checkpoint checkpoint) {
    metrics.settlements.increment();
    metrics.secondsMetered.add(checkpoint.throughSecond() - (previous == null ? 0 : previous.throughSecond()));
    metrics.microEurosMetered.add(checkpoint.cost() - (previous == null ? 0 : previous.cost()));
  }

  private Checkpoint checkpoint(Terms terms, long second, Instant at) {
    long cost = Metering.cost(terms.pricePerGpuHour(), terms.cards().size(), second);
    long provider = Metering.providerShare(cost, settings.feeBps());
    return new Checkpoint(second, cost, provider, cost - provider, at);
  }

  /** Renter capture and provider credit, same key ({@code rentalId:second}), cumulative; retried until acknowledged. */
  private void deliver(Order order, Terms terms, Checkpoint c, boolean last) {
    if (c.throughSecond() > capturedThrough) {
      context.askWithStatus(Account.Posting.class, ports.account(order.renterId()), settings.askTimeout(),
          reply -> new Account.Capture(rentalId, c.throughSecond(), c.cost(), reply),
          (posting, failure) -> new Delivered("capture", c.throughSecond(), failure == null ? null : codeOf(failure)));
    }
    if (c.throughSecond() > creditedThrough || last) {
      context.askWithStatus(Account.Posting.class, ports.account(terms.providerId()), settings.askTimeout(),
          reply -> new Account.CreditEarnings(rentalId, c.throughSecond(), c.provider(), c.platform(), last, reply),
          (posting, failure) -> new Delivered(last ? "final-credit" : "credit", c.throughSecond(), failure == null ? null : codeOf(failure)));
    }
  }

  private ReplyEffect<Event, State> onDeliveredRunning(Running state, Delivered d) {
    if (!record(d)) redeliverLater();
    return Effect().noReply();
  }

  private void redeliverLater() {
    timers.startSingleTimer(Timer.REDELIVER, Timer.REDELIVER,
        redeliveryDelay(settings.retryInterval(), failedDeliveries++, ThreadLocalRandom.current().nextInt(REDELIVERY_SPREAD_PERMILLE + 1)));
  }

  /** The spread of a redelivery's wait: 80 % to 120 % of its nominal value, in per mille. */
  static final int REDELIVERY_SPREAD_PERMILLE = 400;

  /**
   * The wait before a failed capture, credit or release is sent again: the retry interval, doubled with each failure
   * in a row up to eight times it, then spread over 80–120 % ({@code spreadPermille} in [0, 400]). Thousands of rentals
   * whose deliveries failed together (a slow account, a node lost) then neither retry in step nor keep a struggling
   * account busy with retries every second; the first retry still comes after about one interval.
   */
  static Duration redeliveryDelay(Duration retryInterval, int failuresInARow, int spreadPermille) {
    long factor = 1L << Math.min(Math.max(failuresInARow, 0), 3);
    return retryInterval.multipliedBy(factor * (800 + spreadPermille)).dividedBy(1_000);
  }

  /** Notes an acknowledgement; false when the delivery must be retried. */
  private boolean record(Delivered d) {
    if (d.refusal() != null && !d.refusal().equals(Rejection.IDEMPOTENCY_CONFLICT)) return false;
    failedDeliveries = 0;
    if (d.side().equals("capture")) capturedThrough = Math.max(capturedThrough, d.throughSecond());
    else creditedThrough = Math.max(creditedThrough, d.throughSecond());
    return true;
  }

  private void maybeExtend(Running state) {
    Checkpoint last = state.last();
    long spent = last == null ? 0 : last.cost();
    long window = Metering.cost(state.terms().pricePerGpuHour(), state.terms().cards().size(), settings.holdSeconds());
    if (extending || state.order().holdAmount() - spent >= window / 2) return;
    long target = spent + window;
    if (state.order().spec().maxTotal() != null) target = Math.min(target, state.order().spec().maxTotal());
    if (target <= state.order().holdAmount()) return;
    extending = true;
    long newAmount = target;
    context.askWithStatus(Account.HoldView.class, ports.account(state.order().renterId()), settings.askTimeout(),
        reply -> new Account.ExtendHold(rentalId, newAmount, reply),
        (view, failure) -> new ExtendAnswer(newAmount, failure == null ? null : codeOf(failure)));
  }

  private ReplyEffect<Event, State> onExtendAnswer(Running state, ExtendAnswer answer) {
    extending = false;
    if (answer.refusal() == null) return Effect().persist(new HoldExtended(answer.newAmount(), now())).thenNoReply();
    String reason = answer.refusal().equals(Rejection.SPEND_CAP_REACHED) ? SPEND_CAP_REACHED
        : answer.refusal().equals(Rejection.INSUFFICIENT_FUNDS) ? BALANCE_EXHAUSTED : null;
    if (reason == null || reason.equals(state.extensionRefused())) return Effect().noReply(); // transient: retried next settlement
    return Effect().persist(new ExtensionRefused(reason, now())).thenNoReply();
  }

  /** The last second this rental may run: what the hold covers, its own cap, and 10 years as a sanity bound. */
  private long limitSeconds(Running state) {
    int cards = state.terms().cards().size();
    long price = state.terms().pricePerGpuHour();
    long bound = 10L * 365 * 24 * 3600;
    long byCap = state.order().spec().maxTotal() == null ? bound
        : Metering.maxSecondsWithin(price, cards, state.order().spec().maxTotal(), bound);
    long byHold = state.extensionRefused() == null ? bound : Metering.maxSecondsWithin(price, cards, state.order().holdAmount(), bound);
    return Math.min(byCap, byHold);
  }

  /** The seconds the current hold pays for at the agreed price: no capture may go beyond them. */
  private static long heldSeconds(Running state) {
    return Metering.maxSecondsWithin(state.terms().pricePerGpuHour(), state.terms().cards().size(), state.order().holdAmount(),
        10L * 365 * 24 * 3600);
  }

  private String limitReason(Running state) {
    int cards = state.terms().cards().size();
    long price = state.terms().pricePerGpuHour();
    long bound = 10L * 365 * 24 * 3600;
    long byCap = state.order().spec().maxTotal() == null ? bound
        : Metering.maxSecondsWithin(price, cards, state.order().spec().maxTotal(), bound);
    long byHold = state.extensionRefused() == null ? bound : Metering.maxSecondsWithin(price, cards, state.order().holdAmount(), bound);
    return byCap <= byHold ? RENTAL_CAP_REACHED : state.extensionRefused();
  }

  /**
   * The workload stopped without being asked to. At a preemption deadline that is the agent keeping the
   * notice (it stops the workload itself, and its report may beat this rental's own tick): preempted.
   * Otherwise the host failed the rental: host_lost, billed to the stop.
   */
  private ReplyEffect<Event, State> onWorkloadStoppedRunning(Running state, WorkloadStopped cmd) {
    if (!fromHost(state.terms(), cmd.hostId())) return Effect().noReply();
    Instant stoppedAt = cmd.at() == null ? now() : min(cmd.at(), now());
    Instant deadline = state.preemptionDeadline();
    if (deadline != null && !stoppedAt.isBefore(deadline.minus(PREEMPTION_CLOCK_SLACK))) {
      return endRunning(state, PREEMPTED, min(stoppedAt, deadline), null);
    }
    return endRunning(state, HOST_LOST, stoppedAt, null);
  }

  /** How far an agent's clock may run ahead of this node's when it stops a workload at a preemption deadline. */
  private static final Duration PREEMPTION_CLOCK_SLACK = Duration.ofSeconds(5);

  private ReplyEffect<Event, State> onPreempt(Running state, Preempt cmd) {
    if (!acceptsNotice(state.order(), state.terms(), state.preemptionDeadline(), cmd)) return Effect().noReply();
    return Effect().persist(new PreemptionScheduled(cmd.deadline(), now()))
        .thenRun(s -> subscribers.forEach(sub -> sub.tell(new PreemptionNotice(cmd.deadline()))))
        .thenNoReply();
  }

  /**
   * A notice can come before the agent reports the start (the host checks its availability window on every
   * heartbeat, reservations included): it is kept for when the rental runs, and if the deadline passes first the
   * rental ends {@code preempted} without having been charged.
   */
  private ReplyEffect<Event, State> onPreemptProvisioning(Provisioning state, Preempt cmd) {
    if (!acceptsNotice(state.order(), state.terms(), state.preemptionDeadline(), cmd)) return Effect().noReply();
    return Effect().persist(new PreemptionScheduled(cmd.deadline(), now())).thenRun(s -> {
      preemptionDueAt(cmd.deadline());
      subscribers.forEach(sub -> sub.tell(new PreemptionNotice(cmd.deadline())));
    }).thenNoReply();
  }

  /** A spot rental takes a notice from its own host that brings its deadline forward; anything else changes nothing. */
  private static boolean acceptsNotice(Order order, Terms terms, Instant current, Preempt cmd) {
    if (!fromHost(terms, cmd.hostId()) || order.spec().tier() != Listing.Tier.SPOT) return false;
    return current == null || cmd.deadline().isBefore(current);
  }

  private void preemptionDueAt(Instant deadline) {
    Duration left = Duration.between(now(), deadline);
    timers.startSingleTimer(Timer.PREEMPTION_DUE, Timer.PREEMPTION_DUE, left.isNegative() ? Duration.ZERO : left);
  }

  // ---- ending

  private ReplyEffect<Event, State> endRunning(Running state, String reason, Instant endAt, ActorRef<StatusReply<View>> replyTo) {
    Instant end = max(state.startedAt(), endAt);
    long billed = Math.min(secondsBetween(state.startedAt(), end), Math.min(limitSeconds(state), heldSeconds(state)));
    long settled = state.last() == null ? 0 : state.last().throughSecond();
    billed = Math.max(billed, settled); // settled seconds were charged; cumulative totals never go down
    return end(state.order(), state.terms(), state.startedAt(), state.checkpoints(), reason, end, billed, replyTo);
  }

  private ReplyEffect<Event, State> end(Order order, Terms terms, Instant startedAt, List<Checkpoint> checkpoints, String reason,
      Instant endAt, long billedSeconds, ActorRef<StatusReply<View>> replyTo) {
    timers.cancel(Timer.TICK);
    timers.cancel(Timer.RETRY_MATCH);
    timers.cancel(Timer.RESEND_START);
    timers.cancel(Timer.WAIT_EXPIRED);
    timers.cancel(Timer.PROVISION_EXPIRED);
    List<Event> events = new ArrayList<>(2);
    long settled = checkpoints.isEmpty() ? 0 : checkpoints.get(checkpoints.size() - 1).throughSecond();
    Instant now = now();
    if (terms != null && billedSeconds > settled) events.add(new Settled(checkpoint(terms, billedSeconds, now), now));
    events.add(new Ended(reason, endAt, billedSeconds, now));
    Checkpoint previous = checkpoints.isEmpty() ? null : checkpoints.get(checkpoints.size() - 1);
    return Effect().persist(events).thenRun(s -> {
      if (events.get(0) instanceof Settled last) countSettlement(previous, last.checkpoint());
      if (terms != null) ports.host(terms.hostId()).tell(new Host.StopWorkload(rentalId));
      answerCreator(s);
      notifySubscribers(s);
      finish((Ending) s);
      if (replyTo != null) replyTo.tell(StatusReply.success(view(s)));
    }).thenNoReply();
  }

  /** Final settlement (with {@code last}), hold release and card release; each retried until acknowledged. */
  private void finish(Ending state) {
    if (state.last() != null) deliver(state.order(), state.terms(), state.last(), true);
    else creditedThrough = Math.max(creditedThrough, 0);
    releaseHoldOnceCaptured(state);
    if (state.terms() != null && !cardsReleased) {
      context.askWithStatus(Done.class, ports.host(state.terms().hostId()), settings.askTimeout(),
          reply -> new Host.ReleaseCards(rentalId, reply), (v, failure) -> new Released("cards", failure == null));
    }
    if (state.terms() == null || state.startedAt() == null) workloadStopped = true;
    else timers.startSingleTimer(Timer.STOP_EXPIRED, Timer.STOP_EXPIRED, settings.stopTimeout());
  }

  /**
   * The rest of the hold goes back only once the final capture landed: a released hold refuses every later
   * capture, so a lost final capture would never be charged. A hold the account never placed (the rental was
   * cancelled before it answered) has nothing to release.
   */
  private void releaseHoldOnceCaptured(Ending state) {
    if (holdReleased || (state.last() != null && capturedThrough < state.last().throughSecond())) return;
    context.askWithStatus(Account.HoldView.class, ports.account(state.order().renterId()), settings.askTimeout(),
        reply -> new Account.ReleaseHold(rentalId, reply),
        (v, failure) -> new Released("hold", failure == null || Rejection.HOLD_NOT_FOUND.equals(codeOf(failure))));
  }

  private ReplyEffect<Event, State> onDeliveredEnding(Ending state, Delivered d) {
    if (!record(d)) {
      redeliverLater();
      return Effect().noReply();
    }
    if (d.side().equals("final-credit")) finalCredited = true;
    if (d.side().equals("capture")) releaseHoldOnceCaptured(state);
    return maybeClose(state);
  }

  private boolean finalCredited;

  private ReplyEffect<Event, State> onReleased(Ending state, Released r) {
    if (!r.ok()) {
      redeliverLater();
      return Effect().noReply();
    }
    failedDeliveries = 0;
    if (r.what().equals("hold")) holdReleased = true;
    else cardsReleased = true;
    return maybeClose(state);
  }

  private ReplyEffect<Event, State> maybeClose(Ending state) {
    long through = state.last() == null ? 0 : state.last().throughSecond();
    boolean money = state.last() == null || (capturedThrough >= through && finalCredited);
    boolean cards = state.terms() == null || cardsReleased;
    if (!(money && holdReleased && cards && workloadStopped)) return Effect().noReply();
    timers.cancel(Timer.STOP_EXPIRED);
    timers.cancel(Timer.REDELIVER);
    return Effect().persist(new Closed(now())).thenRun(s -> {
      notifySubscribers(s);
      subscribers.clear();
      forgetInAccounts(state);
      if (refusedCreator != null) {
        refusedCreator.tell(reply(Rejection.UNAVAILABLE,
            "the market could not be read (the database is unavailable); nothing was charged and the hold is released; retry later"));
        refusedCreator = null;
      }
    }).thenNoReply();
  }

  /**
   * Closed: every posting of this rental is acknowledged and it sends no more, so the accounts may drop the closed
   * hold and source they keep for its duplicates. Told once; if that is lost, the accounts just keep them.
   */
  private void forgetInAccounts(Ending state) {
    ActorRef<Done> ignore = context.getSystem().ignoreRef();
    ports.account(state.order().renterId()).tell(new Account.ForgetClosed(rentalId, ignore));
    if (state.terms() != null && !state.terms().providerId().equals(state.order().renterId())) {
      ports.account(state.terms().providerId()).tell(new Account.ForgetClosed(rentalId, ignore));
    }
  }

  private ReplyEffect<Event, State> onLateWorkloadMessage(State state, WorkloadStarted cmd) {
    // A workload that starts after its rental ended (e.g. provisioning timed out) is stopped again.
    if (state instanceof Finished f && f.terms() != null && f.terms().hostId().equals(cmd.hostId())) {
      ports.host(cmd.hostId()).tell(new Host.StopWorkload(rentalId));
    }
    return Effect().noReply();
  }

  // ---- views and subscribers

  private ReplyEffect<Event, State> onSubscribe(State state, Subscribe cmd) {
    if (!visibleTo(state, cmd.renterId())) return Effect().reply(cmd.replyTo(), notFound());
    if (!(state instanceof Finished)) {
      subscribers.add(cmd.subscriber());
      context.watchWith(cmd.subscriber(), new Unsubscribe(cmd.subscriber()));
    }
    return Effect().reply(cmd.replyTo(), StatusReply.success(view(state)));
  }

  private void notifySubscribers(State state) {
    if (subscribers.isEmpty()) return;
    View v = view(state);
    subscribers.forEach(s -> s.tell(new StatusChanged(v)));
  }

  private void publishTick(Running state, long second) {
    if (second == lastTick) return;
    lastTick = second;
    if (subscribers.isEmpty()) return;
    long cost = Metering.cost(state.terms().pricePerGpuHour(), state.terms().cards().size(), second);
    subscribers.forEach(s -> s.tell(new Tick(second, cost)));
  }

  private void answerCreator(State state) {
    if (creator == null) return;
    creator.tell(StatusReply.success(view(state)));
    creator = null;
  }

  private static boolean owns(Order order, String renterId) {
    return renterId == null || order.renterId().equals(renterId);
  }

  private static boolean owns(State state, String renterId) {
    Order order = orderOf(state);
    return order != null && owns(order, renterId);
  }

  private static boolean visibleTo(State state, String renterId) {
    return orderOf(state) != null && owns(state, renterId);
  }

  private static boolean fromHost(Terms terms, String hostId) {
    return terms != null && terms.hostId().equals(hostId);
  }

  static Terms termsOf(State state) {
    if (state instanceof Provisioning p) return p.terms();
    if (state instanceof Running r) return r.terms();
    if (state instanceof Ending e) return e.terms();
    if (state instanceof Finished f) return f.terms();
    return null;
  }

  static Order orderOf(State state) {
    if (state instanceof Pending p) return p.order();
    if (state instanceof Provisioning p) return p.order();
    if (state instanceof Running r) return r.order();
    if (state instanceof Ending e) return e.order();
    if (state instanceof Finished f) return f.order();
    if (state instanceof RefusedRental r) return r.order();
    return null;
  }

  public View view(State state) {
    Instant now = now();
    if (state instanceof Pending p) return view(p.order(), "pending", null, null, null, null, 0, null, List.of());
    if (state instanceof Provisioning p) {
      return view(p.order(), "provisioning", p.terms(), null, null, null, 0, p.preemptionDeadline(), List.of());
    }
    if (state instanceof Running r) {
      long second = Math.min(secondsBetween(r.startedAt(), now), limitSeconds(r));
      return view(r.order(), "running", r.terms(), r.startedAt(), null, null, second, r.preemptionDeadline(), r.checkpoints());
    }
    if (state instanceof Ending e) {
      return view(e.order(), "stopping", e.terms(), e.startedAt(), e.endAt(), e.reason(), e.billedSeconds(), null, e.checkpoints());
    }
    if (state instanceof Finished f) {
      return view(f.order(), "ended", f.terms(), f.startedAt(), f.endAt(), f.reason(), f.billedSeconds(), null, f.checkpoints());
    }
    if (state instanceof RefusedRental r) return view(r.order(), "refused", null, null, r.order().createdAt(), CANCELLED, 0, null, List.of());
    return new View(rentalId, null, "unknown", null, null, null, null, null, null, 0, 0, null, List.of());
  }

  private View view(Order order, String status, Terms terms, Instant startedAt, Instant endedAt, String reason, long billed,
      Instant preemption, List<Checkpoint> checkpoints) {
    long cost = terms == null ? 0 : Metering.cost(terms.pricePerGpuHour(), terms.cards().size(), billed);
    return new View(rentalId, order.renterId(), status, order.spec(), terms, order.createdAt(), startedAt, endedAt, reason, billed,
        cost, preemption, checkpoints);
  }

  // ---------------------------------------------------------------------------------------------
  // Events → state (no side effects)

  @Override
  public EventHandler<State, Event> eventHandler() {
    var b = newEventHandlerBuilder();
    b.forStateType(Empty.class)
        .onEvent(Requested.class, (s, e) -> new Pending(new Order(e.renterId(), e.spec(), e.holdAmount(), e.at())));
    b.forStateType(Pending.class)
        .onEvent(Refused.class, (s, e) -> new RefusedRental(s.order(), e.code()))
        .onEvent(Matched.class, (s, e) -> new Provisioning(s.order(), e.terms(), null))
        .onEvent(Ended.class, (s, e) -> new Ending(s.order(), null, null, List.of(), e.reason(), e.endAt(), 0));
    b.forStateType(Provisioning.class)
        .onEvent(Started.class, (s, e) -> new Running(s.order(), s.terms(), e.startedAt(), List.of(), null, s.preemptionDeadline()))
        .onEvent(PreemptionScheduled.class, (s, e) -> new Provisioning(s.order(), s.terms(), e.deadline()))
        .onEvent(Ended.class, (s, e) -> new Ending(s.order(), s.terms(), null, List.of(), e.reason(), e.endAt(), 0));
    b.forStateType(Running.class)
        .onEvent(Settled.class, (s, e) -> new Running(s.order(), s.terms(), s.startedAt(), append(s.checkpoints(), e.checkpoint()),
            s.extensionRefused(), s.preemptionDeadline()))
        .onEvent(HoldExtended.class, (s, e) -> new Running(withHold(s.order(), e.holdAmount()), s.terms(), s.startedAt(), s.checkpoints(),
            null, s.preemptionDeadline()))
        .onEvent(ExtensionRefused.class, (s, e) -> new Running(s.order(), s.terms(), s.startedAt(), s.checkpoints(), e.reason(),
            s.preemptionDeadline()))
        .onEvent(PreemptionScheduled.class, (s, e) -> new Running(s.order(), s.terms(), s.startedAt(), s.checkpoints(),
            s.extensionRefused(), e.deadline()))
        .onEvent(Ended.class, (s, e) -> new Ending(s.order(), s.terms(), s.startedAt(), s.checkpoints(), e.reason(), e.endAt(),
            e.billedSeconds()));
    b.forStateType(Ending.class)
        .onEvent(Settled.class, (s, e) -> new Ending(s.order(), s.terms(), s.startedAt(), append(s.checkpoints(), e.checkpoint()),
            s.reason(), s.endAt(), s.billedSeconds()))
        .onEvent(Closed.class, (s, e) -> new Finished(s.order(), s.terms(), s.startedAt(), s.checkpoints(), s.reason(), s.endAt(),
            s.billedSeconds(), e.at()));
    return b.build();
  }

  private static Order withHold(Order order, long holdAmount) {
    return new Order(order.renterId(), order.spec(), holdAmount, order.createdAt());
  }

  /**
   * The state keeps the latest {@value #CHECKPOINTS_KEPT} checkpoints: a month-long rental settles ~260 000
   * times, and state (and its snapshots) must not grow with its age. Nothing is lost: every checkpoint is
   * in the journal, and each second's charge follows from the frozen price (cumulative metering).
   */
  static final int CHECKPOINTS_KEPT = 100;

  static List<Checkpoint> append(List<Checkpoint> list, Checkpoint c) {
    int from = list.size() >= CHECKPOINTS_KEPT ? list.size() - CHECKPOINTS_KEPT + 1 : 0;
    List<Checkpoint> copy = new ArrayList<>(list.size() - from + 1);
    copy.addAll(list.subList(from, list.size()));
    copy.add(c);
    return List.copyOf(copy);
  }

  // ---------------------------------------------------------------------------------------------

  private Instant now() {
    return clock.instant();
  }

  static long secondsBetween(Instant from, Instant to) {
    return Math.max(0, Duration.between(from, to).getSeconds());
  }

  private static Instant min(Instant a, Instant b) {
    return a.isBefore(b) ? a : b;
  }

  private static Instant max(Instant a, Instant b) {
    return a.isAfter(b) ? a : b;
  }

  private <T> StatusReply<T> notFound() {
    return reply(Rejection.NOT_FOUND, "no rental " + rentalId);
  }

  private static String codeOf(Throwable failure) {
    if (failure instanceof StatusReply.ErrorMessage e) return Rejection.codeOf(e.getMessage());
    return Rejection.UNAVAILABLE;
  }

  private static String refusalDetail(String code) {
    return switch (code) {
      case Rejection.INSUFFICIENT_FUNDS -> "the available balance does not cover the first hold";
      case Rejection.SPEND_CAP_REACHED -> "the first hold would exceed the monthly spend cap";
      case Rejection.NOT_FOUND -> "no such account";
      default -> "the first hold could not be placed (" + code + ")";
    };
  }
}
