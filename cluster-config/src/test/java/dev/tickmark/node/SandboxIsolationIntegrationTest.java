package dev.tickmark.node;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import dev.tickmark.agent.Agent;
import dev.tickmark.persistence.TestDatabase;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * A renter's workload against the provider's machine (issue 16), end to end: a real node on
 * PostgreSQL and the real agent with its default runtime for simulated GPUs, the bubblewrap
 * sandbox. The workload tries to read the agent's secrets, list another rental's workspace, reach
 * the node's HTTP port and PostgreSQL on the host's loopback, write outside its workspace and leave
 * a process behind; each attempt's outcome is read back from the rental's logs through the API, and
 * the host is checked for what outlived the rental. Skipped, saying why, where bubblewrap cannot
 * run; CI installs it and requires it.
 */
class SandboxIsolationIntegrationTest {
  static Node node;
  static ApiClient api;
  static Agent agent;
  static Path state;

  @BeforeAll
  static void start() throws Exception {
    boolean bwrap = Files.isExecutable(Path.of("/usr/bin/bwrap"));
    String why = "needs bubblewrap (/usr/bin/bwrap): apt-get install bubblewrap";
    if (System.getenv().getOrDefault("TICKMARK_TESTS_REQUIRE", "").contains("sandbox"))
      assertTrue(bwrap, why);
    Assumptions.assumeTrue(bwrap, why);
    node =
        Node.start(RentingSupport.renting(TestNodes.settings(TestDatabase.fresh("sandbox_iso"))));
    api = new ApiClient(node.baseUrl());
    ApiClient.Customer provider = RentingSupport.renter(api, "Provider", "1");
    state = Files.createTempDirectory("tickmark-sandbox-iso");
    agent = RentingSupport.listedHost(node, api, provider, state, "eu-nl", 2);
    assertEquals("sandbox", agent.runtimeName(), "simulated GPUs run rentals in the sandbox");
  }

  @AfterAll
  static void stop() throws Exception {
    if (agent != null) agent.close();
    if (node != null) node.close();
  }

  @Test
  void aWorkloadCannotReachTheProvidersSecretsOtherRentalsOrTheHostsServices() throws Exception {
    ApiClient.Customer renter = RentingSupport.renter(api, "Curious renter", "20");
    String other = launch(renter, List.of("sleep", "600"));
    RentingSupport.awaitStatus(api, renter, other, "running");
    String marker = "sleep 4242";
    List<String> attempts = new ArrayList<>();
    attempts.add(probe("secrets", "ls " + state + " && cat " + state + "/*"));
    attempts.add(probe("other-rental", "ls " + state + "/rentals/" + other + "/scratch"));
    attempts.add(probe("node-http", "exec 3<>/dev/tcp/127.0.0.1/" + node.httpPort()));
    attempts.add(probe("postgres", "exec 3<>/dev/tcp/127.0.0.1/5432"));
    attempts.add(probe("write-outside", "touch /usr/tickmark-was-here"));
    attempts.add(probe("home", "ls /root /home"));
    String script =
        String.join("; ", attempts)
            + "; echo ok > /workspace/mine && echo workspace-writable"
            + "; ("
            + marker
            + " &) ; echo left-a-process";
    String id = launch(renter, List.of("bash", "-c", script));
    RentingSupport.awaitStatus(api, renter, id, "ended");

    List<String> lines = new ArrayList<>();
    Eventually.eventually(
        RentingSupport.WAIT,
        () -> {
          lines.clear();
          JsonNode page =
              api.get("/v1/rentals/" + id + "/logs?tail=200", renter.apiKey()).expect(200).json();
          page.get("lines").forEach(l -> lines.add(l.get("text").asText()));
          assertTrue(lines.contains("left-a-process"), lines.toString());
        });
    for (String what :
        List.of("secrets", "other-rental", "node-http", "postgres", "write-outside", "home")) {
      assertTrue(lines.contains("refused " + what), what + " must fail: " + lines);
      assertFalse(lines.contains("REACHED " + what), what + " was reached: " + lines);
    }
    assertTrue(lines.contains("workspace-writable"), lines.toString());
    assertFalse(Files.exists(Path.of("/usr/tickmark-was-here")));
    // nothing of the rental outlives it: its PID namespace died with it
    Eventually.eventually(
        RentingSupport.WAIT,
        () ->
            assertTrue(
                ProcessHandle.allProcesses()
                    .noneMatch(
                        p -> p.info().commandLine().map(c -> c.contains(marker)).orElse(false)),
                "a process the workload left behind still runs"));
    api.post("/v1/rentals/" + other + "/stop", renter.apiKey(), "{}").expect(202);
  }

  @Test
  void aRentalThatAsksForNetworkIsRefusedWhereTheSandboxHasNone() throws Exception {
    // no slirp4netns or pasta here: the sandbox cannot give a rental its own network, and never
    // hands it the host's
    org.junit.jupiter.api.Assumptions.assumeFalse(
        Files.isExecutable(Path.of("/usr/bin/slirp4netns"))
            || Files.isExecutable(Path.of("/usr/bin/pasta")),
        "a userspace network is installed: network rentals can run");
    ApiClient.Customer renter = RentingSupport.renter(api, "Networked renter", "20");
    String id =
        api.post(
                "/v1/rentals",
                renter.apiKey(),
                "{\"gpu\":\"h100-80gb\",\"region\":\"eu-nl\",\"max_price_per_gpu_hour\":\"3.00\","
                    + "\"image\":\"ubuntu:24.04\",\"command\":[\"true\"],\"network\":true}")
            .expect(201)
            .json()
            .get("rental")
            .get("id")
            .asText();
    JsonNode ended = RentingSupport.awaitStatus(api, renter, id, "ended");
    assertEquals("provisioning_failed", ended.get("end_reason").asText(), ended.toString());
    assertEquals(0, ended.get("billed_seconds").asLong(), "nothing charged");
  }

  /**
   * One shell attempt that prints {@code REACHED what} if it works, {@code refused what} if not.
   */
  private static String probe(String what, String attempt) {
    return "( "
        + attempt
        + " ) >/dev/null 2>&1 && echo 'REACHED "
        + what
        + "' || echo 'refused "
        + what
        + "'";
  }

  private static String launch(ApiClient.Customer renter, List<String> command) {
    StringBuilder args = new StringBuilder();
    for (String c : command) args.append(args.length() == 0 ? "" : ",").append(ApiClient.quote(c));
    return api.post(
            "/v1/rentals",
            renter.apiKey(),
            "{\"gpu\":\"h100-80gb\",\"region\":\"eu-nl\",\"max_price_per_gpu_hour\":\"3.00\","
                + "\"image\":\"ubuntu:24.04\",\"command\":["
                + args
                + "]}")
        .expect(201)
        .json()
        .get("rental")
        .get("id")
        .asText();
  }
}
