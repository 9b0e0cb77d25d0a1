"""Checkers for the exercises of chapter 08c, registered on import (see :mod:`llmbook.exercises`)."""

from __future__ import annotations

import math

import torch

from ._core import _cases, _register, _tgen


@_register("08c.1", "The fraction of pairs a banded layer computes", "derive",
           "def banded_fraction(T, w):\n    return NotImplemented")
def _ex_08c_1(answer, rng, ctx):
    from ..sparse_attention import attended_pairs
    cases = [(T, rng.randint(1, T)) for T in (rng.randint(2, 8192) for _ in range(5))]
    return _cases(answer, lambda T, w: attended_pairs(T, w) / attended_pairs(T), cases, rel=1e-9,
                  wrong=[(lambda T, w: w / T, "a dense causal layer computes T (T + 1) / 2 pairs, not T^2"),
                         (lambda T, w: T * w / (T * (T + 1) / 2), "the first w queries see fewer than w keys: 1, 2, ..., w"),
                         (lambda T, w: (w * (w - 1) // 2 + (T - w) * w) / (T * (T + 1) // 2), "query i sees i + 1 keys, itself included")],
                  show=lambda a: f"T={a[0]}, w={a[1]}")


@_register("08c.2", "Banded layers needed to reach the first token", "derive",
           "def layers_needed(T, w):\n    return NotImplemented")
def _ex_08c_2(answer, rng, ctx):
    from ..sparse_attention import reach_length
    def ref(T, w):
        L = max(1, math.ceil((T - 1) / (w - 1)))
        # the smallest L: the library's reach (a T x T product per layer) confirms L and L - 1
        assert reach_length([w] * L, T) == T and (L == 1 or reach_length([w] * (L - 1), T) < T)
        return L
    cases = [(rng.randint(2, 100), rng.randint(4, 40)) for _ in range(4)] + [(101, 10)]  # 100 / 9 is not whole
    rng.shuffle(cases)
    return _cases(answer, ref, cases,
                  wrong=[(lambda T, w: math.ceil(T / w), "each banded layer widens the reach by w - 1 positions, not w"),
                         (lambda T, w: (T - 1) // (w - 1), "round up: a partial step still needs a whole layer"),
                         (lambda T, w: math.ceil(T / (w - 1)), "the token itself is already reached: solve L (w - 1) + 1 >= T")],
                  show=lambda a: f"T={a[0]}, w={a[1]}")


@_register("08c.3", "Parameters needed for a target loss", "derive",
           "def params_for_loss(L, a, alpha):\n    return NotImplemented")
def _ex_08c_3(answer, rng, ctx):
    from ..scaling import power_law
    def ref(L, a, alpha):
        N = (a / L) ** (1 / alpha)
        assert math.isclose(float(power_law(N, a, alpha)), L, rel_tol=1e-9)  # the inverse of the library's law
        return N
    cases = [(rng.uniform(1.0, 3.0), rng.uniform(5, 50), rng.uniform(0.05, 0.4)) for _ in range(5)]
    return _cases(answer, ref, cases, rel=1e-6,
                  wrong=[(lambda L, a, al: (L / a) ** (1 / al), "L = a N^(-alpha), so N = (a / L)^(1 / alpha)"),
                         (lambda L, a, al: (a / L) ** al, "invert the power: the exponent becomes 1 / alpha"),
                         (lambda L, a, al: (a / L) ** (-1 / al), "the loss falls as N grows: the exponent of a / L is positive")],
                  show=lambda a: f"L={a[0]:.3f}, a={a[1]:.3f}, alpha={a[2]:.3f}")


@_register("08c.4", "Chinchilla's compute-optimal size", "derive",
           "def chinchilla(C):\n    return NotImplemented  # (parameters, tokens)")
def _ex_08c_4(answer, rng, ctx):
    from ..scaling import chinchilla_optimal
    cases = [(10 ** rng.uniform(18, 26),) for _ in range(5)]
    return _cases(answer, chinchilla_optimal, cases, rel=1e-6,
                  wrong=[(lambda C: chinchilla_optimal(C)[::-1], "return (parameters, tokens): tokens are 20 times the parameters"),
                         (lambda C: (math.sqrt(C / 20), 20 * math.sqrt(C / 20)), "training costs C = 6 N D FLOPs"),
                         (lambda C: (C / 120, C / 6), "solve C = 6 N D together with D = 20 N: N = sqrt(C / 120)")],
                  show=lambda a: f"C={a[0]:.3g}")


@_register("08c.5", "A row-parallel linear layer", "complete",
           "def row_parallel(x, weight, bias, n_shards):\n    return NotImplemented")
def _ex_08c_5(answer, rng, ctx):
    from ..parallel import row_parallel_linear
    cases = []
    for i in range(4):
        # the first two cases have 2 and 4 shards, so a per-shard bias or a lone shard shows
        g = _tgen(rng); n = (2, 4)[i] if i < 2 else rng.choice([1, 2, 4]); I = n * rng.randint(1, 8); O = rng.randint(1, 10)
        cases.append((torch.randn(rng.randint(1, 4), I, generator=g), torch.randn(O, I, generator=g), torch.randn(O, generator=g), n))
    def bias_per_shard(x, w, b, n):
        return sum(xs @ ws.T + b for xs, ws in zip(x.chunk(n, -1), w.chunk(n, 1)))
    def one_shard(x, w, b, n):
        return x.chunk(n, -1)[0] @ w.chunk(n, 1)[0].T + b
    def no_bias(x, w, b, n):
        return sum(xs @ ws.T for xs, ws in zip(x.chunk(n, -1), w.chunk(n, 1)))
    return _cases(answer, row_parallel_linear, cases, rel=1e-5,
                  wrong=[(bias_per_shard, "add the bias once, after the sum (the all-reduce), not on every shard"),
                         (one_shard, "one shard alone is a partial sum: add the products of all shards"),
                         (no_bias, "add the bias after the sum")],
                  hint="split x by its input features and W by its columns; sum the partial products",
                  show=lambda a: f"x {tuple(a[0].shape)}, weight {tuple(a[1].shape)}, n_shards={a[3]}")
