// Renter pages: sign in or up, the account, the launch form, rentals with their cost ticking live,
// a rental's page (logs following live, SSH command, stop with snapshot, checkpoints), the ledger,
// SSH and API keys.

import { session, get, post, put, del, follow, ApiError } from "../api.js";
import { h, add, fill, field, input, select, table, facts, errorBox, action, euros, when, link } from "../ui.js";
import { title } from "./public.js";

function signedInOrPrompt(view) {
  if (session.key()) return true;
  add(view, h("p", { class: "notice" }, "This page needs your API key. ", link("#/sign-in", "Sign in"), "."));
  return false;
}

function announceSession() {
  window.dispatchEvent(new Event("tickmark:session"));
}

export async function signIn(view) {
  document.title = "Sign in — Tickmark";
  const key = input({ type: "password", name: "api_key", autocomplete: "off", spellcheck: "false", required: true });
  const keyBox = errorBox();
  const name = input({ name: "name", autocomplete: "organization", required: true });
  const signUpBox = errorBox();
  const shown = h("div", { id: "new-key", "aria-live": "polite" });
  const operatorToken = input({ type: "password", name: "operator_token", autocomplete: "off", required: true });
  const opBox = errorBox();
  add(view, 
    title("Sign in"),
    h("p", {}, "Your key is kept in this tab's session storage only: closing the tab forgets it. It is never stored in a cookie."),
    h(
      "form",
      {
        id: "sign-in-form",
        onsubmit: action(keyBox, async () => {
          session.setKey(key.value.trim());
          try {
            await get("/v1/account");
          } catch (e) {
            session.setKey(null);
            throw e;
          }
          announceSession();
          location.hash = "#/account";
        }),
      },
      field("API key", key, "tmk_…, shown once when it was made"),
      h("button", { type: "submit" }, "Sign in"),
    ),
    keyBox,
    h("h2", {}, "New here? Sign up"),
    h(
      "form",
      {
        id: "sign-up-form",
        onsubmit: action(signUpBox, async () => {
          const r = await post("/v1/accounts", { name: name.value.trim() }, { auth: null });
          session.setKey(r.api_key);
          announceSession();
          fill(shown, 
            h("p", {}, "Your account ", h("code", {}, r.account.id), " is open. Your API key, shown only now — keep it somewhere safe:"),
            h("pre", { class: "secret" }, r.api_key),
            link("#/account", "Go to your account"),
          );
        }),
      },
      field("Name", name),
      h("button", { type: "submit" }, "Sign up"),
    ),
    signUpBox,
    shown,
    h("h2", {}, "Operators"),
    h(
      "form",
      {
        id: "operator-form",
        onsubmit: action(opBox, async () => {
          session.setOperator(operatorToken.value.trim());
          try {
            await get("/ops/ledger/audit", { auth: "operator" });
          } catch (e) {
            session.setOperator(null);
            throw e;
          }
          announceSession();
          location.hash = "#/ops";
        }),
      },
      field("Operator token", operatorToken),
      h("button", { type: "submit" }, "Sign in as operator"),
    ),
    opBox,
  );
}

export async function account(view, { signal, refresh }) {
  document.title = "Account — Tickmark";
  add(view, title("Account"));
  if (!signedInOrPrompt(view)) return;
  const a = await get("/v1/account", { signal });
  const cap = input({ name: "monthly", inputmode: "decimal", value: a.spend_cap_monthly ?? "", placeholder: "none" });
  const box = errorBox();
  add(view, 
    facts([
      ["Account", h("code", {}, a.id)],
      ["Name", a.name],
      ["Balance", h("span", { id: "balance" }, euros(a.balance))],
      ["Held", h("span", { id: "held" }, euros(a.held))],
      ["Available", h("span", { id: "available" }, euros(a.available))],
      ["Provider earnings", h("span", { id: "earnings" }, euros(a.earnings))],
      ["Spent this month", euros(a.spent_this_month)],
      ["Monthly spend cap", a.spend_cap_monthly ? euros(a.spend_cap_monthly) : "none"],
      ["Status", a.status],
    ]),
    h(
      "form",
      {
        id: "spend-cap-form",
        onsubmit: action(box, async () => {
          const v = cap.value.trim();
          await put("/v1/account/spend-cap", { monthly: v === "" ? null : v });
          refresh();
        }),
      },
      field("Monthly spend cap (EUR, empty for none)", cap),
      h("button", { type: "submit" }, "Set the cap"),
    ),
    box,
  );
}

