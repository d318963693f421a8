package dev.tickmark.persistence;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import java.sql.Connection;
import java.sql.SQLException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.Executor;
import javax.sql.DataSource;

/**
 * The read side's connection pool and the executor its blocking JDBC calls run on. Callers get a
 * {@link CompletionStage}; no JDBC call ever runs on an actor or HTTP thread. A short connection
 * timeout makes an unreachable database fail fast instead of piling up requests.
 */
public final class Jdbc implements AutoCloseable {
  @FunctionalInterface
  public interface Work<T> {
    T apply(Connection connection) throws SQLException;
  }

  private final HikariDataSource dataSource;
  private final Executor executor;

  private Jdbc(HikariDataSource dataSource, Executor executor) {
    this.dataSource = dataSource;
    this.executor = executor;
  }

  /** A pool of {@code settings.poolSize()} connections; {@code executor} should have as many threads. */
  public static Jdbc create(DatabaseSettings settings, String poolName, Executor executor) {
    HikariConfig config = new HikariConfig();
    config.setPoolName(poolName);
    config.setJdbcUrl(settings.tunedUrl());
    config.setUsername(settings.user());
    config.setPassword(settings.password());
    config.setMaximumPoolSize(settings.poolSize());
    config.setMinimumIdle(Math.min(2, settings.poolSize()));
    config.setConnectionTimeout(2_000); // an unreachable database answers a request 503 well within 5 s
    config.setValidationTimeout(1_000);
    config.setInitializationFailTimeout(-1); // start even while the database is briefly away
    return new Jdbc(new HikariDataSource(config), executor);
  }

  public DataSource dataSource() {
    return dataSource;
  }

  /** Runs {@code work} with an auto-commit connection on the JDBC executor. */
  public <T> CompletionStage<T> run(Work<T> work) {
    return CompletableFuture.supplyAsync(() -> {
      try (Connection connection = dataSource.getConnection()) {
        return work.apply(connection);
      } catch (SQLException e) {
        throw new CompletionException(e);
      }
    }, executor);
  }

  /** Runs {@code work} in one transaction on the JDBC executor; any failure rolls it back. */
  public <T> CompletionStage<T> transaction(Work<T> work) {
    return run(connection -> {
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
