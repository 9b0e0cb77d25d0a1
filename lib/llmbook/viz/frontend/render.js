// The book's front-end renderer: draws an explorer's picture in the browser from data
// Python sent once (the widget's `spec`), so display-only controls (layer, head, scale,
// causal view, dimensions, merge step, top k) redraw instantly, without a kernel round trip.
//
// One module for every view type; each view reads `spec.kind`:
//   "attention"   heatmap of one head, or all heads of a layer on ONE colour scale
//   "model_view"  every layer x head as thumbnails + the selected head drawn large
//   "positional"  encoding table heatmap + chosen dimensions as waves + a line plot
//   "bpe"         text coloured token by token after k merges + merge table + curve
//   "bars"        a bar chart per frame (e.g. a distribution per step), frame chosen by a slider
//   "panels"      small charts and text side by side (bars, horizontal bars, points, text,
//                 token strips, a table), in rows of `columns`, optionally cut to the top k
//                 bars of every chart by a slider
// Pictures are SVG (text, ticks, colour bars); heatmap cells are one pixelated <image>
// per panel, painted on an off-screen canvas. Selections live in the widget model
// (traits `layer`, `head`, `scale`, `causal`, `dims`, `step`), so Python sees them.
//
// Colours of text, axes and background come from JupyterLab's theme variables (light and
// dark themes), with light defaults where they are not defined (the static book). Layouts
// follow the width the picture has: panels wrap onto new rows and grids take fewer columns
// in a narrow window, instead of shrinking the whole picture and its text.
// The same file runs in a static HTML page (scripts/build_html.py) with a stand-in model.

const FONT = '"DejaVu Sans", "llmbook CJK", "Noto Sans CJK SC", "Noto Sans SC", "Source Han Sans SC", "PingFang SC", "Microsoft YaHei", "Noto Color Emoji", sans-serif';
// JupyterLab's theme variables; the fallbacks are the light theme's colours.
const THEME = {
  fg: "var(--jp-ui-font-color1, #1f1f1f)", // text, axes
  fg2: "var(--jp-ui-font-color2, #595959)", // secondary text (notes, captions)
  bg: "var(--jp-layout-color0, #ffffff)", // the picture's background
  line: "var(--jp-border-color2, #d5d5d5)", // table rules, frames
  err: "var(--jp-error-color1, #b00020)",
};
const INK = "#1f1f1f"; // text drawn on a light tint (tokens), whatever the theme
// Okabe & Ito, the order of llmbook.viz.style.PALETTE
const PALETTE = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000"];
const TINTS = ["#cfe3f2", "#f7e0b0", "#c6eadd", "#f5cdb8", "#eed3e5", "#d3ecf8", "#f9f3bd", "#dddddd"];
// Matplotlib's viridis and RdBu_r, sampled at 11 stops (linear interpolation between them).
const VIRIDIS = [[68, 1, 84], [72, 35, 116], [64, 67, 135], [52, 94, 141], [41, 120, 142], [32, 144, 140],
  [34, 167, 132], [68, 190, 112], [121, 209, 81], [189, 222, 38], [253, 231, 37]];
const RDBU_R = [[5, 48, 97], [33, 102, 172], [67, 147, 195], [146, 197, 222], [209, 229, 240], [247, 247, 247],
  [253, 219, 199], [244, 165, 130], [214, 96, 77], [178, 24, 43], [103, 0, 31]];
const MASKED = [150, 150, 150]; // a cell a causal mask forbids: grey, unlike any viridis colour
const SVG_NS = "http://www.w3.org/2000/svg";
const GRID_LABELS = 12; // at most this many token labels per axis in an all-heads grid
const MAX_LABELS = 60; // ... and in a single large heatmap
const MIN_FONT = 9; // no text is drawn smaller (px)
const MONO_CHAR = 8; // width of a monospace character at 13 px (DejaVu Sans Mono: 7.8), for laying out tables

// ------------------------------------------------------------------ small helpers
function colour(stops, t) {
  if (!Number.isFinite(t)) return [255, 255, 255];
  const x = Math.min(1, Math.max(0, t)) * (stops.length - 1);
  const i = Math.min(stops.length - 2, Math.floor(x));
  const f = x - i;
  return stops[i].map((c, k) => Math.round(c + f * (stops[i + 1][k] - c)));
}
const css = (rgb) => `rgb(${rgb[0]},${rgb[1]},${rgb[2]})`;

// An SVG element. A theme colour (a CSS `var(...)`) cannot be a presentation attribute, so it
// goes into the style; text without a fill takes the theme's text colour (currentColor).
function svgEl(tag, attrs, parent, text) {
  const e = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    const s = String(v);
    if (s.startsWith("var(")) {
      if (e.style.setProperty) e.style.setProperty(k, s); else e.style[k] = s;
    } else e.setAttribute(k, s);
  }
  if (tag === "text" && !(attrs && "fill" in attrs)) e.setAttribute("fill", "currentColor");
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
// Whitespace made visible, as in the coloured token strips: space ·, newline ↵, tab ⇥.
const visible = (s) => String(s).replace(/ /g, "\u00b7").replace(/\n/g, "\u21b5").replace(/\t/g, "\u21e5");
const plural = (n, word) => `${n} ${word}${n === 1 ? "" : "s"}`;

// Cut a label to maxPx (at `size`), with an ellipsis.
// `s` in at most `maxLines` lines of `maxPx` (broken between words), the last one cut with an ellipsis.
function wrapLines(s, maxPx, size, maxLines) {
  const lines = [];
  let rest = String(s).split(/\s+/).filter(Boolean);
  while (rest.length && lines.length < maxLines - 1) {
    let n = rest.length;
    while (n > 1 && textWidth(rest.slice(0, n).join(" "), size) > maxPx) n -= 1;
    if (n === rest.length) break;
    lines.push(rest.slice(0, n).join(" "));
    rest = rest.slice(n);
  }
  if (rest.length) lines.push(clipText(rest.join(" "), maxPx, size));
  return lines;
}

function clipText(s, maxPx, size) {
  s = String(s);
  if (textWidth(s, size) <= maxPx) return s;
  while (s.length > 1 && textWidth(`${s}\u2026`, size) > maxPx) s = s.slice(0, -1);
  return `${s}\u2026`;
}

// A heatmap panel: values (rows x cols) painted one pixel per cell, scaled up crisply.
// A null cell is one a mask forbids (grey).
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
      // null: masked (grey); NaN: a gap between panels (transparent: the background shows)
      const rgb = v === null ? MASKED : Number.isFinite(v) ? colour(stops, (v - vmin) / span) : [0, 0, 0];
      const o = 4 * (i * nc + j);
      img.data[o] = rgb[0]; img.data[o + 1] = rgb[1]; img.data[o + 2] = rgb[2]; img.data[o + 3] = v === null || Number.isFinite(v) ? 255 : 0;
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
  svgEl("rect", { x, y, width: 12, height: h, fill: "none", stroke: "currentColor", "stroke-width": 0.5 }, parent);
  for (const t of niceTicks(vmin, vmax, 5)) {
    const ty = y + h - ((t - vmin) / (vmax - vmin || 1)) * h;
    svgEl("line", { x1: x + 12, x2: x + 15, y1: ty, y2: ty, stroke: "currentColor" }, parent);
    svgEl("text", { x: x + 17, y: ty + 3.5, "font-size": 10 }, parent, fmt(t, 3));
  }
  if (label) {
    svgEl("text", { transform: `translate(${x + 58},${y + h / 2}) rotate(-90)`, "text-anchor": "middle", "font-size": 10.5 },
      parent, label);
  }
}

