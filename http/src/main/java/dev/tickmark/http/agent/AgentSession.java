package dev.tickmark.http.agent;

import com.typesafe.config.Config;
import dev.tickmark.engine.Rejection;
import dev.tickmark.engine.host.Host;
import dev.tickmark.engine.host.verification.Verification;
import dev.tickmark.engine.metrics.EngineMetrics;
import dev.tickmark.engine.rental.Rental;
import dev.tickmark.persistence.logs.RentalLogs;
import dev.tickmark.wire.AgentFrame;
import dev.tickmark.wire.CanonicalJson;
import dev.tickmark.wire.Ed25519;
import dev.tickmark.wire.Frames;
import dev.tickmark.wire.HardwareReport;
import java.nio.charset.StandardCharsets;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.Behavior;
import org.apache.pekko.actor.typed.javadsl.AbstractBehavior;
import org.apache.pekko.actor.typed.javadsl.ActorContext;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.actor.typed.javadsl.Receive;
import org.apache.pekko.actor.typed.javadsl.TimerScheduler;
import org.apache.pekko.cluster.sharding.typed.javadsl.ClusterSharding;
import org.apache.pekko.cluster.sharding.typed.javadsl.EntityRef;
import org.apache.pekko.pattern.StatusReply;
import org.apache.pekko.stream.Materializer;
import org.apache.pekko.stream.javadsl.Sink;
import org.apache.pekko.stream.javadsl.Source;
import org.apache.pekko.util.ByteString;

/**
 * One agent websocket: the challenge–response, then the bridge between frames and the host entity.
 * Lives on the node that holds the socket; dies with it. Anything wrong with what the agent sends
 * ends this session with an {@code error} frame and touches nothing else.
 *
 * <p>Logs: a {@code logs} frame is checked (rental id, increasing positive seqs, known streams,
 * instants, bounded text), its rental vouched for once per session by the Rental entity (its terms
 * name this host; a rental that is not this host's closes the session with {@code not_found}), then
 * stored ({@link RentalLogs}); {@code logs_ack} goes back once the insert committed. The stores run
 * one after another, so acks on a session are cumulative; a failed store closes the session (the
 * agent resends on its next one), as does a backlog of more than {@link #MAX_PENDING_LOG_WRITES}. A
 * {@code rental_stopped} / {@code rental_failed} reaches the rental only after the lines sent
 * before it are stored, so a rental that has ended has its last lines stored.
 */
public final class AgentSession extends AbstractBehavior<AgentSession.Msg> {

  /**
   * How the upgrade request authenticated: a registration token, or a host credential with its
   * pinned key.
   */
  public sealed interface Credentials permits RegistrationToken, HostCredential, Refused {}

  public record RegistrationToken(String hostId, String tokenHash) implements Credentials {}

  public record HostCredential(String hostId, String pinnedPublicKey) implements Credentials {}

  /**
   * A real secret whose use is over (spent, expired, removed): the session only explains why, then
   * closes.
   */
  public record Refused(String code, String message) implements Credentials {}

  public record Limits(
      int maxFrameChars,
      int framesPerSecond,
      int burst,
      Duration helloTimeout,
      Duration askTimeout) {
    /**
     * From the node's config: {@code tickmark.agent-socket.*} and {@code
     * tickmark.http.ask-timeout}.
     */
    public static Limits fromConfig(Config config) {
      Config socket = config.getConfig("tickmark.agent-socket");
      return new Limits(
          socket.getInt("max-frame-chars"),
          socket.getInt("frames-per-second"),
          socket.getInt("burst"),
          socket.getDuration("hello-timeout"),
          config.getDuration("tickmark.http.ask-timeout"));
    }
  }

  // ---- messages

  public interface Msg {}

  /** A text frame from the agent, with when the socket read it (epoch µs). */
  public record Inbound(String text, long receivedAtMicros) implements Msg {}

  public record InboundRejected(String code, String message) implements Msg {}

  public enum StreamCompleted implements Msg {
    INSTANCE
  }

  public record StreamFailed(Throwable cause) implements Msg {}

  /** The outgoing side of the socket: text to send, or the end. */
  public sealed interface Outgoing permits Text, Complete {}

