"""Splitting one model over several devices: tensor and pipeline parallelism, in miniature.

Covers: a Linear layer split by output columns (each device holds a slice of the
weight and computes a slice of the output, which are concatenated) and by input rows
(each device computes a partial sum, which are added: an all-reduce), as in Megatron-LM;
contiguous pipeline stages of a stack of layers; the idle "bubble" of a pipeline with
micro-batches (GPipe); and how many devices the training state of a model needs.
The "devices" here are ordinary tensors on one device: the arithmetic is what is shown,
not the communication. Data parallelism lives in ``llmbook.train`` (DistributedDataParallel
under torchrun, ``scripts/train_gpt.py``).

Leaves out: the communication itself (NCCL collectives, overlap with compute),
sequence parallelism, ZeRO/FSDP sharding of optimizer state, and interleaved or 1F1B
pipeline schedules.

Papers: Shoeybi et al. 2019, *Megatron-LM: Training Multi-Billion Parameter Language
Models Using Model Parallelism*; Huang et al. 2019, *GPipe: Efficient Training of Giant
Neural Networks using Pipeline Parallelism*; Rajbhandari et al. 2020, *ZeRO*.

Shape legend: B batch (any leading dimensions), I input features, O output features, P shards.
"""

from __future__ import annotations

import math
from typing import Optional

import torch

__all__ = ["column_parallel_linear", "row_parallel_linear", "pipeline_stages", "pipeline_bubble_fraction",
           "devices_needed"]


def _check_linear(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor], n_shards: int,
                  split_dim: int) -> None:
    if not isinstance(x, torch.Tensor) or not isinstance(weight, torch.Tensor):
        raise TypeError("x and weight must be torch.Tensors")
    if weight.dim() != 2:
        raise ValueError(f"weight must be (out_features, in_features), got shape {tuple(weight.shape)}")
    if x.shape[-1] != weight.shape[1]:
        raise ValueError(f"x has {x.shape[-1]} features, weight expects {weight.shape[1]}")
    if bias is not None and (not isinstance(bias, torch.Tensor) or bias.shape != (weight.shape[0],)):
        raise ValueError(f"bias must be a tensor of shape ({weight.shape[0]},) or None")
    if isinstance(n_shards, bool) or not isinstance(n_shards, int) or n_shards < 1:
        raise ValueError(f"n_shards must be a positive int, got {n_shards!r}")
    if weight.shape[split_dim] % n_shards:
        raise ValueError(f"n_shards={n_shards} must divide the split dimension of weight ({weight.shape[split_dim]})")


def column_parallel_linear(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor] = None,
                           n_shards: int = 2) -> torch.Tensor:
    """x W^T + b with W split into ``n_shards`` blocks of output features; outputs concatenated.

    Shard k holds rows k O/P..(k+1) O/P of W (and of b) and sees the whole input x.

    >>> x, w = torch.randn(3, 4), torch.randn(6, 4)
    >>> torch.allclose(column_parallel_linear(x, w, n_shards=3), x @ w.T)
    True
    """
    _check_linear(x, weight, bias, n_shards, 0)
    w_shards = weight.chunk(n_shards, dim=0)  # P x (O/P, I): one per device
    b_shards = bias.chunk(n_shards) if bias is not None else [None] * n_shards
    parts = [torch.nn.functional.linear(x, w, b) for w, b in zip(w_shards, b_shards)]  # P x (B, O/P)
    return torch.cat(parts, dim=-1)  # (B, O): an all-gather across devices


def row_parallel_linear(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor] = None,
                        n_shards: int = 2) -> torch.Tensor:
    """x W^T + b with W split into ``n_shards`` blocks of input features; partial outputs summed.

    Shard k holds columns k I/P..(k+1) I/P of W and the matching slice of x; the bias is added once.

    >>> x, w = torch.randn(3, 4), torch.randn(6, 4)
    >>> torch.allclose(row_parallel_linear(x, w, n_shards=2), x @ w.T, atol=1e-6)
    True
    """
    _check_linear(x, weight, bias, n_shards, 1)
    x_shards = x.chunk(n_shards, dim=-1)  # P x (B, I/P)
    w_shards = weight.chunk(n_shards, dim=1)  # P x (O, I/P)
    out = sum(xs @ ws.T for xs, ws in zip(x_shards, w_shards))  # (B, O): an all-reduce across devices
    return out + bias if bias is not None else out


def pipeline_stages(n_layer: int, n_stages: int) -> list[range]:
    """Split layers 0..n_layer-1 into ``n_stages`` contiguous stages, sizes differing by at most one.

    >>> pipeline_stages(10, 4)
    [range(0, 3), range(3, 6), range(6, 8), range(8, 10)]
    """
    for name, value in (("n_layer", n_layer), ("n_stages", n_stages)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    if n_stages > n_layer:
        raise ValueError(f"n_stages={n_stages} is more than n_layer={n_layer}: a stage needs a layer")
    base, extra = divmod(n_layer, n_stages)
    stages, start = [], 0
    for s in range(n_stages):
        size = base + (1 if s < extra else 0)
        stages.append(range(start, start + size))
        start += size
    return stages


def pipeline_bubble_fraction(n_stages: int, n_micro: int) -> float:
    """Share of device time spent idle in a GPipe schedule: (p - 1) / (m + p - 1).

    With p stages and m micro-batches, the schedule takes m + p - 1 steps per direction,
    and each device is busy in m of them.

    >>> pipeline_bubble_fraction(4, 1), pipeline_bubble_fraction(4, 12)
    (0.75, 0.2)
    """
    for name, value in (("n_stages", n_stages), ("n_micro", n_micro)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    return (n_stages - 1) / (n_micro + n_stages - 1)


def devices_needed(total_bytes: float, device_bytes: float) -> int:
    """Fewest devices whose memory holds ``total_bytes`` when split evenly (activations not counted).

    >>> devices_needed(2.8e12, 80e9)
    35
    """
    if not total_bytes >= 0:
        raise ValueError(f"total_bytes must be >= 0, got {total_bytes}")
    if not device_bytes > 0:
        raise ValueError(f"device_bytes must be > 0, got {device_bytes}")
    return max(1, math.ceil(total_bytes / device_bytes))
