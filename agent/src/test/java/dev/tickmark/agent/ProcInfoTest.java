package dev.tickmark.agent;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import dev.tickmark.wire.HardwareReport;
import org.junit.jupiter.api.Test;

class ProcInfoTest {

  @Test
  void cpuModelAndLogicalCpuCount() {
    assertEquals(
        new HardwareReport.Cpu("AMD EPYC 9454 48-Core Processor", 4),
        ProcInfo.parseCpuInfo(Fixtures.read("proc/cpuinfo-epyc")));
  }

  @Test
  void armKernelsNameTheBoardInstead() {
    assertEquals(
        new HardwareReport.Cpu("Raspberry Pi 4 Model B Rev 1.4", 2),
        ProcInfo.parseCpuInfo(Fixtures.read("proc/cpuinfo-arm")));
  }

  @Test
  void noProcessorListedIsUnknown() {
    assertNull(ProcInfo.parseCpuInfo("garbage\n"));
  }

  @Test
  void memTotalInMib() {
    assertEquals(1032000L, ProcInfo.parseMemTotalMib(Fixtures.read("proc/meminfo")));
    assertNull(ProcInfo.parseMemTotalMib("MemFree: 12 kB\n"));
  }
}
