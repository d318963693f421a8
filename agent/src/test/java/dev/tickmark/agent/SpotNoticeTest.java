package dev.tickmark.agent;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.tickmark.wire.AgentFrame;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.Executors;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The spot notice end to end on this machine: {@link Rentals} on a real loop and scheduler, the
 * {@link ProcessRuntime} and a real workload ({@code sh} with a {@code trap}). The 30 s lead is the
 * default; deadlines a few seconds away get their SIGTERM at once.
 */
class SpotNoticeTest {
  private static final long WAIT_S = 15;
  private static final String RENTAL = "rnt_spot";

  @TempDir Path state;
  @TempDir Path marks; // outside the scratch folder, which is wiped when the rental ends

  private final ScheduledExecutorService loop = Executors.newSingleThreadScheduledExecutor();
  private final BlockingQueue<AgentFrame> sent = new LinkedBlockingQueue<>();
  private ProcessRuntime runtime;
  private Rentals rentals;

  @BeforeEach
  void setUp() {
    runtime =
        new ProcessRuntime(
            state,
            Duration.ofMillis(300),
            Clock.systemUTC(),
            Map.of("PATH", System.getenv().getOrDefault("PATH", "/usr/bin:/bin")));
    rentals =
        new Rentals(
            runtime,
            () -> Set.of(0),
            Clock.systemUTC(),
            loop,
            (delay, task) -> {
              ScheduledFuture<?> f = loop.schedule(task, delay.toNanos(), TimeUnit.NANOSECONDS);
              return () -> f.cancel(false);
            },
            frame -> sent.add(frame),
            new LogShipper(RentalLog.Limits.DEFAULT, Clock.systemUTC()),
            Rentals.DEFAULT_NOTICE_LEAD);
  }

  @AfterEach
  void tearDown() {
    runtime.close();
    loop.shutdownNow();
  }

  private void send(AgentFrame frame) {
    loop.execute(() -> rentals.onFrame(frame));
  }

  /** The next frame the agent sends of that type (others in between are skipped). */
  private <F extends AgentFrame> F next(Class<F> type) throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT_S);
    while (true) {
      AgentFrame f = sent.poll(deadline - System.nanoTime(), TimeUnit.NANOSECONDS);
      assertNotNull(f, "no " + type.getSimpleName() + " within " + WAIT_S + " s");
      if (type.isInstance(f)) return type.cast(f);
    }
  }

  /** Starts a workload running {@code script} under {@code sh -c}, once it says it is ready. */
  private void run(String script) throws Exception {
    send(
        new AgentFrame.StartRental(
            RENTAL, List.of(0), null, List.of("sh", "-c", script), null, false, null));
    assertInstanceOf(AgentFrame.RentalStarted.class, next(AgentFrame.RentalStarted.class));
    ProcessRuntimeTest.await("the workload is ready", () -> Files.exists(marks.resolve("ready")));
  }

  /** Polls for a marker file; returns the instant it was seen. */
  private Instant seen(String name) throws InterruptedException {
    ProcessRuntimeTest.await(name, () -> Files.exists(marks.resolve(name)));
    return Instant.now();
  }

  private String read(String name) throws Exception {
    return Files.readString(marks.resolve(name), StandardCharsets.UTF_8);
  }

  @Test
  void theWorkloadReadsTheNoticeGetsSigtermBeforeTheDeadlineAndEndsTheRentalByExiting()
      throws Exception {
    // the trap copies the notice where the test can read it, then exits (a checkpoint would go
    // here)
    run(
        ("echo \"$TICKMARK_NOTICE_FILE\" > %1$s/env; "
                + "trap 'cat \"$TICKMARK_NOTICE_FILE\" > %1$s/term.tmp; mv %1$s/term.tmp %1$s/term; exit 0' TERM; "
                + "touch %1$s/ready; while true; do sleep 0.1; done")
            .formatted(marks));
    Path notice = state.resolve("rentals").resolve(RENTAL).resolve("tickmark/notice");
    assertEquals(notice.toString(), read("env").strip(), "TICKMARK_NOTICE_FILE names the file");
    assertFalse(Files.exists(notice), "no notice before a preempt");

    Instant deadline = Instant.now().plusSeconds(5).truncatedTo(ChronoUnit.MILLIS);
    send(new AgentFrame.Preempt(RENTAL, deadline.toString()));

    Instant termAt = seen("term");
    assertTrue(termAt.isBefore(deadline), "SIGTERM at " + termAt + ", deadline " + deadline);
    assertEquals(
        "{\"type\":\"preemption\",\"deadline\":\""
            + deadline
            + "\",\"rental_id\":\""
            + RENTAL
            + "\"}\n",
        read("term"),
        "the notice, whole, when the SIGTERM came");
    AgentFrame.RentalStopped stopped = next(AgentFrame.RentalStopped.class);
    assertTrue(
        Instant.parse(stopped.at()).isBefore(deadline),
        "it ended by exiting, before the deadline: " + stopped.at());
    assertFalse(Files.exists(notice.getParent()), "the notice folder goes with the rental");
  }

  @Test
  void aWorkloadThatIgnoresTheSigtermIsStoppedAtTheDeadline() throws Exception {
    run(
        ("trap 'touch %1$s/term' TERM; touch %1$s/ready; while true; do sleep 0.1; done")
            .formatted(marks));

    Instant deadline = Instant.now().plusSeconds(2).truncatedTo(ChronoUnit.MILLIS);
    send(new AgentFrame.Preempt(RENTAL, deadline.toString()));
    send(new AgentFrame.Preempt(RENTAL, deadline.toString())); // delivered twice: harmless

    Instant termAt = seen("term");
    assertTrue(termAt.isBefore(deadline), "SIGTERM at " + termAt + ", deadline " + deadline);
    AgentFrame.RentalStopped stopped = next(AgentFrame.RentalStopped.class);
    assertFalse(
        Instant.parse(stopped.at()).isBefore(deadline),
        "it ran on until the deadline: stopped at " + stopped.at());
    assertEquals(Set.of(), runtime.running());
  }
}
