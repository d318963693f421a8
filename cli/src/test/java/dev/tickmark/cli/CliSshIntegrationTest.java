package dev.tickmark.cli;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * SSH into a rental with the machine's real OpenSSH client, through {@code tickmark connect} as its
 * ProxyCommand, a real node on PostgreSQL and the real agent (process runtime) with its embedded
 * SSH server: a command's output and exit status, a pty, a file up and down with scp, a port
 * forwarded to an HTTP server, the host key pinned (another key fails), an unknown client key
 * refused, another renter's connect 404, and nothing once the rental has ended. Skipped, saying
 * why, on a machine without OpenSSH's client; CI installs it ({@code .ci/run}).
 */
class CliSshIntegrationTest {
  static final Duration WAIT = TestMarket.WAIT;

  static TestMarket market;
  static TestMarket.Customer renter;
  static TestMarket.Customer stranger;
  static String rentalId;
  static String hostKey;
  static Path key;
  static Path otherKey;
  static Path knownHosts;
  @TempDir static Path temp;

  @BeforeAll
  static void start() throws Exception {
    boolean openSsh =
        Files.isExecutable(Path.of("/usr/bin/ssh")) && Files.isExecutable(Path.of("/usr/bin/scp"));
    String why = "needs OpenSSH's client (/usr/bin/ssh, scp): apt-get install openssh-client";
    // CI installs it and says so: there a missing client is a failure, not a skip
    if (System.getenv().getOrDefault("TICKMARK_TESTS_REQUIRE", "").contains("ssh"))
      assertTrue(openSsh, why);
    Assumptions.assumeTrue(openSsh, why);
    key = keygen("renter");
    otherKey = keygen("other");
    market = TestMarket.start("cli_ssh");
    TestMarket.Customer provider = market.signUp("SSH provider");
    market.listedHost(provider, "eu-nl", "2.49", temp.resolve("agent"));
    renter = market.signUp("SSH renter");
    stranger = market.signUp("Stranger");
    deposit(renter, "20", "ssh-1");
    rentalId = launch(Files.readString(Path.of(key + ".pub")).strip());
    JsonNode rental = market.call("GET", "/v1/rentals/" + rentalId, renter.apiKey(), null);
    hostKey = rental.path("ssh_host_key").asText(null);
    assertTrue(
        hostKey != null && hostKey.startsWith("ssh-ed25519 "),
        "a running rental shows its host's SSH key: " + rental);
    knownHosts = temp.resolve("known_hosts");
    Files.writeString(knownHosts, rentalId + " " + hostKey + "\n");
  }

  @AfterAll
  static void stop() throws Exception {
    if (market != null) market.close();
  }

  @Test
  void runsACommandWithItsOutputAndExitStatusInTheRentalsFolder() throws Exception {
    Ran ran = ssh(List.of(), "echo hello from $TICKMARK_RENTAL_ID; pwd; exit 3");
    assertEquals(3, ran.exit(), ran.toString());
    assertTrue(ran.out().contains("hello from " + rentalId), ran.toString());
    assertTrue(ran.out().contains("/rentals/" + rentalId + "/"), "the rental's folder: " + ran);
  }

  @Test
  void givesAPseudoTerminalWhenAsked() throws Exception {
    Ran ran = ssh(List.of("-tt"), "tty");
    assertEquals(0, ran.exit(), ran.toString());
    assertTrue(ran.out().strip().startsWith("/dev/pts/"), "tty names a device: " + ran);
    Ran plain = ssh(List.of("-T"), "tty");
    assertTrue(plain.out().contains("not a tty"), "no pty unless asked: " + plain);
  }

  @Test
  void copiesAFileUpAndDownWithScp() throws Exception {
    byte[] data = new byte[3 * 1024 * 1024 + 17];
    new Random(7).nextBytes(data);
    Path up = temp.resolve("up.bin");
    Files.write(up, data);
    Ran put = run(scpCommand(up.toString(), "tickmark@" + rentalId + ":copy.bin"));
    assertEquals(0, put.exit(), put.toString());
    Path down = temp.resolve("down.bin");
    Ran get = run(scpCommand("tickmark@" + rentalId + ":copy.bin", down.toString()));
    assertEquals(0, get.exit(), get.toString());
    assertArrayEquals(data, Files.readAllBytes(down));
  }

