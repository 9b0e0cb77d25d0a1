"""Attention maps: static heatmaps and the attention explorer used from chapter 3 on.

Everything here takes data, not models: attention weights as tensors (or arrays) and
the tokens they refer to. A model that wants to be explored returns its weights with
``return_attention=True`` and the caller passes them in, or passes a
``recompute(text) -> (attentions, tokens)`` function so that the reader can type text.

- ``attention_heatmap(weights (Tq, Tk), tokens)``: one head.
- ``attention_grid(weights (H, Tq, Tk), tokens)``: every head of one layer.
- ``rescale_attention(weights, scale, causal)``: the pure transformation behind the
  explorer's "scale" slider and "causal" checkbox: take the log-weights (the scores up
  to a per-row constant), multiply by ``scale`` (an inverse temperature), optionally
  forbid keys to the right of the query, and re-apply the softmax.
- ``attention_explorer(...) -> Explorer``: text, layer, head, causal, scale controls.

Long inputs stay readable: beyond ``MAX_LABELS`` tokens only every n-th tick is labelled.
"""

from __future__ import annotations

import math
from typing import Callable, Optional, Sequence

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.figure import Figure

from ..attention import causal_mask
from .widget import Explorer

__all__ = ["attention_heatmap", "attention_grid", "rescale_attention", "attention_explorer", "MAX_LABELS", "GRID_LABELS"]

MAX_LABELS = 60  # beyond this many tokens, label only every n-th tick
ALL_HEADS = "all heads"


def _as_array(weights, name: str, ndim: int) -> np.ndarray:
    if isinstance(weights, torch.Tensor):
        weights = weights.detach().to("cpu", torch.float64).numpy()
    if not isinstance(weights, np.ndarray):
        raise TypeError(f"{name} must be a torch.Tensor or numpy array, got {type(weights).__name__}")
    if weights.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimensions, got shape {tuple(weights.shape)}")
    if weights.size == 0:
        raise ValueError(f"{name} is empty (shape {tuple(weights.shape)}): there is nothing to draw")
    return weights.astype(np.float64)


def _check_tokens(tokens, name: str, n: int, axis: str) -> list[str]:
    if isinstance(tokens, str) or not isinstance(tokens, Sequence):
        raise TypeError(f"{name} must be a list of strings, got {type(tokens).__name__}")
    tokens = [str(t) for t in tokens]
    if len(tokens) != n:
        raise ValueError(f"{name} has {len(tokens)} tokens but the weights have {n} {axis}")
    return tokens


_SHOW = {" ": "\u2423", "\n": "\u21b5", "\t": "\u21e5"}  # space, newline, tab as visible marks


def _visible(token: str) -> str:
    """A token label a reader can see: a lone space, newline or tab becomes a mark (``␣``, ``↵``, ``⇥``)."""
    return _SHOW.get(token, token.replace("\n", "\u21b5")) if token.strip() == "" or "\n" in token else token


def _label_ticks(ax, n: int, tokens: list[str], axis: str, max_labels: int = MAX_LABELS) -> None:
    step = max(1, math.ceil(n / max_labels))
    pos = list(range(0, n, step))
    labels = [_visible(tokens[i]) for i in pos]
    if axis == "x":
        ax.set_xticks(pos)
        ax.set_xticklabels(labels, rotation=90 if n > 8 or max(map(len, labels), default=0) > 3 else 0, fontsize=9 if n <= 30 else 7)
    else:
        ax.set_yticks(pos)
        ax.set_yticklabels(labels, fontsize=9 if n <= 30 else 7)