  public record Text(String text) implements Outgoing {}

  public enum Complete implements Outgoing {
    INSTANCE
  }

  private record FromHost(Host.ToSession message) implements Msg {}

  private record Registered(String hostId, String credential) implements Msg {}

  private record AttachedToHost(String hostId, String credential, int heartbeatIntervalSeconds)
      implements Msg {}

  /**
   * The host's entity took this session back after it had forgotten it ({@code ok}), or did not.
   */
  private record Reattached(boolean ok, String message) implements Msg {}

  private record Verified(Verification.Outcome outcome) implements Msg {}

  private record Failed(String code, String message) implements Msg {}

  private enum HelloTimeout implements Msg {
    INSTANCE
  }

  /** {@code vouched}: the rental is this host's ({@code false}: it is not; nothing was stored). */
  private record LogsStored(String rentalId, long throughSeq, boolean vouched) implements Msg {}

  private record ForwardToRental(String rentalId, Rental.Command command) implements Msg {}

  /** The agent did not claim a stream in time. */
  private record ClaimTimeout(String streamId) implements Msg {}

  /** A stream socket's handle stopped: the stream is over. */
  private record StreamGone(String streamId) implements Msg {}

  /** At most this many SSH streams per rental, opening or open. */
  static final int MAX_STREAMS_PER_RENTAL = 8;

  /** How long the agent has to open its stream socket after {@code open_stream}. */
  static final Duration STREAM_CLAIM_TIMEOUT = Duration.ofSeconds(20);

  private record PendingStream(String rentalId, Host.StreamEnds ends) {}

  private record OpenStream(String rentalId, ActorRef<Host.StreamControl> handle) {}

  /** At most this many {@code logs} frames wait to be stored; more closes the session. */
  static final int MAX_PENDING_LOG_WRITES = 32;

  /** At most this many lines in one {@code logs} frame, each at most this many characters. */
  static final int MAX_LINES_PER_FRAME = 4096;

  static final int MAX_LINE_CHARS = 40_000;

  static final Set<String> STREAMS = Set.of("stdout", "stderr", "system");

  // ---- behaviour

  private static final SecureRandom RANDOM = new SecureRandom();

  private final ActorRef<Outgoing> out;
  private final Credentials credentials;
  private final Limits limits;
  private final RentalLogs logs;
  private final ClusterSharding sharding;
  private final ActorRef<Host.ToSession> hostInbox;
  private final TimerScheduler<Msg> timers;
  private final EngineMetrics metrics;
  private final String nonce;
  private String hostId;
  private String sshHostKey;
  private boolean active;
  private boolean reattaching;
  private boolean closed;
  // token bucket for the frame rate limit
  private double tokens;
  private long lastRefillNanos;
  // logs: the rentals the Rental entity vouched for, and the stores in flight (one after another)
  private final Set<String> vouched = new HashSet<>();
  private CompletionStage<Void> logWrites = CompletableFuture.completedFuture(null);
  private int pendingLogWrites;
  // SSH streams of this host's rentals: asked for and not yet claimed by the agent, and claimed
  private final Map<String, PendingStream> pendingStreams = new HashMap<>();
  private final Map<String, OpenStream> openStreams = new HashMap<>();
  private final Materializer materializer;

  public static Behavior<Msg> create(
      ActorRef<Outgoing> out, Credentials credentials, Limits limits, RentalLogs logs) {
    return Behaviors.setup(
        ctx ->
            Behaviors.withTimers(
                timers -> new AgentSession(ctx, timers, out, credentials, limits, logs)));
  }

