package dev.tickmark.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.InputStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

/**
 * What the CLI does without an engine to talk to: usage errors, help on every command, the saved
 * login's file and permissions, which URL and key win, an engine that cannot be reached, and the
 * table layout.
 */
class CliOfflineTest {
  @TempDir Path temp;
  Path config;
  CliRunner cli;
  String closedUrl;

  @BeforeEach
  void setUp() throws IOException {
    config = temp.resolve("tickmark").resolve("config.json");
    cli = new CliRunner(config);
    try (ServerSocket socket = new ServerSocket(0)) {
      closedUrl = "http://127.0.0.1:" + socket.getLocalPort(); // nothing listens there once closed
    }
  }

  @Test
  void everyCommandHasHelp() {
    List<String> paths = new ArrayList<>();
    collect(new CommandLine(new TickmarkCommand(null)), "", paths);
    assertTrue(paths.size() >= 20, "commands found: " + paths);
    for (String path : paths) {
      List<String> args = new ArrayList<>(path.isEmpty() ? List.of() : List.of(path.split(" ")));
      args.add("--help");
      CliRunner.Result help = cli.run(args.toArray(String[]::new)).ok();
      assertTrue(
          help.out().startsWith("Usage: tickmark" + (path.isEmpty() ? "" : " " + path)),
          path + ":\n" + help.out());
    }
  }

  @Test
  void theRegistrationTokensInstallCommand() {
    assertEquals(
        "sudo deploy/agent/install.sh --engine wss://node.example:8443 --token tmkreg_host_1_x",
        HostCommands.Token.installCommand(
            HostCommands.Token.agentUrl("https://node.example:8443"), "tmkreg_host_1_x"));
  }

  @Test
  void printsItsVersion() {
    assertTrue(cli.run("--version").ok().out().matches("tickmark \\d+\\.\\d+\\.\\d+.*\\s*"));
  }

  @Test
  void badUsageExitsTwoWithOneHint() {
    CliRunner.Result missing = cli.run("launch", "--gpu", "h100-80gb").expect(Cli.EXIT_USAGE);
    assertTrue(
        missing.err().startsWith("error: Missing required option: '--max-price=EUR'"),
        missing.err());
    assertTrue(missing.err().contains("Try 'tickmark launch --help'."), missing.err());
    assertEquals("", missing.out());

    CliRunner.Result typo = cli.run("acount").expect(Cli.EXIT_USAGE);
    assertTrue(
        typo.err().contains("tickmark account"), "suggests the command meant: " + typo.err());

    cli.run().expect(Cli.EXIT_USAGE);
    cli.run("host").expect(Cli.EXIT_USAGE);
    cli.run("ledger", "--limit", "many").expect(Cli.EXIT_USAGE);
    cli.run("account", "payout-details", "--holder", "Ada Lovelace").expect(Cli.EXIT_USAGE);
    cli.run("ops", "payout").expect(Cli.EXIT_USAGE);
    cli.run("ops", "payouts", "show").expect(Cli.EXIT_USAGE);
    cli.run("ops", "suspend").expect(Cli.EXIT_USAGE);
    cli.run("ops", "refund", "rnt_x", "--reference", "ticket-1").expect(Cli.EXIT_USAGE);
    cli.run("host", "price", "host_x", "--on-demand", "2", "--spot", "1", "--no-spot")
        .expect(Cli.EXIT_USAGE);
    CliRunner.Result badUrl =
        cli.run("catalog", "--url", "ftp://example.org").expect(Cli.EXIT_USAGE);
    assertTrue(badUrl.err().startsWith("error: Invalid URL 'ftp://example.org'"), badUrl.err());
  }

  @Test
  void withoutALoginAnApiCommandExitsOneAndSaysHowToLogIn() {
    CliRunner.Result result = cli.run("--url", closedUrl, "account").expect(Cli.EXIT_API_ERROR);
    assertEquals(
        "error: not_logged_in: no API key: run 'tickmark login', set TICKMARK_API_KEY or pass --api-key\n",
        result.err());
    CliRunner.Result ops = cli.run("--url", closedUrl, "ops", "audit").expect(Cli.EXIT_API_ERROR);
    assertTrue(ops.err().startsWith("error: no_operator_token: "), ops.err());
    // the operator token reaches nested commands wherever it is given: the call is attempted (and
    // finds no engine)
    cli.run("--url", closedUrl, "ops", "--operator-token", "tmkop_x", "payouts", "show", "pr_x")
        .expect(Cli.EXIT_UNREACHABLE);
    cli.run("--url", closedUrl, "ops", "payouts", "show", "pr_x", "--operator-token", "tmkop_x")
        .expect(Cli.EXIT_UNREACHABLE);
    cli.run("--url", closedUrl, "ops", "payouts", "--operator-token", "tmkop_x")
        .expect(Cli.EXIT_UNREACHABLE);
  }

  @Test
  void anUnreachableEngineExitsThreeWithOneReadableLine() {
    CliRunner.Result result = cli.run("--url", closedUrl, "offers").expect(Cli.EXIT_UNREACHABLE);
    assertEquals("", result.out());
    assertEquals(1, result.err().lines().count(), result.err());
    assertTrue(
        result.err().startsWith("error: cannot reach the engine at " + closedUrl + ": "),
        result.err());
    assertFalse(result.err().contains("Exception"), "no stack trace: " + result.err());
  }

