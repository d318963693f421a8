package dev.tickmark.agent;

import static dev.tickmark.agent.ProcessRuntimeTest.await;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
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
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The {@code docker run} invocation as a pure function, and the runtime against a missing docker, a
 * failing one, and a scripted stand-in for the docker command line (there is no docker daemon where
 * the tests run).
 */
class DockerRuntimeTest {
  private static final long WAIT_S = 15;
  private static final Path SCRATCH = Path.of("/var/lib/tickmark-agent/rentals/rnt_1/scratch");

  @TempDir Path tmp;
  private DockerRuntime runtime;

  @AfterEach
  void close() {
    if (runtime != null) runtime.close();
  }

  /** The toolkit, the image's user, no limits: what the invocation tests expect by default. */
  private static DockerRuntime.Options options(String docker) {
    return new DockerRuntime.Options(
        docker, DockerRuntime.GpuAccess.TOOLKIT, Path.of("/dev"), null, 0, 0);
  }

  private static Runtime.Spec spec(
      String id, List<Integer> cards, String image, boolean network, String... command) {
    return new Runtime.Spec(id, cards, image, List.of(command), network);
  }

  // ---- the invocation

  @Test
  void noNetworkOneCardAndTheCommandArgumentsKeptApart() {
    List<String> args =
        DockerRuntime.runInvocation(
            options("docker"),
            spec(
                "rnt_1",
                List.of(2),
                "pytorch/pytorch:2.4.0",
                false,
                "python",
                "-c",
                "print('a b')",
                "--epochs",
                "3"),
            SCRATCH);

    assertEquals(
        List.of(
            "docker",
            "run",
            "--detach",
            "--init",
            "--name",
            "tickmark-rnt_1",
            "--label",
            "tickmark.rental=rnt_1",
            "--gpus",
            "\"device=2\"",
            "--network",
            "none",
            "-v",
            "/var/lib/tickmark-agent/rentals/rnt_1/scratch:/workspace",
            "-w",
            "/workspace",
            "-v",
            "/var/lib/tickmark-agent/rentals/rnt_1/tickmark:/run/tickmark:ro",
            "-e",
            "TICKMARK_RENTAL_ID=rnt_1",
            "-e",
            "TICKMARK_NOTICE_FILE=/run/tickmark/notice",
            "--cap-drop",
            "ALL",
            "--security-opt",
            "no-new-privileges",
            "--pids-limit",
            "4096",
            "pytorch/pytorch:2.4.0",
            "python",
            "-c",
            "print('a b')",
            "--epochs",
            "3"),
        args);
  }

  @Test
  void networkOnAndSeveralCards() {
    List<String> args =
        DockerRuntime.runInvocation(
            options("/usr/bin/docker"),
            spec(
                "rnt_2",
                List.of(0, 1, 3),
                "nvcr.io/nvidia/pytorch:24.05-py3",
                true,
                "sleep",
                "infinity"),
            SCRATCH);

    assertEquals("/usr/bin/docker", args.get(0));
    assertEquals(
        "\"device=0,1,3\"",
        args.get(args.indexOf("--gpus") + 1),
        "one argument, double quotes included");
    assertFalse(args.contains("--network"), "the renter enabled the network");
    assertEquals(
        List.of("nvcr.io/nvidia/pytorch:24.05-py3", "sleep", "infinity"),
        args.subList(args.size() - 3, args.size()));
  }

  @Test
  void anEmptyCommandRunsTheImagesOwnAndNothingIsPrivileged() {
    List<String> args =
        DockerRuntime.runInvocation(
            options("docker"), spec("rnt_3", List.of(0), "ubuntu:22.04", false), SCRATCH);
    assertEquals("ubuntu:22.04", args.get(args.size() - 1));
    assertFalse(
        args.stream()
            .anyMatch(
                a ->
                    a.startsWith("--privileged")
                        || a.startsWith("--cap-add")
                        || a.startsWith("--device")));
    assertTrue(args.containsAll(List.of("--cap-drop", "ALL", "no-new-privileges")));
  }

