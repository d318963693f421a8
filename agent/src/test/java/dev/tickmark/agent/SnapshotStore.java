package dev.tickmark.agent;

import com.fasterxml.jackson.databind.JsonNode;
import dev.tickmark.agent.snapshot.Chunks;
import dev.tickmark.wire.Frames;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

/**
 * The engine's snapshot endpoints (docs/snapshots.md) over an in-memory chunk store, for {@link
 * ScriptedNode}: what the agent uploads, what it downloads to restore, and knobs to break things.
 */
final class SnapshotStore {
  /** A manifest as the agent PUT it. */
  record Stored(String rentalId, long sizeBytes, String sha256, List<String> chunks) {}

  /** An HTTP answer. */
  record Answer(int status, String contentType, byte[] body) {
    static Answer json(int status, String json) {
      return new Answer(
          status, "application/json", json.getBytes(java.nio.charset.StandardCharsets.UTF_8));
    }

    static Answer problem(int status, String code) {
      return new Answer(
          status,
          "application/problem+json",
          ("{\"type\":\"about:blank\",\"status\":" + status + ",\"code\":\"" + code + "\"}")
              .getBytes(java.nio.charset.StandardCharsets.UTF_8));
    }
  }

  /** Thrown by a handler to drop the connection without an answer. */
  static final class Drop extends IOException {
    Drop() {
      super("dropped on purpose");
    }
  }

  final Map<String, byte[]> chunks = new ConcurrentHashMap<>();
  final Map<String, Stored> manifests = new ConcurrentHashMap<>();
  final Map<String, Boolean> completed = new ConcurrentHashMap<>();
  final Map<String, String> failed = new ConcurrentHashMap<>();

  /** rental id → the snapshot it restores. */
  final Map<String, String> restores = new ConcurrentHashMap<>();

  /** Every chunk PUT that arrived (its sha256), in order, answered or not. */
  final List<String> chunkPuts = new CopyOnWriteArrayList<>();

  final List<String> manifestPuts = new CopyOnWriteArrayList<>();

  /** Every chunk GET (restores). */
  final List<String> chunkGets = new CopyOnWriteArrayList<>();

  /** Non-zero: the manifest PUT is answered with it ({@code 413 snapshot_too_large}, …). */
  volatile int manifestStatus;

  /** The next this many manifest PUTs are answered {@code 503} (a node in trouble). */
  final java.util.concurrent.atomic.AtomicInteger unavailableManifests =
      new java.util.concurrent.atomic.AtomicInteger();

  /** The first complete forgets one stored chunk and answers {@code 409 chunks_missing}. */
  volatile boolean loseAChunkAtComplete;

  /** Once this many chunks are stored, the next chunk PUT's connection is dropped (once). */
  volatile int dropChunkPutAfter = -1;

  /**
   * Once this many chunks are stored, further chunk PUTs wait for {@link #release} (counting down
   * {@link #held} as they arrive), then are dropped.
   */
  volatile int holdChunkPutsAfter = -1;

  final CountDownLatch held = new CountDownLatch(1);
  final CountDownLatch release = new CountDownLatch(1);

  /** A chunk served with a flipped byte at restore. */
  volatile String corruptChunk;

  /** Stores a snapshot as if uploaded and complete (for restores). */
  Stored put(String snapshotId, String rentalId, Path archive) throws IOException {
    Chunks.Cut cut = Chunks.of(archive);
    for (int i = 0; i < cut.chunks().size(); i++)
      chunks.put(cut.chunks().get(i), Chunks.read(archive, i));
    Stored s = new Stored(rentalId, cut.sizeBytes(), cut.sha256(), cut.chunks());
    manifests.put(snapshotId, s);
    completed.put(snapshotId, true);
    return s;
  }

  /** The whole archive of a stored snapshot, from its chunks. */
  byte[] archive(String snapshotId) {
    Stored s = manifests.get(snapshotId);
    java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream();
    for (String c : s.chunks()) out.writeBytes(chunks.get(c));
    return out.toByteArray();
  }

  private List<String> missing(Stored s) {
    List<String> out = new ArrayList<>();
    for (String c : s.chunks()) if (!chunks.containsKey(c) && !out.contains(c)) out.add(c);
    return out;
  }

