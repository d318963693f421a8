package dev.tickmark.engine.rental;

import dev.tickmark.engine.metrics.EngineMetrics;
import dev.tickmark.engine.money.Metering;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.HashMap;
import java.util.HashSet;
import java.util.IdentityHashMap;
import java.util.Map;
import java.util.PriorityQueue;
import java.util.Set;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.Behavior;
import org.apache.pekko.actor.typed.Extension;
import org.apache.pekko.actor.typed.ExtensionId;
import org.apache.pekko.actor.typed.Props;
import org.apache.pekko.actor.typed.javadsl.ActorContext;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.actor.typed.javadsl.TimerScheduler;

/**
 * The per-second ticks of running rentals that someone watches, computed from the frozen price, the
 * start instant and the instant the meter must stop at — so that a running rental itself only wakes
 * at its own instants (the next settlement, its limit, a preemption deadline), and a rental nobody
 * watches costs nothing between them.
 *
 * <p>One actor per node (and per clock): a rental with subscribers registers its {@link Meter} and
 * its subscribers here, replaces the meter when its limit moves, and forgets it when it stops
 * running. One timer serves every watched rental: it fires at the earliest next second among them
 * (at most a second apart, so that a wall clock that moves without the timers is followed).
 */
public final class RentalTicks {
  private RentalTicks() {}

  /** The longest the ticker sleeps: a clock moved by hand (or stepped) is followed within it. */
  static final Duration MAX_SLEEP = Duration.ofSeconds(1);

  /**
   * What a subscriber's ticks are computed from: second {@code s} (from {@code startedAt}) costs
   * {@code Metering.cost(pricePerGpuHour, cards, s)}; no tick for a second at or past {@code
   * endSecond} (the rental's limit or preemption deadline: it ends there), and none below {@code
   * settledSecond} (what was settled: a clock stepped back never shows the meter going back).
   */
  public record Meter(
      Instant startedAt, long pricePerGpuHour, int cards, long endSecond, long settledSecond) {
    public Meter(Instant startedAt, long pricePerGpuHour, int cards, long endSecond) {
      this(startedAt, pricePerGpuHour, cards, endSecond, 0);
    }

    long secondAt(Instant now) {
      return Math.max(settledSecond, RentalBilling.secondsBetween(startedAt, now));
    }

    Rental.Tick tick(long second) {
      return new Rental.Tick(second, Metering.cost(pricePerGpuHour, cards, second));
    }

    Instant instantOf(long second) {
      return startedAt.plusSeconds(second);
    }
  }

  public sealed interface Command permits Watch, Rebase, Unwatch, Forget, Wake, SubscriberGone {}

  /** {@code subscriber} gets {@code rentalId}'s ticks, the current second at once. */
  public record Watch(String rentalId, ActorRef<Rental.Update> subscriber, Meter meter)
      implements Command {}

  /** The rental's meter changed (its limit or deadline moved). */
  public record Rebase(String rentalId, Meter meter) implements Command {}

  public record Unwatch(String rentalId, ActorRef<Rental.Update> subscriber) implements Command {}

  /** The rental no longer runs here (ended, stopped, restarted): no more ticks for it. */
  public record Forget(String rentalId) implements Command {}

  private enum Wake implements Command {
    INSTANCE
  }

  private record SubscriberGone(ActorRef<Rental.Update> subscriber) implements Command {}

  /** The node's ticker for rentals metered on {@code clock}. */
  public static ActorRef<Command> of(ActorSystem<?> system, Clock clock) {
    return Registry.ID.apply(system).tickerFor(clock);
  }

  /** One ticker per clock: entity tests give each rental its own clock in one actor system. */
  public static final class Registry implements Extension {
    static final ExtensionId<Registry> ID =
        new ExtensionId<>() {
          @Override
          public Registry createExtension(ActorSystem<?> system) {
            return new Registry(system);
          }
        };

    private final ActorSystem<?> system;
    private final Map<Clock, ActorRef<Command>> tickers = new IdentityHashMap<>();
    private final AtomicInteger names = new AtomicInteger();

    private Registry(ActorSystem<?> system) {
      this.system = system;
    }

    synchronized ActorRef<Command> tickerFor(Clock clock) {
      return tickers.computeIfAbsent(
          clock,
          c ->
              system.systemActorOf(
                  create(c), "rental-ticks-" + names.incrementAndGet(), Props.empty()));
    }
  }

  public static Behavior<Command> create(Clock clock) {
    return Behaviors.setup(
        ctx -> Behaviors.withTimers(timers -> new Ticker(ctx, timers, clock).behavior()));
  }

  /** One watched rental: its meter, its subscribers, and the next second to tick. */
  private static final class Watched {
    final String rentalId;
    Meter meter;
    final Set<ActorRef<Rental.Update>> subscribers = new HashSet<>();
    long nextSecond;
    Instant due; // when nextSecond starts; null while it is not queued (past its end)
    long lastSent = -1; // the latest second ticked: ticks never go back (a clock stepped back)

    Watched(String rentalId, Meter meter) {
      this.rentalId = rentalId;
      this.meter = meter;
    }
  }

  private static final class Ticker {
    private final ActorContext<Command> context;
    private final TimerScheduler<Command> timers;
    private final Clock clock;
    private final EngineMetrics metrics;
    private final Map<String, Watched> watched = new HashMap<>();
    private final Map<ActorRef<Rental.Update>, Set<String>> bySubscriber = new HashMap<>();
    // Lazily cleaned: an entry whose Watched is gone or re-queued with another due is skipped.
    private final PriorityQueue<Queued> queue = new PriorityQueue<>();

