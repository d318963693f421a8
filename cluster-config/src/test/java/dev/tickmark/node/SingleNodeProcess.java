package dev.tickmark.node;

import static org.junit.jupiter.api.Assertions.fail;

import dev.tickmark.persistence.DatabaseSettings;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * One node as its own JVM ({@link Main}, configured through the environment like a deployment), so
 * that a test can kill it abruptly ({@code SIGKILL}: no coordinated shutdown, no final settlement,
 * sockets cut) and start it again on the same PostgreSQL and port.
 */
final class SingleNodeProcess {
  /** Bounds one node start (JVM, migrations, actor system, HTTP bind) on a busy machine. */
  static final Duration NODE_START = Duration.ofSeconds(60);

  private SingleNodeProcess() {}

  /**
   * Starts a node and waits until it answers {@code /health}; {@code properties} are extra {@code
   * -Dkey=value} settings.
   */
  static Process start(DatabaseSettings db, int httpPort, Path log, List<String> properties)
      throws Exception {
    return start(
        Map.of(
            "TICKMARK_DB_URL", db.url(),
            "TICKMARK_DB_USER", db.user(),
            "TICKMARK_DB_PASSWORD", db.password()),
        httpPort,
        log,
        properties);
  }

  /**
   * A node on its own embedded PostgreSQL, run in {@code workDir} with the default data directory
   * ({@code ./data}), as {@code bin/dev} runs it: what {@code java -jar} does with no {@code
   * TICKMARK_DB_URL}.
   */
  static Process startEmbedded(Path workDir, int httpPort, Path log) throws Exception {
    return start(Map.of(), workDir, httpPort, log, List.of());
  }

  private static Process start(
      Map<String, String> database, int httpPort, Path log, List<String> properties)
      throws Exception {
    return start(database, null, httpPort, log, properties);
  }

  private static Process start(
      Map<String, String> database, Path workDir, int httpPort, Path log, List<String> properties)
      throws Exception {
    String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
    List<String> command = new ArrayList<>();
    command.add(java);
    command.add("-Xmx512m");
    command.add("-XX:+UseSerialGC");
    command.add("-XX:TieredStopAtLevel=1");
    // The simulated host measures this machine's disk, which other builds keep busy: judge it as
    // dev mode does.
    command.add("-Dtickmark.verification.min-disk-write-mib-per-s=10");
    properties.forEach(p -> command.add("-D" + p));
    command.add("-cp");
    command.add(System.getProperty("java.class.path"));
    command.add(Main.class.getName());
    ProcessBuilder builder = new ProcessBuilder(command);
    if (workDir != null) builder.directory(workDir.toFile());
    Map<String, String> env = builder.environment();
    env.keySet().removeIf(k -> k.startsWith("TICKMARK_"));
    env.putAll(database);
    env.put("TICKMARK_HTTP_PORT", Integer.toString(httpPort));
    env.put("TICKMARK_MANAGEMENT_PORT", Integer.toString(freePort()));
    env.put("TICKMARK_REMOTE_PORT", Integer.toString(freePort()));
    env.put("TICKMARK_OPERATOR_TOKEN", TestNodes.OPERATOR_TOKEN);
    env.put("TICKMARK_PAYMENT_WEBHOOK_SECRET", TestNodes.WEBHOOK_SECRET);
    env.put("TICKMARK_ALLOW_SIMULATED_HOSTS", "true");
    env.putAll(TestNodes.UNLIMITED_RATE_ENV);
    env.put("TICKMARK_SETTLE_INTERVAL", "2s");
    // The agent's reconnect backoff reaches 30 s; give it a margin to reach the restarted node
    // before the host
    // would be declared lost (which would end the rental host_lost, not what this test is about).
    env.put("TICKMARK_HEARTBEAT_TIMEOUT", "60s");
    builder.redirectErrorStream(true).redirectOutput(log.toFile());
    Process process = builder.start();
    ApiClient api = new ApiClient("http://127.0.0.1:" + httpPort);
    long deadline = System.nanoTime() + NODE_START.toNanos();
    while (true) {
      if (!process.isAlive())
        fail(
            "the node exited with "
                + process.exitValue()
                + ":\n"
                + errors(log)
                + "\n...\n"
                + tail(log));
      try {
        if (api.get("/health", null).status() == 200) return process;
      } catch (AssertionError notYet) {
        // connection refused: not bound yet
      }
      if (System.nanoTime() - deadline >= 0)
        fail("the node did not answer /health within " + NODE_START + ":\n" + tail(log));
      Thread.sleep(200);
    }
  }

  /**
   * The log's first ERROR lines: why a node that failed to start did so, which its shutdown's lines
   * push out of the {@link #tail}.
   */
  static String errors(Path log) {
    try {
      return String.join(
          "\n",
          Files.readAllLines(log, StandardCharsets.UTF_8).stream()
              .filter(l -> l.contains(" ERROR ") || l.contains("failed to start"))
              .limit(10)
              .toList());
    } catch (IOException e) {
      return "(no log: " + e + ")";
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
}