def _draw(ax, w: np.ndarray, keys: list[str], queries: list[str], title: Optional[str], annotate: bool,
          vmax: Optional[float] = None, max_labels: int = MAX_LABELS) -> object:
    vmax = max(1e-12, float(np.nanmax(w))) if vmax is None else vmax
    im = ax.imshow(w, cmap="viridis", vmin=0.0, vmax=vmax, aspect="auto", interpolation="nearest")
    ax.grid(False)
    _label_ticks(ax, w.shape[1], keys, "x", max_labels)
    _label_ticks(ax, w.shape[0], queries, "y", max_labels)
    ax.set_xlabel("key (attended to)")
    ax.set_ylabel("query (attending)")
    if title:
        ax.set_title(title)
    if annotate and max(w.shape) <= 10:
        for i in range(w.shape[0]):
            for j in range(w.shape[1]):
                ax.text(j, i, f"{w[i, j]:.2f}", ha="center", va="center", fontsize=8,
                        color="white" if w[i, j] < 0.6 * w.max() else "black")
    return im


def attention_heatmap(weights, tokens, query_tokens=None, ax=None, title: Optional[str] = None) -> Figure:
    """Heatmap of one head's attention weights (Tq, Tk): row = query, column = key.

    ``tokens`` label the keys; ``query_tokens`` the queries (default: ``tokens``, i.e.
    self-attention). Returns the Figure (the one holding ``ax`` if given).

    >>> fig = attention_heatmap(torch.eye(2), ["a", "b"]); len(fig.axes)
    2
    >>> plt.close(fig)
    """
    w = _as_array(weights, "weights", 2)
    keys = _check_tokens(tokens, "tokens", w.shape[1], "keys (columns)")
    queries = keys if query_tokens is None else _check_tokens(query_tokens, "query_tokens", w.shape[0], "queries (rows)")
    if query_tokens is None and w.shape[0] != w.shape[1]:
        raise ValueError(f"weights are {w.shape[0]} x {w.shape[1]}: give query_tokens for cross-attention")
    if ax is None:
        size = min(9.0, 3.0 + 0.3 * max(w.shape))
        fig, ax = plt.subplots(figsize=(size + 1.0, size))
    else:
        fig = ax.figure
    im = _draw(ax, w, keys, queries, title, annotate=True)
    fig.colorbar(im, ax=ax, shrink=0.8, label="attention weight")
    return fig


GRID_LABELS = 12  # at most this many token labels per axis in a small-multiples grid


