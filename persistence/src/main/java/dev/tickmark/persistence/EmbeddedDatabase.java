package dev.tickmark.persistence;

import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A PostgreSQL server started in-process for development and tests, with its data kept in a local
 * folder so that a restart keeps every balance. Durability settings are on: it holds real data.
 */
public final class EmbeddedDatabase implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(EmbeddedDatabase.class);

  private final EmbeddedPostgres postgres;
  private final java.util.concurrent.atomic.AtomicBoolean closed =
      new java.util.concurrent.atomic.AtomicBoolean();

  private EmbeddedDatabase(EmbeddedPostgres postgres) {
    this.postgres = postgres;
  }

  /**
   * Starts (or restarts over existing data in) {@code dataDir}. {@code port == 0} picks a free
   * port.
   */
  public static EmbeddedDatabase start(Path dataDir, int port, boolean durable) throws IOException {
    return start(dataDir, port, durable, true);
  }

  /**
   * {@code stopWithJvm} false: the caller stops it ({@link #close()}), after everything that writes
   * to it. The library's own JVM shutdown hook would stop it as soon as the JVM starts shutting
   * down, concurrently with a node's coordinated shutdown and so before the node's last writes (its
   * shard leases given back, the journal's last events).
   */
  public static EmbeddedDatabase start(Path dataDir, int port, boolean durable, boolean stopWithJvm)
      throws IOException {
    Files.createDirectories(dataDir);
    stopOrphanedServer(dataDir);
    EmbeddedPostgres.Builder builder =
        EmbeddedPostgres.builder()
            .setRegisterShutdownHook(stopWithJvm)
            .setDataDirectory(dataDir)
            .setCleanDataDirectory(false)
            .setPGStartupWait(Duration.ofSeconds(60))
            .setLocaleConfig("locale", "C.UTF-8")
            .setServerConfig("max_connections", "200");
    if (port > 0) builder.setPort(port);
    if (durable) {
      builder
          .setServerConfig("fsync", "on")
          .setServerConfig("synchronous_commit", "on")
          .setServerConfig("full_page_writes", "on");
    }
    EmbeddedPostgres pg = builder.start();
    log.info(
        "Embedded PostgreSQL listening on 127.0.0.1:{} with data in {}",
        pg.getPort(),
        dataDir.toAbsolutePath());
    return new EmbeddedDatabase(pg);
  }

  /** How long a server left running by a previous process is given to stop on SIGTERM. */
  static final Duration ORPHAN_STOP_WAIT = Duration.ofSeconds(30);

  /**
   * A process that held this server and was killed ({@code kill -9}, the OOM killer) ran no
   * shutdown hook: its PostgreSQL still runs on {@code dataDir}, and a new server there would wait
   * for the data directory's lock until it gave up. Such an orphan (its parent is no longer a Java
   * process) is stopped first — SIGTERM, then SIGKILL, after which PostgreSQL recovers from its WAL
   * as after a crash. A server whose parent still runs belongs to another live process: refused at
   * once, with the reason.
   */
  private static void stopOrphanedServer(Path dataDir) throws IOException {
    Path pidFile = dataDir.resolve("postmaster.pid");
    if (!Files.isRegularFile(pidFile)) return;
    long pid;
    try {
      pid = Long.parseLong(Files.readAllLines(pidFile).get(0).strip());
    } catch (RuntimeException e) {
      return; // unreadable or half written: PostgreSQL judges a stale lock file itself
    }
    ProcessHandle server = ProcessHandle.of(pid).orElse(null);
    if (server == null || !server.isAlive() || !isPostgres(server)) return;
    ProcessHandle parent = server.parent().orElse(null);
    if (parent != null && parent.isAlive() && isJava(parent))
      throw new IOException(
          "PostgreSQL (pid "
              + pid
              + ") already runs on "
              + dataDir.toAbsolutePath()
              + " for another running process (pid "
              + parent.pid()
              + "): stop that one first, or give this one its own data directory");
    log.warn(
        "Stopping the embedded PostgreSQL (pid {}) that a process killed without shutting down left running on {}",
        pid,
        dataDir.toAbsolutePath().normalize());
    server.destroy();
    try {
      server.onExit().get(ORPHAN_STOP_WAIT.toMillis(), java.util.concurrent.TimeUnit.MILLISECONDS);
    } catch (java.util.concurrent.TimeoutException e) {
      log.warn("It did not stop within {}; killing it", ORPHAN_STOP_WAIT);
      server.destroyForcibly();
      server.onExit().join();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IOException("interrupted while stopping an orphaned PostgreSQL", e);
    } catch (java.util.concurrent.ExecutionException e) {
      throw new IOException(e.getCause());
    }
  }

  /**
   * The process whose id is in this data directory's lock file is a PostgreSQL server (not another
   * process that reused the id). Its {@code -D} argument is no help: it may be relative to the
   * working directory of the process that started it ({@code bin/dev} gives {@code data/postgres}).
   */
  private static boolean isPostgres(ProcessHandle process) {
    return process
        .info()
        .command()
        .map(c -> Path.of(c).getFileName().toString().equals("postgres"))
        .orElse(false);
  }

  private static boolean isJava(ProcessHandle process) {
    return process.info().command().map(c -> c.endsWith("java")).orElse(false);
  }

  public int port() {
    return postgres.getPort();
  }

  /**
   * Settings for a database on this server; the embedded server trusts local connections as {@code
   * postgres}.
   */
  public DatabaseSettings settings(String database, int poolSize) {
    return new DatabaseSettings(
        "jdbc:postgresql://127.0.0.1:" + port() + "/" + database, "postgres", "", poolSize);
  }

  /** Stops the server (once; later calls do nothing). */
  @Override
  public void close() throws IOException {
    if (closed.compareAndSet(false, true)) postgres.close();
  }
}
