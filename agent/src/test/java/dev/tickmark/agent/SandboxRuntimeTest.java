package dev.tickmark.agent;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.tickmark.agent.ssh.HostKey;
import dev.tickmark.agent.ssh.Workspace;
import dev.tickmark.wire.AgentFrame;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.SocketTimeoutException;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A real bubblewrap sandbox ({@link SandboxSupport}): each workload tries what a rental must not be
 * able to do, and the test reads from its output that it failed, and checks the host.
 */
class SandboxRuntimeTest {
  private static final long WAIT_S = 20;

  @TempDir Path state;
  @TempDir Path devDir;
  private Sandbox.Tools tools;
  private SandboxRuntime runtime;

  @BeforeEach
  void setUp() throws IOException {
    tools = SandboxSupport.require();
    // the agent's secrets, where an agent keeps them
    Files.writeString(state.resolve(StateDir.KEY_FILE), "the agent's private key");
    Files.writeString(state.resolve(StateDir.CREDENTIAL_FILE), "tmkhost_secret_credential");
    Files.writeString(state.resolve(HostKey.FILE), "the ssh host key");
    // stand-in GPU device nodes
    for (String name : List.of("nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm"))
      Files.writeString(devDir.resolve(name), name);
    // like /dev, open to every user: a root agent's sandboxes run as nobody
    Files.setPosixFilePermissions(
        devDir, java.nio.file.attribute.PosixFilePermissions.fromString("rwxr-xr-x"));
  }

  @AfterEach
  void close() {
    if (runtime != null) runtime.close();
  }

  private SandboxRuntime runtime(Duration grace, Sandbox.Tools with) {
    runtime =
        new SandboxRuntime(
            with,
            Sandbox.Identity.forThisAgent(),
            state,
            grace,
            Clock.systemUTC(),
            Map.of("PATH", "/home/provider/bin:/usr/bin:/bin", "TICKMARK_AGENT_TOKEN", "tmkreg_x"),
            devDir,
            new SandboxLimits(512, 1024, 1L << 32));
    return runtime;
  }

  private static Runtime.Spec spec(String id, List<Integer> cards, String... command) {
    return new Runtime.Spec(id, cards, null, List.of(command), false);
  }

  private static RentalLog log(String id) {
    return new RentalLog(id, RentalLog.Limits.DEFAULT, Clock.systemUTC());
  }

  /** Runs a shell script in a sandbox until it exits; returns its output lines (both streams). */
  private List<String> run(SandboxRuntime rt, String id, List<Integer> cards, String script)
      throws Exception {
    RentalLog log = log(id);
    Runtime.Handle h =
        rt.start(spec(id, cards, "bash", "-c", script), log).get(WAIT_S, TimeUnit.SECONDS);
    h.ended().get(WAIT_S, TimeUnit.SECONDS);
    return log.batch(1 << 20).stream().map(AgentFrame.LogLine::text).toList();
  }

