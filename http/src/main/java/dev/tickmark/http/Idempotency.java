package dev.tickmark.http;

import static org.apache.pekko.http.javadsl.server.Directives.*;

import dev.tickmark.persistence.auth.IdempotencyKeys;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.function.Function;
import java.util.function.Supplier;
import org.apache.pekko.http.javadsl.model.ContentTypes;
import org.apache.pekko.http.javadsl.model.HttpEntities;
import org.apache.pekko.http.javadsl.model.HttpResponse;
import org.apache.pekko.http.javadsl.model.StatusCodes;
import org.apache.pekko.http.javadsl.server.Route;
import org.apache.pekko.util.ByteString;

/**
 * {@code Idempotency-Key} on money-moving POSTs: the same key and body get the first response
 * again; the same key with another body gets 409 {@code idempotency_key_reused}. 5xx answers are
 * not kept, so a retry after an outage runs the request again (the engine's own posting keys keep
 * that safe, and a request that creates something derives its id from the key's {@link Attempt#seed
 * seed}, so the retry finds it instead of creating it twice). A key is remembered for a day by
 * default (then a request with it runs afresh), and one whose request never answered (its node
 * crashed) is taken over by the next request with the same body after a minute: see {@link
 * IdempotencyKeys}.
 */
public final class Idempotency {
  private final IdempotencyKeys keys;

  public Idempotency(IdempotencyKeys keys) {
    this.keys = keys;
  }

  /**
   * What a request run under {@code Idempotency-Key} knows of its key: its seed, and whether a
   * failure is known to have left nothing behind.
   */
  public static final class Attempt {
    private static final Attempt WITHOUT_KEY = new Attempt(null, false);

    private final Long seed;
    private final boolean seedDrawn;
    private volatile boolean leftNothing;

    private Attempt(Long seed, boolean seedDrawn) {
      this.seed = seed;
      this.seedDrawn = seedDrawn;
    }

    /**
     * Drawn once per key and kept across retries of the same request after a 5xx or a crash, so an
     * id derived from it names what the first attempt may have created; null without a key.
     */
    public Long seed() {
      return seed;
    }

    /**
     * Whether {@link #seed} was drawn for this attempt: no earlier attempt with the key can have
     * derived anything from it (false without a key, and for a retry that kept the seed).
     */
    public boolean seedDrawn() {
      return seedDrawn;
    }

    /**
     * The request fails with a 5xx that is known to have left nothing behind (not "no answer in
     * time"): a retry with the key starts afresh, with a new seed.
     */
    public void leftNothing() {
      leftNothing = true;
    }
  }

  public Route apply(
      String principal,
      String path,
      ByteString body,
      Supplier<CompletionStage<HttpResponse>> action) {
    return applyWith(principal, path, body, attempt -> action.get());
  }

  /** As {@link #apply}, for a request that derives what it creates from {@link Attempt#seed}. */
  public Route applyWith(
      String principal,
      String path,
      ByteString body,
      Function<Attempt, CompletionStage<HttpResponse>> action) {
    return optionalHeaderValueByName(
        "Idempotency-Key",
        header -> {
          if (header.isEmpty()) return completeWithFuture(answer(action, Attempt.WITHOUT_KEY));
          String key = header.get();
          if (key.isBlank() || key.length() > 255) {
            return complete(
                Problem.badRequest(
                        "invalid_idempotency_key", "Idempotency-Key must be 1 to 255 characters")
                    .toResponse());
          }
          byte[] hash = hash(path, body);
          return completeWithFuture(
              keys.claim(principal, key, hash)
                  .thenCompose(
                      claim -> {
                        if (claim instanceof IdempotencyKeys.Replay r)
                          return CompletableFuture.completedFuture(replay(r));
                        if (claim instanceof IdempotencyKeys.Conflict) {
                          return CompletableFuture.completedFuture(
                              new Problem(
                                      409,
                                      "idempotency_key_reused",
                                      "this Idempotency-Key was used with a different request")
                                  .toResponse());
                        }
                        if (claim instanceof IdempotencyKeys.InProgress) {
                          return CompletableFuture.completedFuture(
                              new Problem(
                                      409,
                                      "idempotency_key_in_progress",
                                      "a request with this Idempotency-Key is still running; retry shortly")
                                  .toResponse());
                        }
                        var fresh = (IdempotencyKeys.Fresh) claim;
                        Attempt attempt = new Attempt(fresh.seed(), fresh.seedDrawn());
                        return answer(action, attempt)
                            .thenCompose(
                                response ->
                                    remember(principal, key, fresh.claimId(), attempt, response));
                      }));
        });
  }

  private CompletionStage<HttpResponse> remember(
      String principal, String key, long claimId, Attempt attempt, HttpResponse response) {
    if (response.status().intValue() >= 500)
      return (attempt.leftNothing
              ? keys.forget(principal, key, claimId)
              : keys.release(principal, key, claimId))
          .thenApply(done -> response);
    String body =
        ((org.apache.pekko.http.javadsl.model.HttpEntity.Strict) response.entity())
            .getData()
            .utf8String();
    return keys.complete(principal, key, claimId, response.status().intValue(), body)
        .thenApply(done -> response);
  }

  private static CompletionStage<HttpResponse> answer(
      Function<Attempt, CompletionStage<HttpResponse>> action, Attempt attempt) {
    CompletionStage<HttpResponse> started;
    try {
      started = action.apply(attempt);
    } catch (RuntimeException e) {
      return CompletableFuture.completedFuture(Responses.problemFor(e).toResponse());
    }
    return started.exceptionally(failure -> Responses.problemFor(failure).toResponse());
  }

  private static HttpResponse replay(IdempotencyKeys.Replay r) {
    var contentType = r.status() >= 400 ? Problem.PROBLEM_JSON : ContentTypes.APPLICATION_JSON;
    return HttpResponse.create()
        .withStatus(StatusCodes.get(r.status()))
        .addHeader(
            org.apache.pekko.http.javadsl.model.headers.RawHeader.create(
                "Idempotent-Replayed", "true"))
        .withEntity(HttpEntities.create(contentType, r.body() == null ? "" : r.body()));
  }

  private static byte[] hash(String path, ByteString body) {
    try {
      MessageDigest digest = MessageDigest.getInstance("SHA-256");
      digest.update(path.getBytes(StandardCharsets.UTF_8));
      digest.update((byte) 0);
      digest.update(body.toArray());
      return digest.digest();
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }
}
