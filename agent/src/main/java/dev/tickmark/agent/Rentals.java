package dev.tickmark.agent;

import dev.tickmark.wire.AgentFrame;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.format.DateTimeParseException;
import java.time.temporal.ChronoUnit;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.Executor;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The rentals of this agent, across connections: turns {@code start_rental}, {@code stop_rental}
 * and {@code preempt} into {@link Runtime} calls, and the workloads' fate into {@code
 * rental_started}, {@code rental_failed} and {@code rental_stopped}. Every node message may arrive
 * twice, so every answer can be given again:
 *
 * <pre>
 *   (none) --start_rental--> STARTING --started--> RUNNING --stop_rental / preempt deadline--> STOPPING --> STOPPED
 *                                |                    '---------- the workload exits by itself ----------> STOPPED
 *                                '--cannot start--> FAILED
 * </pre>
 *
 * <table>
 *   <caption>answers</caption>
 *   <tr><th>frame</th><th>rental is…</th><th>answer</th></tr>
 *   <tr><td>start_rental</td><td>unknown</td><td>start it: {@code rental_started {at: start}} or {@code rental_failed}</td></tr>
 *   <tr><td>start_rental</td><td>starting</td><td>nothing more (the answer comes when it has started)</td></tr>
 *   <tr><td>start_rental</td><td>running, stopping</td><td>{@code rental_started} again, same {@code at}</td></tr>
 *   <tr><td>start_rental</td><td>stopped / failed</td><td>{@code rental_stopped} / {@code rental_failed} again</td></tr>
 *   <tr><td>stop_rental</td><td>starting</td><td>stop it once started ({@code rental_started}, then {@code rental_stopped})</td></tr>
 *   <tr><td>stop_rental</td><td>running</td><td>stop it, then {@code rental_stopped {at: end}}</td></tr>
 *   <tr><td>stop_rental</td><td>stopping</td><td>nothing more (the answer comes when it has stopped)</td></tr>
 *   <tr><td>stop_rental</td><td>stopped, failed, unknown</td><td>{@code rental_stopped} (its end; now for an unknown one)</td></tr>
 *   <tr><td>preempt</td><td>starting, running</td><td>the spot notice: write the notice file (once running), SIGTERM {@link #DEFAULT_NOTICE_LEAD} before the deadline, stop it at the deadline (unless a stop_rental or the workload's own exit comes first); a repeated preempt with the same or a later deadline changes nothing, an earlier one reschedules</td></tr>
 * </table>
 *
 * <p>After each welcome ({@link #resync()}): {@code rental_started} for every running rental, and
 * the end of every rental that ended while no session could take it. Heartbeats list {@link
 * #running()}.
 *
 * <p>Confined to the agent's loop thread: the runtime's completions come back through {@code loop}.
 */
final class Rentals {
  /**
   * Ended rentals kept to answer duplicates; beyond this many, the oldest already-reported ones are
   * forgotten.
   */
  static final int MAX_ENDED = 4096;

  static final String SHUTTING_DOWN = "the agent is shutting down";

  /** How long before a preemption deadline the workload gets SIGTERM. */
  static final Duration DEFAULT_NOTICE_LEAD = Duration.ofSeconds(30);

  private static final Logger log = LoggerFactory.getLogger(Rentals.class);

  /** Where frames go. */
  interface Outbox {
    /** Sends on the established session; false when there is none (the frame is then not sent). */
    boolean send(AgentFrame frame);
  }

  /**
   * Told when a rental's workload runs (with its {@code ssh_public_key}: authorized_keys text, may
   * be null) and when it stops running (stopping, stopped, failed): the agent's SSH access follows
   * it. Called on the loop.
   */
  interface Access {
    Access NONE =
        new Access() {
          @Override
          public void running(String rentalId, String authorizedKeys) {}

          @Override
          public void ending(String rentalId) {}
        };

    void running(String rentalId, String authorizedKeys);

    void ending(String rentalId);
  }

  /**
   * The agent's snapshots: a restore before a workload starts, an upload after a stop with a
   * snapshot. Called on the loop; both return at once.
   */
  interface Snapshots {
    /** Without snapshots: a restore fails the rental, an upload is not made. */
    Snapshots NONE =
        new Snapshots() {
          @Override
          public CompletableFuture<Restored> restore(String rentalId, AgentFrame.Restore restore) {
            return CompletableFuture.failedFuture(
                new Runtime.Failure("restore failed: this agent cannot restore snapshots"));
          }

          @Override
          public void upload(AgentFrame.UploadSnapshot upload) {
            log.warn(
                "rental {}: upload_snapshot, but this agent cannot upload snapshots",
                upload.rentalId());
          }
        };

    /**
     * Downloads and checks the snapshot; completes with what fills the new scratch folder, or
     * exceptionally with a {@link Runtime.Failure} (the {@code rental_failed} reason).
     */
    CompletableFuture<Restored> restore(String rentalId, AgentFrame.Restore restore);

    /** {@code upload_snapshot}. */
    void upload(AgentFrame.UploadSnapshot upload);
  }

  /** A downloaded snapshot: fills a scratch folder; {@link #discard} once the start is over. */
  interface Restored extends Runtime.Fill {
    void discard();
  }

  /** Runs a task on the loop after a delay; the returned runnable cancels it. */
  interface Scheduler {
    Runnable schedule(Duration delay, Runnable task);
  }

  enum State {
    STARTING,
    RUNNING,
    STOPPING,
    STOPPED,
    FAILED
  }

  private static final class Rental {
    final String id;
    final Set<Integer> cards;
    String authorizedKeys;
    State state = State.STARTING;
    Instant startedAt;
    Instant listedFrom; // heartbeats stamped after this list it (until it stops)
    Instant endedAt;
    boolean exited; // it ended by itself, unasked
    Integer exitCode; // its exit status, when it ended by itself and the runtime knows it
    String failure;
    boolean stopWanted;
    boolean keep; // stopped with a snapshot: its workspace is kept, not wiped
    AgentFrame.UploadSnapshot uploadWanted; // asked for while it was still stopping
    boolean endReported;
    Runnable cancelPreempt;
    Instant deadline; // the earliest preemption deadline it was given
    Runnable cancelNotice; // the scheduled SIGTERM
    boolean terminated; // the spot notice's SIGTERM was sent (once is enough)
    boolean preempted; // it ended because of its notice: the SIGTERM, or the stop at the deadline
    CompletableFuture<Void> gone =
        new CompletableFuture<>(); // completes when it no longer holds its cards

    Rental(String id, Set<Integer> cards) {
      this.id = id;
      this.cards = cards;
    }

    boolean active() {
      return state == State.STARTING || state == State.RUNNING || state == State.STOPPING;
    }
  }

  private final Runtime runtime;
  private final Supplier<Set<Integer>> cards;
  private final Clock clock;
  private Instant lastStamp; // the latest stamp of a heartbeat or a listed_from: stamps only grow
  private final Executor loop;
  private final Scheduler scheduler;
  private final Outbox outbox;
  private final LogShipper logs;
  private final Duration noticeLead;
  private final Map<String, Rental> rentals = new LinkedHashMap<>();
  private boolean closing;
  private CompletableFuture<Void> drained;
  private Access access = Access.NONE;
  private Snapshots snapshots = Snapshots.NONE;

  /**
   * @param cards the card indexes of this machine (from the latest hardware report)
   * @param loop runs tasks on the thread that drives this object
   */
  Rentals(
      Runtime runtime,
      Supplier<Set<Integer>> cards,
      Clock clock,
      Executor loop,
      Scheduler scheduler,
      Outbox outbox) {
    this(
        runtime,
        cards,
        clock,
        loop,
        scheduler,
        outbox,
        new LogShipper(RentalLog.Limits.DEFAULT, clock));
  }

  /** {@code logs}: where the workloads' output goes, and is flushed before a rental's end. */
  Rentals(
      Runtime runtime,
      Supplier<Set<Integer>> cards,
      Clock clock,
      Executor loop,
      Scheduler scheduler,
      Outbox outbox,
      LogShipper logs) {
    this(runtime, cards, clock, loop, scheduler, outbox, logs, DEFAULT_NOTICE_LEAD);
  }

  /** {@code noticeLead}: how long before a preemption deadline the workload gets SIGTERM. */
  Rentals(
      Runtime runtime,
      Supplier<Set<Integer>> cards,
      Clock clock,
      Executor loop,
      Scheduler scheduler,
      Outbox outbox,
      LogShipper logs,
      Duration noticeLead) {
    this.logs = logs;
    this.noticeLead = noticeLead;
    this.runtime = runtime;
    this.cards = cards;
    this.clock = clock;
    this.loop = loop;
    this.scheduler = scheduler;
    this.outbox = outbox;
  }

  Runtime runtime() {
    return runtime;
  }

  /** Who is told when rentals run and stop running (the SSH server). */
  void access(Access access) {
    this.access = access;
  }

  /** Where restores and uploads go. */
  void snapshots(Snapshots snapshots) {
    this.snapshots = snapshots;
  }

  LogShipper logs() {
    return logs;
  }

  /**
   * Handles a rental frame from the node ({@code start_rental}, {@code stop_rental}, {@code
   * preempt}, {@code upload_snapshot}).
   */
  void onFrame(AgentFrame frame) {
    if (frame instanceof AgentFrame.StartRental s) onStart(s);
    else if (frame instanceof AgentFrame.StopRental s) onStop(s);
    else if (frame instanceof AgentFrame.Preempt p) onPreempt(p);
    else if (frame instanceof AgentFrame.UploadSnapshot u) onUpload(u);
    else throw new IllegalArgumentException("not a rental frame: " + Session.frameType(frame));
  }

  /** A heartbeat's stamp ({@code at}) and the workloads it lists. */
  record Listing(Instant at, List<String> rentals) {}

  /**
   * What a heartbeat built now lists ({@link #running()}), and its stamp: the clock's reading
   * {@code now}, but always after every stamp given before, a heartbeat's or a {@code listed_from}.
   * So a heartbeat stamped after a rental's {@code listed_from} was built after the rental ran, and
   * lists it while it runs, even if the clock stepped back in between: the host takes one that
   * omits it as proof it is gone. After a step back the stamps hold just past the last one until
   * the clock catches up.
   */
  Listing heartbeat(Instant now) {
    return new Listing(nextStamp(now), running());
  }

  private Instant nextStamp(Instant now) {
    lastStamp = lastStamp != null && !now.isAfter(lastStamp) ? lastStamp.plusMillis(1) : now;
    return lastStamp;
  }

  /** The rentals whose workload runs now (for heartbeats), in the order they were started. */
  List<String> running() {
    List<String> ids = new ArrayList<>();
    for (Rental r : rentals.values())
      if (r.state == State.RUNNING || r.state == State.STOPPING) ids.add(r.id);
    return ids;
  }

  /** The state of a rental this agent knows (for tests and logs). */
  State state(String id) {
    Rental r = rentals.get(id);
    return r == null ? null : r.state;
  }

  /** After a welcome: tells the new session what it may have missed. */
  void resync() {
    for (Rental r : new ArrayList<>(rentals.values())) {
      switch (r.state) {
        case RUNNING, STOPPING -> outbox.send(started(r));
        case STOPPED, FAILED -> {
          if (!r.endReported) reportEnd(r);
        }
        case STARTING -> {}
      }
    }
  }

  /**
   * Stops every workload and refuses new ones (agent shutdown). Completes, on the loop, once none
   * runs any more and their {@code rental_stopped} have been handed to the outbox.
   */
  CompletableFuture<Void> stopAll() {
    closing = true;
    if (drained == null) drained = new CompletableFuture<>();
    for (Rental r : new ArrayList<>(rentals.values())) {
      if (r.state == State.STARTING) r.stopWanted = true;
      else if (r.state == State.RUNNING) beginStop(r, "the agent is shutting down");
    }
    checkDrained();
    return drained;
  }

  // ---- node frames

  private void onStart(AgentFrame.StartRental s) {
    String id = s.rentalId();
    Rental known = id == null ? null : rentals.get(id);
    if (known != null) {
      switch (known.state) {
        case STARTING -> log.info("rental {}: start_rental again while it is starting", id);
        case RUNNING, STOPPING -> outbox.send(started(known));
        case STOPPED -> outbox.send(stopped(known));
        case FAILED -> outbox.send(new AgentFrame.RentalFailed(id, known.failure));
      }
      return;
    }
    String why = Runtime.checkRentalId(id);
    if (why != null) {
      log.warn("start_rental refused: {}", why);
      outbox.send(
          new AgentFrame.RentalFailed(id, why)); // not remembered: the id is not one to keep
      return;
    }
    why = Runtime.checkCards(s.cards(), cards.get());
    if (why == null && closing) why = SHUTTING_DOWN;
    List<CompletableFuture<Void>> waitFor = new ArrayList<>();
    if (why == null) {
      for (Rental other : rentals.values()) {
        if (!other.active() || java.util.Collections.disjoint(other.cards, s.cards())) continue;
        if (other.state == State.STOPPING || other.stopWanted) {
          waitFor.add(other.gone); // the cards are being given back: start once they are
        } else {
          Set<Integer> shared = new HashSet<>(other.cards);
          shared.retainAll(s.cards());
          why =
              "card "
                  + shared.stream().sorted().findFirst().orElseThrow()
                  + " is in use by another rental";
          break;
        }
      }
    }
    Rental r = new Rental(id, why == null ? Set.copyOf(s.cards()) : Set.of());
    rentals.put(id, r);
    if (why != null) {
      failed(r, why);
      return;
    }
    log.info(
        "rental {}: starting on cards {} ({} runtime{})",
        id,
        s.cards(),
        runtime.name(),
        waitFor.isEmpty() ? "" : ", once the previous rental on them has stopped");
    r.authorizedKeys = s.sshPublicKey();
    Runtime.Spec spec = Runtime.Spec.of(s);
    // the download runs while the cards are given back; the command starts only on a complete,
    // checked workspace
    CompletableFuture<Restored> restored;
    if (s.restore() == null) {
      restored = CompletableFuture.completedFuture(null);
    } else {
      log.info("rental {}: restoring snapshot {} first", id, s.restore().snapshotId());
      restored = snapshots.restore(id, s.restore());
    }
    CompletableFuture.allOf(waitFor.toArray(CompletableFuture[]::new))
        .thenCombine(restored, (x, fill) -> fill)
        .thenCompose(
            fill ->
                runtime
                    .start(fill == null ? spec : spec.withFill(fill), logs.open(id))
                    .whenComplete(
                        (h, e) -> {
                          if (fill != null) fill.discard();
                        }))
        .whenComplete((handle, error) -> loop.execute(() -> started(r, handle, error)));
  }

  private void onStop(AgentFrame.StopRental s) {
    String id = s.rentalId();
    Rental r = id == null ? null : rentals.get(id);
    if (s.snapshot() && r != null && r.active()) {
      log.info("rental {}: stop with a snapshot: its workspace is kept", id);
      r.keep = true;
    }
    if (r == null) {
      log.info(
          "rental {}: stop_rental for a rental this agent does not run: answering rental_stopped",
          id);
      if (Runtime.checkRentalId(id) == null) {
        // remembered, so that a start_rental arriving late (e.g. on another session) does not start
        // it after all
        r = new Rental(id, Set.of());
        r.state = State.STOPPED;
        r.endedAt = now();
        rentals.put(id, r);
        reportEnd(r);
        prune();
      } else {
        outbox.send(new AgentFrame.RentalStopped(id, now().toString()));
      }
      return;
    }
    switch (r.state) {
      case STARTING -> {
        log.info("rental {}: stop_rental while it is starting: it is stopped once started", id);
        r.stopWanted = true;
      }
      case RUNNING -> beginStop(r, "stop_rental");
      case STOPPING -> {
        log.info("rental {}: stop_rental again while it is stopping", id);
        if (r.keep) runtime.stop(id, true); // a snapshot asked for late: kept if not yet wiped
      }
      case STOPPED, FAILED -> outbox.send(stopped(r));
    }
  }

  /**
   * {@code upload_snapshot}: to the snapshots, once the workload is gone (a reminder may come while
   * it is still stopping: its workspace is not kept yet).
   */
  private void onUpload(AgentFrame.UploadSnapshot u) {
    Rental r = u.rentalId() == null ? null : rentals.get(u.rentalId());
    if (r != null && r.active()) {
      log.info("rental {}: upload_snapshot while it is stopping: once it has stopped", r.id);
      r.uploadWanted = u;
      return;
    }
    snapshots.upload(u);
  }

  private void onPreempt(AgentFrame.Preempt p) {
    String id = p.rentalId();
    Rental r = id == null ? null : rentals.get(id);
    if (r == null || !r.active()) {
      log.info("rental {}: preempt for a rental that is not running here: nothing to do", id);
      return;
    }
    if (r.state == State.STOPPING) {
      log.info("rental {}: preempt while it is stopping: nothing more to do", id);
      return;
    }
    Instant deadline;
    try {
      deadline = Instant.parse(p.deadline());
    } catch (DateTimeParseException | NullPointerException e) {
      log.warn(
          "rental {}: preempt with an unreadable deadline '{}': ignored (the node stops it with stop_rental)",
          id,
          p.deadline());
      return;
    }
    if (r.deadline != null && !deadline.isBefore(r.deadline)) {
      // a duplicate; a later deadline would contradict the notice the workload already has
      log.info(
          "rental {}: preempt again (deadline {}); it is already preempted for {}",
          id,
          deadline,
          r.deadline);
      return;
    }
    r.deadline = deadline;
    Duration delay = delayUntil(deadline);
    log.warn(
        "rental {}: preempted by the host; the workload is stopped at {} (in {} s)",
        id,
        deadline,
        delay.toSeconds());
    if (r.cancelPreempt != null) r.cancelPreempt.run();
    r.cancelPreempt = scheduler.schedule(delay, () -> preemptDeadline(r));
    if (r.state == State.RUNNING) notice(r); // a starting one gets it once it runs
  }

  /**
   * The spot notice of a running rental: the notice file now, SIGTERM {@link #noticeLead} before
   * the deadline (at once when less remains).
   */
  private void notice(Rental r) {
    runtime.notice(r.id, r.deadline); // it logs what went wrong; the SIGTERM still comes
    if (r.terminated) return;
    if (r.cancelNotice != null) r.cancelNotice.run();
    r.cancelNotice =
        scheduler.schedule(delayUntil(r.deadline.minus(noticeLead)), () -> noticeTime(r));
  }

  private void noticeTime(Rental r) {
    r.cancelNotice = null;
    if (r.state != State.RUNNING || r.terminated) return; // stopped or ended meanwhile
    r.terminated = true;
    r.preempted = true;
    log.info("rental {}: SIGTERM to the workload, the preemption deadline is {}", r.id, r.deadline);
    runtime
        .terminate(r.id)
        .whenComplete(
            (sent, e) -> {
              if (e != null) log.error("rental {}: the spot notice's SIGTERM failed", r.id, e);
            });
  }

  private Duration delayUntil(Instant at) {
    Duration delay = Duration.between(clock.instant(), at);
    return delay.isNegative() ? Duration.ZERO : delay;
  }

  private void preemptDeadline(Rental r) {
    r.cancelPreempt = null;
    switch (r.state) {
      case STARTING -> r.stopWanted = true;
      case RUNNING -> {
        r.preempted = true;
        beginStop(r, "preemption deadline");
      }
      default -> {} // already stopping or ended: stop_rental came first
    }
  }

  // ---- runtime events (on the loop)

  private void started(Rental r, Runtime.Handle handle, Throwable error) {
    if (error != null) {
      Throwable cause =
          error instanceof CompletionException && error.getCause() != null
              ? error.getCause()
              : error;
      String reason =
          cause instanceof Runtime.Failure f ? f.getMessage() : "the workload could not be started";
      if (!(cause instanceof Runtime.Failure)) log.error("rental {}: starting failed", r.id, cause);
      failed(r, reason);
      return;
    }
    r.state = State.RUNNING;
    r.startedAt = handle.startedAt();
    // Heartbeats are stamped as they list, on this thread: every one sent so far is stamped before
    // listedFrom, and every later one after it.
    r.listedFrom = nextStamp(now());
    log.info("rental {}: running since {}", r.id, r.startedAt);
    access.running(r.id, r.authorizedKeys);
    outbox.send(started(r));
    handle
        .ended()
        .whenComplete(
            (at, e) -> {
              Integer exitCode = handle.exitCode();
              loop.execute(() -> ended(r, at != null ? at : now(), exitCode));
            });
    if (r.stopWanted) beginStop(r, closing ? SHUTTING_DOWN : "stop_rental (while starting)");
    else if (r.deadline != null) notice(r); // preempted while it was starting
  }

  private void beginStop(Rental r, String why) {
    if (r.state != State.RUNNING) return;
    r.state = State.STOPPING;
    cancelPreempt(r);
    access.ending(r.id); // its ssh sessions go before the workload does
    log.info("rental {}: stopping ({}{})", r.id, why, r.keep ? ", keeping its workspace" : "");
    runtime
        .stop(r.id, r.keep)
        .whenComplete(
            (at, e) -> {
              if (e != null) log.error("rental {}: stopping failed", r.id, e);
            });
  }

  private void ended(Rental r, Instant at, Integer exitCode) {
    if (r.state != State.RUNNING && r.state != State.STOPPING) return;
    boolean byItself = r.state == State.RUNNING;
    r.state = State.STOPPED;
    access.ending(r.id);
    r.endedAt = at;
    r.exited =
        byItself && !r.preempted; // after a notice it was asked (SIGTERM), and preempted says so
    r.exitCode = r.exited ? exitCode : null;
    cancelPreempt(r);
    log.info(
        "rental {}: {} at {}",
        r.id,
        byItself
            ? "the workload ended by itself"
                + (exitCode == null ? "" : " (status " + exitCode + ")")
            : "stopped",
        at);
    reportEnd(r);
    r.gone.complete(null);
    if (r.uploadWanted != null) {
      snapshots.upload(r.uploadWanted);
      r.uploadWanted = null;
    }
    prune();
    checkDrained();
  }

  private void failed(Rental r, String reason) {
    r.state = State.FAILED;
    r.failure = reason;
    r.endedAt = now();
    cancelPreempt(r);
    log.warn("rental {}: cannot start: {}", r.id, reason);
    reportEnd(r);
    r.gone.complete(null);
    prune();
    checkDrained();
  }

  // ---- helpers

  private void reportEnd(Rental r) {
    logs.ended(r.id);
    logs.flush(r.id, outbox); // its last lines go before its end
    AgentFrame frame =
        r.state == State.FAILED ? new AgentFrame.RentalFailed(r.id, r.failure) : stopped(r);
    if (outbox.send(frame)) r.endReported = true;
  }

  /** Cancels the scheduled stop at the preemption deadline and the notice's SIGTERM. */
  private void cancelPreempt(Rental r) {
    if (r.cancelPreempt != null) {
      r.cancelPreempt.run();
      r.cancelPreempt = null;
    }
    if (r.cancelNotice != null) {
      r.cancelNotice.run();
      r.cancelNotice = null;
    }
  }

  private void checkDrained() {
    if (drained == null || drained.isDone()) return;
    for (Rental r : rentals.values()) if (r.active()) return;
    drained.complete(null);
  }

  /** Forgets the oldest ended rentals whose end was reported, beyond {@link #MAX_ENDED}. */
  private void prune() {
    int ended = 0;
    for (Rental r : rentals.values()) if (!r.active()) ended++;
    Iterator<Rental> it = rentals.values().iterator();
    while (ended > MAX_ENDED && it.hasNext()) {
      Rental r = it.next();
      if (!r.active() && r.endReported) {
        it.remove();
        ended--;
      }
    }
  }

  private static AgentFrame.RentalStarted started(Rental r) {
    return new AgentFrame.RentalStarted(
        r.id, at(r.startedAt), r.listedFrom == null ? null : at(r.listedFrom));
  }

  /**
   * A workload that ended because of its notice says so: the rental ends preempted. One that ended
   * by itself says so, with its exit status.
   */
  private static AgentFrame.RentalStopped stopped(Rental r) {
    return new AgentFrame.RentalStopped(
        r.id,
        at(r.endedAt),
        r.preempted ? Boolean.TRUE : null,
        r.exited ? Boolean.TRUE : null,
        r.exitCode);
  }

  private static String at(Instant instant) {
    return instant.truncatedTo(ChronoUnit.MILLIS).toString();
  }

  private Instant now() {
    return clock.instant().truncatedTo(ChronoUnit.MILLIS);
  }
}
