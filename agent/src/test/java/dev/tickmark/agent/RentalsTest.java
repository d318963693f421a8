package dev.tickmark.agent;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.tickmark.wire.AgentFrame;
import dev.tickmark.wire.Frames;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.Test;

/**
 * The rental state machine, frame by frame, with a scripted runtime: every completion is triggered
 * by the test, on the test's thread, so nothing here waits or sleeps.
 */
class RentalsTest {
  private static final Instant T0 = Instant.parse("2026-11-29T18:00:00Z");
  private static final Instant T1 = Instant.parse("2026-11-29T18:00:01.250Z");
  private static final Instant T2 = Instant.parse("2026-11-29T18:05:00Z");

  private final FakeRuntime runtime = new FakeRuntime();
  private final List<AgentFrame> sent = new ArrayList<>();
  private final List<Timer> timers = new ArrayList<>();
  private boolean connected = true;
  private final Rentals rentals =
      new Rentals(
          runtime,
          () -> Set.of(0, 1, 2, 3),
          Clock.fixed(T0, ZoneOffset.UTC),
          Runnable::run,
          (delay, task) -> {
            Timer t = new Timer(delay, task);
            timers.add(t);
            return () -> t.cancelled = true;
          },
          frame -> {
            if (!connected) return false;
            sent.add(roundTrip(frame));
            return true;
          });

  private static final class Timer {
    final Duration delay;
    final Runnable task;
    boolean cancelled;

    Timer(Duration delay, Runnable task) {
      this.delay = delay;
      this.task = task;
    }

    void fire() {
      if (!cancelled) task.run();
    }
  }

  /** The runtime, scripted: starts and ends happen when the test says. */
  static final class FakeRuntime implements Runtime {
    final List<Spec> starts = new ArrayList<>();
    final List<String> stops = new ArrayList<>();
    final List<String> notices = new ArrayList<>(); // "<id> <deadline>"
    final List<String> terminates = new ArrayList<>();
    final Map<String, CompletableFuture<Handle>> pending = new LinkedHashMap<>();
    final Map<String, CompletableFuture<Instant>> ends = new LinkedHashMap<>();
    final Map<String, Integer> exitCodes = new java.util.concurrent.ConcurrentHashMap<>();
    volatile boolean network = true;

    @Override
    public String name() {
      return "fake";
    }

    @Override
    public boolean offersNetwork() {
      return network;
    }

    @Override
    public CompletableFuture<Handle> start(Spec spec) {
      starts.add(spec);
      CompletableFuture<Handle> f = new CompletableFuture<>();
      pending.put(spec.rentalId(), f);
      return f;
    }

    void started(String id, Instant at) {
      CompletableFuture<Instant> ended = new CompletableFuture<>();
      ends.put(id, ended);
      pending
          .remove(id)
          .complete(
              new Handle() {
                @Override
                public String rentalId() {
                  return id;
                }

                @Override
                public Instant startedAt() {
                  return at;
                }

                @Override
                public CompletableFuture<Instant> ended() {
                  return ended;
                }

                @Override
                public Integer exitCode() {
                  return exitCodes.get(id);
                }
              });
    }

    void fails(String id, String reason) {
      pending.remove(id).completeExceptionally(new Failure(reason));
    }

    /** The workload ended (stopped, or by itself). */
    void ended(String id, Instant at) {
      ends.get(id).complete(at);
    }

    /** The workload ended with this exit status (known before {@code ended} completes). */
    void ended(String id, Instant at, int exitCode) {
      exitCodes.put(id, exitCode);
      ends.get(id).complete(at);
    }

    @Override
    public CompletableFuture<Instant> stop(String rentalId) {
      stops.add(rentalId);
      return ends.get(rentalId);
    }

    final List<String> keeps = new ArrayList<>(); // stops that keep the workspace

    @Override
    public CompletableFuture<Instant> stop(String rentalId, boolean keepWorkspace) {
      if (keepWorkspace) keeps.add(rentalId);
      return stop(rentalId);
    }

    @Override
    public boolean notice(String rentalId, Instant deadline) {
      notices.add(rentalId + " " + deadline);
      return true;
    }

