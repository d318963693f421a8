package dev.tickmark.agent;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.tickmark.wire.AgentFrame;
import dev.tickmark.wire.HardwareReport;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.stream.Stream;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class HardwareProbeTest {
  private static final Clock CLOCK =
      Clock.fixed(Instant.parse("2026-11-29T18:00:00.250Z"), ZoneOffset.UTC);

  @TempDir Path stateDir;
  @TempDir Path proc;

  /** Answers commands from captured outputs; anything else is "not installed". */
  static final class CannedCommands implements Commands {
    final Map<String, Output> outputs = new HashMap<>();
    final List<String> ran = new ArrayList<>();

    CannedCommands answer(List<String> command, String stdout) {
      outputs.put(String.join(" ", command), new Output(0, stdout));
      return this;
    }

    @Override
    public Optional<Output> run(List<String> command, Duration timeout) {
      ran.add(String.join(" ", command));
      return Optional.ofNullable(outputs.get(String.join(" ", command)));
    }
  }

  @BeforeEach
  void proc() throws IOException {
    Files.writeString(proc.resolve("cpuinfo"), Fixtures.read("proc/cpuinfo-epyc"));
    Files.writeString(proc.resolve("meminfo"), Fixtures.read("proc/meminfo"));
  }

  private HardwareProbe probe(Commands commands) {
    return new HardwareProbe("0.1.0", stateDir, commands, proc, 1024 * 1024, CLOCK);
  }

  @Test
  void machineWithoutVendorToolsReportsNoGpusHonestly() {
    CannedCommands none = new CannedCommands();
    HardwareReport r = probe(none).report();

    assertEquals(List.of(), r.gpus());
    assertFalse(r.simulated());
    assertEquals("0.1.0", r.agentVersion());
    assertEquals("2026-11-29T18:00:00Z", r.collectedAt());
    assertEquals(new HardwareReport.Cpu("AMD EPYC 9454 48-Core Processor", 4), r.cpu());
    assertEquals(1032000L, r.memoryTotalMib());
    assertNull(r.benchmark(), "no benchmark ran, so none is reported");
    assertTrue(none.ran.stream().anyMatch(c -> c.startsWith("nvidia-smi --query-gpu=")));
    assertTrue(none.ran.stream().anyMatch(c -> c.startsWith("rocm-smi ")));
  }

  @Test
  void nvidiaMachineWithCudaVersionFromTheHeader() {
    CannedCommands c =
        new CannedCommands()
            .answer(NvidiaSmi.reportCommand(), Fixtures.read("nvidia-smi/h100-80gb-hbm3-x8.csv"))
            .answer(List.of("nvidia-smi"), Fixtures.read("nvidia-smi/h100-nvidia-smi.txt"));
    HardwareReport r = probe(c).report();

    assertEquals(8, r.gpus().size());
    assertTrue(
        r.gpus().stream()
            .allMatch(
                g -> "12.4".equals(g.runtimeVersion()) && "550.54.15".equals(g.driverVersion())));
  }

  @Test
  void cudaVersionFallsBackToQueryOutput() {
    CannedCommands c =
        new CannedCommands()
            .answer(NvidiaSmi.reportCommand(), Fixtures.read("nvidia-smi/a100-sxm4-80gb-x4.csv"))
            .answer(List.of("nvidia-smi", "-q"), Fixtures.read("nvidia-smi/a100-nvidia-smi-q.txt"));
    assertEquals("12.2", probe(c).report().gpus().get(0).runtimeVersion());
  }

  @Test
  void amdCardsFollowNvidiaOnesWhenBothArePresent() {
    CannedCommands c =
        new CannedCommands()
            .answer(NvidiaSmi.reportCommand(), Fixtures.read("nvidia-smi/l40s-x2.csv"))
            .answer(RocmSmi.reportCommand(), Fixtures.read("rocm-smi/rx7900xt.json"))
            .answer(RocmSmi.sampleCommand(), Fixtures.read("rocm-smi/rx7900xt-use.json"))
            .answer(NvidiaSmi.sampleCommand(), "0, 5, 30, 0\n1, 6, 31, 0\n");
    HardwareProbe probe = probe(c);
    HardwareReport r = probe.report();

    assertEquals(List.of(0, 1, 2), r.gpus().stream().map(HardwareReport.Gpu::index).toList());
    assertEquals("Radeon RX 7900 XT", r.gpus().get(2).name());
    assertEquals(
        List.of(
            new AgentFrame.GpuSample(0, 5, 30, null),
            new AgentFrame.GpuSample(1, 6, 31, null),
            new AgentFrame.GpuSample(2, 63, 47, null)),
        probe.sample());
  }

  @Test
  void samplesWithoutAnAnswerClaimNothing() {
    CannedCommands c =
        new CannedCommands()
            .answer(NvidiaSmi.reportCommand(), Fixtures.read("nvidia-smi/l40s-x2.csv"));
    HardwareProbe probe = probe(c);
    probe.report();
    assertEquals(
        List.of(
            new AgentFrame.GpuSample(0, null, null, null),
            new AgentFrame.GpuSample(1, null, null, null)),
        probe.sample());
  }

  @Test
  void faultsAreReportedOnlyWhenObserved() {
    List<HardwareReport.Gpu> two =
        NvidiaSmi.parseGpus(Fixtures.read("nvidia-smi/ecc-errors-a100-x2.csv"), "12.2");
    List<HardwareReport.Gpu> clean = List.of(two.get(0), withEcc(two.get(1), 0L));

    assertEquals(
        List.of(
            new AgentFrame.GpuSample(0, 12, 44, null),
            new AgentFrame.GpuSample(1, null, null, "gpu_lost")),
        HardwareProbe.nvidiaSamples(clean, Fixtures.read("nvidia-smi/samples-gpu-lost.txt")));
    assertEquals(
        "gpu_requires_reset",
        HardwareProbe.nvidiaSamples(clean, Fixtures.read("nvidia-smi/samples-requires-reset.csv"))
            .get(1)
            .fault());
    assertEquals(
        new AgentFrame.GpuSample(1, 35, 52, "uncorrected_ecc_errors"),
        HardwareProbe.nvidiaSamples(clean, Fixtures.read("nvidia-smi/samples-ecc-rise.csv"))
            .get(1));
    assertNull(
        HardwareProbe.nvidiaSamples(two, "0, 0, 33, 0\n1, 0, 33, 3\n").get(1).fault(),
        "the count already reported is no new fault");
    assertTrue(
        HardwareProbe.nvidiaSamples(clean, "0, 1, 30, 0\n").stream()
            .allMatch(s -> s.fault() == null),
        "a missing row without 'GPU is lost' is not a fault");
  }

  @Test
  void diskFreeSpaceAndMeasuredWriteRateLeaveNoFileBehind() throws IOException {
    HardwareReport.Disk disk = probe(new CannedCommands()).disk();

    assertEquals(stateDir.toAbsolutePath().toString(), disk.path());
    assertNotNull(disk.freeBytes());
    assertTrue(disk.freeBytes() > 0);
    assertNotNull(disk.writeMibPerS());
    assertTrue(disk.writeMibPerS() > 0);
    try (Stream<Path> files = Files.list(stateDir)) {
      assertEquals(0, files.count());
    }
  }

  @Test
  void theReportedWriteRateIsTheBestOfSeveralSamplesSoOneBusyMomentDoesNotFailTheHost() {
    // The first write meets a busy disk (another process flushing); the next two do not.
    java.util.Iterator<Double> rates = List.of(40.0, 610.5, 590.0).iterator();
    List<Long> sizes = new ArrayList<>();
    HardwareProbe probe =
        new HardwareProbe(
            "0.1.0",
            stateDir,
            new CannedCommands(),
            proc,
            1024 * 1024,
            CLOCK,
            (dir, bytes) -> {
              sizes.add(bytes);
              assertEquals(stateDir.toAbsolutePath(), dir);
              return rates.next();
            });
    assertEquals(610.5, probe.disk().writeMibPerS());
    assertEquals(List.of(1024L * 1024, 1024L * 1024, 1024L * 1024), sizes);
    assertEquals(HardwareProbe.DISK_SAMPLES, sizes.size());
  }

  @Test
  void failedSamplesAreSkippedAndAllFailedReportsNoRate() {
    java.util.Iterator<Double> some = java.util.Arrays.<Double>asList(null, 80.0, null).iterator();
    assertEquals(80.0, HardwareProbe.bestOf(some::next, 3, Duration.ofSeconds(8), () -> 0L));
    java.util.Iterator<Double> none = java.util.Arrays.<Double>asList(null, null, null).iterator();
    assertNull(HardwareProbe.bestOf(none::next, 3, Duration.ofSeconds(8), () -> 0L));
  }

  @Test
  void noSampleStartsOnceTheBudgetIsSpent() {
    long[] now = {0};
    List<Double> taken = new ArrayList<>();
    Double best =
        HardwareProbe.bestOf(
            () -> {
              // each write takes 5 s: the second still starts (5 < 8), the third does not
              now[0] += Duration.ofSeconds(5).toNanos();
              double rate = 100.0 + taken.size();
              taken.add(rate);
              return rate;
            },
            3,
            Duration.ofSeconds(8),
            () -> now[0]);
    assertEquals(List.of(100.0, 101.0), taken);
    assertEquals(101.0, best);
  }

  @Test
  void unwritableFolderGivesNoRateRatherThanAnError() {
    assertNull(HardwareProbe.measureWriteMibPerS(stateDir.resolve("does-not-exist"), 1024));
  }

  private static HardwareReport.Gpu withEcc(HardwareReport.Gpu g, Long ecc) {
    return new HardwareReport.Gpu(
        g.index(),
        g.uuid(),
        g.name(),
        g.vendor(),
        g.memoryTotalMib(),
        g.driverVersion(),
        g.runtimeVersion(),
        g.temperatureC(),
        ecc,
        g.pcieLinkGen(),
        g.pcieLinkWidth());
  }
}
