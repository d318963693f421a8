package dev.tickmark.node;

import static dev.tickmark.node.Eventually.eventually;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import dev.tickmark.node.ApiClient.Customer;
import dev.tickmark.node.ApiClient.Reply;
import dev.tickmark.node.HostTestSupport.Registered;
import dev.tickmark.wire.Ed25519;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.stream.Collectors;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * A provider's host on a real node, over real HTTP and a real agent websocket: registration with a
 * one-time token, the signed hardware check, the listing and the anonymous offers it makes, health
 * by heartbeat, drain and removal, the operator's controls, and isolation between accounts. The
 * tests share one node; each that looks at offers owns a region, so they never see each other's
 * capacity.
 */
class HostRegistrationIntegrationTest {
  private static Node node;
  private static ApiClient api;
  private static final List<AgentTestClient> agents = new CopyOnWriteArrayList<>();

  @BeforeAll
  static void start() throws Exception {
    node = HostTestSupport.startNode("host_registration");
    api = new ApiClient(node.baseUrl());
  }

  @AfterAll
  static void stop() throws Exception {
    agents.forEach(AgentTestClient::close);
    if (node != null) node.close();
  }

  private static Registered verifiedHost(Customer provider, String region) {
    Registered host = HostTestSupport.verifiedHost(node, api, provider, region);
    agents.add(host.agent());
    return host;
  }

  private static AgentTestClient connect(String bearer, java.security.KeyPair key) {
    AgentTestClient agent = AgentTestClient.connect(node, bearer, key);
    agents.add(agent);
    return agent;
  }

  private static Map<String, JsonNode> checksByName(JsonNode checks) {
    Map<String, JsonNode> byName = new java.util.LinkedHashMap<>();
    checks.forEach(c -> byName.put(c.get("check").asText(), c));
    return byName;
  }

  private static List<String> tiers(List<JsonNode> offers) {
    return offers.stream().map(o -> o.get("tier").asText()).sorted().toList();
  }

  // ---- registration tokens --------------------------------------------------------------------

  @Test
  void aRegistrationTokenIsNeverCached() {
    Customer provider = api.signUp("no-store-provider");
    ApiClient.Reply token =
        api.post("/v1/hosts/registration-tokens", provider.apiKey(), "{\"region\":\"eu-nl\"}")
            .expect(201);
    assertTrue(token.text("token").startsWith("tmkreg_"), token.body());
    assertEquals("no-store", token.header("Cache-Control"));
  }

  @Test
  void aRegistrationTokenNeedsAKnownRegion() {
    Customer provider = api.signUp("token-provider");
    api.post("/v1/hosts/registration-tokens", provider.apiKey(), "{\"region\":\"moon-1\"}")
        .expectProblem(400, "unknown_region");
    api.post("/v1/hosts/registration-tokens", provider.apiKey(), "{\"label\":\"no region\"}")
        .expectProblem(400, "unknown_region");
    api.post(
            "/v1/hosts/registration-tokens",
            provider.apiKey(),
            "{\"region\":\"eu-nl\",\"colour\":\"red\"}")
        .expectProblem(400, "unknown_field");
    api.post("/v1/hosts/registration-tokens", null, "{\"region\":\"eu-nl\"}")
        .expectProblem(401, "unauthorized");

    JsonNode token = HostTestSupport.registrationToken(api, provider, "eu-nl");
    String hostId = token.get("host_id").asText();
    assertTrue(token.get("token").asText().startsWith("tmkreg_" + hostId + "_"), token.toString());
    assertEquals("eu-nl", token.get("region").asText());
    assertEquals("rack-1/node-1", token.get("label").asText());
    Duration validity =
        Duration.between(Instant.now(), Instant.parse(token.get("expires_at").asText()));
    assertTrue(
        validity.compareTo(Duration.ofHours(23)) > 0
            && validity.compareTo(Duration.ofHours(25)) < 0,
        token.toString());
    // the invited host is the provider's, and only the provider's, before any agent connected
    JsonNode invited = HostTestSupport.host(api, provider, hostId);
    assertEquals("invited", invited.get("status").asText());
    assertFalse(invited.get("online").asBoolean());
    api.get("/v1/hosts/" + hostId, api.signUp("token-stranger").apiKey())
        .expectProblem(404, "not_found");
  }

  // ---- the whole way to the market ------------------------------------------------------------

