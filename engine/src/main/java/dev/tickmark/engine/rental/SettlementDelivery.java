package dev.tickmark.engine.rental;

import dev.tickmark.engine.Rejection;
import dev.tickmark.engine.account.Account;
import dev.tickmark.engine.host.Host;
import dev.tickmark.engine.rental.Rental.Checkpoint;
import dev.tickmark.engine.rental.Rental.Command;
import dev.tickmark.engine.rental.Rental.Delivered;
import dev.tickmark.engine.rental.Rental.Ending;
import dev.tickmark.engine.rental.Rental.Order;
import dev.tickmark.engine.rental.Rental.Released;
import dev.tickmark.engine.rental.Rental.Terms;
import dev.tickmark.engine.rental.Rental.Timer;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import org.apache.pekko.Done;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.javadsl.ActorContext;
import org.apache.pekko.actor.typed.javadsl.TimerScheduler;

/**
 * Delivers a rental's settlements and closes it: each checkpoint goes to the renter's account (a
 * capture) and the provider's (an earnings credit) under one key ({@code rentalId:second}),
 * cumulative, retried with a growing wait until acknowledged; once metering is over, the final
 * settlement, the hold release (only after the final capture landed) and the card release, and the
 * agent's report that the workload stopped (or its deadline) decide when the rental may close.
 * Actor-local: it lives on the rental's thread and is rebuilt from the journal after a restart,
 * where every step is idempotent.
 */
final class SettlementDelivery {
  /** The spread of a redelivery's wait: 80 % to 120 % of its nominal value, in per mille. */
  static final int REDELIVERY_SPREAD_PERMILLE = 400;

  private final String rentalId;
  private final Rental.Settings settings;
  private final Rental.Ports ports;
  private final Clock clock;
  private final ActorContext<Command> context;
  private final TimerScheduler<Command> timers;

  private long capturedThrough = -1;
  private long creditedThrough = -1;
  private boolean finalCredited;
  private boolean holdReleased;
  private boolean cardsReleased;
  private boolean workloadStopped;
  private int
      failedDeliveries; // in a row, since the last acknowledgement: each waits longer before it is

  // retried

  SettlementDelivery(
      String rentalId,
      Rental.Settings settings,
      Rental.Ports ports,
      Clock clock,
      ActorContext<Command> context,
      TimerScheduler<Command> timers) {
    this.rentalId = rentalId;
    this.settings = settings;
    this.ports = ports;
    this.clock = clock;
    this.context = context;
    this.timers = timers;
  }

  /**
   * Renter capture and provider credit of {@code c}, each unless already acknowledged ({@code
   * last}: the final credit).
   */
  void deliver(Order order, Terms terms, Checkpoint c, boolean last) {
    if (c.throughSecond() > capturedThrough) capture(order, c);
    if (c.throughSecond() > creditedThrough || last) credit(terms, c, last);
  }

  private void capture(Order order, Checkpoint c) {
    context.askWithStatus(
        Account.Posting.class,
        ports.account(order.renterId()),
        settings.askTimeout(),
        reply -> new Account.Capture(rentalId, c.throughSecond(), c.cost(), reply),
        (posting, failure) ->
            new Delivered(Delivered.Side.CAPTURE, c.throughSecond(), Rejection.codeOf(failure)));
  }

  private void credit(Terms terms, Checkpoint c, boolean last) {
    Delivered.Side side = last ? Delivered.Side.FINAL_CREDIT : Delivered.Side.CREDIT;
    context.askWithStatus(
        Account.Posting.class,
        ports.account(terms.providerId()),
        settings.askTimeout(),
        reply ->
            new Account.CreditEarnings(
                rentalId, c.throughSecond(), c.provider(), c.platform(), last, reply),
        (posting, failure) -> new Delivered(side, c.throughSecond(), Rejection.codeOf(failure)));
  }

