package dev.tickmark.bench;

import dev.tickmark.agent.Agent;
import dev.tickmark.bench.MarketBenchSupport.Args;
import dev.tickmark.bench.MarketBenchSupport.BenchDatabase;
import dev.tickmark.bench.MarketBenchSupport.DbConfig;
import dev.tickmark.bench.SshBenchSupport.Ran;
import java.io.OutputStream;
import java.io.PrintStream;
import java.net.InetSocketAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Random;

/**
 * SSH relay throughput: {@code scp} of {@code --mib} MiB up to a rental and back down, with the
 * machine's OpenSSH client and the real agent's SSH server (process runtime, in this JVM), over
 * loopback, three ways in the same run:
 *
 * <ul>
 *   <li><b>direct</b> (the baseline): ssh's ProxyCommand is {@code socat} straight to the agent's
 *       loopback SSH port, from a local port registered as the rental's, as the agent's own stream
 *       connects. The same ssh, scp, SSH server and disk; no engine, no websocket, no JVM proxy.
 *   <li><b>relay, one node</b>: ProxyCommand {@code tickmark connect} (a CLI JVM) to the node the
 *       agent is connected to: CLI websocket → node → stream refs on that node → agent websocket →
 *       agent → SSH server.
 *   <li><b>relay, two nodes</b> (with {@code --nodes=2}, the default): {@code tickmark connect} to
 *       the other node: the bytes cross between the nodes in Pekko stream refs over Artery.
 * </ul>
 *
 * The nodes are separate processes ({@code dev.tickmark.node.Main}, as {@link FailoverBenchmark}
 * starts them) on one fresh PostgreSQL database. Prints MB/s (10^6 bytes a second) of each copy,
 * relay ÷ direct, and the CPU seconds the nodes, this JVM (the agent) and the whole machine spent
 * on it.
 */
public final class RelayBenchmark {
  static {
    dev.tickmark.node.CommonPool.ensureParallelism();
  }

  private static final PrintStream OUT = System.out;
  private static final String OPERATOR = FailoverBenchmark.OPERATOR;

  static final String USAGE =
      """
      Usage: RelayBenchmark [--option=value ...]
        --mib=N           size of the file copied up and down (default 256; the issue's figure: 1024)
        --runs=N          copies of each kind, interleaved (default 1)
        --nodes=1|2       node processes (default 2: the renter's connect on node 1, the agent on node 2)
        --bridge          also relay through an in-JVM `tickmark connect` (no CLI JVM), to split the CLI's cost
        --node-heap=SIZE  -Xmx of each node (default 768m)
        --node-opts="-D..." extra JVM options for the nodes
        --db-url=URL --db-user=U --db-password=P --keep-database
      """;

  private RelayBenchmark() {}

  record Path3(String name, String proxy, boolean bridge) {}

