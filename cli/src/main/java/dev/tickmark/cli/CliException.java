package dev.tickmark.cli;

/**
 * A failure the user should see as one line, {@code error: <code>: <detail>}, and exit 1: a problem
 * answered by the engine (its stable {@code code} and {@code detail}), or one found before asking
 * it ({@code not_logged_in}).
 */
final class CliException extends RuntimeException {
  private final String code;

  CliException(String code, String detail) {
    super(detail, null, false, false); // an answer to show, not a failure to trace
    this.code = code;
  }

  String code() {
    return code;
  }

  String detail() {
    return getMessage();
  }
}
