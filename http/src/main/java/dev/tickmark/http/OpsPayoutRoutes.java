package dev.tickmark.http;

import static org.apache.pekko.http.javadsl.server.Directives.*;
import static org.apache.pekko.http.javadsl.server.PathMatchers.segment;

import dev.tickmark.engine.account.PayoutReturns;
import dev.tickmark.engine.money.Money;
import dev.tickmark.engine.payout.PayoutRun;
import dev.tickmark.persistence.payouts.PayoutRunReadModel;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.time.Duration;
import java.time.Instant;
import java.util.HexFormat;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletionStage;
import java.util.function.Function;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.cluster.sharding.typed.javadsl.ClusterSharding;
import org.apache.pekko.http.javadsl.model.ContentTypes;
import org.apache.pekko.http.javadsl.model.HttpEntities;
import org.apache.pekko.http.javadsl.model.HttpResponse;
import org.apache.pekko.http.javadsl.model.MediaTypes;
import org.apache.pekko.http.javadsl.model.headers.ContentDisposition;
import org.apache.pekko.http.javadsl.model.headers.ContentDispositionTypes;
import org.apache.pekko.http.javadsl.server.Route;
import org.apache.pekko.pattern.StatusReply;
import org.apache.pekko.util.ByteString;

/**
 * Payout runs: start one, list them, inspect one, export a completed one as CSV or pain.001 XML.
 * With an {@code Idempotency-Key} the run's id is derived from the key, so a retry after a lost
 * answer, a timeout or a crash reaches the same run and can never start a second one.
 */
final class OpsPayoutRoutes {
  /** The operations {@link #route()} serves; the tests hold it to the code and to openapi.json. */
  static final java.util.List<Operation> OPERATIONS =
      java.util.List.of(
          Operation.post("/ops/payouts"),
          Operation.get("/ops/payouts"),
          Operation.get("/ops/payouts/{id}"),
          Operation.get("/ops/payouts/{id}/export.csv"),
          Operation.get("/ops/payouts/{id}/export.xml"),
          Operation.post("/ops/payouts/{id}/returns"));

  static final int MAX_PAGE = 200;

  record StartRequest(String minimum) {}

  record ReturnRequest(String accountId, String reason) {}

  record PaymentView(
      String accountId,
      String amount,
      String payoutId,
      String status,
      String reason,
      String endToEndId,
      Instant returnedAt) {}

  record SkipView(String accountId, String amount, String reason) {}

  record RunView(
      String id,
      String status,
      Instant createdAt,
      Instant completedAt,
      String minimum,
      String total,
      int count,
      String returned,
      List<PaymentView> payouts,
      List<SkipView> skipped) {
    static RunView of(PayoutRun.RunView r) {
      return new RunView(
          r.id(),
          r.status(),
          r.createdAt(),
          r.completedAt(),
          Money.format(r.minimum()),
          Money.format(r.total()),
          r.count(),
          Money.format(r.returned()),
          r.payouts().stream()
              .map(
                  p ->
                      new PaymentView(
                          p.accountId(),
                          Money.format(p.amount()),
                          p.payoutId(),
                          p.status(),
                          p.reason(),
                          PayoutExports.reference(p.payoutId()),
                          p.returnedAt()))
              .toList(),
          r.skipped().stream()
              .map(s -> new SkipView(s.accountId(), Money.format(s.amount()), s.reason()))
              .toList());
    }
  }

  record RunSummaryView(
      String id,
      String status,
      Instant createdAt,
      Instant completedAt,
      String minimum,
      String total,
      int count,
      int refusedCount,
      int skippedCount,
      String returned,
      int returnedCount) {}

  record RunList(List<RunSummaryView> runs) {}

  private final ClusterSharding sharding;
  private final Duration timeout;
  private final Duration startTimeout;
  private final PayoutRunReadModel runs;
  private final Idempotency idempotency;
  private final ApiSettings.PayoutDebtor debtor;

  OpsPayoutRoutes(
      ActorSystem<?> system,
      Duration timeout,
      PayoutRunReadModel runs,
      Idempotency idempotency,
      ApiSettings.PayoutDebtor debtor) {
    this.sharding = ClusterSharding.get(system);
    this.timeout = timeout;
    // A run answers when every account has answered; give it longer than one ask, then let the
    // client retry.
    this.startTimeout = timeout.multipliedBy(6);
    this.runs = runs;
    this.idempotency = idempotency;
    this.debtor = debtor;
  }

  Route route() {
    return pathPrefix(
        "payouts",
        () ->
            concat(
                pathEnd(
                    () ->
                        concat(
                            post(
                                () ->
                                    extractUri(
                                        uri ->
                                            optionalHeaderValueByName(
                                                "Idempotency-Key",
                                                key ->
                                                    RequestBody.read(
                                                        body ->
                                                            idempotency.apply(
                                                                "operator",
                                                                uri.path(),
                                                                body,
                                                                () -> start(key, body)))))),
                            get(
                                () ->
                                    parameterOptional(
                                        "limit",
                                        limit ->
                                            onSuccess(
                                                list(limit),
                                                l -> complete(Responses.json(200, l))))))),
                pathPrefix(
                    segment(),
                    runId ->
                        concat(
                            pathEnd(
                                () ->
                                    get(
                                        () ->
                                            onSuccess(
                                                run(runId),
                                                r ->
                                                    complete(Responses.json(200, RunView.of(r)))))),
                            path(
                                "returns",
                                () ->
                                    post(
                                        () ->
                                            RequestBody.read(
                                                body ->
                                                    onSuccess(
                                                        returnPayment(runId, body),
                                                        r ->
                                                            complete(
                                                                Responses.json(
                                                                    200, RunView.of(r))))))),
                            path(
                                "export.csv",
                                () ->
                                    get(() -> onSuccess(completed(runId), r -> complete(csv(r))))),
                            path(
                                "export.xml",
                                () ->
                                    get(
                                        () ->
                                            onSuccess(
                                                completed(runId), r -> complete(xml(r)))))))));
  }

