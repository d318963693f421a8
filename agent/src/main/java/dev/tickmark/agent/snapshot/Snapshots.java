package dev.tickmark.agent.snapshot;

import java.io.IOException;
import java.net.http.HttpClient;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.DirectoryStream;
import java.nio.file.FileSystems;
import java.nio.file.FileVisitResult;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.SimpleFileVisitor;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.BasicFileAttributes;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.time.Instant;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The agent's snapshots (docs/snapshots.md): archives kept workspaces and uploads them, resumes
 * uploads, and downloads snapshots to restore.
 *
 * <pre>
 *   &lt;state-dir&gt;/snapshots/                             mode 0700
 *   &lt;state-dir&gt;/snapshots/&lt;snapshot id&gt;/               mode 0700, deleted once uploaded (or refused)
 *   &lt;state-dir&gt;/snapshots/&lt;snapshot id&gt;/archive.tar.zst  the workspace ({@link WorkspaceArchive})
 *   &lt;state-dir&gt;/snapshots/&lt;snapshot id&gt;/manifest.json    its {@link Manifest}, written last
 *   &lt;state-dir&gt;/restores/&lt;rental id&gt;.tar.zst              a snapshot being restored, until unpacked
 * </pre>
 *
 * A folder with a manifest is a complete archive: an agent restarted mid-upload resumes it at the
 * next {@code upload_snapshot}; one without (archiving was cut short) is archived again from the
 * kept workspace. Thread-safe: uploads and restores run on threads of their own.
 */
public final class Snapshots implements AutoCloseable {
  public static final String FOLDER = "snapshots";
  public static final String RESTORES = "restores";

  /** Kept workspaces and archives never uploaded are deleted after this long. */
  public static final Duration KEEP = Duration.ofDays(1);

  /** The {@code failed} reasons this agent sends. */
  public static final String WORKSPACE_GONE = "workspace_gone";

  public static final String ARCHIVE_FAILED = "archive_failed";
  public static final String ARCHIVE_DAMAGED = "archive_damaged";

  static final Pattern ID = Pattern.compile("[A-Za-z0-9_-]{1,128}");

  private static final Logger log = LoggerFactory.getLogger(Snapshots.class);
  private static final boolean POSIX =
      FileSystems.getDefault().supportedFileAttributeViews().contains("posix");

  /** The rentals' kept workspaces (the agent's rental folders). */
  public interface Workspaces {
    /** The kept workspace of {@code rentalId}, or null when none is kept. */
    Path kept(String rentalId);

    /** Deletes what is kept of {@code rentalId} (once archived, or when it cannot be). */
    void discard(String rentalId);
  }

  private final Path folder;
  private final Path restores;
  private final Workspaces workspaces;
  private final SnapshotUploader uploader;
  private final SnapshotRestorer restorer;
  private final ExecutorService threads;
  private final Map<String, Boolean> underWay = new ConcurrentHashMap<>();
  private volatile boolean closed;

  public Snapshots(
      Path stateDir,
      Workspaces workspaces,
      HttpClient http,
      EngineHttp.Endpoint endpoint,
      EngineHttp.Retry retry) {
    Path state = stateDir.toAbsolutePath().normalize();
    this.folder = state.resolve(FOLDER);
    this.restores = state.resolve(RESTORES);
    this.workspaces = workspaces;
    EngineHttp engine = new EngineHttp(http, endpoint, retry);
    this.uploader = new SnapshotUploader(engine);
    this.restorer = new SnapshotRestorer(engine);
    this.threads =
        Executors.newCachedThreadPool(
            r -> {
              Thread t = new Thread(r, "tickmark-agent-snapshots");
              t.setDaemon(true);
              return t;
            });
    deleteQuietly(restores); // restores a previous run left half done: their rentals failed
  }

  /** The folder of a snapshot. */
  Path folder(String snapshotId) {
    return folder.resolve(snapshotId);
  }

  /** Whether an upload of {@code snapshotId} is under way (tests). */
  public boolean uploading(String snapshotId) {
    return underWay.containsKey(snapshotId);
  }

  /**
   * {@code upload_snapshot}: resumes the upload of an archive already made, or archives the kept
   * workspace and uploads it, or tells the engine the workspace is gone. Ignored while an upload of
   * the snapshot is under way. Returns at once.
   */
  public void upload(String rentalId, String snapshotId) {
    if (rentalId == null
        || snapshotId == null
        || !ID.matcher(rentalId).matches()
        || !ID.matcher(snapshotId).matches()) {
      log.warn("upload_snapshot with an invalid rental or snapshot id: ignored");
      return;
    }
    if (closed) return;
    if (underWay.putIfAbsent(snapshotId, Boolean.TRUE) != null) {
      log.info("snapshot {}: upload_snapshot while its upload is under way: ignored", snapshotId);
      return;
    }
    try {
      threads.execute(
          () -> {
            try {
              run(rentalId, snapshotId);
            } catch (InterruptedException e) {
              log.info(
                  "snapshot {}: upload interrupted (the agent stops); it resumes later",
                  snapshotId);
            } catch (RuntimeException e) {
              log.error("snapshot {}: upload failed unexpectedly", snapshotId, e);
            } finally {
              underWay.remove(snapshotId);
            }
          });
    } catch (RejectedExecutionException stopped) {
      underWay.remove(snapshotId);
    }
  }

