package dev.tickmark.agent;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Supplier;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Runs a rental as a Docker container, through the {@code docker} command line (which must be on
 * the agent's {@code PATH}, talking to a daemon with the NVIDIA container toolkit for {@code
 * --gpus}, or given the cards' device nodes: {@link GpuAccess}).
 *
 * <ol>
 *   <li>Start: {@link #runInvocation} ({@code docker run --detach …}, see there); it returns once
 *       the container runs (after pulling the image if needed), which is the rental's start. A
 *       missing {@code docker}, or one that exits non-zero, fails the rental with docker's message
 *       as the reason.
 *   <li>While it runs: {@code docker wait tickmark-<id>} tells when the container exits, and {@code
 *       docker logs --follow tickmark-<id>} ({@link #logsInvocation}) reads its stdout and stderr
 *       line by line into the rental's {@link RentalLog} (without one: to {@code <rental
 *       folder>/output.log}).
 *   <li>Stop: {@code docker stop -t <grace> tickmark-<id>} (SIGTERM, then SIGKILL after the grace
 *       period); if that fails, {@code docker rm --force}.
 *   <li>End: once {@code docker wait} has returned and {@code docker logs} has written the last
 *       output, {@code docker rm --force}. Not {@code --rm}: a daemon removes such a container the
 *       moment it exits, and a workload that ends quickly (a typo in its command) would leave no
 *       output at all, {@code docker logs} finding no container to attach to.
 *   <li>Spot notice: the notice file is written to the rental's notice folder, mounted read-only at
 *       {@code /run/tickmark} ({@code TICKMARK_NOTICE_FILE=/run/tickmark/notice}); {@link
 *       #terminate} is {@link #killInvocation docker kill --signal TERM} (the container's main
 *       process, as {@code docker stop} signals it; through {@code --init}, so that a workload
 *       without a handler for it ends, which the container's PID 1 would not).
 *   <li>The scratch folder (mounted at {@code /workspace}) is wiped once the container is gone.
 * </ol>
 */
final class DockerRuntime extends AbstractRuntime<DockerRuntime.Running> {
  static final String CONTAINER_PREFIX = "tickmark-";
  static final String LABEL = "tickmark.rental";

  /** On a {@link #relayInvocation} helper: the rental whose port it reaches. */
  static final String RELAY_LABEL = "tickmark.rental-relay";

  static final String WORKSPACE = "/workspace";

  /** Where the rental's notice folder is mounted, read-only, in its container. */
  static final String NOTICE_MOUNT = "/run/tickmark";

  static final String NOTICE_FILE = NOTICE_MOUNT + "/" + RentalDirs.NOTICE;
  static final int PIDS_LIMIT = 4096;

  /** Pulling a large image can take a while. */
  static final Duration RUN_TIMEOUT = Duration.ofMinutes(15);

  static final Duration COMMAND_TIMEOUT = Duration.ofSeconds(30);
  static final int MAX_IMAGE_LENGTH = 255;

  /**
   * A conservative image reference: {@code [host[:port]/]path[:tag][@sha256:digest]}, lower-case
   * path components separated by {@code . _ __ -}, no whitespace, nothing that could be read as an
   * option.
   */
  static final Pattern IMAGE =
      Pattern.compile(
          "(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*(?::[0-9]{1,5})?/)?"
              + "[a-z0-9]+(?:(?:\\.|_|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:\\.|_|__|-+)[a-z0-9]+)*)*"
              + "(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[a-f0-9]{64})?");

  private static final Logger log = LoggerFactory.getLogger(DockerRuntime.class);

  /** How a container is given its cards. */
  enum GpuAccess {
    /**
     * {@code --gpus "device=<i>,…"}: the NVIDIA container toolkit (devices and driver libraries).
     */
    TOOLKIT,
    /**
     * {@code --device <dir>/nvidia<i>:/dev/nvidia<i>} for each card, plus those of {@link
     * #SHARED_NVIDIA_NODES} that exist in the folder: only the device nodes, no driver libraries
     * (the image brings them). Docker refuses a path that is not a device node (it follows symbolic
     * links), so a card whose node is missing fails the rental before docker runs.
     */
    DEVICES
  }

  /** The NVIDIA device nodes every card's user needs besides its own {@code nvidia<i>}. */
  static final List<String> SHARED_NVIDIA_NODES =
      List.of("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset");

  /**
   * What the host gives each container.
   *
   * @param docker the docker command (a name on the PATH or a path)
   * @param gpus how the cards reach the container
   * @param devices the folder of the device nodes ({@code /dev}; another one in tests)
   * @param user {@code uid:gid} for {@code --user}, null for the image's own user: the agent's own,
   *     since the scratch folder is the agent's (mode 0700) and a container user without
   *     capabilities, root included, can use only its own files
   * @param memoryPerCard {@code --memory} (and {@code --memory-swap}: no swap on top) per rented
   *     card in bytes, 0 for no limit
   * @param cpusPerCard {@code --cpus} per rented card, 0 for no limit
   */
  record Options(
      String docker,
      GpuAccess gpus,
      Path devices,
      String user,
      long memoryPerCard,
      double cpusPerCard) {
    Options {
      if (docker == null || docker.isEmpty()) throw new IllegalArgumentException("no docker");
      if (gpus == null) gpus = GpuAccess.TOOLKIT;
      if (devices == null) devices = Path.of("/dev");
      if (user != null && !user.matches("[0-9]{1,10}(:[0-9]{1,10})?"))
        throw new IllegalArgumentException("user must be uid[:gid]");
      if (memoryPerCard < 0 || cpusPerCard < 0 || Double.isNaN(cpusPerCard))
        throw new IllegalArgumentException("negative limit");
    }

    /**
     * This host: the toolkit, the agent's user, and each card's share of the memory (less a tenth,
     * at most 4 GiB, for the host itself) and of the CPUs, over the cards counted as {@code
     * /dev/nvidia<i>} nodes (1 when there are none).
     */
    static Options forHost(String docker) {
      Path dev = Path.of("/dev");
      int cards = Math.max(1, countCardNodes(dev));
      long memory = HostFacts.memoryBytes();
      long usable = memory - Math.min(memory / 10, 4L << 30);
      return new Options(
          docker,
          GpuAccess.TOOLKIT,
          dev,
          HostFacts.user(),
          usable > 0 ? usable / cards : 0,
          (double) java.lang.Runtime.getRuntime().availableProcessors() / cards);
    }

    Options withGpus(GpuAccess access, Path folder) {
      return new Options(docker, access, folder, user, memoryPerCard, cpusPerCard);
    }

    Options withUser(String uidGid) {
      return new Options(docker, gpus, devices, uidGid, memoryPerCard, cpusPerCard);
    }

    Options withLimits(long memory, double cpus) {
      return new Options(docker, gpus, devices, user, memory, cpus);
    }
  }

  /** The {@code nvidia<i>} nodes in {@code dev}. */
  static int countCardNodes(Path dev) {
    try (var entries = java.nio.file.Files.list(dev)) {
      return (int) entries.filter(p -> p.getFileName().toString().matches("nvidia[0-9]+")).count();
    } catch (IOException | RuntimeException e) {
      return 0;
    }
  }

  /** What the default options read from this machine; nothing when it cannot be read. */
  static final class HostFacts {
    private HostFacts() {}

    /** {@code MemTotal} from {@code /proc/meminfo}, in bytes; 0 if unknown. */
    static long memoryBytes() {
      try {
        for (String line : java.nio.file.Files.readAllLines(Path.of("/proc/meminfo"))) {
          if (line.startsWith("MemTotal:"))
            return Long.parseLong(line.replaceAll("[^0-9]", "")) * 1024;
        }
      } catch (IOException | RuntimeException e) {
        log.warn("cannot read the host's memory size: {}", e.toString());
      }
      return 0;
    }

    /** The agent's {@code uid:gid} (the owner of {@code /proc/self}); null if unknown. */
    static String user() {
      try {
        Path self = Path.of("/proc/self");
        return java.nio.file.Files.getAttribute(self, "unix:uid")
            + ":"
            + java.nio.file.Files.getAttribute(self, "unix:gid");
      } catch (IOException | RuntimeException e) {
        log.warn("cannot tell the agent's user; containers run as their image's: {}", e.toString());
        return null;
      }
    }
  }

  private final Options options;
  private final String docker;

  /** For {@code ssh -L} into a container ({@link #relayInvocation}); null: not on this host. */
  private final HostSocat socat;

  DockerRuntime(Path stateDir, Duration grace) {
    this("docker", stateDir, grace, Clock.systemUTC());
  }

  /** {@code docker}: the docker command (a name on the PATH or a path); this host's options. */
  DockerRuntime(String docker, Path stateDir, Duration grace, Clock clock) {
    this(Options.forHost(docker), stateDir, grace, clock);
  }

  DockerRuntime(Options options, Path stateDir, Duration grace, Clock clock) {
    super("tickmark-agent-docker-runtime", stateDir, grace, clock);
    this.options = options;
    this.docker = options.docker();
    this.socat = HostSocat.find();
    if (socat == null)
      log.info(
          "no socat on this host (apt-get install socat): ssh -L into a docker rental is refused");
    dirs.wipeLeftovers(this::removeQuietly); // its container may have outlived the agent
  }

  Options options() {
    return options;
  }

  /**
   * Whether a container can have network: the daemon's default {@code bridge} network exists (a
   * daemon started with {@code --bridge=none} has none, and a container without {@code --network
   * none} then has its loopback only). Asked of the daemon each time (every hardware report, every
   * start with network), so a daemon given a bridge later is seen at the next report.
   */
  @Override
  public boolean offersNetwork() {
    try {
      Result r =
          exec(
              List.of(docker, "network", "inspect", "--format", "{{.Name}}", "bridge"),
              COMMAND_TIMEOUT);
      return !r.timedOut() && r.exitCode() == 0;
    } catch (IOException e) {
      return false; // no docker: no rental runs here at all
    }
  }

  @Override
  public String name() {
    return "docker";
  }

  static String containerName(String rentalId) {
    return CONTAINER_PREFIX + rentalId;
  }

  /**
   * Sessions are {@code docker exec} into the container; SFTP and SCP see its {@code /workspace}
   * through the scratch folder mounted there; a forwarded port ({@code ssh -L}) is reached through
   * {@link #relayInvocation} (none where the host has no socat).
   */
  @Override
  public java.util.Optional<dev.tickmark.agent.ssh.Workspace> workspace(String rentalId) {
    Running running = workload(rentalId);
    if (running == null) return java.util.Optional.empty();
    String image = running.spec.image();
    return java.util.Optional.of(
        new dev.tickmark.agent.ssh.Workspace.Container(
            docker,
            containerName(rentalId),
            dirs.scratch(rentalId),
            socat == null
                ? null
                : (ipv6, port) -> relayInvocation(docker, socat, rentalId, image, ipv6, port)));
  }

  /**
   * A helper container that joins the rental's network namespace and joins its stdin and stdout to
   * {@code port} on the rental's loopback, for {@code ssh -L}: a container with no network has no
   * address the host can reach, and its image need not hold any tool, so the helper runs the host's
   * own socat ({@link HostSocat}) in a container of the rental's image (already here; never
   * pulled):
   *
   * <pre>
   * docker run --rm -i --pull never --network container:tickmark-&lt;id&gt;
   *     --label tickmark.rental-relay=&lt;id&gt; --log-driver none --user 65534:65534
   *     --cap-drop ALL --security-opt no-new-privileges --pids-limit 16 --read-only
   *     -v /usr:/tickmark-host/usr:ro … --entrypoint /tickmark-host/&lt;loader&gt;
   *     &lt;image&gt; --inhibit-cache --library-path … /tickmark-host/usr/bin/socat - TCP4:127.0.0.1:&lt;port&gt;
   * </pre>
   *
   * It shares nothing else with the rental (its own file system, processes and user: nobody), runs
   * no code of the renter's, and ends with its connection ({@code --rm}); the bytes it carries are
   * not logged ({@code --log-driver none}).
   */
  static List<String> relayInvocation(
      String docker, HostSocat socat, String rentalId, String image, boolean ipv6, int port) {
    List<String> a =
        new ArrayList<>(
            List.of(
                docker,
                "run",
                "--rm",
                "-i",
                "--pull",
                "never",
                "--network",
                "container:" + containerName(rentalId),
                "--label",
                RELAY_LABEL + "=" + rentalId,
                "--log-driver",
                "none",
                "--user",
                "65534:65534",
                "--cap-drop",
                "ALL",
                "--security-opt",
                "no-new-privileges",
                "--pids-limit",
                "16",
                "--read-only"));
    a.addAll(socat.mountsAndEntryPoint());
    a.add(image);
    a.addAll(socat.command(ipv6 ? "TCP6:[::1]:" + port : "TCP4:127.0.0.1:" + port));
    return a;
  }

  /** Null when {@code image} is an acceptable image reference, else why not. */
  static String checkImage(String image) {
    if (image == null || image.isEmpty()) return "no image given";
    if (image.length() > MAX_IMAGE_LENGTH)
      return "the image name is longer than " + MAX_IMAGE_LENGTH + " characters";
    if (!IMAGE.matcher(image).matches()) return "invalid image name";
    return null;
  }

  /**
   * The {@code docker run} command line for a rental, one list element per argument (no shell
   * involved):
   *
   * <pre>
   * docker run --detach --init --name tickmark-&lt;id&gt; --label tickmark.rental=&lt;id&gt;
   *     --gpus "device=&lt;i&gt;,&lt;j&gt;" | --device &lt;dev&gt;/nvidia&lt;i&gt;:/dev/nvidia&lt;i&gt; …
   *     [--network none]  [--user &lt;uid&gt;:&lt;gid&gt;]  -v &lt;scratch&gt;:/workspace -w /workspace
   *     -v &lt;notice folder&gt;:/run/tickmark:ro
   *     -e TICKMARK_RENTAL_ID=&lt;id&gt; -e TICKMARK_NOTICE_FILE=/run/tickmark/notice [-e HOME=/workspace]
   *     --cap-drop ALL --security-opt no-new-privileges --pids-limit 4096
   *     [--memory &lt;bytes&gt; --memory-swap &lt;bytes&gt;]  [--cpus &lt;n&gt;]
   *     &lt;image&gt; [command args…]
   * </pre>
   *
   * {@code --gpus} gets {@code "device=0,1"} with the double quotes as part of the argument (docker
   * reads the value as CSV, and a bare comma would split it); {@code --network none} unless the
   * renter enabled the network; never {@code --privileged}. {@code HOME=/workspace} only for a user
   * other than root (a uid with no home in the image would have {@code /}, unwritable). The limits
   * are the options' per card times the rented cards. An empty command runs the image's own entry
   * point and command. The notice folder is the scratch folder's sibling ({@link RentalDirs}).
   *
   * @throws Runtime.Failure if the id, the image, the cards, the command or the scratch path cannot
   *     be used, or (device access) a card has no device node
   */
  static List<String> runInvocation(Options options, Spec spec, Path scratch) {
    String why = Runtime.checkRentalId(spec.rentalId());
    if (why == null) why = checkImage(spec.image());
    if (why == null) why = Runtime.checkCards(spec.cards(), null);
    if (why == null) why = Runtime.checkCommand(spec.command());
    if (why != null) throw new Failure(why);
    String mount = scratch.toAbsolutePath().normalize().toString();
    String noticeMount =
        scratch.toAbsolutePath().normalize().resolveSibling(RentalDirs.NOTICE_FOLDER).toString();
    if (mount.contains(":") || mount.contains(","))
      throw new Failure("the host's scratch path cannot be mounted");
    String id = spec.rentalId();
    List<String> args =
        new ArrayList<>(
            List.of(
                options.docker(),
                "run",
                "--detach",
                "--init",
                "--name",
                containerName(id),
                "--label",
                LABEL + "=" + id));
    args.addAll(gpuArguments(options, spec.cards()));
    if (!spec.network()) args.addAll(List.of("--network", "none"));
    if (options.user() != null) args.addAll(List.of("--user", options.user()));
    args.addAll(
        List.of(
            "-v",
            mount + ":" + WORKSPACE,
            "-w",
            WORKSPACE,
            "-v",
            noticeMount + ":" + NOTICE_MOUNT + ":ro",
            "-e",
            "TICKMARK_RENTAL_ID=" + id,
            "-e",
            "TICKMARK_NOTICE_FILE=" + NOTICE_FILE));
    if (options.user() != null && !options.user().equals("0") && !options.user().startsWith("0:"))
      args.addAll(List.of("-e", "HOME=" + WORKSPACE));
    args.addAll(
        List.of(
            "--cap-drop",
            "ALL",
            "--security-opt",
            "no-new-privileges",
            "--pids-limit",
            String.valueOf(PIDS_LIMIT)));
    int cards = spec.cards().size();
    if (options.memoryPerCard() > 0) {
      String memory = String.valueOf(Math.multiplyExact(options.memoryPerCard(), (long) cards));
      args.addAll(List.of("--memory", memory, "--memory-swap", memory));
    }
    if (options.cpusPerCard() > 0)
      args.addAll(List.of("--cpus", cpus(options.cpusPerCard() * cards)));
    args.add(spec.image());
    args.addAll(spec.command());
    return args;
  }

  /** {@code --cpus} as docker reads it: a plain decimal, at most 3 places. */
  static String cpus(double n) {
    return java.math.BigDecimal.valueOf(Math.max(0.001, n))
        .setScale(3, java.math.RoundingMode.HALF_UP)
        .stripTrailingZeros()
        .toPlainString();
  }

  private static List<String> gpuArguments(Options options, List<Integer> cards) {
    if (options.gpus() == GpuAccess.TOOLKIT)
      return List.of(
          "--gpus",
          "\"device="
              + cards.stream().map(String::valueOf).collect(Collectors.joining(","))
              + "\"");
    Path dev = options.devices().toAbsolutePath().normalize();
    if (dev.toString().contains(":") || dev.toString().contains(","))
      throw new Failure("the host's device folder cannot be used");
    List<String> args = new ArrayList<>();
    for (int card : cards) {
      Path node = dev.resolve("nvidia" + card);
      if (!java.nio.file.Files.exists(node))
        throw new Failure("card " + card + " has no device node on this host");
      args.addAll(List.of("--device", node + ":/dev/nvidia" + card));
    }
    for (String name : SHARED_NVIDIA_NODES) {
      Path node = dev.resolve(name);
      if (java.nio.file.Files.exists(node))
        args.addAll(List.of("--device", node + ":/dev/" + name));
    }
    return args;
  }

  /** {@code docker stop -t <grace seconds> tickmark-<id>} */
  static List<String> stopInvocation(String docker, String rentalId, Duration grace) {
    return List.of(
        docker,
        "stop",
        "-t",
        String.valueOf(Math.max(0, grace.toSeconds())),
        containerName(rentalId));
  }

  /** {@code docker kill --signal <signal> tickmark-<id>}: signals the container's main process. */
  static List<String> killInvocation(String docker, String rentalId, String signal) {
    return List.of(docker, "kill", "--signal", signal, containerName(rentalId));
  }

  /**
   * {@code docker logs --follow tickmark-<id>}: the container's output from its start, stdout on
   * stdout and stderr on stderr; it returns once the container has ended and all was written.
   */
  static List<String> logsInvocation(String docker, String rentalId) {
    return List.of(docker, "logs", "--follow", containerName(rentalId));
  }

  @Override
  protected Supplier<Running> plan(Spec spec, RentalLog output) {
    List<String> invocation = runInvocation(options, spec, dirs.scratch(spec.rentalId()));
    return () -> launch(spec, invocation, output);
  }

  static final String NETWORK_REFUSED =
      "this host's docker daemon has no bridge network, so a container would have no route out;"
          + " rent without network, or on another host";

  private Running launch(Spec spec, List<String> invocation, RentalLog output) {
    String id = spec.rentalId();
    if (spec.network() && !offersNetwork()) {
      log.warn("rental {}: {}", id, NETWORK_REFUSED);
      throw new Failure(NETWORK_REFUSED);
    }
    prepareScratch(spec);
    log.info("rental {}: docker run {} on cards {}", id, spec.image(), spec.cards());
    Result result;
    try {
      result = exec(invocation, RUN_TIMEOUT);
    } catch (IOException e) {
      dirs.wipe(id);
      throw unavailable(e);
    }
    if (result.timedOut() || result.exitCode() != 0) {
      // it may have been created without starting (or meanwhile): it must not block a retry
      removeQuietly(id);
      dirs.wipe(id);
      String reason =
          result.timedOut()
              ? "docker run did not finish within " + RUN_TIMEOUT.toMinutes() + " minutes"
              : "docker run exited with status "
                  + result.exitCode()
                  + ": "
                  + Runtime.oneLine(result.output(), 300);
      log.warn("rental {}: {}", id, reason);
      throw new Failure(reason.replace(dirs.root().toString(), "<rentals>"));
    }
    Instant startedAt = clock.instant();
    Process waiter;
    try {
      // it prints the container's exit status when it returns: read in watch()
      waiter = withoutInput(List.of(docker, "wait", containerName(id))).start();
    } catch (IOException e) {
      removeQuietly(id);
      dirs.wipe(id);
      throw unavailable(e);
    }
    Process logs = null;
    try {
      ProcessBuilder pb = withoutInput(logsInvocation(docker, id));
      if (output == null)
        pb.redirectOutput(ProcessBuilder.Redirect.appendTo(dirs.log(id).toFile()));
      else pb.redirectErrorStream(false);
      logs = pb.start();
    } catch (IOException e) {
      log.warn("rental {}: cannot follow the container's log: {}", id, e.toString());
    }
    Running r = new Running(spec, startedAt, waiter, logs);
    if (output != null) {
      r.output = output;
      if (logs != null) {
        r.readers.add(capture(logs.getInputStream(), RentalLog.Stream.STDOUT, output));
        r.readers.add(capture(logs.getErrorStream(), RentalLog.Stream.STDERR, output));
      }
    }
    log.info("rental {}: container {} running", id, containerName(id));
    return r;
  }

  private static Failure unavailable(IOException e) {
    return new Failure(
        "docker is not available on this host (" + Runtime.oneLine(e.getMessage(), 200) + ")", e);
  }

  @Override
  protected void watch(Running r) {
    r.waiter
        .onExit()
        .thenRunAsync(
            () -> {
              r.exitCode = waitStatus(r);
              end(r, "container exited" + (r.exitCode == null ? "" : " with status " + r.exitCode));
            },
            workers);
  }

  /**
   * The container's exit status as {@code docker wait} printed it (its last line, a number); null
   * when it printed none (it lost the daemon, or was ended before the container).
   */
  private Integer waitStatus(Running r) {
    try (InputStream in = r.waiter.getInputStream()) {
      String out = new String(in.readNBytes(4096), StandardCharsets.UTF_8);
      Integer status = exitStatus(out);
      if (status == null && !out.isBlank())
        log.warn("rental {}: docker wait: {}", r.rentalId(), Runtime.oneLine(out, 300));
      return status;
    } catch (IOException e) {
      return null;
    }
  }

  /** The exit status in {@code docker wait}'s output: its last non-blank line, 0–255; else null. */
  static Integer exitStatus(String output) {
    String last = "";
    for (String line : output.split("\\R")) if (!line.isBlank()) last = line.strip();
    if (!last.matches("[0-9]{1,3}")) return null;
    int status = Integer.parseInt(last);
    return status <= 255 ? status : null;
  }

  /**
   * {@code docker stop}, or {@code docker rm --force} when that fails; then waits for {@code docker
   * wait} to return.
   */
  @Override
  protected void halt(Running r, String why) {
    String id = r.spec.rentalId();
    boolean stopped = false;
    try {
      Result result = exec(stopInvocation(docker, id, grace), grace.plus(COMMAND_TIMEOUT));
      stopped = !result.timedOut() && result.exitCode() == 0;
      if (!stopped)
        log.warn("rental {}: docker stop failed: {}", id, Runtime.oneLine(result.output(), 300));
    } catch (IOException e) {
      log.warn("rental {}: cannot run docker stop: {}", id, e.toString());
    }
    if (!stopped) removeQuietly(id);
    try {
      r.waiter.onExit().get(COMMAND_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } catch (ExecutionException | TimeoutException e) {
      log.warn(
          "rental {}: docker wait did not return after the stop; ending the rental anyway", id);
    }
    end(r, why);
  }

  /** The spot notice's SIGTERM: {@code docker kill --signal TERM}. */
  @Override
  protected void signalTerm(Running r) {
    String id = r.spec.rentalId();
    log.info("rental {}: SIGTERM to its container (spot notice)", id);
    try {
      Result result = exec(killInvocation(docker, id, "TERM"), COMMAND_TIMEOUT);
      if (result.timedOut() || result.exitCode() != 0)
        log.warn("rental {}: docker kill failed: {}", id, Runtime.oneLine(result.output(), 300));
    } catch (IOException e) {
      log.warn("rental {}: cannot run docker kill: {}", id, e.toString());
    }
  }

  private void removeQuietly(String id) {
    try {
      Result result = exec(List.of(docker, "rm", "--force", containerName(id)), COMMAND_TIMEOUT);
      if (result.exitCode() != 0)
        log.debug("rental {}: docker rm: {}", id, Runtime.oneLine(result.output(), 300));
    } catch (IOException e) {
      log.debug("rental {}: docker rm: {}", id, e.toString());
    }
  }

  /**
   * The container has exited (or is given up on): the helper processes that watched it are stopped,
   * then the container is removed (also when {@code docker wait} returned because it lost the
   * daemon: nothing of the rental may run on).
   */
  @Override
  protected void release(Running r) {
    if (r.waiter.isAlive()) r.waiter.destroy();
    if (r.logs != null && r.logs.isAlive()) {
      // docker logs --follow ends by itself once it has written the ended container's last output
      try {
        r.logs.waitFor(OUTPUT_DRAIN.toMillis(), TimeUnit.MILLISECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
      if (r.logs.isAlive()) r.logs.destroy();
    }
    removeQuietly(r.rentalId());
  }

  @Override
  protected Duration closeTimeout() {
    return grace.plus(COMMAND_TIMEOUT).plus(COMMAND_TIMEOUT);
  }

  /**
   * A finished (or abandoned) docker command: its exit status and what it printed (stdout and
   * stderr).
   */
  record Result(int exitCode, String output, boolean timedOut) {}

  /**
   * Runs a docker command; throws {@link IOException} when it cannot be started at all (no docker).
   */
  private Result exec(List<String> command, Duration timeout) throws IOException {
    Process p = withoutInput(command).start();
    CompletableFuture<String> output =
        CompletableFuture.supplyAsync(() -> readSome(p.getInputStream()), workers);
    try {
      if (!p.waitFor(timeout.toMillis(), TimeUnit.MILLISECONDS)) {
        p.destroyForcibly();
        return new Result(-1, output.getNow(""), true);
      }
      return new Result(
          p.exitValue(), output.get(COMMAND_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS), false);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      p.destroyForcibly();
      return new Result(-1, "", true);
    } catch (ExecutionException | TimeoutException e) {
      return new Result(p.exitValue(), "", false);
    }
  }

  private static String readSome(InputStream in) {
    try (in) {
      byte[] bytes = in.readNBytes(64 * 1024);
      in.transferTo(java.io.OutputStream.nullOutputStream());
      return new String(bytes, StandardCharsets.UTF_8);
    } catch (IOException e) {
      return "";
    }
  }

  static final class Running extends Workload {
    final Process waiter;
    final Process logs;

    Running(Spec spec, Instant startedAt, Process waiter, Process logs) {
      super(spec, startedAt);
      this.waiter = waiter;
      this.logs = logs;
    }
  }
}
