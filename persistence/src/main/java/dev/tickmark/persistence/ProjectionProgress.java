package dev.tickmark.persistence;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;

/**
 * Lets a read wait until a projection has applied what the journal held when the read began, so
 * that a caller reads its own writes (DESIGN.md). An entity acknowledges a write only once its
 * event is in the journal, so the read's first query sees that event's {@code ordering}; the read
 * then waits until the projection's offset, which commits in the same transaction as its rows, has
 * passed every event of the projection's tags up to that ordering. Offsets and journal are in
 * PostgreSQL, so this holds whichever node took the write and whichever serves the read.
 *
 * <p>The wait is bounded: past {@code within} the read is answered from what is there (the stage
 * completes with {@code false}), as it was before this existed. It polls, first at once (usually
 * the projection is already past), then every 10 ms growing to 100 ms; one poll is one indexed
 * query that reads only the events still unprojected.
 */
public final class ProjectionProgress {
  private static final long FIRST_POLL_MILLIS = 10;
  private static final long MAX_POLL_MILLIS = 100;

  /**
   * Whether some slice still has an event in (its offset, head]: one range scan of event_tag over
   * what is unprojected.
   */
  private static final String BEHIND =
      """
      SELECT count(*) FROM unnest(CAST(? AS varchar[])) AS s(tag)
      LEFT JOIN pekko_projection_offset_store o ON o.projection_name = ? AND o.projection_key = s.tag
      WHERE EXISTS (SELECT 1 FROM event_tag e WHERE e.tag = s.tag
                    AND e.event_id > coalesce(CAST(o.current_offset AS BIGINT), 0) AND e.event_id <= ?)
      """;

  private final Jdbc jdbc;

  public ProjectionProgress(Jdbc jdbc) {
    this.jdbc = jdbc;
  }

  /**
   * Until the projection {@code projection} has applied every event the entity {@code
   * persistenceId} (tagged {@code tag}) has written so far. Only that entity's latest event counts,
   * so others' traffic does not lengthen the wait.
   */
  public CompletionStage<Boolean> awaitEntity(
      String projection, String tag, String persistenceId, Duration within) {
    return await(
        projection,
        List.of(tag),
        within,
        c -> {
          try (PreparedStatement st =
              c.prepareStatement(
                  "SELECT ordering FROM event_journal WHERE persistence_id = ? ORDER BY sequence_number DESC LIMIT 1")) {
            st.setString(1, persistenceId);
            try (ResultSet rs = st.executeQuery()) {
              return rs.next() ? rs.getLong(1) : 0L;
            }
          }
        });
  }

  /**
   * Until every slice ({@code tags}) of {@code projection} has applied every event in the journal
   * when this was called.
   */
  public CompletionStage<Boolean> awaitAll(String projection, List<String> tags, Duration within) {
    return await(
        projection,
        tags,
        within,
        c -> {
          try (PreparedStatement st =
                  c.prepareStatement("SELECT coalesce(max(ordering), 0) FROM event_journal");
              ResultSet rs = st.executeQuery()) {
            rs.next();
            return rs.getLong(1);
          }
        });
  }

  private CompletionStage<Boolean> await(
      String projection, List<String> tags, Duration within, Jdbc.Work<Long> head) {
    long deadline = System.nanoTime() + within.toNanos();
    // the head and the first check on one connection: when the projection is already past, one
    // round trip
    return jdbc.run(
            c -> {
              long ordering = head.apply(c);
              return new long[] {
                ordering, ordering == 0 ? 0 : behind(c, projection, tags, ordering)
              };
            })
        .thenCompose(
            first ->
                first[1] == 0
                    ? CompletableFuture.completedFuture(true)
                    : poll(projection, tags, first[0], deadline, FIRST_POLL_MILLIS));
  }

  private CompletionStage<Boolean> poll(
      String projection, List<String> tags, long head, long deadline, long delayMillis) {
    long left = TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime());
    if (left <= 0) return CompletableFuture.completedFuture(false);
    // the delay's own thread only hands the query to the JDBC executor
    Executor later =
        CompletableFuture.delayedExecutor(
            Math.min(delayMillis, left), TimeUnit.MILLISECONDS, Runnable::run);
    return CompletableFuture.supplyAsync(
            () -> jdbc.run(c -> behind(c, projection, tags, head)), later)
        .thenCompose(stage -> stage)
        .thenCompose(
            behind ->
                behind == 0
                    ? CompletableFuture.completedFuture(true)
                    : poll(
                        projection,
                        tags,
                        head,
                        deadline,
                        Math.min(delayMillis * 2, MAX_POLL_MILLIS)));
  }

  private static long behind(Connection c, String projection, List<String> tags, long head)
      throws SQLException {
    try (PreparedStatement st = c.prepareStatement(BEHIND)) {
      st.setArray(1, c.createArrayOf("varchar", tags.toArray()));
      st.setString(2, projection);
      st.setLong(3, head);
      try (ResultSet rs = st.executeQuery()) {
        rs.next();
        return rs.getLong(1);
      }
    }
  }
}
