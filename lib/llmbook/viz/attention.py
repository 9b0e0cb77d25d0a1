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
- ``attention_spec(...)``: the data the browser view draws from (every layer and head
  once, rounded), so layer, head, scale and causal view change without the kernel.
- ``attention_explorer(...) -> Explorer``: text (Python: re-runs the model, cached per
  text) and layer, head, causal, scale (drawn and handled in the browser by
  ``llmbook.viz.frontend``). The causal box exists only for self-attention (queries =
  keys); the layer menu only when there is more than one layer.
- ``byte_token_labels(pieces)`` / ``gpt2_token_bytes(token)``: readable labels for
  byte-level tokens that split a character (``今[:2]``, ``今[2:]`` instead of ``�``).

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
from .frontend import FrontControl, FrontView, round_sig
from .widget import Explorer

__all__ = ["attention_heatmap", "attention_grid", "rescale_attention", "attention_spec", "attention_explorer",
           "byte_token_labels", "gpt2_token_bytes", "MAX_LABELS", "GRID_LABELS"]

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


def _gpt2_byte_decoder() -> dict[str, int]:
    # GPT-2's printable stand-in character for each byte (bytes_to_unicode), inverted.
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1)) + list(range(ord("\xae"), ord("\xff") + 1))
    cs = list(bs)
    extra = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(bs, cs)}


_BYTE_DECODER = _gpt2_byte_decoder()


def gpt2_token_bytes(token: str) -> bytes:
    """The bytes of a GPT-2-style byte-level token string (``'Ġcat'`` -> ``b' cat'``).

    Characters outside GPT-2's byte alphabet (special tokens such as ``<|im_end|>`` use
    only ASCII, which is inside it) are kept as their UTF-8 bytes.

    >>> gpt2_token_bytes("Ġcat"), gpt2_token_bytes("ä»")
    (b' cat', b'\\xe4\\xbb')
    """
    if not isinstance(token, str):
        raise TypeError(f"token must be a str, got {type(token).__name__}")
    return b"".join(bytes([_BYTE_DECODER[c]]) if c in _BYTE_DECODER else c.encode("utf-8") for c in token)


def _utf8_len(lead: int) -> int:
    return 1 if lead < 0x80 else 2 if 0xC0 <= lead < 0xE0 else 3 if 0xE0 <= lead < 0xF0 else 4 if 0xF0 <= lead < 0xF8 else 0


def byte_token_labels(pieces: Sequence[bytes]) -> list[str]:
    """Readable labels for byte-level tokens, one per piece.

    Decoding each token alone turns a token that holds part of a character into ``\ufffd``.
    Here the pieces are read together: whole characters show as themselves, a part of
    a character as the character with the byte slice the token holds (Python slice
    notation over its UTF-8 bytes), and bytes that are no UTF-8 at all as ``<E5>``.

    >>> byte_token_labels([b" cat", "今".encode()[:2], "今".encode()[2:] + "天".encode()])
    [' cat', '今[:2]', '今[2:]天']
    >>> byte_token_labels([b"\\xff"])
    ['<FF>']
    """
    if isinstance(pieces, (bytes, str)) or not isinstance(pieces, Sequence):
        raise TypeError(f"pieces must be a list of bytes, got {type(pieces).__name__}")
    if not all(isinstance(p, (bytes, bytearray)) for p in pieces):
        raise TypeError("pieces must be a list of bytes (one per token)")
    data = b"".join(pieces)
    chars = []  # (start, end, text or None for a byte that is not UTF-8)
    i = 0
    while i < len(data):
        n = _utf8_len(data[i])
        try:
            chars.append((i, i + n, data[i:i + n].decode("utf-8")) if n and i + n <= len(data) else None)
        except UnicodeDecodeError:
            chars.append(None)
        if chars[-1] is None:
            chars[-1] = (i, i + 1, None)
            n = 1
        i += n
    labels, k, start = [], 0, 0
    for piece in pieces:
        end = start + len(piece)
        out = []
        while k < len(chars) and chars[k][0] < end:
            cs, ce, ch = chars[k]
            if ch is None:
                out.append(f"<{data[cs]:02X}>")
            elif cs >= start and ce <= end:
                out.append(ch)
            else:
                lo, hi = max(cs, start) - cs, min(ce, end) - cs
                out.append(ch + ("[:%d]" % hi if lo == 0 else "[%d:]" % lo if hi == ce - cs else "[%d:%d]" % (lo, hi)))
            if ce <= end:
                k += 1
            else:
                break  # the character goes on in the next piece
        labels.append("".join(out))
        start = end
    return labels


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


