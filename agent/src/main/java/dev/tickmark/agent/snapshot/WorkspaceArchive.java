package dev.tickmark.agent.snapshot;

import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.BasicFileAttributeView;
import java.nio.file.attribute.BasicFileAttributes;
import java.nio.file.attribute.FileTime;
import java.util.ArrayList;
import java.util.List;
import org.apache.commons.compress.archivers.tar.TarArchiveEntry;
import org.apache.commons.compress.archivers.tar.TarArchiveInputStream;
import org.apache.commons.compress.archivers.tar.TarArchiveOutputStream;
import org.apache.commons.compress.archivers.tar.TarConstants;
import org.apache.commons.compress.compressors.zstandard.ZstdCompressorInputStream;
import org.apache.commons.compress.compressors.zstandard.ZstdCompressorOutputStream;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A workspace folder as a tar archive (POSIX/PAX headers: long names, big sizes) compressed with
 * zstd, written and read as streams.
 *
 * <p>Written: regular files, folders and symbolic links (as links, never followed), with their
 * permission bits and modification times; other kinds (devices, fifos, sockets) are skipped with a
 * log line. Owners are not restored: the runtime gives the unpacked files to the workload's user.
 *
 * <p>Unpacked into an empty folder, refusing (with {@link Refused}) what a hostile archive could
 * do: absolute names, {@code ..}, an entry written through a symbolic link or over an earlier
 * entry, hard links, devices, and more bytes than the given limit.
 */
public final class WorkspaceArchive {
  /** The file name of an archive in a snapshot's folder. */
  public static final String FILE = "archive.tar.zst";

  /**
   * zstd's default level: fast enough not to hold the upload back, and a good ratio on the text and
   * code a workspace mostly holds (model weights do not compress at any level).
   */
  static final int LEVEL = 3;

  /**
   * What an unpacked workspace may grow to, at most {@value}× its archive: zstd reaches ratios far
   * beyond this only on runs of one byte, which a workspace worth keeping seldom is.
   */
  static final long MAX_RATIO = 200;

  /** The limit of a small archive (so a workspace of a few sparse files still unpacks). */
  static final long MIN_LIMIT = 1L << 30;

  /** Never more than this, whatever the archive's size. */
  static final long HARD_CAP = 1L << 40;

  /**
   * Each entry costs a tar header at least: counted against the limit, so empty files are not free.
   */
  static final long ENTRY_COST = 512;

  private static final Logger log = LoggerFactory.getLogger(WorkspaceArchive.class);

  private WorkspaceArchive() {}

  /** An archive that must not be unpacked; the message says why (fit for a reason). */
  public static final class Refused extends IOException {
    Refused(String message) {
      super(message);
    }
  }

  /** What {@link #write} put in the archive. */
  public record Written(long entries, long skipped) {}

  /** The most bytes an archive of {@code sizeBytes} may unpack to. */
  public static long limitFor(long sizeBytes) {
    long byRatio = sizeBytes > HARD_CAP / MAX_RATIO ? HARD_CAP : Math.max(sizeBytes, 0) * MAX_RATIO;
    return Math.min(HARD_CAP, Math.max(MIN_LIMIT, byRatio));
  }

  /** Writes {@code workspace}'s content (not the folder itself) to {@code archive}. */
  public static Written write(Path workspace, Path archive) throws IOException {
    Path root = workspace.toAbsolutePath().normalize();
    if (!Files.isDirectory(root, LinkOption.NOFOLLOW_LINKS))
      throw new NoSuchFileException(root.toString(), null, "not a folder");
    long[] counts = new long[2];
    try (OutputStream file =
            new BufferedOutputStream(
                Files.newOutputStream(
                    archive,
                    StandardOpenOption.CREATE,
                    StandardOpenOption.TRUNCATE_EXISTING,
                    StandardOpenOption.WRITE),
                1 << 16);
        ZstdCompressorOutputStream zstd = new ZstdCompressorOutputStream(file, LEVEL);
        TarArchiveOutputStream tar = new TarArchiveOutputStream(zstd)) {
      tar.setLongFileMode(TarArchiveOutputStream.LONGFILE_POSIX);
      tar.setBigNumberMode(TarArchiveOutputStream.BIGNUMBER_POSIX);
      tar.setAddPaxHeadersForNonAsciiNames(true);
      add(tar, root, "", counts);
      tar.finish();
    }
    return new Written(counts[0], counts[1]);
  }

