package dev.tickmark.engine.rental;

import static dev.tickmark.engine.Rejection.reply;
import static dev.tickmark.engine.rental.RentalBilling.earlier;
import static dev.tickmark.engine.rental.RentalBilling.secondsBetween;

import com.fasterxml.jackson.annotation.JsonCreator;
import com.fasterxml.jackson.annotation.JsonValue;
import com.typesafe.config.Config;
import dev.tickmark.engine.CborSerializable;
import dev.tickmark.engine.FreshEntities;
import dev.tickmark.engine.JournalFailures;
import dev.tickmark.engine.Rejection;
import dev.tickmark.engine.SharedCommandHandler;
import dev.tickmark.engine.account.Account;
import dev.tickmark.engine.host.Host;
import dev.tickmark.engine.host.Listing;
import dev.tickmark.engine.market.Matcher;
import dev.tickmark.engine.metrics.EngineMetrics;
import dev.tickmark.engine.metrics.LatencyHistogram;
import dev.tickmark.engine.money.Money;
import dev.tickmark.engine.snapshot.Snapshot;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.stream.IntStream;
import org.apache.pekko.Done;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.Behavior;
import org.apache.pekko.actor.typed.PostStop;
import org.apache.pekko.actor.typed.PreRestart;
import org.apache.pekko.actor.typed.RecipientRef;
import org.apache.pekko.actor.typed.javadsl.ActorContext;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.actor.typed.javadsl.TimerScheduler;
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
 * One rental, from request to the last micro-euro. It places the renter's hold, asks its GPU's
 * matcher for a host, starts the workload through the host, meters every second from the agent's
 * {@code rental_started}, and coordinates the money: each settlement is recorded here first
 * (cumulative seconds, cost and split), then delivered to the renter's account (a capture) and the
 * provider's (an earnings credit) under the same key until both acknowledge — exactly once in
 * effect, because the accounts deduplicate on that key and totals are cumulative. After a crash it
 * recovers, re-delivers the last settlement, and settles the seconds it missed.
 *
 * <p>The billing arithmetic is {@link RentalBilling}'s; delivering settlements and closing is
 * {@link SettlementDelivery}'s. This class holds the protocol, one command handler per state, and
 * the event handlers.
 */
