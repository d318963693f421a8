package dev.tickmark.bench;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.tickmark.wire.AgentFrame;
import dev.tickmark.wire.CanonicalJson;
import dev.tickmark.wire.Ed25519;
import dev.tickmark.wire.Frames;
import dev.tickmark.wire.HardwareReport;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.net.http.WebSocket;
import java.nio.charset.StandardCharsets;
import java.security.KeyPair;
import java.time.Duration;
import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.Semaphore;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

/**
 * Many light simulated host agents in one process, for {@link AgentHeartbeatBenchmark}: each is a
 * JDK {@link WebSocket} (a few {@link HttpClient}s shared by all) speaking the agent protocol with
 * the wire module, and nothing else: no hardware probe, no runtime, no state folder, no reconnects.
 *
 * <p>Registration per agent: a registration token from the node ({@code POST
 * /v1/hosts/registration-tokens}, as one of a few provider accounts), an Ed25519 key, the websocket
 * with the token, challenge → hello → welcome, then a signed simulated hardware report (1 × NVIDIA
 * H100 80GB HBM3) and its verification result. A verified agent then heartbeats every interval; all
 * agents share one timer wheel with 10 ms slots, agent {@code i} in slot {@code i mod slots}, so
 * the heartbeats are spread evenly over the interval.
 *
 * <p>It is driven over stdin/stdout by the benchmark (one command per line): {@code ramp N} brings
 * the swarm to N verified agents, {@code registration} concurrent registrations at a time, and
 * answers {@code RAMPED …}; {@code stats} answers {@code STATS …}; {@code quit} closes every socket
 * and exits. Lines starting with {@code #} are log lines.
 */
public final class AgentSwarm {
  private static final PrintStream OUT = System.out;
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final String H100 = "NVIDIA H100 80GB HBM3";
  private static final long WHEEL_SLOT_MS = 10;

  private final URI base;
  private final int hostsPerProvider;
  private final int concurrency;
  private final int intervalSeconds;
  private final List<HttpClient> socketClients = new ArrayList<>();
  private final HttpClient rest;
  private final ExecutorService executor;
  private final ScheduledExecutorService wheelThread;
  private final List<List<Agent>> wheel = new ArrayList<>();
  private final List<Agent> agents = new ArrayList<>();
  private final java.util.Map<Integer, CompletableFuture<String>> providerKeys =
      new java.util.concurrent.ConcurrentHashMap<>();
  private final AtomicLong retries = new AtomicLong();

  /**
   * Summed milliseconds per registration phase: token, websocket open, welcome, verification
   * result.
   */
  private final AtomicLong[] phaseMillis = {
    new AtomicLong(), new AtomicLong(), new AtomicLong(), new AtomicLong()
  };

  private final AtomicLong phaseCount = new AtomicLong();
  private int wheelPosition;

  private final AtomicInteger verified = new AtomicInteger();
  private final AtomicInteger open = new AtomicInteger();
  private final AtomicInteger failed = new AtomicInteger();
  private final AtomicInteger closedAfterVerified = new AtomicInteger();
  private final AtomicLong heartbeatsSent = new AtomicLong();
  private final AtomicLong heartbeatsSkipped = new AtomicLong();
  private final AtomicLong sendFailures = new AtomicLong();
  private final AtomicReference<String> lastError = new AtomicReference<>("none");
  private final ConcurrentLinkedQueue<String> errorSamples = new ConcurrentLinkedQueue<>();

  AgentSwarm(URI base, int clients, int hostsPerProvider, int concurrency, int intervalSeconds) {
    this.base = base;
    this.hostsPerProvider = hostsPerProvider;
    this.concurrency = concurrency;
    this.intervalSeconds = intervalSeconds;
    this.executor =
        Executors.newFixedThreadPool(
            Math.max(2, Runtime.getRuntime().availableProcessors()), daemon("swarm-worker"));
    for (int i = 0; i < clients; i++) {
      socketClients.add(
          HttpClient.newBuilder()
              .executor(executor)
              .connectTimeout(Duration.ofSeconds(30))
              .build());
    }
    this.rest =
        HttpClient.newBuilder()
            .executor(executor)
            .version(HttpClient.Version.HTTP_1_1)
            .connectTimeout(Duration.ofSeconds(30))
            .build();
    int slots = (int) (intervalSeconds * 1000L / WHEEL_SLOT_MS);
    for (int i = 0; i < slots; i++) wheel.add(new ArrayList<>());
    this.wheelThread = Executors.newSingleThreadScheduledExecutor(daemon("swarm-wheel"));
    long start = System.nanoTime();
    wheelThread.scheduleAtFixedRate(
        () -> turnWheel(start), WHEEL_SLOT_MS, WHEEL_SLOT_MS, TimeUnit.MILLISECONDS);
  }