  @Test
  void forwardsALocalPortToAServerReachableFromTheRental() throws Exception {
    HttpServer server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
    server.createContext(
        "/",
        exchange -> {
          byte[] body = "notebook".getBytes(StandardCharsets.UTF_8);
          exchange.sendResponseHeaders(200, body.length);
          exchange.getResponseBody().write(body);
          exchange.close();
        });
    server.start();
    int local = freePort();
    List<String> command = sshCommand(key);
    command.addAll(1, List.of("-N", "-L", local + ":localhost:" + server.getAddress().getPort()));
    Process tunnel = start(command);
    try {
      HttpClient http = HttpClient.newHttpClient();
      String[] body = {null};
      Eventually.eventually(
          WAIT,
          () -> {
            try {
              body[0] =
                  http.send(
                          HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + local + "/"))
                              .timeout(Duration.ofSeconds(5))
                              .build(),
                          HttpResponse.BodyHandlers.ofString())
                      .body();
            } catch (IOException e) {
              throw new AssertionError("the tunnel is not up yet: " + e);
            } catch (InterruptedException e) {
              Thread.currentThread().interrupt();
              throw new AssertionError(e);
            }
          });
      assertEquals("notebook", body[0]);
    } finally {
      tunnel.destroy();
      server.stop(0);
    }
  }

  @Test
  void refusesAHostKeyOtherThanThePinnedOneAndAClientKeyTheRentalDoesNotKnow() throws Exception {
    Path wrongHosts = temp.resolve("wrong_known_hosts");
    Files.writeString(
        wrongHosts, rentalId + " " + Files.readString(Path.of(otherKey + ".pub")).strip() + "\n");
    List<String> command = sshCommand(key);
    command.set(
        command.indexOf("UserKnownHostsFile=" + knownHosts), "UserKnownHostsFile=" + wrongHosts);
    command.add("true");
    Ran wrongHost = run(command);
    assertEquals(255, wrongHost.exit(), wrongHost.toString());
    assertTrue(
        wrongHost.out().contains("HOST IDENTIFICATION HAS CHANGED")
            || wrongHost.out().contains("Host key verification failed"),
        wrongHost.toString());

    List<String> stranger = sshCommand(otherKey);
    stranger.add("true");
    Ran refused = run(stranger);
    assertEquals(255, refused.exit(), refused.toString());
    assertTrue(refused.out().contains("Permission denied"), refused.toString());
  }

  /**
   * A launch that names no key gets the account's registered SSH keys, read with its API key
   * (ApiKeys.principalWithSshKeys): the registered key gets a shell, another key does not.
   */
  @Test
  void aLaunchThatNamesNoKeyLetsInTheAccountsRegisteredKeys() throws Exception {
    Path registered = keygen("registered");
    market.call(
        "POST",
        "/v1/account/ssh-keys",
        renter.apiKey(),
        "{\"name\":\"laptop\",\"public_key\":"
            + TestMarket.quote(Files.readString(Path.of(registered + ".pub")).strip())
            + "}");
    String rental = launch(null);
    try {
      Files.writeString(
          knownHosts, rental + " " + hostKey + "\n", java.nio.file.StandardOpenOption.APPEND);
      Ran in = run(sshCommand(registered, rental, "echo in with the account key"));
      assertEquals(0, in.exit(), in.toString());
      assertTrue(in.out().contains("in with the account key"), in.toString());
      Ran refused = run(sshCommand(otherKey, rental, "true"));
      assertEquals(255, refused.exit(), refused.toString());
      assertTrue(refused.out().contains("Permission denied"), refused.toString());
    } finally {
      market.call("POST", "/v1/rentals/" + rental + "/stop", renter.apiKey(), "{}");
    }
  }

  @Test
  void anotherRentersConnectIsNotFoundAndAnEndedRentalHasNothingToConnectTo() throws Exception {
    CliRunner.Result other =
        new CliRunner(temp.resolve("stranger.json"))
            .withEnv("TICKMARK_URL", market.url())
            .withEnv("TICKMARK_API_KEY", stranger.apiKey())
            .run("connect", rentalId);
    assertEquals(Cli.EXIT_API_ERROR, other.exit(), other.toString());
    assertTrue(other.err().contains("not_found"), other.toString());

    String ended = launch(Files.readString(Path.of(key + ".pub")).strip());
    Files.writeString(
        knownHosts, ended + " " + hostKey + "\n", java.nio.file.StandardOpenOption.APPEND);
    Process open = start(sshCommand(key, ended, "sleep 600"));
    try {
      // the session is up once the shell runs: the rental's stop must end it
      Eventually.eventually(
          WAIT,
          () ->
              assertTrue(
                  sshOk(ended, "pgrep -f 'sleep 600' >/dev/null"), "the first session runs"));
      market.call("POST", "/v1/rentals/" + ended + "/stop", renter.apiKey(), "{}");
      assertTrue(
          open.waitFor(WAIT.toSeconds(), TimeUnit.SECONDS), "the session ends with the rental");
      assertNotEquals(0, open.exitValue());
    } finally {
      open.destroyForcibly();
    }
    Eventually.eventually(
        WAIT,
        () -> {
          CliRunner.Result after = renterCli().run("connect", ended);
          assertEquals(Cli.EXIT_API_ERROR, after.exit(), after.toString());
          assertTrue(after.err().contains("not_running"), after.toString());
        });
  }

  @Test
  void tickmarkSshPinsTheHostKeyItselfAndReturnsTheCommandsStatus() {
    CliRunner.Result ran =
        renterCli().run("ssh", rentalId, "-i", key.toString(), "--", "exit", "7");
    assertEquals(7, ran.exit(), ran.toString());
  }

  @Test
  void relaysAtMostEightStreamsPerRentalAndANewOneOnceOneCloses() throws Exception {
    String rental = launch(Files.readString(Path.of(key + ".pub")).strip());
    List<java.net.http.WebSocket> open = new ArrayList<>();
    try {
      for (int i = 0; i < 8; i++) {
        RawStream stream = RawStream.open(rental);
        assertTrue(
            stream.firstBytes().startsWith("SSH-2.0-"),
            "each stream reaches the SSH server: " + stream.firstBytes());
        open.add(stream.socket());
      }
      java.net.http.WebSocketHandshakeException refused =
          org.junit.jupiter.api.Assertions.assertThrows(
              java.net.http.WebSocketHandshakeException.class, () -> RawStream.open(rental));
      assertEquals(429, refused.getResponse().statusCode());
      assertTrue(
          String.valueOf(refused.getResponse().body()).contains("too_many_streams"),
          String.valueOf(refused.getResponse().body()));
      open.remove(0).sendClose(java.net.http.WebSocket.NORMAL_CLOSURE, "").join();
      Eventually.eventually(
          WAIT,
          () -> {
            try {
              open.add(RawStream.open(rental, Duration.ofSeconds(5)).socket());
            } catch (Exception e) {
              throw new AssertionError("a ninth stream once one closed: " + e);
            }
          });
    } finally {
      open.forEach(java.net.http.WebSocket::abort);
      market.call("POST", "/v1/rentals/" + rental + "/stop", renter.apiKey(), "{}");
    }
  }

  /** {@code /v1/rentals/{id}/connect} without ssh: the websocket and the first bytes it carries. */
  record RawStream(java.net.http.WebSocket socket, String firstBytes) {
    static RawStream open(String rental) throws Exception {
      return open(rental, WAIT);
    }

    static RawStream open(String rental, Duration within) throws Exception {
      java.util.concurrent.CompletableFuture<String> first =
          new java.util.concurrent.CompletableFuture<>();
      java.net.http.WebSocket socket;
      try {
        socket =
            HttpClient.newHttpClient()
                .newWebSocketBuilder()
                .header("Authorization", "Bearer " + renter.apiKey())
                .buildAsync(
                    URI.create(
                        market.url().replace("http", "ws") + "/v1/rentals/" + rental + "/connect"),
                    new java.net.http.WebSocket.Listener() {
                      @Override
                      public java.util.concurrent.CompletionStage<?> onBinary(
                          java.net.http.WebSocket ws, java.nio.ByteBuffer data, boolean last) {
                        first.complete(StandardCharsets.US_ASCII.decode(data).toString());
                        return null;
                      }

                      // A stream the agent refused (it had not yet let go of the one just
                      // closed) is closed by the node: fail at once, so that a retry is a try,
                      // not a wait for bytes that cannot come
                      @Override
                      public java.util.concurrent.CompletionStage<?> onClose(
                          java.net.http.WebSocket ws, int status, String reason) {
                        first.completeExceptionally(
                            new IllegalStateException(
                                "closed before any byte: " + status + " " + reason));
                        return null;
                      }

                      @Override
                      public void onError(java.net.http.WebSocket ws, Throwable error) {
                        first.completeExceptionally(error);
                      }
                    })
                .get(within.toSeconds(), TimeUnit.SECONDS);
      } catch (java.util.concurrent.ExecutionException e) {
        if (e.getCause() instanceof Exception cause) throw cause;
        throw e;
      }
      try {
        return new RawStream(socket, first.get(within.toSeconds(), TimeUnit.SECONDS));
      } catch (Exception e) {
        socket.abort();
        throw e;
      }
    }
  }

  // ---- helpers

  record Ran(int exit, String out) {}

  static CliRunner renterCli() {
    return new CliRunner(temp.resolve("renter.json"))
        .withEnv("TICKMARK_URL", market.url())
        .withEnv("TICKMARK_API_KEY", renter.apiKey())
        .withEnv("TICKMARK_CONFIG", temp.resolve("renter-config/config.json").toString());
  }

  static void deposit(TestMarket.Customer customer, String amount, String reference) {
    market.call(
        "POST",
        "/ops/accounts/" + customer.id() + "/deposits",
        TestMarket.OPERATOR_TOKEN,
        "{\"amount\":\"" + amount + "\",\"reference\":\"" + reference + "\"}");
  }

  /** A running rental of the renter's; {@code publicKey} null: the launch names no key. */
  static String launch(String publicKey) throws Exception {
    JsonNode launched =
        market.call(
            "POST",
            "/v1/rentals",
            renter.apiKey(),
            "{\"gpu\":\"h100-80gb\",\"region\":\"eu-nl\",\"max_price_per_gpu_hour\":\"3.00\","
                + "\"image\":\"ubuntu:24.04\""
                + (publicKey == null ? "" : ",\"ssh_public_key\":" + TestMarket.quote(publicKey))
                + "}");
    String id = launched.get("rental").get("id").asText();
    Eventually.eventually(
        WAIT,
        () ->
            assertEquals(
                "running",
                market
                    .call("GET", "/v1/rentals/" + id, renter.apiKey(), null)
                    .get("status")
                    .asText()));
    return id;
  }

  static Path keygen(String name) throws Exception {
    Path file = temp.resolve(name);
    Ran made =
        run(
            List.of(
                "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", file.toString()));
    assertEquals(0, made.exit(), made.toString());
    return file;
  }

  /** ssh to the rental with {@code tickmark connect} as its proxy and the host key pinned. */
  static List<String> sshCommand(Path identity) {
    return sshCommand(identity, rentalId, null);
  }

  static List<String> sshCommand(Path identity, String rental, String remote) {
    List<String> command = new ArrayList<>();
    command.add("ssh");
    command.addAll(common(identity, rental));
    command.add("tickmark@" + rental);
    if (remote != null) command.add(remote);
    return command;
  }

  static List<String> scpCommand(String from, String to) {
    List<String> command = new ArrayList<>();
    command.add("scp");
    command.addAll(common(key, rentalId));
    command.add(from);
    command.add(to);
    return command;
  }

  private static List<String> common(Path identity, String rental) {
    return new ArrayList<>(
        List.of(
            "-o",
            "ProxyCommand=" + SshCommand.proxyCommand(Map.of(), rental),
            "-o",
            "HostKeyAlias=" + rental,
            "-o",
            "UserKnownHostsFile=" + knownHosts,
            "-o",
            "GlobalKnownHostsFile=/dev/null",
            "-o",
            "StrictHostKeyChecking=yes",
            "-o",
            "IdentitiesOnly=yes",
            "-o",
            "BatchMode=yes",
            "-o",
            "ConnectTimeout=20",
            "-i",
            identity.toString()));
  }

  static Ran ssh(List<String> options, String remote) throws Exception {
    List<String> command = sshCommand(key);
    command.addAll(1, options);
    command.add(remote);
    return run(command);
  }

  static boolean sshOk(String rental, String remote) {
    try {
      return run(sshCommand(key, rental, remote)).exit() == 0;
    } catch (Exception e) {
      return false;
    }
  }

  /**
   * Starts a program with the renter's credentials in its environment (ssh passes them to its
   * proxy, {@code tickmark connect}), stdin empty, stderr joined to stdout.
   */
  static Process start(List<String> command) throws IOException {
    ProcessBuilder builder = new ProcessBuilder(command).redirectErrorStream(true);
    Map<String, String> env = builder.environment();
    env.put("TICKMARK_URL", market == null ? "" : market.url());
    env.put("TICKMARK_API_KEY", renter == null ? "" : renter.apiKey());
    env.put("TICKMARK_CONFIG", temp.resolve("proxy-config.json").toString());
    builder.redirectInput(ProcessBuilder.Redirect.from(new java.io.File("/dev/null")));
    return builder.start();
  }

  static Ran run(List<String> command) throws Exception {
    Process process = start(command);
    byte[] out = process.getInputStream().readAllBytes();
    if (!process.waitFor(WAIT.toSeconds() * 2, TimeUnit.SECONDS)) {
      process.destroyForcibly();
      throw new AssertionError(
          command + " did not finish: " + new String(out, StandardCharsets.UTF_8));
    }
    return new Ran(process.exitValue(), new String(out, StandardCharsets.UTF_8));
  }

  static int freePort() throws IOException {
    try (ServerSocket s = new ServerSocket(0)) {
      return s.getLocalPort();
    }
  }
}
