"""Attention: scaled dot-product, additive (Bahdanau), masks and multi-head attention.

Chapter 3 derives these step by step; this module holds the final versions that the
Transformer, GPT and BERT chapters build on.

Covered
    * ``scaled_dot_product_attention``: softmax(Q K^T / sqrt(d_k) + mask) V written out,
      with the same mask conventions as ``torch.nn.functional.scaled_dot_product_attention``
      (a boolean mask is True where attention is *allowed*; a float mask is *added* to the
      scores), optional dropout on the weights, and the weights returned on request.
    * mask helpers: ``causal_mask``, ``padding_mask``, ``key_padding_to_mask``.
    * ``additive_attention`` / ``AdditiveAttention``: score = w^T tanh(W_q q + W_k k + b)
      (Bahdanau et al. 2015). The module is the book's one additive attention: chapter 2b's
      RNN encoder-decoder (``llmbook.seq2seq_rnn``) calls it one decoder step at a time,
      chapter 3 times it against the dot product.
    * ``MultiHeadAttention``: self- and cross-attention, batch first, with masks, dropout
      and ``return_attention``. Without ``return_attention`` it calls PyTorch's fused
      ``F.scaled_dot_product_attention`` (flash / memory-efficient kernels on a GPU);
      with it, the explicit path above. ``MultiHeadAttention.from_torch`` copies the
      weights of a ``torch.nn.MultiheadAttention``.

Fully masked rows (a query allowed to see no key at all) are defined here, not NaN:
their attention weights are all zero and their output is the zero vector, which is
also what PyTorch's ``F.scaled_dot_product_attention`` returns from torch 2.5 on (earlier
versions give NaN; hence ``torch>=2.5`` in pyproject.toml). Gradients through such rows are zero.

Left out: relative / rotary positions (chapter 5), KV caches and grouped-query
attention (chapter 8), ``add_bias_kv`` / ``add_zero_attn`` of ``nn.MultiheadAttention``.

Papers: Bahdanau, Cho & Bengio (2015), "Neural Machine Translation by Jointly Learning
to Align and Translate"; Vaswani et al. (2017), "Attention Is All You Need".

Shape legend: B batch, H heads, Tq queries, Tk keys, d_k key/query size, d_v value
size, D = d_model = H * head_dim.
"""

from __future__ import annotations

import math
from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F

from .device import check_index_range, values_checkable

__all__ = [
    "scaled_dot_product_attention",
    "causal_mask",
    "padding_mask",
    "key_padding_to_mask",
    "additive_attention",
    "AdditiveAttention",
    "MultiHeadAttention",
]


# ---------------------------------------------------------------------------- checks
def _check_tensor(name: str, x: object, min_dim: int = 2) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got dtype {x.dtype}")
    if x.dim() < min_dim:
        raise ValueError(f"{name} must have at least {min_dim} dimensions, got shape {tuple(x.shape)}")
    return x


def _check_qkv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    _check_tensor("q", q)
    _check_tensor("k", k)
    _check_tensor("v", v)
    if q.dtype != k.dtype or q.dtype != v.dtype:
        raise TypeError(f"q, k and v must share a dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k must have the same last dimension d_k, got q {tuple(q.shape)} and k {tuple(k.shape)}")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"k and v must have the same number of positions Tk (dim -2), got k {tuple(k.shape)} and v {tuple(v.shape)}"
        )
    try:
        torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    except RuntimeError as exc:
        raise ValueError(
            f"the batch dimensions of q {tuple(q.shape)}, k {tuple(k.shape)} and v {tuple(v.shape)} do not broadcast"
        ) from exc


