package dev.tickmark.http;

import static org.apache.pekko.http.javadsl.server.Directives.*;
import static org.apache.pekko.http.javadsl.server.PathMatchers.segment;

import dev.tickmark.engine.catalog.Catalog;
import dev.tickmark.engine.host.Listing;
import dev.tickmark.engine.money.Money;
import dev.tickmark.engine.rental.Rental;
import dev.tickmark.engine.snapshot.Snapshot;
import dev.tickmark.persistence.logs.RentalLogs;
import dev.tickmark.persistence.rentals.RentalReadModel;
import dev.tickmark.wire.SshPublicKeys;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.function.Function;
import org.apache.pekko.NotUsed;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.cluster.sharding.typed.javadsl.ClusterSharding;
import org.apache.pekko.http.javadsl.marshalling.sse.EventStreamMarshalling;
import org.apache.pekko.http.javadsl.model.HttpResponse;
import org.apache.pekko.http.javadsl.model.sse.ServerSentEvent;
import org.apache.pekko.http.javadsl.server.Route;
import org.apache.pekko.japi.Pair;
import org.apache.pekko.pattern.StatusReply;
import org.apache.pekko.stream.Materializer;
import org.apache.pekko.stream.OverflowStrategy;
import org.apache.pekko.stream.javadsl.Source;
import org.apache.pekko.stream.typed.javadsl.ActorSource;
import org.apache.pekko.util.ByteString;

/**
 * The renter's rentals: launch, list, inspect, stop, usage, the live event stream, and the logs
 * ({@link RentalLogRoutes}).
 */
public final class RentalRoutes {
  /** The operations {@link #route()} serves; the tests hold it to the code and to openapi.json. */
  static final java.util.List<Operation> OPERATIONS =
      java.util.List.of(
          Operation.post("/v1/rentals"),
          Operation.get("/v1/rentals"),
          Operation.get("/v1/rentals/{id}"),
          Operation.post("/v1/rentals/{id}/stop"),
          Operation.get("/v1/rentals/{id}/usage"),
          Operation.get("/v1/rentals/{id}/events"),
          Operation.get("/v1/rentals/{id}/connect"),
          Operation.get("/v1/rentals/{id}/logs"));

  static final int MAX_PAGE = 200;
  static final Set<String> STATUSES =
      Set.of("pending", "provisioning", "running", "stopping", "ended");

  record LaunchRequest(
      String gpu,
      Integer count,
      String tier,
      String region,
      String maxPricePerGpuHour,
      String image,
      List<String> command,
      String sshPublicKey,
      String maxTotal,
      Integer waitSeconds,
      Boolean network,
      String restore,
      String runtime) {}

  record StopRequest(Boolean snapshot) {}

  /**
   * A rental as its renter sees it; {@code refunded}: what an operator's refunds gave back of
   * {@code cost}.
   */
  record RentalView(
      String id,
      String status,
      String gpu,
      int count,
      String tier,
      String region,
      String pricePerGpuHour,
      String maxPricePerGpuHour,
      Instant createdAt,
      Instant matchedAt,
      Instant startedAt,
      Instant endedAt,
      String endReason,
      long billedSeconds,
      String cost,
      Instant preemptionDeadline,
      boolean simulated,
      String sshHostKey,
      String snapshotId,
      Integer exitCode,
      String image,
      List<String> command,
      Boolean network,
      String maxTotal,
      String restore,
      String runtime,
      String hostRuntime,
      String refunded) {
    RentalView withSshHostKey(String key) {
      return new RentalView(
          id,
          status,
          gpu,
          count,
          tier,
          region,
          pricePerGpuHour,
          maxPricePerGpuHour,
          createdAt,
          matchedAt,
          startedAt,
          endedAt,
          endReason,
          billedSeconds,
          cost,
          preemptionDeadline,
          simulated,
          key,
          snapshotId,
          exitCode,
          image,
          command,
          network,
          maxTotal,
          restore,
          runtime,
          hostRuntime,
          refunded);
    }
  }

