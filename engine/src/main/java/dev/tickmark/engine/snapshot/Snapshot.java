package dev.tickmark.engine.snapshot;

import com.fasterxml.jackson.annotation.JsonCreator;
import com.fasterxml.jackson.annotation.JsonValue;
import com.typesafe.config.Config;
import dev.tickmark.engine.CborSerializable;
import dev.tickmark.engine.account.Account;
import dev.tickmark.engine.host.Host;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Locale;
import java.util.stream.IntStream;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.RecipientRef;
import org.apache.pekko.cluster.sharding.typed.javadsl.EntityTypeKey;
import org.apache.pekko.pattern.StatusReply;

/**
 * A kept workspace (DESIGN.md, "Snapshots and storage"): {@code uploading → ready | failed}, {@code
 * ready ⇄ suspended}, then {@code deleted}. It owns its storage meter: from {@code ready} until
 * deleted, cumulative per-second cost ({@code StorageMetering}) captured from the renter's balance
 * through a hold (id = the snapshot id), all of it platform revenue ({@code
 * Account.CaptureStorage}). The bytes are the {@link ChunkStore}'s; this entity keeps only what
 * they add up to (size, sha256, chunk count) and who may read them.
 *
 * <p>Protocol only in this commit; the behaviour follows.
 */
public final class Snapshot {
  public static final EntityTypeKey<Command> ENTITY_KEY =
      EntityTypeKey.create(Command.class, "Snapshot");
  public static final int TAG_SLICES = 4;
  public static final String TAG_PREFIX = "snapshot-";

  public static String tagFor(String snapshotId) {
    return TAG_PREFIX + Math.floorMod(snapshotId.hashCode(), TAG_SLICES);
  }

  public static List<String> allTags() {
    return IntStream.range(0, TAG_SLICES).mapToObj(i -> TAG_PREFIX + i).toList();
  }

  /** The one snapshot a rental can keep: {@code snap_} and the rental id's random part. */
  public static String idForRental(String rentalId) {
    return "snap_" + (rentalId.startsWith("rnt_") ? rentalId.substring(4) : rentalId);
  }

  public enum Status {
    UPLOADING,
    READY,
    FAILED,
    SUSPENDED,
    DELETED;

    private final String wire = name().toLowerCase(Locale.ROOT);

    @JsonValue
    public String wire() {
      return wire;
    }

    @JsonCreator
    public static Status fromWire(String wire) {
      for (Status s : values()) if (s.wire.equals(wire)) return s;
      throw new IllegalArgumentException("unknown snapshot status " + wire);
    }
  }

  /**
   * {@code tickmark.snapshots.*}: price per GiB-month (µ€), the most bytes of one snapshot and of
   * one account's snapshots, how often storage is settled, how many seconds of storage a hold
   * covers, how long an upload may take, how often the host is reminded of an upload, how long a
   * snapshot stays suspended before it is deleted.
   */
  public record Settings(
      long pricePerGibMonth,
      long maxBytes,
      long quotaBytes,
      Duration settleInterval,
      long holdSeconds,
      Duration uploadTimeout,
      Duration uploadReminder,
      Duration suspendedGrace,
      Duration askTimeout) {
    public static Settings fromConfig(Config config) {
      Config s = config.getConfig("tickmark.snapshots");
      return new Settings(
          dev.tickmark.engine.money.Money.parse(s.getString("price-per-gib-month")),
          s.getBytes("max-bytes"),
          s.getBytes("quota-bytes"),
          s.getDuration("settle-interval"),
          s.getDuration("hold-duration").toSeconds(),
          s.getDuration("upload-timeout"),
          s.getDuration("upload-reminder"),
          s.getDuration("suspended-grace"),
          config.getDuration("tickmark.http.ask-timeout"));
    }
  }

  /** How a snapshot reaches the other entities; sharding in a node, probes in unit tests. */
  public interface Ports {
    RecipientRef<Account.Command> account(String accountId);

    RecipientRef<Host.Command> host(String hostId);
  }

  // ---------------------------------------------------------------------------------------------
  // Protocol

  public interface Command extends CborSerializable {}