  private AgentSession(
      ActorContext<Msg> context,
      TimerScheduler<Msg> timers,
      ActorRef<Outgoing> out,
      Credentials credentials,
      Limits limits,
      RentalLogs logs) {
    super(context);
    this.out = out;
    this.logs = logs;
    this.credentials = credentials;
    this.limits = limits;
    this.timers = timers;
    this.sharding = ClusterSharding.get(context.getSystem());
    this.hostInbox = context.messageAdapter(Host.ToSession.class, FromHost::new);
    this.metrics = EngineMetrics.get(context.getSystem());
    this.materializer = Materializer.matFromSystem(context.getSystem());
    metrics.agentSessionsOpened.increment();
    this.tokens = limits.burst();
    this.lastRefillNanos = System.nanoTime();
    byte[] n = new byte[32];
    RANDOM.nextBytes(n);
    this.nonce = Base64.getEncoder().encodeToString(n);
    if (credentials instanceof Refused r) {
      fail(r.code(), r.message());
    } else {
      send(new AgentFrame.Challenge(nonce));
      timers.startSingleTimer(HelloTimeout.INSTANCE, limits.helloTimeout());
    }
  }

  @Override
  public Receive<Msg> createReceive() {
    return newReceiveBuilder()
        .onMessage(Inbound.class, this::onInbound)
        .onMessage(InboundRejected.class, m -> fail(m.code(), m.message()))
        .onMessage(FromHost.class, this::onFromHost)
        .onMessage(Registered.class, this::onRegistered)
        .onMessage(AttachedToHost.class, this::onAttached)
        .onMessage(Reattached.class, this::onReattached)
        .onMessage(RetryAttach.class, this::onRetryAttach)
        .onMessage(Verified.class, this::onVerified)
        .onMessage(LogsStored.class, this::onLogsStored)
        .onMessage(ForwardToRental.class, this::onForwardToRental)
        .onMessage(ClaimTimeout.class, this::onClaimTimeout)
        .onMessage(StreamGone.class, this::onStreamGone)
        .onMessage(Failed.class, m -> fail(m.code(), m.message()))
        .onMessage(
            HelloTimeout.class,
            m ->
                active || hostId != null
                    ? this
                    : fail(
                        "unauthorized",
                        "no hello within " + limits.helloTimeout().toSeconds() + " s"))
        .onMessageEquals(StreamCompleted.INSTANCE, this::stop)
        .onMessage(StreamFailed.class, m -> stop())
        .build();
  }

  private Behavior<Msg> onInbound(Inbound in) {
    if (closed) return this;
    if (!takeToken())
      return fail("rate_limited", "more than " + limits.framesPerSecond() + " frames per second");
    if (in.text().length() > limits.maxFrameChars())
      return fail(
          "frame_too_large", "frames are at most " + limits.maxFrameChars() + " characters");
    AgentFrame frame;
    try {
      frame = Frames.read(in.text());
    } catch (Frames.MalformedFrame e) {
      return fail("malformed_frame", e.getMessage());
    }
    if (frame instanceof AgentFrame.Hello hello) return onHello(hello);
    if (!active) return fail("unexpected_frame", "the first frame must be hello");
    if (frame instanceof AgentFrame.HardwareReportFrame report) return onReport(report);
    if (frame instanceof AgentFrame.Heartbeat heartbeat)
      return onHeartbeat(heartbeat, in.receivedAtMicros());
    if (frame instanceof AgentFrame.RentalStarted m) {
      java.time.Instant listedFrom;
      try {
        listedFrom = m.listedFrom() == null ? null : java.time.Instant.parse(m.listedFrom());
      } catch (java.time.format.DateTimeParseException e) {
        return fail("malformed_frame", "\"listed_from\" must be an ISO-8601 instant");
      }
      return toRental(
          m.rentalId(), m.at(), at -> new Rental.WorkloadStarted(hostId, at, listedFrom), false);
    }
    if (frame instanceof AgentFrame.RentalStopped m) {
      if (m.exitCode() != null && (m.exitCode() < 0 || m.exitCode() > 255))
        return fail("malformed_frame", "\"exit_code\" must be an exit status, 0-255");
      return toRental(
          m.rentalId(),
          m.at(),
          at ->
              new Rental.WorkloadStopped(
                  hostId,
                  at,
                  Boolean.TRUE.equals(m.preempted()),
                  Boolean.TRUE.equals(m.exited()),
                  m.exitCode()),
          afterLogs());
    }
    if (frame instanceof AgentFrame.RentalFailed m) {
      String reason =
          m.reason() == null ? "" : m.reason().substring(0, Math.min(500, m.reason().length()));
      return toRental(
          m.rentalId(), null, at -> new Rental.WorkloadFailed(hostId, reason), afterLogs());
    }
    if (frame instanceof AgentFrame.Logs m) return onLogs(m);
    if (frame instanceof AgentFrame.CloseStream m) return onCloseStreamFrame(m);
    return fail("unexpected_frame", "an agent does not send " + frame.getClass().getSimpleName());
  }