  @Test
  void aHostRegistersVerifiesListsAndIsOfferedWithoutItsIdentity() {
    String region = "eu-nl";
    Customer provider = api.signUp("nl-provider");
    JsonNode token = HostTestSupport.registrationToken(api, provider, region);
    String hostId = token.get("host_id").asText();

    var key = Ed25519.generate();
    AgentTestClient agent = connect(token.get("token").asText(), key);
    JsonNode challenge = agent.expect("challenge");
    assertEquals(
        32,
        java.util.Base64.getDecoder().decode(challenge.get("nonce").asText()).length,
        challenge.toString());
    agent.send(
        new dev.tickmark.wire.AgentFrame.Hello(
            Ed25519.sign(key.getPrivate(), Ed25519.helloMessage(challenge.get("nonce").asText())),
            "test-0.1",
            Ed25519.encodePublic(key.getPublic())));
    JsonNode welcome = agent.expect("welcome");
    assertEquals(hostId, welcome.get("host_id").asText());
    String credential = welcome.get("host_credential").asText();
    assertTrue(credential.startsWith("tmkhost_" + hostId + "_"), welcome.toString());
    assertEquals(1, welcome.get("heartbeat_interval_s").asInt(), welcome.toString());

    JsonNode registered = HostTestSupport.host(api, provider, hostId);
    assertEquals(
        "verifying",
        registered.get("status").asText(),
        "connected, not yet verified: " + registered);
    assertTrue(registered.get("online").asBoolean());

    JsonNode verdict = agent.verify(AgentTestClient.simulatedReport());
    assertEquals("verified", verdict.get("status").asText(), verdict.toString());
    Map<String, JsonNode> checks = checksByName(verdict.get("checks"));
    for (String check :
        List.of(
            "signature",
            "simulated",
            "gpus_present",
            "gpus_unique",
            "gpus_uniform",
            "gpu[0].model",
            "gpu[1].model",
            "gpu[0].vram",
            "gpu[0].driver",
            "gpu[0].temperature",
            "gpu[0].ecc",
            "ram",
            "disk_free",
            "disk_write")) {
      assertNotNull(checks.get(check), "check " + check + " in " + verdict);
      assertEquals("pass", checks.get(check).get("status").asText(), checks.get(check).toString());
    }
    assertEquals(
        "not_measured",
        checks.get("benchmark").get("status").asText(),
        "no benchmark ran: " + checks.get("benchmark"));
    checks
        .values()
        .forEach(
            c -> {
              assertNotNull(c.get("observed"), c.toString());
              assertNotNull(c.get("expected"), c.toString());
            });
    agent.startHeartbeats(HostTestSupport.HEARTBEAT_PERIOD);

    JsonNode host = HostTestSupport.host(api, provider, hostId);
    assertEquals(hostId, host.get("id").asText());
    assertEquals("verified", host.get("status").asText(), host.toString());
    assertTrue(host.get("online").asBoolean());
    assertTrue(host.get("simulated").asBoolean());
    assertFalse(host.get("listed").asBoolean());
    assertFalse(host.get("draining").asBoolean());
    assertEquals("h100-80gb", host.get("gpu").asText());
    assertEquals(region, host.get("region").asText());
    assertEquals("rack-1/node-1", host.get("label").asText());
    assertEquals(2, host.get("cards").size(), host.toString());
    host.get("cards")
        .forEach(
            card -> {
              assertEquals("free", card.get("state").asText());
              assertEquals("h100-80gb", card.get("gpu").asText());
            });
    assertEquals(checks.keySet(), checksByName(host.get("verification")).keySet());
    assertNotNull(host.get("last_heartbeat_at").asText(null));

    eventually(
        HostTestSupport.READ_SIDE,
        () -> {
          JsonNode mine = api.get("/v1/hosts", provider.apiKey()).expect(200).json().get("hosts");
          assertEquals(1, mine.size(), mine.toString());
          JsonNode summary = mine.get(0);
          assertEquals(hostId, summary.get("id").asText());
          assertEquals("verified", summary.get("status").asText());
          assertTrue(summary.get("online").asBoolean());
          assertTrue(summary.get("simulated").asBoolean());
          assertEquals(2, summary.get("cards_free").asInt());
        });
    HostTestSupport.assertNoOffersIn(api, region); // verified and online, but not listed yet

    // listing: a JSON number, 7 decimals or a negative price are refused; prices are strings
    String listingPath = "/v1/hosts/" + hostId + "/listing";
    api.put(
            listingPath,
            provider.apiKey(),
            "{\"on_demand_price_per_gpu_hour\":2.1,\"listed\":true}")
        .expectProblem(400, "invalid_amount");
    api.put(
            listingPath,
            provider.apiKey(),
            "{\"on_demand_price_per_gpu_hour\":\"2.1000001\",\"listed\":true}")
        .expectProblem(400, "invalid_amount");
    api.put(
            listingPath,
            provider.apiKey(),
            "{\"on_demand_price_per_gpu_hour\":\"-2\",\"listed\":true}")
        .expectProblem(400, "invalid_amount");
    api.put(
            listingPath,
            provider.apiKey(),
            "{\"on_demand_price_per_gpu_hour\":\"2.10\",\"spot_price_per_gpu_hour\":1.2,\"listed\":true}")
        .expectProblem(400, "invalid_amount");
    api.put(
            listingPath,
            provider.apiKey(),
            "{\"on_demand_price_per_gpu_hour\":\"2.10\",\"spot_notice_seconds\":5,\"listed\":true}")
        .expectProblem(400, "invalid_listing");
    JsonNode listed = HostTestSupport.list(api, provider, hostId, "2.10", "1.20");
    assertEquals(
        "2.100000",
        listed.get("listing").get("on_demand_price_per_gpu_hour").asText(),
        listed.toString());
    assertEquals("1.200000", listed.get("listing").get("spot_price_per_gpu_hour").asText());
    assertEquals(300, listed.get("listing").get("spot_notice_seconds").asInt());
    assertTrue(listed.get("listed").asBoolean());

    eventually(
        HostTestSupport.READ_SIDE,
        () ->
            assertEquals(
                List.of("on_demand", "spot"), tiers(HostTestSupport.offersIn(api, "", region))));
    Reply all = api.get("/v1/offers", null).expect(200);
    for (JsonNode offer : HostTestSupport.offersIn(api, "", region)) {
      assertEquals("h100-80gb", offer.get("gpu").asText());
      assertEquals(2, offer.get("available_cards").asInt());
      assertEquals(1, offer.get("hosts").asInt());
      assertTrue(offer.get("simulated").asBoolean());
      assertEquals(
          offer.get("tier").asText().equals("spot") ? "1.200000" : "2.100000",
          offer.get("lowest_price_per_gpu_hour").asText());
      java.util.Set<String> fields = new java.util.TreeSet<>();
      offer.fieldNames().forEachRemaining(fields::add);
      assertEquals(
          new java.util.TreeSet<>(
              List.of(
                  "gpu",
                  "region",
                  "tier",
                  "available_cards",
                  "lowest_price_per_gpu_hour",
                  "hosts",
                  "simulated")),
          fields,
          "an offer has these fields and no others");
    }
    assertFalse(all.body().contains(hostId), "offers never name a host: " + all.body());
    assertFalse(all.body().contains("host_"), "offers never name a host: " + all.body());
    assertFalse(all.body().contains(provider.id()), "offers never name a provider: " + all.body());

    // filters
    assertEquals(
        List.of("on_demand", "spot"),
        tiers(HostTestSupport.offersIn(api, "?gpu=h100-80gb", region)));
    assertEquals(List.of(), tiers(HostTestSupport.offersIn(api, "?gpu=a100-80gb", region)));
    assertEquals(
        List.of("on_demand", "spot"),
        tiers(HostTestSupport.offersIn(api, "?region=" + region, region)));
    JsonNode elsewhere = api.get("/v1/offers?region=eu-de", null).expect(200).json().get("offers");
    elsewhere.forEach(o -> assertEquals("eu-de", o.get("region").asText()));
    assertEquals(List.of("spot"), tiers(HostTestSupport.offersIn(api, "?tier=spot", region)));
    assertEquals(
        List.of("on_demand"), tiers(HostTestSupport.offersIn(api, "?tier=on_demand", region)));
    assertEquals(List.of("spot"), tiers(HostTestSupport.offersIn(api, "?max_price=1.50", region)));
    assertEquals(
        List.of("on_demand", "spot"),
        tiers(HostTestSupport.offersIn(api, "?max_price=2.10", region)),
        "floor = ceiling matches");
    assertEquals(
        List.of("spot"),
        tiers(
            HostTestSupport.offersIn(
                api, "?max_price=1.20&tier=spot&gpu=h100-80gb&region=" + region, region)));
    assertEquals(List.of(), tiers(HostTestSupport.offersIn(api, "?max_price=1.199999", region)));
    api.get("/v1/offers?gpu=nope", null).expectProblem(400, "unknown_gpu");
    api.get("/v1/offers?region=nope", null).expectProblem(400, "unknown_region");
    api.get("/v1/offers?tier=cheap", null).expectProblem(400, "invalid_tier");
    api.get("/v1/offers?max_price=-1", null).expectProblem(400, "invalid_amount");
    api.get("/v1/offers?max_price=abc", null).expectProblem(400, "invalid_amount");

    // listed: false takes it off the market, listed: true brings it back
    api.put(
            listingPath,
            provider.apiKey(),
            "{\"on_demand_price_per_gpu_hour\":\"2.10\",\"listed\":false}")
        .expect(200);
    eventually(HostTestSupport.READ_SIDE, () -> HostTestSupport.assertNoOffersIn(api, region));
    HostTestSupport.list(api, provider, hostId, "2.10", null);
    eventually(
        HostTestSupport.READ_SIDE,
        () -> assertEquals(List.of("on_demand"), tiers(HostTestSupport.offersIn(api, "", region))));
  }

