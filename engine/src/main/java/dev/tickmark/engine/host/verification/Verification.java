package dev.tickmark.engine.host.verification;

import com.fasterxml.jackson.annotation.JsonCreator;
import com.typesafe.config.Config;
import dev.tickmark.engine.CborSerializable;
import dev.tickmark.engine.catalog.Catalog;
import dev.tickmark.engine.catalog.Catalog.GpuModel;
import dev.tickmark.wire.HardwareReport;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The market's hardware rules, as a pure function from a host's signed hardware report to a
 * per-check verdict. No I/O, no clock, no randomness: the same report, signature verdict, catalog
 * and policy always give the same outcome, so an identical report re-sent by an agent gets the same
 * answer.
 *
 * <p>Every check has a stable name, a {@link Status}, and {@code observed} / {@code expected}
 * strings written for the provider. The checks, in order:
 *
 * <ul>
 *   <li>{@code signature}: the report's Ed25519 signature verified against the host's pinned key
 *       (the caller checks it; see {@code CanonicalJson}). A bad signature fails the outcome
 *       whatever else the report says: its content cannot be trusted.
 *   <li>{@code simulated}: real GPUs pass; simulated GPUs pass only when the policy allows them.
 *   <li>{@code isolation}: how the agent runs rentals ({@link WorkloadRuntime}): {@code docker} and
 *       {@code sandbox} isolate them and pass; {@code process} (or a runtime the market does not
 *       know) does not — a workload could read the agent's key and credential, and other rentals'
 *       workspaces — and fails with real GPUs unless the policy allows unisolated hosts (a private
 *       cluster); with simulated GPUs (development) it passes. {@code not_measured} from agents
 *       that do not say (older than 2026-12-07).
 *   <li>{@code gpus_present}: at least one GPU, and no empty entries.
 *   <li>{@code gpus_unique}: card indexes are distinct and non-negative, reported UUIDs distinct
 *       (one physical card cannot be listed twice to be rented twice).
 *   <li>{@code gpus_uniform}: every GPU is the same catalog model (see below).
 *   <li>per GPU, named by the card's reported index: {@code gpu[i].model}, {@code gpu[i].vram},
 *       {@code gpu[i].driver}, {@code gpu[i].temperature}, {@code gpu[i].ecc}.
 *   <li>{@code ram}, {@code disk_free}, {@code disk_write}, {@code benchmark}.
 * </ul>
 *
 * <p>Missing values: a value the agent could not read is absent, never guessed. Where the market
 * can still judge the host safely it is {@code not_measured} (temperature, ECC — consumer cards
 * have none —, disk write rate, benchmark), which never fails the outcome. Where a rule cannot be
 * judged without it (VRAM, driver version, RAM, free disk) the check fails: fail-closed.
 */
public final class Verification {

  private Verification() {}

  public enum Status {
    PASS,
    FAIL,
    NOT_MEASURED;

    /** The wire form: {@code pass}, {@code fail}, {@code not_measured}. */
    public String wire() {
      return name().toLowerCase(Locale.ROOT);
    }

    public static Status fromWire(String wire) {
      for (Status s : values()) {
        if (s.wire().equals(wire)) return s;
      }
      throw new IllegalArgumentException("unknown check status \"" + wire + "\"");
    }
  }

  /** One rule's verdict. {@code observed} and {@code expected} are for people, not for parsing. */
  public record Check(String check, Status status, String observed, String expected)
      implements CborSerializable {}

  /**
   * One card of the host: its reported index and UUID, and its catalog model code ({@code null}
   * when unknown).
   */
  public record Card(int index, String uuid, String gpu) implements CborSerializable {}

