package dev.tickmark.http;

import static org.apache.pekko.http.javadsl.server.Directives.complete;
import static org.apache.pekko.http.javadsl.server.Directives.concat;
import static org.apache.pekko.http.javadsl.server.Directives.onSuccess;
import static org.apache.pekko.http.javadsl.server.Directives.path;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.typesafe.config.ConfigFactory;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.http.javadsl.Http;
import org.apache.pekko.http.javadsl.ServerBinding;
import org.apache.pekko.http.javadsl.server.Route;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * A request no route answers within the server's request timeout, on a real server: 503 {@code
 * unavailable} problem+json with {@code Retry-After} (Pekko's own answer is plain text), and {@code
 * Strict-Transport-Security} where the node serves HTTPS (the route's headers never reach this
 * answer: the server makes it).
 */
class RequestTimeoutTest {
  static ActorTestKit testKit;
  static ServerBinding plain;
  static ServerBinding asOverHttps;
  static final HttpClient client = HttpClient.newHttpClient();

  /** A route that never answers, beside one that does. */
  static final Route ROUTE =
      concat(
          path("never", () -> onSuccess(new CompletableFuture<String>(), x -> complete(x))),
          path("quick", () -> complete("ok")));

  @BeforeAll
  static void start() throws Exception {
    testKit =
        ActorTestKit.create(
            ConfigFactory.parseString("pekko.http.server.request-timeout = 500ms")
                .withFallback(ConfigFactory.load()));
    plain = HttpApi.bind(testKit.system(), ROUTE, "127.0.0.1", 0).toCompletableFuture().get();
    // what bindHttps binds, less the TLS (TlsIntegrationTest checks the HTTPS port itself)
    asOverHttps =
        Http.get(testKit.system())
            .newServerAt("127.0.0.1", 0)
            .bind(HttpApi.strictTransportSecurity(HttpApi.answeringTimeouts(ROUTE, true)))
            .toCompletableFuture()
            .get();
  }

  @AfterAll
  static void stop() {
    if (testKit != null) testKit.shutdownTestKit();
  }

  static HttpResponse<String> get(ServerBinding binding, String path) throws Exception {
    return client.send(
        HttpRequest.newBuilder(
                URI.create("http://127.0.0.1:" + binding.localAddress().getPort() + path))
            .build(),
        HttpResponse.BodyHandlers.ofString());
  }

  @Test
  void aRequestNoRouteAnswersInTimeIsA503ProblemWithRetryAfter() throws Exception {
    HttpResponse<String> answer = get(plain, "/never");
    assertEquals(503, answer.statusCode(), answer.body());
    assertEquals(
        Optional.of("application/problem+json"), answer.headers().firstValue("Content-Type"));
    assertTrue(answer.body().contains("\"code\":\"unavailable\""), answer.body());
    assertEquals(Optional.of("5"), answer.headers().firstValue("Retry-After"));
    assertEquals(Optional.empty(), answer.headers().firstValue("Strict-Transport-Security"));
    assertEquals(200, get(plain, "/quick").statusCode());
  }

  @Test
  void overHttpsTheTimeoutsAnswerCarriesStrictTransportSecurity() throws Exception {
    HttpResponse<String> answer = get(asOverHttps, "/never");
    assertEquals(503, answer.statusCode(), answer.body());
    assertTrue(answer.body().contains("\"code\":\"unavailable\""), answer.body());
    assertEquals(
        Optional.of("max-age=" + HttpApi.HSTS_MAX_AGE_SECONDS),
        answer.headers().firstValue("Strict-Transport-Security"));
    assertEquals(
        Optional.of("max-age=" + HttpApi.HSTS_MAX_AGE_SECONDS),
        get(asOverHttps, "/quick").headers().firstValue("Strict-Transport-Security"));
  }
}
