package dev.tickmark.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A workload that ends at once can have ended before {@code tickmark launch} sees it run: the
 * launch is answered {@code provisioning}, and the rental's event stream then starts at its end. It
 * ran, so the launch succeeds and says how it ended (it used to say "ended before it ran" and exit
 * 1). The API is a stub that answers exactly that sequence, which a real node gives only by chance.
 */
class LaunchQuickWorkloadTest {
  static final String RENTAL = "rnt_0123456789abcdef01234567";
  static final String ENDED =
      "{\"id\":\""
          + RENTAL
          + "\",\"status\":\"ended\",\"gpu\":\"h100-80gb\",\"count\":1,\"region\":\"eu-nl\","
          + "\"tier\":\"on_demand\",\"max_price_per_gpu_hour\":\"3.000000\","
          + "\"price_per_gpu_hour\":\"2.490000\",\"started_at\":\"2026-12-07T03:00:00Z\","
          + "\"ended_at\":\"2026-12-07T03:00:01Z\",\"end_reason\":\"workload_exited\","
          + "\"exit_code\":0,\"billed_seconds\":1,\"cost\":\"0.000692\"}";

  @TempDir Path temp;
  HttpServer server;

  @BeforeEach
  void start() throws Exception {
    server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
    server.createContext(
        "/v1/rentals",
        exchange -> {
          String path = exchange.getRequestURI().getPath();
          if (exchange.getRequestMethod().equals("POST") && path.equals("/v1/rentals"))
            send(
                exchange,
                201,
                "application/json",
                "{\"rental\":"
                    + ENDED
                        .replace("\"status\":\"ended\"", "\"status\":\"provisioning\"")
                        .replace("\"started_at\":\"2026-12-07T03:00:00Z\"", "\"started_at\":null")
                        .replace("\"end_reason\":\"workload_exited\"", "\"end_reason\":null")
                    + "}");
          else if (path.endsWith("/events"))
            send(exchange, 200, "text/event-stream", "event: end\ndata: " + ENDED + "\n\n");
          else send(exchange, 200, "application/json", ENDED);
        });
    server.start();
  }

  private static void send(HttpExchange exchange, int status, String type, String body)
      throws IOException {
    byte[] bytes = body.getBytes(StandardCharsets.UTF_8);
    exchange.getResponseHeaders().add("Content-Type", type);
    exchange.sendResponseHeaders(status, bytes.length);
    exchange.getResponseBody().write(bytes);
    exchange.close();
  }

  @AfterEach
  void stop() {
    server.stop(0);
  }

  @Test
  void aWorkloadThatEndedBeforeTheLaunchSawItRunIsNoFailure() {
    CliRunner.Result launched =
        new CliRunner(temp.resolve("cli.json"))
            .withEnv("TICKMARK_URL", "http://127.0.0.1:" + server.getAddress().getPort())
            .withEnv(
                "TICKMARK_API_KEY",
                "tmk_0123456789abcdef01234567_0123456789abcdef0123456789abcdef01234567")
            .run("launch", "--gpu", "h100-80gb", "--max-price", "3.00", "--", "echo", "at once");
    launched.ok();
    assertTrue(
        launched
            .out()
            .contains(
                "Rental "
                    + RENTAL
                    + " ran and has ended (workload_exited, exit code 0): billed 1 s, cost"
                    + " 0.000692 EUR. Output: tickmark logs "
                    + RENTAL),
        launched.out());
    assertEquals("", launched.err());
  }
}
