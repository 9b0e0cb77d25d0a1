"""The browser-side view shared by the explorers: one anywidget, one JavaScript module.

Python computes the data of a picture once and sends it as the widget's ``spec`` (JSON:
the view ``kind``, arrays as nested lists rounded to 4 significant digits, labels,
titles). ``render.js``, shipped inside this package (no CDN: the book works offline),
draws it as SVG and handles the display-only controls itself: layer, head, softmax
scale and causal view of an attention map, the dimensions of a positional encoding, the
merge step of BPE. Those selections are traits of the widget (``layer``, ``head``,
``scale``, ``causal``, ``dims``, ``step``), synced back, so Python sees what the reader
chose; moving them never waits for the kernel.

- ``FrontView``: the widget (``spec`` + the selection traits + ``stale``, set while the
  explorer shows an error, which greys the picture out).
- ``FrontControl``: a stand-in for an ipywidgets control whose value lives in one trait
  of a ``FrontView`` (``explorer.controls["layer"].value = "layer 3"`` keeps working).
- ``round_sig(array)``: nested lists rounded to a few significant digits (JSON-able).
- ``bars_spec(labels, frames)``: a bar chart per frame (a distribution per step, say),
  the frame chosen in the browser with the ``step`` slider, on one value axis.
- ``bar_panel(labels, values, ...)``, ``panels_spec(panels, ...)``: a ``panels`` view, small charts
  (vertical or horizontal bars, points) and text side by side in rows of ``columns``, optionally
  cut to the top k bars by a browser slider, and a table of text.
- ``cjk_subset(chars)``: the book's CJK font cut down to ``chars`` (base64), which ``FrontView``
  sends with a picture that holds Chinese, so the browser draws it without a CJK font of its own.
- ``ResultMemo``: a small least-recently-used store, so an explorer computes the data for one
  input once (a model's forward pass per prompt, say) and reuses it when the reader comes back.
- ``RENDER_JS``: the module's source, also inlined by ``scripts/build_html.py``.

Leaves out: drawing in Python (the matplotlib figures of each explorer stay the static
pictures and the fallback; see ``Explorer.show_static``).
"""

from __future__ import annotations

import base64
import functools
import io
import math
import re
from collections import OrderedDict
from pathlib import Path
from typing import Any, Callable, Hashable, Optional, Sequence

import anywidget
import numpy as np
import traitlets

__all__ = ["FrontView", "FrontControl", "round_sig", "bars_spec", "bar_panel", "panels_spec", "cjk_subset", "ResultMemo",
           "RENDER_JS", "KINDS"]

RENDER_JS = (Path(__file__).parent / "render.js").read_text(encoding="utf-8")
KINDS = ("attention", "model_view", "positional", "bpe", "bars", "panels")


def round_sig(values, digits: int = 4) -> list:
    """``values`` (array-like of floats) as nested lists, each rounded to ``digits`` significant digits.

    NaN becomes None (JSON has no NaN). Short decimal forms keep the JSON small.

    >>> round_sig([[0.123456, 1e-7], [float("nan"), 2.0]])
    [[0.1235, 1e-07], [None, 2.0]]
    """
    if isinstance(digits, bool) or not isinstance(digits, int) or digits < 1:
        raise ValueError(f"digits must be a positive int, got {digits!r}")
    a = np.asarray(values, dtype=np.float64)
    if a.ndim == 0:
        raise ValueError("values must be an array with at least one dimension")
    flat = [None if math.isnan(v) else float(f"{v:.{digits}g}") for v in a.ravel().tolist()]
    if any(v is not None and math.isinf(v) for v in flat):
        raise ValueError("values contain infinities, which JSON cannot carry")
    out: Any = flat
    for n in reversed(a.shape[1:]):
        out = [out[i : i + n] for i in range(0, len(out), n)]
    return out