  @Test
  void deviceAccessPassesOnlyTheRentedCardsNodesAndTheSharedOnes() throws IOException {
    Path dev = Files.createDirectories(tmp.resolve("dev"));
    for (String name : List.of("nvidia0", "nvidia1", "nvidia2", "nvidiactl", "nvidia-uvm"))
      Files.createSymbolicLink(dev.resolve(name), Path.of("/dev/null"));
    DockerRuntime.Options devices =
        options("docker").withGpus(DockerRuntime.GpuAccess.DEVICES, dev);
    List<String> args =
        DockerRuntime.runInvocation(
            devices, spec("rnt_1", List.of(2, 0), "ubuntu", false), SCRATCH);
    assertFalse(args.contains("--gpus"));
    List<String> passed = new ArrayList<>();
    for (int i = 0; i < args.size(); i++)
      if (args.get(i).equals("--device")) passed.add(args.get(i + 1));
    assertEquals(
        List.of(
            dev + "/nvidia2:/dev/nvidia2",
            dev + "/nvidia0:/dev/nvidia0",
            dev + "/nvidiactl:/dev/nvidiactl",
            dev + "/nvidia-uvm:/dev/nvidia-uvm"),
        passed);
    Runtime.Failure f =
        assertThrows(
            Runtime.Failure.class,
            () ->
                DockerRuntime.runInvocation(
                    devices, spec("rnt_1", List.of(3), "ubuntu", false), SCRATCH));
    assertEquals("card 3 has no device node on this host", f.getMessage());
  }

  @Test
  void theUserAndTheLimitsPerRentedCard() {
    DockerRuntime.Options o = options("docker").withUser("1001:1002").withLimits(8L << 30, 1.5);
    List<String> args =
        DockerRuntime.runInvocation(o, spec("rnt_1", List.of(0, 1), "ubuntu", false), SCRATCH);
    assertEquals("1001:1002", args.get(args.indexOf("--user") + 1));
    assertTrue(args.contains("HOME=/workspace"), "a uid with no home in the image: " + args);
    assertEquals(String.valueOf(16L << 30), args.get(args.indexOf("--memory") + 1));
    assertEquals(String.valueOf(16L << 30), args.get(args.indexOf("--memory-swap") + 1));
    assertEquals("3", args.get(args.indexOf("--cpus") + 1));
    assertTrue(args.indexOf("--cpus") < args.indexOf("ubuntu"), "options before the image");

    List<String> root =
        DockerRuntime.runInvocation(
            o.withUser("0:0"), spec("rnt_1", List.of(0), "ubuntu", false), SCRATCH);
    assertEquals("0:0", root.get(root.indexOf("--user") + 1));
    assertFalse(root.contains("HOME=/workspace"), "root keeps the image's HOME");
    assertEquals("0.667", DockerRuntime.cpus(2.0 / 3));
    assertEquals("0.5", DockerRuntime.cpus(0.5));
    assertThrows(IllegalArgumentException.class, () -> o.withUser("root"));
  }

  @Test
  void thisHostsOptionsAreTheAgentsUserAndAShareOfTheMachine() {
    DockerRuntime.Options host = DockerRuntime.Options.forHost("docker");
    assertEquals(DockerRuntime.GpuAccess.TOOLKIT, host.gpus());
    assertTrue(host.user() == null || host.user().matches("[0-9]+:[0-9]+"), host.user());
    assertTrue(host.cpusPerCard() > 0);
    assertTrue(host.memoryPerCard() >= 0);
  }

  @Test
  void theLogsInvocationFollowsTheContainersOutputFromItsStart() {
    assertEquals(
        List.of("docker", "logs", "--follow", "tickmark-rnt_1"),
        DockerRuntime.logsInvocation("docker", "rnt_1"));
  }

  @Test
  void theSpotNoticesSigtermIsDockerKill() {
    assertEquals(
        List.of("docker", "kill", "--signal", "TERM", "tickmark-rnt_1"),
        DockerRuntime.killInvocation("docker", "rnt_1", "TERM"));
  }

  @Test
  void theStopInvocation() {
    assertEquals(
        List.of("docker", "stop", "-t", "10", "tickmark-rnt_1"),
        DockerRuntime.stopInvocation("docker", "rnt_1", Duration.ofSeconds(10)));
  }

