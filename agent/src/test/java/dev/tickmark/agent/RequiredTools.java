package dev.tickmark.agent;

import org.junit.jupiter.api.Assertions;
import org.junit.jupiter.api.Assumptions;

/**
 * Tests that need a tool of the machine (e.g. the OpenSSH client) skip where it is missing, except
 * where {@code TICKMARK_TESTS_REQUIRE} names it (CI, which installs it): there a missing tool is a
 * failure, so that a broken CI image cannot quietly skip them.
 */
public final class RequiredTools {
  private RequiredTools() {}

  /**
   * Skips the test (or fails it, where {@code TICKMARK_TESTS_REQUIRE} contains {@code tool}) unless
   * {@code present}.
   */
  public static void assume(String tool, boolean present, String message) {
    if (required(tool)) Assertions.assertTrue(present, message);
    Assumptions.assumeTrue(present, message);
  }

  /**
   * Skips (or, where {@code docker} is required, fails) unless a Docker daemon answers {@code
   * docker info} and {@code /bin/busybox} (Debian's {@code busybox-static}: the tests' offline
   * image) is there.
   */
  public static void assumeDocker() {
    String why = dockerMissing();
    assume(
        "docker",
        why == null,
        why
            + ": the docker integration tests are skipped (CI installs docker.io and busybox-static and"
            + " starts dockerd --iptables=false --bridge=none)");
  }

  /** Null when a daemon answers and busybox is there, else what is missing. */
  static String dockerMissing() {
    if (!java.nio.file.Files.isExecutable(java.nio.file.Path.of("/bin/busybox")))
      return "no /bin/busybox";
    try {
      Process p =
          new ProcessBuilder("docker", "info", "--format", "{{.ServerVersion}}")
              .redirectErrorStream(true)
              .redirectInput(ProcessBuilder.Redirect.from(new java.io.File("/dev/null")))
              .start();
      String out =
          new String(p.getInputStream().readAllBytes(), java.nio.charset.StandardCharsets.UTF_8);
      if (!p.waitFor(30, java.util.concurrent.TimeUnit.SECONDS)) {
        p.destroyForcibly();
        return "docker info did not answer within 30 s";
      }
      return p.exitValue() == 0 ? null : "no Docker daemon answers (" + out.strip() + ")";
    } catch (java.io.IOException e) {
      return "no docker command";
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return "interrupted";
    }
  }

  static boolean required(String tool) {
    return System.getenv().getOrDefault("TICKMARK_TESTS_REQUIRE", "").contains(tool);
  }
}
