package dev.tickmark.persistence.ledger;

import static dev.tickmark.persistence.ledger.LedgerLegs.*;

import dev.tickmark.engine.account.Account;
import dev.tickmark.persistence.Jdbc;
import dev.tickmark.persistence.ProjectionProgress;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletionStage;
import org.apache.pekko.persistence.typed.PersistenceId;

/** Statements and the audit, read from the ledger table the projection writes. */
public final class LedgerReadModel {
  public record Entry(long id, Instant at, String kind, long amount, String rentalId, String key) {}

  /**
   * Every total of the ledger and whether the books balance. {@code pendingCaptures} and {@code
   * pendingCredits} are what one side of a rental's settlements has recorded beyond the other,
   * still on its way; they are not violations. {@code conserved} is false when a rental's two sides
   * disagree on the cumulative amount through a second both recorded, when any account is below
   * zero on any side, or when the totals do not add up. Refunds are checked the same way: {@code
   * refunds} (given back to renters) equal what they took back from providers' earnings and the
   * platform's fees, but for {@code pendingRefunds} / {@code pendingReversals} still on their way,
   * and no rental is refunded more than it charged. {@code providerDebt}: what refunds took from
   * providers whose earnings had been paid out already (their earnings below zero, made up by later
   * ones); not a violation.
   */
  public record Audit(
      long deposits,
      long captures,
      long providerEarnings,
      long platformRevenue,
      long storageRevenue,
      long holdsPlaced,
      long holdsReleased,
      long holdsOpen,
      long payouts,
      long payoutsReturned,
      long refunds,
      long earningsReversed,
      long platformFeesReversed,
      long pendingRefunds,
      long pendingReversals,
      long providerDebt,
      long renterBalances,
      long providerEarningsOwed,
      long pendingCaptures,
      long pendingCredits,
      long mismatchedSettlements,
      long accountsBelowZero,
      long entries,
      boolean conserved) {}

  private final Jdbc jdbc;
  private final ProjectionProgress progress;

  public LedgerReadModel(Jdbc jdbc) {
    this.jdbc = jdbc;
    this.progress = new ProjectionProgress(jdbc);
  }

  /**
   * Until the ledger holds every event the account {@code accountId} has written so far (its
   * deposits, holds, captures, credits, payouts), or {@code within} has passed ({@code false}); see
   * {@link ProjectionProgress}.
   */
  public CompletionStage<Boolean> awaitAccount(String accountId, Duration within) {
    return progress.awaitEntity(
        LedgerProjection.NAME,
        Account.tagFor(accountId),
        PersistenceId.of(Account.ENTITY_KEY.name(), accountId).id(),
        within);
  }

  /**
   * How far the ledger projection is behind, in milliseconds: the age (by the database's clock) of
   * the oldest account event that a slice has not projected yet, the largest over the slices; 0
   * when every slice is caught up. It reads the events past each slice's stored offset, which are
   * few when healthy.
   */
  public CompletionStage<Long> projectionLagMillis() {
    return jdbc.run(
        connection -> {
          try (PreparedStatement st =
              connection.prepareStatement(
                  """
          SELECT coalesce(max((extract(epoch FROM clock_timestamp()) * 1000)::bigint - oldest), 0)
          FROM (SELECT (SELECT min(j.write_timestamp) FROM event_tag t JOIN event_journal j ON j.ordering = t.event_id
                        WHERE t.tag = o.projection_key AND t.event_id > CAST(o.current_offset AS BIGINT)) AS oldest
                FROM pekko_projection_offset_store o WHERE o.projection_name = ?) behind
          """)) {
            st.setString(1, LedgerProjection.NAME);
            try (ResultSet rs = st.executeQuery()) {
              rs.next();
              return Math.max(0, rs.getLong(1));
            }
          }
        });
  }

  /** One line of an account's audit trail ({@link AccountAudit}). */
  public record AuditEntry(Instant at, String kind, String detail, Instant effectiveAt) {}

  /** The account's audit trail, newest first, at most {@code limit} lines. */
  public CompletionStage<List<AuditEntry>> audit(String accountId, int limit) {
    return jdbc.run(
        connection -> {
          try (PreparedStatement st =
              connection.prepareStatement(
                  "SELECT at, kind, detail, effective_at FROM account_audit"
                      + " WHERE account_id = ? ORDER BY at DESC, sequence_number DESC LIMIT ?")) {
            st.setString(1, accountId);
            st.setInt(2, limit);
            try (ResultSet rs = st.executeQuery()) {
              List<AuditEntry> entries = new ArrayList<>();
              while (rs.next()) {
                java.sql.Timestamp effective = rs.getTimestamp(4);
                entries.add(
                    new AuditEntry(
                        rs.getTimestamp(1).toInstant(),
                        rs.getString(2),
                        rs.getString(3),
                        effective == null ? null : effective.toInstant()));
              }
              return entries;
            }
          }
        });
  }

