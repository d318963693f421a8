package dev.tickmark.persistence.hosts;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.tickmark.engine.host.Host;
import dev.tickmark.engine.host.Listing;
import dev.tickmark.persistence.Jdbc;
import dev.tickmark.persistence.SlicedProjections;
import dev.tickmark.persistence.StatementBatch;
import java.sql.Timestamp;
import java.sql.Types;
import java.util.List;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.persistence.query.Offset;
import org.apache.pekko.projection.eventsourced.EventEnvelope;
import org.apache.pekko.projection.javadsl.GroupedProjection;

/**
 * Keeps the {@code hosts} table in step with host events (exactly-once, one projection per tag
 * slice).
 */
public final class HostProjection {
  public static final String NAME = "hosts";
  static final ObjectMapper JSON = new ObjectMapper();

  private HostProjection() {}

  public static void init(ActorSystem<?> system, Jdbc jdbc) {
    SlicedProjections.init(
        system, "hosts-writer", Host.allTags(), tag -> projection(system, jdbc, tag));
  }

  static GroupedProjection<Offset, EventEnvelope<Host.Event>> projection(
      ActorSystem<?> system, Jdbc jdbc, String tag) {
    return SlicedProjections.exactlyOnceInBatches(system, jdbc, NAME, tag, HostProjection::apply);
  }

  public static void apply(StatementBatch out, String hostId, Host.Event event) {
    Timestamp at = Timestamp.from(event.at());
    if (event instanceof Host.Invited e) {
      out.create(
          "INSERT INTO hosts(host_id, owner_id, region, label, status, created_at, updated_at)"
              + " VALUES (?, ?, ?, ?, 'invited', ?, ?) ON CONFLICT (host_id) DO NOTHING",
          st -> {
            st.setString(1, hostId);
            st.setString(2, e.ownerId());
            st.setString(3, e.region());
            st.setString(4, e.label());
            st.setTimestamp(5, at);
            st.setTimestamp(6, at);
          });
    } else if (event instanceof Host.Registered) {
      update(out, hostId, at, "status = 'registered'");
    } else if (event instanceof Host.ReportVerified e) {
      out.add(
          "UPDATE hosts SET status = CASE WHEN status = 'evicted' THEN 'evicted' ELSE 'verified' END,"
              + " gpu = ?, cards_total = ?, simulated = ?, runtime = ?, offers_network = ?,"
              + " updated_at = ? WHERE host_id = ?",
          st -> {
            st.setString(
                1, e.outcome().cards().isEmpty() ? null : e.outcome().cards().get(0).gpu());
            st.setInt(2, e.outcome().cards().size());
            st.setBoolean(3, e.outcome().simulated());
            setRuntime(st, 4, e.outcome().runtime());
            st.setTimestamp(6, at);
            st.setString(7, hostId);
          });
    } else if (event instanceof Host.ReportRejected e) {
      // A failed report leaves no verified cards: cards_total > 0 is what Reinstated reads as "the
      // last report passed" (the entity reinstates to verified only then, else to failed). Its
      // runtime is shown too: an unisolated runtime is often why it failed.
      out.add(
          "UPDATE hosts SET "
              + (e.evict()
                  ? "status = 'evicted'"
                  : "status = CASE WHEN status = 'evicted' THEN 'evicted' ELSE 'failed' END")
              + ", cards_total = 0, runtime = ?, offers_network = ?, updated_at = ?"
              + " WHERE host_id = ?",
          st -> {
            setRuntime(st, 1, e.outcome().runtime());
            st.setTimestamp(3, at);
            st.setString(4, hostId);
          });
    } else if (event instanceof Host.WentOnline) {
      update(
          out,
          hostId,
          at,
          "online = TRUE, status = CASE WHEN status = 'registered' THEN 'verifying' ELSE status END");
    } else if (event instanceof Host.WentOffline) {
      update(out, hostId, at, "online = FALSE");
    } else if (event instanceof Host.ListingUpdated e) {
      Listing l = e.listing();
      String availability = windowsJson(l.availability());
      out.add(
          "UPDATE hosts SET listed = ?, on_demand_price = ?, spot_price = ?,"
              + " spot_notice_seconds = ?, availability = ?, updated_at = ? WHERE host_id = ?",
          st -> {
            st.setBoolean(1, l.listed());
            st.setLong(2, l.onDemandPrice());
            if (l.spotPrice() == null) st.setNull(3, Types.BIGINT);
            else st.setLong(3, l.spotPrice());
            st.setInt(4, l.spotNoticeSeconds());
            st.setString(5, availability);
            st.setTimestamp(6, at);
            st.setString(7, hostId);
          });
    } else if (event instanceof Host.DrainStarted) {
      update(out, hostId, at, "draining = TRUE");
    } else if (event instanceof Host.Evicted) {
      update(out, hostId, at, "status = 'evicted'");
    } else if (event instanceof Host.Reinstated) {
      update(
          out, hostId, at, "status = CASE WHEN cards_total > 0 THEN 'verified' ELSE 'failed' END");
    } else if (event instanceof Host.Removed) {
      update(out, hostId, at, "status = 'removed', online = FALSE, listed = FALSE");
    } else if (event instanceof Host.CardsReserved e) {
      cardsTaken(out, hostId, at, e.cards().size(), false, false);
    } else if (event instanceof Host.CardsReleased e) {
      cardsTaken(out, hostId, at, -e.cards().size(), e.ran(), e.lost());
    } else if (event instanceof Host.CardsExpired e) {
      cardsTaken(out, hostId, at, -e.cards().size(), false, false);
    }
    // CardsClaimed: a claimed card was taken since its reservation; nothing changes here.
    // CardsRented: a reserved card is already taken; nothing changes here.
  }

