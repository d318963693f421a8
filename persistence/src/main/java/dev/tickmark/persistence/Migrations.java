package dev.tickmark.persistence;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Versioned schema migrations. Each {@code db/migration/V<n>__<name>.sql} on the classpath runs
 * once, in order, in its own transaction, and is recorded with a checksum; an edited migration that
 * already ran stops the node instead of drifting. A PostgreSQL advisory lock serialises nodes
 * starting together.
 */
public final class Migrations {
  private static final Logger log = LoggerFactory.getLogger(Migrations.class);
  private static final long LOCK_ID = 0x7469636b6d61726bL; // "tickmark"

  /** The migrations in the order they apply. A new migration is added here and as a file. */
  static final List<String> FILES =
      List.of(
          "V1__journal_and_snapshots.sql",
          "V2__projection_offsets.sql",
          "V3__ledger_and_credentials.sql",
          "V4__hosts.sql",
          "V5__rentals.sql",
          "V6__payout_runs.sql",
          "V7__market_index.sql",
          "V8__rental_logs.sql",
          "V9__payment_ids.sql",
          "V10__ssh_keys.sql",
          "V11__api_key_scopes.sql",
          "V12__account_audit.sql",
          "V13__idempotency_key_expiry.sql",
          "V14__snapshots.sql",
          "V15__operator_audit_and_key_use.sql",
          "V16__idempotency_key_seed.sql",
          "V17__shard_leases.sql",
          "V18__event_tag_by_tag.sql",
          "V19__ledger_without_key_index.sql",
          "V20__event_tag_without_foreign_key.sql",
          "V21__host_reliability.sql",
          "V22__rental_exit_code.sql",
          "V23__host_runtime.sql",
          "V24__rental_launch.sql",
          "V25__rental_runtime.sql",
          "V26__host_rentals.sql",
          "V27__payout_returns.sql",
          "V28__rental_refunds.sql");

  private Migrations() {}

  /** Applies every pending migration and returns how many ran. */
  public static int migrate(DatabaseSettings db) throws SQLException {
    try (Connection connection = DriverManager.getConnection(db.url(), db.user(), db.password())) {
      try (Statement st = connection.createStatement()) {
        st.execute("SELECT pg_advisory_lock(" + LOCK_ID + ")");
      }
      try {
        return applyPending(connection);
      } finally {
        try (Statement st = connection.createStatement()) {
          st.execute("SELECT pg_advisory_unlock(" + LOCK_ID + ")");
        }
      }
    }
  }

  private static int applyPending(Connection connection) throws SQLException {
    try (Statement st = connection.createStatement()) {
      st.execute(
          "CREATE TABLE IF NOT EXISTS schema_migrations ("
              + "version INTEGER PRIMARY KEY, name VARCHAR(200) NOT NULL, checksum VARCHAR(64) NOT NULL, "
              + "applied_at TIMESTAMPTZ NOT NULL DEFAULT now())");
    }
    List<String[]> applied = new ArrayList<>();
    try (Statement st = connection.createStatement();
        ResultSet rs =
            st.executeQuery("SELECT version, checksum FROM schema_migrations ORDER BY version")) {
      while (rs.next()) applied.add(new String[] {Integer.toString(rs.getInt(1)), rs.getString(2)});
    }
    int ran = 0;
    for (String file : FILES) {
      int version = versionOf(file);
      String sql = read(file);
      String checksum = sha256(sql);
      String[] done =
          applied.stream().filter(a -> Integer.parseInt(a[0]) == version).findFirst().orElse(null);
      if (done != null) {
        if (!done[1].equals(checksum)) {
          throw new IllegalStateException(
              "migration " + file + " changed after it was applied; add a new migration instead");
        }
        continue;
      }
      boolean autoCommit = connection.getAutoCommit();
      connection.setAutoCommit(false);
      try (Statement st = connection.createStatement();
          PreparedStatement record =
              connection.prepareStatement(
                  "INSERT INTO schema_migrations(version, name, checksum) VALUES (?, ?, ?)")) {
        st.execute(sql);
        record.setInt(1, version);
        record.setString(2, file);
        record.setString(3, checksum);
        record.executeUpdate();
        connection.commit();
        ran++;
        log.info("Applied migration {}", file);
      } catch (SQLException e) {
        connection.rollback();
        throw new SQLException("migration " + file + " failed: " + e.getMessage(), e);
      } finally {
        connection.setAutoCommit(autoCommit);
      }
    }
    return ran;
  }

  static int versionOf(String file) {
    return Integer.parseInt(file.substring(1, file.indexOf("__")));
  }

  private static String read(String file) {
    try (InputStream in = Migrations.class.getResourceAsStream("/db/migration/" + file)) {
      if (in == null)
        throw new IllegalStateException("migration " + file + " is missing from the classpath");
      return new String(in.readAllBytes(), StandardCharsets.UTF_8);
    } catch (IOException e) {
      throw new IllegalStateException("cannot read migration " + file, e);
    }
  }

  private static String sha256(String text) {
    try {
      return HexFormat.of()
          .formatHex(
              MessageDigest.getInstance("SHA-256").digest(text.getBytes(StandardCharsets.UTF_8)));
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }
}
