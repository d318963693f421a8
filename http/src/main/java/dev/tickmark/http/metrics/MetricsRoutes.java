package dev.tickmark.http.metrics;

import static org.apache.pekko.http.javadsl.server.Directives.*;

import dev.tickmark.engine.metrics.EngineMetrics;
import dev.tickmark.engine.metrics.LatencyHistogram;
import dev.tickmark.persistence.ledger.LedgerReadModel;
import dev.tickmark.persistence.rentals.RentalReadModel;
import java.lang.management.GarbageCollectorMXBean;
import java.lang.management.ManagementFactory;
import java.lang.management.MemoryUsage;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.pekko.http.javadsl.model.ContentType;
import org.apache.pekko.http.javadsl.model.ContentTypes;
import org.apache.pekko.http.javadsl.model.HttpEntities;
import org.apache.pekko.http.javadsl.model.HttpResponse;
import org.apache.pekko.http.javadsl.server.Route;

/**
 * {@code GET /metrics}: this node's figures in the Prometheus text format, without authentication,
 * so they are aggregates only (no ids, no tenant data). The engine records ({@link EngineMetrics}),
 * this class only formats. Rentals by status and the ledger projection's lag come from the read
 * side (the whole cluster's, eventually consistent), cached for {@link #READ_SIDE_MAX_AGE} so a
 * scrape never waits long on the database and an outage never hangs it: the last figures are served
 * with their age.
 */
public final class MetricsRoutes {
  /** The operations {@link #route()} serves; the tests hold it to the code and to openapi.json. */
  public static final java.util.List<dev.tickmark.http.Operation> OPERATIONS =
      java.util.List.of(dev.tickmark.http.Operation.get("/metrics"));

  static final Duration READ_SIDE_MAX_AGE = Duration.ofSeconds(10);
  private static final Duration READ_SIDE_WAIT = Duration.ofMillis(500);

  /** Bucket bounds shared by every latency histogram, in seconds (100 µs .. 30 s). */
  static final double[] BOUNDS_SECONDS = {
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
    30
  };

  private static final long[] BOUNDS_MICROS = new long[BOUNDS_SECONDS.length];
  private static final ContentType CONTENT_TYPE = ContentTypes.parse(PrometheusText.CONTENT_TYPE);

  static {
    for (int i = 0; i < BOUNDS_SECONDS.length; i++)
      BOUNDS_MICROS[i] = Math.round(BOUNDS_SECONDS[i] * 1_000_000);
  }

  /** What the read side tells, fetched together and cached together. */
  private record ReadSide(
      Map<String, Long> rentalsByStatus, long ledgerLagMillis, long fetchedAtNanos) {}

  private final EngineMetrics metrics;
  private final RentalReadModel rentals;
  private final LedgerReadModel ledger;
  private final AtomicReference<ReadSide> readSide = new AtomicReference<>();
  private final AtomicBoolean refreshing = new AtomicBoolean();
  private volatile CompletableFuture<ReadSide> refresh = CompletableFuture.completedFuture(null);

  public MetricsRoutes(EngineMetrics metrics, RentalReadModel rentals, LedgerReadModel ledger) {
    this.metrics = metrics;
    this.rentals = rentals;
    this.ledger = ledger;
  }

  public Route route() {
    return path(
        "metrics",
        () ->
            get(
                () ->
                    onSuccess(
                        scrape(),
                        text ->
                            complete(
                                HttpResponse.create()
                                    .withEntity(
                                        HttpEntities.create(
                                            CONTENT_TYPE,
                                            text.getBytes(
                                                java.nio.charset.StandardCharsets.UTF_8)))))));
  }

  /** The exposition text; completes within {@link #READ_SIDE_WAIT} whatever the database does. */
  public CompletionStage<String> scrape() {
    return currentReadSide().thenApply(this::render);
  }

