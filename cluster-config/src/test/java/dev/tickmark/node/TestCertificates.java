package dev.tickmark.node;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.math.BigInteger;
import java.net.InetAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.KeyPair;
import java.security.KeyPairGenerator;
import java.security.PrivateKey;
import java.security.SecureRandom;
import java.security.Signature;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.security.spec.ECGenParameterSpec;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;

/**
 * A throw-away CA and a server certificate it issued (for {@code localhost} and {@code 127.0.0.1}
 * unless told other names), written as the PEM files a node and its clients take. Made in-process
 * with the JDK alone: the certificates are encoded here in DER (a few ASN.1 types suffice) and
 * signed with {@link Signature}, which takes milliseconds where a {@code keytool} process per step
 * took seconds on a loaded machine.
 *
 * @param caFile the CA's certificate ({@code --ca FILE})
 * @param certificateFile the server's chain: its certificate, then the CA's ({@code
 *     TICKMARK_TLS_CERT})
 * @param keyFile the server's PKCS#8 private key ({@code TICKMARK_TLS_KEY})
 */
public record TestCertificates(Path caFile, Path certificateFile, Path keyFile) {
  private static final SecureRandom RANDOM = new SecureRandom();

  /** A CA and a leaf for localhost and 127.0.0.1 with a {@code keyType} key (RSA or EC). */
  public static TestCertificates create(Path dir, String keyType) {
    return create(dir, keyType, "localhost", "127.0.0.1");
  }

  /**
   * A CA and a leaf with a {@code keyType} key ({@code RSA} or {@code EC}) whose subject
   * alternative names are {@code names} (an IPv4 literal becomes an IP name) under {@code dir};
   * each call makes new keys.
   */
  public static TestCertificates create(Path dir, String keyType, String... names) {
    return Authority.create(dir, "Tickmark Test CA").issue(dir, keyType, false, names);
  }

  /**
   * A throw-away CA ({@code ca.pem} in its folder) that can issue several leaves, e.g. one per
   * cluster node.
   */
  public static final class Authority {
    private final KeyPair key;
    private final byte[] name;
    private final byte[] certificate;
    private final Path caFile;

    private Authority(KeyPair key, byte[] name, byte[] certificate, Path caFile) {
      this.key = key;
      this.name = name;
      this.certificate = certificate;
      this.caFile = caFile;
    }

    /** A new CA named {@code commonName}, its certificate written to {@code dir/ca.pem}. */
    public static Authority create(Path dir, String commonName) {
      try {
        Files.createDirectories(dir);
        KeyPair ca = ec();
        byte[] caName = name(commonName);
        byte[] caCert =
            certificate(
                caName,
                caName,
                ca,
                ca.getPrivate(),
                Instant.now(),
                seq(extension("2.5.29.19", true, seq(bool()))));
        Path caFile = dir.resolve("ca.pem");
        Files.writeString(caFile, pem("CERTIFICATE", caCert));
        return new Authority(ca, caName, caCert, caFile);
      } catch (IOException | GeneralSecurityException e) {
        throw new IllegalStateException("making a test CA failed", e);
      }
    }

    public Path caFile() {
      return caFile;
    }

    /**
     * A leaf under {@code dir} ({@code server-chain.pem}: it, then this CA; {@code server-key.pem})
     * for {@code names}, usable as a TLS server and, when {@code clientToo}, as a TLS client as
     * well (a cluster node is both).
     */
    public TestCertificates issue(Path dir, String keyType, boolean clientToo, String... names) {
      try {
        Files.createDirectories(dir);
        KeyPair leaf = keyType.equals("EC") ? ec() : rsa();
        List<byte[]> altNames = new ArrayList<>();
        for (String n : names)
          altNames.add(
              n.matches("[0-9.]+")
                  ? tagged(0x87, InetAddress.getByName(n).getAddress())
                  : tagged(0x82, n.getBytes(StandardCharsets.US_ASCII)));
        byte[] usages =
            clientToo
                ? seq(oid("1.3.6.1.5.5.7.3.1"), oid("1.3.6.1.5.5.7.3.2"))
                : seq(oid("1.3.6.1.5.5.7.3.1"));
        byte[] leafCert =
            certificate(
                name,
                name(names.length > 0 ? names[0] : "tickmark test server"),
                leaf,
                key.getPrivate(),
                Instant.now(),
                seq(
                    extension("2.5.29.19", true, seq()),
                    extension("2.5.29.17", false, seq(altNames.toArray(byte[][]::new))),
                    extension("2.5.29.37", false, usages)));
        Path chain = dir.resolve("server-chain.pem");
        Files.writeString(chain, pem("CERTIFICATE", leafCert) + pem("CERTIFICATE", certificate));
        Path keyFile = dir.resolve("server-key.pem");
        Files.writeString(keyFile, pem("PRIVATE KEY", leaf.getPrivate().getEncoded())); // PKCS#8
        return new TestCertificates(caFile, chain, keyFile);
      } catch (IOException | GeneralSecurityException e) {
        throw new IllegalStateException("making test certificates failed", e);
      }
    }
  }

