package dev.tickmark.http;

import static org.apache.pekko.http.javadsl.server.Directives.*;
import static org.apache.pekko.http.javadsl.server.PathMatchers.segment;

import dev.tickmark.engine.catalog.Catalog;
import dev.tickmark.engine.host.Host;
import dev.tickmark.engine.host.Listing;
import dev.tickmark.persistence.hosts.HostReadModel;
import dev.tickmark.persistence.rentals.RentalReadModel;
import java.time.Clock;
import java.time.DayOfWeek;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletionStage;
import java.util.function.Function;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.cluster.sharding.typed.javadsl.ClusterSharding;
import org.apache.pekko.http.javadsl.server.Route;
import org.apache.pekko.pattern.StatusReply;
import org.apache.pekko.util.ByteString;

/**
 * The provider's hosts: registration tokens, the host list, one host, the rentals that ran on it,
 * its listing, check again ({@code POST …/verify}), drain and removal.
 */
public final class HostRoutes {
  /** The operations {@link #route()} serves; the tests hold it to the code and to openapi.json. */
  static final java.util.List<Operation> OPERATIONS =
      java.util.List.of(
          Operation.post("/v1/hosts/registration-tokens"),
          Operation.get("/v1/hosts"),
          Operation.get("/v1/hosts/{id}"),
          Operation.delete("/v1/hosts/{id}"),
          Operation.get("/v1/hosts/{id}/rentals"),
          Operation.put("/v1/hosts/{id}/listing"),
          Operation.post("/v1/hosts/{id}/drain"),
          Operation.post("/v1/hosts/{id}/verify"),
          Operation.post("/v1/hosts/{id}/reclaim"));

  record TokenRequest(String region, String label) {}

  record ReclaimRequest(List<Integer> cards) {}

  record TokenView(String token, String hostId, String region, String label, Instant expiresAt) {}

  record WindowRequest(String day, String start, String end) {}

  record ListingRequest(
      String onDemandPricePerGpuHour,
      String spotPricePerGpuHour,
      Integer spotNoticeSeconds,
      List<WindowRequest> availability,
      Boolean listed) {}

  private static final Map<String, DayOfWeek> DAYS =
      Map.of(
          "mon",
          DayOfWeek.MONDAY,
          "tue",
          DayOfWeek.TUESDAY,
          "wed",
          DayOfWeek.WEDNESDAY,
          "thu",
          DayOfWeek.THURSDAY,
          "fri",
          DayOfWeek.FRIDAY,
          "sat",
          DayOfWeek.SATURDAY,
          "sun",
          DayOfWeek.SUNDAY);

  private final ClusterSharding sharding;
  private final Duration timeout;
  private final HostReadModel hosts;
  private final RentalReadModel rentals;
  private final Catalog catalog;
  private final Auth auth;
  private final Clock clock;
  private final Duration tokenValidity;
  private final Duration readYourWritesWait;

  public HostRoutes(
      ActorSystem<?> system,
      Duration timeout,
      HostReadModel hosts,
      RentalReadModel rentals,
      Catalog catalog,
      Auth auth,
      Clock clock,
      Duration tokenValidity,
      Duration readYourWritesWait) {
    this.sharding = ClusterSharding.get(system);
    this.timeout = timeout;
    this.hosts = hosts;
    this.rentals = rentals;
    this.catalog = catalog;
    this.auth = auth;
    this.clock = clock;
    this.tokenValidity = tokenValidity;
    this.readYourWritesWait = readYourWritesWait;
  }

  /**
   * The provider's hosts, once the host table holds what was written before this request (a listing
   * just set, say).
   */
  private CompletionStage<HostViews.HostList> ownHosts(
      String owner, Optional<String> limitParam, Optional<String> afterParam) {
    int limit = HostViews.HostList.limit(limitParam);
    String after = HostViews.HostList.after(afterParam);
    return hosts
        .awaitWritten(readYourWritesWait)
        .thenCompose(caughtUp -> hosts.byOwner(owner, after, limit))
        .thenApply(rows -> HostViews.HostList.of(rows, limit, false));
  }

