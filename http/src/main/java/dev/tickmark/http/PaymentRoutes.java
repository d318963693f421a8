package dev.tickmark.http;

import static org.apache.pekko.http.javadsl.server.Directives.*;

import dev.tickmark.engine.account.Account;
import dev.tickmark.engine.money.Money;
import dev.tickmark.persistence.payments.PaymentIds;
import java.time.Clock;
import java.util.concurrent.CompletionStage;
import org.apache.pekko.http.javadsl.model.HttpResponse;
import org.apache.pekko.http.javadsl.server.Route;
import org.apache.pekko.util.ByteString;

/**
 * The payment provider's top-up webhook. The signature covers the raw body; a payment is credited
 * at most once, on its {@code payment_id}, however often the provider retries. Payment ids are
 * unique across the platform ({@link PaymentIds}): an id already received for another account or
 * amount is refused 409 {@code payment_id_reused} before any account is asked.
 */
public final class PaymentRoutes {
  /** The operations {@link #route()} serves; the tests hold it to the code and to openapi.json. */
  static final java.util.List<Operation> OPERATIONS =
      java.util.List.of(Operation.post("/v1/payments/webhook"));

  record PaymentEvent(
      String paymentId, String accountId, String amount, String currency, String status) {}

  record Receipt(
      boolean received, boolean credited, String paymentId, String accountId, String amount) {}

  private final Accounts accounts;
  private final PaymentIds paymentIds;
  private final WebhookSignature signature; // null when no secret is configured
  private final Clock clock;

  public PaymentRoutes(
      Accounts accounts, PaymentIds paymentIds, WebhookSignature signature, Clock clock) {
    this.accounts = accounts;
    this.paymentIds = paymentIds;
    this.signature = signature;
    this.clock = clock;
  }

  public Route route() {
    return path(
        segment("payments").slash("webhook"),
        () ->
            post(
                () ->
                    optionalHeaderValueByName(
                        "Tickmark-Signature",
                        header ->
                            RequestBody.read(
                                body -> completeWithFuture(receive(header.orElse(null), body))))));
  }

  private static org.apache.pekko.http.javadsl.server.PathMatcher0 segment(String s) {
    return org.apache.pekko.http.javadsl.server.PathMatchers.segment(s);
  }

  private CompletionStage<HttpResponse> receive(String header, ByteString body) {
    if (signature == null)
      throw new Problem(
          503, "webhook_not_configured", "TICKMARK_PAYMENT_WEBHOOK_SECRET is not set on this node");
    String wrong = signature.problemWith(header, body.toArray(), clock.instant());
    if (wrong != null) throw new Problem(401, "invalid_signature", wrong);
    PaymentEvent event = Json.read(body, PaymentEvent.class);
    if (event.paymentId() == null
        || event.paymentId().isBlank()
        || event.paymentId().length() > 200) {
      throw Problem.badRequest(
          "invalid_field", "\"payment_id\" is required (at most 200 characters)");
    }
    if (event.accountId() == null || event.accountId().isBlank())
      throw Problem.badRequest("invalid_field", "\"account_id\" is required");
    long amount = Amounts.parsePositive("amount", event.amount());
    if (!"EUR".equals(event.currency()))
      throw Problem.badRequest("unsupported_currency", "only EUR payments are accepted");
    if (!"succeeded".equals(event.status())) {
      // Pending or failed payments are acknowledged so the provider stops retrying, and credit
      // nothing.
      return java.util.concurrent.CompletableFuture.completedFuture(
          Responses.json(
              200,
              new Receipt(
                  true, false, event.paymentId(), event.accountId(), Money.format(amount))));
    }
    return paymentIds
        .claim(event.paymentId(), event.accountId(), amount)
        .thenCompose(
            claim -> {
              if (claim instanceof PaymentIds.Reused)
                throw new Problem(
                    409,
                    "payment_id_reused",
                    "payment_id "
                        + event.paymentId()
                        + " was already received for another account or amount");
              return accounts.<Account.Posting>ask(
                  event.accountId(),
                  reply -> new Account.Deposit("payment:" + event.paymentId(), amount, reply));
            })
        .thenApply(
            posting ->
                Responses.json(
                    200,
                    new Receipt(
                        true,
                        !posting.duplicate(),
                        event.paymentId(),
                        event.accountId(),
                        Money.format(posting.amount()))));
  }
}
