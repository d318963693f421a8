package dev.tickmark.node;

import java.io.File;
import java.io.IOException;
import java.net.InetAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Assertions;
import org.junit.jupiter.api.Assumptions;

/**
 * A small network of the test's own: one Linux bridge in the root namespace holding the gateway
 * address {@code 10.213.S.1/24}, and per member a network namespace joined to the bridge by a veth
 * pair, with the address {@code 10.213.S.(10+i)} on its {@code eth0}. Nothing else is routed: the
 * members reach each other over the bridge, and the root namespace (the test, its agents, a
 * database forwarder) at the gateway address. {@link #isolate} cuts one member off from the others
 * with an nftables table in its namespace (every packet to or from their addresses dropped, as in a
 * real partition: no reset, no error), while it keeps the gateway; {@link #heal} removes the table.
 *
 * <p>Names carry the prefix {@value #PREFIX} and this JVM's pid, so that a later run knows a
 * crashed run's leftovers ({@link #removeStale}: namespaces and bridges whose pid is gone, after
 * killing the processes still in those namespaces). {@link #close} removes everything, and a
 * shutdown hook does it if the JVM exits first.
 *
 * <p>Needs root, {@code ip} (iproute2) and {@code nft}: {@link #assumeAvailable} skips the test
 * saying which is missing, or fails it where {@code TICKMARK_TESTS_REQUIRE} names {@code netns}
 * (CI).
 */
final class NetworkNamespaces implements AutoCloseable {
  static final String PREFIX = "tkpn";
  private static final Pattern OURS = Pattern.compile(PREFIX + "(\\d+)(?:-\\d+|b)");
  private static final String PARTITION_TABLE = "tickmark_partition";
  private static final String IP = tool("ip");
  private static final String NFT = tool("nft");

  private final long pid = ProcessHandle.current().pid();
  private final int subnet;
  private final int size;
  private final List<String> namespaces = new ArrayList<>();
  private final Set<Integer> isolated = new HashSet<>();
  private final Thread cleanupAtExit = new Thread(this::removeAll, "remove-network-namespaces");
  private boolean bridgeMade;

  private NetworkNamespaces(int size, int subnet) {
    this.size = size;
    this.subnet = subnet;
  }

  /**
   * Skips the calling test, saying why, unless namespaces can be made here; fails it instead where
   * {@code TICKMARK_TESTS_REQUIRE} names {@code netns}.
   */
  static void assumeAvailable() {
    String missing = missing();
    String why =
        missing
            + ": the network partition test is skipped (it needs root, iproute2's ip with netns"
            + " support and nftables' nft; CI runs as root and installs iproute2 and nftables)";
    if (System.getenv().getOrDefault("TICKMARK_TESTS_REQUIRE", "").contains("netns"))
      Assertions.assertNull(missing, why);
    Assumptions.assumeTrue(missing == null, why);
  }

  /** Null when namespaces, veth pairs, a bridge and nftables work here, else what does not. */
  static String missing() {
    if (!System.getProperty("os.name", "").toLowerCase().contains("linux")) return "not Linux";
    if (!isRoot()) return "not root";
    if (IP == null) return "no ip command";
    if (NFT == null) return "no nft command";
    String probe = PREFIX + ProcessHandle.current().pid() + "-0";
    Result add = run(IP, "netns", "add", probe);
    if (add.code() != 0) return "ip netns add failed (" + add.output().strip() + ")";
    try {
      Result nft = run(IP, "netns", "exec", probe, NFT, "list", "tables");
      if (nft.code() != 0) return "nft does not run in a namespace (" + nft.output().strip() + ")";
      return null;
    } finally {
      run(IP, "netns", "delete", probe);
    }
  }

  /** Makes the bridge and {@code size} member namespaces, removing stale ones first. */
  static NetworkNamespaces create(int size) {
    removeStale();
    NetworkNamespaces net = new NetworkNamespaces(size, freeSubnet());
    Runtime.getRuntime().addShutdownHook(net.cleanupAtExit);
    try {
      net.build();
    } catch (RuntimeException | Error e) {
      net.close();
      throw e;
    }
    return net;
  }

  private void build() {
    String bridge = bridgeName();
    must(IP, "link", "add", bridge, "type", "bridge");
    bridgeMade = true;
    must(IP, "addr", "add", gateway() + "/24", "dev", bridge);
    must(IP, "link", "set", bridge, "up");
    for (int i = 1; i <= size; i++) {
      String ns = namespace(i);
      must(IP, "netns", "add", ns);
      namespaces.add(ns);
      String outside = PREFIX + pid + "h" + i;
      must(IP, "link", "add", outside, "type", "veth", "peer", "name", "eth0", "netns", ns);
      must(IP, "link", "set", outside, "master", bridge);
      must(IP, "link", "set", outside, "up");
      must(IP, "netns", "exec", ns, IP, "link", "set", "lo", "up");
      must(IP, "netns", "exec", ns, IP, "addr", "add", address(i) + "/24", "dev", "eth0");
      must(IP, "netns", "exec", ns, IP, "link", "set", "eth0", "up");
    }
  }

  /** The namespace of member {@code i} (1-based). */
  String namespace(int i) {
    return PREFIX + pid + "-" + i;
  }

  private String bridgeName() {
    return PREFIX + pid + "b";
  }

  /** Member {@code i}'s address. */
  String address(int i) {
    return "10.213." + subnet + "." + (10 + i);
  }

  /** The bridge's address in the root namespace: where the members reach the test. */
  String gateway() {
    return "10.213." + subnet + ".1";
  }

  InetAddress gatewayAddress() {
    try {
      return InetAddress.getByName(gateway());
    } catch (IOException e) {
      throw new IllegalStateException(e);
    }
  }