  /**
   * Notes an acknowledgement; false (and a redelivery scheduled) when the delivery must be retried.
   */
  boolean acknowledged(Delivered d) {
    if (d.refusal() != null && d.refusal() != Rejection.IDEMPOTENCY_CONFLICT) {
      redeliverLater();
      return false;
    }
    failedDeliveries = 0;
    if (d.side() == Delivered.Side.CAPTURE)
      capturedThrough = Math.max(capturedThrough, d.throughSecond());
    else creditedThrough = Math.max(creditedThrough, d.throughSecond());
    if (d.side() == Delivered.Side.FINAL_CREDIT) finalCredited = true;
    return true;
  }

  private void redeliverLater() {
    int spread = redeliverySpread(rentalId, failedDeliveries);
    timers.startSingleTimer(
        Timer.REDELIVER,
        Timer.REDELIVER,
        redeliveryDelay(settings.retryInterval(), failedDeliveries++, spread));
  }

  /**
   * Where in the spread this rental's {@code failuresInARow}-th retry falls, in [0, {@link
   * #REDELIVERY_SPREAD_PERMILLE}]: a hash of the two, so rentals whose deliveries failed together
   * retry apart, and each retry of one rental lands elsewhere, as a random draw would, while the
   * same rental and retry always wait the same. (A {@code ThreadLocalRandom} draw made a rental's
   * timing depend on the thread it ran on: the JDK mixes the thread's id into the sequence.)
   */
  static int redeliverySpread(String rentalId, int failuresInARow) {
    long h = rentalId.hashCode() * 0x9E3779B97F4A7C15L + failuresInARow;
    h = (h ^ (h >>> 33)) * 0xFF51AFD7ED558CCDL; // MurmurHash3's 64-bit finalizer
    h = (h ^ (h >>> 33)) * 0xC4CEB9FE1A85EC53L;
    h ^= h >>> 33;
    return (int) Math.floorMod(h, (long) REDELIVERY_SPREAD_PERMILLE + 1);
  }

  /**
   * The wait before a failed capture, credit or release is sent again: the retry interval, doubled
   * with each failure in a row up to eight times it, then spread over 80–120 % ({@code
   * spreadPermille} in [0, 400]). Thousands of rentals whose deliveries failed together (a slow
   * account, a node lost) then neither retry in step nor keep a struggling account busy with
   * retries every second; the first retry still comes after about one interval.
   */
  static Duration redeliveryDelay(Duration retryInterval, int failuresInARow, int spreadPermille) {
    long factor = 1L << Math.min(Math.max(failuresInARow, 0), 3);
    return retryInterval.multipliedBy(factor * (800 + spreadPermille)).dividedBy(1_000);
  }

  // ---- ending

  /**
   * Final settlement (with {@code last}), hold release and card release; each retried until
   * acknowledged.
   */
  void finish(Ending state) {
    if (state.finalSettled()) finalSettlement(state);
    if (state.terms() != null && !cardsReleased)
      releaseCards(state.terms(), state.reason() == Rental.EndReason.HOST_LOST);
    if (state.terms() == null || state.startedAt() == null) workloadStopped = true;
    else if (!workloadStopped && !timers.isTimerActive(Timer.STOP_EXPIRED))
      agentSilenceDeadline(state);
  }

  private void finalSettlement(Ending state) {
    if (state.last() != null) deliver(state.order(), state.terms(), state.last(), true);
    else creditedThrough = Math.max(creditedThrough, 0);
    releaseHoldOnceCaptured(state);
  }

  /**
   * The rest of the hold goes back only once the final capture landed: a released hold refuses
   * every later capture, so a lost final capture would never be charged. A hold the account never
   * placed (the rental was cancelled before it answered) has nothing to release.
   */
  void releaseHoldOnceCaptured(Ending state) {
    if (holdReleased
        || !state.finalSettled()
        || (state.last() != null && capturedThrough < state.last().throughSecond())) return;
    releaseHold(state.order().renterId());
  }

