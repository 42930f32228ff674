// The AccelOpt dashboard page. It only renders: every figure comes ready-made from the
// server's view models (replay/dashboard/models.py), pushed by server-sent events.
"use strict";

const QUERY = new URLSearchParams(location.search);
const TOKEN = QUERY.get("token");
const main = document.getElementById("main");
const conn = document.getElementById("conn");
const drawer = document.getElementById("drawer");
const drawerBody = document.getElementById("drawer-body");

// URLs keep the token when the page was opened with one (the server also sets a cookie)
function withToken(path) {
  if (!TOKEN) return path;
  return path + (path.includes("?") ? "&" : "?") + "token=" + encodeURIComponent(TOKEN);
}

// h("td", {class: "num"}, "text", child, ...): an element; strings become text nodes
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

// server-made markup (SVG charts, diffs): escaped on the server
function trusted(html, cls) {
  const d = h("div", {class: cls || ""});
  d.innerHTML = html;
  return d;
}

// a header that may wrap after an underscore (status names such as timing_mismatch are one word)
function breakable(text) {
  return String(text).split("_").flatMap((part, i) => i ? ["_", h("wbr", {}), part] : [part]);
}

// numeric: the first right-aligned column, or the list of right-aligned columns
function table(cls, head, rows, numeric) {
  const nf = numeric === undefined ? 1 : numeric;
  const isNum = (i) => Array.isArray(nf) ? nf.includes(i) : i >= nf;
  // in a box that scrolls sideways where the table is wider than the page, never the page
  return h("div", {class: "table-wrap"}, h("table", {class: cls},
    h("thead", {}, h("tr", {}, head.map((c, i) => h("th", {class: isNum(i) ? "num" : null}, breakable(c))))),
    h("tbody", {}, rows)));
}

function cell(text, attrs, i, nf) {
  const a = Object.assign({}, attrs || {});
  if (i >= (nf === undefined ? 1 : nf)) a.class = ((a.class || "") + " num").trim();
  return h("td", a, text);
}

function statusClass(st) {
  return st === "passed" ? "st-passed" : (st === "pending" ? "st-pending" : "st-bad");
}

function liveBadge(row) { return row.live ? h("span", {class: "live", title: "following the event stream"}, "live") : null; }

function spend(row) {
  const frac = row.spend_fraction;
  const bar = frac === null ? null : h("span", {class: "spend" + (frac > 1 ? " over" : "")},
    h("i", {style: `width:${Math.min(100, 100 * frac).toFixed(1)}%`}));
  return [row.cost_text + " / " + row.budget_text, bar];
}

// a geomean speedup and what it was computed from (re-measured or recorded), with the
// recorded figure beside a re-measured one that it disagrees with
function speedupFigure(row, id) {
  return [h("b", {id: id || null}, row.speedup_text), " ",
    h("span", {class: "src", "data-label": "speedup"}, row.speedup_label +
      (row.speedup_disagrees ? ` · recorded ${row.recorded_speedup_text}` : ""))];
}

function navigate(path) {
  history.pushState({}, "", withToken(path));
  route();
}

function link(path, text, attrs) {
  return h("a", Object.assign({href: withToken(path), onclick: (ev) => {
    if (ev.ctrlKey || ev.metaKey || ev.shiftKey) return;
    ev.preventDefault(); navigate(path);
  }}, attrs || {}), text);
}

function kernelButton(runId, kernelId, label) {
  return h("button", {type: "button", class: "kernel", "data-kernel": kernelId,
                      onclick: () => openKernel(runId, kernelId)}, label || kernelId.slice(0, 12));
}

// --- live updates -----------------------------------------------------------------------------

let source = null;
function follow(path, onModel, onMissing) {
  if (source) source.close();
  conn.textContent = "connecting"; conn.className = "conn";
  source = new EventSource(withToken(path));
  source.onopen = () => { conn.textContent = "connected"; conn.className = "conn up"; };
  source.onerror = () => { conn.textContent = "reconnecting…"; conn.className = "conn down"; };
  source.onmessage = (ev) => onModel(JSON.parse(ev.data));
  source.addEventListener("missing", () => onMissing && onMissing());
}

