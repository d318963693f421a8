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
