package dev.tickmark.engine;

import com.fasterxml.jackson.annotation.JsonCreator;
import com.fasterxml.jackson.annotation.JsonValue;
import java.util.Locale;
import org.apache.pekko.pattern.StatusReply;

/**
 * Why a command was refused: one stable code, whose wire name (the constant's name in lower case)
 * is what clients, the HTTP edge and the journal rely on. A refusal travels in {@link
 * StatusReply#error(String)} as {@code "<code>: <detail>"}: error replies cross node boundaries, so
 * they are plain text rather than exceptions (Java serialization is off), and {@link
 * #codeOf(String)} reads the code back.
 */
public enum Rejection {
  // money and accounts
  NOT_FOUND,
  ALREADY_EXISTS,
  INVALID_AMOUNT,
  INSUFFICIENT_FUNDS,
  INSUFFICIENT_EARNINGS,
  SPEND_CAP_REACHED,
  HOLD_NOT_FOUND,
  HOLD_CLOSED,
  /**
   * A pending hold was not confirmed by its rental in time and went back to the balance (issue 15):
   * its late confirmation is refused.
   */
  HOLD_EXPIRED,
  HOLD_EXCEEDED,
  IDEMPOTENCY_CONFLICT,
  AMOUNT_TOO_LARGE,
  ACCOUNT_SUSPENDED,
  INVALID_IBAN,
  INVALID_BIC,
  INVALID_KEY,
  INVALID_NAME,
  INVALID_HOLDER_NAME,
  INVALID_REASON,
  /**
   * An account has as many live rentals (pending, provisioning, running, stopping) as it may have
   * at once ({@code tickmark.accounts.max-live-rentals}): a new one waits until one ends.
   */
  TOO_MANY_RENTALS,
  /**
   * A payout that was not paid (refused by its account, or still being paid) cannot be returned by
   * the bank.
   */
  PAYOUT_NOT_PAID,
  /**
   * A rental is refunded only once its money is final (ended and closed): one still pending,
   * running or stopping has charges on their way.
   */
  RENTAL_NOT_ENDED,
  /** A refund would give back more than the rental charged (less what was refunded already). */
  REFUND_EXCEEDS_CHARGE,
  // hosts and their agents
  TOKEN_USED,
  TOKEN_EXPIRED,
  UNAUTHORIZED,
  HOST_REMOVED,
  HOST_NOT_AVAILABLE,
  /** The host's agent is not connected: nothing can be asked of it now. */
  HOST_OFFLINE,
  INSUFFICIENT_CARDS,
  /**
   * A reservation its rental did not claim in time went back to the host's free cards: a late claim
   * (its start) is refused.
   */
  RESERVATION_EXPIRED,
  PRICE_ABOVE_CEILING,
  INVALID_LISTING,
  INVALID_CARDS,
  NOT_RECLAIMABLE,
  HOST_BUSY,
  BAD_PUBLIC_KEY,
  /** A renter proposed to a host it owns: nobody rents their own host (self-dealing). */
  OWN_HOST,
  // reaching the workload
  /** The rental is not running (yet, or any more): nothing to connect to. */
  NOT_RUNNING,
  /** A rental has at most 8 SSH streams open at once. */
  TOO_MANY_STREAMS,
  // snapshots
  /** A snapshot is larger than {@code tickmark.snapshots.max-bytes}. */
  SNAPSHOT_TOO_LARGE,
  /**
   * The account's snapshots would exceed its storage quota ({@code
   * tickmark.snapshots.quota-bytes}).
   */
  QUOTA_EXCEEDED,
  /** The snapshot cannot be restored: still uploading, failed, suspended or deleted. */
  SNAPSHOT_NOT_READY,
  /** Only a running rental's workspace can be kept. */
  SNAPSHOT_NOT_POSSIBLE,
  /** An upload named chunks the store does not have. */
  CHUNKS_MISSING,
  // why the engine closes an agent's session (its error frame's code)
  /** A newer session for the host connected. */
  REPLACED,
  /**
   * The host's entity knows no live session (it restarted or moved): the agent should reconnect.
   */
  RECONNECT,
  HEARTBEAT_TIMEOUT,
  /**
   * Not a refusal: the other side did not answer in time (a timeout, a shard moving, the database
   * down); retry later.
   */
  UNAVAILABLE,
  /** A reply that carries no code of ours. */
  INTERNAL;

  private final String wire = name().toLowerCase(Locale.ROOT);

  @JsonValue
  public String wire() {
    return wire;
  }

  /** The code of a wire name; {@link #INTERNAL} for a name that is none of ours. */
  @JsonCreator
  public static Rejection fromWire(String wire) {
    for (Rejection r : values()) if (r.wire.equals(wire)) return r;
    return INTERNAL;
  }

  /** An error reply carrying this code and a human-readable detail. */
  public <T> StatusReply<T> reply(String detail) {
    return StatusReply.error(wire + ": " + detail);
  }

  public static <T> StatusReply<T> reply(Rejection code, String detail) {
    return code.reply(detail);
  }

  /** The code of an error reply's message, or {@link #INTERNAL} if it carries none. */
  public static Rejection codeOf(String message) {
    if (message == null) return INTERNAL;
    int colon = message.indexOf(": ");
    return colon <= 0 ? INTERNAL : fromWire(message.substring(0, colon));
  }

  /**
   * The code of an ask's failure: the code of a refusal, {@link #UNAVAILABLE} for anything else (a
   * timeout, an entity whose shard is moving), {@code null} when there was no failure.
   */
  public static Rejection codeOf(Throwable failure) {
    if (failure == null) return null;
    if (failure instanceof StatusReply.ErrorMessage e) return codeOf(e.getMessage());
    return UNAVAILABLE;
  }

  /** The human-readable detail of an error reply's message. */
  public static String detailOf(String message) {
    if (message == null) return "";
    int colon = message.indexOf(": ");
    return colon <= 0 ? message : message.substring(colon + 2);
  }
}
