package dev.tickmark.node;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import com.typesafe.config.ConfigParseOptions;
import dev.tickmark.http.ApiSettings;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;

/**
 * A node's deployable settings, read from the environment as DESIGN.md's "Running" section defines
 * them. Everything has a default; secrets are never part of {@link #toString()}.
 *
 * <p>A profile ({@code TICKMARK_PROFILE=local1}, or {@code -Dconfig.resource=local1.conf}) picks
 * another configuration file whose values become the defaults (the local cluster's ports and seed
 * nodes); the environment variables still override them. In dev mode ({@code TICKMARK_DEV=true})
 * {@code dev.conf} is laid over that configuration: its values (simulated hosts allowed, a laptop's
 * disk accepted) win, environment variables still win over them.
 *
 * @param profile the configuration resource the node loads instead of {@code application.conf}, or
 *     null
 * @param discovery how the node finds its cluster: seed nodes (none = join itself) or Kubernetes
 *     bootstrap
 * @param operatorToken {@code TICKMARK_OPERATOR_TOKEN} (generated when neither it nor {@code
 *     TICKMARK_OPERATOR_TOKENS} is set), or null when only named tokens are given
 * @param operatorTokens every operator token by the operator's name, as the audit log records it:
 *     {@code operatorToken} as {@code "operator"}, and each of {@code TICKMARK_OPERATOR_TOKENS}
 *     ({@code name:token,name:token})
 */