  // ---- sessions: reconnect, spent token, pinned key, replacement -------------------------------

  /**
   * Real GPUs whose agent runs rentals without isolation ({@code --runtime process
   * --allow-unsandboxed}: a workload could read the agent's key and credential and the other
   * rentals' workspaces) fail the {@code isolation} check, so the host never reaches the market;
   * the same machine with a sandbox passes, and says whether rentals can have network there.
   */
  @Test
  void realGpusWhoseAgentDoesNotIsolateRentalsFailVerification() {
    Customer provider = api.signUp("isolation-provider");
    HostTestSupport.Registered unisolated =
        HostTestSupport.register(node, api, provider, "us-west");
    JsonNode failed =
        unisolated
            .agent()
            .verify(
                AgentTestClient.report(false, "550.54.15")
                    .withRuntime(
                        new dev.tickmark.wire.HardwareReport.WorkloadRuntime("process", true)));
    assertEquals("failed", failed.get("status").asText(), failed.toString());
    JsonNode isolation = checksByName(failed.get("checks")).get("isolation");
    assertEquals("fail", isolation.get("status").asText(), isolation.toString());
    assertTrue(
        isolation.get("observed").asText().startsWith("process: rentals are not isolated"),
        isolation.toString());
    JsonNode shown = HostTestSupport.host(api, provider, unisolated.hostId());
    assertEquals("failed", shown.get("status").asText(), shown.toString());
    assertEquals("process", shown.at("/runtime/name").asText(), shown.toString());
    Eventually.eventually(
        HostTestSupport.READ_SIDE,
        () -> {
          JsonNode listed = null;
          for (JsonNode h : api.get("/v1/hosts", provider.apiKey()).expect(200).json().get("hosts"))
            if (h.get("id").asText().equals(unisolated.hostId())) listed = h;
          assertEquals("process", listed.at("/runtime/name").asText(), String.valueOf(listed));
          assertEquals("failed", listed.get("status").asText());
        });

    HostTestSupport.Registered sandboxed = HostTestSupport.register(node, api, provider, "us-west");
    JsonNode verified =
        sandboxed
            .agent()
            .verify(
                AgentTestClient.report(false, "550.54.15")
                    .withRuntime(
                        new dev.tickmark.wire.HardwareReport.WorkloadRuntime("sandbox", false)));
    assertEquals("verified", verified.get("status").asText(), verified.toString());
    JsonNode passed = checksByName(verified.get("checks")).get("isolation");
    assertEquals("pass", passed.get("status").asText(), passed.toString());
    assertEquals(
        "sandbox: rentals isolated; no network for rentals (a sandbox needs slirp4netns)",
        passed.get("observed").asText());
    unisolated.agent().close();
    sandboxed.agent().close();
  }

