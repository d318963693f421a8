package dev.tickmark.agent;

import dev.tickmark.wire.AgentFrame;
import dev.tickmark.wire.HardwareReport;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Clock;
import java.time.Duration;
import java.time.temporal.ChronoUnit;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ThreadLocalRandom;
import java.util.function.Function;
import java.util.stream.Collectors;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The real machine: GPUs from {@code nvidia-smi} and {@code rocm-smi} (each run with a timeout; a
 * missing tool means no GPUs of that vendor), CPU and RAM from {@code /proc}, free space of the
 * state folder's file system and a measured sequential write rate there: the best of {@link
 * #DISK_SAMPLES} writes within {@link #DISK_SAMPLING_BUDGET}, so that one busy moment (another
 * process flushing) does not fail the host. Never runs a benchmark, so {@code benchmark} is always
 * null.
 */
final class HardwareProbe implements Hardware {
  static final long DEFAULT_DISK_PROBE_BYTES = 64L * 1024 * 1024;
  static final Duration REPORT_TIMEOUT = Duration.ofSeconds(20);
  static final Duration SAMPLE_TIMEOUT = Duration.ofSeconds(4);
  static final Path ROCM_VERSION_FILE = Path.of("/opt/rocm/.info/version");

  /** How many disk writes are timed for one report; the best is reported. */
  static final int DISK_SAMPLES = 3;

  /**
   * No further disk write is started once this much time has gone on them: a slow disk still
   * reports within a heartbeat timeout (measurements share the heartbeat sampler's thread).
   */
  static final Duration DISK_SAMPLING_BUDGET = Duration.ofSeconds(8);

  /** Times one write of {@code bytes} in {@code dir}: MiB/s, or null when it failed. */
  @FunctionalInterface
  interface WriteSampler {
    Double sample(Path dir, long bytes);
  }

  private static final Logger log = LoggerFactory.getLogger(HardwareProbe.class);
  private static final int MIB = 1024 * 1024;

  private final String agentVersion;
  private final Path stateDir;
  private final Commands commands;
  private final Path procDir;
  private final long diskProbeBytes;
  private final Clock clock;
  private final WriteSampler writeSampler;

  /**
   * The GPUs of the last report: the baseline against which samples detect lost GPUs and new ECC
   * errors.
   */
  private volatile List<HardwareReport.Gpu> reported = List.of();

  /**
   * AMD card N is reported with index {@code amdIndexOffset + N} (after the NVIDIA GPUs, when both
   * are present).
   */
  private volatile int amdIndexOffset;

  HardwareProbe(
      String agentVersion,
      Path stateDir,
      Commands commands,
      Path procDir,
      long diskProbeBytes,
      Clock clock) {
    this(
        agentVersion,
        stateDir,
        commands,
        procDir,
        diskProbeBytes,
        clock,
        HardwareProbe::measureWriteMibPerS);
  }

  HardwareProbe(
      String agentVersion,
      Path stateDir,
      Commands commands,
      Path procDir,
      long diskProbeBytes,
      Clock clock,
      WriteSampler writeSampler) {
    this.writeSampler = writeSampler;
    this.agentVersion = agentVersion;
    this.stateDir = stateDir;
    this.commands = commands;
    this.procDir = procDir;
    this.diskProbeBytes = diskProbeBytes;
    this.clock = clock;
  }

  static HardwareProbe of(String agentVersion, Path stateDir) {
    return new HardwareProbe(
        agentVersion,
        stateDir,
        Commands.PROCESSES,
        Path.of("/proc"),
        DEFAULT_DISK_PROBE_BYTES,
        Clock.systemUTC());
  }

  @Override
  public HardwareReport report() {
    List<HardwareReport.Gpu> gpus = new ArrayList<>(nvidiaGpus());
    int offset = gpus.stream().mapToInt(HardwareReport.Gpu::index).max().orElse(-1) + 1;
    for (HardwareReport.Gpu g : amdGpus()) gpus.add(withIndex(g, g.index() + offset));
    amdIndexOffset = offset;
    reported = List.copyOf(gpus);
    if (gpus.isEmpty())
      log.warn("no GPU found (nvidia-smi and rocm-smi absent or silent): the report lists none");
    return new HardwareReport(
        agentVersion, false, collectedAt(), gpus, cpu(), memoryTotalMib(), disk(), null);
  }

