"""The whole-model attention view: every layer x head at once, as bertviz's "model view".

One attention head is one (Tq, Tk) matrix; a model has n_layer x n_head of them (MiniLM
6 x 12 = 72, SmolLM2-135M 30 x 9 = 270). Drawn as a grid of small thumbnails on one
colour scale, the families of heads stand out at a glance: heads that look at the
previous token (a bright sub-diagonal), at the first token (a bright first column), at
themselves (the diagonal), or spread evenly. Selecting a layer and head opens that
thumbnail large, with token labels, as chapter 3's explorer draws one head.

- ``model_view_figure(attentions, tokens, layer, head)``: the static picture (grid with
  the selected thumbnail framed, plus the zoom panel).
- ``model_view(attentions, tokens) -> Explorer``: the same picture drawn in the browser
  (``llmbook.viz.frontend``, data sent once) with layer and head drop-downs (CSS classes
  ``llmbook-ctl-layer`` / ``llmbook-ctl-head``) and click-to-select thumbnails, no
  kernel round trip; ``show_static()`` draws the matplotlib picture for readers without
  a kernel.

Input format, shared with ``llmbook.viz.attention``: a list over layers of tensors
(H, Tq, Tk), batch removed (a leading batch dimension of 1 is tolerated), as
``Bert(..., return_attention=True).attentions`` and ``Llama(..., return_attention=True)``
give them after ``[a[0] for a in ...]``. Leaves out bertviz's "neuron view" (queries and
keys themselves) and its JavaScript: the browser view is the book's own ``render.js``,
shipped in the package, so the view works offline.
"""

from __future__ import annotations

import math
from typing import Optional, Sequence

import ipywidgets as widgets
import numpy as np
import torch
import matplotlib.pyplot as plt
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from .attention import _check_tokens, _draw, _validate_attentions, _visible
from .frontend import FrontControl, FrontView, round_sig
from .widget import Explorer

__all__ = ["model_view_figure", "model_view"]


def _stack(attentions, tokens, query_tokens) -> np.ndarray:
    """Validate and stack to an array (L, H, Tq, Tk) in float64 on the CPU."""
    if tokens is None:
        raise ValueError("tokens must be given: one label per key (column) of the attention maps")
    atts = _validate_attentions(attentions, tokens, query_tokens)
    heads = {a.shape[0] for a in atts}
    if len(heads) != 1:
        raise ValueError(f"attentions must have the same number of heads in every layer, got {sorted(heads)}")
    if atts[0].shape[1] != atts[0].shape[2] and query_tokens is None:
        raise ValueError(f"attentions are {atts[0].shape[1]} x {atts[0].shape[2]}: give query_tokens for cross-attention")
    A = torch.stack(atts).numpy()  # (L, H, Tq, Tk)
    if not np.isfinite(A).all():
        raise ValueError("attentions contain NaN or infinite values")
    if (A < 0).any():
        raise ValueError("attentions must be non-negative (they are attention probabilities)")
    return A


def _mosaic(A: np.ndarray) -> np.ndarray:
    """Tile (L, H, Tq, Tk) into one (L*(Tq+1)-1, H*(Tk+1)-1) array, thumbnails separated by NaN.

    >>> _mosaic(np.ones((2, 2, 1, 1)))
    array([[ 1., nan,  1.],
           [nan, nan, nan],
           [ 1., nan,  1.]])
    """
    L, H, Tq, Tk = A.shape
    out = np.full((L * (Tq + 1) - 1, H * (Tk + 1) - 1), np.nan)
    for li in range(L):
        for h in range(H):
            out[li * (Tq + 1): li * (Tq + 1) + Tq, h * (Tk + 1): h * (Tk + 1) + Tk] = A[li, h]
    return out


