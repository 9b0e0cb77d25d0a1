// The book's front-end renderer: draws an explorer's picture in the browser from data
// Python sent once (the widget's `spec`), so display-only controls (layer, head, scale,
// causal view, dimensions, merge step) redraw instantly, without a kernel round trip.
//
// One module for every view type; each view reads `spec.kind`:
//   "attention"   heatmap of one head, or all heads of a layer on ONE colour scale
//   "model_view"  every layer x head as thumbnails + the selected head drawn large
//   "positional"  encoding table heatmap + chosen dimensions as waves + a line plot
//   "bpe"         text coloured token by token after k merges + merge table + curve
//   "bars"        a bar chart per frame (e.g. a distribution per step), frame chosen by a slider
//   "bar_grid"    a grid of bar charts, optionally cut to the top k bars by a slider, + a text table
//   "panels"      a row of small charts (bars, horizontal bars, points), text and token tables
// Pictures are SVG (text, ticks, colour bars); heatmap cells are one pixelated <image>
// per panel, painted on an off-screen canvas. Selections live in the widget model
// (traits `layer`, `head`, `scale`, `causal`, `dims`, `step`), so Python sees them.
// The same file runs in a static HTML page (scripts/build_html.py) with a stand-in model.

const FONT = '"DejaVu Sans", "Noto Sans CJK SC", "Noto Sans SC", "Source Han Sans SC", "PingFang SC", "Microsoft YaHei", "Noto Color Emoji", sans-serif';
// Okabe & Ito, the order of llmbook.viz.style.PALETTE
const PALETTE = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000"];
const TINTS = ["#cfe3f2", "#f7e0b0", "#c6eadd", "#f5cdb8", "#eed3e5", "#d3ecf8", "#f9f3bd", "#dddddd"];
// Matplotlib's viridis and RdBu_r, sampled at 11 stops (linear interpolation between them).
const VIRIDIS = [[68, 1, 84], [72, 35, 116], [64, 67, 135], [52, 94, 141], [41, 120, 142], [32, 144, 140],
  [34, 167, 132], [68, 190, 112], [121, 209, 81], [189, 222, 38], [253, 231, 37]];
const RDBU_R = [[5, 48, 97], [33, 102, 172], [67, 147, 195], [146, 197, 222], [209, 229, 240], [247, 247, 247],
  [253, 219, 199], [244, 165, 130], [214, 96, 77], [178, 24, 43], [103, 0, 31]];
const SVG_NS = "http://www.w3.org/2000/svg";
const GRID_LABELS = 12; // at most this many token labels per axis in an all-heads grid
const MAX_LABELS = 60; // ... and in a single large heatmap

// ------------------------------------------------------------------ small helpers
function colour(stops, t) {
  if (!Number.isFinite(t)) return [255, 255, 255];
  const x = Math.min(1, Math.max(0, t)) * (stops.length - 1);
  const i = Math.min(stops.length - 2, Math.floor(x));
  const f = x - i;
  return stops[i].map((c, k) => Math.round(c + f * (stops[i + 1][k] - c)));
}
const css = (rgb) => `rgb(${rgb[0]},${rgb[1]},${rgb[2]})`;

function svgEl(tag, attrs, parent, text) {
  const e = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
  if (text !== undefined) e.textContent = text;
  if (parent) parent.appendChild(e);
  return e;
}
function htmlEl(tag, attrs, parent, text) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
  if (text !== undefined) e.textContent = text;
  if (parent) parent.appendChild(e);
  return e;
}

let measureCtx = null;
function textWidth(s, size) {
  if (!measureCtx) measureCtx = document.createElement("canvas").getContext("2d");
  measureCtx.font = `${size}px ${FONT}`;
  return measureCtx.measureText(String(s)).width;
}
const fmt = (v, d = 2) => (Math.abs(v) >= 1000 ? v.toFixed(0) : Number(v.toFixed(d)).toString());

// A heatmap panel: values (rows x cols) painted one pixel per cell, scaled up crisply.
function heatImage(parent, x, y, w, h, rows, vmin, vmax, stops) {
  const nr = rows.length, nc = rows[0].length;
  const canvas = document.createElement("canvas");
  canvas.width = nc;
  canvas.height = nr;
  const ctx = canvas.getContext("2d");
  const img = ctx.createImageData(nc, nr);
  const span = vmax - vmin || 1;
  for (let i = 0; i < nr; i++) {
    for (let j = 0; j < nc; j++) {
      const v = rows[i][j];
      const rgb = v === null || !Number.isFinite(v) ? [255, 255, 255] : colour(stops, (v - vmin) / span);
      const o = 4 * (i * nc + j);
      img.data[o] = rgb[0]; img.data[o + 1] = rgb[1]; img.data[o + 2] = rgb[2]; img.data[o + 3] = 255;
    }
  }
  ctx.putImageData(img, 0, 0);
  return svgEl("image", {
    x, y, width: w, height: h, preserveAspectRatio: "none", href: canvas.toDataURL("image/png"),
    style: "image-rendering: pixelated; image-rendering: crisp-edges",
  }, parent);
}

function colourBar(parent, x, y, h, vmin, vmax, stops, label) {
  const n = 64;
  const rows = [];
  for (let i = 0; i < n; i++) rows.push([vmax - ((vmax - vmin) * i) / (n - 1)]);
  heatImage(parent, x, y, 12, h, rows, vmin, vmax, stops);
  svgEl("rect", { x, y, width: 12, height: h, fill: "none", stroke: "#444", "stroke-width": 0.5 }, parent);
  for (const t of niceTicks(vmin, vmax, 5)) {
    const ty = y + h - ((t - vmin) / (vmax - vmin || 1)) * h;
    svgEl("line", { x1: x + 12, x2: x + 15, y1: ty, y2: ty, stroke: "#444" }, parent);
    svgEl("text", { x: x + 17, y: ty + 3.5, "font-size": 10 }, parent, fmt(t, 3));
  }
  if (label) {
    svgEl("text", { transform: `translate(${x + 58},${y + h / 2}) rotate(-90)`, "text-anchor": "middle", "font-size": 10.5 },
      parent, label);
  }
}

function niceTicks(lo, hi, n) {
  if (!(hi > lo)) return [lo];
  const raw = (hi - lo) / n;
  const mag = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => s >= raw) || raw;
  const out = [];
  for (let t = Math.ceil(lo / step - 1e-9) * step; t <= hi + step * 1e-9; t += step) out.push(Number(t.toPrecision(12)));
  return out;
}

// Tick labels along a heatmap's x axis (below) or y axis (left); every n-th above `maxLabels`.
function tokenTicks(parent, axis, x0, y0, cell, labels, maxLabels, size) {
  const step = Math.max(1, Math.ceil(labels.length / maxLabels));
  const rotate = axis === "x" && (labels.length > 8 || Math.max(...labels.map((s) => s.length)) > 3);
  for (let i = 0; i < labels.length; i += step) {
    const c = (i + 0.5) * cell;
    if (axis === "x") {
      svgEl("line", { x1: x0 + c, x2: x0 + c, y1: y0, y2: y0 + 3, stroke: "#444" }, parent);
      const attrs = rotate
        ? { transform: `translate(${x0 + c + 3.5},${y0 + 5}) rotate(-90)`, "text-anchor": "end", "font-size": size }
        : { x: x0 + c, y: y0 + 5 + size, "text-anchor": "middle", "font-size": size };
      svgEl("text", attrs, parent, labels[i]);
    } else {
      svgEl("line", { x1: x0 - 3, x2: x0, y1: y0 + c, y2: y0 + c, stroke: "#444" }, parent);
      svgEl("text", { x: x0 - 5, y: y0 + c + size * 0.35, "text-anchor": "end", "font-size": size }, parent, labels[i]);
    }
  }
}
function tickExtent(labels, maxLabels, size, axis) {
  const step = Math.max(1, Math.ceil(labels.length / maxLabels));
  const shown = labels.filter((_, i) => i % step === 0);
  const widest = Math.max(0, ...shown.map((s) => textWidth(s, size)));
  const rotate = axis === "x" && (labels.length > 8 || Math.max(...labels.map((s) => s.length)) > 3);
  return axis === "x" && !rotate ? size + 8 : widest + 10;
}

