package dev.tickmark.http;

import static org.apache.pekko.http.javadsl.server.Directives.*;
import static org.apache.pekko.http.javadsl.server.PathMatchers.segment;

import dev.tickmark.engine.host.Host;
import dev.tickmark.persistence.hosts.HostReadModel;
import java.time.Duration;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CompletionStage;
import java.util.function.Function;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.cluster.sharding.typed.javadsl.ClusterSharding;
import org.apache.pekko.http.javadsl.server.Route;
import org.apache.pekko.pattern.StatusReply;
import org.apache.pekko.util.ByteString;

/**
 * Operators' view of hosts: list by status, inspect, evict, reinstate. Mounted under the operator
 * token.
 */
final class OpsHostRoutes {
  /** The operations {@link #route()} serves; the tests hold it to the code and to openapi.json. */
  static final java.util.List<Operation> OPERATIONS =
      java.util.List.of(
          Operation.get("/ops/hosts"),
          Operation.get("/ops/hosts/{id}"),
          Operation.post("/ops/hosts/{id}/evict"),
          Operation.post("/ops/hosts/{id}/reinstate"));

  static final Set<String> STATUSES =
      Set.of("invited", "registered", "verifying", "verified", "failed", "evicted", "removed");

  record EvictRequest(String reason) {}

  private final ClusterSharding sharding;
  private final Duration timeout;
  private final HostReadModel hosts;

  OpsHostRoutes(ActorSystem<?> system, Duration timeout, HostReadModel hosts) {
    this.sharding = ClusterSharding.get(system);
    this.timeout = timeout;
    this.hosts = hosts;
  }

  Route route() {
    return pathPrefix(
        "hosts",
        () ->
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
                                                            list(status, limit, after),
                                                            page ->
                                                                complete(
                                                                    Responses.json(
                                                                        200, page)))))))),
                pathPrefix(
                    segment(),
                    hostId ->
                        concat(
                            pathEnd(
                                () ->
                                    get(
                                        () ->
                                            detail(
                                                ask(hostId, reply -> new Host.Get(null, reply))))),
                            path(
                                "evict",
                                () ->
                                    post(
                                        () ->
                                            RequestBody.read(
                                                body ->
                                                    detail(
                                                        ask(
                                                            hostId,
                                                            reply ->
                                                                new Host.Evict(
                                                                    reason(body), reply)))))),
                            path(
                                "reinstate",
                                () ->
                                    post(
                                        () ->
                                            detail(
                                                ask(
                                                    hostId,
                                                    reply -> new Host.Reinstate(reply)))))))));
  }

  private CompletionStage<HostViews.HostList> list(
      Optional<String> status, Optional<String> limitParam, Optional<String> afterParam) {
    status.ifPresent(
        s -> {
          if (!STATUSES.contains(s))
            throw Problem.badRequest("invalid_parameter", "status must be one of " + STATUSES);
        });
    int limit = HostViews.HostList.limit(limitParam);
    String after = HostViews.HostList.after(afterParam);
    return hosts
        .byStatus(status.orElse(null), after, limit)
        .thenApply(rows -> HostViews.HostList.of(rows, limit, true));
  }

  private static String reason(ByteString body) {
    if (body.isEmpty()) return null;
    String reason = Json.read(body, EvictRequest.class).reason();
    if (reason != null && reason.length() > 500)
      throw Problem.badRequest("invalid_field", "reason is at most 500 characters");
    return reason;
  }

  private Route detail(CompletionStage<Host.HostView> view) {
    return onSuccess(view, v -> complete(Responses.json(200, HostViews.HostDetail.of(v, true))));
  }

  private <T> CompletionStage<T> ask(
      String hostId, Function<ActorRef<StatusReply<T>>, Host.Command> command) {
    return sharding.entityRefFor(Host.ENTITY_KEY, hostId).askWithStatus(command::apply, timeout);
  }
}
