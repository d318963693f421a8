package dev.tickmark.console;

import java.math.BigInteger;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;

/**
 * The cookbook's and the earnings estimator's arithmetic, formula for formula as {@code
 * tickmark-console/estimator.js} computes it in the browser (the browser test runs both over the
 * whole cookbook and compares). Every figure is an estimate chosen to err upward on what a model
 * needs and costs: usable VRAM is the marketed size in decimal gigabytes (less than the card has),
 * 10 % plus 1 GiB per card of overhead, the whole KV cache counted on every layer, decode at half
 * the memory bandwidth, one sequence at a time.
 */
public final class Estimator {
  public static final double GIB = 1024.0 * 1024.0 * 1024.0;
  public static final double OVERHEAD_FRACTION = 0.10;
  public static final double OVERHEAD_PER_CARD = GIB;
  public static final double BANDWIDTH_DERATE = 0.5;

  /** Tensor parallelism splits heads evenly, so one host runs a model on 1, 2, 4 or 8 cards. */
  public static final List<Integer> CARD_COUNTS = List.of(1, 2, 4, 8);

  public static final long HOURS_PER_MONTH = 730; // 365 × 24 / 12

  private static final Map<String, Double> BYTES_PER_PARAM =
      Map.of("fp16", 2.0, "bf16", 2.0, "fp8", 1.0, "int8", 1.0, "int4", 0.5);
  private static final Map<String, Double> KV_BYTES_PER_ELEMENT = Map.of("fp16", 2.0, "fp8", 1.0);

  /** A catalog card ({@code GET /v1/catalog/gpus}). */
  public record Gpu(String code, String name, int vramGb, int bandwidthGbPerS) {}

  /** A live offer ({@code GET /v1/offers}), its price in micro-euros per GPU-hour. */
  public record Offer(String gpu, String tier, int availableCards, long lowestPriceMicros) {}

  /**
   * The fewest cards of one model that hold the model; the price is null without a live on-demand
   * offer of that many cards.
   */
  public record Option(
      String gpu,
      int cards,
      double needBytes,
      double tokensPerSecond,
      Long pricePerHourMicros,
      Long perMillionTokensMicros) {}

  /** Weights and KV cache in bytes; every card that holds it, cheapest first; the cheapest. */
  public record Estimate(double weightsBytes, double kvBytes, List<Option> fits, Option cheapest) {}

  private Estimator() {}

  public static double bytesPerParam(String precision) {
    Double b = BYTES_PER_PARAM.get(precision);
    if (b == null) throw new IllegalArgumentException("unknown precision " + precision);
    return b;
  }

  public static double kvBytesPerElement(String kvPrecision) {
    Double b = KV_BYTES_PER_ELEMENT.get(kvPrecision);
    if (b == null) throw new IllegalArgumentException("unknown KV cache precision " + kvPrecision);
    return b;
  }

  public static double weightsBytes(Cookbook.Model m, String precision) {
    return m.totalParamsB() * 1e9 * bytesPerParam(precision);
  }

  /** A key and a value per layer, KV head and token of the context, for one sequence. */
  public static double kvBytes(Cookbook.Model m, int context, String kvPrecision) {
    return 2.0 * m.layers() * m.kvHeads() * m.headDim() * context * kvBytesPerElement(kvPrecision);
  }

  public static double needBytes(double weights, double kv, int cards) {
    return (weights + kv) * (1 + OVERHEAD_FRACTION) + cards * OVERHEAD_PER_CARD;
  }

  public static boolean holds(Gpu gpu, int cards, double needBytes) {
    return needBytes <= cards * (gpu.vramGb() * 1e9);
  }

  /**
   * Decoding is bandwidth-bound: each token reads the active weights and the KV cache once, at half
   * the cards' combined bandwidth.
   */
  public static double tokensPerSecond(
      Cookbook.Model m, String precision, double kvBytes, Gpu gpu, int cards) {
    double perToken = m.activeParamsB() * 1e9 * bytesPerParam(precision) + kvBytes;
    return cards * (gpu.bandwidthGbPerS() * 1e9) * BANDWIDTH_DERATE / perToken;
  }

