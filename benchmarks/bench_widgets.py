"""Widget latency in a real browser: from moving a control to the updated picture.

For every explorer of the book's chapter notebooks this script opens the notebook in a
fresh JupyterLab (loopback, token auth off only here, the browser-test harness of
``tests/browser/conftest.py``), runs all cells in headless Debian Chromium, waits for the
kernel to be idle, and then moves each control of each explorer several times. One
sample is the time from the reader's action (the first key, click, input or change event
the browser sees for that move) to the last change of the explorer's view:

- the view is every ``.llmbook-view`` inside the ``.llmbook-explorer`` (the whole explorer
  when it has none), watched by a MutationObserver (PNG ``src``, SVG markup, text) and,
  when it holds canvases, by a canvas-pixel poll every 16 ms;
- a move is finished when nothing in the view has changed for ``--settle-ms`` and the
  kernel is idle, so a view drawn in several steps counts until its last step;
- the clock is the browser's ``performance.now()`` (wall time: it includes the kernel's
  turns on a shared machine, which is what the reader waits for).

A move whose view did not change but whose error area did is an ``error`` (the reader saw
a message, not a picture); one where nothing changed is ``nochange``; neither enters the
latency percentiles, both are counted in the table.

Controls are found by their CSS class ``llmbook-ctl-<name>`` and driven by their kind
(slider handle, range input, select, text box, text area, number box, checkbox, toggle
button(s)). Text boxes alternate between their starting text and a variant that keeps
its characters (lines, words, comma-separated items or characters rotated by one), so the
variant stays valid input for models with a fixed vocabulary.

    python benchmarks/bench_widgets.py                       # every chapter explorer
    python benchmarks/bench_widgets.py --notebooks 03 05     # some chapters
    python benchmarks/bench_widgets.py --repeats 8 --warmup 1
    python benchmarks/bench_widgets.py --repo ../other_checkout   # serve another checkout's notebooks and lib
    python benchmarks/bench_widgets.py --record              # also merge the metrics into results.json

Output: a table per notebook / explorer / control (n, p50, p90, max in ms, outcomes), then
``widget_latency_p50_ms=``, ``widget_latency_p90_ms=`` (all controls) and
``widget_display_only_p50_ms=`` (controls that only change how the same data is drawn:
layer, head, scale, dimensions, merge step, highlighted token). Goals: p50 <= 150 ms,
p90 <= 400 ms, display-only p50 <= 100 ms. Not part of ``make bench`` (it takes tens of
minutes: every chapter notebook runs once); ``make bench-widgets`` runs it.
"""

from __future__ import annotations

import argparse
import datetime as dt
import glob
import itertools
import json
import os
import re
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "tests" / "browser"))

import conftest as harness  # noqa: E402  (the browser-test harness: server, page helpers)
from _timing import REPORT, Results, goal_holds, quartiles  # noqa: E402

# Chapter id -> the explorers its notebook is expected to show (checked, not assumed).
CHAPTERS = {
    "00": ("notebooks/00_introduction.ipynb", ["next_char_explorer"]),
    "01a": ("notebooks/01a_tokenization.ipynb", ["bpe_explorer"]),
    "01b": ("notebooks/01b_unigram_wordpiece.ipynb", ["compare_explorer"]),
    "03": ("notebooks/03_attention.ipynb", ["attention_explorer"]),
    "04": ("notebooks/04_transformer.ipynb", ["norm_explorer", "attention_explorer"]),
    "05": ("notebooks/05_positional_encoding.ipynb", ["positional_explorer"]),
    "06b": ("notebooks/06b_gpt_family.ipynb", ["sampling_explorer", "attention_explorer"]),
    "07": ("notebooks/07_bert.ipynb", ["masked_word_explorer", "attention_explorer"]),
    "08a": ("notebooks/08a_beyond_llama.ipynb", ["attention_explorer (SmolLM2)"]),
    "09": ("notebooks/09_post_training.ipynb", ["checkpoint_explorer"]),
}
# Controls that only change how the same data is drawn (no model run, no new data).
# "causal" re-masks and renormalises the same attention weights, so it belongs here too.
DISPLAY_ONLY = {"layer", "head", "scale", "causal", "dims", "dim", "dimension", "dimensions", "merges", "merge", "step",
                "token", "query", "highlight", "highlighted", "selected"}
GOALS = {"widget_latency_p50_ms": "<= 150", "widget_latency_p90_ms": "<= 400", "widget_display_only_p50_ms": "<= 100"}