  /** The server's own certificate alone, without the CA after it. */
  public Certificate serverCertificate() {
    try (InputStream in = Files.newInputStream(certificateFile)) {
      return CertificateFactory.getInstance("X.509").generateCertificate(in);
    } catch (IOException | GeneralSecurityException e) {
      throw new IllegalStateException(e);
    }
  }

  static String pem(String label, byte[] der) {
    return "-----BEGIN "
        + label
        + "-----\n"
        + Base64.getMimeEncoder(64, "\n".getBytes(StandardCharsets.US_ASCII)).encodeToString(der)
        + "\n-----END "
        + label
        + "-----\n";
  }

  private static KeyPair ec() throws GeneralSecurityException {
    KeyPairGenerator generator = KeyPairGenerator.getInstance("EC");
    generator.initialize(new ECGenParameterSpec("secp256r1"), RANDOM);
    return generator.generateKeyPair();
  }

  private static KeyPair rsa() throws GeneralSecurityException {
    KeyPairGenerator generator = KeyPairGenerator.getInstance("RSA");
    generator.initialize(2048, RANDOM);
    return generator.generateKeyPair();
  }

  /** An X.509 v3 certificate for {@code subject}'s key, valid for two days, signed by an EC key. */
  private static byte[] certificate(
      byte[] issuer,
      byte[] subject,
      KeyPair subjectKey,
      PrivateKey issuerKey,
      Instant now,
      byte[] extensions)
      throws GeneralSecurityException {
    byte[] ecdsaWithSha256 = seq(oid("1.2.840.10045.4.3.2"));
    byte[] tbs =
        seq(
            tagged(0xA0, integer(BigInteger.TWO)), // v3
            integer(new BigInteger(64, RANDOM).add(BigInteger.ONE)),
            ecdsaWithSha256,
            issuer,
            seq(time(now.minus(Duration.ofHours(1))), time(now.plus(Duration.ofDays(2)))),
            subject,
            subjectKey.getPublic().getEncoded(), // SubjectPublicKeyInfo
            tagged(0xA3, extensions));
    Signature signer = Signature.getInstance("SHA256withECDSA");
    signer.initSign(issuerKey);
    signer.update(tbs);
    return seq(tbs, ecdsaWithSha256, tagged(0x03, concat(new byte[] {0}, signer.sign())));
  }

  // ---- just enough DER
  // ---------------------------------------------------------------------------

  private static byte[] name(String commonName) {
    return seq(
        tagged(
            0x31, seq(oid("2.5.4.3"), tagged(0x0C, commonName.getBytes(StandardCharsets.UTF_8)))));
  }

  private static byte[] extension(String oid, boolean critical, byte[] value) {
    return critical
        ? seq(oid(oid), bool(), tagged(0x04, value))
        : seq(oid(oid), tagged(0x04, value));
  }

  private static byte[] time(Instant at) {
    String utc = DateTimeFormatter.ofPattern("yyMMddHHmmss'Z'").withZone(ZoneOffset.UTC).format(at);
    return tagged(0x17, utc.getBytes(StandardCharsets.US_ASCII));
  }

  private static byte[] bool() {
    return new byte[] {0x01, 0x01, (byte) 0xFF};
  }

  private static byte[] integer(BigInteger value) {
    return tagged(0x02, value.toByteArray());
  }

  private static byte[] oid(String dotted) {
    String[] parts = dotted.split("\\.");
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    out.write(Integer.parseInt(parts[0]) * 40 + Integer.parseInt(parts[1]));
    for (int i = 2; i < parts.length; i++) {
      long v = Long.parseLong(parts[i]);
      int groups = 1;
      while ((v >> (7 * groups)) != 0) groups++;
      for (int g = groups - 1; g >= 0; g--)
        out.write((int) ((v >> (7 * g)) & 0x7F) | (g > 0 ? 0x80 : 0));
    }
    return tagged(0x06, out.toByteArray());
  }

  private static byte[] seq(byte[]... parts) {
    return tagged(0x30, concat(parts));
  }

  private static byte[] tagged(int tag, byte[] content) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    out.write(tag);
    int n = content.length;
    if (n < 0x80) out.write(n);
    else if (n < 0x100) {
      out.write(0x81);
      out.write(n);
    } else {
      out.write(0x82);
      out.write(n >> 8);
      out.write(n & 0xFF);
    }
    out.writeBytes(content);
    return out.toByteArray();
  }

  private static byte[] concat(byte[]... parts) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    for (byte[] p : parts) out.writeBytes(p);
    return out.toByteArray();
  }
}