// after each render, at the next frame (when the browser paints it): mark what is on
// screen, for tests and benchmarks/dashboard_bench.py (__firstRender: the first figures
// painted; __fullRender: the whole page)
function rendered(detail) {
  requestAnimationFrame(() => {
    if (window.__firstRender === undefined) window.__firstRender = performance.now();
    if (window.__fullRender === undefined) window.__fullRender = performance.now();
    document.body.dataset.events = detail.events;
    document.dispatchEvent(new CustomEvent("accelopt:render", {detail: Object.assign({t: Date.now()}, detail)}));
  });
}

// sections re-render only when their part of the model changed (open drawers, scroll stay)
function sectionUpdater(container) {
  const last = {};
  const nodes = {};
  return (key, data, build) => {
    const json = JSON.stringify(data);
    if (last[key] === json) return;
    last[key] = json;
    const node = h("section", {class: "block", id: "sec-" + key}, build(data));
    if (nodes[key]) nodes[key].replaceWith(node); else container.append(node);
    nodes[key] = node;
  };
}

// --- runs list --------------------------------------------------------------------------------

function runsPage() {
  document.title = "AccelOpt runs";
  const picked = new Set();
  const body = h("div", {});
  const compareBtn = h("button", {type: "button", id: "compare-selected", disabled: true, onclick: () =>
    navigate("/compare?runs=" + [...picked].map(encodeURIComponent).join(","))}, "compare selected");
  main.replaceChildren(h("h1", {}, "Runs"), h("p", {class: "sub", id: "runs-sub"}), compareBtn, body);
  follow("/api/runs/stream", (m) => {
    const held = m.runs.filter((r) => r.source === "stream (stopped)").length;
    document.getElementById("runs-sub").textContent = `${m.runs.length} run(s) · root ${m.root} · ` +
      (m.stream ? `following the event stream ${m.stream}` : "not following an event stream now" +
        (held ? ` (${held} run(s) as last read from one that stopped)` : ""));
    const head = ["", "run", "status", "problems", "iterations", "best %peak (geomean)", "speedup (geomean)",
                  "spend / budget", "kernels", "events", "started", "last event", "source"];
    const rows = m.runs.map((r) => h("tr", {"data-run": r.run_id},
      h("td", {}, h("input", {type: "checkbox", checked: picked.has(r.run_id), onchange: (ev) => {
        if (ev.target.checked) picked.add(r.run_id); else picked.delete(r.run_id);
        compareBtn.disabled = picked.size < 2;
      }})),
      h("td", {}, link("/run/" + encodeURIComponent(r.run_id), r.run_id)),
      h("td", {"data-col": "status", class: r.state === "failed" ? "status-failed" : null,
               title: r.resume ? "to go on: " + r.resume : null}, r.status, liveBadge(r)),
      cell(r.problems, {"data-col": "problems"}, 3, 3),
      cell(r.iterations, {"data-col": "iterations"}, 4, 3),
      cell(r.pct_peak_text, {"data-col": "pct_peak"}, 5, 3),
      h("td", {"data-col": "speedup", class: "num"}, speedupFigure(r)),
      cell(spend(r), {"data-col": "spend"}, 7, 3),
      cell(r.kernels, {"data-col": "kernels"}, 8, 3),
      cell(r.events, {"data-col": "events"}, 9, 3),
      h("td", {}, r.started), h("td", {}, r.last_event), h("td", {}, r.source)));
    const queues = (m.device_queues || []).length ? h("div", {class: "block", id: "device-queues"},
      h("h2", {}, "Device queue"), ...m.device_queues.map((line) => h("p", {class: "note"}, line))) : "";
    body.replaceChildren(queues, ...campaignsTable(m.campaigns || []), table("runs", head, rows, [3, 4, 5, 6, 7, 8, 9]),
      m.runs.length ? "" : h("p", {class: "note"}, "no runs yet: start one with `accelopt run`"),
      m.warnings.length ? h("div", {class: "warnings"}, m.warnings.map((w) => h("div", {}, "warning: " + w))) : "");
    rendered({page: "runs", runs: m.runs.length, events: m.runs.reduce((a, r) => a + r.events, 0)});
  });
}

