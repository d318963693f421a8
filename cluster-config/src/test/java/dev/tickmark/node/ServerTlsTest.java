package dev.tickmark.node;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The PEM loader behind {@code TICKMARK_TLS_CERT} / {@code TICKMARK_TLS_KEY}. */
class ServerTlsTest {
  @TempDir static Path dir;
  private static TestCertificates rsa;
  private static TestCertificates ec;

  @BeforeAll
  static void certificates() {
    rsa = TestCertificates.create(dir.resolve("rsa"), "RSA");
    ec = TestCertificates.create(dir.resolve("ec"), "EC");
  }

  @Test
  void loadsAnRsaChainAndItsPkcs8Key() throws Exception {
    ServerTls tls = ServerTls.load(rsa.certificateFile(), rsa.keyFile());
    assertEquals(2, tls.chain().size());
    assertEquals("RSA", tls.chain().get(0).getPublicKey().getAlgorithm());
    assertTrue(tls.describe().contains("CN=localhost"), tls.describe());
    assertTrue(tls.describe().contains("127.0.0.1"), tls.describe());
  }

  @Test
  void loadsAnEcChainAndItsPkcs8Key() throws Exception {
    ServerTls tls = ServerTls.load(ec.certificateFile(), ec.keyFile());
    assertEquals("EC", tls.chain().get(0).getPublicKey().getAlgorithm());
  }

  @Test
  void speaksOnlyTls13And12() throws Exception {
    ServerTls tls = ServerTls.load(ec.certificateFile(), ec.keyFile());
    assertArrayEquals(
        new String[] {"TLSv1.3", "TLSv1.2"}, tls.serverEngine().getSSLParameters().getProtocols());
  }

  @Test
  void refusesAPkcs1KeyAndSaysHowToConvertIt() throws Exception {
    Path pkcs1 = relabel(rsa.keyFile(), "RSA PRIVATE KEY");
    String message = refused(rsa.certificateFile(), pkcs1);
    assertTrue(message.contains("TICKMARK_TLS_KEY"), message);
    assertTrue(message.contains("BEGIN RSA PRIVATE KEY"), message);
    assertTrue(message.contains("openssl pkcs8 -topk8 -nocrypt -in " + pkcs1), message);
  }

  @Test
  void refusesAnEncryptedKey() throws Exception {
    String message =
        refused(rsa.certificateFile(), relabel(rsa.keyFile(), "ENCRYPTED PRIVATE KEY"));
    assertTrue(message.contains("encrypted"), message);
  }

  @Test
  void refusesAKeyThatIsNotTheCertificates() throws Exception {
    String message = refused(rsa.certificateFile(), ec.keyFile());
    assertTrue(message.contains("is not the private key of the certificate"), message);
    TestCertificates otherRsa = TestCertificates.create(dir.resolve("rsa2"), "RSA");
    message = refused(rsa.certificateFile(), otherRsa.keyFile());
    assertTrue(message.contains("is not the private key of the certificate"), message);
  }

  @Test
  void refusesAChainWithTheServersCertificateNotFirst() throws Exception {
    String[] parts = Files.readString(ec.certificateFile()).split("(?<=-----END CERTIFICATE-----)");
    Path reversed = dir.resolve("reversed.pem");
    Files.writeString(reversed, parts[1].strip() + "\n" + parts[0].strip() + "\n");
    String message = refused(reversed, ec.keyFile());
    assertTrue(message.contains("put the node's own certificate first"), message);
  }

  @Test
  void saysWhenTheTwoFilesAreSwapped() throws Exception {
    String message = refused(rsa.keyFile(), rsa.certificateFile());
    assertTrue(message.contains("swapped"), message);
  }

  @Test
  void refusesFilesWithoutPem() throws Exception {
    Path junk = dir.resolve("junk.pem");
    Files.writeString(junk, "not a pem file\n");
    assertTrue(refused(junk, rsa.keyFile()).contains("no \"BEGIN CERTIFICATE\" block"));
    assertTrue(refused(rsa.certificateFile(), junk).contains("no \"BEGIN PRIVATE KEY\" block"));
    assertTrue(
        refused(dir.resolve("missing.pem"), rsa.keyFile()).contains("cannot be read"),
        "a missing file");
    Path der = dir.resolve("cert.der");
    Files.write(der, rsa.serverCertificate().getEncoded());
    assertTrue(refused(der, rsa.keyFile()).contains("is binary DER, not PEM"));
  }

  @Test
  void namesTheMissingVariableWhenOnlyOneIsSet() throws Exception {
    String onlyCert =
        assertThrows(
                ServerTls.UnusableFiles.class,
                () -> ServerTls.fromConfig(config(rsa.certificateFile().toString(), "")))
            .getMessage();
    assertTrue(onlyCert.startsWith("TICKMARK_TLS_CERT is set but TICKMARK_TLS_KEY is not"));
    String onlyKey =
        assertThrows(
                ServerTls.UnusableFiles.class,
                () -> ServerTls.fromConfig(config("", rsa.keyFile().toString())))
            .getMessage();
    assertTrue(onlyKey.startsWith("TICKMARK_TLS_KEY is set but TICKMARK_TLS_CERT is not"));
    assertTrue(ServerTls.fromConfig(config("", "")).isEmpty(), "neither: plain HTTP");
    assertTrue(
        ServerTls.fromConfig(config(ec.certificateFile().toString(), ec.keyFile().toString()))
            .isPresent());
  }

  private static Config config(String cert, String key) {
    return ConfigFactory.parseMap(
        Map.of("tickmark.http.tls.certificate", cert, "tickmark.http.tls.private-key", key));
  }

  /** The refusal's message, checked never to hold the key's material. */
  private static String refused(Path cert, Path key) throws Exception {
    String message =
        assertThrows(ServerTls.UnusableFiles.class, () -> ServerTls.load(cert, key)).getMessage();
    for (Path file : new Path[] {rsa.keyFile(), ec.keyFile()}) {
      String body = Files.readString(file).lines().skip(1).findFirst().orElseThrow();
      assertFalse(message.contains(body.substring(0, 24)), "key material in: " + message);
    }
    return message;
  }

  /** The same base64 under another PEM label. */
  private static Path relabel(Path pem, String label) throws Exception {
    Path out = dir.resolve(label.replace(' ', '-').toLowerCase() + ".pem");
    Files.writeString(out, Files.readString(pem).replace("PRIVATE KEY", label));
    return out;
  }
}