  /**
   * The verdict. {@code cards} lists every GPU the report names, but a card may be listed on the
   * market only if {@code passed} (see {@link #usableCards()}).
   */
  /**
   * {@code runtime}: how the host runs rentals, as its report said (null: a report from an agent
   * older than 2026-12-07, or an outcome recorded before it was kept).
   */
  public record Outcome(
      boolean passed,
      List<Check> checks,
      List<Card> cards,
      boolean simulated,
      WorkloadRuntime runtime)
      implements CborSerializable {
    @JsonCreator
    public Outcome {
      checks = List.copyOf(checks);
      cards = List.copyOf(cards);
    }

    public Outcome(boolean passed, List<Check> checks, List<Card> cards, boolean simulated) {
      this(passed, checks, cards, simulated, null);
    }

    /**
     * Whether a rental that asks for outbound network can run on the host: unless its report said
     * it cannot (a host that did not say is taken at its word from before: it may).
     */
    public boolean offersNetwork() {
      return runtime == null || runtime.network();
    }

    /** The cards the market may rent out: all of them if the host passed, none otherwise. */
    public List<Card> usableCards() {
      return passed ? cards : List.of();
    }

    /** The check with this name, if the outcome has one. */
    public Optional<Check> check(String name) {
      for (Check c : checks) {
        if (c.check().equals(name)) return Optional.of(c);
      }
      return Optional.empty();
    }
  }

  /**
   * How a host runs rentals: {@code name} {@code docker}, {@code sandbox} or {@code process};
   * {@code network}: whether it can give a rental outbound network.
   */
  public record WorkloadRuntime(String name, boolean network) implements CborSerializable {}

  /**
   * The thresholds. Versions are dotted numbers compared numerically; the VRAM tolerance is in
   * per-mille of the catalog's figure (30 = ±3%).
   */
  public record Policy(
      boolean allowSimulatedHosts,
      String minNvidiaDriver,
      String minRocm,
      int maxTemperatureC,
      int vramTolerancePermille,
      long minFreeDiskBytes,
      long minDiskWriteMibPerS,
      boolean allowUnisolatedHosts) {

    public static final String DEFAULT_MIN_NVIDIA_DRIVER = "535.0";
    public static final String DEFAULT_MIN_ROCM = "6.0";
    public static final int DEFAULT_MAX_TEMPERATURE_C = 85;
    public static final int DEFAULT_VRAM_TOLERANCE_PERMILLE = 30;
    public static final long DEFAULT_MIN_FREE_DISK_BYTES = 50L * 1024 * 1024 * 1024;
    public static final long DEFAULT_MIN_DISK_WRITE_MIB_PER_S = 200;

    public Policy {
      if (parseVersion(minNvidiaDriver) == null) {
        throw new IllegalArgumentException(
            "minNvidiaDriver must be a dotted version like \"535.0\", got " + minNvidiaDriver);
      }
      if (parseVersion(minRocm) == null) {
        throw new IllegalArgumentException(
            "minRocm must be a dotted version like \"6.0\", got " + minRocm);
      }
      if (vramTolerancePermille < 0 || vramTolerancePermille > 1000) {
        throw new IllegalArgumentException(
            "vramTolerancePermille must be within 0..1000, got " + vramTolerancePermille);
      }
      if (minFreeDiskBytes < 0)
        throw new IllegalArgumentException("minFreeDiskBytes must not be negative");
      if (minDiskWriteMibPerS < 0)
        throw new IllegalArgumentException("minDiskWriteMibPerS must not be negative");
    }

    /** A policy that refuses unisolated hosts with real GPUs (the default). */
    public Policy(
        boolean allowSimulatedHosts,
        String minNvidiaDriver,
        String minRocm,
        int maxTemperatureC,
        int vramTolerancePermille,
        long minFreeDiskBytes,
        long minDiskWriteMibPerS) {
      this(
          allowSimulatedHosts,
          minNvidiaDriver,
          minRocm,
          maxTemperatureC,
          vramTolerancePermille,
          minFreeDiskBytes,
          minDiskWriteMibPerS,
          false);
    }

    /**
     * Driver ≥ 535.0, ROCm ≥ 6.0, ≤ 85 °C, VRAM ±3%, ≥ 50 GiB free disk, ≥ 200 MiB/s disk writes.
     */
    public static Policy defaults(boolean allowSimulated) {
      return new Policy(
          allowSimulated,
          DEFAULT_MIN_NVIDIA_DRIVER,
          DEFAULT_MIN_ROCM,
          DEFAULT_MAX_TEMPERATURE_C,
          DEFAULT_VRAM_TOLERANCE_PERMILLE,
          DEFAULT_MIN_FREE_DISK_BYTES,
          DEFAULT_MIN_DISK_WRITE_MIB_PER_S,
          false);
    }

    /**
     * From the node's config: {@code tickmark.verification.*} (with {@code allow-unisolated-hosts})
     * and {@code tickmark.market.allow-simulated-hosts}.
     */
    public static Policy fromConfig(Config config) {
      Config v = config.getConfig("tickmark.verification");
      return new Policy(
          config.getBoolean("tickmark.market.allow-simulated-hosts"),
          v.getString("min-nvidia-driver"),
          v.getString("min-rocm"),
          v.getInt("max-temperature-c"),
          v.getInt("vram-tolerance-permille"),
          v.getBytes("min-free-disk"),
          v.getLong("min-disk-write-mib-per-s"),
          v.getBoolean("allow-unisolated-hosts"));
    }
  }