  record LaunchResponse(RentalView rental) {}

  record RentalList(List<RentalView> rentals, String nextAfter) {}

  record CheckpointView(long throughSecond, String cost, Instant at) {}

  record Usage(
      String rentalId,
      String status,
      long billedSeconds,
      String cost,
      String pricePerGpuHour,
      int cards,
      long startedHours,
      String costPerStartedHour,
      List<CheckpointView> checkpoints) {}

  record TickEvent(long second, String cost) {}

  record PreemptionEvent(Instant deadline) {}

  private final ClusterSharding sharding;
  private final Duration timeout;
  private final Duration launchTimeout;
  private final RentalReadModel rentals;
  private final Catalog catalog;
  private final Auth auth;
  private final Idempotency idempotency;
  private final Materializer materializer;
  private final Duration readYourWritesWait;
  private final RentalLogRoutes logRoutes;
  private final ConnectRoutes connectRoutes;
  private final StreamLimits streamLimits;

  public RentalRoutes(
      ActorSystem<?> system,
      StreamLimits streamLimits,
      Duration timeout,
      RentalReadModel rentals,
      RentalLogs logs,
      Catalog catalog,
      Auth auth,
      Idempotency idempotency,
      Duration readYourWritesWait) {
    this.logRoutes = new RentalLogRoutes(system, timeout, logs, streamLimits);
    this.connectRoutes = new ConnectRoutes(system, timeout, streamLimits);
    this.streamLimits = streamLimits;
    this.sharding = ClusterSharding.get(system);
    this.timeout = timeout;
    this.launchTimeout = timeout.multipliedBy(3);
    this.rentals = rentals;
    this.catalog = catalog;
    this.auth = auth;
    this.idempotency = idempotency;
    this.materializer = Materializer.matFromSystem(system);
    this.readYourWritesWait = readYourWritesWait;
  }

  public Route route() {
    return pathPrefix(
        "rentals",
        () ->
            concat(
                pathEnd(() -> post(() -> auth.accountWithSshKeys(this::launchRoute))),
                auth.account(
                    renter ->
                        concat(
                            pathEnd(
                                () ->
                                    get(
                                        () ->
                                            parameterOptional(
                                                "status",
                                                status ->
                                                    parameterOptional(
                                                        "limit",
                                                        limit ->
                                                            parameterOptional(
                                                                "after",
                                                                after ->
                                                                    onSuccess(
                                                                        list(
                                                                            renter, status, limit,
                                                                            after),
                                                                        page ->
                                                                            complete(
                                                                                Responses.json(
                                                                                    200,
                                                                                    page)))))))),
                            pathPrefix(
                                segment(),
                                id ->
                                    !Ids.wellFormed("rnt_", id)
                                        ? complete(Problem.notFound("no such rental").toResponse())
                                        : concat(
                                            pathEnd(
                                                () ->
                                                    get(
                                                        () ->
                                                            onSuccess(
                                                                current(renter, id)
                                                                    .thenCompose(this::withHostKey),
                                                                v ->
                                                                    complete(
                                                                        Responses.json(200, v))))),
                                            path(
                                                "stop",
                                                () ->
                                                    post(
                                                        () ->
                                                            RequestBody.read(
                                                                body -> stop(renter, id, body)))),
                                            path(
                                                "usage",
                                                () ->
                                                    get(
                                                        () ->
                                                            onSuccess(
                                                                current(renter, id),
                                                                v ->
                                                                    complete(
                                                                        Responses.json(
                                                                            200, usage(v)))))),
                                            path("events", () -> get(() -> events(renter, id))),
                                            path(
                                                "connect",
                                                () -> get(() -> connectRoutes.route(renter, id))),
                                            path(
                                                "logs",
                                                () -> get(() -> logRoutes.route(renter, id)))))))));
  }

