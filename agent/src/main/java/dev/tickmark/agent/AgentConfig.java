package dev.tickmark.agent;

import java.net.URI;
import java.net.URISyntaxException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Locale;

/**
 * How to run an agent.
 *
 * @param engines the nodes to connect to ({@code ws://host:port} or {@code wss://…}, optionally
 *     with a base path; {@code http(s)://} is accepted and means the same), tried in turn: each
 *     reconnect goes to the next one
 * @param token a registration token ({@code tmkreg_…}); may be null once the state folder holds a
 *     host credential, and is ignored when it does
 * @param stateDir the agent's state folder (its key and host credential)
 * @param simulatedGpus GPUs to simulate instead of reading the machine's, or null for the real
 *     hardware
 * @param runtime how rentals run: null means the default for this machine, chosen when the agent
 *     starts ({@link RuntimeChoice})
 * @param stopGrace how long a stopped workload gets between SIGTERM and SIGKILL; null means {@link
 *     #DEFAULT_STOP_GRACE}
 * @param sshIdleTimeout how long an SSH session may stay idle before the agent's SSH server closes
 *     it; null means {@link #DEFAULT_SSH_IDLE_TIMEOUT}
 * @param insecure allow plain {@code ws://} engines that are not on loopback ({@code --insecure}):
 *     the host credential and every frame then travel in clear text, and the agent says so at start
 *     ({@link #insecureWarning()}); without it such an engine is refused
 * @param allowUnsandboxed allow {@code runtime} {@link RuntimeKind#PROCESS} with real GPUs ({@code
 *     --allow-unsandboxed}): a workload then runs next to the agent's key, unisolated; without it
 *     that combination is refused ({@link RuntimeChoice#check})
 * @param caFile a PEM bundle of the CAs the agent trusts for {@code wss://} engines ({@code --ca}),
 *     instead of the system trust store; null means the system trust store. The host name is
 *     verified either way.
 */