  private void run(String rentalId, String sid) throws InterruptedException {
    Path dir = folder(sid);
    Manifest manifest = readManifest(dir);
    if (manifest == null) {
      Path workspace = workspaces.kept(rentalId);
      if (workspace == null) {
        log.warn("snapshot {}: rental {} kept no workspace here: failed", sid, rentalId);
        tellFailed(sid, WORKSPACE_GONE);
        deleteQuietly(dir);
        return;
      }
      try {
        manifest = archive(rentalId, sid, workspace, dir);
      } catch (IOException e) {
        deleteQuietly(dir);
        if (closed || Thread.currentThread().isInterrupted()) {
          // the agent stops: the workspace stays, and is archived again at the next reminder
          log.info("snapshot {}: archiving interrupted; it starts again later", sid);
          return;
        }
        log.error(
            "snapshot {}: cannot archive the workspace of {}: {}", sid, rentalId, e.toString());
        workspaces.discard(rentalId);
        tellFailed(sid, ARCHIVE_FAILED);
        return;
      }
      workspaces.discard(rentalId); // the archive is the workspace now
    } else {
      log.info("snapshot {}: resuming the upload of its archive", sid);
    }
    try {
      SnapshotUploader.Outcome o = uploader.upload(manifest, dir.resolve(WorkspaceArchive.FILE));
      log.info("snapshot {}: {}; its archive is deleted", sid, o.name().toLowerCase());
      deleteQuietly(dir);
    } catch (SnapshotUploader.Damaged e) {
      log.error("snapshot {}: {}: failed", sid, e.getMessage());
      deleteQuietly(dir);
      tellFailed(sid, ARCHIVE_DAMAGED);
    } catch (IOException e) {
      log.warn(
          "snapshot {}: upload broken off ({}); it resumes at the next reminder",
          sid,
          e.getMessage());
    }
  }

