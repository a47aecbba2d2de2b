// The croupier dashboard: polls /dashboard/data.json and draws plain SVG line charts.
"use strict";

const POLL_MS = 2000;
const W = 560, H = 220, PAD = { l: 48, r: 12, t: 10, b: 26 };
const COLORS = ["#2b6cb0", "#dd6b20", "#38a169", "#805ad5", "#c53030", "#319795"];
const SVG_NS = "http://www.w3.org/2000/svg";

function el(name, attrs, text) {
  const e = document.createElementNS(SVG_NS, name);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

function niceMax(v) {
  if (!(v > 0)) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 5, 10]) if (v <= m * p) return m * p;
  return 10 * p;
}

const finite = (p) => p[1] !== null && isFinite(p[1]);

// A time series' runs of data: it is cut where a value is missing (null: e.g. no decisions in
// that second, so no latency) and where samples are further apart than a few sampling steps
// (the server or its sampler paused). A line drawn across either would show data nobody saw.
function segments(points, time) {
  const xs = points.map((p) => p[0]);
  const steps = xs.slice(1).map((x, i) => x - xs[i]).filter((d) => d > 0).sort((a, b) => a - b);
  const maxStep = time && steps.length ? 3 * steps[Math.floor(steps.length / 2)] : Infinity;
  const runs = [];
  let run = [];
  let prevX = null;
  for (const p of points) {
    const gap = prevX !== null && p[0] - prevX > maxStep;
    if (!finite(p) || gap) {
      if (run.length) runs.push(run);
      run = [];
    }
    if (finite(p)) run.push(p);
    prevX = p[0];
  }
  if (run.length) runs.push(run);
  return runs;
}

// series: [{name, points: [[x, y], ...], bars?: [[x, lo, hi], ...]}]; opts: {xLabel, time, yMin}
function drawChart(svg, series, opts) {
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
  svg.replaceChildren();
  const all = series.flatMap((s) => s.points.filter(finite));
  svg.dataset.points = String(Math.max(0, ...series.map((s) => s.points.length)));
  if (all.length === 0) {
    svg.appendChild(el("text", { x: W / 2, y: H / 2, "text-anchor": "middle", class: "empty" }, opts.empty || "no data yet"));
    return;
  }
  const xs = all.map((p) => p[0]);
  const lows = series.flatMap((s) => (s.bars || []).map((b) => b[1]));
  const highs = series.flatMap((s) => (s.bars || []).map((b) => b[2]));
  let x0 = Math.min(...xs), x1 = Math.max(...xs);
  if (x1 === x0) { x0 -= 1; x1 += 1; }
  const ys = all.map((p) => p[1]).concat(lows, highs);
  let y0 = Math.min(opts.yMin ?? 0, ...ys), y1 = niceMax(Math.max(...ys));
  if (y0 < 0) y0 = -niceMax(-y0);
  if (y1 === y0) y1 = y0 + 1;
  const sx = (x) => PAD.l + ((x - x0) / (x1 - x0)) * (W - PAD.l - PAD.r);
  const sy = (y) => H - PAD.b - ((y - y0) / (y1 - y0)) * (H - PAD.t - PAD.b);
  // axes, a zero line and tick labels
  svg.appendChild(el("line", { x1: PAD.l, y1: sy(y0), x2: W - PAD.r, y2: sy(y0), class: "axis" }));
  svg.appendChild(el("line", { x1: PAD.l, y1: PAD.t, x2: PAD.l, y2: H - PAD.b, class: "axis" }));
  if (y0 < 0) svg.appendChild(el("line", { x1: PAD.l, y1: sy(0), x2: W - PAD.r, y2: sy(0), class: "axis", "stroke-dasharray": "4 3" }));
  for (const y of [y0, (y0 + y1) / 2, y1]) {
    svg.appendChild(el("text", { x: PAD.l - 4, y: sy(y) + 4, "text-anchor": "end" }, +y.toPrecision(3)));
  }
  const fmtX = opts.time ? (x) => new Date(x * 1000).toLocaleTimeString() : (x) => String(Math.round(x));
  svg.appendChild(el("text", { x: PAD.l, y: H - 6 }, fmtX(x0)));
  svg.appendChild(el("text", { x: W - PAD.r, y: H - 6, "text-anchor": "end" }, fmtX(x1)));
  if (opts.xLabel) svg.appendChild(el("text", { x: W / 2, y: H - 6, "text-anchor": "middle" }, opts.xLabel));
  series.forEach((s, i) => {
    const color = COLORS[i % COLORS.length];
    const pts = s.points.filter(finite);
    if (pts.length === 0) return;
    for (const [x, lo, hi] of s.bars || []) {
      svg.appendChild(el("line", { x1: sx(x), y1: sy(lo), x2: sx(x), y2: sy(hi), stroke: color, "stroke-opacity": 0.5 }));
    }
    for (const run of segments(s.points, opts.time)) {
      svg.appendChild(el("polyline", {
        points: run.map((p) => `${sx(p[0]).toFixed(1)},${sy(p[1]).toFixed(1)}`).join(" "),
        fill: "none", stroke: color, "stroke-width": 2, "data-series": s.name,
      }));
      // A run of one sample is no line at all: its dot is all that shows it.
      if (run.length === 1 && pts.length >= 40) svg.appendChild(el("circle", { cx: sx(run[0][0]), cy: sy(run[0][1]), r: 2.5, fill: color }));
    }
    if (pts.length < 40) for (const p of pts) svg.appendChild(el("circle", { cx: sx(p[0]), cy: sy(p[1]), r: 2.5, fill: color }));
    svg.appendChild(el("text", { x: PAD.l + 8 + i * 110, y: PAD.t + 10, fill: color, style: `fill:${color}` }, s.name));
  });
}

