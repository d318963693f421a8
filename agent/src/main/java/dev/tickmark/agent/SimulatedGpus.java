package dev.tickmark.agent;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.stream.Collectors;

/**
 * The value of {@code --simulate-gpus}: catalog GPU codes with card counts, {@code h100-80gb:2} or
 * {@code h100-80gb:2,l40s-48gb:1}. {@code code} alone means one card.
 */
public record SimulatedGpus(List<Entry> entries) {
  /** At most this many simulated cards per machine (the largest real servers hold 8–16). */
  public static final int MAX_CARDS = 64;

  public SimulatedGpus {
    entries = List.copyOf(entries);
    if (entries.isEmpty()) throw new IllegalArgumentException("no simulated GPU given");
  }

  public record Entry(Model model, int count) {
    public Entry {
      if (count < 1) throw new IllegalArgumentException("a card count must be at least 1");
    }
  }

  /**
   * The catalog models an agent can simulate, with what {@code nvidia-smi} / {@code rocm-smi}
   * report for them: name, VRAM in MiB, and the PCIe generation of the usual form factor.
   */
  public enum Model {
    H200_141GB("h200-141gb", "NVIDIA H200", "nvidia", 143771, 5),
    H100_80GB("h100-80gb", "NVIDIA H100 80GB HBM3", "nvidia", 81559, 5),
    A100_80GB("a100-80gb", "NVIDIA A100-SXM4-80GB", "nvidia", 81920, 4),
    A100_40GB("a100-40gb", "NVIDIA A100-PCIE-40GB", "nvidia", 40960, 4),
    L40S_48GB("l40s-48gb", "NVIDIA L40S", "nvidia", 46068, 4),
    RTX4090_24GB("rtx4090-24gb", "NVIDIA GeForce RTX 4090", "nvidia", 24564, 4),
    A10_24GB("a10-24gb", "NVIDIA A10", "nvidia", 23028, 4),
    RX7900XT_20GB("rx7900xt-20gb", "Radeon RX 7900 XT", "amd", 20464, 4);

    public final String code;
    public final String smiName;
    public final String vendor;
    public final long memoryMib;
    public final int pcieGen;

    Model(String code, String smiName, String vendor, long memoryMib, int pcieGen) {
      this.code = code;
      this.smiName = smiName;
      this.vendor = vendor;
      this.memoryMib = memoryMib;
      this.pcieGen = pcieGen;
    }

    public static Model ofCode(String code) {
      for (Model m : values()) if (m.code.equals(code)) return m;
      throw new IllegalArgumentException(
          "unknown GPU code '" + code + "' (known: " + codes() + ")");
    }

    static String codes() {
      return Arrays.stream(values()).map(m -> m.code).collect(Collectors.joining(", "));
    }
  }

  /**
   * Parses {@code code:count[,code:count…]}; throws {@link IllegalArgumentException} with a
   * readable reason.
   */
  public static SimulatedGpus parse(String spec) {
    if (spec == null || spec.isBlank())
      throw new IllegalArgumentException("--simulate-gpus needs code:count, e.g. h100-80gb:2");
    List<Entry> entries = new ArrayList<>();
    for (String part : spec.split(",", -1)) {
      String p = part.trim().toLowerCase(Locale.ROOT);
      if (p.isEmpty())
        throw new IllegalArgumentException("empty entry in --simulate-gpus '" + spec + "'");
      int colon = p.indexOf(':');
      String code = colon < 0 ? p : p.substring(0, colon);
      int count = 1;
      if (colon >= 0) {
        try {
          count = Integer.parseInt(p.substring(colon + 1));
        } catch (NumberFormatException e) {
          throw new IllegalArgumentException(
              "bad card count in '" + part.trim() + "' (expected code:count, e.g. h100-80gb:2)");
        }
        if (count < 1)
          throw new IllegalArgumentException(
              "card count must be at least 1 in '" + part.trim() + "'");
      }
      entries.add(new Entry(Model.ofCode(code), count));
    }
    SimulatedGpus gpus = new SimulatedGpus(entries);
    if (gpus.cards() > MAX_CARDS)
      throw new IllegalArgumentException("at most " + MAX_CARDS + " simulated cards");
    return gpus;
  }

  public int cards() {
    return entries.stream().mapToInt(Entry::count).sum();
  }

  public long totalMemoryMib() {
    return entries.stream().mapToLong(e -> e.model().memoryMib * e.count()).sum();
  }

  @Override
  public String toString() {
    return entries.stream()
        .map(e -> e.model().code + ":" + e.count())
        .collect(Collectors.joining(","));
  }
}
