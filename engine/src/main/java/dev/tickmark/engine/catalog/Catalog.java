package dev.tickmark.engine.catalog;

import com.fasterxml.jackson.core.JsonLocation;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.InputStream;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Pattern;

/**
 * The read-only market catalog: GPU models and regions, each keyed by a code ({@code h100-80gb},
 * {@code eu-nl}). It ships as the data file {@code catalog.json} on the engine's classpath and is
 * validated as a whole when loaded: a bad file stops the node with an {@link InvalidCatalog} that
 * names the file, the entry and the field, rather than letting a typo reach the market.
 *
 * <p>File format (snake_case, unknown fields refused, duplicate keys refused):
 *
 * <pre>{@code
 * {"about": "optional free text",
 *  "gpus": [{"code", "name", "vendor": "nvidia"|"amd", "architecture", "vram_gb", "vram_mib",
 *            "memory_type", "bandwidth_gb_per_s", "fp16_tflops", "smi_names": [...]}],
 *  "regions": [{"code", "name", "location"}]}
 * }</pre>
 *
 * <p>Rules: at least one GPU and one region; codes match {@code [a-z0-9][a-z0-9-]*} and are unique
 * (per kind); every number is a positive integer; {@code vram_mib} lies within 90–100% of {@code
 * vram_gb × 1024} (what the tools report is the marketed size less reserved memory, so a value
 * outside that band is a typo); every model lists at least one {@code smi_names} entry and no name
 * (trimmed, ignoring case) belongs to two models, so {@link #bySmiName} is unambiguous.
 */
public final class Catalog {

  /**
   * A GPU model as sold on the market. {@code vramMib} is what the vendor tool reports as total
   * memory.
   */
  public record GpuModel(
      String code,
      String name,
      String vendor,
      String architecture,
      int vramGb,
      long vramMib,
      String memoryType,
      int bandwidthGbPerS,
      int fp16Tflops,
      List<String> smiNames) {
    public GpuModel {
      smiNames = smiNames == null ? List.of() : List.copyOf(smiNames);
    }
  }

  public record Region(String code, String name, String location) {}

  /**
   * The catalog file is unreadable or breaks a rule; the message says which file, entry and field.
   */
  public static final class InvalidCatalog extends IllegalStateException {
    public InvalidCatalog(String message) {
      super(message);
    }

    public InvalidCatalog(String message, Throwable cause) {
      super(message, cause);
    }
  }

  /** Where {@link #load()} reads the shipped catalog from. */
  public static final String RESOURCE = "/catalog.json";

  public static final String VENDOR_NVIDIA = "nvidia";
  public static final String VENDOR_AMD = "amd";

  private static final Set<String> VENDORS = Set.of(VENDOR_NVIDIA, VENDOR_AMD);
  private static final Pattern CODE = Pattern.compile("[a-z0-9][a-z0-9-]*");
  private static final Set<String> TOP_FIELDS = Set.of("about", "gpus", "regions");
  private static final List<String> GPU_FIELDS =
      List.of(
          "code",
          "name",
          "vendor",
          "architecture",
          "vram_gb",
          "vram_mib",
          "memory_type",
          "bandwidth_gb_per_s",
          "fp16_tflops",
          "smi_names");
  private static final List<String> REGION_FIELDS = List.of("code", "name", "location");

  private static final ObjectMapper MAPPER =
      new ObjectMapper()
          .enable(JsonParser.Feature.STRICT_DUPLICATE_DETECTION)
          .enable(DeserializationFeature.FAIL_ON_TRAILING_TOKENS);

  private static volatile Catalog shipped;

  private final String source;
  private final List<GpuModel> gpus;
  private final List<Region> regions;
  private final Map<String, GpuModel> gpusByCode;
  private final Map<String, Region> regionsByCode;
  private final Map<String, GpuModel> gpusBySmiName;

