package dev.tickmark.node;

import dev.tickmark.engine.account.Account;
import dev.tickmark.engine.host.Host;
import dev.tickmark.engine.market.Matcher;
import dev.tickmark.engine.rental.Rental;
import dev.tickmark.engine.snapshot.Snapshot;
import java.time.Instant;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.RecipientRef;
import org.apache.pekko.cluster.sharding.typed.javadsl.ClusterSharding;

/**
 * How entities reach each other in a node: through cluster sharding, wherever the other entity
 * lives.
 */
final class ShardedLinks implements Rental.Ports, Snapshot.Ports, Host.RentalLink {
  private final ClusterSharding sharding;

  ShardedLinks(ActorSystem<?> system) {
    this.sharding = ClusterSharding.get(system);
  }

  @Override
  public RecipientRef<Account.Command> account(String accountId) {
    return sharding.entityRefFor(Account.ENTITY_KEY, accountId);
  }

  @Override
  public RecipientRef<Host.Command> host(String hostId) {
    return sharding.entityRefFor(Host.ENTITY_KEY, hostId);
  }

  @Override
  public RecipientRef<Matcher.Command> matcher(String gpu) {
    return sharding.entityRefFor(Matcher.ENTITY_KEY, gpu);
  }

  @Override
  public RecipientRef<Snapshot.Command> snapshot(String snapshotId) {
    return sharding.entityRefFor(Snapshot.ENTITY_KEY, snapshotId);
  }

  @Override
  public void hostLost(String rentalId, String hostId, Instant lastHeartbeatAt) {
    hostLost(rentalId, hostId, lastHeartbeatAt, null);
  }

  @Override
  public void hostLost(String rentalId, String hostId, Instant lastHeartbeatAt, Instant lostAt) {
    sharding
        .entityRefFor(Rental.ENTITY_KEY, rentalId)
        .tell(new Rental.HostLost(hostId, lastHeartbeatAt, lostAt));
  }

  @Override
  public void preempt(String rentalId, String hostId, Instant deadline) {
    sharding.entityRefFor(Rental.ENTITY_KEY, rentalId).tell(new Rental.Preempt(hostId, deadline));
  }

  @Override
  public void checkReservation(
      String rentalId, String hostId, ActorRef<Host.ReservationWanted> replyTo) {
    sharding
        .entityRefFor(Rental.ENTITY_KEY, rentalId)
        .tell(new Rental.CheckReservation(hostId, replyTo));
  }

  @Override
  public void hostAttached(String rentalId, String hostId) {
    sharding.entityRefFor(Rental.ENTITY_KEY, rentalId).tell(new Rental.HostAttached(hostId));
  }
}