  @Test
  void theCredentialReconnectsOnlyWithThePinnedKeyAndANewSessionReplacesTheOld() throws Exception {
    Customer provider = api.signUp("session-provider");
    JsonNode token = HostTestSupport.registrationToken(api, provider, "us-west");
    var key = Ed25519.generate();
    AgentTestClient first = connect(token.get("token").asText(), key);
    JsonNode welcome = first.handshake();
    String hostId = welcome.get("host_id").asText();
    String credential = welcome.get("host_credential").asText();
    first.closeNormally();

    // the same key with the credential: welcomed, no new credential
    AgentTestClient again = connect(credential, key);
    JsonNode rewelcome = again.handshake();
    assertEquals(hostId, rewelcome.get("host_id").asText());
    assertFalse(rewelcome.has("host_credential"), rewelcome.toString());
    assertEquals(
        "verified", again.verify(AgentTestClient.simulatedReport()).get("status").asText());
    again.startHeartbeats(HostTestSupport.HEARTBEAT_PERIOD);

    // the spent registration token with another key: token_used once the hello shows the key (an
    // hour after the registration, before any challenge)
    assertTrue(
        Files.readString(Path.of("../docs/agent-protocol.md")).contains("`token_used`"),
        "token_used is documented");
    try (AgentTestClient reused = connect(token.get("token").asText(), Ed25519.generate())) {
      reused.hello();
      reused.expectErrorAndClose("token_used");
    }

    // the credential with another key: key_mismatch, and the live session is untouched
    try (AgentTestClient thief = connect(credential, Ed25519.generate())) {
      thief.hello();
      thief.expectErrorAndClose("key_mismatch");
    }
    assertFalse(again.isClosed());
    assertNull(again.poll(Duration.ofMillis(200)));

    // a new session with the right key replaces the old one, which is told so and closed
    AgentTestClient newer = connect(credential, key);
    newer.handshake();
    again.stopHeartbeats();
    again.expectErrorAndClose("replaced");
    newer.startHeartbeats(HostTestSupport.HEARTBEAT_PERIOD);
    // the old session's heartbeats no longer count, the new one's do
    Instant before =
        Instant.parse(
            HostTestSupport.host(api, provider, hostId).get("last_heartbeat_at").asText());
    eventually(
        Duration.ofSeconds(5),
        () -> {
          JsonNode host = HostTestSupport.host(api, provider, hostId);
          assertTrue(host.get("online").asBoolean());
          assertTrue(
              Instant.parse(host.get("last_heartbeat_at").asText()).isAfter(before),
              host.toString());
        });
    assertFalse(newer.isClosed());
  }

