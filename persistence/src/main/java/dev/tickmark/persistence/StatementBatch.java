package dev.tickmark.persistence;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.List;

/**
 * The statements a projection writes for one group of events, sent in as few round trips as their
 * order allows: consecutive statements of the same SQL go to PostgreSQL as one JDBC batch (one
 * round trip, no reply awaited between them). A statement a round trip was most of a busy read
 * side's cost.
 *
 * <p>The statements that create an entity's row from its first event ({@link #create}) go before
 * the group's others: nothing earlier in the group can touch a row that does not exist yet, so
 * moving them first changes no outcome, and a launch's insert and its match's update then each join
 * a batch of their kind instead of alternating.
 */
public final class StatementBatch {
  /** Sets one statement's parameters. */
  @FunctionalInterface
  public interface Parameters {
    void set(PreparedStatement statement) throws SQLException;
  }

  private record Statement(String sql, Parameters parameters) {}

  private final List<Statement> creates = new ArrayList<>();
  private final List<Statement> others = new ArrayList<>();

  /**
   * A statement that creates the row of an entity whose first event this is (an insert that does
   * nothing when the row exists).
   */
  public void create(String sql, Parameters parameters) {
    creates.add(new Statement(sql, parameters));
  }

  /** A statement sent after every earlier one of this batch (but the creates). */
  public void add(String sql, Parameters parameters) {
    others.add(new Statement(sql, parameters));
  }

  /** Runs the creates, then the others, in order; returns the round trips it took. */
  public int send(Connection connection) throws SQLException {
    return send(connection, creates) + send(connection, others);
  }

  private static int send(Connection connection, List<Statement> statements) throws SQLException {
    int roundTrips = 0;
    int from = 0;
    while (from < statements.size()) {
      String sql = statements.get(from).sql();
      int to = from;
      try (PreparedStatement statement = connection.prepareStatement(sql)) {
        for (; to < statements.size() && statements.get(to).sql().equals(sql); to++) {
          statements.get(to).parameters().set(statement);
          statement.addBatch();
        }
        statement.executeBatch();
      }
      roundTrips++;
      from = to;
    }
    return roundTrips;
  }
}