  /**
   * Judges a report.
   *
   * @param signatureValid whether the report's signature verified against the host's pinned key
   */
  public static Outcome verify(
      HardwareReport report, boolean signatureValid, Catalog catalog, Policy policy) {
    Objects.requireNonNull(report, "report");
    Objects.requireNonNull(catalog, "catalog");
    Objects.requireNonNull(policy, "policy");
    List<Check> checks = new ArrayList<>();

    checks.add(
        signatureValid
            ? pass(
                "signature",
                "valid Ed25519 signature over the canonical report",
                "a valid signature by the host's pinned key")
            : fail(
                "signature",
                "the signature does not verify (report altered, or signed with another key)",
                "a valid signature by the host's pinned key"));

    checks.add(simulatedCheck(report.simulated(), policy.allowSimulatedHosts()));
    checks.add(isolationCheck(report.runtime(), report.simulated(), policy.allowUnisolatedHosts()));

    List<HardwareReport.Gpu> listed = report.gpus() == null ? List.of() : report.gpus();
    List<HardwareReport.Gpu> gpus = new ArrayList<>();
    for (HardwareReport.Gpu g : listed) {
      if (g != null) gpus.add(g);
    }
    int empty = listed.size() - gpus.size();
    if (gpus.isEmpty()) {
      checks.add(fail("gpus_present", "no GPUs reported", "at least 1 GPU"));
    } else if (empty > 0) {
      checks.add(
          fail(
              "gpus_present",
              gpus.size() + " GPU(s) and " + empty + " empty entr" + (empty == 1 ? "y" : "ies"),
              "at least 1 GPU, every entry filled in"));
    } else {
      checks.add(
          pass(
              "gpus_present",
              gpus.size() + " GPU" + (gpus.size() == 1 ? "" : "s"),
              "at least 1 GPU"));
    }

    List<Optional<GpuModel>> models = new ArrayList<>();
    for (HardwareReport.Gpu g : gpus) models.add(catalog.bySmiName(g.name()));

    if (!gpus.isEmpty()) {
      checks.add(uniqueCheck(gpus));
      checks.add(uniformCheck(models));
    }

    long totalVramMib = 0;
    List<Card> cards = new ArrayList<>();
    for (int i = 0; i < gpus.size(); i++) {
      HardwareReport.Gpu g = gpus.get(i);
      Optional<GpuModel> model = models.get(i);
      String prefix = "gpu[" + g.index() + "].";
      checks.add(modelCheck(prefix + "model", g, model));
      checks.add(vramCheck(prefix + "vram", g, model, policy));
      checks.add(driverCheck(prefix + "driver", g, model, policy));
      checks.add(temperatureCheck(prefix + "temperature", g, policy));
      checks.add(eccCheck(prefix + "ecc", g));
      cards.add(new Card(g.index(), g.uuid(), model.map(GpuModel::code).orElse(null)));
      Long reported = g.memoryTotalMib();
      long vram =
          reported != null && reported > 0 ? reported : model.map(GpuModel::vramMib).orElse(0L);
      totalVramMib = saturatingAdd(totalVramMib, vram);
    }

    checks.add(ramCheck(report.memoryTotalMib(), totalVramMib));
    checks.add(diskFreeCheck(report.disk(), policy));
    checks.add(diskWriteCheck(report.disk(), policy));
    checks.add(benchmarkCheck(report.benchmark(), models));

    boolean passed = signatureValid;
    for (Check c : checks) {
      if (c.status() == Status.FAIL) passed = false;
    }
    HardwareReport.WorkloadRuntime runtime = report.runtime();
    return new Outcome(
        passed,
        checks,
        cards,
        report.simulated(),
        runtime == null
            ? null
            : new WorkloadRuntime(
                RUNTIMES.contains(runtime.name()) ? runtime.name() : "unknown", runtime.network()));
  }

