package dev.tickmark.agent.ssh;

import java.nio.file.Path;
import java.util.List;
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
   * files} mounted at {@code /workspace}); {@code docker} is the command line tool; a forwarded
   * connection is piped through {@code relay}'s helper, which connects inside the container's
   * network namespace (null: no forwarding on this host).
   */
  record Container(String docker, String container, Path files, Relay relay) implements Workspace {
    /** Without forwarding. */
    public Container(String docker, String container, Path files) {
      this(docker, container, files, null);
    }
  }

  /**
   * The sandbox runtime: sessions run {@code enter} followed by their program (a prefix that joins
   * the sandbox's namespaces, its limits and its working folder) with exactly {@code env}; a
   * forwarded connection is piped through {@code relay}'s helper, which connects inside the
   * sandbox's network namespace; SFTP and SCP are rooted at {@code files}, the host side of the
   * sandbox's {@code /workspace}.
   */
  record Sandboxed(List<String> enter, Relay relay, Map<String, String> env, Path files)
      implements Workspace {
    public Sandboxed {
      enter = List.copyOf(enter);
      env = Map.copyOf(env);
    }
  }

  /** The command line of a helper whose stdin and stdout are a connection to a loopback port. */
  @FunctionalInterface
  interface Relay {
    List<String> command(boolean ipv6, int port);
  }
}
