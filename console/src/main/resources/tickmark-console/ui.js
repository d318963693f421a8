// Small DOM helpers. Text from the API is only ever set as text (never as HTML), so a hostile host
// label or log line cannot run script; styles come from console.css classes, never inline.

let nextId = 0;

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs ?? {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") el.className = v;
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "value") el.value = v;
    else if (k === "checked") el.checked = !!v;
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  append(el, children);
  return el;
}

// append/replaceChildren would print a null child as the text "null": these skip the absent ones.
export function add(el, ...children) {
  append(el, children);
  return el;
}

export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

// A labelled control: the label names the control by its id, so every input has a label.
export function field(label, control, hint) {
  if (!control.id) control.id = `f${++nextId}`;
  const hintEl = hint ? h("small", { id: `${control.id}-hint`, class: "hint" }, hint) : null;
  if (hintEl) control.setAttribute("aria-describedby", hintEl.id);
  return h("div", { class: "field" }, h("label", { for: control.id }, label), control, hintEl);
}

export function input(attrs) {
  return h("input", { type: "text", ...attrs });
}

export function select(name, options, selected) {
  return h(
    "select",
    { name },
    options.map(([value, text]) => h("option", { value, selected: value === selected ? "selected" : null }, text)),
  );
}

export function table(columns, rows, caption) {
  return h(
    "table",
    {},
    caption ? h("caption", {}, caption) : null,
    h("thead", {}, h("tr", {}, columns.map((c) => h("th", { scope: "col" }, c)))),
    h("tbody", {}, rows.map((r) => h("tr", {}, r.map((cell) => h("td", {}, cell))))),
  );
}

// A definition list of [term, value] pairs.
export function facts(pairs) {
  return h("dl", { class: "facts" }, pairs.map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]));
}

// The region where a page shows what went wrong: the problem's detail and code, announced.
export function errorBox() {
  return h("p", { class: "error", role: "alert", hidden: true });
}

export function showError(box, error) {
  box.hidden = false;
  box.textContent = error?.message ?? String(error);
}

export function clearError(box) {
  box.hidden = true;
  box.textContent = "";
}

// Runs an async action from a form or button, showing its error in box; the control is disabled
// while it runs so a double click does not send twice (unless disable is false: a control whose
// state the action itself sets).
export function action(box, fn, disable = true) {
  return async (event) => {
    event?.preventDefault?.();
    const control = disable ? (event?.submitter ?? event?.currentTarget) : null;
    if (control && "disabled" in control) control.disabled = true;
    clearError(box);
    try {
      await fn(event);
    } catch (e) {
      if (e.name !== "AbortError") showError(box, e);
    } finally {
      if (control && "disabled" in control) control.disabled = false;
    }
  };
}

export function euros(amount) {
  return amount === null || amount === undefined ? "—" : `€${amount}`;
}

// How a host's agent runs rentals, in a list: "sandbox", "sandbox, no network", or "—" (not said)
export function runtimeCell(r) {
  return r ? (r.network ? r.name : `${r.name}, no network`) : "—";
}

export function when(iso) {
  return iso ? new Date(iso).toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC") : "—";
}

export function link(href, text) {
  return h("a", { href }, text);
}

// The rentals that ran on a host (rows of GET /v1/hosts/{id}/rentals), or for an operator the rows of
// GET /ops/hosts/{id}/rentals ({renter_id, rental}) with a Renter column.
export function hostRentalsTable(rows, withRenters) {
  const headers = ["Rental", "Status", "Cards", "Tier", "Price per GPU-hour", "Started", "Ended", "Billed seconds", "Earned", "End reason"];
  if (withRenters) headers.splice(1, 0, "Renter");
  return table(
    headers,
    rows.map((row) => {
      const r = withRenters ? row.rental : row;
      const cells = [r.id, r.status, `${r.count} × ${r.gpu}`, r.tier, euros(r.price_per_gpu_hour), when(r.started_at), when(r.ended_at), String(r.billed_seconds), euros(r.earned), r.end_reason ?? "—"];
      if (withRenters) cells.splice(1, 0, row.renter_id);
      return cells;
    }),
  );
}
