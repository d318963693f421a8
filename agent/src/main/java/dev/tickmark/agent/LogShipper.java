package dev.tickmark.agent;

import dev.tickmark.wire.AgentFrame;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Function;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Sends the rentals' {@link RentalLog}s to the engine as {@code logs {rental_id, lines}} frames,
 * and forgets lines once a {@code logs_ack} says they are stored. Outlives connections: after each
 * welcome ({@link #resendAll()}) everything not acknowledged is sent again, so a reconnect loses
 * nothing (the engine stores a line once however often it comes).
 *
 * <p>Paced, so that logs never crowd out the session's other frames nor trip the engine's frame
 * rate limit: every {@link #TICK} at most {@link #FRAMES_PER_TICK} frames leave, taking turns among
 * the rentals, each of at most {@link #MAX_BATCH_CHARS} characters of JSON (well under the engine's
 * 64 Ki-character frame limit). A rental's own rate is bounded by its log (256 KiB/s).
 *
 * <p>Confined to the agent's loop thread (each {@link RentalLog} is itself thread-safe).
 */
final class LogShipper {
  static final Duration TICK = Duration.ofMillis(250);
  static final int FRAMES_PER_TICK = 3;

  /** The JSON of a batch's lines stays under this (plus the frame's few dozen characters). */
  static final int MAX_BATCH_CHARS = 56 * 1024;

  /** At a rental's end, at most this many frames are sent at once before its end is reported. */
  static final int MAX_FLUSH_FRAMES = 16;

  private static final Logger log = LoggerFactory.getLogger(LogShipper.class);

  private final RentalLog.Limits limits;
  private final Clock clock;
  private final Function<String, RentalLog.SeqStore> seqStores;
  private final Map<String, RentalLog> logs = new LinkedHashMap<>();
  private int turn;

  /** Seqs are not kept across restarts (tests). */
  LogShipper(RentalLog.Limits limits, Clock clock) {
    this(limits, clock, id -> RentalLog.SeqStore.NONE);
  }

  /** {@code seqStores}: where each rental's highest seq is kept (see {@link #seqFile}). */
  LogShipper(RentalLog.Limits limits, Clock clock, Function<String, RentalLog.SeqStore> seqStores) {
    this.limits = limits;
    this.clock = clock;
    this.seqStores = seqStores;
  }

  /**
   * The log of {@code rentalId}, created empty on first use: seq from 1, or above what an earlier
   * run of the agent reserved for it.
   */
  RentalLog open(String rentalId) {
    return logs.computeIfAbsent(
        rentalId, id -> new RentalLog(id, limits, clock, seqStores.apply(id)));
  }

  /**
   * {@code <rental folder>/log-seq}: the highest seq reserved, written atomically (a temporary file
   * moved over it). Unreadable counts as none; unwritable is logged (a restart may then reuse seqs,
   * whose lines the engine would ignore as duplicates).
   */
  static RentalLog.SeqStore seqFile(Path rentalFolder) {
    Path file = rentalFolder.resolve("log-seq");
    return new RentalLog.SeqStore() {
      @Override
      public long load() {
        try {
          return Long.parseLong(Files.readString(file, StandardCharsets.US_ASCII).trim());
        } catch (IOException | NumberFormatException e) {
          return 0;
        }
      }

      @Override
      public void save(long reservedThrough) {
        try {
          Files.createDirectories(rentalFolder);
          Path tmp = rentalFolder.resolve("log-seq.tmp");
          Files.writeString(tmp, Long.toString(reservedThrough), StandardCharsets.US_ASCII);
          Files.move(
              tmp, file, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
        } catch (IOException e) {
          log.warn("cannot keep the log seq in {}: {}", file, e.toString());
        }
      }
    };
  }

  /** The log of a rental, if this agent still holds one (tests). */
  RentalLog get(String rentalId) {
    return logs.get(rentalId);
  }

  void onAck(AgentFrame.LogsAck ack) {
    RentalLog log = ack.rentalId() == null ? null : logs.get(ack.rentalId());
    if (log == null) return;
    log.ack(ack.throughSeq());
    if (log.finished()) logs.remove(log.rentalId());
  }

  /**
   * The rental is over (ended, or never started): its log takes no more lines, and is forgotten
   * once everything in it is acknowledged.
   */
  void ended(String rentalId) {
    RentalLog log = logs.get(rentalId);
    if (log == null) return;
    log.close();
    if (log.finished()) logs.remove(rentalId);
  }

  /** A new session: what was sent on the last one and not acknowledged is sent again. */
  void resendAll() {
    logs.values().forEach(RentalLog::resend);
  }

  /** One pacing step: up to {@link #FRAMES_PER_TICK} frames, the rentals taking turns. */
  void tick(Rentals.Outbox outbox) {
    List<RentalLog> pending = new ArrayList<>();
    for (RentalLog log : logs.values()) if (log.hasUnsent()) pending.add(log);
    if (pending.isEmpty()) return;
    for (int sent = 0; sent < FRAMES_PER_TICK && !pending.isEmpty(); ) {
      RentalLog log = pending.get(Math.floorMod(turn++, pending.size()));
      if (!sendOne(log, outbox)) return; // no session
      sent++;
      if (!log.hasUnsent()) pending.remove(log);
    }
  }

  /**
   * Before a rental's end is reported: what it still has unsent, at once (up to {@link
   * #MAX_FLUSH_FRAMES}), so that its last lines are stored before the engine hears it ended.
   */
  void flush(String rentalId, Rentals.Outbox outbox) {
    RentalLog log = logs.get(rentalId);
    if (log == null) return;
    for (int i = 0; i < MAX_FLUSH_FRAMES && log.hasUnsent(); i++) if (!sendOne(log, outbox)) return;
  }

  private boolean sendOne(RentalLog log, Rentals.Outbox outbox) {
    long before = log.sentThrough();
    List<AgentFrame.LogLine> lines = log.batch(MAX_BATCH_CHARS);
    if (lines.isEmpty()) return true;
    if (!outbox.send(new AgentFrame.Logs(log.rentalId(), lines))) {
      log.rewind(before); // sent again on the next session
      return false;
    }
    return true;
  }
}