  private static java.util.concurrent.ThreadFactory daemon(String name) {
    AtomicInteger n = new AtomicInteger();
    return r -> {
      Thread t = new Thread(r, name + "-" + n.incrementAndGet());
      t.setDaemon(true);
      return t;
    };
  }

  public static void main(String[] argv) throws Exception {
    MarketBenchSupport.Args args = new MarketBenchSupport.Args(argv);
    URI base = URI.create(args.string("url", "http://127.0.0.1:8080"));
    AgentSwarm swarm =
        new AgentSwarm(
            base,
            args.integer("clients", 4),
            args.integer("hosts-per-provider", 100),
            args.integer("registration", 100),
            args.integer("interval", 5));
    args.requireEmpty();
    OUT.println(
        "# swarm up, pid "
            + ProcessHandle.current().pid()
            + ", open files limit "
            + MarketBenchSupport.openFilesLimit());
    OUT.flush();
    BufferedReader in =
        new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    String line;
    while ((line = in.readLine()) != null) {
      String[] cmd = line.trim().split("\\s+");
      switch (cmd[0]) {
        case "ramp" ->
            swarm.ramp(Integer.parseInt(cmd[1]), cmd.length > 2 ? Integer.parseInt(cmd[2]) : 3600);
        case "stats" -> swarm.printStats();
        case "quit" -> {
          swarm.closeAll();
          OUT.println("BYE");
          OUT.flush();
          System.exit(0);
        }
        default -> OUT.println("# unknown command " + line);
      }
      OUT.flush();
    }
    swarm.closeAll();
  }

  // ---------------------------------------------------------------------------------------------

  /**
   * Registers agents until {@code target} are verified and heartbeating, too many failed, or {@code
   * seconds} passed.
   */
  void ramp(int target, int seconds) throws Exception {
    long t0 = System.nanoTime();
    long deadline = t0 + seconds * 1_000_000_000L;
    int wanted = target - verified.get();
    Semaphore permits = new Semaphore(concurrency);
    int started = 0;
    long lastPrint = t0;
    int consecutiveFailuresAtStart = failed.get();
    while (verified.get() < target) {
      // Keep `concurrency` registrations in flight; top up as they finish.
      int inFlight = concurrency - permits.availablePermits();
      if (verified.get() + inFlight >= target) {
        Thread.sleep(20);
      } else if (permits.tryAcquire(100, TimeUnit.MILLISECONDS)) {
        started++;
        register(0).whenComplete((ok, e) -> permits.release());
      }
      if (System.nanoTime() - lastPrint > 5_000_000_000L) {
        lastPrint = System.nanoTime();
        OUT.printf(
            Locale.ROOT,
            "# ramp: %d verified, %d open, %d failed, %d in flight, %.0f s%n",
            verified.get(),
            open.get(),
            failed.get(),
            concurrency - permits.availablePermits(),
            (lastPrint - t0) / 1e9);
        OUT.flush();
      }
      // Give up when failures dominate: the node (or this machine) cannot take more.
      if (System.nanoTime() > deadline) {
        OUT.println("# ramp: time is up after " + seconds + " s");
        break;
      }
      int newFailures = failed.get() - consecutiveFailuresAtStart;
      if (newFailures > Math.max(200, wanted / 5)) {
        OUT.println(
            "# ramp: giving up after "
                + newFailures
                + " failed registrations; last error: "
                + lastError.get());
        break;
      }
    }
    permits.acquire(concurrency); // let the last registrations finish
    permits.release(concurrency);
    double took = (System.nanoTime() - t0) / 1e9;
    long n = Math.max(1, phaseCount.get());
    OUT.printf(
        Locale.ROOT,
        "RAMPED timed_out=%b verified=%d open=%d failed=%d retries=%d started=%d seconds=%.1f ms_token=%d ms_open=%d ms_welcome=%d"
            + " ms_verified=%d last_error=%s%n",
        System.nanoTime() > deadline,
        verified.get(),
        open.get(),
        failed.get(),
        retries.get(),
        started,
        took,
        phaseMillis[0].get() / n,
        phaseMillis[1].get() / n,
        phaseMillis[2].get() / n,
        phaseMillis[3].get() / n,
        lastError.get().replace(' ', '_'));
  }

