package dev.tickmark.engine.host;

import static dev.tickmark.engine.Rejection.reply;

import com.fasterxml.jackson.annotation.JsonCreator;
import com.typesafe.config.Config;
import dev.tickmark.engine.CborSerializable;
import dev.tickmark.engine.JournalFailures;
import dev.tickmark.engine.Rejection;
import dev.tickmark.engine.SharedCommandHandler;
import dev.tickmark.engine.catalog.Catalog;
import dev.tickmark.engine.host.verification.Verification;
import dev.tickmark.engine.metrics.EngineMetrics;
import dev.tickmark.engine.rental.Rental;
import dev.tickmark.wire.Ed25519;
import dev.tickmark.wire.HardwareReport;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.security.SecureRandom;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.stream.IntStream;
import org.apache.pekko.Done;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.Behavior;
import org.apache.pekko.actor.typed.javadsl.ActorContext;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.actor.typed.javadsl.TimerScheduler;
import org.apache.pekko.cluster.sharding.typed.javadsl.ClusterSharding;
import org.apache.pekko.cluster.sharding.typed.javadsl.Entity;
import org.apache.pekko.cluster.sharding.typed.javadsl.EntityTypeKey;
import org.apache.pekko.pattern.StatusReply;
import org.apache.pekko.persistence.typed.PersistenceId;
import org.apache.pekko.persistence.typed.RecoveryCompleted;
import org.apache.pekko.persistence.typed.SnapshotAdapter;
import org.apache.pekko.persistence.typed.javadsl.CommandHandlerWithReply;
import org.apache.pekko.persistence.typed.javadsl.EventHandler;
import org.apache.pekko.persistence.typed.javadsl.EventHandlerBuilder;
import org.apache.pekko.persistence.typed.javadsl.EventSourcedBehaviorWithEnforcedReplies;
import org.apache.pekko.persistence.typed.javadsl.ReplyEffect;
import org.apache.pekko.persistence.typed.javadsl.RetentionCriteria;
import org.apache.pekko.persistence.typed.javadsl.SignalHandler;
import org.apache.pekko.stream.SinkRef;
import org.apache.pekko.stream.SourceRef;
import org.apache.pekko.util.ByteString;

/**
 * A provider's machine. It is invited with a one-time token, pins its agent's Ed25519 key at
 * registration, is verified from signed hardware reports, keeps its listing, and is the one
 * authority on its cards: a card is reserved for at most one rental because only this entity hands
 * them out, one command at a time.
 *
 * <p>Heartbeats are not persisted (they would dominate the journal); only the transitions they
 * cause are: online, offline (with the last heartbeat's instant), eviction on a GPU fault.
 */
