package dev.tickmark.http;

import static org.apache.pekko.http.javadsl.server.Directives.*;
import static org.apache.pekko.http.javadsl.server.PathMatchers.segment;

import dev.tickmark.engine.money.Money;
import dev.tickmark.engine.snapshot.Snapshot;
import dev.tickmark.persistence.snapshots.SnapshotReadModel;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.function.Function;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.cluster.sharding.typed.javadsl.ClusterSharding;
import org.apache.pekko.http.javadsl.server.Route;
import org.apache.pekko.pattern.StatusReply;

/**
 * The renter's snapshots: {@code GET /v1/snapshots} (the read model, with the live cost of those
 * still metered), {@code GET /v1/snapshots/{id}} and {@code DELETE /v1/snapshots/{id}} (the
 * entity). Another account's snapshot answers 404 (the entity decides).
 */
public final class SnapshotRoutes {
  /** The operations {@link #route()} serves; the tests hold it to the code and to openapi.json. */
  static final java.util.List<Operation> OPERATIONS =
      java.util.List.of(
          Operation.get("/v1/snapshots"),
          Operation.get("/v1/snapshots/{id}"),
          Operation.delete("/v1/snapshots/{id}"));

  static final int MAX_PAGE = 200;
  static final Set<String> STATUSES =
      Set.of("uploading", "ready", "failed", "suspended", "deleted");

  public record FailureView(String code, String detail) {}

  public record SnapshotView(
      String id,
      String status,
      long sizeBytes,
      String sha256,
      String rentalId,
      String gpu,
      String region,
      Instant createdAt,
      Instant readyAt,
      Instant endedAt,
      long billedSeconds,
      String cost,
      FailureView failure,
      Instant deletesAt) {}

  record SnapshotList(List<SnapshotView> snapshots, String nextAfter) {}

  private final ClusterSharding sharding;
  private final Duration timeout;
  private final SnapshotReadModel snapshots;
  private final Auth auth;
  private final Duration readYourWritesWait;
  private final Duration suspendedGrace;

  public SnapshotRoutes(
      ActorSystem<?> system,
      Duration timeout,
      SnapshotReadModel snapshots,
      Auth auth,
      Duration readYourWritesWait,
      Duration suspendedGrace) {
    this.sharding = ClusterSharding.get(system);
    this.timeout = timeout;
    this.snapshots = snapshots;
    this.auth = auth;
    this.readYourWritesWait = readYourWritesWait;
    this.suspendedGrace = suspendedGrace;
  }

  public Route route() {
    return pathPrefix(
        "snapshots",
        () ->
            auth.account(
                renter ->
                    concat(
                        pathEnd(() -> get(() -> list(renter))),
                        path(segment(), id -> one(renter, id)))));
  }

  private Route list(String renter) {
    return parameterOptional(
        "status",
        status ->
            parameterOptional(
                "limit",
                limit ->
                    parameterOptional(
                        "after",
                        after ->
                            onSuccess(
                                list(renter, status, limit, after),
                                page -> complete(Responses.json(200, page))))));
  }

  private Route one(String renter, String id) {
    if (!Ids.wellFormed("snap_", id))
      return complete(Problem.notFound("no such snapshot").toResponse());
    return concat(
        get(() -> answer(ask(id, reply -> new Snapshot.Get(renter, reply)))),
        delete(() -> answer(ask(id, reply -> new Snapshot.Delete(renter, reply)))));
  }

  private Route answer(CompletionStage<Snapshot.View> view) {
    return onSuccess(
        // the snapshot itself, as GET /v1/rentals/{id} answers the rental (DESIGN.md's table)
        view, v -> complete(Responses.json(200, SnapshotRoutes.view(v))));
  }

  private CompletionStage<SnapshotList> list(
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
    // as the rentals list: a snapshot made by a stop a moment ago is listed
    return snapshots
        .awaitWritten(readYourWritesWait)
        .thenCompose(caughtUp -> snapshots.byRenter(renter, status.orElse(null), after, limit))
        .thenCompose(
            rows -> {
              List<CompletableFuture<SnapshotView>> views =
                  rows.stream().map(row -> live(renter, row)).toList();
              String next =
                  rows.size() == limit ? Long.toString(rows.get(rows.size() - 1).rowId()) : null;
              return CompletableFuture.allOf(views.toArray(CompletableFuture[]::new))
                  .thenApply(
                      all ->
                          new SnapshotList(
                              views.stream().map(CompletableFuture::join).toList(), next));
            });
  }

  /**
   * A metered snapshot (ready or suspended) as its entity shows it now: the table has only its last
   * settlement. One that cannot answer in time is listed from the table.
   */
  private CompletableFuture<SnapshotView> live(String renter, SnapshotReadModel.SnapshotRow row) {
    if (!"ready".equals(row.status()) && !"suspended".equals(row.status()))
      return CompletableFuture.completedFuture(view(row));
    return ask(row.snapshotId(), reply -> new Snapshot.Get(renter, reply))
        .thenApply(SnapshotRoutes::view)
        .exceptionally(failure -> view(row))
        .toCompletableFuture();
  }

  private CompletionStage<Snapshot.View> ask(
      String id, Function<ActorRef<StatusReply<Snapshot.View>>, Snapshot.Command> command) {
    return sharding.entityRefFor(Snapshot.ENTITY_KEY, id).askWithStatus(command::apply, timeout);
  }

  public static SnapshotView view(Snapshot.View v) {
    return new SnapshotView(
        v.id(),
        v.status().wire(),
        v.sizeBytes(),
        v.sha256(),
        v.rentalId(),
        v.gpu(),
        v.region(),
        v.createdAt(),
        v.readyAt(),
        v.endedAt(),
        v.billedSeconds(),
        Money.format(v.cost()),
        v.status() == Snapshot.Status.FAILED
            ? new FailureView(v.failure(), v.failureDetail())
            : null,
        v.status() == Snapshot.Status.SUSPENDED ? v.deletesAt() : null);
  }

  SnapshotView view(SnapshotReadModel.SnapshotRow r) {
    boolean suspended = "suspended".equals(r.status());
    return new SnapshotView(
        r.snapshotId(),
        r.status(),
        r.sizeBytes(),
        r.sha256(),
        r.rentalId(),
        r.gpu(),
        r.region(),
        r.createdAt(),
        r.readyAt(),
        r.endedAt(),
        r.billedSeconds(),
        Money.format(r.cost()),
        "failed".equals(r.status()) ? new FailureView(r.failure(), r.failureDetail()) : null,
        suspended && r.suspendedAt() != null ? r.suspendedAt().plus(suspendedGrace) : null);
  }
}