  /** Entries of one account, oldest first, after the entry id {@code after} (0 for the start). */
  public CompletionStage<List<Entry>> statement(String accountId, long after, int limit) {
    return jdbc.run(
        connection -> {
          try (PreparedStatement st =
              connection.prepareStatement(
                  "SELECT id, at, kind, amount, rental_id, entry_key FROM ledger_entries"
                      + " WHERE account_id = ? AND id > ? ORDER BY id LIMIT ?")) {
            st.setString(1, accountId);
            st.setLong(2, after);
            st.setInt(3, limit);
            try (ResultSet rs = st.executeQuery()) {
              List<Entry> entries = new ArrayList<>(limit);
              while (rs.next()) {
                entries.add(
                    new Entry(
                        rs.getLong(1),
                        rs.getTimestamp(2).toInstant(),
                        rs.getString(3),
                        rs.getLong(4),
                        rs.getString(5),
                        rs.getString(6)));
              }
              return entries;
            }
          }
        });
  }

  /**
   * Provider accounts whose earnings (credits less payouts, plus returned payouts) in the ledger
   * are at least {@code minimum}, in account order. The ledger may lag the accounts: this names
   * candidates, the accounts decide.
   */
  public CompletionStage<List<String>> providersOwed(long minimum) {
    return jdbc.run(
        connection -> {
          try (PreparedStatement st =
              connection.prepareStatement(
                  "SELECT account_id FROM ledger_entries WHERE kind IN "
                      + LedgerLegs.EARNINGS_KINDS
                      + " GROUP BY account_id HAVING SUM(amount) >= ? ORDER BY account_id")) {
            st.setLong(1, minimum);
            try (ResultSet rs = st.executeQuery()) {
              List<String> ids = new ArrayList<>();
              while (rs.next()) ids.add(rs.getString(1));
              return ids;
            }
          }
        });
  }

  public CompletionStage<Audit> audit() {
    return jdbc.run(
        connection -> {
          // One snapshot of the table for all three queries.
          connection.setAutoCommit(false);
          connection.setTransactionIsolation(java.sql.Connection.TRANSACTION_REPEATABLE_READ);
          try {
            Audit audit = audit(connection);
            connection.commit();
            return audit;
          } finally {
            connection.rollback();
            connection.setAutoCommit(true);
          }
        });
  }

