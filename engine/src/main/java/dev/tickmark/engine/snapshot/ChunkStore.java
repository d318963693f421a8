package dev.tickmark.engine.snapshot;

import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletionStage;

/**
 * Where snapshot bytes live: content-addressed chunks (at most {@link #MAX_CHUNK_BYTES}, named by
 * the lower-case hex sha256 of their bytes, each stored once however many snapshots hold it) and,
 * per snapshot, its manifest: the ordered list of its chunks. PostgreSQL by default; an
 * S3-compatible store can implement the same. Every write is idempotent.
 *
 * <p>A chunk is kept while a manifest of a snapshot that is not failed or deleted names it; the
 * rest are collected ({@link #collectOrphans}).
 */
public interface ChunkStore {
  int MAX_CHUNK_BYTES = 4 * 1024 * 1024;

  /**
   * Records the manifest of {@code snapshotId} (the same list again is a no-op; a different one
   * replaces it, for an upload that started over) and answers the chunks of it not stored yet, in
   * manifest order, without duplicates.
   */
  CompletionStage<List<String>> putManifest(String snapshotId, List<String> chunks);

  /** The manifest of {@code snapshotId}, if one was recorded. */
  CompletionStage<Optional<List<String>>> manifest(String snapshotId);

  /**
   * Whether the recorded manifest of {@code snapshotId} names {@code sha256} (asked once per chunk
   * uploaded or restored, so a store should answer it without reading the whole list).
   */
  default CompletionStage<Boolean> names(String snapshotId, String sha256) {
    return manifest(snapshotId).thenApply(m -> m.map(list -> list.contains(sha256)).orElse(false));
  }

  /** The chunks of the recorded manifest not stored yet (empty: the snapshot is complete). */
  CompletionStage<List<String>> missing(String snapshotId);

  /**
   * Stores one chunk whose sha256 the caller has verified; storing a chunk already stored is a
   * no-op.
   */
  CompletionStage<Void> putChunk(String sha256, byte[] bytes);

  /** The bytes of one chunk, if stored. */
  CompletionStage<Optional<byte[]>> chunk(String sha256);

  /**
   * Drops the manifests of snapshots that failed or were deleted (as the read side knows them) and
   * then deletes every chunk no manifest names that was stored more than {@code graceSeconds} ago
   * (a chunk uploaded just before its manifest's snapshot failed, or an upload in flight, is given
   * that long). Answers how many chunks were deleted.
   */
  CompletionStage<Integer> collectOrphans(long graceSeconds);
}
