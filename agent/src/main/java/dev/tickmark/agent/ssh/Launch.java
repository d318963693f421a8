package dev.tickmark.agent.ssh;

import java.nio.file.Path;
import java.util.List;
import java.util.Map;

/**
 * A session's process: its arguments, its environment (null: the agent's own, for the docker tool)
 * and its working folder (null: the agent's).
 */
record Launch(List<String> argv, Map<String, String> env, Path dir) {
  Launch {
    argv = List.copyOf(argv);
    env = env == null ? null : Map.copyOf(env);
  }
}
