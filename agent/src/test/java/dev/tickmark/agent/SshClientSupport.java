package dev.tickmark.agent;

import dev.tickmark.agent.ssh.HostKey;
import dev.tickmark.wire.AgentFrame;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.KeyPair;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;
import org.apache.sshd.common.config.keys.writer.openssh.OpenSSHKeyPairResourceWriter;
import org.apache.sshd.common.util.security.SecurityUtils;

/** What the agent's SSH tests share: running the OpenSSH client, renters' keys, node frames. */
final class SshClientSupport {
  private SshClientSupport() {}

  /** How an ssh or scp run ended: its status and both outputs. */
  record Ran(int status, String out, String err) {
    List<String> lines() {
      return out.lines().map(String::strip).toList();
    }
  }

  /**
   * What every ssh and scp of these tests passes: no config file, only this key, no prompt, the
   * host key checked strictly against {@code knownHosts} under the alias {@code tickmark-host}.
   */
  static List<String> strictOptions(Path key, Path knownHosts) {
    return List.of(
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
        "UserKnownHostsFile=" + knownHosts,
        "-o",
        "GlobalKnownHostsFile=/dev/null",
        "-o",
        "HostKeyAlias=tickmark-host");
  }

  /** Runs {@code argv} with an empty stdin and TERM set; fails past {@code timeoutS}. */
  static Ran run(List<String> argv, long timeoutS) throws Exception {
    ProcessBuilder pb =
        new ProcessBuilder(argv)
            .redirectInput(ProcessBuilder.Redirect.from(new java.io.File("/dev/null")));
    pb.environment().put("TERM", "xterm-256color");
    Process p = pb.start();
    var err = new ByteArrayOutputStream();
    Thread errReader =
        new Thread(
            () -> {
              try {
                p.getErrorStream().transferTo(err);
              } catch (IOException e) {
                // ended
              }
            });
    errReader.start();
    String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    if (!p.waitFor(timeoutS, TimeUnit.SECONDS)) {
      p.destroyForcibly();
      throw new AssertionError("still running: " + argv);
    }
    errReader.join();
    return new Ran(p.exitValue(), out, err.toString(StandardCharsets.UTF_8));
  }

  /** Writes a new Ed25519 key pair (OpenSSH format, 0600) and returns the public key line. */
  static String writeKey(Path file) throws Exception {
    KeyPair kp = SecurityUtils.getKeyPairGenerator(SecurityUtils.EDDSA).generateKeyPair();
    var out = new ByteArrayOutputStream();
    OpenSSHKeyPairResourceWriter.INSTANCE.writePrivateKey(kp, "renter", null, out);
    Files.write(file, out.toByteArray());
    Files.setPosixFilePermissions(file, PosixFilePermissions.fromString("rw-------"));
    return HostKey.openSshLine(kp.getPublic()) + " renter@test";
  }

  /** The first frame of {@code type} the node got that {@code which} accepts, within the wait. */
  static <T extends AgentFrame> T next(
      ScriptedNode node, Class<T> type, Predicate<T> which, long waitS)
      throws InterruptedException {
    // the frames are only looked at, never drained
    return Eventually.found(
        waitS,
        () -> "a matching " + type.getSimpleName(),
        () -> node.framesOf(type).stream().filter(which).findFirst());
  }

  /** A loopback port free a moment ago, for {@code ssh -L} to listen on. */
  static int freeLoopbackPort() throws IOException {
    try (java.net.ServerSocket free =
        new java.net.ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
      return free.getLocalPort();
    }
  }

  /**
   * {@code ssh} with {@code -N -o ExitOnForwardFailure=yes -L local:localhost:inside} added by
   * {@code command}, started with its output discarded.
   */
  static Process forward(
      java.util.function.Function<List<String>, List<String>> command, int local, int inside)
      throws IOException {
    return new ProcessBuilder(
            command.apply(
                List.of(
                    "-N", "-o", "ExitOnForwardFailure=yes", "-L", local + ":localhost:" + inside)))
        .redirectOutput(ProcessBuilder.Redirect.DISCARD)
        .redirectError(ProcessBuilder.Redirect.DISCARD)
        .start();
  }

  /**
   * Connects to the forward at {@code local} (polling until ssh listens there, while it runs), says
   * "hello", and returns the first non-empty line that comes back; null if none within {@code
   * waitS}.
   */
  static String exchange(int local, Process forward, long waitS) {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(waitS);
    while (System.nanoTime() < deadline && forward.isAlive()) {
      try (java.net.Socket s =
          new java.net.Socket(java.net.InetAddress.getLoopbackAddress(), local)) {
        s.setSoTimeout((int) TimeUnit.SECONDS.toMillis(waitS));
        s.getOutputStream().write("hello\n".getBytes(StandardCharsets.UTF_8));
        s.getOutputStream().flush();
        StringBuilder line = new StringBuilder();
        for (int c; (c = s.getInputStream().read()) >= 0 && c != '\n'; ) line.append((char) c);
        if (line.length() > 0) return line.toString();
      } catch (IOException notYet) {
        Thread.onSpinWait(); // the forward is not listening yet: poll until the deadline
      }
    }
    return null;
  }
}