  private Behavior<Msg> onHello(AgentFrame.Hello hello) {
    if (active || hostId != null) return fail("unexpected_frame", "hello was already received");
    if (hello.publicKey() == null || hello.signature() == null)
      return fail("malformed_frame", "hello needs public_key and signature");
    if (!Ed25519.verify(hello.publicKey(), Ed25519.helloMessage(nonce), hello.signature())) {
      return fail("bad_signature", "the hello signature does not match the challenge");
    }
    if (credentials instanceof HostCredential c) {
      if (!c.pinnedPublicKey().equals(hello.publicKey()))
        return fail("key_mismatch", "this is not the key pinned for the host");
      hostId = c.hostId();
      sshHostKey = hello.sshHostKey();
      attach(null);
    } else if (credentials instanceof RegistrationToken t) {
      hostId = t.hostId();
      sshHostKey = hello.sshHostKey();
      EntityRef<Host.Command> host = host();
      getContext()
          .askWithStatus(
              Host.Registration.class,
              host,
              limits.askTimeout(),
              reply -> new Host.Register(t.tokenHash(), hello.publicKey(), reply),
              (registration, failure) ->
                  registration != null
                      ? new Registered(registration.hostId(), registration.hostCredential())
                      : failed(failure));
    }
    return this;
  }

  private Behavior<Msg> onRegistered(Registered r) {
    attach(r.credential());
    return this;
  }

  private void attach(String credential) {
    attach(credential, 1);
  }

  private void attach(String credential, int attempt) {
    getContext()
        .askWithStatus(
            Host.Attached.class,
            host(),
            attachTimeout(),
            reply -> new Host.Attach(hostInbox, sshHostKey, reply),
            (attached, failure) ->
                attached != null
                    ? new AttachedToHost(
                        attached.hostId(), credential, attached.heartbeatIntervalSeconds())
                    : retryable(failure, attempt)
                        ? new RetryAttach(credential, attempt + 1, false, null)
                        : failed(failure));
  }

  /**
   * One attach may take this long before the session asks again: after a node loss, an attach sent
   * while the host's shard is still homed on the lost node is not refused but lost, and the shard
   * moves within seconds. Asking again keeps the agent's socket open, rather than have it back off,
   * reconnect and attach once more. Short, because the attempt that follows the shard's move is
   * what lets the host's rentals settle again (an attach is idempotent, and its host's entity goes
   * on recovering whether or not the ask waits): half a second after the move on average with 1 s,
   * one second with 2 s (FailoverBenchmark, docs/benchmarks.md).
   */
  static final Duration ATTACH_ATTEMPT_TIMEOUT = Duration.ofMillis(1_000);

  /**
   * Attempts (each {@link #ATTACH_ATTEMPT_TIMEOUT}) before the agent is told to reconnect: 20 s in
   * all, longer than a node loss keeps a shard homeless.
   */
  static final int ATTACH_ATTEMPTS = 20;

  private record RetryAttach(String credential, int attempt, boolean reattach, String message)
      implements Msg {}

  private Duration attachTimeout() {
    return limits.askTimeout().compareTo(ATTACH_ATTEMPT_TIMEOUT) < 0
        ? limits.askTimeout()
        : ATTACH_ATTEMPT_TIMEOUT;
  }

  /** No answer in time (not a refusal, which is final), and attempts left. */
  private static boolean retryable(Throwable failure, int attempt) {
    return !(failure instanceof StatusReply.ErrorMessage) && attempt < ATTACH_ATTEMPTS;
  }

  private Behavior<Msg> onRetryAttach(RetryAttach r) {
    if (closed) return this;
    if (r.reattach()) reattachAttempt(r.message(), r.attempt());
    else attach(r.credential(), r.attempt());
    return this;
  }