// Round tick values between lo and hi, about n of them; `integer`: steps of at least 1.
function niceTicks(lo, hi, n, integer) {
  if (!(hi > lo)) return [lo];
  const raw = (hi - lo) / n;
  const mag = Math.pow(10, Math.floor(Math.log10(raw)));
  let step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => s >= raw) || raw;
  if (integer) step = Math.max(1, Math.round(step));
  const out = [];
  for (let t = Math.ceil(lo / step - 1e-9) * step; t <= hi + step * 1e-9; t += step) out.push(Number(t.toPrecision(12)));
  return out;
}

// Tick labels along a heatmap's x axis (below) or y axis (left); every n-th above `maxLabels`
// or where the cells are too small for the labels' height.
const labelStep = (labels, maxLabels, cell, size) => Math.max(1, Math.ceil(labels.length / maxLabels), Math.ceil((size + 1) / Math.max(1, cell)));
function tokenTicks(parent, axis, x0, y0, cell, labels, maxLabels, size) {
  const step = labelStep(labels, maxLabels, cell, size);
  const rotate = axis === "x" && (labels.length > 8 || Math.max(...labels.map((s) => s.length)) > 3);
  for (let i = 0; i < labels.length; i += step) {
    const c = (i + 0.5) * cell;
    if (axis === "x") {
      svgEl("line", { x1: x0 + c, x2: x0 + c, y1: y0, y2: y0 + 3, stroke: "currentColor" }, parent);
      const attrs = rotate
        ? { transform: `translate(${x0 + c + 3.5},${y0 + 5}) rotate(-90)`, "text-anchor": "end", "font-size": size }
        : { x: x0 + c, y: y0 + 5 + size, "text-anchor": "middle", "font-size": size };
      svgEl("text", attrs, parent, labels[i]);
    } else {
      svgEl("line", { x1: x0 - 3, x2: x0, y1: y0 + c, y2: y0 + c, stroke: "currentColor" }, parent);
      svgEl("text", { x: x0 - 5, y: y0 + c + size * 0.35, "text-anchor": "end", "font-size": size }, parent, labels[i]);
    }
  }
  return step;
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
  svg.style.maxWidth = "100%"; // a last resort: the layouts are chosen to fit the width they have
  svg.style.height = "auto";
  svg.style.overflow = "visible";
  return svg;
}

// A legend laid out in rows under a plot (never over the data): returns its height.
function legendRows(series, width, size) {
  const rows = [[]];
  let used = 0;
  for (const s of series) {
    const w = 24 + textWidth(s.label || "", size) + 12;
    if (used + w > width && rows[rows.length - 1].length) { rows.push([]); used = 0; }
    rows[rows.length - 1].push([s, used]);
    used += w;
  }
  return rows;
}
function drawLegend(g, x, y, rows, size, swatch) {
  rows.forEach((row, r) => row.forEach(([s, dx]) => {
    const ly = y + r * (size + 5) + size;
    swatch(g, x + dx, ly - size * 0.35, s);
    svgEl("text", { x: x + dx + 20, y: ly, "font-size": size }, g, s.label || "");
  }));
  return rows.length * (size + 5);
}

