package dev.tickmark.agent;

import dev.tickmark.agent.snapshot.Snapshots;
import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.FileSystems;
import java.nio.file.FileVisitResult;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.SimpleFileVisitor;
import java.nio.file.attribute.BasicFileAttributes;
import java.nio.file.attribute.PosixFilePermission;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Instant;
import java.util.Set;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The rentals' folders under the state folder:
 *
 * <pre>
 *   &lt;state-dir&gt;/rentals/                     mode 0700
 *   &lt;state-dir&gt;/rentals/&lt;rental id&gt;/         mode 0700
 *   &lt;state-dir&gt;/rentals/&lt;rental id&gt;/output.log   the workload's output when started without a log,
 *                                                 and docker's messages (docker runtime)
 *   &lt;state-dir&gt;/rentals/&lt;rental id&gt;/log-seq    the highest log seq reserved ({@link LogShipper#seqFile})
 *   &lt;state-dir&gt;/rentals/&lt;rental id&gt;/scratch/     the workload's working folder, mode 0700, created empty at the
 *                                                 start and deleted when the rental ends
 *   &lt;state-dir&gt;/rentals/&lt;rental id&gt;/tickmark/    what the agent tells the workload, mode 0755, created empty at
 *                                                 the start and deleted when the rental ends
 *   &lt;state-dir&gt;/rentals/&lt;rental id&gt;/tickmark/notice  the spot notice ({@link #writeNotice}), once preempted
 *   &lt;state-dir&gt;/rentals/&lt;rental id&gt;/kept        when it was stopped with a snapshot: its scratch folder is kept
 *                                                 (not wiped) until archived, or for {@link Snapshots#KEEP}
 * </pre>
 *
 * The notice folder is outside the scratch folder (read-only in the container) so that the agent
 * never writes through a path the workload controls: a workload could replace a folder of its own
 * with a symbolic link to anywhere.
 *
 * <p>Only validated rental ids ({@link Runtime#RENTAL_ID}) reach here, so a folder name never
 * escapes {@code rentals/}.
 */
final class RentalDirs {
  static final String FOLDER = "rentals";
  static final String SCRATCH = "scratch";
  static final String LOG = "output.log";
  static final String NOTICE_FOLDER = "tickmark";
  static final String NOTICE = "notice";
  static final String KEPT = "kept";

  private static final Logger log = LoggerFactory.getLogger(RentalDirs.class);
  private static final boolean POSIX =
      FileSystems.getDefault().supportedFileAttributeViews().contains("posix");
  private static final Set<PosixFilePermission> OWNER_RWX =
      PosixFilePermissions.fromString("rwx------");
  // the notice is no secret, and a container's user may not be the agent's
  private static final Set<PosixFilePermission> ALL_READ_DIR =
      PosixFilePermissions.fromString("rwxr-xr-x");
  private static final Set<PosixFilePermission> ALL_READ_FILE =
      PosixFilePermissions.fromString("rw-r--r--");

  private final Path root;

  RentalDirs(Path stateDir) {
    this.root = stateDir.toAbsolutePath().normalize().resolve(FOLDER);
  }

  Path root() {
    return root;
  }

  Path rental(String id) {
    String why = Runtime.checkRentalId(id);
    if (why != null) throw new IllegalArgumentException(why);
    return root.resolve(id);
  }

  Path scratch(String id) {
    return rental(id).resolve(SCRATCH);
  }

  Path log(String id) {
    return rental(id).resolve(LOG);
  }

  /** The folder of the notice file (mounted read-only into a container). */
  Path noticeFolder(String id) {
    return rental(id).resolve(NOTICE_FOLDER);
  }

  /** The notice file, as the process runtime's workloads see it ({@code TICKMARK_NOTICE_FILE}). */
  Path notice(String id) {
    return noticeFolder(id).resolve(NOTICE);
  }

  /**
   * Creates the rental's folder and fresh, empty scratch and notice folders (old ones are wiped
   * first); returns the scratch.
   */
  Path prepare(String id) throws IOException {
    Path scratch = scratch(id);
    mkdir(root);
    mkdir(rental(id));
    Files.deleteIfExists(rental(id).resolve(KEPT));
    fresh(noticeFolder(id), ALL_READ_DIR);
    fresh(scratch, OWNER_RWX);
    return scratch;
  }

  private static void fresh(Path dir, Set<PosixFilePermission> mode) throws IOException {
    if (Files.exists(dir, LinkOption.NOFOLLOW_LINKS)) delete(dir);
    if (POSIX) {
      Files.createDirectory(dir, PosixFilePermissions.asFileAttribute(mode));
      Files.setPosixFilePermissions(
          dir, mode); // the umask may have taken bits away; make it exactly that
    } else {
      Files.createDirectory(dir);
    }
  }

  /**
   * Writes the rental's notice file atomically: a temporary file in the same folder, renamed over
   * the notice, so that a reader sees the old content or the new, never half of it.
   */
  void writeNotice(String id, String content) throws IOException {
    Path folder = noticeFolder(id);
    if (!Files.isDirectory(folder, LinkOption.NOFOLLOW_LINKS))
      throw new NoSuchFileException(folder.toString(), null, "the rental's notice folder is gone");
    Path tmp = folder.resolve(NOTICE + ".tmp");
    Files.deleteIfExists(tmp);
    if (POSIX) Files.createFile(tmp, PosixFilePermissions.asFileAttribute(ALL_READ_FILE));
    Files.writeString(tmp, content, java.nio.charset.StandardCharsets.UTF_8);
    if (POSIX) Files.setPosixFilePermissions(tmp, ALL_READ_FILE);
    Files.move(
        tmp,
        folder.resolve(NOTICE),
        java.nio.file.StandardCopyOption.ATOMIC_MOVE,
        java.nio.file.StandardCopyOption.REPLACE_EXISTING);
  }

  /**
   * Deletes the rental's scratch folder and its notice folder; logs (never throws) when it cannot.
   * Returns whether the scratch folder is gone.
   */
  boolean wipe(String id) {
    try {
      delete(noticeFolder(id));
    } catch (IOException e) {
      log.warn("rental {}: cannot delete its notice folder: {}", id, e.toString());
    }
    Path scratch = scratch(id);
    IOException last = null;
    for (int attempt = 0;
        attempt < 3;
        attempt++) { // a process that was just killed may still have been writing
      try {
        delete(scratch);
        return true;
      } catch (IOException e) {
        last = e;
      }
    }
    log.error("rental {}: cannot wipe its scratch folder {}: {}", id, scratch, last.toString());
    return false;
  }

  /**
   * Keeps the scratch folder of a rental that ended (stopped with a snapshot): its notice folder is
   * deleted, the scratch folder stays, marked kept since {@code at}. When the mark cannot be
   * written the folder is wiped as usual (the upload then says {@code workspace_gone}). Returns
   * whether it is kept.
   */
  boolean keep(String id, Instant at) {
    try {
      delete(noticeFolder(id));
    } catch (IOException e) {
      log.warn("rental {}: cannot delete its notice folder: {}", id, e.toString());
    }
    try {
      if (!Files.isDirectory(scratch(id), LinkOption.NOFOLLOW_LINKS)) return false;
      StateDir.writeAtomically(rental(id).resolve(KEPT), at + "\n");
      return true;
    } catch (IOException e) {
      log.error("rental {}: cannot keep its scratch folder: {}", id, e.toString());
      wipe(id);
      return false;
    }
  }

  /** The kept scratch folder of a rental, or null when none is kept. */
  Path kept(String id) {
    if (Runtime.checkRentalId(id) != null) return null;
    Path scratch = scratch(id);
    return Files.isRegularFile(rental(id).resolve(KEPT), LinkOption.NOFOLLOW_LINKS)
            && Files.isDirectory(scratch, LinkOption.NOFOLLOW_LINKS)
        ? scratch
        : null;
  }

  /** Deletes the folder of a rental that kept its workspace (archived now, or not to be). */
  void discard(String id) {
    if (Runtime.checkRentalId(id) != null) return;
    wipe(id);
    try {
      delete(rental(id));
    } catch (IOException e) {
      log.warn("rental {}: cannot delete its folder: {}", id, e.toString());
    }
  }

  /** When a rental's workspace was kept, or null when it is not kept. */
  private Instant keptSince(Path rental) {
    try {
      return Instant.parse(Files.readString(rental.resolve(KEPT)).trim());
    } catch (IOException | RuntimeException e) {
      return null;
    }
  }

  /** Deletes the kept workspaces older than {@link Snapshots#KEEP} (never uploaded). */
  void purgeKept(Instant now) {
    if (!Files.isDirectory(root, LinkOption.NOFOLLOW_LINKS)) return;
    try (DirectoryStream<Path> rentals = Files.newDirectoryStream(root)) {
      for (Path rental : rentals) {
        String id = rental.getFileName().toString();
        if (Runtime.checkRentalId(id) != null) continue;
        Instant since = keptSince(rental);
        if (since != null && since.plus(Snapshots.KEEP).isBefore(now)) {
          log.warn(
              "rental {}: its workspace, kept since {} for a snapshot, was never uploaded: deleted",
              id,
              since);
          discard(id);
        }
      }
    } catch (IOException e) {
      log.error("cannot list {}: {}", root, e.toString());
    }
  }

  /**
   * Wipes the scratch folders a previous run left behind (an agent that crashed or was killed while
   * rentals ran: a scratch folder exists only while its rental runs, or while it is {@link #kept}).
   * {@code cleanUp} is called first for each such rental, to end what may still run of it. Kept
   * workspaces stay, unless older than {@link Snapshots#KEEP}.
   */
  void wipeLeftovers(java.util.function.Consumer<String> cleanUp) {
    purgeKept(Instant.now());
    if (!Files.isDirectory(root, LinkOption.NOFOLLOW_LINKS)) return;
    try (DirectoryStream<Path> rentals = Files.newDirectoryStream(root)) {
      for (Path rental : rentals) {
        String id = rental.getFileName().toString();
        if (Runtime.checkRentalId(id) != null) continue;
        if (keptSince(rental) != null) continue; // kept for a snapshot: nothing of it runs
        if (Files.exists(rental.resolve(SCRATCH), LinkOption.NOFOLLOW_LINKS)) {
          log.warn(
              "rental {}: a previous run of the agent left it behind: ending what is left of it, wiping its scratch folder",
              id);
          try {
            cleanUp.accept(id);
          } catch (RuntimeException e) {
            log.warn("rental {}: cleaning up after the previous run: {}", id, e.toString());
          }
          wipe(id);
        }
      }
    } catch (IOException e) {
      log.error("cannot list {}: {}", root, e.toString());
    }
  }

  private static void mkdir(Path dir) throws IOException {
    if (Files.isDirectory(dir, LinkOption.NOFOLLOW_LINKS)) return;
    if (POSIX) Files.createDirectories(dir, PosixFilePermissions.asFileAttribute(OWNER_RWX));
    else Files.createDirectories(dir);
  }

  /**
   * Deletes {@code path} and everything under it. Symbolic links are deleted, never followed (a
   * workload may leave a link to anywhere); folders the workload made unreadable or unwritable are
   * given back to the owner first.
   */
  static void delete(Path path) throws IOException {
    if (!Files.exists(path, LinkOption.NOFOLLOW_LINKS)) return;
    Files.walkFileTree(
        path,
        new SimpleFileVisitor<>() {
          @Override
          public FileVisitResult preVisitDirectory(Path dir, BasicFileAttributes attrs)
              throws IOException {
            if (POSIX) {
              try {
                Files.setPosixFilePermissions(dir, OWNER_RWX);
              } catch (IOException ignored) {
                // not ours to change: the delete below says what went wrong
              }
            }
            return FileVisitResult.CONTINUE;
          }

          @Override
          public FileVisitResult visitFile(Path file, BasicFileAttributes attrs)
              throws IOException {
            deleteIfThere(file);
            return FileVisitResult.CONTINUE;
          }

          @Override
          public FileVisitResult visitFileFailed(Path file, IOException exc) throws IOException {
            if (exc instanceof NoSuchFileException) return FileVisitResult.CONTINUE;
            // e.g. a folder we could not open: try to remove it as it is; a non-empty one fails
            // below with a clear error
            deleteIfThere(file);
            return FileVisitResult.CONTINUE;
          }

          @Override
          public FileVisitResult postVisitDirectory(Path dir, IOException exc) throws IOException {
            if (exc != null && !(exc instanceof NoSuchFileException)) throw exc;
            deleteIfThere(dir);
            return FileVisitResult.CONTINUE;
          }
        });
  }

  private static void deleteIfThere(Path p) throws IOException {
    Files.deleteIfExists(p);
  }
}
