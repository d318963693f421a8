package dev.tickmark.agent;

import dev.tickmark.wire.AgentFrame;
import dev.tickmark.wire.HardwareReport;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.security.PublicKey;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Simulated GPUs for development ({@code --simulate-gpus}): the report says {@code simulated: true}
 * and lists GPUs as the vendor tool would for those catalog models, with UUIDs derived from the
 * agent's public key (so they are stable per state folder). CPU, free disk and the disk write rate
 * are the real machine's.
 *
 * <p><b>Memory is simulated too</b>: a host must have RAM ≥ 0.95 × its total VRAM, which no laptop
 * running two simulated 80 GB cards has. The report's {@code memory_total_mib} is the larger of the
 * real RAM and the least whole number of GiB that satisfies that rule for the simulated cards
 * (logged at each report). Free disk and the disk write rate stay real.
 */
final class SimulatedHardware implements Hardware {
  static final String NVIDIA_DRIVER = "550.54.15";
  static final String CUDA_VERSION = "12.4";
  static final String AMD_DRIVER = "6.8.5";
  static final String ROCM_VERSION = "6.2.0";
  static final int TEMPERATURE_C = 35;

  private static final Logger log = LoggerFactory.getLogger(SimulatedHardware.class);

  private final SimulatedGpus spec;
  private final PublicKey key;
  private final HardwareProbe machine;
  private final String agentVersion;

  SimulatedHardware(SimulatedGpus spec, PublicKey key, HardwareProbe machine, String agentVersion) {
    this.spec = spec;
    this.key = key;
    this.machine = machine;
    this.agentVersion = agentVersion;
  }

  @Override
  public HardwareReport report() {
    Long realMib = machine.memoryTotalMib();
    long needed = requiredMemoryMib(spec.totalMemoryMib());
    long reportedMib = realMib == null ? needed : Math.max(realMib, needed);
    if (realMib == null || reportedMib != realMib) {
      log.info(
          "simulated report: memory_total_mib {} is simulated (real RAM {} MiB) to cover {} MiB of simulated VRAM",
          reportedMib,
          realMib == null ? "unknown" : realMib,
          spec.totalMemoryMib());
    }
    return new HardwareReport(
        agentVersion,
        true,
        machine.collectedAt(),
        gpus(spec, key),
        machine.cpu(),
        reportedMib,
        machine.disk(),
        null);
  }

  @Override
  public List<AgentFrame.GpuSample> sample() {
    List<AgentFrame.GpuSample> samples = new ArrayList<>();
    for (int i = 0; i < spec.cards(); i++)
      samples.add(new AgentFrame.GpuSample(i, 0, TEMPERATURE_C, null));
    return samples;
  }

  /** The simulated GPUs, indexed 0.. in the order of the spec. */
  static List<HardwareReport.Gpu> gpus(SimulatedGpus spec, PublicKey key) {
    List<HardwareReport.Gpu> gpus = new ArrayList<>();
    int index = 0;
    for (SimulatedGpus.Entry e : spec.entries()) {
      SimulatedGpus.Model m = e.model();
      boolean nvidia = m.vendor.equals(NvidiaSmi.VENDOR);
      for (int i = 0; i < e.count(); i++, index++) {
        gpus.add(
            new HardwareReport.Gpu(
                index,
                uuid(key, index, nvidia),
                m.smiName,
                m.vendor,
                m.memoryMib,
                nvidia ? NVIDIA_DRIVER : AMD_DRIVER,
                nvidia ? CUDA_VERSION : ROCM_VERSION,
                TEMPERATURE_C,
                0L,
                m.pcieGen,
                16));
      }
    }
    return gpus;
  }

  /**
   * The least whole number of GiB, in MiB, that is at least 0.95 × {@code vramMib} (the
   * verification rule).
   */
  static long requiredMemoryMib(long vramMib) {
    long mib = (vramMib * 95 + 99) / 100;
    return (mib + 1023) / 1024 * 1024;
  }

  /**
   * {@code GPU-xxxxxxxx-xxxx-…} (nvidia-smi's form) or {@code 0x…} (rocm-smi's Unique ID) from
   * SHA-256(key, index).
   */
  static String uuid(PublicKey key, int index, boolean nvidia) {
    byte[] hash;
    try {
      MessageDigest sha = MessageDigest.getInstance("SHA-256");
      sha.update(key.getEncoded());
      sha.update(("tickmark-simulated-gpu:" + index).getBytes(StandardCharsets.US_ASCII));
      hash = sha.digest();
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
    String hex = HexFormat.of().formatHex(hash);
    if (!nvidia) return "0x" + hex.substring(0, 16);
    return "GPU-"
        + hex.substring(0, 8)
        + "-"
        + hex.substring(8, 12)
        + "-"
        + hex.substring(12, 16)
        + "-"
        + hex.substring(16, 20)
        + "-"
        + hex.substring(20, 32);
  }
}
