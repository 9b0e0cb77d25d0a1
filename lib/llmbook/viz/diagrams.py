"""Architecture diagrams drawn by code: boxes, arrows and tensor shapes in Matplotlib.

Covers one drawing per architecture the book builds, each a function that returns a
``matplotlib.figure.Figure`` about 9.6 inches wide (notebook width) with fonts of 8 pt
or more:

- ``three_families()`` (chapter 2): encoder-only (BERT), decoder-only (GPT) and
  encoder-decoder (T5), and which positions each output may attend to.
- ``attention_diagram()`` (chapter 3): scaled dot-product attention and multi-head
  attention, with the shape of every tensor, e.g. (B, h, T, d_k).
- ``transformer_block()`` and ``post_vs_pre_ln()`` (chapter 4): the encoder-decoder
  Transformer of Vaswani et al. (2017) with its residual connections and LayerNorms, and
  the two places a LayerNorm can sit (Post-LN, Pre-LN; Xiong et al., 2020).
- ``gpt_stack()`` (chapter 6): the GPT decoder stack (Radford et al., 2018, 2019) with
  its shapes.
- ``bert_inputs()`` (chapter 7): BERT's input embedding sum and its two pre-training
  heads (Devlin et al., 2019).
- ``llama_block()`` (chapter 8): the LLaMA block (Touvron et al., 2023) with RMSNorm,
  RoPE, grouped-query attention and SwiGLU.

Every box that a library class implements names that class in monospace (the footer
says which ``llmbook`` module holds it). One colour per kind of box in every drawing:
embeddings, positions, attention, feed-forward, normalisation, residual add, output
heads, and plain operations (matmul, softmax).

Leaves out: automatic layout (coordinates are set by hand, in inches, so that the
figures stay stable) and external tools such as Graphviz (nothing to install).

>>> fig = gpt_stack(n_layer=4, d_model=128, n_head=4, block_size=64, vocab_size=65)
>>> "CausalSelfAttention" in {t.get_text() for t in fig.findobj(matplotlib.text.Text)}
True
>>> plt.close(fig)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import matplotlib
import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.colors import to_rgb
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Circle, FancyBboxPatch, Rectangle

from .style import PALETTE

__all__ = [
    "KIND_COLOURS",
    "three_families",
    "attention_diagram",
    "transformer_block",
    "post_vs_pre_ln",
    "gpt_stack",
    "gpt_parameter_count",
    "bert_inputs",
    "BERT_EXAMPLE",
    "llama_block",
]

# One colour per kind of box, the same in every diagram (Okabe & Ito palette of the book).
KIND_COLOURS = {
    "embed": PALETTE[5],  # token / segment embeddings
    "pos": PALETTE[2],  # positional information (tables, sinusoids, RoPE)
    "attn": PALETTE[1],  # attention layers
    "ffn": PALETTE[0],  # feed-forward layers
    "norm": PALETTE[6],  # LayerNorm / RMSNorm
    "add": "#555555",  # residual additions
    "head": PALETTE[4],  # output heads (LM head, MLM, NSP, softmax over the vocabulary)
    "op": PALETTE[3],  # plain operations: matmul, scale, mask, softmax, concat
    "tensor": "#8C8C8C",  # inputs and outputs (token ids, tensors)
}
_TEXT = "#222222"
_SHAPE = "#444444"
_MONO = "DejaVu Sans Mono"
FONT = 9  # box titles
SMALL = 8  # class names, shapes, footers (the smallest size used anywhere)
WIDTH = 9.6  # inches: the width of a notebook cell's output


# ---------------------------------------------------------------------------- drawing kit
def _mix(colour: str, white: float) -> tuple[float, float, float]:
    """``colour`` blended towards white (white=1) or black (white<0)."""
    r, g, b = to_rgb(colour)
    if white >= 0:
        return (r + (1 - r) * white, g + (1 - g) * white, b + (1 - b) * white)
    return (r * (1 + white), g * (1 + white), b * (1 + white))


@dataclass(frozen=True)
class _Box:
    """A drawn box: centre (x, y), width w, height h (inches); anchors for arrows."""

    x: float
    y: float
    w: float
    h: float

    @property
    def top(self) -> tuple[float, float]:
        return (self.x, self.y + self.h / 2)

    @property
    def bottom(self) -> tuple[float, float]:
        return (self.x, self.y - self.h / 2)

    @property
    def left(self) -> tuple[float, float]:
        return (self.x - self.w / 2, self.y)

    @property
    def right(self) -> tuple[float, float]:
        return (self.x + self.w / 2, self.y)


def _canvas(height: float, width: float = WIDTH) -> tuple[Figure, Axes]:
    """A figure whose one axes spans it, with data units in inches (origin bottom left)."""
    fig = plt.figure(figsize=(width, height))
    fig.set_layout_engine("none")  # the book's style turns on constrained layout; not wanted here
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, width)
    ax.set_ylim(0, height)
    ax.set_axis_off()
    return fig, ax


def _box(ax: Axes, x: float, y: float, w: float, h: float, title: str, kind: str,
         cls: str | None = None, fontsize: float = FONT) -> _Box:
    """A rounded box of ``kind``'s colour; ``cls`` (a class name) is written under the title."""
    colour = KIND_COLOURS[kind]
    ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0,rounding_size=0.06",
                                fc=_mix(colour, 0.72), ec=_mix(colour, -0.25), lw=1.1, zorder=2))
    if cls is None:
        ax.text(x, y, title, ha="center", va="center", fontsize=fontsize, color=_TEXT, zorder=3)
    else:
        ax.text(x, y + h * 0.2, title, ha="center", va="center", fontsize=fontsize, color=_TEXT, zorder=3)
        ax.text(x, y - h * 0.24, cls, ha="center", va="center", fontsize=SMALL, family=_MONO, color=_TEXT, zorder=3)
    return _Box(x, y, w, h)


def _add(ax: Axes, x: float, y: float, r: float = 0.12) -> _Box:
    """The residual addition: a circle with a plus."""
    colour = KIND_COLOURS["add"]
    ax.add_patch(Circle((x, y), r, fc="white", ec=colour, lw=1.2, zorder=2))
    ax.text(x, y, "+", ha="center", va="center", fontsize=11, color=colour, zorder=3)
    return _Box(x, y, 2 * r, 2 * r)