  /**
   * One statement for every reservation, release and expiry (the changes as parameters), so that a
   * group's run of them, the bulk of a busy market's host events, goes as one batch. A release also
   * keeps the host's record with renters ({@code market.Reliability}): a rental that ran here and
   * ended, and whether it ended {@code host_lost}.
   */
  private static void cardsTaken(
      StatementBatch out, String hostId, Timestamp at, int change, boolean ran, boolean lost) {
    out.add(
        "UPDATE hosts SET cards_taken = GREATEST(0, cards_taken + ?),"
            + " rentals_ended = rentals_ended + ?, rentals_lost = rentals_lost + ?,"
            + " updated_at = ? WHERE host_id = ?",
        st -> {
          st.setInt(1, change);
          st.setInt(2, ran ? 1 : 0);
          st.setInt(3, lost ? 1 : 0);
          st.setTimestamp(4, at);
          st.setString(5, hostId);
        });
  }

  /**
   * The runtime a report said, at {@code first} and the parameter after it; a report that did not
   * say leaves both unknown, and the host then takes every rental.
   */
  private static void setRuntime(
      java.sql.PreparedStatement st,
      int first,
      dev.tickmark.engine.host.verification.Verification.WorkloadRuntime runtime)
      throws java.sql.SQLException {
    if (runtime == null) {
      st.setNull(first, Types.VARCHAR);
      st.setNull(first + 1, Types.BOOLEAN);
    } else {
      st.setString(first, runtime.name());
      st.setBoolean(first + 1, runtime.network());
    }
  }

  private static void update(StatementBatch out, String hostId, Timestamp at, String set) {
    out.add(
        "UPDATE hosts SET " + set + ", updated_at = ? WHERE host_id = ?",
        st -> {
          st.setTimestamp(1, at);
          st.setString(2, hostId);
        });
  }

  record WindowRow(String day, int startMinute, int endMinute) {}

  static String windowsJson(List<Listing.Window> windows) {
    try {
      return JSON.writeValueAsString(
          windows.stream()
              .map(w -> new WindowRow(w.day().name(), w.startMinute(), w.endMinute()))
              .toList());
    } catch (JsonProcessingException e) {
      throw new IllegalStateException(e);
    }
  }

  static List<Listing.Window> windowsFrom(String json) {
    try {
      WindowRow[] rows = JSON.readValue(json, WindowRow[].class);
      return java.util.Arrays.stream(rows)
          .map(
              r ->
                  new Listing.Window(
                      java.time.DayOfWeek.valueOf(r.day()), r.startMinute(), r.endMinute()))
          .toList();
    } catch (JsonProcessingException e) {
      throw new IllegalStateException("bad availability in hosts table", e);
    }
  }
}
