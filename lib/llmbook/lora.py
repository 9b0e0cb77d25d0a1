"""LoRA: low-rank adapters on the linear layers of a frozen model.

Covers: ``LoRALinear``, which wraps an ``nn.Linear`` of weight W (out, in) and adds a
trainable update (alpha / r) B A with A (r, in) and B (out, r), B zero-initialised so that
training starts from the frozen model exactly; dropout on the adapter's input; ``merge``
(fold B A into W, for inference at no extra cost) and ``unmerge``; ``apply_lora`` (replace
the named linear layers of a model, freeze everything else) and ``trainable_parameters``;
``save_lora`` / ``load_lora``: an adapter alone (A and B of every layer, a few MB) in a
safetensors file with its settings, written and read by ``llmbook.train``'s checkpoint IO.

Leaves out: quantised base weights (QLoRA), adapters on embeddings or convolutions,
several adapters per layer, rank-stabilised scaling (rsLoRA) and DoRA.

Paper: Hu et al. 2021, *LoRA: Low-Rank Adaptation of Large Language Models*. B zero and
the scaling alpha / r follow the paper; A is drawn Kaiming-uniform, as ``nn.Linear`` draws
its weights, which is the ``peft`` library's default (the paper, Sec. 4.1, draws A from a
random Gaussian). peft's ``LoraLayer`` gives the same output for the same A and B
(tests/test_lora.py).
"""

from __future__ import annotations

import math
import os
from typing import Any, Iterable

import torch
import torch.nn as nn
import torch.nn.functional as F

__all__ = ["LoRALinear", "apply_lora", "merge_lora", "unmerge_lora", "trainable_parameters", "lora_state_dict",
           "save_lora", "load_lora"]


def _check_rank_alpha(r: object, alpha: object, dropout: object) -> None:
    if isinstance(r, bool) or not isinstance(r, int) or r < 1:
        raise ValueError(f"r (the rank) must be an int >= 1, got {r!r}")
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 < alpha < math.inf:
        raise ValueError(f"alpha must be a finite number > 0, got {alpha!r}")
    if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or not 0.0 <= dropout < 1.0:
        raise ValueError(f"dropout must be in [0, 1), got {dropout!r}")


class LoRALinear(nn.Module):
    """``base(x) + (alpha / r) * B(A(dropout(x)))`` with ``base`` frozen.

    >>> torch.manual_seed(0) and None
    >>> layer = LoRALinear(nn.Linear(8, 4), r=2, alpha=4)
    >>> x = torch.randn(3, 8)
    >>> bool(torch.equal(layer(x), layer.base(x)))   # B = 0: the adapter starts as a no-op
    True
    >>> layer.num_trainable()                          # r * (in + out) = 2 * (8 + 4)
    24
    """

    def __init__(self, base: nn.Linear, r: int = 8, alpha: float = 16.0, dropout: float = 0.0):
        super().__init__()
        if not isinstance(base, nn.Linear):
            raise TypeError(f"base must be an nn.Linear, got {type(base).__name__}")
        _check_rank_alpha(r, alpha, dropout)
        self.base = base
        self.r, self.alpha = r, float(alpha)
        self.scaling = self.alpha / r
        w = base.weight
        self.lora_A = nn.Parameter(torch.empty(r, base.in_features, device=w.device, dtype=w.dtype))   # (r, in)
        self.lora_B = nn.Parameter(torch.zeros(base.out_features, r, device=w.device, dtype=w.dtype))  # (out, r)
        nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))  # the same as nn.Linear's (and peft's) default
        self.drop = nn.Dropout(dropout)
        self.merged = False
        for p in self.base.parameters():
            p.requires_grad_(False)

    @property
    def in_features(self) -> int:
        return self.base.in_features

    @property
    def out_features(self) -> int:
        return self.base.out_features

    def delta_weight(self) -> torch.Tensor:
        """The update the adapter adds to W: (alpha / r) B A, shape (out, in)."""
        return (self.lora_B @ self.lora_A) * self.scaling

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.base(x)
        if self.merged:  # W already holds W + (alpha / r) B A
            return y
        return y + F.linear(F.linear(self.drop(x), self.lora_A), self.lora_B) * self.scaling  # (..., out)

    @torch.no_grad()
    def merge(self) -> None:
        """Fold the update into the base weight; the forward pass then costs one matmul."""
        if self.merged:
            raise RuntimeError("this LoRALinear is already merged; call unmerge() first")
        self.base.weight += self.delta_weight()
        self.merged = True

    @torch.no_grad()
    def unmerge(self) -> None:
        """Undo ``merge`` (up to rounding), so that A and B can be trained again."""
        if not self.merged:
            raise RuntimeError("this LoRALinear is not merged")
        self.base.weight -= self.delta_weight()
        self.merged = False

    def num_trainable(self) -> int:
        return self.lora_A.numel() + self.lora_B.numel()

    def extra_repr(self) -> str:
        return f"in={self.in_features}, out={self.out_features}, r={self.r}, alpha={self.alpha:g}, merged={self.merged}"


