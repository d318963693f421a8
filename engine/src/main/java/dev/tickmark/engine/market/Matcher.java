package dev.tickmark.engine.market;

import com.fasterxml.jackson.annotation.JsonCreator;
import com.typesafe.config.Config;
import dev.tickmark.engine.CborSerializable;
import dev.tickmark.engine.host.Host;
import dev.tickmark.engine.host.Listing;
import dev.tickmark.engine.metrics.EngineMetrics;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletionStage;
import java.util.function.Function;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.Behavior;
import org.apache.pekko.actor.typed.RecipientRef;
import org.apache.pekko.actor.typed.javadsl.ActorContext;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.cluster.sharding.typed.javadsl.ClusterSharding;
import org.apache.pekko.cluster.sharding.typed.javadsl.Entity;
import org.apache.pekko.cluster.sharding.typed.javadsl.EntityTypeKey;
import org.apache.pekko.pattern.StatusReply;

/**
 * Pairs rental requests with hosts, one sharded matcher per GPU model, so no single actor sees the
 * whole market. It keeps no state worth persisting: candidates come from the host read side, and
 * each proposal goes to the {@link Host} entity, the one authority on its cards, which confirms or
 * refuses. A refusal (the read side lags, or a concurrent match took the cards) moves on to the
 * next candidate. Requests live in the rental entities, which resubmit if a matcher is lost.
 *
 * <p>Several requests are matched at once ({@link Settings#maxInFlight}). The matcher remembers the
 * cards it has proposed and not heard back about, and those it was given a moment ago that the read
 * side may not show yet, and steers the next request to hosts that still look free; that is only a
 * preference (the host decides), so a request is never turned away on a guess. A request whose
 * rental stopped waiting ({@link Match#deadline}) is dropped unanswered by a proposal, so overload
 * does not reserve cards for rentals that already ended {@code no_capacity}.
 *
 * <p>A candidate query that fails (PostgreSQL unreachable, the read side broken) says nothing about
 * capacity: the request is answered {@link Unavailable}, never {@link NoMatch}, and the rental asks
 * again.
 */
public final class Matcher {
  public static final EntityTypeKey<Command> ENTITY_KEY =
      EntityTypeKey.create(Command.class, "Matcher");

  /** A host that may have the cards, as the read side sees it. */
  public record Candidate(String hostId, long floorPricePerGpuHour, int freeCards) {}

  /** Where candidates come from (the host read side), kept out of the engine's knowledge of SQL. */
  @FunctionalInterface
  public interface Candidates {
    /**
     * Hosts that may have the cards, none of them owned by {@code renterId} (when not null). {@code
     * heldByMatcher}: cards this matcher has proposed or given on a host (host id to cards) that
     * the read side may not show yet. Hosts that still look free after those come first in the
     * answer, looked for past the cheapest few; the others only when none does.
     */
    CompletionStage<List<Candidate>> find(
        String gpu,
        String region,
        Listing.Tier tier,
        long maxPricePerGpuHour,
        int count,
        String renterId,
        Map<String, Integer> heldByMatcher);
  }

  /**
   * {@code maxInFlight}: requests matched at once; {@code maxQueued}: requests waiting beyond those
   * before new ones are turned away; {@code readSideLag}: how long cards given out are still
   * counted as taken locally, covering the host projection's lag.
   */
  public record Settings(
      Duration askTimeout, int maxInFlight, int maxQueued, Duration readSideLag) {
    public static Settings defaults(Duration askTimeout) {
      return new Settings(askTimeout, 16, 10_000, Duration.ofSeconds(2));
    }

    /** From the node's config: {@code tickmark.matcher.*} and {@code tickmark.http.ask-timeout}. */
    public static Settings fromConfig(Config config) {
      Config matcher = config.getConfig("tickmark.matcher");
      return new Settings(
          config.getDuration("tickmark.http.ask-timeout"),
          matcher.getInt("max-in-flight"),
          matcher.getInt("max-queued"),
          matcher.getDuration("read-side-lag"));
    }
  }