  public static void main(String[] argv) throws Exception {
    MarketBenchSupport.quietLogs();
    Args args = new Args(argv);
    if (args.flag("help")) {
      OUT.print(USAGE);
      return;
    }
    int mib = args.integer("mib", 256);
    int runs = args.integer("runs", 1);
    int nodes = Math.max(1, Math.min(2, args.integer("nodes", 2)));
    boolean withBridge = args.flag("bridge");
    String heap = args.string("node-heap", "768m");
    String nodeOpts =
        "-Dtickmark.verification.min-disk-write-mib-per-s=10 " + args.string("node-opts", "");
    DbConfig dbConfig = DbConfig.of(args);
    args.requireEmpty();

    OUT.println("machine: " + MarketBenchSupport.machine());
    Path temp = Files.createTempDirectory("tickmark-relay-bench");
    Path logs = Path.of("target/relay-bench");
    FailoverBenchmark.Http http = new FailoverBenchmark.Http();
    List<Agent> agents = new ArrayList<>();
    try (BenchDatabase db = BenchDatabase.create(dbConfig, "tickmark_relay");
        FailoverBenchmark.Cluster cluster =
            new FailoverBenchmark.Cluster(db, nodes, heap, nodeOpts, logs);
        SshBenchSupport.Bridge bridge = new SshBenchSupport.Bridge()) {
      Runtime.getRuntime()
          .addShutdownHook(
              new Thread(
                  () -> {
                    for (Process p : cluster.processes) if (p != null) p.destroyForcibly();
                  }));
      long t0 = System.nanoTime();
      cluster.startAll();
      OUT.printf(Locale.ROOT, "%d node(s) up in %.1f s%n", nodes, secondsSince(t0));
      int agentNode = nodes; // the agent on the last node, the renter's far connect on node 1
      String agentUrl = cluster.url(agentNode);
      String providerKey =
          http.post(agentUrl + "/v1/accounts", null, "{\"name\":\"relay provider\"}", 201)
              .get("api_key")
              .asText();
      Agent agent =
          SshBenchSupport.listedAgent(
              http, agentUrl, cluster.ws(agentNode), providerKey, "h100-80gb:2", temp.resolve("a"));
      agents.add(agent);
      String renterKey = SshBenchSupport.renter(http, agentUrl, OPERATOR, "relay renter");
      Path key = SshBenchSupport.keygen(temp, "renter");
      String rental =
          SshBenchSupport.launch(
                  http,
                  agentUrl,
                  renterKey,
                  Files.readString(Path.of(key + ".pub")).strip(),
                  "relay-1")
              .get();
      String hostKey = SshBenchSupport.awaitRunning(http, agentUrl, renterKey, rental, 120);
      Path knownHosts = temp.resolve("known_hosts");
      SshBenchSupport.writeKnownHosts(knownHosts, Map.of(rental, hostKey));
      InetSocketAddress sshd = SshBenchSupport.sshAddress(agent);
      OUT.printf(
          Locale.ROOT,
          "rental %s running; agent on node%d, its SSH server on %s%n",
          rental,
          agentNode,
          sshd);

      Path file = temp.resolve("up.bin");
      writeFile(file, mib);
      long bytes = Files.size(file);
      Path local = temp.resolve("local-copy.bin");
      long c0 = System.nanoTime();
      Ran cp = SshBenchSupport.run(List.of("cp", file.toString(), local.toString()), Map.of(), 600);
      double cpSeconds = (System.nanoTime() - c0) / 1e9;
      Files.deleteIfExists(local);
      OUT.printf(
          Locale.ROOT,
          "file: %d MiB of random bytes; local cp (page cache to disk) %.0f MB/s%s%n",
          mib,
          bytes / 1e6 / cpSeconds,
          cp.exit() == 0 ? "" : " (cp failed: " + cp.out() + ")");

      List<Path3> ways = new ArrayList<>();
      ways.add(new Path3("direct (socat to the SSH server)", null, false));
      ways.add(
          new Path3(
              "relay, one node (tickmark connect to node" + agentNode + ")",
              SshBenchSupport.cliProxy(rental),
              false));
      if (nodes == 2)
        ways.add(
            new Path3(
                "relay, two nodes (tickmark connect to node1, agent on node2)",
                SshBenchSupport.cliProxy(rental),
                false));
      if (withBridge)
        ways.add(new Path3("relay, one node, in-JVM connect (no CLI JVM)", null, true));

      // what the nodes spend with nothing to relay (gossip, projections polling), to read the
      // copies' CPU against
      double[] i0 = nodeCpu(cluster);
      Thread.sleep(10_000);
      double[] i1 = nodeCpu(cluster);
      double idlePerSecond = 0;
      for (int i = 0; i < i0.length; i++) idlePerSecond += (i1[i] - i0[i]) / 10.0;
      OUT.printf(Locale.ROOT, "nodes idle: %.2f cores together%n", idlePerSecond);

      Map<String, List<double[]>> results = new LinkedHashMap<>();
      for (int run = 1; run <= runs; run++) {
        for (int w = 0; w < ways.size(); w++) {
          Path3 way = ways.get(w);
          String url = w == 2 ? cluster.url(1) : agentUrl;
          for (String direction : List.of("up", "down")) {
            String proxy = way.proxy();
            List<String> command = new ArrayList<>(List.of("scp", "-q"));
            String host = "tickmark@" + rental;
            if (way.bridge()) {
              int port = bridge.open(cluster.ws(agentNode), rental, renterKey);
              command.addAll(List.of("-P", Integer.toString(port)));
              host = "tickmark@127.0.0.1";
            } else if (proxy == null) {
              int source = SshBenchSupport.freePort();
              SshBenchSupport.bindPort(agent, source, rental);
              proxy = SshBenchSupport.directProxy(sshd, source);
            }
            command.addAll(SshBenchSupport.options(proxy, rental, knownHosts, key));
            Path down = temp.resolve("down.bin");
            Files.deleteIfExists(down);
            if (direction.equals("up")) {
              command.add(file.toString());
              command.add(host + ":bench.bin");
            } else {
              command.add(host + ":bench.bin");
              command.add(down.toString());
            }
            CpuSample m0 = CpuSample.take(db.name);
            double[] n0 = nodeCpu(cluster);
            Ran ran =
                SshBenchSupport.run(command, SshBenchSupport.renterEnv(url, renterKey, temp), 3600);
            double[] n1 = nodeCpu(cluster);
            CpuSample.Usage u = m0.until(CpuSample.take(db.name));
            if (ran.exit() != 0)
              throw new IllegalStateException(way.name() + " " + direction + " failed: " + ran);
            if (direction.equals("down") && Files.size(down) != bytes)
              throw new IllegalStateException("the copy down has " + Files.size(down) + " bytes");
            double mbps = bytes / 1e6 / ran.seconds();
            double nodeSeconds = 0;
            StringBuilder perNode = new StringBuilder();
            for (int i = 0; i < n0.length; i++) {
              nodeSeconds += n1[i] - n0[i];
              perNode.append(String.format(Locale.ROOT, " node%d %.1f s", i + 1, n1[i] - n0[i]));
            }
            OUT.printf(
                Locale.ROOT,
                "run %d %-5s %-62s %6.1f MB/s  %5.1f s  CPU:%s, this JVM (agent) %.1f s,"
                    + " machine %.2f cores (other than nodes and this JVM: %.2f)%n",
                run,
                direction,
                way.name(),
                mbps,
                ran.seconds(),
                perNode,
                u.jvmSeconds(),
                u.machineCores(),
                Math.max(0, u.machineCores() - (nodeSeconds + u.jvmSeconds()) / ran.seconds()));
            results
                .computeIfAbsent(way.name() + " " + direction, k -> new ArrayList<>())
                .add(
                    new double[] {
                      mbps,
                      nodeSeconds - idlePerSecond * ran.seconds(),
                      u.jvmSeconds(),
                      u.machineCores()
                    });
          }
        }
      }
      for (Agent a : agents) a.close();
      agents.clear();
      Path down = temp.resolve("down.bin");
      if (!java.util.Arrays.equals(digest(file), digest(down)))
        throw new IllegalStateException("the last copy down differs from the file sent up");

      OUT.println();
      OUT.printf(
          Locale.ROOT,
          "SUMMARY %d MiB, %d run(s); MB/s (median), relay / direct in the same direction,"
              + " CPU seconds per copy (nodes above their idle, this JVM = agent)%n",
          mib,
          runs);
      for (String direction : List.of("up", "down")) {
        double direct = median(results.get(ways.get(0).name() + " " + direction), 0);
        for (Path3 way : ways) {
          List<double[]> r = results.get(way.name() + " " + direction);
          double mbps = median(r, 0);
          OUT.printf(
              Locale.ROOT,
              "  %-5s %-62s %6.1f MB/s  ratio %.2f  nodes %.1f s  agent JVM %.1f s  machine %.2f"
                  + " cores%n",
              direction,
              way.name(),
              mbps,
              mbps / direct,
              median(r, 1),
              median(r, 2),
              median(r, 3));
          if (way != ways.get(0))
            BenchResult.against(
                    "relay",
                    "relay."
                        + (way.bridge()
                            ? "bridge"
                            : way.name().contains("two") ? "two-nodes" : "one-node")
                        + "."
                        + direction,
                    "scp " + direction + ", " + way.name() + " ÷ direct",
                    mbps,
                    "MB/s",
                    direct,
                    "direct (socat) MB/s")
                .withNote(String.format(Locale.ROOT, "%d MiB, %d run(s)", mib, runs))
                .print(OUT);
        }
      }
    } finally {
      for (Agent a : agents) a.close();
    }
  }

