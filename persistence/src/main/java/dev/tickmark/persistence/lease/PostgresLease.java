package dev.tickmark.persistence.lease;

import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import org.apache.pekko.actor.ExtendedActorSystem;
import org.apache.pekko.actor.typed.javadsl.Adapter;
import org.apache.pekko.coordination.lease.LeaseSettings;
import org.apache.pekko.coordination.lease.javadsl.Lease;

/**
 * A Pekko {@link Lease} kept in PostgreSQL, for {@code pekko.cluster.sharding.use-lease}: a shard
 * (or a shard coordinator) starts only once its node holds the shard's lease, so it never runs on
 * two nodes at once, and the survivors need no {@code down-removal-margin} before starting a lost
 * node's shards (docs/runbook.md "Failover timing and split brain"). {@link ShardLeases} does the
 * work for all the node's leases; this class keeps one lease's calls in order.
 */
public final class PostgresLease extends Lease {
  private final LeaseSettings settings;
  private final ShardLeases leases;
  private final Duration operationTimeout;

  /** The lease's acquires and releases, one after the other. */
  private CompletableFuture<?> tail = CompletableFuture.completedFuture(null);

  /** Counts acquire calls, so that a release decided earlier cannot undo a later acquire. */
  private final java.util.concurrent.atomic.AtomicLong generation =
      new java.util.concurrent.atomic.AtomicLong();

  private volatile Consumer<Optional<Throwable>> lostCallback;
  private volatile CompletableFuture<Boolean> lastAcquire =
      CompletableFuture.completedFuture(false);

  /** Pekko's {@code LeaseProvider} creates it reflectively, once per lease name and node. */
  public PostgresLease(LeaseSettings settings, ExtendedActorSystem system) {
    this.settings = settings;
    this.leases = ShardLeases.get(Adapter.toTyped(system));
    this.operationTimeout = settings.timeoutSettings().getOperationTimeout();
    leases.created(this);
  }

  @Override
  public LeaseSettings getSettings() {
    return settings;
  }

  String name() {
    return settings.leaseName();
  }

  @Override
  public CompletionStage<Boolean> acquire() {
    return acquire(reason -> {});
  }

  @Override
  public CompletionStage<Boolean> acquire(Consumer<Optional<Throwable>> leaseLostCallback) {
    this.lostCallback = leaseLostCallback;
    generation.incrementAndGet();
    CompletableFuture<Boolean> acquired =
        inOrder(() -> leases.acquire(this))
            .copy() // a timed-out answer must not let the next call overtake this one
            .orTimeout(operationTimeout.toMillis(), TimeUnit.MILLISECONDS);
    lastAcquire = acquired;
    return acquired;
  }

  @Override
  public CompletionStage<Boolean> release() {
    leases.forget(this);
    return inOrder(() -> leases.release(this))
        .copy()
        .orTimeout(operationTimeout.toMillis(), TimeUnit.MILLISECONDS);
  }

  @Override
  public boolean checkLease() {
    return leases.holds(this);
  }

  long generation() {
    return generation.get();
  }

  /** Releases the lease unless it was asked for again since {@code seen} was read. */
  CompletableFuture<Boolean> releaseIfNotAcquiredSince(long seen) {
    return inOrder(
        () -> {
          if (generation.get() != seen) return CompletableFuture.completedFuture(false);
          leases.forget(this);
          return leases.release(this);
        });
  }

  /** A release that failed, tried again by the heartbeat unless the lease was acquired since. */
  void retryRelease() {
    inOrder(
        () -> leases.holds(this) ? CompletableFuture.completedFuture(false) : leases.release(this));
  }

  /** Another node took the lease over; the callback runs after the acquire has answered. */
  void lost(Optional<Throwable> reason) {
    Consumer<Optional<Throwable>> callback = lostCallback;
    if (callback != null) lastAcquire.whenComplete((ok, failure) -> callback.accept(reason));
  }

  private synchronized CompletableFuture<Boolean> inOrder(
      java.util.function.Supplier<CompletableFuture<Boolean>> call) {
    CompletableFuture<Boolean> next = tail.handle((x, e) -> null).thenCompose(x -> call.get());
    tail = next;
    return next;
  }
}