public record AgentConfig(
    List<URI> engines,
    String token,
    Path stateDir,
    SimulatedGpus simulatedGpus,
    RuntimeKind runtime,
    Duration stopGrace,
    Duration sshIdleTimeout,
    boolean insecure,
    boolean allowUnsandboxed,
    Path caFile) {

  /** The websocket path on a node. */
  public static final String CONNECT_PATH = "/v1/agent/connect";

  public static final Duration DEFAULT_STOP_GRACE = Duration.ofSeconds(10);
  public static final Duration MAX_STOP_GRACE = Duration.ofMinutes(10);
  public static final Duration DEFAULT_SSH_IDLE_TIMEOUT = Duration.ofMinutes(30);

  /** How the agent runs rental workloads ({@code --runtime}). */
  public enum RuntimeKind {
    /** A child process in the rental's scratch folder, no isolation: development and tests. */
    PROCESS,
    /** A Docker container with the rented GPUs, no network unless enabled, no capabilities. */
    DOCKER,
    /**
     * A bubblewrap sandbox: own namespaces, read-only system, only the workspace writable, only the
     * rented GPUs' device nodes, no network.
     */
    SANDBOX;

    /** {@code process}, {@code docker} or {@code sandbox} */
    public String flag() {
      return name().toLowerCase(Locale.ROOT);
    }

    public static RuntimeKind ofFlag(String value) {
      for (RuntimeKind k : values()) if (k.flag().equals(value)) return k;
      throw new IllegalArgumentException(
          "unknown runtime '" + value + "' (sandbox, docker or process)");
    }
  }

  public AgentConfig {
    if (engines == null || engines.isEmpty())
      throw new IllegalArgumentException("at least one engine is needed");
    engines = engines.stream().map(AgentConfig::normalise).toList();
    if (stateDir == null) throw new IllegalArgumentException("a state folder is needed");
    if (token != null && token.isBlank()) token = null;
    if (stopGrace == null) stopGrace = DEFAULT_STOP_GRACE;
    if (stopGrace.isNegative() || stopGrace.compareTo(MAX_STOP_GRACE) > 0) {
      throw new IllegalArgumentException(
          "the stop grace period must be between 0 and " + MAX_STOP_GRACE.toSeconds() + " s");
    }
    if (sshIdleTimeout == null) sshIdleTimeout = DEFAULT_SSH_IDLE_TIMEOUT;
    if (sshIdleTimeout.isNegative() || sshIdleTimeout.isZero())
      throw new IllegalArgumentException("the ssh idle timeout must be positive");
    if (!insecure) {
      for (URI e : engines) {
        if (plainRemote(e)) {
          throw new IllegalArgumentException(
              "refusing the plain engine address '"
                  + e
                  + "': off loopback the host credential and every frame would travel in clear"
                  + " text; use wss:// (or --insecure on a network you trust)");
        }
      }
    }
    RuntimeChoice.check(runtime, simulatedGpus != null, allowUnsandboxed);
  }

  /** The system trust store. */
  public AgentConfig(
      List<URI> engines,
      String token,
      Path stateDir,
      SimulatedGpus simulatedGpus,
      RuntimeKind runtime,
      Duration stopGrace,
      Duration sshIdleTimeout,
      boolean insecure,
      boolean allowUnsandboxed) {
    this(
        engines,
        token,
        stateDir,
        simulatedGpus,
        runtime,
        stopGrace,
        sshIdleTimeout,
        insecure,
        allowUnsandboxed,
        null);
  }

  /** Neither {@code --insecure} nor {@code --allow-unsandboxed}. */
  public AgentConfig(
      List<URI> engines,
      String token,
      Path stateDir,
      SimulatedGpus simulatedGpus,
      RuntimeKind runtime,
      Duration stopGrace,
      Duration sshIdleTimeout) {
    this(engines, token, stateDir, simulatedGpus, runtime, stopGrace, sshIdleTimeout, false, false);
  }

  /** The default ssh idle timeout. */
  public AgentConfig(
      List<URI> engines,
      String token,
      Path stateDir,
      SimulatedGpus simulatedGpus,
      RuntimeKind runtime,
      Duration stopGrace) {
    this(engines, token, stateDir, simulatedGpus, runtime, stopGrace, null);
  }

  /** The default runtime for the machine ({@link RuntimeChoice}) and stop grace period. */
  public AgentConfig(List<URI> engines, String token, Path stateDir, SimulatedGpus simulatedGpus) {
    this(engines, token, stateDir, simulatedGpus, null, null);
  }

  /** The same configuration with another runtime. */
  public AgentConfig withRuntime(RuntimeKind kind) {
    return new AgentConfig(
        engines,
        token,
        stateDir,
        simulatedGpus,
        kind,
        stopGrace,
        sshIdleTimeout,
        insecure,
        allowUnsandboxed,
        caFile);
  }

  /** The same configuration with another stop grace period. */
  public AgentConfig withStopGrace(Duration grace) {
    return new AgentConfig(
        engines,
        token,
        stateDir,
        simulatedGpus,
        runtime,
        grace,
        sshIdleTimeout,
        insecure,
        allowUnsandboxed,
        caFile);
  }

  /** The same configuration with another ssh idle timeout. */
  public AgentConfig withSshIdleTimeout(Duration timeout) {
    return new AgentConfig(
        engines,
        token,
        stateDir,
        simulatedGpus,
        runtime,
        stopGrace,
        timeout,
        insecure,
        allowUnsandboxed,
        caFile);
  }

  /** The same configuration trusting only the CAs in {@code pemFile} ({@code --ca}). */
  public AgentConfig withCa(Path pemFile) {
    return new AgentConfig(
        engines,
        token,
        stateDir,
        simulatedGpus,
        runtime,
        stopGrace,
        sshIdleTimeout,
        insecure,
        allowUnsandboxed,
        pemFile);
  }

  /**
   * The warning the agent logs at start when {@code --insecure} lets it use plain {@code ws://}
   * engines off loopback, naming them; null when every engine is {@code wss://} or on loopback.
   */
  public String insecureWarning() {
    if (!insecure) return null;
    List<URI> plain = engines.stream().filter(AgentConfig::plainRemote).toList();
    if (plain.isEmpty()) return null;
    return "--insecure: the host credential and every frame travel in clear text to "
        + plain
        + " (plain ws:// off loopback): anyone on the path can read them and impersonate this"
        + " host; use wss://";
  }

  /** A {@code ws://} engine whose host is not loopback. */
  static boolean plainRemote(URI engine) {
    return "ws".equals(engine.getScheme()) && !loopback(engine.getHost());
  }

  private static final java.util.regex.Pattern IPV4 =
      java.util.regex.Pattern.compile("(\\d{1,3})\\.(\\d{1,3})\\.(\\d{1,3})\\.(\\d{1,3})");

  /**
   * {@code localhost}, a literal in 127.0.0.0/8, or {@code ::1}; read from the text alone, nothing
   * is resolved (a name that resolves to loopback today may not tomorrow).
   */
  static boolean loopback(String host) {
    if (host == null || host.isEmpty()) return false;
    String h = host.toLowerCase(Locale.ROOT);
    if (h.equals("localhost") || h.equals("localhost.")) return true;
    java.util.regex.Matcher m = IPV4.matcher(h);
    if (m.matches()) {
      for (int i = 1; i <= 4; i++) if (Integer.parseInt(m.group(i)) > 255) return false;
      return Integer.parseInt(m.group(1)) == 127;
    }
    if (h.startsWith("[") && h.endsWith("]")) h = h.substring(1, h.length() - 1);
    if (!h.contains(":") || !h.matches("[0-9a-f:.]+")) return false;
    try {
      // a literal IPv6 address: parsed, never looked up
      return java.net.InetAddress.getByName(h).isLoopbackAddress();
    } catch (java.net.UnknownHostException e) {
      return false;
    }
  }

  /** One engine, the real hardware; rentals run in Docker, else in the sandbox. */
  public static AgentConfig of(String engine, String token, Path stateDir) {
    return new AgentConfig(List.of(engine(engine)), token, stateDir, null);
  }

  /**
   * One engine, simulated GPUs ({@code h100-80gb:2}), as the node's dev mode runs one; rentals run
   * in the sandbox where bubblewrap works, else as plain processes.
   */
  public static AgentConfig simulated(
      String engine, String token, Path stateDir, String simulatedGpus) {
    return new AgentConfig(
        List.of(engine(engine)), token, stateDir, SimulatedGpus.parse(simulatedGpus));
  }

  /** {@code ~/.tickmark-agent} */
  public static Path defaultStateDir() {
    return Path.of(System.getProperty("user.home"), ".tickmark-agent");
  }

  /**
   * Whether {@code stateDir} already holds a host credential, so that no registration token is
   * needed.
   */
  public static boolean hasCredential(Path stateDir) {
    return java.nio.file.Files.isRegularFile(stateDir.resolve(StateDir.CREDENTIAL_FILE));
  }

  public boolean simulated() {
    return simulatedGpus != null;
  }

  /** The websocket address on {@code engine}: its base path followed by {@value #CONNECT_PATH}. */
  public static URI connectUri(URI engine) {
    URI base = normalise(engine);
    return URI.create(base + CONNECT_PATH);
  }

  /** Parses one engine address; throws {@link IllegalArgumentException} with a readable reason. */
  public static URI engine(String text) {
    String t = text == null ? "" : text.trim();
    if (t.isEmpty()) throw new IllegalArgumentException("empty engine address");
    if (!t.contains("://")) t = "ws://" + t;
    URI uri;
    try {
      uri = new URI(t);
    } catch (URISyntaxException e) {
      throw new IllegalArgumentException("bad engine address '" + text + "': " + e.getReason());
    }
    return normalise(uri);
  }

  private static URI normalise(URI uri) {
    String scheme = uri.getScheme() == null ? "" : uri.getScheme().toLowerCase(Locale.ROOT);
    String ws =
        switch (scheme) {
          case "ws", "http" -> "ws";
          case "wss", "https" -> "wss";
          default ->
              throw new IllegalArgumentException(
                  "bad engine address '"
                      + uri
                      + "': the scheme must be ws://, wss://, http:// or https://");
        };
    if (uri.getHost() == null || uri.getHost().isEmpty()) {
      throw new IllegalArgumentException("bad engine address '" + uri + "': no host");
    }
    if (uri.getRawQuery() != null || uri.getRawFragment() != null) {
      throw new IllegalArgumentException(
          "bad engine address '" + uri + "': no query or fragment allowed");
    }
    String path = uri.getRawPath() == null ? "" : uri.getRawPath();
    while (path.endsWith("/")) path = path.substring(0, path.length() - 1);
    if (path.endsWith(CONNECT_PATH))
      path = path.substring(0, path.length() - CONNECT_PATH.length());
    return URI.create(ws + "://" + uri.getRawAuthority() + path);
  }
}
