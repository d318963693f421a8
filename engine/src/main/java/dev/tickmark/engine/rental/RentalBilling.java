package dev.tickmark.engine.rental;

import dev.tickmark.engine.host.Host;
import dev.tickmark.engine.money.Metering;
import dev.tickmark.engine.rental.Rental.Checkpoint;
import dev.tickmark.engine.rental.Rental.EndReason;
import dev.tickmark.engine.rental.Rental.Order;
import dev.tickmark.engine.rental.Rental.Running;
import dev.tickmark.engine.rental.Rental.Spec;
import dev.tickmark.engine.rental.Rental.Terms;
import java.time.Duration;
import java.time.Instant;

/**
 * The billing rules of a rental, pure: what the first hold is, how far a running rental may go and
 * why it stops, how many seconds its hold pays for, what a checkpoint holds, when a settlement is
 * due and how far it goes, what an end bills, and what the hold grows to. No actor, no clock of its
 * own: every instant is passed in.
 */
final class RentalBilling {
  /** Ten years: the bound of every "how many seconds" question, so none overflows. */
  static final long BOUND_SECONDS = 10L * 365 * 24 * 3600;

  /** No settlement is due. */
  static final long NONE = -1;

  /** The last second a running rental may run, and the reason it ends there. */
  record Limit(long seconds, EndReason reason) {}

  private final long holdSeconds;
  private final int feeBps;
  private final long settleIntervalSeconds;

  /** The longest settle interval under load: the configured one, within a quarter hold window. */
  private final long maxSettleIntervalSeconds;

  /** Running rentals on the node from which the settle interval grows; 0: it never grows. */
  private final long stretchFromRentals;

  RentalBilling(long holdSeconds, int feeBps, Duration settleInterval) {
    this(holdSeconds, feeBps, settleInterval, settleInterval, 0);
  }

  RentalBilling(
      long holdSeconds,
      int feeBps,
      Duration settleInterval,
      Duration maxSettleInterval,
      long stretchFromRentals) {
    this.holdSeconds = holdSeconds;
    this.feeBps = feeBps;
    this.settleIntervalSeconds = settleInterval.toSeconds();
    this.maxSettleIntervalSeconds =
        Math.max(
            settleIntervalSeconds,
            Math.min(maxSettleInterval.toSeconds(), holdSeconds / HOLD_WINDOW_PARTS));
    this.stretchFromRentals = Math.max(0, stretchFromRentals);
  }

  static RentalBilling of(Rental.Settings settings) {
    return new RentalBilling(
        settings.holdSeconds(),
        settings.feeBps(),
        settings.settleInterval(),
        settings.maxSettleInterval(),
        settings.settleStretchFrom());
  }

  /**
   * A stretched settle interval stays within this part of the hold window ({@code hold-seconds}):
   * the hold grows at a settlement once less than half a window is left, so a settlement a quarter
   * window apart still finds a quarter window held ahead of it when it asks.
   */
  static final long HOLD_WINDOW_PARTS = 4;

  /**
   * The node-wide settle interval at a load of {@code runningRentals}: {@code base} up to {@code
   * from} running rentals, then in proportion to them ({@code base × running / from}, so the node
   * keeps settling about {@code from / base} times a second), up to {@code max}. {@code from} 0:
   * never stretched.
   */
  static long stretchedSeconds(long base, long max, long from, long runningRentals) {
    if (from <= 0 || runningRentals <= from || max <= base) return base;
    long high = Math.multiplyHigh(base, runningRentals);
    long product = base * runningRentals;
    if (high != 0 || product < 0) return max;
    return Math.max(base, Math.min(max, product / from));
  }

  /**
   * The settle interval of this running rental while {@code runningRentals} rentals run on its
   * node: the stretched interval, but its next settlement never beyond the seconds its hold covers,
   * its limit or its preemption deadline (it ends there anyway, with a final settlement); never
   * shorter than the configured {@code settle-interval}. Cumulative totals make any interval exact:
   * a settlement only ever moves the checkpoint to a second the host proved.
   */
  long intervalSeconds(Running state, long runningRentals) {
    long interval =
        stretchedSeconds(
            settleIntervalSeconds, maxSettleIntervalSeconds, stretchFromRentals, runningRentals);
    if (interval == settleIntervalSeconds) return interval;
    long end = Math.min(heldSeconds(state), limit(state).seconds());
    if (state.preemptionDeadline() != null)
      end = Math.min(end, secondsBetween(state.startedAt(), state.preemptionDeadline()));
    long ahead = end - settledThrough(state.last());
    return Math.max(settleIntervalSeconds, Math.min(interval, ahead));
  }