  private CompletionStage<ReadSide> currentReadSide() {
    ReadSide last = readSide.get();
    if (last != null && System.nanoTime() - last.fetchedAtNanos() < READ_SIDE_MAX_AGE.toNanos()) {
      return CompletableFuture.completedFuture(last);
    }
    if (refreshing.compareAndSet(false, true)) {
      refresh =
          rentals
              .countByStatus()
              .toCompletableFuture()
              .thenCombine(
                  ledger.projectionLagMillis(),
                  (counts, lag) -> {
                    ReadSide fresh = new ReadSide(counts, lag, System.nanoTime());
                    readSide.set(fresh);
                    return fresh;
                  })
              .whenComplete((counts, failure) -> refreshing.set(false));
    }
    return refresh
        .exceptionally(failure -> null)
        .completeOnTimeout(null, READ_SIDE_WAIT.toMillis(), TimeUnit.MILLISECONDS)
        .thenApply(
            fresh ->
                readSide.get()); // fresh when it came in time, else the last good one (or none)
  }

  private String render(ReadSide read) {
    PrometheusText out = new PrometheusText();
    out.family(
        "tickmark_rentals",
        "gauge",
        "Rentals by status, from the rentals read side (cluster-wide, cached up to 10 s).");
    if (read != null)
      read.rentalsByStatus()
          .forEach((status, n) -> out.sample("tickmark_rentals", "status", status, n));
    out.family(
        "tickmark_ledger_projection_lag_seconds",
        "gauge",
        "Age of the oldest account event the ledger projection has not written yet (0 when caught up; cached up to 10 s).");
    if (read != null)
      out.sample("tickmark_ledger_projection_lag_seconds", read.ledgerLagMillis() / 1e3);
    out.family(
        "tickmark_read_side_age_seconds",
        "gauge",
        "Age of the read-side figures above; grows while the database is unreachable (absent before the first read).");
    if (read != null)
      out.sample(
          "tickmark_read_side_age_seconds", (System.nanoTime() - read.fetchedAtNanos()) / 1e9);

    out.counter(
        "tickmark_metered_seconds_total",
        "Rental seconds settled by the rentals on this node.",
        metrics.secondsMetered.sum());
    out.counter(
        "tickmark_metered_micro_euros_total",
        "Cost of those seconds in micro-euros (what renters are debited).",
        metrics.microEurosMetered.sum());
    out.counter(
        "tickmark_metered_euros_total",
        "The same cost in euros (a float, for dashboards; the ledger is exact).",
        metrics.microEurosMetered.sum() / 1e6);
    out.counter(
        "tickmark_settlements_total",
        "Settlement checkpoints persisted by the rentals on this node.",
        metrics.settlements.sum());
    out.counter(
        "tickmark_rental_wakes_total",
        "Running rentals' own timers fired on this node (a settlement due or retried, a limit, a deadline); a rental sleeps in between.",
        metrics.rentalWakes.sum());
    out.counter(
        "tickmark_rental_ticks_total",
        "Per-second meter ticks sent to subscribers (SSE, console), computed from the frozen price and the start.",
        metrics.ticksSent.sum());
    histogram(
        out,
        "tickmark_match_latency_seconds",
        "A match request's arrival at its matcher to the answer.",
        metrics.matchLatency);
    out.family(
        "tickmark_launch_step_seconds",
        "histogram",
        "The steps of a launch on the rental's node: hold (the renter's pending hold placed) and match (the matcher's "
            + "answer), both from the launch's start and asked for at once; matched_recorded (the request and its match, "
            + "one write, before the answer); recorded (the request's own write, only for a launch that had to wait).");
    launchStep(out, "recorded", metrics.launchRecorded);
    launchStep(out, "hold", metrics.launchHold);
    launchStep(out, "match", metrics.launchMatch);
    launchStep(out, "matched_recorded", metrics.launchMatchedRecorded);
    histogram(
        out,
        "tickmark_rental_recovery_seconds",
        "A rental's start on this node to its recovery completed (its snapshot, its highest sequence number, "
            + "the events after them): a launch's new rental pays it before its first command, a rental moved by a "
            + "node loss before it settles again.",
        metrics.rentalRecovery);

    out.gauge(
        "tickmark_agent_sessions_open",
        "Host agent websocket sessions open on this node.",
        metrics.agentSessionsOpen());
    out.counter(
        "tickmark_agent_sessions_reattached_total",
        "Agent sessions on this node that attached themselves again after their host's entity forgot them"
            + " (it restarted, or moved after a node loss), without the agent reconnecting.",
        metrics.agentSessionsReattached.sum());
    out.counter(
        "tickmark_heartbeats_total",
        "Agent heartbeats handled by the host entities on this node.",
        metrics.heartbeats.sum());
    histogram(
        out,
        "tickmark_heartbeat_lag_seconds",
        "Receipt of a heartbeat minus its agent's \"at\" (network delay and clock skew).",
        metrics.heartbeatLag);
    histogram(
        out,
        "tickmark_heartbeat_handling_seconds",
        "Receipt of a heartbeat at the websocket to its handling by the host entity.",
        metrics.heartbeatHandling);

    histogram(
        out,
        "tickmark_journal_write_seconds",
        "Write latency of this node's journal probe (one small event every few seconds).",
        metrics.journalWrites);
    out.counter(
        "tickmark_journal_failures_total",
        "Journal probe writes or recoveries that failed.",
        metrics.journalFailures.sum());

    jvm(out);
    return out.toString();
  }

