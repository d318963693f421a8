package dev.tickmark.engine.account;

import static dev.tickmark.engine.Rejection.reply;

import com.fasterxml.jackson.annotation.JsonCreator;
import dev.tickmark.engine.CborSerializable;
import dev.tickmark.engine.JournalFailures;
import dev.tickmark.engine.Rejection;
import dev.tickmark.engine.SharedCommandHandler;
import dev.tickmark.engine.money.Money;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneOffset;
import java.time.ZonedDateTime;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.function.BiFunction;
import java.util.stream.IntStream;
import org.apache.pekko.Done;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.Behavior;
import org.apache.pekko.actor.typed.javadsl.ActorContext;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.actor.typed.javadsl.TimerScheduler;
import org.apache.pekko.cluster.sharding.typed.javadsl.ClusterSharding;
import org.apache.pekko.cluster.sharding.typed.javadsl.Entity;
import org.apache.pekko.cluster.sharding.typed.javadsl.EntityTypeKey;
import org.apache.pekko.pattern.StatusReply;
import org.apache.pekko.persistence.typed.PersistenceId;
import org.apache.pekko.persistence.typed.RecoveryCompleted;
import org.apache.pekko.persistence.typed.SnapshotAdapter;
import org.apache.pekko.persistence.typed.javadsl.CommandHandlerWithReply;
import org.apache.pekko.persistence.typed.javadsl.EventHandler;
import org.apache.pekko.persistence.typed.javadsl.EventHandlerBuilder;
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
 * <p>Suspension (an operator's decision) refuses new holds and payouts. Everything already under
 * way goes on: open holds may still be extended, captured and released, and earnings still accrue,
 * so a running rental runs until it is stopped or its balance runs out, and its provider is
 * credited for it.
 */
public final class Account
    extends EventSourcedBehaviorWithEnforcedReplies<Account.Command, Account.Event, Account.State> {

  public static final EntityTypeKey<Command> ENTITY_KEY =
      EntityTypeKey.create(Command.class, "Account");

  /**
   * Events are tagged into a fixed number of slices, one projection instance each. Changing it
   * needs an offset migration.
   */
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
  public record Deposit(String reference, long amount, ActorRef<StatusReply<Posting>> replyTo)
      implements Command {}

  /**
   * Reserves {@code amount} of the available balance for one rental. {@code confirmWithin}: the
   * hold is pending, and goes back to the balance unless its rental confirms it ({@link
   * ConfirmHold}) within this long (issue 15: a launch asks for its hold before it has recorded
   * anything, so a crash must not leave a hold nobody releases); null: confirmed at once. Placing a
   * confirmed hold over a pending one of the same id confirms it.
   */
  public record PlaceHold(
      String holdId, long amount, Duration confirmWithin, ActorRef<StatusReply<HoldView>> replyTo)
      implements Command {
    @JsonCreator
    public PlaceHold {}

    public PlaceHold(String holdId, long amount, ActorRef<StatusReply<HoldView>> replyTo) {
      this(holdId, amount, null, replyTo);
    }
  }

  /**
   * The rental recorded its match: its pending hold no longer expires. A confirmed hold answers as
   * it stands; one that expired (or never was) is refused ({@code hold_expired}).
   */
  public record ConfirmHold(String holdId, ActorRef<StatusReply<HoldView>> replyTo)
      implements Command {}

  /**
   * Grows a hold to {@code newAmount} in total; asking for an amount the hold already has is a
   * no-op.
   */
  public record ExtendHold(String holdId, long newAmount, ActorRef<StatusReply<HoldView>> replyTo)
      implements Command {}

  /**
   * Captures from a hold so that the total captured through {@code throughSecond} is {@code
   * cumulativeAmount}. Key: {@code holdId:throughSecond}.
   */
  public record Capture(
      String holdId,
      long throughSecond,
      long cumulativeAmount,
      ActorRef<StatusReply<Posting>> replyTo)
      implements Command {}

  /**
   * A capture of a snapshot's storage ({@code holdId} = the snapshot id): the same rules as {@link
   * Capture} (hold, high-water mark, monthly spending), but the whole amount is platform revenue
   * (the ledger books the renter's {@code capture} and the platform's {@code storage} under the key
   * {@code holdId:throughSecond}); no provider is credited.
   */
  public record CaptureStorage(
      String holdId,
      long throughSecond,
      long cumulativeAmount,
      ActorRef<StatusReply<Posting>> replyTo)
      implements Command {}

  /** Returns what is left of a hold to the available balance. A hold resolves at most once. */
  public record ReleaseHold(String holdId, ActorRef<StatusReply<HoldView>> replyTo)
      implements Command {}

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
   * Pays exactly {@code amount} of the earnings out; idempotent on {@code payoutId}. Refused when
   * the earnings do not cover it or the account is suspended (a payout applied before still
   * answers).
   */
  public record Payout(String payoutId, long amount, ActorRef<StatusReply<Posting>> replyTo)
      implements Command {}

  /**
   * The bank returned payout {@code payoutId} (closed account, wrong name…): its amount goes back
   * to the earnings, once; idempotent on {@code payoutId}. {@code reason}: the bank's ISO 20022
   * return reason code; {@code payee}: the details the payout was sent to, which later payouts
   * avoid until the provider gives details again. Applies to a suspended account too: the money is
   * back either way.
   */
  public record ReturnPayout(
      String payoutId, String reason, PayoutDetails payee, ActorRef<StatusReply<Posting>> replyTo)
      implements Command {}

  /**
   * An operator refunded part or all of what rental {@code rentalId} charged this renter: {@code
   * cumulativeAmount} is everything refunded for it so far, and the account gives back what it has
   * not yet (cumulative, as settlements are, so a repeat or an older one moves nothing). Sent by
   * the rental, which checks it never exceeds what it charged. Applies to a suspended account too.
   * Key: {@code refund:rentalId:cumulativeAmount}.
   */
  public record RefundCharge(
      String rentalId, long cumulativeAmount, ActorRef<StatusReply<Posting>> replyTo)
      implements Command {}

  /**
   * The provider side of a refund of rental {@code rentalId}: its earnings and the platform's fee
   * give back their cumulative shares of it ({@code cumulativeProvider}, {@code
   * cumulativePlatform}), from this account's high-water mark. The earnings may go below zero (the
   * rental's earnings were paid out already): later earnings make up for it before any payout. Key:
   * {@code reversal:rentalId:cumulativeProvider+cumulativePlatform}.
   */
  public record ReverseEarnings(
      String rentalId,
      long cumulativeProvider,
      long cumulativePlatform,
      ActorRef<StatusReply<Posting>> replyTo)
      implements Command {}

  /** Sets (or with {@code null}, removes) the monthly spend cap in µ€. */
  public record SetSpendCap(Long monthlyCap, ActorRef<StatusReply<Summary>> replyTo)
      implements Command {}

  /**
   * Where the provider side is paid: validated here, so only a SEPA IBAN with a good checksum is
   * ever kept.
   */
  public record SetPayoutDetails(
      String holderName, String iban, String bic, ActorRef<StatusReply<Summary>> replyTo)
      implements Command {}

  /** An operator freezes the account: no new holds and no payouts until {@link Resume}. */
  public record Suspend(String reason, ActorRef<StatusReply<Summary>> replyTo) implements Command {}

  public record Resume(ActorRef<StatusReply<Summary>> replyTo) implements Command {}

  public record GetSummary(ActorRef<Summary> replyTo) implements Command {}

  public record GetHold(String holdId, ActorRef<StatusReply<HoldView>> replyTo)
      implements Command {}

  /**
   * From a rental that has closed: every settlement of it is acknowledged and it sends nothing
   * more, so its closed hold (renter) or closed source (provider) need not be kept for idempotency
   * any longer. Without it an account would keep an entry for every rental it ever had. An id still
   * open, unknown or already forgotten changes nothing. The answer ({@code Done}) comes either way.
   */
  public record ForgetClosed(String id, ActorRef<Done> replyTo) implements Command {}

  /**
   * Sent by the account to itself: persist the settlement postings buffered since the last write,
   * together.
   */
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
      Suspension suspension,
      PendingPayoutDetails pendingPayoutDetails,
      ReturnedPayout payoutReturned)
      implements CborSerializable {
    /**
     * {@code payoutReturned}: the bank returned the last payout sent to the details in force, so
     * payouts wait until the provider gives details again; null otherwise.
     */
    @com.fasterxml.jackson.annotation.JsonCreator
    public Summary {}

    /** A summary with no payout details waiting for their hold period. */
    public Summary(
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
        Suspension suspension) {
      this(
          id,
          open,
          name,
          balance,
          held,
          available,
          earnings,
          spendCapMonthly,
          spentThisMonth,
          deposited,
          captured,
          credited,
          platformCredited,
          paidOut,
          payoutDetails,
          suspension,
          null,
          null);
    }

    public boolean suspended() {
      return suspension != null;
    }
  }

  /**
   * Payout details that replace those in force once {@code effectiveAt} has come (the hold period
   * after a change): until then payouts still go to the old ones.
   */
  public record PendingPayoutDetails(PayoutDetails details, Instant effectiveAt)
      implements CborSerializable {}

  /**
   * A SEPA payee: the IBAN in electronic form (no spaces, upper case); {@code bic} is optional in
   * SEPA.
   */
  public record PayoutDetails(String holderName, String iban, String bic)
      implements CborSerializable {}

  public record Suspension(String reason, Instant at) implements CborSerializable {}

  /** A payout the bank sent back: its amount, the bank's reason code and where it had gone. */
  public record ReturnedPayout(
      String payoutId, long amount, String reason, PayoutDetails payee, Instant at)
      implements CborSerializable {}

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

  /** {@code expiresAt}: when a pending hold goes back unless confirmed (null: confirmed). */
  public record HoldPlaced(String holdId, long amount, Instant at, Instant expiresAt)
      implements Event {
    @JsonCreator
    public HoldPlaced {}

    public HoldPlaced(String holdId, long amount, Instant at) {
      this(holdId, amount, at, null);
    }
  }

  /** A pending hold was confirmed by its rental: it stays until released. */
  public record HoldConfirmed(String holdId, Instant at) implements Event {}

  /**
   * A pending hold nobody confirmed in time went back to the balance, whole ({@code released}); it
   * is gone, not closed: nothing was captured from it and no rental will ever close it.
   */
  public record HoldExpired(String holdId, long released, Instant at) implements Event {}

  public record HoldExtended(String holdId, long newAmount, long added, Instant at)
      implements Event {}

  public record Captured(
      String holdId, long throughSecond, long cumulativeAmount, long amount, Instant at)
      implements Event {}

  /** A {@link CaptureStorage}: to the account exactly a {@link Captured}, to the ledger revenue. */
  public record StorageCaptured(
      String holdId, long throughSecond, long cumulativeAmount, long amount, Instant at)
      implements Event {
    Captured asCapture() {
      return new Captured(holdId, throughSecond, cumulativeAmount, amount, at);
    }
  }

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

  /** The bank returned payout {@code payoutId}: {@code amount} is owed to the provider again. */
  public record PayoutReturned(
      String payoutId, long amount, String reason, PayoutDetails payee, Instant at)
      implements Event {}

  /**
   * An operator's refund of rental {@code rentalId} reached the renter: {@code amount} more is back
   * in the balance, {@code cumulativeAmount} in all for that rental.
   */
  public record ChargeRefunded(String rentalId, long cumulativeAmount, long amount, Instant at)
      implements Event {}

  /**
   * A refund of rental {@code rentalId} took {@code providerAmount} back from the earnings and
   * {@code platformAmount} from the platform's fee; the cumulative figures are the rental's totals
   * so far.
   */
  public record EarningsReversed(
      String rentalId,
      long cumulativeProvider,
      long cumulativePlatform,
      long providerAmount,
      long platformAmount,
      Instant at)
      implements Event {}

  public record SpendCapSet(Long monthlyCap, Instant at) implements Event {}

  /**
   * {@code effectiveAt}: when payouts start to use them (null: at once — the account's first
   * details, and every change recorded before hold periods existed).
   */
  public record PayoutDetailsSet(PayoutDetails details, Instant at, Instant effectiveAt)
      implements Event {
    @com.fasterxml.jackson.annotation.JsonCreator
    public PayoutDetailsSet {}

    public PayoutDetailsSet(PayoutDetails details, Instant at) {
      this(details, at, null);
    }
  }

  public record Suspended(String reason, Instant at) implements Event {}

  public record Resumed(Instant at) implements Event {}

  /**
   * The closed hold and closed source of {@code id} (a rental) were dropped; see {@link Forgotten}.
   */
  public record ClosedForgotten(String id, Instant at) implements Event {}

  /**
   * A {@link ReleaseHold} for a hold this account never placed (its rental was cancelled while its
   * {@link PlaceHold} was still on the way): {@code holdId} is remembered as {@link Forgotten} ids
   * are, so that the late placement is refused ({@code hold_closed}) instead of opening a hold that
   * nobody will ever release.
   */
  public record UnplacedHoldReleased(String holdId, Instant at) implements Event {}

  // ---------------------------------------------------------------------------------------------
  // State: immutable (snapshots are written asynchronously), with the lifecycle as types.

  public interface State extends CborSerializable {}

  public enum Unopened implements State {
    INSTANCE
  }

  /**
   * A hold's progress; {@code throughSecond}/{@code lastAmount} are the high-water mark of its
   * captures.
   */
  public record Hold(
      long amount,
      long captured,
      long throughSecond,
      long lastCumulative,
      long lastAmount,
      long released)
      implements CborSerializable {
    static Hold placed(long amount) {
      return new Hold(amount, 0, 0, 0, 0, 0);
    }

    long remaining() {
      return amount - captured;
    }

    HoldView view(String holdId, boolean open) {
      return new HoldView(holdId, amount, captured, released, open);
    }

    Hold extendedTo(long newAmount) {
      return new Hold(newAmount, captured, throughSecond, lastCumulative, lastAmount, 0);
    }

    /**
     * The hold after {@code e}: its captured total grows and {@code e} is its new high-water mark.
     */
    Hold afterCapture(Captured e) {
      return new Hold(
          amount, captured + e.amount(), e.throughSecond(), e.cumulativeAmount(), e.amount(), 0);
    }

    Hold releasing(long releasedAmount) {
      return new Hold(amount, captured, throughSecond, lastCumulative, lastAmount, releasedAmount);
    }
  }

  /**
   * The high-water mark of one earnings source, with the latest posting for exact duplicate
   * answers.
   */
  public record SourceMark(
      long throughSecond,
      long cumulativeProvider,
      long cumulativePlatform,
      long lastProvider,
      long lastPlatform)
      implements CborSerializable {
    static SourceMark of(EarningsCredited e) {
      return new SourceMark(
          e.throughSecond(),
          e.cumulativeProviderAmount(),
          e.cumulativePlatformAmount(),
          e.providerAmount(),
          e.platformAmount());
    }
  }

  /**
   * Ids whose closed hold and source were dropped once their rental closed ({@link ForgetClosed}):
   * remembered for one to two days, in two generations of a day each (the older one is dropped as a
   * whole when the newer is a day old, by the events' own time, so replay gives the same state), so
   * that a late duplicate of a {@link PlaceHold} or {@link CreditEarnings} cannot open them again.
   * Any message of a closed rental is long delivered or dropped by then (asks time out in seconds,
   * sharding buffers hand over within a minute).
   */
  public record Forgotten(
      Map<String, Instant> recent, Map<String, Instant> older, Instant recentSince)
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
        return new Forgotten(
            PersistentMap.<Instant>empty().with(id, at), recentSince == null ? older : recent, at);
      }
      return new Forgotten(Account.with(recent, id, at), older, recentSince);
    }
  }

  /**
   * An open account (suspended or not), in parts that cannot be mixed up: who it is and what it
   * allows ({@link Profile}), its money ({@link Totals}), this month's spending ({@link Spending})
   * and what it remembers to answer a retried posting as the first time ({@link Marks}). Snapshots
   * written before this class, as one flat {@link OpenAccount}, are read through {@link
   * #snapshotAdapter()}.
   */
  public record Active(Profile profile, Totals totals, Spending spending, Marks marks)
      implements State {
    public Active {
      Objects.requireNonNull(profile, "profile");
      Objects.requireNonNull(totals, "totals");
      Objects.requireNonNull(spending, "spending");
      Objects.requireNonNull(marks, "marks");
    }

    static Active opened(String name) {
      return new Active(Profile.named(name), Totals.ZERO, Spending.NONE, Marks.NONE);
    }

    /**
     * Whether growing the holds by {@code additional} would commit more than the cap this month.
     */
    boolean exceedsCap(long additional, int currentMonth) {
      if (profile.spendCap() == null) return false;
      long committed = spending.spentIn(currentMonth) + totals.held();
      return committed > profile.spendCap() - additional;
    }

    Summary summary(String id, int currentMonth, Instant now) {
      return new Summary(
          id,
          true,
          profile.name(),
          totals.balance(),
          totals.held(),
          totals.available(),
          totals.earnings(),
          profile.spendCap(),
          spending.spentIn(currentMonth),
          totals.deposited(),
          totals.captured(),
          totals.credited(),
          totals.platformCredited(),
          totals.paidOut(),
          profile.detailsInForce(now),
          profile.suspension(),
          profile.pendingAt(now),
          profile.returnBlocking(now));
    }

    // Applying events: each changes the parts it concerns and keeps the others.

    Active withDeposit(Deposited e) {
      return new Active(
          profile,
          totals.plusDeposit(e.amount()),
          spending,
          marks.withDeposit(e.reference(), e.amount()));
    }

    Active withPlacedHold(HoldPlaced e) {
      if (e.expiresAt() == null) return withHold(e.holdId(), Hold.placed(e.amount()), e.amount());
      return new Active(
          profile,
          totals.plusHeld(e.amount()),
          spending,
          marks.withHolds(
              marks.holds().withPending(e.holdId(), Hold.placed(e.amount()), e.expiresAt())));
    }

    Active withConfirmedHold(HoldConfirmed e) {
      return new Active(
          profile, totals, spending, marks.withHolds(marks.holds().confirming(e.holdId())));
    }

    Active withExpiredHold(HoldExpired e) {
      return new Active(
          profile,
          totals.minusHeld(e.released()),
          spending,
          marks.withHolds(marks.holds().expiring(e.holdId())));
    }

    Active withExtension(HoldExtended e) {
      return withHold(
          e.holdId(), marks.holds().open().get(e.holdId()).extendedTo(e.newAmount()), e.added());
    }

    /** A hold that grows, or is captured from, is in use: it is confirmed if it was pending. */
    private Active withHold(String holdId, Hold hold, long heldDelta) {
      return new Active(
          profile,
          totals.plusHeld(heldDelta),
          spending,
          marks.withHolds(marks.holds().withOpen(holdId, hold).confirming(holdId)));
    }

    Active withCapture(Captured e) {
      Hold updated = marks.holds().open().get(e.holdId()).afterCapture(e);
      return new Active(
          profile,
          totals.plusCapture(e.amount()),
          spending.plusCapture(e.amount(), e.at()),
          marks.withHolds(marks.holds().withOpen(e.holdId(), updated).confirming(e.holdId())));
    }

    Active withRelease(HoldReleased e) {
      Hold closed = marks.holds().open().get(e.holdId()).releasing(e.released());
      return new Active(
          profile,
          totals.minusHeld(e.released()),
          spending,
          marks.withHolds(marks.holds().closing(e.holdId(), closed)));
    }

    Active withEarnings(EarningsCredited e) {
      return new Active(
          profile,
          totals.plusEarnings(e.providerAmount(), e.platformAmount()),
          spending,
          marks.withSources(marks.sources().with(e.sourceId(), SourceMark.of(e), e.last())));
    }

    Active withPayout(PaidOut e) {
      return new Active(
          profile,
          totals.plusPayout(e.amount()),
          spending,
          marks.withPayout(e.payoutId(), e.amount()));
    }

    Active withPayoutReturned(PayoutReturned e) {
      return new Active(
          profile.withReturnedPayout(
              new ReturnedPayout(e.payoutId(), e.amount(), e.reason(), e.payee(), e.at())),
          totals.lessReturnedPayout(e.amount()),
          spending,
          marks.withReturn(e.payoutId(), e.amount()));
    }

    Active withChargeRefunded(ChargeRefunded e) {
      return new Active(
          profile,
          totals.lessCapture(e.amount()),
          spending,
          marks.withRefund(e.rentalId(), e.cumulativeAmount()));
    }

    Active withEarningsReversed(EarningsReversed e) {
      return new Active(
          profile,
          totals.lessEarnings(e.providerAmount(), e.platformAmount()),
          spending,
          marks.withReversal(
              e.rentalId(), new Reversal(e.cumulativeProvider(), e.cumulativePlatform())));
    }

    Active withSpendCap(SpendCapSet e) {
      return new Active(profile.withSpendCap(e.monthlyCap()), totals, spending, marks);
    }

    Active withPayoutDetails(PayoutDetailsSet e) {
      return new Active(profile.withPayoutDetails(e), totals, spending, marks);
    }

    Active withSuspension(Suspension suspension) {
      return new Active(profile.withSuspension(suspension), totals, spending, marks);
    }

    Active withForgotten(ClosedForgotten e) {
      return new Active(profile, totals, spending, marks.forgetting(e.id(), e.at()));
    }

    Active withUnplacedRelease(UnplacedHoldReleased e) {
      return new Active(profile, totals, spending, marks.tombstone(e.holdId(), e.at()));
    }
  }

  /** Who the account is and what its owner or an operator decided for it. */
  public record Profile(
      String name,
      Long spendCap,
      PayoutDetails payoutDetails,
      Suspension suspension,
      PendingPayoutDetails pendingPayoutDetails,
      ReturnedPayout returnedPayout)
      implements CborSerializable {
    /**
     * {@code returnedPayout}: the latest payout the bank returned (absent in snapshots written
     * before returns: none then).
     */
    @com.fasterxml.jackson.annotation.JsonCreator
    public Profile {}

    public Profile(String name, Long spendCap, PayoutDetails payoutDetails, Suspension suspension) {
      this(name, spendCap, payoutDetails, suspension, null, null);
    }

    /**
     * The returned payout while the details in force at {@code now} are the ones it was returned
     * from (payouts wait then), else null.
     */
    ReturnedPayout returnBlocking(Instant now) {
      return returnedPayout != null && Objects.equals(returnedPayout.payee(), detailsInForce(now))
          ? returnedPayout
          : null;
    }

    Profile withReturnedPayout(ReturnedPayout returned) {
      return new Profile(name, spendCap, payoutDetails, suspension, pendingPayoutDetails, returned);
    }

    static Profile named(String name) {
      return new Profile(name, null, null, null);
    }

    /** The details payouts use at {@code now}: pending ones once their hold period is over. */
    PayoutDetails detailsInForce(Instant now) {
      if (pendingPayoutDetails != null && !now.isBefore(pendingPayoutDetails.effectiveAt()))
        return pendingPayoutDetails.details();
      return payoutDetails;
    }

    /** The details still waiting at {@code now}, or null. */
    PendingPayoutDetails pendingAt(Instant now) {
      return pendingPayoutDetails != null && now.isBefore(pendingPayoutDetails.effectiveAt())
          ? pendingPayoutDetails
          : null;
    }

    boolean suspended() {
      return suspension != null;
    }

    Profile withSpendCap(Long cap) {
      return new Profile(
          name, cap, payoutDetails, suspension, pendingPayoutDetails, returnedPayout);
    }

    /**
     * Details set at {@code e.at()}: in force at once, or pending until {@code e.effectiveAt()}
     * with those in force at that instant kept meanwhile (a change during a hold replaces the
     * pending one and starts its own hold). Details in force at once are the provider's word that
     * they are right: a returned payout no longer holds payouts back. Pending ones end the wait
     * when they come into force (they are not the returned payout's).
     */
    Profile withPayoutDetails(PayoutDetailsSet e) {
      if (e.effectiveAt() == null)
        return new Profile(name, spendCap, e.details(), suspension, null, null);
      return new Profile(
          name,
          spendCap,
          detailsInForce(e.at()),
          suspension,
          new PendingPayoutDetails(e.details(), e.effectiveAt()),
          returnedPayout);
    }

    Profile withSuspension(Suspension newSuspension) {
      return new Profile(
          name, spendCap, payoutDetails, newSuspension, pendingPayoutDetails, returnedPayout);
    }
  }

  /**
   * The account's money in µ€, as running totals that only grow, except {@code held}: what open
   * holds still reserve, and {@code paidOut}, which a payout the bank returned takes back. The
   * renter side is {@code deposited - captured}, the provider side {@code credited - paidOut}.
   */
  public record Totals(
      long deposited, long captured, long held, long credited, long platformCredited, long paidOut)
      implements CborSerializable {
    static final Totals ZERO = new Totals(0, 0, 0, 0, 0, 0);

    long balance() {
      return deposited - captured;
    }

    long available() {
      return balance() - held;
    }

    long earnings() {
      return credited - paidOut;
    }

    Totals plusDeposit(long amount) {
      return new Totals(deposited + amount, captured, held, credited, platformCredited, paidOut);
    }

    Totals plusHeld(long amount) {
      return new Totals(deposited, captured, held + amount, credited, platformCredited, paidOut);
    }

    Totals minusHeld(long amount) {
      return new Totals(deposited, captured, held - amount, credited, platformCredited, paidOut);
    }

    /** A capture moves {@code amount} from held to captured. */
    Totals plusCapture(long amount) {
      return new Totals(
          deposited, captured + amount, held - amount, credited, platformCredited, paidOut);
    }

    Totals plusEarnings(long provider, long platform) {
      return new Totals(
          deposited, captured, held, credited + provider, platformCredited + platform, paidOut);
    }

    Totals plusPayout(long amount) {
      return new Totals(deposited, captured, held, credited, platformCredited, paidOut + amount);
    }

    /** A payout the bank returned is no longer paid out: it is owed again. */
    Totals lessReturnedPayout(long amount) {
      return new Totals(deposited, captured, held, credited, platformCredited, paidOut - amount);
    }

    /** A refund: what was captured is back in the balance (captured is net of refunds). */
    Totals lessCapture(long amount) {
      return new Totals(deposited, captured - amount, held, credited, platformCredited, paidOut);
    }

    /** A refund's provider side: credited and the platform's fee are net of reversals. */
    Totals lessEarnings(long provider, long platform) {
      return new Totals(
          deposited, captured, held, credited - provider, platformCredited - platform, paidOut);
    }
  }

  /**
   * What was captured in {@code month} ({@code yyyymm}, UTC), for the spend cap; 0 is before the
   * first capture.
   */
  public record Spending(int month, long captured) implements CborSerializable {
    static final Spending NONE = new Spending(0, 0);

    /**
     * The month's spending as the clock reads {@code currentMonth}: a clock behind the month of the
     * last capture (stepped back, or a lagging node) is still in that later month, so it counts.
     */
    long spentIn(int currentMonth) {
      return month >= currentMonth ? captured : 0;
    }

    Spending plusCapture(long amount, Instant at) {
      // The month never goes backwards: a node whose clock lags must not reset the month's
      // spending.
      int eventMonth = Math.max(monthOf(at), month);
      return new Spending(eventMonth, eventMonth == month ? captured + amount : amount);
    }
  }

  /**
   * What the account remembers to answer retries as the first time: deposits and payouts by their
   * key with their amount, holds and earnings sources by rental, and the rentals whose closed ones
   * were dropped.
   */
  public record Marks(
      Map<String, Long> deposits,
      Map<String, Long> payouts,
      Holds holds,
      Sources sources,
      Forgotten forgotten,
      Map<String, Long> returns,
      Map<String, Long> refunds,
      Map<String, Reversal> reversals)
      implements CborSerializable {
    static final Marks NONE =
        new Marks(
            Map.of(),
            Map.of(),
            Holds.NONE,
            Sources.NONE,
            Forgotten.NONE,
            Map.of(),
            Map.of(),
            Map.of());

    /**
     * {@code returns}: the payouts the bank returned, by payout id, with their amount (absent in
     * snapshots written before returns: none then). {@code refunds}: what was refunded to this
     * renter per rental, cumulative; {@code reversals}: what refunds took back per rental from this
     * provider (absent in snapshots written before refunds: none then). Neither is forgotten with
     * the rental's closed hold: a refund comes after the rental closed.
     */
    @JsonCreator
    public Marks {
      deposits = PersistentMap.of(deposits);
      payouts = PersistentMap.of(payouts);
      Objects.requireNonNull(holds, "holds");
      Objects.requireNonNull(sources, "sources");
      Objects.requireNonNull(forgotten, "forgotten");
      returns = PersistentMap.of(returns == null ? Map.of() : returns);
      refunds = PersistentMap.of(refunds == null ? Map.of() : refunds);
      reversals = PersistentMap.of(reversals == null ? Map.of() : reversals);
    }

    public Marks(
        Map<String, Long> deposits,
        Map<String, Long> payouts,
        Holds holds,
        Sources sources,
        Forgotten forgotten) {
      this(deposits, payouts, holds, sources, forgotten, Map.of(), Map.of(), Map.of());
    }

    private Marks withParts(Holds newHolds, Sources newSources, Forgotten newForgotten) {
      return new Marks(
          deposits, payouts, newHolds, newSources, newForgotten, returns, refunds, reversals);
    }

    Marks withDeposit(String reference, long amount) {
      return new Marks(
          with(deposits, reference, amount),
          payouts,
          holds,
          sources,
          forgotten,
          returns,
          refunds,
          reversals);
    }

    Marks withPayout(String payoutId, long amount) {
      return new Marks(
          deposits,
          with(payouts, payoutId, amount),
          holds,
          sources,
          forgotten,
          returns,
          refunds,
          reversals);
    }

    Marks withReturn(String payoutId, long amount) {
      return new Marks(
          deposits,
          payouts,
          holds,
          sources,
          forgotten,
          with(returns, payoutId, amount),
          refunds,
          reversals);
    }

    Marks withRefund(String rentalId, long cumulative) {
      return new Marks(
          deposits,
          payouts,
          holds,
          sources,
          forgotten,
          returns,
          with(refunds, rentalId, cumulative),
          reversals);
    }

    Marks withReversal(String rentalId, Reversal cumulative) {
      return new Marks(
          deposits,
          payouts,
          holds,
          sources,
          forgotten,
          returns,
          refunds,
          with(reversals, rentalId, cumulative));
    }

    long refunded(String rentalId) {
      return refunds.getOrDefault(rentalId, 0L);
    }

    Reversal reversed(String rentalId) {
      return reversals.getOrDefault(rentalId, Reversal.NONE);
    }

    Marks withHolds(Holds newHolds) {
      return withParts(newHolds, sources, forgotten);
    }

    Marks withSources(Sources newSources) {
      return withParts(holds, newSources, forgotten);
    }

    /** Remembers {@code id} as forgotten, with nothing to drop: it was never placed. */
    Marks tombstone(String id, Instant at) {
      return withParts(holds, sources, forgotten.with(id, at));
    }

    /** Drops the closed hold and closed source of {@code id} and remembers that it did. */
    Marks forgetting(String id, Instant at) {
      return withParts(holds.forgetting(id), sources.forgetting(id), forgotten.with(id, at));
    }
  }

  /** What refunds of one rental took back from its provider so far: earnings and platform fee. */
  public record Reversal(long provider, long platform) implements CborSerializable {
    static final Reversal NONE = new Reversal(0, 0);

    long total() {
      return provider + platform;
    }
  }

  /**
   * Holds by id: open ones, and closed ones until their rental has closed too (then forgotten).
   * Kept as {@link PersistentMap}s, updated in O(log n).
   */
  public record Holds(
      Map<String, Hold> open, Map<String, Hold> closed, Map<String, Instant> pending)
      implements CborSerializable {
    static final Holds NONE = new Holds(Map.of(), Map.of(), Map.of());

    /**
     * {@code pending}: the open holds not yet confirmed by their rental, with when each expires
     * (absent in snapshots written before pending holds: none then).
     */
    @JsonCreator
    public Holds {
      open = PersistentMap.of(open);
      closed = PersistentMap.of(closed);
      pending = PersistentMap.of(pending == null ? Map.of() : pending);
    }

    public Holds(Map<String, Hold> open, Map<String, Hold> closed) {
      this(open, closed, Map.of());
    }

    /** The hold, open or closed; null if there is none. */
    Hold get(String holdId) {
      Hold found = open.get(holdId);
      return found != null ? found : closed.get(holdId);
    }

    boolean isOpen(String holdId) {
      return open.containsKey(holdId);
    }

    boolean isClosed(String holdId) {
      return closed.containsKey(holdId);
    }

    boolean isPending(String holdId) {
      return pending.containsKey(holdId);
    }

    /** The earliest instant a pending hold expires; null when none is pending. */
    Instant nextExpiry() {
      Instant next = null;
      for (Instant at : pending.values()) if (next == null || at.isBefore(next)) next = at;
      return next;
    }

    /** The pending holds whose time ran out at {@code now}, in id order (replay is the same). */
    List<String> expiredAt(Instant now) {
      return pending.entrySet().stream()
          .filter(e -> !now.isBefore(e.getValue()))
          .map(Map.Entry::getKey)
          .sorted()
          .toList();
    }

    Holds withOpen(String holdId, Hold hold) {
      return new Holds(with(open, holdId, hold), closed, pending);
    }

    Holds withPending(String holdId, Hold hold, Instant expiresAt) {
      return new Holds(with(open, holdId, hold), closed, with(pending, holdId, expiresAt));
    }

    /** Confirmed (explicitly, or by a capture or an extension): it no longer expires. */
    Holds confirming(String holdId) {
      return pending.containsKey(holdId) ? new Holds(open, closed, without(pending, holdId)) : this;
    }

    Holds closing(String holdId, Hold hold) {
      return new Holds(without(open, holdId), with(closed, holdId, hold), without(pending, holdId));
    }

    /** An expired pending hold is dropped: it was never used, and no rental will close it. */
    Holds expiring(String holdId) {
      return new Holds(without(open, holdId), closed, without(pending, holdId));
    }

    Holds forgetting(String holdId) {
      return new Holds(open, without(closed, holdId), pending);
    }
  }

  /**
   * Earnings sources by id: open ones, and closed ones (settled for the last time) until their
   * rental has closed.
   */
  public record Sources(Map<String, SourceMark> open, Map<String, SourceMark> closed)
      implements CborSerializable {
    static final Sources NONE = new Sources(Map.of(), Map.of());

    @JsonCreator
    public Sources {
      open = PersistentMap.of(open);
      closed = PersistentMap.of(closed);
    }

    /** The source's mark, open or closed; null if there is none. */
    SourceMark get(String sourceId) {
      SourceMark found = open.get(sourceId);
      return found != null ? found : closed.get(sourceId);
    }

    boolean isOpen(String sourceId) {
      return open.containsKey(sourceId);
    }

    boolean isClosed(String sourceId) {
      return closed.containsKey(sourceId);
    }

    /** The source's new mark; its last settlement closes it. */
    Sources with(String sourceId, SourceMark mark, boolean last) {
      if (last) return new Sources(without(open, sourceId), Account.with(closed, sourceId, mark));
      return new Sources(Account.with(open, sourceId, mark), closed);
    }

    Sources forgetting(String sourceId) {
      return new Sources(open, without(closed, sourceId));
    }
  }

  /**
   * The state of an open account as snapshots held it before {@link Active}: one flat record. Kept,
   * under its old name, only so that those snapshots are still read (their manifest is this class
   * name); recovery turns it into an {@link Active} ({@link #snapshotAdapter()}). Nothing writes it
   * any more. Do not change its components.
   */
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
      implements CborSerializable {

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

    /** The same account in today's shape: every value where {@link Active} keeps it. */
    Active upgrade() {
      return new Active(
          new Profile(name, spendCap, payoutDetails, suspension),
          new Totals(deposited, captured, held, credited, platformCredited, paidOut),
          new Spending(month, capturedInMonth),
          new Marks(
              deposits,
              payouts,
              new Holds(openHolds, closedHolds),
              new Sources(openSources, closedSources),
              forgotten));
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Behaviour

  /** SEPA allows 70 characters for a creditor's name. */
  static final int MAX_HOLDER_NAME = 70;

  /**
   * At most this many events go into one write. High on purpose: a write in the middle of handling
   * a long stash sends the rest of the stash round again, so small batches cost quadratic time
   * exactly when an account is behind (seen with one provider account and 6,000 rentals retrying on
   * three overloaded nodes).
   */
  static final int MAX_EVENTS_PER_WRITE = 10_000;

  private final String accountId;
  private final Clock clock;
  private final ActorContext<Command> context;

  // Settlement postings (captures, earnings credits, and forgetting closed rentals) are validated
  // as they arrive, against the state as it will be once the ones before them are persisted, and
  // written together: one write per batch instead of one per posting, so an account with thousands
  // of running rentals keeps up (a provider with 10,000 rentals is credited 1,000 times a second).
  // Answers go out after the write. Any other command waits (stashed) until the batch is written,
  // so commands still take effect in arrival order.
  private final List<Event> pendingEvents = new ArrayList<>();
  private final List<Runnable> pendingAnswers = new ArrayList<>();

  /** The state once {@link #pendingEvents} are persisted; null when nothing is buffered. */
  private Active pendingState;

  /** A command was stashed behind the buffer: everything after it waits too, to keep the order. */
  private boolean holdingBack;

  private EventHandler<State, Event> events;

  /** How long changed payout details wait before payouts use them, unless configured otherwise. */
  public static final Duration DEFAULT_PAYOUT_DETAILS_HOLD = Duration.ofHours(24);

  /**
   * How many open holds (one per live rental: pending, provisioning, running or stopping) an
   * account may have at once, unless configured otherwise.
   */
  public static final int DEFAULT_MAX_LIVE_RENTALS = 100;

  public static void init(ActorSystem<?> system, Clock clock) {
    init(system, clock, DEFAULT_PAYOUT_DETAILS_HOLD);
  }

  /** {@code payoutDetailsHold}: {@code tickmark.accounts.payout-details-hold}. */
  public static void init(ActorSystem<?> system, Clock clock, Duration payoutDetailsHold) {
    init(system, clock, payoutDetailsHold, DEFAULT_MAX_LIVE_RENTALS);
  }

  /** {@code maxLiveRentals}: {@code tickmark.accounts.max-live-rentals}. */
  public static void init(
      ActorSystem<?> system, Clock clock, Duration payoutDetailsHold, int maxLiveRentals) {
    ClusterSharding.get(system)
        .init(
            Entity.of(
                ENTITY_KEY,
                ctx -> create(ctx.getEntityId(), clock, payoutDetailsHold, maxLiveRentals)));
  }

  public static Behavior<Command> create(String accountId, Clock clock) {
    return create(accountId, clock, DEFAULT_PAYOUT_DETAILS_HOLD);
  }

  public static Behavior<Command> create(
      String accountId, Clock clock, Duration payoutDetailsHold) {
    return create(accountId, clock, payoutDetailsHold, DEFAULT_MAX_LIVE_RENTALS);
  }

  public static Behavior<Command> create(
      String accountId, Clock clock, Duration payoutDetailsHold, int maxLiveRentals) {
    if (maxLiveRentals < 1)
      throw new IllegalArgumentException("max-live-rentals must be at least 1: " + maxLiveRentals);
    return Behaviors.setup(
        context ->
            Behaviors.withTimers(
                timers ->
                    new Account(
                        accountId, clock, payoutDetailsHold, maxLiveRentals, context, timers)));
  }

  private final Duration payoutDetailsHold;
  private final TimerScheduler<Command> timers;

  /** The longest the account sleeps while it has pending holds. */
  private static final Duration EXPIRY_LOOK_EVERY = Duration.ofSeconds(1);

  /** The timer that releases pending holds their rentals did not confirm in time. */
  private enum ExpireHolds implements Command {
    INSTANCE
  }

  /**
   * A pending hold's own timer, on the scheduler's monotonic time: its confirmation window is over,
   * whatever the wall clock reads. Its expiry instant is one of the account's clock, so a clock
   * stepped back (an hour, say) would otherwise keep the money held for as long as the step.
   */
  private record HoldWindowOver(String holdId) implements Command {}

  /**
   * What a pending hold is given at most after a recovery, which cannot tell how much of its window
   * was used up in real time: more than any launch's window (the rentals' {@code confirm-within} is
   * 60 s). A confirmation that comes even later is refused ({@code hold_expired}) and its launch
   * fails cleanly.
   */
  static final Duration PENDING_AT_MOST_AFTER_RECOVERY = Duration.ofMinutes(5);

  /** The most open holds at once; a new one past it is refused ({@code too_many_rentals}). */
  private final int maxLiveRentals;

  private Account(
      String accountId,
      Clock clock,
      Duration payoutDetailsHold,
      int maxLiveRentals,
      ActorContext<Command> context,
      TimerScheduler<Command> timers) {
    super(PersistenceId.of(ENTITY_KEY.name(), accountId), JournalFailures.RESTART_WITH_BACKOFF);
    this.accountId = accountId;
    this.clock = clock;
    this.payoutDetailsHold = payoutDetailsHold;
    this.maxLiveRentals = maxLiveRentals;
    this.context = context;
    this.timers = timers;
  }

  /** An answer, and the event to persist before giving it (null: nothing to persist). */
  record Outcome<R>(Event event, R answer) {
    static <R> Outcome<R> answer(R answer) {
      return new Outcome<>(null, answer);
    }
  }

  @Override
  public SignalHandler<State> signalHandler() {
    // After a restart (a failed write), whatever was buffered was never persisted nor answered: its
    // senders retry.
    return newSignalHandlerBuilder()
        .onSignal(
            RecoveryCompleted.instance(),
            state -> {
              forgetBuffer();
              if (state instanceof Active a) {
                expireLater(a);
                a.marks().holds().pending().forEach(this::startWindowAfterRecovery);
              }
            })
        .build();
  }

  private <R> ReplyEffect<Event, State> buffer(
      Active state, ActorRef<R> replyTo, BiFunction<Active, Instant, Outcome<R>> posting) {
    if (holdingBack) return Effect().stash();
    if (pendingState == null) {
      pendingState = state;
      context.getSelf().tell(FlushPostings.INSTANCE);
    }
    Outcome<R> outcome = posting.apply(pendingState, now());
    if (outcome.event() != null) {
      pendingEvents.add(outcome.event());
      pendingState = (Active) eventHandlerOnce().apply(pendingState, outcome.event());
    }
    pendingAnswers.add(() -> replyTo.tell(outcome.answer()));
    if (pendingEvents.size() >= MAX_EVENTS_PER_WRITE) return flush();
    return Effect().noReply();
  }

  private ReplyEffect<Event, State> flush() {
    if (pendingState == null)
      return Effect().noReply().thenUnstashAll(); // written already (a full batch, or a restart)
    List<Event> toPersist = List.copyOf(pendingEvents);
    List<Runnable> answers = List.copyOf(pendingAnswers);
    forgetBuffer();
    if (toPersist.isEmpty()) {
      answers.forEach(Runnable::run);
      return Effect().noReply().thenUnstashAll();
    }
    return Effect()
        .persist(toPersist)
        .thenRun(s -> answers.forEach(Runnable::run))
        .thenNoReply()
        .thenUnstashAll();
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

  /**
   * Snapshots are written as they are; one in the shape before {@link Active} is upgraded when it
   * is read.
   */
  @Override
  public SnapshotAdapter<State> snapshotAdapter() {
    return new SnapshotAdapter<>() {
      @Override
      public Object toJournal(State state) {
        return state;
      }

      @Override
      public State fromJournal(Object from) {
        return from instanceof OpenAccount legacy ? legacy.upgrade() : (State) from;
      }
    };
  }

  /** A posting key that is missing, blank or absurdly long is refused before any rule runs. */
  private static boolean badKey(String key) {
    return key == null || key.isBlank() || key.length() > 256;
  }

  private static <T> StatusReply<T> badKeyReply(String what) {
    return reply(Rejection.INVALID_KEY, what + " must be 1 to 256 characters");
  }

  // ---------------------------------------------------------------------------------------------
  // Commands: one handler per state. The table is built once for every account
  // (SharedCommandHandler): each handler takes the account it runs for.

  private static final SharedCommandHandler<Account, Command, Event, State> COMMANDS = commands();

  @Override
  public CommandHandlerWithReply<Command, Event, State> commandHandler() {
    return (state, command) -> COMMANDS.apply(this, state, command);
  }

  private static SharedCommandHandler<Account, Command, Event, State> commands() {
    var builder = SharedCommandHandler.<Account, Command, Event, State>builder();
    unopenedHandler(builder.forStateType(Unopened.class));
    activeHandler(builder.forStateType(Active.class));
    return builder.build();
  }

  private static void unopenedHandler(
      SharedCommandHandler.ForState<Account, Unopened, Command, Event, State> unopened) {
    unopened
        .onCommand(Open.class, Account::onOpen)
        .onCommand(GetSummary.class, (a, s, c) -> a.Effect().reply(c.replyTo(), a.notOpen()))
        .onCommand(Deposit.class, (a, s, c) -> a.Effect().reply(c.replyTo(), a.notFound()))
        .onCommand(PlaceHold.class, (a, s, c) -> a.Effect().reply(c.replyTo(), a.notFound()))
        .onCommand(ExtendHold.class, (a, s, c) -> a.Effect().reply(c.replyTo(), a.notFound()))
        .onCommand(Capture.class, (a, s, c) -> a.Effect().reply(c.replyTo(), a.notFound()))
        .onCommand(CaptureStorage.class, (a, s, c) -> a.Effect().reply(c.replyTo(), a.notFound()))
        .onCommand(ReleaseHold.class, (a, s, c) -> a.Effect().reply(c.replyTo(), a.notFound()))
        .onCommand(CreditEarnings.class, (a, s, c) -> a.Effect().reply(c.replyTo(), a.notFound()))
        .onCommand(Payout.class, (a, s, c) -> a.Effect().reply(c.replyTo(), a.notFound()))
        .onCommand(ReturnPayout.class, (a, s, c) -> a.Effect().reply(c.replyTo(), a.notFound()))
        .onCommand(RefundCharge.class, (a, s, c) -> a.Effect().reply(c.replyTo(), a.notFound()))
        .onCommand(ReverseEarnings.class, (a, s, c) -> a.Effect().reply(c.replyTo(), a.notFound()))
        .onCommand(SetSpendCap.class, (a, s, c) -> a.Effect().reply(c.replyTo(), a.notFound()))
        .onCommand(SetPayoutDetails.class, (a, s, c) -> a.Effect().reply(c.replyTo(), a.notFound()))
        .onCommand(Suspend.class, (a, s, c) -> a.Effect().reply(c.replyTo(), a.notFound()))
        .onCommand(Resume.class, (a, s, c) -> a.Effect().reply(c.replyTo(), a.notFound()))
        .onCommand(GetHold.class, (a, s, c) -> a.Effect().reply(c.replyTo(), a.notFound()))
        .onCommand(
            ForgetClosed.class, (a, s, c) -> a.Effect().reply(c.replyTo(), Done.getInstance()))
        .onCommand(ConfirmHold.class, (a, s, c) -> a.Effect().reply(c.replyTo(), a.notFound()))
        .onCommand(ExpireHolds.class, Account::ignore)
        .onCommand(HoldWindowOver.class, Account::ignore)
        .onCommand(FlushPostings.class, Account::ignore);
  }

  /**
   * Settlement postings are buffered (see {@link #buffer}); any other command waits while some are.
   */
  private static void activeHandler(
      SharedCommandHandler.ForState<Account, Active, Command, Event, State> active) {
    active
        .onCommand(Capture.class, Account::onCapture)
        .onCommand(CaptureStorage.class, Account::onCaptureStorage)
        .onCommand(CreditEarnings.class, Account::onCreditEarnings)
        .onCommand(ForgetClosed.class, Account::onForgetClosed)
        .onCommand(FlushPostings.class, (a, s, c) -> a.flush())
        .onCommandWhile(Account::buffering, (a, s, c) -> a.waitForBuffer())
        .onCommand(Open.class, Account::onReopen)
        .onCommand(GetSummary.class, (a, s, c) -> a.Effect().reply(c.replyTo(), a.summary(s)))
        .onCommand(Deposit.class, Account::onDeposit)
        .onCommand(PlaceHold.class, Account::onPlaceHold)
        .onCommand(ConfirmHold.class, Account::onConfirmHold)
        .onCommand(ExpireHolds.class, Account::onExpireHolds)
        .onCommand(HoldWindowOver.class, Account::onHoldWindowOver)
        .onCommand(ExtendHold.class, Account::onExtendHold)
        .onCommand(ReleaseHold.class, Account::onReleaseHold)
        .onCommand(Payout.class, Account::onPayout)
        .onCommand(ReturnPayout.class, Account::onReturnPayout)
        .onCommand(RefundCharge.class, Account::onRefundCharge)
        .onCommand(ReverseEarnings.class, Account::onReverseEarnings)
        .onCommand(SetSpendCap.class, Account::onSetSpendCap)
        .onCommand(SetPayoutDetails.class, Account::onSetPayoutDetails)
        .onCommand(Suspend.class, Account::onSuspend)
        .onCommand(Resume.class, Account::onResume)
        .onCommand(GetHold.class, Account::onGetHold);
  }

  private boolean buffering() {
    return pendingState != null;
  }

  private ReplyEffect<Event, State> ignore(State state, Command command) {
    return Effect().noReply();
  }

  private ReplyEffect<Event, State> onOpen(Unopened state, Open cmd) {
    if (cmd.name() == null || cmd.name().isBlank()) {
      return Effect()
          .reply(cmd.replyTo(), reply(Rejection.INVALID_NAME, "an account needs a name"));
    }
    return Effect()
        .persist(new Opened(cmd.name(), now()))
        .thenReply(cmd.replyTo(), s -> StatusReply.success(summary((Active) s)));
  }

  private ReplyEffect<Event, State> onReopen(Active state, Open cmd) {
    if (state.profile().name().equals(cmd.name()))
      return Effect().reply(cmd.replyTo(), StatusReply.success(summary(state)));
    return Effect()
        .reply(
            cmd.replyTo(),
            reply(Rejection.ALREADY_EXISTS, "account " + accountId + " is already open"));
  }

  private ReplyEffect<Event, State> onDeposit(Active state, Deposit cmd) {
    if (badKey(cmd.reference()))
      return Effect().reply(cmd.replyTo(), badKeyReply("a deposit reference"));
    String key = "deposit:" + cmd.reference();
    Long earlier = state.marks().deposits().get(cmd.reference());
    if (earlier != null) {
      if (earlier == cmd.amount())
        return Effect().reply(cmd.replyTo(), StatusReply.success(new Posting(key, earlier, true)));
      return Effect()
          .reply(cmd.replyTo(), conflict(key, "was applied with amount " + Money.format(earlier)));
    }
    if (cmd.amount() <= 0)
      return Effect()
          .reply(cmd.replyTo(), reply(Rejection.INVALID_AMOUNT, "a deposit must be positive"));
    if (cmd.amount() > Money.MAX_AMOUNT - state.totals().deposited()) {
      return Effect()
          .reply(
              cmd.replyTo(),
              reply(
                  Rejection.AMOUNT_TOO_LARGE, "the balance would exceed the largest amount kept"));
    }
    return Effect()
        .persist(new Deposited(cmd.reference(), cmd.amount(), now()))
        .thenReply(cmd.replyTo(), s -> StatusReply.success(new Posting(key, cmd.amount(), false)));
  }

  /** A snapshot's storage hold (its id is the snapshot's) is no live rental. */
  private static final String SNAPSHOT_HOLD_PREFIX = "snap_";

  private static long liveRentalHolds(Active state) {
    return state.marks().holds().open().keySet().stream()
        .filter(id -> !id.startsWith(SNAPSHOT_HOLD_PREFIX))
        .count();
  }

  private ReplyEffect<Event, State> onPlaceHold(Active state, PlaceHold cmd) {
    if (badKey(cmd.holdId())) return Effect().reply(cmd.replyTo(), badKeyReply("a hold id"));
    Hold existing = state.marks().holds().get(cmd.holdId());
    if (existing != null) {
      // A retried PlaceHold answers the hold as it stands (even once suspended: the hold exists and
      // its rental must be able to go on, or release it); a different amount is a conflict.
      if (existing.amount() >= cmd.amount() && state.marks().holds().isOpen(cmd.holdId())) {
        if (cmd.confirmWithin() == null && state.marks().holds().isPending(cmd.holdId()))
          return confirm(cmd.holdId(), cmd.replyTo());
        return Effect()
            .reply(cmd.replyTo(), StatusReply.success(existing.view(cmd.holdId(), true)));
      }
      return Effect()
          .reply(cmd.replyTo(), conflict("hold:" + cmd.holdId(), "the hold already exists"));
    }
    if (state.marks().forgotten().contains(cmd.holdId())) {
      return Effect()
          .reply(
              cmd.replyTo(),
              reply(
                  Rejection.HOLD_CLOSED,
                  "hold " + cmd.holdId() + " belonged to a rental that has closed"));
    }
    if (state.profile().suspended()) {
      return Effect()
          .reply(
              cmd.replyTo(),
              reply(Rejection.ACCOUNT_SUSPENDED, "account " + accountId + " is suspended"));
    }
    if (cmd.amount() <= 0)
      return Effect()
          .reply(cmd.replyTo(), reply(Rejection.INVALID_AMOUNT, "a hold must be positive"));
    if (cmd.confirmWithin() != null
        && (cmd.confirmWithin().isNegative() || cmd.confirmWithin().isZero()))
      return Effect()
          .reply(
              cmd.replyTo(),
              reply(Rejection.INVALID_AMOUNT, "a pending hold needs a positive time to confirm"));
    // One open hold per live rental: the cap on an account's live rentals is checked here, where
    // holds are placed one at a time, so concurrent launches cannot slip past it.
    if (!cmd.holdId().startsWith(SNAPSHOT_HOLD_PREFIX)
        && liveRentalHolds(state) >= maxLiveRentals) {
      return Effect()
          .reply(
              cmd.replyTo(),
              reply(
                  Rejection.TOO_MANY_RENTALS,
                  "account "
                      + accountId
                      + " already has "
                      + maxLiveRentals
                      + " live rentals, the most it may have at once"));
    }
    ReplyEffect<Event, State> refused = refuseHoldGrowth(state, cmd.amount(), cmd.replyTo());
    if (refused != null) return refused;
    Instant expiresAt = cmd.confirmWithin() == null ? null : now().plus(cmd.confirmWithin());
    return Effect()
        .persist(new HoldPlaced(cmd.holdId(), cmd.amount(), now(), expiresAt))
        .thenRun(
            s -> {
              expireLater((Active) s);
              if (cmd.confirmWithin() != null) startWindow(cmd.holdId(), cmd.confirmWithin());
            })
        .thenReply(cmd.replyTo(), s -> holdView((Active) s, cmd.holdId()));
  }

  private ReplyEffect<Event, State> onConfirmHold(Active state, ConfirmHold cmd) {
    Holds holds = state.marks().holds();
    if (holds.isPending(cmd.holdId())) return confirm(cmd.holdId(), cmd.replyTo());
    if (holds.isOpen(cmd.holdId()))
      return Effect().reply(cmd.replyTo(), holdView(state, cmd.holdId()));
    if (holds.isClosed(cmd.holdId()))
      return Effect()
          .reply(
              cmd.replyTo(),
              reply(Rejection.HOLD_CLOSED, "hold " + cmd.holdId() + " was released already"));
    // Expired (its timer ran before the confirmation came), or never placed: either way the
    // money went back, and a confirmation now would book a rental nothing covers.
    return Effect()
        .reply(
            cmd.replyTo(),
            reply(Rejection.HOLD_EXPIRED, "hold " + cmd.holdId() + " is not open to confirm"));
  }

  private ReplyEffect<Event, State> confirm(
      String holdId, ActorRef<StatusReply<HoldView>> replyTo) {
    return Effect()
        .persist(new HoldConfirmed(holdId, now()))
        .thenRun(s -> expireLater((Active) s))
        .thenReply(replyTo, s -> holdView((Active) s, holdId));
  }

  /** Releases, each exactly once, the pending holds whose rentals did not confirm them in time. */
  private ReplyEffect<Event, State> onExpireHolds(Active state, ExpireHolds cmd) {
    Instant now = now();
    Holds holds = state.marks().holds();
    List<Event> expired = new ArrayList<>();
    for (String holdId : holds.expiredAt(now))
      expired.add(new HoldExpired(holdId, holds.open().get(holdId).remaining(), now));
    if (expired.isEmpty()) {
      expireLater(state);
      return Effect().noReply();
    }
    return Effect().persist(expired).thenRun(s -> expireLater((Active) s)).thenNoReply();
  }

  /** A pending hold's window ran out in real time: released (exactly once) unless confirmed. */
  private ReplyEffect<Event, State> onHoldWindowOver(Active state, HoldWindowOver cmd) {
    Holds holds = state.marks().holds();
    if (!holds.isPending(cmd.holdId())) return Effect().noReply();
    return Effect()
        .persist(new HoldExpired(cmd.holdId(), holds.open().get(cmd.holdId()).remaining(), now()))
        .thenRun(s -> expireLater((Active) s))
        .thenNoReply();
  }

  private void startWindow(String holdId, Duration window) {
    HoldWindowOver over = new HoldWindowOver(holdId);
    timers.startSingleTimer(over, over, window);
  }

  private void startWindowAfterRecovery(String holdId, Instant expiresAt) {
    Duration left = Duration.between(now(), expiresAt);
    if (left.isNegative()) left = Duration.ZERO;
    if (left.compareTo(PENDING_AT_MOST_AFTER_RECOVERY) > 0) left = PENDING_AT_MOST_AFTER_RECOVERY;
    startWindow(holdId, left);
  }

  /** Wakes the account when its earliest pending hold is due to expire (none: no timer). */
  private void expireLater(Active state) {
    Instant next = state.marks().holds().nextExpiry();
    if (next == null) {
      timers.cancel(ExpireHolds.INSTANCE);
      return;
    }
    // Looked at again at least every second: a clock stepped forward is seen within a second.
    Duration in = Duration.between(now(), next);
    if (in.compareTo(EXPIRY_LOOK_EVERY) > 0) in = EXPIRY_LOOK_EVERY;
    timers.startSingleTimer(
        ExpireHolds.INSTANCE, ExpireHolds.INSTANCE, in.isNegative() ? Duration.ZERO : in);
  }

  private ReplyEffect<Event, State> onExtendHold(Active state, ExtendHold cmd) {
    if (badKey(cmd.holdId())) return Effect().reply(cmd.replyTo(), badKeyReply("a hold id"));
    Hold hold = state.marks().holds().open().get(cmd.holdId());
    if (hold == null) return Effect().reply(cmd.replyTo(), missingOrClosed(state, cmd.holdId()));
    if (cmd.newAmount() <= hold.amount())
      return Effect().reply(cmd.replyTo(), StatusReply.success(hold.view(cmd.holdId(), true)));
    long added = cmd.newAmount() - hold.amount();
    ReplyEffect<Event, State> refused = refuseHoldGrowth(state, added, cmd.replyTo());
    if (refused != null) return refused;
    return Effect()
        .persist(new HoldExtended(cmd.holdId(), cmd.newAmount(), added, now()))
        .thenReply(cmd.replyTo(), s -> holdView((Active) s, cmd.holdId()));
  }

  private ReplyEffect<Event, State> refuseHoldGrowth(
      Active state, long additional, ActorRef<StatusReply<HoldView>> replyTo) {
    if (additional > state.totals().available()) {
      return Effect()
          .reply(
              replyTo,
              reply(
                  Rejection.INSUFFICIENT_FUNDS,
                  "available "
                      + Money.format(state.totals().available())
                      + " EUR, the hold needs "
                      + Money.format(additional)
                      + " EUR"));
    }
    if (state.exceedsCap(additional, monthOf(now()))) {
      return Effect()
          .reply(
              replyTo,
              reply(
                  Rejection.SPEND_CAP_REACHED,
                  "the monthly spend cap of "
                      + Money.format(state.profile().spendCap())
                      + " EUR would be exceeded"));
    }
    return null;
  }

  private ReplyEffect<Event, State> onCapture(Active state, Capture cmd) {
    return buffer(state, cmd.replyTo(), (pending, now) -> capture(pending, cmd, now));
  }

  private ReplyEffect<Event, State> onCaptureStorage(Active state, CaptureStorage cmd) {
    return buffer(state, cmd.replyTo(), (pending, now) -> captureStorage(pending, cmd, now));
  }

  private ReplyEffect<Event, State> onCreditEarnings(Active state, CreditEarnings cmd) {
    return buffer(state, cmd.replyTo(), (pending, now) -> credit(pending, cmd, now));
  }

  private ReplyEffect<Event, State> onForgetClosed(Active state, ForgetClosed cmd) {
    return buffer(state, cmd.replyTo(), (pending, now) -> forget(pending, cmd, now));
  }

  /**
   * What a capture does to {@code state}: at most one event, and the answer once it is persisted.
   */
  private static Outcome<StatusReply<Posting>> capture(Active state, Capture cmd, Instant now) {
    return capture(state, cmd, now, false);
  }

  /** The same rules as a capture; only the event differs, so the ledger books it as revenue. */
  private static Outcome<StatusReply<Posting>> captureStorage(
      Active state, CaptureStorage cmd, Instant now) {
    Capture plain = new Capture(cmd.holdId(), cmd.throughSecond(), cmd.cumulativeAmount(), null);
    return capture(state, plain, now, true);
  }

  private static Outcome<StatusReply<Posting>> capture(
      Active state, Capture cmd, Instant now, boolean storage) {
    if (badKey(cmd.holdId())) return Outcome.answer(badKeyReply("a hold id"));
    String key = cmd.holdId() + ":" + cmd.throughSecond();
    if (cmd.throughSecond() <= 0 || cmd.cumulativeAmount() < 0) {
      return Outcome.answer(
          reply(
              Rejection.INVALID_AMOUNT, "captures name a second from 1 and a non-negative total"));
    }
    Holds holds = state.marks().holds();
    Hold hold = holds.get(cmd.holdId());
    if (hold == null)
      return Outcome.answer(reply(Rejection.HOLD_NOT_FOUND, "no hold " + cmd.holdId()));
    if (cmd.throughSecond() == hold.throughSecond() && hold.throughSecond() > 0) {
      if (cmd.cumulativeAmount() == hold.lastCumulative()) {
        return Outcome.answer(StatusReply.success(new Posting(key, hold.lastAmount(), true)));
      }
      return Outcome.answer(
          conflict(key, "was captured with cumulative " + Money.format(hold.lastCumulative())));
    }
    if (cmd.throughSecond() < hold.throughSecond()) {
      // Below the high-water mark: applied before. Cumulative totals only grow, so a larger one is
      // a lie.
      if (cmd.cumulativeAmount() <= hold.lastCumulative()) {
        return Outcome.answer(StatusReply.success(new Posting(key, 0, true)));
      }
      return Outcome.answer(conflict(key, "is older than the latest capture but claims more"));
    }
    if (!holds.isOpen(cmd.holdId())) {
      return Outcome.answer(reply(Rejection.HOLD_CLOSED, "hold " + cmd.holdId() + " was released"));
    }
    long amount = cmd.cumulativeAmount() - hold.captured();
    if (amount < 0) return Outcome.answer(conflict(key, "cumulative capture went down"));
    if (amount > hold.remaining()) {
      return Outcome.answer(
          reply(
              Rejection.HOLD_EXCEEDED,
              "capture of "
                  + Money.format(amount)
                  + " EUR exceeds the "
                  + Money.format(hold.remaining())
                  + " EUR left on the hold"));
    }
    Event event =
        storage
            ? new StorageCaptured(
                cmd.holdId(), cmd.throughSecond(), cmd.cumulativeAmount(), amount, now)
            : new Captured(cmd.holdId(), cmd.throughSecond(), cmd.cumulativeAmount(), amount, now);
    return new Outcome<>(event, StatusReply.success(new Posting(key, amount, false)));
  }

  private ReplyEffect<Event, State> onReleaseHold(Active state, ReleaseHold cmd) {
    if (badKey(cmd.holdId())) return Effect().reply(cmd.replyTo(), badKeyReply("a hold id"));
    Holds holds = state.marks().holds();
    Hold open = holds.open().get(cmd.holdId());
    if (open == null) {
      Hold closed = holds.closed().get(cmd.holdId());
      if (closed != null)
        return Effect().reply(cmd.replyTo(), StatusReply.success(closed.view(cmd.holdId(), false)));
      StatusReply<HoldView> notFound = reply(Rejection.HOLD_NOT_FOUND, "no hold " + cmd.holdId());
      if (state.marks().forgotten().contains(cmd.holdId()))
        return Effect().reply(cmd.replyTo(), notFound);
      // Never placed: its PlaceHold may still be on the way (overtaken by this release); keep a
      // tombstone so that it is refused when it lands.
      return Effect()
          .persist(new UnplacedHoldReleased(cmd.holdId(), now()))
          .thenReply(cmd.replyTo(), s -> notFound);
    }
    return Effect()
        .persist(new HoldReleased(cmd.holdId(), open.remaining(), now()))
        .thenReply(cmd.replyTo(), s -> holdView((Active) s, cmd.holdId()));
  }

  /**
   * What an earnings credit does to {@code state}: at most one event, and the answer once it is
   * persisted.
   */
  private static Outcome<StatusReply<Posting>> credit(
      Active state, CreditEarnings cmd, Instant now) {
    if (badKey(cmd.sourceId())) return Outcome.answer(badKeyReply("a source id"));
    String key = cmd.sourceId() + ":" + cmd.throughSecond();
    if (cmd.throughSecond() <= 0
        || cmd.cumulativeProviderAmount() < 0
        || cmd.cumulativePlatformAmount() < 0) {
      return Outcome.answer(
          reply(Rejection.INVALID_AMOUNT, "credits name a second from 1 and non-negative totals"));
    }
    Sources sources = state.marks().sources();
    SourceMark mark = sources.get(cmd.sourceId());
    if (mark == null && state.marks().forgotten().contains(cmd.sourceId())) {
      return Outcome.answer(
          reply(
              Rejection.HOLD_CLOSED,
              "source " + cmd.sourceId() + " belonged to a rental that has closed"));
    }
    long throughSecond = mark == null ? -1 : mark.throughSecond();
    if (mark != null && cmd.throughSecond() == throughSecond) {
      if (cmd.cumulativeProviderAmount() == mark.cumulativeProvider()
          && cmd.cumulativePlatformAmount() == mark.cumulativePlatform()) {
        if (cmd.last() && sources.isOpen(cmd.sourceId())) {
          // The source ends on a second it already settled: close it, moving no money.
          return new Outcome<>(
              new EarningsCredited(
                  cmd.sourceId(),
                  cmd.throughSecond(),
                  mark.cumulativeProvider(),
                  mark.cumulativePlatform(),
                  0,
                  0,
                  true,
                  now),
              StatusReply.success(new Posting(key, mark.lastProvider(), true)));
        }
        return Outcome.answer(StatusReply.success(new Posting(key, mark.lastProvider(), true)));
      }
      return Outcome.answer(conflict(key, "was credited with different cumulative shares"));
    }
    if (mark != null && cmd.throughSecond() < throughSecond) {
      if (cmd.cumulativeProviderAmount() <= mark.cumulativeProvider()
          && cmd.cumulativePlatformAmount() <= mark.cumulativePlatform()) {
        return Outcome.answer(StatusReply.success(new Posting(key, 0, true)));
      }
      return Outcome.answer(conflict(key, "is older than the latest credit but claims more"));
    }
    if (mark != null && !sources.isOpen(cmd.sourceId())) {
      return Outcome.answer(
          reply(
              Rejection.HOLD_CLOSED,
              "source " + cmd.sourceId() + " has settled for the last time"));
    }
    long providerBefore = mark == null ? 0 : mark.cumulativeProvider();
    long platformBefore = mark == null ? 0 : mark.cumulativePlatform();
    long provider = cmd.cumulativeProviderAmount() - providerBefore;
    long platform = cmd.cumulativePlatformAmount() - platformBefore;
    if (provider < 0 || platform < 0)
      return Outcome.answer(conflict(key, "cumulative shares went down"));
    if (provider > Money.MAX_AMOUNT - state.totals().credited()
        || platform > Money.MAX_AMOUNT - state.totals().platformCredited()) {
      return Outcome.answer(
          reply(Rejection.AMOUNT_TOO_LARGE, "earnings would exceed the largest amount kept"));
    }
    return new Outcome<>(
        new EarningsCredited(
            cmd.sourceId(),
            cmd.throughSecond(),
            cmd.cumulativeProviderAmount(),
            cmd.cumulativePlatformAmount(),
            provider,
            platform,
            cmd.last(),
            now),
        StatusReply.success(new Posting(key, provider, false)));
  }

  /**
   * Buffered with the postings, like them: closing rentals on a busy provider account are as
   * frequent as its credits, and a single write each would break up its batches.
   */
  private static Outcome<Done> forget(Active state, ForgetClosed cmd, Instant now) {
    String id = cmd.id();
    boolean open = state.marks().holds().isOpen(id) || state.marks().sources().isOpen(id);
    boolean closed = state.marks().holds().isClosed(id) || state.marks().sources().isClosed(id);
    if (badKey(id) || open || !closed) return Outcome.answer(Done.getInstance());
    return new Outcome<>(new ClosedForgotten(id, now), Done.getInstance());
  }

  private ReplyEffect<Event, State> onPayout(Active state, Payout cmd) {
    if (badKey(cmd.payoutId())) return Effect().reply(cmd.replyTo(), badKeyReply("a payout id"));
    String key = "payout:" + cmd.payoutId();
    Long earlier = state.marks().payouts().get(cmd.payoutId());
    if (earlier != null) {
      if (earlier == cmd.amount())
        return Effect().reply(cmd.replyTo(), StatusReply.success(new Posting(key, earlier, true)));
      return Effect()
          .reply(cmd.replyTo(), conflict(key, "was paid with amount " + Money.format(earlier)));
    }
    if (cmd.amount() <= 0)
      return Effect()
          .reply(cmd.replyTo(), reply(Rejection.INVALID_AMOUNT, "a payout must be positive"));
    if (state.profile().suspended()) {
      return Effect()
          .reply(
              cmd.replyTo(),
              reply(Rejection.ACCOUNT_SUSPENDED, "account " + accountId + " is suspended"));
    }
    if (cmd.amount() > state.totals().earnings()) {
      return Effect()
          .reply(
              cmd.replyTo(),
              reply(
                  Rejection.INSUFFICIENT_EARNINGS,
                  "earnings are "
                      + Money.format(state.totals().earnings())
                      + " EUR, the payout asks "
                      + Money.format(cmd.amount())
                      + " EUR"));
    }
    return Effect()
        .persist(new PaidOut(cmd.payoutId(), cmd.amount(), now()))
        .thenReply(cmd.replyTo(), s -> StatusReply.success(new Posting(key, cmd.amount(), false)));
  }

  private ReplyEffect<Event, State> onReturnPayout(Active state, ReturnPayout cmd) {
    if (badKey(cmd.payoutId())) return Effect().reply(cmd.replyTo(), badKeyReply("a payout id"));
    String key = "payout_returned:" + cmd.payoutId();
    Long paid = state.marks().payouts().get(cmd.payoutId());
    if (paid == null)
      return Effect()
          .reply(
              cmd.replyTo(),
              reply(
                  Rejection.NOT_FOUND,
                  "account " + accountId + " has no payout " + cmd.payoutId() + " to return"));
    if (state.marks().returns().containsKey(cmd.payoutId()))
      return Effect().reply(cmd.replyTo(), StatusReply.success(new Posting(key, paid, true)));
    if (!PayoutReturns.isReasonCode(cmd.reason()))
      return Effect()
          .reply(cmd.replyTo(), reply(Rejection.INVALID_REASON, PayoutReturns.REASON_CODE_RULE));
    return Effect()
        .persist(new PayoutReturned(cmd.payoutId(), paid, cmd.reason(), cmd.payee(), now()))
        .thenReply(cmd.replyTo(), s -> StatusReply.success(new Posting(key, paid, false)));
  }

  private ReplyEffect<Event, State> onRefundCharge(Active state, RefundCharge cmd) {
    if (badKey(cmd.rentalId())) return Effect().reply(cmd.replyTo(), badKeyReply("a rental id"));
    if (cmd.cumulativeAmount() <= 0 || cmd.cumulativeAmount() > Money.MAX_AMOUNT)
      return Effect()
          .reply(cmd.replyTo(), reply(Rejection.INVALID_AMOUNT, "a refund must be positive"));
    String key = "refund:" + cmd.rentalId() + ":" + cmd.cumulativeAmount();
    long before = state.marks().refunded(cmd.rentalId());
    if (cmd.cumulativeAmount() <= before)
      return Effect().reply(cmd.replyTo(), StatusReply.success(new Posting(key, 0, true)));
    long amount = cmd.cumulativeAmount() - before;
    return Effect()
        .persist(new ChargeRefunded(cmd.rentalId(), cmd.cumulativeAmount(), amount, now()))
        .thenReply(cmd.replyTo(), s -> StatusReply.success(new Posting(key, amount, false)));
  }

  private ReplyEffect<Event, State> onReverseEarnings(Active state, ReverseEarnings cmd) {
    if (badKey(cmd.rentalId())) return Effect().reply(cmd.replyTo(), badKeyReply("a rental id"));
    if (cmd.cumulativeProvider() < 0
        || cmd.cumulativePlatform() < 0
        || cmd.cumulativeProvider() + cmd.cumulativePlatform() <= 0
        || cmd.cumulativeProvider() + cmd.cumulativePlatform() > Money.MAX_AMOUNT)
      return Effect()
          .reply(cmd.replyTo(), reply(Rejection.INVALID_AMOUNT, "a reversal must be positive"));
    long total = cmd.cumulativeProvider() + cmd.cumulativePlatform();
    String key = "reversal:" + cmd.rentalId() + ":" + total;
    Reversal before = state.marks().reversed(cmd.rentalId());
    // Cumulative, and both shares only grow: an older or repeated reversal moves nothing.
    if (total <= before.total())
      return Effect().reply(cmd.replyTo(), StatusReply.success(new Posting(key, 0, true)));
    long provider = Math.max(0, cmd.cumulativeProvider() - before.provider());
    long platform = Math.max(0, cmd.cumulativePlatform() - before.platform());
    return Effect()
        .persist(
            new EarningsReversed(
                cmd.rentalId(),
                Math.max(cmd.cumulativeProvider(), before.provider()),
                Math.max(cmd.cumulativePlatform(), before.platform()),
                provider,
                platform,
                now()))
        .thenReply(
            cmd.replyTo(), s -> StatusReply.success(new Posting(key, provider + platform, false)));
  }

  private ReplyEffect<Event, State> onSetSpendCap(Active state, SetSpendCap cmd) {
    if (cmd.monthlyCap() != null && (cmd.monthlyCap() < 0 || cmd.monthlyCap() > Money.MAX_AMOUNT)) {
      return Effect()
          .reply(
              cmd.replyTo(),
              reply(
                  Rejection.INVALID_AMOUNT,
                  "a spend cap must be between 0 and the largest amount"));
    }
    if (Objects.equals(state.profile().spendCap(), cmd.monthlyCap())) {
      return Effect().reply(cmd.replyTo(), StatusReply.success(summary(state)));
    }
    return Effect()
        .persist(new SpendCapSet(cmd.monthlyCap(), now()))
        .thenReply(cmd.replyTo(), s -> StatusReply.success(summary((Active) s)));
  }

  private ReplyEffect<Event, State> onSetPayoutDetails(Active state, SetPayoutDetails cmd) {
    String holder = cmd.holderName() == null ? "" : cmd.holderName().strip();
    if (holder.isEmpty()
        || holder.length() > MAX_HOLDER_NAME
        || holder.chars().anyMatch(Character::isISOControl)) {
      return Effect()
          .reply(
              cmd.replyTo(),
              reply(
                  Rejection.INVALID_HOLDER_NAME,
                  "the holder name must be 1 to " + MAX_HOLDER_NAME + " printable characters"));
    }
    var ibanProblem = Iban.problem(cmd.iban());
    if (ibanProblem.isPresent())
      return Effect().reply(cmd.replyTo(), reply(Rejection.INVALID_IBAN, ibanProblem.get()));
    String bic =
        cmd.bic() == null || cmd.bic().isBlank()
            ? null
            : cmd.bic().strip().toUpperCase(java.util.Locale.ROOT);
    if (bic != null && !Iban.isValidBic(bic)) {
      return Effect()
          .reply(
              cmd.replyTo(),
              reply(
                  Rejection.INVALID_BIC,
                  "a BIC has 8 or 11 characters, like DEUTDEFF or DEUTDEFF500"));
    }
    PayoutDetails details = new PayoutDetails(holder, Iban.normalize(cmd.iban()), bic);
    Profile profile = state.profile();
    PendingPayoutDetails pending = profile.pendingAt(now());
    PayoutDetails inForce = profile.detailsInForce(now());
    boolean unchanged =
        pending != null ? details.equals(pending.details()) : details.equals(inForce);
    // The same details again, after the bank returned a payout sent to them, are the provider's
    // word that they are right now: recorded, so that payouts go there again.
    boolean reconfirmed = pending == null && profile.returnBlocking(now()) != null;
    if (unchanged && !reconfirmed)
      return Effect().reply(cmd.replyTo(), StatusReply.success(summary(state)));
    // The first details apply at once (there is nothing to redirect); a change waits for the hold
    // period, so a stolen key cannot send the next payout elsewhere before the owner notices.
    // Going back to the details in force cancels a pending change at once.
    Instant effectiveAt =
        (inForce == null && pending == null) || details.equals(inForce)
            ? null
            : now().plus(payoutDetailsHold);
    return Effect()
        .persist(new PayoutDetailsSet(details, now(), effectiveAt))
        .thenReply(cmd.replyTo(), s -> StatusReply.success(summary((Active) s)));
  }

  private ReplyEffect<Event, State> onSuspend(Active state, Suspend cmd) {
    String reason = cmd.reason() == null || cmd.reason().isBlank() ? null : cmd.reason().strip();
    if (reason != null && reason.length() > 500)
      return Effect()
          .reply(
              cmd.replyTo(), reply(Rejection.INVALID_REASON, "a reason is at most 500 characters"));
    if (state.profile().suspended())
      return Effect().reply(cmd.replyTo(), StatusReply.success(summary(state)));
    return Effect()
        .persist(new Suspended(reason, now()))
        .thenReply(cmd.replyTo(), s -> StatusReply.success(summary((Active) s)));
  }

  private ReplyEffect<Event, State> onResume(Active state, Resume cmd) {
    if (!state.profile().suspended())
      return Effect().reply(cmd.replyTo(), StatusReply.success(summary(state)));
    return Effect()
        .persist(new Resumed(now()))
        .thenReply(cmd.replyTo(), s -> StatusReply.success(summary((Active) s)));
  }

  private ReplyEffect<Event, State> onGetHold(Active state, GetHold cmd) {
    return Effect().reply(cmd.replyTo(), holdView(state, cmd.holdId()));
  }

  // Events → state (no side effects). Pure, so built once and shared by every account.

  private static final EventHandler<State, Event> EVENTS = events();

  @Override
  public EventHandler<State, Event> eventHandler() {
    return EVENTS;
  }

  private static EventHandler<State, Event> events() {
    EventHandlerBuilder<State, Event> builder = EventHandlerBuilder.builder();
    builder
        .forStateType(Unopened.class)
        .onEvent(Opened.class, (state, e) -> Active.opened(e.name()));
    builder
        .forStateType(Active.class)
        .onEvent(Deposited.class, Active::withDeposit)
        .onEvent(HoldPlaced.class, Active::withPlacedHold)
        .onEvent(HoldConfirmed.class, Active::withConfirmedHold)
        .onEvent(HoldExpired.class, Active::withExpiredHold)
        .onEvent(HoldExtended.class, Active::withExtension)
        .onEvent(Captured.class, Active::withCapture)
        .onEvent(StorageCaptured.class, (s, e) -> s.withCapture(e.asCapture()))
        .onEvent(HoldReleased.class, Active::withRelease)
        .onEvent(EarningsCredited.class, Active::withEarnings)
        .onEvent(PaidOut.class, Active::withPayout)
        .onEvent(PayoutReturned.class, Active::withPayoutReturned)
        .onEvent(ChargeRefunded.class, Active::withChargeRefunded)
        .onEvent(EarningsReversed.class, Active::withEarningsReversed)
        .onEvent(SpendCapSet.class, Active::withSpendCap)
        .onEvent(PayoutDetailsSet.class, Active::withPayoutDetails)
        .onEvent(Suspended.class, (s, e) -> s.withSuspension(new Suspension(e.reason(), e.at())))
        .onEvent(Resumed.class, (s, e) -> s.withSuspension(null))
        .onEvent(ClosedForgotten.class, Active::withForgotten)
        .onEvent(UnplacedHoldReleased.class, Active::withUnplacedRelease);
    return builder.build();
  }

  // ---------------------------------------------------------------------------------------------

  private Instant now() {
    return clock.instant();
  }

  private Summary summary(Active state) {
    return state.summary(accountId, monthOf(now()), now());
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

  private static StatusReply<HoldView> holdView(Active state, String holdId) {
    Hold open = state.marks().holds().open().get(holdId);
    if (open != null) return StatusReply.success(open.view(holdId, true));
    Hold closed = state.marks().holds().closed().get(holdId);
    if (closed != null) return StatusReply.success(closed.view(holdId, false));
    return reply(Rejection.HOLD_NOT_FOUND, "no hold " + holdId);
  }

  private static StatusReply<HoldView> missingOrClosed(Active state, String holdId) {
    if (state.marks().holds().isClosed(holdId))
      return reply(Rejection.HOLD_CLOSED, "hold " + holdId + " was released");
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
