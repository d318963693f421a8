package dev.tickmark.node;

import java.nio.file.Path;
import java.security.SecureRandom;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;

/**
 * A node's deployable settings, read from the environment as DESIGN.md's "Running" section defines
 * them. Everything has a default; secrets are never part of {@link #toString()}.
 */
public record NodeSettings(
    String hostname,
    int httpPort,
    int managementPort,
    int remotePort,
    List<String> seedNodes,
    String dbUrl,
    String dbUser,
    String dbPassword,
    Path dataDir,
    String operatorToken,
    boolean operatorTokenGenerated,
    String webhookSecret,
    boolean dev,
    boolean allowSimulatedHosts,
    boolean exitJvmOnShutdown,
    Map<String, Object> configOverrides) {

  public static NodeSettings fromEnvironment(Map<String, String> env) {
    boolean dev = Boolean.parseBoolean(env.getOrDefault("TICKMARK_DEV", "false"));
    String operatorToken = blankToNull(env.get("TICKMARK_OPERATOR_TOKEN"));
    boolean generated = operatorToken == null;
    if (generated) operatorToken = "tmkop_" + random(24);
    String webhookSecret = blankToNull(env.get("TICKMARK_PAYMENT_WEBHOOK_SECRET"));
    if (webhookSecret == null && dev) webhookSecret = "whsec_dev_" + random(16);
    return new NodeSettings(
        env.getOrDefault("TICKMARK_HOSTNAME", "127.0.0.1"),
        intOf(env, "TICKMARK_HTTP_PORT", 8080),
        intOf(env, "TICKMARK_MANAGEMENT_PORT", 8558),
        intOf(env, "TICKMARK_REMOTE_PORT", 25520),
        seedNodes(env.get("TICKMARK_SEED_NODES")),
        blankToNull(env.get("TICKMARK_DB_URL")),
        env.getOrDefault("TICKMARK_DB_USER", "postgres"),
        env.getOrDefault("TICKMARK_DB_PASSWORD", ""),
        Path.of(env.getOrDefault("TICKMARK_DATA_DIR", "./data")),
        operatorToken,
        generated,
        webhookSecret,
        dev,
        Boolean.parseBoolean(env.getOrDefault("TICKMARK_ALLOW_SIMULATED_HOSTS", Boolean.toString(dev))),
        true,
        Map.of());
  }

  public NodeSettings withPorts(int http, int management, int remote) {
    return new NodeSettings(hostname, http, management, remote, seedNodes, dbUrl, dbUser, dbPassword, dataDir,
        operatorToken, operatorTokenGenerated, webhookSecret, dev, allowSimulatedHosts, exitJvmOnShutdown, configOverrides);
  }

  public NodeSettings withDatabase(String url, String user, String password) {
    return new NodeSettings(hostname, httpPort, managementPort, remotePort, seedNodes, url, user, password, dataDir,
        operatorToken, operatorTokenGenerated, webhookSecret, dev, allowSimulatedHosts, exitJvmOnShutdown, configOverrides);
  }

  public NodeSettings withExitJvmOnShutdown(boolean exit) {
    return new NodeSettings(hostname, httpPort, managementPort, remotePort, seedNodes, dbUrl, dbUser, dbPassword, dataDir,
        operatorToken, operatorTokenGenerated, webhookSecret, dev, allowSimulatedHosts, exit, configOverrides);
  }

  /** The same settings with one HOCON value overridden (tests use it for short timeouts). */
  public NodeSettings withConfig(String path, Object value) {
    Map<String, Object> overrides = new java.util.HashMap<>(configOverrides);
    overrides.put(path, value);
    return new NodeSettings(hostname, httpPort, managementPort, remotePort, seedNodes, dbUrl, dbUser, dbPassword, dataDir,
        operatorToken, operatorTokenGenerated, webhookSecret, dev, allowSimulatedHosts, exitJvmOnShutdown, Map.copyOf(overrides));
  }

  static List<String> seedNodes(String value) {
    if (value == null || value.isBlank()) return List.of();
    return Arrays.stream(value.split(",")).map(String::trim).filter(s -> !s.isEmpty()).toList();
  }

  private static int intOf(Map<String, String> env, String name, int fallback) {
    String v = env.get(name);
    if (v == null || v.isBlank()) return fallback;
    try {
      return Integer.parseInt(v.trim());
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException(name + " must be a port number, got \"" + v + "\"");
    }
  }

  private static String blankToNull(String v) {
    return v == null || v.isBlank() ? null : v;
  }

  static String random(int bytes) {
    byte[] b = new byte[bytes];
    new SecureRandom().nextBytes(b);
    return HexFormat.of().formatHex(b);
  }

  @Override
  public String toString() {
    return "NodeSettings[hostname=" + hostname + ", http=" + httpPort + ", management=" + managementPort + ", remote="
        + remotePort + ", seeds=" + seedNodes + ", db=" + (dbUrl == null ? "embedded in " + dataDir : dbUrl) + ", dev=" + dev + "]";
  }
}
