package dev.tickmark.engine.sim;

import com.typesafe.config.Config;
import java.util.ArrayDeque;
import java.util.List;
import java.util.Map;
import java.util.PriorityQueue;
import java.util.concurrent.AbstractExecutorService;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.pekko.actor.AbstractSchedulerBase;
import org.apache.pekko.actor.Cancellable;
import org.apache.pekko.dispatch.DispatcherPrerequisites;
import org.apache.pekko.dispatch.ExecutorServiceConfigurator;
import org.apache.pekko.dispatch.ExecutorServiceFactory;
import org.apache.pekko.event.LoggingAdapter;
import scala.concurrent.ExecutionContext;
import scala.concurrent.duration.FiniteDuration;

/**
 * The simulation's event loop: one queue of runnables (what every simulated dispatcher hands to its
 * executor) and one queue of timed tasks (Pekko's scheduler: timers, ask timeouts; the simulated
 * network; the simulated agents), both run by the one thread that drives the simulation, one task
 * at a time. Virtual time only moves in {@link #advance}; tasks due at the same millisecond run in
 * the order they were scheduled, so a run is a pure function of its inputs.
 *
 * <p>Pekko finds the loop through configuration: dispatchers name {@link Executor} as their {@code
 * executor} and carry {@code sim-loop-id}; {@code pekko.scheduler.implementation} is {@link
 * Scheduler}, which reads {@code tickmark.sim.loop-id}.
 */
public final class SimLoop {
  private static final Map<String, SimLoop> LOOPS = new ConcurrentHashMap<>();
  private static final AtomicLong IDS = new AtomicLong();

  final String id;
  private final ArrayDeque<Runnable> ready = new ArrayDeque<>();
  private final List<Runnable> foreign = new java.util.ArrayList<>();
  private final PriorityQueue<Task> timed = new PriorityQueue<>();
  private long nowMillis;
  private long seq;
  private volatile Thread owner;

  /**
   * Runnables handed to the loop by a thread other than the simulation's: each is a source of
   * nondeterminism.
   */
  final AtomicLong foreignSubmissions = new AtomicLong();

  long tasksRun;

  /** Shown every journal write (persistence id, events), on the loop's thread, as it happens. */
  volatile java.util.function.BiConsumer<String, List<Object>> journalListener;

  long waits;
  long foreignTies;
  long foreignUnordered;
  long waitNanos;

  private SimLoop(String id) {
    this.id = id;
  }

  static SimLoop create() {
    if (java.util.concurrent.ForkJoinPool.getCommonPoolParallelism() < 2) {
      // With fewer, the JDK runs async callbacks on a new thread each, which the loop cannot wait
      // for.
      throw new IllegalStateException(
          "run the simulation with -Djava.util.concurrent.ForkJoinPool.common.parallelism=2 (or more)");
    }
    SimLoop loop = new SimLoop("sim-loop-" + IDS.incrementAndGet());
    LOOPS.put(loop.id, loop);
    return loop;
  }

  static SimLoop get(String id) {
    SimLoop loop = LOOPS.get(id);
    if (loop == null) throw new IllegalStateException("no simulation loop " + id);
    return loop;
  }

  void close() {
    LOOPS.remove(id);
  }

  /** The thread that runs the loop; runnables from any other thread are counted as foreign. */
  void ownedBy(Thread thread) {
    owner = thread;
  }

