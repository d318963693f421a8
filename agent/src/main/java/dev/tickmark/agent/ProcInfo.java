package dev.tickmark.agent;

import dev.tickmark.wire.HardwareReport;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/** Pure parsers of {@code /proc/cpuinfo} and {@code /proc/meminfo}. */
final class ProcInfo {
  private static final Pattern MEM_TOTAL = Pattern.compile("(?m)^MemTotal:\\s*([0-9]+)\\s*kB");

  private ProcInfo() {}

  /**
   * The CPU model ({@code model name}, else {@code Model}, else {@code Hardware}, as some ARM
   * kernels print) and the number of logical CPUs ({@code processor} entries: what a workload
   * sees). Null if no processor is listed.
   */
  static HardwareReport.Cpu parseCpuInfo(String cpuinfo) {
    String modelName = null;
    String model = null;
    String hardware = null;
    int processors = 0;
    for (String line : cpuinfo.split("\\R")) {
      int colon = line.indexOf(':');
      if (colon < 0) continue;
      String key = line.substring(0, colon).trim();
      String value = line.substring(colon + 1).trim();
      if (value.isEmpty()) continue;
      switch (key) {
        case "processor" -> processors++;
        case "model name" -> modelName = modelName != null ? modelName : value;
        case "Model" -> model = model != null ? model : value;
        case "Hardware" -> hardware = hardware != null ? hardware : value;
        default -> {}
      }
    }
    if (processors == 0) return null;
    return new HardwareReport.Cpu(
        modelName != null ? modelName : model != null ? model : hardware, processors);
  }

  /** {@code MemTotal} in MiB (the kernel prints KiB); null if absent. */
  static Long parseMemTotalMib(String meminfo) {
    Matcher m = MEM_TOTAL.matcher(meminfo);
    return m.find() ? Long.parseLong(m.group(1)) / 1024 : null;
  }
}
