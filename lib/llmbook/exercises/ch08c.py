"""Checkers for the exercises of chapter 08c, registered on import (see :mod:`llmbook.exercises`)."""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from ._core import _Fail, _NotAttempted, _cases, _is_placeholder, _prediction, _register, _tgen


def _not_library(answer, *library, what="the library's function"):
    """Reject an answer that *is* a function the notebook imports: the exercise asks for the reader's own."""
    if any(answer is f for f in library):
        raise _Fail(f"that is {what} itself, not your own code",
                    "write the computation in the answer cell; the library version is what the checker compares with")


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


def _ring_allreduce(chunks_per_device: list[list[torch.Tensor]]) -> tuple[list[torch.Tensor], list[int]]:
    """Simulate a ring all-reduce of P devices, each holding P chunks; return every device's result and the
    number of elements each device sent (reduce-scatter, then all-gather, P - 1 steps each)."""
    P = len(chunks_per_device)
    buf = [[c.clone() for c in dev] for dev in chunks_per_device]
    sent = [0] * P
    for step in range(P - 1):                     # reduce-scatter: device d sends chunk (d - step) to d + 1
        msgs = [(d, (d - step) % P, buf[d][(d - step) % P].clone()) for d in range(P)]
        for d, k, payload in msgs:
            buf[(d + 1) % P][k] += payload
            sent[d] += payload.numel()
    for step in range(P - 1):                     # all-gather: device d passes its finished chunk (d + 1 - step) on
        msgs = [(d, (d + 1 - step) % P, buf[d][(d + 1 - step) % P].clone()) for d in range(P)]
        for d, k, payload in msgs:
            buf[(d + 1) % P][k] = payload
            sent[d] += payload.numel()
    return [torch.cat(dev) for dev in buf], sent


@_register("08c.2", "Bytes each device sends in a ring all-reduce", "derive",
           "def ring_allreduce_bytes(n_bytes, P):\n    return NotImplemented")
def _ex_08c_2(answer, rng, ctx):
    def ref(n_bytes, P):
        # one byte per element: simulate the ring on P devices' random chunks, check the sum, count what is sent
        g = _tgen(rng)
        data = [list(torch.randint(-9, 10, (n_bytes,), generator=g).chunk(P)) for _ in range(P)]
        result, sent = _ring_allreduce(data)
        total = sum(torch.cat(dev) for dev in data)
        assert all(torch.equal(r, total) for r in result) and len(set(sent)) == 1
        return sent[0]
    cases = []
    for P in [rng.randint(2, 9) for _ in range(4)] + [1]:
        cases.append((P * rng.randint(1, 40), P))
    rng.shuffle(cases)
    return _cases(answer, ref, cases, rel=1e-9,
                  wrong=[(lambda n, P: n, "each device sends in both phases: the reduce-scatter and the all-gather"),
                         (lambda n, P: 2 * n, "each step sends one chunk of n_bytes / P, and each phase has P - 1 steps"),
                         (lambda n, P: (P - 1) * n, "that is every device sending its whole gradient to every other; the ring sends chunks"),
                         (lambda n, P: (P - 1) / P * n, "after the reduce-scatter each device holds one summed chunk: the all-gather still has to pass them round")],
                  show=lambda a: f"n_bytes={a[0]}, P={a[1]}")


def _fit_surface(N, D, L, alpha, beta):
    X = np.stack([np.ones(len(N)), np.asarray(N, float) ** -alpha, np.asarray(D, float) ** -beta], 1)
    E, A, B = np.linalg.lstsq(X, np.asarray(L, float), rcond=None)[0]
    return float(E), float(A), float(B)


@_register("08c.3", "Fitting Chinchilla's loss surface L(N, D)", "complete",
           "def fit_loss_surface(N, D, L, alpha, beta):\n    return NotImplemented  # (E, A, B)")