    @Override
    public CompletableFuture<Boolean> terminate(String rentalId) {
      terminates.add(rentalId);
      return CompletableFuture.completedFuture(true);
    }

    @Override
    public Set<String> running() {
      Set<String> ids = new java.util.HashSet<>();
      ends.forEach(
          (id, f) -> {
            if (!f.isDone()) ids.add(id);
          });
      return ids;
    }

    @Override
    public void close() {}
  }

  private static AgentFrame roundTrip(AgentFrame frame) {
    try {
      return Frames.read(Frames.write(frame)); // as the node reads it
    } catch (Frames.MalformedFrame e) {
      throw new AssertionError(e);
    }
  }

  private static AgentFrame.StartRental start(String id, Integer... cards) {
    return new AgentFrame.StartRental(
        id,
        List.of(cards),
        "pytorch/pytorch:2.4.0",
        List.of("python", "train.py"),
        "ssh-ed25519 AAAA",
        false,
        null);
  }

  private static AgentFrame.StopRental stop(String id) {
    return new AgentFrame.StopRental(id, false);
  }

  /** No heartbeat was stamped in these tests: listed from the (fixed) clock's now. */
  private static AgentFrame.RentalStarted started(String id, Instant at) {
    return started(id, at, 0);
  }

  /**
   * The rental that started after {@code earlier} others on the fixed clock: stamps only grow, so
   * its listed_from is that many milliseconds past the clock's now.
   */
  private static AgentFrame.RentalStarted started(String id, Instant at, int earlier) {
    return new AgentFrame.RentalStarted(id, at.toString(), T0.plusMillis(earlier).toString());
  }

  /** The report of a workload that ended because of its preemption notice. */
  private static AgentFrame.RentalStopped preempted(String id, Instant at) {
    return new AgentFrame.RentalStopped(id, at.toString(), true);
  }

  private static AgentFrame.RentalStopped stopped(String id, Instant at) {
    return new AgentFrame.RentalStopped(id, at.toString());
  }

  /** Its workload ended by itself, unasked. */
  private static AgentFrame.RentalStopped exited(String id, Instant at) {
    return new AgentFrame.RentalStopped(id, at.toString(), null, true);
  }

  /** Frames sent since the last call. */
  private List<AgentFrame> drain() {
    List<AgentFrame> out = List.copyOf(sent);
    sent.clear();
    return out;
  }

  private void running(String id, Integer... cards) {
    rentals.onFrame(start(id, cards));
    runtime.started(id, T1);
    drain();
  }

  @Test
  void aRentalsLastLinesAreSentBeforeItsEnd() {
    running("rnt_1", 0);
    RentalLog log = rentals.logs().open("rnt_1"); // the runtime's log of it
    log.append(RentalLog.Stream.STDOUT, "last words", 10);

    runtime.ended("rnt_1", T2);

    List<AgentFrame> frames = drain();
    assertEquals(2, frames.size(), frames.toString());
    AgentFrame.Logs logs = (AgentFrame.Logs) frames.get(0);
    assertEquals("rnt_1", logs.rentalId());
    assertEquals(List.of("last words"), logs.lines().stream().map(l -> l.text()).toList());
    assertEquals(exited("rnt_1", T2), frames.get(1));
    assertTrue(log.closed(), "an ended rental's log takes no more lines");
  }

  @Test
  void startRunsTheWorkloadAndAnswersStartedWithItsStartInstant() {
    rentals.onFrame(start("rnt_1", 0, 2));

    assertEquals(List.of(), drain(), "nothing before the workload runs");
    assertEquals(
        List.of(
            new Runtime.Spec(
                "rnt_1",
                List.of(0, 2),
                "pytorch/pytorch:2.4.0",
                List.of("python", "train.py"),
                false)),
        runtime.starts);
    assertEquals(Rentals.State.STARTING, rentals.state("rnt_1"));
    assertEquals(List.of(), rentals.running(), "not in heartbeats before it runs");

    runtime.started("rnt_1", T1);

    assertEquals(List.of(started("rnt_1", T1)), drain());
    assertEquals("2026-11-29T18:00:01.250Z", T1.toString());
    assertEquals(List.of("rnt_1"), rentals.running());
  }

