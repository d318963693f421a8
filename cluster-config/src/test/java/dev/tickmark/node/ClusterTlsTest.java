package dev.tickmark.node;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.typesafe.config.ConfigFactory;
import dev.tickmark.node.ServerTls.UnusableFiles;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;
import javax.net.ssl.SSLEngine;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The files behind {@code TICKMARK_CLUSTER_TLS_*} and who a node lets in: a peer with a certificate
 * from the cluster's CA that shares a DNS name with the node's own, nobody else (real handshakes
 * over loopback sockets, see {@link ClusterTlsProbe}).
 */
class ClusterTlsTest {
  @TempDir static Path dir;
  private static TestCertificates.Authority clusterCa;
  private static TestCertificates node1;
  private static TestCertificates node2;
  private static TestCertificates ecNode;
  private static TestCertificates otherService;
  private static TestCertificates stranger;
  private static TestCertificates serverOnly;
  private static TestCertificates ipOnly;

  @BeforeAll
  static void certificates() {
    clusterCa = TestCertificates.Authority.create(dir.resolve("ca"), "Cluster CA");
    node1 = clusterCa.issue(dir.resolve("n1"), "RSA", true, "tickmark-cluster", "node-1");
    node2 = clusterCa.issue(dir.resolve("n2"), "RSA", true, "node-2", "tickmark-cluster");
    ecNode = clusterCa.issue(dir.resolve("ec"), "EC", true, "tickmark-cluster");
    otherService = clusterCa.issue(dir.resolve("web"), "RSA", true, "web.internal");
    stranger =
        TestCertificates.Authority.create(dir.resolve("other-ca"), "Other CA")
            .issue(dir.resolve("stranger"), "RSA", true, "tickmark-cluster");
    serverOnly = clusterCa.issue(dir.resolve("server-only"), "RSA", false, "tickmark-cluster");
    ipOnly = clusterCa.issue(dir.resolve("ip-only"), "RSA", true, "127.0.0.1");
  }

  private static ClusterTls load(TestCertificates c) throws UnusableFiles {
    return ClusterTls.load(c.certificateFile(), c.keyFile(), c.caFile());
  }

  @Test
  void loadsANodesRsaOrEcCertificateAndNamesTheCluster() throws Exception {
    ClusterTls tls = load(node1);
    assertEquals(Set.of("tickmark-cluster", "node-1"), tls.clusterNames());
    assertTrue(tls.describe().contains("CN=tickmark-cluster"), tls.describe());
    assertTrue(tls.describe().contains("CA CN=Cluster CA"), tls.describe());
    assertEquals("EC", load(ecNode).chain().get(0).getPublicKey().getAlgorithm());
  }

  @Test
  void enginesSpeakOnlyTls13AndTheServerDemandsTheClientsCertificate() throws Exception {
    ClusterTls tls = load(node1);
    SSLEngine server = tls.createServerSSLEngine("127.0.0.1", 25520);
    assertFalse(server.getUseClientMode());
    assertTrue(server.getNeedClientAuth());
    assertArrayEquals(new String[] {"TLSv1.3"}, server.getSSLParameters().getProtocols());
    SSLEngine client = tls.createClientSSLEngine("127.0.0.1", 25520);
    assertTrue(client.getUseClientMode());
    assertArrayEquals(new String[] {"TLSv1.3"}, client.getSSLParameters().getProtocols());
    assertTrue(tls.verifyClientSession("127.0.0.1", null).isEmpty());
  }

  @Test
  void twoNodesOfTheClusterShakeHandsEitherWay() throws Exception {
    ClusterTls a = load(node1);
    ClusterTls b = load(node2);
    assertEquals(ClusterTlsProbe.Outcome.OPEN, ClusterTlsProbe.handshake(a, b.context()));
    assertEquals(ClusterTlsProbe.Outcome.OPEN, ClusterTlsProbe.handshake(b, a.context()));
    assertEquals(
        ClusterTlsProbe.Outcome.OPEN, ClusterTlsProbe.handshake(a, load(ecNode).context()));
  }

  @Test
  void aCertificateFromAnotherCaIsRefusedEitherWay() throws Exception {
    ClusterTls node = load(node1);
    ClusterTls outsider = load(stranger);
    assertEquals(
        ClusterTlsProbe.Outcome.REFUSED, ClusterTlsProbe.handshake(node, outsider.context()));
    assertEquals(
        ClusterTlsProbe.Outcome.REFUSED, ClusterTlsProbe.handshake(outsider, node.context()));
  }

