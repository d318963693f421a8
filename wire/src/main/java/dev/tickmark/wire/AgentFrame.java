package dev.tickmark.wire;

import com.fasterxml.jackson.annotation.JsonSubTypes;
import com.fasterxml.jackson.annotation.JsonTypeInfo;
import com.fasterxml.jackson.databind.JsonNode;
import java.util.List;

/**
 * Every frame of the agent websocket: a JSON text frame with a {@code type} field naming it. See
 * docs/agent-protocol.md for the conversation.
 */
@JsonTypeInfo(use = JsonTypeInfo.Id.NAME, property = "type")
@JsonSubTypes({
  @JsonSubTypes.Type(value = AgentFrame.Challenge.class, name = "challenge"),
  @JsonSubTypes.Type(value = AgentFrame.Welcome.class, name = "welcome"),
  @JsonSubTypes.Type(value = AgentFrame.VerificationResult.class, name = "verification_result"),
  @JsonSubTypes.Type(value = AgentFrame.StartRental.class, name = "start_rental"),
  @JsonSubTypes.Type(value = AgentFrame.StopRental.class, name = "stop_rental"),
  @JsonSubTypes.Type(value = AgentFrame.Preempt.class, name = "preempt"),
  @JsonSubTypes.Type(value = AgentFrame.LogsAck.class, name = "logs_ack"),
  @JsonSubTypes.Type(value = AgentFrame.OpenStream.class, name = "open_stream"),
  @JsonSubTypes.Type(value = AgentFrame.CloseStream.class, name = "close_stream"),
  @JsonSubTypes.Type(value = AgentFrame.UploadSnapshot.class, name = "upload_snapshot"),
  @JsonSubTypes.Type(value = AgentFrame.MeasureAgain.class, name = "measure_again"),
  @JsonSubTypes.Type(value = AgentFrame.Error.class, name = "error"),
  @JsonSubTypes.Type(value = AgentFrame.Hello.class, name = "hello"),
  @JsonSubTypes.Type(value = AgentFrame.HardwareReportFrame.class, name = "hardware_report"),
  @JsonSubTypes.Type(value = AgentFrame.Heartbeat.class, name = "heartbeat"),
  @JsonSubTypes.Type(value = AgentFrame.RentalStarted.class, name = "rental_started"),
  @JsonSubTypes.Type(value = AgentFrame.RentalFailed.class, name = "rental_failed"),
  @JsonSubTypes.Type(value = AgentFrame.RentalStopped.class, name = "rental_stopped"),
  @JsonSubTypes.Type(value = AgentFrame.Logs.class, name = "logs"),
})
public sealed interface AgentFrame {

  // ---- engine → agent

  record Challenge(String nonce) implements AgentFrame {}

  /**
   * {@code hostCredential} is present only on the first connection, made with a registration token.
   */
  record Welcome(String hostId, String hostCredential, int heartbeatIntervalS)
      implements AgentFrame {}

  record Check(String check, String status, String observed, String expected) {}

  record VerificationResult(String status, List<Check> checks) implements AgentFrame {}

  record StartRental(
      String rentalId,
      List<Integer> cards,
      String image,
      List<String> command,
      String sshPublicKey,
      boolean network,
      Restore restore)
      implements AgentFrame {}

  /**
   * A launch that restores a snapshot: before the command starts, the agent fetches the manifest
   * ({@code GET /v1/agent/rentals/{rental_id}/restore}) and every chunk ({@code GET
   * /v1/agent/rentals/{rental_id}/restore/chunks/{sha256}}), checks each chunk's sha256, the whole
   * archive's ({@code sha256}, {@code sizeBytes}), and unpacks it into the new workspace; any
   * failure is a {@code rental_failed} (the rental ends {@code provisioning_failed}, charged
   * nothing).
   */
  record Restore(String snapshotId, String sha256, long sizeBytes) {}

  /**
   * {@code snapshot}: the renter keeps the workspace: the agent stops the workload as always but
   * keeps its workspace until {@link UploadSnapshot} (or a day) has archived it.
   */
  record StopRental(String rentalId, boolean snapshot) implements AgentFrame {}

  /**
   * Archive the kept workspace of {@code rentalId} (tar + zstd) and upload it as snapshot {@code
   * snapshotId} over HTTP with the host credential: {@code PUT
   * /v1/agent/snapshots/{snapshot_id}/manifest} (answers the chunks still missing), {@code PUT
   * …/chunks/{sha256}} for each of them, then {@code POST …/complete}; {@code POST …/failed} when
   * it cannot. Sent again until the upload ends (a reminder, after a reconnect): an upload already
   * under way is not started twice; {@code haveChunks} are chunks the engine already holds for it.
   */
  record UploadSnapshot(String rentalId, String snapshotId, List<String> haveChunks)
      implements AgentFrame {}

