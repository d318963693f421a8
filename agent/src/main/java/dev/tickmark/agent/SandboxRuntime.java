package dev.tickmark.agent;

import dev.tickmark.agent.ssh.Workspace;
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
import java.util.Optional;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import java.util.stream.Collectors;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Runs a rental's {@code command} in a bubblewrap sandbox ({@link Sandbox} says what it sees), as a
 * child of the agent; the default without Docker and with simulated GPUs.
 *
 * <ul>
 *   <li>The command runs as given (no shell), found on the sandbox's {@link Sandbox#PATH}; an empty
 *       one runs {@code sleep infinity}. The image is not used.
 *   <li>Environment: {@code PATH} (the sandbox's), {@code LANG}/{@code LC_ALL} if set, {@code HOME}
 *       and {@code TMPDIR} ({@value Sandbox#WORKSPACE}), {@code USER}, {@code CUDA_VISIBLE_DEVICES}
 *       and {@code TICKMARK_RENTAL_ID}; nothing else of the agent's.
 *   <li>Network: none (loopback of its own) unless the rental enables it; then a userspace route
 *       out through slirp4netns ({@link Sandbox#slirp4netns}), set up before the workload runs (the
 *       sandbox waits for it), ended with the sandbox. The host's own network namespace is never
 *       shared with a stranger's workload, nor its loopback reachable. Without slirp4netns on the
 *       host such a rental is refused.
 *   <li>stdout and stderr: two pipes read line by line into the rental's {@link RentalLog}.
 *   <li>Stop: SIGTERM to every process in the sandbox, the grace period, then SIGKILL to its
 *       namespace init: the PID namespace dies with it, and so does whatever the rental left in the
 *       background or its SSH sessions started. The scratch folder is wiped.
 *   <li>SSH sessions and forwarded ports enter the same namespaces ({@link Workspace.Sandboxed}).
 * </ul>
 */
final class SandboxRuntime extends AbstractRuntime<SandboxRuntime.Running> {
  static final List<String> DEFAULT_COMMAND = ProcessRuntime.DEFAULT_COMMAND;
  static final Duration KILL_WAIT = Duration.ofSeconds(5);

  /** How long bwrap may take to set a sandbox up before its workload runs. */
  static final Duration SETUP_TIMEOUT = Duration.ofSeconds(10);

  static final String NETWORK_REFUSED =
      "this host's sandbox runtime cannot give a rental network access (slirp4netns is not"
          + " installed there); rent without network, or on another host";

  private static final Logger log = LoggerFactory.getLogger(SandboxRuntime.class);
  private static final Path PROC = Path.of("/proc");

  private final Sandbox.Tools tools;
  private final Sandbox.Identity identity;
  private final Path devDir;
  private final SandboxLimits limits;
  private final Map<String, String> baseEnv;

  /**
   * Starts the bwrap processes. --die-with-parent kills a sandbox when the thread that started it
   * ends (PR_SET_PDEATHSIG follows the parent thread, not process), so it must never be a pooled
   * worker that may time out: this one lives as long as the runtime.
   */
  private final ExecutorService spawner =
      Executors.newSingleThreadExecutor(
          r -> {
            Thread t = new Thread(r, "tickmark-agent-sandbox-spawner");
            t.setDaemon(true);
            return t;
          });

  /** The real devices and tools; refuses (IllegalStateException) where no sandbox can start. */
  SandboxRuntime(Path stateDir, Duration grace) {
    this(
        usable(Sandbox.Tools.find()),
        Sandbox.Identity.forThisAgent(),
        stateDir,
        grace,
        Clock.systemUTC(),
        System.getenv(),
        Path.of("/dev"),
        SandboxLimits.defaults());
  }

  private static Sandbox.Tools usable(Sandbox.Tools tools) {
    String problem = Sandbox.probe(tools);
    if (problem != null)
      throw new IllegalStateException("the sandbox runtime cannot run: " + problem);
    return tools;
  }

  /**
   * {@code identity}: the host uid the sandboxes run as (null: the agent's); {@code devDir}: where
   * the GPUs' device nodes are (tests use stand-in files).
   */
  SandboxRuntime(
      Sandbox.Tools tools,
      Sandbox.Identity identity,
      Path stateDir,
      Duration grace,
      Clock clock,
      Map<String, String> agentEnv,
      Path devDir,
      SandboxLimits limits) {
    super("tickmark-agent-sandbox-runtime", stateDir, grace, clock);
    String missing = tools.missing();
    if (missing != null)
      throw new IllegalStateException("the sandbox runtime cannot run: " + missing);
    this.tools = tools;
    this.identity = identity;
    this.devDir = devDir;
    this.limits = limits;
    Map<String, String> env = new LinkedHashMap<>();
    env.put("PATH", Sandbox.PATH);
    for (String name : List.of("LANG", "LC_ALL"))
      if (agentEnv.containsKey(name)) env.put(name, agentEnv.get(name));
    this.baseEnv = Map.copyOf(env);
    // a sandbox dies with the agent (--die-with-parent): only its folders can be left behind
    dirs.wipeLeftovers(id -> deleteQuietly(etcDir(id)));
    if (tools.slirp4netns() == null)
      log.warn(
          "slirp4netns is not installed: this host tells the engine it cannot give rentals network, and rentals that ask for it go to other hosts (apt-get install slirp4netns, then restart the agent)");
  }

  @Override
  public String name() {
    return "sandbox";
  }

  /** Only through slirp4netns: the sandbox's own network namespace has no route out. */
  @Override
  public boolean offersNetwork() {
    return tools.slirp4netns() != null;
  }

  private Path etcDir(String id) {
    return dirs.rental(id).resolve("sandbox-etc");
  }

  @Override
  protected Supplier<Running> plan(Spec spec, RentalLog output) {
    String why = Runtime.checkRentalId(spec.rentalId());
    if (why == null) why = Runtime.checkCards(spec.cards(), null);
    if (why == null) why = Runtime.checkCommand(spec.command());
    if (why == null && spec.network() && tools.slirp4netns() == null) why = NETWORK_REFUSED;
    if (why != null) throw new Failure(why);
    List<String> command = spec.command().isEmpty() ? DEFAULT_COMMAND : spec.command();
    String executable = executable(command.get(0));
    if (executable == null)
      throw new Failure("command not found: " + Runtime.oneLine(command.get(0), 200));
    List<String> resolved = new ArrayList<>();
    resolved.add(executable);
    resolved.addAll(command.subList(1, command.size()));
    return () -> launch(spec, resolved, output);
  }

  /**
   * The sandbox's path of {@code name}: a name found on the sandbox's PATH, or an absolute path in
   * the read-only system; null if the sandbox has no such program (its workspace starts empty, so
   * nothing there can be run at the start).
   */
  static String executable(String name) {
    if (name.indexOf('/') < 0)
      return ProcessRuntime.findExecutable(name, Sandbox.PATH, Path.of("/"));
    Path p = Path.of(name).normalize();
    if (!p.isAbsolute()) return null;
    boolean visible = p.startsWith("/usr");
    for (String top : Sandbox.TOP_LEVEL) visible |= p.startsWith("/" + top);
    return visible && Files.isRegularFile(p) && Files.isExecutable(p) ? p.toString() : null;
  }

  private Running launch(Spec spec, List<String> command, RentalLog output) {
    String id = spec.rentalId();
    Path scratch = prepareScratch(spec);
    Path etc = etcDir(id);
    try {
      deleteQuietly(etc);
      Files.createDirectories(etc);
      int[] ids = Sandbox.Identity.of(identity);
      for (String name : Sandbox.GENERATED_ETC)
        Files.writeString(
            etc.resolve(name), Sandbox.etcFile(name, ids[0], ids[1]), StandardCharsets.UTF_8);
      if (identity != null) { // the sandbox's own folder: it writes there as that uid
        Files.setAttribute(
            scratch, "unix:uid", identity.uid(), java.nio.file.LinkOption.NOFOLLOW_LINKS);
        Files.setAttribute(
            scratch, "unix:gid", identity.gid(), java.nio.file.LinkOption.NOFOLLOW_LINKS);
        // a restored workspace was unpacked as the agent: its content becomes the sandbox's too
        if (spec.fill() != null) giveTo(scratch, identity);
      }
    } catch (IOException e) {
      dirs.wipe(id);
      throw new Failure("cannot prepare the sandbox on the host", e);
    }
    Path mountpoint = null;
    if (identity != null) {
      try {
        mountpoint = Files.createTempDirectory("tickmark-sandbox-" + id + "-");
        for (Path p : List.of(mountpoint, mountpoint.resolve("w"), mountpoint.resolve("n"))) {
          if (!Files.exists(p)) Files.createDirectory(p);
          Files.setPosixFilePermissions(
              p, java.nio.file.attribute.PosixFilePermissions.fromString("rwxr-xr-x"));
        }
      } catch (IOException e) {
        cleanUp(id);
        throw new Failure("cannot prepare the sandbox on the host", e);
      }
    }
    List<String> argv =
        Sandbox.bwrap(
            tools,
            identity,
            scratch,
            dirs.notice(id).getParent(),
            mountpoint,
            etc,
            Sandbox.devices(devDir, spec.cards()),
            limits,
            spec.network(),
            command);
    ProcessBuilder pb = withoutInput(argv);
    // with network the sandbox waits for the agent's "1" on its stdin before the workload runs
    if (spec.network()) pb.redirectInput(ProcessBuilder.Redirect.PIPE);
    if (output == null) pb.redirectOutput(ProcessBuilder.Redirect.to(dirs.log(id).toFile()));
    else pb.redirectErrorStream(false);
    Map<String, String> env = environment(spec);
    pb.environment().clear();
    pb.environment().putAll(env);
    Process process;
    try {
      process = spawner.submit(pb::start).get();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      cleanUp(id);
      deleteQuietly(mountpoint);
      throw new Failure("interrupted while starting the sandbox", e);
    } catch (ExecutionException e) {
      cleanUp(id);
      deleteQuietly(mountpoint);
      throw new Failure(
          "cannot start bubblewrap: " + Runtime.oneLine(e.getCause().getMessage(), 200), e);
    }
    Running r = new Running(spec, process, clock.instant(), scratch, env);
    r.mountpoint = mountpoint;
    if (output != null) {
      r.output = output;
      r.readers.add(capture(process.getInputStream(), RentalLog.Stream.STDOUT, output));
      r.readers.add(capture(process.getErrorStream(), RentalLog.Stream.STDERR, output));
    }
    if (spec.network()) connect(r);
    r.init = awaitInit(process);
    r.pidNamespace = r.init > 0 ? namespace(r.init, "pid") : null;
    log.info(
        "rental {}: sandbox pid {} (namespace init {}) on cards {}: {}",
        id,
        process.pid(),
        r.init,
        spec.cards(),
        describe(command));
    return r;
  }

  /**
   * Gives the sandbox of a network rental its route out while it waits ({@link
   * Sandbox#AWAIT_NETWORK}): slirp4netns on the sandbox's namespace init, then, once it says it is
   * ready, the "1" that lets the workload run. A {@link Failure}, with the sandbox ended, when it
   * cannot; nothing to do when bwrap ended first (awaitInit then says so).
   */
  private void connect(Running r) {
    String id = r.rentalId();
    long init = awaitChild(r.process);
    if (init <= 0) return;
    Path errors = etcDir(id).resolve("network.log");
    try {
      r.network =
          new ProcessBuilder(Sandbox.slirp4netns(tools, identity, init))
              .redirectError(ProcessBuilder.Redirect.appendTo(errors.toFile()))
              .start();
    } catch (IOException e) {
      throw notConnected(
          r, init, "cannot start slirp4netns: " + Runtime.oneLine(e.getMessage(), 200));
    }
    if (!awaitReady(r.network)) {
      String said = "";
      try {
        said = Runtime.oneLine(Files.readString(errors, StandardCharsets.UTF_8), 200);
      } catch (IOException e) {
        // nothing written
      }
      throw notConnected(
          r, init, "slirp4netns did not connect it" + (said.isEmpty() ? "" : " (" + said + ")"));
    }
    try (java.io.OutputStream go = r.process.getOutputStream()) {
      go.write("1\n".getBytes(StandardCharsets.US_ASCII));
    } catch (IOException e) {
      // bwrap is gone: awaitInit says so
    }
    log.info("rental {}: network through slirp4netns pid {}", id, r.network.pid());
  }

  /**
   * Ends the waiting sandbox (its namespace init {@code init}, still waiting, and bwrap) and its
   * network helper; the {@link Failure} that fails the start.
   */
  private Failure notConnected(Running r, long init, String why) {
    log.warn("rental {}: cannot give its sandbox network access: {}", r.rentalId(), why);
    stopNetwork(r);
    Optional<ProcessHandle> waiting = ProcessHandle.of(init);
    waiting.ifPresent(ProcessHandle::destroyForcibly);
    r.process.destroyForcibly();
    exited(r.process, KILL_WAIT);
    waiting.ifPresent(
        p -> {
          try {
            p.onExit().get(KILL_WAIT.toMillis(), TimeUnit.MILLISECONDS);
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
          } catch (ExecutionException | java.util.concurrent.TimeoutException e) {
            log.warn("rental {}: its waiting sandbox {} outlives SIGKILL", r.rentalId(), init);
          }
        });
    cleanUp(r.rentalId());
    deleteQuietly(r.mountpoint);
    return new Failure("cannot give the sandbox network access: " + why);
  }

  /**
   * bwrap's child in a network namespace of its own (the sandbox's namespace init), once it exists;
   * -1 if bwrap ended first. (Before bwrap, the same process runs the shell that binds the
   * workspace: its {@code mount} children share the agent's namespace.)
   */
  private static long awaitChild(Process bwrap) {
    String agents = namespace(ProcessHandle.current().pid(), "net");
    long deadline = System.nanoTime() + SETUP_TIMEOUT.toNanos();
    while (bwrap.isAlive() && System.nanoTime() - deadline < 0) {
      for (long child : children(bwrap.pid())) {
        String net = namespace(child, "net");
        if (net != null && !net.equals(agents)) return child;
      }
      pause();
    }
    return -1;
  }

  /** Whether slirp4netns wrote its ready byte within {@link #SETUP_TIMEOUT}. */
  private static boolean awaitReady(Process slirp) {
    long deadline = System.nanoTime() + SETUP_TIMEOUT.toNanos();
    java.io.InputStream ready = slirp.getInputStream();
    try {
      while (System.nanoTime() - deadline < 0) {
        if (ready.available() > 0) return ready.read() == '1';
        if (!slirp.isAlive()) return false;
        pause();
      }
    } catch (IOException e) {
      return false;
    }
    return false;
  }

  private static void pause() {
    try {
      Thread.sleep(5); // bwrap says nothing when it is ready, a pipe has no timed read: poll
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  /** Ends the sandbox's network helper: its exit pipe closed, then SIGTERM, then SIGKILL. */
  private static void stopNetwork(Running r) {
    Process slirp = r.network;
    if (slirp == null) return;
    try {
      slirp.getOutputStream().close();
    } catch (IOException e) {
      // already closed
    }
    slirp.destroy();
    if (!exited(slirp, KILL_WAIT)) slirp.destroyForcibly();
  }

  /**
   * Makes everything under {@code dir} (links themselves, never what they point to) owned by {@code
   * identity}.
   */
  static void giveTo(Path dir, Sandbox.Identity identity) throws IOException {
    Files.walkFileTree(
        dir,
        new java.nio.file.SimpleFileVisitor<>() {
          @Override
          public java.nio.file.FileVisitResult preVisitDirectory(
              Path d, java.nio.file.attribute.BasicFileAttributes attrs) throws IOException {
            own(d);
            return java.nio.file.FileVisitResult.CONTINUE;
          }

          @Override
          public java.nio.file.FileVisitResult visitFile(
              Path f, java.nio.file.attribute.BasicFileAttributes attrs) throws IOException {
            own(f);
            return java.nio.file.FileVisitResult.CONTINUE;
          }

          private void own(Path p) throws IOException {
            Files.setAttribute(
                p, "unix:uid", identity.uid(), java.nio.file.LinkOption.NOFOLLOW_LINKS);
            Files.setAttribute(
                p, "unix:gid", identity.gid(), java.nio.file.LinkOption.NOFOLLOW_LINKS);
          }
        });
  }

  private void cleanUp(String id) {
    deleteQuietly(etcDir(id));
    dirs.wipe(id);
  }

  /**
   * The host pid of the sandbox's namespace init (bwrap's child), once it has set the sandbox up
   * and started the workload; -1 if the sandbox ended first (a workload that exited at once, or a
   * bwrap that failed: its message is in the rental's log).
   */
  private static long awaitInit(Process bwrap) {
    long deadline = System.nanoTime() + SETUP_TIMEOUT.toNanos();
    while (bwrap.isAlive() && System.nanoTime() - deadline < 0) {
      List<Long> init = children(bwrap.pid());
      // the init forks the workload only once every mount is in place
      if (!init.isEmpty() && !children(init.get(0)).isEmpty()) return init.get(0);
      pause();
      if (Thread.currentThread().isInterrupted()) break;
    }
    return -1;
  }

  /**
   * The children of {@code pid}: from /proc/PID/task/PID/children (one small read), else from a
   * scan of every process ({@link ProcessHandle#children}).
   */
  static List<Long> children(long pid) {
    Path file = PROC.resolve(pid + "/task/" + pid + "/children");
    try {
      String text = Files.readString(file, StandardCharsets.US_ASCII).trim();
      List<Long> pids = new ArrayList<>();
      if (!text.isEmpty()) for (String p : text.split("\\s+")) pids.add(Long.parseLong(p));
      return pids;
    } catch (IOException | RuntimeException e) {
      return ProcessHandle.of(pid).stream()
          .flatMap(ProcessHandle::children)
          .map(ProcessHandle::pid)
          .toList();
    }
  }

  private Map<String, String> environment(Spec spec) {
    Map<String, String> env = new LinkedHashMap<>(baseEnv);
    env.put("HOME", Sandbox.WORKSPACE);
    env.put("TMPDIR", Sandbox.WORKSPACE);
    env.put("USER", Sandbox.USER);
    env.put(
        "CUDA_VISIBLE_DEVICES",
        spec.cards().stream().map(String::valueOf).collect(Collectors.joining(",")));
    env.put("TICKMARK_RENTAL_ID", spec.rentalId());
    env.put(
        "TICKMARK_NOTICE_FILE",
        Sandbox.NOTICE_DIR + "/" + dirs.notice(spec.rentalId()).getFileName());
    return Map.copyOf(env);
  }

  /**
   * Sessions enter the sandbox's namespaces; SFTP and SCP are rooted at the scratch folder on the
   * host, the same folder the sandbox sees as {@value Sandbox#WORKSPACE}.
   */
  @Override
  public Optional<Workspace> workspace(String rentalId) {
    Running r = workload(rentalId);
    if (r == null) return Optional.empty();
    if (r.init <= 0 && r.process.isAlive()) {
      // bwrap was slower than SETUP_TIMEOUT: its init may be there by now
      List<Long> init = children(r.process.pid());
      if (!init.isEmpty()) {
        r.init = init.get(0);
        r.pidNamespace = namespace(r.init, "pid");
      }
    }
    if (r.init <= 0) return Optional.empty();
    long init = r.init;
    return Optional.of(
        new Workspace.Sandboxed(
            Sandbox.enter(tools, identity, init, limits),
            (ipv6, port) -> Sandbox.relay(tools, identity, init, ipv6, port),
            r.env,
            r.scratch));
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

  /** The spot notice's SIGTERM: to every process of the sandbox but its init, which stays. */
  @Override
  protected void signalTerm(Running r) {
    List<ProcessHandle> procs = members(r);
    procs.removeIf(p -> p.pid() == r.init);
    log.info("rental {}: SIGTERM to its {} process(es) (spot notice)", r.rentalId(), procs.size());
    procs.forEach(ProcessHandle::destroy);
  }

  /** SIGTERM to every process of the sandbox, the grace period, then its init's SIGKILL. */
  @Override
  protected void halt(Running r, String why) {
    List<ProcessHandle> procs = members(r);
    procs.removeIf(p -> p.pid() == r.init);
    procs.forEach(ProcessHandle::destroy);
    if (!exited(r.process, grace)) {
      log.warn(
          "rental {}: still running after the {} ms grace period: killing its sandbox",
          r.rentalId(),
          grace.toMillis());
      kill(r);
    }
    end(r, why);
  }

  /** Makes sure the sandbox is gone: its init killed, and no process left in its PID namespace. */
  @Override
  protected void release(Running r) {
    if (r.process.isAlive() || initAlive(r)) kill(r);
    if (!awaitEmpty(r, KILL_WAIT)) {
      List<ProcessHandle> left = members(r);
      log.error(
          "rental {}: processes left in its PID namespace: {}",
          r.rentalId(),
          left.stream().map(p -> String.valueOf(p.pid())).collect(Collectors.joining(" ")));
      left.forEach(ProcessHandle::destroyForcibly);
    }
    stopNetwork(r);
    deleteQuietly(etcDir(r.rentalId()));
    deleteQuietly(r.mountpoint); // empty on the host: the bind was in the sandbox's namespace only
  }

  /**
   * SIGKILL to the namespace init: the kernel kills every process of its PID namespace, and bwrap
   * exits once they are gone (it waits for its init). Without a known init, bwrap itself (whose
   * --die-with-parent takes the init along).
   */
  private void kill(Running r) {
    if (initAlive(r)) ProcessHandle.of(r.init).ifPresent(ProcessHandle::destroyForcibly);
    else r.process.destroyForcibly();
    if (!exited(r.process, KILL_WAIT)) {
      r.process.destroyForcibly();
      if (!exited(r.process, KILL_WAIT))
        log.error("rental {}: bwrap {} survives SIGKILL", r.rentalId(), r.process.pid());
    }
  }

  /**
   * Whether the sandbox's init still runs: its pid still in the sandbox's PID namespace (once it
   * has gone, the pid may be another process's).
   */
  private static boolean initAlive(Running r) {
    return r.init > 0 && r.pidNamespace != null && r.pidNamespace.equals(namespace(r.init, "pid"));
  }

  /** Waits (bounded) until no live process is left in the sandbox's PID namespace. */
  private static boolean awaitEmpty(Running r, Duration within) {
    long deadline = System.nanoTime() + within.toNanos();
    while (!members(r).isEmpty()) {
      if (System.nanoTime() - deadline > 0) return false;
      try {
        Thread.sleep(10); // processes of another namespace cannot be waited for: poll, bounded
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return false;
      }
    }
    return true;
  }

  private static boolean exited(Process p, Duration within) {
    try {
      return p.waitFor(within.toMillis(), TimeUnit.MILLISECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return !p.isAlive();
    }
  }

  @Override
  protected Duration closeTimeout() {
    return grace.plus(KILL_WAIT).plusSeconds(5);
  }

  @Override
  public void close() {
    super.close();
    spawner.shutdown();
  }

  /** The live processes in the sandbox's PID namespace (its init included), from /proc. */
  static List<ProcessHandle> members(Running r) {
    List<ProcessHandle> found = new ArrayList<>();
    if (r.pidNamespace == null) return found;
    for (long pid : inNamespace("pid", r.pidNamespace))
      ProcessHandle.of(pid).filter(p -> !ProcessRuntime.gone(p)).ifPresent(found::add);
    return found;
  }

  /** The pids whose namespace {@code kind} is {@code ns} (e.g. {@code pid:[4026532182]}). */
  static List<Long> inNamespace(String kind, String ns) {
    List<Long> pids = new ArrayList<>();
    try (DirectoryStream<Path> entries =
        Files.newDirectoryStream(
            PROC, p -> p.getFileName().toString().chars().allMatch(Character::isDigit))) {
      for (Path entry : entries) {
        try {
          if (ns.equals(Files.readSymbolicLink(entry.resolve("ns").resolve(kind)).toString()))
            pids.add(Long.parseLong(entry.getFileName().toString()));
        } catch (IOException | RuntimeException e) {
          // gone, or not ours to look at
        }
      }
    } catch (IOException e) {
      log.debug("cannot list /proc: {}", e.toString());
    }
    return pids;
  }

  /** {@code pid:[…]}: the namespace of a process, or null. */
  static String namespace(long pid, String kind) {
    try {
      return Files.readSymbolicLink(PROC.resolve(String.valueOf(pid)).resolve("ns").resolve(kind))
          .toString();
    } catch (IOException | RuntimeException e) {
      return null;
    }
  }

  /** The namespace init's PID namespace, for tests: null when the rental does not run. */
  String pidNamespace(String rentalId) {
    Running r = workload(rentalId);
    return r == null ? null : r.pidNamespace;
  }

  private static void deleteQuietly(Path folder) {
    if (folder == null) return;
    try {
      RentalDirs.delete(folder);
    } catch (IOException e) {
      log.warn("cannot delete {}: {}", folder, e.toString());
    }
  }

  private static String describe(List<String> command) {
    String text = String.join(" ", command);
    return text.length() > 200 ? text.substring(0, 200) + "…" : text;
  }

  static final class Running extends Workload {
    final Process process;
    final Path scratch;
    final Map<String, String> env;
    volatile long init = -1;
    volatile Path mountpoint;
    volatile Process network; // slirp4netns, for a rental with network
    volatile String pidNamespace;

    Running(Spec spec, Process process, Instant startedAt, Path scratch, Map<String, String> env) {
      super(spec, startedAt);
      this.process = process;
      this.scratch = scratch;
      this.env = env;
    }
  }
}
