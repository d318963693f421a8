package dev.tickmark.bench;

import java.lang.management.GarbageCollectorMXBean;
import java.lang.management.ManagementFactory;
import java.util.Locale;

/**
 * Collections and collection time of this JVM so far, to tell GC pauses from the node's own
 * latency.
 */
record GcSample(long collections, long millis) {
  static GcSample take() {
    long n = 0, ms = 0;
    for (GarbageCollectorMXBean gc : ManagementFactory.getGarbageCollectorMXBeans()) {
      n += Math.max(0, gc.getCollectionCount());
      ms += Math.max(0, gc.getCollectionTime());
    }
    return new GcSample(n, ms);
  }

  Usage until(GcSample later) {
    return new Usage(later.collections - collections, later.millis - millis);
  }

  record Usage(long collections, long millis) {
    @Override
    public String toString() {
      return String.format(
          Locale.ROOT,
          "%,d collections, %,d ms in total (%s ms each on average)",
          collections,
          millis,
          collections == 0
              ? "-"
              : String.format(Locale.ROOT, "%.1f", (double) millis / collections));
    }
  }
}
