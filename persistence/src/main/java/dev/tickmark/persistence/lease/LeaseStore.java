package dev.tickmark.persistence.lease;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.util.Collection;
import java.util.HashSet;
import java.util.Set;
import javax.sql.DataSource;

/**
 * The lease tables in PostgreSQL (V17__shard_leases.sql), as blocking calls; {@link ShardLeases}
 * runs them on its own threads. All instants are PostgreSQL's {@code clock_timestamp()}, so the
 * nodes' clocks never meet.
 *
 * <p>The one rule: a lease changes holder only while its holder's row has expired, and the check
 * and the change are serialised with that holder's renewal by row locks (a take-over locks the
 * holder's row {@code FOR SHARE}; a renewal updates it). So a holder whose renewal succeeded
 * without a lapse has lost nothing, and a holder whose row had lapsed learns exactly which leases
 * were taken meanwhile, in the same transaction that re-arms its row.
 */
final class LeaseStore {
  private final DataSource dataSource;

  LeaseStore(DataSource dataSource) {
    this.dataSource = dataSource;
  }

  /**
   * Creates (or re-arms) the holder's row, and forgets holders dead for an hour that hold nothing.
   */
  void register(String holder, Duration ttl) throws SQLException {
    try (Connection c = dataSource.getConnection()) {
      try (PreparedStatement st =
          c.prepareStatement(
              "INSERT INTO lease_holders (holder, expires_at) VALUES (?, clock_timestamp() + ?::interval)"
                  + " ON CONFLICT (holder) DO UPDATE SET expires_at = EXCLUDED.expires_at")) {
        st.setString(1, holder);
        st.setString(2, interval(ttl));
        st.executeUpdate();
      }
      try (PreparedStatement st =
          c.prepareStatement(
              "DELETE FROM lease_holders h WHERE h.expires_at < clock_timestamp() - interval '1 hour'"
                  + " AND NOT EXISTS (SELECT 1 FROM leases l WHERE l.holder = h.holder)")) {
        st.executeUpdate();
      }
    }
  }

  /**
   * Renews the holder's row for {@code ttl} and answers which of {@code held} another holder has
   * taken over; none unless the row had lapsed (or was never registered), since a take-over needs
   * the lapse.
   */
  Set<String> renew(String holder, Duration ttl, Collection<String> held) throws SQLException {
    try (Connection c = dataSource.getConnection()) {
      try (PreparedStatement st =
          c.prepareStatement(
              "UPDATE lease_holders SET expires_at = clock_timestamp() + ?::interval"
                  + " WHERE holder = ? AND expires_at > clock_timestamp()")) {
        st.setString(1, interval(ttl));
        st.setString(2, holder);
        if (st.executeUpdate() == 1) return Set.of();
      }
      // Lapsed: lock the row first, so that no take-over runs between reading what is still ours
      // and re-arming it.
      c.setAutoCommit(false);
      try {
        boolean exists;
        try (PreparedStatement st =
            c.prepareStatement("SELECT 1 FROM lease_holders WHERE holder = ? FOR UPDATE")) {
          st.setString(1, holder);
          try (ResultSet rs = st.executeQuery()) {
            exists = rs.next();
          }
        }
        Set<String> stillOurs = new HashSet<>();
        try (PreparedStatement st =
            c.prepareStatement("SELECT name FROM leases WHERE holder = ?")) {
          st.setString(1, holder);
          try (ResultSet rs = st.executeQuery()) {
            while (rs.next()) stillOurs.add(rs.getString(1));
          }
        }
        try (PreparedStatement st =
            c.prepareStatement(
                exists
                    ? "UPDATE lease_holders SET expires_at = clock_timestamp() + ?::interval WHERE holder = ?"
                    : "INSERT INTO lease_holders (expires_at, holder) VALUES (clock_timestamp() + ?::interval, ?)")) {
          st.setString(1, interval(ttl));
          st.setString(2, holder);
          st.executeUpdate();
        }
        c.commit();
        Set<String> lost = new HashSet<>(held);
        lost.removeAll(stillOurs);
        return lost;
      } catch (SQLException e) {
        c.rollback();
        throw e;
      }
    }
  }

