package dev.tickmark.cli;

/**
 * The engine could not be reached (refused, unresolvable, timed out, cut off): exit 3, one line, no
 * stack trace.
 */
final class UnreachableException extends RuntimeException {
  UnreachableException(String message, Throwable cause) {
    super(message, cause, false, false);
  }
}
