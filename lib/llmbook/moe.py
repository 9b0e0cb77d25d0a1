"""Mixture of experts: a top-k gated feed-forward layer and a GPT built from it.

Covers: a router (one linear layer, d_model -> n_experts, no bias) whose softmax picks the
k most probable experts for each token; gates renormalised over those k
(g_i = p_i / sum_{j in top-k} p_j); experts that are the chapter-6 feed-forward network
h(x) = W2 act(W1 x) (``llmbook.gpt.MLP``); the Switch/GShard load-balancing loss
n_experts * sum_i f_i P_i; expert usage counts; ``MoEGPT``, the chapter-6 GPT with
mixture-of-experts feed-forward layers; and ``count_parameters`` (total vs active per
token).

Leaves out: expert capacity and token dropping (every token reaches its k experts
however unbalanced the routing), router noise and the router z-loss, expert
parallelism across devices (here the experts run one after another on one device), and
shared experts. On the CPU each expert runs only on its tokens; on a GPU and under
``torch.compile`` every expert runs on every token with a zero gate where it was not
chosen (same result, no host sync: see ``MoEFeedForward.forward``).

Papers: Jacobs, Jordan, Nowlan & Hinton 1991, *Adaptive Mixtures of Local Experts*;
Shazeer et al. 2017, *Outrageously Large Neural Networks: The Sparsely-Gated
Mixture-of-Experts Layer*; Lepikhin et al. 2021, *GShard*; Fedus, Zoph & Shazeer 2022,
*Switch Transformers* (the balancing loss in this form).

Shape legend: B batch, T positions, N = B*T tokens, C = d_model, E experts, K = k chosen
per token.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F

from .device import check_index_range, values_checkable
from .gpt import GPT, MLP, GPTConfig

__all__ = ["Routing", "Router", "MoEFeedForward", "MoEGPT", "load_balancing_loss", "count_parameters"]


def _check_int(name: str, value: object, low: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < low:
        raise ValueError(f"{name} must be >= {low}, got {value}")
    return value


def _check_k(k: object, n_experts: int) -> int:
    _check_int("k", k)
    if k > n_experts:
        raise ValueError(f"k={k} must be <= n_experts={n_experts}: a token cannot use more experts than exist")
    return k


@dataclass
class Routing:
    """Where a batch of N tokens went.

    ``probs`` (N, E) softmax of the router logits; ``indices`` (N, K) the chosen experts,
    most probable first; ``gates`` (N, K) their weights, summing to 1 per token;
    ``counts`` (E,) how many tokens each expert received; ``aux_loss`` the balancing
    loss (a 0-dim tensor that carries gradient to the router).
    """

    probs: torch.Tensor
    indices: torch.Tensor
    gates: torch.Tensor
    counts: torch.Tensor
    aux_loss: torch.Tensor


def _counts(indices: torch.Tensor, n_experts: int) -> torch.Tensor:
    """(E,) how often each expert index occurs; unlike ``bincount``, no host sync on a GPU."""
    flat = indices.reshape(-1)
    return torch.zeros(n_experts, dtype=torch.long, device=indices.device).scatter_add_(0, flat, torch.ones_like(flat))


def load_balancing_loss(probs: torch.Tensor, indices: torch.Tensor, n_experts: int) -> torch.Tensor:
    """Switch Transformer's auxiliary loss: ``n_experts * sum_i f_i * P_i``.

    ``f_i`` is the fraction of the N*K routing slots sent to expert i (it counts hard
    decisions, so no gradient flows through it); ``P_i`` is the mean router probability
    of expert i (differentiable). Perfectly balanced routing, f_i = P_i = 1/E, gives
    exactly 1; if the router's probabilities agree with its choices (f = P) the loss is
    E * sum_i f_i^2 >= 1 (Cauchy-Schwarz), with equality only when all experts get the
    same share, so minimising it spreads the tokens out.

    >>> probs = torch.full((8, 4), 0.25)                 # uniform router
    >>> idx = torch.arange(8).remainder(4).unsqueeze(1)  # tokens dealt round-robin
    >>> float(load_balancing_loss(probs, idx, 4))
    1.0
    >>> skewed = torch.tensor([[0.7, 0.1, 0.1, 0.1]]).repeat(8, 1)
    >>> round(float(load_balancing_loss(skewed, torch.zeros(8, 1, dtype=torch.long), 4)), 4)
    2.8
    """
    _check_int("n_experts", n_experts)
    if not isinstance(probs, torch.Tensor) or probs.dim() != 2 or probs.shape[1] != n_experts:
        raise ValueError(f"probs must be an (N, n_experts={n_experts}) tensor, got shape {tuple(getattr(probs, 'shape', ()))}")
    if not isinstance(indices, torch.Tensor) or indices.dim() != 2 or indices.shape[0] != probs.shape[0]:
        raise ValueError(f"indices must be an (N={probs.shape[0]}, k) tensor, got shape {tuple(getattr(indices, 'shape', ()))}")
    check_index_range("indices", indices, n_experts, what="expert indices")
    counts = _counts(indices, n_experts).to(probs.dtype)  # (E,)
    f = counts / indices.numel()  # (E,) share of routing slots
    P = probs.mean(dim=0)  # (E,) mean probability
    return n_experts * (f * P).sum()


class Router(nn.Module):
    """Softmax over experts, keep the top k, renormalise their probabilities into gates.

    With ``k = 1`` the renormalised gate is always 1, so the router's only gradient is
    the balancing loss; Switch Transformers keep the raw probability as the gate
    instead (``normalize=False``).
    """

    def __init__(self, d_model: int, n_experts: int, k: int, normalize: bool = True):
        super().__init__()
        _check_int("d_model", d_model)
        _check_int("n_experts", n_experts)
        self.n_experts, self.k = n_experts, _check_k(k, n_experts)
        self.normalize = bool(normalize)
        self.proj = nn.Linear(d_model, n_experts, bias=False)

    def forward(self, x: torch.Tensor) -> Routing:
        """Route tokens ``x`` (N, C)."""
        if not isinstance(x, torch.Tensor) or x.dim() != 2 or x.shape[1] != self.proj.in_features:
            raise ValueError(f"x must be an (N, d_model={self.proj.in_features}) tensor, got shape "
                             f"{tuple(getattr(x, 'shape', ()))}")
        probs = self.proj(x).float().softmax(dim=-1)  # (N, E), in fp32 for stable gates
        top_p, indices = probs.topk(self.k, dim=-1)  # (N, K) each, most probable first
        gates = top_p / top_p.sum(dim=-1, keepdim=True) if self.normalize else top_p  # (N, K)
        counts = _counts(indices, self.n_experts)  # (E,)
        aux = load_balancing_loss(probs, indices, self.n_experts)
        return Routing(probs=probs, indices=indices, gates=gates.to(x.dtype), counts=counts, aux_loss=aux)


class MoEFeedForward(nn.Module):
    """y = sum over the k chosen experts of gate_i * expert_i(x), token by token.

    Each expert is the chapter-6 ``MLP`` of width ``expert_config.d_ff``. The routing of
    the latest forward call is kept in ``self.routing`` (a ``Routing``), so that a model
    can add the balancing loss to its training loss and a plot can count expert usage.
    """

    def __init__(self, config: GPTConfig, n_experts: int, k: int, expert_d_ff: Optional[int] = None,
                 normalize_gates: bool = True):
        super().__init__()
        if not isinstance(config, GPTConfig):
            raise TypeError(f"config must be a GPTConfig, got {type(config).__name__}")
        _check_int("n_experts", n_experts)
        _check_k(k, n_experts)
        expert_config = replace(config, d_ff=_check_int("expert_d_ff", expert_d_ff)) if expert_d_ff is not None else config
        self.d_model, self.n_experts, self.k = config.d_model, n_experts, k
        self.router = Router(config.d_model, n_experts, k, normalize=normalize_gates)
        self.experts = nn.ModuleList(MLP(expert_config) for _ in range(n_experts))
        self.routing: Optional[Routing] = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not isinstance(x, torch.Tensor) or x.dim() < 2 or x.shape[-1] != self.d_model:
            raise ValueError(f"x must be a (..., d_model={self.d_model}) tensor, got shape {tuple(getattr(x, 'shape', ()))}")
        shape = x.shape
        flat = x.reshape(-1, self.d_model)  # (N, C)
        routing = self.router(flat)
        self.routing = routing
        out = torch.zeros_like(flat)  # (N, C)
        if not values_checkable(flat):
            # On a GPU (or under torch.compile) finding each expert's tokens needs their count
            # on the host: a sync per expert, and a data-dependent shape that breaks the graph.
            # Instead every expert runs on every token and its output is weighted by its gate,
            # 0 where it was not chosen: the same sum, E/K times the FFN work, no sync.
            weight = torch.zeros(flat.shape[0], self.n_experts, dtype=routing.gates.dtype, device=flat.device)
            weight = weight.scatter(1, routing.indices, routing.gates)  # (N, E), K non-zeros per row
            for e, expert in enumerate(self.experts):
                out = out + expert(flat) * weight[:, e:e + 1]
            return out.view(shape)
        for e, expert in enumerate(self.experts):
            token, slot = (routing.indices == e).nonzero(as_tuple=True)  # tokens that chose e, and in which slot
            if token.numel() == 0:
                continue  # an unused expert costs nothing
            y = expert(flat[token]) * routing.gates[token, slot].unsqueeze(1)  # (n_e, C)
            out.index_add_(0, token, y)
        return out.view(shape)


class MoEGPT(GPT):
    """The chapter-6 GPT with mixture-of-experts feed-forward layers.

    Every ``moe_every``-th block (counting from the first; 1 = all of them) has its
    ``MLP`` replaced by a ``MoEFeedForward`` of ``n_experts`` experts of width
    ``expert_d_ff`` (default ``config.d_ff``), ``k`` of which run per token. Everything
    else is ``GPT``: same attention, embeddings, initialisation, generation.

    In training mode the loss returned with ``targets`` is the cross-entropy plus
    ``aux_loss_weight`` times the balancing loss averaged over the MoE layers; in eval
    mode it is the plain cross-entropy, comparable with a dense GPT's.
    """

    def __init__(self, config: GPTConfig, n_experts: int, k: int, expert_d_ff: Optional[int] = None,
                 aux_loss_weight: float = 0.01, moe_every: int = 1, normalize_gates: bool = True):
        if (not isinstance(aux_loss_weight, (int, float)) or isinstance(aux_loss_weight, bool)
                or not 0 <= aux_loss_weight < float("inf")):  # NaN fails every comparison
            raise ValueError(f"aux_loss_weight must be a finite number >= 0, got {aux_loss_weight!r}")
        _check_int("moe_every", moe_every)
        super().__init__(config)
        self.n_experts, self.k, self.aux_loss_weight = n_experts, k, float(aux_loss_weight)
        self.moe_layers = [i for i in range(config.n_layer) if i % moe_every == 0]
        for i in self.moe_layers:
            self.blocks[i].mlp = MoEFeedForward(config, n_experts, k, expert_d_ff, normalize_gates)
            self.blocks[i].mlp.apply(self._init_weights)  # GPT-2 init, as for the dense MLP it replaces

    def moe_modules(self) -> list[MoEFeedForward]:
        return [self.blocks[i].mlp for i in self.moe_layers]

    def aux_loss(self) -> torch.Tensor:
        """Balancing loss of the latest forward pass, averaged over the MoE layers."""
        routings = [m.routing for m in self.moe_modules()]
        if any(r is None for r in routings):
            raise RuntimeError("no forward pass has run yet, so there is no routing to measure")
        return torch.stack([r.aux_loss for r in routings]).mean()

    def expert_counts(self) -> torch.Tensor:
        """(n_moe_layers, n_experts) tokens sent to each expert in the latest forward pass."""
        routings = [m.routing for m in self.moe_modules()]
        if any(r is None for r in routings):
            raise RuntimeError("no forward pass has run yet, so there are no expert counts")
        return torch.stack([r.counts for r in routings])

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None, return_attention: bool = False,
                kv_cache=None):
        out = super().forward(idx, targets, return_attention=return_attention, kv_cache=kv_cache)
        if targets is not None and self.training and self.aux_loss_weight > 0:
            out = (out[0], out[1] + self.aux_loss_weight * self.aux_loss()) + tuple(out[2:])
        return out


def count_parameters(model: nn.Module) -> dict[str, int]:
    """Total parameters and those a single token uses (``active``).

    For a ``MoEGPT`` the active count keeps k of the n experts in every MoE layer (the
    router always runs); for any other module active = total. Tied matrices count once.

    >>> cfg = GPTConfig.baby(65)
    >>> dense = count_parameters(GPT(cfg))
    >>> moe = count_parameters(MoEGPT(cfg, n_experts=4, k=2, expert_d_ff=256))
    >>> dense["total"] == dense["active"]
    True
    >>> moe["active"] - dense["active"]  # per layer: router 128 x 4, and a second expert's output bias
    2560
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be an nn.Module, got {type(model).__name__}")
    total = sum(p.numel() for p in model.parameters())
    inactive = 0
    for m in model.modules():
        if isinstance(m, MoEFeedForward):
            per_expert = sum(p.numel() for p in m.experts[0].parameters())
            inactive += (m.n_experts - m.k) * per_expert
    return {"total": total, "active": total - inactive}
