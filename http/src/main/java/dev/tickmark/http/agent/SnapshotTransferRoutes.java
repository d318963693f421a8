package dev.tickmark.http.agent;

import static org.apache.pekko.http.javadsl.server.Directives.*;
import static org.apache.pekko.http.javadsl.server.PathMatchers.segment;

import dev.tickmark.engine.rental.Rental;
import dev.tickmark.engine.snapshot.ChunkStore;
import dev.tickmark.engine.snapshot.Snapshot;
import dev.tickmark.http.Ids;
import dev.tickmark.http.Json;
import dev.tickmark.http.Problem;
import dev.tickmark.http.RequestBody;
import dev.tickmark.http.Responses;
import dev.tickmark.http.SnapshotRoutes;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.time.Duration;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.function.Function;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.RecipientRef;
import org.apache.pekko.actor.typed.javadsl.AskPattern;
import org.apache.pekko.cluster.sharding.typed.javadsl.ClusterSharding;
import org.apache.pekko.http.javadsl.model.ContentTypes;
import org.apache.pekko.http.javadsl.model.HttpEntities;
import org.apache.pekko.http.javadsl.model.HttpResponse;
import org.apache.pekko.http.javadsl.model.StatusCodes;
import org.apache.pekko.http.javadsl.server.Route;
import org.apache.pekko.http.scaladsl.model.EntityStreamSizeException;
import org.apache.pekko.pattern.StatusReply;
import org.apache.pekko.stream.Materializer;
import org.apache.pekko.util.ByteString;
import org.apache.pekko.util.ByteStringBuilder;

/**
 * The agent's snapshot transfers over plain HTTP (docs/snapshots.md), with its host credential:
 * upload ({@code /v1/agent/snapshots/{sid}/manifest|chunks/{sha256}|complete|failed}) and restore
 * ({@code /v1/agent/rentals/{rid}/restore[/chunks/{sha256}]}). The routes check the form of what
 * comes in, that the snapshot or rental is the calling host's, and translate; the entity decides
 * sizes, quota and state. Every refusal is a 4xx problem.
 */
public final class SnapshotTransferRoutes {
  /** The operations {@link #route()} serves; the tests hold it to the code and to openapi.json. */
  public static final java.util.List<dev.tickmark.http.Operation> OPERATIONS =
      java.util.List.of(
          dev.tickmark.http.Operation.put("/v1/agent/snapshots/{sid}/manifest"),
          dev.tickmark.http.Operation.put("/v1/agent/snapshots/{sid}/chunks/{sha256}"),
          dev.tickmark.http.Operation.post("/v1/agent/snapshots/{sid}/complete"),
          dev.tickmark.http.Operation.post("/v1/agent/snapshots/{sid}/failed"),
          dev.tickmark.http.Operation.get("/v1/agent/rentals/{rid}/restore"),
          dev.tickmark.http.Operation.get("/v1/agent/rentals/{rid}/restore/chunks/{sha256}"));

  /** How the routes reach the entities: sharding in a node, fakes in tests. */
  public interface Entities {
    RecipientRef<Snapshot.Command> snapshot(String snapshotId);

    RecipientRef<Rental.Command> rental(String rentalId);

    static Entities sharded(ActorSystem<?> system) {
      ClusterSharding sharding = ClusterSharding.get(system);
      return new Entities() {
        @Override
        public RecipientRef<Snapshot.Command> snapshot(String snapshotId) {
          return sharding.entityRefFor(Snapshot.ENTITY_KEY, snapshotId);
        }

        @Override
        public RecipientRef<Rental.Command> rental(String rentalId) {
          return sharding.entityRefFor(Rental.ENTITY_KEY, rentalId);
        }
      };
    }
  }

  /** Who is calling: runs the route with the authenticated host's id, or refuses. */
  @FunctionalInterface
  public interface HostAuthentication {
    Route host(Function<String, Route> inner);
  }

  /**
   * The bytes of a renter's other live snapshots ({@code
   * SnapshotReadModel::accountBytesElsewhere}), for the entity's quota check.
   */
  @FunctionalInterface
  public interface AccountBytes {
    CompletionStage<Long> elsewhere(String renterId, String exceptSnapshotId);
  }

