package dev.tickmark.cli;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

/**
 * {@code tickmark ssh RENTAL [-i KEY] [-L SPEC]… [-t] [-- COMMAND…]}: runs the system {@code ssh}
 * with {@code tickmark connect RENTAL} as its {@code ProxyCommand} and the rental's host key pinned
 * in the CLI's own known-hosts file ({@code HostKeyAlias} = the rental id, strict checking), so the
 * first connection is as safe as the hundredth. The API key reaches the proxy through the
 * environment, never the command line. Exits with ssh's status.
 */
@Command(
    name = "ssh",
    description = {
      "Open a shell (or run COMMAND) on a running rental with the system ssh, through the engine;",
      "the host key is pinned from the rental (ssh_host_key). Example: tickmark ssh ID -- nvidia-smi"
    })
final class SshCommand extends ApiCommand {
  /** Any user name is accepted by the rental's SSH server; this one says where it leads. */
  static final String USER = "tickmark";

  @Parameters(index = "0", paramLabel = "ID", description = "The rental (rnt_...).")
  String id;

  @Parameters(
      index = "1..*",
      arity = "0..*",
      paramLabel = "COMMAND",
      description = "A command to run instead of a shell (after --).")
  List<String> command;

  @Option(
      names = "-i",
      paramLabel = "KEY",
      description = "The private key file to use (as ssh -i).")
  Path identity;

  @Option(
      names = "-L",
      paramLabel = "SPEC",
      description = "Forward a local port into the rental (as ssh -L), e.g. 8888:localhost:8888.")
  List<String> forwards;

  @Option(
      names = "-t",
      description = "Force a terminal (as ssh -t), e.g. for an interactive COMMAND.")
  boolean tty;

  @Override
  int execute() {
    Http http = withApiKey();
    return run(this, http, id, identity, forwards, tty, command);
  }

  /** Runs ssh for {@code rentalId}; shared with {@code launch --ssh}. */
  static int run(
      ApiCommand caller,
      Http http,
      String rentalId,
      Path identity,
      List<String> forwards,
      boolean tty,
      List<String> command) {
    JsonNode rental = ConnectCommand.rental(http, rentalId);
    String status = rental.path("status").asText();
    if (!status.equals("running"))
      throw new CliException(
          "not_running", "rental " + rentalId + " is " + status + "; SSH reaches a running rental");
    String hostKey = rental.path("ssh_host_key").asText(null);
    if (hostKey == null || hostKey.isBlank())
      throw new CliException(
          "no_ssh_server", "the rental's host runs no SSH server (its agent reported no host key)");
    Path knownHosts = pin(caller.configPath().resolveSibling("known_hosts"), rentalId, hostKey);
    List<String> args = new ArrayList<>();
    args.add(caller.cli().env.getOrDefault("TICKMARK_SSH", "ssh"));
    args.addAll(List.of("-o", "ProxyCommand=" + proxyCommand(caller.cli().env, rentalId)));
    args.addAll(List.of("-o", "HostKeyAlias=" + rentalId));
    args.addAll(List.of("-o", "UserKnownHostsFile=" + knownHosts));
    args.addAll(List.of("-o", "GlobalKnownHostsFile=/dev/null"));
    args.addAll(List.of("-o", "StrictHostKeyChecking=yes"));
    args.addAll(List.of("-o", "ServerAliveInterval=30"));
    if (identity != null) args.addAll(List.of("-i", identity.toString()));
    if (forwards != null) forwards.forEach(f -> args.addAll(List.of("-L", f)));
    if (tty) args.add("-t");
    args.add(USER + "@" + rentalId);
    if (command != null && !command.isEmpty()) {
      args.add("--");
      args.addAll(command);
    }
    ProcessBuilder ssh = new ProcessBuilder(args);
    // The CLI run as its own program hands ssh its terminal. Run inside another program (the
    // tests run it in their JVM, whose stdin and stdout are the test runner's channel) it must not:
    // ssh would read that stdin and make it non-blocking under the runner. It gets the CLI's
    // streams instead.
    Cli cli = caller.cli();
    boolean ownStreams = cli.in == System.in;
    if (ownStreams) ssh.inheritIO();
    Map<String, String> env = ssh.environment();
    env.put("TICKMARK_URL", http.baseUrl());
    env.put("TICKMARK_API_KEY", http.bearer());
    if (http.caFile() != null) env.put(ApiCommand.CA_ENV, http.caFile().toString());
    try {
      Process p = ssh.start();
      if (ownStreams) return p.waitFor();
      List<Thread> copies =
          List.of(
              copy(cli.in, p.getOutputStream()),
              copy(p.getInputStream(), caller.out()),
              copy(p.getErrorStream(), caller.err()));
      int exit = p.waitFor();
      for (Thread t : copies.subList(1, 3)) t.join(); // all it wrote, before its status
      return exit;
    } catch (IOException e) {
      throw new CliException(
          "ssh_not_found",
          "cannot run " + args.get(0) + " (install OpenSSH's client): " + e.getMessage());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new CliException("interrupted", "interrupted while ssh ran");
    }
  }

