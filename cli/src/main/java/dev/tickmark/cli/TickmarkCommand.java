package dev.tickmark.cli;

import java.io.IOException;
import java.io.InputStream;
import java.util.Properties;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.ScopeType;
import picocli.CommandLine.Spec;

/** {@code tickmark}: the root command, holding the global options every subcommand inherits. */
@Command(
    name = "tickmark",
    scope = ScopeType.INHERIT,
    mixinStandardHelpOptions = true,
    versionProvider = TickmarkCommand.Version.class,
    sortOptions = false,
    usageHelpAutoWidth = true,
    description =
        "Rent GPUs by the second, list your own, and operate a Tickmark node, over its HTTP API.",
    footer = {
      "",
      "Exit codes: 0 ok, 1 API error (error: <code>: <detail>), 2 bad usage, 3 engine unreachable.",
      "Environment: TICKMARK_URL, TICKMARK_API_KEY, TICKMARK_CA, TICKMARK_OPERATOR_TOKEN, TICKMARK_CONFIG (see docs/cli.md)."
    },
    subcommands = {
      AccountCommands.Login.class,
      AccountCommands.Show.class,
      MarketCommands.Catalog.class,
      MarketCommands.Offers.class,
      LaunchCommand.class,
      RentalCommands.Ps.class,
      RentalCommands.Show.class,
      RentalCommands.Stop.class,
      RentalCommands.Usage.class,
      SnapshotCommands.class,
      LogsCommand.class,
      ConnectCommand.class,
      SshCommand.class,
      SshKeyCommands.class,
      AccountCommands.Ledger.class,
      HostCommands.class,
      OpsCommands.class
    })
final class TickmarkCommand implements Runnable {
  static final String DEFAULT_URL = "http://127.0.0.1:8080";

  @Option(
      names = "--url",
      paramLabel = "URL",
      scope = ScopeType.INHERIT,
      description =
          "The node, e.g. http://127.0.0.1:8080 (else $TICKMARK_URL, the saved login, "
              + DEFAULT_URL
              + ").")
  String url;

  @Option(
      names = "--api-key",
      paramLabel = "KEY",
      scope = ScopeType.INHERIT,
      description = "Your API key (else $TICKMARK_API_KEY, else the saved login).")
  String apiKey;

  @Option(
      names = "--ca",
      paramLabel = "FILE",
      scope = ScopeType.INHERIT,
      description =
          "Trust only the CAs in this PEM bundle for an https:// node, instead of the system trust"
              + " store (else $TICKMARK_CA, else the saved login's). The host name is verified either"
              + " way.")
  String ca;

  @Option(
      names = "--json",
      scope = ScopeType.INHERIT,
      description = "Print the API's JSON instead of tables (for scripts).")
  boolean json;

  @Spec CommandSpec spec;

  final Cli cli;

  TickmarkCommand(Cli cli) {
    this.cli = cli;
  }

  @Override
  public void run() {
    throw new ParameterException(spec.commandLine(), "Missing command");
  }

  /** {@code tickmark --version}: the version Maven filtered into the jar. */
  static final class Version implements picocli.CommandLine.IVersionProvider {
    @Override
    public String[] getVersion() {
      return new String[] {"tickmark " + version()};
    }

    static String version() {
      try (InputStream in = TickmarkCommand.class.getResourceAsStream("/tickmark-cli.properties")) {
        if (in == null) return "unknown";
        Properties properties = new Properties();
        properties.load(in);
        return properties.getProperty("version", "unknown");
      } catch (IOException e) {
        return "unknown";
      }
    }
  }
}
