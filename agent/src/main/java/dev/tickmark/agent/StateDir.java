package dev.tickmark.agent;

import dev.tickmark.wire.Ed25519;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.channels.OverlappingFileLockException;
import java.nio.charset.StandardCharsets;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.FileSystems;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.FileAttribute;
import java.nio.file.attribute.PosixFilePermission;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.KeyPair;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.Set;

/**
 * The agent's state folder: {@code agent.key} (its Ed25519 key pair, created on first use) and
 * {@code host-credential} (written after the first registration), both mode 0600 in a folder of
 * mode 0700. Files are replaced atomically (written to a temporary file, forced to disk, then moved
 * over the old one), so a crash never leaves half a key. While an agent runs it holds a lock on
 * {@code agent.lock}, so two agents cannot share one identity.
 */
final class StateDir implements AutoCloseable {
  static final String KEY_FILE = "agent.key";
  static final String CREDENTIAL_FILE = "host-credential";
  static final String LOCK_FILE = "agent.lock";

  private static final Set<PosixFilePermission> OWNER_RW =
      PosixFilePermissions.fromString("rw-------");
  private static final Set<PosixFilePermission> OWNER_RWX =
      PosixFilePermissions.fromString("rwx------");
  private static final boolean POSIX =
      FileSystems.getDefault().supportedFileAttributeViews().contains("posix");

  /**
   * The state folder cannot be used: unreadable, unwritable, corrupt, or in use by another agent.
   */
  static final class StateException extends Exception {
    StateException(String message) {
      super(message);
    }
  }

  private final Path dir;
  private final FileChannel lockChannel;
  private final FileLock lock;
  private final KeyPair key;

  private StateDir(Path dir, FileChannel lockChannel, FileLock lock, KeyPair key) {
    this.dir = dir;
    this.lockChannel = lockChannel;
    this.lock = lock;
    this.key = key;
  }

  /** Opens (creating if needed) the folder, locks it, and loads or generates the key. */
  static StateDir open(Path dir) throws StateException {
    Path d = dir.toAbsolutePath().normalize();
    try {
      if (!Files.isDirectory(d)) {
        if (POSIX) Files.createDirectories(d, PosixFilePermissions.asFileAttribute(OWNER_RWX));
        else Files.createDirectories(d);
      }
    } catch (IOException e) {
      throw new StateException("cannot create the state folder " + d + ": " + e);
    }
    FileChannel channel;
    FileLock lock;
    try {
      channel =
          FileChannel.open(
              d.resolve(LOCK_FILE), StandardOpenOption.CREATE, StandardOpenOption.WRITE);
    } catch (IOException e) {
      throw new StateException("cannot write in the state folder " + d + ": " + e);
    }
    try {
      lock = channel.tryLock();
    } catch (IOException | OverlappingFileLockException e) {
      lock = null;
    }
    if (lock == null) {
      closeQuietly(channel);
      throw new StateException("another agent is already running with the state folder " + d);
    }
    try {
      return new StateDir(d, channel, lock, loadOrCreateKey(d));
    } catch (StateException | RuntimeException e) {
      releaseQuietly(lock);
      closeQuietly(channel);
      throw e;
    }
  }

  Path path() {
    return dir;
  }

  KeyPair key() {
    return key;
  }

  Path keyFile() {
    return dir.resolve(KEY_FILE);
  }

  Path credentialFile() {
    return dir.resolve(CREDENTIAL_FILE);
  }

  /** The host credential kept from the first registration, if any. */
  Optional<String> credential() throws StateException {
    Path file = credentialFile();
    if (!Files.exists(file)) return Optional.empty();
    try {
      String c = Files.readString(file, StandardCharsets.UTF_8).trim();
      return c.isEmpty() ? Optional.empty() : Optional.of(c);
    } catch (IOException e) {
      throw new StateException("cannot read " + file + ": " + e);
    }
  }