  record ManifestRequest(String rentalId, Long sizeBytes, String sha256, List<String> chunks) {}

  record FailedRequest(String reason) {}

  record Missing(List<String> missing) {}

  record RestoreManifest(String snapshotId, long sizeBytes, String sha256, List<String> chunks) {}

  record Completed(SnapshotRoutes.SnapshotView snapshot) {}

  static final int MAX_REASON_CHARS = 1000;

  private final ActorSystem<?> system;
  private final Entities entities;
  private final HostAuthentication auth;
  private final ChunkStore store;
  private final AccountBytes accountBytes;
  private final Duration timeout;
  private final int maxChunks;
  private final long maxManifestBytes;
  private final Materializer materializer;

  /**
   * {@code maxBytes}: the most bytes of one snapshot ({@code tickmark.snapshots.max-bytes}), which
   * bounds a manifest's chunks; the entity refuses a size above it.
   */
  public SnapshotTransferRoutes(
      ActorSystem<?> system,
      Entities entities,
      HostAuthentication auth,
      ChunkStore store,
      AccountBytes accountBytes,
      Duration timeout,
      long maxBytes) {
    this.system = system;
    this.entities = entities;
    this.auth = auth;
    this.store = store;
    this.accountBytes = accountBytes;
    this.timeout = timeout;
    this.maxChunks =
        (int) Math.min(Integer.MAX_VALUE - 1, maxBytes / ChunkStore.MAX_CHUNK_BYTES + 1);
    // {"chunks":["<64 hex>", …]} and the other fields: 67 characters a chunk and some room
    this.maxManifestBytes = 67L * maxChunks + 4096;
    this.materializer = Materializer.matFromSystem(system);
  }

  public Route route() {
    return pathPrefix(
        "agent",
        () ->
            concat(
                pathPrefix(
                    "snapshots",
                    () -> pathPrefix(segment(), sid -> auth.host(host -> upload(host, sid)))),
                pathPrefix(
                    "rentals",
                    () ->
                        pathPrefix(
                            segment(),
                            rid ->
                                pathPrefix(
                                    "restore", () -> auth.host(host -> restore(host, rid)))))));
  }

  // ---- upload

  private Route upload(String host, String sid) {
    if (!Ids.wellFormed("snap_", sid))
      return complete(Problem.notFound("no such snapshot").toResponse());
    return concat(
        path(
            "manifest",
            () ->
                put(
                    () ->
                        withSizeLimit(
                            maxManifestBytes,
                            () -> RequestBody.read(body -> answer(manifest(host, sid, body)))))),
        path(segment("chunks").slash(segment()), sha -> put(() -> chunk(host, sid, sha))),
        path("complete", () -> post(() -> answer(completeUpload(host, sid)))),
        path(
            "failed", () -> post(() -> RequestBody.read(body -> answer(failed(host, sid, body))))));
  }

  private CompletionStage<HttpResponse> manifest(String host, String sid, ByteString body) {
    ManifestRequest m = Json.read(body, ManifestRequest.class);
    if (m.rentalId() == null || !Snapshot.idForRental(m.rentalId()).equals(sid))
      throw Problem.badRequest(
          "invalid_rental_id", "rental_id must be the rental this snapshot was kept from");
    if (m.sizeBytes() == null || m.sizeBytes() < 0)
      throw Problem.badRequest("invalid_size", "size_bytes must be a whole number ≥ 0");
    if (!isSha256(m.sha256()))
      throw Problem.badRequest("invalid_sha256", "sha256 must be 64 lower-case hex digits");
    if (m.chunks() == null
        || m.chunks().size() > maxChunks
        || !m.chunks().stream().allMatch(SnapshotTransferRoutes::isSha256))
      throw Problem.badRequest(
          "invalid_manifest",
          "chunks must be at most "
              + maxChunks
              + " sha256s of 64 lower-case hex digits, in archive order");
    List<String> chunks = List.copyOf(m.chunks());
    long size = m.sizeBytes();
    // this host's snapshot (404 otherwise), how much else its renter keeps (for the entity's quota
    // check), the entity's verdict; only an accepted manifest is recorded in the store
    return ownSnapshot(host, sid)
        .thenCompose(v -> accountBytes.elsewhere(v.renterId(), sid))
        .thenCompose(
            elsewhere ->
                askSnapshot(
                    sid,
                    reply ->
                        new Snapshot.RecordManifest(
                            host, size, m.sha256(), chunks.size(), elsewhere, reply)))
        .thenCompose(v -> store.putManifest(sid, chunks))
        .thenApply(missing -> Responses.json(200, new Missing(missing)));
  }