// A line plot with axes, ticks, an optional legend (below the plot) and vertical marker.
// opts.stack: draw the series thick to thin, so curves that coincide all stay visible.
// opts.note: a line under the title. opts.integerX: x ticks at whole numbers only.
function linePlot(parent, x, y, w, h, opts) {
  const { series, title, xlabel, ylabel, ylim, vline, legend, note, stack, integerX } = opts;
  const xs = series.flatMap((s) => s.x), ys = series.flatMap((s) => s.y);
  let [x0, x1] = [Math.min(...xs), Math.max(...xs)];
  if (x1 === x0) x1 = x0 + 1;
  let [y0, y1] = ylim || [Math.min(...ys), Math.max(...ys)];
  if (!ylim) { const pad = (y1 - y0) * 0.06 || 0.5; y0 -= pad; y1 += pad; }
  // a note too long for a narrow plot takes two lines, centred on the whole plot, not cut off
  const noteLines = note ? wrapLines(note, w - 6, 10, 2) : [];
  const L = 50, R = 16, B = 34, T = 22 + 13 * noteLines.length + (note ? 1 : 0), LS = 10;
  const pw = w - L - R, px = x + L, py = y + T;
  const rows = legend ? legendRows(series, pw, LS) : [];
  const legendH = rows.length ? rows.length * (LS + 5) + 6 : 0;
  const ph = h - B - T - legendH;
  const sx = (v) => px + ((v - x0) / (x1 - x0)) * pw, sy = (v) => py + ph - ((v - y0) / (y1 - y0)) * ph;
  const g = svgEl("g", {}, parent);
  for (const t of niceTicks(y0, y1, 5)) {
    svgEl("line", { x1: px, x2: px + pw, y1: sy(t), y2: sy(t), stroke: "currentColor", "stroke-opacity": 0.15 }, g);
    svgEl("text", { x: px - 4, y: sy(t) + 3.5, "text-anchor": "end", "font-size": 10 }, g, fmt(t, 3));
  }
  for (const t of niceTicks(x0, x1, Math.max(2, Math.min(6, Math.floor(pw / 55))), integerX)) {
    svgEl("line", { x1: sx(t), x2: sx(t), y1: py, y2: py + ph, stroke: "currentColor", "stroke-opacity": 0.15 }, g);
    svgEl("text", { x: sx(t), y: py + ph + 13, "text-anchor": "middle", "font-size": 10 }, g, fmt(t, 3));
  }
  svgEl("line", { x1: px, x2: px + pw, y1: py + ph, y2: py + ph, stroke: "currentColor" }, g);
  svgEl("line", { x1: px, x2: px, y1: py, y2: py + ph, stroke: "currentColor" }, g);
  if (title) svgEl("text", { x: px + pw / 2, y: y + 14, "text-anchor": "middle", "font-size": 12 }, g, clipText(title, w - 4, 12));
  noteLines.forEach((line, i) => svgEl("text", { x: x + w / 2, y: y + 28 + 12 * i, "text-anchor": "middle", "font-size": 10, fill: THEME.fg2, class: "llmbook-plot-note" }, g, line));
  if (xlabel) svgEl("text", { x: px + pw / 2, y: py + ph + 29, "text-anchor": "middle", "font-size": 11 }, g, xlabel);
  if (ylabel) svgEl("text", { transform: `translate(${x + 11},${py + ph / 2}) rotate(-90)`, "text-anchor": "middle", "font-size": 11 }, g, ylabel);
  const n = series.length;
  const widthOf = (k) => (stack ? 1.6 + 2.4 * (n - 1 - k) : 1.6);
  series.forEach((s, k) => {
    const c = s.color || PALETTE[k % PALETTE.length];
    const pts = s.x.map((v, i) => `${sx(v).toFixed(1)},${sy(s.y[i]).toFixed(1)}`).join(" ");
    svgEl("polyline", { points: pts, fill: "none", stroke: c, "stroke-width": widthOf(k), "stroke-linejoin": "round" }, g);
    if (s.marker) s.x.forEach((v, i) => svgEl("circle", { cx: sx(v), cy: sy(s.y[i]), r: 1.8, fill: c }, g));
  });
  if (vline !== undefined && vline !== null) {
    svgEl("line", { x1: sx(vline.x), x2: sx(vline.x), y1: py, y2: py + ph, stroke: PALETTE[3], "stroke-dasharray": "5,3", "stroke-width": 1.4 }, g);
    if (vline.label) svgEl("text", { x: px + pw - 4, y: py + 12, "text-anchor": "end", "font-size": 10 }, g, vline.label);
  }
  if (rows.length) {
    drawLegend(g, px, py + ph + B, rows, LS, (gg, lx, ly, s) => {
      const k = series.indexOf(s);
      svgEl("line", { x1: lx, x2: lx + 16, y1: ly, y2: ly, stroke: s.color || PALETTE[k % PALETTE.length], "stroke-width": Math.min(4, widthOf(k)) }, gg);
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
// The cells a causal mask forbids (key after the query) as null: drawn grey, not as a weight of 0.
const maskFuture = (w) => w.map((row, i) => row.map((v, j) => (j > i ? null : v)));
const rowMax = (w) => Math.max(1e-12, ...w.map((r) => Math.max(...r.filter((v) => v !== null))));
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
    const maps = spec.weights[li].map((w) => (cm ? maskFuture(rescale(w, sc, cm)) : rescale(w, sc, cm)));
    const tag = `${spec.layer_names[li]}, scale ${sc.toFixed(1)}${cm ? ", causal" : ""}`;
    const keys = spec.keys, queries = spec.queries;
    if (hi < 0) drawGrid(ctx, maps, keys, queries, `All heads of ${tag}`, cm);
    else drawOne(ctx, maps[hi], keys, queries, `head ${hi} of ${tag}`, true, cm);
  };
}

function hover(ctx, image, rows, keys, queries, prefix) {
  image.addEventListener("mousemove", (ev) => {
    const r = image.getBoundingClientRect();
    const j = Math.floor(((ev.clientX - r.left) / r.width) * keys.length);
    const i = Math.floor(((ev.clientY - r.top) / r.height) * queries.length);
    if (i >= 0 && j >= 0 && i < queries.length && j < keys.length) {
      const v = rows[i][j];
      ctx.status.textContent = `${prefix}query ${i} ${JSON.stringify(queries[i])} \u2192 key ${j} ${JSON.stringify(keys[j])}: ` +
        (v === null ? "masked (a key after the query)" : v.toFixed(4));
    }
  });
}

// The grey swatch and its words, under a heatmap drawn with a causal mask.
function maskKey(svg, x, y) {
  svgEl("rect", { x, y: y - 9, width: 12, height: 12, fill: css(MASKED) }, svg);
  svgEl("text", { x: x + 17, y, "font-size": 10.5, class: "llmbook-mask-key" }, svg, "grey: masked (a key after the query is never seen)");
}

function drawOne(ctx, w, keys, queries, title, annotate, masked) {
  const Tq = queries.length, Tk = keys.length;
  const size = Math.max(Tq, Tk) <= 30 ? 11 : 9;
  const left = 24 + tickExtent(queries, MAX_LABELS, size, "y"), top = 28;
  // cells as large as the width allows (5 to 44 px), room kept for the colour bar
  const room = Math.max(120, ctx.width() - left - 100);
  const cell = Math.max(5, Math.min(44, Math.floor(Math.min(460, room) / Math.max(Tq, Tk))));
  const bottom = 22 + tickExtent(keys, MAX_LABELS, size, "x") + (masked ? 18 : 0);
  const W = left + cell * Tk + 90, Hh = top + cell * Tq + bottom;
  const svg = newSvg(Math.max(W, Math.min(ctx.width(), textWidth(title, 13) + 20)), Hh);
  const vmax = rowMax(w);
  const im = heatImage(svg, left, top, cell * Tk, cell * Tq, w, 0, vmax, VIRIDIS);
  hover(ctx, im, w, keys, queries, "");
  if (annotate && Math.max(Tq, Tk) <= 10) {
    for (let i = 0; i < Tq; i++) for (let j = 0; j < Tk; j++) {
      if (w[i][j] === null) continue;
      // on the cell's own colour (dark or light viridis), not on the page's background
      svgEl("text", { x: left + (j + 0.5) * cell, y: top + (i + 0.5) * cell + 3.5, "text-anchor": "middle", "font-size": 10,
        fill: w[i][j] < 0.6 * vmax ? "white" : "black", "pointer-events": "none", class: "llmbook-on-cell" }, svg, w[i][j].toFixed(2));
    }
  }
  const sx = tokenTicks(svg, "x", left, top + cell * Tq, cell, keys, MAX_LABELS, size);
  const sy = tokenTicks(svg, "y", left, top, cell, queries, MAX_LABELS, size);
  svgEl("text", { x: left + (cell * Tk) / 2, y: Hh - 5 - (masked ? 18 : 0), "text-anchor": "middle", "font-size": 11 }, svg, "key (attended to)");
  if (masked) maskKey(svg, left, Hh - 4);
  svgEl("text", { transform: `translate(12,${top + (cell * Tq) / 2}) rotate(-90)`, "text-anchor": "middle", "font-size": 11 }, svg, "query (attending)");
  svgEl("text", { x: Math.max(left + (cell * Tk) / 2, textWidth(title, 13) / 2 + 4), y: 17, "text-anchor": "middle", "font-size": 13, class: "llmbook-front-title" }, svg, title);
  colourBar(svg, left + cell * Tk + 12, top, cell * Tq, 0, vmax, VIRIDIS, "attention weight");
  ctx.pic.replaceChildren(svg);
  const thin = Math.max(sx, sy) > 1 ? ` Labels: every ${Math.max(sx, sy)} tokens (the cells are small; hover a cell for its tokens).` : "";
  ctx.status.textContent = `Hover a cell to read its weight.${thin}`;
}

function drawGrid(ctx, maps, keys, queries, title, masked) {
  const H = maps.length, Tq = queries.length, Tk = keys.length;
  const size = Math.max(Tq, Tk) <= 30 ? 10 : 9;
  // many heads get smaller thumbnails, so a 12-head layer fits a laptop screen's height
  let cell = Math.max(3, Math.min(22, Math.floor((H > 6 ? 150 : 200) / Math.max(Tq, Tk))));
  const gap = 14;
  const pw0 = cell * Tk;
  const left = 22 + tickExtent(queries, GRID_LABELS, size, "y"), top = 30;
  // as many columns as the width holds (the preferred count at most), so a narrow window gets more rows
  const prefer = H <= 4 ? H : H % 3 === 0 && H <= 9 ? 3 : 4;
  let ncols = prefer;
  while (ncols > 1 && left + ncols * (pw0 + gap) + 85 > ctx.width()) ncols -= 1;
  // many heads (MiniLM's 12): half of them per row when the thumbnails keep at least 3/4 of their size
  // that way, so the layer is two rows and fits a laptop screen under its controls
  if (H > 6) {
    const half = Math.ceil(H / 2);
    const fit = Math.floor(((ctx.width() - left - 85) / half - gap) / Math.max(Tq, Tk));
    if (half > ncols && fit >= Math.max(3, Math.ceil(0.75 * cell))) { cell = Math.min(cell, fit); ncols = half; }
  }
  const pw = cell * Tk, ph = cell * Tq;
  const nrows = Math.ceil(H / ncols);
  const xt = tickExtent(keys, GRID_LABELS, size, "x");
  // key labels sit under the last panel of each column, so a short last row leaves room
  const rowH = ph + 18 + gap;
  const W = left + ncols * (pw + gap) + 85;
  const Hh = top + nrows * rowH + xt + 20 + (masked ? 18 : 0);
  const svg = newSvg(Math.max(W, Math.min(ctx.width(), textWidth(title, 13) + 20)), Hh);
  // ONE colour scale for every head: 0 .. the largest weight of any head after rescaling
  const vmax = Math.max(...maps.map(rowMax));
  let step = 1;
  maps.forEach((w, h) => {
    const r = Math.floor(h / ncols), c = h % ncols;
    const x = left + c * (pw + gap), y = top + r * rowH + 16;
    const t = svgEl("text", { x: x + pw / 2, y: y - 4, "text-anchor": "middle", "font-size": 11, class: "llmbook-front-panel-title" }, svg, `head ${h}`);
    t.style.cursor = "pointer";
    const im = heatImage(svg, x, y, pw, ph, w, 0, vmax, VIRIDIS);
    im.style.cursor = "pointer";
    hover(ctx, im, w, keys, queries, `head ${h}: `);
    for (const e of [t, im]) e.addEventListener("click", () => ctx.set({ head: h }));
    if (h + ncols >= H) step = Math.max(step, tokenTicks(svg, "x", x, y + ph, cell, keys, GRID_LABELS, size));
    if (c === 0) step = Math.max(step, tokenTicks(svg, "y", x, y, cell, queries, GRID_LABELS, size));
  });
  const bottomY = Hh - 5 - (masked ? 18 : 0);
  svgEl("text", { x: left + (ncols * (pw + gap)) / 2, y: bottomY, "text-anchor": "middle", "font-size": 11 }, svg, "key (attended to)");
  if (masked) maskKey(svg, left, Hh - 4);
  svgEl("text", { transform: `translate(12,${top + (nrows * rowH) / 2}) rotate(-90)`, "text-anchor": "middle", "font-size": 11 }, svg, "query (attending)");
  svgEl("text", { x: Math.max(left + (ncols * (pw + gap)) / 2, textWidth(title, 13) / 2 + 4), y: 17, "text-anchor": "middle", "font-size": 13, class: "llmbook-front-title" }, svg, title);
  colourBar(svg, left + ncols * (pw + gap), top + 16, Math.min(nrows * rowH - gap - 18, 260), 0, vmax, VIRIDIS,
    "weight (one scale, all heads)");
  ctx.pic.replaceChildren(svg);
  const thin = step > 1 ? ` Labels: every ${step} tokens here; a head opened large labels them all.` : "";
  ctx.status.textContent = `Click a head to open it large; hover a cell for its weight.${thin}`;
}

// ------------------------------------------------------------------ model view
function modelView(ctx) {
  const { model, spec } = ctx;
  const L = spec.weights.length, H = spec.weights[0].length;
  const Tq = spec.queries.length, Tk = spec.keys.length;
  const layer = selectControl(ctx.bar, "layer", "layer", spec.layer_names, (i) => ctx.set({ layer: i }));
  const head = selectControl(ctx.bar, "head", "head", Array.from({ length: H }, (_, h) => `head ${h}`), (i) => ctx.set({ head: i }));
  // The mosaic: thumbnails tiled with a one-cell gap, one colour scale for the whole model.
  const mosaic = [];
  let vmax = 1e-12;
  for (let l = 0; l < L; l++) {
    for (let i = 0; i <= Tq; i++) {
      if (l === L - 1 && i === Tq) break;
      const row = [];
      for (let h = 0; h < H; h++) {
        for (let j = 0; j <= Tk; j++) {
          if (h === H - 1 && j === Tk) break;
          const v = i < Tq && j < Tk ? spec.weights[l][h][i][j] : NaN; // NaN: the gap (white)
          if (Number.isFinite(v) && v > vmax) vmax = v;
          row.push(v);
        }
      }
      mosaic.push(row);
    }
  }
  return () => {
    const li = clampInt(model.get("layer"), 0, L - 1), hi = clampInt(model.get("head"), 0, H - 1);
    layer.set(li); head.set(hi);
    const left = 14 + Math.max(...spec.layer_names.map((n) => textWidth(n, 9))), top = 50;
    const room = Math.max(14 * H, ctx.width() - left - 100);
    const tw = Math.max(14, Math.min(60, Math.floor(Math.min(620, room) / H))), th = Math.max(12, Math.min(60, Math.floor(560 / L)));
    const title = spec.title || `All ${L} layers x ${H} heads`;
    const full = `${title} \u2014 selected: ${spec.layer_names[li]}, head ${hi}`;
    const W = Math.max(left + tw * H + 95, Math.min(ctx.width(), textWidth(full, 12) + 20)), Hh = top + th * L + 12;
    const svg = newSvg(W, Hh);
    svgEl("text", { x: W / 2, y: 16, "text-anchor": "middle", "font-size": 12, class: "llmbook-front-title" }, svg, clipText(full, W - 4, 12));
    svgEl("text", { x: left + (tw * H) / 2, y: 32, "text-anchor": "middle", "font-size": 10 }, svg, "head");
    const im = heatImage(svg, left, top, tw * H, th * L, mosaic, 0, vmax, VIRIDIS);
    im.style.cursor = "pointer";
    im.addEventListener("click", (ev) => {
      const r = im.getBoundingClientRect();
      ctx.set({ head: clampInt(Math.floor(((ev.clientX - r.left) / r.width) * H), 0, H - 1),
        layer: clampInt(Math.floor(((ev.clientY - r.top) / r.height) * L), 0, L - 1) });
    });
    for (let h = 0; h < H; h++) svgEl("text", { x: left + (h + 0.5) * tw, y: top - 4, "text-anchor": "middle", "font-size": 9 }, svg, String(h));
    spec.layer_names.forEach((n, l) => svgEl("text", { x: left - 4, y: top + (l + 0.5) * th + 3, "text-anchor": "end", "font-size": 9 }, svg, n));
    svgEl("rect", { x: left + hi * tw - 1, y: top + li * th - 1, width: tw + 1, height: th + 1, fill: "none", stroke: PALETTE[3], "stroke-width": 2.5 }, svg);
    colourBar(svg, left + tw * H + 10, top, Math.min(th * L, 240), 0, vmax, VIRIDIS, "weight (one scale, whole model)");
    const zoom = htmlEl("div", {});
    const sub = { ...ctx, pic: zoom };
    drawOne(sub, spec.weights[li][hi], spec.keys, spec.queries, `${spec.layer_names[li]}, head ${hi}`, true, false);
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

// The dimensions to draw. Dimensions the reader typed are checked strictly (an error keeps the
// old picture); dimensions that were valid until d_model shrank are left out with a note, so a
// slider the reader moved never wipes the picture (dimension 0 is drawn if none is left).
function chooseDims(value, d, typed) {
  try {
    return { dims: parseDims(value, d), note: "" };
  } catch (e) {
    if (typed || !/out of range/.test(e.message)) throw e;
    const all = String(value).replace(/;/g, ",").split(",").map((p) => Number(p.trim())).filter((v) => Number.isInteger(v));
    const keep = all.filter((v) => v >= 0 && v < d), gone = all.filter((v) => !(v >= 0 && v < d));
    return { dims: keep.length ? keep : [0], note: `dims ${gone.join(", ")} left out: d_model=${d} has dimensions 0..${d - 1}` };
  }
}

function positionalView(ctx) {
  const { model, spec } = ctx;
  let typed = false; // did the reader type the current dims (since this table arrived)?
  const dims = textControl(ctx.bar, "dims", "dims", (v) => { typed = true; ctx.set({ dims: v }); });
  const P = spec.table.length, D = spec.table[0].length;
  return () => {
    dims.set(model.get("dims"));
    let chosen, note;
    try { ({ dims: chosen, note } = chooseDims(model.get("dims"), D, typed)); ctx.error(""); } catch (e) { ctx.error(e.message); return; }
    const wrap = htmlEl("div", { class: "llmbook-front-panels" });
    const head = htmlEl("div", { class: "llmbook-front-title" }, wrap, spec.title);
    head.style.cssText = "font-size:14px;margin:2px 0 4px 0";
    if (note) htmlEl("div", { class: "llmbook-front-note" }, wrap, note).style.cssText = `font-size:12px;color:${THEME.fg2}`;
    const row = htmlEl("div", {}, wrap);
    row.style.cssText = `display:flex;flex-wrap:wrap;align-items:flex-start;gap:10px ${14}px`;
    const avail = ctx.width();
    // three panels in one row when the width holds them (a laptop's notebook is ~930 px wide), so the
    // sliders and all three pictures fit a 768-px screen; else the heatmap and the plots wrap
    const three = avail >= 860;
    const lw = three ? Math.min(340, Math.floor((avail - 150) * 0.34)) : Math.max(240, Math.min(340, avail - 10));
    const pw = three ? Math.min(300, avail - 150 - 2 * lw) : Math.max(180, Math.min(300, avail - 130));
    const ph = three ? 220 : 250, top = 40;
    // 1. the table, with the chosen dimensions marked above their columns
    const x0 = 55;
    const svg = newSvg(x0 + pw + 62, top + ph + 36);
    svgEl("text", { x: x0 + pw / 2, y: 14, "text-anchor": "middle", "font-size": 11 }, svg, clipText(spec.table_title, pw + 100, 11));
    const im = heatImage(svg, x0, top, pw, ph, spec.table, -1, 1, RDBU_R);
    im.addEventListener("mousemove", (ev) => {
      const r = im.getBoundingClientRect();
      const j = clampInt(Math.floor(((ev.clientX - r.left) / r.width) * D), 0, D - 1), i = clampInt(Math.floor(((ev.clientY - r.top) / r.height) * P), 0, P - 1);
      ctx.status.textContent = `position ${i}, dimension ${j}: ${spec.table[i][j].toFixed(4)} (click to add this dimension)`;
    });
    im.addEventListener("click", (ev) => {
      const r = im.getBoundingClientRect();
      const j = clampInt(Math.floor(((ev.clientX - r.left) / r.width) * D), 0, D - 1);
      typed = false;
      ctx.set({ dims: [...chosen.filter((d) => d !== j), j].slice(-6).join(", ") });
    });
    chosen.forEach((d, k) => {
      const cx = x0 + ((d + 0.5) / D) * pw;
      svgEl("path", { d: `M${cx - 4},${top - 8} L${cx + 4},${top - 8} L${cx},${top - 1} Z`, fill: PALETTE[k % PALETTE.length] }, svg);
    });
    for (const t of niceTicks(0, D - 1, 4, true)) svgEl("text", { x: x0 + ((t + 0.5) / D) * pw, y: top + ph + 13, "text-anchor": "middle", "font-size": 10 }, svg, String(t));
    for (const t of niceTicks(0, P - 1, 5, true)) svgEl("text", { x: x0 - 4, y: top + ((t + 0.5) / P) * ph + 3.5, "text-anchor": "end", "font-size": 10 }, svg, String(t));
    svgEl("text", { x: x0 + pw / 2, y: top + ph + 28, "text-anchor": "middle", "font-size": 11 }, svg, "dimension");
    svgEl("text", { transform: `translate(14,${top + ph / 2}) rotate(-90)`, "text-anchor": "middle", "font-size": 11 }, svg, "position");
    colourBar(svg, x0 + pw + 8, top, ph, -1, 1, RDBU_R, "");
    row.appendChild(svg);
    // 2. the chosen dimensions as waves over position
    const lh = ph + 80;
    const pos = spec.table.map((_, i) => i);
    const series = chosen.map((d, k) => ({ label: `dim ${d}`, x: pos, y: spec.table.map((r) => r[d]), color: PALETTE[k % PALETTE.length] }));
    const waves = newSvg(lw, lh);
    linePlot(waves, 0, 0, lw, lh, { series, title: "chosen dimensions as waves", xlabel: "position", ylabel: "value", ylim: [-1.15, 1.15], legend: true, integerX: true });
    row.appendChild(waves);
    // 3. similarity against distance (computed in Python; does not depend on dims)
    const sim = spec.similarity;
    const simSvg = newSvg(lw, lh);
    linePlot(simSvg, 0, 0, lw, lh, { series: sim.series, title: sim.title, xlabel: sim.xlabel, ylabel: sim.ylabel, legend: true,
      note: sim.note, stack: !!sim.note, integerX: true });
    row.appendChild(simSvg);
    ctx.pic.replaceChildren(wrap);
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

// Tokens as adjacent tinted spans (dark text on a light tint in every theme), spaces as ·.
function tokenStrip(parent, tokens) {
  const strip = htmlEl("div", { class: "llmbook-token-strip" }, parent);
  strip.style.cssText = `font-family:monospace, ${FONT};line-height:1.9;white-space:normal`;
  tokens.forEach((t, k) => {
    const span = htmlEl("span", { title: `token ${k + 1}` }, strip);
    span.style.cssText = `background:${TINTS[k % TINTS.length]};color:${INK};border-radius:3px;padding:1px 0;margin-right:1px`;
    const parts = String(t).replace(/ /g, "\u00b7").split("\n");
    parts.forEach((s, j) => { span.append(s); if (j < parts.length - 1) { span.append("\u21b5"); htmlEl("br", {}, span); } });
    htmlEl("wbr", {}, strip); // a long run of tokens may wrap between two tokens
  });
  return strip;
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
    stats.innerHTML = `<b>${k}</b> merge${k === 1 ? "" : "s"} &nbsp;|&nbsp; vocabulary size <b>${spec.n_base + k}</b> (${spec.n_base} ${unit} + ${k})` +
      ` &nbsp;|&nbsp; ${plural(n, "token")} for ${plural(spec.n_chars, "character")}: <b>${(n / spec.n_chars).toFixed(3)}</b> tokens per character`;
    if (spec.cut_from) {
      htmlEl("p", { class: "llmbook-front-note" }, wrap, `BPE trains on the first ${spec.n_chars} of the ${spec.cut_from} characters (kept short so each re-train takes well under a second).`)
        .style.color = THEME.fg2;
    }
    const tokens = tokensAt(spec, k);
    tokenStrip(wrap, tokens);
    if (spec.n_chars > spec.shown_chars) htmlEl("p", {}, wrap).innerHTML = `<i>showing the first ${spec.shown_chars} of ${spec.n_chars} characters</i>`;
    if (spec.level === "bytes" && tokens.some((t) => /\[\d*:\d*\]/.test(t))) {
      htmlEl("p", { class: "llmbook-front-note" }, wrap,
        "今[:2] is a token holding the first 2 bytes of 今 (3 bytes in UTF-8), 今[2:] the rest: a byte-level merge can cut a character.")
        .style.cssText = `font-size:12px;color:${THEME.fg2}`;
    }
    // the merge table and the curve side by side when the width holds both (else the curve wraps below)
    const avail = ctx.width();
    const side = htmlEl("div", {}, wrap);
    side.style.cssText = "display:flex;flex-wrap:wrap;align-items:flex-start;gap:6px 24px";
    const merges = htmlEl("div", {}, side);
    htmlEl("p", {}, merges).innerHTML = "<b>Latest merges</b> (· is a space, ↵ a new line)";
    const table = htmlEl("table", { class: "llmbook-merge-table" }, merges);
    table.style.cssText = "border-collapse:collapse;font-size:13px";
    const cellCss = (align) => `padding:2px 12px;text-align:${align};border-bottom:1px solid ${THEME.line}`;
    const head = htmlEl("tr", {}, table);
    [["merge", "right"], ["pair", "left"], ["new token", "left"], ["count", "right"]].forEach(([h, a]) => { htmlEl("th", {}, head, h).style.cssText = cellCss(a); });
    if (k === 0) {
      const td = htmlEl("td", { colspan: 4 }, htmlEl("tr", {}, table));
      td.style.cssText = cellCss("left");
      htmlEl("i", {}, td, `no merges yet: every token is a single ${spec.level === "characters" ? "character" : "byte"}`);
    }
    const code = (td, s) => { const c = htmlEl("code", {}, td, visible(s)); c.style.cssText = `background:${TINTS[0]};color:${INK};padding:0 3px;border-radius:3px`; };
    for (let r = Math.max(0, k - 12); r < k; r++) {
      const tr = htmlEl("tr", {}, table);
      const [a, b] = spec.pairs[r];
      htmlEl("td", {}, tr, String(r + 1)).style.cssText = cellCss("right"); // merges counted from 1, as in the prose
      const td = htmlEl("td", {}, tr);
      td.style.cssText = cellCss("left");
      code(td, a); td.append(" + "); code(td, b);
      const nt = htmlEl("td", {}, tr);
      nt.style.cssText = cellCss("left");
      code(nt, a + b);
      htmlEl("td", {}, tr, String(spec.counts[r])).style.cssText = cellCss("right");
    }
    const w = avail >= 760 ? Math.min(560, avail - 390) : Math.max(280, Math.min(600, avail - 8)), h = 230;
    const svg = newSvg(w, h);
    const ks = spec.tokens_by_k.map((_, i) => i);
    linePlot(svg, 0, 0, w, h, {
      series: [{ label: "tokens per character", x: ks, y: spec.tokens_by_k.map((v) => v / spec.n_chars), marker: ks.length <= 80 }],
      title: `BPE on ${spec.level}: shorter sequences as the vocabulary grows`, xlabel: "number of merges",
      ylabel: "tokens per character", vline: { x: k, label: `${k} merges` }, integerX: true,
    });
    side.appendChild(svg);
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
    const bw = Math.max(12, Math.min(40, Math.floor(Math.min(560, ctx.width() - left - 24) / n)));
    const title = `${spec.title}${frame.label ? ` \u2014 ${frame.label}` : ""}`;
    const W = Math.max(left + n * bw + 20, Math.min(ctx.width(), textWidth(title, 13) + 20)), ph = 220, Hh = top + ph + bottom + 18;
    const svg = newSvg(W, Hh);
    svgEl("text", { x: W / 2, y: 17, "text-anchor": "middle", "font-size": 13, class: "llmbook-front-title" }, svg, clipText(title, W - 4, 13));
    for (const t of niceTicks(0, vmax, 5)) {
      const y = top + ph - (t / vmax) * ph;
      svgEl("line", { x1: left, x2: left + n * bw, y1: y, y2: y, stroke: "currentColor", "stroke-opacity": 0.15 }, svg);
      svgEl("text", { x: left - 4, y: y + 3.5, "text-anchor": "end", "font-size": 10 }, svg, fmt(t, 3));
    }
    frame.values.forEach((v, i) => {
      const h = (Math.max(0, v) / vmax) * ph;
      const colourIndex = frame.colors ? frame.colors[i] : 0;
      const r = svgEl("rect", { x: left + i * bw + 1, y: top + ph - h, width: bw - 2, height: h, fill: PALETTE[colourIndex % PALETTE.length] }, svg);
      svgEl("title", {}, r, `${spec.labels[i]}: ${v}`);
      svgEl("text", { transform: `translate(${left + (i + 0.5) * bw + 3.5},${top + ph + 5}) rotate(-90)`, "text-anchor": "end", "font-size": size }, svg, spec.labels[i]);
    });
    svgEl("line", { x1: left, x2: left + n * bw, y1: top + ph, y2: top + ph, stroke: "currentColor" }, svg);
    if (spec.ylabel) svgEl("text", { transform: `translate(12,${top + ph / 2}) rotate(-90)`, "text-anchor": "middle", "font-size": 11 }, svg, spec.ylabel);
    ctx.pic.replaceChildren(svg);
  };
}

// ------------------------------------------------------------------ panels (small charts and text)
// Panels drawn from data Python computed, in rows of spec.columns (a new row also after every
// text, token or table panel); in a narrow window a row wraps. Types:
//   "bars"   vertical bars, labels below (colors: one per bar, or color: one palette index)
//   "hbars"  horizontal bars, labels at the left, the first on top, values written after them
//   "points" scatter / error bars, optional diagonal
//   "text"   a monospace block of segments, bold or not
//   "tokens" a table of token strips, one row per tokenizer
//   "table"  a table of text (caption, header, rows)
// A bar panel's value axis: its `vmax` if given, else the largest bar shown (x1.3 with room for
// values written after the bars, x1.05 without). spec.top_k (optional): a slider drawn here
// (trait `step`) keeps the first k bars of every bar panel, so Python sends them largest first.
const panelColour = (c, i) => (typeof c === "number" ? PALETTE[c % PALETTE.length] : c || PALETTE[i % PALETTE.length]);
const BAR_TYPES = new Set(["bars", "hbars"]);

// The panels as drawn with the first k bars kept (all of them when k is null), each with its vmax.
function panelsShown(spec, k) {
  return spec.panels.map((p) => {
    if (!BAR_TYPES.has(p.type)) return p;
    const n = k === null || k === undefined ? p.values.length : Math.max(1, Math.min(p.values.length, k));
    const values = p.values.slice(0, n), labels = p.labels.slice(0, n);
    const colors = p.colors ? p.colors.slice(0, n) : undefined;
    const written = p.type === "hbars" ? p.annotate !== false : !!p.annotate;
    const vmax = p.vmax || Math.max(1e-3, ...values) * (written ? 1.3 : 1.05);
    return { ...p, values, labels, colors, vmax };
  });
}

function axesFrame(svg, x, y, w, h, o) {
  // Axes box at (x, y, w, h) in SVG units; returns the scales. o: xlim, ylim, title, ylabel, nx, xticks/yticks (false = none)
  const [x0, x1] = o.xlim, [y0, y1] = o.ylim;
  const sx = (v) => x + ((v - x0) / (x1 - x0 || 1)) * w, sy = (v) => y + h - ((v - y0) / (y1 - y0 || 1)) * h;
  if (o.yticks !== false) {
    for (const t of niceTicks(y0, y1, 5)) {
      svgEl("line", { x1: x, x2: x + w, y1: sy(t), y2: sy(t), stroke: "currentColor", "stroke-opacity": 0.15 }, svg);
      svgEl("text", { x: x - 4, y: sy(t) + 3.5, "text-anchor": "end", "font-size": 10 }, svg, fmt(t, 3));
    }
  }
  if (o.xticks !== false) {
    for (const t of niceTicks(x0, x1, o.nx || Math.max(2, Math.min(6, Math.floor(w / 55))))) {
      svgEl("line", { x1: sx(t), x2: sx(t), y1: y, y2: y + h, stroke: "currentColor", "stroke-opacity": 0.15 }, svg);
      svgEl("text", { x: sx(t), y: y + h + 13, "text-anchor": "middle", "font-size": 10 }, svg, fmt(t, 3));
    }
  }
  svgEl("rect", { x, y, width: w, height: h, fill: "none", stroke: "currentColor", "stroke-width": 0.8 }, svg);
  if (o.title) svgEl("text", { x: x + w / 2, y: y - 8, "text-anchor": "middle", "font-size": 12, class: "llmbook-panel-title" }, svg, o.title);
  if (o.ylabel) svgEl("text", { transform: `translate(${x - 40},${y + h / 2}) rotate(-90)`, "text-anchor": "middle", "font-size": 11 }, svg, o.ylabel);
  return { sx, sy };
}

function titleLines(svg, cx, y, lines, size, anchor, maxPx) {
  lines.forEach((l, i) => svgEl("text", { x: cx, y: y + i * (size + 3), "text-anchor": anchor || "middle", "font-size": size, class: "llmbook-panel-title" }, svg, clipText(l, maxPx, size)));
  return lines.length * (size + 3);
}

function barsPanel(p, avail) {
  const n = p.values.length, size = p.label_size || 11;
  const bw = Math.max(12, Math.min(40, Math.floor(Math.min(p.width || 560, avail - 76) / Math.max(1, n))));
  const widest = Math.max(0, ...p.labels.map((l) => textWidth(l, size)));
  const rotate = widest > bw - 2;
  const titles = String(p.title || "").split("\n").filter((s) => s);
  const left = 58, top = 12 + titles.length * 15 + (p.note ? 14 : 0) + (p.annotate ? 10 : 0), ph = p.height || 220;
  const bottom = (rotate ? Math.min(widest, 110) + 10 : size + 10) + (p.xlabel ? 20 : 4);
  const W = Math.max(left + n * bw + 16, Math.min(avail, Math.max(...titles.map((t) => textWidth(t, 12)), 0) + 12)), H = top + ph + bottom;
  const svg = newSvg(W, H);
  titleLines(svg, p.title_left ? 6 : left + (n * bw) / 2, 15, titles, 12, p.title_left ? "start" : "middle", W - 8);
  const ymax = p.vmax || p.ymax || 1.05 * Math.max(1e-12, ...p.values);
  const { sy } = axesFrame(svg, left, top, n * bw, ph, { xlim: [0, n], ylim: [0, ymax], xticks: false, ylabel: p.ylabel });
  if (p.note) svgEl("text", { x: left + n * bw - 4, y: top - 4, "text-anchor": "end", "font-size": 10, fill: THEME.fg2, class: "llmbook-panel-note" }, svg, clipText(p.note, n * bw, 10));
  p.values.forEach((v, i) => {
    const yv = sy(Math.min(ymax, Math.max(0, v)));
    const fill = p.colors ? panelColour(p.colors[i], 0) : panelColour(p.color || 0, 0);
    const r = svgEl("rect", { x: left + i * bw + 1.5, y: yv, width: bw - 3, height: top + ph - yv, fill }, svg);
    svgEl("title", {}, r, `${p.labels[i]}: ${v}`);
    const cx = left + (i + 0.5) * bw;
    if (p.annotate) svgEl("text", { x: cx, y: yv - 3, "text-anchor": "middle", "font-size": 9.5 }, svg, Number(v).toFixed(2));
    const label = clipText(p.labels[i], 110, size);
    if (rotate) svgEl("text", { transform: `translate(${cx + 3.5},${top + ph + 5}) rotate(-90)`, "text-anchor": "end", "font-size": size }, svg, label);
    else svgEl("text", { x: cx, y: top + ph + size + 4, "text-anchor": "middle", "font-size": size }, svg, label);
  });
  if (p.xlabel) svgEl("text", { x: left + (n * bw) / 2, y: H - 6, "text-anchor": "middle", "font-size": 11 }, svg, clipText(p.xlabel, W - 8, 11));
  return svg;
}

function hbarsPanel(p, avail) {
  const n = p.values.length, size = 11, rh = p.row_height || (n >= 8 ? 17 : 20);
  const pw0 = Math.max(140, Math.min(p.width || 300, avail - 60));
  const left = Math.min(pw0 * 0.6, 14 + Math.max(0, ...p.labels.map((l) => textWidth(l, size)))) + (p.ylabel ? 16 : 0);
  const written = p.annotate !== false;
  const pw = Math.max(120, Math.min(p.width || 300, avail - left - (written ? 46 : 14)));
  const top = 26, H = top + n * rh + (p.xlabel ? 40 : 24);
  const svg = newSvg(Math.max(left + pw + (written ? 46 : 14), Math.min(avail, textWidth(p.title || "", 12) + 12)), H);
  const xmax = p.vmax || (p.xmax || Math.max(1e-12, ...p.values)) * 1.15;
  const { sx } = axesFrame(svg, left, top, pw, n * rh, { xlim: [0, xmax], ylim: [0, n], title: clipText(p.title || "", left + pw, 12), nx: 4, yticks: false });
  p.values.forEach((v, i) => {
    const y = top + i * rh;
    const fill = p.colors ? panelColour(p.colors[i], 0) : panelColour(p.color || 0, 0);
    const r = svgEl("rect", { x: left, y: y + 3, width: Math.max(0, sx(Math.min(v, xmax)) - left), height: rh - 6, fill }, svg);
    svgEl("title", {}, r, `${p.labels[i]}: ${v}`);
    svgEl("text", { x: left - 5, y: y + rh / 2 + 4, "text-anchor": "end", "font-size": size }, svg, clipText(p.labels[i], left - (p.ylabel ? 22 : 8), size));
    if (written) svgEl("text", { x: sx(Math.min(v, xmax)) + 3, y: y + rh / 2 + 3.5, "font-size": 9.5 }, svg, Number(v).toFixed(p.digits === undefined ? 2 : p.digits));
  });
  if (p.xlabel) svgEl("text", { x: left + pw / 2, y: H - 6, "text-anchor": "middle", "font-size": 11 }, svg, clipText(p.xlabel, pw + left, 11));
  if (p.ylabel) svgEl("text", { transform: `translate(11,${top + (n * rh) / 2}) rotate(-90)`, "text-anchor": "middle", "font-size": 11 }, svg, p.ylabel);
  return svg;
}

function pointsPanel(p, avail) {
  const left = 58, pw = Math.max(160, Math.min(p.width || 300, avail - left - 14)), ph = p.height || 260, top = 28, W = left + pw + 12;
  const rows = p.legend ? legendRows(p.series, pw, 10) : [];
  const H = top + ph + 44 + (rows.length ? rows.length * 15 + 4 : 0);
  const svg = newSvg(W, H);
  const { sx, sy } = axesFrame(svg, left, top, pw, ph, { xlim: p.xlim, ylim: p.ylim, title: clipText(p.title || "", W - 4, 12), ylabel: p.ylabel, nx: p.nx });
  // points outside the axes are left out and error bars cut at the frame (as a clipped matplotlib axes)
  const g = svgEl("g", {}, svg);
  const inX = (v) => v >= p.xlim[0] && v <= p.xlim[1], cy = (v) => Math.min(p.ylim[1], Math.max(p.ylim[0], v));
  if (p.diagonal) {
    const lo = Math.max(p.xlim[0], p.ylim[0]), hi = Math.min(p.xlim[1], p.ylim[1]);
    svgEl("line", { x1: sx(lo), y1: sy(lo), x2: sx(hi), y2: sy(hi), stroke: "currentColor", "stroke-opacity": 0.4, "stroke-width": 1 }, g);
  }
  p.series.forEach((s, k) => {
    const c = panelColour(s.color, k), r = s.r || 2.6;
    s.x.forEach((xv, i) => {
      if (!inX(xv)) return;
      if (s.yerr) svgEl("line", { x1: sx(xv), x2: sx(xv), y1: sy(cy(s.y[i] - s.yerr[i])), y2: sy(cy(s.y[i] + s.yerr[i])), stroke: c, "stroke-width": 1.4 }, g);
      if (s.y[i] >= p.ylim[0] && s.y[i] <= p.ylim[1]) svgEl("circle", { cx: sx(xv), cy: sy(s.y[i]), r, fill: c }, g);
    });
  });
  if (p.xlabel) svgEl("text", { x: left + pw / 2, y: top + ph + 32, "text-anchor": "middle", "font-size": 11 }, svg, clipText(p.xlabel, W - 4, 11));
  if (rows.length) {
    // the legend under the axes, never over the points
    drawLegend(svg, left, top + ph + 40, rows, 10, (gg, lx, ly, s) => svgEl("circle", { cx: lx + 8, cy: ly, r: 3, fill: panelColour(s.color, p.series.indexOf(s)) }, gg));
  }
  return svg;
}

function textPanel(p) {
  const box = htmlEl("div", { class: "llmbook-panel-text" });
  box.style.cssText = `font-family:monospace, ${FONT};white-space:pre-wrap;border:1px solid ${THEME.line};padding:6px;margin:4px 0;max-width:760px`;
  if (p.title) htmlEl("div", {}, box, p.title).style.cssText = `font-family:${FONT};font-size:12px;color:${THEME.fg2};margin-bottom:3px`;
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
    tr.style.borderTop = `1px solid ${THEME.line}`;
    htmlEl("td", {}, tr, r.name).style.cssText = "padding:2px 8px;white-space:nowrap";
    htmlEl("td", {}, tr, String(r.tokens.length)).style.cssText = "padding:2px 8px;text-align:right";
    htmlEl("td", {}, tr, (r.tokens.length / p.n_chars).toFixed(2)).style.cssText = "padding:2px 8px;text-align:right";
    const cell = htmlEl("td", {}, tr);
    cell.style.cssText = "padding:2px 8px";
    tokenStrip(cell, r.tokens);
  }
  return table;
}

function tablePanel(p) {
  const wrap = htmlEl("div", { class: "llmbook-front-table" });
  wrap.style.cssText = "font-size:13px;margin-top:4px";
  const table = htmlEl("table", {}, wrap);
  table.style.cssText = "border-collapse:collapse";
  // a <caption> wraps at the table's width, so a narrow table beside charts stays narrow
  if (p.caption) htmlEl("caption", {}, table, p.caption).style.cssText = "caption-side:top;text-align:left";
  const cell = `font-family:monospace, ${FONT};padding:2px 10px;border-bottom:1px solid ${THEME.line};text-align:left`;
  const hr = htmlEl("tr", {}, table);
  p.header.forEach((h) => { htmlEl("th", {}, hr, h).style.cssText = cell; });
  p.rows.forEach((row) => {
    const tr = htmlEl("tr", {}, table);
    row.forEach((v) => { htmlEl("td", {}, tr, v).style.cssText = cell; });
  });
  return wrap;
}

const PANELS = { bars: barsPanel, hbars: hbarsPanel, points: pointsPanel, text: textPanel, tokens: tokensPanel, table: tablePanel };
const BLOCKS = new Set(["text", "tokens", "table"]); // a panel that takes a row of its own

function panelsView(ctx) {
  const { model, spec } = ctx;
  const tk = spec.top_k;
  let slider = null;
  if (tk) slider = rangeControl(ctx.bar, tk.name || "top_k", tk.label || "top k", tk.min, tk.max, 1, (v) => ctx.set({ step: v }), 0);
  const cols = spec.columns || 0; // 0: as many per row as fit
  return () => {
    let k = null;
    if (tk) { k = clampInt(model.get("step"), tk.min, tk.max); slider.set(k); }
    const avail = ctx.width();
    const wrap = htmlEl("div", { class: "llmbook-front-panels" });
    if (spec.title) {
      const t = htmlEl("div", { class: "llmbook-front-title" }, wrap, spec.title);
      t.style.cssText = "font-size:14px;margin:2px 0 4px 0;max-width:1100px;overflow-wrap:anywhere";
    }
    let row = null, inRow = 0, host = wrap, room = avail;
    const shown = panelsShown(spec, k);
    if (shown.length > 1 && shown[0].type === "table") {
      // A table shown first (samples, next to the controls that change them) sits beside the charts when
      // the width holds the table and a row of charts at least 230 px each (a laptop's notebook does),
      // each chart then drawn in its share of what the table leaves; else it stays above them.
      const t = shown[0], per = cols || 2;
      const tw = t.header.reduce((w, h, c) => w + 20 + MONO_CHAR * Math.max(h.length, ...t.rows.map((r) => String(r[c]).length)), 4);
      if (avail - tw - 24 >= per * 230 + 24 * (per - 1)) {
        const side = htmlEl("div", {}, wrap);
        side.style.cssText = "display:flex;flex-wrap:wrap;align-items:flex-start;gap:6px 24px";
        side.appendChild(PANELS.table(shown.shift(), avail));
        host = htmlEl("div", {}, side);
        room = Math.floor((avail - tw - 24 - 24 * (per - 1) - 8) / per);
      }
    }
    for (const p of shown) {
      const make = PANELS[p.type];
      if (!make) throw new Error(`unknown panel type ${JSON.stringify(p.type)}`);
      const block = BLOCKS.has(p.type);
      if (block || !row || (cols && inRow >= cols)) {
        row = htmlEl("div", {}, host);
        row.style.cssText = "display:flex;flex-wrap:wrap;align-items:flex-start;gap:6px 24px";
        inRow = 0;
      }
      row.appendChild(make(p, room));
      inRow += 1;
      if (block) row = null;
    }
    ctx.pic.replaceChildren(wrap);
  };
}

// ------------------------------------------------------------------ the widget
const VIEWS = { attention: attentionView, model_view: modelView, positional: positionalView, bpe: bpeView, bars: barsView, panels: panelsView };
const TRAITS = ["layer", "head", "scale", "causal", "dims", "step"];

// The book's CJK font, sent by Python as a subset holding only the characters of this picture
// (trait `cjk_font`, base64), so Chinese draws on a machine without a CJK font of its own.
const loadedFonts = new Set();
function useCjkFont(b64, then) {
  if (!b64 || typeof FontFace === "undefined" || !document.fonts || loadedFonts.has(b64)) return;
  loadedFonts.add(b64);
  const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
  const face = new FontFace("llmbook CJK", bytes.buffer);
  face.load().then((f) => { document.fonts.add(f); then(); }).catch(() => {});
}

function render({ model, el }) {
  const root = htmlEl("div", { class: "llmbook-front" }, el);
  root.style.cssText = `font-family:${FONT};color:${THEME.fg};background:${THEME.bg};font-size:13px;padding:2px 0`;
  const bar = htmlEl("div", { class: "llmbook-front-controls" }, root);
  const err = htmlEl("div", { class: "llmbook-front-error" }, root);
  err.style.cssText = `color:${THEME.err};font-size:13px`;
  // The note is never faded with the picture it explains.
  const stale = htmlEl("div", { class: "llmbook-front-stale" }, root);
  stale.style.cssText = `display:none;color:${THEME.fg};font-size:13px;margin:2px 0`;
  stale.textContent = "\u26a0 This picture is out of date: fix the error above to redraw it.";
  const pic = htmlEl("div", { class: "llmbook-front-picture" }, root);
  const status = htmlEl("div", { class: "llmbook-front-status" }, root);
  status.style.cssText = `color:${THEME.fg2};font-size:12px;min-height:1.3em`;
  let draw = null, localError = "", drawnWidth = 0;
  const ctx = {
    model, bar, pic, status,
    // an error found in the browser (a typed dims, say): shown above, the old picture kept greyed
    error: (msg) => { localError = msg || ""; err.textContent = localError; paintStale(); },
    set: (values) => { for (const [k, v] of Object.entries(values)) model.set(k, v); model.save_changes(); },
    // the width the picture may use (px); layouts are chosen to fit it
    width: () => {
      const w = root.getBoundingClientRect ? root.getBoundingClientRect().width : 0;
      drawnWidth = w > 0 ? w : 960;
      return drawnWidth;
    },
  };
  const paintStale = () => {
    const isStale = !!model.get("stale") || !!localError;
    stale.style.display = isStale ? "block" : "none";
    pic.style.opacity = isStale ? "0.35" : "1";
    pic.style.filter = isStale ? "grayscale(1)" : "none";
    bar.style.opacity = model.get("stale") ? "0.6" : "1";
  };
  const build = () => {
    bar.replaceChildren(); pic.replaceChildren(); err.textContent = ""; status.textContent = ""; localError = "";
    const spec = model.get("spec") || {};
    const view = VIEWS[spec.kind];
    ctx.spec = spec;
    draw = view ? view(ctx) : null;
    if (!view && spec.kind) err.textContent = `unknown view kind ${JSON.stringify(spec.kind)}`;
    redraw();
  };
  const redraw = () => {
    if (draw) {
      localError = ""; err.textContent = "";
      try { draw(); } catch (e) { ctx.error(`could not draw: ${e.message}`); }
    }
    paintStale();
  };
  const onFont = () => useCjkFont(model.get("cjk_font"), redraw);
  onFont();
  model.on("change:spec", build);
  model.on("change:cjk_font", onFont);
  for (const t of TRAITS) model.on(`change:${t}`, redraw);
  model.on("change:stale", paintStale);
  build();
  // Redraw when the width changes (a window resized, the file browser opened or closed).
  let observer = null;
  if (typeof ResizeObserver !== "undefined") {
    observer = new ResizeObserver(() => {
      const w = root.getBoundingClientRect().width;
      if (w > 0 && Math.abs(w - drawnWidth) > 8) redraw();
    });
    observer.observe(root);
  }
  return () => {
    if (observer) observer.disconnect();
    model.off("change:spec", build);
    model.off("change:cjk_font", onFont);
    for (const t of TRAITS) model.off(`change:${t}`, redraw);
    model.off("change:stale", paintStale);
  };
}

export default { render };
