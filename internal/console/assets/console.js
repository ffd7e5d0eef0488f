// The djinn console: one view per page, read from /api/view/PAGE and read
// again whenever /api/events says the state changed. No framework: el()
// builds elements, each page has a render function.
"use strict";

const state = { pages: [], page: "", query: new URLSearchParams(), offset: 0, loading: false, again: false };

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? "" : v);
  }
  for (const k of kids.flat()) {
    if (k === undefined || k === null || k === false) continue;
    e.append(k instanceof Node ? k : document.createTextNode(String(k)));
  }
  return e;
}

function table(headers, rows, empty) {
  if (!rows.length) return el("p", { class: "muted" }, empty || "None.");
  return el("table", {},
    el("thead", {}, el("tr", {}, headers.map(h => el("th", { class: h.endsWith("#") ? "num" : "" }, h.replace(/#$/, ""))))),
    el("tbody", {}, rows.map(r => el("tr", r.attrs || {}, r.cells.map((c, i) => el("td", { class: headers[i]?.endsWith("#") ? "num" : "" }, c ?? ""))))));
}

function cards(pairs) {
  return el("div", { class: "cards" }, pairs.map(([k, v, cls]) => el("div", { class: "card" }, el("b", { class: cls || "" }, v), k)));
}

function mono(s) { return el("span", { class: "mono" }, s); }

// countdown shows the time left until expires (ms since the epoch, server
// clock); null is forever.
function countdown(expires) {
  if (expires === null || expires === undefined) return el("span", { class: "muted" }, "forever");
  return el("span", { class: "countdown", "data-expires": expires }, left(expires));
}

function left(expires) {
  const ms = expires - (Date.now() + state.offset);
  if (ms <= 0) return "expired";
  const s = ms / 1000;
  if (s < 60) return s.toFixed(1) + "s";
  if (s < 3600) return Math.floor(s / 60) + "m " + String(Math.floor(s % 60)).padStart(2, "0") + "s";
  if (s < 86400) return Math.floor(s / 3600) + "h " + String(Math.floor(s % 3600 / 60)).padStart(2, "0") + "m";
  return Math.floor(s / 86400) + "d " + Math.floor(s % 86400 / 3600) + "h";
}

function tickCountdowns() {
  for (const c of document.querySelectorAll(".countdown")) c.textContent = left(Number(c.dataset.expires));
}

function bytes(n) {
  const u = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : n) + " " + u[i];
}

function notice(text, error) {
  const n = document.getElementById("notice");
  n.textContent = text;
  n.className = error ? "error" : "";
  n.hidden = !text;
}

// operator adds the operator secret, when one was given, to headers: an
// operator's actions need it, and under TLS it shows every principal's
// resources.
function operator(headers) {
  const secret = sessionStorage.getItem("djinn-secret");
  if (secret) headers["Djinn-Join-Secret"] = secret;
  return headers;
}

// act asks the operator to confirm, then posts the action.
function act(action, target, what) {
  return el("button", {
    class: "act", "data-action": action, "data-target": target,
    onclick: () => confirmThen(what, async () => {
      const headers = operator({ "Djinn-Confirm": "yes", "Content-Type": "application/x-www-form-urlencoded" });
      const resp = await fetch(`/api/action/${state.page}/${action}`, { method: "POST", headers, body: new URLSearchParams({ target }) });
      const body = await resp.json().catch(() => ({}));
      if (!resp.ok) notice(`${what}: refused (${resp.status}): ${body.error || resp.statusText}`, true);
      else notice(`${what}: done.`);
      load();
    }),
  }, action);
}

function confirmThen(what, then) {
  const d = document.getElementById("confirm");
  document.getElementById("confirm-text").textContent = what + "?";
  d.returnValue = "";
  d.onclose = () => { if (d.returnValue === "yes") then(); };
  d.showModal();
}

function search(fields) {
  const form = el("form", { class: "search", onsubmit: e => {
    e.preventDefault();
    const q = new URLSearchParams();
    for (const [k, v] of new FormData(form)) if (v) q.set(k, v);
    location.hash = "#/" + state.page + (q.toString() ? "?" + q : "");
  } });
  for (const f of fields) {
    const value = state.query.get(f.name) || "";
    const input = f.options
      ? el("select", { name: f.name }, [el("option", { value: "" }, "any"), ...f.options.map(o => el("option", { value: o, selected: o === value }, o))])
      : el("input", { name: f.name, value, placeholder: f.placeholder || "" });
    form.append(el("label", {}, f.label, input));
  }
  form.append(el("button", { type: "submit" }, "Search"));
  return form;
}

const pages = {
  cluster(v) {
    return [
      ...(v.stopped ? [el("p", { class: "bad stopped" }, "This member stopped applying the log: " + v.stopped)] : []),
      cards([["node", v.node], ["state", v.state], ["leader", v.leader || "none", v.leader ? "" : "bad"], ["term", v.term],
        ["applied index", v.applied], ["commit index", v.commit], ["log", bytes(v.logBytes)], ["snapshots", bytes(v.snapshotBytes)],
        ["rules version", v.rulesVersion, v.stopped ? "bad" : ""], ["this member supports rules up to", v.rulesMax]]),
      el("h2", {}, "Members"),
      table(["Node", "Role", "Health", "Applied#", "Last contact", "Rules up to", "gRPC", "Raft", ""], v.members.map(m => ({
        attrs: { "data-node": m.node },
        cells: [mono(m.node), m.role, el("span", { class: m.health === "healthy" ? "good" : "bad", title: m.error || "" }, m.health + (m.error ? ": " + m.error : "")),
          m.applied, m.lastContactMs < 0 ? "never" : m.lastContactMs + " ms", m.rulesMax || el("span", { class: "muted" }, "not yet known"),
          mono(m.grpc || ""), mono(m.raft), act("remove", m.node, `Remove member ${m.node} from the cluster`)],
      }))),
    ];
  },
  leases(v) {
    return [
      cards([["live leases", v.total], ["renewed (this leader)", v.renewals], ["expired (this leader)", v.expired], ["cancelled", v.cancelled]]),
      search([{ name: "kind", label: "Kind", options: v.kinds }, { name: "principal", label: "Principal", placeholder: "cn:alice" }, { name: "owner", label: "Owner", placeholder: "id or fingerprint" }]),
      table(["Lease", "Kind", "Owner", "Principal", "Expires in", ""], v.leases.map(l => ({
        attrs: { "data-lease": l.lease },
        cells: [mono(l.lease), l.kind, mono(l.owner), l.principal || el("span", { class: "muted" }, "—"), countdown(l.expires), act("cancel", l.lease, `Cancel lease ${l.lease} (${l.kind})`)],
      })), "No lease matches."),
    ];
  },
  mailbox(v) {
    return [
      cards([["registrations", v.registrations.length], ["stored events", v.stored], ["delivered", v.delivered], ["failed", v.failed]]),
      table(["Registration", "Principal", "Stored#", "Delivery", "Unknown events", "Expires in", ""], v.registrations.map(r => ({
        attrs: { "data-registration": r.id },
        cells: [mono(r.id), r.principal || el("span", { class: "muted" }, "—"), r.stored, r.target ? el("span", {}, "to ", mono(r.target)) : el("span", { class: "muted" }, r.state),
          r.unknown.length ? el("ul", { class: "plain" }, r.unknown.map(u => el("li", {}, mono(u)))) : "",
          countdown(r.expires), act("drop", r.lease, `Drop mailbox registration ${r.id}`)],
      })), "No registration."),
    ];
  },
  renewal(v) {
    const out = [cards([["sets", v.sets.length], ["leases in sets", v.leases], ["renewed", v.renewed], ["failed", v.failed]])];
    for (const s of v.sets) {
      out.push(el("h2", { "data-set": s.id }, "Set ", mono(s.id), " ", el("span", { class: "muted" }, s.principal || ""), " — expires in ", countdown(s.expires), " ", act("drop", s.lease, `Drop renewal set ${s.id}`)));
      out.push(el("p", { class: "muted" }, `failure listener: ${s.failureListener || "none"}; warning listener: ${s.warningListener || "none"}`));
      out.push(table(["Lease", "Landlord", "Expires in", "Desired expiration", "Last failure"], s.leases.map(l => ({
        cells: [mono(l.lease), mono(l.landlord), countdown(l.expires), l.desired === null ? "forever" : countdown(l.desired), l.error ? el("span", { class: "bad" }, l.error) : ""],
      })), "No lease in this set."));
      if (s.leasesTotal > s.leases.length) out.push(el("p", { class: "muted" }, `the first ${s.leases.length} of ${s.leasesTotal} leases (djinn renewal ls lists them all)`));
    }
    return out;
  },
  txn(v) {
    return [
      cards([["transactions", v.transactions.length], ["active", v.active], ["committed", v.committed], ["aborted", v.aborted], ["unreachable participants", v.unreachable, v.unreachable ? "bad" : ""]]),
      search([{ name: "state", label: "State", options: ["ACTIVE", "VOTING", "PREPARED", "COMMITTED", "ABORTED"] }, { name: "principal", label: "Principal" }]),
      table(["Id#", "State", "Principal", "Parent", "Participants (vote, told)", "Not yet told", ""], v.transactions.map(t => ({
        attrs: { "data-txn": t.id },
        cells: [t.id, t.state, t.principal || el("span", { class: "muted" }, "—"), t.parent === "0" ? "" : t.parent, el("ul", { class: "plain" }, t.participants.map(p => el("li", {}, mono(p.ref), ` ${p.vote}${p.notified ? ", told" : ""}`))),
          t.untold, t.state === "ACTIVE" || t.state === "VOTING" ? act("abort", String(t.id), `Abort transaction ${t.id}`) : ""],
      })), "No transaction."),
    ];
  },
  lock(v) {
    const out = [cards([["lock sets", v.sets.length], ["owners", v.owners], ["waiting", v.waiting], ["deadlocks refused", v.deadlocks]])];
    for (const s of v.sets) {
      out.push(el("h2", { "data-set": s.id }, "Set ", mono(s.id), s.transactional ? " (transactional)" : "", " ", el("span", { class: "muted" }, s.principal || ""),
        ` — last fencing token ${s.fence}`, " ", act("drop", s.lease, `Destroy lock set ${s.id}`)));
      out.push(table(["Holder", "Modes (count)", "Fencing tokens"], s.holders.map(h => ({
        cells: [mono(h.holder), Object.entries(h.counts).map(([m, n]) => `${m}×${n}`).join(" "), h.locks.map(l => `${l.mode}:${l.fence}`).join(" ")],
      })), "Nobody holds a lock."));
      out.push(el("p", { class: "muted" }, "Waiting, first in line first:"));
      out.push(table(["#", "Holder", "Mode", "From", "Request"], s.waiters.map((w, i) => ({
        attrs: { class: "waiter" },
        cells: [i + 1, mono(w.holder), w.mode, w.from || "", mono(w.request)],
      })), "Nobody waits."));
    }
    return out;
  },
  lookup(v) {
    return [
      cards([["items", v.total], ["watches", v.watches.length], ["lookups", v.lookups]]),
      search([{ name: "type", label: "Service type", placeholder: "Printer" }, { name: "attr", label: "Attribute", placeholder: "Name.name=laser" }, { name: "id", label: "Service id" }]),
      table(["Service id", "Principal", "Types", "Attributes", "Service", "Expires in", ""], v.items.map(i => ({
        attrs: { "data-item": i.id },
        cells: [mono(i.id), i.principal || el("span", { class: "muted" }, "—"), i.types.join(", "), el("ul", { class: "plain" }, i.entries.map(e => el("li", {}, e))), mono(i.service), countdown(i.expires), i.lease ? act("drop", i.lease, `Drop the registration of ${i.id}`) : el("span", { class: "muted" }, i.others ? "another principal's" : "the registrar's own")],
      })), "No item matches."),
      el("h2", {}, "Watches"),
      table(["Watch", "Template", "Transitions", "Event id#", "Sequence#", "Listener", "Expires in"], v.watches.map(w => ({
        cells: [mono(w.id), w.template, w.transitions, w.eventId, w.seq, mono(w.listener), countdown(w.expires)],
      })), "No watch."),
    ];
  },
  lds(v) {
    return [
      cards([["registrations", v.registrations.length], ["registrars known", v.registrars], ["events delivered", v.delivered]]),
      table(["Registration", "Principal", "Groups", "Locators", "Discovered registrars", "Event id#", "Expires in", ""], v.registrations.map(r => ({
        attrs: { "data-registration": r.id },
        cells: [mono(r.id), r.principal || el("span", { class: "muted" }, "—"), r.groups, r.locators.join(", ") || el("span", { class: "muted" }, "none"),
          r.registrars.length ? el("ul", { class: "plain" }, r.registrars.map(g => el("li", {}, mono(g)))) : el("span", { class: "muted" }, "none yet"),
          r.eventId, countdown(r.expires), act("drop", r.lease, `Drop lookup discovery registration ${r.id}`)],
      })), "No registration."),
    ];
  },
};

async function load() {
  if (state.loading) { state.again = true; return; }
  state.loading = true;
  try {
    do {
      state.again = false;
      const page = state.page;
      const resp = await fetch(`/api/view/${page}?${state.query}`, { headers: operator({ Accept: "application/json" }) });
      const v = await resp.json();
      if (page !== state.page) continue;
      const root = document.getElementById("page");
      if (!resp.ok) { root.replaceChildren(el("p", { class: "bad" }, v.error || resp.statusText)); continue; }
      state.offset = v.now - Date.now();
      const title = state.pages.find(p => p.name === page)?.title || page;
      root.replaceChildren(el("h2", {}, title), ...(pages[page] ? pages[page](v) : [el("pre", {}, JSON.stringify(v, null, 2))]));
      root.dataset.loaded = String(Date.now());
    } while (state.again);
  } catch (e) {
    notice("reading the view failed: " + e, true);
  } finally {
    state.loading = false;
  }
}

function route() {
  const [path, query] = location.hash.replace(/^#\/?/, "").split("?");
  state.page = state.pages.some(p => p.name === path) ? path : state.pages[0].name;
  state.query = new URLSearchParams(query || "");
  for (const a of document.querySelectorAll("#menu a")) a.classList.toggle("current", a.dataset.page === state.page);
  notice("");
  load();
}

function live() {
  const status = document.getElementById("live");
  const es = new EventSource("/api/events");
  es.onopen = () => { status.textContent = "live"; status.className = "on"; };
  es.onmessage = () => load();
  es.onerror = () => { status.textContent = "reconnecting"; status.className = "off"; };
}

async function start() {
  const resp = await fetch("/api/pages");
  state.pages = await resp.json();
  if (!resp.ok) { notice(state.pages.error || resp.statusText, true); return; }
  document.getElementById("menu").replaceChildren(...state.pages.map(p => el("a", { href: "#/" + p.name, "data-page": p.name }, p.title)));
  const secret = document.getElementById("secret");
  secret.value = sessionStorage.getItem("djinn-secret") || "";
  secret.addEventListener("change", () => { sessionStorage.setItem("djinn-secret", secret.value); load(); });
  document.getElementById("operator").addEventListener("submit", e => e.preventDefault());
  window.addEventListener("hashchange", route);
  setInterval(tickCountdowns, 200);
  route();
  live();
}

document.addEventListener("DOMContentLoaded", start);
