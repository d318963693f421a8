package dev.tickmark.cli;

import java.io.Console;
import java.io.InputStream;
import java.io.PrintWriter;
import java.util.Map;
import picocli.CommandLine;

/**
 * One run of the {@code tickmark} command with its surroundings passed in (environment, stdin,
 * terminal, output), so tests run it in-process exactly as {@link Main} does. Turns failures into
 * the documented exit codes and one line on stderr.
 */
final class Cli {
  static final int EXIT_OK = 0;
  static final int EXIT_API_ERROR = 1;
  static final int EXIT_USAGE = CommandLine.ExitCode.USAGE; // 2
  static final int EXIT_UNREACHABLE = 3;

  final Map<String, String> env;
  final InputStream in;
  final Console console; // null when stdin is not a terminal
  final PrintWriter out;
  final PrintWriter err;

  /** stdout as bytes, for {@code connect}'s SSH stream. */
  final java.io.OutputStream bytesOut;

  /**
   * Whether stdout is a terminal: a live line is then rewritten in place; into a pipe or a file it
   * is one line per update.
   */
  final boolean terminal;

  Cli(Map<String, String> env, InputStream in, Console console, PrintWriter out, PrintWriter err) {
    this(env, in, console, out, err, isTerminal(console));
  }

  Cli(
      Map<String, String> env,
      InputStream in,
      Console console,
      PrintWriter out,
      PrintWriter err,
      boolean terminal) {
    this(env, in, console, out, err, terminal, System.out);
  }

  Cli(
      Map<String, String> env,
      InputStream in,
      Console console,
      PrintWriter out,
      PrintWriter err,
      boolean terminal,
      java.io.OutputStream bytesOut) {
    this.bytesOut = bytesOut;
    this.env = Map.copyOf(env);
    this.in = in;
    this.console = console;
    this.out = out;
    this.err = err;
    this.terminal = terminal;
  }

  /**
   * Whether the JVM's console is a terminal. Up to Java 21 there is a console only when stdin and
   * stdout both are one; from Java 22 there may be one while they are redirected, and {@code
   * Console.isTerminal()} (absent before) tells.
   */
  static boolean isTerminal(Console console) {
    if (console == null) return false;
    try {
      return (Boolean) Console.class.getMethod("isTerminal").invoke(console);
    } catch (ReflectiveOperationException beforeJava22) {
      return true;
    }
  }

  int run(String... args) {
    CommandLine commandLine = new CommandLine(new TickmarkCommand(this));
    commandLine.setOut(out).setErr(err);
    commandLine.setParameterExceptionHandler(this::badUsage);
    commandLine.setExecutionExceptionHandler(this::failed);
    int status = commandLine.execute(args);
    out.flush();
    err.flush();
    return status;
  }

  /** Bad usage: picocli's message and where to find help, not the whole usage text. */
  private int badUsage(CommandLine.ParameterException failure, String[] args) {
    CommandLine command = failure.getCommandLine();
    err.println("error: " + failure.getMessage());
    CommandLine.UnmatchedArgumentException.printSuggestions(failure, err);
    err.println("Try '" + command.getCommandSpec().qualifiedName() + " --help'.");
    return EXIT_USAGE;
  }

  private int failed(Exception failure, CommandLine command, CommandLine.ParseResult parsed) {
    if (failure instanceof CliException e) {
      err.println("error: " + e.code() + ": " + e.detail());
      return EXIT_API_ERROR;
    }
    if (failure instanceof UnreachableException e) {
      err.println("error: " + e.getMessage());
      return EXIT_UNREACHABLE;
    }
    // a bug in the CLI: one line unless asked for the trace
    err.println("error: internal: " + failure);
    if (env.containsKey("TICKMARK_DEBUG")) failure.printStackTrace(err);
    return EXIT_API_ERROR;
  }
}
