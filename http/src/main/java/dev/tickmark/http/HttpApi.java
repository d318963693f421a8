package dev.tickmark.http;

import static org.apache.pekko.http.javadsl.server.Directives.*;

import dev.tickmark.engine.catalog.Catalog;
import dev.tickmark.engine.metrics.EngineMetrics;
import dev.tickmark.engine.snapshot.ChunkStore;
import dev.tickmark.http.agent.AgentSocket;
import dev.tickmark.http.agent.SnapshotTransferRoutes;
import dev.tickmark.http.metrics.MetricsRoutes;
import dev.tickmark.persistence.auth.ApiKeys;
import dev.tickmark.persistence.auth.IdempotencyKeys;
import dev.tickmark.persistence.auth.SshKeys;
import dev.tickmark.persistence.hosts.HostReadModel;
import dev.tickmark.persistence.ledger.LedgerReadModel;
import dev.tickmark.persistence.logs.RentalLogs;
import dev.tickmark.persistence.payments.PaymentIds;
import dev.tickmark.persistence.payouts.PayoutRunReadModel;
import dev.tickmark.persistence.rentals.RentalReadModel;
import dev.tickmark.persistence.snapshots.SnapshotReadModel;
import java.time.Clock;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletionStage;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.http.javadsl.Http;
import org.apache.pekko.http.javadsl.HttpsConnectionContext;
import org.apache.pekko.http.javadsl.ServerBinding;
import org.apache.pekko.http.javadsl.model.StatusCodes;
import org.apache.pekko.http.javadsl.model.headers.StrictTransportSecurity;
import org.apache.pekko.http.javadsl.server.ExceptionHandler;
import org.apache.pekko.http.javadsl.server.RejectionHandler;
import org.apache.pekko.http.javadsl.server.Route;

/**
 * The node's HTTP API: {@code /v1} for customers, {@code /ops} for operators, {@code /metrics} for
 * Prometheus. Every error, including Pekko HTTP's own rejections, leaves as problem+json with a
 * stable code; bodies are capped at 64 KiB.
 */
public final class HttpApi {
  static final long MAX_BODY_BYTES = 64 * 1024;

  /**
   * Where snapshot bytes and the snapshot list are, and the limits their routes need ({@code
   * tickmark.snapshots.max-bytes}, {@code suspended-grace}).
   */
  public record SnapshotStorage(
      ChunkStore chunks, SnapshotReadModel readModel, long maxBytes, Duration suspendedGrace) {}

  /** The operations this class's own {@code path(...)} serves (the rest it only mounts). */
  static final List<Operation> OWN_OPERATIONS = List.of(Operation.get("/health"));

  /**
   * Every operation {@link #route()} serves, in the order of the document: what {@code
   * /v1/openapi.json} describes, and what the tests compare it and the live routes with.
   */
  public static final List<Operation> OPERATIONS =
      Operation.all(
          AccountRoutes.OPERATIONS,
          PaymentRoutes.OPERATIONS,
          HostRoutes.OPERATIONS,
          MarketRoutes.OPERATIONS,
          AgentSocket.OPERATIONS,
          SnapshotTransferRoutes.OPERATIONS,
          RentalRoutes.OPERATIONS,
          SnapshotRoutes.OPERATIONS,
          OpenApiRoutes.OPERATIONS,
          OpsRoutes.OPERATIONS,
          OpsHostRoutes.OPERATIONS,
          OpsRentalRoutes.OPERATIONS,
          OpsPayoutRoutes.OPERATIONS,
          MetricsRoutes.OPERATIONS,
          ConsoleRoutes.OPERATIONS,
          OWN_OPERATIONS);

  private final Route route;