def _check_mask(name: str, mask: object, scores_shape: torch.Size) -> torch.Tensor:
    """A mask must be bool or floating and broadcast to the scores' shape (..., Tq, Tk)."""
    if not isinstance(mask, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor or None, got {type(mask).__name__}")
    if mask.dtype != torch.bool and not mask.is_floating_point():
        raise TypeError(
            f"{name} must be bool (True = attend) or floating (added to the scores), got dtype {mask.dtype}"
        )
    try:
        shape = torch.broadcast_shapes(mask.shape, scores_shape)
    except RuntimeError:
        shape = None
    if shape != scores_shape:
        raise ValueError(
            f"{name} of shape {tuple(mask.shape)} does not broadcast to the attention scores' shape "
            f"{tuple(scores_shape)} (..., Tq, Tk)"
        )
    return mask


def _check_dropout(dropout_p: object) -> float:
    if isinstance(dropout_p, bool) or not isinstance(dropout_p, (int, float)):
        raise TypeError(f"dropout_p must be a float, got {type(dropout_p).__name__}")
    if not 0.0 <= dropout_p < 1.0:
        raise ValueError(f"dropout_p must be in [0, 1), got {dropout_p}")
    return float(dropout_p)


def _check_scale(scale: object) -> Optional[float]:
    if scale is None:
        return None
    if isinstance(scale, bool) or not isinstance(scale, (int, float)):
        raise TypeError(f"scale must be a float or None, got {type(scale).__name__}")
    if not math.isfinite(scale) or scale <= 0:
        raise ValueError(f"scale must be a positive finite number, got {scale}")
    return float(scale)


def _all_finite(x: torch.Tensor) -> bool:
    """True when no element of ``x`` is NaN or infinite (reads the answer back: CPU only).

    One reduction instead of ``isfinite(x).all()``'s three passes and a bool tensor: a NaN
    or an infinity in ``x`` makes the sum NaN or infinite, so a finite sum proves every
    element finite. Only a sum that is not finite (a bad value, or finite values whose sum
    overflows) needs the element-wise check.
    """
    if not x.is_floating_point():
        return True
    total = x.sum(dtype=torch.float64 if x.dtype == torch.float64 else torch.float32)
    return bool(torch.isfinite(total)) or bool(torch.isfinite(x).all())


# ---------------------------------------------------------------------------- softmax
def _masked_softmax(scores: torch.Tensor, mask: Optional[torch.Tensor]) -> torch.Tensor:
    """softmax(scores + mask) over the last dim; rows with no allowed key give zeros, not NaN.

    ``scores`` must be a fresh tensor (the output of a matmul): the mask is applied in
    place, which saves a full pass over the (..., Tq, Tk) scores. Dead rows are found
    from the (usually much smaller) mask, assuming finite scores.
    """
    if mask is None:
        return torch.softmax(scores, dim=-1)
    if mask.dtype == torch.bool:
        dead = ~mask.any(dim=-1, keepdim=True)
        # -inf (not -1e9) so that masked keys get exactly zero weight in every dtype. Adding
        # a 0/-inf tensor (built at the mask's, usually small, size) rather than calling
        # masked_fill keeps the backward pass free: the gradient of an addition is the identity.
        additive = torch.zeros(mask.shape, dtype=scores.dtype, device=scores.device).masked_fill_(~mask, float("-inf"))
    else:
        dead = torch.isneginf(mask).all(dim=-1, keepdim=True)
        additive = mask.to(scores.dtype)
    # Asking "is any row dead?" is free on the CPU; on a GPU it would stall for a host sync
    # (and break a compiled graph), so there the dead-row path below always runs.
    if values_checkable(dead) and not bool(dead.any()):
        return torch.softmax(scores.add_(additive), dim=-1)
    # A dead row gets 0 (not -inf) added, which keeps its softmax and gradient finite;
    # zeroing its weights afterwards gives the documented all-zero row. Live rows are
    # unchanged, so both paths give the same numbers.
    weights = torch.softmax(scores.add_(additive.masked_fill(dead, 0.0)), dim=-1)
    return weights.masked_fill(dead, 0.0)


# ---------------------------------------------------------------------------- core
def scaled_dot_product_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: Optional[torch.Tensor] = None,
    dropout_p: float = 0.0,
    return_weights: bool = False,
    scale: Optional[float] = None,
):
    r"""softmax(q k^T * scale + mask) v, written out.

    Parameters
    ----------
    q: (..., Tq, d_k) queries.  k: (..., Tk, d_k) keys.  v: (..., Tk, d_v) values.
    mask: None, or a tensor broadcastable to (..., Tq, Tk): bool, True where attention is
        ALLOWED (the convention of ``F.scaled_dot_product_attention``), or floating, added
        to the scores (use ``-inf`` to forbid).
    dropout_p: probability of zeroing an attention weight (inverted dropout, as in
        PyTorch; applied whenever > 0, so pass 0.0 at evaluation time).
    return_weights: also return the attention weights (..., Tq, Tk).
    scale: multiplies the scores; default 1 / sqrt(d_k).

    Returns ``out`` (..., Tq, d_v), or ``(out, weights)``. Rows whose every key is masked
    get all-zero weights and a zero output.

    >>> q = torch.tensor([[1.0, 0.0]]); k = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    >>> v = torch.tensor([[10.0], [20.0]])
    >>> out, w = scaled_dot_product_attention(q, k, v, return_weights=True, scale=math.log(3.0))
    >>> w  # softmax([ln 3, 0]) = [3/4, 1/4]
    tensor([[0.7500, 0.2500]])
    >>> out
    tensor([[12.5000]])
    >>> scaled_dot_product_attention(q, k, v, mask=torch.tensor([[False, True]]))
    tensor([[20.]])
    """
    _check_qkv(q, k, v)
    dropout_p = _check_dropout(dropout_p)
    scale = _check_scale(scale)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    # Scaling q rather than the scores touches Tq*d_k numbers instead of Tq*Tk.
    scores = (q * scale) @ k.transpose(-2, -1)  # (..., Tq, Tk)
    if mask is not None:
        _check_mask("mask", mask, scores.shape)
    weights = _masked_softmax(scores, mask)  # (..., Tq, Tk), rows sum to 1 (or 0)
    dropped = F.dropout(weights, p=dropout_p, training=True) if dropout_p > 0 else weights
    out = dropped @ v  # (..., Tq, d_v)
    return (out, weights) if return_weights else out


