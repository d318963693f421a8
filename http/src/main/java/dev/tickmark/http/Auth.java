package dev.tickmark.http;

import static org.apache.pekko.http.javadsl.server.Directives.*;

import dev.tickmark.persistence.auth.ApiKeys;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletionStage;
import java.util.function.BiFunction;
import java.util.function.Function;
import org.apache.pekko.http.javadsl.server.Route;

/**
 * Bearer authentication: API keys for customers (rate-limited per key, {@link RateLimits}), named
 * tokens for operators.
 */
public final class Auth {
  private final ApiKeys apiKeys;
  private final java.util.List<java.util.Map.Entry<String, byte[]>> operatorTokens;
  private final RateLimits rateLimits;

  /**
   * @param operatorTokens each operator's name and token (the name is what the audit log records)
   */
  public Auth(
      ApiKeys apiKeys, java.util.Map<String, String> operatorTokens, RateLimits rateLimits) {
    this.apiKeys = apiKeys;
    this.operatorTokens =
        operatorTokens.entrySet().stream()
            .map(
                e -> java.util.Map.entry(e.getKey(), e.getValue().getBytes(StandardCharsets.UTF_8)))
            .toList();
    this.rateLimits = rateLimits;
  }

  /**
   * Runs {@code inner} with the caller's account id, or answers 401 (no key, an unknown or revoked
   * one; {@code key_expired} for one past its expiry), 429 {@code rate_limited} (the key's rate is
   * spent: counted before the key is looked up) or 403 {@code insufficient_scope} (a key not
   * allowed to do this: {@link Scopes}).
   */
  public Route account(Function<String, Route> inner) {
    return authorized(apiKeys::principal, principal -> inner.apply(principal.accountId()));
  }

  /**
   * The same, with the account's SSH public keys read in the same statement as the key ({@link
   * ApiKeys#principalWithSshKeys}): for a launch, which gives them to its workload.
   */
  public Route accountWithSshKeys(BiFunction<String, List<String>, Route> inner) {
    return authorized(
        apiKeys::principalWithSshKeys,
        principal -> inner.apply(principal.accountId(), principal.sshPublicKeys()));
  }

  private Route authorized(
      Function<String, CompletionStage<Optional<ApiKeys.Principal>>> lookup,
      Function<ApiKeys.Principal, Route> inner) {
    return extractRequest(
        request ->
            optionalHeaderValueByName(
                "Authorization",
                header -> {
                  Optional<String> token = bearer(header);
                  if (token.isEmpty())
                    return complete(
                        Problem.unauthorized("send Authorization: Bearer <api key>").toResponse());
                  if (!ApiKeys.wellFormed(token.get()))
                    return complete(
                        Problem.unauthorized("the API key is unknown or revoked").toResponse());
                  String needed =
                      Scopes.required(request.method().value(), request.getUri().path());
                  return rateLimits.perKey(
                      token.get(), () -> authenticated(lookup.apply(token.get()), needed, inner));
                }));
  }

  private Route authenticated(
      CompletionStage<Optional<ApiKeys.Principal>> found,
      String needed,
      Function<ApiKeys.Principal, Route> inner) {
    return onSuccess(
        found,
        principal -> {
          if (principal.isEmpty())
            return complete(Problem.unauthorized("the API key is unknown or revoked").toResponse());
          if (principal.get().expired())
            return complete(
                new Problem(
                        401,
                        "key_expired",
                        "the API key expired at "
                            + principal.get().expiresAt()
                            + "; create a new one")
                    .toResponse());
          if (!principal.get().scopes().contains(needed))
            return complete(
                new Problem(
                        403,
                        "insufficient_scope",
                        "this API key may not do this: it needs the \""
                            + needed
                            + "\" scope (it has "
                            + String.join(", ", new java.util.TreeSet<>(principal.get().scopes()))
                            + ")")
                    .toResponse());
          return inner.apply(principal.get());
        });
  }

  /**
   * Runs {@code inner} with the name of the operator whose token the request carries, or answers
   * 401; customer keys never pass here.
   */
  public Route operator(Function<String, Route> inner) {
    return optionalHeaderValueByName(
        "Authorization",
        header -> {
          Optional<String> name = bearer(header).flatMap(this::operatorNamed);
          return name.isPresent()
              ? inner.apply(name.get())
              : complete(
                  Problem.unauthorized("operator endpoints need an operator token").toResponse());
        });
  }

  /** The operator a token belongs to; every token is compared, in constant time each. */
  private Optional<String> operatorNamed(String token) {
    byte[] presented = token.getBytes(StandardCharsets.UTF_8);
    String found = null;
    for (java.util.Map.Entry<String, byte[]> e : operatorTokens)
      if (MessageDigest.isEqual(presented, e.getValue()) && found == null) found = e.getKey();
    return Optional.ofNullable(found);
  }

  private static Optional<String> bearer(Optional<String> header) {
    return header
        .filter(h -> h.regionMatches(true, 0, "Bearer ", 0, 7))
        .map(h -> h.substring(7).trim())
        .filter(t -> !t.isEmpty());
  }
}
