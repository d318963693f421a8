package dev.tickmark.node;

import com.typesafe.config.Config;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.SecureRandom;
import java.security.cert.X509Certificate;
import java.time.Instant;
import java.util.List;
import java.util.Optional;
import java.util.Set;
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
    PemFiles.Identity identity = PemFiles.identity(CERT_ENV, certificateFile, KEY_ENV, keyFile);
    try {
      SSLContext context = SSLContext.getInstance("TLS");
      context.init(identity.keyManagers(), null, new SecureRandom());
      return new ServerTls(certificateFile, identity.chain(), context);
    } catch (GeneralSecurityException e) {
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
        + PemFiles.subjectAltNames(leaf)
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
}
