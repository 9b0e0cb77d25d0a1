"""render.js's pure functions agree with their Python counterparts (run in Node.js when it is installed).

The browser view redraws from the data Python sent: the softmax rescaling, the BPE tokens
after k merges and the byte-level labels are computed again in JavaScript. Here the module
is run in Node with a few lines appended that call those functions on inputs computed in
Python, and the answers must match ``rescale_attention``, ``tokens_at`` and
``byte_token_labels``. (The drawing itself is tested in a browser, tests/browser.)
"""

import json
import shutil
import subprocess

import pytest
import torch

from llmbook.viz.attention import byte_token_labels, rescale_attention
from llmbook.viz.bpe import bpe_trace, merge_history, tokens_at
from llmbook.viz.frontend import RENDER_JS

NODE = shutil.which("node")
pytestmark = pytest.mark.skipif(NODE is None, reason="Node.js is not installed (the browser tests cover render.js)")


def _run(calls: str, data: dict):
    script = RENDER_JS + f"\nconst DATA = {json.dumps(data)};\nconsole.log(JSON.stringify({calls}));\n"
    out = subprocess.run([NODE, "--input-type=module", "-"], input=script, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_rescale_matches_python():
    w = torch.randn(5, 5, generator=torch.Generator().manual_seed(0)).softmax(-1).double()
    cases = [(1.0, False), (2.5, False), (0.3, True), (1.0, True)]
    got = _run("DATA.cases.map(([s, c]) => rescale(DATA.w, s, c))", {"w": w.tolist(), "cases": cases})
    for (scale, causal), js in zip(cases, got):
        torch.testing.assert_close(torch.tensor(js, dtype=torch.float64), rescale_attention(w, scale, causal), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("level", ["characters", "bytes"])
def test_bpe_tokens_after_k_merges_match_python(level):
    text = "the car\nthe cat\nthe rat\n今天天气很好。今天我去了商店。"
    trace = bpe_trace(text, level, 300)
    units, steps = merge_history(trace, text)
    ks = list(range(0, len(trace.pairs) + 1, 3))
    got = _run("DATA.ks.map((k) => tokensAt({units: DATA.units, steps: DATA.steps, level: DATA.level}, k))",
               {"units": units, "steps": steps, "level": level, "ks": ks})
    assert got == [tokens_at(units, steps, k, level) for k in ks]


def test_byte_labels_match_python():
    pieces = [b" cat", "今".encode()[:2], "今".encode()[2:] + "天".encode(), b"\xff", "🙂".encode()[:1], "🙂".encode()[1:]]
    got = _run("byteTokenLabels(DATA.runs)", {"runs": [list(p) for p in pieces]})
    assert got == byte_token_labels(pieces) == [" cat", "今[:2]", "今[2:]天", "<FF>", "🙂[:1]", "🙂[1:]"]


def test_dims_parsing_matches_python_and_clips_long_input():
    from llmbook.viz.positional import parse_dims

    got = _run("[parseDims('0, 4;16', 32), (() => { try { parseDims('x'.repeat(5000), 32); } catch (e) { return e.message; } })()]", {})
    assert got[0] == parse_dims("0, 4;16", 32)
    assert got[1].startswith("dims must be comma-separated integers") and len(got[1]) < 120


# A minimal DOM for Node: enough for render.js to build its SVG/HTML tree, which the test then reads.
_DOM_SHIM = r"""
class FakeNode {
  constructor(tag) { this.tag = tag; this.attrs = {}; this.children = []; this.style = {}; this._text = ""; this.listeners = {}; }
  setAttribute(k, v) { this.attrs[k] = String(v); }
  getAttribute(k) { return this.attrs[k]; }
  appendChild(c) { this.children.push(c); return c; }
  append(...xs) { for (const x of xs) this.children.push(typeof x === "string" ? { tag: "#text", _text: x, children: [] } : x); }
  replaceChildren(...xs) { this.children = []; this.append(...xs); }
  addEventListener(k, f) { this.listeners[k] = f; }
  set textContent(v) { this._text = String(v); this.children = []; }
  get textContent() { return this._text + this.children.map((c) => (c.tag === "#text" ? c._text : c.textContent || "")).join(""); }
  getContext() { return { font: "", measureText: (s) => ({ width: String(s).length * 6 }) }; }
  set innerHTML(v) { this._text = String(v); }
}
globalThis.document = { createElementNS: (_, tag) => new FakeNode(tag), createElement: (tag) => new FakeNode(tag), activeElement: null };
const all = (n, tag) => [...(n.tag === tag ? [n] : []), ...(n.children || []).flatMap((c) => all(c, tag))];
function drawSpec(spec) {
  const pic = new FakeNode("div"), bar = new FakeNode("div"), status = new FakeNode("div");
  const ctx = { model: { get: () => 0 }, spec, bar, pic, status, error: () => {}, set: () => {}, width: () => 1000 };
  VIEWS[spec.kind](ctx)();
  return pic;
}
"""


def _draw(calls: str, data: dict):
    script = RENDER_JS + _DOM_SHIM + f"\nconst DATA = {json.dumps(data)};\nconsole.log(JSON.stringify({calls}));\n"
    out = subprocess.run([NODE, "--input-type=module", "-"], input=script, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_panels_view_draws_every_panel_type():
    from llmbook.viz.frontend import KINDS

    assert "panels" in KINDS
    spec = {"kind": "panels", "title": "temperature 0.80, seed 0", "panels": [
        {"type": "bars", "title": "two lines\nof title", "labels": ["a", "␣", "↵"], "values": [0.5, 0.3, 0.2],
         "colors": ["#0072B2", "#bbbbbb", "#bbbbbb"], "xlabel": "next token", "ylabel": "probability", "note": "top 3"},
        {"type": "hbars", "title": "tokens per character", "labels": ["x", "y"], "values": [1.0, 0.25], "xlabel": "tokens per character"},
        {"type": "points", "title": "diag", "xlim": [-4, 4], "ylim": [-4, 4], "diagonal": True, "legend": True,
         "series": [{"label": "s", "color": 1, "x": [0, 1], "y": [0, 1], "yerr": [0.5, 0.5]}]},
        {"type": "text", "title": "sample", "segments": [{"text": "ROMEO:\n", "bold": True}, {"text": "What"}]},
        {"type": "tokens", "columns": ["tokenizer", "tokens", "tokens / char", "tokens"], "n_chars": 4,
         "rows": [{"name": "chars", "tokens": ["a", " ", "b\nc"]}]},
    ]}
    got = _draw("""(() => { const pic = drawSpec(DATA.spec);
        const rects = all(pic, "rect").filter((r) => r.attrs.fill && r.attrs.fill !== "none" && r.attrs.fill !== "white");
        return { title: all(pic, "div").find((d) => d.attrs.class === "llmbook-front-title").textContent,
                 fills: rects.map((r) => r.attrs.fill), texts: all(pic, "text").map((t) => t.textContent),
                 circles: all(pic, "circle").length, bold: all(pic, "b").map((b) => b.textContent),
                 spans: all(pic, "span").map((s) => s.textContent), svgs: all(pic, "svg").length }; })()""",
                {"spec": spec})
    assert got["title"] == "temperature 0.80, seed 0"
    assert got["svgs"] == 3  # bars, hbars, points
    # three vertical bars in their own colours, then two horizontal ones in the first palette colour
    assert got["fills"][:5] == ["#0072B2", "#bbbbbb", "#bbbbbb", "#0072B2", "#0072B2"]
    for label in ["two lines", "of title", "a", "␣", "↵", "next token", "probability", "top 3", "x", "y", "1.00", "0.25", "diag"]:
        assert label in got["texts"], label
    assert got["circles"] == 2 + 1  # two points + the legend's marker
    assert got["bold"] == ["ROMEO:\n"]
    assert got["spans"][-3:] == ["a", "·", "b↵c"]


def test_panels_view_rejects_an_unknown_panel_type():
    got = _draw("""(() => { try { drawSpec({kind: "panels", panels: [{type: "pie"}]}); return "drawn"; } catch (e) { return e.message; } })()""", {})
    assert got == 'unknown panel type "pie"'


def test_panels_top_k_matches_the_matplotlib_figure():
    """The panels view keeps the first k bars of each bar panel and sets the value axis as the
    matplotlib figure of the same data does (x1.3 of the largest bar when values are written)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from llmbook.viz.bert import masked_word_figure
    from llmbook.viz.frontend import bar_panel, panels_spec

    cands = [("thou", 0.35), ("a", 0.05), ("to", 0.04), ("not", 0.03), ("it", 0.025)]
    spec = panels_spec([bar_panel([c for c, _ in cands], [p for _, p in cands], "[MASK] at piece 6", "h",
                                  annotate=True),
                        bar_panel(["x", "y"], [0.6, 0.4], "fixed axis", vmax=1.0)],
                       top_k={"min": 1, "max": 15})
    ks = [1, 3, 5, 15]
    got = _run("DATA.ks.map((k) => panelsShown(DATA.spec, k))", {"spec": spec, "ks": ks})
    for k, panels in zip(ks, got):
        fig = masked_word_figure(["[CLS]", "[MASK]", "[SEP]"], [(6, cands[:k])])
        xmax = fig.axes[0].get_xlim()[1]
        plt.close(fig)
        assert panels[0]["labels"] == [c for c, _ in cands[:k]]
        assert panels[0]["values"] == [p for _, p in cands[:k]]
        assert abs(panels[0]["vmax"] - xmax) < 1e-9
        assert panels[1]["labels"] == ["x", "y"][:k] and panels[1]["vmax"] == 1.0
    every = _run("panelsShown(DATA.spec, null)", {"spec": spec})
    assert [len(p["values"]) for p in every] == [5, 2]


def test_panels_view_draws_bar_panels_slider_and_table():
    """One view kind for every grid of small charts (issue 32): bar panels in rows of `columns`,
    the top-k slider and the table, as the former bar_grid view drew them."""
    from llmbook.viz.frontend import KINDS, bar_panel, panels_spec

    assert "bar_grid" not in KINDS
    spec = panels_spec(
        [bar_panel(["H", "␣", "↵"], [0.5, 0.3, 0.2], "SFT: next token after the prompt", "v", 0, ylabel="probability", vmax=1.0),
         bar_panel(["今", "<E5>"], [0.6, 0.4], "base: next token after the prompt", "v", 1, vmax=1.0),
         bar_panel(["HAMLET", "Hamlet"], [0.9, 0.1], "SFT: whole answers", "h", 0, xlabel="probability among the candidates"),
         bar_panel(["HAMLET", "Hamlet"], [0.3, 0.7], "base: whole answers", "h", 1, annotate=True)],
        title="SFT compared with base", columns=2, top_k={"min": 1, "max": 15},
        table={"caption": "2 sampled answers (greedy):", "header": ["SFT", "base"], "rows": [["'HAMLET'", "''"], ["'IAGO'", "''"]]})
    got = _draw("""DATA.ks.map((k) => { const pic = new FakeNode("div"), bar = new FakeNode("div");
        const ctx = { model: { get: (t) => (t === "step" ? k : 0) }, spec: DATA.spec, bar, pic, status: new FakeNode("div"),
                      error: () => {}, set: () => {}, width: () => 1200 };
        VIEWS.panels(ctx)();
        const bars = all(pic, "rect").filter((r) => r.attrs.fill && r.attrs.fill !== "none");
        const rows = all(pic, "div").filter((d) => d.style.cssText && d.style.cssText.includes("flex-wrap"));
        return { fills: bars.map((r) => r.attrs.fill), texts: all(pic, "text").map((t) => t.textContent),
                 cells: [...all(pic, "th"), ...all(pic, "td")].map((c) => c.textContent),
                 slider: all(bar, "input").map((i) => [i.attrs.min, i.attrs.max, i.value]),
                 perRow: rows.map((r) => all(r, "svg").length),
                 title: all(pic, "div").find((d) => d.attrs.class === "llmbook-front-title").textContent }; })""",
                {"spec": spec, "ks": [15, 1]})
    full, one = got
    assert full["title"] == "SFT compared with base"
    assert full["perRow"] == [2, 2, 0]  # columns=2: next-token charts side by side, the answers, the table alone
    # every bar in its checkpoint's colour: left column PALETTE[0], right column PALETTE[1]
    assert full["fills"] == ["#0072B2"] * 3 + ["#E69F00"] * 2 + ["#0072B2"] * 2 + ["#E69F00"] * 2
    for label in ["H", "␣", "↵", "今", "<E5>", "HAMLET", "Hamlet", "probability", "probability among the candidates",
                  "SFT: whole answers", "0.30", "0.70"]:
        assert label in full["texts"], label
    assert full["cells"] == ["SFT", "base", "'HAMLET'", "''", "'IAGO'", "''"]
    assert full["slider"] == [["1", "15", "15"]]
    assert one["fills"] == ["#0072B2", "#E69F00", "#0072B2", "#E69F00"]  # top 1 of every panel


def test_text_takes_the_theme_colour_and_masked_cells_are_not_zero():
    """SVG text is drawn in currentColor (the theme's text colour, set on the view from JupyterLab's
    --jp-ui-font-color1 with a light default), theme colours go to the style, not to a presentation
    attribute (where var() is invalid), and a causal mask marks the forbidden cells as null (grey)."""
    got = _draw("""(() => {
        const t = svgEl("text", { x: 1 }), n = svgEl("text", { fill: THEME.fg2 }), on = svgEl("text", { fill: "white" });
        return { plain: t.attrs.fill, themed: [n.attrs.fill, n.style.fill], white: on.attrs.fill,
                 masked: maskFuture([[0.5, 0.5], [0.2, 0.8]]), fg: THEME.fg };
    })()""", {})
    assert got["plain"] == "currentColor" and got["white"] == "white"
    assert got["themed"][0] is None and got["themed"][1].startswith("var(--jp-ui-font-color2")
    assert got["masked"] == [[0.5, None], [0.2, 0.8]]
    assert got["fg"].startswith("var(--jp-ui-font-color1,")


def test_positional_dims_adapt_to_a_smaller_d_model_but_typed_dims_are_checked():
    """A d_model below the default dims leaves those dims out with a note (the reader typed nothing
    wrong); dims the reader typed are checked strictly, and the error keeps the old picture."""
    got = _draw("""[chooseDims("0, 4, 16", 8, false),
                    (() => { try { chooseDims("0, 4, 16", 8, true); return "drawn"; } catch (e) { return e.message; } })(),
                    chooseDims("16, 20", 8, false),
                    (() => { try { chooseDims("0, x", 8, false); return "drawn"; } catch (e) { return e.message; } })()]""", {})
    assert got[0] == {"dims": [0, 4], "note": "dims 16 left out: d_model=8 has dimensions 0..7"}
    assert got[1].startswith("dims [16] out of range")
    assert got[2]["dims"] == [0]
    assert got[3].startswith("dims must be comma-separated integers")
