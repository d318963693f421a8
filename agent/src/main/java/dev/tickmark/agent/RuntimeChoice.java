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

  /**
   * Refuses {@code --runtime process} with real GPUs unless {@code --allow-unsandboxed}: the
   * process runtime isolates nothing, so a stranger's workload could read the agent's key and host
   * credential. With simulated GPUs it stays allowed (development).
   *
   * @param requested the runtime {@code --runtime} names, or null for the default ({@link #choose},
   *     which never picks {@code process} for real GPUs)
   * @throws IllegalArgumentException (one line) where refused
   */
  static void check(RuntimeKind requested, boolean simulated, boolean allowUnsandboxed) {
    if (requested == RuntimeKind.PROCESS && !simulated && !allowUnsandboxed) {
      throw new IllegalArgumentException(
          "refusing --runtime process with real GPUs: it isolates nothing, a renter's workload"
              + " could read this agent's key and credential; use --runtime docker or sandbox"
              + " (or add --allow-unsandboxed if you run only your own workloads)");
    }
  }

  /** The warning to log at start for an allowed unsandboxed runtime with real GPUs, or null. */
  static String unsandboxedWarning(RuntimeKind requested, boolean simulated) {
    if (requested != RuntimeKind.PROCESS || simulated) return null;
    return "--allow-unsandboxed: rentals on real GPUs run as plain processes, without isolation;"
        + " a workload can read this agent's key and credential and everything this user can";
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
