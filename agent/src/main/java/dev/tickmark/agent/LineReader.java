package dev.tickmark.agent;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;

/**
 * Reads a workload's stream (a pipe) to its end, line by line, into its {@link RentalLog}: a line
 * ends at {@code \n} (a {@code \r} before it is dropped); a line longer than {@link
 * RentalLog.Limits#maxLineBytes()} is cut there, marked with {@link RentalLog#CUT_MARKER}, and the
 * rest of it skipped. Bytes that are not UTF-8 become U+FFFD, and so does a NUL byte (PostgreSQL
 * cannot store U+0000 in text; the engine reads one in a frame as U+FFFD too). The pipe is always
 * drained, so a workload never blocks on its output: what the rate does not allow is dropped by the
 * log.
 */
final class LineReader {
  private LineReader() {}

  /** Blocks until {@code in} ends (or fails); closes it. */
  static void pump(InputStream in, RentalLog.Stream stream, RentalLog log) {
    int max = log.limits().maxLineBytes();
    ByteArrayOutputStream line = new ByteArrayOutputStream(256);
    boolean skipping = false; // the rest of a cut line
    int skipped = 0;
    byte[] buf = new byte[8192];
    try (in) {
      int n;
      while ((n = in.read(buf)) >= 0) {
        for (int i = 0; i < n; i++) {
          byte b = buf[i];
          if (b == '\n') {
            if (skipping) {
              skipping = false;
              skipped = 0;
            } else {
              emit(line, stream, log, false);
            }
            continue;
          }
          if (skipping) {
            skipped++;
            continue;
          }
          line.write(b);
          if (line.size() >= max) {
            emit(line, stream, log, true);
            skipping = true;
          }
        }
      }
    } catch (IOException e) {
      // the pipe closed under us (the workload was killed): what was read is kept
    }
    if (line.size() > 0 && !skipping) emit(line, stream, log, false);
  }

  private static void emit(
      ByteArrayOutputStream line, RentalLog.Stream stream, RentalLog log, boolean cut) {
    byte[] bytes = line.toByteArray();
    line.reset();
    int len = bytes.length;
    if (!cut && len > 0 && bytes[len - 1] == '\r') len--;
    String text = new String(bytes, 0, len, StandardCharsets.UTF_8).replace('\0', '\uFFFD');
    log.append(stream, cut ? text + RentalLog.CUT_MARKER : text, bytes.length);
  }
}