  // ---- health ---------------------------------------------------------------------------------

  @Test
  void aSilentHostGoesOfflineLeavesTheMarketAndComesBackOnReconnect() {
    String region = "eu-de";
    Customer provider = api.signUp("de-provider");
    Registered host = verifiedHost(provider, region);
    HostTestSupport.list(api, provider, host.hostId(), "3.00", null);
    eventually(
        HostTestSupport.READ_SIDE,
        () -> assertEquals(1, HostTestSupport.offersIn(api, "", region).size()));

    host.agent().stopHeartbeats(); // the last heartbeat left at most one period ago
    Instant silentSince = Instant.now();
    host.agent().closeNormally();
    eventually(
        HostTestSupport.HEARTBEAT_TIMEOUT.plus(HostTestSupport.READ_SIDE),
        () -> {
          JsonNode view = HostTestSupport.host(api, provider, host.hostId());
          assertFalse(view.get("online").asBoolean(), view.toString());
          HostTestSupport.assertNoOffersIn(api, region);
        });
    Duration offlineAfter = Duration.between(silentSince, Instant.now());
    assertTrue(
        offlineAfter.compareTo(
                HostTestSupport.HEARTBEAT_TIMEOUT
                    .minus(HostTestSupport.HEARTBEAT_PERIOD)
                    .minusMillis(500))
            >= 0,
        "not offline before the heartbeat timeout: " + offlineAfter);
    JsonNode offline = HostTestSupport.host(api, provider, host.hostId());
    assertEquals(
        "verified", offline.get("status").asText(), "offline is a flag, not a status: " + offline);
    assertNotNull(
        offline.get("last_heartbeat_at").asText(null), "the last heartbeat is kept: " + offline);
    eventually(
        HostTestSupport.READ_SIDE,
        () ->
            assertFalse(
                api.get("/v1/hosts", provider.apiKey())
                    .expect(200)
                    .json()
                    .get("hosts")
                    .get(0)
                    .get("online")
                    .asBoolean()));

    AgentTestClient back = connect(host.credential(), host.key());
    back.handshake();
    assertEquals("verified", back.verify(AgentTestClient.simulatedReport()).get("status").asText());
    back.startHeartbeats(HostTestSupport.HEARTBEAT_PERIOD);
    assertTrue(HostTestSupport.host(api, provider, host.hostId()).get("online").asBoolean());
    eventually(
        HostTestSupport.READ_SIDE,
        () -> {
          List<JsonNode> offers = HostTestSupport.offersIn(api, "", region);
          assertEquals(1, offers.size(), offers.toString());
          assertEquals("3.000000", offers.get(0).get("lowest_price_per_gpu_hour").asText());
        });
  }

  // ---- verification ---------------------------------------------------------------------------