def bars_spec(labels: Sequence[str], frames: Sequence[Sequence[float]], frame_labels: Optional[Sequence[str]] = None,
              title: str = "", ylabel: str = "", colors: Optional[Sequence[Sequence[int]]] = None,
              step_label: str = "step") -> dict:
    """The browser view's data for bar charts: one bar per label, one chart per frame.

    ``colors[f][i]`` (optional) picks the palette colour of bar i in frame f (e.g. 0 kept,
    7 filtered out).

    >>> bars_spec(["a", "b"], [[0.25, 0.75]], title="p")["frames"]
    [{'label': '', 'values': [0.25, 0.75]}]
    """
    labels = [str(x) for x in labels]
    if not labels:
        raise ValueError("labels must name at least one bar")
    if not frames:
        raise ValueError("frames must hold at least one frame of values")
    if frame_labels is not None and len(frame_labels) != len(frames):
        raise ValueError(f"frame_labels must have one label per frame ({len(frames)}), got {len(frame_labels)}")
    if colors is not None and len(colors) != len(frames):
        raise ValueError(f"colors must have one list per frame ({len(frames)}), got {len(colors)}")
    out = []
    for f, values in enumerate(frames):
        vals = round_sig(values)
        if len(vals) != len(labels):
            raise ValueError(f"frames[{f}] has {len(vals)} values for {len(labels)} labels")
        if any(v is None for v in vals):
            raise ValueError(f"frames[{f}] contains NaN")
        frame = {"label": "" if frame_labels is None else str(frame_labels[f]), "values": vals}
        if colors is not None:
            if len(colors[f]) != len(labels):
                raise ValueError(f"colors[{f}] has {len(colors[f])} entries for {len(labels)} labels")
            frame["colors"] = [int(c) for c in colors[f]]
        out.append(frame)
    return {"kind": "bars", "title": title, "ylabel": ylabel, "labels": labels, "frames": out, "step_label": step_label}


def bar_panel(labels: Sequence[str], values: Sequence[float], title: str = "", orient: str = "v", color: int = 0,
              xlabel: str = "", ylabel: str = "", vmax: Optional[float] = None, annotate: bool = False,
              height: Optional[int] = None, width: int = 300) -> dict:
    """One bar chart of a ``panels`` view: a bar per label, ``orient`` "v" (a ``bars`` panel,
    labels below) or "h" (an ``hbars`` panel, labels at the left, the first on top); ``vmax``
    fixes the value axis (else the largest value shown sets it); ``annotate`` writes each value
    by its bar; ``height`` (px) of the plot area of a "v" panel; ``width`` (px) of the plot area
    (the panel takes less in a narrow window).

    >>> p = bar_panel(["a", "b"], [0.75, 0.25], "p", vmax=1)
    >>> p["type"], p["values"]
    ('bars', [0.75, 0.25])
    """
    labels = [str(x) for x in labels]
    if not labels:
        raise ValueError("labels must name at least one bar")
    vals = round_sig(values)
    if len(vals) != len(labels):
        raise ValueError(f"values has {len(vals)} entries for {len(labels)} labels")
    if any(v is None for v in vals):
        raise ValueError("values contain NaN")
    if orient not in ("v", "h"):
        raise ValueError(f"orient must be 'v' or 'h', got {orient!r}")
    if isinstance(color, bool) or not isinstance(color, int) or color < 0:
        raise ValueError(f"color must be a palette index (int >= 0), got {color!r}")
    panel = {"type": "bars" if orient == "v" else "hbars", "title": str(title), "labels": labels, "values": vals,
             "color": color, "xlabel": str(xlabel), "ylabel": str(ylabel), "annotate": bool(annotate)}
    if height is not None:
        if isinstance(height, bool) or not isinstance(height, int) or height < 40:
            raise ValueError(f"height must be an int >= 40 (px), got {height!r}")
        panel["height"] = height
    if isinstance(width, bool) or not isinstance(width, int) or width < 80:
        raise ValueError(f"width must be an int >= 80 (px), got {width!r}")
    panel["width"] = width
    if vmax is not None:
        if not (isinstance(vmax, (int, float)) and math.isfinite(vmax) and vmax > 0):
            raise ValueError(f"vmax must be a positive number, got {vmax!r}")
        panel["vmax"] = float(vmax)
    return panel


