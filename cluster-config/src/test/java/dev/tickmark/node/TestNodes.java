package dev.tickmark.node;

import dev.tickmark.persistence.DatabaseSettings;
import java.util.Map;

/** Starts in-JVM nodes for integration tests: free ports, no management, never exits the JVM. */
final class TestNodes {
  static final String OPERATOR_TOKEN = "tmkop_test_operator_token_0123456789";
  static final String WEBHOOK_SECRET = "whsec_test_0123456789abcdef0123456789abcdef";

  /**
   * Test nodes' rate limits, per key and per address: the suites fire requests far faster than the
   * defaults (20/s per key, 1/s per address) allow, all from one address. RateLimitIntegrationTest
   * runs on small real ones.
   */
  static final int UNLIMITED_RATE = 1_000_000;

  /** The environment a node process gets for {@link #UNLIMITED_RATE}. */
  static final Map<String, String> UNLIMITED_RATE_ENV =
      Map.of(
          "TICKMARK_RATE_LIMIT_KEY_PER_SECOND", Integer.toString(UNLIMITED_RATE),
          "TICKMARK_RATE_LIMIT_KEY_BURST", Integer.toString(UNLIMITED_RATE),
          "TICKMARK_RATE_LIMIT_ADDRESS_PER_SECOND", Integer.toString(UNLIMITED_RATE),
          "TICKMARK_RATE_LIMIT_ADDRESS_BURST", Integer.toString(UNLIMITED_RATE));

  private TestNodes() {}

  static NodeSettings settings(DatabaseSettings database) {
    return settings(database, Map.of());
  }

  /** The same, with these environment variables too (named operator tokens). */
  static NodeSettings settings(DatabaseSettings database, Map<String, String> env) {
    Map<String, String> all = new java.util.HashMap<>(env);
    all.put("TICKMARK_OPERATOR_TOKEN", OPERATOR_TOKEN);
    all.put("TICKMARK_PAYMENT_WEBHOOK_SECRET", WEBHOOK_SECRET);
    return NodeSettings.fromEnvironment(all)
        .withDatabase(database.url(), database.user(), database.password())
        .withPorts(0, -1, 0)
        .withExitJvmOnShutdown(false)
        .withRateLimits(UNLIMITED_RATE, UNLIMITED_RATE, UNLIMITED_RATE, UNLIMITED_RATE);
  }
}