def apply_lora(model: nn.Module, target_modules: Iterable[str], r: int = 8, alpha: float = 16.0,
               dropout: float = 0.0) -> list[str]:
    """Freeze ``model`` and wrap every ``nn.Linear`` whose name ends with a target in a ``LoRALinear``.

    A target matches a module's full dotted name or its last components (``"c_attn"``
    matches ``blocks.0.attn.c_attn``; ``"attn.c_proj"`` matches attention's projection but
    not the MLP's), as in ``peft``. Every target must match at least one ``nn.Linear``.
    Returns the names of the wrapped layers. The model is changed in place.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be an nn.Module, got {type(model).__name__}")
    if isinstance(target_modules, str):
        target_modules = [target_modules]
    targets = list(target_modules)
    if not targets or not all(isinstance(t, str) and t for t in targets):
        raise ValueError(f"target_modules must be a non-empty list of module names, got {targets!r}")
    _check_rank_alpha(r, alpha, dropout)
    if any(isinstance(m, LoRALinear) for m in model.modules()):
        raise ValueError("model already holds LoRA adapters; apply_lora once per model")
    matches = lambda name, t: name == t or name.endswith("." + t)  # noqa: E731
    linears = [(n, m) for n, m in model.named_modules() if isinstance(m, nn.Linear)]
    for t in targets:
        if not any(matches(n, t) for n, _ in linears):
            names = sorted({n.rsplit(".", 1)[-1] for n, _ in linears})
            raise ValueError(f"target_modules: {t!r} matches no nn.Linear in the model; "
                             f"linear layers are named {names}")
    for p in model.parameters():
        p.requires_grad_(False)
    wrapped = []
    for name, layer in linears:
        if any(matches(name, t) for t in targets):
            parent_name, _, child = name.rpartition(".")
            parent = model.get_submodule(parent_name) if parent_name else model
            setattr(parent, child, LoRALinear(layer, r=r, alpha=alpha, dropout=dropout))
            wrapped.append(name)
    return wrapped


def _lora_layers(model: nn.Module) -> list[LoRALinear]:
    layers = [m for m in model.modules() if isinstance(m, LoRALinear)]
    if not layers:
        raise ValueError("model holds no LoRALinear layers; call apply_lora first")
    return layers


def merge_lora(model: nn.Module) -> None:
    """``merge`` every adapter of ``model``."""
    for m in _lora_layers(model):
        m.merge()


def unmerge_lora(model: nn.Module) -> None:
    """``unmerge`` every adapter of ``model``."""
    for m in _lora_layers(model):
        m.unmerge()


def trainable_parameters(model: nn.Module) -> tuple[int, int]:
    """(trainable, total) numbers of distinct parameters (tied matrices counted once).

    >>> m = nn.Sequential(nn.Linear(10, 10), nn.Linear(10, 2))
    >>> _ = apply_lora(m, ["0"], r=1)
    >>> trainable_parameters(m)   # 1 * (10 + 10) adapter numbers; 110 + 22 frozen
    (20, 152)
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be an nn.Module, got {type(model).__name__}")
    params = list(model.parameters())  # parameters() yields a tied tensor once
    return sum(p.numel() for p in params if p.requires_grad), sum(p.numel() for p in params)