  @Test
  void aTamperedReportFailsTheSignatureCheckAndAVerifiedHostThatFailsIsEvicted() {
    String region = "ap-sg";
    Customer provider = api.signUp("sg-provider");
    Registered host = HostTestSupport.register(node, api, provider, region);
    agents.add(host.agent());
    AgentTestClient agent = host.agent();

    agent.tamperedReport(
        AgentTestClient.simulatedReport(), tree -> tree.put("memory_total_mib", 2_000_000L));
    JsonNode tampered = agent.expect("verification_result");
    assertEquals("failed", tampered.get("status").asText(), tampered.toString());
    assertEquals(
        "fail",
        checksByName(tampered.get("checks")).get("signature").get("status").asText(),
        tampered.toString());
    JsonNode failed = HostTestSupport.host(api, provider, host.hostId());
    assertEquals("failed", failed.get("status").asText(), failed.toString());
    assertEquals(
        "fail", checksByName(failed.get("verification")).get("signature").get("status").asText());

    // a report signed by another key than the pinned one fails the same way
    var stranger = Ed25519.generate();
    JsonNode tree = dev.tickmark.wire.Frames.reportTree(AgentTestClient.simulatedReport());
    agent.send(
        new dev.tickmark.wire.AgentFrame.HardwareReportFrame(
            tree,
            Ed25519.sign(stranger.getPrivate(), dev.tickmark.wire.CanonicalJson.bytes(tree))));
    JsonNode foreign = agent.expect("verification_result");
    assertEquals("failed", foreign.get("status").asText());
    assertEquals(
        "fail", checksByName(foreign.get("checks")).get("signature").get("status").asText());

    // retries are unlimited: an honest report verifies, and the listed host is offered
    assertEquals(
        "verified", agent.verify(AgentTestClient.simulatedReport()).get("status").asText());
    agent.startHeartbeats(HostTestSupport.HEARTBEAT_PERIOD);
    assertEquals(
        "verified", HostTestSupport.host(api, provider, host.hostId()).get("status").asText());
    HostTestSupport.list(api, provider, host.hostId(), "1.00", null);
    eventually(
        HostTestSupport.READ_SIDE,
        () -> assertEquals(1, HostTestSupport.offersIn(api, "", region).size()));

    // a verified host that fails re-verification is evicted (fail-closed) and leaves the market
    agent.tamperedReport(
        AgentTestClient.simulatedReport(),
        t ->
            ((com.fasterxml.jackson.databind.node.ObjectNode) t.get("gpus").get(0))
                .put("driver_version", "999.0"));
    JsonNode again = agent.expect("verification_result");
    assertEquals("failed", again.get("status").asText(), again.toString());
    JsonNode evicted = HostTestSupport.host(api, provider, host.hostId());
    assertEquals("evicted", evicted.get("status").asText(), evicted.toString());
    assertNotNull(evicted.get("eviction_reason").asText(null), evicted.toString());
    eventually(HostTestSupport.READ_SIDE, () -> HostTestSupport.assertNoOffersIn(api, region));

    // reinstating does not make the failed report pass: the host is failed, everywhere, and not
    // offered
    JsonNode reinstated =
        api.post("/ops/hosts/" + host.hostId() + "/reinstate", TestNodes.OPERATOR_TOKEN, null)
            .expect(200)
            .json();
    assertEquals("failed", reinstated.get("status").asText(), reinstated.toString());
    eventually(
        HostTestSupport.READ_SIDE,
        () -> {
          JsonNode failedRows =
              api.get("/ops/hosts?status=failed", TestNodes.OPERATOR_TOKEN)
                  .expect(200)
                  .json()
                  .get("hosts");
          assertNotNull(
              find(failedRows, host.hostId()),
              "the read side agrees with the entity: " + failedRows);
        });
    HostTestSupport.assertNoOffersIn(api, region);

    // an honest report verifies it again and brings it back
    assertEquals(
        "verified", agent.verify(AgentTestClient.simulatedReport()).get("status").asText());
    eventually(
        HostTestSupport.READ_SIDE,
        () -> assertEquals(1, HostTestSupport.offersIn(api, "", region).size()));

    // a good report does not lift an eviction; only an operator does
    agent.tamperedReport(AgentTestClient.simulatedReport(), t -> t.put("agent_version", "evil"));
    assertEquals("failed", agent.expect("verification_result").get("status").asText());
    assertEquals(
        "verified", agent.verify(AgentTestClient.simulatedReport()).get("status").asText());
    assertEquals(
        "evicted", HostTestSupport.host(api, provider, host.hostId()).get("status").asText());
    eventually(
        HostTestSupport.READ_SIDE,
        () ->
            assertNotNull(
                find(
                    api.get("/ops/hosts?status=evicted", TestNodes.OPERATOR_TOKEN)
                        .expect(200)
                        .json()
                        .get("hosts"),
                    host.hostId())));
    HostTestSupport.assertNoOffersIn(api, region);
    api.post("/ops/hosts/" + host.hostId() + "/reinstate", TestNodes.OPERATOR_TOKEN, null)
        .expect(200);
    eventually(
        HostTestSupport.READ_SIDE,
        () -> assertEquals(1, HostTestSupport.offersIn(api, "", region).size()));
  }