public final class Host
    extends EventSourcedBehaviorWithEnforcedReplies<Host.Command, Host.Event, Host.State> {

  public static final EntityTypeKey<Command> ENTITY_KEY =
      EntityTypeKey.create(Command.class, "Host");
  public static final int TAG_SLICES = 4;
  public static final String TAG_PREFIX = "host-";

  public static String tagFor(String hostId) {
    return TAG_PREFIX + Math.floorMod(hostId.hashCode(), TAG_SLICES);
  }

  public static List<String> allTags() {
    return IntStream.range(0, TAG_SLICES).mapToObj(i -> TAG_PREFIX + i).toList();
  }

  static final Duration RECORD_HEARTBEAT_EVERY = Duration.ofSeconds(10);

  /**
   * How a host tells the rentals on its cards what happened to it (through sharding, in the node).
   */
  public interface RentalLink {
    RentalLink NONE =
        new RentalLink() {
          @Override
          public void hostLost(String rentalId, String hostId, Instant lastHeartbeatAt) {}

          @Override
          public void preempt(String rentalId, String hostId, Instant deadline) {}
        };

    void hostLost(String rentalId, String hostId, Instant lastHeartbeatAt);

    /**
     * {@code lostAt}: when the host declared itself lost (its own clock), so that a notice that
     * arrives after the host came back is recognised as stale.
     */
    default void hostLost(String rentalId, String hostId, Instant lastHeartbeatAt, Instant lostAt) {
      hostLost(rentalId, hostId, lastHeartbeatAt);
    }

    void preempt(String rentalId, String hostId, Instant deadline);

    /**
     * Asks rental {@code rentalId} whether it still wants the cards this host reserved for it; it
     * answers {@code replyTo} with a {@link ReservationWanted}. Without an answer (the default asks
     * nothing) the reservation is kept.
     */
    default void checkReservation(
        String rentalId, String hostId, ActorRef<ReservationWanted> replyTo) {}

    /**
     * Tells rental {@code rentalId}, running here, that the host's agent attached just now (see
     * {@code Rental.HostAttached}); the default tells nothing.
     */
    default void hostAttached(String rentalId, String hostId) {}
  }

  /**
   * How often a host asks the rentals of its reservations that have not been confirmed (the
   * rental's workload has not been reported running here) whether they still want them: a
   * reservation whose {@code Matched} answer was lost (a matcher or rental crashed), or whose
   * one-way release was lost, is released; one whose rental runs here is confirmed.
   */
  static final Duration CHECK_RESERVATIONS_EVERY = Duration.ofSeconds(60);

  /**
   * After a restart the first check comes this soon: a confirmation lost before the restart left a
   * running workload's cards unconfirmed, and until the host knows the workload runs it cannot see
   * a heartbeat omit it (simulation finding X).
   */
  static final Duration CHECK_RESERVATIONS_AFTER_RECOVERY = Duration.ofSeconds(1);

  /**
   * How long a host remembers the rentals whose cards it released, and refuses to reserve cards for
   * them again: a late or duplicated proposal of the matcher is long delivered or dropped by then.
   */
  static final Duration REMEMBER_RELEASES = Duration.ofDays(1);

  public record Settings(
      Duration heartbeatTimeout,
      int heartbeatIntervalSeconds,
      Catalog catalog,
      Verification.Policy policy,
      RentalLink rentals) {
    public Settings(
        Duration heartbeatTimeout,
        int heartbeatIntervalSeconds,
        Catalog catalog,
        Verification.Policy policy) {
      this(heartbeatTimeout, heartbeatIntervalSeconds, catalog, policy, RentalLink.NONE);
    }

    /**
     * From the node's config: {@code tickmark.hosts.heartbeat-timeout}, {@code .heartbeat-interval}
     * and the verification policy ({@link Verification.Policy#fromConfig}); the catalog and the
     * link to the rentals are the node's.
     */
    public static Settings fromConfig(Config config, Catalog catalog, RentalLink rentals) {
      Config hosts = config.getConfig("tickmark.hosts");
      return new Settings(
          hosts.getDuration("heartbeat-timeout"),
          (int) hosts.getDuration("heartbeat-interval").toSeconds(),
          catalog,
          Verification.Policy.fromConfig(config),
          rentals);
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Protocol

  public interface Command extends CborSerializable {}

  /**
   * A command answered with a {@link StatusReply}; lets one handler refuse any of them uniformly.
   */
  public interface Replying<T> extends Command {
    ActorRef<StatusReply<T>> replyTo();
  }

  /** What a host tells the agent session holding its websocket. */
  public interface ToSession extends CborSerializable {}

  public record CloseSession(Rejection code, String message) implements ToSession {}

  public record RunWorkload(
      String rentalId,
      List<Integer> cards,
      String image,
      List<String> command,
      String sshPublicKey,
      boolean network,
      Rental.Restore restore)
      implements ToSession {
    public RunWorkload(
        String rentalId,
        List<Integer> cards,
        String image,
        List<String> command,
        String sshPublicKey,
        boolean network) {
      this(rentalId, cards, image, command, sshPublicKey, network, null);
    }
  }

  /** {@code keepWorkspace}: the rental is kept as a snapshot; the agent keeps its scratch. */
  public record StopWorkloadOnAgent(String rentalId, boolean keepWorkspace) implements ToSession {
    public StopWorkloadOnAgent(String rentalId) {
      this(rentalId, false);
    }
  }

  /** Archive and upload the kept workspace of {@code rentalId} as {@code snapshotId}. */
  public record UploadSnapshotOnAgent(String rentalId, String snapshotId, List<String> haveChunks)
      implements ToSession {}

  public record PreemptWorkload(String rentalId, Instant deadline) implements ToSession {}

  /** Check again: the agent measures the machine again and sends a new signed report. */
  public record MeasureAgainOnAgent(String reason) implements ToSession {}

  /**
   * The two ends of one SSH byte stream between a renter's websocket and the agent, as stream refs
   * materialized on the renter's node: the agent's stream socket (on whichever node it lands)
   * consumes {@code toAgent} and feeds {@code fromAgent}. Each is used once; backpressure crosses
   * nodes with them.
   */
  public record StreamEnds(SourceRef<ByteString> toAgent, SinkRef<ByteString> fromAgent)
      implements CborSerializable {}

  /**
   * To the session: ask the agent to open {@code streamId}; the session answers {@code replyTo}.
   */
  public record OpenStreamOnAgent(
      String rentalId, String streamId, StreamEnds ends, ActorRef<StatusReply<Done>> replyTo)
      implements ToSession {}

  /**
   * To the session: the agent's stream socket arrived; hand it the ends. {@code handle} closes that
   * socket when the rental ends.
   */
  public record ClaimStreamOnAgent(
      String streamId, ActorRef<StreamControl> handle, ActorRef<StatusReply<StreamEnds>> replyTo)
      implements ToSession {}

  /** What a session tells the node-local handle of a stream socket. */
  public interface StreamControl extends CborSerializable {}

  /** Close the stream (its rental ended, or the agent said so). */
  public record ShutDownStream(String reason) implements StreamControl {}

  public record Invite(
      String ownerId,
      String region,
      String label,
      String tokenHash,
      Instant expiresAt,
      ActorRef<StatusReply<Done>> replyTo)
      implements Replying<Done> {}

  /** Checks a registration token before the websocket upgrade; spends nothing. */
  public record CheckToken(String tokenHash, ActorRef<StatusReply<Done>> replyTo)
      implements Replying<Done> {}

  /**
   * Spends the registration token, pins {@code publicKey}, and answers the host credential (shown
   * once).
   */
  public record Register(
      String tokenHash, String publicKey, ActorRef<StatusReply<Registration>> replyTo)
      implements Replying<Registration> {}

  public record Authenticate(String credentialHash, ActorRef<StatusReply<Identity>> replyTo)
      implements Replying<Identity> {}

  /**
   * Makes {@code session} the host's one live session; a previous one is told to close. {@code
   * sshHostKey}: the agent's SSH host key (an OpenSSH public key line), kept and shown on its
   * rentals; null from an agent without an SSH server.
   */
  public record Attach(
      ActorRef<ToSession> session, String sshHostKey, ActorRef<StatusReply<Attached>> replyTo)
      implements Replying<Attached> {
    @JsonCreator
    public Attach {}

    public Attach(ActorRef<ToSession> session, ActorRef<StatusReply<Attached>> replyTo) {
      this(session, null, replyTo);
    }
  }

  /**
   * A renter connected to a running rental's SSH server: relay {@code ends} to the agent. Refused
   * ({@code unavailable}) while the host has no live session.
   */
  public record OpenStream(
      String rentalId, String streamId, StreamEnds ends, ActorRef<StatusReply<Done>> replyTo)
      implements Replying<Done> {}

  /** The agent's stream socket for {@code streamId} arrived on some node: find its ends. */
  public record ClaimStream(
      String streamId, ActorRef<StreamControl> handle, ActorRef<StatusReply<StreamEnds>> replyTo)
      implements Replying<StreamEnds> {}

  /** The host's SSH host key, for a rental's view ({@code key} null when it has none). */
  public record GetSshHostKey(ActorRef<StatusReply<SshHostKey>> replyTo)
      implements Replying<SshHostKey> {}

  public record SshHostKey(String key) implements CborSerializable {}

  public record Detach(ActorRef<ToSession> session) implements Command {}

  /** A signed report: {@code canonicalReport} is the exact UTF-8 text the signature covers. */
  public record VerifyReport(
      ActorRef<ToSession> session,
      HardwareReport report,
      String canonicalReport,
      String signature,
      ActorRef<StatusReply<Verification.Outcome>> replyTo)
      implements Replying<Verification.Outcome> {}

  public record GpuHealth(int index, Integer utilizationPercent, Integer temperatureC, String fault)
      implements CborSerializable {}

  /**
   * {@code receivedAtMicros}: when the node's socket read it (epoch µs), to measure handling lag.
   * {@code agentAt}: the agent's own stamp (its clock; null when absent or unreadable), compared
   * only with the same agent's {@code listed_from} ({@link ConfirmCards}).
   */
  public record Heartbeat(
      ActorRef<ToSession> session,
      long seq,
      List<GpuHealth> gpus,
      List<String> rentals,
      Instant agentAt,
      long receivedAtMicros)
      implements Command {
    public Heartbeat(
        ActorRef<ToSession> session,
        long seq,
        List<GpuHealth> gpus,
        List<String> rentals,
        long receivedAtMicros) {
      this(session, seq, gpus, rentals, null, receivedAtMicros);
    }
  }

  public record UpdateListing(
      String ownerId, Listing listing, ActorRef<StatusReply<HostView>> replyTo)
      implements Replying<HostView> {}

  public record Drain(String ownerId, ActorRef<StatusReply<HostView>> replyTo)
      implements Replying<HostView> {}

  public record Remove(String ownerId, ActorRef<StatusReply<HostView>> replyTo)
      implements Replying<HostView> {}

  public record Evict(String reason, ActorRef<StatusReply<HostView>> replyTo)
      implements Replying<HostView> {}

  /**
   * Check again, from the host's provider: the agent measures again and resubmits its report, which
   * is judged like any other. Refused ({@code host_offline}) while no agent is connected, and
   * ({@code host_not_available}) for an evicted host, which only an operator reinstates. A request
   * still unanswered within {@link #REQUEST_VERIFICATION_WINDOW} is not repeated.
   */
  public record RequestVerification(String ownerId, ActorRef<StatusReply<HostView>> replyTo)
      implements Replying<HostView> {}

  public record Reinstate(ActorRef<StatusReply<HostView>> replyTo) implements Replying<HostView> {}

  /** {@code ownerId == null} is the operator's view. */
  public record Get(String ownerId, ActorRef<StatusReply<HostView>> replyTo)
      implements Replying<HostView> {}

  /**
   * The matcher's proposal: reserve {@code count} free cards of {@code gpu} for a rental of {@code
   * renterId} at this host's floor. The host refuses its own owner ({@code own_host}); {@code
   * renterId == null} is a proposal from a node that predates the renter, which cannot be checked.
   * {@code claimWithin}: the reservation is pending, and its cards go back unless its rental claims
   * them (its first {@link StartWorkload}) within this long (issue 15: a launch reserves before it
   * has recorded anything); null: kept until released, as before pending reservations. {@code
   * network}: the rental asks for outbound network, which a host whose agent said it cannot give
   * refuses; {@code runtime}: the rental asks for this runtime by name (null: any), which a host
   * that runs rentals otherwise, or did not say how, refuses ({@link WorkloadNeeds}).
   */
  public record ReserveCards(
      String rentalId,
      String renterId,
      String gpu,
      int count,
      Listing.Tier tier,
      long maxPricePerGpuHour,
      Duration claimWithin,
      boolean network,
      String runtime,
      ActorRef<StatusReply<Reservation>> replyTo)
      implements Replying<Reservation> {
    @JsonCreator
    public ReserveCards {}

    /** A proposal from a node that predates a rental's runtime: any runtime. */
    public ReserveCards(
        String rentalId,
        String renterId,
        String gpu,
        int count,
        Listing.Tier tier,
        long maxPricePerGpuHour,
        Duration claimWithin,
        boolean network,
        ActorRef<StatusReply<Reservation>> replyTo) {
      this(
          rentalId,
          renterId,
          gpu,
          count,
          tier,
          maxPricePerGpuHour,
          claimWithin,
          network,
          null,
          replyTo);
    }

    /** What the rental needs of this host's runtime. */
    public WorkloadNeeds needs() {
      return new WorkloadNeeds(network, runtime);
    }

    public ReserveCards(
        String rentalId,
        String renterId,
        String gpu,
        int count,
        Listing.Tier tier,
        long maxPricePerGpuHour,
        Duration claimWithin,
        ActorRef<StatusReply<Reservation>> replyTo) {
      this(rentalId, renterId, gpu, count, tier, maxPricePerGpuHour, claimWithin, false, replyTo);
    }

    public ReserveCards(
        String rentalId,
        String renterId,
        String gpu,
        int count,
        Listing.Tier tier,
        long maxPricePerGpuHour,
        ActorRef<StatusReply<Reservation>> replyTo) {
      this(rentalId, renterId, gpu, count, tier, maxPricePerGpuHour, null, replyTo);
    }

    /** A proposal that does not say whose rental it is (tests of card bookkeeping). */
    public ReserveCards(
        String rentalId,
        String gpu,
        int count,
        Listing.Tier tier,
        long maxPricePerGpuHour,
        ActorRef<StatusReply<Reservation>> replyTo) {
      this(rentalId, null, gpu, count, tier, maxPricePerGpuHour, null, replyTo);
    }
  }

  /**
   * Proposals of one matcher that reached this host while it was still answering the last one, in
   * the order they were made: each is judged as a {@link ReserveCards} alone would be, on the cards
   * the ones before it left, and every reservation they make is written at once. A burst of
   * launches at the cheapest host then waits for one write, not one write after another. Each
   * proposal's own {@code replyTo} is not used; the answers come back together, in order.
   */
  public record ReserveCardsBatch(
      List<ReserveCards> proposals, ActorRef<StatusReply<Reservations>> replyTo)
      implements Replying<Reservations> {}

  /** The answers to a {@link ReserveCardsBatch}, one per proposal, in its order. */
  public record Reservations(List<ReservationAnswer> answers) implements CborSerializable {}

  /**
   * One proposal's answer: the reservation the rental holds, or {@code refusal} (a {@link
   * Rejection}'s {@code "<code>: <detail>"}, as an error reply would carry it).
   */
  public record ReservationAnswer(String rentalId, Reservation reservation, String refusal)
      implements CborSerializable {}

  /**
   * The rental's workload runs: its reservation is rented. {@code listedFrom}: the agent's instant
   * from which its heartbeats list the workload (null: not known), so that one stamped later that
   * omits it proves the workload gone even if no heartbeat this entity heard ever listed it; {@code
   * startedAt}: when the rental heard the agent say it started, the last instant the workload is
   * then known to have run.
   */
  public record ConfirmCards(
      String rentalId,
      Instant listedFrom,
      Instant startedAt,
      ActorRef<StatusReply<Reservation>> replyTo)
      implements Replying<Reservation> {
    public ConfirmCards(String rentalId, ActorRef<StatusReply<Reservation>> replyTo) {
      this(rentalId, null, null, replyTo);
    }
  }

  /**
   * Releases the rental's cards. {@code undoesProposal}: sent by the matcher to undo a proposal it
   * got no answer to — a reservation the host holds for the rental may be one the rental has since
   * taken (a duplicated match proposes again), so the host leaves it to the rental. {@code
   * hostLost}: the rental ended {@code host_lost}, which the host keeps in its record ({@link
   * CardsReleased#lost}).
   */
  public record ReleaseCards(
      String rentalId,
      boolean undoesProposal,
      boolean hostLost,
      ActorRef<StatusReply<Done>> replyTo)
      implements Replying<Done> {
    @JsonCreator
    public ReleaseCards {}

    public ReleaseCards(String rentalId, ActorRef<StatusReply<Done>> replyTo) {
      this(rentalId, false, false, replyTo);
    }

    /** The ended rental's release; {@code hostLost} when it ended {@code host_lost}. */
    public static ReleaseCards ended(
        String rentalId, boolean hostLost, ActorRef<StatusReply<Done>> replyTo) {
      return new ReleaseCards(rentalId, false, hostLost, replyTo);
    }

    /** The matcher's undo of a proposal that got no answer in time. */
    public static ReleaseCards undoingProposal(
        String rentalId, ActorRef<StatusReply<Done>> replyTo) {
      return new ReleaseCards(rentalId, true, false, replyTo);
    }
  }

  /** Starts the rental's workload on the agent; refused while the host has no live session. */
  public record StartWorkload(
      String rentalId,
      String image,
      List<String> command,
      String sshPublicKey,
      boolean network,
      Rental.Restore restore,
      ActorRef<StatusReply<Done>> replyTo)
      implements Replying<Done> {
    public StartWorkload(
        String rentalId,
        String image,
        List<String> command,
        String sshPublicKey,
        boolean network,
        ActorRef<StatusReply<Done>> replyTo) {
      this(rentalId, image, command, sshPublicKey, network, null, replyTo);
    }
  }

  /** {@code keepWorkspace}: the rental is stopped with a snapshot (the agent keeps its scratch). */
  public record StopWorkload(String rentalId, boolean keepWorkspace) implements Command {
    public StopWorkload(String rentalId) {
      this(rentalId, false);
    }
  }

  /**
   * From a snapshot entity while it is uploading: remind the agent to upload it (an agent already
   * uploading it ignores this); dropped while the host has no session.
   */
  public record UploadSnapshot(String rentalId, String snapshotId, List<String> haveChunks)
      implements Command {}

  /**
   * {@code lastHeartbeatAt}: the latest proof of life. For the asked rental, {@code
   * rentalListedAt}: the latest heartbeat that listed it among the workloads the agent runs, and
   * {@code rentalGoneAt}: the first heartbeat after that one that no longer listed it (null: the
   * latest lists it). A heartbeat that no longer lists a rental proves its workload stopped; both
   * are null when none is known (the agent lists none, or none listed it yet). Both survive a
   * restart of the host: a rental running here then is taken as listed by the last heartbeat in the
   * journal until a heartbeat lists it or omits it. {@code rentalUnconfirmed}: this host holds the
   * rental's cards but was never told that its workload runs ({@link ConfirmCards} lost on its way,
   * and this incarnation heard no heartbeat list it): it cannot tell when the workload stops, so
   * its heartbeats prove nothing of the rental until the confirmation comes.
   */
  public record Liveness(
      boolean online,
      Instant lastHeartbeatAt,
      Instant rentalListedAt,
      Instant rentalGoneAt,
      boolean rentalUnconfirmed)
      implements CborSerializable {
    @com.fasterxml.jackson.annotation.JsonCreator
    public Liveness {}

    public Liveness(
        boolean online, Instant lastHeartbeatAt, Instant rentalListedAt, Instant rentalGoneAt) {
      this(online, lastHeartbeatAt, rentalListedAt, rentalGoneAt, false);
    }

    public Liveness(boolean online, Instant lastHeartbeatAt) {
      this(online, lastHeartbeatAt, null, null);
    }
  }

  /** {@code rentalId}: whose listing to answer (null: none). */
  public record GetLiveness(String rentalId, ActorRef<Liveness> replyTo) implements Command {
    public GetLiveness(ActorRef<Liveness> replyTo) {
      this(null, replyTo);
    }
  }

  /**
   * The provider takes spot cards back: each spot rental on them is preempted after the listing's
   * notice.
   */
  public record Reclaim(
      String ownerId, List<Integer> cards, ActorRef<StatusReply<HostView>> replyTo)
      implements Replying<HostView> {}

  private enum HeartbeatCheck implements Command {
    INSTANCE
  }

  /** The timer that asks the rentals of unconfirmed reservations about them. */
  enum ReservationCheck implements Command {
    INSTANCE
  }

  /** The longest the host sleeps while it has unclaimed reservations. */
  private static final Duration EXPIRY_LOOK_EVERY = Duration.ofSeconds(1);

  /** The timer that returns the cards of pending reservations nobody claimed in time. */
  enum ExpireReservations implements Command {
    INSTANCE
  }

  /**
   * A rental's answer to {@link RentalLink#checkReservation}: {@code wanted} false when the rental
   * will never use the reservation (it ended, was matched elsewhere, or does not exist); {@code
   * running} when its workload runs on this host (the reservation is confirmed, as by {@link
   * ConfirmCards}, with its {@code listedFrom} and {@code startedAt}).
   */
  public record ReservationWanted(
      String rentalId, boolean wanted, boolean running, Instant listedFrom, Instant startedAt)
      implements Command {
    public ReservationWanted(String rentalId, boolean wanted, boolean running) {
      this(rentalId, wanted, running, null, null);
    }
  }

  public record Registration(String hostId, String hostCredential) implements CborSerializable {
    @Override
    public String toString() {
      return "Registration[hostId=" + hostId + "]";
    }
  }

  public record Identity(String hostId, String publicKey, String ownerId)
      implements CborSerializable {}

  public record Attached(String hostId, int heartbeatIntervalSeconds) implements CborSerializable {}

  /**
   * {@code reservedAt}: when the reservation this answer made was recorded (its event's instant);
   * null when an answer repeats an earlier one or confirms it. The matcher compares it with the
   * host read side's last update, to tell whether the read side shows these cards taken yet.
   */
  public record Reservation(
      String hostId,
      String providerId,
      String rentalId,
      List<Integer> cards,
      long pricePerGpuHour,
      Listing.Tier tier,
      boolean confirmed,
      boolean simulated,
      String region,
      Instant reservedAt,
      String runtime)
      implements CborSerializable {
    @JsonCreator
    public Reservation {}

    /** A reservation from a node that predates the host's runtime in it. */
    public Reservation(
        String hostId,
        String providerId,
        String rentalId,
        List<Integer> cards,
        long pricePerGpuHour,
        Listing.Tier tier,
        boolean confirmed,
        boolean simulated,
        String region,
        Instant reservedAt) {
      this(
          hostId,
          providerId,
          rentalId,
          cards,
          pricePerGpuHour,
          tier,
          confirmed,
          simulated,
          region,
          reservedAt,
          null);
    }

    public Reservation(
        String hostId,
        String providerId,
        String rentalId,
        List<Integer> cards,
        long pricePerGpuHour,
        Listing.Tier tier,
        boolean confirmed,
        boolean simulated,
        String region) {
      this(
          hostId,
          providerId,
          rentalId,
          cards,
          pricePerGpuHour,
          tier,
          confirmed,
          simulated,
          region,
          null);
    }
  }

  public record CardView(int index, String uuid, String gpu, String state, String rentalId)
      implements CborSerializable {}

  public record HostView(
      String hostId,
      String ownerId,
      String region,
      String label,
      String status,
      boolean online,
      boolean listed,
      boolean draining,
      boolean simulated,
      String gpu,
      List<CardView> cards,
      Listing listing,
      List<Verification.Check> checks,
      Instant lastHeartbeatAt,
      Instant registeredAt,
      String evictionReason,
      Instant verificationRequestedAt,
      Instant lastVerificationAt,
      Verification.WorkloadRuntime runtime)
      implements CborSerializable {
    @JsonCreator
    public HostView {}

    /** A view without the runtime (a host whose agent has not said how it runs rentals). */
    public HostView(
        String hostId,
        String ownerId,
        String region,
        String label,
        String status,
        boolean online,
        boolean listed,
        boolean draining,
        boolean simulated,
        String gpu,
        List<CardView> cards,
        Listing listing,
        List<Verification.Check> checks,
        Instant lastHeartbeatAt,
        Instant registeredAt,
        String evictionReason,
        Instant verificationRequestedAt,
        Instant lastVerificationAt) {
      this(
          hostId,
          ownerId,
          region,
          label,
          status,
          online,
          listed,
          draining,
          simulated,
          gpu,
          cards,
          listing,
          checks,
          lastHeartbeatAt,
          registeredAt,
          evictionReason,
          verificationRequestedAt,
          lastVerificationAt,
          null);
    }

    /** A view without check-again times (a host that was never judged, or is gone). */
    public HostView(
        String hostId,
        String ownerId,
        String region,
        String label,
        String status,
        boolean online,
        boolean listed,
        boolean draining,
        boolean simulated,
        String gpu,
        List<CardView> cards,
        Listing listing,
        List<Verification.Check> checks,
        Instant lastHeartbeatAt,
        Instant registeredAt,
        String evictionReason) {
      this(
          hostId,
          ownerId,
          region,
          label,
          status,
          online,
          listed,
          draining,
          simulated,
          gpu,
          cards,
          listing,
          checks,
          lastHeartbeatAt,
          registeredAt,
          evictionReason,
          null,
          null,
          null);
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Events

  public interface Event extends CborSerializable {
    Instant at();
  }

  public record Invited(
      String ownerId, String region, String label, String tokenHash, Instant expiresAt, Instant at)
      implements Event {}

  public record Registered(String publicKey, String credentialHash, Instant at) implements Event {}

  public record ReportVerified(Verification.Outcome outcome, String reportHash, Instant at)
      implements Event {}

  /** A failed report; {@code evict} when it failed a host that had been verified (fail-closed). */
  public record ReportRejected(
      Verification.Outcome outcome, String reportHash, boolean evict, Instant at)
      implements Event {}

  public record WentOnline(Instant at) implements Event {}

  /** The provider asked for a check again; the agent was told to measure again. */
  public record VerificationRequested(Instant at) implements Event {}

  public record WentOffline(Instant lastHeartbeatAt, Instant at) implements Event {}

  /**
   * A heartbeat kept in the journal, at most every {@link #RECORD_HEARTBEAT_EVERY} and only while
   * cards are rented: what a rental may be billed up to if this entity restarts and the agent never
   * returns.
   */
  public record HeartbeatRecorded(Instant at) implements Event {}

  /**
   * The first heartbeat that no longer listed the workload of a rental holding cards here (at
   * {@code at}): it stopped after {@code lastListedAt}, the latest heartbeat known to list it (for
   * a rental running here when the host restarted and not listed since: the last heartbeat in the
   * journal). Kept so that the bound survives a restart of this entity; once per rental, never per
   * heartbeat.
   */
  public record WorkloadUnlisted(String rentalId, Instant lastListedAt, Instant at)
      implements Event {}

  public record ListingUpdated(Listing listing, Instant at) implements Event {}

  public record DrainStarted(Instant at) implements Event {}

  public record Evicted(String reason, Instant at) implements Event {}

  public record Reinstated(Instant at) implements Event {}

  public record Removed(Instant at) implements Event {}

  /** {@code expiresAt}: when a pending reservation goes back unless claimed (null: never). */
  public record CardsReserved(
      String rentalId,
      List<Integer> cards,
      long pricePerGpuHour,
      Listing.Tier tier,
      Instant at,
      Instant expiresAt)
      implements Event {
    @JsonCreator
    public CardsReserved {}

    public CardsReserved(
        String rentalId, List<Integer> cards, long pricePerGpuHour, Listing.Tier tier, Instant at) {
      this(rentalId, cards, pricePerGpuHour, tier, at, null);
    }
  }

  /** The rental of a pending reservation claimed it (its first start): it no longer expires. */
  public record CardsClaimed(String rentalId, Instant at) implements Event {}

  /**
   * A pending reservation nobody claimed in time: its cards went back, and the release is
   * remembered as any other, so a late claim or proposal for the rental is refused.
   */
  public record CardsExpired(String rentalId, List<Integer> cards, Instant at) implements Event {}

  /**
   * The rental's workload runs on its cards. {@code listedFrom} (the agent's clock) and {@code
   * startedAt} (the rental's) come with a confirmation from an agent that stamps its heartbeats
   * (null otherwise): kept so that any heartbeat the agent stamped after {@code listedFrom} that
   * omits the workload proves it gone, in this incarnation or a later one.
   */
  public record CardsRented(String rentalId, Instant at, Instant listedFrom, Instant startedAt)
      implements Event {
    public CardsRented(String rentalId, Instant at) {
      this(rentalId, at, null, null);
    }
  }

  /**
   * The rental's cards went back. {@code ran}: its workload had started here ({@link CardsRented});
   * {@code lost}: it ran and ended {@code host_lost}. The two make the host's record with renters,
   * the matcher's tie-break between equal floors ({@code market.Reliability}); events written
   * before they existed read as neither.
   */
  public record CardsReleased(
      String rentalId, List<Integer> cards, Instant at, boolean ran, boolean lost)
      implements Event {
    @JsonCreator
    public CardsReleased {}

    public CardsReleased(String rentalId, List<Integer> cards, Instant at) {
      this(rentalId, cards, at, false, false);
    }
  }

  /**
   * The agent that registered came back with its spent token and pinned key: a new credential
   * replaces the one it never received.
   */
  public record CredentialReissued(String credentialHash, Instant at) implements Event {}

  /** The agent attached with another SSH host key than the one kept (or the first one). */
  public record SshHostKeyChanged(String sshHostKey, Instant at) implements Event {}

  // ---------------------------------------------------------------------------------------------
  // State

  public interface State extends CborSerializable {}

  public enum Empty implements State {
    INSTANCE
  }

  public record Invitation(
      String ownerId, String region, String label, String tokenHash, Instant expiresAt)
      implements State {}

  public enum Status {
    REGISTERED,
    VERIFYING,
    VERIFIED,
    FAILED,
    EVICTED;

    public String wire() {
      return name().toLowerCase(java.util.Locale.ROOT);
    }
  }

  public record Card(int index, String uuid, String gpu) implements CborSerializable {}

  /**
   * Cards held for a rental. {@code listedFrom} and {@code startedAt}: see {@link CardsRented}
   * (null until then, or from an agent that does not stamp its heartbeats).
   */
  public record Held(
      List<Integer> cards,
      long price,
      Listing.Tier tier,
      boolean confirmed,
      Instant listedFrom,
      Instant startedAt)
      implements CborSerializable {
    public Held(List<Integer> cards, long price, Listing.Tier tier, boolean confirmed) {
      this(cards, price, tier, confirmed, null, null);
    }

    /**
     * Whether a heartbeat the agent stamped {@code agentAt} was built after this rental's workload
     * ran, so that omitting it proves the workload gone.
     */
    boolean wouldBeListedBy(Instant agentAt) {
      return confirmed && listedFrom != null && agentAt != null && agentAt.isAfter(listedFrom);
    }
  }

  /**
   * A registered host until it is removed, in parts that cannot be mixed up: how it was enrolled
   * ({@link Enrollment}), what its reports made of it ({@link Standing}), whether its agent is
   * there ({@link Presence}), its cards and who holds them ({@link Inventory}), and what its
   * provider offers ({@link Listing}, {@code draining}). Snapshots written before this class, as
   * one flat {@link Enrolled}, are read through {@link #snapshotAdapter()}.
   */
  public record Active(
      Enrollment enrollment,
      Standing standing,
      Presence presence,
      Inventory inventory,
      Listing listing,
      boolean draining)
      implements State {
    public Active {
      Objects.requireNonNull(enrollment, "enrollment");
      Objects.requireNonNull(standing, "standing");
      Objects.requireNonNull(presence, "presence");
      Objects.requireNonNull(inventory, "inventory");
      Objects.requireNonNull(listing, "listing");
    }

    static Active registered(Invitation invitation, Registered e) {
      Enrollment enrollment =
          new Enrollment(
              invitation.ownerId(),
              invitation.region(),
              invitation.label(),
              e.publicKey(),
              e.credentialHash(),
              e.at(),
              invitation.tokenHash());
      return new Active(
          enrollment,
          Standing.REGISTERED,
          Presence.OFFLINE,
          Inventory.NONE,
          Listing.unlisted(),
          false);
    }

    boolean onMarket() {
      return standing.status() == Status.VERIFIED
          && presence.online()
          && listing.listed()
          && !draining;
    }

    /**
     * Null when a rental with these needs may run here, as the latest passed report says; else why
     * not.
     */
    /** The runtime the latest passed report named; null where the host's agent did not say. */
    String runtimeName() {
      return standing.outcome() == null || standing.outcome().runtime() == null
          ? null
          : standing.outcome().runtime().name();
    }

    String cannotRun(WorkloadNeeds needs) {
      return needs.refusal(standing.outcome() == null ? null : standing.outcome().runtime());
    }

    boolean ownedBy(String ownerId) {
      return enrollment.ownerId().equals(ownerId);
    }

    Status status() {
      return standing.status();
    }

    boolean online() {
      return presence.online();
    }

    Map<String, Held> reservations() {
      return inventory.reservations();
    }

    List<Integer> freeCards() {
      return inventory.freeCards();
    }

    // Applying events: each changes the parts it concerns and keeps the others.

    Active withEnrollment(Enrollment newEnrollment) {
      return new Active(newEnrollment, standing, presence, inventory, listing, draining);
    }

    Active withStanding(Standing newStanding) {
      return new Active(enrollment, newStanding, presence, inventory, listing, draining);
    }

    /**
     * A passed report also sets the cards; reserved cards keep their index, so running rentals are
     * not disturbed.
     */
    Active withReportVerified(ReportVerified e) {
      Inventory verifiedCards = inventory.withCards(cards(e.outcome()));
      return new Active(
          enrollment,
          standing.verified(e.outcome(), e.reportHash(), e.at()),
          presence,
          verifiedCards,
          listing,
          draining);
    }

    /** The first heartbeat of a registered host starts its verification. */
    Active withOnline(Instant at) {
      return new Active(
          enrollment, standing.cameOnline(), new Presence(true, at), inventory, listing, draining);
    }

    Active withPresence(Presence newPresence) {
      return new Active(enrollment, standing, newPresence, inventory, listing, draining);
    }

    Active withListing(Listing newListing) {
      return new Active(enrollment, standing, presence, inventory, newListing, draining);
    }

    Active withDraining() {
      return new Active(enrollment, standing, presence, inventory, listing, true);
    }

    Active withInventory(Inventory newInventory) {
      return new Active(enrollment, standing, presence, newInventory, listing, draining);
    }

    Active reserving(CardsReserved e) {
      return withInventory(inventory.reserving(e));
    }

    private static List<Card> cards(Verification.Outcome outcome) {
      return outcome.cards().stream().map(c -> new Card(c.index(), c.uuid(), c.gpu())).toList();
    }
  }

  /** Who the host belongs to, where it is, and the hashes of the secrets it was enrolled with. */
  public record Enrollment(
      String ownerId,
      String region,
      String label,
      String publicKey,
      String credentialHash,
      Instant registeredAt,
      String tokenHash,
      String sshHostKey)
      implements CborSerializable {
    @JsonCreator
    public Enrollment {}

    public Enrollment(
        String ownerId,
        String region,
        String label,
        String publicKey,
        String credentialHash,
        Instant registeredAt,
        String tokenHash) {
      this(ownerId, region, label, publicKey, credentialHash, registeredAt, tokenHash, null);
    }

    Enrollment withCredentialHash(String hash) {
      return new Enrollment(
          ownerId, region, label, publicKey, hash, registeredAt, tokenHash, sshHostKey);
    }

    Enrollment withSshHostKey(String key) {
      return new Enrollment(
          ownerId, region, label, publicKey, credentialHash, registeredAt, tokenHash, key);
    }

    Gone removed() {
      return new Gone(ownerId, credentialHash, tokenHash);
    }
  }

  /**
   * What the host's reports and its operators made of it; an eviction holds until it is reinstated.
   */
  public record Standing(
      Status status,
      Verification.Outcome outcome,
      String reportHash,
      String evictionReason,
      Instant judgedAt,
      Instant checkRequestedAt)
      implements CborSerializable {
    static final Standing REGISTERED = new Standing(Status.REGISTERED, null, null, null);

    /**
     * {@code judgedAt}: when the latest report was judged (null in states written before it was
     * kept); {@code checkRequestedAt}: a check again not yet answered by a report.
     */
    @JsonCreator
    public Standing {}

    public Standing(
        Status status, Verification.Outcome outcome, String reportHash, String evictionReason) {
      this(status, outcome, reportHash, evictionReason, null, null);
    }

    Standing checkRequested(Instant at) {
      return new Standing(status, outcome, reportHash, evictionReason, judgedAt, at);
    }

    boolean simulated() {
      return outcome != null && outcome.simulated();
    }

    Standing cameOnline() {
      return status == Status.REGISTERED
          ? new Standing(
              Status.VERIFYING, outcome, reportHash, evictionReason, judgedAt, checkRequestedAt)
          : this;
    }

    /** A passed report, judged {@code at}: it answers any check again asked before. */
    Standing verified(Verification.Outcome passed, String hash, Instant at) {
      return new Standing(
          status == Status.EVICTED ? Status.EVICTED : Status.VERIFIED,
          passed,
          hash,
          evictionReason,
          at,
          null);
    }

    /** A failed report; {@code evict} when it failed a host that had been verified. */
    Standing rejected(Verification.Outcome failed, String hash, boolean evict, Instant at) {
      return new Standing(
          evict || status == Status.EVICTED ? Status.EVICTED : Status.FAILED,
          failed,
          hash,
          evict ? "failed re-verification" : evictionReason,
          at,
          null);
    }

    Standing evicted(String reason) {
      return new Standing(Status.EVICTED, outcome, reportHash, reason, judgedAt, checkRequestedAt);
    }

    /** Back to what its latest report says. */
    Standing reinstated() {
      return new Standing(
          outcome != null && outcome.passed() ? Status.VERIFIED : Status.FAILED,
          outcome,
          reportHash,
          null,
          judgedAt,
          checkRequestedAt);
    }
  }

  /**
   * Whether the host is online, and its latest heartbeat in the journal (when it went offline: its
   * last one).
   */
  public record Presence(boolean online, Instant lastHeartbeatAt) implements CborSerializable {
    static final Presence OFFLINE = new Presence(false, null);
  }

  /**
   * The host's cards (from its latest passed report), the rentals holding some of them, and the
   * rentals whose cards it released in the last {@link #REMEMBER_RELEASES} (by the events' own
   * time, so replay gives the same state): a proposal for one of those is refused. {@code
   * unlisted}: the rentals whose workload a heartbeat no longer listed while they held cards
   * ({@link WorkloadUnlisted}), kept while they hold them and as long as their release is
   * remembered; absent in states written before it.
   */
  public record Inventory(
      List<Card> cards,
      Map<String, Held> reservations,
      Map<String, Instant> released,
      Map<String, Unlisted> unlisted,
      Map<String, Instant> unclaimed)
      implements CborSerializable {
    static final Inventory NONE = new Inventory(List.of(), Map.of());

    /**
     * {@code unclaimed}: the pending reservations their rentals have not claimed yet, with when
     * each expires (absent in states written before pending reservations).
     */
    @JsonCreator
    public Inventory {
      reservations = byRentalId(reservations);
      released = byRentalId(released);
      unlisted = byRentalId(unlisted);
      unclaimed = byRentalId(unclaimed);
    }

    /**
     * An unmodifiable copy that iterates by rental id: the order of the events and messages a
     * command derives from these maps is then the same on every node and in every run ({@code
     * Map.copyOf} iterates in an order each JVM salts, so a heartbeat that unlisted two workloads
     * journaled them in one order or the other; docs/simulation.md, "Determinism").
     */
    @SuppressWarnings("unchecked")
    private static <V> Map<String, V> byRentalId(Map<String, V> map) {
      if (map == null || map.isEmpty()) return Map.of();
      // One this method made (the only maker of these views here) is kept as it is: every event
      // on a host builds a new Inventory, which copied all four maps, changed or not, each time.
      if (map.getClass() == BY_RENTAL_ID
          && ((java.util.SortedMap<String, V>) map).comparator() == null) return map;
      return java.util.Collections.unmodifiableSortedMap(new java.util.TreeMap<>(map));
    }

    private static final Class<?> BY_RENTAL_ID =
        java.util.Collections.unmodifiableSortedMap(new java.util.TreeMap<>()).getClass();

    Inventory(
        List<Card> cards,
        Map<String, Held> reservations,
        Map<String, Instant> released,
        Map<String, Unlisted> unlisted) {
      this(cards, reservations, released, unlisted, Map.of());
    }

    Inventory(List<Card> cards, Map<String, Held> reservations, Map<String, Instant> released) {
      this(cards, reservations, released, Map.of());
    }

    Inventory(List<Card> cards, Map<String, Held> reservations) {
      this(cards, reservations, Map.of());
    }

    String gpu() {
      return cards.isEmpty() ? null : cards.get(0).gpu();
    }

    List<Integer> freeCards() {
      java.util.Set<Integer> taken = new java.util.HashSet<>();
      reservations.values().forEach(h -> taken.addAll(h.cards()));
      List<Integer> free = new ArrayList<>();
      for (Card c : cards) if (!taken.contains(c.index())) free.add(c.index());
      return free;
    }

    boolean wasReleased(String rentalId) {
      return released.containsKey(rentalId);
    }

    /**
     * Unconfirmed reservations, by rental id: not yet running, whether claimed or still pending. A
     * pending one expires by itself, but at an instant of the host's clock: after the clock steps
     * back that can be an hour away, so its rental is asked as well.
     */
    List<String> unconfirmed() {
      return reservations.entrySet().stream()
          .filter(e -> !e.getValue().confirmed())
          .map(Map.Entry::getKey)
          .sorted()
          .toList();
    }

    Inventory withCards(List<Card> newCards) {
      return new Inventory(newCards, reservations, released, unlisted, unclaimed);
    }

    boolean isUnclaimed(String rentalId) {
      return unclaimed.containsKey(rentalId);
    }

    /** The earliest instant an unclaimed reservation expires; null when none is unclaimed. */
    Instant nextExpiry() {
      Instant next = null;
      for (Instant at : unclaimed.values()) if (next == null || at.isBefore(next)) next = at;
      return next;
    }

    /** The unclaimed reservations whose time ran out at {@code now}, by rental id. */
    List<String> expiredAt(Instant now) {
      return unclaimed.entrySet().stream()
          .filter(e -> !now.isBefore(e.getValue()))
          .map(Map.Entry::getKey)
          .sorted()
          .toList();
    }

    Inventory claiming(String rentalId) {
      if (!unclaimed.containsKey(rentalId)) return this;
      Map<String, Instant> u = new HashMap<>(unclaimed);
      u.remove(rentalId);
      return new Inventory(cards, reservations, released, unlisted, u);
    }

    /** Only for a rental that still holds cards here. */
    Inventory unlisting(WorkloadUnlisted e) {
      if (!reservations.containsKey(e.rentalId()) || unlisted.containsKey(e.rentalId()))
        return this;
      Map<String, Unlisted> u = new HashMap<>(unlisted);
      u.put(e.rentalId(), new Unlisted(e.lastListedAt(), e.at()));
      return new Inventory(cards, reservations, released, u, unclaimed);
    }

    Inventory reserving(CardsReserved e) {
      Inventory reserved =
          withReservation(e.rentalId(), new Held(e.cards(), e.pricePerGpuHour(), e.tier(), false));
      if (e.expiresAt() == null) return reserved;
      Map<String, Instant> u = new HashMap<>(unclaimed);
      u.put(e.rentalId(), e.expiresAt());
      return new Inventory(cards, reserved.reservations(), released, unlisted, u);
    }

    /** Running is more than claimed: a rental whose workload runs here has claimed its cards. */
    Inventory renting(CardsRented e) {
      Held h = reservations.get(e.rentalId());
      if (h == null) return this;
      boolean stamped = e.listedFrom() != null && e.startedAt() != null; // else keep the first
      Instant listedFrom = stamped ? e.listedFrom() : h.listedFrom();
      Instant startedAt = stamped ? e.startedAt() : h.startedAt();
      return withReservation(
              e.rentalId(), new Held(h.cards(), h.price(), h.tier(), true, listedFrom, startedAt))
          .claiming(e.rentalId());
    }

    /** Whether {@code rentalId}'s workload was started on its cards (not merely reserved). */
    boolean isRented(String rentalId) {
      Held h = reservations.get(rentalId);
      return h != null && h.confirmed();
    }

    Inventory releasing(String rentalId, Instant at) {
      Map<String, Held> r = new HashMap<>(reservations);
      r.remove(rentalId);
      Map<String, Instant> remembered = new HashMap<>();
      Instant since = at.minus(REMEMBER_RELEASES);
      released.forEach(
          (id, when) -> {
            if (when.isAfter(since)) remembered.put(id, when);
          });
      remembered.put(rentalId, at);
      // Kept as long as the release is remembered: the rental proves its end by asking the host,
      // and its cards go back at the same time.
      Map<String, Unlisted> u = new HashMap<>();
      unlisted.forEach(
          (id, v) -> {
            if (r.containsKey(id) || remembered.containsKey(id)) u.put(id, v);
          });
      Map<String, Instant> stillUnclaimed = new HashMap<>(unclaimed);
      stillUnclaimed.remove(rentalId);
      return new Inventory(cards, r, remembered, u, stillUnclaimed);
    }

    private Inventory withReservation(String rentalId, Held held) {
      Map<String, Held> r = new HashMap<>(reservations);
      r.put(rentalId, held);
      return new Inventory(cards, r, released, unlisted, unclaimed);
    }
  }

  /**
   * A rental's workload stopped being listed: the latest heartbeat known to list it, and the first
   * one after it that did not.
   */
  public record Unlisted(Instant listedAt, Instant goneAt) implements CborSerializable {}

  /**
   * The state of a registered host as snapshots held it before {@link Active}: one flat record.
   * Kept, under its old name, only so that those snapshots are still read (their manifest is this
   * class name); recovery turns it into an {@link Active} ({@link #snapshotAdapter()}). Nothing
   * writes it any more. Do not change its components.
   */
  public record Enrolled(
      String ownerId,
      String region,
      String label,
      String publicKey,
      String credentialHash,
      Status status,
      Verification.Outcome outcome,
      String reportHash,
      List<Card> cards,
      Map<String, Held> reservations,
      Listing listing,
      boolean online,
      Instant lastHeartbeatAt,
      boolean draining,
      String evictionReason,
      Instant registeredAt,
      String tokenHash)
      implements CborSerializable {

    /** The same host in today's shape: every value where {@link Active} keeps it. */
    Active upgrade() {
      return new Active(
          new Enrollment(
              ownerId, region, label, publicKey, credentialHash, registeredAt, tokenHash),
          new Standing(status, outcome, reportHash, evictionReason),
          new Presence(online, lastHeartbeatAt),
          new Inventory(cards, reservations),
          listing,
          draining);
    }
  }

  /**
   * A removed host remembers its secrets' hashes only to tell their holders why they are refused.
   */
  public record Gone(String ownerId, String credentialHash, String tokenHash) implements State {}

  // ---------------------------------------------------------------------------------------------
  // Behaviour

  private static final SecureRandom RANDOM = new SecureRandom();

  private final String hostId;
  private final Settings settings;
  private final Clock clock;
  private final ActorContext<Command> context;
  private final TimerScheduler<Command> timers;
  private final EngineMetrics metrics;
  // Actor-local, never persisted: the live session and the latest heartbeat it delivered.
  private ActorRef<ToSession> session;
  private long lastSeq = -1;
  private Instant lastHeartbeat; // when the heartbeat timeout was last reset
  private Instant
      lastConfirmed; // the latest proof of life: what rentals on this host may be billed up to
  private final WorkloadListings listings = new WorkloadListings();

  // Spot rentals whose agent was told their deadline, and those told it since they run (see
  // preemptBeforeAvailabilityEnds).
  private final java.util.Set<String> noticeGiven = new java.util.HashSet<>();
  private final java.util.Set<String> noticeGivenRunning = new java.util.HashSet<>();

  public static void init(ActorSystem<?> system, Settings settings, Clock clock) {
    ClusterSharding.get(system)
        .init(Entity.of(ENTITY_KEY, ctx -> create(ctx.getEntityId(), settings, clock)));
  }

  public static Behavior<Command> create(String hostId, Settings settings, Clock clock) {
    return Behaviors.setup(
        ctx -> Behaviors.withTimers(timers -> new Host(hostId, settings, clock, ctx, timers)));
  }

  private Host(
      String hostId,
      Settings settings,
      Clock clock,
      ActorContext<Command> context,
      TimerScheduler<Command> timers) {
    super(PersistenceId.of(ENTITY_KEY.name(), hostId), JournalFailures.RESTART_WITH_BACKOFF);
    this.hostId = hostId;
    this.settings = settings;
    this.clock = clock;
    this.context = context;
    this.timers = timers;
    this.metrics = EngineMetrics.get(context.getSystem());
  }

  @Override
  public State emptyState() {
    return Empty.INSTANCE;
  }

  @Override
  public Set<String> tagsFor(Event event) {
    return Set.of(tagFor(hostId));
  }

  @Override
  public RetentionCriteria retentionCriteria() {
    return RetentionCriteria.snapshotEvery(100, 2);
  }

  /**
   * Snapshots are written as they are; one in the shape before {@link Active} is upgraded when it
   * is read.
   */
  @Override
  public SnapshotAdapter<State> snapshotAdapter() {
    return new SnapshotAdapter<>() {
      @Override
      public Object toJournal(State state) {
        return state;
      }

      @Override
      public State fromJournal(Object from) {
        return from instanceof Enrolled legacy ? legacy.upgrade() : (State) from;
      }
    };
  }

  @Override
  public SignalHandler<State> signalHandler() {
    return newSignalHandlerBuilder()
        .onSignal(RecoveryCompleted.instance(), this::onRecovered)
        .build();
  }

  private void onRecovered(State state) {
    if (state instanceof Active a && !a.inventory().unconfirmed().isEmpty())
      checkReservationsLater(CHECK_RESERVATIONS_AFTER_RECOVERY);
    if (state instanceof Active a) expireLater(a);
    if (state instanceof Active e && e.presence().online()) {
      // The agent gets a full timeout to reach this incarnation before the host is declared
      // offline, but nothing after the last heartbeat in the journal is billed unless the agent
      // comes back.
      lastHeartbeat = now();
      lastConfirmed =
          e.presence().lastHeartbeatAt() != null ? e.presence().lastHeartbeatAt() : now();
      scheduleHeartbeatCheck(settings.heartbeatTimeout());
    }
    if (state instanceof Active a) listings.assumeListedAtRecovery(a);
  }

  // ---------------------------------------------------------------------------------------------
  // Commands: one handler per state. The table is built once for every host
  // (SharedCommandHandler): each handler takes the host it runs for.

  private static final SharedCommandHandler<Host, Command, Event, State> COMMANDS = commands();

  @Override
  public CommandHandlerWithReply<Command, Event, State> commandHandler() {
    return (state, command) -> COMMANDS.apply(this, state, command);
  }

  private static SharedCommandHandler<Host, Command, Event, State> commands() {
    var builder = SharedCommandHandler.<Host, Command, Event, State>builder();
    emptyHandler(builder.forStateType(Empty.class));
    invitationHandler(builder.forStateType(Invitation.class));
    activeHandler(builder.forStateType(Active.class));
    goneHandler(builder.forStateType(Gone.class));
    return builder.build();
  }

  private static void emptyHandler(
      SharedCommandHandler.ForState<Host, Empty, Command, Event, State> empty) {
    empty
        .onCommand(Invite.class, Host::onInvite)
        .onCommand(StopWorkload.class, Host::ignore)
        .onCommand(UploadSnapshot.class, Host::ignore)
        .onCommand(GetLiveness.class, Host::notLive)
        .onCommand(CheckToken.class, (h, s, c) -> h.Effect().reply(c.replyTo(), unauthorized()))
        .onCommand(Register.class, (h, s, c) -> h.Effect().reply(c.replyTo(), unauthorized()))
        .onCommand(Authenticate.class, (h, s, c) -> h.Effect().reply(c.replyTo(), unauthorized()))
        .onCommand(Heartbeat.class, Host::ignore)
        .onCommand(HeartbeatCheck.class, Host::ignore)
        .onCommand(Detach.class, Host::ignore)
        .onAnyCommand(Host::notFound);
  }

  private static void invitationHandler(
      SharedCommandHandler.ForState<Host, Invitation, Command, Event, State> invitation) {
    invitation
        .onCommand(Invite.class, (h, s, c) -> h.Effect().reply(c.replyTo(), h.alreadyExists()))
        .onCommand(CheckToken.class, Host::onCheckToken)
        .onCommand(Register.class, Host::onRegister)
        .onCommand(Authenticate.class, (h, s, c) -> h.Effect().reply(c.replyTo(), unauthorized()))
        .onCommand(Get.class, Host::onGetInvitation)
        .onCommand(RequestVerification.class, Host::onRequestVerificationUnregistered)
        .onCommand(StopWorkload.class, Host::ignore)
        .onCommand(UploadSnapshot.class, Host::ignore)
        .onCommand(GetLiveness.class, Host::notLive)
        .onCommand(Heartbeat.class, Host::ignore)
        .onCommand(HeartbeatCheck.class, Host::ignore)
        .onCommand(Detach.class, Host::ignore)
        .onAnyCommand(Host::notFound);
  }

  private static void activeHandler(
      SharedCommandHandler.ForState<Host, Active, Command, Event, State> active) {
    active
        .onCommand(Invite.class, (h, s, c) -> h.Effect().reply(c.replyTo(), h.alreadyExists()))
        .onCommand(CheckToken.class, Host::onCheckSpentToken)
        .onCommand(Register.class, Host::onRegisterAgain)
        .onCommand(Authenticate.class, Host::onAuthenticate)
        .onCommand(Attach.class, Host::onAttach)
        .onCommand(Detach.class, Host::onDetach)
        .onCommand(OpenStream.class, Host::onOpenStream)
        .onCommand(ClaimStream.class, Host::onClaimStream)
        .onCommand(GetSshHostKey.class, Host::onGetSshHostKey)
        .onCommand(VerifyReport.class, Host::onVerifyReport)
        .onCommand(Heartbeat.class, Host::onHeartbeat)
        .onCommand(HeartbeatCheck.class, Host::onHeartbeatCheck)
        .onCommand(UpdateListing.class, Host::onUpdateListing)
        .onCommand(Drain.class, Host::onDrain)
        .onCommand(Remove.class, Host::onRemove)
        .onCommand(Evict.class, Host::onEvict)
        .onCommand(Reinstate.class, Host::onReinstate)
        .onCommand(RequestVerification.class, Host::onRequestVerification)
        .onCommand(Get.class, Host::onGet)
        .onCommand(ReserveCards.class, Host::onReserve)
        .onCommand(ReserveCardsBatch.class, Host::onReserveBatch)
        .onCommand(ConfirmCards.class, Host::onConfirm)
        .onCommand(ReleaseCards.class, Host::onRelease)
        .onCommand(ReservationCheck.class, Host::onReservationCheck)
        .onCommand(ExpireReservations.class, Host::onExpireReservations)
        .onCommand(ReservationWanted.class, Host::onReservationWanted)
        .onCommand(StartWorkload.class, Host::onStartWorkload)
        .onCommand(StopWorkload.class, Host::onStopWorkload)
        .onCommand(UploadSnapshot.class, Host::onUploadSnapshot)
        .onCommand(GetLiveness.class, Host::onGetLiveness)
        .onCommand(Reclaim.class, Host::onReclaim);
  }

  private static void goneHandler(
      SharedCommandHandler.ForState<Host, Gone, Command, Event, State> gone) {
    gone.onCommand(Heartbeat.class, Host::ignore)
        .onCommand(StopWorkload.class, Host::ignore)
        .onCommand(UploadSnapshot.class, Host::ignore)
        .onCommand(GetLiveness.class, Host::notLive)
        .onCommand(HeartbeatCheck.class, Host::ignore)
        .onCommand(Detach.class, Host::ignore)
        .onCommand(
            ReleaseCards.class, (h, s, c) -> h.Effect().reply(c.replyTo(), StatusReply.ack()))
        .onCommand(Authenticate.class, Host::onAuthenticateGone)
        .onCommand(Register.class, Host::onRegisterGone)
        .onCommand(CheckToken.class, Host::onCheckTokenGone)
        .onAnyCommand(Host::notFound);
  }

  private ReplyEffect<Event, State> ignore(State state, Command command) {
    return Effect().noReply();
  }

  private ReplyEffect<Event, State> notLive(State state, GetLiveness cmd) {
    return Effect().reply(cmd.replyTo(), new Liveness(false, null));
  }

  private ReplyEffect<Event, State> onRequestVerificationUnregistered(
      Invitation state, RequestVerification cmd) {
    return Effect()
        .reply(
            cmd.replyTo(),
            state.ownerId().equals(cmd.ownerId())
                ? reply(Rejection.HOST_OFFLINE, "no agent has registered this host yet")
                : reply(Rejection.NOT_FOUND, "no such host"));
  }

  private ReplyEffect<Event, State> onGetSshHostKey(Active state, GetSshHostKey cmd) {
    return Effect()
        .reply(cmd.replyTo(), StatusReply.success(new SshHostKey(state.enrollment().sshHostKey())));
  }

  private ReplyEffect<Event, State> onGetLiveness(Active state, GetLiveness cmd) {
    return Effect().reply(cmd.replyTo(), liveness(state, cmd.rentalId()));
  }

  private ReplyEffect<Event, State> onAuthenticateGone(Gone state, Authenticate cmd) {
    return Effect()
        .reply(
            cmd.replyTo(),
            spent(state.credentialHash(), cmd.credentialHash(), Rejection.HOST_REMOVED));
  }

  private ReplyEffect<Event, State> onRegisterGone(Gone state, Register cmd) {
    return Effect()
        .reply(cmd.replyTo(), spent(state.tokenHash(), cmd.tokenHash(), Rejection.HOST_REMOVED));
  }

  private ReplyEffect<Event, State> onCheckTokenGone(Gone state, CheckToken cmd) {
    return Effect()
        .reply(cmd.replyTo(), spent(state.tokenHash(), cmd.tokenHash(), Rejection.HOST_REMOVED));
  }

  private <T> StatusReply<T> tokenUsed(Active state, String tokenHash) {
    return spent(state.enrollment().tokenHash(), tokenHash, Rejection.TOKEN_USED);
  }

  /**
   * How long after its registration a host's spent token still lets the agent that spent it (the
   * same pinned key, proven by the hello signature) get a new credential: long enough for an agent
   * whose welcome was lost (a node that died between the registration and the answer) to come back,
   * short enough that a token found later in a shell history is worth nothing on its own.
   */
  static final Duration REREGISTRATION_WINDOW = Duration.ofHours(1);

  private boolean mayRegisterAgain(Active state, String tokenHash) {
    Enrollment e = state.enrollment();
    return constantTimeEquals(e.tokenHash(), tokenHash)
        && e.registeredAt() != null
        && now().isBefore(e.registeredAt().plus(REREGISTRATION_WINDOW));
  }

  /** A spent token is let through to the hello while its agent may still register again. */
  private ReplyEffect<Event, State> onCheckSpentToken(Active state, CheckToken cmd) {
    if (mayRegisterAgain(state, cmd.tokenHash()))
      return Effect().reply(cmd.replyTo(), StatusReply.ack());
    return Effect().reply(cmd.replyTo(), tokenUsed(state, cmd.tokenHash()));
  }

  /**
   * The agent that registered presents its token again (the credential never reached it): within
   * {@link #REREGISTRATION_WINDOW} and with the pinned key, it gets a new credential, and the first
   * one stops working. Any other key, or later, is {@code token_used}.
   */
  private ReplyEffect<Event, State> onRegisterAgain(Active state, Register cmd) {
    if (!mayRegisterAgain(state, cmd.tokenHash())
        || !state.enrollment().publicKey().equals(cmd.publicKey()))
      return Effect().reply(cmd.replyTo(), tokenUsed(state, cmd.tokenHash()));
    String secret = randomHex(24);
    String credential = "tmkhost_" + hostId + "_" + secret;
    return Effect()
        .persist(new CredentialReissued(sha256(secret), now()))
        .thenReply(cmd.replyTo(), s -> StatusReply.success(new Registration(hostId, credential)));
  }

  private <T> StatusReply<T> alreadyExists() {
    return reply(Rejection.ALREADY_EXISTS, "host " + hostId + " exists");
  }

  private Liveness liveness(Active state, String rentalId) {
    Unlisted unlisted = rentalId == null ? null : state.inventory().unlisted().get(rentalId);
    return new Liveness(
        state.presence().online(),
        lastHeartbeatSeen(state),
        rentalId == null ? null : listings.lastListed(state, rentalId),
        unlisted != null ? unlisted.goneAt() : null,
        rentalId != null && listings.blindTo(state, rentalId));
  }

  /** The latest proof of life: this incarnation's while the host is online, else the journal's. */
  private Instant lastHeartbeatSeen(Active state) {
    return state.presence().online() && lastConfirmed != null
        ? lastConfirmed
        : state.presence().lastHeartbeatAt();
  }

  /**
   * Any replying command that this state does not serve answers {@code not_found}; others are
   * dropped.
   */
  private ReplyEffect<Event, State> notFound(State state, Command command) {
    if (command instanceof Replying<?> replying) return refuse(replying);
    return Effect().noReply();
  }

  private <T> ReplyEffect<Event, State> refuse(Replying<T> command) {
    return Effect().reply(command.replyTo(), reply(Rejection.NOT_FOUND, "no host " + hostId));
  }

  // ---- invitation and registration

  private ReplyEffect<Event, State> onInvite(Empty state, Invite cmd) {
    return Effect()
        .persist(
            new Invited(
                cmd.ownerId(), cmd.region(), cmd.label(), cmd.tokenHash(), cmd.expiresAt(), now()))
        .thenReply(cmd.replyTo(), s -> StatusReply.ack());
  }

  private ReplyEffect<Event, State> onCheckToken(Invitation state, CheckToken cmd) {
    return Effect()
        .reply(
            cmd.replyTo(),
            tokenProblem(state, cmd.tokenHash()) == null
                ? StatusReply.ack()
                : tokenProblem(state, cmd.tokenHash()));
  }

  private ReplyEffect<Event, State> onRegister(Invitation state, Register cmd) {
    StatusReply<Done> problem = tokenProblem(state, cmd.tokenHash());
    if (problem != null)
      return Effect().reply(cmd.replyTo(), StatusReply.error(problem.getError().getMessage()));
    try {
      if (cmd.publicKey() == null)
        throw new IllegalArgumentException("no public key"); // decodePublic(null) throws NPE
      Ed25519.decodePublic(cmd.publicKey());
    } catch (IllegalArgumentException e) {
      return Effect()
          .reply(
              cmd.replyTo(),
              reply(Rejection.BAD_PUBLIC_KEY, "the agent's public key is not an Ed25519 key"));
    }
    String secret = randomHex(24);
    String credential = "tmkhost_" + hostId + "_" + secret;
    return Effect()
        .persist(new Registered(cmd.publicKey(), sha256(secret), now()))
        .thenReply(cmd.replyTo(), s -> StatusReply.success(new Registration(hostId, credential)));
  }

  /**
   * The answer to a secret whose use is over: its holder learns why ({@code code}); anyone else
   * learns nothing beyond {@code unauthorized}.
   */
  private <T> StatusReply<T> spent(String expectedHash, String presentedHash, Rejection code) {
    if (!constantTimeEquals(expectedHash, presentedHash)) return unauthorized();
    return code == Rejection.TOKEN_USED
        ? reply(Rejection.TOKEN_USED, "this registration token was already used")
        : reply(Rejection.HOST_REMOVED, "host " + hostId + " was removed");
  }

  private StatusReply<Done> tokenProblem(Invitation state, String tokenHash) {
    if (!constantTimeEquals(state.tokenHash(), tokenHash)) return unauthorized();
    if (!now().isBefore(state.expiresAt()))
      return reply(Rejection.TOKEN_EXPIRED, "this registration token expired; create a new one");
    return null;
  }

  private ReplyEffect<Event, State> onAuthenticate(Active state, Authenticate cmd) {
    Enrollment enrollment = state.enrollment();
    if (!constantTimeEquals(enrollment.credentialHash(), cmd.credentialHash()))
      return Effect().reply(cmd.replyTo(), unauthorized());
    return Effect()
        .reply(
            cmd.replyTo(),
            StatusReply.success(
                new Identity(hostId, enrollment.publicKey(), enrollment.ownerId())));
  }

  // ---- sessions and health

  private ReplyEffect<Event, State> onAttach(Active state, Attach cmd) {
    if (session != null && !session.equals(cmd.session())) {
      session.tell(new CloseSession(Rejection.REPLACED, "a newer session for this host connected"));
    }
    // A reconnect after a silence past the timeout on this node's clock (a clock stepped forward
    // while the agent reconnected) is an outage, as a late heartbeat is: no heartbeat proves the
    // gap.
    boolean lapsed = lapsed(state);
    Instant lastProof = lastConfirmed != null ? lastConfirmed : lastHeartbeat;
    session = cmd.session();
    lastSeq = -1;
    lastHeartbeat = now();
    lastConfirmed = lastHeartbeat;
    scheduleHeartbeatCheck(settings.heartbeatTimeout());
    Attached attached = new Attached(hostId, settings.heartbeatIntervalSeconds());
    List<Event> events = new ArrayList<>(3);
    if (lapsed) events.add(new WentOffline(lastProof, now()));
    if (cmd.sshHostKey() != null
        && !cmd.sshHostKey().equals(state.enrollment().sshHostKey())
        && dev.tickmark.wire.SshPublicKeys.isPublicKeyLine(cmd.sshHostKey()))
      events.add(new SshHostKeyChanged(cmd.sshHostKey(), now()));
    if (!state.online() || lapsed) events.add(new WentOnline(now()));
    if (events.isEmpty()) {
      tellRentalsAttached(state);
      return Effect().reply(cmd.replyTo(), StatusReply.success(attached));
    }
    return Effect()
        .persist(events)
        .thenRun(
            s -> {
              if (lapsed) notifyHostLost((Active) s, lastProof);
              tellRentalsAttached((Active) s);
            })
        .thenReply(cmd.replyTo(), s -> StatusReply.success(attached));
  }

  /**
   * The attach, and its session's first heartbeat that lists workloads, prove the host alive now:
   * the rentals running here may settle on it at once (after a node loss they are waiting for
   * exactly this proof, FailoverBenchmark).
   */
  private void tellRentalsAttached(Active state) {
    state
        .reservations()
        .forEach(
            (rentalId, held) -> {
              if (held.confirmed()) settings.rentals().hostAttached(rentalId, hostId);
            });
  }

  // ---- streams to the workload (nothing persisted: they live as long as their sockets)

  private ReplyEffect<Event, State> onOpenStream(Active state, OpenStream cmd) {
    if (!state.inventory().isRented(cmd.rentalId()))
      return Effect()
          .reply(
              cmd.replyTo(),
              reply(Rejection.NOT_FOUND, "rental " + cmd.rentalId() + " is not running here"));
    if (session == null)
      return Effect()
          .reply(
              cmd.replyTo(),
              reply(Rejection.UNAVAILABLE, "the host's agent is not connected now; retry shortly"));
    session.tell(new OpenStreamOnAgent(cmd.rentalId(), cmd.streamId(), cmd.ends(), cmd.replyTo()));
    return Effect().noReply();
  }

  private ReplyEffect<Event, State> onClaimStream(Active state, ClaimStream cmd) {
    if (session == null)
      return Effect().reply(cmd.replyTo(), reply(Rejection.NOT_FOUND, "no such stream"));
    session.tell(new ClaimStreamOnAgent(cmd.streamId(), cmd.handle(), cmd.replyTo()));
    return Effect().noReply();
  }

  private ReplyEffect<Event, State> onDetach(Active state, Detach cmd) {
    // The host stays online until the heartbeat timeout: an agent that reconnects quickly loses
    // nothing.
    if (cmd.session().equals(session)) session = null;
    return Effect().noReply();
  }

  private ReplyEffect<Event, State> onHeartbeat(Active state, Heartbeat cmd) {
    if (session == null) {
      List<WorkloadUnlisted> unlisted =
          listings.noteHeartbeat(state, cmd.rentals(), cmd.agentAt(), now(), false);
      // This incarnation knows no live session (the entity restarted or moved, or the session timed
      // out): a session still heartbeating would otherwise be ignored until the host goes offline,
      // and never learn it should reconnect.
      cmd.session()
          .tell(
              new CloseSession(
                  Rejection.RECONNECT, "this host does not know this session any more; reconnect"));
      if (unlisted.isEmpty()) return Effect().noReply();
      return Effect().persist(List.<Event>copyOf(unlisted)).thenNoReply();
    }
    if (!cmd.session().equals(session) || cmd.seq() <= lastSeq)
      return Effect().noReply(); // stale or duplicate
    // On this node's clock the host was silent past the timeout (the clock stepped forward, or the
    // heartbeat check has not run yet): it is offline at its last heartbeat, whichever of the two
    // the entity handles first. This heartbeat proves none of the gap, so none of it is billed.
    if (lapsed(state)) return goOffline();
    metrics.heartbeats.increment();
    metrics.heartbeatHandling.recordMicros(
        micros(Instant.now()) - cmd.receivedAtMicros()); // wall clock, like the socket
    boolean firstOfSession = lastSeq < 0;
    lastSeq = cmd.seq();
    lastHeartbeat = now();
    lastConfirmed = lastHeartbeat;
    // The check already due looks at the silence again when it fires and then waits out what is
    // left of the timeout: restarting it here would schedule a timer for every heartbeat (5,000 a
    // second from 10,000 hosts at the 2 s default).
    if (!timers.isTimerActive(HeartbeatCheck.INSTANCE))
      scheduleHeartbeatCheck(settings.heartbeatTimeout());
    List<WorkloadUnlisted> unlisted =
        listings.noteHeartbeat(state, cmd.rentals(), cmd.agentAt(), lastConfirmed, true);
    // After a restart the listings are the journal's (the last recorded heartbeat), so the attach
    // alone proves a running rental's seconds only up to that record; this session's first listing
    // proves them up to now, and the rentals waiting for it are told at once, as at the attach.
    if (firstOfSession && cmd.rentals() != null && !cmd.rentals().isEmpty())
      tellRentalsAttached(state);
    stopOrphanWorkloads(state, cmd.rentals());
    preemptBeforeAvailabilityEnds(state);
    String fault =
        cmd.gpus() == null
            ? null
            : cmd.gpus().stream()
                .filter(g -> g.fault() != null && !g.fault().isBlank())
                .map(g -> "GPU " + g.index() + ": " + g.fault())
                .findFirst()
                .orElse(null);
    List<Event> events = new ArrayList<>(2);
    if (!state.online()) events.add(new WentOnline(now()));
    if (fault != null && state.status() != Status.EVICTED)
      events.add(new Evicted("GPU fault reported: " + fault, now()));
    boolean rented = state.reservations().values().stream().anyMatch(Held::confirmed);
    Instant recorded = state.presence().lastHeartbeatAt();
    // Due as well when the clock stepped back past the record: the record would otherwise stand,
    // ahead of every heartbeat, until the clock caught up (an hour), and a restart would take the
    // host as alive, and its workloads as listed, up to that future instant.
    boolean due =
        recorded == null
            || now().isBefore(recorded)
            || !now().isBefore(recorded.plus(RECORD_HEARTBEAT_EVERY));
    // Whenever this heartbeat is persisted anyway (an eviction), or a rented host's record is due,
    // keep it.
    if (state.online() && ((!events.isEmpty()) || (rented && due)))
      events.add(0, new HeartbeatRecorded(now()));
    events.addAll(unlisted);
    if (events.isEmpty()) return Effect().noReply();
    boolean evicting = events.stream().anyMatch(e -> e instanceof Evicted);
    return Effect()
        .persist(events)
        .thenRun(
            s -> {
              if (evicting) notifyHostLost((Active) s, lastConfirmed);
            })
        .thenNoReply();
  }

  private ReplyEffect<Event, State> onHeartbeatCheck(Active state, HeartbeatCheck cmd) {
    if (!state.online()) return Effect().noReply();
    Duration silent = Duration.between(lastHeartbeat, now());
    if (silent.isNegative()) {
      // The clock stepped back past the last heartbeat: the silence counts from now, so a host
      // that stays silent goes offline one timeout later, not an hour later.
      lastHeartbeat = now();
      scheduleHeartbeatCheck(settings.heartbeatTimeout());
      return Effect().noReply();
    }
    if (silent.compareTo(settings.heartbeatTimeout()) < 0) {
      scheduleHeartbeatCheck(settings.heartbeatTimeout().minus(silent));
      return Effect().noReply();
    }
    return goOffline();
  }

  /** Whether the host, online, has been silent for the heartbeat timeout on this node's clock. */
  private boolean lapsed(Active state) {
    return state.online()
        && lastHeartbeat != null
        && Duration.between(lastHeartbeat, now()).compareTo(settings.heartbeatTimeout()) >= 0;
  }

  /**
   * The heartbeat timeout: offline at the last proof of life, every rental on the host told so, the
   * session closed.
   */
  private ReplyEffect<Event, State> goOffline() {
    ActorRef<ToSession> stale = session;
    session = null;
    Instant last = lastConfirmed != null ? lastConfirmed : lastHeartbeat;
    return Effect()
        .persist(new WentOffline(last, now()))
        .thenRun(
            s -> {
              notifyHostLost((Active) s, last);
              if (stale != null)
                stale.tell(
                    new CloseSession(
                        Rejection.HEARTBEAT_TIMEOUT,
                        "no heartbeat for " + settings.heartbeatTimeout().toSeconds() + " s"));
            })
        .thenNoReply();
  }

  /**
   * A workload the agent still runs for a rental that holds no cards here any more is stopped. Its
   * rental's own stop can be lost (handed to a node that was cut off or went down before it reached
   * the agent) while the rental still ends, settles and returns its cards: without this the
   * workload would run on unbilled and the cards it occupies be rented again. Told again on every
   * heartbeat that still lists it; the agent stops a workload once.
   */
  private void stopOrphanWorkloads(Active state, List<String> listed) {
    if (listed == null) return;
    for (String rentalId : listed) {
      if (!state.reservations().containsKey(rentalId))
        session.tell(new StopWorkloadOnAgent(rentalId, false));
    }
  }

  private void scheduleHeartbeatCheck(Duration delay) {
    timers.startSingleTimer(HeartbeatCheck.INSTANCE, HeartbeatCheck.INSTANCE, delay);
  }

  // ---- verification

  private ReplyEffect<Event, State> onVerifyReport(Active state, VerifyReport cmd) {
    if (!cmd.session().equals(session)) {
      return Effect()
          .reply(
              cmd.replyTo(),
              reply(Rejection.REPLACED, "this session is no longer the host's live session"));
    }
    byte[] canonical = cmd.canonicalReport().getBytes(StandardCharsets.UTF_8);
    boolean signatureValid =
        Ed25519.verify(state.enrollment().publicKey(), canonical, cmd.signature());
    Verification.Outcome outcome =
        Verification.verify(cmd.report(), signatureValid, settings.catalog(), settings.policy());
    String hash = sha256(cmd.canonicalReport()) + (signatureValid ? ":signed" : ":unsigned");
    Standing standing = state.standing();
    // A duplicate delivery is answered as before; a check again is always judged (and recorded).
    if (hash.equals(standing.reportHash())
        && standing.checkRequestedAt() == null
        && standing.outcome() != null
        && standing.outcome().passed() == outcome.passed()) {
      return Effect()
          .reply(cmd.replyTo(), StatusReply.success(standing.outcome())); // a duplicate delivery
    }
    if (outcome.passed()) {
      return Effect()
          .persist(new ReportVerified(outcome, hash, now()))
          .thenReply(cmd.replyTo(), s -> StatusReply.success(outcome));
    }
    boolean evict = state.status() == Status.VERIFIED;
    return Effect()
        .persist(new ReportRejected(outcome, hash, evict, now()))
        .thenRun(
            s -> {
              if (evict) notifyHostLost((Active) s, lastHeartbeatOr(state));
            })
        .thenReply(cmd.replyTo(), s -> StatusReply.success(outcome));
  }

  // ---- check again

  /**
   * How long a check again waits for its report before another request is sent to the agent (the
   * agent's measurement takes well under this): within it, a second request is a no-op.
   */
  static final Duration REQUEST_VERIFICATION_WINDOW = Duration.ofSeconds(60);

  private ReplyEffect<Event, State> onRequestVerification(Active state, RequestVerification cmd) {
    if (!state.ownedBy(cmd.ownerId()))
      return Effect().reply(cmd.replyTo(), reply(Rejection.NOT_FOUND, "no such host"));
    if (state.status() == Status.EVICTED)
      return Effect()
          .reply(
              cmd.replyTo(),
              reply(
                  Rejection.HOST_NOT_AVAILABLE,
                  "the host is evicted; an operator reinstates it (its next report is judged then)"));
    if (session == null || !state.online())
      return Effect()
          .reply(
              cmd.replyTo(),
              reply(
                  Rejection.HOST_OFFLINE,
                  "the host's agent is not connected; start it, and it measures when it connects"));
    Instant pending = state.standing().checkRequestedAt();
    if (pending != null && now().isBefore(pending.plus(REQUEST_VERIFICATION_WINDOW)))
      return Effect().reply(cmd.replyTo(), StatusReply.success(view(state)));
    ActorRef<ToSession> live = session;
    return Effect()
        .persist(new VerificationRequested(now()))
        .thenRun(s -> live.tell(new MeasureAgainOnAgent("requested by the provider")))
        .thenReply(cmd.replyTo(), s -> StatusReply.success(view((Active) s)));
  }

  // ---- provider and operator controls

  private ReplyEffect<Event, State> onUpdateListing(Active state, UpdateListing cmd) {
    if (!state.ownedBy(cmd.ownerId()))
      return Effect().reply(cmd.replyTo(), reply(Rejection.NOT_FOUND, "no such host"));
    String problem = cmd.listing().problem();
    if (problem != null)
      return Effect().reply(cmd.replyTo(), reply(Rejection.INVALID_LISTING, problem));
    if (cmd.listing().equals(state.listing()))
      return Effect().reply(cmd.replyTo(), StatusReply.success(view(state)));
    return Effect()
        .persist(new ListingUpdated(cmd.listing(), now()))
        .thenReply(cmd.replyTo(), s -> StatusReply.success(view((Active) s)));
  }

  private ReplyEffect<Event, State> onDrain(Active state, Drain cmd) {
    if (!state.ownedBy(cmd.ownerId()))
      return Effect().reply(cmd.replyTo(), reply(Rejection.NOT_FOUND, "no such host"));
    if (state.draining()) return Effect().reply(cmd.replyTo(), StatusReply.success(view(state)));
    return Effect()
        .persist(new DrainStarted(now()))
        .thenReply(cmd.replyTo(), s -> StatusReply.success(view((Active) s)));
  }

  private ReplyEffect<Event, State> onRemove(Active state, Remove cmd) {
    if (!state.ownedBy(cmd.ownerId()))
      return Effect().reply(cmd.replyTo(), reply(Rejection.NOT_FOUND, "no such host"));
    if (!state.reservations().isEmpty()) {
      return Effect()
          .reply(
              cmd.replyTo(),
              reply(
                  Rejection.HOST_BUSY,
                  "rentals are running on this host; drain it and wait for them to end"));
    }
    HostView last = view(state);
    ActorRef<ToSession> live = session;
    session = null;
    return Effect()
        .persist(new Removed(now()))
        .thenRun(
            s -> {
              if (live != null)
                live.tell(
                    new CloseSession(Rejection.HOST_REMOVED, "the provider removed this host"));
              timers.cancel(HeartbeatCheck.INSTANCE);
            })
        .thenReply(
            cmd.replyTo(),
            s ->
                StatusReply.success(
                    new HostView(
                        last.hostId(),
                        last.ownerId(),
                        last.region(),
                        last.label(),
                        "removed",
                        false,
                        false,
                        last.draining(),
                        last.simulated(),
                        last.gpu(),
                        last.cards(),
                        last.listing(),
                        last.checks(),
                        last.lastHeartbeatAt(),
                        last.registeredAt(),
                        last.evictionReason())));
  }

  private ReplyEffect<Event, State> onEvict(Active state, Evict cmd) {
    if (state.status() == Status.EVICTED)
      return Effect().reply(cmd.replyTo(), StatusReply.success(view(state)));
    String reason =
        cmd.reason() == null || cmd.reason().isBlank() ? "evicted by an operator" : cmd.reason();
    return Effect()
        .persist(new Evicted(reason, now()))
        .thenRun(s -> notifyHostLost((Active) s, lastHeartbeatOr(state)))
        .thenReply(cmd.replyTo(), s -> StatusReply.success(view((Active) s)));
  }

  private ReplyEffect<Event, State> onReinstate(Active state, Reinstate cmd) {
    if (state.status() != Status.EVICTED)
      return Effect().reply(cmd.replyTo(), StatusReply.success(view(state)));
    return Effect()
        .persist(new Reinstated(now()))
        .thenReply(cmd.replyTo(), s -> StatusReply.success(view((Active) s)));
  }

  private ReplyEffect<Event, State> onGet(Active state, Get cmd) {
    if (cmd.ownerId() != null && !state.ownedBy(cmd.ownerId())) {
      return Effect().reply(cmd.replyTo(), reply(Rejection.NOT_FOUND, "no such host"));
    }
    return Effect().reply(cmd.replyTo(), StatusReply.success(view(state)));
  }

  private ReplyEffect<Event, State> onGetInvitation(Invitation state, Get cmd) {
    if (cmd.ownerId() != null && !state.ownerId().equals(cmd.ownerId())) {
      return Effect().reply(cmd.replyTo(), reply(Rejection.NOT_FOUND, "no such host"));
    }
    return Effect()
        .reply(
            cmd.replyTo(),
            StatusReply.success(
                new HostView(
                    hostId,
                    state.ownerId(),
                    state.region(),
                    state.label(),
                    "invited",
                    false,
                    false,
                    false,
                    false,
                    null,
                    List.of(),
                    Listing.unlisted(),
                    List.of(),
                    null,
                    null,
                    null)));
  }

  // ---- cards: the host is the only authority, so a card is never given twice

  /** What a proposal comes to: the reservation its rental holds already, a refusal, or cards. */
  private sealed interface Judged permits Holds, Refused, Reserves {}

  private record Holds(Held held) implements Judged {}

  private record Refused(StatusReply<Reservation> reply) implements Judged {}

  private record Reserves(CardsReserved event) implements Judged {}

  private Judged judge(Active state, ReserveCards cmd, Instant at) {
    Held existing = state.reservations().get(cmd.rentalId());
    if (existing != null) return new Holds(existing);
    // A late or duplicated proposal for a rental whose cards went back already: that rental has
    // ended or went elsewhere, and a reservation now would never be released.
    if (state.inventory().wasReleased(cmd.rentalId()))
      return new Refused(
          reply(
              Rejection.HOST_NOT_AVAILABLE,
              "the cards of rental " + cmd.rentalId() + " on this host were released"));
    if (cmd.renterId() != null && state.ownedBy(cmd.renterId()))
      return new Refused(reply(Rejection.OWN_HOST, "a host is never rented to its owner"));
    if (!state.onMarket())
      return new Refused(reply(Rejection.HOST_NOT_AVAILABLE, "the host is not on the market"));
    if (!state.listing().availableAt(at))
      return new Refused(reply(Rejection.HOST_NOT_AVAILABLE, "outside the host's availability"));
    String cannotRun = state.cannotRun(cmd.needs());
    if (cannotRun != null) return new Refused(reply(Rejection.HOST_NOT_AVAILABLE, cannotRun));
    Long floor = state.listing().floorFor(cmd.tier());
    if (floor == null)
      return new Refused(
          reply(Rejection.HOST_NOT_AVAILABLE, "the host does not offer " + cmd.tier().wire()));
    if (floor > cmd.maxPricePerGpuHour())
      return new Refused(
          reply(Rejection.PRICE_ABOVE_CEILING, "the host's floor is above the ceiling"));
    if (cmd.gpu() == null || !cmd.gpu().equals(state.inventory().gpu()))
      return new Refused(reply(Rejection.INSUFFICIENT_CARDS, "the host has no " + cmd.gpu()));
    List<Integer> free = state.freeCards();
    if (cmd.count() < 1 || free.size() < cmd.count())
      return new Refused(
          reply(
              Rejection.INSUFFICIENT_CARDS,
              free.size() + " free cards, " + cmd.count() + " asked"));
    List<Integer> cards = List.copyOf(free.subList(0, cmd.count()));
    Instant expiresAt =
        cmd.claimWithin() == null || cmd.claimWithin().isNegative()
            ? null
            : at.plus(cmd.claimWithin());
    return new Reserves(new CardsReserved(cmd.rentalId(), cards, floor, cmd.tier(), at, expiresAt));
  }

  private ReplyEffect<Event, State> onReserve(Active state, ReserveCards cmd) {
    Instant at = now();
    Judged judged = judge(state, cmd, at);
    if (judged instanceof Holds holds)
      return Effect()
          .reply(
              cmd.replyTo(), StatusReply.success(reservation(state, cmd.rentalId(), holds.held())));
    if (judged instanceof Refused refused) return Effect().reply(cmd.replyTo(), refused.reply());
    return Effect()
        .persist(((Reserves) judged).event())
        .thenRun(this::reservationsChanged)
        .thenReply(
            cmd.replyTo(),
            s ->
                StatusReply.success(
                    reservation(
                        (Active) s,
                        cmd.rentalId(),
                        ((Active) s).reservations().get(cmd.rentalId()),
                        at)));
  }

  /**
   * Each proposal judged on the cards those before it left ({@link Active#reserving}, the event
   * handler's own step), then every reservation written in one go and answered after the write.
   */
  private ReplyEffect<Event, State> onReserveBatch(Active state, ReserveCardsBatch cmd) {
    Instant at = now();
    Active after = state;
    List<Judged> judged = new ArrayList<>(cmd.proposals().size());
    List<Event> events = new ArrayList<>();
    for (ReserveCards proposal : cmd.proposals()) {
      Judged j = judge(after, proposal, at);
      if (j instanceof Reserves r) {
        events.add(r.event());
        after = after.reserving(r.event());
      }
      judged.add(j);
    }
    if (events.isEmpty())
      return Effect().reply(cmd.replyTo(), StatusReply.success(answers(state, cmd, judged, at)));
    return Effect()
        .persist(events)
        .thenRun(this::reservationsChanged)
        .thenReply(cmd.replyTo(), s -> StatusReply.success(answers((Active) s, cmd, judged, at)));
  }

  private Reservations answers(
      Active state, ReserveCardsBatch cmd, List<Judged> judged, Instant reservedAt) {
    List<ReservationAnswer> answers = new ArrayList<>(judged.size());
    for (int i = 0; i < judged.size(); i++) {
      String rentalId = cmd.proposals().get(i).rentalId();
      Judged j = judged.get(i);
      answers.add(
          j instanceof Refused refused
              ? new ReservationAnswer(rentalId, null, refused.reply().getError().getMessage())
              : new ReservationAnswer(
                  rentalId,
                  reservation(
                      state,
                      rentalId,
                      state.reservations().get(rentalId),
                      j instanceof Reserves ? reservedAt : null),
                  null));
    }
    return new Reservations(answers);
  }

  private void reservationsChanged(State state) {
    checkReservationsLater();
    expireLater((Active) state);
  }

  private ReplyEffect<Event, State> onConfirm(Active state, ConfirmCards cmd) {
    Held held = state.reservations().get(cmd.rentalId());
    if (held == null)
      return Effect()
          .reply(cmd.replyTo(), reply(Rejection.NOT_FOUND, "no reservation for " + cmd.rentalId()));
    boolean learnsListedFrom =
        held.listedFrom() == null && cmd.listedFrom() != null && cmd.startedAt() != null;
    if (held.confirmed() && !learnsListedFrom)
      return Effect()
          .reply(cmd.replyTo(), StatusReply.success(reservation(state, cmd.rentalId(), held)));
    return Effect()
        .persist(new CardsRented(cmd.rentalId(), now(), cmd.listedFrom(), cmd.startedAt()))
        .thenReply(
            cmd.replyTo(),
            s ->
                StatusReply.success(
                    reservation(
                        (Active) s,
                        cmd.rentalId(),
                        ((Active) s).reservations().get(cmd.rentalId()))));
  }

  /**
   * Releases the rental's cards and remembers that it did. A release that finds no reservation is
   * remembered too (with no cards): the proposal it undoes may still be on its way.
   */
  private ReplyEffect<Event, State> onRelease(Active state, ReleaseCards cmd) {
    Held held = state.reservations().get(cmd.rentalId());
    if (held == null && state.inventory().wasReleased(cmd.rentalId()))
      return Effect().reply(cmd.replyTo(), StatusReply.ack());
    if (held != null && cmd.undoesProposal()) {
      // Finding J: a proposal answers with the reservation the rental already holds, so the undo of
      // a timed-out one cannot tell whose this is. A confirmed one is the rental's; an unconfirmed
      // one is checked with the rental now (it releases it if the rental does not want it).
      if (!held.confirmed()) {
        settings.rentals().checkReservation(cmd.rentalId(), hostId, context.getSelf().narrow());
        checkReservationsLater();
      }
      return Effect().reply(cmd.replyTo(), StatusReply.ack());
    }
    List<Integer> cards = held == null ? List.of() : held.cards();
    boolean ran = held != null && held.confirmed();
    return Effect()
        .persist(new CardsReleased(cmd.rentalId(), cards, now(), ran, ran && cmd.hostLost()))
        .thenReply(cmd.replyTo(), s -> StatusReply.ack());
  }

  /** Returns the cards of pending reservations nobody claimed in time, each exactly once. */
  private ReplyEffect<Event, State> onExpireReservations(Active state, ExpireReservations cmd) {
    Instant now = now();
    List<Event> expired = new ArrayList<>();
    for (String rentalId : state.inventory().expiredAt(now))
      expired.add(new CardsExpired(rentalId, state.reservations().get(rentalId).cards(), now));
    if (expired.isEmpty()) {
      expireLater(state);
      return Effect().noReply();
    }
    return Effect().persist(expired).thenRun(s -> expireLater((Active) s)).thenNoReply();
  }

  /** Wakes the host when its earliest unclaimed reservation is due to expire (none: no timer). */
  private void expireLater(Active state) {
    Instant next = state.inventory().nextExpiry();
    if (next == null) {
      timers.cancel(ExpireReservations.INSTANCE);
      return;
    }
    // Looked at again at least every second: a clock stepped forward is seen within a second.
    Duration in = Duration.between(now(), next);
    if (in.compareTo(EXPIRY_LOOK_EVERY) > 0) in = EXPIRY_LOOK_EVERY;
    timers.startSingleTimer(
        ExpireReservations.INSTANCE,
        ExpireReservations.INSTANCE,
        in.isNegative() ? Duration.ZERO : in);
  }

  private void checkReservationsLater() {
    checkReservationsLater(CHECK_RESERVATIONS_EVERY);
  }

  /** Checks unconfirmed reservations every minute, the first time after {@code first}. */
  private void checkReservationsLater(Duration first) {
    if (!timers.isTimerActive(ReservationCheck.INSTANCE))
      timers.startTimerWithFixedDelay(
          ReservationCheck.INSTANCE, ReservationCheck.INSTANCE, first, CHECK_RESERVATIONS_EVERY);
  }

  /** Asks the rental of every unconfirmed reservation whether it still wants it. */
  private ReplyEffect<Event, State> onReservationCheck(Active state, ReservationCheck cmd) {
    List<String> unconfirmed = state.inventory().unconfirmed();
    if (unconfirmed.isEmpty()) {
      timers.cancel(ReservationCheck.INSTANCE);
      return Effect().noReply();
    }
    ActorRef<ReservationWanted> self = context.getSelf().narrow();
    for (String rentalId : unconfirmed) settings.rentals().checkReservation(rentalId, hostId, self);
    return Effect().noReply();
  }

  /**
   * A rental that will never use its reservation gets its cards released; one that runs here
   * confirms it. A rental still waiting for its match keeps it.
   */
  private ReplyEffect<Event, State> onReservationWanted(Active state, ReservationWanted answer) {
    Held held = state.reservations().get(answer.rentalId());
    if (held == null || held.confirmed()) return Effect().noReply();
    if (!answer.wanted())
      return Effect()
          .persist(new CardsReleased(answer.rentalId(), held.cards(), now()))
          .thenNoReply();
    if (answer.running())
      return Effect()
          .persist(
              new CardsRented(answer.rentalId(), now(), answer.listedFrom(), answer.startedAt()))
          .thenNoReply();
    return Effect().noReply();
  }

  private ReplyEffect<Event, State> onStartWorkload(Active state, StartWorkload cmd) {
    Held held = state.reservations().get(cmd.rentalId());
    if (held == null) {
      // A pending reservation that expired before this claim: its cards may be another's now.
      if (state.inventory().wasReleased(cmd.rentalId()))
        return Effect()
            .reply(
                cmd.replyTo(),
                reply(
                    Rejection.RESERVATION_EXPIRED,
                    "the cards of rental " + cmd.rentalId() + " on this host went back"));
      return Effect()
          .reply(cmd.replyTo(), reply(Rejection.NOT_FOUND, "no reservation for " + cmd.rentalId()));
    }
    // The first start claims a pending reservation (it no longer expires), whether or not the agent
    // can take it now: the rental asks again until it can.
    if (state.inventory().isUnclaimed(cmd.rentalId()))
      return Effect()
          .persist(new CardsClaimed(cmd.rentalId(), now()))
          .thenRun(
              s -> {
                expireLater((Active) s);
                checkReservationsLater();
                context.getSelf().tell(cmd);
              })
          .thenNoReply();
    if (session == null || !state.online())
      return Effect()
          .reply(
              cmd.replyTo(),
              reply(Rejection.HOST_NOT_AVAILABLE, "the host has no live agent session"));
    session.tell(
        new RunWorkload(
            cmd.rentalId(),
            held.cards(),
            cmd.image(),
            cmd.command(),
            cmd.sshPublicKey(),
            cmd.network(),
            cmd.restore()));
    return Effect().reply(cmd.replyTo(), StatusReply.ack());
  }

  private ReplyEffect<Event, State> onStopWorkload(Active state, StopWorkload cmd) {
    if (session != null) session.tell(new StopWorkloadOnAgent(cmd.rentalId(), cmd.keepWorkspace()));
    return Effect().noReply();
  }

  /** Reminders repeat while the snapshot uploads, so one lost while offline is not missed. */
  private ReplyEffect<Event, State> onUploadSnapshot(Active state, UploadSnapshot cmd) {
    if (session != null)
      session.tell(new UploadSnapshotOnAgent(cmd.rentalId(), cmd.snapshotId(), cmd.haveChunks()));
    return Effect().noReply();
  }

  private ReplyEffect<Event, State> onReclaim(Active state, Reclaim cmd) {
    if (!state.ownedBy(cmd.ownerId()))
      return Effect().reply(cmd.replyTo(), reply(Rejection.NOT_FOUND, "no such host"));
    if (cmd.cards() == null || cmd.cards().isEmpty())
      return Effect()
          .reply(cmd.replyTo(), reply(Rejection.INVALID_CARDS, "name the cards to reclaim"));
    Instant deadline = now().plusSeconds(state.listing().spotNoticeSeconds());
    List<String> preempted = new ArrayList<>();
    for (Map.Entry<String, Held> e : state.reservations().entrySet()) {
      boolean touches = e.getValue().cards().stream().anyMatch(cmd.cards()::contains);
      if (!touches) continue;
      if (e.getValue().tier() != Listing.Tier.SPOT) {
        return Effect()
            .reply(
                cmd.replyTo(),
                reply(
                    Rejection.NOT_RECLAIMABLE,
                    "card of an on-demand rental: on-demand cards cannot be taken back"));
      }
      preempted.add(e.getKey());
    }
    for (String rentalId : preempted) {
      settings.rentals().preempt(rentalId, hostId, deadline);
      if (session != null) session.tell(new PreemptWorkload(rentalId, deadline));
    }
    return Effect().reply(cmd.replyTo(), StatusReply.success(view(state)));
  }

  private Instant lastHeartbeatOr(Active state) {
    Instant seen = lastHeartbeatSeen(state);
    return seen != null ? seen : now();
  }

  /**
   * Spot rentals get their notice when the host's availability window will close within the
   * listing's spot notice: they end {@code preempted} when it closes. Checked on every heartbeat
   * (every few seconds).
   */
  private void preemptBeforeAvailabilityEnds(Active state) {
    if (state.listing().availability().isEmpty() || state.reservations().isEmpty()) return;
    Duration notice = Duration.ofSeconds(state.listing().spotNoticeSeconds());
    Instant now = now();
    Instant ends = state.listing().availabilityEnds(now, notice);
    if (ends == null) return;
    // A window that closed before any notice went out (the clock stepped past its end, the host
    // was away across it) still gives the full notice, from now: never a deadline already due.
    Instant deadline = ends.isAfter(now) ? ends : now.plus(notice);
    noticeGiven.retainAll(state.reservations().keySet());
    noticeGivenRunning.retainAll(state.reservations().keySet());
    state
        .reservations()
        .forEach(
            (rentalId, held) -> {
              if (held.tier() != Listing.Tier.SPOT) return;
              // A rental still being created can miss a notice (it is a message, not a reply): it
              // is told again with every
              // heartbeat until it confirms its cards, and once more when it has; it ignores a
              // deadline it already has.
              if (!held.confirmed() || noticeGivenRunning.add(rentalId))
                settings.rentals().preempt(rentalId, hostId, deadline);
              if (session != null && noticeGiven.add(rentalId))
                session.tell(new PreemptWorkload(rentalId, deadline));
            });
  }

  /**
   * Tells every rental holding cards here that the host is lost: each is billed to the last
   * heartbeat, or to the last one that listed its workload if that is earlier (it stopped before).
   */
  private void notifyHostLost(Active state, Instant lastHeartbeatAt) {
    Instant lostAt = now();
    for (String rentalId : state.reservations().keySet()) {
      Instant listed = listings.lastListed(state, rentalId);
      Instant last =
          listed != null && lastHeartbeatAt != null && listed.isBefore(lastHeartbeatAt)
              ? listed
              : lastHeartbeatAt;
      settings.rentals().hostLost(rentalId, hostId, last, lostAt);
    }
  }

  private Reservation reservation(Active state, String rentalId, Held held) {
    return reservation(state, rentalId, held, null);
  }

  private Reservation reservation(Active state, String rentalId, Held held, Instant reservedAt) {
    return new Reservation(
        hostId,
        state.enrollment().ownerId(),
        rentalId,
        held.cards(),
        held.price(),
        held.tier(),
        held.confirmed(),
        state.standing().simulated(),
        state.enrollment().region(),
        reservedAt,
        state.runtimeName());
  }

  // ---------------------------------------------------------------------------------------------

  // Events → state (no side effects). Pure, so built once and shared by every host.

  private static final EventHandler<State, Event> EVENTS = events();

  @Override
  public EventHandler<State, Event> eventHandler() {
    return EVENTS;
  }

  private static EventHandler<State, Event> events() {
    EventHandlerBuilder<State, Event> builder = EventHandlerBuilder.builder();
    builder
        .forStateType(Empty.class)
        .onEvent(
            Invited.class,
            (s, e) ->
                new Invitation(e.ownerId(), e.region(), e.label(), e.tokenHash(), e.expiresAt()));
    builder.forStateType(Invitation.class).onEvent(Registered.class, Active::registered);
    builder
        .forStateType(Active.class)
        .onEvent(ReportVerified.class, Active::withReportVerified)
        .onEvent(
            ReportRejected.class,
            (s, e) ->
                s.withStanding(
                    s.standing().rejected(e.outcome(), e.reportHash(), e.evict(), e.at())))
        .onEvent(WentOnline.class, (s, e) -> s.withOnline(e.at()))
        .onEvent(
            VerificationRequested.class,
            (s, e) -> s.withStanding(s.standing().checkRequested(e.at())))
        .onEvent(
            CredentialReissued.class,
            (s, e) -> s.withEnrollment(s.enrollment().withCredentialHash(e.credentialHash())))
        .onEvent(
            SshHostKeyChanged.class,
            (s, e) -> s.withEnrollment(s.enrollment().withSshHostKey(e.sshHostKey())))
        .onEvent(
            WentOffline.class, (s, e) -> s.withPresence(new Presence(false, e.lastHeartbeatAt())))
        .onEvent(HeartbeatRecorded.class, (s, e) -> s.withPresence(new Presence(true, e.at())))
        .onEvent(WorkloadUnlisted.class, (s, e) -> s.withInventory(s.inventory().unlisting(e)))
        .onEvent(ListingUpdated.class, (s, e) -> s.withListing(e.listing()))
        .onEvent(DrainStarted.class, (s, e) -> s.withDraining())
        .onEvent(Evicted.class, (s, e) -> s.withStanding(s.standing().evicted(e.reason())))
        .onEvent(Reinstated.class, (s, e) -> s.withStanding(s.standing().reinstated()))
        .onEvent(Removed.class, (s, e) -> s.enrollment().removed())
        .onEvent(CardsReserved.class, Active::reserving)
        .onEvent(CardsRented.class, (s, e) -> s.withInventory(s.inventory().renting(e)))
        .onEvent(
            CardsReleased.class,
            (s, e) -> s.withInventory(s.inventory().releasing(e.rentalId(), e.at())))
        .onEvent(
            CardsClaimed.class, (s, e) -> s.withInventory(s.inventory().claiming(e.rentalId())))
        .onEvent(
            CardsExpired.class,
            (s, e) -> s.withInventory(s.inventory().releasing(e.rentalId(), e.at())));
    return builder.build();
  }

  private HostView view(Active s) {
    Map<Integer, String> cardRental = new HashMap<>();
    Map<Integer, Boolean> cardRented = new HashMap<>();
    s.inventory()
        .reservations()
        .forEach(
            (rental, held) ->
                held.cards()
                    .forEach(
                        c -> {
                          cardRental.put(c, rental);
                          cardRented.put(c, held.confirmed());
                        }));
    List<CardView> cards =
        s.inventory().cards().stream()
            .map(
                c ->
                    new CardView(
                        c.index(),
                        c.uuid(),
                        c.gpu(),
                        !cardRental.containsKey(c.index())
                            ? "free"
                            : (cardRented.get(c.index()) ? "rented" : "reserved"),
                        cardRental.get(c.index())))
            .toList();
    Enrollment enrollment = s.enrollment();
    Standing standing = s.standing();
    return new HostView(
        hostId,
        enrollment.ownerId(),
        enrollment.region(),
        enrollment.label(),
        standing.status().wire(),
        s.online(),
        s.listing().listed(),
        s.draining(),
        standing.simulated(),
        s.inventory().gpu(),
        cards,
        s.listing(),
        standing.outcome() == null ? List.of() : standing.outcome().checks(),
        lastHeartbeatSeen(s),
        enrollment.registeredAt(),
        standing.evictionReason(),
        standing.checkRequestedAt(),
        standing.judgedAt(),
        standing.outcome() == null ? null : standing.outcome().runtime());
  }

  private Instant now() {
    return clock.instant();
  }

  public static long micros(Instant instant) {
    return instant.getEpochSecond() * 1_000_000L + instant.getNano() / 1_000;
  }

  private static <T> StatusReply<T> unauthorized() {
    return reply(Rejection.UNAUTHORIZED, "the token or credential is not valid for this host");
  }

  static String randomHex(int bytes) {
    byte[] b = new byte[bytes];
    RANDOM.nextBytes(b);
    return HexFormat.of().formatHex(b);
  }

  public static String sha256(String text) {
    try {
      return HexFormat.of()
          .formatHex(
              MessageDigest.getInstance("SHA-256").digest(text.getBytes(StandardCharsets.UTF_8)));
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }

  private static boolean constantTimeEquals(String a, String b) {
    if (a == null || b == null) return false;
    return MessageDigest.isEqual(
        a.getBytes(StandardCharsets.UTF_8), b.getBytes(StandardCharsets.UTF_8));
  }
}
