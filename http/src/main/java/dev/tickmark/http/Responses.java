package dev.tickmark.http;

import dev.tickmark.engine.Rejection;
import java.sql.SQLException;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeoutException;
import java.util.function.Supplier;
import org.apache.pekko.http.javadsl.model.ContentTypes;
import org.apache.pekko.http.javadsl.model.HttpEntities;
import org.apache.pekko.http.javadsl.model.HttpResponse;
import org.apache.pekko.http.javadsl.model.StatusCodes;
import org.apache.pekko.http.javadsl.model.headers.CacheControl;
import org.apache.pekko.http.javadsl.model.headers.CacheDirectives;
import org.apache.pekko.http.javadsl.server.Directives;
import org.apache.pekko.http.javadsl.server.Route;
import org.apache.pekko.http.scaladsl.model.EntityStreamSizeException;
import org.apache.pekko.pattern.StatusReply;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/** JSON responses, and the one place that turns any failure into a problem+json answer. */
public final class Responses {
  private static final Logger log = LoggerFactory.getLogger(Responses.class);

  private Responses() {}

  public static HttpResponse json(int status, Object body) {
    return HttpResponse.create()
        .withStatus(StatusCodes.get(status))
        .withEntity(HttpEntities.create(ContentTypes.APPLICATION_JSON, Json.write(body)));
  }

  /**
   * {@code Cache-Control: no-store} on whatever {@code inner} answers: for responses that carry a
   * secret (an API key, a registration token), which no browser, proxy or CDN may keep.
   */
  public static Route noStore(Supplier<Route> inner) {
    return Directives.respondWithHeader(CacheControl.create(CacheDirectives.NO_STORE), inner);
  }

  public static HttpResponse noContent() {
    return HttpResponse.create().withStatus(StatusCodes.NO_CONTENT);
  }

  /**
   * The problem a failure stands for. Unknown failures are logged and answered without internals.
   */
  public static Problem problemFor(Throwable failure) {
    Throwable t = unwrap(failure);
    if (t instanceof Problem p) return p;
    if (t instanceof StatusReply.ErrorMessage e) return fromRejection(e.getMessage());
    if (t instanceof TimeoutException
        || t.getClass().getSimpleName().equals("AskTimeoutException")) {
      return new Problem(
          503,
          "unavailable",
          "the engine did not answer in time; retry with the same Idempotency-Key");
    }
    if (t instanceof SQLException) {
      log.warn("database call failed: {}", t.getMessage());
      return new Problem(503, "database_unavailable", "the database is unavailable; retry later");
    }
    if (t instanceof EntityStreamSizeException)
      return new Problem(413, "payload_too_large", "the request body is over 64 KiB");
    log.error("unexpected failure answering a request", t);
    return new Problem(500, "internal", "an unexpected error occurred");
  }

  static Problem fromRejection(String message) {
    Rejection code = Rejection.codeOf(message);
    return new Problem(status(code), code.wire(), Rejection.detailOf(message));
  }

  /** Every code the engine refuses with, and its HTTP status. */
  static int status(Rejection code) {
    return switch (code) {
      case NOT_FOUND, HOLD_NOT_FOUND -> 404;
      case ACCOUNT_SUSPENDED, OWN_HOST -> 403;
      case INSUFFICIENT_FUNDS, SPEND_CAP_REACHED -> 402;
      case IDEMPOTENCY_CONFLICT,
          ALREADY_EXISTS,
          HOLD_CLOSED,
          HOLD_EXPIRED,
          RESERVATION_EXPIRED,
          NOT_RECLAIMABLE,
          HOST_BUSY,
          HOST_NOT_AVAILABLE,
          HOST_OFFLINE,
          NOT_RUNNING,
          SNAPSHOT_NOT_READY,
          SNAPSHOT_NOT_POSSIBLE,
          CHUNKS_MISSING,
          PAYOUT_NOT_PAID,
          RENTAL_NOT_ENDED,
          REFUND_EXCEEDS_CHARGE ->
          409;
      case SNAPSHOT_TOO_LARGE -> 413;
      case TOO_MANY_STREAMS, TOO_MANY_RENTALS -> 429;
      case INSUFFICIENT_EARNINGS, AMOUNT_TOO_LARGE, HOLD_EXCEEDED, QUOTA_EXCEEDED -> 422;
      case UNAVAILABLE ->
          503; // temporary (the read side or an entity is away): retry, Retry-After says when
      case INTERNAL -> 500;
      case INVALID_AMOUNT,
          INVALID_IBAN,
          INVALID_BIC,
          INVALID_KEY,
          INVALID_NAME,
          INVALID_HOLDER_NAME,
          INVALID_REASON,
          TOKEN_USED,
          TOKEN_EXPIRED,
          HOST_REMOVED,
          INSUFFICIENT_CARDS,
          PRICE_ABOVE_CEILING,
          INVALID_LISTING,
          INVALID_CARDS,
          BAD_PUBLIC_KEY,
          UNAUTHORIZED,
          REPLACED,
          RECONNECT,
          HEARTBEAT_TIMEOUT ->
          400;
    };
  }

  /** The failure a {@link CompletionException} or {@link ExecutionException} wraps. */
  public static Throwable unwrapped(Throwable t) {
    return unwrap(t);
  }

  static Throwable unwrap(Throwable t) {
    Throwable current = t;
    while ((current instanceof CompletionException || current instanceof ExecutionException)
        && current.getCause() != null) {
      current = current.getCause();
    }
    return current;
  }
}