  /**
   * Runs {@code blocking} while a helper thread keeps the loop going: Pekko's start-up waits
   * (blocking) for its logger actors, which only a running loop can start. Nothing of the market
   * exists yet, so nothing depends on the order.
   */
  <T> T pumpedWhile(java.util.function.Supplier<T> blocking) {
    java.util.concurrent.atomic.AtomicBoolean done =
        new java.util.concurrent.atomic.AtomicBoolean();
    Thread pump =
        new Thread(
            () -> {
              while (!done.get()) {
                synchronized (this) {
                  runUntilQuiet();
                }
                Thread.onSpinWait();
              }
            },
            id + "-startup");
    pump.setDaemon(true);
    pump.start();
    try {
      return blocking.get();
    } finally {
      done.set(true);
      try {
        pump.join();
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
  }

  long nowMillis() {
    return nowMillis;
  }

  void execute(Runnable r) {
    if (owner != null && Thread.currentThread() != owner) {
      foreignSubmissions.incrementAndGet();
      synchronized (foreign) {
        foreign.add(r);
      }
      return;
    }
    synchronized (ready) {
      ready.add(r);
    }
  }

  /**
   * Pekko's Java {@code ask}/{@code pipeToSelf} complete through Scala's {@code CompletionStage}
   * wrapper, which runs every callback asynchronously on the JDK's common pool: a reply's callback
   * (which only tells the asker its answer) runs on another thread. The loop waits for the common
   * pool to be idle after every task, so those callbacks have run before the next task, and hands
   * the mailboxes they scheduled to the queue sorted by actor path, not in the order the pool's
   * threads happened to reach it.
   */
  private void settle() {
    // Not awaitQuiescence: it parks for a while between looks, and the callbacks take microseconds.
    if (!COMMON.isQuiescent()) {
      long t0 = System.nanoTime();
      waits++;
      while (!COMMON.isQuiescent()) Thread.yield();
      waitNanos += System.nanoTime() - t0;
    }
    if (owner == null) return;
    List<Runnable> arrived;
    synchronized (foreign) {
      if (foreign.isEmpty()) return;
      arrived = new java.util.ArrayList<>(foreign);
      foreign.clear();
    }
    if (arrived.size() > 1) {
      arrived.sort(java.util.Comparator.comparing(SimLoop::orderKey));
      for (int i = 1; i < arrived.size(); i++)
        if (orderKey(arrived.get(i)).equals(orderKey(arrived.get(i - 1)))) foreignTies++;
    }
    for (Runnable r : arrived) if (orderKey(r).equals("~")) foreignUnordered++;
    synchronized (ready) {
      ready.addAll(arrived);
    }
  }

  private static final java.util.concurrent.ForkJoinPool COMMON =
      java.util.concurrent.ForkJoinPool.commonPool();

  private static String orderKey(Runnable r) {
    if (r instanceof org.apache.pekko.dispatch.Mailbox m && m.actor() != null)
      return m.actor().self().path().toString();
    return "~"; // not a mailbox: keeps its place among the others (never seen in practice)
  }

  /**
   * Runs {@code r} at virtual time {@code atMillis} (now if earlier), after everything scheduled
   * before it for then.
   */
  Task at(long atMillis, Runnable r) {
    Task t = new Task(Math.max(atMillis, nowMillis), nextSeq(), r, 0, null);
    synchronized (timed) {
      timed.add(t);
    }
    return t;
  }

  Task after(long delayMillis, Runnable r) {
    return at(nowMillis + Math.max(0, delayMillis), r);
  }

  private long nextSeq() {
    synchronized (timed) {
      return seq++;
    }
  }

  private final List<Runnable> endOfTask = new java.util.ArrayList<>();

  /** Runs {@code r} once the task now running returns (on this thread). */
  void atEndOfTask(Runnable r) {
    endOfTask.add(r);
  }

  private void endOfTask() {
    while (!endOfTask.isEmpty()) {
      List<Runnable> now = new java.util.ArrayList<>(endOfTask);
      endOfTask.clear();
      now.forEach(Runnable::run);
    }
  }

  /**
   * Runs ready runnables and tasks due now until there are none: the system is quiescent at this
   * instant.
   */
  void runUntilQuiet() {
    while (true) {
      Runnable r;
      synchronized (ready) {
        r = ready.poll();
      }
      if (r != null) {
        tasksRun++;
        r.run();
        endOfTask();
        settle();
        continue;
      }
      settle();
      synchronized (ready) {
        if (!ready.isEmpty()) continue;
      }
      Task due = pollDue(nowMillis);
      if (due == null) return;
      due.fire(this);
      endOfTask();
      settle();
    }
  }

  /**
   * Moves virtual time forward by {@code millis}, running every task on the way at its own instant.
   */
  void advance(long millis) {
    long target = nowMillis + millis;
    runUntilQuiet();
    while (true) {
      Task next;
      synchronized (timed) {
        next = timed.peek();
      }
      if (next == null || next.due > target) break;
      nowMillis = Math.max(nowMillis, next.due);
      runUntilQuiet();
    }
    nowMillis = target;
    runUntilQuiet();
  }

  private Task pollDue(long now) {
    synchronized (timed) {
      while (true) {
        Task t = timed.peek();
        if (t == null || t.due > now) return null;
        timed.poll();
        if (!t.cancelled) return t;
      }
    }
  }

  int pendingTimed() {
    synchronized (timed) {
      return timed.size();
    }
  }

  /** A timed task; periodic when {@code interval > 0} (fixed rate, as Pekko's {@code schedule}). */
  static final class Task implements Comparable<Task>, Cancellable {
    final long due;
    final long order;
    final Runnable runnable;
    final long interval;
    final Task first; // the task a periodic repetition stands for (cancelling it cancels them all)
    volatile boolean cancelled;
    volatile boolean done;

    Task(long due, long order, Runnable runnable, long interval, Task first) {
      this.due = due;
      this.order = order;
      this.runnable = runnable;
      this.interval = interval;
      this.first = first;
    }

    void fire(SimLoop loop) {
      Task head = first == null ? this : first;
      if (head.cancelled) return;
      if (interval > 0) {
        Task next = new Task(due + interval, loop.nextSeq(), runnable, interval, head);
        synchronized (loop.timed) {
          loop.timed.add(next);
        }
      } else {
        head.done = true;
      }
      loop.tasksRun++;
      runnable.run();
    }

    @Override
    public int compareTo(Task o) {
      int c = Long.compare(due, o.due);
      return c != 0 ? c : Long.compare(order, o.order);
    }

    @Override
    public boolean cancel() {
      Task head = first == null ? this : first;
      boolean was = !head.cancelled && !head.done;
      head.cancelled = true;
      cancelled = true;
      return was;
    }

    @Override
    public boolean isCancelled() {
      Task head = first == null ? this : first;
      return head.cancelled;
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Pekko's side

  private final ExecutorService executorService =
      new AbstractExecutorService() {
        @Override
        public void execute(Runnable command) {
          SimLoop.this.execute(command);
        }

        @Override
        public void shutdown() {}

        @Override
        public List<Runnable> shutdownNow() {
          return List.of();
        }

        @Override
        public boolean isShutdown() {
          return false;
        }

        @Override
        public boolean isTerminated() {
          return false;
        }

        @Override
        public boolean awaitTermination(long timeout, TimeUnit unit) {
          return true;
        }
      };

  /**
   * {@code executor = "dev.tickmark.engine.sim.SimLoop$Executor"} in a dispatcher's configuration,
   * with {@code sim-loop-id}.
   */
  public static final class Executor extends ExecutorServiceConfigurator {
    private final SimLoop loop;

    public Executor(Config config, DispatcherPrerequisites prerequisites) {
      super(config, prerequisites);
      this.loop = SimLoop.get(config.getString("sim-loop-id"));
    }

    @Override
    public ExecutorServiceFactory createExecutorServiceFactory(
        String id, ThreadFactory threadFactory) {
      return () -> loop.executorService;
    }
  }

  /**
   * {@code pekko.scheduler.implementation}: Pekko's scheduler on virtual time. Unlike the testkit's
   * {@code ExplicitlyTriggeredScheduler} (behind {@code ManualTime}) it does not sleep 100 ms on
   * every advance and runs tasks due at the same instant in the order they were scheduled, not in a
   * hash map's order.
   */
  public static final class Scheduler extends AbstractSchedulerBase {
    private final SimLoop loop;

    public Scheduler(Config config, LoggingAdapter log, ThreadFactory threadFactory) {
      this.loop = SimLoop.get(config.getString("tickmark.sim.loop-id"));
    }

    @Override
    public Cancellable scheduleOnce(
        FiniteDuration delay, Runnable runnable, ExecutionContext executor) {
      return loop.after(delay.toMillis(), () -> executor.execute(runnable));
    }

    @Override
    public Cancellable schedule(
        FiniteDuration initialDelay,
        FiniteDuration interval,
        Runnable runnable,
        ExecutionContext executor) {
      long every = Math.max(1, interval.toMillis());
      Task t =
          new Task(
              loop.nowMillis + Math.max(0, initialDelay.toMillis()),
              loop.nextSeq(),
              () -> executor.execute(runnable),
              every,
              null);
      synchronized (loop.timed) {
        loop.timed.add(t);
      }
      return t;
    }

    @Override
    public double maxFrequency() {
      return 1000;
    }
  }
}
