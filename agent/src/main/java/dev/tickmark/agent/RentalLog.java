package dev.tickmark.agent;

import dev.tickmark.wire.AgentFrame;
import java.nio.charset.StandardCharsets;
import java.time.Clock;
import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import java.util.function.LongSupplier;

/**
 * One rental's output on its way to the engine: numbers each line ({@code seq} from 1), stamps it,
 * bounds the rate that leaves the host (a token bucket, {@link Limits#bytesPerSecond()}), and keeps
 * every line until the engine acknowledges it, in a bounded buffer ({@link Limits#maxLines()},
 * {@link Limits#maxBytes()}; beyond it the oldest lines are dropped).
 *
 * <ul>
 *   <li>Output over the rate is dropped, and keeps being dropped until the bucket is half full
 *       again (one episode); the first line let through after it (or the end of the output) is
 *       preceded by one {@code system} line saying how many bytes were dropped. Every byte read
 *       (but the rest of a cut line) is either in a line kept (its text plus its line end) or
 *       counted in such a note.
 *   <li>Lines dropped from a full buffer (the engine has not acknowledged them) are counted, and
 *       one {@code system} line says how many, with the next batch.
 *   <li>{@link #batch} gives the next lines to send after {@link #sentThrough}; {@link #resend}
 *       (after a reconnect) sends again everything not acknowledged.
 * </ul>
 *
 * <p>Thread-safe: the runtime's reader threads {@link #append}, the agent's loop batches and acks.
 */
final class RentalLog {
  /** The bounds (defaults from the design: 256 KiB/s, 16 KiB lines, 10,000 lines or 4 MiB). */
  record Limits(long bytesPerSecond, int maxLineBytes, int maxLines, long maxBytes) {
    static final Limits DEFAULT = new Limits(256 * 1024, 16 * 1024, 10_000, 4L * 1024 * 1024);
  }

  enum Stream {
    STDOUT,
    STDERR,
    SYSTEM;

    String wire() {
      return name().toLowerCase(java.util.Locale.ROOT);
    }
  }

  /**
   * Where the highest {@code seq} handed out is kept across agent restarts (blocks of {@link
   * #SEQ_BLOCK} are reserved ahead, so it is written once per block): a log opened again for the
   * same rental continues above it, never reusing a seq the engine may have stored.
   */
  interface SeqStore {
    /** The highest seq reserved so far, 0 if none. */
    long load();

    void save(long reservedThrough);

    SeqStore NONE =
        new SeqStore() {
          @Override
          public long load() {
            return 0;
          }

          @Override
          public void save(long reservedThrough) {}
        };
  }

  static final long SEQ_BLOCK = 1000;

  /** What a cut line ends with. */
  static final String CUT_MARKER = " [… line cut at 16 KiB by tickmark]";

  private final String rentalId;
  private final Limits limits;
  private final Clock clock;
  private final Deque<AgentFrame.LogLine> unacked = new ArrayDeque<>();
  private long bufferedBytes;
  private long nextSeq = 1;
  private long ackedThrough;
  private long sentThrough;
  private long droppedBytes; // over the rate, this episode
  private long evictedLines; // dropped from a full buffer, not yet told
  private double tokens;
  private long lastRefillNanos;
  private boolean closed;
  private final SeqStore seqStore;
  private long reservedThrough;
  private final LongSupplier nanoTime; // the rate bucket's time: System::nanoTime, or a test's own

  RentalLog(String rentalId, Limits limits, Clock clock) {
    this(rentalId, limits, clock, SeqStore.NONE);
  }

  RentalLog(String rentalId, Limits limits, Clock clock, SeqStore seqStore) {
    this(rentalId, limits, clock, seqStore, System::nanoTime);
  }

  RentalLog(String rentalId, Limits limits, Clock clock, SeqStore seqStore, LongSupplier nanoTime) {
    this.rentalId = rentalId;
    this.nanoTime = nanoTime;
    this.limits = limits;
    this.clock = clock;
    this.seqStore = seqStore;
    this.reservedThrough = seqStore.load();
    this.nextSeq = reservedThrough + 1;
    this.ackedThrough = reservedThrough; // nothing below it is ours to send
    this.sentThrough = reservedThrough;
    this.tokens = limits.bytesPerSecond();
    this.lastRefillNanos = nanoTime.getAsLong();
  }

  String rentalId() {
    return rentalId;
  }

  Limits limits() {
    return limits;
  }

  /**
   * A line the workload wrote ({@code text} without its line end; {@code bytes}: its size as read,
   * for the rate). Dropped when over the rate.
   */
  synchronized void append(Stream stream, String text, int bytes) {
    if (closed) return;
    refill();
    int cost = bytes + 1;
    // an episode of overflow lasts until the bucket is half full again, so that a workload writing
    // ever faster than the rate gets a note every half second or so, not one per line let through
    double needed = droppedBytes > 0 ? Math.max(cost, limits.bytesPerSecond() / 2.0) : cost;
    if (tokens < needed) {
      droppedBytes += cost;
      return;
    }
    tokens -= cost;
    tellDropped();
    add(stream, text);
  }

  /** The output has ended: a pending "dropped" note is added; nothing more is accepted. */
  synchronized void close() {
    if (closed) return;
    tellDropped();
    closed = true;
  }

  synchronized boolean closed() {
    return closed;
  }

  /** Closed and everything acknowledged: nothing more to do for it. */
  synchronized boolean finished() {
    return closed && unacked.isEmpty() && evictedLines == 0;
  }