  /**
   * The body, at most one chunk's bytes (a longer one is 413 as soon as it passes the limit), is
   * read through a running sha256 and checked against the name before anything is asked.
   */
  private Route chunk(String host, String sid, String sha) {
    if (!isSha256(sha))
      return complete(
          Problem.badRequest("invalid_sha256", "a chunk is named by 64 lower-case hex digits")
              .toResponse());
    return withSizeLimit(
        ChunkStore.MAX_CHUNK_BYTES,
        () ->
            extractDataBytes(
                data ->
                    answer(
                        data.runFold(new Hashing(), Hashing::add, materializer)
                            .thenCompose(
                                read -> {
                                  String got = read.hex();
                                  if (!got.equals(sha))
                                    throw new Problem(
                                        422,
                                        "chunk_mismatch",
                                        "the bytes hash to " + got + ", not to " + sha);
                                  return storeChunk(host, sid, sha, read.bytes());
                                })
                            .exceptionally(
                                failure -> {
                                  if (Responses.unwrapped(failure)
                                      instanceof EntityStreamSizeException)
                                    throw new Problem(
                                        413,
                                        "payload_too_large",
                                        "a chunk is at most "
                                            + ChunkStore.MAX_CHUNK_BYTES
                                            + " bytes");
                                  throw rethrow(failure);
                                }))));
  }

  private CompletionStage<HttpResponse> storeChunk(
      String host, String sid, String sha, byte[] bytes) {
    return ownSnapshot(host, sid)
        .thenCompose(v -> store.names(sid, sha))
        .thenCompose(
            named -> {
              if (!named)
                throw Problem.notFound("the snapshot's manifest does not name this chunk");
              return store.putChunk(sha, bytes);
            })
        .thenApply(done -> Responses.noContent());
  }

  private CompletionStage<HttpResponse> completeUpload(String host, String sid) {
    return ownSnapshot(host, sid)
        .thenCompose(v -> store.manifest(sid))
        .thenCompose(
            manifest ->
                manifest.isEmpty()
                    ? CompletableFuture.completedFuture(
                        chunksMissing(List.of(), "no manifest was recorded: PUT it first"))
                    : store
                        .missing(sid)
                        .thenCompose(
                            missing ->
                                missing.isEmpty()
                                    ? askSnapshot(sid, reply -> new Snapshot.Complete(host, reply))
                                        .thenApply(
                                            done ->
                                                Responses.json(
                                                    200, new Completed(SnapshotRoutes.view(done))))
                                    : CompletableFuture.completedFuture(
                                        chunksMissing(
                                            missing,
                                            missing.size()
                                                + " chunks of the manifest are not stored yet"))));
  }

  private CompletionStage<HttpResponse> failed(String host, String sid, ByteString body) {
    FailedRequest f = Json.read(body, FailedRequest.class);
    if (f.reason() == null || f.reason().isBlank() || f.reason().length() > MAX_REASON_CHARS)
      throw Problem.badRequest(
          "invalid_reason", "reason must be 1 to " + MAX_REASON_CHARS + " characters");
    return askSnapshot(sid, reply -> new Snapshot.Fail(host, f.reason(), reply))
        .thenApply(v -> Responses.noContent());
  }

  /** The snapshot, if {@code host} uploads it; another host's answers as if there were none. */
  private CompletionStage<Snapshot.View> ownSnapshot(String host, String sid) {
    return askSnapshot(sid, reply -> new Snapshot.Get(null, reply))
        .thenApply(
            v -> {
              if (!host.equals(v.hostId())) throw Problem.notFound("no such snapshot");
              return v;
            });
  }

  // ---- restore

  private Route restore(String host, String rid) {
    if (!Ids.wellFormed("rnt_", rid))
      return complete(Problem.notFound("no such rental").toResponse());
    return get(
        () ->
            concat(
                pathEnd(() -> answer(restoreManifest(host, rid))),
                path(
                    segment("chunks").slash(segment()),
                    sha ->
                        isSha256(sha)
                            ? answer(restoreChunk(host, rid, sha))
                            : complete(
                                Problem.badRequest(
                                        "invalid_sha256",
                                        "a chunk is named by 64 lower-case hex digits")
                                    .toResponse()))));
  }