  public interface Command extends CborSerializable {}

  /**
   * {@code renterId}: whose rental it is, never matched to a host it owns (null: a request from a
   * node that predates it); {@code deadline}: when the rental stops waiting for a match (null: no
   * deadline); {@code claimWithin}: the reservation is pending, and goes back unless the rental
   * claims it within this long ({@link Host.ReserveCards#claimWithin}; null: not pending).
   */
  public record Match(
      String rentalId,
      String renterId,
      String gpu,
      int count,
      Listing.Tier tier,
      String region,
      long maxPricePerGpuHour,
      Instant deadline,
      Duration claimWithin,
      ActorRef<Result> replyTo)
      implements Command {
    @JsonCreator
    public Match {}

    public Match(
        String rentalId,
        String renterId,
        String gpu,
        int count,
        Listing.Tier tier,
        String region,
        long maxPricePerGpuHour,
        Instant deadline,
        ActorRef<Result> replyTo) {
      this(
          rentalId,
          renterId,
          gpu,
          count,
          tier,
          region,
          maxPricePerGpuHour,
          deadline,
          null,
          replyTo);
    }

    /** A request that does not say whose rental it is (tests of matching alone). */
    public Match(
        String rentalId,
        String gpu,
        int count,
        Listing.Tier tier,
        String region,
        long maxPricePerGpuHour,
        Instant deadline,
        ActorRef<Result> replyTo) {
      this(rentalId, null, gpu, count, tier, region, maxPricePerGpuHour, deadline, null, replyTo);
    }
  }

  public sealed interface Result extends CborSerializable permits Matched, NoMatch, Unavailable {}

  public record Matched(String rentalId, Host.Reservation reservation) implements Result {}

  /**
   * The read side answered, and no candidate had the cards (or each refused): a real "no capacity
   * now".
   */
  public record NoMatch(String rentalId, String reason) implements Result {}

  /** The candidates could not be read: no answer about capacity at all. */
  public record Unavailable(String rentalId, String reason) implements Result {}

  private record CandidatesFound(Request request, List<Candidate> candidates) implements Command {}

  private record CandidatesFailed(Request request, Throwable failure) implements Command {}

  private record Proposed(
      Request request, Candidate to, Host.Reservation reservation, Throwable failure)
      implements Command {}

  /** A request being matched: what was asked, when it arrived, and the candidates not yet tried. */
  private static final class Request {
    final Match match;
    final long arrivedNanos;
    List<Candidate> remaining = List.of();

    Request(Match match, long arrivedNanos) {
      this.match = match;
      this.arrivedNanos = arrivedNanos;
    }
  }

  public static void init(
      ActorSystem<?> system,
      Candidates candidates,
      Function<String, RecipientRef<Host.Command>> hosts,
      Settings settings,
      Clock clock) {
    ClusterSharding.get(system)
        .init(Entity.of(ENTITY_KEY, ctx -> create(candidates, hosts, settings, clock)));
  }

  public static Behavior<Command> create(
      Candidates candidates,
      Function<String, RecipientRef<Host.Command>> hosts,
      Duration askTimeout) {
    return create(candidates, hosts, Settings.defaults(askTimeout), Clock.systemUTC());
  }

  public static Behavior<Command> create(
      Candidates candidates,
      Function<String, RecipientRef<Host.Command>> hosts,
      Settings settings,
      Clock clock) {
    return Behaviors.setup(ctx -> new Matcher(ctx, candidates, hosts, settings, clock).behavior());
  }

