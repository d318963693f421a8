package dev.tickmark.wire;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.Optional;
import java.util.Set;

/**
 * OpenSSH public key lines ({@code ssh-ed25519 AAAA… comment}), as renters paste them and as agents
 * report their host keys: checked without a crypto library, because a key that is only stored and
 * relayed needs its shape checked, not its maths (the agent's SSH server parses it fully before it
 * accepts it).
 */
public final class SshPublicKeys {
  /** The key types accepted: what OpenSSH 8+ clients generate and offer. */
  public static final Set<String> TYPES =
      Set.of(
          "ssh-ed25519",
          "ecdsa-sha2-nistp256",
          "ecdsa-sha2-nistp384",
          "ecdsa-sha2-nistp521",
          "ssh-rsa",
          "sk-ssh-ed25519@openssh.com",
          "sk-ecdsa-sha2-nistp256@openssh.com");

  /** At most this many characters in one key line (a 16384-bit RSA key is about 2.8 k). */
  public static final int MAX_LINE = 8192;

  /** At most this many keys in an authorized-keys text (a rental's, an account's). */
  public static final int MAX_KEYS = 32;

  private SshPublicKeys() {}

  /** A parsed key: its type, the decoded blob and the comment (possibly empty). */
  public record Key(String type, byte[] blob, String comment) {
    /** The line without its comment: {@code type base64}. */
    public String withoutComment() {
      return type + " " + Base64.getEncoder().encodeToString(blob);
    }

    /** As {@code ssh-keygen -l} prints it: {@code SHA256:} and the unpadded base64 digest. */
    public String fingerprint() {
      try {
        byte[] digest = MessageDigest.getInstance("SHA-256").digest(blob);
        return "SHA256:" + Base64.getEncoder().withoutPadding().encodeToString(digest);
      } catch (NoSuchAlgorithmException e) {
        throw new IllegalStateException(e);
      }
    }
  }

  /** The key in {@code line}, or empty when it is not a well-formed public key line. */
  public static Optional<Key> parse(String line) {
    if (line == null || line.length() > MAX_LINE) return Optional.empty();
    String[] parts = line.strip().split("\\s+", 3);
    if (parts.length < 2 || !TYPES.contains(parts[0])) return Optional.empty();
    byte[] blob;
    try {
      blob = Base64.getDecoder().decode(parts[1]);
    } catch (IllegalArgumentException e) {
      return Optional.empty();
    }
    // the blob starts with the type again, as an SSH string: a key pasted under the wrong type is
    // refused here rather than by the server later
    if (!parts[0].equals(embeddedType(blob))) return Optional.empty();
    String comment = parts.length == 3 ? parts[2].strip() : "";
    if (comment.chars().anyMatch(c -> c < 0x20 || c == 0x7f)) return Optional.empty();
    return Optional.of(new Key(parts[0], blob, comment));
  }

  public static boolean isPublicKeyLine(String line) {
    return parse(line).isPresent();
  }

  /**
   * The keys of an authorized-keys text (one per line; blank lines and {@code #} comments skipped);
   * throws {@link IllegalArgumentException} naming the first line that is not a key.
   */
  public static List<Key> parseAll(String text) {
    List<Key> keys = new ArrayList<>();
    if (text == null) return keys;
    int n = 0;
    for (String line : text.split("\\R")) {
      n++;
      if (line.isBlank() || line.strip().startsWith("#")) continue;
      Optional<Key> key = parse(line);
      if (key.isEmpty())
        throw new IllegalArgumentException("line " + n + " is not an OpenSSH public key");
      keys.add(key.get());
      if (keys.size() > MAX_KEYS)
        throw new IllegalArgumentException("more than " + MAX_KEYS + " keys");
    }
    return keys;
  }

  private static String embeddedType(byte[] blob) {
    if (blob.length < 4) return null;
    ByteBuffer b = ByteBuffer.wrap(blob);
    int length = b.getInt();
    if (length <= 0 || length > 64 || length > b.remaining()) return null;
    byte[] type = new byte[length];
    b.get(type);
    return new String(type, StandardCharsets.US_ASCII);
  }
}
