package dev.tickmark.persistence;

import java.sql.Connection;
import java.sql.SQLException;
import javax.sql.DataSource;
import org.apache.pekko.japi.function.Function;
import org.apache.pekko.projection.jdbc.JdbcSession;

/**
 * A projection's unit of work on a pooled connection: handler writes and the offset commit
 * together.
 */
public final class PooledJdbcSession implements JdbcSession {
  private final Connection connection;

  public PooledJdbcSession(DataSource dataSource) {
    try {
      this.connection = dataSource.getConnection();
      this.connection.setAutoCommit(false);
    } catch (SQLException e) {
      throw new IllegalStateException(
          "no database connection for the projection: " + e.getMessage(), e);
    }
  }

  @Override
  public <Result> Result withConnection(Function<Connection, Result> func) throws Exception {
    return func.apply(connection);
  }

  @Override
  public void commit() throws SQLException {
    connection.commit();
  }

  @Override
  public void rollback() throws SQLException {
    connection.rollback();
  }

  @Override
  public void close() throws SQLException {
    connection.close();
  }
}
