// Operator pages (the operator token): the ledger audit, hosts awaiting verification with evict and
// reinstate, what ran on a host and who rented it, payout runs. Cluster members are on Pekko Management's own port, which the console
// (same origin, the API port only) cannot reach: the audit page says where to look.

import { session, get, post } from "../api.js";
import { h, add, fill, field, input, select, table, facts, errorBox, action, euros, when, link, runtimeCell, hostRentalsTable } from "../ui.js";
import { title } from "./public.js";

function operatorOrPrompt(view) {
  if (session.operator()) return true;
  add(view, h("p", { class: "notice" }, "This page needs the operator token. ", link("#/sign-in", "Sign in as operator"), "."));
  return false;
}

const OP = { auth: "operator" };

export async function audit(view, { signal }) {
  document.title = "Ledger audit — Tickmark";
  add(view, title("Ledger audit"));
  if (!operatorOrPrompt(view)) return;
  const a = await get("/ops/ledger/audit", { ...OP, signal });
  const money = ["deposits", "captures", "provider_earnings", "platform_revenue", "holds_placed", "holds_released", "holds_open", "payouts", "payouts_returned", "refunds", "earnings_reversed", "platform_fees_reversed", "provider_debt", "renter_balances", "provider_earnings_owed", "pending_captures", "pending_credits", "pending_refunds", "pending_reversals"];
  add(view, 
    h(
      "p",
      { id: "conserved", class: a.conserved ? "ok" : "error", role: "status" },
      a.conserved ? "Conserved: every euro deposited is in a balance, a hold, an earning, the platform's revenue or a payout." : "NOT conserved: the books do not balance — see the runbook.",
    ),
    facts([
      ...money.filter((k) => k in a).map((k) => [k.replaceAll("_", " "), euros(a[k])]),
      ["mismatched settlements", String(a.mismatched_settlements)],
      ["accounts below zero", String(a.accounts_below_zero)],
      ["entries", String(a.entries)],
    ]),
    h("h2", {}, "Cluster members"),
    h("p", {}, "Cluster membership is served by Pekko Management on its own port (GET /cluster/members, 8558 by default), not on the API port this console talks to."),
  );
}

const QUEUE = ["registered", "verifying", "failed"];

export async function hosts(view, { signal, refresh }) {
  // refresh redraws the page with the filter chosen
  document.title = "Operator hosts — Tickmark";
  add(view, title("Hosts"));
  if (!operatorOrPrompt(view)) return;
  const wanted = sessionStorage.getItem("tickmark.opsHostFilter") ?? "queue";
  const filter = select(
    "status",
    [["queue", "awaiting verification (registered, verifying, failed)"], ["", "all"], ...["invited", "registered", "verifying", "verified", "failed", "evicted", "removed"].map((s) => [s, s])],
    wanted,
  );
  filter.addEventListener("change", () => {
    sessionStorage.setItem("tickmark.opsHostFilter", filter.value);
    refresh();
  });
  const statuses = wanted === "queue" ? QUEUE : [wanted];
  const pages = await Promise.all(statuses.map((s) => get(`/ops/hosts?limit=200${s ? `&status=${s}` : ""}`, { ...OP, signal })));
  const list = pages.flatMap((p) => p.hosts);
  const box = errorBox();
  add(view, 
    field("Show", filter),
    list.length
      ? table(
          ["Host", "Owner", "Region", "Status", "Online", "Cards", "Runtime", "Registered", "Actions"],
          list.map((x) => {
            const status = h("span", { class: "host-status", "data-host": x.id }, x.status);
            const reason = input({ name: "reason", placeholder: "why" });
            // the answer is the host's entity: shown at once, while the list (a read side) catches up
            const done = (host) => {
              status.textContent = host.status;
              for (const b of cell.querySelectorAll("button")) b.disabled = true;
            };
            const cell =
              x.status === "evicted"
                ? h("button", { type: "button", onclick: action(box, async () => done(await post(`/ops/hosts/${x.id}/reinstate`, undefined, OP)), false) }, `Reinstate ${x.id}`)
                : h(
                    "form",
                    { class: "inline", onsubmit: action(box, async () => done(await post(`/ops/hosts/${x.id}/evict`, reason.value.trim() ? { reason: reason.value.trim() } : {}, OP)), false) },
                    field(`Reason to evict ${x.id}`, reason),
                    h("button", { type: "submit" }, `Evict ${x.id}`),
                  );
            return [link(`#/ops/hosts/${x.id}/rentals`, x.id), x.owner_id ?? "—", x.region, status, x.online ? "yes" : "no", `${x.cards_total} ${x.gpu ?? ""}`, runtimeCell(x.runtime), when(x.registered_at), cell];
          }),
          "Hosts",
        )
      : h("p", { id: "no-hosts" }, "No hosts in this state."),
    box,
  );
}

export async function hostRentals(view, { signal, params }) {
  const [id] = params;
  document.title = `Rentals on ${id} — Tickmark`;
  add(view, title(`Rentals on host ${id}`));
  if (!operatorOrPrompt(view)) return;
  const ran = await get(`/ops/hosts/${id}/rentals?limit=200`, { ...OP, signal });
  add(
    view,
    h(
      "p",
      { id: "ops-host-earned" },
      `${ran.totals.rentals} ${ran.totals.rentals === 1 ? "rental" : "rentals"}, ${ran.totals.card_seconds} card-seconds billed, earned the provider ${euros(ran.totals.earned)}` +
        (ran.rentals.length < ran.totals.rentals ? ` (the newest ${ran.rentals.length} below)` : "") +
        ".",
    ),
    ran.rentals.length
      ? h(
          "div",
          { id: "ops-host-rentals" },
          hostRentalsTable(ran.rentals, true),
        )
      : h("p", {}, "No rentals have run on this host."),
    refundForm(),
    h("p", {}, link("#/ops/hosts", "Back to the hosts")),
  );
}