  /**
   * {@code hold-seconds} at the renter's ceiling, capped by the rental's own {@code max_total}; at
   * least 1 µ€.
   */
  long initialHold(Spec spec) {
    long hold = Metering.cost(spec.maxPricePerGpuHour(), spec.count(), holdSeconds);
    if (spec.maxTotal() != null) hold = Math.min(hold, spec.maxTotal());
    return Math.max(hold, 1);
  }

  /**
   * The rental's cap and, once the hold could not grow, what is held; the earlier wins (the cap on
   * a tie).
   */
  static Limit limit(Order order, Terms terms, EndReason extensionRefused) {
    int cards = terms.cards().size();
    long price = terms.pricePerGpuHour();
    Long maxTotal = order.spec().maxTotal();
    long byCap =
        maxTotal == null
            ? BOUND_SECONDS
            : Metering.maxSecondsWithin(price, cards, maxTotal, BOUND_SECONDS);
    long byHold =
        extensionRefused == null
            ? BOUND_SECONDS
            : Metering.maxSecondsWithin(price, cards, order.holdAmount(), BOUND_SECONDS);
    return byCap <= byHold
        ? new Limit(byCap, EndReason.RENTAL_CAP_REACHED)
        : new Limit(byHold, extensionRefused);
  }

  static Limit limit(Running state) {
    return limit(state.order(), state.terms(), state.extensionRefused());
  }

  /** The seconds the current hold pays for at the agreed price: no capture may go beyond them. */
  static long heldSeconds(Running state) {
    return Metering.maxSecondsWithin(
        state.terms().pricePerGpuHour(),
        state.terms().cards().size(),
        state.order().holdAmount(),
        BOUND_SECONDS);
  }

  /** Cumulative seconds, cost and split at {@code second}. */
  Checkpoint checkpoint(Terms terms, long second, Instant at) {
    long cost = Metering.cost(terms.pricePerGpuHour(), terms.cards().size(), second);
    long provider = Metering.providerShare(cost, feeBps);
    return new Checkpoint(second, cost, provider, cost - provider, at);
  }

  /**
   * A settle interval has passed since the last checkpoint: time to ask the host how far it has
   * run.
   */
  boolean settlementDue(Running state, long second) {
    return settlementDue(state, second, 0);
  }

  /** The same at a node load of {@code runningRentals} ({@link #intervalSeconds}). */
  boolean settlementDue(Running state, long second, long runningRentals) {
    return second - settledThrough(state.last()) >= intervalSeconds(state, runningRentals);
  }

  /**
   * When the next settlement falls due: a settle interval after the last checkpoint (or the start).
   * The rental sleeps until then; what it settles is still bounded by the host's heartbeat.
   */
  Instant nextSettlementAt(Running state) {
    return nextSettlementAt(state, 0);
  }

  /** The same at a node load of {@code runningRentals} ({@link #intervalSeconds}). */
  Instant nextSettlementAt(Running state, long runningRentals) {
    return state
        .startedAt()
        .plusSeconds(settledThrough(state.last()) + intervalSeconds(state, runningRentals));
  }

  /**
   * How far a running rental settles now, given the host's last heartbeat: never past it, nor past
   * the preemption deadline, the limit or what the hold covers. Checkpoints stay a settle interval
   * apart (the last heartbeat lags the clock by a few seconds, and settling whatever it covers
   * would checkpoint more often than configured); only a hold or cap that stops the rental short of
   * that settles less. {@link #NONE} when nothing is to be settled.
   */
  long settleThrough(Running state, Instant lastHeartbeat, Instant now) {
    return settleThrough(state, lastHeartbeat, now, 0);
  }