  /** The command prefix that runs a program in member {@code i}'s namespace. */
  List<String> inNamespace(int i) {
    return List.of(IP, "netns", "exec", namespace(i));
  }

  /**
   * Cuts member {@code i} off from every other member: its namespace drops each packet to or from
   * their addresses, both ways. The gateway stays reachable.
   */
  void isolate(int i) {
    StringBuilder peers = new StringBuilder();
    for (int j = 1; j <= size; j++) {
      if (j == i) continue;
      if (peers.length() > 0) peers.append(", ");
      peers.append(address(j));
    }
    String rules =
        "table inet "
            + PARTITION_TABLE
            + " {\n"
            + "  chain in { type filter hook input priority 0; policy accept; ip saddr { "
            + peers
            + " } drop; }\n"
            + "  chain out { type filter hook output priority 0; policy accept; ip daddr { "
            + peers
            + " } drop; }\n"
            + "}\n";
    Path file;
    try {
      file = Files.createTempFile("tickmark-partition", ".nft");
      Files.writeString(file, rules);
    } catch (IOException e) {
      throw new IllegalStateException(e);
    }
    try {
      must(IP, "netns", "exec", namespace(i), NFT, "-f", file.toString());
      isolated.add(i);
    } finally {
      file.toFile().delete();
    }
  }

  /** Lets member {@code i} reach the others again. */
  void heal(int i) {
    must(IP, "netns", "exec", namespace(i), NFT, "delete", "table", "inet", PARTITION_TABLE);
    isolated.remove(i);
  }

  /** What nftables holds in member {@code i}'s namespace, for diagnostics. */
  String rules(int i) {
    return run(IP, "netns", "exec", namespace(i), NFT, "list", "ruleset").output();
  }

  @Override
  public void close() {
    removeAll();
    try {
      Runtime.getRuntime().removeShutdownHook(cleanupAtExit);
    } catch (IllegalStateException exiting) {
      // the hook is running or about to: it does the same
    }
  }

  private synchronized void removeAll() {
    for (String ns : namespaces) removeNamespace(ns);
    namespaces.clear();
    if (bridgeMade) run(IP, "link", "delete", bridgeName());
    bridgeMade = false;
  }

  /**
   * Removes the namespaces and bridges an earlier run left (its JVM is gone), killing the processes
   * still inside those namespaces first: they are that run's nodes.
   */
  static void removeStale() {
    for (String line : run(IP, "netns", "list").output().split("\n")) {
      String ns = line.split(" ")[0].strip();
      if (isStale(ns)) removeNamespace(ns);
    }
    for (String line : run(IP, "-o", "link", "show", "type", "bridge").output().split("\n")) {
      String[] parts = line.split(":\\s+");
      if (parts.length < 2) continue;
      String name = parts[1].split("@")[0].strip();
      if (isStale(name)) run(IP, "link", "delete", name);
    }
  }

  private static boolean isStale(String name) {
    Matcher m = OURS.matcher(name);
    if (!m.matches()) return false;
    long owner = Long.parseLong(m.group(1));
    return owner != ProcessHandle.current().pid() && ProcessHandle.of(owner).isEmpty();
  }

  private static void removeNamespace(String ns) {
    for (String p : run(IP, "netns", "pids", ns).output().split("\\s+")) {
      if (p.isBlank()) continue;
      ProcessHandle.of(Long.parseLong(p.strip())).ifPresent(ProcessHandle::destroyForcibly);
    }
    run(IP, "netns", "delete", ns);
  }

  /** A /24 in 10.213.0.0/16 that no route of this machine uses yet (another run's bridge, say). */
  private static int freeSubnet() {
    String routes = run(IP, "-4", "route", "show").output();
    long start = ProcessHandle.current().pid() % 200;
    for (int k = 0; k < 250; k++) {
      int s = (int) ((start + k) % 250) + 1;
      if (!routes.contains("10.213." + s + ".")) return s;
    }
    throw new IllegalStateException("no free /24 in 10.213.0.0/16:\n" + routes);
  }

  private static boolean isRoot() {
    try {
      for (String line : Files.readAllLines(Path.of("/proc/self/status"))) {
        if (line.startsWith("Uid:")) return line.split("\\s+")[2].equals("0"); // effective uid
      }
    } catch (IOException e) {
      return false;
    }
    return false;
  }

  /**
   * The command's absolute path (PATH, then the sbin folders a non-login PATH may lack), or null.
   */
  private static String tool(String command) {
    List<String> dirs =
        new ArrayList<>(
            List.of(System.getenv().getOrDefault("PATH", "").split(File.pathSeparator)));
    dirs.addAll(List.of("/usr/sbin", "/sbin", "/usr/bin", "/bin"));
    for (String dir : dirs) {
      if (dir.isBlank()) continue;
      Path p = Path.of(dir, command);
      if (Files.isExecutable(p)) return p.toString();
    }
    return null;
  }

  record Result(int code, String output) {}

  private static void must(String... command) {
    Result r = run(command);
    if (r.code() != 0)
      throw new IllegalStateException(
          String.join(" ", command) + " failed (" + r.code() + "): " + r.output().strip());
  }

  static Result run(String... command) {
    try {
      Process p =
          new ProcessBuilder(command)
              .redirectErrorStream(true)
              .redirectInput(ProcessBuilder.Redirect.from(new File("/dev/null")))
              .start();
      String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
      if (!p.waitFor(30, TimeUnit.SECONDS)) {
        p.destroyForcibly();
        return new Result(124, "timed out: " + out);
      }
      return new Result(p.exitValue(), out);
    } catch (IOException e) {
      return new Result(127, e.getMessage());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return new Result(130, "interrupted");
    }
  }
}
