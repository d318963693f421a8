package dev.tickmark.bench;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import dev.tickmark.node.ClusterTls;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.apache.pekko.actor.AbstractActor;
import org.apache.pekko.actor.ActorRef;
import org.apache.pekko.actor.ActorSystem;
import org.apache.pekko.actor.BootstrapSetup;
import org.apache.pekko.actor.ExtendedActorSystem;
import org.apache.pekko.actor.Props;
import org.apache.pekko.actor.setup.ActorSystemSetup;
import org.apache.pekko.pattern.Patterns;
import org.apache.pekko.remote.artery.tcp.SSLEngineProviderSetup;

/**
 * What mutual TLS between the nodes ({@code TICKMARK_CLUSTER_TLS_*}, {@link ClusterTls}) costs
 * remoting: two actor systems in this JVM on loopback, plain Artery TCP against {@code tls-tcp}
 * with the node's own engine provider, alternated in the same run. Per mode: the round trip of one
 * message at a time (what a launch's asks between nodes wait), and the messages per second with a
 * window in flight (what settlements and ticks between nodes need). The certificates are made with
 * the runbook's openssl recipe ("TLS between the nodes"), so the run also checks that recipe.
 *
 * <pre>
 *   mvn -B -q -o -DskipTests package
 *   source bench/third-party-classpath.sh
 *   java -cp "bench/target/classes:cluster-config/target/tickmark-node.jar:$third_party_cp" \
 *     dev.tickmark.bench.RemotingTlsBenchmark [--rounds=3] [--pings=3000] [--messages=100000] \
 *     [--window=200] [--bytes=256]
 * </pre>
 */
public final class RemotingTlsBenchmark {
  private RemotingTlsBenchmark() {}

  /** The runbook's recipe (docs/runbook.md, "TLS between the nodes"), in {@code dir}. */
  static final String RECIPE =
      """
      set -e
      openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 3650 \\
        -subj "/CN=Tickmark cluster CA" -keyout ca.key -out ca.crt \\
        -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign
      openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \\
        -subj "/CN=tickmark-cluster" -keyout node.key -out node.csr
      openssl x509 -req -in node.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 365 -out node.crt \\
        -extfile <(printf 'subjectAltName=DNS:tickmark-cluster\\nextendedKeyUsage=serverAuth,clientAuth\\nbasicConstraints=CA:FALSE\\n')
      chmod 0400 node.key
      """;

