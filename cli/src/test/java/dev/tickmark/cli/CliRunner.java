package dev.tickmark.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.io.ByteArrayInputStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.CompletableFuture;

/**
 * Runs {@code tickmark} in-process exactly as {@link Main} does, with a given environment (always
 * its own config file, never the developer's), stdin, and captured stdout and stderr.
 */
final class CliRunner {
  /** One finished run. */
  record Result(int exit, String out, String err) {
    Result expect(int expected) {
      assertEquals(expected, exit, () -> "exit status; stdout:\n" + out + "\nstderr:\n" + err);
      return this;
    }

    Result ok() {
      return expect(Cli.EXIT_OK);
    }
  }

  /** A run still going in the background, whose output can be read while it runs. */
  record Background(StringWriter out, StringWriter err, CompletableFuture<Result> result) {}

  private final Map<String, String> env;

  CliRunner(Path configFile) {
    this(Map.of(Config.CONFIG_ENV, configFile.toString()));
  }

  private CliRunner(Map<String, String> env) {
    this.env = Map.copyOf(env);
  }

  /** The same runner with one more environment variable. */
  CliRunner withEnv(String name, String value) {
    Map<String, String> more = new HashMap<>(env);
    more.put(name, value);
    return new CliRunner(more);
  }

  Result run(String... args) {
    return runWithInput("", args);
  }

  Result runWithInput(String stdin, String... args) {
    StringWriter out = new StringWriter();
    StringWriter err = new StringWriter();
    int exit = cli(stdin, out, err).run(args);
    return new Result(exit, out.toString(), err.toString());
  }

  Background start(String... args) {
    StringWriter out = new StringWriter();
    StringWriter err = new StringWriter();
    Cli cli = cli("", out, err);
    CompletableFuture<Result> result =
        CompletableFuture.supplyAsync(
            () -> {
              int exit = cli.run(args);
              return new Result(exit, out.toString(), err.toString());
            });
    return new Background(out, err, result);
  }

  private Cli cli(String stdin, StringWriter out, StringWriter err) {
    return new Cli(
        env,
        new ByteArrayInputStream(stdin.getBytes(StandardCharsets.UTF_8)),
        null,
        new PrintWriter(out, true),
        new PrintWriter(err, true));
  }
}