  @Override
  public List<AgentFrame.GpuSample> sample() {
    List<HardwareReport.Gpu> gpus = reported;
    List<HardwareReport.Gpu> nvidia = ofVendor(gpus, NvidiaSmi.VENDOR);
    List<HardwareReport.Gpu> amd = ofVendor(gpus, RocmSmi.VENDOR);
    List<AgentFrame.GpuSample> samples = new ArrayList<>();
    if (!nvidia.isEmpty()) {
      samples.addAll(
          nvidiaSamples(
              nvidia,
              commands
                  .run(NvidiaSmi.sampleCommand(), SAMPLE_TIMEOUT)
                  .map(Commands.Output::stdout)
                  .orElse(null)));
    }
    if (!amd.isEmpty()) {
      samples.addAll(
          amdSamples(
              amd,
              amdIndexOffset,
              commands
                  .run(RocmSmi.sampleCommand(), SAMPLE_TIMEOUT)
                  .map(Commands.Output::stdout)
                  .orElse(null)));
    }
    samples.sort(Comparator.comparingInt(AgentFrame.GpuSample::index));
    return samples;
  }

  /**
   * Heartbeat samples of the reported NVIDIA GPUs from the sample query's output ({@code null}: the
   * tool did not answer, so nothing is known and nothing is claimed). Faults, reported only when
   * observed: {@code gpu_lost} (nvidia-smi says a GPU is lost and this one is missing from its
   * rows), {@code gpu_requires_reset}, {@code uncorrected_ecc_errors} (the volatile count rose
   * above the reported one).
   */
  static List<AgentFrame.GpuSample> nvidiaSamples(
      List<HardwareReport.Gpu> reported, String output) {
    Map<Integer, NvidiaSmi.SampleRow> rows =
        output == null
            ? Map.of()
            : NvidiaSmi.parseSamples(output).stream()
                .collect(
                    Collectors.toMap(NvidiaSmi.SampleRow::index, Function.identity(), (a, b) -> a));
    boolean lost = NvidiaSmi.mentionsLostGpu(output);
    List<AgentFrame.GpuSample> samples = new ArrayList<>();
    for (HardwareReport.Gpu gpu : reported) {
      NvidiaSmi.SampleRow row = rows.get(gpu.index());
      if (row == null) {
        samples.add(new AgentFrame.GpuSample(gpu.index(), null, null, lost ? "gpu_lost" : null));
        continue;
      }
      String fault = null;
      if (row.requiresReset()) fault = "gpu_requires_reset";
      else if (row.eccErrorsUncorrected() != null
          && gpu.eccErrorsUncorrected() != null
          && row.eccErrorsUncorrected() > gpu.eccErrorsUncorrected())
        fault = "uncorrected_ecc_errors";
      samples.add(
          new AgentFrame.GpuSample(
              gpu.index(), row.utilizationPercent(), row.temperatureC(), fault));
    }
    return samples;
  }

  /**
   * Heartbeat samples of the reported AMD GPUs (no fault detection: rocm-smi gives nothing reliable
   * for it).
   */
  static List<AgentFrame.GpuSample> amdSamples(
      List<HardwareReport.Gpu> reported, int indexOffset, String output) {
    Map<Integer, RocmSmi.SampleRow> rows =
        output == null
            ? Map.of()
            : RocmSmi.parseSamples(output).stream()
                .collect(
                    Collectors.toMap(
                        r -> r.index() + indexOffset, Function.identity(), (a, b) -> a));
    List<AgentFrame.GpuSample> samples = new ArrayList<>();
    for (HardwareReport.Gpu gpu : reported) {
      RocmSmi.SampleRow row = rows.get(gpu.index());
      samples.add(
          row == null
              ? new AgentFrame.GpuSample(gpu.index(), null, null, null)
              : new AgentFrame.GpuSample(
                  gpu.index(), row.utilizationPercent(), row.temperatureC(), null));
    }
    return samples;
  }

  List<HardwareReport.Gpu> nvidiaGpus() {
    Optional<Commands.Output> out = commands.run(NvidiaSmi.reportCommand(), REPORT_TIMEOUT);
    if (out.isEmpty()) return List.of();
    if (out.get().exitCode() != 0) {
      log.warn(
          "nvidia-smi exited with status {}; reading the GPUs it listed", out.get().exitCode());
    }
    if (NvidiaSmi.parseGpus(out.get().stdout(), null).isEmpty()) return List.of();
    String cuda =
        commands
            .run(List.of("nvidia-smi"), REPORT_TIMEOUT)
            .map(o -> NvidiaSmi.parseCudaVersion(o.stdout()))
            .orElse(null);
    if (cuda == null) {
      cuda =
          commands
              .run(List.of("nvidia-smi", "-q"), REPORT_TIMEOUT)
              .map(o -> NvidiaSmi.parseCudaVersion(o.stdout()))
              .orElse(null);
    }
    return NvidiaSmi.parseGpus(out.get().stdout(), cuda);
  }

  List<HardwareReport.Gpu> amdGpus() {
    Optional<Commands.Output> out = commands.run(RocmSmi.reportCommand(), REPORT_TIMEOUT);
    if (out.isEmpty()) return List.of();
    return RocmSmi.parseGpus(
        out.get().stdout(), RocmSmi.parseRocmVersion(readOrNull(ROCM_VERSION_FILE)));
  }