def attention_spec(attentions, tokens, query_tokens=None, layer_names: Optional[Sequence[str]] = None,
                   title: str = "") -> dict:
    """The browser view's data: every layer and head of ``attentions`` (list over layers of
    (H, Tq, Tk)), rounded to 4 significant digits, with readable token labels.

    >>> spec = attention_spec([torch.eye(2)[None]], ["a", " "])
    >>> spec["kind"], spec["keys"], spec["causal_ok"], spec["weights"]   # the identity is causal already
    ('attention', ['a', '␣'], False, [[[[1.0, 0.0], [0.0, 1.0]]]])
    >>> attention_spec([torch.full((1, 2, 2), 0.5)], ["a", "b"])["causal_ok"]
    True
    """
    atts = _validate_attentions(attentions, tokens, query_tokens)
    keys = [_visible(t) for t in _check_tokens(tokens, "tokens", atts[0].shape[2], "keys (columns)")]
    queries = keys if query_tokens is None else [_visible(t) for t in query_tokens]
    if query_tokens is None and atts[0].shape[1] != atts[0].shape[2]:
        raise ValueError(f"weights are {atts[0].shape[1]} x {atts[0].shape[2]}: give query_tokens for cross-attention")
    names = [f"layer {i}" for i in range(len(atts))] if layer_names is None else [str(n) for n in layer_names]
    if len(names) != len(atts):
        raise ValueError(f"layer_names must be {len(atts)} names, got {len(names)}")
    heads = {a.shape[0] for a in atts}
    if len(heads) != 1:
        raise ValueError(f"attentions must have the same number of heads in every layer, got {sorted(heads)}")
    A = torch.stack(atts).numpy()  # (L, H, Tq, Tk)
    if not np.isfinite(A).all() or (A < 0).any():
        raise ValueError("attentions must be finite and non-negative (they are attention probabilities)")
    square = len(keys) == len(queries) and query_tokens is None
    # a causal mask is offered for self-attention that is not causal already (a GPT's maps are)
    return {"kind": "attention", "title": title, "layer_names": names, "keys": keys, "queries": queries,
            "weights": round_sig(A), "causal_ok": square and not _is_causal(A)}


def _is_causal(A: np.ndarray) -> bool:
    """True when no query attends to a later key in any layer or head of ``A`` (L, H, T, T)."""
    T = A.shape[-1]
    return T > 1 and A.shape[-2] == T and float(A[..., np.triu_indices(T, 1)[0], np.triu_indices(T, 1)[1]].max()) == 0.0


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
    starting ``text``; then a text box lets the reader type new input (the model runs
    once per text; results are cached). ``recompute`` may return tokens as bytes (a
    byte-level tokenizer's pieces): they are labelled by :func:`byte_token_labels`.
    Controls drawn in the browser from data sent once: layer, head ("all heads" or one
    head), scale (multiply the log-weights, re-softmax) and, for self-attention only,
    causal (re-mask and renormalise).
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
            raise ValueError("the text is empty: type an input to see its attention")
        if txt not in cache:
            if len(cache) > 32:
                cache.clear()
            a, t = recompute(txt)
            if isinstance(t, (list, tuple)) and t and all(isinstance(x, (bytes, bytearray)) for x in t):
                t = byte_token_labels(list(t))
            cache[txt] = (_validate_attentions(a, t, None), list(t), {})
        return cache[txt][:2]

    if recompute is None:
        first = _validate_attentions(attentions, tokens, query_tokens)
        attentions = first
        tokens = list(tokens)
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
    square = query_tokens is None and first[0].shape[1] == first[0].shape[2]
    if square and _is_causal(torch.stack([a.detach().cpu().double() for a in first]).numpy()):
        square = False  # already causal (a GPT): a causal-mask switch would change nothing

    def render(layer: str, head: str, scale: float, causal: bool = False, text: Optional[str] = None) -> Figure:
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

    def spec(text: Optional[str] = None) -> dict:
        if recompute is None:
            return fixed_spec
        atts, toks = data_for(text)
        specs = cache[text][2]  # the rounded spec, built once per text
        if "spec" not in specs:
            specs["spec"] = attention_spec(atts, toks, None, layer_names, title)
        return specs["spec"]

    fixed_spec = attention_spec(attentions, tokens, query_tokens, layer_names, title) if recompute is None else None
    head_options = [ALL_HEADS] + [f"head {h}" for h in range(n_heads)]
    front = FrontView(layer=0, head=0 if n_heads == 1 else -1, scale=1.0, causal=False)
    front_controls = {
        "layer": FrontControl(front, "layer", "layer", layer_names, layer_names.index,
                              lambda i: layer_names[min(max(i, 0), n_layers - 1)]),
        "head": FrontControl(front, "head", "head", head_options, lambda v: head_options.index(v) - 1,
                             lambda i: head_options[min(max(i, -1), n_heads - 1) + 1]),
        "scale": FrontControl(front, "scale", "scale"),
    }
    if square:
        front_controls["causal"] = FrontControl(front, "causal", "causal")
    controls: dict[str, widgets.ValueWidget] = {}
    if recompute is not None:
        controls["text"] = widgets.Text(value=text, description="text", continuous_update=False,
                                        layout=widgets.Layout(width="90%"))
    shown = ", ".join(front_controls)
    return Explorer(render, controls, title=title, front=front, spec=spec, front_controls=front_controls,
                    summary=f"{title}: interactive ({'text, ' if recompute else ''}{shown}); run the notebook to use it.")
