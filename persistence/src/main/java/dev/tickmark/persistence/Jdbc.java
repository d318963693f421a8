package dev.tickmark.persistence;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import java.sql.Connection;
import java.sql.SQLException;
import java.sql.SQLTransientConnectionException;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.Executor;
import java.util.concurrent.atomic.AtomicLong;
import javax.sql.DataSource;

/**
 * The read side's connection pool and the executor its blocking JDBC calls run on. Callers get a
 * {@link CompletionStage}; no JDBC call ever runs on an actor or HTTP thread. A short connection
 * timeout, and failing fast for a moment after a connection could not be had, make an unreachable
 * database fail requests quickly instead of piling them up.
 */
public final class Jdbc implements AutoCloseable {
  /** An unreachable database fails a call in 2 s, so a request answers 503 well within 5 s. */
  static final long CONNECTION_TIMEOUT_MILLIS = 2_000;

  @FunctionalInterface
  public interface Work<T> {
    T apply(Connection connection) throws SQLException;
  }

  /** How long calls fail fast after a connection could not be had. */
  static final Duration FAIL_FAST = Duration.ofSeconds(1);

  /**
   * A trial connection's window: longer than the pool's connection timeout, so one trial runs at a
   * time.
   */
  private static final Duration TRIAL = Duration.ofMillis(CONNECTION_TIMEOUT_MILLIS + 500);

  private final HikariDataSource dataSource;
  private final Executor executor;

  /** {@link System#nanoTime()} until which calls fail fast; 0 while connections are being had. */
  private final AtomicLong failingFastUntilNanos = new AtomicLong();

  private Jdbc(HikariDataSource dataSource, Executor executor) {
    this.dataSource = dataSource;
    this.executor = executor;
  }

  /**
   * A pool of {@code settings.poolSize()} connections; {@code executor} should have as many
   * threads.
   */
  public static Jdbc create(DatabaseSettings settings, String poolName, Executor executor) {
    HikariConfig config = new HikariConfig();
    config.setPoolName(poolName);
    config.setJdbcUrl(settings.tunedUrl());
    config.setUsername(settings.user());
    config.setPassword(settings.password());
    config.setMaximumPoolSize(settings.poolSize());
    config.setMinimumIdle(Math.min(2, settings.poolSize()));
    config.setConnectionTimeout(CONNECTION_TIMEOUT_MILLIS);
    config.setValidationTimeout(1_000);
    config.setInitializationFailTimeout(-1); // start even while the database is briefly away
    return new Jdbc(new HikariDataSource(config), executor);
  }

  public DataSource dataSource() {
    return dataSource;
  }

  /**
   * Runs {@code work} with an auto-commit connection on the JDBC executor. While the database is
   * known to be unreachable the call fails at once (see {@link #admit()}) rather than holding a
   * JDBC thread for the whole connection timeout, so a burst of requests during an outage cannot
   * queue up behind each other.
   */
  public <T> CompletionStage<T> run(Work<T> work) {
    if (isFailingFast()) return CompletableFuture.failedFuture(unreachable());
    return CompletableFuture.supplyAsync(
        () -> {
          if (!admit()) throw new CompletionException(unreachable());
          Connection connection;
          try {
            connection = dataSource.getConnection();
          } catch (SQLException e) {
            if (unreachable(e)) failingFastUntilNanos.set(System.nanoTime() + FAIL_FAST.toNanos());
            else failingFastUntilNanos.set(0); // a busy pool is no outage: the database answered
            throw new CompletionException(e);
          }
          failingFastUntilNanos.set(0);
          try (connection) {
            return work.apply(connection);
          } catch (SQLException e) {
            throw new CompletionException(e);
          }
        },
        executor);
  }

  /** Whether calls fail at once because a connection could not be had recently. */
  public boolean isFailingFast() {
    long until = failingFastUntilNanos.get();
    return until != 0 && System.nanoTime() - until < 0;
  }

  /**
   * Closed: every call goes to the pool. After a failed connect, calls fail fast for {@link
   * #FAIL_FAST}; then one call at a time is let through as a trial (the window is extended past its
   * connection timeout while it runs), and the first connection that succeeds lets everything
   * through again.
   */
  private boolean admit() {
    long until = failingFastUntilNanos.get();
    if (until == 0) return true;
    long now = System.nanoTime();
    if (now - until < 0) return false;
    return failingFastUntilNanos.compareAndSet(until, now + TRIAL.toNanos());
  }

  /**
   * Whether a failed {@code getConnection} means the database is unreachable: Hikari's timeout
   * carries the last failed connect as its cause (or a connection-class SQLState, 08xxx), whereas a
   * timeout of an exhausted pool against a healthy database carries none.
   */
  private static boolean unreachable(SQLException e) {
    return e.getCause() != null || (e.getSQLState() != null && e.getSQLState().startsWith("08"));
  }

  private static SQLTransientConnectionException unreachable() {
    return new SQLTransientConnectionException(
        "the database was unreachable moments ago; not trying again yet");
  }

  /** Runs {@code work} in one transaction on the JDBC executor; any failure rolls it back. */
  public <T> CompletionStage<T> transaction(Work<T> work) {
    return run(
        connection -> {
          connection.setAutoCommit(false);
          try {
            T result = work.apply(connection);
            connection.commit();
            return result;
          } catch (SQLException | RuntimeException e) {
            connection.rollback();
            throw e;
          } finally {
            connection.setAutoCommit(true);
          }
        });
  }

  @Override
  public void close() {
    dataSource.close();
  }
}
