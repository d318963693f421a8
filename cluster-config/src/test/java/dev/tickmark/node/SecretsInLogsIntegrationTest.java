package dev.tickmark.node;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.LoggerContext;
import ch.qos.logback.classic.encoder.PatternLayoutEncoder;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.OutputStreamAppender;
import com.fasterxml.jackson.databind.JsonNode;
import dev.tickmark.agent.Agent;
import dev.tickmark.agent.AgentConfig;
import dev.tickmark.node.ApiClient.Customer;
import dev.tickmark.wire.Ed25519;
import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.slf4j.LoggerFactory;

/**
 * No key, token or secret ever reaches a log: a whole flow on a real node (sign-up, keys, operator
 * actions with the shared and a named token, a signed payment webhook, a host enrolled by a test
 * agent and one by the real agent, a rental run and stopped, failed authentications with wrong
 * secrets) with every log line of the JVM (node, agent, Pekko, libraries; our own code at DEBUG)
 * captured, then searched for each secret that passed through.
 */
class SecretsInLogsIntegrationTest {
  static final String ALICE = "tmkop_alice_fedcba9876543210fedcba9876543210";

  @Test
  void noSecretThatPassedThroughAFullFlowAppearsInTheLogs() throws Exception {
    Map<String, String> secrets = new LinkedHashMap<>();
    secrets.put("operator token", TestNodes.OPERATOR_TOKEN);
    secrets.put("named operator token", ALICE);
    secrets.put("webhook secret", TestNodes.WEBHOOK_SECRET);
    String log;
    try (LogCapture capture = LogCapture.start()) {
      Path temp = Files.createTempDirectory("tickmark-secrets");
      try (Node node =
          Node.start(
              RentingSupport.renting(
                  TestNodes.settings(
                      dev.tickmark.persistence.TestDatabase.fresh("secrets_in_logs"),
                      Map.of("TICKMARK_OPERATOR_TOKENS", "alice:" + ALICE))))) {
        ApiClient api = new ApiClient(node.baseUrl());
        flow(node, api, temp, secrets);
      }
      log = capture.text();
    }
    assertTrue(log.contains("Tickmark node up"), "the capture saw the node's log:\n" + log);
    assertTrue(log.length() > 2_000, "a whole run's log, not a few lines: " + log.length());
    for (Map.Entry<String, String> s : secrets.entrySet()) {
      assertTrue(!log.contains(s.getValue()), s.getKey() + " is in the log");
      String secretPart = s.getValue().substring(s.getValue().lastIndexOf('_') + 1);
      if (secretPart.length() >= 24)
        assertTrue(
            !log.contains(secretPart), "the secret part of the " + s.getKey() + " is in the log");
    }
    assertTrue(secrets.size() >= 11, "secrets checked: " + secrets.keySet());
  }

