package dev.tickmark.agent;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Real child processes: environment, working folder, log, stop (SIGTERM, then SIGKILL), and the
 * scratch wipe.
 */
class ProcessRuntimeTest {
  private static final long WAIT_S = 15;

  @TempDir Path state;
  private ProcessRuntime runtime;

  private ProcessRuntime runtime(Duration grace) {
    runtime =
        new ProcessRuntime(
            state,
            grace,
            Clock.systemUTC(),
            Map.of(
                "PATH",
                System.getenv().getOrDefault("PATH", "/usr/bin:/bin"),
                "TICKMARK_AGENT_TOKEN",
                "tmkreg_h_secret"));
    return runtime;
  }

  @AfterEach
  void close() {
    if (runtime != null) runtime.close();
  }

  private static Runtime.Spec spec(String id, List<Integer> cards, String... command) {
    return new Runtime.Spec(id, cards, null, List.of(command), false);
  }

  /** Polls {@code condition} until it holds, failing after {@link #WAIT_S} seconds. */
  static void await(String what, BooleanSupplier condition) throws InterruptedException {
    Eventually.until(WAIT_S, () -> what, condition);
  }

  private static String read(Path file) throws IOException {
    return Files.readString(file, StandardCharsets.UTF_8);
  }

  @Test
  void capturesStdoutAndStderrLineByLineInOrderAndClosesTheLogBeforeTheEnd() throws Exception {
    ProcessRuntime rt = runtime(Duration.ofSeconds(10));
    RentalLog log = new RentalLog("rnt_log", RentalLog.Limits.DEFAULT, Clock.systemUTC());

    Runtime.Handle handle =
        rt.start(
                spec(
                    "rnt_log",
                    List.of(0),
                    "sh",
                    "-c",
                    "echo out-1; echo err-1 >&2; echo out-2; sleep 0.2; echo err-2 >&2; sleep 0.2;"
                        + " printf 'out-3 no newline'"),
                log)
            .get(WAIT_S, TimeUnit.SECONDS);
    handle.ended().get(WAIT_S, TimeUnit.SECONDS);

    assertTrue(log.closed(), "the output has ended when the workload has");
    List<dev.tickmark.wire.AgentFrame.LogLine> lines = log.batch(1 << 20);
    assertEquals(
        List.of(1L, 2L, 3L, 4L, 5L),
        lines.stream().map(dev.tickmark.wire.AgentFrame.LogLine::seq).toList());
    List<String> out =
        lines.stream().filter(l -> l.stream().equals("stdout")).map(l -> l.text()).toList();
    List<String> err =
        lines.stream().filter(l -> l.stream().equals("stderr")).map(l -> l.text()).toList();
    assertEquals(List.of("out-1", "out-2", "out-3 no newline"), out, "stdout, in order");
    assertEquals(List.of("err-1", "err-2"), err, "stderr, in order");
    assertEquals(
        "err-2", lines.get(3).text(), "lines apart in time keep their order across streams");
    assertEquals("out-3 no newline", lines.get(4).text());
    assertFalse(
        Files.exists(state.resolve("rentals/rnt_log/output.log")),
        "with a log, nothing goes to a file");
  }

