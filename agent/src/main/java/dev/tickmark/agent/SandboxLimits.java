package dev.tickmark.agent;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

/**
 * The resource limits of a sandboxed rental, applied with {@code prlimit} inside the sandbox to the
 * workload and to every SSH session (rlimits: this host may have no cgroups v2 to delegate).
 *
 * <ul>
 *   <li>{@code processes} (RLIMIT_NPROC): counted per user in the sandbox's own user namespace, so
 *       it bounds the rental's processes (a fork bomb stops there).
 *   <li>{@code openFiles} (RLIMIT_NOFILE): per process.
 *   <li>{@code memoryBytes} (RLIMIT_DATA): per process, the heap and private writable mappings. Not
 *       the address space (RLIMIT_AS), which would break CUDA: it reserves far more virtual memory
 *       than it uses. A per-process limit does not bound the rental as a whole; cgroups v2 would.
 * </ul>
 *
 * Each is clamped to the agent's own hard limit: an unprivileged sandbox cannot raise it.
 */
record SandboxLimits(long processes, long openFiles, long memoryBytes) {
  static final long DEFAULT_PROCESSES = 4096;
  static final long DEFAULT_OPEN_FILES = 65_536;

  /** The defaults: 4096 processes, 65536 open files, 3/4 of the machine's memory per process. */
  static SandboxLimits defaults() {
    long total = memTotal(Path.of("/proc/meminfo"));
    long memory = total > 0 ? total / 4 * 3 : 0;
    return new SandboxLimits(DEFAULT_PROCESSES, DEFAULT_OPEN_FILES, memory)
        .clamped(Path.of("/proc/self/limits"));
  }

  /** The same limits, none above the hard limit {@code limitsFile} (a /proc/PID/limits) gives. */
  SandboxLimits clamped(Path limitsFile) {
    String text;
    try {
      text = Files.readString(limitsFile, StandardCharsets.UTF_8);
    } catch (IOException e) {
      return this;
    }
    return new SandboxLimits(
        clamp(processes, hard(text, "Max processes")),
        clamp(openFiles, hard(text, "Max open files")),
        clamp(memoryBytes, hard(text, "Max data size")));
  }

  /**
   * {@code prlimit --nproc=… --nofile=… [--data=…] --}: run inside the sandbox before a program.
   */
  List<String> prlimit(String prlimit) {
    List<String> argv = new java.util.ArrayList<>();
    argv.add(prlimit);
    if (processes > 0) argv.add("--nproc=" + processes);
    if (openFiles > 0) argv.add("--nofile=" + openFiles);
    if (memoryBytes > 0) argv.add("--data=" + memoryBytes);
    argv.add("--");
    return argv;
  }

  private static long clamp(long wanted, long hard) {
    return hard < 0 ? wanted : Math.min(wanted, hard);
  }

  /** The hard limit on the line starting with {@code name}; -1 when unlimited or not found. */
  static long hard(String limits, String name) {
    for (String line : limits.split("\\R")) {
      if (!line.startsWith(name)) continue;
      String[] fields = line.substring(name.length()).trim().split("\\s+");
      if (fields.length < 2 || fields[1].equals("unlimited")) return -1;
      try {
        return Long.parseLong(fields[1]);
      } catch (NumberFormatException e) {
        return -1;
      }
    }
    return -1;
  }

  static long memTotal(Path meminfo) {
    try {
      for (String line : Files.readAllLines(meminfo, StandardCharsets.UTF_8)) {
        if (line.startsWith("MemTotal:")) {
          String[] f = line.substring(9).trim().split("\\s+");
          return Long.parseLong(f[0]) * 1024;
        }
      }
    } catch (IOException | RuntimeException e) {
      // no /proc: no memory limit
    }
    return 0;
  }
}
