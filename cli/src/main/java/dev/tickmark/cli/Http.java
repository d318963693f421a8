package dev.tickmark.cli;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.tickmark.wire.CaBundle;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.net.ConnectException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpConnectTimeoutException;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.net.http.HttpTimeoutException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Predicate;

/**
 * The engine's HTTP API as the CLI sees it: the JDK {@link HttpClient}, Jackson trees, bearer auth.
 * Problem answers become {@link CliException}s carrying the problem's {@code code} and {@code
 * detail}; a node that cannot be reached becomes an {@link UnreachableException}.
 */
final class Http {
  static final ObjectMapper JSON = new ObjectMapper();
  static final Duration CONNECT_TIMEOUT = Duration.ofSeconds(5);

  /** Long enough for a launch, which answers after the first match attempt. */
  static final Duration REQUEST_TIMEOUT = Duration.ofSeconds(60);

  /** Three missed keep-alives. */
  static final Duration STREAM_SILENCE = Duration.ofSeconds(45);

  /**
   * Attempts of a POST carrying an Idempotency-Key when the answer is lost or the engine asks to
   * retry.
   */
  static final int IDEMPOTENT_ATTEMPTS = 3;

  /** One answer: the status and the raw body (printed as is by {@code --json}). */
  record Reply(int status, String body) {
    JsonNode json() {
      try {
        return JSON.readTree(body);
      } catch (IOException e) {
        throw new CliException("bad_response", "the engine answered something that is not JSON");
      }
    }
  }

  /**
   * One Server-Sent Event: its type ({@code message} if unnamed), its data, and {@code id}, the
   * event's {@code id:} field (null when it had none).
   */
  record Event(String type, String data, String id) {
    Event(String type, String data) {
      this(type, data, null);
    }

    JsonNode json() {
      try {
        return JSON.readTree(data);
      } catch (IOException e) {
        throw new CliException("bad_response", "the engine sent an event that is not JSON");
      }
    }
  }

  private final HttpClient client;
  private final String baseUrl;
  private final String bearer;
  private final Duration streamSilence;
  private final Path caFile;

  /**
   * @param baseUrl the node, {@code http(s)://host:port} with an optional base path
   * @param bearer the API key or operator token to send, or null
   */
  Http(String baseUrl, String bearer) {
    this(baseUrl, bearer, STREAM_SILENCE, null);
  }

  /**
   * @param caFile a PEM CA bundle to trust instead of the system trust store for {@code https://}
   *     and {@code wss://}, or null; the host name is verified either way
   */
  Http(String baseUrl, String bearer, Path caFile) {
    this(baseUrl, bearer, STREAM_SILENCE, caFile);
  }

  Http(String baseUrl, String bearer, Duration streamSilence) {
    this(baseUrl, bearer, streamSilence, null);
  }

  Http(String baseUrl, String bearer, Duration streamSilence, Path caFile) {
    this.streamSilence = streamSilence;
    this.baseUrl = baseUrl.endsWith("/") ? baseUrl.substring(0, baseUrl.length() - 1) : baseUrl;
    this.bearer = bearer;
    this.caFile = caFile;
    this.client =
        HttpClient.newBuilder()
            .version(HttpClient.Version.HTTP_1_1)
            .sslContext(CaBundle.sslContextOrDefault(caFile))
            .connectTimeout(CONNECT_TIMEOUT)
            .build();
  }

  /** The CA bundle this client trusts, or null for the system trust store. */
  Path caFile() {
    return caFile;
  }

  /**
   * Whether {@code url} is something this client can call: an absolute http or https URL with a
   * host.
   */
  static boolean isValidUrl(String url) {
    try {
      URI uri = URI.create(url);
      return ("http".equals(uri.getScheme()) || "https".equals(uri.getScheme()))
          && uri.getHost() != null;
    } catch (IllegalArgumentException e) {
      return false;
    }
  }

  String baseUrl() {
    return baseUrl;
  }

  String bearer() {
    return bearer;
  }

  /** {@code ws://} or {@code wss://} for {@code path} on the node. */
  URI websocketUri(String path) {
    return URI.create(baseUrl.replaceFirst("^http", "ws") + path);
  }

  /** A websocket builder on this client (HTTP/1.1, the connect timeout). */
  java.net.http.WebSocket.Builder websocket() {
    return client.newWebSocketBuilder();
  }