function newSvg(width, height) {
  const svg = svgEl("svg", { xmlns: SVG_NS, width: Math.ceil(width), height: Math.ceil(height), viewBox: `0 0 ${Math.ceil(width)} ${Math.ceil(height)}` });
  svg.style.fontFamily = FONT;
  svg.style.maxWidth = "100%";
  svg.style.height = "auto";
  return svg;
}

// A line plot with axes, ticks, an optional legend and vertical marker.
function linePlot(parent, x, y, w, h, opts) {
  const { series, title, xlabel, ylabel, ylim, vline, legend } = opts;
  const xs = series.flatMap((s) => s.x), ys = series.flatMap((s) => s.y);
  let [x0, x1] = [Math.min(...xs), Math.max(...xs)];
  if (x1 === x0) x1 = x0 + 1;
  let [y0, y1] = ylim || [Math.min(...ys), Math.max(...ys)];
  if (!ylim) { const pad = (y1 - y0) * 0.06 || 0.5; y0 -= pad; y1 += pad; }
  const L = 48, B = 34, T = 22;
  const pw = w - L - 8, ph = h - B - T, px = x + L, py = y + T;
  const sx = (v) => px + ((v - x0) / (x1 - x0)) * pw, sy = (v) => py + ph - ((v - y0) / (y1 - y0)) * ph;
  const g = svgEl("g", {}, parent);
  for (const t of niceTicks(y0, y1, 5)) {
    svgEl("line", { x1: px, x2: px + pw, y1: sy(t), y2: sy(t), stroke: "#000", "stroke-opacity": 0.08 }, g);
    svgEl("text", { x: px - 4, y: sy(t) + 3.5, "text-anchor": "end", "font-size": 10 }, g, fmt(t, 3));
  }
  for (const t of niceTicks(x0, x1, 6)) {
    svgEl("line", { x1: sx(t), x2: sx(t), y1: py, y2: py + ph, stroke: "#000", "stroke-opacity": 0.08 }, g);
    svgEl("text", { x: sx(t), y: py + ph + 13, "text-anchor": "middle", "font-size": 10 }, g, fmt(t, 3));
  }
  svgEl("line", { x1: px, x2: px + pw, y1: py + ph, y2: py + ph, stroke: "#444" }, g);
  svgEl("line", { x1: px, x2: px, y1: py, y2: py + ph, stroke: "#444" }, g);
  if (title) svgEl("text", { x: px + pw / 2, y: y + 14, "text-anchor": "middle", "font-size": 12 }, g, title);
  if (xlabel) svgEl("text", { x: px + pw / 2, y: y + h - 4, "text-anchor": "middle", "font-size": 11 }, g, xlabel);
  if (ylabel) svgEl("text", { transform: `translate(${x + 11},${py + ph / 2}) rotate(-90)`, "text-anchor": "middle", "font-size": 11 }, g, ylabel);
  series.forEach((s, k) => {
    const c = s.color || PALETTE[k % PALETTE.length];
    const pts = s.x.map((v, i) => `${sx(v).toFixed(1)},${sy(s.y[i]).toFixed(1)}`).join(" ");
    svgEl("polyline", { points: pts, fill: "none", stroke: c, "stroke-width": 1.6 }, g);
    if (s.marker) s.x.forEach((v, i) => svgEl("circle", { cx: sx(v), cy: sy(s.y[i]), r: 1.8, fill: c }, g));
  });
  if (vline !== undefined && vline !== null) {
    svgEl("line", { x1: sx(vline.x), x2: sx(vline.x), y1: py, y2: py + ph, stroke: PALETTE[3], "stroke-dasharray": "5,3", "stroke-width": 1.4 }, g);
    if (vline.label) svgEl("text", { x: px + pw - 4, y: py + 12, "text-anchor": "end", "font-size": 10, fill: PALETTE[3] }, g, vline.label);
  }
  if (legend) {
    const lw = 24 + Math.max(...series.map((s) => textWidth(s.label, 9.5)));
    svgEl("rect", { x: px + pw - 72, y: py + ph - 8 - series.length * 13, width: Math.max(lw, 18 + lw) + 4, height: series.length * 13 + 4,
      fill: "white", "fill-opacity": 0.85 }, g);
    series.forEach((s, k) => {
      const ly = py + ph - 8 - (series.length - 1 - k) * 13;
      const c = s.color || PALETTE[k % PALETTE.length];
      svgEl("line", { x1: px + pw - 70, x2: px + pw - 56, y1: ly - 3, y2: ly - 3, stroke: c, "stroke-width": 2 }, g);
      svgEl("text", { x: px + pw - 52, y: ly, "font-size": 9.5 }, g, s.label);
    });
  }
  return g;
}

// ------------------------------------------------------------------ controls
// Keys a focused control handles itself: a range slider steps with the arrows, Home, End and
// PageUp/PageDown, a <select> moves with the arrows, a checkbox toggles with Space. In
// JupyterLab a keydown that bubbles out of a widget reaches the notebook's shortcuts (Lumino's
// keymap, listening on the document): in command mode ArrowLeft/ArrowRight/ArrowUp/ArrowDown
// are bound there, and the keymap calls preventDefault, so the slider would never move. The
// control stops these keys from bubbling past itself; the input has already seen them (it is
// the target), so its own default action happens. Keys with a modifier (Shift+Enter: run the
// cell, Ctrl+S: save) still reach the notebook.
const CONTROL_KEYS = new Set(["ArrowLeft", "ArrowRight", "ArrowUp", "ArrowDown", "Home", "End", "PageUp", "PageDown", " ", "Enter"]);
function keepKeys(e) {
  if (CONTROL_KEYS.has(e.key) && !(e.ctrlKey || e.metaKey || e.altKey || e.shiftKey)) e.stopPropagation();
}

function control(bar, name, label) {
  const box = htmlEl("div", { class: `llmbook-ctl-${name} llmbook-front-ctl` }, bar);
  box.style.cssText = "display:inline-flex;align-items:center;gap:6px;margin:2px 14px 2px 0;font-size:13px";
  htmlEl("label", {}, box, label);
  box.addEventListener("keydown", keepKeys);
  return box;
}
function selectControl(bar, name, label, options, onChange) {
  const box = control(bar, name, label);
  const sel = htmlEl("select", {}, box);
  options.forEach((o, i) => htmlEl("option", { value: i }, sel, o));
  sel.addEventListener("change", () => onChange(Number(sel.value)));
  return { box, set: (i) => { sel.value = String(i); }, input: sel };
}
function rangeControl(bar, name, label, min, max, step, onChange, digits) {
  const box = control(bar, name, label);
  const input = htmlEl("input", { type: "range", min, max, step }, box);
  input.style.width = "220px";
  const out = htmlEl("span", { class: "llmbook-readout" }, box);
  out.style.cssText = "min-width:3em;font-variant-numeric:tabular-nums";
  input.addEventListener("input", () => { out.textContent = Number(input.value).toFixed(digits); onChange(Number(input.value)); });
  return { box, set: (v) => { input.value = String(v); out.textContent = Number(v).toFixed(digits); }, input };
}
function checkControl(bar, name, label, onChange) {
  const box = control(bar, name, label);
  const input = htmlEl("input", { type: "checkbox" }, box);
  input.addEventListener("change", () => onChange(input.checked));
  return { box, set: (v) => { input.checked = !!v; }, input };
}
function textControl(bar, name, label, onChange) {
  const box = control(bar, name, label);
  const input = htmlEl("input", { type: "text", size: 18 }, box);
  input.addEventListener("change", () => onChange(input.value));
  input.addEventListener("keydown", (e) => { if (e.key === "Enter") onChange(input.value); });
  return { box, set: (v) => { if (document.activeElement !== input) input.value = v; }, input };
}

// ------------------------------------------------------------------ attention
function rescale(w, scale, causal) {
  // softmax(scale * log w) per row, keys right of the query masked when causal (as
  // llmbook.viz.attention.rescale_attention); a row with no allowed key stays zero.
  return w.map((row, i) => {
    const s = row.map((v, j) => (v > 0 && !(causal && j > i) ? scale * Math.log(v) : -Infinity));
    const m = Math.max(...s);
    if (m === -Infinity) return row.map(() => 0);
    const e = s.map((v) => (v === -Infinity ? 0 : Math.exp(v - m)));
    const z = e.reduce((a, b) => a + b, 0);
    return e.map((v) => v / z);
  });
}
const clampInt = (v, lo, hi) => Math.min(hi, Math.max(lo, Math.round(Number(v) || 0)));

