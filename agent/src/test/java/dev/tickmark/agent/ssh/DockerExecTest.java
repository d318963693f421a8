package dev.tickmark.agent.ssh;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The docker exec command lines of sessions into a container, without a Docker daemon. */
class DockerExecTest {
  @Test
  void execWithoutATerminal() {
    assertEquals(
        List.of(
            "docker", "exec", "-i", "-w", "/workspace", "tickmark-r1", "sh", "-c", "nvidia-smi -L"),
        DockerExec.command("docker", "tickmark-r1", false, "xterm", "nvidia-smi -L"));
  }

  @Test
  void aShellOnATerminalGetsMinusTAndTheTerminalType() {
    assertEquals(
        List.of(
            "/usr/bin/docker",
            "exec",
            "-i",
            "-t",
            "-w",
            "/workspace",
            "-e",
            "TERM=xterm-256color",
            "tickmark-r1",
            "sh",
            "-c",
            DockerExec.SHELL),
        DockerExec.command("/usr/bin/docker", "tickmark-r1", true, "xterm-256color", null));
  }

  @Test
  void theCommandIsOneArgumentWhateverItHolds() {
    String nasty = "echo 'a b'; rm -rf --no-preserve-root \"$X\" && `id`";
    List<String> argv = DockerExec.command("docker", "tickmark-r1", false, null, nasty);
    assertEquals(nasty, argv.get(argv.size() - 1));
    assertEquals("tickmark-r1", argv.get(argv.size() - 4), "the container comes right before sh");
  }

  @Test
  void aContainerNameThatCouldBeAnOptionIsRefused() {
    assertThrows(
        IllegalArgumentException.class,
        () -> DockerExec.command("docker", "--privileged", false, null, "id"));
    assertThrows(
        IllegalArgumentException.class, () -> DockerExec.command("docker", "", false, null, "id"));
  }

  @Test
  void sessionCommandsUseDockerExecForContainers() {
    Launch l =
        new SessionCommands()
            .launch(
                new Workspace.Container("docker", "tickmark-r9", Path.of("/s")), true, null, "ls");
    assertEquals(DockerExec.command("docker", "tickmark-r9", true, "xterm", "ls"), l.argv());
    assertNull(l.env(), "the docker tool runs with the agent's environment");
    assertNull(l.dir());
  }
}
