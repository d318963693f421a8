package dev.tickmark.http;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.security.SecureRandom;
import java.util.Arrays;
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

  /**
   * An id of the same shape derived from {@code principal} and a secret {@code seed} (an
   * Idempotency-Key's): the same pair always names the same resource, and without the seed it
   * cannot be guessed.
   */
  static String derived(String prefix, String principal, long seed) {
    try {
      MessageDigest digest = MessageDigest.getInstance("SHA-256");
      digest.update(prefix.getBytes(StandardCharsets.UTF_8));
      digest.update((byte) 0);
      digest.update(principal.getBytes(StandardCharsets.UTF_8));
      digest.update((byte) 0);
      digest.update(ByteBuffer.allocate(Long.BYTES).putLong(seed).array());
      return prefix + HexFormat.of().formatHex(Arrays.copyOf(digest.digest(), 12));
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }

  static String random(int bytes) {
    byte[] b = new byte[bytes];
    RANDOM.nextBytes(b);
    return HexFormat.of().formatHex(b);
  }
}
