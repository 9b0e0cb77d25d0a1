"""Language modelling is compression: an arithmetic coder driven by next-token probabilities.

A model that gives probability p to the symbol that actually comes next can encode it in
about -log2 p bits; arithmetic coding achieves this to within a couple of bits over the
whole message. So the cross-entropy a language model reaches on a text, in bits, *is*
the size it can compress that text to (Shannon 1948; Deletang et al. 2023, *Language
Modeling Is Compression*).

Covers: quantising a probability vector, or a batch of them, to integer frequencies (every
symbol at least 1, so any text can be coded), a 32-bit integer arithmetic coder (Witten, Neal & Cleary
1987, in the form of Nayuki's reference implementation) whose encoder and decoder make
bit-identical decisions, and ``compress``/``decompress`` for any predictor
``next_probs(prefix) -> probabilities``, with ``gpt_predictor`` wrapping a GPT.

Leaves out: adaptive count-based models (PPM, the heart of classic compressors), and
range coders that emit bytes instead of bits. Decoding needs the same model and the
same arithmetic as encoding: the GPT predictor runs the model one token at a time with
its key/value cache on both sides, so the floating-point numbers agree exactly on one
machine.
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np
import torch

__all__ = ["quantize_probs", "ArithmeticEncoder", "ArithmeticDecoder", "compress", "decompress",
           "gpt_predictor", "ideal_bits"]

STATE_BITS = 32
FULL = 1 << STATE_BITS
HALF = FULL >> 1
QUARTER = HALF >> 1
MASK = FULL - 1
FREQ_BITS = 16  # frequencies add up to 2**16 (must stay below QUARTER)

NextProbs = Callable[[Sequence[int]], "torch.Tensor | np.ndarray"]


def quantize_probs(probs, total: int = 1 << FREQ_BITS) -> np.ndarray:
    """Integer frequencies proportional to ``probs``, each >= 1, summing to ``total``.

    ``probs`` is one distribution (V,) or a batch of them (..., V): each row is quantised on
    its own, by the same arithmetic, so a coder that runs many streams side by side (one per
    chunk of a text) can quantise a whole step at once.

    >>> quantize_probs([0.5, 0.25, 0.25, 0.0], total=16).tolist()
    [7, 4, 4, 1]
    >>> quantize_probs([[0.5, 0.25, 0.25, 0.0], [0.0, 0.0, 0.0, 2.0]], total=16).tolist()
    [[7, 4, 4, 1], [1, 1, 1, 13]]
    """
    p = probs.detach().double().cpu().numpy() if isinstance(probs, torch.Tensor) else np.asarray(probs, dtype=np.float64)
    if p.ndim < 1 or p.shape[-1] < 1:
        raise ValueError(f"probs must be a vector (V,) or a batch of vectors (..., V), got shape {p.shape}")
    if not np.all(np.isfinite(p)) or np.any(p < 0):
        raise ValueError("probs must be finite and non-negative")
    V = p.shape[-1]
    if total < 2 * V or total > QUARTER:
        raise ValueError(f"total must be in [2 * {V}, 2**30], got {total}")
    s = p.sum(axis=-1, keepdims=True)
    if np.any(s <= 0):
        raise ValueError("probs sum to zero" + (" in some row" if p.ndim > 1 else ""))
    freqs = np.floor(p / s * (total - V)).astype(np.int64) + 1  # +1: no symbol is impossible
    top = np.argmax(freqs, axis=-1)[..., None]  # the rounding remainder goes to each row's top symbol
    remainder = total - freqs.sum(axis=-1, keepdims=True)
    np.put_along_axis(freqs, top, np.take_along_axis(freqs, top, axis=-1) + remainder, axis=-1)
    return freqs


class ArithmeticEncoder:
    """Turns (cum_low, cum_high, total) intervals into bits."""

    def __init__(self) -> None:
        self.low, self.high, self.pending = 0, MASK, 0
        self.bits: list[int] = []

    def _emit(self, bit: int) -> None:
        self.bits.append(bit)
        self.bits.extend([bit ^ 1] * self.pending)  # underflow bits resolve to the opposite value
        self.pending = 0

    def encode(self, cum_low: int, cum_high: int, total: int) -> None:
        rng = self.high - self.low + 1
        self.high = self.low + cum_high * rng // total - 1
        self.low = self.low + cum_low * rng // total
        while ((self.low ^ self.high) & HALF) == 0:  # top bits agree: they are final
            self._emit(self.low >> (STATE_BITS - 1))
            self.low = (self.low << 1) & MASK
            self.high = ((self.high << 1) & MASK) | 1
        while self.low & ~self.high & QUARTER:  # straddling the middle: remember, expand
            self.pending += 1
            self.low = (self.low << 1) ^ HALF
            self.high = ((self.high ^ HALF) << 1) | HALF | 1

    def finish(self) -> bytes:
        self.pending += 1
        self._emit(1)
        bits = self.bits + [0] * (-len(self.bits) % 8)
        return bytes(int("".join(map(str, bits[i:i + 8])), 2) for i in range(0, len(bits), 8))


class ArithmeticDecoder:
    """Reads the bits back and names the interval (symbol) they fall in."""

    def __init__(self, data: bytes) -> None:
        self.bits = [(byte >> (7 - i)) & 1 for byte in data for i in range(8)]
        self.pos = 0
        self.low, self.high, self.code = 0, MASK, 0
        for _ in range(STATE_BITS):
            self.code = (self.code << 1) | self._read()

    def _read(self) -> int:
        bit = self.bits[self.pos] if self.pos < len(self.bits) else 0  # past the end: zeros
        self.pos += 1
        return bit

    def decode(self, cum: np.ndarray) -> int:
        """Symbol whose interval holds the code; ``cum`` is the cumulative table [0, f0, f0+f1, ..., total]."""
        total = int(cum[-1])
        rng = self.high - self.low + 1
        value = ((self.code - self.low + 1) * total - 1) // rng
        sym = int(np.searchsorted(cum, value, side="right")) - 1
        cum_low, cum_high = int(cum[sym]), int(cum[sym + 1])
        self.high = self.low + cum_high * rng // total - 1
        self.low = self.low + cum_low * rng // total
        while ((self.low ^ self.high) & HALF) == 0:
            self.code = ((self.code << 1) & MASK) | self._read()
            self.low = (self.low << 1) & MASK
            self.high = ((self.high << 1) & MASK) | 1
        while self.low & ~self.high & QUARTER:
            self.code = (self.code & HALF) | ((self.code << 1) & (MASK >> 1)) | self._read()
            self.low = (self.low << 1) ^ HALF
            self.high = ((self.high ^ HALF) << 1) | HALF | 1
        return sym


def _cum(freqs: np.ndarray) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(freqs)])


def _check_symbols(symbols) -> list[int]:
    """A list of ints; a float (1.5 would silently become 1), bool or str -> TypeError naming ``symbols``."""
    if isinstance(symbols, (str, bytes)) or not hasattr(symbols, "__iter__"):
        raise TypeError(f"symbols must be a sequence of ints, got {type(symbols).__name__}")
    if isinstance(symbols, torch.Tensor):
        if symbols.is_floating_point() or symbols.is_complex() or symbols.dtype == torch.bool:
            raise TypeError(f"symbols must hold integer ids, got a tensor of {symbols.dtype}")
        return symbols.reshape(-1).tolist()
    out = []
    for i, s in enumerate(symbols):
        if isinstance(s, (bool, np.bool_)) or not hasattr(type(s), "__index__"):
            raise TypeError(f"symbols[{i}] must be an int, got {type(s).__name__} {s!r}")
        out.append(int(s))
    if len(out) >= 1 << 32:
        raise ValueError(f"symbols has {len(out)} entries; the 4-byte header holds at most 2**32 - 1")
    return out


def compress(symbols: Sequence[int], next_probs: NextProbs) -> bytes:
    """Encode ``symbols`` with the predictor ``next_probs(prefix)``; 4-byte length header + code.

    >>> uniform = lambda prefix: [0.25] * 4
    >>> data = compress([0, 3, 1, 2, 2], uniform)
    >>> decompress(data, uniform)
    [0, 3, 1, 2, 2]
    """
    if not callable(next_probs):
        raise TypeError("next_probs must be callable as next_probs(prefix)")
    symbols = _check_symbols(symbols)
    enc = ArithmeticEncoder()
    for i, s in enumerate(symbols):
        cum = _cum(quantize_probs(next_probs(symbols[:i])))
        if not 0 <= s < len(cum) - 1:
            raise ValueError(f"symbol {s} at position {i} is outside the predictor's {len(cum) - 1} symbols")
        enc.encode(int(cum[s]), int(cum[s + 1]), int(cum[-1]))
    return len(symbols).to_bytes(4, "big") + enc.finish()


def decompress(data: bytes, next_probs: NextProbs) -> list[int]:
    """Invert ``compress`` with the same predictor."""
    if not isinstance(data, (bytes, bytearray)) or len(data) < 4:
        raise ValueError("data must be bytes from compress() (at least the 4-byte header)")
    n = int.from_bytes(data[:4], "big")
    dec = ArithmeticDecoder(bytes(data[4:]))
    out: list[int] = []
    for _ in range(n):
        out.append(dec.decode(_cum(quantize_probs(next_probs(out)))))
    return out


def ideal_bits(symbols: Sequence[int], next_probs: NextProbs) -> float:
    """Sum of -log2 p(symbol | prefix): the size an ideal coder would reach, in bits."""
    symbols = _check_symbols(symbols)
    total = 0.0
    for i, s in enumerate(symbols):
        if s < 0:
            raise ValueError(f"symbol {s} at position {i} is negative")
        p = next_probs(list(symbols[:i]))
        p = p.double() if isinstance(p, torch.Tensor) else torch.as_tensor(p, dtype=torch.float64)
        total -= math.log2(float(p[s] / p.sum()))
    return total


def gpt_predictor(model: torch.nn.Module, vocab_size: int | None = None) -> NextProbs:
    """``next_probs(prefix)`` for a GPT, run token by token with its key/value cache.

    The empty prefix gets the uniform distribution (the model has no start token). Each
    call must extend the previous prefix by one token (as ``compress`` and
    ``decompress`` do); any other prefix restarts the cache. Past ``block_size`` tokens the
    window slides and the last ``block_size`` tokens are recomputed, as in generation.
    """
    from .kv_cache import KVCache

    cfg = model.config
    V = vocab_size or cfg.vocab_size
    state = {"prefix": [], "cache": None, "probs": None}

    @torch.no_grad()
    def next_probs(prefix: Sequence[int]) -> torch.Tensor:
        prefix = list(prefix)
        if not prefix:
            state.update(prefix=[], cache=None)
            return torch.full((V,), 1.0 / V)
        model.eval()
        dev = next(model.parameters()).device
        extends = state["cache"] is not None and prefix[:-1] == state["prefix"]
        if extends and state["cache"].length < cfg.block_size:
            logits, _ = model(torch.tensor([prefix[-1:]], device=dev), kv_cache=state["cache"])
        else:  # start (or slide the window): recompute the last block_size tokens
            state["cache"] = KVCache(cfg, 1, device=dev, dtype=model.wte.weight.dtype)
            logits, _ = model(torch.tensor([prefix[-cfg.block_size:]], device=dev), kv_cache=state["cache"])
        state["prefix"] = prefix
        return torch.softmax(logits[0, -1, :V].double(), dim=-1).cpu()

    return next_probs
