package dev.tickmark.http;

import static org.apache.pekko.http.javadsl.server.Directives.*;
import static org.apache.pekko.http.javadsl.server.PathMatchers.segment;

import dev.tickmark.engine.account.Account;
import dev.tickmark.engine.money.Money;
import dev.tickmark.persistence.ledger.LedgerReadModel;
import java.util.concurrent.CompletionStage;
import org.apache.pekko.http.javadsl.model.HttpResponse;
import org.apache.pekko.http.javadsl.server.Route;
import org.apache.pekko.util.ByteString;

/** Operator endpoints under {@code /ops}, behind the operator token. */
public final class OpsRoutes {
  /** The operations {@link #route()} serves; the tests hold it to the code and to openapi.json. */
  static final java.util.List<Operation> OPERATIONS =
      java.util.List.of(
          Operation.get("/ops/accounts/{id}"),
          Operation.post("/ops/accounts/{id}/deposits"),
          Operation.put("/ops/accounts/{id}/spend-cap"),
          Operation.post("/ops/accounts/{id}/suspend"),
          Operation.post("/ops/accounts/{id}/resume"),
          Operation.get("/ops/ledger/audit"),
          Operation.get("/ops/audit"));

  static final int MAX_AUDIT_PAGE = 200;

  /** {@code GET /ops/audit}: operator actions, newest first. */
  record OperatorActionView(
      String id,
      java.time.Instant at,
      String operator,
      String action,
      String target,
      int status,
      String clientAddress) {
    static OperatorActionView of(dev.tickmark.persistence.ops.OperatorAudit.Entry e) {
      return new OperatorActionView(
          Long.toString(e.id()),
          e.at(),
          e.operator(),
          e.action(),
          e.target(),
          e.status(),
          e.clientAddress());
    }
  }

  record OperatorActionPage(java.util.List<OperatorActionView> entries, String nextBefore) {}

  record DepositRequest(String amount, String reference) {}

  record SuspendRequest(String reason) {}

  record DepositView(
      String accountId, String reference, String amount, boolean duplicate, String key) {}

  record OpsAccountView(
      String id,
      String name,
      String currency,
      String balance,
      String held,
      String available,
      String earnings,
      String spendCapMonthly,
      String spentThisMonth,
      String deposited,
      String captured,
      String credited,
      String platformCredited,
      String paidOut,
      String status,
      boolean suspended,
      String suspensionReason,
      java.time.Instant suspendedAt,
      AccountView.PayoutDetailsView payoutDetails,
      AccountView.PayoutReturnedView payoutReturned) {
    static OpsAccountView of(Account.Summary s) {
      return new OpsAccountView(
          s.id(),
          s.name(),
          "EUR",
          Money.format(s.balance()),
          Money.format(s.held()),
          Money.format(s.available()),
          Money.format(s.earnings()),
          s.spendCapMonthly() == null ? null : Money.format(s.spendCapMonthly()),
          Money.format(s.spentThisMonth()),
          Money.format(s.deposited()),
          Money.format(s.captured()),
          Money.format(s.credited()),
          Money.format(s.platformCredited()),
          Money.format(s.paidOut()),
          AccountView.status(s),
          s.suspended(),
          s.suspended() ? s.suspension().reason() : null,
          s.suspended() ? s.suspension().at() : null,
          AccountView.PayoutDetailsView.of(s.payoutDetails()),
          AccountView.PayoutReturnedView.of(s.payoutReturned()));
    }
  }

  record AuditView(
      String currency,
      String deposits,
      String captures,
      String providerEarnings,
      String platformRevenue,
      String storageRevenue,
      String holdsPlaced,
      String holdsReleased,
      String holdsOpen,
      String payouts,
      String payoutsReturned,
      String refunds,
      String earningsReversed,
      String platformFeesReversed,
      String pendingRefunds,
      String pendingReversals,
      String providerDebt,
      String renterBalances,
      String providerEarningsOwed,
      String pendingCaptures,
      String pendingCredits,
      long mismatchedSettlements,
      long accountsBelowZero,
      long entries,
      boolean conserved) {
    static AuditView of(LedgerReadModel.Audit a) {
      return new AuditView(
          "EUR",
          Money.format(a.deposits()),
          Money.format(a.captures()),
          Money.format(a.providerEarnings()),
          Money.format(a.platformRevenue()),
          Money.format(a.storageRevenue()),
          Money.format(a.holdsPlaced()),
          Money.format(a.holdsReleased()),
          Money.format(a.holdsOpen()),
          Money.format(a.payouts()),
          Money.format(a.payoutsReturned()),
          Money.format(a.refunds()),
          Money.format(a.earningsReversed()),
          Money.format(a.platformFeesReversed()),
          Money.format(a.pendingRefunds()),
          Money.format(a.pendingReversals()),
          Money.format(a.providerDebt()),
          Money.format(a.renterBalances()),
          Money.format(a.providerEarningsOwed()),
          Money.format(a.pendingCaptures()),
          Money.format(a.pendingCredits()),
          a.mismatchedSettlements(),
          a.accountsBelowZero(),
          a.entries(),
          a.conserved());
    }
  }

  private final Accounts accounts;
  private final LedgerReadModel ledger;
  private final Auth auth;
  private final Idempotency idempotency;
  private final SpendCaps spendCap;
  private final OpsHostRoutes hostRoutes;
  private final OpsRentalRoutes rentalRoutes;
  private final OpsPayoutRoutes payoutRoutes;
  private final OperatorActions actions;
  private final dev.tickmark.persistence.ops.OperatorAudit operatorAudit;

