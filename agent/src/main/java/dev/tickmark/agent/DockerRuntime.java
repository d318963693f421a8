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
 * --gpus}).
 *
 * <ol>
 *   <li>Start: {@link #runInvocation} ({@code docker run --detach …}, see there); it returns once
 *       the container runs (after pulling the image if needed), which is the rental's start. A
 *       missing {@code docker}, or one that exits non-zero, fails the rental with docker's message
 *       as the reason.
 *   <li>While it runs: {@code docker wait tickmark-<id>} tells when the container exits, and {@code
 *       docker logs --follow tickmark-<id>} ({@link #logsInvocation}) reads its stdout and stderr
 *       line by line into the rental's {@link RentalLog} (without one: to {@code <rental
 *       folder>/output.log}). A container that ends (and is removed) before that command attaches
 *       may leave no output.
 *   <li>Stop: {@code docker stop -t <grace> tickmark-<id>} (SIGTERM, then SIGKILL after the grace
 *       period); if that fails, {@code docker rm --force}. The container is removed when it exits
 *       ({@code --rm}).
 *   <li>Spot notice: the notice file is written to the rental's notice folder, mounted read-only at
 *       {@code /run/tickmark} ({@code TICKMARK_NOTICE_FILE=/run/tickmark/notice}); {@link
 *       #terminate} is {@link #killInvocation docker kill --signal TERM} (the container's main
 *       process, as {@code docker stop} signals it).
 *   <li>The scratch folder (mounted at {@code /workspace}) is wiped once the container is gone.
 * </ol>
 */
final class DockerRuntime extends AbstractRuntime<DockerRuntime.Running> {
  static final String CONTAINER_PREFIX = "tickmark-";
  static final String LABEL = "tickmark.rental";
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

  private final String docker;

  DockerRuntime(Path stateDir, Duration grace) {
    this("docker", stateDir, grace, Clock.systemUTC());
  }

  /** {@code docker}: the docker command (a name on the PATH or a path). */
  DockerRuntime(String docker, Path stateDir, Duration grace, Clock clock) {
    super("tickmark-agent-docker-runtime", stateDir, grace, clock);
    this.docker = docker;
    dirs.wipeLeftovers(this::removeQuietly); // its container may have outlived the agent
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
   * through the scratch folder mounted there.
   */
  @Override
  public java.util.Optional<dev.tickmark.agent.ssh.Workspace> workspace(String rentalId) {
    if (workload(rentalId) == null) return java.util.Optional.empty();
    return java.util.Optional.of(
        new dev.tickmark.agent.ssh.Workspace.Container(
            docker, containerName(rentalId), dirs.scratch(rentalId)));
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
   * docker run --detach --rm --name tickmark-&lt;id&gt; --label tickmark.rental=&lt;id&gt;
   *     --gpus "device=&lt;i&gt;,&lt;j&gt;"  [--network none]  -v &lt;scratch&gt;:/workspace -w /workspace
   *     -e TICKMARK_RENTAL_ID=&lt;id&gt;  --cap-drop ALL --security-opt no-new-privileges --pids-limit 4096
   *     &lt;image&gt; [command args…]
   * </pre>
   *
   * {@code --gpus} gets {@code "device=0,1"} with the double quotes as part of the argument (docker
   * reads the value as CSV, and a bare comma would split it); {@code --network none} unless the
   * renter enabled the network; never {@code --privileged}. An empty command runs the image's own
   * entry point and command. The notice folder is the scratch folder's sibling ({@link
   * RentalDirs}).
   *
   * @throws Runtime.Failure if the id, the image, the cards, the command or the scratch path cannot
   *     be used
   */
  static List<String> runInvocation(String docker, Spec spec, Path scratch) {
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
                docker,
                "run",
                "--detach",
                "--rm",
                "--name",
                containerName(id),
                "--label",
                LABEL + "=" + id,
                "--gpus",
                "\"device="
                    + spec.cards().stream().map(String::valueOf).collect(Collectors.joining(","))
                    + "\""));
    if (!spec.network()) args.addAll(List.of("--network", "none"));
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
            "TICKMARK_NOTICE_FILE=" + NOTICE_FILE,
            "--cap-drop",
            "ALL",
            "--security-opt",
            "no-new-privileges",
            "--pids-limit",
            String.valueOf(PIDS_LIMIT),
            spec.image()));
    args.addAll(spec.command());
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
    List<String> invocation = runInvocation(docker, spec, dirs.scratch(spec.rentalId()));
    return () -> launch(spec, invocation, output);
  }

  private Running launch(Spec spec, List<String> invocation, RentalLog output) {
    String id = spec.rentalId();
    prepareScratch(id);
    log.info("rental {}: docker run {} on cards {}", id, spec.image(), spec.cards());
    Result result;
    try {
      result = exec(invocation, RUN_TIMEOUT);
    } catch (IOException e) {
      dirs.wipe(id);
      throw unavailable(e);
    }
    if (result.timedOut() || result.exitCode() != 0) {
      removeQuietly(
          id); // it may have been created without starting (or meanwhile): it must not block a
      // retry
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
      waiter =
          withoutInput(List.of(docker, "wait", containerName(id)))
              .redirectOutput(ProcessBuilder.Redirect.appendTo(dirs.log(id).toFile()))
              .start();
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
              // docker wait also returns when it loses the daemon: make sure the container is
              // really gone before saying so
              if (!r.stopping.get()) removeQuietly(r.rentalId());
              end(r, "container exited");
            },
            workers);
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

  /** The container is gone (or given up on): the helper processes that watched it are stopped. */
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
