"""The logit-lens grid and the patching heatmap of chapter 8e, as pictures and as an explorer.

``lens_table(logits, decode, k)`` turns logit-lens logits (L + 1, T, V) into plain data (top-k
tokens and probabilities per layer and position); ``lens_html`` draws it as an HTML grid the
browser renders: one cell per (layer, position) showing the top token, shaded by its
probability, with the top 5 in the cell's hover text. ``lens_figure`` is the same grid in
matplotlib (for the static copy), ``patching_figure`` the activation-patching heatmap.
``lens_explorer`` wires a prompt box and a model choice to the grid; ``patching_explorer`` a
layer slider to a patching grid (``patching_render``: the heatmap with the layer marked, and
that layer's row as bars).
"""

from __future__ import annotations

import html
from typing import Callable, Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.figure import Figure

__all__ = ["lens_table", "lens_html", "lens_figure", "patching_figure", "lens_explorer", "patching_render", "patching_explorer"]


def lens_table(logits: torch.Tensor, decode: Callable[[int], str], k: int = 5) -> dict:
    """(L + 1, T, V) logits -> {'tokens': [[[k strings]]], 'probs': [[[k floats]]]} per layer and position."""
    if not isinstance(logits, torch.Tensor) or logits.dim() != 3:
        raise ValueError(f"logits must be a (layers, T, V) tensor, got {getattr(logits, 'shape', type(logits).__name__)}")
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be a positive int, got {k!r}")
    p, i = logits.float().softmax(-1).topk(min(k, logits.shape[-1]), dim=-1)  # (L + 1, T, k)
    return {"tokens": [[[decode(int(t)) for t in row] for row in layer] for layer in i.tolist()],
            "probs": [[[round(float(v), 4) for v in row] for row in layer] for layer in p.tolist()]}


def _show(s: str) -> str:
    return s.replace("\n", "\\n").replace(" ", "\u00b7")  # make spaces and newlines visible


def lens_html(table: Mapping, inputs: Sequence[str], title: str = "", mark: str | None = None) -> str:
    """An HTML grid: rows = layers (last on top), columns = input positions, top token per cell.

    A cell's shade is the top token's probability (white 0, blue 1); hovering shows the top 5.
    Cells whose top token equals ``mark`` are outlined.
    """
    tokens, probs = table["tokens"], table["probs"]
    n_rows, T = len(tokens), len(inputs)
    if any(len(r) != T for r in tokens):
        raise ValueError(f"inputs has {T} tokens but the table has {len(tokens[0])} positions")
    out = ['<div class="llmbook-lens" style="overflow-x:auto;font-family:monospace;font-size:11px">']
    if title:
        out.append(f'<div style="font-family:sans-serif;font-size:13px;margin:2px 0">{html.escape(title)}</div>')
    out.append('<table style="border-collapse:collapse">')
    for r in reversed(range(n_rows)):
        label = "embed" if r == 0 else f"layer {r}"
        out.append(f'<tr><th style="text-align:right;padding:0 6px;font-weight:normal">{label}</th>')
        for t in range(T):
            top, p = tokens[r][t][0], probs[r][t][0]
            hover = "\n".join(f"{_show(s)!s}: {q:.3f}" for s, q in zip(tokens[r][t], probs[r][t]))
            shade = int(round(255 * (1 - p)))
            # white ink only where it reads at >= 4.5:1 (shade <= 95, p >= 0.627); black on lighter cells
            ink = "#fff" if shade <= 95 else "#000"
            edge = "2px solid #D55E00" if mark is not None and top == mark else "1px solid #ddd"
            out.append(f'<td class="llmbook-lens-cell" title="{html.escape(hover)}" style="background:rgb({shade},{shade},255);'
                       f'color:{ink};border:{edge};padding:1px 3px;max-width:70px;overflow:hidden;white-space:nowrap">'
                       f'{html.escape(_show(top))}</td>')
        out.append("</tr>")
    out.append('<tr><th style="text-align:right;padding:0 6px;font-weight:normal">input</th>')
    for s in inputs:
        out.append(f'<td style="padding:1px 3px;border-top:2px solid #444;white-space:nowrap">{html.escape(_show(s))}</td>')
    out.append("</tr></table></div>")
    return "".join(out)


def lens_figure(table: Mapping, inputs: Sequence[str], title: str = "", mark: str | None = None) -> Figure:
    """The same grid in matplotlib: the top token's probability as colour, the token written in each cell
    (in orange where it equals ``mark``)."""
    probs = np.array([[row[0] for row in layer] for layer in table["probs"]])  # (L + 1, T)
    n_rows, T = probs.shape
    fig, ax = plt.subplots(figsize=(max(6.0, 0.62 * T + 1.5), max(3.0, 0.26 * n_rows + 1.3)))
    im = ax.imshow(probs, origin="lower", aspect="auto", cmap="Blues", vmin=0, vmax=1)
    for r in range(n_rows):
        for t in range(T):
            top = table["tokens"][r][t][0]
            marked = mark is not None and top == mark
            ax.text(t, r, _show(top)[:8], ha="center", va="center", fontsize=6.5,
                    color="#D55E00" if marked else ("white" if probs[r, t] > 0.6 else "black"))
    ax.set_xticks(range(T), [_show(s) for s in inputs], rotation=90, fontsize=8)
    ax.set_yticks(range(n_rows), ["embed"] + [str(i) for i in range(1, n_rows)], fontsize=7)
    ax.set_xlabel("input token (position)")
    ax.set_ylabel("residual stream after layer")
    ax.set_title(title, fontsize=10)
    fig.colorbar(im, ax=ax, label="probability of the top token", fraction=0.03)
    return fig


