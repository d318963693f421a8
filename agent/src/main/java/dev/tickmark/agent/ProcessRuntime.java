package dev.tickmark.agent;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Supplier;
import java.util.stream.Collectors;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Runs a rental's {@code command} as a child process of the agent (development, tests, {@code
 * --simulate-gpus}).
 *
 * <ul>
 *   <li>The command is run as given, argument by argument (no shell); an empty command runs {@link
 *       #DEFAULT_COMMAND} ({@code sleep infinity}), which keeps the rental running until it is
 *       stopped. The image is not used.
 *   <li>Working folder: the rental's scratch folder, created empty with mode 0700.
 *   <li>Environment: only {@code PATH} (the agent's), {@code LANG}/{@code LC_ALL} if set, {@code
 *       HOME} and {@code TMPDIR} (the scratch folder), {@code CUDA_VISIBLE_DEVICES} (the rented
 *       card indexes, comma-separated), {@code TICKMARK_RENTAL_ID} and {@code TICKMARK_NOTICE_FILE}
 *       ({@code <rental folder>/tickmark/notice}, absent until a spot notice). Nothing else of the
 *       agent's environment (it may hold the registration token).
 *   <li>stdin is empty; stdout and stderr are two pipes read line by line into the rental's {@link
 *       RentalLog} (started without one: both go to {@code <rental folder>/output.log}, outside the
 *       scratch folder).
 *   <li>Where {@code setsid} exists the workload gets its own session and process group, so that
 *       processes it leaves behind (children in the background) are found and ended with it.
 *   <li>Stop: SIGTERM to the process, its descendants and its process group; after the grace
 *       period, SIGKILL to whatever is left. The same happens to what a workload left behind when
 *       it exits by itself.
 *   <li>Spot notice: {@link #terminate} sends SIGTERM to the process, its descendants and its
 *       process group, as a stop does, but waits for nothing and kills nothing.
 *   <li>The scratch folder is wiped when the workload has ended, whatever the reason.
 * </ul>
 *
 * <p>No isolation: the workload runs as the agent's user, sees the network and the whole file
 * system. {@code network} is not enforced (only {@link DockerRuntime} does that). Use it for
 * development, never to rent out a machine.
 */
final class ProcessRuntime extends AbstractRuntime<ProcessRuntime.Running> {
  /**
   * What an empty {@code command} runs: a workload that keeps running until the rental is stopped.
   */
  static final List<String> DEFAULT_COMMAND = List.of("sleep", "infinity");

  /** How long to wait for processes to go after SIGKILL before giving up on them. */
  static final Duration KILL_WAIT = Duration.ofSeconds(5);

  private static final Logger log = LoggerFactory.getLogger(ProcessRuntime.class);
  private static final Path PROC = Path.of("/proc");

  private final String setsid;
  private final Map<String, String> baseEnv;

  ProcessRuntime(Path stateDir, Duration grace) {
    this(stateDir, grace, Clock.systemUTC(), System.getenv());
  }

  ProcessRuntime(Path stateDir, Duration grace, Clock clock, Map<String, String> agentEnv) {
    super("tickmark-agent-process-runtime", stateDir, grace, clock);
    Map<String, String> env = new LinkedHashMap<>();
    env.put("PATH", agentEnv.getOrDefault("PATH", "/usr/local/bin:/usr/bin:/bin"));
    for (String name : List.of("LANG", "LC_ALL"))
      if (agentEnv.containsKey(name)) env.put(name, agentEnv.get(name));
    this.baseEnv = Map.copyOf(env);
    this.setsid = findExecutable("setsid", baseEnv.get("PATH"), Path.of("/"));
    if (setsid == null)
      log.warn(
          "setsid not found: processes a workload leaves in the background may outlive its rental");
    dirs.wipeLeftovers(this::killLeftovers);
  }

  @Override
  public String name() {
    return "process";
  }

  @Override
  protected Supplier<Running> plan(Spec spec, RentalLog log) {
    String why = Runtime.checkRentalId(spec.rentalId());
    if (why == null) why = Runtime.checkCards(spec.cards(), null);
    if (why == null) why = Runtime.checkCommand(spec.command());
    if (why != null) throw new Failure(why);
    return () -> launch(spec, log);
  }

  private Running launch(Spec spec, RentalLog output) {
    String id = spec.rentalId();
    Path scratch = prepareScratch(spec);
    List<String> command = spec.command().isEmpty() ? DEFAULT_COMMAND : spec.command();
    String executable = findExecutable(command.get(0), baseEnv.get("PATH"), scratch);
    if (executable == null) {
      dirs.wipe(id);
      throw new Failure("command not found: " + Runtime.oneLine(command.get(0), 200));
    }
    List<String> argv = new ArrayList<>();
    if (setsid != null) argv.add(setsid);
    argv.add(executable);
    argv.addAll(command.subList(1, command.size()));
    ProcessBuilder pb = withoutInput(argv).directory(scratch.toFile());
    if (output == null) pb.redirectOutput(ProcessBuilder.Redirect.to(dirs.log(id).toFile()));
    else pb.redirectErrorStream(false); // two pipes, read line by line into the log
    Map<String, String> workloadEnv = environment(spec, scratch);
    Map<String, String> env = pb.environment();
    env.clear();
    env.putAll(workloadEnv);
    Process process;
    try {
      process = pb.start();
    } catch (IOException e) {
      dirs.wipe(id);
      String message = e.getMessage() == null ? e.toString() : e.getMessage();
      int i = message.indexOf("error=");
      throw new Failure(
          "cannot start "
              + Runtime.oneLine(command.get(0), 200)
              + (i >= 0 ? ": " + Runtime.oneLine(message.substring(i), 200) : ""),
          e);
    }
    Instant startedAt = clock.instant();
    Running r = new Running(spec, process, setsid != null, startedAt, scratch, workloadEnv);
    if (output != null) {
      r.output = output;
      r.readers.add(capture(process.getInputStream(), RentalLog.Stream.STDOUT, output));
      r.readers.add(capture(process.getErrorStream(), RentalLog.Stream.STDERR, output));
    }
    log.info(
        "rental {}: started pid {} on cards {}: {}{}",
        id,
        process.pid(),
        spec.cards(),
        describe(command),
        spec.network() ? "" : " (network access is not blocked by the process runtime)");
    return r;
  }

  /** The workload's whole environment (its SSH sessions get the same, see {@link #workspace}). */
  private Map<String, String> environment(Spec spec, Path scratch) {
    Map<String, String> env = new LinkedHashMap<>(baseEnv);
    env.put("HOME", scratch.toString());
    env.put("TMPDIR", scratch.toString());
    env.put(
        "CUDA_VISIBLE_DEVICES",
        spec.cards().stream().map(String::valueOf).collect(Collectors.joining(",")));
    env.put("TICKMARK_RENTAL_ID", spec.rentalId());
    env.put("TICKMARK_NOTICE_FILE", dirs.notice(spec.rentalId()).toString());
    return Map.copyOf(env);
  }

  /** Sessions run in the scratch folder with the workload's environment. */
  @Override
  public java.util.Optional<dev.tickmark.agent.ssh.Workspace> workspace(String rentalId) {
    Running r = workload(rentalId);
    return r == null
        ? java.util.Optional.empty()
        : java.util.Optional.of(new dev.tickmark.agent.ssh.Workspace.Local(r.scratch, r.env));
  }

  @Override
  protected void watch(Running r) {
    r.process
        .onExit()
        .thenRunAsync(
            () -> {
              r.exitCode = r.process.exitValue();
              end(r, "exited with status " + r.exitCode);
            },
            workers);
  }

  /** Stopping a process is ending it: {@link #release} does the signalling. */
  @Override
  protected void halt(Running r, String why) {
    end(r, why);
  }

  @Override
  protected Duration closeTimeout() {
    return grace.plus(KILL_WAIT).plusSeconds(5);
  }

  /** SIGTERM to all the workload's processes (the spot notice). */
  @Override
  protected void signalTerm(Running r) {
    List<ProcessHandle> procs = members(r);
    log.info(
        "rental {}: SIGTERM to its {} process(es) (spot notice)", r.spec.rentalId(), procs.size());
    r.process.destroy();
    procs.forEach(ProcessHandle::destroy);
  }

  /** SIGTERM to all the workload's processes, the grace period, SIGKILL to the rest. */
  @Override
  protected void release(Running r) {
    List<ProcessHandle> procs = members(r);
    if (procs.isEmpty()) {
      killLeftovers(r.spec.rentalId()); // what its ssh sessions left running in the background
      return;
    }
    r.process.destroy(); // SIGTERM
    procs.forEach(ProcessHandle::destroy);
    long deadline = System.nanoTime() + grace.toNanos();
    if (!awaitExit(procs, deadline)) {
      List<ProcessHandle> left = members(r); // again: new processes may have been started meanwhile
      log.warn(
          "rental {}: {} process(es) still running after the {} ms grace period: killing them",
          r.spec.rentalId(),
          left.size(),
          grace.toMillis());
      r.process.destroyForcibly();
      left.forEach(ProcessHandle::destroyForcibly);
      if (!awaitExit(left, System.nanoTime() + KILL_WAIT.toNanos())) {
        log.error(
            "rental {}: processes survive SIGKILL: {}",
            r.spec.rentalId(),
            left.stream()
                .filter(ProcessHandle::isAlive)
                .map(p -> String.valueOf(p.pid()))
                .collect(Collectors.joining(" ")));
      }
    }
    // whatever was started in the group while we waited
    List<ProcessHandle> late = members(r);
    late.forEach(ProcessHandle::destroyForcibly);
    awaitExit(late, System.nanoTime() + KILL_WAIT.toNanos());
    // what its ssh sessions left running in the background (they are not in its process group)
    killLeftovers(r.spec.rentalId());
  }

  /**
   * Waits until every one of {@code procs} is gone; false if some are still there at the deadline.
   */
  private static boolean awaitExit(List<ProcessHandle> procs, long deadlineNanos) {
    while (true) {
      if (procs.stream().allMatch(ProcessRuntime::gone)) return true;
      if (System.nanoTime() - deadlineNanos >= 0) return false;
      try {
        Thread.sleep(20); // a process that is not our child cannot be waited for: poll
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return false;
      }
    }
  }

  /** Exited: no longer alive, or a zombie (dead, waiting for a parent that may never reap it). */
  static boolean gone(ProcessHandle p) {
    if (!p.isAlive()) return true;
    try {
      String stat =
          Files.readString(
              PROC.resolve(String.valueOf(p.pid())).resolve("stat"), StandardCharsets.UTF_8);
      return stat.substring(stat.lastIndexOf(')') + 2).startsWith("Z");
    } catch (IOException | RuntimeException e) {
      return !p.isAlive();
    }
  }

  /**
   * Ends the processes left running for a rental, by a previous run of the agent or in the
   * background of its ssh sessions: those whose working folder is (under) its scratch folder. Best
   * effort: a process that changed folder is not found.
   */
  private void killLeftovers(String id) {
    if (!Files.isDirectory(PROC)) return;
    Path scratch;
    try {
      scratch = dirs.scratch(id).toRealPath();
    } catch (IOException e) {
      return;
    }
    List<ProcessHandle> left = new ArrayList<>();
    try (DirectoryStream<Path> entries =
        Files.newDirectoryStream(
            PROC, p -> p.getFileName().toString().chars().allMatch(Character::isDigit))) {
      for (Path entry : entries) {
        try {
          Path cwd = Files.readSymbolicLink(entry.resolve("cwd"));
          if (cwd.startsWith(scratch))
            ProcessHandle.of(Long.parseLong(entry.getFileName().toString())).ifPresent(left::add);
        } catch (IOException | RuntimeException e) {
          // gone, or not ours to look at
        }
      }
    } catch (IOException e) {
      return;
    }
    left.removeIf(p -> p.pid() == ProcessHandle.current().pid());
    if (left.isEmpty()) return;
    log.warn(
        "rental {}: ending {} process(es) left running (by a previous run of the agent, or in the background of an ssh session)",
        id,
        left.size());
    left.forEach(ProcessHandle::destroy);
    if (!awaitExit(left, System.nanoTime() + grace.toNanos())) {
      left.forEach(ProcessHandle::destroyForcibly);
      awaitExit(left, System.nanoTime() + KILL_WAIT.toNanos());
    }
  }

  /**
   * The workload's live processes: the process, its descendants, and (with setsid) every member of
   * its group.
   */
  private static List<ProcessHandle> members(Running r) {
    Map<Long, ProcessHandle> all = new LinkedHashMap<>();
    ProcessHandle self = r.process.toHandle();
    if (self.isAlive()) all.put(self.pid(), self);
    self.descendants().forEach(p -> all.put(p.pid(), p));
    if (r.ownGroup) {
      for (long pid : processGroup(r.process.pid())) {
        if (pid != ProcessHandle.current().pid())
          ProcessHandle.of(pid).ifPresent(p -> all.putIfAbsent(pid, p));
      }
    }
    all.values().removeIf(ProcessRuntime::gone);
    return new ArrayList<>(all.values());
  }

  /** The pids whose process group is {@code pgid}, from /proc (empty where there is no /proc). */
  static List<Long> processGroup(long pgid) {
    List<Long> pids = new ArrayList<>();
    if (!Files.isDirectory(PROC)) return pids;
    try (DirectoryStream<Path> entries =
        Files.newDirectoryStream(
            PROC, p -> p.getFileName().toString().chars().allMatch(Character::isDigit))) {
      for (Path entry : entries) {
        try {
          String stat = Files.readString(entry.resolve("stat"), StandardCharsets.UTF_8);
          int close = stat.lastIndexOf(')'); // the command name may hold spaces and parentheses
          String[] fields = stat.substring(close + 2).split(" ");
          // fields[0] state, [1] ppid, [2] pgrp
          if (fields.length > 2 && !"Z".equals(fields[0]) && Long.parseLong(fields[2]) == pgid) {
            pids.add(Long.parseLong(entry.getFileName().toString()));
          }
        } catch (IOException | RuntimeException gone) {
          // the process ended while we looked
        }
      }
    } catch (IOException e) {
      log.debug("cannot list /proc: {}", e.toString());
    }
    return pids;
  }

  /**
   * The executable {@code name} refers to: a path (with a slash; relative to {@code cwd}) that is
   * an executable file, or the first executable file of that name on {@code path}; null if none.
   */
  static String findExecutable(String name, String path, Path cwd) {
    if (name == null || name.isEmpty()) return null;
    if (name.indexOf('/') >= 0) {
      Path p = cwd.resolve(name);
      return Files.isRegularFile(p) && Files.isExecutable(p) ? p.toString() : null;
    }
    for (String dir : (path == null ? "" : path).split(":")) {
      if (dir.isEmpty()) continue;
      Path p = Path.of(dir).resolve(name);
      if (Files.isRegularFile(p) && Files.isExecutable(p)) return p.toString();
    }
    return null;
  }

  private static String describe(List<String> command) {
    String text = String.join(" ", command);
    return text.length() > 200 ? text.substring(0, 200) + "…" : text;
  }

  static final class Running extends Workload {
    final Process process;
    final boolean ownGroup;
    final Path scratch;
    final Map<String, String> env;

    Running(
        Spec spec,
        Process process,
        boolean ownGroup,
        Instant startedAt,
        Path scratch,
        Map<String, String> env) {
      super(spec, startedAt);
      this.process = process;
      this.ownGroup = ownGroup;
      this.scratch = scratch;
      this.env = env;
    }
  }
}
