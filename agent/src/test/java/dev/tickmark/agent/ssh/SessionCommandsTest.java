package dev.tickmark.agent.ssh;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** What process-runtime sessions run. */
class SessionCommandsTest {
  private final Workspace.Local workspace =
      new Workspace.Local(
          Path.of("/state/rentals/r1/scratch"),
          Map.of(
              "PATH", "/usr/bin:/bin", "CUDA_VISIBLE_DEVICES", "0,1", "TICKMARK_RENTAL_ID", "r1"));

  @Test
  void execRunsTheCommandThroughTheShellWithTheWorkloadsEnvironment() {
    Launch l = new SessionCommands().launch(workspace, false, "xterm", "echo hi");
    List<String> argv = l.argv();
    assertEquals(List.of("-c", "echo hi"), argv.subList(argv.size() - 2, argv.size()));
    assertFalse(argv.contains("--ctty"), "no terminal");
    assertEquals(workspace.dir(), l.dir());
    assertEquals("0,1", l.env().get("CUDA_VISIBLE_DEVICES"));
    assertEquals("r1", l.env().get("TICKMARK_RENTAL_ID"));
    assertEquals(workspace.dir().toString(), l.env().get("HOME"));
    assertFalse(l.env().containsKey("TERM"));
  }

  @Test
  void onATerminalTheShellIsStartedBySetsidWithTheRequestedTerm() {
    Launch l = new SessionCommands().launch(workspace, true, "screen-256color", null);
    assertTrue(l.argv().get(0).endsWith("setsid"), l.argv().toString());
    assertEquals("--ctty", l.argv().get(1));
    assertEquals(3, l.argv().size(), "the shell, no -c: " + l.argv());
    assertEquals("screen-256color", l.env().get("TERM"));
    assertEquals(
        "xterm", new SessionCommands().launch(workspace, true, null, null).env().get("TERM"));
  }
}
