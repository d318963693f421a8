package dev.tickmark.node;

import com.typesafe.config.Config;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.KeyFactory;
import java.security.KeyStore;
import java.security.PrivateKey;
import java.security.PublicKey;
import java.security.SecureRandom;
import java.security.Signature;
import java.security.cert.CertificateException;
import java.security.cert.CertificateFactory;
import java.security.cert.CertificateParsingException;
import java.security.cert.X509Certificate;
import java.security.spec.PKCS8EncodedKeySpec;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.Collection;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLEngine;
import javax.net.ssl.SSLParameters;
import org.apache.pekko.http.javadsl.ConnectionContext;
import org.apache.pekko.http.javadsl.HttpsConnectionContext;

/**
 * The node's HTTPS identity: a certificate chain and its PKCS#8 private key, read from PEM files
 * ({@code TICKMARK_TLS_CERT}, {@code TICKMARK_TLS_KEY}; config {@code tickmark.http.tls.*}). Every
 * problem with the files is an {@link UnusableFiles} whose message names the variable, the file and
 * the fix; no message ever holds key material. The server speaks TLS 1.3 and 1.2 only.
 */
public final class ServerTls {
  public static final String CERT_ENV = "TICKMARK_TLS_CERT";
  public static final String KEY_ENV = "TICKMARK_TLS_KEY";
  static final String CERT_KEY = "tickmark.http.tls.certificate";
  static final String PRIVATE_KEY_KEY = "tickmark.http.tls.private-key";

  /** Newest first: the JDK negotiates the highest both sides have. Nothing older than 1.2. */
  static final List<String> PROTOCOLS = List.of("TLSv1.3", "TLSv1.2");

  /** Key types tried for a PKCS#8 key, the certificate's own type first. */
  private static final List<String> KEY_TYPES = List.of("RSA", "EC", "Ed25519", "Ed448");

  private static final Pattern PEM_BLOCK =
      Pattern.compile(
          "-----BEGIN ([A-Z0-9 ]+)-----\\s*([A-Za-z0-9+/=\\s]*?)\\s*-----END \\1-----",
          Pattern.DOTALL);

  /** A certificate or key file the node cannot serve with: the message says why and how to fix. */
  public static final class UnusableFiles extends Exception {
    UnusableFiles(String message) {
      super(message);
    }
  }

  private final Path certificateFile;
  private final List<X509Certificate> chain;
  private final SSLContext sslContext;

  private ServerTls(Path certificateFile, List<X509Certificate> chain, SSLContext sslContext) {
    this.certificateFile = certificateFile;
    this.chain = chain;
    this.sslContext = sslContext;
  }

  /**
   * The node's TLS from {@code tickmark.http.tls.certificate} and {@code private-key}: empty when
   * neither is set (plain HTTP); an {@link UnusableFiles} naming the missing one when only one is.
   */
  static Optional<ServerTls> fromConfig(Config config) throws UnusableFiles {
    String cert = config.hasPath(CERT_KEY) ? config.getString(CERT_KEY).strip() : "";
    String key = config.hasPath(PRIVATE_KEY_KEY) ? config.getString(PRIVATE_KEY_KEY).strip() : "";
    if (cert.isEmpty() && key.isEmpty()) return Optional.empty();
    if (key.isEmpty())
      throw new UnusableFiles(
          CERT_ENV
              + " is set but "
              + KEY_ENV
              + " is not: set both (the certificate chain and its private key, PEM) to serve"
              + " HTTPS, or neither for plain HTTP");
    if (cert.isEmpty())
      throw new UnusableFiles(
          KEY_ENV
              + " is set but "
              + CERT_ENV
              + " is not: set both (the certificate chain and its private key, PEM) to serve"
              + " HTTPS, or neither for plain HTTP");
    return Optional.of(load(Path.of(cert), Path.of(key)));
  }

