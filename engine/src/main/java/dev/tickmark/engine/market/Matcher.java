package dev.tickmark.engine.market;

import com.fasterxml.jackson.annotation.JsonCreator;
import com.typesafe.config.Config;
import dev.tickmark.engine.CborSerializable;
import dev.tickmark.engine.Rejection;
import dev.tickmark.engine.host.Host;
import dev.tickmark.engine.host.Listing;
import dev.tickmark.engine.host.WorkloadNeeds;
import dev.tickmark.engine.metrics.EngineMetrics;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collections;
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
 * preference (the host decides), so a request is never turned away on a guess. A host has one
 * proposal of this matcher at a time to answer; those made meanwhile go together once it has
 * ({@link Host.ReserveCardsBatch}), so a burst at the cheapest host waits for a write or two, not
 * one per request. A request whose rental stopped waiting ({@link Match#deadline}) is dropped
 * unanswered by a proposal, so overload does not reserve cards for rentals that already ended
 * {@code no_capacity}.
 *
 * <p>A candidate query that fails (PostgreSQL unreachable, the read side broken) says nothing about
 * capacity: the request is answered {@link Unavailable}, never {@link NoMatch}, and the rental asks
 * again.
 */
public final class Matcher {
  public static final EntityTypeKey<Command> ENTITY_KEY =
      EntityTypeKey.create(Command.class, "Matcher");

  /** Candidate queries for one request at most: a second only after a host had not the cards. */
  static final int MAX_READS = 2;

  /**
   * A host that may have the cards, as the read side sees it; {@code asOf}: the instant of the
   * host's last event the read side shows (null: unknown); {@code reliability}: its record with
   * renters, for ties between equal floors.
   */
  public record Candidate(
      String hostId,
      long floorPricePerGpuHour,
      int freeCards,
      Instant asOf,
      Reliability reliability) {
    public Candidate {
      if (reliability == null) reliability = Reliability.NONE;
    }

    public Candidate(String hostId, long floorPricePerGpuHour, int freeCards, Instant asOf) {
      this(hostId, floorPricePerGpuHour, freeCards, asOf, Reliability.NONE);
    }

    public Candidate(String hostId, long floorPricePerGpuHour, int freeCards) {
      this(hostId, floorPricePerGpuHour, freeCards, null, Reliability.NONE);
    }
  }

  /**
   * Cards this matcher holds on one host: proposed with no answer yet ({@code reservedAt} null), or
   * reserved at {@code reservedAt}.
   */
  public record Holding(int cards, Instant reservedAt) {
    /**
     * {@code reservedAt} is kept to the microsecond, as the read side stores it, so that comparing
     * it with a row's time (for every held host in every candidate query) allocates nothing.
     */
    public Holding {
      if (reservedAt != null) reservedAt = reservedAt.truncatedTo(ChronoUnit.MICROS);
    }

    /** Whether a read side that shows the host as of {@code asOf} does not show these cards yet. */
    boolean beyond(Instant asOf) {
      return reservedAt == null || asOf == null || reservedAt.isAfter(asOf);
    }
  }

  /**
   * What this matcher holds, host by host, as an immutable copy for the candidate query (which runs
   * on another thread).
   */
  public record Holdings(Map<String, List<Holding>> byHost) {
    public static final Holdings NONE = new Holdings(Map.of());

    /** Cards held on {@code hostId} that a read side showing it as of {@code asOf} does not. */
    public int beyond(String hostId, Instant asOf) {
      List<Holding> held = byHost.get(hostId);
      if (held == null) return 0;
      int cards = 0;
      for (Holding h : held) if (h.beyond(asOf)) cards += h.cards();
      return cards;
    }

    /** Hosts with cards held. */
    public int hosts() {
      return byHost.size();
    }
  }

  /** Where candidates come from (the host read side), kept out of the engine's knowledge of SQL. */
  @FunctionalInterface
  public interface Candidates {
    /**
     * Hosts that may have the cards, none of them owned by {@code renterId} (when not null). {@code
     * held}: cards this matcher has proposed or given that the read side may not show yet. The
     * answer is the cheapest hosts that still have the cards after those, read past the held ones;
     * the held ones only when no other is found. {@code needs}: only hosts whose runtime can run
     * the rental (outbound network, a runtime by name).
     */
    CompletionStage<List<Candidate>> find(
        String gpu,
        String region,
        Listing.Tier tier,
        long maxPricePerGpuHour,
        int count,
        String renterId,
        WorkloadNeeds needs,
        Holdings held);
  }

  /**
   * {@code maxInFlight}: requests matched at once; {@code maxQueued}: requests waiting beyond those
   * before new ones are turned away; {@code readSideLag}: how long, at most, cards given out are
   * counted as taken locally until the host read side shows them (it usually does much sooner).
   */
  public record Settings(
      Duration askTimeout, int maxInFlight, int maxQueued, Duration readSideLag) {
    public static Settings defaults(Duration askTimeout) {
      return new Settings(askTimeout, 64, 10_000, Duration.ofSeconds(2));
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
   * claims it within this long ({@link Host.ReserveCards#claimWithin}; null: not pending); {@code
   * network}: the rental asks for outbound network, so only hosts that can give it are candidates
   * (a request from a node that predates it reads as false, and the host then finds out at start);
   * {@code runtime}: the rental asks for this runtime by name (null: any; so reads a request from a
   * node that predates it).
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
      boolean network,
      String runtime,
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
        Duration claimWithin,
        boolean network,
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
          claimWithin,
          network,
          null,
          replyTo);
    }

    /** What the rental needs of its host's runtime. */
    public WorkloadNeeds needs() {
      return new WorkloadNeeds(network, runtime);
    }

    public Match(
        String rentalId,
        String renterId,
        String gpu,
        int count,
        Listing.Tier tier,
        String region,
        long maxPricePerGpuHour,
        Instant deadline,
        Duration claimWithin,
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
          claimWithin,
          false,
          replyTo);
    }

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

  private record ProposedTogether(
      String hostId, List<Proposal> proposals, Host.Reservations answers, Throwable failure)
      implements Command {}

  /** A request proposed to a host, not sent yet or not answered. */
  private record Proposal(Request request, Candidate to) {}

  /** A request being matched: what was asked, when it arrived, and the candidates not yet tried. */
  private static final class Request {
    final Match match;
    final long arrivedNanos;
    List<Candidate> remaining = List.of();
    int reads; // candidate queries made for it
    boolean refusedForCards; // a host it was proposed to since the last read had not the cards

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
  private final Map<String, List<Given>> given =
      new HashMap<>(); // host -> cards given recently, maybe not on the read side yet
  private final Set<String> asking = new HashSet<>(); // hosts with a proposal not answered yet
  private final Map<String, List<Proposal>> waiting =
      new HashMap<>(); // host -> proposals made meanwhile, sent together once it answers
  private int inFlight;

  /** Cards a host gave this matcher, counted at most until {@code untilNanos}. */
  private record Given(Holding holding, long untilNanos) {}

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
        .onMessage(ProposedTogether.class, this::onProposedTogether)
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
      read(request);
    }
  }

  private void read(Request request) {
    request.reads++;
    Match m = request.match;
    context.pipeToSelf(
        candidates.find(
            m.gpu(),
            m.region(),
            m.tier(),
            m.maxPricePerGpuHour(),
            m.count(),
            m.renterId(),
            m.needs(),
            held()),
        (found, failure) ->
            failure == null
                ? new CandidatesFound(request, found)
                : new CandidatesFailed(request, failure));
  }

  /**
   * What this matcher holds, for the candidate query. Without it, under load, the read side's
   * cheapest hosts are all taken already (small hosts fill within its lag) and every candidate it
   * offers is refused.
   */
  private Holdings held() {
    if (proposed.isEmpty() && given.isEmpty()) return Holdings.NONE;
    long now = System.nanoTime();
    Map<String, List<Holding>> held = new HashMap<>(2 * (proposed.size() + given.size()));
    proposed.forEach((hostId, cards) -> held.put(hostId, List.of(new Holding(cards, null))));
    // Walked in place, dropping what is counted long enough as recentlyGiven does: copying the
    // keys first cost an array as long as every host given cards lately, on every read.
    for (var it = given.entrySet().iterator(); it.hasNext(); ) {
      var entry = it.next();
      List<Given> recent = entry.getValue();
      recent.removeIf(g -> now - g.untilNanos() > 0);
      if (recent.isEmpty()) {
        it.remove();
        continue;
      }
      List<Holding> proposedHere = held.getOrDefault(entry.getKey(), List.of());
      List<Holding> all = new ArrayList<>(proposedHere.size() + recent.size());
      all.addAll(proposedHere);
      for (Given g : recent) all.add(g.holding());
      held.put(entry.getKey(), Collections.unmodifiableList(all));
    }
    // Not copied again: nothing changes it after this, and the query sees it through its future.
    return new Holdings(Collections.unmodifiableMap(held));
  }

  private boolean expired(Request request) {
    return request.match.deadline() != null && !clock.instant().isBefore(request.match.deadline());
  }

  private Behavior<Command> onCandidates(CandidatesFound found) {
    forgetShown(found.candidates());
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
   * Lowest floor first; ties go to the more reliable host ({@link Reliability}), then to the one
   * with more free cards (it fits more), then by id, deterministically.
   */
  static List<Candidate> ordered(List<Candidate> candidates) {
    List<Candidate> sorted = new ArrayList<>(candidates);
    sorted.sort(
        Comparator.comparingLong(Candidate::floorPricePerGpuHour)
            .thenComparing(Candidate::reliability, Reliability.MOST_RELIABLE_FIRST)
            .thenComparing(Comparator.comparingInt(Candidate::freeCards).reversed())
            .thenComparing(Candidate::hostId));
    return sorted;
  }

  private void proposeNext(Request request) {
    if (expired(request)) {
      done(request, new NoMatch(request.match.rentalId(), "the rental stopped waiting"));
      return;
    }
    if (request.remaining.isEmpty()) {
      // A host without the cards the read side showed: it was behind. Read once more, past what
      // this matcher now holds, before saying there is no capacity (many requests in flight at
      // small hosts otherwise answer "pending" with cards free further down).
      if (request.refusedForCards && request.reads < MAX_READS) {
        request.refusedForCards = false;
        read(request);
        return;
      }
      done(request, new NoMatch(request.match.rentalId(), "no host has the capacity now"));
      return;
    }
    Candidate next = pick(request);
    proposed.merge(next.hostId(), request.match.count(), Integer::sum);
    if (asking.contains(next.hostId())) {
      waiting
          .computeIfAbsent(next.hostId(), h -> new ArrayList<>())
          .add(new Proposal(request, next));
      return;
    }
    send(next.hostId(), List.of(new Proposal(request, next)));
  }

  /**
   * One proposal at a time to a host: the host writes each reservation before it answers, so a
   * burst of requests for the cheapest host would otherwise wait for one write after another. Those
   * made while it answers go together, judged in order and written at once.
   */
  private void send(String hostId, List<Proposal> proposals) {
    asking.add(hostId);
    if (proposals.size() == 1) {
      Proposal only = proposals.get(0);
      context.askWithStatus(
          Host.Reservation.class,
          hosts.apply(hostId),
          settings.askTimeout(),
          reply -> reserveCards(only.request().match, reply),
          (reservation, failure) -> new Proposed(only.request(), only.to(), reservation, failure));
      return;
    }
    context.askWithStatus(
        Host.Reservations.class,
        hosts.apply(hostId),
        settings.askTimeout(),
        reply ->
            new Host.ReserveCardsBatch(
                proposals.stream().map(p -> reserveCards(p.request().match, null)).toList(), reply),
        (answers, failure) -> new ProposedTogether(hostId, proposals, answers, failure));
  }

  private static Host.ReserveCards reserveCards(
      Match m, ActorRef<StatusReply<Host.Reservation>> replyTo) {
    return new Host.ReserveCards(
        m.rentalId(),
        m.renterId(),
        m.gpu(),
        m.count(),
        m.tier(),
        m.maxPricePerGpuHour(),
        m.claimWithin(),
        m.network(),
        m.runtime(),
        replyTo);
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
      if (c.freeCards()
              - proposed.getOrDefault(c.hostId(), 0)
              - givenBeyond(c.hostId(), c.asOf(), now)
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

  /** The cards given on {@code hostId} still counted, dropping those counted long enough. */
  private List<Given> recentlyGiven(String hostId, long now) {
    List<Given> list = given.get(hostId);
    if (list == null) return List.of();
    list.removeIf(g -> now - g.untilNanos() > 0);
    if (list.isEmpty()) {
      given.remove(hostId);
      return List.of();
    }
    return list;
  }

  /** Cards given on {@code hostId} that a read side showing it as of {@code asOf} does not show. */
  private int givenBeyond(String hostId, Instant asOf, long now) {
    int cards = 0;
    for (Given g : recentlyGiven(hostId, now))
      if (g.holding().beyond(asOf)) cards += g.holding().cards();
    return cards;
  }

  /**
   * Cards the read side shows taken need no counting here: counted twice, they would hide a cheaper
   * host's last free cards from the next request.
   */
  private void forgetShown(List<Candidate> candidates) {
    if (given.isEmpty()) return;
    for (Candidate c : candidates) {
      List<Given> list = given.get(c.hostId());
      if (list == null || c.asOf() == null) continue;
      list.removeIf(g -> !g.holding().beyond(c.asOf()));
      if (list.isEmpty()) given.remove(c.hostId());
    }
  }

  private Behavior<Command> onProposed(Proposed p) {
    answered(p.to().hostId());
    outcome(p.request(), p.to(), p.reservation(), p.failure());
    return Behaviors.same();
  }

  private Behavior<Command> onProposedTogether(ProposedTogether p) {
    answered(p.hostId());
    List<Host.ReservationAnswer> answers = p.answers() == null ? List.of() : p.answers().answers();
    for (int i = 0; i < p.proposals().size(); i++) {
      Proposal proposal = p.proposals().get(i);
      String rentalId = proposal.request().match.rentalId();
      Host.ReservationAnswer answer = i < answers.size() ? answers.get(i) : null;
      Throwable failure = p.failure();
      if (failure == null && (answer == null || !rentalId.equals(answer.rentalId())))
        failure = new IllegalStateException("the host's answers do not name " + rentalId);
      else if (failure == null && answer.reservation() == null)
        failure = new StatusReply.ErrorMessage(answer.refusal());
      outcome(
          proposal.request(),
          proposal.to(),
          failure == null ? answer.reservation() : null,
          failure);
    }
    return Behaviors.same();
  }

  /**
   * The host answered: the proposals made to it meanwhile go now, together, but for those whose
   * rental stopped waiting while they waited. Sent, each would hold cards until its claim window
   * ran out, for a rental that no longer takes them.
   */
  private void answered(String hostId) {
    asking.remove(hostId);
    List<Proposal> next = waiting.remove(hostId);
    if (next == null) return;
    List<Proposal> live = new ArrayList<>(next.size());
    for (Proposal p : next) {
      if (!expired(p.request())) {
        live.add(p);
        continue;
      }
      unpropose(hostId, p.request().match.count());
      done(p.request(), new NoMatch(p.request().match.rentalId(), "the rental stopped waiting"));
    }
    if (!live.isEmpty()) send(hostId, live);
  }

  /** {@code count} cards proposed to {@code hostId} are answered, or will not be sent. */
  private void unpropose(String hostId, int count) {
    proposed.computeIfPresent(hostId, (h, n) -> n - count > 0 ? n - count : null);
  }

  private void outcome(
      Request request, Candidate to, Host.Reservation reservation, Throwable failure) {
    String hostId = to.hostId();
    int count = request.match.count();
    unpropose(hostId, count);
    if (reservation != null) {
      given
          .computeIfAbsent(hostId, h -> new ArrayList<>())
          .add(
              new Given(
                  new Holding(count, reservation.reservedAt()),
                  System.nanoTime() + settings.readSideLag().toNanos()));
      done(request, new Matched(request.match.rentalId(), reservation));
      return;
    }
    if (failure instanceof StatusReply.ErrorMessage refusal
        && Rejection.codeOf(refusal.getMessage()) == Rejection.INSUFFICIENT_CARDS)
      request.refusedForCards = true;
    if (!(failure instanceof StatusReply.ErrorMessage)) {
      // No answer in time: the host may still reserve. Undo it; it arrives after the proposal, from
      // the same sender.
      hosts
          .apply(hostId)
          .tell(
              Host.ReleaseCards.undoingProposal(
                  request.match.rentalId(), context.getSystem().ignoreRef()));
    }
    proposeNext(request);
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