def attention_grid(weights, tokens, query_tokens=None, title: Optional[str] = None, ncols: Optional[int] = None,
                   shared_scale: bool = True) -> Figure:
    """All heads of one layer side by side; ``weights`` has shape (H, Tq, Tk).

    Every panel uses one colour scale, 0 to the largest weight of any head, with one
    colour bar, so heads can be compared (a flat head looks flat). ``shared_scale=False``
    scales each head to its own maximum instead. Token labels sit on the outer panels
    (keys under the bottom row, queries left of the first column); above
    ``GRID_LABELS`` tokens only every n-th is labelled.

    >>> fig = attention_grid(torch.rand(3, 2, 2).softmax(-1), ["a", "b"]); len(fig.axes)  # 3 heads + colour bar
    4
    >>> plt.close(fig)
    """
    w = _as_array(weights, "weights", 3)
    H, Tq, Tk = w.shape
    keys = _check_tokens(tokens, "tokens", Tk, "keys (columns)")
    queries = keys if query_tokens is None else _check_tokens(query_tokens, "query_tokens", Tq, "queries (rows)")
    if query_tokens is None and Tq != Tk:
        raise ValueError(f"weights are {Tq} x {Tk}: give query_tokens for cross-attention")
    if ncols is not None and (isinstance(ncols, bool) or not isinstance(ncols, int) or ncols < 1):
        raise ValueError(f"ncols must be a positive int, got {ncols!r}")
    if not isinstance(shared_scale, bool):
        raise TypeError(f"shared_scale must be True or False, got {shared_scale!r}")
    ncols = ncols or min(H, 4)
    nrows = math.ceil(H / ncols)
    cell = 2.4 if max(Tq, Tk) <= 30 else 3.2
    fig, axes = plt.subplots(nrows, ncols, figsize=(cell * ncols + 1.3, cell * nrows + 0.9), squeeze=False,
                             layout="constrained")
    vmax = max(1e-12, float(np.nanmax(w))) if shared_scale else None
    im = None
    for h in range(nrows * ncols):
        ax = axes[h // ncols][h % ncols]
        if h >= H:
            ax.axis("off")
            continue
        im = _draw(ax, w[h], keys, queries, f"head {h}", annotate=False, vmax=vmax, max_labels=GRID_LABELS)
        ax.set_xlabel(""), ax.set_ylabel("")
        last_in_column = h + ncols >= H
        if not last_in_column:
            ax.tick_params(axis="x", labelbottom=False)
        if h % ncols:
            ax.tick_params(axis="y", labelleft=False)
    if shared_scale:
        fig.colorbar(im, ax=axes.ravel().tolist(), shrink=0.8, label="attention weight (one scale for all heads)")
    fig.supxlabel("key (attended to)")
    fig.supylabel("query (attending)")
    if title:
        fig.suptitle(title)
    return fig


def rescale_attention(weights, scale: float = 1.0, causal: bool = False) -> torch.Tensor:
    """Re-softmax ``scale * log(weights)``, optionally with a causal mask; shape (..., Tq, Tk).

    ``log(weights)`` equals the scores up to a constant per row, so this is softmax with
    the scores multiplied by ``scale``: scale > 1 sharpens, scale < 1 flattens, scale = 1
    with ``causal=False`` gives the weights back. Zero weights stay zero. Rows left with
    no allowed key become all-zero.

    >>> w = torch.tensor([[0.5, 0.5], [0.8, 0.2]])
    >>> rescale_attention(w, 2.0)
    tensor([[0.5000, 0.5000],
            [0.9412, 0.0588]])
    >>> rescale_attention(w, 1.0, causal=True)
    tensor([[1.0000, 0.0000],
            [0.8000, 0.2000]])
    """
    if not isinstance(weights, torch.Tensor):
        weights = torch.as_tensor(np.asarray(weights, dtype=np.float64))
    if weights.dim() < 2:
        raise ValueError(f"weights must have at least 2 dimensions (..., Tq, Tk), got shape {tuple(weights.shape)}")
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not math.isfinite(scale) or scale <= 0:
        raise ValueError(f"scale must be a positive number, got {scale!r}")
    w = weights.detach().to(torch.float64)
    if (w < 0).any():
        raise ValueError("weights must be non-negative (they are attention probabilities)")
    scores = torch.log(w) * float(scale)  # zeros -> -inf, which stay masked
    if causal:
        Tq, Tk = w.shape[-2:]
        if Tq != Tk:
            raise ValueError(f"causal masking needs square weights (self-attention), got {Tq} x {Tk}")
        scores = scores.masked_fill(~causal_mask(Tq, device=scores.device), float("-inf"))
    dead = torch.isneginf(scores).all(-1, keepdim=True)
    out = torch.softmax(scores.masked_fill(dead, 0.0), -1).masked_fill(dead, 0.0)
    return out.to(weights.dtype) if weights.is_floating_point() else out  # computed in float64


def _validate_attentions(attentions, tokens, query_tokens) -> list[torch.Tensor]:
    if isinstance(attentions, torch.Tensor):
        attentions = [attentions] if attentions.dim() == 3 else list(attentions)
    if not isinstance(attentions, (list, tuple)) or not attentions:
        raise ValueError("attentions must be a non-empty list over layers of tensors (H, Tq, Tk)")
    out = []
    for i, a in enumerate(attentions):
        a = torch.as_tensor(a).detach().to("cpu", torch.float64)
        if a.dim() == 4 and a.shape[0] == 1:
            a = a[0]  # tolerate a leftover batch dimension of size 1
        if a.dim() != 3:
            raise ValueError(f"attentions[{i}] must have shape (H, Tq, Tk), got {tuple(a.shape)}")
        if out and a.shape[1:] != out[0].shape[1:]:
            raise ValueError(f"attentions[{i}] has shape {tuple(a.shape)}, unlike attentions[0] {tuple(out[0].shape)}")
        out.append(a)
    _check_tokens(tokens, "tokens", out[0].shape[2], "keys (columns)")
    if query_tokens is not None:
        _check_tokens(query_tokens, "query_tokens", out[0].shape[1], "queries (rows)")
    return out


def attention_explorer(
    attentions=None,
    tokens=None,
    query_tokens=None,
    layer_names: Optional[Sequence[str]] = None,
    recompute: Optional[Callable[[str], tuple]] = None,
    text: str = "",
    title: str = "Attention explorer",
) -> Explorer:
    """An Explorer over per-layer attention maps.

    Either give ``attentions`` (list over layers of (H, Tq, Tk), batch removed) and
    ``tokens`` for a fixed text, or ``recompute(text) -> (attentions, tokens)`` and a
    starting ``text``; then a text box lets the reader type new input. Controls: text
    (with ``recompute``), layer, head ("all heads" or one head), causal (re-mask and
    renormalise) and scale (multiply the log-weights, re-softmax).
    """
    if recompute is None and attentions is None:
        raise ValueError("give attentions and tokens, or a recompute(text) function")
    if recompute is not None and not callable(recompute):
        raise TypeError("recompute must be callable: recompute(text) -> (attentions, tokens)")
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    cache: dict[str, tuple] = {}

    def data_for(txt: Optional[str]):
        if recompute is None:
            return attentions, tokens
        if not txt.strip():
            raise ValueError("empty text: type a few words to see their attention")
        if txt not in cache:
            if len(cache) > 32:
                cache.clear()
            a, t = recompute(txt)
            cache[txt] = (_validate_attentions(a, t, None), list(t))
        return cache[txt]

    if recompute is None:
        first = _validate_attentions(attentions, tokens, query_tokens)
        attentions = first
    else:
        if not text.strip():
            raise ValueError("text must not be empty when recompute is given (it is the starting input)")
        first = data_for(text)[0]
    n_layers, n_heads = len(first), first[0].shape[0]
    if layer_names is None:
        layer_names = [f"layer {i}" for i in range(n_layers)]
    layer_names = [str(n) for n in layer_names]
    if len(layer_names) != n_layers or len(set(layer_names)) != n_layers:
        raise ValueError(f"layer_names must be {n_layers} distinct names, got {layer_names}")

    def render(layer: str, head: str, causal: bool, scale: float, text: Optional[str] = None) -> Figure:
        atts, toks = data_for(text)
        if layer not in layer_names:
            raise ValueError(f"unknown layer {layer!r}")
        li = layer_names.index(layer)
        if li >= len(atts):
            raise ValueError(f"this input has only {len(atts)} layers")
        w = rescale_attention(atts[li], scale, causal)  # (H, Tq, Tk)
        q_toks = query_tokens if recompute is None else None
        tag = f"{layer}, scale {scale:.1f}" + (", causal" if causal else "")
        if head == ALL_HEADS:
            return attention_grid(w, toks, query_tokens=q_toks, title=f"All heads of {tag}")
        h = int(head.split()[-1])
        if h >= w.shape[0]:
            raise ValueError(f"{layer} has only {w.shape[0]} heads")
        return attention_heatmap(w[h], toks, query_tokens=q_toks, title=f"{head} of {tag}")

    controls: dict[str, widgets.ValueWidget] = {}
    if recompute is not None:
        controls["text"] = widgets.Text(value=text, description="text", continuous_update=False,
                                        layout=widgets.Layout(width="90%"))
    controls["layer"] = widgets.Dropdown(options=layer_names, value=layer_names[0], description="layer")
    head_options = [ALL_HEADS] + [f"head {h}" for h in range(n_heads)]
    controls["head"] = widgets.Dropdown(options=head_options, value=head_options[1] if n_heads == 1 else ALL_HEADS, description="head")
    controls["causal"] = widgets.Checkbox(value=False, description="causal mask")
    controls["scale"] = widgets.FloatSlider(value=1.0, min=0.1, max=4.0, step=0.1, description="scale",
                                            continuous_update=False, readout_format=".1f")
    return Explorer(render, controls, title=title)