  /**
   * From the rental stopped with {@code snapshot: true} (safe to deliver twice): starts the upload
   * from {@code hostId}, which is reminded ({@code Host.UploadSnapshot}) until it finishes or
   * fails.
   */
  public record Create(
      String renterId,
      String rentalId,
      String hostId,
      String gpu,
      String region,
      ActorRef<StatusReply<View>> replyTo)
      implements Command {}

  /**
   * From the HTTP edge, for the uploading host's agent: what the archive adds up to. Refused (and
   * the snapshot {@code failed}) with {@code snapshot_too_large} past the size limit, {@code
   * quota_exceeded} when {@code accountBytesElsewhere} (the account's other uploading, ready and
   * suspended snapshots) plus this would pass the quota. Another host → {@code not_found}. The same
   * manifest again answers as the first time.
   */
  public record RecordManifest(
      String hostId,
      long sizeBytes,
      String sha256,
      int chunkCount,
      long accountBytesElsewhere,
      ActorRef<StatusReply<View>> replyTo)
      implements Command {}

  /**
   * From the HTTP edge once the {@link ChunkStore} holds every chunk of the manifest: the snapshot
   * becomes {@code ready} and its meter starts. Safe to deliver twice.
   */
  public record Complete(String hostId, ActorRef<StatusReply<View>> replyTo) implements Command {}

  /** From the uploading host's agent: the upload cannot be done ({@code reason} for the renter). */
  public record Fail(String hostId, String reason, ActorRef<StatusReply<View>> replyTo)
      implements Command {}

  /** {@code renterId == null}: an operator or the system; another renter's → {@code not_found}. */
  public record Get(String renterId, ActorRef<StatusReply<View>> replyTo) implements Command {}

  /**
   * For a launch with {@code restore}: answers the view only when the snapshot is {@code ready} and
   * the renter's ({@code snapshot_not_ready} otherwise, {@code not_found} for another renter's).
   */
  public record Restore(String renterId, ActorRef<StatusReply<View>> replyTo) implements Command {}

  /**
   * The renter deletes it: metering stops now, the last second is captured and the hold released;
   * an upload in progress fails. Deleting a deleted snapshot answers it again.
   */
  public record Delete(String renterId, ActorRef<StatusReply<View>> replyTo) implements Command {}

  /**
   * What a client sees. {@code cost}: storage charged so far (µ€), live; {@code failure}: a stable
   * code ({@code snapshot_too_large}, {@code quota_exceeded}, {@code upload_timeout}, {@code
   * workspace_gone}, {@code agent_failed} …), {@code failureDetail} its words; {@code deletesAt}:
   * when a suspended snapshot will be deleted.
   */
  public record View(
      String id,
      String renterId,
      Status status,
      String rentalId,
      String hostId,
      String gpu,
      String region,
      long sizeBytes,
      String sha256,
      int chunkCount,
      Instant createdAt,
      Instant readyAt,
      Instant endedAt,
      long billedSeconds,
      long cost,
      String failure,
      String failureDetail,
      Instant suspendedAt,
      Instant deletesAt)
      implements CborSerializable {}

  // ---------------------------------------------------------------------------------------------
  // Events (the read side's projection follows them)

  public interface Event extends CborSerializable {
    Instant at();
  }

  public record Created(
      String renterId, String rentalId, String hostId, String gpu, String region, Instant at)
      implements Event {}

  public record ManifestRecorded(long sizeBytes, String sha256, int chunkCount, Instant at)
      implements Event {}

  public record Ready(Instant readyAt, long holdAmount, Instant at) implements Event {}

  public record UploadFailed(String code, String detail, Instant at) implements Event {}

  /** A storage settlement: cumulative seconds and cost from {@code ready}. */
  public record Settled(long throughSecond, long cumulativeCost, Instant at) implements Event {}

  public record HoldExtended(long newAmount, Instant at) implements Event {}

  public record Suspended(String code, Instant at) implements Event {}

  public record Resumed(Instant at) implements Event {}

  /** {@code byRenter}: the renter deleted it; otherwise the grace after a suspension ran out. */
  public record Deleted(boolean byRenter, long throughSecond, long cumulativeCost, Instant at)
      implements Event {}

  private Snapshot() {}
}
