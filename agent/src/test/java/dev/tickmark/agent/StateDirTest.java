package dev.tickmark.agent;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.KeyPair;
import java.util.List;
import java.util.Optional;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class StateDirTest {
  @TempDir Path tmp;

  private static String mode(Path p) throws Exception {
    return PosixFilePermissions.toString(Files.getPosixFilePermissions(p));
  }

  @Test
  void keyAndCredentialSurviveARestartWithOwnerOnlyModes() throws Exception {
    Path dir = tmp.resolve("state");
    KeyPair first;
    try (StateDir s = StateDir.open(dir)) {
      first = s.key();
      assertEquals(Optional.empty(), s.credential());
      s.storeCredential("tmkhost_host_1_secret");
    }
    try (StateDir s = StateDir.open(dir)) {
      assertArrayEquals(first.getPublic().getEncoded(), s.key().getPublic().getEncoded());
      assertArrayEquals(first.getPrivate().getEncoded(), s.key().getPrivate().getEncoded());
      assertEquals(Optional.of("tmkhost_host_1_secret"), s.credential());
    }
    assertEquals("rwx------", mode(dir));
    assertEquals("rw-------", mode(dir.resolve("agent.key")));
    assertEquals("rw-------", mode(dir.resolve("host-credential")));
  }

  @Test
  void replacingTheCredentialIsAtomicAndLeavesNoTemporaryFile() throws Exception {
    try (StateDir s = StateDir.open(tmp)) {
      s.storeCredential("tmkhost_a_1");
      s.storeCredential("tmkhost_a_2");
      assertEquals(Optional.of("tmkhost_a_2"), s.credential());
    }
    try (Stream<Path> files = Files.list(tmp)) {
      assertEquals(
          List.of("agent.key", "agent.lock", "host-credential"),
          files.map(p -> p.getFileName().toString()).sorted().toList());
    }
  }

  @Test
  void aSecondAgentCannotUseTheSameFolder() throws Exception {
    StateDir first = StateDir.open(tmp);
    StateDir.StateException e =
        assertThrows(StateDir.StateException.class, () -> StateDir.open(tmp));
    assertTrue(e.getMessage().contains("already running"), e.getMessage());
    first.close();
    StateDir.open(tmp).close(); // free again once the first one closed
  }

  @Test
  void aCorruptKeyIsReportedNotReplaced() throws Exception {
    Files.writeString(tmp.resolve("agent.key"), "private=AAAA\npublic=BBBB\n");
    StateDir.StateException e =
        assertThrows(StateDir.StateException.class, () -> StateDir.open(tmp));
    assertTrue(e.getMessage().contains("corrupt"), e.getMessage());
    assertEquals("private=AAAA\npublic=BBBB\n", Files.readString(tmp.resolve("agent.key")));
  }

  @Test
  void mismatchedKeyHalvesAreCorrupt() throws Exception {
    StateDir.open(tmp.resolve("a")).close();
    StateDir.open(tmp.resolve("b")).close();
    String a = Files.readString(tmp.resolve("a/agent.key"));
    String b = Files.readString(tmp.resolve("b/agent.key"));
    String mixed =
        a.lines().filter(l -> l.startsWith("private=")).findFirst().orElseThrow()
            + "\n"
            + b.lines().filter(l -> l.startsWith("public=")).findFirst().orElseThrow()
            + "\n";
    Files.writeString(tmp.resolve("a/agent.key"), mixed);
    assertThrows(StateDir.StateException.class, () -> StateDir.open(tmp.resolve("a")));
  }
}