  private static void flow(Node node, ApiClient api, Path temp, Map<String, String> secrets)
      throws Exception {
    Customer provider = api.signUp("Provider");
    Customer renter = api.signUp("Renter");
    secrets.put("provider's API key", provider.apiKey());
    secrets.put("renter's API key", renter.apiKey());
    String extraKey =
        api.post(
                "/v1/account/api-keys", renter.apiKey(), "{\"label\":\"ci\",\"expires_in_days\":7}")
            .expect(201)
            .text("api_key");
    secrets.put("created API key", extraKey);
    api.get("/v1/account/api-keys", extraKey).expect(200);

    // money in: an operator deposit, a named operator's suspend and resume, a signed webhook
    api.opsDeposit(renter.id(), "20.00", "welcome").expect(201);
    api.post("/ops/accounts/" + renter.id() + "/suspend", ALICE, "{\"reason\":\"kyc\"}")
        .expect(200);
    api.post("/ops/accounts/" + renter.id() + "/resume", ALICE, null).expect(200);
    api.webhook(ApiClient.paymentBody("pay_secrets_1", renter.id(), "5.00", "EUR", "succeeded"))
        .expect(200);
    api.get("/ops/audit", ALICE).expect(200);

    // failed authentications carrying secrets: a real key id with a wrong secret, the operator's
    // token on a customer route, a customer key on /ops
    String wrongSecret = "tmk_" + renter.keyId() + "_" + "ab".repeat(24);
    secrets.put("a wrong secret for a real key id", wrongSecret);
    api.get("/v1/account", wrongSecret).expectProblem(401, "unauthorized");
    api.get("/v1/account", TestNodes.OPERATOR_TOKEN).expectProblem(401, "unauthorized");
    api.get("/ops/audit", renter.apiKey()).expectProblem(401, "unauthorized");

    // a host enrolled by a test agent: its registration token and the credential it is given
    JsonNode token = HostTestSupport.registrationToken(api, provider, "eu-de");
    secrets.put("registration token (test agent)", token.get("token").asText());
    AgentTestClient testAgent =
        AgentTestClient.connect(node, token.get("token").asText(), Ed25519.generate());
    String credential = testAgent.handshake().get("host_credential").asText();
    secrets.put("host credential (test agent)", credential);
    testAgent.closeNormally();
    // its last hex digit changed (setting the last two to "00" was the credential itself 1 time in
    // 256)
    char last = credential.charAt(credential.length() - 1);
    AgentTestClient.refusedUpgrade(
        node,
        "Bearer " + credential.substring(0, credential.length() - 1) + (last == '0' ? '1' : '0'));

    // a host enrolled by the real agent, and a rental on it
    String realToken =
        api.post("/v1/hosts/registration-tokens", provider.apiKey(), "{\"region\":\"eu-nl\"}")
            .expect(201)
            .text("token");
    secrets.put("registration token (agent)", realToken);
    Path state = temp.resolve("agent");
    try (Agent agent =
        Agent.start(
            AgentConfig.simulated(
                "ws://127.0.0.1:" + node.httpPort(), realToken, state, "h100-80gb:1"))) {
      String hostId =
          agent.welcomed().get(RentingSupport.WAIT.toSeconds(), TimeUnit.SECONDS).hostId();
      assertEquals(
          "verified",
          agent.verified().get(RentingSupport.WAIT.toSeconds(), TimeUnit.SECONDS).status());
      secrets.put(
          "host credential (agent)",
          Files.readString(state.resolve("host-credential"), StandardCharsets.UTF_8).strip());
      api.put(
              "/v1/hosts/" + hostId + "/listing",
              provider.apiKey(),
              "{\"on_demand_price_per_gpu_hour\":\"" + RentingSupport.PRICE + "\",\"listed\":true}")
          .expect(200);
      Eventually.eventually(
          RentingSupport.WAIT,
          () ->
              assertTrue(
                  api.get("/v1/offers?region=eu-nl", null).expect(200).json().get("offers").size()
                      > 0));
      String rentalId = RentingSupport.launch(api, renter, "eu-nl");
      RentingSupport.awaitStatus(api, renter, rentalId, "running");
      api.post("/v1/rentals/" + rentalId + "/stop", renter.apiKey(), null).expect(202);
      RentingSupport.awaitStatus(api, renter, rentalId, "ended");
    }
  }

  /**
   * Every logging event of the JVM, formatted with its stack trace, into memory; our own loggers at
   * DEBUG meanwhile.
   */
  static final class LogCapture implements AutoCloseable {
    private final ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    private final OutputStreamAppender<ILoggingEvent> appender = new OutputStreamAppender<>();
    private final Logger root;
    private final Logger ours;
    private final Level oursBefore;

    private LogCapture() {
      LoggerContext context = (LoggerContext) LoggerFactory.getILoggerFactory();
      PatternLayoutEncoder encoder = new PatternLayoutEncoder();
      encoder.setContext(context);
      encoder.setPattern("%level %logger %mdc - %msg%n%ex{full}");
      encoder.start();
      appender.setContext(context);
      appender.setEncoder(encoder);
      appender.setOutputStream(bytes);
      appender.start();
      root = context.getLogger(org.slf4j.Logger.ROOT_LOGGER_NAME);
      root.addAppender(appender);
      ours = context.getLogger("dev.tickmark");
      oursBefore = ours.getLevel();
      ours.setLevel(Level.DEBUG);
    }

    static LogCapture start() {
      return new LogCapture();
    }

    String text() {
      synchronized (bytes) {
        return bytes.toString(StandardCharsets.UTF_8);
      }
    }

    @Override
    public void close() {
      root.detachAppender(appender);
      appender.stop();
      ours.setLevel(oursBefore);
    }
  }
}
