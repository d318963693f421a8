package dev.tickmark.wire;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;

/**
 * The bytes a signature covers: JSON with object keys sorted by code point, no insignificant
 * whitespace, strings escaped as Jackson writes them, numbers as parsed. Both the agent and the
 * node compute it from the same tree, so a report survives any re-formatting in transit, and any
 * change to a value breaks the signature.
 */
public final class CanonicalJson {
  private static final ObjectMapper MAPPER = new ObjectMapper();

  private CanonicalJson() {}

  public static byte[] bytes(JsonNode node) {
    StringBuilder sb = new StringBuilder(256);
    write(node, sb);
    return sb.toString().getBytes(StandardCharsets.UTF_8);
  }

  public static byte[] bytes(Object value) {
    return bytes(MAPPER.valueToTree(value));
  }

  private static void write(JsonNode node, StringBuilder sb) {
    if (node.isObject()) {
      List<String> names = new ArrayList<>();
      node.fieldNames().forEachRemaining(names::add);
      names.sort(null);
      sb.append('{');
      for (int i = 0; i < names.size(); i++) {
        if (i > 0) sb.append(',');
        sb.append(quote(names.get(i))).append(':');
        write(node.get(names.get(i)), sb);
      }
      sb.append('}');
    } else if (node.isArray()) {
      sb.append('[');
      Iterator<JsonNode> it = node.elements();
      boolean first = true;
      while (it.hasNext()) {
        if (!first) sb.append(',');
        first = false;
        write(it.next(), sb);
      }
      sb.append(']');
    } else {
      try {
        sb.append(MAPPER.writeValueAsString(node));
      } catch (JsonProcessingException e) {
        throw new IllegalArgumentException("cannot canonicalise JSON value", e);
      }
    }
  }

  private static String quote(String s) {
    try {
      return MAPPER.writeValueAsString(s);
    } catch (JsonProcessingException e) {
      throw new IllegalArgumentException(e);
    }
  }
}