  private Catalog(
      String source,
      List<GpuModel> gpus,
      List<Region> regions,
      Map<String, GpuModel> gpusBySmiName) {
    this.source = source;
    this.gpus = List.copyOf(gpus);
    this.regions = List.copyOf(regions);
    Map<String, GpuModel> g = new LinkedHashMap<>();
    for (GpuModel m : gpus) g.put(m.code(), m);
    Map<String, Region> r = new LinkedHashMap<>();
    for (Region region : regions) r.put(region.code(), region);
    this.gpusByCode = Collections.unmodifiableMap(g);
    this.regionsByCode = Collections.unmodifiableMap(r);
    this.gpusBySmiName = Map.copyOf(gpusBySmiName);
  }

  /**
   * The catalog shipped on the classpath ({@value #RESOURCE}), parsed and validated once and then
   * shared (it is immutable).
   *
   * @throws InvalidCatalog if the file is missing or invalid
   */
  public static Catalog load() {
    Catalog c = shipped;
    if (c == null) {
      String src = "classpath:" + RESOURCE;
      try (InputStream in = Catalog.class.getResourceAsStream(RESOURCE)) {
        if (in == null) throw new InvalidCatalog(src + ": not found on the classpath");
        c = parse(in, src);
      } catch (IOException e) {
        throw new InvalidCatalog(src + ": cannot be read: " + e.getMessage(), e);
      }
      shipped = c;
    }
    return c;
  }

  /**
   * Parses and validates a catalog. {@code source} names the file in error messages.
   *
   * @throws InvalidCatalog for malformed JSON or any broken rule
   */
  public static Catalog parse(InputStream json, String source) {
    Objects.requireNonNull(json, "json");
    String src = source == null || source.isBlank() ? "catalog" : source;
    JsonNode root;
    try {
      root = MAPPER.readTree(json);
    } catch (JsonProcessingException e) {
      throw new InvalidCatalog(
          src
              + ": malformed JSON"
              + where(e.getLocation())
              + ": "
              + firstLine(e.getOriginalMessage()),
          e);
    } catch (IOException e) {
      throw new InvalidCatalog(src + ": cannot be read: " + e.getMessage(), e);
    }
    if (root == null || root.isMissingNode()) throw new InvalidCatalog(src + ": is empty");
    if (!root.isObject()) {
      throw new InvalidCatalog(
          src
              + ": the top level must be a JSON object with \"gpus\" and \"regions\", got "
              + kind(root));
    }
    rejectUnknownFields(root, TOP_FIELDS, src + ": top level");
    JsonNode about = root.get("about");
    if (about != null && !about.isTextual())
      throw new InvalidCatalog(src + ": \"about\" must be a string, got " + kind(about));

    JsonNode gpusNode = nonEmptyArray(root, "gpus", src);
    List<GpuModel> gpus = new ArrayList<>();
    Map<String, Integer> gpuCodes = new HashMap<>();
    Map<String, Integer> smiOwners = new HashMap<>();
    Map<String, GpuModel> bySmi = new HashMap<>();
    for (int i = 0; i < gpusNode.size(); i++) {
      String at = src + ": gpus[" + i + "]";
      GpuModel m = gpu(gpusNode.get(i), at);
      String ctx = at + " (\"" + m.code() + "\")";
      Integer previous = gpuCodes.putIfAbsent(m.code(), i);
      if (previous != null)
        throw new InvalidCatalog(
            ctx + ": duplicate code \"" + m.code() + "\", already used by gpus[" + previous + "]");
      for (String name : m.smiNames()) {
        String key = smiKey(name);
        Integer owner = smiOwners.putIfAbsent(key, i);
        if (owner != null) {
          throw new InvalidCatalog(
              owner == i
                  ? ctx + ": \"smi_names\" lists \"" + name + "\" twice"
                  : ctx
                      + ": smi name \""
                      + name
                      + "\" is already claimed by gpus["
                      + owner
                      + "] (\""
                      + gpus.get(owner).code()
                      + "\"); a reported name must identify exactly one model");
        }
        bySmi.put(key, m);
      }
      gpus.add(m);
    }

    JsonNode regionsNode = nonEmptyArray(root, "regions", src);
    List<Region> regions = new ArrayList<>();
    Map<String, Integer> regionCodes = new HashMap<>();
    for (int i = 0; i < regionsNode.size(); i++) {
      String at = src + ": regions[" + i + "]";
      Region r = region(regionsNode.get(i), at);
      Integer previous = regionCodes.putIfAbsent(r.code(), i);
      if (previous != null) {
        throw new InvalidCatalog(
            at
                + " (\""
                + r.code()
                + "\"): duplicate code \""
                + r.code()
                + "\", already used by regions["
                + previous
                + "]");
      }
      regions.add(r);
    }
    return new Catalog(src, gpus, regions, bySmi);
  }