  private Manifest archive(String rentalId, String sid, Path workspace, Path dir)
      throws IOException {
    deleteQuietly(dir); // an archive cut short by a previous run
    mkdir(folder);
    mkdir(dir);
    Path part = dir.resolve(WorkspaceArchive.FILE + ".part");
    long t0 = System.nanoTime();
    WorkspaceArchive.Written w = WorkspaceArchive.write(workspace, part);
    Path archive = dir.resolve(WorkspaceArchive.FILE);
    Files.move(part, archive, StandardCopyOption.REPLACE_EXISTING);
    Manifest m = Manifest.of(sid, rentalId, Chunks.of(archive));
    writeAtomically(dir.resolve(Manifest.FILE), EngineHttp.JSON.writeValueAsBytes(m));
    log.info(
        "snapshot {}: workspace of {} archived: {} entries ({} skipped), {} bytes, {} chunks, {} ms",
        sid,
        rentalId,
        w.entries(),
        w.skipped(),
        m.sizeBytes(),
        m.chunks().size(),
        TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0));
    return m;
  }

  private void tellFailed(String sid, String reason) throws InterruptedException {
    try {
      uploader.failed(sid, reason);
    } catch (IOException e) {
      log.warn(
          "snapshot {}: cannot tell the engine it failed ({}): {}", sid, reason, e.getMessage());
    }
  }

  /** The manifest of a complete archive in {@code dir}, or null. */
  static Manifest readManifest(Path dir) {
    Path file = dir.resolve(Manifest.FILE);
    if (!Files.isRegularFile(file, LinkOption.NOFOLLOW_LINKS)
        || !Files.isRegularFile(dir.resolve(WorkspaceArchive.FILE), LinkOption.NOFOLLOW_LINKS))
      return null;
    try {
      Manifest m = EngineHttp.JSON.readValue(file.toFile(), Manifest.class);
      long size = Files.size(dir.resolve(WorkspaceArchive.FILE));
      return m.sizeBytes() == size ? m : null;
    } catch (IOException | RuntimeException e) {
      log.warn("{} cannot be read ({}): the archive is made again", file, e.toString());
      return null;
    }
  }

  // ---- restore

  /**
   * Downloads and checks the snapshot a rental restores; completes with the archive (under {@code
   * <state>/restores/}, to {@link #discardRestore} once unpacked), or exceptionally with an {@link
   * IOException} whose message says why.
   */
  public CompletableFuture<Path> restore(
      String rentalId, String snapshotId, String sha256, long sizeBytes) {
    CompletableFuture<Path> result = new CompletableFuture<>();
    if (rentalId == null
        || !ID.matcher(rentalId).matches()
        || snapshotId == null
        || sha256 == null
        || sizeBytes < 0) {
      result.completeExceptionally(new IOException("the restore asked for is incomplete"));
      return result;
    }
    try {
      threads.execute(
          () -> {
            Path archive = restores.resolve(rentalId + ".tar.zst");
            try {
              mkdir(restores);
              long t0 = System.nanoTime();
              restorer.fetch(rentalId, snapshotId, sha256, sizeBytes, archive);
              log.info(
                  "rental {}: snapshot {} downloaded and checked ({} bytes, {} ms)",
                  rentalId,
                  snapshotId,
                  sizeBytes,
                  TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0));
              result.complete(archive);
            } catch (IOException | RuntimeException e) {
              deleteQuietly(archive);
              result.completeExceptionally(
                  e instanceof IOException ? e : new IOException(e.toString(), e));
            } catch (InterruptedException e) {
              deleteQuietly(archive);
              result.completeExceptionally(new IOException("the agent is shutting down"));
            }
          });
    } catch (RejectedExecutionException stopped) {
      result.completeExceptionally(new IOException("the agent is shutting down"));
    }
    return result;
  }

  /** Deletes a restore's archive (unpacked, or not needed any more). */
  public void discardRestore(Path archive) {
    deleteQuietly(archive);
  }

  // ---- housekeeping

  /** Runs {@code task} on a snapshot thread (housekeeping that deletes files). */
  public void inBackground(Runnable task) {
    try {
      threads.execute(
          () -> {
            try {
              task.run();
            } catch (RuntimeException e) {
              log.error("snapshot housekeeping failed", e);
            }
          });
    } catch (RejectedExecutionException stopped) {
      // closed
    }
  }

  /** Deletes the archives never uploaded that are older than {@link #KEEP}. */
  public void purge(Instant now) {
    if (!Files.isDirectory(folder, LinkOption.NOFOLLOW_LINKS)) return;
    try (DirectoryStream<Path> all = Files.newDirectoryStream(folder)) {
      for (Path dir : all) {
        String sid = dir.getFileName().toString();
        if (underWay.containsKey(sid)) continue;
        try {
          Instant made = Files.getLastModifiedTime(dir, LinkOption.NOFOLLOW_LINKS).toInstant();
          if (made.plus(KEEP).isBefore(now)) {
            log.warn(
                "snapshot {}: never uploaded within {} h: its archive is deleted",
                sid,
                KEEP.toHours());
            deleteQuietly(dir);
          }
        } catch (IOException e) {
          // gone meanwhile
        }
      }
    } catch (IOException e) {
      log.warn("cannot list {}: {}", folder, e.toString());
    }
  }

  /** Stops the uploads and restores under way (they resume, or fail, later) and waits briefly. */
  @Override
  public void close() {
    closed = true;
    threads.shutdownNow();
    try {
      if (!threads.awaitTermination(5, TimeUnit.SECONDS))
        log.warn("snapshot uploads still running at shutdown");
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  // ---- files

  private static void mkdir(Path dir) throws IOException {
    if (Files.isDirectory(dir, LinkOption.NOFOLLOW_LINKS)) return;
    if (POSIX)
      Files.createDirectories(
          dir, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")));
    else Files.createDirectories(dir);
    if (POSIX) Files.setPosixFilePermissions(dir, PosixFilePermissions.fromString("rwx------"));
  }

  private static void writeAtomically(Path target, byte[] bytes) throws IOException {
    Path tmp = target.resolveSibling(target.getFileName() + ".tmp");
    Files.write(tmp, bytes);
    try (var ch = java.nio.channels.FileChannel.open(tmp, java.nio.file.StandardOpenOption.WRITE)) {
      ch.force(true); // the manifest says the archive is complete: it must be on disk first
    }
    try {
      Files.move(tmp, target, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
    } catch (AtomicMoveNotSupportedException e) {
      Files.move(tmp, target, StandardCopyOption.REPLACE_EXISTING);
    }
  }

  /** Deletes a file or folder tree, never following links; logs when it cannot. */
  static void deleteQuietly(Path path) {
    if (path == null || !Files.exists(path, LinkOption.NOFOLLOW_LINKS)) return;
    try {
      Files.walkFileTree(
          path,
          new SimpleFileVisitor<>() {
            @Override
            public FileVisitResult visitFile(Path file, BasicFileAttributes attrs)
                throws IOException {
              Files.deleteIfExists(file);
              return FileVisitResult.CONTINUE;
            }

            @Override
            public FileVisitResult postVisitDirectory(Path dir, IOException exc)
                throws IOException {
              Files.deleteIfExists(dir);
              return FileVisitResult.CONTINUE;
            }

            @Override
            public FileVisitResult visitFileFailed(Path file, IOException exc) {
              return FileVisitResult.CONTINUE;
            }
          });
    } catch (NoSuchFileException gone) {
      // fine
    } catch (IOException e) {
      log.warn("cannot delete {}: {}", path, e.toString());
    }
  }
}
