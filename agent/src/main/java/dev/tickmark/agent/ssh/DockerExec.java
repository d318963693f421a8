package dev.tickmark.agent.ssh;

import java.util.ArrayList;
import java.util.List;

/**
 * The {@code docker exec} command lines of SSH sessions into a rental's container (docker runtime),
 * one list element per argument (no shell on the agent's side):
 *
 * <pre>
 * docker exec -i [-t] -w /workspace [-e TERM=&lt;term&gt;] &lt;container&gt; sh -c &lt;command&gt;
 * docker exec -i [-t] -w /workspace [-e TERM=&lt;term&gt;] &lt;container&gt; sh -c &lt;{@link #SHELL}&gt;
 * </pre>
 *
 * {@code -t} only with a pseudo-terminal (the docker tool then runs on the session's terminal, so
 * window changes reach the container). The command is handed to the container's {@code sh} as one
 * argument, as OpenSSH hands it to the login shell.
 */
final class DockerExec {
  static final String WORKDIR = "/workspace";

  /** The interactive shell: bash where the image has it, else sh. */
  static final String SHELL =
      "if command -v bash >/dev/null 2>&1; then exec bash; else exec sh; fi";

  private DockerExec() {}

  /** A session running {@code command} (null: the interactive shell). */
  static List<String> command(
      String docker, String container, boolean tty, String term, String command) {
    if (container == null || container.isEmpty() || container.startsWith("-"))
      throw new IllegalArgumentException("invalid container name");
    List<String> argv = new ArrayList<>(List.of(docker, "exec", "-i"));
    if (tty) argv.add("-t");
    argv.add("-w");
    argv.add(WORKDIR);
    if (tty && term != null && !term.isEmpty()) {
      argv.add("-e");
      argv.add("TERM=" + term);
    }
    argv.add(container);
    argv.add("sh");
    argv.add("-c");
    argv.add(command == null ? SHELL : command);
    return argv;
  }
}
