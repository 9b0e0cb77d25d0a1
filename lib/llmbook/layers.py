"""The small layers a Transformer block is made of: LayerNorm, the feed-forward network, AddNorm.

Covers
------
- ``LayerNorm``: normalise each position's feature vector to mean 0 and variance 1, then
  scale and shift it with learned ``weight`` and ``bias`` (Ba, Kiros & Hinton, 2016,
  "Layer Normalization", arXiv:1607.06450). Numerically the same as ``torch.nn.LayerNorm``
  over the last dimension (biased variance, ``eps`` inside the square root). Half-precision
  inputs (float16, bfloat16) are normalised in float32 and cast back, as PyTorch's own
  kernel does: a mean and a variance summed over hundreds of features in bfloat16 (8 bits
  of mantissa) would lose most of their digits.
- ``FeedForward``: the position-wise network FFN(x) = act(x W1 + b1) W2 + b2 of
  Vaswani et al. (2017), "Attention Is All You Need", section 3.3: widen from ``d_model``
  to ``d_ff``, apply ReLU or GELU, narrow back. The same weights act on every position.
- ``AddNorm``: the residual connection plus normalisation around every sub-layer,
  LayerNorm(x + Dropout(Sublayer(x))) (post-LN, the original paper).

Leaves out
----------
RMSNorm and gated FFNs (SwiGLU) belong to chapter 8; BatchNorm is only used in the
chapter-4 notebook, to contrast with LayerNorm.

Pre-LN
------
The pre-LN placement puts the normalisation *inside* the residual branch:
x + Sublayer(LayerNorm(x)), with one extra LayerNorm after the last block. GPT-2 adopted it
(its paper says the LayerNorm "was moved to the input of each sub-block", relative to
GPT-1); it was already in the Tensor2Tensor implementation of the Transformer, and Wang et
al. (2019, "Learning Deep Transformer Models for Machine Translation") and Xiong et al.
(2020, "On Layer Normalization in the Transformer Architecture") studied it. ``AddNorm`` is
the post-LN form; the
pre-LN form needs no wrapper, it is written out in ``llmbook.transformer`` as
``x = x + dropout(sublayer(norm(x)))``.

Shapes: B batch, T sequence length, D = d_model, F = d_ff.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["LayerNorm", "FeedForward", "AddNorm", "ACTIVATIONS"]

# Names accepted by FeedForward(activation=...). "gelu" is the exact erf form,
# "gelu_tanh" the tanh approximation GPT-2 used.
ACTIVATIONS = ("relu", "gelu", "gelu_tanh")


def _check_positive_int(name: str, value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value <= 0:
        raise ValueError(f"{name} must be positive, got {value}")
    return value


def _check_dropout(value: object) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise TypeError(f"dropout must be a float, got {type(value).__name__}")
    if not 0.0 <= float(value) < 1.0:
        raise ValueError(f"dropout must be in [0, 1), got {value}")
    return float(value)


class LayerNorm(nn.Module):
    """y = weight * (x - mean) / sqrt(var + eps) + bias, statistics over the last dimension.

    The mean and the (biased) variance are taken over the ``d_model`` features of one
    position of one example, so the result never depends on the other examples in the
    batch or on the other positions (unlike BatchNorm).

    >>> ln = LayerNorm(4)
    >>> y = ln(torch.tensor([[1.0, 2.0, 3.0, 4.0]]))
    >>> [round(v, 4) for v in y[0].tolist()]
    [-1.3416, -0.4472, 0.4472, 1.3416]
    >>> torch.allclose(y, torch.nn.LayerNorm(4)(torch.tensor([[1.0, 2.0, 3.0, 4.0]])))
    True

    A bfloat16 input is normalised in float32 and returned in bfloat16:

    >>> ln(torch.tensor([[1.0, 2.0, 3.0, 4.0]], dtype=torch.bfloat16)).dtype
    torch.bfloat16
    """

    def __init__(self, d_model: int, eps: float = 1e-5, bias: bool = True):
        super().__init__()
        self.d_model = _check_positive_int("d_model", d_model)
        if not isinstance(eps, (int, float)) or isinstance(eps, bool) or not 0 <= eps < float("inf"):
            raise ValueError(f"eps must be a non-negative float, got {eps!r}")  # NaN and inf too
        self.eps = float(eps)
        # Initialised to the identity transform: scale 1, shift 0.
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model)) if bias else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] != self.d_model:
            raise ValueError(f"x must have {self.d_model} features in its last dimension, got shape {tuple(x.shape)}")
        half = x.dtype if x.dtype in (torch.float16, torch.bfloat16) else None
        if half is not None:
            x = x.float()  # statistics in float32, as torch's kernel computes them
        mean = x.mean(dim=-1, keepdim=True)  # (..., 1)
        # Biased variance (divide by D, not D - 1), as in the paper and torch.nn.LayerNorm.
        var = x.var(dim=-1, keepdim=True, unbiased=False)  # (..., 1)
        y = (x - mean) / torch.sqrt(var + self.eps)
        y = y * self.weight
        if self.bias is not None:
            y = y + self.bias
        return y if half is None else y.to(half)

    def extra_repr(self) -> str:
        return f"{self.d_model}, eps={self.eps}, bias={self.bias is not None}"


class FeedForward(nn.Module):
    """FFN(x) = act(x W1 + b1) W2 + b2, applied to every position with the same weights.

    ``linear1`` widens from ``d_model`` to ``d_ff`` (4x in the paper), ``linear2`` narrows
    back. Dropout sits after the activation, where ``torch.nn.TransformerEncoderLayer``
    puts it, so the two stay numerically equal with copied weights.

    >>> ffn = FeedForward(8, 32)
    >>> ffn(torch.zeros(2, 5, 8)).shape
    torch.Size([2, 5, 8])
    >>> sum(p.numel() for p in ffn.parameters())   # 8*32 + 32 + 32*8 + 8
    552
    """

    def __init__(self, d_model: int, d_ff: int, activation: str = "relu", dropout: float = 0.0, bias: bool = True):
        super().__init__()
        self.d_model = _check_positive_int("d_model", d_model)
        self.d_ff = _check_positive_int("d_ff", d_ff)
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {ACTIVATIONS}, got {activation!r}")
        self.activation = activation
        self.linear1 = nn.Linear(d_model, d_ff, bias=bias)  # widen: D -> F
        self.linear2 = nn.Linear(d_ff, d_model, bias=bias)  # narrow: F -> D
        self.dropout = nn.Dropout(_check_dropout(dropout))

    def act(self, h: torch.Tensor) -> torch.Tensor:
        if self.activation == "relu":
            return F.relu(h)
        if self.activation == "gelu":
            return F.gelu(h)
        return F.gelu(h, approximate="tanh")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] != self.d_model:
            raise ValueError(f"x must have {self.d_model} features in its last dimension, got shape {tuple(x.shape)}")
        h = self.act(self.linear1(x))  # (B, T, F)
        return self.linear2(self.dropout(h))  # (B, T, D)


class AddNorm(nn.Module):
    """Post-LN residual wrapper: AddNorm(x, s) = LayerNorm(x + Dropout(s)), s = Sublayer(x).

    Called with the sub-layer's *output* so that any sub-layer (self-attention with a
    mask, cross-attention, FFN) can be wrapped without knowing its arguments:

    >>> addnorm = AddNorm(4)
    >>> x = torch.randn(2, 3, 4)
    >>> y = addnorm(x, torch.zeros_like(x))       # a sub-layer that outputs zeros
    >>> torch.allclose(y, torch.nn.functional.layer_norm(x, (4,)), atol=1e-6)
    True

    For the pre-LN form (GPT-2) use ``x + dropout(sublayer(norm(x)))`` instead; see the
    module docstring.
    """

    def __init__(self, d_model: int, dropout: float = 0.0, eps: float = 1e-5):
        super().__init__()
        self.norm = LayerNorm(d_model, eps=eps)
        self.dropout = nn.Dropout(_check_dropout(dropout))

    def forward(self, x: torch.Tensor, sublayer_out: torch.Tensor) -> torch.Tensor:
        if x.shape != sublayer_out.shape:
            raise ValueError(
                f"sublayer_out must have the shape of x {tuple(x.shape)}, got {tuple(sublayer_out.shape)}"
            )
        return self.norm(x + self.dropout(sublayer_out))