  @ParameterizedTest
  @ValueSource(
      strings = {
        "ubuntu", "ubuntu:22.04", "pytorch/pytorch:2.4.0-cuda12.4-cudnn9-runtime",
            "nvcr.io/nvidia/pytorch:24.05-py3",
        "localhost:5000/my-image_x.y:Tag", "registry.example.com:443/a/b/c", "my__image", "a-b--c",
        "ghcr.io/org/img@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
      })
  void acceptedImages(String image) {
    assertNull(DockerRuntime.checkImage(image), image);
    List<String> args =
        DockerRuntime.runInvocation(
            options("docker"), spec("rnt_1", List.of(0), image, false), SCRATCH);
    assertEquals(image, args.get(args.size() - 1));
  }

  @ParameterizedTest
  @ValueSource(
      strings = {
        "-v",
        "--privileged",
        "-ubuntu",
        "ubuntu latest",
        "ubuntu\n",
        " ubuntu",
        "ubuntu\t",
        "Ubuntu",
        "/ubuntu",
        "ubuntu/",
        "ubuntu:",
        "ubuntu::1",
        "ubuntu:-x",
        "ubuntu@sha256:abc",
        "ubu ntu:1",
        "a;rm -rf /",
        "$(id)",
        "ubuntu:1 --privileged",
        "",
      })
  void rejectedImages(String image) {
    assertTrue(DockerRuntime.checkImage(image) != null, image);
    assertThrows(
        Runtime.Failure.class,
        () ->
            DockerRuntime.runInvocation(
                options("docker"), spec("rnt_1", List.of(0), image, false), SCRATCH));
  }

  @Test
  void aMissingOrOverlongImageIsRejected() {
    assertEquals("no image given", DockerRuntime.checkImage(null));
    assertTrue(DockerRuntime.checkImage("a".repeat(256)).contains("longer"));
  }

  @ParameterizedTest
  @ValueSource(strings = {"", "../etc", "a b", "rnt/1", "rnt.1", "rnt_1\n", "ü"})
  void rejectedRentalIds(String id) {
    Runtime.Failure f =
        assertThrows(
            Runtime.Failure.class,
            () ->
                DockerRuntime.runInvocation(
                    options("docker"), spec(id, List.of(0), "ubuntu", false), SCRATCH));
    assertTrue(f.getMessage().contains("rental id"), f.getMessage());
  }

  @Test
  void rentalIdsUpTo128OfTheAllowedCharacters() {
    String id = "Ab0_-".repeat(25) + "xyz";
    assertEquals(128, id.length());
    assertTrue(
        DockerRuntime.runInvocation(
                options("docker"), spec(id, List.of(0), "ubuntu", false), SCRATCH)
            .contains("tickmark-" + id));
    assertThrows(
        Runtime.Failure.class,
        () ->
            DockerRuntime.runInvocation(
                options("docker"), spec(id + "a", List.of(0), "ubuntu", false), SCRATCH));
  }

  @Test
  void badCardsCommandsAndScratchPathsAreRejected() {
    assertThrows(
        Runtime.Failure.class,
        () ->
            DockerRuntime.runInvocation(
                options("docker"), spec("r", List.of(), "ubuntu", false), SCRATCH));
    assertThrows(
        Runtime.Failure.class,
        () ->
            DockerRuntime.runInvocation(
                options("docker"), spec("r", List.of(1, 1), "ubuntu", false), SCRATCH));
    assertThrows(
        Runtime.Failure.class,
        () ->
            DockerRuntime.runInvocation(
                options("docker"), spec("r", List.of(-1), "ubuntu", false), SCRATCH));
    List<String> withNull = new ArrayList<>();
    withNull.add(null);
    assertThrows(
        Runtime.Failure.class,
        () ->
            DockerRuntime.runInvocation(
                options("docker"),
                new Runtime.Spec("r", List.of(0), "ubuntu", withNull, false),
                SCRATCH));
    assertThrows(
        Runtime.Failure.class,
        () ->
            DockerRuntime.runInvocation(
                options("docker"),
                spec("r", List.of(0), "ubuntu", false),
                Path.of("/srv/a:b/scratch")));
  }

  // ---- the runtime

  private DockerRuntime runtime(String docker) {
    runtime =
        new DockerRuntime(
            options(docker), tmp.resolve("state"), Duration.ofSeconds(1), Clock.systemUTC());
    return runtime;
  }

  private Path script(String name, String body) throws IOException {
    Path p = tmp.resolve(name);
    Files.writeString(p, "#!/bin/sh\n" + body, StandardCharsets.UTF_8);
    Files.setPosixFilePermissions(p, PosixFilePermissions.fromString("rwx------"));
    return p;
  }