  /**
   * {@code listed_from} is later than the stamp of every heartbeat listed before the workload ran,
   * and every heartbeat stamped after it lists the workload, even when the clock stepped back (here
   * the last heartbeat's stamp, T2, is ahead of the fixed clock's T0): stamps only grow. So the
   * host can tell a late heartbeat built before the start from one that omits a workload that is
   * gone.
   */
  @Test
  void aWorkloadIsListedFromAfterEveryHeartbeatStampedBeforeItRan() {
    rentals.onFrame(start("rnt_1", 0));
    assertEquals(
        new Rentals.Listing(T2, List.of()),
        rentals.heartbeat(T2),
        "a heartbeat built while it starts");
    runtime.started("rnt_1", T1);
    assertEquals(
        List.of(new AgentFrame.RentalStarted("rnt_1", T1.toString(), "2026-11-29T18:05:00.001Z")),
        drain());
    assertEquals(new Rentals.Listing(T2.plusMillis(2), List.of("rnt_1")), rentals.heartbeat(T2));

    rentals.onFrame(start("rnt_1", 0)); // a duplicate start: the same answer
    assertEquals(
        List.of(new AgentFrame.RentalStarted("rnt_1", T1.toString(), "2026-11-29T18:05:00.001Z")),
        drain());

    assertEquals(
        T2.plusMillis(3),
        rentals.heartbeat(T0.minusSeconds(5)).at(),
        "a clock stepped back does not take the stamps back");
    rentals.onFrame(start("rnt_2", 1));
    runtime.started("rnt_2", T1);
    assertEquals(
        List.of(new AgentFrame.RentalStarted("rnt_2", T1.toString(), "2026-11-29T18:05:00.004Z")),
        drain());
    Rentals.Listing next = rentals.heartbeat(T0.minusSeconds(4));
    assertEquals(new Rentals.Listing(T2.plusMillis(5), List.of("rnt_1", "rnt_2")), next);
    assertEquals(
        new Rentals.Listing(T2.plusSeconds(60), List.of("rnt_1", "rnt_2")),
        rentals.heartbeat(T2.plusSeconds(60)),
        "once the clock is past the stamps, they follow it again");
  }

  @Test
  void aDuplicateStartResendsTheSameStartedAndStartsNothingMore() {
    rentals.onFrame(start("rnt_1", 0));
    rentals.onFrame(start("rnt_1", 0)); // while starting: the answer is still to come
    assertEquals(List.of(), drain());
    runtime.started("rnt_1", T1);
    assertEquals(List.of(started("rnt_1", T1)), drain());

    rentals.onFrame(start("rnt_1", 0));
    rentals.onFrame(start("rnt_1", 0));

    assertEquals(List.of(started("rnt_1", T1), started("rnt_1", T1)), drain());
    assertEquals(1, runtime.starts.size(), "one workload");
  }

  @Test
  void aWorkloadThatCannotStartIsFailedAndStaysFailed() {
    rentals.onFrame(start("rnt_1", 0));
    runtime.fails("rnt_1", "docker run exited with status 125: pull access denied for nope");

    AgentFrame.RentalFailed failed =
        new AgentFrame.RentalFailed(
            "rnt_1", "docker run exited with status 125: pull access denied for nope");
    assertEquals(List.of(failed), drain());
    assertEquals(List.of(), rentals.running());

    rentals.onFrame(start("rnt_1", 0));
    assertEquals(List.of(failed), drain(), "a duplicate start gets the same failure");
    assertEquals(1, runtime.starts.size());
    rentals.onFrame(stop("rnt_1"));
    assertEquals(
        List.of(stopped("rnt_1", T0)), drain(), "a stop of a failed rental: it is not running");
  }