  void printStats() {
    OUT.printf(
        Locale.ROOT,
        "STATS verified=%d open=%d failed=%d retries=%d closed_after_verified=%d heartbeats_sent=%d skipped=%d"
            + " send_failures=%d last_error=%s%n",
        verified.get(),
        open.get(),
        failed.get(),
        retries.get(),
        closedAfterVerified.get(),
        heartbeatsSent.get(),
        heartbeatsSkipped.get(),
        sendFailures.get(),
        lastError.get().replace(' ', '_'));
    for (String e; (e = errorSamples.poll()) != null; ) OUT.println("# error: " + e);
  }

  private CompletionStage<Void> register(int index) {
    return attempt(1);
  }

  /**
   * One registration; a failed one (the node too busy to answer, a refused handshake) is tried
   * again, 3 times in all.
   */
  private CompletionStage<Void> attempt(int attempt) {
    Agent agent;
    synchronized (agents) {
      agent = new Agent(agents.size());
      agents.add(agent);
    }
    agent.t0 = System.nanoTime();
    return providerKey(agent.index)
        .thenCompose(this::registrationToken)
        .thenCompose(
            token -> {
              agent.tToken = System.nanoTime();
              agent.key = Ed25519.generate();
              HttpClient client = socketClients.get(agent.index % socketClients.size());
              return client
                  .newWebSocketBuilder()
                  .header("Authorization", "Bearer " + token)
                  .connectTimeout(Duration.ofSeconds(30))
                  .buildAsync(
                      URI.create(base.toString().replaceFirst("^http", "ws") + "/v1/agent/connect"),
                      agent);
            })
        .thenCompose(
            ws -> {
              agent.tOpen = System.nanoTime();
              agent.opened();
              return agent.verified.orTimeout(60, TimeUnit.SECONDS);
            })
        .handle(
            (ok, e) -> {
              if (e == null) {
                long done = System.nanoTime();
                phaseMillis[0].addAndGet((agent.tToken - agent.t0) / 1_000_000);
                phaseMillis[1].addAndGet((agent.tOpen - agent.tToken) / 1_000_000);
                phaseMillis[2].addAndGet((agent.tWelcome - agent.tOpen) / 1_000_000);
                phaseMillis[3].addAndGet((done - agent.tWelcome) / 1_000_000);
                phaseCount.incrementAndGet();
                verified.incrementAndGet();
                agent.established = true;
                synchronized (wheel) {
                  wheel.get(agent.index % wheel.size()).add(agent);
                }
                return CompletableFuture.<Void>completedFuture(null);
              }
              agent.gone("registration failed");
              WebSocket ws = agent.ws;
              if (ws != null) ws.abort();
              if (attempt < 3) {
                retries.incrementAndGet();
                error(
                    "agent "
                        + agent.index
                        + " (attempt "
                        + attempt
                        + ", retried): "
                        + rootMessage(e));
                return CompletableFuture.supplyAsync(
                        () -> null, CompletableFuture.delayedExecutor(attempt, TimeUnit.SECONDS))
                    .thenCompose(x -> attempt(attempt + 1));
              }
              failed.incrementAndGet();
              error(
                  "agent "
                      + agent.index
                      + " (attempt "
                      + attempt
                      + ", gave up): "
                      + rootMessage(e));
              return CompletableFuture.<Void>completedFuture(null);
            })
        .thenCompose(x -> x);
  }

  /** One provider account per {@code hostsPerProvider} agents, signed up once, on first need. */
  private CompletionStage<String> providerKey(int agentIndex) {
    int provider = agentIndex / hostsPerProvider;
    CompletableFuture<String> mine = new CompletableFuture<>();
    CompletableFuture<String> existing = providerKeys.putIfAbsent(provider, mine);
    if (existing != null) return existing;
    post("/v1/accounts", null, "{\"name\":\"bench provider " + provider + "\"}")
        .whenComplete(
            (body, e) -> {
              if (e != null) {
                providerKeys.remove(provider, mine); // the next agent tries again
                mine.completeExceptionally(e);
              } else {
                mine.complete(body.get("api_key").asText());
              }
            });
    return mine;
  }

