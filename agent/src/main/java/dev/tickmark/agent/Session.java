package dev.tickmark.agent;

import dev.tickmark.wire.AgentFrame;
import dev.tickmark.wire.CanonicalJson;
import dev.tickmark.wire.Ed25519;
import dev.tickmark.wire.Frames;
import dev.tickmark.wire.HardwareReport;
import java.security.KeyPair;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Set;

/**
 * One websocket session's conversation, without the socket: fed the frames the node sends, it
 * answers with {@link Action}s (frames to send, facts for the {@link Agent} to act on). Not
 * thread-safe: the agent drives it from one thread. A new connection gets a new session ({@code
 * seq} starts again at 1).
 *
 * <pre>
 *   AWAITING_CHALLENGE --challenge/hello--> AWAITING_WELCOME --welcome--> ESTABLISHED
 *   ESTABLISHED --start_rental / stop_rental / preempt / upload_snapshot--> RentalFrame (handled by {@link Rentals}, which outlives the session)
 *   ESTABLISHED --logs_ack--> LogsAcked (handled by {@link LogShipper}, which outlives the session)
 *   ESTABLISHED --open_stream / close_stream--> StreamFrame (the agent's SSH streams)
 *   ESTABLISHED --measure_again--> MeasureAgain (measure and send a new signed report)
 *   any --error--> CLOSED   (Rejected when retrying cannot help, else Ended)
 * </pre>
 */
final class Session {
  /** Error codes after which reconnecting cannot help: the agent stops. */
  static final Set<String> FATAL_CODES =
      Set.of("token_used", "token_expired", "key_mismatch", "host_removed");

  static final Duration DEFAULT_HEARTBEAT_INTERVAL = Duration.ofSeconds(5);

  enum Phase {
    AWAITING_CHALLENGE,
    AWAITING_WELCOME,
    ESTABLISHED,
    CLOSED
  }

  /** What the agent must do after a frame. */
  sealed interface Action {}

  record Send(AgentFrame frame) implements Action {}

  /**
   * The node accepted the agent: store the credential if one came, send a report, start
   * heartbeating.
   */
  record Established(String hostId, String hostCredential, Duration heartbeatInterval)
      implements Action {}

  record Verified(AgentFrame.VerificationResult result) implements Action {}

  /** Check again: measure the machine again and send a new signed report. */
  record MeasureAgain(String reason) implements Action {}

  /**
   * A rental frame ({@code start_rental}, {@code stop_rental}, {@code preempt}) for the agent's
   * {@link Rentals}.
   */
  record RentalFrame(AgentFrame frame) implements Action {}

  /** {@code open_stream} / {@code close_stream}: for the agent's SSH streams. */
  record StreamFrame(AgentFrame frame) implements Action {}

  /** The engine stored a rental's log lines through a seq ({@link LogShipper}). */
  record LogsAcked(AgentFrame.LogsAck ack) implements Action {}

  /** The node refused the agent for good (one of {@link #FATAL_CODES}). */
  record Rejected(String code, String message) implements Action {}

  /** The session is over (an error frame, or a node that broke the protocol); reconnect. */
  record Ended(String code, String message) implements Action {}

  private final KeyPair key;
  private final String agentVersion;
  private final String sshHostKey;
  private Phase phase = Phase.AWAITING_CHALLENGE;
  private long seq;

  Session(KeyPair key, String agentVersion) {
    this(key, agentVersion, null);
  }

  /**
   * {@code sshHostKey}: the SSH server's host key, one OpenSSH public key line, for {@code
   * hello.ssh_host_key}; null when the agent runs no SSH server.
   */
  Session(KeyPair key, String agentVersion, String sshHostKey) {
    this.key = key;
    this.agentVersion = agentVersion;
    this.sshHostKey = sshHostKey;
  }

  Phase phase() {
    return phase;
  }