function series(history, name, key) {
  return { name, points: history.map((h) => [h.t, h[key]]) };
}

function text(id, value) {
  document.getElementById(id).textContent = value;
}

function render(data) {
  const h = data.history;
  const cur = data.current;
  const last = h.length ? h[h.length - 1] : {};
  const policies = [...new Set(h.flatMap((p) => Object.keys(p.decisions_per_s_by_policy)))];
  drawChart(document.getElementById("chart-decisions"), [
    series(h, "all", "decisions_per_s"),
    ...policies.map((pol) => ({ name: pol, points: h.map((p) => [p.t, p.decisions_per_s_by_policy[pol] ?? 0]) })),
  ], { time: true });
  drawChart(document.getElementById("chart-latency"),
    [series(h, "p50", "latency_p50_ms"), series(h, "p99", "latency_p99_ms")], { time: true, empty: "no decisions yet" });
  drawChart(document.getElementById("chart-games"), [series(h, "games", "games_in_flight")], { time: true });
  drawChart(document.getElementById("chart-ingest"),
    [series(h, "episodes waiting", "episodes_waiting"), series(h, "versions behind", "ingest_lag_versions")], { time: true });
  const version = [series(h, "current", "version")];
  if (h.some((p) => p.production_version !== null)) version.push(series(h, "production", "production_version"));
  drawChart(document.getElementById("chart-version"), version, { time: true });
  const byOpponent = {};
  for (const r of data.arena) (byOpponent[r.opponent] ||= []).push(r);
  drawChart(document.getElementById("chart-arena"), Object.entries(byOpponent).map(([opp, rs]) => ({
    name: `vs ${opp}`,
    points: rs.map((r) => [r.version, r.payoff]),
    bars: rs.map((r) => [r.version, r.payoff - r.ci95, r.payoff + r.ci95]),
  })), { xLabel: "version", yMin: 0, empty: "no arena results yet (POST /v1/arena/results or croupier score)" });

  renderLive(data.live_arena);
  renderTiers(data.tiers);

  text("game", cur.game);
  text("updated", `updated ${new Date(data.now * 1000).toLocaleTimeString()}`);
  text("tile-rate", last.decisions_per_s !== undefined ? Math.round(last.decisions_per_s).toLocaleString() : "–");
  const ms = (v) => (v === null || v === undefined ? "–" : v.toFixed(1));
  text("tile-latency", `${ms(last.latency_p50_ms)} / ${ms(last.latency_p99_ms)} ms`);
  text("tile-games", cur.games_in_flight);
  text("tile-version", `${cur.version} (${cur.versions_loaded} loaded)`);
  text("tile-production", last.production_version ?? "none");
  const link = cur.trainer_link;
  text("tile-link", link === null ? "not configured" : link.connected ? "connected" : "down");
  const ep = cur.episodes;
  text("tile-episodes", `${ep.pending} / ${ep.shipped} / ${ep.dropped}`);
  document.body.dataset.rendered = String(h.length);
}

