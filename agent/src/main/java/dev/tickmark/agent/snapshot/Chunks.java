package dev.tickmark.agent.snapshot;

import java.io.EOFException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;

/**
 * An archive cut in {@link #SIZE} chunks (the last one shorter), each named by its sha256, and the
 * sha256 of the whole: what the engine stores (content-addressed) and checks.
 */
public final class Chunks {
  /** 4 MiB, as the engine stores them (docs/snapshots.md). */
  public static final int SIZE = 4 * 1024 * 1024;

  private Chunks() {}

  /**
   * The chunking of a file: its size, the sha256 of the whole and of each chunk in order
   * (lower-case hex).
   */
  public record Cut(long sizeBytes, String sha256, List<String> chunks) {
    public Cut {
      chunks = List.copyOf(chunks);
    }

    /** The number of chunks {@code size} bytes make: none for an empty file. */
    static int count(long size) {
      return (int) ((size + SIZE - 1) / SIZE);
    }
  }

  /** Reads {@code file} once, {@link #SIZE} bytes at a time. */
  public static Cut of(Path file) throws IOException {
    MessageDigest whole = sha256();
    List<String> chunks = new ArrayList<>();
    ByteBuffer buf = ByteBuffer.allocate(SIZE);
    long size = 0;
    try (FileChannel ch = FileChannel.open(file, StandardOpenOption.READ)) {
      while (true) {
        buf.clear();
        while (buf.hasRemaining() && ch.read(buf) >= 0) {}
        buf.flip();
        if (!buf.hasRemaining()) break;
        size += buf.remaining();
        whole.update(buf.duplicate());
        chunks.add(hex(buf));
        if (buf.limit() < SIZE) break;
      }
    }
    return new Cut(size, HexFormat.of().formatHex(whole.digest()), chunks);
  }

  /** Chunk {@code index} of {@code file}. */
  public static byte[] read(Path file, int index) throws IOException {
    try (FileChannel ch = FileChannel.open(file, StandardOpenOption.READ)) {
      long at = (long) index * SIZE;
      long size = ch.size();
      if (index < 0 || at >= size) throw new EOFException("no chunk " + index + " in " + file);
      ByteBuffer buf = ByteBuffer.allocate((int) Math.min(SIZE, size - at));
      while (buf.hasRemaining()) {
        int n = ch.read(buf, at + buf.position());
        if (n < 0) throw new EOFException(file + " shrank while it was read");
      }
      return buf.array();
    }
  }

  /** The lower-case hex sha256 of {@code bytes}. */
  public static String sha256(byte[] bytes) {
    return hex(ByteBuffer.wrap(bytes));
  }

  static String hex(ByteBuffer bytes) {
    MessageDigest d = sha256();
    d.update(bytes.duplicate());
    return HexFormat.of().formatHex(d.digest());
  }

  static MessageDigest sha256() {
    try {
      return MessageDigest.getInstance("SHA-256");
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("every JDK has SHA-256", e);
    }
  }

  /** A sha256 as the engine names chunks: 64 lower-case hex digits. */
  static boolean isSha256(String s) {
    return s != null && s.matches("[0-9a-f]{64}");
  }
}
