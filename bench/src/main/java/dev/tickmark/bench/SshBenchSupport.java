package dev.tickmark.bench;

import com.fasterxml.jackson.databind.JsonNode;
import dev.tickmark.agent.Agent;
import dev.tickmark.agent.AgentConfig;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.WebSocket;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;

/**
 * What {@link RelayBenchmark} and {@link SshSessionsBenchmark} share: keys, the OpenSSH client's
 * options (host key pinned by {@code HostKeyAlias}, as {@code tickmark ssh} does), the two ways ssh
 * reaches the rental's SSH server (through the engine with {@code tickmark connect}, or straight to
 * the agent's loopback port with {@code socat}: the baseline), real agents listed on a node, and
 * rentals launched and running.
 */
final class SshBenchSupport {
  private SshBenchSupport() {}

  /** A finished program: exit status, stdout and stderr joined, and how long it ran. */
  record Ran(int exit, String out, long nanos) {
    double seconds() {
      return nanos / 1e9;
    }
  }

  static Path keygen(Path dir, String name) throws Exception {
    Path file = dir.resolve(name);
    Ran made =
        run(
            List.of(
                "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", file.toString()),
            Map.of(),
            60);
    if (made.exit() != 0) throw new IllegalStateException("ssh-keygen failed: " + made);
    return file;
  }

  static Ran run(List<String> command, Map<String, String> env, int timeoutSeconds)
      throws Exception {
    long t0 = System.nanoTime();
    Process p = start(command, env);
    byte[] out = p.getInputStream().readAllBytes();
    if (!p.waitFor(timeoutSeconds, TimeUnit.SECONDS)) {
      p.destroyForcibly();
      throw new IllegalStateException(command.get(0) + " did not finish in " + timeoutSeconds);
    }
    return new Ran(p.exitValue(), new String(out, StandardCharsets.UTF_8), System.nanoTime() - t0);
  }

  /** stdin empty, stderr joined to stdout. */
  static Process start(List<String> command, Map<String, String> env) throws IOException {
    ProcessBuilder b = new ProcessBuilder(command).redirectErrorStream(true);
    b.environment().putAll(env);
    b.redirectInput(ProcessBuilder.Redirect.from(new java.io.File("/dev/null")));
    return b.start();
  }

  /** The environment {@code tickmark connect} reads (ssh hands its own to its ProxyCommand). */
  static Map<String, String> renterEnv(String url, String apiKey, Path dir) {
    return Map.of(
        "TICKMARK_URL",
        url,
        "TICKMARK_API_KEY",
        apiKey,
        "TICKMARK_CONFIG",
        dir.resolve("cli-config.json").toString());
  }

  /**
   * {@code tickmark connect RENTAL} as {@code tickmark ssh} runs it without a launcher: this Java,
   * the CLI's JVM flags (serial GC, C1 only: a short-lived client), this class path.
   */
  static String cliProxy(String rentalId) {
    String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
    String command =
        quote(java)
            + " -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -cp "
            + quote(System.getProperty("java.class.path"))
            + " dev.tickmark.cli.Main connect "
            + quote(rentalId);
    return command.replace("%", "%%");
  }

  /**
   * The baseline: socat joins ssh straight to the agent's loopback SSH server, from a local port
   * registered as the rental's ({@link #bindPort}), as the agent's own stream would.
   */
  static String directProxy(InetSocketAddress server, int sourcePort) {
    return "socat - TCP:"
        + server.getHostString()
        + ":"
        + server.getPort()
        + ",bind=127.0.0.1:"
        + sourcePort
        + ",reuseaddr";
  }

  static String quote(String s) {
    return "'" + s.replace("'", "'\"'\"'") + "'";
  }

  /** ssh/scp options: the proxy, the host key pinned under the rental's id, batch mode. */
  static List<String> options(String proxy, String rentalId, Path knownHosts, Path key) {
    List<String> o = new ArrayList<>();
    if (proxy != null) o.addAll(List.of("-o", "ProxyCommand=" + proxy));
    o.addAll(
        List.of(
            "-o",
            "HostKeyAlias=" + rentalId,
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
            "ConnectTimeout=60",
            "-i",
            key.toString()));
    return o;
  }

  // ---------------------------------------------------------------------------------------------
  // The real agent's SSH server, reached directly (benchmark code on the same class path).

  static InetSocketAddress sshAddress(Agent agent) throws ReflectiveOperationException {
    Method m = Agent.class.getDeclaredMethod("sshAddress");
    m.setAccessible(true);
    @SuppressWarnings("unchecked")
    var address = (java.util.Optional<InetSocketAddress>) m.invoke(agent);
    return address.orElseThrow(() -> new IllegalStateException("the agent runs no SSH server"));
  }

