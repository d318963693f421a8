package dev.tickmark.engine.snapshot;

import static dev.tickmark.engine.Rejection.reply;

import com.fasterxml.jackson.annotation.JsonCreator;
import com.fasterxml.jackson.annotation.JsonValue;
import com.typesafe.config.Config;
import dev.tickmark.engine.CborSerializable;
import dev.tickmark.engine.JournalFailures;
import dev.tickmark.engine.Rejection;
import dev.tickmark.engine.SharedCommandHandler;
import dev.tickmark.engine.account.Account;
import dev.tickmark.engine.host.Host;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.stream.IntStream;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.Behavior;
import org.apache.pekko.actor.typed.RecipientRef;
import org.apache.pekko.actor.typed.javadsl.ActorContext;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.actor.typed.javadsl.TimerScheduler;
import org.apache.pekko.cluster.sharding.typed.ClusterShardingSettings;
import org.apache.pekko.cluster.sharding.typed.javadsl.ClusterSharding;
import org.apache.pekko.cluster.sharding.typed.javadsl.Entity;
import org.apache.pekko.cluster.sharding.typed.javadsl.EntityTypeKey;
import org.apache.pekko.pattern.StatusReply;
import org.apache.pekko.persistence.typed.PersistenceId;
import org.apache.pekko.persistence.typed.RecoveryCompleted;
import org.apache.pekko.persistence.typed.javadsl.CommandHandlerWithReply;
import org.apache.pekko.persistence.typed.javadsl.EventHandler;
import org.apache.pekko.persistence.typed.javadsl.EventHandlerBuilder;
import org.apache.pekko.persistence.typed.javadsl.EventSourcedBehaviorWithEnforcedReplies;
import org.apache.pekko.persistence.typed.javadsl.ReplyEffect;
import org.apache.pekko.persistence.typed.javadsl.RetentionCriteria;
import org.apache.pekko.persistence.typed.javadsl.SignalHandler;

/**
 * A kept workspace (DESIGN.md, "Snapshots and storage"): {@code uploading → ready | failed}, {@code
 * ready ⇄ suspended}, then {@code deleted}. It owns its storage meter: from {@code ready} until
 * deleted, cumulative per-second cost ({@code StorageMetering}) captured from the renter's balance
 * through a hold (id = the snapshot id), all of it platform revenue ({@code
 * Account.CaptureStorage}). The bytes are the {@link ChunkStore}'s; this entity keeps only what
 * they add up to (size, sha256, chunk count) and who may read them.
 *
 * <p>Billing and limits are pure rules ({@link StorageMetering}, {@link SnapshotLimits}); this
 * class holds the protocol, one command handler per state, and the event handlers. Captures are
 * recorded here first ({@link Settled}, cumulative) and then delivered until the account
 * acknowledges them, so a restart only delivers the last one again.
 */
