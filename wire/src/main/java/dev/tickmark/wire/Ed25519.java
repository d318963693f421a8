package dev.tickmark.wire;

import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.KeyFactory;
import java.security.KeyPair;
import java.security.KeyPairGenerator;
import java.security.PrivateKey;
import java.security.PublicKey;
import java.security.Signature;
import java.security.spec.PKCS8EncodedKeySpec;
import java.security.spec.X509EncodedKeySpec;
import java.util.Base64;

/**
 * Ed25519 with the JDK's own provider. Public keys travel as base64 of their X.509
 * SubjectPublicKeyInfo encoding, signatures as base64.
 */
public final class Ed25519 {
  /** What an agent signs to answer a challenge: this prefix followed by the nonce. */
  public static final String HELLO_PREFIX = "tickmark-agent-hello:";

  private Ed25519() {}

  public static KeyPair generate() {
    try {
      return KeyPairGenerator.getInstance("Ed25519").generateKeyPair();
    } catch (GeneralSecurityException e) {
      throw new IllegalStateException("Ed25519 is unavailable in this JDK", e);
    }
  }

  public static String encodePublic(PublicKey key) {
    return Base64.getEncoder().encodeToString(key.getEncoded());
  }

  public static PublicKey decodePublic(String base64) {
    try {
      return KeyFactory.getInstance("Ed25519")
          .generatePublic(new X509EncodedKeySpec(Base64.getDecoder().decode(base64)));
    } catch (GeneralSecurityException | IllegalArgumentException e) {
      throw new IllegalArgumentException("not an Ed25519 public key", e);
    }
  }

  public static String encodePrivate(PrivateKey key) {
    return Base64.getEncoder().encodeToString(key.getEncoded());
  }

  public static PrivateKey decodePrivate(String base64) {
    try {
      return KeyFactory.getInstance("Ed25519")
          .generatePrivate(new PKCS8EncodedKeySpec(Base64.getDecoder().decode(base64)));
    } catch (GeneralSecurityException | IllegalArgumentException e) {
      throw new IllegalArgumentException("not an Ed25519 private key", e);
    }
  }

  public static String sign(PrivateKey key, byte[] message) {
    try {
      Signature s = Signature.getInstance("Ed25519");
      s.initSign(key);
      s.update(message);
      return Base64.getEncoder().encodeToString(s.sign());
    } catch (GeneralSecurityException e) {
      throw new IllegalStateException("cannot sign", e);
    }
  }

  /** False for any malformed key, signature or mismatch; never throws. */
  public static boolean verify(String publicKeyBase64, byte[] message, String signatureBase64) {
    try {
      Signature s = Signature.getInstance("Ed25519");
      s.initVerify(decodePublic(publicKeyBase64));
      s.update(message);
      return s.verify(Base64.getDecoder().decode(signatureBase64));
    } catch (GeneralSecurityException | IllegalArgumentException | NullPointerException e) {
      return false;
    }
  }

  public static byte[] helloMessage(String nonce) {
    return (HELLO_PREFIX + nonce).getBytes(StandardCharsets.US_ASCII);
  }
}
