"use strict";
// Draws the panels of trace-summarize's page from the JSON blob in #data.
// Text from the inputs goes through textContent and setAttribute only.
(function () {
  const errors = document.getElementById("errors");
  function complain(text) {
    const li = document.createElement("li");
    li.textContent = text;
    errors.appendChild(li);
    errors.hidden = false;
  }
  // A page that fails says so on the page (and to a test reading the DOM).
  window.addEventListener("error", (e) => complain("error: " + e.message));
  const consoleError = console.error;
  console.error = function (...args) {
    complain("console.error: " + args.join(" "));
    consoleError.apply(console, args);
  };

  const data = JSON.parse(document.getElementById("data").textContent);
  const NS = "http://www.w3.org/2000/svg";
  // The panel's size; the data area leaves room right for the legend.
  const W = 1200, H = 300, L = 70, R = W - 270, T = 12, B = H - 34;
  const COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#17becf"];
  const ERROR_COLOR = "#d62728";
  const tip = document.getElementById("tip");
  let view = [0, data.t_end];

  function el(name, attrs, parent) {
    const e = document.createElementNS(NS, name);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(e);
    return e;
  }
  // As the tables print numbers: up to 3 decimals, no trailing zeros.
  function fmt(v) {
    return String(Math.round(v * 1000) / 1000);
  }
  function pct(x) {
    return "p" + fmt(100 * (1 - 1 / x));
  }
  function scale(lo, hi, log, a, b) {
    if (log) {
      const l0 = Math.log10(lo), l1 = Math.log10(hi);
      return (v) => a + ((Math.log10(v) - l0) / (l1 - l0)) * (b - a);
    }
    return (v) => a + ((v - lo) / (hi - lo || 1)) * (b - a);
  }
  function linearTicks(lo, hi) {
    const span = hi - lo || 1;
    const base = Math.pow(10, Math.floor(Math.log10(span / 5)));
    const step = [1, 2, 5, 10].map((m) => m * base).find((s) => span / s <= 8);
    const out = [];
    for (let k = Math.ceil(lo / step); k * step <= hi + step * 1e-9; k++) out.push(k * step);
    return out;
  }
  function logTicks(lo, hi) {
    const out = [];
    for (let e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); e++) {
      for (const m of [1, 2, 5]) {
        const v = m * Math.pow(10, e);
        if (v >= lo && v <= hi) out.push(v);
      }
    }
    return out.length > 10 ? out.filter((v) => Math.abs(Math.log10(v) % 1) < 1e-9) : out;
  }

  // The panels, as the SVG plot draws them.
  const panels = [];
  const lines = (pick) =>
    data.runs.map((r, i) => ({ name: r.name, points: pick(r), color: COLORS[i % 6], style: "line" }));
  const serverLines = (list) =>
    list.map((s, i) => ({ name: s.name, points: s.points, color: COLORS[i % 6], style: "line" }));
  const clip = data.clip
    ? ", clipped at the p" + fmt(data.clip.p) + " completion time (" + fmt(data.clip.end_s) + " s)"
    : "";
  panels.push({
    title: "latency of each request (ms, log) by send time (s)" + clip,
    time: true, ylog: true, y: data.lat, unit: "ms", slo: true,
    series: data.runs.flatMap((r, i) => {
      const c = COLORS[i % 6];
      const s = [
        { name: r.name + " TTFT", points: r.ttft, color: c, style: "dot" },
        { name: r.name + " E2E", points: r.e2e, color: c, style: "cross" },
      ];
      if (r.errors.length) {
        s.push({ name: r.name + " errors", points: r.errors, color: ERROR_COLOR, style: "tri", failed: true });
      }
      return s;
    }),
  });
  panels.push({
    title: "requests in flight (mean over each bucket) by time (s)",
    time: true, unit: "requests", series: lines((r) => r.flight),
  });
  panels.push({
    title: "output tokens/s by time (s)",
    time: true, unit: "tokens/s", series: lines((r) => r.tokens),
  });
  if (data.server.requests.length) {
    panels.push({
      title: "server: requests running and waiting (scraped) by time (s)",
      time: true, unit: "requests", series: serverLines(data.server.requests),
    });
  }
  if (data.server.shares.length) {
    panels.push({
      title: "server: KV-cache usage and prefix-cache hit rate (%, scraped) by time (s)",
      time: true, unit: "%", y: [0, 100], series: serverLines(data.server.shares),
    });
  }
  panels.push({
    title: "latency (ms, log) by percentile (x = 1/(1-p), log)",
    time: false, xlog: true, ylog: true, x: [1, data.x_max], y: data.lat, unit: "ms", slo: true,
    series: data.runs.flatMap((r, i) => [
      { name: r.name + " TTFT", points: r.ttft_by_percentile, color: COLORS[i % 6], style: "line" },
      { name: r.name + " E2E", points: r.e2e_by_percentile, color: COLORS[i % 6], style: "dashed" },
    ]),
  });

  function markPath(style, pts) {
    let d = "";
    for (const [x, y] of pts) {
      if (style === "dot") d += `M${x - 2},${y}a2,2 0 1,0 4,0a2,2 0 1,0 -4,0`;
      else if (style === "cross") d += `M${x - 3},${y - 3}L${x + 3},${y + 3}M${x - 3},${y + 3}L${x + 3},${y - 3}`;
      else if (style === "tri") d += `M${x},${y - 4}L${x + 4},${y + 3}L${x - 4},${y + 3}Z`;
      else d += (d ? "L" : "M") + x + "," + y;
    }
    return d;
  }

  function draw(p) {
    const svg = p.svg;
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    const x0 = p.time ? view[0] : p.x[0];
    const x1 = p.time ? view[1] : p.x[1];
    let y = p.y;
    if (!y) {
      // A count's axis fits what is in view.
      let top = 1;
      for (const s of p.series) for (const [x, v] of s.points) if (x >= x0 && x <= x1) top = Math.max(top, v);
      y = [0, top * 1.1];
    }
    const sx = scale(x0, x1, p.xlog, L, R);
    const sy = scale(y[0], y[1], p.ylog, B, T);
    p.sx = sx; p.sy = sy; p.x0 = x0; p.x1 = x1;
    el("rect", { x: 0, y: 0, width: W, height: H, fill: "#fff" }, svg);
    const axis = el("g", { class: "axis" }, svg);
    const xt = p.time ? linearTicks(x0, x1) : data.percentile_ticks;
    for (const t of xt) {
      const x = sx(t);
      el("line", { x1: x, x2: x, y1: T, y2: B, stroke: "#eee" }, axis);
      el("text", { x: x, y: B + 16, "text-anchor": "middle" }, axis).textContent = p.time ? fmt(t) : pct(t);
    }
    for (const t of p.ylog ? logTicks(y[0], y[1]) : linearTicks(y[0], y[1])) {
      const yy = sy(t);
      el("line", { x1: L, x2: R, y1: yy, y2: yy, stroke: "#eee" }, axis);
      el("text", { x: L - 6, y: yy + 4, "text-anchor": "end" }, axis).textContent = fmt(t);
    }
    el("rect", { x: L, y: T, width: R - L, height: B - T, fill: "none", stroke: "#000" }, axis);
    const id = "clip" + p.index;
    const defs = el("defs", {}, svg);
    el("rect", { x: L, y: T, width: R - L, height: B - T }, el("clipPath", { id: id }, defs));
    const area = el("g", { "clip-path": "url(#" + id + ")" }, svg);
    const legend = el("g", { class: "legend" }, svg);
    let row = 0;
    function legendEntry(name, color, style) {
      const yy = T + 10 + 18 * row++;
      const g = el("g", {}, legend);
      if (style === "line" || style === "dashed" || style === "slo") {
        el("line", {
          x1: R + 15, x2: R + 35, y1: yy, y2: yy, stroke: color, "stroke-width": style === "line" ? 2 : 1,
          "stroke-dasharray": style === "line" ? "none" : "4 3",
        }, g);
      } else {
        el("path", { d: markPath(style, [[R + 25, yy]]), fill: style === "cross" ? "none" : color, stroke: color }, g);
      }
      // A long name keeps its end (a path's file name), as in the SVG.
      const shown = name.length > 34 ? "\u2026" + name.slice(name.length - 33) : name;
      el("text", { x: R + 42, y: yy + 4 }, g).textContent = shown;
      el("title", {}, g).textContent = name;
    }
    for (const s of p.series) {
      const g = el("g", { class: "series", "data-name": s.name, "data-points": s.points.length }, area);
      // Lines keep one point beyond each edge of the view, so they leave the frame.
      const visible = s.points.filter((q, k, a) =>
        s.style === "line" || s.style === "dashed"
          ? (a[k + 1] ? a[k + 1][0] : q[0]) >= x0 && (a[k - 1] ? a[k - 1][0] : q[0]) <= x1
          : q[0] >= x0 && q[0] <= x1);
      const px = visible.filter((q) => !p.ylog || q[1] > 0).map(([a, b]) => [sx(a), sy(b)]);
      const line = s.style === "line" || s.style === "dashed";
      el("path", {
        d: markPath(s.style, px),
        fill: line || s.style === "cross" ? "none" : s.color,
        stroke: s.color,
        "stroke-width": s.style === "line" ? 2 : 1,
        "stroke-dasharray": s.style === "dashed" ? "4 3" : "none",
      }, g);
      legendEntry(s.name, s.color, s.style);
    }
    if (p.slo) {
      for (const b of data.slo) {
        const yy = sy(b.ms);
        el("line", {
          class: "slo", "data-label": b.label, "data-ms": b.ms,
          x1: L, x2: R, y1: yy, y2: yy, stroke: "#555", "stroke-dasharray": "4 3",
        }, area);
        legendEntry(b.label, "#555", "slo");
      }
    }
    p.selection = el("rect", { x: 0, y: T, width: 0, height: B - T, fill: "rgba(31,119,180,0.15)", visibility: "hidden" }, svg);
  }

  function drawAll() {
    for (const p of panels) if (p.time || !p.svg.firstChild) draw(p);
    document.getElementById("range").textContent =
      "time axis: " + fmt(view[0]) + " to " + fmt(view[1]) + " s";
  }

  // The pointer's position in the panel's own coordinates.
  function at(p, e) {
    const r = p.svg.getBoundingClientRect();
    return [((e.clientX - r.left) * W) / r.width, ((e.clientY - r.top) * H) / r.height];
  }
  function timeAt(p, x) {
    const f = Math.min(Math.max((x - L) / (R - L), 0), 1);
    return view[0] + f * (view[1] - view[0]);
  }
  function zoom(t0, t1) {
    t0 = Math.max(0, t0);
    t1 = Math.min(data.t_end, t1);
    if (t1 - t0 > 1e-6) view = [t0, t1];
    drawAll();
  }

  function hover(p, e) {
    const [mx, my] = at(p, e);
    let best = null, bestD = 30 * 30;
    for (const s of p.series) {
      for (const q of s.points) {
        if (q[0] < p.x0 || q[0] > p.x1 || (p.ylog && q[1] <= 0)) continue;
        const dx = p.sx(q[0]) - mx, dy = p.sy(q[1]) - my, d = dx * dx + dy * dy;
        if (d < bestD) { bestD = d; best = [s, q]; }
      }
    }
    if (!best) { tip.hidden = true; return; }
    const [s, q] = best;
    const where = p.time ? "at " + fmt(q[0]) + " s" : pct(q[0]);
    tip.textContent = s.failed
      ? s.name + "\nsent at " + fmt(q[0]) + " s"
      : s.name + "\n" + where + ": " + fmt(q[1]) + " " + p.unit;
    tip.style.left = e.clientX + 12 + "px";
    tip.style.top = e.clientY + 12 + "px";
    tip.hidden = false;
  }

  const box = document.getElementById("panels");
  panels.forEach((p, index) => {
    p.index = index;
    const div = document.createElement("div");
    div.className = "panel";
    const h = document.createElement("h3");
    h.textContent = p.title;
    div.appendChild(h);
    p.svg = el("svg", { viewBox: "0 0 " + W + " " + H, width: W, height: H, "data-title": p.title });
    div.appendChild(p.svg);
    box.appendChild(div);
    let drag = null;
    p.svg.addEventListener("mousemove", (e) => {
      if (drag !== null) {
        const x = Math.min(Math.max(at(p, e)[0], L), R);
        p.selection.setAttribute("x", Math.min(drag, x));
        p.selection.setAttribute("width", Math.abs(x - drag));
        p.selection.setAttribute("visibility", "visible");
      }
      hover(p, e);
    });
    p.svg.addEventListener("mouseleave", () => { tip.hidden = true; });
    if (!p.time) return;
    p.svg.addEventListener("mousedown", (e) => {
      const [x] = at(p, e);
      if (e.button === 0 && x >= L && x <= R) { drag = x; e.preventDefault(); }
    });
    window.addEventListener("mouseup", (e) => {
      if (drag === null) return;
      const x = Math.min(Math.max(at(p, e)[0], L), R);
      const from = drag;
      drag = null;
      p.selection.setAttribute("visibility", "hidden");
      if (Math.abs(x - from) > 4) zoom(timeAt(p, Math.min(from, x)), timeAt(p, Math.max(from, x)));
    });
    p.svg.addEventListener("wheel", (e) => {
      e.preventDefault();
      const t = timeAt(p, at(p, e)[0]);
      const f = e.deltaY > 0 ? 1.25 : 0.8;
      zoom(t - (t - view[0]) * f, t + (view[1] - t) * f);
    }, { passive: false });
  });
  document.getElementById("reset").addEventListener("click", () => zoom(0, data.t_end));
  drawAll();
  document.body.setAttribute("data-drawn", "ok");
})();