  @Test
  void aWorkloadCannotReachTheAgentsSecretsOtherRentalsTheHostsLoopbackOrOtherCards()
      throws Exception {
    SandboxRuntime rt = runtime(Duration.ofSeconds(2), tools);
    // another renter's rental, with a file in its workspace
    Runtime.Handle other =
        rt.start(spec("rnt_other", List.of(0), "sleep", "infinity"), log("rnt_other"))
            .get(WAIT_S, TimeUnit.SECONDS);
    Path otherScratch = state.resolve("rentals/rnt_other/scratch");
    Files.writeString(otherScratch.resolve("other-secret"), "theirs");
    String stateDir = state.toRealPath().toString();

    try (ServerSocket hostService = new ServerSocket(0, 50, InetAddress.getLoopbackAddress())) {
      int port = hostService.getLocalPort();
      String script =
          String.join(
              "\n",
              "try() { if eval \"$2\" >/dev/null 2>&1; then echo \"$1 yes\"; else echo \"$1 no\"; fi; }",
              "try key 'cat " + stateDir + "/" + StateDir.KEY_FILE + "'",
              "try credential 'cat " + stateDir + "/" + StateDir.CREDENTIAL_FILE + "'",
              "try hostkey 'cat " + stateDir + "/" + HostKey.FILE + "'",
              "try state 'ls " + stateDir + "'",
              "try other 'ls " + otherScratch.toRealPath() + "'",
              "try otherfile 'cat " + otherScratch.toRealPath() + "/other-secret'",
              "try home 'ls /home /root'",
              "try loopback 'bash -c \"exec 3<>/dev/tcp/127.0.0.1/" + port + "\"'",
              "try nvidia0 'test -e /dev/nvidia0'",
              "try nvidia1 'cat /dev/nvidia1'",
              "try nvidiactl 'cat /dev/nvidiactl'",
              "try write-usr 'touch /usr/lib/tickmark-escape'",
              "try write-etc 'touch /etc/tickmark-escape'",
              "try write-root 'touch /tickmark-escape'",
              "try write-state 'touch " + stateDir + "/tickmark-escape'",
              // the same value back: harmless even if it were allowed
              "try sysctl 'v=$(cat /proc/sys/kernel/core_pattern); printf %s \"$v\" > /proc/sys/kernel/core_pattern'",
              "try chmod-gpu 'chmod 600 /dev/nvidia1'",
              "try null 'echo x > /dev/null && test -z \"$(head -c 0 /dev/zero)\"'",
              "try write-workspace 'echo mine > /workspace/file && test \"$(cat file)\" = mine'",
              "echo \"pwd $(pwd) home $HOME cuda $CUDA_VISIBLE_DEVICES id $TICKMARK_RENTAL_ID\"",
              "echo \"token ${TICKMARK_AGENT_TOKEN:-none} path $PATH\"",
              "echo \"limits $(ulimit -u) $(ulimit -n)\"",
              "echo \"user $(id -u) $(id -un) host $(hostname)\"");
      List<String> out = run(rt, "rnt_probe", List.of(1), script);

      for (String denied :
          List.of(
              "key",
              "credential",
              "hostkey",
              "state",
              "other",
              "otherfile",
              "home",
              "loopback",
              "nvidia0",
              "write-usr",
              "write-etc",
              "write-root",
              "write-state",
              "sysctl")) assertTrue(out.contains(denied + " no"), denied + " must fail: " + out);
      // a root agent's sandboxes are not the owner of the (root's) device nodes
      if (Sandbox.Identity.forThisAgent() != null)
        assertTrue(out.contains("chmod-gpu no"), out.toString());
      for (String allowed : List.of("nvidia1", "nvidiactl", "write-workspace", "null"))
        assertTrue(out.contains(allowed + " yes"), allowed + " must work: " + out);
      assertTrue(
          out.contains("pwd /workspace home /workspace cuda 1 id rnt_probe"), out.toString());
      assertTrue(out.contains("token none path " + Sandbox.PATH), out.toString());
      assertTrue(out.contains("limits 512 1024"), out.toString());
      int uid = Sandbox.Identity.of(Sandbox.Identity.forThisAgent())[0];
      assertTrue(out.contains("user " + uid + " renter host tickmark"), out.toString());
      assertTrue(uid != 0, "never root on the host");

      // and from the host: nothing connected, nothing written outside the workspace
      hostService.setSoTimeout(50);
      try {
        hostService.accept().close();
        throw new AssertionError("the workload reached the host's loopback");
      } catch (SocketTimeoutException expected) {
        // no connection was waiting
      }
    }
    assertFalse(Files.exists(Path.of("/usr/lib/tickmark-escape")));
    assertFalse(Files.exists(state.resolve("tickmark-escape")));
    assertFalse(Files.exists(state.resolve("rentals/rnt_probe/scratch")), "its workspace is wiped");
    assertEquals("theirs", Files.readString(otherScratch.resolve("other-secret")));
    rt.stop("rnt_other").get(WAIT_S, TimeUnit.SECONDS);
    other.ended().get(WAIT_S, TimeUnit.SECONDS);
  }