  /** Where this catalog was read from (for logs). */
  public String source() {
    return source;
  }

  public List<GpuModel> gpus() {
    return gpus;
  }

  public List<Region> regions() {
    return regions;
  }

  public Optional<GpuModel> gpu(String code) {
    return code == null ? Optional.empty() : Optional.ofNullable(gpusByCode.get(code));
  }

  public Optional<Region> region(String code) {
    return code == null ? Optional.empty() : Optional.ofNullable(regionsByCode.get(code));
  }

  /**
   * The model whose {@code smi_names} contains the name a vendor tool reported: an exact match
   * after trimming, ignoring case. No partial or fuzzy matching: an unlisted name is unknown.
   */
  public Optional<GpuModel> bySmiName(String reportedName) {
    return reportedName == null
        ? Optional.empty()
        : Optional.ofNullable(gpusBySmiName.get(smiKey(reportedName)));
  }

  @Override
  public String toString() {
    return "Catalog["
        + source
        + ": "
        + gpus.size()
        + " GPU models, "
        + regions.size()
        + " regions]";
  }

  // ---------------------------------------------------------------------------------------------

  private static String smiKey(String name) {
    return name.trim().toLowerCase(Locale.ROOT);
  }

  private static GpuModel gpu(JsonNode node, String at) {
    if (!node.isObject())
      throw new InvalidCatalog(at + ": must be a JSON object, got " + kind(node));
    String code = code(node, at);
    String ctx = at + " (\"" + code + "\")";
    rejectUnknownFields(node, Set.copyOf(GPU_FIELDS), ctx);
    String name = text(node, "name", ctx);
    String vendor = text(node, "vendor", ctx);
    if (!VENDORS.contains(vendor)) {
      throw new InvalidCatalog(
          ctx
              + ": \"vendor\" must be one of "
              + quoted(new TreeSet<>(VENDORS))
              + ", got \""
              + vendor
              + "\"");
    }
    String architecture = text(node, "architecture", ctx);
    int vramGb = positiveInt(node, "vram_gb", ctx);
    long vramMib = positiveLong(node, "vram_mib", ctx);
    long marketedMib = vramGb * 1024L;
    if (vramMib > marketedMib || vramMib * 10 < marketedMib * 9) {
      throw new InvalidCatalog(
          ctx
              + ": \"vram_mib\" "
              + vramMib
              + " does not fit \"vram_gb\" "
              + vramGb
              + ": it must lie within 90-100% of "
              + vramGb
              + " x 1024 = "
              + marketedMib
              + " MiB");
    }
    String memoryType = text(node, "memory_type", ctx);
    int bandwidth = positiveInt(node, "bandwidth_gb_per_s", ctx);
    int fp16 = positiveInt(node, "fp16_tflops", ctx);
    JsonNode names = node.get("smi_names");
    if (names == null) throw new InvalidCatalog(ctx + ": missing field \"smi_names\"");
    if (!names.isArray())
      throw new InvalidCatalog(
          ctx + ": \"smi_names\" must be an array of strings, got " + kind(names));
    if (names.isEmpty()) {
      throw new InvalidCatalog(
          ctx
              + ": \"smi_names\" is empty; list the name(s) nvidia-smi or rocm-smi reports for this model");
    }
    List<String> smiNames = new ArrayList<>();
    for (int j = 0; j < names.size(); j++) {
      JsonNode n = names.get(j);
      if (!n.isTextual() || n.asText().isBlank()) {
        throw new InvalidCatalog(
            ctx + ": \"smi_names\"[" + j + "] must be a non-empty string, got " + kind(n));
      }
      smiNames.add(n.asText().trim());
    }
    return new GpuModel(
        code, name, vendor, architecture, vramGb, vramMib, memoryType, bandwidth, fp16, smiNames);
  }

