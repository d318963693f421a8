package dev.tickmark.engine.host.verification;

import static dev.tickmark.engine.host.verification.Reports.GIB;
import static dev.tickmark.engine.host.verification.Reports.a10;
import static dev.tickmark.engine.host.verification.Reports.h100;
import static dev.tickmark.engine.host.verification.Reports.healthy;
import static dev.tickmark.engine.host.verification.Reports.rx7900xt;
import static dev.tickmark.engine.host.verification.Verification.Status.FAIL;
import static dev.tickmark.engine.host.verification.Verification.Status.NOT_MEASURED;
import static dev.tickmark.engine.host.verification.Verification.Status.PASS;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.dataformat.cbor.databind.CBORMapper;
import com.fasterxml.jackson.module.paramnames.ParameterNamesModule;
import dev.tickmark.engine.catalog.Catalog;
import dev.tickmark.engine.host.verification.Verification.Card;
import dev.tickmark.engine.host.verification.Verification.Check;
import dev.tickmark.engine.host.verification.Verification.Outcome;
import dev.tickmark.engine.host.verification.Verification.Policy;
import dev.tickmark.engine.host.verification.Verification.Status;
import dev.tickmark.wire.HardwareReport;
import dev.tickmark.wire.HardwareReport.Benchmark;
import dev.tickmark.wire.HardwareReport.Disk;
import dev.tickmark.wire.HardwareReport.Gpu;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.function.UnaryOperator;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

class VerificationTest {
  private static final Catalog CATALOG = Catalog.load();
  private static final Policy STRICT = Policy.defaults(false);
  private static final Policy DEV = Policy.defaults(true);
  private static final Policy UNISOLATED =
      new Policy(
          false,
          Policy.DEFAULT_MIN_NVIDIA_DRIVER,
          Policy.DEFAULT_MIN_ROCM,
          Policy.DEFAULT_MAX_TEMPERATURE_C,
          Policy.DEFAULT_VRAM_TOLERANCE_PERMILLE,
          Policy.DEFAULT_MIN_FREE_DISK_BYTES,
          Policy.DEFAULT_MIN_DISK_WRITE_MIB_PER_S,
          true);

  private static HardwareReport runtime(HardwareReport r, String name, boolean network) {
    return r.withRuntime(new HardwareReport.WorkloadRuntime(name, network));
  }

  /**
   * One row: a report (and signature verdict, policy), the check it is about, that check's expected
   * status, whether the whole outcome passes, and a fragment the check's {@code observed} must
   * contain.
   */
  record Case(
      String name,
      HardwareReport report,
      boolean signatureValid,
      Policy policy,
      String check,
      Status status,
      boolean passed,
      String observed) {
    @Override
    public String toString() {
      return name;
    }
  }

  private static Case ok(
      String name, HardwareReport report, String check, Status status, String observed) {
    return new Case(name, report, true, STRICT, check, status, status != FAIL, observed);
  }

  private static HardwareReport gpus(Gpu... gpus) {
    return Reports.withGpus(healthy(), Arrays.asList(gpus));
  }

  private static HardwareReport each(UnaryOperator<Gpu> change) {
    return Reports.eachGpu(healthy(), change);
  }

