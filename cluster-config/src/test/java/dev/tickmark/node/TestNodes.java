package dev.tickmark.node;

import dev.tickmark.persistence.DatabaseSettings;
import java.util.Map;

/** Starts in-JVM nodes for integration tests: free ports, no management, never exits the JVM. */
final class TestNodes {
  static final String OPERATOR_TOKEN = "tmkop_test_operator_token_0123456789";
  static final String WEBHOOK_SECRET = "whsec_test_0123456789abcdef0123456789abcdef";

  private TestNodes() {}

  static NodeSettings settings(DatabaseSettings database) {
    return NodeSettings.fromEnvironment(
            Map.of(
                "TICKMARK_OPERATOR_TOKEN", OPERATOR_TOKEN,
                "TICKMARK_PAYMENT_WEBHOOK_SECRET", WEBHOOK_SECRET))
        .withDatabase(database.url(), database.user(), database.password())
        .withPorts(0, -1, 0)
        .withExitJvmOnShutdown(false);
  }
}