def patching_figure(grid: torch.Tensor, inputs: Sequence[str], title: str = "") -> Figure:
    """(L, T) patching results: share of the clean logit difference restored, layer by position."""
    g = grid.detach().float().numpy()
    fig, ax = plt.subplots(figsize=(max(5.0, 0.5 * len(inputs) + 1.5), 4.2))
    lim = max(1.0, float(np.abs(g).max()))
    im = ax.imshow(g, origin="lower", aspect="auto", cmap="RdBu_r", vmin=-lim, vmax=lim)
    ax.set_xticks(range(len(inputs)), [_show(s) for s in inputs], rotation=90, fontsize=8)
    ax.set_xlabel("position patched")
    ax.set_ylabel("residual stream entering block")
    ax.set_title(title, fontsize=10)
    fig.colorbar(im, ax=ax, label="share of the clean logit difference restored", fraction=0.04)
    return fig


def lens_explorer(models: Mapping[str, tuple], prompt: str, mark: str | None = None):
    """An explorer: type a prompt, pick a model, see its logit-lens grid (hover a cell for the top 5).

    ``models`` maps a name to ``(model, encode, decode_one)``: ``encode(text) -> list[int]``,
    ``decode_one(id) -> str``.
    """
    import ipywidgets as widgets

    from ..interp import logit_lens
    from .widget import Explorer

    if not models:
        raise ValueError("models must name at least one (model, encode, decode_one)")

    def render(text: str, model: str) -> str:
        if not isinstance(text, str) or not text:
            raise ValueError("type a prompt of at least one token")
        m, encode, decode = models[model]
        ids = encode(text)
        limit = getattr(m.config, "block_size", 64)
        if not ids:
            raise ValueError("the prompt has no token this model knows")
        if len(ids) > min(limit, 40):
            raise ValueError(f"the prompt has {len(ids)} tokens; the grid shows at most {min(limit, 40)}")
        lens = logit_lens(m, torch.tensor([ids]))[:, 0]  # (L + 1, T, V)
        return lens_html(lens_table(lens, decode), [decode(i) for i in ids],
                         title=f"{model}: top next token read from each layer (hover a cell for the top 5)", mark=mark)

    controls = {"text": widgets.Text(value=prompt, description="prompt", continuous_update=False,
                                     layout=widgets.Layout(width="560px")),
                "model": widgets.Dropdown(options=list(models), value=list(models)[0], description="model")}
    return Explorer(render, controls, title="The logit lens")


def patching_render(grid: torch.Tensor, inputs: Sequence[str], layer: int) -> Figure:
    """The patching heatmap with one layer marked, beside that layer's row as bars (one per position)."""
    g = grid.detach().float().numpy()
    if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < g.shape[0]:
        raise ValueError(f"layer must be an int in [0, {g.shape[0]}), got {layer!r}")
    labels = [_show(s) for s in inputs]
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4.2), gridspec_kw={"width_ratios": [1.2, 1]})
    lim = max(1.0, float(np.abs(g).max()))
    im = ax.imshow(g, origin="lower", aspect="auto", cmap="RdBu_r", vmin=-lim, vmax=lim)
    ax.axhline(layer - 0.5, color="k", lw=1); ax.axhline(layer + 0.5, color="k", lw=1)
    ax.set_xticks(range(len(labels)), labels, rotation=90, fontsize=8)
    ax.set_xlabel("position patched"); ax.set_ylabel("residual stream entering block")
    fig.colorbar(im, ax=ax, fraction=0.04)
    bx.bar(range(len(labels)), g[layer], color=["#D55E00" if v > 0.5 else "#0072B2" for v in g[layer]])
    bx.set_xticks(range(len(labels)), labels, rotation=90, fontsize=8)
    bx.set_ylim(min(-0.1, float(g.min()) - 0.05), max(1.1, float(g.max()) + 0.05))
    bx.set_ylabel("share of the clean logit difference restored")
    bx.set_title(f"patching the residual stream entering block {layer}", fontsize=10)
    return fig


def patching_explorer(grid: torch.Tensor, inputs: Sequence[str]):
    """An explorer of a patching grid: a layer slider picks the row drawn as bars beside the heatmap."""
    import ipywidgets as widgets

    from .widget import Explorer

    if not isinstance(grid, torch.Tensor) or grid.dim() != 2 or grid.shape[1] != len(inputs):
        raise ValueError("grid must be a (layers, positions) tensor with one column per input token")

    def render(layer: int) -> Figure:
        return patching_render(grid, inputs, layer)

    controls = {"layer": widgets.IntSlider(value=grid.shape[0] // 2, min=0, max=grid.shape[0] - 1, description="block",
                                           continuous_update=False)}
    return Explorer(render, controls, title="Activation patching, layer by layer")