def _index(value, name: str, n: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if not 0 <= int(value) < n:
        raise ValueError(f"{name} must be in 0..{n - 1} (the model has {n} {what}), got {value}")
    return int(value)


def _names(layer_names, L: int) -> list[str]:
    if layer_names is None:
        return [f"layer {i}" for i in range(L)]
    if isinstance(layer_names, str) or not isinstance(layer_names, Sequence):
        raise TypeError(f"layer_names must be a list of strings, got {type(layer_names).__name__}")
    names = [str(n) for n in layer_names]
    if len(names) != L or len(set(names)) != L:
        raise ValueError(f"layer_names must be {L} distinct names (one per layer), got {len(names)}")
    return names


def model_view_figure(attentions, tokens, layer: int = 0, head: int = 0, query_tokens=None,
                      layer_names: Optional[Sequence[str]] = None, title: Optional[str] = None) -> Figure:
    """Every layer x head as a thumbnail, the selected one framed and drawn large beside it.

    ``attentions``: list over layers of (H, Tq, Tk); ``tokens`` label the keys,
    ``query_tokens`` the queries (default ``tokens``). All thumbnails share one colour
    scale, 0 to the largest weight anywhere in the model, so a flat head looks flat;
    rows are layers (labelled on the left), columns heads (labelled on top). The zoom
    panel shows head ``head`` of layer ``layer`` with token labels, on its own scale.

    >>> atts = [torch.rand(3, 4, 4).softmax(-1) for _ in range(2)]
    >>> fig = model_view_figure(atts, list("abcd"), layer=1, head=2)
    >>> len([ax for ax in fig.axes if ax.images])  # the grid (one mosaic image) + the zoom panel
    2
    >>> plt.close(fig)
    """
    A = _stack(attentions, tokens, query_tokens)
    L, H, Tq, Tk = A.shape
    layer = _index(layer, "layer", L, "layers")
    head = _index(head, "head", H, "heads per layer")
    names = _names(layer_names, L)
    keys = _check_tokens(tokens, "tokens", Tk, "keys (columns)")
    queries = keys if query_tokens is None else _check_tokens(query_tokens, "query_tokens", Tq, "queries (rows)")
    if title is not None and not isinstance(title, str):
        raise TypeError(f"title must be a str, got {type(title).__name__}")

    # Thumbnail size: the grid fits in about 10 inches along its longer side.
    cell = max(0.3, min(0.75, 10.0 / max(L, H)))
    grid_w, grid_h = cell * H + 1.4, cell * L + 1.0
    zoom = min(7.0, 3.5 + 0.12 * max(Tq, Tk))
    side_by_side = L > H  # tall grids (many layers) put the zoom to the right, wide ones below
    if side_by_side:
        fig = plt.figure(figsize=(grid_w + zoom + 1.2, max(grid_h, zoom)), layout="constrained")
        sub_grid, sub_zoom = fig.subfigures(1, 2, width_ratios=[grid_w, zoom + 1.2])
    else:
        fig = plt.figure(figsize=(max(grid_w, zoom + 1.2), grid_h + zoom), layout="constrained")
        sub_grid, sub_zoom = fig.subfigures(2, 1, height_ratios=[grid_h, zoom])

    # The grid is ONE image: the thumbnails tiled into a mosaic with a one-pixel gap (NaN,
    # drawn white). One imshow instead of L x H axes keeps a 270-head model fast to draw.
    vmax = max(1e-12, float(A.max()))
    mosaic = _mosaic(A)
    ax = sub_grid.subplots()
    cmap = plt.get_cmap("viridis").with_extremes(bad="white")
    im = ax.imshow(mosaic, cmap=cmap, vmin=0.0, vmax=vmax, aspect="auto", interpolation="nearest")
    ax.grid(False)
    for spine in ax.spines.values():
        spine.set_visible(False)
    ax.set_xticks([h * (Tk + 1) + (Tk - 1) / 2 for h in range(H)])
    ax.set_xticklabels([str(h) for h in range(H)], fontsize=8)
    ax.xaxis.tick_top()
    ax.set_yticks([li * (Tq + 1) + (Tq - 1) / 2 for li in range(L)])
    ax.set_yticklabels(names, fontsize=8 if L <= 12 else 6)
    ax.tick_params(length=0)
    ax.set_xlabel("head")
    ax.add_patch(Rectangle((head * (Tk + 1) - 1.0, layer * (Tq + 1) - 1.0), Tk + 1, Tq + 1, fill=False,
                           edgecolor="#D55E00", linewidth=2.5, clip_on=False))
    sub_grid.colorbar(im, ax=ax, shrink=0.6, label="attention weight (one scale, whole model)")
    sub_grid.suptitle(title or f"All {L} layers x {H} heads (selected: {names[layer]}, head {head})", fontsize=10)

    ax = sub_zoom.subplots()
    zim = _draw(ax, A[layer, head], keys, queries, f"{names[layer]}, head {head}", annotate=True)
    sub_zoom.colorbar(zim, ax=ax, shrink=0.8, label="attention weight")
    return fig


def model_view(attentions, tokens, query_tokens=None, layer_names: Optional[Sequence[str]] = None,
               layer: int = 0, head: int = 0, title: str = "Model view: every layer and head") -> Explorer:
    """The model view as a widget: pick a layer and a head to open that thumbnail large.

    Same inputs as :func:`model_view_figure`; ``layer`` and ``head`` choose the starting
    selection. Returns an :class:`~llmbook.viz.widget.Explorer` (controls ``layer``,
    ``head``); call ``.show_static()`` for the static picture of the current selection.
    """
    A = _stack(attentions, tokens, query_tokens)  # validate once, before any widget exists
    L, H = A.shape[:2]
    names = _names(layer_names, L)
    layer = _index(layer, "layer", L, "layers")
    head = _index(head, "head", H, "heads per layer")
    atts = [torch.from_numpy(a) for a in A]

    def render(layer: str, head: str) -> Figure:
        if layer not in names:
            raise ValueError(f"layer must be one of {names[0]!r}..{names[-1]!r}, got {layer!r}")
        h = head.split()[-1] if isinstance(head, str) else head
        if not (isinstance(h, str) and h.isdigit()):
            raise ValueError(f"head must be 'head <number>', got {head!r}")
        return model_view_figure(atts, tokens, names.index(layer), _index(int(h), "head", H, "heads per layer"),
                                 query_tokens=query_tokens, layer_names=names)

    keys = [_visible(t) for t in tokens]
    spec = {"kind": "model_view", "title": title, "layer_names": names, "keys": keys,
            "queries": keys if query_tokens is None else [_visible(t) for t in query_tokens], "weights": round_sig(A)}
    front = FrontView(layer=layer, head=head)
    head_names = [f"head {h}" for h in range(H)]
    front_controls = {
        "layer": FrontControl(front, "layer", "layer", names, names.index, lambda i: names[min(max(i, 0), L - 1)]),
        "head": FrontControl(front, "head", "head", head_names, head_names.index, lambda i: head_names[min(max(i, 0), H - 1)]),
    }
    return Explorer(render, {}, title=title, front=front, spec=lambda: spec, front_controls=front_controls,
                    summary=f"{title}: interactive (layer, head; {L} layers x {H} heads); run the notebook to use it.")
