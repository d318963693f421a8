package dev.tickmark.engine.account;

import java.util.Locale;
import java.util.Map;
import java.util.Optional;

/**
 * IBANs and BICs of the SEPA area, where payouts go by SEPA credit transfer. An IBAN is accepted
 * when its country takes part in SEPA, its length is that country's length in the SWIFT IBAN
 * registry, its characters are letters and digits, and its ISO 13616 mod-97 checksum holds. Spaces
 * are ignored and letters upper-cased, so {@code "de89 3704 0044 0532 0130 00"} is the IBAN {@code
 * DE89370400440532013000}.
 */
public final class Iban {
  /** SEPA countries and territories with an IBAN of their own, and that IBAN's length. */
  static final Map<String, Integer> SEPA_LENGTHS =
      Map.ofEntries(
          Map.entry("AD", 24),
          Map.entry("AL", 28),
          Map.entry("AT", 20),
          Map.entry("BE", 16),
          Map.entry("BG", 22),
          Map.entry("CH", 21),
          Map.entry("CY", 28),
          Map.entry("CZ", 24),
          Map.entry("DE", 22),
          Map.entry("DK", 18),
          Map.entry("EE", 20),
          Map.entry("ES", 24),
          Map.entry("FI", 18),
          Map.entry("FR", 27),
          Map.entry("GB", 22),
          Map.entry("GI", 23),
          Map.entry("GR", 27),
          Map.entry("HR", 21),
          Map.entry("HU", 28),
          Map.entry("IE", 22),
          Map.entry("IS", 26),
          Map.entry("IT", 27),
          Map.entry("LI", 21),
          Map.entry("LT", 20),
          Map.entry("LU", 20),
          Map.entry("LV", 21),
          Map.entry("MC", 27),
          Map.entry("MD", 24),
          Map.entry("ME", 22),
          Map.entry("MK", 19),
          Map.entry("MT", 31),
          Map.entry("NL", 18),
          Map.entry("NO", 15),
          Map.entry("PL", 28),
          Map.entry("PT", 25),
          Map.entry("RO", 24),
          Map.entry("SE", 24),
          Map.entry("SI", 19),
          Map.entry("SK", 24),
          Map.entry("SM", 27),
          Map.entry("VA", 22));

  private Iban() {}

  /** The IBAN in its electronic form (no spaces, upper case), or why it is not a SEPA IBAN. */
  public static Optional<String> problem(String text) {
    if (text == null) return Optional.of("an IBAN is required");
    String iban = normalize(text);
    if (iban.length() < 4)
      return Optional.of("an IBAN starts with a country code and two check digits");
    String country = iban.substring(0, 2);
    Integer length = SEPA_LENGTHS.get(country);
    if (length == null)
      return Optional.of(
          "\"" + country + "\" is not a SEPA country; payouts go by SEPA credit transfer");
    if (iban.length() != length)
      return Optional.of(
          "an IBAN of " + country + " has " + length + " characters, this one " + iban.length());
    for (int i = 0; i < iban.length(); i++) {
      char c = iban.charAt(i);
      boolean letter = c >= 'A' && c <= 'Z';
      boolean digit = c >= '0' && c <= '9';
      if (!(letter || digit) || (i >= 2 && i < 4 && !digit))
        return Optional.of("an IBAN holds only letters and digits, with digits 3 and 4 numeric");
    }
    if (mod97(iban) != 1) return Optional.of("the IBAN's check digits do not match (a typo?)");
    return Optional.empty();
  }

  public static boolean isValid(String text) {
    return problem(text).isEmpty();
  }

  /** The electronic form: spaces dropped, upper case. */
  public static String normalize(String text) {
    return text.replace(" ", "").toUpperCase(Locale.ROOT);
  }

  /** All but the last four characters hidden, as shown back to the account holder. */
  public static String masked(String iban) {
    int visible = Math.min(4, iban.length());
    return "*".repeat(iban.length() - visible) + iban.substring(iban.length() - visible);
  }

  /**
   * ISO 13616: the first four characters moved to the end, letters as 10..35, the number modulo 97.
   */
  static int mod97(String iban) {
    String rearranged = iban.substring(4) + iban.substring(0, 4);
    int remainder = 0;
    for (int i = 0; i < rearranged.length(); i++) {
      int value = Character.digit(rearranged.charAt(i), 36);
      remainder = value < 10 ? (remainder * 10 + value) % 97 : (remainder * 100 + value) % 97;
    }
    return remainder;
  }

  /**
   * A BIC (ISO 9362): 4 letters of institution, 2 of country, 2 letters or digits of location,
   * optionally 3 of branch.
   */
  public static boolean isValidBic(String bic) {
    if (bic == null || (bic.length() != 8 && bic.length() != 11)) return false;
    for (int i = 0; i < bic.length(); i++) {
      char c = bic.charAt(i);
      boolean letter = c >= 'A' && c <= 'Z';
      boolean digit = c >= '0' && c <= '9';
      if (i < 6 ? !letter : !(letter || digit)) return false;
    }
    return true;
  }
}
