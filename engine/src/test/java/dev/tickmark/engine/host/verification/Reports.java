package dev.tickmark.engine.host.verification;

import dev.tickmark.wire.HardwareReport;
import dev.tickmark.wire.HardwareReport.Benchmark;
import dev.tickmark.wire.HardwareReport.Disk;
import dev.tickmark.wire.HardwareReport.Gpu;
import java.util.ArrayList;
import java.util.List;
import java.util.function.UnaryOperator;

/** Test reports: a healthy host, and copies of it with one thing changed. */
final class Reports {
  private Reports() {}

  static final long GIB = 1024L * 1024 * 1024;

  static Gpu h100(int index) {
    return new Gpu(
        index,
        "GPU-6f1e5a3c-0000-4000-8000-00000000000" + index,
        "NVIDIA H100 80GB HBM3",
        "nvidia",
        81559L,
        "550.54.15",
        "12.4",
        34,
        0L,
        5,
        16);
  }

  static Gpu a10(int index) {
    return new Gpu(
        index,
        "GPU-a10a10a1-0000-4000-8000-00000000000" + index,
        "NVIDIA A10",
        "nvidia",
        23028L,
        "550.54.15",
        "12.4",
        41,
        0L,
        4,
        16);
  }

  static Gpu rx7900xt(int index) {
    return new Gpu(
        index,
        "0x7900" + index,
        "AMD Radeon RX 7900 XT",
        "amd",
        20464L,
        "6.7.0",
        "6.1.2",
        45,
        null,
        4,
        16);
  }

  /** Two H100 80GB HBM3 on a big server: passes every check; the benchmark is not measured. */
  static HardwareReport healthy() {
    return new HardwareReport(
        "0.1.0",
        false,
        "2026-11-29T18:00:00Z",
        List.of(h100(0), h100(1)),
        new HardwareReport.Cpu("AMD EPYC 9454 48-Core Processor", 96),
        1_031_000L,
        new Disk("/var/lib/tickmark", 1_800_000_000_000L, 1450.2),
        null);
  }

  static HardwareReport withGpus(HardwareReport r, List<Gpu> gpus) {
    return new HardwareReport(
        r.agentVersion(),
        r.simulated(),
        r.collectedAt(),
        gpus,
        r.cpu(),
        r.memoryTotalMib(),
        r.disk(),
        r.benchmark());
  }

  /** Applies {@code change} to every GPU of the report. */
  static HardwareReport eachGpu(HardwareReport r, UnaryOperator<Gpu> change) {
    List<Gpu> gpus = new ArrayList<>();
    for (Gpu g : r.gpus()) gpus.add(change.apply(g));
    return withGpus(r, gpus);
  }

  static HardwareReport simulated(HardwareReport r, boolean simulated) {
    return new HardwareReport(
        r.agentVersion(),
        simulated,
        r.collectedAt(),
        r.gpus(),
        r.cpu(),
        r.memoryTotalMib(),
        r.disk(),
        r.benchmark());
  }

  static HardwareReport ram(HardwareReport r, Long mib) {
    return new HardwareReport(
        r.agentVersion(),
        r.simulated(),
        r.collectedAt(),
        r.gpus(),
        r.cpu(),
        mib,
        r.disk(),
        r.benchmark());
  }

  static HardwareReport disk(HardwareReport r, Disk disk) {
    return new HardwareReport(
        r.agentVersion(),
        r.simulated(),
        r.collectedAt(),
        r.gpus(),
        r.cpu(),
        r.memoryTotalMib(),
        disk,
        r.benchmark());
  }

  static HardwareReport benchmark(HardwareReport r, Benchmark benchmark) {
    return new HardwareReport(
        r.agentVersion(),
        r.simulated(),
        r.collectedAt(),
        r.gpus(),
        r.cpu(),
        r.memoryTotalMib(),
        r.disk(),
        benchmark);
  }

  static Gpu name(Gpu g, String name) {
    return new Gpu(
        g.index(),
        g.uuid(),
        name,
        g.vendor(),
        g.memoryTotalMib(),
        g.driverVersion(),
        g.runtimeVersion(),
        g.temperatureC(),
        g.eccErrorsUncorrected(),
        g.pcieLinkGen(),
        g.pcieLinkWidth());
  }

  static Gpu vendor(Gpu g, String vendor) {
    return new Gpu(
        g.index(),
        g.uuid(),
        g.name(),
        vendor,
        g.memoryTotalMib(),
        g.driverVersion(),
        g.runtimeVersion(),
        g.temperatureC(),
        g.eccErrorsUncorrected(),
        g.pcieLinkGen(),
        g.pcieLinkWidth());
  }

  static Gpu vram(Gpu g, Long mib) {
    return new Gpu(
        g.index(),
        g.uuid(),
        g.name(),
        g.vendor(),
        mib,
        g.driverVersion(),
        g.runtimeVersion(),
        g.temperatureC(),
        g.eccErrorsUncorrected(),
        g.pcieLinkGen(),
        g.pcieLinkWidth());
  }

  static Gpu driver(Gpu g, String driver) {
    return new Gpu(
        g.index(),
        g.uuid(),
        g.name(),
        g.vendor(),
        g.memoryTotalMib(),
        driver,
        g.runtimeVersion(),
        g.temperatureC(),
        g.eccErrorsUncorrected(),
        g.pcieLinkGen(),
        g.pcieLinkWidth());
  }

  static Gpu runtime(Gpu g, String runtime) {
    return new Gpu(
        g.index(),
        g.uuid(),
        g.name(),
        g.vendor(),
        g.memoryTotalMib(),
        g.driverVersion(),
        runtime,
        g.temperatureC(),
        g.eccErrorsUncorrected(),
        g.pcieLinkGen(),
        g.pcieLinkWidth());
  }

  static Gpu temperature(Gpu g, Integer celsius) {
    return new Gpu(
        g.index(),
        g.uuid(),
        g.name(),
        g.vendor(),
        g.memoryTotalMib(),
        g.driverVersion(),
        g.runtimeVersion(),
        celsius,
        g.eccErrorsUncorrected(),
        g.pcieLinkGen(),
        g.pcieLinkWidth());
  }

  static Gpu ecc(Gpu g, Long uncorrected) {
    return new Gpu(
        g.index(),
        g.uuid(),
        g.name(),
        g.vendor(),
        g.memoryTotalMib(),
        g.driverVersion(),
        g.runtimeVersion(),
        g.temperatureC(),
        uncorrected,
        g.pcieLinkGen(),
        g.pcieLinkWidth());
  }

  static Gpu index(Gpu g, int index) {
    return new Gpu(
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

  static Gpu uuid(Gpu g, String uuid) {
    return new Gpu(
        g.index(),
        uuid,
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