  /** POST /v1/rentals, with the account's SSH keys read alongside its API key. */
  private Route launchRoute(String renter, List<String> accountSshKeys) {
    return extractUri(
        uri ->
            RequestBody.read(
                body ->
                    idempotency.applyWith(
                        renter,
                        uri.path(),
                        body,
                        attempt -> launch(renter, accountSshKeys, body, attempt))));
  }

  /** {@code {"snapshot": true}} keeps the workspace (Snapshot.idForRental); no body stops only. */
  private Route stop(String renter, String id, ByteString body) {
    boolean snapshot =
        !body.isEmpty() && Boolean.TRUE.equals(Json.read(body, StopRequest.class).snapshot());
    return onSuccess(
        ask(id, reply -> new Rental.Stop(renter, snapshot, reply)),
        v -> complete(Responses.json(202, new LaunchResponse(view(v)))));
  }

  /**
   * Under an {@code Idempotency-Key} the rental's id derives from the key's seed: a retry after a
   * 5xx (no answer in time) or after the first attempt's node crashed reaches the rental the first
   * attempt may have created, which answers as it stands, instead of launching a second one. The
   * one 5xx known to leave nothing (the market could not be read: that rental ended at once,
   * nothing charged) lets a retry launch afresh.
   */
  private CompletionStage<HttpResponse> launch(
      String renter, List<String> accountSshKeys, ByteString body, Idempotency.Attempt attempt) {
    LaunchRequest request = Json.read(body, LaunchRequest.class);
    Rental.Spec spec = spec(request);
    String rentalId =
        attempt.seed() == null
            ? "rnt_" + Ids.random(12)
            : Ids.derived("rnt_", renter, attempt.seed());
    // Nothing is written under an id drawn at random, or derived from a seed this attempt drew: its
    // rental need not read its journal. A retry's kept seed may name what the first attempt made.
    boolean freshId = attempt.seed() == null || attempt.seedDrawn();
    return withRestore(renter, request.restore(), spec)
        .thenApply(s -> withAccountKeys(accountSshKeys, s))
        .thenCompose(
            withKeys ->
                sharding
                    .entityRefFor(Rental.ENTITY_KEY, rentalId)
                    .<Rental.View>askWithStatus(
                        reply -> new Rental.Create(renter, withKeys, freshId, reply),
                        launchTimeout))
        .whenComplete(
            (v, failure) -> {
              if (Rental.endedUnlaunched(failure)) attempt.leftNothing();
            })
        .thenApply(v -> Responses.json(201, new LaunchResponse(view(v))));
  }

  /**
   * A launch that names no {@code ssh_public_key} gets the account's SSH keys (as they were when
   * its API key was read, in the same statement), one per line, for its SSH server.
   */
  private static Rental.Spec withAccountKeys(List<String> keys, Rental.Spec s) {
    if (s.sshPublicKey() != null || keys.isEmpty()) return s;
    return s.withSshPublicKey(String.join("\n", keys));
  }

  /**
   * A launch that names {@code restore} carries the snapshot's identity and checksums, once its
   * entity says it is the renter's and ready (404 {@code not_found} / 409 {@code
   * snapshot_not_ready} otherwise).
   */
  private CompletionStage<Rental.Spec> withRestore(String renter, String restore, Rental.Spec s) {
    if (restore == null) return CompletableFuture.completedFuture(s);
    if (!Ids.wellFormed("snap_", restore))
      throw Problem.badRequest("invalid_restore", "restore must be a snapshot id (snap_…)");
    return sharding
        .entityRefFor(Snapshot.ENTITY_KEY, restore)
        .<Snapshot.View>askWithStatus(reply -> new Snapshot.Restore(renter, reply), timeout)
        .thenApply(v -> s.withRestore(new Rental.Restore(v.id(), v.sha256(), v.sizeBytes())));
  }

