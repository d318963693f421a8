package dev.tickmark.bench;

import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;

/**
 * The launch's durable writes alone, as the baseline its latency is read against: at the same
 * open-loop rate, each arrival commits two single-row inserts at once on two connections (the hold
 * and the reservation, written side by side) and, once both are in, a third (the request with its
 * match), each a journal-shaped row in its own transaction on the same PostgreSQL with the same
 * {@code synchronous_commit}. No HTTP, no actor, no serialization: what the disk's commits alone
 * cost, from the arrival's due time. A launch cannot answer faster than this, so its p99 ÷ this p99
 * says how much of the tail is the engine's.
 */
final class CommitFloor implements AutoCloseable {
  private static final String TABLE = "bench_commit_floor";
  private static final byte[] PAYLOAD = new byte[320]; // about a launch event's CBOR

  private final BlockingQueue<Connection> pool;
  private final ExecutorService writers;
  private final AtomicLong sequence = new AtomicLong();

  /** {@code connections}: enough for the rate times the floor's latency, times two. */
  CommitFloor(String url, String user, String password, int connections) throws SQLException {
    pool = new ArrayBlockingQueue<>(connections);
    for (int i = 0; i < connections; i++) {
      Connection c = DriverManager.getConnection(url, user, password);
      c.setAutoCommit(false);
      pool.add(c);
    }
    Connection any = pool.peek();
    try (Statement st = any.createStatement()) {
      st.execute(
          "CREATE TABLE IF NOT EXISTS "
              + TABLE
              + " (ordering BIGSERIAL, persistence_id VARCHAR(255) NOT NULL,"
              + " sequence_number BIGINT NOT NULL, event_payload BYTEA NOT NULL,"
              + " PRIMARY KEY(persistence_id, sequence_number))");
      st.execute(
          "CREATE UNIQUE INDEX IF NOT EXISTS "
              + TABLE
              + "_ordering_idx ON "
              + TABLE
              + "(ordering)");
      st.execute("TRUNCATE " + TABLE); // each floor starts its ids again, and from an empty table
    }
    any.commit();
    writers =
        Executors.newFixedThreadPool(
            connections,
            r -> {
              Thread t = new Thread(r, "bench-commit-floor");
              t.setDaemon(true);
              return t;
            });
  }

  /**
   * Latencies in microseconds from each arrival's due time, sorted; how many failed, and the first
   * failure's message (null when none failed).
   */
  record Result(long[] micros, int failed, String firstFailure) {}

  Result run(int rate, int seconds) throws InterruptedException {
    int offered = rate * seconds;
    ConcurrentLinkedQueue<Long> micros = new ConcurrentLinkedQueue<>();
    AtomicInteger failed = new AtomicInteger();
    AtomicReference<String> firstFailure = new AtomicReference<>();
    List<CompletableFuture<Void>> all = new ArrayList<>(offered);
    long t0 = System.nanoTime() + 50_000_000L;
    long step = 1_000_000_000L / rate;
    for (int i = 0; i < offered; i++) {
      long due = t0 + i * step;
      long wait;
      while ((wait = due - System.nanoTime()) > 0) LockSupport.parkNanos(wait);
      CompletableFuture<Void> side = commitOne("hold");
      CompletableFuture<Void> other = commitOne("reservation");
      all.add(
          CompletableFuture.allOf(side, other)
              .thenCompose(v -> commitOne("rental"))
              .whenComplete(
                  (v, e) -> {
                    if (e != null) {
                      failed.incrementAndGet();
                      firstFailure.compareAndSet(null, String.valueOf(e.getCause()));
                    } else micros.add((System.nanoTime() - due) / 1000);
                  }));
    }
    CompletableFuture.allOf(all.toArray(CompletableFuture[]::new)).exceptionally(e -> null).join();
    return new Result(MarketBenchmark.sortedArray(micros), failed.get(), firstFailure.get());
  }

  private CompletableFuture<Void> commitOne(String entity) {
    return CompletableFuture.runAsync(
        () -> {
          Connection c = null;
          try {
            c = pool.take();
            try (PreparedStatement ps =
                c.prepareStatement(
                    "INSERT INTO "
                        + TABLE
                        + " (persistence_id, sequence_number, event_payload) VALUES (?, ?, ?)")) {
              ps.setString(1, entity + "|" + sequence.incrementAndGet());
              ps.setLong(2, 1);
              ps.setBytes(3, PAYLOAD);
              ps.executeUpdate();
            }
            c.commit();
          } catch (Exception e) {
            throw new IllegalStateException(e);
          } finally {
            if (c != null) pool.add(c);
          }
        },
        writers);
  }

  @Override
  public void close() {
    writers.shutdownNow();
    for (Connection c : pool) {
      try {
        c.close();
      } catch (SQLException ignored) {
        // closing: nothing left to do with it
      }
    }
  }
}
