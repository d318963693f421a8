package dev.tickmark.engine.host;

import java.time.Instant;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.apache.pekko.actor.typed.ActorRef;

/**
 * A {@link Host.RentalLink} that only records what the host tells its rentals: the rental ids it
 * asked about a reservation ({@code checked}) and told of an attach ({@code attached}).
 */
final class RecordingRentalLink implements Host.RentalLink {
  final List<String> checked = new CopyOnWriteArrayList<>();
  final List<String> attached = new CopyOnWriteArrayList<>();

  @Override
  public void hostLost(String rentalId, String hostId, Instant lastHeartbeatAt) {}

  @Override
  public void preempt(String rentalId, String hostId, Instant deadline) {}

  @Override
  public void checkReservation(
      String rentalId, String hostId, ActorRef<Host.ReservationWanted> replyTo) {
    checked.add(rentalId);
  }

  @Override
  public void hostAttached(String rentalId, String hostId) {
    attached.add(rentalId);
  }
}
