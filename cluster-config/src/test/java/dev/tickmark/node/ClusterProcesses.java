package dev.tickmark.node;

import static org.junit.jupiter.api.Assertions.fail;

import com.fasterxml.jackson.databind.JsonNode;
import dev.tickmark.persistence.DatabaseSettings;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * Tickmark nodes as separate JVMs ({@link Main}, configured through the environment like a
 * deployment) on 127.0.0.1 and one PostgreSQL, forming one cluster through seed nodes: nodes 1 and
 * 2 are the seeds. A node can be killed ({@code SIGKILL}: no coordinated shutdown, sockets cut) or
 * terminated ({@code SIGTERM}: leaves the cluster and hands its shards over). Each node logs to its
 * own file.
 */
final class ClusterProcesses implements AutoCloseable {
  /**
   * Bounds one node start (JVM, migrations, actor system, cluster join) on a busy two-core machine.
   */
  static final Duration NODE_START = Duration.ofSeconds(90);

  /**
   * Where a node runs: the address it binds and announces (remoting, HTTP, management) and the
   * command its JVM is started under (e.g. {@code ip netns exec NAME}; empty: directly).
   */
  record Placement(String host, List<String> launcher) {
    static final Placement LOOPBACK = new Placement("127.0.0.1", List.of());
  }

  /** One node: its ports, its process, and clients for its API and its management endpoint. */
  static final class NodeProcess {
    final int index;
    final Placement placement;
    final int httpPort;
    final int managementPort;
    final int remotePort;
    final Path log;
    final ApiClient api;
    Process process;

    NodeProcess(
        int index,
        Placement placement,
        int httpPort,
        int managementPort,
        int remotePort,
        Path log) {
      this.index = index;
      this.placement = placement;
      this.httpPort = httpPort;
      this.managementPort = managementPort;
      this.remotePort = remotePort;
      this.log = log;
      this.api = new ApiClient(baseUrl());
    }

    String baseUrl() {
      return "http://" + placement.host() + ":" + httpPort;
    }

    String engine() {
      return "ws://" + placement.host() + ":" + httpPort;
    }

    String managementUrl() {
      return "http://" + placement.host() + ":" + managementPort;
    }

    boolean alive() {
      return process != null && process.isAlive();
    }

    @Override
    public String toString() {
      return "node"
          + index
          + " ("
          + placement.host()
          + ", http "
          + httpPort
          + ", remoting "
          + remotePort
          + ")";
    }
  }

