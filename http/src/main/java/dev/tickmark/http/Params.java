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
}