  /**
   * The rentals that ran on one of the provider's hosts, newest first, with the host's totals: the
   * host entity says whose it is (another's answers 404), then the rentals table, once it holds
   * what was written before this request.
   */
  private CompletionStage<HostViews.HostRentalList> hostRentals(
      String owner, String hostId, Optional<String> limitParam, Optional<String> afterParam) {
    int limit = HostViews.HostList.limit(limitParam);
    long after = afterParam.map(a -> Params.nonNegativeLong("after", a)).orElse(0L);
    return this.<Host.HostView>ask(hostId, reply -> new Host.Get(owner, reply))
        .thenCompose(own -> rentals.awaitWritten(readYourWritesWait))
        .thenCompose(caughtUp -> rentals.hostPage(hostId, after, limit))
        .thenApply(page -> HostViews.HostRentalList.of(hostId, page.rows(), limit, page.totals()));
  }

  public Route route() {
    return pathPrefix(
        "hosts",
        () ->
            auth.account(
                owner ->
                    concat(
                        path(
                            "registration-tokens",
                            () ->
                                post(
                                    () ->
                                        Responses.noStore(
                                            () ->
                                                RequestBody.read(
                                                    body ->
                                                        onSuccess(
                                                            createToken(owner, body),
                                                            token ->
                                                                complete(
                                                                    Responses.json(
                                                                        201, token))))))),
                        pathEnd(
                            () ->
                                get(
                                    () ->
                                        parameterOptional(
                                            "limit",
                                            limit ->
                                                parameterOptional(
                                                    "after",
                                                    after ->
                                                        onSuccess(
                                                            ownHosts(owner, limit, after),
                                                            page ->
                                                                complete(
                                                                    Responses.json(200, page))))))),
                        pathPrefix(
                            segment(),
                            hostId ->
                                !Ids.wellFormed("host_", hostId)
                                    ? complete(Problem.notFound("no such host").toResponse())
                                    : concat(
                                        pathEnd(
                                            () ->
                                                concat(
                                                    get(
                                                        () ->
                                                            detail(
                                                                ask(
                                                                    hostId,
                                                                    reply ->
                                                                        new Host.Get(
                                                                            owner, reply)))),
                                                    delete(
                                                        () ->
                                                            detail(
                                                                ask(
                                                                    hostId,
                                                                    reply ->
                                                                        new Host.Remove(
                                                                            owner, reply)))))),
                                        path(
                                            "rentals",
                                            () ->
                                                get(
                                                    () ->
                                                        parameterOptional(
                                                            "limit",
                                                            limit ->
                                                                parameterOptional(
                                                                    "after",
                                                                    after ->
                                                                        onSuccess(
                                                                            hostRentals(
                                                                                owner, hostId,
                                                                                limit, after),
                                                                            page ->
                                                                                complete(
                                                                                    Responses.json(
                                                                                        200,
                                                                                        page))))))),
                                        path(
                                            "listing",
                                            () ->
                                                put(
                                                    () ->
                                                        RequestBody.read(
                                                            body -> {
                                                              Listing listing = listing(body);
                                                              return detail(
                                                                  ask(
                                                                      hostId,
                                                                      reply ->
                                                                          new Host.UpdateListing(
                                                                              owner, listing,
                                                                              reply)));
                                                            }))),
                                        path(
                                            "verify",
                                            () ->
                                                post(
                                                    () ->
                                                        onSuccess(
                                                            ask(
                                                                hostId,
                                                                (ActorRef<
                                                                            StatusReply<
                                                                                Host.HostView>>
                                                                        reply) ->
                                                                    new Host.RequestVerification(
                                                                        owner, reply)),
                                                            v ->
                                                                complete(
                                                                    Responses.json(
                                                                        202,
                                                                        HostViews.HostDetail.of(
                                                                            v, false)))))),
                                        path(
                                            "drain",
                                            () ->
                                                post(
                                                    () ->
                                                        detail(
                                                            ask(
                                                                hostId,
                                                                reply ->
                                                                    new Host.Drain(
                                                                        owner, reply))))),
                                        path(
                                            "reclaim",
                                            () ->
                                                post(
                                                    () ->
                                                        RequestBody.read(
                                                            body -> {
                                                              List<Integer> cards =
                                                                  Json.read(
                                                                          body,
                                                                          ReclaimRequest.class)
                                                                      .cards();
                                                              if (cards == null || cards.isEmpty())
                                                                throw Problem.badRequest(
                                                                    "invalid_cards",
                                                                    "\"cards\" lists the card indexes to take back");
                                                              return detail(
                                                                  ask(
                                                                      hostId,
                                                                      reply ->
                                                                          new Host.Reclaim(
                                                                              owner,
                                                                              List.copyOf(cards),
                                                                              reply)));
                                                            }))))))));
  }