function attentionView(ctx) {
  const { model, spec, bar } = ctx;
  const L = spec.weights.length, H = spec.weights[0].length;
  const layer = selectControl(bar, "layer", "layer", spec.layer_names, (i) => ctx.set({ layer: i }));
  if (L < 2) layer.box.style.display = "none"; // one layer: nothing to choose
  const head = selectControl(bar, "head", "head", ["all heads", ...Array.from({ length: H }, (_, h) => `head ${h}`)],
    (i) => ctx.set({ head: i - 1 }));
  const scale = rangeControl(bar, "scale", "scale", 0.1, 4, 0.1, (v) => ctx.set({ scale: v }), 1);
  let causal = null;
  if (spec.causal_ok) causal = checkControl(bar, "causal", "causal mask", (v) => ctx.set({ causal: v }));

  return () => {
    const li = clampInt(model.get("layer"), 0, L - 1), hi = clampInt(model.get("head"), -1, H - 1);
    const sc = Math.max(0.1, Number(model.get("scale")) || 1), cm = !!model.get("causal") && spec.causal_ok;
    layer.set(li); head.set(hi + 1); scale.set(sc); if (causal) causal.set(cm);
    const maps = spec.weights[li].map((w) => rescale(w, sc, cm));
    const tag = `${spec.layer_names[li]}, scale ${sc.toFixed(1)}${cm ? ", causal" : ""}`;
    const keys = spec.keys, queries = spec.queries;
    if (hi < 0) drawGrid(ctx, maps, keys, queries, `All heads of ${tag}`);
    else drawOne(ctx, maps[hi], keys, queries, `head ${hi} of ${tag}`, true);
  };
}

function hover(ctx, image, rows, keys, queries, prefix) {
  image.addEventListener("mousemove", (ev) => {
    const r = image.getBoundingClientRect();
    const j = Math.floor(((ev.clientX - r.left) / r.width) * keys.length);
    const i = Math.floor(((ev.clientY - r.top) / r.height) * queries.length);
    if (i >= 0 && j >= 0 && i < queries.length && j < keys.length) {
      ctx.status.textContent = `${prefix}query ${i} ${JSON.stringify(queries[i])} \u2192 key ${j} ${JSON.stringify(keys[j])}: ${rows[i][j].toFixed(4)}`;
    }
  });
}

function drawOne(ctx, w, keys, queries, title, annotate) {
  const Tq = queries.length, Tk = keys.length;
  const size = Math.max(Tq, Tk) <= 30 ? 11 : 8;
  const cell = Math.max(5, Math.min(44, Math.floor(460 / Math.max(Tq, Tk))));
  const left = 24 + tickExtent(queries, MAX_LABELS, size, "y"), top = 28;
  const bottom = 22 + tickExtent(keys, MAX_LABELS, size, "x");
  const W = left + cell * Tk + 90, Hh = top + cell * Tq + bottom;
  const svg = newSvg(Math.max(W, textWidth(title, 13) + 20), Hh);
  const vmax = Math.max(1e-12, ...w.map((r) => Math.max(...r)));
  const im = heatImage(svg, left, top, cell * Tk, cell * Tq, w, 0, vmax, VIRIDIS);
  hover(ctx, im, w, keys, queries, "");
  if (annotate && Math.max(Tq, Tk) <= 10) {
    for (let i = 0; i < Tq; i++) for (let j = 0; j < Tk; j++) {
      svgEl("text", { x: left + (j + 0.5) * cell, y: top + (i + 0.5) * cell + 3.5, "text-anchor": "middle", "font-size": 10,
        fill: w[i][j] < 0.6 * vmax ? "white" : "black", "pointer-events": "none" }, svg, w[i][j].toFixed(2));
    }
  }
  tokenTicks(svg, "x", left, top + cell * Tq, cell, keys, MAX_LABELS, size);
  tokenTicks(svg, "y", left, top, cell, queries, MAX_LABELS, size);
  svgEl("text", { x: left + (cell * Tk) / 2, y: Hh - 5, "text-anchor": "middle", "font-size": 11 }, svg, "key (attended to)");
  svgEl("text", { transform: `translate(12,${top + (cell * Tq) / 2}) rotate(-90)`, "text-anchor": "middle", "font-size": 11 }, svg, "query (attending)");
  svgEl("text", { x: left + (cell * Tk) / 2, y: 17, "text-anchor": "middle", "font-size": 13, class: "llmbook-front-title" }, svg, title);
  colourBar(svg, left + cell * Tk + 12, top, cell * Tq, 0, vmax, VIRIDIS, "attention weight");
  ctx.pic.replaceChildren(svg);
  ctx.status.textContent = "Hover a cell to read its weight.";
}

function drawGrid(ctx, maps, keys, queries, title) {
  const H = maps.length, Tq = queries.length, Tk = keys.length;
  const ncols = H <= 4 ? H : H % 3 === 0 && H <= 9 ? 3 : 4;
  const nrows = Math.ceil(H / ncols);
  const size = Math.max(Tq, Tk) <= 30 ? 10 : 8;
  const cell = Math.max(3, Math.min(22, Math.floor(200 / Math.max(Tq, Tk))));
  const pw = cell * Tk, ph = cell * Tq, gap = 14;
  const left = 22 + tickExtent(queries, GRID_LABELS, size, "y"), top = 30;
  const xt = tickExtent(keys, GRID_LABELS, size, "x");
  // key labels sit under the last panel of each column, so a short last row leaves room
  const rowH = ph + 18 + gap;
  const W = left + ncols * (pw + gap) + 85;
  const Hh = top + nrows * rowH + xt + 20;
  const svg = newSvg(Math.max(W, textWidth(title, 13) + 20), Hh);
  // ONE colour scale for every head: 0 .. the largest weight of any head after rescaling
  const vmax = Math.max(1e-12, ...maps.map((w) => Math.max(...w.map((r) => Math.max(...r)))));
  maps.forEach((w, h) => {
    const r = Math.floor(h / ncols), c = h % ncols;
    const x = left + c * (pw + gap), y = top + r * rowH + 16;
    const t = svgEl("text", { x: x + pw / 2, y: y - 4, "text-anchor": "middle", "font-size": 11, class: "llmbook-front-panel-title" }, svg, `head ${h}`);
    t.style.cursor = "pointer";
    const im = heatImage(svg, x, y, pw, ph, w, 0, vmax, VIRIDIS);
    im.style.cursor = "pointer";
    hover(ctx, im, w, keys, queries, `head ${h}: `);
    for (const e of [t, im]) e.addEventListener("click", () => ctx.set({ head: h }));
    if (h + ncols >= H) tokenTicks(svg, "x", x, y + ph, cell, keys, GRID_LABELS, size);
    if (c === 0) tokenTicks(svg, "y", x, y, cell, queries, GRID_LABELS, size);
  });
  svgEl("text", { x: left + (ncols * (pw + gap)) / 2, y: Hh - 5, "text-anchor": "middle", "font-size": 11 }, svg, "key (attended to)");
  svgEl("text", { transform: `translate(12,${top + (nrows * rowH) / 2}) rotate(-90)`, "text-anchor": "middle", "font-size": 11 }, svg, "query (attending)");
  svgEl("text", { x: left + (ncols * (pw + gap)) / 2, y: 17, "text-anchor": "middle", "font-size": 13, class: "llmbook-front-title" }, svg, title);
  colourBar(svg, left + ncols * (pw + gap), top + 16, Math.min(nrows * rowH - gap - 18, 260), 0, vmax, VIRIDIS,
    "weight (one scale, all heads)");
  ctx.pic.replaceChildren(svg);
  ctx.status.textContent = "Click a head to open it large; hover a cell for its weight.";
}

