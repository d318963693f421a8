package dev.tickmark.node;

import static dev.tickmark.node.Eventually.eventually;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import dev.tickmark.node.ApiClient.Customer;
import dev.tickmark.node.HostTestSupport.Registered;
import dev.tickmark.wire.HardwareReport;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * A rental that asks for outbound network lands only on a host whose agent said it can give it, on
 * a real node and PostgreSQL, through the agent protocol: the cheapest host here runs rentals in a
 * sandbox without slirp4netns, which used to take every such rental and fail it at start ({@code
 * provisioning_failed}), so that a renter who launched again met the same host again. A rental
 * without network still goes to the cheapest. Providers see how each host runs rentals; renters can
 * ask the offers for capacity with network. A rental that names a runtime (docker, to have its
 * image run) lands only on a host that said it uses it.
 */
class NetworkMatchingIntegrationTest {
  private static final Duration WAIT = Duration.ofSeconds(30);
  private static final String REGION = "eu-nl";

  private static Node node;
  private static ApiClient api;

  @BeforeAll
  static void start() throws Exception {
    node = HostTestSupport.startNode("network_matching");
    api = new ApiClient(node.baseUrl());
  }

  @AfterAll
  static void stop() throws Exception {
    if (node != null) node.close();
  }

  /**
   * A verified, heartbeating host whose report says how it runs rentals, listed at {@code price}.
   */
  private static Registered host(
      Customer provider, HardwareReport.WorkloadRuntime runtime, String price) {
    return host(provider, runtime, price, REGION);
  }

  private static Registered host(
      Customer provider, HardwareReport.WorkloadRuntime runtime, String price, String region) {
    Registered host = HostTestSupport.register(node, api, provider, region);
    JsonNode verdict = host.agent().verify(AgentTestClient.simulatedReport().withRuntime(runtime));
    assertEquals("verified", verdict.get("status").asText(), verdict.toString());
    host.agent().startHeartbeats(HostTestSupport.HEARTBEAT_PERIOD);
    HostTestSupport.list(api, provider, host.hostId(), price, null);
    return host;
  }

  private static String launch(Customer renter, boolean network) {
    return launch(renter, REGION, "\"network\":" + network)
        .expect(201)
        .json()
        .at("/rental/id")
        .asText();
  }

  /** A launch of one card in {@code region} with the fields {@code more} (JSON, without braces). */
  private static ApiClient.Reply launch(Customer renter, String region, String more) {
    return api.post(
        "/v1/rentals",
        renter.apiKey(),
        "{\"gpu\":\"h100-80gb\",\"count\":1,\"region\":\""
            + region
            + "\",\"max_price_per_gpu_hour\":\"3.00\",\"image\":\"ubuntu:24.04\","
            + "\"command\":[\"sleep\",\"3600\"],"
            + more
            + "}");
  }

  /** The next {@code start_rental} this agent is sent (heartbeat answers and the like skipped). */
  private static JsonNode nextStart(AgentTestClient agent) {
    long deadline = System.nanoTime() + WAIT.toNanos();
    while (System.nanoTime() < deadline) {
      JsonNode frame = agent.poll(Duration.ofMillis(500));
      if (frame != null && "start_rental".equals(frame.path("type").asText())) return frame;
    }
    throw new AssertionError("no start_rental within " + WAIT);
  }

  /**
   * A renter who needs their image run asks for {@code docker}: the rental goes to a docker host
   * though a sandbox host is cheaper, never to a host whose agent did not say, and waits where no
   * docker host can also give the network it asks for. The offers count by runtime; the rental and
   * the list say what was asked.
   */
  @Test
  void aRentalThatNamesARuntimeGoesOnlyToAHostThatRunsIt() {
    String region = "eu-de";
    Customer provider = api.signUp("Three runtimes");
    Registered unsaid = host(provider, null, "0.50", region);
    Registered sandbox =
        host(provider, new HardwareReport.WorkloadRuntime("sandbox", true), "1.00", region);
    Registered docker =
        host(provider, new HardwareReport.WorkloadRuntime("docker", false), "2.00", region);

    eventually(
        WAIT,
        () -> {
          List<JsonNode> dockerOnly =
              HostTestSupport.offersIn(api, "?gpu=h100-80gb&runtime=docker", region);
          assertEquals(1, dockerOnly.size(), dockerOnly.toString());
          assertEquals(2, dockerOnly.get(0).get("available_cards").asInt(), "its two cards");
          assertEquals("2.000000", dockerOnly.get(0).get("lowest_price_per_gpu_hour").asText());
          assertEquals(
              List.of(),
              HostTestSupport.offersIn(api, "?gpu=h100-80gb&runtime=docker&network=true", region));
        });
    api.get("/v1/offers?runtime=podman", null).expectProblem(400, "invalid_runtime");

    Customer renter = RentingSupport.renter(api, "Needs the image", "50");
    launch(renter, region, "\"runtime\":\"podman\"").expectProblem(400, "invalid_runtime");
    launch(renter, region, "\"runtime\":\"Docker\"").expectProblem(400, "invalid_runtime");

    String image =
        launch(renter, region, "\"runtime\":\"docker\"")
            .expect(201)
            .json()
            .at("/rental/id")
            .asText();
    JsonNode start = nextStart(docker.agent());
    assertEquals(image, start.get("rental_id").asText(), start.toString());
    JsonNode shown = api.get("/v1/rentals/" + image, renter.apiKey()).expect(200).json();
    assertEquals("docker", shown.get("runtime").asText(), shown.toString());
    assertEquals("docker", shown.get("host_runtime").asText(), "what it runs in");
    eventually(
        WAIT,
        () -> {
          JsonNode listed = api.get("/v1/rentals", renter.apiKey()).expect(200).json();
          assertEquals("docker", listed.at("/rentals/0/runtime").asText(), listed.toString());
          assertEquals("docker", listed.at("/rentals/0/host_runtime").asText(), listed.toString());
        });

    // Without a runtime, the cheapest host is the one, as before; the rental says none was asked,
    // and what the host it got runs rentals in where its agent said (here: not).
    JsonNode any = launch(renter, region, "\"network\":false").expect(201).json().get("rental");
    assertEquals(any.get("id").asText(), nextStart(unsaid.agent()).get("rental_id").asText());
    assertTrue(any.get("runtime").isNull(), any.toString());
    assertTrue(any.get("host_runtime").isNull(), any.toString());

    JsonNode boxed =
        launch(renter, region, "\"runtime\":\"sandbox\"").expect(201).json().get("rental");
    assertEquals(boxed.get("id").asText(), nextStart(sandbox.agent()).get("rental_id").asText());
    assertEquals("sandbox", boxed.get("host_runtime").asText(), boxed.toString());

    // docker with network: the docker host cannot give it, so the rental waits.
    JsonNode waiting =
        launch(renter, region, "\"runtime\":\"docker\",\"network\":true")
            .expect(201)
            .json()
            .get("rental");
    assertEquals("pending", waiting.get("status").asText(), waiting.toString());
  }

