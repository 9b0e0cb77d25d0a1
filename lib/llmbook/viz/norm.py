"""Normalisation explorer: BatchNorm's statistics depend on the batch, LayerNorm's do not.

One fixed example sentence, ``x0`` (``length`` tokens of ``d_model`` features), is
normalised inside batches of different sizes and padding. ``norm_stats(...)`` computes,
for that one example,

- BatchNorm's per-feature mean and standard deviation, estimated from the whole batch
  (all examples x all positions, padding zeros included, as ``nn.BatchNorm1d`` does in
  training mode), next to the "population" values of the data distribution;
- the output BatchNorm gives ``x0`` and the output LayerNorm gives ``x0``, each compared
  with the output it gets from a very large batch (the reference).

``norm_figure(...)`` draws three panels from those numbers and ``norm_explorer()`` wraps
it with sliders ``batch_size``, ``padded_length`` and ``seed`` (which batch mates). The
explorer draws in the browser: ``norm_spec(...)`` sends the same three panels as data (the
reference batch and the data distribution are computed once per seed, so a move costs
milliseconds); ``norm_figure`` stays the static picture.

>>> s = norm_stats(batch_size=4, padded_length=8, seed=0, length=8, d_model=6)
>>> s["ln_change"] < 1e-6 < s["bn_change"]
True
"""

from __future__ import annotations

import functools
import reprlib
from dataclasses import dataclass

import ipywidgets as widgets
import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure

from ..layers import LayerNorm
from .frontend import FrontView, round_sig
from .style import PALETTE
from .widget import Explorer

__all__ = ["NormData", "norm_stats", "norm_figure", "norm_spec", "norm_explorer"]

REFERENCE_BATCH = 2048
LIM = 4.0  # the output panels show [-LIM, LIM] on both axes


@dataclass(frozen=True)
class NormData:
    """The data distribution: each feature j has its own mean mu[j] and scale sd[j]."""

    length: int
    d_model: int
    mu: torch.Tensor
    sd: torch.Tensor
    x0: torch.Tensor  # (length, d_model): the example we follow

    @classmethod
    def make(cls, length: int = 8, d_model: int = 12) -> "NormData":
        g = torch.Generator().manual_seed(1234)
        mu = torch.randn(d_model, generator=g, dtype=torch.float64) * 2.0
        sd = torch.rand(d_model, generator=g, dtype=torch.float64) * 1.5 + 0.5
        x0 = mu + sd * torch.randn(length, d_model, generator=g, dtype=torch.float64)
        return cls(length, d_model, mu, sd, x0)

    def batch(self, batch_size: int, padded_length: int, seed: int) -> torch.Tensor:
        """x0 followed by batch_size - 1 random examples, zero-padded to padded_length."""
        g = torch.Generator().manual_seed(int(seed))
        mates = self.mu + self.sd * torch.randn(batch_size - 1, self.length, self.d_model, generator=g, dtype=torch.float64)
        x = torch.cat([self.x0[None], mates], dim=0)
        pad = torch.zeros(batch_size, padded_length - self.length, self.d_model, dtype=torch.float64)
        return torch.cat([x, pad], dim=1)


