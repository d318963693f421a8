package dev.tickmark.cli;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.PrintWriter;
import java.time.Duration;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

/**
 * {@code tickmark logs RENTAL [-f] [--tail N]}: a rental's output. Lines of {@code stdout} go to
 * stdout, those of {@code stderr} and the agent's {@code system} notes to stderr; with {@code
 * --json}, one JSON object per line on stdout. {@code -f} follows the SSE stream until the rental
 * has ended and its last line was shown, reopening it after a lost connection with {@code
 * Last-Event-ID} (so no line is shown twice or missed).
 */
@Command(
    name = "logs",
    description = {
      "A rental's output (GET /v1/rentals/ID/logs): stdout lines on stdout, stderr and the agent's"
          + " notes on stderr.",
      "-f follows it live until the rental ends, resuming where it was after a lost connection."
    })
final class LogsCommand extends ApiCommand {
  static final int PAGE = 1000;
  static final int MAX_REOPENS = 10;

  @Parameters(paramLabel = "ID", description = "The rental (rnt_...).")
  String id;

  @Option(
      names = {"-f", "--follow"},
      description = "Follow the output until the rental ends.")
  boolean follow;

  @Option(
      names = "--tail",
      paramLabel = "N",
      description = "Only the last N lines (1 to 10000), then (with -f) what comes.")
  Integer tail;

  @Override
  int execute() {
    if (tail != null && (tail < 1 || tail > 10_000))
      throw new picocli.CommandLine.ParameterException(
          spec.commandLine(), "--tail must be 1 to 10000");
    Http http = withApiKey();
    String path = "/v1/rentals/" + segment(id) + "/logs";
    if (follow) return follow(http, path);
    if (tail != null) {
      print(http.get(path + "?tail=" + tail).json());
      return Cli.EXIT_OK;
    }
    long after = 0;
    while (true) {
      JsonNode page = http.get(path + "?after=" + after + "&limit=" + PAGE).json();
      print(page);
      if (page.path("lines").size() < PAGE) return Cli.EXIT_OK;
      after = page.path("next_after").asLong();
    }
  }

  private int follow(Http http, String path) {
    follow(http, path, tail, this::print);
    return Cli.EXIT_OK;
  }

  /**
   * Hands each line of the rental's log at {@code path} to {@code print} as it comes (from the last
   * {@code tail} lines, or from the first), until the rental has ended and its last line was shown;
   * reopens the stream after a lost connection where it was.
   */
  static void follow(
      Http http, String path, Integer tail, java.util.function.Consumer<JsonNode> print) {
    String[] lastId = {null};
    boolean[] ended = {false};
    for (int failures = 0; ; ) {
      try {
        String query = "?follow=true" + (tail != null && lastId[0] == null ? "&tail=" + tail : "");
        http.events(
            path + query,
            lastId[0],
            event -> {
              if (event.type().equals("end")) {
                ended[0] = true;
                return false;
              }
              if (event.type().equals("log")) {
                print.accept(event.json());
                if (event.id() != null) lastId[0] = event.id();
              }
              return true;
            });
        if (ended[0]) return;
      } catch (UnreachableException e) {
        if (++failures > MAX_REOPENS) throw e;
        pause(Duration.ofMillis(Math.min(5_000, 250L << Math.min(failures, 5))));
        continue;
      }
      failures = 0; // closed early without an end: reopen at once, from the last line shown
    }
  }

  private void print(JsonNode node) {
    if (node.has("lines")) for (JsonNode line : node.path("lines")) printLine(line);
    else printLine(node);
  }

  private void printLine(JsonNode line) {
    printLine(line, json(), out(), err());
  }

  /** A log line as {@code logs} shows it: stdout on {@code out}, the rest on {@code err}. */
  static void printLine(JsonNode line, boolean json, PrintWriter out, PrintWriter err) {
    if (json) {
      out.println(line);
      out.flush();
      return;
    }
    boolean toOut = "stdout".equals(line.path("stream").asText());
    var w = toOut ? out : err;
    w.println(line.path("text").asText());
    w.flush();
  }

  private static void pause(Duration d) {
    try {
      Thread.sleep(d.toMillis());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new UnreachableException("interrupted", e);
    }
  }
}