export async function launch(view, { signal, params }) {
  document.title = "Launch — Tickmark";
  add(view, title("Launch a rental"));
  if (!signedInOrPrompt(view)) return;
  const [catalog, regions, ready] = await Promise.all([
    get("/v1/catalog/gpus", { auth: null, signal }),
    get("/v1/catalog/regions", { auth: null, signal }),
    get("/v1/snapshots?status=ready&limit=100", { signal }),
  ]);
  const gpu = select("gpu", catalog.gpus.map((g) => [g.code, g.name]), "h100-80gb");
  const count = input({ type: "number", name: "count", min: "1", max: "64", value: "1", required: true });
  const tier = select("tier", [["on_demand", "on demand"], ["spot", "spot (can be reclaimed with notice)"]], "on_demand");
  const region = select("region", [["", "any region"], ...regions.regions.map((r) => [r.code, `${r.name} (${r.code})`])], "");
  const maxPrice = input({ name: "max_price_per_gpu_hour", inputmode: "decimal", value: "3.00", required: true });
  const image = input({ name: "image", value: "ubuntu:24.04", required: true });
  const command = input({ name: "command", value: "", placeholder: "sleep 3600" });
  const sshKey = h("textarea", { name: "ssh_public_key", rows: "2", placeholder: "ssh-ed25519 AAAA… (empty: your account's SSH keys)" });
  const maxTotal = input({ name: "max_total", inputmode: "decimal", placeholder: "no limit" });
  // #/launch/snap_…: the snapshots page's "Launch with it"
  const restore = select(
    "restore",
    [["", "none: an empty workspace"], ...ready.snapshots.map((s) => [s.id, `${s.id} (from ${s.rental_id ?? "—"}, ${when(s.created_at)})`])],
    params?.[0] ?? "",
  );
  const network = h("input", { type: "checkbox", name: "network", id: "network" });
  // Only docker runs the image; the sandbox and process runtimes run the command on the host's system.
  const runtime = select(
    "runtime",
    [["", "any host"], ["docker", "docker: runs the image"], ["sandbox", "sandbox: the host's own system, isolated; the image is not used"]],
    "",
  );
  const box = errorBox();
  add(view, 
    h(
      "form",
      {
        id: "launch-form",
        onsubmit: action(box, async () => {
          const body = {
            gpu: gpu.value,
            count: Number(count.value),
            tier: tier.value,
            max_price_per_gpu_hour: maxPrice.value.trim(),
            image: image.value.trim(),
          };
          if (region.value) body.region = region.value;
          if (command.value.trim()) body.command = ["sh", "-c", command.value];
          if (sshKey.value.trim()) body.ssh_public_key = sshKey.value.trim();
          if (maxTotal.value.trim()) body.max_total = maxTotal.value.trim();
          if (restore.value) body.restore = restore.value;
          if (network.checked) body.network = true;
          if (runtime.value) body.runtime = runtime.value;
          const r = await post("/v1/rentals", body, { idempotencyKey: crypto.randomUUID() });
          location.hash = `#/rentals/${r.rental.id}`;
        }),
      },
      field("GPU", gpu),
      field("Cards", count),
      field("Tier", tier),
      field("Region", region),
      field("Highest price per GPU-hour you accept (EUR)", maxPrice),
      field("Image", image),
      field("Runtime (only docker runs the image)", runtime),
      field("Command (run with sh -c; empty: the image's own)", command),
      field("SSH public key", sshKey),
      field("Spend at most (EUR, optional)", maxTotal),
      field("Start from a snapshot (its workspace is unpacked before the command runs)", restore),
      h(
        "div",
        { class: "field inline" },
        network,
        h("label", { for: network.id }, "Outbound network: the workload can reach out, nothing can connect in (only hosts that can give it are matched)"),
      ),
      h("button", { type: "submit" }, "Launch"),
    ),
    box,
  );
}

