"""Positional-encoding explorer: the sinusoidal table, its waves, and similarity against distance.

``positional_figure(d_model, base, positions, dims, rope)`` draws three panels from data
computed by ``llmbook.positional``:

1. the encoding matrix as a heatmap (positions x dimensions);
2. a few chosen dimensions as waves over position (low dimensions oscillate fast,
   high ones slowly);
3. similarity against distance: for sinusoidal encodings PE(p) . PE(p + k) for several
   starting positions p (the curves coincide: the dot product depends on k only); with
   ``rope`` the RoPE score q_m . k_n of a fixed random query and key, against m - n.

``positional_data(...)`` computes what the panels show; ``positional_spec(...)`` packs it
for the browser view (``llmbook.viz.frontend``). ``positional_explorer()`` has sliders
``d_model``, ``base``, ``positions`` and a toggle ``rope`` (Python recomputes the table)
and a text box ``dims`` handled in the browser from the table already sent (choosing
dimensions needs no kernel; clicking a column of the heatmap adds it).
"""

from __future__ import annotations

import ipywidgets as widgets
import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure

from ..positional import apply_rope, rope_cache, sinusoidal_encoding
from .frontend import FrontControl, FrontView, round_sig
from .widget import Explorer

__all__ = ["parse_dims", "positional_data", "positional_spec", "positional_figure", "positional_explorer"]


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
            shown = dims if len(dims) <= 40 else dims[:39] + "\u2026"  # never echo a long input whole
            raise ValueError(f"dims must be comma-separated integers, got {shown!r}") from None
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


def _check_sizes(d_model, positions) -> None:
    if not isinstance(positions, int) or isinstance(positions, bool) or positions < 2:
        raise ValueError(f"positions must be an int >= 2, got {positions!r}")
    if not isinstance(d_model, int) or isinstance(d_model, bool) or d_model < 2:
        raise ValueError(f"d_model must be an int >= 2, got {d_model!r}")
    if d_model % 2:
        raise ValueError(f"d_model must be even (sines and cosines come in pairs), got {d_model}")


