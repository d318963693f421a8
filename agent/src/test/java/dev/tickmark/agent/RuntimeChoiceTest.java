package dev.tickmark.agent;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.tickmark.agent.AgentConfig.RuntimeKind;
import org.junit.jupiter.api.Test;

class RuntimeChoiceTest {
  private static final String NO_BWRAP = "bubblewrap is not installed (apt-get install bubblewrap)";

  @Test
  void simulatedGpusRunInTheSandboxWhereItWorksElseAsProcessesWithAWarning() {
    RuntimeChoice.Choice sandbox = RuntimeChoice.choose(true, true, null);
    assertEquals(RuntimeKind.SANDBOX, sandbox.kind(), "even where docker is installed");
    assertNull(sandbox.warning());
    RuntimeChoice.Choice process = RuntimeChoice.choose(true, false, NO_BWRAP);
    assertEquals(RuntimeKind.PROCESS, process.kind());
    assertTrue(process.warning().contains("without isolation"), process.warning());
    assertTrue(process.warning().contains(NO_BWRAP), process.warning());
  }

  @Test
  void realGpusRunInDockerElseTheSandboxElseTheAgentDoesNotStart() {
    assertEquals(RuntimeKind.DOCKER, RuntimeChoice.choose(false, true, null).kind());
    assertEquals(RuntimeKind.DOCKER, RuntimeChoice.choose(false, true, NO_BWRAP).kind());
    assertEquals(RuntimeKind.SANDBOX, RuntimeChoice.choose(false, false, null).kind());
    IllegalStateException none =
        assertThrows(
            IllegalStateException.class, () -> RuntimeChoice.choose(false, false, NO_BWRAP));
    assertTrue(none.getMessage().contains("apt-get install docker.io"), none.getMessage());
    assertTrue(none.getMessage().contains("apt-get install bubblewrap"), none.getMessage());
    assertEquals(1, none.getMessage().lines().count(), "one line");
  }

  @Test
  void processWithRealGpusNeedsAllowUnsandboxed() {
    IllegalArgumentException e =
        assertThrows(
            IllegalArgumentException.class,
            () -> RuntimeChoice.check(RuntimeKind.PROCESS, false, false));
    assertTrue(e.getMessage().contains("--allow-unsandboxed"), e.getMessage());
    assertEquals(1, e.getMessage().lines().count(), "one line");
    RuntimeChoice.check(RuntimeKind.PROCESS, false, true);
    RuntimeChoice.check(RuntimeKind.PROCESS, true, false); // simulated GPUs: development
    for (RuntimeKind k : new RuntimeKind[] {null, RuntimeKind.DOCKER, RuntimeKind.SANDBOX})
      RuntimeChoice.check(k, false, false);
    assertTrue(
        RuntimeChoice.unsandboxedWarning(RuntimeKind.PROCESS, false).contains("without isolation"));
    assertNull(RuntimeChoice.unsandboxedWarning(RuntimeKind.PROCESS, true));
    assertNull(RuntimeChoice.unsandboxedWarning(RuntimeKind.SANDBOX, false));
  }
}