  /**
   * Adds the content of folder {@code dir} (named {@code prefix} in the archive) to {@code tar},
   * depth first. Nothing is followed: a link's attributes are the link's own. What the agent owns
   * but cannot read (a workload may take its own read bits away) is given the owner's read (and,
   * for a folder, search) bit first; the archive keeps the mode it had. The workspace is deleted
   * once archived, so the change is never seen.
   */
  private static void add(TarArchiveOutputStream tar, Path dir, String prefix, long[] counts)
      throws IOException {
    List<Path> children = new ArrayList<>();
    try (DirectoryStream<Path> list = Files.newDirectoryStream(dir)) {
      list.forEach(children::add);
    }
    children.sort(null); // a stable order: the same workspace makes the same archive
    for (Path child : children) {
      String name = prefix + child.getFileName();
      BasicFileAttributes attrs =
          Files.readAttributes(child, BasicFileAttributes.class, LinkOption.NOFOLLOW_LINKS);
      if (attrs.isSymbolicLink()) {
        TarArchiveEntry e = new TarArchiveEntry(name, TarConstants.LF_SYMLINK);
        e.setLinkName(Files.readSymbolicLink(child).toString());
        e.setModTime(attrs.lastModifiedTime());
        tar.putArchiveEntry(e);
        tar.closeArchiveEntry();
      } else if (attrs.isDirectory()) {
        int mode = mode(child);
        TarArchiveEntry e = new TarArchiveEntry(name + "/", TarConstants.LF_DIR);
        e.setMode(TarArchiveEntry.DEFAULT_DIR_MODE & ~07777 | mode);
        e.setModTime(attrs.lastModifiedTime());
        tar.putArchiveEntry(e);
        tar.closeArchiveEntry();
        if ((mode & 0500) != 0500) openUp(child, mode | 0700);
        add(tar, child, name + "/", counts);
      } else if (attrs.isRegularFile()) {
        int mode = mode(child);
        if ((mode & 0400) == 0) openUp(child, mode | 0600);
        TarArchiveEntry e = new TarArchiveEntry(name, TarConstants.LF_NORMAL);
        e.setMode(TarArchiveEntry.DEFAULT_FILE_MODE & ~07777 | mode);
        e.setModTime(attrs.lastModifiedTime());
        e.setSize(attrs.size());
        tar.putArchiveEntry(e);
        try (InputStream in = Files.newInputStream(child, LinkOption.NOFOLLOW_LINKS)) {
          long copied = copy(in, tar, attrs.size());
          if (copied != attrs.size())
            throw new IOException(name + " changed while it was archived");
        }
        tar.closeArchiveEntry();
      } else {
        log.info("archive: {} skipped (not a file, folder or link)", name);
        counts[1]++;
        continue;
      }
      counts[0]++;
    }
  }

  /**
   * Gives a file or folder (not a link: checked by the caller) the mode that lets the agent read
   * it.
   */
  private static void openUp(Path p, int mode) throws IOException {
    // chmod, not the no-follow variant (which opens the file, and cannot without read access): p
    // was just seen not to be a link, and nothing of the workload runs any more to swap it
    Files.setPosixFilePermissions(p, permissions(mode));
  }

  private static java.util.Set<java.nio.file.attribute.PosixFilePermission> permissions(int mode) {
    var out = java.util.EnumSet.noneOf(java.nio.file.attribute.PosixFilePermission.class);
    var all = java.nio.file.attribute.PosixFilePermission.values(); // OWNER_READ … OTHERS_EXECUTE
    for (int i = 0; i < 9; i++) if ((mode & (0400 >> i)) != 0) out.add(all[i]);
    return out;
  }