def _check_int(name: str, value: object, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an integer, got {reprlib.repr(value)}")
    if value < low:
        raise ValueError(f"{name} must be at least {low}, got {value}")
    return value


def _batchnorm(x: torch.Tensor, eps: float = 1e-5) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Training-mode BatchNorm over (batch, positions) per feature; returns (y, mean, std)."""
    mean = x.mean(dim=(0, 1))
    var = x.var(dim=(0, 1), unbiased=False)
    return (x - mean) / torch.sqrt(var + eps), mean, torch.sqrt(var)


@functools.lru_cache(maxsize=8)
def _data(length: int, d_model: int) -> NormData:
    return NormData.make(length, d_model)


@functools.lru_cache(maxsize=8)
def _layernorm(d_model: int) -> LayerNorm:
    return LayerNorm(d_model).double()


@functools.lru_cache(maxsize=64)
def _reference(length: int, d_model: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """x0's BatchNorm and LayerNorm outputs in a batch of REFERENCE_BATCH (computed once per seed)."""
    ref = _data(length, d_model).batch(REFERENCE_BATCH, length, seed=10_000 + seed)
    bn_ref, _, _ = _batchnorm(ref)
    with torch.no_grad():
        ln_ref = _layernorm(d_model)(ref[:1])[0, :length]
    return bn_ref[0, :length], ln_ref


def norm_stats(batch_size: int = 8, padded_length: int = 8, seed: int = 0, length: int = 8, d_model: int = 12) -> dict:
    """Follow one example through BatchNorm and LayerNorm in a given batch; see the module doc."""
    length = _check_int("length", length, 1)
    d_model = _check_int("d_model", d_model, 2)
    batch_size = _check_int("batch_size", batch_size, 1)
    padded_length = _check_int("padded_length", padded_length, 1)
    seed = _check_int("seed", seed, 0)
    if padded_length < length:
        raise ValueError(f"padded_length must be at least the sentence length {length}, got {padded_length}")
    if batch_size * padded_length < 2:
        raise ValueError("BatchNorm needs at least two values per feature: raise batch_size or padded_length")
    data = _data(length, d_model)
    x = data.batch(batch_size, padded_length, seed)
    bn_ref, ln_ref = (t.clone() for t in _reference(length, d_model, seed))  # the cached ones stay untouched
    bn, bn_mean, bn_std = _batchnorm(x)
    with torch.no_grad():
        ln_out = _layernorm(d_model)(x[:1])[0, :length]  # LayerNorm sees one example at a time
    bn_out = bn[0, :length]
    return {
        "data": data,
        "bn_mean": bn_mean, "bn_std": bn_std,
        "bn_out": bn_out, "bn_ref": bn_ref,
        "ln_out": ln_out, "ln_ref": ln_ref,
        "bn_change": float((bn_out - bn_ref).abs().max()),
        "ln_change": float((ln_out - ln_ref).abs().max()),
    }


def _suptitle(batch_size: int, padded_length: int, seed: int, length: int) -> str:
    pad = f", padded from {length} to {padded_length}" if padded_length > length else ""
    return f"The same sentence x0 in a batch of {batch_size}{pad} (seed {seed}); points on the diagonal = unchanged"


def norm_figure(batch_size: int = 8, padded_length: int = 8, seed: int = 0, length: int = 8, d_model: int = 12) -> Figure:
    """Three panels: BatchNorm's estimated statistics, then x0's BatchNorm and LayerNorm outputs vs the reference."""
    s = norm_stats(batch_size, padded_length, seed, length, d_model)
    data = s["data"]
    feats = torch.arange(data.d_model)
    fig, axes = plt.subplots(1, 3, figsize=(13, 4.2), layout="constrained")
    ax = axes[0]
    ax.errorbar(feats - 0.12, data.mu, yerr=data.sd, fmt="o", color="0.5", label="population mean ± sd")
    ax.errorbar(feats + 0.12, s["bn_mean"], yerr=s["bn_std"], fmt="o", color="C0", label="this batch's estimate")
    ax.set(title="BatchNorm statistics per feature", xlabel="feature j", ylabel="value")
    ax.legend(fontsize=8)
    lim = LIM
    for ax, out, ref, name, change, colour in [
        (axes[1], s["bn_out"], s["bn_ref"], "BatchNorm", s["bn_change"], "C0"),
        (axes[2], s["ln_out"], s["ln_ref"], "LayerNorm", s["ln_change"], "C1"),
    ]:
        ax.plot([-lim, lim], [-lim, lim], color="0.7", lw=1)
        ax.scatter(ref.flatten(), out.flatten(), s=10, color=colour)
        ax.set(xlim=(-lim, lim), ylim=(-lim, lim), aspect="equal",
               title=f"{name}: max change {change:.3f}",
               xlabel=f"output for x0 in a batch of {REFERENCE_BATCH}", ylabel="output for x0 in this batch")
    fig.suptitle(_suptitle(batch_size, padded_length, seed, data.length))
    return fig


def norm_spec(batch_size: int = 8, padded_length: int = 8, seed: int = 0, length: int = 8, d_model: int = 12) -> dict:
    """The browser view's data: the same three panels as ``norm_figure`` (a ``panels`` view)."""
    s = norm_stats(batch_size, padded_length, seed, length, d_model)
    data = s["data"]
    feats = torch.arange(data.d_model, dtype=torch.float64)
    lows = torch.cat([data.mu - data.sd, s["bn_mean"] - s["bn_std"]])
    highs = torch.cat([data.mu + data.sd, s["bn_mean"] + s["bn_std"]])
    pad = 0.06 * float(highs.max() - lows.min())
    stats = {
        "type": "points", "title": "BatchNorm statistics per feature", "xlabel": "feature j", "ylabel": "value",
        "xlim": [-0.6, data.d_model - 0.4], "ylim": [float(lows.min()) - pad, float(highs.max()) + pad], "nx": 7,
        "width": 240, "height": 220, "legend": True,
        "series": [
            {"label": "population mean ± sd", "color": "#808080", "x": round_sig(feats - 0.12), "y": round_sig(data.mu),
             "yerr": round_sig(data.sd)},
            {"label": "this batch's estimate", "color": PALETTE[0], "x": round_sig(feats + 0.12), "y": round_sig(s["bn_mean"]),
             "yerr": round_sig(s["bn_std"])},
        ],
    }
    panels = [stats]
    for key, name, colour in [("bn", "BatchNorm", PALETTE[0]), ("ln", "LayerNorm", PALETTE[1])]:
        panels.append({
            "type": "points", "title": f"{name}: max change {s[key + '_change']:.3f}", "diagonal": True,
            "xlim": [-LIM, LIM], "ylim": [-LIM, LIM], "width": 220, "height": 220,
            "xlabel": f"output for x0 in a batch of {REFERENCE_BATCH}", "ylabel": "output for x0 in this batch",
            "series": [{"label": name, "color": colour, "x": round_sig(s[key + "_ref"].flatten()),
                        "y": round_sig(s[key + "_out"].flatten()), "r": 2.2}],
        })
    return {"kind": "panels", "title": _suptitle(batch_size, padded_length, seed, data.length), "panels": panels}


def norm_explorer(batch_size: int = 8, padded_length: int = 8, seed: int = 0) -> Explorer:
    """Explorer over ``norm_spec`` (browser) and ``norm_figure`` (static): sliders batch_size, padded_length, seed."""
    norm_stats(batch_size, padded_length, seed)  # fail early on a bad default
    controls = {
        "batch_size": widgets.IntSlider(value=batch_size, min=1, max=64, description="batch_size", continuous_update=False),
        "padded_length": widgets.IntSlider(value=padded_length, min=8, max=40, description="padded_length", continuous_update=False),
        "seed": widgets.BoundedIntText(value=seed, min=-1, max=10_000, description="seed"),
    }
    return Explorer(norm_figure, controls, title="BatchNorm vs LayerNorm: one sentence in different batches",
                    front=FrontView(), spec=norm_spec)