  /**
   * The most a rental may cost an hour ({@code max_price_per_gpu_hour × count}): 1 000 000 EUR, so
   * that the hold arithmetic never overflows. Price × cards × seconds stays below 2^63 / 100 for
   * holds up to a day, and a year of it costs under 10^10 EUR, far inside {@link Money#MAX_AMOUNT}.
   */
  static final long MAX_SPEND_PER_HOUR = 1_000_000L * Money.MICROS_PER_EURO;

  Rental.Spec spec(LaunchRequest r) {
    if (r.gpu() == null || catalog.gpu(r.gpu()).isEmpty())
      throw Problem.badRequest("unknown_gpu", "no GPU model \"" + r.gpu() + "\" in the catalog");
    if (r.region() != null && catalog.region(r.region()).isEmpty()) {
      throw Problem.badRequest("unknown_region", "no region \"" + r.region() + "\" in the catalog");
    }
    int count = r.count() == null ? 1 : r.count();
    if (count < 1 || count > 64)
      throw Problem.badRequest("invalid_count", "count must be 1 to 64 cards (all on one host)");
    Listing.Tier tier = r.tier() == null ? Listing.Tier.ON_DEMAND : MarketRoutes.tier(r.tier());
    if (r.maxPricePerGpuHour() == null)
      throw Problem.badRequest("missing_field", "\"max_price_per_gpu_hour\" is required");
    long maxPrice = Amounts.parsePositive("max_price_per_gpu_hour", r.maxPricePerGpuHour());
    if (maxPrice > MAX_SPEND_PER_HOUR / count)
      throw Problem.badRequest(
          "invalid_amount",
          "max_price_per_gpu_hour × count is at most "
              + Money.format(MAX_SPEND_PER_HOUR)
              + " EUR an hour");
    if (r.image() == null
        || r.image().isBlank()
        || r.image().length() > 300
        || r.image().startsWith("-")
        || r.image().contains(" ")) {
      throw Problem.badRequest(
          "invalid_image", "\"image\" is required: a container image reference");
    }
    List<String> command = r.command() == null ? List.of() : r.command();
    if (command.size() > 64 || command.stream().anyMatch(a -> a == null || a.length() > 4096)) {
      throw Problem.badRequest(
          "invalid_command", "command is at most 64 arguments of at most 4096 characters");
    }
    if (r.sshPublicKey() != null) {
      if (r.sshPublicKey().length() > 8192)
        throw Problem.badRequest("invalid_ssh_key", "ssh_public_key is too long");
      try {
        if (SshPublicKeys.parseAll(r.sshPublicKey()).isEmpty())
          throw new IllegalArgumentException("no key");
      } catch (IllegalArgumentException e) {
        throw Problem.badRequest(
            "invalid_ssh_key",
            "ssh_public_key must be OpenSSH public keys, one per line (" + e.getMessage() + ")");
      }
    }
    Long maxTotal = r.maxTotal() == null ? null : Amounts.parsePositive("max_total", r.maxTotal());
    int wait = r.waitSeconds() == null ? 30 : r.waitSeconds();
    if (wait < 0 || wait > 600)
      throw Problem.badRequest("invalid_wait", "wait_seconds must be 0 to 600");
    return new Rental.Spec(
            r.gpu(),
            count,
            tier,
            r.region(),
            maxPrice,
            r.image(),
            List.copyOf(command),
            r.sshPublicKey(),
            maxTotal,
            wait,
            Boolean.TRUE.equals(r.network()))
        .withRuntime(r.runtime() == null ? null : MarketRoutes.runtime(r.runtime()));
  }