  private static void launchStep(PrometheusText out, String step, LatencyHistogram histogram) {
    out.histogramSeries(
        "tickmark_launch_step_seconds",
        "step",
        step,
        BOUNDS_SECONDS,
        histogram.cumulativeCounts(BOUNDS_MICROS),
        histogram.sumMicros() / 1e6);
  }

  private static void histogram(
      PrometheusText out, String name, String help, LatencyHistogram histogram) {
    out.histogram(
        name,
        help,
        BOUNDS_SECONDS,
        histogram.cumulativeCounts(BOUNDS_MICROS),
        histogram.sumMicros() / 1e6);
  }

  private static void jvm(PrometheusText out) {
    MemoryUsage heap = ManagementFactory.getMemoryMXBean().getHeapMemoryUsage();
    out.gauge("tickmark_jvm_heap_used_bytes", "JVM heap in use.", heap.getUsed());
    out.gauge("tickmark_jvm_heap_committed_bytes", "JVM heap committed.", heap.getCommitted());
    out.gauge("tickmark_jvm_heap_max_bytes", "JVM heap maximum (-1 if undefined).", heap.getMax());
    out.gauge(
        "tickmark_jvm_threads",
        "Live JVM threads.",
        ManagementFactory.getThreadMXBean().getThreadCount());
    var collectors = ManagementFactory.getGarbageCollectorMXBeans();
    out.family(
        "tickmark_jvm_gc_collections_total", "counter", "Garbage collections, by collector.");
    for (GarbageCollectorMXBean gc : collectors)
      out.sample(
          "tickmark_jvm_gc_collections_total",
          "gc",
          gc.getName(),
          Math.max(0, gc.getCollectionCount()));
    out.family(
        "tickmark_jvm_gc_seconds_total",
        "counter",
        "Time spent in garbage collection, by collector.");
    for (GarbageCollectorMXBean gc : collectors)
      out.sample(
          "tickmark_jvm_gc_seconds_total",
          "gc",
          gc.getName(),
          Math.max(0, gc.getCollectionTime()) / 1e3);
    var runtime = ManagementFactory.getRuntimeMXBean();
    out.gauge(
        "tickmark_process_uptime_seconds",
        "Time since the JVM started.",
        runtime.getUptime() / 1e3);
    out.gauge(
        "tickmark_process_start_time_seconds",
        "Start of the JVM, in Unix seconds.",
        runtime.getStartTime() / 1e3);
    if (ManagementFactory.getOperatingSystemMXBean()
        instanceof com.sun.management.OperatingSystemMXBean os) {
      out.counter(
          "tickmark_process_cpu_seconds_total",
          "CPU time used by the process.",
          Math.max(0, os.getProcessCpuTime()) / 1e9);
    }
    if (ManagementFactory.getOperatingSystemMXBean()
        instanceof com.sun.management.UnixOperatingSystemMXBean unix) {
      out.gauge(
          "tickmark_process_open_fds",
          "Open file descriptors (sockets included).",
          unix.getOpenFileDescriptorCount());
      out.gauge(
          "tickmark_process_max_fds",
          "The file descriptor limit.",
          unix.getMaxFileDescriptorCount());
    }
  }
}