  /**
   * Takes the lease for {@code holder} if it is free, already its own, or held by a holder whose
   * row has expired.
   */
  boolean acquire(String name, String holder) throws SQLException {
    try (Connection c = dataSource.getConnection()) {
      c.setAutoCommit(false);
      try {
        // a few rounds: a row can be deleted (released) between the insert and the lock
        for (int round = 0; round < 3; round++) {
          try (PreparedStatement st =
              c.prepareStatement(
                  "INSERT INTO leases (name, holder, acquired_at) VALUES (?, ?, clock_timestamp())"
                      + " ON CONFLICT (name) DO NOTHING")) {
            st.setString(1, name);
            st.setString(2, holder);
            if (st.executeUpdate() == 1) {
              c.commit();
              return true;
            }
          }
          String current = null;
          try (PreparedStatement st =
              c.prepareStatement("SELECT holder FROM leases WHERE name = ? FOR UPDATE")) {
            st.setString(1, name);
            try (ResultSet rs = st.executeQuery()) {
              if (rs.next()) current = rs.getString(1);
            }
          }
          if (current == null) continue;
          if (current.equals(holder)) {
            try (PreparedStatement st =
                c.prepareStatement("UPDATE leases SET wanted_by = NULL WHERE name = ?")) {
              st.setString(1, name);
              st.executeUpdate();
            }
            c.commit();
            return true;
          }
          boolean alive = false;
          try (PreparedStatement st =
              c.prepareStatement(
                  "SELECT expires_at > clock_timestamp() FROM lease_holders WHERE holder = ? FOR SHARE")) {
            st.setString(1, current);
            try (ResultSet rs = st.executeQuery()) {
              if (rs.next()) alive = rs.getBoolean(1);
            }
          }
          if (alive) {
            try (PreparedStatement st =
                c.prepareStatement("UPDATE leases SET wanted_by = ? WHERE name = ?")) {
              st.setString(1, holder);
              st.setString(2, name);
              st.executeUpdate();
            }
            c.commit();
            return false;
          }
          try (PreparedStatement st =
              c.prepareStatement(
                  "UPDATE leases SET holder = ?, acquired_at = clock_timestamp(), wanted_by = NULL"
                      + " WHERE name = ?")) {
            st.setString(1, holder);
            st.setString(2, name);
            st.executeUpdate();
          }
          c.commit();
          return true;
        }
        c.rollback();
        return false;
      } catch (SQLException e) {
        c.rollback();
        throw e;
      }
    }
  }

  /** The leases of {@code holder} that another holder was refused since. */
  Set<String> wanted(String holder) throws SQLException {
    try (Connection c = dataSource.getConnection();
        PreparedStatement st =
            c.prepareStatement(
                "SELECT name FROM leases WHERE holder = ? AND wanted_by IS NOT NULL")) {
      st.setString(1, holder);
      Set<String> names = new HashSet<>();
      try (ResultSet rs = st.executeQuery()) {
        while (rs.next()) names.add(rs.getString(1));
      }
      return names;
    }
  }

  /** The holder keeps the lease (its shard still runs there): the request is answered. */
  void keep(String name, String holder) throws SQLException {
    try (Connection c = dataSource.getConnection();
        PreparedStatement st =
            c.prepareStatement(
                "UPDATE leases SET wanted_by = NULL WHERE name = ? AND holder = ?")) {
      st.setString(1, name);
      st.setString(2, holder);
      st.executeUpdate();
    }
  }

  /** Gives the lease up if {@code holder} has it; true if it did. */
  boolean release(String name, String holder) throws SQLException {
    try (Connection c = dataSource.getConnection();
        PreparedStatement st =
            c.prepareStatement("DELETE FROM leases WHERE name = ? AND holder = ?")) {
      st.setString(1, name);
      st.setString(2, holder);
      return st.executeUpdate() == 1;
    }
  }

  /** Gives up every lease of {@code holder} and its row (a node leaving); how many leases. */
  int releaseAll(String holder) throws SQLException {
    try (Connection c = dataSource.getConnection()) {
      int released;
      try (PreparedStatement st = c.prepareStatement("DELETE FROM leases WHERE holder = ?")) {
        st.setString(1, holder);
        released = st.executeUpdate();
      }
      try (PreparedStatement st =
          c.prepareStatement("DELETE FROM lease_holders WHERE holder = ?")) {
        st.setString(1, holder);
        st.executeUpdate();
      }
      return released;
    }
  }

  private static String interval(Duration ttl) {
    return ttl.toMillis() + " milliseconds";
  }
}