  @Test
  void cardsThatAreNotOnThisHostOrAreTakenFailTheRentalWithoutStartingAnything() {
    running("rnt_4", 2);
    rentals.onFrame(start("rnt_1", 7));
    rentals.onFrame(start("rnt_2"));
    rentals.onFrame(start("rnt_3", 1, 1));
    rentals.onFrame(start("rnt_5", 3, 2));

    assertEquals(
        List.of(
            new AgentFrame.RentalFailed("rnt_1", "card 7 is not on this host (cards: 0, 1, 2, 3)"),
            new AgentFrame.RentalFailed("rnt_2", "no cards given"),
            new AgentFrame.RentalFailed("rnt_3", "card 1 given twice"),
            new AgentFrame.RentalFailed("rnt_5", "card 2 is in use by another rental")),
        drain());
    assertEquals(List.of("rnt_4"), runtime.starts.stream().map(Runtime.Spec::rentalId).toList());
  }

  @Test
  void anInvalidRentalIdIsFailedAndNotRemembered() {
    rentals.onFrame(start("../../etc", 0));
    rentals.onFrame(start("a b", 0));

    assertEquals(
        List.of(
            new AgentFrame.RentalFailed(
                "../../etc", "invalid rental id (expected 1-128 of A-Z a-z 0-9 _ -)"),
            new AgentFrame.RentalFailed(
                "a b", "invalid rental id (expected 1-128 of A-Z a-z 0-9 _ -)")),
        drain());
    assertNull(rentals.state("../../etc"));
    assertEquals(List.of(), runtime.starts);
  }

  @Test
  void stopStopsTheWorkloadAndAnswersStoppedWithItsEndInstant() {
    running("rnt_1", 0);

    rentals.onFrame(stop("rnt_1"));

    assertEquals(List.of("rnt_1"), runtime.stops);
    assertEquals(List.of(), drain(), "stopped only once it has");
    assertEquals(List.of("rnt_1"), rentals.running(), "still running while it stops");
    assertEquals(Rentals.State.STOPPING, rentals.state("rnt_1"));

    runtime.ended("rnt_1", T2);

    assertEquals(List.of(stopped("rnt_1", T2)), drain());
    assertEquals(List.of(), rentals.running());
  }

  @Test
  void duplicateStopsAnswerStoppedAgainWithTheSameInstant() {
    running("rnt_1", 0);
    rentals.onFrame(stop("rnt_1"));
    rentals.onFrame(stop("rnt_1")); // while stopping: the answer is still to come
    assertEquals(List.of(), drain());
    runtime.ended("rnt_1", T2);
    drain();

    rentals.onFrame(stop("rnt_1"));
    rentals.onFrame(start("rnt_1", 0));

    assertEquals(
        List.of(stopped("rnt_1", T2), stopped("rnt_1", T2)),
        drain(),
        "a start for an ended rental is answered stopped");
    assertEquals(List.of("rnt_1"), runtime.stops, "stopped once");
    assertEquals(1, runtime.starts.size(), "started once");
  }

  @Test
  void aStopForAnUnknownRentalIsAnsweredStoppedNowAndALateStartDoesNotStartIt() {
    rentals.onFrame(stop("rnt_9"));
    assertEquals(List.of(stopped("rnt_9", T0)), drain());

    rentals.onFrame(start("rnt_9", 0));
    assertEquals(List.of(stopped("rnt_9", T0)), drain());
    assertEquals(List.of(), runtime.starts);
  }

  @Test
  void aStopWhileStartingStopsTheWorkloadOnceItRuns() {
    rentals.onFrame(start("rnt_1", 0));
    rentals.onFrame(stop("rnt_1"));
    assertEquals(List.of(), runtime.stops);

    runtime.started("rnt_1", T1);
    assertEquals(List.of(started("rnt_1", T1)), drain());
    assertEquals(List.of("rnt_1"), runtime.stops);

    runtime.ended("rnt_1", T2);
    assertEquals(List.of(stopped("rnt_1", T2)), drain());
  }

  @Test
  void aStopWithASnapshotKeepsTheWorkspaceAlsoWhenItComesWhileStarting() {
    running("rnt_1", 0);
    rentals.onFrame(new AgentFrame.StopRental("rnt_1", true));
    assertEquals(List.of("rnt_1"), runtime.keeps);
    runtime.ended("rnt_1", T2);
    assertEquals(List.of(stopped("rnt_1", T2)), drain());

    rentals.onFrame(start("rnt_2", 1));
    rentals.onFrame(new AgentFrame.StopRental("rnt_2", true));
    runtime.started("rnt_2", T1);
    assertEquals(List.of("rnt_1", "rnt_2"), runtime.keeps);

    rentals.onFrame(start("rnt_3", 2)); // a plain stop wipes it
    runtime.started("rnt_3", T1);
    rentals.onFrame(stop("rnt_3"));
    assertEquals(List.of("rnt_1", "rnt_2"), runtime.keeps);
    assertEquals(List.of("rnt_1", "rnt_2", "rnt_3"), runtime.stops);
  }

