package dev.tickmark.engine;

import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.LongSupplier;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.Extension;
import org.apache.pekko.actor.typed.ExtensionId;

/**
 * Entities this node is starting under an id drawn for them a moment ago (a launch's new rental):
 * nothing can have been written for such an id, so their first recovery has nothing to read. An
 * entity says so ({@link #starting}) before its recovery begins; the journal's snapshot store asks
 * ({@link #take}) once, and answers "no snapshot, no events" without reading.
 *
 * <p>Only the first recovery of that incarnation takes it: a restart after a failed write, a
 * passivated entity woken again, or the same id started on another node after a rebalance or a node
 * loss recovers from the store as always. A claim that was wrong (an id with events) cannot
 * overwrite them: the entity would write its first event as number 1, which the journal's primary
 * key refuses, and that incarnation stops.
 */
public final class FreshEntities implements Extension {
  /** A claim not taken by then is dropped: a recovery begins within milliseconds of it. */
  static final long MAX_AGE_NANOS = 10_000_000_000L;

  /** No more claims than this are kept; beyond it an entity recovers from the store. */
  static final int MAX_CLAIMS = 10_000;

  private final ConcurrentHashMap<String, Long> claims = new ConcurrentHashMap<>();
  private final LongAdder taken = new LongAdder();

  private final LongSupplier nanoTime;

  FreshEntities() {
    this(System::nanoTime);
  }

  FreshEntities(LongSupplier nanoTime) {
    this.nanoTime = nanoTime;
  }

  /**
   * The entity of {@code persistenceId} starts now with nothing written for it. False (and nothing
   * claimed) when too many claims are outstanding.
   */
  public boolean starting(String persistenceId) {
    if (claims.size() >= MAX_CLAIMS) {
      long now = nanoTime.getAsLong();
      claims.values().removeIf(at -> now - at > MAX_AGE_NANOS);
      if (claims.size() >= MAX_CLAIMS) return false;
    }
    claims.put(persistenceId, nanoTime.getAsLong());
    return true;
  }

  /** Whether {@code persistenceId} was claimed fresh and not yet taken (at most once true). */
  public boolean take(String persistenceId) {
    if (claims.isEmpty()) return false;
    Long at = claims.remove(persistenceId);
    if (at == null || nanoTime.getAsLong() - at > MAX_AGE_NANOS) return false;
    taken.increment();
    return true;
  }

  /** Recoveries that read nothing because their entity was fresh. */
  public long taken() {
    return taken.sum();
  }

  /** Claims not yet taken. */
  int outstanding() {
    return claims.size();
  }

  public static final class Id extends ExtensionId<FreshEntities> {
    private static final Id INSTANCE = new Id();

    private Id() {}

    @Override
    public FreshEntities createExtension(ActorSystem<?> system) {
      return new FreshEntities();
    }
  }

  public static FreshEntities get(ActorSystem<?> system) {
    return Id.INSTANCE.apply(system);
  }
}