public final class Snapshot
    extends EventSourcedBehaviorWithEnforcedReplies<
        Snapshot.Command, Snapshot.Event, Snapshot.State> {
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

  /** Brings the entity up (recovery resumes its timers and deliveries); changes nothing else. */
  public enum Wake implements Command {
    INSTANCE
  }

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
      implements CborSerializable {
    View withDetail(String detail) {
      return new View(
          id,
          renterId,
          status,
          rentalId,
          hostId,
          gpu,
          region,
          sizeBytes,
          sha256,
          chunkCount,
          createdAt,
          readyAt,
          endedAt,
          billedSeconds,
          cost,
          failure,
          detail,
          suspendedAt,
          deletesAt);
    }
  }

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

  /**
   * {@code holdAmount}: the hold placed at {@code ready} (0: refused, a {@link Suspended} follows);
   * {@code pricePerGibMonth}: the price frozen for the snapshot's life.
   */
  public record Ready(Instant readyAt, long holdAmount, Instant at, long pricePerGibMonth)
      implements Event {}

  public record UploadFailed(String code, String detail, Instant at) implements Event {}

  /** A storage settlement: cumulative seconds and cost from {@code ready}. */
  public record Settled(long throughSecond, long cumulativeCost, Instant at) implements Event {}

  /** The hold now reserves {@code newAmount} in total (also a hold placed again when resumed). */
  public record HoldExtended(long newAmount, Instant at) implements Event {}

  public record Suspended(String code, Instant at) implements Event {}

  public record Resumed(Instant at) implements Event {}

  /** {@code byRenter}: the renter deleted it; otherwise the grace after a suspension ran out. */
  public record Deleted(boolean byRenter, long throughSecond, long cumulativeCost, Instant at)
      implements Event {}

  /** After {@link Deleted}: the final capture landed and the hold was released; nothing is owed. */
  public record Closed(Instant at) implements Event {}

  // ---------------------------------------------------------------------------------------------
  // State: one type per lifecycle step

  /** Who kept it and from where; fixed at creation. */
  public record Origin(
      String renterId, String rentalId, String hostId, String gpu, String region, Instant createdAt)
      implements CborSerializable {}

  /** What the archive adds up to, as the agent's manifest says. */
  public record Manifest(long sizeBytes, String sha256, int chunkCount)
      implements CborSerializable {
    boolean sameAs(RecordManifest m) {
      return sizeBytes == m.sizeBytes()
          && sha256.equals(m.sha256())
          && chunkCount == m.chunkCount();
    }
  }

  /**
   * The storage meter from {@code ready}: the frozen price, the hold as the account acknowledged it
   * (0: none placed) and the last recorded settlement.
   */
  public record Meter(
      Instant readyAt,
      long pricePerGibMonth,
      long sizeBytes,
      long holdAmount,
      long settledThrough,
      long settledCost)
      implements CborSerializable {
    long cost(long second) {
      return StorageMetering.cost(pricePerGibMonth, sizeBytes, second);
    }

    long holdFor(long second) {
      return StorageMetering.holdFor(pricePerGibMonth, sizeBytes, second);
    }

    /** The last second the hold pays for (0 without one). */
    long covered() {
      return holdAmount == 0
          ? 0
          : StorageMetering.secondsCovered(pricePerGibMonth, sizeBytes, holdAmount);
    }

    long elapsed(Instant now) {
      return Math.max(0, Duration.between(readyAt, now).getSeconds());
    }

    /** What may be billed at {@code now}: the seconds since ready, as far as the hold covers. */
    long billable(Instant now) {
      return Math.min(elapsed(now), covered());
    }

    Meter withHold(long amount) {
      return new Meter(readyAt, pricePerGibMonth, sizeBytes, amount, settledThrough, settledCost);
    }

    Meter settled(long through, long cost) {
      return new Meter(readyAt, pricePerGibMonth, sizeBytes, holdAmount, through, cost);
    }
  }

  public sealed interface State extends CborSerializable {
    enum Empty implements State {
      INSTANCE
    }

    /** {@code manifest}: null until the agent sent one. */
    record Uploading(Origin origin, Manifest manifest) implements State {}

    record Ready(Origin origin, Manifest manifest, Meter meter) implements State {}

    record Suspended(Origin origin, Manifest manifest, Meter meter, String code, Instant since)
        implements State {}

    record Failed(Origin origin, Manifest manifest, String code, String detail, Instant at)
        implements State {}

    /**
     * {@code meter}: null when it was never ready; {@code closed}: the final capture and the
     * release were acknowledged.
     */
    record Deleted(
        Origin origin,
        Manifest manifest,
        Meter meter,
        String failure,
        String failureDetail,
        Instant at,
        boolean closed)
        implements State {}
  }

  // ---------------------------------------------------------------------------------------------
  // Timers and answers (actor-local)

  enum Timer implements Command {
    REMIND,
    UPLOAD_EXPIRED,
    SETTLE,
    GRACE_EXPIRED,
    REDELIVER
  }

  /** The account's answer to the hold placed at {@code ready}. */
  private record HoldAnswer(long amount, Rejection refusal) implements Command {}

  /**
   * The answer to growing (or, while suspended without one, placing) the hold to {@code amount}:
   * {@code held}, what the hold reserves now as the account says; {@code fallback}: the smaller
   * amount that only covers the seconds since, to ask next if this was refused while suspended (0:
   * none); {@code placing}: it was a {@code PlaceHold}.
   */
  private record ExtendAnswer(
      long amount, long held, long fallback, boolean placing, Rejection refusal)
      implements Command {}

  private record CaptureAnswer(long throughSecond, Rejection refusal) implements Command {}

  private record ReleaseAnswer(boolean ok) implements Command {}

  // ---------------------------------------------------------------------------------------------

  private static final Set<Rejection> OUT_OF_MONEY =
      Set.of(
          Rejection.INSUFFICIENT_FUNDS, Rejection.SPEND_CAP_REACHED, Rejection.ACCOUNT_SUSPENDED);

  private final String snapshotId;
  private final Settings settings;
  private final Ports ports;
  private final Clock clock;
  private final ActorContext<Command> context;
  private final TimerScheduler<Command> timers;
  // Actor-local: who waits for the ready answer, what the account acknowledged, asks in flight.
  private final List<ActorRef<StatusReply<View>>> completers = new ArrayList<>();
  private boolean placingHold;
  private boolean extending;
  private long capturedThrough = -1; // unknown after a restart: the last settlement is sent again
  private boolean released;
  private int failedDeliveries;

  /**
   * Not passivated when idle: a ready snapshot hears nothing from outside for months, yet its meter
   * (settle timer), its hold and its suspension grace must keep running. After its node is lost it
   * comes back on the next message; {@link Wake} is that message for a waker reading the unfinished
   * snapshots from the read side (as the rentals' is).
   */
  public static void init(ActorSystem<?> system, Settings settings, Ports ports, Clock clock) {
    ClusterSharding.get(system)
        .init(
            Entity.of(ENTITY_KEY, ctx -> create(ctx.getEntityId(), settings, ports, clock))
                .withSettings(ClusterShardingSettings.create(system).withNoPassivationStrategy()));
  }

  public static Behavior<Command> create(
      String snapshotId, Settings settings, Ports ports, Clock clock) {
    return Behaviors.setup(
        ctx ->
            Behaviors.withTimers(
                timers -> new Snapshot(snapshotId, settings, ports, clock, ctx, timers)));
  }

  private Snapshot(
      String snapshotId,
      Settings settings,
      Ports ports,
      Clock clock,
      ActorContext<Command> context,
      TimerScheduler<Command> timers) {
    super(PersistenceId.of(ENTITY_KEY.name(), snapshotId), JournalFailures.RESTART_WITH_BACKOFF);
    this.snapshotId = snapshotId;
    this.settings = settings;
    this.ports = ports;
    this.clock = clock;
    this.context = context;
    this.timers = timers;
  }

  @Override
  public State emptyState() {
    return State.Empty.INSTANCE;
  }

  @Override
  public Set<String> tagsFor(Event event) {
    return Set.of(tagFor(snapshotId));
  }

  @Override
  public RetentionCriteria retentionCriteria() {
    // Snapshots bound recovery; the events of a money-bearing entity are never deleted.
    return RetentionCriteria.snapshotEvery(100, 2);
  }

  @Override
  public SignalHandler<State> signalHandler() {
    return newSignalHandlerBuilder().onSignal(RecoveryCompleted.instance(), this::resume).build();
  }

  /** After a restart: timers from the deadlines in the state, and every delivery again. */
  private void resume(State state) {
    if (state instanceof State.Uploading u) uploading(u.origin());
    else if (state instanceof State.Ready r) metering(r.origin(), r.meter(), null);
    else if (state instanceof State.Suspended s) metering(s.origin(), s.meter(), s.since());
    else if (state instanceof State.Failed f) releaseFailed(f);
    else if (state instanceof State.Deleted d) finish(d);
  }

  // ---------------------------------------------------------------------------------------------
  // Commands: one handler per state, then what every state answers alike. The table is built once
  // for every snapshot (SharedCommandHandler): each handler takes the snapshot it runs for, and a
  // ready snapshot stays in memory for as long as it is kept.

  private static final SharedCommandHandler<Snapshot, Command, Event, State> COMMANDS = commands();

  @Override
  public CommandHandlerWithReply<Command, Event, State> commandHandler() {
    return (state, command) -> COMMANDS.apply(this, state, command);
  }

  private static SharedCommandHandler<Snapshot, Command, Event, State> commands() {
    var builder = SharedCommandHandler.<Snapshot, Command, Event, State>builder();
    emptyHandler(builder.forStateType(State.Empty.class));
    uploadingHandler(builder.forStateType(State.Uploading.class));
    readyHandler(builder.forStateType(State.Ready.class));
    suspendedHandler(builder.forStateType(State.Suspended.class));
    failedHandler(builder.forStateType(State.Failed.class));
    deletedHandler(builder.forStateType(State.Deleted.class));
    anyStateHandler(builder.forStateType(State.class));
    return builder.build();
  }

  private static void emptyHandler(
      SharedCommandHandler.ForState<Snapshot, State.Empty, Command, Event, State> empty) {
    empty
        .onCommand(Create.class, Snapshot::onCreate)
        .onCommand(RecordManifest.class, (n, s, c) -> n.Effect().reply(c.replyTo(), n.notFound()))
        .onCommand(Complete.class, (n, s, c) -> n.Effect().reply(c.replyTo(), n.notFound()))
        .onCommand(Fail.class, (n, s, c) -> n.Effect().reply(c.replyTo(), n.notFound()))
        .onCommand(Get.class, (n, s, c) -> n.Effect().reply(c.replyTo(), n.notFound()))
        .onCommand(Restore.class, (n, s, c) -> n.Effect().reply(c.replyTo(), n.notFound()))
        .onCommand(Delete.class, (n, s, c) -> n.Effect().reply(c.replyTo(), n.notFound()));
  }

  private static void uploadingHandler(
      SharedCommandHandler.ForState<Snapshot, State.Uploading, Command, Event, State> uploading) {
    uploading
        .onCommand(RecordManifest.class, Snapshot::onManifest)
        .onCommand(Complete.class, Snapshot::onComplete)
        .onCommand(Fail.class, Snapshot::onFail)
        .onCommand(HoldAnswer.class, Snapshot::onHoldAnswer)
        .onCommand(Delete.class, Snapshot::onDeleteUnmetered)
        .onCommand(Timer.REMIND::equals, Snapshot::onRemind)
        .onCommand(Timer.UPLOAD_EXPIRED::equals, Snapshot::onUploadExpired);
  }

  private static void readyHandler(
      SharedCommandHandler.ForState<Snapshot, State.Ready, Command, Event, State> ready) {
    ready
        .onCommand(RecordManifest.class, Snapshot::sameManifest)
        .onCommand(Complete.class, Snapshot::onCompleteAgain)
        .onCommand(Restore.class, Snapshot::onRestore)
        .onCommand(Delete.class, Snapshot::onDeleteReady)
        .onCommand(Timer.SETTLE::equals, Snapshot::onSettle)
        .onCommand(ExtendAnswer.class, Snapshot::onExtendAnswer)
        .onCommand(CaptureAnswer.class, (n, s, c) -> n.onCaptureAnswer(c))
        .onCommand(Timer.REDELIVER::equals, (n, s, c) -> n.redeliver(s.origin(), s.meter()));
  }

  private static void suspendedHandler(
      SharedCommandHandler.ForState<Snapshot, State.Suspended, Command, Event, State> suspended) {
    suspended
        .onCommand(RecordManifest.class, Snapshot::sameManifest)
        .onCommand(Complete.class, Snapshot::onCompleteAgain)
        .onCommand(Delete.class, Snapshot::onDeleteSuspended)
        .onCommand(Timer.SETTLE::equals, Snapshot::onSettleSuspended)
        .onCommand(ExtendAnswer.class, Snapshot::onResumeAnswer)
        .onCommand(Timer.GRACE_EXPIRED::equals, Snapshot::onGraceExpired)
        .onCommand(CaptureAnswer.class, (n, s, c) -> n.onCaptureAnswer(c))
        .onCommand(Timer.REDELIVER::equals, (n, s, c) -> n.redeliver(s.origin(), s.meter()));
  }

  private static void failedHandler(
      SharedCommandHandler.ForState<Snapshot, State.Failed, Command, Event, State> failed) {
    failed
        .onCommand(RecordManifest.class, Snapshot::onManifestFailed)
        .onCommand(Complete.class, Snapshot::onCompleteFailed)
        .onCommand(Delete.class, Snapshot::onDeleteUnmetered)
        .onCommand(ReleaseAnswer.class, Snapshot::onFailedReleaseAnswer)
        .onCommand(Timer.REDELIVER::equals, Snapshot::onRedeliverFailed);
  }

  private static void deletedHandler(
      SharedCommandHandler.ForState<Snapshot, State.Deleted, Command, Event, State> deleted) {
    deleted
        .onCommand(RecordManifest.class, (n, s, c) -> n.Effect().reply(c.replyTo(), n.notFound()))
        .onCommand(Complete.class, (n, s, c) -> n.Effect().reply(c.replyTo(), n.notFound()))
        .onCommand(Delete.class, (n, s, c) -> n.replyView(s, c.renterId(), c.replyTo()))
        .onCommand(CaptureAnswer.class, Snapshot::onFinalCaptureAnswer)
        .onCommand(ReleaseAnswer.class, Snapshot::onReleaseAnswer)
        .onCommand(Timer.REDELIVER::equals, (n, s, c) -> n.finishAgain(s));
  }

  /** Alike in every state: reads, duplicates, and answers that arrive after the state moved on. */
  private static void anyStateHandler(
      SharedCommandHandler.ForState<Snapshot, State, Command, Event, State> any) {
    any.onCommand(Create.class, Snapshot::answerCreateAgain)
        .onCommand(Get.class, (n, s, c) -> n.replyView(s, c.renterId(), c.replyTo()))
        .onCommand(Restore.class, Snapshot::onRestoreNotReady)
        .onCommand(Fail.class, Snapshot::answerFailFromHost)
        .onCommand(HoldAnswer.class, Snapshot::onLateHoldAnswer)
        .onCommand(Command.class, (n, s, c) -> n.Effect().noReply());
  }

  private ReplyEffect<Event, State> onDeleteReady(State.Ready state, Delete cmd) {
    return deleteMetered(state.origin(), state.manifest(), state.meter(), cmd);
  }

  private ReplyEffect<Event, State> onDeleteSuspended(State.Suspended state, Delete cmd) {
    return deleteMetered(state.origin(), state.manifest(), state.meter(), cmd);
  }

  private ReplyEffect<Event, State> onRedeliverFailed(State.Failed state, Command timer) {
    releaseFailed(state);
    return Effect().noReply();
  }

  private ReplyEffect<Event, State> answerCreateAgain(State state, Create cmd) {
    return Effect().reply(cmd.replyTo(), view(state, cmd.renterId()));
  }

  private ReplyEffect<Event, State> answerFailFromHost(State state, Fail cmd) {
    return Effect().reply(cmd.replyTo(), hostView(state, cmd.hostId()));
  }

  // ---- creation and upload

  private ReplyEffect<Event, State> onCreate(State.Empty state, Create cmd) {
    return Effect()
        .persist(
            new Created(
                cmd.renterId(), cmd.rentalId(), cmd.hostId(), cmd.gpu(), cmd.region(), now()))
        .thenRun(s -> uploading(((State.Uploading) s).origin()))
        .thenReply(cmd.replyTo(), s -> StatusReply.success(view(s)));
  }

  /** The host is told at once and then every reminder; the upload fails at its deadline. */
  private void uploading(Origin origin) {
    remind(origin);
    timers.startTimerAtFixedRate(Timer.REMIND, Timer.REMIND, settings.uploadReminder());
    timers.startSingleTimer(
        Timer.UPLOAD_EXPIRED,
        Timer.UPLOAD_EXPIRED,
        untilOrZero(origin.createdAt().plus(settings.uploadTimeout())));
  }

  private void remind(Origin origin) {
    ports
        .host(origin.hostId())
        .tell(new Host.UploadSnapshot(origin.rentalId(), snapshotId, List.of()));
  }

  private ReplyEffect<Event, State> onRemind(State.Uploading state, Command timer) {
    remind(state.origin());
    return Effect().noReply();
  }

  private ReplyEffect<Event, State> onUploadExpired(State.Uploading state, Command timer) {
    return fail(
        "upload_timeout",
        "the upload did not complete within " + settings.uploadTimeout().toMinutes() + " minutes");
  }

  private ReplyEffect<Event, State> fail(String code, String detail) {
    return Effect()
        .persist(new UploadFailed(code, detail, now()))
        .thenRun(this::failed)
        .thenNoReply();
  }

  private void failed(State state) {
    uploadOver();
    releaseFailed((State.Failed) state);
  }

  /**
   * A failed upload holds nothing, but once its manifest was recorded the agent's complete may have
   * asked for the hold, and the account placed it with its answer lost (or it is still on the way):
   * the hold id is released, which releases such a hold or leaves a tombstone that refuses it.
   * Retried until the account answers, and after a restart (answered from the closed hold or the
   * tombstone, nothing written).
   */
  private void releaseFailed(State.Failed state) {
    if (state.manifest() != null) release(state.origin());
  }

  private ReplyEffect<Event, State> onFailedReleaseAnswer(State.Failed state, ReleaseAnswer a) {
    if (a.ok()) failedDeliveries = 0;
    else redeliverLater();
    return Effect().noReply();
  }

  private void uploadOver() {
    timers.cancel(Timer.REMIND);
    timers.cancel(Timer.UPLOAD_EXPIRED);
  }

  private ReplyEffect<Event, State> onManifest(State.Uploading state, RecordManifest cmd) {
    if (!state.origin().hostId().equals(cmd.hostId()))
      return Effect().reply(cmd.replyTo(), notFound());
    if (cmd.sizeBytes() < 0 || cmd.chunkCount() < 0 || cmd.sha256() == null)
      return Effect()
          .reply(
              cmd.replyTo(),
              reply(Rejection.INVALID_AMOUNT, "a manifest has a size, a sha256 and its chunks"));
    if (state.manifest() != null && state.manifest().sameAs(cmd))
      return Effect().reply(cmd.replyTo(), StatusReply.success(view(state)));
    ManifestRecorded recorded =
        new ManifestRecorded(cmd.sizeBytes(), cmd.sha256(), cmd.chunkCount(), now());
    Rejection refusal =
        SnapshotLimits.refusal(settings, cmd.sizeBytes(), cmd.accountBytesElsewhere());
    if (refusal == null)
      return Effect().persist(recorded).thenReply(cmd.replyTo(), s -> StatusReply.success(view(s)));
    String detail = SnapshotLimits.detail(settings, refusal, cmd.sizeBytes());
    return Effect()
        .persist(List.of(recorded, new UploadFailed(refusal.wire(), detail, now())))
        .thenRun(s -> uploadOver())
        .thenReply(cmd.replyTo(), s -> reply(refusal, detail));
  }

  /** The same manifest again answers as the first time; any other is refused. */
  private ReplyEffect<Event, State> sameManifest(State state, RecordManifest cmd) {
    if (!originOf(state).hostId().equals(cmd.hostId()))
      return Effect().reply(cmd.replyTo(), notFound());
    if (manifestOf(state).sameAs(cmd))
      return Effect().reply(cmd.replyTo(), StatusReply.success(view(state)));
    return Effect()
        .reply(
            cmd.replyTo(),
            reply(Rejection.IDEMPOTENCY_CONFLICT, "the snapshot has another manifest already"));
  }

  private ReplyEffect<Event, State> onManifestFailed(State.Failed state, RecordManifest cmd) {
    if (!state.origin().hostId().equals(cmd.hostId()))
      return Effect().reply(cmd.replyTo(), notFound());
    return Effect().reply(cmd.replyTo(), failure(state));
  }

  /** A failed snapshot answers with its failure: the limit it broke, or that it is not ready. */
  private static <T> StatusReply<T> failure(State.Failed state) {
    Rejection code =
        Rejection.SNAPSHOT_TOO_LARGE.wire().equals(state.code())
            ? Rejection.SNAPSHOT_TOO_LARGE
            : Rejection.QUOTA_EXCEEDED.wire().equals(state.code())
                ? Rejection.QUOTA_EXCEEDED
                : Rejection.SNAPSHOT_NOT_READY;
    return reply(
        code, code == Rejection.SNAPSHOT_NOT_READY ? "failed: " + state.detail() : state.detail());
  }

  private ReplyEffect<Event, State> onFail(State.Uploading state, Fail cmd) {
    if (!state.origin().hostId().equals(cmd.hostId()))
      return Effect().reply(cmd.replyTo(), notFound());
    String reason = cmd.reason() == null || cmd.reason().isBlank() ? "agent_failed" : cmd.reason();
    String code = "workspace_gone".equals(reason) ? reason : "agent_failed";
    return Effect()
        .persist(new UploadFailed(code, reason, now()))
        .thenRun(this::failed)
        .thenReply(cmd.replyTo(), s -> StatusReply.success(view(s)));
  }

  // ---- ready: the hold first

  private ReplyEffect<Event, State> onComplete(State.Uploading state, Complete cmd) {
    if (!state.origin().hostId().equals(cmd.hostId()))
      return Effect().reply(cmd.replyTo(), notFound());
    if (state.manifest() == null)
      return Effect()
          .reply(cmd.replyTo(), reply(Rejection.CHUNKS_MISSING, "no manifest was recorded"));
    completers.add(cmd.replyTo());
    if (!placingHold) placeHold(state);
    return Effect().noReply();
  }

  private void placeHold(State.Uploading state) {
    placingHold = true;
    long amount =
        StorageMetering.holdFor(
            settings.pricePerGibMonth(), state.manifest().sizeBytes(), settings.holdSeconds());
    context.askWithStatus(
        Account.HoldView.class,
        ports.account(state.origin().renterId()),
        settings.askTimeout(),
        reply -> new Account.PlaceHold(snapshotId, amount, reply),
        (hold, failure) -> new HoldAnswer(amount, Rejection.codeOf(failure)));
  }

  /**
   * Placed: ready, metered from now at today's price. Refused for want of money: ready and at once
   * suspended (no hold, nothing billable until one is placed). Anything else: the agent's complete
   * is refused and retried, and the same hold asked again (the account answers it as placed).
   */
  private ReplyEffect<Event, State> onHoldAnswer(State.Uploading state, HoldAnswer answer) {
    placingHold = false;
    List<ActorRef<StatusReply<View>>> waiting = List.copyOf(completers);
    completers.clear();
    Instant now = now();
    if (answer.refusal() != null && !OUT_OF_MONEY.contains(answer.refusal())) {
      waiting.forEach(
          r -> r.tell(reply(Rejection.UNAVAILABLE, "the renter's account did not answer; retry")));
      return Effect().noReply();
    }
    List<Event> events = new ArrayList<>();
    long held = answer.refusal() == null ? answer.amount() : 0;
    events.add(new Ready(now, held, now, settings.pricePerGibMonth()));
    if (answer.refusal() != null) events.add(new Suspended(answer.refusal().wire(), now));
    return Effect()
        .persist(events)
        .thenRun(
            s -> {
              uploadOver();
              resume(s);
              waiting.forEach(r -> r.tell(StatusReply.success(view(s))));
            })
        .thenNoReply();
  }

  /** A hold that the account placed after the upload failed or was deleted goes straight back. */
  private ReplyEffect<Event, State> onLateHoldAnswer(State state, HoldAnswer answer) {
    placingHold = false;
    boolean over = state instanceof State.Failed || state instanceof State.Deleted;
    if (answer.refusal() == null && over)
      ports
          .account(renterOf(state))
          .tell(new Account.ReleaseHold(snapshotId, context.getSystem().ignoreRef()));
    completers.forEach(r -> r.tell(StatusReply.success(view(state))));
    completers.clear();
    return Effect().noReply();
  }

  private ReplyEffect<Event, State> onCompleteAgain(State state, Complete cmd) {
    return Effect().reply(cmd.replyTo(), hostView(state, cmd.hostId()));
  }

  private ReplyEffect<Event, State> onCompleteFailed(State.Failed state, Complete cmd) {
    if (!state.origin().hostId().equals(cmd.hostId()))
      return Effect().reply(cmd.replyTo(), notFound());
    return Effect()
        .reply(
            cmd.replyTo(),
            reply(Rejection.SNAPSHOT_NOT_READY, "the upload failed: " + state.code()));
  }

  // ---- metering

  /** Settling at every interval; while suspended, the grace runs from the suspension. */
  private void metering(Origin origin, Meter meter, Instant suspendedSince) {
    timers.startTimerAtFixedRate(Timer.SETTLE, Timer.SETTLE, settings.settleInterval());
    if (suspendedSince != null)
      timers.startSingleTimer(
          Timer.GRACE_EXPIRED,
          Timer.GRACE_EXPIRED,
          untilOrZero(suspendedSince.plus(settings.suspendedGrace())));
    else timers.cancel(Timer.GRACE_EXPIRED);
    deliver(origin, meter);
  }

  /**
   * Records the seconds the hold covers and captures them; grows the hold when less than half of a
   * hold's worth of seconds is left. A refusal for want of money suspends ({@link
   * #onExtendAnswer}).
   */
  private ReplyEffect<Event, State> onSettle(State.Ready state, Command timer) {
    Meter meter = state.meter();
    Instant now = now();
    long elapsed = meter.elapsed(now);
    long covered = meter.covered();
    if (!extending && covered - elapsed < settings.holdSeconds() / 2) {
      long amount = meter.holdFor(saturatedAdd(elapsed, settings.holdSeconds()));
      if (amount > meter.holdAmount()) askHold(state.origin(), meter, amount, 0, false);
    }
    return settle(meter, now);
  }

  /**
   * Tries to cover the seconds since and another hold's worth, else at least to the next settle.
   */
  private ReplyEffect<Event, State> onSettleSuspended(State.Suspended state, Command timer) {
    Meter meter = state.meter();
    Instant now = now();
    long elapsed = meter.elapsed(now);
    if (!extending) {
      long full = meter.holdFor(saturatedAdd(elapsed, settings.holdSeconds()));
      long least = meter.holdFor(saturatedAdd(elapsed, settings.settleInterval().toSeconds()));
      if (full > meter.holdAmount())
        askHold(state.origin(), meter, full, least < full ? least : 0, false);
    }
    return settle(meter, now);
  }

  private ReplyEffect<Event, State> settle(Meter meter, Instant now) {
    // Recorded first, then delivered: the journal is the truth a restart delivers again.
    long through = meter.billable(now);
    if (through <= meter.settledThrough()) return Effect().noReply();
    return Effect()
        .persist(new Settled(through, meter.cost(through), now))
        .thenRun(s -> deliver(originOf(s), meterOf(s)))
        .thenNoReply();
  }

  /**
   * A hold never placed (refused at ready) is placed now; one that exists is grown. {@code extend}:
   * grow it even so — a placement whose answer was lost may have placed it.
   */
  private void askHold(Origin origin, Meter meter, long amount, long fallback, boolean extend) {
    extending = true;
    boolean placing = meter.holdAmount() == 0 && !extend;
    context.askWithStatus(
        Account.HoldView.class,
        ports.account(origin.renterId()),
        settings.askTimeout(),
        reply ->
            placing
                ? new Account.PlaceHold(snapshotId, amount, reply)
                : new Account.ExtendHold(snapshotId, amount, reply),
        (hold, failure) ->
            new ExtendAnswer(
                amount,
                hold == null ? 0 : hold.amount(),
                fallback,
                placing,
                Rejection.codeOf(failure)));
  }

  /**
   * A placement refused as a conflict found a hold under this id (an earlier placement whose answer
   * was lost, of another amount): it is grown instead.
   */
  private boolean placedBefore(Origin origin, Meter meter, ExtendAnswer answer) {
    if (!answer.placing() || answer.refusal() != Rejection.IDEMPOTENCY_CONFLICT) return false;
    askHold(origin, meter, answer.amount(), answer.fallback(), true);
    return true;
  }

  private ReplyEffect<Event, State> onExtendAnswer(State.Ready state, ExtendAnswer answer) {
    extending = false;
    if (placedBefore(state.origin(), state.meter(), answer)) return Effect().noReply();
    if (answer.refusal() == null) {
      if (answer.held() <= state.meter().holdAmount()) return Effect().noReply();
      return Effect().persist(new HoldExtended(answer.held(), now())).thenNoReply();
    }
    if (!OUT_OF_MONEY.contains(answer.refusal())) return Effect().noReply(); // next settle
    return Effect()
        .persist(new Suspended(answer.refusal().wire(), now()))
        .thenRun(s -> resume(s))
        .thenNoReply();
  }

  /** The hold covers the seconds since: they are captured and the snapshot is ready again. */
  private ReplyEffect<Event, State> onResumeAnswer(State.Suspended state, ExtendAnswer answer) {
    extending = false;
    if (placedBefore(state.origin(), state.meter(), answer)) return Effect().noReply();
    if (answer.refusal() != null) {
      if (OUT_OF_MONEY.contains(answer.refusal()) && answer.fallback() > 0)
        askHold(state.origin(), state.meter(), answer.fallback(), 0, !answer.placing());
      return Effect().noReply();
    }
    Instant now = now();
    Meter held = state.meter().withHold(Math.max(answer.held(), state.meter().holdAmount()));
    List<Event> events = new ArrayList<>();
    if (held.holdAmount() > state.meter().holdAmount())
      events.add(new HoldExtended(held.holdAmount(), now));
    long through = held.billable(now);
    if (through > held.settledThrough()) events.add(new Settled(through, held.cost(through), now));
    events.add(new Resumed(now));
    return Effect().persist(events).thenRun(s -> resume(s)).thenNoReply();
  }

  // ---- capture deliveries: cumulative, keyed snapshotId:second, retried until acknowledged

  private void deliver(Origin origin, Meter meter) {
    if (meter.settledThrough() <= 0 || meter.settledThrough() <= capturedThrough) return;
    long through = meter.settledThrough();
    long cumulative = meter.settledCost();
    context.askWithStatus(
        Account.Posting.class,
        ports.account(origin.renterId()),
        settings.askTimeout(),
        reply -> new Account.CaptureStorage(snapshotId, through, cumulative, reply),
        (posting, failure) -> new CaptureAnswer(through, Rejection.codeOf(failure)));
  }

  private ReplyEffect<Event, State> onCaptureAnswer(CaptureAnswer answer) {
    acknowledged(answer);
    return Effect().noReply();
  }

  /**
   * True when the capture needs no retry. A conflict means the account has this key with other
   * numbers: retrying would not change that, so (as a rental's delivery does) it counts as
   * answered.
   */
  private boolean acknowledged(CaptureAnswer answer) {
    if (answer.refusal() != null && answer.refusal() != Rejection.IDEMPOTENCY_CONFLICT) {
      if (answer.refusal() == Rejection.HOLD_CLOSED
          || answer.refusal() == Rejection.HOLD_NOT_FOUND) {
        context.getLog().error("storage capture of {} refused: {}", snapshotId, answer.refusal());
      } else {
        redeliverLater();
        return false;
      }
    }
    failedDeliveries = 0;
    capturedThrough = Math.max(capturedThrough, answer.throughSecond());
    return true;
  }

  private ReplyEffect<Event, State> redeliver(Origin origin, Meter meter) {
    deliver(origin, meter);
    return Effect().noReply();
  }

  private void redeliverLater() {
    long factor = 1L << Math.min(failedDeliveries++, 3);
    timers.startSingleTimer(
        Timer.REDELIVER, Timer.REDELIVER, settings.askTimeout().multipliedBy(factor));
  }

  // ---- deletion

  private ReplyEffect<Event, State> onGraceExpired(State.Suspended state, Command timer) {
    Meter meter = state.meter();
    Instant now = now();
    long through = Math.max(meter.settledThrough(), meter.billable(now));
    return Effect()
        .persist(new Deleted(false, through, meter.cost(through), now))
        .thenRun(s -> finish((State.Deleted) s))
        .thenNoReply();
  }

  /** The renter deletes a metered snapshot: the last covered second is billed now. */
  private ReplyEffect<Event, State> deleteMetered(
      Origin origin, Manifest manifest, Meter meter, Delete cmd) {
    if (!mayRead(origin, cmd.renterId())) return Effect().reply(cmd.replyTo(), notFound());
    Instant now = now();
    long through = Math.max(meter.settledThrough(), meter.billable(now));
    return Effect()
        .persist(new Deleted(true, through, meter.cost(through), now))
        .thenRun(s -> finish((State.Deleted) s))
        .thenReply(cmd.replyTo(), s -> StatusReply.success(view(s)));
  }

  /**
   * Deleting while uploading (the upload stops: reminders end and the agent's later calls answer
   * not found) or once failed: deleted at once, nothing was billed.
   */
  private ReplyEffect<Event, State> onDeleteUnmetered(State state, Delete cmd) {
    if (!mayRead(originOf(state), cmd.renterId())) return Effect().reply(cmd.replyTo(), notFound());
    return Effect()
        .persist(new Deleted(true, 0, 0, now()))
        .thenRun(
            s -> {
              uploadOver();
              finish((State.Deleted) s);
            })
        .thenReply(cmd.replyTo(), s -> StatusReply.success(view(s)));
  }

  /** The final capture, then the release once it landed (a released hold refuses captures). */
  private void finish(State.Deleted state) {
    timers.cancel(Timer.SETTLE);
    timers.cancel(Timer.GRACE_EXPIRED);
    if (state.closed()) return;
    if (state.meter() == null) { // deleted before ready: only the hold an ask may have placed
      if (!released) release(state.origin());
      return;
    }
    Meter meter = state.meter();
    if (meter.settledThrough() > capturedThrough && meter.settledThrough() > 0)
      deliver(state.origin(), meter);
    // Released even when no hold was acknowledged: a placement whose answer was lost may have
    // placed one (the account answers a hold it never had as not found, which is done too).
    else if (!released) release(state.origin());
  }

  private void release(Origin origin) {
    context.askWithStatus(
        Account.HoldView.class,
        ports.account(origin.renterId()),
        settings.askTimeout(),
        reply -> new Account.ReleaseHold(snapshotId, reply),
        (v, failure) ->
            new ReleaseAnswer(
                failure == null || Rejection.codeOf(failure) == Rejection.HOLD_NOT_FOUND));
  }

  private ReplyEffect<Event, State> onFinalCaptureAnswer(State.Deleted state, CaptureAnswer a) {
    if (acknowledged(a)) finish(state);
    return Effect().noReply();
  }

  private ReplyEffect<Event, State> onReleaseAnswer(State.Deleted state, ReleaseAnswer answer) {
    if (state.closed()) return Effect().noReply();
    if (!answer.ok()) {
      redeliverLater();
      return Effect().noReply();
    }
    released = true;
    failedDeliveries = 0;
    return Effect().persist(new Closed(now())).thenNoReply();
  }

  private ReplyEffect<Event, State> finishAgain(State.Deleted state) {
    finish(state);
    return Effect().noReply();
  }

  // ---- reads

  private ReplyEffect<Event, State> onRestore(State.Ready state, Restore cmd) {
    if (!state.origin().renterId().equals(cmd.renterId()))
      return Effect().reply(cmd.replyTo(), notFound());
    return Effect().reply(cmd.replyTo(), StatusReply.success(view(state)));
  }

  private ReplyEffect<Event, State> onRestoreNotReady(State state, Restore cmd) {
    if (state instanceof State.Empty || !originOf(state).renterId().equals(cmd.renterId()))
      return Effect().reply(cmd.replyTo(), notFound());
    View v = view(state);
    return Effect()
        .reply(
            cmd.replyTo(),
            reply(
                Rejection.SNAPSHOT_NOT_READY,
                "snapshot " + snapshotId + " is " + v.status().wire()));
  }

  private ReplyEffect<Event, State> replyView(
      State state, String renterId, ActorRef<StatusReply<View>> replyTo) {
    return Effect().reply(replyTo, view(state, renterId));
  }

  private StatusReply<View> view(State state, String renterId) {
    if (state instanceof State.Empty || !mayRead(originOf(state), renterId)) return notFound();
    return StatusReply.success(view(state));
  }

  private StatusReply<View> hostView(State state, String hostId) {
    if (state instanceof State.Empty || !originOf(state).hostId().equals(hostId)) return notFound();
    return StatusReply.success(view(state));
  }

  private static Origin originOf(State state) {
    if (state instanceof State.Uploading s) return s.origin();
    if (state instanceof State.Ready s) return s.origin();
    if (state instanceof State.Suspended s) return s.origin();
    if (state instanceof State.Failed s) return s.origin();
    if (state instanceof State.Deleted s) return s.origin();
    throw new IllegalStateException("no snapshot yet");
  }

  private static Manifest manifestOf(State state) {
    if (state instanceof State.Uploading s) return s.manifest();
    if (state instanceof State.Ready s) return s.manifest();
    if (state instanceof State.Suspended s) return s.manifest();
    if (state instanceof State.Failed s) return s.manifest();
    if (state instanceof State.Deleted s) return s.manifest();
    return null;
  }

  private static Meter meterOf(State state) {
    if (state instanceof State.Ready s) return s.meter();
    if (state instanceof State.Suspended s) return s.meter();
    if (state instanceof State.Deleted s) return s.meter();
    return null;
  }

  private static String renterOf(State state) {
    return originOf(state).renterId();
  }

  private static State.Uploading created(Created e) {
    return new State.Uploading(
        new Origin(e.renterId(), e.rentalId(), e.hostId(), e.gpu(), e.region(), e.at()), null);
  }

  private static State.Deleted deleted(Origin origin, Manifest manifest, Meter meter, Deleted e) {
    return new State.Deleted(
        origin,
        manifest,
        meter.settled(e.throughSecond(), e.cumulativeCost()),
        null,
        null,
        e.at(),
        false);
  }

  private static Duration untilOrZero(Instant deadline, Instant now) {
    Duration left = Duration.between(now, deadline);
    return left.isNegative() ? Duration.ZERO : left;
  }

  private Duration untilOrZero(Instant deadline) {
    return untilOrZero(deadline, now());
  }

  private static long saturatedAdd(long a, long b) {
    long sum = a + b;
    return ((a ^ sum) & (b ^ sum)) < 0 ? Long.MAX_VALUE : sum;
  }

  private Instant now() {
    return clock.instant();
  }

  private static boolean mayRead(Origin origin, String renterId) {
    return renterId == null || origin.renterId().equals(renterId);
  }

  private <T> StatusReply<T> notFound() {
    return reply(Rejection.NOT_FOUND, "no snapshot " + snapshotId);
  }

  /** What a client sees; the cost is live: every second the hold covers so far. */
  View view(State state) {
    return SnapshotViews.of(snapshotId, state, now(), settings.suspendedGrace());
  }

  // ---------------------------------------------------------------------------------------------
  // Events: state changes only. Pure, so built once and shared by every snapshot.

  private static final EventHandler<State, Event> EVENTS = events();

  @Override
  public EventHandler<State, Event> eventHandler() {
    return EVENTS;
  }

  private static EventHandler<State, Event> events() {
    EventHandlerBuilder<State, Event> b = EventHandlerBuilder.builder();
    b.forStateType(State.Empty.class).onEvent(Created.class, (s, e) -> (created(e)));
    b.forStateType(State.Uploading.class)
        .onEvent(
            ManifestRecorded.class,
            (s, e) ->
                (new State.Uploading(
                    s.origin(), new Manifest(e.sizeBytes(), e.sha256(), e.chunkCount()))))
        .onEvent(
            UploadFailed.class,
            (s, e) -> (new State.Failed(s.origin(), s.manifest(), e.code(), e.detail(), e.at())))
        .onEvent(
            Ready.class,
            (s, e) ->
                (new State.Ready(
                    s.origin(),
                    s.manifest(),
                    new Meter(
                        e.readyAt(),
                        e.pricePerGibMonth(),
                        s.manifest().sizeBytes(),
                        e.holdAmount(),
                        0,
                        0))))
        // Deleted while uploading: once a manifest was recorded a hold may have been asked (by an
        // earlier incarnation, its answer lost with it), so the hold is released before it closes.
        .onEvent(
            Deleted.class,
            (s, e) ->
                (new State.Deleted(
                    s.origin(), s.manifest(), null, null, null, e.at(), s.manifest() == null)));
    b.forStateType(State.Ready.class)
        .onEvent(
            Settled.class,
            (s, e) ->
                (new State.Ready(
                    s.origin(),
                    s.manifest(),
                    s.meter().settled(e.throughSecond(), e.cumulativeCost()))))
        .onEvent(
            HoldExtended.class,
            (s, e) ->
                (new State.Ready(s.origin(), s.manifest(), s.meter().withHold(e.newAmount()))))
        .onEvent(
            Suspended.class,
            (s, e) -> (new State.Suspended(s.origin(), s.manifest(), s.meter(), e.code(), e.at())))
        .onEvent(Deleted.class, (s, e) -> (deleted(s.origin(), s.manifest(), s.meter(), e)));
    b.forStateType(State.Suspended.class)
        .onEvent(
            Settled.class,
            (s, e) ->
                (new State.Suspended(
                    s.origin(),
                    s.manifest(),
                    s.meter().settled(e.throughSecond(), e.cumulativeCost()),
                    s.code(),
                    s.since())))
        .onEvent(
            HoldExtended.class,
            (s, e) ->
                (new State.Suspended(
                    s.origin(),
                    s.manifest(),
                    s.meter().withHold(e.newAmount()),
                    s.code(),
                    s.since())))
        .onEvent(Resumed.class, (s, e) -> (new State.Ready(s.origin(), s.manifest(), s.meter())))
        .onEvent(Deleted.class, (s, e) -> (deleted(s.origin(), s.manifest(), s.meter(), e)));
    // Deleted once failed: as while uploading, a hold may have been placed once a manifest was
    // recorded, so it is released before the snapshot closes.
    b.forStateType(State.Failed.class)
        .onEvent(
            Deleted.class,
            (s, e) ->
                (new State.Deleted(
                    s.origin(),
                    s.manifest(),
                    null,
                    s.code(),
                    s.detail(),
                    e.at(),
                    s.manifest() == null)));
    b.forStateType(State.Deleted.class)
        .onEvent(
            Closed.class,
            (s, e) ->
                (new State.Deleted(
                    s.origin(),
                    s.manifest(),
                    s.meter(),
                    s.failure(),
                    s.failureDetail(),
                    s.at(),
                    true)));
    return b.build();
  }
}