  /** Answers a request to {@code path}, or null when it is not one of these endpoints. */
  Answer handle(String method, String path, byte[] body) throws IOException, InterruptedException {
    String[] p = path.split("/");
    // /v1/agent/snapshots/{sid}/...   p = ["", "v1", "agent", "snapshots", sid, ...]
    if (path.startsWith("/v1/agent/snapshots/") && p.length >= 6) {
      String sid = p[4];
      switch (p[5]) {
        case "manifest" -> {
          if (!method.equals("PUT")) return null;
          manifestPuts.add(sid);
          if (unavailableManifests.getAndUpdate(n -> Math.max(0, n - 1)) > 0)
            return Answer.problem(503, "unavailable");
          if (manifestStatus == 413) return Answer.problem(413, "snapshot_too_large");
          if (manifestStatus == 422) return Answer.problem(422, "quota_exceeded");
          if (manifestStatus != 0) return Answer.problem(manifestStatus, "scripted");
          JsonNode n = Frames.MAPPER.readTree(body);
          List<String> cs = new ArrayList<>();
          n.get("chunks").forEach(c -> cs.add(c.asText()));
          Stored s =
              new Stored(
                  n.get("rental_id").asText(),
                  n.get("size_bytes").asLong(),
                  n.get("sha256").asText(),
                  cs);
          manifests.put(sid, s);
          return Answer.json(200, Frames.MAPPER.writeValueAsString(Map.of("missing", missing(s))));
        }
        case "chunks" -> {
          if (!method.equals("PUT") || p.length != 7) return null;
          String sha = p[6];
          chunkPuts.add(sha);
          Stored s = manifests.get(sid);
          if (s == null || !s.chunks().contains(sha)) return Answer.problem(404, "not_found");
          int drop = dropChunkPutAfter;
          if (drop >= 0 && chunks.size() >= drop) {
            dropChunkPutAfter = -1;
            throw new Drop();
          }
          int hold = holdChunkPutsAfter;
          if (hold >= 0 && chunks.size() >= hold) {
            held.countDown();
            release.await(30, TimeUnit.SECONDS);
            throw new Drop();
          }
          if (!Chunks.sha256(body).equals(sha)) return Answer.problem(422, "chunk_mismatch");
          chunks.put(sha, body);
          return new Answer(204, null, new byte[0]);
        }
        case "complete" -> {
          Stored s = manifests.get(sid);
          if (s == null) return Answer.problem(404, "not_found");
          if (loseAChunkAtComplete) {
            loseAChunkAtComplete = false;
            chunks.remove(s.chunks().get(0));
          }
          List<String> missing = missing(s);
          if (!missing.isEmpty())
            return Answer.json(
                409,
                Frames.MAPPER.writeValueAsString(
                    Map.of("code", "chunks_missing", "missing", missing)));
          completed.put(sid, true);
          return Answer.json(200, "{\"snapshot\":{\"id\":\"" + sid + "\",\"status\":\"ready\"}}");
        }
        case "failed" -> {
          failed.put(sid, Frames.MAPPER.readTree(body).get("reason").asText());
          return new Answer(204, null, new byte[0]);
        }
        default -> {
          return null;
        }
      }
    }
    // /v1/agent/rentals/{rid}/restore[/chunks/{sha}]   p = ["", "v1", "agent", "rentals", rid,
    // "restore", ...]
    if (path.startsWith("/v1/agent/rentals/") && p.length >= 6 && p[5].equals("restore")) {
      String sid = restores.get(p[4]);
      Stored s = sid == null ? null : manifests.get(sid);
      if (s == null || !completed.containsKey(sid)) return Answer.problem(404, "not_found");
      if (p.length == 6) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("snapshot_id", sid);
        m.put("size_bytes", s.sizeBytes());
        m.put("sha256", s.sha256());
        m.put("chunks", s.chunks());
        return Answer.json(200, Frames.MAPPER.writeValueAsString(m));
      }
      if (p.length == 8 && p[6].equals("chunks") && s.chunks().contains(p[7])) {
        chunkGets.add(p[7]);
        byte[] c = chunks.get(p[7]).clone();
        if (p[7].equals(corruptChunk)) c[c.length / 2] ^= 0x5a;
        return new Answer(200, "application/octet-stream", c);
      }
      return Answer.problem(404, "not_found");
    }
    return null;
  }

  static byte[] read(Path file) throws IOException {
    return Files.readAllBytes(file);
  }
}