def panels_spec(panels: Sequence[dict], title: str = "", columns: int = 2, top_k: Optional[dict] = None,
                table: Optional[dict] = None, table_first: bool = False) -> dict:
    """The browser view's data for a ``panels`` view: ``panels`` (``bar_panel`` dicts or other
    panel dicts, see render.js) in rows of ``columns`` (a narrow window wraps a row).

    ``top_k`` (``{"name", "label", "min", "max"}``): a slider drawn in the browser (trait
    ``step``) that keeps the first k bars of every bar panel, so the panels must list their bars
    largest first. ``table`` (``{"caption", "header", "rows"}``): text shown below the charts (above
    them with ``table_first``, next to the controls that change it).

    >>> spec = panels_spec([bar_panel(["a"], [1.0])], title="t")
    >>> spec["kind"], [p["type"] for p in spec["panels"]]
    ('panels', ['bars'])
    """
    panels = list(panels)
    if not panels:
        raise ValueError("panels must hold at least one panel")
    if not all(isinstance(p, dict) and isinstance(p.get("type"), str) for p in panels):
        raise ValueError("every panel must be a dict with a 'type' (a bar_panel, say)")
    if isinstance(columns, bool) or not isinstance(columns, int) or columns < 1:
        raise ValueError(f"columns must be an int >= 1, got {columns!r}")
    spec = {"kind": "panels", "title": str(title), "columns": columns, "panels": panels}
    if top_k is not None:
        lo, hi = top_k.get("min", 1), top_k.get("max")
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (lo, hi)) or not 1 <= lo <= hi:
            raise ValueError(f"top_k needs ints 1 <= min <= max, got min={lo!r}, max={hi!r}")
        spec["top_k"] = {"name": str(top_k.get("name", "top_k")), "label": str(top_k.get("label", "top k")), "min": lo, "max": hi}
    if table is not None:
        header = [str(h) for h in table.get("header", [])]
        rows = [[str(c) for c in row] for row in table.get("rows", [])]
        if not header or any(len(r) != len(header) for r in rows):
            raise ValueError(f"table needs a header and rows of {len(header)} cells each")
        block = {"type": "table", "caption": str(table.get("caption", "")), "header": header, "rows": rows}
        spec["panels"] = [block] + panels if table_first else panels + [block]
    return spec


_CJK = re.compile(r"[\u2e80-\u9fff\uf900-\ufaff\uff00-\uffef]")  # CJK, Kana, Hangul, full-width forms


def _cjk_chars(spec, found: set) -> set:
    """The CJK characters in the strings of ``spec`` (lists of numbers are skipped whole)."""
    if isinstance(spec, str):
        found.update(_CJK.findall(spec))
    elif isinstance(spec, dict):
        for v in spec.values():
            _cjk_chars(v, found)
    elif isinstance(spec, (list, tuple)) and spec and not isinstance(spec[0], (int, float)):
        for v in spec:
            _cjk_chars(v, found)
    return found


@functools.lru_cache(maxsize=32)
def cjk_subset(chars: str) -> str:
    """The book's CJK font (Noto Sans CJK SC, from ``mplfonts``) cut down to ``chars``, as base64
    OpenType; "" when the font is not installed or ``chars`` is empty.

    The browser draws a picture's Chinese with it (``@font-face`` from these bytes), so a
    machine without a CJK font shows characters, not boxes. A few hundred characters are
    tens of kilobytes; the whole font would be 16 MB.
    """
    if not isinstance(chars, str):
        raise TypeError(f"chars must be a str, got {type(chars).__name__}")
    from ..style import cjk_font_path

    path = cjk_font_path()
    if not chars or path is None:
        return ""
    from fontTools import subset

    opts = subset.Options()
    opts.layout_features, opts.name_IDs, opts.hinting, opts.desubroutinize = [], [], False, True
    font = subset.load_font(path, opts, lazy=True)
    sub = subset.Subsetter(opts)
    sub.populate(text=chars)
    sub.subset(font)
    buf = io.BytesIO()
    font.save(buf)
    return base64.b64encode(buf.getvalue()).decode("ascii")


