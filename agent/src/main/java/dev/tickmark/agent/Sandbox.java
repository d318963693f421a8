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
 * <p>What a sandboxed workload sees: new user (its host uid and gid, named {@value #USER}), PID,
 * IPC, UTS (host name {@value #HOSTNAME}), network (loopback only, or with the rental's network a
 * userspace route out, {@link #slirp4netns}) and cgroup namespaces; {@code /usr} read-only and the
 * top-level {@code /bin /sbin /lib*} as on the host (symbolic links on a merged-usr system); a few
 * files of {@code /etc} needed to run programs ({@link #ETC}) plus a generated {@code passwd},
 * {@code group}, {@code hosts}, {@code hostname} and {@code resolv.conf}; a fresh {@code /proc}, a
 * minimal {@code /dev}, a private {@code /tmp} (tmpfs, {@link #TMP_BYTES}); its GPUs' device nodes;
 * the scratch folder at {@value #WORKSPACE}, the only writable place that outlives a process.
 * Nothing else of the host: not the agent's state folder, not other rentals, not {@code /home},
 * {@code /root}, {@code /opt}, {@code /var}, {@code /run}, {@code /sys}.
 */
final class Sandbox {
  static final String WORKSPACE = "/workspace";
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

  /**
   * The files generated for each sandbox's /etc, bound from fds {@value #FIRST_ETC_FD} on (bwrap
   * runs as the sandbox's uid, which cannot read the agent's state folder).
   */
  static final List<String> GENERATED_ETC =
      List.of("passwd", "group", "hosts", "hostname", "resolv.conf");

  static final int FIRST_ETC_FD = 4;

  /**
   * With the rental's network, the sandbox waits on this fd (the agent's pipe) before the workload
   * runs, until the agent has given it its route out ({@link #AWAIT_NETWORK}).
   */
  static final int BLOCK_FD = 3;

  /**
   * Run inside a network rental's sandbox before its command: waits for the agent's "1" on {@link
   * #BLOCK_FD}, closes it, then runs the command. If the pipe ends first (the agent died before the
   * network was there) it exits 125 and the command never runs. (bwrap's own {@code --block-fd}
   * runs the command on an end of file as well, and waits before its {@code --die-with-parent} is
   * in force.)
   */
  static final String AWAIT_NETWORK =
      "read -r go <&3 && [ \"$go\" = 1 ] || exit 125; exec 3<&-; exec \"$@\"";

  /** The sandbox's side of its userspace network ({@link #slirp4netns}'s defaults). */
  static final String TAP = "tap0";

  static final String NAMESERVER = "10.0.2.3";

  /**
   * The programs the runtime needs on the host ({@code socat} and {@code slirp4netns} optional).
   */
  record Tools(
      String bwrap,
      String nsenter,
      String prlimit,
      String setpriv,
      String env,
      String socat,
      String unshare,
      String mount,
      String slirp4netns) {

    /** The tools found on this host; a null one is missing. */
    static Tools find() {
      return new Tools(
          find("bwrap"),
          find("nsenter"),
          find("prlimit"),
          find("setpriv"),
          find("env"),
          find("socat"),
          find("unshare"),
          find("mount"),
          find("slirp4netns"));
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
      if (nsenter == null || prlimit == null || setpriv == null || unshare == null || mount == null)
        return "nsenter, prlimit, setpriv, unshare or mount is missing (apt-get install util-linux)";
      if (env == null) return "env is missing (apt-get install coreutils)";
      return null;
    }
  }

  /**
   * The host uid and gid a sandbox runs as when the agent runs as root: never root itself. A
   * process whose host uid is 0 passes the owner's permission bits of every root-owned file it
   * sees, even without capabilities, and the kernel's own settings in /proc/sys are such files
   * (bubblewrap does not cover them then): a root sandbox could rewrite {@code kernel.core_pattern}
   * and run a program as root on the host. Null: the agent's own uid (an unprivileged agent user),
   * used as it is.
   */
  record Identity(int uid, int gid) {
    /** {@code nobody}/{@code nogroup} where the agent is root, else null. */
    static Identity forThisAgent() {
      return agentIds()[0] == 0 ? new Identity(65534, 65534) : null;
    }

    /** The agent's own uid and gid (those of /proc/self); -1 where unknown. */
    static int[] agentIds() {
      try {
        Path self = Path.of("/proc/self");
        return new int[] {
          (Integer) Files.getAttribute(self, "unix:uid", LinkOption.NOFOLLOW_LINKS),
          (Integer) Files.getAttribute(self, "unix:gid", LinkOption.NOFOLLOW_LINKS)
        };
      } catch (IOException | RuntimeException e) {
        return new int[] {-1, -1};
      }
    }

    /** The uid and gid a sandbox runs as: the identity's, else the agent's. */
    static int[] of(Identity identity) {
      return identity == null ? agentIds() : new int[] {identity.uid(), identity.gid()};
    }
  }

  /** {@code setpriv --reuid … --regid … --clear-groups --}, or nothing without an identity. */
  static List<String> dropTo(Tools tools, Identity identity) {
    if (identity == null) return List.of();
    return List.of(
        tools.setpriv(),
        "--reuid=" + identity.uid(),
        "--regid=" + identity.gid(),
        "--clear-groups",
        "--");
  }

  /**
   * A shell script that opens the generated /etc files (its arguments from {@code first} on) as fds
   * {@value #FIRST_ETC_FD} up (bwrap copies them from there) and, with {@code block}, its stdin as
   * fd {@value #BLOCK_FD} (stdin then /dev/null), then runs the rest of its arguments.
   */
  static String openFds(int first, boolean block) {
    StringBuilder sb = new StringBuilder("exec");
    if (block) sb.append(' ').append(BLOCK_FD).append("<&0 0</dev/null");
    for (int i = 0; i < GENERATED_ETC.size(); i++)
      sb.append(' ').append(FIRST_ETC_FD + i).append("<\"${").append(first + i).append("}\"");
    int used = first - 1 + GENERATED_ETC.size();
    return sb.append(" || exit 125; shift ").append(used).append("; exec \"$@\"").toString();
  }

  /**
   * As root, in a mount namespace of its own ({@code unshare --mount}): binds the scratch folder
   * ({@code $2}) on an empty folder any user can reach ({@code $3}; the state folder is not), and
   * the notice folder ({@code $4}) on another ({@code $5}), then as {@link #openFds} from {@code
   * $6}. Nothing of those binds is seen outside; bwrap, started as the {@link Identity} afterwards,
   * binds the sandbox's workspace from there.
   */
  static String bindThenOpenFds(boolean block) {
    return "\"$1\" --bind -- \"$2\" \"$3\" && \"$1\" --bind -- \"$4\" \"$5\" && "
        + openFds(6, block);
  }

  /**
   * Where the rental's spot notice folder is seen inside (read-only): {@code TICKMARK_NOTICE_FILE}.
   */
  static final String NOTICE_DIR = "/run/tickmark";

  private Sandbox() {}

  /**
   * The {@code bwrap} command line of a rental: {@code command} (already resolved) runs under the
   * rental's {@code limits}, in {@value #WORKSPACE} ({@code scratch} on the host); {@code etc}
   * holds the generated {@link #GENERATED_ETC} files; {@code devices} are the host's device nodes
   * to bind, each at the same path under /dev. With {@code network} the sandbox waits before the
   * workload runs until the agent writes "1" on its stdin ({@link #AWAIT_NETWORK}): the agent gives
   * the sandbox its route out meanwhile.
   */
  static List<String> bwrap(
      Tools tools,
      Identity identity,
      Path scratch,
      Path notice,
      Path mountpoint,
      Path etc,
      List<Path> devices,
      SandboxLimits limits,
      boolean network,
      List<String> command) {
    List<String> a = new ArrayList<>();
    String workspace = scratch.toString();
    String notices = notice.toString();
    if (identity == null) {
      a.addAll(List.of("/bin/sh", "-c", openFds(1, network), "tickmark-sandbox"));
    } else {
      // the workspace and the notice folder, bound where the sandbox's uid can reach them
      a.addAll(List.of(tools.unshare(), "--mount", "--propagation", "private", "--"));
      a.addAll(
          List.of("/bin/sh", "-c", bindThenOpenFds(network), "tickmark-sandbox", tools.mount()));
      a.addAll(List.of(workspace, mountpoint.resolve("w").toString()));
      a.addAll(List.of(notices, mountpoint.resolve("n").toString()));
      workspace = mountpoint.resolve("w").toString();
      notices = mountpoint.resolve("n").toString();
    }
    for (String name : GENERATED_ETC) a.add(etc.resolve(name).toString());
    a.addAll(dropTo(tools, identity));
    a.add(tools.bwrap());
    // --unshare-all only tries the user namespace: without one the sandbox must not start
    a.addAll(List.of("--unshare-all", "--unshare-user", "--die-with-parent", "--new-session"));
    a.addAll(List.of("--cap-drop", "ALL"));
    // no --uid: another uid inside makes bwrap nest a second user namespace, which the sandbox's
    // other namespaces do not belong to, and nsenter could then not join them unprivileged
    a.addAll(List.of("--hostname", HOSTNAME));
    a.addAll(List.of("--ro-bind", "/usr", "/usr"));
    a.addAll(system(Path.of("/")));
    for (String name : ETC) a.addAll(List.of("--ro-bind-try", "/etc/" + name, "/etc/" + name));
    for (int i = 0; i < GENERATED_ETC.size(); i++)
      a.addAll(
          List.of(
              "--ro-bind-data", String.valueOf(FIRST_ETC_FD + i), "/etc/" + GENERATED_ETC.get(i)));
    a.addAll(List.of("--proc", "/proc"));
    a.addAll(List.of("--size", String.valueOf(TMP_BYTES), "--tmpfs", "/tmp"));
    a.addAll(dev(devices));
    a.addAll(List.of("--bind", workspace, WORKSPACE, "--chdir", WORKSPACE));
    a.addAll(List.of("--ro-bind", notices, NOTICE_DIR));
    // the sandbox's own root (where /etc and the mount points live) read-only too
    a.addAll(List.of("--remount-ro", "/"));
    a.add("--");
    a.addAll(limits.prlimit(tools.prlimit()));
    if (network) a.addAll(List.of("/bin/sh", "-c", AWAIT_NETWORK, "tickmark-await-network"));
    a.addAll(command);
    return a;
  }

  /** The host's harmless character devices that every sandbox gets. */
  static final List<String> BASIC_DEVICES =
      List.of("null", "zero", "full", "random", "urandom", "tty");

  /**
   * A minimal /dev made here rather than with bwrap's {@code --dev}: that one mounts a devpts, for
   * which bwrap nests a second user namespace that the sandbox's other namespaces do not belong to,
   * and then nsenter, unprivileged, could not join them. So: a read-only tmpfs with {@link
   * #BASIC_DEVICES}, the usual {@code fd}/{@code stdin}/… links, a private {@code shm}, the
   * rental's {@code devices}; no {@code pts} (a program inside cannot open new pseudo-terminals;
   * SSH sessions get theirs from the agent). The device binds stay writable: bwrap's {@code
   * --remount-ro} would add {@code nodev} and a GPU could not be opened.
   */
  static List<String> dev(List<Path> devices) {
    List<String> a = new ArrayList<>(List.of("--tmpfs", "/dev"));
    for (String name : BASIC_DEVICES)
      a.addAll(List.of("--dev-bind-try", "/dev/" + name, "/dev/" + name));
    for (Path device : devices)
      a.addAll(List.of("--dev-bind", device.toString(), "/dev/" + device.getFileName()));
    a.addAll(List.of("--symlink", "/proc/self/fd", "/dev/fd"));
    a.addAll(List.of("--symlink", "/proc/self/fd/0", "/dev/stdin"));
    a.addAll(List.of("--symlink", "/proc/self/fd/1", "/dev/stdout"));
    a.addAll(List.of("--symlink", "/proc/self/fd/2", "/dev/stderr"));
    a.addAll(List.of("--size", String.valueOf(TMP_BYTES), "--tmpfs", "/dev/shm"));
    a.addAll(List.of("--remount-ro", "/dev"));
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

  /** The generated /etc files' contents, by name, for a sandbox running as {@code uid:gid}. */
  static String etcFile(String name, int uid, int gid) {
    return switch (name) {
      case "passwd" ->
          "root:x:0:0:root:/root:/usr/sbin/nologin\n"
              + USER
              + ":x:"
              + uid
              + ":"
              + gid
              + ":renter:"
              + WORKSPACE
              + ":/bin/bash\n";
      case "group" -> "root:x:0:\n" + USER + ":x:" + gid + ":\n";
      case "hosts" -> "127.0.0.1\tlocalhost " + HOSTNAME + "\n::1\tlocalhost ip6-localhost\n";
      case "hostname" -> HOSTNAME + "\n";
      // slirp4netns's DNS forwarder; without the rental's network nothing answers there
      case "resolv.conf" -> "nameserver " + NAMESERVER + "\n";
      default -> throw new IllegalArgumentException(name);
    };
  }

  /**
   * Runs {@code slirp4netns} with its ready byte on stdout (fd 3), its own output on stderr, and
   * its exit fd (4) the stdin pipe of whoever started it: it ends when that pipe closes, also when
   * the agent dies.
   */
  static final String SLIRP_FDS = "exec \"$@\" 3>&1 1>&2 4<&0 0</dev/null";

  /**
   * The command that gives the sandbox whose namespace init is {@code initPid} its route out: a tap
   * device {@value #TAP} in the sandbox's network namespace (10.0.2.100, gateway 10.0.2.2, DNS
   * {@value #NAMESERVER}) whose packets slirp4netns, a userspace process, sends on from the host's
   * own sockets: outbound TCP and UDP as the host could, nothing inbound, and not the host's
   * loopback ({@code --disable-host-loopback}: 10.0.2.2 does not lead to the host's 127.0.0.1). It
   * runs as the sandbox's uid (never root: it parses a stranger's packets), joins the sandbox's
   * user namespace to reach its network namespace, and runs under seccomp. ({@code
   * --enable-sandbox} needs root, so it is not used.)
   */
  static List<String> slirp4netns(Tools tools, Identity identity, long initPid) {
    List<String> a = new ArrayList<>(List.of("/bin/sh", "-c", SLIRP_FDS, "tickmark-network"));
    a.addAll(dropTo(tools, identity));
    a.addAll(
        List.of(
            tools.slirp4netns(),
            "--configure",
            "--mtu=65520",
            "--disable-host-loopback",
            "--enable-seccomp",
            "--userns-path=/proc/" + initPid + "/ns/user",
            "--ready-fd=3",
            "--exit-fd=4",
            String.valueOf(initPid),
            TAP));
    return a;
  }

  /**
   * The prefix that runs a program inside the sandbox whose namespace init is {@code initPid}, as
   * its workload runs: all its namespaces, its limits, no capabilities and no new privileges (the
   * joining process would otherwise hold every capability of the sandbox's user namespace), in
   * {@value #WORKSPACE}. The program and its arguments follow.
   */
  static List<String> enter(Tools tools, Identity identity, long initPid, SandboxLimits limits) {
    List<String> a = new ArrayList<>(dropTo(tools, identity));
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
  static List<String> relay(Tools tools, Identity identity, long initPid, boolean ipv6, int port) {
    List<String> a = new ArrayList<>(dropTo(tools, identity));
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
    // as a rental starts: a folder bound from an fd (bubblewrap 0.8 and later), as the identity
    // as a rental starts: a file copied from an fd, as the identity (in a mount namespace of its
    // own where the agent is root)
    Identity identity = Identity.forThisAgent();
    List<String> argv = new ArrayList<>();
    if (identity != null)
      argv.addAll(List.of(tools.unshare(), "--mount", "--propagation", "private", "--"));
    argv.addAll(List.of("/bin/sh", "-c", "exec 4</dev/null && exec \"$@\"", "probe"));
    argv.addAll(dropTo(tools, identity));
    argv.addAll(List.of(tools.bwrap(), "--unshare-all", "--unshare-user", "--die-with-parent"));
    argv.addAll(List.of("--ro-bind-data", "4", "/etc/passwd"));
    argv.addAll(List.of("--ro-bind", "/usr", "/usr"));
    argv.addAll(system(Path.of("/")));
    argv.addAll(List.of("--proc", "/proc"));
    argv.addAll(dev(List.of()));
    argv.addAll(List.of("--", tools.prlimit(), "--nofile=64", "--", "true"));
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
        return "bubblewrap (0.8 or later) cannot create a sandbox here (unprivileged user namespaces"
            + " disabled?): "
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
