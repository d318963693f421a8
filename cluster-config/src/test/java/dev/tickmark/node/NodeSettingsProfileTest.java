package dev.tickmark.node;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import com.typesafe.config.Config;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * Profiles give a node its defaults (the local cluster's ports and seeds); the environment still
 * overrides them.
 */
class NodeSettingsProfileTest {

  @Test
  void theLocalProfilesGiveEachNodeItsPortsAndTheTwoSeeds() {
    for (int i = 1; i <= 3; i++) {
      NodeSettings s = NodeSettings.fromEnvironment(Map.of("TICKMARK_PROFILE", "local" + i));
      assertEquals(8080 + i, s.httpPort());
      assertEquals(8558 + i, s.managementPort());
      assertEquals(25520 + i, s.remotePort());
      assertEquals(List.of("127.0.0.1:25521", "127.0.0.1:25522"), s.seedNodes());
      assertEquals(NodeSettings.Discovery.SEED_NODES, s.discovery());
      Config config =
          Node.config(
              s,
              new dev.tickmark.persistence.DatabaseSettings(
                  "jdbc:postgresql://127.0.0.1/x", "u", "", 1));
      assertEquals(8080 + i, config.getInt("tickmark.http.port"));
      assertEquals(25520 + i, config.getInt("pekko.remote.artery.canonical.port"));
      assertEquals(
          List.of("pekko://tickmark@127.0.0.1:25521", "pekko://tickmark@127.0.0.1:25522"),
          config.getStringList("pekko.cluster.seed-nodes"));
    }
  }

  @Test
  void environmentVariablesOverrideTheProfile() {
    NodeSettings s =
        NodeSettings.fromEnvironment(
            Map.of(
                "TICKMARK_PROFILE",
                "local2",
                "TICKMARK_HTTP_PORT",
                "9090",
                "TICKMARK_SEED_NODES",
                "10.0.0.1:25520",
                "TICKMARK_DISCOVERY",
                "kubernetes"));
    assertEquals(9090, s.httpPort());
    assertEquals(8560, s.managementPort());
    assertEquals(List.of("10.0.0.1:25520"), s.seedNodes());
    assertEquals(NodeSettings.Discovery.KUBERNETES, s.discovery());
  }

  @Test
  void withoutAProfileTheDesignDefaultsHold() {
    NodeSettings s = NodeSettings.fromEnvironment(Map.of());
    assertEquals(8080, s.httpPort());
    assertEquals(8558, s.managementPort());
    assertEquals(25520, s.remotePort());
    assertEquals(List.of(), s.seedNodes());
    assertEquals(NodeSettings.Discovery.SEED_NODES, s.discovery());
  }

  @Test
  void anUnknownDiscoveryIsRefused() {
    assertThrows(
        IllegalArgumentException.class,
        () -> NodeSettings.fromEnvironment(Map.of("TICKMARK_DISCOVERY", "dns")));
  }
}
