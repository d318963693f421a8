package dev.tickmark.wire;

import com.fasterxml.jackson.annotation.JsonInclude;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.PropertyNamingStrategies;
import com.fasterxml.jackson.module.paramnames.ParameterNamesModule;

/** Reading and writing agent frames: snake_case JSON, strict on input, nulls left out on output. */
public final class Frames {
  public static final ObjectMapper MAPPER =
      new ObjectMapper()
          .registerModule(new ParameterNamesModule())
          .setPropertyNamingStrategy(PropertyNamingStrategies.SNAKE_CASE)
          .setSerializationInclusion(JsonInclude.Include.NON_NULL)
          .enable(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES)
          .enable(DeserializationFeature.FAIL_ON_TRAILING_TOKENS);

  private Frames() {}

  /** Thrown for a frame that is not valid JSON or not a known frame type with the right fields. */
  public static final class MalformedFrame extends Exception {
    public MalformedFrame(String message) {
      super(message);
    }
  }

  /** Reads a frame; U+0000 in any of its strings reads as U+FFFD (see {@link #withoutNul}). */
  public static AgentFrame read(String text) throws MalformedFrame {
    try {
      AgentFrame frame = MAPPER.readValue(withoutNul(text), AgentFrame.class);
      if (frame == null) throw new MalformedFrame("empty frame");
      return frame;
    } catch (JsonProcessingException e) {
      String reason = e.getOriginalMessage();
      throw new MalformedFrame(
          reason == null
              ? "not a valid frame"
              : reason.lines().findFirst().orElse("not a valid frame"));
    }
  }

  /**
   * {@code json} with each escape {@code \\u0000} (the only way JSON text holds U+0000) turned into
   * {@code \\uFFFD}, the character a byte that is not UTF-8 already becomes: PostgreSQL cannot
   * store U+0000 in text, so a workload that printed a NUL byte made its log lines unstorable, and
   * the engine closed the host's session again on every resend of them. An escaped backslash
   * followed by the letters {@code u0000} is text like any other and stays.
   */
  static String withoutNul(String json) {
    if (!json.contains("\\u0000")) return json; // the usual frame: nothing to look at twice
    StringBuilder out = null;
    int copied = 0;
    for (int i = 0; i < json.length() - 1; i++) {
      if (json.charAt(i) != '\\') continue;
      if (json.startsWith("u0000", i + 1)) {
        if (out == null) out = new StringBuilder(json.length());
        out.append(json, copied, i).append("\\uFFFD");
        copied = i + 6;
        i += 5;
      } else {
        i++; // the escaped character: never the start of another escape
      }
    }
    return out == null ? json : out.append(json, copied, json.length()).toString();
  }

  public static String write(AgentFrame frame) {
    try {
      return MAPPER.writeValueAsString(frame);
    } catch (JsonProcessingException e) {
      throw new IllegalStateException("cannot write frame " + frame.getClass().getSimpleName(), e);
    }
  }

  /** The report as the JSON tree the agent sends and signs. */
  public static JsonNode reportTree(HardwareReport report) {
    return MAPPER.valueToTree(report);
  }

  public static HardwareReport readReport(JsonNode tree) throws MalformedFrame {
    try {
      return MAPPER.treeToValue(tree, HardwareReport.class);
    } catch (JsonProcessingException | IllegalArgumentException e) {
      throw new MalformedFrame(
          "hardware report: " + e.getMessage().lines().findFirst().orElse("invalid"));
    }
  }
}