  record Preempt(String rentalId, String deadline) implements AgentFrame {}

  /**
   * Check again ({@code POST /v1/hosts/{id}/verify}): the agent measures the machine again and
   * sends a new signed {@code hardware_report}, answered by a {@code verification_result} as at
   * registration. {@code reason} is for the agent's log.
   */
  record MeasureAgain(String reason) implements AgentFrame {}

  /**
   * The lines of {@code rentalId} through {@code throughSeq} sent on this session are stored
   * durably: the agent may forget them. Acknowledgements on one session are cumulative.
   */
  record LogsAck(String rentalId, long throughSeq) implements AgentFrame {}

  record Error(String code, String message) implements AgentFrame {}

  /**
   * A renter connected to the rental's SSH server ({@code GET /v1/rentals/{id}/connect}): the agent
   * opens the websocket {@code /v1/agent/streams/{stream_id}} (host credential as bearer) and joins
   * its binary frames to its SSH server, or answers {@link CloseStream} when it cannot (the rental
   * is not running here, too many streams). {@code stream_id} is random and used once.
   */
  record OpenStream(String streamId, String rentalId) implements AgentFrame {}

  /**
   * Either way: the stream is over, or will not be opened ({@code reason} says why, for logs). Safe
   * to send for a stream that is already closed.
   */
  record CloseStream(String streamId, String reason) implements AgentFrame {}

  // ---- agent → engine

  /**
   * Answers the challenge: {@code signature} = Ed25519(key, "tickmark-agent-hello:" + nonce).
   * {@code sshHostKey}: the public half of the agent's SSH host key, one OpenSSH public key line
   * ({@code ssh-ed25519 AAAA…}), shown on its rentals so that renters pin it; absent from agents
   * that run no SSH server.
   */
  record Hello(String signature, String agentVersion, String publicKey, String sshHostKey)
      implements AgentFrame {
    public Hello(String signature, String agentVersion, String publicKey) {
      this(signature, agentVersion, publicKey, null);
    }
  }

  /**
   * {@code report} is kept as the JSON tree it arrived as: the signature covers its canonical form
   * ({@link CanonicalJson}), so it is verified before it is read.
   */
  record HardwareReportFrame(JsonNode report, String signature) implements AgentFrame {}

  record GpuSample(int index, Integer utilizationPercent, Integer temperatureC, String fault) {}

  record Heartbeat(long seq, String at, List<GpuSample> gpus, List<String> rentals)
      implements AgentFrame {}

  /**
   * {@code listedFrom}: the agent's instant from which every heartbeat it sends lists the rental
   * (until it stops), later than the {@code at} of every heartbeat it sent before; absent from
   * older agents. A heartbeat stamped later that omits the rental proves its workload gone.
   */
  record RentalStarted(String rentalId, String at, String listedFrom) implements AgentFrame {
    public RentalStarted(String rentalId, String at) {
      this(rentalId, at, null);
    }
  }

  record RentalFailed(String rentalId, String reason) implements AgentFrame {}

  /**
   * {@code preempted}: the workload ended after the agent gave it a preemption notice (it exited on
   * the SIGTERM, or was stopped at the deadline); absent otherwise. {@code exited}: the workload
   * ended by itself, unasked (its command finished or died); absent when the agent stopped it, and
   * from older agents. {@code exit_code}: with {@code exited}, the workload's exit status (0–255;
   * 128 + N when signal N ended it), when the agent's runtime learnt it; absent otherwise, and from
   * older agents.
   */
  record RentalStopped(
      String rentalId, String at, Boolean preempted, Boolean exited, Integer exitCode)
      implements AgentFrame {
    public RentalStopped(String rentalId, String at) {
      this(rentalId, at, null, null, null);
    }

    public RentalStopped(String rentalId, String at, Boolean preempted) {
      this(rentalId, at, preempted, null, null);
    }

    public RentalStopped(String rentalId, String at, Boolean preempted, Boolean exited) {
      this(rentalId, at, preempted, exited, null);
    }
  }

  /**
   * One line of a workload's output: {@code seq} per rental from 1, {@code at} when the agent read
   * it, {@code stream} {@code stdout}, {@code stderr} or {@code system} (the agent's own notes).
   */
  record LogLine(long seq, String at, String stream, String text) {}

  /** Lines of one rental, in increasing {@code seq}; safe to send twice. */
  record Logs(String rentalId, List<LogLine> lines) implements AgentFrame {}
}
