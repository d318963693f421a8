package dev.tickmark.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;

import com.sun.net.httpserver.HttpServer;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code tickmark ssh} run inside another program (as the tests run the CLI, in their JVM) gives
 * ssh the CLI's own input and output, never the JVM's: that stdin and stdout are the test runner's
 * channel, which ssh would read from and make non-blocking (surefire then failed the build with
 * "std/in stream corrupted"). A stand-in for ssh ({@code TICKMARK_SSH}) echoes its input; the API
 * is a stub that shows a running rental.
 */
class SshCommandStreamsTest {
  static final String RENTAL = "rnt_0123456789abcdef01234567";

  @TempDir Path temp;
  HttpServer server;

  @BeforeEach
  void start() throws Exception {
    server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
    server.createContext(
        "/v1/rentals/" + RENTAL,
        exchange -> {
          byte[] body =
              ("{\"id\":\""
                      + RENTAL
                      + "\",\"status\":\"running\","
                      + "\"ssh_host_key\":\"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl\"}")
                  .getBytes(StandardCharsets.UTF_8);
          exchange.getResponseHeaders().add("Content-Type", "application/json");
          exchange.sendResponseHeaders(200, body.length);
          exchange.getResponseBody().write(body);
          exchange.close();
        });
    server.start();
  }

  @AfterEach
  void stop() {
    server.stop(0);
  }

  @Test
  @org.junit.jupiter.api.Timeout(60) // given the runner's stdin, the stand-in would wait forever
  void sshGetsTheClisInputAndOutputAndItsStatusIsTheClis() throws Exception {
    Path ssh = temp.resolve("ssh");
    Files.writeString(
        ssh, "#!/bin/sh\necho \"ssh read: $(cat)\"\necho \"ssh complains\" >&2\nexit 7\n");
    Files.setPosixFilePermissions(ssh, PosixFilePermissions.fromString("rwx------"));
    CliRunner.Result ran =
        new CliRunner(temp.resolve("cli.json"))
            .withEnv("TICKMARK_URL", "http://127.0.0.1:" + server.getAddress().getPort())
            .withEnv(
                "TICKMARK_API_KEY",
                "tmk_0123456789abcdef01234567_0123456789abcdef0123456789abcdef01234567")
            .withEnv("TICKMARK_SSH", ssh.toString())
            .runWithInput("hello from the renter\n", "ssh", RENTAL, "--", "true");
    assertEquals(7, ran.exit(), ran.toString());
    assertEquals("ssh read: hello from the renter\n", ran.out(), ran.toString());
    assertEquals("ssh complains\n", ran.err(), ran.toString());
  }
}
