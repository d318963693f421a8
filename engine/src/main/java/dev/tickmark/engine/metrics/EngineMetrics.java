package dev.tickmark.engine.metrics;

import java.util.concurrent.atomic.LongAdder;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.Extension;
import org.apache.pekko.actor.typed.ExtensionId;

/**
 * Counters and latency histograms of one node, shared by its actors without messages or locks. The
 * HTTP edge exposes them; benchmarks read them in-process.
 */
public final class EngineMetrics implements Extension {
  /** Receipt of a heartbeat frame at the websocket to its handling by the host entity. */
  public final LatencyHistogram heartbeatHandling = new LatencyHistogram();

  public final LongAdder heartbeats = new LongAdder();

  /**
   * A match request's arrival at its matcher to the answer (candidates read, proposals confirmed or
   * refused).
   */
  public final LatencyHistogram matchLatency = new LatencyHistogram();

  /**
   * The steps of a launch as its rental sees them, in order: the request recorded (the rental's
   * first write), the renter's hold placed (an account write), the match (the matcher's queue, its
   * candidate query and the host's reservation write), the match recorded (the rental's write
   * before it answers). Their sum is the engine's part of {@code POST /v1/rentals}; the rest is
   * HTTP, the API key and the new rental's recovery.
   */
  public final LatencyHistogram launchRecorded = new LatencyHistogram();

  public final LatencyHistogram launchHold = new LatencyHistogram();
  public final LatencyHistogram launchMatch = new LatencyHistogram();
  public final LatencyHistogram launchMatchedRecorded = new LatencyHistogram();

  /**
   * A rental's start on this node to its first recovery completed: reading its latest snapshot and
   * its highest sequence number, then replaying what follows. A launch's new rental pays this
   * before its first command (under an id drawn for it, it reads nothing: {@code FreshEntities}); a
   * rental moved by a node loss pays it before it can settle again. (A recovery again after a
   * journal failure is not timed.)
   */
  public final LatencyHistogram rentalRecovery = new LatencyHistogram();

  /**
   * The agent's heartbeat {@code at} to its receipt at the websocket: network delay plus clock skew
   * (never below 0).
   */
  public final LatencyHistogram heartbeatLag = new LatencyHistogram();

  /**
   * One small event persisted by this node's journal probe, from the persist call to its
   * confirmation.
   */
  public final LatencyHistogram journalWrites = new LatencyHistogram();

  /**
   * Journal probe writes or recoveries that failed (the database was unreachable or the journal's
   * breaker was open).
   */
  public final LongAdder journalFailures = new LongAdder();

  /**
   * {@link System#nanoTime()} when the probe's unconfirmed write started; 0 when none is in flight.
   */
  final java.util.concurrent.atomic.AtomicLong journalProbeInFlightSince =
      new java.util.concurrent.atomic.AtomicLong();

  public final LongAdder secondsMetered = new LongAdder();

  /**
   * The cost of the seconds in {@link #secondsMetered}, in micro-euros (renter debits: provider +
   * platform).
   */
  public final LongAdder microEurosMetered = new LongAdder();

  public final LongAdder settlements = new LongAdder();

  /**
   * Rentals running on this node now (each counted by its incarnation while it runs): the load that
   * stretches the settle interval.
   */
  public final LongAdder runningRentals = new LongAdder();

  /**
   * A running rental's own timer fired: a settlement due, its limit or deadline, or a retry of an
   * unproven settlement. Not per second: a rental sleeps between these instants.
   */
  public final LongAdder rentalWakes = new LongAdder();

  /** Per-second ticks sent to subscribers by the node's {@code RentalTicks}. */
  public final LongAdder ticksSent = new LongAdder();

  public final LongAdder agentSessionsOpened = new LongAdder();
  public final LongAdder agentSessionsClosed = new LongAdder();

  /**
   * Sessions that attached themselves again after their host's entity forgot them (it restarted, or
   * moved after a node loss), without the agent reconnecting.
   */
  public final LongAdder agentSessionsReattached = new LongAdder();

  public long agentSessionsOpen() {
    return agentSessionsOpened.sum() - agentSessionsClosed.sum();
  }

  public static final class Id extends ExtensionId<EngineMetrics> {
    private static final Id INSTANCE = new Id();

    private Id() {}

    @Override
    public EngineMetrics createExtension(ActorSystem<?> system) {
      return new EngineMetrics();
    }
  }

  public static EngineMetrics get(ActorSystem<?> system) {
    return Id.INSTANCE.apply(system);
  }
}
