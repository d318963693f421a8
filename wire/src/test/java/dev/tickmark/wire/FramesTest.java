package dev.tickmark.wire;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.List;
import org.junit.jupiter.api.Test;

class FramesTest {
  @Test
  void aNulInALogLineReadsAsTheReplacementCharacterAndTheRestOfTheFrameIsKept() throws Exception {
    // what an agent of before 2026-12-07 sent for a workload that printed "a", NUL, "b"
    String sent =
        "{\"type\":\"logs\",\"rental_id\":\"rnt_1\",\"lines\":[{\"seq\":1,"
            + "\"at\":\"2026-12-07T12:00:00Z\",\"stream\":\"stdout\",\"text\":\"a\\u0000b\\u0000\"},"
            + "{\"seq\":2,\"at\":\"2026-12-07T12:00:00Z\",\"stream\":\"stderr\",\"text\":\"plain\"}]}";

    AgentFrame.Logs logs = assertInstanceOf(AgentFrame.Logs.class, Frames.read(sent));

    assertEquals("rnt_1", logs.rentalId());
    assertEquals(
        List.of("a\uFFFDb\uFFFD", "plain"), logs.lines().stream().map(l -> l.text()).toList());
  }

  @Test
  void anEscapedBackslashBeforeTheLettersU0000IsTextAndStays() throws Exception {
    // JSON "a\\u0000\\\u0000": a backslash and the letters u0000, then a backslash and a NUL
    String sent =
        "{\"type\":\"logs\",\"rental_id\":\"rnt_1\",\"lines\":[{\"seq\":1,"
            + "\"at\":\"2026-12-07T12:00:00Z\",\"stream\":\"stdout\","
            + "\"text\":\"a\\\\u0000\\\\\\u0000\"}]}";

    AgentFrame.Logs logs = assertInstanceOf(AgentFrame.Logs.class, Frames.read(sent));

    assertEquals("a\\u0000\\\uFFFD", logs.lines().get(0).text());
  }

  @Test
  void aFrameWithoutNulIsReadAsItCame() throws Exception {
    String sent = "{\"type\":\"logs_ack\",\"rental_id\":\"rnt_1\",\"through_seq\":3}";
    assertSame(sent, Frames.withoutNul(sent));
    assertEquals(new AgentFrame.LogsAck("rnt_1", 3), Frames.read(sent));
  }

  @Test
  void aNulInTheTypeStillLeavesAFrameOfNoKnownType() {
    assertThrows(
        Frames.MalformedFrame.class,
        () -> Frames.read("{\"type\":\"heartbeat\\u0000\",\"at\":\"2026-12-07T12:00:00Z\"}"));
  }
}
