package dev.tickmark.agent;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.tickmark.wire.HardwareReport;
import java.util.List;
import java.util.Set;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

class NvidiaSmiTest {

  @ParameterizedTest(name = "{0}")
  @CsvSource({
    // fixture,                   gpus, name,                        MiB,    driver,       gen,
    // width
    "h100-80gb-hbm3-x8.csv,        8,   NVIDIA H100 80GB HBM3,       81559,  550.54.15,    5,   16",
    "h200-x8.csv,                  8,   NVIDIA H200,                 143771, 560.35.03,    5,   16",
    // captured from a real H200 (driver 580, CUDA 13.0) with the agent's own query, 2026-11-29
    "h200-x1-real.csv,             1,   NVIDIA H200,                 143771, 580.159.04,   5,   16",
    "a100-sxm4-80gb-x4.csv,        4,   NVIDIA A100-SXM4-80GB,       81920,  535.129.03,   4,   16",
    "a100-pcie-40gb-x1.csv,        1,   NVIDIA A100-PCIE-40GB,       40960,  525.147.05,   4,   16",
    "l40s-x2.csv,                  2,   NVIDIA L40S,                 46068,  550.90.07,    4,   16",
    "rtx4090-x1.csv,               1,   NVIDIA GeForce RTX 4090,     24564,  560.35.03,    1,   16",
    "a10-x1.csv,                   1,   NVIDIA A10,                  23028,  535.183.01,   4,   16",
  })
  void parsesEachModelAsNvidiaSmiNamesIt(
      String fixture, int count, String name, long mib, String driver, int gen, int width) {
    List<HardwareReport.Gpu> gpus =
        NvidiaSmi.parseGpus(Fixtures.read("nvidia-smi/" + fixture), "12.4");

    assertEquals(count, gpus.size());
    for (int i = 0; i < count; i++) {
      HardwareReport.Gpu g = gpus.get(i);
      assertEquals(i, g.index());
      assertEquals(name, g.name());
      assertEquals("nvidia", g.vendor());
      assertEquals(mib, g.memoryTotalMib());
      assertEquals(driver, g.driverVersion());
      assertEquals("12.4", g.runtimeVersion());
      assertEquals(gen, g.pcieLinkGen());
      assertEquals(width, g.pcieLinkWidth());
      assertTrue(
          g.uuid().matches("GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"),
          g.uuid());
      assertTrue(g.temperatureC() > 20 && g.temperatureC() < 50);
    }
    assertEquals(
        count,
        gpus.stream().map(HardwareReport.Gpu::uuid).collect(Collectors.toSet()).size(),
        "uuids are distinct");
  }

  @Test
  void readsTemperatureAndEccOfEachGpu() {
    List<HardwareReport.Gpu> gpus =
        NvidiaSmi.parseGpus(Fixtures.read("nvidia-smi/h100-80gb-hbm3-x8.csv"), null);
    assertEquals(
        List.of(31, 33, 30, 35, 32, 34, 29, 33),
        gpus.stream().map(HardwareReport.Gpu::temperatureC).toList());
    assertTrue(gpus.stream().allMatch(g -> g.eccErrorsUncorrected() == 0L));
    assertNull(gpus.get(0).runtimeVersion(), "no CUDA version given, none invented");
  }

  @Test
  void consumerCardWithoutEccReportsNullNotZero() {
    HardwareReport.Gpu rtx =
        NvidiaSmi.parseGpus(Fixtures.read("nvidia-smi/rtx4090-x1.csv"), "12.6").get(0);
    assertNull(rtx.eccErrorsUncorrected());
  }

  @Test
  void reportsUncorrectedEccErrorsPerGpu() {
    List<HardwareReport.Gpu> gpus =
        NvidiaSmi.parseGpus(Fixtures.read("nvidia-smi/ecc-errors-a100-x2.csv"), "12.2");
    assertEquals(0L, gpus.get(0).eccErrorsUncorrected());
    assertEquals(3L, gpus.get(1).eccErrorsUncorrected());
  }

  @Test
  void mixedMachineKeepsEachGpusOwnName() {
    List<HardwareReport.Gpu> gpus =
        NvidiaSmi.parseGpus(Fixtures.read("nvidia-smi/mixed-rtx4090-a10-x3.csv"), "12.4");
    assertEquals(
        List.of("NVIDIA GeForce RTX 4090", "NVIDIA A10", "NVIDIA A10"),
        gpus.stream().map(HardwareReport.Gpu::name).toList());
    assertEquals(
        List.of(24564L, 23028L, 23028L),
        gpus.stream().map(HardwareReport.Gpu::memoryTotalMib).toList());
    assertNull(gpus.get(0).eccErrorsUncorrected());
    assertEquals(0L, gpus.get(1).eccErrorsUncorrected());
  }