  @Test
  void runsTheCommandInAFreshScratchFolderWithTheRentedCardsAndNothingOfTheAgentsEnvironment()
      throws Exception {
    ProcessRuntime rt = runtime(Duration.ofSeconds(10));
    Path scratch = state.resolve("rentals/rnt_1/scratch");
    Files.createDirectories(scratch);
    Files.writeString(
        scratch.resolve("left-by-someone-else"),
        "x"); // a folder from before is not reused as it is

    Runtime.Handle handle =
        rt.start(
                spec(
                    "rnt_1",
                    List.of(1, 3),
                    "sh",
                    "-c",
                    "echo \"$CUDA_VISIBLE_DEVICES|$TICKMARK_RENTAL_ID|$HOME|$TMPDIR|$(pwd)|${TICKMARK_AGENT_TOKEN:-none}|$(ls)\" > out.tmp"
                        + " && mv out.tmp out.txt; echo to-the-log; echo to-stderr >&2; sleep 30"))
            .get(WAIT_S, TimeUnit.SECONDS);

    Path out = scratch.resolve("out.txt");
    await("the workload wrote out.txt", () -> Files.exists(out));
    String s = scratch.toString();
    assertEquals(
        "1,3|rnt_1|" + s + "|" + s + "|" + s + "|none|",
        read(out).trim(),
        "cards, rental id, HOME, TMPDIR, working folder, no agent token, an empty folder at the start");
    assertEquals(
        "rwx------", PosixFilePermissions.toString(Files.getPosixFilePermissions(scratch)));
    assertEquals("rnt_1", handle.rentalId());
    assertEquals(Set.of("rnt_1"), rt.running());
    await(
        "the log",
        () -> {
          try {
            return read(state.resolve("rentals/rnt_1/output.log")).contains("to-stderr");
          } catch (IOException e) {
            return false;
          }
        });
    assertTrue(read(state.resolve("rentals/rnt_1/output.log")).contains("to-the-log"));

    Instant at = rt.stop("rnt_1").get(WAIT_S, TimeUnit.SECONDS);

    assertFalse(Files.exists(scratch), "the scratch folder is wiped");
    assertTrue(
        Files.exists(state.resolve("rentals/rnt_1/output.log")),
        "the log is kept, outside the scratch folder");
    assertFalse(at.isBefore(handle.startedAt()));
    assertEquals(at, handle.ended().get(WAIT_S, TimeUnit.SECONDS));
    assertEquals(Set.of(), rt.running());
    assertNull(
        rt.stop("rnt_1").get(WAIT_S, TimeUnit.SECONDS), "stopping a stopped rental does nothing");
  }

  @Test
  void stopEndsWhatTheWorkloadStartedInTheBackgroundToo() throws Exception {
    ProcessRuntime rt = runtime(Duration.ofSeconds(10));
    Path scratch = state.resolve("rentals/rnt_bg/scratch");
    rt.start(
            spec(
                "rnt_bg",
                List.of(0),
                "sh",
                "-c",
                "sleep 60 & echo $! > child.tmp && mv child.tmp child.pid; wait"))
        .get(WAIT_S, TimeUnit.SECONDS);
    await("the child's pid", () -> Files.exists(scratch.resolve("child.pid")));
    long child = Long.parseLong(read(scratch.resolve("child.pid")).trim());
    assertTrue(ProcessHandle.of(child).map(ProcessHandle::isAlive).orElse(false));

    rt.stop("rnt_bg").get(WAIT_S, TimeUnit.SECONDS);

    assertTrue(
        ProcessHandle.of(child).map(ProcessRuntime::gone).orElse(true),
        "the background sleep is gone too");
    assertFalse(Files.exists(scratch));
  }

  @Test
  void aWorkloadThatIgnoresSigtermIsKilledAfterTheGracePeriod() throws Exception {
    ProcessRuntime rt = runtime(Duration.ofMillis(300));
    Path scratch = state.resolve("rentals/rnt_stubborn/scratch");
    Runtime.Handle handle =
        rt.start(
                spec(
                    "rnt_stubborn",
                    List.of(0),
                    "sh",
                    "-c",
                    "trap '' TERM; touch ready; while true; do sleep 0.1; done"))
            .get(WAIT_S, TimeUnit.SECONDS);
    await("the trap is set", () -> Files.exists(scratch.resolve("ready")));

    Instant at = rt.stop("rnt_stubborn").get(WAIT_S, TimeUnit.SECONDS);

    assertTrue(
        Duration.between(handle.startedAt(), at).toMillis() >= 300, "it got its grace period");
    assertFalse(Files.exists(scratch));
    assertEquals(Set.of(), rt.running());
  }

  @Test
  void aWorkloadThatExitsByItselfEndsAndIsWiped() throws Exception {
    ProcessRuntime rt = runtime(Duration.ofSeconds(10));
    Runtime.Handle handle =
        rt.start(spec("rnt_short", List.of(0), "sh", "-c", "echo done > result.txt; exit 3"))
            .get(WAIT_S, TimeUnit.SECONDS);

    Instant at = handle.ended().get(WAIT_S, TimeUnit.SECONDS);

    assertNotNull(at);
    assertEquals(3, handle.exitCode(), "its exit status");
    assertFalse(
        Files.exists(state.resolve("rentals/rnt_short/scratch")),
        "wiped when it ends by itself too");
    assertEquals(Set.of(), rt.running());
  }

