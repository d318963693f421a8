package dev.tickmark.http;

/** Query parameters, parsed strictly. */
final class Params {
  private Params() {}

  static int positiveInt(String name, String text, int max) {
    if (text.isEmpty() || !Character.isDigit(text.charAt(0))) {
      throw Problem.badRequest(
          "invalid_parameter", name + " must be a whole number from 1 to " + max);
    }
    try {
      int v = Integer.parseInt(text);
      if (v >= 1 && v <= max) return v;
    } catch (NumberFormatException ignored) {
      // answered below
    }
    throw Problem.badRequest(
        "invalid_parameter", name + " must be a whole number from 1 to " + max);
  }

  static long nonNegativeLong(String name, String text) {
    if (text.isEmpty() || !Character.isDigit(text.charAt(0))) {
      throw Problem.badRequest(
          "invalid_parameter", name + " must be a cursor returned by a previous page");
    }
    try {
      long v = Long.parseLong(text);
      if (v >= 0) return v;
    } catch (NumberFormatException ignored) {
      // answered below
    }
    throw Problem.badRequest(
        "invalid_parameter", name + " must be a cursor returned by a previous page");
  }

  /**
   * Free text matched against stored text (an operator's name): at most {@code max} characters and
   * no control character. PostgreSQL cannot hold U+0000 in text, so a NUL that reached a query
   * failed there and answered 503 {@code database_unavailable}.
   */
  static String text(String name, String text, int max) {
    if (text.length() > max)
      throw Problem.badRequest("invalid_parameter", name + " is at most " + max + " characters");
    for (int i = 0; i < text.length(); i++) {
      char c = text.charAt(i);
      if (c < 0x20 || c == 0x7f)
        throw Problem.badRequest("invalid_parameter", name + " may not contain control characters");
    }
    return text;
  }
}
