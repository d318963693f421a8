package dev.tickmark.bench;

import java.io.PrintStream;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;

/**
 * One headline figure of a benchmark run, for {@link AllBenchmarks}: what was measured, its value,
 * the baseline measured in the same run and their ratio. A benchmark prints each as one line
 * ({@link #print}) that starts with {@link #PREFIX} and carries tab-separated {@code key=value}
 * fields, so the driver can read it from the child JVM's output next to the human-readable tables,
 * which stay as they were.
 *
 * @param bench the benchmark (and part), e.g. {@code settlement}, {@code market-match}
 * @param key a stable id of the figure, which {@link AllBenchmarks} maps to a target of issue 15
 * @param measure what the figure is, in words
 * @param value the figure
 * @param unit its unit
 * @param baseline the same-run baseline, NaN when the figure has none
 * @param baselineOf what the baseline is, in words (empty when none)
 * @param ratio value ÷ baseline (or the benchmark's own ratio), NaN when none
 * @param note anything the table should say next to it (conditions of a short run), may be empty
 */
public record BenchResult(
    String bench,
    String key,
    String measure,
    double value,
    String unit,
    double baseline,
    String baselineOf,
    double ratio,
    String note) {

  public static final String PREFIX = "BENCHRESULT";

  /** A figure without a same-run baseline (a latency, a failover time). */
  static BenchResult absolute(String bench, String key, String measure, double value, String unit) {
    return new BenchResult(bench, key, measure, value, unit, Double.NaN, "", Double.NaN, "");
  }

  /** A figure against its same-run baseline; the ratio is value ÷ baseline. */
  static BenchResult against(
      String bench,
      String key,
      String measure,
      double value,
      String unit,
      double baseline,
      String baselineOf) {
    return new BenchResult(
        bench, key, measure, value, unit, baseline, baselineOf, value / baseline, "");
  }

  BenchResult withNote(String n) {
    return new BenchResult(bench, key, measure, value, unit, baseline, baselineOf, ratio, n);
  }

  /** Prints this as one {@link #PREFIX} line on {@code out}. */
  void print(PrintStream out) {
    out.println(line());
  }

  /** Prints this as one {@link #PREFIX} line on standard output. */
  void print() {
    print(System.out);
  }

  String line() {
    return PREFIX
        + "\tbench="
        + clean(bench)
        + "\tkey="
        + clean(key)
        + "\tmeasure="
        + clean(measure)
        + "\tvalue="
        + number(value)
        + "\tunit="
        + clean(unit)
        + "\tbaseline="
        + number(baseline)
        + "\tbaseline_of="
        + clean(baselineOf)
        + "\tratio="
        + number(ratio)
        + "\tnote="
        + clean(note);
  }

  /** The result a {@link #PREFIX} line carries; null when the line is not one. */
  static BenchResult parse(String line) {
    if (!line.startsWith(PREFIX + "\t")) return null;
    Map<String, String> f = new LinkedHashMap<>();
    for (String part : line.substring(PREFIX.length() + 1).split("\t")) {
      int eq = part.indexOf('=');
      if (eq > 0) f.put(part.substring(0, eq), part.substring(eq + 1));
    }
    return new BenchResult(
        f.getOrDefault("bench", "?"),
        f.getOrDefault("key", ""),
        f.getOrDefault("measure", ""),
        parseNumber(f.get("value")),
        f.getOrDefault("unit", ""),
        parseNumber(f.get("baseline")),
        f.getOrDefault("baseline_of", ""),
        parseNumber(f.get("ratio")),
        f.getOrDefault("note", ""));
  }

  private static String clean(String s) {
    return s == null ? "" : s.replace('\t', ' ').replace('\n', ' ');
  }

  private static String number(double v) {
    return Double.isNaN(v) || Double.isInfinite(v) ? "NaN" : String.format(Locale.ROOT, "%.6g", v);
  }

  private static double parseNumber(String s) {
    if (s == null || s.isBlank()) return Double.NaN;
    try {
      return Double.parseDouble(s);
    } catch (NumberFormatException e) {
      return Double.NaN;
    }
  }
}