// --- campaigns --------------------------------------------------------------------------------

// the campaigns list and the "Runs" heading under it, as nodes to spread into a parent
// (replaceChildren does not flatten an array: it would print it as text); none without campaigns
function campaignsTable(list) {
  if (!list.length) return [];
  const head = ["campaign", "status", "runs", "items", "speedup (geomean)", "spend / budget", "policy", "started",
                "last event"];
  return [h("h2", {}, "Campaigns"), table("campaigns", head, list.map((c) => h("tr", {"data-campaign": c.campaign_id},
    h("td", {}, link("/campaign/" + encodeURIComponent(c.campaign_id), c.campaign_id)),
    h("td", {"data-col": "status", title: c.resume ? "to go on: " + c.resume : null}, c.status,
      c.live ? h("span", {class: "live"}, "live") : null),
    cell(c.runs, {"data-col": "runs"}, 2, 2), cell(c.items, {}, 3, 2),
    cell(c.speedup_text, {"data-col": "speedup"}, 4, 2), cell(c.spend_text, {"data-col": "spend"}, 5, 2),
    h("td", {}, c.policy), h("td", {}, c.started), h("td", {}, c.last_event))), [2, 3, 4, 5]),
    h("h2", {}, "Runs")];
}

// a table of rows of ready-made text cells; `runCol`: the column holding a run id (a link to its page)
function textTable(cls, head, rows, numeric, runCol) {
  return table(cls, head, rows.map((r) => h("tr", {"data-key": r[runCol === undefined ? 0 : runCol]},
    r.map((text, i) => i === runCol ? h("td", {}, link("/run/" + encodeURIComponent(text), text))
                                    : h("td", {class: numeric.includes(i) ? "num" : null}, text)))), numeric);
}

function campaignPage(campaignId) {
  document.title = "AccelOpt campaign " + campaignId;
  const up = sectionUpdater(main);
  main.replaceChildren(h("p", {class: "note"}, "loading campaign " + campaignId + "…"));
  let first = true;
  follow("/api/campaign/" + encodeURIComponent(campaignId) + "/stream", (m) => {
    if (first) { main.replaceChildren(); first = false; }
    const c = m.campaign;
    up("head", c, () => [
      h("h1", {}, "Campaign ", h("span", {id: "campaign-id"}, c.campaign_id), c.live ? h("span", {class: "live"}, "live") : null),
      h("div", {class: "facts"},
        h("span", {}, "status ", h("b", {id: "campaign-status"}, c.status)),
        h("span", {}, "runs ", h("b", {id: "campaign-runs"}, c.runs), c.run_states ? ` (${c.run_states})` : ""),
        h("span", {}, "speedup (geomean) ", h("b", {id: "campaign-speedup"}, c.speedup_text)),
        h("span", {}, "LLM spend ", h("b", {id: "campaign-spend"}, c.spend_text)),
        h("span", {}, "policy ", h("b", {}, c.policy)),
        h("span", {}, "started ", h("b", {}, c.started), " · last event ", c.last_event),
        h("span", {}, link("/campaign-report/" + encodeURIComponent(c.campaign_id), "static report",
          {target: "_blank", onclick: null}))),
      c.stopped ? h("p", {class: "note", id: "campaign-stopped"}, "why it ended: " + c.stopped) : null,
      c.resume ? h("p", {class: "note", id: "campaign-resume"}, `${c.state}: to go on, `, h("code", {}, c.resume)) : null]);
    up("items", m.items, () => [h("h2", {}, "Items"),
      h("div", {id: "campaign-items"}, textTable("items", m.item_headers, m.items, [1, 2, 3, 4])),
      h("p", {class: "note", id: "campaign-figures"}, m.figures_note)]);
    up("devices", m.devices, () => [h("h2", {}, "Per device: best speedup and % of peak over time, and the queue"),
      m.devices.map((d) => h("div", {"data-device": d.device}, h("h3", {}, d.device),
        d.parked ? h("p", {class: "warnings"}, "parked: " + d.parked) : null,
        h("div", {class: "grid2"}, trusted(d.speedup_svg), trusted(d.pct_svg)),
        d.queue.length ? textTable("queue", d.queue_headers, d.queue, [3])
                       : h("p", {class: "note"}, "nothing scheduled on it yet")))]);
    up("spend", [m.spend_svg, m.spend_per_day], () => [h("h2", {}, "Spend per day"),
      h("div", {id: "campaign-spend-chart"}, trusted(m.spend_svg))]);
    up("runs", m.runs, () => [h("h2", {}, "Runs"),
      h("div", {id: "campaign-runs-table"}, textTable("campaign-runs", m.run_headers, m.runs, [0, 5, 6, 7], 1))]);
    rendered({page: "campaign", events: c.events, runs: c.runs});
  }, () => main.replaceChildren(h("div", {class: "waiting"}, "no campaign " + campaignId + " yet: waiting for its first event")));
}