  /**
   * Runs the runbook's recipe in {@code dir} (made fresh) and answers the nodes' {@code
   * TICKMARK_CLUSTER_TLS_*} for its files; exits the program when openssl fails.
   */
  static Map<String, String> clusterTlsEnvironment(Path dir) throws Exception {
    if (Files.exists(dir))
      try (var old = Files.walk(dir)) {
        for (Path p : old.sorted(java.util.Comparator.reverseOrder()).toList()) Files.delete(p);
      }
    Files.createDirectories(dir);
    Process openssl =
        new ProcessBuilder("bash", "-c", RECIPE)
            .directory(dir.toFile())
            .redirectErrorStream(true)
            .start();
    String out = new String(openssl.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    if (openssl.waitFor() != 0) {
      System.err.println("the runbook's openssl recipe failed:\n" + out);
      System.exit(2);
    }
    return Map.of(
        ClusterTls.CERT_ENV, dir.resolve("node.crt").toAbsolutePath().toString(),
        ClusterTls.KEY_ENV, dir.resolve("node.key").toAbsolutePath().toString(),
        ClusterTls.CA_ENV, dir.resolve("ca.crt").toAbsolutePath().toString());
  }

  record Figures(double rttP50Micros, double rttP99Micros, double messagesPerSecond) {}

  public static void main(String[] args) throws Exception {
    int rounds = 3;
    int pings = 3000;
    int messages = 100_000;
    int window = 200;
    int bytes = 256;
    for (String a : args) {
      String[] kv = a.split("=", 2);
      switch (kv[0]) {
        case "--rounds" -> rounds = Integer.parseInt(kv[1]);
        case "--pings" -> pings = Integer.parseInt(kv[1]);
        case "--messages" -> messages = Integer.parseInt(kv[1]);
        case "--window" -> window = Integer.parseInt(kv[1]);
        case "--bytes" -> bytes = Integer.parseInt(kv[1]);
        default -> {
          System.err.println(
              "usage: RemotingTlsBenchmark [--rounds=N] [--pings=N] [--messages=N] [--window=N]"
                  + " [--bytes=N]");
          System.exit(2);
        }
      }
    }
    Map<String, String> files =
        clusterTlsEnvironment(Files.createTempDirectory("tickmark-remoting-tls"));
    ClusterTls tls =
        ClusterTls.load(
            Path.of(files.get(ClusterTls.CERT_ENV)),
            Path.of(files.get(ClusterTls.KEY_ENV)),
            Path.of(files.get(ClusterTls.CA_ENV)));
    System.out.println("== RemotingTlsBenchmark ==");
    System.out.printf(
        Locale.ROOT,
        "machine: %d cores, Java %s; the runbook's openssl recipe made %s%n",
        Runtime.getRuntime().availableProcessors(),
        System.getProperty("java.version"),
        tls.describe());
    System.out.printf(
        Locale.ROOT,
        "%d rounds, each plain then TLS: %d pings one at a time, %d messages of %d bytes with %d in"
            + " flight%n",
        rounds,
        pings,
        messages,
        bytes,
        window);
    List<Figures> plain = new ArrayList<>();
    List<Figures> secured = new ArrayList<>();
    for (int round = 1; round <= rounds; round++) {
      for (boolean useTls : new boolean[] {false, true}) {
        Figures f = measure(useTls ? tls : null, pings, messages, window, bytes);
        (useTls ? secured : plain).add(f);
        System.out.printf(
            Locale.ROOT,
            "  round %d %-5s round trip p50 %7.1f us  p99 %7.1f us   %,9.0f messages/s%n",
            round,
            useTls ? "tls" : "plain",
            f.rttP50Micros(),
            f.rttP99Micros(),
            f.messagesPerSecond());
      }
    }
    double plainP50 = median(plain.stream().mapToDouble(Figures::rttP50Micros).toArray());
    double tlsP50 = median(secured.stream().mapToDouble(Figures::rttP50Micros).toArray());
    double plainP99 = median(plain.stream().mapToDouble(Figures::rttP99Micros).toArray());
    double tlsP99 = median(secured.stream().mapToDouble(Figures::rttP99Micros).toArray());
    double plainRate = median(plain.stream().mapToDouble(Figures::messagesPerSecond).toArray());
    double tlsRate = median(secured.stream().mapToDouble(Figures::messagesPerSecond).toArray());
    System.out.println();
    System.out.println("medians of the rounds    plain        tls    tls / plain");
    System.out.printf(
        Locale.ROOT,
        "round trip p50 (us) %10.1f %10.1f %10.2f%n",
        plainP50,
        tlsP50,
        tlsP50 / plainP50);
    System.out.printf(
        Locale.ROOT,
        "round trip p99 (us) %10.1f %10.1f %10.2f%n",
        plainP99,
        tlsP99,
        tlsP99 / plainP99);
    System.out.printf(
        Locale.ROOT,
        "messages/s          %10.0f %10.0f %10.2f%n",
        plainRate,
        tlsRate,
        tlsRate / plainRate);
    BenchResult.against(
            "remoting-tls",
            "remoting.tls-rtt-p50",
            "round trip of one message between two nodes over mutual TLS, p50",
            tlsP50,
            "us",
            plainP50,
            "the same over plain Artery TCP, same run (us)")
        .print();
    BenchResult.against(
            "remoting-tls",
            "remoting.tls-messages-per-s",
            "messages/s between two nodes over mutual TLS, " + window + " in flight",
            tlsRate,
            "messages/s",
            plainRate,
            "the same over plain Artery TCP, same run (messages/s)")
        .print();
  }

  /** One mode: two fresh systems, a warm-up, the pings, then the windowed stream. */
  static Figures measure(ClusterTls tls, int pings, int messages, int window, int bytes)
      throws Exception {
    ActorSystem a = system("a", tls);
    ActorSystem b = system("b", tls);
    try {
      b.actorOf(Props.create(Echo.class), "echo");
      String address = ((ExtendedActorSystem) b).provider().getDefaultAddress().toString();
      ActorRef echo =
          a.actorSelection(address + "/user/echo")
              .resolveOne(Duration.ofSeconds(30))
              .toCompletableFuture()
              .get(30, TimeUnit.SECONDS);
      byte[] payload = new byte[bytes];
      Arrays.fill(payload, (byte) 'x');
      for (int i = 0; i < Math.max(500, pings / 5); i++) ask(echo, payload); // warm-up
      stream(a, echo, payload, messages / 5, window); // warm-up
      long[] rtt = new long[pings];
      for (int i = 0; i < pings; i++) {
        long start = System.nanoTime();
        ask(echo, payload);
        rtt[i] = System.nanoTime() - start;
      }
      Arrays.sort(rtt);
      double rate = stream(a, echo, payload, messages, window);
      return new Figures(
          rtt[pings / 2] / 1_000.0, rtt[(int) Math.ceil(pings * 0.99) - 1] / 1_000.0, rate);
    } finally {
      a.terminate();
      b.terminate();
      a.getWhenTerminated().toCompletableFuture().get(30, TimeUnit.SECONDS);
      b.getWhenTerminated().toCompletableFuture().get(30, TimeUnit.SECONDS);
    }
  }

  private static void ask(ActorRef echo, byte[] payload) throws Exception {
    Patterns.ask(echo, payload, Duration.ofSeconds(10))
        .toCompletableFuture()
        .get(10, TimeUnit.SECONDS);
  }

  /** Messages per second through the echo with {@code window} in flight. */
  private static double stream(
      ActorSystem a, ActorRef echo, byte[] payload, int messages, int window) throws Exception {
    CompletableFuture<Long> done = new CompletableFuture<>();
    long start = System.nanoTime();
    a.actorOf(Props.create(Driver.class, echo, payload, messages, window, done));
    long end = done.get(300, TimeUnit.SECONDS);
    return messages / ((end - start) / 1e9);
  }

  private static ActorSystem system(String name, ClusterTls tls) {
    Config config =
        ConfigFactory.parseString(
                "pekko.actor.provider = remote\n"
                    // quiet: the low-level provider's advice and the connections cut at the end
                    + "pekko.loggers = [\"org.apache.pekko.event.Logging$DefaultLogger\"]\n"
                    + "pekko.loglevel = ERROR\n"
                    + "pekko.stdout-loglevel = ERROR\n"
                    + "pekko.remote.artery.transport = "
                    + (tls == null ? "tcp" : "tls-tcp")
                    + "\n"
                    + "pekko.remote.artery.canonical.hostname = 127.0.0.1\n"
                    + "pekko.remote.artery.canonical.port = 0\n")
            .withFallback(ConfigFactory.defaultReference());
    ActorSystemSetup setup =
        tls == null
            ? ActorSystemSetup.create(BootstrapSetup.create(config))
            : ActorSystemSetup.create(
                BootstrapSetup.create(config), SSLEngineProviderSetup.create(system -> tls));
    return ActorSystem.create(name, setup);
  }

  static double median(double[] values) {
    double[] sorted = values.clone();
    Arrays.sort(sorted);
    int n = sorted.length;
    return n % 2 == 1 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
  }

  /** Sends every message back to its sender. */
  public static final class Echo extends AbstractActor {
    @Override
    public Receive createReceive() {
      return receiveBuilder().matchAny(m -> getSender().tell(m, getSelf())).build();
    }
  }

  /** Keeps {@code window} messages in flight until {@code total} have come back. */
  public static final class Driver extends AbstractActor {
    private final ActorRef echo;
    private final byte[] payload;
    private final int total;
    private final CompletableFuture<Long> done;
    private int sent;
    private int received;

    public Driver(
        ActorRef echo, byte[] payload, int total, int window, CompletableFuture<Long> done) {
      this.echo = echo;
      this.payload = payload;
      this.total = total;
      this.done = done;
      for (int i = 0; i < Math.min(window, total); i++) send();
    }

    private void send() {
      sent++;
      echo.tell(payload, getSelf());
    }

    @Override
    public Receive createReceive() {
      return receiveBuilder()
          .matchAny(
              m -> {
                received++;
                if (sent < total) send();
                if (received == total) {
                  done.complete(System.nanoTime());
                  getContext().stop(getSelf());
                }
              })
          .build();
    }
  }
}