// ------------------------------------------------------------------ model view
function modelView(ctx) {
  const { model, spec } = ctx;
  const L = spec.weights.length, H = spec.weights[0].length;
  const Tq = spec.queries.length, Tk = spec.keys.length;
  const layer = selectControl(ctx.bar, "layer", "layer", spec.layer_names, (i) => ctx.set({ layer: i }));
  const head = selectControl(ctx.bar, "head", "head", Array.from({ length: H }, (_, h) => `head ${h}`), (i) => ctx.set({ head: i }));
  // The mosaic: thumbnails tiled with a one-cell white gap, one colour scale for the whole model.
  const mosaic = [];
  let vmax = 1e-12;
  for (let l = 0; l < L; l++) {
    for (let i = 0; i <= Tq; i++) {
      if (l === L - 1 && i === Tq) break;
      const row = [];
      for (let h = 0; h < H; h++) {
        for (let j = 0; j <= Tk; j++) {
          if (h === H - 1 && j === Tk) break;
          const v = i < Tq && j < Tk ? spec.weights[l][h][i][j] : null;
          if (v !== null && v > vmax) vmax = v;
          row.push(v);
        }
      }
      mosaic.push(row);
    }
  }
  return () => {
    const li = clampInt(model.get("layer"), 0, L - 1), hi = clampInt(model.get("head"), 0, H - 1);
    layer.set(li); head.set(hi);
    const tw = Math.max(14, Math.min(60, Math.floor(620 / H))), th = Math.max(10, Math.min(60, Math.floor(560 / L)));
    const left = 14 + Math.max(...spec.layer_names.map((n) => textWidth(n, 9))), top = 50;
    const W = left + tw * H + 95, Hh = top + th * L + 12;
    const svg = newSvg(W, Hh);
    const title = spec.title || `All ${L} layers x ${H} heads (selected: ${spec.layer_names[li]}, head ${hi})`;
    svgEl("text", { x: left + (tw * H) / 2, y: 16, "text-anchor": "middle", "font-size": 12, class: "llmbook-front-title" }, svg,
      `${title} \u2014 selected: ${spec.layer_names[li]}, head ${hi}`);
    svgEl("text", { x: left + (tw * H) / 2, y: 32, "text-anchor": "middle", "font-size": 10 }, svg, "head");
    const im = heatImage(svg, left, top, tw * H, th * L, mosaic, 0, vmax, VIRIDIS);
    im.style.cursor = "pointer";
    im.addEventListener("click", (ev) => {
      const r = im.getBoundingClientRect();
      ctx.set({ head: clampInt(Math.floor(((ev.clientX - r.left) / r.width) * H), 0, H - 1),
        layer: clampInt(Math.floor(((ev.clientY - r.top) / r.height) * L), 0, L - 1) });
    });
    for (let h = 0; h < H; h++) svgEl("text", { x: left + (h + 0.5) * tw, y: top - 4, "text-anchor": "middle", "font-size": 9 }, svg, String(h));
    spec.layer_names.forEach((n, l) => svgEl("text", { x: left - 4, y: top + (l + 0.5) * th + 3, "text-anchor": "end", "font-size": L <= 12 ? 9 : 7 }, svg, n));
    svgEl("rect", { x: left + hi * tw - 1, y: top + li * th - 1, width: tw + 1, height: th + 1, fill: "none", stroke: PALETTE[3], "stroke-width": 2.5 }, svg);
    colourBar(svg, left + tw * H + 10, top, Math.min(th * L, 240), 0, vmax, VIRIDIS, "weight (one scale, whole model)");
    const zoom = htmlEl("div", {});
    const sub = { ...ctx, pic: zoom };
    drawOne(sub, spec.weights[li][hi], spec.keys, spec.queries, `${spec.layer_names[li]}, head ${hi}`, true);
    ctx.pic.replaceChildren(svg, zoom);
    ctx.status.textContent = "Click a thumbnail to open that head large.";
  };
}

// ------------------------------------------------------------------ positional encodings
function parseDims(value, d) {
  const text = String(value);
  const parts = text.replace(/;/g, ",").split(",").map((p) => p.trim()).filter((p) => p);
  if (!parts.length) throw new Error("dims is empty: give dimension indices such as 0, 4, 16");
  const shown = text.length <= 40 ? text : `${text.slice(0, 39)}\u2026`; // never echo a long input whole
  const out = parts.map((p) => { if (!/^-?\d+$/.test(p)) throw new Error(`dims must be comma-separated integers, got ${JSON.stringify(shown)}`); return Number(p); });
  if (out.length > 6) throw new Error(`dims: choose at most 6 dimensions, got ${out.length}`);
  const bad = out.filter((v) => v < 0 || v >= d);
  if (bad.length) throw new Error(`dims [${bad.join(", ")}] out of range: d_model=${d} has dimensions 0..${d - 1}`);
  return out;
}

function positionalView(ctx) {
  const { model, spec } = ctx;
  const dims = textControl(ctx.bar, "dims", "dims", (v) => ctx.set({ dims: v }));
  const P = spec.table.length, D = spec.table[0].length;
  return () => {
    dims.set(model.get("dims"));
    let chosen;
    try { chosen = parseDims(model.get("dims"), D); ctx.error(""); } catch (e) { ctx.error(e.message); return; }
    const pw = 300, ph = 250, top = 54, gap = 40;
    const W = 60 + pw + 70 + 2 * (300 + gap), Hh = top + ph + 50;
    const svg = newSvg(W, Hh);
    svgEl("text", { x: W / 2, y: 15, "text-anchor": "middle", "font-size": 13, class: "llmbook-front-title" }, svg, spec.title);
    // 1. the table, with the chosen dimensions marked above their columns
    const x0 = 55;
    svgEl("text", { x: x0 + pw / 2, y: top - 12, "text-anchor": "middle", "font-size": 11 }, svg, spec.table_title);
    const im = heatImage(svg, x0, top, pw, ph, spec.table, -1, 1, RDBU_R);
    im.addEventListener("mousemove", (ev) => {
      const r = im.getBoundingClientRect();
      const j = clampInt(Math.floor(((ev.clientX - r.left) / r.width) * D), 0, D - 1), i = clampInt(Math.floor(((ev.clientY - r.top) / r.height) * P), 0, P - 1);
      ctx.status.textContent = `position ${i}, dimension ${j}: ${spec.table[i][j].toFixed(4)} (click to add this dimension)`;
    });
    im.addEventListener("click", (ev) => {
      const r = im.getBoundingClientRect();
      const j = clampInt(Math.floor(((ev.clientX - r.left) / r.width) * D), 0, D - 1);
      ctx.set({ dims: [...chosen.filter((d) => d !== j), j].slice(-6).join(", ") });
    });
    chosen.forEach((d, k) => {
      const cx = x0 + ((d + 0.5) / D) * pw;
      svgEl("path", { d: `M${cx - 4},${top - 8} L${cx + 4},${top - 8} L${cx},${top - 1} Z`, fill: PALETTE[k % PALETTE.length] }, svg);
    });
    for (const t of niceTicks(0, D - 1, 4)) svgEl("text", { x: x0 + ((t + 0.5) / D) * pw, y: top + ph + 13, "text-anchor": "middle", "font-size": 10 }, svg, String(t));
    for (const t of niceTicks(0, P - 1, 5)) svgEl("text", { x: x0 - 4, y: top + ((t + 0.5) / P) * ph + 3.5, "text-anchor": "end", "font-size": 10 }, svg, String(t));
    svgEl("text", { x: x0 + pw / 2, y: top + ph + 28, "text-anchor": "middle", "font-size": 11 }, svg, "dimension");
    svgEl("text", { transform: `translate(14,${top + ph / 2}) rotate(-90)`, "text-anchor": "middle", "font-size": 11 }, svg, "position");
    colourBar(svg, x0 + pw + 8, top, ph, -1, 1, RDBU_R, "");
    // 2. the chosen dimensions as waves over position
    const pos = spec.table.map((_, i) => i);
    const series = chosen.map((d, k) => ({ label: `dim ${d}`, x: pos, y: spec.table.map((r) => r[d]), color: PALETTE[k % PALETTE.length] }));
    linePlot(svg, x0 + pw + 60, top - 22, 300, ph + 70, { series, title: "chosen dimensions as waves", xlabel: "position", ylabel: "value", ylim: [-1.15, 1.15], legend: true });
    // 3. similarity against distance (computed in Python; does not depend on dims)
    const sim = spec.similarity;
    linePlot(svg, x0 + pw + 60 + 300 + gap, top - 22, 300, ph + 70, { series: sim.series, title: sim.title, xlabel: sim.xlabel, ylabel: sim.ylabel, legend: true });
    ctx.pic.replaceChildren(svg);
  };
}

