package dev.tickmark.persistence.payouts;

import dev.tickmark.engine.payout.PayoutRun;
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
 * Keeps the {@code payout_runs} table in step with payout-run events (exactly-once with its
 * offset).
 */
public final class PayoutRunProjection {
  public static final String NAME = "payout-runs";

  private PayoutRunProjection() {}

  public static void init(ActorSystem<?> system, Jdbc jdbc) {
    SlicedProjections.init(
        system, "payout-runs-writer", PayoutRun.allTags(), tag -> projection(system, jdbc, tag));
  }

  static GroupedProjection<Offset, EventEnvelope<PayoutRun.Event>> projection(
      ActorSystem<?> system, Jdbc jdbc, String tag) {
    return SlicedProjections.exactlyOnceInGroups(
        system, jdbc, NAME, tag, PayoutRunProjection::apply);
  }

  static void apply(Connection c, String id, PayoutRun.Event event) throws SQLException {
    Timestamp at = Timestamp.from(event.at());
    if (event instanceof PayoutRun.Started e) {
      try (PreparedStatement st =
          c.prepareStatement(
              "INSERT INTO payout_runs(run_id, status, minimum, created_at, updated_at)"
                  + " VALUES (?, 'deciding', ?, ?, ?) ON CONFLICT DO NOTHING")) {
        st.setString(1, id);
        st.setLong(2, e.minimum());
        st.setTimestamp(3, at);
        st.setTimestamp(4, at);
        st.executeUpdate();
      }
    } else if (event instanceof PayoutRun.Decided e) {
      long total = e.payments().stream().mapToLong(PayoutRun.Payment::amount).sum();
      update(
          c,
          id,
          at,
          "status = 'paying', decided_total = ?, decided_count = ?, skipped_count = ?, decided_at = ?",
          total,
          e.payments().size(),
          e.skipped().size(),
          at);
    } else if (event instanceof PayoutRun.PaymentConfirmed e) {
      update(c, id, at, "paid_total = paid_total + ?, paid_count = paid_count + 1", e.amount());
    } else if (event instanceof PayoutRun.PaymentRefused e) {
      update(
          c,
          id,
          at,
          "refused_total = refused_total + ?, refused_count = refused_count + 1",
          e.amount());
    } else if (event instanceof PayoutRun.PaymentReturned e) {
      update(
          c,
          id,
          at,
          "returned_total = returned_total + ?, returned_count = returned_count + 1",
          e.amount());
    } else if (event instanceof PayoutRun.Completed) {
      update(c, id, at, "status = 'completed', completed_at = ?", at);
    }
  }

  private static void update(Connection c, String id, Timestamp at, String set, Object... values)
      throws SQLException {
    try (PreparedStatement st =
        c.prepareStatement("UPDATE payout_runs SET " + set + ", updated_at = ? WHERE run_id = ?")) {
      int i = 1;
      for (Object v : values) st.setObject(i++, v);
      st.setTimestamp(i++, at);
      st.setString(i, id);
      st.executeUpdate();
    }
  }
}