# ---------------------------------------------------------------------------- masks
def causal_mask(n_query: int, n_key: Optional[int] = None, offset: int = 0, window: Optional[int] = None,
                device: Optional[torch.device | str] = None) -> torch.Tensor:
    """Bool (n_query, n_key) mask, True where query i (at absolute position offset + i) may see key j.

    The book's one causal mask, used by chapter 3's attention, chapter 4's decoder, the GPT
    and the sparse-attention layers. ``causal_mask(T)`` is the square (T, T) mask: True on
    and below the diagonal, so query i sees keys 0..i. With a KV cache the queries are the
    last ``n_query`` of ``n_key`` positions (``offset = n_key - n_query``); ``window`` keeps
    only the last ``window`` keys of each query (banded, sliding-window attention):
    j <= offset + i and j > offset + i - window.

    >>> causal_mask(3).int()
    tensor([[1, 0, 0],
            [1, 1, 0],
            [1, 1, 1]], dtype=torch.int32)
    >>> causal_mask(2, 4, offset=2).int()
    tensor([[1, 1, 1, 0],
            [1, 1, 1, 1]], dtype=torch.int32)
    >>> causal_mask(3, window=2).int()
    tensor([[1, 0, 0],
            [1, 1, 0],
            [0, 1, 1]], dtype=torch.int32)
    """
    if n_key is None:
        n_key = n_query
    for name, value, low in (("n_query", n_query, 1), ("n_key", n_key, 1), ("offset", offset, 0)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must be an int, got {type(value).__name__}")
        if value < low:
            raise ValueError(f"{name} must be >= {low}, got {value}")
    if window is not None and (isinstance(window, bool) or not isinstance(window, int) or window < 1):
        raise ValueError(f"window must be a positive int or None, got {window!r}")
    i = torch.arange(n_query, device=device).unsqueeze(1) + offset  # (Tq, 1) absolute query positions
    j = torch.arange(n_key, device=device).unsqueeze(0)  # (1, Tk)
    mask = j <= i
    if window is not None:
        mask &= j > i - window
    return mask


def padding_mask(lengths, T: int, device: Optional[torch.device | str] = None) -> torch.Tensor:
    """Bool (B, T) mask, True at REAL tokens (position < length), False at padding.

    This is the "allowed" convention; ``~padding_mask(...)`` is the key padding mask
    that ``torch.nn.MultiheadAttention`` and ``MultiHeadAttention`` expect. The mask is
    made on ``device`` (default: that of ``lengths`` if it is a tensor, else torch's
    default device); pass the model's device.

    >>> padding_mask([3, 1], 4).int()
    tensor([[1, 1, 1, 0],
            [1, 0, 0, 0]], dtype=torch.int32)
    """
    if isinstance(T, bool) or not isinstance(T, int):
        raise TypeError(f"T must be an int, got {type(T).__name__}")
    if T < 1:
        raise ValueError(f"T must be >= 1, got {T}")
    if isinstance(lengths, torch.Tensor):
        if lengths.dim() != 1 or lengths.is_floating_point() or lengths.dtype == torch.bool:
            raise TypeError(f"lengths must be a 1-D integer tensor or a list of ints, got {lengths.dtype} {tuple(lengths.shape)}")
        lengths_t = lengths
    else:
        try:
            items = list(lengths)
        except TypeError as exc:
            raise TypeError(f"lengths must be a list of ints, got {type(lengths).__name__}") from exc
        if not all(isinstance(n, int) and not isinstance(n, bool) for n in items):
            raise TypeError("lengths must contain only ints")
        lengths_t = torch.tensor(items, dtype=torch.long)
    if lengths_t.numel() == 0:
        raise ValueError("lengths must not be empty")
    if values_checkable(lengths_t):
        if (lengths_t < 0).any() or (lengths_t > T).any():
            raise ValueError(f"every length must lie in [0, T={T}], got {lengths_t.tolist()}")
    else:
        check_index_range("lengths", lengths_t, T + 1, what="sequence lengths", any_int=True)
    if device is not None:
        lengths_t = lengths_t.to(device)
    return torch.arange(T, device=lengths_t.device)[None, :] < lengths_t[:, None]  # (B, T)


def key_padding_to_mask(key_padding_mask: torch.Tensor) -> torch.Tensor:
    """Turn a key padding mask (B, Tk), True = PADDING, into an attention mask (B, 1, 1, Tk), True = allowed.

    The result broadcasts against scores of shape (B, H, Tq, Tk).

    >>> key_padding_to_mask(torch.tensor([[False, True]])).shape
    torch.Size([1, 1, 1, 2])
    """
    if not isinstance(key_padding_mask, torch.Tensor):
        raise TypeError(f"key_padding_mask must be a torch.Tensor, got {type(key_padding_mask).__name__}")
    if key_padding_mask.dtype != torch.bool:
        raise TypeError(f"key_padding_mask must be bool (True = padding), got dtype {key_padding_mask.dtype}")
    if key_padding_mask.dim() != 2:
        raise ValueError(f"key_padding_mask must have shape (B, Tk), got {tuple(key_padding_mask.shape)}")
    return (~key_padding_mask)[:, None, None, :]  # (B, 1, 1, Tk)


# ---------------------------------------------------------------------------- additive
def _additive_attend(hq: torch.Tensor, hk: torch.Tensor, v: torch.Tensor, w: torch.Tensor,
                     mask: Optional[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """Scores w^T tanh(hq_i + hk_j), masked softmax over j, weighted sum of v: (out, weights).

    hq: (..., Tq, d_h) projected queries; hk: (..., Tk, d_h) projected keys; v: (..., Tk, d_v).
    """
    # F.linear with w as a (1, d_h) matrix: exactly what an nn.Linear(d_h, 1) computes.
    scores = F.linear(torch.tanh(hq.unsqueeze(-2) + hk.unsqueeze(-3)), w[None]).squeeze(-1)  # (..., Tq, Tk, d_h) -> (..., Tq, Tk)
    if mask is not None:
        _check_mask("mask", mask, scores.shape)
    weights = _masked_softmax(scores, mask)  # (..., Tq, Tk)
    return weights @ v, weights  # (..., Tq, d_v)


def additive_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    W_q: torch.Tensor,
    W_k: torch.Tensor,
    w: torch.Tensor,
    mask: Optional[torch.Tensor] = None,
    return_weights: bool = False,
    *,
    b: Optional[torch.Tensor] = None,
):
    r"""Bahdanau's additive attention: e_ij = w^T tanh(W_q q_i + W_k k_j + b), softmax, weighted sum.

    q: (..., Tq, d_q); k: (..., Tk, d_k); v: (..., Tk, d_v); W_q: (d_h, d_q); W_k: (d_h, d_k);
    w: (d_h,); b: None or (d_h,). ``mask`` as in ``scaled_dot_product_attention``. It builds a
    (..., Tq, Tk, d_h) tensor, which is why it is slower and hungrier than a dot product.
    Chapter 2b writes the same score as v^T tanh(W s + U h + b) (Bahdanau et al. 2015, A.1.2:
    v_a, W_a, U_a); here ``v`` is the values, as everywhere in this module.

    >>> q = torch.zeros(1, 2); k = torch.zeros(3, 2); v = torch.arange(3.0)[:, None]
    >>> additive_attention(q, k, v, torch.eye(2), torch.eye(2), torch.ones(2))  # equal scores -> mean
    tensor([[1.]])
    """
    for name, x, d in (("q", q, 2), ("k", k, 2), ("v", v, 2), ("W_q", W_q, 2), ("W_k", W_k, 2), ("w", w, 1)):
        _check_tensor(name, x, d)
    if W_q.dim() != 2 or W_k.dim() != 2 or w.dim() != 1:
        raise ValueError("W_q and W_k must be matrices (d_h, d) and w a vector (d_h,)")
    if W_q.shape[1] != q.shape[-1]:
        raise ValueError(f"W_q must have shape (d_h, d_q={q.shape[-1]}), got {tuple(W_q.shape)}")
    if W_k.shape[1] != k.shape[-1]:
        raise ValueError(f"W_k must have shape (d_h, d_k={k.shape[-1]}), got {tuple(W_k.shape)}")
    if not (W_q.shape[0] == W_k.shape[0] == w.shape[0]):
        raise ValueError(f"W_q, W_k and w must share d_h, got {W_q.shape[0]}, {W_k.shape[0]}, {w.shape[0]}")
    if b is not None and (_check_tensor("b", b, 1).dim() != 1 or b.shape[0] != w.shape[0]):
        raise ValueError(f"b must be a vector (d_h={w.shape[0]},) or None, got {tuple(b.shape)}")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"k and v must have the same number of positions Tk, got k {tuple(k.shape)} and v {tuple(v.shape)}")
    out, weights = _additive_attend(F.linear(q, W_q), F.linear(k, W_k, b), v, w, mask)  # (..., Tq, d_h), (..., Tk, d_h)
    return (out, weights) if return_weights else out


class AdditiveAttention(nn.Module):
    """Bahdanau's additive attention with learned W_q, W_k (its bias is b) and w: the book's one module.

    Chapter 2b builds it inside an RNN encoder-decoder (one decoder step at a time), chapter 3
    times it against the dot product. ``forward(query, keys, values=None, mask=None,
    return_weights=False, projected_keys=None)`` works in two shapes:

    - **one query per row** (a decoder step): query (B, d_query), keys (B, S, d_key), mask
      (B, S) (True = a real key) -> output (B, d_v), weights (B, S);
    - **many queries**: query (..., Tq, d_query), keys (..., Tk, d_key), mask broadcastable
      to (..., Tq, Tk) as in ``scaled_dot_product_attention`` -> (..., Tq, d_v), (..., Tq, Tk).

    ``values`` defaults to ``keys`` (Bahdanau's context is a weighted sum of the annotations).
    ``projected_keys`` (= ``project_keys(keys)``, W_k k_j + b) may be passed to reuse them
    across decoder steps, as the paper suggests (A.1.2). The output is ``out``, or ``(out,
    weights)`` with ``return_weights=True``. The computation is ``additive_attention``'s.

    >>> att = AdditiveAttention(d_query=2, d_key=3, d_attn=4)
    >>> ctx, w = att(torch.randn(5, 2), torch.randn(5, 7, 3), return_weights=True)
    >>> ctx.shape, w.shape, bool(torch.allclose(w.sum(-1), torch.ones(5)))
    (torch.Size([5, 3]), torch.Size([5, 7]), True)
    >>> att(torch.randn(5, 6, 2), torch.randn(5, 7, 3)).shape    # six queries per row
    torch.Size([5, 6, 3])
    """

    def __init__(self, d_query: int, d_key: int, d_attn: int, bias: bool = True):
        super().__init__()
        for name, val in (("d_query", d_query), ("d_key", d_key), ("d_attn", d_attn)):
            if isinstance(val, bool) or not isinstance(val, int) or val < 1:
                raise ValueError(f"{name} must be a positive int, got {val!r}")
        if not isinstance(bias, bool):
            raise TypeError(f"bias must be True or False, got {bias!r}")
        self.d_query, self.d_key, self.d_attn = d_query, d_key, d_attn
        self.W_q = nn.Linear(d_query, d_attn, bias=False)  # query side: W s
        self.W_k = nn.Linear(d_key, d_attn, bias=bias)  # key side: U h_j + b (its bias is the score's b)
        self.w = nn.Linear(d_attn, 1, bias=False)  # the score's output vector (chapter 2b's v)

    def project_keys(self, keys: torch.Tensor) -> torch.Tensor:
        """W_k k_j + b for every key: (..., S, d_key) -> (..., S, d_attn)."""
        return self.W_k(keys)

    def forward(self, query: torch.Tensor, keys: torch.Tensor, values: Optional[torch.Tensor] = None,
                mask: Optional[torch.Tensor] = None, return_weights: bool = False,
                projected_keys: Optional[torch.Tensor] = None):
        values = keys if values is None else values
        _check_tensor("keys", keys, 2)
        _check_tensor("values", values, 2)
        if keys.shape[-1] != self.d_key:
            raise ValueError(f"keys must end in d_key={self.d_key}, got shape {tuple(keys.shape)}")
        if values.shape[:-1] != keys.shape[:-1]:
            raise ValueError(f"values must have the keys' shape up to the last dim {tuple(keys.shape[:-1])}, "
                             f"got {tuple(values.shape)}")
        _check_tensor("query", query, 1)
        step = query.dim() == keys.dim() - 1  # one query per row: a decoder step
        if query.shape[-1] != self.d_query or not (step or query.dim() == keys.dim()) \
                or (step and query.shape[:-1] != keys.shape[:-2]):
            raise ValueError(f"query must be (B, {self.d_query}) for keys (B, S, {self.d_key}), or (..., Tq, "
                             f"{self.d_query}) for keys (..., Tk, {self.d_key}); got query {tuple(query.shape)} "
                             f"and keys {tuple(keys.shape)}")
        if step and mask is not None:
            if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool or mask.shape != keys.shape[:-1]:
                raise ValueError(f"mask must be a bool tensor of shape {tuple(keys.shape[:-1])} (True = a real key)")
            mask = mask.unsqueeze(-2)  # (B, 1, S)
        hk = self.project_keys(keys) if projected_keys is None else projected_keys  # (..., S, d_attn)
        hq = self.W_q(query)  # (..., [Tq,] d_attn)
        out, weights = _additive_attend(hq.unsqueeze(-2) if step else hq, hk, values, self.w.weight[0], mask)
        if step:
            out, weights = out.squeeze(-2), weights.squeeze(-2)  # (B, d_v), (B, S)
        return (out, weights) if return_weights else out


# ---------------------------------------------------------------------------- multi-head
# From this many tokens on, MultiHeadAttention's explicit causal path skips the masked
# top-right quarter (below it the saving does not pay for the extra calls).
CAUSAL_SPLIT_MIN_T = 256


def _causal_attention_in_halves(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, dropout_p: float = 0.0):
    """Causal ``scaled_dot_product_attention`` with weights, skipping the block it would mask whole.

    Split the T queries into a first half (positions 0..h-1) and a second half. The first
    half may only see keys 0..h-1, so its scores against keys h..T-1 would all be masked:
    compute them against the first h keys alone and pad their weights with zeros. The
    second half sees keys 0..its own position, the ordinary causal mask with an offset.
    Every allowed score is computed exactly as in the one-call version, so the outputs and
    weights are the same up to float rounding in the softmax sums (tested), for three
    quarters of the multiply-adds: the same block skipping FlashAttention does, at the
    coarsest grain. q, k, v: (..., T, d) with as many queries as keys.
    """
    T = q.shape[-2]
    h = T // 2
    out_a, w_a = scaled_dot_product_attention(q[..., :h, :], k[..., :h, :], v[..., :h, :], dropout_p=dropout_p,
                                              mask=causal_mask(h, device=q.device), return_weights=True)
    out_b, w_b = scaled_dot_product_attention(q[..., h:, :], k, v, dropout_p=dropout_p,
                                              mask=causal_mask(T - h, T, offset=h, device=q.device), return_weights=True)
    out = torch.cat([out_a, out_b], dim=-2)
    weights = torch.cat([F.pad(w_a, (0, T - h)), w_b], dim=-2)  # (..., T, T), zeros above the diagonal
    return out, weights


class MultiHeadAttention(nn.Module):
    """Multi-head attention, batch first: project, split into heads, attend, merge, project.

    Parameters
    ----------
    d_model: model width D (queries, keys and values all have width D).
    n_heads: number of heads H; D must be divisible by H (head_dim = D / H).
    dropout: dropout on the attention weights while training.
    bias: whether the four projections have biases.

    ``forward(query, key=None, value=None, mask=None, key_padding_mask=None,
    is_causal=False, return_attention=False)``: query (B, Tq, D), key/value (B, Tk, D),
    defaulting to query (self-attention). ``mask`` is bool (True = allowed) or float
    (added), of shape (Tq, Tk), (B, Tq, Tk) or (B or 1, H or 1, Tq, Tk).
    ``key_padding_mask`` (B, Tk) is bool with True marking PADDING (the convention of
    ``torch.nn.MultiheadAttention``). ``is_causal`` adds the causal mask. Returns
    ``out`` (B, Tq, D), or ``(out, attn)`` with attn (B, H, Tq, Tk) when
    ``return_attention``. Without weights requested it runs PyTorch's fused kernel;
    the two paths agree to rounding error (tested). With weights requested, a purely
    causal mask and at least ``CAUSAL_SPLIT_MIN_T`` tokens, the written-out path skips
    the all-masked top-right quarter of the scores (``_causal_attention_in_halves``).
    """

    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        if isinstance(d_model, bool) or not isinstance(d_model, int) or d_model < 1:
            raise ValueError(f"d_model must be a positive int, got {d_model!r}")
        if isinstance(n_heads, bool) or not isinstance(n_heads, int) or n_heads < 1:
            raise ValueError(f"n_heads must be a positive int, got {n_heads!r}")
        if d_model % n_heads != 0:
            raise ValueError(f"d_model ({d_model}) must be divisible by n_heads ({n_heads})")
        self.d_model = d_model
        self.n_heads = n_heads
        self.head_dim = d_model // n_heads
        self.dropout = _check_dropout(dropout)
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    # -- weights from PyTorch ------------------------------------------------------
    @torch.no_grad()
    def load_from_torch(self, mha: nn.MultiheadAttention) -> "MultiHeadAttention":
        """Copy the weights of a ``torch.nn.MultiheadAttention`` into this module (in place)."""
        if not isinstance(mha, nn.MultiheadAttention):
            raise TypeError(f"mha must be a torch.nn.MultiheadAttention, got {type(mha).__name__}")
        if mha.embed_dim != self.d_model or mha.num_heads != self.n_heads:
            raise ValueError(
                f"mha has embed_dim={mha.embed_dim}, num_heads={mha.num_heads}; this module has "
                f"d_model={self.d_model}, n_heads={self.n_heads}"
            )
        if not mha._qkv_same_embed_dim or mha.bias_k is not None or mha.add_zero_attn:
            raise ValueError("mha must use kdim = vdim = embed_dim, no add_bias_kv and no add_zero_attn")
        has_bias = mha.in_proj_bias is not None
        if has_bias != (self.q_proj.bias is not None):
            raise ValueError(f"mha has bias={has_bias} but this module has bias={self.q_proj.bias is not None}")
        # in_proj_weight stacks W_q, W_k, W_v along dim 0: (3D, D).
        for proj, w in zip((self.q_proj, self.k_proj, self.v_proj), mha.in_proj_weight.chunk(3, dim=0)):
            proj.weight.copy_(w)
        if has_bias:
            for proj, b in zip((self.q_proj, self.k_proj, self.v_proj), mha.in_proj_bias.chunk(3, dim=0)):
                proj.bias.copy_(b)
            self.out_proj.bias.copy_(mha.out_proj.bias)
        self.out_proj.weight.copy_(mha.out_proj.weight)
        return self

    @classmethod
    def from_torch(cls, mha: nn.MultiheadAttention) -> "MultiHeadAttention":
        """A new ``MultiHeadAttention`` with the weights (and dropout) of ``mha``."""
        if not isinstance(mha, nn.MultiheadAttention):
            raise TypeError(f"mha must be a torch.nn.MultiheadAttention, got {type(mha).__name__}")
        p = mha.in_proj_weight
        new = cls(mha.embed_dim, mha.num_heads, dropout=float(mha.dropout), bias=mha.in_proj_bias is not None)
        new = new.to(device=p.device, dtype=p.dtype)
        return new.load_from_torch(mha)

    # -- forward -------------------------------------------------------------------
    def _split(self, x: torch.Tensor) -> torch.Tensor:
        B, T, _ = x.shape
        return x.view(B, T, self.n_heads, self.head_dim).transpose(1, 2)  # (B, H, T, head_dim)

    def _combined_mask(self, mask, key_padding_mask, is_causal, B, Tq, Tk, device, dtype):
        """Merge the three ways of masking into one tensor broadcastable to (B, H, Tq, Tk), or None."""
        scores_shape = torch.Size((B, self.n_heads, Tq, Tk))
        masks = []
        if mask is not None:
            if not isinstance(mask, torch.Tensor):
                raise TypeError(f"mask must be a torch.Tensor or None, got {type(mask).__name__}")
            if mask.dim() == 3:
                mask = mask.unsqueeze(1)  # (B, Tq, Tk) -> (B, 1, Tq, Tk): same mask for every head
            if mask.dim() not in (2, 4):
                raise ValueError(f"mask must have shape (Tq, Tk), (B, Tq, Tk) or (B, H, Tq, Tk), got {tuple(mask.shape)}")
            masks.append(_check_mask("mask", mask, scores_shape))
        if key_padding_mask is not None:
            if not isinstance(key_padding_mask, torch.Tensor) or key_padding_mask.dtype != torch.bool:
                raise TypeError("key_padding_mask must be a bool tensor (B, Tk), True marking padding")
            if tuple(key_padding_mask.shape) != (B, Tk):
                raise ValueError(f"key_padding_mask must have shape (B, Tk) = {(B, Tk)}, got {tuple(key_padding_mask.shape)}")
            masks.append(key_padding_to_mask(key_padding_mask))
        if is_causal:
            if Tq != Tk:
                raise ValueError(f"is_causal needs as many queries as keys, got Tq={Tq}, Tk={Tk}")
            masks.append(causal_mask(Tq, device=device))
        if not masks:
            return None
        if all(m.dtype == torch.bool for m in masks):
            out = masks[0]
            for m in masks[1:]:
                out = out & m
            return out
        # Mixed bool and float masks: express every bool mask as 0 / -inf and add.
        out = torch.zeros((), dtype=dtype, device=device)
        for m in masks:
            if m.dtype == torch.bool:
                m = torch.zeros(m.shape, dtype=dtype, device=device).masked_fill(~m, float("-inf"))
            out = out + m.to(dtype)
        return out

    def forward(
        self,
        query: torch.Tensor,
        key: Optional[torch.Tensor] = None,
        value: Optional[torch.Tensor] = None,
        mask: Optional[torch.Tensor] = None,
        key_padding_mask: Optional[torch.Tensor] = None,
        is_causal: bool = False,
        return_attention: bool = False,
    ):
        key = query if key is None else key
        value = key if value is None else value
        for name, x in (("query", query), ("key", key), ("value", value)):
            _check_tensor(name, x, 3)
            if x.dim() != 3 or x.shape[-1] != self.d_model:
                raise ValueError(f"{name} must have shape (B, T, d_model={self.d_model}), got {tuple(x.shape)}")
        dtype = self.q_proj.weight.dtype
        seen: list[torch.Tensor] = []
        for name, x in (("query", query), ("key", key), ("value", value)):
            if x.dtype != dtype:
                raise TypeError(f"{name} has dtype {x.dtype} but the module's weights are {dtype}; "
                                f"convert with {name}.to({dtype}) (or the module with .to(dtype))")
            # A NaN or inf spreads to every output row that attends to it; on the CPU say where
            # it came from (elsewhere reading the answer back would cost a sync, so it is skipped).
            # In self-attention query, key and value are one tensor: check it once.
            if values_checkable(x) and not any(x is t for t in seen):
                seen.append(x)
                if not _all_finite(x):
                    raise ValueError(f"{name} contains NaN or infinite values")
        B, Tq, _ = query.shape
        if key.shape[0] != B or value.shape[0] != B:
            raise ValueError(f"query, key and value must share the batch size, got {query.shape[0]}, {key.shape[0]}, {value.shape[0]}")
        if key.shape[1] != value.shape[1]:
            raise ValueError(f"key and value must have the same length Tk, got {key.shape[1]} and {value.shape[1]}")
        Tk = key.shape[1]
        if is_causal and Tq != Tk:
            raise ValueError(f"is_causal needs as many queries as keys, got Tq={Tq}, Tk={Tk}")
        q = self._split(self.q_proj(query))  # (B, H, Tq, head_dim)
        k = self._split(self.k_proj(key))  # (B, H, Tk, head_dim)
        v = self._split(self.v_proj(value))  # (B, H, Tk, head_dim)
        p = self.dropout if self.training else 0.0
        only_causal = is_causal and mask is None and key_padding_mask is None
        if return_attention and only_causal and Tq >= CAUSAL_SPLIT_MIN_T:
            out, attn = _causal_attention_in_halves(q, k, v, dropout_p=p)
        elif return_attention:
            m = self._combined_mask(mask, key_padding_mask, is_causal, B, Tq, Tk, query.device, q.dtype)
            out, attn = scaled_dot_product_attention(q, k, v, mask=m, dropout_p=p, return_weights=True)
        elif only_causal:
            # is_causal=True lets the fused kernel skip the masked half of the work.
            out = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)
        else:
            m = self._combined_mask(mask, key_padding_mask, is_causal, B, Tq, Tk, query.device, q.dtype)
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=m, dropout_p=p)
        out = out.transpose(1, 2).reshape(B, Tq, self.d_model)  # (B, Tq, H*head_dim) = (B, Tq, D)
        out = self.out_proj(out)
        return (out, attn) if return_attention else out

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, n_heads={self.n_heads}, dropout={self.dropout}"