// --- one run ----------------------------------------------------------------------------------

function header(r) {
  return [
    h("h1", {}, "Run ", h("span", {id: "run-id"}, r.run_id), liveBadge(r)),
    h("div", {class: "facts"},
      h("span", {}, "status ", h("b", {id: "run-status"}, r.status)),
      h("span", {}, "iterations ", h("b", {id: "run-iterations"}, r.iterations)),
      h("span", {}, "best %peak ", h("b", {id: "run-pct"}, r.pct_peak_text)),
      h("span", {}, "speedup (geomean) ", speedupFigure(r, "run-speedup")),
      h("span", {}, "spend ", h("b", {id: "run-spend"}, spend(r))),
      h("span", {}, "LLM calls ", h("b", {}, r.llm_calls), " · tokens ", h("b", {}, r.tokens_text)),
      h("span", {}, "kernels ", h("b", {id: "run-kernels"}, r.kernels)),
      h("span", {}, "events ", h("b", {id: "events", "data-value": r.events}, r.events)),
      h("span", {}, "started ", h("b", {}, r.started), " · ", r.duration),
      h("span", {}, "device ", h("b", {}, r.device || "-"), " · ", r.search || "", " · ", r.models.join(", ") || "-"),
      r.parent_run ? h("span", {}, "forked from ", link("/run/" + r.parent_run, r.parent_run),
                       " @ iteration " + r.fork_iteration) : null,
      h("span", {}, "source ", r.source),
      h("span", {}, link("/report?runs=" + encodeURIComponent(r.run_id), "static report", {target: "_blank",
        onclick: null}))),
    r.resume ? h("p", {class: "note", id: "run-resume"}, `${r.state}: to go on, `, h("code", {}, r.resume)) : null,
  ];
}

function problemsTable(runId, rows) {
  return [h("h2", {}, "Problems"), table("results", ["problem", "device", "recorded baseline", "recorded best",
    "recorded speedup", "re-measured speedup (baseline / best)", "base %peak", "best %peak", "kernels", "iterations",
    "LLM cost", "best kernel", "note"],
  rows.map((p) => h("tr", {"data-problem": p.problem},
    h("td", {}, p.problem), h("td", {}, p.device),
    cell(p.baseline_text, {"data-col": "baseline"}, 2, 2),
    cell(p.best_text, {"data-col": "best", class: p.best_open ? "open" : null}, 3, 2),
    cell(p.speedup_text, {"data-col": "speedup"}, 4, 2),
    cell(p.remeasured_text, {"data-col": "remeasured", title: p.remeasured_title || null}, 5, 2),
    cell(p.baseline_pct_text, {"data-col": "base_pct"}, 6, 2),
    cell(p.best_pct_text, {"data-col": "best_pct"}, 7, 2), cell(p.kernels, {"data-col": "kernels"}, 8, 2),
    cell(p.iterations, {"data-col": "iterations"}, 9, 2), cell(p.cost_text, {}, 10, 2),
    h("td", {}, p.best_kernel_id ? kernelButton(runId, p.best_kernel_id) : "-"),
    h("td", {"data-col": "note"}, p.note))), [2, 3, 4, 5, 6, 7, 8, 9, 10]),
  h("p", {class: "note"}, "recorded: the profiles of the search (the best kernel measured so far, also while its " +
    "iteration is open); re-measured: baseline and best timed again in interleaved rounds on fresh seeds at the end " +
    "of the problem, the speedup being the ratio of their medians")];
}