  private static final HttpClient HTTP =
      HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(2)).build();

  private final DatabaseSettings db;
  private final Map<String, String> env;
  private final List<String> jvmOptions;
  private final List<NodeProcess> nodes = new ArrayList<>();

  /**
   * @param env extra environment for every node (e.g. {@code TICKMARK_SETTLE_INTERVAL})
   * @param jvmOptions extra JVM options for every node ({@code -Dpath=value} config overrides)
   */
  ClusterProcesses(
      DatabaseSettings db, int size, Path logs, Map<String, String> env, List<String> jvmOptions)
      throws IOException {
    this(db, java.util.Collections.nCopies(size, Placement.LOOPBACK), logs, env, jvmOptions);
  }

  /**
   * One node per placement ({@code db} as the nodes reach it from there).
   *
   * @param env extra environment for every node
   * @param jvmOptions extra JVM options for every node
   */
  ClusterProcesses(
      DatabaseSettings db,
      List<Placement> placements,
      Path logs,
      Map<String, String> env,
      List<String> jvmOptions)
      throws IOException {
    this.db = db;
    this.env = Map.copyOf(env);
    this.jvmOptions = List.copyOf(jvmOptions);
    Files.createDirectories(logs);
    for (int i = 1; i <= placements.size(); i++) {
      nodes.add(
          new NodeProcess(
              i,
              placements.get(i - 1),
              freePort(),
              freePort(),
              freePort(),
              logs.resolve("node-" + i + ".log")));
    }
  }

  List<NodeProcess> nodes() {
    return nodes;
  }

  NodeProcess node(int index) {
    return nodes.get(index - 1);
  }

  /** Starts every node at once and returns when all are members and ready. */
  void startAll() throws Exception {
    for (NodeProcess n : nodes) launch(n);
    for (NodeProcess n : nodes) awaitReady(n);
  }

  /** Starts (or restarts, on the same ports) one node and waits until it is a ready member. */
  void start(NodeProcess node) throws Exception {
    launch(node);
    awaitReady(node);
  }

  /** SIGKILL: the process dies at once, as in a machine or JVM crash. */
  void kill(NodeProcess node) throws InterruptedException {
    node.process.destroyForcibly();
    if (!node.process.waitFor(30, TimeUnit.SECONDS)) fail(node + " survived SIGKILL");
  }

  /**
   * SIGTERM: the node runs its coordinated shutdown (unbind, leave, hand shards over) and exits.
   */
  void terminate(NodeProcess node) {
    node.process.destroy();
  }

  /**
   * The shard ids of {@code entityType} that this node hosts now (Pekko Management's {@code
   * /cluster/shards}).
   */
  Map<String, Integer> shards(NodeProcess node, String entityType) {
    JsonNode regions = management(node, "/cluster/shards/" + entityType).get("regions");
    Map<String, Integer> shards = new LinkedHashMap<>();
    regions.forEach(r -> shards.put(r.get("shardId").asText(), r.get("numEntities").asInt()));
    return shards;
  }

  /** The members this node sees, by their remoting port, with their status. */
  Map<Integer, String> members(NodeProcess node) {
    Map<Integer, String> members = new LinkedHashMap<>();
    management(node, "/cluster/members")
        .get("members")
        .forEach(
            m -> {
              String address = m.get("node").asText();
              members.put(
                  Integer.parseInt(address.substring(address.lastIndexOf(':') + 1)),
                  m.get("status").asText());
            });
    return members;
  }

  JsonNode management(NodeProcess node, String path) {
    HttpResponse<String> response = get(node.managementUrl() + path);
    if (response == null || response.statusCode() != 200) {
      throw new AssertionError(
          node
              + " "
              + path
              + " answered "
              + (response == null ? "nothing" : response.statusCode() + ": " + response.body()));
    }
    try {
      return ApiClient.JSON.readTree(response.body());
    } catch (IOException e) {
      throw new AssertionError(path + " is not JSON: " + response.body(), e);
    }
  }

  private void launch(NodeProcess node) throws IOException {
    String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
    List<String> command = new ArrayList<>(node.placement.launcher());
    command.addAll(
        List.of(
            java,
            "-Xmx384m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-Xshare:auto",
            // The simulated hosts measure this machine's disk, which other builds keep busy:
            // judge it as dev mode does.
            "-Dtickmark.verification.min-disk-write-mib-per-s=10"));
    command.addAll(jvmOptions);
    command.addAll(List.of("-cp", System.getProperty("java.class.path"), Main.class.getName()));
    ProcessBuilder builder = new ProcessBuilder(command);
    Map<String, String> e = builder.environment();
    e.keySet().removeIf(k -> k.startsWith("TICKMARK_"));
    e.put("TICKMARK_DB_URL", db.url());
    e.put("TICKMARK_DB_USER", db.user());
    e.put("TICKMARK_DB_PASSWORD", db.password());
    e.put("TICKMARK_HOSTNAME", node.placement.host());
    e.put("TICKMARK_HTTP_INTERFACE", node.placement.host());
    e.put("TICKMARK_HTTP_PORT", Integer.toString(node.httpPort));
    e.put("TICKMARK_MANAGEMENT_PORT", Integer.toString(node.managementPort));
    e.put("TICKMARK_REMOTE_PORT", Integer.toString(node.remotePort));
    e.put("TICKMARK_SEED_NODES", seeds());
    e.put("TICKMARK_OPERATOR_TOKEN", TestNodes.OPERATOR_TOKEN);
    e.put("TICKMARK_PAYMENT_WEBHOOK_SECRET", TestNodes.WEBHOOK_SECRET);
    e.put("TICKMARK_ALLOW_SIMULATED_HOSTS", "true");
    e.putAll(TestNodes.UNLIMITED_RATE_ENV);
    e.putAll(env);
    builder
        .redirectErrorStream(true)
        .redirectOutput(ProcessBuilder.Redirect.appendTo(node.log.toFile()));
    node.process = builder.start();
  }

  private String seeds() {
    List<String> seeds = new ArrayList<>();
    for (NodeProcess n : nodes.subList(0, Math.min(2, nodes.size())))
      seeds.add(n.placement.host() + ":" + n.remotePort);
    return String.join(",", seeds);
  }

  /**
   * Ready: the HTTP API answers and Pekko Management's readiness (cluster membership Up) passes.
   */
  private void awaitReady(NodeProcess node) throws InterruptedException {
    long deadline = System.nanoTime() + NODE_START.toNanos();
    while (true) {
      if (!node.process.isAlive())
        fail(node + " exited with " + node.process.exitValue() + ":\n" + tail(node.log));
      HttpResponse<String> ready = get(node.managementUrl() + "/ready");
      HttpResponse<String> health =
          ready != null && ready.statusCode() == 200 ? get(node.baseUrl() + "/health") : null;
      if (health != null && health.statusCode() == 200) return;
      if (System.nanoTime() - deadline >= 0)
        fail(node + " was not ready within " + NODE_START + ":\n" + tail(node.log));
      Thread.sleep(250);
    }
  }

  private static HttpResponse<String> get(String url) {
    try {
      return HTTP.send(
          HttpRequest.newBuilder(URI.create(url)).timeout(Duration.ofSeconds(5)).build(),
          HttpResponse.BodyHandlers.ofString(StandardCharsets.UTF_8));
    } catch (IOException e) {
      return null;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new AssertionError("interrupted", e);
    }
  }

  static String tail(Path log) {
    try {
      List<String> lines = Files.readAllLines(log, StandardCharsets.UTF_8);
      return String.join("\n", lines.subList(Math.max(0, lines.size() - 40), lines.size()));
    } catch (IOException e) {
      return "(no log: " + e + ")";
    }
  }

  static int freePort() throws IOException {
    return TestPorts.free();
  }

  /** Stops what still runs: SIGTERM, then SIGKILL after 20 s. */
  @Override
  public void close() {
    for (NodeProcess n : nodes) if (n.alive()) n.process.destroy();
    try {
      for (NodeProcess n : nodes) {
        if (n.process != null && !n.process.waitFor(20, TimeUnit.SECONDS))
          n.process.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
      }
    } catch (InterruptedException e) {
      for (NodeProcess n : nodes) if (n.process != null) n.process.destroyForcibly();
      Thread.currentThread().interrupt();
    }
  }
}
