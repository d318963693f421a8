package dev.tickmark.persistence.lease;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.sql.Connection;
import java.sql.PreparedStatement;

/** The lease tables read, and bent, directly: what the lease tests check and set up. */
final class LeaseRows {
  interface Connections {
    Connection open() throws Exception;
  }

  private final Connections connections;

  LeaseRows(Connections connections) {
    this.connections = connections;
  }

  /** The holder's row lapses now, as if it had not renewed for the TTL (no waiting in a test). */
  void lapse(String holder) throws Exception {
    try (Connection c = connections.open();
        PreparedStatement st =
            c.prepareStatement(
                "UPDATE lease_holders SET expires_at = clock_timestamp() - interval '1 millisecond'"
                    + " WHERE holder = ?")) {
      st.setString(1, holder);
      assertEquals(1, st.executeUpdate(), holder + " is registered");
    }
  }

  /** Who holds the lease, or null if nobody does. */
  String holderOf(String lease) throws Exception {
    return column("holder", lease);
  }

  /** Who was refused the lease since its holder last answered, or null. */
  String wantedBy(String lease) throws Exception {
    return column("wanted_by", lease);
  }

  private String column(String column, String lease) throws Exception {
    try (Connection c = connections.open();
        PreparedStatement st =
            c.prepareStatement("SELECT " + column + " FROM leases WHERE name = ?")) {
      st.setString(1, lease);
      try (var rs = st.executeQuery()) {
        return rs.next() ? rs.getString(1) : null;
      }
    }
  }
}
