"""Checkers for the exercises of chapter 03, registered on import (see :mod:`llmbook.exercises`)."""

from __future__ import annotations

import math
import random

import torch

from ._core import (_cases, _Fail, _is_placeholder, _need, _NotAttempted, _prediction, _register, _report,
    _Result, _seeded, _tgen)


def _rand_attention(rng: random.Random, T: int) -> torch.Tensor:
    return torch.softmax(torch.randn(T, T, generator=_tgen(rng)) * 2, dim=-1)


@_register("03.1", "Temperature of attention", "predict",
           "answer = {'large_c': ..., 'small_c': ...}  # 'one-hot', 'uniform' or 'unchanged'")
def _ex_03_1(answer, rng, ctx):
    from ..viz.attention import rescale_attention
    if isinstance(answer, dict) and any(_is_placeholder(v) for v in answer.values()):
        raise _NotAttempted()
    T = rng.randint(4, 9)
    scores = torch.randn(T, T, generator=_tgen(rng)) * 2
    # a clear winner per row (top score 1 above the next), so c = 1000 gives one-hot within 1e-3
    top = scores.argmax(-1, keepdim=True)
    scores = scores.scatter(-1, top, scores.max(-1, keepdim=True).values + 1.0)
    a = torch.softmax(scores, dim=-1)
    def kind(w):
        if torch.allclose(w, torch.nn.functional.one_hot(a.argmax(-1), T).to(w.dtype), atol=1e-3):
            return "one-hot"
        if torch.allclose(w, torch.full_like(w, 1 / T), atol=1e-3):
            return "uniform"
        return "unchanged"
    measured = {"large_c": kind(rescale_attention(a, 1000.0)), "small_c": kind(rescale_attention(a, 1e-4))}
    return _prediction(answer, measured, (a,), what="fresh attention rows rescaled by c = 1000 and c = 1e-4",
                       wrong=[({"large_c": "uniform", "small_c": "one-hot"}, "c multiplies the scores: a large c magnifies their differences"),
                              ({"large_c": "unchanged", "small_c": "unchanged"}, "softmax is not invariant to scaling its input, only to shifting it")],
                       hint="the answers are 'one-hot', 'uniform' or 'unchanged'")


@_register("03.2", "Scaled dot-product attention", "complete",
           "def attention(q, k, v):\n    return NotImplemented  # (B, T_q, d_v)")
def _ex_03_2(answer, rng, ctx):
    from ..attention import scaled_dot_product_attention
    cases = []
    for _ in range(4):
        g = _tgen(rng)
        B, T, d = rng.randint(1, 3), rng.randint(3, 7), rng.randint(2, 9)
        d = T if rng.random() < 0.5 else d  # square scores matrices let a transposed key still run
        cases.append((torch.randn(B, T, d, generator=g), torch.randn(B, T, d, generator=g), torch.randn(B, T, rng.randint(2, 5), generator=g)))
    def no_scale(q, k, v):
        return torch.softmax(q @ k.transpose(-2, -1), -1) @ v
    def scale_d(q, k, v):
        return torch.softmax(q @ k.transpose(-2, -1) / q.shape[-1], -1) @ v
    def wrong_dim(q, k, v):
        return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), -2) @ v
    def untransposed(q, k, v):
        return torch.softmax(q @ k / math.sqrt(q.shape[-1]), -1) @ v
    return _cases(answer, lambda q, k, v: scaled_dot_product_attention(q, k, v), cases, rel=1e-5,
                  wrong=[(no_scale, "divide the scores by sqrt(d_k) before the softmax"),
                         (scale_d, "divide by sqrt(d_k), not by d_k"),
                         (wrong_dim, "the softmax runs over the keys, the last dimension of the scores"),
                         (untransposed, "scores are q @ k^T: transpose the last two dimensions of k")],
                  show=lambda a: f"q {tuple(a[0].shape)}, k {tuple(a[1].shape)}, v {tuple(a[2].shape)}")


