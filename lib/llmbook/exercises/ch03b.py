"""Checkers for the exercises of chapter 03b (FlashAttention), registered on import (see :mod:`llmbook.exercises`)."""

from __future__ import annotations

import math
import random

import torch

from ._core import _cases, _is_placeholder, _NotAttempted, _prediction, _register, _tgen


def _state(x: torch.Tensor) -> tuple[float, float]:
    """(max, sum of exp(x - max)) of a 1-D float64 tensor: the online softmax's state."""
    m = float(x.max())
    return m, float(torch.exp(x - m).sum())


@_register("03b.1", "Merge two partial softmax states", "complete",
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


def _block_step_ref(m, l, acc, s, v):
    m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
    rescale = torch.exp(m - m_new)
    p = torch.exp(s - m_new)
    return m_new, l * rescale + p.sum(dim=-1, keepdim=True), acc * rescale + p @ v


@_register("03b.2", "One block of tiled attention", "complete",
           "def block_step(m, l, acc, s, v):\n    return NotImplemented  # (m_new, l_new, acc_new)")
def _ex_03b_2(answer, rng, ctx):
    cases = []
    for _ in range(4):
        g = _tgen(rng)
        T, b, dv = rng.randint(2, 6), rng.randint(1, 5), rng.randint(1, 4)
        first, v0 = torch.randn(T, b, generator=g, dtype=torch.float64) * 3, torch.randn(b, dv, generator=g, dtype=torch.float64)
        start = (torch.full((T, 1), -math.inf, dtype=torch.float64), torch.zeros(T, 1, dtype=torch.float64),
                 torch.zeros(T, dv, dtype=torch.float64))
        m, l, acc = _block_step_ref(*start, first, v0)  # the state after a first block
        s = torch.randn(T, b, generator=g, dtype=torch.float64) * 3 + 2.0  # the next block, often with a larger max
        v = torch.randn(b, dv, generator=g, dtype=torch.float64)
        cases.append((m, l, acc, s, v))

    def acc_not_rescaled(m, l, acc, s, v):
        m_new, l_new, _ = _block_step_ref(m, l, acc, s, v)
        return m_new, l_new, acc + torch.exp(s - m_new) @ v

    def normalised(m, l, acc, s, v):
        m_new, l_new, acc_new = _block_step_ref(m, l, acc, s, v)
        return m_new, l_new, acc_new / l_new

    return _cases(answer, _block_step_ref, cases, rel=1e-9,
                  wrong=[(acc_not_rescaled, "the output accumulator was summed relative to the old maximum too: "
                                            "multiply it by exp(m - m_new) like l"),
                         (normalised, "keep acc unnormalised: divide by l once, after the last block")],
                  show=lambda a: f"T={a[0].shape[0]}, block={a[3].shape[1]}, dv={a[4].shape[1]}")


@_register("03b.3", "Memory of the backward pass when T doubles", "predict",
           "answer = {'tiled_autograd': ..., 'flash': ...}  # factor by which the peak grows when T doubles")
def _ex_03b_3(answer, rng, ctx):
    from ..flash import flash_attention, peak_memory_bytes, tiled_attention
    if _is_placeholder(answer) or (isinstance(answer, dict) and any(_is_placeholder(v) for v in answer.values())):
        raise _NotAttempted()
    T, d, block = rng.choice([512, 640, 768]), rng.choice([16, 32]), 64
    factors = {}
    for name, fn in (("tiled_autograd", tiled_attention), ("flash", flash_attention)):
        peaks = []
        for n in (T, 2 * T):
            g = _tgen(rng)
            base = [torch.randn(1, 1, n, d, generator=g) for _ in range(3)]

            def run():
                xs = [b.clone().requires_grad_(True) for b in base]
                fn(*xs, causal=True, block_size=block).sum().backward()

            peaks.append(peak_memory_bytes(run))
        factors[name] = 2 ** round(math.log2(peaks[1] / peaks[0]))  # the nearest power of two
    return _prediction(answer, factors, (T, d, block), what=f"the peaks of forward + backward at T = {T} and {2 * T}",
                       wrong=[({"tiled_autograd": 2, "flash": 2}, "autograd keeps every block's probabilities for the "
                               "backward pass, and all the blocks together hold T x T numbers"),
                              ({"tiled_autograd": 4, "flash": 4}, "flash_attention saves one number per query row and "
                               "recomputes the probabilities one block at a time")],
                       hint="give each factor as a number (1, 2, 4 or 8)")