  private CompletionStage<RentalList> list(
      String renter,
      Optional<String> status,
      Optional<String> limitParam,
      Optional<String> afterParam) {
    status.ifPresent(
        s -> {
          if (!STATUSES.contains(s))
            throw Problem.badRequest("invalid_parameter", "status must be one of " + STATUSES);
        });
    int limit = limitParam.map(l -> Params.positiveInt("limit", l, MAX_PAGE)).orElse(50);
    long after = afterParam.map(a -> Params.nonNegativeLong("after", a)).orElse(0L);
    // the table holds every rental event written before this request first: a rental launched a
    // moment ago is listed
    return rentals
        .awaitWritten(readYourWritesWait)
        .thenCompose(caughtUp -> rentals.byRenter(renter, status.orElse(null), after, limit))
        .thenCompose(
            rows -> {
              List<CompletableFuture<RentalView>> views =
                  rows.stream().map(row -> live(renter, row)).toList();
              String next =
                  rows.size() == limit ? Long.toString(rows.get(rows.size() - 1).rowId()) : null;
              return CompletableFuture.allOf(views.toArray(CompletableFuture[]::new))
                  .thenApply(
                      all ->
                          new RentalList(
                              views.stream().map(CompletableFuture::join).toList(), next));
            });
  }

  /**
   * A running rental as its entity shows it now: the table has only its last settlement checkpoint
   * (every settle-interval), the entity the live meter, as GET /v1/rentals/{id} shows it. Only
   * running rows are asked (the others' billed seconds do not move); one that cannot answer in time
   * is listed from the table.
   */
  private CompletableFuture<RentalView> live(String renter, RentalReadModel.RentalRow row) {
    if (!"running".equals(row.status())) return CompletableFuture.completedFuture(view(row));
    return ask(row.rentalId(), reply -> new Rental.Get(renter, reply))
        .thenApply(RentalRoutes::view)
        .exceptionally(failure -> view(row))
        .toCompletableFuture();
  }

  /** The rental as it is now, as {@code renter} may see it (not found for anyone else). */
  private CompletionStage<Rental.View> current(String renter, String id) {
    return ask(id, reply -> new Rental.Get(renter, reply));
  }

  private CompletionStage<Rental.View> ask(
      String id, Function<ActorRef<StatusReply<Rental.View>>, Rental.Command> command) {
    return sharding.entityRefFor(Rental.ENTITY_KEY, id).askWithStatus(command::apply, timeout);
  }

  // ---- SSE

  private Route events(String renter, String id) {
    StreamLimits.Permit permit = streamLimits.acquire(renter, id);
    Pair<ActorRef<Rental.Update>, Source<Rental.Update, NotUsed>> live =
        ActorSource.<Rental.Update>actorRef(
                m -> false, m -> Optional.empty(), 256, OverflowStrategy.dropHead())
            .preMaterialize(materializer);
    CompletionStage<Rental.View> subscribed =
        ask(id, reply -> new Rental.Subscribe(renter, live.first(), reply))
            .whenComplete(
                (v, failure) -> {
                  if (failure != null) permit.release();
                });
    return onSuccess(
        subscribed,
        first -> {
          Source<ServerSentEvent, NotUsed> stream =
              Source.<Rental.Update>single(new Rental.StatusChanged(first))
                  .concat(ended(first) ? Source.empty() : live.second())
                  .takeWhile(u -> !(u instanceof Rental.StatusChanged s && ended(s.rental())), true)
                  .map(RentalRoutes::sse)
                  .keepAlive(Duration.ofSeconds(15), ServerSentEvent::heartbeat)
                  .watchTermination(
                      (notUsed, done) -> {
                        done.whenComplete((d, failure) -> permit.release());
                        return notUsed;
                      });
          return completeOK(stream, EventStreamMarshalling.toEventStream());
        });
  }

  private static boolean ended(Rental.View v) {
    return v.status().isFinal();
  }

  static ServerSentEvent sse(Rental.Update update) {
    if (update instanceof Rental.Tick t)
      return ServerSentEvent.create(
          Json.write(new TickEvent(t.second(), Money.format(t.cost()))), "tick");
    if (update instanceof Rental.PreemptionNotice p)
      return ServerSentEvent.create(Json.write(new PreemptionEvent(p.deadline())), "preemption");
    Rental.View v = ((Rental.StatusChanged) update).rental();
    return ServerSentEvent.create(Json.write(view(v)), ended(v) ? "end" : "status");
  }

