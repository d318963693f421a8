package dev.tickmark.agent.ssh;

import java.nio.file.Path;
import java.util.Map;

/** Where a rental's SSH sessions run: what its workload sees. Given by the runtime that runs it. */
public sealed interface Workspace {

  /** The folder on this host that SFTP and SCP are rooted at (the rental's scratch folder). */
  Path files();

  /**
   * The process runtime: sessions are child processes of the agent in {@code dir} (also their
   * {@code HOME}) with exactly {@code env}, the workload's environment.
   */
  record Local(Path dir, Map<String, String> env) implements Workspace {
    public Local {
      env = Map.copyOf(env);
    }

    @Override
    public Path files() {
      return dir;
    }
  }

  /**
   * The docker runtime: sessions are {@code docker exec} into {@code container} (which has {@code
   * files} mounted at {@code /workspace}); {@code docker} is the command line tool.
   */
  record Container(String docker, String container, Path files) implements Workspace {}
}
