package dev.tickmark.console;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.InputStream;
import java.math.BigDecimal;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.function.Function;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;

/** The estimator against the hand-worked table in {@code estimator-known-values.json}. */
class EstimatorTest {
  static final JsonNode TABLE = table();
  static final List<Estimator.Gpu> GPUS = gpus(TABLE);
  static final List<Estimator.Offer> OFFERS = offers(TABLE);
  static final Map<String, Cookbook.Model> MODELS =
      Cookbook.load().stream().collect(Collectors.toMap(Cookbook.Model::id, Function.identity()));

  @Test
  void everyKnownCaseNeedsTheMemoryAndPicksTheCardWorkedByHand() {
    for (JsonNode c : TABLE.get("cases")) {
      String what = c.get("what").asText();
      Cookbook.Model model = MODELS.get(c.get("model").asText());
      assertNotNull(model, what);
      Estimator.Estimate e =
          Estimator.estimate(
              model,
              c.get("precision").asText(),
              c.get("kv").asText(),
              c.get("context").asInt(),
              GPUS,
              OFFERS);
      assertClose(c.get("weights_gib").asDouble(), e.weightsBytes() / Estimator.GIB, what);
      assertClose(c.get("kv_gib").asDouble(), e.kvBytes() / Estimator.GIB, what);
      assertClose(
          c.get("need_gib_one_card").asDouble(),
          Estimator.needBytes(e.weightsBytes(), e.kvBytes(), 1) / Estimator.GIB,
          what);
      JsonNode cheapest = c.get("cheapest");
      if (cheapest.isNull()) {
        assertNull(e.cheapest(), what);
        JsonNode smallest = c.get("smallest_fit");
        if (smallest.isNull()) assertTrue(e.fits().isEmpty(), what + ": " + e.fits());
        else {
          assertEquals(1, e.fits().size(), what + ": " + e.fits());
          assertEquals(smallest.get("gpu").asText(), e.fits().get(0).gpu(), what);
          assertEquals(smallest.get("cards").asInt(), e.fits().get(0).cards(), what);
          assertNull(e.fits().get(0).pricePerHourMicros(), what);
        }
      } else {
        Estimator.Option o = e.cheapest();
        assertNotNull(o, what);
        assertEquals(cheapest.get("gpu").asText(), o.gpu(), what);
        assertEquals(cheapest.get("cards").asInt(), o.cards(), what);
        assertEquals(micros(cheapest.get("price_per_hour").asText()), o.pricePerHourMicros(), what);
        assertClose(cheapest.get("tokens_per_second").asDouble(), o.tokensPerSecond(), what);
        assertClose(
            cheapest.get("per_million_tokens").asDouble(), o.perMillionTokensMicros() / 1e6, what);
      }
    }
  }

  @Test
  void perSecondAndPerStartedHourCostsAreTheKnownAmounts() {
    for (JsonNode j : TABLE.get("jobs")) {
      long price = micros(j.get("price").asText());
      int cards = j.get("cards").asInt();
      long seconds = j.get("seconds").asLong();
      assertEquals(
          micros(j.get("per_second").asText()),
          Estimator.perSecondCostMicros(price, cards, seconds),
          j.toString());
      assertEquals(
          micros(j.get("per_started_hour").asText()),
          Estimator.perStartedHourCostMicros(price, cards, seconds),
          j.toString());
    }
  }

  @Test
  void monthlyTakeHomeIsTheKnownAmount() {
    for (JsonNode j : TABLE.get("earnings")) {
      assertEquals(
          micros(j.get("monthly").asText()),
          Estimator.monthlyTakeHomeMicros(
              j.get("cards").asInt(),
              micros(j.get("price").asText()),
              j.get("utilisation_percent").asInt(),
              j.get("fee_bps").asInt()),
          j.toString());
    }
  }

  @Test
  void aCardOfferedWithTooFewFreeCardsOrOnlyAsSpotHasNoPrice() {
    List<Estimator.Offer> offers =
        List.of(
            new Estimator.Offer("h100-80gb", "on_demand", 1, 2_000_000),
            new Estimator.Offer("h100-80gb", "spot", 8, 100_000));
    assertEquals(2_000_000L, Estimator.lowestPrice(offers, "h100-80gb", 1));
    assertNull(Estimator.lowestPrice(offers, "h100-80gb", 2));
    assertNull(Estimator.lowestPrice(offers, "a100-80gb", 1));
  }

  @Test
  void moreContextNeverNeedsLessAndNeverDecodesFaster() {
    Cookbook.Model m = MODELS.get("qwen3-32b");
    Estimator.Gpu h100 = GPUS.get(1);
    double lastNeed = 0;
    double lastTps = Double.MAX_VALUE;
    for (int context = 1024; context <= 131072; context *= 2) {
      double kv = Estimator.kvBytes(m, context, "fp16");
      double need = Estimator.needBytes(Estimator.weightsBytes(m, "fp8"), kv, 1);
      double tps = Estimator.tokensPerSecond(m, "fp8", kv, h100, 1);
      assertTrue(need > lastNeed && tps < lastTps, "context " + context);
      lastNeed = need;
      lastTps = tps;
    }
  }

  static void assertClose(double expected, double actual, String what) {
    double tolerance = Math.max(0.01, Math.abs(expected) * 0.005);
    assertTrue(
        Math.abs(expected - actual) <= tolerance,
        what + ": expected about " + expected + " but was " + actual);
  }

  static long micros(String euros) {
    return new BigDecimal(euros).movePointRight(6).longValueExact();
  }

  private static JsonNode table() {
    try (InputStream in =
        EstimatorTest.class.getClassLoader().getResourceAsStream("estimator-known-values.json")) {
      return new ObjectMapper().readTree(in);
    } catch (IOException e) {
      throw new IllegalStateException(e);
    }
  }

  private static List<Estimator.Gpu> gpus(JsonNode table) {
    List<Estimator.Gpu> out = new ArrayList<>();
    for (JsonNode g : table.get("gpus"))
      out.add(
          new Estimator.Gpu(
              g.get("code").asText(),
              g.get("name").asText(),
              g.get("vram_gb").asInt(),
              g.get("bandwidth_gb_per_s").asInt()));
    return out;
  }

  private static List<Estimator.Offer> offers(JsonNode table) {
    List<Estimator.Offer> out = new ArrayList<>();
    for (JsonNode o : table.get("offers"))
      out.add(
          new Estimator.Offer(
              o.get("gpu").asText(),
              o.get("tier").asText(),
              o.get("available_cards").asInt(),
              micros(o.get("lowest_price_per_gpu_hour").asText())));
    return out;
  }
}
