package dev.tickmark.agent;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;

/**
 * What opening one forwarded connection ({@code ssh -L}) into a docker rental costs: the agent's
 * helper ({@link DockerRuntime#relayInvocation}: a container of the rental's image in its network
 * namespace, running the host's socat) from its start to the first line a server on the container's
 * loopback sends back, against {@code docker exec <container> true} (what any command into the
 * container costs) and against the host's socat connecting to a server on the host's own loopback
 * (the helper's work without docker), alternated, in the same run. Needs a Docker daemon, Debian's
 * static busybox (the image, made offline with {@code docker import}) and socat.
 *
 * <p>It sits in the agent's package because what it measures is the agent's own, package-private
 * {@link DockerRuntime#relayInvocation} and {@link HostSocat}.
 *
 * <pre>
 *   mvn -B -q -o -DskipTests package
 *   source bench/third-party-classpath.sh
 *   java -cp "bench/target/classes:cluster-config/target/tickmark-node.jar:$third_party_cp" \
 *     dev.tickmark.agent.DockerRelayBenchmark [--rounds=20]
 * </pre>
 */
public final class DockerRelayBenchmark {
  private static final int PORT = 8765;

  private DockerRelayBenchmark() {}

  public static void main(String[] args) throws Exception {
    int rounds = 20;
    for (String a : args) {
      if (a.startsWith("--rounds=")) rounds = Integer.parseInt(a.substring(9));
      else {
        System.err.println("usage: DockerRelayBenchmark [--rounds=N]");
        System.exit(2);
      }
    }
    HostSocat socat = HostSocat.find();
    if (socat == null || !Files.isExecutable(Path.of("/bin/busybox"))) {
      System.err.println("needs socat and Debian's busybox-static (/bin/busybox) on this host");
      System.exit(2);
    }
    String run = Integer.toHexString(ThreadLocalRandom.current().nextInt());
    String image = "tickmark-relay-bench:" + run;
    String rental = "rnt_relaybench_" + run;
    String container = DockerRuntime.containerName(rental);
    Path root = Files.createTempDirectory("tickmark-relay-bench");
    System.out.printf(
        Locale.ROOT,
        "== DockerRelayBenchmark: %d rounds, %d cores, socat %s through %s ==%n",
        rounds,
        java.lang.Runtime.getRuntime().availableProcessors(),
        socat.socat(),
        socat.loader());
    try (java.net.ServerSocket hostServer =
        new java.net.ServerSocket(0, 50, java.net.InetAddress.getLoopbackAddress())) {
      Thread server = new Thread(() -> serve(hostServer), "host-server");
      server.setDaemon(true);
      server.start();
      importImage(root, image);
      check(
          docker(
              "run",
              "--detach",
              "--name",
              container,
              "--network",
              "none",
              image,
              "sh",
              "-c",
              "while true; do echo inside | nc -l -p " + PORT + "; done"));
      // one of each first, not measured: the JIT, the page cache, the daemon's first look
      relay(socat, rental, image);
      exec(container);
      hostSocat(socat, hostServer.getLocalPort());
      List<Double> relays = new ArrayList<>();
      List<Double> execs = new ArrayList<>();
      List<Double> plain = new ArrayList<>();
      for (int i = 0; i < rounds; i++) { // alternated, so drift on a shared machine hits all three
        relays.add(relay(socat, rental, image));
        execs.add(exec(container));
        plain.add(hostSocat(socat, hostServer.getLocalPort()));
      }
      double relay = p50(relays);
      double exec = p50(execs);
      double host = p50(plain);
      System.out.printf(
          Locale.ROOT,
          "%n| measure | p50 | max |%n|---|---:|---:|%n"
              + "| a forwarded connection through the helper, start to first line | %.0f ms | %.0f ms |%n"
              + "| `docker exec <container> true` | %.0f ms | %.0f ms |%n"
              + "| the host's socat to a server on the host's loopback | %.1f ms | %.1f ms |%n%n"
              + "helper / docker exec = %.2f; helper / plain socat = %.0f%n",
          relay,
          Collections.max(relays),
          exec,
          Collections.max(execs),
          host,
          Collections.max(plain),
          relay / exec,
          relay / host);
    } finally {
      docker("rm", "--force", container);
      docker("rmi", "--force", image);
      RentalDirs.delete(root);
    }
  }

  /** Start of the helper to the first line it passes back, in ms; it must be "inside". */
  private static double relay(HostSocat socat, String rental, String image) throws Exception {
    return exchange(
        DockerRuntime.relayInvocation("docker", socat, rental, image, false, PORT), "inside");
  }

  private static double hostSocat(HostSocat socat, int port) throws Exception {
    return exchange(List.of(socat.socat().toString(), "-", "TCP4:127.0.0.1:" + port), "host");
  }

  private static double exchange(List<String> command, String expected) throws Exception {
    long start = System.nanoTime();
    Process p = new ProcessBuilder(command).redirectError(ProcessBuilder.Redirect.DISCARD).start();
    OutputStream out = p.getOutputStream();
    out.write("hello\n".getBytes(StandardCharsets.UTF_8));
    out.flush();
    String line =
        new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))
            .readLine();
    double ms = (System.nanoTime() - start) / 1e6;
    out.close();
    if (!p.waitFor(30, TimeUnit.SECONDS)) p.destroyForcibly();
    if (!expected.equals(line))
      throw new IllegalStateException(command.get(0) + " answered " + line + ", not " + expected);
    return ms;
  }

  private static double exec(String container) throws Exception {
    long start = System.nanoTime();
    check(docker("exec", container, "true"));
    return (System.nanoTime() - start) / 1e6;
  }

  /** Answers every connection with "host" (the baseline's server). */
  private static void serve(java.net.ServerSocket server) {
    while (!server.isClosed()) {
      try (java.net.Socket s = server.accept()) {
        s.getOutputStream().write("host\n".getBytes(StandardCharsets.UTF_8));
        s.getOutputStream().flush();
      } catch (IOException e) {
        return;
      }
    }
  }

  /** An image of Debian's static busybox only, made offline (no registry is needed). */
  private static void importImage(Path root, String tag) throws Exception {
    Path fs = Files.createDirectories(root.resolve("rootfs/bin"));
    Files.copy(Path.of("/bin/busybox"), fs.resolve("busybox"));
    for (String applet : List.of("sh", "nc", "true", "echo"))
      Files.createSymbolicLink(fs.resolve(applet), Path.of("busybox"));
    Path tar = root.resolve("rootfs.tar");
    Process t =
        new ProcessBuilder(
                "tar", "-C", root.resolve("rootfs").toString(), "-cf", tar.toString(), ".")
            .inheritIO()
            .start();
    if (t.waitFor() != 0) throw new IllegalStateException("tar failed");
    check(docker("import", tar.toString(), tag));
  }

  private static int docker(String... args) throws Exception {
    List<String> argv = new ArrayList<>(List.of("docker"));
    argv.addAll(List.of(args));
    Process p =
        new ProcessBuilder(argv)
            .redirectOutput(ProcessBuilder.Redirect.DISCARD)
            .redirectError(ProcessBuilder.Redirect.DISCARD)
            .start();
    return p.waitFor();
  }

  private static void check(int status) {
    if (status != 0) throw new IllegalStateException("docker exited " + status);
  }

  private static double p50(List<Double> values) {
    List<Double> sorted = new ArrayList<>(values);
    Collections.sort(sorted);
    return sorted.get(sorted.size() / 2);
  }
}
