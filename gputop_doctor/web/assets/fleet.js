// gputop-doctor's fleet page: each node's state, verdict, GPUs and findings, one frame per
// tick from /fleet/events. Everything a node sends is set with textContent, never as HTML.
"use strict";

const SEVERITIES = new Set(["critical", "warn", "info"]);
const RANK = { critical: 0, warn: 1, info: 2 };
let updates = 0;

function findingItem(f) {
  const severity = SEVERITIES.has(f.severity) ? f.severity : "info";
  const card = el("div", "finding " + severity);
  card.dataset.rule = f.rule_id;
  const head = el("h3");
  head.append(el("span", "rule", f.rule_id), " ", el("span", "scope", f.scope + " · " + f.severity));
  card.append(head, el("p", "title", f.title));
  if (f.evidence) card.append(el("p", "quiet", "Evidence: " + f.evidence));
  if (f.fix) card.append(el("p", "fix", "Fix: " + f.fix));
  return card;
}

function sortedFindings(findings) {
  return [...findings].sort((a, b) => (RANK[a.severity] ?? 3) - (RANK[b.severity] ?? 3));
}

function gpuTable(gpus) {
  const table = el("table", "gpus");
  const head = el("tr");
  for (const h of ["GPU", "util", "memory", "temp", "power"]) head.append(el("th", null, h));
  table.append(head);
  for (const g of gpus) {
    const row = el("tr");
    const mem = g.mem_total_mib ? num(g.mem_used_mib / 1024, 1) + "/" + num(g.mem_total_mib / 1024, 0, " GiB") : "–";
    row.append(el("td", null, g.index + " " + g.name), el("td", null, g.lost ? "lost" : num(g.util_pct, 0, " %")),
      el("td", null, mem), el("td", null, num(g.temp_c, 0, " °C")), el("td", null, num(g.power_w, 0, " W")));
    table.append(row);
  }
  return table;
}

function hostCard(h) {
  const card = el("div", "host " + (h.state === "ok" ? "ok" : "down"));
  card.dataset.state = h.state;
  const v = h.view;
  const head = el("h2", null, h.label + (v && v.hostname ? " · " + v.hostname : ""));
  head.append(" ", el("span", "scope", h.state + (h.error ? ": " + h.error : "")));
  card.append(head);
  if (!v) return card;
  card.append(el("p", "verdict", v.verdict || "no verdict yet"));
  if (v.gpu_problem) card.append(el("p", "note", v.gpu_problem));
  card.append(gpuTable(v.gpus));
  for (const f of sortedFindings(v.findings)) card.append(findingItem(f));
  return card;
}

function apply(view) {
  const ok = view.hosts.filter((h) => h.state === "ok").length;
  $("summary").textContent = ok + " of " + view.hosts.length + " nodes answering";
  const fleet = sortedFindings(view.fleet_findings).map(findingItem);
  $("fleet-findings").replaceChildren(...(fleet.length ? fleet : [el("p", "quiet", "none")]));
  $("hosts").replaceChildren(...view.hosts.map(hostCard));
  updates += 1;
  document.body.dataset.updates = String(updates);
}

stream("/fleet/events", apply);
