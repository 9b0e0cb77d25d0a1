"""Telling a Transformer where each token is: sinusoidal, learned, rotary and ALiBi positions.

Attention is a weighted sum over a *set*: permute the inputs and the outputs permute
the same way. A position signal breaks that symmetry.

Covers
------
- ``sinusoidal_encoding`` / ``SinusoidalPositionalEncoding``: the fixed table of
  Vaswani et al. (2017), "Attention Is All You Need", section 3.5,
  PE[pos, 2i] = sin(pos / base^(2i/d)), PE[pos, 2i+1] = cos(pos / base^(2i/d)),
  added to the (scaled) token embeddings: x_t = v_t + p_t.
- ``LearnedPositionalEmbedding``: one trained vector per position, GPT-1's choice
  (Radford et al., 2018); it knows nothing about positions past its table.
- ``rope_cache`` / ``apply_rope``: rotary position embedding, RoPE (Su et al., 2021,
  "RoFormer", arXiv:2104.09864), as LLaMA uses it: rotate each query and key so that
  q_m . k_n depends only on m - n. The layout is the "rotate-half" one of GPT-NeoX and
  Hugging Face's LLaMA (dimension j is paired with j + head_dim/2, not with j + 1), so
  that real LLaMA checkpoints (chapter 8, SmolLM2 with base 100000) load unchanged.
  ``rope(x, positions)`` rotates a tensor of any leading shape at explicit positions
  (packed sequences, left padding, a cache per example); ``interleaved=True`` everywhere
  selects the other layout, Meta's and RoFormer's pairs (x_2i, x_2i+1);
  ``interleaved_to_half`` / ``half_to_interleaved`` permute a query or key weight
  between the two, which rotate the same vectors.
- ``RopeScaling`` / ``scaled_rope_inv_freq``: reading past the length RoPE was trained at
  by changing its frequencies, as Hugging Face's ``rope_type`` "linear", "dynamic" and
  "yarn" do: position interpolation (Chen et al., 2023, arXiv:2306.15595) divides every
  frequency by the factor s; NTK-aware scaling (bloc97, 2023) raises the base to
  base * s^(hd/(hd-2)), so the fastest plane keeps its frequency and the slowest is
  interpolated; YaRN (Peng et al., 2023, arXiv:2309.00071) interpolates only the planes that
  turn less than ``beta_slow`` times in the trained length, keeps those that turn more than
  ``beta_fast`` times, ramps in between, and scales the attention logits by
  (0.1 ln s + 1)^2. ``rope_angles``, ``rope_cache`` and ``rope`` take ``scaling=``.
- ``alibi_slopes`` / ``alibi_bias``: ALiBi (Press, Smith & Lewis, 2022, "Train Short, Test
  Long", arXiv:2108.12409): nothing is added to the embeddings; every attention score
  q_i . k_j gets the fixed penalty -m_h (i - j), a head-specific slope m_h times the
  distance, so each head prefers recent tokens at its own rate, at any length.

Leaves out
----------
T5's learned relative position buckets; the dynamic variants of RoPE scaling that change
the frequencies with the current length (Hugging Face's "dynamic" type with factor > 1),
LongRoPE's searched per-plane factors and Llama 3's wavelength bands.

Shapes: B batch, T sequence length, D = d_model, H heads, hd = head_dim.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

__all__ = [
    "sinusoidal_encoding",
    "SinusoidalPositionalEncoding",
    "LearnedPositionalEmbedding",
    "rope_inv_freq",
    "RopeScaling",
    "scaled_rope_inv_freq",
    "rope_cache",
    "rope_angles",
    "rotate_half",
    "rotate_pairs",
    "apply_rope",
    "rope",
    "interleaved_to_half",
    "half_to_interleaved",
    "alibi_slopes",
    "alibi_bias",
]


def _check_positive_int(name: str, value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value <= 0:
        raise ValueError(f"{name} must be positive, got {value}")
    return value


def _check_base(base: object) -> float:
    if not isinstance(base, (int, float)) or isinstance(base, bool):
        raise TypeError(f"base must be a number, got {type(base).__name__}")
    if not base > 1.0:
        raise ValueError(f"base must be greater than 1, got {base}")
    return float(base)


def _check_even(name: str, value: int) -> int:
    if value % 2:
        raise ValueError(f"{name} must be even (sines and cosines come in pairs), got {value}")
    return value


def sinusoidal_encoding(n_positions: int, d_model: int, base: float = 10000.0) -> torch.Tensor:
    """The fixed sinusoidal table, shape (n_positions, d_model), float32.

    Column 2i holds sin(pos * w_i) and column 2i+1 holds cos(pos * w_i), with
    w_i = base^(-2i/d_model): the paper's interleaving. The frequencies fall
    geometrically from 1 (wavelength 2*pi) towards 1/base (wavelength base*2*pi).

    >>> pe = sinusoidal_encoding(3, 4)
    >>> pe.shape
    torch.Size([3, 4])
    >>> [round(v, 4) for v in pe[1].tolist()]   # sin 1, cos 1, sin 0.01, cos 0.01
    [0.8415, 0.5403, 0.01, 0.9999]
    """
    _check_positive_int("n_positions", n_positions)
    _check_even("d_model", _check_positive_int("d_model", d_model))
    base = _check_base(base)
    # Computed in float64 and rounded once, so the table does not depend on the
    # order of float32 operations (and equals the closed form to ~1e-7).
    pos = torch.arange(n_positions, dtype=torch.float64)[:, None]  # (P, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)  # (D/2,)
    omega = base ** (-two_i / d_model)  # (D/2,) angular frequencies
    angles = pos * omega  # (P, D/2)
    pe = torch.empty(n_positions, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angles)
    pe[:, 1::2] = torch.cos(angles)
    return pe.to(torch.float32)


class SinusoidalPositionalEncoding(nn.Module):
    """Add the sinusoidal table to a batch of embeddings, then apply dropout.

    The table is a buffer (saved with the model, not trained). ``forward(x)`` takes
    x of shape (B, T, d_model) and returns x + PE[:T].

    >>> pe = SinusoidalPositionalEncoding(8, max_len=16)
    >>> pe(torch.zeros(1, 3, 8))[0, 1, :2]
    tensor([0.8415, 0.5403])
    """

    def __init__(self, d_model: int, max_len: int = 5000, dropout: float = 0.0, base: float = 10000.0):
        super().__init__()
        self.d_model = _check_positive_int("d_model", d_model)
        self.max_len = _check_positive_int("max_len", max_len)
        if not 0.0 <= float(dropout) < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        self.dropout = nn.Dropout(float(dropout))
        # persistent=False: the table is a function of (max_len, d_model, base), so it
        # is rebuilt rather than stored in checkpoints.
        self.register_buffer("pe", sinusoidal_encoding(max_len, d_model, base), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 3 or x.shape[-1] != self.d_model:
            raise ValueError(f"x must have shape (B, T, {self.d_model}), got {tuple(x.shape)}")
        T = x.shape[1]
        if T > self.max_len:
            raise ValueError(f"sequence length T={T} exceeds max_len={self.max_len} of the positional table")
        return self.dropout(x + self.pe[:T].to(x.dtype))  # (B, T, D)


class LearnedPositionalEmbedding(nn.Module):
    """One trained vector per position (GPT-1): ``forward(x)`` returns x + P[:T].

    Positions past ``max_len`` have no vector; asking for them is an error rather than
    a silent wrap-around.

    >>> lpe = LearnedPositionalEmbedding(4, max_len=3)
    >>> lpe(torch.zeros(2, 3, 4)).shape
    torch.Size([2, 3, 4])
    """

    def __init__(self, d_model: int, max_len: int, dropout: float = 0.0, init_std: float = 0.02):
        super().__init__()
        self.d_model = _check_positive_int("d_model", d_model)
        self.max_len = _check_positive_int("max_len", max_len)
        if not 0.0 <= float(dropout) < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        self.dropout = nn.Dropout(float(dropout))
        if isinstance(init_std, bool) or not isinstance(init_std, (int, float)) or not 0 <= init_std < float("inf"):
            raise ValueError(f"init_std must be a finite number >= 0, got {init_std!r}")
        self.weight = nn.Parameter(torch.randn(max_len, d_model) * init_std)  # (max_len, D)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 3 or x.shape[-1] != self.d_model:
            raise ValueError(f"x must have shape (B, T, {self.d_model}), got {tuple(x.shape)}")
        T = x.shape[1]
        if T > self.max_len:
            raise ValueError(
                f"sequence length T={T} exceeds max_len={self.max_len}: a learned table has no "
                "vector for positions it was never given"
            )
        return self.dropout(x + self.weight[:T].to(x.dtype))


def rope_inv_freq(head_dim: int, base: float = 10000.0, device: torch.device | str | None = None) -> torch.Tensor:
    """RoPE's angular frequencies base^(-2i/head_dim), i = 0 .. head_dim/2 - 1, float32.

    Computed exactly as Hugging Face's LLaMA does (integer arange cast to float32), so
    the angles agree bit for bit.

    >>> rope_inv_freq(4)
    tensor([1.0000, 0.0100])
    """
    _check_even("head_dim", _check_positive_int("head_dim", head_dim))
    base = _check_base(base)
    exponents = torch.arange(0, head_dim, 2, dtype=torch.int64, device=device).to(torch.float32) / head_dim
    return 1.0 / (base**exponents)


SCALING_METHODS = ("linear", "ntk", "yarn")


@dataclass(frozen=True)
class RopeScaling:
    """How to stretch RoPE so that a model trained at length L reads ``factor`` times further.

    ``method`` is "linear" (position interpolation, Chen et al., 2023: every frequency divided
    by s, the same as reading position m as m / s), "ntk" (NTK-aware scaling, bloc97, 2023: the
    base raised to base * s^(hd/(hd-2))) or "yarn" (Peng et al., 2023: NTK-by-parts plus an
    attention temperature). YaRN needs ``original_length`` = L; the two betas are its defaults
    for LLaMA, in full turns of a plane over L positions.

    >>> RopeScaling("yarn", 4.0, original_length=32).beta_fast
    32.0
    """

    method: str  # "linear" (position interpolation), "ntk" (NTK-aware base change) or "yarn"
    factor: float  # s = the length to read / the length trained at; >= 1 (1: no change)
    original_length: int | None = None  # L, the trained context length (sets YaRN's ramp)
    beta_fast: float = 32.0  # YaRN: planes that turn more than this many times in L keep their frequency
    beta_slow: float = 1.0  # YaRN: planes that turn fewer than this many times in L are interpolated fully
    attention_factor: float | None = None  # YaRN: cos and sin times this; None: 0.1 ln s + 1 (1.0: NTK-by-parts alone)

    def __post_init__(self) -> None:
        if self.method not in SCALING_METHODS:
            raise ValueError(f"method must be one of {SCALING_METHODS}, got {self.method!r}")
        if isinstance(self.factor, bool) or not isinstance(self.factor, (int, float)) or not 1.0 <= self.factor < math.inf:
            raise ValueError(f"factor must be a finite number >= 1 (the length ratio), got {self.factor!r}")
        if self.original_length is not None:
            _check_positive_int("original_length", self.original_length)
        elif self.method == "yarn":
            raise ValueError("original_length (the trained context length) is needed for method='yarn'")
        for name in ("beta_fast", "beta_slow"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v < math.inf:
                raise ValueError(f"{name} must be a finite number > 0, got {v!r}")
        if not self.beta_fast > self.beta_slow:
            raise ValueError(f"beta_fast must exceed beta_slow, got {self.beta_fast} and {self.beta_slow}")
        a = self.attention_factor
        if a is not None:
            if self.method != "yarn":
                raise ValueError(f"attention_factor is YaRN's temperature; method={self.method!r} has none")
            if isinstance(a, bool) or not isinstance(a, (int, float)) or not 0 < a < math.inf:
                raise ValueError(f"attention_factor must be a finite number > 0 or None, got {a!r}")


def scaled_rope_inv_freq(
    head_dim: int, base: float = 10000.0, scaling: RopeScaling | None = None, device: torch.device | str | None = None
) -> tuple[torch.Tensor, float]:
    """RoPE's frequencies after ``scaling`` (float32, shape (head_dim/2,)) and the attention factor.

    The attention factor multiplies cos and sin (as Hugging Face does), so both the rotated
    query and key grow by it and every logit by its square: YaRN's temperature 1/t with
    sqrt(1/t) = 0.1 ln s + 1, unless ``scaling.attention_factor`` sets it. It is 1 for "linear"
    and "ntk" (and for ``scaling=None``).
    The operations are those of transformers' ``_compute_linear_scaling_rope_parameters``,
    ``_compute_dynamic_ntk_parameters`` (factor 1 at length s * L, which is the static rule)
    and ``_compute_yarn_parameters`` (with ``truncate``), so the frequencies agree bit for bit.

    >>> scaled_rope_inv_freq(4, 10000.0, RopeScaling("linear", 2.0))
    (tensor([0.5000, 0.0050]), 1.0)
    >>> scaled_rope_inv_freq(4, 10000.0, RopeScaling("ntk", 2.0))   # base 10000 * 2^2: the fast plane kept
    (tensor([1.0000, 0.0050]), 1.0)
    """
    inv_freq = rope_inv_freq(head_dim, base, device=device)  # validates head_dim and base
    if scaling is None:
        return inv_freq, 1.0
    if not isinstance(scaling, RopeScaling):
        raise TypeError(f"scaling must be a RopeScaling or None, got {type(scaling).__name__}")
    s = float(scaling.factor)
    if scaling.method == "linear":  # position interpolation: m * (w / s) = (m / s) * w
        return inv_freq / s, 1.0
    if scaling.method == "ntk":
        if head_dim < 4:
            raise ValueError(f"NTK-aware scaling needs head_dim >= 4 (the exponent is hd/(hd-2)), got {head_dim}")
        return rope_inv_freq(head_dim, float(base) * s ** (head_dim / (head_dim - 2)), device=device), 1.0
    # YaRN. A plane of wavelength 2 pi / w turns r = L w / (2 pi) times over the trained length L.
    # The dimension index where r equals a given count, rounded outwards; the ramp is linear in the index.
    L, base = scaling.original_length, float(base)

    def index_of(turns: float) -> float:
        return head_dim * math.log(L / (turns * 2 * math.pi)) / (2 * math.log(base))

    low = max(math.floor(index_of(scaling.beta_fast)), 0)
    high = min(math.ceil(index_of(scaling.beta_slow)), head_dim - 1)
    if low == high:
        high += 0.001  # as transformers: avoid dividing by zero
    pos_freqs = base ** (torch.arange(0, head_dim, 2, device=device).to(torch.float32) / head_dim)  # (hd/2,)
    ramp = ((torch.arange(head_dim // 2, dtype=torch.float32) - low) / (high - low)).clamp(0, 1).to(device)
    keep = 1 - ramp  # 1: extrapolate (the original frequency), 0: interpolate (divided by s)
    inv_freq = (1.0 / (s * pos_freqs)) * (1 - keep) + (1.0 / pos_freqs) * keep
    if scaling.attention_factor is not None:
        return inv_freq, float(scaling.attention_factor)
    return inv_freq, (0.1 * math.log(s) + 1.0 if s > 1 else 1.0)


def rope_cache(
    T: int,
    head_dim: int,
    base: float = 10000.0,
    device: torch.device | str | None = None,
    dtype: torch.dtype | None = None,
    offset: int = 0,
    *,
    interleaved: bool = False,
    scaling: RopeScaling | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin tables for positions offset .. offset+T-1, each of shape (T, head_dim).

    Rotate-half layout: the angle of frequency i sits in columns i and i + head_dim/2
    (``interleaved=True``: in columns 2i and 2i + 1). ``offset`` serves decoding with a KV
    cache (the new token's absolute position); for positions that are not consecutive,
    see :func:`rope_angles`. ``scaling``: the frequencies (and attention factor) of a
    :class:`RopeScaling`, for reading past the trained length.

    >>> cos, sin = rope_cache(3, 4)
    >>> cos.shape, sin.shape
    (torch.Size([3, 4]), torch.Size([3, 4]))
    >>> [round(v, 4) for v in sin[1].tolist()]    # angles 1 and 0.01, each twice
    [0.8415, 0.01, 0.8415, 0.01]
    """
    _check_positive_int("T", T)
    if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
        raise ValueError(f"offset must be a non-negative int, got {offset!r}")
    pos = torch.arange(offset, offset + T, device=device)  # (T,)
    return rope_angles(pos, head_dim, base, dtype=dtype, interleaved=interleaved, scaling=scaling)