  static double[] nodeCpu(FailoverBenchmark.Cluster cluster) {
    double[] s = new double[cluster.processes.length];
    for (int i = 0; i < s.length; i++)
      s[i] = MarketBenchSupport.processCpuSeconds(cluster.processes[i].pid());
    return s;
  }

  static double median(List<double[]> values, int column) {
    double[] v = values.stream().mapToDouble(a -> a[column]).sorted().toArray();
    return v.length % 2 == 1 ? v[v.length / 2] : (v[v.length / 2 - 1] + v[v.length / 2]) / 2;
  }

  /** {@code mib} MiB: one random MiB repeated (ssh does not compress by default). */
  static void writeFile(Path file, int mib) throws Exception {
    byte[] block = new byte[1024 * 1024];
    new Random(11).nextBytes(block);
    try (OutputStream out = Files.newOutputStream(file)) {
      for (int i = 0; i < mib; i++) {
        block[0] = (byte) i; // no two MiB alike
        out.write(block);
      }
    }
  }

  static byte[] digest(Path file) throws Exception {
    java.security.MessageDigest md = java.security.MessageDigest.getInstance("SHA-256");
    try (var in = Files.newInputStream(file)) {
      byte[] buf = new byte[1 << 20];
      for (int n; (n = in.read(buf)) > 0; ) md.update(buf, 0, n);
    }
    return md.digest();
  }

  static double secondsSince(long nanos) {
    return (System.nanoTime() - nanos) / 1e9;
  }
}
