package dev.tickmark.agent;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.tickmark.wire.AgentFrame;
import dev.tickmark.wire.Ed25519;
import dev.tickmark.wire.Frames;
import dev.tickmark.wire.HardwareReport;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyPair;
import java.time.Clock;
import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

class SimulatedHardwareTest {
  @TempDir Path stateDir;
  @TempDir Path proc;
  private final KeyPair key = Ed25519.generate();

  private SimulatedHardware simulated(String spec, String meminfo) throws IOException {
    Files.writeString(proc.resolve("cpuinfo"), Fixtures.read("proc/cpuinfo-epyc"));
    Files.writeString(proc.resolve("meminfo"), meminfo);
    HardwareProbe machine =
        new HardwareProbe(
            "0.1.0", stateDir, (c, t) -> Optional.empty(), proc, 64 * 1024, Clock.systemUTC());
    return new SimulatedHardware(SimulatedGpus.parse(spec), key.getPublic(), machine, "0.1.0");
  }

  @Test
  void twoH100sOnADevLaptop() throws Exception {
    HardwareReport r = simulated("h100-80gb:2", "MemTotal:       24576000 kB\n").report();

    assertTrue(r.simulated());
    assertEquals(2, r.gpus().size());
    for (int i = 0; i < 2; i++) {
      HardwareReport.Gpu g = r.gpus().get(i);
      assertEquals(i, g.index());
      assertEquals("NVIDIA H100 80GB HBM3", g.name());
      assertEquals("nvidia", g.vendor());
      assertEquals(81559L, g.memoryTotalMib());
      assertEquals("550.54.15", g.driverVersion());
      assertEquals("12.4", g.runtimeVersion());
      assertEquals(35, g.temperatureC());
      assertEquals(0L, g.eccErrorsUncorrected());
      assertEquals(5, g.pcieLinkGen());
      assertEquals(16, g.pcieLinkWidth());
      assertTrue(
          g.uuid().matches("GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"),
          g.uuid());
    }
    assertNotEquals(r.gpus().get(0).uuid(), r.gpus().get(1).uuid());
    assertTrue(
        r.memoryTotalMib() * 100 >= 2 * 81559 * 95,
        "simulated RAM covers the rule RAM >= 0.95 x VRAM");
    assertEquals(155648L, r.memoryTotalMib(), "152 GiB: the least whole GiB that passes");
    assertEquals("AMD EPYC 9454 48-Core Processor", r.cpu().model(), "the CPU is the real one");
    assertTrue(r.disk().writeMibPerS() > 0, "the disk is really measured");
    assertNull(r.benchmark());
    Frames.readReport(Frames.reportTree(r));
  }

  @Test
  void realRamIsKeptWhenItIsAlreadyEnough() throws Exception {
    assertEquals(
        1032000L,
        simulated("h100-80gb:2", Fixtures.read("proc/meminfo")).report().memoryTotalMib());
  }

  @Test
  void uuidsAreStablePerKeyAndDifferAcrossKeys() throws Exception {
    SimulatedGpus spec = SimulatedGpus.parse("a100-80gb:2");
    assertEquals(
        SimulatedHardware.gpus(spec, key.getPublic()),
        SimulatedHardware.gpus(spec, key.getPublic()));
    assertNotEquals(
        SimulatedHardware.gpus(spec, key.getPublic()).get(0).uuid(),
        SimulatedHardware.gpus(spec, Ed25519.generate().getPublic()).get(0).uuid());
  }

  @Test
  void severalModelsAndTheAmdCard() throws Exception {
    List<HardwareReport.Gpu> gpus =
        SimulatedHardware.gpus(SimulatedGpus.parse("l40s-48gb:1,rx7900xt-20gb:2"), key.getPublic());
    assertEquals(
        List.of("NVIDIA L40S", "Radeon RX 7900 XT", "Radeon RX 7900 XT"),
        gpus.stream().map(HardwareReport.Gpu::name).toList());
    assertEquals(List.of(0, 1, 2), gpus.stream().map(HardwareReport.Gpu::index).toList());
    HardwareReport.Gpu amd = gpus.get(1);
    assertEquals("amd", amd.vendor());
    assertEquals(20464L, amd.memoryTotalMib());
    assertTrue(amd.uuid().matches("0x[0-9a-f]{16}"), amd.uuid());
  }

  @Test
  void everyCatalogModelHasTheNameTheVendorToolPrints() {
    assertEquals(
        List.of(
            "h200-141gb NVIDIA H200 143771",
            "h100-80gb NVIDIA H100 80GB HBM3 81559",
            "a100-80gb NVIDIA A100-SXM4-80GB 81920",
            "a100-40gb NVIDIA A100-PCIE-40GB 40960",
            "l40s-48gb NVIDIA L40S 46068",
            "rtx4090-24gb NVIDIA GeForce RTX 4090 24564",
            "a10-24gb NVIDIA A10 23028",
            "rx7900xt-20gb Radeon RX 7900 XT 20464"),
        java.util.Arrays.stream(SimulatedGpus.Model.values())
            .map(m -> m.code + " " + m.smiName + " " + m.memoryMib)
            .toList());
  }

  @Test
  void heartbeatSamplesAreIdleAndCool() throws Exception {
    assertEquals(
        List.of(new AgentFrame.GpuSample(0, 0, 35, null), new AgentFrame.GpuSample(1, 0, 35, null)),
        simulated("h100-80gb:2", "MemTotal: 1 kB\n").sample());
  }

  @Test
  void specParsing() {
    SimulatedGpus g = SimulatedGpus.parse(" H100-80GB:2 , a10-24gb ");
    assertEquals(
        List.of(
            new SimulatedGpus.Entry(SimulatedGpus.Model.H100_80GB, 2),
            new SimulatedGpus.Entry(SimulatedGpus.Model.A10_24GB, 1)),
        g.entries());
    assertEquals(3, g.cards());
    assertEquals("h100-80gb:2,a10-24gb:1", g.toString());
  }

  @ParameterizedTest
  @ValueSource(
      strings = {
        "",
        " ",
        "h100:2",
        "h100-80gb:0",
        "h100-80gb:-1",
        "h100-80gb:x",
        "h100-80gb:2,",
        "h100-80gb:65"
      })
  void badSpecsAreRefused(String spec) {
    assertThrows(IllegalArgumentException.class, () -> SimulatedGpus.parse(spec));
  }

  @Test
  void requiredMemory() {
    assertEquals(1024L, SimulatedHardware.requiredMemoryMib(1));
    assertEquals(155648L, SimulatedHardware.requiredMemoryMib(2 * 81559));
    for (long vram : new long[] {20464, 23028, 8 * 143771, 163118, 1078}) {
      long need = SimulatedHardware.requiredMemoryMib(vram);
      assertTrue(
          need * 100 >= vram * 95 && need % 1024 == 0 && (need - 1024) * 100 < vram * 95,
          vram + " -> " + need);
    }
  }
}