  /**
   * Asks the renter's account to release the rental's hold; the answer is a {@link Released}: done
   * too when the account never had it (it keeps a tombstone against a late placement).
   */
  void releaseHold(String renterId) {
    context.askWithStatus(
        Account.HoldView.class,
        ports.account(renterId),
        settings.askTimeout(),
        reply -> new Account.ReleaseHold(rentalId, reply),
        (v, failure) ->
            new Released(
                Released.What.HOLD,
                failure == null || Rejection.codeOf(failure) == Rejection.HOLD_NOT_FOUND));
  }

  /** {@code hostLost}: the rental ended {@code host_lost}, for the host's record. */
  private void releaseCards(Terms terms, boolean hostLost) {
    context.askWithStatus(
        Done.class,
        ports.host(terms.hostId()),
        settings.askTimeout(),
        reply -> Host.ReleaseCards.ended(rentalId, hostLost, reply),
        (v, failure) -> new Released(Released.What.CARDS, failure == null));
  }

  /**
   * The agent has {@code stop-timeout} from the recorded end to report the workload stopped; after
   * that the money does not wait for it. Fixed from the end (kept in the journal), so neither
   * redeliveries nor restarts postpone it.
   */
  private void agentSilenceDeadline(Ending state) {
    Instant now = clock.instant();
    Instant recorded =
        state.recordedAt() == null
            ? now
            : state.recordedAt(); // snapshots written before it was kept
    Duration left = Duration.between(now, recorded.plus(settings.stopTimeout()));
    // A clock stepped back since the end (or a recovery after that) would read the deadline as far
    // away as the step: the silence lasts at most one stop timeout from now.
    if (left.compareTo(settings.stopTimeout()) > 0) left = settings.stopTimeout();
    timers.startSingleTimer(
        Timer.STOP_EXPIRED, Timer.STOP_EXPIRED, left.isNegative() ? Duration.ZERO : left);
  }

  /** A capture or credit acknowledged while ending; a capture may free the hold. */
  void acknowledgedEnding(Ending state, Delivered d) {
    if (acknowledged(d) && d.side() == Delivered.Side.CAPTURE) releaseHoldOnceCaptured(state);
  }

  void released(Released r) {
    if (!r.ok()) {
      redeliverLater();
      return;
    }
    failedDeliveries = 0;
    if (r.what() == Released.What.HOLD) holdReleased = true;
    else cardsReleased = true;
  }

  /**
   * The agent reported the workload stopped, or was silent past its deadline: the money does not
   * wait for it.
   */
  void workloadStopped() {
    workloadStopped = true;
  }

  /**
   * Every posting acknowledged, the hold and the cards released, the workload stopped: the rental
   * may close.
   */
  boolean readyToClose(Ending state) {
    long through = RentalBilling.settledThrough(state.last());
    boolean money = state.last() == null || (capturedThrough >= through && finalCredited);
    boolean cards = state.terms() == null || cardsReleased;
    return state.finalSettled() && money && holdReleased && cards && workloadStopped;
  }

  void closed() {
    timers.cancel(Timer.STOP_EXPIRED);
    timers.cancel(Timer.REDELIVER);
  }

  /**
   * Closed: every posting of this rental is acknowledged and it sends no more, so the accounts may
   * drop the closed hold and source they keep for its duplicates. Told once; if that is lost, the
   * accounts just keep them.
   */
  void forgetInAccounts(Ending state) {
    ActorRef<Done> ignore = context.getSystem().ignoreRef();
    ports.account(state.order().renterId()).tell(new Account.ForgetClosed(rentalId, ignore));
    if (state.terms() != null && !state.terms().providerId().equals(state.order().renterId())) {
      ports.account(state.terms().providerId()).tell(new Account.ForgetClosed(rentalId, ignore));
    }
  }
}
