package dev.tickmark.http;

import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.MessageDigest;
import java.time.Duration;
import java.time.Instant;
import java.util.HexFormat;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

/**
 * {@code Tickmark-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, t + "." + raw body)>}:
 * the payment provider's proof that it sent this exact body recently. Verified in constant time.
 */
public final class WebhookSignature {
  private final byte[] secret;
  private final Duration tolerance;

  public WebhookSignature(String secret, Duration tolerance) {
    this.secret = secret.getBytes(StandardCharsets.UTF_8);
    this.tolerance = tolerance;
  }

  /** Answers why the signature is not acceptable, or {@code null} if it is. */
  public String problemWith(String header, byte[] body, Instant now) {
    if (header == null || header.isBlank()) return "the Tickmark-Signature header is missing";
    Long timestamp = null;
    String v1 = null;
    for (String part : header.split(",")) {
      String p = part.trim();
      if (p.startsWith("t=")) {
        try {
          timestamp = Long.parseLong(p.substring(2));
        } catch (NumberFormatException e) {
          return "the signature timestamp is not a number";
        }
      } else if (p.startsWith("v1=")) {
        v1 = p.substring(3);
      }
    }
    if (timestamp == null || v1 == null) return "the signature needs t= and v1=";
    if (Math.abs(now.getEpochSecond() - timestamp) > tolerance.toSeconds())
      return "the signature timestamp is outside the accepted window";
    byte[] expected = sign(timestamp, body);
    byte[] presented;
    try {
      presented = HexFormat.of().parseHex(v1);
    } catch (IllegalArgumentException e) {
      return "the signature is not hex";
    }
    return MessageDigest.isEqual(expected, presented)
        ? null
        : "the signature does not match the body";
  }

  /** The v1 signature of {@code body} at {@code timestamp} (what the payment provider computes). */
  public byte[] sign(long timestamp, byte[] body) {
    try {
      Mac mac = Mac.getInstance("HmacSHA256");
      mac.init(new SecretKeySpec(secret, "HmacSHA256"));
      mac.update((timestamp + ".").getBytes(StandardCharsets.US_ASCII));
      return mac.doFinal(body);
    } catch (GeneralSecurityException e) {
      throw new IllegalStateException("HmacSHA256 is unavailable", e);
    }
  }

  public String header(long timestamp, byte[] body) {
    return "t=" + timestamp + ",v1=" + HexFormat.of().formatHex(sign(timestamp, body));
  }
}
