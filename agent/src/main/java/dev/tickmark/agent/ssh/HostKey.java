package dev.tickmark.agent.ssh;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.FileSystems;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.GeneralSecurityException;
import java.security.KeyPair;
import java.security.PublicKey;
import java.util.Iterator;
import org.apache.sshd.common.NamedResource;
import org.apache.sshd.common.config.keys.PublicKeyEntry;
import org.apache.sshd.common.config.keys.writer.openssh.OpenSSHKeyPairResourceWriter;
import org.apache.sshd.common.util.security.SecurityUtils;

/**
 * The agent's SSH host key: Ed25519, created on first use in the state folder as {@value #FILE}
 * (OpenSSH's private key format, unencrypted, mode 0600; {@code ssh-keygen -y -f} prints its public
 * half) and loaded from there afterwards, so that renters who pinned it keep trusting the host
 * across restarts.
 */
public final class HostKey {
  public static final String FILE = "ssh_host_ed25519_key";

  private HostKey() {}

  /** Loads the key from {@code stateDir}, creating it first if there is none. */
  public static KeyPair loadOrCreate(Path stateDir) throws IOException {
    Path file = stateDir.resolve(FILE);
    try {
      if (Files.exists(file)) return load(file);
      KeyPair key = SecurityUtils.getKeyPairGenerator(SecurityUtils.EDDSA).generateKeyPair();
      ByteArrayOutputStream text = new ByteArrayOutputStream();
      OpenSSHKeyPairResourceWriter.INSTANCE.writePrivateKey(key, "tickmark-agent", null, text);
      write(file, text.toByteArray());
      return key;
    } catch (GeneralSecurityException e) {
      throw new IOException("cannot create or read the SSH host key " + file + ": " + e, e);
    }
  }

  /** One OpenSSH public key line: {@code ssh-ed25519 AAAA…} (no comment). */
  public static String openSshLine(PublicKey key) {
    return PublicKeyEntry.toString(key);
  }

  private static KeyPair load(Path file) throws IOException, GeneralSecurityException {
    try (InputStream in = Files.newInputStream(file)) {
      Iterable<KeyPair> keys =
          SecurityUtils.loadKeyPairIdentities(null, NamedResource.ofName(FILE), in, null);
      Iterator<KeyPair> it = keys == null ? null : keys.iterator();
      if (it == null || !it.hasNext()) throw new IOException("no key in " + file);
      return it.next();
    }
  }

  /** Written whole or not at all: a temporary 0600 file beside it, then renamed. */
  private static void write(Path file, byte[] bytes) throws IOException {
    boolean posix = FileSystems.getDefault().supportedFileAttributeViews().contains("posix");
    Path tmp =
        posix
            ? Files.createTempFile(
                file.getParent(),
                FILE,
                ".tmp",
                PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")))
            : Files.createTempFile(file.getParent(), FILE, ".tmp");
    try {
      Files.write(tmp, bytes);
      Files.move(tmp, file, StandardCopyOption.ATOMIC_MOVE);
    } finally {
      Files.deleteIfExists(tmp);
    }
  }
}
