package dev.tickmark.agent.ssh;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * What a shell or exec request runs, for a rental's {@link Workspace}:
 *
 * <ul>
 *   <li>process runtime: {@code bash} (or {@code sh}) for a shell, {@code bash -c <command>} for
 *       exec, in the scratch folder with the workload's environment, plus {@code TERM} with a
 *       pseudo-terminal. On a terminal the child is started by {@code setsid --ctty}, which makes
 *       the terminal its controlling one (job control, {@code tty}, SIGINT on ^C).
 *   <li>docker runtime: {@link DockerExec}, on the terminal too when there is one.
 *   <li>sandbox runtime: the same shell (the sandbox sees the host's {@code /usr}), started through
 *       the workspace's {@code enter} prefix, so it runs in the rental's namespaces as its workload
 *       does; {@code setsid --ctty} inside, on a terminal.
 * </ul>
 */
final class SessionCommands {
  private final String shell;
  private final String setsid;

  SessionCommands() {
    this.shell = Files.isExecutable(Path.of("/bin/bash")) ? "/bin/bash" : "/bin/sh";
    this.setsid = Files.isExecutable(Path.of("/usr/bin/setsid")) ? "/usr/bin/setsid" : "setsid";
  }

  /**
   * {@code command} null: the interactive shell. {@code term}: the terminal type the client asked
   * for, with {@code tty}.
   */
  Launch launch(Workspace workspace, boolean tty, String term, String command) {
    String t = term == null || term.isBlank() ? "xterm" : term;
    if (workspace instanceof Workspace.Container c)
      return new Launch(DockerExec.command(c.docker(), c.container(), tty, t, command), null, null);
    if (workspace instanceof Workspace.Sandboxed s) {
      List<String> argv = new ArrayList<>(s.enter());
      if (tty) {
        argv.add(setsid);
        argv.add("--ctty");
      }
      argv.add(shell);
      if (command != null) {
        argv.add("-c");
        argv.add(command);
      }
      Map<String, String> env = new LinkedHashMap<>(s.env());
      if (tty) env.put("TERM", t);
      env.put("SHELL", shell);
      return new Launch(argv, env, null);
    }
    Workspace.Local local = (Workspace.Local) workspace;
    List<String> argv = new ArrayList<>();
    if (tty) {
      argv.add(setsid);
      argv.add("--ctty");
    }
    argv.add(shell);
    if (command != null) {
      argv.add("-c");
      argv.add(command);
    }
    Map<String, String> env = new LinkedHashMap<>(local.env());
    env.put("HOME", local.dir().toString());
    if (tty) env.put("TERM", t);
    env.put("SHELL", shell);
    return new Launch(argv, env, local.dir());
  }
}
