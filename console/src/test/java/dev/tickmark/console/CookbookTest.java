package dev.tickmark.console;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Set;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;

class CookbookTest {
  static final String ONE =
      "{\"id\":\"m-1\",\"name\":\"M\",\"family\":\"F\",\"source\":\"https://example.org/m\","
          + "\"total_params_b\":8,\"active_params_b\":8,\"layers\":32,\"kv_heads\":8,"
          + "\"head_dim\":128,\"max_context\":8192}";

  @Test
  void theShippedCookbookHoldsAtLeastThirtyValidModelsOfTheFamiliesAsked() {
    List<Cookbook.Model> models = Cookbook.load();
    assertTrue(models.size() >= 30, models.size() + " models");
    assertEquals(
        models.size(), models.stream().map(Cookbook.Model::id).distinct().count(), "unique ids");
    for (Cookbook.Model m : models) {
      assertTrue(m.totalParamsB() > 0 && m.activeParamsB() > 0, m.id());
      assertTrue(m.activeParamsB() <= m.totalParamsB(), m.id() + ": active ≤ total");
      assertTrue(m.layers() > 0 && m.kvHeads() > 0 && m.headDim() > 0, m.id());
      assertTrue(m.maxContext() >= 2048, m.id());
    }
    Set<String> families = models.stream().map(Cookbook.Model::family).collect(Collectors.toSet());
    assertTrue(
        families.containsAll(Set.of("Qwen3", "Llama 3", "Gemma 3", "Mistral", "DeepSeek", "Phi")),
        families.toString());
    assertTrue(
        models.stream().anyMatch(m -> m.activeParamsB() < m.totalParamsB()),
        "mixture-of-experts models carry their active parameters");
  }

  @Test
  void aPublishedConfigIsCopiedAsIs() {
    Cookbook.Model llama =
        Cookbook.load().stream().filter(m -> m.id().equals("llama-3.1-8b")).findFirst().get();
    assertEquals(32, llama.layers());
    assertEquals(8, llama.kvHeads());
    assertEquals(128, llama.headDim());
    assertEquals(8.03, llama.totalParamsB());
  }

  @Test
  void rejectsActiveAboveTotalDuplicatesUnknownFieldsAndNonPositiveNumbers() {
    assertEquals(1, parse("[" + ONE + "]").size());
    assertRejected(
        "[" + ONE.replace("\"active_params_b\":8", "\"active_params_b\":9") + "]",
        "active_params_b is above");
    assertRejected("[" + ONE + "," + ONE + "]", "duplicate id");
    assertRejected("[" + ONE.replace("\"layers\":32", "\"layers\":0") + "]", "layers");
    assertRejected("[" + ONE.replace("\"kv_heads\":8", "\"kv_heads\":8.5") + "]", "kv_heads");
    assertRejected(
        "[" + ONE.replace("\"total_params_b\":8", "\"total_params_b\":-8") + "]", "total_params_b");
    assertRejected("[" + ONE.replace("\"max_context\"", "\"context\"") + "]", "unknown field");
    assertRejected("[" + ONE.replace("https://", "http://") + "]", "source");
    assertRejected("[]", "non-empty");
  }

  private static List<Cookbook.Model> parse(String models) {
    return Cookbook.parse(("{\"models\":" + models + "}").getBytes(StandardCharsets.UTF_8));
  }

  private static void assertRejected(String models, String why) {
    Cookbook.InvalidCookbook e = assertThrows(Cookbook.InvalidCookbook.class, () -> parse(models));
    assertTrue(e.getMessage().contains(why), e.getMessage());
  }
}
