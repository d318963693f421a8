package dev.tickmark.agent;

import java.io.IOException;
import java.io.InputStream;
import java.net.Inet4Address;
import java.net.InetAddress;
import java.net.NetworkInterface;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/**
 * What a sandboxed rental's network costs: the start of a sandbox with its slirp4netns route out
 * against one without (a workload that runs {@code true}: start to end, teardown included), and a
 * TCP upload from the workload to a server on the host's own address through slirp4netns against
 * the same upload from a plain process on the host, in the same run. Run as the agent would (root:
 * sandboxes as {@code nobody}); needs bubblewrap and slirp4netns.
 *
 * <p>It sits in the agent's package because the runtime it measures is the agent's own,
 * package-private {@link SandboxRuntime}.
 *
 * <pre>
 *   mvn -B -q -o -DskipTests package
 *   source bench/third-party-classpath.sh
 *   java -cp "bench/target/classes:cluster-config/target/tickmark-node.jar:$third_party_cp" \
 *     dev.tickmark.agent.SandboxNetworkBenchmark [--rounds=20] [--megabytes=256] [--uploads=3]
 * </pre>
 */
public final class SandboxNetworkBenchmark {
  private SandboxNetworkBenchmark() {}

  public static void main(String[] args) throws Exception {
    int rounds = 20;
    int megabytes = 256;
    int uploads = 3;
    for (String a : args) {
      if (a.startsWith("--rounds=")) rounds = Integer.parseInt(a.substring(9));
      else if (a.startsWith("--megabytes=")) megabytes = Integer.parseInt(a.substring(12));
      else if (a.startsWith("--uploads=")) uploads = Integer.parseInt(a.substring(10));
      else {
        System.err.println(
            "usage: SandboxNetworkBenchmark [--rounds=N] [--megabytes=M] [--uploads=K]");
        System.exit(2);
      }
    }
    Sandbox.Tools tools = Sandbox.Tools.find();
    String problem = Sandbox.probe(tools);
    if (problem != null || tools.slirp4netns() == null) {
      System.err.println(
          "needs a working bubblewrap and slirp4netns: "
              + (problem != null ? problem : "slirp4netns is not installed"));
      System.exit(2);
    }
    InetAddress host = nonLoopbackAddress();
    Path state = Files.createTempDirectory("tickmark-sandbox-net-bench");
    System.out.printf(
        Locale.ROOT,
        "== SandboxNetworkBenchmark: %d rounds, uploads of %d MiB to %s, %d cores ==%n",
        rounds,
        megabytes,
        host.getHostAddress(),
        java.lang.Runtime.getRuntime().availableProcessors());
    try (SandboxRuntime rt = new SandboxRuntime(state, Duration.ofSeconds(2))) {
      // one of each first, not measured: the JIT and the page cache
      startToEnd(rt, "warm-a", false);
      startToEnd(rt, "warm-b", true);
      List<Double> plain = new ArrayList<>();
      List<Double> networked = new ArrayList<>();
      for (int i = 0; i < rounds; i++) { // alternated, so drift on a shared machine hits both
        plain.add(startToEnd(rt, "plain-" + i, false));
        networked.add(startToEnd(rt, "net-" + i, true));
      }
      double p50Plain = quantile(plain, 0.5);
      double p50Net = quantile(networked, 0.5);
      System.out.printf(
          Locale.ROOT,
          "sandbox start to end (true): without network p50 %.1f ms, p90 %.1f ms;"
              + " with network p50 %.1f ms, p90 %.1f ms; ratio of p50s %.2f%n",
          p50Plain,
          quantile(plain, 0.9),
          p50Net,
          quantile(networked, 0.9),
          p50Net / p50Plain);

      double bestHost = 0;
      double bestSandbox = 0;
      long bytes = (long) megabytes << 20;
      for (int i = 0; i < uploads; i++) {
        bestHost = Math.max(bestHost, upload(host, bytes, port -> hostUpload(host, port, bytes)));
        int n = i;
        bestSandbox =
            Math.max(
                bestSandbox,
                upload(host, bytes, port -> sandboxUpload(rt, "up-" + n, host, port, bytes)));
      }
      System.out.printf(
          Locale.ROOT,
          "TCP upload to the host's own address (best of %d): from a host process %.0f MiB/s,"
              + " from a sandbox through slirp4netns %.0f MiB/s; ratio %.2f%n",
          uploads,
          bestHost,
          bestSandbox,
          bestSandbox / bestHost);
    } finally {
      RentalDirs.delete(state);
    }
  }