  /** Registers loopback {@code port} as {@code rentalId}'s, as the agent's stream does. */
  static void bindPort(Agent agent, int port, String rentalId) throws ReflectiveOperationException {
    Field f = Agent.class.getDeclaredField("ssh");
    f.setAccessible(true);
    Object server = f.get(agent);
    Object registry = server.getClass().getMethod("registry").invoke(server);
    Method bind = registry.getClass().getDeclaredMethod("bindPort", int.class, String.class);
    bind.setAccessible(true);
    bind.invoke(registry, port, rentalId);
  }

  static int freePort() throws IOException {
    try (ServerSocket s = new ServerSocket(0)) {
      return s.getLocalPort();
    }
  }

  // ---------------------------------------------------------------------------------------------
  // The market around it.

  /** A provider's real agent (process runtime, simulated cards), verified and listed on a node. */
  static Agent listedAgent(
      FailoverBenchmark.Http http,
      String url,
      String ws,
      String providerKey,
      String gpus,
      Path stateDir)
      throws Exception {
    String token =
        http.post(url + "/v1/hosts/registration-tokens", providerKey, "{\"region\":\"eu-nl\"}", 201)
            .get("token")
            .asText();
    Agent agent = Agent.start(AgentConfig.simulated(ws, token, stateDir, gpus));
    String hostId = agent.welcomed().get(120, TimeUnit.SECONDS).hostId();
    String verdict = agent.verified().get(120, TimeUnit.SECONDS).status();
    if (!"verified".equals(verdict))
      throw new IllegalStateException("the simulated host was not verified: " + verdict);
    http.postAsync(
            "PUT",
            url + "/v1/hosts/" + hostId + "/listing",
            providerKey,
            "{\"on_demand_price_per_gpu_hour\":\"2.49\",\"listed\":true}",
            200)
        .get(60, TimeUnit.SECONDS);
    return agent;
  }

  /** A renter account with money on it; its API key. */
  static String renter(FailoverBenchmark.Http http, String url, String operator, String name)
      throws Exception {
    JsonNode created = http.post(url + "/v1/accounts", null, "{\"name\":\"" + name + "\"}", 201);
    http.post(
        url + "/ops/accounts/" + created.get("account").get("id").asText() + "/deposits",
        operator,
        "{\"amount\":\"100000\",\"reference\":\"bench\"}",
        201);
    return created.get("api_key").asText();
  }

  /** Launches a 1-card H100 rental with the renter's public key; its id (not yet running). */
  static CompletableFuture<String> launch(
      FailoverBenchmark.Http http, String url, String renterKey, String publicKey, String idem) {
    String body =
        "{\"gpu\":\"h100-80gb\",\"count\":1,\"region\":\"eu-nl\",\"max_price_per_gpu_hour\":\"3.00\","
            + "\"image\":\"ubuntu:24.04\",\"wait_seconds\":600,\"ssh_public_key\":"
            + json(publicKey)
            + "}";
    return http.launch(
            url + "/v1/rentals",
            renterKey,
            body,
            idem,
            new java.util.concurrent.atomic.AtomicInteger())
        .thenApply(j -> j.get("rental").get("id").asText());
  }

  /** Waits until the rental runs; its SSH host key. */
  static String awaitRunning(
      FailoverBenchmark.Http http, String url, String renterKey, String rentalId, int seconds)
      throws Exception {
    long deadline = System.nanoTime() + seconds * 1_000_000_000L;
    String status = "?";
    while (System.nanoTime() < deadline) {
      JsonNode r = getAs(http, url + "/v1/rentals/" + rentalId, renterKey);
      status = r.path("status").asText();
      if (status.equals("running") && r.hasNonNull("ssh_host_key"))
        return r.get("ssh_host_key").asText();
      Thread.sleep(250);
    }
    throw new IllegalStateException(
        "rental " + rentalId + " not running after " + seconds + " s: " + status);
  }

  static JsonNode getAs(FailoverBenchmark.Http http, String url, String bearer) throws Exception {
    var r =
        http.client.send(
            java.net.http.HttpRequest.newBuilder(URI.create(url))
                .timeout(Duration.ofSeconds(30))
                .header("Authorization", "Bearer " + bearer)
                .build(),
            java.net.http.HttpResponse.BodyHandlers.ofString());
    if (r.statusCode() != 200)
      throw new IllegalStateException(
          "GET " + url + " answered " + r.statusCode() + ": " + r.body());
    return new com.fasterxml.jackson.databind.ObjectMapper().readTree(r.body());
  }