  @Test
  void unreadableFieldsAreNullNeverGuessed() {
    List<HardwareReport.Gpu> gpus =
        NvidiaSmi.parseGpus(Fixtures.read("nvidia-smi/na-fields-x2.csv"), "12.2");
    assertEquals(2, gpus.size());
    HardwareReport.Gpu a = gpus.get(0);
    assertEquals("NVIDIA A10", a.name());
    assertEquals(23028L, a.memoryTotalMib());
    assertNull(a.temperatureC());
    assertNull(a.eccErrorsUncorrected());
    assertNull(a.pcieLinkGen());
    assertNull(a.pcieLinkWidth());
    HardwareReport.Gpu b = gpus.get(1);
    assertNull(b.uuid());
    assertNull(b.memoryTotalMib());
    assertNull(b.eccErrorsUncorrected(), "[Unknown Error] is not a count");
    assertEquals(4, b.pcieLinkGen());
    assertNull(b.pcieLinkWidth());
    assertEquals(37, b.temperatureC());
  }

  @Test
  void noDevicesMeansNoGpus() {
    assertTrue(NvidiaSmi.parseGpus(Fixtures.read("nvidia-smi/no-devices.txt"), null).isEmpty());
    assertTrue(NvidiaSmi.parseGpus("", null).isEmpty());
  }

  @Test
  void toleratesUnitsAndACommaInsideTheName() {
    String line =
        "0, GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee, NVIDIA Weird, Name, 81559 MiB, 550.54.15, 34, 0, 5, 16, 0 %";
    HardwareReport.Gpu g = NvidiaSmi.parseGpus(line, null).get(0);
    assertEquals("NVIDIA Weird, Name", g.name());
    assertEquals(81559L, g.memoryTotalMib());
    assertEquals(16, g.pcieLinkWidth());
  }

  @Test
  void cudaVersionFromTheTableHeaderOrFromQueryOutput() {
    assertEquals(
        "12.4", NvidiaSmi.parseCudaVersion(Fixtures.read("nvidia-smi/h100-nvidia-smi.txt")));
    assertEquals(
        "13.0",
        NvidiaSmi.parseCudaVersion(Fixtures.read("nvidia-smi/h200-nvidia-smi-real.txt")),
        "a real H200's header");
    assertEquals(
        "12.2", NvidiaSmi.parseCudaVersion(Fixtures.read("nvidia-smi/a100-nvidia-smi-q.txt")));
    assertNull(
        NvidiaSmi.parseCudaVersion(
            "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."));
    assertNull(NvidiaSmi.parseCudaVersion(null));
  }

  @Test
  void samplesCarryUtilisationTemperatureAndEcc() {
    List<NvidiaSmi.SampleRow> rows =
        NvidiaSmi.parseSamples(Fixtures.read("nvidia-smi/samples-h100-x8.csv"));
    assertEquals(8, rows.size());
    assertEquals(new NvidiaSmi.SampleRow(3, 100, 64, 0L, false), rows.get(3));
  }

  @Test
  void sampleRowsSkipErrorLinesAndFlagResets() {
    List<NvidiaSmi.SampleRow> lost =
        NvidiaSmi.parseSamples(Fixtures.read("nvidia-smi/samples-gpu-lost.txt"));
    assertEquals(
        Set.of(0), lost.stream().map(NvidiaSmi.SampleRow::index).collect(Collectors.toSet()));
    assertTrue(NvidiaSmi.mentionsLostGpu(Fixtures.read("nvidia-smi/samples-gpu-lost.txt")));

    List<NvidiaSmi.SampleRow> reset =
        NvidiaSmi.parseSamples(Fixtures.read("nvidia-smi/samples-requires-reset.csv"));
    assertFalse(reset.get(0).requiresReset());
    assertTrue(reset.get(1).requiresReset());
    assertNull(reset.get(1).temperatureC());
  }

  @Test
  void commandLinesQueryTheDocumentedFields() {
    assertEquals(
        List.of(
            "nvidia-smi",
            "--query-gpu=index,uuid,name,memory.total,driver_version,temperature.gpu,ecc.errors.uncorrected.volatile.total,"
                + "pcie.link.gen.current,pcie.link.width.current,utilization.gpu",
            "--format=csv,noheader,nounits"),
        NvidiaSmi.reportCommand());
  }
}
