package dev.tickmark.agent;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.tickmark.wire.HardwareReport;
import java.util.List;
import org.junit.jupiter.api.Test;

class RocmSmiTest {

  @Test
  void parsesARadeonRx7900Xt() {
    List<HardwareReport.Gpu> gpus =
        RocmSmi.parseGpus(Fixtures.read("rocm-smi/rx7900xt.json"), "6.2.0");

    assertEquals(1, gpus.size());
    HardwareReport.Gpu g = gpus.get(0);
    assertEquals(0, g.index());
    assertEquals("Radeon RX 7900 XT", g.name());
    assertEquals("amd", g.vendor());
    assertEquals(20464L, g.memoryTotalMib());
    assertEquals("0x5c9f3a1e77b2d046", g.uuid());
    assertEquals("6.8.5", g.driverVersion());
    assertEquals("6.2.0", g.runtimeVersion());
    assertEquals(34, g.temperatureC());
    assertNull(g.eccErrorsUncorrected(), "rocm-smi gives no ECC count here: null, not 0");
    assertNull(g.pcieLinkGen());
    assertNull(g.pcieLinkWidth());
  }

  @Test
  void newerKeyNamesWarningLinesAndMissingValues() {
    List<HardwareReport.Gpu> gpus =
        RocmSmi.parseGpus(Fixtures.read("rocm-smi/rx7900xt-rocm62-with-warning.txt"), null);

    assertEquals(2, gpus.size());
    HardwareReport.Gpu a = gpus.get(0);
    assertEquals(
        "Navi 31 [Radeon RX 7900 XT/7900 XTX/7900 GRE/7900M]",
        a.name(),
        "a bare PCI id is not taken as the name");
    assertNull(a.uuid());
    assertEquals(20464L, a.memoryTotalMib());
    assertEquals("6.8.5", a.driverVersion());
    HardwareReport.Gpu b = gpus.get(1);
    assertEquals(1, b.index());
    assertEquals(41, b.temperatureC(), "junction sensor when the edge one reads N/A");
    assertEquals(
        "6.10.5", b.driverVersion(), "a card's own driver version wins over the system one");
  }

  @Test
  void samples() {
    List<RocmSmi.SampleRow> rows =
        RocmSmi.parseSamples(Fixtures.read("rocm-smi/rx7900xt-use.json"));
    assertEquals(List.of(new RocmSmi.SampleRow(0, 63, 47)), rows);
  }

  @Test
  void nothingParseableIsNoGpus() {
    assertTrue(RocmSmi.parseGpus("", null).isEmpty());
    assertTrue(RocmSmi.parseGpus("ERROR: No AMD GPUs specified", null).isEmpty());
    assertTrue(RocmSmi.parseGpus("{not json", null).isEmpty());
    assertTrue(RocmSmi.parseSamples(null).isEmpty());
  }

  @Test
  void rocmVersionFile() {
    assertEquals("6.1.2", RocmSmi.parseRocmVersion("6.1.2-119\n"));
    assertEquals("6.2.0", RocmSmi.parseRocmVersion("6.2.0"));
    assertNull(RocmSmi.parseRocmVersion("unknown"));
    assertNull(RocmSmi.parseRocmVersion(null));
  }
}