  // ---- views

  static RentalView view(Rental.View v) {
    Rental.Spec s = v.spec();
    // The region asked for, or once matched anywhere, the host's: where the cards are.
    String region = s.region() != null || v.terms() == null ? s.region() : v.terms().region();
    return new RentalView(
        v.id(),
        v.status().wire(),
        s.gpu(),
        s.count(),
        s.tier().wire(),
        region,
        v.terms() == null ? null : Money.format(v.terms().pricePerGpuHour()),
        Money.format(s.maxPricePerGpuHour()),
        v.createdAt(),
        v.terms() == null ? null : v.terms().matchedAt(),
        v.startedAt(),
        v.endedAt(),
        v.endReason() == null ? null : v.endReason().wire(),
        v.billedSeconds(),
        Money.format(v.cost()),
        v.preemptionDeadline(),
        v.terms() != null && v.terms().simulated(),
        null,
        v.snapshotId(),
        v.exitCode(),
        s.image(),
        s.command() == null ? List.of() : s.command(),
        s.network(),
        s.maxTotal() == null ? null : Money.format(s.maxTotal()),
        s.restore() == null ? null : s.restore().snapshotId(),
        s.runtime(),
        v.terms() == null ? null : v.terms().runtime(),
        Money.format(v.refunded()));
  }

  static RentalView view(RentalReadModel.RentalRow r) {
    return new RentalView(
        r.rentalId(),
        r.status(),
        r.gpu(),
        r.count(),
        r.tier(),
        r.region(),
        r.pricePerGpuHour() == null ? null : Money.format(r.pricePerGpuHour()),
        Money.format(r.maxPricePerGpuHour()),
        r.createdAt(),
        r.matchedAt(),
        r.startedAt(),
        r.endedAt(),
        r.endReason(),
        r.billedSeconds(),
        Money.format(r.cost()),
        r.preemptionDeadline(),
        r.simulated(),
        null,
        r.snapshotId(),
        r.exitCode(),
        r.image(),
        r.command(),
        r.network(),
        r.maxTotal() == null ? null : Money.format(r.maxTotal()),
        r.restore(),
        r.runtime(),
        r.hostRuntime(),
        Money.format(r.refunded()));
  }

  /**
   * The view with its host's SSH host key, for a rental that is or may soon be reachable (clients
   * pin it); without it when the host does not answer in time.
   */
  private CompletionStage<RentalView> withHostKey(Rental.View v) {
    RentalView view = view(v);
    if (v.terms() == null || v.status() == Rental.Status.ENDED)
      return CompletableFuture.completedFuture(view);
    return sharding
        .entityRefFor(dev.tickmark.engine.host.Host.ENTITY_KEY, v.terms().hostId())
        .<dev.tickmark.engine.host.Host.SshHostKey>askWithStatus(
            dev.tickmark.engine.host.Host.GetSshHostKey::new, timeout)
        .thenApply(key -> view.withSshHostKey(key.key()))
        .exceptionally(failure -> view);
  }

  /**
   * What was billed, and what the same job would have cost billed per started hour, as clouds do.
   */
  static Usage usage(Rental.View v) {
    int cards = v.spec().count();
    long price = v.terms() == null ? 0 : v.terms().pricePerGpuHour();
    long startedHours = (v.billedSeconds() + 3599) / 3600;
    long perHour = Math.multiplyExact(Math.multiplyExact(price, (long) cards), startedHours);
    List<CheckpointView> checkpoints =
        v.checkpoints().stream()
            .map(c -> new CheckpointView(c.throughSecond(), Money.format(c.cost()), c.at()))
            .toList();
    return new Usage(
        v.id(),
        v.status().wire(),
        v.billedSeconds(),
        Money.format(v.cost()),
        v.terms() == null ? null : Money.format(price),
        cards,
        startedHours,
        Money.format(perHour),
        checkpoints);
  }
}