  private CompletionStage<HttpResponse> restoreManifest(String host, String rid) {
    return restoreOf(host, rid)
        .thenCompose(
            r ->
                store
                    .manifest(r.snapshotId())
                    .thenApply(
                        manifest ->
                            Responses.json(
                                200,
                                new RestoreManifest(
                                    r.snapshotId(),
                                    r.sizeBytes(),
                                    r.sha256(),
                                    manifest.orElseThrow(
                                        () ->
                                            Problem.notFound("the snapshot's chunks are gone"))))));
  }

  private CompletionStage<HttpResponse> restoreChunk(String host, String rid, String sha) {
    return restoreOf(host, rid)
        .thenCompose(r -> store.names(r.snapshotId(), sha))
        .thenCompose(
            named -> {
              if (!named)
                throw Problem.notFound("the snapshot's manifest does not name this chunk");
              return store.chunk(sha);
            })
        .thenApply(
            bytes ->
                HttpResponse.create()
                    .withStatus(StatusCodes.OK)
                    .withEntity(
                        HttpEntities.create(
                            ContentTypes.APPLICATION_OCTET_STREAM,
                            bytes.orElseThrow(() -> Problem.notFound("the chunk is gone")))));
  }

  /** The snapshot the rental restores, if the rental is matched to {@code host}. */
  private CompletionStage<Rental.Restore> restoreOf(String host, String rid) {
    return AskPattern.<Rental.Command, Rental.View>askWithStatus(
            entities.rental(rid), reply -> new Rental.Get(null, reply), timeout, system.scheduler())
        .thenApply(
            v -> {
              if (v.terms() == null
                  || !host.equals(v.terms().hostId())
                  || v.spec().restore() == null)
                throw Problem.notFound("no restore for this host in this rental");
              return v.spec().restore();
            });
  }

  // ---- helpers

  private CompletionStage<Snapshot.View> askSnapshot(
      String sid, Function<ActorRef<StatusReply<Snapshot.View>>, Snapshot.Command> command) {
    return AskPattern.askWithStatus(
        entities.snapshot(sid), command::apply, timeout, system.scheduler());
  }

  private static Route answer(CompletionStage<HttpResponse> response) {
    return onSuccess(response, r -> complete(r));
  }

  /** 409 {@code chunks_missing}: a problem that also lists what to upload. */
  static HttpResponse chunksMissing(List<String> missing, String detail) {
    Map<String, Object> body = new LinkedHashMap<>();
    body.put("type", "https://tickmark.dev/problems/chunks_missing");
    body.put("title", "Conflict");
    body.put("status", 409);
    body.put("code", "chunks_missing");
    body.put("detail", detail);
    body.put("missing", missing);
    return HttpResponse.create()
        .withStatus(StatusCodes.CONFLICT)
        .withEntity(HttpEntities.create(Problem.PROBLEM_JSON, Json.write(body)));
  }

  static boolean isSha256(String s) {
    if (s == null || s.length() != 64) return false;
    for (int i = 0; i < 64; i++) {
      char c = s.charAt(i);
      if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
    }
    return true;
  }

  private static RuntimeException rethrow(Throwable failure) {
    Throwable t = Responses.unwrapped(failure);
    return t instanceof RuntimeException r ? r : new java.util.concurrent.CompletionException(t);
  }

  /** A chunk's bytes as they arrive, and their running sha256. */
  private static final class Hashing {
    private final MessageDigest digest;
    private final ByteStringBuilder bytes = new ByteStringBuilder();

    Hashing() {
      try {
        digest = MessageDigest.getInstance("SHA-256");
      } catch (NoSuchAlgorithmException e) {
        throw new IllegalStateException(e);
      }
    }

    Hashing add(ByteString part) {
      digest.update(part.toArray());
      bytes.append(part);
      return this;
    }

    String hex() {
      return HexFormat.of().formatHex(digest.digest());
    }

    byte[] bytes() {
      return bytes.result().toArray();
    }
  }
}