  public HttpApi(
      ActorSystem<?> system,
      ApiSettings settings,
      ApiKeys apiKeys,
      SshKeys sshKeys,
      IdempotencyKeys idempotencyKeys,
      PaymentIds paymentIds,
      LedgerReadModel ledger,
      HostReadModel hosts,
      RentalReadModel rentals,
      RentalLogs rentalLogs,
      PayoutRunReadModel payoutRuns,
      dev.tickmark.persistence.ops.OperatorAudit operatorAudit,
      SnapshotStorage snapshots,
      Catalog catalog,
      Clock clock) {
    Accounts accounts = new Accounts(system, settings.askTimeout());
    RateLimits rateLimits = new RateLimits(settings.rateLimits());
    Auth auth = new Auth(apiKeys, settings.operatorTokens(), rateLimits);
    Idempotency idempotency = new Idempotency(idempotencyKeys);
    WebhookSignature signature =
        settings.webhookSecret() == null || settings.webhookSecret().isBlank()
            ? null
            : new WebhookSignature(settings.webhookSecret(), settings.webhookTolerance());
    AccountRoutes accountRoutes =
        new AccountRoutes(
            accounts,
            apiKeys,
            sshKeys,
            ledger,
            auth,
            rateLimits,
            clock,
            settings.readYourWritesWait());
    PaymentRoutes paymentRoutes = new PaymentRoutes(accounts, paymentIds, signature, clock);
    OpsPayoutRoutes payoutRoutes =
        new OpsPayoutRoutes(
            system, settings.askTimeout(), payoutRuns, idempotency, settings.payoutDebtor());
    OpsRoutes opsRoutes =
        new OpsRoutes(
            accounts,
            ledger,
            auth,
            idempotency,
            new OpsHostRoutes(system, settings.askTimeout(), hosts),
            new OpsRentalRoutes(
                system, settings.askTimeout(), rentals, settings.readYourWritesWait()),
            payoutRoutes,
            new OperatorActions(
                operatorAudit,
                clock,
                settings.rateLimits().trustedProxies(),
                Operation.all(
                    OpsRoutes.OPERATIONS,
                    OpsHostRoutes.OPERATIONS,
                    OpsRentalRoutes.OPERATIONS,
                    OpsPayoutRoutes.OPERATIONS)),
            operatorAudit);
    HostRoutes hostRoutes =
        new HostRoutes(
            system,
            settings.askTimeout(),
            hosts,
            rentals,
            catalog,
            auth,
            clock,
            settings.registrationTokenValidity(),
            settings.readYourWritesWait());
    MarketRoutes marketRoutes = new MarketRoutes(catalog, hosts, clock);
    AgentSocket agentSocket =
        new AgentSocket(system, settings.agentLimits(), settings.agentAuthThrottle(), rentalLogs);
    StreamLimits streamLimits = new StreamLimits(settings.streams());
    RentalRoutes rentalRoutes =
        new RentalRoutes(
            system,
            streamLimits,
            settings.askTimeout(),
            rentals,
            rentalLogs,
            catalog,
            auth,
            idempotency,
            settings.readYourWritesWait());
    SnapshotRoutes snapshotRoutes =
        new SnapshotRoutes(
            system,
            settings.askTimeout(),
            snapshots.readModel(),
            auth,
            settings.readYourWritesWait(),
            snapshots.suspendedGrace());
    SnapshotTransferRoutes transferRoutes =
        new SnapshotTransferRoutes(
            system,
            SnapshotTransferRoutes.Entities.sharded(system),
            agentSocket::hostCredential,
            snapshots.chunks(),
            // caught up with the snapshot events written before: a snapshot whose manifest was
            // just recorded counts against the quota
            (renter, except) ->
                snapshots
                    .readModel()
                    .awaitWritten(settings.readYourWritesWait())
                    .thenCompose(
                        caughtUp -> snapshots.readModel().accountBytesElsewhere(renter, except)),
            settings.askTimeout(),
            snapshots.maxBytes());
    MetricsRoutes metricsRoutes = new MetricsRoutes(EngineMetrics.get(system), rentals, ledger);
    this.route =
        guarded(
            () ->
                concat(
                    pathPrefix(
                        "v1",
                        () ->
                            concat(
                                accountRoutes.route(),
                                paymentRoutes.route(),
                                hostRoutes.route(),
                                marketRoutes.route(),
                                agentSocket.route(),
                                transferRoutes.route(),
                                rentalRoutes.route(),
                                snapshotRoutes.route(),
                                new OpenApiRoutes().route())),
                    pathPrefix("ops", opsRoutes::route),
                    metricsRoutes.route(),
                    new ConsoleRoutes().route(),
                    path(
                        "health",
                        () ->
                            get(
                                () ->
                                    complete(
                                        Responses.json(200, java.util.Map.of("status", "ok")))))));
  }

  public Route route() {
    return route;
  }

  public static CompletionStage<ServerBinding> bind(
      ActorSystem<?> system, Route route, String interfaceName, int port) {
    return Http.get(system).newServerAt(interfaceName, port).bind(route);
  }

  /** {@value #HSTS_MAX_AGE_SECONDS} s: a year, what browsers' preload lists ask for. */
  public static final long HSTS_MAX_AGE_SECONDS = 31_536_000;

