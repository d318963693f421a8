// Provider pages: hosts with their verification breakdown and "check again", the listing editor
// (prices, spot notice, weekly windows), earnings (the account's, and each host's rentals with
// what each earned), and a registration token with the agent's install command.

import { session, get, post, put } from "../api.js";
import { h, add, fill, field, input, select, table, facts, errorBox, action, euros, when, link, runtimeCell, hostRentalsTable } from "../ui.js";
import { title } from "./public.js";

function signedInOrPrompt(view) {
  if (session.key()) return true;
  add(view, h("p", { class: "notice" }, "This page needs your API key. ", link("#/sign-in", "Sign in"), "."));
  return false;
}

// The engine URL the agent dials: this node, over wss:// when the console came over https://.
function engineUrl() {
  return `${location.protocol === "https:" ? "wss" : "ws"}://${location.host}`;
}

export async function hosts(view, { signal }) {
  document.title = "Hosts — Tickmark";
  add(view, title("Your hosts"));
  if (!signedInOrPrompt(view)) return;
  const [list, account, regions] = await Promise.all([
    get("/v1/hosts?limit=200", { signal }),
    get("/v1/account", { signal }),
    get("/v1/catalog/regions", { auth: null, signal }),
  ]);
  const region = select("region", regions.regions.map((r) => [r.code, `${r.name} (${r.code})`]), regions.regions[0]?.code);
  const label = input({ name: "label", placeholder: "rack-1/node-1" });
  const box = errorBox();
  const token = h("div", { id: "registration", "aria-live": "polite" });
  add(view, 
    facts([
      ["Earnings (credited, not yet paid out)", h("span", { id: "provider-earnings" }, euros(account.earnings))],
      ["Payout details", account.payout_details ? `${account.payout_details.holder_name}, ${account.payout_details.iban}` : "none yet (PUT /v1/account/payout-details)"],
      ...(account.payout_returned
        ? [["Payout returned", h("span", { id: "payout-returned", class: "error" },
            `The bank returned ${euros(account.payout_returned.amount)} (${account.payout_returned.reason}${account.payout_returned.reason_text ? ": " + account.payout_returned.reason_text : ""}). It is owed to you again; payouts wait until you give payout details again.`)]]
        : []),
    ]),
    list.hosts.length
      ? table(
          ["Host", "Label", "Region", "Status", "Online", "Listed", "Cards free", "On demand", "Spot", "Rentals lost", "Runtime"],
          list.hosts.map((x) => [
            link(`#/hosts/${x.id}`, x.id),
            x.label ?? "—",
            x.region,
            x.status,
            x.online ? "yes" : "no",
            x.listed ? (x.draining ? "draining" : "yes") : "no",
            `${x.cards_free} of ${x.cards_total} ${x.gpu ?? ""}`,
            euros(x.on_demand_price_per_gpu_hour),
            euros(x.spot_price_per_gpu_hour),
            // the matcher's tie-break between equal floors: the share of ended rentals lost
            `${x.rentals_lost ?? 0} of ${x.rentals_ended ?? 0}`,
            runtimeCell(x.runtime),
          ]),
          "Hosts",
        )
      : h("p", {}, "No hosts yet."),
    h("h2", {}, "Add a machine"),
    h(
      "form",
      {
        id: "registration-form",
        onsubmit: action(box, async () => {
          const body = { region: region.value };
          if (label.value.trim()) body.label = label.value.trim();
          const r = await post("/v1/hosts/registration-tokens", body);
          const command = `sudo deploy/agent/install.sh --engine ${engineUrl()} --token ${r.token}`;
          fill(token, 
            h("p", {}, `A one-time token for host ${r.host_id}, valid until ${when(r.expires_at)}. On the machine (systemd, Java 17, Docker), from a Tickmark checkout:`),
            h("pre", { id: "install-command", class: "secret" }, command),
            h("p", { class: "hint" }, "The agent measures the machine and reports; the host shows here as verified once every check passes."),
          );
        }),
      },
      field("Region", region),
      field("Label (optional)", label),
      h("button", { type: "submit" }, "Make a registration token"),
    ),
    box,
    token,
  );
}