function charts(list) {
  return [h("h2", {}, "Progress per problem"), h("div", {class: "cards"}, list.map((c) => h("div",
    {"data-problem": c.problem}, h("h3", {}, c.problem),
    h("div", {class: "charts"}, trusted(c.pct_svg), trusted(c.speedup_svg)))))];
}

function beams(runId, list) {
  return [h("h2", {}, "Current beam"), h("div", {class: "cards"}, list.map((b) => h("div", {"data-problem": b.problem},
    h("h3", {}, b.problem, b.iteration === null ? "" : ` · iteration ${b.iteration}`),
    b.members.length ? table("beam", ["kernel", "found in", "latency", "% of peak", "speedup", "plan"],
      b.members.map((m) => h("tr", {"data-kernel": m.kernel_id, class: m.best ? "best" : null},
        h("td", {}, kernelButton(runId, m.kernel_id), m.best ? " ★" : ""), cell(m.iteration, {}, 1),
        cell(m.latency_text, {}, 2), cell(m.pct_text, {}, 3), cell(m.speedup_text, {}, 4),
        h("td", {}, m.plan))), 1) : h("p", {class: "note"}, "no beam selected yet"),
    b.kept.length ? h("p", {class: "note kept"}, `kept after iteration ${b.kept_iteration}: `,
      ...b.kept.map((k) => h("span", {"data-kernel": k}, kernelButton(runId, k), " "))) : null)))];
}

function kernels(runId, k) {
  const problems = Object.keys(k.counts).sort();
  const statusTable = table("statuses", ["problem", ...k.statuses, "fix attempts", "fixes passed"],
    problems.map((p) => h("tr", {"data-problem": p}, h("td", {}, p),
      k.statuses.map((s, i) => cell(k.counts[p][s] || 0, {"data-status": s}, i + 1)),
      cell(k.fix_attempts[p], {}, 99), cell(k.fixes_passed[p], {}, 99))));
  const groups = k.failures.length ? [h("h3", {}, "Why kernels failed"), table("failures",
    ["status", "reason", "kernels", "examples"], k.failures.map((g) => h("tr", {},
      h("td", {class: "st-bad"}, g.status), h("td", {}, h("code", {}, g.reason)), cell(g.count, {}, 2),
      h("td", {}, g.kernel_ids.map((id) => [kernelButton(runId, id, id.slice(0, 8)), " "])))), 2)] : [];
  const proposals = k.proposal_failures.length ? [h("h3", {}, "LLM replies without a plan or kernel"),
    table("proposal-failures", ["stage", "reason", "count"], k.proposal_failures.map((g) => h("tr", {},
      h("td", {}, g.status), h("td", {}, g.reason), cell(g.count, {}, 2))), 2)] : [];
  const recent = [h("h3", {}, `Latest kernels (${k.recent.length} of ${k.total})`), table("kernels",
    ["kernel", "problem", "iteration", "kind", "status", "latency", "% of peak", "what"],
    k.recent.map((r) => h("tr", {"data-kernel": r.kernel_id}, h("td", {}, kernelButton(runId, r.kernel_id)),
      h("td", {}, r.problem), cell(r.iteration, {}, 2), h("td", {}, r.kind),
      h("td", {class: statusClass(r.status)}, r.status), cell(r.latency_text, {}, 5), cell(r.pct_text, {}, 6),
      h("td", {}, r.what))), 2)];
  return [h("h2", {}, "Kernels"), statusTable, groups, proposals, recent];
}

