package dev.tickmark.agent;

import dev.tickmark.agent.AgentConfig.RuntimeKind;

/**
 * The runtime an agent uses when {@code --runtime} does not name one:
 *
 * <ul>
 *   <li>simulated GPUs: {@code sandbox} where bubblewrap works, else {@code process}, with a
 *       warning that says why (a fresh laptop without bubblewrap still runs the quick start);
 *   <li>real GPUs: {@code docker} where the {@code docker} tool is installed, else {@code sandbox}
 *       where bubblewrap works, else none: the agent refuses to start, saying what to install (a
 *       stranger's workload never runs unisolated on a machine that is rented out).
 * </ul>
 */
final class RuntimeChoice {
  /** The runtime, and a warning to log (or null). */
  record Choice(RuntimeKind kind, String warning) {}

  private RuntimeChoice() {}

  /**
   * {@code docker}: the docker tool is installed; {@code sandboxProblem}: null where a sandbox can
   * start, else why not ({@link Sandbox#probe}).
   *
   * @throws IllegalStateException (one line, what to install) for real GPUs and no usable runtime
   */
  static Choice choose(boolean simulated, boolean docker, String sandboxProblem) {
    if (simulated) {
      if (sandboxProblem == null) return new Choice(RuntimeKind.SANDBOX, null);
      return new Choice(
          RuntimeKind.PROCESS,
          "rentals run as plain processes, without isolation (the process runtime), because "
              + sandboxProblem
              + "; fine for development, never for renting out a machine");
    }
    if (docker) return new Choice(RuntimeKind.DOCKER, null);
    if (sandboxProblem == null) return new Choice(RuntimeKind.SANDBOX, null);
    throw new IllegalStateException(
        "no runtime to isolate rentals on this machine: install Docker (apt-get install docker.io,"
            + " with the NVIDIA container toolkit) or bubblewrap (apt-get install bubblewrap); "
            + sandboxProblem);
  }

  /** The choice for this machine. */
  static Choice forThisHost(boolean simulated) {
    boolean docker =
        ProcessRuntime.findExecutable(
                "docker",
                System.getenv().getOrDefault("PATH", "/usr/bin:/bin"),
                java.nio.file.Path.of("/"))
            != null;
    // the sandbox is probed only where it may be chosen
    String problem = simulated || !docker ? Sandbox.probe(Sandbox.Tools.find()) : "not tried";
    return choose(simulated, docker, problem);
  }
}
