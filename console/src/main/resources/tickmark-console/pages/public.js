// Public pages: live offers, the cookbook, the job cost (per second against per started hour) and the
// provider's earnings estimator. No key needed.

import { get } from "../api.js";
import { h, add, fill, field, input, select, table, facts, errorBox, showError, euros } from "../ui.js";
import * as E from "../estimator.js";

export function title(text) {
  return h("h1", { tabindex: "-1" }, text);
}

async function market(signal) {
  const [catalog, offers] = await Promise.all([
    get("/v1/catalog/gpus", { auth: null, signal }),
    get("/v1/offers", { auth: null, signal }),
  ]);
  return { gpus: catalog.gpus, offers: offers.offers };
}

export async function offers(view, { signal }) {
  document.title = "Offers — Tickmark";
  const { gpus, offers } = await market(signal);
  const names = Object.fromEntries(gpus.map((g) => [g.code, g.name]));
  add(view, 
    title("Live offers"),
    h("p", {}, "Capacity you can rent now, billed by the second. Prices are per GPU-hour, in euros."),
    offers.length === 0
      ? h("p", { id: "no-offers" }, "No capacity is listed right now.")
      : table(
          ["GPU", "Region", "Tier", "Free cards", "From (per GPU-hour)", "Hosts"],
          offers.map((o) => [
            names[o.gpu] ?? o.gpu,
            o.region,
            o.tier === "on_demand" ? "on demand" : o.tier,
            String(o.available_cards),
            euros(o.lowest_price_per_gpu_hour),
            `${o.hosts}${o.simulated ? " (simulated)" : ""}`,
          ]),
          "Offers",
        ),
  );
  view.querySelector("table")?.setAttribute("id", "offers");
}

function gib(bytes) {
  return `${(bytes / E.GIB).toFixed(2)} GiB`;
}

function centsUp(micros) {
  return `€${(Math.ceil(Number(micros) / 10000) / 100).toFixed(2)}`;
}

export async function cookbook(view, { signal }) {
  document.title = "Cookbook — Tickmark";
  const [{ gpus, offers }, book] = await Promise.all([
    market(signal),
    fetch("/console/cookbook.json", { signal }).then((r) => r.json()),
  ]);
  const models = book.models;
  const families = [...new Set(models.map((m) => m.family))];
  const model = h(
    "select",
    { name: "model" },
    families.map((f) =>
      h("optgroup", { label: f }, models.filter((m) => m.family === f).map((m) => h("option", { value: m.id }, m.name))),
    ),
  );
  model.value = "llama-3.1-8b";
  const precision = select("precision", E.PRECISIONS.map((p) => [p, p]), "fp16");
  const kv = select("kv", E.KV_PRECISIONS.map((p) => [p, p]), "fp16");
  const context = input({ type: "number", name: "context", min: "1", step: "1", value: "8192", required: true });
  const out = h("div", { id: "estimate", "aria-live": "polite" });
  const box = errorBox();
  const names = Object.fromEntries(gpus.map((g) => [g.code, g.name]));

  function draw() {
    const m = models.find((x) => x.id === model.value);
    const ctx = Number(context.value);
    if (!m || !Number.isInteger(ctx) || ctx < 1) {
      showError(box, "the context must be a whole number of tokens");
      return;
    }
    box.hidden = true;
    const e = E.estimate(m, precision.value, kv.value, ctx, gpus, offers);
    const need1 = E.needBytes(e.weightsBytes, e.kvBytes, 1);
    fill(out, 
      facts([
        ["Parameters", `${m.total_params_b} B total, ${m.active_params_b} B active per token`],
        ["Weights", gib(e.weightsBytes)],
        ["KV cache (one sequence)", gib(e.kvBytes)],
        ["Needed on one card", `${gib(need1)} (weights + KV cache, +10 % +1 GiB per card)`],
        [
          "Cheapest that holds it",
          e.cheapest
            ? h(
                "span",
                { id: "cheapest" },
                `${e.cheapest.cards} × ${names[e.cheapest.gpu] ?? e.cheapest.gpu}: ${centsUp(e.cheapest.pricePerHourMicros)}/hour, ` +
                  `about ${e.cheapest.tokensPerSecond.toFixed(1)} tokens/s, ${centsUp(e.cheapest.perMillionTokensMicros)} per million tokens`,
              )
            : h("span", { id: "cheapest" }, e.fits.length ? "no live offer holds it now" : "no card count on one host holds it"),
        ],
      ]),
      ctx > m.max_context ? h("p", { class: "warning" }, `${m.name} supports at most ${m.max_context} tokens of context.`) : null,
      m.note ? h("p", { class: "hint" }, m.note) : null,
      e.fits.length
        ? table(
            ["Card", "Cards", "Needed", "Tokens/s (about)", "Per hour", "Per million tokens"],
            e.fits.map((f) => [
              names[f.gpu] ?? f.gpu,
              String(f.cards),
              gib(f.needBytes),
              f.tokensPerSecond.toFixed(1),
              f.pricePerHourMicros === null ? "no live offer" : centsUp(f.pricePerHourMicros),
              f.perMillionTokensMicros === null ? "—" : centsUp(f.perMillionTokensMicros),
            ]),
            "Every card that holds it, fewest cards of each, cheapest first",
          )
        : null,
    );
  }

  const form = h(
    "form",
    { id: "cookbook-form", onsubmit: (ev) => (ev.preventDefault(), draw()) },
    field("Model", model),
    field("Weights precision", precision, "fp16/bf16: 2 bytes per parameter, fp8/int8: 1, int4: 0.5"),
    field("KV cache precision", kv),
    field("Context (tokens)", context),
    h("button", { type: "submit" }, "Estimate"),
  );
  for (const c of [model, precision, kv, context]) c.addEventListener("change", draw);
  add(view, 
    title("Cookbook: what does it take to run a model?"),
    h(
      "p",
      { class: "caveat", id: "caveat" },
      "Estimates that err upward: usable memory is the card's marketed size in decimal gigabytes, overhead is 10 % plus 1 GiB per card, " +
        "every layer's KV cache is counted at the full context, decoding runs at half the memory bandwidth and serves one sequence at a time. " +
        "Prices are the lowest live on-demand offers with that many free cards (they must also be on one host).",
    ),
    form,
    box,
    out,
    h("h2", {}, "The models"),
    table(
      ["Model", "Parameters (B)", "Active (B)", "Layers", "KV heads", "Head size", "Max context", "Config"],
      models.map((m) => [
        m.name,
        String(m.total_params_b),
        String(m.active_params_b),
        String(m.layers),
        String(m.kv_heads),
        String(m.head_dim),
        String(m.max_context),
        h("a", { href: m.source, rel: "noreferrer noopener", target: "_blank" }, "source"),
      ]),
      "The cookbook (from each model's published config)",
    ),
  );
  draw();
}