// ------------------------------------------------------------------ BPE merges
const utf8Len = (b) => (b < 0x80 ? 1 : b >= 0xc0 && b < 0xe0 ? 2 : b >= 0xe0 && b < 0xf0 ? 3 : b >= 0xf0 && b < 0xf8 ? 4 : 0);
const hexByte = (b) => `<${b.toString(16).toUpperCase().padStart(2, "0")}>`;

// Labels for byte-level tokens read together, as llmbook.viz.attention.byte_token_labels:
// whole characters as themselves, part of a character as the character and the byte
// slice the token holds (今[:2]), bytes that are no UTF-8 at all as <E5>.
function byteTokenLabels(runs) {
  const data = runs.flat();
  const dec = new TextDecoder("utf-8", { fatal: true });
  const chars = [];
  for (let i = 0; i < data.length;) {
    const n = utf8Len(data[i]);
    let ch = null;
    if (n && i + n <= data.length) {
      try { ch = dec.decode(new Uint8Array(data.slice(i, i + n))); } catch (e) { ch = null; }
    }
    chars.push(ch === null ? [i, i + 1, null] : [i, i + n, ch]);
    i += ch === null ? 1 : n;
  }
  const labels = [];
  let k = 0, start = 0;
  for (const run of runs) {
    const end = start + run.length;
    let out = "";
    while (k < chars.length && chars[k][0] < end) {
      const [cs, ce, ch] = chars[k];
      if (ch === null) out += hexByte(data[cs]);
      else if (cs >= start && ce <= end) out += ch;
      else {
        const lo = Math.max(cs, start) - cs, hi = Math.min(ce, end) - cs;
        out += ch + (lo === 0 ? `[:${hi}]` : hi === ce - cs ? `[${lo}:]` : `[${lo}:${hi}]`);
      }
      if (ce <= end) k += 1; else break;
    }
    labels.push(out);
    start = end;
  }
  return labels;
}

function tokensAt(spec, k) {
  // boundary i (between unit i and i+1) is gone once merge steps[i] (0-based) is learned
  const out = [];
  let cur = [spec.units[0]];
  for (let i = 0; i < spec.steps.length; i++) {
    const s = spec.steps[i];
    if (s >= 0 && s < k) cur.push(spec.units[i + 1]);
    else { out.push(cur); cur = [spec.units[i + 1]]; }
  }
  out.push(cur);
  return spec.level === "bytes" ? byteTokenLabels(out) : out.map((u) => u.join(""));
}

function bpeView(ctx) {
  const { model, spec } = ctx;
  const K = spec.pairs.length;
  const slider = rangeControl(ctx.bar, "merges", "merges", 0, K, 1, (v) => ctx.set({ step: v }), 0);
  return () => {
    const k = clampInt(model.get("step"), 0, K);
    slider.set(k);
    const n = spec.tokens_by_k[k];
    const unit = spec.level === "characters" ? "characters + &lt;unk&gt;" : "bytes";
    const wrap = htmlEl("div", { class: "llmbook-front-bpe" });
    const stats = htmlEl("p", {}, wrap);
    stats.innerHTML = `<b>${k}</b> merges &nbsp;|&nbsp; vocabulary size <b>${spec.n_base + k}</b> (${spec.n_base} ${unit} + ${k} merges)` +
      ` &nbsp;|&nbsp; ${n} tokens for ${spec.n_chars} characters: <b>${(n / spec.n_chars).toFixed(3)}</b> tokens per character`;
    const text = htmlEl("div", {}, wrap);
    text.style.cssText = `font-family:monospace, ${FONT};line-height:1.9;white-space:normal`;
    tokensAt(spec, k).forEach((t, i) => {
      const span = htmlEl("span", { title: `token ${i}` }, text);
      span.style.cssText = `background:${TINTS[i % TINTS.length]};border-radius:3px;padding:1px 0;margin-right:1px`;
      const parts = t.replace(/ /g, "\u00b7").split("\n");
      parts.forEach((p, j) => { span.append(p); if (j < parts.length - 1) { span.append("\u21b5"); htmlEl("br", {}, span); } });
    });
    if (spec.n_chars > spec.shown_chars) htmlEl("p", {}, wrap).innerHTML = `<i>showing the first ${spec.shown_chars} of ${spec.n_chars} characters</i>`;
    htmlEl("p", {}, wrap).innerHTML = "<b>Latest merges</b>";
    const table = htmlEl("table", {}, wrap);
    table.style.cssText = "border-collapse:collapse;font-size:90%";
    const head = htmlEl("tr", {}, table);
    for (const h of ["rank", "pair", "new token", "count"]) htmlEl("th", {}, head, h);
    if (k === 0) {
      const td = htmlEl("td", { colspan: 4 }, htmlEl("tr", {}, table));
      htmlEl("i", {}, td, `no merges yet: every token is a single ${spec.level === "characters" ? "character" : "byte"}`);
    }
    for (let r = Math.max(0, k - 12); r < k; r++) {
      const tr = htmlEl("tr", {}, table);
      const [a, b] = spec.pairs[r];
      htmlEl("td", {}, tr, String(r));
      const td = htmlEl("td", {}, tr);
      htmlEl("code", {}, td, a); td.append(" + "); htmlEl("code", {}, td, b);
      htmlEl("code", {}, htmlEl("td", {}, tr), a + b);
      htmlEl("td", {}, tr, String(spec.counts[r]));
    }
    const svg = newSvg(600, 260);
    const ks = spec.tokens_by_k.map((_, i) => i);
    linePlot(svg, 0, 0, 600, 260, {
      series: [{ label: "tokens per character", x: ks, y: spec.tokens_by_k.map((v) => v / spec.n_chars), marker: ks.length <= 80 }],
      title: `BPE on ${spec.level}: shorter sequences as the vocabulary grows`, xlabel: "number of merges",
      ylabel: "tokens per character", vline: { x: k, label: `${k} merges` },
    });
    wrap.appendChild(svg);
    ctx.pic.replaceChildren(wrap);
  };
}

// ------------------------------------------------------------------ bar chart
function barsView(ctx) {
  const { model, spec } = ctx;
  const F = spec.frames.length;
  const slider = rangeControl(ctx.bar, "step", spec.step_label || "step", 0, F - 1, 1, (v) => ctx.set({ step: v }), 0);
  if (F < 2) slider.box.style.display = "none";
  // one value axis for every frame, so moving the slider compares like with like
  const vmax = Math.max(1e-12, ...spec.frames.flatMap((f) => f.values));
  return () => {
    const k = clampInt(model.get("step"), 0, F - 1);
    slider.set(k);
    const frame = spec.frames[k];
    const n = frame.values.length, size = 11;
    const left = 56, bottom = 16 + Math.max(...spec.labels.map((l) => textWidth(l, size))), top = 30;
    const bw = Math.max(10, Math.min(40, Math.floor(560 / n)));
    const W = left + n * bw + 20, ph = 220, Hh = top + ph + bottom + 18;
    const svg = newSvg(W, Hh);
    svgEl("text", { x: left + (n * bw) / 2, y: 17, "text-anchor": "middle", "font-size": 13, class: "llmbook-front-title" }, svg,
      `${spec.title}${frame.label ? ` \u2014 ${frame.label}` : ""}`);
    for (const t of niceTicks(0, vmax, 5)) {
      const y = top + ph - (t / vmax) * ph;
      svgEl("line", { x1: left, x2: left + n * bw, y1: y, y2: y, stroke: "#000", "stroke-opacity": 0.08 }, svg);
      svgEl("text", { x: left - 4, y: y + 3.5, "text-anchor": "end", "font-size": 10 }, svg, fmt(t, 3));
    }
    frame.values.forEach((v, i) => {
      const h = (Math.max(0, v) / vmax) * ph;
      const colourIndex = frame.colors ? frame.colors[i] : 0;
      const r = svgEl("rect", { x: left + i * bw + 1, y: top + ph - h, width: bw - 2, height: h, fill: PALETTE[colourIndex % PALETTE.length] }, svg);
      svgEl("title", {}, r, `${spec.labels[i]}: ${v}`);
      svgEl("text", { transform: `translate(${left + (i + 0.5) * bw + 3.5},${top + ph + 5}) rotate(-90)`, "text-anchor": "end", "font-size": size }, svg, spec.labels[i]);
    });
    svgEl("line", { x1: left, x2: left + n * bw, y1: top + ph, y2: top + ph, stroke: "#444" }, svg);
    if (spec.ylabel) svgEl("text", { transform: `translate(12,${top + ph / 2}) rotate(-90)`, "text-anchor": "middle", "font-size": 11 }, svg, spec.ylabel);
    ctx.pic.replaceChildren(svg);
  };
}

