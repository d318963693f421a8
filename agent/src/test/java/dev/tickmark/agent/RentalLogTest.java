package dev.tickmark.agent;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.tickmark.wire.AgentFrame;
import java.io.ByteArrayInputStream;
import java.nio.charset.StandardCharsets;
import java.time.Clock;
import java.util.List;
import org.junit.jupiter.api.Test;

/** A rental's log on the agent: numbering, the rate bound, cut lines, the bounded buffer, acks. */
class RentalLogTest {
  private static RentalLog log(RentalLog.Limits limits) {
    return new RentalLog("rnt_1", limits, Clock.systemUTC());
  }

  /** A log whose rate bucket reads its time from {@code nanos[0]}. */
  private static RentalLog log(RentalLog.Limits limits, long[] nanos) {
    return new RentalLog(
        "rnt_1", limits, Clock.systemUTC(), RentalLog.SeqStore.NONE, () -> nanos[0]);
  }

  private static List<String> texts(List<AgentFrame.LogLine> lines) {
    return lines.stream().map(AgentFrame.LogLine::text).toList();
  }

  @Test
  void numbersLinesFromOneInTheOrderTheyCameWithTheirStream() {
    RentalLog log = log(RentalLog.Limits.DEFAULT);
    log.append(RentalLog.Stream.STDOUT, "a", 1);
    log.append(RentalLog.Stream.STDERR, "b", 1);
    log.append(RentalLog.Stream.STDOUT, "c", 1);

    List<AgentFrame.LogLine> batch = log.batch(64 * 1024);

    assertEquals(List.of(1L, 2L, 3L), batch.stream().map(AgentFrame.LogLine::seq).toList());
    assertEquals(List.of("a", "b", "c"), texts(batch));
    assertEquals(
        List.of("stdout", "stderr", "stdout"),
        batch.stream().map(AgentFrame.LogLine::stream).toList());
    batch.forEach(l -> java.time.Instant.parse(l.at()));
    assertEquals(List.of(), log.batch(64 * 1024), "sent: nothing more until new lines come");
  }

  @Test
  void outputOverTheRateIsDroppedAndOneSystemLineSaysHowManyBytes() {
    // 100 bytes/s, a full bucket of 100: five lines of 19 bytes (20 with the line end) pass; the
    // bucket's time stands still, so none refills in between however slow the machine
    RentalLog log = log(new RentalLog.Limits(100, 16 * 1024, 10_000, 1 << 22), new long[] {0});
    for (int i = 0; i < 12; i++)
      log.append(RentalLog.Stream.STDOUT, "x".repeat(18) + (char) ('a' + i), 19);
    log.close();

    List<String> texts = texts(log.batch(1 << 20));

    assertEquals(6, texts.size(), texts.toString());
    for (int i = 0; i < 5; i++) assertEquals("x".repeat(18) + (char) ('a' + i), texts.get(i));
    assertEquals(
        "tickmark: 140 bytes of output dropped (more than 100 bytes/s)",
        texts.get(5),
        "one line for the whole episode: seven lines of 20 bytes");
  }

  /**
   * The bucket's time moves only when the test says: with the system's, 8 ms between the first two
   * lines (a loaded CI machine) refilled enough for "dropped" to pass, and the test failed.
   */
  @Test
  void aSecondOverflowEpisodeGetsItsOwnLineBeforeTheNextLineLetThrough() {
    long[] nanos = {0};
    RentalLog log = log(new RentalLog.Limits(1000, 16 * 1024, 10_000, 1 << 22), nanos);
    log.append(RentalLog.Stream.STDOUT, "x".repeat(999), 999); // the whole bucket
    log.append(RentalLog.Stream.STDOUT, "dropped", 7);
    // an episode lasts until the bucket is half full again: 600 ms give back 600 bytes
    nanos[0] += 600_000_000;
    log.append(RentalLog.Stream.STDOUT, "later", 5);

    List<String> texts = texts(log.batch(1 << 20));
    assertEquals(3, texts.size(), texts.toString());
    assertEquals(
        "tickmark: 8 bytes of output dropped (more than 1000 bytes/s)",
        texts.get(1),
        texts.toString());
    assertEquals("later", texts.get(2));
  }

  @Test
  void theReaderCutsLongLinesWithAMarkerAndKeepsBothLineEndsAndALastUnfinishedLine() {
    RentalLog log = log(new RentalLog.Limits(1 << 20, 8, 10_000, 1 << 22));
    byte[] input = "short\r\n0123456789abcdef\nnext\nno-end".getBytes(StandardCharsets.UTF_8);

    LineReader.pump(new ByteArrayInputStream(input), RentalLog.Stream.STDERR, log);

    assertEquals(
        List.of("short", "01234567" + RentalLog.CUT_MARKER, "next", "no-end"),
        texts(log.batch(1 << 20)));
  }

