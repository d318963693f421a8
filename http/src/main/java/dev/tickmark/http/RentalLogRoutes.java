package dev.tickmark.http;

import static org.apache.pekko.http.javadsl.server.Directives.*;

import dev.tickmark.engine.rental.Rental;
import dev.tickmark.persistence.logs.RentalLogs;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import org.apache.pekko.NotUsed;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.cluster.sharding.typed.javadsl.ClusterSharding;
import org.apache.pekko.http.javadsl.marshalling.sse.EventStreamMarshalling;
import org.apache.pekko.http.javadsl.model.sse.ServerSentEvent;
import org.apache.pekko.http.javadsl.server.Route;
import org.apache.pekko.japi.Pair;
import org.apache.pekko.pattern.Patterns;
import org.apache.pekko.stream.javadsl.Source;

/**
 * {@code GET /v1/rentals/{id}/logs}: the rental's log lines, read from the shared {@code
 * rental_logs} table (so any node serves any rental), owner only (another renter's rental is 404,
 * as the Rental entity answers).
 *
 * <ul>
 *   <li>A page: {@code ?tail=N} the last N lines, or {@code ?after=S&limit=L} the lines with seq
 *       above S; oldest first, with {@code next_after} (the last seq given, else {@code after}).
 *   <li>{@code ?follow=true} or {@code Accept: text/event-stream}: SSE, {@code event: log} with
 *       {@code id: <seq>}, from {@code Last-Event-ID} (else {@code after}, else the {@code tail},
 *       else the start), polling the table with backoff ({@link #MIN_WAIT} to {@link #MAX_WAIT})
 *       while nothing is new; {@code event: end} once the rental has ended and no line is left. The
 *       agent's session stores a rental's lines before it passes on its end, so the end is seen
 *       only after them.
 * </ul>
 */
final class RentalLogRoutes {
  static final int MAX_TAIL = 10_000;
  static final int MAX_LIMIT = 1000;
  static final int DEFAULT_LIMIT = 500;
  static final Duration MIN_WAIT = Duration.ofMillis(100);
  static final Duration MAX_WAIT = Duration.ofSeconds(2);

  record LineView(long seq, Instant at, String stream, String text) {}

  record Page(List<LineView> lines, long nextAfter) {}

  record EndEvent(long lastSeq) {}

  /** What the request asks for, checked. */
  record Query(Integer tail, Long after, int limit, boolean follow) {}

  /** Where a follow stream is: after which seq, whether the rental was seen ended, the wait. */
  private record Cursor(long after, boolean ended, Duration backoff, boolean done) {}

  private final ActorSystem<?> system;
  private final ClusterSharding sharding;
  private final Duration timeout;
  private final RentalLogs logs;
  private final StreamLimits streamLimits;

  RentalLogRoutes(
      ActorSystem<?> system, Duration timeout, RentalLogs logs, StreamLimits streamLimits) {
    this.streamLimits = streamLimits;
    this.system = system;
    this.sharding = ClusterSharding.get(system);
    this.timeout = timeout;
    this.logs = logs;
  }

  Route route(String renter, String id) {
    return parameterOptional(
        "tail",
        tail ->
            parameterOptional(
                "after",
                after ->
                    parameterOptional(
                        "limit",
                        limit ->
                            parameterOptional(
                                "follow",
                                follow ->
                                    optionalHeaderValueByName(
                                        "Last-Event-ID",
                                        lastEventId ->
                                            optionalHeaderValueByName(
                                                "Accept",
                                                accept ->
                                                    answer(
                                                        renter,
                                                        id,
                                                        query(
                                                            tail,
                                                            after,
                                                            limit,
                                                            follow,
                                                            lastEventId,
                                                            accept))))))));
  }

  private Route answer(String renter, String id, Query q) {
    return onSuccess(
        view(renter, id),
        v ->
            q.follow()
                ? completeOK(limited(renter, id, q), EventStreamMarshalling.toEventStream())
                : onSuccess(page(id, q), p -> complete(Responses.json(200, p))));
  }

  static Query query(
      Optional<String> tail,
      Optional<String> after,
      Optional<String> limit,
      Optional<String> follow,
      Optional<String> lastEventId,
      Optional<String> accept) {
    if (tail.isPresent() && after.isPresent())
      throw Problem.badRequest("invalid_parameter", "give tail or after, not both");
    Integer n = tail.map(t -> Params.positiveInt("tail", t, MAX_TAIL)).orElse(null);
    Long from = after.map(a -> Params.nonNegativeLong("after", a)).orElse(null);
    int pageSize = limit.map(l -> Params.positiveInt("limit", l, MAX_LIMIT)).orElse(DEFAULT_LIMIT);
    boolean streaming =
        follow
            .map(
                f -> {
                  if (!f.equals("true") && !f.equals("false"))
                    throw Problem.badRequest("invalid_parameter", "follow must be true or false");
                  return f.equals("true");
                })
            .orElse(accept.map(a -> a.contains("text/event-stream")).orElse(false));
    if (lastEventId.isPresent() && streaming) {
      from = Params.nonNegativeLong("Last-Event-ID", lastEventId.get().trim());
      n = null;
    }
    return new Query(n, from, pageSize, streaming);
  }

