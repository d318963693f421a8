package dev.tickmark.bench;

import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * CPU time from Linux's {@code /proc}, in clock ticks: the whole machine, this JVM, and the local
 * PostgreSQL server's processes that work for this run (the backends connected to the benchmark's
 * database plus the server's shared background processes: WAL writer, checkpointer...). Backends of
 * other databases on the same server count as "other", with every other process. Two samples give
 * how many cores each used over a window, so a figure can be read against what else the machine was
 * doing (other builds and test suites). Off Linux every figure is unknown; with a remote server its
 * processes are invisible and PostgreSQL reads 0.
 */
record CpuSample(long nanos, long machineBusy, long jvm, long postgres, boolean known) {
  /** {@code USER_HZ}; 100 on every mainstream Linux build. */
  static final double TICKS_PER_SECOND = 100.0;

  static CpuSample take() {
    return take(null);
  }

  /**
   * {@code database}: the benchmark's database, whose backends count as this run's PostgreSQL time.
   */
  static CpuSample take(String database) {
    long now = System.nanoTime();
    try {
      String[] cpu = Files.readAllLines(Path.of("/proc/stat")).get(0).trim().split("\\s+");
      // cpu user nice system idle iowait irq softirq steal ...
      long busy = 0;
      for (int i = 1; i < cpu.length && i <= 8; i++) {
        if (i == 4 || i == 5) continue; // idle, iowait
        busy += Long.parseLong(cpu[i]);
      }
      long jvm = processTicks(Path.of("/proc/self/stat"));
      long postgres = 0;
      try (DirectoryStream<Path> procs =
          Files.newDirectoryStream(
              Path.of("/proc"), p -> p.getFileName().toString().matches("\\d+"))) {
        for (Path p : procs) {
          try {
            String comm = Files.readString(p.resolve("comm")).trim();
            if ((comm.equals("postgres") || comm.startsWith("postgres:")) && ours(p, database)) {
              postgres += processTicks(p.resolve("stat"));
            }
          } catch (IOException | RuntimeException gone) {
            // the process ended while we looked
          }
        }
      }
      return new CpuSample(now, busy, jvm, postgres, true);
    } catch (IOException | RuntimeException e) {
      return new CpuSample(now, 0, 0, 0, false);
    }
  }

  /**
   * A backend's title is {@code postgres: <cluster>: <user> <database> <host(port)> <state>}; a
   * background process's is {@code postgres: <cluster>: walwriter} and the like.
   */
  private static boolean ours(Path process, String database) throws IOException {
    String title =
        new String(Files.readAllBytes(process.resolve("cmdline"))).replace('\0', ' ').trim();
    if (!title.startsWith("postgres:")) return true; // the postmaster
    String[] words = title.split("\\s+");
    for (int i = 1; i + 2 < words.length; i++) {
      if (words[i].endsWith(":")) continue; // "postgres:" and "15/main:"
      boolean backend = words[i + 2].contains("(") || words[i + 2].equals("[local]");
      return !backend || words[i + 1].equals(database);
    }
    return true;
  }

  private static long processTicks(Path stat) throws IOException {
    String s = Files.readString(stat);
    String[] f = s.substring(s.lastIndexOf(')') + 2).split(" ");
    // after "pid (comm) ": state(0) ... utime(11) stime(12)
    return Long.parseLong(f[11]) + Long.parseLong(f[12]);
  }

  /** Cores used over {@code [this, later]}: machine, JVM, PostgreSQL, everything else. */
  Usage until(CpuSample later) {
    double seconds = (later.nanos - nanos) / 1e9;
    if (!known || !later.known || seconds <= 0) return Usage.UNKNOWN;
    double machine = (later.machineBusy - machineBusy) / TICKS_PER_SECOND / seconds;
    double j = (later.jvm - jvm) / TICKS_PER_SECOND / seconds;
    double pg = (later.postgres - postgres) / TICKS_PER_SECOND / seconds;
    return new Usage(
        true,
        machine,
        j,
        pg,
        Math.max(0, machine - j - pg),
        (later.jvm - jvm) / TICKS_PER_SECOND,
        (later.postgres - postgres) / TICKS_PER_SECOND);
  }

  record Usage(
      boolean known,
      double machineCores,
      double jvmCores,
      double postgresCores,
      double otherCores,
      double jvmSeconds,
      double postgresSeconds) {
    static final Usage UNKNOWN = new Usage(false, 0, 0, 0, 0, 0, 0);
  }
}