@_register("03.3", "Memory of the attention weights", "derive",
           "def attn_bytes(B, H, T, bytes_per=4):\n    return NotImplemented")
def _ex_03_3(answer, rng, ctx):
    def ref(B, H, T, bytes_per):
        t = torch.empty(B, H, T, T, device="meta", dtype={2: torch.float16, 4: torch.float32, 8: torch.float64}[bytes_per])
        return t.nelement() * t.element_size()
    cases = [(rng.randint(1, 16), rng.randint(1, 16), rng.randint(2, 4096), rng.choice([2, 4, 8])) for _ in range(5)]
    return _cases(answer, ref, cases,
                  wrong=[(lambda B, H, T, b: B * T * T * b, "every head stores its own T x T matrix"),
                         (lambda B, H, T, b: B * H * T * b, "each of the T queries has a weight for each of the T keys"),
                         (lambda B, H, T, b: B * H * T * T * b * 8, "count bytes, not bits")],
                  show=lambda a: f"B={a[0]}, H={a[1]}, T={a[2]}, bytes_per={a[3]}")


@_register("03.4", "No positions, no order", "predict",
           "answer = ...  # 'equivariant', 'invariant' or 'neither'")
def _ex_03_4(answer, rng, ctx):
    from ..attention import MultiHeadAttention
    T = rng.randint(4, 9)
    with _seeded(rng):
        mha = MultiHeadAttention(8, 2).eval()
    x = torch.randn(1, T, 8, generator=_tgen(rng))
    perm = torch.randperm(T, generator=_tgen(rng))
    while torch.equal(perm, torch.arange(T)):
        perm = torch.randperm(T, generator=_tgen(rng))
    with torch.no_grad():
        y, yp = mha(x), mha(x[:, perm])
    measured = ("equivariant" if torch.allclose(yp, y[:, perm], atol=1e-5) else
                "invariant" if torch.allclose(yp, y, atol=1e-5) else "neither")
    return _prediction(answer, measured, (perm,), what="a fresh MultiHeadAttention on a random permutation",
                       wrong=[("invariant", "the outputs are permuted too: each output belongs to its own token"),
                              ("neither", "nothing in attention knows a token's position")],
                       hint="answer 'equivariant', 'invariant' or 'neither'")


def _attention_widget(answer, rng, ctx):
    r = _report(answer, ["layer", "head", "query", "key", "weight"])
    att = _need(ctx, "attentions")
    def weight(layer, head, query, key):
        t = att[layer]
        if isinstance(t, torch.Tensor) and t.dim() == 4:  # (B, H, T, T): the widget shows the first sequence
            t = t[0]
        return float(t[head][query][key])
    try:
        exp = weight(r["layer"], r["head"], r["query"], r["key"])
    except (IndexError, KeyError, TypeError):
        raise _Fail("the layer, head, query or key you report is outside the widget's range",
                    "indices count from 0, as the widget's sliders do") from None
    got = float(r["weight"])
    if abs(got - exp) <= 0.01:
        return _Result(f"query {r['query']} gives key {r['key']} weight {exp:.2f} in layer {r['layer']}, head {r['head']}", (r,))
    try:
        swapped = weight(r["layer"], r["head"], r["key"], r["query"])
    except Exception:
        swapped = None
    h = ("you read the transposed cell: rows are queries, columns are keys" if swapped is not None and abs(got - swapped) <= 0.01
         else "hover over the cell of that query row and key column, with the layer and head you report")
    raise _Fail(f"the weight you report ({got:.2f}) is {'too high' if got > exp else 'too low'}", h)


for _id in ("03.5", "07.6", "08a.5"):
    _register(_id, "Report an attention weight from the attention explorer", "widget",
              "answer = {'layer': ..., 'head': ..., 'query': ..., 'key': ..., 'weight': ...}")(_attention_widget)
