package dev.tickmark.engine.payout;

import static dev.tickmark.engine.Rejection.reply;

import com.typesafe.config.Config;
import dev.tickmark.engine.CborSerializable;
import dev.tickmark.engine.JournalFailures;
import dev.tickmark.engine.Rejection;
import dev.tickmark.engine.account.Account;
import dev.tickmark.engine.account.PayoutReturns;
import dev.tickmark.engine.money.Money;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.Deque;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletionStage;
import java.util.stream.IntStream;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.Behavior;
import org.apache.pekko.actor.typed.RecipientRef;
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
 * One operator payout run: pays every provider owed at least a minimum, exactly once in effect.
 *
 * <p>It works in two recorded steps. <b>Deciding</b>: the read side names the providers that may be
 * owed the minimum, and each one's {@link Account} (the authority) is asked for its earnings,
 * payout details and suspension; the run then records its decision ({@link Decided}) — who is paid
 * how much, who is skipped and why — before any money moves. A crash before that record just
 * decides again. <b>Paying</b>: each decided payout is sent to its account as {@link
 * Account.Payout} under the deterministic id {@code <run id>:<account id>} until the account
 * acknowledges it; the account pays exactly the decided amount once and answers a repeat as a
 * duplicate, so a crash, a lost answer or a second delivery pays nothing twice. An account that
 * refuses (its earnings no longer cover the amount, or it was suspended meanwhile) is recorded as
 * refused, and the run completes when every payout is paid or refused.
 *
 * <p>Only whole cents are paid (banks move cents): the rest of a provider's earnings stays owed.
 *
 * <p>A payout the bank sends back (a closed account, a wrong name) is recorded on the run, days
 * later, with {@link ReturnPayment}: the run has the account take it back ({@link
 * Account.ReturnPayout}, once per payout id), then records it; the payout shows as {@code
 * returned}. Each step is idempotent, so an operator's retry after any failure completes it.
 */
