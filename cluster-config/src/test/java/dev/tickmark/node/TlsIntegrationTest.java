package dev.tickmark.node;

import static dev.tickmark.node.Eventually.eventually;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import dev.tickmark.agent.Agent;
import dev.tickmark.agent.AgentConfig;
import dev.tickmark.node.ApiClient.Customer;
import dev.tickmark.wire.CaBundle;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.net.Socket;
import java.net.SocketException;
import java.net.SocketTimeoutException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLSocket;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A node with {@code TICKMARK_TLS_CERT} / {@code TICKMARK_TLS_KEY} (a test CA's certificate for
 * 127.0.0.1): the API and the console over HTTPS with Strict-Transport-Security, TLS 1.3 preferred
 * and 1.2 accepted, no plain HTTP on the port, and the real agent over WSS trusting the CA through
 * {@code --ca}.
 */
class TlsIntegrationTest {
  static final String HSTS = "max-age=31536000";
  static final Duration WAIT = Duration.ofSeconds(30);

  @TempDir static Path temp;
  private static TestCertificates certificates;
  private static Node node;
  private static ApiClient api;
  private static Agent agent;

  @BeforeAll
  static void start() throws Exception {
    certificates = TestCertificates.create(temp.resolve("tls"), "EC");
    node =
        HostTestSupport.startNode(
            "tls",
            Map.of(
                "tickmark.http.tls.certificate", certificates.certificateFile().toString(),
                "tickmark.http.tls.private-key", certificates.keyFile().toString()));
    assertTrue(node.baseUrl().startsWith("https://127.0.0.1:"), node.baseUrl());
    api = new ApiClient(node.baseUrl(), CaBundle.sslContext(certificates.caFile()));
  }

  @AfterAll
  static void stop() throws Exception {
    if (agent != null) agent.close();
    if (node != null) node.close();
  }

  @Test
  void servesTheApiOverHttpsWithStrictTransportSecurity() {
    ApiClient.Reply health = api.get("/health", null).expect(200);
    assertEquals(HSTS, health.header("Strict-Transport-Security"));
    Customer renter = api.signUp("tls renter");
    ApiClient.Reply account = api.get("/v1/account", renter.apiKey()).expect(200);
    assertEquals(HSTS, account.header("Strict-Transport-Security"));
    // errors too: a problem answer from the router carries it
    ApiClient.Reply missing =
        api.get("/v1/no-such-thing", null).expectProblem(404, "no_such_route");
    assertEquals(HSTS, missing.header("Strict-Transport-Security"));
    // and a request too broken for any route, answered by the server itself (it had none)
    ApiClient.Reply tooLong =
        api.get("/v1/" + "a".repeat(3000), null).expectProblem(414, "uri_too_long");
    assertEquals(HSTS, tooLong.header("Strict-Transport-Security"));
  }

  @Test
  void servesTheConsoleOverHttps() {
    ApiClient.Reply console = api.get("/", null).expect(200);
    assertTrue(console.contentType().startsWith("text/html"), console.contentType());
    assertTrue(console.body().contains("<html") || console.body().contains("<!doctype"));
    assertEquals(HSTS, console.header("Strict-Transport-Security"));
  }

  @Test
  void prefersTls13AndAcceptsTls12() throws Exception {
    SSLContext trusting = CaBundle.sslContext(certificates.caFile());
    assertEquals("TLSv1.3", handshake(trusting, null));
    assertEquals("TLSv1.2", handshake(trusting, new String[] {"TLSv1.2"}));
  }

  @Test
  void plainHttpOnTheTlsPortFailsTheHandshake() throws Exception {
    try (Socket socket = new Socket("127.0.0.1", node.httpPort())) {
      socket.setSoTimeout(10_000);
      socket
          .getOutputStream()
          .write(
              "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
                  .getBytes(StandardCharsets.US_ASCII));
      String answer = readUntilClosed(socket.getInputStream());
      assertFalse(answer.startsWith("HTTP/"), "a plain HTTP answer: " + answer);
    }
    // and through an HTTP client: no response at all
    ApiClient plain = new ApiClient("http://127.0.0.1:" + node.httpPort());
    AssertionError failed =
        org.junit.jupiter.api.Assertions.assertThrows(
            AssertionError.class, () -> plain.get("/health", null));
    assertTrue(failed.getCause() instanceof IOException, String.valueOf(failed.getCause()));
  }

  @Test
  void theRealAgentConnectsOverWssWithItsCaAndHeartbeats() throws Exception {
    Customer provider = api.signUp("tls provider");
    String token = HostTestSupport.registrationToken(api, provider, "eu-nl").get("token").asText();
    agent =
        Agent.start(
            AgentConfig.simulated(
                    "wss://127.0.0.1:" + node.httpPort(),
                    token,
                    temp.resolve("agent"),
                    "h100-80gb:1")
                .withCa(certificates.caFile()));
    String hostId = agent.welcomed().get(WAIT.toSeconds(), TimeUnit.SECONDS).hostId();
    assertEquals("verified", agent.verified().get(WAIT.toSeconds(), TimeUnit.SECONDS).status());
    String[] firstBeat = new String[1];
    eventually(
        WAIT,
        () -> {
          JsonNode host = HostTestSupport.host(api, provider, hostId);
          assertTrue(host.get("online").asBoolean(), host.toString());
          assertNotNull(host.get("last_heartbeat_at").textValue(), host.toString());
          firstBeat[0] = host.get("last_heartbeat_at").asText();
        });
    // heartbeats keep arriving over the TLS session
    eventually(
        WAIT,
        () ->
            assertFalse(
                firstBeat[0].equals(
                    HostTestSupport.host(api, provider, hostId).get("last_heartbeat_at").asText()),
                "no newer heartbeat than " + firstBeat[0]));
  }

  /** The protocol a handshake with the node settles on, offering {@code protocols} (null: all). */
  private static String handshake(SSLContext context, String[] protocols) throws IOException {
    try (SSLSocket socket =
        (SSLSocket) context.getSocketFactory().createSocket("127.0.0.1", node.httpPort())) {
      socket.setSoTimeout(10_000);
      if (protocols != null) socket.setEnabledProtocols(protocols);
      socket.startHandshake();
      return socket.getSession().getProtocol();
    }
  }

  private static String readUntilClosed(InputStream in) throws IOException {
    ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    byte[] buffer = new byte[1024];
    try {
      int n;
      while ((n = in.read(buffer)) >= 0) bytes.write(buffer, 0, n);
    } catch (SocketException | SocketTimeoutException reset) {
      // the node dropped the connection: what arrived before is the answer
    }
    return bytes.toString(StandardCharsets.ISO_8859_1);
  }
}