  @Test
  void flagsBeatTheEnvironmentWhichBeatsTheSavedLogin() throws IOException {
    new Config("http://127.0.0.1:1", "tmk_saved_key").save(config);
    // the unreachable message names the URL actually used
    assertUsesUrl("http://127.0.0.1:1", cli, "account");
    CliRunner withEnv = cli.withEnv("TICKMARK_URL", "http://127.0.0.1:2");
    assertUsesUrl("http://127.0.0.1:2", withEnv, "account");
    assertUsesUrl("http://127.0.0.1:3", withEnv, "account", "--url", "http://127.0.0.1:3");
    // the saved key is used without asking; with no key anywhere there is nothing to send
    Files.delete(config);
    cli.withEnv("TICKMARK_API_KEY", "tmk_env_key")
        .withEnv("TICKMARK_URL", closedUrl)
        .run("account")
        .expect(Cli.EXIT_UNREACHABLE);
  }

  private static void assertUsesUrl(String url, CliRunner runner, String... args) {
    CliRunner.Result result = runner.run(args).expect(Cli.EXIT_UNREACHABLE);
    assertTrue(
        result.err().startsWith("error: cannot reach the engine at " + url + ":"), result.err());
  }

  @Test
  void theSavedLoginIsPrivate() throws IOException {
    Path nested =
        temp.resolve("home").resolve(".config").resolve("tickmark").resolve("config.json");
    new Config("http://127.0.0.1:8080", "tmk_abc_secret").save(nested);
    assertEquals(
        "rwx------",
        PosixFilePermissions.toString(Files.getPosixFilePermissions(nested.getParent())));
    assertEquals("rw-------", PosixFilePermissions.toString(Files.getPosixFilePermissions(nested)));
    assertEquals(new Config("http://127.0.0.1:8080", "tmk_abc_secret"), Config.load(nested));
    assertFalse(
        new Config("u", "tmk_abc_secret").toString().contains("secret"),
        "the key never appears in toString");
    // saving again replaces the file and keeps it private
    new Config("http://127.0.0.1:9090", "tmk_def_secret").save(nested);
    assertEquals("http://127.0.0.1:9090", Config.load(nested).url());
    assertEquals("rw-------", PosixFilePermissions.toString(Files.getPosixFilePermissions(nested)));
    try (var files = Files.list(nested.getParent())) {
      assertEquals(List.of(nested), files.toList(), "no temporary file left behind");
    }
  }

  @Test
  void theConfigPathFollowsTheEnvironment() {
    assertEquals(Path.of("/x/c.json"), Config.path(Map.of("TICKMARK_CONFIG", "/x/c.json")));
    assertEquals(
        Path.of("/xdg/tickmark/config.json"), Config.path(Map.of("XDG_CONFIG_HOME", "/xdg")));
    assertEquals(
        Path.of(System.getProperty("user.home"), ".config", "tickmark", "config.json"),
        Config.path(Map.of()));
  }

  @Test
  void aBrokenConfigFileIsAnErrorNotACrash() throws IOException {
    Files.createDirectories(config.getParent());
    Files.writeString(config, "not json");
    CliRunner.Result result = cli.run("account").expect(Cli.EXIT_API_ERROR);
    assertTrue(result.err().startsWith("error: bad_config: "), result.err());
    // with the URL and key given, the file is not needed (and login can replace it)
    cli.run("account", "--url", closedUrl, "--api-key", "tmk_a_b").expect(Cli.EXIT_UNREACHABLE);
  }

  @Test
  void tablesAlignColumnsAndRightAlignNumbers() {
    StringWriter text = new StringWriter();
    new Table("ID", "COST", "NOTE", "END")
        .row("rnt_a", "0.500000", null, null)
        .row("rnt_bbbb", "12.000000", "x", null)
        .print(new PrintWriter(text));
    assertEquals(
        """
        ID             COST  NOTE  END
        rnt_a      0.500000  -     -
        rnt_bbbb  12.000000  x     -
        """,
        text.toString());
  }

  @Test
  void theLiveLineIsRewrittenOnATerminalAndALinePerUpdateElsewhere() {
    StringWriter terminal = new StringWriter();
    RentalCommands.LiveLine rewritten =
        new RentalCommands.LiveLine(new PrintWriter(terminal), true);
    rewritten.show("rnt_a  running  9 s");
    rewritten.show("rnt_a  running  10 s");
    rewritten.show("rnt_a  ended");
    rewritten.end();
    assertEquals(
        "\rrnt_a  running  9 s\rrnt_a  running  10 s\rrnt_a  ended"
            + " ".repeat(8)
            + System.lineSeparator(),
        terminal.toString(),
        "padded over the 20 characters shown before");

    StringWriter pipe = new StringWriter();
    RentalCommands.LiveLine lines = new RentalCommands.LiveLine(new PrintWriter(pipe), false);
    lines.show("rnt_a  running  9 s");
    lines.show("rnt_a  running  10 s");
    lines.end();
    assertEquals(
        "rnt_a  running  9 s"
            + System.lineSeparator()
            + "rnt_a  running  10 s"
            + System.lineSeparator(),
        pipe.toString());
  }

  @Test
  void noConsoleIsNoTerminal() {
    assertFalse(Cli.isTerminal(null));
    assertFalse(
        new Cli(
                Map.of(),
                InputStream.nullInputStream(),
                null,
                new PrintWriter(new StringWriter()),
                new PrintWriter(new StringWriter()))
            .terminal);
  }

  private static void collect(CommandLine command, String path, List<String> paths) {
    paths.add(path);
    command
        .getSubcommands()
        .forEach(
            (name, sub) -> {
              if (!name.equals(sub.getCommandName())) return; // aliases
              collect(sub, path.isEmpty() ? name : path + " " + name, paths);
            });
  }
}