  @Test
  void aWorkloadEndedByASignalHasTheStatusAShellWouldGiveIt() throws Exception {
    ProcessRuntime rt = runtime(Duration.ofSeconds(10));
    Runtime.Handle handle =
        rt.start(spec("rnt_killed", List.of(0), "sh", "-c", "kill -KILL $$"))
            .get(WAIT_S, TimeUnit.SECONDS);

    handle.ended().get(WAIT_S, TimeUnit.SECONDS);

    assertEquals(128 + 9, handle.exitCode());
  }

  @Test
  void theNoticeFileIsNamedInTheEnvironmentWrittenWholeAndTerminateOnlySignals() throws Exception {
    ProcessRuntime rt = runtime(Duration.ofSeconds(10));
    Path notice = state.resolve("rentals/rnt_n/tickmark/notice");
    Runtime.Handle handle =
        rt.start(
                spec(
                    "rnt_n",
                    List.of(0),
                    "sh",
                    "-c",
                    "echo \"notice=$TICKMARK_NOTICE_FILE\"; trap 'echo \"term: $(cat \"$TICKMARK_NOTICE_FILE\")\"; exit 0' TERM;"
                        + " touch ready; while true; do sleep 0.1; done"))
            .get(WAIT_S, TimeUnit.SECONDS);
    await("ready", () -> Files.exists(state.resolve("rentals/rnt_n/scratch/ready")));
    assertFalse(Files.exists(notice), "absent until a notice");
    assertEquals(
        "rwxr-xr-x",
        PosixFilePermissions.toString(Files.getPosixFilePermissions(notice.getParent())));

    Instant deadline = Instant.parse("2026-11-29T18:02:00.500Z");
    assertTrue(rt.notice("rnt_n", deadline));
    String json =
        "{\"type\":\"preemption\",\"deadline\":\"2026-11-29T18:02:00.500Z\",\"rental_id\":\"rnt_n\"}";
    assertEquals(json + "\n", read(notice));
    assertEquals("rw-r--r--", PosixFilePermissions.toString(Files.getPosixFilePermissions(notice)));
    try (var files = Files.list(notice.getParent())) {
      assertEquals(List.of(notice), files.toList(), "no temporary file left behind");
    }
    assertTrue(rt.notice("rnt_n", deadline), "again: replaced");
    assertFalse(handle.ended().isDone(), "a notice alone changes nothing");

    assertTrue(rt.terminate("rnt_n").get(WAIT_S, TimeUnit.SECONDS));
    handle.ended().get(WAIT_S, TimeUnit.SECONDS); // it exits by itself, on the SIGTERM

    String log = read(state.resolve("rentals/rnt_n/output.log"));
    assertTrue(log.contains("notice=" + notice), log);
    assertTrue(log.contains("term: " + json), log);
    assertFalse(Files.exists(notice.getParent()), "wiped with the scratch folder");
    assertFalse(rt.notice("rnt_n", deadline), "not running any more");
    assertFalse(rt.terminate("rnt_n").get(WAIT_S, TimeUnit.SECONDS));
  }

  @Test
  void anEmptyCommandKeepsRunningUntilStopped() throws Exception {
    ProcessRuntime rt = runtime(Duration.ofSeconds(10));
    Runtime.Handle handle = rt.start(spec("rnt_idle", List.of(0))).get(WAIT_S, TimeUnit.SECONDS);
    assertFalse(handle.ended().isDone());
    assertEquals(Set.of("rnt_idle"), rt.running());
    rt.stop("rnt_idle").get(WAIT_S, TimeUnit.SECONDS);
    assertTrue(handle.ended().isDone());
  }

  @Test
  void aMissingExecutableFailsTheStartAndLeavesNoScratchFolder() throws Exception {
    ProcessRuntime rt = runtime(Duration.ofSeconds(10));
    ExecutionException e =
        assertThrows(
            ExecutionException.class,
            () ->
                rt.start(spec("rnt_nope", List.of(0), "no-such-program-tickmark", "--flag"))
                    .get(WAIT_S, TimeUnit.SECONDS));
    Runtime.Failure failure = assertInstanceOf(Runtime.Failure.class, e.getCause());
    assertEquals("command not found: no-such-program-tickmark", failure.getMessage());
    assertFalse(Files.exists(state.resolve("rentals/rnt_nope/scratch")));
    assertEquals(Set.of(), rt.running());
  }