# ----------------------------------------------------------------------------- browser side
# Installed once per page: a watcher over one explorer's view, armed before each move.
WATCH_JS = r"""
() => {
  if (window.__llmbBench) return;
  const hash = (s) => { let h = 0; for (let i = 0; i < s.length; i++) { h = (h * 31 + s.charCodeAt(i)) | 0; } return h + ':' + s.length; };
  const canvasSig = (roots) => {
    const parts = [];
    for (const r of roots) for (const c of r.querySelectorAll('canvas')) {
      let sig = c.width + 'x' + c.height;
      try {
        const ctx = c.getContext('2d', {willReadFrequently: true});
        if (ctx && c.width && c.height) {
          const d = ctx.getImageData(0, 0, c.width, c.height).data;
          let h = 0; for (let i = 0; i < d.length; i += 13) { h = (h * 31 + d[i]) | 0; }
          sig += ':' + h;
        } else { sig += ':' + hash(c.toDataURL()); }
      } catch (e) { try { sig += ':' + hash(c.toDataURL()); } catch (e2) { sig += ':?'; } }
      parts.push(sig);
    }
    return parts.join('|');
  };
  const B = window.__llmbBench = {hash, canvasSig, state: null};
  const onEvent = () => { const s = B.state; if (s && s.t0 === null) s.t0 = performance.now(); };
  for (const n of ['keydown', 'pointerdown', 'mousedown', 'click', 'input', 'change', 'focusout']) {
    document.addEventListener(n, onEvent, true);
  }
  B.roots = (e) => {
    const ex = document.querySelectorAll('.llmbook-explorer')[e];
    if (!ex) return null;
    const views = [...ex.querySelectorAll('.llmbook-view')];
    return {ex, views: views.length ? views : [ex], err: ex.querySelector('.llmbook-error')};
  };
  // Controls drawn inside the view (browser-side explorers) and hover read-outs are not the picture.
  const NOT_PICTURE = '[class*="llmbook-ctl-"], .llmbook-front-controls, .llmbook-front-status';
  const pictureHtml = (v) => {
    if (!v.querySelector(NOT_PICTURE)) return v.innerHTML;
    const c = v.cloneNode(true);
    c.querySelectorAll(NOT_PICTURE).forEach(n => n.remove());
    return c.innerHTML;
  };
  const inPicture = (node) => {
    const el = node.nodeType === 1 ? node : node.parentElement;
    return !(el && el.closest(NOT_PICTURE));
  };
  B.signature = (e) => {
    const r = B.roots(e);
    return r ? {html: hash(r.views.map(pictureHtml).join('\u0001')), canvas: B.canvasSig(r.views),
                err: r.err ? r.err.innerText : ''} : null;
  };
  B.arm = (e) => {
    B.disarm();
    const r = B.roots(e);
    const s = B.state = {e, t0: null, armedAt: performance.now(), tView: null, tCanvas: null, tErr: null,
                         nMut: 0, sig0: B.signature(e), observers: [], iv: null};
    const mo = new MutationObserver((records) => {
      if (records.some(rec => inPicture(rec.target))) { s.tView = performance.now(); s.nMut++; }
    });
    for (const v of r.views) mo.observe(v, {subtree: true, childList: true, attributes: true, characterData: true});
    s.observers.push(mo);
    if (r.err) {
      const me = new MutationObserver(() => { s.tErr = performance.now(); });
      me.observe(r.err, {subtree: true, childList: true, attributes: true, characterData: true});
      s.observers.push(me);
    }
    if (r.views.some(v => v.querySelector('canvas'))) {
      let last = s.sig0.canvas;
      s.iv = setInterval(() => {
        const rr = B.roots(e); if (!rr) return;
        const c = B.canvasSig(rr.views);
        if (c !== last) { last = c; s.tCanvas = performance.now(); }
      }, 16);
    }
  };
  B.disarm = () => {
    const s = B.state; if (!s) return;
    s.observers.forEach(o => o.disconnect());
    if (s.iv) clearInterval(s.iv);
  };
  B.poll = () => {
    const s = B.state; if (!s) return null;
    const now = performance.now();
    return {now, t0: s.t0, armedAt: s.armedAt, tView: s.tView, tCanvas: s.tCanvas, tErr: s.tErr, nMut: s.nMut};
  };
}
"""