function lineage(runId, blocks) {
  return [h("h2", {}, "Lineage of the best kernels"), blocks.map((b) => h("div", {"data-problem": b.problem},
    h("h3", {}, b.problem),
    b.steps.length ? h("ol", {class: "lineage", "data-problem": b.problem}, b.steps.map((s) =>
      h("li", {class: `step ${s.kind}` + (s.status === "passed" ? "" : " failed"), "data-kernel": s.kernel_id},
        h("div", {class: "step-head"}, h("span", {class: "kind"}, s.label), kernelButton(runId, s.kernel_id),
          ` · iteration ${s.iteration} · ${s.status}`,
          s.status === "passed" ? ` · ${s.latency_text} · ${s.pct_text} of peak` : "",
          s.kind !== "baseline" ? ` · ${s.speedup_text} over baseline · ${s.step_speedup_text} this step` : "",
          s.siblings ? ` · ${s.siblings} sibling(s)` : "",
          s.previous_id ? h("button", {type: "button", class: "kernel diff-open", "data-kernel": s.kernel_id,
            onclick: () => openKernel(runId, s.kernel_id)}, `diff +${s.added} −${s.removed}`) : null),
        s.plan ? h("div", {class: "plan"}, s.plan) : null))) : h("p", {class: "note"}, "no best kernel yet")))];
}

function llm(rows, costSvg) {
  return [h("h2", {}, "LLM calls"), h("div", {class: "grid2"},
    table("usage", ["role", "calls", "failed", "prompt tokens", "completion tokens", "tokens", "cost",
      "mean latency", "total latency"], rows.map((u) => h("tr", {"data-role": u.role}, h("td", {}, u.role),
      cell(u.calls, {"data-col": "calls"}, 1), cell(u.failed, {}, 2), cell(u.prompt_tokens, {"data-col": "prompt"}, 3),
      cell(u.completion_tokens, {"data-col": "completion"}, 4), cell(u.tokens_text, {}, 5),
      cell(u.cost_text, {"data-col": "cost"}, 6), cell(u.mean_latency_text, {"data-col": "latency"}, 7),
      cell(u.total_latency_text, {}, 8)))),
    trusted(costSvg))];
}

function memory(m) {
  return [h("h2", {}, "Memory"),
    m.memory_enabled ? null : h("p", {class: "note"}, "memory retrieval off in this run (memory.enabled=false)"),
    h("h3", {}, "Retrieved, per iteration"),
    m.retrievals.length ? table("memory", ["problem", "iteration", "candidates", "insights", "from other problems",
      "top insights"], m.retrievals.map((r) => h("tr", {}, h("td", {}, r.problem), cell(r.iteration, {}, 1),
      cell(r.candidates, {}, 2), cell(r.insights, {}, 3), cell(r.foreign, {}, 4), h("td", {}, r.top.join("; ")))))
      : h("p", {class: "note"}, "no retrievals yet"),
    h("h3", {}, `Added by this run (${m.insights.length} of ${m.insights_total}, latest first)`),
    m.insights.length ? table("insights", ["iteration", "problem", "title", "speedup", "kind"],
      m.insights.map((i) => h("tr", {}, cell(i.iteration === null ? "-" : i.iteration, {}, 0), h("td", {}, i.problem),
        h("td", {}, i.title), cell(i.speedup_text, {}, 0), h("td", {}, i.kind))), 9)
      : h("p", {class: "note"}, "no insights added yet")];
}

// the run page's sections and the model fields each one shows
const RUN_SECTIONS = [
  ["header", ["run"], (m) => header(m.run)],
  ["problems", ["problems"], (m, id) => problemsTable(id, m.problems)],
  ["charts", ["charts"], (m) => charts(m.charts)],
  ["beams", ["beams"], (m, id) => beams(id, m.beams)],
  ["kernels", ["kernels"], (m, id) => kernels(id, m.kernels)],
  ["lineage", ["lineage"], (m, id) => lineage(id, m.lineage)],
  ["llm", ["llm", "cost_svg"], (m) => llm(m.llm, m.cost_svg)],
  ["memory", ["memory_enabled", "retrievals", "insights", "insights_total"], (m) => memory(m)],
];