// What a rental runs in: its host's runtime once matched (where its agent said), else the one asked
// for; only docker runs the image.
function runtimeText(r) {
  const ran = r.host_runtime;
  if (!ran) return r.runtime ?? "any";
  return ran === "docker" ? ran : `${ran} (the host's own system: the image is not used)`;
}

// Follows a rental's events, updating its cost and billed seconds as ticks arrive; reconnects
// after a dropped stream until the rental ended or the page is left.
function liveCost(id, signal, onUpdate) {
  (async () => {
    let ended = false;
    for (let attempt = 0; !ended && !signal.aborted; attempt++) {
      try {
        await follow(`/v1/rentals/${id}/events`, {
          signal,
          onEvent: (e) => {
            const data = JSON.parse(e.data);
            if (e.event === "tick") onUpdate({ billed_seconds: data.second, cost: data.cost });
            else if (e.event === "status" || e.event === "end") onUpdate(data);
            if (e.event === "end") ended = true;
          },
        });
      } catch (e) {
        if (e.name === "AbortError" || signal.aborted) return;
        if (e instanceof ApiError && e.status === 404) return;
      }
      if (!ended) await pause(Math.min(10000, 1000 * 2 ** attempt), signal);
    }
  })();
}

function pause(ms, signal) {
  return new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => (clearTimeout(t), resolve()), { once: true });
  });
}

const LIVE = new Set(["pending", "provisioning", "running", "stopping"]);

export async function rentals(view, { signal }) {
  document.title = "Rentals — Tickmark";
  add(view, title("Rentals"));
  if (!signedInOrPrompt(view)) return;
  const r = await get("/v1/rentals?limit=50", { signal });
  if (r.rentals.length === 0) {
    add(view, h("p", {}, "No rentals yet. ", link("#/launch", "Launch one"), "."));
    return;
  }
  let live = 0; // streams are capped per account: follow the newest few
  const rows = r.rentals.map((x) => {
    const status = h("span", { class: "status" }, x.status);
    const seconds = h("span", { class: "billed-seconds" }, String(x.billed_seconds));
    const cost = h("span", { class: "cost", "data-rental": x.id }, euros(x.cost));
    if (LIVE.has(x.status) && live++ < 16)
      liveCost(x.id, signal, (u) => {
        if (u.status) status.textContent = u.status;
        if (u.billed_seconds !== undefined) seconds.textContent = String(u.billed_seconds);
        if (u.cost) cost.textContent = euros(u.cost);
      });
    return [link(`#/rentals/${x.id}`, x.id), status, `${x.count} × ${x.gpu}`, x.region ?? "—", euros(x.price_per_gpu_hour), seconds, cost, when(x.created_at)];
  });
  add(view, table(["Rental", "Status", "Cards", "Region", "Price/GPU-hour", "Billed seconds", "Cost", "Created"], rows, "Your rentals, newest first; running ones tick live"));
  view.querySelector("table").id = "rentals";
}