# The controls of explorer e: name, kind and the state the bench needs to move it.
CONTROLS_JS = r"""
(e) => {
  const ex = document.querySelectorAll('.llmbook-explorer')[e];
  const out = [];
  const seen = new Set();
  for (const el of ex.querySelectorAll('[class*="llmbook-ctl-"]')) {
    const m = [...el.classList].find(c => c.startsWith('llmbook-ctl-'));
    if (!m) continue;
    const name = m.slice('llmbook-ctl-'.length);
    if (seen.has(name)) continue;
    seen.add(name);
    let kind = 'unknown', info = {};
    const q = (s) => (el.matches(s) ? el : el.querySelector(s));
    if (q('.noUi-handle')) {
      const h = q('.noUi-handle');
      kind = 'slider';
      info = {now: h.getAttribute('aria-valuenow'), min: h.getAttribute('aria-valuemin'), max: h.getAttribute('aria-valuemax')};
    } else if (q('input[type=range]')) {
      const r = q('input[type=range]');
      kind = 'range'; info = {now: r.value, min: r.min, max: r.max};
    } else if (q('select')) {
      const s = q('select');
      kind = 'select'; info = {index: s.selectedIndex, n: s.options.length};
    } else if (q('textarea')) {
      kind = 'textarea'; info = {value: q('textarea').value};
    } else if (q('input[type=number]')) {
      kind = 'number'; info = {value: q('input[type=number]').value};
    } else if (q('input[type=checkbox]')) {
      kind = 'checkbox'; info = {checked: q('input[type=checkbox]').checked};
    } else if (q('input[type=text]') || q('input:not([type])')) {
      kind = 'text'; info = {value: (q('input[type=text]') || q('input:not([type])')).value};
    } else if (el.tagName === 'BUTTON') {
      kind = 'toggle';
    } else if (el.querySelectorAll('button').length > 1) {
      const bs = [...el.querySelectorAll('button')];
      kind = 'buttons'; info = {n: bs.length, active: bs.findIndex(b => b.classList.contains('mod-active'))};
    }
    out.push({name, kind, info});
  }
  return out;
}
"""


def text_variants(text: str) -> list[str]:
    """Other texts with the same characters (so they stay inside a model's vocabulary).

    A comma-separated list gives its items in other orders and fewer of them; other texts
    give their lines rotated, then their words, then their characters; each move of
    a text box takes the next one, so no move re-sends a text the explorer has cached.

    >>> text_variants("the car\\nthe cat")[:2]
    ['the cat\\nthe car', 'car the cat the']
    >>> text_variants("0, 4, 16")[:2], text_variants("0, 4, 16")[-3:]
    (['0, 16, 4', '4, 0, 16'], ['0', '4', '16'])
    >>> text_variants("3141592")[:2]
    ['1415923', '4159231']
    """
    out: list[str] = []

    def rotations(parts: list[str], sep: str) -> None:
        for k in range(1, len(parts)):
            out.append(sep.join(parts[k:] + parts[:k]))

    items = [p.strip() for p in text.split(",")]
    if len(items) > 1 and all(items) and all(" " not in p for p in items):
        # a list such as "0, 4, 16": other orders and shorter lists of the same items only
        # (characters moved across items would make numbers the list never had)
        for r in range(len(items), 0, -1):
            out.extend(", ".join(c) for c in itertools.permutations(items, r))
        seen = {text}
        return [t for t in out if not (t in seen or seen.add(t))]
    lines = text.split("\n")
    if len([ln for ln in lines if ln.strip()]) > 1:
        rotations(lines, "\n")
    rotations(text.split(), " ")
    rotations(list(text), "")
    seen = {text}
    return [t for t in out if t.strip() and not (t in seen or seen.add(t))]


