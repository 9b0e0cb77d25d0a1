"""Checkers for the exercises of chapter 08b, registered on import (see :mod:`llmbook.exercises`)."""

from __future__ import annotations

import math
import random

import torch

from ._core import _cases, _is_placeholder, _NotAttempted, _prediction, _register, _tgen
from .ch06b import _gpt_cfg


def _routing(rng: random.Random):
    n, T = rng.randint(2, 8), rng.randint(5, 40)
    g = _tgen(rng)
    probs = torch.softmax(torch.randn(T, n, generator=g), -1)
    idx = torch.randint(0, n, (T, 1), generator=g)
    f = [float((idx == i).float().mean()) for i in range(n)]
    P = probs.mean(0).tolist()
    return f, P, probs, idx, n


@_register("08b.1", "Where the balancing loss pushes the router", "derive",
           "def aux_grad(f, P):\n    return NotImplemented  # one entry per expert")
def _ex_08b_1(answer, rng, ctx):
    from ..moe import load_balancing_loss
    cases, refs = [], {}
    for _ in range(5):
        f, P, probs, idx, n = _routing(rng)
        # the library's loss, differentiated by autograd with respect to the mean probabilities P
        P_leaf = torch.tensor(P, dtype=torch.float64, requires_grad=True)
        load_balancing_loss(P_leaf.expand(len(idx), n), idx, n).backward()
        cases.append((f, P)); refs[id(f)] = P_leaf.grad.tolist()
    return _cases(answer, lambda f, P: refs[id(f)], cases, rel=1e-5,
                  wrong=[(lambda f, P: [2 * len(f) * p for p in P], "f is counted from hard decisions: it is a constant, not a function of P"),
                         (lambda f, P: [len(f) * p for p in P], "the derivative of f_i P_i with respect to P_i is f_i"),
                         (lambda f, P: list(f), "keep the factor n in front of the sum")],
                  show=lambda a: f"f={[round(x, 3) for x in a[0]]}, P={[round(x, 3) for x in a[1]]}")


@_register("08b.2", "Parameters of a mixture of experts", "derive",
           "def moe_counts(dense_total, L, d, d_ff, n_experts, k):\n    return NotImplemented  # (stored, used per token)")
def _ex_08b_2(answer, rng, ctx):
    from ..gpt import GPT
    from ..moe import MoEGPT, count_parameters
    def ref(dense, L, d, f, n, k):
        cfg = _gpt_cfg(97, 32, L, d).__class__(vocab_size=97, block_size=32, n_layer=L, n_head=1, d_model=d, d_ff=f)
        c = count_parameters(MoEGPT(cfg, n_experts=n, k=k))
        return (c["total"], c["active"])
    cases = []
    for _ in range(3):
        L, d, f = rng.randint(1, 3), 8 * rng.randint(1, 4), 16 * rng.randint(1, 4)
        n = rng.randint(2, 8); k = rng.randint(1, n)
        if True:
            dense = GPT(_gpt_cfg(97, 32, L, d).__class__(vocab_size=97, block_size=32, n_layer=L, n_head=1, d_model=d, d_ff=f)).num_parameters()
        cases.append((dense, L, d, f, n, k))
    def expert(d, f):
        return 2 * d * f + f + d
    return _cases(answer, ref, cases,
                  wrong=[(lambda D, L, d, f, n, k: (D + L * ((n - 1) * expert(d, f)), D + L * (k - 1) * expert(d, f)), "each layer also has a router of n x d weights"),
                         (lambda D, L, d, f, n, k: (D + L * ((n - 1) * expert(d, f) + n * d), D + L * (k * expert(d, f) + n * d)),
                          "the dense total already holds one expert: a token uses k - 1 more"),
                         (lambda D, L, d, f, n, k: (D + L * (n * expert(d, f) + n * d), D + L * (k * expert(d, f) + n * d)),
                          "the dense model's feed-forward layer becomes one of the n experts")],
                  hint="one expert holds 2 d d_ff + d_ff + d parameters",
                  show=lambda a: f"dense_total={a[0]}, L={a[1]}, d={a[2]}, d_ff={a[3]}, n_experts={a[4]}, k={a[5]}")