// ------------------------------------------------------------------ panels (several small charts)
// A row of panels drawn from data Python computed: "bars" (vertical, e.g. a next-token
// distribution, each bar its own colour), "hbars" (horizontal with value labels),
// "points" (scatter / error bars, optional diagonal), "text" (a monospace block of
// segments, bold or not) and "tokens" (a table of token strips, one row per tokenizer).
// No display-only controls: every control of these explorers is a Python one.
const panelColour = (c, i) => (typeof c === "number" ? PALETTE[c % PALETTE.length] : c || PALETTE[i % PALETTE.length]);

function axesFrame(svg, x, y, w, h, o) {
  // Axes box at (x, y, w, h) in SVG units; returns the scales. o: xlim, ylim, title, ylabel, nx, xticks/yticks (false = none)
  const [x0, x1] = o.xlim, [y0, y1] = o.ylim;
  const sx = (v) => x + ((v - x0) / (x1 - x0 || 1)) * w, sy = (v) => y + h - ((v - y0) / (y1 - y0 || 1)) * h;
  if (o.yticks !== false) {
    for (const t of niceTicks(y0, y1, 5)) {
      svgEl("line", { x1: x, x2: x + w, y1: sy(t), y2: sy(t), stroke: "#000", "stroke-opacity": 0.08 }, svg);
      svgEl("text", { x: x - 4, y: sy(t) + 3.5, "text-anchor": "end", "font-size": 10 }, svg, fmt(t, 3));
    }
  }
  if (o.xticks !== false) {
    for (const t of niceTicks(x0, x1, o.nx || 6)) {
      svgEl("line", { x1: sx(t), x2: sx(t), y1: y, y2: y + h, stroke: "#000", "stroke-opacity": 0.08 }, svg);
      svgEl("text", { x: sx(t), y: y + h + 13, "text-anchor": "middle", "font-size": 10 }, svg, fmt(t, 3));
    }
  }
  svgEl("rect", { x, y, width: w, height: h, fill: "none", stroke: "#444", "stroke-width": 0.8 }, svg);
  if (o.title) svgEl("text", { x: x + w / 2, y: y - 8, "text-anchor": "middle", "font-size": 12, class: "llmbook-panel-title" }, svg, o.title);
  if (o.ylabel) svgEl("text", { transform: `translate(${x - 38},${y + h / 2}) rotate(-90)`, "text-anchor": "middle", "font-size": 11 }, svg, o.ylabel);
  return { sx, sy };
}

function titleLines(svg, cx, y, lines, size, anchor) {
  lines.forEach((l, i) => svgEl("text", { x: cx, y: y + i * (size + 3), "text-anchor": anchor || "middle", "font-size": size, class: "llmbook-panel-title" }, svg, l));
  return lines.length * (size + 3);
}

function barsPanel(p) {
  const n = p.values.length, size = p.label_size || 11;
  const bw = Math.max(12, Math.min(40, Math.floor((p.width || 560) / Math.max(1, n))));
  const widest = Math.max(0, ...p.labels.map((l) => textWidth(l, size)));
  const rotate = widest > bw - 2;
  const titles = String(p.title || "").split("\n").filter((s) => s);
  const left = 56, top = 12 + titles.length * 15 + (p.note ? 14 : 0), ph = p.height || 220;
  const bottom = (rotate ? widest + 10 : size + 10) + (p.xlabel ? 20 : 4);
  const W = left + n * bw + 16, H = top + ph + bottom;
  const svg = newSvg(W, H);
  titleLines(svg, p.title_left ? left : left + (n * bw) / 2, 15, titles, 12, p.title_left ? "start" : "middle");
  const ymax = p.ymax || 1.05 * Math.max(1e-12, ...p.values);
  const { sy } = axesFrame(svg, left, top, n * bw, ph, { xlim: [0, n], ylim: [0, ymax], xticks: false, ylabel: p.ylabel });
  if (p.note) svgEl("text", { x: left + n * bw - 4, y: top - 4, "text-anchor": "end", "font-size": 9.5, fill: "#595959", class: "llmbook-panel-note" }, svg, p.note);
  p.values.forEach((v, i) => {
    const yv = sy(Math.min(ymax, Math.max(0, v)));
    const r = svgEl("rect", { x: left + i * bw + 1.5, y: yv, width: bw - 3, height: top + ph - yv, fill: panelColour(p.colors ? p.colors[i] : 0, 0) }, svg);
    svgEl("title", {}, r, `${p.labels[i]}: ${v}`);
    const cx = left + (i + 0.5) * bw;
    if (rotate) svgEl("text", { transform: `translate(${cx + 3.5},${top + ph + 5}) rotate(-90)`, "text-anchor": "end", "font-size": size }, svg, p.labels[i]);
    else svgEl("text", { x: cx, y: top + ph + size + 4, "text-anchor": "middle", "font-size": size }, svg, p.labels[i]);
  });
  if (p.xlabel) svgEl("text", { x: left + (n * bw) / 2, y: H - 6, "text-anchor": "middle", "font-size": 11 }, svg, p.xlabel);
  return svg;
}

function hbarsPanel(p) {
  const n = p.values.length, size = 11, rh = 20;
  const left = 14 + Math.max(0, ...p.labels.map((l) => textWidth(l, size))), pw = p.width || 360, top = 26, H = top + n * rh + 40;
  const svg = newSvg(left + pw + 50, H);
  const xmax = (p.xmax || Math.max(1e-12, ...p.values)) * 1.15;
  const { sx } = axesFrame(svg, left, top, pw, n * rh, { xlim: [0, xmax], ylim: [0, n], title: p.title, nx: 5, yticks: false });
  p.values.forEach((v, i) => {
    const y = top + i * rh;
    const r = svgEl("rect", { x: left, y: y + 3, width: Math.max(0, sx(v) - left), height: rh - 6, fill: panelColour(p.colors ? p.colors[i] : 0, 0) }, svg);
    svgEl("title", {}, r, `${p.labels[i]}: ${v}`);
    svgEl("text", { x: left - 5, y: y + rh / 2 + 4, "text-anchor": "end", "font-size": size }, svg, p.labels[i]);
    svgEl("text", { x: sx(v) + 3, y: y + rh / 2 + 3.5, "font-size": 9 }, svg, Number(v).toFixed(p.digits === undefined ? 2 : p.digits));
  });
  if (p.xlabel) svgEl("text", { x: left + pw / 2, y: H - 6, "text-anchor": "middle", "font-size": 11 }, svg, p.xlabel);
  return svg;
}

function pointsPanel(p) {
  const pw = p.width || 300, ph = p.height || 260, left = 56, top = 28, W = left + pw + 12, H = top + ph + 44;
  const svg = newSvg(W, H);
  const { sx, sy } = axesFrame(svg, left, top, pw, ph, { xlim: p.xlim, ylim: p.ylim, title: p.title, ylabel: p.ylabel, nx: p.nx });
  // points outside the axes are left out and error bars cut at the frame (as a clipped matplotlib axes)
  const g = svgEl("g", {}, svg);
  const inX = (v) => v >= p.xlim[0] && v <= p.xlim[1], cy = (v) => Math.min(p.ylim[1], Math.max(p.ylim[0], v));
  if (p.diagonal) {
    const lo = Math.max(p.xlim[0], p.ylim[0]), hi = Math.min(p.xlim[1], p.ylim[1]);
    svgEl("line", { x1: sx(lo), y1: sy(lo), x2: sx(hi), y2: sy(hi), stroke: "#b3b3b3", "stroke-width": 1 }, g);
  }
  p.series.forEach((s, k) => {
    const c = panelColour(s.color, k), r = s.r || 2.6;
    s.x.forEach((xv, i) => {
      if (!inX(xv)) return;
      if (s.yerr) svgEl("line", { x1: sx(xv), x2: sx(xv), y1: sy(cy(s.y[i] - s.yerr[i])), y2: sy(cy(s.y[i] + s.yerr[i])), stroke: c, "stroke-width": 1.4 }, g);
      if (s.y[i] >= p.ylim[0] && s.y[i] <= p.ylim[1]) svgEl("circle", { cx: sx(xv), cy: sy(s.y[i]), r, fill: c }, g);
    });
  });
  if (p.xlabel) svgEl("text", { x: left + pw / 2, y: H - 6, "text-anchor": "middle", "font-size": 11 }, svg, p.xlabel);
  if (p.legend) {
    const lw = 26 + Math.max(...p.series.map((s) => textWidth(s.label || "", 9.5)));
    const lx = left + 6, ly = top + 6;
    svgEl("rect", { x: lx, y: ly, width: lw, height: p.series.length * 14 + 6, fill: "white", "fill-opacity": 0.85, stroke: "#ccc" }, svg);
    p.series.forEach((s, k) => {
      svgEl("circle", { cx: lx + 10, cy: ly + 10 + k * 14, r: 3, fill: panelColour(s.color, k) }, svg);
      svgEl("text", { x: lx + 18, y: ly + 13.5 + k * 14, "font-size": 9.5 }, svg, s.label || "");
    });
  }
  return svg;
}