  @Test
  void invalidSpecsAndASecondStartAreRefused() throws Exception {
    ProcessRuntime rt = runtime(Duration.ofSeconds(10));
    for (Runtime.Spec bad :
        List.of(
            spec("../x", List.of(0), "true"),
            spec("rnt_c", List.of(), "true"),
            spec("rnt_d", List.of(0), "echo", "nul\0byte"))) {
      ExecutionException e =
          assertThrows(ExecutionException.class, () -> rt.start(bad).get(WAIT_S, TimeUnit.SECONDS));
      assertInstanceOf(Runtime.Failure.class, e.getCause());
    }
    assertFalse(Files.exists(state.resolve("x")));

    rt.start(spec("rnt_twice", List.of(0))).get(WAIT_S, TimeUnit.SECONDS);
    ExecutionException e =
        assertThrows(
            ExecutionException.class,
            () -> rt.start(spec("rnt_twice", List.of(0))).get(WAIT_S, TimeUnit.SECONDS));
    assertEquals("rental rnt_twice is already running", e.getCause().getMessage());
  }

  @Test
  void closeStopsEveryWorkloadAndWipesTheirScratchFolders() throws Exception {
    ProcessRuntime rt = runtime(Duration.ofSeconds(10));
    Runtime.Handle a = rt.start(spec("rnt_a", List.of(0))).get(WAIT_S, TimeUnit.SECONDS);
    Runtime.Handle b = rt.start(spec("rnt_b", List.of(1))).get(WAIT_S, TimeUnit.SECONDS);

    rt.close();

    assertTrue(a.ended().isDone() && b.ended().isDone());
    assertFalse(Files.exists(state.resolve("rentals/rnt_a/scratch")));
    assertFalse(Files.exists(state.resolve("rentals/rnt_b/scratch")));
    ExecutionException e =
        assertThrows(
            ExecutionException.class,
            () -> rt.start(spec("rnt_c", List.of(0))).get(WAIT_S, TimeUnit.SECONDS));
    assertEquals(Rentals.SHUTTING_DOWN, e.getCause().getMessage());
  }

  @Test
  void scratchFoldersLeftByACrashedAgentAreWipedAtStart() throws Exception {
    Path left = state.resolve("rentals/rnt_old/scratch/deep/er");
    Files.createDirectories(left);
    Files.writeString(left.resolve("secret"), "renter data");
    Files.setPosixFilePermissions(
        left.getParent(), PosixFilePermissions.fromString("r-x------")); // made read-only
    Path outside = Files.writeString(state.resolve("outside.txt"), "keep");
    Files.createSymbolicLink(state.resolve("rentals/rnt_old/scratch/link"), outside);
    Files.writeString(state.resolve("rentals/rnt_old/output.log"), "log");

    runtime(Duration.ofSeconds(10));

    assertFalse(Files.exists(state.resolve("rentals/rnt_old/scratch")));
    assertEquals("keep", read(outside), "a link is removed, never followed");
    assertTrue(Files.exists(state.resolve("rentals/rnt_old/output.log")));
  }

  @Test
  void processesACrashedAgentLeftRunningInAScratchFolderAreEndedAtStart() throws Exception {
    Path scratch = Files.createDirectories(state.resolve("rentals/rnt_orphan/scratch"));
    Process orphan = new ProcessBuilder("sleep", "60").directory(scratch.toFile()).start();
    Process bystander = new ProcessBuilder("sleep", "60").directory(state.toFile()).start();
    try {
      runtime(Duration.ofSeconds(10));

      assertTrue(orphan.waitFor(WAIT_S, TimeUnit.SECONDS), "the leftover workload is ended");
      assertTrue(bystander.isAlive(), "a process elsewhere is left alone");
      assertFalse(Files.exists(scratch));
    } finally {
      orphan.destroyForcibly();
      bystander.destroyForcibly();
    }
  }

  @Test
  void findsExecutablesOnThePath() {
    assertNotNull(ProcessRuntime.findExecutable("sh", System.getenv("PATH"), Path.of("/")));
    assertNull(
        ProcessRuntime.findExecutable(
            "no-such-program-tickmark", System.getenv("PATH"), Path.of("/")));
    assertNull(ProcessRuntime.findExecutable("./missing", "/bin", Path.of("/")));
  }
}