  private static Audit audit(java.sql.Connection connection) throws SQLException {
    long deposits = 0,
        captures = 0,
        earnings = 0,
        platform = 0,
        storage = 0,
        holds = 0,
        released = 0,
        payouts = 0,
        returned = 0,
        refunds = 0,
        reversed = 0,
        feesReversed = 0,
        entries = 0;
    try (Statement st = connection.createStatement();
        ResultSet rs =
            st.executeQuery(
                "SELECT kind, COALESCE(SUM(amount), 0), COUNT(*) FROM ledger_entries GROUP BY kind")) {
      while (rs.next()) {
        long sum = rs.getLong(2);
        entries += rs.getLong(3);
        switch (rs.getString(1)) {
          case DEPOSIT -> deposits = sum;
          case CAPTURE -> captures = -sum;
          case EARNING -> earnings = sum;
          case PLATFORM_FEE -> platform = sum;
          case STORAGE -> storage = sum;
          case HOLD -> holds = -sum;
          case HOLD_RELEASED -> released = sum;
          case PAYOUT -> payouts = -sum;
          case PAYOUT_RETURNED -> returned = sum;
          case REFUND -> refunds = sum;
          case EARNING_REVERSED -> reversed = -sum;
          case PLATFORM_FEE_REVERSED -> feesReversed = -sum;
          default -> throw new SQLException("unknown ledger kind " + rs.getString(1));
        }
      }
    }
    long mismatched, pendingCaptures, pendingCredits;
    try (Statement st = connection.createStatement();
        // Settlements are cumulative (key <rental>:<second>), and each account applies the latest
        // one it receives from its own high-water mark: when one side missed a settlement (its node
        // was lost) and the next covered it, the two sides took different steps to the same totals.
        // So the sides are compared cumulatively, per rental, at every second both have recorded;
        // what one side has beyond the other is still on its way.
        ResultSet rs =
            st.executeQuery(
                "WITH legs AS (SELECT rental_id, CAST(substring(entry_key FROM '[0-9]+$') AS BIGINT) AS second,"
                    + "   CASE WHEN kind = 'capture' THEN -amount ELSE 0 END AS cap,"
                    + "   CASE WHEN kind = 'capture' THEN 0 ELSE amount END AS cred, kind = 'capture' AS is_cap"
                    + "   FROM ledger_entries WHERE kind IN ('capture', 'earning', 'platform_fee', 'storage')),"
                    + " steps AS (SELECT rental_id, second, SUM(cap) AS cap, SUM(cred) AS cred,"
                    + "   bool_or(is_cap) AS has_cap, bool_or(NOT is_cap) AS has_cred FROM legs GROUP BY rental_id, second),"
                    + " running AS (SELECT rental_id, has_cap, has_cred,"
                    + "   SUM(cap) OVER (PARTITION BY rental_id ORDER BY second) AS cap_through,"
                    + "   SUM(cred) OVER (PARTITION BY rental_id ORDER BY second) AS cred_through FROM steps),"
                    + " totals AS (SELECT rental_id, SUM(cap) AS cap, SUM(cred) AS cred FROM steps GROUP BY rental_id)"
                    + " SELECT (SELECT COUNT(*) FROM running WHERE has_cap AND has_cred AND cap_through <> cred_through),"
                    + " (SELECT COALESCE(SUM(GREATEST(cap - cred, 0)), 0) FROM totals),"
                    + " (SELECT COALESCE(SUM(GREATEST(cred - cap, 0)), 0) FROM totals)")) {
      rs.next();
      mismatched = rs.getLong(1);
      pendingCaptures = rs.getLong(2);
      pendingCredits = rs.getLong(3);
    }
    long pendingRefunds, pendingReversals, overRefunded;
    try (Statement st = connection.createStatement();
        // A refund's two sides (the renter's refund, the provider's and platform's reversal) are
        // cumulative per rental, as settlements are: what one side has beyond the other is on its
        // way. No rental may give back more than it captured.
        ResultSet rs =
            st.executeQuery(
                "WITH r AS (SELECT rental_id,"
                    + "   COALESCE(SUM(amount) FILTER (WHERE kind = 'refund'), 0) AS refunded,"
                    + "   -COALESCE(SUM(amount) FILTER (WHERE kind IN ('earning_reversed', 'platform_fee_reversed')), 0) AS reversed,"
                    + "   -COALESCE(SUM(amount) FILTER (WHERE kind = 'capture'), 0) AS captured"
                    + "   FROM ledger_entries WHERE rental_id IN (SELECT rental_id FROM ledger_entries"
                    + "     WHERE kind IN ('refund', 'earning_reversed', 'platform_fee_reversed'))"
                    + "   GROUP BY rental_id)"
                    + " SELECT COALESCE(SUM(GREATEST(refunded - reversed, 0)), 0),"
                    + " COALESCE(SUM(GREATEST(reversed - refunded, 0)), 0),"
                    + " COUNT(*) FILTER (WHERE refunded > captured OR reversed > captured) FROM r")) {
      rs.next();
      pendingRefunds = rs.getLong(1);
      pendingReversals = rs.getLong(2);
      overRefunded = rs.getLong(3);
    }
    mismatched += overRefunded; // a rental refunded beyond its charge disagrees with itself
    long belowZero, providerDebt;
    try (Statement st = connection.createStatement();
        // Earnings may go below zero only through a refund's reversal (they were paid out before
        // it): that is the provider's debt, not a violation; without reversals they never may.
        ResultSet rs =
            st.executeQuery(
                "SELECT COUNT(*) FILTER (WHERE balance < 0 OR held < 0 OR held > balance OR earnings + reversed < 0),"
                    + " COALESCE(SUM(GREATEST(-earnings, 0)), 0) FROM (SELECT account_id,"
                    + " COALESCE(SUM(amount) FILTER (WHERE kind IN ('deposit', 'capture', 'refund')), 0) AS balance,"
                    + " COALESCE(-SUM(amount) FILTER (WHERE kind = 'hold'), 0)"
                    + "   + COALESCE(SUM(amount) FILTER (WHERE kind = 'capture'), 0)"
                    + "   - COALESCE(SUM(amount) FILTER (WHERE kind = 'hold_released'), 0) AS held,"
                    + " COALESCE(SUM(amount) FILTER (WHERE kind IN "
                    + LedgerLegs.EARNINGS_KINDS
                    + "), 0) AS earnings,"
                    + " -COALESCE(SUM(amount) FILTER (WHERE kind = 'earning_reversed'), 0) AS reversed"
                    + " FROM ledger_entries WHERE account_id <> 'platform' GROUP BY account_id) t")) {
      rs.next();
      belowZero = rs.getLong(1);
      providerDebt = rs.getLong(2);
    }
    long holdsOpen = holds - captures - released;
    long renterBalances = deposits - captures + refunds;
    long owed = earnings - payouts + returned - reversed;
    // Storage captures are matched by the platform's storage legs, as rentals' by their credits.
    boolean totalsAddUp =
        captures - pendingCaptures == earnings + platform + storage - pendingCredits
            && refunds - pendingRefunds == reversed + feesReversed - pendingReversals;
    boolean conserved = mismatched == 0 && belowZero == 0 && totalsAddUp && holdsOpen >= 0;
    return new Audit(
        deposits,
        captures,
        earnings,
        platform,
        storage,
        holds,
        released,
        holdsOpen,
        payouts,
        returned,
        refunds,
        reversed,
        feesReversed,
        pendingRefunds,
        pendingReversals,
        providerDebt,
        renterBalances,
        owed,
        pendingCaptures,
        pendingCredits,
        mismatched,
        belowZero,
        entries,
        conserved);
  }
}
