package dev.tickmark.agent.snapshot;

import java.util.List;

/**
 * A snapshot's archive as {@code manifest.json} keeps it beside the archive: which snapshot of
 * which rental, its size, the sha256 of the whole and of each {@link Chunks#SIZE} chunk in order.
 * Written last, so a folder with a manifest holds a complete archive.
 */
public record Manifest(
    String snapshotId, String rentalId, long sizeBytes, String sha256, List<String> chunks) {
  public static final String FILE = "manifest.json";

  public Manifest {
    chunks = chunks == null ? List.of() : List.copyOf(chunks);
  }

  static Manifest of(String snapshotId, String rentalId, Chunks.Cut cut) {
    return new Manifest(snapshotId, rentalId, cut.sizeBytes(), cut.sha256(), cut.chunks());
  }
}