  /** Lines not yet sent on this session. */
  synchronized boolean hasUnsent() {
    return evictedLines > 0 || (!unacked.isEmpty() && unacked.peekLast().seq() > sentThrough);
  }

  synchronized long ackedThrough() {
    return ackedThrough;
  }

  synchronized long sentThrough() {
    return sentThrough;
  }

  /** The seq the next line gets. */
  synchronized long nextSeq() {
    return nextSeq;
  }

  synchronized int buffered() {
    return unacked.size();
  }

  /**
   * The next lines to send (after {@link #sentThrough}), at most {@code maxChars} of text (at least
   * one line), marked sent; empty when there is nothing to send.
   */
  synchronized List<AgentFrame.LogLine> batch(int maxChars) {
    if (evictedLines > 0) {
      long n = evictedLines;
      // room for the note itself, so that it does not drop a line it does not count
      while (!unacked.isEmpty()
          && (unacked.size() >= limits.maxLines() || bufferedBytes + 128 > limits.maxBytes())) {
        bufferedBytes -= unacked.removeFirst().text().length();
        n++;
      }
      evictedLines = 0;
      add(
          Stream.SYSTEM,
          "tickmark: "
              + n
              + " line(s) dropped: the engine had not acknowledged them and the agent's buffer was full");
    }
    List<AgentFrame.LogLine> out = new ArrayList<>();
    int chars = 0;
    for (AgentFrame.LogLine line : unacked) {
      if (line.seq() <= sentThrough) continue;
      int size = jsonLength(line.text()) + 96;
      if (!out.isEmpty() && chars + size > maxChars) break;
      out.add(line);
      chars += size;
    }
    if (!out.isEmpty()) sentThrough = out.get(out.size() - 1).seq();
    return out;
  }

  /** The engine stored everything through {@code throughSeq}. */
  synchronized void ack(long throughSeq) {
    if (throughSeq <= ackedThrough) return;
    ackedThrough = Math.min(throughSeq, nextSeq - 1);
    while (!unacked.isEmpty() && unacked.peekFirst().seq() <= ackedThrough) {
      bufferedBytes -= unacked.removeFirst().text().length();
    }
    if (sentThrough < ackedThrough) sentThrough = ackedThrough;
  }

  /** A batch could not be sent after all: it is the next one again. */
  synchronized void rewind(long sentThrough) {
    this.sentThrough = Math.max(ackedThrough, Math.min(this.sentThrough, sentThrough));
  }

  /** A new session: everything not acknowledged is sent again. */
  synchronized void resend() {
    sentThrough = ackedThrough;
  }

  // ---- under the lock

  private void tellDropped() {
    if (droppedBytes == 0) return;
    long n = droppedBytes;
    droppedBytes = 0;
    add(
        Stream.SYSTEM,
        "tickmark: "
            + n
            + " bytes of output dropped (more than "
            + (limits.bytesPerSecond() % 1024 == 0
                ? limits.bytesPerSecond() / 1024 + " KiB/s)"
                : limits.bytesPerSecond() + " bytes/s)"));
  }

  private void add(Stream stream, String text) {
    if (jsonLength(text) > MAX_LINE_JSON) text = shorten(text);
    if (nextSeq > reservedThrough && seqStore != SeqStore.NONE) {
      reservedThrough = nextSeq - 1 + SEQ_BLOCK;
      seqStore.save(reservedThrough);
    }
    Instant at = clock.instant().truncatedTo(ChronoUnit.MICROS);
    AgentFrame.LogLine line = new AgentFrame.LogLine(nextSeq++, at.toString(), stream.wire(), text);
    unacked.addLast(line);
    bufferedBytes += text.length();
    while (unacked.size() > limits.maxLines() || bufferedBytes > limits.maxBytes()) {
      AgentFrame.LogLine old = unacked.removeFirst();
      bufferedBytes -= old.text().length();
      evictedLines++;
    }
  }

  private void refill() {
    long now = nanoTime.getAsLong();
    tokens =
        Math.min(
            limits.bytesPerSecond(),
            tokens + (now - lastRefillNanos) / 1e9 * limits.bytesPerSecond());
    lastRefillNanos = now;
  }

  /** {@code text}'s size in UTF-8 (for tests and the system's own lines). */
  static int utf8Length(String text) {
    return text.getBytes(StandardCharsets.UTF_8).length;
  }

  /**
   * A line's text is at most this long once written as a JSON string: a line of control characters
   * (each written as a six-character escape) is cut shorter than {@link Limits#maxLineBytes()}, so
   * one line always fits a frame.
   */
  static final int MAX_LINE_JSON = 32 * 1024;

  /** How long {@code text} is as a JSON string's content. */
  static int jsonLength(String text) {
    int n = 0;
    for (int i = 0; i < text.length(); i++) {
      char c = text.charAt(i);
      n += c < 0x20 ? 6 : (c == '"' || c == '\\') ? 2 : 1;
    }
    return n;
  }

  private static String shorten(String text) {
    int budget = MAX_LINE_JSON - CUT_MARKER.length();
    int n = 0;
    int i = 0;
    for (; i < text.length(); i++) {
      char c = text.charAt(i);
      n += c < 0x20 ? 6 : (c == '"' || c == '\\') ? 2 : 1;
      if (n > budget) break;
    }
    if (i > 0 && Character.isHighSurrogate(text.charAt(i - 1))) i--;
    return text.substring(0, i) + CUT_MARKER;
  }
}
