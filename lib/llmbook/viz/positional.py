"""Positional-encoding explorer: the sinusoidal table, its waves, and similarity against distance.

``positional_figure(d_model, base, positions, dims, rope)`` draws three panels from data
computed by ``llmbook.positional``:

1. the encoding matrix as a heatmap (positions x dimensions);
2. a few chosen dimensions as waves over position (low dimensions oscillate fast,
   high ones slowly);
3. similarity against distance: for sinusoidal encodings PE(p) . PE(p + k) for several
   starting positions p (the curves coincide: the dot product depends on k only); with
   ``rope`` the RoPE score q_m . k_n of a fixed random query and key, against m - n.

``positional_explorer()`` wraps it in an ``Explorer`` with sliders ``d_model``, ``base``,
``positions``, a text box ``dims`` and a toggle ``rope``.
"""

from __future__ import annotations

import ipywidgets as widgets
import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure

from ..positional import apply_rope, rope_cache, sinusoidal_encoding
from .widget import Explorer

__all__ = ["parse_dims", "positional_figure", "positional_explorer"]


def parse_dims(dims: str | list[int], d_model: int) -> list[int]:
    """Parse "0, 4, 16" into dimension indices, checking each is in [0, d_model).

    >>> parse_dims("0, 4,16", 32)
    [0, 4, 16]
    """
    if isinstance(dims, str):
        parts = [p for p in dims.replace(";", ",").split(",") if p.strip()]
        if not parts:
            raise ValueError("dims is empty: give dimension indices such as 0, 4, 16")
        try:
            out = [int(p) for p in parts]
        except ValueError:
            raise ValueError(f"dims must be comma-separated integers, got {dims!r}") from None
    elif isinstance(dims, (list, tuple)) and all(isinstance(d, int) for d in dims):
        out = list(dims)
    else:
        raise TypeError(f"dims must be a string like '0, 4' or a list of ints, got {type(dims).__name__}")
    if len(out) > 6:
        raise ValueError(f"dims: choose at most 6 dimensions, got {len(out)}")
    bad = [d for d in out if not 0 <= d < d_model]
    if bad:
        raise ValueError(f"dims {bad} out of range: d_model={d_model} has dimensions 0..{d_model - 1}")
    return out


def positional_figure(d_model: int = 64, base: float = 10000.0, positions: int = 100, dims: str | list[int] = "0, 4, 16",
                      rope: bool = False) -> Figure:
    """The three-panel picture described in the module docstring.

    >>> fig = positional_figure(16, 10000.0, 20, "0, 2")
    >>> len(fig.axes)   # heatmap, its colour bar, waves, similarity
    4
    >>> plt.close(fig)
    """
    if not isinstance(positions, int) or isinstance(positions, bool) or positions < 2:
        raise ValueError(f"positions must be an int >= 2, got {positions!r}")
    if not isinstance(d_model, int) or isinstance(d_model, bool) or d_model < 2:
        raise ValueError(f"d_model must be an int >= 2, got {d_model!r}")
    if d_model % 2:
        raise ValueError(f"d_model must be even (sines and cosines come in pairs), got {d_model}")
    chosen = parse_dims(dims, d_model)
    if rope:
        cos, sin = rope_cache(positions, d_model, base=float(base))
        table = cos  # (P, d): column i and i + d/2 share the angle pos * w_i
        name = f"RoPE cos(pos * w) (rotate-half layout, head_dim={d_model})"
    else:
        table = sinusoidal_encoding(positions, d_model, base=float(base))
        name = f"sinusoidal PE (d_model={d_model})"

    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2))
    im = axes[0].imshow(table.numpy(), aspect="auto", cmap="RdBu_r", vmin=-1, vmax=1, interpolation="nearest")
    axes[0].set(title=name, xlabel="dimension", ylabel="position")
    axes[0].grid(False)
    fig.colorbar(im, ax=axes[0], shrink=0.8)

    pos = torch.arange(positions)
    for d in chosen:
        axes[1].plot(pos, table[:, d], label=f"dim {d}")
    axes[1].set(title="chosen dimensions as waves", xlabel="position", ylabel="value", ylim=(-1.15, 1.15))
    axes[1].legend(loc="lower right", fontsize=8)

    max_k = positions // 2
    ks = torch.arange(-max_k, max_k + 1) if rope else torch.arange(0, max_k + 1)
    if rope:
        # The same query and key vectors, rotated to positions m and n: the score depends on m - n only.
        g = torch.Generator().manual_seed(0)
        q, k = torch.randn(d_model, generator=g), torch.randn(d_model, generator=g)
        cos64, sin64 = cos.double(), sin.double()
        Q = apply_rope(q.double().expand(1, 1, positions, d_model), cos64, sin64)[0, 0]  # (P, d)
        K = apply_rope(k.double().expand(1, 1, positions, d_model), cos64, sin64)[0, 0]
        scores = Q @ K.T  # (P, P): scores[m, n] = q_m . k_n
        for m in sorted({max_k, positions - 1}):
            ns = m - ks
            ok = (ns >= 0) & (ns < positions)
            axes[2].plot(ks[ok], scores[m, ns[ok]], marker="." if m == max_k else None, label=f"query at m={m}")
        axes[2].set(title="RoPE score q_m . k_n vs distance", xlabel="m - n", ylabel="score")
    else:
        pe = table.double()
        for p in sorted({0, positions // 4, max_k - 1}):
            ks_ok = ks[p + ks < positions]
            axes[2].plot(ks_ok, (pe[p] * pe[p + ks_ok]).sum(-1), label=f"from p={p}")
        axes[2].set(title="PE(p) . PE(p + k) vs distance", xlabel="distance k", ylabel="dot product")
    axes[2].legend(fontsize=8)
    fig.suptitle(f"base = {float(base):g}, {positions} positions")
    return fig


def positional_explorer(d_model: int = 64, base: float = 10000.0, positions: int = 100, dims: str = "0, 4, 16") -> Explorer:
    """Explorer over ``positional_figure``: sliders d_model, base, positions; text dims; toggle rope."""
    positional_figure(d_model, base, positions, dims)  # fail early on a bad default
    plt.close("all")
    controls = {
        "d_model": widgets.IntSlider(value=d_model, min=4, max=256, step=4, description="d_model", continuous_update=False),
        "base": widgets.FloatLogSlider(value=base, base=10, min=1, max=6, step=0.25, description="base", continuous_update=False),
        "positions": widgets.IntSlider(value=positions, min=8, max=512, step=8, description="positions", continuous_update=False),
        "dims": widgets.Text(value=dims, description="dims", continuous_update=False),
        "rope": widgets.ToggleButton(value=False, description="RoPE view"),
    }
    return Explorer(positional_figure, controls, title="Positional encodings")