  /** Micro-euros per million tokens at this hourly price, rounded up. */
  public static long perMillionTokensMicros(long pricePerHourMicros, double tokensPerSecond) {
    return (long) Math.ceil(pricePerHourMicros * 1e6 / (tokensPerSecond * 3600));
  }

  public static Estimate estimate(
      Cookbook.Model m,
      String precision,
      String kvPrecision,
      int context,
      List<Gpu> gpus,
      List<Offer> offers) {
    double weights = weightsBytes(m, precision);
    double kv = kvBytes(m, context, kvPrecision);
    List<Option> fits = new ArrayList<>();
    for (Gpu gpu : gpus) {
      for (int cards : CARD_COUNTS) {
        double need = needBytes(weights, kv, cards);
        if (!holds(gpu, cards, need)) continue;
        double tps = tokensPerSecond(m, precision, kv, gpu, cards);
        Long price = lowestPrice(offers, gpu.code(), cards);
        Long hourly = price == null ? null : price * cards;
        fits.add(
            new Option(
                gpu.code(),
                cards,
                need,
                tps,
                hourly,
                hourly == null ? null : perMillionTokensMicros(hourly, tps)));
        break;
      }
    }
    fits.sort(CHEAPEST_FIRST);
    Option cheapest =
        fits.isEmpty() || fits.get(0).pricePerHourMicros() == null ? null : fits.get(0);
    return new Estimate(weights, kv, List.copyOf(fits), cheapest);
  }

  /**
   * Priced options by price, then fewer cards, then code; unpriced ones after, fewer cards first.
   */
  static final Comparator<Option> CHEAPEST_FIRST =
      Comparator.comparing((Option o) -> o.pricePerHourMicros() == null ? 1 : 0)
          .thenComparingLong(o -> o.pricePerHourMicros() == null ? 0 : o.pricePerHourMicros())
          .thenComparingInt(Option::cards)
          .thenComparing(Option::gpu);

  /** The lowest on-demand price of this card among offers with at least {@code cards} free. */
  static Long lowestPrice(List<Offer> offers, String gpu, int cards) {
    Long best = null;
    for (Offer o : offers) {
      if (!o.gpu().equals(gpu) || !"on_demand".equals(o.tier()) || o.availableCards() < cards)
        continue;
      if (best == null || o.lowestPriceMicros() < best) best = o.lowestPriceMicros();
    }
    return best;
  }

  // ---- what a job costs, and what a provider takes home (integer micro-euros, as billed)

  /** Billed by the second, as the engine meters: floor(price × cards × seconds / 3600). */
  public static long perSecondCostMicros(long priceMicros, int cards, long seconds) {
    return big(priceMicros)
        .multiply(big(cards))
        .multiply(big(seconds))
        .divide(big(3600))
        .longValueExact();
  }

  /** The same job billed per started hour. */
  public static long perStartedHourCostMicros(long priceMicros, int cards, long seconds) {
    long hours = (seconds + 3599) / 3600;
    return big(priceMicros).multiply(big(cards)).multiply(big(hours)).longValueExact();
  }

  /**
   * A month (730 h) of cards rented {@code utilisationPercent} of the time at this price, less the
   * platform's fee in basis points, rounded down.
   */
  public static long monthlyTakeHomeMicros(
      int cards, long priceMicros, int utilisationPercent, int feeBps) {
    return big(priceMicros)
        .multiply(big(cards))
        .multiply(big(HOURS_PER_MONTH))
        .multiply(big(utilisationPercent))
        .multiply(big(10000 - feeBps))
        .divide(big(100L * 10000))
        .longValueExact();
  }

  private static BigInteger big(long v) {
    return BigInteger.valueOf(v);
  }
}