  private CompletionStage<Page> page(String id, Query q) {
    if (q.tail() != null) return logs.tail(id, q.tail()).thenApply(lines -> page(lines, 0));
    long after = q.after() == null ? 0 : q.after();
    return logs.after(id, after, q.limit()).thenApply(lines -> page(lines, after));
  }

  private static Page page(List<RentalLogs.Line> lines, long after) {
    long next = lines.isEmpty() ? after : lines.get(lines.size() - 1).seq();
    return new Page(lines.stream().map(RentalLogRoutes::view).toList(), next);
  }

  private static LineView view(RentalLogs.Line l) {
    return new LineView(l.seq(), l.at(), l.stream(), l.text());
  }

  // ---- following

  /** The follow stream, holding one of the renter's stream places until it ends. */
  private Source<ServerSentEvent, NotUsed> limited(String renter, String id, Query q) {
    StreamLimits.Permit permit = streamLimits.acquire(renter, id);
    return follow(renter, id, q)
        .watchTermination(
            (notUsed, done) -> {
              done.whenComplete((d, failure) -> permit.release());
              return notUsed;
            });
  }

  private Source<ServerSentEvent, NotUsed> follow(String renter, String id, Query q) {
    CompletionStage<Long> start =
        q.tail() != null
            ? logs.tail(id, q.tail())
                .thenApply(lines -> lines.isEmpty() ? 0L : lines.get(0).seq() - 1)
            : CompletableFuture.completedFuture(q.after() == null ? 0L : q.after());
    return Source.completionStage(start)
        .flatMapConcat(
            after ->
                Source.unfoldAsync(
                    new Cursor(after, false, MIN_WAIT, false), c -> step(renter, id, c)))
        .mapConcat(events -> events)
        .keepAlive(Duration.ofSeconds(15), ServerSentEvent::heartbeat);
  }

  /**
   * One poll: new lines (from the seq after the cursor, one page), or, when there are none, whether
   * the rental has ended (then one more poll, and the end), else a wait that doubles up to {@link
   * #MAX_WAIT}.
   */
  private CompletionStage<Optional<Pair<Cursor, List<ServerSentEvent>>>> step(
      String renter, String id, Cursor c) {
    if (c.done()) return CompletableFuture.completedFuture(Optional.empty());
    return logs.after(id, c.after(), DEFAULT_LIMIT)
        .thenCompose(
            lines -> {
              if (!lines.isEmpty()) {
                long last = lines.get(lines.size() - 1).seq();
                List<ServerSentEvent> events = lines.stream().map(RentalLogRoutes::sse).toList();
                return emit(new Cursor(last, c.ended(), MIN_WAIT, false), events);
              }
              if (c.ended())
                return emit(
                    new Cursor(c.after(), true, MIN_WAIT, true),
                    List.of(ServerSentEvent.create(Json.write(new EndEvent(c.after())), "end")));
              return ended(renter, id)
                  .thenCompose(
                      ended ->
                          ended
                              ? emit(new Cursor(c.after(), true, MIN_WAIT, false), List.of())
                              : Patterns.after(
                                  c.backoff(),
                                  system.classicSystem().scheduler(),
                                  system.executionContext(),
                                  () ->
                                      emit(
                                          new Cursor(c.after(), false, twice(c.backoff()), false),
                                          List.of())));
            });
  }

  private static CompletionStage<Optional<Pair<Cursor, List<ServerSentEvent>>>> emit(
      Cursor next, List<ServerSentEvent> events) {
    return CompletableFuture.completedFuture(Optional.of(Pair.create(next, events)));
  }

  private static Duration twice(Duration wait) {
    Duration d = wait.multipliedBy(2);
    return d.compareTo(MAX_WAIT) > 0 ? MAX_WAIT : d;
  }

  static ServerSentEvent sse(RentalLogs.Line line) {
    return ServerSentEvent.create(Json.write(view(line)), "log", String.valueOf(line.seq()));
  }

  /** Whether the rental has ended; an entity that does not answer in time counts as running. */
  private CompletionStage<Boolean> ended(String renter, String id) {
    return view(renter, id).thenApply(v -> v.status().isFinal()).exceptionally(failure -> false);
  }

  /** The rental as its entity shows it to {@code renter}: fails not_found for another's. */
  private CompletionStage<Rental.View> view(String renter, String id) {
    return sharding
        .entityRefFor(Rental.ENTITY_KEY, id)
        .askWithStatus(reply -> new Rental.Get(renter, reply), timeout);
  }
}