def positional_data(d_model: int = 64, base: float = 10000.0, positions: int = 100, rope: bool = False) -> dict:
    """The numbers behind the three panels: ``table`` (positions, d_model), its ``name``,
    and ``similarity``: title, axis labels and curves ``(label, ks, values, marker)``.

    >>> d = positional_data(8, 100.0, 10)
    >>> tuple(d["table"].shape), [c[0] for c in d["similarity"]["curves"]]
    ((10, 8), ['from p=0', 'from p=2', 'from p=4'])
    """
    _check_sizes(d_model, positions)
    if rope:
        cos, sin = rope_cache(positions, d_model, base=float(base))
        table = cos  # (P, d): column i and i + d/2 share the angle pos * w_i
        name = f"RoPE cos(pos * w) (rotate-half layout, head_dim={d_model})"
    else:
        table = sinusoidal_encoding(positions, d_model, base=float(base))
        name = f"sinusoidal PE (d_model={d_model})"
    max_k = positions // 2
    ks = torch.arange(-max_k, max_k + 1) if rope else torch.arange(0, max_k + 1)
    curves = []
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
            curves.append((f"query at m={m}", ks[ok], scores[m, ns[ok]], m == max_k))
        sim = {"title": "RoPE score q_m . k_n vs distance", "xlabel": "m - n", "ylabel": "score"}
    else:
        pe = table.double()
        for p in sorted({0, positions // 4, max_k - 1}):
            ks_ok = ks[p + ks < positions]
            curves.append((f"from p={p}", ks_ok, (pe[p] * pe[p + ks_ok]).sum(-1), False))
        sim = {"title": "PE(p) . PE(p + k) vs distance", "xlabel": "distance k", "ylabel": "dot product"}
    return {"table": table, "name": name, "similarity": {**sim, "curves": curves, "note": _coincide_note(curves, rope)},
            "title": f"base = {float(base):g}, {positions} positions"}


def _coincide_note(curves: list, rope: bool) -> str:
    """A line saying the curves lie on top of each other, when they do (checked, not assumed):
    otherwise a reader sees one colour and a legend of several."""
    ref = {int(k): float(v) for k, v in zip(curves[0][1].tolist(), curves[0][2].tolist())}
    scale = max(1e-12, max(abs(v) for v in ref.values()))
    for _, ks, values, _ in curves[1:]:
        for k, v in zip(ks.tolist(), values.tolist()):
            if int(k) in ref and abs(float(v) - ref[int(k)]) > 1e-6 * scale:
                return ""
    what = "the score depends on m - n only" if rope else "the product depends on k only"
    return f"the {len(curves)} curves coincide: {what}"


def positional_spec(d_model: int = 64, base: float = 10000.0, positions: int = 100, rope: bool = False) -> dict:
    """``positional_data`` as the browser view's JSON (arrays rounded to 4 significant digits)."""
    d = positional_data(d_model, base, positions, rope)
    sim = d["similarity"]
    series = [{"label": lab, "x": [int(v) for v in x.tolist()], "y": round_sig(y), "marker": bool(mk)}
              for lab, x, y, mk in sim["curves"]]
    return {"kind": "positional", "title": d["title"], "table_title": d["name"], "table": round_sig(d["table"]),
            "similarity": {"title": sim["title"], "xlabel": sim["xlabel"], "ylabel": sim["ylabel"], "series": series,
                           "note": sim["note"]}}


def positional_figure(d_model: int = 64, base: float = 10000.0, positions: int = 100, dims: str | list[int] = "0, 4, 16",
                      rope: bool = False) -> Figure:
    """The three-panel picture described in the module docstring.

    >>> fig = positional_figure(16, 10000.0, 20, "0, 2")
    >>> len(fig.axes)   # heatmap, its colour bar, waves, similarity
    4
    >>> plt.close(fig)
    """
    _check_sizes(d_model, positions)
    chosen = parse_dims(dims, d_model)
    d = positional_data(d_model, base, positions, rope)
    table = d["table"]

    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2))
    im = axes[0].imshow(table.numpy(), aspect="auto", cmap="RdBu_r", vmin=-1, vmax=1, interpolation="nearest")
    axes[0].set(title=d["name"], xlabel="dimension", ylabel="position")
    axes[0].grid(False)
    fig.colorbar(im, ax=axes[0], shrink=0.8)

    pos = torch.arange(positions)
    for dim in chosen:
        axes[1].plot(pos, table[:, dim], label=f"dim {dim}")
    axes[1].set(title="chosen dimensions as waves", xlabel="position", ylabel="value", ylim=(-1.15, 1.15))
    # legends below the axes, never over the curves
    axes[1].legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=3, fontsize=8)

    sim = d["similarity"]
    n = len(sim["curves"])
    for k, (label, ks, values, marker) in enumerate(sim["curves"]):
        # thick to thin when they coincide, so every colour stays visible
        width = 1.5 + (2.2 * (n - 1 - k) if sim["note"] else 0)
        axes[2].plot(ks, values, marker="." if marker else None, label=label, linewidth=width)
    axes[2].set(title=sim["title"] + (f"\n{sim['note']}" if sim["note"] else ""), xlabel=sim["xlabel"], ylabel=sim["ylabel"])
    axes[2].title.set_fontsize(10)
    axes[2].legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=3, fontsize=8)
    fig.suptitle(d["title"])
    return fig


def positional_explorer(d_model: int = 64, base: float = 10000.0, positions: int = 100, dims: str = "0, 4, 16") -> Explorer:
    """Explorer: sliders d_model, base, positions and toggle rope (Python); text dims (browser)."""
    positional_figure(d_model, base, positions, dims)  # fail early on a bad default
    plt.close("all")
    controls = {
        "d_model": widgets.IntSlider(value=d_model, min=4, max=256, step=4, description="d_model", continuous_update=False),
        "base": widgets.FloatLogSlider(value=base, base=10, min=1, max=6, step=0.25, description="base", continuous_update=False),
        "positions": widgets.IntSlider(value=positions, min=8, max=512, step=8, description="positions", continuous_update=False),
        "rope": widgets.ToggleButton(value=False, description="RoPE view"),
    }
    front = FrontView(dims=dims)
    return Explorer(positional_figure, controls, title="Positional encodings", front=front, spec=positional_spec,
                    front_controls={"dims": FrontControl(front, "dims", "dims",
                                                         check=lambda v: parse_dims(v, controls["d_model"].value))},
                    summary="Positional encodings: interactive (d_model, base, positions, RoPE view, dims); "
                            "run the notebook to use it.")
