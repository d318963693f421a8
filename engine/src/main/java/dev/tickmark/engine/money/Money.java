package dev.tickmark.engine.money;

/**
 * Amounts are {@code long} micro-euros (µ€). This class converts between that and the wire form, a
 * decimal string with up to six decimals ({@code "20"}, {@code "2.89"}, {@code "0.000803"}).
 * Parsing is strict and allocation-light: no {@code BigDecimal}, no floating point.
 */
public final class Money {
  public static final long MICROS_PER_EURO = 1_000_000L;

  /**
   * The largest amount accepted on the wire: one thousand billion euros. Anything bigger is a typo
   * or an attack.
   */
  public static final long MAX_AMOUNT = 1_000_000_000_000L * MICROS_PER_EURO;

  private Money() {}

  /** Thrown for any text that is not a valid non-negative amount. */
  public static final class InvalidAmount extends IllegalArgumentException {
    public InvalidAmount(String message) {
      super(message);
    }
  }

  /**
   * Parses a non-negative decimal euro amount with at most six decimals into micro-euros.
   *
   * @throws InvalidAmount for a sign, exponent, whitespace, more than six decimals, or a value
   *     above {@link #MAX_AMOUNT}
   */
  public static long parse(String text) {
    if (text == null || text.isEmpty()) throw new InvalidAmount("amount is empty");
    int length = text.length();
    if (length > 32) throw new InvalidAmount("amount is too long");
    long euros = 0;
    long micros = 0;
    int i = 0;
    int integerDigits = 0;
    while (i < length && text.charAt(i) != '.') {
      char c = text.charAt(i);
      if (c < '0' || c > '9')
        throw new InvalidAmount("amount must be a decimal number of euros like \"12.50\"");
      euros = euros * 10 + (c - '0');
      if (euros > MAX_AMOUNT / MICROS_PER_EURO) throw new InvalidAmount("amount is too large");
      integerDigits++;
      i++;
    }
    if (integerDigits == 0) throw new InvalidAmount("amount must start with a digit");
    if (i < length) {
      i++; // the dot
      int decimals = length - i;
      if (decimals == 0) throw new InvalidAmount("amount must not end with a dot");
      if (decimals > 6) throw new InvalidAmount("amount has more than 6 decimals");
      for (int d = 0; d < 6; d++) {
        micros *= 10;
        if (d < decimals) {
          char c = text.charAt(i + d);
          if (c < '0' || c > '9')
            throw new InvalidAmount("amount must be a decimal number of euros like \"12.50\"");
          micros += c - '0';
        }
      }
    }
    long total = euros * MICROS_PER_EURO + micros;
    if (total > MAX_AMOUNT) throw new InvalidAmount("amount is too large");
    return total;
  }

  /**
   * Formats micro-euros with exactly six decimals: {@code 20000000 -> "20.000000"}. Negative values
   * keep their sign.
   */
  public static String format(long micros) {
    boolean negative = micros < 0;
    // Long.MIN_VALUE cannot be negated; amounts never get near it, but format must not lie.
    if (micros == Long.MIN_VALUE) return "-9223372036854.775808";
    long abs = Math.abs(micros);
    long euros = abs / MICROS_PER_EURO;
    long fraction = abs % MICROS_PER_EURO;
    StringBuilder sb = new StringBuilder(24);
    if (negative) sb.append('-');
    sb.append(euros).append('.');
    String f = Long.toString(fraction);
    for (int pad = f.length(); pad < 6; pad++) sb.append('0');
    return sb.append(f).toString();
  }
}