function textPanel(p) {
  const box = htmlEl("div", { class: "llmbook-panel-text" });
  box.style.cssText = `font-family:monospace, ${FONT};white-space:pre-wrap;border:1px solid #ddd;padding:6px;margin:4px 0;max-width:760px`;
  if (p.title) htmlEl("div", {}, box, p.title).style.cssText = `font-family:${FONT};font-size:12px;color:#555;margin-bottom:3px`;
  for (const s of p.segments) {
    const e = htmlEl(s.bold ? "b" : "span", {}, box, s.text);
    if (s.color) e.style.color = s.color;
  }
  return box;
}

function tokensPanel(p) {
  const table = htmlEl("table", { class: "llmbook-panel-tokens" });
  table.style.cssText = "border-collapse:collapse;font-size:13px";
  const head = htmlEl("tr", {}, table);
  p.columns.forEach((c, i) => { htmlEl("th", {}, head, c).style.cssText = `padding:2px 8px;text-align:${i === 0 || i === 3 ? "left" : "center"}`; });
  for (const r of p.rows) {
    const tr = htmlEl("tr", {}, table);
    tr.style.borderTop = "1px solid #ddd";
    htmlEl("td", {}, tr, r.name).style.cssText = "padding:2px 8px;white-space:nowrap";
    htmlEl("td", {}, tr, String(r.tokens.length)).style.cssText = "padding:2px 8px;text-align:right";
    htmlEl("td", {}, tr, (r.tokens.length / p.n_chars).toFixed(2)).style.cssText = "padding:2px 8px;text-align:right";
    const cell = htmlEl("td", {}, tr);
    cell.style.cssText = "padding:2px 8px";
    const strip = htmlEl("div", {}, cell);
    strip.style.cssText = `font-family:monospace, ${FONT};line-height:1.9;white-space:normal`;
    r.tokens.forEach((t, k) => {
      const span = htmlEl("span", { title: `token ${k}` }, strip);
      span.style.cssText = `background:${TINTS[k % TINTS.length]};border-radius:3px;padding:1px 0;margin-right:1px`;
      const parts = String(t).replace(/ /g, "\u00b7").split("\n");
      parts.forEach((s, j) => { span.append(s); if (j < parts.length - 1) { span.append("\u21b5"); htmlEl("br", {}, span); } });
      htmlEl("wbr", {}, strip); // a long run of tokens may wrap between two tokens
    });
  }
  return table;
}

const PANELS = { bars: barsPanel, hbars: hbarsPanel, points: pointsPanel, text: textPanel, tokens: tokensPanel };

function panelsView(ctx) {
  const { spec } = ctx;
  return () => {
    const wrap = htmlEl("div", { class: "llmbook-front-panels" });
    if (spec.title) {
      const t = htmlEl("div", { class: "llmbook-front-title" }, wrap, spec.title);
      t.style.cssText = "font-size:14px;text-align:center;margin:2px 0 4px 0;max-width:1100px";
    }
    let row = null;
    for (const p of spec.panels) {
      const make = PANELS[p.type];
      if (!make) throw new Error(`unknown panel type ${JSON.stringify(p.type)}`);
      if (p.type === "text" || p.type === "tokens" || !row) {
        row = htmlEl("div", {}, wrap);
        row.style.cssText = "display:flex;flex-wrap:wrap;align-items:flex-start;gap:8px";
      }
      row.appendChild(make(p));
      if (p.type === "text" || p.type === "tokens") row = null;
    }
    ctx.pic.replaceChildren(wrap);
  };
}

// ------------------------------------------------------------------ bar grid ("bar_grid")
// A grid of bar charts (spec.panels, spec.columns per row): "v" panels draw a bar per label
// with the labels below; "h" panels a bar per label with the labels at the left, the first
// on top. Optional: a slider keeping the first k bars of every panel (spec.top_k, trait
// `step`; the Python side sends each panel's bars largest first) and a table of text below
// the charts (spec.table: caption, header, rows), e.g. answers sampled from two models.
const GRID_W = 340, GRID_LABEL = 11;

// The panels as drawn with the first k bars kept (all of them when k is null), each with its
// value-axis maximum: the panel's own vmax, else the largest value shown (x1.3 with room for
// the value written after each bar, as the matplotlib figures of the same data).
function barGridShown(spec, k) {
  return spec.panels.map((p) => {
    const n = k === null || k === undefined ? p.values.length : Math.max(1, Math.min(p.values.length, k));
    const values = p.values.slice(0, n), labels = p.labels.slice(0, n);
    const vmax = p.vmax || Math.max(1e-3, ...values) * (p.annotate ? 1.3 : 1.05);
    return { ...p, values, labels, vmax };
  });
}

function gridClip(s, maxPx, size) {
  s = String(s);
  if (textWidth(s, size) <= maxPx) return s;
  while (s.length > 1 && textWidth(`${s}\u2026`, size) > maxPx) s = s.slice(0, -1);
  return `${s}\u2026`;
}

function barGridBox(p) {
  // margins (px) of one panel and the height of its plot area
  const n = p.values.length;
  const widest = Math.max(0, ...p.labels.map((s) => textWidth(s, GRID_LABEL)));
  if (p.orient === "h") {
    const bh = n > 12 ? 16 : 20;
    return { left: Math.min(GRID_W * 0.42, widest + 10) + (p.ylabel ? 16 : 0), right: p.annotate ? 40 : 14, top: 24,
      bottom: p.xlabel ? 36 : 20, plotH: n * bh };
  }
  const left = 50, slot = (GRID_W - left - 10) / n, rotate = widest > slot - 3;
  const labelH = rotate ? Math.min(widest, 110) + 8 : GRID_LABEL + 8;
  return { left, right: 10, top: 24, bottom: labelH + (p.xlabel ? 20 : 6), plotH: 170, rotate };
}

