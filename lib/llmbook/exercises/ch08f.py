"""Checkers for the exercises of chapter 08f (quantization), registered on import (see :mod:`llmbook.exercises`)."""

from __future__ import annotations

import math
import random

import torch

from ._core import _call, _cases, _Fail, _prediction, _register, _Result, _tgen


def _signed_zero_block_error(M: float, bits: int, rng: random.Random) -> float:
    """Measured: the largest error of the b-bit '_0' format (Q4_0 when b = 4) on a block holding M and -M.

    Q4_0 stores d in float16, which moves the error by at most 7 x 2^-11 of it (the tolerance below).
    """
    half = 2 ** (bits - 1)
    g = _tgen(rng)
    x = torch.cat([torch.tensor([M, -M]), (torch.rand(30, generator=g) * 2 - 1) * M * 0.9])
    x = x[torch.randperm(32, generator=g)]
    if bits == 4:  # the library's Q4_0, byte for byte gguf's
        from ..quant import dequantize_q4_0, quantize_q4_0
        return float((dequantize_q4_0(quantize_q4_0(x)) - x).abs().max())
    m = x[x.abs().argmax()]                     # the same rule with 2^b codes: d = m / -2^(b-1), kept in float32
    d = m / -half
    q = torch.trunc(x / d + half + 0.5).clamp(0, 2 ** bits - 1)
    return float(((q - half) * d - x).abs().max())


@_register("08f.1", "The worst error of a '_0' block format", "derive",
           "def worst_error(M, bits):\n    return NotImplemented  # a float")
def _ex_08f_1(answer, rng, ctx):
    cases = [(10 ** rng.uniform(-3, 2), bits) for bits in (4, 4, rng.choice([3, 5]), rng.choice([5, 6]), rng.choice([3, 6]))]
    cases = [(round(M, 6), b) for M, b in cases]
    return _cases(answer, lambda M, b: _signed_zero_block_error(M, b, rng), cases, rel=4e-3,
                  wrong=[(lambda M, b: M / 2 ** b, "M / 2^b is half a step, the error inside the range; the codes run from "
                                                   "-2^(b-1) to 2^(b-1) - 1, so the end opposite to m is cut short"),
                         (lambda M, b: M / (2 * (2 ** (b - 1) - 1)), "that is symmetric absmax (Q8_0's rule): here the step is "
                                                                     "M / 2^(b-1), and one end has one code fewer"),
                         (lambda M, b: M / (2 ** (b - 1) - 1), "the step is M / 2^(b-1), not M / (2^(b-1) - 1)")],
                  hint="find the step d from M, then the value of the block that lands farthest from any code: "
                       "look at the end of the range opposite to m",
                  show=lambda a: f"M={a[0]:.6g}, bits={a[1]}")


@_register("08f.2", "Read a Q5_0 block", "complete",
           "def dequantize_q5_0_block(block):\n    return NotImplemented  # block: 22 uint8 -> 32 float32 values")
def _ex_08f_2(answer, rng, ctx):
    import gguf
    import numpy as np

    Q5_0 = gguf.GGMLQuantizationType.Q5_0
    cases = []
    for _ in range(5):
        g = _tgen(rng)
        x = torch.randn(32, generator=g) * 10 ** rng.uniform(-2, 1) + rng.uniform(-0.5, 0.5)
        cases.append((torch.from_numpy(gguf.quants.quantize(x.numpy(), Q5_0)),))

    def ref(b):  # gguf's reference reader
        return torch.from_numpy(np.array(gguf.quants.dequantize(b.numpy(), Q5_0)))

    def parts(b):
        d = b[:2].contiguous().view(torch.float16).float()
        qh = int.from_bytes(bytes(b[2:6].tolist()), "little")
        return d, qh, b[6:] & 0x0F, b[6:] >> 4

    def wrong(high_bits, interleave=False, offset=16):
        def fn(b):
            d, qh, lo, hi = parts(b)
            low = torch.stack([lo, hi], -1).flatten() if interleave else torch.cat([lo, hi])
            high = torch.tensor(high_bits(qh), dtype=torch.uint8)
            return d * ((low | (high << 4)).float() - offset)
        return fn
    little = lambda qh: [(qh >> k) & 1 for k in range(32)]
    return _cases(answer, ref, cases, rel=1e-6,
                  wrong=[(wrong(lambda qh: [(qh >> (31 - k)) & 1 for k in range(32)]),
                          "bit k of qh (read as a little-endian integer, bit 0 the lowest) is the fifth bit of value k"),
                         (wrong(little, interleave=True), "the low four bits are laid out as in Q4_0: the 16 low nibbles "
                                                          "are values 0..15, the 16 high nibbles values 16..31"),
                         (wrong(little, offset=0), "the five-bit code q runs 0..31; the value is d (q - 16)"),
                         (wrong(lambda qh: [0] * 32), "each code has a fifth bit, stored in qh: q = low | (high << 4)")],
                  hint="bytes 0-1: d as float16; bytes 2-5: qh, the fifth bits; bytes 6-21: the low four bits as in "
                       "Q4_0; value k is d (q_k - 16)",
                  show=lambda a: f"a block of bytes {a[0].tolist()[:8]}...")


def _round_trips(rng: random.Random) -> tuple[dict, tuple]:
    from ..quant import dequantize_q4_0, dequantize_q8_0, quantize_q4_0, quantize_q8_0
    g = _tgen(rng)
    x = torch.randn(rng.randint(2, 8), 32 * rng.randint(1, 8), generator=g) * 10 ** rng.uniform(-2, 1)
    v8, v4 = dequantize_q8_0(quantize_q8_0(x)), dequantize_q4_0(quantize_q4_0(x))
    same = {"q8_0_again": torch.equal(dequantize_q8_0(quantize_q8_0(v8)), v8),
            "q4_0_again": torch.equal(dequantize_q4_0(quantize_q4_0(v4)), v4),
            "q4_0_to_q8_0": torch.equal(dequantize_q8_0(quantize_q8_0(v4)), v4)}
    return {k: "lossless" if v else "lossy" for k, v in same.items()}, (tuple(x.shape),)


@_register("08f.3", "Round trips between block formats", "predict",
           "answer = {'q8_0_again': ..., 'q4_0_again': ..., 'q4_0_to_q8_0': ...}  # 'lossless' or 'lossy'")
def _ex_08f_3(answer, rng, ctx):
    measured, inputs = _round_trips(rng)
    return _prediction(answer, measured, inputs, what="round trips of a fresh random tensor",
                       wrong=[({"q8_0_again": "lossless", "q4_0_again": "lossless", "q4_0_to_q8_0": "lossless"},
                               "Q8_0's grid in a block is the multiples of max|x| / 127; are Q4_0's values, multiples "
                               "of max|x| / 8, on it?"),
                              ({"q8_0_again": "lossy", "q4_0_again": "lossy", "q4_0_to_q8_0": "lossy"},
                               "quantize values that already sit on a block's grid: which scale does the block get, "
                               "and where do its values land?"),
                              ({"q8_0_again": "lossless", "q4_0_again": "lossy", "q4_0_to_q8_0": "lossy"},
                               "in Q4_0 the value of largest magnitude is exactly -8 d: quantize the block again and "
                               "the same d comes back"),
                              ({"q8_0_again": "lossy", "q4_0_again": "lossless", "q4_0_to_q8_0": "lossy"},
                               "in Q8_0 the value of largest magnitude is exactly 127 d (or -127 d): quantize the "
                               "block again and the same d comes back")],
                       hint="answer 'lossless' or 'lossy' for each round trip")
