package dev.tickmark.wire;

import java.util.List;

/**
 * What an agent measured on its machine. Every field is observed, never assumed: a value the agent
 * could not read is {@code null}, and {@code benchmark} is present only if a benchmark actually
 * ran.
 */
public record HardwareReport(
    String agentVersion,
    boolean simulated,
    String collectedAt,
    List<Gpu> gpus,
    Cpu cpu,
    Long memoryTotalMib,
    Disk disk,
    Benchmark benchmark) {

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
