package dev.tickmark.wire;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.KeyStore;
import java.security.cert.CertPathValidatorException;
import java.security.cert.Certificate;
import java.security.cert.CertificateException;
import java.security.cert.CertificateExpiredException;
import java.security.cert.CertificateFactory;
import java.security.cert.CertificateNotYetValidException;
import java.util.Collection;
import java.util.Locale;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLException;
import javax.net.ssl.SSLHandshakeException;
import javax.net.ssl.TrustManagerFactory;

/**
 * How the agent and the CLI trust a node's certificate: the JDK's system trust store by default, or
 * only the CAs of a PEM bundle ({@code --ca FILE}). Hostname verification stays on either way (the
 * JDK's {@code HttpClient} checks the name for {@code https://} and {@code wss://}).
 */
public final class CaBundle {
  private CaBundle() {}

  /**
   * A TLS context trusting exactly the certificates in {@code pemFile} (one or more {@code BEGIN
   * CERTIFICATE} blocks); an {@link IllegalArgumentException} with a readable reason otherwise.
   */
  public static SSLContext sslContext(Path pemFile) {
    Collection<? extends Certificate> certificates;
    try (InputStream in = Files.newInputStream(pemFile)) {
      certificates = CertificateFactory.getInstance("X.509").generateCertificates(in);
    } catch (IOException e) {
      throw new IllegalArgumentException(
          "cannot read the CA file " + pemFile + ": " + e.getClass().getSimpleName());
    } catch (CertificateException e) {
      throw new IllegalArgumentException(
          "the CA file " + pemFile + " is not a PEM bundle of certificates (BEGIN CERTIFICATE)");
    }
    if (certificates.isEmpty())
      throw new IllegalArgumentException(
          "the CA file " + pemFile + " holds no certificate (BEGIN CERTIFICATE)");
    try {
      KeyStore trusted = KeyStore.getInstance("PKCS12");
      trusted.load(null, null);
      int i = 0;
      for (Certificate c : certificates) trusted.setCertificateEntry("ca-" + i++, c);
      TrustManagerFactory trust =
          TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
      trust.init(trusted);
      SSLContext context = SSLContext.getInstance("TLS");
      context.init(null, trust.getTrustManagers(), null);
      return context;
    } catch (GeneralSecurityException | IOException e) {
      throw new IllegalArgumentException(
          "the CA file " + pemFile + " cannot be used: " + e.getClass().getSimpleName());
    }
  }

  /** The system trust store's context, or the bundle's when {@code pemFile} is not null. */
  public static SSLContext sslContextOrDefault(Path pemFile) {
    if (pemFile != null) return sslContext(pemFile);
    try {
      return SSLContext.getDefault();
    } catch (GeneralSecurityException e) {
      throw new IllegalStateException("the JDK has no default TLS context", e);
    }
  }

  /**
   * One readable line for a failed TLS connection (an untrusted or mismatched certificate, a plain
   * HTTP server behind an {@code https://} URL), or null when {@code failure} is not about TLS.
   */
  public static String describe(Throwable failure) {
    SSLException ssl = null;
    for (Throwable t = failure; t != null; t = t.getCause()) {
      if (t instanceof SSLException s && ssl == null) ssl = s;
      if (t instanceof CertificateExpiredException || t instanceof CertificateNotYetValidException)
        return "the node's TLS certificate has expired or is not valid yet";
      if (t instanceof CertPathValidatorException || isUnknownIssuer(t))
        return "the node's TLS certificate is not signed by a CA this machine trusts (pass --ca"
            + " FILE with the CA that issued it)";
      String message = t.getMessage() == null ? "" : t.getMessage();
      if (t instanceof CertificateException && message.startsWith("No "))
        return "the node's TLS certificate is not for this address (" + message + ")";
    }
    if (ssl == null) return null;
    String message = ssl.getMessage() == null ? "" : ssl.getMessage();
    if (message.toLowerCase(Locale.ROOT).contains("unrecognized ssl message")
        || message.toLowerCase(Locale.ROOT).contains("plaintext"))
      return "the node does not speak TLS on this port (plain HTTP? then use http:// or ws://)";
    return (ssl instanceof SSLHandshakeException ? "TLS handshake failed: " : "TLS failed: ")
        + message;
  }

  private static boolean isUnknownIssuer(Throwable t) {
    String message = t.getMessage();
    return message != null
        && (message.contains("PKIX path building failed")
            || message.contains("unable to find valid certification path"));
  }
}
