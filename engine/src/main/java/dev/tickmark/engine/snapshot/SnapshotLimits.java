package dev.tickmark.engine.snapshot;

import dev.tickmark.engine.Rejection;

/** The size rules a manifest must pass (DESIGN.md: per snapshot and per account). Pure. */
final class SnapshotLimits {
  private SnapshotLimits() {}

  /** The refusal of a snapshot of {@code sizeBytes}, or null when it fits. */
  static Rejection refusal(Snapshot.Settings settings, long sizeBytes, long accountBytesElsewhere) {
    if (sizeBytes > settings.maxBytes()) return Rejection.SNAPSHOT_TOO_LARGE;
    // Written as a difference so that absurd numbers from the edge cannot overflow into a pass.
    if (accountBytesElsewhere < 0 || sizeBytes > settings.quotaBytes() - accountBytesElsewhere)
      return Rejection.QUOTA_EXCEEDED;
    return null;
  }

  /** The words of a refusal: the same for the same manifest, so a retry reads as the first. */
  static String detail(Snapshot.Settings settings, Rejection refusal, long sizeBytes) {
    if (refusal == Rejection.SNAPSHOT_TOO_LARGE)
      return "the snapshot is "
          + sizeBytes
          + " bytes; a snapshot may have at most "
          + settings.maxBytes();
    return "the account's snapshots would take more than its quota of "
        + settings.quotaBytes()
        + " bytes";
  }
}
