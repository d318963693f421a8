package dev.tickmark.persistence.payments;

import dev.tickmark.persistence.Jdbc;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.Timestamp;
import java.time.Clock;
import java.util.concurrent.CompletionStage;

/**
 * Payment ids across the platform ({@code payment_ids}): the first account and amount a payment id
 * is received for keep it. The same payment again (same account, same amount) is let through, so
 * the Account credits it once on its own deposit key; the id for another account or amount is
 * refused, whichever account's entity would otherwise have credited it.
 */
public final class PaymentIds {
  public sealed interface Claim permits Held, Reused {}

  /** The id is this account's for this amount (claimed now, or before by the same payment). */
  public record Held() implements Claim {}

  /** The id was received for another account or another amount. */
  public record Reused() implements Claim {}

  private final Jdbc jdbc;
  private final Clock clock;

  public PaymentIds(Jdbc jdbc, Clock clock) {
    this.jdbc = jdbc;
    this.clock = clock;
  }

  public CompletionStage<Claim> claim(String paymentId, String accountId, long amount) {
    Timestamp now = Timestamp.from(clock.instant());
    return jdbc.run(
        connection -> {
          try (PreparedStatement insert =
              connection.prepareStatement(
                  "INSERT INTO payment_ids(payment_id, account_id, amount, claimed_at)"
                      + " VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING")) {
            insert.setString(1, paymentId);
            insert.setString(2, accountId);
            insert.setLong(3, amount);
            insert.setTimestamp(4, now);
            if (insert.executeUpdate() == 1) return new Held();
          }
          try (PreparedStatement select =
              connection.prepareStatement(
                  "SELECT account_id, amount FROM payment_ids WHERE payment_id = ?")) {
            select.setString(1, paymentId);
            try (ResultSet rs = select.executeQuery()) {
              if (rs.next() && rs.getString(1).equals(accountId) && rs.getLong(2) == amount)
                return new Held();
              return new Reused();
            }
          }
        });
  }
}