function drawBarGridPanel(svg, x, y, p, box) {
  const g = svgEl("g", { class: "llmbook-front-grid-panel" }, svg);
  const px = x + box.left, py = y + box.top, pw = GRID_W - box.left - box.right, ph = box.plotH, n = p.values.length;
  const fill = PALETTE[(p.color || 0) % PALETTE.length];
  const frac = (v) => Math.max(0, Math.min(v, p.vmax)) / p.vmax;
  svgEl("text", { x: px + pw / 2, y: y + 15, "text-anchor": "middle", "font-size": 12 }, g, gridClip(p.title, GRID_W - 4, 12));
  const ticks = niceTicks(0, p.vmax, p.orient === "h" ? 4 : 5);
  if (p.orient === "h") {
    const bh = ph / n;
    for (const t of ticks) {
      const tx = px + frac(t) * pw;
      svgEl("line", { x1: tx, x2: tx, y1: py, y2: py + ph, stroke: "#000", "stroke-opacity": 0.08 }, g);
      svgEl("text", { x: tx, y: py + ph + 13, "text-anchor": "middle", "font-size": 10 }, g, fmt(t, 3));
    }
    p.values.forEach((v, i) => {
      const r = svgEl("rect", { x: px, y: py + i * bh + 2, width: frac(v) * pw, height: bh - 4, fill }, g);
      svgEl("title", {}, r, `${p.labels[i]}: ${v}`);
      svgEl("text", { x: px - 4, y: py + (i + 0.5) * bh + 4, "text-anchor": "end", "font-size": GRID_LABEL }, g,
        gridClip(p.labels[i], box.left - (p.ylabel ? 20 : 6), GRID_LABEL));
      if (p.annotate) svgEl("text", { x: px + frac(v) * pw + 3, y: py + (i + 0.5) * bh + 3.5, "font-size": 9.5 }, g, v.toFixed(2));
    });
    if (p.xlabel) svgEl("text", { x: px + pw / 2, y: py + ph + 30, "text-anchor": "middle", "font-size": 11 }, g, p.xlabel);
    if (p.ylabel) svgEl("text", { transform: `translate(${x + 11},${py + ph / 2}) rotate(-90)`, "text-anchor": "middle", "font-size": 11 }, g, p.ylabel);
  } else {
    const bw = pw / n;
    for (const t of ticks) {
      const ty = py + ph - frac(t) * ph;
      svgEl("line", { x1: px, x2: px + pw, y1: ty, y2: ty, stroke: "#000", "stroke-opacity": 0.08 }, g);
      svgEl("text", { x: px - 4, y: ty + 3.5, "text-anchor": "end", "font-size": 10 }, g, fmt(t, 3));
    }
    p.values.forEach((v, i) => {
      const h = frac(v) * ph, cx = px + (i + 0.5) * bw;
      const r = svgEl("rect", { x: px + i * bw + 1.5, y: py + ph - h, width: Math.max(1, bw - 3), height: h, fill }, g);
      svgEl("title", {}, r, `${p.labels[i]}: ${v}`);
      if (p.annotate) svgEl("text", { x: cx, y: py + ph - h - 3, "text-anchor": "middle", "font-size": 9.5 }, g, v.toFixed(2));
      const label = gridClip(p.labels[i], 110, GRID_LABEL);
      const attrs = box.rotate
        ? { transform: `translate(${cx + 4},${py + ph + 5}) rotate(-90)`, "text-anchor": "end", "font-size": GRID_LABEL }
        : { x: cx, y: py + ph + 5 + GRID_LABEL, "text-anchor": "middle", "font-size": GRID_LABEL };
      svgEl("text", attrs, g, label);
    });
    if (p.xlabel) svgEl("text", { x: px + pw / 2, y: py + ph + box.bottom - 5, "text-anchor": "middle", "font-size": 11 }, g, p.xlabel);
    if (p.ylabel) svgEl("text", { transform: `translate(${x + 11},${py + ph / 2}) rotate(-90)`, "text-anchor": "middle", "font-size": 11 }, g, p.ylabel);
  }
  svgEl("line", { x1: px, x2: px + pw, y1: py + ph, y2: py + ph, stroke: "#444" }, g);
  svgEl("line", { x1: px, x2: px, y1: py, y2: py + ph, stroke: "#444" }, g);
}

function barGridView(ctx) {
  const { model, spec } = ctx;
  const tk = spec.top_k;
  let slider = null;
  if (tk) slider = rangeControl(ctx.bar, tk.name || "top_k", tk.label || "top k", tk.min, tk.max, 1, (v) => ctx.set({ step: v }), 0);
  const cols = Math.max(1, Math.min(spec.columns || 1, spec.panels.length));
  return () => {
    let k = null;
    if (tk) { k = clampInt(model.get("step"), tk.min, tk.max); slider.set(k); }
    const panels = barGridShown(spec, k), boxes = panels.map(barGridBox);
    const gap = 24, head = spec.title ? 30 : 6;
    const rows = [];
    for (let i = 0; i < panels.length; i += cols) rows.push(panels.map((_, j) => j).slice(i, i + cols));
    const rowH = rows.map((r) => Math.max(...r.map((j) => boxes[j].top + boxes[j].plotH + boxes[j].bottom)));
    // as wide as the panels, or as the title (up to 900 px) when that is wider: panels centred below it
    const inner = cols * GRID_W + (cols - 1) * gap;
    const W = Math.max(inner, Math.min(900, spec.title ? textWidth(spec.title, 13) + 16 : 0));
    const Hh = head + rowH.reduce((a, b) => a + b + 10, 0), x0 = (W - inner) / 2;
    const svg = newSvg(W, Hh);
    if (spec.title) {
      svgEl("text", { x: W / 2, y: 18, "text-anchor": "middle", "font-size": 13, class: "llmbook-front-title" }, svg,
        gridClip(spec.title, W - 8, 13));
    }
    let y = head;
    rows.forEach((r, ri) => {
      r.forEach((j, c) => drawBarGridPanel(svg, x0 + c * (GRID_W + gap), y, panels[j], boxes[j]));
      y += rowH[ri] + 10;
    });
    const out = [svg];
    if (spec.table) {
      const wrap = htmlEl("div", { class: "llmbook-front-table" });
      wrap.style.cssText = "font-size:13px;margin-top:4px";
      if (spec.table.caption) htmlEl("div", {}, wrap, spec.table.caption);
      const table = htmlEl("table", {}, wrap);
      table.style.cssText = "border-collapse:collapse";
      const cell = `font-family:monospace, ${FONT};padding:2px 10px;border-bottom:1px solid #eee;text-align:left`;
      const hr = htmlEl("tr", {}, table);
      spec.table.header.forEach((h) => { htmlEl("th", {}, hr, h).style.cssText = cell; });
      spec.table.rows.forEach((row) => {
        const tr = htmlEl("tr", {}, table);
        row.forEach((v) => { htmlEl("td", {}, tr, v).style.cssText = cell; });
      });
      out.push(wrap);
    }
    ctx.pic.replaceChildren(...out);
  };
}

// ------------------------------------------------------------------ the widget
const VIEWS = { attention: attentionView, model_view: modelView, positional: positionalView, bpe: bpeView, bars: barsView, panels: panelsView, bar_grid: barGridView };
const TRAITS = ["layer", "head", "scale", "causal", "dims", "step"];

function render({ model, el }) {
  const root = htmlEl("div", { class: "llmbook-front" }, el);
  root.style.cssText = `font-family:${FONT};color:#222`;
  const bar = htmlEl("div", { class: "llmbook-front-controls" }, root);
  const err = htmlEl("div", { class: "llmbook-front-error" }, root);
  err.style.cssText = "color:#b00020;font-size:13px";
  const stale = htmlEl("div", { class: "llmbook-front-stale" }, root);
  stale.style.cssText = "display:none;color:#555;font-style:italic;font-size:13px";
  stale.textContent = "This picture is out of date: fix the error above to redraw it.";
  const pic = htmlEl("div", { class: "llmbook-front-picture" }, root);
  const status = htmlEl("div", { class: "llmbook-front-status" }, root);
  status.style.cssText = "color:#555;font-size:12px;min-height:1.3em";
  let draw = null;
  const ctx = {
    model, bar, pic, status,
    error: (msg) => { err.textContent = msg; if (msg) pic.replaceChildren(); },
    set: (values) => { for (const [k, v] of Object.entries(values)) model.set(k, v); model.save_changes(); },
  };
  const build = () => {
    bar.replaceChildren(); pic.replaceChildren(); err.textContent = ""; status.textContent = "";
    const spec = model.get("spec") || {};
    const view = VIEWS[spec.kind];
    ctx.spec = spec;
    draw = view ? view(ctx) : null;
    if (!view && spec.kind) err.textContent = `unknown view kind ${JSON.stringify(spec.kind)}`;
    redraw();
  };
  const redraw = () => {
    if (draw) {
      try { draw(); } catch (e) { err.textContent = `could not draw: ${e.message}`; }
    }
    const isStale = !!model.get("stale");
    stale.style.display = isStale ? "block" : "none";
    pic.style.opacity = isStale ? "0.3" : "1";
    pic.style.filter = isStale ? "grayscale(1)" : "none";
    bar.style.opacity = isStale ? "0.5" : "1";
  };
  model.on("change:spec", build);
  for (const t of [...TRAITS, "stale"]) model.on(`change:${t}`, redraw);
  build();
  return () => {
    model.off("change:spec", build);
    for (const t of [...TRAITS, "stale"]) model.off(`change:${t}`, redraw);
  };
}

export default { render };
