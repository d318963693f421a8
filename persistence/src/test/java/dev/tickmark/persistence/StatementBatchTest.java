package dev.tickmark.persistence;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.sql.ResultSet;
import java.sql.Statement;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.Executors;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** A projection's statements for one group, on PostgreSQL: in order, a round trip a run. */
class StatementBatchTest {
  static Jdbc jdbc;
  static final String INSERT = "INSERT INTO items(id, v) VALUES (?, ?) ON CONFLICT DO NOTHING";
  static final String ADD = "UPDATE items SET v = v + ? WHERE id = ?";
  static final String DOUBLE = "UPDATE items SET v = v * 2 WHERE id = ?";

  @BeforeAll
  static void start() {
    jdbc =
        Jdbc.create(
            TestDatabase.fresh("statementbatch"),
            "statementbatch-test",
            Executors.newFixedThreadPool(2));
  }

  @AfterAll
  static void stop() {
    if (jdbc != null) jdbc.close();
  }

  @BeforeEach
  void emptyTable() {
    join(
        jdbc.run(
            c -> {
              try (Statement st = c.createStatement()) {
                st.execute("DROP TABLE IF EXISTS items");
                st.execute("CREATE TABLE items(id VARCHAR(8) PRIMARY KEY, v INTEGER NOT NULL)");
              }
              return null;
            }));
  }

  static <T> T join(CompletionStage<T> stage) {
    return stage.toCompletableFuture().join();
  }

  static int send(StatementBatch batch) {
    return join(jdbc.transaction(batch::send));
  }

  static Map<String, Integer> items() {
    return join(
        jdbc.run(
            c -> {
              Map<String, Integer> rows = new LinkedHashMap<>();
              try (Statement st = c.createStatement();
                  ResultSet rs = st.executeQuery("SELECT id, v FROM items ORDER BY id")) {
                while (rs.next()) rows.put(rs.getString(1), rs.getInt(2));
              }
              return rows;
            }));
  }

  static void add(StatementBatch batch, String id, int by) {
    batch.add(
        ADD,
        st -> {
          st.setInt(1, by);
          st.setString(2, id);
        });
  }

  static void doubled(StatementBatch batch, String id) {
    batch.add(DOUBLE, st -> st.setString(1, id));
  }

  static void create(StatementBatch batch, String id, int v) {
    batch.create(
        INSERT,
        st -> {
          st.setString(1, id);
          st.setInt(2, v);
        });
  }

  @Test
  void sendsEachRunOfOneStatementInOneRoundTripAndKeepsTheirOrder() {
    StatementBatch first = new StatementBatch();
    create(first, "a", 1);
    create(first, "b", 10);
    assertEquals(1, send(first));

    StatementBatch batch = new StatementBatch();
    add(batch, "a", 1);
    add(batch, "b", 1);
    doubled(batch, "a");
    doubled(batch, "b");
    add(batch, "a", 3);
    // (1 + 1) * 2 + 3 and (10 + 1) * 2: the order kept; three runs, three round trips
    assertEquals(3, send(batch));
    assertEquals(Map.of("a", 7, "b", 22), items());
  }

  @Test
  void sendsTheRowsEntitiesCreateBeforeTheGroupsOtherStatements() {
    StatementBatch batch = new StatementBatch();
    create(batch, "a", 1);
    add(batch, "a", 1);
    create(batch, "b", 5);
    add(batch, "b", 1);
    create(batch, "c", 9);
    add(batch, "a", 1);
    // a launch's insert and update alternate; sent as two runs, with the same rows as one by one
    assertEquals(2, send(batch));
    assertEquals(Map.of("a", 3, "b", 6, "c", 9), items());
  }

  @Test
  void anEmptyBatchSendsNothing() {
    assertEquals(0, send(new StatementBatch()));
    assertEquals(Map.of(), items());
  }
}
