package dev.tickmark.agent;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.tickmark.agent.SshClientSupport.Ran;
import dev.tickmark.wire.AgentFrame;
import java.io.IOException;
import java.net.InetAddress;
import java.net.Socket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.io.TempDir;

/**
 * The real OpenSSH client into a rental of a real {@link Agent} with the sandbox runtime: sessions
 * see the sandbox (its root, its workspace, its user), and {@code ssh -L} reaches a server that
 * listens on the sandbox's own loopback. Skipped without ssh or a working bubblewrap ({@link
 * SandboxSupport}).
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class SandboxSshTest {
  private static final Path SSH = Path.of("/usr/bin/ssh");
  private static final Path SCP = Path.of("/usr/bin/scp");
  private static final long WAIT_S = 20;
  private static final String RENTAL = "rnt_sbx_ssh";
  private static final int INSIDE_PORT = 8765;

  @TempDir static Path tmp;
  private ScriptedNode node;
  private Agent agent;
  private Path stateDir;
  private Path key;
  private Path knownHosts;
  private int endpoint;

  @BeforeAll
  void start() throws Exception {
    Assumptions.assumeTrue(
        Files.isExecutable(SSH), "no OpenSSH client at /usr/bin/ssh: the ssh tests are skipped");
    SandboxSupport.require();
    node = new ScriptedNode();
    stateDir = tmp.resolve("agent");
    AgentConfig config =
        new AgentConfig(
                List.of(node.uri()),
                node.newToken("host_sbx_ssh"),
                stateDir,
                SimulatedGpus.parse("h100-80gb:2"))
            .withRuntime(AgentConfig.RuntimeKind.SANDBOX)
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
                    Agent.VERSION));
    agent.verified().get(WAIT_S, TimeUnit.SECONDS);
    assertEquals("sandbox", agent.runtimeName());
    key = tmp.resolve("id_renter");
    String publicKey = SshClientSupport.writeKey(key);
    // the workload: a server on the sandbox's loopback (perl-base is on every Debian system)
    List<String> server =
        List.of(
            "perl",
            "-MIO::Socket::INET",
            "-e",
            "$s=IO::Socket::INET->new(LocalAddr=>'127.0.0.1:"
                + INSIDE_PORT
                + "',Listen=>5,ReuseAddr=>1) or die; $|=1; print \"listening\\n\";"
                + " while($c=$s->accept){print $c \"inside \".<$c>; close $c}");
    node.send(
        new AgentFrame.StartRental(
            RENTAL, List.of(1), "img", server, publicKey + "\n", false, null));
    next(AgentFrame.RentalStarted.class, f -> f.rentalId().equals(RENTAL));
    endpoint = node.renterEndpoint(RENTAL);
    knownHosts = tmp.resolve("known_hosts");
    Files.writeString(knownHosts, "tickmark-host " + agent.sshHostKey().orElseThrow() + "\n");
  }

  @AfterAll
  void stop() throws IOException {
    if (agent != null) agent.close();
    if (node != null) node.close();
  }

  @Test
  void execSeesTheSandboxNotTheHost() throws Exception {
    Ran r =
        ssh(
            List.of(),
            "pwd; ls /; echo $HOME $CUDA_VISIBLE_DEVICES $TICKMARK_RENTAL_ID; id -un; hostname;"
                + " cat "
                + stateDir.toRealPath().resolve(StateDir.CREDENTIAL_FILE)
                + " || echo no-credential; ls /dev | grep nvidia || echo no-gpu-node;"
                + " v=$(cat /proc/sys/kernel/core_pattern);"
                + " printf %s \"$v\" > /proc/sys/kernel/core_pattern || echo no-sysctl;"
                + " grep -c . /proc/[0-9]*/cmdline | wc -l");
    assertEquals(0, r.status(), r.toString());
    List<String> lines = r.lines();
    assertEquals("/workspace", lines.get(0), r.toString());
    List<String> root = new ArrayList<>(lines.subList(1, lines.indexOf("workspace") + 1));
    root.removeIf(n -> n.startsWith("lib3") || n.startsWith("libx"));
    assertEquals(
        List.of(
            "bin", "dev", "etc", "lib", "lib64", "proc", "run", "sbin", "tmp", "usr", "workspace"),
        root,
        r.toString());
    assertTrue(lines.contains("/workspace 1 " + RENTAL), r.toString());
    assertTrue(lines.contains("renter"), r.toString());
    assertTrue(lines.contains("tickmark"), r.toString());
    assertTrue(lines.contains("no-credential"), r.toString());
    assertTrue(lines.contains("no-sysctl"), "the kernel's settings are not the session's: " + r);
    assertTrue(lines.contains("no-gpu-node"), "simulated GPUs have no device nodes: " + r);
    // the sandbox's processes only: bwrap's init, the server, this session (sh, grep, wc)
    assertTrue(Integer.parseInt(lines.get(lines.size() - 1)) < 10, r.toString());
    assertEquals(7, ssh(List.of(), "exit 7").status());
  }

  @Test
  void aPseudoTerminalWhenAskedFor() throws Exception {
    Ran r = ssh(List.of("-tt"), "echo $TERM; stty size");
    assertEquals(0, r.status(), r.toString());
    assertEquals(List.of("xterm-256color", "24 80"), r.lines(), r.toString());
    assertNotEquals(0, ssh(List.of(), "stty size").status(), "without -t there is no terminal");
  }

  @Test
  void filesCopiedWithScpAreInTheSandboxsWorkspace() throws Exception {
    Assumptions.assumeTrue(Files.isExecutable(SCP), "no scp at /usr/bin/scp");
    byte[] content = new byte[100_000];
    new java.util.Random(3).nextBytes(content);
    Path local = tmp.resolve("up.bin");
    Files.write(local, content);
    Ran up = scp(local.toString(), "renter@127.0.0.1:up.bin");
    assertEquals(0, up.status(), up.toString());
    Ran inside = ssh(List.of(), "cksum < /workspace/up.bin");
    Ran here = run(List.of("sh", "-c", "cksum < " + local));
    assertEquals(here.out(), inside.out(), "the same file inside the sandbox");
    assertArrayEquals(
        content,
        Files.readAllBytes(stateDir.resolve("rentals").resolve(RENTAL).resolve("scratch/up.bin")));
  }

  @Test
  void localForwardingReachesAServerInsideTheSandbox() throws Exception {
    int local = SshClientSupport.freeLoopbackPort();
    Process forward =
        SshClientSupport.forward(options -> sshCommand(options, null), local, INSIDE_PORT);
    try {
      assertEquals(
          "inside hello",
          SshClientSupport.exchange(local, forward, WAIT_S),
          "through ssh -L, from the sandbox's own loopback");
    } finally {
      forward.destroy();
    }
    // the host's loopback is not the sandbox's: nothing listens on that port here
    try (Socket s = new Socket(InetAddress.getLoopbackAddress(), INSIDE_PORT)) {
      throw new AssertionError("something listens on the host's port " + INSIDE_PORT);
    } catch (IOException expected) {
      // refused
    }
  }

  // ---- helpers

  private List<String> sshCommand(List<String> options, String command) {
    List<String> argv = new ArrayList<>(List.of(SSH.toString()));
    argv.addAll(SshClientSupport.strictOptions(key, knownHosts));
    argv.addAll(
        List.of("-o", "ConnectTimeout=15", "-o", "LogLevel=ERROR", "-p", String.valueOf(endpoint)));
    argv.addAll(options);
    argv.add("renter@127.0.0.1");
    if (command != null) argv.add(command);
    return argv;
  }

  private Ran ssh(List<String> options, String command) throws Exception {
    return run(sshCommand(options, command));
  }

  private Ran scp(String from, String to) throws Exception {
    List<String> argv = new ArrayList<>(List.of(SCP.toString()));
    argv.addAll(SshClientSupport.strictOptions(key, knownHosts));
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
