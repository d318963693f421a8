package dev.tickmark.http;

import static org.apache.pekko.http.javadsl.server.Directives.*;
import static org.apache.pekko.http.javadsl.server.PathMatchers.segment;

import dev.tickmark.engine.host.Host;
import dev.tickmark.engine.money.Money;
import dev.tickmark.engine.rental.Rental;
import dev.tickmark.persistence.rentals.RentalReadModel;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletionStage;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.cluster.sharding.typed.javadsl.ClusterSharding;
import org.apache.pekko.http.javadsl.server.Route;
import org.apache.pekko.util.ByteString;

/**
 * Rentals as operators see them, for disputes and before evicting a host: any one rental with its
 * renter, host and provider, and the rentals that ran on a host with each one's renter. Mounted
 * under the operator token.
 */
final class OpsRentalRoutes {
  /** The operations {@link #route()} serves; the tests hold it to the code and to openapi.json. */
  static final List<Operation> OPERATIONS =
      List.of(
          Operation.get("/ops/rentals/{id}"),
          Operation.post("/ops/rentals/{id}/refunds"),
          Operation.get("/ops/hosts/{id}/rentals"));

  /** {@code amount}: EUR as text, absent for all that is left to refund. */
  record RefundRequest(String reference, String amount, String reason) {}

  /** A refund and the rental's totals after it; amounts in EUR. */
  record RefundView(
      String rentalId,
      String renterId,
      String providerId,
      String reference,
      String amount,
      String reason,
      java.time.Instant at,
      String currency,
      String charged,
      String refunded,
      String providerReversed,
      String platformReversed) {
    static RefundView of(Rental.RefundView r) {
      return new RefundView(
          r.rentalId(),
          r.renterId(),
          r.providerId(),
          r.reference(),
          Money.format(r.amount()),
          r.reason(),
          r.at(),
          "EUR",
          Money.format(r.charged()),
          Money.format(r.cumulativeRefunded()),
          Money.format(r.providerReversed()),
          Money.format(r.platformReversed()));
    }
  }

  /**
   * A rental as its renter sees it, and whose it is and where it ran (null until matched), and its
   * refunds one by one.
   */
  record OpsRentalView(
      String renterId,
      String hostId,
      String providerId,
      RentalRoutes.RentalView rental,
      List<RefundEntry> refunds) {
    static OpsRentalView of(Rental.View v) {
      return new OpsRentalView(
          v.renterId(),
          v.terms() == null ? null : v.terms().hostId(),
          v.terms() == null ? null : v.terms().providerId(),
          RentalRoutes.view(v),
          v.refunds().stream()
              .map(
                  r -> new RefundEntry(r.reference(), Money.format(r.amount()), r.reason(), r.at()))
              .toList());
    }
  }

  /** One refund of a rental: the operator's reference, the amount (EUR), why and when. */
  record RefundEntry(String reference, String amount, String reason, java.time.Instant at) {}

  /** A rental that ran on the host as its provider sees it, and its renter. */
  record OpsHostRental(String renterId, HostViews.HostRentalView rental) {}

  /** One page of a host's rentals with their renters, and the host's totals. */
  record OpsHostRentalList(
      String hostId,
      List<OpsHostRental> rentals,
      String nextAfter,
      HostViews.HostRentalTotals totals) {
    static OpsHostRentalList of(
        String hostId,
        List<RentalReadModel.HostRentalRow> rows,
        int limit,
        RentalReadModel.HostTotals totals) {
      HostViews.HostRentalList page = HostViews.HostRentalList.of(hostId, rows, limit, totals);
      List<OpsHostRental> rentals = new java.util.ArrayList<>();
      for (int i = 0; i < rows.size(); i++)
        rentals.add(new OpsHostRental(rows.get(i).renterId(), page.rentals().get(i)));
      return new OpsHostRentalList(hostId, rentals, page.nextAfter(), page.totals());
    }
  }

  private final ClusterSharding sharding;
  private final Duration timeout;
  private final RentalReadModel rentals;
  private final Duration readYourWritesWait;

