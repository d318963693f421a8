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

  static String random(int bytes) {
    byte[] b = new byte[bytes];
    RANDOM.nextBytes(b);
    return HexFormat.of().formatHex(b);
  }
}