  /** Why a websocket could not be opened, for one readable line. */
  UnreachableException unreachable(Throwable cause) {
    String tls = CaBundle.describe(cause);
    if (tls != null)
      return new UnreachableException("cannot reach the engine at " + baseUrl + ": " + tls, cause);
    return cause instanceof IOException io
        ? unreachable(io)
        : new UnreachableException("cannot reach the engine at " + baseUrl + ": " + cause, cause);
  }

  Reply get(String path) {
    return send("GET", path, null, null);
  }

  Reply post(String path, JsonNode body) {
    return send("POST", path, body, null);
  }

  Reply delete(String path) {
    return send("DELETE", path, null, null);
  }

  Reply put(String path, JsonNode body) {
    return send("PUT", path, body, null);
  }

  /**
   * A money-moving POST under an {@code Idempotency-Key}. A lost answer, a 503 or a 409 {@code
   * idempotency_key_in_progress} is retried with the same key, which the engine answers with the
   * first result instead of acting twice.
   */
  Reply postIdempotent(String path, JsonNode body, String idempotencyKey) {
    for (int attempt = 1; ; attempt++) {
      boolean last = attempt == IDEMPOTENT_ATTEMPTS;
      try {
        return send("POST", path, body, idempotencyKey);
      } catch (CliException e) {
        boolean retryable =
            e.code().equals("unavailable")
                || e.code().equals("database_unavailable")
                || e.code().equals("idempotency_key_in_progress");
        if (!retryable || last) throw e;
      } catch (UnreachableException e) {
        if (last || e.getCause() instanceof ConnectException) throw e;
      }
      pause(Duration.ofMillis(500L * attempt));
    }
  }

  /** The raw body of a non-JSON resource (an export file). */
  byte[] download(String path) {
    HttpRequest request = request("GET", path, null, null).build();
    HttpResponse<byte[]> response = call(request, HttpResponse.BodyHandlers.ofByteArray());
    if (response.statusCode() >= 400)
      throw problem(response.statusCode(), new String(response.body(), StandardCharsets.UTF_8));
    return response.body();
  }

  /**
   * Reads {@code text/event-stream} at {@code path}, handing each event to {@code handler} until
   * the handler answers false or the engine closes the stream. The engine sends a keep-alive every
   * 15 s, so a stream silent for {@link #STREAM_SILENCE} (by default) is taken for a lost
   * connection rather than waited on forever.
   */
  void events(String path, Predicate<Event> handler) {
    events(path, null, handler);
  }

  /** As {@link #events(String, Predicate)}, resuming after {@code lastEventId} when not null. */
  void events(String path, String lastEventId, Predicate<Event> handler) {
    HttpRequest.Builder builder =
        request("GET", path, null, null).header("Accept", "text/event-stream");
    if (lastEventId != null) builder.header("Last-Event-ID", lastEventId);
    HttpRequest request = builder.build();
    HttpResponse<InputStream> response = call(request, HttpResponse.BodyHandlers.ofInputStream());
    AtomicLong lastRead = new AtomicLong(System.nanoTime());
    AtomicBoolean silent = new AtomicBoolean();
    ScheduledExecutorService watchdog =
        Executors.newSingleThreadScheduledExecutor(
            r -> {
              Thread t = new Thread(r, "tickmark-event-watchdog");
              t.setDaemon(true);
              return t;
            });
    try (InputStream body = response.body();
        BufferedReader reader =
            new BufferedReader(new InputStreamReader(body, StandardCharsets.UTF_8))) {
      if (response.statusCode() >= 400)
        throw problem(
            response.statusCode(), new String(body.readAllBytes(), StandardCharsets.UTF_8));
      watchdog.scheduleWithFixedDelay(
          () -> {
            if (System.nanoTime() - lastRead.get() > streamSilence.toNanos()) {
              silent.set(true);
              closeQuietly(body);
            }
          },
          200,
          200,
          TimeUnit.MILLISECONDS);
      String type = null;
      String id = null;
      StringBuilder data = new StringBuilder();
      String line;
      while ((line = reader.readLine()) != null) {
        lastRead.set(System.nanoTime());
        if (line.isEmpty()) {
          if (data.length() > 0
              && !handler.test(new Event(type == null ? "message" : type, data.toString(), id)))
            return;
          type = null;
          id = null;
          data.setLength(0);
        } else if (line.startsWith("event:")) {
          type = field(line, 6);
        } else if (line.startsWith("id:")) {
          id = field(line, 3);
        } else if (line.startsWith("data:")) {
          if (data.length() > 0) data.append('\n');
          data.append(field(line, 5));
        }
        // ":" comments are keep-alives; "retry:" is not used by the engine
      }
      if (silent.get()) throw silence();
    } catch (IOException e) {
      throw silent.get() ? silence() : unreachable(e);
    } finally {
      watchdog.shutdownNow();
    }
  }

