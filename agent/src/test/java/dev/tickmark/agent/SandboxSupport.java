package dev.tickmark.agent;

import static org.junit.jupiter.api.Assertions.fail;

import org.junit.jupiter.api.Assumptions;

/**
 * The sandbox tests run a real bubblewrap. They skip, saying why, where it cannot start (not
 * installed, unprivileged user namespaces off), except where {@code TICKMARK_TESTS_REQUIRE}
 * contains {@code sandbox} (CI installs bubblewrap and sets it): there they fail.
 */
final class SandboxSupport {
  private SandboxSupport() {}

  /** The host's tools, once a sandbox is known to start here. */
  static Sandbox.Tools require() {
    Sandbox.Tools tools = Sandbox.Tools.find();
    String problem = Sandbox.probe(tools);
    if (problem == null) return tools;
    String why =
        "the sandbox tests need a working bubblewrap (apt-get install bubblewrap): " + problem;
    if (System.getenv().getOrDefault("TICKMARK_TESTS_REQUIRE", "").contains("sandbox")) fail(why);
    Assumptions.assumeTrue(false, why);
    return tools;
  }

  /**
   * A rental with network needs slirp4netns: skipped, saying why, where it is not installed, except
   * where {@code TICKMARK_TESTS_REQUIRE} names {@code slirp4netns} (CI installs it): there it
   * fails.
   */
  static void requireSlirp4netns(Sandbox.Tools tools) {
    if (tools.slirp4netns() != null) return;
    String why =
        "the sandbox's network tests need slirp4netns (apt-get install slirp4netns): not found in"
            + " /usr/bin or /usr/sbin";
    if (System.getenv().getOrDefault("TICKMARK_TESTS_REQUIRE", "").contains("slirp4netns"))
      fail(why);
    Assumptions.assumeTrue(false, why);
  }

  /**
   * An IPv4 address of this machine that is not loopback, where a workload's connection out can
   * arrive; skipped (failed where the network tests are required) on a machine without one.
   */
  static java.net.InetAddress nonLoopbackAddress() throws java.net.SocketException {
    for (java.net.NetworkInterface nic :
        java.util.Collections.list(java.net.NetworkInterface.getNetworkInterfaces())) {
      if (!nic.isUp() || nic.isLoopback()) continue;
      for (java.net.InetAddress a : java.util.Collections.list(nic.getInetAddresses()))
        if (a instanceof java.net.Inet4Address && !a.isLoopbackAddress()) return a;
    }
    String why = "this machine has no IPv4 address but loopback for a workload to reach";
    if (System.getenv().getOrDefault("TICKMARK_TESTS_REQUIRE", "").contains("slirp4netns"))
      fail(why);
    Assumptions.assumeTrue(false, why);
    return null;
  }
}
