package dev.tickmark.node;

import com.typesafe.config.Config;
import dev.tickmark.node.ServerTls.UnusableFiles;
import java.net.Socket;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.KeyStore;
import java.security.SecureRandom;
import java.security.cert.CertPathValidator;
import java.security.cert.CertPathValidatorException;
import java.security.cert.CertificateException;
import java.security.cert.CertificateFactory;
import java.security.cert.CertificateParsingException;
import java.security.cert.PKIXParameters;
import java.security.cert.TrustAnchor;
import java.security.cert.X509Certificate;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import java.util.stream.Collectors;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLEngine;
import javax.net.ssl.SSLParameters;
import javax.net.ssl.SSLSession;
import javax.net.ssl.TrustManager;
import javax.net.ssl.TrustManagerFactory;
import javax.net.ssl.X509ExtendedTrustManager;
import org.apache.pekko.remote.artery.tcp.SSLEngineProvider;
import scala.Option;

/**
 * Mutual TLS between the nodes of a cluster (Pekko remoting over {@code tls-tcp}): each node has a
 * certificate from the cluster's own CA ({@code TICKMARK_CLUSTER_TLS_CERT}, {@code
 * TICKMARK_CLUSTER_TLS_KEY}, {@code TICKMARK_CLUSTER_TLS_CA}; config {@code
 * tickmark.cluster.tls.*}) and speaks TLS 1.3 only. A connection in either direction needs the
 * peer's certificate to chain to that CA <em>and</em> to share a DNS name with this node's own
 * certificate (the cluster's name, e.g. {@code tickmark-cluster}), so that a CA that also signs
 * other services' certificates does not let those services in. Both checks run inside the
 * handshake: a stranger never gets past it. Host names are not verified: nodes are reached at the
 * addresses they announce, often bare IPs.
 *
 * <p>The files are read and checked once, at start (before the database), with the same one-line
 * errors as {@link ServerTls}; a new certificate takes a (rolling) restart.
 */
public final class ClusterTls implements SSLEngineProvider {
  public static final String CERT_ENV = "TICKMARK_CLUSTER_TLS_CERT";
  public static final String KEY_ENV = "TICKMARK_CLUSTER_TLS_KEY";
  public static final String CA_ENV = "TICKMARK_CLUSTER_TLS_CA";
  static final String CERT_KEY = "tickmark.cluster.tls.certificate";
  static final String PRIVATE_KEY_KEY = "tickmark.cluster.tls.private-key";
  static final String CA_KEY = "tickmark.cluster.tls.ca";

  /** Every node is ours and current: nothing older than 1.3 is needed between them. */
  static final String PROTOCOL = "TLSv1.3";

  /** How long before its certificate's expiry the node starts warning at start. */
  static final Duration EXPIRY_WARNING = Duration.ofDays(14);

  private static final String SERVER_AUTH = "1.3.6.1.5.5.7.3.1";
  private static final String CLIENT_AUTH = "1.3.6.1.5.5.7.3.2";

  private final List<X509Certificate> chain;
  private final List<X509Certificate> authorities;
  private final Set<String> clusterNames;
  private final SSLContext context;

  private ClusterTls(
      List<X509Certificate> chain,
      List<X509Certificate> authorities,
      Set<String> clusterNames,
      SSLContext context) {
    this.chain = chain;
    this.authorities = authorities;
    this.clusterNames = clusterNames;
    this.context = context;
  }

  /**
   * The cluster's TLS from {@code tickmark.cluster.tls.*}: empty when none is set (plain remoting);
   * an {@link UnusableFiles} naming what is missing when only some are.
   */
  static Optional<ClusterTls> fromConfig(Config config) throws UnusableFiles {
    String cert = value(config, CERT_KEY);
    String key = value(config, PRIVATE_KEY_KEY);
    String ca = value(config, CA_KEY);
    if (cert.isEmpty() && key.isEmpty() && ca.isEmpty()) return Optional.empty();
    List<String> missing = new ArrayList<>();
    if (cert.isEmpty()) missing.add(CERT_ENV);
    if (key.isEmpty()) missing.add(KEY_ENV);
    if (ca.isEmpty()) missing.add(CA_ENV);
    if (!missing.isEmpty())
      throw new UnusableFiles(
          String.join(" and ", missing)
              + (missing.size() == 1 ? " is" : " are")
              + " not set: mutual TLS between the nodes needs all three of "
              + CERT_ENV
              + ", "
              + KEY_ENV
              + " and "
              + CA_ENV
              + " (the node's certificate, its private key and the cluster's CA, PEM), or none"
              + " for plain remoting");
    return Optional.of(load(Path.of(cert), Path.of(key), Path.of(ca)));
  }

  private static String value(Config config, String path) {
    return config.hasPath(path) ? config.getString(path).strip() : "";
  }

