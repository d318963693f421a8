package dev.tickmark.engine.market;

import dev.tickmark.engine.CborSerializable;
import dev.tickmark.engine.host.Host;
import dev.tickmark.engine.host.Listing;
import dev.tickmark.engine.metrics.EngineMetrics;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.CompletionStage;
import java.util.function.Function;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.Behavior;
import org.apache.pekko.actor.typed.RecipientRef;
import org.apache.pekko.actor.typed.javadsl.ActorContext;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.actor.typed.javadsl.StashBuffer;
import org.apache.pekko.cluster.sharding.typed.javadsl.ClusterSharding;
import org.apache.pekko.cluster.sharding.typed.javadsl.Entity;
import org.apache.pekko.cluster.sharding.typed.javadsl.EntityTypeKey;

/**
 * Pairs rental requests with hosts, one sharded matcher per GPU model, so no single actor sees the
 * whole market. It keeps no state worth persisting: candidates come from the host read side, and
 * each proposal goes to the {@link Host} entity, the one authority on its cards, which confirms or
 * refuses. A refusal (the read side lags, or a concurrent match took the cards) moves on to the next
 * candidate. Requests live in the rental entities, which resubmit if a matcher is lost.
 */
public final class Matcher {
  public static final EntityTypeKey<Command> ENTITY_KEY = EntityTypeKey.create(Command.class, "Matcher");

  /** A host that may have the cards, as the read side sees it. */
  public record Candidate(String hostId, long floorPricePerGpuHour, int freeCards) {}

  /** Where candidates come from (the host read side), kept out of the engine's knowledge of SQL. */
  @FunctionalInterface
  public interface Candidates {
    CompletionStage<List<Candidate>> find(String gpu, String region, Listing.Tier tier, long maxPricePerGpuHour, int count);
  }

  public interface Command extends CborSerializable {}

  public record Match(String rentalId, String gpu, int count, Listing.Tier tier, String region, long maxPricePerGpuHour,
      ActorRef<Result> replyTo) implements Command {}

  public sealed interface Result extends CborSerializable permits Matched, NoMatch {}

  public record Matched(String rentalId, Host.Reservation reservation) implements Result {}

  public record NoMatch(String rentalId, String reason) implements Result {}

  private record CandidatesFound(Match request, List<Candidate> candidates, long startedNanos) implements Command {}

  private record Proposed(Match request, List<Candidate> rest, Host.Reservation reservation, String refusal, long startedNanos)
      implements Command {}

  public static void init(ActorSystem<?> system, Candidates candidates, Function<String, RecipientRef<Host.Command>> hosts,
      Duration askTimeout) {
    ClusterSharding.get(system).init(Entity.of(ENTITY_KEY, ctx -> create(candidates, hosts, askTimeout)));
  }

  public static Behavior<Command> create(Candidates candidates, Function<String, RecipientRef<Host.Command>> hosts,
      Duration askTimeout) {
    return Behaviors.setup(ctx -> Behaviors.withStash(10_000, stash ->
        new Matcher(ctx, stash, candidates, hosts, askTimeout).idle()));
  }

  private final ActorContext<Command> context;
  private final StashBuffer<Command> stash;
  private final Candidates candidates;
  private final Function<String, RecipientRef<Host.Command>> hosts;
  private final Duration askTimeout;
  private final EngineMetrics metrics;

  private Matcher(ActorContext<Command> context, StashBuffer<Command> stash, Candidates candidates,
      Function<String, RecipientRef<Host.Command>> hosts, Duration askTimeout) {
    this.context = context;
    this.stash = stash;
    this.candidates = candidates;
    this.hosts = hosts;
    this.askTimeout = askTimeout;
    this.metrics = EngineMetrics.get(context.getSystem());
  }

  /** Waiting for a request. One request is matched at a time, so two never race for the same cards here. */
  private Behavior<Command> idle() {
    return Behaviors.receive(Command.class)
        .onMessage(Match.class, this::start)
        .build();
  }

  private Behavior<Command> start(Match request) {
    long started = System.nanoTime();
    context.pipeToSelf(
        candidates.find(request.gpu(), request.region(), request.tier(), request.maxPricePerGpuHour(), request.count()),
        (found, failure) -> new CandidatesFound(request, failure == null ? found : List.of(), started));
    return busy();
  }

  private Behavior<Command> busy() {
    return Behaviors.receive(Command.class)
        .onMessage(CandidatesFound.class, f -> propose(f.request(), ordered(f.candidates()), f.startedNanos()))
        .onMessage(Proposed.class, this::onProposed)
        .onMessage(Match.class, m -> {
          if (stash.isFull()) {
            m.replyTo().tell(new NoMatch(m.rentalId(), "the matcher is overloaded; retrying"));
          } else {
            stash.stash(m);
          }
          return Behaviors.same();
        })
        .build();
  }

  /** Lowest floor first; ties go to the host with more free cards (it fits more), then by id, deterministically. */
  static List<Candidate> ordered(List<Candidate> candidates) {
    List<Candidate> sorted = new ArrayList<>(candidates);
    sorted.sort(Comparator.comparingLong(Candidate::floorPricePerGpuHour)
        .thenComparing(Comparator.comparingInt(Candidate::freeCards).reversed())
        .thenComparing(Candidate::hostId));
    return sorted;
  }

  private Behavior<Command> propose(Match request, List<Candidate> remaining, long startedNanos) {
    if (remaining.isEmpty()) return finish(new NoMatch(request.rentalId(), "no host has the capacity now"), startedNanos, request);
    Candidate next = remaining.get(0);
    List<Candidate> rest = remaining.subList(1, remaining.size());
    context.askWithStatus(Host.Reservation.class, hosts.apply(next.hostId()), askTimeout,
        reply -> new Host.ReserveCards(request.rentalId(), request.gpu(), request.count(), request.tier(),
            request.maxPricePerGpuHour(), reply),
        (reservation, failure) -> new Proposed(request, List.copyOf(rest), reservation,
            failure == null ? null : String.valueOf(failure.getMessage()), startedNanos));
    return Behaviors.same();
  }

  private Behavior<Command> onProposed(Proposed p) {
    if (p.reservation() != null) return finish(new Matched(p.request().rentalId(), p.reservation()), p.startedNanos(), p.request());
    return propose(p.request(), p.rest(), p.startedNanos());
  }

  private Behavior<Command> finish(Result result, long startedNanos, Match request) {
    metrics.matchLatency.recordMicros((System.nanoTime() - startedNanos) / 1_000);
    request.replyTo().tell(result);
    return stash.unstashAll(idle());
  }
}
