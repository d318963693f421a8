package dev.tickmark.agent.ssh;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.tickmark.agent.RequiredTools;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.KeyPair;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.apache.sshd.common.config.keys.writer.openssh.OpenSSHKeyPairResourceWriter;
import org.apache.sshd.common.util.security.SecurityUtils;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@link AgentSshServer} on its own, with the real OpenSSH client: an in-test relay stands in for a
 * stream (it registers its loopback port as the rental's, then connects), so the idle timeout and
 * the docker runtime's sessions can be seen without an agent or a Docker daemon.
 */
class AgentSshServerTest {
  private static final Path SSH = Path.of("/usr/bin/ssh");

  @TempDir Path tmp;
  private final RentalRegistry registry = new RentalRegistry();
  private AgentSshServer server;
  private ServerSocket relay;
  private Path key;
  private String publicKey;

  @BeforeEach
  void setUp() throws Exception {
    RequiredTools.assume(
        "ssh",
        Files.isExecutable(SSH),
        "no OpenSSH client at /usr/bin/ssh: the ssh tests are skipped");
    KeyPair kp = SecurityUtils.getKeyPairGenerator(SecurityUtils.EDDSA).generateKeyPair();
    var out = new ByteArrayOutputStream();
    OpenSSHKeyPairResourceWriter.INSTANCE.writePrivateKey(kp, "renter", null, out);
    key = tmp.resolve("id");
    Files.write(key, out.toByteArray());
    Files.setPosixFilePermissions(key, PosixFilePermissions.fromString("rw-------"));
    publicKey = HostKey.openSshLine(kp.getPublic());
  }

  @AfterEach
  void tearDown() throws IOException {
    if (relay != null) relay.close();
    if (server != null) server.close();
  }

  @Test
  void anIdleSessionIsClosedAfterTheIdleTimeout() throws Exception {
    start(Duration.ofSeconds(2), new Workspace.Local(scratch(), Map.of("PATH", "/usr/bin:/bin")));
    long t0 = System.nanoTime();
    Result r = ssh(List.of(), "sleep 60");
    long seconds = TimeUnit.NANOSECONDS.toSeconds(System.nanoTime() - t0);
    assertEquals(255, r.status, r.toString());
    assertTrue(seconds < 30, "closed after " + seconds + " s");
  }

  @Test
  void anInteractiveShellOnATerminalReadsWhatTheClientTypes() throws Exception {
    Path scratch = scratch();
    start(
        AgentSshServer.DEFAULT_IDLE_TIMEOUT,
        new Workspace.Local(scratch, Map.of("PATH", "/usr/bin:/bin")));
    Path typed = tmp.resolve("typed");
    Files.writeString(typed, "echo $((6*7)) in $(pwd)\nexit 5\n");
    Result r = ssh(List.of("-tt"), null, typed);
    assertEquals(5, r.status, r.toString());
    assertTrue(r.out.contains("42 in " + scratch), r.toString());
  }

  @Test
  void dockerSessionsAreDockerExecIntoTheContainer() throws Exception {
    Path args = tmp.resolve("docker-args");
    Path docker = tmp.resolve("docker");
    // a stand-in for the docker tool: records its arguments, runs the command itself
    Files.writeString(
        docker,
        "#!/bin/sh\nprintf '%s\\n' \"$@\" > '"
            + args
            + "'\nfor last; do :; done\nexec sh -c \"$last\"\n");
    Files.setPosixFilePermissions(docker, PosixFilePermissions.fromString("rwx------"));
    start(
        AgentSshServer.DEFAULT_IDLE_TIMEOUT,
        new Workspace.Container(docker.toString(), "tickmark-r1", scratch()));

    Result exec = ssh(List.of(), "echo from-the-container; exit 3");
    assertEquals(3, exec.status, exec.toString());
    assertEquals("from-the-container", exec.out.strip());
    assertEquals(
        List.of(
            "exec",
            "-i",
            "-w",
            "/workspace",
            "tickmark-r1",
            "sh",
            "-c",
            "echo from-the-container; exit 3"),
        Files.readAllLines(args));

    Result tty = ssh(List.of("-tt"), "tty");
    assertTrue(tty.out.strip().startsWith("/dev/pts/"), tty.toString());
    assertEquals(
        List.of(
            "exec",
            "-i",
            "-t",
            "-w",
            "/workspace",
            "-e",
            "TERM=xterm-256color",
            "tickmark-r1",
            "sh",
            "-c",
            "tty"),
        Files.readAllLines(args));
  }

  // ---- helpers

  private Path scratch() throws IOException {
    return Files.createDirectories(tmp.resolve("scratch"));
  }

  private void start(Duration idle, Workspace workspace) throws Exception {
    server = AgentSshServer.start(tmp, registry, idle);
    registry.running("r1", publicKey, workspace);
    relay = new ServerSocket(0, 10, InetAddress.getLoopbackAddress());
    Thread t = new Thread(this::relayLoop, "test-relay");
    t.setDaemon(true);
    t.start();
    Files.writeString(tmp.resolve("known_hosts"), "agent " + server.hostKey() + "\n");
  }

  /** What a stream does, minus the websocket: register the port, connect, copy both ways. */
  private void relayLoop() {
    while (!relay.isClosed()) {
      try {
        Socket renter = relay.accept();
        Socket upstream = new Socket();
        upstream.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0));
        registry.bindPort(upstream.getLocalPort(), "r1");
        upstream.connect(server.address());
        pipe(renter.getInputStream(), upstream.getOutputStream(), upstream);
        pipe(upstream.getInputStream(), renter.getOutputStream(), renter);
      } catch (IOException e) {
        return;
      }
    }
  }

  private static void pipe(InputStream in, OutputStream out, Socket closeAtEnd) {
    Thread t =
        new Thread(
            () -> {
              try (closeAtEnd) {
                in.transferTo(out);
              } catch (IOException e) {
                // either side closed
              }
            });
    t.setDaemon(true);
    t.start();
  }

  private record Result(int status, String out, String err) {}

  private Result ssh(List<String> options, String command) throws Exception {
    return ssh(options, command, Path.of("/dev/null"));
  }

  /** {@code command} null: the shell; {@code input}: the client's stdin. */
  private Result ssh(List<String> options, String command, Path input) throws Exception {
    List<String> argv =
        new ArrayList<>(
            List.of(
                SSH.toString(),
                "-F",
                "/dev/null",
                "-i",
                key.toString(),
                "-o",
                "IdentitiesOnly=yes",
                "-o",
                "BatchMode=yes",
                "-o",
                "StrictHostKeyChecking=yes",
                "-o",
                "UserKnownHostsFile=" + tmp.resolve("known_hosts"),
                "-o",
                "GlobalKnownHostsFile=/dev/null",
                "-o",
                "HostKeyAlias=agent",
                "-o",
                "LogLevel=ERROR",
                "-p",
                String.valueOf(relay.getLocalPort())));
    argv.addAll(options);
    argv.add("anyone@127.0.0.1");
    if (command != null) argv.add(command);
    ProcessBuilder pb =
        new ProcessBuilder(argv)
            .redirectInput(ProcessBuilder.Redirect.from(input.toFile()))
            .redirectError(tmp.resolve("ssh-err").toFile());
    pb.environment().put("TERM", "xterm-256color");
    Process p = pb.start();
    String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    if (!p.waitFor(60, TimeUnit.SECONDS)) {
      p.destroyForcibly();
      throw new AssertionError("ssh still running");
    }
    return new Result(p.exitValue(), out, Files.readString(tmp.resolve("ssh-err")));
  }
}