  private Runtime.Failure startFails(DockerRuntime rt, Runtime.Spec spec) {
    ExecutionException e =
        assertThrows(ExecutionException.class, () -> rt.start(spec).get(WAIT_S, TimeUnit.SECONDS));
    return assertInstanceOf(Runtime.Failure.class, e.getCause());
  }

  @Test
  void aMissingDockerFailsTheRentalCleanly() {
    DockerRuntime rt = runtime(tmp.resolve("no-docker-here").toString());
    Runtime.Failure f = startFails(rt, spec("rnt_1", List.of(0), "ubuntu", false));
    assertTrue(f.getMessage().startsWith("docker is not available on this host"), f.getMessage());
    assertFalse(Files.exists(tmp.resolve("state/rentals/rnt_1/scratch")));
    assertEquals(Set.of(), rt.running());
  }

  @Test
  void aDockerThatExitsNonZeroFailsTheRentalWithItsMessage() throws Exception {
    Path docker =
        script(
            "docker",
            """
        echo "docker: Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?" >&2
        echo >&2
        echo "Run 'docker run --help' for more information" >&2
        exit 125
        """);
    DockerRuntime rt = runtime(docker.toString());
    Runtime.Failure f = startFails(rt, spec("rnt_1", List.of(0), "ubuntu", false));
    assertEquals(
        "docker run exited with status 125: Run 'docker run --help' for more information",
        f.getMessage());
    assertFalse(Files.exists(tmp.resolve("state/rentals/rnt_1/scratch")));
  }

  @Test
  void anInvalidImageIsRefusedBeforeDockerRuns() throws Exception {
    Path calls = tmp.resolve("calls");
    Path docker = script("docker", "echo \"$*\" >> " + calls + "\nexit 0\n");
    Runtime.Failure f =
        startFails(runtime(docker.toString()), spec("rnt_1", List.of(0), "--privileged", false));
    assertEquals("invalid image name", f.getMessage());
    assertFalse(Files.exists(calls), "docker never ran");
  }

  /**
   * A stand-in for the docker command line: the container "runs" until it is stopped or the test
   * ends it.
   */
  private Path fakeDocker(Path dir) throws IOException {
    return script(
        "docker",
        """
        d=%s
        echo "$*" >> "$d/calls"
        case "$1" in
          run) echo 4f3c2b1a; exit 0 ;;
          wait) while [ ! -f "$d/exited" ]; do sleep 0.05; done; s=$(cat "$d/exited"); echo "${s:-0}"; exit 0 ;;
          logs) echo "hello from the container"; echo "warning from the container" >&2; exit 0 ;;
          stop) touch "$d/exited"; exit 0 ;;
          kill) exit 0 ;;
          rm) exit 0 ;;
          network) [ -f "$d/bridge" ] && echo bridge && exit 0; echo "network bridge not found" >&2; exit 1 ;;
        esac
        exit 1
        """
            .formatted(dir));
  }

  private String calls() throws IOException {
    Path calls = tmp.resolve("calls");
    return Files.exists(calls) ? Files.readString(calls) : "";
  }

  @Test
  void theContainerOfARentalACrashedAgentLeftRunningIsRemovedAtStart() throws Exception {
    Files.createDirectories(tmp.resolve("state/rentals/rnt_old/scratch"));
    Files.createDirectories(
        tmp.resolve("state/rentals/rnt_done")); // ended cleanly: no scratch folder, nothing to do
    runtime(fakeDocker(tmp).toString());
    assertEquals("rm --force tickmark-rnt_old\n", calls());
    assertFalse(Files.exists(tmp.resolve("state/rentals/rnt_old/scratch")));
  }