  private final ActorContext<Command> context;
  private final Candidates candidates;
  private final Function<String, RecipientRef<Host.Command>> hosts;
  private final Settings settings;
  private final Clock clock;
  private final EngineMetrics metrics;
  private final ArrayDeque<Request> queue = new ArrayDeque<>();
  private final Set<String> active =
      new HashSet<>(); // rentals queued or in flight: a resubmission is not matched twice
  private final Map<String, Integer> proposed =
      new HashMap<>(); // host -> cards proposed, no answer yet
  private final Map<String, Taken> taken =
      new HashMap<>(); // host -> cards given recently, maybe not on the read side yet
  private int inFlight;

  private static final class Taken {
    int cards;
    long untilNanos;
  }

  private Matcher(
      ActorContext<Command> context,
      Candidates candidates,
      Function<String, RecipientRef<Host.Command>> hosts,
      Settings settings,
      Clock clock) {
    this.context = context;
    this.candidates = candidates;
    this.hosts = hosts;
    this.settings = settings;
    this.clock = clock;
    this.metrics = EngineMetrics.get(context.getSystem());
  }

  private Behavior<Command> behavior() {
    return Behaviors.receive(Command.class)
        .onMessage(Match.class, this::onMatch)
        .onMessage(CandidatesFound.class, this::onCandidates)
        .onMessage(CandidatesFailed.class, this::onCandidatesFailed)
        .onMessage(Proposed.class, this::onProposed)
        .build();
  }

  private Behavior<Command> onMatch(Match match) {
    if (!active.add(match.rentalId()))
      return Behaviors.same(); // already being matched; that answer goes to the rental
    if (queue.size() >= settings.maxQueued()) {
      active.remove(match.rentalId());
      match.replyTo().tell(new NoMatch(match.rentalId(), "the matcher is overloaded; retrying"));
      return Behaviors.same();
    }
    queue.add(new Request(match, System.nanoTime()));
    startNext();
    return Behaviors.same();
  }

  private void startNext() {
    while (inFlight < settings.maxInFlight() && !queue.isEmpty()) {
      Request request = queue.poll();
      if (expired(request)) {
        finish(request, new NoMatch(request.match.rentalId(), "the rental stopped waiting"));
        continue;
      }
      inFlight++;
      Match m = request.match;
      context.pipeToSelf(
          candidates.find(
              m.gpu(),
              m.region(),
              m.tier(),
              m.maxPricePerGpuHour(),
              m.count(),
              m.renterId(),
              held()),
          (found, failure) ->
              failure == null
                  ? new CandidatesFound(request, found)
                  : new CandidatesFailed(request, failure));
    }
  }

  /**
   * What this matcher holds beyond the read side, host by host, as an immutable copy: the query
   * runs on another thread. Without it, under load, the read side's cheapest hosts are all taken
   * already (small hosts fill within its lag) and every candidate it offers is refused.
   */
  private Map<String, Integer> held() {
    if (proposed.isEmpty() && taken.isEmpty()) return Map.of();
    long now = System.nanoTime();
    Map<String, Integer> held = new HashMap<>(proposed);
    for (String hostId : List.copyOf(taken.keySet())) {
      int cards = recentlyTaken(hostId, now);
      if (cards > 0) held.merge(hostId, cards, Integer::sum);
    }
    return Map.copyOf(held);
  }

  private boolean expired(Request request) {
    return request.match.deadline() != null && !clock.instant().isBefore(request.match.deadline());
  }

  private Behavior<Command> onCandidates(CandidatesFound found) {
    found.request().remaining = ordered(found.candidates());
    proposeNext(found.request());
    return Behaviors.same();
  }

  /**
   * The read side could not be asked: that says nothing about capacity, so the rental hears {@link
   * Unavailable}.
   */
  private Behavior<Command> onCandidatesFailed(CandidatesFailed failed) {
    context
        .getLog()
        .debug(
            "candidates for {} could not be read: {}",
            failed.request().match.rentalId(),
            failed.failure().toString());
    done(
        failed.request(),
        new Unavailable(
            failed.request().match.rentalId(), "the host read side is unavailable; retrying"));
    return Behaviors.same();
  }

