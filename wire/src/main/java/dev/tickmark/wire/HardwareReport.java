package dev.tickmark.wire;

import com.fasterxml.jackson.annotation.JsonCreator;
import java.util.List;

/**
 * What an agent measured on its machine. Every field is observed, never assumed: a value the agent
 * could not read is {@code null}, and {@code benchmark} is present only if a benchmark actually
 * ran. {@code runtime}: how this agent runs rentals (null from agents older than 2026-12-07).
 */
public record HardwareReport(
    String agentVersion,
    boolean simulated,
    String collectedAt,
    List<Gpu> gpus,
    Cpu cpu,
    Long memoryTotalMib,
    Disk disk,
    Benchmark benchmark,
    WorkloadRuntime runtime) {

  @JsonCreator
  public HardwareReport {}

  /** A report that does not say how rentals run (what the hardware probes measure). */
  public HardwareReport(
      String agentVersion,
      boolean simulated,
      String collectedAt,
      List<Gpu> gpus,
      Cpu cpu,
      Long memoryTotalMib,
      Disk disk,
      Benchmark benchmark) {
    this(agentVersion, simulated, collectedAt, gpus, cpu, memoryTotalMib, disk, benchmark, null);
  }

  /** This report, saying how the agent runs rentals. */
  public HardwareReport withRuntime(WorkloadRuntime runtime) {
    return new HardwareReport(
        agentVersion, simulated, collectedAt, gpus, cpu, memoryTotalMib, disk, benchmark, runtime);
  }

  /**
   * How the agent runs rentals: {@code name} {@code docker}, {@code sandbox} or {@code process};
   * {@code network}: whether it can give a rental that asks for it outbound network (a sandbox
   * needs slirp4netns for that). The engine matches a rental with network only to hosts that can.
   */
  public record WorkloadRuntime(String name, boolean network) {}

  /** One GPU as the vendor tool reports it ({@code nvidia-smi} or {@code rocm-smi}). */
  public record Gpu(
      int index,
      String uuid,
      String name,
      String vendor,
      Long memoryTotalMib,
      String driverVersion,
      String runtimeVersion,
      Integer temperatureC,
      Long eccErrorsUncorrected,
      Integer pcieLinkGen,
      Integer pcieLinkWidth) {}

  public record Cpu(String model, int cores) {}

  /** Free space where workloads will run, and a short measured sequential write rate. */
  public record Disk(String path, Long freeBytes, Double writeMibPerS) {}

  public record Benchmark(String name, Double fp16Tflops, String measuredAt) {}
}