class Mover:
    """Moves one control back and forth between its starting state and other states."""

    def __init__(self, lab: harness.Lab, explorer: int, name: str, kind: str, info: dict) -> None:
        self.lab, self.page, self.e, self.name, self.kind, self.info = lab, lab.page, explorer, name, kind, info
        self.loc = self.page.locator(".llmbook-explorer").nth(explorer).locator(f".llmbook-ctl-{name}").first
        self.moves = 0
        self.original = None
        if kind in ("text", "textarea"):
            self.original = info["value"]
            base = self.original if self.original.strip() else self._fallback_text()
            self.variants = text_variants(base) if self.original.strip() else [base] + text_variants(base)
            if not self.variants:
                raise ValueError(f"control {name!r}: no variant of the text {self.original!r} to type")
        elif kind in ("number", "range"):
            self.original = info.get("value", info.get("now"))

    @property
    def one_way(self) -> bool:
        """Text and number boxes get a new value every move (then ``restore``); others alternate."""
        return self.kind in ("text", "textarea", "number")

    def _fallback_text(self) -> str:
        # An empty box that falls back to a menu (e.g. "or type one"): type the menu's choice.
        sel = self.page.locator(".llmbook-explorer").nth(self.e).locator("select").first
        if sel.count():
            label = sel.evaluate("s => s.options[s.selectedIndex] ? s.options[s.selectedIndex].text : ''").replace("\xa0", " ")
            if label.strip():
                return label
        return "the"

    def prepare(self) -> None:
        """Untimed part of the next move (typing into a box before it is committed)."""
        if self.kind in ("text", "textarea"):
            box = self.loc.locator("input, textarea").first if self.loc.evaluate("e => !e.matches('input,textarea')") else self.loc
            box.fill(self.variants[self.moves % len(self.variants)])
            self._box = box
        elif self.kind == "number":
            box = self.loc.locator("input").first if self.loc.evaluate("e => !e.matches('input')") else self.loc
            new = float(self.original or 0) + 1 + self.moves
            box.fill(str(int(new)) if new == int(new) else str(new))
            self._box = box
        else:
            self.loc.scroll_into_view_if_needed()

    def commit(self) -> None:
        """The timed action: the key, click or selection that sends the new value."""
        forward = self.moves % 2 == 0
        k = self.kind
        if k == "slider":
            h = self.loc.locator(".noUi-handle").first
            at_max = self.info.get("now") is not None and self.info.get("now") == self.info.get("max")
            right = forward != at_max
            h.focus()
            h.press("ArrowRight" if right else "ArrowLeft")
            h.evaluate("e => e.blur()")
        elif k == "range":
            # A click on the track (JupyterLab keeps arrow keys from a range input in a notebook).
            r = self.loc.locator("input[type=range]").first if self.loc.evaluate("e => !e.matches('input')") else self.loc
            box = r.bounding_box()
            r.click(position={"x": box["width"] * (0.6 if forward else 0.4), "y": box["height"] / 2})
        elif k == "select":
            n, i0 = self.info["n"], self.info["index"]
            # start, then another option, then start again: every move changes the value
            others = [j for j in range(n) if j != i0] or [i0]
            target = others[(self.moves // 2) % len(others)] if forward else i0
            self.loc.locator("select").first.select_option(index=target) if self.loc.evaluate(
                "e => e.tagName !== 'SELECT'") else self.loc.select_option(index=target)
        elif k == "text":
            self._box.press("Enter")
            self._box.evaluate("e => e.blur()")
        elif k == "textarea":
            self._box.evaluate("e => e.blur()")
        elif k == "number":
            self._box.press("Enter")
            self._box.evaluate("e => e.blur()")
        elif k == "checkbox":
            self.loc.locator("input[type=checkbox]").first.click() if self.loc.evaluate(
                "e => !e.matches('input')") else self.loc.click()
        elif k == "toggle":
            self.loc.click()
        elif k == "buttons":
            n, a0 = self.info["n"], max(self.info["active"], 0)
            others = [j for j in range(n) if j != a0] or [a0]
            target = others[(self.moves // 2) % len(others)] if forward else a0
            self.loc.locator("button").nth(target).click()
        else:
            raise ValueError(f"control {self.name!r}: cannot move a control of kind {self.kind!r}")
        self.moves += 1

    def restore(self) -> None:
        """Put a text or number box back to its starting value (untimed)."""
        if self.one_way and self.moves:
            self._box.fill(self.original)
            self._box.press("Enter") if self.kind != "textarea" else None
            self._box.evaluate("e => e.blur()")
        elif self.kind == "range" and self.moves:
            r = self.loc.locator("input[type=range]").first if self.loc.evaluate("e => !e.matches('input')") else self.loc
            r.evaluate("(e, v) => { e.value = v; e.dispatchEvent(new Event('input', {bubbles: true})); }", self.original)


def wait_move(lab: harness.Lab, settle_ms: float, timeout_s: float, nochange_s: float) -> dict:
    """Wait until the move has finished (see the module docstring); return its timings."""
    page = lab.page
    start = time.time()
    while True:
        page.wait_for_timeout(40)
        p = page.evaluate("() => window.__llmbBench.poll()")
        idle = "idle" in lab.kernel_status() and page.locator(".jp-InputArea-prompt", has_text="[*]").count() == 0
        t0 = p["t0"] if p["t0"] is not None else p["armedAt"]
        last_pic = max([t for t in (p["tView"], p["tCanvas"]) if t is not None], default=None)
        last_any = max([t for t in (last_pic, p["tErr"]) if t is not None], default=None)
        if last_any is not None and idle and p["now"] - last_any >= settle_ms:
            break
        if last_any is None and idle and p["now"] - t0 >= nochange_s * 1000:
            break
        if time.time() - start > timeout_s:
            return {"outcome": "timeout", "ms": None}
    sig_now = page.evaluate("(e) => window.__llmbBench.signature(e)", page.evaluate("() => window.__llmbBench.state.e"))
    sig0 = page.evaluate("() => window.__llmbBench.state.sig0")
    pic_changed = last_pic is not None and (sig_now["html"] != sig0["html"] or sig_now["canvas"] != sig0["canvas"])
    err_now = sig_now["err"].strip()
    if pic_changed and not err_now:
        return {"outcome": "view", "ms": last_pic - t0}
    if err_now:  # the reader sees a message (new, or the same one again), not a picture
        return {"outcome": "error", "ms": None if p["tErr"] is None else p["tErr"] - t0, "error": err_now[:160]}
    if last_pic is not None:
        return {"outcome": "same", "ms": last_pic - t0}  # re-drawn, identical picture
    return {"outcome": "nochange", "ms": None}


def kernel_llmbook_file(server: harness.JupyterServer) -> str:
    """``llmbook.__file__`` as the notebook's own kernel sees it (run through its connection file)."""
    from jupyter_client import BlockingKernelClient

    files = sorted(glob.glob(os.path.join(server.tmp, "runtime", "kernel-*.json")), key=os.path.getmtime)
    if not files:
        return "(no kernel connection file found)"
    kc = BlockingKernelClient(connection_file=files[-1])
    kc.load_connection_file()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=60)
        out: list[str] = []
        kc.execute_interactive("import llmbook, os; print(llmbook.__file__, os.environ.get('OMP_NUM_THREADS'))",
                               timeout=60, output_hook=lambda m: out.append(m["content"].get("text", "")),
                               store_history=False)
        return "".join(out).strip()
    finally:
        kc.stop_channels()


def pct(xs: list[float], q: float) -> float:
    """The q-th percentile (0-100), linear interpolation between closest ranks.

    >>> pct([10.0, 20.0, 30.0, 40.0], 50), pct([10.0, 20.0, 30.0, 40.0], 90)
    (25.0, 37.0)
    """
    if not xs:
        raise ValueError("xs is empty")
    s = sorted(xs)
    k = (len(s) - 1) * q / 100
    lo, hi = int(k), min(int(k) + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


STOP = {"now": False}


def _stop(signum, _frame) -> None:
    # First signal: finish the current move, then close the browser and the servers (they run
    # in their own sessions) and print what was measured. A second signal stops at once.
    if STOP["now"]:
        raise KeyboardInterrupt
    STOP["now"] = True
    log(f"# signal {signum}: stopping after this move")


def past(deadline: dt.datetime | None, margin_s: float = 0) -> bool:
    return deadline is not None and dt.datetime.now() + dt.timedelta(seconds=margin_s) >= deadline


def load() -> str:
    a, b, c = os.getloadavg()
    return f"{a:.2f} {b:.2f} {c:.2f}"


def log(msg: str) -> None:
    print(msg, flush=True)


def bench_notebook(browser, chapter: str, path: str, args, rows: list[dict]) -> None:
    server = harness.JupyterServer()
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(60_000)
    lab = harness.Lab(page, server, f"bench_{chapter}")
    try:
        t = time.time()
        lab.open(path, timeout_s=args.run_timeout)
        head = os.popen(f"git -C {harness.REPO} rev-parse --short HEAD 2>/dev/null").read().strip()
        dirty = os.popen(f"git -C {harness.REPO} status --porcelain --untracked-files=no -- lib 2>/dev/null").read().split()[1::2]
        log(f"\n## {chapter} {path}: Run All + idle in {time.time() - t:.0f} s; load average {load()}; "
            f"{dt.datetime.now():%H:%M:%S} at {head}{' + uncommitted ' + ' '.join(dirty) if dirty else ''}")
        log(f"   kernel: llmbook from {kernel_llmbook_file(server)}")
        page.evaluate(WATCH_JS)
        n_ex = page.locator(".llmbook-explorer").count()
        titles = [page.evaluate("""(i) => { const b = [...document.querySelectorAll('.llmbook-explorer')[i].querySelectorAll('b')]
                                             .map(x => x.textContent.trim()).find(t => t); return b || ''; }""", i)
                  or f"explorer {i}" for i in range(n_ex)]
        log(f"   {n_ex} explorer(s): {titles} (expected {CHAPTERS[chapter][1] if chapter in CHAPTERS else '?'})")
        for e in range(n_ex):
            controls = stable_controls(page, e)
            for c in controls:
                if STOP["now"] or past(args.stop_at):
                    break
                if c["kind"] == "unknown":
                    log(f"   [skip] explorer {e} control {c['name']}: unknown kind")
                    continue
                if c["kind"] in ("select", "buttons") and c["info"]["n"] < 2:
                    log(f"   [skip] explorer {e} control {c['name']}: one option only, nothing to move")
                    continue
                try:
                    bench_control(lab, chapter, e, titles[e], c, args, rows)
                except Exception as exc:  # one control failing must not lose the others' numbers
                    log(f"   !! {chapter} explorer {e} control {c['name']}: {type(exc).__name__}: {str(exc)[:400]}")
                    lab.wait_idle(timeout_s=harness.RENDER_TIMEOUT_S)
    except Exception as exc:  # one notebook failing must not lose the others' numbers
        log(f"   !! {chapter}: {type(exc).__name__}: {str(exc)[:600]}")
        try:
            lab.save_screenshot("FAILED")
        except Exception:
            pass
    finally:
        context.close()
        server.stop()


def bench_control(lab: harness.Lab, chapter: str, e: int, title: str, c: dict, args, rows: list[dict]) -> None:
    page = lab.page
    mover = Mover(lab, e, c["name"], c["kind"], c["info"])
    samples, outcomes, errors = [], {}, []
    total = args.warmup + args.repeats
    # an even number of alternating moves puts the control back; boxes are restored
    for i in range(total + (0 if mover.one_way else total % 2)):
        if STOP["now"] or past(args.stop_at):
            break
        mover.prepare()
        lab.wait_idle(timeout_s=harness.RENDER_TIMEOUT_S, settle_ms=200)
        page.evaluate("(e) => window.__llmbBench.arm(e)", e)
        mover.commit()
        r = wait_move(lab, args.settle_ms, args.move_timeout, args.nochange_s)
        page.evaluate("() => window.__llmbBench.disarm()")
        if args.warmup <= i < total:
            outcomes[r["outcome"]] = outcomes.get(r["outcome"], 0) + 1
            if r["outcome"] == "view":
                samples.append(r["ms"])
            if r.get("error"):
                errors.append(r["error"])
    mover.restore()
    lab.wait_idle(timeout_s=harness.RENDER_TIMEOUT_S, settle_ms=400)
    row = {"chapter": chapter, "explorer": e, "title": title, "control": c["name"], "kind": c["kind"],
           "display_only": c["name"] in DISPLAY_ONLY, "samples": samples, "outcomes": outcomes}
    rows.append(row)
    log(fmt_row(row) + (f"   errors: {sorted(set(errors))[:2]}" if errors else ""))


def stable_controls(page, e: int, timeout_s: float = 30) -> list[dict]:
    """The controls of explorer ``e`` once the list stops changing (views drawn in the browser
    build their controls after the widget is displayed)."""
    deadline = time.time() + timeout_s
    last = None
    while time.time() < deadline:
        now = page.evaluate(CONTROLS_JS, e)
        names = [(c["name"], c["kind"]) for c in now]
        if names and names == last:
            return now
        last = names
        page.wait_for_timeout(700)
    return page.evaluate(CONTROLS_JS, e)


def fmt_row(row: dict) -> str:
    s = row["samples"]
    stats = f"{len(s):3d} {pct(s, 50):8.0f} {pct(s, 90):8.0f} {max(s):8.0f}" if s else f"{0:3d} {'-':>8} {'-':>8} {'-':>8}"
    outc = ",".join(f"{k}:{v}" for k, v in sorted(row["outcomes"].items()))
    flag = "D" if row["display_only"] else " "
    return f"   {row['chapter'][:4]:4} {row['explorer']:2d} {row['control'][:14]:14} {row['kind']:8} {flag} {stats}  {outc}"


HEADER = "   ch   ex control        kind     D   n  p50(ms)  p90(ms)  max(ms)  outcomes"


def summary(rows: list[dict]) -> dict:
    all_ms = [x for r in rows for x in r["samples"]]
    disp = [x for r in rows if r["display_only"] for x in r["samples"]]
    out = {}
    if all_ms:
        out["widget_latency_p50_ms"] = (pct(all_ms, 50), quartiles(all_ms), len(all_ms))
        out["widget_latency_p90_ms"] = (pct(all_ms, 90), None, len(all_ms))
    if disp:
        out["widget_display_only_p50_ms"] = (pct(disp, 50), quartiles(disp), len(disp))
    return out


def record(summ: dict, machine_note: dict) -> None:
    """Merge the three metrics into benchmarks/results.json (the other benchmarks' entries stay)."""
    res = Results("bench_widgets")
    desc = {"widget_latency_p50_ms": "median time from a control's change to the updated picture, all explorers of the chapter notebooks (browser wall time)",
            "widget_latency_p90_ms": "90th percentile of the same samples",
            "widget_display_only_p50_ms": "median for controls that only redraw the same data (layer, head, scale, dims, merge step, token)"}
    for name, (value, spread, n) in summ.items():
        res.add(name, value, goal=GOALS[name], description=desc[name], unit="ms", repeats=n, reference=None,
                higher_is_better=False, digits=3)
        m = res.metrics[name]
        if spread is not None:
            m["spread"] = list(spread)
            m["spread_kind"] = "interquartile range of the samples"
            m["goal_holds_at_median"], m["goal_holds_pessimistic"] = goal_holds(GOALS[name], value, spread)
        m["clock"] = "browser wall time (performance.now)"
        m["threads"] = machine_note["kernel_threads"]
    report = json.loads(REPORT.read_text())
    report["metrics"].update(res.metrics)
    report.setdefault("benchmarks", {})["bench_widgets"] = {**{k: v for k, v in next(iter(res.metrics.values())).items()
                                                              if k in ("cpu", "torch", "date", "load_average_1min")},
                                                           "clock": "browser wall time (performance.now)",
                                                           "threads": machine_note["kernel_threads"],
                                                           "cores": os.cpu_count(), "python": sys.version.split()[0]}
    report["generated"] = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    REPORT.write_text(json.dumps(report, indent=2) + "\n")
    res.write()
    log(f"recorded into {REPORT}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--notebooks", nargs="+", default=list(CHAPTERS),
                    help=f"chapter ids ({' '.join(CHAPTERS)}) or notebook paths relative to the repo")
    ap.add_argument("--repeats", type=int, default=6, help="timed moves per control (>= 1; default 6)")
    ap.add_argument("--warmup", type=int, default=1, help="untimed moves per control first (default 1)")
    ap.add_argument("--settle-ms", type=float, default=400, help="a move is over when the view is quiet this long")
    ap.add_argument("--nochange-s", type=float, default=2.0, help="give up on a change after this long with the kernel idle")
    ap.add_argument("--move-timeout", type=float, default=120, help="seconds one move may take at most")
    ap.add_argument("--run-timeout", type=float, default=900, help="seconds Run All may take")
    ap.add_argument("--repo", type=Path, default=ROOT,
                    help="checkout whose notebooks are opened and whose lib/ the kernel imports (default this one)")
    ap.add_argument("--record", action="store_true", help="merge the metrics into benchmarks/results.json")
    ap.add_argument("--stop-at", type=lambda t: dt.datetime.combine(dt.date.today(), dt.time.fromisoformat(t)),
                    help="local time HH:MM: stop moving controls then, and start no notebook within 4 minutes of it")
    ap.add_argument("--json", type=Path, default=HERE / "results" / "widgets" / "samples.json",
                    help="where the raw samples go (rewritten after each notebook; a git-ignored folder by default, "
                         "below benchmarks/results/ so that make bench's clean-up of *.json there spares it)")
    args = ap.parse_args(argv)
    if args.repeats < 1 or args.warmup < 0:
        raise SystemExit(f"--repeats must be >= 1 and --warmup >= 0, got {args.repeats} and {args.warmup}")
    repo = args.repo.resolve()
    todo = []
    for nb in args.notebooks:
        if nb in CHAPTERS:
            todo.append((nb, CHAPTERS[nb][0]))
        elif (repo / nb).exists():
            todo.append((Path(nb).stem, nb))
        else:
            raise SystemExit(f"--notebooks: {nb!r} is neither a chapter id ({', '.join(CHAPTERS)}) nor a notebook under {repo}")
    if not os.path.exists(harness.CHROMIUM):
        raise SystemExit(f"Chromium not found at {harness.CHROMIUM}: apt-get install chromium, or set LLMBOOK_CHROMIUM")
    # The harness serves its REPO; point it (and the kernel's imports) at the checkout measured.
    harness.REPO = repo
    os.environ["PYTHONPATH"] = os.pathsep.join([str(repo / "lib")] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
    for var, val in (("HF_HUB_OFFLINE", "1"), ("TRANSFORMERS_OFFLINE", "1"), ("HF_DATASETS_OFFLINE", "1"),
                     ("TOKENIZERS_PARALLELISM", "false")):
        os.environ.setdefault(var, val)
    kernel_threads = os.environ.get("OMP_NUM_THREADS", "(unset)")
    commit = os.popen(f"git -C {repo} rev-parse --short HEAD 2>/dev/null").read().strip()
    dirty = os.popen(f"git -C {repo} status --porcelain --untracked-files=no 2>/dev/null").read().strip()
    log(f"# bench_widgets: {dt.datetime.now().strftime('%Y-%m-%d %H:%M:%S')} local; repo {repo} at {commit}"
        f"{' (+ uncommitted changes: ' + ' '.join(l.split()[-1] for l in dirty.splitlines()) + ')' if dirty else ''}")
    log(f"# {os.cpu_count()} cores, load average {load()} (1/5/15 min); kernel OMP_NUM_THREADS={kernel_threads}; "
        f"nice {os.nice(0)}; Chromium {harness.CHROMIUM}")
    log(f"# {args.warmup} untimed + {args.repeats} timed moves per control; settle {args.settle_ms:.0f} ms; "
        f"display-only controls (D): {sorted(DISPLAY_ONLY)}")
    log(HEADER)
    from playwright.sync_api import sync_playwright

    import signal

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)

    rows: list[dict] = []
    t_start = time.time()
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=harness.CHROMIUM, args=harness.CHROMIUM_ARGS, headless=True)
        try:
            for chapter, path in todo:
                if STOP["now"]:
                    break
                if past(args.stop_at, margin_s=240):
                    log(f"\n# --stop-at {args.stop_at:%H:%M}: not starting {chapter} (less than 4 minutes left)")
                    continue
                bench_notebook(browser, chapter, path, args, rows)
                if args.json:
                    args.json.parent.mkdir(parents=True, exist_ok=True)
                    args.json.write_text(json.dumps({"repo": str(repo), "commit": commit, "rows": rows}, indent=1) + "\n")
        finally:
            browser.close()
    log(f"\n# all notebooks done in {time.time() - t_start:.0f} s; load average {load()}")
    log("\n# summary per explorer (all its controls pooled)")
    log("   ch   ex title                                               n  p50(ms)  p90(ms)")
    for key in dict.fromkeys((r["chapter"], r["explorer"]) for r in rows):
        rs = [r for r in rows if (r["chapter"], r["explorer"]) == key]
        s = [x for r in rs for x in r["samples"]]
        stats = f"{len(s):3d} {pct(s, 50):8.0f} {pct(s, 90):8.0f}" if s else f"{0:3d} {'-':>8} {'-':>8}"
        log(f"   {key[0][:4]:4} {key[1]:2d} {rs[0]['title'][:50]:50} {stats}")
    bad = {k: sum(r["outcomes"].get(k, 0) for r in rows) for k in ("error", "nochange", "same", "timeout")}
    log(f"\n# moves without a new picture (not in the percentiles): {bad}")
    summ = summary(rows)
    for name, (value, spread, n) in summ.items():
        log(f"{name}={value:.0f}")
    for name, (value, spread, n) in summ.items():
        held = "holds" if value <= float(GOALS[name].split()[1]) else "MISSES"
        log(f"#   {name}: {value:.0f} ms over n={n} moves; goal {GOALS[name]}: {held}")
    if args.record and summ:
        record(summ, {"kernel_threads": kernel_threads})
    return 0 if summ else 1


if __name__ == "__main__":
    sys.exit(main())
