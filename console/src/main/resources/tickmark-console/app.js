// The console's entry point: records script errors for the browser tests, draws the navigation and
// routes by URL fragment (#/offers, #/rentals/rnt_…), so the server serves one page and every
// deep link still works on reload.

const errors = [];
window.tickmarkErrors = errors;
window.addEventListener("error", (e) => errors.push(`error: ${e.message} at ${e.filename}:${e.lineno}`));
window.addEventListener("unhandledrejection", (e) => {
  if (e.reason?.name !== "AbortError") errors.push(`unhandled rejection: ${e.reason?.stack ?? e.reason}`);
});
document.addEventListener("securitypolicyviolation", (e) =>
  errors.push(`CSP violation: ${e.violatedDirective} ${e.blockedURI}`),
);

const { session } = await import("./api.js");
const { h } = await import("./ui.js");
const pub = await import("./pages/public.js");
const renter = await import("./pages/renter.js");
const provider = await import("./pages/provider.js");
const operator = await import("./pages/operator.js");

// [pattern, page name, render(view, {signal, params})]
const ROUTES = [
  [/^\/?$/, "offers", pub.offers],
  [/^\/offers$/, "offers", pub.offers],
  [/^\/cookbook$/, "cookbook", pub.cookbook],
  [/^\/earnings$/, "earnings", pub.earnings],
  [/^\/job-cost$/, "job-cost", pub.jobCost],
  [/^\/sign-in$/, "sign-in", renter.signIn],
  [/^\/account$/, "account", renter.account],
  [/^\/launch$/, "launch", renter.launch],
  [/^\/launch\/(snap_[A-Za-z0-9_-]+)$/, "launch", renter.launch],
  [/^\/rentals$/, "rentals", renter.rentals],
  [/^\/rentals\/([A-Za-z0-9_-]+)$/, "rental", renter.rental],
  [/^\/snapshots$/, "snapshots", renter.snapshots],
  [/^\/ledger$/, "ledger", renter.ledger],
  [/^\/keys$/, "keys", renter.keys],
  [/^\/hosts$/, "hosts", provider.hosts],
  [/^\/hosts\/([A-Za-z0-9_-]+)$/, "host", provider.host],
  [/^\/ops$/, "ops", operator.audit],
  [/^\/ops\/hosts$/, "ops-hosts", operator.hosts],
  [/^\/ops\/hosts\/([A-Za-z0-9_-]+)\/rentals$/, "ops-host-rentals", operator.hostRentals],
  [/^\/ops\/payouts$/, "ops-payouts", operator.payouts],
];

const NAV = [
  ["Market", [["#/offers", "Offers"], ["#/cookbook", "Cookbook"], ["#/job-cost", "Job cost"], ["#/earnings", "Earnings estimator"]]],
  ["Renter", [["#/account", "Account"], ["#/launch", "Launch"], ["#/rentals", "Rentals"], ["#/snapshots", "Snapshots"], ["#/ledger", "Ledger"], ["#/keys", "Keys"]]],
  ["Provider", [["#/hosts", "Hosts"]]],
  ["Operator", [["#/ops", "Audit"], ["#/ops/hosts", "Hosts"], ["#/ops/payouts", "Payouts"]]],
];

const nav = document.getElementById("nav");
const view = document.getElementById("view");
const who = document.getElementById("who");
let current = null;

function drawNav(path) {
  nav.replaceChildren(
    ...NAV.map(([group, links]) =>
      h(
        "div",
        { class: "nav-group" },
        h("span", { class: "nav-title" }, group),
        h(
          "ul",
          {},
          links.map(([href, text]) =>
            h("li", {}, h("a", { href, "aria-current": href === `#${path}` ? "page" : null }, text)),
          ),
        ),
      ),
    ),
  );
  const signedIn = [];
  if (session.key()) signedIn.push("API key");
  if (session.operator()) signedIn.push("operator token");
  who.replaceChildren(
    signedIn.length
      ? h(
          "span",
          {},
          `Signed in (${signedIn.join(", ")}) for this tab `,
          h("button", { type: "button", id: "sign-out", onclick: signOut }, "Sign out"),
        )
      : h("a", { href: "#/sign-in" }, "Sign in"),
  );
}

function signOut() {
  session.setKey(null);
  session.setOperator(null);
  location.hash = "#/offers";
  route();
}

async function route() {
  const path = location.hash.replace(/^#/, "") || "/";
  current?.abort(); // closes the previous page's streams
  const controller = new AbortController();
  current = controller;
  drawNav(path);
  let match = null;
  let found = null;
  for (const r of ROUTES) {
    match = r[0].exec(path);
    if (match) {
      found = r;
      break;
    }
  }
  view.removeAttribute("data-ready");
  view.replaceChildren();
  if (!found) {
    view.dataset.page = "not-found";
    view.append(h("h1", {}, "Not found"), h("p", {}, "No such page. ", h("a", { href: "#/offers" }, "See the offers.")));
    view.dataset.ready = "true";
    return;
  }
  view.dataset.page = found[1];
  try {
    await found[2](view, { signal: controller.signal, params: match.slice(1), refresh: route });
  } catch (e) {
    if (e.name === "AbortError") return;
    view.append(h("p", { class: "error", role: "alert" }, e.message ?? String(e)));
  }
  if (current === controller) {
    view.dataset.ready = "true";
    view.querySelector("h1")?.focus?.();
  }
}

window.addEventListener("hashchange", route);
window.addEventListener("tickmark:session", () => drawNav(location.hash.replace(/^#/, "")));
route();