  @Test
  void runsWaitsLogsAndStopsTheContainerThenWipesTheScratchFolder() throws Exception {
    DockerRuntime rt = runtime(fakeDocker(tmp).toString());
    Path scratch = tmp.resolve("state/rentals/rnt_1/scratch");

    Runtime.Handle handle =
        rt.start(
                spec(
                    "rnt_1",
                    List.of(0, 1),
                    "ubuntu:22.04",
                    false,
                    "bash",
                    "-c",
                    "nvidia-smi; sleep 1d"))
            .get(WAIT_S, TimeUnit.SECONDS);

    assertEquals(Set.of("rnt_1"), rt.running());
    assertTrue(Files.isDirectory(scratch));
    assertTrue(
        calls()
            .startsWith(
                "run --detach --init --name tickmark-rnt_1 --label tickmark.rental=rnt_1 --gpus \"device=0,1\" --network none -v "
                    + scratch
                    + ":/workspace"),
        calls());
    await(
        "docker wait and docker logs",
        () -> {
          try {
            return calls().contains("wait tickmark-rnt_1")
                && calls().contains("logs --follow tickmark-rnt_1")
                && Files.readString(tmp.resolve("state/rentals/rnt_1/output.log"))
                    .contains("hello from the container");
          } catch (IOException e) {
            return false;
          }
        });
    assertFalse(handle.ended().isDone());

    rt.stop("rnt_1").get(WAIT_S, TimeUnit.SECONDS);

    assertTrue(calls().contains("stop -t 1 tickmark-rnt_1"), calls());
    assertFalse(Files.exists(scratch));
    assertEquals(Set.of(), rt.running());
    assertTrue(handle.ended().isDone());
  }

  @Test
  void theContainersStdoutAndStderrGoLineByLineToTheRentalsLogBeforeItEnds() throws Exception {
    DockerRuntime rt = runtime(fakeDocker(tmp).toString());
    RentalLog log = new RentalLog("rnt_3", RentalLog.Limits.DEFAULT, java.time.Clock.systemUTC());
    Runtime.Handle handle =
        rt.start(spec("rnt_3", List.of(0), "ubuntu", false), log).get(WAIT_S, TimeUnit.SECONDS);

    Files.writeString(tmp.resolve("exited"), ""); // the workload exits
    handle.ended().get(WAIT_S, TimeUnit.SECONDS);

    assertTrue(log.closed());
    List<dev.tickmark.wire.AgentFrame.LogLine> lines = log.batch(1 << 20);
    assertEquals(
        Set.of("stdout:hello from the container", "stderr:warning from the container"),
        lines.stream()
            .map(l -> l.stream() + ":" + l.text())
            .collect(java.util.stream.Collectors.toSet()));
    assertEquals(
        List.of(1L, 2L), lines.stream().map(dev.tickmark.wire.AgentFrame.LogLine::seq).toList());
  }

  @Test
  void theExitStatusIsTheLastLineDockerWaitPrintedWhenItIsOne() {
    assertEquals(0, DockerRuntime.exitStatus("0\n"));
    assertEquals(137, DockerRuntime.exitStatus("137\n"));
    assertEquals(3, DockerRuntime.exitStatus("some warning\n3\n\n"));
    assertNull(DockerRuntime.exitStatus(""));
    assertNull(DockerRuntime.exitStatus("Error response from daemon: No such container: x\n"));
    assertNull(DockerRuntime.exitStatus("256\n"), "no exit status is above 255");
    assertNull(DockerRuntime.exitStatus("-1\n"));
  }

  /**
   * A daemon without a bridge network (started with {@code --bridge=none}) gives a container with
   * network its loopback only: the runtime says it offers no network (the hardware report tells the
   * engine) and refuses such a rental before docker runs; once the daemon has a bridge, both
   * change, without restarting the agent.
   */
  @Test
  void withoutTheDaemonsBridgeNetworkARentalWithNetworkIsRefused() throws Exception {
    DockerRuntime rt = runtime(fakeDocker(tmp).toString());
    assertFalse(rt.offersNetwork());
    Runtime.Failure f = startFails(rt, spec("rnt_net", List.of(0), "ubuntu", true));
    assertEquals(DockerRuntime.NETWORK_REFUSED, f.getMessage());
    assertFalse(calls().contains("run "), "docker run never ran: " + calls());
    assertFalse(Files.exists(tmp.resolve("state/rentals/rnt_net/scratch")));

    Files.writeString(tmp.resolve("bridge"), "");
    assertTrue(rt.offersNetwork(), "the daemon has a bridge now");
    rt.start(spec("rnt_net2", List.of(0), "ubuntu", true)).get(WAIT_S, TimeUnit.SECONDS);
    assertTrue(calls().contains("run "), calls());
    assertFalse(calls().contains("--network none"), "with network: " + calls());
  }