class ResultMemo:
    """A small least-recently-used store: ``get(key, compute)`` returns the kept value for
    ``key`` or calls ``compute()`` and keeps its result (at most ``size`` entries).

    ``hits`` and ``misses`` count the look-ups (the tests read them).

    >>> c = ResultMemo(2); c.get("a", lambda: 1), c.get("a", lambda: 2), (c.hits, c.misses)
    (1, 1, (1, 1))
    """

    def __init__(self, size: int = 64):
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"size must be an int >= 1, got {size!r}")
        self.size, self.hits, self.misses = size, 0, 0
        self._items: OrderedDict = OrderedDict()

    def get(self, key: Hashable, compute: Callable[[], object]):
        if key in self._items:
            self.hits += 1
            self._items.move_to_end(key)
            return self._items[key]
        self.misses += 1
        value = compute()  # an exception keeps nothing
        self._items[key] = value
        if len(self._items) > self.size:
            self._items.popitem(last=False)
        return value

    def __len__(self) -> int:
        return len(self._items)

class FrontView(anywidget.AnyWidget):
    """A picture drawn in the browser by ``render.js`` from ``spec``; see the module docstring."""

    _esm = RENDER_JS
    spec = traitlets.Dict().tag(sync=True)
    # display-only selection, changed by the browser (and readable/settable from Python)
    layer = traitlets.Int(0).tag(sync=True)
    head = traitlets.Int(-1).tag(sync=True)  # -1: all heads
    scale = traitlets.Float(1.0).tag(sync=True)
    causal = traitlets.Bool(False).tag(sync=True)
    dims = traitlets.Unicode("").tag(sync=True)
    step = traitlets.Int(0).tag(sync=True)
    stale = traitlets.Bool(False).tag(sync=True)  # True while the explorer shows an error
    cjk_font = traitlets.Unicode("").tag(sync=True)  # cjk_subset of the picture's Chinese, if it has any

    @traitlets.observe("spec")
    def _send_cjk_font(self, change) -> None:
        chars = "".join(sorted(_cjk_chars(change["new"], set())))
        if chars:
            self.cjk_font = cjk_subset(chars)

    @traitlets.validate("spec")
    def _check_spec(self, proposal):
        spec = proposal["value"]
        if spec and spec.get("kind") not in KINDS:
            raise traitlets.TraitError(f"spec['kind'] must be one of {KINDS}, got {spec.get('kind')!r}")
        return spec

    @traitlets.validate("scale")
    def _check_scale(self, proposal):
        v = proposal["value"]
        if not (math.isfinite(v) and v > 0):
            raise traitlets.TraitError(f"scale must be a positive number, got {v!r}")
        return v


class FrontControl:
    """An explorer control whose value is one trait of a :class:`FrontView`.

    ``options`` (labels) with ``to_trait``/``from_trait`` converting between a label
    and the trait's value; without them the trait's value is the control's value.
    Setting ``value`` checks it (against ``options``, and with ``check(value)``, which
    raises), so a bad value raises here, naming the control.
    """

    def __init__(self, view: FrontView, trait: str, name: str, options: Optional[Sequence[str]] = None,
                 to_trait: Optional[Callable[[Any], Any]] = None, from_trait: Optional[Callable[[Any], Any]] = None,
                 check: Optional[Callable[[Any], Any]] = None):
        if not view.has_trait(trait):
            raise ValueError(f"trait must be a trait of FrontView, got {trait!r}")
        self.view, self.trait, self.name = view, trait, name
        self.options = list(options) if options is not None else None
        self._to = to_trait or (lambda v: v)
        self._from = from_trait or (lambda v: v)
        self._check = check

    @property
    def value(self):
        return self._from(getattr(self.view, self.trait))

    @value.setter
    def value(self, v) -> None:
        if self.options is not None and v not in self.options:
            raise ValueError(f"{self.name} must be one of {self.options[:6]}{' ...' if len(self.options) > 6 else ''}, got {v!r}")
        if self._check is not None:
            self._check(v)
        setattr(self.view, self.trait, self._to(v))

    def __repr__(self) -> str:
        return f"FrontControl({self.name}={self.value!r}, drawn in the browser)"
