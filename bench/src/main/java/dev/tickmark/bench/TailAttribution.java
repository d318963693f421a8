package dev.tickmark.bench;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * Which of a window's answered launches a collector's pause or the autovacuum stand-in's work
 * overlapped, and the latencies of those that neither overlapped. An attribution, not a claim: a
 * launch that queued behind a pause but arrived after it ended counts as clear, so the clear
 * launches' tail still holds the backlog a pause leaves.
 *
 * <p>{@link #of}'s launches: each from its due time to its answer.
 */
record TailAttribution(
    int launches,
    List<GcPauses.Pause> pauses,
    int overlappedByPause,
    int standInLooks,
    int overlappedByStandIn,
    long[] clearOfPausesMicros,
    long[] clearOfBothMicros) {

  static TailAttribution of(
      List<NanoInterval> launches, List<GcPauses.Pause> pauses, List<NanoInterval> standIn) {
    int byPause = 0;
    int byStandIn = 0;
    List<Long> clearOfPauses = new ArrayList<>();
    List<Long> clearOfBoth = new ArrayList<>();
    for (NanoInterval launch : launches) {
      boolean paused = pauses.stream().anyMatch(p -> p.interval().overlaps(launch));
      boolean vacuumed = standIn.stream().anyMatch(w -> w.overlaps(launch));
      long micros = launch.micros();
      if (paused) byPause++;
      if (vacuumed) byStandIn++;
      if (!paused) clearOfPauses.add(micros);
      if (!paused && !vacuumed) clearOfBoth.add(micros);
    }
    return new TailAttribution(
        launches.size(),
        pauses,
        byPause,
        standIn.size(),
        byStandIn,
        MarketBenchmark.sortedArray(clearOfPauses),
        MarketBenchmark.sortedArray(clearOfBoth));
  }

  String describe() {
    return String.format(
        Locale.ROOT,
        "attribution (not a claim): %d pauses in the window (%s ms) overlapped %,d of %,d launches,"
            + " the stand-in's work (%d looks) %,d; clear of a pause: p99 %s ms, max %s ms;"
            + " clear of both (%,d): p50 %s ms, p99 %s ms, max %s ms",
        pauses.size(),
        pauses.isEmpty()
            ? "-"
            : String.join(", ", pauses.stream().map(p -> Long.toString(p.millis())).toList()),
        overlappedByPause,
        launches,
        standInLooks,
        overlappedByStandIn,
        MarketBenchSupport.ms(MarketBenchSupport.quantile(clearOfPausesMicros, 0.99)),
        MarketBenchSupport.ms(max(clearOfPausesMicros)),
        clearOfBothMicros.length,
        MarketBenchSupport.ms(MarketBenchSupport.quantile(clearOfBothMicros, 0.5)),
        MarketBenchSupport.ms(MarketBenchSupport.quantile(clearOfBothMicros, 0.99)),
        MarketBenchSupport.ms(max(clearOfBothMicros)));
  }

  private static long max(long[] sorted) {
    return sorted.length == 0 ? 0 : sorted[sorted.length - 1];
  }
}
