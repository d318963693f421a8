package dev.tickmark.node;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.tickmark.http.WebhookSignature;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * A small client for a node's real HTTP port: the JDK {@link HttpClient} and Jackson, nothing of
 * the server's own code except {@link WebhookSignature}, which plays the payment provider.
 */
final class ApiClient {
  static final ObjectMapper JSON = new ObjectMapper();

  /** One answer: status, content type, raw body and the headers. */
  record Reply(int status, String contentType, String body, java.net.http.HttpHeaders headers) {
    JsonNode json() {
      try {
        return JSON.readTree(body);
      } catch (IOException e) {
        throw new AssertionError("not JSON (" + status + "): " + body, e);
      }
    }

    String text(String field) {
      JsonNode node = json().get(field);
      return node == null || node.isNull() ? null : node.asText();
    }

    String header(String name) {
      return headers.firstValue(name).orElse(null);
    }

    Reply expect(int expected) {
      if (status != expected) fail("expected " + expected + " but got " + status + ": " + body);
      return this;
    }

    /** Asserts a problem+json answer with this status and stable code. */
    Reply expectProblem(int expected, String code) {
      expect(expected);
      assertTrue(
          contentType != null && contentType.startsWith("application/problem+json"),
          "content type " + contentType + " for " + body);
      assertEquals(code, text("code"), body);
      assertEquals(expected, json().get("status").asInt(), body);
      return this;
    }
  }

  private final HttpClient client;
  private final String baseUrl;
  private final WebhookSignature provider =
      new WebhookSignature(TestNodes.WEBHOOK_SECRET, Duration.ofMinutes(5));

  ApiClient(String baseUrl) {
    this(baseUrl, null);
  }

  /** For an {@code https://} node: {@code tls} trusts its CA (null: the system trust store). */
  ApiClient(String baseUrl, javax.net.ssl.SSLContext tls) {
    this.baseUrl = baseUrl;
    // the TLS handshake counts against the connect timeout: a loaded CI machine needs longer
    HttpClient.Builder builder =
        HttpClient.newBuilder()
            .version(HttpClient.Version.HTTP_1_1)
            .connectTimeout(Duration.ofSeconds(tls == null ? 5 : 20));
    if (tls != null) builder.sslContext(tls);
    this.client = builder.build();
  }

  Reply get(String path, String bearer) {
    return send("GET", path, bearer, null, Map.of());
  }

  Reply post(String path, String bearer, String body) {
    return send("POST", path, bearer, body, Map.of());
  }

  Reply put(String path, String bearer, String body) {
    return send("PUT", path, bearer, body, Map.of());
  }

  Reply delete(String path, String bearer) {
    return send("DELETE", path, bearer, null, Map.of());
  }

  Reply send(String method, String path, String bearer, String body, Map<String, String> headers) {
    return sendBytes(
        method, path, bearer, body == null ? null : body.getBytes(StandardCharsets.UTF_8), headers);
  }

  /**
   * A body over the node's 64 KiB limit is answered 413 and the connection closed while the client
   * may still be writing; the kernel then resets the connection and the client can lose the 413 it
   * was sent (seen about once in three CI runs). Such a request is sent again, up to three times:
   * the answer asserted on is still the node's.
   */
  private HttpResponse<String> sendOversizeAware(HttpRequest request, byte[] body)
      throws IOException, InterruptedException {
    int attempts = body != null && body.length > 64 * 1024 ? 3 : 1;
    for (int attempt = 1; ; attempt++) {
      try {
        return client.send(request, HttpResponse.BodyHandlers.ofString(StandardCharsets.UTF_8));
      } catch (IOException e) {
        if (attempt >= attempts) throw e;
      }
    }
  }

  Reply sendBytes(
      String method, String path, String bearer, byte[] body, Map<String, String> headers) {
    HttpRequest.Builder request =
        HttpRequest.newBuilder(URI.create(baseUrl + path)).timeout(Duration.ofSeconds(20));
    if (bearer != null) request.header("Authorization", "Bearer " + bearer);
    if (body != null) request.header("Content-Type", "application/json");
    headers.forEach(request::header);
    request.method(
        method,
        body == null
            ? HttpRequest.BodyPublishers.noBody()
            : HttpRequest.BodyPublishers.ofByteArray(body));
    try {
      HttpResponse<String> response = sendOversizeAware(request.build(), body);
      return new Reply(
          response.statusCode(),
          response.headers().firstValue("Content-Type").orElse(null),
          response.body(),
          response.headers());
    } catch (IOException e) {
      throw new AssertionError(method + " " + path + " failed: " + e, e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new AssertionError("interrupted", e);
    }
  }

  // ---- the resources the tests use --------------------------------------------------------------

  /** A signed-up account: its id and its first API key. */
  record Customer(String id, String apiKey) {
    String keyId() {
      return keyIdOf(apiKey);
    }
  }

  Customer signUp(String name) {
    Reply reply = post("/v1/accounts", null, "{\"name\":" + quote(name) + "}").expect(201);
    return new Customer(reply.json().get("account").get("id").asText(), reply.text("api_key"));
  }

  JsonNode account(String apiKey) {
    return get("/v1/account", apiKey).expect(200).json();
  }

  String balance(String apiKey) {
    return account(apiKey).get("balance").asText();
  }

  Reply opsDeposit(String accountId, String amount, String reference) {
    return post(
        "/ops/accounts/" + accountId + "/deposits",
        TestNodes.OPERATOR_TOKEN,
        "{\"amount\":" + quote(amount) + ",\"reference\":" + quote(reference) + "}");
  }

  JsonNode audit() {
    return get("/ops/ledger/audit", TestNodes.OPERATOR_TOKEN).expect(200).json();
  }

  JsonNode ledger(String apiKey, String query) {
    return get("/v1/account/ledger" + query, apiKey).expect(200).json();
  }

  static String paymentBody(
      String paymentId, String accountId, String amount, String currency, String status) {
    Map<String, String> body = new LinkedHashMap<>();
    body.put("payment_id", paymentId);
    body.put("account_id", accountId);
    body.put("amount", amount);
    body.put("currency", currency);
    body.put("status", status);
    try {
      return JSON.writeValueAsString(body);
    } catch (IOException e) {
      throw new IllegalStateException(e);
    }
  }

  /** Posts a webhook signed now with the node's secret. */
  Reply webhook(String body) {
    return webhookSignedAt(body, Instant.now().getEpochSecond());
  }

  Reply webhookSignedAt(String body, long unixSeconds) {
    byte[] bytes = body.getBytes(StandardCharsets.UTF_8);
    return webhookWithHeader(bytes, provider.header(unixSeconds, bytes));
  }

  Reply webhookWithHeader(byte[] body, String signatureHeader) {
    Map<String, String> headers =
        signatureHeader == null ? Map.of() : Map.of("Tickmark-Signature", signatureHeader);
    return sendBytes("POST", "/v1/payments/webhook", null, body, headers);
  }

  String signatureFor(byte[] body) {
    return provider.header(Instant.now().getEpochSecond(), body);
  }

  static String keyIdOf(String apiKey) {
    // tmk_<key id>_<secret>
    int split = apiKey.indexOf('_', 4);
    return apiKey.substring(4, split);
  }

  static String quote(String text) {
    try {
      return JSON.writeValueAsString(text);
    } catch (IOException e) {
      throw new IllegalStateException(e);
    }
  }
}