    private record Queued(Instant due, Watched w) implements Comparable<Queued> {
      @Override
      public int compareTo(Queued o) {
        return due.compareTo(o.due);
      }
    }

    Ticker(ActorContext<Command> context, TimerScheduler<Command> timers, Clock clock) {
      this.context = context;
      this.timers = timers;
      this.clock = clock;
      this.metrics = EngineMetrics.get(context.getSystem());
    }

    Behavior<Command> behavior() {
      return Behaviors.receive(Command.class)
          .onMessage(Watch.class, this::onWatch)
          .onMessage(Rebase.class, this::onRebase)
          .onMessage(Unwatch.class, this::onUnwatch)
          .onMessage(Forget.class, this::onForget)
          .onMessage(SubscriberGone.class, this::onSubscriberGone)
          .onMessage(Wake.class, w -> onWake())
          .build();
    }

    private Behavior<Command> onWatch(Watch cmd) {
      Instant now = clock.instant();
      Watched w = watched.computeIfAbsent(cmd.rentalId(), id -> new Watched(id, cmd.meter()));
      w.meter = cmd.meter();
      if (w.subscribers.add(cmd.subscriber())) {
        if (bySubscriber.computeIfAbsent(cmd.subscriber(), s -> new HashSet<>()).isEmpty())
          context.watchWith(cmd.subscriber(), new SubscriberGone(cmd.subscriber()));
        bySubscriber.get(cmd.subscriber()).add(cmd.rentalId());
      }
      long second = Math.max(w.meter.secondAt(now), w.lastSent);
      if (second < w.meter.endSecond()) {
        tell(cmd.subscriber(), w.meter.tick(second)); // the current second at once
        w.lastSent = second;
        if (w.due == null || second + 1 < w.nextSecond) queueAt(w, second + 1);
      }
      return rearm(now);
    }

    private Behavior<Command> onRebase(Rebase cmd) {
      Watched w = watched.get(cmd.rentalId());
      if (w == null) return Behaviors.same();
      w.meter = cmd.meter();
      Instant now = clock.instant();
      queueAt(w, Math.max(w.meter.secondAt(now), w.lastSent) + 1);
      return rearm(now);
    }

    private Behavior<Command> onUnwatch(Unwatch cmd) {
      Watched w = watched.get(cmd.rentalId());
      if (w != null) {
        w.subscribers.remove(cmd.subscriber());
        if (w.subscribers.isEmpty()) watched.remove(cmd.rentalId());
      }
      dropSubscription(cmd.subscriber(), cmd.rentalId());
      return Behaviors.same();
    }

    private Behavior<Command> onForget(Forget cmd) {
      Watched w = watched.remove(cmd.rentalId());
      if (w != null) w.subscribers.forEach(s -> dropSubscription(s, cmd.rentalId()));
      return Behaviors.same();
    }

    private Behavior<Command> onSubscriberGone(SubscriberGone cmd) {
      Set<String> rentals = bySubscriber.remove(cmd.subscriber());
      if (rentals == null) return Behaviors.same();
      for (String id : rentals) {
        Watched w = watched.get(id);
        if (w == null) continue;
        w.subscribers.remove(cmd.subscriber());
        if (w.subscribers.isEmpty()) watched.remove(id);
      }
      return Behaviors.same();
    }

    private void dropSubscription(ActorRef<Rental.Update> subscriber, String rentalId) {
      Set<String> rentals = bySubscriber.get(subscriber);
      if (rentals == null) return;
      rentals.remove(rentalId);
      if (rentals.isEmpty()) {
        bySubscriber.remove(subscriber);
        context.unwatch(subscriber);
      }
    }

    /** Every watched rental whose next second has begun ticks it (the latest, if several). */
    private Behavior<Command> onWake() {
      Instant now = clock.instant();
      while (!queue.isEmpty() && !queue.peek().due().isAfter(now)) {
        Queued q = queue.poll();
        Watched w = q.w();
        if (watched.get(w.rentalId) != w || !q.due().equals(w.due)) continue; // stale entry
        w.due = null;
        long second = w.meter.secondAt(now);
        if (second >= w.meter.endSecond()) continue; // the rental ends there; it forgets us
        if (second > w.lastSent) {
          Rental.Tick tick = w.meter.tick(second);
          w.subscribers.forEach(s -> tell(s, tick));
          w.lastSent = second;
        }
        queueAt(w, Math.max(second, w.lastSent) + 1);
      }
      return rearm(now);
    }

    private void tell(ActorRef<Rental.Update> subscriber, Rental.Tick tick) {
      // Counted before it is sent: whoever receives it then sees it counted.
      metrics.ticksSent.increment();
      subscriber.tell(tick);
    }

    private void queueAt(Watched w, long second) {
      if (second >= w.meter.endSecond()) {
        w.due = null;
        return;
      }
      w.nextSecond = second;
      w.due = w.meter.instantOf(second);
      queue.add(new Queued(w.due, w));
    }

    /** One timer, for the earliest due second; none while nothing is watched. */
    private Behavior<Command> rearm(Instant now) {
      while (!queue.isEmpty()
          && (watched.get(queue.peek().w().rentalId) != queue.peek().w()
              || !queue.peek().due().equals(queue.peek().w().due))) queue.poll();
      if (queue.isEmpty()) {
        timers.cancel(Wake.INSTANCE);
        return Behaviors.same();
      }
      Duration left = Duration.between(now, queue.peek().due());
      if (left.isNegative()) left = Duration.ZERO;
      if (left.compareTo(MAX_SLEEP) > 0) left = MAX_SLEEP;
      timers.startSingleTimer(Wake.INSTANCE, Wake.INSTANCE, left);
      return Behaviors.same();
    }
  }
}