  private Behavior<Msg> onAttached(AttachedToHost a) {
    active = true;
    timers.cancel(HelloTimeout.INSTANCE);
    send(new AgentFrame.Welcome(a.hostId(), a.credential(), a.heartbeatIntervalSeconds()));
    return this;
  }

  /**
   * The host's entity forgot this session (it restarted, or moved to another node after a node
   * loss): this live, authenticated session attaches itself again, as a reconnect would, but
   * without the agent's round trip (closing the socket, backing off, the challenge, a new hardware
   * report). Only if that fails does the agent get {@code reconnect}. The heartbeat that told the
   * entity about this session already counts as the listing of its workloads; the entity's next
   * heartbeat from here proves the time as always.
   */
  private Behavior<Msg> reattach(String message) {
    if (closed || !active) return fail(Rejection.RECONNECT.wire(), message);
    if (reattaching) return this;
    reattaching = true;
    reattachAttempt(message, 1);
    return this;
  }

  private void reattachAttempt(String message, int attempt) {
    getContext()
        .askWithStatus(
            Host.Attached.class,
            host(),
            attachTimeout(),
            reply -> new Host.Attach(hostInbox, sshHostKey, reply),
            (attached, failure) ->
                attached == null && retryable(failure, attempt)
                    ? new RetryAttach(null, attempt + 1, true, message)
                    : new Reattached(attached != null, message));
  }

  private Behavior<Msg> onReattached(Reattached r) {
    reattaching = false;
    if (!r.ok()) return fail(Rejection.RECONNECT.wire(), r.message());
    metrics.agentSessionsReattached.increment();
    return this;
  }

  private Behavior<Msg> onReport(AgentFrame.HardwareReportFrame frame) {
    if (frame.report() == null || !frame.report().isObject() || frame.signature() == null) {
      return fail("malformed_frame", "hardware_report needs a report object and a signature");
    }
    HardwareReport report;
    try {
      report = Frames.readReport(frame.report());
    } catch (Frames.MalformedFrame e) {
      return fail("malformed_frame", e.getMessage());
    }
    String canonical = new String(CanonicalJson.bytes(frame.report()), StandardCharsets.UTF_8);
    getContext()
        .askWithStatus(
            Verification.Outcome.class,
            host(),
            limits.askTimeout(),
            reply -> new Host.VerifyReport(hostInbox, report, canonical, frame.signature(), reply),
            (outcome, failure) -> outcome != null ? new Verified(outcome) : failed(failure));
    return this;
  }

  private Behavior<Msg> onVerified(Verified v) {
    List<AgentFrame.Check> checks =
        v.outcome().checks().stream()
            .map(
                c -> new AgentFrame.Check(c.check(), c.status().wire(), c.observed(), c.expected()))
            .toList();
    send(new AgentFrame.VerificationResult(v.outcome().passed() ? "verified" : "failed", checks));
    return this;
  }

  private Behavior<Msg> onHeartbeat(AgentFrame.Heartbeat hb, long receivedAtMicros) {
    java.time.Instant stamped = agentInstant(hb.at());
    recordLag(stamped, receivedAtMicros);
    List<Host.GpuHealth> gpus =
        hb.gpus() == null
            ? List.of()
            : hb.gpus().stream()
                .map(
                    g ->
                        new Host.GpuHealth(
                            g.index(), g.utilizationPercent(), g.temperatureC(), g.fault()))
                .toList();
    host()
        .tell(
            new Host.Heartbeat(
                hostInbox,
                hb.seq(),
                gpus,
                hb.rentals(), // null: an agent that does not list its workloads proves nothing
                stamped,
                receivedAtMicros));
    return this;
  }

  /**
   * A heartbeat's own {@code at}; null when absent or unparseable: the heartbeat still counts, but
   * its lag is unknown and its omissions prove nothing of rentals it has never listed.
   */
  private static java.time.Instant agentInstant(String at) {
    if (at == null) return null;
    try {
      return java.time.Instant.parse(at);
    } catch (java.time.format.DateTimeParseException e) {
      return null;
    }
  }

