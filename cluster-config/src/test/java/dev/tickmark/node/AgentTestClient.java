package dev.tickmark.node;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.fail;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.tickmark.wire.AgentFrame;
import dev.tickmark.wire.CanonicalJson;
import dev.tickmark.wire.Ed25519;
import dev.tickmark.wire.Frames;
import dev.tickmark.wire.HardwareReport;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.WebSocket;
import java.net.http.WebSocketHandshakeException;
import java.nio.ByteBuffer;
import java.security.KeyPair;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executors;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A scripted host agent for tests: the JDK websocket client speaking the agent protocol through the
 * wire module. It connects with a bearer token, queues every frame the node sends, sends raw text,
 * binary or proper frames, signs the challenge and reports with its own Ed25519 key, and records
 * how the socket closed. Nothing of the node's own code is used.
 */
final class AgentTestClient implements AutoCloseable {
  static final Duration WAIT = Duration.ofSeconds(15);
  private static final HttpClient HTTP =
      HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();

  /** How the socket ended: the close frame's status and reason, or the error that broke it. */
  record Closed(int status, String reason, Throwable error) {}

  /** The outcome of an upgrade the node refused. */
  record Refusal(int status, String contentType) {}

  private final BlockingQueue<JsonNode> frames = new LinkedBlockingQueue<>();
  private final CompletableFuture<Closed> closed = new CompletableFuture<>();
  private final AtomicLong seq = new AtomicLong();
  private final KeyPair key;
  private WebSocket socket;
  private ScheduledExecutorService heartbeats;
  private ScheduledFuture<?> heartbeatTask;
  private volatile String hostId;

  private AgentTestClient(KeyPair key) {
    this.key = key;
  }

  static String agentUrl(Node node) {
    return "ws://127.0.0.1:" + node.httpPort() + "/v1/agent/connect";
  }

  /**
   * Opens a session with {@code Authorization: Bearer <bearer>}; fails the test if the upgrade is
   * refused.
   */
  static AgentTestClient connect(Node node, String bearer, KeyPair key) {
    AgentTestClient client = new AgentTestClient(key);
    WebSocket.Builder builder = HTTP.newWebSocketBuilder().connectTimeout(Duration.ofSeconds(5));
    if (bearer != null) builder.header("Authorization", "Bearer " + bearer);
    try {
      client.socket =
          builder
              .buildAsync(URI.create(agentUrl(node)), client.new Listener())
              .get(WAIT.toSeconds(), TimeUnit.SECONDS);
    } catch (ExecutionException e) {
      throw new AssertionError("the upgrade was refused: " + describe(e.getCause()), e.getCause());
    } catch (InterruptedException | TimeoutException e) {
      throw new AssertionError("no upgrade within " + WAIT, e);
    }
    return client;
  }

  /**
   * Tries an upgrade with this raw {@code Authorization} header (none if null) that must be
   * refused.
   */
  static Refusal refusedUpgrade(Node node, String authorization) {
    WebSocket.Builder builder = HTTP.newWebSocketBuilder().connectTimeout(Duration.ofSeconds(5));
    if (authorization != null) builder.header("Authorization", authorization);
    AgentTestClient client = new AgentTestClient(null);
    try {
      WebSocket ws =
          builder
              .buildAsync(URI.create(agentUrl(node)), client.new Listener())
              .get(WAIT.toSeconds(), TimeUnit.SECONDS);
      ws.abort();
      throw new AssertionError("the node upgraded a socket for Authorization " + authorization);
    } catch (ExecutionException e) {
      if (e.getCause() instanceof WebSocketHandshakeException h) {
        return new Refusal(
            h.getResponse().statusCode(),
            h.getResponse().headers().firstValue("Content-Type").orElse(null));
      }
      throw new AssertionError(
          "the upgrade failed otherwise: " + describe(e.getCause()), e.getCause());
    } catch (InterruptedException | TimeoutException e) {
      throw new AssertionError("no answer to the upgrade within " + WAIT, e);
    }
  }

  private static String describe(Throwable t) {
    if (t instanceof WebSocketHandshakeException h) return "HTTP " + h.getResponse().statusCode();
    return String.valueOf(t);
  }

  // ---- receiving ------------------------------------------------------------------------------

  /** The next frame, waiting up to {@link #WAIT}. */
  JsonNode next() {
    try {
      JsonNode frame = frames.poll(WAIT.toMillis(), TimeUnit.MILLISECONDS);
      if (frame == null)
        fail(
            "no frame within "
                + WAIT
                + (closed.isDone() ? "; the socket closed: " + closed.join() : ""));
      return frame;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new AssertionError("interrupted", e);
    }
  }