  /**
   * The runtime names an agent may report, and a renter may ask for; any other is shown as {@code
   * unknown}.
   */
  public static final List<String> RUNTIMES = List.of("docker", "sandbox", "process");

  /** The runtimes that isolate a rental from the host and from other rentals. */
  static final Set<String> ISOLATING = Set.of("docker", "sandbox");

  private static Check isolationCheck(
      HardwareReport.WorkloadRuntime runtime, boolean simulated, boolean unisolatedAllowed) {
    String expected =
        "docker or sandbox: rentals isolated from the host and each other (process only with"
            + " simulated GPUs, or where tickmark.verification.allow-unisolated-hosts is on)";
    if (runtime == null)
      return notMeasured(
          "isolation",
          "the agent does not say how it runs rentals (older than 2026-12-07)",
          expected);
    String name = RUNTIMES.contains(runtime.name()) ? runtime.name() : "unknown";
    String network =
        runtime.network()
            ? "rentals with network can run here"
            : "no network for rentals"
                + switch (name) {
                  case "sandbox" -> " (a sandbox needs slirp4netns)";
                  case "docker" -> " (the docker daemon has no bridge network)";
                  default -> "";
                };
    if (ISOLATING.contains(name))
      return pass("isolation", name + ": rentals isolated; " + network, expected);
    String unisolated =
        name
            + ": rentals are not isolated (a workload could read the agent's key and credential and"
            + " other rentals' workspaces)";
    if (simulated) return pass("isolation", unisolated + "; simulated GPUs: development", expected);
    if (unisolatedAllowed)
      return pass(
          "isolation",
          unisolated + "; allowed here (tickmark.verification.allow-unisolated-hosts)",
          expected);
    return fail("isolation", unisolated, expected);
  }

  // --- the checks -------------------------------------------------------------------------------

  private static Check simulatedCheck(boolean simulated, boolean allowed) {
    if (!simulated) {
      return pass(
          "simulated",
          "real GPUs",
          allowed ? "real GPUs (simulated hosts are also allowed here)" : "real GPUs");
    }
    if (allowed) {
      return pass(
          "simulated",
          "simulated GPUs",
          "real GPUs, or simulated GPUs where tickmark.market.allow-simulated-hosts is on (it is)");
    }
    return fail(
        "simulated",
        "simulated GPUs",
        "real GPUs (simulated hosts are off: tickmark.market.allow-simulated-hosts)");
  }

  private static Check uniqueCheck(List<HardwareReport.Gpu> gpus) {
    String expected = "distinct, non-negative card indexes and distinct GPU UUIDs";
    Set<Integer> indexes = new HashSet<>();
    Set<String> uuids = new HashSet<>();
    for (HardwareReport.Gpu g : gpus) {
      if (g.index() < 0) return fail("gpus_unique", "negative card index " + g.index(), expected);
      if (!indexes.add(g.index()))
        return fail("gpus_unique", "card index " + g.index() + " is listed twice", expected);
      if (g.uuid() != null && !uuids.add(g.uuid().trim().toLowerCase(Locale.ROOT))) {
        return fail("gpus_unique", "UUID " + g.uuid() + " is listed twice", expected);
      }
    }
    return pass(
        "gpus_unique", gpus.size() + " distinct card" + (gpus.size() == 1 ? "" : "s"), expected);
  }