  /**
   * A restored workspace, unpacked as the agent, is the sandbox user's as a fresh one is (a root
   * agent's sandboxes run as nobody); a workspace kept at the stop can be archived by the agent.
   */
  @Test
  void aRestoredWorkspaceIsTheWorkloadsAndAKeptOneIsArchivable() throws Exception {
    SandboxRuntime rt = runtime(Duration.ofMillis(500), tools);
    Path ws = Files.createDirectories(state.resolve("made/d"));
    Files.writeString(ws.resolve("f"), "restored\n");
    Files.setPosixFilePermissions(
        ws.resolve("f"), java.nio.file.attribute.PosixFilePermissions.fromString("rw-r--r--"));
    Path archive = state.resolve("a.tar.zst");
    dev.tickmark.agent.snapshot.WorkspaceArchive.write(ws.getParent(), archive);
    Runtime.Fill fill =
        scratch -> dev.tickmark.agent.snapshot.WorkspaceArchive.unpack(archive, scratch, 1 << 20);
    RentalLog log = log("rnt_restored");
    Runtime.Handle h =
        rt.start(
                spec(
                        "rnt_restored",
                        List.of(0),
                        "bash",
                        "-c",
                        "cat d/f && echo more >> d/f && mkdir d/new && echo made > d/new/g && echo wrote;"
                            + " exec sleep infinity")
                    .withFill(fill),
                log)
            .get(WAIT_S, TimeUnit.SECONDS);
    Path scratch = state.resolve("rentals/rnt_restored/scratch");
    // The log's lines reach it from the workload's pipe a moment after the files are written: wait
    // for the last line ("wrote"), gathering them as they come (a batch hands each line once).
    List<String> out = new java.util.ArrayList<>();
    Eventually.until(
        WAIT_S,
        () -> "a file written and \"wrote\" in the log: " + out,
        () -> {
          log.batch(1 << 20).forEach(line -> out.add(line.text()));
          return out.contains("wrote") && Files.exists(scratch.resolve("d/new/g"));
        });
    rt.stop("rnt_restored", true).get(WAIT_S, TimeUnit.SECONDS);
    h.ended().get(WAIT_S, TimeUnit.SECONDS);
    assertTrue(out.contains("restored") && out.contains("wrote"), out.toString());
    assertEquals("restored\nmore\n", Files.readString(scratch.resolve("d/f")), "kept, not wiped");
    Path again = state.resolve("again.tar.zst");
    dev.tickmark.agent.snapshot.WorkspaceArchive.write(scratch, again);
    Path check = Files.createDirectories(state.resolve("check"));
    dev.tickmark.agent.snapshot.WorkspaceArchive.unpack(again, check, 1 << 20);
    assertEquals("made\n", Files.readString(check.resolve("d/new/g")));
  }

  @Test
  void theSpotNoticeIsReadOnlyInsideAndItsSigtermReachesTheWorkload() throws Exception {
    SandboxRuntime rt = runtime(Duration.ofSeconds(10), tools);
    RentalLog log = log("rnt_spot");
    Runtime.Handle handle =
        rt.start(
                spec(
                    "rnt_spot",
                    List.of(0),
                    "bash",
                    "-c",
                    "echo \"notice=$TICKMARK_NOTICE_FILE\";"
                        + " trap 'echo \"term: $(cat \"$TICKMARK_NOTICE_FILE\")\";"
                        + " echo forged > \"$TICKMARK_NOTICE_FILE\" 2>/dev/null || echo read-only; exit 0' TERM;"
                        + " touch /workspace/ready; while true; do sleep 0.1; done"),
                log)
            .get(WAIT_S, TimeUnit.SECONDS);
    Path ready = state.resolve("rentals/rnt_spot/scratch/ready");
    Eventually.until(WAIT_S, () -> "the workload's start", () -> Files.exists(ready));
    Instant deadline = Instant.parse("2026-11-29T18:02:00Z");
    assertTrue(rt.notice("rnt_spot", deadline));
    assertTrue(rt.terminate("rnt_spot").get(WAIT_S, TimeUnit.SECONDS));
    handle.ended().get(WAIT_S, TimeUnit.SECONDS); // it exits by itself, on the SIGTERM
    List<String> out = log.batch(1 << 20).stream().map(AgentFrame.LogLine::text).toList();
    assertTrue(out.contains("notice=/run/tickmark/notice"), out.toString());
    assertTrue(
        out.contains(
            "term: {\"type\":\"preemption\",\"deadline\":\"2026-11-29T18:02:00Z\",\"rental_id\":\"rnt_spot\"}"),
        out.toString());
    assertTrue(out.contains("read-only"), "the workload cannot forge its notice: " + out);
  }

