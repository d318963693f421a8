package dev.tickmark.bench;

import com.sun.management.GarbageCollectionNotificationInfo;
import java.lang.management.GarbageCollectorMXBean;
import java.lang.management.ManagementFactory;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedQueue;
import javax.management.ListenerNotFoundException;
import javax.management.NotificationEmitter;
import javax.management.NotificationListener;
import javax.management.openmbean.CompositeData;

/**
 * The stop-the-world collections of this JVM as they end, each as an interval on {@link
 * System#nanoTime()}'s scale, so that a benchmark can tell the requests a pause overlapped from the
 * others. The JVM reports a collection's start and end in milliseconds of uptime; they are placed
 * on the nano clock by one reading of both clocks at the start, so an interval is good to about a
 * millisecond. On JDK 17 G1 reports its young and mixed pauses ("G1 Young Generation") and full
 * collections, not the remark and cleanup pauses of its concurrent cycle.
 */
final class GcPauses implements AutoCloseable {
  record Pause(String collector, NanoInterval interval) {
    long millis() {
      return interval.micros() / 1000;
    }
  }

  private final long uptimeZeroNanos;
  private final ConcurrentLinkedQueue<Pause> pauses = new ConcurrentLinkedQueue<>();
  private final List<NotificationEmitter> emitters = new ArrayList<>();
  private final NotificationListener listener = (notification, handback) -> record(notification);

  private GcPauses() {
    long before = System.nanoTime();
    long uptimeMillis = ManagementFactory.getRuntimeMXBean().getUptime();
    long after = System.nanoTime();
    uptimeZeroNanos = (before + after) / 2 - uptimeMillis * 1_000_000;
  }

  static GcPauses start() {
    GcPauses recorder = new GcPauses();
    for (GarbageCollectorMXBean gc : ManagementFactory.getGarbageCollectorMXBeans()) {
      if (gc instanceof NotificationEmitter emitter) {
        emitter.addNotificationListener(recorder.listener, null, null);
        recorder.emitters.add(emitter);
      }
    }
    return recorder;
  }

  private void record(javax.management.Notification notification) {
    if (!GarbageCollectionNotificationInfo.GARBAGE_COLLECTION_NOTIFICATION.equals(
        notification.getType())) return;
    GarbageCollectionNotificationInfo info =
        GarbageCollectionNotificationInfo.from((CompositeData) notification.getUserData());
    // ZGC and Shenandoah also report their concurrent cycles here; only pauses stop requests.
    if (info.getGcName().contains("Cycles")) return;
    long start = uptimeZeroNanos + info.getGcInfo().getStartTime() * 1_000_000;
    long end = uptimeZeroNanos + info.getGcInfo().getEndTime() * 1_000_000;
    pauses.add(new Pause(info.getGcName(), new NanoInterval(start, end)));
  }

  /** The pauses that overlap {@code window}, in the order they ended. */
  List<Pause> within(NanoInterval window) {
    return pauses.stream().filter(p -> p.interval().overlaps(window)).toList();
  }

  @Override
  public void close() {
    for (NotificationEmitter emitter : emitters) {
      try {
        emitter.removeNotificationListener(listener);
      } catch (ListenerNotFoundException ignored) {
        // already gone
      }
    }
  }
}
