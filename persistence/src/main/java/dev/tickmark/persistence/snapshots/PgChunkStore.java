package dev.tickmark.persistence.snapshots;

import dev.tickmark.engine.snapshot.ChunkStore;
import dev.tickmark.persistence.Jdbc;
import java.sql.Array;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletionStage;

/**
 * The {@link ChunkStore} in PostgreSQL: {@code snapshot_chunks} (one row per distinct chunk) and
 * {@code snapshot_manifests} (one row per position of a snapshot's list). Every call runs on the
 * {@link Jdbc} executor.
 *
 * <p>The collector and an upload never lose a chunk between them: {@link #putManifest} refreshes
 * {@code stored_at} of every chunk the manifest names that is already stored, which row-locks them
 * until its transaction commits. A collector deleting concurrently either waits for that lock and
 * then finds the row too young to delete, or deleted it first, and then the manifest's own query (a
 * later statement of the same transaction) no longer sees it and answers it as missing.
 */
public final class PgChunkStore implements ChunkStore {
  private final Jdbc jdbc;

  public PgChunkStore(Jdbc jdbc) {
    this.jdbc = jdbc;
  }

  @Override
  public CompletionStage<List<String>> putManifest(String snapshotId, List<String> chunks) {
    return jdbc.transaction(
        c -> {
          // two PUTs of one snapshot's manifest (an agent retrying) must not interleave their
          // delete and insert
          try (PreparedStatement st =
              c.prepareStatement("SELECT pg_advisory_xact_lock(hashtext(?))")) {
            st.setString(1, "snapshot-manifest:" + snapshotId);
            st.executeQuery().close();
          }
          if (!chunks.equals(read(c, snapshotId))) {
            try (PreparedStatement st =
                c.prepareStatement("DELETE FROM snapshot_manifests WHERE snapshot_id = ?")) {
              st.setString(1, snapshotId);
              st.executeUpdate();
            }
            try (PreparedStatement st =
                c.prepareStatement(
                    "INSERT INTO snapshot_manifests(snapshot_id, idx, sha256)"
                        + " SELECT ?, t.i - 1, t.sha FROM unnest(CAST(? AS text[])) WITH ORDINALITY AS t(sha, i)")) {
              st.setString(1, snapshotId);
              st.setArray(2, array(c, chunks));
              st.executeUpdate();
            }
          }
          try (PreparedStatement st =
              c.prepareStatement(
                  "UPDATE snapshot_chunks SET stored_at = now() WHERE sha256 = ANY(CAST(? AS text[]))")) {
            st.setArray(1, array(c, chunks));
            st.executeUpdate();
          }
          try (PreparedStatement st =
              c.prepareStatement(
                  "SELECT t.sha FROM unnest(CAST(? AS text[])) WITH ORDINALITY AS t(sha, i)"
                      + " WHERE NOT EXISTS (SELECT 1 FROM snapshot_chunks k WHERE k.sha256 = t.sha)"
                      + " GROUP BY t.sha ORDER BY min(t.i)")) {
            st.setArray(1, array(c, chunks));
            return strings(st);
          }
        });
  }

  @Override
  public CompletionStage<Optional<List<String>>> manifest(String snapshotId) {
    return jdbc.run(
        c -> {
          List<String> chunks = read(c, snapshotId);
          return chunks.isEmpty() ? Optional.<List<String>>empty() : Optional.of(chunks);
        });
  }

  @Override
  public CompletionStage<Boolean> names(String snapshotId, String sha256) {
    return jdbc.run(
        c -> {
          try (PreparedStatement st =
              c.prepareStatement(
                  "SELECT 1 FROM snapshot_manifests WHERE snapshot_id = ? AND sha256 = ? LIMIT 1")) {
            st.setString(1, snapshotId);
            st.setString(2, sha256);
            try (ResultSet rs = st.executeQuery()) {
              return rs.next();
            }
          }
        });
  }

  @Override
  public CompletionStage<List<String>> missing(String snapshotId) {
    return jdbc.run(
        c -> {
          try (PreparedStatement st =
              c.prepareStatement(
                  "SELECT m.sha256 FROM snapshot_manifests m WHERE m.snapshot_id = ?"
                      + " AND NOT EXISTS (SELECT 1 FROM snapshot_chunks k WHERE k.sha256 = m.sha256)"
                      + " GROUP BY m.sha256 ORDER BY min(m.idx)")) {
            st.setString(1, snapshotId);
            return strings(st);
          }
        });
  }

  @Override
  public CompletionStage<Void> putChunk(String sha256, byte[] bytes) {
    return jdbc.run(
        c -> {
          try (PreparedStatement st =
              c.prepareStatement(
                  "INSERT INTO snapshot_chunks(sha256, data, size_bytes) VALUES (?, ?, ?)"
                      + " ON CONFLICT (sha256) DO NOTHING")) {
            st.setString(1, sha256);
            st.setBytes(2, bytes);
            st.setInt(3, bytes.length);
            st.executeUpdate();
            return null;
          }
        });
  }

  @Override
  public CompletionStage<Optional<byte[]>> chunk(String sha256) {
    return jdbc.run(
        c -> {
          try (PreparedStatement st =
              c.prepareStatement("SELECT data FROM snapshot_chunks WHERE sha256 = ?")) {
            st.setString(1, sha256);
            try (ResultSet rs = st.executeQuery()) {
              return rs.next() ? Optional.of(rs.getBytes(1)) : Optional.<byte[]>empty();
            }
          }
        });
  }

  /**
   * Two statements, each its own transaction: the manifests of snapshots the read side has as
   * failed or deleted, then the chunks no manifest names that are older than the grace.
   */
  @Override
  public CompletionStage<Integer> collectOrphans(long graceSeconds) {
    return jdbc.run(
        c -> {
          try (PreparedStatement st =
              c.prepareStatement(
                  "DELETE FROM snapshot_manifests m USING snapshots s"
                      + " WHERE s.snapshot_id = m.snapshot_id AND s.status IN ('failed', 'deleted')")) {
            st.executeUpdate();
          }
          try (PreparedStatement st =
              c.prepareStatement(
                  "DELETE FROM snapshot_chunks k WHERE k.stored_at < now() - make_interval(secs => CAST(? AS double precision))"
                      + " AND NOT EXISTS (SELECT 1 FROM snapshot_manifests m WHERE m.sha256 = k.sha256)")) {
            st.setLong(1, graceSeconds);
            return st.executeUpdate();
          }
        });
  }

  private static List<String> read(Connection c, String snapshotId) throws SQLException {
    try (PreparedStatement st =
        c.prepareStatement(
            "SELECT sha256 FROM snapshot_manifests WHERE snapshot_id = ? ORDER BY idx")) {
      st.setString(1, snapshotId);
      return strings(st);
    }
  }

  private static Array array(Connection c, List<String> values) throws SQLException {
    return c.createArrayOf("text", values.toArray());
  }

  private static List<String> strings(PreparedStatement st) throws SQLException {
    try (ResultSet rs = st.executeQuery()) {
      List<String> out = new ArrayList<>();
      while (rs.next()) out.add(rs.getString(1));
      return out;
    }
  }
}
