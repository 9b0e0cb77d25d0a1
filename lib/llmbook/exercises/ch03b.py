"""Checkers for the exercises of chapter 03b (FlashAttention), registered on import (see :mod:`llmbook.exercises`)."""

from __future__ import annotations

import math
import random

import torch

from ._core import _cases, _register, _tgen


def _state(x: torch.Tensor) -> tuple[float, float]:
    """(max, sum of exp(x - max)) of a 1-D float64 tensor: the online softmax's state."""
    m = float(x.max())
    return m, float(torch.exp(x - m).sum())


@_register("03b.1", "Merge two partial softmax states", "derive",
           "def merge(m_a, l_a, m_b, l_b):\n    return NotImplemented  # (m, l)")
def _ex_03b_1(answer, rng, ctx):
    cases = []
    for i in range(5):
        n = rng.randint(2, 12)
        x = torch.randn(n, generator=_tgen(rng), dtype=torch.float64) * (50.0 if i == 4 else 3.0)
        cut = rng.randint(1, n - 1)
        cases.append((*_state(x[:cut]), *_state(x[cut:])))  # the states of the two halves

    def ref(m_a, l_a, m_b, l_b):
        m = max(m_a, m_b)
        return m, l_a * math.exp(m_a - m) + l_b * math.exp(m_b - m)

    def no_rescale(m_a, l_a, m_b, l_b):
        return max(m_a, m_b), l_a + l_b

    def inverse(m_a, l_a, m_b, l_b):
        m = max(m_a, m_b)
        return m, l_a * math.exp(m - m_a) + l_b * math.exp(m - m_b)

    return _cases(answer, ref, cases, rel=1e-9,
                  wrong=[(no_rescale, "each partial sum was taken relative to its own maximum: rescale both to the new one"),
                         (inverse, "the factor is exp(m_old - m_new), at most 1: the new maximum is the larger one")],
                  show=lambda a: f"m_a={a[0]:.4g}, l_a={a[1]:.4g}, m_b={a[2]:.4g}, l_b={a[3]:.4g}")


def _partial(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention of q over the keys k alone: (normalised output (T, dv), log-sum-exp of the scores (T, 1))."""
    s = q @ k.T
    return torch.softmax(s, -1) @ v, torch.logsumexp(s, -1, keepdim=True)


def _combine_ref(o_a, lse_a, o_b, lse_b):
    lse = torch.logaddexp(lse_a, lse_b)
    return torch.exp(lse_a - lse) * o_a + torch.exp(lse_b - lse) * o_b, lse


@_register("03b.2", "Merge attention computed on two halves of the keys (split-K)", "complete",
           "def combine(o_a, lse_a, o_b, lse_b):\n    return NotImplemented  # (o, lse) over both sets of keys")
def _ex_03b_2(answer, rng, ctx):
    cases = []
    for i in range(5):
        g = _tgen(rng)
        T, S, d, dv = rng.randint(1, 4), rng.randint(2, 9), rng.randint(2, 5), rng.randint(1, 4)
        scale = 400.0 if i == 4 else 1.0  # scores in the hundreds: exp(lse) overflows float64
        q = torch.randn(T, d, generator=g, dtype=torch.float64) * scale
        k, v = torch.randn(S, d, generator=g, dtype=torch.float64), torch.randn(S, dv, generator=g, dtype=torch.float64)
        cut = rng.randint(1, S - 1)
        cases.append((*_partial(q, k[:cut], v[:cut]), *_partial(q, k[cut:], v[cut:])))

    def average(o_a, lse_a, o_b, lse_b):
        return (o_a + o_b) / 2, torch.logaddexp(lse_a, lse_b)

    def by_count(o_a, lse_a, o_b, lse_b):  # weights e^lse without the normaliser
        return torch.exp(lse_a) * o_a + torch.exp(lse_b) * o_b, torch.logaddexp(lse_a, lse_b)

    return _cases(answer, _combine_ref, cases, rel=1e-9,
                  wrong=[(average, "the two halves do not weigh the same: half a's share of the softmax mass is "
                                   "exp(lse_a) / (exp(lse_a) + exp(lse_b))"),
                         (by_count, "the weights must sum to 1: divide by exp(lse), the total mass")],
                  hint="the total mass is exp(lse_a) + exp(lse_b); compute its log without overflow "
                       "(torch.logaddexp, or subtract the larger lse first)",
                  show=lambda a: f"T={a[0].shape[0]}, dv={a[0].shape[1]}, lse_a[0]={float(a[1][0, 0]):.4g}, "
                                 f"lse_b[0]={float(a[3][0, 0]):.4g}")


def _tile_kind_ref(i0, i1, j0, j1, T, S):
    off = S - T  # bottom-right: query i sees the keys 0 .. i + S - T
    if j0 > i1 - 1 + off:
        return "skip"
    if j1 - 1 <= i0 + off:
        return "full"
    return "mask"


@_register("03b.3", "Which tiles a bottom-right causal mask skips", "complete",
           "def tile_kind(i0, i1, j0, j1, T, S):\n    return NotImplemented  # 'skip', 'mask' or 'full'")
def _ex_03b_3(answer, rng, ctx):
    cases = []
    for T, S in ((4, 10), (1, 7), (8, 8), (9, 5), (rng.randint(2, 6), rng.randint(7, 14))):
        bq, bk = rng.randint(1, 4), rng.randint(1, 4)
        tiles = [(i, min(i + bq, T), j, min(j + bk, S), T, S) for i in range(0, T, bq) for j in range(0, S, bk)]
        cases += rng.sample(tiles, min(len(tiles), 12))
    # the reference agrees with the mask itself, entry by entry
    for i0, i1, j0, j1, T, S in cases:
        sees = [[j <= i + S - T for j in range(j0, j1)] for i in range(i0, i1)]
        flat = [x for row in sees for x in row]
        assert _tile_kind_ref(i0, i1, j0, j1, T, S) == ("full" if all(flat) else "skip" if not any(flat) else "mask")
    return _cases(answer, _tile_kind_ref, cases,
                  wrong=[(lambda i0, i1, j0, j1, T, S: _tile_kind_ref(i0, i1, j0, j1, T, T),
                          "that is the top-left mask (SDPA's is_causal); bottom-right shifts the diagonal by S - T"),
                         (lambda i0, i1, j0, j1, T, S: _tile_kind_ref(i0, i1, j0, j1, S, T),
                          "the shift is S - T: with more keys than queries every query sees more keys")],
                  hint="query i sees key j when j <= i + S - T; a tile is skipped when even its last query "
                       "cannot see its first key, and full when its first query sees its last key",
                  show=lambda a: f"queries {a[0]}..{a[1] - 1}, keys {a[2]}..{a[3] - 1}, T={a[4]}, S={a[5]}")
