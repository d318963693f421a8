package dev.tickmark.agent;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.tickmark.wire.HardwareReport;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The {@code rocm-smi} command lines the agent runs and pure parsers of their {@code --json}
 * output: an object with one member per card ({@code "card0"}, {@code "card1"}, …) and a {@code
 * "system"} member. Key names and capitalisation differ between ROCm releases, so keys are matched
 * case-insensitively and several spellings are tried. What is read:
 *
 * <ul>
 *   <li>name: {@code Market Name}, else {@code Card Series}, else {@code Device Name} (a bare PCI
 *       id such as {@code 0x744c} is not a name and is skipped) — reported exactly as rocm-smi
 *       prints it;
 *   <li>uuid: {@code Unique ID}; VRAM: {@code VRAM Total Memory (B)} in MiB; driver: {@code Driver
 *       version} (card or system); temperature: the edge sensor, else the junction sensor;
 *   <li>runtime version: the ROCm release from {@code /opt/rocm/.info/version}, read separately;
 *   <li>not read (always null): uncorrected ECC errors and the PCIe link, which rocm-smi does not
 *       print in a stable, parseable form.
 * </ul>
 */
final class RocmSmi {
  static final String VENDOR = "amd";

  private static final ObjectMapper JSON = new ObjectMapper();
  private static final Pattern CARD = Pattern.compile("card([0-9]+)", Pattern.CASE_INSENSITIVE);
  private static final Pattern HEX_ID = Pattern.compile("0x[0-9a-fA-F]+");
  private static final Pattern VERSION = Pattern.compile("^([0-9]+(?:\\.[0-9]+)*)");
  private static final List<String> NAME_KEYS =
      List.of("Market Name", "Card Series", "Device Name");
  private static final List<String> TEMPERATURE_KEYS =
      List.of("Temperature (Sensor edge) (C)", "Temperature (Sensor junction) (C)");

  private RocmSmi() {}

  static List<String> reportCommand() {
    return List.of(
        "rocm-smi",
        "--showproductname",
        "--showmeminfo",
        "vram",
        "--showtemp",
        "--showdriverversion",
        "--showuniqueid",
        "--json");
  }

  static List<String> sampleCommand() {
    return List.of("rocm-smi", "--showuse", "--showtemp", "--json");
  }

  /** One card of the sample query. */
  record SampleRow(int index, Integer utilizationPercent, Integer temperatureC) {}

  /** The GPUs in rocm-smi's JSON, by card number; empty if the text holds no JSON object. */
  static List<HardwareReport.Gpu> parseGpus(String output, String runtimeVersion) {
    JsonNode root = parse(output);
    if (root == null) return List.of();
    String systemDriver = field(root.get("system"), List.of("Driver version"));
    List<HardwareReport.Gpu> gpus = new ArrayList<>();
    for (Map.Entry<Integer, JsonNode> card : cards(root)) {
      JsonNode c = card.getValue();
      String name = null;
      for (String key : NAME_KEYS) {
        String v = field(c, List.of(key));
        if (v != null && !HEX_ID.matcher(v).matches()) {
          name = v;
          break;
        }
      }
      Long vramBytes = NvidiaSmi.longValue(orEmpty(field(c, List.of("VRAM Total Memory (B)"))));
      String driver = field(c, List.of("Driver version"));
      gpus.add(
          new HardwareReport.Gpu(
              card.getKey(),
              field(c, List.of("Unique ID")),
              name,
              VENDOR,
              vramBytes == null ? null : vramBytes / (1024 * 1024),
              driver != null ? driver : systemDriver,
              runtimeVersion,
              NvidiaSmi.intValue(orEmpty(field(c, TEMPERATURE_KEYS))),
              null,
              null,
              null));
    }
    return gpus;
  }

  static List<SampleRow> parseSamples(String output) {
    JsonNode root = parse(output);
    if (root == null) return List.of();
    List<SampleRow> rows = new ArrayList<>();
    for (Map.Entry<Integer, JsonNode> card : cards(root)) {
      JsonNode c = card.getValue();
      rows.add(
          new SampleRow(
              card.getKey(),
              NvidiaSmi.intValue(orEmpty(field(c, List.of("GPU use (%)")))),
              NvidiaSmi.intValue(orEmpty(field(c, TEMPERATURE_KEYS)))));
    }
    return rows;
  }

  /**
   * The ROCm release from the contents of {@code /opt/rocm/.info/version} ({@code 6.1.2-119} →
   * {@code 6.1.2}).
   */
  static String parseRocmVersion(String fileContents) {
    if (fileContents == null) return null;
    Matcher m = VERSION.matcher(fileContents.trim());
    return m.find() ? m.group(1) : null;
  }

  /** rocm-smi may print warnings before its JSON: parse from the first '{'. */
  private static JsonNode parse(String output) {
    if (output == null) return null;
    int start = output.indexOf('{');
    if (start < 0) return null;
    try {
      JsonNode root = JSON.readTree(output.substring(start));
      return root != null && root.isObject() ? root : null;
    } catch (Exception e) {
      return null;
    }
  }

  private static List<Map.Entry<Integer, JsonNode>> cards(JsonNode root) {
    List<Map.Entry<Integer, JsonNode>> cards = new ArrayList<>();
    for (Map.Entry<String, JsonNode> e : root.properties()) {
      Matcher m = CARD.matcher(e.getKey());
      if (m.matches() && e.getValue().isObject())
        cards.add(Map.entry(Integer.parseInt(m.group(1)), e.getValue()));
    }
    cards.sort(Comparator.comparing(Map.Entry::getKey));
    return cards;
  }

  /** The first of {@code keys} present (case-insensitive), as text; null when absent or "N/A". */
  private static String field(JsonNode node, List<String> keys) {
    if (node == null || !node.isObject()) return null;
    for (String key : keys) {
      for (Map.Entry<String, JsonNode> e : node.properties()) {
        if (e.getKey().trim().toLowerCase(Locale.ROOT).equals(key.toLowerCase(Locale.ROOT))) {
          String v = e.getValue().asText().trim();
          if (!NvidiaSmi.missing(v)) return v;
        }
      }
    }
    return null;
  }

  private static String orEmpty(String s) {
    return s == null ? "" : s;
  }
}
