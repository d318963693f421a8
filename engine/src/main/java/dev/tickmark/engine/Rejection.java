package dev.tickmark.engine;

import org.apache.pekko.pattern.StatusReply;

/**
 * A refused command, carried in {@link StatusReply#error(String)} as {@code "<code>: <detail>"}.
 * Error replies cross node boundaries, so they are plain text rather than exceptions (Java
 * serialization is off); the stable {@code code} is what clients and the HTTP edge rely on.
 */
public final class Rejection {
  public static final String NOT_FOUND = "not_found";
  public static final String ALREADY_EXISTS = "already_exists";
  public static final String INVALID_AMOUNT = "invalid_amount";
  public static final String INSUFFICIENT_FUNDS = "insufficient_funds";
  public static final String INSUFFICIENT_EARNINGS = "insufficient_earnings";
  public static final String SPEND_CAP_REACHED = "spend_cap_reached";
  public static final String HOLD_NOT_FOUND = "hold_not_found";
  public static final String HOLD_CLOSED = "hold_closed";
  public static final String HOLD_EXCEEDED = "hold_exceeded";
  public static final String IDEMPOTENCY_CONFLICT = "idempotency_conflict";
  public static final String AMOUNT_TOO_LARGE = "amount_too_large";
  public static final String ACCOUNT_SUSPENDED = "account_suspended";
  public static final String INVALID_IBAN = "invalid_iban";
  public static final String INVALID_BIC = "invalid_bic";
  /** Temporary: something the command needs (an entity, the read side) cannot answer now; retry later. */
  public static final String UNAVAILABLE = "unavailable";

  private Rejection() {}

  public static <T> StatusReply<T> reply(String code, String detail) {
    return StatusReply.error(code + ": " + detail);
  }

  /** The stable code of an error reply's message, or {@code "internal"} if it carries none. */
  public static String codeOf(String message) {
    if (message == null) return "internal";
    int colon = message.indexOf(": ");
    if (colon <= 0) return "internal";
    String code = message.substring(0, colon);
    for (int i = 0; i < code.length(); i++) {
      char c = code.charAt(i);
      if (!(c == '_' || (c >= 'a' && c <= 'z'))) return "internal";
    }
    return code;
  }

  /** The human-readable detail of an error reply's message. */
  public static String detailOf(String message) {
    if (message == null) return "";
    int colon = message.indexOf(": ");
    return colon <= 0 ? message : message.substring(colon + 2);
  }
}