  /** Reads and checks both files: the chain parses, the key is PKCS#8 and belongs to its first. */
  public static ServerTls load(Path certificateFile, Path keyFile) throws UnusableFiles {
    List<X509Certificate> chain = readChain(certificateFile);
    PrivateKey key = readKey(keyFile, chain.get(0).getPublicKey().getAlgorithm());
    if (!belongsTo(key, chain.get(0).getPublicKey())) {
      for (int i = 1; i < chain.size(); i++) {
        if (belongsTo(key, chain.get(i).getPublicKey()))
          throw new UnusableFiles(
              CERT_ENV
                  + " ("
                  + certificateFile
                  + "): the key in "
                  + KEY_ENV
                  + " belongs to certificate "
                  + (i + 1)
                  + " of the chain; put the server's own certificate first, then its issuers");
      }
      throw new UnusableFiles(
          KEY_ENV
              + " ("
              + keyFile
              + ") is not the private key of the certificate in "
              + CERT_ENV
              + " ("
              + certificateFile
              + ", "
              + chain.get(0).getSubjectX500Principal().getName()
              + "): give the key the certificate was issued for");
    }
    try {
      KeyStore store = KeyStore.getInstance("PKCS12");
      store.load(null, null);
      char[] noPassword = new char[0];
      store.setKeyEntry("tickmark", key, noPassword, chain.toArray(new X509Certificate[0]));
      KeyManagerFactory keys =
          KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
      keys.init(store, noPassword);
      SSLContext context = SSLContext.getInstance("TLS");
      context.init(keys.getKeyManagers(), null, new SecureRandom());
      return new ServerTls(certificateFile, List.copyOf(chain), context);
    } catch (GeneralSecurityException | IOException e) {
      throw new UnusableFiles(
          "the JDK refused the certificate and key from "
              + CERT_ENV
              + " and "
              + KEY_ENV
              + ": "
              + e.getClass().getSimpleName());
    }
  }

  /** What {@code enableHttps} binds with: a fresh engine per connection, TLS 1.3/1.2 only. */
  public HttpsConnectionContext connectionContext() {
    return ConnectionContext.httpsServer(this::serverEngine);
  }

  SSLEngine serverEngine() {
    SSLEngine engine = sslContext.createSSLEngine();
    engine.setUseClientMode(false);
    SSLParameters parameters = engine.getSSLParameters();
    Set<String> supported = Set.of(engine.getSupportedProtocols());
    parameters.setProtocols(PROTOCOLS.stream().filter(supported::contains).toArray(String[]::new));
    parameters.setUseCipherSuitesOrder(true);
    engine.setSSLParameters(parameters);
    return engine;
  }

  public SSLContext sslContext() {
    return sslContext;
  }

  /** The PEM file the chain came from (the dev agent trusts it). */
  public Path certificateFile() {
    return certificateFile;
  }

  public List<X509Certificate> chain() {
    return chain;
  }

  /**
   * For the start-up log: the server certificate's subject, names and validity (public facts only).
   */
  public String describe() {
    X509Certificate leaf = chain.get(0);
    return leaf.getSubjectX500Principal().getName()
        + ", names "
        + subjectAltNames(leaf)
        + ", valid until "
        + leaf.getNotAfter().toInstant()
        + ", chain of "
        + chain.size();
  }

  /**
   * A warning when the server certificate is expired or not valid yet at {@code now}, else null.
   */
  public String validityWarning(Instant now) {
    X509Certificate leaf = chain.get(0);
    if (now.isAfter(leaf.getNotAfter().toInstant()))
      return "the TLS certificate expired at "
          + leaf.getNotAfter().toInstant()
          + ": clients will refuse it; renew it and restart the node";
    if (now.isBefore(leaf.getNotBefore().toInstant()))
      return "the TLS certificate is valid only from " + leaf.getNotBefore().toInstant();
    return null;
  }

  private static List<String> subjectAltNames(X509Certificate cert) {
    try {
      Collection<List<?>> names = cert.getSubjectAlternativeNames();
      if (names == null) return List.of();
      List<String> out = new ArrayList<>();
      for (List<?> name : names) out.add(String.valueOf(name.get(1)));
      return out;
    } catch (CertificateParsingException e) {
      return List.of();
    }
  }

  private record Block(String label, byte[] der) {}

  private static List<Block> blocks(String variable, Path file) throws UnusableFiles {
    String text;
    try {
      // Latin-1 reads any byte: a comment in UTF-8 beside the blocks does no harm
      text = Files.readString(file, StandardCharsets.ISO_8859_1);
    } catch (IOException e) {
      throw new UnusableFiles(
          variable + " (" + file + ") cannot be read: " + e.getClass().getSimpleName());
    }
    List<Block> blocks = new ArrayList<>();
    Matcher m = PEM_BLOCK.matcher(text);
    while (m.find()) {
      try {
        blocks.add(new Block(m.group(1), Base64.getMimeDecoder().decode(m.group(2))));
      } catch (IllegalArgumentException e) {
        throw new UnusableFiles(
            variable + " (" + file + "): a \"" + m.group(1) + "\" PEM block is not valid base64");
      }
    }
    if (blocks.isEmpty() && !text.isEmpty() && text.charAt(0) == 0x30)
      throw new UnusableFiles(
          variable
              + " ("
              + file
              + ") is binary DER, not PEM: convert it, e.g. openssl x509 -inform der -in "
              + file
              + " -out cert.pem (a key: openssl pkcs8 -topk8 -nocrypt -inform der -in …)");
    return blocks;
  }

