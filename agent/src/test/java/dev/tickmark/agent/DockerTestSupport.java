package dev.tickmark.agent;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * What the tests against the machine's real Docker daemon share: an image made offline (no registry
 * is reachable) with {@code docker import} of a root file system holding only Debian's static
 * busybox, stand-in GPU device nodes, and the docker command line.
 */
final class DockerTestSupport {
  private DockerTestSupport() {}

  record Result(int status, String output) {}

  /** Runs {@code docker args…} (stdin empty, stderr into the output), bounded. */
  static Result docker(String... args) throws IOException, InterruptedException {
    List<String> argv = new ArrayList<>(List.of("docker"));
    argv.addAll(List.of(args));
    return run(argv, null);
  }

  private static Result run(List<String> argv, Path stdin)
      throws IOException, InterruptedException {
    Process p =
        new ProcessBuilder(argv)
            .redirectErrorStream(true)
            .redirectInput(
                ProcessBuilder.Redirect.from(
                    stdin == null ? new java.io.File("/dev/null") : stdin.toFile()))
            .start();
    var out = new java.util.concurrent.CompletableFuture<String>();
    Thread reader =
        new Thread(
            () -> {
              try {
                out.complete(new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8));
              } catch (IOException e) {
                out.complete("");
              }
            });
    reader.start();
    if (!p.waitFor(120, TimeUnit.SECONDS)) {
      p.destroyForcibly();
      throw new AssertionError("still running after 120 s: " + argv);
    }
    reader.join();
    return new Result(p.exitValue(), out.join());
  }

  /**
   * Imports a busybox-only image as {@code tag}: {@code bin/busybox} and a link per applet ({@code
   * sh}, {@code ls}, {@code nc}, {@code awk}…), an empty {@code /tmp} (1777) and {@code /etc}.
   */
  static void importImage(Path work, String tag) throws IOException, InterruptedException {
    Path root = Files.createDirectories(work.resolve("rootfs"));
    Path bin = Files.createDirectories(root.resolve("bin"));
    Files.createDirectories(root.resolve("etc"));
    Path tmp = Files.createDirectories(root.resolve("tmp"));
    Files.setPosixFilePermissions(tmp, PosixFilePermissions.fromString("rwxrwxrwx"));
    run(List.of("chmod", "1777", tmp.toString()), null);
    Files.copy(Path.of("/bin/busybox"), bin.resolve("busybox"));
    Files.setPosixFilePermissions(
        bin.resolve("busybox"), PosixFilePermissions.fromString("rwxr-xr-x"));
    Result applets = run(List.of("/bin/busybox", "--list"), null);
    assertEquals(0, applets.status(), applets.output());
    for (String applet : applets.output().split("\n")) {
      applet = applet.strip();
      if (applet.isEmpty() || applet.equals("busybox") || applet.contains("/")) continue;
      Files.createSymbolicLink(bin.resolve(applet), Path.of("busybox"));
    }
    Path tar = work.resolve("rootfs.tar");
    Result packed = run(List.of("tar", "-C", root.toString(), "-cf", tar.toString(), "."), null);
    assertEquals(0, packed.status(), packed.output());
    Result imported = run(List.of("docker", "import", "-", tag), tar);
    assertEquals(0, imported.status(), "docker import: " + imported.output());
  }

  /**
   * Stand-in device nodes in {@code dir}: character devices (those of {@code /dev/null}) where this
   * user may make them ({@code mknod}, root), else symbolic links to {@code /dev/null}, which
   * docker's {@code --device} follows (it refuses plain files: "not a device node").
   */
  static Path standInDevices(Path dir, String... names) throws IOException, InterruptedException {
    Files.createDirectories(dir);
    for (String name : names) {
      Path node = dir.resolve(name);
      Result made = run(List.of("mknod", "-m", "666", node.toString(), "c", "1", "3"), null);
      if (made.status() != 0) Files.createSymbolicLink(node, Path.of("/dev/null"));
    }
    return dir;
  }

  /** Whether a container of that name exists (running or not). */
  static boolean containerExists(String name) throws IOException, InterruptedException {
    return docker("inspect", "--type", "container", "--format", "{{.Id}}", name).status() == 0;
  }

  /** {@code docker inspect --format <template> <container>}, stripped; fails when it fails. */
  static String inspect(String container, String template)
      throws IOException, InterruptedException {
    Result r = docker("inspect", "--type", "container", "--format", template, container);
    assertEquals(0, r.status(), r.output());
    return r.output().strip();
  }

  /** The agent's {@code uid:gid}, as {@link DockerRuntime.Options#forHost} gives containers. */
  static String agentUser() {
    return DockerRuntime.HostFacts.user();
  }
}