  /** Receipt minus the agent's own {@code at}. */
  private void recordLag(java.time.Instant sent, long receivedAtMicros) {
    if (sent == null) return;
    metrics.heartbeatLag.recordMicros(
        receivedAtMicros - (sent.getEpochSecond() * 1_000_000 + sent.getNano() / 1_000));
  }

  /**
   * Rental frames go straight to the rental, which checks they come from its host; any malformed
   * one ends the session.
   */
  private Behavior<Msg> toRental(
      String rentalId,
      String at,
      java.util.function.Function<java.time.Instant, Rental.Command> command,
      boolean afterLogs) {
    if (!wellFormedRentalId(rentalId))
      return fail("malformed_frame", "rental_id is missing or too long");
    java.time.Instant instant = null;
    if (at != null) {
      try {
        instant = java.time.Instant.parse(at);
      } catch (java.time.format.DateTimeParseException e) {
        return fail("malformed_frame", "\"at\" must be an ISO-8601 instant");
      }
    }
    Rental.Command c = command.apply(instant);
    if (afterLogs) {
      getContext().pipeToSelf(logWrites, (x, failure) -> new ForwardToRental(rentalId, c));
    } else {
      sharding.entityRefFor(Rental.ENTITY_KEY, rentalId).tell(c);
    }
    return this;
  }

  /** Whether an end must wait for log lines still being stored. */
  private boolean afterLogs() {
    return pendingLogWrites > 0;
  }

  private Behavior<Msg> onForwardToRental(ForwardToRental f) {
    sharding.entityRefFor(Rental.ENTITY_KEY, f.rentalId()).tell(f.command());
    return this;
  }

  private static boolean wellFormedRentalId(String rentalId) {
    return rentalId != null && !rentalId.isEmpty() && rentalId.length() <= 128;
  }

  // ---- logs

  private Behavior<Msg> onLogs(AgentFrame.Logs frame) {
    String rentalId = frame.rentalId();
    if (!wellFormedRentalId(rentalId))
      return fail("malformed_frame", "rental_id is missing or too long");
    List<RentalLogs.Line> lines;
    try {
      lines = lines(frame.lines());
    } catch (IllegalArgumentException e) {
      return fail("malformed_frame", "logs: " + e.getMessage());
    }
    if (pendingLogWrites >= MAX_PENDING_LOG_WRITES)
      return fail(
          Rejection.UNAVAILABLE.wire(),
          "log lines come faster than they can be stored; reconnect and send them again");
    boolean known = vouched.contains(rentalId);
    long through = lines.get(lines.size() - 1).seq();
    CompletionStage<Boolean> stored =
        logWrites
            .thenCompose(x -> known ? CompletableFuture.completedFuture(true) : vouch(rentalId))
            .thenCompose(
                ours ->
                    ours
                        ? logs.append(rentalId, lines).thenApply(done -> true)
                        : CompletableFuture.completedFuture(false));
    pendingLogWrites++;
    logWrites = stored.handle((x, failure) -> null);
    getContext()
        .pipeToSelf(
            stored,
            (ours, failure) ->
                failure != null
                    ? new Failed(
                        Rejection.UNAVAILABLE.wire(),
                        "the log lines could not be stored; reconnect and send them again")
                    : new LogsStored(rentalId, through, ours));
    return this;
  }

  /** Whether the Rental entity says the rental runs (or ran) on this host. */
  private CompletionStage<Boolean> vouch(String rentalId) {
    return sharding
        .entityRefFor(Rental.ENTITY_KEY, rentalId)
        .<Rental.View>askWithStatus(reply -> new Rental.Get(null, reply), limits.askTimeout())
        .thenApply(v -> v.terms() != null && hostId.equals(v.terms().hostId()))
        .exceptionally(
            failure -> {
              Throwable t =
                  failure instanceof CompletionException && failure.getCause() != null
                      ? failure.getCause()
                      : failure;
              if (t instanceof StatusReply.ErrorMessage) return false; // no such rental
              throw new CompletionException(t);
            });
  }

  private Behavior<Msg> onLogsStored(LogsStored m) {
    pendingLogWrites--;
    if (closed) return this;
    if (!m.vouched())
      return fail(Rejection.NOT_FOUND.wire(), "rental " + m.rentalId() + " is not on this host");
    vouched.add(m.rentalId());
    send(new AgentFrame.LogsAck(m.rentalId(), m.throughSeq()));
    return this;
  }