  /*
   * One host, one model. A rental asks for `count` cards of one catalog model, all on one host, and
   * a host is listed with one price per GPU-hour; a mixed machine (say an H100 next to an A10) would
   * need per-card models, prices and matching. So all GPUs on a host must resolve to the same
   * catalog model, and a mixed machine is refused here rather than half-listed. A provider with
   * mixed cards can run one agent per model (with the cards partitioned between them).
   */
  private static Check uniformCheck(List<Optional<GpuModel>> models) {
    Map<String, Integer> counts = new LinkedHashMap<>();
    for (Optional<GpuModel> m : models)
      counts.merge(m.map(GpuModel::code).orElse("unknown"), 1, Integer::sum);
    StringBuilder observed = new StringBuilder();
    for (Map.Entry<String, Integer> e : counts.entrySet()) {
      if (observed.length() > 0) observed.append(", ");
      observed.append(e.getValue()).append(" x ").append(e.getKey());
    }
    String expected = "every GPU on the host the same catalog model";
    boolean uniform = counts.size() == 1 && models.get(0).isPresent();
    return uniform
        ? pass("gpus_uniform", observed.toString(), expected)
        : fail("gpus_uniform", observed.toString(), expected);
  }

  private static Check modelCheck(String name, HardwareReport.Gpu g, Optional<GpuModel> model) {
    String expected =
        "a GPU model in the catalog (matched by the name nvidia-smi or rocm-smi reports)";
    if (g.name() == null || g.name().isBlank()) return fail(name, "no name reported", expected);
    if (model.isEmpty()) return fail(name, "\"" + g.name() + "\" is not in the catalog", expected);
    GpuModel m = model.get();
    if (g.vendor() != null && !g.vendor().trim().equalsIgnoreCase(m.vendor())) {
      return fail(
          name,
          "\"" + g.name() + "\" reported with vendor \"" + g.vendor() + "\"",
          m.code() + " is made by " + m.vendor());
    }
    return pass(name, "\"" + g.name() + "\" = " + m.code() + " (" + m.name() + ")", expected);
  }

  private static Check vramCheck(
      String name, HardwareReport.Gpu g, Optional<GpuModel> model, Policy policy) {
    String tolerance = "+/-" + permilleAsPercent(policy.vramTolerancePermille());
    Long observed = g.memoryTotalMib();
    String seen = observed == null ? "not reported" : observed + " MiB";
    if (model.isEmpty())
      return fail(name, seen, "within " + tolerance + " of the catalog's VRAM for a known model");
    GpuModel m = model.get();
    long target = m.vramMib();
    long low;
    long high;
    try {
      // |observed - target| * 1000 <= target * permille, as exact integer bounds on observed.
      low =
          -Math.floorDiv(
              -Math.multiplyExact(target, 1000L - policy.vramTolerancePermille()), 1000L);
      high =
          Math.floorDiv(Math.multiplyExact(target, 1000L + policy.vramTolerancePermille()), 1000L);
    } catch (ArithmeticException e) {
      return fail(name, seen, "catalog VRAM of " + m.code() + " is out of range");
    }
    String expected =
        target + " MiB " + tolerance + " for " + m.code() + " (" + low + ".." + high + " MiB)";
    if (observed == null) return fail(name, seen, expected);
    return observed >= low && observed <= high
        ? pass(name, seen, expected)
        : fail(name, seen, expected);
  }

