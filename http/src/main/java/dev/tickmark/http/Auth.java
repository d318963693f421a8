package dev.tickmark.http;

import static org.apache.pekko.http.javadsl.server.Directives.*;

import dev.tickmark.persistence.auth.ApiKeys;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.Optional;
import java.util.function.Function;
import org.apache.pekko.http.javadsl.server.Route;

/** Bearer authentication: API keys for customers, a separate token for operators. */
public final class Auth {
  private final ApiKeys apiKeys;
  private final byte[] operatorToken;

  public Auth(ApiKeys apiKeys, String operatorToken) {
    this.apiKeys = apiKeys;
    this.operatorToken = operatorToken.getBytes(StandardCharsets.UTF_8);
  }

  /**
   * Runs {@code inner} with the caller's account id, or answers 401 (no key, an unknown or revoked
   * one) or 403 {@code insufficient_scope} (a key not allowed to do this: {@link Scopes}).
   */
  public Route account(Function<String, Route> inner) {
    return extractRequest(
        request ->
            optionalHeaderValueByName(
                "Authorization",
                header -> {
                  Optional<String> token = bearer(header);
                  if (token.isEmpty())
                    return complete(
                        Problem.unauthorized("send Authorization: Bearer <api key>").toResponse());
                  String needed =
                      Scopes.required(request.method().value(), request.getUri().path());
                  return onSuccess(
                      apiKeys.principal(token.get()),
                      principal -> {
                        if (principal.isEmpty())
                          return complete(
                              Problem.unauthorized("the API key is unknown or revoked")
                                  .toResponse());
                        if (!principal.get().scopes().contains(needed))
                          return complete(
                              new Problem(
                                      403,
                                      "insufficient_scope",
                                      "this API key may not do this: it needs the \""
                                          + needed
                                          + "\" scope (it has "
                                          + String.join(
                                              ", ",
                                              new java.util.TreeSet<>(principal.get().scopes()))
                                          + ")")
                                  .toResponse());
                        return inner.apply(principal.get().accountId());
                      });
                }));
  }

  /** Runs {@code inner} for the operator, or answers 401; customer keys never pass here. */
  public Route operator(java.util.function.Supplier<Route> inner) {
    return optionalHeaderValueByName(
        "Authorization",
        header -> {
          Optional<String> token = bearer(header);
          boolean ok =
              token.isPresent()
                  && MessageDigest.isEqual(
                      token.get().getBytes(StandardCharsets.UTF_8), operatorToken);
          return ok
              ? inner.get()
              : complete(
                  Problem.unauthorized("operator endpoints need the operator token").toResponse());
        });
  }

  private static Optional<String> bearer(Optional<String> header) {
    return header
        .filter(h -> h.regionMatches(true, 0, "Bearer ", 0, 7))
        .map(h -> h.substring(7).trim())
        .filter(t -> !t.isEmpty());
  }
}
