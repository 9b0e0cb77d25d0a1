"""Quantization from scratch: integer weights, GGUF's block formats, and what a model does with them.

Covers
------
- **absmax** (symmetric) quantization to signed b-bit integers: one scale
  ``s = max|x| / (2^(b-1) - 1)``, ``q = round(x / s)``, ``x ~ q s``; zero stays exactly zero.
- **zero-point** (asymmetric, affine) quantization to unsigned b-bit integers (Jacob et al., 2018,
  "Quantization and Training of Neural Networks for Efficient Integer-Arithmetic-Only Inference"):
  the range ``[min(x, 0), max(x, 0)]`` is cut into ``2^b - 1`` steps and an integer zero point ``z``
  marks where 0 falls, ``x ~ (q - z) s``.
- **granularity**: one scale per tensor, or one per group of ``group_size`` consecutive values along
  the last dimension (``group_size = x.shape[-1]`` is one scale per row, "per channel").
  Scales are stored as float16 (as GGUF stores them), rounded *up* so that no value clips.
- **GGUF's block formats** of llama.cpp (ggml): ``Q8_0``, ``Q4_0`` and ``Q4_1``, blocks of 32 values
  written byte for byte as the ``gguf`` package's reference quantizers (``gguf.quants``, the Python
  port of ggml-quants.c's reference code) write them, and read back.
- a model with quantized weights: ``fake_quantized`` (quantize, dequantize, run in float: what a
  format costs in loss), ``QuantLinear`` (the weight kept as GGUF blocks and dequantised at every
  call: what it saves in memory), and ``kv_fake_quantized`` (the keys and values a LLaMA's cache
  would hold, quantized per token and head).

Leaves out
----------
Calibration methods that choose the rounding with data (GPTQ, Frantar et al., 2022; AWQ, Lin et al.,
2023; SmoothQuant, Xiao et al., 2022), LLM.int8()'s split of outlier features into a float16 matmul
(Dettmers et al., 2022), llama.cpp's K-quants and i-quants (super-blocks with quantized scales),
integer matmul kernels (here the weight is dequantised, then multiplied in float), quantization-aware
training and the quantization of activations.

Shapes: a weight is (out, in); groups and GGUF blocks run along the last dimension (``in``).
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator

import torch
import torch.nn.functional as F
from torch import nn

from llmbook.device import values_checkable

__all__ = ["Quantized", "absmax_quantize", "zeropoint_quantize", "fake_quantize", "QK", "BlockFormat",
           "GGUF_FORMATS", "quantize_q8_0", "dequantize_q8_0", "quantize_q4_0", "dequantize_q4_0",
           "quantize_q4_1", "dequantize_q4_1", "gguf_quantize", "gguf_dequantize", "quantizable_linears",
           "fake_quantized", "QuantLinear", "quantize_linears", "model_nbytes", "kv_fake_quantized"]

QK = 32  # values per block in Q8_0, Q4_0 and Q4_1 (ggml's QK8_0, QK4_0, QK4_1)


# ----------------------------------------------------------------------------- checks

def _check_float(name: str, x: object) -> torch.Tensor:
    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        raise TypeError(f"{name} must be a floating-point torch.Tensor, got "
                        f"{getattr(x, 'dtype', type(x).__name__)}")
    if x.numel() == 0:
        raise ValueError(f"{name} is empty: nothing to quantize")
    if values_checkable(x) and not bool(torch.isfinite(x).all()):
        raise ValueError(f"{name} holds NaN or infinite values: they have no integer code")
    return x


def _check_bits(bits: object, low: int = 2, high: int = 8) -> int:
    if isinstance(bits, bool) or not isinstance(bits, int) or not low <= bits <= high:
        raise ValueError(f"bits must be an int in [{low}, {high}], got {bits!r}")
    return bits


def _groups(x: torch.Tensor, group_size: int | None) -> torch.Tensor:
    """x as (..., n_groups, group_size), or (1, numel) for one group over the whole tensor."""
    if group_size is None:
        return x.reshape(1, -1)
    if isinstance(group_size, bool) or not isinstance(group_size, int) or group_size < 1:
        raise ValueError(f"group_size must be a positive int or None (one scale per tensor), got {group_size!r}")
    if x.dim() == 0 or x.shape[-1] % group_size:
        raise ValueError(f"group_size={group_size} must divide the last dimension of x (shape {tuple(x.shape)})")
    return x.reshape(*x.shape[:-1], x.shape[-1] // group_size, group_size)


def _scale_to(s: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The scale in ``dtype`` (float16 or float32); float16 rounded up, so that nothing clips."""
    if dtype == torch.float32:
        return s.float()
    if dtype != torch.float16:
        raise ValueError(f"scale_dtype must be torch.float16 or torch.float32, got {dtype!r}")
    if values_checkable(s) and bool((s > torch.finfo(torch.float16).max).any()):
        raise ValueError("x has values too large for a float16 scale (max |x| / levels > 65504); "
                         "use scale_dtype=torch.float32")
    h = s.to(torch.float16)
    below = h.float() < s
    return torch.where(below, torch.nextafter(h, torch.full_like(h, math.inf)), h)