  static String json(String s) {
    try {
      return new com.fasterxml.jackson.databind.ObjectMapper().writeValueAsString(s);
    } catch (IOException e) {
      throw new IllegalStateException(e);
    }
  }

  static void writeKnownHosts(Path file, Map<String, String> hostKeys) throws IOException {
    StringBuilder b = new StringBuilder();
    hostKeys.forEach((id, key) -> b.append(id).append(' ').append(key.strip()).append('\n'));
    Files.writeString(file, b.toString());
  }

  // ---------------------------------------------------------------------------------------------

  /**
   * {@code tickmark connect} inside this JVM, for many sessions without a JVM each: a loopback port
   * per rental; each connection to it is joined to a fresh {@code /v1/rentals/{id}/connect}
   * websocket exactly as {@code ConnectCommand} joins stdin/stdout (frames of at most 64 KiB, one
   * in flight each way). ssh then needs no ProxyCommand: {@code ssh -p PORT tickmark@127.0.0.1}.
   */
  static final class Bridge implements AutoCloseable {
    static final int CHUNK = 64 * 1024;
    private final ExecutorService threads =
        Executors.newCachedThreadPool(
            r -> {
              Thread t = new Thread(r, "bench-bridge");
              t.setDaemon(true);
              return t;
            });
    private final HttpClient http =
        HttpClient.newBuilder().executor(threads).connectTimeout(Duration.ofSeconds(30)).build();
    private final List<ServerSocket> servers = new ArrayList<>();

    /** A loopback port whose connections reach {@code rentalId}'s SSH server through the node. */
    synchronized int open(String wsBase, String rentalId, String apiKey) throws IOException {
      ServerSocket server = new ServerSocket();
      server.bind(new InetSocketAddress("127.0.0.1", 0), 256);
      servers.add(server);
      URI uri = URI.create(wsBase + "/v1/rentals/" + rentalId + "/connect");
      threads.execute(
          () -> {
            while (!server.isClosed()) {
              try {
                Socket s = server.accept();
                s.setTcpNoDelay(true);
                threads.execute(() -> join(s, uri, apiKey));
              } catch (IOException e) {
                return;
              }
            }
          });
      return server.getLocalPort();
    }

    private void join(Socket socket, URI uri, String apiKey) {
      CompletableFuture<Void> done = new CompletableFuture<>();
      try {
        OutputStream out = socket.getOutputStream();
        WebSocket ws =
            http.newWebSocketBuilder()
                .header("Authorization", "Bearer " + apiKey)
                .connectTimeout(Duration.ofSeconds(30))
                .buildAsync(
                    uri,
                    new WebSocket.Listener() {
                      @Override
                      public void onOpen(WebSocket w) {
                        w.request(1);
                      }

                      @Override
                      public CompletionStage<?> onBinary(WebSocket w, ByteBuffer data, boolean l) {
                        try {
                          byte[] bytes = new byte[data.remaining()];
                          data.get(bytes);
                          out.write(bytes);
                          out.flush();
                          w.request(1);
                        } catch (IOException e) {
                          done.complete(null);
                        }
                        return null;
                      }

                      @Override
                      public CompletionStage<?> onText(WebSocket w, CharSequence d, boolean l) {
                        w.request(1);
                        return null;
                      }

                      @Override
                      public CompletionStage<?> onClose(WebSocket w, int code, String reason) {
                        done.complete(null);
                        return null;
                      }

                      @Override
                      public void onError(WebSocket w, Throwable error) {
                        done.complete(null);
                      }
                    })
                .get(60, TimeUnit.SECONDS);
        threads.execute(
            () -> {
              byte[] buffer = new byte[CHUNK];
              try {
                InputStream in = socket.getInputStream();
                for (int n; !done.isDone() && (n = in.read(buffer)) >= 0; ) {
                  if (n == 0) continue;
                  ws.sendBinary(ByteBuffer.wrap(buffer, 0, n).asReadOnlyBuffer(), true).join();
                  buffer = new byte[CHUNK];
                }
                ws.sendClose(WebSocket.NORMAL_CLOSURE, "").join();
              } catch (Exception e) {
                // the other side went away
              }
              done.complete(null);
            });
        done.join();
        ws.abort();
      } catch (Exception e) {
        // refused or unreachable: ssh sees the connection close
      } finally {
        try {
          socket.close();
        } catch (IOException e) {
          // closed
        }
      }
    }

    @Override
    public synchronized void close() {
      for (ServerSocket s : servers) {
        try {
          s.close();
        } catch (IOException e) {
          // closed
        }
      }
      threads.shutdownNow();
    }
  }
}
