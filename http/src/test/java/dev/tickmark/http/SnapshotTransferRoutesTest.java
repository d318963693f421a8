package dev.tickmark.http;

import static org.apache.pekko.http.javadsl.server.Directives.*;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.typesafe.config.ConfigFactory;
import dev.tickmark.engine.Rejection;
import dev.tickmark.engine.host.Listing;
import dev.tickmark.engine.rental.Rental;
import dev.tickmark.engine.snapshot.ChunkStore;
import dev.tickmark.engine.snapshot.Snapshot;
import dev.tickmark.http.agent.AgentSession;
import dev.tickmark.http.agent.AgentSocket;
import dev.tickmark.http.agent.FailedAuthThrottle;
import dev.tickmark.http.agent.SnapshotTransferRoutes;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.security.MessageDigest;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.Behavior;
import org.apache.pekko.actor.typed.RecipientRef;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.http.javadsl.Http;
import org.apache.pekko.http.javadsl.ServerBinding;
import org.apache.pekko.http.javadsl.server.Route;
import org.apache.pekko.pattern.StatusReply;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The agent's snapshot transfer endpoints over real HTTP, with fake Snapshot and Rental entities
 * (the real ones are not the routes' to test), an in-memory chunk store and a fake credential
 * check; and the real host-credential directive's refusals, which ask no entity.
 */
class SnapshotTransferRoutesTest {
  static final String SID = "snap_" + "0123456789abcdef01234567";
  static final String RID = "rnt_" + "0123456789abcdef01234567";
  static final String RESTORING = "rnt_" + "fedcba9876543210fedcba98";
  static final String OTHER_SID = "snap_" + "aaaaaaaaaaaaaaaaaaaaaaaa";
  static final String HOST = "host_" + "111111111111111111111111";
  static final String OTHER_HOST = "host_" + "222222222222222222222222";
  static final long MAX_BYTES = 64L * 1024 * 1024;

  static ActorTestKit testKit;
  static ServerBinding binding;
  static String base;
  static final HttpClient client = HttpClient.newHttpClient();
  static final MemoryChunks store = new MemoryChunks();
  static final List<Snapshot.Command> seen = new CopyOnWriteArrayList<>();
  static ActorRef<Snapshot.Command> snapshot;
  static ActorRef<Snapshot.Command> othersSnapshot;
  static ActorRef<Rental.Command> rental;
  static AgentSocket agentSocket;

  @BeforeAll
  static void start() throws Exception {
    // a cluster provider for the real AgentSocket (sharding); never joined: no entity is asked
    testKit =
        ActorTestKit.create(
            ConfigFactory.parseString(
                    "pekko.actor.provider = cluster\n"
                        + "pekko.remote.artery.canonical.port = 0\n"
                        + "pekko.remote.artery.canonical.hostname = 127.0.0.1")
                .withFallback(ConfigFactory.load()));
    snapshot = testKit.spawn(fakeSnapshot(SID, HOST));
    othersSnapshot = testKit.spawn(fakeSnapshot(OTHER_SID, OTHER_HOST));
    rental = testKit.spawn(fakeRental());
    SnapshotTransferRoutes.Entities entities =
        new SnapshotTransferRoutes.Entities() {
          @Override
          public RecipientRef<Snapshot.Command> snapshot(String id) {
            return id.equals(SID) ? snapshot : othersSnapshot;
          }

          @Override
          public RecipientRef<Rental.Command> rental(String id) {
            return rental;
          }
        };
    agentSocket =
        new AgentSocket(
            testKit.system(),
            new AgentSession.Limits(65536, 100, 100, Duration.ofSeconds(5), Duration.ofSeconds(3)),
            new FailedAuthThrottle.Settings(100, 1000, 100),
            null);
    SnapshotTransferRoutes routes =
        new SnapshotTransferRoutes(
            testKit.system(),
            entities,
            SnapshotTransferRoutesTest::fakeHostAuth,
            store,
            (renter, except) -> CompletableFuture.completedFuture(1000L),
            Duration.ofSeconds(3),
            MAX_BYTES);
    Route route =
        HttpApi.guarded(
            () ->
                pathPrefix(
                    "v1",
                    () ->
                        concat(
                            pathPrefix("real", () -> agentSocket.hostCredential(h -> complete(h))),
                            routes.route())));
    binding =
        Http.get(testKit.system())
            .newServerAt("127.0.0.1", 0)
            .bind(route)
            .toCompletableFuture()
            .get();
    base = "http://127.0.0.1:" + binding.localAddress().getPort() + "/v1";
  }

  @AfterAll
  static void stop() throws Exception {
    if (binding != null) binding.unbind().toCompletableFuture().get();
    if (testKit != null) testKit.shutdownTestKit();
  }

  @BeforeEach
  void clear() {
    store.clear();
    seen.clear();
  }

  // ---- fakes

  /** "Bearer ok:<host>" is that host; anything else is 401, as the real directive answers. */
  static Route fakeHostAuth(java.util.function.Function<String, Route> inner) {
    return optionalHeaderValueByName(
        "Authorization",
        h ->
            h.filter(v -> v.startsWith("Bearer ok:")).isPresent()
                ? inner.apply(h.get().substring("Bearer ok:".length()))
                : complete(Problem.unauthorized("no host credential").toResponse()));
  }

  static Snapshot.View view(String id, String host, Snapshot.Status status) {
    return new Snapshot.View(
        id,
        "acc_renter",
        status,
        RID,
        host,
        "h100",
        "eu",
        5,
        "ab".repeat(32),
        1,
        Instant.EPOCH,
        null,
        null,
        0,
        0,
        null,
        null,
        null,
        null);
  }

  static Behavior<Snapshot.Command> fakeSnapshot(String id, String host) {
    return Behaviors.receiveMessage(
        command -> {
          seen.add(command);
          if (command instanceof Snapshot.Get g)
            g.replyTo().tell(StatusReply.success(view(id, host, Snapshot.Status.UPLOADING)));
          else if (command instanceof Snapshot.RecordManifest m)
            m.replyTo()
                .tell(
                    m.sizeBytes() > MAX_BYTES
                        ? Rejection.SNAPSHOT_TOO_LARGE.reply("over the limit")
                        : StatusReply.success(view(id, host, Snapshot.Status.UPLOADING)));
          else if (command instanceof Snapshot.Complete c)
            c.replyTo().tell(StatusReply.success(view(id, host, Snapshot.Status.READY)));
          else if (command instanceof Snapshot.Fail f)
            f.replyTo().tell(StatusReply.success(view(id, host, Snapshot.Status.FAILED)));
          return Behaviors.same();
        });
  }

  /**
   * {@code RESTORING} restores {@code SID} on {@code HOST}; every other rental restores nothing.
   */
  static Behavior<Rental.Command> fakeRental() {
    return Behaviors.receiveMessage(
        command -> {
          if (command instanceof Rental.Get g) {
            Rental.Spec spec =
                new Rental.Spec(
                    "h100",
                    1,
                    Listing.Tier.ON_DEMAND,
                    "eu",
                    1,
                    "img",
                    List.of(),
                    null,
                    null,
                    0,
                    false,
                    new Rental.Restore(SID, "cd".repeat(32), 5));
            Rental.Terms terms =
                new Rental.Terms(HOST, "acc_p", List.of(0), 1, false, Instant.EPOCH, "eu");
            g.replyTo()
                .tell(
                    StatusReply.success(
                        new Rental.View(
                            RESTORING,
                            "acc_renter",
                            Rental.Status.PROVISIONING,
                            spec,
                            terms,
                            Instant.EPOCH,
                            null,
                            null,
                            null,
                            0,
                            0,
                            null,
                            List.of(),
                            null,
                            null,
                            List.of())));
          }
          return Behaviors.same();
        });
  }

  static final class MemoryChunks implements ChunkStore {
    final Map<String, byte[]> chunks = new ConcurrentHashMap<>();
    final Map<String, List<String>> manifests = new ConcurrentHashMap<>();

    void clear() {
      chunks.clear();
      manifests.clear();
    }

    @Override
    public CompletionStage<List<String>> putManifest(String id, List<String> list) {
      manifests.put(id, List.copyOf(list));
      return missing(id);
    }

    @Override
    public CompletionStage<Optional<List<String>>> manifest(String id) {
      return CompletableFuture.completedFuture(Optional.ofNullable(manifests.get(id)));
    }

    @Override
    public CompletionStage<List<String>> missing(String id) {
      return CompletableFuture.completedFuture(
          manifests.getOrDefault(id, List.of()).stream()
              .distinct()
              .filter(s -> !chunks.containsKey(s))
              .toList());
    }

    @Override
    public CompletionStage<Void> putChunk(String sha, byte[] bytes) {
      chunks.putIfAbsent(sha, bytes);
      return CompletableFuture.completedFuture(null);
    }

    @Override
    public CompletionStage<Optional<byte[]>> chunk(String sha) {
      return CompletableFuture.completedFuture(Optional.ofNullable(chunks.get(sha)));
    }

    @Override
    public CompletionStage<Integer> collectOrphans(long graceSeconds) {
      return CompletableFuture.completedFuture(0);
    }
  }

  // ---- helpers

  static String sha(byte[] b) throws Exception {
    return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(b));
  }

  static HttpResponse<byte[]> send(String method, String path, String auth, byte[] body)
      throws Exception {
    HttpRequest.Builder b =
        HttpRequest.newBuilder(URI.create(base + path))
            .method(
                method,
                body == null
                    ? HttpRequest.BodyPublishers.noBody()
                    : HttpRequest.BodyPublishers.ofByteArray(body));
    if (auth != null) b.header("Authorization", auth);
    return client.send(b.build(), HttpResponse.BodyHandlers.ofByteArray());
  }

  static HttpResponse<byte[]> asHost(String method, String path, byte[] body) throws Exception {
    return send(method, path, "Bearer ok:" + HOST, body);
  }

  static HttpResponse<byte[]> asHost(String method, String path, String json) throws Exception {
    return asHost(method, path, json.getBytes(java.nio.charset.StandardCharsets.UTF_8));
  }

  static JsonNode json(HttpResponse<byte[]> r) throws Exception {
    return Json.MAPPER.readTree(r.body());
  }

  static void assertProblem(int status, String code, HttpResponse<byte[]> r) throws Exception {
    assertEquals(status, r.statusCode(), new String(r.body()));
    assertTrue(
        r.headers().firstValue("Content-Type").orElse("").startsWith("application/problem+json"),
        "problem+json: " + r.headers().firstValue("Content-Type"));
    assertEquals(code, json(r).get("code").asText());
  }

  static String manifestJson(long size, List<String> chunks) {
    return Json.write(
        Map.of("rental_id", RID, "size_bytes", size, "sha256", "ab".repeat(32), "chunks", chunks));
  }

  // ---- tests

  @Test
  void uploadsAManifestItsChunksAndCompletes() throws Exception {
    byte[] a = "chunk a".getBytes(), b = "chunk b".getBytes();
    String sa = sha(a), sb = sha(b);
    String path = "/agent/snapshots/" + SID;

    HttpResponse<byte[]> m =
        asHost("PUT", path + "/manifest", manifestJson(14, List.of(sa, sb, sa)));
    assertEquals(200, m.statusCode(), new String(m.body()));
    assertEquals(List.of(sa, sb), Json.MAPPER.convertValue(json(m).get("missing"), List.class));
    Snapshot.RecordManifest recorded =
        (Snapshot.RecordManifest)
            seen.stream()
                .filter(c -> c instanceof Snapshot.RecordManifest)
                .findFirst()
                .orElseThrow();
    assertEquals(HOST, recorded.hostId());
    assertEquals(14, recorded.sizeBytes());
    assertEquals(3, recorded.chunkCount());
    assertEquals(1000, recorded.accountBytesElsewhere());

    assertEquals(204, asHost("PUT", path + "/chunks/" + sa, a).statusCode());
    HttpResponse<byte[]> early = asHost("POST", path + "/complete", (byte[]) null);
    assertProblem(409, "chunks_missing", early);
    assertEquals(List.of(sb), Json.MAPPER.convertValue(json(early).get("missing"), List.class));
    assertTrue(seen.stream().noneMatch(c -> c instanceof Snapshot.Complete));

    assertEquals(204, asHost("PUT", path + "/chunks/" + sb, b).statusCode());
    assertEquals(204, asHost("PUT", path + "/chunks/" + sb, b).statusCode(), "again: a no-op");
    HttpResponse<byte[]> done = asHost("POST", path + "/complete", (byte[]) null);
    assertEquals(200, done.statusCode(), new String(done.body()));
    assertEquals("ready", json(done).get("snapshot").get("status").asText());
    assertArrayEquals(b, store.chunks.get(sb));
  }

  @Test
  void refusesBytesThatDoNotHashToTheirName() throws Exception {
    byte[] a = "real".getBytes();
    asHost("PUT", "/agent/snapshots/" + SID + "/manifest", manifestJson(4, List.of(sha(a))));
    assertProblem(
        422,
        "chunk_mismatch",
        asHost("PUT", "/agent/snapshots/" + SID + "/chunks/" + sha(a), "forged".getBytes()));
    assertTrue(store.chunks.isEmpty());
  }

  /**
   * The node refuses an oversized chunk from its declared length, before reading the body: the
   * request's head alone is answered 413. (Sent with its body, the answer raced the node's close of
   * the connection, whose unread body resets it: the client once saw the reset first, in CI:
   * "header parser received no bytes".)
   */
  @Test
  void refusesAChunkOverFourMebibytesAs413() throws Exception {
    byte[] big = new byte[ChunkStore.MAX_CHUNK_BYTES + 1];
    URI uri = URI.create(base + "/agent/snapshots/" + SID + "/chunks/" + sha(big));
    try (java.net.Socket socket = new java.net.Socket(uri.getHost(), uri.getPort())) {
      socket.setSoTimeout(10_000);
      socket
          .getOutputStream()
          .write(
              ("PUT "
                      + uri.getRawPath()
                      + " HTTP/1.1\r\nHost: "
                      + uri.getHost()
                      + "\r\n"
                      + "Authorization: Bearer ok:"
                      + HOST
                      + "\r\n"
                      + "Content-Length: "
                      + big.length
                      + "\r\n\r\n")
                  .getBytes(java.nio.charset.StandardCharsets.US_ASCII));
      // the node closes the connection after the answer: the body is never read
      String answer =
          new String(
              socket.getInputStream().readAllBytes(), java.nio.charset.StandardCharsets.UTF_8);
      assertTrue(answer.startsWith("HTTP/1.1 413 "), answer);
      assertTrue(answer.contains("application/problem+json"), answer);
      assertTrue(answer.contains("\"code\":\"payload_too_large\""), answer);
    }
    // exactly 4 MiB passes the limit (and is refused only because no manifest names it)
    byte[] full = new byte[ChunkStore.MAX_CHUNK_BYTES];
    assertProblem(
        404, "not_found", asHost("PUT", "/agent/snapshots/" + SID + "/chunks/" + sha(full), full));
  }

  @Test
  void refusesAChunkTheManifestDoesNotNameOrOfAnotherHostsSnapshot() throws Exception {
    byte[] a = "named".getBytes(), stray = "stray".getBytes();
    asHost("PUT", "/agent/snapshots/" + SID + "/manifest", manifestJson(5, List.of(sha(a))));
    assertProblem(
        404,
        "not_found",
        asHost("PUT", "/agent/snapshots/" + SID + "/chunks/" + sha(stray), stray));
    store.manifests.put(OTHER_SID, List.of(sha(a)));
    assertProblem(
        404, "not_found", asHost("PUT", "/agent/snapshots/" + OTHER_SID + "/chunks/" + sha(a), a));
    assertProblem(
        404,
        "not_found",
        asHost(
            "PUT",
            "/agent/snapshots/" + OTHER_SID + "/manifest",
            manifestJson(5, List.of(sha(a))).replace(RID, "rnt_" + "a".repeat(24))));
    assertTrue(store.chunks.isEmpty());
    assertEquals(
        List.of(sha(a)), store.manifests.get(OTHER_SID), "another host's manifest unchanged");
  }

  @Test
  void refusesMalformedNamesAndManifestsWith4xx() throws Exception {
    String path = "/agent/snapshots/" + SID;
    assertProblem(400, "invalid_sha256", asHost("PUT", path + "/chunks/ABC", "x".getBytes()));
    assertProblem(
        400, "invalid_sha256", asHost("PUT", path + "/chunks/" + "A".repeat(64), "x".getBytes()));
    assertProblem(404, "not_found", asHost("PUT", "/agent/snapshots/snap_x/manifest", "{}"));
    assertProblem(400, "malformed_json", asHost("PUT", path + "/manifest", "{not json"));
    assertProblem(400, "unknown_field", asHost("PUT", path + "/manifest", "{\"extra\":1}"));
    assertProblem(
        400, "invalid_manifest", asHost("PUT", path + "/manifest", manifestJson(5, List.of("zz"))));
    assertProblem(
        400,
        "invalid_size",
        asHost("PUT", path + "/manifest", manifestJson(-1, List.of("ab".repeat(32)))));
    assertProblem(
        400,
        "invalid_rental_id",
        asHost(
            "PUT",
            path + "/manifest",
            manifestJson(5, List.of()).replace(RID, "rnt_ffffffffffffffffffffffff")));
    List<String> tooMany = new ArrayList<>();
    for (int i = 0; i <= MAX_BYTES / ChunkStore.MAX_CHUNK_BYTES + 1; i++)
      tooMany.add("ab".repeat(32));
    assertProblem(
        400, "invalid_manifest", asHost("PUT", path + "/manifest", manifestJson(5, tooMany)));
    assertProblem(400, "invalid_reason", asHost("POST", path + "/failed", "{\"reason\":\"\"}"));
    assertTrue(seen.stream().noneMatch(c -> c instanceof Snapshot.RecordManifest));
  }

  @Test
  void passesTheEntitysRefusalOfTheSizeOn() throws Exception {
    assertProblem(
        413,
        "snapshot_too_large",
        asHost(
            "PUT",
            "/agent/snapshots/" + SID + "/manifest",
            manifestJson(MAX_BYTES + 1, List.of("ab".repeat(32)))));
    assertTrue(store.manifests.isEmpty(), "a refused manifest is not recorded");
  }

  @Test
  void reportsAFailedUpload() throws Exception {
    HttpResponse<byte[]> r =
        asHost("POST", "/agent/snapshots/" + SID + "/failed", "{\"reason\":\"workspace gone\"}");
    assertEquals(204, r.statusCode(), new String(r.body()));
    Snapshot.Fail fail =
        (Snapshot.Fail)
            seen.stream().filter(c -> c instanceof Snapshot.Fail).findFirst().orElseThrow();
    assertEquals(HOST, fail.hostId());
    assertEquals("workspace gone", fail.reason());
  }

  @Test
  void servesARestoreOnlyToTheRentalsHostAndOnlyTheManifestsChunks() throws Exception {
    byte[] a = "restore me".getBytes();
    store.manifests.put(SID, List.of(sha(a)));
    store.chunks.put(sha(a), a);
    store.chunks.put(sha("elsewhere".getBytes()), "elsewhere".getBytes());
    String path = "/agent/rentals/" + RESTORING + "/restore";

    HttpResponse<byte[]> m = asHost("GET", path, (byte[]) null);
    assertEquals(200, m.statusCode(), new String(m.body()));
    assertEquals(SID, json(m).get("snapshot_id").asText());
    assertEquals("cd".repeat(32), json(m).get("sha256").asText());
    assertEquals(5, json(m).get("size_bytes").asLong());
    assertEquals(sha(a), json(m).get("chunks").get(0).asText());

    HttpResponse<byte[]> c = asHost("GET", path + "/chunks/" + sha(a), (byte[]) null);
    assertEquals(200, c.statusCode());
    assertEquals("application/octet-stream", c.headers().firstValue("Content-Type").orElse(""));
    assertArrayEquals(a, c.body());

    assertProblem(
        404,
        "not_found",
        asHost("GET", path + "/chunks/" + sha("elsewhere".getBytes()), (byte[]) null));
    assertProblem(
        404, "not_found", send("GET", path + "/chunks/" + sha(a), "Bearer ok:" + OTHER_HOST, null));
    assertProblem(
        404, "not_found", asHost("GET", "/agent/rentals/rnt_nope/restore", (byte[]) null));
  }

  @Test
  void refusesCallsWithoutAHostCredential() throws Exception {
    assertProblem(
        401,
        "unauthorized",
        send("PUT", "/agent/snapshots/" + SID + "/manifest", null, "{}".getBytes()));
    // the real directive: no header, an API key, a credential of the wrong shape; no entity asked
    assertProblem(401, "unauthorized", send("GET", "/real", null, null));
    assertProblem(401, "unauthorized", send("GET", "/real", "Bearer tmk_abc_def", null));
    assertProblem(401, "unauthorized", send("GET", "/real", "Bearer tmkhost_host_1_short", null));
  }
}