  /**
   * Lowest floor first; ties go to the host with more free cards (it fits more), then by id,
   * deterministically.
   */
  static List<Candidate> ordered(List<Candidate> candidates) {
    List<Candidate> sorted = new ArrayList<>(candidates);
    sorted.sort(
        Comparator.comparingLong(Candidate::floorPricePerGpuHour)
            .thenComparing(Comparator.comparingInt(Candidate::freeCards).reversed())
            .thenComparing(Candidate::hostId));
    return sorted;
  }

  private void proposeNext(Request request) {
    if (request.remaining.isEmpty()) {
      done(request, new NoMatch(request.match.rentalId(), "no host has the capacity now"));
      return;
    }
    if (expired(request)) {
      done(request, new NoMatch(request.match.rentalId(), "the rental stopped waiting"));
      return;
    }
    Candidate next = pick(request);
    Match m = request.match;
    proposed.merge(next.hostId(), m.count(), Integer::sum);
    context.askWithStatus(
        Host.Reservation.class,
        hosts.apply(next.hostId()),
        settings.askTimeout(),
        reply ->
            new Host.ReserveCards(
                m.rentalId(),
                m.renterId(),
                m.gpu(),
                m.count(),
                m.tier(),
                m.maxPricePerGpuHour(),
                m.claimWithin(),
                reply),
        (reservation, failure) -> new Proposed(request, next, reservation, failure));
  }

  /**
   * The first candidate in order that still looks free after what this matcher has proposed or
   * given; else the first.
   */
  private Candidate pick(Request request) {
    List<Candidate> remaining = request.remaining;
    long now = System.nanoTime();
    int chosen = 0;
    for (int i = 0; i < remaining.size(); i++) {
      Candidate c = remaining.get(i);
      if (c.freeCards() - proposed.getOrDefault(c.hostId(), 0) - recentlyTaken(c.hostId(), now)
          >= request.match.count()) {
        chosen = i;
        break;
      }
    }
    Candidate next = remaining.get(chosen);
    List<Candidate> rest = new ArrayList<>(remaining.size() - 1);
    for (int i = 0; i < remaining.size(); i++) if (i != chosen) rest.add(remaining.get(i));
    request.remaining = rest;
    return next;
  }

  private int recentlyTaken(String hostId, long now) {
    Taken t = taken.get(hostId);
    if (t == null) return 0;
    if (now - t.untilNanos > 0) {
      taken.remove(hostId);
      return 0;
    }
    return t.cards;
  }

  private Behavior<Command> onProposed(Proposed p) {
    Request request = p.request();
    String hostId = p.to().hostId();
    int count = request.match.count();
    proposed.computeIfPresent(hostId, (h, n) -> n - count > 0 ? n - count : null);
    if (p.reservation() != null) {
      Taken t = taken.computeIfAbsent(hostId, h -> new Taken());
      t.cards += count;
      t.untilNanos = System.nanoTime() + settings.readSideLag().toNanos();
      done(request, new Matched(request.match.rentalId(), p.reservation()));
      return Behaviors.same();
    }
    if (!(p.failure() instanceof StatusReply.ErrorMessage)) {
      // No answer in time: the host may still reserve. Undo it; it arrives after the proposal, from
      // the same sender.
      hosts
          .apply(hostId)
          .tell(
              Host.ReleaseCards.undoingProposal(
                  request.match.rentalId(), context.getSystem().ignoreRef()));
    }
    proposeNext(request);
    return Behaviors.same();
  }

  private void done(Request request, Result result) {
    inFlight--;
    finish(request, result);
    startNext();
  }

  private void finish(Request request, Result result) {
    active.remove(request.match.rentalId());
    metrics.matchLatency.recordMicros((System.nanoTime() - request.arrivedNanos) / 1_000);
    request.match.replyTo().tell(result);
  }
}
