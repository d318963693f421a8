package dev.tickmark.http;

import static org.apache.pekko.http.javadsl.server.Directives.*;

import dev.tickmark.engine.Rejection;
import dev.tickmark.engine.host.Host;
import dev.tickmark.engine.rental.Rental;
import dev.tickmark.http.agent.AgentSocket;
import dev.tickmark.http.agent.StreamRelay;
import java.time.Duration;
import java.util.concurrent.CompletionStage;
import org.apache.pekko.Done;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.cluster.sharding.typed.javadsl.ClusterSharding;
import org.apache.pekko.http.javadsl.model.AttributeKeys;
import org.apache.pekko.http.javadsl.server.Route;
import org.apache.pekko.pattern.StatusReply;
import org.apache.pekko.stream.Materializer;

/**
 * {@code GET /v1/rentals/{id}/connect}: a websocket whose binary frames carry one SSH byte stream
 * to the rental's SSH server, in the agent. The owner's rental only (404 for anyone else's), while
 * it runs (409 {@code not_running}); at most 8 at once per rental (429 {@code too_many_streams});
 * 503 {@code unavailable} while its host's agent is not connected. The engine only relays: SSH is
 * end to end between the renter's client and the agent's server ({@link StreamRelay}).
 */
final class ConnectRoutes {
  private final ClusterSharding sharding;
  private final Duration timeout;
  private final Materializer materializer;

  private final StreamLimits streamLimits;

  ConnectRoutes(ActorSystem<?> system, Duration timeout, StreamLimits streamLimits) {
    this.streamLimits = streamLimits;
    this.sharding = ClusterSharding.get(system);
    this.timeout = timeout;
    this.materializer = Materializer.matFromSystem(system);
  }

  Route route(String renter, String rentalId) {
    return extractRequest(
        request -> {
          if (request.getAttribute(AttributeKeys.webSocketUpgrade).isEmpty())
            return complete(
                Problem.badRequest(
                        "websocket_required",
                        "connect is a websocket carrying SSH: use `tickmark connect "
                            + rentalId
                            + "` as ssh's ProxyCommand")
                    .toResponse());
          StreamLimits.Permit permit = streamLimits.acquire(renter, rentalId);
          CompletionStage<StreamRelay.RenterSide> opened =
              open(renter, rentalId)
                  .whenComplete(
                      (relay, failure) -> {
                        if (failure != null) permit.release();
                      });
          return onSuccess(
              opened,
              relay ->
                  handleWebSocketMessages(
                      relay
                          .flow()
                          .watchTermination(
                              (notUsed, done) -> {
                                done.whenComplete((d, failure) -> permit.release());
                                return notUsed;
                              })));
        });
  }

  /** Checks the rental, then asks its host's agent to open a stream; the upgrade follows. */
  private CompletionStage<StreamRelay.RenterSide> open(String renter, String rentalId) {
    return sharding
        .entityRefFor(Rental.ENTITY_KEY, rentalId)
        .<Rental.View>askWithStatus(reply -> new Rental.Get(renter, reply), timeout)
        .thenCompose(
            view -> {
              if (view.status() != Rental.Status.RUNNING || view.terms() == null)
                throw new StatusReply.ErrorMessage(
                    Rejection.NOT_RUNNING.wire()
                        + ": rental "
                        + rentalId
                        + " is "
                        + view.status().wire()
                        + "; SSH reaches a running rental");
              StreamRelay.RenterSide relay = StreamRelay.renterSide(materializer);
              String streamId = AgentSocket.STREAM_ID_PREFIX + Ids.random(12);
              return sharding
                  .entityRefFor(Host.ENTITY_KEY, view.terms().hostId())
                  .<Done>askWithStatus(
                      reply -> new Host.OpenStream(rentalId, streamId, relay.ends(), reply),
                      timeout)
                  .thenApply(done -> relay);
            });
  }
}