  private Route detail(CompletionStage<Host.HostView> view) {
    return onSuccess(view, v -> complete(Responses.json(200, HostViews.HostDetail.of(v, false))));
  }

  private <T> CompletionStage<T> ask(
      String hostId, Function<ActorRef<StatusReply<T>>, Host.Command> command) {
    return sharding.entityRefFor(Host.ENTITY_KEY, hostId).askWithStatus(command::apply, timeout);
  }

  private CompletionStage<TokenView> createToken(String owner, ByteString body) {
    TokenRequest request = Json.read(body, TokenRequest.class);
    if (request.region() == null || catalog.region(request.region()).isEmpty()) {
      throw Problem.badRequest(
          "unknown_region",
          "region must be one of " + catalog.regions().stream().map(Catalog.Region::code).toList());
    }
    if (request.label() != null && request.label().length() > 200)
      throw Problem.badRequest("invalid_label", "label is at most 200 characters");
    String hostId = "host_" + Ids.random(12);
    String secret = Ids.random(24);
    Instant expiresAt = clock.instant().plus(tokenValidity);
    return ask(
            hostId,
            (ActorRef<StatusReply<org.apache.pekko.Done>> reply) ->
                new Host.Invite(
                    owner,
                    request.region(),
                    request.label(),
                    Host.sha256(secret),
                    expiresAt,
                    reply))
        .thenApply(
            done ->
                new TokenView(
                    "tmkreg_" + hostId + "_" + secret,
                    hostId,
                    request.region(),
                    request.label(),
                    expiresAt));
  }

  static Listing listing(ByteString body) {
    ListingRequest r = Json.read(body, ListingRequest.class);
    if (r.onDemandPricePerGpuHour() == null)
      throw Problem.badRequest("missing_field", "\"on_demand_price_per_gpu_hour\" is required");
    if (r.listed() == null) throw Problem.badRequest("missing_field", "\"listed\" is required");
    long onDemand = Amounts.parse("on_demand_price_per_gpu_hour", r.onDemandPricePerGpuHour());
    Long spot =
        r.spotPricePerGpuHour() == null
            ? null
            : Amounts.parse("spot_price_per_gpu_hour", r.spotPricePerGpuHour());
    int notice =
        r.spotNoticeSeconds() == null ? Listing.DEFAULT_SPOT_NOTICE_SECONDS : r.spotNoticeSeconds();
    List<Listing.Window> windows = new ArrayList<>();
    if (r.availability() != null) {
      for (WindowRequest w : r.availability()) windows.add(window(w));
    }
    Listing listing = new Listing(onDemand, spot, notice, List.copyOf(windows), r.listed());
    String problem = listing.problem();
    if (problem != null) throw Problem.badRequest("invalid_listing", problem);
    return listing;
  }

  private static Listing.Window window(WindowRequest w) {
    DayOfWeek day = w.day() == null ? null : DAYS.get(w.day().toLowerCase(Locale.ROOT));
    if (day == null)
      throw Problem.badRequest("invalid_listing", "availability day must be one of mon..sun");
    return new Listing.Window(day, minute(w.start()), minute(w.end()));
  }

  private static int minute(String hhmm) {
    if (hhmm != null && hhmm.matches("\\d{2}:\\d{2}")) {
      int h = Integer.parseInt(hhmm.substring(0, 2));
      int m = Integer.parseInt(hhmm.substring(3));
      if ((h < 24 && m < 60) || (h == 24 && m == 0)) return h * 60 + m;
    }
    throw Problem.badRequest(
        "invalid_listing", "availability times are \"HH:MM\" in UTC, 00:00 to 24:00");
  }
}
