package dev.tickmark.persistence.logs;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.tickmark.persistence.DatabaseSettings;
import dev.tickmark.persistence.Jdbc;
import dev.tickmark.persistence.Migrations;
import dev.tickmark.persistence.TestDatabase;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Executors;
import java.util.stream.LongStream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** Log lines on a real PostgreSQL: stored once, read in order, trimmed, swept after the end. */
class RentalLogsIntegrationTest {
  static DatabaseSettings db;
  static Jdbc jdbc;
  static final Instant AT = Instant.parse("2026-01-01T00:00:00Z");

  @BeforeAll
  static void start() throws Exception {
    db = TestDatabase.fresh("rentallogs");
    Migrations.migrate(db);
    jdbc = Jdbc.create(db, "rentallogs-test", Executors.newFixedThreadPool(2));
  }

  @AfterAll
  static void stop() {
    if (jdbc != null) jdbc.close();
  }

  static List<RentalLogs.Line> lines(long from, long to, String text) {
    return LongStream.rangeClosed(from, to)
        .mapToObj(s -> new RentalLogs.Line(s, AT.plusSeconds(s), "stdout", text + s))
        .toList();
  }

  static List<Long> seqs(List<RentalLogs.Line> lines) {
    return lines.stream().map(RentalLogs.Line::seq).toList();
  }

  @Test
  void storesEachLineOnceHoweverOftenItComesAndReadsThemOldestFirst() {
    RentalLogs logs = new RentalLogs(jdbc, RentalLogs.Retention.DEFAULT);
    logs.append("rnt_a", lines(1, 3, "l")).toCompletableFuture().join();
    logs.append("rnt_a", lines(2, 5, "again-")).toCompletableFuture().join(); // 2, 3 resent

    List<RentalLogs.Line> all = logs.after("rnt_a", 0, 100).toCompletableFuture().join();

    assertEquals(List.of(1L, 2L, 3L, 4L, 5L), seqs(all));
    assertEquals("l2", all.get(1).text(), "the first copy stays");
    assertEquals("again-4", all.get(3).text());
    assertEquals(AT.plusSeconds(4), all.get(3).at());
    assertEquals(List.of(4L, 5L), seqs(logs.after("rnt_a", 3, 100).toCompletableFuture().join()));
    assertEquals(List.of(2L, 3L), seqs(logs.after("rnt_a", 1, 2).toCompletableFuture().join()));
    assertEquals(List.of(4L, 5L), seqs(logs.tail("rnt_a", 2).toCompletableFuture().join()));
    assertEquals(List.of(), logs.after("rnt_other", 0, 100).toCompletableFuture().join());
  }

  @Test
  void keepsTheNewestLinesWithinTheLineAndByteBounds() {
    RentalLogs logs = new RentalLogs(jdbc, new RentalLogs.Retention(10, 1000));
    logs.append("rnt_b", lines(1, 25, "x")).toCompletableFuture().join();
    assertEquals(
        LongStream.rangeClosed(16, 25).boxed().toList(),
        seqs(logs.after("rnt_b", 0, 100).toCompletableFuture().join()),
        "the last 10 lines");

    List<RentalLogs.Line> big = new ArrayList<>();
    for (long s = 26; s <= 29; s++) big.add(new RentalLogs.Line(s, AT, "stderr", "y".repeat(300)));
    logs.append("rnt_b", big).toCompletableFuture().join();
    assertEquals(
        List.of(27L, 28L, 29L),
        seqs(logs.after("rnt_b", 0, 100).toCompletableFuture().join()),
        "at most 1000 bytes of text: three lines of 300");
  }

  @Test
  void deletesTheLogsOfRentalsThatEndedBeforeTheCutoffOnly() throws Exception {
    RentalLogs logs = new RentalLogs(jdbc, RentalLogs.Retention.DEFAULT);
    rental("rnt_old", Instant.parse("2026-01-01T00:00:00Z"));
    rental("rnt_recent", Instant.parse("2026-01-09T00:00:00Z"));
    rental("rnt_running", null);
    for (String id : List.of("rnt_old", "rnt_recent", "rnt_running"))
      logs.append(id, lines(1, 3, "l")).toCompletableFuture().join();

    int deleted =
        logs.deleteEndedBefore(Instant.parse("2026-01-03T00:00:00Z")).toCompletableFuture().join();

    assertEquals(3, deleted);
    assertEquals(0, logs.after("rnt_old", 0, 10).toCompletableFuture().join().size());
    assertEquals(3, logs.after("rnt_recent", 0, 10).toCompletableFuture().join().size());
    assertEquals(3, logs.after("rnt_running", 0, 10).toCompletableFuture().join().size());
  }

  private static void rental(String id, Instant endedAt) throws Exception {
    try (Connection c = java.sql.DriverManager.getConnection(db.url(), db.user(), db.password());
        PreparedStatement st =
            c.prepareStatement(
                "INSERT INTO rentals (rental_id, renter_id, status, gpu, card_count, tier,"
                    + " max_price_per_gpu_hour, created_at, ended_at, updated_at)"
                    + " VALUES (?, 'acc_1', ?, 'h100-80gb', 1, 'on_demand', 1, now(), ?, now())")) {
      st.setString(1, id);
      st.setString(2, endedAt == null ? "running" : "ended");
      st.setTimestamp(3, endedAt == null ? null : java.sql.Timestamp.from(endedAt));
      st.executeUpdate();
    }
  }
}