const DAYS = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"];

/** How the host's agent runs rentals, and whether a rental with network can run here. */
function runtime(r) {
  if (!r) return "— (the agent has not said: an agent older than 2026-12-07)";
  const why = { sandbox: " (a sandbox needs slirp4netns)", docker: " (the docker daemon has no bridge network)" }[r.name] ?? "";
  return r.network
    ? `${r.name}, rentals with network run here`
    : `${r.name}, no network for rentals: those that ask for it go to other hosts${why}`;
}

// Waits ms, or rejects with an AbortError when the page is left.
function pause(ms, signal) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => (clearTimeout(timer), reject(new DOMException("left the page", "AbortError"))), { once: true });
  });
}

// Check again: the agent measures again and resubmits; the host's new verdict is shown once its
// request is no longer pending (the agent's measurement takes seconds; at most a minute is waited).
async function checkAgain(id, status, signal, refresh) {
  let x = await post(`/v1/hosts/${id}/verify`, undefined, { signal });
  status.textContent = `Check again requested at ${when(x.verification_requested_at)}: the agent is measuring…`;
  for (let waited = 0; x.verification_requested_at && waited < 60; waited++) {
    await pause(1000, signal);
    x = await get(`/v1/hosts/${id}`, { signal });
  }
  if (x.verification_requested_at) {
    status.textContent = `Check again requested at ${when(x.verification_requested_at)}; no new report yet. Reload later.`;
    return;
  }
  await refresh();
}