  private static List<X509Certificate> readChain(Path file) throws UnusableFiles {
    List<Block> blocks = blocks(CERT_ENV, file);
    List<X509Certificate> chain = new ArrayList<>();
    Set<String> others = new LinkedHashSet<>();
    for (Block block : blocks) {
      if (!block.label().equals("CERTIFICATE")) {
        others.add(block.label());
        continue;
      }
      try {
        chain.add(
            (X509Certificate)
                CertificateFactory.getInstance("X.509")
                    .generateCertificate(new ByteArrayInputStream(block.der())));
      } catch (CertificateException e) {
        throw new UnusableFiles(
            CERT_ENV
                + " ("
                + file
                + "): certificate "
                + (chain.size() + 1)
                + " is not an X.509 certificate");
      }
    }
    if (chain.isEmpty())
      throw new UnusableFiles(
          CERT_ENV
              + " ("
              + file
              + ") holds no \"BEGIN CERTIFICATE\" block"
              + (others.stream().anyMatch(l -> l.contains("PRIVATE KEY"))
                  ? " but a private key: are " + CERT_ENV + " and " + KEY_ENV + " swapped?"
                  : others.isEmpty() ? "" : " (found " + others + ")"));
    return chain;
  }

  private static PrivateKey readKey(Path file, String certificateKeyType) throws UnusableFiles {
    List<Block> blocks = blocks(KEY_ENV, file);
    Block pkcs8 = null;
    for (Block block : blocks) {
      switch (block.label()) {
        case "PRIVATE KEY" -> pkcs8 = pkcs8 == null ? block : pkcs8;
        case "RSA PRIVATE KEY", "EC PRIVATE KEY" ->
            throw new UnusableFiles(
                KEY_ENV
                    + " ("
                    + file
                    + ") is a \"BEGIN "
                    + block.label()
                    + "\" key (PKCS#1/SEC1); the node reads PKCS#8 (\"BEGIN PRIVATE KEY\"). Convert"
                    + " it: openssl pkcs8 -topk8 -nocrypt -in "
                    + file
                    + " -out key.pkcs8.pem");
        case "ENCRYPTED PRIVATE KEY" ->
            throw new UnusableFiles(
                KEY_ENV
                    + " ("
                    + file
                    + ") is encrypted; the node reads an unencrypted PKCS#8 key (keep it readable"
                    + " by the node only). Decrypt it: openssl pkcs8 -in "
                    + file
                    + " -out key.pkcs8.pem");
        default -> {
          // a certificate in the key file is looked at below
        }
      }
    }
    if (pkcs8 == null)
      throw new UnusableFiles(
          KEY_ENV
              + " ("
              + file
              + ") holds no \"BEGIN PRIVATE KEY\" block"
              + (blocks.stream().anyMatch(b -> b.label().equals("CERTIFICATE"))
                  ? " but a certificate: are " + CERT_ENV + " and " + KEY_ENV + " swapped?"
                  : ""));
    List<String> types = new ArrayList<>();
    types.add(certificateKeyType.equals("EdDSA") ? "Ed25519" : certificateKeyType);
    KEY_TYPES.stream().filter(t -> !types.contains(t)).forEach(types::add);
    byte[] der = pkcs8.der();
    try {
      for (String type : types) {
        try {
          return KeyFactory.getInstance(type).generatePrivate(new PKCS8EncodedKeySpec(der));
        } catch (GeneralSecurityException notThisType) {
          // the next type
        }
      }
    } finally {
      Arrays.fill(der, (byte) 0);
    }
    throw new UnusableFiles(
        KEY_ENV + " (" + file + ") is not a PKCS#8 RSA, EC or EdDSA private key the JDK can read");
  }

  /** Whether {@code key} signs what {@code publicKey} verifies. */
  private static boolean belongsTo(PrivateKey key, PublicKey publicKey) {
    String algorithm =
        switch (key.getAlgorithm()) {
          case "RSA" -> "SHA256withRSA";
          case "EC" -> "SHA256withECDSA";
          case "Ed25519", "EdDSA" -> "Ed25519";
          case "Ed448" -> "Ed448";
          default -> null;
        };
    if (algorithm == null) return false;
    try {
      byte[] probe = "tickmark tls key check".getBytes(StandardCharsets.US_ASCII);
      Signature signer = Signature.getInstance(algorithm);
      signer.initSign(key);
      signer.update(probe);
      byte[] signature = signer.sign();
      Signature verifier = Signature.getInstance(algorithm);
      verifier.initVerify(publicKey);
      verifier.update(probe);
      return verifier.verify(signature);
    } catch (GeneralSecurityException e) {
      return false; // e.g. an RSA key against an EC certificate
    }
  }
}