function runPage(runId) {
  document.title = "AccelOpt run " + runId;
  const waiting = h("p", {class: "waiting"}, `waiting for run ${runId} to appear on the event stream or under the root…`);
  const body = h("div", {});
  main.replaceChildren(link("/", "← all runs"), waiting, body);
  const nodes = {};
  let model = {};
  let restPending = false;
  const draw = (key, build) => {
    const node = h("section", {class: "block", id: "sec-" + key}, build(model, runId));
    nodes[key].replaceWith(node);
    nodes[key] = node;
  };
  // the first message holds the whole model, later ones only the fields that changed
  follow("/api/run/" + encodeURIComponent(runId) + "/stream", (patch) => {
    waiting.hidden = true;
    model = Object.assign(model, patch);
    document.title = `AccelOpt ${runId} · ${model.run.status}`;
    if (restPending) return;  // the deferred drawing below uses the latest model
    if (!nodes.header) {
      // first the headline figures, painted at once; the rest (charts, tables) a moment later
      for (const [key] of RUN_SECTIONS) body.append(nodes[key] = h("section", {class: "block", id: "sec-" + key}));
      RUN_SECTIONS.slice(0, 2).forEach(([key, , build]) => draw(key, build));
      requestAnimationFrame(() => {
        if (window.__firstRender === undefined) window.__firstRender = performance.now();
      });
      restPending = true;
      setTimeout(() => {
        restPending = false;
        RUN_SECTIONS.forEach(([key, , build]) => draw(key, build));
        rendered({page: "run", run: runId, events: model.run.events});
      }, 0);
      return;
    }
    for (const [key, fields, build] of RUN_SECTIONS) {
      if (fields.some((f) => f in patch)) draw(key, build);
    }
    rendered({page: "run", run: runId, events: model.run.events});
  }, () => { waiting.hidden = false; model = {}; });
}

// --- a kernel (drawer) ------------------------------------------------------------------------

async function openKernel(runId, kernelId) {
  drawer.hidden = false;
  drawerBody.replaceChildren(h("p", {class: "note"}, "loading " + kernelId.slice(0, 12) + "…"));
  const resp = await fetch(withToken(`/api/run/${encodeURIComponent(runId)}/kernel/${encodeURIComponent(kernelId)}`));
  if (!resp.ok) { drawerBody.replaceChildren(h("p", {class: "st-bad"}, (await resp.text()))); return; }
  const k = await resp.json();
  drawerBody.replaceChildren(h("div", {id: "kernel", "data-kernel": k.kernel_id},
    h("h2", {}, "Kernel ", h("code", {}, k.kernel_id.slice(0, 12))),
    h("div", {class: "facts"}, h("span", {}, k.problem), h("span", {}, `iteration ${k.iteration}`),
      h("span", {}, k.kind), h("span", {class: statusClass(k.status)}, k.status),
      k.status === "passed" ? h("span", {}, `${k.latency_text} · ${k.pct_text} of peak`) : null,
      h("span", {}, k.language)),
    k.plan ? [h("h3", {}, "Plan"), trusted(k.plan_html, "plan md")] : null,
    k.previous_id ? [h("h3", {}, "Diff vs ", h("code", {}, k.previous_id.slice(0, 12)),
      ` (+${k.added} −${k.removed} lines)`), trusted(k.diff_html, "kernel-diff")] : null,
    k.profile.length ? h("details", {class: "profile", open: true}, h("summary", {}, "profile"),
      h("table", {class: "profile-facts"}, h("tbody", {}, k.profile.map(([f, v]) => h("tr", {}, h("th", {}, f),
        h("td", {}, v))))),
      k.log ? [h("div", {class: "note"}, "profile log"), h("pre", {class: "source log"}, k.log)] : null)
      : h("p", {class: "note"}, "not profiled yet"),
    h("details", {open: !k.previous_id}, h("summary", {}, "source"), h("pre", {class: "source"}, k.source))));
}

document.getElementById("drawer-close").addEventListener("click", () => { drawer.hidden = true; });
document.addEventListener("keydown", (ev) => { if (ev.key === "Escape") drawer.hidden = true; });

// --- compare ----------------------------------------------------------------------------------

