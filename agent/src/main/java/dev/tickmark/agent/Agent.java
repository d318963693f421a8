package dev.tickmark.agent;

import com.fasterxml.jackson.databind.JsonNode;
import dev.tickmark.agent.snapshot.EngineHttp;
import dev.tickmark.agent.snapshot.Snapshots;
import dev.tickmark.agent.snapshot.WorkspaceArchive;
import dev.tickmark.agent.ssh.AgentSshServer;
import dev.tickmark.agent.ssh.RentalRegistry;
import dev.tickmark.agent.ssh.SshStreams;
import dev.tickmark.wire.AgentFrame;
import dev.tickmark.wire.Frames;
import dev.tickmark.wire.HardwareReport;
import java.io.IOException;
import java.io.InputStream;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.WebSocket;
import java.net.http.WebSocketHandshakeException;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Function;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A running host agent: keeps one websocket to a node, answers its challenge, sends a signed
 * hardware report after every welcome, heartbeats, and reconnects with backoff (the next engine
 * each time) until {@link #close()} or until the node refuses it for good ({@link #stopped()} then
 * completes with the reason).
 *
 * <p>In-process use (the node's dev mode, tests):
 *
 * <pre>{@code
 * Agent agent = Agent.start(AgentConfig.simulated("ws://127.0.0.1:8080", token, dir, "h100-80gb:2"));
 * agent.welcomed().get(30, SECONDS);   // the host id
 * agent.verified().get(30, SECONDS);   // the first verification_result
 * agent.close();
 * }</pre>
 *
 * <p>Rentals: {@code start_rental} / {@code stop_rental} / {@code preempt} are handled by {@link
 * Rentals} with the configured {@link Runtime} (processes or Docker containers); the rentals
 * outlive a connection, and after each welcome the node is told again which rentals run and which
 * ended meanwhile. {@link #close()} stops the running workloads (their scratch folders are wiped)
 * and reports them stopped before the socket is closed.
 *
 * <p>All state changes happen on one thread ({@code tickmark-agent}); blocking measurements (vendor
 * tools, the disk write) on another ({@code tickmark-agent-probe}); workloads are started and
 * stopped on the runtime's threads; all are daemon threads. Nothing here calls {@code System.exit}.
 */
public final class Agent implements AutoCloseable {
  /** The version announced in {@code hello} and in reports (the Maven project version). */
  public static final String VERSION = loadVersion();

  static final Duration CONNECT_TIMEOUT = Duration.ofSeconds(10);

  /** From starting a connection to the welcome. */
  static final Duration HANDSHAKE_TIMEOUT = Duration.ofSeconds(30);

  /** A node frame larger than this is a broken node (the protocol's limit is 64 KiB). */
  static final int MAX_INBOUND_CHARS = 1024 * 1024;

  static final Duration MIN_SILENCE_LIMIT = Duration.ofSeconds(15);

  /** How long {@link #close()} waits for workloads to stop beyond their grace period. */
  static final Duration DRAIN_MARGIN = Duration.ofSeconds(15);

  private static final Logger log = LoggerFactory.getLogger(Agent.class);

  /**
   * Why an agent stopped: {@code code} is null after {@link #close()}, else the node's refusal
   * code.
   */
  public record Stopped(String code, String message) {
    public boolean rejected() {
      return code != null;
    }
  }

  /** The first welcome: the host this agent is, and the node that welcomed it. */
  public record Welcomed(String hostId, URI engine) {}

  /** Completes the futures of an agent that stopped before they could complete. */
  public static final class StoppedException extends RuntimeException {
    private final Stopped stopped;

    StoppedException(Stopped stopped) {
      super(stopped.message());
      this.stopped = stopped;
    }

    public Stopped stopped() {
      return stopped;
    }
  }

  private final AgentConfig config;
  private final StateDir state;
  private final Hardware hardware;
  private final HttpClient http;
  private final ScheduledExecutorService loop;
  private final ExecutorService probe;
  private final Backoff backoff = new Backoff();
  private final Runtime runtime;
  private final Rentals rentals; // confined to the loop thread

  /** The SSH server and its streams; null when the server could not start. */
  private final AgentSshServer ssh;

  private final SshStreams streams;

  /** Snapshots: uploads of kept workspaces, downloads of restored ones. */
  private final Snapshots snapshots;

  /** How often kept workspaces and archives older than {@link Snapshots#KEEP} are looked for. */
  static final Duration HOUSEKEEPING = Duration.ofHours(1);

  /**
   * The card indexes of this machine, from the latest hardware report (what a rental may ask for).
   */
  private volatile Set<Integer> cards = Set.of();

  private volatile Thread loopThread;

  // written on the loop thread; volatile for the snapshots' HTTP requests, which use it too
  private volatile String credential;
  private volatile URI lastEngine;

  // confined to the loop thread
  private long connections;
  private Connection current;
  private ScheduledFuture<?> reconnectTimer;
  private boolean closed;

  /** The close handshake of the last connection, which {@link #close()} waits for (briefly). */
  private volatile CompletableFuture<?> closing = CompletableFuture.completedFuture(null);

  // observable from any thread
  private volatile String hostId;
  private volatile URI connectedEngine;
  private volatile AgentFrame.VerificationResult lastVerification;
  private volatile CompletableFuture<AgentFrame.VerificationResult> nextVerification =
      new CompletableFuture<>();
  private final CompletableFuture<Welcomed> welcomed = new CompletableFuture<>();
  private final CompletableFuture<AgentFrame.VerificationResult> verified =
      new CompletableFuture<>();
  private final CompletableFuture<Stopped> stopped = new CompletableFuture<>();
  private final AtomicLong heartbeatsSent = new AtomicLong();

  /**
   * Opens the state folder (creating the key on first use) and starts connecting in the background.
   *
   * @throws IllegalArgumentException if the folder holds no host credential and the config has no
   *     token
   * @throws IllegalStateException if the state folder cannot be used (unwritable, corrupt key,
   *     another agent on it)
   */
  public static Agent start(AgentConfig config) {
    return start(
        config,
        s ->
            config.simulated()
                ? new SimulatedHardware(
                    config.simulatedGpus(),
                    s.key().getPublic(),
                    HardwareProbe.of(VERSION, s.path()),
                    VERSION)
                : HardwareProbe.of(VERSION, s.path()));
  }

  static Agent start(AgentConfig config, Function<StateDir, Hardware> hardware) {
    return start(config, hardware, s -> runtime(config, s.path()));
  }

  /** The runtime {@code config} asks for, keeping its rentals under {@code stateDir}. */
  static Runtime runtime(AgentConfig config, Path stateDir) {
    AgentConfig.RuntimeKind kind = config.runtime();
    if (kind == null) {
      RuntimeChoice.Choice choice = RuntimeChoice.forThisHost(config.simulated());
      if (choice.warning() != null) log.warn(choice.warning());
      kind = choice.kind();
    }
    return switch (kind) {
      case PROCESS -> new ProcessRuntime(stateDir, config.stopGrace());
      case DOCKER -> new DockerRuntime(stateDir, config.stopGrace());
      case SANDBOX -> new SandboxRuntime(stateDir, config.stopGrace());
    };
  }

  static Agent start(
      AgentConfig config,
      Function<StateDir, Hardware> hardware,
      Function<StateDir, Runtime> runtime) {
    String insecure = config.insecureWarning();
    if (insecure != null) log.warn(insecure);
    String unsandboxed = RuntimeChoice.unsandboxedWarning(config.runtime(), config.simulated());
    if (unsandboxed != null) log.warn(unsandboxed);
    StateDir state;
    String credential;
    try {
      state = StateDir.open(config.stateDir());
      credential = state.credential().orElse(null);
    } catch (StateDir.StateException e) {
      throw new IllegalStateException(e.getMessage(), e);
    }
    if (credential == null && config.token() == null) {
      state.close();
      throw new IllegalArgumentException(
          "no host credential in "
              + state.path()
              + " and no registration token: the first start needs --token (POST /v1/hosts/registration-tokens)");
    }
    Agent agent;
    try {
      agent = new Agent(config, state, hardware.apply(state), runtime.apply(state), credential);
    } catch (RuntimeException e) {
      state.close();
      throw e;
    }
    agent.post(agent::connect);
    agent.loop.scheduleWithFixedDelay(
        guard(agent::housekeeping), 0, HOUSEKEEPING.toMillis(), TimeUnit.MILLISECONDS);
    agent.loop.scheduleWithFixedDelay(
        guard(agent::shipLogs),
        LogShipper.TICK.toMillis(),
        LogShipper.TICK.toMillis(),
        TimeUnit.MILLISECONDS);
    return agent;
  }

  private Agent(
      AgentConfig config, StateDir state, Hardware hardware, Runtime runtime, String credential) {
    this.config = config;
    this.state = state;
    this.hardware = hardware;
    this.runtime = runtime;
    this.credential = credential;
    if (config.simulated()) {
      Set<Integer> simulated = new java.util.TreeSet<>();
      for (int i = 0; i < config.simulatedGpus().cards(); i++) simulated.add(i);
      this.cards = Set.copyOf(simulated);
    }
    // wss:// and https:// engines: the system trust store, or only --ca's CAs; names are verified
    javax.net.ssl.SSLContext tls = dev.tickmark.wire.CaBundle.sslContextOrDefault(config.caFile());
    this.http = HttpClient.newBuilder().sslContext(tls).connectTimeout(CONNECT_TIMEOUT).build();
    this.loop =
        Executors.newSingleThreadScheduledExecutor(
            r -> {
              Thread t = daemon("tickmark-agent").newThread(r);
              loopThread = t;
              return t;
            });
    this.probe = Executors.newSingleThreadExecutor(daemon("tickmark-agent-probe"));
    this.rentals =
        new Rentals(
            runtime,
            () -> cards,
            Clock.systemUTC(),
            this::post,
            this::schedule,
            this::sendRentalFrame,
            new LogShipper(
                RentalLog.Limits.DEFAULT,
                Clock.systemUTC(),
                id -> LogShipper.seqFile(new RentalDirs(state.path()).rental(id))));
    RentalDirs dirs = new RentalDirs(state.path());
    this.snapshots =
        new Snapshots(
            state.path(),
            new Snapshots.Workspaces() {
              @Override
              public Path kept(String rentalId) {
                return dirs.kept(rentalId);
              }

              @Override
              public void discard(String rentalId) {
                dirs.discard(rentalId);
              }
            },
            // HTTP/1.1: plain request/response to the engine, no h2c upgrade attempt on http://
            HttpClient.newBuilder()
                .version(HttpClient.Version.HTTP_1_1)
                .sslContext(tls)
                .connectTimeout(CONNECT_TIMEOUT)
                .build(),
            new EngineHttp.Endpoint() {
              @Override
              public URI engine() {
                URI now = connectedEngine;
                return now != null ? now : lastEngine;
              }

              @Override
              public String bearer() {
                String c = Agent.this.credential; // the field: the parameter is the first one
                return c != null ? c : config.token();
              }
            },
            EngineHttp.Retry.DEFAULT);
    rentals.snapshots(
        new Rentals.Snapshots() {
          @Override
          public CompletableFuture<Rentals.Restored> restore(
              String rentalId, AgentFrame.Restore restore) {
            return snapshots
                .restore(rentalId, restore.snapshotId(), restore.sha256(), restore.sizeBytes())
                .handle(
                    (archive, error) -> {
                      if (error != null) {
                        Throwable cause =
                            error instanceof CompletionException && error.getCause() != null
                                ? error.getCause()
                                : error;
                        log.warn("rental {}: restore failed: {}", rentalId, cause.getMessage());
                        throw new Runtime.Failure(
                            "restore failed: " + Runtime.oneLine(cause.getMessage(), 300), cause);
                      }
                      long limit = WorkspaceArchive.limitFor(restore.sizeBytes());
                      return new Rentals.Restored() {
                        @Override
                        public void into(Path scratch) throws IOException {
                          WorkspaceArchive.unpack(archive, scratch, limit);
                        }

                        @Override
                        public void discard() {
                          snapshots.discardRestore(archive);
                        }
                      };
                    });
          }

          @Override
          public void upload(AgentFrame.UploadSnapshot upload) {
            snapshots.upload(upload.rentalId(), upload.snapshotId());
          }
        });
    this.ssh = startSsh(state.path(), config.sshIdleTimeout());
    this.streams = ssh == null ? null : new SshStreams(ssh, http, this::sendCloseStream);
    if (ssh != null) {
      rentals.access(
          new Rentals.Access() {
            @Override
            public void running(String rentalId, String authorizedKeys) {
              runtime
                  .workspace(rentalId)
                  .ifPresent(w -> ssh.registry().running(rentalId, authorizedKeys, w));
            }

            @Override
            public void ending(String rentalId) {
              ssh.registry().ended(rentalId);
            }
          });
    }
    log.info(
        "tickmark-agent {}: state folder {}, engines {}, {}, {} runtime",
        VERSION,
        state.path(),
        config.engines(),
        config.simulated() ? "SIMULATED GPUs " + config.simulatedGpus() : "real hardware",
        runtime.name());
    if (!config.simulated() && "process".equals(runtime.name())) {
      log.warn(
          "the process runtime does not isolate workloads (no sandbox, network on): use --runtime docker or --runtime sandbox to rent out this machine");
    }
    if (credential != null && config.token() != null) {
      log.info(
          "already registered (credential in {}): the registration token is not used",
          state.credentialFile());
    }
  }

  /**
   * The SSH server, or null when it cannot start (the agent then runs without one: its hello has no
   * {@code ssh_host_key}, and every {@code open_stream} is refused).
   */
  private static AgentSshServer startSsh(Path stateDir, Duration idleTimeout) {
    try {
      return AgentSshServer.start(stateDir, new RentalRegistry(), idleTimeout);
    } catch (IOException | RuntimeException | LinkageError e) {
      log.warn("the ssh server cannot start, rentals cannot be reached with ssh: {}", e.toString());
      return null;
    }
  }

  // ---- observation

  /** How rentals run here: {@code sandbox}, {@code docker} or {@code process}. */
  public String runtimeName() {
    return runtime.name();
  }

  /** The SSH host key's public half (an OpenSSH line), if the SSH server runs. */
  public Optional<String> sshHostKey() {
    return Optional.ofNullable(ssh).map(AgentSshServer::hostKey);
  }

  /** Where the SSH server listens (loopback), if it runs. */
  Optional<java.net.InetSocketAddress> sshAddress() {
    return Optional.ofNullable(ssh).map(AgentSshServer::address);
  }

  /** The SSH streams of a rental open now. */
  int sshStreams(String rentalId) {
    return streams == null ? 0 : streams.count(rentalId);
  }

  /** Whether an upload of a snapshot is under way here (a reminder meanwhile is ignored). */
  boolean snapshotUploading(String snapshotId) {
    return snapshots.uploading(snapshotId);
  }

  /** The SSH sessions open now. */
  int sshSessions() {
    return ssh == null ? 0 : ssh.sessionCount();
  }

  /** The host id from the latest welcome, if any. */
  public Optional<String> hostId() {
    return Optional.ofNullable(hostId);
  }

  /** True while a session is established (welcomed and not yet closed). */
  public boolean connected() {
    return connectedEngine != null;
  }

  /** The engine of the established session, if any. */
  public Optional<URI> engine() {
    return Optional.ofNullable(connectedEngine);
  }

  /**
   * Completes at the first welcome (exceptionally with {@link StoppedException} if the agent stops
   * first).
   */
  public CompletableFuture<Welcomed> welcomed() {
    return welcomed.copy();
  }

  /**
   * Completes with the first {@code verification_result} (exceptionally if the agent stops first).
   */
  public CompletableFuture<AgentFrame.VerificationResult> verified() {
    return verified.copy();
  }

  /** The latest {@code verification_result}, if one came. */
  public Optional<AgentFrame.VerificationResult> lastVerification() {
    return Optional.ofNullable(lastVerification);
  }

  /**
   * Completes with the next {@code verification_result} received after this call (e.g. after a
   * reconnect).
   */
  public CompletableFuture<AgentFrame.VerificationResult> nextVerification() {
    return nextVerification.copy();
  }

  /**
   * Completes when the agent stops: after {@link #close()}, or when the node refused it for good.
   */
  public CompletableFuture<Stopped> stopped() {
    return stopped.copy();
  }

  public long heartbeatsSent() {
    return heartbeatsSent.get();
  }

  public Path stateDir() {
    return state.path();
  }

  /** The ids of the rentals whose workload runs now (what heartbeats list). */
  public List<String> runningRentals() {
    try {
      return loop.submit(rentals::running).get(5, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return List.copyOf(runtime.running());
    } catch (ExecutionException
        | TimeoutException
        | java.util.concurrent.RejectedExecutionException e) {
      return List.copyOf(runtime.running());
    }
  }

  /**
   * Stops the running workloads (SIGTERM, the grace period, SIGKILL; scratch folders wiped) and
   * reports them {@code rental_stopped} while the session is still up, then closes the socket (a
   * close frame, then the connection) and stops heartbeating, measuring and reconnecting. Returns
   * once done: a few seconds, plus the stop grace period when a workload does not end on SIGTERM.
   */
  @Override
  public void close() {
    if (stopped.isDone()) return;
    if (Thread.currentThread() == loopThread) {
      shutdown(new Stopped(null, "closed"));
      return;
    }
    try {
      CompletableFuture<Void> drained = loop.submit(rentals::stopAll).get(5, TimeUnit.SECONDS);
      drained.get(config.stopGrace().plus(DRAIN_MARGIN).toMillis(), TimeUnit.MILLISECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } catch (ExecutionException
        | TimeoutException
        | java.util.concurrent.RejectedExecutionException e) {
      log.warn(
          "agent close: workloads still stopping ({}); stopping them without reporting",
          e.toString());
    }
    try {
      loop.submit(() -> shutdown(new Stopped(null, "closed"))).get(5, TimeUnit.SECONDS);
      closing.handle((x, e) -> null).get(3, TimeUnit.SECONDS);
      // a measurement in progress is interrupted; wait for it, so its temporary file is gone when
      // close returns
      probe.awaitTermination(3, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } catch (ExecutionException
        | TimeoutException
        | java.util.concurrent.RejectedExecutionException e) {
      log.debug("agent close: {}", e.toString());
    }
  }

  // ---- connection lifecycle (loop thread)

  private void connect() {
    reconnectTimer = null;
    if (closed) return;
    List<URI> engines = config.engines();
    URI engine = engines.get((int) (connections++ % engines.size()));
    Connection c =
        new Connection(
            engine, new Session(state.key(), VERSION, ssh == null ? null : ssh.hostKey()));
    current = c;
    String bearer = credential != null ? credential : config.token();
    log.info(
        "connecting to {} with {}",
        engine,
        credential != null ? "the host credential" : "the registration token");
    c.handshakeTimer =
        loop.schedule(
            guard(
                () ->
                    disconnected(
                        c, "no welcome within " + HANDSHAKE_TIMEOUT.toSeconds() + " s", null)),
            HANDSHAKE_TIMEOUT.toMillis(),
            TimeUnit.MILLISECONDS);
    CompletableFuture<WebSocket> opening;
    try {
      opening =
          http.newWebSocketBuilder()
              .header("Authorization", "Bearer " + bearer)
              .connectTimeout(CONNECT_TIMEOUT)
              .buildAsync(AgentConfig.connectUri(engine), c);
    } catch (RuntimeException e) {
      opening = CompletableFuture.failedFuture(e);
    }
    opening.whenComplete(
        (ws, error) -> {
          if (error != null) post(() -> connectFailed(c, error));
        });
  }

  private void connectFailed(Connection c, Throwable error) {
    if (c != current) return;
    Throwable cause =
        error instanceof CompletionException && error.getCause() != null ? error.getCause() : error;
    if (cause instanceof WebSocketHandshakeException h) {
      int status = h.getResponse().statusCode();
      String[] problem = problem(h.getResponse().body());
      if (status == 401 || status == 403) {
        String code = problem[0] != null ? problem[0] : "unauthorized";
        reject(
            code,
            "the node refused the "
                + (credential != null ? "host credential" : "registration token")
                + " (HTTP "
                + status
                + (problem[1] != null ? ": " + problem[1] : "")
                + ")");
        return;
      }
      disconnected(
          c,
          "the node answered HTTP " + status + (problem[1] != null ? ": " + problem[1] : ""),
          null);
      return;
    }
    disconnected(c, describe(cause), null);
  }

  private void onMessage(Connection c, String text) {
    if (c != current) return;
    AgentFrame frame;
    try {
      frame = Frames.read(text);
    } catch (Frames.MalformedFrame e) {
      log.warn("ignoring a frame this agent cannot read: {}", e.getMessage());
      return;
    }
    for (Session.Action action : c.session.onFrame(frame)) {
      if (c != current) return;
      if (action instanceof Session.Send s) send(c, s.frame());
      else if (action instanceof Session.Established e) established(c, e);
      else if (action instanceof Session.Verified v) verificationResult(v.result());
      else if (action instanceof Session.MeasureAgain m) measureAgain(c, m.reason());
      else if (action instanceof Session.RentalFrame r) rentals.onFrame(r.frame());
      else if (action instanceof Session.LogsAcked a) rentals.logs().onAck(a.ack());
      else if (action instanceof Session.StreamFrame f) onStreamFrame(c, f.frame());
      else if (action instanceof Session.Rejected r) reject(r.code(), r.message());
      else if (action instanceof Session.Ended e) {
        boolean replaced = "replaced".equals(e.code());
        if (replaced)
          log.warn(
              "another agent connected as this host (is a second agent running with a copy of {}?)",
              state.path());
        disconnected(
            c,
            "the node ended the session: "
                + e.code()
                + (e.message().isEmpty() ? "" : " (" + e.message() + ")"),
            replaced ? backoff.longest() : null);
      }
    }
  }

  /**
   * {@code open_stream}: joined to the SSH server by {@link SshStreams} (which answers {@code
   * close_stream} when it cannot); {@code close_stream}: that stream ends.
   */
  private void onStreamFrame(Connection c, AgentFrame frame) {
    if (frame instanceof AgentFrame.OpenStream o) {
      if (streams == null) {
        if (o.streamId() != null)
          send(c, new AgentFrame.CloseStream(o.streamId(), "ssh_unavailable"));
        return;
      }
      streams.open(
          o.streamId(), o.rentalId(), c.engine, credential != null ? credential : config.token());
    } else if (frame instanceof AgentFrame.CloseStream cs && streams != null) {
      streams.close(cs.streamId(), cs.reason());
    }
  }

  /** The streams' {@code close_stream}: sent on the established session, if any. */
  private void sendCloseStream(String streamId, String reason) {
    post(
        () -> {
          Connection c = current;
          if (c != null && !closed && c.session.phase() == Session.Phase.ESTABLISHED)
            send(c, new AgentFrame.CloseStream(streamId, reason));
        });
  }

  private void established(Connection c, Session.Established e) {
    c.handshakeTimer.cancel(false);
    backoff.reset();
    if (e.hostCredential() != null && !e.hostCredential().equals(credential)) {
      credential = e.hostCredential();
      try {
        state.storeCredential(credential);
        log.info(
            "registered as host {}; credential stored in {}", e.hostId(), state.credentialFile());
      } catch (StateDir.StateException ex) {
        log.error(
            "{}: this run keeps it in memory, but a restart will need a new registration token",
            ex.getMessage());
      }
    }
    hostId = e.hostId();
    connectedEngine = c.engine;
    lastEngine = c.engine;
    welcomed.complete(new Welcomed(e.hostId(), c.engine));
    log.info(
        "connected to {} as host {}; heartbeat every {} s",
        c.engine,
        e.hostId(),
        e.heartbeatInterval().toSeconds());
    rentals.logs().resendAll(); // what the last session did not see stored
    rentals.resync(); // what runs, and what ended while no session could hear it
    c.measuring = true;
    measure(c, r -> reportReady(c, r, e.heartbeatInterval()));
  }

  /** Measures the machine on the probe thread; {@code then} gets the report (null: it failed). */
  private void measure(Connection c, java.util.function.Consumer<HardwareReport> then) {
    probe.execute(
        () -> {
          HardwareReport report = null;
          try {
            report =
                hardware
                    .report()
                    .withRuntime(
                        new HardwareReport.WorkloadRuntime(
                            runtime.name(), runtime.offersNetwork()));
          } catch (RuntimeException ex) {
            log.error("cannot collect the hardware report", ex);
          }
          HardwareReport r = report;
          post(() -> then.accept(r));
        });
  }

  /**
   * Check again: a new measurement and a new signed report on this session. A request that comes
   * while a measurement runs is answered by that one's report.
   */
  private void measureAgain(Connection c, String reason) {
    if (c.measuring) {
      log.info("the node asks to measure again ({}); a measurement is already running", reason);
      return;
    }
    log.info("the node asks to measure again ({}): measuring", reason);
    c.measuring = true;
    measure(c, r -> sendReport(c, r));
  }

  private void sendReport(Connection c, HardwareReport report) {
    c.measuring = false;
    if (c != current || report == null) return;
    cards =
        report.gpus().stream()
            .map(HardwareReport.Gpu::index)
            .collect(java.util.stream.Collectors.toUnmodifiableSet());
    send(c, c.session.report(report));
    log.info("hardware report sent: {}", summary(report));
  }

  private void reportReady(Connection c, HardwareReport report, Duration interval) {
    if (c != current) return;
    sendReport(c, report);
    c.silenceLimit =
        interval.multipliedBy(3).compareTo(MIN_SILENCE_LIMIT) > 0
            ? interval.multipliedBy(3)
            : MIN_SILENCE_LIMIT;
    c.heartbeatTask =
        loop.scheduleAtFixedRate(
            guard(() -> heartbeatDue(c)), 0, interval.toMillis(), TimeUnit.MILLISECONDS);
  }

  private void heartbeatDue(Connection c) {
    if (c != current) return;
    if (c.pongSeen && System.nanoTime() - c.lastInboundNanos > c.silenceLimit.toNanos()) {
      disconnected(
          c, "no sign of life from the node for " + c.silenceLimit.toSeconds() + " s", null);
      return;
    }
    if (c.sampling) return;
    c.sampling = true;
    probe.execute(
        () -> {
          List<AgentFrame.GpuSample> samples;
          try {
            samples = hardware.sample();
          } catch (RuntimeException ex) {
            log.warn("cannot sample the GPUs: {}", ex.toString());
            samples = List.of();
          }
          List<AgentFrame.GpuSample> s = samples;
          post(() -> sendHeartbeat(c, s));
        });
  }

  private void sendHeartbeat(Connection c, List<AgentFrame.GpuSample> samples) {
    c.sampling = false;
    if (c != current) return;
    for (AgentFrame.GpuSample s : samples) {
      if (s.fault() != null)
        log.error(
            "GPU {} fault: {} (reported to the node; the host will be evicted)",
            s.index(),
            s.fault());
    }
    Rentals.Listing listing =
        rentals.heartbeat(Instant.now().truncatedTo(java.time.temporal.ChronoUnit.MILLIS));
    send(c, c.session.heartbeat(listing.at(), samples, listing.rentals()));
    c.ping();
    heartbeatsSent.incrementAndGet();
  }

  private void verificationResult(AgentFrame.VerificationResult result) {
    lastVerification = result;
    CompletableFuture<AgentFrame.VerificationResult> next = nextVerification;
    nextVerification = new CompletableFuture<>();
    next.complete(result);
    verified.complete(
        result); // after the swap: a caller woken by it and asking for the next one gets a new
    // future
    log.info("verification: {}", result.status());
    if (result.checks() != null) {
      for (AgentFrame.Check check : result.checks()) {
        if (!"pass".equals(check.status())) {
          log.info(
              "  check {}: {} (observed {}, expected {})",
              check.check(),
              check.status(),
              check.observed(),
              check.expected());
        }
      }
    }
  }

  private void send(Connection c, AgentFrame frame) {
    c.enqueue(ws -> ws.sendText(Frames.write(frame), true));
  }

  /**
   * {@link Rentals}' outbox: the established session, if there is one (else the frame waits for the
   * next welcome).
   */
  private boolean sendRentalFrame(AgentFrame frame) {
    Connection c = current;
    if (c == null || closed || c.session.phase() != Session.Phase.ESTABLISHED) {
      log.info("no session: {} is sent after the next welcome", Session.frameType(frame));
      return false;
    }
    send(c, frame);
    return true;
  }

  /** The log shipper's pacing step: sends on the established session, if any (quietly). */
  private void shipLogs() {
    if (closed) return;
    rentals
        .logs()
        .tick(
            frame -> {
              Connection c = current;
              if (c == null || c.session.phase() != Session.Phase.ESTABLISHED) return false;
              send(c, frame);
              return true;
            });
  }

  /** Deletes the kept workspaces and archives never uploaded (on a snapshot thread). */
  private void housekeeping() {
    if (closed) return;
    RentalDirs dirs = new RentalDirs(state.path());
    snapshots.inBackground(
        () -> {
          Instant now = Instant.now();
          dirs.purgeKept(now);
          snapshots.purge(now);
        });
  }

  /** {@link Rentals}' timers: run on the loop. */
  private Runnable schedule(Duration delay, Runnable task) {
    try {
      ScheduledFuture<?> f =
          loop.schedule(guard(task), Math.max(0, delay.toMillis()), TimeUnit.MILLISECONDS);
      return () -> f.cancel(false);
    } catch (java.util.concurrent.RejectedExecutionException stopped) {
      return () -> {};
    }
  }

  /**
   * The current connection is over: reconnect after {@code delay} (null: the next backoff delay).
   */
  private void disconnected(Connection c, String reason, Duration delay) {
    if (c != current || closed) return;
    c.finish(false);
    current = null;
    connectedEngine = null;
    Duration wait = delay != null ? delay : backoff.next();
    log.warn("disconnected from {}: {}; reconnecting in {} ms", c.engine, reason, wait.toMillis());
    reconnectTimer = loop.schedule(guard(this::connect), wait.toMillis(), TimeUnit.MILLISECONDS);
  }

  private void reject(String code, String engineMessage) {
    String line = explain(code, engineMessage);
    log.error(line);
    shutdown(new Stopped(code, line));
  }

  private void shutdown(Stopped why) {
    if (closed) return;
    closed = true;
    if (reconnectTimer != null) reconnectTimer.cancel(false);
    if (current != null) closing = current.finish(true);
    current = null;
    connectedEngine = null;
    rentals.stopAll(); // no new workloads from here on
    if (streams != null) streams.close();
    if (ssh != null) ssh.close(); // every session, and the shells they run
    snapshots.close(); // uploads stop here and resume at the next reminder after a restart
    runtime
        .close(); // stops what still runs (after close() drained them, nothing), wipes the scratch
    // folders
    state.close();
    StoppedException ex = new StoppedException(why);
    welcomed.completeExceptionally(ex);
    verified.completeExceptionally(ex);
    nextVerification.completeExceptionally(ex);
    probe.shutdownNow();
    loop.shutdown();
    if (!why.rejected()) log.info("agent stopped");
    stopped.complete(why);
  }

  /** The one line a person reads when the node refuses this agent for good. */
  String explain(String code, String engineMessage) {
    String detail =
        engineMessage == null || engineMessage.isBlank() ? "" : " [" + engineMessage + "]";
    String hint =
        switch (code) {
          case "token_used" ->
              "the registration token was already used; create a new one (POST /v1/hosts/registration-tokens)"
                  + " and start again with --token, or use the state folder that holds this host's credential";
          case "token_expired" ->
              "the registration token has expired (tokens last 24 hours); create a new one and start again with --token";
          case "key_mismatch" ->
              "this agent's key ("
                  + state.keyFile()
                  + ") is not the one pinned to host "
                  + hostIdOr()
                  + "; use the state folder of its first registration, or register anew with a new token and an empty state folder";
          case "host_removed" ->
              "host "
                  + hostIdOr()
                  + " was removed by its provider; to register this machine again, delete "
                  + state.credentialFile()
                  + " and start with a new --token";
          default ->
              "the node refused this agent ("
                  + code
                  + "); check the --token or the credential in "
                  + state.credentialFile();
        };
    return "tickmark-agent stopped: " + hint + detail;
  }

  private String hostIdOr() {
    return hostId != null ? hostId : "(unknown)";
  }

  // ---- helpers

  /** Runs {@code task} on the loop thread; dropped once the agent has stopped. */
  private void post(Runnable task) {
    try {
      loop.execute(guard(task));
    } catch (java.util.concurrent.RejectedExecutionException stopped) {
      // the agent has stopped: late socket callbacks have nothing left to do
    }
  }

  /**
   * A failing loop task is logged, never silently lost (a periodic task would otherwise stop for
   * good).
   */
  private static Runnable guard(Runnable task) {
    return () -> {
      try {
        task.run();
      } catch (RuntimeException e) {
        log.error("unexpected failure in the agent", e);
      }
    };
  }

  private static String summary(HardwareReport r) {
    StringBuilder sb = new StringBuilder();
    sb.append(r.gpus().size()).append(" GPU(s)");
    r.gpus().stream()
        .map(HardwareReport.Gpu::name)
        .distinct()
        .forEach(
            n ->
                sb.append(" ")
                    .append(
                        r.gpus().stream()
                            .filter(g -> java.util.Objects.equals(g.name(), n))
                            .count())
                    .append("× ")
                    .append(n)
                    .append(";"));
    sb.append(" RAM ").append(r.memoryTotalMib()).append(" MiB");
    if (r.disk() != null)
      sb.append(", disk write ").append(r.disk().writeMibPerS()).append(" MiB/s");
    if (r.simulated()) sb.append(" (simulated)");
    return sb.toString();
  }

  /** {@code [code, detail]} of a problem+json body, either null if absent. */
  private static String[] problem(Object body) {
    if (!(body instanceof String text) || text.isBlank()) return new String[2];
    try {
      JsonNode json = Frames.MAPPER.readTree(text);
      String code = json.hasNonNull("code") ? json.get("code").asText() : null;
      String detail =
          json.hasNonNull("detail")
              ? json.get("detail").asText()
              : json.hasNonNull("title") ? json.get("title").asText() : null;
      return new String[] {code, detail};
    } catch (IOException | RuntimeException e) {
      return new String[] {null, text.length() > 200 ? text.substring(0, 200) : text};
    }
  }

  private static String describe(Throwable t) {
    String tls = dev.tickmark.wire.CaBundle.describe(t);
    if (tls != null) return tls;
    for (Throwable c = t; c != null; c = c.getCause()) {
      if (c instanceof java.net.ConnectException) {
        return "cannot connect"
            + (c.getMessage() != null ? " (" + c.getMessage() + ")" : " (refused or unreachable)");
      }
      if (c instanceof java.net.http.HttpConnectTimeoutException)
        return "cannot connect (timed out)";
    }
    Throwable cause = t;
    while (cause.getCause() != null
        && (cause instanceof CompletionException || cause.getMessage() == null))
      cause = cause.getCause();
    return cause.getMessage() != null
        ? cause.getClass().getSimpleName() + ": " + cause.getMessage()
        : cause.getClass().getSimpleName();
  }

  private static java.util.concurrent.ThreadFactory daemon(String name) {
    return r -> {
      Thread t = new Thread(r, name);
      t.setDaemon(true);
      return t;
    };
  }

  private static String loadVersion() {
    try (InputStream in = Agent.class.getResourceAsStream("/tickmark-agent.properties")) {
      if (in == null) return "dev";
      Properties p = new Properties();
      p.load(in);
      String v = p.getProperty("version");
      return v == null || v.isBlank() || v.contains("${") ? "dev" : v.trim();
    } catch (IOException e) {
      return "dev";
    }
  }

  /**
   * One websocket attempt and its session. Listener callbacks run on HttpClient threads and hand
   * over to the loop.
   */
  private final class Connection implements WebSocket.Listener {
    final URI engine;
    final Session session;
    private final StringBuilder partial = new StringBuilder();
    private WebSocket ws; // guarded by this, with finished
    private CompletableFuture<WebSocket> sends;
    ScheduledFuture<?> handshakeTimer;
    ScheduledFuture<?> heartbeatTask;
    Duration silenceLimit = MIN_SILENCE_LIMIT;
    volatile long lastInboundNanos = System.nanoTime();
    volatile boolean pongSeen;
    boolean sampling;
    boolean measuring; // a hardware report is being collected (loop thread)
    private boolean finished; // guarded by this

    Connection(URI engine, Session session) {
      this.engine = engine;
      this.session = session;
    }

    /** Sends in order: the JDK websocket allows one outstanding send at a time. */
    void enqueue(Function<WebSocket, CompletableFuture<WebSocket>> op) {
      WebSocket w;
      synchronized (this) {
        if (finished || ws == null) return;
        w = ws;
      }
      if (sends == null) sends = CompletableFuture.completedFuture(w);
      sends = sends.thenCompose(op);
      sends.whenComplete(
          (sent, error) -> {
            if (error != null)
              post(() -> disconnected(this, "send failed: " + describe(error), null));
          });
    }

    void ping() {
      enqueue(w -> w.sendPing(ByteBuffer.allocate(0)));
    }

    /**
     * Ends this connection: a close frame (after what is queued) when {@code graceful}, else an
     * abort. Completes when done.
     */
    CompletableFuture<?> finish(boolean graceful) {
      WebSocket w;
      synchronized (this) {
        if (finished) return CompletableFuture.completedFuture(null);
        finished = true;
        w = ws;
      }
      if (handshakeTimer != null) handshakeTimer.cancel(false);
      if (heartbeatTask != null) heartbeatTask.cancel(false);
      if (w == null)
        return CompletableFuture.completedFuture(null); // still opening: onOpen aborts it
      if (!graceful) {
        w.abort();
        return CompletableFuture.completedFuture(null);
      }
      CompletableFuture<WebSocket> queued =
          sends != null ? sends : CompletableFuture.completedFuture(w);
      return queued
          .thenCompose(x -> w.sendClose(WebSocket.NORMAL_CLOSURE, "agent stopping"))
          .orTimeout(2, TimeUnit.SECONDS)
          .whenComplete((x, e) -> w.abort());
    }

    @Override
    public void onOpen(WebSocket webSocket) {
      boolean abandoned;
      synchronized (this) {
        ws = webSocket;
        abandoned = finished;
      }
      if (abandoned) { // given up on (timeout, close) while it was opening: it must not become a
        // second session
        webSocket.abort();
        return;
      }
      lastInboundNanos = System.nanoTime();
      webSocket.request(1);
    }

    @Override
    public CompletionStage<?> onText(WebSocket webSocket, CharSequence data, boolean last) {
      lastInboundNanos = System.nanoTime();
      partial.append(data);
      if (partial.length() > MAX_INBOUND_CHARS) {
        partial.setLength(0);
        post(
            () ->
                disconnected(
                    this, "the node sent a frame over " + MAX_INBOUND_CHARS + " characters", null));
        return null;
      }
      if (last) {
        String text = partial.toString();
        partial.setLength(0);
        post(() -> onMessage(this, text));
      }
      webSocket.request(1);
      return null;
    }

    @Override
    public CompletionStage<?> onBinary(WebSocket webSocket, ByteBuffer data, boolean last) {
      lastInboundNanos = System.nanoTime();
      if (last) log.warn("ignoring a binary frame from the node");
      webSocket.request(1);
      return null;
    }

    @Override
    public CompletionStage<?> onPing(WebSocket webSocket, ByteBuffer message) {
      lastInboundNanos = System.nanoTime();
      webSocket.request(1);
      return null;
    }

    @Override
    public CompletionStage<?> onPong(WebSocket webSocket, ByteBuffer message) {
      lastInboundNanos = System.nanoTime();
      pongSeen = true;
      webSocket.request(1);
      return null;
    }

    @Override
    public CompletionStage<?> onClose(WebSocket webSocket, int statusCode, String reason) {
      post(
          () ->
              disconnected(
                  this,
                  "the node closed the connection ("
                      + statusCode
                      + (reason == null || reason.isEmpty() ? "" : " " + reason)
                      + ")",
                  null));
      return null;
    }

    @Override
    public void onError(WebSocket webSocket, Throwable error) {
      post(() -> disconnected(this, describe(error), null));
    }
  }
}