  @Test
  void aWorkloadsExitStatusComesOutOfTheSandbox() throws Exception {
    SandboxRuntime rt = runtime(Duration.ofSeconds(10), tools);
    Runtime.Handle exited =
        rt.start(spec("rnt_exit", List.of(0), "bash", "-c", "sleep 0.2; exit 42"), log("rnt_exit"))
            .get(WAIT_S, TimeUnit.SECONDS);
    Runtime.Handle killed =
        rt.start(spec("rnt_kill", List.of(1), "bash", "-c", "sleep 0.2; kill -KILL $$"), log("k"))
            .get(WAIT_S, TimeUnit.SECONDS);

    exited.ended().get(WAIT_S, TimeUnit.SECONDS);
    killed.ended().get(WAIT_S, TimeUnit.SECONDS);

    assertEquals(42, exited.exitCode());
    assertEquals(128 + 9, killed.exitCode(), "a signal's death, as a shell reports it");
  }

  @Test
  void nothingOfTheRentalOutlivesIt() throws Exception {
    SandboxRuntime rt = runtime(Duration.ofSeconds(2), tools);
    // it exits at once, leaving a process in the background
    String marker = "98765" + ProcessHandle.current().pid();
    List<String> out =
        run(
            rt,
            "rnt_bg",
            List.of(0),
            "nohup sleep " + marker + " >/dev/null 2>&1 & echo \"left $!\"");
    assertTrue(out.stream().anyMatch(l -> l.startsWith("left ")), out.toString());
    assertEquals(List.of(), processesWith(marker), "no process of the rental remains");

    // stopped: SIGTERM reaches the workload, then the grace ends, and its whole namespace goes
    RentalLog log = log("rnt_stop");
    Runtime.Handle h =
        rt.start(
                spec(
                    "rnt_stop",
                    List.of(0),
                    "bash",
                    "-c",
                    "trap 'echo got TERM' TERM; (trap '' TERM; exec sleep "
                        + marker
                        + "1) & echo ready; touch /workspace/ready; while true; do sleep 0.1; done"),
                log)
            .get(WAIT_S, TimeUnit.SECONDS);
    // stopped only once its trap is set (a stop before that is no test of SIGTERM; seen in CI)
    Path ready = state.resolve("rentals/rnt_stop/scratch/ready");
    Eventually.until(WAIT_S, () -> "the workload's start", () -> Files.exists(ready));
    String ns = rt.pidNamespace("rnt_stop");
    assertNotNull(ns);
    assertFalse(SandboxRuntime.inNamespace("pid", ns).isEmpty());
    rt.stop("rnt_stop").get(WAIT_S, TimeUnit.SECONDS);
    h.ended().get(WAIT_S, TimeUnit.SECONDS);
    List<String> lines = log.batch(1 << 20).stream().map(AgentFrame.LogLine::text).toList();
    assertTrue(lines.contains("got TERM"), "the workload was asked to end: " + lines);
    assertEquals(
        List.of(),
        SandboxRuntime.inNamespace("pid", ns).stream()
            .filter(pid -> ProcessHandle.of(pid).map(p -> !ProcessRuntime.gone(p)).orElse(false))
            .toList(),
        "its PID namespace is empty");
    assertEquals(List.of(), processesWith(marker + "1"), "what ignored SIGTERM was killed");
    assertFalse(Files.exists(state.resolve("rentals/rnt_stop/scratch")));
    assertEquals(java.util.Set.of(), rt.running());
  }

