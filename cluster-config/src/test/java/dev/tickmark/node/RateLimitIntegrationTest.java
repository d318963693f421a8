package dev.tickmark.node;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.tickmark.node.ApiClient.Customer;
import dev.tickmark.node.ApiClient.Reply;
import dev.tickmark.persistence.TestDatabase;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The API's rate limits on a real node with small real ones: an API key past its burst is answered
 * 429 rate_limited (problem+json, Retry-After in whole seconds) while other keys, even of the same
 * account, go on; sign-ups are limited per client address and another address is unaffected.
 */
class RateLimitIntegrationTest {
  /** Per key: 6 at once, then one every 4 s (no test here waits for a refill). */
  static final int KEY_BURST = 6;

  static final double KEY_PER_SECOND = 0.25;

  /** Per address: 3 sign-ups at once, then one every 20 s. */
  static final int ADDRESS_BURST = 3;

  static final double ADDRESS_PER_SECOND = 0.05;

  private static Node node;
  private static ApiClient api;

  @BeforeAll
  static void startNode() throws Exception {
    node =
        Node.start(
            TestNodes.settings(TestDatabase.fresh("rate_limits"))
                .withRateLimits(KEY_PER_SECOND, KEY_BURST, ADDRESS_PER_SECOND, ADDRESS_BURST));
    api = new ApiClient(node.baseUrl());
  }

  @AfterAll
  static void stopNode() throws Exception {
    if (node != null) node.close();
  }

  static void assertRateLimited(Reply reply) {
    reply.expectProblem(429, "rate_limited");
    String retryAfter = reply.header("Retry-After");
    assertTrue(
        retryAfter != null && retryAfter.matches("[1-9][0-9]*"),
        "Retry-After in whole seconds, at least 1: " + retryAfter);
  }

  @Test
  void aKeyPastItsBurstIsRefusedWhileOtherKeysGoOn() {
    Customer first = api.signUp("limited-1");
    Customer second = api.signUp("limited-2");
    // a second key of the same account: the limit is per key, not per account (1 request)
    String sameAccountKey =
        api.post("/v1/account/api-keys", first.apiKey(), "{\"label\":\"other\"}")
            .expect(201)
            .text("api_key");
    for (int i = 1; i < KEY_BURST; i++) api.get("/v1/account", first.apiKey()).expect(200);
    Reply refused = api.get("/v1/account", first.apiKey());
    assertRateLimited(refused);
    int retryAfter = Integer.parseInt(refused.header("Retry-After"));
    assertTrue(retryAfter <= Math.ceil(1 / KEY_PER_SECOND), "Retry-After " + retryAfter);
    // every route that takes a key counts against it, whatever it would have answered
    assertRateLimited(api.get("/v1/rentals", first.apiKey()));
    assertRateLimited(api.post("/v1/rentals", first.apiKey(), "{}"));

    api.get("/v1/account", second.apiKey()).expect(200);
    api.get("/v1/account", sameAccountKey).expect(200);
    // a made-up key of the right shape is counted (and refused) on its own
    api.get("/v1/account", "tmk_abcdef_" + "0".repeat(48)).expectProblem(401, "unauthorized");
  }

  @Test
  void signUpsAreLimitedPerClientAddress() throws Exception {
    // 127.0.0.3 signs up as often as the burst allows, then is refused
    String body = "{\"name\":\"from-127.0.0.3\"}";
    for (int i = 0; i < ADDRESS_BURST; i++)
      assertEquals(201, rawPost("127.0.0.3", "/v1/accounts", body).status, "sign-up " + i);
    RawReply refused = rawPost("127.0.0.3", "/v1/accounts", body);
    assertEquals(429, refused.status, refused.text);
    assertTrue(refused.text.contains("application/problem+json"), refused.text);
    assertTrue(refused.text.contains("\"code\":\"rate_limited\""), refused.text);
    assertTrue(refused.text.matches("(?s).*\r\nretry-after: [1-9][0-9]*\r\n.*"), refused.text);
    // another address is unaffected, and so is a key's request from the refused one
    assertEquals(201, rawPost("127.0.0.4", "/v1/accounts", body).status);
    Customer c = api.signUp("keyed");
    api.get("/v1/account", c.apiKey()).expect(200);
    // a forged X-Forwarded-For does not buy another address (no trusted proxy is configured)
    RawReply forged =
        rawPost("127.0.0.3", "/v1/accounts", body, "X-Forwarded-For: 198.51.100.7\r\n");
    assertEquals(429, forged.status, forged.text);
  }

  record RawReply(int status, String text) {}

  static RawReply rawPost(String from, String path, String body) throws IOException {
    return rawPost(from, path, body, "");
  }

  /**
   * One HTTP/1.1 request from a chosen loopback address (the JDK's HttpClient cannot pick its
   * source address): the node counts sign-ups by the TCP peer.
   */
  static RawReply rawPost(String from, String path, String body, String extraHeaders)
      throws IOException {
    byte[] bytes = body.getBytes(StandardCharsets.UTF_8);
    try (Socket socket = new Socket()) {
      socket.bind(new InetSocketAddress(InetAddress.getByName(from), 0));
      socket.connect(new InetSocketAddress("127.0.0.1", node.httpPort()), 5_000);
      socket.setSoTimeout(20_000);
      OutputStream out = socket.getOutputStream();
      out.write(
          ("POST "
                  + path
                  + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                  + "Content-Length: "
                  + bytes.length
                  + "\r\n"
                  + extraHeaders
                  + "Connection: close\r\n\r\n")
              .getBytes(StandardCharsets.US_ASCII));
      out.write(bytes);
      out.flush();
      InputStream in = socket.getInputStream();
      ByteArrayOutputStream response = new ByteArrayOutputStream();
      in.transferTo(response);
      String text = response.toString(StandardCharsets.UTF_8);
      int status = Integer.parseInt(text.substring(9, 12));
      // header names as the node writes them, lower-cased for the match above
      String[] parts = text.split("\r\n\r\n", 2);
      return new RawReply(
          status, parts[0].toLowerCase(java.util.Locale.ROOT) + "\r\n\r\n" + parts[1]);
    }
  }
}