  /**
   * Reads and checks the three files: the certificate and its key as for HTTPS, the CA as one or
   * more certificates (old and new during a CA's rotation), the certificate issued by one of them,
   * valid now, usable as a TLS server and client, and carrying a DNS name to share with its peers.
   */
  public static ClusterTls load(Path certificateFile, Path keyFile, Path caFile)
      throws UnusableFiles {
    PemFiles.Identity identity = PemFiles.identity(CERT_ENV, certificateFile, KEY_ENV, keyFile);
    List<X509Certificate> authorities = PemFiles.certificates(CA_ENV, caFile);
    X509Certificate own = identity.chain().get(0);
    String ownName = own.getSubjectX500Principal().getName();
    checkIssuedBy(identity.chain(), authorities, certificateFile, caFile);
    List<String> usages;
    try {
      usages = own.getExtendedKeyUsage();
    } catch (CertificateParsingException e) {
      usages = null;
    }
    if (usages != null
        && !usages.contains("2.5.29.37.0")
        && !(usages.contains(SERVER_AUTH) && usages.contains(CLIENT_AUTH)))
      throw new UnusableFiles(
          CERT_ENV
              + " ("
              + certificateFile
              + ", "
              + ownName
              + ") may not be used as both a TLS server and a TLS client; each node is both: issue"
              + " it with the extended key usages serverAuth and clientAuth");
    Set<String> names = PemFiles.dnsNames(own);
    if (names.isEmpty())
      throw new UnusableFiles(
          CERT_ENV
              + " ("
              + certificateFile
              + ", "
              + ownName
              + ") has no DNS name (subject alternative name): nodes accept only peers whose"
              + " certificate shares a DNS name with their own; give every node's certificate the"
              + " cluster's name, e.g. DNS:tickmark-cluster");
    try {
      KeyStore trusted = KeyStore.getInstance("PKCS12");
      trusted.load(null, null);
      for (int i = 0; i < authorities.size(); i++)
        trusted.setCertificateEntry("cluster-ca-" + i, authorities.get(i));
      TrustManagerFactory factory = TrustManagerFactory.getInstance("PKIX");
      factory.init(trusted);
      X509ExtendedTrustManager pkix = null;
      for (TrustManager m : factory.getTrustManagers())
        if (m instanceof X509ExtendedTrustManager x) pkix = x;
      if (pkix == null) throw new GeneralSecurityException("no X509ExtendedTrustManager");
      SSLContext context = SSLContext.getInstance("TLS");
      context.init(
          identity.keyManagers(),
          new TrustManager[] {new SameClusterTrust(pkix, names)},
          new SecureRandom());
      return new ClusterTls(identity.chain(), List.copyOf(authorities), Set.copyOf(names), context);
    } catch (GeneralSecurityException | java.io.IOException e) {
      throw new UnusableFiles(
          "the JDK refused the cluster's certificate, key or CA from "
              + CERT_ENV
              + ", "
              + KEY_ENV
              + " and "
              + CA_ENV
              + ": "
              + e.getClass().getSimpleName());
    }
  }

  /** The node's chain validates, now, against the CA file's certificates as its trust anchors. */
  private static void checkIssuedBy(
      List<X509Certificate> chain, List<X509Certificate> authorities, Path certFile, Path caFile)
      throws UnusableFiles {
    X509Certificate own = chain.get(0);
    try {
      Set<TrustAnchor> anchors = new HashSet<>();
      for (X509Certificate ca : authorities) anchors.add(new TrustAnchor(ca, null));
      PKIXParameters parameters = new PKIXParameters(anchors);
      parameters.setRevocationEnabled(false);
      // the chain's own copies of its roots are not part of the path
      List<X509Certificate> path =
          chain.stream()
              .filter(c -> !c.getSubjectX500Principal().equals(c.getIssuerX500Principal()))
              .toList();
      CertPathValidator.getInstance("PKIX")
          .validate(CertificateFactory.getInstance("X.509").generateCertPath(path), parameters);
    } catch (CertPathValidatorException e) {
      CertPathValidatorException.Reason reason = e.getReason();
      if (reason == CertPathValidatorException.BasicReason.EXPIRED)
        throw new UnusableFiles(
            CERT_ENV
                + " ("
                + certFile
                + ") has a certificate that expired (the node's expired at "
                + own.getNotAfter().toInstant()
                + "): the other nodes would refuse it; renew it");
      if (reason == CertPathValidatorException.BasicReason.NOT_YET_VALID)
        throw new UnusableFiles(
            CERT_ENV
                + " ("
                + certFile
                + ") is not valid yet (from "
                + own.getNotBefore().toInstant()
                + "): check this machine's clock");
      throw new UnusableFiles(
          CERT_ENV
              + " ("
              + certFile
              + ", "
              + own.getSubjectX500Principal().getName()
              + ") was not issued by a CA in "
              + CA_ENV
              + " ("
              + caFile
              + ": "
              + authorities.stream()
                  .map(c -> c.getSubjectX500Principal().getName())
                  .collect(Collectors.joining("; "))
              + "): give every node a certificate from the cluster's own CA, and that CA's"
              + " certificate (with any intermediates in "
              + CERT_ENV
              + " after the node's)");
    } catch (GeneralSecurityException e) {
      throw new UnusableFiles(
          "the JDK could not check "
              + CERT_ENV
              + " against "
              + CA_ENV
              + ": "
              + e.getClass().getSimpleName());
    }
  }

