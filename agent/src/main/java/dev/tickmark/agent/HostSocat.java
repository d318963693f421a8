package dev.tickmark.agent;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.stream.Stream;

/**
 * The host's own {@code socat}, runnable inside a container of any image: the host's folders that
 * hold it, its dynamic loader and its libraries are mounted read-only under {@link #MOUNT_ROOT},
 * and the container runs the host's loader on it with the host's library folders (never the
 * image's: {@code --inhibit-cache}, and {@code --library-path} first). So a forwarded connection
 * can be made inside a docker rental's network namespace whatever its image holds (an {@code
 * ubuntu} image has neither {@code socat} nor {@code nc}), and the rental's files and processes are
 * not touched: the helper is a container of its own that only shares the rental's network.
 *
 * @param socat the real path of the host's {@code socat}
 * @param loader the real path of the dynamic loader {@code socat} names (its ELF interpreter)
 * @param libraryPath the host's library folders, real paths, in search order
 * @param mounts the host's top-level folders that hold all of these (e.g. only {@code /usr} on a
 *     system with a merged {@code /usr})
 */
record HostSocat(Path socat, Path loader, List<Path> libraryPath, List<Path> mounts) {
  /** Where the host's folders appear in the helper container. */
  static final String MOUNT_ROOT = "/tickmark-host";

  private static final int PT_INTERP = 3;

  HostSocat {
    libraryPath = List.copyOf(libraryPath);
    mounts = List.copyOf(mounts);
  }

  /** The host's socat, or null where there is none or its loader cannot be told. */
  static HostSocat find() {
    for (String dir : List.of("/usr/bin", "/usr/sbin", "/bin", "/usr/local/bin")) {
      Path p = Path.of(dir, "socat");
      if (Files.isExecutable(p)) return of(p);
    }
    return null;
  }

  /** {@code socat} as found at {@code path}; null when it is no dynamically linked ELF program. */
  static HostSocat of(Path path) {
    try {
      Path socat = path.toRealPath();
      String interpreter = interpreter(socat);
      if (interpreter == null) return null;
      Path loader = Path.of(interpreter).toRealPath();
      Set<Path> dirs = new LinkedHashSet<>();
      dirs.add(loader.getParent());
      String triplet = loader.getParent().getFileName().toString();
      List<String> candidates = new ArrayList<>();
      if (triplet.contains("-linux-"))
        candidates.addAll(List.of("/lib/" + triplet, "/usr/lib/" + triplet));
      candidates.addAll(List.of("/lib64", "/usr/lib64", "/lib", "/usr/lib"));
      candidates.addAll(configured(Path.of("/etc/ld.so.conf.d")));
      for (String c : candidates) {
        Path d = Path.of(c);
        if (Files.isDirectory(d)) dirs.add(d.toRealPath());
      }
      Set<Path> tops = new LinkedHashSet<>();
      tops.add(top(socat));
      tops.add(top(loader));
      for (Path d : dirs) tops.add(top(d));
      return new HostSocat(socat, loader, List.copyOf(dirs), List.copyOf(tops));
    } catch (IOException | RuntimeException e) {
      return null;
    }
  }

  /** The library folders {@code /etc/ld.so.conf.d/*.conf} names (absolute lines only). */
  private static List<String> configured(Path confDir) {
    List<String> dirs = new ArrayList<>();
    if (!Files.isDirectory(confDir)) return dirs;
    try (Stream<Path> files = Files.list(confDir)) {
      for (Path f : files.filter(f -> f.toString().endsWith(".conf")).sorted().toList()) {
        for (String line : Files.readAllLines(f)) {
          String l = line.strip();
          if (l.startsWith("/")) dirs.add(l);
        }
      }
    } catch (IOException | RuntimeException e) {
      // a folder or file that cannot be read adds nothing
    }
    return dirs;
  }

  private static Path top(Path p) {
    return p.getRoot().resolve(p.getName(0));
  }

  /** A host path as the helper container sees it. */
  static String inside(Path hostPath) {
    return MOUNT_ROOT + hostPath;
  }

  /**
   * The arguments of {@code docker run} that mount the host's folders and run the host's socat
   * through its loader: everything from {@code -v} to the image is the caller's; this returns the
   * mounts and the entry point ({@code before} the image) and socat's own command line ({@code
   * after} it).
   */
  List<String> mountsAndEntryPoint() {
    List<String> a = new ArrayList<>();
    for (Path m : mounts) a.addAll(List.of("-v", m + ":" + inside(m) + ":ro"));
    a.addAll(List.of("--entrypoint", inside(loader)));
    return a;
  }

  /** After the image: the loader's options, then socat joining its stdio to {@code address}. */
  List<String> command(String address) {
    List<String> a = new ArrayList<>();
    // glibc's loader: never read the image's own cache of library locations (musl has no cache)
    if (!loader.getFileName().toString().startsWith("ld-musl")) a.add("--inhibit-cache");
    a.add("--library-path");
    a.add(String.join(":", libraryPath.stream().map(HostSocat::inside).toList()));
    a.addAll(List.of(inside(socat), "-", address));
    return a;
  }

  /**
   * The ELF interpreter ({@code PT_INTERP}) {@code program} names, or null for a statically linked
   * program or a file that is no ELF program.
   */
  static String interpreter(Path program) throws IOException {
    try (FileChannel f = FileChannel.open(program)) {
      ByteBuffer ident = read(f, 0, 16);
      if (ident == null || ident.getInt(0) != 0x7f454c46) return null; // "\x7fELF", big-endian
      boolean is64 = ident.get(4) == 2;
      ByteOrder order = ident.get(5) == 2 ? ByteOrder.BIG_ENDIAN : ByteOrder.LITTLE_ENDIAN;
      ByteBuffer header = read(f, 0, is64 ? 64 : 52);
      if (header == null) return null;
      header.order(order);
      long phoff = is64 ? header.getLong(0x20) : Integer.toUnsignedLong(header.getInt(0x1C));
      int phentsize = Short.toUnsignedInt(header.getShort(is64 ? 0x36 : 0x2A));
      int phnum = Short.toUnsignedInt(header.getShort(is64 ? 0x38 : 0x2C));
      for (int i = 0; i < phnum; i++) {
        ByteBuffer ph = read(f, phoff + (long) i * phentsize, is64 ? 56 : 32);
        if (ph == null) return null;
        ph.order(order);
        if (ph.getInt(0) != PT_INTERP) continue;
        long offset = is64 ? ph.getLong(8) : Integer.toUnsignedLong(ph.getInt(4));
        long size = is64 ? ph.getLong(32) : Integer.toUnsignedLong(ph.getInt(16));
        if (size <= 1 || size > 4096) return null;
        ByteBuffer name = read(f, offset, (int) size);
        if (name == null) return null;
        byte[] bytes = new byte[(int) size - 1]; // without its NUL
        name.get(bytes);
        return new String(bytes, StandardCharsets.US_ASCII);
      }
      return null;
    }
  }

  private static ByteBuffer read(FileChannel f, long at, int length) throws IOException {
    ByteBuffer b = ByteBuffer.allocate(length);
    while (b.hasRemaining()) {
      if (f.read(b, at + b.position()) < 0) return null;
    }
    return b.flip();
  }
}