  /** The snapshots, scripted: restores complete when the test says. */
  private static final class FakeSnapshots implements Rentals.Snapshots {
    final Map<String, CompletableFuture<Rentals.Restored>> restores = new LinkedHashMap<>();
    final List<AgentFrame.UploadSnapshot> uploads = new ArrayList<>();

    @Override
    public CompletableFuture<Rentals.Restored> restore(String rentalId, AgentFrame.Restore r) {
      CompletableFuture<Rentals.Restored> f = new CompletableFuture<>();
      restores.put(rentalId, f);
      return f;
    }

    @Override
    public void upload(AgentFrame.UploadSnapshot upload) {
      uploads.add(upload);
    }
  }

  private static AgentFrame.StartRental restoring(String id, int card) {
    return new AgentFrame.StartRental(
        id,
        List.of(card),
        "img",
        List.of("run"),
        null,
        false,
        new AgentFrame.Restore("snap_1", "a".repeat(64), 123));
  }

  @Test
  void aRestoreFillsTheWorkspaceBeforeTheWorkloadStartsAndAFailedOneFailsTheRental() {
    FakeSnapshots snapshots = new FakeSnapshots();
    rentals.snapshots(snapshots);
    rentals.onFrame(restoring("rnt_1", 0));
    assertEquals(List.of(), runtime.starts, "nothing starts before the restore is done");
    List<String> discarded = new ArrayList<>();
    Rentals.Restored fill =
        new Rentals.Restored() {
          @Override
          public void into(java.nio.file.Path scratch) {}

          @Override
          public void discard() {
            discarded.add("rnt_1");
          }
        };
    snapshots.restores.get("rnt_1").complete(fill);
    assertEquals(1, runtime.starts.size());
    assertEquals(fill, runtime.starts.get(0).fill());
    assertEquals(List.of(), discarded, "kept until the start is over");
    runtime.started("rnt_1", T1);
    assertEquals(List.of("rnt_1"), discarded);
    assertEquals(List.of(started("rnt_1", T1)), drain());

    rentals.onFrame(restoring("rnt_2", 1));
    snapshots
        .restores
        .get("rnt_2")
        .completeExceptionally(new Runtime.Failure("restore failed: chunk 2 does not match"));
    assertEquals(1, runtime.starts.size(), "never started on a partial workspace");
    assertEquals(
        List.of(new AgentFrame.RentalFailed("rnt_2", "restore failed: chunk 2 does not match")),
        drain());

    AgentFrame.UploadSnapshot u = new AgentFrame.UploadSnapshot("rnt_9", "snap_9", List.of());
    rentals.onFrame(u);
    assertEquals(List.of(u), snapshots.uploads);
  }

  @Test
  void anUploadAskedForWhileTheWorkloadStopsWaitsUntilItHasStopped() {
    FakeSnapshots snapshots = new FakeSnapshots();
    rentals.snapshots(snapshots);
    running("rnt_1", 0);
    rentals.onFrame(new AgentFrame.StopRental("rnt_1", true));
    AgentFrame.UploadSnapshot u = new AgentFrame.UploadSnapshot("rnt_1", "snap_1", List.of());
    rentals.onFrame(u);
    assertEquals(List.of(), snapshots.uploads, "its workspace is not kept yet");
    runtime.ended("rnt_1", T2);
    assertEquals(List.of(u), snapshots.uploads);
  }

  @Test
  void withoutSnapshotsARestoreFailsTheRental() {
    rentals.onFrame(restoring("rnt_1", 0));
    assertEquals(List.of(), runtime.starts);
    AgentFrame.RentalFailed f = (AgentFrame.RentalFailed) drain().get(0);
    assertTrue(f.reason().startsWith("restore failed"), f.reason());
  }

