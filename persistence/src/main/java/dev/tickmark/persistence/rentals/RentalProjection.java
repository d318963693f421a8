package dev.tickmark.persistence.rentals;

import dev.tickmark.engine.rental.Rental;
import dev.tickmark.persistence.Jdbc;
import dev.tickmark.persistence.SlicedProjections;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.sql.Timestamp;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.persistence.query.Offset;
import org.apache.pekko.projection.eventsourced.EventEnvelope;
import org.apache.pekko.projection.javadsl.GroupedProjection;

/**
 * Keeps the {@code rentals} table in step with rental events (exactly-once, one projection per tag
 * slice).
 */
public final class RentalProjection {
  public static final String NAME = "rentals";

  private RentalProjection() {}

  public static void init(ActorSystem<?> system, Jdbc jdbc) {
    SlicedProjections.init(
        system, "rentals-writer", Rental.allTags(), tag -> projection(system, jdbc, tag));
  }

  static GroupedProjection<Offset, EventEnvelope<Rental.Event>> projection(
      ActorSystem<?> system, Jdbc jdbc, String tag) {
    return SlicedProjections.exactlyOnceInGroups(system, jdbc, NAME, tag, RentalProjection::apply);
  }

  static void apply(Connection c, String id, Rental.Event event) throws SQLException {
    Timestamp at = Timestamp.from(event.at());
    if (event instanceof Rental.Requested e) {
      try (PreparedStatement st =
          c.prepareStatement(
              "INSERT INTO rentals(rental_id, renter_id, status, gpu, card_count, tier, region,"
                  + " max_price_per_gpu_hour, created_at, updated_at) VALUES (?, ?, 'pending', ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING")) {
        st.setString(1, id);
        st.setString(2, e.renterId());
        st.setString(3, e.spec().gpu());
        st.setInt(4, e.spec().count());
        st.setString(5, e.spec().tier().wire());
        st.setString(6, e.spec().region());
        st.setLong(7, e.spec().maxPricePerGpuHour());
        st.setTimestamp(8, at);
        st.setTimestamp(9, at);
        st.executeUpdate();
      }
    } else if (event instanceof Rental.Refused) {
      update(c, id, at, "status = 'refused'");
    } else if (event instanceof Rental.Matched e) {
      try (PreparedStatement st =
          c.prepareStatement(
              "UPDATE rentals SET status = 'provisioning', price_per_gpu_hour = ?, host_id = ?,"
                  + " simulated = ?, matched_at = ?, region = COALESCE(region, ?), updated_at = ? WHERE rental_id = ?")) {
        st.setLong(1, e.terms().pricePerGpuHour());
        st.setString(2, e.terms().hostId());
        st.setBoolean(3, e.terms().simulated());
        st.setTimestamp(4, Timestamp.from(e.terms().matchedAt()));
        st.setString(5, e.terms().region());
        st.setTimestamp(6, at);
        st.setString(7, id);
        st.executeUpdate();
      }
    } else if (event instanceof Rental.Started e) {
      try (PreparedStatement st =
          c.prepareStatement(
              "UPDATE rentals SET status = 'running', started_at = ?, updated_at = ? WHERE rental_id = ?")) {
        st.setTimestamp(1, Timestamp.from(e.startedAt()));
        st.setTimestamp(2, at);
        st.setString(3, id);
        st.executeUpdate();
      }
    } else if (event instanceof Rental.Settled e) {
      try (PreparedStatement st =
          c.prepareStatement(
              "UPDATE rentals SET billed_seconds = ?, cost = ?, updated_at = ? WHERE rental_id = ?")) {
        st.setLong(1, e.checkpoint().throughSecond());
        st.setLong(2, e.checkpoint().cost());
        st.setTimestamp(3, at);
        st.setString(4, id);
        st.executeUpdate();
      }
    } else if (event instanceof Rental.PreemptionScheduled e) {
      try (PreparedStatement st =
          c.prepareStatement(
              "UPDATE rentals SET preemption_deadline = ?, updated_at = ? WHERE rental_id = ?")) {
        st.setTimestamp(1, Timestamp.from(e.deadline()));
        st.setTimestamp(2, at);
        st.setString(3, id);
        st.executeUpdate();
      }
    } else if (event instanceof Rental.Ended e) {
      try (PreparedStatement st =
          c.prepareStatement(
              "UPDATE rentals SET status = 'stopping', ended_at = ?, end_reason = ?,"
                  + " billed_seconds = ?, updated_at = ? WHERE rental_id = ?")) {
        st.setTimestamp(1, Timestamp.from(e.endAt()));
        st.setString(2, e.reason().wire());
        st.setLong(3, e.billedSeconds());
        st.setTimestamp(4, at);
        st.setString(5, id);
        st.executeUpdate();
      }
    } else if (event instanceof Rental.EndProven e) {
      // The host proved less than the end claimed: the bill is what was proven (the last Settled
      // carries its cost).
      try (PreparedStatement st =
          c.prepareStatement(
              "UPDATE rentals SET billed_seconds = ?, updated_at = ? WHERE rental_id = ?")) {
        st.setLong(1, e.billedSeconds());
        st.setTimestamp(2, at);
        st.setString(3, id);
        st.executeUpdate();
      }
    } else if (event instanceof Rental.Closed) {
      update(c, id, at, "status = 'ended'");
    }
    // HoldExtended, ExtensionRefused: money bookkeeping the list does not show.
  }

  private static void update(Connection c, String id, Timestamp at, String set)
      throws SQLException {
    try (PreparedStatement st =
        c.prepareStatement("UPDATE rentals SET " + set + ", updated_at = ? WHERE rental_id = ?")) {
      st.setTimestamp(1, at);
      st.setString(2, id);
      st.executeUpdate();
    }
  }
}
