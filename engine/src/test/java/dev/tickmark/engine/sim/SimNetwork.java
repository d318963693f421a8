package dev.tickmark.engine.sim;

import java.lang.reflect.Constructor;
import java.lang.reflect.RecordComponent;
import java.time.Duration;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Consumer;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.Behavior;
import org.apache.pekko.actor.typed.Props;
import org.apache.pekko.actor.typed.javadsl.Behaviors;

/**
 * The simulated network between entities (what sharding and the agent's websocket are in a node):
 * every message is handed to the loop to be delivered later, by a seeded fate — lost, delayed by up
 * to {@code maxDelayMillis} (so two messages can overtake each other), or delivered twice. A
 * partitioned endpoint loses everything sent to it. Requests that carry a {@code replyTo} may have
 * their reply sent through the network too (through a one-shot relay actor), so replies are lost,
 * late and duplicated as well.
 */
public final class SimNetwork {
  /** What a link carries, so faults can be switched per kind. */
  public enum Link {
    RENTAL_TO_ACCOUNT,
    RENTAL_TO_HOST,
    RENTAL_TO_MATCHER,
    MATCHER_TO_HOST,
    HOST_TO_RENTAL,
    AGENT_TO_HOST,
    AGENT_TO_RENTAL,
    LIVENESS,
    RENTAL_TO_SNAPSHOT,
    SNAPSHOT_TO_ACCOUNT,
    SNAPSHOT_TO_HOST,
    AGENT_TO_SNAPSHOT,
    REPLY
  }

  /**
   * Fault rates: per message, {@code drop} then {@code duplicate}; {@code replyFaults}: share of
   * asks whose reply is routed too; {@code reorder}: messages from one sender to one receiver may
   * overtake each other (off: each such pair is FIFO, as Pekko guarantees between two actors, and
   * only messages of different senders interleave); {@code livenessFaults}: the host liveness asks
   * of rentals (and their replies) may be lost or late too.
   */
  public record Faults(
      double drop,
      double duplicate,
      long maxDelayMillis,
      double replyFaults,
      boolean reorder,
      boolean livenessFaults,
      boolean lossyTells,
      boolean lateAgentReports,
      boolean lateHostNotices) {
    public static final Faults NONE = new Faults(0, 0, 0, 0, false, false, false, false, false);

    /**
     * The fault kinds of bugs not yet fixed off. Every kind's bug is fixed (docs/simulation.md: A
     * liveness asks, C reordering, D lost tells, E late agent reports, F late host notices), so
     * these are all the faults; kept so that a kind found to expose a new bug can be switched off
     * here until it is fixed.
     */
    public Faults withoutKnownBugs() {
      return this;
    }
  }

  private final SimLoop loop;
  private final SplittableRandom random;
  private final ActorSystem<?> system;
  private Faults faults;
  private final Map<String, Long> partitionedUntil = new ConcurrentHashMap<>();
  private long relays;
  long sent;
  long dropped;
  long duplicated;

  SimNetwork(SimLoop loop, SplittableRandom random, ActorSystem<?> system, Faults faults) {
    this.loop = loop;
    this.random = random;
    this.system = system;
    this.faults = faults;
  }

  void faults(Faults f) {
    this.faults = f;
  }

  Faults faults() {
    return faults;
  }

  /** Everything sent to {@code endpoint} is lost until {@code untilMillis} (virtual). */
  void partition(String endpoint, long untilMillis) {
    partitionedUntil.merge(endpoint, untilMillis, Math::max);
  }

  boolean partitioned(String endpoint) {
    Long until = partitionedUntil.get(endpoint);
    return until != null && until > loop.nowMillis();
  }

  Long partitionEnds(String endpoint) {
    return partitionedUntil.get(endpoint);
  }

  /**
   * Sends {@code message} to {@code endpoint}; {@code deliver} hands it to the entity (spawning it
   * if need be).
   */
  private final Map<String, Long> lastDue = new java.util.HashMap<>();

  <M> void send(Link link, String endpoint, M message, Consumer<M> deliver) {
    send(link, null, endpoint, message, deliver);
  }

  /**
   * {@code from}: the sending entity, for per-pair ordering when {@code reorder} is off (null: an
   * anonymous sender).
   */
  <M> void send(Link link, String from, String endpoint, M message, Consumer<M> deliver) {
    sent++;
    boolean faulty = link != Link.LIVENESS || faults.livenessFaults();
    if (faulty
        && faults.drop() > 0
        && random.nextDouble() < faults.drop()
        && (faults.lossyTells() || retried(message))) {
      dropped++;
      return;
    }
    if (!faults.lateAgentReports() && (link == Link.AGENT_TO_HOST || link == Link.AGENT_TO_RENTAL))
      faulty = false;
    if (!faults.lateHostNotices() && link == Link.HOST_TO_RENTAL) faulty = false;
    M routed = faulty ? routeReply(message) : message;
    String pair = from == null || faults.reorder() ? null : from + ">" + endpoint;
    schedule(endpoint, pair, faulty, () -> deliver.accept(routed));
    if (faulty && faults.duplicate() > 0 && random.nextDouble() < faults.duplicate()) {
      duplicated++;
      schedule(endpoint, pair, true, () -> deliver.accept(routed));
    }
  }