  private UnreachableException silence() {
    return new UnreachableException(
        "the engine at " + baseUrl + " sent nothing for " + streamSilence.toSeconds() + " s", null);
  }

  private static void closeQuietly(InputStream in) {
    try {
      in.close();
    } catch (IOException ignored) {
      // the reader fails next, which is the point
    }
  }

  private static String field(String line, int from) {
    return line.startsWith(" ", from) ? line.substring(from + 1) : line.substring(from);
  }

  private Reply send(String method, String path, JsonNode body, String idempotencyKey) {
    HttpRequest request =
        request(method, path, body, idempotencyKey).timeout(REQUEST_TIMEOUT).build();
    HttpResponse<String> response =
        call(request, HttpResponse.BodyHandlers.ofString(StandardCharsets.UTF_8));
    if (response.statusCode() >= 400) throw problem(response.statusCode(), response.body());
    return new Reply(response.statusCode(), response.body());
  }

  private HttpRequest.Builder request(
      String method, String path, JsonNode body, String idempotencyKey) {
    HttpRequest.Builder builder = HttpRequest.newBuilder(URI.create(baseUrl + path));
    if (bearer != null) builder.header("Authorization", "Bearer " + bearer);
    if (idempotencyKey != null) builder.header("Idempotency-Key", idempotencyKey);
    if (body != null) {
      builder.header("Content-Type", "application/json");
      builder.method(
          method, HttpRequest.BodyPublishers.ofString(body.toString(), StandardCharsets.UTF_8));
    } else {
      builder.method(method, HttpRequest.BodyPublishers.noBody());
    }
    return builder;
  }

  private <T> HttpResponse<T> call(HttpRequest request, HttpResponse.BodyHandler<T> handler) {
    try {
      return client.send(request, handler);
    } catch (IOException e) {
      throw unreachable(e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new CliException("interrupted", "interrupted while waiting for the engine");
    }
  }

  private UnreachableException unreachable(IOException e) {
    String why;
    String tls = CaBundle.describe(e);
    if (tls != null) why = tls;
    else if (e instanceof HttpConnectTimeoutException)
      why = "no connection within " + CONNECT_TIMEOUT.toSeconds() + " s";
    else if (e instanceof HttpTimeoutException)
      why = "no answer within " + REQUEST_TIMEOUT.toSeconds() + " s";
    else if (e instanceof ConnectException)
      why = e.getMessage() == null ? "connection refused" : e.getMessage();
    else why = e.getMessage() == null ? e.getClass().getSimpleName() : e.getMessage();
    return new UnreachableException("cannot reach the engine at " + baseUrl + ": " + why, e);
  }

  /**
   * The problem+json answer as a {@link CliException}; anything else (a proxy's HTML page) by its
   * status.
   */
  static CliException problem(int status, String body) {
    try {
      JsonNode node = JSON.readTree(body);
      if (node != null && node.hasNonNull("code")) {
        return new CliException(
            node.get("code").asText(),
            node.hasNonNull("detail") ? node.get("detail").asText() : "HTTP " + status);
      }
    } catch (IOException notJson) {
      // described below
    }
    String text = body == null ? "" : body.strip();
    int newline = text.indexOf('\n');
    if (newline >= 0) text = text.substring(0, newline);
    if (text.length() > 200) text = text.substring(0, 200) + "…";
    return new CliException(
        "http_" + status, text.isEmpty() ? "the engine answered HTTP " + status : text);
  }

  private static void pause(Duration duration) {
    try {
      Thread.sleep(duration.toMillis());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new CliException("interrupted", "interrupted while retrying");
    }
  }
}