export async function rental(view, { signal, params, refresh }) {
  const [id] = params;
  document.title = `${id} — Tickmark`;
  add(view, title(`Rental ${id}`));
  if (!signedInOrPrompt(view)) return;
  const got = await get(`/v1/rentals/${id}`, { signal });
  const r = got.rental ?? got; // the single rental is answered bare; tolerate the wrapped form too
  const status = h("span", { id: "status" }, r.status);
  const seconds = h("span", { id: "billed-seconds" }, String(r.billed_seconds));
  const cost = h("span", { id: "cost" }, euros(r.cost));
  const endReason = h("span", { id: "end-reason" }, r.end_reason ?? "—");
  // a workload that ended by itself: its exit status, as the host's agent saw it
  const exitCode = h("span", { id: "exit-code" }, String(r.exit_code ?? "—"));
  const started = h("span", { id: "started" }, when(r.started_at));
  const ended = h("span", { id: "ended" }, when(r.ended_at));
  const snapshotId = h("span", { id: "snapshot" }, r.snapshot_id ?? "—");
  const box = errorBox();
  const snapshot = h("input", { type: "checkbox", name: "snapshot", id: "keep-snapshot" });
  const stop = h(
    "form",
    {
      id: "stop-form",
      onsubmit: action(box, async () => {
        await post(`/v1/rentals/${id}/stop`, { snapshot: snapshot.checked }, { idempotencyKey: crypto.randomUUID() });
        status.textContent = "stopping";
      }),
    },
    h("div", { class: "field inline" }, snapshot, h("label", { for: snapshot.id }, "Keep the workspace as a snapshot")),
    h("button", { type: "submit", id: "stop" }, "Stop the rental"),
  );
  const update = (u) => {
    if (u.status) status.textContent = u.status;
    if (u.billed_seconds !== undefined) seconds.textContent = String(u.billed_seconds);
    if (u.cost) cost.textContent = euros(u.cost);
    if (u.end_reason) endReason.textContent = u.end_reason;
    if (u.exit_code !== undefined && u.exit_code !== null) exitCode.textContent = String(u.exit_code);
    if (u.started_at) started.textContent = when(u.started_at);
    if (u.ended_at) ended.textContent = when(u.ended_at);
    if (u.snapshot_id) snapshotId.textContent = u.snapshot_id;
    if (u.status === "ended") {
      stop.hidden = true;
      drawUsage(id, checkpoints, signal).catch(() => {}); // the final settlement
    }
  };
  const logs = h("pre", { id: "logs", class: "logs", tabindex: "0", "aria-label": "Logs", "aria-live": "off" });
  const checkpoints = h("div", { id: "checkpoints" });
  add(view, 
    facts([
      ["Status", status],
      ["Cards", `${r.count} × ${r.gpu} (${r.tier === "on_demand" ? "on demand" : r.tier})`],
      ["Region", r.region ?? "—"],
      ["Image", h("code", { id: "image" }, r.image ?? "—")],
      ["Command", h("code", { id: "command" }, r.command ? (r.command.length ? JSON.stringify(r.command) : "the image's own") : "—")],
      ["Network", r.network ? "outbound" : "off"],
      ["Runtime", h("span", { id: "runtime" }, runtimeText(r))],
      ...(r.max_total ? [["Spend limit", euros(r.max_total)]] : []),
      ...(r.restore ? [["Started from snapshot", r.restore]] : []),
      ["Price per GPU-hour", euros(r.price_per_gpu_hour)],
      ["Billed seconds", seconds],
      ["Cost so far", cost],
      // an operator's refund of an ended rental (a dispute settled in the renter's favour)
      ...(r.refunded && r.refunded !== "0.000000" ? [["Refunded", h("span", { id: "refunded" }, euros(r.refunded))]] : []),
      ["Started", started],
      ["Ended", ended],
      ["End reason", endReason],
      ["Exit code", exitCode],
      ["Snapshot", snapshotId],
    ]),
    h("h2", {}, "SSH"),
    h("p", {}, "With the tickmark CLI and your API key in TICKMARK_API_KEY:"),
    h("pre", { id: "ssh-command" }, `tickmark ssh ${id}`),
    r.ssh_host_key ? h("p", {}, "The host's SSH key (the CLI pins it): ", h("code", {}, r.ssh_host_key)) : null,
    stop,
    box,
    h("h2", {}, "Logs"),
    logs,
    h("h2", {}, "Settlement checkpoints"),
    checkpoints,
  );
  if (r.status === "ended") stop.hidden = true;
  liveCost(id, signal, update);
  followLogs(id, logs, signal);
  await drawUsage(id, checkpoints, signal);
  // checkpoints land every settle interval: read them again while the rental is live
  (async () => {
    while (!signal.aborted && stop.hidden === false) {
      await pause(10000, signal);
      if (!signal.aborted) await drawUsage(id, checkpoints, signal).catch(() => {});
    }
  })();
}

