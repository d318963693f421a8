package dev.tickmark.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.OutputStream;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import org.junit.jupiter.api.Test;

/**
 * The client's handling of what a real node rarely does but a network can: an event stream that goes silent, and an
 * error page that is not problem+json (a proxy's). Served by a raw socket, so the bytes are exactly these.
 */
class CliHttpTest {
  @Test
  void anEventStreamThatGoesSilentIsALostConnection() throws Exception {
    CountDownLatch clientDone = new CountDownLatch(1);
    try (ServerSocket server = new ServerSocket(0)) {
      CompletableFuture<Void> serving = CompletableFuture.runAsync(() -> serve(server,
          "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
              + chunk("event: status\ndata: {\"status\":\"running\"}\n\n") + chunk(":\n\n"), clientDone));
      Http http = new Http("http://127.0.0.1:" + server.getLocalPort(), null, Duration.ofMillis(600));
      List<String> seen = new ArrayList<>();
      UnreachableException lost;
      try {
        lost = assertThrows(UnreachableException.class, () -> http.events("/v1/rentals/r/events", e -> seen.add(e.type())));
      } finally {
        clientDone.countDown();
      }
      assertEquals(List.of("status"), seen);
      assertTrue(lost.getMessage().contains("sent nothing for"), lost.getMessage());
      serving.join();
    }
  }

  @Test
  void anErrorThatIsNotProblemJsonIsReportedByItsStatus() {
    CliException fromProxy = Http.problem(502, "<html>\n<body>Bad Gateway</body></html>");
    assertEquals("http_502", fromProxy.code());
    assertEquals("<html>", fromProxy.detail());
    CliException problem = Http.problem(402, "{\"type\":\"x\",\"status\":402,\"code\":\"insufficient_funds\",\"detail\":\"available 0\"}");
    assertEquals("insufficient_funds", problem.code());
    assertEquals("available 0", problem.detail());
  }

  /** Answers one request with {@code response}, then holds the connection open, silent, until the client is done. */
  private static void serve(ServerSocket server, String response, CountDownLatch clientDone) {
    try (Socket socket = server.accept()) {
      byte[] buffer = new byte[8192];
      socket.getInputStream().read(buffer); // the request; its content does not matter here
      OutputStream out = socket.getOutputStream();
      out.write(response.getBytes(StandardCharsets.UTF_8));
      out.flush();
      clientDone.await();
    } catch (IOException | InterruptedException e) {
      throw new IllegalStateException(e);
    }
  }

  private static String chunk(String text) {
    return Integer.toHexString(text.getBytes(StandardCharsets.UTF_8).length) + "\r\n" + text + "\r\n";
  }
}
