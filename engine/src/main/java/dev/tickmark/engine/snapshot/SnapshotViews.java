package dev.tickmark.engine.snapshot;

import dev.tickmark.engine.snapshot.Snapshot.Manifest;
import dev.tickmark.engine.snapshot.Snapshot.Meter;
import dev.tickmark.engine.snapshot.Snapshot.Origin;
import dev.tickmark.engine.snapshot.Snapshot.State;
import dev.tickmark.engine.snapshot.Snapshot.Status;
import dev.tickmark.engine.snapshot.Snapshot.View;
import java.time.Duration;
import java.time.Instant;

/** A snapshot's state as a client sees it at {@code now}. Pure. */
final class SnapshotViews {
  private SnapshotViews() {}

  static View of(String id, State state, Instant now, Duration suspendedGrace) {
    if (state instanceof State.Uploading s)
      return view(
          id, s.origin(), Status.UPLOADING, s.manifest(), null, now, null, null, null, null);
    if (state instanceof State.Ready s)
      return view(
          id, s.origin(), Status.READY, s.manifest(), s.meter(), now, null, null, null, null);
    if (state instanceof State.Suspended s)
      return view(
          id,
          s.origin(),
          Status.SUSPENDED,
          s.manifest(),
          s.meter(),
          now,
          null,
          s.code(),
          s.since(),
          s.since().plus(suspendedGrace));
    if (state instanceof State.Failed s)
      return view(
              id, s.origin(), Status.FAILED, s.manifest(), null, now, s.at(), s.code(), null, null)
          .withDetail(s.detail());
    if (state instanceof State.Deleted s)
      return view(
              id,
              s.origin(),
              Status.DELETED,
              s.manifest(),
              s.meter(),
              null,
              s.at(),
              s.failure(),
              null,
              null)
          .withDetail(s.failureDetail());
    throw new IllegalArgumentException("no snapshot " + id);
  }

  /** {@code now}: null for a meter that stopped (deleted): what was settled last is final. */
  private static View view(
      String id,
      Origin o,
      Status status,
      Manifest m,
      Meter meter,
      Instant now,
      Instant endedAt,
      String failure,
      Instant suspendedAt,
      Instant deletesAt) {
    long seconds = 0;
    long cost = 0;
    if (meter != null && now == null) {
      seconds = meter.settledThrough();
      cost = meter.settledCost();
    } else if (meter != null) {
      seconds = Math.max(meter.settledThrough(), meter.billable(now));
      cost = meter.cost(seconds);
    }
    return new View(
        id,
        o.renterId(),
        status,
        o.rentalId(),
        o.hostId(),
        o.gpu(),
        o.region(),
        m == null ? 0 : m.sizeBytes(),
        m == null ? null : m.sha256(),
        m == null ? 0 : m.chunkCount(),
        o.createdAt(),
        meter == null ? null : meter.readyAt(),
        endedAt,
        seconds,
        cost,
        failure,
        null,
        suspendedAt,
        deletesAt);
  }
}