  @Test
  void aCertificateFromTheSameCaForAnotherServiceIsRefusedEitherWay() throws Exception {
    ClusterTls node = load(node1);
    ClusterTls web = load(otherService);
    assertEquals(ClusterTlsProbe.Outcome.REFUSED, ClusterTlsProbe.handshake(node, web.context()));
    assertEquals(ClusterTlsProbe.Outcome.REFUSED, ClusterTlsProbe.handshake(web, node.context()));
  }

  @Test
  void aClientWithoutACertificateIsRefused() throws Exception {
    ClusterTls node = load(node1);
    assertEquals(
        ClusterTlsProbe.Outcome.REFUSED,
        ClusterTlsProbe.handshake(node, ClusterTlsProbe.trustingOnly(clusterCa.caFile())));
  }

  @Test
  void noneSetIsPlainRemotingAndSomeSetNamesWhatIsMissing() throws Exception {
    assertTrue(ClusterTls.fromConfig(ConfigFactory.empty()).isEmpty());
    Map<String, Object> onlyCert = new HashMap<>();
    onlyCert.put(ClusterTls.CERT_KEY, node1.certificateFile().toString());
    onlyCert.put(ClusterTls.PRIVATE_KEY_KEY, "");
    onlyCert.put(ClusterTls.CA_KEY, " ");
    String message =
        assertThrows(
                UnusableFiles.class, () -> ClusterTls.fromConfig(ConfigFactory.parseMap(onlyCert)))
            .getMessage();
    assertTrue(
        message.startsWith("TICKMARK_CLUSTER_TLS_KEY and TICKMARK_CLUSTER_TLS_CA are not set"),
        message);
    Map<String, Object> all = new HashMap<>(onlyCert);
    all.put(ClusterTls.PRIVATE_KEY_KEY, node1.keyFile().toString());
    all.put(ClusterTls.CA_KEY, node1.caFile().toString());
    assertTrue(ClusterTls.fromConfig(ConfigFactory.parseMap(all)).isPresent());
  }

  @Test
  void refusesACertificateTheClustersCaDidNotIssue() {
    String message = refused(stranger.certificateFile(), stranger.keyFile(), clusterCa.caFile());
    assertTrue(message.startsWith("TICKMARK_CLUSTER_TLS_CERT ("), message);
    assertTrue(message.contains("was not issued by a CA in TICKMARK_CLUSTER_TLS_CA"), message);
    assertTrue(message.contains("CN=Cluster CA"), message);
  }

  @Test
  void refusesACertificateThatCannotBeATlsClient() {
    String message =
        refused(serverOnly.certificateFile(), serverOnly.keyFile(), serverOnly.caFile());
    assertTrue(message.contains("serverAuth and clientAuth"), message);
  }

  @Test
  void refusesACertificateWithoutADnsNameToShare() {
    String message = refused(ipOnly.certificateFile(), ipOnly.keyFile(), ipOnly.caFile());
    assertTrue(message.contains("has no DNS name"), message);
    assertTrue(message.contains("DNS:tickmark-cluster"), message);
  }

  @Test
  void refusesAKeyThatIsNotTheCertificatesAndNamesTheClusterVariable() {
    String message = refused(node1.certificateFile(), node2.keyFile(), node1.caFile());
    assertTrue(message.startsWith("TICKMARK_CLUSTER_TLS_KEY ("), message);
    assertTrue(message.contains("is not the private key of the certificate"), message);
    assertFalse(message.contains("PRIVATE KEY-----"), message);
  }

  @Test
  void refusesAKeyFileGivenAsTheCa() {
    String message = refused(node1.certificateFile(), node1.keyFile(), node1.keyFile());
    assertTrue(message.startsWith("TICKMARK_CLUSTER_TLS_CA ("), message);
    assertTrue(message.contains("holds no \"BEGIN CERTIFICATE\" block but a private key"), message);
  }

  private static String refused(Path cert, Path key, Path ca) {
    return assertThrows(UnusableFiles.class, () -> ClusterTls.load(cert, key, ca)).getMessage();
  }
}
