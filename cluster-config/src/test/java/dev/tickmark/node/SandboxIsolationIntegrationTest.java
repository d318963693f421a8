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
  static ApiClient.Customer provider;

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
    provider = RentingSupport.renter(api, "Provider", "1");
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

  /**
   * A rental that asks for network gets it in the sandbox, through slirp4netns: a real connection
   * to a server on the host's own address, but still not the host's loopback services (the node,
   * PostgreSQL), neither directly nor through slirp's gateway. Skipped, saying why, where
   * slirp4netns is missing (such a host refuses network rentals: the agent's SandboxRuntimeTest);
   * CI installs it and requires it.
   */
  @Test
  void aRentalWithNetworkReachesOutButNotTheHostsServices() throws Exception {
    boolean slirp = Files.isExecutable(Path.of("/usr/bin/slirp4netns"));
    String why = "needs slirp4netns (/usr/bin/slirp4netns): apt-get install slirp4netns";
    if (System.getenv().getOrDefault("TICKMARK_TESTS_REQUIRE", "").contains("slirp4netns"))
      assertTrue(slirp, why);
    Assumptions.assumeTrue(slirp, why);
    // the real agent's signed report told the engine, which matches network rentals by it
    com.fasterxml.jackson.databind.JsonNode host =
        api.get("/v1/hosts/" + agent.hostId().orElseThrow(), provider.apiKey()).expect(200).json();
    assertEquals("sandbox", host.at("/runtime/name").asText(), host.toString());
    assertTrue(host.at("/runtime/network").asBoolean(), host.toString());
    java.net.InetAddress outside = nonLoopbackAddress();
    ApiClient.Customer renter = RentingSupport.renter(api, "Networked renter", "20");
    try (java.net.ServerSocket server = new java.net.ServerSocket(0, 50, outside)) {
      List<String> attempts = new ArrayList<>();
      attempts.add(
          probe(
              "outside",
              "exec 3<>/dev/tcp/" + outside.getHostAddress() + "/" + server.getLocalPort()));
      attempts.add(probe("node-http", "exec 3<>/dev/tcp/127.0.0.1/" + node.httpPort()));
      attempts.add(probe("node-http-via-gateway", "exec 3<>/dev/tcp/10.0.2.2/" + node.httpPort()));
      attempts.add(probe("postgres-via-gateway", "exec 3<>/dev/tcp/10.0.2.2/5432"));
      String id =
          launch(renter, List.of("bash", "-c", String.join("; ", attempts) + "; echo done"), true);
      server.setSoTimeout((int) RentingSupport.WAIT.toMillis());
      try (java.net.Socket accepted = server.accept()) {
        assertTrue(accepted.isConnected(), "the workload's connection arrived");
      }
      JsonNode ended = RentingSupport.awaitStatus(api, renter, id, "ended");
      assertEquals("workload_exited", ended.get("end_reason").asText(), ended.toString());
      List<String> lines = new ArrayList<>();
      Eventually.eventually(
          RentingSupport.WAIT,
          () -> {
            lines.clear();
            api.get("/v1/rentals/" + id + "/logs?tail=200", renter.apiKey())
                .expect(200)
                .json()
                .get("lines")
                .forEach(l -> lines.add(l.get("text").asText()));
            assertTrue(lines.contains("done"), lines.toString());
          });
      assertTrue(lines.contains("REACHED outside"), lines.toString());
      for (String what : List.of("node-http", "node-http-via-gateway", "postgres-via-gateway"))
        assertTrue(lines.contains("refused " + what), what + " must fail: " + lines);
    }
  }

  /**
   * An IPv4 address of this machine that is not loopback (failed where slirp4netns is required).
   */
  private static java.net.InetAddress nonLoopbackAddress() throws java.net.SocketException {
    for (java.net.NetworkInterface nic :
        java.util.Collections.list(java.net.NetworkInterface.getNetworkInterfaces())) {
      if (!nic.isUp() || nic.isLoopback()) continue;
      for (java.net.InetAddress a : java.util.Collections.list(nic.getInetAddresses()))
        if (a instanceof java.net.Inet4Address) return a;
    }
    String why = "this machine has no IPv4 address but loopback for a workload to reach";
    if (System.getenv().getOrDefault("TICKMARK_TESTS_REQUIRE", "").contains("slirp4netns"))
      throw new AssertionError(why);
    Assumptions.assumeTrue(false, why);
    return null;
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
    return launch(renter, command, false);
  }

  private static String launch(ApiClient.Customer renter, List<String> command, boolean network) {
    StringBuilder args = new StringBuilder();
    for (String c : command) args.append(args.length() == 0 ? "" : ",").append(ApiClient.quote(c));
    return api.post(
            "/v1/rentals",
            renter.apiKey(),
            "{\"gpu\":\"h100-80gb\",\"region\":\"eu-nl\",\"max_price_per_gpu_hour\":\"3.00\","
                + "\"image\":\"ubuntu:24.04\",\"network\":"
                + network
                + ",\"command\":["
                + args
                + "]}")
        .expect(201)
        .json()
        .get("rental")
        .get("id")
        .asText();
  }
}
