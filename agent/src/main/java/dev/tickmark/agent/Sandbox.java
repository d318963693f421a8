package dev.tickmark.agent;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * The command lines of the sandbox runtime, one list element per argument (no shell): the {@code
 * bwrap} invocation that starts a rental, the {@code nsenter} prefix that runs an SSH session
 * inside it, and the helper that opens a forwarded connection inside its network namespace.
 *
 * <p>What a sandboxed workload sees: new user (uid/gid {@value #UID} inside), PID, IPC, UTS (host
 * name {@value #HOSTNAME}), network (loopback only) and cgroup namespaces; {@code /usr} read-only
 * and the top-level {@code /bin /sbin /lib*} as on the host (symbolic links on a merged-usr
 * system); a few files of {@code /etc} needed to run programs ({@link #ETC}) plus a generated
 * {@code passwd}, {@code group}, {@code hosts} and {@code hostname}; a fresh {@code /proc}, a
 * minimal {@code /dev}, a private {@code /tmp} (tmpfs, {@link #TMP_BYTES}); its GPUs' device nodes;
 * the scratch folder at {@value #WORKSPACE}, the only writable place that outlives a process.
 * Nothing else of the host: not the agent's state folder, not other rentals, not {@code /home},
 * {@code /root}, {@code /opt}, {@code /var}, {@code /run}, {@code /sys}.
 */
final class Sandbox {
  static final String WORKSPACE = "/workspace";
  static final int UID = 1000;
  static final int GID = 1000;
  static final String USER = "renter";
  static final String HOSTNAME = "tickmark";
  static final String PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  static final long TMP_BYTES = 1L << 30;

  /** Top-level folders of a Debian system besides /usr. */
  static final List<String> TOP_LEVEL = List.of("bin", "sbin", "lib", "lib32", "lib64", "libx32");

  /**
   * What of the host's /etc a program needs (the dynamic linker's cache, Debian's alternatives
   * links, time zone, TLS roots, the JDK's configuration): no accounts, no host names, no secrets.
   */
  static final List<String> ETC =
      List.of(
          "alternatives",
          "ld.so.cache",
          "ld.so.conf",
          "ld.so.conf.d",
          "localtime",
          "nsswitch.conf",
          "ssl",
          "ca-certificates",
          "ca-certificates.conf",
          "bash.bashrc",
          "profile",
          "inputrc",
          "terminfo",
          "java-17-openjdk",
          "java-21-openjdk");

  /** The files generated for each sandbox's /etc. */
  static final List<String> GENERATED_ETC = List.of("passwd", "group", "hosts", "hostname");

  /** The programs the runtime needs on the host ({@code socat} is optional). */
  record Tools(
      String bwrap, String nsenter, String prlimit, String setpriv, String env, String socat) {

    /** The tools found on this host; a null one is missing. */
    static Tools find() {
      return new Tools(
          find("bwrap"),
          find("nsenter"),
          find("prlimit"),
          find("setpriv"),
          find("env"),
          find("socat"));
    }

    /**
     * In /usr, which the sandbox sees too: a tool that runs inside must have the same path on both
     * sides.
     */
    private static String find(String name) {
      for (String dir : List.of("/usr/bin", "/usr/sbin")) {
        Path p = Path.of(dir, name);
        if (Files.isRegularFile(p) && Files.isExecutable(p)) return p.toString();
      }
      return null;
    }

    /** Null when the sandbox can be used, else what is missing (one line, what to install). */
    String missing() {
      if (bwrap == null) return "bubblewrap is not installed (apt-get install bubblewrap)";
      if (nsenter == null || prlimit == null || setpriv == null)
        return "nsenter, prlimit or setpriv is missing (apt-get install util-linux)";
      if (env == null) return "env is missing (apt-get install coreutils)";
      return null;
    }
  }

  private Sandbox() {}

  /**
   * The {@code bwrap} command line of a rental: {@code command} (already resolved) runs under the
   * rental's {@code limits}, in {@value #WORKSPACE} ({@code scratch} on the host); {@code etc}
   * holds the generated {@link #GENERATED_ETC} files; {@code devices} are the host's device nodes
   * to bind, each at the same path under /dev.
   */
  static List<String> bwrap(
      Tools tools,
      Path scratch,
      Path etc,
      List<Path> devices,
      SandboxLimits limits,
      List<String> command) {
    List<String> a = new ArrayList<>();
    a.add(tools.bwrap());
    // --unshare-all only tries the user namespace: without one the sandbox must not start
    a.addAll(List.of("--unshare-all", "--unshare-user", "--die-with-parent", "--new-session"));
    a.addAll(List.of("--cap-drop", "ALL"));
    a.addAll(List.of("--uid", String.valueOf(UID), "--gid", String.valueOf(GID)));
    a.addAll(List.of("--hostname", HOSTNAME));
    a.addAll(List.of("--ro-bind", "/usr", "/usr"));
    a.addAll(system(Path.of("/")));
    for (String name : ETC) a.addAll(List.of("--ro-bind-try", "/etc/" + name, "/etc/" + name));
    for (String name : GENERATED_ETC)
      a.addAll(List.of("--ro-bind", etc.resolve(name).toString(), "/etc/" + name));
    a.addAll(List.of("--proc", "/proc", "--dev", "/dev"));
    a.addAll(List.of("--size", String.valueOf(TMP_BYTES), "--tmpfs", "/tmp"));
    for (Path device : devices)
      a.addAll(List.of("--dev-bind", device.toString(), "/dev/" + device.getFileName()));
    a.addAll(List.of("--bind", scratch.toString(), WORKSPACE, "--chdir", WORKSPACE));
    // the sandbox's own root (where /etc and the mount points live) read-only too
    a.addAll(List.of("--remount-ro", "/"));
    a.add("--");
    a.addAll(limits.prlimit(tools.prlimit()));
    a.addAll(command);
    return a;
  }

  /** The top-level system folders as the host has them: links as links, folders read-only. */
  static List<String> system(Path root) {
    List<String> a = new ArrayList<>();
    for (String name : TOP_LEVEL) {
      Path p = root.resolve(name);
      if (Files.isSymbolicLink(p)) {
        try {
          a.addAll(List.of("--symlink", Files.readSymbolicLink(p).toString(), "/" + name));
        } catch (IOException e) {
          // unreadable link: the sandbox goes without it
        }
      } else if (Files.isDirectory(p, LinkOption.NOFOLLOW_LINKS)) {
        a.addAll(List.of("--ro-bind", p.toString(), "/" + name));
      }
    }
    return a;
  }

  /**
   * The device nodes of {@code cards} found in {@code devDir}: {@code nvidiaN} for each card, plus
   * {@code nvidiactl}, {@code nvidia-uvm}, {@code nvidia-uvm-tools} (NVIDIA) and {@code kfd} (AMD)
   * when they exist. Never another card's node. (AMD's per-card {@code /dev/dri/renderD*} nodes are
   * not bound yet: their numbering does not follow the card index.)
   */
  static List<Path> devices(Path devDir, List<Integer> cards) {
    List<Path> found = new ArrayList<>();
    for (int card : cards) addIfThere(found, devDir.resolve("nvidia" + card));
    for (String shared : List.of("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "kfd"))
      addIfThere(found, devDir.resolve(shared));
    return found;
  }

  private static void addIfThere(List<Path> found, Path p) {
    if (Files.exists(p)) found.add(p);
  }

  /** The generated /etc files' contents, by name. */
  static String etcFile(String name) {
    return switch (name) {
      case "passwd" ->
          "root:x:0:0:root:/root:/usr/sbin/nologin\n"
              + USER
              + ":x:"
              + UID
              + ":"
              + GID
              + ":renter:"
              + WORKSPACE
              + ":/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n";
      case "group" -> "root:x:0:\n" + USER + ":x:" + GID + ":\nnogroup:x:65534:\n";
      case "hosts" -> "127.0.0.1\tlocalhost " + HOSTNAME + "\n::1\tlocalhost ip6-localhost\n";
      case "hostname" -> HOSTNAME + "\n";
      default -> throw new IllegalArgumentException(name);
    };
  }

  /**
   * The prefix that runs a program inside the sandbox whose namespace init is {@code initPid}, as
   * its workload runs: all its namespaces, its limits, no capabilities and no new privileges (the
   * joining process would otherwise hold every capability of the sandbox's user namespace), in
   * {@value #WORKSPACE}. The program and its arguments follow.
   */
  static List<String> enter(Tools tools, long initPid, SandboxLimits limits) {
    List<String> a = new ArrayList<>();
    a.addAll(
        List.of(
            tools.nsenter(),
            "--target",
            String.valueOf(initPid),
            "--user",
            "--mount",
            "--pid",
            "--net",
            "--ipc",
            "--uts",
            "--preserve-credentials", // the sandbox maps no uid 0: keep the agent's (= uid 1000)
            "--",
            tools.setpriv(),
            "--no-new-privs",
            "--inh-caps=-all",
            "--bounding-set=-all",
            "--"));
    a.addAll(limits.prlimit(tools.prlimit()));
    a.addAll(List.of(tools.env(), "--chdir=" + WORKSPACE));
    return a;
  }

  /**
   * A helper that joins only the sandbox's user and network namespaces (it stays in the host's file
   * system, so it can run the host's programs) and connects its stdin and stdout to {@code
   * host:port} there: {@code socat} where installed, else the agent's own Java with {@link
   * dev.tickmark.agent.ssh.NetPipe}.
   */
  static List<String> relay(Tools tools, long initPid, boolean ipv6, int port) {
    List<String> a = new ArrayList<>();
    a.addAll(
        List.of(
            tools.nsenter(),
            "--target",
            String.valueOf(initPid),
            "--user",
            "--net",
            "--preserve-credentials",
            "--"));
    String host = ipv6 ? "::1" : "127.0.0.1";
    if (tools.socat() != null) {
      a.addAll(List.of(tools.socat(), "-", ipv6 ? "TCP6:[::1]:" + port : "TCP4:127.0.0.1:" + port));
    } else {
      String java =
          ProcessHandle.current()
              .info()
              .command()
              .orElse(System.getProperty("java.home") + "/bin/java");
      a.addAll(
          List.of(
              java,
              "-Xmx16m",
              "-XX:TieredStopAtLevel=1",
              "-cp",
              System.getProperty("java.class.path"),
              "dev.tickmark.agent.ssh.NetPipe",
              host,
              String.valueOf(port)));
    }
    return a;
  }

  /**
   * Null when a sandbox can start on this host, else why not (one line): the tools are missing, or
   * {@code bwrap} cannot create its namespaces (unprivileged user namespaces disabled).
   */
  static String probe(Tools tools) {
    String missing = tools.missing();
    if (missing != null) return missing;
    List<String> argv = new ArrayList<>();
    argv.addAll(List.of(tools.bwrap(), "--unshare-all", "--unshare-user", "--die-with-parent"));
    argv.addAll(List.of("--ro-bind", "/usr", "/usr"));
    argv.addAll(system(Path.of("/")));
    argv.addAll(
        List.of(
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            "--",
            tools.prlimit(),
            "--nofile=64",
            "--",
            "true"));
    try {
      Process p = AbstractRuntime.withoutInput(argv).start();
      String out;
      try (InputStream in = p.getInputStream()) {
        out = new String(in.readNBytes(4096), StandardCharsets.UTF_8);
      }
      if (!p.waitFor(20, TimeUnit.SECONDS)) {
        p.destroyForcibly();
        return "bubblewrap did not start a test sandbox within 20 s";
      }
      if (p.exitValue() != 0)
        return "bubblewrap cannot create a sandbox here (unprivileged user namespaces disabled?): "
            + Runtime.oneLine(out, 200);
      return null;
    } catch (IOException e) {
      return "cannot run bubblewrap: " + Runtime.oneLine(e.getMessage(), 200);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return "interrupted while trying bubblewrap";
    }
  }
}
