package dev.tickmark.node;

import static dev.tickmark.node.Eventually.eventually;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.tickmark.agent.Agent;
import dev.tickmark.agent.AgentConfig;
import dev.tickmark.agent.SimulatedGpus;
import dev.tickmark.node.ClusterProcesses.NodeProcess;
import dev.tickmark.persistence.TestDatabase;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The SSH relay across nodes, with the real OpenSSH client: two nodes (separate JVMs) on one
 * PostgreSQL; the host's agent is connected to node 2, the renter's {@code tickmark connect} to
 * node 1, so every byte crosses the cluster through stream refs. Node 2 is then killed (SIGKILL):
 * the open session ends cleanly (ssh exits, nothing hangs), the agent reconnects to node 1, and a
 * new session works. Skipped, saying why, without OpenSSH's client; CI installs it.
 */
class SshAcrossNodesIntegrationTest {
  static final Duration WAIT = Duration.ofSeconds(60);

  @TempDir Path temp;
  private ClusterProcesses cluster;
  private Agent agent;

  @AfterEach
  void cleanUp() throws Exception {
    if (agent != null) agent.close();
    if (cluster != null) cluster.close();
  }

  @Test
  void aStreamCrossesNodesEndsWithTheAgentsNodeAndWorksAgainAfterTheAgentReconnects()
      throws Exception {
    boolean openSsh = Files.isExecutable(Path.of("/usr/bin/ssh"));
    String why = "needs OpenSSH's client (/usr/bin/ssh): apt-get install openssh-client";
    if (System.getenv().getOrDefault("TICKMARK_TESTS_REQUIRE", "").contains("ssh"))
      assertTrue(openSsh, why);
    Assumptions.assumeTrue(openSsh, why);

    cluster =
        new ClusterProcesses(
            TestDatabase.fresh("ssh_across_nodes"),
            2,
            Path.of("target", "ssh-across-nodes"),
            Map.of(),
            List.of(
                "-Dpekko.cluster.failure-detector.acceptable-heartbeat-pause=2s",
                "-Dpekko.cluster.split-brain-resolver.stable-after=3s",
                // two nodes: the older one (node 1, started first) stays when the other is lost
                "-Dpekko.cluster.split-brain-resolver.active-strategy=keep-oldest",
                "-Dpekko.cluster.sharded-daemon-process.keep-alive-interval=2s"));
    NodeProcess node1 = cluster.node(1);
    NodeProcess node2 = cluster.node(2);
    cluster.start(node1);
    cluster.start(node2);

    ApiClient api = node1.api;
    ApiClient.Customer provider = api.signUp("Provider across nodes");
    String token =
        api.post("/v1/hosts/registration-tokens", provider.apiKey(), "{\"region\":\"eu-nl\"}")
            .expect(201)
            .json()
            .get("token")
            .asText();
    List<URI> engines =
        List.of(AgentConfig.engine(node2.engine()), AgentConfig.engine(node1.engine()));
    agent =
        Agent.start(
            new AgentConfig(
                engines, token, temp.resolve("agent"), SimulatedGpus.parse("h100-80gb:1")));
    String hostId = agent.welcomed().get(WAIT.toSeconds(), TimeUnit.SECONDS).hostId();
    assertEquals("verified", agent.verified().get(WAIT.toSeconds(), TimeUnit.SECONDS).status());
    api.put(
            "/v1/hosts/" + hostId + "/listing",
            provider.apiKey(),
            "{\"on_demand_price_per_gpu_hour\":\"2.49\",\"listed\":true}")
        .expect(200);

    ApiClient.Customer renter = RentingSupport.renter(api, "Renter across nodes", "20.00");
    Path key = temp.resolve("id_renter");
    assertEquals(
        0,
        new ProcessBuilder("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key.toString())
            .start()
            .waitFor());
    String pub = Files.readString(Path.of(key + ".pub")).strip();
    String[] rental = {null};
    eventually(
        WAIT,
        () ->
            rental[0] =
                api.post(
                        "/v1/rentals",
                        renter.apiKey(),
                        "{\"gpu\":\"h100-80gb\",\"region\":\"eu-nl\",\"max_price_per_gpu_hour\":\"3.00\","
                            + "\"image\":\"ubuntu:24.04\",\"ssh_public_key\":"
                            + ApiClient.quote(pub)
                            + "}")
                    .expect(201)
                    .json()
                    .get("rental")
                    .get("id")
                    .asText());
    String id = rental[0];
    RentingSupport.awaitStatus(api, renter, id, "running");
    String hostKey =
        api.get("/v1/rentals/" + id, renter.apiKey())
            .expect(200)
            .json()
            .get("ssh_host_key")
            .asText();
    Path knownHosts = temp.resolve("known_hosts");
    Files.writeString(knownHosts, id + " " + hostKey + "\n");

    Ssh first = Ssh.run(node1, renter, id, key, knownHosts, "echo across the cluster");
    assertEquals(0, first.exit(), first.toString());
    assertTrue(first.out().contains("across the cluster"), first.toString());

    // a session that lasts, through node 1, to the agent on node 2
    Process open = Ssh.start(node1, renter, id, key, knownHosts, "echo ready; sleep 600");
    BufferedReader lines =
        new BufferedReader(new InputStreamReader(open.getInputStream(), StandardCharsets.UTF_8));
    CompletableFuture<String> ready =
        CompletableFuture.supplyAsync(
            () -> {
              try {
                String line;
                while ((line = lines.readLine()) != null) if (line.contains("ready")) return line;
                return null;
              } catch (java.io.IOException e) {
                return null;
              }
            });
    assertEquals("ready", ready.get(WAIT.toSeconds(), TimeUnit.SECONDS));

    cluster.kill(node2);
    assertTrue(
        open.waitFor(WAIT.toSeconds(), TimeUnit.SECONDS),
        "the session through the lost node ends instead of hanging");
    assertNotEquals(0, open.exitValue());

    // the agent reconnects to node 1; a new session works, now within one node
    eventually(
        Duration.ofSeconds(120),
        () -> {
          Ssh again = Ssh.run(node1, renter, id, key, knownHosts, "echo again");
          assertEquals(0, again.exit(), again.toString());
          assertTrue(again.out().contains("again"), again.toString());
        });
  }

  /** The system ssh with {@code tickmark connect} (the CLI on this class path) as its proxy. */
  record Ssh(int exit, String out) {
    static List<String> command(String id, Path key, Path knownHosts, String remote) {
      String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
      String proxy =
          "'"
              + java
              + "' -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -cp '"
              + System.getProperty("java.class.path")
              + "' dev.tickmark.cli.Main connect "
              + id;
      List<String> command = new ArrayList<>();
      command.addAll(
          List.of(
              "ssh",
              "-o",
              "ProxyCommand=" + proxy.replace("%", "%%"),
              "-o",
              "HostKeyAlias=" + id,
              "-o",
              "UserKnownHostsFile=" + knownHosts,
              "-o",
              "GlobalKnownHostsFile=/dev/null",
              "-o",
              "StrictHostKeyChecking=yes",
              "-o",
              "BatchMode=yes",
              "-o",
              "IdentitiesOnly=yes",
              "-o",
              "ConnectTimeout=20",
              "-o",
              "ServerAliveInterval=2",
              "-o",
              "ServerAliveCountMax=3",
              "-i",
              key.toString(),
              "tickmark@" + id,
              remote));
      return command;
    }

    static Process start(
        NodeProcess node,
        ApiClient.Customer renter,
        String id,
        Path key,
        Path knownHosts,
        String remote)
        throws java.io.IOException {
      ProcessBuilder builder =
          new ProcessBuilder(command(id, key, knownHosts, remote)).redirectErrorStream(true);
      builder.environment().put("TICKMARK_URL", node.baseUrl());
      builder.environment().put("TICKMARK_API_KEY", renter.apiKey());
      builder.redirectInput(ProcessBuilder.Redirect.from(new java.io.File("/dev/null")));
      return builder.start();
    }

    static Ssh run(
        NodeProcess node,
        ApiClient.Customer renter,
        String id,
        Path key,
        Path knownHosts,
        String remote) {
      try {
        Process process = start(node, renter, id, key, knownHosts, remote);
        byte[] out = process.getInputStream().readAllBytes();
        if (!process.waitFor(60, TimeUnit.SECONDS)) {
          process.destroyForcibly();
          throw new AssertionError(
              "ssh did not finish: " + new String(out, StandardCharsets.UTF_8));
        }
        return new Ssh(process.exitValue(), new String(out, StandardCharsets.UTF_8));
      } catch (java.io.IOException e) {
        throw new AssertionError(e);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new AssertionError(e);
      }
    }
  }
}