  @Test
  void refusesWhatItCannotRun() {
    SandboxRuntime rt = runtime(Duration.ofSeconds(1), withSlirp(null));
    assertFalse(rt.offersNetwork(), "what its hardware report says, so the engine knows");
    ExecutionException network =
        org.junit.jupiter.api.Assertions.assertThrows(
            ExecutionException.class,
            () ->
                rt.start(new Runtime.Spec("rnt_net", List.of(0), null, List.of("true"), true))
                    .get(WAIT_S, TimeUnit.SECONDS));
    assertInstanceOf(Runtime.Failure.class, network.getCause());
    assertEquals(SandboxRuntime.NETWORK_REFUSED, network.getCause().getMessage());
    ExecutionException missing =
        org.junit.jupiter.api.Assertions.assertThrows(
            ExecutionException.class,
            () ->
                rt.start(spec("rnt_nx", List.of(0), "no-such-program-here"))
                    .get(WAIT_S, TimeUnit.SECONDS));
    assertEquals("command not found: no-such-program-here", missing.getCause().getMessage());
    // the workspace starts empty and the host's folders are not there
    assertEquals(null, SandboxRuntime.executable("/home/provider/bin/tool"));
    assertEquals("/usr/bin/sh", SandboxRuntime.executable("/usr/bin/sh"));
  }

  /** The host's tools with {@code slirp4netns} in place of the host's own. */
  private Sandbox.Tools withSlirp(String slirp4netns) {
    return new Sandbox.Tools(
        tools.bwrap(),
        tools.nsenter(),
        tools.prlimit(),
        tools.setpriv(),
        tools.env(),
        tools.socat(),
        tools.unshare(),
        tools.mount(),
        slirp4netns);
  }

  /**
   * A rental with network reaches out through slirp4netns (a real connection to a server on the
   * host's own address, made before the workload's first line: the route is there when it starts)
   * but not the host's loopback, also not through slirp's gateway; its DNS is slirp's forwarder;
   * the helper ends with the rental.
   */
  @Test
  void aRentalWithNetworkReachesOutButNotTheHostsLoopback() throws Exception {
    SandboxSupport.requireSlirp4netns(tools);
    InetAddress outside = SandboxSupport.nonLoopbackAddress();
    SandboxRuntime rt = runtime(Duration.ofSeconds(2), tools);
    assertTrue(rt.offersNetwork(), "with slirp4netns its report says it can");
    try (ServerSocket server = new ServerSocket(0, 50, outside);
        ServerSocket hostLoopback = new ServerSocket(0, 50, InetAddress.getLoopbackAddress())) {
      String script =
          String.join(
              "\n",
              "try() { if timeout 5 bash -c \"exec 3<>/dev/tcp/$2/$3\" 2>/dev/null; then echo \"$1 yes\"; else echo \"$1 no\"; fi; }",
              "try outside " + outside.getHostAddress() + " " + server.getLocalPort(),
              "try gateway-to-loopback 10.0.2.2 " + hostLoopback.getLocalPort(),
              "try loopback 127.0.0.1 " + hostLoopback.getLocalPort(),
              "cat /etc/resolv.conf",
              "while [ ! -f /workspace/go ]; do sleep 0.05; done");
      RentalLog log = log("rnt_net");
      Runtime.Handle h =
          rt.start(
                  new Runtime.Spec(
                      "rnt_net", List.of(0), null, List.of("bash", "-c", script), true),
                  log)
              .get(WAIT_S, TimeUnit.SECONDS);
      server.setSoTimeout((int) TimeUnit.SECONDS.toMillis(WAIT_S));
      try (java.net.Socket accepted = server.accept()) {
        assertNotNull(accepted, "the workload's connection arrived");
      }
      List<Long> slirp = processesWith("--disable-host-loopback");
      assertEquals(1, slirp.size(), "one slirp4netns for the rental");
      assertEquals(
          Sandbox.Identity.of(Sandbox.Identity.forThisAgent())[0],
          Files.getAttribute(Path.of("/proc/" + slirp.get(0)), "unix:uid"),
          "slirp4netns runs as the sandbox's uid, never root");
      Files.writeString(state.resolve("rentals/rnt_net/scratch/go"), "");
      h.ended().get(WAIT_S, TimeUnit.SECONDS);
      List<String> out = log.batch(1 << 20).stream().map(AgentFrame.LogLine::text).toList();
      assertEquals(
          List.of(
              "outside yes",
              "gateway-to-loopback no",
              "loopback no",
              "nameserver " + Sandbox.NAMESERVER),
          out);
      assertEquals(0, h.exitCode());
    }
    assertEquals(
        List.of(), processesWith("--disable-host-loopback"), "slirp4netns ended with the rental");
    assertFalse(Files.exists(state.resolve("rentals/rnt_net/scratch")));
  }

