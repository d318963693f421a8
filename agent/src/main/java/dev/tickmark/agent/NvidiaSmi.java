package dev.tickmark.agent;

import dev.tickmark.wire.HardwareReport;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The {@code nvidia-smi} command lines the agent runs and pure parsers of what they print ({@code
 * --format=csv,noheader,nounits}: one line per GPU, fields separated by {@code ", "}). A field
 * nvidia-smi cannot fill ({@code [N/A]}, {@code [Not Supported]}, {@code [Unknown Error]}, …) is
 * {@code null}; a line that is not a GPU row (a header, an error message) is skipped.
 */
final class NvidiaSmi {
  static final String VENDOR = "nvidia";

  static final List<String> REPORT_FIELDS =
      List.of(
          "index",
          "uuid",
          "name",
          "memory.total",
          "driver_version",
          "temperature.gpu",
          "ecc.errors.uncorrected.volatile.total",
          "pcie.link.gen.current",
          "pcie.link.width.current",
          "utilization.gpu");

  static final List<String> SAMPLE_FIELDS =
      List.of(
          "index", "utilization.gpu", "temperature.gpu", "ecc.errors.uncorrected.volatile.total");

  /** The marker nvidia-smi prints for a GPU whose state cannot be read until it is reset. */
  private static final String REQUIRES_RESET = "requires reset";

  private static final Pattern CUDA_VERSION =
      Pattern.compile("CUDA Version\\s*:\\s*([0-9]+(?:\\.[0-9]+)*)");
  private static final Pattern LEADING_NUMBER = Pattern.compile("^-?[0-9]+(?:\\.[0-9]+)?");

  private NvidiaSmi() {}

  static List<String> reportCommand() {
    return query(REPORT_FIELDS);
  }

  static List<String> sampleCommand() {
    return query(SAMPLE_FIELDS);
  }

  private static List<String> query(List<String> fields) {
    return List.of(
        "nvidia-smi", "--query-gpu=" + String.join(",", fields), "--format=csv,noheader,nounits");
  }

  /**
   * One row of the sample query; {@code requiresReset} when any field said the GPU needs a reset.
   */
  record SampleRow(
      int index,
      Integer utilizationPercent,
      Integer temperatureC,
      Long eccErrorsUncorrected,
      boolean requiresReset) {}

  /**
   * Parses the report query ({@link #REPORT_FIELDS}). {@code runtimeVersion} is the CUDA version
   * found in nvidia-smi's header ({@link #parseCudaVersion}), the same for every GPU of the
   * machine. The last field, {@code utilization.gpu}, is not part of a report and is ignored.
   */
  static List<HardwareReport.Gpu> parseGpus(String csv, String runtimeVersion) {
    List<HardwareReport.Gpu> gpus = new ArrayList<>();
    for (String line : csv.split("\\R")) {
      List<String> f = fields(line, REPORT_FIELDS.size(), 2);
      if (f == null) continue;
      Integer index = intValue(f.get(0));
      if (index == null) continue;
      gpus.add(
          new HardwareReport.Gpu(
              index,
              text(f.get(1)),
              text(f.get(2)),
              VENDOR,
              longValue(f.get(3)),
              text(f.get(4)),
              runtimeVersion,
              intValue(f.get(5)),
              longValue(f.get(6)),
              intValue(f.get(7)),
              intValue(f.get(8))));
    }
    return gpus;
  }

  /** Parses the sample query ({@link #SAMPLE_FIELDS}). */
  static List<SampleRow> parseSamples(String csv) {
    List<SampleRow> rows = new ArrayList<>();
    for (String line : csv.split("\\R")) {
      List<String> f = fields(line, SAMPLE_FIELDS.size(), -1);
      if (f == null) continue;
      Integer index = intValue(f.get(0));
      if (index == null) continue;
      boolean reset =
          f.stream().anyMatch(v -> v.toLowerCase(java.util.Locale.ROOT).contains(REQUIRES_RESET));
      rows.add(
          new SampleRow(index, intValue(f.get(1)), intValue(f.get(2)), longValue(f.get(3)), reset));
    }
    return rows;
  }

  /**
   * The CUDA version from {@code nvidia-smi}'s table header or from {@code nvidia-smi -q}; null if
   * absent.
   */
  static String parseCudaVersion(String text) {
    if (text == null) return null;
    Matcher m = CUDA_VERSION.matcher(text);
    return m.find() ? m.group(1) : null;
  }

  /**
   * True when nvidia-smi said that some GPU fell off the bus ("Unable to determine the device
   * handle … GPU is lost").
   */
  static boolean mentionsLostGpu(String output) {
    return output != null && output.contains("GPU is lost");
  }

  /**
   * Splits a CSV line into exactly {@code count} trimmed fields. If there are more (a comma inside
   * a GPU name), the surplus is joined back into the field at {@code freeTextIndex}; with none, the
   * line is rejected.
   */
  private static List<String> fields(String line, int count, int freeTextIndex) {
    if (line.isBlank()) return null;
    List<String> parts = new ArrayList<>(Arrays.asList(line.split(",", -1)));
    if (parts.size() > count && freeTextIndex >= 0) {
      int surplus = parts.size() - count;
      String joined = String.join(",", parts.subList(freeTextIndex, freeTextIndex + surplus + 1));
      for (int i = 0; i <= surplus; i++) parts.remove(freeTextIndex);
      parts.add(freeTextIndex, joined);
    }
    if (parts.size() != count) return null;
    return parts.stream().map(String::trim).toList();
  }

  /**
   * A value nvidia-smi could not read: bracketed ({@code [N/A]}, {@code [Not Supported]}, …),
   * {@code N/A} or empty.
   */
  static boolean missing(String value) {
    String v = value.trim();
    return v.isEmpty()
        || v.startsWith("[")
        || v.equalsIgnoreCase("N/A")
        || v.equalsIgnoreCase("Not Supported");
  }

  static String text(String value) {
    return missing(value) ? null : value.trim();
  }

  static Long longValue(String value) {
    if (missing(value)) return null;
    Matcher m = LEADING_NUMBER.matcher(value.trim());
    if (!m.find()) return null;
    try {
      return Math.round(Double.parseDouble(m.group()));
    } catch (NumberFormatException e) {
      return null;
    }
  }

  static Integer intValue(String value) {
    Long v = longValue(value);
    return v == null || v > Integer.MAX_VALUE || v < Integer.MIN_VALUE ? null : v.intValue();
  }
}