// A dispute settled in the renter's favour: part or all of what an ended rental charged goes back to
// the renter; the provider's earnings and the platform's fee give back their shares.
function refundForm() {
  const rental = input({ name: "refund-rental", placeholder: "rnt_…", required: true });
  const reference = input({ name: "refund-reference", placeholder: "your ticket", required: true, maxlength: "200" });
  const amount = input({ name: "refund-amount", placeholder: "all that is left", inputmode: "decimal" });
  const reason = input({ name: "refund-reason", placeholder: "why", required: true, maxlength: "500" });
  const box = errorBox();
  box.id = "refund-error";
  const done = h("p", { id: "refund-result", "aria-live": "polite" });
  return h(
    "section",
    {},
    h("h2", {}, "Refund a rental"),
    h(
      "form",
      {
        id: "refund-form",
        onsubmit: action(box, async () => {
          const body = { reference: reference.value.trim(), reason: reason.value.trim() };
          if (amount.value.trim()) body.amount = amount.value.trim();
          const r = await post(`/ops/rentals/${encodeURIComponent(rental.value.trim())}/refunds`, body, OP);
          fill(done, `Refunded ${euros(r.amount)} of ${r.rental_id} to ${r.renter_id}: ${euros(r.refunded)} of ${euros(r.charged)} refunded in all; the provider gave back ${euros(r.provider_reversed)}, the platform ${euros(r.platform_reversed)}.`);
        }),
      },
      field("Rental (ended)", rental),
      field("Reference (the same one again is the same refund)", reference),
      field("Amount in EUR (empty: all that is left)", amount),
      field("Reason", reason),
      h("button", { type: "submit" }, "Refund"),
    ),
    box,
    done,
  );
}

export async function payouts(view, { signal }) {
  document.title = "Payouts — Tickmark";
  add(view, title("Payout runs"));
  if (!operatorOrPrompt(view)) return;
  const runs = await get("/ops/payouts?limit=20", { ...OP, signal });
  const minimum = input({ name: "minimum", inputmode: "decimal", value: "10.00", required: true });
  const box = errorBox();
  const result = h("div", { id: "payout-result", "aria-live": "polite" });
  add(view, 
    runs.runs.length
      ? table(
          ["Run", "Status", "Created", "Minimum", "Total", "Paid", "Refused", "Skipped", "Returned"],
          runs.runs.map((r) => [r.id, r.status, when(r.created_at), euros(r.minimum), euros(r.total), String(r.count), String(r.refused_count), String(r.skipped_count), String(r.returned_count)]),
          "Runs, newest first",
        )
      : h("p", {}, "No payout run yet."),
    h(
      "form",
      {
        id: "payout-form",
        onsubmit: action(box, async () => {
          const r = await post("/ops/payouts", { minimum: minimum.value.trim() }, { ...OP, idempotencyKey: crypto.randomUUID() });
          fill(result, 
            facts([
              ["Run", r.id],
              ["Status", r.status],
              ["Total", euros(r.total)],
              ["Paid", String(r.count)],
              ["Skipped", String(r.skipped?.length ?? 0)],
            ]),
            r.count > 0 ? h("p", { class: "hint" }, `Exports: GET /ops/payouts/${r.id}/export.csv or export.xml with the operator token.`) : null,
          );
        }),
      },
      field("Pay every provider whose earnings reach (EUR)", minimum),
      h("button", { type: "submit" }, "Run payouts"),
    ),
    box,
    result,
    returnForm(),
  );
}

// A transfer the bank sent back (closed account, wrong name): the provider is owed it again, and
// their payouts wait until they give payout details again.
function returnForm() {
  const run = input({ name: "return-run", placeholder: "pr_…", required: true });
  const account = input({ name: "return-account", placeholder: "acc_…", required: true });
  const reason = input({ name: "return-reason", placeholder: "AC04", required: true, pattern: "[A-Z0-9]{4}" });
  const box = errorBox();
  box.id = "payout-return-error";
  const done = h("p", { id: "payout-return-result", "aria-live": "polite" });
  return h(
    "section",
    {},
    h("h2", {}, "A payout the bank returned"),
    h(
      "form",
      {
        id: "payout-return-form",
        onsubmit: action(box, async () => {
          const r = await post(`/ops/payouts/${encodeURIComponent(run.value.trim())}/returns`, { account_id: account.value.trim(), reason: reason.value.trim() }, OP);
          const p = r.payouts.find((x) => x.account_id === account.value.trim());
          fill(done, `Recorded: ${euros(p.amount)} returned (${p.reason}); owed to ${p.account_id} again.`);
        }),
      },
      field("Payout run", run),
      field("Provider account", account),
      field("The bank's return reason code (ISO 20022, e.g. AC04 account closed)", reason),
      h("button", { type: "submit" }, "Record the return"),
    ),
    box,
    done,
  );
}
