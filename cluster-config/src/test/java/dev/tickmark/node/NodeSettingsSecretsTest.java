package dev.tickmark.node;

import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * A node does not start on a secret nobody chose: a placeholder, or one short enough to guess. Its
 * own generated secrets (a production node's operator token, dev mode's webhook secret) pass.
 */
class NodeSettingsSecretsTest {
  private static final String STRONG = "0123456789abcdef0123456789abcdef0123456789abcdef";

  @Test
  void refusesPlaceholderSecretsInAnyCase() {
    for (String placeholder :
        new String[] {
          "tmkop_CHANGE-ME",
          "CHANGE-ME",
          "tmkop_change-me_" + STRONG,
          "ChangeMe" + STRONG,
          "tmkop_PLACEHOLDER_" + STRONG,
          "tmkop_example_" + STRONG
        }) {
      for (String name :
          new String[] {"TICKMARK_OPERATOR_TOKEN", "TICKMARK_PAYMENT_WEBHOOK_SECRET"}) {
        IllegalArgumentException e =
            assertThrows(
                IllegalArgumentException.class,
                () -> NodeSettings.fromEnvironment(Map.of(name, placeholder)),
                name + "=" + placeholder);
        assertTrue(e.getMessage().startsWith(name + " is a placeholder"), e.getMessage());
        assertTrue(e.getMessage().contains("openssl rand -hex 32"), e.getMessage());
      }
    }
    IllegalArgumentException db =
        assertThrows(
            IllegalArgumentException.class,
            () -> NodeSettings.fromEnvironment(Map.of("TICKMARK_DB_PASSWORD", "CHANGE-ME")));
    assertTrue(db.getMessage().startsWith("TICKMARK_DB_PASSWORD"), db.getMessage());
  }

  @Test
  void refusesSecretsShorterThan32Characters() {
    String shortToken = "tmkop_" + "a".repeat(25); // 31 characters
    IllegalArgumentException e =
        assertThrows(
            IllegalArgumentException.class,
            () -> NodeSettings.fromEnvironment(Map.of("TICKMARK_OPERATOR_TOKEN", shortToken)));
    assertEquals(
        "TICKMARK_OPERATOR_TOKEN is 31 characters, fewer than 32; generate a real one, e.g. openssl"
            + " rand -hex 32",
        e.getMessage());
    assertThrows(
        IllegalArgumentException.class,
        () ->
            NodeSettings.fromEnvironment(Map.of("TICKMARK_PAYMENT_WEBHOOK_SECRET", "whsec_1234")));
    // even in dev mode a secret the operator gave must be a real one
    assertThrows(
        IllegalArgumentException.class,
        () ->
            NodeSettings.fromEnvironment(
                Map.of("TICKMARK_DEV", "true", "TICKMARK_PAYMENT_WEBHOOK_SECRET", "CHANGE-ME")));
  }

  @Test
  void acceptsGeneratedAndStrongSecrets() {
    NodeSettings given =
        NodeSettings.fromEnvironment(
            Map.of(
                "TICKMARK_OPERATOR_TOKEN",
                "tmkop_" + STRONG,
                "TICKMARK_PAYMENT_WEBHOOK_SECRET",
                STRONG));
    assertEquals("tmkop_" + STRONG, given.operatorToken());
    assertEquals(STRONG, given.webhookSecret());
    NodeSettings dev = NodeSettings.fromEnvironment(Map.of("TICKMARK_DEV", "true"));
    assertTrue(dev.operatorTokenGenerated());
    assertDoesNotThrow(
        () -> NodeSettings.requireStrongSecret("generated token", dev.operatorToken()));
    assertDoesNotThrow(
        () -> NodeSettings.requireStrongSecret("generated webhook secret", dev.webhookSecret()));
    assertDoesNotThrow(
        () ->
            NodeSettings.requireStrongSecret(
                "test token", TestNodes.OPERATOR_TOKEN + TestNodes.WEBHOOK_SECRET));
  }
}
