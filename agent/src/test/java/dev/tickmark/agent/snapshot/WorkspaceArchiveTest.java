package dev.tickmark.agent.snapshot;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Random;
import org.apache.commons.compress.archivers.tar.TarArchiveEntry;
import org.apache.commons.compress.archivers.tar.TarArchiveOutputStream;
import org.apache.commons.compress.archivers.tar.TarConstants;
import org.apache.commons.compress.compressors.zstandard.ZstdCompressorOutputStream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class WorkspaceArchiveTest {
  @TempDir Path tmp;

  private Path dir(String name) throws IOException {
    return Files.createDirectories(tmp.resolve(name));
  }

  @Test
  void roundTripKeepsFilesFoldersLinksModesAndTimes() throws Exception {
    Path ws = dir("ws");
    Files.createDirectories(ws.resolve("a/b/c"));
    Files.createDirectories(ws.resolve("empty"));
    Files.writeString(ws.resolve("a/b/c/deep.txt"), "deep");
    Files.writeString(ws.resolve("run.sh"), "#!/bin/sh\necho hi\n");
    Files.setPosixFilePermissions(
        ws.resolve("run.sh"), PosixFilePermissions.fromString("rwxr-x---"));
    Files.setPosixFilePermissions(ws.resolve("a/b"), PosixFilePermissions.fromString("r-xr-xr-x"));
    byte[] big = new byte[9 * 1024 * 1024 + 17]; // several MiB, more than two chunks' worth
    new Random(42).nextBytes(big);
    Files.write(ws.resolve("a/big.bin"), big);
    Files.createSymbolicLink(ws.resolve("link"), Path.of("a/b/c/deep.txt"));
    Files.createSymbolicLink(ws.resolve("outside"), Path.of("/etc/hostname")); // kept as a link
    FileTime old = FileTime.fromMillis(1_600_000_000_000L);
    Files.setLastModifiedTime(ws.resolve("a/big.bin"), old);
    Files.setLastModifiedTime(ws.resolve("empty"), old);
    String longName = "x".repeat(120) + "/" + "y".repeat(150) + ".txt"; // beyond ustar's 100
    Files.createDirectories(ws.resolve(longName).getParent());
    Files.writeString(ws.resolve(longName), "long");

    Path archive = tmp.resolve("a.tar.zst");
    WorkspaceArchive.Written w = WorkspaceArchive.write(ws, archive);
    assertEquals(0, w.skipped());
    assertTrue(Files.size(archive) < big.length + 64 * 1024);

    Path out = dir("out");
    WorkspaceArchive.unpack(archive, out, WorkspaceArchive.limitFor(Files.size(archive)));
    assertEquals("deep", Files.readString(out.resolve("a/b/c/deep.txt")));
    assertArrayEquals(big, Files.readAllBytes(out.resolve("a/big.bin")));
    assertEquals("long", Files.readString(out.resolve(longName)));
    assertTrue(Files.isDirectory(out.resolve("empty")));
    try (var l = Files.list(out.resolve("empty"))) {
      assertEquals(0, l.count());
    }
    assertTrue(Files.isSymbolicLink(out.resolve("link")));
    assertEquals(Path.of("a/b/c/deep.txt"), Files.readSymbolicLink(out.resolve("link")));
    assertEquals(Path.of("/etc/hostname"), Files.readSymbolicLink(out.resolve("outside")));
    assertEquals(
        "rwxr-x---",
        PosixFilePermissions.toString(Files.getPosixFilePermissions(out.resolve("run.sh"))));
    assertEquals(
        "r-xr-xr-x",
        PosixFilePermissions.toString(Files.getPosixFilePermissions(out.resolve("a/b"))));
    assertEquals(old, Files.getLastModifiedTime(out.resolve("a/big.bin")));
    assertEquals(old, Files.getLastModifiedTime(out.resolve("empty")));
    Files.setPosixFilePermissions(out.resolve("a/b"), PosixFilePermissions.fromString("rwx------"));
    Files.setPosixFilePermissions(ws.resolve("a/b"), PosixFilePermissions.fromString("rwx------"));
  }

  /** A workload may take its own read bits away: archived all the same, with the modes it set. */
  @Test
  void archivesWhatTheWorkloadMadeUnreadableAndKeepsItsModes() throws Exception {
    Path ws = dir("ws");
    Files.createDirectories(ws.resolve("closed"));
    Files.writeString(ws.resolve("closed/inside"), "inside");
    Files.writeString(ws.resolve("secret"), "secret");
    Files.setPosixFilePermissions(
        ws.resolve("secret"), PosixFilePermissions.fromString("---------"));
    Files.setPosixFilePermissions(
        ws.resolve("closed"), PosixFilePermissions.fromString("-w-------"));
    Path archive = tmp.resolve("a.tar.zst");
    WorkspaceArchive.write(ws, archive);
    Path out = dir("out");
    WorkspaceArchive.unpack(archive, out, 1 << 20);
    assertEquals(
        "---------",
        PosixFilePermissions.toString(Files.getPosixFilePermissions(out.resolve("secret"))));
    assertEquals(
        "-w-------",
        PosixFilePermissions.toString(Files.getPosixFilePermissions(out.resolve("closed"))));
    Files.setPosixFilePermissions(
        out.resolve("closed"), PosixFilePermissions.fromString("rwx------"));
    Files.setPosixFilePermissions(
        out.resolve("secret"), PosixFilePermissions.fromString("rw-------"));
    assertEquals("inside", Files.readString(out.resolve("closed/inside")));
    assertEquals("secret", Files.readString(out.resolve("secret")));
    Files.setPosixFilePermissions(
        ws.resolve("closed"), PosixFilePermissions.fromString("rwx------"));
  }

  @Test
  void skipsWhatIsNotAFileFolderOrLink() throws Exception {
    Path ws = dir("ws");
    Files.writeString(ws.resolve("f"), "f");
    Process p = new ProcessBuilder("mkfifo", ws.resolve("fifo").toString()).start();
    assertEquals(0, p.waitFor());
    Path archive = tmp.resolve("a.tar.zst");
    WorkspaceArchive.Written w = WorkspaceArchive.write(ws, archive);
    assertEquals(1, w.skipped());
    Path out = dir("out");
    WorkspaceArchive.unpack(archive, out, 1 << 20);
    assertTrue(Files.exists(out.resolve("f")));
    assertFalse(Files.exists(out.resolve("fifo"), LinkOption.NOFOLLOW_LINKS));
  }

  /** Writes a tar.zst by hand, as a hostile archive would be. */
  private interface Entries {
    void write(TarArchiveOutputStream tar) throws IOException;
  }

  private Path hostile(Entries entries) throws IOException {
    Path archive = tmp.resolve("hostile.tar.zst");
    try (OutputStream f = Files.newOutputStream(archive);
        ZstdCompressorOutputStream z = new ZstdCompressorOutputStream(f);
        TarArchiveOutputStream tar = new TarArchiveOutputStream(z)) {
      tar.setLongFileMode(TarArchiveOutputStream.LONGFILE_POSIX);
      entries.write(tar);
      tar.finish();
    }
    return archive;
  }

  private static void file(TarArchiveOutputStream tar, String name, String content)
      throws IOException {
    byte[] bytes = content.getBytes(StandardCharsets.UTF_8);
    TarArchiveEntry e = new TarArchiveEntry(name, TarConstants.LF_NORMAL, true);
    e.setSize(bytes.length);
    tar.putArchiveEntry(e);
    tar.write(bytes);
    tar.closeArchiveEntry();
  }

  private static void link(TarArchiveOutputStream tar, String name, String target, byte flag)
      throws IOException {
    TarArchiveEntry e = new TarArchiveEntry(name, flag, true);
    e.setLinkName(target);
    tar.putArchiveEntry(e);
    tar.closeArchiveEntry();
  }

  private void assertRefused(Path archive, String why) throws IOException {
    Path out = Files.createDirectories(tmp.resolve("out-" + System.nanoTime()));
    WorkspaceArchive.Refused r =
        assertThrows(
            WorkspaceArchive.Refused.class, () -> WorkspaceArchive.unpack(archive, out, 1 << 20));
    assertTrue(r.getMessage().contains(why), r.getMessage());
  }

  @Test
  void refusesDotDot() throws Exception {
    Path outside = tmp.resolve("x");
    assertRefused(hostile(t -> file(t, "../x", "escaped")), "..");
    assertRefused(hostile(t -> file(t, "a/../../x", "escaped")), "..");
    assertFalse(Files.exists(outside));
  }

  @Test
  void refusesAbsoluteNames() throws Exception {
    Path target = tmp.resolve("abs-target");
    assertRefused(hostile(t -> file(t, target.toString(), "escaped")), "absolute");
    assertFalse(Files.exists(target));
  }

  @Test
  void refusesWritingThroughASymbolicLink() throws Exception {
    Path elsewhere = dir("elsewhere");
    assertRefused(
        hostile(
            t -> {
              link(t, "l", elsewhere.toString(), TarConstants.LF_SYMLINK);
              file(t, "l/planted", "gotcha");
            }),
        "symbolic link");
    assertFalse(Files.exists(elsewhere.resolve("planted")));
    // nor over the link itself, which would write where it points
    Path victim = tmp.resolve("victim");
    Files.writeString(victim, "safe");
    assertRefused(
        hostile(
            t -> {
              link(t, "v", victim.toString(), TarConstants.LF_SYMLINK);
              file(t, "v", "gotcha");
            }),
        "twice");
    assertEquals("safe", Files.readString(victim));
  }

  @Test
  void refusesHardLinksAndDevices() throws Exception {
    Path victim = tmp.resolve("victim");
    Files.writeString(victim, "safe");
    assertRefused(hostile(t -> link(t, "h", victim.toString(), TarConstants.LF_LINK)), "hard link");
    assertRefused(
        hostile(
            t -> {
              TarArchiveEntry e = new TarArchiveEntry("dev", TarConstants.LF_CHR, true);
              t.putArchiveEntry(e);
              t.closeArchiveEntry();
            }),
        "unsupported");
  }

  @Test
  void refusesMoreThanTheLimit() throws Exception {
    Path archive = hostile(t -> file(t, "zeros", "0".repeat(1 << 20)));
    Path out = dir("out");
    WorkspaceArchive.Refused r =
        assertThrows(
            WorkspaceArchive.Refused.class,
            () -> WorkspaceArchive.unpack(archive, out, 512 * 1024));
    assertTrue(r.getMessage().contains("more than"), r.getMessage());
    assertFalse(Files.exists(out.resolve("zeros")));
    assertEquals(WorkspaceArchive.MIN_LIMIT, WorkspaceArchive.limitFor(10));
    assertEquals(
        100L * 1024 * 1024 * WorkspaceArchive.MAX_RATIO,
        WorkspaceArchive.limitFor(100L * 1024 * 1024));
    assertEquals(WorkspaceArchive.HARD_CAP, WorkspaceArchive.limitFor(Long.MAX_VALUE / 2));
  }

  @Test
  void unpacksOnlyIntoAnEmptyFolder() throws Exception {
    Path archive = hostile(t -> file(t, "f", "f"));
    Path out = dir("out");
    Files.writeString(out.resolve("already"), "x");
    assertThrows(IOException.class, () -> WorkspaceArchive.unpack(archive, out, 1 << 20));
  }
}
