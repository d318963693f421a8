package dev.tickmark.agent;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;

/** Captured tool outputs under src/test/resources. */
final class Fixtures {
  private Fixtures() {}

  static String read(String path) {
    try (InputStream in = Fixtures.class.getResourceAsStream("/" + path)) {
      if (in == null) throw new IllegalArgumentException("no fixture " + path);
      return new String(in.readAllBytes(), StandardCharsets.UTF_8);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }
}
