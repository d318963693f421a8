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

  public static AgentFrame read(String text) throws MalformedFrame {
    try {
      AgentFrame frame = MAPPER.readValue(text, AgentFrame.class);
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
