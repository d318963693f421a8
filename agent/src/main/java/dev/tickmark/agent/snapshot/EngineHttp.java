package dev.tickmark.agent.snapshot;

import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.tickmark.wire.Frames;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.Locale;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * HTTP requests to the engine the agent is connected to, with its host credential, retried on
 * transient errors (no connection, a broken one, 5xx, 429) with a growing delay, a bounded number
 * of times in a row. Blocking: called on the snapshots' own threads.
 */
public final class EngineHttp {
  /**
   * Delays between attempts: {@code first} doubling up to {@code max}, {@code attempts} in a row.
   */
  public record Retry(int attempts, Duration first, Duration max) {
    public static final Retry DEFAULT =
        new Retry(8, Duration.ofMillis(500), Duration.ofSeconds(30));

    Duration delay(int failures) {
      long ms = first.toMillis() << Math.min(failures, 20);
      return Duration.ofMillis(Math.min(ms, max.toMillis()));
    }
  }

  /**
   * Where and as whom: the engine's websocket base address and the bearer, read at each request.
   */
  public interface Endpoint {
    /** {@code ws(s)://host:port[/base]} of the engine connected to now (or last); null if none. */
    URI engine();

    String bearer();
  }

  /** The engine could not be reached (or kept failing) {@link Retry#attempts} times in a row. */
  static final class Unavailable extends IOException {
    Unavailable(String message, Throwable cause) {
      super(message, cause);
    }
  }

  static final Duration REQUEST_TIMEOUT = Duration.ofMinutes(2);

  /** Engine answers are read leniently: a newer engine may add fields. */
  static final ObjectMapper JSON =
      Frames.MAPPER.copy().disable(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES);

  private static final Logger log = LoggerFactory.getLogger(EngineHttp.class);

  private final HttpClient http;
  private final Endpoint endpoint;
  private final Retry retry;

  EngineHttp(HttpClient http, Endpoint endpoint, Retry retry) {
    this.http = http;
    this.endpoint = endpoint;
    this.retry = retry;
  }

  /** {@code http(s)://host:port[/base]} for {@code ws(s)://host:port[/base]}. */
  static URI httpBase(URI engine) {
    String scheme = engine.getScheme() == null ? "" : engine.getScheme().toLowerCase(Locale.ROOT);
    String http =
        switch (scheme) {
          case "ws", "http" -> "http";
          case "wss", "https" -> "https";
          default -> throw new IllegalArgumentException("not an engine address: " + engine);
        };
    String path = engine.getRawPath() == null ? "" : engine.getRawPath();
    while (path.endsWith("/")) path = path.substring(0, path.length() - 1);
    return URI.create(http + "://" + engine.getRawAuthority() + path);
  }

  /** A request to {@code path} (from the base) with the credential; the caller adds the method. */
  HttpRequest.Builder request(String path) throws Unavailable {
    URI engine = endpoint.engine();
    if (engine == null) throw new Unavailable("not connected to an engine", null);
    return HttpRequest.newBuilder(URI.create(httpBase(engine) + path))
        .timeout(REQUEST_TIMEOUT)
        .header("Authorization", "Bearer " + endpoint.bearer());
  }

  /**
   * Sends the request {@code make} builds (again at each attempt: the engine may change with a
   * reconnect) until it gets an answer that is not transient; throws {@link Unavailable} after
   * {@link Retry#attempts} transient failures in a row.
   */
  <T> HttpResponse<T> send(
      String what, Supplier<HttpRequest> make, HttpResponse.BodyHandler<T> body)
      throws Unavailable, InterruptedException {
    Throwable last = null;
    for (int failures = 0; failures < retry.attempts(); failures++) {
      if (failures > 0) {
        Duration d = retry.delay(failures - 1);
        log.info("{}: {}; again in {} ms", what, describe(last), d.toMillis());
        Thread.sleep(d.toMillis()); // backoff between attempts (not a test synchronisation)
      }
      try {
        HttpResponse<T> r = http.send(make.get(), body);
        if (r.statusCode() >= 500 || r.statusCode() == 429) {
          if (r.body() instanceof AutoCloseable unread)
            closeQuietly(unread); // frees the connection
          last = new IOException("HTTP " + r.statusCode());
          continue;
        }
        return r;
      } catch (IOException | UncheckedUnavailable e) {
        if (Thread.currentThread().isInterrupted()) throw new InterruptedException();
        last = e instanceof UncheckedUnavailable u ? u.getCause() : e;
      }
    }
    throw new Unavailable(what + ": " + describe(last), last);
  }

  /** {@link #request} for use inside a supplier. */
  HttpRequest.Builder requestUnchecked(String path) {
    try {
      return request(path);
    } catch (Unavailable e) {
      throw new UncheckedUnavailable(e);
    }
  }

  private static final class UncheckedUnavailable extends RuntimeException {
    UncheckedUnavailable(Unavailable cause) {
      super(cause);
    }
  }

  private static void closeQuietly(AutoCloseable c) {
    try {
      c.close();
    } catch (Exception ignored) {
      // an answer we do not read
    }
  }

  /** The {@code code} of a problem+json body, or null. */
  static String problemCode(String body) {
    if (body == null || body.isBlank()) return null;
    try {
      JsonNode n = JSON.readTree(body);
      return n.hasNonNull("code") ? n.get("code").asText() : null;
    } catch (IOException | RuntimeException e) {
      return null;
    }
  }

  static String describe(Throwable t) {
    if (t == null) return "failed";
    if (t instanceof java.net.ConnectException) return "cannot connect";
    return t.getMessage() != null ? t.getMessage() : t.getClass().getSimpleName();
  }
}
