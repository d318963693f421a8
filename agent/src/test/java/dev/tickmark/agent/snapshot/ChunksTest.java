package dev.tickmark.agent.snapshot;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.EOFException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class ChunksTest {
  @TempDir Path tmp;

  private Path file(int size) throws Exception {
    byte[] b = new byte[size];
    new Random(size).nextBytes(b);
    return Files.write(tmp.resolve("f" + size), b);
  }

  private void check(int size, int chunks) throws Exception {
    Path f = file(size);
    Chunks.Cut cut = Chunks.of(f);
    assertEquals(size, cut.sizeBytes());
    assertEquals(chunks, cut.chunks().size());
    assertEquals(chunks, Chunks.Cut.count(size));
    byte[] all = Files.readAllBytes(f);
    assertEquals(Chunks.sha256(all), cut.sha256());
    ByteArrayOutputStream joined = new ByteArrayOutputStream();
    for (int i = 0; i < chunks; i++) {
      byte[] c = Chunks.read(f, i);
      assertEquals(i < chunks - 1 ? Chunks.SIZE : size - (long) i * Chunks.SIZE, c.length);
      assertEquals(cut.chunks().get(i), Chunks.sha256(c));
      assertTrue(Chunks.isSha256(cut.chunks().get(i)));
      joined.write(c);
    }
    assertArrayEquals(all, joined.toByteArray()); // the sha of the whole is of the concatenation
    assertThrows(EOFException.class, () -> Chunks.read(f, chunks));
  }

  @Test
  void cutsIn4MiBChunks() throws Exception {
    check(0, 0);
    check(1, 1);
    check(Chunks.SIZE - 1, 1);
    check(Chunks.SIZE, 1); // exactly one chunk: no empty second one
    check(Chunks.SIZE + 1, 2);
    check(2 * Chunks.SIZE, 2);
    check(2 * Chunks.SIZE + 12345, 3);
  }

  @Test
  void namesAChunkByTheLowerCaseHexSha256OfItsBytes() {
    assertEquals(
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
        Chunks.sha256("abc".getBytes(java.nio.charset.StandardCharsets.US_ASCII)));
  }
}
