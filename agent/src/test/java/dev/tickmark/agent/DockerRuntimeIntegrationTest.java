package dev.tickmark.agent;

import static dev.tickmark.agent.DockerTestSupport.containerExists;
import static dev.tickmark.agent.DockerTestSupport.docker;
import static dev.tickmark.agent.DockerTestSupport.inspect;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.Inet4Address;
import java.net.InetAddress;
import java.net.NetworkInterface;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HexFormat;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.io.TempDir;

/**
 * The real {@link DockerRuntime} against the machine's Docker daemon, with a busybox image made
 * offline and stand-in device nodes for two cards ({@link DockerTestSupport}). Each workload
 * reports what it sees on its stdout and stderr; the test reads that from the rental's log and
 * checks the rest with {@code docker inspect}. Skipped where no daemon answers, failed there
 * instead when {@code TICKMARK_TESTS_REQUIRE} names {@code docker} (CI).
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class DockerRuntimeIntegrationTest {
  private static final long WAIT_S = 30;
  private static final long MIB = 1024 * 1024;

  @TempDir Path tmp;
  private final String run = HexFormat.of().toHexDigits(ThreadLocalRandom.current().nextInt());
  private final String image = "tickmark-it-docker:" + run;
  private final List<String> rentals = new ArrayList<>();
  private Path work;
  private Path devices;
  private Path state;
  private DockerRuntime runtime;

  @BeforeAll
  void image() throws Exception {
    RequiredTools.assumeDocker();
    work = Files.createTempDirectory("tickmark-docker-it");
    DockerTestSupport.importImage(work, image);
    devices =
        DockerTestSupport.standInDevices(
            work.resolve("dev"), "nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm");
  }

  @AfterAll
  void removeImage() throws Exception {
    if (work == null) return;
    for (String id : rentals) docker("rm", "--force", DockerRuntime.containerName(id));
    docker("rmi", "--force", image);
    RentalDirs.delete(work);
  }

  @BeforeEach
  void newRuntime() {
    state = tmp.resolve("state");
    runtime = runtime(options());
  }

  @AfterEach
  void closeRuntime() {
    if (runtime != null) runtime.close();
  }

  private DockerRuntime.Options options() {
    return new DockerRuntime.Options(
        "docker",
        DockerRuntime.GpuAccess.DEVICES,
        devices,
        DockerTestSupport.agentUser(),
        256 * MIB,
        0.5);
  }

  private DockerRuntime runtime(DockerRuntime.Options options) {
    return new DockerRuntime(options, state, Duration.ofSeconds(2), Clock.systemUTC());
  }

  private String rental(String name) {
    String id = "rnt_" + name + "_" + run;
    rentals.add(id);
    return id;
  }

  private Runtime.Handle start(
      String id, List<Integer> cards, boolean network, RentalLog log, String script)
      throws Exception {
    return runtime
        .start(new Runtime.Spec(id, cards, image, List.of("sh", "-c", script), network), log)
        .get(WAIT_S * 4, TimeUnit.SECONDS);
  }

  private static RentalLog log(String id) {
    return new RentalLog(id, RentalLog.Limits.DEFAULT, Clock.systemUTC());
  }

  /** Every line of the log so far, as {@code stream:text}. */
  private static List<String> lines(RentalLog log) {
    log.resend();
    return log.batch(1 << 22).stream().map(l -> l.stream() + ":" + l.text()).toList();
  }

  private static void await(String what, BooleanSupplier condition) throws InterruptedException {
    Eventually.until(WAIT_S, () -> what, condition);
  }

  /** A non-loopback IPv4 address of this host, or null. */
  private static InetAddress hostAddress() throws Exception {
    for (NetworkInterface nic : Collections.list(NetworkInterface.getNetworkInterfaces()))
      for (InetAddress a : Collections.list(nic.getInetAddresses()))
        if (!a.isLoopbackAddress() && a instanceof Inet4Address) return a;
    return null;
  }

  // ---- the tests

  @Test
  void aWorkloadSeesOnlyItsCardsItsWorkspaceAsTheAgentsUserAndNoNetwork() throws Exception {
    String id = rental("sees");
    InetAddress host = hostAddress();
    try (ServerSocket server = new ServerSocket(0, 50, null)) {
      String target =
          (host == null ? "127.0.0.1" : host.getHostAddress()) + " " + server.getLocalPort();
      if (host != null) {
        // the server is there: only the container's missing network can stop the workload
        try (Socket reach = new Socket(host, server.getLocalPort())) {
          assertTrue(reach.isConnected());
        }
      }
      RentalLog log = log(id);
      Runtime.Handle handle =
          start(
              id,
              List.of(1),
              false,
              log,
              """
              echo user=$(id -u):$(id -g)
              echo pwd=$(pwd) home=$HOME rental=$TICKMARK_RENTAL_ID
              for d in $(ls /dev); do case $d in nvidia*) echo dev=$d ;; esac; done
              echo hello > /workspace/out && echo wrote=$(cat /workspace/out)
              mknod /tmp/nvidia0 c 195 0 2>/dev/null && echo mknod=made || echo mknod=refused
              nc -w 3 %s </dev/null 2>/dev/null && echo net=reached || echo net=refused
              nc -w 3 127.0.0.1 %d </dev/null 2>/dev/null && echo loopback=reached || echo loopback=refused
              for l in $(ls /sys/class/net); do echo link=$l; done
              echo to-stderr >&2
              exit 3
              """
                  .formatted(target, server.getLocalPort()));
      Path scratch = state.resolve("rentals").resolve(id).resolve("scratch");
      handle.ended().get(WAIT_S, TimeUnit.SECONDS);
      assertEquals(3, handle.exitCode(), "the container's exit status");

      List<String> lines = lines(log);
      assertTrue(log.closed());
      // a workload that ends at once still has all its output: the container outlives it until
      // docker logs has read it
      assertEquals(
          List.of(
              "stdout:user=" + DockerTestSupport.agentUser(),
              "stdout:pwd=/workspace home="
                  + (DockerTestSupport.agentUser().startsWith("0:") ? "/" : "/workspace")
                  + " rental="
                  + id,
              "stdout:dev=nvidia-uvm",
              "stdout:dev=nvidia1",
              "stdout:dev=nvidiactl",
              "stdout:wrote=hello",
              "stdout:mknod=refused",
              "stdout:net=refused",
              "stdout:loopback=refused",
              "stdout:link=lo",
              "stderr:to-stderr"),
          lines.stream().sorted(this::byScriptOrder).toList(),
          "only card 1's node and the shared ones, no network but its own loopback: " + lines);
      assertFalse(Files.exists(scratch), "the scratch folder is wiped");
      assertFalse(containerExists(DockerRuntime.containerName(id)), "the container is removed");
      assertEquals(List.of(), List.copyOf(runtime.running()));
    }
  }

  /** stdout in the order written, stderr after it (two pipes: their interleaving is not kept). */
  private int byScriptOrder(String a, String b) {
    return Boolean.compare(a.startsWith("stderr:"), b.startsWith("stderr:"));
  }

  @Test
  void dockerInspectShowsTheLimitsTheUserTheDevicesAndNoPrivileges() throws Exception {
    String id = rental("inspect");
    RentalLog log = log(id);
    Runtime.Handle handle = start(id, List.of(0, 1), false, log, "echo up; exec sleep 600");
    String name = DockerRuntime.containerName(id);
    Path scratch = state.resolve("rentals").resolve(id).resolve("scratch");

    assertEquals(
        (512 * MIB) + " " + (512 * MIB) + " 1000000000 4096",
        inspect(
            name,
            "{{.HostConfig.Memory}} {{.HostConfig.MemorySwap}} {{.HostConfig.NanoCpus}} {{.HostConfig.PidsLimit}}"),
        "two cards: twice the per-card memory (no swap on top) and CPUs");
    assertEquals(DockerTestSupport.agentUser(), inspect(name, "{{.Config.User}}"));
    assertEquals(
        "none true false [ALL] [no-new-privileges]",
        inspect(
            name,
            "{{.HostConfig.NetworkMode}} {{.HostConfig.Init}} {{.HostConfig.Privileged}} {{.HostConfig.CapDrop}} {{.HostConfig.SecurityOpt}}"));
    assertEquals(
        devices
            + "/nvidia0>/dev/nvidia0 "
            + devices
            + "/nvidia1>/dev/nvidia1 "
            + devices
            + "/nvidiactl>/dev/nvidiactl "
            + devices
            + "/nvidia-uvm>/dev/nvidia-uvm",
        inspect(name, "{{range .HostConfig.Devices}}{{.PathOnHost}}>{{.PathInContainer}} {{end}}"));
    // The docker CLI gathers -v flags in a map, so the binds come back in no fixed order.
    assertEquals(
        Set.of(scratch + ":/workspace", scratch.resolveSibling("tickmark") + ":/run/tickmark:ro"),
        Set.of(inspect(name, "{{range .HostConfig.Binds}}{{.}} {{end}}").trim().split(" ")));
    assertEquals("false", inspect(name, "{{.HostConfig.AutoRemove}}"));
    await("the workload's first line", () -> lines(log).contains("stdout:up"));

    Instant stopped = runtime.stop(id).get(WAIT_S, TimeUnit.SECONDS);
    assertTrue(stopped != null && handle.ended().isDone());
    assertFalse(containerExists(name), "removed after the stop");
    assertFalse(Files.exists(scratch));
  }

  @Test
  void aWorkloadPastItsMemoryLimitIsKilledAndTheRentalEnds() throws Exception {
    String id = rental("oom");
    RentalLog log = log(id);
    Runtime.Handle handle =
        start(
            id,
            List.of(0),
            false,
            log,
            // doubles a string until the 256 MiB limit stops it (awk is killed, sh reports it)
            "awk 'BEGIN { s = \"x\"; for (i = 0; i < 40; i++) s = s s; print length(s) }'; echo awk=$?");
    handle.ended().get(WAIT_S * 2, TimeUnit.SECONDS);
    assertEquals(
        List.of("stdout:awk=137", "stderr:Killed"),
        lines(log).stream().sorted(this::byScriptOrder).toList(),
        "SIGKILL from the OOM killer");
  }

  /**
   * With the daemon's bridge network, a rental with network gets it (not {@code none}, never the
   * host's); without one (CI's dockerd runs with {@code --bridge=none}) the runtime says it offers
   * no network, so the engine sends such rentals elsewhere, and refuses one that comes anyway.
   */
  @Test
  void withTheNetworkEnabledTheContainerIsNotCutOffOrTheRentalIsRefused() throws Exception {
    boolean bridge =
        docker("network", "ls", "--format", "{{.Name}}")
            .output()
            .lines()
            .anyMatch("bridge"::equals);
    assertEquals(bridge, runtime.offersNetwork(), "what the hardware report says");
    String id = rental("net");
    if (!bridge) {
      java.util.concurrent.ExecutionException refused =
          org.junit.jupiter.api.Assertions.assertThrows(
              java.util.concurrent.ExecutionException.class,
              () -> start(id, List.of(0), true, log(id), "exec sleep 600"));
      assertEquals(DockerRuntime.NETWORK_REFUSED, refused.getCause().getMessage());
      return;
    }
    Runtime.Handle handle = start(id, List.of(0), true, log(id), "exec sleep 600");
    String mode = inspect(DockerRuntime.containerName(id), "{{.HostConfig.NetworkMode}}");
    assertFalse(mode.equals("none") || mode.equals("host"), mode);
    runtime.stop(id).get(WAIT_S, TimeUnit.SECONDS);
    assertTrue(handle.ended().isDone());
  }

  @Test
  void theSpotNoticeIsReadOnlyInTheContainerAndSigtermReachesItsHandler() throws Exception {
    String id = rental("notice");
    RentalLog log = log(id);
    Runtime.Handle handle =
        start(
            id,
            List.of(0),
            false,
            log,
            """
            trap 'echo got-term; cat "$TICKMARK_NOTICE_FILE"; exit 0' TERM
            echo tampered > /run/tickmark/notice 2>/dev/null && echo notice=writable || echo notice=read-only
            echo file=$TICKMARK_NOTICE_FILE
            echo ready
            while :; do sleep 1; done
            """);
    await("ready", () -> lines(log).contains("stdout:ready"));
    Instant deadline = Instant.parse("2030-01-02T03:04:05Z");
    assertTrue(runtime.notice(id, deadline));
    assertTrue(runtime.terminate(id).get(WAIT_S, TimeUnit.SECONDS));
    handle.ended().get(WAIT_S, TimeUnit.SECONDS);
    assertEquals(
        List.of(
            "stdout:notice=read-only",
            "stdout:file=/run/tickmark/notice",
            "stdout:ready",
            "stdout:got-term",
            "stdout:" + Runtime.noticeJson(id, deadline).strip(),
            "stderr:sh: can't create /run/tickmark/notice: Read-only file system"),
        lines(log).stream().sorted(this::byScriptOrder).toList());
  }

  @Test
  void sigtermEndsAWorkloadWithNoHandlerForItThroughInit() throws Exception {
    String id = rental("plain");
    // sleep as the container's main process: without --init it would be PID 1, which ignores a
    // signal it has no handler for, and the spot notice's SIGTERM would do nothing
    Runtime.Handle handle =
        runtime
            .start(new Runtime.Spec(id, List.of(0), image, List.of("sleep", "600"), false))
            .get(WAIT_S * 4, TimeUnit.SECONDS);
    assertTrue(runtime.terminate(id).get(WAIT_S, TimeUnit.SECONDS));
    handle.ended().get(10, TimeUnit.SECONDS);
    assertFalse(containerExists(DockerRuntime.containerName(id)));
  }

  @Test
  void aStopKillsAWorkloadThatIgnoresSigtermAfterTheGracePeriod() throws Exception {
    String id = rental("stubborn");
    RentalLog log = log(id);
    Runtime.Handle handle =
        start(id, List.of(0), false, log, "trap '' TERM; echo ready; while :; do sleep 1; done");
    await("ready", () -> lines(log).contains("stdout:ready"));
    long t0 = System.nanoTime();
    runtime.stop(id).get(WAIT_S, TimeUnit.SECONDS);
    long seconds = TimeUnit.NANOSECONDS.toSeconds(System.nanoTime() - t0);
    assertTrue(
        seconds >= 2 && seconds < 20, "killed after the 2 s grace period: " + seconds + " s");
    assertTrue(handle.ended().isDone());
    assertFalse(containerExists(DockerRuntime.containerName(id)));
  }

  @Test
  void theWorkspaceIsWipedWhateverTheWorkloadLeftInIt() throws Exception {
    String id = rental("wipe");
    Path outside = Files.writeString(tmp.resolve("outside.txt"), "keep me");
    RentalLog log = log(id);
    Runtime.Handle handle =
        start(
            id,
            List.of(0),
            false,
            log,
            """
            mkdir -p deep/er/locked && echo x > deep/er/locked/f && chmod 000 deep/er/locked
            ln -s /etc deep/etc-link
            ln -s %s outside-link
            dd if=/dev/zero of=big bs=1024 count=2048 2>/dev/null
            echo done
            """
                .formatted(outside));
    handle.ended().get(WAIT_S, TimeUnit.SECONDS);
    assertEquals(List.of("stdout:done"), lines(log));
    assertFalse(Files.exists(state.resolve("rentals").resolve(id).resolve("scratch")));
    assertEquals("keep me", Files.readString(outside), "links were removed, never followed");
  }

  @Test
  void theContainerOfAnAgentThatDiedIsRemovedByTheNextStart() throws Exception {
    String id = rental("leftover");
    start(id, List.of(0), false, log(id), "exec sleep 600");
    String name = DockerRuntime.containerName(id);
    assertTrue(containerExists(name));
    // a second runtime on the same state folder: what an agent restarted after a crash does
    DockerRuntime next = runtime(options());
    try {
      assertFalse(containerExists(name), "removed at the start");
      assertFalse(Files.exists(state.resolve("rentals").resolve(id).resolve("scratch")));
    } finally {
      next.close();
    }
  }

  @Test
  void aCardWithoutADeviceNodeFailsTheRentalBeforeDockerRuns() throws Exception {
    String id = rental("nocard");
    var failed = runtime.start(new Runtime.Spec(id, List.of(5), image, List.of("true"), false));
    var e =
        org.junit.jupiter.api.Assertions.assertThrows(
            java.util.concurrent.ExecutionException.class,
            () -> failed.get(WAIT_S, TimeUnit.SECONDS));
    assertEquals("card 5 has no device node on this host", e.getCause().getMessage());
    assertFalse(containerExists(DockerRuntime.containerName(id)));
  }
}
