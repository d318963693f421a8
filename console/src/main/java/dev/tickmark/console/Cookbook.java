package dev.tickmark.console;

import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.InputStream;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Set;
import java.util.regex.Pattern;

/**
 * The console's cookbook: open models with the figures the estimator needs, shipped as {@code
 * tickmark-console/cookbook.json} and read as is by the browser. This class loads and validates it,
 * so that a typo in the data file fails a test instead of showing a wrong card on the page.
 */
public final class Cookbook {
  public static final String RESOURCE = "tickmark-console/cookbook.json";

  private static final Pattern ID = Pattern.compile("[a-z0-9][a-z0-9.-]*");
  private static final Set<String> FIELDS =
      Set.of(
          "id",
          "name",
          "family",
          "source",
          "total_params_b",
          "active_params_b",
          "layers",
          "kv_heads",
          "head_dim",
          "max_context",
          "note");

  /**
   * One model: parameters in billions, and the KV cache's shape (per token and layer the cache
   * holds a key and a value of {@code kvHeads × headDim} elements).
   */
  public record Model(
      String id,
      String name,
      String family,
      String source,
      double totalParamsB,
      double activeParamsB,
      int layers,
      int kvHeads,
      int headDim,
      int maxContext,
      String note) {}

  /** The data file breaks a rule; the message names the model and the field. */
  public static final class InvalidCookbook extends IllegalStateException {
    public InvalidCookbook(String message) {
      super(message);
    }
  }

  private Cookbook() {}

  /** The shipped cookbook, validated. */
  public static List<Model> load() {
    try (InputStream in = Cookbook.class.getClassLoader().getResourceAsStream(RESOURCE)) {
      if (in == null) throw new InvalidCookbook("no " + RESOURCE + " on the classpath");
      return parse(in.readAllBytes());
    } catch (IOException e) {
      throw new InvalidCookbook("cannot read " + RESOURCE + ": " + e.getMessage());
    }
  }

  /** Parses and validates a cookbook document. */
  public static List<Model> parse(byte[] json) {
    JsonNode root;
    try {
      root =
          new ObjectMapper()
              .enable(DeserializationFeature.FAIL_ON_READING_DUP_TREE_KEY)
              .readTree(json);
    } catch (IOException e) {
      throw new InvalidCookbook("not JSON: " + e.getMessage());
    }
    JsonNode models = root == null ? null : root.get("models");
    if (models == null || !models.isArray() || models.isEmpty())
      throw new InvalidCookbook("\"models\" must be a non-empty array");
    List<Model> out = new ArrayList<>();
    Set<String> ids = new HashSet<>();
    for (JsonNode m : models) {
      String id = text(m, "id", "model #" + (out.size() + 1));
      if (!ID.matcher(id).matches()) throw new InvalidCookbook(id + ": id must match " + ID);
      if (!ids.add(id)) throw new InvalidCookbook(id + ": duplicate id");
      for (Iterator<String> names = m.fieldNames(); names.hasNext(); ) {
        String name = names.next();
        if (!FIELDS.contains(name)) throw new InvalidCookbook(id + ": unknown field " + name);
      }
      String source = text(m, "source", id);
      if (!source.startsWith("https://"))
        throw new InvalidCookbook(id + ": source must be an https:// address");
      double total = positive(m, "total_params_b", id);
      double active = positive(m, "active_params_b", id);
      if (active > total)
        throw new InvalidCookbook(id + ": active_params_b is above total_params_b");
      JsonNode note = m.get("note");
      if (note != null && !note.isTextual()) throw new InvalidCookbook(id + ": note must be text");
      out.add(
          new Model(
              id,
              text(m, "name", id),
              text(m, "family", id),
              source,
              total,
              active,
              positiveInt(m, "layers", id),
              positiveInt(m, "kv_heads", id),
              positiveInt(m, "head_dim", id),
              positiveInt(m, "max_context", id),
              note == null ? null : note.asText()));
    }
    return List.copyOf(out);
  }

  private static String text(JsonNode m, String field, String where) {
    JsonNode v = m.get(field);
    if (v == null || !v.isTextual() || v.asText().isBlank())
      throw new InvalidCookbook(where + ": " + field + " must be non-empty text");
    return v.asText();
  }

  private static double positive(JsonNode m, String field, String id) {
    JsonNode v = m.get(field);
    if (v == null || !v.isNumber() || !(v.asDouble() > 0) || Double.isInfinite(v.asDouble()))
      throw new InvalidCookbook(id + ": " + field + " must be a positive number");
    return v.asDouble();
  }

  private static int positiveInt(JsonNode m, String field, String id) {
    JsonNode v = m.get(field);
    if (v == null || !v.isIntegralNumber() || !v.canConvertToInt() || v.asInt() <= 0)
      throw new InvalidCookbook(id + ": " + field + " must be a positive integer");
    return v.asInt();
  }
}
