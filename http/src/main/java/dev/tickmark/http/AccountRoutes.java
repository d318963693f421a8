package dev.tickmark.http;

import static org.apache.pekko.http.javadsl.server.Directives.*;
import static org.apache.pekko.http.javadsl.server.PathMatchers.segment;
import static org.apache.pekko.http.javadsl.server.PathMatchers.slash;

import dev.tickmark.engine.account.Account;
import dev.tickmark.engine.money.Money;
import dev.tickmark.persistence.auth.ApiKeys;
import dev.tickmark.persistence.auth.SshKeys;
import dev.tickmark.persistence.ledger.LedgerReadModel;
import dev.tickmark.wire.SshPublicKeys;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletionStage;
import org.apache.pekko.http.javadsl.server.Route;

/** Sign-up, the caller's own account, its spend cap, its ledger and its API keys. */
public final class AccountRoutes {
  /** The operations {@link #route()} serves; the tests hold it to the code and to openapi.json. */
  static final java.util.List<Operation> OPERATIONS =
      java.util.List.of(
          Operation.post("/v1/accounts"),
          Operation.get("/v1/account"),
          Operation.put("/v1/account/spend-cap"),
          Operation.put("/v1/account/payout-details"),
          Operation.get("/v1/account/audit"),
          Operation.get("/v1/account/ledger"),
          Operation.post("/v1/account/ssh-keys"),
          Operation.get("/v1/account/ssh-keys"),
          Operation.delete("/v1/account/ssh-keys/{id}"),
          Operation.post("/v1/account/api-keys"),
          Operation.get("/v1/account/api-keys"),
          Operation.delete("/v1/account/api-keys/{id}"));

  record SignUpRequest(String name) {}

  record PayoutDetailsRequest(String holderName, String iban, String bic) {}

  record SignUpResponse(AccountView account, String apiKey) {}

  /** {@code expires_at} (RFC 3339) or {@code expires_in_days}, at most one; neither: no expiry. */
  record ApiKeyRequest(
      String label, List<String> scopes, String expiresAt, Integer expiresInDays) {}

  record CreatedKeyView(
      String id,
      String prefix,
      String apiKey,
      String label,
      Instant createdAt,
      List<String> scopes,
      Instant expiresAt) {}

  record KeyView(
      String id,
      String prefix,
      String label,
      Instant createdAt,
      Instant revokedAt,
      List<String> scopes,
      Instant lastUsedAt,
      Instant expiresAt) {}

  /** The furthest a key's expiry may be set. */
  static final int MAX_EXPIRY_DAYS = 3650;

  record KeyList(List<KeyView> keys) {}

  record EntryView(
      String id, Instant at, String kind, String amount, String rentalId, String key) {}

  record Statement(List<EntryView> entries, String nextAfter) {}

  static final int MAX_PAGE = 500;

  private final Accounts accounts;
  private final ApiKeys apiKeys;
  private final SshKeys sshKeys;
  private final LedgerReadModel ledger;
  private final Auth auth;
  private final SpendCaps spendCaps;
  private final Duration readYourWritesWait;
  private final RateLimits rateLimits;
  private final java.time.Clock clock;

  public AccountRoutes(
      Accounts accounts,
      ApiKeys apiKeys,
      SshKeys sshKeys,
      LedgerReadModel ledger,
      Auth auth,
      RateLimits rateLimits,
      java.time.Clock clock,
      Duration readYourWritesWait) {
    this.rateLimits = rateLimits;
    this.clock = clock;
    this.accounts = accounts;
    this.apiKeys = apiKeys;
    this.sshKeys = sshKeys;
    this.ledger = ledger;
    this.auth = auth;
    this.spendCaps = new SpendCaps(accounts);
    this.readYourWritesWait = readYourWritesWait;
  }

