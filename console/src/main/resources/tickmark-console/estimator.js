// The cookbook's and the earnings estimator's arithmetic, formula for formula as
// dev.tickmark.console.Estimator computes it in Java (ConsoleBrowserTest runs both over the whole
// cookbook and compares). Every figure errs upward on what a model needs and costs: usable VRAM is
// the marketed size in decimal gigabytes, 10 % plus 1 GiB per card of overhead, the whole KV cache on
// every layer, decode at half the memory bandwidth, one sequence at a time. Pure: no DOM, no fetch.

export const GIB = 1024.0 * 1024.0 * 1024.0;
export const OVERHEAD_FRACTION = 0.1;
export const OVERHEAD_PER_CARD = GIB;
export const BANDWIDTH_DERATE = 0.5;
// Tensor parallelism splits heads evenly, so one host runs a model on 1, 2, 4 or 8 cards.
export const CARD_COUNTS = [1, 2, 4, 8];
export const HOURS_PER_MONTH = 730n; // 365 × 24 / 12

const BYTES_PER_PARAM = { fp16: 2.0, bf16: 2.0, fp8: 1.0, int8: 1.0, int4: 0.5 };
const KV_BYTES_PER_ELEMENT = { fp16: 2.0, fp8: 1.0 };

export const PRECISIONS = Object.keys(BYTES_PER_PARAM);
export const KV_PRECISIONS = Object.keys(KV_BYTES_PER_ELEMENT);

export function bytesPerParam(precision) {
  const b = BYTES_PER_PARAM[precision];
  if (b === undefined) throw new Error(`unknown precision ${precision}`);
  return b;
}

export function kvBytesPerElement(kvPrecision) {
  const b = KV_BYTES_PER_ELEMENT[kvPrecision];
  if (b === undefined) throw new Error(`unknown KV cache precision ${kvPrecision}`);
  return b;
}

export function weightsBytes(m, precision) {
  return m.total_params_b * 1e9 * bytesPerParam(precision);
}

// A key and a value per layer, KV head and token of the context, for one sequence.
export function kvBytes(m, context, kvPrecision) {
  return 2.0 * m.layers * m.kv_heads * m.head_dim * context * kvBytesPerElement(kvPrecision);
}

export function needBytes(weights, kv, cards) {
  return (weights + kv) * (1 + OVERHEAD_FRACTION) + cards * OVERHEAD_PER_CARD;
}

export function holds(gpu, cards, need) {
  return need <= cards * (gpu.vram_gb * 1e9);
}

// Decoding is bandwidth-bound: each token reads the active weights and the KV cache once, at half
// the cards' combined bandwidth.
export function tokensPerSecond(m, precision, kv, gpu, cards) {
  const perToken = m.active_params_b * 1e9 * bytesPerParam(precision) + kv;
  return (cards * (gpu.bandwidth_gb_per_s * 1e9) * BANDWIDTH_DERATE) / perToken;
}

// Micro-euros per million tokens at this hourly price (micro-euros), rounded up.
export function perMillionTokensMicros(pricePerHourMicros, tps) {
  return Math.ceil((pricePerHourMicros * 1e6) / (tps * 3600));
}

// The lowest on-demand price (micro-euros per GPU-hour) of this card among offers with at least
// `cards` free, or null.
export function lowestPrice(offers, gpu, cards) {
  let best = null;
  for (const o of offers) {
    if (o.gpu !== gpu || o.tier !== "on_demand" || o.available_cards < cards) continue;
    const price = Number(microsOf(o.lowest_price_per_gpu_hour));
    if (best === null || price < best) best = price;
  }
  return best;
}

// gpus: GET /v1/catalog/gpus entries; offers: GET /v1/offers entries.
export function estimate(m, precision, kvPrecision, context, gpus, offers) {
  const weights = weightsBytes(m, precision);
  const kv = kvBytes(m, context, kvPrecision);
  const fits = [];
  for (const gpu of gpus) {
    for (const cards of CARD_COUNTS) {
      const need = needBytes(weights, kv, cards);
      if (!holds(gpu, cards, need)) continue;
      const tps = tokensPerSecond(m, precision, kv, gpu, cards);
      const price = lowestPrice(offers, gpu.code, cards);
      const hourly = price === null ? null : price * cards;
      fits.push({
        gpu: gpu.code,
        cards,
        needBytes: need,
        tokensPerSecond: tps,
        pricePerHourMicros: hourly,
        perMillionTokensMicros: hourly === null ? null : perMillionTokensMicros(hourly, tps),
      });
      break;
    }
  }
  fits.sort(cheapestFirst);
  const cheapest = fits.length === 0 || fits[0].pricePerHourMicros === null ? null : fits[0];
  return { weightsBytes: weights, kvBytes: kv, fits, cheapest };
}

// Priced options by price, then fewer cards, then code; unpriced ones after, fewer cards first.
function cheapestFirst(a, b) {
  const ua = a.pricePerHourMicros === null ? 1 : 0;
  const ub = b.pricePerHourMicros === null ? 1 : 0;
  if (ua !== ub) return ua - ub;
  const pa = a.pricePerHourMicros ?? 0;
  const pb = b.pricePerHourMicros ?? 0;
  if (pa !== pb) return pa < pb ? -1 : 1;
  if (a.cards !== b.cards) return a.cards - b.cards;
  return a.gpu < b.gpu ? -1 : a.gpu > b.gpu ? 1 : 0;
}

// ---- what a job costs, and what a provider takes home (BigInt micro-euros, as billed)

// "2.49" or "2.490000" → 2490000n; null for anything that is not a non-negative amount with at most
// six decimals.
export function microsOf(euros) {
  const m = /^(\d{1,12})(?:\.(\d{1,6}))?$/.exec(String(euros).trim());
  if (!m) return null;
  return BigInt(m[1]) * 1000000n + BigInt((m[2] ?? "").padEnd(6, "0"));
}

// 2490000n → "2.490000"
export function eurosOf(micros) {
  const v = BigInt(micros);
  const sign = v < 0n ? "-" : "";
  const a = v < 0n ? -v : v;
  return `${sign}${a / 1000000n}.${String(a % 1000000n).padStart(6, "0")}`;
}

// Billed by the second, as the engine meters: floor(price × cards × seconds / 3600).
export function perSecondCostMicros(priceMicros, cards, seconds) {
  return (BigInt(priceMicros) * BigInt(cards) * BigInt(seconds)) / 3600n;
}

// The same job billed per started hour.
export function perStartedHourCostMicros(priceMicros, cards, seconds) {
  const hours = (BigInt(seconds) + 3599n) / 3600n;
  return BigInt(priceMicros) * BigInt(cards) * hours;
}

// A month (730 h) of cards rented utilisationPercent of the time at this price, less the platform's
// fee in basis points, rounded down.
export function monthlyTakeHomeMicros(cards, priceMicros, utilisationPercent, feeBps) {
  return (
    (BigInt(priceMicros) *
      BigInt(cards) *
      HOURS_PER_MONTH *
      BigInt(utilisationPercent) *
      BigInt(10000 - feeBps)) /
    (100n * 10000n)
  );
}