def _arrow(ax: Axes, start: tuple[float, float], end: tuple[float, float], colour: str = _TEXT,
           dashed: bool = False, rad: float = 0.0, head: bool = True, lw: float = 1.1) -> None:
    """A straight (rad=0) or curved arrow from ``start`` to ``end``."""
    ax.annotate("", xy=end, xytext=start, zorder=1,
                arrowprops=dict(arrowstyle="-|>" if head else "-", color=colour, lw=lw, shrinkA=0, shrinkB=0,
                                mutation_scale=10, linestyle="--" if dashed else "-",
                                connectionstyle=f"arc3,rad={rad}"))


def _path(ax: Axes, points: Sequence[tuple[float, float]], colour: str = _TEXT, dashed: bool = False) -> None:
    """A polyline whose last segment ends in an arrow head (residual paths, skip lines)."""
    xs, ys = zip(*points[:-1])
    ax.add_line(Line2D(xs, ys, color=colour, lw=1.1, linestyle="--" if dashed else "-", zorder=1))
    _arrow(ax, points[-2], points[-1], colour=colour, dashed=dashed)


def _residual(ax: Axes, x: float, y_from: float, add: _Box, offset: float) -> None:
    """The skip connection: leave the main line at height ``y_from``, go ``offset`` sideways, up into ``add``."""
    side = add.x + offset
    entry = add.left if offset < 0 else add.right
    _path(ax, [(x, y_from), (side, y_from), (side, add.y), entry], colour=KIND_COLOURS["add"])


def _chain(ax: Axes, x: float, y: float, w: float, items: Sequence[tuple], gap: float = 0.22) -> list[_Box]:
    """Boxes stacked upwards from ``y`` (the first box's bottom), each joined to the next by an arrow.

    Each item is ``(title, kind, cls, h)``, ``("+",)`` for a residual add, or
    ``("space", dy)`` for extra room before the next box.
    """
    boxes: list[_Box] = []
    for item in items:
        if item[0] == "space":
            y += item[1]
            continue
        if item[0] == "+":
            box = _add(ax, x, y + 0.12)
        else:
            title, kind, cls, h = item
            box = _box(ax, x, y + h / 2, w, h, title, kind, cls)
        if boxes:
            _arrow(ax, boxes[-1].top, box.bottom)
        boxes.append(box)
        y += box.h + gap
    return boxes


def _frame(ax: Axes, x0: float, y0: float, x1: float, y1: float, label: str, label_x: float,
           ha: str = "right") -> None:
    """A dashed rounded frame around a repeated group of boxes, with its label (e.g. N x Block)."""
    ax.add_patch(FancyBboxPatch((x0, y0), x1 - x0, y1 - y0, boxstyle="round,pad=0,rounding_size=0.12",
                                fc="#F4F4F4", ec="#9A9A9A", lw=1.0, linestyle="--", zorder=0))
    ax.text(label_x, (y0 + y1) / 2, label, ha=ha, va="center", fontsize=FONT + 1, color=_TEXT)


def _note(ax: Axes, x: float, y: float, text: str, ha: str = "left", **kw) -> None:
    """A shape or symbol annotation (8 pt, dark grey)."""
    kw.setdefault("fontsize", SMALL)
    kw.setdefault("color", _SHAPE)
    ax.text(x, y, text, ha=ha, va="center", **kw)


def _title(ax: Axes, x: float, y: float, text: str, size: float = 11) -> None:
    ax.text(x, y, text, ha="center", va="center", fontsize=size, color=_TEXT)


def _footer(ax: Axes, text: str, y: float = 0.22, width: float = WIDTH) -> None:
    """The line naming the llmbook modules that hold the classes in the boxes."""
    ax.text(width / 2, y, text, ha="center", va="center", fontsize=SMALL, color=_SHAPE, style="italic")


def _shape(*dims: object) -> str:
    """'(B, T, d_model)' from its dimensions."""
    return "(" + ", ".join(str(d) for d in dims) + ")"


