package dev.tickmark.cli;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import picocli.CommandLine.Command;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Parameters;

/**
 * {@code tickmark ssh-keys [add NAME FILE | rm ID]}: the account's SSH public keys, which every
 * rental launched without {@code --ssh-key} accepts ({@code /v1/account/ssh-keys}).
 */
@Command(
    name = "ssh-keys",
    description = {
      "Your account's SSH public keys (used by rentals launched without --ssh-key).",
      "Without a subcommand: list them."
    },
    subcommands = {SshKeyCommands.Add.class, SshKeyCommands.Remove.class})
final class SshKeyCommands extends ApiCommand {
  @Override
  int execute() {
    JsonNode keys = withApiKey().get("/v1/account/ssh-keys").json();
    if (json()) {
      out().println(keys);
      return Cli.EXIT_OK;
    }
    Table table = new Table("ID", "NAME", "FINGERPRINT", "ADDED");
    for (JsonNode k : keys.path("ssh_keys"))
      table.row(
          k.path("id").asText(),
          k.path("name").asText(),
          k.path("fingerprint").asText(),
          k.path("created_at").asText());
    if (table.isEmpty())
      notes().println("No SSH keys. Add one: tickmark ssh-keys add laptop ~/.ssh/id_ed25519.pub");
    else table.print(out());
    out().flush();
    return Cli.EXIT_OK;
  }

  @Command(name = "add", description = "Add a public key (a .pub file, or - for stdin).")
  static final class Add extends ApiCommand {
    @Parameters(index = "0", paramLabel = "NAME", description = "A name to tell it by.")
    String name;

    @Parameters(index = "1", paramLabel = "FILE", description = "The public key file (.pub).")
    String file;

    @Override
    int execute() {
      String key;
      try {
        key =
            file.equals("-")
                ? new String(cli().in.readAllBytes(), StandardCharsets.UTF_8)
                : Files.readString(Path.of(file), StandardCharsets.UTF_8);
      } catch (IOException e) {
        throw new ParameterException(
            spec.commandLine(), "Cannot read " + file + ": " + e.getMessage());
      }
      if (key.contains("PRIVATE KEY"))
        throw new ParameterException(
            spec.commandLine(), file + " is a private key: give the .pub file");
      ObjectNode body = object();
      body.put("name", name);
      body.put("public_key", key.strip());
      Http.Reply reply = withApiKey().post("/v1/account/ssh-keys", body);
      if (json()) printJson(reply);
      else {
        JsonNode k = reply.json();
        out().println("Added " + k.path("id").asText() + " " + k.path("fingerprint").asText());
        out().flush();
      }
      return Cli.EXIT_OK;
    }
  }

  @Command(name = "rm", description = "Remove a key.")
  static final class Remove extends ApiCommand {
    @Parameters(paramLabel = "ID", description = "The key (ssh_...).")
    String id;

    @Override
    int execute() {
      withApiKey().delete("/v1/account/ssh-keys/" + segment(id));
      notes().println("Removed " + id);
      notes().flush();
      return Cli.EXIT_OK;
    }
  }
}