async function drawUsage(id, into, signal) {
  const u = await get(`/v1/rentals/${id}/usage`, { signal });
  fill(into, 
    facts([
      ["Billed by the second", `${u.billed_seconds} s: ${euros(u.cost)}`],
      ["The same job per started hour", `${u.started_hours} h: ${euros(u.cost_per_started_hour)}`],
    ]),
    u.checkpoints.length
      ? table(["Through second", "Cost", "At"], u.checkpoints.map((c) => [String(c.through_second), euros(c.cost), when(c.at)]), "Checkpoints, oldest first")
      : h("p", {}, "No checkpoint yet."),
  );
}

// Appends log lines as they come; on a dropped stream resumes after the last seq it showed.
function followLogs(id, pre, signal) {
  (async () => {
    let last = null;
    let ended = false;
    for (let attempt = 0; !ended && !signal.aborted; attempt++) {
      try {
        await follow(`/v1/rentals/${id}/logs?follow=true`, {
          signal,
          lastEventId: last,
          onEvent: (e) => {
            if (e.event === "log") {
              const line = JSON.parse(e.data);
              last = line.seq;
              pre.append(h("span", { class: `log ${line.stream}` }, `${line.text}\n`));
              attempt = 0;
            } else if (e.event === "end") {
              ended = true;
              pre.append(h("span", { class: "log system" }, "— the rental ended —\n"));
            }
          },
        });
      } catch (e) {
        if (e.name === "AbortError" || signal.aborted) return;
        if (e instanceof ApiError && e.status === 404) return;
      }
      if (!ended) await pause(Math.min(10000, 1000 * 2 ** attempt), signal);
    }
  })();
}

export async function ledger(view, { signal }) {
  document.title = "Ledger — Tickmark";
  add(view, title("Ledger"));
  if (!signedInOrPrompt(view)) return;
  const cursors = [null]; // the `after` of each page seen, so Previous can go back
  const holder = h("div", { id: "ledger" });
  const box = errorBox();
  const prev = h("button", { type: "button", id: "ledger-prev" }, "Previous page");
  const next = h("button", { type: "button", id: "ledger-next" }, "Next page");
  const size = select("limit", [["20", "20"], ["50", "50"], ["100", "100"]], "20");
  let page = 0;
  let nextAfter = null;
  async function load() {
    const after = cursors[page];
    const r = await get(`/v1/account/ledger?limit=${size.value}${after ? `&after=${encodeURIComponent(after)}` : ""}`, { signal });
    nextAfter = r.next_after;
    fill(holder, 
      r.entries.length
        ? table(
            ["At", "Kind", "Amount", "Rental", "Key"],
            r.entries.map((e) => [when(e.at), h("span", { class: "kind" }, e.kind), euros(e.amount), e.rental_id ?? "—", e.key ?? "—"]),
            `Entries, oldest first (page ${page + 1})`,
          )
        : h("p", {}, "No entries on this page."),
    );
    prev.disabled = page === 0;
    next.disabled = !nextAfter;
  }
  prev.addEventListener("click", action(box, async () => {
    page = Math.max(0, page - 1);
    await load();
  }, false));
  next.addEventListener("click", action(box, async () => {
    if (!nextAfter) return;
    cursors[page + 1] = nextAfter;
    page++;
    await load();
  }, false));
  size.addEventListener("change", action(box, async () => {
    cursors.length = 1;
    page = 0;
    await load();
  }));
  add(view, field("Entries per page", size), holder, h("div", { class: "pager" }, prev, next), box);
  await load();
}

