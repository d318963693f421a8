package dev.tickmark.agent.ssh;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.security.KeyPair;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.apache.sshd.common.config.keys.KeyUtils;
import org.apache.sshd.common.util.security.SecurityUtils;
import org.junit.jupiter.api.Test;

class RentalRegistryTest {
  private final Workspace workspace = new Workspace.Local(Path.of("/s"), Map.of());

  @Test
  void readsAuthorizedKeysTextSkippingCommentsAndGarbage() throws Exception {
    KeyPair a = SecurityUtils.getKeyPairGenerator(SecurityUtils.EDDSA).generateKeyPair();
    KeyPair b = SecurityUtils.getKeyPairGenerator(KeyUtils.RSA_ALGORITHM).generateKeyPair();
    String text =
        "# account keys\n\n"
            + HostKey.openSshLine(a.getPublic())
            + " alice@laptop\r\n"
            + "not a key at all\n"
            + HostKey.openSshLine(b.getPublic())
            + "\n";
    RentalRegistry registry = new RentalRegistry();
    registry.running("r1", text, workspace);
    List<java.security.PublicKey> keys = registry.get("r1").orElseThrow().keys();
    assertEquals(2, keys.size());
    assertTrue(KeyUtils.compareKeys(a.getPublic(), keys.get(0)));
    assertTrue(KeyUtils.compareKeys(b.getPublic(), keys.get(1)));
  }

  @Test
  void noKeysMeansNobodyAndEndingForgetsTheRentalAndTellsTheListeners() {
    RentalRegistry registry = new RentalRegistry();
    List<String> ended = new ArrayList<>();
    registry.onEnded(ended::add);
    registry.running("r1", null, workspace);
    assertTrue(registry.isRunning("r1"));
    assertEquals(List.of(), registry.get("r1").orElseThrow().keys());
    registry.bindPort(40000, "r1");
    assertEquals("r1", registry.rentalOfPort(40000));
    registry.ended("r1");
    registry.ended("r1");
    assertFalse(registry.isRunning("r1"));
    assertEquals(List.of("r1", "r1"), ended);
  }
}