  @Test
  void aWorkloadThatExitsByItselfIsReportedStoppedAndExited() {
    running("rnt_1", 0);

    runtime.ended("rnt_1", T2);

    assertEquals(List.of(exited("rnt_1", T2)), drain());
    assertEquals(List.of(), runtime.stops);
    assertEquals(List.of(), rentals.running());
    assertEquals(Rentals.State.STOPPED, rentals.state("rnt_1"));
  }

  @Test
  void aWorkloadThatExitsByItselfReportsItsExitStatus() {
    running("rnt_1", 0);
    running("rnt_2", 1);

    runtime.ended("rnt_1", T2, 3);
    runtime.ended("rnt_2", T2, 0);

    assertEquals(
        List.of(
            new AgentFrame.RentalStopped("rnt_1", T2.toString(), null, true, 3),
            new AgentFrame.RentalStopped("rnt_2", T2.toString(), null, true, 0)),
        drain());
  }

  @Test
  void aWorkloadStoppedOrPreemptedReportsNoExitStatus() {
    running("rnt_1", 0);
    running("rnt_2", 1);
    rentals.onFrame(stop("rnt_1"));
    rentals.onFrame(new AgentFrame.Preempt("rnt_2", "2026-11-29T18:00:10Z"));
    timers.get(timers.size() - 1).fire(); // the notice's SIGTERM
    drain();

    runtime.ended("rnt_1", T2, 143); // the stop's SIGTERM ended it
    runtime.ended("rnt_2", T2, 0); // it checkpointed on its notice and exited

    assertEquals(List.of(stopped("rnt_1", T2), preempted("rnt_2", T2)), drain());
  }

  @Test
  void preemptSchedulesAStopAtTheDeadline() {
    running("rnt_1", 0);

    rentals.onFrame(new AgentFrame.Preempt("rnt_1", "2026-11-29T18:02:00Z"));

    assertEquals(2, timers.size(), "the stop and the notice's SIGTERM");
    assertEquals(Duration.ofSeconds(120), timers.get(0).delay);
    assertEquals(List.of(), runtime.stops, "not before the deadline");
    assertEquals(List.of(), drain());

    timers.get(0).fire();
    assertEquals(List.of("rnt_1"), runtime.stops);
    runtime.ended("rnt_1", T2);
    assertEquals(List.of(preempted("rnt_1", T2)), drain());

    rentals.onFrame(stop("rnt_1")); // the node's own stop_rental, after the deadline: a no-op
    assertEquals(List.of(preempted("rnt_1", T2)), drain());
    assertEquals(List.of("rnt_1"), runtime.stops);
  }

  @Test
  void aStopBeforeThePreemptionDeadlineWinsAndTheDeadlineIsANoOp() {
    running("rnt_1", 0);
    rentals.onFrame(new AgentFrame.Preempt("rnt_1", "2026-11-29T18:02:00Z"));

    rentals.onFrame(stop("rnt_1"));
    assertTrue(timers.get(0).cancelled, "the deadline is cancelled");
    runtime.ended("rnt_1", T2);
    timers.get(0).task.run(); // even if it fired anyway

    assertEquals(List.of("rnt_1"), runtime.stops);
    assertEquals(List.of(stopped("rnt_1", T2)), drain());
  }

  @Test
  void aPastDeadlineStopsAtOnceAndAnUnreadableOneIsIgnored() {
    running("rnt_1", 0);
    rentals.onFrame(new AgentFrame.Preempt("rnt_1", "soon"));
    assertEquals(List.of(), timers);

    rentals.onFrame(new AgentFrame.Preempt("rnt_1", "2026-11-29T17:00:00Z"));
    assertEquals(Duration.ZERO, timers.get(0).delay);

    assertEquals(Duration.ZERO, timers.get(1).delay, "SIGTERM at once");
    rentals.onFrame(new AgentFrame.Preempt("rnt_unknown", "2026-11-29T18:02:00Z"));
    assertEquals(2, timers.size(), "nothing to preempt");
  }

  // ---- the spot notice