  @Test
  void theReaderTurnsNulBytesAndBytesThatAreNotUtf8IntoReplacementCharacters() {
    RentalLog log = log(new RentalLog.Limits(1 << 20, 1024, 10_000, 1 << 22));
    byte[] input = {'a', 0, 'b', '\n', 'c', (byte) 0xff, 'd', '\n', 0, '\n', 'e', '\n'};

    LineReader.pump(new ByteArrayInputStream(input), RentalLog.Stream.STDOUT, log);

    assertEquals(List.of("a\uFFFDb", "c\uFFFDd", "\uFFFD", "e"), texts(log.batch(1 << 20)));
  }

  @Test
  void keepsLinesUntilAcknowledgedResendsThemOnANewSessionAndForgetsThemOnceStored() {
    RentalLog log = log(RentalLog.Limits.DEFAULT);
    for (int i = 1; i <= 5; i++) log.append(RentalLog.Stream.STDOUT, "l" + i, 2);
    assertEquals(5, log.batch(1 << 20).size());
    log.ack(3);

    log.resend(); // a new session

    assertEquals(List.of("l4", "l5"), texts(log.batch(1 << 20)), "what was not acknowledged");
    log.ack(5);
    log.close();
    assertTrue(log.finished());
  }

  @Test
  void aLogOpenedAgainAfterARestartContinuesAboveTheSeqsTheEarlierRunReserved(
      @org.junit.jupiter.api.io.TempDir java.nio.file.Path dir) {
    java.nio.file.Path rental = dir.resolve("rentals/rnt_1");
    RentalLog first =
        new RentalLog(
            "rnt_1", RentalLog.Limits.DEFAULT, Clock.systemUTC(), LogShipper.seqFile(rental));
    first.append(RentalLog.Stream.STDOUT, "before", 6);
    assertEquals(1, first.batch(1 << 20).get(0).seq());

    RentalLog again = // the agent restarted
        new RentalLog(
            "rnt_1", RentalLog.Limits.DEFAULT, Clock.systemUTC(), LogShipper.seqFile(rental));
    again.append(RentalLog.Stream.SYSTEM, "after", 5);

    List<AgentFrame.LogLine> lines = again.batch(1 << 20);
    assertEquals(1, lines.size(), "the earlier run's lines are not the new run's to send");
    assertEquals(RentalLog.SEQ_BLOCK + 1, lines.get(0).seq(), "never a seq the engine may hold");
  }

  @Test
  void aFullBufferDropsTheOldestUnacknowledgedLinesAndSaysSo() {
    RentalLog log = log(new RentalLog.Limits(1 << 20, 16 * 1024, 3, 1 << 22));
    for (int i = 1; i <= 5; i++) log.append(RentalLog.Stream.STDOUT, "l" + i, 2);

    List<AgentFrame.LogLine> batch = log.batch(1 << 20);

    assertEquals(
        List.of(
            "l4",
            "l5",
            "tickmark: 3 line(s) dropped: the engine had not acknowledged them and the agent's buffer was full"),
        texts(batch),
        "l1, l2 went for l4, l5; l3 for the note itself");
    assertEquals(List.of(4L, 5L, 6L), batch.stream().map(AgentFrame.LogLine::seq).toList());
  }

  @Test
  void batchesStayWithinTheirSizeCountingJsonEscapes() {
    RentalLog log = log(RentalLog.Limits.DEFAULT);
    String controls = "\u001b".repeat(10_000); // 60,000 characters as JSON: cut to fit a frame
    log.append(RentalLog.Stream.STDOUT, controls, controls.length());
    log.append(RentalLog.Stream.STDOUT, controls, controls.length());

    List<AgentFrame.LogLine> first = log.batch(LogShipper.MAX_BATCH_CHARS);
    List<AgentFrame.LogLine> second = log.batch(LogShipper.MAX_BATCH_CHARS);

    assertEquals(1, first.size());
    assertTrue(first.get(0).text().endsWith(RentalLog.CUT_MARKER));
    assertTrue(RentalLog.jsonLength(first.get(0).text()) <= RentalLog.MAX_LINE_JSON);
    assertTrue(
        dev.tickmark.wire.Frames.write(new AgentFrame.Logs("rnt_1", first)).length() < 64 * 1024);
    assertEquals(1, second.size(), "two cut lines do not fit one batch");
    assertFalse(log.hasUnsent());
  }
}