  void storeCredential(String credential) throws StateException {
    try {
      writeAtomically(credentialFile(), credential + "\n");
    } catch (IOException e) {
      throw new StateException(
          "cannot store the host credential in " + credentialFile() + ": " + e);
    }
  }

  @Override
  public void close() {
    releaseQuietly(lock);
    closeQuietly(lockChannel);
  }

  private static KeyPair loadOrCreateKey(Path dir) throws StateException {
    Path file = dir.resolve(KEY_FILE);
    if (Files.exists(file)) return readKey(file);
    KeyPair key = Ed25519.generate();
    String text =
        "# tickmark agent Ed25519 key pair: keep this file secret; its public half is pinned to the host\n"
            + "private="
            + Ed25519.encodePrivate(key.getPrivate())
            + "\n"
            + "public="
            + Ed25519.encodePublic(key.getPublic())
            + "\n";
    try {
      writeAtomically(file, text);
    } catch (IOException e) {
      throw new StateException("cannot write the agent key " + file + ": " + e);
    }
    return key;
  }

  private static KeyPair readKey(Path file) throws StateException {
    String privateKey = null;
    String publicKey = null;
    try {
      for (String line : Files.readAllLines(file, StandardCharsets.UTF_8)) {
        String l = line.trim();
        if (l.startsWith("private=")) privateKey = l.substring("private=".length());
        else if (l.startsWith("public=")) publicKey = l.substring("public=".length());
      }
    } catch (IOException e) {
      throw new StateException("cannot read the agent key " + file + ": " + e);
    }
    if (privateKey == null || publicKey == null)
      throw new StateException("the agent key " + file + " is incomplete");
    KeyPair key;
    try {
      key = new KeyPair(Ed25519.decodePublic(publicKey), Ed25519.decodePrivate(privateKey));
    } catch (IllegalArgumentException e) {
      throw new StateException("the agent key " + file + " is corrupt: " + e.getMessage());
    }
    byte[] probe = "tickmark-agent-key-check".getBytes(StandardCharsets.US_ASCII);
    if (!Ed25519.verify(publicKey, probe, Ed25519.sign(key.getPrivate(), probe))) {
      throw new StateException(
          "the agent key " + file + " is corrupt: its two halves do not match");
    }
    return key;
  }

  /**
   * Writes {@code text} to a 0600 temporary file beside {@code target}, forces it, and moves it
   * over {@code target}.
   */
  static void writeAtomically(Path target, String text) throws IOException {
    Path dir = target.getParent();
    List<FileAttribute<?>> attrs = new ArrayList<>();
    if (POSIX) attrs.add(PosixFilePermissions.asFileAttribute(OWNER_RW));
    Path tmp =
        Files.createTempFile(
            dir, "." + target.getFileName() + "-", ".tmp", attrs.toArray(new FileAttribute<?>[0]));
    try {
      try (FileChannel ch =
          FileChannel.open(tmp, StandardOpenOption.WRITE, StandardOpenOption.TRUNCATE_EXISTING)) {
        ByteBuffer buf = ByteBuffer.wrap(text.getBytes(StandardCharsets.UTF_8));
        while (buf.hasRemaining()) ch.write(buf);
        ch.force(true);
      }
      try {
        Files.move(
            tmp, target, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
      } catch (AtomicMoveNotSupportedException e) {
        Files.move(tmp, target, StandardCopyOption.REPLACE_EXISTING);
      }
      if (POSIX) Files.setPosixFilePermissions(target, OWNER_RW);
    } finally {
      Files.deleteIfExists(tmp);
    }
  }

  private static void releaseQuietly(FileLock lock) {
    try {
      if (lock != null && lock.isValid()) lock.release();
    } catch (IOException ignored) {
      // closing the channel releases it too
    }
  }

  private static void closeQuietly(FileChannel channel) {
    try {
      channel.close();
    } catch (IOException ignored) {
      // nothing left to do
    }
  }
}
