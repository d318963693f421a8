package dev.tickmark.cli;

import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.PrintWriter;
import java.net.URLEncoder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.stream.Collectors;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Spec;

/**
 * What every command shares: the global options resolved (flag, then environment, then the saved
 * login), a client with the right credential, and the output. Subclasses do their work in {@link
 * #execute()}.
 */
abstract class ApiCommand implements Callable<Integer> {
  @Spec CommandSpec spec;

  @Override
  public final Integer call() {
    return execute();
  }

  /**
   * Does the command's work; returns the exit status. Failures are thrown ({@link CliException},
   * {@link UnreachableException}).
   */
  abstract int execute();

  final TickmarkCommand root() {
    return (TickmarkCommand) spec.root().userObject();
  }

  final Cli cli() {
    return root().cli;
  }

  final PrintWriter out() {
    return cli().out;
  }

  final PrintWriter err() {
    return cli().err;
  }

  final boolean json() {
    return root().json;
  }

  /** Where messages for a person go: stdout, or stderr when stdout carries JSON for a script. */
  final PrintWriter notes() {
    return json() ? err() : out();
  }

  final Path configPath() {
    return Config.path(cli().env);
  }

  /**
   * The saved login, read only when a flag or the environment does not already say it (so a broken
   * file can be replaced by login).
   */
  final Config savedConfig() {
    return Config.load(configPath());
  }

  /** {@code --url}, else {@code $TICKMARK_URL}, else the saved login's, else the local default. */
  final String url() {
    String url = firstOf(root().url, cli().env.get("TICKMARK_URL"));
    if (url == null) url = firstOf(savedConfig().url(), TickmarkCommand.DEFAULT_URL);
    if (!Http.isValidUrl(url))
      throw new ParameterException(
          spec.commandLine(), "Invalid URL '" + url + "': use http://host:port or https://host");
    return url;
  }

  /**
   * {@code --ca}, else {@code $TICKMARK_CA}, else the saved login's when the URL is the saved
   * login's too: the PEM CA bundle to trust, or null for the system trust store.
   */
  final Path caFile() {
    String ca = firstOf(root().ca, cli().env.get(CA_ENV));
    boolean savedUrl = firstOf(root().url, cli().env.get("TICKMARK_URL")) == null;
    if (ca == null && savedUrl) ca = savedConfig().ca();
    if (ca == null) return null;
    Path file = Path.of(ca).toAbsolutePath();
    try {
      dev.tickmark.wire.CaBundle.sslContext(file); // a broken bundle is bad usage, said up front
    } catch (IllegalArgumentException e) {
      throw new ParameterException(spec.commandLine(), "Bad --ca: " + e.getMessage());
    }
    return file;
  }

  static final String CA_ENV = "TICKMARK_CA";

  /** A client for {@code url} with {@code bearer} (or none), trusting {@link #caFile()}. */
  final Http http(String url, String bearer) {
    return new Http(url, bearer, caFile());
  }

  /** A client without credentials (catalog, offers). */
  final Http anonymous() {
    return http(url(), null);
  }

  /** A client with the caller's API key; without one this is {@code not_logged_in} (exit 1). */
  final Http withApiKey() {
    String key = firstOf(root().apiKey, cli().env.get("TICKMARK_API_KEY"));
    if (key == null) key = savedConfig().apiKey();
    if (key == null) {
      throw new CliException(
          "not_logged_in",
          "no API key: run 'tickmark login', set TICKMARK_API_KEY or pass --api-key");
    }
    return http(url(), key);
  }

  /** Prints the API's JSON as it came. */
  final void printJson(Http.Reply reply) {
    out().println(reply.body().strip());
    out().flush();
  }

  static ObjectNode object() {
    return Http.JSON.createObjectNode();
  }

  /** {@code ?a=1&b=2} from the parameters that are set, or an empty string. */
  static String query(Map<String, Object> parameters) {
    String joined =
        parameters.entrySet().stream()
            .filter(e -> e.getValue() != null)
            .map(
                e ->
                    e.getKey()
                        + "="
                        + URLEncoder.encode(e.getValue().toString(), StandardCharsets.UTF_8))
            .collect(Collectors.joining("&"));
    return joined.isEmpty() ? "" : "?" + joined;
  }

  static Map<String, Object> params(Object... keysAndValues) {
    Map<String, Object> map = new LinkedHashMap<>();
    for (int i = 0; i < keysAndValues.length; i += 2)
      map.put((String) keysAndValues[i], keysAndValues[i + 1]);
    return map;
  }

  /** A path segment from user input, encoded so that an id cannot walk to another resource. */
  static String segment(String id) {
    return URLEncoder.encode(id, StandardCharsets.UTF_8).replace("+", "%20");
  }

  static String firstOf(String... values) {
    for (String v : values) if (v != null && !v.isBlank()) return v;
    return null;
  }
}