  /** The frame's lines, checked; throws {@link IllegalArgumentException} saying what is wrong. */
  static List<RentalLogs.Line> lines(List<AgentFrame.LogLine> lines) {
    if (lines == null || lines.isEmpty()) throw new IllegalArgumentException("no lines");
    if (lines.size() > MAX_LINES_PER_FRAME)
      throw new IllegalArgumentException("more than " + MAX_LINES_PER_FRAME + " lines");
    List<RentalLogs.Line> out = new ArrayList<>(lines.size());
    long previous = 0;
    for (AgentFrame.LogLine line : lines) {
      if (line == null) throw new IllegalArgumentException("a null line");
      if (line.seq() <= previous)
        throw new IllegalArgumentException("seq must be positive and increasing");
      previous = line.seq();
      if (line.stream() == null || !STREAMS.contains(line.stream()))
        throw new IllegalArgumentException("stream must be one of stdout, stderr, system");
      if (line.text() == null || line.text().length() > MAX_LINE_CHARS)
        throw new IllegalArgumentException(
            "text is missing or longer than " + MAX_LINE_CHARS + " characters");
      java.time.Instant at;
      try {
        at = java.time.Instant.parse(line.at());
      } catch (java.time.format.DateTimeParseException | NullPointerException e) {
        throw new IllegalArgumentException("\"at\" must be an ISO-8601 instant");
      }
      out.add(new RentalLogs.Line(line.seq(), at, line.stream(), line.text()));
    }
    return out;
  }

  private Behavior<Msg> onFromHost(FromHost m) {
    Host.ToSession message = m.message();
    if (message instanceof Host.CloseSession close && close.code() == Rejection.RECONNECT)
      return reattach(close.message());
    if (message instanceof Host.CloseSession close)
      return fail(close.code().wire(), close.message());
    if (closed) return this;
    if (message instanceof Host.RunWorkload w) {
      send(
          new AgentFrame.StartRental(
              w.rentalId(),
              w.cards(),
              w.image(),
              w.command(),
              w.sshPublicKey(),
              w.network(),
              w.restore() == null
                  ? null
                  : new AgentFrame.Restore(
                      w.restore().snapshotId(), w.restore().sha256(), w.restore().sizeBytes())));
    } else if (message instanceof Host.StopWorkloadOnAgent w) {
      send(new AgentFrame.StopRental(w.rentalId(), w.keepWorkspace()));
      closeStreamsOf(w.rentalId(), "the rental ended");
    } else if (message instanceof Host.UploadSnapshotOnAgent u) {
      send(new AgentFrame.UploadSnapshot(u.rentalId(), u.snapshotId(), u.haveChunks()));
    } else if (message instanceof Host.OpenStreamOnAgent o) {
      onOpenStream(o);
    } else if (message instanceof Host.ClaimStreamOnAgent c) {
      onClaimStream(c);
    } else if (message instanceof Host.PreemptWorkload w) {
      send(new AgentFrame.Preempt(w.rentalId(), w.deadline().toString()));
    } else if (message instanceof Host.MeasureAgainOnAgent again) {
      send(new AgentFrame.MeasureAgain(again.reason()));
    }
    return this;
  }

  // ---- SSH streams: the session only introduces the two sockets; the bytes never pass here

  private void onOpenStream(Host.OpenStreamOnAgent o) {
    long streams =
        pendingStreams.values().stream().filter(p -> p.rentalId().equals(o.rentalId())).count()
            + openStreams.values().stream().filter(p -> p.rentalId().equals(o.rentalId())).count();
    if (streams >= MAX_STREAMS_PER_RENTAL) {
      o.replyTo()
          .tell(
              Rejection.TOO_MANY_STREAMS.reply(
                  "a rental has at most "
                      + MAX_STREAMS_PER_RENTAL
                      + " SSH connections at once; close one"));
      return;
    }
    pendingStreams.put(o.streamId(), new PendingStream(o.rentalId(), o.ends()));
    timers.startSingleTimer(
        "claim-" + o.streamId(), new ClaimTimeout(o.streamId()), STREAM_CLAIM_TIMEOUT);
    send(new AgentFrame.OpenStream(o.streamId(), o.rentalId()));
    o.replyTo().tell(StatusReply.ack());
  }

