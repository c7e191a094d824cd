// gputop-doctor's live page: one frame per tick from /events, drawn with uPlot.
// Every string that comes from the monitored machine (process and GPU names, findings) is
// set with textContent, never parsed as HTML; the server's Content-Security-Policy refuses
// inline scripts anyway. Read-only: the page sends nothing but the stream request.
"use strict";

const KEEP_POINTS = 600; // ticks kept per GPU chart
const BLAME = {
  job: "the job's code or settings",
  neighbour: "another process on this host",
  machine: "the machine (hardware, driver, size)",
  unknown: "cannot tell (no job attached, or a host-wide signal)",
};
const SEVERITIES = new Set(["critical", "warn", "info"]);
const COLORS = ["#1f77b4", "#9467bd", "#d62728", "#ff7f0e", "#2ca02c"];
const SLOWED_FILL = "rgba(214,39,40,0.13)";
const gpus = new Map(); // index -> {card, title, readout, chart, data, power, clock, slowed}
let updates = 0;
let changed = 0;
let lastReadouts = null;

function age(since, now) {
  const s = Math.max(0, now - since);
  if (s < 90) return "for " + Math.round(s) + " s";
  if (s < 5400) return "for " + Math.round(s / 60) + " min";
  return "for " + (s / 3600).toFixed(1) + " h";
}

// Findings of one rule with the same fix and blame (a hot card on each of eight GPUs) make
// one card: every scope's title, the first one's evidence, the fix once.
function grouped(findings) {
  const groups = new Map();
  for (const f of findings) {
    const key = [f.id, f.severity, f.blame, f.fix].join("\u0000");
    if (!groups.has(key)) groups.set(key, []);
    groups.get(key).push(f);
  }
  return [...groups.values()];
}

function findingCard(group, now) {
  group.sort((a, b) => a.scope.localeCompare(b.scope, undefined, { numeric: true }));
  const f = group[0];
  const severity = SEVERITIES.has(f.severity) ? f.severity : "info";
  const card = el("div", "finding " + severity);
  card.dataset.rule = f.id;
  const scopes = group.map((g) => g.scope).join(", ");
  const oldest = Math.min(...group.map((g) => g.since));
  const head = el("h3");
  head.append(el("span", "rule", f.id), " ", el("span", "scope", scopes + " · " + f.severity));
  head.append(" ", el("span", "since", age(oldest, now)));
  card.append(head);
  for (const g of group) card.append(el("p", "title", g.title));
  card.append(el("p", "blame", "Whose problem: " + (BLAME[f.blame] || f.blame)));
  const evidence = el("ul", "evidence");
  for (const e of f.evidence) {
    evidence.append(el("li", null, e.label + ": " + e.value + (e.unit ? " " + e.unit : "")));
  }
  const of = group.length > 1 ? "Evidence (" + f.scope + "):" : "Evidence:";
  card.append(el("p", "quiet", of), evidence, el("p", "fix", "Fix: " + f.fix));
  return card;
}

function renderHeadline(view) {
  $("hostname").textContent = view.hostname || "gputop-doctor";
  $("source").textContent = view.source || "";
  $("clock").textContent = utcClock(view.time) + " UTC";
  $("verdict").textContent = view.verdict ? view.verdict.text : "no verdict yet";
  $("lost").textContent = "GPU-hours lost this session: " + view.gpu_hours_lost.toFixed(2);
  $("note").textContent = view.note || view.gpu_problem || "";
  const cards = grouped(view.findings).map((group) => findingCard(group, view.time));
  $("findings").replaceChildren(...(cards.length ? cards : [el("p", "quiet", "none")]));
}

function renderHost(view) {
  const h = view.host;
  $("host-line").textContent =
    "CPU " + num(h.cpu_pct, 0, " %") + " of " + (h.logical_cpus ?? "–") + " CPUs" +
    " · effective CPUs " + num(h.effective_cpus, 1) +
    " · memory " + num(h.mem_used_mib / 1024, 1) + " / " + num(h.mem_total_mib / 1024, 1) +
    " GiB · load " + num(h.load1, 2);
  const t = view.tree;
  const target = view.target.pid ? "PID " + view.target.pid : "no job attached";
  $("tree-line").textContent = !t ? target : target +
    " · " + t.processes + " processes, " + t.threads + " threads" +
    " · CPU " + num(t.cpu_pct, 0, " %") + " · RSS " + num(t.rss_mib / 1024, 1, " GiB") +
    (t.steps_per_s !== null ? " · " + num(t.steps_per_s, 2, " steps/s") : "") +
    (t.data_wait_pct !== null ? " · data wait " + num(t.data_wait_pct, 0, " %") : "");
  const rows = view.processes.map((p) => {
    const row = el("tr");
    row.append(el("td", null, p.pid), el("td", "name", p.name), el("td", null, num(p.cpu_pct, 0)),
      el("td", null, num(p.rss_mib, 0)), el("td", null, p.threads ?? "–"));
    return row;
  });
  document.querySelector("#processes tbody").replaceChildren(...rows);
}

