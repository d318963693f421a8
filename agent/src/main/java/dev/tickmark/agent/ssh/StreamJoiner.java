package dev.tickmark.agent.ssh;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.WebSocket;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.BiConsumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One stream: a loopback TCP connection to the agent's SSH server joined to the engine's stream
 * websocket, raw SSH bytes both ways, with backpressure and no buffer beyond one frame each way:
 *
 * <ul>
 *   <li>websocket → TCP: the next message is requested only once the previous one's bytes are
 *       written to the socket;
 *   <li>TCP → websocket: the socket is read again only once the previous {@code sendBinary} has
 *       completed; each frame at most {@link #MAX_FRAME} bytes.
 * </ul>
 *
 * The local port is registered as the rental's ({@link RentalRegistry#bindPort}) before the socket
 * connects, so the server knows the session's rental from its first byte. Either side ending ends
 * the other.
 */
final class StreamJoiner implements WebSocket.Listener {
  static final int MAX_FRAME = 64 * 1024;
  static final Duration CONNECT_TIMEOUT = Duration.ofSeconds(10);

  private static final Logger log = LoggerFactory.getLogger(StreamJoiner.class);

  final String streamId;
  final String rentalId;
  private final RentalRegistry registry;
  private final Executor threads;

  /** Called once when the stream is over: (reason, whether the engine should be told). */
  private final BiConsumer<String, Boolean> onFinished;

  private final Socket socket = new Socket();
  private final AtomicBoolean finished = new AtomicBoolean();
  private volatile WebSocket ws;
  private volatile int port = -1;

  StreamJoiner(
      String streamId,
      String rentalId,
      RentalRegistry registry,
      Executor threads,
      BiConsumer<String, Boolean> onFinished) {
    this.streamId = streamId;
    this.rentalId = rentalId;
    this.registry = registry;
    this.threads = threads;
    this.onFinished = onFinished;
  }

  /** Connects to the SSH server, then opens the websocket (blocks for the TCP part only). */
  void start(InetSocketAddress server, HttpClient http, URI uri, String bearer) {
    try {
      socket.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0));
      port = socket.getLocalPort();
      registry.bindPort(port, rentalId); // before the server sees the connection
      socket.connect(server, (int) CONNECT_TIMEOUT.toMillis());
      socket.setTcpNoDelay(true);
    } catch (IOException e) {
      finish("stream_failed: cannot reach the agent's ssh server", true);
      return;
    }
    if (finished.get()) return;
    CompletableFuture<WebSocket> opening;
    try {
      opening =
          http.newWebSocketBuilder()
              .header("Authorization", "Bearer " + bearer)
              .connectTimeout(CONNECT_TIMEOUT)
              .buildAsync(uri, this);
    } catch (RuntimeException e) {
      opening = CompletableFuture.failedFuture(e);
    }
    opening.whenComplete(
        (w, e) -> {
          if (e != null) {
            log.warn("stream {}: cannot open {}: {}", streamId, uri, describe(e));
            finish("stream_failed: cannot open the stream websocket", true);
          }
        });
  }

  @Override
  public void onOpen(WebSocket webSocket) {
    ws = webSocket;
    if (finished.get()) {
      webSocket.abort();
      return;
    }
    threads.execute(this::tcpToWebSocket);
    webSocket.request(1);
  }

  private void tcpToWebSocket() {
    byte[] buf = new byte[MAX_FRAME];
    try {
      InputStream in = socket.getInputStream();
      for (int n; (n = in.read(buf)) >= 0; ) {
        if (n == 0) continue;
        // the buffer is reused only once the frame is sent: one frame in flight at most
        ws.sendBinary(ByteBuffer.wrap(buf, 0, n), true).get();
      }
      finish("ssh_closed", true);
    } catch (IOException e) {
      finish("ssh_closed", true);
    } catch (ExecutionException e) {
      finish("stream_failed: the websocket failed", true);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      finish("agent_stopping", true);
    }
  }

  @Override
  public CompletionStage<?> onBinary(WebSocket webSocket, ByteBuffer data, boolean last) {
    byte[] bytes = new byte[data.remaining()];
    data.get(bytes);
    return CompletableFuture.runAsync(
            () -> {
              try {
                OutputStream out = socket.getOutputStream();
                out.write(bytes);
                out.flush();
              } catch (IOException e) {
                throw new java.io.UncheckedIOException(e);
              }
            },
            threads)
        .whenComplete(
            (x, e) -> {
              if (e != null) finish("ssh_closed", true);
              else webSocket.request(1); // the next frame only once this one is written
            });
  }

  @Override
  public CompletionStage<?> onText(WebSocket webSocket, CharSequence data, boolean last) {
    webSocket.request(1); // not part of the stream: ignored
    return null;
  }

  @Override
  public CompletionStage<?> onPing(WebSocket webSocket, ByteBuffer message) {
    webSocket.request(1);
    return null;
  }

  @Override
  public CompletionStage<?> onPong(WebSocket webSocket, ByteBuffer message) {
    webSocket.request(1);
    return null;
  }

  @Override
  public CompletionStage<?> onClose(WebSocket webSocket, int statusCode, String reason) {
    finish("closed by the engine", false);
    return null;
  }

  @Override
  public void onError(WebSocket webSocket, Throwable error) {
    finish("stream_failed: " + describe(error), true);
  }

  /** Ends the stream (once): the socket and the websocket close, the port is forgotten. */
  void finish(String reason, boolean tellEngine) {
    if (!finished.compareAndSet(false, true)) return;
    if (port >= 0) registry.unbindPort(port);
    try {
      socket.close();
    } catch (IOException e) {
      // closed already
    }
    WebSocket w = ws;
    if (w != null && !w.isOutputClosed()) {
      try {
        w.sendClose(WebSocket.NORMAL_CLOSURE, truncate(reason))
            .orTimeout(2, TimeUnit.SECONDS)
            .whenComplete((x, e) -> w.abort());
      } catch (RuntimeException e) {
        w.abort();
      }
    } else if (w != null) {
      w.abort();
    }
    log.info("stream {} (rental {}) closed: {}", streamId, rentalId, reason);
    onFinished.accept(reason, tellEngine);
  }

  boolean finished() {
    return finished.get();
  }

  /** A close reason is at most 123 bytes of UTF-8. */
  private static String truncate(String reason) {
    String r = reason;
    while (r.getBytes(StandardCharsets.UTF_8).length > 123) r = r.substring(0, r.length() - 1);
    return r;
  }

  private static String describe(Throwable t) {
    Throwable c = t;
    while (c.getCause() != null && c.getMessage() == null) c = c.getCause();
    if (c instanceof java.util.concurrent.CompletionException && c.getCause() != null)
      c = c.getCause();
    return c.getClass().getSimpleName() + (c.getMessage() != null ? ": " + c.getMessage() : "");
  }
}
