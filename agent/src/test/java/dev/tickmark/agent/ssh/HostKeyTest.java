package dev.tickmark.agent.ssh;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class HostKeyTest {
  @TempDir Path dir;

  @Test
  void createdOnceAsAnOwnerOnlyOpenSshFileAndKeptAcrossRestarts() throws Exception {
    String first = HostKey.openSshLine(HostKey.loadOrCreate(dir).getPublic());
    Path file = dir.resolve(HostKey.FILE);
    assertTrue(Files.readString(file).startsWith("-----BEGIN OPENSSH PRIVATE KEY-----"));
    assertEquals("rw-------", PosixFilePermissions.toString(Files.getPosixFilePermissions(file)));
    assertTrue(first.matches("ssh-ed25519 AAAA[A-Za-z0-9+/=]+"), first);
    assertEquals(first, HostKey.openSshLine(HostKey.loadOrCreate(dir).getPublic()), "the same key");
    try (var files = Files.list(dir)) {
      assertEquals(1, files.count(), "no temporary file left");
    }
  }
}