def _ex_08c_3(answer, rng, ctx):
    def case():
        k = rng.randint(8, 15)
        N = [10 ** rng.uniform(7, 10) for _ in range(k)]
        D = [10 ** rng.uniform(9, 12) for _ in range(k)]
        E, A, B, al, be = rng.uniform(1, 2.5), rng.uniform(100, 800), rng.uniform(100, 800), rng.uniform(0.2, 0.4), rng.uniform(0.2, 0.4)
        L = [E + A * n ** -al + B * d ** -be + rng.gauss(0, 0.01) for n, d in zip(N, D)]   # a little noise
        return (N, D, L, al, be)
    def in_log(N, D, L, al, be):   # least squares on log L instead of L
        X = np.stack([np.ones(len(N)), np.asarray(N, float) ** -al, np.asarray(D, float) ** -be], 1)
        return tuple(float(v) for v in np.linalg.lstsq(X, np.log(L), rcond=None)[0])
    def no_floor(N, D, L, al, be):
        X = np.stack([np.asarray(N, float) ** -al, np.asarray(D, float) ** -be], 1)
        A, B = np.linalg.lstsq(X, np.asarray(L, float), rcond=None)[0]
        return 0.0, float(A), float(B)
    return _cases(answer, _fit_surface, [case() for _ in range(4)], rel=1e-4,
                  wrong=[(lambda *a: _fit_surface(*a)[::-1], "return (E, A, B): the floor first"),
                         (in_log, "the loss is a sum of three terms: fit L itself, not log L"),
                         (no_floor, "keep the constant E: a column of ones in the least-squares matrix")],
                  hint="with alpha and beta given, L is linear in E, A and B: least squares on the columns 1, N^-alpha, D^-beta",
                  show=lambda a: f"{len(a[0])} points, alpha={a[3]:.3f}, beta={a[4]:.3f}")


# ZeRO (Rajbhandari et al., 2020) with mixed-precision Adam: bf16 weights 2, bf16 gradients 2, fp32 master + two
# moments 12 bytes per parameter; stage s partitions the optimizer state (s >= 1), the gradients (s >= 2), the weights (3).
def zero_bytes_per_device(n_params: float, P: int, stage: int) -> float:
    w, g, opt = 2.0 * n_params, 2.0 * n_params, 12.0 * n_params
    return (w / P if stage >= 3 else w) + (g / P if stage >= 2 else g) + (opt / P if stage >= 1 else opt)


def _lowest_stage(n_params: float, P: int, device_bytes: float = 80e9):
    fits = [s for s in range(4) if zero_bytes_per_device(n_params, P, s) <= device_bytes]
    return fits[0] if fits else None


ZERO_CASES = {"7B on 8": (7e9, 8), "175B on 64": (174_604_259_328, 64), "175B on 8": (174_604_259_328, 8)}


@_register("08c.4", "Which ZeRO stage makes the model fit", "predict",
           "answer = {'7B on 8': ..., '175B on 64': ..., '175B on 8': ...}")
def _ex_08c_4(answer, rng, ctx):
    if isinstance(answer, dict) and any(_is_placeholder(v) for v in answer.values()):
        raise _NotAttempted()
    measured = {k: _lowest_stage(n, P) for k, (n, P) in ZERO_CASES.items()}
    everything = {k: 3 for k in ZERO_CASES}
    return _prediction(answer, measured, tuple(ZERO_CASES.items()), what="ZeRO's per-device bytes on 80 GB devices",
                       wrong=[(everything, "stage 3 is not always needed, and not always enough: divide each part by P only "
                                           "from the stage that partitions it"),
                              ({"7B on 8": 1, "175B on 64": 3, "175B on 8": 3}, "stage 3 divides 16 bytes per parameter by P: "
                                                                                "check whether that fits on 8 devices"),
                              ({k: 1 for k in ZERO_CASES}, "stage 1 still keeps a full copy of the bf16 weights and gradients on every device")],
                       hint="per device: 2N weights + 2N gradients + 12N optimizer state, each divided by P once its stage partitions it")


@_register("08c.5", "A row-parallel linear layer", "complete",
           "def row_parallel(x, weight, bias, n_shards):\n    return NotImplemented")
def _ex_08c_5(answer, rng, ctx):
    from ..parallel import column_parallel_linear, row_parallel_linear
    _not_library(answer, row_parallel_linear, column_parallel_linear, F.linear)
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