  private static Region region(JsonNode node, String at) {
    if (!node.isObject())
      throw new InvalidCatalog(at + ": must be a JSON object, got " + kind(node));
    String code = code(node, at);
    String ctx = at + " (\"" + code + "\")";
    rejectUnknownFields(node, Set.copyOf(REGION_FIELDS), ctx);
    return new Region(code, text(node, "name", ctx), text(node, "location", ctx));
  }

  private static String code(JsonNode node, String at) {
    String code = text(node, "code", at);
    if (!CODE.matcher(code).matches()) {
      throw new InvalidCatalog(
          at
              + ": \"code\" \""
              + code
              + "\" must be lowercase letters, digits and dashes, starting with a letter or digit ([a-z0-9][a-z0-9-]*)");
    }
    return code;
  }

  private static JsonNode nonEmptyArray(JsonNode root, String field, String src) {
    JsonNode node = root.get(field);
    if (node == null) throw new InvalidCatalog(src + ": missing top-level field \"" + field + "\"");
    if (!node.isArray())
      throw new InvalidCatalog(src + ": \"" + field + "\" must be an array, got " + kind(node));
    if (node.isEmpty())
      throw new InvalidCatalog(
          src + ": \"" + field + "\" is empty; the catalog needs at least one entry");
    return node;
  }

  private static void rejectUnknownFields(JsonNode node, Set<String> known, String ctx) {
    Iterator<String> names = node.fieldNames();
    while (names.hasNext()) {
      String name = names.next();
      if (!known.contains(name)) {
        throw new InvalidCatalog(
            ctx
                + ": unknown field \""
                + name
                + "\" (known fields: "
                + quoted(new TreeSet<>(known))
                + ")");
      }
    }
  }

  private static String text(JsonNode node, String field, String ctx) {
    JsonNode v = node.get(field);
    if (v == null) throw new InvalidCatalog(ctx + ": missing field \"" + field + "\"");
    if (!v.isTextual())
      throw new InvalidCatalog(ctx + ": \"" + field + "\" must be a string, got " + kind(v));
    if (v.asText().isBlank()) throw new InvalidCatalog(ctx + ": \"" + field + "\" is blank");
    return v.asText();
  }

  private static int positiveInt(JsonNode node, String field, String ctx) {
    long value = positiveLong(node, field, ctx);
    if (value > Integer.MAX_VALUE) {
      throw new InvalidCatalog(
          ctx
              + ": \""
              + field
              + "\" must be a positive integer of at most "
              + Integer.MAX_VALUE
              + ", got "
              + value);
    }
    return (int) value;
  }

  private static long positiveLong(JsonNode node, String field, String ctx) {
    JsonNode v = node.get(field);
    if (v == null) throw new InvalidCatalog(ctx + ": missing field \"" + field + "\"");
    if (!v.isIntegralNumber() || !v.canConvertToLong()) {
      throw new InvalidCatalog(
          ctx + ": \"" + field + "\" must be a positive integer, got " + kind(v));
    }
    long value = v.asLong();
    if (value <= 0)
      throw new InvalidCatalog(
          ctx + ": \"" + field + "\" must be a positive integer, got " + value);
    return value;
  }

  private static String kind(JsonNode v) {
    if (v == null || v.isMissingNode()) return "nothing";
    if (v.isNull()) return "null";
    if (v.isTextual()) return "the string \"" + v.asText() + "\"";
    if (v.isNumber()) return "the number " + v.toString();
    if (v.isBoolean()) return "the boolean " + v.asText();
    if (v.isArray()) return "an array";
    if (v.isObject()) return "an object";
    return v.getNodeType().name().toLowerCase(Locale.ROOT);
  }

  private static String quoted(Iterable<String> values) {
    StringBuilder sb = new StringBuilder();
    for (String v : values) {
      if (sb.length() > 0) sb.append(", ");
      sb.append('"').append(v).append('"');
    }
    return sb.toString();
  }

  private static String where(JsonLocation location) {
    if (location == null || location.getLineNr() < 0) return "";
    return " at line " + location.getLineNr() + ", column " + location.getColumnNr();
  }

  private static String firstLine(String message) {
    if (message == null) return "unreadable";
    return message.lines().findFirst().orElse("unreadable");
  }
}