@_register("08b.3", "Does the router learn with k = 1?", "predict",
           "answer = {'normalized': ..., 'raw': ...}  # 'zero' or 'nonzero' router gradient")
def _ex_08b_3(answer, rng, ctx):
    from ..gpt import GPTConfig
    from ..moe import MoEGPT
    if isinstance(answer, dict) and any(_is_placeholder(v) for v in answer.values()):
        raise _NotAttempted()
    tiny = GPTConfig(vocab_size=13, block_size=8, n_layer=1, n_head=2, d_model=16, d_ff=32)
    x = torch.randint(0, 13, (2, 8), generator=_tgen(rng))
    y = torch.randint(0, 13, (2, 8), generator=_tgen(rng))
    grads, seed = {}, rng.randrange(2**31)
    for normalize in (True, False):
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            m = MoEGPT(tiny, n_experts=4, k=1, aux_loss_weight=0.0, normalize_gates=normalize)
        m(x, y)[1].backward()
        grads[normalize] = float(m.blocks[0].mlp.router.proj.weight.grad.abs().sum())
    # zero up to float32 rounding: autograd's 1/p - p/p^2 leaves about 1e-7 of the real gradient
    zero = grads[True] < 10 * torch.finfo(torch.float32).eps * grads[False]
    measured = {"normalized": "zero" if zero else "nonzero", "raw": "nonzero" if grads[False] > 0 else "zero"}
    return _prediction(answer, measured, (x,), what="a fresh one-layer MoE GPT",
                       wrong=[({"normalized": "nonzero", "raw": "nonzero"}, "with k = 1 the renormalised gate is p / p = 1 whatever the router says"),
                              ({"normalized": "zero", "raw": "zero"}, "Switch's gate is the raw probability p, which scales the expert's output")],
                       hint="answer 'zero' or 'nonzero' for each gate")


@_register("08b.4", "The kNN temperature's two limits", "predict",
           "answer = {'small_tau': ..., 'large_tau': ...}  # 'nearest', 'votes' or 'uniform'")
def _ex_08b_4(answer, rng, ctx):
    from ..retrieval import knn_distribution
    if isinstance(answer, dict) and any(_is_placeholder(v) for v in answer.values()):
        raise _NotAttempted()
    M, K, V = rng.randint(3, 20), rng.randint(3, 12), rng.randint(5, 30)
    g = _tgen(rng)
    dist = torch.rand(M, K, generator=g).add(0.5).sort(1).values * rng.uniform(1, 50)   # distinct, nearest first
    vals = torch.randint(0, V, (M, K), generator=g)
    forms = {"nearest": torch.nn.functional.one_hot(vals[:, 0], V).float(),
             "votes": torch.zeros(M, V).scatter_add_(1, vals, torch.full((M, K), 1.0 / K)),
             "uniform": torch.full((M, V), 1.0 / V)}
    def which(tau):
        p = knn_distribution(dist, vals, V, tau)
        return next((name for name, q in forms.items() if torch.allclose(p, q, atol=1e-3)), "neither")
    measured = {"small_tau": which(1e-4), "large_tau": which(1e6)}
    return _prediction(answer, measured, (M, K, V), what=f"knn_distribution on {M} fresh queries of {K} neighbours",
                       wrong=[({"small_tau": "votes", "large_tau": "nearest"}, "a small temperature sharpens the softmax of -d / tau"),
                              ({"small_tau": "nearest", "large_tau": "uniform"},
                               "only the K neighbours vote: a character none of them stored gets nothing at any temperature")],
                       hint="write the weights softmax(-d / tau) for tau near 0 and for tau very large")