public final class Rental
    extends EventSourcedBehaviorWithEnforcedReplies<Rental.Command, Rental.Event, Rental.State> {

  public static final EntityTypeKey<Command> ENTITY_KEY =
      EntityTypeKey.create(Command.class, "Rental");
  public static final int TAG_SLICES = 4;
  public static final String TAG_PREFIX = "rental-";

  public static String tagFor(String rentalId) {
    return TAG_PREFIX + Math.floorMod(rentalId.hashCode(), TAG_SLICES);
  }

  public static List<String> allTags() {
    return IntStream.range(0, TAG_SLICES).mapToObj(i -> TAG_PREFIX + i).toList();
  }

  /**
   * Why a rental ended (DESIGN.md); the wire name is what the API, the journal and the read side
   * carry.
   */
  public enum EndReason {
    STOPPED_BY_RENTER,
    BALANCE_EXHAUSTED,
    SPEND_CAP_REACHED,
    RENTAL_CAP_REACHED,
    HOST_LOST,
    /** The workload ended by itself (its command finished or died), on the agent's word. */
    WORKLOAD_EXITED,
    PREEMPTED,
    PROVISIONING_FAILED,
    NO_CAPACITY,
    CANCELLED;

    /** The lower-case name, as every code of ours (see {@link Rejection}). */
    private final String wire = name().toLowerCase(Locale.ROOT);

    @JsonValue
    public String wire() {
      return wire;
    }

    @JsonCreator
    public static EndReason fromWire(String wire) {
      for (EndReason r : values()) if (r.wire.equals(wire)) return r;
      throw new IllegalArgumentException("unknown end reason " + wire);
    }

    /**
     * The end reason of a refused hold extension, or null when the refusal is transient (retried
     * next settlement).
     */
    static EndReason ofExtensionRefusal(Rejection code) {
      if (code == Rejection.SPEND_CAP_REACHED) return SPEND_CAP_REACHED;
      if (code == Rejection.INSUFFICIENT_FUNDS) return BALANCE_EXHAUSTED;
      return null;
    }
  }

  /**
   * What a client sees of where a rental is; {@code refused}: its first hold was refused (nothing
   * ever ran).
   */
  public enum Status {
    PENDING,
    PROVISIONING,
    RUNNING,
    STOPPING,
    ENDED,
    REFUSED,
    UNKNOWN;

    private final String wire = name().toLowerCase(Locale.ROOT);

    @JsonValue
    public String wire() {
      return wire;
    }

    @JsonCreator
    public static Status fromWire(String wire) {
      for (Status s : values()) if (s.wire.equals(wire)) return s;
      throw new IllegalArgumentException("unknown rental status " + wire);
    }

    /** Nothing more will happen to it. */
    public boolean isFinal() {
      return this == ENDED || this == REFUSED;
    }
  }

  public record Settings(
      Duration settleInterval,
      long holdSeconds,
      int feeBps,
      Duration provisioningTimeout,
      Duration stopTimeout,
      Duration retryInterval,
      Duration askTimeout,
      Duration maxWakeGap,
      Duration maxSettleInterval,
      int settleStretchFrom,
      Duration confirmWithin) {
    /**
     * How long a launch's pending hold and reservation wait for the rental to confirm them before
     * the account and the host take them back (issue 15, decision 1): far beyond a launch's
     * seconds, well within what a renter waits for an answer.
     */
    public static final Duration DEFAULT_CONFIRM_WITHIN = Duration.ofSeconds(60);

    public Settings(
        Duration settleInterval,
        long holdSeconds,
        int feeBps,
        Duration provisioningTimeout,
        Duration stopTimeout,
        Duration retryInterval,
        Duration askTimeout,
        Duration maxWakeGap,
        Duration maxSettleInterval,
        int settleStretchFrom) {
      this(
          settleInterval,
          holdSeconds,
          feeBps,
          provisioningTimeout,
          stopTimeout,
          retryInterval,
          askTimeout,
          maxWakeGap,
          maxSettleInterval,
          settleStretchFrom,
          DEFAULT_CONFIRM_WITHIN);
    }

    /**
     * The longest a running rental sleeps when none of its own instants (the next settlement, its
     * limit, a preemption deadline) comes sooner: it bounds how late a wall clock stepped forward
     * is noticed. Entity tests that move a clock by hand set it to a second.
     */
    public static final Duration DEFAULT_MAX_WAKE_GAP = Duration.ofSeconds(60);

    /**
     * Under load the settle interval grows up to this ({@code settle-interval-max}); within a
     * quarter of {@code hold-duration} (see {@link RentalBilling#intervalSeconds}).
     */
    public static final Duration DEFAULT_MAX_SETTLE_INTERVAL = Duration.ofSeconds(60);

    /**
     * From this many running rentals on a node the settle interval grows in proportion ({@code
     * settle-stretch-from}); 0: never.
     */
    public static final int DEFAULT_SETTLE_STRETCH_FROM = 5_000;

    /** The settle interval never grows: entity tests and callers that name every setting. */
    public Settings(
        Duration settleInterval,
        long holdSeconds,
        int feeBps,
        Duration provisioningTimeout,
        Duration stopTimeout,
        Duration retryInterval,
        Duration askTimeout,
        Duration maxWakeGap) {
      this(
          settleInterval,
          holdSeconds,
          feeBps,
          provisioningTimeout,
          stopTimeout,
          retryInterval,
          askTimeout,
          maxWakeGap,
          settleInterval,
          0);
    }

    public Settings(
        Duration settleInterval,
        long holdSeconds,
        int feeBps,
        Duration provisioningTimeout,
        Duration stopTimeout,
        Duration retryInterval,
        Duration askTimeout) {
      this(
          settleInterval,
          holdSeconds,
          feeBps,
          provisioningTimeout,
          stopTimeout,
          retryInterval,
          askTimeout,
          DEFAULT_MAX_WAKE_GAP);
    }

    /**
     * From the node's config: {@code tickmark.rentals.*}, {@code tickmark.market.fee-bps}, {@code
     * tickmark.http.ask-timeout}.
     */
    public static Settings fromConfig(Config config) {
      Config rentals = config.getConfig("tickmark.rentals");
      return new Settings(
          rentals.getDuration("settle-interval"),
          rentals.getDuration("hold-duration").toSeconds(),
          config.getInt("tickmark.market.fee-bps"),
          rentals.getDuration("provisioning-timeout"),
          rentals.getDuration("stop-timeout"),
          rentals.getDuration("retry-interval"),
          config.getDuration("tickmark.http.ask-timeout"),
          rentals.hasPath("max-wake-gap")
              ? rentals.getDuration("max-wake-gap")
              : DEFAULT_MAX_WAKE_GAP,
          rentals.hasPath("settle-interval-max")
              ? rentals.getDuration("settle-interval-max")
              : DEFAULT_MAX_SETTLE_INTERVAL,
          rentals.hasPath("settle-stretch-from")
              ? rentals.getInt("settle-stretch-from")
              : DEFAULT_SETTLE_STRETCH_FROM,
          rentals.hasPath("confirm-within")
              ? rentals.getDuration("confirm-within")
              : DEFAULT_CONFIRM_WITHIN);
    }
  }

  /** How a rental reaches the other entities; sharding in a node, probes in unit tests. */
  public interface Ports {
    RecipientRef<Account.Command> account(String accountId);

    RecipientRef<Host.Command> host(String hostId);

    RecipientRef<Matcher.Command> matcher(String gpu);

    /** The snapshot entity that keeps a workspace stopped with {@code snapshot: true}. */
    RecipientRef<Snapshot.Command> snapshot(String snapshotId);
  }

  /** What the renter asked for. Prices are µ€ per GPU-hour; {@code maxTotal} (µ€) is optional. */
  public record Spec(
      String gpu,
      int count,
      Listing.Tier tier,
      String region,
      long maxPricePerGpuHour,
      String image,
      List<String> command,
      String sshPublicKey,
      Long maxTotal,
      int waitSeconds,
      boolean network,
      Restore restore,
      String runtime)
      implements CborSerializable {
    @JsonCreator
    public Spec {}

    /**
     * A launch that runs in whatever runtime its host uses ({@code runtime} null; so read launches
     * recorded before a renter could name one).
     */
    public Spec(
        String gpu,
        int count,
        Listing.Tier tier,
        String region,
        long maxPricePerGpuHour,
        String image,
        List<String> command,
        String sshPublicKey,
        Long maxTotal,
        int waitSeconds,
        boolean network,
        Restore restore) {
      this(
          gpu,
          count,
          tier,
          region,
          maxPricePerGpuHour,
          image,
          command,
          sshPublicKey,
          maxTotal,
          waitSeconds,
          network,
          restore,
          null);
    }

    /** The same launch, run only in the runtime {@code name} (null: any). */
    public Spec withRuntime(String name) {
      return with(sshPublicKey, restore, name);
    }

    /** The same launch, accepting {@code keys} (OpenSSH public keys, one per line). */
    public Spec withSshPublicKey(String keys) {
      return with(keys, restore, runtime);
    }

    /** The same launch, starting from {@code snapshot}'s workspace. */
    public Spec withRestore(Restore snapshot) {
      return with(sshPublicKey, snapshot, runtime);
    }

    private Spec with(String keys, Restore from, String runtimeName) {
      return new Spec(
          gpu,
          count,
          tier,
          region,
          maxPricePerGpuHour,
          image,
          command,
          keys,
          maxTotal,
          waitSeconds,
          network,
          from,
          runtimeName);
    }

    /** A launch that starts from an empty workspace. */
    public Spec(
        String gpu,
        int count,
        Listing.Tier tier,
        String region,
        long maxPricePerGpuHour,
        String image,
        List<String> command,
        String sshPublicKey,
        Long maxTotal,
        int waitSeconds,
        boolean network) {
      this(
          gpu,
          count,
          tier,
          region,
          maxPricePerGpuHour,
          image,
          command,
          sshPublicKey,
          maxTotal,
          waitSeconds,
          network,
          null);
    }
  }

  /**
   * A launch that restores a ready snapshot into its workspace before the command starts (checked
   * at the edge with {@code Snapshot.Restore}); the agent verifies {@code sha256} and {@code
   * sizeBytes}.
   */
  public record Restore(String snapshotId, String sha256, long sizeBytes)
      implements CborSerializable {}

  /**
   * The match, frozen for the whole rental; {@code region} is the host's (null in events recorded
   * before it was kept); {@code runtime}: how the host runs rentals ({@code docker} runs the
   * image), as its latest passed report said when it reserved the cards (null where its agent had
   * not said, and in events recorded before it was kept).
   */
  public record Terms(
      String hostId,
      String providerId,
      List<Integer> cards,
      long pricePerGpuHour,
      boolean simulated,
      Instant matchedAt,
      String region,
      String runtime)
      implements CborSerializable {
    @JsonCreator
    public Terms {}

    public Terms(
        String hostId,
        String providerId,
        List<Integer> cards,
        long pricePerGpuHour,
        boolean simulated,
        Instant matchedAt,
        String region) {
      this(hostId, providerId, cards, pricePerGpuHour, simulated, matchedAt, region, null);
    }
  }

  /**
   * A settlement checkpoint: cumulative seconds, cost and split, from which every second's charge
   * can be recomputed.
   */
  public record Checkpoint(long throughSecond, long cost, long provider, long platform, Instant at)
      implements CborSerializable {}

  // ---------------------------------------------------------------------------------------------
  // Protocol

  public interface Command extends CborSerializable {}

  /**
   * Launches the rental; sent again to an existing rental of the same renter (a retried launch), it
   * answers as the first did: the rental as it stands, or the same refusal.
   */
  public record Create(
      String renterId, Spec spec, boolean freshId, ActorRef<StatusReply<View>> replyTo)
      implements Command {
    /**
     * {@code freshId}: the launch drew this rental's id a moment ago (at random, or from its
     * Idempotency-Key's newly drawn seed), so nothing is written under it, and the rental it starts
     * need not read its journal ({@link FreshEntities}). False for an id that an earlier attempt
     * may have used (a retry that kept its key's seed).
     */
    public Create {}

    public Create(String renterId, Spec spec, ActorRef<StatusReply<View>> replyTo) {
      this(renterId, spec, false, replyTo);
    }
  }

  /**
   * Whether a {@link Create}'s failure says the rental ended without launching and left nothing
   * behind: refused {@code unavailable} (the market could not be read; it closed, nothing charged,
   * its hold released). No answer in time is not: that rental may still launch.
   */
  public static boolean endedUnlaunched(Throwable failure) {
    Throwable t = failure;
    while (t instanceof java.util.concurrent.CompletionException && t.getCause() != null)
      t = t.getCause();
    return t instanceof StatusReply.ErrorMessage && Rejection.codeOf(t) == Rejection.UNAVAILABLE;
  }

  /**
   * {@code renterId == null}: an operator or the system. Another renter's rental answers not_found.
   */
  public record Get(String renterId, ActorRef<StatusReply<View>> replyTo) implements Command {}

  /**
   * {@code snapshot}: keep the workspace as snapshot {@code Snapshot.idForRental(id)} (a running
   * rental only; {@code snapshot_not_possible} otherwise).
   */
  public record Stop(String renterId, boolean snapshot, ActorRef<StatusReply<View>> replyTo)
      implements Command {
    @JsonCreator
    public Stop {}

    public Stop(String renterId, ActorRef<StatusReply<View>> replyTo) {
      this(renterId, false, replyTo);
    }
  }

  /**
   * Live updates (SSE): the subscriber gets {@link Update}s until the rental ends or it
   * unsubscribes.
   */
  public record Subscribe(
      String renterId, ActorRef<Update> subscriber, ActorRef<StatusReply<View>> replyTo)
      implements Command {}

  public record Unsubscribe(ActorRef<Update> subscriber) implements Command {}

  /**
   * Brings an unfinished rental back after its node was lost: recovery resumes metering and money.
   */
  public enum Wake implements Command {
    INSTANCE
  }

  // From the host's agent (through its session) and the host entity; each is safe to deliver twice.
  /**
   * {@code listedFrom}: the agent's instant (its clock) from which its heartbeats list the
   * workload; null from agents that do not say. Passed on to the host with the confirmation of the
   * cards.
   */
  public record WorkloadStarted(String hostId, Instant at, Instant listedFrom) implements Command {
    public WorkloadStarted(String hostId, Instant at) {
      this(hostId, at, null);
    }
  }

  public record WorkloadFailed(String hostId, String reason) implements Command {}

  /**
   * {@code afterNotice}: the agent says the workload ended after it gave it a preemption notice (a
   * spot rental whose {@link Preempt} may not have reached this entity yet). {@code exited}: the
   * agent says the workload ended by itself, unasked (false from agents that do not say). {@code
   * exitCode}: with {@code exited}, the workload's exit status when the agent knows it (0–255),
   * else null.
   */
  public record WorkloadStopped(
      String hostId, Instant at, boolean afterNotice, boolean exited, Integer exitCode)
      implements Command {
    @com.fasterxml.jackson.annotation.JsonCreator
    public WorkloadStopped {}

    public WorkloadStopped(String hostId, Instant at) {
      this(hostId, at, false, false, null);
    }

    public WorkloadStopped(String hostId, Instant at, boolean afterNotice) {
      this(hostId, at, afterNotice, false, null);
    }

    public WorkloadStopped(String hostId, Instant at, boolean afterNotice, boolean exited) {
      this(hostId, at, afterNotice, exited, null);
    }
  }

  /**
   * The host went offline (or was evicted or removed): billed to {@code lastHeartbeatAt}. {@code
   * lostAt}: when the host declared it (null from nodes that predate it); a notice that arrives
   * after this rental saw a heartbeat later than that is stale (the agent came back) and changes
   * nothing.
   */
  public record HostLost(String hostId, Instant lastHeartbeatAt, Instant lostAt)
      implements Command {
    public HostLost(String hostId, Instant lastHeartbeatAt) {
      this(hostId, lastHeartbeatAt, null);
    }
  }

  public record Preempt(String hostId, Instant deadline) implements Command {}

  /**
   * From a host holding cards for this rental that it has not heard it run on: does the rental
   * still want them ({@link #reservationWanted})?
   */
  public record CheckReservation(String hostId, ActorRef<Host.ReservationWanted> replyTo)
      implements Command {}

  /**
   * From the host this rental runs on: its agent's session has just attached (a reconnect, or the
   * host's entity moved after a node loss), which proves the host alive now. A settlement waiting
   * for that proof is asked for at once rather than at the rental's next look, up to a second
   * later.
   */
  public record HostAttached(String hostId) implements Command {}

  // Answers to this rental's own asks, and its timers: never sent by anyone else.
  private record HoldAnswer(long amount, Rejection refusal) implements Command {}

  /** The account's answer to {@link Account.ConfirmHold}. */
  private record HoldConfirmAnswer(Rejection refusal) implements Command {}

  private record MatchAnswer(Matcher.Result result) implements Command {}

  private record StartAnswer(Rejection refusal) implements Command {}

  /** {@code liveness == null}: the host did not answer. */
  private record LivenessAnswer(Host.Liveness liveness) implements Command {}

  private record ExtendAnswer(long newAmount, Rejection refusal) implements Command {}

  record Delivered(Side side, long throughSecond, Rejection refusal) implements Command {
    enum Side {
      CAPTURE,
      CREDIT,
      FINAL_CREDIT
    }
  }

  /**
   * An operator gives back {@code amount} µ€ (null: all that is left) of what the rental charged
   * its renter, for {@code reason} (a dispute's outcome: the card was faulty, the host broke its
   * promise). Split back as the charge was ({@link RentalRefunds}): the provider's earnings and the
   * platform's fee each return their share. Only once the rental's money is final (closed);
   * idempotent on {@code reference}, and refunds of one rental never add up to more than it
   * charged. Answered once both accounts have it.
   */
  public record Refund(
      String reference, Long amount, String reason, ActorRef<StatusReply<RefundView>> replyTo)
      implements Command {}

  /**
   * One refund as the operator sees it, with the rental's totals after it: {@code charged}, what
   * refunds gave back in all ({@code cumulativeRefunded}) and their split. Amounts in µ€.
   */
  public record RefundView(
      String rentalId,
      String renterId,
      String providerId,
      String reference,
      long amount,
      String reason,
      Instant at,
      long charged,
      long cumulativeRefunded,
      long providerReversed,
      long platformReversed)
      implements CborSerializable {}

  /** An account's answer to a refund's posting ({@code renter}: the renter's side). */
  record RefundDelivered(boolean renter, long cumulative, Rejection refusal) implements Command {}

  record Released(What what, boolean ok) implements Command {
    enum What {
      HOLD,
      CARDS
    }
  }

  enum Timer implements Command {
    /** A running rental's next own instant: a settlement due, its limit, its deadline. */
    DUE,
    /** A launch's hold or match is slow: the request is recorded and the rental waits as before. */
    LAUNCH_EXPIRED,
    RETRY_HOLD,
    RETRY_MATCH,
    RESEND_START,
    WAIT_EXPIRED,
    PROVISION_EXPIRED,
    PREEMPTION_DUE,
    STOP_EXPIRED,
    REDELIVER,
    PROVE_END,
    RETRY_SNAPSHOT,
    REDELIVER_REFUND
  }

  /** The snapshot entity's answer to {@link Snapshot.Create}. */
  private record SnapshotAnswer(boolean ok) implements Command {}

  /** What a client may see of a rental. Amounts in µ€. */
  public record View(
      String id,
      String renterId,
      Status status,
      Spec spec,
      Terms terms,
      Instant createdAt,
      Instant startedAt,
      Instant endedAt,
      EndReason endReason,
      long billedSeconds,
      long cost,
      Instant preemptionDeadline,
      List<Checkpoint> checkpoints,
      String snapshotId,
      Integer exitCode,
      List<Refunded> refunds)
      implements CborSerializable {
    /**
     * {@code refunds}: an operator's refunds of it, oldest first (its renter is shown the total).
     */
    @JsonCreator
    public View {
      refunds = refunds == null ? List.of() : refunds;
    }

    /** What its refunds gave back in all, µ€. */
    public long refunded() {
      return refunds.isEmpty() ? 0 : refunds.get(refunds.size() - 1).cumulativeAmount();
    }
  }

  public sealed interface Update extends CborSerializable
      permits StatusChanged, Tick, PreemptionNotice {}

  public record StatusChanged(View rental) implements Update {}

  public record Tick(long second, long cost) implements Update {}

  public record PreemptionNotice(Instant deadline) implements Update {}

  // ---------------------------------------------------------------------------------------------
  // Events

  public interface Event extends CborSerializable {
    Instant at();
  }

  public record Requested(String renterId, Spec spec, long holdAmount, Instant at)
      implements Event {}

  /** The first hold could not be placed: nothing was ever charged or held. */
  public record Refused(Rejection code, Instant at) implements Event {}

  public record Matched(Terms terms, Instant at) implements Event {}

  /**
   * {@code agentListedFrom}: the agent's {@code listed_from} (its clock), kept for the host's
   * confirmation ({@link Host.ConfirmCards}); null from older agents and older events.
   */
  public record Started(Instant startedAt, Instant at, Instant agentListedFrom) implements Event {}

  public record Settled(Checkpoint checkpoint, Instant at) implements Event {}

  public record HoldExtended(long holdAmount, Instant at) implements Event {}

  /**
   * The hold could not grow: the rental runs until what is held is used, then ends with {@code
   * reason}.
   */
  public record ExtensionRefused(EndReason reason, Instant at) implements Event {}

  public record PreemptionScheduled(Instant deadline, Instant at) implements Event {}

  /**
   * Metering stopped at {@code endAt}, {@code billedSeconds} after the start; the money is being
   * finished.
   */
  public record Ended(
      EndReason reason,
      Instant endAt,
      long billedSeconds,
      Instant at,
      boolean onAgentReport,
      Integer exitCode)
      implements Event {
    /**
     * {@code onAgentReport}: the end is the agent's word that the workload stopped on its own
     * (false in events written before it was kept); the host's heartbeats bound it before it is
     * settled. {@code exitCode}: the workload's exit status, for a rental that ended {@code
     * workload_exited} when the agent reported it; null otherwise (and in events written before it
     * was kept).
     */
    @com.fasterxml.jackson.annotation.JsonCreator
    public Ended {}

    public Ended(
        EndReason reason, Instant endAt, long billedSeconds, Instant at, boolean onAgentReport) {
      this(reason, endAt, billedSeconds, at, onAgentReport, null);
    }

    public Ended(EndReason reason, Instant endAt, long billedSeconds, Instant at) {
      this(reason, endAt, billedSeconds, at, false, null);
    }
  }

  /**
   * The host proved the rental ran only {@code billedSeconds} of what its end claimed (its agent
   * fell silent before the end instant): the final bill is that, recorded with the final {@link
   * Settled} when it adds seconds. Absent when the whole claim was proven.
   */
  public record EndProven(long billedSeconds, Instant at) implements Event {}

  /** Final settlement acknowledged by both accounts, hold released, cards returned. */
  public record Closed(Instant at) implements Event {}

  /**
   * An operator refunded {@code amount} of the closed rental's charge under {@code reference}. The
   * cumulative figures are all its refunds so far and their split back: the provider's earnings
   * ({@code cumulativeProvider}) and the platform's fee ({@code cumulativePlatform}).
   */
  public record Refunded(
      String reference,
      long amount,
      String reason,
      long cumulativeAmount,
      long cumulativeProvider,
      long cumulativePlatform,
      Instant at)
      implements Event {}

  /**
   * The renter stopped the running rental keeping its workspace as {@code snapshotId}; recorded
   * just before its {@link Ended}.
   */
  public record SnapshotKept(String snapshotId, Instant at) implements Event {}

  // ---------------------------------------------------------------------------------------------
  // State: the lifecycle as types

  public sealed interface State extends CborSerializable
      permits Empty, RefusedRental, Pending, Provisioning, Running, Ending, Finished {
    /** What the renter asked for; null before the request was recorded. */
    default Order order() {
      return null;
    }

    /** The match; null before it. */
    default Terms terms() {
      return null;
    }
  }

  public enum Empty implements State {
    INSTANCE
  }

  /**
   * Everything a live rental carries; each state type adds what its phase knows. {@code
   * snapshotId}: the snapshot keeping its workspace once stopped with one (null otherwise, and in
   * states recorded before snapshots).
   */
  public record Order(
      String renterId, Spec spec, long holdAmount, Instant createdAt, String snapshotId)
      implements CborSerializable {
    @JsonCreator
    public Order {}

    public Order(String renterId, Spec spec, long holdAmount, Instant createdAt) {
      this(renterId, spec, holdAmount, createdAt, null);
    }

    Order withHold(long amount) {
      return new Order(renterId, spec, amount, createdAt, snapshotId);
    }

    Order withSnapshot(String id) {
      return new Order(renterId, spec, holdAmount, createdAt, id);
    }

    boolean ownedBy(String renterId) {
      return renterId == null || this.renterId.equals(renterId);
    }

    Instant waitEnds() {
      return createdAt.plusSeconds(spec.waitSeconds());
    }
  }

  public record RefusedRental(Order order, Rejection code) implements State {}

  public record Pending(Order order) implements State {}

  /**
   * {@code preemptionDeadline}: a spot notice that came before the workload started (null: none).
   */
  public record Provisioning(Order order, Terms terms, Instant preemptionDeadline)
      implements State {
    Provisioning withPreemption(Instant deadline) {
      return new Provisioning(order, terms, deadline);
    }
  }

  /** {@code agentListedFrom}: see {@link Started}. */
  public record Running(
      Order order,
      Terms terms,
      Instant startedAt,
      List<Checkpoint> checkpoints,
      EndReason extensionRefused,
      Instant preemptionDeadline,
      Instant agentListedFrom)
      implements State {
    Checkpoint last() {
      return checkpoints.isEmpty() ? null : checkpoints.get(checkpoints.size() - 1);
    }

    Running settled(Checkpoint c) {
      return new Running(
          order,
          terms,
          startedAt,
          append(checkpoints, c),
          extensionRefused,
          preemptionDeadline,
          agentListedFrom);
    }

    Running withHold(long amount) {
      return new Running(
          order.withHold(amount),
          terms,
          startedAt,
          checkpoints,
          null,
          preemptionDeadline,
          agentListedFrom);
    }

    Running extensionRefused(EndReason reason) {
      return new Running(
          order, terms, startedAt, checkpoints, reason, preemptionDeadline, agentListedFrom);
    }

    Running keeping(String snapshotId) {
      return new Running(
          order.withSnapshot(snapshotId),
          terms,
          startedAt,
          checkpoints,
          extensionRefused,
          preemptionDeadline,
          agentListedFrom);
    }

    Running withPreemption(Instant deadline) {
      return new Running(
          order, terms, startedAt, checkpoints, extensionRefused, deadline, agentListedFrom);
    }

    boolean pastPreemptionDeadline(Instant now) {
      return preemptionDeadline != null && !now.isBefore(preemptionDeadline);
    }
  }

  /**
   * Metering is over; the final settlement, the hold and the cards are being finished ("stopping").
   * {@code billedSeconds}: what the end bills — until {@link #finalSettled()}, what it claims, to
   * be proven by the host. {@code recordedAt}: when the end was recorded (null in snapshots written
   * before it was kept). {@code onAgentReport}, {@code exitCode}: see {@link Ended}.
   */
  public record Ending(
      Order order,
      Terms terms,
      Instant startedAt,
      List<Checkpoint> checkpoints,
      EndReason reason,
      Instant endAt,
      long billedSeconds,
      Instant recordedAt,
      boolean onAgentReport,
      Integer exitCode)
      implements State {
    @com.fasterxml.jackson.annotation.JsonCreator
    public Ending {}

    /** A rental that ended before it ran: nothing to bill. */
    static Ending unstarted(Order order, Terms terms, Ended e) {
      return new Ending(
          order, terms, null, List.of(), e.reason(), e.endAt(), 0, e.at(), e.onAgentReport(), null);
    }

    Checkpoint last() {
      return checkpoints.isEmpty() ? null : checkpoints.get(checkpoints.size() - 1);
    }

    Ending settled(Checkpoint c) {
      return new Ending(
          order,
          terms,
          startedAt,
          append(checkpoints, c),
          reason,
          endAt,
          billedSeconds,
          recordedAt,
          onAgentReport,
          exitCode);
    }

    Ending proven(long billed) {
      return new Ending(
          order,
          terms,
          startedAt,
          checkpoints,
          reason,
          endAt,
          billed,
          recordedAt,
          onAgentReport,
          exitCode);
    }

    /**
     * The end is the instant it was recorded, not one the agent's report gave: the report was
     * stamped ahead of this node's clock (the clock stepped back after the workload died, or the
     * agent's runs ahead) or not stamped, so it proves nothing about that instant and only the
     * host's heartbeats do (finding V). Derived from the record, so it holds after a restart.
     */
    boolean endedWhenRecorded() {
      return recordedAt != null && recordedAt.equals(endAt);
    }

    /** The final settlement is recorded: every billed second is settled, and proven by the host. */
    boolean finalSettled() {
      return RentalBilling.settledThrough(last()) >= billedSeconds;
    }

    Finished closed(Instant at) {
      return new Finished(
          order,
          terms,
          startedAt,
          checkpoints,
          reason,
          endAt,
          billedSeconds,
          at,
          exitCode,
          List.of());
    }
  }

  /**
   * {@code exitCode}: see {@link Ended} (null in snapshots written before it was kept). {@code
   * refunds}: an operator's refunds, oldest first (absent in snapshots written before refunds: none
   * then).
   */
  public record Finished(
      Order order,
      Terms terms,
      Instant startedAt,
      List<Checkpoint> checkpoints,
      EndReason reason,
      Instant endAt,
      long billedSeconds,
      Instant closedAt,
      Integer exitCode,
      List<Refunded> refunds)
      implements State {
    @com.fasterxml.jackson.annotation.JsonCreator
    public Finished {
      refunds = refunds == null ? List.of() : List.copyOf(refunds);
    }

    Checkpoint last() {
      return checkpoints.isEmpty() ? null : checkpoints.get(checkpoints.size() - 1);
    }

    /** What the rental charged its renter in all (its final settlement). */
    long charged() {
      return last() == null ? 0 : last().cost();
    }

    Refunded latestRefund() {
      return refunds.isEmpty() ? null : refunds.get(refunds.size() - 1);
    }

    /** What refunds gave back so far. */
    long refunded() {
      Refunded latest = latestRefund();
      return latest == null ? 0 : latest.cumulativeAmount();
    }

    Refunded refund(String reference) {
      for (Refunded r : refunds) if (r.reference().equals(reference)) return r;
      return null;
    }

    Finished withRefund(Refunded r) {
      List<Refunded> more = new ArrayList<>(refunds);
      more.add(r);
      return new Finished(
          order,
          terms,
          startedAt,
          checkpoints,
          reason,
          endAt,
          billedSeconds,
          closedAt,
          exitCode,
          more);
    }
  }

  // ---------------------------------------------------------------------------------------------

  private final String rentalId;
  private final Settings settings;
  private final RentalBilling billing;
  private final Ports ports;
  private final Clock clock;
  private final ActorContext<Command> context;
  private final TimerScheduler<Command> timers;
  private final EngineMetrics metrics;
  private final SettlementDelivery delivery;
  // Made at the first refund: a running rental has none, and most never have one.
  private RefundDelivery refunds;

  /**
   * When this incarnation was set up: its first recovery's start. Should it recover again in this
   * instance (a restart after a journal failure, after its backoff), that recovery is not timed.
   */
  private final long startedNanos;

  private boolean recoveryTimed;

  // Actor-local: who waits for the first match answer, live subscribers, and the asks in flight.
  private ActorRef<StatusReply<View>> creator;
  // The launch under way before anything is recorded (issue 15): its hold and its match are asked
  // for at once, and recorded together with the request once both are in. Null outside it; lost
  // with a crash, when the pending hold and reservation expire by themselves.
  private Launch launch;
  // Waiting for a match (recorded): the hold answered in this incarnation, a match that came before
  // it, and whether a match request is out.
  private boolean holdInHand;
  private Matcher.Matched earlyMatch;
  private boolean matchInFlight;
  // Provisioning: the account confirmed the hold (in this incarnation); the workload is started
  // only then.
  private boolean holdConfirmed;
  // System.nanoTime() when the launch's current step began; 0 outside a launch.
  private long launchStepStarted;
  // Most rentals are never watched: a set of their own only once someone subscribes (an empty
  // set's remove, clear and iteration work; add does not).
  private Set<ActorRef<Update>> subscribers = Collections.emptySet();
  private boolean extending;
  // The snapshot of a stop that keeps the workspace acknowledged its Create: until then the rental
  // does not close (a lost Create would leave the workspace kept for a snapshot that never exists).
  private boolean snapshotCreated;
  // The node's ticker, once a subscriber came: it sends the per-second ticks.
  private ActorRef<RentalTicks.Command> ticks;
  // Counted in the node's running rentals (EngineMetrics.runningRentals), the settle interval's
  // load.
  private boolean countedRunning;
  // One liveness question at a time, however slow the host's node answers.
  private boolean askingLiveness;
  // The latest heartbeat a liveness answer showed while an end waits for its proof.
  private Instant lastHeartbeatSeen;
  // The latest heartbeat any liveness answer showed: a HostLost declared before it is stale.
  private Instant latestHeartbeat;
  // The agent reported that the workload of this ended rental had stopped before the end: the end
  // is proven no further than that, and no further than the host's last heartbeat that listed it.
  private Instant reportedStop;
  // Actor-local: the agent reported the workload stopped at or after the end (finding L).
  private boolean reportCoversEnd;
  // The last match answer was Matcher.Unavailable: the read side could not look, so the wait
  // deadline waits for a real answer.
  private boolean readSideDown;
  // A launch refused because its first match could not look: told 503 once the rental closed (hold
  // released).
  private ActorRef<StatusReply<View>> refusedCreator;

  /** A launch before its request is recorded: what was asked, and the two answers so far. */
  private static final class Launch {
    final Order order;
    final long startedNanos = System.nanoTime();
    HoldAnswer hold;
    MatchAnswer match;

    Launch(Order order) {
      this.order = order;
    }

    boolean holdRefused() {
      return hold != null && hold.refusal() != null && hold.refusal() != Rejection.UNAVAILABLE;
    }

    Matcher.Matched matched() {
      return match != null && match.result() instanceof Matcher.Matched m ? m : null;
    }
  }

  public static void init(ActorSystem<?> system, Settings settings, Ports ports, Clock clock) {
    ClusterSharding.get(system)
        .init(Entity.of(ENTITY_KEY, ctx -> startedBy(ctx.getEntityId(), settings, ports, clock)));
  }

  /**
   * The rental as sharding starts it, by its first message: a {@link Create} under an id its launch
   * drew a moment ago ({@link Create#freshId}) says so to the journal ({@link FreshEntities})
   * before the recovery begins, which then reads nothing. Every other first message, and every
   * later start, recovers as always.
   */
  static Behavior<Command> startedBy(String rentalId, Settings settings, Ports ports, Clock clock) {
    return Behaviors.setup(
        ctx ->
            Behaviors.withStash(
                1,
                first ->
                    Behaviors.receive(Command.class)
                        .onAnyMessage(
                            message -> {
                              // The store is not asked, so this claim stands for it: 96 bits
                              // drawn for this launch, that it has told no one else yet.
                              if (message instanceof Create c && c.freshId()) {
                                FreshEntities.get(ctx.getSystem())
                                    .starting(PersistenceId.of(ENTITY_KEY.name(), rentalId).id());
                              }
                              first.stash(message);
                              return first.unstashAll(create(rentalId, settings, ports, clock));
                            })
                        .build()));
  }

  public static Behavior<Command> create(
      String rentalId, Settings settings, Ports ports, Clock clock) {
    return Behaviors.setup(
        ctx ->
            Behaviors.withTimers(
                timers -> new Rental(rentalId, settings, ports, clock, ctx, timers)));
  }

  private Rental(
      String rentalId,
      Settings settings,
      Ports ports,
      Clock clock,
      ActorContext<Command> context,
      TimerScheduler<Command> timers) {
    super(PersistenceId.of(ENTITY_KEY.name(), rentalId), JournalFailures.RESTART_WITH_BACKOFF);
    this.rentalId = rentalId;
    this.settings = settings;
    this.billing = RentalBilling.of(settings);
    this.ports = ports;
    this.clock = clock;
    this.context = context;
    this.timers = timers;
    this.metrics = EngineMetrics.get(context.getSystem());
    this.delivery = new SettlementDelivery(rentalId, settings, ports, clock, context, timers);
    this.startedNanos = System.nanoTime();
  }

  @Override
  public State emptyState() {
    return Empty.INSTANCE;
  }

  @Override
  public Set<String> tagsFor(Event event) {
    return Set.of(tagFor(rentalId));
  }

  @Override
  public RetentionCriteria retentionCriteria() {
    return RetentionCriteria.snapshotEvery(100, 2);
  }

  @Override
  public SignalHandler<State> signalHandler() {
    return newSignalHandlerBuilder()
        .onSignal(RecoveryCompleted.instance(), this::resume)
        .onSignal(PostStop.instance(), state -> stopTicks())
        .onSignal(PreRestart.instance(), state -> stopTicks())
        .build();
  }

  private RefundDelivery refunds() {
    if (refunds == null) refunds = new RefundDelivery(rentalId, settings, ports, context, timers);
    return refunds;
  }

  /** After a restart, pick up where the journal says we are; every step below is idempotent. */
  private void resume(State state) {
    if (!recoveryTimed) {
      recoveryTimed = true;
      metrics.rentalRecovery.recordMicros((System.nanoTime() - startedNanos) / 1_000);
    }
    if (state instanceof Pending p) {
      placeHold(p.order()); // then matching resumes
    } else if (state instanceof Provisioning p) {
      resumeProvisioning(p);
    } else if (state instanceof Running r) {
      if (r.last() != null) delivery.deliver(r.order(), r.terms(), r.last(), false);
      // Recovered (typically on a survivor after a node loss, woken by the RentalWaker): its own
      // instants are looked at now, not a second from now, so an overdue settlement is asked for
      // at once.
      timers.startSingleTimer(Timer.DUE, Timer.DUE, Duration.ZERO);
    } else if (state instanceof Ending e) {
      createSnapshot(e);
      delivery.finish(e);
      if (!e.finalSettled()) askLivenessForEnd(e);
    } else if (state instanceof Finished f) {
      createSnapshot(f);
      refunds().deliver(f); // the latest refund, should an account not have it yet
    } else if (state instanceof RefusedRental r) {
      releaseRefusedHold(r.order());
    }
  }

  private void resumeProvisioning(Provisioning p) {
    confirmHold(p.order());
    // What is left of the timeout since the match, not a fresh one: a node that keeps crashing must
    // not keep a rental provisioning forever. The agent gets at least one ask timeout to report a
    // start.
    Duration left =
        Duration.between(now(), p.terms().matchedAt().plus(settings.provisioningTimeout()));
    timers.startSingleTimer(
        Timer.PROVISION_EXPIRED,
        Timer.PROVISION_EXPIRED,
        left.compareTo(settings.askTimeout()) < 0 ? settings.askTimeout() : left);
    if (p.preemptionDeadline() != null) preemptionDueAt(p.preemptionDeadline());
  }

  // ---------------------------------------------------------------------------------------------
  // Commands: one handler per state, then what every state answers alike. The table is built once
  // for every rental (SharedCommandHandler): each handler takes the rental it runs for.

  private static final SharedCommandHandler<Rental, Command, Event, State> COMMANDS = commands();

  @Override
  public CommandHandlerWithReply<Command, Event, State> commandHandler() {
    return (state, command) -> COMMANDS.apply(this, state, command);
  }

  private static SharedCommandHandler<Rental, Command, Event, State> commands() {
    var builder = SharedCommandHandler.<Rental, Command, Event, State>builder();
    emptyHandler(builder.forStateType(Empty.class));
    pendingHandler(builder.forStateType(Pending.class));
    provisioningHandler(builder.forStateType(Provisioning.class));
    runningHandler(builder.forStateType(Running.class));
    endingHandler(builder.forStateType(Ending.class));
    refusedHandler(builder.forStateType(RefusedRental.class));
    finishedHandler(builder.forStateType(Finished.class));
    anyStateHandler(builder.forStateType(State.class));
    return builder.build();
  }

  private static void emptyHandler(
      SharedCommandHandler.ForState<Rental, Empty, Command, Event, State> empty) {
    empty
        .onCommand(Create.class, Rental::onCreate)
        .onCommand(HoldAnswer.class, Rental::onLaunchHold)
        .onCommand(MatchAnswer.class, Rental::onLaunchMatch)
        .onCommand(Timer.class, Rental::onLaunchTimer)
        .onCommand(CheckReservation.class, Rental::onCheckReservation)
        // Anything else for a rental being launched waits until its request is recorded.
        .onCommandWhile(Rental::launching, Rental::stash)
        .onCommand(Get.class, (r, s, c) -> r.Effect().reply(c.replyTo(), r.notFound()))
        .onCommand(Refund.class, (r, s, c) -> r.Effect().reply(c.replyTo(), r.notFound()))
        .onCommand(Stop.class, (r, s, c) -> r.Effect().reply(c.replyTo(), r.notFound()))
        .onCommand(Subscribe.class, (r, s, c) -> r.Effect().reply(c.replyTo(), r.notFound()))
        .onAnyCommand(Rental::ignore);
  }

  private static void pendingHandler(
      SharedCommandHandler.ForState<Rental, Pending, Command, Event, State> pending) {
    pending
        .onCommand(HoldAnswer.class, Rental::onHoldAnswer)
        .onCommand(MatchAnswer.class, Rental::onMatchAnswer)
        .onCommand(Timer.class, Rental::onPendingTimer)
        .onCommand(Rental::stopWithSnapshot, Rental::onSnapshotStopNotRunning)
        .onCommand(Stop.class, Rental::onStopPending);
  }

  private static void provisioningHandler(
      SharedCommandHandler.ForState<Rental, Provisioning, Command, Event, State> provisioning) {
    provisioning
        .onCommand(WorkloadStarted.class, Rental::onStarted)
        .onCommand(WorkloadFailed.class, (r, s, c) -> r.failProvisioningFrom(s, c.hostId()))
        .onCommand(HostLost.class, (r, s, c) -> r.failProvisioningFrom(s, c.hostId()))
        .onCommand(StartAnswer.class, Rental::onStartAnswer)
        .onCommand(HoldConfirmAnswer.class, Rental::onHoldConfirmed)
        .onCommand(Preempt.class, Rental::onPreemptProvisioning)
        .onCommand(Timer.class, Rental::onProvisioningTimer)
        .onCommand(Rental::stopWithSnapshot, Rental::onSnapshotStopNotRunning)
        .onCommand(Stop.class, Rental::onStopProvisioning);
  }

  private static void runningHandler(
      SharedCommandHandler.ForState<Rental, Running, Command, Event, State> running) {
    running
        .onCommand(Timer.class, Rental::onRunningTimer)
        .onCommand(HostAttached.class, Rental::onHostAttached)
        .onCommand(LivenessAnswer.class, Rental::onLiveness)
        .onCommand(Delivered.class, Rental::onDeliveredRunning)
        .onCommand(ExtendAnswer.class, Rental::onExtendAnswer)
        .onCommand(Stop.class, Rental::onStopRunning)
        .onCommand(HostLost.class, Rental::onHostLostRunning)
        .onCommand(WorkloadStopped.class, Rental::onWorkloadStoppedRunning)
        .onCommand(WorkloadStarted.class, Rental::ignore) // a duplicate
        .onCommand(Preempt.class, Rental::onPreempt);
  }

  private static void endingHandler(
      SharedCommandHandler.ForState<Rental, Ending, Command, Event, State> ending) {
    ending
        .onCommand(LivenessAnswer.class, Rental::onEndLiveness)
        .onCommand(HostLost.class, Rental::onHostLostEnding)
        .onCommand(Delivered.class, Rental::onDeliveredEnding)
        .onCommand(Released.class, Rental::onReleased)
        .onCommand(SnapshotAnswer.class, Rental::onSnapshotAnswer)
        .onCommand(WorkloadStopped.class, Rental::onWorkloadStoppedEnding)
        .onCommand(Timer.class, Rental::onEndingTimer)
        .onCommand(Rental::stopWithSnapshot, Rental::onSnapshotStopNotRunning)
        .onCommand(Stop.class, Rental::answerStop);
  }

  private static void refusedHandler(
      SharedCommandHandler.ForState<Rental, RefusedRental, Command, Event, State> refused) {
    refused
        .onCommand(Released.class, Rental::onRefusedHoldReleased)
        .onCommand(c -> c == Timer.RETRY_HOLD, Rental::onRetryRefusedRelease);
  }

  private static void finishedHandler(
      SharedCommandHandler.ForState<Rental, Finished, Command, Event, State> finished) {
    finished
        .onCommand(Refund.class, Rental::onRefund)
        .onCommand(
            RefundDelivered.class,
            (r, s, c) -> r.sideEffectOnly(() -> r.refunds().acknowledged(s, c)))
        .onCommand(
            c -> c == Timer.REDELIVER_REFUND,
            (r, s, c) -> r.sideEffectOnly(() -> r.refunds().deliver(s)));
  }

  /** Commands every non-empty state answers the same way. */
  private static void anyStateHandler(
      SharedCommandHandler.ForState<Rental, State, Command, Event, State> any) {
    any.onCommand(Get.class, Rental::answerGet)
        .onCommand(Subscribe.class, Rental::onSubscribe)
        .onCommand(Unsubscribe.class, Rental::onUnsubscribe)
        .onCommand(Create.class, Rental::onCreateAgain)
        .onCommand(Rental::stopWithSnapshot, Rental::onSnapshotStopNotRunning)
        .onCommand(Stop.class, Rental::answerStop)
        .onCommand(WorkloadStarted.class, Rental::onLateWorkloadStarted)
        .onCommand(MatchAnswer.class, Rental::onLateMatch)
        .onCommand(CheckReservation.class, Rental::onCheckReservation)
        .onCommand(Refund.class, Rental::onRefundNotFinal)
        // Late answers, duplicates, timers of a phase that is over.
        .onAnyCommand(Rental::ignore);
  }

  private boolean launching() {
    return launch != null;
  }

  private ReplyEffect<Event, State> stash(State state, Command command) {
    return Effect().stash();
  }

  private ReplyEffect<Event, State> ignore(State state, Command command) {
    return Effect().noReply();
  }

  // ---- refunds

  private ReplyEffect<Event, State> onRefund(Finished state, Refund cmd) {
    String reference = cmd.reference();
    if (reference == null || reference.isBlank() || reference.length() > 200)
      return Effect()
          .reply(
              cmd.replyTo(),
              reply(Rejection.INVALID_KEY, "a refund's reference is 1 to 200 characters"));
    Refunded earlier = state.refund(reference);
    if (earlier != null) {
      if (cmd.amount() != null && cmd.amount() != earlier.amount())
        return Effect()
            .reply(
                cmd.replyTo(),
                reply(
                    Rejection.IDEMPOTENCY_CONFLICT,
                    "refund "
                        + reference
                        + " of rental "
                        + rentalId
                        + " was for "
                        + Money.format(earlier.amount())
                        + " EUR"));
      return sideEffectOnly(() -> refunds().answerWhenDelivered(state, earlier, cmd.replyTo()));
    }
    long left = state.charged() - state.refunded();
    if (cmd.amount() != null && cmd.amount() <= 0)
      return Effect()
          .reply(cmd.replyTo(), reply(Rejection.INVALID_AMOUNT, "a refund must be positive"));
    long amount = cmd.amount() == null ? left : cmd.amount();
    if (left <= 0 || amount > left)
      return Effect()
          .reply(
              cmd.replyTo(),
              reply(
                  Rejection.REFUND_EXCEEDS_CHARGE,
                  "rental "
                      + rentalId
                      + " charged "
                      + Money.format(state.charged())
                      + " EUR, of which "
                      + Money.format(state.refunded())
                      + " EUR is refunded already: at most "
                      + Money.format(Math.max(left, 0))
                      + " EUR is left to refund"));
    long cumulative = state.refunded() + amount;
    long provider = RentalRefunds.providerShare(cumulative, state.last());
    Refunded refunded =
        new Refunded(
            reference, amount, cmd.reason(), cumulative, provider, cumulative - provider, now());
    return Effect()
        .persist(refunded)
        .thenRun(s -> refunds().answerWhenDelivered((Finished) s, refunded, cmd.replyTo()))
        .thenNoReply();
  }

  /** A rental whose money is not final yet, or that never charged anything. */
  private ReplyEffect<Event, State> onRefundNotFinal(State state, Refund cmd) {
    if (state instanceof RefusedRental)
      return Effect()
          .reply(
              cmd.replyTo(),
              reply(
                  Rejection.REFUND_EXCEEDS_CHARGE,
                  "rental " + rentalId + " was refused and charged nothing"));
    return Effect()
        .reply(
            cmd.replyTo(),
            reply(
                Rejection.RENTAL_NOT_ENDED,
                "rental "
                    + rentalId
                    + " is "
                    + view(state).status().wire()
                    + "; refund it once it has ended and its money is final"));
  }

  static RefundView refundView(String rentalId, Finished state, Refunded r) {
    return new RefundView(
        rentalId,
        state.order().renterId(),
        state.terms().providerId(),
        r.reference(),
        r.amount(),
        r.reason(),
        r.at(),
        state.charged(),
        r.cumulativeAmount(),
        r.cumulativeProvider(),
        r.cumulativePlatform());
  }

  private ReplyEffect<Event, State> answerGet(State state, Get cmd) {
    return Effect().reply(cmd.replyTo(), viewFor(state, cmd.renterId()));
  }

  private ReplyEffect<Event, State> answerStop(State state, Stop cmd) {
    return Effect().reply(cmd.replyTo(), viewFor(state, cmd.renterId()));
  }

  /**
   * The host's agent attached: its entity now holds a proof, so the rental asks at once, even while
   * an earlier question is unanswered. After a node loss that earlier one often went to the host's
   * entity on the lost node, or reached its new incarnation before the agent did, and waiting for
   * its timeout kept the rental from settling for up to {@link #LIVENESS_ASK_AT_MOST} and a tick
   * more. A second answer settles nothing twice: checkpoints stay a settle interval apart.
   */
  private ReplyEffect<Event, State> onHostAttached(Running state, HostAttached cmd) {
    if (!state.terms().hostId().equals(cmd.hostId())) return Effect().noReply();
    askingLiveness = false;
    return onDue(state);
  }

  private ReplyEffect<Event, State> onRetryRefusedRelease(RefusedRental state, Command timer) {
    return sideEffectOnly(() -> releaseRefusedHold(state.order()));
  }

  // ---- creation, hold and matching

  /**
   * A launch asks for its hold and its match at once, both pending (they go back by themselves
   * unless confirmed within {@link Settings#confirmWithin}), and records the request only with
   * their answers: with the match when both are in, two writes in all (issue 15, decision 1).
   */
  private ReplyEffect<Event, State> onCreate(Empty state, Create cmd) {
    if (launch != null) return Effect().stash(); // a retry: answered once the request is recorded
    Order order = new Order(cmd.renterId(), cmd.spec(), billing.initialHold(cmd.spec()), now());
    creator = cmd.replyTo();
    launch = new Launch(order);
    placeHold(order, settings.confirmWithin());
    sendMatch(order, settings.confirmWithin());
    timers.startSingleTimer(
        Timer.LAUNCH_EXPIRED, Timer.LAUNCH_EXPIRED, settings.askTimeout().dividedBy(2));
    return Effect().noReply();
  }

  private ReplyEffect<Event, State> onLaunchHold(Empty state, HoldAnswer answer) {
    if (launch == null) return Effect().noReply(); // a pending hold of a lost launch: it expires
    if (launch.hold == null) metrics.launchHold.recordMicros(launchMicros());
    launch.hold = answer;
    if (answer.refusal() == Rejection.UNAVAILABLE) return recordRequest(); // retried as before
    return decideLaunch();
  }

  private ReplyEffect<Event, State> onLaunchMatch(Empty state, MatchAnswer answer) {
    if (launch == null) {
      // The match of a launch this incarnation does not know (it crashed): the cards go back now
      // rather than when they expire.
      if (answer.result() instanceof Matcher.Matched m)
        ports
            .host(m.reservation().hostId())
            .tell(new Host.ReleaseCards(rentalId, context.getSystem().ignoreRef()));
      return Effect().noReply();
    }
    if (launch.match == null) metrics.launchMatch.recordMicros(launchMicros());
    launch.match = answer;
    return decideLaunch();
  }

  private ReplyEffect<Event, State> onLaunchTimer(Empty state, Timer timer) {
    if (timer == Timer.LAUNCH_EXPIRED && launch != null) return recordRequest();
    return Effect().noReply();
  }

  private long launchMicros() {
    return (System.nanoTime() - launch.startedNanos) / 1_000;
  }

  /**
   * Both answers in: matched and held, the request and the match are recorded in one write; a
   * refused hold is recorded as the refusal, its reservation released at once; anything else (no
   * capacity now, the read side down) records the request and goes on as a waiting rental.
   */
  private ReplyEffect<Event, State> decideLaunch() {
    Order order = launch.order;
    Requested requested =
        new Requested(order.renterId(), order.spec(), order.holdAmount(), order.createdAt());
    if (launch.holdRefused()) {
      Rejection code = launch.hold.refusal();
      Matcher.Matched m = launch.matched();
      if (m != null)
        ports
            .host(m.reservation().hostId())
            .tell(new Host.ReleaseCards(rentalId, context.getSystem().ignoreRef()));
      ActorRef<StatusReply<View>> waiting = creator;
      creator = null;
      endLaunch();
      // A match still on its way lands in RefusedRental, which releases its cards (onLateMatch).
      return Effect()
          .persist(List.of(requested, new Refused(code, now())))
          .thenRun(
              s -> {
                tellRefusal(waiting, code);
                releaseRefusedHold(order);
              })
          .thenNoReply()
          .thenUnstashAll();
    }
    if (launch.hold == null || launch.match == null) return Effect().noReply();
    Matcher.Matched m = launch.matched();
    if (m == null) return recordRequest();
    long bothIn = System.nanoTime();
    endLaunch();
    return Effect()
        .persist(List.of(requested, new Matched(termsOf(m.reservation()), now())))
        .thenRun(
            s -> {
              metrics.launchMatchedRecorded.recordMicros((System.nanoTime() - bothIn) / 1_000);
              provisioningStarted(s);
            })
        .thenNoReply()
        .thenUnstashAll();
  }

  /**
   * The launch's answers did not make a match: the request is recorded alone, as before decision 1,
   * and the rental waits. The hold is placed again as a confirmed one (it confirms the pending
   * one); a match answer in hand is handed to the waiting rental, one still out will land there.
   */
  private ReplyEffect<Event, State> recordRequest() {
    Order order = launch.order;
    MatchAnswer known = launch.match;
    long launchMicros = launchMicros();
    metrics.launchRecorded.recordMicros(launchMicros);
    // The match out was asked for at the launch's start, half an ask timeout ago when the launch
    // timer ran out: asked again twice the ask timeout after it, as any request (no wall-clock
    // reading here, so that a simulated run stays deterministic).
    Duration retryIn =
        settings.askTimeout().multipliedBy(2).minus(settings.askTimeout().dividedBy(2));
    endLaunch();
    return Effect()
        .persist(
            new Requested(order.renterId(), order.spec(), order.holdAmount(), order.createdAt()))
        .thenRun(
            s -> {
              holdInHand = false;
              // Out, or its answer in hand and handed on below: either way the hold's answer must
              // not ask for another match before that answer is seen.
              matchInFlight = true;
              timers.startSingleTimer(Timer.WAIT_EXPIRED, Timer.WAIT_EXPIRED, remainingWait(order));
              // The answer in hand goes into the mailbox before the hold is asked for, so that it
              // is handled before the hold's answer can arrive.
              if (known != null) context.getSelf().tell(known);
              // A matcher lost with its node never answers: asked again, as any waiting request.
              else
                timers.startSingleTimer(
                    Timer.RETRY_MATCH,
                    Timer.RETRY_MATCH,
                    retryIn.isNegative() ? Duration.ZERO : retryIn);
              placeHold(order);
            })
        .thenNoReply()
        .thenUnstashAll();
  }

  private void endLaunch() {
    launch = null;
    timers.cancel(Timer.LAUNCH_EXPIRED);
  }

  private ReplyEffect<Event, State> onCreateAgain(State state, Create cmd) {
    boolean same = state.order() != null && state.order().ownedBy(cmd.renterId());
    if (!same)
      return Effect()
          .reply(cmd.replyTo(), reply(Rejection.ALREADY_EXISTS, "rental " + rentalId + " exists"));
    if (state instanceof RefusedRental refused)
      return Effect().reply(cmd.replyTo(), reply(refused.code(), refusalDetail(refused.code())));
    return Effect().reply(cmd.replyTo(), StatusReply.success(view(state)));
  }

  /**
   * Idempotent: an open hold of at least this amount answers as it stands (a confirmed placement
   * confirms a pending one).
   */
  private void placeHold(Order order) {
    placeHold(order, null);
  }

  /** {@code confirmWithin}: a pending hold, for a launch (null: confirmed). */
  private void placeHold(Order order, Duration confirmWithin) {
    context.askWithStatus(
        Account.HoldView.class,
        ports.account(order.renterId()),
        settings.askTimeout(),
        reply -> new Account.PlaceHold(rentalId, order.holdAmount(), confirmWithin, reply),
        (view, failure) -> new HoldAnswer(order.holdAmount(), Rejection.codeOf(failure)));
  }

  /** Matched and recorded: the hold must not expire under the rental. */
  private void confirmHold(Order order) {
    context.askWithStatus(
        Account.HoldView.class,
        ports.account(order.renterId()),
        settings.askTimeout(),
        reply -> new Account.ConfirmHold(rentalId, reply),
        (view, failure) -> new HoldConfirmAnswer(Rejection.codeOf(failure)));
  }

  /** Records the launch step that just ended and starts timing the next one. */
  private void launchStep(LatencyHistogram step) {
    if (launchStepStarted == 0) return;
    long now = System.nanoTime();
    step.recordMicros((now - launchStepStarted) / 1_000);
    launchStepStarted = now;
  }

  private ReplyEffect<Event, State> onHoldAnswer(Pending state, HoldAnswer answer) {
    if (answer.refusal() == null) {
      launchStep(metrics.launchHold);
      holdInHand = true;
      // Recorded in this incarnation, the wait runs already; after a restart it starts here.
      if (!timers.isTimerActive(Timer.WAIT_EXPIRED))
        timers.startSingleTimer(
            Timer.WAIT_EXPIRED, Timer.WAIT_EXPIRED, remainingWait(state.order()));
      if (earlyMatch != null) return matched(state, earlyMatch.reservation());
      if (!matchInFlight && !timers.isTimerActive(Timer.RETRY_MATCH)) requestMatch(state.order());
      return Effect().noReply();
    }
    if (answer.refusal() == Rejection.UNAVAILABLE) {
      timers.startSingleTimer(Timer.RETRY_HOLD, Timer.RETRY_HOLD, settings.retryInterval());
      return Effect().noReply();
    }
    ActorRef<StatusReply<View>> waiting = creator;
    creator = null;
    return Effect()
        .persist(new Refused(answer.refusal(), now()))
        .thenRun(
            s -> {
              tellRefusal(waiting, answer.refusal());
              releaseRefusedHold(state.order());
            })
        .thenNoReply();
  }

  /**
   * A refused rental holds nothing, but a {@code PlaceHold} of its may still be on the way: an
   * earlier attempt whose ask timed out (held in a moving shard's buffer, say) before the retry was
   * refused. Releasing the hold id leaves the account a tombstone, so that such a placement is
   * refused ({@code hold_closed}) when it lands, or released if it landed first; retried until the
   * account answers, and again after a restart (answered from the tombstone, nothing written).
   */
  private void releaseRefusedHold(Order order) {
    delivery.releaseHold(order.renterId());
  }

  private ReplyEffect<Event, State> onRefusedHoldReleased(RefusedRental state, Released r) {
    if (!r.ok())
      timers.startSingleTimer(Timer.RETRY_HOLD, Timer.RETRY_HOLD, settings.retryInterval());
    return Effect().noReply();
  }

  private static void tellRefusal(ActorRef<StatusReply<View>> waiting, Rejection code) {
    if (waiting != null) waiting.tell(reply(code, refusalDetail(code)));
  }

  private void requestMatch(Order order) {
    sendMatch(order, settings.confirmWithin());
    matchInFlight = true;
    // A matcher lost with its node never answers: ask again. A late duplicate answer releases its
    // cards (onLateMatch).
    timers.startSingleTimer(
        Timer.RETRY_MATCH, Timer.RETRY_MATCH, settings.askTimeout().multipliedBy(2));
  }

  /**
   * Every reservation is pending until the rental's start claims it: one whose {@code Matched} is
   * never recorded (a crash, a lost answer) goes back by itself.
   */
  private void sendMatch(Order order, Duration claimWithin) {
    Spec s = order.spec();
    // Past its wait only because the read side was down, the rental still takes a match: no
    // deadline to drop it on.
    Instant deadline = readSideDown && !now().isBefore(order.waitEnds()) ? null : order.waitEnds();
    ports
        .matcher(s.gpu())
        .tell(
            new Matcher.Match(
                rentalId,
                order.renterId(),
                s.gpu(),
                s.count(),
                s.tier(),
                s.region(),
                s.maxPricePerGpuHour(),
                deadline,
                claimWithin,
                s.network(),
                s.runtime(),
                context.messageAdapter(Matcher.Result.class, MatchAnswer::new)));
  }

  private ReplyEffect<Event, State> onMatchAnswer(Pending state, MatchAnswer answer) {
    launchStep(metrics.launchMatch);
    matchInFlight = false;
    if (answer.result() instanceof Matcher.Matched m) {
      if (holdInHand) return matched(state, m.reservation());
      earlyMatch = m; // the hold's answer is still out: matched once it is in
      timers.cancel(Timer.RETRY_MATCH);
      return Effect().noReply();
    }
    if (answer.result() instanceof Matcher.Unavailable) return onReadSideDown(state);
    readSideDown = false;
    if (remainingWait(state.order()).compareTo(Duration.ZERO) <= 0)
      return endUnstarted(state.order(), null, EndReason.NO_CAPACITY, null);
    launchStepStarted = 0; // later attempts are not the launch's
    answerCreator(state);
    timers.startSingleTimer(Timer.RETRY_MATCH, Timer.RETRY_MATCH, settings.retryInterval());
    return Effect().noReply();
  }

  private Terms termsOf(Host.Reservation r) {
    return new Terms(
        r.hostId(),
        r.providerId(),
        r.cards(),
        r.pricePerGpuHour(),
        r.simulated(),
        now(),
        r.region(),
        r.runtime());
  }

  private ReplyEffect<Event, State> matched(Pending state, Host.Reservation r) {
    Terms terms = termsOf(r);
    earlyMatch = null;
    timers.cancel(Timer.WAIT_EXPIRED);
    timers.cancel(Timer.RETRY_MATCH);
    return Effect()
        .persist(new Matched(terms, now()))
        .thenRun(this::provisioningStarted)
        .thenNoReply();
  }

  private void provisioningStarted(State state) {
    launchStep(metrics.launchMatchedRecorded);
    launchStepStarted = 0;
    answerCreator(state);
    notifySubscribers(state);
    timers.startSingleTimer(
        Timer.PROVISION_EXPIRED, Timer.PROVISION_EXPIRED, settings.provisioningTimeout());
    confirmHold(state.order()); // then the workload starts (onHoldConfirmed)
  }

  /**
   * The matcher could not read the candidates (PostgreSQL unreachable): no answer about capacity. A
   * launch still waiting for its first answer is refused (HTTP 503) rather than promised a wait on
   * an outage; it ends {@code cancelled}, nothing charged, and hears so only once closed, its hold
   * released, so a retried POST never finds a second hold beside it. A rental already waiting keeps
   * waiting and asks again; while its last answer is this one its wait deadline does not end it
   * (WAIT_EXPIRED), and the first real answer decides.
   */
  private ReplyEffect<Event, State> onReadSideDown(Pending state) {
    launchStepStarted = 0;
    if (creator != null) {
      refusedCreator = creator;
      creator = null;
      return endUnstarted(state.order(), null, EndReason.CANCELLED, null);
    }
    readSideDown = true;
    timers.startSingleTimer(Timer.RETRY_MATCH, Timer.RETRY_MATCH, settings.retryInterval());
    return Effect().noReply();
  }

  /**
   * A match that lands after the rental stopped waiting for one (cancelled, no_capacity): the host
   * gets its cards back.
   */
  private ReplyEffect<Event, State> onLateMatch(State state, MatchAnswer answer) {
    if (answer.result() instanceof Matcher.Matched m) {
      String hostId = m.reservation().hostId();
      if (state.terms() == null || !state.terms().hostId().equals(hostId)) {
        ports.host(hostId).tell(new Host.ReleaseCards(rentalId, context.getSystem().ignoreRef()));
      }
    }
    return Effect().noReply();
  }

  private ReplyEffect<Event, State> onPendingTimer(Pending state, Timer timer) {
    return switch (timer) {
      case RETRY_HOLD -> sideEffectOnly(() -> placeHold(state.order()));
      case RETRY_MATCH -> sideEffectOnly(() -> requestMatch(state.order()));
      // An outage is not no capacity: past the deadline, the next real "no candidates" ends it
      // (onMatchAnswer).
      case WAIT_EXPIRED ->
          readSideDown
              ? Effect().noReply()
              : endUnstarted(state.order(), null, EndReason.NO_CAPACITY, null);
      default -> Effect().noReply();
    };
  }

  private ReplyEffect<Event, State> onStopPending(Pending state, Stop cmd) {
    if (!state.order().ownedBy(cmd.renterId())) return Effect().reply(cmd.replyTo(), notFound());
    return endUnstarted(state.order(), null, EndReason.CANCELLED, cmd.replyTo());
  }

  private Duration remainingWait(Order order) {
    return Duration.between(now(), order.waitEnds());
  }

  // ---- provisioning

  /**
   * Until the agent reports the start, the request is sent again now and then: a {@code
   * start_rental} handed to a session on a node that was shutting down, or to an agent that was
   * reconnecting, is otherwise lost. The agent answers a duplicate with the same {@code
   * rental_started}. Every ten retry intervals (10 s by default).
   */
  private Duration startResendInterval() {
    return settings.retryInterval().multipliedBy(10);
  }

  private void startWorkload(Order order, Terms terms) {
    if (!timers.isTimerActive(Timer.RESEND_START)) {
      timers.startTimerWithFixedDelay(
          Timer.RESEND_START, Timer.RESEND_START, startResendInterval());
    }
    Spec s = order.spec();
    context.askWithStatus(
        Done.class,
        ports.host(terms.hostId()),
        settings.askTimeout(),
        reply ->
            new Host.StartWorkload(
                rentalId,
                s.image(),
                s.command(),
                s.sshPublicKey(),
                s.network(),
                s.restore(),
                reply),
        (done, failure) -> new StartAnswer(Rejection.codeOf(failure)));
  }

  /**
   * The hold no longer expires: the workload may start (its start claims the reservation). A hold
   * that expired before the confirmation came covers nothing: the rental ends unstarted, never
   * charged, its cards released.
   */
  private ReplyEffect<Event, State> onHoldConfirmed(Provisioning state, HoldConfirmAnswer answer) {
    if (answer.refusal() == null) {
      holdConfirmed = true;
      startWorkload(state.order(), state.terms());
      return Effect().noReply();
    }
    if (answer.refusal() == Rejection.UNAVAILABLE) {
      timers.startSingleTimer(Timer.RETRY_HOLD, Timer.RETRY_HOLD, settings.retryInterval());
      return Effect().noReply();
    }
    return endUnstarted(state.order(), state.terms(), EndReason.PROVISIONING_FAILED, null);
  }

  private ReplyEffect<Event, State> onStartAnswer(Provisioning state, StartAnswer answer) {
    // The reservation expired before the start claimed it: the cards may be another's now.
    if (answer.refusal() == Rejection.RESERVATION_EXPIRED)
      return endUnstarted(state.order(), state.terms(), EndReason.PROVISIONING_FAILED, null);
    // The host is offline or busy reconnecting: try again until the provisioning timeout.
    if (answer.refusal() != null)
      timers.startSingleTimer(Timer.RETRY_MATCH, Timer.RETRY_MATCH, settings.retryInterval());
    return Effect().noReply();
  }

  private ReplyEffect<Event, State> onProvisioningTimer(Provisioning state, Timer timer) {
    return switch (timer) {
      case PROVISION_EXPIRED ->
          endUnstarted(state.order(), state.terms(), EndReason.PROVISIONING_FAILED, null);
      // The window closed before the workload started: nothing ran, nothing is charged.
      case PREEMPTION_DUE -> endUnstarted(state.order(), state.terms(), EndReason.PREEMPTED, null);
      case RETRY_HOLD -> sideEffectOnly(() -> confirmHold(state.order()));
      case RETRY_MATCH, RESEND_START ->
          sideEffectOnly(
              () -> {
                if (holdConfirmed) startWorkload(state.order(), state.terms());
                else confirmHold(state.order());
              });
      default -> Effect().noReply();
    };
  }

  private ReplyEffect<Event, State> failProvisioningFrom(Provisioning state, String hostId) {
    if (!fromHost(state.terms(), hostId)) return Effect().noReply();
    return endUnstarted(state.order(), state.terms(), EndReason.PROVISIONING_FAILED, null);
  }

  private ReplyEffect<Event, State> onStopProvisioning(Provisioning state, Stop cmd) {
    if (!state.order().ownedBy(cmd.renterId())) return Effect().reply(cmd.replyTo(), notFound());
    return endUnstarted(state.order(), state.terms(), EndReason.STOPPED_BY_RENTER, cmd.replyTo());
  }

  private ReplyEffect<Event, State> onStarted(Provisioning state, WorkloadStarted cmd) {
    if (!fromHost(state.terms(), cmd.hostId())) return Effect().noReply();
    // Metering starts when this node hears the agent say so: an agent's clock cannot move the start
    // earlier.
    Instant startedAt = now();
    timers.cancel(Timer.PROVISION_EXPIRED);
    timers.cancel(Timer.RETRY_MATCH);
    timers.cancel(Timer.RESEND_START);
    timers.cancel(
        Timer.PREEMPTION_DUE); // from now on DUE ends it at the deadline, billed until then
    return Effect()
        .persist(new Started(startedAt, now(), cmd.listedFrom()))
        .thenRun(this::meteringStarted)
        .thenNoReply();
  }

  private void meteringStarted(State state) {
    Running running = (Running) state;
    confirmCards(running);
    wakeAtNextInstant(running);
    notifySubscribers(state);
    for (ActorRef<Update> s : subscribers)
      ticks().tell(new RentalTicks.Watch(rentalId, s, meter(running)));
  }

  /**
   * Tells the host that the workload runs, with the agent's {@code listed_from}: from then on a
   * heartbeat that omits it proves it gone, whichever incarnation of the host hears it.
   */
  private void confirmCards(Running state) {
    ports
        .host(state.terms().hostId())
        .tell(
            new Host.ConfirmCards(
                rentalId,
                state.agentListedFrom(),
                state.startedAt(),
                context.getSystem().ignoreRef()));
  }

  // ---- running: its own instants, settlements, hold extension

  private ReplyEffect<Event, State> onRunningTimer(Running state, Timer timer) {
    if (timer == Timer.DUE) return onDue(state);
    if (timer == Timer.REDELIVER && state.last() != null)
      delivery.deliver(state.order(), state.terms(), state.last(), false);
    return Effect().noReply();
  }

  /**
   * One of the rental's own instants came (or the wake gap ran out): end it at its deadline or
   * limit, ask for the proof of a settlement that is due, and sleep until the next instant. Its
   * per-second ticks are {@link RentalTicks}' work, not this rental's.
   */
  private ReplyEffect<Event, State> onDue(Running state) {
    metrics.rentalWakes.increment();
    Instant now = now();
    if (state.pastPreemptionDeadline(now))
      return endRunning(state, EndReason.PREEMPTED, state.preemptionDeadline(), false, null);
    long second = secondsBetween(state.startedAt(), now);
    RentalBilling.Limit limit = RentalBilling.limit(state);
    if (second >= limit.seconds()) return endAtLimit(state, limit);
    if (billing.settlementDue(state, second, runningHere()) && !askingLiveness) askLiveness(state);
    wakeAtNextInstant(state);
    return Effect().noReply();
  }

  /**
   * The next instant this running rental has to act at: its next settlement (while one is due and
   * not yet proven by a heartbeat, a second from now, as it asks the host again), its limit (the
   * cap, or the hold used up once it could not grow), its preemption deadline; never more than
   * {@code maxWakeGap} away. Rescheduled whenever one of them moves.
   */
  private void wakeAtNextInstant(Running state) {
    Instant now = now();
    countRunning();
    Instant settleAt = billing.nextSettlementAt(state, runningHere());
    Instant next = settleAt.isAfter(now) ? settleAt : now.plusSeconds(1);
    next = earlier(next, state.startedAt().plusSeconds(RentalBilling.limit(state).seconds()));
    if (state.preemptionDeadline() != null) next = earlier(next, state.preemptionDeadline());
    next = earlier(next, now.plus(settings.maxWakeGap()));
    Duration left = Duration.between(now, next);
    timers.startSingleTimer(Timer.DUE, Timer.DUE, left.isNegative() ? Duration.ZERO : left);
  }

  /** The rental's limit or deadline moved: its next instant and its subscribers' meter move too. */
  private void limitMoved(State state) {
    if (!(state instanceof Running running)) return;
    wakeAtNextInstant(running);
    if (!subscribers.isEmpty()) ticks().tell(new RentalTicks.Rebase(rentalId, meter(running)));
  }

  /**
   * What a subscriber's ticks are computed from: the frozen price and cards, the start, and where
   * the meter stops (the limit, or the preemption deadline: the rental ends there).
   */
  static RentalTicks.Meter meter(Running state) {
    long end = RentalBilling.limit(state).seconds();
    if (state.preemptionDeadline() != null) {
      Duration toDeadline = Duration.between(state.startedAt(), state.preemptionDeadline());
      long deadlineSecond =
          Math.max(0, toDeadline.getSeconds() + (toDeadline.getNano() > 0 ? 1 : 0));
      end = Math.min(end, deadlineSecond);
    }
    return new RentalTicks.Meter(
        state.startedAt(),
        state.terms().pricePerGpuHour(),
        state.terms().cards().size(),
        end,
        RentalBilling.settledThrough(state.last()));
  }

  private ActorRef<RentalTicks.Command> ticks() {
    if (ticks == null) ticks = RentalTicks.of(context.getSystem(), clock);
    return ticks;
  }

  /** This incarnation stops (ends, passivates, restarts): its subscribers' ticks stop with it. */
  private void stopTicks() {
    if (ticks != null) ticks.tell(new RentalTicks.Forget(rentalId));
    if (countedRunning) {
      countedRunning = false;
      metrics.runningRentals.decrement();
    }
  }

  /**
   * This incarnation is running: counted in the node's running rentals (once; {@link #stopTicks}
   * uncounts it when it ends, passivates or restarts).
   */
  private void countRunning() {
    if (countedRunning) return;
    countedRunning = true;
    metrics.runningRentals.increment();
  }

  /** The node's load that stretches the settle interval: its running rentals. */
  private long runningHere() {
    return metrics.runningRentals.sum();
  }

  private ReplyEffect<Event, State> endAtLimit(Running state, RentalBilling.Limit limit) {
    return endRunning(
        state, limit.reason(), state.startedAt().plusSeconds(limit.seconds()), false, null);
  }

  /**
   * The longest a running rental waits for its host's answer. The host answers from memory within
   * milliseconds; a question that goes unanswered went to a host entity that is gone (its node was
   * lost, and the entity starts on a survivor once the node is removed), and the rental asks again
   * at its next look, a second later, instead of waiting out the ask timeout. A question that times
   * out settles nothing, so this moves no money.
   */
  static final Duration LIVENESS_ASK_AT_MOST = Duration.ofSeconds(2);

  /** Settle only what the host is known to have run: up to its last heartbeat. */
  private void askLiveness(Running state) {
    askingLiveness = true;
    Duration timeout =
        settings.askTimeout().compareTo(LIVENESS_ASK_AT_MOST) > 0
            ? LIVENESS_ASK_AT_MOST
            : settings.askTimeout();
    context.ask(
        Host.Liveness.class,
        ports.host(state.terms().hostId()),
        timeout,
        reply -> new Host.GetLiveness(rentalId, reply),
        (liveness, failure) -> new LivenessAnswer(failure == null ? liveness : null));
  }

  private ReplyEffect<Event, State> onLiveness(Running state, LivenessAnswer answer) {
    askingLiveness = false;
    // No answer (the host's shard moving, an ask timeout) or no heartbeat yet proves nothing: no
    // settlement now, the next tick asks again. A settled second is never taken back, so it is only
    // ever one the host covered.
    if (answer.liveness() == null || answer.liveness().lastHeartbeatAt() == null)
      return Effect().noReply();
    noteHeartbeat(answer.liveness());
    if (RentalBilling.gone(answer.liveness())) return endGone(state, answer.liveness());
    if (answer.liveness().rentalUnconfirmed()) {
      // The host never heard that the workload runs (the confirmation was lost, and the host has
      // restarted since): it would not see a heartbeat omit it, so its heartbeats prove nothing of
      // this rental. Tell it again; the next settlement waits for an answer that knows.
      confirmCards(state);
      return Effect().noReply();
    }
    Instant now = now();
    long second =
        billing.settleThrough(
            state, RentalBilling.runningProof(answer.liveness()), now, runningHere());
    if (second == RentalBilling.NONE) {
      maybeExtend(state); // the hold may be what holds the settlement back
      return Effect().noReply();
    }
    Checkpoint checkpoint = billing.checkpoint(state.terms(), second, now);
    return Effect()
        .persist(new Settled(checkpoint, now))
        .thenRun(s -> settled(state.last(), (Running) s))
        .thenNoReply();
  }

  private void settled(Checkpoint previous, Running state) {
    countSettlement(previous, state.last());
    delivery.deliver(state.order(), state.terms(), state.last(), false);
    maybeExtend(state);
    wakeAtNextInstant(state);
  }

  /**
   * Node metrics of a persisted settlement: its seconds and cost beyond the previous checkpoint.
   */
  private void countSettlement(Checkpoint previous, Checkpoint checkpoint) {
    metrics.settlements.increment();
    metrics.secondsMetered.add(checkpoint.throughSecond() - RentalBilling.settledThrough(previous));
    metrics.microEurosMetered.add(checkpoint.cost() - (previous == null ? 0 : previous.cost()));
  }

  private ReplyEffect<Event, State> onDeliveredRunning(Running state, Delivered d) {
    delivery.acknowledged(d);
    return Effect().noReply();
  }

  private void maybeExtend(Running state) {
    long target = billing.extensionTarget(state);
    if (extending || target == 0) return;
    extending = true;
    context.askWithStatus(
        Account.HoldView.class,
        ports.account(state.order().renterId()),
        settings.askTimeout(),
        reply -> new Account.ExtendHold(rentalId, target, reply),
        (view, failure) -> new ExtendAnswer(target, Rejection.codeOf(failure)));
  }

  private ReplyEffect<Event, State> onExtendAnswer(Running state, ExtendAnswer answer) {
    extending = false;
    if (answer.refusal() == null)
      return Effect()
          .persist(new HoldExtended(answer.newAmount(), now()))
          .thenRun(this::limitMoved)
          .thenNoReply();
    EndReason reason = EndReason.ofExtensionRefusal(answer.refusal());
    if (reason == null || reason == state.extensionRefused())
      return Effect().noReply(); // transient: retried next settlement
    return Effect()
        .persist(new ExtensionRefused(reason, now()))
        .thenRun(this::limitMoved)
        .thenNoReply();
  }

  private ReplyEffect<Event, State> onStopRunning(Running state, Stop cmd) {
    if (!state.order().ownedBy(cmd.renterId())) return Effect().reply(cmd.replyTo(), notFound());
    String keep = cmd.snapshot() ? Snapshot.idForRental(rentalId) : null;
    return endRunning(
        state, EndReason.STOPPED_BY_RENTER, now(), false, keep, false, null, cmd.replyTo());
  }

  /**
   * Only a running rental's workspace can be kept; a rental already stopped with its snapshot
   * answers as it stands (a repeated stop).
   */
  private ReplyEffect<Event, State> onSnapshotStopNotRunning(State state, Command command) {
    Stop cmd = (Stop) command;
    if (state.order() == null || !state.order().ownedBy(cmd.renterId()))
      return Effect().reply(cmd.replyTo(), notFound());
    if (state.order().snapshotId() != null)
      return Effect().reply(cmd.replyTo(), StatusReply.success(view(state)));
    return Effect()
        .reply(
            cmd.replyTo(),
            reply(
                Rejection.SNAPSHOT_NOT_POSSIBLE, "only a running rental's workspace can be kept"));
  }

  private static boolean stopWithSnapshot(Command command) {
    return command instanceof Stop stop && stop.snapshot();
  }

  private void noteHeartbeat(Host.Liveness liveness) {
    Instant at = liveness.lastHeartbeatAt();
    if (at != null && (latestHeartbeat == null || at.isAfter(latestHeartbeat)))
      latestHeartbeat = at;
  }

  /**
   * A notice of a loss that this rental has seen the host recover from: the host declared it before
   * a heartbeat a liveness answer showed since (the agent came back), and it arrived late.
   */
  private boolean stale(HostLost cmd) {
    // A heartbeat later than this node's own now says the clocks disagree (this one stepped back):
    // then instants cannot order a loss and a heartbeat, and the loss is taken as real.
    return cmd.lostAt() != null
        && latestHeartbeat != null
        && latestHeartbeat.isAfter(cmd.lostAt())
        && !latestHeartbeat.isAfter(now());
  }

  /** Billed to the last heartbeat, which the host itself reports: proven. */
  private ReplyEffect<Event, State> onHostLostRunning(Running state, HostLost cmd) {
    if (!fromHost(state.terms(), cmd.hostId()) || stale(cmd)) return Effect().noReply();
    return endRunning(state, EndReason.HOST_LOST, cmd.lastHeartbeatAt(), true, null);
  }

  /**
   * The workload stopped without being asked to. At a preemption deadline that is the agent keeping
   * the notice (it stops the workload itself, and its report may beat this rental's own tick):
   * preempted. A workload the agent says ended by itself (its command finished or died):
   * workload_exited. Otherwise the host failed the rental: host_lost. Billed alike: to the stop, or
   * to the last heartbeat that listed the workload when a later one no longer did ({@link
   * #endOnAgentReport}).
   */
  private ReplyEffect<Event, State> onWorkloadStoppedRunning(Running state, WorkloadStopped cmd) {
    if (!fromHost(state.terms(), cmd.hostId())) return Effect().noReply();
    Instant now = now();
    Instant stoppedAt = cmd.at() == null ? now : earlier(cmd.at(), now);
    return endOnAgentReport(state, stoppedAt, cmd.afterNotice(), cmd.exited(), cmd.exitCode());
  }

  /**
   * The workload stopped on its own at {@code stoppedAt}, on the agent's word. The end is recorded
   * at once, but settled only once the host has answered: a heartbeat that no longer listed the
   * workload may have reached it before this report reached the rental, and then nothing past the
   * last heartbeat that listed it is billed (see {@link #onEndLiveness}).
   */
  private ReplyEffect<Event, State> endOnAgentReport(
      Running state, Instant stoppedAt, boolean afterNotice, boolean exited, Integer exitCode) {
    Instant deadline = state.preemptionDeadline();
    EndReason reason = exited ? EndReason.WORKLOAD_EXITED : EndReason.HOST_LOST;
    Instant endAt = stoppedAt;
    if (deadline != null) {
      // After a notice the workload is told (a notice file, SIGTERM 30 s before the deadline): one
      // that stops then, at the deadline or well before it, was preempted; billed to its stop.
      reason = EndReason.PREEMPTED;
      endAt = earlier(stoppedAt, deadline);
    } else if (afterNotice && state.order().spec().tier() == Listing.Tier.SPOT) {
      // the host's notice and the agent's report race each other: a spot rental the agent says it
      // preempted was preempted, whichever arrived first
      reason = EndReason.PREEMPTED;
    }
    // the exit status says how a workload that finished by itself ended; nothing else has one
    Integer code = reason == EndReason.WORKLOAD_EXITED ? exitCode : null;
    return endRunning(state, reason, endAt, false, null, true, code, null);
  }

  /**
   * A liveness answer shows that the workload of this running rental is gone: a heartbeat no longer
   * listed it (the agent restarted and wiped it, or its report of the stop was lost). It ends as if
   * the host were lost, billed to the last heartbeat that listed it, which the host proved; after a
   * preemption notice it was preempted.
   */
  private ReplyEffect<Event, State> endGone(Running state, Host.Liveness liveness) {
    Instant listed = liveness.rentalListedAt();
    Instant deadline = state.preemptionDeadline();
    if (deadline != null)
      return endRunning(state, EndReason.PREEMPTED, earlier(listed, deadline), true, null);
    return endRunning(state, EndReason.HOST_LOST, listed, true, null);
  }

  private ReplyEffect<Event, State> onPreempt(Running state, Preempt cmd) {
    if (!acceptsNotice(state.order(), state.terms(), state.preemptionDeadline(), cmd))
      return Effect().noReply();
    return Effect()
        .persist(new PreemptionScheduled(cmd.deadline(), now()))
        .thenRun(
            s -> {
              noticeGiven(cmd.deadline());
              limitMoved(s);
            })
        .thenNoReply();
  }

  /**
   * A notice can come before the agent reports the start (the host checks its availability window
   * on every heartbeat, reservations included): it is kept for when the rental runs, and if the
   * deadline passes first the rental ends {@code preempted} without having been charged.
   */
  private ReplyEffect<Event, State> onPreemptProvisioning(Provisioning state, Preempt cmd) {
    if (!acceptsNotice(state.order(), state.terms(), state.preemptionDeadline(), cmd))
      return Effect().noReply();
    return Effect()
        .persist(new PreemptionScheduled(cmd.deadline(), now()))
        .thenRun(s -> noticeGivenProvisioning(cmd.deadline()))
        .thenNoReply();
  }

  private void noticeGivenProvisioning(Instant deadline) {
    preemptionDueAt(deadline);
    noticeGiven(deadline);
  }

  private void noticeGiven(Instant deadline) {
    subscribers.forEach(sub -> sub.tell(new PreemptionNotice(deadline)));
  }

  /**
   * A spot rental takes a notice from its own host that brings its deadline forward; anything else
   * changes nothing.
   */
  private static boolean acceptsNotice(Order order, Terms terms, Instant current, Preempt cmd) {
    if (!fromHost(terms, cmd.hostId()) || order.spec().tier() != Listing.Tier.SPOT) return false;
    return current == null || cmd.deadline().isBefore(current);
  }

  private void preemptionDueAt(Instant deadline) {
    Duration left = Duration.between(now(), deadline);
    timers.startSingleTimer(
        Timer.PREEMPTION_DUE, Timer.PREEMPTION_DUE, left.isNegative() ? Duration.ZERO : left);
  }

  // ---- ending

  /**
   * Metering stops at {@code endAt}. {@code proven}: the host vouched for the seconds up to it (its
   * last heartbeat, its agent's report), and the final settlement is recorded with the end;
   * otherwise it is recorded once a heartbeat at or after the end (or the agent's report that it
   * stopped the workload) proves them, and never past what was proven.
   */
  private ReplyEffect<Event, State> endRunning(
      Running state,
      EndReason reason,
      Instant endAt,
      boolean proven,
      ActorRef<StatusReply<View>> replyTo) {
    return endRunning(state, reason, endAt, proven, null, false, null, replyTo);
  }

  private ReplyEffect<Event, State> endRunning(
      Running state,
      EndReason reason,
      Instant endAt,
      boolean proven,
      String keepSnapshot,
      boolean onAgentReport,
      Integer exitCode,
      ActorRef<StatusReply<View>> replyTo) {
    Instant end = RentalBilling.endInstant(state, endAt);
    long billed = RentalBilling.billedAtEnd(state, end);
    return end(
        state.order(),
        state.terms(),
        state.startedAt(),
        state.checkpoints(),
        reason,
        end,
        billed,
        proven,
        keepSnapshot,
        onAgentReport,
        exitCode,
        replyTo);
  }

  /** Ends a rental that never ran: nothing is charged. */
  private ReplyEffect<Event, State> endUnstarted(
      Order order, Terms terms, EndReason reason, ActorRef<StatusReply<View>> replyTo) {
    return end(order, terms, null, List.of(), reason, now(), 0, true, replyTo);
  }

  private ReplyEffect<Event, State> end(
      Order order,
      Terms terms,
      Instant startedAt,
      List<Checkpoint> checkpoints,
      EndReason reason,
      Instant endAt,
      long billedSeconds,
      boolean proven,
      ActorRef<StatusReply<View>> replyTo) {
    return end(
        order,
        terms,
        startedAt,
        checkpoints,
        reason,
        endAt,
        billedSeconds,
        proven,
        null,
        false,
        null,
        replyTo);
  }

  private ReplyEffect<Event, State> end(
      Order order,
      Terms terms,
      Instant startedAt,
      List<Checkpoint> checkpoints,
      EndReason reason,
      Instant endAt,
      long billedSeconds,
      boolean proven,
      String keepSnapshot,
      boolean onAgentReport,
      Integer exitCode,
      ActorRef<StatusReply<View>> replyTo) {
    timers.cancel(Timer.DUE);
    timers.cancel(Timer.RETRY_MATCH);
    timers.cancel(Timer.RESEND_START);
    timers.cancel(Timer.WAIT_EXPIRED);
    timers.cancel(Timer.PROVISION_EXPIRED);
    Checkpoint previous = checkpoints.isEmpty() ? null : checkpoints.get(checkpoints.size() - 1);
    Instant now = now();
    List<Event> events = new ArrayList<>(2);
    if (proven && terms != null && billedSeconds > RentalBilling.settledThrough(previous)) {
      events.add(new Settled(billing.checkpoint(terms, billedSeconds, now), now));
    }
    if (keepSnapshot != null) events.add(new SnapshotKept(keepSnapshot, now));
    events.add(new Ended(reason, endAt, billedSeconds, now, onAgentReport, exitCode));
    return Effect()
        .persist(events)
        .thenRun(s -> ended(previous, events, (Ending) s, replyTo))
        .thenNoReply();
  }

  private void ended(
      Checkpoint previous, List<Event> events, Ending state, ActorRef<StatusReply<View>> replyTo) {
    if (events.get(0) instanceof Settled last) countSettlement(previous, last.checkpoint());
    if (state.terms() != null)
      ports.host(state.terms().hostId()).tell(new Host.StopWorkload(rentalId, keeps(state)));
    createSnapshot(state);
    answerCreator(state);
    stopTicks();
    notifySubscribers(state);
    delivery.finish(state);
    if (!state.finalSettled()) askLivenessForEnd(state);
    if (replyTo != null) replyTo.tell(StatusReply.success(view(state)));
  }

  private static boolean keeps(State state) {
    return state.order() != null && state.order().snapshotId() != null;
  }

  /**
   * Asks the snapshot to start the upload from the rental's host, until it acknowledges (it is
   * idempotent there); the rental closes only after that. Asked again after a recovery.
   */
  private void createSnapshot(State state) {
    if (!keeps(state) || state.terms() == null) return;
    Order order = state.order();
    context.askWithStatus(
        Snapshot.View.class,
        ports.snapshot(order.snapshotId()),
        settings.askTimeout(),
        reply ->
            new Snapshot.Create(
                order.renterId(),
                rentalId,
                state.terms().hostId(),
                order.spec().gpu(),
                state.terms().region(),
                reply),
        (view, failure) -> new SnapshotAnswer(failure == null));
  }

  // ---- proving the end: the final settlement waits for the host's word

  private void askLivenessForEnd(Ending state) {
    context.ask(
        Host.Liveness.class,
        ports.host(state.terms().hostId()),
        settings.askTimeout(),
        reply -> new Host.GetLiveness(rentalId, reply),
        (liveness, failure) -> new LivenessAnswer(failure == null ? liveness : null));
  }

  private ReplyEffect<Event, State> onEndLiveness(Ending state, LivenessAnswer answer) {
    askingLiveness = false;
    if (state.finalSettled()) return Effect().noReply();
    Instant heartbeat = answer.liveness() == null ? null : answer.liveness().lastHeartbeatAt();
    if (answer.liveness() != null) noteHeartbeat(answer.liveness());
    if (heartbeat != null && (lastHeartbeatSeen == null || heartbeat.isAfter(lastHeartbeatSeen)))
      lastHeartbeatSeen = heartbeat;
    // The end is the agent's report that the workload stopped: a heartbeat that no longer listed
    // it bounds it, whether it reached the host before the end was recorded or after (the two race
    // each other on their way, and a heartbeat is the proof).
    if (answer.liveness() != null
        && (RentalBilling.goneBeforeEnd(answer.liveness(), state.endAt())
            || (state.onAgentReport() && RentalBilling.gone(answer.liveness()))))
      return proveReported(state, answer.liveness().rentalListedAt());
    if (heartbeat != null && !heartbeat.isBefore(state.endAt()))
      return proveReported(state, state.endAt());
    // An offline host sends no more heartbeats: what it proved is all there will be.
    if (answer.liveness() != null && !answer.liveness().online())
      return proveReported(state, heartbeat);
    if (answer.liveness() != null
        && (reportCoversEnd || (state.onAgentReport() && !state.endedWhenRecorded())))
      return proveReported(state, state.endAt());
    // Not yet: the agent heartbeats every few seconds while it runs, and reports the stop; ask
    // again soon.
    timers.startSingleTimer(Timer.PROVE_END, Timer.PROVE_END, settings.retryInterval());
    return Effect().noReply();
  }

  /** The host went offline while the end waited for its word: billed to its last heartbeat. */
  private ReplyEffect<Event, State> onHostLostEnding(Ending state, HostLost cmd) {
    if (state.finalSettled() || !fromHost(state.terms(), cmd.hostId()) || stale(cmd))
      return Effect().noReply();
    return proveReported(state, cmd.lastHeartbeatAt());
  }

  /**
   * {@link #proveEnd}, and never past a stop the agent reported before the end ({@code provenUpTo}
   * null stays null: nothing beyond what was settled).
   */
  private ReplyEffect<Event, State> proveReported(Ending state, Instant provenUpTo) {
    return proveEnd(
        state,
        provenUpTo == null || reportedStop == null
            ? provenUpTo
            : earlier(provenUpTo, reportedStop));
  }

  /**
   * Records the final settlement for what the host proved, up to {@code provenUpTo} (null: nothing
   * beyond what was settled); a bill proven short of the claim is recorded as {@link EndProven}.
   */
  private ReplyEffect<Event, State> proveEnd(Ending state, Instant provenUpTo) {
    long settled = RentalBilling.settledThrough(state.last());
    long proven =
        provenUpTo == null
            ? settled
            : Math.max(settled, secondsBetween(state.startedAt(), provenUpTo));
    long billed = Math.min(state.billedSeconds(), proven);
    Instant now = now();
    List<Event> events = new ArrayList<>(2);
    if (billed > settled)
      events.add(new Settled(billing.checkpoint(state.terms(), billed, now), now));
    if (billed < state.billedSeconds()) events.add(new EndProven(billed, now));
    timers.cancel(Timer.PROVE_END);
    return Effect()
        .persist(events)
        .thenRun(s -> endProven(state.last(), events, (Ending) s))
        .thenNoReply();
  }

  private void endProven(Checkpoint previous, List<Event> events, Ending state) {
    if (events.get(0) instanceof Settled last) countSettlement(previous, last.checkpoint());
    notifySubscribers(state);
    delivery.finish(state);
  }

  private ReplyEffect<Event, State> onDeliveredEnding(Ending state, Delivered d) {
    delivery.acknowledgedEnding(state, d);
    return maybeClose(state);
  }

  private ReplyEffect<Event, State> onReleased(Ending state, Released r) {
    delivery.released(r);
    return maybeClose(state);
  }

  /**
   * The agent stopped the workload: it ran until it was told to (or until the agent says, if that
   * is earlier).
   */
  private ReplyEffect<Event, State> onWorkloadStoppedEnding(Ending state, WorkloadStopped cmd) {
    delivery.workloadStopped();
    if (state.finalSettled() || !fromHost(state.terms(), cmd.hostId())) return maybeClose(state);
    if (cmd.at() != null && cmd.at().isBefore(state.endAt())) {
      // It stopped on its own before the end, so a heartbeat may have stopped listing it before the
      // end too: the host's answer bounds it (finding E), whichever of the two arrives first.
      reportedStop = cmd.at();
      askLivenessForEnd(state);
      return Effect().noReply();
    }
    if (lastHeartbeatSeen != null && !lastHeartbeatSeen.isBefore(state.endAt()))
      return proveEnd(state, cmd.at() == null ? state.endAt() : earlier(cmd.at(), state.endAt()));
    // Finding L: a host that went offline before the end (its HostLost lost on the way) is not
    // billed past its last heartbeat on the agent's word alone: the host's answer decides. While it
    // is online, the report proves the run to the end, as before.
    reportCoversEnd = true;
    askLivenessForEnd(state);
    return Effect().noReply();
  }

  private ReplyEffect<Event, State> onEndingTimer(Ending state, Timer timer) {
    return switch (timer) {
      case STOP_EXPIRED -> onAgentSilent(state);
      case REDELIVER -> finishAgain(state);
      case PROVE_END -> sideEffectOnly(() -> askLivenessIfUnproven(state));
      case RETRY_SNAPSHOT -> sideEffectOnly(() -> createSnapshot(state));
      default -> Effect().noReply();
    };
  }

  /**
   * The agent is gone or silent: the money does not wait for it, and bills only what its last
   * heartbeat proved.
   */
  private ReplyEffect<Event, State> onAgentSilent(Ending state) {
    delivery.workloadStopped();
    if (!state.finalSettled()) return proveReported(state, lastHeartbeatSeen);
    return maybeClose(state);
  }

  private ReplyEffect<Event, State> finishAgain(Ending state) {
    delivery.finish(state);
    return maybeClose(state);
  }

  private void askLivenessIfUnproven(Ending state) {
    if (!state.finalSettled()) askLivenessForEnd(state);
  }

  private ReplyEffect<Event, State> onSnapshotAnswer(Ending state, SnapshotAnswer answer) {
    if (answer.ok()) {
      snapshotCreated = true;
      return maybeClose(state);
    }
    timers.startSingleTimer(Timer.RETRY_SNAPSHOT, Timer.RETRY_SNAPSHOT, settings.retryInterval());
    return Effect().noReply();
  }

  private ReplyEffect<Event, State> maybeClose(Ending state) {
    if (!delivery.readyToClose(state) || (keeps(state) && !snapshotCreated))
      return Effect().noReply();
    delivery.closed();
    return Effect().persist(new Closed(now())).thenRun(s -> closed(state, s)).thenNoReply();
  }

  private void closed(Ending ending, State state) {
    notifySubscribers(state);
    subscribers.clear();
    delivery.forgetInAccounts(ending);
    if (refusedCreator != null) {
      refusedCreator.tell(
          reply(
              Rejection.UNAVAILABLE,
              "the market could not be read (the database is unavailable); nothing was charged and the hold is released; retry later"));
      refusedCreator = null;
    }
  }

  /**
   * A workload that starts after its rental ended (e.g. provisioning timed out) is stopped again.
   */
  private ReplyEffect<Event, State> onLateWorkloadStarted(State state, WorkloadStarted cmd) {
    if (state instanceof Finished && fromHost(state.terms(), cmd.hostId())) {
      ports.host(cmd.hostId()).tell(new Host.StopWorkload(rentalId, keeps(state)));
    }
    return Effect().noReply();
  }

  private ReplyEffect<Event, State> onCheckReservation(State state, CheckReservation cmd) {
    // A launch under way may be the one the reservation is for: its match is not recorded yet.
    if (launch != null)
      return Effect().reply(cmd.replyTo(), new Host.ReservationWanted(rentalId, true, false));
    return Effect().reply(cmd.replyTo(), reservationWanted(state, rentalId, cmd.hostId()));
  }

  /**
   * Whether a rental in {@code state} wants the cards host {@code hostId} reserved for it. Waiting
   * for a match, it may still get them (the matcher's answer may be on its way); matched to that
   * host it uses them, and releases them itself when it ends; anything else (matched elsewhere,
   * refused, closed, never created) never will. {@code running}: its workload runs there.
   */
  static Host.ReservationWanted reservationWanted(State state, String rentalId, String hostId) {
    if (state instanceof Pending) return new Host.ReservationWanted(rentalId, true, false);
    boolean here =
        state.terms() != null
            && state.terms().hostId().equals(hostId)
            && !(state instanceof Finished);
    return state instanceof Running r && here
        ? new Host.ReservationWanted(rentalId, true, true, r.agentListedFrom(), r.startedAt())
        : new Host.ReservationWanted(rentalId, here, false);
  }

  // ---- views and subscribers

  private ReplyEffect<Event, State> onSubscribe(State state, Subscribe cmd) {
    if (!visibleTo(state, cmd.renterId())) return Effect().reply(cmd.replyTo(), notFound());
    if (!(state instanceof Finished)) {
      if (subscribers.isEmpty()) subscribers = new HashSet<>();
      subscribers.add(cmd.subscriber());
      context.watchWith(cmd.subscriber(), new Unsubscribe(cmd.subscriber()));
      if (state instanceof Running running)
        ticks().tell(new RentalTicks.Watch(rentalId, cmd.subscriber(), meter(running)));
    }
    return Effect().reply(cmd.replyTo(), StatusReply.success(view(state)));
  }

  private ReplyEffect<Event, State> onUnsubscribe(State state, Unsubscribe cmd) {
    subscribers.remove(cmd.subscriber());
    if (ticks != null) ticks.tell(new RentalTicks.Unwatch(rentalId, cmd.subscriber()));
    return Effect().noReply();
  }

  private void notifySubscribers(State state) {
    if (subscribers.isEmpty()) return;
    View v = view(state);
    subscribers.forEach(s -> s.tell(new StatusChanged(v)));
  }

  private void answerCreator(State state) {
    if (creator == null) return;
    creator.tell(StatusReply.success(view(state)));
    creator = null;
  }

  private static boolean visibleTo(State state, String renterId) {
    return state.order() != null && state.order().ownedBy(renterId);
  }

  private StatusReply<View> viewFor(State state, String renterId) {
    return visibleTo(state, renterId) ? StatusReply.success(view(state)) : notFound();
  }

  private static boolean fromHost(Terms terms, String hostId) {
    return terms != null && terms.hostId().equals(hostId);
  }

  public View view(State state) {
    if (state instanceof Pending p)
      return view(
          p.order(), Status.PENDING, null, null, null, null, 0, null, List.of(), null, List.of());
    if (state instanceof Provisioning p) {
      return view(
          p.order(),
          Status.PROVISIONING,
          p.terms(),
          null,
          null,
          null,
          0,
          p.preemptionDeadline(),
          List.of(),
          null,
          List.of());
    }
    if (state instanceof Running r) {
      return view(
          r.order(),
          Status.RUNNING,
          r.terms(),
          r.startedAt(),
          null,
          null,
          liveSeconds(r),
          r.preemptionDeadline(),
          r.checkpoints(),
          null,
          List.of());
    }
    if (state instanceof Ending e) {
      return view(
          e.order(),
          Status.STOPPING,
          e.terms(),
          e.startedAt(),
          e.endAt(),
          e.reason(),
          e.billedSeconds(),
          null,
          e.checkpoints(),
          e.exitCode(),
          List.of());
    }
    if (state instanceof Finished f) {
      return view(
          f.order(),
          Status.ENDED,
          f.terms(),
          f.startedAt(),
          f.endAt(),
          f.reason(),
          f.billedSeconds(),
          null,
          f.checkpoints(),
          f.exitCode(),
          f.refunds());
    }
    if (state instanceof RefusedRental r) {
      return view(
          r.order(),
          Status.REFUSED,
          null,
          null,
          r.order().createdAt(),
          EndReason.CANCELLED,
          0,
          null,
          List.of(),
          null,
          List.of());
    }
    return new View(
        rentalId,
        null,
        Status.UNKNOWN,
        null,
        null,
        null,
        null,
        null,
        null,
        0,
        0,
        null,
        List.of(),
        null,
        null,
        List.of());
  }

  /** The live meter: seconds since the start, within the limit, never below what was settled. */
  private long liveSeconds(Running state) {
    long measured =
        Math.min(secondsBetween(state.startedAt(), now()), RentalBilling.limit(state).seconds());
    return Math.max(measured, RentalBilling.settledThrough(state.last()));
  }

  private View view(
      Order order,
      Status status,
      Terms terms,
      Instant startedAt,
      Instant endedAt,
      EndReason reason,
      long billed,
      Instant preemption,
      List<Checkpoint> checkpoints,
      Integer exitCode,
      List<Refunded> refunds) {
    return new View(
        rentalId,
        order.renterId(),
        status,
        order.spec(),
        terms,
        order.createdAt(),
        startedAt,
        endedAt,
        reason,
        billed,
        RentalBilling.cost(terms, billed),
        preemption,
        checkpoints,
        order.snapshotId(),
        exitCode,
        refunds);
  }

  // ---------------------------------------------------------------------------------------------
  // Events → state (no side effects). Pure, so built once and shared by every rental.

  private static final EventHandler<State, Event> EVENTS = events();

  @Override
  public EventHandler<State, Event> eventHandler() {
    return EVENTS;
  }

  private static EventHandler<State, Event> events() {
    EventHandlerBuilder<State, Event> b = EventHandlerBuilder.builder();
    b.forStateType(Empty.class)
        .onEvent(
            Requested.class,
            (s, e) -> new Pending(new Order(e.renterId(), e.spec(), e.holdAmount(), e.at())));
    b.forStateType(Pending.class)
        .onEvent(Refused.class, (s, e) -> new RefusedRental(s.order(), e.code()))
        .onEvent(Matched.class, (s, e) -> new Provisioning(s.order(), e.terms(), null))
        .onEvent(Ended.class, (s, e) -> Ending.unstarted(s.order(), null, e));
    b.forStateType(Provisioning.class)
        .onEvent(
            Started.class,
            (s, e) ->
                new Running(
                    s.order(),
                    s.terms(),
                    e.startedAt(),
                    List.of(),
                    null,
                    s.preemptionDeadline(),
                    e.agentListedFrom()))
        .onEvent(PreemptionScheduled.class, (s, e) -> s.withPreemption(e.deadline()))
        .onEvent(Ended.class, (s, e) -> Ending.unstarted(s.order(), s.terms(), e));
    b.forStateType(Running.class)
        .onEvent(Settled.class, (s, e) -> s.settled(e.checkpoint()))
        .onEvent(HoldExtended.class, (s, e) -> s.withHold(e.holdAmount()))
        .onEvent(ExtensionRefused.class, (s, e) -> s.extensionRefused(e.reason()))
        .onEvent(PreemptionScheduled.class, (s, e) -> s.withPreemption(e.deadline()))
        .onEvent(SnapshotKept.class, (s, e) -> s.keeping(e.snapshotId()))
        .onEvent(
            Ended.class,
            (s, e) ->
                new Ending(
                    s.order(),
                    s.terms(),
                    s.startedAt(),
                    s.checkpoints(),
                    e.reason(),
                    e.endAt(),
                    e.billedSeconds(),
                    e.at(),
                    e.onAgentReport(),
                    e.exitCode()));
    b.forStateType(Ending.class)
        .onEvent(Settled.class, (s, e) -> s.settled(e.checkpoint()))
        .onEvent(EndProven.class, (s, e) -> s.proven(e.billedSeconds()))
        .onEvent(Closed.class, (s, e) -> s.closed(e.at()));
    b.forStateType(Finished.class).onEvent(Refunded.class, Finished::withRefund);
    return b.build();
  }

  /**
   * The state keeps the latest {@value #CHECKPOINTS_KEPT} checkpoints: a month-long rental settles
   * ~260 000 times, and state (and its snapshots) must not grow with its age. Nothing is lost:
   * every checkpoint is in the journal, and each second's charge follows from the frozen price
   * (cumulative metering).
   */
  static final int CHECKPOINTS_KEPT = 100;

  static List<Checkpoint> append(List<Checkpoint> list, Checkpoint c) {
    int from = list.size() >= CHECKPOINTS_KEPT ? list.size() - CHECKPOINTS_KEPT + 1 : 0;
    List<Checkpoint> copy = new ArrayList<>(list.size() - from + 1);
    copy.addAll(list.subList(from, list.size()));
    copy.add(c);
    return List.copyOf(copy);
  }

  // ---------------------------------------------------------------------------------------------

  private Instant now() {
    return clock.instant();
  }

  private ReplyEffect<Event, State> sideEffectOnly(Runnable effect) {
    effect.run();
    return Effect().noReply();
  }

  private <T> StatusReply<T> notFound() {
    return reply(Rejection.NOT_FOUND, "no rental " + rentalId);
  }

  private static String refusalDetail(Rejection code) {
    return switch (code) {
      case INSUFFICIENT_FUNDS -> "the available balance does not cover the first hold";
      case SPEND_CAP_REACHED -> "the first hold would exceed the monthly spend cap";
      case TOO_MANY_RENTALS ->
          "the account has as many live rentals (pending, provisioning, running or stopping) as it"
              + " may have at once; stop one, or wait until one ends, before launching another";
      case NOT_FOUND -> "no such account";
      default -> "the first hold could not be placed (" + code.wire() + ")";
    };
  }
}
