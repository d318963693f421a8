package dev.tickmark.agent;

import static dev.tickmark.agent.DockerTestSupport.containerExists;
import static dev.tickmark.agent.DockerTestSupport.docker;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.tickmark.agent.SshClientSupport.Ran;
import dev.tickmark.wire.AgentFrame;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.io.TempDir;

/**
 * A real {@link Agent} with the real {@link DockerRuntime} on the machine's Docker daemon, reached
 * as {@link AgentSshTest} reaches it ({@link ScriptedNode}, the machine's OpenSSH client): sessions
 * are {@code docker exec} into the rental's container, its output reaches the node as {@code logs}
 * frames, and a stop removes the container. Skipped where no daemon answers or there is no ssh,
 * failed there instead when {@code TICKMARK_TESTS_REQUIRE} names them.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class DockerAgentSshTest {
  private static final Path SSH = Path.of("/usr/bin/ssh");
  private static final Path SCP = Path.of("/usr/bin/scp");
  private static final long WAIT_S = 30;
  private static final int INSIDE_PORT = 8765;

  @TempDir static Path tmp;
  private final String run = HexFormat.of().toHexDigits(ThreadLocalRandom.current().nextInt());
  private final String image = "tickmark-it-docker-ssh:" + run;
  private final String rental = "rnt_dssh_" + run;
  private Path work;
  private ScriptedNode node;
  private Agent agent;
  private Path stateDir;
  private Path key;
  private Path knownHosts;
  private int endpoint;

  @BeforeAll
  void start() throws Exception {
    RequiredTools.assume(
        "ssh",
        Files.isExecutable(SSH),
        "no OpenSSH client at /usr/bin/ssh: the ssh tests are skipped");
    RequiredTools.assumeDocker();
    work = Files.createTempDirectory("tickmark-docker-ssh");
    DockerTestSupport.importImage(work, image);
    Path devices =
        DockerTestSupport.standInDevices(work.resolve("dev"), "nvidia0", "nvidia1", "nvidiactl");
    DockerRuntime.Options options =
        DockerRuntime.Options.forHost("docker")
            .withGpus(DockerRuntime.GpuAccess.DEVICES, devices)
            .withLimits(256L << 20, 0.5);
    node = new ScriptedNode();
    stateDir = tmp.resolve("agent");
    AgentConfig config =
        new AgentConfig(
                List.of(node.uri()),
                node.newToken("host_dssh"),
                stateDir,
                SimulatedGpus.parse("h100-80gb:2"))
            .withStopGrace(Duration.ofSeconds(2));
    agent =
        Agent.start(
            config,
            s ->
                new SimulatedHardware(
                    config.simulatedGpus(),
                    s.key().getPublic(),
                    new HardwareProbe(
                        Agent.VERSION,
                        s.path(),
                        (c, t) -> Optional.empty(),
                        Path.of("/proc"),
                        64 * 1024,
                        Clock.systemUTC()),
                    Agent.VERSION),
            s -> new DockerRuntime(options, s.path(), config.stopGrace(), Clock.systemUTC()));
    agent.verified().get(WAIT_S, TimeUnit.SECONDS);
    key = tmp.resolve("id_renter");
    String publicKey = SshClientSupport.writeKey(key);
    node.send(
        new AgentFrame.StartRental(
            rental,
            List.of(1),
            image,
            List.of(
                "sh",
                "-c",
                // a server on the container's own loopback (it has no other network), for ssh -L
                "while true; do echo inside | nc -l -p "
                    + INSIDE_PORT
                    + "; done & echo workload says hi; echo workload warns >&2; exec sleep 600"),
            publicKey + "\n",
            false,
            null));
    next(AgentFrame.RentalStarted.class, f -> f.rentalId().equals(rental));
    endpoint = node.renterEndpoint(rental);
    knownHosts = tmp.resolve("known_hosts");
    Files.writeString(knownHosts, "tickmark-host " + agent.sshHostKey().orElseThrow() + "\n");
  }

  @AfterAll
  void stop() throws Exception {
    if (agent != null) agent.close();
    if (node != null) node.close();
    if (work != null) {
      docker("rm", "--force", DockerRuntime.containerName(rental));
      docker("rmi", "--force", image);
      RentalDirs.delete(work);
    }
  }

  // ---- the tests

  @Test
  void execRunsInTheContainerWithItsOutputAndExitStatus() throws Exception {
    Ran r =
        ssh(
            List.of(),
            "echo hello; pwd; id -u; echo $TICKMARK_RENTAL_ID $TICKMARK_NOTICE_FILE;"
                + " for d in $(ls /dev); do case $d in nvidia*) echo $d ;; esac; done;"
                + " ls /sys/class/net");
    assertEquals(0, r.status(), r.toString());
    String uid = DockerTestSupport.agentUser().split(":")[0];
    assertEquals(
        List.of(
            "hello",
            "/workspace",
            uid,
            rental + " /run/tickmark/notice",
            "nvidia1",
            "nvidiactl",
            "lo"),
        r.lines(),
        "the container's view: its card, its workspace, no network: " + r);
    Ran failing = ssh(List.of(), "echo out; echo err >&2; exit 7");
    assertEquals(7, failing.status(), failing.toString());
    assertEquals("out", failing.out().strip());
    assertEquals("err", failing.err().strip());
    Ran noTty = ssh(List.of(), "tty");
    assertEquals(1, noTty.status(), "without -t there is no terminal: " + noTty);
  }

  @Test
  void aPseudoTerminalWhenAskedFor() throws Exception {
    // docker exec sets the container's terminal to the session's size just after the command
    // started (daemons before API 1.42 take no initial size): a moment later it is there
    Ran r = ssh(List.of("-tt"), "tty; echo $TERM; sleep 1; stty size");
    assertEquals(0, r.status(), r.toString());
    List<String> lines = r.lines();
    assertTrue(lines.get(0).startsWith("/dev/pts/"), r.toString());
    assertEquals("xterm-256color", lines.get(1), r.toString());
    assertEquals("24 80", lines.get(2), r.toString());
  }

  @Test
  void filesCopiedInAreTheContainersWorkspaceAndBack() throws Exception {
    RequiredTools.assume("ssh", Files.isExecutable(SCP), "no scp at /usr/bin/scp");
    Path local = Files.writeString(tmp.resolve("up.txt"), "from the renter\n");
    Ran up = scp(local.toString(), "renter@127.0.0.1:up.txt");
    assertEquals(0, up.status(), up.toString());
    Ran inside = ssh(List.of(), "cat /workspace/up.txt; echo made inside > made.txt");
    assertEquals(List.of("from the renter"), inside.lines(), inside.toString());
    Path down = tmp.resolve("made.txt");
    Ran get = scp("renter@127.0.0.1:made.txt", down.toString());
    assertEquals(0, get.status(), get.toString());
    assertEquals("made inside\n", Files.readString(down));
  }

  /**
   * {@code ssh -L} reaches a server on the container's own loopback (the container has no network
   * the host could reach, and its image no socat: the agent's helper container runs the host's),
   * twice, and leaves no helper behind.
   */
  @Test
  void localForwardingReachesAServerOnTheContainersLoopback() throws Exception {
    RequiredTools.assume(
        "socat",
        Files.isExecutable(Path.of("/usr/bin/socat")),
        "no socat on this host: ssh -L into a docker rental needs it (apt-get install socat)");
    int local = SshClientSupport.freeLoopbackPort();
    Process forward =
        SshClientSupport.forward(
            options -> sshCommand(key, endpoint, options, null), local, INSIDE_PORT);
    try {
      assertEquals(
          "inside",
          SshClientSupport.exchange(local, forward, WAIT_S),
          "through ssh -L, from the container");
      assertEquals(
          "inside",
          SshClientSupport.exchange(local, forward, WAIT_S),
          "a second connection, a helper of its own");
    } finally {
      forward.destroy();
    }
    // the host's loopback is not the container's: nothing listens on that port here
    try (java.net.Socket s =
        new java.net.Socket(java.net.InetAddress.getLoopbackAddress(), INSIDE_PORT)) {
      throw new AssertionError("something listens on the host's port " + INSIDE_PORT);
    } catch (java.io.IOException expected) {
      // refused
    }
    Eventually.until(WAIT_S, () -> "the helper containers are gone", () -> noRelayOf(rental));
  }

  private static boolean noRelayOf(String rentalId) {
    try {
      DockerTestSupport.Result r =
          docker("ps", "-aq", "--filter", "label=" + DockerRuntime.RELAY_LABEL + "=" + rentalId);
      return r.status() == 0 && r.output().isBlank();
    } catch (java.io.IOException e) {
      return false;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return false;
    }
  }

  @Test
  void theContainersOutputReachesTheNodeAsLogs() throws Exception {
    Eventually.until(
        WAIT_S,
        () -> "the workload's lines reaching the node; seen " + logLines(),
        () -> logLines().containsAll(List.of("stdout:workload says hi", "stderr:workload warns")));
  }

  private List<String> logLines() {
    return node.framesOf(AgentFrame.Logs.class).stream()
        .filter(f -> f.rentalId().equals(rental))
        .flatMap(f -> f.lines().stream())
        .map(l -> l.stream() + ":" + l.text())
        .toList();
  }

  @Test
  void aStopEndsTheSessionsAndRemovesTheContainer() throws Exception {
    String other = "rnt_dssh_stop_" + run;
    Path k = tmp.resolve("id_stop");
    node.send(
        new AgentFrame.StartRental(
            other,
            List.of(0),
            image,
            List.of("sleep", "600"),
            SshClientSupport.writeKey(k),
            false,
            null));
    try {
      next(AgentFrame.RentalStarted.class, f -> f.rentalId().equals(other));
      String name = DockerRuntime.containerName(other);
      assertTrue(containerExists(name));
      int port = node.renterEndpoint(other);
      List<String> command = sshCommand(k, port, List.of("-tt"), "echo in; exec sleep 600");
      Process session =
          new ProcessBuilder(command)
              .redirectErrorStream(true)
              .redirectInput(ProcessBuilder.Redirect.PIPE)
              .start();
      var in =
          new java.io.BufferedReader(
              new java.io.InputStreamReader(session.getInputStream(), StandardCharsets.UTF_8));
      for (String line; (line = in.readLine()) != null && !line.strip().equals("in"); ) {
        // the session's banner, if any
      }

      node.send(new AgentFrame.StopRental(other, false));

      next(AgentFrame.RentalStopped.class, f -> f.rentalId().equals(other));
      assertTrue(session.waitFor(WAIT_S, TimeUnit.SECONDS), "the ssh client was disconnected");
      assertFalse(containerExists(name), "the container is removed");
      assertFalse(Files.exists(stateDir.resolve("rentals").resolve(other).resolve("scratch")));
    } finally {
      docker("rm", "--force", DockerRuntime.containerName(other));
    }
  }

  // ---- helpers

  private List<String> sshCommand(Path identity, int port, List<String> options, String command) {
    List<String> argv = new ArrayList<>(List.of(SSH.toString()));
    argv.addAll(clientOptions(identity));
    argv.addAll(List.of("-p", String.valueOf(port)));
    argv.addAll(options);
    argv.add("renter@127.0.0.1");
    if (command != null) argv.add(command);
    return argv;
  }

  private List<String> clientOptions(Path identity) {
    return List.of(
        "-F",
        "/dev/null",
        "-i",
        identity.toString(),
        "-o",
        "IdentitiesOnly=yes",
        "-o",
        "BatchMode=yes",
        "-o",
        "StrictHostKeyChecking=yes",
        "-o",
        "UserKnownHostsFile=" + knownHosts,
        "-o",
        "GlobalKnownHostsFile=/dev/null",
        "-o",
        "HostKeyAlias=tickmark-host",
        "-o",
        "ConnectTimeout=15",
        "-o",
        "LogLevel=ERROR");
  }

  private Ran ssh(List<String> options, String command) throws Exception {
    return run(sshCommand(key, endpoint, options, command));
  }

  private Ran scp(String from, String to) throws Exception {
    List<String> argv = new ArrayList<>(List.of(SCP.toString()));
    argv.addAll(clientOptions(key));
    argv.addAll(List.of("-P", String.valueOf(endpoint), from, to));
    return run(argv);
  }

  private static Ran run(List<String> argv) throws Exception {
    return SshClientSupport.run(argv, WAIT_S * 3);
  }

  private <T extends AgentFrame> T next(Class<T> type, java.util.function.Predicate<T> which)
      throws InterruptedException {
    return SshClientSupport.next(node, type, which, WAIT_S);
  }
}