  /**
   * Unpacks {@code archive} into {@code into}, an existing empty folder, writing at most {@code
   * limit} bytes (file contents plus {@link #ENTRY_COST} per entry). Throws {@link Refused} for an
   * archive that tries anything but plain files, folders and links inside {@code into}; what was
   * unpacked before then stays (the caller wipes the folder).
   */
  public static void unpack(Path archive, Path into, long limit) throws IOException {
    Path root = into.toAbsolutePath().normalize();
    BasicFileAttributes rootAttrs =
        Files.readAttributes(root, BasicFileAttributes.class, LinkOption.NOFOLLOW_LINKS);
    if (!rootAttrs.isDirectory()) throw new IOException(root + " is not a folder");
    try (var listing = Files.list(root)) {
      if (listing.findAny().isPresent()) throw new IOException(root + " is not empty");
    }
    record Dir(Path path, int mode, FileTime mtime) {}
    List<Dir> dirs = new ArrayList<>();
    long budget = limit;
    try (InputStream file = new BufferedInputStream(Files.newInputStream(archive), 1 << 16);
        ZstdCompressorInputStream zstd = new ZstdCompressorInputStream(file);
        TarArchiveInputStream tar = new TarArchiveInputStream(zstd)) {
      for (TarArchiveEntry e = tar.getNextEntry(); e != null; e = tar.getNextEntry()) {
        List<String> parts = parts(e.getName());
        if (parts.isEmpty()) continue; // "./": the workspace itself, whose mode the runtime sets
        budget -= ENTRY_COST;
        if (budget < 0) throw new Refused("the archive unpacks to more than " + limit + " bytes");
        Path target = parentsOf(root, parts);
        if (Files.exists(target, LinkOption.NOFOLLOW_LINKS)) {
          boolean dirAgain =
              e.isDirectory()
                  && Files.readAttributes(
                          target, BasicFileAttributes.class, LinkOption.NOFOLLOW_LINKS)
                      .isDirectory();
          if (!dirAgain) throw new Refused("entry " + e.getName() + " appears twice");
        }
        byte flag = e.getLinkFlag();
        if (e.isDirectory() && flag == TarConstants.LF_DIR) {
          if (!Files.exists(target, LinkOption.NOFOLLOW_LINKS)) Files.createDirectory(target);
          dirs.add(new Dir(target, e.getMode() & 01777, e.getLastModifiedTime()));
        } else if (flag == TarConstants.LF_SYMLINK) {
          String link = e.getLinkName();
          if (link == null || link.isEmpty() || link.indexOf('\0') >= 0)
            throw new Refused("entry " + e.getName() + " is a link to nothing");
          // the link may point anywhere: nothing here ever writes or reads through it
          Files.createSymbolicLink(target, Path.of(link));
          try {
            setTime(target, e.getLastModifiedTime());
          } catch (IOException | UnsupportedOperationException ignored) {
            // a link's own time matters to nobody; not every system can set it
          }
        } else if (flag == TarConstants.LF_NORMAL
            || flag == TarConstants.LF_OLDNORM
            || flag == TarConstants.LF_CONTIG) {
          long size = e.getSize();
          budget -= size;
          if (size < 0 || budget < 0)
            throw new Refused("the archive unpacks to more than " + limit + " bytes");
          // CREATE_NEW and NOFOLLOW_LINKS: never through a link, never over anything
          try (OutputStream out =
              Files.newOutputStream(
                  target,
                  StandardOpenOption.CREATE_NEW,
                  StandardOpenOption.WRITE,
                  LinkOption.NOFOLLOW_LINKS)) {
            if (copy(tar, out, size) != size)
              throw new Refused("entry " + e.getName() + " is truncated");
          }
          // the time first: with NOFOLLOW_LINKS both open the file, which its mode may forbid after
          setTime(target, e.getLastModifiedTime());
          // no set-user/group-id bits: the workload's user gets the files, not their old owner
          Files.setAttribute(target, "unix:mode", e.getMode() & 01777, LinkOption.NOFOLLOW_LINKS);
        } else if (e.isLink()) {
          throw new Refused("entry " + e.getName() + " is a hard link");
        } else {
          throw new Refused(
              "entry " + e.getName() + " is of an unsupported kind ('" + (char) flag + "')");
        }
      }
    }
    // folders last, deepest first: a read-only folder must still be written into, and writing into
    // it changes its time
    for (int i = dirs.size() - 1; i >= 0; i--) {
      Dir d = dirs.get(i);
      setTime(d.path(), d.mtime());
      Files.setAttribute(d.path(), "unix:mode", d.mode(), LinkOption.NOFOLLOW_LINKS);
    }
  }

  /**
   * The checked parts of an entry name: relative, no {@code ..}, no NUL; {@code .} and empty parts
   * dropped.
   */
  static List<String> parts(String name) throws Refused {
    if (name == null || name.indexOf('\0') >= 0) throw new Refused("an entry has no usable name");
    if (name.startsWith("/")) throw new Refused("entry " + name + " has an absolute name");
    List<String> parts = new ArrayList<>();
    for (String p : name.split("/")) {
      if (p.isEmpty() || p.equals(".")) continue;
      if (p.equals("..")) throw new Refused("entry " + name + " climbs out with ..");
      parts.add(p);
    }
    return parts;
  }

  /**
   * The target path of an entry, with every folder above it inside {@code root} checked (without
   * following links) to be a real folder, created where missing.
   */
  private static Path parentsOf(Path root, List<String> parts) throws IOException {
    Path p = root;
    for (int i = 0; i < parts.size() - 1; i++) {
      p = p.resolve(parts.get(i));
      BasicFileAttributes a;
      try {
        a = Files.readAttributes(p, BasicFileAttributes.class, LinkOption.NOFOLLOW_LINKS);
      } catch (NoSuchFileException missing) {
        Files.createDirectory(p); // an archive need not list every folder
        continue;
      }
      if (a.isSymbolicLink())
        throw new Refused(
            "entry " + String.join("/", parts) + " would be written through a symbolic link");
      if (!a.isDirectory())
        throw new Refused("entry " + String.join("/", parts) + " is below something not a folder");
    }
    Path target = p.resolve(parts.get(parts.size() - 1));
    if (!target.normalize().startsWith(root)) // defence in depth: parts() already ensures it
    throw new Refused("entry " + String.join("/", parts) + " is outside the workspace");
    return target;
  }

  private static int mode(Path p) throws IOException {
    return ((Integer) Files.getAttribute(p, "unix:mode", LinkOption.NOFOLLOW_LINKS)) & 07777;
  }

  private static void setTime(Path p, FileTime mtime) throws IOException {
    if (mtime == null) return;
    Files.getFileAttributeView(p, BasicFileAttributeView.class, LinkOption.NOFOLLOW_LINKS)
        .setTimes(mtime, null, null);
  }

  /** Copies at most {@code max} bytes; returns how many. */
  private static long copy(InputStream in, OutputStream out, long max) throws IOException {
    byte[] buf = new byte[1 << 16];
    long done = 0;
    while (done < max) {
      int n = in.read(buf, 0, (int) Math.min(buf.length, max - done));
      if (n < 0) break;
      out.write(buf, 0, n);
      done += n;
    }
    return done;
  }
}