# ---------------------------------------------------------------------------- argument checks
def _check_int(name: str, value: object, low: int = 1, high: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < low or (high is not None and value > high):
        span = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise ValueError(f"{name} must be {span}, got {value}")
    return value


def _check_dim(name: str, value: object) -> str:
    """A dimension shown in a label: a positive int or a non-empty symbol such as 'T'."""
    if isinstance(value, str):
        if not value.strip():
            raise ValueError(f"{name} must be a non-empty symbol or a positive int, got {value!r}")
        return value.strip()
    return str(_check_int(name, value))


def _check_divides(n_name: str, n: int, d_name: str, d: int) -> None:
    if d % n:
        raise ValueError(f"{n_name}={n} must divide {d_name}={d}")


# ---------------------------------------------------------------------------- chapter 2
def _token_row(ax: Axes, x0: float, y: float, labels: Sequence[str], kinds: Sequence[str],
               pitch: float = 0.38, w: float = 0.32) -> list[_Box]:
    """A row of small token boxes, one kind each, starting at x0 (centre of the first)."""
    return [_box(ax, x0 + i * pitch, y, w, 0.3, label, kind, fontsize=SMALL + 1)
            for i, (label, kind) in enumerate(zip(labels, kinds))]


def _mask_grid(ax: Axes, x0: float, y0: float, allowed: Sequence[Sequence[bool]], caption: str,
               cell: float = 0.16) -> None:
    """A query x key grid (queries are rows, top first), filled where attention is allowed."""
    n_q, n_k = len(allowed), len(allowed[0])
    fill = _mix(KIND_COLOURS["attn"], 0.15)
    for i in range(n_q):
        for j in range(n_k):
            ax.add_patch(Rectangle((x0 + j * cell, y0 + (n_q - 1 - i) * cell), cell, cell,
                                   fc=fill if allowed[i][j] else "white", ec="#BBBBBB", lw=0.6))
    ax.text(x0 + n_k * cell / 2, y0 - 0.16, caption, ha="center", va="top", fontsize=SMALL, color=_TEXT,
            linespacing=1.25)


def three_families(n_tokens: int = 5) -> Figure:
    """Encoder-only, decoder-only and encoder-decoder: which positions each output attends to.

    Top: the middle output position and the inputs it reads (grey tokens are hidden from
    it). Bottom: the attention mask of each family, queries as rows and keys as columns,
    coloured where attention is allowed. ``n_tokens`` (2 to 5) is the sequence length.

    >>> fig = three_families(n_tokens=4)
    >>> plt.close(fig)
    """
    n = _check_int("n_tokens", n_tokens, 2, 5)
    fig, ax = _canvas(5.0)
    p = (n - 1) // 2  # the highlighted output position
    seen, cross = _mix(KIND_COLOURS["attn"], -0.2), _mix(KIND_COLOURS["pos"], -0.25)
    y_in, y_out, pitch, cell, y_grid = 2.55, 3.75, 0.38, 0.16, 0.95
    def rows(x0: float, sym: str, kind: str, special: Sequence[bool] = (), other: str = "tensor") -> list[_Box]:
        """Tokens x_i / y_i (inputs) or h_i / m_i (outputs); ``special`` ones get the ``other`` kind."""
        kinds = [other if (special and special[i]) else kind for i in range(n)]
        return _token_row(ax, x0, y_in if sym in "xy" else y_out, [f"${sym}_{i + 1}$" for i in range(n)], kinds, pitch)

    full = [[True] * n for _ in range(n)]
    causal = [[j <= i for j in range(n)] for i in range(n)]
    # Encoder-only and decoder-only: one stack each, inputs below, outputs above.
    for cx, title, cls, sees, caption in (
            (1.45, "Encoder-only (BERT)", "Bert", lambda i: True, "self-attention\n(no mask)"),
            (3.95, "Decoder-only (GPT)", "GPT", lambda i: i <= p, "masked self-attention\n(causal mask)")):
        _title(ax, cx, 4.75, title)
        _note(ax, cx, 4.48, cls, ha="center", family=_MONO, color=_TEXT, fontsize=SMALL + 1)
        x0 = cx - pitch * (n - 1) / 2
        ins = rows(x0, "x", "embed", [not sees(i) for i in range(n)])
        outs = rows(x0, "h", "tensor", [i == p for i in range(n)], other="attn")
        for i in range(n):
            if sees(i):
                _arrow(ax, ins[i].top, outs[p].bottom, colour=seen, lw=1.0)
        _note(ax, cx, y_in - 0.32, "input tokens", ha="center")
        _mask_grid(ax, cx - n * cell / 2, y_grid, full if cls == "Bert" else causal, caption)
    # Encoder-decoder: encoder on the left, decoder on the right; the decoder output reads both.
    cx = 7.45
    _title(ax, cx, 4.75, "Encoder-decoder (T5)")
    _note(ax, cx, 4.48, "Transformer", ha="center", family=_MONO, color=_TEXT, fontsize=SMALL + 1)
    enc_x0, dec_x0 = cx - pitch * (n - 0.5) - 0.1, cx + pitch / 2 + 0.1
    enc_in = rows(enc_x0, "x", "embed")
    enc_out = rows(enc_x0, "m", "tensor")
    enc_mid = enc_x0 + pitch * (n - 1) / 2
    enc = _box(ax, enc_mid, (y_in + y_out) / 2, pitch * n - 0.04, 0.42, "encoder:\nbidirectional", "attn", fontsize=SMALL)
    for i in range(n):
        _arrow(ax, (enc_in[i].x, enc_in[i].y + 0.15), (enc_in[i].x, enc.y - enc.h / 2))
        _arrow(ax, (enc_out[i].x, enc.y + enc.h / 2), enc_out[i].bottom)
    dec_in = rows(dec_x0, "y", "embed", [i > p for i in range(n)])
    dec_out = rows(dec_x0, "h", "tensor", [i == p for i in range(n)], other="attn")
    for i in range(n):
        if i <= p:
            _arrow(ax, dec_in[i].top, dec_out[p].bottom, colour=seen, lw=1.0)
        _arrow(ax, enc_out[i].top, dec_out[p].top, colour=cross, lw=1.0, rad=-0.25)
    _note(ax, enc_mid, y_in - 0.32, "source (encoder)", ha="center")
    _note(ax, dec_x0 + pitch * (n - 1) / 2, y_in - 0.32, "target (decoder)", ha="center")
    _note(ax, enc_x0 - 0.22, y_out, "memory", ha="right")
    _note(ax, dec_out[p].x + 0.14, y_out + 0.4, "cross-attention", color=cross)
    for dx, grid, caption in ((-1.5, full, "encoder\nself-attention"), (0.0, causal, "decoder masked\nself-attention"),
                              (1.5, full, "decoder-encoder\ncross-attention")):
        _mask_grid(ax, cx + dx - n * cell / 2, y_grid, grid, caption)
    _note(ax, 0.1, y_grid + n * cell / 2, "masks\nrows: query i\ncols: key j", linespacing=1.25)
    _footer(ax, "Classes: llmbook.bert.Bert, llmbook.gpt.GPT, llmbook.transformer.Transformer "
                "(masks: llmbook.attention.causal_mask)", y=0.12)
    return fig


# ---------------------------------------------------------------------------- chapter 3
def attention_diagram(d_model: int = 512, n_heads: int = 8, T: int | str = "T", B: int | str = "B") -> Figure:
    """Scaled dot-product attention (left) and multi-head attention (right) with shapes.

    ``d_model`` and ``n_heads`` (h) set the numbers shown next to the symbols
    (d_k = d_model / h); ``T`` and ``B`` are the sequence length and batch size, a symbol
    or a number.

    >>> fig = attention_diagram(d_model=64, n_heads=4, T=10)
    >>> plt.close(fig)
    """
    d_model = _check_int("d_model", d_model)
    h = _check_int("n_heads", n_heads)
    _check_divides("n_heads", h, "d_model", d_model)
    T, B = _check_dim("T", T), _check_dim("B", B)
    d_k = d_model // h
    values = {"B": B, "T": T, "h": h, "d_k": d_k, "d_model": d_model}

    def shape(*syms: str) -> str:  # '(B, h, T, d_k)\n= (B, 8, T, 64)'
        return f"{_shape(*syms)}\n= {_shape(*(values[s] for s in syms))}"

    fig, ax = _canvas(6.6)
    # Left: scaled dot-product attention, bottom to top as in Vaswani et al. (2017), figure 2.
    _title(ax, 1.9, 6.3, "Scaled dot-product attention")
    _note(ax, 1.9, 6.02, "softmax(Q Kᵀ / √d_k + mask) V", ha="center", color=_TEXT, fontsize=FONT)
    _note(ax, 1.9, 5.75, "scaled_dot_product_attention", ha="center", family=_MONO, color=_TEXT)
    q = _box(ax, 0.8, 0.95, 0.55, 0.42, "Q", "tensor")
    k = _box(ax, 1.6, 0.95, 0.55, 0.42, "K", "tensor")
    v = _box(ax, 2.35, 0.95, 0.55, 0.42, "V", "tensor")
    _note(ax, 1.6, 0.45, "Q, K, V: " + shape("B", "h", "T", "d_k").replace("\n", " "), ha="center")
    chain = _chain(ax, 1.2, 1.6, 1.5, [
        ("MatMul  Q Kᵀ", "op", None, 0.42),
        ("Scale  ÷ √d_k", "op", None, 0.42),
        ("Mask (optional)", "op", "causal_mask", 0.55),
        ("Softmax over keys", "op", None, 0.42),
        ("MatMul  × V", "op", None, 0.42),
    ], gap=0.33)
    _arrow(ax, q.top, (chain[0].x - 0.3, chain[0].y - chain[0].h / 2))
    _arrow(ax, k.top, (chain[0].x + 0.3, chain[0].y - chain[0].h / 2))
    _path(ax, [v.top, (v.x, chain[-1].y), chain[-1].right])
    for box, text in zip(chain, ["scores " + shape("B", "h", "T", "T"), None, "-inf where masked",
                                 "weights " + shape("B", "h", "T", "T")]):
        if text:
            _note(ax, 2.5, box.y + box.h / 2 + 0.17, text, linespacing=1.2)
    _arrow(ax, chain[-1].top, (chain[-1].x, 5.45))
    _note(ax, chain[-1].x + 0.1, 5.35, shape("B", "h", "T", "d_k").replace("\n", " "))

    # Right: multi-head attention.
    cx, w = 7.55, 3.1
    _title(ax, cx, 6.3, "Multi-head attention")
    _note(ax, cx, 6.02, "concat(head_1, ..., head_h) W_O", ha="center", color=_TEXT, fontsize=FONT)
    _note(ax, cx, 5.75, "MultiHeadAttention", ha="center", family=_MONO, color=_TEXT)
    rows = _chain(ax, cx, 0.72, w, [
        ("inputs: query, key, value\n(all three are X in self-attention)", "tensor", None, 0.55),
        ("Linear W_Q, W_K, W_V  (d_model × d_model)", "attn", "q_proj, k_proj, v_proj", 0.55),
        (f"split into h = {h} heads of d_k = {d_k}", "op", None, 0.42),
        (f"scaled dot-product attention (left)\nfor the {h} heads in parallel", "attn", None, 0.55),
        ("concat heads", "op", None, 0.42),
        ("Linear W_O", "attn", "out_proj", 0.55),
    ], gap=0.3)
    # Stacked shadows behind the attention box: h heads in parallel.
    att = rows[3]
    for s in (0.12, 0.06):
        ax.add_patch(FancyBboxPatch((att.x - att.w / 2 + s, att.y - att.h / 2 + s), att.w, att.h,
                                    boxstyle="round,pad=0,rounding_size=0.06", fc=_mix(KIND_COLOURS["attn"], 0.85),
                                    ec=_mix(KIND_COLOURS["attn"], -0.25), lw=0.8, zorder=1.5))
    notes = [shape("B", "T", "d_model"), shape("B", "T", "d_model"), shape("B", "h", "T", "d_k"),
             shape("B", "h", "T", "d_k"), shape("B", "T", "d_model"), shape("B", "T", "d_model")]
    for box, text in zip(rows, notes):
        _note(ax, cx - w / 2 - 0.12, box.y, text, ha="right", linespacing=1.2)
    _arrow(ax, rows[-1].top, (cx, 5.45))
    _note(ax, cx + 0.1, 5.35, "output")
    _footer(ax, f"Classes: llmbook.attention.MultiHeadAttention, llmbook.attention.scaled_dot_product_attention.   "
                f"d_model = {d_model}, h = {h}, d_k = d_model / h = {d_k}", y=0.15)
    return fig


# ---------------------------------------------------------------------------- chapter 4
def _sublayers(ax: Axes, cx: float, y: float, w: float, items: Sequence[tuple], side: float,
               gap: float = 0.26) -> list[_Box]:
    """A chain in which every "Add & Norm" box gets a residual line from below the box before it.

    ``side`` is -1 (residual lines on the left) or +1 (on the right).
    """
    boxes = _chain(ax, cx, y, w, items, gap=gap)
    for i, item in enumerate(it for it in items if it[0] != "space"):
        if item[0] == "Add & Norm":
            before = boxes[i - 1]
            _residual(ax, cx, before.y - before.h / 2 - gap / 2, boxes[i], side * (w / 2 + 0.22))
    return boxes


def transformer_block(n_layers: int | str = "N") -> Figure:
    """The encoder-decoder Transformer (Vaswani et al., 2017, figure 1), Post-LN as in the paper.

    ``n_layers`` is the repeat count written beside each stack ("N", or a number such as 6).

    >>> fig = transformer_block(n_layers=6)
    >>> plt.close(fig)
    """
    n = _check_dim("n_layers", n_layers)
    fig, ax = _canvas(8.3)
    _title(ax, WIDTH / 2, 8.05, "The encoder-decoder Transformer (Post-LN, as in Vaswani et al., 2017)")
    w, ex, dx, hb = 2.3, 2.75, 6.75, 0.44
    an = lambda title, cls="AddNorm": (title, "norm", cls, 0.4)  # noqa: E731
    enc = _sublayers(ax, ex, 0.75, w, [
        ("source tokens (B, S)", "tensor", None, 0.34),
        ("Input embedding × √d_model", "embed", "Transformer.src_embed", hb), ("+",), ("space", 0.2),
        ("Multi-head self-attention", "attn", "MultiHeadAttention", hb), an("Add & Norm"),
        ("Feed forward", "ffn", "FeedForward", hb), an("Add & Norm"),
    ], side=-1, gap=0.2)
    dec = _sublayers(ax, dx, 0.75, w, [
        ("target tokens, shifted right (B, T)", "tensor", None, 0.34),
        ("Output embedding × √d_model", "embed", "Transformer.tgt_embed", hb), ("+",), ("space", 0.2),
        ("Masked multi-head self-attention", "attn", "MultiHeadAttention", hb), an("Add & Norm"),
        ("Multi-head cross-attention", "attn", "MultiHeadAttention", hb), an("Add & Norm"),
        ("Feed forward", "ffn", "FeedForward", hb), an("Add & Norm"), ("space", 0.2),
        ("Linear (d_model → V)", "head", "Transformer.lm_head", hb),
        ("Softmax", "head", None, 0.34),
    ], side=1, gap=0.2)
    # Positional encodings join the embeddings at the + circles.
    for add, sign in ((enc[2], -1), (dec[2], 1)):
        pe = _box(ax, add.x + sign * 1.45, add.y, 2.1, hb, "Positional encoding", "pos", "SinusoidalPositionalEncoding")
        _arrow(ax, pe.right if sign < 0 else pe.left, add.left if sign < 0 else add.right)
    # N x frames around the layers, labelled with the layer classes.
    pad = w / 2 + 0.35
    bottom = enc[3].y - enc[3].h / 2 - 0.2
    top_e, top_d = enc[6].y + enc[6].h / 2 + 0.12, dec[8].y + dec[8].h / 2 + 0.12
    _frame(ax, ex - pad, bottom, ex + pad, top_e, f"{n} ×", ex - pad - 0.12)
    _note(ax, ex - pad - 0.12, (bottom + top_e) / 2 - 0.22, "EncoderLayer", ha="right", family=_MONO, color=_TEXT)
    _frame(ax, dx - pad, bottom, dx + pad, top_d, f"× {n}", dx + pad + 0.12, ha="left")
    _note(ax, dx + pad + 0.12, (bottom + top_d) / 2 - 0.22, "DecoderLayer", family=_MONO, color=_TEXT)
    # The encoder's output (memory) is the key and value of every cross-attention.
    cross = dec[5]
    mem_y, turn_x = top_e + 0.3, dx - pad - 0.3
    _path(ax, [enc[-1].top, (ex, mem_y), (turn_x, mem_y), (turn_x, cross.y), cross.left], colour=KIND_COLOURS["attn"])
    _note(ax, (ex + turn_x) / 2 + 0.1, mem_y + 0.17, "memory (B, S, d_model):\nkeys and values of cross-attention",
          ha="center", color=_mix(KIND_COLOURS["attn"], -0.4), linespacing=1.2)
    _arrow(ax, dec[-1].top, (dx, dec[-1].y + 0.45))
    _note(ax, dx + 0.1, dec[-1].y + 0.38, "next-token probabilities (B, T, V)")
    _footer(ax, "Classes: llmbook.transformer (Transformer, EncoderLayer, DecoderLayer), llmbook.layers (AddNorm, "
                "FeedForward),\nllmbook.attention.MultiHeadAttention, llmbook.positional.SinusoidalPositionalEncoding",
            y=0.25)
    return fig


def post_vs_pre_ln() -> Figure:
    """One sub-layer (attention or feed-forward) wrapped Post-LN (left) and Pre-LN (right).

    Post-LN (Vaswani et al., 2017; BERT; GPT-1) normalises the residual stream after
    every addition; Pre-LN (GPT-2 onwards; Xiong et al., 2020) normalises only the
    sub-layer's input, so the residual path runs untouched from the embeddings to a final
    LayerNorm.

    >>> fig = post_vs_pre_ln()
    >>> plt.close(fig)
    """
    fig, ax = _canvas(5.3)
    w = 2.7
    sub = ("Sub-layer F (attention or feed-forward)", "attn", "MultiHeadAttention / FeedForward", 0.5)
    ln = ("LN", "norm", "LayerNorm", 0.5)
    x_in, x_out = ("$x_l$", "tensor", None, 0.34), ("$x_{l+1}$", "tensor", None, 0.34)
    for cx, title, formula, items, used in (
            (2.45, "Post-LN", r"$x_{l+1} = \mathrm{LN}(x_l + F(x_l))$", [x_in, sub, ("+",), ln, x_out],
             "EncoderLayer(norm_first=False), BertLayer,\nGPTConfig(pre_norm=False) (GPT-1)"),
            (7.15, "Pre-LN", r"$x_{l+1} = x_l + F(\mathrm{LN}(x_l))$", [x_in, ln, sub, ("+",), x_out],
             "EncoderLayer(norm_first=True),\nGPTConfig(pre_norm=True) (GPT-2, GPT-3),\n"
             "plus one final LayerNorm after the last block")):
        _title(ax, cx, 5.02, title)
        _note(ax, cx, 4.72, formula, ha="center", color=_TEXT, fontsize=FONT + 1)
        boxes = _chain(ax, cx, 1.25, w, items, gap=0.3)
        add = boxes[[it[0] for it in items].index("+")]
        _residual(ax, cx, boxes[0].y + boxes[0].h / 2 + 0.15, add, w / 2 + 0.25)
        _note(ax, cx + w / 2 + 0.32, (boxes[0].y + add.y) / 2, "residual", color=KIND_COLOURS["add"])
        _note(ax, cx, 0.85, used, ha="center", family=_MONO, linespacing=1.3)
        if title == "Post-LN":  # its "+ then LayerNorm" is one AddNorm module
            top = boxes[3].y + boxes[3].h / 2 + 0.1
            _frame(ax, cx - w / 2 - 0.12, add.y - 0.22, cx + w / 2 + 0.12, top, "AddNorm", cx - w / 2 - 0.22)
    _footer(ax, "Classes: llmbook.layers (LayerNorm, AddNorm, FeedForward), llmbook.attention.MultiHeadAttention,\n"
                "llmbook.transformer.EncoderLayer, llmbook.bert.BertLayer, llmbook.gpt.GPTConfig", y=0.17)
    return fig


# ---------------------------------------------------------------------------- chapter 6
def _legend_panel(ax: Axes, x: float, y_top: float, title: str, lines: Sequence[str], width: float = 2.3) -> None:
    """A framed list of the symbols and their values (the model's configuration)."""
    height = 0.45 + 0.26 * len(lines)
    ax.add_patch(FancyBboxPatch((x, y_top - height), width, height, boxstyle="round,pad=0,rounding_size=0.08",
                                fc="#FAFAFA", ec="#BBBBBB", lw=0.8, zorder=0))
    ax.text(x + 0.15, y_top - 0.22, title, ha="left", va="center", fontsize=FONT, color=_TEXT)
    for i, line in enumerate(lines):
        ax.text(x + 0.15, y_top - 0.5 - 0.26 * i, line, ha="left", va="center", fontsize=SMALL, family=_MONO,
                color=_TEXT)


def gpt_parameter_count(n_layer: int, d_model: int, vocab_size: int, block_size: int) -> int:
    """Parameters of ``llmbook.gpt.GPT`` with biases, d_ff = 4 d_model, a final LayerNorm and tied weights.

    Per block 12 d_model² + 13 d_model (attention 4 d² + 4 d, MLP 8 d² + 5 d, two LayerNorms 4 d);
    plus the two embedding tables and the final LayerNorm.

    >>> gpt_parameter_count(12, 768, 50257, 1024)  # GPT-2 small
    124439808
    """
    for name, value in (("n_layer", n_layer), ("d_model", d_model), ("vocab_size", vocab_size),
                        ("block_size", block_size)):
        _check_int(name, value)
    d = d_model
    return n_layer * (12 * d * d + 13 * d) + (vocab_size + block_size) * d + 2 * d


def gpt_stack(n_layer: int = 12, d_model: int = 768, n_head: int = 12, block_size: int = 1024,
              vocab_size: int = 50257) -> Figure:
    """The GPT decoder stack (Pre-LN, as GPT-2) with the shape of the residual stream.

    Defaults are GPT-2 small (``GPTConfig.gpt2_small()``); the numbers appear in the
    panel on the right, the symbols in the drawing.

    >>> fig = gpt_stack(n_layer=4, d_model=128, n_head=4, block_size=64, vocab_size=65)
    >>> plt.close(fig)
    """
    for name, value in (("n_layer", n_layer), ("d_model", d_model), ("n_head", n_head),
                        ("block_size", block_size), ("vocab_size", vocab_size)):
        _check_int(name, value)
    _check_divides("n_head", n_head, "d_model", d_model)
    fig, ax = _canvas(8.6)
    _title(ax, WIDTH / 2, 8.3, "GPT: a stack of N Pre-LN decoder blocks")
    cx, w, hb, gap = 3.3, 2.7, 0.46, 0.22
    # Token and position embeddings, summed.
    idx = _box(ax, cx - 0.85, 0.75, 1.5, 0.34, "token ids (B, T)", "tensor")
    pos = _box(ax, cx + 0.85, 0.75, 1.5, 0.34, "positions 0 … T-1", "tensor")
    wte = _box(ax, idx.x, 1.45, 1.5, hb, "Token embedding", "embed", "GPT.wte")
    wpe = _box(ax, pos.x, 1.45, 1.5, hb, "Position embedding", "pos", "GPT.wpe")
    _arrow(ax, idx.top, wte.bottom)
    _arrow(ax, pos.top, wpe.bottom)
    items = [("+",), ("space", 0.2),
             ("LayerNorm", "norm", "Block.ln_1", 0.4),
             ("Causal multi-head self-attention", "attn", "CausalSelfAttention", hb), ("+",),
             ("LayerNorm", "norm", "Block.ln_2", 0.4),
             ("MLP: Linear, GELU, Linear", "ffn", "MLP", hb), ("+",), ("space", 0.2),
             ("LayerNorm (final)", "norm", "GPT.ln_f", 0.4),
             ("Linear d_model → V (LM head)", "head", "GPT.lm_head", hb)]
    emb, ln1, attn, add1, ln2, mlp, add2, lnf, head = _chain(ax, cx, 2.05, w, items, gap=gap)
    _arrow(ax, wte.top, emb.left)
    _arrow(ax, wpe.top, emb.right)
    for before, add in ((ln1, add1), (ln2, add2)):
        _residual(ax, cx, before.y - before.h / 2 - gap / 2, add, -(w / 2 + 0.22))
    bottom, top = ln1.y - ln1.h / 2 - 0.22, add2.y + 0.12 + 0.14
    _frame(ax, cx - w / 2 - 0.4, bottom, cx + w / 2 + 0.15, top, "N ×", cx - w / 2 - 0.5)
    _note(ax, cx - w / 2 - 0.5, (bottom + top) / 2 - 0.25, "Block", ha="right", family=_MONO, color=_TEXT)
    # The LM head reuses the token embedding matrix (weight tying).
    tie = _mix(KIND_COLOURS["embed"], -0.35)
    tie_x = cx - w / 2 - 1.35
    _path(ax, [head.left, (tie_x, head.y), (tie_x, wte.y), wte.left], colour=tie, dashed=True)
    _note(ax, tie_x + 0.08, (lnf.y + top) / 2 - 0.05, "tied weights:\nlm_head = wte", color=tie, linespacing=1.2)
    _arrow(ax, head.top, (cx, head.y + 0.5))
    # Shapes on the right of the stream.
    sx = cx + w / 2 + 0.3
    _note(ax, sx, emb.y, "x: (B, T, d_model)")
    _note(ax, sx, attn.y, "q, k, v: (B, h, T, d_k)\ncausal mask (T, T)", linespacing=1.2)
    _note(ax, sx, add1.y, "(B, T, d_model)")
    _note(ax, sx, mlp.y, "d_model → 4·d_model → d_model\nhidden (B, T, 4·d_model)", linespacing=1.2)
    _note(ax, sx, add2.y, "(B, T, d_model)")
    _note(ax, cx + 0.1, head.y + 0.45, "logits (B, T, V),  V = vocab_size")
    d_k, n_params = d_model // n_head, gpt_parameter_count(n_layer, d_model, vocab_size, block_size)
    _legend_panel(ax, 7.08, 7.6, "GPTConfig", [
        f"n_layer    N       = {n_layer}", f"d_model    d_model = {d_model}", f"n_head     h       = {n_head}",
        f"head_dim   d_k     = {d_k}", f"d_ff       4·d_model = {4 * d_model}", f"block_size T ≤ {block_size}",
        f"vocab_size V       = {vocab_size}", f"parameters {n_params:,}"], width=2.45)
    _footer(ax, "Classes: llmbook.gpt (GPT, GPTConfig, Block, CausalSelfAttention, MLP); LayerNorms are torch.nn.LayerNorm",
            y=0.2)
    return fig


# ---------------------------------------------------------------------------- chapter 7
BERT_EXAMPLE = ("[CLS]", "my", "dog", "is", "cute", "[SEP]", "he", "likes", "play", "##ing", "[SEP]")


def bert_inputs(tokens: Sequence[str] = BERT_EXAMPLE, masked: Sequence[int] = (2, 8)) -> Figure:
    """BERT's input (token + segment + position embeddings) and its two pre-training heads.

    ``tokens`` is a WordPiece sequence starting with [CLS] (Devlin et al., 2019, figure 2);
    segment A runs to the first [SEP], segment B after it. ``masked`` lists the positions
    replaced by [MASK], which the masked-LM head must predict; the next-sentence head
    reads the pooled [CLS] vector.

    >>> fig = bert_inputs(["[CLS]", "hello", "world", "[SEP]"], masked=[2])
    >>> plt.close(fig)
    """
    if isinstance(tokens, str) or not isinstance(tokens, Sequence) or not all(isinstance(t, str) for t in tokens):
        raise TypeError("tokens must be a sequence of str (WordPiece tokens)")
    tokens = list(tokens)
    if not 2 <= len(tokens) <= 11:
        raise ValueError(f"tokens must hold 2 to 11 tokens to fit the width, got {len(tokens)}")
    if tokens[0] != "[CLS]":
        raise ValueError(f"tokens must start with [CLS], got {tokens[0]!r}")
    if isinstance(masked, (str, bytes)) or not isinstance(masked, Sequence):
        raise TypeError("masked must be a sequence of positions (ints)")
    masked = sorted({_check_int("masked", i, 0, len(tokens) - 1) for i in masked})
    for i in masked:
        if tokens[i] in ("[CLS]", "[SEP]", "[PAD]"):
            raise ValueError(f"masked position {i} is the special token {tokens[i]}; BERT never masks those")
    first_sep = tokens.index("[SEP]") if "[SEP]" in tokens else len(tokens) - 1
    segments = ["A" if i <= first_sep else "B" for i in range(len(tokens))]

    fig, ax = _canvas(7.4)
    _title(ax, WIDTH / 2, 7.15, "BERT: input embeddings and pre-training heads")
    pitch, w = 0.69, 0.62
    x0 = 2.1 + pitch * (11 - len(tokens)) / 2  # centre shorter sequences under the same labels
    xs = [x0 + i * pitch for i in range(len(tokens))]
    shown = ["[MASK]" if i in masked else t for i, t in enumerate(tokens)]
    rows = [  # (y, label, class, kind, per-token text)
        (0.95, "Input", None, "tensor", shown),
        (1.65, "Token embeddings", "BertEmbeddings.word", "embed", [f"E_{t}" for t in shown]),
        (2.35, "Segment embeddings", "BertEmbeddings.segment", "embed", [f"E_{s}" for s in segments]),
        (3.05, "Position embeddings", "BertEmbeddings.position", "pos", [f"E_{i}" for i in range(len(tokens))]),
    ]
    for y, label, cls, kind, texts in rows:
        ax.text(0.1, y + (0.08 if cls else 0), label, ha="left", va="center", fontsize=FONT, color=_TEXT)
        if cls:
            _note(ax, 0.1, y - 0.16, cls, family=_MONO)
        for x, text in zip(xs, texts):
            _box(ax, x, y, w, 0.38, text, kind, fontsize=SMALL)
        if y > 1.0:  # "+" between embedding rows, arrows from the input row into the first
            for x in xs:
                if y > 1.7:
                    ax.text(x, y - 0.35, "+", ha="center", va="center", fontsize=FONT + 1, color=_TEXT)
                else:
                    _arrow(ax, (x, 0.95 + 0.19), (x, y - 0.19))
    for i in masked:
        _note(ax, xs[i], 0.6, f"was: {tokens[i]}", ha="center")
    span = xs[-1] - xs[0] + w
    cx = (xs[0] + xs[-1]) / 2
    emb = _box(ax, cx, 3.85, span, 0.48, "sum, then LayerNorm and dropout:  x = LN(E_token + E_segment + E_position)",
               "norm", "BertEmbeddings")
    enc = _box(ax, cx, 4.65, span, 0.48, "N × encoder layer: bidirectional self-attention + FFN, Post-LN",
               "attn", "Bert.layers: BertLayer (MultiHeadAttention, FeedForward)")
    for x in (xs[0], xs[-1], cx):
        _arrow(ax, (x, 3.05 + 0.19), (x, emb.y - emb.h / 2))
    _arrow(ax, emb.top, enc.bottom)
    _note(ax, cx + 0.1, 4.25, "(B, T, d_model)")
    hidden = [_box(ax, x, 5.45, w, 0.38, "$C$" if i == 0 else f"$T_{{{i}}}$", "tensor", fontsize=SMALL)
              for i, x in enumerate(xs)]
    for hbox in hidden:
        _arrow(ax, (hbox.x, enc.y + enc.h / 2), hbox.bottom)
    nsp = _box(ax, xs[0], 6.25, w, 0.48, "NSP", "head", "NSPHead")
    _arrow(ax, hidden[0].top, nsp.bottom)
    _note(ax, nsp.x, 6.8, "IsNext /\nNotNext", ha="center", color=_TEXT, linespacing=1.15)
    _note(ax, nsp.x - w / 2 - 0.1, 5.85, "pooled [CLS]:\ntanh(W C + b),\nBert.pooler", ha="right", linespacing=1.2)
    for i in masked:
        mlm = _box(ax, xs[i], 6.25, w, 0.48, "MLM", "head", "MLMHead")
        _arrow(ax, hidden[i].top, mlm.bottom)
        _note(ax, xs[i], 6.75, tokens[i], ha="center", color=_TEXT, fontsize=FONT)
    _footer(ax, "Classes: llmbook.bert (Bert, BertEmbeddings, BertLayer, BertForPreTraining with MLMHead and NSPHead); "
                "masking: llmbook.bert.mask_tokens", y=0.2)
    return fig


# ---------------------------------------------------------------------------- chapter 8
def _panel(ax: Axes, x0: float, y0: float, x1: float, y1: float, title: str, cls: str) -> None:
    """A light frame around a close-up, with its title and the class it shows."""
    ax.add_patch(FancyBboxPatch((x0, y0), x1 - x0, y1 - y0, boxstyle="round,pad=0,rounding_size=0.1",
                                fc="#FAFAFA", ec="#BBBBBB", lw=0.8, zorder=0))
    ax.text((x0 + x1) / 2, y1 - 0.22, title, ha="center", va="center", fontsize=FONT + 1, color=_TEXT)
    _note(ax, (x0 + x1) / 2, y1 - 0.47, cls, ha="center", family=_MONO, color=_TEXT)


def _row(ax: Axes, xs: Sequence[float], y: float, w: float, specs: Sequence[tuple]) -> list[_Box]:
    """Boxes side by side, each joined to the next by an arrow (a left-to-right pipeline).

    Each spec is ``(title, kind)`` or ``(title, kind, cls)``.
    """
    boxes = [_box(ax, x, y, w, 0.5, *spec) for x, spec in zip(xs, specs)]
    for a, b in zip(boxes, boxes[1:]):
        _arrow(ax, a.right, b.left)
    return boxes


def llama_block(n_heads: int = 9, n_kv_heads: int = 3) -> Figure:
    """The LLaMA decoder block (Touvron et al., 2023): RMSNorm, RoPE, grouped-query attention, SwiGLU.

    ``n_heads`` query heads (h) share ``n_kv_heads`` key/value heads (Ainslie et al.,
    2023); the defaults are SmolLM2-135M's 9 and 3. n_kv_heads must divide n_heads.

    >>> fig = llama_block(n_heads=8, n_kv_heads=2)
    >>> plt.close(fig)
    """
    h = _check_int("n_heads", n_heads, 1, 12)
    g = _check_int("n_kv_heads", n_kv_heads, 1, h)
    _check_divides("n_kv_heads", g, "n_heads", h)
    fig, ax = _canvas(7.7)
    _title(ax, WIDTH / 2, 7.45, "LLaMA decoder block: RMSNorm, RoPE, grouped-query attention, SwiGLU")
    # Left: the block, Pre-norm with RMSNorm.
    cx, w = 2.3, 2.5
    x_in, n1, attn, add1, n2, ffn, add2 = _chain(ax, cx, 0.85, w, [
        ("x  (B, T, d_model)", "tensor", None, 0.34), ("space", 0.2),
        ("RMSNorm", "norm", "input_layernorm", 0.46),
        ("Grouped-query attention", "attn", "GroupedQueryAttention", 0.5), ("+",),
        ("RMSNorm", "norm", "post_attention_layernorm", 0.46),
        ("SwiGLU feed-forward", "ffn", "SwiGLU", 0.5), ("+",)], gap=0.3)
    for before, add in ((n1, add1), (n2, add2)):
        _residual(ax, cx, before.y - before.h / 2 - 0.15, add, -(w / 2 + 0.2))
    bottom, top = n1.y - n1.h / 2 - 0.3, add2.y + 0.3
    _frame(ax, cx - w / 2 - 0.35, bottom, cx + w / 2 + 0.12, top, "N ×", cx - w / 2 - 0.42)
    _note(ax, cx - 0.12, top + 0.17, "LlamaBlock", ha="right", family=_MONO, color=_TEXT)
    _arrow(ax, add2.top, (cx, top + 0.6))
    _note(ax, cx + 0.1, top + 0.62, "after N blocks: RMSNorm and\nthe LM head (tied), in Llama", linespacing=1.25)
    px0, px1, mid = 4.6, 9.5, 7.05

    # Bottom right: grouped-query attention, level with the attention box.
    gy0, gy1 = 0.55, 3.95
    _panel(ax, px0, gy0, px1, gy1, f"Grouped-query attention: h = {h} query heads, n_kv = {g} K/V heads",
           "GroupedQueryAttention")
    _path(ax, [attn.right, (px0, attn.y)], colour="#9A9A9A", dashed=True)
    per = h // g
    pitch = min(0.4, (px1 - px0 - 0.6) / (h + 0.6 * (g - 1)))
    size, gap = 0.8 * pitch, 0.6 * pitch
    x = mid - (h * pitch + (g - 1) * gap) / 2 + pitch / 2
    y_q, y_kv = 2.0, 2.8
    for group in range(g):
        qs = [x + i * pitch for i in range(per)]
        kv_x = (qs[0] + qs[-1]) / 2
        ax.add_patch(Rectangle((kv_x - size / 2, y_kv - size / 2), size, size, fc=_mix(KIND_COLOURS["attn"], 0.1),
                               ec=_mix(KIND_COLOURS["attn"], -0.3), lw=1.0, zorder=2))
        for qx in qs:
            ax.add_patch(Rectangle((qx - size / 2, y_q - size / 2), size, size, fc=_mix(KIND_COLOURS["attn"], 0.7),
                                   ec=_mix(KIND_COLOURS["attn"], -0.3), lw=1.0, zorder=2))
            ax.add_line(Line2D([kv_x, qx], [y_kv - size / 2, y_q + size / 2], color=_SHAPE, lw=0.9, zorder=1))
        x = qs[-1] + pitch + gap
    _note(ax, mid, y_kv + 0.36, f"k = RoPE(x W_K), v = x W_V:  (B, n_kv, T, d_k), n_kv = {g}", ha="center")
    _note(ax, mid, y_q - 0.36, f"q = RoPE(x W_Q):  (B, h, T, d_k);  each K/V head serves h / n_kv = {per}",
          ha="center")
    _row(ax, [5.2, 6.45, 7.7, 8.9], 1.0, 0.95, [
        ("project", "attn", "q/k/v_proj"), ("RoPE", "pos", "apply_rope"),
        ("causal\nattention", "op"), ("W_O", "attn", "o_proj")])

    # Top right: SwiGLU, level with the feed-forward box.
    sy0, sy1 = 4.2, 7.15
    _panel(ax, px0, sy0, px1, sy1, "SwiGLU: down(SiLU(x W_gate) ⊙ x W_up)", "SwiGLU")
    _path(ax, [ffn.right, (px0, ffn.y)], colour="#9A9A9A", dashed=True)
    gate = _box(ax, mid - 1.2, 4.85, 1.9, 0.46, "W_gate: d_model → d_ff", "ffn", "gate_proj")
    up = _box(ax, mid + 1.2, 4.85, 1.9, 0.46, "W_up: d_model → d_ff", "ffn", "up_proj")
    silu = _box(ax, gate.x, 5.55, 1.3, 0.36, "SiLU", "op")
    mult = _box(ax, mid, 5.55, 0.3, 0.3, "⊙", "op")
    down = _box(ax, mid, 6.2, 2.1, 0.42, "W_down: d_ff → d_model", "ffn", "down_proj")
    _arrow(ax, gate.top, silu.bottom)
    _arrow(ax, silu.right, mult.left)
    _path(ax, [up.top, (up.x, mult.y), mult.right])
    _arrow(ax, mult.top, down.bottom)
    _note(ax, mid, 4.43, "input: RMSNorm(x)  (B, T, d_model)", ha="center")
    _note(ax, up.x + 0.1, 5.4, "(B, T, d_ff)")
    _note(ax, down.x + down.w / 2 + 0.1, down.y, "(B, T, d_model)")
    _footer(ax, "Classes: llmbook.llama (Llama, LlamaBlock, RMSNorm, GroupedQueryAttention, SwiGLU), "
                "llmbook.positional.apply_rope", y=0.2)
    return fig