  // ---- drain and removal ----------------------------------------------------------------------

  @Test
  void aDrainedHostLeavesTheMarketAndARemovedHostsCredentialStopsWorking() {
    String region = "eu-fr";
    Customer provider = api.signUp("fr-provider");
    Registered host = verifiedHost(provider, region);
    HostTestSupport.list(api, provider, host.hostId(), "1.75", "0.90");
    eventually(
        HostTestSupport.READ_SIDE,
        () -> assertEquals(2, HostTestSupport.offersIn(api, "", region).size()));

    JsonNode drained =
        api.post("/v1/hosts/" + host.hostId() + "/drain", provider.apiKey(), null)
            .expect(200)
            .json();
    assertTrue(drained.get("draining").asBoolean(), drained.toString());
    assertEquals("verified", drained.get("status").asText());
    api.post("/v1/hosts/" + host.hostId() + "/drain", provider.apiKey(), null)
        .expect(200); // idempotent
    eventually(HostTestSupport.READ_SIDE, () -> HostTestSupport.assertNoOffersIn(api, region));
    assertFalse(host.agent().isClosed(), "draining keeps the agent connected");

    JsonNode removed =
        api.delete("/v1/hosts/" + host.hostId(), provider.apiKey()).expect(200).json();
    assertEquals("removed", removed.get("status").asText(), removed.toString());
    host.agent().stopHeartbeats();
    host.agent().expectErrorAndClose("host_removed");
    api.get("/v1/hosts/" + host.hostId(), provider.apiKey()).expectProblem(404, "not_found");
    api.delete("/v1/hosts/" + host.hostId(), provider.apiKey()).expectProblem(404, "not_found");

    // the credential now only hears why
    try (AgentTestClient after = connect(host.credential(), host.key())) {
      after.expectErrorAndClose("host_removed");
    }
    eventually(
        HostTestSupport.READ_SIDE,
        () -> {
          JsonNode mine = api.get("/v1/hosts", provider.apiKey()).expect(200).json().get("hosts");
          assertEquals(0, mine.size(), mine.toString());
        });
    HostTestSupport.assertNoOffersIn(api, region);
  }

  // ---- operator -------------------------------------------------------------------------------

  @Test
  void theOperatorListsEvictsAndReinstatesAHost() {
    String region = "us-east";
    Customer provider = api.signUp("us-provider");
    Registered host = verifiedHost(provider, region);
    HostTestSupport.list(api, provider, host.hostId(), "2.50", null);
    eventually(
        HostTestSupport.READ_SIDE,
        () -> assertEquals(1, HostTestSupport.offersIn(api, "", region).size()));

    eventually(
        HostTestSupport.READ_SIDE,
        () -> {
          JsonNode verified =
              api.get("/ops/hosts?status=verified", TestNodes.OPERATOR_TOKEN)
                  .expect(200)
                  .json()
                  .get("hosts");
          JsonNode row = find(verified, host.hostId());
          assertNotNull(row, verified.toString());
          assertEquals(provider.id(), row.get("owner_id").asText(), row.toString());
          assertEquals("verified", row.get("status").asText());
        });
    api.get("/ops/hosts?status=bogus", TestNodes.OPERATOR_TOKEN)
        .expectProblem(400, "invalid_parameter");
    api.get("/ops/hosts", provider.apiKey()).expectProblem(401, "unauthorized");
    api.post("/ops/hosts/" + host.hostId() + "/evict", provider.apiKey(), "{}")
        .expectProblem(401, "unauthorized");
    JsonNode detail =
        api.get("/ops/hosts/" + host.hostId(), TestNodes.OPERATOR_TOKEN).expect(200).json();
    assertEquals(provider.id(), detail.get("owner_id").asText(), detail.toString());

    JsonNode evicted =
        api.post(
                "/ops/hosts/" + host.hostId() + "/evict",
                TestNodes.OPERATOR_TOKEN,
                "{\"reason\":\"bad fans\"}")
            .expect(200)
            .json();
    assertEquals("evicted", evicted.get("status").asText(), evicted.toString());
    assertEquals("bad fans", evicted.get("eviction_reason").asText());
    assertEquals(
        "evicted", HostTestSupport.host(api, provider, host.hostId()).get("status").asText());
    eventually(
        HostTestSupport.READ_SIDE,
        () -> {
          HostTestSupport.assertNoOffersIn(api, region);
          assertNotNull(
              find(
                  api.get("/ops/hosts?status=evicted", TestNodes.OPERATOR_TOKEN)
                      .expect(200)
                      .json()
                      .get("hosts"),
                  host.hostId()));
          assertNull(
              find(
                  api.get("/ops/hosts?status=verified", TestNodes.OPERATOR_TOKEN)
                      .expect(200)
                      .json()
                      .get("hosts"),
                  host.hostId()));
        });

    JsonNode reinstated =
        api.post("/ops/hosts/" + host.hostId() + "/reinstate", TestNodes.OPERATOR_TOKEN, null)
            .expect(200)
            .json();
    assertEquals("verified", reinstated.get("status").asText(), reinstated.toString());
    assertTrue(reinstated.get("eviction_reason").isNull(), reinstated.toString());
    eventually(
        HostTestSupport.READ_SIDE,
        () -> {
          List<JsonNode> offers = HostTestSupport.offersIn(api, "", region);
          assertEquals(1, offers.size(), offers.toString());
          assertEquals("2.500000", offers.get(0).get("lowest_price_per_gpu_hour").asText());
        });
    api.post("/ops/hosts/host_doesnotexist/evict", TestNodes.OPERATOR_TOKEN, null)
        .expectProblem(404, "not_found");
  }

