package dev.tickmark.node;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.tickmark.node.ApiClient.Customer;
import dev.tickmark.node.ClusterProcesses.NodeProcess;
import dev.tickmark.node.ClusterTlsProbe.Outcome;
import dev.tickmark.persistence.TestDatabase;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Two node processes configured like a deployment with {@code TICKMARK_CLUSTER_TLS_*} form their
 * cluster over mutual TLS: they become members of one cluster and serve an account across nodes,
 * and their remoting ports let in only a peer with a certificate from the cluster's CA that shares
 * the cluster's name: not another CA's, not another service's from the same CA, not a client
 * without a certificate, and not plain remoting.
 */
class ClusterTlsIntegrationTest {
  /** How long a node's port must stay silent for a probe to call the connection kept. */
  private static final Duration QUIET = Duration.ofSeconds(2);

  /**
   * How long a probe that expects a refusal waits for it: a refusal ends the wait at once, so this
   * only bounds a busy machine's slowest alert (a kept connection would fail the probe after it).
   */
  private static final Duration REFUSAL = Duration.ofSeconds(15);

  @TempDir static Path certificates;
  private static TestCertificates.Authority clusterCa;
  private static ClusterProcesses cluster;

  @BeforeAll
  static void startTwoNodesWithClusterTls() throws Exception {
    clusterCa =
        TestCertificates.Authority.create(certificates.resolve("ca"), "Tickmark Cluster CA");
    TestCertificates nodes =
        clusterCa.issue(certificates.resolve("nodes"), "RSA", true, "tickmark-cluster");
    cluster =
        new ClusterProcesses(
            TestDatabase.fresh("cluster_tls"),
            2,
            Path.of("target", "cluster-tls"),
            Map.of(
                "TICKMARK_CLUSTER_TLS_CERT", nodes.certificateFile().toString(),
                "TICKMARK_CLUSTER_TLS_KEY", nodes.keyFile().toString(),
                "TICKMARK_CLUSTER_TLS_CA", nodes.caFile().toString()),
            List.of());
    cluster.startAll();
  }

  @AfterAll
  static void stop() {
    if (cluster != null) cluster.close();
  }

  @Test
  void theNodesFormOneClusterOverMutualTlsAndServeAcrossIt() throws Exception {
    NodeProcess one = cluster.node(1);
    NodeProcess two = cluster.node(2);
    Map<Integer, String> expected = Map.of(one.remotePort, "Up", two.remotePort, "Up");
    Eventually.eventually(
        Duration.ofSeconds(30), () -> assertEquals(expected, cluster.members(one)));
    Eventually.eventually(
        Duration.ofSeconds(30), () -> assertEquals(expected, cluster.members(two)));
    // an account's entity lives on one of the two: one of these requests crosses remoting
    Customer renter = one.api.signUp("Renter over TLS");
    one.api.opsDeposit(renter.id(), "12.5", "wire-tls-1").expect(201);
    for (NodeProcess node : List.of(one, two))
      assertEquals(
          "12.500000", node.api.get("/v1/account", renter.apiKey()).expect(200).text("balance"));
    for (NodeProcess node : List.of(one, two)) {
      String log = Files.readString(node.log, StandardCharsets.UTF_8);
      assertTrue(log.contains("Cluster TLS on: remoting (port " + node.remotePort), log);
      assertTrue(log.contains("cluster names [tickmark-cluster]"), log);
    }
  }

  @Test
  void theRemotingPortKeepsAPeerWithTheClustersCertificate() throws Exception {
    TestCertificates peer =
        clusterCa.issue(certificates.resolve("peer"), "EC", true, "tickmark-cluster", "node-9");
    ClusterTls tls = ClusterTls.load(peer.certificateFile(), peer.keyFile(), peer.caFile());
    assertEquals(Outcome.OPEN, ClusterTlsProbe.handshake(tls.context(), remoting(1), QUIET));
  }

  @Test
  void theRemotingPortRefusesACertificateFromAnotherCa() throws Exception {
    TestCertificates stranger =
        TestCertificates.Authority.create(certificates.resolve("other-ca"), "Other CA")
            .issue(certificates.resolve("stranger"), "RSA", true, "tickmark-cluster");
    ClusterTls tls =
        ClusterTls.load(stranger.certificateFile(), stranger.keyFile(), stranger.caFile());
    assertEquals(Outcome.REFUSED, ClusterTlsProbe.handshake(tls.context(), remoting(1), REFUSAL));
  }

  @Test
  void theRemotingPortRefusesAnotherServicesCertificateFromTheSameCa() throws Exception {
    TestCertificates web =
        clusterCa.issue(certificates.resolve("web"), "RSA", true, "web.internal");
    ClusterTls tls = ClusterTls.load(web.certificateFile(), web.keyFile(), web.caFile());
    assertEquals(Outcome.REFUSED, ClusterTlsProbe.handshake(tls.context(), remoting(2), REFUSAL));
  }

  @Test
  void theRemotingPortRefusesAClientWithoutACertificate() throws Exception {
    assertEquals(
        Outcome.REFUSED,
        ClusterTlsProbe.handshake(
            ClusterTlsProbe.trustingOnly(clusterCa.caFile()), remoting(1), REFUSAL));
  }

  @Test
  void theRemotingPortDoesNotSpeakPlainRemoting() throws Exception {
    byte[] answer = ClusterTlsProbe.plainHello(remoting(2), REFUSAL);
    assertNotNull(answer, "the port kept a plain remoting connection");
    // nothing, or a TLS alert record (content type 21), before it closed
    assertTrue(answer.length == 0 || answer[0] == 21, "answered " + answer.length + " bytes");
  }

  private static InetSocketAddress remoting(int node) {
    return new InetSocketAddress("127.0.0.1", cluster.node(node).remotePort);
  }
}
