package dev.tickmark.http;

import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import org.apache.pekko.util.ByteString;
import org.junit.jupiter.api.Test;

class JsonNulTest {
  record Named(String name) {}

  @Test
  void jsonTextWithANulIsRefusedAsAnInvalidField() {
    Problem p =
        assertThrows(
            Problem.class,
            () -> Json.read(ByteString.fromString("{\"name\":\"a\\u0000\"}"), Named.class));
    assertEquals("invalid_field", p.code());
    assertThrows(Problem.class, () -> Json.tree(ByteString.fromString("{\"\\u0000\":1}")));
  }

  @Test
  void anEscapedBackslashBeforeU0000IsText() {
    Named n =
        assertDoesNotThrow(
            () -> Json.read(ByteString.fromString("{\"name\":\"a\\\\u0000\"}"), Named.class));
    assertEquals("a\\u0000", n.name());
  }
}
