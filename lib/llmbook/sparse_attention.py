"""The cost and the reach of GPT-3's alternating dense and locally banded attention.

Covers: how many (query, key) pairs a causal mask allows, dense or banded with window
w (``attended_pairs``), the matmul FLOPs those pairs cost in one layer
(``attention_flops``), the window of each layer of a GPT (``layer_windows``), and how
far back information can travel after a stack of such layers (``reach``, ``reach_length``):
a banded layer lets position i read positions i-w+1..i, and stacking layers composes
those masks.

Leaves out: the kernels that make banded attention actually cheaper (the book's GPT
applies the band as a mask on a dense kernel, so it computes the same numbers at the
dense cost), strided patterns and block-sparse layouts.

Papers: Child et al. 2019, *Generating Long Sequences with Sparse Transformers*;
Brown et al. 2020, *Language Models are Few-Shot Learners* (GPT-3 "alternating dense
and locally banded sparse attention patterns in the layers of the transformer").
"""

from __future__ import annotations

from typing import Optional, Sequence

import torch

from .gpt import GPTConfig, causal_mask

__all__ = ["attended_pairs", "attention_flops", "layer_windows", "reach", "reach_length"]


def _check_len(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return value


def _check_window(window: object) -> Optional[int]:
    if window is not None and (isinstance(window, bool) or not isinstance(window, int) or window < 1):
        raise ValueError(f"window must be a positive int or None, got {window!r}")
    return window


def attended_pairs(seq_len: int, window: int | None = None) -> int:
    """Number of True entries of ``causal_mask(seq_len, seq_len, window=window)``, in closed form.

    Dense: T (T + 1) / 2. Banded: the first w rows grow 1..w, the remaining T - w rows see w keys each.

    >>> attended_pairs(4), attended_pairs(4, window=2), attended_pairs(2048, window=256)
    (10, 7, 491648)
    """
    T = _check_len("seq_len", seq_len)
    w = _check_window(window)
    if w is None or w >= T:
        return T * (T + 1) // 2
    return w * (w + 1) // 2 + (T - w) * w


def attention_flops(seq_len: int, d_model: int, window: int | None = None) -> int:
    """Forward FLOPs of one layer's attention matmuls: scores Q K^T and the weighted sum A V.

    Each allowed pair costs a dot product of length d_model (summed over heads) in each of
    the two matmuls, 2 FLOPs per multiply-add: 4 d_model per pair. Projections are not included.

    >>> attention_flops(4, 8)
    320
    """
    _check_len("d_model", d_model)
    return 4 * d_model * attended_pairs(seq_len, window)


def layer_windows(config: GPTConfig) -> list[Optional[int]]:
    """The band width of every layer of a GPT: None for dense layers, ``local_window`` for banded ones.

    >>> layer_windows(GPTConfig.baby(n_layer=4, sparse_pattern="alternating", local_window=8))
    [None, 8, None, 8]
    """
    if not isinstance(config, GPTConfig):
        raise TypeError(f"config must be a GPTConfig, got {type(config).__name__}")
    return [config.local_window if config.layer_is_banded(i) else None for i in range(config.n_layer)]


def reach(windows: Sequence[Optional[int]], seq_len: int) -> torch.Tensor:
    """Boolean (T, T) matrix: True where the output at position i, after all layers, depends on input j.

    One layer's mask M says which positions a position reads; the residual stream keeps
    its own position too (the diagonal is always in M). Stacking layers composes the
    masks: reach after layers 1..L is M_L ... M_1 in the Boolean semiring.

    >>> reach([2, 2], 4).int()
    tensor([[1, 0, 0, 0],
            [1, 1, 0, 0],
            [1, 1, 1, 0],
            [0, 1, 1, 1]], dtype=torch.int32)
    """
    T = _check_len("seq_len", seq_len)
    if isinstance(windows, (str, bytes)) or not hasattr(windows, "__iter__"):
        raise ValueError("windows must be a sequence of ints or None, one per layer")
    r = torch.eye(T)
    for w in windows:
        m = causal_mask(T, T, window=_check_window(w)).float()
        r = ((m @ r) > 0).float()  # i reads k in this layer, k already carried j
    return r.bool()


def reach_length(windows: Sequence[Optional[int]], seq_len: int) -> int:
    """How many input positions the last position depends on after the layers (itself included).

    A stack of L banded layers of width w reaches L (w - 1) + 1 positions; one dense layer reaches all.

    >>> reach_length([4, 4, 4], 100), reach_length([None, 4], 100)
    (10, 100)
    """
    return int(reach(windows, seq_len)[-1].sum())