  /**
   * HTTPS only on this port: every TLS connection (the API, the console, the agent's and renters'
   * websockets) goes through {@code https}; a plain HTTP request fails the handshake. Every
   * response carries {@code Strict-Transport-Security}, so a browser that once reached the node
   * never tries plain HTTP on it again.
   */
  public static CompletionStage<ServerBinding> bindHttps(
      ActorSystem<?> system,
      Route route,
      String interfaceName,
      int port,
      HttpsConnectionContext https) {
    return Http.get(system)
        .newServerAt(interfaceName, port)
        .enableHttps(https)
        .bind(strictTransportSecurity(route));
  }

  static Route strictTransportSecurity(Route inner) {
    return respondWithHeader(StrictTransportSecurity.create(HSTS_MAX_AGE_SECONDS), () -> inner);
  }

  /**
   * What every route runs inside: failures and rejections as problem+json, bodies capped at 64 KiB
   * (a route that takes more, a snapshot chunk, sets its own limit inside).
   */
  static Route guarded(java.util.function.Supplier<Route> inner) {
    return handleExceptions(
        EXCEPTIONS,
        () ->
            handleRejections(
                REJECTIONS, () -> withSizeLimit(MAX_BODY_BYTES, () -> refusingNulInPath(inner))));
  }

  // Built once: the directives' inner routes are built anew for every request, these need not be.
  private static final ExceptionHandler EXCEPTIONS = exceptionHandler();
  private static final RejectionHandler REJECTIONS = rejectionHandler();

  /**
   * A path segment with a NUL ({@code %00}) names nothing: no id holds one, and PostgreSQL cannot
   * store or compare one, so a route that took it to the database or to an entity's journal got an
   * error and answered 503 (the fuzzer's {@code DELETE /v1/account/ssh-keys/a%00…}, {@code GET
   * /ops/hosts/a%00…}, which also waited for the ask timeout). Answered 404 {@code not_found} here.
   */
  static Route refusingNulInPath(java.util.function.Supplier<Route> inner) {
    return extractUri(
        uri -> {
          for (String segment : uri.pathSegments())
            if (segment.indexOf('\u0000') >= 0)
              return complete(
                  Problem.notFound("no such resource: a path segment holds a NUL character")
                      .toResponse());
          return inner.get();
        });
  }

  static ExceptionHandler exceptionHandler() {
    return ExceptionHandler.newBuilder()
        .matchAny(failure -> complete(Responses.problemFor(failure).toResponse()))
        .build();
  }

  /** Pekko HTTP's default rejection answers, re-dressed as problems with a code per status. */
  static RejectionHandler rejectionHandler() {
    return RejectionHandler.defaultHandler()
        .mapRejectionResponse(
            response -> {
              if (response.entity().getContentType().equals(Problem.PROBLEM_JSON)) return response;
              int status = response.status().intValue();
              if (status == StatusCodes.PAYLOAD_TOO_LARGE.intValue()) {
                return new Problem(status, "payload_too_large", "the request body is over 64 KiB")
                    .toResponse();
              }
              String detail =
                  response.entity()
                          instanceof org.apache.pekko.http.javadsl.model.HttpEntity.Strict strict
                      ? strict.getData().utf8String()
                      : response.status().reason();
              return new Problem(status, codeFor(status), detail)
                  .toResponse()
                  .withHeaders(response.getHeaders());
            });
  }

  /**
   * The code of a rejection answer. A 404 here means no route matched the path at all (a route that
   * matched but found no resource answers {@code not_found} itself), so it has a code of its own:
   * clients and the OpenAPI drift test can tell "no such operation" from "no such rental".
   */
  static String codeFor(int status) {
    if (status == StatusCodes.NOT_FOUND.intValue()) return "no_such_route";
    if (status == StatusCodes.METHOD_NOT_ALLOWED.intValue()) return "method_not_allowed";
    if (status == StatusCodes.PAYLOAD_TOO_LARGE.intValue()) return "payload_too_large";
    if (status == StatusCodes.UNSUPPORTED_MEDIA_TYPE.intValue()) return "unsupported_media_type";
    if (status == StatusCodes.UNAUTHORIZED.intValue()) return "unauthorized";
    if (status == StatusCodes.NOT_ACCEPTABLE.intValue()) return "not_acceptable";
    // answered by TransportProblems, before any route: the URI or the headers over the limits
    if (status == StatusCodes.URI_TOO_LONG.intValue()) return "uri_too_long";
    if (status == StatusCodes.REQUEST_HEADER_FIELDS_TOO_LARGE.intValue())
      return "headers_too_large";
    if (status >= 500) return "internal";
    return "bad_request";
  }
}
