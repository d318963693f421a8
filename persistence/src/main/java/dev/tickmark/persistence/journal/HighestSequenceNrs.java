package dev.tickmark.persistence.journal;

import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.LongAdder;
import org.apache.pekko.actor.AbstractExtensionId;
import org.apache.pekko.actor.ActorSystem;
import org.apache.pekko.actor.ExtendedActorSystem;
import org.apache.pekko.actor.Extension;
import org.apache.pekko.dispatch.ExecutionContexts;
import scala.concurrent.ExecutionContext;

/**
 * A journal's highest sequence numbers as a recovery's snapshot read found them, for the replay
 * that follows: a recovery asks the snapshot store for its latest snapshot and then the journal for
 * its highest sequence number, two round trips to PostgreSQL on every launch and every entity a
 * node loss moves. {@link RecoverySnapshotDao} reads both in one statement and leaves the number
 * here; {@link BatchedJournalDao#highestSequenceNr} takes it instead of asking again.
 *
 * <p>The plugin's journal reads the highest number only after its own writes for that entity are
 * done, so that a restarted entity does not reuse a sequence number its last incarnation wrote. A
 * number left here keeps that promise: it is left only if no write for the entity was in flight
 * when its read began ({@link #begin}), and every write queued after that discards it ({@link
 * #writeQueued}), whether it comes before the number is left or after. So the journal takes a
 * number only if no write of this node's journal could have moved it since the read began. (Another
 * node writing in between is what the plugin's own read does not guard against either: that is the
 * cluster's single writer.)
 *
 * <p>One per journal table in an actor system ({@link #of}); both DAOs find it through their {@code
 * Serialization}'s system.
 */
public final class HighestSequenceNrs {
  /** Numbers left and not taken are dropped after this: a recovery takes its own at once. */
  static final long MAX_AGE_NANOS = 60_000_000_000L;

  /** No number is left beyond this many not taken; those older than the age go first. */
  static final int MAX_LEFT = 10_000;

  /** For the DAOs' bookkeeping on a future's completion: a few map operations, run in place. */
  static final ExecutionContext ON_COMPLETING_THREAD =
      ExecutionContexts.fromExecutor(Runnable::run);

  /** A read in progress ({@code highest < 0}) or the number it found, and when. */
  static final class Entry {
    final long highest;
    final long readAtNanos;

    private Entry(long highest, long readAtNanos) {
      this.highest = highest;
      this.readAtNanos = readAtNanos;
    }

    boolean pending() {
      return highest < 0;
    }
  }

  private final ConcurrentHashMap<String, Entry> left = new ConcurrentHashMap<>();
  private final ConcurrentHashMap<String, Integer> writesInFlight = new ConcurrentHashMap<>();
  private final LongAdder taken = new LongAdder();
  private final LongAdder declined = new LongAdder();

  HighestSequenceNrs() {}

  /** The instance for {@code journalTable} in {@code system}. */
  public static HighestSequenceNrs of(ActorSystem system, String journalTable) {
    return Registry.ID
        .get(system)
        .byTable
        .computeIfAbsent(journalTable, t -> new HighestSequenceNrs());
  }

  /**
   * A snapshot read for {@code persistenceId} begins: the token to {@link #complete} it with, or
   * null if its number must not be left (a write for it is in flight, or too many are left).
   */
  Entry begin(String persistenceId) {
    if (left.size() >= MAX_LEFT && !dropOld()) {
      declined.increment();
      return null;
    }
    Entry token = new Entry(-1, 0);
    left.put(persistenceId, token);
    // After the token is in: a write queued from here on removes it (writeQueued), and one queued
    // before is still counted here, or done and visible to the read that follows.
    if (writesInFlight.containsKey(persistenceId)) {
      left.remove(persistenceId, token);
      declined.increment();
      return null;
    }
    return token;
  }

  /** The read that {@code token} began found {@code highest}; left unless a write discarded it. */
  void complete(String persistenceId, Entry token, long highest) {
    left.replace(persistenceId, token, new Entry(highest, System.nanoTime()));
  }

  /** The read that {@code token} began failed. */
  void abandon(String persistenceId, Entry token) {
    left.remove(persistenceId, token);
  }

  /**
   * The number left for {@code persistenceId}, once, or null if none may be used: none left, its
   * read still running, a write in flight, or older than {@link #MAX_AGE_NANOS}.
   */
  Long take(String persistenceId) {
    if (left.isEmpty()) return null;
    Entry e = left.remove(persistenceId);
    if (e == null || e.pending()) return null;
    if (writesInFlight.containsKey(persistenceId)) return null;
    if (System.nanoTime() - e.readAtNanos > MAX_AGE_NANOS) return null;
    taken.increment();
    return e.highest;
  }

  /** A write for {@code persistenceId} is queued: any number read for it may be behind now. */
  void writeQueued(String persistenceId) {
    writesInFlight.merge(persistenceId, 1, Integer::sum);
    if (!left.isEmpty()) left.remove(persistenceId);
  }

  /** That write is done (written or failed). */
  void writeDone(String persistenceId) {
    writesInFlight.computeIfPresent(persistenceId, (pid, n) -> n > 1 ? n - 1 : null);
  }

  /** Drops numbers older than the age; true if that made room. */
  private boolean dropOld() {
    long now = System.nanoTime();
    left.values().removeIf(e -> !e.pending() && now - e.readAtNanos > MAX_AGE_NANOS);
    return left.size() < MAX_LEFT;
  }

  /** Numbers the journal took instead of asking PostgreSQL. */
  public long taken() {
    return taken.sum();
  }

  /** Snapshot reads that left no number (a write in flight, or too many left). */
  public long declined() {
    return declined.sum();
  }

  /** Numbers left and not yet taken, pending reads included. */
  int leftCount() {
    return left.size();
  }

  /** The instances of one actor system, by journal table. */
  static final class Registry implements Extension {
    static final Id ID = new Id();
    final ConcurrentHashMap<String, HighestSequenceNrs> byTable = new ConcurrentHashMap<>();

    static final class Id extends AbstractExtensionId<Registry> {
      @Override
      public Registry createExtension(ExtendedActorSystem system) {
        return new Registry();
      }
    }
  }
}
