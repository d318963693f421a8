package dev.tickmark.node;

import dev.tickmark.engine.rental.Rental;
import dev.tickmark.engine.snapshot.Snapshot;
import dev.tickmark.persistence.rentals.RentalReadModel;
import dev.tickmark.persistence.snapshots.SnapshotReadModel;
import java.time.Duration;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.Behavior;
import org.apache.pekko.actor.typed.Props;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.cluster.ClusterEvent;
import org.apache.pekko.cluster.sharding.typed.javadsl.ClusterSharding;
import org.apache.pekko.cluster.typed.Cluster;
import org.apache.pekko.cluster.typed.Subscribe;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Rentals are woken by their own timers only while their entity lives; one whose node was lost must
 * be woken on a survivor, where recovery resumes its metering and money. Every node wakes the
 * unfinished rentals (from the read side) when another member leaves the cluster — as soon as that
 * member's shards can move, i.e. after the hand-over margin — and also every {@code wake-interval}
 * as a safety net. Waking a live or finished rental changes nothing, so several nodes doing it is
 * harmless.
 *
 * <p>Snapshots likewise: a kept workspace's entity settles its storage on its own timers for as
 * long as it is kept, so the unfinished ones (uploading, ready, suspended, deleted but not yet
 * closed) are woken the same way.
 */
final class RentalWaker {
  private static final Logger log = LoggerFactory.getLogger(RentalWaker.class);

  /**
   * After the margin, the coordinator still has to take the removed region's shards back (at the
   * margin itself) and, if it moved too, register the regions: a wake sent then waits in its region
   * until the shard has a home. The first wake follows the margin closely; a second catches the
   * slow ones.
   */
  static final Duration FIRST_WAKE = Duration.ofMillis(500);

  static final Duration SECOND_WAKE = Duration.ofSeconds(3);

  private RentalWaker() {}

  static void start(
      ActorSystem<Void> system,
      RentalReadModel rentals,
      SnapshotReadModel snapshots,
      Duration every) {
    Runnable wake = () -> wakeAll(system, rentals, snapshots);
    system
        .scheduler()
        .scheduleWithFixedDelay(Duration.ofSeconds(1), every, wake, system.executionContext());
    Duration margin = handOverMargin(system);
    system.systemActorOf(onMemberRemoved(system, wake, margin), "rental-waker", Props.empty());
  }

  private static Behavior<ClusterEvent.MemberRemoved> onMemberRemoved(
      ActorSystem<Void> system, Runnable wake, Duration margin) {
    return Behaviors.setup(
        ctx -> {
          Cluster.get(system)
              .subscriptions()
              .tell(Subscribe.create(ctx.getSelf(), ClusterEvent.MemberRemoved.class));
          return Behaviors.receiveMessage(
              removed -> {
                log.info(
                    "{} left the cluster: waking unfinished rentals and snapshots in {} and {}",
                    removed.member().address(),
                    margin.plus(FIRST_WAKE),
                    margin.plus(SECOND_WAKE));
                system
                    .scheduler()
                    .scheduleOnce(margin.plus(FIRST_WAKE), wake, system.executionContext());
                system
                    .scheduler()
                    .scheduleOnce(margin.plus(SECOND_WAKE), wake, system.executionContext());
                return Behaviors.same();
              });
        });
  }

  private static void wakeAll(
      ActorSystem<Void> system, RentalReadModel rentals, SnapshotReadModel snapshots) {
    ClusterSharding sharding = ClusterSharding.get(system);
    rentals
        .unfinished()
        .thenAccept(
            ids ->
                ids.forEach(
                    id -> sharding.entityRefFor(Rental.ENTITY_KEY, id).tell(Rental.Wake.INSTANCE)));
    snapshots
        .unfinished()
        .thenAccept(
            ids ->
                ids.forEach(
                    id ->
                        sharding
                            .entityRefFor(Snapshot.ENTITY_KEY, id)
                            .tell(Snapshot.Wake.INSTANCE)));
  }

  /**
   * When a removed member's shards may be created elsewhere: down-removal-margin, or with the
   * resolver its stable-after.
   */
  static Duration handOverMargin(ActorSystem<?> system) {
    var config = system.settings().config();
    String margin = config.getString("pekko.cluster.down-removal-margin");
    if (!margin.equals("off")) return config.getDuration("pekko.cluster.down-removal-margin");
    return config.getDuration("pekko.cluster.split-brain-resolver.stable-after");
  }
}