def _inverse(s: torch.Tensor) -> torch.Tensor:
    """1 / s, and 0 where s = 0 (an all-zero block: every code is 0), as ggml does."""
    return torch.where(s == 0, torch.zeros_like(s), 1.0 / s)


def _divide(x: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    """x / s, and 0 where s = 0 (an all-zero group)."""
    return torch.where(s == 0, torch.zeros_like(x), x / s)


# ----------------------------------------------------------------------------- integers

@dataclass(frozen=True)
class Quantized:
    """Integer codes with their scales (and zero points): what a quantized tensor stores.

    ``q``: the codes, x's shape (int8 for absmax, uint8 for zero-point); ``scale``: one per group,
    shape ``(*x.shape[:-1], n_groups)``, or ``(1,)`` for one scale per tensor; ``zero``: the integer
    zero point per group (zero-point) or None (absmax); ``bits``; ``group_size`` (None: per tensor).
    """

    q: torch.Tensor
    scale: torch.Tensor
    zero: torch.Tensor | None
    bits: int
    group_size: int | None

    def dequantize(self) -> torch.Tensor:
        """The float32 values the codes stand for: ``q s`` (absmax) or ``(q - z) s`` (zero-point)."""
        g = _groups(self.q, self.group_size).float()
        shift = 0.0 if self.zero is None else self.zero.float()[..., None]
        return ((g - shift) * self.scale.float()[..., None]).reshape(self.q.shape)

    @property
    def bits_per_weight(self) -> float:
        """Storage per value: the b-bit code plus each group's scale (and b-bit zero point)."""
        per_group = 8 * self.scale.element_size() + (self.bits if self.zero is not None else 0)
        return self.bits + per_group * self.scale.numel() / self.q.numel()


def absmax_quantize(x: torch.Tensor, bits: int = 8, group_size: int | None = None,
                    scale_dtype: torch.dtype = torch.float16) -> Quantized:
    """Symmetric quantization to ``bits``-bit signed integers in ``[-(2^(b-1) - 1), 2^(b-1) - 1]``.

    >>> qx = absmax_quantize(torch.tensor([0.5, -1.27, 0.0]), bits=8, scale_dtype=torch.float32)
    >>> qx.q.tolist(), round(float(qx.scale), 4)
    ([50, -127, 0], 0.01)
    """
    x = _check_float("x", x)
    bits = _check_bits(bits)
    qmax = 2 ** (bits - 1) - 1
    g = _groups(x.float(), group_size)
    s = _scale_to(g.abs().amax(-1) / qmax, scale_dtype)                 # (..., n_groups)
    q = torch.round(_divide(g, s.float()[..., None])).clamp(-qmax, qmax)
    return Quantized(q.to(torch.int8).reshape(x.shape), s, None, bits, group_size)


def zeropoint_quantize(x: torch.Tensor, bits: int = 8, group_size: int | None = None,
                       scale_dtype: torch.dtype = torch.float16) -> Quantized:
    """Asymmetric quantization to ``bits``-bit unsigned integers with an integer zero point.

    The range is widened to hold 0 (``[min(x, 0), max(x, 0)]``), so that 0 is a code (z) and
    ``x ~ (q - z) s`` is exact for zeros (Jacob et al., 2018, section 2.1).

    >>> qx = zeropoint_quantize(torch.tensor([-1.0, 0.0, 2.0]), bits=2, scale_dtype=torch.float32)
    >>> qx.q.tolist(), int(qx.zero), qx.dequantize().tolist()
    ([0, 1, 3], 1, [-1.0, 0.0, 2.0])
    """
    x = _check_float("x", x)
    bits = _check_bits(bits)
    levels = 2 ** bits - 1
    g = _groups(x.float(), group_size)
    lo, hi = g.amin(-1).clamp(max=0), g.amax(-1).clamp(min=0)          # (..., n_groups), lo <= 0 <= hi
    s = _scale_to((hi - lo) / levels, scale_dtype)
    z = torch.round(_divide(-lo, s.float())).clamp(0, levels)
    q = (torch.round(_divide(g, s.float()[..., None])) + z[..., None]).clamp(0, levels)
    return Quantized(q.to(torch.uint8).reshape(x.shape), s, z.to(torch.uint8), bits, group_size)


def fake_quantize(x: torch.Tensor, scheme: str = "absmax", bits: int = 4, group_size: int | None = None,
                  scale_dtype: torch.dtype = torch.float16) -> torch.Tensor:
    """Quantize then dequantize: x rounded to the grid the format can store, in x's dtype."""
    fns = {"absmax": absmax_quantize, "zeropoint": zeropoint_quantize}
    if scheme not in fns:
        raise ValueError(f"scheme must be one of {', '.join(fns)}, got {scheme!r}")
    return fns[scheme](x, bits, group_size, scale_dtype).dequantize().to(x.dtype)


# ----------------------------------------------------------------------------- GGUF blocks
# Each function follows the reference quantizer of ggml-quants.c as the gguf package ports it
# (quantize_row_q8_0_ref, quantize_row_q4_0_ref, quantize_row_q4_1_ref): float32 arithmetic, the
# scale computed in float32 and *stored* as float16, the codes computed with the float32 scale.

def _blocks(x: torch.Tensor) -> torch.Tensor:
    x = _check_float("x", x)
    if x.dim() == 0 or x.shape[-1] % QK:
        raise ValueError(f"the last dimension of x must be a multiple of {QK} (the block size), got shape {tuple(x.shape)}")
    return x.float().reshape(-1, QK)                                    # (n_blocks, 32)


def _f16_bytes(v: torch.Tensor) -> torch.Tensor:
    """float32 (n, 1) -> the little-endian bytes of its float16 (n, 2)."""
    return v.to(torch.float16).view(torch.uint8)


def _f16_from(b: torch.Tensor) -> torch.Tensor:
    """Bytes (n, 2) -> float32 (n, 1)."""
    return b.contiguous().view(torch.float16).float()


def _roundf(v: torch.Tensor) -> torch.Tensor:
    """C's roundf: halves away from zero (torch.round sends halves to even)."""
    a = v.abs()
    fl = torch.floor(a)
    return torch.sign(v) * (fl + torch.floor(2 * (a - fl)))


def _pack_nibbles(q: torch.Tensor) -> torch.Tensor:
    """(n, 32) codes 0..15 -> (n, 16) bytes: byte j holds value j (low 4 bits) and value j + 16 (high)."""
    q = q.to(torch.uint8)
    return q[:, :16] | (q[:, 16:] << 4)


def _unpack_nibbles(b: torch.Tensor) -> torch.Tensor:
    """(n, 16) bytes -> (n, 32) codes: the 16 low nibbles, then the 16 high ones."""
    return torch.cat([b & 0x0F, b >> 4], dim=-1)


def _byte_rows(b: object, fmt: str, block_bytes: int) -> torch.Tensor:
    if not isinstance(b, torch.Tensor) or b.dtype != torch.uint8:
        raise TypeError(f"blocks must be a torch.uint8 tensor of {fmt} bytes, got {getattr(b, 'dtype', type(b).__name__)}")
    if b.dim() == 0 or b.shape[-1] % block_bytes:
        raise ValueError(f"the last dimension of blocks must be a multiple of {block_bytes} ({fmt}'s bytes per block), "
                         f"got shape {tuple(b.shape)}")
    return b.reshape(-1, block_bytes)


def quantize_q8_0(x: torch.Tensor) -> torch.Tensor:
    """Q8_0: per block of 32, float16 ``d = max|x| / 127`` then 32 int8 ``round(x / d)``: 34 bytes.

    Returns uint8 of shape ``(*x.shape[:-1], x.shape[-1] // 32 * 34)``.
    """
    b = _blocks(x)
    d = b.abs().amax(-1, keepdim=True) / 127
    q = _roundf(b * _inverse(d))
    out = torch.cat([_f16_bytes(d), q.to(torch.int8).view(torch.uint8)], dim=-1)
    return out.reshape(*x.shape[:-1], -1)


def dequantize_q8_0(blocks: torch.Tensor) -> torch.Tensor:
    """Q8_0 bytes -> float32 values ``d q``."""
    r = _byte_rows(blocks, "Q8_0", 34)
    d, q = _f16_from(r[:, :2]), r[:, 2:].contiguous().view(torch.int8).float()
    return (q * d).reshape(*blocks.shape[:-1], -1)


def quantize_q4_0(x: torch.Tensor) -> torch.Tensor:
    """Q4_0: float16 ``d = m / -8`` (m the block's value of largest magnitude, with its sign), then
    32 codes ``q = x / d + 8`` in 0..15, two per byte: 18 bytes per block."""
    b = _blocks(x)
    m = b.gather(-1, b.abs().argmax(-1, keepdim=True))                 # (n, 1), signed; first of ties
    d = m / -8
    q = torch.trunc(b * _inverse(d) + 8.5).clamp(0, 15)
    return torch.cat([_f16_bytes(d), _pack_nibbles(q)], dim=-1).reshape(*x.shape[:-1], -1)


def dequantize_q4_0(blocks: torch.Tensor) -> torch.Tensor:
    """Q4_0 bytes -> float32 values ``d (q - 8)``."""
    r = _byte_rows(blocks, "Q4_0", 18)
    d, q = _f16_from(r[:, :2]), _unpack_nibbles(r[:, 2:]).float()
    return (d * (q - 8)).reshape(*blocks.shape[:-1], -1)


def quantize_q4_1(x: torch.Tensor) -> torch.Tensor:
    """Q4_1: float16 ``d = (max - min) / 15`` and ``m = min``, then 32 codes ``q = (x - m) / d`` in
    0..15, two per byte: 20 bytes per block."""
    b = _blocks(x)
    lo, hi = b.amin(-1, keepdim=True), b.amax(-1, keepdim=True)
    d = (hi - lo) / 15
    q = torch.trunc((b - lo) * _inverse(d) + 0.5).clamp(0, 15)
    return torch.cat([_f16_bytes(d), _f16_bytes(lo), _pack_nibbles(q)], dim=-1).reshape(*x.shape[:-1], -1)


def dequantize_q4_1(blocks: torch.Tensor) -> torch.Tensor:
    """Q4_1 bytes -> float32 values ``d q + m``."""
    r = _byte_rows(blocks, "Q4_1", 20)
    d, m, q = _f16_from(r[:, :2]), _f16_from(r[:, 2:4]), _unpack_nibbles(r[:, 4:]).float()
    return (d * q + m).reshape(*blocks.shape[:-1], -1)


@dataclass(frozen=True)
class BlockFormat:
    """One GGUF block format: its name, bytes per block of 32 values, and its two functions."""

    name: str
    block_bytes: int
    quantize: Callable[[torch.Tensor], torch.Tensor]
    dequantize: Callable[[torch.Tensor], torch.Tensor]

    @property
    def bits_per_weight(self) -> float:
        return 8 * self.block_bytes / QK


GGUF_FORMATS = {f.name: f for f in (BlockFormat("Q8_0", 34, quantize_q8_0, dequantize_q8_0),
                                    BlockFormat("Q4_0", 18, quantize_q4_0, dequantize_q4_0),
                                    BlockFormat("Q4_1", 20, quantize_q4_1, dequantize_q4_1))}


def _format(fmt: object) -> BlockFormat:
    if fmt not in GGUF_FORMATS:
        raise ValueError(f"fmt must be one of {', '.join(GGUF_FORMATS)}, got {fmt!r}")
    return GGUF_FORMATS[fmt]


def gguf_quantize(x: torch.Tensor, fmt: str) -> torch.Tensor:
    """x (..., n) -> the uint8 bytes of ``fmt`` (``"Q8_0"``, ``"Q4_0"``, ``"Q4_1"``), (..., n / 32 * bytes)."""
    return _format(fmt).quantize(x)


def gguf_dequantize(blocks: torch.Tensor, fmt: str) -> torch.Tensor:
    """The bytes of ``fmt`` -> float32 values (..., n)."""
    return _format(fmt).dequantize(blocks)


# ----------------------------------------------------------------------------- models

def quantizable_linears(model: nn.Module) -> list[tuple[str, nn.Linear]]:
    """Every ``nn.Linear`` of ``model`` except one whose weight is an embedding's (a tied output layer).

    The embedding stays in the format it has: that is the usual choice (llama.cpp keeps the token
    embedding at higher precision in its smaller formats; SmolLM2's file stores it as Q8_0).
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    shared = {id(m.weight) for m in model.modules() if isinstance(m, nn.Embedding)}
    return [(n, m) for n, m in model.named_modules() if isinstance(m, nn.Linear) and id(m.weight) not in shared]


@contextmanager
def fake_quantized(model: nn.Module, fn: Callable[[torch.Tensor], torch.Tensor]) -> Iterator[dict]:
    """Inside the block, every quantizable linear weight W of ``model`` is ``fn(W)``; restored after.

    ``fn`` maps a weight (out, in) to a tensor of the same shape (``lambda w: fake_quantize(w, ...)``).
    Yields ``{"matrices": k, "weights": n}``, what was replaced.
    """
    if not callable(fn):
        raise TypeError(f"fn must be a function of the weight, got {type(fn).__name__}")
    layers = quantizable_linears(model)
    saved = []
    try:
        with torch.no_grad():
            for name, lin in layers:
                w = fn(lin.weight.data)
                if not isinstance(w, torch.Tensor) or w.shape != lin.weight.shape:
                    raise ValueError(f"fn must return a tensor of the weight's shape {tuple(lin.weight.shape)} "
                                     f"(layer {name}), got {getattr(w, 'shape', type(w).__name__)}")
                saved.append((lin, lin.weight.data))
                lin.weight.data = w.to(lin.weight.dtype)
        yield {"matrices": len(layers), "weights": sum(lin.weight.numel() for _, lin in layers)}
    finally:
        for lin, w in saved:
            lin.weight.data = w


class QuantLinear(nn.Module):
    """A linear layer whose weight is kept as GGUF blocks and dequantised at every call.

    ``QuantLinear(weight, fmt="Q4_1", bias=None)``: weight (out, in), in a multiple of 32. The
    blocks are a buffer of uint8 (out, in / 32 * bytes per block); ``forward(x)`` dequantises them
    to x's dtype and calls ``F.linear``. The weight then takes ``bits_per_weight / 32`` of float32's
    memory, and every call pays for the dequantisation (no fused integer kernel here).
    """

    def __init__(self, weight: torch.Tensor, fmt: str = "Q4_1", bias: torch.Tensor | None = None):
        super().__init__()
        fmt_ = _format(fmt)
        if not isinstance(weight, torch.Tensor) or weight.dim() != 2:
            raise ValueError(f"weight must be a 2-D (out, in) tensor, got {getattr(weight, 'shape', type(weight).__name__)}")
        if bias is not None and (not isinstance(bias, torch.Tensor) or bias.shape != weight.shape[:1]):
            raise ValueError(f"bias must be None or a tensor of shape ({weight.shape[0]},), got "
                             f"{getattr(bias, 'shape', type(bias).__name__)}")
        self.fmt, self.out_features, self.in_features = fmt_.name, weight.shape[0], weight.shape[1]
        self.register_buffer("blocks", fmt_.quantize(weight.detach()))
        self.bias = None if bias is None else nn.Parameter(bias.detach().clone(), requires_grad=False)

    @classmethod
    def from_linear(cls, linear: nn.Linear, fmt: str = "Q4_1") -> "QuantLinear":
        if not isinstance(linear, nn.Linear):
            raise TypeError(f"linear must be a torch.nn.Linear, got {type(linear).__name__}")
        return cls(linear.weight, fmt, linear.bias)

    def weight(self) -> torch.Tensor:
        """The dequantised weight (out, in), float32."""
        return gguf_dequantize(self.blocks, self.fmt)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight().to(x.dtype), None if self.bias is None else self.bias.to(x.dtype))

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, fmt={self.fmt}"


def quantize_linears(model: nn.Module, fmt: str = "Q4_1") -> nn.Module:
    """Replace every quantizable linear of ``model`` (see ``quantizable_linears``) by a ``QuantLinear``, in place."""
    _format(fmt)
    for name, lin in quantizable_linears(model):
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, child, QuantLinear.from_linear(lin, fmt))
    return model


def model_nbytes(model: nn.Module) -> int:
    """Bytes held by the parameters and buffers of ``model`` (a tied tensor counted once)."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    seen, total = set(), 0
    for t in list(model.parameters()) + list(model.buffers()):
        if id(t) not in seen:
            seen.add(id(t))
            total += t.numel() * t.element_size()
    return total


@contextmanager
def kv_fake_quantized(model: nn.Module, bits: int = 8) -> Iterator[int]:
    """Inside the block, a LLaMA's keys and values are rounded to ``bits``-bit absmax codes, one
    float16 scale per token and per head, as a quantized KV cache would hold them.

    The rounding happens at the output of ``k_proj`` and ``v_proj``, so keys are quantized before
    RoPE rotates them (as KVQuant does, Hooper et al., 2024); every position attends to the
    rounded keys and values, its own included. Yields the number of layers hooked.
    """
    from llmbook.llama import Llama

    if not isinstance(model, Llama):
        raise TypeError(f"model must be an llmbook.llama.Llama, got {type(model).__name__}")
    bits = _check_bits(bits)
    hd = model.config.head_dim

    def hook(module, args, out):
        return fake_quantize(out, "absmax", bits, group_size=hd)        # groups of hd: one per token and head

    handles = []
    try:
        for block in model.layers:
            handles += [block.self_attn.k_proj.register_forward_hook(hook),
                        block.self_attn.v_proj.register_forward_hook(hook)]
        yield len(model.layers)
    finally:
        for h in handles:
            h.remove()