  /**
   * When the network cannot be given, the rental does not start without it: it fails, saying why,
   * and nothing of it is left.
   */
  @Test
  void aRentalWhoseNetworkCannotBeGivenFailsAndLeavesNothing() throws Exception {
    SandboxRuntime rt = runtime(Duration.ofSeconds(1), withSlirp("/bin/false"));
    String marker = "76543" + ProcessHandle.current().pid();
    ExecutionException failed =
        org.junit.jupiter.api.Assertions.assertThrows(
            ExecutionException.class,
            () ->
                rt.start(
                        new Runtime.Spec(
                            "rnt_nonet", List.of(0), null, List.of("sleep", marker), true),
                        log("rnt_nonet"))
                    .get(WAIT_S, TimeUnit.SECONDS));
    assertInstanceOf(Runtime.Failure.class, failed.getCause());
    assertTrue(
        failed.getCause().getMessage().startsWith("cannot give the sandbox network access: "),
        failed.getCause().getMessage());
    // its command line is bwrap's too: neither a waiting sandbox nor the workload is left
    assertEquals(List.of(), processesWith(marker));
    assertFalse(Files.exists(state.resolve("rentals/rnt_nonet/scratch")));
    assertEquals(java.util.Set.of(), rt.running());
  }

  /**
   * A network sandbox's command waits for the agent's "1" ({@link Sandbox#AWAIT_NETWORK}); when the
   * agent's pipe ends without it (the agent died before the network was there) the command never
   * runs. Run here as the sandbox runs it: the pipe on fd 3, stdin /dev/null.
   */
  @Test
  void aNetworkSandboxsCommandRunsOnlyOnTheAgentsWord() throws Exception {
    List<String> argv =
        List.of(
            "/bin/sh",
            "-c",
            "exec 3<&0 0</dev/null; exec \"$@\"",
            "t",
            "/bin/sh",
            "-c",
            Sandbox.AWAIT_NETWORK,
            "tickmark-await-network",
            "sh",
            "-c",
            "echo ran; if [ -e /proc/self/fd/3 ]; then echo fd3-open; fi");
    for (String said : new String[] {null, "", "0\n", "1\n"}) {
      Process p = new ProcessBuilder(argv).redirectErrorStream(true).start();
      try (OutputStream in = p.getOutputStream()) {
        if (said != null) in.write(said.getBytes(StandardCharsets.US_ASCII));
      }
      String out;
      try (InputStream o = p.getInputStream()) {
        out = new String(o.readAllBytes(), StandardCharsets.UTF_8);
      }
      assertTrue(p.waitFor(WAIT_S, TimeUnit.SECONDS));
      if ("1\n".equals(said)) {
        assertEquals(0, p.exitValue(), out);
        assertEquals("ran\n", out, "it ran, and the pipe is closed in it");
      } else {
        assertEquals(125, p.exitValue(), "said " + said + ": " + out);
        assertFalse(out.contains("ran"), "said " + said + ": " + out);
      }
    }
  }