public record NodeSettings(
    String profile,
    Discovery discovery,
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
    Map<String, String> operatorTokens,
    String webhookSecret,
    boolean dev,
    boolean allowSimulatedHosts,
    boolean exitJvmOnShutdown,
    Map<String, Object> configOverrides) {

  /** How a node finds the other members of its cluster ({@code TICKMARK_DISCOVERY}). */
  public enum Discovery {
    /** {@code TICKMARK_SEED_NODES}, or the node joins itself when there are none. */
    SEED_NODES,
    /**
     * Pekko Management cluster bootstrap over the Kubernetes API (pods labelled {@code app=<service
     * name>}).
     */
    KUBERNETES;

    static Discovery of(String value) {
      if (value == null || value.isBlank() || value.equalsIgnoreCase("seed-nodes"))
        return SEED_NODES;
      if (value.equalsIgnoreCase("kubernetes")) return KUBERNETES;
      throw new IllegalArgumentException(
          "TICKMARK_DISCOVERY must be seed-nodes or kubernetes, got \"" + value + "\"");
    }
  }

  public static NodeSettings fromEnvironment(Map<String, String> env) {
    String profile = blankToNull(env.get("TICKMARK_PROFILE"));
    boolean dev = Boolean.parseBoolean(env.getOrDefault("TICKMARK_DEV", "false"));
    // The profile's file (or application.conf), with dev.conf over it in dev mode, gives the
    // defaults; it resolves
    // ${?TICKMARK_...} from the process environment, and the map's own values win over both (tests
    // pass a map).
    Config config = load(profile, dev);
    String operatorToken = blankToNull(env.get("TICKMARK_OPERATOR_TOKEN"));
    Map<String, String> named = operatorTokens(blankToNull(env.get("TICKMARK_OPERATOR_TOKENS")));
    boolean generated = operatorToken == null && named.isEmpty();
    if (generated) operatorToken = "tmkop_" + random(24);
    else if (operatorToken != null) requireStrongSecret("TICKMARK_OPERATOR_TOKEN", operatorToken);
    Map<String, String> operatorTokens = new java.util.LinkedHashMap<>();
    if (operatorToken != null) operatorTokens.put(DEFAULT_OPERATOR, operatorToken);
    for (Map.Entry<String, String> e : named.entrySet()) {
      if (operatorTokens.containsKey(e.getKey()))
        throw new IllegalArgumentException(
            "TICKMARK_OPERATOR_TOKENS names \""
                + e.getKey()
                + "\", the name TICKMARK_OPERATOR_TOKEN has; choose another");
      if (operatorTokens.containsValue(e.getValue()))
        throw new IllegalArgumentException(
            "TICKMARK_OPERATOR_TOKENS gives operator \""
                + e.getKey()
                + "\" a token another operator has; each needs its own");
      operatorTokens.put(e.getKey(), e.getValue());
    }
    String webhookSecret = blankToNull(env.get("TICKMARK_PAYMENT_WEBHOOK_SECRET"));
    if (webhookSecret != null)
      requireStrongSecret("TICKMARK_PAYMENT_WEBHOOK_SECRET", webhookSecret);
    else if (dev) webhookSecret = "whsec_dev_" + random(16);
    String dbPassword = env.getOrDefault("TICKMARK_DB_PASSWORD", "");
    if (placeholder(dbPassword))
      throw new IllegalArgumentException(
          "TICKMARK_DB_PASSWORD is the template's placeholder; set the database's real password");
    return new NodeSettings(
        profile,
        Discovery.of(
            env.getOrDefault("TICKMARK_DISCOVERY", config.getString("tickmark.cluster.discovery"))),
        env.getOrDefault(
            "TICKMARK_HOSTNAME", config.getString("pekko.remote.artery.canonical.hostname")),
        intOf(env, "TICKMARK_HTTP_PORT", config.getInt("tickmark.http.port")),
        intOf(env, "TICKMARK_MANAGEMENT_PORT", config.getInt("pekko.management.http.port")),
        intOf(env, "TICKMARK_REMOTE_PORT", config.getInt("pekko.remote.artery.canonical.port")),
        seedNodes(
            env.getOrDefault(
                "TICKMARK_SEED_NODES", config.getString("tickmark.cluster.seed-nodes"))),
        blankToNull(env.get("TICKMARK_DB_URL")),
        env.getOrDefault("TICKMARK_DB_USER", "postgres"),
        dbPassword,
        Path.of(env.getOrDefault("TICKMARK_DATA_DIR", "./data")),
        operatorToken,
        generated,
        Map.copyOf(operatorTokens),
        webhookSecret,
        dev,
        Boolean.parseBoolean(
            env.getOrDefault(
                "TICKMARK_ALLOW_SIMULATED_HOSTS",
                config.getString("tickmark.market.allow-simulated-hosts"))),
        true,
        numberOfShards(env));
  }

  static final String NUMBER_OF_SHARDS = "pekko.cluster.sharding.number-of-shards";

  /**
   * {@code TICKMARK_NUMBER_OF_SHARDS} as a number: Pekko's join check compares the value as
   * written, and a string "100" (what {@code ${?VAR}} would give) differs from the file's 100,
   * which would refuse a node that agrees with its cluster.
   */
  private static Map<String, Object> numberOfShards(Map<String, String> env) {
    String v = blankToNull(env.get("TICKMARK_NUMBER_OF_SHARDS"));
    if (v == null) return Map.of();
    try {
      int n = Integer.parseInt(v.trim());
      if (n > 0) return Map.of(NUMBER_OF_SHARDS, n);
    } catch (NumberFormatException e) {
      // below
    }
    throw new IllegalArgumentException(
        "TICKMARK_NUMBER_OF_SHARDS must be a positive whole number, the same on every node; got \""
            + v
            + "\"");
  }

  public NodeSettings withPorts(int http, int management, int remote) {
    return new NodeSettings(
        profile,
        discovery,
        hostname,
        http,
        management,
        remote,
        seedNodes,
        dbUrl,
        dbUser,
        dbPassword,
        dataDir,
        operatorToken,
        operatorTokenGenerated,
        operatorTokens,
        webhookSecret,
        dev,
        allowSimulatedHosts,
        exitJvmOnShutdown,
        configOverrides);
  }

  public NodeSettings withDatabase(String url, String user, String password) {
    return new NodeSettings(
        profile,
        discovery,
        hostname,
        httpPort,
        managementPort,
        remotePort,
        seedNodes,
        url,
        user,
        password,
        dataDir,
        operatorToken,
        operatorTokenGenerated,
        operatorTokens,
        webhookSecret,
        dev,
        allowSimulatedHosts,
        exitJvmOnShutdown,
        configOverrides);
  }

  public NodeSettings withExitJvmOnShutdown(boolean exit) {
    return new NodeSettings(
        profile,
        discovery,
        hostname,
        httpPort,
        managementPort,
        remotePort,
        seedNodes,
        dbUrl,
        dbUser,
        dbPassword,
        dataDir,
        operatorToken,
        operatorTokenGenerated,
        operatorTokens,
        webhookSecret,
        dev,
        allowSimulatedHosts,
        exit,
        configOverrides);
  }

  /** The same settings with one HOCON value overridden (tests use it for short timeouts). */
  public NodeSettings withConfig(String path, Object value) {
    Map<String, Object> overrides = new java.util.HashMap<>(configOverrides);
    overrides.put(path, value);
    return new NodeSettings(
        profile,
        discovery,
        hostname,
        httpPort,
        managementPort,
        remotePort,
        seedNodes,
        dbUrl,
        dbUser,
        dbPassword,
        dataDir,
        operatorToken,
        operatorTokenGenerated,
        operatorTokens,
        webhookSecret,
        dev,
        allowSimulatedHosts,
        exitJvmOnShutdown,
        Map.copyOf(overrides));
  }

  /** The name {@code TICKMARK_OPERATOR_TOKEN}'s holder has in the audit log. */
  static final String DEFAULT_OPERATOR = ApiSettings.DEFAULT_OPERATOR;

  /** An operator's name in {@code TICKMARK_OPERATOR_TOKENS}. */
  private static final java.util.regex.Pattern OPERATOR_NAME =
      java.util.regex.Pattern.compile("[a-z0-9][a-z0-9._-]{0,63}");

  /**
   * {@code TICKMARK_OPERATOR_TOKENS}: {@code name:token} pairs, comma-separated; each name is
   * lowercase letters, digits, '.', '_' or '-' (at most 64), each token a strong secret. The error
   * names the operator, never the token.
   */
  static Map<String, String> operatorTokens(String value) {
    Map<String, String> tokens = new java.util.LinkedHashMap<>();
    if (value == null) return tokens;
    for (String pair : value.split(",")) {
      if (pair.isBlank()) continue;
      int colon = pair.indexOf(':');
      String name = colon < 0 ? "" : pair.substring(0, colon).strip();
      if (!OPERATOR_NAME.matcher(name).matches())
        throw new IllegalArgumentException(
            "TICKMARK_OPERATOR_TOKENS must be name:token pairs separated by commas, each name"
                + " lowercase letters, digits, '.', '_' or '-' (at most 64)");
      String token = pair.substring(colon + 1).strip();
      requireStrongSecret("TICKMARK_OPERATOR_TOKENS (operator " + name + ")", token);
      if (tokens.put(name, token) != null)
        throw new IllegalArgumentException(
            "TICKMARK_OPERATOR_TOKENS names operator \"" + name + "\" twice");
    }
    return tokens;
  }

  /**
   * The same settings with other request rate limits ({@code tickmark.http.rate-limits}): per API
   * key, and per client address for sign-up. For nodes embedded in test suites and benchmarks,
   * whose clients all share one address and fire far more than a person would.
   */
  public NodeSettings withRateLimits(
      double perKeyPerSecond, int perKeyBurst, double perAddressPerSecond, int perAddressBurst) {
    String base = "tickmark.http.rate-limits.";
    return withConfig(base + "per-key.per-second", perKeyPerSecond)
        .withConfig(base + "per-key.burst", perKeyBurst)
        .withConfig(base + "per-address.per-second", perAddressPerSecond)
        .withConfig(base + "per-address.burst", perAddressBurst);
  }

  /** Laid over the profile's configuration in dev mode. */
  static final String DEV_CONFIG = "dev.conf";

  /**
   * The configuration a node with this profile runs on (before the settings' own overrides): the
   * profile's file, or {@code application.conf} (or what {@code -Dconfig.resource}/{@code
   * -Dconfig.file} names), with {@code dev.conf} over it in dev mode; resolved as {@link
   * ConfigFactory#load()} does (system properties first, then the environment).
   */
  static Config load(String profile, boolean dev) {
    if (!dev) return profile == null ? ConfigFactory.load() : ConfigFactory.load(profile);
    Config application =
        profile == null
            ? ConfigFactory.defaultApplication()
            : ConfigFactory.parseResourcesAnySyntax(profile);
    Config devConfig =
        ConfigFactory.parseResources(
            DEV_CONFIG, ConfigParseOptions.defaults().setAllowMissing(false));
    return ConfigFactory.load(devConfig.withFallback(application));
  }

  /** The shortest operator token or webhook secret a node accepts. */
  static final int MIN_SECRET_LENGTH = 32;

  /**
   * What the shipped templates and docs put where a secret goes; a value containing one of these
   * (in any case) was never replaced.
   */
  static final List<String> PLACEHOLDERS =
      List.of("change-me", "changeme", "placeholder", "example");

  /**
   * Refuses a secret from the environment that is a placeholder or too short to resist guessing
   * (the node then does not start: {@link Main} logs this one line). Generate one with {@code
   * openssl rand -hex 32}.
   */
  static void requireStrongSecret(String name, String value) {
    if (placeholder(value))
      throw new IllegalArgumentException(
          name
              + " is a placeholder (it contains one of "
              + PLACEHOLDERS
              + "); generate a real one, e.g. openssl rand -hex 32");
    if (value.strip().length() < MIN_SECRET_LENGTH)
      throw new IllegalArgumentException(
          name
              + " is "
              + value.strip().length()
              + " characters, fewer than "
              + MIN_SECRET_LENGTH
              + "; generate a real one, e.g. openssl rand -hex 32");
  }

  static boolean placeholder(String value) {
    String lower = value.toLowerCase(java.util.Locale.ROOT);
    return PLACEHOLDERS.stream().anyMatch(lower::contains);
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
    return "NodeSettings[profile="
        + (profile == null ? "application" : profile)
        + ", discovery="
        + discovery
        + ", hostname="
        + hostname
        + ", http="
        + httpPort
        + ", management="
        + managementPort
        + ", remote="
        + remotePort
        + ", seeds="
        + seedNodes
        + ", db="
        + (dbUrl == null ? "embedded in " + dataDir : dbUrl)
        + ", dev="
        + dev
        + "]";
  }
}
