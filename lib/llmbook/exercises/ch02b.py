"""Checkers for the exercises of chapter 02b (Bahdanau attention), registered on import (see :mod:`llmbook.exercises`)."""

from __future__ import annotations

import random

import torch

from ._core import _cases, _is_placeholder, _NotAttempted, _prediction, _register, _seeded, _tgen


def _additive_module(rng: random.Random, dq: int, dk: int, da: int):
    from ..attention import AdditiveAttention
    with _seeded(rng):
        return AdditiveAttention(dq, dk, da)


@_register("02b.1", "Bahdanau's additive attention weights", "complete",
           "def additive_weights(query, keys, W, U, b, v):\n    return NotImplemented  # your code here")
def _ex_02b_1(answer, rng, ctx):
    cases = []
    for _ in range(4):
        g = _tgen(rng)
        dq, dk, da, S = rng.randint(1, 6), rng.randint(1, 6), rng.randint(2, 8), rng.randint(2, 9)
        cases.append((torch.randn(dq, generator=g), torch.randn(S, dk, generator=g), torch.randn(da, dq, generator=g),
                      torch.randn(da, dk, generator=g), torch.randn(da, generator=g), torch.randn(da, generator=g)))
    def ref(q, K, W, U, b, v):
        from ..attention import AdditiveAttention
        att = AdditiveAttention(W.shape[1], U.shape[1], W.shape[0])
        with torch.no_grad():  # the library's W_q, W_k (bias b) and w are the exercise's W, U (b) and v
            att.W_q.weight.copy_(W), att.W_k.weight.copy_(U), att.W_k.bias.copy_(b), att.w.weight.copy_(v[None])
            return att(q[None], K[None], return_weights=True)[1][0]
    return _cases(answer, ref, cases, rel=1e-5,
                  wrong=[(lambda q, K, W, U, b, v: torch.softmax((W @ q + K @ U.T + b) @ v, -1),
                          "the score passes W q + U k_j + b through tanh before the dot product with v"),
                         (lambda q, K, W, U, b, v: torch.tanh(W @ q + K @ U.T + b) @ v,
                          "these are the scores e_j; the weights are their softmax over the keys"),
                         (lambda q, K, W, U, b, v: torch.softmax(torch.tanh(W @ q + K @ U.T + b), 0) @ v,
                          "take the softmax over the keys after scoring each key with v, not over the hidden units")],
                  hint="e_j = v . tanh(W q + U k_j + b), one score per key; then softmax over j",
                  show=lambda a: f"query of size {a[0].shape[0]}, {a[1].shape[0]} keys of size {a[1].shape[1]}, d_attn={a[2].shape[0]}")


@_register("02b.2", "Parameters of the additive score", "derive",
           "def additive_params(d_query, d_key, d_attn):\n    return NotImplemented")
def _ex_02b_2(answer, rng, ctx):
    cases = [(rng.randint(1, 300), rng.randint(1, 300), rng.randint(1, 300)) for _ in range(5)]
    def ref(dq, dk, da):
        return sum(p.numel() for p in _additive_module(rng, dq, dk, da).parameters())
    return _cases(answer, ref, cases,
                  wrong=[(lambda dq, dk, da: da * (dq + dk), "count the bias b and the vector v too"),
                         (lambda dq, dk, da: da * (dq + dk + 1), "v has d_attn numbers as well"),
                         (lambda dq, dk, da: da * (dq + dk) + 1, "b and v each have d_attn numbers")],
                  hint="W is d_attn x d_query, U is d_attn x d_key, plus the bias b and the vector v",
                  show=lambda a: f"d_query={a[0]}, d_key={a[1]}, d_attn={a[2]}")


@_register("02b.3", "Equal keys and a huge v", "predict",
           "answer = {'equal_keys': ..., 'large_v': ...}  # each 'uniform', 'one-hot' or 'unchanged'")
def _ex_02b_3(answer, rng, ctx):
    if isinstance(answer, dict) and any(_is_placeholder(v) for v in answer.values()):
        raise _NotAttempted()
    dq, dk, da, S = rng.randint(2, 6), rng.randint(2, 6), rng.randint(4, 8), rng.randint(3, 7)
    att = _additive_module(rng, dq, dk, da)
    g = _tgen(rng)
    for _ in range(50):  # keys whose two best scores differ clearly (no near tie for the huge v)
        q, K = torch.randn(1, dq, generator=g), 3 * torch.randn(1, S, dk, generator=g)
        with torch.no_grad():
            top2 = att(q, K, return_weights=True)[1][0].log().topk(2).values
        if top2[0] - top2[1] > 1e-2:
            break

    def kind(w: torch.Tensor, base: torch.Tensor) -> str:
        if (w - 1.0 / S).abs().max() < 1e-6:
            return "uniform"
        if w.max() > 0.99:
            return "one-hot"
        return "unchanged" if torch.allclose(w, base, atol=1e-6) else "other"
    with torch.no_grad():
        base = att(q, K, return_weights=True)[1]
        equal = att(q, K[:, :1].expand(1, S, dk).contiguous(), return_weights=True)[1]
        att.w.weight.mul_(1e4)  # chapter 2b's v: every score e_j multiplied by 10,000
        large = att(q, K, return_weights=True)[1]
    measured = {"equal_keys": kind(equal, base), "large_v": kind(large, base)}
    return _prediction(answer, measured, (q, K), what="a fresh additive attention on random keys",
                       wrong=[({"equal_keys": "unchanged", "large_v": "unchanged"},
                               "equal keys get equal scores, whatever the query; scaling v scales every score"),
                              ({"equal_keys": "uniform", "large_v": "uniform"},
                               "multiplying all scores by a large number sharpens the softmax onto the largest score"),
                              ({"equal_keys": "one-hot", "large_v": "one-hot"},
                               "with every key equal, no key can score higher than another")],
                       hint="answer 'uniform', 'one-hot' or 'unchanged' for each case")
