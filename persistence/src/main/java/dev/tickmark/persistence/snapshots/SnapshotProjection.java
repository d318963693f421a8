package dev.tickmark.persistence.snapshots;

import dev.tickmark.engine.snapshot.Snapshot;
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
 * Keeps the {@code snapshots} table in step with snapshot events (exactly-once, one projection per
 * tag slice).
 */
public final class SnapshotProjection {
  public static final String NAME = "snapshots";

  private SnapshotProjection() {}

  public static void init(ActorSystem<?> system, Jdbc jdbc) {
    SlicedProjections.init(
        system, "snapshots-writer", Snapshot.allTags(), tag -> projection(system, jdbc, tag));
  }

  static GroupedProjection<Offset, EventEnvelope<Snapshot.Event>> projection(
      ActorSystem<?> system, Jdbc jdbc, String tag) {
    return SlicedProjections.exactlyOnceInGroups(
        system, jdbc, NAME, tag, SnapshotProjection::apply);
  }

  static void apply(Connection c, String id, Snapshot.Event event) throws SQLException {
    Timestamp at = Timestamp.from(event.at());
    if (event instanceof Snapshot.Created e) {
      try (PreparedStatement st =
          c.prepareStatement(
              "INSERT INTO snapshots(snapshot_id, renter_id, status, rental_id, host_id, gpu, region,"
                  + " created_at, updated_at) VALUES (?, ?, 'uploading', ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING")) {
        st.setString(1, id);
        st.setString(2, e.renterId());
        st.setString(3, e.rentalId());
        st.setString(4, e.hostId());
        st.setString(5, e.gpu());
        st.setString(6, e.region());
        st.setTimestamp(7, at);
        st.setTimestamp(8, at);
        st.executeUpdate();
      }
    } else if (event instanceof Snapshot.ManifestRecorded e) {
      try (PreparedStatement st =
          c.prepareStatement(
              "UPDATE snapshots SET size_bytes = ?, sha256 = ?, chunk_count = ?, updated_at = ?"
                  + " WHERE snapshot_id = ?")) {
        st.setLong(1, e.sizeBytes());
        st.setString(2, e.sha256());
        st.setInt(3, e.chunkCount());
        st.setTimestamp(4, at);
        st.setString(5, id);
        st.executeUpdate();
      }
    } else if (event instanceof Snapshot.Ready e) {
      try (PreparedStatement st =
          c.prepareStatement(
              "UPDATE snapshots SET status = 'ready', ready_at = ?, updated_at = ? WHERE snapshot_id = ?")) {
        st.setTimestamp(1, Timestamp.from(e.readyAt()));
        st.setTimestamp(2, at);
        st.setString(3, id);
        st.executeUpdate();
      }
    } else if (event instanceof Snapshot.UploadFailed e) {
      try (PreparedStatement st =
          c.prepareStatement(
              "UPDATE snapshots SET status = 'failed', failure = ?, failure_detail = ?, ended_at = ?,"
                  + " updated_at = ? WHERE snapshot_id = ?")) {
        st.setString(1, e.code());
        st.setString(2, e.detail());
        st.setTimestamp(3, at);
        st.setTimestamp(4, at);
        st.setString(5, id);
        st.executeUpdate();
      }
    } else if (event instanceof Snapshot.Settled e) {
      meter(c, id, at, e.throughSecond(), e.cumulativeCost(), "");
    } else if (event instanceof Snapshot.Suspended) {
      try (PreparedStatement st =
          c.prepareStatement(
              "UPDATE snapshots SET status = 'suspended', suspended_at = ?, updated_at = ? WHERE snapshot_id = ?")) {
        st.setTimestamp(1, at);
        st.setTimestamp(2, at);
        st.setString(3, id);
        st.executeUpdate();
      }
    } else if (event instanceof Snapshot.Resumed) {
      try (PreparedStatement st =
          c.prepareStatement(
              "UPDATE snapshots SET status = 'ready', suspended_at = NULL, updated_at = ? WHERE snapshot_id = ?")) {
        st.setTimestamp(1, at);
        st.setString(2, id);
        st.executeUpdate();
      }
    } else if (event instanceof Snapshot.Deleted e) {
      meter(
          c,
          id,
          at,
          e.throughSecond(),
          e.cumulativeCost(),
          ", status = 'deleted', ended_at = COALESCE(ended_at, ?)");
    } else if (event instanceof Snapshot.Closed) {
      try (PreparedStatement st =
          c.prepareStatement(
              "UPDATE snapshots SET closed_at = ?, updated_at = ? WHERE snapshot_id = ?")) {
        st.setTimestamp(1, at);
        st.setTimestamp(2, at);
        st.setString(3, id);
        st.executeUpdate();
      }
    }
    // HoldExtended: money bookkeeping the list does not show.
  }

  /** The cumulative meter, and {@code andSet} (whose one placeholder is the event's instant). */
  private static void meter(
      Connection c, String id, Timestamp at, long seconds, long cost, String andSet)
      throws SQLException {
    try (PreparedStatement st =
        c.prepareStatement(
            "UPDATE snapshots SET billed_seconds = ?, cost = ?"
                + andSet
                + ", updated_at = ? WHERE snapshot_id = ?")) {
      int i = 1;
      st.setLong(i++, seconds);
      st.setLong(i++, cost);
      if (!andSet.isEmpty()) st.setTimestamp(i++, at);
      st.setTimestamp(i++, at);
      st.setString(i, id);
      st.executeUpdate();
    }
  }
}