export async function jobCost(view, { signal }) {
  document.title = "Job cost — Tickmark";
  const { offers } = await market(signal);
  const lowest = offers
    .filter((o) => o.tier === "on_demand")
    .map((o) => o.lowest_price_per_gpu_hour)
    .sort((a, b) => (E.microsOf(a) < E.microsOf(b) ? -1 : 1))[0];
  const price = input({ name: "price", inputmode: "decimal", value: lowest ? lowest.replace(/0+$/, "").replace(/\.$/, "") : "2.49", required: true });
  const cards = input({ type: "number", name: "cards", min: "1", max: "64", value: "1", required: true });
  const minutes = input({ type: "number", name: "minutes", min: "0", step: "1", value: "61", required: true });
  const seconds = input({ type: "number", name: "seconds", min: "0", max: "59", step: "1", value: "0", required: true });
  const out = h("div", { id: "job-cost", "aria-live": "polite" });
  const box = errorBox();
  function draw() {
    const p = E.microsOf(price.value);
    const s = Number(minutes.value) * 60 + Number(seconds.value);
    const c = Number(cards.value);
    if (p === null || !Number.isInteger(s) || s < 0 || !Number.isInteger(c) || c < 1) {
      showError(box, "give a price like 2.49, a whole number of cards and a duration");
      return;
    }
    box.hidden = true;
    const perSecond = E.perSecondCostMicros(p, c, s);
    const perHour = E.perStartedHourCostMicros(p, c, s);
    fill(out, 
      facts([
        ["Billed by the second", h("span", { id: "per-second" }, `€${E.eurosOf(perSecond)}`)],
        ["Billed per started hour", h("span", { id: "per-hour" }, `€${E.eurosOf(perHour)}`)],
        ["Saved", `€${E.eurosOf(perHour - perSecond)}`],
      ]),
    );
  }
  for (const c of [price, cards, minutes, seconds]) c.addEventListener("input", draw);
  add(view, 
    title("What a job costs: per second against per started hour"),
    h("p", {}, "Tickmark bills every second a rental runs: price × cards × seconds / 3600, rounded down to the micro-euro."),
    h(
      "form",
      { onsubmit: (ev) => (ev.preventDefault(), draw()) },
      field("Price per GPU-hour (EUR)", price, lowest ? "prefilled with the lowest live on-demand offer" : null),
      field("Cards", cards),
      field("Minutes", minutes),
      field("Seconds", seconds),
      h("button", { type: "submit" }, "Compare"),
    ),
    box,
    out,
  );
  draw();
}

export async function earnings(view) {
  document.title = "Earnings estimator — Tickmark";
  const cards = input({ type: "number", name: "cards", min: "1", max: "64", value: "8", required: true });
  const price = input({ name: "price", inputmode: "decimal", value: "2.00", required: true });
  const utilisation = input({ type: "number", name: "utilisation", min: "0", max: "100", value: "60", required: true });
  const fee = input({ type: "number", name: "fee", min: "0", max: "100", step: "0.01", value: "15", required: true });
  const out = h("div", { id: "earnings", "aria-live": "polite" });
  const box = errorBox();
  function draw() {
    const p = E.microsOf(price.value);
    const c = Number(cards.value);
    const u = Number(utilisation.value);
    const f = Math.round(Number(fee.value) * 100);
    if (p === null || !Number.isInteger(c) || c < 1 || !Number.isInteger(u) || u < 0 || u > 100 || !(f >= 0 && f <= 10000)) {
      showError(box, "give whole cards, a price like 2.00, a utilisation of 0–100 % and a fee of 0–100 %");
      return;
    }
    box.hidden = true;
    const month = E.monthlyTakeHomeMicros(c, p, u, f);
    fill(out, 
      facts([
        ["Monthly take-home (estimate)", h("span", { id: "take-home" }, `€${E.eurosOf(month)}`)],
        ["Rented hours a month", `${(730 * u) / 100} of 730 per card`],
      ]),
      h("p", { class: "hint" }, "Before your own costs (power, hardware, network) and taxes; a month is 730 hours."),
    );
  }
  for (const c of [cards, price, utilisation, fee]) c.addEventListener("input", draw);
  add(view, 
    title("Earnings estimator"),
    h(
      "form",
      { onsubmit: (ev) => (ev.preventDefault(), draw()) },
      field("Cards", cards),
      field("Your price per GPU-hour (EUR)", price),
      field("Utilisation (% of the month rented)", utilisation),
      field("Platform fee (%)", fee, "the node's default fee is 15 %"),
      h("button", { type: "submit" }, "Estimate"),
    ),
    box,
    out,
  );
  draw();
}