export async function keys(view, { signal, refresh }) {
  document.title = "Keys — Tickmark";
  add(view, title("SSH keys and API keys"));
  if (!signedInOrPrompt(view)) return;
  const [ssh, api] = await Promise.all([get("/v1/account/ssh-keys", { signal }), get("/v1/account/api-keys", { signal })]);
  const sshBox = errorBox();
  const keyName = input({ name: "name", required: true });
  const publicKey = h("textarea", { name: "public_key", rows: "2", required: true, placeholder: "ssh-ed25519 AAAA… you@laptop" });
  const apiBox = errorBox();
  const label = input({ name: "label" });
  const scopes = ["read", "rent", "provide", "payouts"].map((s) =>
    h("input", { type: "checkbox", name: "scope", value: s, id: `scope-${s}`, checked: s !== "payouts" }),
  );
  const shown = h("div", { id: "new-api-key", "aria-live": "polite" });
  add(view, 
    h("h2", {}, "SSH keys"),
    h("p", {}, "Rentals launched without their own key accept these."),
    ssh.ssh_keys.length
      ? table(
          ["Name", "Fingerprint", "Added", ""],
          ssh.ssh_keys.map((k) => [
            k.name,
            h("code", {}, k.fingerprint),
            when(k.created_at),
            h("button", { type: "button", onclick: action(sshBox, async () => (await del(`/v1/account/ssh-keys/${k.id}`), refresh())) }, `Delete ${k.name}`),
          ]),
        )
      : h("p", {}, "No SSH keys."),
    h(
      "form",
      { id: "ssh-key-form", onsubmit: action(sshBox, async () => (await post("/v1/account/ssh-keys", { name: keyName.value.trim(), public_key: publicKey.value.trim() }), refresh())) },
      field("Key name", keyName),
      field("Public key (one OpenSSH line)", publicKey),
      h("button", { type: "submit" }, "Add the SSH key"),
    ),
    sshBox,
    h("h2", {}, "API keys"),
    table(
      ["Prefix", "Label", "Scopes", "Created", "Last used", "Expires", "Revoked", ""],
      api.keys.map((k) => [
        h("code", {}, k.prefix),
        k.label ?? "—",
        k.scopes.join(", "),
        when(k.created_at),
        when(k.last_used_at),
        when(k.expires_at),
        when(k.revoked_at),
        k.revoked_at ? "" : h("button", { type: "button", onclick: action(apiBox, async () => (await del(`/v1/account/api-keys/${k.id}`), refresh())) }, `Revoke ${k.prefix}`),
      ]),
    ),
    h(
      "form",
      {
        id: "api-key-form",
        onsubmit: action(apiBox, async () => {
          const body = { scopes: scopes.filter((s) => s.checked).map((s) => s.value) };
          if (label.value.trim()) body.label = label.value.trim();
          const r = await post("/v1/account/api-keys", body);
          fill(shown, h("p", {}, "The new key, shown only now:"), h("pre", { class: "secret" }, r.api_key));
        }),
      },
      field("Label", label),
      h("fieldset", {}, h("legend", {}, "Scopes"), scopes.map((s) => h("div", { class: "field inline" }, s, h("label", { for: s.id }, s.value)))),
      h("button", { type: "submit" }, "Make an API key"),
    ),
    apiBox,
    shown,
  );
}

export async function snapshots(view, { signal, refresh }) {
  document.title = "Snapshots — Tickmark";
  add(view, title("Snapshots"));
  if (!signedInOrPrompt(view)) return;
  const r = await get("/v1/snapshots?limit=100", { signal });
  const box = errorBox();
  add(view, 
    h("p", {}, "Workspaces kept when a rental stopped with a snapshot; launch with one to restore it. Storage is metered while a snapshot exists."),
    r.snapshots.length
      ? table(
          ["Snapshot", "Status", "Size", "From rental", "GPU", "Region", "Created", "Storage cost", ""],
          r.snapshots.map((s) => [
            h("code", {}, s.id),
            s.status + (s.failure ? ` (${s.failure.code})` : ""),
            s.size_bytes === null || s.size_bytes === undefined ? "—" : `${(s.size_bytes / 1048576).toFixed(1)} MiB`,
            s.rental_id ? link(`#/rentals/${s.rental_id}`, s.rental_id) : "—",
            s.gpu ?? "—",
            s.region ?? "—",
            when(s.created_at),
            euros(s.cost),
            s.status === "deleted"
              ? ""
              : h(
                  "span",
                  {},
                  s.status === "ready" ? link(`#/launch/${s.id}`, `Launch with ${s.id}`) : "",
                  " ",
                  h("button", { type: "button", onclick: action(box, async () => (await del(`/v1/snapshots/${s.id}`), refresh())) }, `Delete ${s.id}`),
                ),
          ]),
          "Your snapshots, newest first",
        )
      : h("p", { id: "no-snapshots" }, "No snapshots."),
    box,
  );
}