function comparePage(ids) {
  document.title = "AccelOpt compare " + ids.join(" vs ");
  const body = h("div", {});
  main.replaceChildren(link("/", "← all runs"), h("h1", {}, "Side by side"), body);
  const update = sectionUpdater(body);
  follow("/api/compare/stream?runs=" + ids.map(encodeURIComponent).join(","), (m) => {
    update("links", m.report_path, (p) => h("p", {}, h("a", {href: withToken(p), target: "_blank", id: "report-link"},
      "static report of these runs"), " (the same figures as ", h("code", {}, "accelopt report " + ids.join(" ")), ")"));
    update("overview", m.runs, (rows) => [h("h2", {}, "Runs"), table("runs", ["run", "status", "problems",
      "iterations", "best %peak (geomean)", "speedup (geomean)", "spend / budget", "LLM calls", "tokens", "search"],
    rows.map((r, i) => h("tr", {"data-run": r.run_id}, h("td", {}, link("/run/" + r.run_id, m.labels[i])),
      h("td", {}, r.status, liveBadge(r)), cell(r.problems, {}, 2, 2), cell(r.iterations, {}, 3, 2),
      cell(r.pct_peak_text, {"data-col": "pct_peak"}, 4, 2),
      h("td", {"data-col": "speedup", class: "num"}, speedupFigure(r)),
      cell(spend(r), {}, 6, 2), cell(r.llm_calls, {}, 7, 2), cell(r.tokens_text, {}, 8, 2), h("td", {}, r.search))), 2)]);
    update("config", m.config_differences, (d) => [h("h2", {}, "Settings that differ"), d.length
      ? table("config-diff", ["config key", ...m.labels], d.map(([k, vals]) => h("tr", {}, h("td", {}, k),
        vals.map((v) => h("td", {}, v)))), 99) : h("p", {class: "note"}, "same configuration")]);
    const head = ["problem"];
    m.labels.forEach((l) => head.push(`${l} best %peak`, `${l} recorded speedup`, `${l} re-measured speedup`));
    m.labels.slice(1).forEach((l) => head.push(`%peak ${l} / ${m.labels[0]}`,
      `recorded speedup ${l} / ${m.labels[0]}`));
    update("final", [m.problems.map((p) => [p.problem, p.best_pct_text, p.speedup_text, p.remeasured_text,
      p.pct_ratio_text, p.speedup_ratio_text])], () => [h("h2", {}, "Final figures"), table("comparison", head,
      m.problems.map((p) => h("tr", {"data-problem": p.problem}, h("td", {}, p.problem),
        p.best_pct_text.map((t, i) => [cell(t, {}, 1), cell(p.speedup_text[i], {}, 1),
          cell(p.remeasured_text[i], {}, 1)]),
        p.pct_ratio_text.map((t, i) => [cell(t, {}, 1), cell(p.speedup_ratio_text[i], {}, 1)])))),
      h("p", {class: "note"}, "recorded: the search's profiles of the baseline and the best kernel; re-measured: " +
        "both timed again in interleaved rounds at the end of the problem (baseline / best medians)")]);
    update("charts", m.problems.map((p) => [p.pct_svg, p.speedup_svg]), () => [h("h2", {}, "Progress per problem"),
      h("div", {class: "cards"}, m.problems.map((p) => h("div", {"data-problem": p.problem}, h("h3", {}, p.problem),
        h("div", {class: "charts"}, trusted(p.pct_svg), trusted(p.speedup_svg)))))]);
    rendered({page: "compare", events: m.runs.reduce((a, r) => a + r.events, 0)});
  }, () => { body.replaceChildren(h("p", {class: "waiting"}, "waiting for all of " + ids.join(", ") + " to appear…")); });
}

// --- routing ----------------------------------------------------------------------------------

function route() {
  drawer.hidden = true;
  const path = location.pathname;
  if (path.startsWith("/run/")) runPage(decodeURIComponent(path.slice(5)));
  else if (path.startsWith("/campaign/")) campaignPage(decodeURIComponent(path.slice(10)));
  else if (path === "/compare") {
    comparePage((new URLSearchParams(location.search).get("runs") || "").split(",").filter((x) => x));
  } else runsPage();
}

window.addEventListener("popstate", route);
document.querySelector("a.brand").addEventListener("click", (ev) => { ev.preventDefault(); navigate("/"); });
route();
