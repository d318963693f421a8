package dev.tickmark.bench;

import java.io.PrintStream;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

/**
 * A closed-loop load generator: each worker keeps exactly one operation in flight and issues the
 * next as soon as the previous one is acknowledged, so the number of workers is the concurrency. A
 * failed operation is counted and retried (the same operation: every posting is idempotent) after a
 * short pause. Callbacks run on the completing thread ({@link #DIRECT}).
 *
 * <p>The measured window is cut into one-second slices, each with its completions, latencies and
 * CPU usage. On a machine shared with other work, the slices in which everything else used less
 * than {@link #QUIET_OTHER_CORES} are "quiet"; the figures over quiet slices only are the ones to
 * compare between runs. When fewer than half the window was quiet, the window is extended (up to
 * three times its length) to collect more quiet slices.
 */
final class LoadDriver {
  interface Worker {
    /** Starts the worker's current operation. */
    CompletionStage<?> attempt();

    /** The current operation was acknowledged; move on to the next. */
    void succeeded();
  }

  /**
   * A slice is quiet when processes other than this JVM and its PostgreSQL used fewer cores than
   * this.
   */
  static final double QUIET_OTHER_CORES = 0.25;

  private static final Executor RETRY_LATER =
      CompletableFuture.delayedExecutor(100, TimeUnit.MILLISECONDS);

  /**
   * Runs a completion callback on the thread that completed the stage (here: the actor thread that
   * sent the reply). Pekko's Java API hands out Scala-backed futures whose non-async {@code
   * whenComplete}/{@code thenApply}/... run asynchronously on the common ForkJoinPool, and on a
   * machine with fewer than 3 cores that pool has parallelism 1, so {@code CompletableFuture} falls
   * back to starting a new thread for every callback. Passing this executor avoids both.
   */
  static final Executor DIRECT = Runnable::run;

  /** One second (or so) of the measured window. */
  static final class Slice {
    final AtomicLong completed = new AtomicLong();
    final LongList latencies = new LongList();
    double seconds;
    CpuSample.Usage cpu = CpuSample.Usage.UNKNOWN;

    boolean quiet() {
      return cpu.known() && cpu.otherCores() < QUIET_OTHER_CORES;
    }
  }

  /** Figures over a set of slices. */
  record Figures(long completed, double seconds, long[] sortedLatencyNanos, CpuSample.Usage cpu) {
    static Figures of(List<Slice> slices) {
      long completed = 0;
      double seconds = 0;
      LongList all = new LongList();
      double machine = 0, jvm = 0, pg = 0, other = 0;
      boolean known = !slices.isEmpty();
      for (Slice s : slices) {
        completed += s.completed.get();
        seconds += s.seconds;
        all.addAll(s.latencies.toArray());
        known &= s.cpu.known();
        machine += s.cpu.machineCores() * s.seconds;
        jvm += s.cpu.jvmCores() * s.seconds;
        pg += s.cpu.postgresCores() * s.seconds;
        other += s.cpu.otherCores() * s.seconds;
      }
      long[] sorted = all.toArray();
      Arrays.sort(sorted);
      CpuSample.Usage cpu =
          known && seconds > 0
              ? new CpuSample.Usage(
                  true, machine / seconds, jvm / seconds, pg / seconds, other / seconds, jvm, pg)
              : CpuSample.Usage.UNKNOWN;
      return new Figures(completed, seconds, sorted, cpu);
    }

    double perSecond() {
      return seconds > 0 ? completed / seconds : Double.NaN;
    }

    double percentileMillis(double p) {
      if (sortedLatencyNanos.length == 0) return Double.NaN;
      int i = (int) Math.ceil(p / 100.0 * sortedLatencyNanos.length) - 1;
      return sortedLatencyNanos[Math.max(0, Math.min(i, sortedLatencyNanos.length - 1))] / 1e6;
    }

    /** JVM CPU milliseconds per operation. */
    double jvmMillisPerOp() {
      return cpu.known() && completed > 0 ? cpu.jvmSeconds() * 1000 / completed : Double.NaN;
    }

    /** This run's PostgreSQL CPU milliseconds per operation. */
    double postgresMillisPerOp() {
      return cpu.known() && completed > 0 ? cpu.postgresSeconds() * 1000 / completed : Double.NaN;
    }
  }

  record Result(String label, Figures all, Figures quiet, long errors, String lastError) {}

  private final List<? extends Worker> workers;
  private final PrintStream out;
  private final String database;
  private final AtomicLong completed = new AtomicLong();
  private final AtomicLong errors = new AtomicLong();
  private final AtomicReference<Throwable> lastError = new AtomicReference<>();
  private volatile Slice current;
  private volatile boolean stopping;
  private CountDownLatch drained;

  LoadDriver(List<? extends Worker> workers, PrintStream out, String database) {
    this.workers = workers;
    this.out = out;
    this.database = database;
  }