  private static Check driverCheck(
      String name, HardwareReport.Gpu g, Optional<GpuModel> model, Policy policy) {
    String vendor =
        model
            .map(GpuModel::vendor)
            .orElse(g.vendor() == null ? "" : g.vendor().trim().toLowerCase(Locale.ROOT));
    String label;
    String reported;
    String minimum;
    if (Catalog.VENDOR_NVIDIA.equals(vendor)) {
      label = "NVIDIA driver";
      reported = g.driverVersion();
      minimum = policy.minNvidiaDriver();
    } else if (Catalog.VENDOR_AMD.equals(vendor)) {
      label = "ROCm";
      reported = g.runtimeVersion();
      minimum = policy.minRocm();
    } else {
      return fail(
          name,
          g.vendor() == null ? "vendor not reported" : "vendor \"" + g.vendor() + "\"",
          "an nvidia GPU (driver >= "
              + policy.minNvidiaDriver()
              + ") or an amd GPU (ROCm >= "
              + policy.minRocm()
              + ")");
    }
    String expected = label + " >= " + minimum;
    if (reported == null || reported.isBlank())
      return fail(name, label + " version not reported", expected);
    long[] version = parseVersion(reported);
    if (version == null)
      return fail(name, label + " \"" + reported + "\" (not a dotted version number)", expected);
    String observed = label + " " + reported.trim();
    return compareVersions(version, parseVersion(minimum)) >= 0
        ? pass(name, observed, expected)
        : fail(name, observed, expected);
  }

  private static Check temperatureCheck(String name, HardwareReport.Gpu g, Policy policy) {
    String expected = "<= " + policy.maxTemperatureC() + " C";
    Integer t = g.temperatureC();
    if (t == null) return notMeasured(name, "not reported", expected);
    String observed = t + " C";
    return t <= policy.maxTemperatureC()
        ? pass(name, observed, expected)
        : fail(name, observed, expected);
  }

  private static Check eccCheck(String name, HardwareReport.Gpu g) {
    String expected = "0 uncorrected ECC errors";
    Long errors = g.eccErrorsUncorrected();
    if (errors == null)
      return notMeasured(name, "not reported (ECC off or not supported by this card)", expected);
    if (errors < 0) return fail(name, errors + " (not a valid count)", expected);
    String observed = errors + " uncorrected ECC error" + (errors == 1 ? "" : "s");
    return errors == 0 ? pass(name, observed, expected) : fail(name, observed, expected);
  }

  /** RAM ≥ 0.95 × total VRAM, as ram × 100 ≥ vram × 95 (exactly: ram ≥ ceil(vram × 95 / 100)). */
  private static Check ramCheck(Long ramMib, long totalVramMib) {
    long required;
    try {
      required = -Math.floorDiv(-Math.multiplyExact(totalVramMib, 95L), 100L);
    } catch (ArithmeticException e) {
      return fail(
          "ram",
          ramMib == null ? "not reported" : ramMib + " MiB",
          "total VRAM reported is implausibly large");
    }
    String expected = ">= " + required + " MiB (95% of " + totalVramMib + " MiB total VRAM)";
    if (ramMib == null) return fail("ram", "not reported", expected);
    String observed = ramMib + " MiB";
    return ramMib >= required ? pass("ram", observed, expected) : fail("ram", observed, expected);
  }

  private static Check diskFreeCheck(HardwareReport.Disk disk, Policy policy) {
    String expected = ">= " + bytes(policy.minFreeDiskBytes());
    Long free = disk == null ? null : disk.freeBytes();
    if (free == null) return fail("disk_free", "not reported", expected);
    String observed = bytes(free) + (disk.path() == null ? "" : " at " + disk.path());
    return free >= policy.minFreeDiskBytes()
        ? pass("disk_free", observed, expected)
        : fail("disk_free", observed, expected);
  }

