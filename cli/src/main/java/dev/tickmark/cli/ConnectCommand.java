package dev.tickmark.cli;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.URI;
import java.net.http.WebSocket;
import java.net.http.WebSocketHandshakeException;
import java.nio.ByteBuffer;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import picocli.CommandLine.Command;
import picocli.CommandLine.Parameters;

/**
 * {@code tickmark connect RENTAL}: stdin and stdout joined to the rental's SSH server through the
 * engine ({@code GET /v1/rentals/{id}/connect}), for ssh's {@code ProxyCommand}. Bytes flow with
 * backpressure both ways: the next chunk of stdin is read only once the previous one was sent, and
 * the next frame is asked for only once the previous one was written to stdout. The SSH session is
 * end to end: the engine sees only ciphertext.
 */
@Command(
    name = "connect",
    description = {
      "Join stdin/stdout to a running rental's SSH server (GET /v1/rentals/ID/connect), for ssh:",
      "  ssh -o ProxyCommand='tickmark connect ID' -o HostKeyAlias=ID tickmark@ID",
      "or just: tickmark ssh ID"
    })
final class ConnectCommand extends ApiCommand {
  /** At most this much of stdin in one frame. */
  static final int CHUNK = 64 * 1024;

  @Parameters(paramLabel = "ID", description = "The rental (rnt_...).")
  String id;

  @Override
  int execute() {
    Http http = withApiKey();
    return relay(http, id, cli().in, cli().bytesOut);
  }

  /** Relays until either side ends; the exit status is 0 when the engine closed normally. */
  static int relay(Http http, String rentalId, InputStream in, OutputStream out) {
    CompletableFuture<Integer> done = new CompletableFuture<>();
    WebSocket ws = open(http, rentalId, out, done);
    Thread pump =
        new Thread(
            () -> {
              byte[] buffer = new byte[CHUNK];
              try {
                while (!done.isDone()) {
                  int n = in.read(buffer);
                  if (n < 0) break;
                  if (n == 0) continue;
                  // sent (joined) before the buffer is read into again
                  ws.sendBinary(ByteBuffer.wrap(buffer, 0, n), true).join();
                }
                ws.sendClose(WebSocket.NORMAL_CLOSURE, "").join();
              } catch (IOException | CompletionException e) {
                done.complete(Cli.EXIT_API_ERROR);
              }
            },
            "tickmark-connect-stdin");
    pump.setDaemon(true);
    pump.start();
    try {
      return done.join();
    } finally {
      ws.abort();
    }
  }

  private static WebSocket open(
      Http http, String rentalId, OutputStream out, CompletableFuture<Integer> done) {
    URI uri = http.websocketUri("/v1/rentals/" + segment(rentalId) + "/connect");
    WebSocket.Listener listener =
        new WebSocket.Listener() {
          @Override
          public void onOpen(WebSocket webSocket) {
            webSocket.request(1);
          }

          @Override
          public CompletionStage<?> onBinary(WebSocket webSocket, ByteBuffer data, boolean last) {
            try {
              if (data.hasArray()) {
                out.write(data.array(), data.arrayOffset() + data.position(), data.remaining());
              } else {
                byte[] bytes = new byte[data.remaining()];
                data.get(bytes);
                out.write(bytes);
              }
              out.flush();
              webSocket.request(1);
            } catch (IOException e) {
              done.complete(Cli.EXIT_OK); // the reader (ssh) went away
            }
            return null;
          }

          @Override
          public CompletionStage<?> onText(WebSocket webSocket, CharSequence data, boolean last) {
            webSocket.request(1); // not part of the SSH stream
            return null;
          }

          @Override
          public CompletionStage<?> onClose(WebSocket webSocket, int statusCode, String reason) {
            done.complete(
                statusCode == WebSocket.NORMAL_CLOSURE ? Cli.EXIT_OK : Cli.EXIT_API_ERROR);
            return null;
          }

          @Override
          public void onError(WebSocket webSocket, Throwable error) {
            done.complete(Cli.EXIT_API_ERROR);
          }
        };
    try {
      return http.websocket()
          .header("Authorization", "Bearer " + http.bearer())
          .connectTimeout(Http.CONNECT_TIMEOUT)
          .buildAsync(uri, listener)
          .get(Http.REQUEST_TIMEOUT.toSeconds(), TimeUnit.SECONDS);
    } catch (ExecutionException e) {
      if (e.getCause() instanceof WebSocketHandshakeException refused) {
        var response = refused.getResponse();
        Object body = response.body();
        throw Http.problem(response.statusCode(), body == null ? "" : body.toString());
      }
      throw http.unreachable(e.getCause());
    } catch (TimeoutException e) {
      throw http.unreachable(e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new CliException("interrupted", "interrupted while connecting");
    }
  }

  /** The rental as GET /v1/rentals/ID shows it. */
  static JsonNode rental(Http http, String rentalId) {
    return http.get("/v1/rentals/" + segment(rentalId)).json();
  }
}