  @Test
  void preemptWritesTheNoticeAndSendsSigtermThirtySecondsBeforeTheDeadline() {
    running("rnt_1", 0);

    rentals.onFrame(new AgentFrame.Preempt("rnt_1", "2026-11-29T18:02:00Z"));

    assertEquals(List.of("rnt_1 2026-11-29T18:02:00Z"), runtime.notices, "the notice at once");
    Timer stop = timers.get(0);
    Timer sigterm = timers.get(1);
    assertEquals(Duration.ofSeconds(120), stop.delay);
    assertEquals(Duration.ofSeconds(90), sigterm.delay, "30 s before the deadline");
    assertEquals(List.of(), runtime.terminates);

    sigterm.fire();
    assertEquals(List.of("rnt_1"), runtime.terminates);
    assertEquals(List.of(), runtime.stops, "SIGTERM only: it runs on");
    assertEquals(Rentals.State.RUNNING, rentals.state("rnt_1"));

    runtime.ended("rnt_1", T2); // it checkpointed and exited
    assertEquals(List.of(preempted("rnt_1", T2)), drain());
    assertTrue(stop.cancelled, "nothing left to stop at the deadline");
    stop.task.run(); // even if it fired anyway
    assertEquals(List.of(), runtime.stops);
  }

  @Test
  void aWorkloadThatIgnoresTheSigtermIsStoppedAtTheDeadline() {
    running("rnt_1", 0);
    rentals.onFrame(new AgentFrame.Preempt("rnt_1", "2026-11-29T18:00:10Z"));
    assertEquals(Duration.ZERO, timers.get(1).delay, "less than 30 s away: SIGTERM at once");

    timers.get(1).fire();
    timers.get(0).fire();

    assertEquals(List.of("rnt_1"), runtime.terminates);
    assertEquals(List.of("rnt_1"), runtime.stops);
    assertEquals(Rentals.State.STOPPING, rentals.state("rnt_1"));
  }

  @Test
  void aStopBeforeTheNoticeTimeCancelsTheSigterm() {
    running("rnt_1", 0);
    rentals.onFrame(new AgentFrame.Preempt("rnt_1", "2026-11-29T18:02:00Z"));

    rentals.onFrame(stop("rnt_1"));

    assertTrue(timers.get(1).cancelled, "the SIGTERM is cancelled");
    timers.get(1).task.run(); // even if it fired anyway
    assertEquals(List.of(), runtime.terminates);
    assertEquals(List.of("rnt_1"), runtime.stops);
  }

  @Test
  void aRepeatedPreemptChangesNothingAndAnEarlierDeadlineReschedules() {
    running("rnt_1", 0);
    rentals.onFrame(new AgentFrame.Preempt("rnt_1", "2026-11-29T18:02:00Z"));

    rentals.onFrame(new AgentFrame.Preempt("rnt_1", "2026-11-29T18:02:00Z"));
    rentals.onFrame(new AgentFrame.Preempt("rnt_1", "2026-11-29T18:03:00Z"));
    assertEquals(2, timers.size(), "the same (or a later) deadline: nothing new");
    assertEquals(1, runtime.notices.size());

    rentals.onFrame(new AgentFrame.Preempt("rnt_1", "2026-11-29T18:01:00Z"));
    assertTrue(timers.get(0).cancelled && timers.get(1).cancelled, "rescheduled");
    assertEquals(Duration.ofSeconds(60), timers.get(2).delay);
    assertEquals(Duration.ofSeconds(30), timers.get(3).delay);
    assertEquals("rnt_1 2026-11-29T18:01:00Z", runtime.notices.get(1), "the notice rewritten");

    timers.get(3).fire();
    rentals.onFrame(new AgentFrame.Preempt("rnt_1", "2026-11-29T18:00:30Z"));
    assertEquals(5, timers.size(), "only the stop is rescheduled once SIGTERM was sent");
    assertEquals(Duration.ofSeconds(30), timers.get(4).delay);
    assertEquals(List.of("rnt_1"), runtime.terminates, "SIGTERM once");
    assertEquals(3, runtime.notices.size());
  }

