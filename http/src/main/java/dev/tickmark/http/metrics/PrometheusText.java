package dev.tickmark.http.metrics;

/**
 * A writer of the Prometheus text exposition format 0.0.4: {@code # HELP} and {@code # TYPE} once
 * per family, then its samples. One {@link StringBuilder} per scrape and no intermediate objects
 * per sample; label values are escaped as the format requires.
 */
public final class PrometheusText {
  public static final String CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8";

  private final StringBuilder out = new StringBuilder(16 * 1024);

  /**
   * Starts a family: {@code type} is {@code counter}, {@code gauge}, {@code histogram} or {@code
   * untyped}.
   */
  public PrometheusText family(String name, String type, String help) {
    out.append("# HELP ").append(name).append(' ');
    escape(help, false);
    out.append('\n').append("# TYPE ").append(name).append(' ').append(type).append('\n');
    return this;
  }

  public PrometheusText counter(String name, String help, double value) {
    return family(name, "counter", help).sample(name, value);
  }

  public PrometheusText gauge(String name, String help, double value) {
    return family(name, "gauge", help).sample(name, value);
  }

  public PrometheusText sample(String name, double value) {
    out.append(name).append(' ');
    number(value);
    out.append('\n');
    return this;
  }

  public PrometheusText sample(String name, String label, String labelValue, double value) {
    out.append(name).append('{').append(label).append("=\"");
    escape(labelValue, true);
    out.append("\"} ");
    number(value);
    out.append('\n');
    return this;
  }

  /**
   * A histogram family: {@code cumulative} holds one count per bound in {@code boundsSeconds} plus
   * the {@code +Inf} count last, which is also the {@code _count}.
   */
  public PrometheusText histogram(
      String name, String help, double[] boundsSeconds, long[] cumulative, double sumSeconds) {
    family(name, "histogram", help);
    return histogramSeries(name, null, null, boundsSeconds, cumulative, sumSeconds);
  }

  /**
   * One series of a histogram family announced with {@link #family}, told apart by one label
   * ({@code label} null: no label).
   */
  public PrometheusText histogramSeries(
      String name,
      String label,
      String labelValue,
      double[] boundsSeconds,
      long[] cumulative,
      double sumSeconds) {
    if (cumulative.length != boundsSeconds.length + 1)
      throw new IllegalArgumentException("one count per bound, plus +Inf");
    for (int i = 0; i < boundsSeconds.length; i++) {
      out.append(name).append("_bucket{");
      label(label, labelValue);
      out.append("le=\"");
      number(boundsSeconds[i]);
      out.append("\"} ").append(cumulative[i]).append('\n');
    }
    long count = cumulative[boundsSeconds.length];
    out.append(name).append("_bucket{");
    label(label, labelValue);
    out.append("le=\"+Inf\"} ").append(count).append('\n');
    if (label == null) {
      sample(name + "_sum", sumSeconds);
      out.append(name).append("_count ").append(count).append('\n');
    } else {
      sample(name + "_sum", label, labelValue, sumSeconds);
      sample(name + "_count", label, labelValue, count);
    }
    return this;
  }

  private void label(String label, String labelValue) {
    if (label == null) return;
    out.append(label).append("=\"");
    escape(labelValue, true);
    out.append("\",");
  }

  @Override
  public String toString() {
    return out.toString();
  }

  private void number(double value) {
    if (Double.isNaN(value)) {
      out.append("NaN");
    } else if (Double.isInfinite(value)) {
      out.append(value > 0 ? "+Inf" : "-Inf");
    } else if (value == Math.rint(value) && Math.abs(value) < 1e15) {
      out.append((long) value);
    } else {
      out.append(value);
    }
  }

  /** HELP text escapes {@code \} and newlines; label values also escape {@code "}. */
  private void escape(String text, boolean quotes) {
    for (int i = 0; i < text.length(); i++) {
      char c = text.charAt(i);
      if (c == '\\') out.append("\\\\");
      else if (c == '\n') out.append("\\n");
      else if (c == '"' && quotes) out.append("\\\"");
      else out.append(c);
    }
  }
}