def lora_state_dict(model: nn.Module) -> dict[str, torch.Tensor]:
    """The adapter alone: ``<layer>.lora_A`` and ``<layer>.lora_B`` of every ``LoRALinear``.

    >>> m = nn.Sequential(nn.Linear(4, 4)); _ = apply_lora(m, ["0"], r=2)
    >>> sorted(lora_state_dict(m))
    ['0.lora_A', '0.lora_B']
    """
    _lora_layers(model)  # raises if there is no adapter
    return {k: v for k, v in model.state_dict().items() if k.endswith((".lora_A", ".lora_B"))}


def _settings(model: nn.Module) -> dict[str, Any]:
    layers = {n: m for n, m in model.named_modules() if isinstance(m, LoRALinear)}
    ranks = {(m.r, m.alpha) for m in layers.values()}
    if len(ranks) != 1:
        raise ValueError(f"save_lora needs one rank and alpha for every layer, got {sorted(ranks)}")
    (r, alpha), = ranks
    return {"layers": sorted(layers), "r": r, "alpha": alpha}


def save_lora(path: str | os.PathLike, model: nn.Module, meta: dict | None = None) -> None:
    """Write only the adapter of ``model`` (unmerged) to a safetensors file.

    The file's metadata holds ``meta`` plus ``meta["lora"]``: the wrapped layer names, r and
    alpha, so that ``load_lora`` can rebuild the adapter on a fresh copy of the base model.
    """
    from .train import save_checkpoint

    if any(m.merged for m in _lora_layers(model)):
        raise ValueError("model holds merged adapters; unmerge_lora(model) before saving, so A and B are stored")
    info = dict(meta or {})
    info["lora"] = _settings(model)
    save_checkpoint(path, model, meta=info, keep=lambda name: name.endswith((".lora_A", ".lora_B")))


def load_lora(path: str | os.PathLike, model: nn.Module) -> dict:
    """Put the adapter saved by ``save_lora`` into ``model``; returns the file's metadata.

    A model without adapters gets them first (``apply_lora`` on the saved layer names, r
    and alpha); a model that already has them must have the same layers and shapes.
    Reading goes through ``llmbook.train.load_checkpoint`` (safetensors: nothing is unpickled).
    """
    from .train import load_checkpoint

    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be an nn.Module, got {type(model).__name__}")
    ck = load_checkpoint(path)
    settings = ck["meta"].get("lora")
    if not isinstance(settings, dict) or not {"layers", "r", "alpha"} <= set(settings):
        raise ValueError(f"{path} holds no LoRA settings (meta['lora']); was it written by save_lora?")
    if not any(isinstance(m, LoRALinear) for m in model.modules()):
        apply_lora(model, settings["layers"], r=int(settings["r"]), alpha=float(settings["alpha"]))
    mine = lora_state_dict(model)
    saved = ck["model"]
    if set(saved) != set(mine):
        missing, extra = sorted(set(mine) - set(saved)), sorted(set(saved) - set(mine))
        raise ValueError(f"{path} does not fit this model's adapters: missing {missing[:3]}, unexpected {extra[:3]}")
    for name, t in saved.items():
        if t.shape != mine[name].shape:
            raise ValueError(f"{path}: {name} has shape {tuple(t.shape)}, the model's adapter {tuple(mine[name].shape)}")
    if any(m.merged for m in _lora_layers(model)):
        raise ValueError("model holds merged adapters; unmerge_lora(model) before loading new ones")
    with torch.no_grad():
        for name, t in saved.items():
            model.get_parameter(name).copy_(t)
    return ck["meta"]
