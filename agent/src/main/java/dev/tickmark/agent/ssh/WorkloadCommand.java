package dev.tickmark.agent.ssh;

import com.sun.jna.Memory;
import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;
import org.apache.sshd.server.Environment;
import org.apache.sshd.server.ExitCallback;
import org.apache.sshd.server.Signal;
import org.apache.sshd.server.channel.ChannelSession;
import org.apache.sshd.server.command.Command;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One shell or exec request: a child process joined to the SSH channel, through pipes, or through a
 * {@link Pty} when the client asked for one ({@code ssh -t}, interactive logins). The exit status
 * goes back to the client once the output is written. When the channel closes while the process
 * still runs (the client left, the session was closed because the rental ended) the process and its
 * descendants are ended: SIGTERM (and SIGHUP from the closing terminal), SIGKILL {@link
 * #KILL_AFTER_MS} later. What a command that ended left in the background ({@code nohup job &})
 * keeps running, as with OpenSSH, until the rental ends (the runtime ends it then).
 */
final class WorkloadCommand implements Command {
  static final long KILL_AFTER_MS = 2_000;

  /** How long the output of a terminal may still flow after its shell exited. */
  private static final int DRAIN_POLL_MS = 100;

  private static final Logger log = LoggerFactory.getLogger(WorkloadCommand.class);

  /** Builds the process of a request; an IOException refuses it. */
  interface Launcher {
    Launch launch(ChannelSession channel, boolean tty, String term, String command)
        throws IOException;
  }

  private final String command;
  private final Launcher launcher;
  private final Executor threads;
  private InputStream in;
  private OutputStream out;
  private OutputStream err;
  private ExitCallback exit;
  private volatile Process process;
  private volatile Pty pty;

  /** {@code command} null: the shell. */
  WorkloadCommand(String command, Launcher launcher, Executor threads) {
    this.command = command;
    this.launcher = launcher;
    this.threads = threads;
  }

  @Override
  public void setInputStream(InputStream in) {
    this.in = in;
  }

  @Override
  public void setOutputStream(OutputStream out) {
    this.out = out;
  }

  @Override
  public void setErrorStream(OutputStream err) {
    this.err = err;
  }

  @Override
  public void setExitCallback(ExitCallback exit) {
    this.exit = exit;
  }

  @Override
  public void start(ChannelSession channel, Environment env) throws IOException {
    boolean tty = channel instanceof WorkloadChannel w && w.ptyRequested();
    Launch launch = launcher.launch(channel, tty, env.getEnv().get(Environment.ENV_TERM), command);
    ProcessBuilder pb = new ProcessBuilder(launch.argv());
    if (launch.dir() != null) pb.directory(launch.dir().toFile());
    if (launch.env() != null) {
      pb.environment().clear();
      pb.environment().putAll(launch.env());
    }
    if (tty) startOnTerminal(pb, env);
    else startWithPipes(pb);
  }

  private void startWithPipes(ProcessBuilder pb) throws IOException {
    Process p = pb.start();
    process = p;
    threads.execute(() -> copy(in, p.getOutputStream(), true));
    CompletableFuture<Void> stdout =
        CompletableFuture.runAsync(() -> copy(p.getInputStream(), out, false), threads);
    CompletableFuture<Void> stderr =
        CompletableFuture.runAsync(() -> copy(p.getErrorStream(), err, false), threads);
    p.onExit()
        .thenCompose(x -> CompletableFuture.allOf(stdout, stderr))
        .whenComplete((x, e) -> exited(p.exitValue()));
  }

  private void startOnTerminal(ProcessBuilder pb, Environment env) throws IOException {
    Pty t = Pty.open(intOf(env, Environment.ENV_COLUMNS), intOf(env, Environment.ENV_LINES));
    Process p;
    try {
      File slave = new File(t.slavePath());
      p =
          pb.redirectInput(ProcessBuilder.Redirect.from(slave))
              .redirectOutput(ProcessBuilder.Redirect.appendTo(slave))
              .redirectError(ProcessBuilder.Redirect.appendTo(slave))
              .start();
    } catch (IOException e) {
      t.close();
      throw e;
    }
    t.closeSlave(); // the child holds its own: the master reads end when it and its children go
    pty = t;
    process = p;
    env.addSignalListener(
        (channel, signal) ->
            t.resize(intOf(env, Environment.ENV_COLUMNS), intOf(env, Environment.ENV_LINES)),
        Signal.WINCH);
    threads.execute(() -> toTerminal(t));
    CompletableFuture<Void> output = CompletableFuture.runAsync(() -> fromTerminal(t, p), threads);
    output.whenComplete(
        (x, e) -> {
          t.close();
          p.onExit().thenRun(() -> exited(p.exitValue()));
        });
  }

  /** The terminal's output to the client, until it ends or the shell has exited and gone quiet. */
  private void fromTerminal(Pty t, Process p) {
    Memory buf = new Memory(32 * 1024);
    byte[] bytes = new byte[(int) buf.size()];
    try {
      while (true) {
        boolean exited = !p.isAlive();
        int n = t.read(buf, DRAIN_POLL_MS);
        if (n < 0) return;
        if (n == 0) {
          if (exited) return; // what it left in the background keeps no session open
          continue;
        }
        buf.read(0, bytes, 0, n);
        out.write(bytes, 0, n);
        out.flush();
      }
    } catch (IOException e) {
      // the channel is closed
    }
  }

  private void toTerminal(Pty t) {
    byte[] buf = new byte[8192];
    try {
      for (int n; (n = in.read(buf)) >= 0; ) if (n > 0) t.write(buf, n);
    } catch (IOException e) {
      // the channel or the terminal is closed
    }
  }

  private void exited(int status) {
    try {
      out.flush();
      err.flush();
    } catch (IOException e) {
      // the channel is closed
    }
    exit.onExit(status);
  }

  /** The channel is closed: end what still runs. */
  @Override
  public void destroy(ChannelSession channel) {
    Process p = process;
    if (p != null && p.isAlive()) {
      List<ProcessHandle> all = new java.util.ArrayList<>();
      all.add(p.toHandle());
      p.descendants().forEach(all::add);
      all.forEach(ProcessHandle::destroy);
      if (all.stream().anyMatch(ProcessHandle::isAlive)) {
        CompletableFuture.delayedExecutor(KILL_AFTER_MS, TimeUnit.MILLISECONDS, threads)
            .execute(() -> all.forEach(ProcessHandle::destroyForcibly));
      }
    }
  }

  private static void copy(InputStream from, OutputStream to, boolean closeAtEnd) {
    byte[] buf = new byte[32 * 1024];
    try {
      for (int n; (n = from.read(buf)) >= 0; ) {
        to.write(buf, 0, n);
        to.flush();
      }
    } catch (IOException e) {
      log.debug("session pipe ended: {}", e.toString());
    } finally {
      if (closeAtEnd) {
        try {
          to.close();
        } catch (IOException e) {
          // already closed
        }
      }
    }
  }

  private static int intOf(Environment env, String name) {
    try {
      return Integer.parseInt(env.getEnv().getOrDefault(name, "0"));
    } catch (NumberFormatException e) {
      return 0;
    }
  }
}