  static Stream<Case> cases() {
    HardwareReport healthy = healthy();
    Gpu h0 = h100(0);
    Gpu h1 = h100(1);
    List<Case> c = new ArrayList<>();

    // signature: a tampered (or foreign-signed) report is rejected whatever else it says.
    c.add(ok("signature valid", healthy, "signature", PASS, "valid"));
    c.add(
        new Case(
            "signature invalid: rejected though every other check passes",
            healthy,
            false,
            STRICT,
            "signature",
            FAIL,
            false,
            "does not verify"));
    c.add(
        new Case(
            "signature invalid on a simulated host in dev",
            Reports.simulated(healthy, true),
            false,
            DEV,
            "signature",
            FAIL,
            false,
            "does not verify"));

    // simulated
    c.add(ok("real GPUs, simulated hosts off", healthy, "simulated", PASS, "real GPUs"));
    c.add(
        new Case(
            "real GPUs, simulated hosts on",
            healthy,
            true,
            DEV,
            "simulated",
            PASS,
            true,
            "real GPUs"));
    c.add(
        new Case(
            "simulated GPUs rejected when simulated hosts are off",
            Reports.simulated(healthy, true),
            true,
            STRICT,
            "simulated",
            FAIL,
            false,
            "simulated GPUs"));
    c.add(
        new Case(
            "simulated GPUs accepted when simulated hosts are on",
            Reports.simulated(healthy, true),
            true,
            DEV,
            "simulated",
            PASS,
            true,
            "simulated GPUs"));

    // isolation: how the agent runs rentals
    c.add(
        ok(
            "an agent that does not say how it runs rentals",
            healthy,
            "isolation",
            NOT_MEASURED,
            "does not say how it runs rentals"));
    c.add(
        ok(
            "sandbox with slirp4netns",
            runtime(healthy, "sandbox", true),
            "isolation",
            PASS,
            "sandbox: rentals isolated; rentals with network can run here"));
    c.add(
        ok(
            "sandbox without slirp4netns: isolated, no network, still passes",
            runtime(healthy, "sandbox", false),
            "isolation",
            PASS,
            "sandbox: rentals isolated; no network for rentals"));
    c.add(
        ok(
            "docker",
            runtime(healthy, "docker", true),
            "isolation",
            PASS,
            "docker: rentals isolated"));
    c.add(
        ok(
            "docker without a bridge network",
            runtime(healthy, "docker", false),
            "isolation",
            PASS,
            "docker: rentals isolated; no network for rentals (the docker daemon has no bridge"
                + " network)"));
    c.add(
        new Case(
            "process with real GPUs fails: a workload could read the agent's key",
            runtime(healthy, "process", true),
            true,
            STRICT,
            "isolation",
            FAIL,
            false,
            "process: rentals are not isolated (a workload could read the agent's key"));
    c.add(
        new Case(
            "a runtime the market does not know, with real GPUs, fails",
            runtime(healthy, "chroot", true),
            true,
            STRICT,
            "isolation",
            FAIL,
            false,
            "unknown: rentals are not isolated"));
    c.add(
        new Case(
            "process with real GPUs where unisolated hosts are allowed",
            runtime(healthy, "process", true),
            true,
            UNISOLATED,
            "isolation",
            PASS,
            true,
            "allowed here (tickmark.verification.allow-unisolated-hosts)"));
    c.add(
        new Case(
            "process with simulated GPUs: development",
            Reports.simulated(healthy, true)
                .withRuntime(new HardwareReport.WorkloadRuntime("process", true)),
            true,
            DEV,
            "isolation",
            PASS,
            true,
            "process: rentals are not isolated (a workload could read the agent's key and credential"
                + " and other rentals' workspaces); simulated GPUs: development"));

    // gpus_present
    c.add(ok("two GPUs present", healthy, "gpus_present", PASS, "2 GPUs"));
    c.add(ok("one GPU present", gpus(h0), "gpus_present", PASS, "1 GPU"));
    c.add(ok("no GPUs", gpus(), "gpus_present", FAIL, "no GPUs"));
    c.add(ok("GPU list absent", Reports.withGpus(healthy, null), "gpus_present", FAIL, "no GPUs"));
    c.add(ok("an empty GPU entry", gpus(h0, null), "gpus_present", FAIL, "1 empty entry"));

    // gpus_unique
    c.add(ok("distinct cards", healthy, "gpus_unique", PASS, "2 distinct cards"));
    c.add(
        ok(
            "one index listed twice",
            gpus(h0, Reports.index(h1, 0)),
            "gpus_unique",
            FAIL,
            "card index 0 is listed twice"));
    c.add(
        ok(
            "one UUID listed twice",
            gpus(h0, Reports.uuid(h1, h0.uuid())),
            "gpus_unique",
            FAIL,
            "is listed twice"));
    c.add(
        ok(
            "negative index",
            gpus(Reports.index(h0, -1)),
            "gpus_unique",
            FAIL,
            "negative card index -1"));
    c.add(
        ok(
            "UUIDs not reported",
            gpus(Reports.uuid(h0, null), Reports.uuid(h1, null)),
            "gpus_unique",
            PASS,
            "2 distinct cards"));

    // gpus_uniform
    c.add(ok("all the same model", healthy, "gpus_uniform", PASS, "2 x h100-80gb"));
    c.add(
        ok(
            "mixed models on one host",
            gpus(h0, a10(1)),
            "gpus_uniform",
            FAIL,
            "1 x h100-80gb, 1 x a10-24gb"));
    c.add(
        ok(
            "a known and an unknown model",
            gpus(h0, Reports.name(h1, "NVIDIA H100 NVL")),
            "gpus_uniform",
            FAIL,
            "1 x unknown"));

    // gpu[i].model
    c.add(ok("known model", healthy, "gpu[0].model", PASS, "= h100-80gb"));
    c.add(
        ok(
            "PCIe variant of a known model",
            gpus(Reports.name(h0, "NVIDIA H100 PCIe")),
            "gpu[0].model",
            PASS,
            "= h100-80gb"));
    c.add(
        ok(
            "name matched ignoring case and spaces",
            gpus(Reports.name(h0, "  nvidia h100 80gb hbm3 ")),
            "gpu[0].model",
            PASS,
            "= h100-80gb"));
    c.add(ok("AMD model", gpus(rx7900xt(0)), "gpu[0].model", PASS, "= rx7900xt-20gb"));
    c.add(
        ok(
            "unknown model",
            each(g -> Reports.name(g, "NVIDIA H100 NVL")),
            "gpu[1].model",
            FAIL,
            "not in the catalog"));
    c.add(ok("no name", gpus(Reports.name(h0, null)), "gpu[0].model", FAIL, "no name reported"));
    c.add(
        ok(
            "vendor contradicts the catalog",
            gpus(Reports.vendor(h0, "amd")),
            "gpu[0].model",
            FAIL,
            "vendor \"amd\""));
    c.add(
        ok(
            "vendor not reported",
            gpus(Reports.vendor(h0, null)),
            "gpu[0].model",
            PASS,
            "= h100-80gb"));

    // gpu[i].vram: 81559 MiB ±3% = 79113..84005 MiB
    c.add(ok("VRAM as in the catalog", healthy, "gpu[0].vram", PASS, "81559 MiB"));
    c.add(
        ok(
            "VRAM at the lower tolerance bound",
            each(g -> Reports.vram(g, 79113L)),
            "gpu[1].vram",
            PASS,
            "79113 MiB"));
    c.add(
        ok(
            "VRAM just below the tolerance",
            each(g -> Reports.vram(g, 79112L)),
            "gpu[1].vram",
            FAIL,
            "79112 MiB"));
    c.add(
        ok(
            "VRAM at the upper tolerance bound",
            each(g -> Reports.vram(g, 84005L)),
            "gpu[0].vram",
            PASS,
            "84005 MiB"));
    c.add(
        ok(
            "VRAM just above the tolerance",
            each(g -> Reports.vram(g, 84006L)),
            "gpu[0].vram",
            FAIL,
            "84006 MiB"));
    c.add(
        ok(
            "a 40 GB card claiming to be an 80 GB one",
            each(g -> Reports.vram(g, 40960L)),
            "gpu[0].vram",
            FAIL,
            "40960 MiB"));
    c.add(
        ok(
            "VRAM not reported",
            each(g -> Reports.vram(g, null)),
            "gpu[0].vram",
            FAIL,
            "not reported"));
    c.add(
        ok(
            "VRAM of an unknown model",
            gpus(Reports.name(h0, "Tesla T4")),
            "gpu[0].vram",
            FAIL,
            "81559 MiB"));
    c.add(
        new Case(
            "zero tolerance, exact VRAM",
            healthy,
            true,
            policy(85, 0),
            "gpu[0].vram",
            PASS,
            true,
            "81559 MiB"));
    c.add(
        new Case(
            "zero tolerance, 1 MiB short",
            each(g -> Reports.vram(g, 81558L)),
            true,
            policy(85, 0),
            "gpu[0].vram",
            FAIL,
            false,
            "81558 MiB"));

    // gpu[i].driver: numeric dotted comparison against 535.0 (NVIDIA) or ROCm 6.0 (AMD)
    c.add(ok("driver 550.54.15", healthy, "gpu[0].driver", PASS, "NVIDIA driver 550.54.15"));
    c.add(
        ok(
            "driver exactly the minimum",
            each(g -> Reports.driver(g, "535.0")),
            "gpu[0].driver",
            PASS,
            "535.0"));
    c.add(
        ok(
            "driver 535 without a minor version",
            each(g -> Reports.driver(g, "535")),
            "gpu[0].driver",
            PASS,
            "535"));
    c.add(
        ok(
            "driver 535.104.05",
            each(g -> Reports.driver(g, "535.104.05")),
            "gpu[0].driver",
            PASS,
            "535.104.05"));
    c.add(
        ok(
            "driver 1000.1 compared as numbers, not text",
            each(g -> Reports.driver(g, "1000.1")),
            "gpu[0].driver",
            PASS,
            "1000.1"));
    c.add(
        ok(
            "driver 530.30.02 too old",
            each(g -> Reports.driver(g, "530.30.02")),
            "gpu[0].driver",
            FAIL,
            "530.30.02"));
    c.add(
        ok(
            "driver 99.0 too old",
            each(g -> Reports.driver(g, "99.0")),
            "gpu[0].driver",
            FAIL,
            "99.0"));
    c.add(
        ok(
            "driver not reported",
            each(g -> Reports.driver(g, null)),
            "gpu[0].driver",
            FAIL,
            "not reported"));
    c.add(
        ok(
            "driver not a version",
            each(g -> Reports.driver(g, "N/A")),
            "gpu[0].driver",
            FAIL,
            "not a dotted version"));
    c.add(ok("ROCm 6.1.2", gpus(rx7900xt(0)), "gpu[0].driver", PASS, "ROCm 6.1.2"));
    c.add(
        ok(
            "ROCm with a build suffix",
            gpus(Reports.runtime(rx7900xt(0), "6.0.32830-d62f6a171")),
            "gpu[0].driver",
            PASS,
            "6.0.32830"));
    c.add(
        ok(
            "ROCm 5.7.1 too old",
            gpus(Reports.runtime(rx7900xt(0), "5.7.1")),
            "gpu[0].driver",
            FAIL,
            "ROCm 5.7.1"));
    c.add(
        ok(
            "unknown model of an unknown vendor",
            gpus(Reports.vendor(Reports.name(h0, "Arc A770"), "intel")),
            "gpu[0].driver",
            FAIL,
            "vendor \"intel\""));
    c.add(
        new Case(
            "unknown NVIDIA model still gets its driver checked (the host fails on its model)",
            gpus(Reports.name(h0, "Tesla T4")),
            true,
            STRICT,
            "gpu[0].driver",
            PASS,
            false,
            "550.54.15"));

    // gpu[i].temperature: <= 85 C, absent -> not_measured
    c.add(ok("temperature 34 C", healthy, "gpu[0].temperature", PASS, "34 C"));
    c.add(
        ok(
            "temperature exactly 85 C",
            each(g -> Reports.temperature(g, 85)),
            "gpu[0].temperature",
            PASS,
            "85 C"));
    c.add(
        ok(
            "temperature 86 C",
            each(g -> Reports.temperature(g, 86)),
            "gpu[1].temperature",
            FAIL,
            "86 C"));
    c.add(
        ok(
            "temperature not reported",
            each(g -> Reports.temperature(g, null)),
            "gpu[0].temperature",
            NOT_MEASURED,
            "not reported"));

    // gpu[i].ecc: 0 uncorrected errors, absent (ECC off / consumer card) -> not_measured
    c.add(ok("no uncorrected ECC errors", healthy, "gpu[0].ecc", PASS, "0 uncorrected"));
    c.add(
        ok(
            "uncorrected ECC errors",
            gpus(h0, Reports.ecc(h1, 3L)),
            "gpu[1].ecc",
            FAIL,
            "3 uncorrected ECC errors"));
    c.add(
        ok(
            "negative ECC count",
            gpus(Reports.ecc(h0, -1L)),
            "gpu[0].ecc",
            FAIL,
            "not a valid count"));
    c.add(ok("ECC not supported", gpus(rx7900xt(0)), "gpu[0].ecc", NOT_MEASURED, "not reported"));
    c.add(
        ok(
            "ECC not reported",
            each(g -> Reports.ecc(g, null)),
            "gpu[0].ecc",
            NOT_MEASURED,
            "not reported"));

    // ram >= 0.95 x total VRAM: 2 x 81559 = 163118 MiB -> ceil(154962.1) = 154963 MiB
    c.add(ok("plenty of RAM", healthy, "ram", PASS, "1031000 MiB"));
    c.add(
        ok(
            "RAM exactly 95% of VRAM, rounded up",
            Reports.ram(healthy, 154_963L), "ram", PASS, "154963 MiB"));
    c.add(
        ok(
            "RAM 1 MiB below 95% of VRAM",
            Reports.ram(healthy, 154_962L), "ram", FAIL, "154962 MiB"));
    c.add(ok("RAM counts every card", Reports.ram(gpus(h0), 77_482L), "ram", PASS, "77482 MiB"));
    c.add(ok("RAM not reported", Reports.ram(healthy, null), "ram", FAIL, "not reported"));
    c.add(
        ok(
            "RAM uses the catalog VRAM where a card's is not reported",
            Reports.ram(each(g -> Reports.vram(g, null)), 154_962L),
            "ram",
            FAIL,
            "154962 MiB"));

    // disk_free >= 50 GiB
    c.add(ok("plenty of free disk", healthy, "disk_free", PASS, "1800000000000 bytes"));
    c.add(
        ok(
            "exactly 50 GiB free",
            Reports.disk(healthy, new Disk("/d", 50 * GIB, 1450.2)),
            "disk_free",
            PASS,
            "(50 GiB)"));
    c.add(
        ok(
            "1 byte under 50 GiB",
            Reports.disk(healthy, new Disk("/d", 50 * GIB - 1, 1450.2)),
            "disk_free",
            FAIL,
            "(49 GiB)"));
    c.add(
        ok(
            "free disk not reported",
            Reports.disk(healthy, new Disk("/d", null, 1450.2)),
            "disk_free",
            FAIL,
            "not reported"));
    c.add(ok("no disk section", Reports.disk(healthy, null), "disk_free", FAIL, "not reported"));

    // disk_write >= 200 MiB/s, absent -> not_measured
    c.add(ok("fast disk", healthy, "disk_write", PASS, "1450.2 MiB/s"));
    c.add(
        ok(
            "exactly 200 MiB/s",
            Reports.disk(healthy, new Disk("/d", 100 * GIB, 200.0)),
            "disk_write",
            PASS,
            "200.0 MiB/s"));
    c.add(
        ok(
            "199.9 MiB/s",
            Reports.disk(healthy, new Disk("/d", 100 * GIB, 199.9)),
            "disk_write",
            FAIL,
            "199.9 MiB/s"));
    c.add(
        ok(
            "write rate not measured",
            Reports.disk(healthy, new Disk("/d", 100 * GIB, null)),
            "disk_write",
            NOT_MEASURED,
            "not measured"));
    c.add(
        ok(
            "not a number",
            Reports.disk(healthy, new Disk("/d", 100 * GIB, Double.NaN)),
            "disk_write",
            FAIL,
            "not a valid rate"));
    c.add(
        ok(
            "negative rate",
            Reports.disk(healthy, new Disk("/d", 100 * GIB, -5.0)),
            "disk_write",
            FAIL,
            "not a valid rate"));

    // benchmark: never made up
    c.add(ok("no benchmark ran", healthy, "benchmark", NOT_MEASURED, "no benchmark ran"));
    c.add(
        ok(
            "a measured benchmark",
            Reports.benchmark(healthy, new Benchmark("matmul-fp16", 612.5, "2026-11-29T18:00:05Z")),
            "benchmark",
            PASS,
            "matmul-fp16: 612.5 TFLOPS FP16"));
    c.add(
        ok(
            "a benchmark without a figure",
            Reports.benchmark(healthy, new Benchmark("matmul-fp16", null, null)),
            "benchmark",
            NOT_MEASURED,
            "reported no figure"));
    c.add(
        ok(
            "a negative benchmark figure",
            Reports.benchmark(healthy, new Benchmark("matmul-fp16", -1.0, null)),
            "benchmark",
            FAIL,
            "not a valid figure"));

    // several missing measurements at once still pass
    c.add(
        ok(
            "everything optional missing",
            Reports.disk(
                each(g -> Reports.ecc(Reports.temperature(g, null), null)),
                new Disk("/d", 100 * GIB, null)),
            "benchmark",
            NOT_MEASURED,
            "no benchmark ran"));
    return c.stream();
  }

