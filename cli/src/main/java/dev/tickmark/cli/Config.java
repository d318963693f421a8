package dev.tickmark.cli;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Map;

/**
 * The saved login: {@code ~/.config/tickmark/config.json} (or {@code $TICKMARK_CONFIG}) holding the
 * node's URL, an API key and the CA bundle given at login ({@code --ca}), if any. The key is a
 * secret, so the folder is 0700 and the file 0600, written atomically so a reader never sees half
 * of it.
 *
 * @param url the node's base URL, or null
 * @param apiKey the API key, or null
 * @param ca the PEM CA bundle to trust for the node's certificate (an absolute path), or null for
 *     the system trust store
 */
record Config(String url, String apiKey, String ca) {
  static final String CONFIG_ENV = "TICKMARK_CONFIG";

  static final Config EMPTY = new Config(null, null, null);

  Config(String url, String apiKey) {
    this(url, apiKey, null);
  }

  /**
   * {@code $TICKMARK_CONFIG}, else {@code $XDG_CONFIG_HOME/tickmark/config.json}, else {@code
   * ~/.config/tickmark/config.json}.
   */
  static Path path(Map<String, String> env) {
    String explicit = env.get(CONFIG_ENV);
    if (explicit != null && !explicit.isBlank()) return Path.of(explicit);
    String xdg = env.get("XDG_CONFIG_HOME");
    Path base =
        xdg != null && !xdg.isBlank()
            ? Path.of(xdg)
            : Path.of(System.getProperty("user.home"), ".config");
    return base.resolve("tickmark").resolve("config.json");
  }

  /** The saved configuration, or {@link #EMPTY} if there is none. */
  static Config load(Path file) {
    if (!Files.exists(file)) return EMPTY;
    try {
      JsonNode node = Http.JSON.readTree(Files.readString(file, StandardCharsets.UTF_8));
      if (node == null || !node.isObject())
        throw new CliException("bad_config", file + " is not a JSON object");
      return new Config(text(node, "url"), text(node, "api_key"), text(node, "ca"));
    } catch (IOException e) {
      throw new CliException("bad_config", "cannot read " + file + ": " + e.getMessage());
    }
  }

  void save(Path file) {
    ObjectNode node = Http.JSON.createObjectNode();
    node.put("url", url);
    node.put("api_key", apiKey);
    if (ca != null) node.put("ca", ca);
    try {
      Path dir = file.toAbsolutePath().getParent();
      createPrivateFolder(dir);
      Path temp =
          Files.createTempFile(
              dir,
              ".config",
              ".tmp",
              PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")));
      try {
        Files.writeString(
            temp,
            Http.JSON.writerWithDefaultPrettyPrinter().writeValueAsString(node) + "\n",
            StandardCharsets.UTF_8);
        Files.move(temp, file, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
      } finally {
        Files.deleteIfExists(temp);
      }
      Files.setPosixFilePermissions(file, PosixFilePermissions.fromString("rw-------"));
    } catch (IOException e) {
      throw new CliException("bad_config", "cannot write " + file + ": " + e.getMessage());
    }
  }

  private static void createPrivateFolder(Path dir) throws IOException {
    if (Files.isDirectory(dir)) return;
    Path parent = dir.getParent();
    if (parent != null) Files.createDirectories(parent);
    try {
      Files.createDirectory(
          dir, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")));
    } catch (FileAlreadyExistsException raced) {
      // another tickmark made it first
    }
    // the umask may have narrowed the mode given at creation; make sure it is exactly 0700
    Files.setPosixFilePermissions(dir, PosixFilePermissions.fromString("rwx------"));
  }

  private static String text(JsonNode node, String field) {
    JsonNode value = node.get(field);
    return value == null || value.isNull() ? null : value.asText();
  }

  @Override
  public String toString() {
    return "Config[url="
        + url
        + ", apiKey="
        + (apiKey == null ? "none" : "(set)")
        + ", ca="
        + ca
        + "]";
  }
}
