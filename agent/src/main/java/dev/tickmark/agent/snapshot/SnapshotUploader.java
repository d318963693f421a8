package dev.tickmark.agent.snapshot;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.IOException;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Uploads one archived snapshot, as docs/snapshots.md says: {@code PUT …/manifest} (the engine
 * answers what it still misses), {@code PUT …/chunks/{sha256}} for each of those, {@code POST
 * …/complete} (a {@code 409 chunks_missing} is answered with those chunks and another complete). A
 * broken connection starts again from the manifest, which then lists only what is still missing:
 * stored chunks are never sent twice. Blocking.
 */
final class SnapshotUploader {
  /** How an upload ended. */
  enum Outcome {
    /** The engine holds it all: the snapshot is ready. */
    COMPLETE,
    /**
     * The engine will never take it ({@code 413}, {@code 422}, {@code 404}, the archive is bad).
     */
    REFUSED,
  }

  /** Complete again after a {@code 409 chunks_missing} at most this many times. */
  static final int COMPLETE_ROUNDS = 3;

  private static final Logger log = LoggerFactory.getLogger(SnapshotUploader.class);

  private final EngineHttp http;

  SnapshotUploader(EngineHttp http) {
    this.http = http;
  }

  /**
   * Uploads {@code archive} cut as {@code manifest}. Throws {@link EngineHttp.Unavailable} when the
   * engine cannot be reached for now (the archive is kept for the next reminder).
   */
  Outcome upload(Manifest manifest, Path archive) throws IOException, InterruptedException {
    String sid = manifest.snapshotId();
    String base = "/v1/agent/snapshots/" + sid;
    byte[] body =
        EngineHttp.JSON.writeValueAsBytes(
            Map.of(
                "rental_id", manifest.rentalId(),
                "size_bytes", manifest.sizeBytes(),
                "sha256", manifest.sha256(),
                "chunks", manifest.chunks()));
    // a broken connection mid-way: the manifest again, which answers only what is still missing
    for (int round = 0; ; round++) {
      HttpResponse<String> r =
          http.send(
              "snapshot " + sid + ": manifest",
              () ->
                  http.requestUnchecked(base + "/manifest")
                      .header("Content-Type", "application/json")
                      .PUT(HttpRequest.BodyPublishers.ofByteArray(body))
                      .build(),
              HttpResponse.BodyHandlers.ofString());
      if (r.statusCode() != 200) return refused(sid, "manifest", r);
      List<String> missing = missing(r.body());
      log.info(
          "snapshot {}: {} of {} chunks to upload ({} bytes in all)",
          sid,
          missing.size(),
          manifest.chunks().size(),
          manifest.sizeBytes());
      try {
        for (int done = 0; done <= COMPLETE_ROUNDS; done++) {
          Outcome o = putChunks(manifest, archive, missing);
          if (o != null) return o;
          HttpResponse<String> c =
              http.send(
                  "snapshot " + sid + ": complete",
                  () ->
                      http.requestUnchecked(base + "/complete")
                          .POST(HttpRequest.BodyPublishers.noBody())
                          .build(),
                  HttpResponse.BodyHandlers.ofString());
          if (c.statusCode() == 200) {
            log.info("snapshot {}: uploaded", sid);
            return Outcome.COMPLETE;
          }
          if (c.statusCode() != 409) return refused(sid, "complete", c);
          missing = missing(c.body());
          log.info("snapshot {}: the engine still misses {} chunk(s)", sid, missing.size());
        }
      } catch (Restart e) {
        log.info("snapshot {}: {}; the manifest again", sid, e.getMessage());
      }
      if (round >= COMPLETE_ROUNDS) // for now: the next reminder tries again
      throw new EngineHttp.Unavailable("the engine keeps missing chunks", null);
    }
  }

  /** Tells the engine the snapshot cannot be made ({@code POST …/failed {reason}}). */
  void failed(String snapshotId, String reason) throws IOException, InterruptedException {
    byte[] body = EngineHttp.JSON.writeValueAsBytes(Map.of("reason", reason));
    HttpResponse<String> r =
        http.send(
            "snapshot " + snapshotId + ": failed",
            () ->
                http.requestUnchecked("/v1/agent/snapshots/" + snapshotId + "/failed")
                    .header("Content-Type", "application/json")
                    .POST(HttpRequest.BodyPublishers.ofByteArray(body))
                    .build(),
            HttpResponse.BodyHandlers.ofString());
    if (r.statusCode() / 100 != 2)
      log.warn(
          "snapshot {}: the engine answered HTTP {} to its failure ({})",
          snapshotId,
          r.statusCode(),
          reason);
  }

  /** The chunk PUTs; null when all went in, else how the upload ends. */
  private Outcome putChunks(Manifest manifest, Path archive, List<String> missing)
      throws IOException, InterruptedException {
    String sid = manifest.snapshotId();
    for (String sha : missing) {
      int index = manifest.chunks().indexOf(sha);
      if (index < 0) {
        log.warn("snapshot {}: the engine asks for chunk {}, not in the manifest", sid, sha);
        continue;
      }
      byte[] chunk = Chunks.read(archive, index);
      if (!Chunks.sha256(chunk).equals(sha)) {
        // the disk changed it after it was cut: never send bytes that are not the manifest's
        throw new Damaged("chunk " + index + " of the archive no longer matches its sha256");
      }
      HttpResponse<String> r =
          http.send(
              "snapshot " + sid + ": chunk " + index,
              () ->
                  http.requestUnchecked("/v1/agent/snapshots/" + sid + "/chunks/" + sha)
                      .header("Content-Type", "application/octet-stream")
                      .PUT(HttpRequest.BodyPublishers.ofByteArray(chunk))
                      .build(),
              HttpResponse.BodyHandlers.ofString());
      int s = r.statusCode();
      if (s == 204 || s == 200) continue;
      if (s == 404 || s == 422) // the engine's manifest differs from ours, or the bytes arrived bad
      throw new Restart("chunk " + index + ": HTTP " + s);
      return refused(sid, "chunk " + index, r);
    }
    return null;
  }

  private static Outcome refused(String sid, String step, HttpResponse<String> r)
      throws EngineHttp.Unavailable {
    int s = r.statusCode();
    String code = EngineHttp.problemCode(r.body());
    if (s == 401 || s == 403) // the credential: not the snapshot's fault, the next reminder may do
    throw new EngineHttp.Unavailable(step + ": HTTP " + s, null);
    log.warn(
        "snapshot {}: {} refused by the engine (HTTP {}{}): the upload stops here",
        sid,
        step,
        s,
        code == null ? "" : " " + code);
    return Outcome.REFUSED;
  }

  private static List<String> missing(String body) throws IOException {
    JsonNode n = EngineHttp.JSON.readTree(body);
    List<String> out = new ArrayList<>();
    JsonNode m = n == null ? null : n.get("missing");
    if (m != null && m.isArray())
      for (JsonNode s : m) if (Chunks.isSha256(s.asText())) out.add(s.asText());
    return out;
  }

  /** Start again from the manifest. */
  private static final class Restart extends IOException {
    Restart(String message) {
      super(message);
    }
  }

  /** The local archive is damaged: it cannot be uploaded, ever. */
  static final class Damaged extends IOException {
    Damaged(String message) {
      super(message);
    }
  }
}
