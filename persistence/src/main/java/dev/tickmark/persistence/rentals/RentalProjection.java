package dev.tickmark.persistence.rentals;

import dev.tickmark.engine.rental.Rental;
import dev.tickmark.persistence.Jdbc;
import dev.tickmark.persistence.SlicedProjections;
import dev.tickmark.persistence.StatementBatch;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.sql.Timestamp;
import java.sql.Types;
import java.util.List;
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
    return SlicedProjections.exactlyOnceInBatches(system, jdbc, NAME, tag, RentalProjection::apply);
  }

  private static final String INSERT =
      "INSERT INTO rentals(rental_id, renter_id, status, gpu, card_count, tier, region,"
          + " max_price_per_gpu_hour, created_at, updated_at, image, command, network, max_total,"
          + " restore, runtime)"
          + " VALUES (?, ?, 'pending', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING";

  /**
   * Every later event is this one statement (a column it does not name is left as it is), so that a
   * group's updates, of whatever event, go to PostgreSQL as one batch.
   */
  private static final String UPDATE =
      "UPDATE rentals SET status = COALESCE(?, status),"
          + " price_per_gpu_hour = COALESCE(?, price_per_gpu_hour), host_id = COALESCE(?, host_id),"
          + " simulated = COALESCE(?, simulated), matched_at = COALESCE(?, matched_at),"
          + " region = COALESCE(region, ?), started_at = COALESCE(?, started_at),"
          + " billed_seconds = COALESCE(?, billed_seconds), cost = COALESCE(?, cost),"
          + " provider_earned = COALESCE(?, provider_earned),"
          + " preemption_deadline = COALESCE(?, preemption_deadline),"
          + " ended_at = COALESCE(?, ended_at), end_reason = COALESCE(?, end_reason),"
          + " exit_code = COALESCE(?, exit_code), host_runtime = COALESCE(?, host_runtime),"
          + " updated_at = ? WHERE rental_id = ?";

  /**
   * An operator's refund, its own statement: refunds are rare, and the one above, which every
   * launch's events run, stays as narrow as it was.
   */
  private static final String REFUNDED =
      "UPDATE rentals SET refunded = ?, provider_reversed = ?, updated_at = ? WHERE rental_id = ?";

  public static void apply(StatementBatch out, String id, Rental.Event event) {
    Timestamp at = Timestamp.from(event.at());
    if (event instanceof Rental.Requested e) {
      out.create(
          INSERT,
          st -> {
            st.setString(1, id);
            st.setString(2, e.renterId());
            st.setString(3, e.spec().gpu());
            st.setInt(4, e.spec().count());
            st.setString(5, e.spec().tier().wire());
            st.setString(6, e.spec().region());
            st.setLong(7, e.spec().maxPricePerGpuHour());
            st.setTimestamp(8, at);
            st.setTimestamp(9, at);
            st.setString(10, e.spec().image());
            st.setString(11, commandJson(e.spec().command()));
            st.setBoolean(12, e.spec().network());
            if (e.spec().maxTotal() == null) st.setNull(13, Types.BIGINT);
            else st.setLong(13, e.spec().maxTotal());
            st.setString(14, e.spec().restore() == null ? null : e.spec().restore().snapshotId());
            st.setString(15, e.spec().runtime());
          });
      return;
    }
    Change change = new Change();
    if (event instanceof Rental.Refused) {
      change.status = "refused";
    } else if (event instanceof Rental.Matched e) {
      change.status = "provisioning";
      change.pricePerGpuHour = e.terms().pricePerGpuHour();
      change.hostId = e.terms().hostId();
      change.simulated = e.terms().simulated();
      change.matchedAt = Timestamp.from(e.terms().matchedAt());
      change.regionIfNone = e.terms().region();
      change.hostRuntime = e.terms().runtime();
    } else if (event instanceof Rental.Started e) {
      change.status = "running";
      change.startedAt = Timestamp.from(e.startedAt());
    } else if (event instanceof Rental.Settled e) {
      change.billedSeconds = e.checkpoint().throughSecond();
      change.cost = e.checkpoint().cost();
      change.providerEarned = e.checkpoint().provider();
    } else if (event instanceof Rental.PreemptionScheduled e) {
      change.preemptionDeadline = Timestamp.from(e.deadline());
    } else if (event instanceof Rental.Ended e) {
      change.status = "stopping";
      change.endedAt = Timestamp.from(e.endAt());
      change.endReason = e.reason().wire();
      change.billedSeconds = e.billedSeconds();
      change.exitCode = e.exitCode();
    } else if (event instanceof Rental.EndProven e) {
      // The host proved less than the end claimed: the bill is what was proven (the last Settled
      // carries its cost).
      change.billedSeconds = e.billedSeconds();
    } else if (event instanceof Rental.Closed) {
      change.status = "ended";
    } else if (event instanceof Rental.Refunded e) {
      out.add(
          REFUNDED,
          st -> {
            st.setLong(1, e.cumulativeAmount());
            st.setLong(2, e.cumulativeProvider());
            st.setTimestamp(3, at);
            st.setString(4, id);
          });
      return;
    } else {
      // HoldExtended, ExtensionRefused: money bookkeeping the list does not show.
      return;
    }
    out.add(UPDATE, st -> change.set(st, at, id));
  }

  private static final com.fasterxml.jackson.databind.ObjectMapper JSON =
      new com.fasterxml.jackson.databind.ObjectMapper();

  /** The command's arguments as a JSON array ({@code []}: the image's own command). */
  static String commandJson(List<String> command) {
    if (command == null) return "[]";
    try {
      return JSON.writeValueAsString(command);
    } catch (com.fasterxml.jackson.core.JsonProcessingException e) {
      throw new IllegalStateException(e);
    }
  }

  /** The arguments of {@link #commandJson}'s text. */
  static List<String> commandFrom(String json) {
    if (json == null) return null;
    try {
      return List.of(JSON.readValue(json, String[].class));
    } catch (com.fasterxml.jackson.core.JsonProcessingException e) {
      throw new IllegalStateException("bad command in rentals table", e);
    }
  }

  /** The columns one event sets ({@link #UPDATE}'s parameters); null leaves a column as it is. */
  private static final class Change {
    String status;
    Long pricePerGpuHour;
    String hostId;
    Boolean simulated;
    Timestamp matchedAt;
    String regionIfNone;
    Timestamp startedAt;
    Long billedSeconds;
    Long cost;
    Long providerEarned;
    Timestamp preemptionDeadline;
    Timestamp endedAt;
    String endReason;
    Integer exitCode;
    String hostRuntime;

    void set(PreparedStatement st, Timestamp at, String id) throws SQLException {
      st.setObject(1, status, Types.VARCHAR);
      st.setObject(2, pricePerGpuHour, Types.BIGINT);
      st.setObject(3, hostId, Types.VARCHAR);
      st.setObject(4, simulated, Types.BOOLEAN);
      timestamp(st, 5, matchedAt);
      st.setObject(6, regionIfNone, Types.VARCHAR);
      timestamp(st, 7, startedAt);
      st.setObject(8, billedSeconds, Types.BIGINT);
      st.setObject(9, cost, Types.BIGINT);
      st.setObject(10, providerEarned, Types.BIGINT);
      timestamp(st, 11, preemptionDeadline);
      timestamp(st, 12, endedAt);
      st.setObject(13, endReason, Types.VARCHAR);
      st.setObject(14, exitCode, Types.INTEGER);
      st.setObject(15, hostRuntime, Types.VARCHAR);
      st.setTimestamp(16, at);
      st.setString(17, id);
    }

    /**
     * A null binds as an untyped null, as a timestamp does (the driver leaves both to the server),
     * so every row of a batch has the same parameter types.
     */
    private static void timestamp(PreparedStatement st, int index, Timestamp value)
        throws SQLException {
      if (value == null) st.setNull(index, Types.TIMESTAMP);
      else st.setTimestamp(index, value);
    }
  }
}