  HardwareReport.Cpu cpu() {
    String cpuinfo = readOrNull(procDir.resolve("cpuinfo"));
    HardwareReport.Cpu cpu = cpuinfo == null ? null : ProcInfo.parseCpuInfo(cpuinfo);
    return cpu != null
        ? cpu
        : new HardwareReport.Cpu(null, java.lang.Runtime.getRuntime().availableProcessors());
  }

  Long memoryTotalMib() {
    String meminfo = readOrNull(procDir.resolve("meminfo"));
    return meminfo == null ? null : ProcInfo.parseMemTotalMib(meminfo);
  }

  HardwareReport.Disk disk() {
    Path dir = stateDir.toAbsolutePath();
    Long free = null;
    try {
      free = Files.getFileStore(dir).getUsableSpace();
    } catch (IOException e) {
      log.warn("cannot read the free space of {}: {}", dir, e.getMessage());
    }
    return new HardwareReport.Disk(
        dir.toString(),
        free,
        bestOf(
            () -> writeSampler.sample(dir, diskProbeBytes),
            DISK_SAMPLES,
            DISK_SAMPLING_BUDGET,
            System::nanoTime));
  }

  /**
   * The best of up to {@code samples} measurements (null ones, failed writes, are skipped; null if
   * all failed); none is started once {@code budget} has passed since the first, so at least one is
   * always taken.
   */
  static Double bestOf(
      java.util.function.Supplier<Double> measure,
      int samples,
      Duration budget,
      java.util.function.LongSupplier nanoTime) {
    long started = nanoTime.getAsLong();
    Double best = null;
    for (int i = 0; i < samples; i++) {
      if (i > 0 && nanoTime.getAsLong() - started >= budget.toNanos()) break;
      if (Thread.currentThread().isInterrupted()) break; // the agent is stopping
      Double sample = measure.get();
      if (sample != null && (best == null || sample > best)) best = sample;
    }
    return best;
  }

  /**
   * Writes {@code bytes} of random data to a temporary file in {@code dir}, forces it to the
   * device, and returns MiB per second (one decimal), or null if the write failed. The file is
   * always deleted.
   */
  static Double measureWriteMibPerS(Path dir, long bytes) {
    if (bytes <= 0) return null;
    Path file = null;
    try {
      file = Files.createTempFile(dir, ".tickmark-disk-probe-", ".tmp");
      byte[] chunk = new byte[(int) Math.min(MIB, bytes)];
      ThreadLocalRandom.current().nextBytes(chunk);
      ByteBuffer buffer = ByteBuffer.allocateDirect(chunk.length);
      buffer.put(chunk);
      long started = System.nanoTime();
      try (FileChannel channel = FileChannel.open(file, StandardOpenOption.WRITE)) {
        long written = 0;
        while (written < bytes) {
          buffer.clear();
          buffer.limit((int) Math.min(buffer.capacity(), bytes - written));
          while (buffer.hasRemaining()) written += channel.write(buffer);
        }
        channel.force(true);
      }
      long nanos = Math.max(1, System.nanoTime() - started);
      double mibPerS = (bytes / (double) MIB) / (nanos / 1e9);
      return Math.round(mibPerS * 10) / 10.0;
    } catch (IOException | RuntimeException e) {
      if (Thread.currentThread().isInterrupted()) return null; // the agent is stopping
      log.warn("cannot measure the disk write rate in {}: {}", dir, e.toString());
      return null;
    } finally {
      if (file != null) {
        try {
          Files.deleteIfExists(file);
        } catch (IOException e) {
          log.warn("cannot delete {}: {}", file, e.getMessage());
        }
      }
    }
  }

  String collectedAt() {
    return clock.instant().truncatedTo(ChronoUnit.SECONDS).toString();
  }

  private static List<HardwareReport.Gpu> ofVendor(List<HardwareReport.Gpu> gpus, String vendor) {
    return gpus.stream().filter(g -> vendor.equals(g.vendor())).toList();
  }

  private static String readOrNull(Path file) {
    try {
      return Files.readString(file, StandardCharsets.UTF_8);
    } catch (IOException | RuntimeException e) {
      return null;
    }
  }

  private static HardwareReport.Gpu withIndex(HardwareReport.Gpu g, int index) {
    return new HardwareReport.Gpu(
        index,
        g.uuid(),
        g.name(),
        g.vendor(),
        g.memoryTotalMib(),
        g.driverVersion(),
        g.runtimeVersion(),
        g.temperatureC(),
        g.eccErrorsUncorrected(),
        g.pcieLinkGen(),
        g.pcieLinkWidth());
  }
}
