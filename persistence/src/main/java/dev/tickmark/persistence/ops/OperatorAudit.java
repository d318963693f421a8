package dev.tickmark.persistence.ops;

import dev.tickmark.persistence.Jdbc;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.Timestamp;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletionStage;

/**
 * The operators' audit log (table {@code operator_audit}): who did what to which target through
 * {@code /ops}, when, with what answer and from which address. Rows are only ever added; no token
 * or request body is stored.
 */
public final class OperatorAudit {
  /** One operator action. {@code id} is null until stored. */
  public record Entry(
      Long id,
      java.time.Instant at,
      String operator,
      String method,
      String action,
      String target,
      int status,
      String clientAddress) {}

  private final Jdbc jdbc;

  public OperatorAudit(Jdbc jdbc) {
    this.jdbc = jdbc;
  }

  /** Adds one action; the caller need not wait for it. */
  public CompletionStage<Long> record(Entry e) {
    return jdbc.run(
        connection -> {
          try (PreparedStatement st =
              connection.prepareStatement(
                  "INSERT INTO operator_audit(at, operator, method, action, target, status, client_address)"
                      + " VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id")) {
            st.setTimestamp(1, Timestamp.from(e.at()));
            st.setString(2, clip(e.operator(), 64));
            st.setString(3, clip(e.method(), 10));
            st.setString(4, clip(e.action(), 200));
            st.setString(5, e.target() == null ? null : clip(e.target(), 200));
            st.setInt(6, e.status());
            st.setString(7, clip(e.clientAddress(), 64));
            try (ResultSet rs = st.executeQuery()) {
              rs.next();
              return rs.getLong(1);
            }
          }
        });
  }

  /**
   * The newest {@code limit} actions before the row {@code before} (0: from the newest), newest
   * first by when they were answered (rows are written asynchronously, so their ids need not follow
   * that order); {@code operator} narrows to one operator's (null: everyone's).
   */
  public CompletionStage<List<Entry>> latest(long before, String operator, int limit) {
    String sql =
        "SELECT id, at, operator, method, action, target, status, client_address FROM operator_audit"
            + " WHERE (? = 0 OR (at, id) < (SELECT c.at, c.id FROM operator_audit c WHERE c.id = ?))"
            + (operator == null ? "" : " AND operator = ?")
            + " ORDER BY at DESC, id DESC LIMIT ?";
    return jdbc.run(
        connection -> {
          try (PreparedStatement st = connection.prepareStatement(sql)) {
            int i = 1;
            st.setLong(i++, before);
            st.setLong(i++, before);
            if (operator != null) st.setString(i++, operator);
            st.setInt(i, limit);
            try (ResultSet rs = st.executeQuery()) {
              List<Entry> entries = new ArrayList<>();
              while (rs.next())
                entries.add(
                    new Entry(
                        rs.getLong(1),
                        rs.getTimestamp(2).toInstant(),
                        rs.getString(3),
                        rs.getString(4),
                        rs.getString(5),
                        rs.getString(6),
                        rs.getInt(7),
                        rs.getString(8)));
              return entries;
            }
          }
        });
  }

  private static String clip(String s, int max) {
    return s.length() <= max ? s : s.substring(0, max);
  }
}
