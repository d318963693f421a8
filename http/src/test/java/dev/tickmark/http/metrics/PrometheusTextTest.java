package dev.tickmark.http.metrics;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import org.junit.jupiter.api.Test;

class PrometheusTextTest {
  @Test
  void familiesHaveHelpAndTypeThenTheirSamples() {
    String text =
        new PrometheusText()
            .counter("a_total", "Things counted.", 3)
            .gauge("b", "A level.", 0.25)
            .family("c", "gauge", "By kind.")
            .sample("c", "kind", "x", 1)
            .toString();
    assertEquals(
        """
        # HELP a_total Things counted.
        # TYPE a_total counter
        a_total 3
        # HELP b A level.
        # TYPE b gauge
        b 0.25
        # HELP c By kind.
        # TYPE c gauge
        c{kind="x"} 1
        """,
        text);
  }

  @Test
  void labelValuesAndHelpAreEscaped() {
    String text =
        new PrometheusText()
            .family("g", "gauge", "back\\slash\nnewline \"quotes\"")
            .sample("g", "gc", "G1 \"Young\"\\\n", 2)
            .toString();
    assertEquals(
        """
        # HELP g back\\\\slash\\nnewline "quotes"
        # TYPE g gauge
        g{gc="G1 \\"Young\\"\\\\\\n"} 2
        """,
        text);
  }

  @Test
  void histogramsEndWithInfSumAndCount() {
    String text =
        new PrometheusText()
            .histogram(
                "h_seconds", "Latency.", new double[] {0.001, 0.5}, new long[] {1, 4, 5}, 1.5)
            .toString();
    assertEquals(
        """
        # HELP h_seconds Latency.
        # TYPE h_seconds histogram
        h_seconds_bucket{le="0.001"} 1
        h_seconds_bucket{le="0.5"} 4
        h_seconds_bucket{le="+Inf"} 5
        h_seconds_sum 1.5
        h_seconds_count 5
        """,
        text);
    assertThrows(
        IllegalArgumentException.class,
        () -> new PrometheusText().histogram("h", "x", new double[] {1}, new long[] {1}, 0));
  }

  @Test
  void labelledHistogramSeriesShareOneFamily() {
    String text =
        new PrometheusText()
            .family("s_seconds", "histogram", "Steps.")
            .histogramSeries("s_seconds", "step", "a", new double[] {0.1}, new long[] {1, 2}, 0.25)
            .histogramSeries("s_seconds", "step", "b", new double[] {0.1}, new long[] {0, 0}, 0)
            .toString();
    assertEquals(
        """
        # HELP s_seconds Steps.
        # TYPE s_seconds histogram
        s_seconds_bucket{step="a",le="0.1"} 1
        s_seconds_bucket{step="a",le="+Inf"} 2
        s_seconds_sum{step="a"} 0.25
        s_seconds_count{step="a"} 2
        s_seconds_bucket{step="b",le="0.1"} 0
        s_seconds_bucket{step="b",le="+Inf"} 0
        s_seconds_sum{step="b"} 0
        s_seconds_count{step="b"} 0
        """,
        text);
  }

  @Test
  void specialValuesUseThePrometheusSpelling() {
    String text =
        new PrometheusText()
            .gauge("n", "x", Double.NaN)
            .sample("n", Double.POSITIVE_INFINITY)
            .toString();
    assertEquals("# HELP n x\n# TYPE n gauge\nn NaN\nn +Inf\n", text);
  }
}
