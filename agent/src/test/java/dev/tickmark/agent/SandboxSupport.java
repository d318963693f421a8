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
}