  /**
   * Runs the load: {@code warmup} unmeasured, then measures for {@code duration} (extended while
   * less than half of it was quiet), or until {@code count} operations completed when {@code count
   * > 0}; then stops issuing and waits for every worker's last operation.
   */
  Result run(String label, Duration warmup, Duration duration, long count)
      throws InterruptedException {
    drained = new CountDownLatch(workers.size());
    long start = System.nanoTime();
    for (Worker w : workers) issue(w);

    List<Slice> slices = new ArrayList<>();
    long warmupEnd = start + warmup.toNanos();
    long lastPrint = start;
    long printedCompleted = 0;
    CpuSample printCpu = CpuSample.take(database);
    while (System.nanoTime() < warmupEnd) {
      Thread.sleep(Math.max(1, Math.min(1000, (warmupEnd - System.nanoTime()) / 1_000_000)));
      if (System.nanoTime() - lastPrint >= 5_000_000_000L) {
        CpuSample now = CpuSample.take(database);
        printProgress(
            label, start, lastPrint, completed.get() - printedCompleted, printCpu.until(now), true);
        lastPrint = System.nanoTime();
        printedCompleted = completed.get();
        printCpu = now;
      }
    }

    long t0 = System.nanoTime();
    long planned = duration.toNanos();
    long limit = count > 0 ? Long.MAX_VALUE : 3 * planned;
    CpuSample sliceStart = CpuSample.take(database);
    current = new Slice();
    long measured = 0;
    double quietSeconds = 0;
    while (true) {
      long next = t0 + (slices.size() + 1) * 1_000_000_000L;
      long sleep = (next - System.nanoTime()) / 1_000_000;
      if (sleep > 0) Thread.sleep(sleep);
      CpuSample sliceEnd = CpuSample.take(database);
      Slice done = current;
      current = new Slice();
      done.seconds = (sliceEnd.nanos() - sliceStart.nanos()) / 1e9;
      done.cpu = sliceStart.until(sliceEnd);
      sliceStart = sliceEnd;
      slices.add(done);
      measured += done.completed.get();
      if (done.quiet()) quietSeconds += done.seconds;

      long elapsed = System.nanoTime() - t0;
      if (slices.size() % 5 == 0) {
        List<Slice> last = slices.subList(slices.size() - 5, slices.size());
        Figures f = Figures.of(last);
        printProgress(label, start, 0, f.completed(), f.cpu(), false);
      }
      boolean enough =
          count > 0
              ? measured >= count
              : elapsed >= planned && (quietSeconds * 2 >= planned / 1e9 || elapsed >= limit);
      if (enough) break;
    }
    current = null;
    stopping = true;
    if (!drained.await(120, TimeUnit.SECONDS)) {
      out.printf(
          "  [%s] %d workers still had an operation in flight after 120 s%n",
          label, drained.getCount());
    }
    Figures all = Figures.of(slices);
    Figures quiet = Figures.of(slices.stream().filter(Slice::quiet).toList());
    out.printf(
        Locale.ROOT,
        "  [%s] measured %.0f s, of which %.0f s quiet: %,.0f/s overall, %,.0f/s in quiet seconds%n",
        label,
        all.seconds(),
        quiet.seconds(),
        all.perSecond(),
        quiet.perSecond());
    Throwable last = lastError.get();
    return new Result(label, all, quiet, errors.get(), last == null ? null : last.toString());
  }

  private void printProgress(
      String label, long start, long since, long done, CpuSample.Usage u, boolean warmup) {
    long now = System.nanoTime();
    double seconds = warmup ? (now - since) / 1e9 : 5.0;
    out.printf(
        Locale.ROOT,
        "  [%s] t=%3.0fs %,8.0f/s%s, errors %d, cores machine/jvm/pg/other %s%n",
        label,
        (now - start) / 1e9,
        done / seconds,
        warmup ? " (warm-up)" : "",
        errors.get(),
        u.known()
            ? String.format(
                Locale.ROOT,
                "%.2f/%.2f/%.2f/%.2f",
                u.machineCores(),
                u.jvmCores(),
                u.postgresCores(),
                u.otherCores())
            : "?");
  }

  private void issue(Worker w) {
    if (stopping) {
      drained.countDown();
      return;
    }
    long begin = System.nanoTime();
    CompletionStage<?> stage;
    try {
      stage = w.attempt();
    } catch (RuntimeException e) {
      stage = CompletableFuture.failedFuture(e);
    }
    stage.whenCompleteAsync(
        (ok, failure) -> {
          long end = System.nanoTime();
          if (failure == null) {
            w.succeeded();
            completed.incrementAndGet();
            Slice s = current;
            if (s != null) {
              s.completed.incrementAndGet();
              s.latencies.add(end - begin);
            }
            issue(w);
          } else {
            errors.incrementAndGet();
            lastError.set(failure);
            CompletableFuture.runAsync(() -> issue(w), RETRY_LATER);
          }
        },
        DIRECT);
  }

  /** A growable array of longs; appends are rare enough (thousands a second) for a lock. */
  static final class LongList {
    private long[] values = new long[1024];
    private int size;

    synchronized void add(long v) {
      if (size == values.length) values = Arrays.copyOf(values, size * 2);
      values[size++] = v;
    }

    synchronized void addAll(long[] more) {
      if (size + more.length > values.length)
        values = Arrays.copyOf(values, Math.max(size * 2, size + more.length));
      System.arraycopy(more, 0, values, size, more.length);
      size += more.length;
    }

    synchronized long[] toArray() {
      return Arrays.copyOf(values, size);
    }
  }
}
