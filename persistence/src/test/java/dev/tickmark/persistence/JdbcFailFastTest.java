package dev.tickmark.persistence;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.ServerSocket;
import java.sql.ResultSet;
import java.sql.SQLTransientConnectionException;
import java.time.Duration;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * The read side's pool fails fast while its database is unreachable, and works normally against a
 * live one.
 */
class JdbcFailFastTest {
  private static final Jdbc.Work<Integer> SELECT_ONE =
      connection -> {
        try (ResultSet rs = connection.createStatement().executeQuery("SELECT 1")) {
          rs.next();
          return rs.getInt(1);
        }
      };

  @Test
  void anUnreachableDatabaseFailsTheFirstCallWithinTheConnectionTimeoutAndTheNextOnesAtOnce()
      throws Exception {
    int closedPort;
    try (ServerSocket socket = new ServerSocket(0)) {
      closedPort = socket.getLocalPort();
    }
    ExecutorService executor = Executors.newFixedThreadPool(2);
    try (Jdbc jdbc =
        Jdbc.create(
            new DatabaseSettings(
                "jdbc:postgresql://127.0.0.1:" + closedPort + "/none", "postgres", "", 2),
            "fail-fast-test",
            executor)) {
      long started = System.nanoTime();
      ExecutionException first =
          assertThrows(
              ExecutionException.class,
              () -> jdbc.run(SELECT_ONE).toCompletableFuture().get(10, TimeUnit.SECONDS));
      assertInstanceOf(SQLTransientConnectionException.class, first.getCause());
      assertTrue(
          Duration.ofNanos(System.nanoTime() - started).compareTo(Duration.ofSeconds(4)) < 0,
          "bounded by the connection timeout");
      assertTrue(jdbc.isFailingFast());

      started = System.nanoTime();
      for (int i = 0; i < 50; i++) {
        ExecutionException next =
            assertThrows(
                ExecutionException.class,
                () -> jdbc.run(SELECT_ONE).toCompletableFuture().get(10, TimeUnit.SECONDS));
        assertInstanceOf(SQLTransientConnectionException.class, next.getCause());
      }
      assertTrue(
          Duration.ofNanos(System.nanoTime() - started).compareTo(Jdbc.FAIL_FAST) < 0,
          "50 calls failed without waiting on the pool");
    } finally {
      executor.shutdownNow();
    }
  }

  @Test
  void aReachableDatabaseAnswers() throws Exception {
    ExecutorService executor = Executors.newFixedThreadPool(2);
    try (Jdbc jdbc = Jdbc.create(TestDatabase.fresh("fail_fast"), "fail-fast-live", executor)) {
      assertEquals(1, jdbc.run(SELECT_ONE).toCompletableFuture().get(10, TimeUnit.SECONDS));
      assertFalse(jdbc.isFailingFast());
    } finally {
      executor.shutdownNow();
    }
  }
}
