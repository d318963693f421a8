package dev.tickmark.agent.snapshot;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;

/**
 * Downloads a snapshot for a rental that restores it ({@code GET /v1/agent/rentals/{id}/restore},
 * then each chunk), checking every chunk's sha256, the size and the sha256 of the whole against
 * both the engine's manifest and {@code start_rental.restore}. Blocking.
 */
final class SnapshotRestorer {
  /** A restore that cannot succeed; the message is the {@code rental_failed} reason's detail. */
  static final class Failed extends IOException {
    Failed(String message) {
      super(message);
    }
  }

  private final EngineHttp http;

  SnapshotRestorer(EngineHttp http) {
    this.http = http;
  }

  /**
   * Writes the snapshot's archive to {@code archive} (created or replaced) and returns the engine's
   * manifest of it, once everything checks.
   */
  Manifest fetch(String rentalId, String snapshotId, String sha256, long sizeBytes, Path archive)
      throws IOException, InterruptedException {
    String base = "/v1/agent/rentals/" + rentalId + "/restore";
    HttpResponse<String> r =
        http.send(
            "restore of " + snapshotId + ": manifest",
            () -> http.requestUnchecked(base).GET().build(),
            HttpResponse.BodyHandlers.ofString());
    if (r.statusCode() != 200)
      throw new Failed("the engine answered HTTP " + r.statusCode() + " for the manifest");
    Manifest m = manifest(r.body());
    if (!snapshotId.equals(m.snapshotId()))
      throw new Failed("the manifest is of snapshot " + m.snapshotId() + ", not " + snapshotId);
    if (!sha256.equals(m.sha256()) || sizeBytes != m.sizeBytes())
      throw new Failed("the manifest does not match the snapshot asked for");
    if (m.chunks().size() != Chunks.Cut.count(m.sizeBytes()))
      throw new Failed("the manifest's chunks do not add up to its size");
    MessageDigest whole = Chunks.sha256();
    long written = 0;
    try (OutputStream out =
        Files.newOutputStream(
            archive,
            StandardOpenOption.CREATE,
            StandardOpenOption.TRUNCATE_EXISTING,
            StandardOpenOption.WRITE)) {
      for (int i = 0; i < m.chunks().size(); i++) {
        String sha = m.chunks().get(i);
        int expected = (int) Math.min(Chunks.SIZE, m.sizeBytes() - (long) i * Chunks.SIZE);
        byte[] chunk = chunk(base + "/chunks/" + sha, snapshotId, i, expected);
        if (!Chunks.sha256(chunk).equals(sha))
          throw new Failed("chunk " + i + " does not match its sha256");
        whole.update(chunk);
        out.write(chunk);
        written += chunk.length;
      }
    }
    if (written != sizeBytes) throw new Failed("the snapshot's size does not match");
    if (!HexFormat.of().formatHex(whole.digest()).equals(sha256))
      throw new Failed("the snapshot's sha256 does not match");
    return m;
  }

  /** One chunk, read up to one byte more than it should have (a longer one is refused). */
  private byte[] chunk(String path, String snapshotId, int index, int expected)
      throws IOException, InterruptedException {
    for (int attempt = 0; ; attempt++) {
      HttpResponse<InputStream> r =
          http.send(
              "restore of " + snapshotId + ": chunk " + index,
              () -> http.requestUnchecked(path).GET().build(),
              HttpResponse.BodyHandlers.ofInputStream());
      try (InputStream in = r.body()) {
        if (r.statusCode() != 200)
          throw new Failed("the engine answered HTTP " + r.statusCode() + " for chunk " + index);
        byte[] bytes = in.readNBytes(expected + 1);
        if (bytes.length != expected)
          throw new Failed("chunk " + index + " is " + bytes.length + " bytes, not " + expected);
        return bytes;
      } catch (Failed f) {
        throw f;
      } catch (IOException broken) { // the body broke off: a transient error like any other
        if (attempt >= 3)
          throw new EngineHttp.Unavailable("chunk " + index + ": " + broken, broken);
      }
    }
  }

  private static Manifest manifest(String body) throws Failed {
    try {
      JsonNode n = EngineHttp.JSON.readTree(body);
      List<String> chunks = new ArrayList<>();
      for (JsonNode c : n.path("chunks")) {
        if (!Chunks.isSha256(c.asText())) throw new Failed("the manifest names a bad chunk");
        chunks.add(c.asText());
      }
      if (!n.path("size_bytes").canConvertToLong() || !n.hasNonNull("sha256"))
        throw new Failed("the manifest has no size or sha256");
      return new Manifest(
          n.path("snapshot_id").asText(null),
          null,
          n.path("size_bytes").asLong(),
          n.path("sha256").asText(),
          chunks);
    } catch (Failed f) {
      throw f;
    } catch (IOException | RuntimeException e) {
      throw new Failed("the manifest cannot be read");
    }
  }
}