  OpsRentalRoutes(
      ActorSystem<?> system,
      Duration timeout,
      RentalReadModel rentals,
      Duration readYourWritesWait) {
    this.sharding = ClusterSharding.get(system);
    this.timeout = timeout;
    this.rentals = rentals;
    this.readYourWritesWait = readYourWritesWait;
  }

  Route route() {
    return concat(
        path(
            segment("rentals").slash(segment()).slash("refunds"),
            rentalId ->
                post(
                    () ->
                        RequestBody.read(
                            body ->
                                onSuccess(
                                    refund(rentalId, body),
                                    r -> complete(Responses.json(200, RefundView.of(r))))))),
        path(
            segment("rentals").slash(segment()),
            rentalId ->
                get(
                    () ->
                        !Ids.wellFormed("rnt_", rentalId)
                            ? complete(Problem.notFound("no such rental").toResponse())
                            : onSuccess(
                                rental(rentalId),
                                view -> complete(Responses.json(200, OpsRentalView.of(view)))))),
        path(
            segment("hosts").slash(segment()).slash("rentals"),
            hostId ->
                get(
                    () ->
                        !Ids.wellFormed("host_", hostId)
                            ? complete(Problem.notFound("no such host").toResponse())
                            : parameterOptional(
                                "limit",
                                limit ->
                                    parameterOptional(
                                        "after",
                                        after ->
                                            onSuccess(
                                                hostRentals(hostId, limit, after),
                                                page -> complete(Responses.json(200, page))))))));
  }

  /**
   * Refunds part or all of a closed rental's charge (a dispute's outcome): the rental checks and
   * records it, the renter's balance and the provider's earnings and platform fee follow. The same
   * reference again answers the same refund.
   */
  private CompletionStage<Rental.RefundView> refund(String rentalId, ByteString body) {
    RefundRequest request = Json.read(body, RefundRequest.class);
    String reference = request.reference();
    if (reference == null || reference.isBlank() || reference.length() > 200)
      throw Problem.badRequest(
          "invalid_field", "\"reference\" is required (at most 200 characters)");
    String reason = request.reason();
    if (reason == null || reason.isBlank() || reason.length() > 500)
      throw Problem.badRequest("invalid_reason", "\"reason\" is required (at most 500 characters)");
    Long amount =
        request.amount() == null ? null : Amounts.parsePositive("amount", request.amount());
    if (!Ids.wellFormed("rnt_", rentalId)) throw Problem.notFound("no such rental");
    return sharding
        .entityRefFor(Rental.ENTITY_KEY, rentalId)
        .askWithStatus(
            reply -> new Rental.Refund(reference, amount, reason.strip(), reply), timeout);
  }

  /** The entity's own view, live (the operator is no renter: {@code Get(null)} shows any). */
  private CompletionStage<Rental.View> rental(String rentalId) {
    return sharding
        .entityRefFor(Rental.ENTITY_KEY, rentalId)
        .askWithStatus(reply -> new Rental.Get(null, reply), timeout);
  }

  /**
   * The host's rentals as its provider sees them, with each renter: the host entity says whether it
   * exists (404 otherwise), then the rentals table once it holds what was written before.
   */
  private CompletionStage<OpsHostRentalList> hostRentals(
      String hostId, Optional<String> limitParam, Optional<String> afterParam) {
    int limit = HostViews.HostList.limit(limitParam);
    long after = afterParam.map(a -> Params.nonNegativeLong("after", a)).orElse(0L);
    return sharding
        .entityRefFor(Host.ENTITY_KEY, hostId)
        .<Host.HostView>askWithStatus(reply -> new Host.Get(null, reply), timeout)
        .thenCompose(exists -> rentals.awaitWritten(readYourWritesWait))
        .thenCompose(caughtUp -> rentals.hostPage(hostId, after, limit))
        .thenApply(page -> OpsHostRentalList.of(hostId, page.rows(), limit, page.totals()));
  }
}
