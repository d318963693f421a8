package dev.tickmark.agent;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.sun.net.httpserver.HttpServer;
import dev.tickmark.agent.SshClientSupport.Ran;
import dev.tickmark.agent.ssh.HostKey;
import dev.tickmark.wire.AgentFrame;
import java.io.IOException;
import java.io.InputStream;
import java.net.Inet4Address;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.NetworkInterface;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.KeyPair;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import org.apache.sshd.common.util.security.SecurityUtils;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.io.TempDir;

/**
 * The machine's real OpenSSH client against a real {@link Agent}, reached the way a renter reaches
 * it: {@link ScriptedNode#renterEndpoint} turns each TCP connection into an {@code open_stream},
 * and relays it over the agent's stream websocket to the agent's SSH server. Skipped where {@code
 * /usr/bin/ssh} is missing (CI installs it).
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class AgentSshTest {
  private static final Path SSH = Path.of("/usr/bin/ssh");
  private static final Path SCP = Path.of("/usr/bin/scp");
  private static final long WAIT_S = 20;
  private static final String RENTAL = "rnt_ssh";

  @TempDir static Path tmp;
  private ScriptedNode node;
  private Agent agent;
  private Path stateDir;
  private Path key; // the renter's private key file
  private Path knownHosts;
  private int endpoint;

  @BeforeAll
  void start() throws Exception {
    RequiredTools.assume(
        "ssh",
        Files.isExecutable(SSH),
        "no OpenSSH client at /usr/bin/ssh: the ssh tests are skipped");
    node = new ScriptedNode();
    stateDir = tmp.resolve("agent");
    agent = startAgent(stateDir);
    agent.verified().get(WAIT_S, TimeUnit.SECONDS);
    key = tmp.resolve("id_renter");
    String publicKey = SshClientSupport.writeKey(key);
    node.send(
        new AgentFrame.StartRental(
            RENTAL,
            List.of(1),
            "img",
            List.of(),
            "# the renter\n" + publicKey + "\n",
            false,
            null));
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

  private Agent startAgent(Path dir) {
    AgentConfig config =
        new AgentConfig(
                List.of(node.uri()),
                node.newToken("host_ssh" + dir.getFileName()),
                dir,
                SimulatedGpus.parse("h100-80gb:2"))
            .withRuntime(AgentConfig.RuntimeKind.PROCESS) // the sandbox: SandboxSshTest
            .withStopGrace(Duration.ofSeconds(2));
    return Agent.start(
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
  }

  // ---- the tests

  @Test
  void helloCarriesTheHostKeyWhichIsKeptInTheStateFolder() throws Exception {
    AgentFrame.Hello hello =
        node.framesOf(AgentFrame.Hello.class).stream()
            .filter(h -> h.sshHostKey() != null)
            .findFirst()
            .orElseThrow();
    assertEquals(agent.sshHostKey().orElseThrow(), hello.sshHostKey());
    assertTrue(hello.sshHostKey().startsWith("ssh-ed25519 AAAA"), hello.sshHostKey());
    Path file = stateDir.resolve(HostKey.FILE);
    assertEquals("rw-------", PosixFilePermissions.toString(Files.getPosixFilePermissions(file)));
    assertEquals(
        hello.sshHostKey(), HostKey.openSshLine(HostKey.loadOrCreate(stateDir).getPublic()));
  }

  @Test
  void execReturnsOutputAndExitStatusAndRunsAsTheWorkload() throws Exception {
    Ran r = ssh(List.of(), "echo hello; pwd; echo $HOME $TICKMARK_RENTAL_ID $CUDA_VISIBLE_DEVICES");
    assertEquals(0, r.status(), r.toString());
    Path scratch = stateDir.resolve("rentals").resolve(RENTAL).resolve("scratch").toRealPath();
    assertEquals(
        List.of("hello", scratch.toString(), scratch + " " + RENTAL + " 1"),
        r.lines(),
        r.toString());
    assertEquals(1, ssh(List.of(), "false").status());
    assertEquals(7, ssh(List.of(), "echo out; echo err >&2; exit 7").status());
    Ran noTty = ssh(List.of(), "tty");
    assertNotEquals(0, noTty.status(), "without -t there is no terminal: " + noTty);
  }

  @Test
  void aPseudoTerminalWhenAskedFor() throws Exception {
    Ran r = ssh(List.of("-tt"), "tty; echo $TERM; stty size");
    assertEquals(0, r.status(), r.toString());
    List<String> lines = r.lines();
    assertTrue(lines.get(0).startsWith("/dev/pts/"), r.toString());
    assertEquals("xterm-256color", lines.get(1), r.toString());
    // the client's stdin is no terminal, so it asks for no size: the default window, set with
    // TIOCSWINSZ
    assertEquals("24 80", lines.get(2), r.toString());
  }

  @Test
  void filesGoUpAndDownWithScp() throws Exception {
    RequiredTools.assume("ssh", Files.isExecutable(SCP), "no scp at /usr/bin/scp");
    byte[] content = new byte[300_000];
    new java.util.Random(7).nextBytes(content);
    Path local = tmp.resolve("up.bin");
    Files.write(local, content);
    Path scratch = stateDir.resolve("rentals").resolve(RENTAL).resolve("scratch");
    // OpenSSH 9's scp speaks SFTP; -O is the legacy SCP protocol
    for (List<String> mode : List.of(List.<String>of(), List.of("-O"))) {
      String name = mode.isEmpty() ? "sftp.bin" : "scp.bin";
      Ran up = scp(mode, local.toString(), "renter@127.0.0.1:" + name);
      assertEquals(0, up.status(), up.toString());
      assertArrayEquals(content, Files.readAllBytes(scratch.resolve(name)));
      Path down = tmp.resolve("down-" + name);
      Ran get = scp(mode, "renter@127.0.0.1:" + name, down.toString());
      assertEquals(0, get.status(), get.toString());
      assertArrayEquals(content, Files.readAllBytes(down));
    }
  }

  @Test
  void localForwardingReachesAServerOnTheWorkloadsLoopback() throws Exception {
    HttpServer http =
        HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 0);
    http.createContext(
        "/",
        ex -> {
          byte[] body = "notebook here".getBytes(StandardCharsets.UTF_8);
          ex.sendResponseHeaders(200, body.length);
          ex.getResponseBody().write(body);
          ex.close();
        });
    http.start();
    int local;
    try (ServerSocket free = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      local = free.getLocalPort();
    }
    Process forward =
        sshProcess(
            List.of(
                "-N",
                "-o",
                "ExitOnForwardFailure=yes",
                "-L",
                local + ":localhost:" + http.getAddress().getPort()),
            null);
    try {
      HttpClient client = HttpClient.newHttpClient();
      String body = null;
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT_S);
      while (body == null && System.nanoTime() < deadline && forward.isAlive()) {
        try {
          body =
              client
                  .send(
                      HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + local + "/"))
                          .timeout(Duration.ofSeconds(5))
                          .build(),
                      HttpResponse.BodyHandlers.ofString())
                  .body();
        } catch (IOException notYet) {
          Thread.onSpinWait(); // the forward is not listening yet: poll until the deadline
        }
      }
      assertEquals("notebook here", body, "through ssh -L");
    } finally {
      forward.destroy();
      http.stop(0);
    }
  }

  @Test
  void aKeyTheRentalDoesNotKnowIsRefused() throws Exception {
    Path other = tmp.resolve("id_other");
    SshClientSupport.writeKey(other);
    Ran r = run(sshCommand(other, knownHosts, List.of(), "true"));
    assertEquals(255, r.status(), r.toString());
    assertTrue(r.err().contains("Permission denied"), r.toString());
  }

  @Test
  void thePinnedHostKeyIsCheckedAndAnotherOneFails() throws Exception {
    assertEquals(0, ssh(List.of(), "true").status(), "pinned with known_hosts, strict checking");
    Path wrong = tmp.resolve("known_hosts_wrong");
    KeyPair other = SecurityUtils.getKeyPairGenerator(SecurityUtils.EDDSA).generateKeyPair();
    Files.writeString(wrong, "tickmark-host " + HostKey.openSshLine(other.getPublic()) + "\n");
    Ran r = run(sshCommand(key, wrong, List.of(), "true"));
    assertEquals(255, r.status(), r.toString());
    assertTrue(r.err().contains("Host key verification failed"), r.toString());
  }

  @Test
  void theServerListensOnLoopbackOnlyAndOnlyStreamsReachIt() throws Exception {
    InetSocketAddress address = agent.sshAddress().orElseThrow();
    assertEquals("127.0.0.1", address.getAddress().getHostAddress());
    List<InetAddress> others = new ArrayList<>();
    for (NetworkInterface nic : Collections.list(NetworkInterface.getNetworkInterfaces()))
      for (InetAddress a : Collections.list(nic.getInetAddresses()))
        if (!a.isLoopbackAddress() && a instanceof Inet4Address) others.add(a);
    for (InetAddress a : others) {
      try (Socket s = new Socket()) {
        s.connect(new InetSocketAddress(a, address.getPort()), 2000);
        throw new AssertionError("the ssh server answers on " + a);
      } catch (IOException expected) {
        // refused: nothing listens there
      }
    }
    // a loopback connection that no stream registered gets no session, even with the right key
    List<String> direct = sshCommand(key, knownHosts, List.of(), "true");
    direct.set(direct.indexOf(String.valueOf(endpoint)), String.valueOf(address.getPort()));
    Ran r = run(direct);
    assertEquals(255, r.status(), r.toString());
  }

  @Test
  void atMostEightStreamsPerRentalAndNoneForARentalThatDoesNotRun() throws Exception {
    List<Socket> renters = new ArrayList<>();
    try {
      for (int i = 0; i < 8; i++) {
        Socket s = new Socket(InetAddress.getLoopbackAddress(), endpoint);
        renters.add(s);
        assertTrue(readLine(s).startsWith("SSH-2.0-"), "stream " + i + " reaches the server");
      }
      assertEquals(8, agent.sshStreams(RENTAL));
      try (Socket ninth = new Socket(InetAddress.getLoopbackAddress(), endpoint)) {
        assertEquals(-1, ninth.getInputStream().read(), "the ninth is refused");
      }
      next(AgentFrame.CloseStream.class, f -> "too_many_streams".equals(f.reason()));
    } finally {
      for (Socket s : renters) s.close();
    }
    awaitTrue(() -> agent.sshStreams(RENTAL) == 0, "the closed streams are gone");

    int nowhere = node.renterEndpoint("rnt_not_here");
    try (Socket s = new Socket(InetAddress.getLoopbackAddress(), nowhere)) {
      assertEquals(-1, s.getInputStream().read());
    }
    next(AgentFrame.CloseStream.class, f -> "rental_not_running".equals(f.reason()));
  }

  @Test
  void sessionsCloseAndTheirProcessesEndWhenTheRentalStops() throws Exception {
    String rental = "rnt_ssh_stop";
    Path k = tmp.resolve("id_stop");
    node.send(
        new AgentFrame.StartRental(
            rental, List.of(0), "img", List.of(), SshClientSupport.writeKey(k), false, null));
    next(AgentFrame.RentalStarted.class, f -> f.rentalId().equals(rental));
    int port = node.renterEndpoint(rental);
    List<String> command = sshCommand(k, knownHosts, List.of("-tt"), "echo pid=$$; exec sleep 600");
    command.set(command.indexOf(String.valueOf(endpoint)), String.valueOf(port));
    Process session =
        new ProcessBuilder(command)
            .redirectErrorStream(true)
            .redirectInput(ProcessBuilder.Redirect.PIPE)
            .start();
    long pid = -1;
    var in = new java.io.BufferedReader(new java.io.InputStreamReader(session.getInputStream()));
    for (String line; pid < 0 && (line = in.readLine()) != null; )
      if (line.strip().startsWith("pid=")) pid = Long.parseLong(line.strip().substring(4));
    assertTrue(pid > 0, "the session's shell said its pid");
    long shell = pid;
    assertTrue(ProcessHandle.of(shell).map(ProcessHandle::isAlive).orElse(false));
    assertEquals(1, agent.sshStreams(rental));
    List<String> background =
        sshCommand(k, knownHosts, List.of(), "nohup sleep 600 >/dev/null 2>&1 & echo $!");
    background.set(background.indexOf(String.valueOf(endpoint)), String.valueOf(port));
    Ran started = run(background);
    assertEquals(0, started.status(), started.toString());
    long left = Long.parseLong(started.out().strip());
    assertTrue(
        ProcessHandle.of(left).map(ProcessHandle::isAlive).orElse(false),
        "what a command leaves in the background keeps running while the rental runs");

    node.send(new AgentFrame.StopRental(rental, false));

    assertTrue(session.waitFor(WAIT_S, TimeUnit.SECONDS), "the ssh client was disconnected");
    awaitTrue(
        () -> ProcessHandle.of(shell).map(p -> !p.isAlive()).orElse(true), "the shell was ended");
    awaitTrue(() -> agent.sshStreams(rental) == 0, "its stream closed");
    awaitTrue(
        () -> ProcessHandle.of(left).map(p -> !p.isAlive()).orElse(true),
        "what a session left in the background was ended with the rental");
    next(AgentFrame.RentalStopped.class, f -> f.rentalId().equals(rental));
  }

  // ---- helpers

  private List<String> sshCommand(Path identity, Path hosts, List<String> options, String command) {
    List<String> argv =
        new ArrayList<>(
            List.of(
                SSH.toString(),
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
                "UserKnownHostsFile=" + hosts,
                "-o",
                "GlobalKnownHostsFile=/dev/null",
                "-o",
                "HostKeyAlias=tickmark-host",
                "-o",
                "ConnectTimeout=15",
                "-o",
                "LogLevel=ERROR",
                "-p",
                String.valueOf(endpoint)));
    argv.addAll(options);
    argv.add("renter@127.0.0.1");
    if (command != null) argv.add(command);
    return argv;
  }

  private Ran ssh(List<String> options, String command) throws Exception {
    return run(sshCommand(key, knownHosts, options, command));
  }

  private Process sshProcess(List<String> options, String command) throws IOException {
    return new ProcessBuilder(sshCommand(key, knownHosts, options, command))
        .redirectOutput(ProcessBuilder.Redirect.DISCARD)
        .redirectError(ProcessBuilder.Redirect.DISCARD)
        .start();
  }

  private Ran scp(List<String> mode, String from, String to) throws Exception {
    List<String> argv = new ArrayList<>(List.of(SCP.toString()));
    argv.addAll(SshClientSupport.strictOptions(key, knownHosts));
    argv.addAll(List.of("-P", String.valueOf(endpoint)));
    argv.addAll(mode);
    argv.add(from);
    argv.add(to);
    return run(argv);
  }

  private static Ran run(List<String> argv) throws Exception {
    return SshClientSupport.run(argv, WAIT_S * 3);
  }

  private <T extends AgentFrame> T next(Class<T> type, java.util.function.Predicate<T> which)
      throws InterruptedException {
    return SshClientSupport.next(node, type, which, WAIT_S);
  }

  private static void awaitTrue(BooleanSupplier condition, String what)
      throws InterruptedException {
    Eventually.until(WAIT_S, () -> what, condition);
  }

  private static String readLine(Socket s) throws IOException {
    s.setSoTimeout((int) TimeUnit.SECONDS.toMillis(WAIT_S));
    InputStream in = s.getInputStream();
    StringBuilder sb = new StringBuilder();
    for (int c; (c = in.read()) >= 0 && c != '\n'; ) sb.append((char) c);
    return sb.toString();
  }
}