  @Test
  void aRentalWithNetworkGoesOnlyToAHostThatCanGiveIt() {
    Customer provider = api.signUp("Two hosts");
    Registered sandboxWithoutNetwork =
        host(provider, new HardwareReport.WorkloadRuntime("sandbox", false), "1.00");
    Registered docker = host(provider, new HardwareReport.WorkloadRuntime("docker", true), "2.00");

    // The provider sees how each host runs rentals, in the host and in the list.
    JsonNode detail = HostTestSupport.host(api, provider, sandboxWithoutNetwork.hostId());
    assertEquals("sandbox", detail.at("/runtime/name").asText(), detail.toString());
    assertEquals(false, detail.at("/runtime/network").asBoolean(true));
    eventually(
        WAIT,
        () -> {
          JsonNode list = api.get("/v1/hosts", provider.apiKey()).expect(200).json().get("hosts");
          assertEquals(2, list.size(), list.toString());
          for (JsonNode h : list) {
            boolean able = h.get("id").asText().equals(docker.hostId());
            assertEquals(able ? "docker" : "sandbox", h.at("/runtime/name").asText(), h.toString());
            assertEquals(able, h.at("/runtime/network").asBoolean(!able), h.toString());
          }
        });

    // Renters can ask for the capacity a rental with network can use.
    eventually(
        WAIT,
        () -> {
          List<JsonNode> all = HostTestSupport.offersIn(api, "?gpu=h100-80gb", REGION);
          assertEquals(1, all.size(), all.toString());
          assertEquals(4, all.get(0).get("available_cards").asInt(), all.toString());
          assertEquals("1.000000", all.get(0).get("lowest_price_per_gpu_hour").asText());
          List<JsonNode> withNetwork =
              HostTestSupport.offersIn(api, "?gpu=h100-80gb&network=true", REGION);
          assertEquals(1, withNetwork.size(), withNetwork.toString());
          assertEquals(2, withNetwork.get(0).get("available_cards").asInt());
          assertEquals("2.000000", withNetwork.get(0).get("lowest_price_per_gpu_hour").asText());
          assertEquals(1, withNetwork.get(0).get("hosts").asInt());
        });
    api.get("/v1/offers?network=yes", null).expectProblem(400, "invalid_network");

    Customer renter = RentingSupport.renter(api, "Needs the internet", "50");
    String withNetwork = launch(renter, true);
    JsonNode start = nextStart(docker.agent());
    assertEquals(withNetwork, start.get("rental_id").asText(), start.toString());
    assertTrue(start.get("network").asBoolean(), start.toString());

    // Without network, the cheapest host is the one, as before.
    String plain = launch(renter, false);
    JsonNode cheap = nextStart(sandboxWithoutNetwork.agent());
    assertEquals(plain, cheap.get("rental_id").asText(), cheap.toString());
    assertEquals(false, cheap.get("network").asBoolean(true), cheap.toString());

    // More rentals with network than the able host has cards: the rest wait rather than land on
    // the host that cannot run them.
    String second = launch(renter, true);
    assertEquals(second, nextStart(docker.agent()).get("rental_id").asText());
    String third = launch(renter, true);
    JsonNode waiting = api.get("/v1/rentals/" + third, renter.apiKey()).expect(200).json();
    assertEquals("pending", waiting.get("status").asText(), waiting.toString());
    // the rental asks the matcher again every second while it waits: a few rounds of it
    long until = System.nanoTime() + Duration.ofSeconds(3).toNanos();
    while (System.nanoTime() < until) {
      JsonNode frame = sandboxWithoutNetwork.agent().poll(Duration.ofMillis(200));
      assertTrue(
          frame == null || !"start_rental".equals(frame.path("type").asText()),
          "the sandbox host is never asked to start it: " + frame);
    }
    assertEquals(
        "pending",
        api.get("/v1/rentals/" + third, renter.apiKey()).expect(200).json().get("status").asText());
  }
}