  private static final String[] REGIONS = {
    "eu-nl", "eu-de", "eu-fr", "us-east", "us-west", "ap-sg"
  };

  private CompletionStage<String> registrationToken(String apiKey) {
    String region = REGIONS[ThreadLocalRandom.current().nextInt(REGIONS.length)];
    return post("/v1/hosts/registration-tokens", apiKey, "{\"region\":\"" + region + "\"}")
        .thenApply(b -> b.get("token").asText());
  }

  private CompletionStage<JsonNode> post(String path, String apiKey, String body) {
    HttpRequest.Builder r =
        HttpRequest.newBuilder(base.resolve(path))
            .timeout(Duration.ofSeconds(30))
            .header("Content-Type", "application/json")
            .POST(HttpRequest.BodyPublishers.ofString(body));
    if (apiKey != null) r.header("Authorization", "Bearer " + apiKey);
    return rest.sendAsync(r.build(), HttpResponse.BodyHandlers.ofString())
        .thenApply(
            resp -> {
              if (resp.statusCode() / 100 != 2)
                throw new IllegalStateException(
                    "POST " + path + " answered " + resp.statusCode() + ": " + resp.body());
              try {
                return JSON.readTree(resp.body());
              } catch (Exception e) {
                throw new IllegalStateException("POST " + path + ": unreadable answer", e);
              }
            });
  }

  // ---------------------------------------------------------------------------------------------
  // Heartbeats: one timer wheel for every agent.

  private void turnWheel(long start) {
    List<Agent> due;
    synchronized (wheel) {
      due = new ArrayList<>(wheel.get(wheelPosition));
      wheelPosition = (wheelPosition + 1) % wheel.size();
    }
    String at = Instant.now().truncatedTo(ChronoUnit.MILLIS).toString();
    for (Agent a : due) {
      if (a.closed) continue;
      if (a.sending) {
        heartbeatsSkipped.incrementAndGet();
        continue;
      }
      a.seq++;
      String frame =
          Frames.write(
              new AgentFrame.Heartbeat(
                  a.seq, at, List.of(new AgentFrame.GpuSample(0, 0, 35, null)), List.of()));
      a.send(frame)
          .whenComplete(
              (ws, e) -> {
                if (e == null) heartbeatsSent.incrementAndGet();
                else sendFailures.incrementAndGet();
              });
    }
  }

  void closeAll() {
    wheelThread.shutdownNow();
    List<Agent> all;
    synchronized (agents) {
      all = new ArrayList<>(agents);
    }
    for (Agent a : all) {
      WebSocket ws = a.ws;
      if (ws != null) ws.abort();
    }
  }

  private void error(String message) {
    lastError.set(message);
    if (errorSamples.size() < 20) errorSamples.add(message);
  }

  private static String rootMessage(Throwable e) {
    Throwable t = e;
    while (t.getCause() != null
        && (t instanceof java.util.concurrent.CompletionException
            || t instanceof java.util.concurrent.ExecutionException)) t = t.getCause();
    String m = t.getClass().getSimpleName() + (t.getMessage() == null ? "" : ": " + t.getMessage());
    return m.length() > 300 ? m.substring(0, 300) : m;
  }

  // ---------------------------------------------------------------------------------------------

  /** One simulated agent: the protocol, nothing more. */
  final class Agent implements WebSocket.Listener {
    final int index;
    final CompletableFuture<Void> verified = new CompletableFuture<>();
    volatile KeyPair key;
    volatile WebSocket ws;
    volatile boolean established;
    volatile boolean closed;
    volatile boolean sending;
    volatile long t0, tToken, tOpen, tWelcome;
    long seq;
    private StringBuilder partial = new StringBuilder();
    private CompletableFuture<WebSocket> lastSend = CompletableFuture.completedFuture(null);

    Agent(int index) {
      this.index = index;
    }

