package dev.tickmark.engine.catalog;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.tickmark.engine.catalog.Catalog.GpuModel;
import dev.tickmark.engine.catalog.Catalog.InvalidCatalog;
import dev.tickmark.engine.catalog.Catalog.Region;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.MethodSource;

class CatalogTest {

  private static Catalog resource(String file) {
    String path = "/catalog/" + file;
    try (InputStream in = CatalogTest.class.getResourceAsStream(path)) {
      assertNotNull(in, "test resource " + path + " is missing");
      return Catalog.parse(in, "catalog/" + file);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  private static Catalog text(String json) {
    return Catalog.parse(
        new ByteArrayInputStream(json.getBytes(StandardCharsets.UTF_8)), "inline.json");
  }

  // --- the shipped catalog ----------------------------------------------------------------------

  @Test
  void loadsTheShippedCatalogWithEightGpusAndSixRegions() {
    Catalog catalog = Catalog.load();
    assertEquals(
        List.of(
            "h200-141gb",
            "h100-80gb",
            "a100-80gb",
            "a100-40gb",
            "l40s-48gb",
            "rtx4090-24gb",
            "a10-24gb",
            "rx7900xt-20gb"),
        catalog.gpus().stream().map(GpuModel::code).toList());
    assertEquals(
        List.of("eu-nl", "eu-de", "eu-fr", "us-east", "us-west", "ap-sg"),
        catalog.regions().stream().map(Region::code).toList());
    assertSame(catalog, Catalog.load(), "the shipped catalog is parsed once and shared");
    for (Region r : catalog.regions()) {
      assertFalse(r.name().isBlank(), r.code());
      assertFalse(r.location().isBlank(), r.code());
    }
  }

  @ParameterizedTest(name = "{0}: {1} {2}, {4} MiB, {5}, {6} GB/s, {7} TFLOPS")
  @CsvSource({
    "h200-141gb,    nvidia, Hopper,       141, 143771, HBM3e,  4800, 989",
    "h100-80gb,     nvidia, Hopper,        80,  81559, HBM3,   3350, 989",
    "a100-80gb,     nvidia, Ampere,        80,  81920, HBM2e,  2039, 312",
    "a100-40gb,     nvidia, Ampere,        40,  40960, HBM2,   1555, 312",
    "l40s-48gb,     nvidia, Ada Lovelace,  48,  46068, GDDR6,   864, 362",
    "rtx4090-24gb,  nvidia, Ada Lovelace,  24,  24564, GDDR6X, 1008, 165",
    "a10-24gb,      nvidia, Ampere,        24,  23028, GDDR6,   600, 125",
    "rx7900xt-20gb, amd,    RDNA 3,        20,  20464, GDDR6,   800, 103",
  })
  void shippedModelsCarryTheirPublicSpecs(
      String code,
      String vendor,
      String architecture,
      int vramGb,
      long vramMib,
      String memoryType,
      int bandwidth,
      int fp16) {
    GpuModel m = Catalog.load().gpu(code).orElseThrow();
    assertEquals(vendor, m.vendor());
    assertEquals(architecture, m.architecture());
    assertEquals(vramGb, m.vramGb());
    assertEquals(vramMib, m.vramMib());
    assertEquals(memoryType, m.memoryType());
    assertEquals(bandwidth, m.bandwidthGbPerS());
    assertEquals(fp16, m.fp16Tflops());
    assertFalse(m.smiNames().isEmpty());
  }

  @ParameterizedTest(name = "\"{0}\" -> {1}")
  @CsvSource(
      nullValues = "NONE",
      value = {
        "NVIDIA H200,                h200-141gb",
        "NVIDIA H100 80GB HBM3,      h100-80gb",
        "NVIDIA H100 PCIe,           h100-80gb",
        "NVIDIA A100-SXM4-80GB,      a100-80gb",
        "NVIDIA A100 80GB PCIe,      a100-80gb",
        "NVIDIA A100-SXM4-40GB,      a100-40gb",
        "NVIDIA A100-PCIE-40GB,      a100-40gb",
        "NVIDIA L40S,                l40s-48gb",
        "NVIDIA GeForce RTX 4090,    rtx4090-24gb",
        "NVIDIA A10,                 a10-24gb",
        "Radeon RX 7900 XT,          rx7900xt-20gb",
        "AMD Radeon RX 7900 XT,      rx7900xt-20gb",
        "'  nvidia h100 80gb hbm3 ', h100-80gb",
        "NVIDIA GEFORCE RTX 4090,    rtx4090-24gb",
        "NVIDIA H100,                NONE",
        "NVIDIA H100 NVL,            NONE",
        "NVIDIA A100,                NONE",
        "NVIDIA A10G,                NONE",
        "Radeon RX 7900 XTX,         NONE",
        "NVIDIA GeForce RTX 4080,    NONE",
        "'',                         NONE",
        "NONE,                       NONE",
      })
  void bySmiNameMatchesExactlyIgnoringCaseAndSurroundingSpaces(
      String reported, String expectedCode) {
    assertEquals(expectedCode, Catalog.load().bySmiName(reported).map(GpuModel::code).orElse(null));
  }

  @Test
  void looksUpGpusAndRegionsByCode() {
    Catalog catalog = Catalog.load();
    assertEquals("NVIDIA H100 80 GB", catalog.gpu("h100-80gb").orElseThrow().name());
    assertEquals("amd", catalog.gpu("rx7900xt-20gb").orElseThrow().vendor());
    assertTrue(catalog.gpu("H100-80GB").isEmpty(), "codes are exact");
    assertTrue(catalog.gpu("h100").isEmpty());
    assertTrue(catalog.gpu(null).isEmpty());
    assertEquals("Singapore", catalog.region("ap-sg").orElseThrow().location());
    assertTrue(catalog.region("eu-xx").isEmpty());
    assertTrue(catalog.region(null).isEmpty());
  }

  @Test
  void smiNamesAreUniqueAcrossTheShippedCatalog() {
    Set<String> seen = new HashSet<>();
    for (GpuModel m : Catalog.load().gpus()) {
      for (String n : m.smiNames()) assertTrue(seen.add(n.toLowerCase()), n);
    }
  }

  @Test
  void theCatalogIsReadOnly() {
    Catalog catalog = Catalog.load();
    assertThrows(UnsupportedOperationException.class, () -> catalog.gpus().clear());
    assertThrows(UnsupportedOperationException.class, () -> catalog.regions().clear());
    assertThrows(
        UnsupportedOperationException.class, () -> catalog.gpus().get(0).smiNames().clear());
  }

  @Test
  void parsesAValidFile() {
    Catalog catalog = resource("valid-minimal.json");
    assertEquals(2, catalog.gpus().size());
    assertEquals(1, catalog.regions().size());
    assertEquals("a10-24gb", catalog.bySmiName("NVIDIA A10").orElseThrow().code());
    assertEquals("catalog/valid-minimal.json", catalog.source());
  }

  // --- broken files
  // -------------------------------------------------------------------------------

  static Stream<Arguments> brokenFiles() {
    return Stream.of(
        Arguments.of("malformed.json", List.of("malformed JSON at line 3", "was expecting comma")),
        Arguments.of(
            "duplicate-key.json", List.of("malformed JSON at line", "Duplicate field 'code'")),
        Arguments.of("trailing-garbage.json", List.of("malformed JSON at line")),
        Arguments.of("empty.json", List.of(": is empty")),
        Arguments.of(
            "not-an-object.json", List.of("top level must be a JSON object", "got an array")),
        Arguments.of(
            "unknown-top-level-field.json", List.of("top level: unknown field \"version\"")),
        Arguments.of("no-gpus.json", List.of("\"gpus\" is empty")),
        Arguments.of("missing-regions.json", List.of("missing top-level field \"regions\"")),
        Arguments.of(
            "regions-not-array.json", List.of("\"regions\" must be an array, got an object")),
        Arguments.of(
            "duplicate-gpu-code.json",
            List.of(
                "gpus[1] (\"h100-80gb\"): duplicate code \"h100-80gb\", already used by gpus[0]")),
        Arguments.of(
            "missing-field.json",
            List.of("gpus[0] (\"h100-80gb\"): missing field \"memory_type\"")),
        Arguments.of("missing-code.json", List.of("gpus[0]: missing field \"code\"")),
        Arguments.of(
            "negative-vram.json",
            List.of("gpus[1] (\"a10-24gb\"): \"vram_mib\" must be a positive integer, got -23028")),
        Arguments.of(
            "zero-bandwidth.json",
            List.of(
                "gpus[0] (\"h100-80gb\"): \"bandwidth_gb_per_s\" must be a positive integer, got 0")),
        Arguments.of(
            "fractional-tflops.json",
            List.of("\"fp16_tflops\" must be a positive integer, got the number 989.5")),
        Arguments.of(
            "string-number.json",
            List.of("\"vram_gb\" must be a positive integer, got the string \"80\"")),
        Arguments.of(
            "vram-mismatch.json",
            List.of("\"vram_mib\" 8155 does not fit \"vram_gb\" 80", "81920 MiB")),
        Arguments.of(
            "unknown-vendor.json",
            List.of(
                "gpus[0] (\"h100-80gb\"): \"vendor\" must be one of \"amd\", \"nvidia\", got \"intel\"")),
        Arguments.of(
            "uppercase-vendor.json",
            List.of("\"vendor\" must be one of \"amd\", \"nvidia\", got \"NVIDIA\"")),
        Arguments.of(
            "bad-code.json",
            List.of(
                "gpus[0]: \"code\" \"H100_80GB\" must be lowercase letters, digits and dashes")),
        Arguments.of(
            "empty-smi-names.json", List.of("gpus[0] (\"h100-80gb\"): \"smi_names\" is empty")),
        Arguments.of("blank-smi-name.json", List.of("\"smi_names\"[1] must be a non-empty string")),
        Arguments.of(
            "duplicate-smi-name.json",
            List.of(
                "gpus[1] (\"h100-80gb\"): smi name \"nvidia a10\" is already claimed by gpus[0] (\"a10-24gb\")")),
        Arguments.of(
            "smi-name-listed-twice.json",
            List.of(
                "gpus[0] (\"h100-80gb\"): \"smi_names\" lists \"nvidia h100 80gb hbm3\" twice")),
        Arguments.of(
            "unknown-field.json",
            List.of("gpus[0] (\"h100-80gb\"): unknown field \"vram_gib\"", "\"vram_mib\"")),
        Arguments.of(
            "duplicate-region-code.json",
            List.of(
                "regions[1] (\"eu-nl\"): duplicate code \"eu-nl\", already used by regions[0]")),
        Arguments.of(
            "region-missing-location.json",
            List.of("regions[1] (\"eu-de\"): missing field \"location\"")));
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("brokenFiles")
  void aBrokenFileStopsWithAMessageNamingFileEntryAndField(String file, List<String> fragments) {
    InvalidCatalog e = assertThrows(InvalidCatalog.class, () -> resource(file));
    assertTrue(
        e.getMessage().startsWith("catalog/" + file + ": "), "names the file: " + e.getMessage());
    for (String fragment : fragments) {
      assertTrue(
          e.getMessage().contains(fragment), "expected \"" + fragment + "\" in: " + e.getMessage());
    }
    assertTrue(e instanceof IllegalStateException);
  }

  @Test
  void aNullSourceIsNamedGenerically() {
    InvalidCatalog e =
        assertThrows(
            InvalidCatalog.class, () -> Catalog.parse(new ByteArrayInputStream(new byte[0]), null));
    assertEquals("catalog: is empty", e.getMessage());
  }

  @Test
  void regionsNeedAtLeastOneEntry() {
    String json =
        "{\"gpus\":[{\"code\":\"a10-24gb\",\"name\":\"A10\",\"vendor\":\"nvidia\",\"architecture\":\"Ampere\","
            + "\"vram_gb\":24,\"vram_mib\":23028,\"memory_type\":\"GDDR6\",\"bandwidth_gb_per_s\":600,\"fp16_tflops\":125,"
            + "\"smi_names\":[\"NVIDIA A10\"]}],\"regions\":[]}";
    InvalidCatalog e = assertThrows(InvalidCatalog.class, () -> text(json));
    assertEquals(
        "inline.json: \"regions\" is empty; the catalog needs at least one entry", e.getMessage());
  }
}