  /** The next frame, which must be of {@code type}. */
  JsonNode expect(String type) {
    JsonNode frame = next();
    assertEquals(type, frame.path("type").asText(), "frame " + frame);
    return frame;
  }

  /** The next frame must be {@code error {code}}, and then the node must close the socket. */
  JsonNode expectErrorAndClose(String code) {
    JsonNode error = expect("error");
    assertEquals(code, error.path("code").asText(), "error " + error);
    assertNotNull(error.path("message").asText(null), "an error says why: " + error);
    Closed closedBy = awaitClose();
    assertEquals(
        WebSocket.NORMAL_CLOSURE,
        closedBy.status(),
        "the node closes cleanly after the error: " + closedBy);
    return error;
  }

  /** A frame that arrives within {@code within}, or null. */
  JsonNode poll(Duration within) {
    try {
      return frames.poll(within.toMillis(), TimeUnit.MILLISECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new AssertionError("interrupted", e);
    }
  }

  /** Frames received so far and not yet taken. */
  List<JsonNode> drain() {
    List<JsonNode> out = new ArrayList<>();
    frames.drainTo(out);
    return out;
  }

  Closed awaitClose() {
    try {
      return closed.get(WAIT.toSeconds(), TimeUnit.SECONDS);
    } catch (TimeoutException e) {
      throw new AssertionError(
          "the node did not close the socket within " + WAIT + "; pending frames " + frames);
    } catch (InterruptedException | ExecutionException e) {
      throw new AssertionError(e);
    }
  }

  boolean isClosed() {
    return closed.isDone();
  }

  CompletableFuture<Closed> closed() {
    return closed;
  }

  // ---- sending --------------------------------------------------------------------------------

  /** Sends one text frame and waits until it is written; false if the socket is already gone. */
  synchronized boolean sendText(String text) {
    try {
      socket.sendText(text, true).get(WAIT.toSeconds(), TimeUnit.SECONDS);
      return true;
    } catch (ExecutionException e) {
      return false;
    } catch (InterruptedException | TimeoutException e) {
      throw new AssertionError("could not send within " + WAIT, e);
    }
  }

  /** Sends one text message as continuation frames of at most {@code fragment} characters each. */
  synchronized boolean sendTextInFragments(String text, int fragment) {
    try {
      for (int from = 0; from < text.length(); from += fragment) {
        int to = Math.min(text.length(), from + fragment);
        socket
            .sendText(text.substring(from, to), to == text.length())
            .get(WAIT.toSeconds(), TimeUnit.SECONDS);
      }
      return true;
    } catch (ExecutionException e) {
      return false;
    } catch (InterruptedException | TimeoutException e) {
      throw new AssertionError("could not send within " + WAIT, e);
    }
  }

  synchronized boolean sendBinary(byte[] bytes) {
    try {
      socket.sendBinary(ByteBuffer.wrap(bytes), true).get(WAIT.toSeconds(), TimeUnit.SECONDS);
      return true;
    } catch (ExecutionException e) {
      return false;
    } catch (InterruptedException | TimeoutException e) {
      throw new AssertionError("could not send within " + WAIT, e);
    }
  }

  boolean send(AgentFrame frame) {
    return sendText(Frames.write(frame));
  }

  /**
   * Answers the challenge (which must be the next frame) with a hello signed by this client's key.
   */
  void hello() {
    String nonce = expect("challenge").path("nonce").asText();
    send(
        new AgentFrame.Hello(
            Ed25519.sign(key.getPrivate(), Ed25519.helloMessage(nonce)),
            "test-0.1",
            Ed25519.encodePublic(key.getPublic())));
  }

  /** Challenge, hello, welcome: returns the welcome. */
  JsonNode handshake() {
    hello();
    JsonNode welcome = expect("welcome");
    hostId = welcome.path("host_id").asText();
    return welcome;
  }

  String hostId() {
    return hostId;
  }

  KeyPair key() {
    return key;
  }

  /** Sends a report signed with this client's key. */
  void report(HardwareReport report) {
    JsonNode tree = Frames.reportTree(report);
    send(new AgentFrame.HardwareReportFrame(tree, sign(tree)));
  }

  String sign(JsonNode reportTree) {
    return Ed25519.sign(key.getPrivate(), CanonicalJson.bytes(reportTree));
  }

  /** Sends a report whose tree was signed as it was, then changed in {@code tamper}. */
  void tamperedReport(HardwareReport report, java.util.function.Consumer<ObjectNode> tamper) {
    ObjectNode tree = (ObjectNode) Frames.reportTree(report);
    String signature = sign(tree);
    tamper.accept(tree);
    send(new AgentFrame.HardwareReportFrame(tree, signature));
  }

  /** Sends the report and waits for its verdict. */
  JsonNode verify(HardwareReport report) {
    report(report);
    return expect("verification_result");
  }

  /** One healthy heartbeat for two cards, with the next sequence number. */
  boolean heartbeat() {
    return send(heartbeatFrame());
  }

  AgentFrame.Heartbeat heartbeatFrame() {
    return new AgentFrame.Heartbeat(
        seq.incrementAndGet(),
        Instant.now().toString(),
        List.of(new AgentFrame.GpuSample(0, 0, 35, null), new AgentFrame.GpuSample(1, 0, 36, null)),
        List.of());
  }

  /** Heartbeats every {@code period} in the background until {@link #stopHeartbeats()} or close. */
  synchronized void startHeartbeats(Duration period) {
    if (heartbeats == null) {
      heartbeats =
          Executors.newSingleThreadScheduledExecutor(
              r -> {
                Thread t = new Thread(r, "agent-test-heartbeats");
                t.setDaemon(true);
                return t;
              });
    }
    heartbeatTask =
        heartbeats.scheduleAtFixedRate(
            () -> {
              if (!closed.isDone()) heartbeat();
            },
            0,
            period.toMillis(),
            TimeUnit.MILLISECONDS);
  }

  synchronized void stopHeartbeats() {
    if (heartbeatTask != null) heartbeatTask.cancel(false);
    heartbeatTask = null;
  }

  /** Closes from this side, politely. */
  void closeNormally() {
    stopHeartbeats();
    if (!closed.isDone()) {
      try {
        socket.sendClose(WebSocket.NORMAL_CLOSURE, "bye").get(WAIT.toSeconds(), TimeUnit.SECONDS);
      } catch (Exception ignored) {
        // already closing
      }
    }
    try {
      closed.get(WAIT.toSeconds(), TimeUnit.SECONDS);
    } catch (Exception e) {
      socket.abort();
    }
  }

  @Override
  public void close() {
    stopHeartbeats();
    if (heartbeats != null) heartbeats.shutdownNow();
    if (socket != null) socket.abort();
    closed.complete(new Closed(-1, "aborted by the test", null));
  }

  /** A simulated two-H100 machine as the brief's simulated agent reports it. */
  static HardwareReport simulatedReport() {
    return report(true, "550.54.15");
  }

  static HardwareReport report(boolean simulated, String driver) {
    List<HardwareReport.Gpu> gpus = new ArrayList<>();
    for (int i = 0; i < 2; i++) {
      gpus.add(
          new HardwareReport.Gpu(
              i,
              "GPU-test-" + i + "-" + Long.toHexString(System.nanoTime()),
              "NVIDIA H100 80GB HBM3",
              "nvidia",
              81559L,
              driver,
              "12.4",
              35,
              0L,
              5,
              16));
    }
    return new HardwareReport(
        "test-0.1",
        simulated,
        Instant.now().toString(),
        gpus,
        new HardwareReport.Cpu("Simulated CPU", 32),
        200_000L,
        new HardwareReport.Disk("/var/lib/tickmark", 500L * 1024 * 1024 * 1024, 1000.0),
        null);
  }

  private final class Listener implements WebSocket.Listener {
    private final StringBuilder text = new StringBuilder();

    @Override
    public void onOpen(WebSocket webSocket) {
      webSocket.request(1);
    }

    @Override
    public CompletionStage<?> onText(WebSocket webSocket, CharSequence data, boolean last) {
      text.append(data);
      if (last) {
        String frame = text.toString();
        text.setLength(0);
        try {
          frames.add(Frames.MAPPER.readTree(frame));
        } catch (IOException e) {
          frames.add(Frames.MAPPER.createObjectNode().put("type", "not_json").put("text", frame));
        }
      }
      webSocket.request(1);
      return null;
    }

    @Override
    public CompletionStage<?> onBinary(WebSocket webSocket, ByteBuffer data, boolean last) {
      frames.add(Frames.MAPPER.createObjectNode().put("type", "binary"));
      webSocket.request(1);
      return null;
    }

    @Override
    public CompletionStage<?> onClose(WebSocket webSocket, int statusCode, String reason) {
      closed.complete(new Closed(statusCode, reason, null));
      return null;
    }

    @Override
    public void onError(WebSocket webSocket, Throwable error) {
      closed.complete(new Closed(-1, null, error));
    }
  }
}