  /**
   * The same at a node load of {@code runningRentals}: checkpoints stay {@link #intervalSeconds}
   * apart.
   */
  long settleThrough(Running state, Instant lastHeartbeat, Instant now, long runningRentals) {
    long interval = intervalSeconds(state, runningRentals);
    Instant upTo = earlier(now, lastHeartbeat);
    if (state.preemptionDeadline() != null) upTo = earlier(upTo, state.preemptionDeadline());
    long covered = secondsBetween(state.startedAt(), upTo);
    long second = Math.min(covered, Math.min(limit(state).seconds(), heldSeconds(state)));
    long settled = settledThrough(state.last());
    boolean stoppedShort = second < covered;
    if (second <= settled || (second - settled < interval && !stoppedShort)) return NONE;
    return second;
  }

  /**
   * What a liveness answer proves a running rental ran to: the host's last heartbeat, but no
   * further than the last one that listed the rental's workload when the host knows one. A later
   * heartbeat that no longer lists it shows it stopped (its report may still be on the way), and an
   * agent that re-attached after an outage proves itself alive, not the workload, until its next
   * heartbeat lists it.
   */
  static Instant runningProof(Host.Liveness liveness) {
    Instant listed = liveness.rentalListedAt();
    return listed == null
        ? liveness.lastHeartbeatAt()
        : earlier(liveness.lastHeartbeatAt(), listed);
  }

  /**
   * Whether a liveness answer shows that the rental's workload is gone: a heartbeat no longer
   * listed it, after one that did (the agent runs a workload once, so it does not come back).
   */
  static boolean gone(Host.Liveness liveness) {
    return liveness.rentalListedAt() != null && liveness.rentalGoneAt() != null;
  }

  /**
   * Whether a liveness answer shows that the workload of a rental ended at {@code endAt} was gone
   * before that end: a heartbeat earlier than the end no longer listed it. It is then proven only
   * to the last heartbeat that listed it. (A workload the agent stops after the end stops being
   * listed after the end.)
   */
  static boolean goneBeforeEnd(Host.Liveness liveness, Instant endAt) {
    return liveness.rentalListedAt() != null
        && liveness.rentalGoneAt() != null
        && liveness.rentalGoneAt().isBefore(endAt);
  }

  /**
   * The end instant of a running rental that ends at {@code endAt}: never before it started, and
   * never before the seconds it already settled. A host that restarted names the last heartbeat it
   * had recorded (every few seconds) as its last, older than the one the settlements saw; the
   * seconds settled were proven, so the end comes after them.
   */
  static Instant endInstant(Running state, Instant endAt) {
    Instant settled = state.startedAt().plusSeconds(settledThrough(state.last()));
    return later(later(state.startedAt(), endAt), settled);
  }

  /**
   * What a running rental ending at {@code end} bills: the seconds to the end, within the limit and
   * the hold, and never fewer than were settled (cumulative totals never go down).
   */
  static long billedAtEnd(Running state, Instant end) {
    long billed =
        Math.min(
            secondsBetween(state.startedAt(), end),
            Math.min(limit(state).seconds(), heldSeconds(state)));
    return Math.max(billed, settledThrough(state.last()));
  }

  /**
   * The amount the hold should grow to: when less than half a hold window is left, spent plus a
   * window (within the rental's cap). 0 when it need not or cannot grow.
   */
  long extensionTarget(Running state) {
    long spent = state.last() == null ? 0 : state.last().cost();
    long window =
        Metering.cost(state.terms().pricePerGpuHour(), state.terms().cards().size(), holdSeconds);
    long held = state.order().holdAmount();
    if (held - spent >= window / 2) return 0;
    long target = spent + window;
    if (state.order().spec().maxTotal() != null)
      target = Math.min(target, state.order().spec().maxTotal());
    return target <= held ? 0 : target;
  }

  /** The cost of {@code seconds} at the rental's frozen price. */
  static long cost(Terms terms, long seconds) {
    return terms == null
        ? 0
        : Metering.cost(terms.pricePerGpuHour(), terms.cards().size(), seconds);
  }

  static long settledThrough(Checkpoint last) {
    return last == null ? 0 : last.throughSecond();
  }

  /** Whole seconds from {@code from} to {@code to}; 0 when {@code to} is earlier. */
  static long secondsBetween(Instant from, Instant to) {
    return Math.max(0, Duration.between(from, to).getSeconds());
  }

  static Instant earlier(Instant a, Instant b) {
    return a.isBefore(b) ? a : b;
  }

  static Instant later(Instant a, Instant b) {
    return a.isAfter(b) ? a : b;
  }
}
