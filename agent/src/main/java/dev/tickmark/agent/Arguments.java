package dev.tickmark.agent;

import java.net.URI;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/** The agent's command line, parsed. */
record Arguments(
    AgentConfig config,
    boolean help,
    boolean version,
    boolean printReport,
    java.nio.file.Path reportStateDir) {

  Arguments(AgentConfig config, boolean help, boolean version) {
    this(config, help, version, false, null);
  }

  static final String TOKEN_ENV = "TICKMARK_AGENT_TOKEN";
  static final String CA_ENV = "TICKMARK_AGENT_CA";

  static final String USAGE =
      """
      Usage: java -jar tickmark-agent.jar --engine URL [--engine URL…] [--token TOKEN] [--state-dir DIR]
                                          [--simulate-gpus CODE:COUNT[,CODE:COUNT…]] [--runtime sandbox|docker|process]
                                          [--stop-grace SECONDS] [--ssh-idle-timeout MINUTES]
                                          [--ca FILE] [--insecure] [--allow-unsandboxed]
             java -jar tickmark-agent.jar --print-report [--state-dir DIR]

        --engine URL          a node, wss://host:port (https accepted; ws:// and http:// only on loopback:
                              127.0.0.0/8, ::1, localhost); repeat the flag or separate with commas to give
                              several: the agent fails over between them, taking the next one on each reconnect
        --ca FILE             trust only the CAs in this PEM bundle for wss:// engines instead of the system trust
                              store (a private CA, a test certificate); the host name is verified either way
                              (env TICKMARK_AGENT_CA)
        --insecure            allow plain ws:// engines off loopback: the host credential and every frame travel
                              in clear text (a warning says so at start); only on a network you trust
        --token TOKEN         registration token (tmkreg_…) for the first start; afterwards the host credential in
                              the state folder is used and the token is not needed (env TICKMARK_AGENT_TOKEN)
        --state-dir DIR       where the agent keeps its Ed25519 key, host credential and the rentals' scratch
                              folders and logs (default ~/.tickmark-agent)
        --simulate-gpus SPEC  development only: report simulated GPUs instead of the machine's, e.g. h100-80gb:2;
                              the node must allow simulated hosts. Codes:
                              %s
        --runtime KIND        how rentals run: docker (a container per rental: the rented GPUs only, no network
                              unless the renter enables it, no capabilities), sandbox (bubblewrap: own namespaces,
                              read-only system, only the workspace writable, the rented GPUs only, no network) or
                              process (a plain child process, no isolation: development only). Default: with
                              --simulate-gpus sandbox where bubblewrap works, else process (with a warning); with
                              real GPUs docker where installed, else sandbox, else the agent does not start.
                              process with real GPUs is refused unless --allow-unsandboxed
        --allow-unsandboxed   allow --runtime process with real GPUs: a workload could read the agent's key;
                              only for machines that run nobody else's workloads
        --stop-grace SECONDS  how long a stopped workload gets between SIGTERM and SIGKILL (default 10)
        --ssh-idle-timeout MINUTES
                              renters' SSH sessions with no traffic for this long are closed (default 30); the
                              agent's SSH server listens on 127.0.0.1 only and is reached through the engine
        --print-report        probe this machine (nvidia-smi, rocm-smi, /proc, a disk write in the state folder),
                              print the hardware report the agent would send, as JSON, and exit: see what the node
                              will verify before registering
        --help                this text
        --version             the agent version

      Exit status: 1 failure (e.g. unusable state folder), 2 bad usage, 3 refused by the node for good (used or
      expired token, key mismatch, host removed); otherwise it runs until stopped (SIGTERM: 143).
      """
          .formatted(SimulatedGpus.Model.codes());

  /** A command line that cannot be run; exit status 2. */
  static final class UsageException extends Exception {
    UsageException(String message) {
      super(message);
    }
  }

  static Arguments parse(List<String> args, Map<String, String> env) throws UsageException {
    List<URI> engines = new ArrayList<>();
    String token = null;
    Path stateDir = null;
    boolean printReport = false;
    SimulatedGpus simulated = null;
    AgentConfig.RuntimeKind runtime = null;
    java.time.Duration stopGrace = null;
    java.time.Duration sshIdleTimeout = null;
    boolean insecure = false;
    boolean allowUnsandboxed = false;
    String ca = null;
    for (int i = 0; i < args.size(); i++) {
      String arg = args.get(i);
      String name = arg;
      String value = null;
      int eq = arg.indexOf('=');
      if (arg.startsWith("--") && eq > 0) {
        name = arg.substring(0, eq);
        value = arg.substring(eq + 1);
      }
      switch (name) {
        case "--help", "-h" -> {
          return new Arguments(null, true, false);
        }
        case "--print-report" -> printReport = true;
        case "--insecure" -> insecure = true;
        case "--allow-unsandboxed" -> allowUnsandboxed = true;
        case "--version" -> {
          return new Arguments(null, false, true);
        }
        case "--engine" -> {
          String v = value != null ? value : next(args, ++i, name);
          for (String e : v.split(",")) {
            if (e.isBlank()) continue;
            try {
              engines.add(AgentConfig.engine(e));
            } catch (IllegalArgumentException ex) {
              throw new UsageException(ex.getMessage());
            }
          }
        }
        case "--ca" -> ca = value != null ? value : next(args, ++i, name);
        case "--token" -> token = value != null ? value : next(args, ++i, name);
        case "--state-dir" -> {
          String v = value != null ? value : next(args, ++i, name);
          if (v.isBlank()) throw new UsageException("--state-dir needs a folder");
          stateDir =
              Path.of(v.startsWith("~/") ? System.getProperty("user.home") + v.substring(1) : v);
        }
        case "--simulate-gpus" -> {
          String v = value != null ? value : next(args, ++i, name);
          try {
            simulated = SimulatedGpus.parse(v);
          } catch (IllegalArgumentException ex) {
            throw new UsageException("bad --simulate-gpus: " + ex.getMessage());
          }
        }
        case "--runtime" -> {
          String v = value != null ? value : next(args, ++i, name);
          try {
            runtime = AgentConfig.RuntimeKind.ofFlag(v.trim().toLowerCase(java.util.Locale.ROOT));
          } catch (IllegalArgumentException ex) {
            throw new UsageException("bad --runtime: " + ex.getMessage());
          }
        }
        case "--stop-grace" -> {
          String v = value != null ? value : next(args, ++i, name);
          long seconds;
          try {
            seconds = Long.parseLong(v.trim());
          } catch (NumberFormatException ex) {
            throw new UsageException("bad --stop-grace '" + v + "': a number of seconds");
          }
          if (seconds < 0 || seconds > AgentConfig.MAX_STOP_GRACE.toSeconds()) {
            throw new UsageException(
                "--stop-grace must be between 0 and "
                    + AgentConfig.MAX_STOP_GRACE.toSeconds()
                    + " seconds");
          }
          stopGrace = java.time.Duration.ofSeconds(seconds);
        }
        case "--ssh-idle-timeout" -> {
          String v = value != null ? value : next(args, ++i, name);
          long minutes;
          try {
            minutes = Long.parseLong(v.trim());
          } catch (NumberFormatException ex) {
            throw new UsageException("bad --ssh-idle-timeout '" + v + "': a number of minutes");
          }
          if (minutes < 1 || minutes > 7 * 24 * 60)
            throw new UsageException("--ssh-idle-timeout must be between 1 and 10080 minutes");
          sshIdleTimeout = java.time.Duration.ofMinutes(minutes);
        }
        default -> throw new UsageException("unknown argument '" + arg + "'");
      }
    }
    if (printReport)
      return new Arguments(
          null, false, false, true, stateDir != null ? stateDir : AgentConfig.defaultStateDir());
    if (engines.isEmpty())
      throw new UsageException("--engine is required (e.g. --engine wss://node.example)");
    if (token == null || token.isBlank()) token = env.get(TOKEN_ENV);
    if (token != null && token.isBlank()) token = null;
    if (token != null && token.chars().anyMatch(ch -> ch <= ' ' || ch == 0x7f)) {
      throw new UsageException("the token contains spaces or control characters");
    }
    if (ca == null || ca.isBlank()) ca = env.get(CA_ENV);
    Path caFile = null;
    if (ca != null && !ca.isBlank()) {
      caFile =
          Path.of(ca.startsWith("~/") ? System.getProperty("user.home") + ca.substring(1) : ca);
      try {
        dev.tickmark.wire.CaBundle.sslContext(caFile); // a broken bundle fails now, not on connect
      } catch (IllegalArgumentException e) {
        throw new UsageException("bad --ca: " + e.getMessage());
      }
    }
    AgentConfig config;
    try {
      config =
          new AgentConfig(
              engines,
              token,
              stateDir != null ? stateDir : AgentConfig.defaultStateDir(),
              simulated,
              runtime,
              stopGrace,
              sshIdleTimeout,
              insecure,
              allowUnsandboxed,
              caFile);
    } catch (IllegalArgumentException e) {
      // a plain ws:// engine off loopback, --runtime process with real GPUs
      throw new UsageException(e.getMessage());
    }
    return new Arguments(config, false, false);
  }

  private static String next(List<String> args, int i, String flag) throws UsageException {
    if (i >= args.size() || args.get(i).startsWith("--"))
      throw new UsageException(flag + " needs a value");
    return args.get(i);
  }
}