  @Test
  void aContainerThatExitsByItselfEndsTheRentalAndIsWiped() throws Exception {
    Files.writeString(tmp.resolve("bridge"), ""); // its rental asks for network
    DockerRuntime rt = runtime(fakeDocker(tmp).toString());
    Runtime.Handle handle =
        rt.start(spec("rnt_2", List.of(0), "ubuntu", true)).get(WAIT_S, TimeUnit.SECONDS);
    await(
        "docker wait",
        () -> {
          try {
            return calls().contains("wait tickmark-rnt_2");
          } catch (IOException e) {
            return false;
          }
        });

    Files.writeString(tmp.resolve("exited"), "7"); // the workload exits, status 7

    handle.ended().get(WAIT_S, TimeUnit.SECONDS);
    assertEquals(7, handle.exitCode(), "the status docker wait printed");
    assertFalse(Files.exists(tmp.resolve("state/rentals/rnt_2/scratch")));
    assertTrue(
        calls().contains("rm --force tickmark-rnt_2"),
        "made sure the container is gone: " + calls());
    assertFalse(calls().contains("stop "));
    assertEquals(Set.of(), rt.running());
  }

  @Test
  void theNoticeGoesToTheMountedNoticeFolderAndTerminateIsDockerKill() throws Exception {
    DockerRuntime rt = runtime(fakeDocker(tmp).toString());
    Runtime.Handle handle =
        rt.start(spec("rnt_4", List.of(0), "ubuntu", false)).get(WAIT_S, TimeUnit.SECONDS);
    Path folder = tmp.resolve("state/rentals/rnt_4/tickmark");
    assertTrue(calls().contains("-v " + folder + ":/run/tickmark:ro"), calls());
    assertTrue(Files.isDirectory(folder));

    assertTrue(rt.notice("rnt_4", java.time.Instant.parse("2026-11-29T18:02:00Z")));
    assertEquals(
        "{\"type\":\"preemption\",\"deadline\":\"2026-11-29T18:02:00Z\",\"rental_id\":\"rnt_4\"}\n",
        Files.readString(folder.resolve("notice")));
    assertTrue(rt.terminate("rnt_4").get(WAIT_S, TimeUnit.SECONDS));
    assertTrue(calls().contains("kill --signal TERM tickmark-rnt_4"), calls());
    assertFalse(handle.ended().isDone(), "SIGTERM only: the container runs on");

    rt.stop("rnt_4").get(WAIT_S, TimeUnit.SECONDS);
    assertFalse(Files.exists(folder), "wiped with the rental");
  }

  /**
   * {@code ssh -L} into a container: a helper of the rental's image in the rental's network
   * namespace only, as nobody, without privileges, never pulling, not logging what it carries,
   * running the host's socat through the host's loader.
   */
  @Test
  void theRelayForAForwardedPortJoinsOnlyTheContainersNetwork() {
    HostSocat socat =
        new HostSocat(
            Path.of("/usr/bin/socat"),
            Path.of("/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"),
            List.of(Path.of("/usr/lib/x86_64-linux-gnu")),
            List.of(Path.of("/usr")));
    assertEquals(
        List.of(
            "docker",
            "run",
            "--rm",
            "-i",
            "--pull",
            "never",
            "--network",
            "container:tickmark-rnt_1",
            "--label",
            "tickmark.rental-relay=rnt_1",
            "--log-driver",
            "none",
            "--user",
            "65534:65534",
            "--cap-drop",
            "ALL",
            "--security-opt",
            "no-new-privileges",
            "--pids-limit",
            "16",
            "--read-only",
            "-v",
            "/usr:/tickmark-host/usr:ro",
            "--entrypoint",
            "/tickmark-host/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2",
            "ubuntu:24.04",
            "--inhibit-cache",
            "--library-path",
            "/tickmark-host/usr/lib/x86_64-linux-gnu",
            "/tickmark-host/usr/bin/socat",
            "-",
            "TCP4:127.0.0.1:8888"),
        DockerRuntime.relayInvocation("docker", socat, "rnt_1", "ubuntu:24.04", false, 8888));
    List<String> ipv6 =
        DockerRuntime.relayInvocation("docker", socat, "rnt_1", "ubuntu:24.04", true, 8888);
    assertEquals("TCP6:[::1]:8888", ipv6.get(ipv6.size() - 1));
  }
}