  private void onClaimStream(Host.ClaimStreamOnAgent c) {
    PendingStream pending = pendingStreams.remove(c.streamId());
    if (pending == null) {
      c.replyTo().tell(Rejection.NOT_FOUND.reply("no such stream"));
      return;
    }
    timers.cancel("claim-" + c.streamId());
    openStreams.put(c.streamId(), new OpenStream(pending.rentalId(), c.handle()));
    getContext().watchWith(c.handle(), new StreamGone(c.streamId()));
    c.replyTo().tell(StatusReply.success(pending.ends()));
  }

  private Behavior<Msg> onCloseStreamFrame(AgentFrame.CloseStream m) {
    if (m.streamId() == null || m.streamId().length() > 128)
      return fail("malformed_frame", "close_stream needs a stream_id");
    PendingStream pending = pendingStreams.remove(m.streamId());
    if (pending != null) {
      timers.cancel("claim-" + m.streamId());
      end(pending.ends());
    }
    OpenStream open = openStreams.remove(m.streamId());
    if (open != null) open.handle().tell(new Host.ShutDownStream("the agent closed the stream"));
    return this;
  }

  private Behavior<Msg> onClaimTimeout(ClaimTimeout t) {
    PendingStream pending = pendingStreams.remove(t.streamId());
    if (pending != null) end(pending.ends());
    return this;
  }

  private Behavior<Msg> onStreamGone(StreamGone g) {
    openStreams.remove(g.streamId());
    return this;
  }

  private void closeStreamsOf(String rentalId, String reason) {
    pendingStreams
        .entrySet()
        .removeIf(
            e -> {
              if (!e.getValue().rentalId().equals(rentalId)) return false;
              timers.cancel("claim-" + e.getKey());
              end(e.getValue().ends());
              return true;
            });
    openStreams.values().stream()
        .filter(o -> o.rentalId().equals(rentalId))
        .forEach(o -> o.handle().tell(new Host.ShutDownStream(reason)));
  }

  /** Ends both halves of a stream no agent socket will join: the renter's socket closes. */
  private void end(Host.StreamEnds ends) {
    Source.<ByteString>empty().runWith(ends.fromAgent().getSink(), materializer);
    ends.toAgent().getSource().runWith(Sink.cancelled(), materializer);
  }

  // ---- plumbing

  private EntityRef<Host.Command> host() {
    return sharding.entityRefFor(Host.ENTITY_KEY, hostId);
  }

  private static Msg failed(Throwable failure) {
    if (failure instanceof StatusReply.ErrorMessage e) {
      return new Failed(
          Rejection.codeOf(e.getMessage()).wire(), Rejection.detailOf(e.getMessage()));
    }
    return new Failed(Rejection.UNAVAILABLE.wire(), "the engine did not answer in time; reconnect");
  }

  private void send(AgentFrame frame) {
    out.tell(new Text(Frames.write(frame)));
  }

  private Behavior<Msg> fail(String code, String message) {
    if (!closed) {
      closed = true;
      send(new AgentFrame.Error(code, message));
      out.tell(Complete.INSTANCE);
    }
    return this; // the socket closing completes the inbound stream, which stops us
  }

  private Behavior<Msg> stop() {
    metrics.agentSessionsClosed.increment();
    pendingStreams.values().forEach(p -> end(p.ends()));
    if (hostId != null && active) host().tell(new Host.Detach(hostInbox));
    if (!closed) out.tell(Complete.INSTANCE);
    return Behaviors.stopped();
  }

  private boolean takeToken() {
    long nowNanos = System.nanoTime();
    tokens =
        Math.min(
            limits.burst(), tokens + (nowNanos - lastRefillNanos) / 1e9 * limits.framesPerSecond());
    lastRefillNanos = nowNanos;
    if (tokens < 1) return false;
    tokens -= 1;
    return true;
  }
}