  /** Milliseconds from asking for a sandbox running {@code true} until it has ended. */
  private static double startToEnd(SandboxRuntime rt, String id, boolean network) throws Exception {
    long t0 = System.nanoTime();
    Runtime.Handle h =
        rt.start(new Runtime.Spec(id, List.of(0), null, List.of("true"), network))
            .get(30, TimeUnit.SECONDS);
    h.ended().get(30, TimeUnit.SECONDS);
    return (System.nanoTime() - t0) / 1e6;
  }

  private interface Sender {
    void send(int port) throws Exception;
  }

  /**
   * MiB/s of one upload of {@code bytes} to a server on {@code host}: from its first byte to its
   * last.
   */
  private static double upload(InetAddress host, long bytes, Sender sender) throws Exception {
    try (ServerSocket server = new ServerSocket(0, 5, host)) {
      CompletableFuture<Double> received =
          CompletableFuture.supplyAsync(
              () -> {
                try (Socket s = server.accept();
                    InputStream in = s.getInputStream()) {
                  byte[] buf = new byte[1 << 20];
                  long got = 0;
                  long first = 0;
                  int n;
                  while ((n = in.read(buf)) > 0) {
                    if (got == 0) first = System.nanoTime();
                    got += n;
                  }
                  if (got != bytes)
                    throw new IllegalStateException("received " + got + " of " + bytes);
                  return (got / 1048576.0) / ((System.nanoTime() - first) / 1e9);
                } catch (IOException e) {
                  throw new IllegalStateException(e);
                }
              });
      sender.send(server.getLocalPort());
      return received.get(120, TimeUnit.SECONDS);
    }
  }

  private static String script(InetAddress host, int port, long bytes) {
    return "head -c " + bytes + " /dev/zero > /dev/tcp/" + host.getHostAddress() + "/" + port;
  }

  private static void hostUpload(InetAddress host, int port, long bytes) throws Exception {
    Process p = new ProcessBuilder("bash", "-c", script(host, port, bytes)).inheritIO().start();
    if (!p.waitFor(120, TimeUnit.SECONDS) || p.exitValue() != 0)
      throw new IllegalStateException("the host's upload failed");
  }

  private static void sandboxUpload(
      SandboxRuntime rt, String id, InetAddress host, int port, long bytes) throws Exception {
    Runtime.Handle h =
        rt.start(
                new Runtime.Spec(
                    id, List.of(0), null, List.of("bash", "-c", script(host, port, bytes)), true))
            .get(30, TimeUnit.SECONDS);
    h.ended().get(120, TimeUnit.SECONDS);
    if (!Integer.valueOf(0).equals(h.exitCode()))
      throw new IllegalStateException("the sandbox's upload failed: status " + h.exitCode());
  }

  private static double quantile(List<Double> values, double q) {
    List<Double> sorted = new ArrayList<>(values);
    Collections.sort(sorted);
    return sorted.get((int) Math.min(sorted.size() - 1, Math.floor(q * sorted.size())));
  }

  private static InetAddress nonLoopbackAddress() throws IOException {
    for (NetworkInterface nic : Collections.list(NetworkInterface.getNetworkInterfaces())) {
      if (!nic.isUp() || nic.isLoopback()) continue;
      for (InetAddress a : Collections.list(nic.getInetAddresses()))
        if (a instanceof Inet4Address) return a;
    }
    throw new IllegalStateException("no IPv4 address but loopback to upload to");
  }
}
