package dev.tickmark.agent;

import java.io.PrintStream;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;

/**
 * {@code java -jar tickmark-agent.jar --engine ws://127.0.0.1:8080 --token TOKEN [--state-dir DIR]
 * [--simulate-gpus h100-80gb:2] [--runtime sandbox|docker|process]}. Runs until a signal, or until
 * the node refuses the agent for good; a signal stops the running workloads (and wipes their
 * scratch folders) before the agent exits.
 */
public final class Main {
  static final int EXIT_OK = 0;
  static final int EXIT_FAILURE = 1;
  static final int EXIT_USAGE = 2;
  static final int EXIT_REJECTED = 3;

  private Main() {}

  public static void main(String[] args) {
    // before any logger exists: the agent's own logging configuration, unless the user names one
    if (System.getProperty("logback.configurationFile") == null) {
      System.setProperty("logback.configurationFile", "tickmark-agent-logback.xml");
    }
    if (List.of(args).contains("--print-report"))
      System.setProperty("TICKMARK_AGENT_LOG_TARGET", "System.err"); // stdout: the report only
    System.exit(run(List.of(args), System.getenv(), System.out, System.err));
  }

  /**
   * Probes this machine as a registering agent would and prints the (unsigned) report; nothing is
   * sent.
   */
  static int printReport(java.nio.file.Path stateDir, PrintStream out, PrintStream err) {
    try {
      java.nio.file.Files.createDirectories(stateDir);
      dev.tickmark.wire.HardwareReport report = HardwareProbe.of(Agent.VERSION, stateDir).report();
      out.println(
          dev.tickmark.wire.Frames.MAPPER
              .writerWithDefaultPrettyPrinter()
              .writeValueAsString(dev.tickmark.wire.Frames.reportTree(report)));
      return EXIT_OK;
    } catch (java.io.IOException | RuntimeException e) {
      err.println("tickmark-agent: cannot probe this machine: " + e.getMessage());
      return EXIT_FAILURE;
    }
  }

  /** Parses, starts the agent and waits for it to stop; returns the exit status. */
  static int run(List<String> args, Map<String, String> env, PrintStream out, PrintStream err) {
    Arguments parsed;
    try {
      parsed = Arguments.parse(args, env);
    } catch (Arguments.UsageException e) {
      err.println("tickmark-agent: " + e.getMessage());
      err.println("Try --help.");
      return EXIT_USAGE;
    }
    if (parsed.help()) {
      out.print(Arguments.USAGE);
      return EXIT_OK;
    }
    if (parsed.version()) {
      out.println("tickmark-agent " + Agent.VERSION);
      return EXIT_OK;
    }
    if (parsed.printReport()) return printReport(parsed.reportStateDir(), out, err);
    Agent agent;
    try {
      agent = Agent.start(parsed.config());
    } catch (IllegalArgumentException e) {
      err.println("tickmark-agent: " + e.getMessage());
      return EXIT_USAGE;
    } catch (IllegalStateException e) {
      err.println("tickmark-agent: " + e.getMessage());
      return EXIT_FAILURE;
    }
    Thread hook = new Thread(agent::close, "tickmark-agent-shutdown");
    java.lang.Runtime.getRuntime().addShutdownHook(hook);
    Agent.Stopped stopped;
    try {
      stopped = agent.stopped().get();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      agent.close();
      return EXIT_FAILURE;
    } catch (ExecutionException e) {
      err.println("tickmark-agent: " + e.getCause());
      return EXIT_FAILURE;
    }
    if (!stopped.rejected()) return EXIT_OK;
    try {
      java.lang.Runtime.getRuntime().removeShutdownHook(hook);
    } catch (IllegalStateException shuttingDown) {
      // already exiting
    }
    err.println(stopped.message());
    return EXIT_REJECTED;
  }
}
