package dev.tickmark.agent;

import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * What {@link ProcessRuntime} and {@link DockerRuntime} share: the rentals' folders, the worker
 * threads, the workloads starting and running, and a workload's life from start to end.
 *
 * <ol>
 *   <li>{@link #start}: {@link #plan} checks the spec on the caller's thread (a bad one fails at
 *       once), then, unless the runtime is closing or the rental already runs, the plan's launch
 *       runs on a worker thread and returns the started workload. It is registered as running and
 *       {@link #watch watched}; one that started while the runtime closed is stopped at once.
 *   <li>{@link #stop}: {@link #halt} runs once on a worker thread and ends with {@link #end}.
 *   <li>{@link #end} (once, however many ask): {@link #release} makes sure nothing of the workload
 *       runs any more, then the scratch folder is wiped and {@link Handle#ended()} completes.
 *   <li>{@link #close}: stops every workload and waits for them, up to {@link #closeTimeout()}.
 * </ol>
 *
 * @param <W> the runtime's running workload
 */
abstract class AbstractRuntime<W extends AbstractRuntime.Workload> implements Runtime {
  /** Logs under the concrete runtime's name, like the runtime's own lines. */
  private final Logger log = LoggerFactory.getLogger(getClass());

  protected final RentalDirs dirs;
  protected final Duration grace;
  protected final Clock clock;
  protected final ExecutorService workers;
  private final Map<String, W> running = new ConcurrentHashMap<>();
  private final Set<String> starting = ConcurrentHashMap.newKeySet();
  private volatile boolean closed;

  /** {@code threadName}: the name of the worker threads. */
  AbstractRuntime(String threadName, Path stateDir, Duration grace, Clock clock) {
    this.dirs = new RentalDirs(stateDir);
    this.grace = grace;
    this.clock = clock;
    this.workers =
        Executors.newCachedThreadPool(
            r -> {
              Thread t = new Thread(r, threadName);
              t.setDaemon(true);
              return t;
            });
  }

  RentalDirs dirs() {
    return dirs;
  }

  /**
   * Checks {@code spec} (throws {@link Failure}, or {@link IllegalArgumentException} whose message
   * is the reason) and returns its launch: run on a worker thread, it starts the workload and
   * returns it, or throws {@link Failure} having cleaned up after itself.
   */
  protected abstract Supplier<W> plan(Spec spec, RentalLog log);

  /** Arranges for {@link #end} to be called when the workload ends by itself. */
  protected abstract void watch(W workload);

  /**
   * Stops the workload (on a worker thread, or on the launching one while closing), then calls
   * {@link #end}.
   */
  protected abstract void halt(W workload, String why);

  /** Within {@link #end}: makes sure nothing of the workload is left running. */
  protected abstract void release(W workload);

  /** How long {@link #close()} waits for the workloads to stop. */
  protected abstract Duration closeTimeout();

  /** Sends the workload SIGTERM, nothing more (on a worker thread). */
  protected abstract void signalTerm(W workload);

  /** Without a log: the output goes to the rental's {@code output.log} file. */
  @Override
  public CompletableFuture<Handle> start(Spec spec) {
    return start(spec, null);
  }

  @Override
  public CompletableFuture<Handle> start(Spec spec, RentalLog log) {
    Supplier<W> launch;
    try {
      launch = plan(spec, log);
    } catch (Failure e) {
      return CompletableFuture.failedFuture(e);
    } catch (IllegalArgumentException e) {
      return CompletableFuture.failedFuture(new Failure(e.getMessage()));
    }
    String id = spec.rentalId();
    if (closed) return CompletableFuture.failedFuture(new Failure(Rentals.SHUTTING_DOWN));
    if (running.containsKey(id) || !starting.add(id)) {
      return CompletableFuture.failedFuture(new Failure("rental " + id + " is already running"));
    }
    return CompletableFuture.supplyAsync(
        () -> {
          try {
            return register(launch.get());
          } finally {
            starting.remove(id);
          }
        },
        workers);
  }

  private Handle register(W workload) {
    running.put(workload.rentalId(), workload);
    watch(workload);
    // the agent is shutting down: close() did not see it yet
    if (closed && workload.stopping.compareAndSet(false, true))
      halt(workload, "stopped: the agent is shutting down");
    return workload;
  }

  /**
   * Creates the rental's folder and its empty scratch folder; a {@link Failure} when the host
   * cannot.
   */
  protected Path prepareScratch(String id) {
    try {
      return dirs.prepare(id);
    } catch (IOException e) {
      log.error("rental {}: cannot create its scratch folder: {}", id, e.toString());
      dirs.wipe(id);
      throw new Failure("cannot create the scratch folder on the host");
    }
  }

  /**
   * {@link #prepareScratch(String)}, then the spec's {@link Fill} (a restored snapshot) into it; a
   * {@link Failure} when either cannot be done: the workload never starts on a partial workspace.
   */
  protected Path prepareScratch(Spec spec) {
    String id = spec.rentalId();
    Path scratch = prepareScratch(id);
    if (spec.fill() == null) return scratch;
    try {
      spec.fill().into(scratch);
      return scratch;
    } catch (IOException | RuntimeException e) {
      log.error("rental {}: cannot restore its workspace: {}", id, e.toString());
      dirs.wipe(id);
      throw new Failure(
          "restore failed: "
              + Runtime.oneLine(e.getMessage() == null ? e.toString() : e.getMessage(), 300),
          e);
    }
  }

  @Override
  public CompletableFuture<Instant> stop(String rentalId) {
    return stop(rentalId, false);
  }

  @Override
  public CompletableFuture<Instant> stop(String rentalId, boolean keepWorkspace) {
    W workload = rentalId == null ? null : running.get(rentalId);
    if (workload == null) return CompletableFuture.completedFuture(null);
    if (keepWorkspace) workload.keep = true; // before the stop: end() reads it
    if (workload.stopping.compareAndSet(false, true))
      workers.execute(() -> halt(workload, "stopped"));
    return workload.ended.copy();
  }

  @Override
  public boolean notice(String rentalId, Instant deadline) {
    W workload = workload(rentalId);
    if (workload == null || workload.ending.get()) return false;
    try {
      dirs.writeNotice(rentalId, Runtime.noticeJson(rentalId, deadline));
      log.info("rental {}: spot notice written (deadline {})", rentalId, deadline);
      return true;
    } catch (IOException e) {
      log.warn("rental {}: cannot write its spot notice: {}", rentalId, e.toString());
      return false;
    }
  }

  @Override
  public CompletableFuture<Boolean> terminate(String rentalId) {
    W workload = workload(rentalId);
    if (workload == null || workload.stopping.get())
      return CompletableFuture.completedFuture(false);
    return CompletableFuture.supplyAsync(
        () -> {
          if (workload.stopping.get()) return false; // the stop signals it anyway
          signalTerm(workload);
          return true;
        },
        workers);
  }

  /**
   * Ends a workload (once, however many ask): {@link #release}, then wipes its scratch folder and
   * completes {@link Workload#ended}.
   */
  protected void end(W workload, String why) {
    if (!workload.ending.compareAndSet(false, true)) return;
    String id = workload.rentalId();
    try {
      release(workload);
      workload.closeOutput();
      Instant at = clock.instant();
      if (workload.keep) {
        boolean kept = dirs.keep(id, at);
        log.info("rental {}: {}{}", id, why, kept ? "; scratch folder kept for a snapshot" : "");
      } else {
        boolean wiped = dirs.wipe(id);
        log.info("rental {}: {}{}", id, why, wiped ? "; scratch folder wiped" : "");
      }
      running.remove(id, workload);
      workload.ended.complete(at);
    } catch (RuntimeException e) {
      log.error("rental {}: ending it failed", id, e);
      if (workload.output != null) workload.output.close();
      running.remove(id, workload);
      workload.ended.complete(clock.instant());
    }
  }

  /** The running workload of a rental, or null. */
  protected W workload(String rentalId) {
    return rentalId == null ? null : running.get(rentalId);
  }

  @Override
  public Set<String> running() {
    return Set.copyOf(running.keySet());
  }

  @Override
  public void close() {
    closed = true;
    List<CompletableFuture<Instant>> ends = new ArrayList<>();
    for (String id : running()) ends.add(stop(id));
    try {
      CompletableFuture.allOf(ends.toArray(CompletableFuture[]::new))
          .get(closeTimeout().toMillis(), TimeUnit.MILLISECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } catch (ExecutionException | TimeoutException e) {
      log.warn("workloads still stopping at shutdown: {}", running());
    }
    workers.shutdown();
  }

  /** A builder for a helper or workload process: stdin empty, stderr merged into stdout. */
  static ProcessBuilder withoutInput(List<String> command) {
    return new ProcessBuilder(command)
        .redirectInput(ProcessBuilder.Redirect.from(new File("/dev/null")))
        .redirectErrorStream(true);
  }

  /**
   * Reads {@code in} into {@code log} on a worker thread; the returned future completes when the
   * stream has ended.
   */
  protected CompletableFuture<Void> capture(
      InputStream in, RentalLog.Stream stream, RentalLog log) {
    return CompletableFuture.runAsync(() -> LineReader.pump(in, stream, log), workers);
  }

  /** How long {@link #end} waits for the output readers to reach the end of the output. */
  static final Duration OUTPUT_DRAIN = Duration.ofSeconds(5);

  /** A workload that started: what every runtime keeps of it. */
  abstract static class Workload implements Handle {
    final Spec spec;
    final Instant startedAt;
    final CompletableFuture<Instant> ended = new CompletableFuture<>();

    /** Where its output goes (null: a file), and the readers filling it. */
    RentalLog output;

    final List<CompletableFuture<Void>> readers = new ArrayList<>();

    /**
     * Once nothing of the workload runs: waits (bounded) for the readers to read what is left in
     * the pipes, then closes the log.
     */
    void closeOutput() {
      if (output == null) return;
      try {
        CompletableFuture.allOf(readers.toArray(CompletableFuture[]::new))
            .get(OUTPUT_DRAIN.toMillis(), TimeUnit.MILLISECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      } catch (ExecutionException | TimeoutException e) {
        // a pipe still held open by something we could not end: the log ends here
      }
      output.close();
    }

    /** Its scratch folder is kept when it ends (a stop with a snapshot). */
    volatile boolean keep;

    /** Set by the first stop: the workload is being stopped on purpose. */
    final AtomicBoolean stopping = new AtomicBoolean();

    final AtomicBoolean ending = new AtomicBoolean();

    /** Set by the runtime before {@link #end} when it learns how the main process ended. */
    volatile Integer exitCode;

    Workload(Spec spec, Instant startedAt) {
      this.spec = spec;
      this.startedAt = startedAt;
    }

    @Override
    public String rentalId() {
      return spec.rentalId();
    }

    @Override
    public Instant startedAt() {
      return startedAt;
    }

    @Override
    public CompletableFuture<Instant> ended() {
      return ended.copy();
    }

    @Override
    public Integer exitCode() {
      return exitCode;
    }
  }
}