function shadeSlowed(g) {
  return (u) => {
    const ctx = u.ctx, top = u.bbox.top, height = u.bbox.height, xs = u.data[0];
    ctx.fillStyle = SLOWED_FILL;
    let start = -1;
    for (let i = 0; i <= xs.length; i++) {
      const on = i < xs.length && g.slowed[i];
      if (on && start < 0) start = i;
      if (!on && start >= 0) {
        const x0 = u.valToPos(xs[start], "x", true);
        const x1 = u.valToPos(xs[Math.min(i, xs.length - 1)], "x", true);
        ctx.fillRect(x0, top, Math.max(x1 - x0, 2), height);
        start = -1;
      }
    }
  };
}

function utcClock(seconds) {
  return new Date(seconds * 1000).toISOString().slice(11, 19);
}

function newGpu(index) {
  const g = { data: [[], [], [], [], [], []], slowed: [] };
  g.card = el("div", "gpu");
  g.card.dataset.gpu = String(index);
  g.title = el("h3", null, "GPU " + index);
  g.readout = el("p", "readout");
  const holder = el("div", "chart");
  g.card.append(g.title, g.readout, holder);
  $("gpus").append(g.card);
  g.chart = new uPlot({
    width: 540, height: 190,
    scales: { y: { range: (u, lo, hi) => [0, Math.max(100, hi || 0)] } },
    axes: [{ values: (u, splits) => splits.map(utcClock) }, { size: 40 }],
    legend: { live: false }, // the readout above says the values now
    series: [
      {},
      { label: "util %", stroke: COLORS[0], width: 1.5 },
      { label: "memory %", stroke: COLORS[1], width: 1 },
      { label: "temp °C", stroke: COLORS[2], width: 1 },
      { label: "power % of limit", stroke: COLORS[3], width: 1 },
      { label: "SM clock % of max", stroke: COLORS[4], width: 1 },
    ],
    hooks: { drawClear: [shadeSlowed(g)] },
  }, g.data, holder);
  gpus.set(index, g);
  document.body.dataset.charts = String(gpus.size);
  return g;
}

function share(value, limit) {
  return value === null || !limit ? null : Math.min(100, (100 * value) / limit);
}

function push(g, t, p) {
  const memPct = p.mem_total_mib ? (100 * p.mem_used_mib) / p.mem_total_mib : null;
  const row = [t, p.util_pct, memPct, p.temp_c, share(p.power_w, p.power_limit_w),
    share(p.sm_clock_mhz, p.sm_clock_max_mhz)];
  row.forEach((v, i) => g.data[i].push(v));
  g.slowed.push(Boolean(p.slowed));
  if (g.data[0].length > KEEP_POINTS) {
    for (const arr of [...g.data, g.slowed]) arr.shift();
  }
}

function seed(g, h, limits) {
  for (let i = 0; i < h.time.length; i++) {
    push(g, h.time[i], {
      util_pct: h.util_pct[i] ?? null, temp_c: h.temp_c[i], power_w: h.power_w[i],
      sm_clock_mhz: h.sm_clock_mhz[i], power_limit_w: limits.power_limit_w,
      sm_clock_max_mhz: limits.sm_clock_max_mhz, mem_used_mib: h.mem_pct[i],
      mem_total_mib: h.mem_pct[i] === null ? null : 100, slowed: h.slowed[i],
    });
  }
}

function readout(p) {
  if (p.lost) return "lost: fell off the bus";
  return "util " + num(p.util_pct, 0, " %") +
    " · mem " + num(p.mem_used_mib / 1024, 1) + "/" + num(p.mem_total_mib / 1024, 0, " GiB") +
    " · " + num(p.temp_c, 0, " °C") + " · " + num(p.power_w, 0) + "/" + num(p.power_limit_w, 0, " W") +
    " · SM " + num(p.sm_clock_mhz, 0, " MHz") +
    (p.clock_events.length ? " · " + p.clock_events.join(", ") : "");
}

function renderGpus(view) {
  const history = new Map((view.history || []).map((h) => [h.index, h]));
  const texts = [];
  for (const p of view.gpus) {
    let g = gpus.get(p.index);
    if (!g) g = newGpu(p.index);
    if (history.has(p.index)) {
      g.data.forEach((arr) => (arr.length = 0));
      g.slowed.length = 0;
      seed(g, history.get(p.index), p);
      for (const arr of [...g.data, g.slowed]) arr.pop(); // the tick below
    }
    push(g, view.time, p);
    g.title.textContent = "GPU " + p.index + (p.name ? " · " + p.name : "");
    g.readout.textContent = readout(p);
    g.card.classList.toggle("slowed", Boolean(p.slowed));
    g.chart.setData(g.data);
    texts.push(g.readout.textContent);
  }
  const joined = texts.join("\n");
  if (lastReadouts !== null && joined !== lastReadouts) changed += 1;
  lastReadouts = joined;
}

function apply(view) {
  renderHeadline(view);
  renderHost(view);
  renderGpus(view);
  updates += 1;
  document.body.dataset.updates = String(updates);
  document.body.dataset.changed = String(changed);
}

stream("/events", apply);
