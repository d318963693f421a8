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

  static boolean required(String tool) {
    return System.getenv().getOrDefault("TICKMARK_TESTS_REQUIRE", "").contains(tool);
  }
}
