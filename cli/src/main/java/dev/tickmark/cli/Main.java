package dev.tickmark.cli;

import java.io.Console;
import java.io.PrintWriter;
import java.nio.charset.Charset;

/** {@code java -jar tickmark.jar …}: exit 0 ok, 1 API error, 2 bad usage, 3 engine unreachable. */
public final class Main {
  private Main() {}

  public static void main(String[] args) {
    Charset charset =
        System.console() != null ? System.console().charset() : Charset.defaultCharset();
    PrintWriter out = new PrintWriter(new java.io.OutputStreamWriter(System.out, charset), true);
    PrintWriter err = new PrintWriter(new java.io.OutputStreamWriter(System.err, charset), true);
    Console console = System.console();
    int status =
        new Cli(System.getenv(), System.in, console, out, err, Cli.isTerminal(console)).run(args);
    out.flush();
    err.flush();
    System.exit(status);
  }
}
