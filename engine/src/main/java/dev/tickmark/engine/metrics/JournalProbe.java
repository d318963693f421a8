package dev.tickmark.engine.metrics;

import dev.tickmark.engine.CborSerializable;
import dev.tickmark.engine.JournalFailures;
import java.time.Duration;
import org.apache.pekko.actor.typed.Behavior;
import org.apache.pekko.actor.typed.javadsl.ActorContext;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.actor.typed.javadsl.TimerScheduler;
import org.apache.pekko.persistence.typed.PersistenceId;
import org.apache.pekko.persistence.typed.RecoveryFailed;
import org.apache.pekko.persistence.typed.javadsl.CommandHandler;
import org.apache.pekko.persistence.typed.javadsl.EventHandler;
import org.apache.pekko.persistence.typed.javadsl.EventSourcedBehavior;
import org.apache.pekko.persistence.typed.javadsl.RetentionCriteria;
import org.apache.pekko.persistence.typed.javadsl.SignalHandler;

/**
 * Measures the journal's write latency from the outside: every {@code interval} it persists one
 * tiny event through the same plugin, queue and pool as the entities, and records the time to
 * confirmation in {@link EngineMetrics#journalWrites}. A persist or recovery that fails (the
 * database is away) counts in {@link EngineMetrics#journalFailures}; the probe then restarts with
 * backoff like the entities do, so it also shows when the journal is writable again. One probe per
 * node; old events are deleted on snapshot, so it keeps a handful of rows.
 */
public final class JournalProbe
    extends EventSourcedBehavior<JournalProbe.Command, JournalProbe.Probed, JournalProbe.Probes> {
  public interface Command {}

  private enum Tick implements Command {
    INSTANCE
  }

  public record Probed(long number) implements CborSerializable {}

  public record Probes(long count) implements CborSerializable {}

  private final EngineMetrics metrics;
  private final TimerScheduler<Command> timers;
  private final Duration interval;
  private long persistStartedNanos;

  /**
   * {@code nodeId} names this node's own probe (its cluster address), so nodes never write one
   * stream.
   */
  public static Behavior<Command> create(String nodeId, Duration interval) {
    return Behaviors.setup(
        context ->
            Behaviors.withTimers(timers -> new JournalProbe(context, timers, nodeId, interval)));
  }

  private JournalProbe(
      ActorContext<Command> context,
      TimerScheduler<Command> timers,
      String nodeId,
      Duration interval) {
    super(PersistenceId.of("journal-probe", nodeId), JournalFailures.RESTART_WITH_BACKOFF);
    this.metrics = EngineMetrics.get(context.getSystem());
    this.timers = timers;
    this.interval = interval;
    long inFlight = metrics.journalProbeInFlightSince.getAndSet(0);
    if (inFlight != 0)
      metrics.journalFailures.increment(); // the previous incarnation's write never confirmed
  }

  @Override
  public Probes emptyState() {
    return new Probes(0);
  }

  @Override
  public CommandHandler<Command, Probed, Probes> commandHandler() {
    return newCommandHandlerBuilder()
        .forAnyState()
        .onCommand(
            Tick.class,
            (state, tick) -> {
              persistStartedNanos = System.nanoTime();
              metrics.journalProbeInFlightSince.set(persistStartedNanos);
              return Effect()
                  .persist(new Probed(state.count() + 1))
                  .thenRun(
                      s -> {
                        metrics.journalProbeInFlightSince.set(0);
                        metrics.journalWrites.recordMicros(
                            (System.nanoTime() - persistStartedNanos) / 1_000);
                      });
            })
        .build();
  }

  @Override
  public EventHandler<Probes, Probed> eventHandler() {
    return newEventHandlerBuilder()
        .forAnyState()
        .onEvent(Probed.class, (state, e) -> new Probes(e.number()))
        .build();
  }

  @Override
  public SignalHandler<Probes> signalHandler() {
    return newSignalHandlerBuilder()
        .onSignal(
            org.apache.pekko.persistence.typed.RecoveryCompleted.instance(),
            state -> timers.startTimerWithFixedDelay(Tick.INSTANCE, Duration.ZERO, interval))
        .onSignal(RecoveryFailed.class, (state, failed) -> metrics.journalFailures.increment())
        .build();
  }

  @Override
  public RetentionCriteria retentionCriteria() {
    return RetentionCriteria.snapshotEvery(100, 1).withDeleteEventsOnSnapshot();
  }
}