  private static JsonNode find(JsonNode hosts, String hostId) {
    for (JsonNode h : hosts) if (hostId.equals(h.get("id").asText())) return h;
    return null;
  }

  // ---- isolation between accounts --------------------------------------------------------------

  @Test
  void anotherAccountCannotSeeOrTouchTheHost() {
    Customer owner = api.signUp("owner");
    Customer intruder = api.signUp("intruder");
    Registered host = verifiedHost(owner, "us-west");
    String path = "/v1/hosts/" + host.hostId();

    api.get(path, intruder.apiKey()).expectProblem(404, "not_found");
    api.put(
            path + "/listing",
            intruder.apiKey(),
            "{\"on_demand_price_per_gpu_hour\":\"0.01\",\"listed\":true}")
        .expectProblem(404, "not_found");
    api.post(path + "/drain", intruder.apiKey(), null).expectProblem(404, "not_found");
    api.delete(path, intruder.apiKey()).expectProblem(404, "not_found");
    // a host that does not exist answers the same as someone else's
    api.get("/v1/hosts/host_000000000000000000000000", intruder.apiKey())
        .expectProblem(404, "not_found");
    // and so does anything that is not a host id at all (answered at the edge: no entity is woken
    // for it)
    for (String junk : List.of("x", "host_XYZ", "host_" + "0".repeat(25), "a".repeat(300))) {
      api.get("/v1/hosts/" + junk, intruder.apiKey()).expectProblem(404, "not_found");
      api.post("/v1/rentals/" + junk + "/stop", intruder.apiKey(), null)
          .expectProblem(404, "not_found");
    }
    // a dot segment is removed before routing: "/v1/hosts/%2e%2e" is "/v1/", which no route has
    api.get("/v1/hosts/%2e%2e", intruder.apiKey()).expectProblem(404, "no_such_route");
    api.post("/v1/rentals/%2e%2e/stop", intruder.apiKey(), null)
        .expectProblem(404, "no_such_route");
    api.get(path, null).expectProblem(401, "unauthorized");

    eventually(
        HostTestSupport.READ_SIDE,
        () ->
            assertNotNull(
                find(
                    api.get("/v1/hosts", owner.apiKey()).expect(200).json().get("hosts"),
                    host.hostId())));
    JsonNode theirs = api.get("/v1/hosts", intruder.apiKey()).expect(200).json().get("hosts");
    assertEquals(0, theirs.size(), theirs.toString());

    // nothing the intruder tried changed the host
    JsonNode view = HostTestSupport.host(api, owner, host.hostId());
    assertEquals("verified", view.get("status").asText());
    assertFalse(view.get("listed").asBoolean());
    assertFalse(view.get("draining").asBoolean());
    assertTrue(view.get("online").asBoolean());
    assertTrue(
        view.get("owner_id") == null || view.get("owner_id").isNull(),
        "a provider's view carries no owner field: " + view);
    assertFalse(host.agent().isClosed());
    String list = api.get("/v1/hosts", owner.apiKey()).body();
    assertFalse(list.contains(intruder.id()));
    assertEquals(
        List.of(host.hostId()),
        api.get("/v1/hosts", owner.apiKey()).json().get("hosts").findValuesAsText("id").stream()
            .collect(Collectors.toList()));
  }
}