  @Test
  void aRentalPreemptedWhileStartingGetsTheNoticeOnceItRuns() {
    rentals.onFrame(start("rnt_1", 0));
    rentals.onFrame(new AgentFrame.Preempt("rnt_1", "2026-11-29T18:02:00Z"));
    assertEquals(List.of(), runtime.notices, "no workload to tell yet");
    assertEquals(1, timers.size(), "only the stop at the deadline");

    runtime.started("rnt_1", T1);

    assertEquals(List.of("rnt_1 2026-11-29T18:02:00Z"), runtime.notices);
    assertEquals(Duration.ofSeconds(90), timers.get(1).delay);
  }

  @Test
  void afterAReconnectRunningRentalsAreStartedAgainAndEndsMissedMeanwhileAreSent() {
    running("rnt_1", 0);
    running("rnt_2", 1);
    rentals.onFrame(start("rnt_3", 2));

    connected = false;
    runtime.ended("rnt_2", T2); // exits while no session can hear it
    runtime.started("rnt_3", T1); // starts while no session can hear it
    rentals.onFrame(stop("rnt_1")); // (a frame from the old session, just before it dropped)
    assertEquals(List.of(), drain());

    connected = true;
    rentals.resync();

    assertEquals(
        List.of(started("rnt_1", T1), exited("rnt_2", T2), started("rnt_3", T1, 2)), drain());

    runtime.ended("rnt_1", T2);
    assertEquals(List.of(stopped("rnt_1", T2)), drain());

    rentals.resync(); // another reconnect: the end of rnt_2 was delivered, so it is not repeated
    assertEquals(List.of(started("rnt_3", T1, 2)), drain());
  }

  @Test
  void aFailureWhileDisconnectedIsSentAfterTheReconnect() {
    rentals.onFrame(start("rnt_1", 0));
    connected = false;
    runtime.fails("rnt_1", "command not found: nope");
    connected = true;

    rentals.resync();

    assertEquals(List.of(new AgentFrame.RentalFailed("rnt_1", "command not found: nope")), drain());
  }

  @Test
  void aRentalOnTheCardsOfAStoppingOneStartsOnceThoseAreFree() {
    running("rnt_1", 0, 1);
    rentals.onFrame(stop("rnt_1"));

    rentals.onFrame(start("rnt_2", 1));
    assertEquals(1, runtime.starts.size(), "not while the previous workload still holds card 1");

    runtime.ended("rnt_1", T2);
    assertEquals(
        List.of("rnt_1", "rnt_2"), runtime.starts.stream().map(Runtime.Spec::rentalId).toList());
    runtime.started("rnt_2", T2);
    assertEquals(List.of(stopped("rnt_1", T2), started("rnt_2", T2, 1)), drain());
  }

  @Test
  void stopAllStopsEveryWorkloadRefusesNewOnesAndCompletesWhenAllEnded() {
    running("rnt_1", 0);
    rentals.onFrame(start("rnt_2", 1));

    CompletableFuture<Void> drained = rentals.stopAll();

    assertEquals(List.of("rnt_1"), runtime.stops);
    rentals.onFrame(start("rnt_3", 3));
    assertEquals(List.of(new AgentFrame.RentalFailed("rnt_3", Rentals.SHUTTING_DOWN)), drain());
    runtime.ended("rnt_1", T2);
    runtime.started("rnt_2", T1);
    assertEquals(
        List.of("rnt_1", "rnt_2"), runtime.stops, "the starting one is stopped once it runs");
    assertFalse(drained.isDone());

    runtime.ended("rnt_2", T2);

    assertTrue(drained.isDone());
    assertEquals(
        List.of(stopped("rnt_1", T2), started("rnt_2", T1, 1), stopped("rnt_2", T2)), drain());
  }

  @Test
  void stopAllWithNothingRunningIsDoneAtOnce() {
    assertTrue(rentals.stopAll().isDone());
  }

  @Test
  void endedRentalsAreForgottenBeyondTheLimit() {
    for (int i = 0; i <= Rentals.MAX_ENDED; i++) rentals.onFrame(stop("rnt_" + i));
    assertNull(rentals.state("rnt_0"));
    assertEquals(Rentals.State.STOPPED, rentals.state("rnt_1"));
    assertEquals(Rentals.State.STOPPED, rentals.state("rnt_" + Rentals.MAX_ENDED));
  }
}