  public Route route() {
    return concat(
        path(
            "accounts",
            () ->
                post(
                    () ->
                        // no credential to count by: sign-ups are limited per client address
                        rateLimits.perAddress(
                            () ->
                                Responses.noStore(
                                    () ->
                                        RequestBody.read(
                                            body ->
                                                completeWithFuture(
                                                    signUp(
                                                        Json.read(body, SignUpRequest.class)))))))),
        // "/v1/account" and "/v1/account/..." only: a bare prefix would also match "/v1/accounts".
        pathPrefix(
            "account",
            () ->
                concat(
                    pathEnd(
                        () ->
                            auth.account(
                                accountId ->
                                    get(
                                        () ->
                                            onSuccess(
                                                accounts.openSummary(accountId),
                                                s ->
                                                    complete(
                                                        Responses.json(200, AccountView.of(s))))))),
                    rawPathPrefixTest(slash(), () -> auth.account(this::ownAccount)))));
  }

  private Route ownAccount(String accountId) {
    return concat(
        path(
            "spend-cap",
            () ->
                put(
                    () ->
                        RequestBody.read(
                            body ->
                                onSuccess(
                                    spendCaps.set(accountId, body),
                                    s -> complete(Responses.json(200, AccountView.of(s))))))),
        path(
            "payout-details",
            () ->
                put(
                    () ->
                        RequestBody.read(
                            body ->
                                onSuccess(
                                    setPayoutDetails(accountId, body),
                                    s -> complete(Responses.json(200, AccountView.of(s))))))),
        path(
            "audit",
            () ->
                get(
                    () ->
                        onSuccess(
                            ledger
                                .awaitAccount(accountId, readYourWritesWait)
                                .thenCompose(caughtUp -> ledger.audit(accountId, 200)),
                            entries -> complete(Responses.json(200, new AuditTrail(entries)))))),
        path(
            "ledger",
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
                                            statement(accountId, limit, after),
                                            st -> complete(Responses.json(200, st))))))),
        pathPrefix(
            "ssh-keys",
            () ->
                concat(
                    pathEnd(
                        () ->
                            concat(
                                post(
                                    () ->
                                        RequestBody.read(
                                            body ->
                                                onSuccess(
                                                    addSshKey(accountId, body),
                                                    key -> complete(Responses.json(201, key))))),
                                get(
                                    () ->
                                        onSuccess(
                                            sshKeys.list(accountId),
                                            keys ->
                                                complete(
                                                    Responses.json(
                                                        200,
                                                        new SshKeyList(
                                                            keys.stream()
                                                                .map(AccountRoutes::sshKeyView)
                                                                .toList()))))))),
                    path(
                        segment(),
                        keyId ->
                            delete(
                                () ->
                                    onSuccess(
                                        sshKeys.delete(accountId, keyId),
                                        deleted ->
                                            deleted
                                                ? complete(Responses.noContent())
                                                : complete(
                                                    Problem.notFound("no such SSH key")
                                                        .toResponse())))))),
        pathPrefix(
            "api-keys",
            () ->
                concat(
                    pathEnd(
                        () ->
                            concat(
                                post(
                                    () ->
                                        Responses.noStore(
                                            () ->
                                                RequestBody.read(
                                                    body ->
                                                        onSuccess(
                                                            createKey(accountId, body),
                                                            key ->
                                                                complete(
                                                                    Responses.json(201, key)))))),
                                get(
                                    () ->
                                        onSuccess(
                                            apiKeys.list(accountId),
                                            keys ->
                                                complete(Responses.json(200, keyList(keys))))))),
                    path(
                        segment(),
                        keyId ->
                            delete(
                                () ->
                                    onSuccess(
                                        apiKeys.revoke(accountId, keyId),
                                        revoked ->
                                            revoked
                                                ? complete(Responses.noContent())
                                                : complete(
                                                    Problem.notFound("no such API key")
                                                        .toResponse())))))));
  }

  private CompletionStage<org.apache.pekko.http.javadsl.model.HttpResponse> signUp(
      SignUpRequest request) {
    String name = request.name() == null ? "" : request.name().strip();
    if (name.isEmpty() || name.length() > 200)
      throw Problem.badRequest("invalid_name", "name must be 1 to 200 characters");
    String id = Ids.account();
    return accounts
        .<Account.Summary>ask(id, reply -> new Account.Open(name, reply))
        .thenCompose(
            summary ->
                apiKeys
                    .create(id, "default")
                    .thenApply(
                        key ->
                            Responses.json(
                                201, new SignUpResponse(AccountView.of(summary), key.apiKey()))));
  }

  /**
   * The engine validates the IBAN (SEPA country, length, checksum) and the BIC; the edge only
   * checks presence.
   */
  private CompletionStage<Account.Summary> setPayoutDetails(
      String accountId, org.apache.pekko.util.ByteString body) {
    PayoutDetailsRequest request = Json.read(body, PayoutDetailsRequest.class);
    if (request.holderName() == null)
      throw Problem.badRequest("missing_field", "\"holder_name\" is required");
    if (request.iban() == null) throw Problem.badRequest("invalid_iban", "\"iban\" is required");
    return accounts.ask(
        accountId,
        reply ->
            new Account.SetPayoutDetails(
                request.holderName(), request.iban(), request.bic(), reply));
  }

  private CompletionStage<Statement> statement(
      String accountId, Optional<String> limitParam, Optional<String> afterParam) {
    int limit = limitParam.map(l -> Params.positiveInt("limit", l, MAX_PAGE)).orElse(100);
    long after = afterParam.map(a -> Params.nonNegativeLong("after", a)).orElse(0L);
    // the account's events so far are in the ledger first: a deposit acknowledged a moment ago is
    // in the statement
    return ledger
        .awaitAccount(accountId, readYourWritesWait)
        .thenCompose(caughtUp -> ledger.statement(accountId, after, limit))
        .thenApply(
            entries -> {
              List<EntryView> views =
                  entries.stream()
                      .map(
                          e ->
                              new EntryView(
                                  Long.toString(e.id()),
                                  e.at(),
                                  e.kind(),
                                  Money.format(e.amount()),
                                  e.rentalId(),
                                  e.key()))
                      .toList();
              String next =
                  entries.size() == limit
                      ? Long.toString(entries.get(entries.size() - 1).id())
                      : null;
              return new Statement(views, next);
            });
  }

  private CompletionStage<CreatedKeyView> createKey(
      String accountId, org.apache.pekko.util.ByteString body) {
    ApiKeyRequest request =
        body.isEmpty()
            ? new ApiKeyRequest(null, null, null, null)
            : Json.read(body, ApiKeyRequest.class);
    Instant expiresAt = expiry(request, clock.instant());
    if (request.label() != null && request.label().length() > 200)
      throw Problem.badRequest("invalid_label", "label is at most 200 characters");
    // A new key may rent, provide and read unless payouts are asked for by name.
    if (request.scopes() != null && request.scopes().contains(null))
      throw Problem.badRequest("invalid_scope", "scopes must not contain null");
    java.util.Set<String> scopes =
        request.scopes() == null
            ? java.util.Set.of("read", "rent", "provide")
            : java.util.Set.copyOf(request.scopes());
    if (scopes.isEmpty() || !ApiKeys.ALL_SCOPES.containsAll(scopes))
      throw Problem.badRequest(
          "invalid_scope",
          "scopes must be a non-empty list of: "
              + String.join(", ", new java.util.TreeSet<>(ApiKeys.ALL_SCOPES)));
    return apiKeys
        .create(accountId, request.label(), scopes, expiresAt)
        .thenApply(
            k ->
                new CreatedKeyView(
                    k.keyId(),
                    ApiKeys.PREFIX + k.keyId(),
                    k.apiKey(),
                    request.label(),
                    k.createdAt(),
                    List.copyOf(new java.util.TreeSet<>(scopes)),
                    k.expiresAt()));
  }

  /**
   * When a new key stops working: {@code expires_at} (a future RFC 3339 instant) or {@code
   * expires_in_days} from now, within {@link #MAX_EXPIRY_DAYS} days, to the second; null for a key
   * that does not expire. Anything else is 400 {@code invalid_expiry}.
   */
  static Instant expiry(ApiKeyRequest request, Instant now) {
    if (request.expiresAt() != null && request.expiresInDays() != null)
      throw Problem.badRequest("invalid_expiry", "give expires_at or expires_in_days, not both");
    Instant latest = now.plus(Duration.ofDays(MAX_EXPIRY_DAYS));
    if (request.expiresInDays() != null) {
      int days = request.expiresInDays();
      if (days < 1 || days > MAX_EXPIRY_DAYS)
        throw Problem.badRequest(
            "invalid_expiry", "expires_in_days must be from 1 to " + MAX_EXPIRY_DAYS);
      return now.plus(Duration.ofDays(days)).truncatedTo(java.time.temporal.ChronoUnit.SECONDS);
    }
    if (request.expiresAt() == null) return null;
    Instant at;
    try {
      at = java.time.OffsetDateTime.parse(request.expiresAt()).toInstant();
    } catch (java.time.format.DateTimeParseException e) {
      throw Problem.badRequest(
          "invalid_expiry",
          "expires_at must be an RFC 3339 date and time, e.g. 2027-01-31T00:00:00Z");
    }
    if (!at.isAfter(now))
      throw Problem.badRequest("invalid_expiry", "expires_at must be in the future");
    if (at.isAfter(latest))
      throw Problem.badRequest(
          "invalid_expiry", "expires_at is at most " + MAX_EXPIRY_DAYS + " days ahead");
    return at.truncatedTo(java.time.temporal.ChronoUnit.SECONDS);
  }

  /** {@code GET /v1/account/audit}: the latest 200 changes, newest first. */
  record AuditTrail(List<LedgerReadModel.AuditEntry> entries) {}

  record SshKeyRequest(String name, String publicKey) {}

  record SshKeyView(
      String id, String name, String publicKey, String fingerprint, java.time.Instant createdAt) {}

  record SshKeyList(List<SshKeyView> sshKeys) {}

  private static SshKeyView sshKeyView(SshKeys.SshKey k) {
    return new SshKeyView(k.keyId(), k.name(), k.publicKey(), k.fingerprint(), k.createdAt());
  }

  /** A key is stored as {@code type base64 comment}, checked first; one key at most once. */
  private CompletionStage<SshKeyView> addSshKey(
      String accountId, org.apache.pekko.util.ByteString body) {
    SshKeyRequest request = Json.read(body, SshKeyRequest.class);
    String name = request.name() == null ? "" : request.name().strip();
    if (name.isEmpty() || name.length() > 200)
      throw Problem.badRequest("invalid_name", "name must be 1 to 200 characters");
    if (request.publicKey() == null || request.publicKey().strip().contains("\n"))
      throw Problem.badRequest("invalid_ssh_key", "public_key must be one OpenSSH public key line");
    SshPublicKeys.Key key =
        SshPublicKeys.parse(request.publicKey())
            .orElseThrow(
                () ->
                    Problem.badRequest(
                        "invalid_ssh_key",
                        "public_key is not an OpenSSH public key line (type base64 [comment]; types: "
                            + String.join(", ", new java.util.TreeSet<>(SshPublicKeys.TYPES))
                            + ")"));
    String line =
        key.comment().isEmpty() ? key.withoutComment() : key.withoutComment() + " " + key.comment();
    return sshKeys
        .add(accountId, name, line, key.fingerprint())
        .thenApply(
            added ->
                added
                    .key()
                    .map(AccountRoutes::sshKeyView)
                    .orElseThrow(
                        () ->
                            added.refusal() == SshKeys.Refusal.DUPLICATE
                                ? new Problem(
                                    409,
                                    "already_exists",
                                    "this key ("
                                        + key.fingerprint()
                                        + ") is already on the account")
                                : new Problem(
                                    409,
                                    "too_many_ssh_keys",
                                    "an account has at most "
                                        + SshKeys.MAX_PER_ACCOUNT
                                        + " SSH keys; delete one first")));
  }

  private static KeyList keyList(List<ApiKeys.KeyInfo> keys) {
    return new KeyList(
        keys.stream()
            .map(
                k ->
                    new KeyView(
                        k.keyId(),
                        k.prefix(),
                        k.label(),
                        k.createdAt(),
                        k.revokedAt(),
                        List.copyOf(new java.util.TreeSet<>(k.scopes())),
                        k.lastUsedAt(),
                        k.expiresAt()))
            .toList());
  }
}