const LIVE_ROWS = 20;

function renderLive(live) {
  const body = document.querySelector("#live-arena tbody");
  body.replaceChildren();
  const rows = live ? live.rows.slice(0, LIVE_ROWS) : [];
  if (!rows.length) {
    const td = document.createElement("td");
    td.colSpan = 5;
    td.className = "muted";
    td.textContent = "no ended games yet";
    body.append(document.createElement("tr"));
    body.lastChild.append(td);
    return;
  }
  const sign = (v) => (v >= 0 ? "+" : "") + v.toFixed(3);
  for (const r of rows) {
    const tr = document.createElement("tr");
    for (const cell of [r.player, r.opponents.join(", "), r.games.toLocaleString(), sign(r.mean), `± ${r.ci95.toFixed(3)}`]) {
      const td = document.createElement("td");
      td.textContent = cell;  // textContent: policy names never become markup
      tr.append(td);
    }
    body.append(tr);
  }
}

function renderTiers(tiers) {
  const body = document.querySelector("#tiers tbody");
  body.replaceChildren();
  const cal = tiers ? tiers.calibration : null;
  let state = "not calibrated: croupier tiers calibrate (or promote --auto --tiers-dir)";
  if (cal) {
    state = `calibrated for production v${tiers.calibrated_for}` +
      (tiers.stale ? `: STALE, production is now v${tiers.production} (calibrate again)` : "") +
      (cal.ordered ? "; strictly ordered, CIs apart" : "; NOT strictly ordered with CIs apart");
  }
  if (tiers && tiers.problem) state += `; file refused: ${tiers.problem}`;
  text("tiers-state", state);
  const sign = (v) => (v >= 0 ? "+" : "") + v.toFixed(3);
  for (const t of cal ? cal.tiers : []) {
    const tr = document.createElement("tr");
    for (const cell of [`tier:${t.tier}`, t.spec, sign(t.score), `± ${t.ci95.toFixed(3)}`, t.hands.toLocaleString()]) {
      const td = document.createElement("td");
      td.textContent = cell;
      tr.append(td);
    }
    body.append(tr);
  }
}

// On a server with API keys the data needs one (a read key will do): open the page as
// /dashboard#key=YOUR_KEY. A fragment never reaches the server or its logs; the key is kept
// for this tab only and taken out of the address bar.
function apiKey() {
  const m = location.hash.match(/(?:^#|&)key=([^&]+)/);
  if (m) {
    sessionStorage.setItem("croupier-key", decodeURIComponent(m[1]));
    history.replaceState(null, "", location.pathname + location.search);
  }
  return sessionStorage.getItem("croupier-key");
}

async function poll() {
  try {
    const key = apiKey();
    const headers = key ? { Authorization: `Bearer ${key}` } : {};
    const resp = await fetch("/dashboard/data.json", { cache: "no-store", headers });
    if (resp.ok) render(await resp.json());
    else if (resp.status === 401 || resp.status === 403)
      text("updated", `data.json answered ${resp.status}: open /dashboard#key=YOUR_KEY (a read key will do)`);
    else text("updated", `data.json answered ${resp.status}`);
  } catch (e) {
    text("updated", `server unreachable: ${e}`);
  }
  setTimeout(poll, POLL_MS);
}

poll();
