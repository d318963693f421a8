package dev.tickmark.http;

import java.security.SecureRandom;
import java.util.HexFormat;

/** Public identifiers: a type prefix and 96 random bits, unguessable so ids leak nothing. */
public final class Ids {
  private static final SecureRandom RANDOM = new SecureRandom();

  private Ids() {}

  public static String account() {
    return "acc_" + random(12);
  }

  /**
   * Whether {@code id} has the shape of an id this API hands out ({@code prefix} and 24 hex
   * digits); anything else is answered 404 at the edge, without waking an entity for it.
   */
  public static boolean wellFormed(String prefix, String id) {
    if (id.length() != prefix.length() + 24 || !id.startsWith(prefix)) return false;
    for (int i = prefix.length(); i < id.length(); i++) {
      char c = id.charAt(i);
      if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
    }
    return true;
  }

  static String random(int bytes) {
    byte[] b = new byte[bytes];
    RANDOM.nextBytes(b);
    return HexFormat.of().formatHex(b);
  }
}