  private static Check diskWriteCheck(HardwareReport.Disk disk, Policy policy) {
    String expected = ">= " + policy.minDiskWriteMibPerS() + " MiB/s sequential write";
    var rate = disk == null ? null : disk.writeMibPerS();
    if (rate == null) return notMeasured("disk_write", "not measured", expected);
    if (rate.isNaN() || rate.isInfinite() || rate < 0)
      return fail("disk_write", rate + " MiB/s (not a valid rate)", expected);
    String observed = rate + " MiB/s";
    // The minimum is a whole number, so comparing the rate's whole part is exact: r >= m <=>
    // floor(r) >= m.
    return rate.longValue() >= policy.minDiskWriteMibPerS()
        ? pass("disk_write", observed, expected)
        : fail("disk_write", observed, expected);
  }

  /**
   * A benchmark is reported only if one actually ran; its absence is {@code not_measured} and
   * nothing is made up in its place. A figure that was measured is shown as measured and passes
   * (the catalog figure is the vendor's peak, which real runs never reach; pricing and reliability
   * are where a slow card shows).
   */
  private static Check benchmarkCheck(
      HardwareReport.Benchmark benchmark, List<Optional<GpuModel>> models) {
    String expected = "a measured FP16 result";
    if (!models.isEmpty() && models.get(0).isPresent()) {
      GpuModel m = models.get(0).get();
      expected += " (catalog peak for " + m.code() + ": " + m.fp16Tflops() + " TFLOPS)";
    }
    if (benchmark == null) return notMeasured("benchmark", "no benchmark ran", expected);
    var tflops = benchmark.fp16Tflops();
    String label =
        benchmark.name() == null || benchmark.name().isBlank() ? "benchmark" : benchmark.name();
    if (tflops == null) return notMeasured("benchmark", label + " reported no figure", expected);
    if (tflops.isNaN() || tflops.isInfinite() || tflops < 0) {
      return fail("benchmark", label + ": " + tflops + " TFLOPS (not a valid figure)", expected);
    }
    String at = benchmark.measuredAt() == null ? "" : " at " + benchmark.measuredAt();
    return pass("benchmark", label + ": " + tflops + " TFLOPS FP16" + at, expected);
  }

  // --- helpers ----------------------------------------------------------------------------------

  private static final Pattern VERSION = Pattern.compile("^(\\d++(?:\\.\\d++)*+)");

  /**
   * The leading dotted number of a version string ({@code "550.54.15"}, {@code
   * "6.1.40091-a8dbc0c19"} → 6.1.40091), or {@code null} if it does not start with one.
   */
  static long[] parseVersion(String text) {
    if (text == null) return null;
    Matcher m = VERSION.matcher(text.trim());
    if (!m.find()) return null;
    String[] parts = m.group(1).split("\\.");
    long[] out = new long[parts.length];
    for (int i = 0; i < parts.length; i++) {
      if (parts[i].length() > 18)
        return null; // no real version has such a component; refuse rather than overflow
      out[i] = Long.parseLong(parts[i]);
    }
    return out;
  }

  /** Numeric, component by component; missing components count as 0 ({@code "535" == "535.0"}). */
  static int compareVersions(long[] a, long[] b) {
    int n = Math.max(a.length, b.length);
    for (int i = 0; i < n; i++) {
      long x = i < a.length ? a[i] : 0;
      long y = i < b.length ? b[i] : 0;
      if (x != y) return Long.compare(x, y);
    }
    return 0;
  }

  private static long saturatingAdd(long a, long b) {
    long r = a + b;
    return ((a ^ r) & (b ^ r)) < 0 ? Long.MAX_VALUE : r;
  }

  private static String permilleAsPercent(int permille) {
    return permille / 10 + "." + permille % 10 + "%";
  }

  private static String bytes(long n) {
    return n + " bytes (" + (n / (1024L * 1024 * 1024)) + " GiB)";
  }

  private static Check pass(String check, String observed, String expected) {
    return new Check(check, Status.PASS, observed, expected);
  }

  private static Check fail(String check, String observed, String expected) {
    return new Check(check, Status.FAIL, observed, expected);
  }

  private static Check notMeasured(String check, String observed, String expected) {
    return new Check(check, Status.NOT_MEASURED, observed, expected);
  }
}