  private CompletionStage<HttpResponse> start(Optional<String> idempotencyKey, ByteString body) {
    StartRequest request = Json.read(body, StartRequest.class);
    long minimum = Amounts.parsePositive("minimum", request.minimum());
    String runId =
        idempotencyKey.map(OpsPayoutRoutes::runIdFor).orElseGet(() -> "pr_" + Ids.random(12));
    return sharding
        .entityRefFor(PayoutRun.ENTITY_KEY, runId)
        .<PayoutRun.RunView>askWithStatus(
            reply -> new PayoutRun.Start(minimum, reply), startTimeout)
        .thenApply(r -> Responses.json(201, RunView.of(r)));
  }

  /** The same operator key always names the same run. */
  static String runIdFor(String idempotencyKey) {
    try {
      byte[] digest =
          MessageDigest.getInstance("SHA-256")
              .digest(("payout-run\0" + idempotencyKey).getBytes(StandardCharsets.UTF_8));
      return "pr_" + HexFormat.of().formatHex(digest, 0, 12);
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }

  private CompletionStage<RunList> list(Optional<String> limitParam) {
    int limit = limitParam.map(l -> Params.positiveInt("limit", l, MAX_PAGE)).orElse(50);
    return runs.latest(limit)
        .thenApply(
            rows ->
                new RunList(
                    rows.stream()
                        .map(
                            r ->
                                new RunSummaryView(
                                    r.runId(),
                                    r.status(),
                                    r.createdAt(),
                                    r.completedAt(),
                                    Money.format(r.minimum()),
                                    Money.format(r.total()),
                                    r.count(),
                                    r.refusedCount(),
                                    r.skippedCount(),
                                    Money.format(r.returnedTotal()),
                                    r.returnedCount()))
                        .toList()));
  }

  private CompletionStage<PayoutRun.RunView> run(String runId) {
    if (runId.length() > 128) throw Problem.notFound("no such payout run");
    return ask(runId, PayoutRun.Get::new);
  }

  /**
   * Records that the bank returned the run's payout to one account: the account takes it back
   * (once), the run shows it as {@code returned}. Safe to send again.
   */
  private CompletionStage<PayoutRun.RunView> returnPayment(String runId, ByteString body) {
    ReturnRequest request = Json.read(body, ReturnRequest.class);
    if (request.accountId() == null || request.accountId().isBlank())
      throw Problem.badRequest("invalid_field", "\"account_id\" is required");
    if (!PayoutReturns.isReasonCode(request.reason()))
      throw Problem.badRequest("invalid_reason", PayoutReturns.REASON_CODE_RULE);
    if (runId.length() > 128 || request.accountId().length() > 128)
      throw Problem.notFound("no such payout run");
    return ask(
        runId, reply -> new PayoutRun.ReturnPayment(request.accountId(), request.reason(), reply));
  }

  /** Exports describe what was paid, so only a completed run has one. */
  private CompletionStage<PayoutRun.RunView> completed(String runId) {
    return run(runId)
        .thenApply(
            r -> {
              if (!r.status().equals("completed")) {
                throw new Problem(
                    409,
                    "payout_run_not_completed",
                    "payout run "
                        + runId
                        + " is still "
                        + r.status()
                        + "; export it once completed");
              }
              return r;
            });
  }

  private HttpResponse csv(PayoutRun.RunView run) {
    return attachment(
        HttpEntities.create(ContentTypes.TEXT_CSV_UTF8, PayoutExports.csv(run)), run.id() + ".csv");
  }

  private HttpResponse xml(PayoutRun.RunView run) {
    if (!PayoutExports.configured(debtor)) {
      throw new Problem(
          503,
          "payout_debtor_not_configured",
          "set tickmark.payouts.debtor (TICKMARK_PAYOUT_DEBTOR_NAME, _IBAN, _BIC) to the account payouts are paid from");
    }
    if (PayoutExports.paid(run).isEmpty()) {
      throw new Problem(
          409,
          "nothing_to_export",
          "payout run " + run.id() + " paid nobody; a pain.001 needs at least one transfer");
    }
    return attachment(
        HttpEntities.create(
            ContentTypes.create(
                MediaTypes.APPLICATION_XML, org.apache.pekko.http.javadsl.model.HttpCharsets.UTF_8),
            PayoutExports.pain001(run, debtor)),
        run.id() + ".xml");
  }

  private static HttpResponse attachment(
      org.apache.pekko.http.javadsl.model.ResponseEntity entity, String filename) {
    return HttpResponse.create()
        .withEntity(entity)
        .addHeader(
            ContentDisposition.create(
                ContentDispositionTypes.ATTACHMENT, java.util.Map.of("filename", filename)));
  }

  private <T> CompletionStage<T> ask(
      String runId, Function<ActorRef<StatusReply<T>>, PayoutRun.Command> command) {
    return sharding
        .entityRefFor(PayoutRun.ENTITY_KEY, runId)
        .askWithStatus(command::apply, timeout);
  }
}
