package dev.tickmark.http;

import com.fasterxml.jackson.databind.JsonNode;
import dev.tickmark.engine.account.Account;
import java.util.concurrent.CompletionStage;
import org.apache.pekko.util.ByteString;

/** {@code {"monthly": "100.00" | null}}: sets or removes an account's monthly spend cap. */
final class SpendCaps {
  private final Accounts accounts;

  SpendCaps(Accounts accounts) {
    this.accounts = accounts;
  }

  CompletionStage<Account.Summary> set(String accountId, ByteString body) {
    JsonNode node = Json.tree(body);
    node.fieldNames()
        .forEachRemaining(
            f -> {
              if (!f.equals("monthly"))
                throw Problem.badRequest("unknown_field", "unknown field \"" + f + "\"");
            });
    if (!node.has("monthly"))
      throw Problem.badRequest(
          "missing_field", "\"monthly\" is required (a string of euros, or null for no cap)");
    JsonNode monthly = node.get("monthly");
    Long cap;
    if (monthly.isNull()) cap = null;
    else if (monthly.isTextual()) cap = Amounts.parse("monthly", monthly.asText());
    else
      throw Problem.badRequest(
          "invalid_amount", "\"monthly\" must be a string of euros with up to 6 decimals, or null");
    return accounts.ask(accountId, reply -> new Account.SetSpendCap(cap, reply));
  }
}
