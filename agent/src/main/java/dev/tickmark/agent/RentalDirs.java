package dev.tickmark.agent;

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
 * </pre>
 *
 * Only validated rental ids ({@link Runtime#RENTAL_ID}) reach here, so a folder name never escapes
 * {@code rentals/}.
 */
final class RentalDirs {
  static final String FOLDER = "rentals";
  static final String SCRATCH = "scratch";
  static final String LOG = "output.log";

  private static final Logger log = LoggerFactory.getLogger(RentalDirs.class);
  private static final boolean POSIX =
      FileSystems.getDefault().supportedFileAttributeViews().contains("posix");
  private static final Set<PosixFilePermission> OWNER_RWX =
      PosixFilePermissions.fromString("rwx------");

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

  /**
   * Creates the rental's folder and a fresh, empty scratch folder (an old one is wiped first);
   * returns the scratch.
   */
  Path prepare(String id) throws IOException {
    Path scratch = scratch(id);
    mkdir(root);
    mkdir(rental(id));
    if (Files.exists(scratch, LinkOption.NOFOLLOW_LINKS)) delete(scratch);
    if (POSIX) {
      Files.createDirectory(scratch, PosixFilePermissions.asFileAttribute(OWNER_RWX));
      Files.setPosixFilePermissions(
          scratch, OWNER_RWX); // the umask may have taken bits away; make it exactly 0700
    } else {
      Files.createDirectory(scratch);
    }
    return scratch;
  }

  /**
   * Deletes the rental's scratch folder; logs (never throws) when it cannot. Returns whether it is
   * gone.
   */
  boolean wipe(String id) {
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
   * Wipes the scratch folders a previous run left behind (an agent that crashed or was killed while
   * rentals ran: a scratch folder exists only while its rental runs). {@code cleanUp} is called
   * first for each such rental, to end what may still run of it.
   */
  void wipeLeftovers(java.util.function.Consumer<String> cleanUp) {
    if (!Files.isDirectory(root, LinkOption.NOFOLLOW_LINKS)) return;
    try (DirectoryStream<Path> rentals = Files.newDirectoryStream(root)) {
      for (Path rental : rentals) {
        String id = rental.getFileName().toString();
        if (Runtime.checkRentalId(id) != null) continue;
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