  OpsRoutes(
      Accounts accounts,
      LedgerReadModel ledger,
      Auth auth,
      Idempotency idempotency,
      OpsHostRoutes hostRoutes,
      OpsRentalRoutes rentalRoutes,
      OpsPayoutRoutes payoutRoutes,
      OperatorActions actions,
      dev.tickmark.persistence.ops.OperatorAudit operatorAudit) {
    this.accounts = accounts;
    this.ledger = ledger;
    this.auth = auth;
    this.idempotency = idempotency;
    this.spendCap = new SpendCaps(accounts);
    this.hostRoutes = hostRoutes;
    this.rentalRoutes = rentalRoutes;
    this.payoutRoutes = payoutRoutes;
    this.actions = actions;
    this.operatorAudit = operatorAudit;
  }

  public Route route() {
    return auth.operator(operator -> actions.recorded(operator, this::operatorRoutes));
  }

  private Route operatorRoutes() {
    return concat(
        path("audit", () -> get(this::operatorActions)),
        hostRoutes.route(),
        rentalRoutes.route(),
        payoutRoutes.route(),
        pathPrefix(
            segment("accounts").slash(segment()),
            accountId ->
                concat(
                    pathEnd(
                        () ->
                            get(
                                () ->
                                    onSuccess(
                                        accounts.openSummary(accountId),
                                        s -> complete(Responses.json(200, OpsAccountView.of(s)))))),
                    path(
                        "deposits",
                        () ->
                            post(
                                () ->
                                    extractUri(
                                        uri ->
                                            RequestBody.read(
                                                body ->
                                                    idempotency.apply(
                                                        "operator",
                                                        uri.path(),
                                                        body,
                                                        () -> deposit(accountId, body)))))),
                    path(
                        "spend-cap",
                        () ->
                            put(
                                () ->
                                    RequestBody.read(
                                        body ->
                                            onSuccess(
                                                spendCap.set(accountId, body),
                                                s ->
                                                    complete(
                                                        Responses.json(
                                                            200, OpsAccountView.of(s))))))),
                    path(
                        "suspend",
                        () ->
                            post(
                                () ->
                                    RequestBody.read(
                                        body ->
                                            onSuccess(
                                                suspend(accountId, body),
                                                s ->
                                                    complete(
                                                        Responses.json(
                                                            200, OpsAccountView.of(s))))))),
                    path(
                        "resume",
                        () ->
                            post(
                                () ->
                                    onSuccess(
                                        resume(accountId),
                                        s ->
                                            complete(
                                                Responses.json(200, OpsAccountView.of(s)))))))),
        path(
            segment("ledger").slash("audit"),
            () ->
                get(
                    () ->
                        onSuccess(
                            ledger.audit(),
                            audit -> complete(Responses.json(200, AuditView.of(audit)))))));
  }

  private Route operatorActions() {
    return parameterOptional(
        "limit",
        limit ->
            parameterOptional(
                "before",
                before ->
                    parameterOptional(
                        "operator",
                        operator ->
                            onSuccess(
                                operatorActionPage(limit, before, operator),
                                page -> complete(Responses.json(200, page))))));
  }

  private CompletionStage<OperatorActionPage> operatorActionPage(
      java.util.Optional<String> limitParam,
      java.util.Optional<String> beforeParam,
      java.util.Optional<String> operator) {
    int limit = limitParam.map(l -> Params.positiveInt("limit", l, MAX_AUDIT_PAGE)).orElse(50);
    long before = beforeParam.map(b -> Params.nonNegativeLong("before", b)).orElse(0L);
    String byOperator = operator.map(o -> Params.text("operator", o, 64)).orElse(null);
    return operatorAudit
        .latest(before, byOperator, limit)
        .thenApply(
            rows ->
                new OperatorActionPage(
                    rows.stream().map(OperatorActionView::of).toList(),
                    rows.size() == limit ? Long.toString(rows.get(rows.size() - 1).id()) : null));
  }

  /**
   * Suspends an open account (404 for an unknown one): no new rentals, no payouts; what runs goes
   * on.
   */
  private CompletionStage<Account.Summary> suspend(String accountId, ByteString body) {
    String reason = body.isEmpty() ? null : Json.read(body, SuspendRequest.class).reason();
    if (reason != null && reason.length() > 500)
      throw Problem.badRequest("invalid_field", "\"reason\" is at most 500 characters");
    return accounts
        .openSummary(accountId)
        .thenCompose(
            s ->
                accounts.<Account.Summary>ask(
                    accountId, reply -> new Account.Suspend(reason, reply)));
  }

  private CompletionStage<Account.Summary> resume(String accountId) {
    return accounts
        .openSummary(accountId)
        .thenCompose(s -> accounts.<Account.Summary>ask(accountId, Account.Resume::new));
  }

  private CompletionStage<HttpResponse> deposit(String accountId, ByteString body) {
    DepositRequest request = Json.read(body, DepositRequest.class);
    long amount = Amounts.parsePositive("amount", request.amount());
    String reference = request.reference();
    if (reference == null || reference.isBlank() || reference.length() > 200) {
      throw Problem.badRequest(
          "invalid_field", "\"reference\" is required (at most 200 characters)");
    }
    return accounts
        .<Account.Posting>ask(
            accountId, reply -> new Account.Deposit("manual:" + reference, amount, reply))
        .thenApply(
            p ->
                Responses.json(
                    p.duplicate() ? 200 : 201,
                    new DepositView(
                        accountId, reference, Money.format(p.amount()), p.duplicate(), p.key())));
  }
}