  private static Policy policy(int maxTemperature, int vramPermille) {
    return new Policy(false, "535.0", "6.0", maxTemperature, vramPermille, 50 * GIB, 200);
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("cases")
  void eachCheck(Case c) {
    Outcome outcome = Verification.verify(c.report(), c.signatureValid(), CATALOG, c.policy());
    Check check =
        outcome
            .check(c.check())
            .orElseThrow(
                () -> new AssertionError("no check " + c.check() + " in " + outcome.checks()));
    assertEquals(c.status(), check.status(), () -> "check " + check + "\nall: " + outcome.checks());
    assertTrue(
        check.observed().contains(c.observed()),
        () -> "observed \"" + check.observed() + "\" lacks \"" + c.observed() + "\"");
    assertEquals(c.passed(), outcome.passed(), () -> "outcome of " + outcome.checks());
    // The outcome fails exactly when the signature is bad or some check fails; not_measured never
    // fails it.
    boolean anyFail = outcome.checks().stream().anyMatch(x -> x.status() == FAIL);
    assertEquals(c.signatureValid() && !anyFail, outcome.passed());
    for (Check x : outcome.checks()) {
      assertNotNull(x.status(), x.check());
      assertFalse(x.observed() == null || x.observed().isBlank(), "observed of " + x);
      assertFalse(x.expected() == null || x.expected().isBlank(), "expected of " + x);
    }
    assertEquals(c.report().simulated(), outcome.simulated());
    assertEquals(outcome.passed() ? outcome.cards() : List.of(), outcome.usableCards());
    // A pure function: the same input gives the same verdict.
    assertEquals(outcome, Verification.verify(c.report(), c.signatureValid(), CATALOG, c.policy()));
  }

  @Test
  void aHealthyHostGetsEveryCheckInAStableOrder() {
    Outcome outcome = Verification.verify(healthy(), true, CATALOG, STRICT);
    assertEquals(
        List.of(
            "signature",
            "simulated",
            "isolation",
            "gpus_present",
            "gpus_unique",
            "gpus_uniform",
            "gpu[0].model",
            "gpu[0].vram",
            "gpu[0].driver",
            "gpu[0].temperature",
            "gpu[0].ecc",
            "gpu[1].model",
            "gpu[1].vram",
            "gpu[1].driver",
            "gpu[1].temperature",
            "gpu[1].ecc",
            "ram",
            "disk_free",
            "disk_write",
            "benchmark"),
        outcome.checks().stream().map(Check::check).toList());
    assertTrue(outcome.passed());
    assertEquals(
        List.of(new Card(0, h100(0).uuid(), "h100-80gb"), new Card(1, h100(1).uuid(), "h100-80gb")),
        outcome.cards());
    assertEquals(outcome.cards(), outcome.usableCards());
    Check vram = outcome.check("gpu[0].vram").orElseThrow();
    assertEquals("81559 MiB +/-3.0% for h100-80gb (79113..84005 MiB)", vram.expected());
    assertEquals("NVIDIA driver >= 535.0", outcome.check("gpu[0].driver").orElseThrow().expected());
    assertEquals(
        ">= 154963 MiB (95% of 163118 MiB total VRAM)",
        outcome.check("ram").orElseThrow().expected());
    assertEquals(
        ">= 53687091200 bytes (50 GiB)", outcome.check("disk_free").orElseThrow().expected());
  }

  @Test
  void cardsListEveryGpuWithItsCatalogCodeButNoneIsUsableWhenTheHostFails() {
    Outcome outcome =
        Verification.verify(
            Reports.withGpus(healthy(), List.of(h100(0), Reports.name(h100(1), "Tesla T4"))),
            true,
            CATALOG,
            STRICT);
    assertFalse(outcome.passed());
    assertEquals(
        List.of(new Card(0, h100(0).uuid(), "h100-80gb"), new Card(1, h100(1).uuid(), null)),
        outcome.cards());
    assertEquals(List.of(), outcome.usableCards());
  }

  @Test
  void aTamperedReportFailsOnlyItsSignatureCheckButTheOutcomeFails() {
    Outcome outcome = Verification.verify(healthy(), false, CATALOG, DEV);
    assertFalse(outcome.passed());
    assertEquals(
        List.of("signature"),
        outcome.checks().stream().filter(x -> x.status() == FAIL).map(Check::check).toList());
    assertEquals(List.of(), outcome.usableCards());
  }

  @Test
  void anOutcomeSurvivesCborAsItWouldBetweenNodes() throws Exception {
    ObjectMapper cbor = new CBORMapper().registerModule(new ParameterNamesModule());
    Outcome failed =
        Verification.verify(
            Reports.withGpus(healthy(), List.of(h100(0), Reports.name(h100(1), "Tesla T4"))),
            true,
            CATALOG,
            STRICT);
    Outcome passed = Verification.verify(healthy(), true, CATALOG, DEV);
    for (Outcome o : List.of(failed, passed)) {
      assertEquals(o, cbor.readValue(cbor.writeValueAsBytes(o), Outcome.class));
    }
  }

  @Test
  void theOutcomeKeepsHowTheHostRunsRentals() throws Exception {
    Outcome unsaid = Verification.verify(healthy(), true, CATALOG, STRICT);
    assertNull(unsaid.runtime(), "an agent older than 2026-12-07 says nothing");
    assertTrue(unsaid.offersNetwork(), "a host that did not say is taken as able, as before");

    Outcome noNetwork =
        Verification.verify(
            healthy().withRuntime(new HardwareReport.WorkloadRuntime("sandbox", false)),
            true,
            CATALOG,
            STRICT);
    assertEquals(new Verification.WorkloadRuntime("sandbox", false), noNetwork.runtime());
    assertFalse(noNetwork.offersNetwork());
    assertTrue(noNetwork.passed(), "no network is no failure: rentals without it still run there");
    assertEquals(
        unsaid.checks().stream().filter(c -> !c.check().equals("isolation")).toList(),
        noNetwork.checks().stream().filter(c -> !c.check().equals("isolation")).toList(),
        "the runtime is judged by the isolation check alone");

    Outcome docker =
        Verification.verify(
            healthy().withRuntime(new HardwareReport.WorkloadRuntime("docker", true)),
            true,
            CATALOG,
            STRICT);
    assertTrue(docker.offersNetwork());

    Outcome odd =
        Verification.verify(
            healthy().withRuntime(new HardwareReport.WorkloadRuntime("<b>my own</b>", true)),
            true,
            CATALOG,
            STRICT);
    assertEquals(
        new Verification.WorkloadRuntime("unknown", true),
        odd.runtime(),
        "a name outside docker, sandbox and process is never shown as sent");

    ObjectMapper cbor = new CBORMapper().registerModule(new ParameterNamesModule());
    assertEquals(noNetwork, cbor.readValue(cbor.writeValueAsBytes(noNetwork), Outcome.class));
    // An outcome recorded before the runtime was kept (events and snapshots of older nodes)
    byte[] older =
        cbor.writeValueAsBytes(
            Map.of("passed", true, "checks", List.of(), "cards", List.of(), "simulated", true));
    Outcome read = cbor.readValue(older, Outcome.class);
    assertNull(read.runtime());
    assertTrue(read.offersNetwork());
  }

  @Test
  void statusesHaveTheirWireForm() {
    assertEquals("pass", PASS.wire());
    assertEquals("fail", FAIL.wire());
    assertEquals("not_measured", NOT_MEASURED.wire());
    for (Status s : Status.values()) assertEquals(s, Status.fromWire(s.wire()));
    assertThrows(IllegalArgumentException.class, () -> Status.fromWire("PASS"));
  }

  @Test
  void defaultPolicy() {
    Policy p = Policy.defaults(true);
    assertEquals(new Policy(true, "535.0", "6.0", 85, 30, 50 * GIB, 200), p);
    assertFalse(Policy.defaults(false).allowSimulatedHosts());
  }

  @Test
  void aPolicyRefusesNonsense() {
    assertThrows(
        IllegalArgumentException.class, () -> new Policy(false, "latest", "6.0", 85, 30, 0, 0));
    assertThrows(
        IllegalArgumentException.class, () -> new Policy(false, "535.0", null, 85, 30, 0, 0));
    assertThrows(
        IllegalArgumentException.class, () -> new Policy(false, "535.0", "6.0", 85, -1, 0, 0));
    assertThrows(
        IllegalArgumentException.class, () -> new Policy(false, "535.0", "6.0", 85, 1001, 0, 0));
    assertThrows(
        IllegalArgumentException.class, () -> new Policy(false, "535.0", "6.0", 85, 30, -1, 0));
    assertThrows(
        IllegalArgumentException.class, () -> new Policy(false, "535.0", "6.0", 85, 30, 0, -1));
  }

  @Test
  void versionsCompareNumerically() {
    assertTrue(
        Verification.compareVersions(
                Verification.parseVersion("550.54.15"), Verification.parseVersion("535.0"))
            > 0);
    assertTrue(
        Verification.compareVersions(
                Verification.parseVersion("1000"), Verification.parseVersion("535.0"))
            > 0);
    assertTrue(
        Verification.compareVersions(
                Verification.parseVersion("535.9"), Verification.parseVersion("535.10"))
            < 0);
    assertEquals(
        0,
        Verification.compareVersions(
            Verification.parseVersion("535"), Verification.parseVersion("535.0.0")));
    assertEquals(null, Verification.parseVersion("v535"));
    assertEquals(null, Verification.parseVersion(""));
    assertEquals(null, Verification.parseVersion("1234567890123456789.0"));
  }
}
