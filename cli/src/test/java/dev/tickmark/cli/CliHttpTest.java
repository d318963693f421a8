package dev.tickmark.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.OutputStream;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * The client's handling of what a real node rarely does but a network can: an event stream that
 * goes silent, and an error page that is not problem+json (a proxy's). Served by a raw socket, so
 * the bytes are exactly these.
 */
class CliHttpTest {
  @Test
  void anEventStreamThatGoesSilentIsALostConnection() throws Exception {
    CountDownLatch clientDone = new CountDownLatch(1);
    try (ServerSocket server = new ServerSocket(0)) {
      CompletableFuture<Void> serving =
          CompletableFuture.runAsync(
              () ->
                  serve(
                      server,
                      "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
                          + chunk("event: status\ndata: {\"status\":\"running\"}\n\n")
                          + chunk(":\n\n"),
                      clientDone));
      Http http =
          new Http("http://127.0.0.1:" + server.getLocalPort(), null, Duration.ofMillis(600));
      List<String> seen = new ArrayList<>();
      UnreachableException lost;
      try {
        lost =
            assertThrows(
                UnreachableException.class,
                () -> http.events("/v1/rentals/r/events", e -> seen.add(e.type())));
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
    CliException problem =
        Http.problem(
            402,
            "{\"type\":\"x\",\"status\":402,\"code\":\"insufficient_funds\",\"detail\":\"available 0\"}");
    assertEquals("insufficient_funds", problem.code());
    assertEquals("available 0", problem.detail());
  }

  @Test
  void aPayoutRunThatDoesNotAnswerInTimeIsRetriedWithItsKeyAndThenNamesTheKey() throws Exception {
    String unavailable =
        "{\"type\":\"about:blank\",\"status\":503,\"code\":\"unavailable\",\"detail\":\"the run took too long to answer\"}";
    try (ServerSocket server = new ServerSocket(0)) {
      CompletableFuture<List<String>> requests =
          CompletableFuture.supplyAsync(
              () ->
                  answerEach(
                      server,
                      Http.IDEMPOTENT_ATTEMPTS,
                      "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/problem+json\r\nConnection: close\r\nContent-Length: "
                          + unavailable.length()
                          + "\r\n\r\n"
                          + unavailable));
      CliRunner cli =
          new CliRunner(Path.of("/nonexistent/tickmark.json"))
              .withEnv("TICKMARK_URL", "http://127.0.0.1:" + server.getLocalPort())
              .withEnv("TICKMARK_OPERATOR_TOKEN", "tmkop_x");
      CliRunner.Result result =
          cli.run("ops", "payout", "--minimum", "10.00", "--idempotency-key", "payout-2026-11-29")
              .expect(Cli.EXIT_API_ERROR);
      assertEquals(
          "error: unavailable: the run took too long to answer; the run may be under way: run the command again with"
              + " --idempotency-key payout-2026-11-29 to reach it (it never pays twice)\n",
          result.err());
      List<String> seen = requests.get(10, TimeUnit.SECONDS);
      assertEquals(Http.IDEMPOTENT_ATTEMPTS, seen.size());
      for (String request : seen) {
        assertTrue(
            request.startsWith("POST /ops/payouts ")
                && request.contains("Idempotency-Key: payout-2026-11-29\r\n"),
            request);
      }
    }
  }

  /**
   * Answers {@code count} connections with {@code response} each; returns what each request's head
   * said.
   */
  private static List<String> answerEach(ServerSocket server, int count, String response) {
    List<String> requests = new ArrayList<>();
    for (int i = 0; i < count; i++) {
      try (Socket socket = server.accept()) {
        byte[] buffer = new byte[8192];
        int read = socket.getInputStream().read(buffer);
        requests.add(new String(buffer, 0, Math.max(read, 0), StandardCharsets.UTF_8));
        socket.getOutputStream().write(response.getBytes(StandardCharsets.UTF_8));
        socket.getOutputStream().flush();
      } catch (IOException e) {
        throw new IllegalStateException(e);
      }
    }
    return requests;
  }

  /**
   * Answers one request with {@code response}, then holds the connection open, silent, until the
   * client is done.
   */
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
    return Integer.toHexString(text.getBytes(StandardCharsets.UTF_8).length)
        + "\r\n"
        + text
        + "\r\n";
  }
}