public final class PayoutRun
    extends EventSourcedBehaviorWithEnforcedReplies<
        PayoutRun.Command, PayoutRun.Event, PayoutRun.State> {

  public static final EntityTypeKey<Command> ENTITY_KEY =
      EntityTypeKey.create(Command.class, "PayoutRun");

  /** Runs are rare: one slice is plenty. Changing it needs an offset migration. */
  public static final int TAG_SLICES = 1;

  public static final String TAG_PREFIX = "payout-run-";

  /** µ€ in one euro cent. */
  public static final long CENT = 10_000;

  // Why a provider is not paid (skipped at decision) or a payout did not happen (refused by the
  // account).
  public static final String NO_PAYOUT_DETAILS = "no_payout_details";

  /**
   * The bank returned the last payout sent to the details in force: nothing goes there again until
   * the provider gives details again.
   */
  public static final String PAYOUT_RETURNED = "payout_returned";

  public static String tagFor(String runId) {
    return TAG_PREFIX + Math.floorMod(runId.hashCode(), TAG_SLICES);
  }

  public static List<String> allTags() {
    return IntStream.range(0, TAG_SLICES).mapToObj(i -> TAG_PREFIX + i).toList();
  }

  /** The payout id a run uses for one account; the account deduplicates on it. */
  public static String payoutId(String runId, String accountId) {
    return runId + ":" + accountId;
  }

  /** Whole cents of {@code amount}: what a bank transfer can carry. */
  public static long wholeCents(long amount) {
    return amount - Math.floorMod(amount, CENT);
  }

  /** How a run reaches the rest of the system; the node wires the read side and sharding in. */
  public interface Ports {
    /**
     * Provider accounts whose earnings, as the read side last saw them, are at least {@code
     * minimum}.
     */
    CompletionStage<List<String>> providersOwed(long minimum);

    RecipientRef<Account.Command> account(String accountId);
  }

  /**
   * {@code parallelism}: accounts asked at once, so a run over many providers does not flood the
   * cluster.
   */
  public record Settings(Duration askTimeout, Duration retryInterval, int parallelism) {
    /**
     * From the node's config: {@code tickmark.payouts.retry-interval}, {@code .parallelism} and
     * {@code tickmark.http.ask-timeout}.
     */
    public static Settings fromConfig(Config config) {
      Config payouts = config.getConfig("tickmark.payouts");
      return new Settings(
          config.getDuration("tickmark.http.ask-timeout"),
          payouts.getDuration("retry-interval"),
          payouts.getInt("parallelism"));
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Protocol

  public interface Command extends CborSerializable {}

  /**
   * Starts the run, or joins it: the reply comes when the run has completed. Starting an existing
   * run with the same minimum is a retry; with another minimum it is an {@code
   * idempotency_conflict}.
   */
  public record Start(long minimum, ActorRef<StatusReply<RunView>> replyTo) implements Command {}

  public record Get(ActorRef<StatusReply<RunView>> replyTo) implements Command {}

  /**
   * The bank returned the payout to {@code accountId} with ISO 20022 reason code {@code reason}. A
   * repeat with the same reason answers the run as it is; another reason is an {@code
   * idempotency_conflict}.
   */
  public record ReturnPayment(
      String accountId, String reason, ActorRef<StatusReply<RunView>> replyTo) implements Command {}

  /** The account's answer to a return: {@code failure == null} when it took the payout back. */
  private record ReturnAnswered(ReturnPayment request, Rejection refusal, String detail)
      implements Command {}

  /** Brings an unfinished run back after its node was lost: recovery resumes it. */
  public enum Wake implements Command {
    INSTANCE
  }

  private record CandidatesFound(List<String> accountIds) implements Command {}

  private record CandidatesFailed(String reason) implements Command {}

  /** {@code summary == null}: the account did not answer in time; it is asked again. */
  private record Quoted(String accountId, Account.Summary summary) implements Command {}

  /**
   * {@code refusal == null}: paid (or paid before). {@link Rejection#UNAVAILABLE}: no answer; sent
   * again.
   */
  private record PayoutAnswered(String accountId, Rejection refusal) implements Command {}

  private enum Timer implements Command {
    RETRY
  }

  /**
   * A decided payout, with the payee as the account knew it then, so the run's export never
   * changes.
   */
  public record Payment(String accountId, String payoutId, long amount, Account.PayoutDetails payee)
      implements CborSerializable {}

  /** A provider owed the minimum but not paid in this run. */
  public record Skip(String accountId, long amount, String reason) implements CborSerializable {}

  /** A payout's outcome: {@code reason == null} for paid. */
  public record Outcome(boolean paid, String reason, Instant at) implements CborSerializable {}

  /** A paid payout the bank sent back, with the bank's reason code. */
  public record Returned(String reason, Instant at) implements CborSerializable {}

  /**
   * {@code status}: {@code pending}, {@code paid}, {@code refused} or {@code returned} (paid, then
   * sent back by the bank); {@code reason}: why refused, or the bank's return reason code.
   */
  public record PaymentView(
      String accountId,
      String payoutId,
      long amount,
      String status,
      String reason,
      Account.PayoutDetails payee,
      Instant returnedAt)
      implements CborSerializable {}

  /**
   * What an operator sees of a run. {@code total}/{@code count}: payouts not refused (all paid once
   * completed; returned ones included: they were sent); {@code returned}: what the bank sent back.
   */
  public record RunView(
      String id,
      String status,
      long minimum,
      Instant createdAt,
      Instant decidedAt,
      Instant completedAt,
      long total,
      int count,
      List<PaymentView> payouts,
      List<Skip> skipped,
      long returned)
      implements CborSerializable {}

  // ---------------------------------------------------------------------------------------------
  // Events

  public interface Event extends CborSerializable {
    Instant at();
  }

  public record Started(long minimum, Instant at) implements Event {}

  public record Decided(List<Payment> payments, List<Skip> skipped, Instant at) implements Event {}

  public record PaymentConfirmed(String accountId, long amount, Instant at) implements Event {}

  public record PaymentRefused(String accountId, long amount, String reason, Instant at)
      implements Event {}

  public record Completed(Instant at) implements Event {}

  /** The bank returned the payout to {@code accountId}; its account has taken it back. */
  public record PaymentReturned(String accountId, long amount, String reason, Instant at)
      implements Event {}

  // ---------------------------------------------------------------------------------------------
  // State

  public interface State extends CborSerializable {}

  public enum Empty implements State {
    INSTANCE
  }

  public record Deciding(long minimum, Instant createdAt) implements State {}

  /**
   * The decision and what the accounts answered so far, by account id; {@code returns}: the paid
   * payouts the bank sent back, by account id (absent in snapshots written before returns).
   */
  public record Run(
      long minimum,
      Instant createdAt,
      Instant decidedAt,
      List<Payment> payments,
      List<Skip> skipped,
      Map<String, Outcome> outcomes,
      Map<String, Returned> returns)
      implements CborSerializable {

    @com.fasterxml.jackson.annotation.JsonCreator
    public Run {
      if (returns == null) returns = Map.of();
    }

    public Run(
        long minimum,
        Instant createdAt,
        Instant decidedAt,
        List<Payment> payments,
        List<Skip> skipped,
        Map<String, Outcome> outcomes) {
      this(minimum, createdAt, decidedAt, payments, skipped, outcomes, Map.of());
    }

    Run withOutcome(String accountId, Outcome outcome) {
      Map<String, Outcome> copy = new HashMap<>(outcomes);
      copy.put(accountId, outcome);
      return new Run(minimum, createdAt, decidedAt, payments, skipped, Map.copyOf(copy), returns);
    }

    Run withReturn(String accountId, Returned returned) {
      Map<String, Returned> copy = new HashMap<>(returns);
      copy.put(accountId, returned);
      return new Run(minimum, createdAt, decidedAt, payments, skipped, outcomes, Map.copyOf(copy));
    }

    Payment payment(String accountId) {
      return payments.stream()
          .filter(p -> p.accountId().equals(accountId))
          .findFirst()
          .orElseThrow();
    }

    /** The payment to {@code accountId}, or null when the run pays that account nothing. */
    Payment paymentOrNull(String accountId) {
      return payments.stream()
          .filter(p -> p.accountId().equals(accountId))
          .findFirst()
          .orElse(null);
    }

    boolean resolved(String accountId) {
      return outcomes.containsKey(accountId);
    }

    /** Whether {@code accountId}'s outcome is the last one missing. */
    boolean lastOpen(String accountId) {
      return !resolved(accountId) && outcomes.size() == payments.size() - 1;
    }

    RunView view(String id, String status, Instant completedAt) {
      List<PaymentView> views =
          payments.stream()
              .map(
                  p -> {
                    Outcome o = outcomes.get(p.accountId());
                    Returned r = returns.get(p.accountId());
                    if (r != null)
                      return new PaymentView(
                          p.accountId(),
                          p.payoutId(),
                          p.amount(),
                          "returned",
                          r.reason(),
                          p.payee(),
                          r.at());
                    String s = o == null ? "pending" : o.paid() ? "paid" : "refused";
                    return new PaymentView(
                        p.accountId(),
                        p.payoutId(),
                        p.amount(),
                        s,
                        o == null ? null : o.reason(),
                        p.payee(),
                        null);
                  })
              .toList();
      List<PaymentView> counted =
          views.stream().filter(v -> !v.status().equals("refused")).toList();
      long total = counted.stream().mapToLong(PaymentView::amount).sum();
      long returned =
          views.stream()
              .filter(v -> v.status().equals("returned"))
              .mapToLong(PaymentView::amount)
              .sum();
      return new RunView(
          id,
          status,
          minimum,
          createdAt,
          decidedAt,
          completedAt,
          total,
          counted.size(),
          views,
          skipped,
          returned);
    }
  }

  public record Paying(Run run) implements State {}

  public record Done(Run run, Instant completedAt) implements State {}

  // ---------------------------------------------------------------------------------------------

  private final String runId;
  private final Settings settings;
  private final Ports ports;
  private final Clock clock;
  private final ActorContext<Command> context;
  private final TimerScheduler<Command> timers;
  // Actor-local: who waits for the run to complete, and the asks in flight. Lost on a crash,
  // rebuilt on recovery.
  private final List<ActorRef<StatusReply<RunView>>> waiting = new ArrayList<>();
  private final Deque<String> toQuote = new ArrayDeque<>();
  private final Map<String, Account.Summary> quotes = new HashMap<>();
  private final Set<String> inFlight = new HashSet<>();
  private boolean candidatesKnown;

  public static void init(ActorSystem<?> system, Settings settings, Ports ports, Clock clock) {
    ClusterSharding.get(system)
        .init(Entity.of(ENTITY_KEY, ctx -> create(ctx.getEntityId(), settings, ports, clock)));
  }

  public static Behavior<Command> create(
      String runId, Settings settings, Ports ports, Clock clock) {
    return Behaviors.setup(
        ctx ->
            Behaviors.withTimers(
                timers -> new PayoutRun(runId, settings, ports, clock, ctx, timers)));
  }

  private PayoutRun(
      String runId,
      Settings settings,
      Ports ports,
      Clock clock,
      ActorContext<Command> context,
      TimerScheduler<Command> timers) {
    super(PersistenceId.of(ENTITY_KEY.name(), runId), JournalFailures.RESTART_WITH_BACKOFF);
    this.runId = runId;
    this.settings = settings;
    this.ports = ports;
    this.clock = clock;
    this.context = context;
    this.timers = timers;
  }

  @Override
  public State emptyState() {
    return Empty.INSTANCE;
  }

  @Override
  public Set<String> tagsFor(Event event) {
    return Set.of(tagFor(runId));
  }

  @Override
  public RetentionCriteria retentionCriteria() {
    // Money-bearing: events are never deleted; snapshots only bound recovery of very large runs.
    return RetentionCriteria.snapshotEvery(1000, 2);
  }

  @Override
  public SignalHandler<State> signalHandler() {
    return newSignalHandlerBuilder().onSignal(RecoveryCompleted.instance(), this::resume).build();
  }

  /**
   * After a restart, pick up where the journal says we are; deciding again and paying again are
   * both safe.
   */
  private void resume(State state) {
    if (state instanceof Deciding d) findCandidates(d.minimum());
    else if (state instanceof Paying p) pay(p.run());
  }

  // ---------------------------------------------------------------------------------------------
  // Commands

  @Override
  public CommandHandlerWithReply<Command, Event, State> commandHandler() {
    CommandHandlerWithReplyBuilderByState<Command, Event, Empty, State> empty =
        newCommandHandlerWithReplyBuilder().forStateType(Empty.class);
    empty
        .onCommand(Start.class, this::onStart)
        .onCommand(
            Get.class,
            c -> Effect().reply(c.replyTo(), reply(Rejection.NOT_FOUND, "no payout run " + runId)))
        .onCommand(
            ReturnPayment.class,
            c -> Effect().reply(c.replyTo(), reply(Rejection.NOT_FOUND, "no payout run " + runId)))
        .onAnyCommand(c -> Effect().noReply());

    CommandHandlerWithReplyBuilderByState<Command, Event, Deciding, State> deciding =
        newCommandHandlerWithReplyBuilder().forStateType(Deciding.class);
    deciding
        .onCommand(Start.class, (s, c) -> join(s.minimum(), c))
        .onCommand(Get.class, (s, c) -> Effect().reply(c.replyTo(), StatusReply.success(view(s))))
        .onCommand(CandidatesFound.class, this::onCandidatesFound)
        .onCommand(CandidatesFailed.class, (s, c) -> retryLater())
        .onCommand(Quoted.class, this::onQuoted)
        .onCommand(Timer.class, this::onDecidingRetry)
        .onCommand(
            ReturnPayment.class,
            (s, c) ->
                Effect()
                    .reply(
                        c.replyTo(),
                        reply(
                            Rejection.PAYOUT_NOT_PAID,
                            "payout run " + runId + " has not paid anything yet")))
        .onAnyCommand(c -> Effect().noReply());

    CommandHandlerWithReplyBuilderByState<Command, Event, Paying, State> paying =
        newCommandHandlerWithReplyBuilder().forStateType(Paying.class);
    paying
        .onCommand(Start.class, (s, c) -> join(s.run().minimum(), c))
        .onCommand(Get.class, (s, c) -> Effect().reply(c.replyTo(), StatusReply.success(view(s))))
        .onCommand(PayoutAnswered.class, this::onPayoutAnswered)
        .onCommand(ReturnPayment.class, (s, c) -> onReturnPayment(s, s.run(), c))
        .onCommand(ReturnAnswered.class, (s, c) -> onReturnAnswered(s, s.run(), c))
        .onCommand(
            Timer.class,
            (s, c) -> {
              pay(s.run());
              return Effect().noReply();
            })
        .onAnyCommand(c -> Effect().noReply());

    CommandHandlerWithReplyBuilderByState<Command, Event, Done, State> done =
        newCommandHandlerWithReplyBuilder().forStateType(Done.class);
    done.onCommand(
            Start.class,
            (s, c) ->
                s.run().minimum() == c.minimum()
                    ? Effect().reply(c.replyTo(), StatusReply.success(view(s)))
                    : Effect().reply(c.replyTo(), conflict(s.run().minimum())))
        .onCommand(Get.class, (s, c) -> Effect().reply(c.replyTo(), StatusReply.success(view(s))))
        .onCommand(ReturnPayment.class, (s, c) -> onReturnPayment(s, s.run(), c))
        .onCommand(ReturnAnswered.class, (s, c) -> onReturnAnswered(s, s.run(), c))
        .onAnyCommand(c -> Effect().noReply()); // late answers of a completed run change nothing

    return empty.orElse(deciding).orElse(paying).orElse(done).build();
  }

  private ReplyEffect<Event, State> onStart(Empty state, Start cmd) {
    if (cmd.minimum() <= 0 || cmd.minimum() > Money.MAX_AMOUNT) {
      return Effect()
          .reply(
              cmd.replyTo(), reply(Rejection.INVALID_AMOUNT, "the minimum must be more than zero"));
    }
    waiting.add(cmd.replyTo());
    return Effect()
        .persist(new Started(cmd.minimum(), now()))
        .thenRun(s -> findCandidates(cmd.minimum()))
        .thenNoReply();
  }

  /** A repeated start (a client's retry) waits for the same run; it never starts a second one. */
  private ReplyEffect<Event, State> join(long minimum, Start cmd) {
    if (minimum != cmd.minimum()) return Effect().reply(cmd.replyTo(), conflict(minimum));
    waiting.add(cmd.replyTo());
    return Effect().noReply();
  }

  // ---- deciding

  private void findCandidates(long minimum) {
    candidatesKnown = false;
    toQuote.clear();
    quotes.clear();
    inFlight.clear();
    context.pipeToSelf(
        ports.providersOwed(minimum),
        (ids, failure) ->
            failure == null
                ? new CandidatesFound(ids)
                : new CandidatesFailed(String.valueOf(failure.getMessage())));
  }

  private ReplyEffect<Event, State> onCandidatesFound(Deciding state, CandidatesFound found) {
    if (candidatesKnown) return Effect().noReply();
    candidatesKnown = true;
    found.accountIds().stream().distinct().sorted().forEach(toQuote::add);
    return decideWhenQuoted(state);
  }

  private ReplyEffect<Event, State> onQuoted(Deciding state, Quoted quoted) {
    if (!inFlight.remove(quoted.accountId()))
      return Effect().noReply(); // an answer from before a reset
    if (quoted.summary() == null) {
      toQuote.add(quoted.accountId());
      return retryLater();
    }
    quotes.put(quoted.accountId(), quoted.summary());
    return decideWhenQuoted(state);
  }

  private ReplyEffect<Event, State> onDecidingRetry(Deciding state, Timer timer) {
    if (!candidatesKnown) {
      findCandidates(state.minimum());
      return Effect().noReply();
    }
    return decideWhenQuoted(state);
  }

  private ReplyEffect<Event, State> retryLater() {
    timers.startSingleTimer(Timer.RETRY, Timer.RETRY, settings.retryInterval());
    return Effect().noReply();
  }

  /**
   * Asks the next accounts for their state; once every candidate has answered, records the
   * decision.
   */
  private ReplyEffect<Event, State> decideWhenQuoted(Deciding state) {
    while (inFlight.size() < settings.parallelism() && !toQuote.isEmpty()) quote(toQuote.poll());
    if (!inFlight.isEmpty() || !toQuote.isEmpty()) return Effect().noReply();
    Decided decided = decide(state.minimum(), quotes.values());
    if (decided.payments().isEmpty()) {
      return Effect()
          .persist(List.of(decided, new Completed(decided.at())))
          .thenRun(this::answerWaiting)
          .thenNoReply();
    }
    return Effect().persist(decided).thenRun(s -> pay(((Paying) s).run())).thenNoReply();
  }

  private void quote(String accountId) {
    inFlight.add(accountId);
    context.ask(
        Account.Summary.class,
        ports.account(accountId),
        settings.askTimeout(),
        Account.GetSummary::new,
        (summary, failure) -> new Quoted(accountId, failure == null ? summary : null));
  }

  /**
   * The rule: whole cents of the account's own earnings, if at least the minimum, to a payee it
   * named.
   */
  private Decided decide(long minimum, java.util.Collection<Account.Summary> summaries) {
    List<Payment> payments = new ArrayList<>();
    List<Skip> skipped = new ArrayList<>();
    summaries.stream()
        .sorted(Comparator.comparing(Account.Summary::id))
        .forEach(
            s -> {
              long amount = wholeCents(s.earnings());
              if (!s.open() || amount <= 0 || amount < minimum)
                return; // the read side was behind: nothing owed now
              if (s.suspended())
                skipped.add(new Skip(s.id(), amount, Rejection.ACCOUNT_SUSPENDED.wire()));
              else if (s.payoutDetails() == null)
                skipped.add(new Skip(s.id(), amount, NO_PAYOUT_DETAILS));
              else if (s.payoutReturned() != null)
                skipped.add(new Skip(s.id(), amount, PAYOUT_RETURNED));
              else
                payments.add(
                    new Payment(s.id(), payoutId(runId, s.id()), amount, s.payoutDetails()));
            });
    return new Decided(List.copyOf(payments), List.copyOf(skipped), now());
  }

  // ---- paying

  /** Sends every payout not yet answered (up to the parallelism); each is safe to send again. */
  private void pay(Run run) {
    for (Payment p : run.payments()) {
      if (inFlight.size() >= settings.parallelism()) return;
      if (run.resolved(p.accountId()) || inFlight.contains(p.accountId())) continue;
      inFlight.add(p.accountId());
      context.askWithStatus(
          Account.Posting.class,
          ports.account(p.accountId()),
          settings.askTimeout(),
          reply -> new Account.Payout(p.payoutId(), p.amount(), reply),
          (posting, failure) -> new PayoutAnswered(p.accountId(), Rejection.codeOf(failure)));
    }
  }

  private ReplyEffect<Event, State> onPayoutAnswered(Paying state, PayoutAnswered answer) {
    inFlight.remove(answer.accountId());
    Run run = state.run();
    if (run.resolved(answer.accountId())) return Effect().noReply(); // a duplicate answer
    if (retryable(answer.refusal())) return retryLater();
    long amount = run.payment(answer.accountId()).amount();
    Event outcome =
        answer.refusal() == null
            ? new PaymentConfirmed(answer.accountId(), amount, now())
            : new PaymentRefused(answer.accountId(), amount, answer.refusal().wire(), now());
    if (run.lastOpen(answer.accountId())) {
      return Effect()
          .persist(List.of(outcome, new Completed(now())))
          .thenRun(this::answerWaiting)
          .thenNoReply();
    }
    return Effect().persist(outcome).thenRun(s -> pay(((Paying) s).run())).thenNoReply();
  }

  // ---- returns

  private ReplyEffect<Event, State> onReturnPayment(State state, Run run, ReturnPayment cmd) {
    Payment payment = cmd.accountId() == null ? null : run.paymentOrNull(cmd.accountId());
    if (payment == null)
      return Effect()
          .reply(
              cmd.replyTo(),
              reply(
                  Rejection.NOT_FOUND,
                  "payout run " + runId + " pays nothing to account " + cmd.accountId()));
    Returned returned = run.returns().get(cmd.accountId());
    if (returned != null) {
      if (returned.reason().equals(cmd.reason()))
        return Effect().reply(cmd.replyTo(), StatusReply.success(view(state)));
      return Effect()
          .reply(
              cmd.replyTo(),
              reply(
                  Rejection.IDEMPOTENCY_CONFLICT,
                  "the payout to "
                      + cmd.accountId()
                      + " was recorded as returned with reason "
                      + returned.reason()));
    }
    Outcome outcome = run.outcomes().get(cmd.accountId());
    if (outcome == null || !outcome.paid())
      return Effect()
          .reply(
              cmd.replyTo(),
              reply(
                  Rejection.PAYOUT_NOT_PAID,
                  "the payout to "
                      + cmd.accountId()
                      + (outcome == null ? " is still being paid" : " was refused, never paid")));
    if (!PayoutReturns.isReasonCode(cmd.reason()))
      return Effect()
          .reply(cmd.replyTo(), reply(Rejection.INVALID_REASON, PayoutReturns.REASON_CODE_RULE));
    context.askWithStatus(
        Account.Posting.class,
        ports.account(cmd.accountId()),
        settings.askTimeout(),
        reply -> new Account.ReturnPayout(payment.payoutId(), cmd.reason(), payment.payee(), reply),
        (posting, failure) ->
            new ReturnAnswered(
                cmd,
                Rejection.codeOf(failure),
                failure == null ? null : Rejection.detailOf(failure.getMessage())));
    return Effect().noReply();
  }

  /** The account took the payout back (or refused): record it once, then answer. */
  private ReplyEffect<Event, State> onReturnAnswered(State state, Run run, ReturnAnswered answer) {
    ReturnPayment cmd = answer.request();
    if (answer.refusal() != null) {
      String detail =
          answer.refusal() == Rejection.UNAVAILABLE
              ? "account " + cmd.accountId() + " did not answer in time; try again"
              : answer.detail();
      return Effect().reply(cmd.replyTo(), reply(answer.refusal(), detail));
    }
    if (run.returns().containsKey(cmd.accountId())) // two returns of one payout at once
    return Effect().reply(cmd.replyTo(), StatusReply.success(view(state)));
    return Effect()
        .persist(
            new PaymentReturned(
                cmd.accountId(), run.payment(cmd.accountId()).amount(), cmd.reason(), now()))
        .thenReply(cmd.replyTo(), s -> StatusReply.success(view(s)));
  }

  private void answerWaiting(State state) {
    RunView view = view(state);
    waiting.forEach(w -> w.tell(StatusReply.success(view)));
    waiting.clear();
  }

  // ---------------------------------------------------------------------------------------------
  // Events

  @Override
  public EventHandler<State, Event> eventHandler() {
    var builder = newEventHandlerBuilder();
    builder
        .forStateType(Empty.class)
        .onEvent(Started.class, (s, e) -> new Deciding(e.minimum(), e.at()));
    builder
        .forStateType(Deciding.class)
        .onEvent(
            Decided.class,
            (s, e) ->
                new Paying(
                    new Run(
                        s.minimum(), s.createdAt(), e.at(), e.payments(), e.skipped(), Map.of())));
    builder
        .forStateType(Paying.class)
        .onEvent(
            PaymentConfirmed.class,
            (s, e) ->
                new Paying(s.run().withOutcome(e.accountId(), new Outcome(true, null, e.at()))))
        .onEvent(
            PaymentRefused.class,
            (s, e) ->
                new Paying(
                    s.run().withOutcome(e.accountId(), new Outcome(false, e.reason(), e.at()))))
        .onEvent(
            PaymentReturned.class,
            (s, e) ->
                new Paying(s.run().withReturn(e.accountId(), new Returned(e.reason(), e.at()))))
        .onEvent(Completed.class, (s, e) -> new Done(s.run(), e.at()));
    builder
        .forStateType(Done.class)
        .onEvent(
            PaymentReturned.class,
            (s, e) ->
                new Done(
                    s.run().withReturn(e.accountId(), new Returned(e.reason(), e.at())),
                    s.completedAt()));
    return builder.build();
  }

  // ---------------------------------------------------------------------------------------------

  private RunView view(State state) {
    if (state instanceof Deciding d) {
      return new RunView(
          runId, "deciding", d.minimum(), d.createdAt(), null, null, 0, 0, List.of(), List.of(), 0);
    }
    if (state instanceof Paying p) return p.run().view(runId, "paying", null);
    if (state instanceof Done d) return d.run().view(runId, "completed", d.completedAt());
    throw new IllegalStateException("no view of " + state);
  }

  private Instant now() {
    return clock.instant();
  }

  private StatusReply<RunView> conflict(long minimum) {
    return reply(
        Rejection.IDEMPOTENCY_CONFLICT,
        "payout run " + runId + " was started with minimum " + Money.format(minimum));
  }

  /**
   * No answer, or an answer that says nothing about the payout: ask again later. Every other
   * refusal is final.
   */
  private static boolean retryable(Rejection refusal) {
    return refusal == Rejection.UNAVAILABLE || refusal == Rejection.INTERNAL;
  }
}