  /** Gives ssh the CLI's input, on a thread of its own, and ends its input after it. */
  private static Thread copy(java.io.InputStream from, java.io.OutputStream to) {
    return started(
        () -> {
          try (to) {
            from.transferTo(to);
          } catch (IOException e) {
            // ssh ended: nothing more to give it
          }
        });
  }

  /** Copies ssh's output, as text, to the CLI's {@code to}, on a thread of its own. */
  private static Thread copy(java.io.InputStream from, java.io.PrintWriter to) {
    return started(
        () -> {
          try (java.io.Reader in = new java.io.InputStreamReader(from, StandardCharsets.UTF_8)) {
            in.transferTo(to);
            to.flush();
          } catch (IOException e) {
            // ssh ended
          }
        });
  }

  private static Thread started(Runnable copy) {
    Thread t = new Thread(copy, "tickmark-ssh-streams");
    t.setDaemon(true);
    t.start();
    return t;
  }

  /**
   * The known-hosts file with {@code alias}'s line set to {@code hostKey} (other lines kept), mode
   * 0600.
   */
  static Path pin(Path file, String alias, String hostKey) {
    try {
      Files.createDirectories(file.getParent());
      List<String> lines = new ArrayList<>();
      if (Files.exists(file))
        for (String line : Files.readAllLines(file, StandardCharsets.UTF_8))
          if (!line.startsWith(alias + " ")) lines.add(line);
      lines.add(alias + " " + hostKey.strip());
      Path tmp = file.resolveSibling(file.getFileName() + ".tmp");
      Files.deleteIfExists(tmp);
      Files.createFile(
          tmp, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")));
      Files.write(tmp, lines, StandardCharsets.UTF_8, StandardOpenOption.TRUNCATE_EXISTING);
      Files.move(
          tmp,
          file,
          java.nio.file.StandardCopyOption.REPLACE_EXISTING,
          java.nio.file.StandardCopyOption.ATOMIC_MOVE);
      return file;
    } catch (IOException e) {
      throw new CliException("config_unwritable", "cannot write " + file + ": " + e.getMessage());
    }
  }

  /**
   * How ssh runs {@code tickmark connect}: {@code $TICKMARK_CLI} (a launcher such as {@code
   * bin/tickmark}) when set, else this very Java and class path.
   */
  static String proxyCommand(Map<String, String> env, String rentalId) {
    // ssh expands %h, %p… in a ProxyCommand: a literal % is written %%
    return unexpanded(env, rentalId).replace("%", "%%");
  }

  private static String unexpanded(Map<String, String> env, String rentalId) {
    String launcher = env.get("TICKMARK_CLI");
    if (launcher != null && !launcher.isBlank())
      return quote(launcher) + " connect " + quote(rentalId);
    String java =
        ProcessHandle.current()
            .info()
            .command()
            .orElse(Path.of(System.getProperty("java.home"), "bin", "java").toString());
    // no -XX:TieredStopAtLevel=1 here (unlike the launcher's short commands): this process relays
    // a whole session's bytes, and the C2 compiler more than doubles its throughput
    return quote(java)
        + " -XX:+UseSerialGC -Xshare:auto -cp "
        + quote(System.getProperty("java.class.path"))
        + " dev.tickmark.cli.Main connect "
        + quote(rentalId);
  }

  /** One word for {@code /bin/sh}, which ssh runs its ProxyCommand with. */
  static String quote(String s) {
    return "'" + s.replace("'", "'\"'\"'") + "'";
  }
}