  @Test
  void sessionsAndRelaysEnterTheSandbox() throws Exception {
    // without socat, the relay is the agent's own Java
    Sandbox.Tools noSocat =
        new Sandbox.Tools(
            tools.bwrap(),
            tools.nsenter(),
            tools.prlimit(),
            tools.setpriv(),
            tools.env(),
            null,
            tools.unshare(),
            tools.mount(),
            tools.slirp4netns());
    SandboxRuntime rt = runtime(Duration.ofSeconds(1), noSocat);
    RentalLog log = log("rnt_srv");
    rt.start(
            spec(
                "rnt_srv",
                List.of(0),
                "perl",
                "-MIO::Socket::INET",
                "-e",
                "$s=IO::Socket::INET->new(LocalAddr=>'127.0.0.1:8765',Listen=>5,ReuseAddr=>1) or die;"
                    + " $|=1; print \"listening\\n\";"
                    + " while($c=$s->accept){print $c \"inside \".<$c>; close $c}"),
            log)
        .get(WAIT_S, TimeUnit.SECONDS);
    Eventually.until(
        WAIT_S,
        () -> "the server's start",
        () -> log.batch(1 << 20).stream().anyMatch(l -> l.text().equals("listening")));
    Workspace.Sandboxed ws =
        assertInstanceOf(Workspace.Sandboxed.class, rt.workspace("rnt_srv").orElseThrow());

    List<String> enter = new ArrayList<>(ws.enter());
    enter.addAll(List.of("sh", "-c", "pwd; ls /; id -u; cat /proc/self/status | grep NoNewPrivs"));
    assertEquals(
        List.of(
            "/workspace",
            "bin",
            "dev",
            "etc",
            "lib",
            "lib64",
            "proc",
            "run", // only /run/tickmark: the spot notice, read-only
            "sbin",
            "tmp",
            "usr",
            "workspace",
            String.valueOf(Sandbox.Identity.of(Sandbox.Identity.forThisAgent())[0]),
            "NoNewPrivs:\t1"),
        output(enter, ws.env(), null)
            .lines()
            .filter(l -> !l.startsWith("lib32") && !l.startsWith("libx32"))
            .toList());

    assertEquals("inside hello\n", output(ws.relay().command(false, 8765), Map.of(), "hello\n"));

    // what a session leaves in the background ends with the rental
    String marker = "97531" + ProcessHandle.current().pid();
    List<String> background = new ArrayList<>(ws.enter());
    background.addAll(
        List.of("sh", "-c", "nohup sleep " + marker + " >/dev/null 2>&1 & echo left"));
    assertEquals("left\n", output(background, ws.env(), null));
    // it runs while the rental does: the shell forked it and left, so it may still be on its way
    // through nohup's exec when the shell's end is seen
    Eventually.until(
        WAIT_S,
        () -> "one process of the session left in the background: " + running(marker),
        () -> running(marker).size() == 1);
    rt.stop("rnt_srv").get(WAIT_S, TimeUnit.SECONDS);
    assertEquals(List.of(), processesWith(marker), "and not after it");
  }

  private static String output(List<String> argv, Map<String, String> env, String input)
      throws Exception {
    ProcessBuilder pb = new ProcessBuilder(argv).redirectErrorStream(true);
    pb.environment().clear();
    pb.environment().putAll(env);
    Process p = pb.start();
    try (OutputStream in = p.getOutputStream()) {
      if (input != null) in.write(input.getBytes(StandardCharsets.UTF_8));
    }
    String out;
    try (InputStream o = p.getInputStream()) {
      out = new String(o.readAllBytes(), StandardCharsets.UTF_8);
    }
    assertTrue(p.waitFor(WAIT_S, TimeUnit.SECONDS), "still running: " + argv);
    return out;
  }

  /** The host's processes whose command line contains {@code marker}. */
  private static List<Long> running(String marker) {
    try {
      return processesWith(marker);
    } catch (IOException e) {
      throw new java.io.UncheckedIOException(e);
    }
  }

  private static List<Long> processesWith(String marker) throws IOException {
    List<Long> found = new ArrayList<>();
    try (DirectoryStream<Path> procs =
        Files.newDirectoryStream(
            Path.of("/proc"),
            p -> p.getFileName().toString().chars().allMatch(Character::isDigit))) {
      for (Path p : procs) {
        try {
          String cmdline =
              new String(Files.readAllBytes(p.resolve("cmdline")), StandardCharsets.UTF_8);
          long pid = Long.parseLong(p.getFileName().toString());
          if (cmdline.contains(marker) && pid != ProcessHandle.current().pid()) found.add(pid);
        } catch (IOException gone) {
          // ended while we looked
        }
      }
    }
    return found;
  }
}