export async function host(view, { signal, params, refresh }) {
  const [id] = params;
  document.title = `${id} — Tickmark`;
  add(view, title(`Host ${id}`));
  if (!signedInOrPrompt(view)) return;
  const [x, ran] = await Promise.all([
    get(`/v1/hosts/${id}`, { signal }),
    get(`/v1/hosts/${id}/rentals?limit=50`, { signal }),
  ]);
  const l = x.listing ?? {};
  const onDemand = input({ name: "on_demand_price_per_gpu_hour", inputmode: "decimal", value: l.on_demand_price_per_gpu_hour ?? "", required: true });
  const spot = input({ name: "spot_price_per_gpu_hour", inputmode: "decimal", value: l.spot_price_per_gpu_hour ?? "", placeholder: "no spot" });
  const notice = input({ type: "number", name: "spot_notice_seconds", min: "0", value: String(l.spot_notice_seconds ?? 300) });
  const listed = h("input", { type: "checkbox", name: "listed", id: "listed", checked: l.listed ?? x.listed });
  const windows = h("div", { id: "windows" });
  const addWindow = (w) => {
    const n = windows.children.length + 1;
    const day = select("day", DAYS.map((d) => [d, d]), w?.day ?? "mon");
    const start = input({ type: "time", name: "start", value: w?.start ?? "08:00", required: true });
    const end = input({ name: "end", value: w?.end ?? "18:00", pattern: "([01][0-9]|2[0-3]):[0-5][0-9]|24:00", required: true });
    const row = h(
      "fieldset",
      { class: "window" },
      h("legend", {}, `Window ${n}`),
      field("Day", day),
      field("From (UTC)", start),
      field("Until (UTC, 24:00 for midnight)", end),
      h("button", { type: "button", onclick: () => row.remove() }, `Remove window ${n}`),
    );
    row.read = () => ({ day: day.value, start: start.value, end: end.value });
    windows.append(row);
  };
  (l.availability ?? []).forEach(addWindow);
  const box = errorBox();
  const verifyBox = errorBox();
  const checking = h("p", { id: "check-again-status", "aria-live": "polite" },
    x.verification_requested_at ? `Check again requested at ${when(x.verification_requested_at)}.` : "");
  const saved = h("p", { id: "listing-saved", "aria-live": "polite" });
  add(view, 
    facts([
      ["Status", h("span", { id: "host-status" }, x.status)],
      ["Region", x.region],
      ["Label", x.label ?? "—"],
      ["Online", x.online ? "yes" : "no"],
      ["Listed", x.listed ? "yes" : "no"],
      ["Draining", x.draining ? "yes" : "no"],
      ["Last heartbeat", when(x.last_heartbeat_at)],
      ["Last verified", h("span", { id: "last-verified" }, when(x.last_verification_at))],
      ["Runtime", h("span", { id: "host-runtime" }, runtime(x.runtime))],
      ["Eviction reason", x.eviction_reason ?? "—"],
    ]),
    h("h2", {}, "Verification"),
    h(
      "form",
      { id: "verify-form", onsubmit: action(verifyBox, () => checkAgain(id, checking, signal, refresh)) },
      h("button", { type: "submit", id: "check-again", disabled: !x.online || x.status === "evicted" }, "Check again"),
      h("span", { class: "hint" }, x.online ? " The agent measures the machine again and resubmits its report." : " The agent is not connected: start it to check again."),
    ),
    verifyBox,
    checking,
    x.verification?.length
      ? table(
          ["Check", "Result", "Observed", "Expected"],
          x.verification.map((c) => [c.check, h("span", { class: `check ${c.status}` }, c.status.replace("_", " ")), c.observed ?? "—", c.expected ?? "—"]),
          "The last report, check by check",
        )
      : h("p", {}, "No report yet."),
    h("h2", {}, "Cards"),
    table(["Card", "GPU", "State"], (x.cards ?? []).map((c) => [String(c.index), c.gpu, c.state])),
    h("h2", {}, "Rentals on this host"),
    h(
      "p",
      { id: "host-earned" },
      `${ran.totals.rentals} ${ran.totals.rentals === 1 ? "rental" : "rentals"}, ${ran.totals.card_seconds} card-seconds billed, earned ${euros(ran.totals.earned)}` +
        (ran.rentals.length < ran.totals.rentals ? ` (the newest ${ran.rentals.length} below)` : "") +
        ". A running rental's figure is its latest settlement's; renters are never named.",
    ),
    ran.rentals.length
      ? h(
          "div",
          { id: "host-rentals" },
          hostRentalsTable(ran.rentals, false),
        )
      : h("p", {}, "None yet."),
    h("h2", {}, "Listing"),
    h(
      "form",
      {
        id: "listing-form",
        onsubmit: action(box, async () => {
          const body = {
            on_demand_price_per_gpu_hour: onDemand.value.trim(),
            listed: listed.checked,
            availability: [...windows.children].map((r) => r.read()),
          };
          if (spot.value.trim()) {
            body.spot_price_per_gpu_hour = spot.value.trim();
            body.spot_notice_seconds = Number(notice.value);
          }
          await put(`/v1/hosts/${id}/listing`, body);
          saved.textContent = "Listing saved.";
        }),
      },
      field("On-demand price per GPU-hour (EUR)", onDemand),
      field("Spot price per GPU-hour (EUR, empty for none)", spot),
      field("Spot notice (seconds before a reclaim ends a spot rental)", notice),
      h("div", { class: "field inline" }, listed, h("label", { for: listed.id }, "Listed on the market")),
      h("h3", {}, "Weekly availability (UTC; none means always)"),
      windows,
      h("button", { type: "button", id: "add-window", onclick: () => addWindow() }, "Add a window"),
      h("button", { type: "submit", id: "save-listing" }, "Save the listing"),
    ),
    box,
    saved,
    h(
      "form",
      { id: "drain-form", onsubmit: action(box, async () => (await post(`/v1/hosts/${id}/drain`), refresh())) },
      h("button", { type: "submit", disabled: x.draining }, "Drain (no new rentals)"),
    ),
  );
}