    /** Sends are chained: the JDK websocket allows one outstanding send at a time. */
    synchronized CompletableFuture<WebSocket> send(String text) {
      sending = true;
      CompletableFuture<WebSocket> next =
          lastSend
              .handle((x, e) -> null)
              .thenCompose(x -> ws.sendText(text, true))
              .whenComplete((x, e) -> sending = false);
      lastSend = next;
      return next;
    }

    private boolean counted;

    synchronized void opened() {
      if (!counted && !closed) {
        counted = true;
        open.incrementAndGet();
      }
    }

    @Override
    public void onOpen(WebSocket webSocket) {
      this.ws = webSocket;
      webSocket.request(1);
    }

    @Override
    public CompletionStage<?> onText(WebSocket webSocket, CharSequence data, boolean last) {
      partial.append(data);
      if (last) {
        String text = partial.toString();
        partial = new StringBuilder();
        try {
          onFrame(Frames.read(text));
        } catch (Frames.MalformedFrame e) {
          verified.completeExceptionally(
              new IllegalStateException("unreadable frame: " + e.getMessage()));
        } catch (RuntimeException e) {
          verified.completeExceptionally(e);
        }
      }
      webSocket.request(1);
      return null;
    }

    private void onFrame(AgentFrame frame) {
      if (frame instanceof AgentFrame.Challenge c) {
        String signature = Ed25519.sign(key.getPrivate(), Ed25519.helloMessage(c.nonce()));
        send(
            Frames.write(
                new AgentFrame.Hello(signature, "bench", Ed25519.encodePublic(key.getPublic()))));
      } else if (frame instanceof AgentFrame.Welcome w) {
        tWelcome = System.nanoTime();
        HardwareReport report = report(w.hostId());
        JsonNode tree = Frames.reportTree(report);
        String signature = Ed25519.sign(key.getPrivate(), CanonicalJson.bytes(tree));
        send(Frames.write(new AgentFrame.HardwareReportFrame(tree, signature)));
      } else if (frame instanceof AgentFrame.VerificationResult v) {
        if ("verified".equals(v.status())) {
          verified.complete(null);
        } else {
          String failedChecks =
              v.checks() == null
                  ? ""
                  : v.checks().stream()
                      .filter(c -> !"pass".equals(c.status()))
                      .map(c -> c.check() + "=" + c.status() + "(" + c.observed() + ")")
                      .toList()
                      .toString();
          verified.completeExceptionally(
              new IllegalStateException("verification " + v.status() + " " + failedChecks));
        }
      } else if (frame instanceof AgentFrame.Error e) {
        String message = "error frame " + e.code() + ": " + e.message();
        if (!verified.completeExceptionally(new IllegalStateException(message)))
          error("agent " + index + ": " + message);
      }
    }

    @Override
    public CompletionStage<?> onClose(WebSocket webSocket, int statusCode, String reason) {
      gone("closed by the node (" + statusCode + " " + reason + ")");
      return null;
    }

    @Override
    public void onError(WebSocket webSocket, Throwable error) {
      gone("socket error: " + rootMessage(error));
    }

    synchronized void gone(String why) {
      if (closed) return;
      closed = true;
      if (counted) open.decrementAndGet();
      if (established) {
        closedAfterVerified.incrementAndGet();
        error("agent " + index + " " + why);
      }
      verified.completeExceptionally(new IllegalStateException(why));
    }
  }

  /** 1 × H100 80 GB, driver 550.54.15, 200000 MiB RAM, 500 GiB free, 1000 MiB/s: simulated. */
  static HardwareReport report(String hostId) {
    String uuid =
        "GPU-"
            + String.format(Locale.ROOT, "%08x", hostId.hashCode())
            + "-0000-4000-8000-"
            + String.format(
                Locale.ROOT,
                "%012x",
                Math.abs((long) hostId.hashCode() * 31 + 7) & 0xffffffffffffL);
    HardwareReport.Gpu gpu =
        new HardwareReport.Gpu(0, uuid, H100, "nvidia", 81559L, "550.54.15", "12.4", 35, 0L, 5, 16);
    return new HardwareReport(
        "bench",
        true,
        Instant.now().truncatedTo(ChronoUnit.SECONDS).toString(),
        List.of(gpu),
        new HardwareReport.Cpu("bench CPU", 32),
        200_000L,
        new HardwareReport.Disk("/scratch", 500L * 1024 * 1024 * 1024, 1000.0),
        null);
  }
}