  private void schedule(String endpoint, String pair, boolean faulty, Runnable delivery) {
    long delay =
        faulty && faults.maxDelayMillis() > 0 ? random.nextLong(faults.maxDelayMillis() + 1) : 0;
    long due = loop.nowMillis() + delay;
    if (pair != null) {
      due = Math.max(due, lastDue.getOrDefault(pair, 0L));
      lastDue.put(pair, due);
    }
    loop.at(
        due,
        () -> {
          if (faulty && endpoint != null && partitioned(endpoint)) {
            dropped++;
            return;
          }
          delivery.run();
        });
  }

  /**
   * Whether losing {@code message} is made good by its sender: an ask (it times out and asks again)
   * or a periodic message.
   */
  private boolean retried(Object message) {
    if (message instanceof dev.tickmark.engine.host.Host.Heartbeat
        || message instanceof dev.tickmark.engine.market.Matcher.Match
        || message instanceof dev.tickmark.engine.rental.Rental.WorkloadStarted
        || message instanceof dev.tickmark.engine.rental.Rental.WorkloadFailed
        || message instanceof dev.tickmark.engine.rental.Rental.Wake
        || message instanceof dev.tickmark.engine.snapshot.Snapshot.Wake
        || message instanceof dev.tickmark.engine.host.Host.UploadSnapshot
        || message instanceof dev.tickmark.engine.host.Host.StartWorkload) {
      return true;
    }
    if (!(message instanceof Record r)) return false;
    for (RecordComponent c : r.getClass().getRecordComponents()) {
      if (!c.getName().equals("replyTo") || c.getType() != ActorRef.class) continue;
      try {
        c.getAccessor().setAccessible(true);
        Object to = c.getAccessor().invoke(r);
        return to != null && !to.equals(system.ignoreRef()) && !to.equals(system.deadLetters());
      } catch (ReflectiveOperationException e) {
        return false;
      }
    }
    return false;
  }

  // ---- replies

  private static final Map<Class<?>, Constructor<?>> CONSTRUCTORS = new ConcurrentHashMap<>();
  private static final Object TIMEOUT = new Object();

  /**
   * With probability {@code replyFaults}, a copy of the request whose {@code replyTo} answers
   * through the network.
   */
  @SuppressWarnings({"unchecked", "rawtypes"})
  private <M> M routeReply(M message) {
    if (faults.replyFaults() <= 0
        || !(message instanceof Record r)
        || random.nextDouble() >= faults.replyFaults()
        || !retried(message)) {
      return message;
    }
    RecordComponent[] components = r.getClass().getRecordComponents();
    int replyAt = -1;
    for (int i = 0; i < components.length; i++) {
      if (components[i].getName().equals("replyTo") && components[i].getType() == ActorRef.class)
        replyAt = i;
    }
    if (replyAt < 0) return message;
    try {
      Object[] values = new Object[components.length];
      Class<?>[] types = new Class<?>[components.length];
      for (int i = 0; i < components.length; i++) {
        components[i].getAccessor().setAccessible(true);
        values[i] = components[i].getAccessor().invoke(r);
        types[i] = components[i].getType();
      }
      ActorRef<Object> original = (ActorRef<Object>) values[replyAt];
      values[replyAt] = relay(original);
      Constructor<?> c =
          CONSTRUCTORS.computeIfAbsent(
              r.getClass(),
              k -> {
                try {
                  Constructor<?> ctor = k.getDeclaredConstructor(types);
                  ctor.setAccessible(true);
                  return ctor;
                } catch (NoSuchMethodException e) {
                  throw new IllegalStateException(e);
                }
              });
      return (M) c.newInstance(values);
    } catch (ReflectiveOperationException e) {
      throw new IllegalStateException("cannot route the reply of " + r.getClass(), e);
    }
  }

  /**
   * A one-shot actor that sends the first thing it gets on to {@code to}, through the network, then
   * stops.
   */
  private ActorRef<Object> relay(ActorRef<Object> to) {
    Behavior<Object> b =
        Behaviors.setup(
            ctx -> {
              ctx.setReceiveTimeout(Duration.ofSeconds(60), TIMEOUT);
              return Behaviors.receiveMessage(
                  m -> {
                    if (m != TIMEOUT) send(Link.REPLY, null, m, to::tell);
                    return Behaviors.stopped();
                  });
            });
    return system.systemActorOf(b, "relay-" + (relays++), Props.empty());
  }
}