def rope_angles(
    positions: torch.Tensor,
    head_dim: int,
    base: float = 10000.0,
    dtype: torch.dtype | None = None,
    interleaved: bool = False,
    *,
    scaling: RopeScaling | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of the angles position * w_i for any tensor of positions: shape (*positions.shape, head_dim).

    The angles are computed in float32 (positions cast to float32, as Hugging Face does),
    so ``rope_angles(torch.arange(T), hd)`` is ``rope_cache(T, hd)`` bit for bit. With ``scaling``
    the frequencies are :func:`scaled_rope_inv_freq`'s and cos and sin are multiplied by its
    attention factor (YaRN), as Hugging Face's rotary embedding does.

    >>> cos, sin = rope_angles(torch.tensor([[0, 5], [2, 2]]), 4)
    >>> cos.shape, torch.equal(rope_angles(torch.arange(6), 4)[1][5], sin[0, 1])
    (torch.Size([2, 2, 4]), True)
    """
    if not isinstance(positions, torch.Tensor):
        raise TypeError(f"positions must be a torch.Tensor of positions, got {type(positions).__name__}")
    if positions.dtype == torch.bool or positions.is_complex():
        raise TypeError(f"positions must be an integer or float tensor, got dtype {positions.dtype}")
    if positions.is_floating_point() and not bool(torch.isfinite(positions).all()):
        raise ValueError("positions must be finite (a NaN or inf position has no angle)")
    if not isinstance(interleaved, bool):
        raise TypeError(f"interleaved must be a bool, got {type(interleaved).__name__}")
    inv_freq, attention_factor = scaled_rope_inv_freq(head_dim, base, scaling, device=positions.device)  # (hd/2,)
    freqs = positions.to(torch.float32)[..., None] * inv_freq  # (..., hd/2)
    if interleaved:
        emb = torch.repeat_interleave(freqs, 2, dim=-1)  # (..., hd): w_0, w_0, w_1, w_1, ...
    else:
        emb = torch.cat((freqs, freqs), dim=-1)  # (..., hd): w_0 .. w_{hd/2-1}, twice
    cos, sin = emb.cos(), emb.sin()
    if attention_factor != 1.0:  # YaRN: both q and k grow by it, the logits by its square
        cos, sin = cos * attention_factor, sin * attention_factor
    if dtype is not None:
        cos, sin = cos.to(dtype), sin.to(dtype)
    return cos, sin


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """(x1, x2) -> (-x2, x1) on the two halves of the last dimension.

    >>> rotate_half(torch.tensor([1.0, 2.0, 3.0, 4.0]))
    tensor([-3., -4.,  1.,  2.])
    """
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat((-x2, x1), dim=-1)


def rotate_pairs(x: torch.Tensor) -> torch.Tensor:
    """(x_2i, x_2i+1) -> (-x_2i+1, x_2i) for each adjacent pair of the last dimension.

    >>> rotate_pairs(torch.tensor([1.0, 2.0, 3.0, 4.0]))
    tensor([-2.,  1., -4.,  3.])
    """
    pairs = x.unflatten(-1, (-1, 2))  # (..., hd/2, 2)
    return torch.stack((-pairs[..., 1], pairs[..., 0]), dim=-1).flatten(-2)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, interleaved: bool = False) -> torch.Tensor:
    """Rotate queries or keys by their position: x * cos + rotate_half(x) * sin.

    ``x`` has shape (B, H, T, hd); ``cos``/``sin`` come from ``rope_cache`` with shape
    (T, hd), or (B, T, hd) for per-example positions (they are broadcast over heads,
    like ``unsqueeze_dim=1`` in Hugging Face's ``apply_rotary_pos_emb``). Any other
    ``x`` (..., hd) takes ``cos``/``sin`` that broadcast to its shape (from
    :func:`rope_angles`; or use :func:`rope`). ``interleaved=True``: the tables and the
    rotation of the interleaved layout (``rotate_pairs``).

    Each pair (x_i, x_{i+hd/2}) is turned by the angle pos * w_i, so it keeps its length:

    >>> x = torch.randn(1, 2, 5, 8)
    >>> cos, sin = rope_cache(5, 8)
    >>> torch.allclose(apply_rope(x, cos, sin).norm(dim=-1), x.norm(dim=-1), atol=1e-5)
    True
    """
    if not isinstance(x, torch.Tensor) or x.dim() < 1:
        raise ValueError(f"x must be a tensor of shape (..., head_dim), got {getattr(x, 'shape', type(x))}")
    for name, t in (("cos", cos), ("sin", sin)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor (from rope_cache or rope_angles), got {type(t).__name__}")
    hd = x.shape[-1]
    _check_even("head_dim", hd)
    if cos.shape != sin.shape:
        raise ValueError(f"cos and sin must have the same shape, got {tuple(cos.shape)} and {tuple(sin.shape)}")
    if x.dim() == 4 and cos.dim() in (2, 3):
        B, H, T, hd = x.shape
        if cos.dim() == 2:
            if cos.shape != (T, hd):
                raise ValueError(f"cos must have shape (T, head_dim) = {(T, hd)}, got {tuple(cos.shape)}")
        else:
            if cos.shape[1:] != (T, hd) or cos.shape[0] not in (1, B):
                raise ValueError(f"cos must have shape (B, T, head_dim) = {(B, T, hd)}, got {tuple(cos.shape)}")
            cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)  # (B, 1, T, hd): broadcast over heads
    elif cos.dim() == 0 or cos.shape[-1] != hd:
        raise ValueError(f"cos must end in head_dim = {hd}, got shape {tuple(cos.shape)}")
    else:
        try:
            out = torch.broadcast_shapes(x.shape, cos.shape)
        except RuntimeError:
            out = None
        if out != x.shape:
            raise ValueError(f"cos of shape {tuple(cos.shape)} does not broadcast to x of shape {tuple(x.shape)}")
    return x * cos + (rotate_pairs(x) if interleaved else rotate_half(x)) * sin


def rope(x: torch.Tensor, positions: torch.Tensor, base: float = 10000.0, interleaved: bool = False, *,
         scaling: RopeScaling | None = None) -> torch.Tensor:
    """Rotate ``x`` (..., head_dim) at explicit ``positions``: any leading shape, any positions.

    ``positions`` broadcasts to ``x.shape[:-1]``: (T,) for one sequence shared by every head
    and example, (B, 1, T) per example for x (B, H, T, hd), (T, H)-shaped layouts, packed
    sequences that restart at 0, left padding. The angles are float32 and cast to
    ``x.dtype``, as :class:`llmbook.llama.Llama` does. For x (B, H, T, hd) and positions
    ``torch.arange(T)`` this is ``apply_rope(x, *rope_cache(T, hd, base))``. ``scaling``: see
    :class:`RopeScaling`.

    Only the distance counts: shifting every position by the same amount leaves q . k unchanged.

    >>> q, k = torch.randn(3, 8), torch.randn(3, 8)
    >>> p = torch.tensor([0, 4, 9])
    >>> s = (rope(q, p) * rope(k, p + 0)).sum(-1); s2 = (rope(q, p + 100) * rope(k, p + 100)).sum(-1)
    >>> torch.allclose(s, s2, atol=1e-4)
    True
    """
    if not isinstance(x, torch.Tensor) or x.dim() < 1:
        raise ValueError(f"x must be a tensor of shape (..., head_dim), got {getattr(x, 'shape', type(x))}")
    if not x.is_floating_point():
        raise TypeError(f"x must be a float tensor, got dtype {x.dtype}")
    if not isinstance(positions, torch.Tensor):
        raise TypeError(f"positions must be a torch.Tensor broadcastable to x.shape[:-1] = {tuple(x.shape[:-1])}, "
                        f"got {type(positions).__name__}")
    try:
        fits = torch.broadcast_shapes(positions.shape, x.shape[:-1]) == x.shape[:-1]
    except RuntimeError:
        fits = False
    if not fits:
        raise ValueError(f"positions of shape {tuple(positions.shape)} must broadcast to x.shape[:-1] = {tuple(x.shape[:-1])}")
    if positions.device != x.device:
        raise ValueError(f"positions is on {positions.device} but x is on {x.device}")
    cos, sin = rope_angles(positions, x.shape[-1], base, dtype=x.dtype, interleaved=interleaved, scaling=scaling)
    return x * cos + (rotate_pairs(x) if interleaved else rotate_half(x)) * sin


def _check_qk_rows(w: torch.Tensor, n_heads: int) -> int:
    _check_positive_int("n_heads", n_heads)
    if not isinstance(w, torch.Tensor) or w.dim() < 1:
        raise TypeError(f"w must be a tensor whose rows are the heads' outputs, got {type(w).__name__}")
    if w.shape[0] % (2 * n_heads):
        raise ValueError(f"w has {w.shape[0]} rows, not a multiple of 2 * n_heads = {2 * n_heads}")
    return w.shape[0] // n_heads // 2


def interleaved_to_half(w: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Reorder the rows of a query or key weight (out, in) from the interleaved layout to rotate-half.

    Within each head, output row 2i + c (pair i, component c) moves to row c * hd/2 + i, so
    ``rope(x @ interleaved_to_half(w, H).T, p)`` is ``rope(x @ w.T, p, interleaved=True)``
    with each head's dimensions reordered the same way, and every q . k is unchanged.
    (Meta's checkpoint -> Hugging Face's, as transformers' LLaMA conversion script permutes.)

    >>> interleaved_to_half(torch.arange(4.0)[:, None], 1).flatten()   # rows 0,1,2,3 -> 0,2,1,3
    tensor([0., 2., 1., 3.])
    """
    hd2 = _check_qk_rows(w, n_heads)
    return w.reshape(n_heads, hd2, 2, *w.shape[1:]).transpose(1, 2).reshape(w.shape)


def half_to_interleaved(w: torch.Tensor, n_heads: int) -> torch.Tensor:
    """The inverse of :func:`interleaved_to_half` (rotate-half rows -> interleaved pairs).

    >>> w = torch.randn(8, 3)
    >>> torch.equal(half_to_interleaved(interleaved_to_half(w, 2), 2), w)
    True
    """
    hd2 = _check_qk_rows(w, n_heads)
    return w.reshape(n_heads, 2, hd2, *w.shape[1:]).transpose(1, 2).reshape(w.shape)


def alibi_slopes(n_heads: int) -> torch.Tensor:
    """ALiBi's per-head slopes m_h, float32 of shape (n_heads,).

    For n heads, n a power of two, the slopes are the geometric sequence 2^(-8/n),
    2^(-16/n), ..., 2^(-8) (Press et al., 2022, section 3): 1/2, 1/4, ..., 1/256 for 8 heads.
    For other n the paper takes the 2^floor(log2 n) slopes of the nearest power of two and
    fills the remaining heads with every other slope of twice that power (its reference
    code, which BLOOM's ``build_alibi_tensor`` follows).

    >>> alibi_slopes(8).tolist()
    [0.5, 0.25, 0.125, 0.0625, 0.03125, 0.015625, 0.0078125, 0.00390625]
    >>> [round(v, 4) for v in alibi_slopes(6).tolist()]   # 4 slopes of n=4, then 2 of n=8
    [0.25, 0.0625, 0.0156, 0.0039, 0.5, 0.125]
    """
    _check_positive_int("n_heads", n_heads)

    def power_of_two(n: int) -> list[float]:
        start = 2.0 ** (-8.0 / n)
        return [start ** (h + 1) for h in range(n)]

    closest = 2 ** (n_heads.bit_length() - 1)  # the largest power of two <= n_heads
    slopes = power_of_two(closest)
    if closest < n_heads:
        slopes += power_of_two(2 * closest)[0::2][: n_heads - closest]
    return torch.tensor(slopes, dtype=torch.float32)


def alibi_bias(T: int, n_heads: int, causal: bool = True, device: torch.device | str | None = None) -> torch.Tensor:
    """The ALiBi term added to the attention scores, shape (n_heads, T, T), float32.

    Entry (h, i, j) is -m_h (i - j): zero on the diagonal, falling by m_h per token of
    distance. With ``causal=True`` the entries above the diagonal (j > i, the future) are
    -inf, so the tensor is a complete additive mask for ``F.scaled_dot_product_attention``
    (``attn_mask``) or ``llmbook.attention`` (a float mask is added to the scores). With
    ``causal=False`` the penalty is symmetric, -m_h |i - j|.

    >>> alibi_bias(3, 2)[0]                          # the slope of head 0 of 2 is 1/16
    tensor([[ 0.0000,    -inf,    -inf],
            [-0.0625,  0.0000,    -inf],
            [-0.1250, -0.0625,  0.0000]])
    """
    _check_positive_int("T", T)
    pos = torch.arange(T, device=device)
    offset = (pos[None, :] - pos[:, None]).to(torch.float32)  # (T, T): j - i, <= 0 for the past
    m = alibi_slopes(n_heads).to(device)[:, None, None]  # (H, 1, 1)
    if not causal:
        return 0.0 - m * offset.abs()  # -m_h |i - j| (0.0 - keeps the diagonal +0)
    bias = m * offset.clamp(max=0)  # (H, T, T): -m_h (i - j) on and below the diagonal
    return bias.masked_fill(offset > 0, float("-inf"))