  /**
   * The JDK's PKIX checks against the cluster's CA, then: the peer's certificate shares a DNS name
   * with this node's. Both directions (server and client) are checked alike.
   */
  static final class SameClusterTrust extends X509ExtendedTrustManager {
    private final X509ExtendedTrustManager pkix;
    private final Set<String> names;

    SameClusterTrust(X509ExtendedTrustManager pkix, Set<String> names) {
      this.pkix = pkix;
      this.names = names;
    }

    private void sameCluster(X509Certificate[] chain) throws CertificateException {
      Set<String> theirs = PemFiles.dnsNames(chain[0]);
      for (String name : theirs) if (names.contains(name)) return;
      throw new CertificateException(
          "the peer's certificate ("
              + chain[0].getSubjectX500Principal().getName()
              + ", names "
              + theirs
              + ") shares no DNS name with this cluster's "
              + names);
    }

    @Override
    public void checkClientTrusted(X509Certificate[] chain, String authType, SSLEngine engine)
        throws CertificateException {
      pkix.checkClientTrusted(chain, authType, engine);
      sameCluster(chain);
    }

    @Override
    public void checkServerTrusted(X509Certificate[] chain, String authType, SSLEngine engine)
        throws CertificateException {
      pkix.checkServerTrusted(chain, authType, engine);
      sameCluster(chain);
    }

    @Override
    public void checkClientTrusted(X509Certificate[] chain, String authType, Socket socket)
        throws CertificateException {
      pkix.checkClientTrusted(chain, authType, socket);
      sameCluster(chain);
    }

    @Override
    public void checkServerTrusted(X509Certificate[] chain, String authType, Socket socket)
        throws CertificateException {
      pkix.checkServerTrusted(chain, authType, socket);
      sameCluster(chain);
    }

    @Override
    public void checkClientTrusted(X509Certificate[] chain, String authType)
        throws CertificateException {
      pkix.checkClientTrusted(chain, authType);
      sameCluster(chain);
    }

    @Override
    public void checkServerTrusted(X509Certificate[] chain, String authType)
        throws CertificateException {
      pkix.checkServerTrusted(chain, authType);
      sameCluster(chain);
    }

    @Override
    public X509Certificate[] getAcceptedIssuers() {
      return pkix.getAcceptedIssuers();
    }
  }

  @Override
  public SSLEngine createServerSSLEngine(String hostname, int port) {
    SSLEngine engine = context.createSSLEngine();
    engine.setUseClientMode(false);
    SSLParameters parameters = engine.getSSLParameters();
    parameters.setProtocols(new String[] {PROTOCOL});
    parameters.setNeedClientAuth(true); // mutual: a peer without the cluster's certificate is out
    engine.setSSLParameters(parameters);
    return engine;
  }

  @Override
  public SSLEngine createClientSSLEngine(String hostname, int port) {
    SSLEngine engine = context.createSSLEngine(hostname, port);
    engine.setUseClientMode(true);
    SSLParameters parameters = engine.getSSLParameters();
    parameters.setProtocols(new String[] {PROTOCOL});
    engine.setSSLParameters(parameters);
    return engine;
  }

  /** Nothing left to check after the handshake: {@link SameClusterTrust} ran inside it. */
  @Override
  public Option<Throwable> verifyClientSession(String hostname, SSLSession session) {
    return Option.empty();
  }

  @Override
  public Option<Throwable> verifyServerSession(String hostname, SSLSession session) {
    return Option.empty();
  }

  /** The context behind the engines (tests shake hands with it over plain sockets). */
  SSLContext context() {
    return context;
  }

  /** The names a peer's certificate must share one of. */
  public Set<String> clusterNames() {
    return clusterNames;
  }

  public List<X509Certificate> chain() {
    return chain;
  }

  /** For the start-up log: public facts only. */
  public String describe() {
    X509Certificate own = chain.get(0);
    return own.getSubjectX500Principal().getName()
        + ", cluster names "
        + clusterNames
        + ", valid until "
        + own.getNotAfter().toInstant()
        + ", CA "
        + authorities.stream()
            .map(c -> c.getSubjectX500Principal().getName())
            .collect(Collectors.joining("; "));
  }

  /** A warning when the node's certificate expires within {@link #EXPIRY_WARNING}, else null. */
  public String expiryWarning(Instant now) {
    Instant notAfter = chain.get(0).getNotAfter().toInstant();
    if (now.plus(EXPIRY_WARNING).isAfter(notAfter))
      return "the cluster TLS certificate ("
          + CERT_ENV
          + ") expires at "
          + notAfter
          + ": after that the other nodes refuse this one; renew it and restart the nodes one by"
          + " one";
    return null;
  }
}