  List<Action> onFrame(AgentFrame frame) {
    if (phase == Phase.CLOSED) return List.of();
    if (frame instanceof AgentFrame.Error e) return onError(e);
    if (frame instanceof AgentFrame.Challenge c && phase == Phase.AWAITING_CHALLENGE)
      return onChallenge(c);
    if (frame instanceof AgentFrame.Welcome w && phase == Phase.AWAITING_WELCOME)
      return onWelcome(w);
    if (phase == Phase.ESTABLISHED) {
      if (frame instanceof AgentFrame.VerificationResult v) return List.of(new Verified(v));
      if (frame instanceof AgentFrame.LogsAck a) return List.of(new LogsAcked(a));
      if (frame instanceof AgentFrame.MeasureAgain m)
        return List.of(new MeasureAgain(m.reason() == null ? "" : m.reason()));
      if (frame instanceof AgentFrame.OpenStream || frame instanceof AgentFrame.CloseStream)
        return List.of(new StreamFrame(frame));
      if (frame instanceof AgentFrame.StartRental
          || frame instanceof AgentFrame.StopRental
          || frame instanceof AgentFrame.Preempt
          || frame instanceof AgentFrame.UploadSnapshot) {
        return List.of(new RentalFrame(frame));
      }
    }
    String during = phase.name().toLowerCase(java.util.Locale.ROOT);
    phase = Phase.CLOSED;
    return List.of(
        new Ended(
            "unexpected_frame", "the node sent a " + frameType(frame) + " frame while " + during));
  }

  /** The signed report frame; only once established. */
  AgentFrame.HardwareReportFrame report(HardwareReport report) {
    requireEstablished();
    var tree = Frames.reportTree(report);
    return new AgentFrame.HardwareReportFrame(
        tree, Ed25519.sign(key.getPrivate(), CanonicalJson.bytes(tree)));
  }

  /** The next heartbeat; {@code seq} increases by one with each call. */
  AgentFrame.Heartbeat heartbeat(
      Instant at, List<AgentFrame.GpuSample> gpus, List<String> rentals) {
    requireEstablished();
    return new AgentFrame.Heartbeat(++seq, at.toString(), List.copyOf(gpus), List.copyOf(rentals));
  }

  private List<Action> onChallenge(AgentFrame.Challenge c) {
    if (c.nonce() == null || c.nonce().isEmpty()) {
      phase = Phase.CLOSED;
      return List.of(new Ended("malformed_frame", "the node sent a challenge without a nonce"));
    }
    phase = Phase.AWAITING_WELCOME;
    String signature = Ed25519.sign(key.getPrivate(), Ed25519.helloMessage(c.nonce()));
    return List.of(
        new Send(
            new AgentFrame.Hello(
                signature, agentVersion, Ed25519.encodePublic(key.getPublic()), sshHostKey)));
  }

  private List<Action> onWelcome(AgentFrame.Welcome w) {
    phase = Phase.ESTABLISHED;
    Duration interval =
        w.heartbeatIntervalS() > 0
            ? Duration.ofSeconds(w.heartbeatIntervalS())
            : DEFAULT_HEARTBEAT_INTERVAL;
    return List.of(new Established(w.hostId(), w.hostCredential(), interval));
  }

  private List<Action> onError(AgentFrame.Error e) {
    phase = Phase.CLOSED;
    String code = e.code() == null ? "unknown" : e.code();
    String message = e.message() == null ? "" : e.message();
    return List.of(
        FATAL_CODES.contains(code) ? new Rejected(code, message) : new Ended(code, message));
  }

  /**
   * The frame's wire name ({@code welcome}, {@code start_rental}, …), without its content (it may
   * hold secrets).
   */
  static String frameType(AgentFrame frame) {
    var type = Frames.MAPPER.valueToTree(frame).get("type");
    return type != null ? type.asText() : frame.getClass().getSimpleName();
  }

  private void requireEstablished() {
    if (phase != Phase.ESTABLISHED)
      throw new IllegalStateException("session is " + phase + ", not established");
  }
}
