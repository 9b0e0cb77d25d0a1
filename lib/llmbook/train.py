"""One training loop for every model in the book.

Covers: AdamW with weight decay on matrices only (not on biases and LayerNorm gains),
linear warm-up then cosine decay of the learning rate, gradient clipping, gradient
accumulation, periodic evaluation on fixed validation batches, a tqdm progress bar, an
optional callback (for a live loss plot), checkpoints written atomically as safetensors
(model, optimizer state, step, random-number-generator states and history) and an exact
resume: on the CPU an interrupted and resumed run gives the same losses as an
uninterrupted one. On a GPU: bf16 autocast, the fused AdamW and fused attention kernels,
and optional ``torch.compile``. Under ``torchrun`` with an initialised process group the
model is wrapped in DistributedDataParallel and each process trains on its slice of
every global batch.

Leaves out: fully sharded data parallelism (FSDP/ZeRO), tensor and pipeline parallelism,
fp16 loss scaling, and learning-rate finders.

References: Loshchilov & Hutter 2019, *Decoupled Weight Decay Regularization* (AdamW);
Loshchilov & Hutter 2017, *SGDR* (cosine schedule); Karpathy's nanoGPT ``train.py``.

``get_batch(split, generator) -> (x, y)`` is the only thing ``train`` knows about data:
``split`` is ``"train"`` or ``"val"`` and ``generator`` is a ``torch.Generator`` the
loop owns (so its state can be checkpointed and the batch order resumed exactly).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import BinaryIO, Callable, Optional

import torch
import torch.nn as nn

from .checkpoint import decode_json, encode_json, read_tensors, source_name, write_tensors

__all__ = [
    "TrainConfig",
    "TrainResult",
    "train",
    "lr_at",
    "lr_at_time",
    "configure_optimizer",
    "estimate_loss",
    "random_windows",
    "save_checkpoint",
    "load_checkpoint",
    "LiveLossPlot",
]

Batch = tuple[torch.Tensor, torch.Tensor]
GetBatch = Callable[[str, torch.Generator], Batch]


@dataclass
class TrainConfig:
    """Hyper-parameters of one run; presets name the book's runs."""

    max_steps: int = 2000  # optimizer updates the schedule spans
    lr: float = 1e-3  # peak learning rate, reached at the end of warm-up
    min_lr: float = 1e-4  # floor of the cosine decay (reached at max_steps)
    warmup_steps: int = 100  # linear warm-up to lr over this many updates (update k: lr * (k+1) / warmup_steps)
    weight_decay: float = 0.1  # decoupled decay, applied to matrices (dim >= 2) only
    beta1: float = 0.9  # Adam momentum
    beta2: float = 0.99  # Adam second-moment decay (0.99 suits small batches, 0.95 big runs)
    grad_clip: float = 1.0  # clip the global gradient norm to this (0 disables)
    grad_accum: int = 1  # micro-batches per update (the update sees grad_accum batches)
    eval_interval: int = 250  # evaluate every this many updates (and at the end)
    eval_batches: int = 20  # batches per split in each evaluation
    seed: int = 1337  # seeds the batch generator and the global RNG (dropout)
    device: Optional[str] = None  # None: the model's device
    dtype: str = "float32"  # "float32" or "bfloat16" (autocast; meant for GPUs)
    compile: bool = False  # wrap the model in torch.compile (GPU runs)
    tf32: bool = False  # let CUDA float32 matmuls use TF32 tensor cores (about 3 decimal digits lost)
    progress: bool = True  # tqdm progress bar
    checkpoint_path: Optional[str] = None  # where to write checkpoints (None: never)
    checkpoint_interval: int = 0  # also checkpoint every this many updates (0: only at the end)
    stop_after: Optional[int] = None  # stop after this many updates (the schedule still spans max_steps)
    max_seconds: Optional[float] = None  # stop once this much wall-clock time has passed
    schedule_by_time: bool = False  # with max_seconds: after warm-up the cosine follows elapsed time, not steps

    def __post_init__(self) -> None:
        for name in ("max_steps", "grad_accum", "eval_interval", "eval_batches"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive int, got {v!r}")
        for name in ("warmup_steps", "checkpoint_interval"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"{name} must be a non-negative int, got {v!r}")
        for name in ("lr", "min_lr", "weight_decay", "beta1", "beta2", "grad_clip"):
            v = getattr(self, name)
            # `not v >= 0` also catches NaN, which every ordinary comparison lets through.
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v < math.inf:
                raise ValueError(f"{name} must be a finite number >= 0, got {v!r}")
        if not self.lr > 0 or not self.min_lr <= self.lr:
            raise ValueError(f"need lr > 0 and 0 <= min_lr <= lr, got lr={self.lr}, min_lr={self.min_lr}")
        for name in ("beta1", "beta2"):
            if not getattr(self, name) < 1:
                raise ValueError(f"{name} must be in [0, 1), got {getattr(self, name)!r}")
        if isinstance(self.seed, bool) or not hasattr(type(self.seed), "__index__"):
            raise ValueError(f"seed must be an int, got {self.seed!r}")
        if self.dtype not in ("float32", "bfloat16"):
            raise ValueError(f"dtype must be 'float32' or 'bfloat16', got {self.dtype!r}")
        if self.stop_after is not None and (isinstance(self.stop_after, bool) or not isinstance(self.stop_after, int)
                                            or self.stop_after < 0):
            raise ValueError(f"stop_after must be an int >= 0 or None, got {self.stop_after!r}")
        if self.max_seconds is not None and (isinstance(self.max_seconds, bool) or not isinstance(self.max_seconds, (int, float))
                                             or not 0 < self.max_seconds < math.inf):
            raise ValueError(f"max_seconds must be a finite number > 0 or None, got {self.max_seconds!r}")
        if self.schedule_by_time and self.max_seconds is None:
            raise ValueError("schedule_by_time needs max_seconds (the time the cosine decay spans)")

    @classmethod
    def for_device(cls, device: torch.device | str, **overrides) -> "TrainConfig":
        """The settings that pay on ``device``, plus ``overrides``.

        On CUDA: bf16 autocast, TF32 matmuls and ``torch.compile`` (the fused AdamW and the
        fused attention kernels are picked by ``train`` and the models on any GPU). On the
        CPU and MPS: the defaults (float32, eager), so CPU results stay bit-exact.

        >>> TrainConfig.for_device("cpu").dtype, TrainConfig.for_device("cuda").dtype
        ('float32', 'bfloat16')
        """
        kind = torch.device(device).type
        gpu = {"dtype": "bfloat16", "compile": True, "tf32": True} if kind == "cuda" else {}
        return cls(**{**gpu, **overrides})

    @classmethod
    def baby_shakespeare(cls, **overrides) -> "TrainConfig":
        """nanoGPT's shakespeare_char CPU settings (lr 1e-3, 100 warm-up, decay to 1e-4)."""
        base = cls(max_steps=2000, lr=1e-3, min_lr=1e-4, warmup_steps=100, weight_decay=0.1, beta2=0.99,
                   eval_interval=250, eval_batches=20)
        for k, v in overrides.items():
            setattr(base, k, v)
        base.__post_init__()
        return base


@dataclass
class TrainResult:
    """What a run did: per-update training losses and the evaluations."""

    step: int = 0  # updates done so far (across resumes)
    train_losses: list = field(default_factory=list)  # loss of every update, in order
    evals: list = field(default_factory=list)  # dicts {step, train, val}
    tokens: int = 0  # training tokens processed (all processes)
    seconds: float = 0.0  # wall-clock time of this call
    last_lr: float = float("nan")  # learning rate of the last update

    @property
    def last_val(self) -> float:
        return self.evals[-1]["val"] if self.evals else float("nan")


@dataclass(frozen=True)
class _Schedule:
    lr: float
    min_lr: float
    warmup_steps: int
    max_steps: int


def _schedule(cfg: TrainConfig | None, lr, min_lr, warmup_steps, max_steps) -> _Schedule:
    """The four numbers of the schedule, from a config or from keywords (not both), checked."""
    given = {k: v for k, v in (("lr", lr), ("min_lr", min_lr), ("warmup_steps", warmup_steps), ("max_steps", max_steps))
             if v is not None}
    if cfg is not None:
        if not isinstance(cfg, TrainConfig):
            raise TypeError(f"cfg must be a TrainConfig (or None with lr=, warmup_steps=, max_steps=), got {type(cfg).__name__}")
        if given:
            raise TypeError(f"give cfg or the keywords {sorted(given)}, not both")
        return _Schedule(cfg.lr, cfg.min_lr, cfg.warmup_steps, cfg.max_steps)
    missing = [k for k in ("lr", "warmup_steps", "max_steps") if k not in given]
    if missing:
        raise TypeError(f"without cfg, lr_at needs the keywords {missing} (min_lr defaults to 0)")
    # the same checks as TrainConfig's, naming the keyword
    check = TrainConfig(lr=lr, min_lr=0.0 if min_lr is None else min_lr, warmup_steps=warmup_steps, max_steps=max_steps)
    return _Schedule(check.lr, check.min_lr, check.warmup_steps, check.max_steps)


def lr_at(step: int, cfg: TrainConfig | None = None, *, lr: float | None = None, min_lr: float | None = None,
          warmup_steps: int | None = None, max_steps: int | None = None) -> float:
    """Learning rate for update ``step`` (0-based): linear warm-up, then cosine to ``min_lr``.

    The numbers come from ``cfg`` or, without a config, from the keywords ``lr``,
    ``warmup_steps``, ``max_steps`` and ``min_lr`` (default 0).

    Warm-up convention: update ``step`` (the ``step``-th call of ``optimizer.step()``,
    counting from 0) uses ``lr * (step + 1) / warmup_steps`` while ``step < warmup_steps``:
    the first update already moves, with ``lr / warmup_steps``, and update
    ``warmup_steps - 1`` is the first at the full ``lr``. Schedules written with
    ``step / warmup_steps`` (Hugging Face's ``get_linear_schedule_with_warmup``, for one) give
    the first update a learning rate of 0 and reach ``lr`` one update later. After warm-up a
    cosine goes from ``lr`` at ``step = warmup_steps`` to ``min_lr`` at ``step = max_steps``;
    ``min_lr`` after that.

    >>> cfg = TrainConfig(max_steps=100, lr=1.0, min_lr=0.0, warmup_steps=10)
    >>> [round(lr_at(s, cfg), 3) for s in (0, 9, 10, 55, 100)]
    [0.1, 1.0, 1.0, 0.5, 0.0]
    >>> lr_at(55, lr=1.0, warmup_steps=10, max_steps=100) == lr_at(55, cfg)
    True
    """
    if isinstance(step, bool) or not hasattr(type(step), "__index__") or int(step) < 0:
        raise ValueError(f"step must be an int >= 0 (the 0-based update), got {step!r}")
    step = int(step)
    sc = _schedule(cfg, lr, min_lr, warmup_steps, max_steps)
    if step < sc.warmup_steps:
        return sc.lr * (step + 1) / sc.warmup_steps
    if step >= sc.max_steps:
        return sc.min_lr
    return _cosine((step - sc.warmup_steps) / max(1, sc.max_steps - sc.warmup_steps), sc)


def _cosine(progress: float, sc: "_Schedule | TrainConfig") -> float:
    progress = min(1.0, max(0.0, progress))
    return sc.min_lr + 0.5 * (1.0 + math.cos(math.pi * progress)) * (sc.lr - sc.min_lr)


def lr_at_time(step: int, elapsed: float, warmup_end: float, cfg: TrainConfig) -> float:
    """Learning rate for a run with a wall-clock budget (``cfg.schedule_by_time``).

    Warm-up counts updates as in :func:`lr_at`; after it (at ``warmup_end`` seconds) the cosine
    follows the fraction of the remaining time used, so the decay ends when ``max_seconds`` does,
    however fast the machine is. Runs with this schedule depend on timing and are not repeatable.

    >>> cfg = TrainConfig(lr=1.0, min_lr=0.0, warmup_steps=10, max_seconds=110.0, schedule_by_time=True)
    >>> [round(lr_at_time(s, t, 10.0, cfg), 3) for s, t in ((0, 0.1), (20, 10.0), (500, 60.0), (900, 110.0))]
    [0.1, 1.0, 0.5, 0.0]
    """
    if step < cfg.warmup_steps:
        return lr_at(step, cfg)
    return _cosine((elapsed - warmup_end) / max(1e-9, cfg.max_seconds - warmup_end), cfg)


def configure_optimizer(model: nn.Module, cfg: TrainConfig) -> torch.optim.AdamW:
    """AdamW with two groups: matrices (decayed) and vectors such as biases and gains (not decayed)."""
    params = {id(p): p for p in model.parameters() if p.requires_grad}  # tied weights once
    decay = [p for p in params.values() if p.dim() >= 2]
    no_decay = [p for p in params.values() if p.dim() < 2]
    fused = all(p.device.type == "cuda" for p in params.values())
    return torch.optim.AdamW(
        [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=cfg.lr, betas=(cfg.beta1, cfg.beta2), fused=fused or None,
    )


def random_windows(train_ids: torch.Tensor, val_ids: torch.Tensor, block_size: int, batch_size: int,
                   device: torch.device | str | None = None) -> GetBatch:
    """A ``get_batch`` that cuts ``batch_size`` random windows of ``block_size + 1`` tokens.

    x is the first ``block_size`` tokens of each window, y the same shifted by one. The
    batch is returned on ``device`` (default: where the token ids are); ``train`` and
    ``estimate_loss`` move batches to the model's device in any case.

    >>> gb = random_windows(torch.arange(100), torch.arange(50), block_size=4, batch_size=2)
    >>> x, y = gb("train", torch.Generator().manual_seed(0))
    >>> x.shape, bool((y == x + 1).all())
    (torch.Size([2, 4]), True)
    """
    for name, ids in (("train_ids", train_ids), ("val_ids", val_ids)):
        if not isinstance(ids, torch.Tensor) or ids.dim() != 1:
            raise TypeError(f"{name} must be a 1-D tensor of token ids")
        if len(ids) <= block_size:
            raise ValueError(f"{name} has {len(ids)} tokens, need more than block_size={block_size}")
    if batch_size < 1 or block_size < 1:
        raise ValueError(f"batch_size and block_size must be >= 1, got {batch_size}, {block_size}")
    data = {"train": train_ids.long(), "val": val_ids.long()}
    offsets = torch.arange(block_size + 1)

    def get_batch(split: str, generator: torch.Generator) -> Batch:
        if split not in data:
            raise ValueError(f"split must be 'train' or 'val', got {split!r}")
        ids = data[split]
        starts = torch.randint(len(ids) - block_size, (batch_size,), generator=generator)
        windows = ids[(starts.unsqueeze(1) + offsets).to(ids.device)]  # (B, block_size + 1)
        x, y = windows[:, :-1], windows[:, 1:]
        return (x, y) if device is None else (x.to(device), y.to(device))

    return get_batch


def _model_device(model: nn.Module) -> torch.device:
    for p in model.parameters():
        return p.device
    raise ValueError("model has no parameters, so it has no device to train on")


def _loss_of(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = model(x, y)
    return out[1] if isinstance(out, tuple) else out


@torch.no_grad()
def estimate_loss(model: nn.Module, get_batch: GetBatch, split: str, n_batches: int, seed: int = 0,
                  autocast: contextlib.AbstractContextManager | None = None) -> float:
    """Mean loss over ``n_batches`` batches drawn with a fixed seed (the same batches every call)."""
    was_training = model.training
    model.eval()
    device = _model_device(model)
    g = torch.Generator().manual_seed(seed)
    total = 0.0
    for _ in range(n_batches):
        x, y = get_batch(split, g)
        x, y = x.to(device), y.to(device)  # batches made on the CPU follow the model
        with autocast or contextlib.nullcontext():
            total += float(_loss_of(model, x, y))
    model.train(was_training)
    return total / n_batches


# ---------------------------------------------------------------- checkpoints


def _dedup_state(module: nn.Module) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """State dict with tied tensors stored once; returns (tensors, alias -> stored name)."""
    tensors, seen, aliases = {}, {}, {}
    for name, t in module.state_dict().items():
        key = (t.data_ptr(), t.shape, t.dtype) if t.numel() else None
        if key is not None and key in seen:
            aliases[name] = seen[key]
            continue
        if key is not None:
            seen[key] = name
        tensors[name] = t.detach().cpu().contiguous()
    return tensors, aliases


def save_checkpoint(path: str | os.PathLike | BinaryIO, model: nn.Module, optimizer: torch.optim.Optimizer | None = None,
                    state: dict | None = None, meta: dict | None = None,
                    keep: Callable[[str], bool] | None = None) -> None:
    """Write model (and optionally optimizer) tensors plus JSON metadata to one safetensors file.

    ``path``: a file path (written atomically) or a binary file open for writing
    (:mod:`llmbook.checkpoint`). ``state`` holds extra tensors (RNG states); ``meta``
    JSON-serialisable values (step, history, model config). ``keep(name)`` selects the
    model tensors to write (e.g. only a LoRA adapter's, ``llmbook.lora.save_lora``); such a
    partial file is read back with ``load_checkpoint(path)`` and no model. Tied weights are
    stored once. The optimizer's hyper-parameters come back exactly as they were: a tuple
    stays a tuple (``betas``), a tensor (a tensor learning rate) a tensor.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be an nn.Module, got {type(model).__name__}")
    if keep is not None and not callable(keep):
        raise TypeError(f"keep must be a function of a tensor name, got {type(keep).__name__}")
    model_t, aliases = _dedup_state(model)
    if keep is not None:
        model_t = {k: v for k, v in model_t.items() if keep(k)}
        aliases = {a: n for a, n in aliases.items() if n in model_t and keep(a)}
        if not model_t:
            raise ValueError("keep selected no model tensor: nothing to save")
    tensors = {f"model.{k}": v for k, v in model_t.items()}
    info: dict = {"aliases": aliases, "meta": meta or {}}
    if optimizer is not None:
        sd = optimizer.state_dict()
        info["optimizer_groups"] = [encode_json(g, tensors, f"optim_group.{i}", f"optimizer.param_groups[{i}]")
                                    for i, g in enumerate(sd["param_groups"])]
        values: dict = {}
        for pid, st in sd["state"].items():
            for k, v in st.items():
                if isinstance(v, torch.Tensor):
                    tensors[f"optim.{pid}.{k}"] = v
                else:  # a number or a list (an optimizer's own bookkeeping): exact, through JSON
                    values[f"{pid}.{k}"] = encode_json(v, tensors, f"optim_value.{pid}.{k}", f"optimizer state[{pid}][{k!r}]")
        if values:
            info["optimizer_values"] = values
    for k, v in (state or {}).items():
        tensors[f"state.{k}"] = v
    write_tensors(path, tensors, {"llmbook": json.dumps(info)})


def load_checkpoint(path: str | os.PathLike | BinaryIO, model: nn.Module | None = None,
                    optimizer: torch.optim.Optimizer | None = None) -> dict:
    """Read a checkpoint from ``save_checkpoint``; fills ``model``/``optimizer`` if given.

    ``path``: a file path or a binary file open for reading. Returns ``{"meta": ...,
    "state": {name: tensor}, "model": {name: tensor}}``. A missing or corrupt file raises a
    clear error naming it. Nothing is unpickled.
    """
    tensors, metadata = read_tensors(path)
    path = source_name(path)
    try:
        info = json.loads(metadata.get("llmbook", "{}"))
    except ValueError as err:
        raise ValueError(f"checkpoint {path} has damaged 'llmbook' metadata (not JSON: {err})") from None
    if not isinstance(info, dict) or not isinstance(info.get("aliases", {}), dict) or not isinstance(info.get("meta", {}), dict):
        raise ValueError(f"checkpoint {path} has damaged 'llmbook' metadata (expected a JSON object with "
                         f"'aliases' and 'meta' objects), got {str(info)[:80]!r}")
    model_t = {k[6:]: v for k, v in tensors.items() if k.startswith("model.")}
    for alias, name in info.get("aliases", {}).items():
        if name not in model_t:
            raise ValueError(f"checkpoint {path} is damaged: tied weight {alias!r} points to {name!r}, "
                             "which the file does not hold")
        model_t[alias] = model_t[name]
    if model is not None:
        target = getattr(model, "module", model)  # unwrap DDP
        target = getattr(target, "_orig_mod", target)  # unwrap torch.compile
        dev = next(target.parameters()).device
        try:
            target.load_state_dict({k: v.to(dev) for k, v in model_t.items()})
        except RuntimeError as err:  # missing/unexpected keys or shapes: name the file
            raise ValueError(f"checkpoint {path} does not fit the model {type(target).__name__}: {err}") from None
    if optimizer is not None:
        if "optimizer_groups" not in info:
            raise ValueError(f"checkpoint {path} has no optimizer state (it was saved for inference)")
        state: dict = {}
        try:
            for k, v in tensors.items():
                if k.startswith("optim."):
                    _, pid, name = k.split(".", 2)
                    state.setdefault(int(pid), {})[name] = v
            for k, v in info.get("optimizer_values", {}).items():
                pid, name = k.split(".", 1)
                state.setdefault(int(pid), {})[name] = decode_json(v, tensors, f"optimizer state {k}")
            groups = [decode_json(g, tensors, f"optimizer group {i}") for i, g in enumerate(info["optimizer_groups"])]
            optimizer.load_state_dict({"state": state, "param_groups": groups})
        except (ValueError, KeyError, TypeError, RuntimeError) as err:
            raise ValueError(f"checkpoint {path} holds optimizer state that does not fit this optimizer: "
                             f"{type(err).__name__}: {err}") from None
    return {"meta": info.get("meta", {}), "model": model_t,
            "state": {k[6:]: v for k, v in tensors.items() if k.startswith("state.")}}


# ---------------------------------------------------------------- the loop


class LiveLossPlot:
    """Callback that redraws a loss curve in a notebook at every evaluation."""

    def __init__(self, title: str = "Training loss", every: int = 1):
        self.title, self.every, self.handle, self.calls = title, every, None, 0

    def __call__(self, result: TrainResult) -> None:
        self.calls += 1
        if self.calls % self.every:
            return
        import matplotlib.pyplot as plt
        from IPython.display import display

        fig, ax = plt.subplots(figsize=(6, 3.2))
        steps = range(1, len(result.train_losses) + 1)
        ax.plot(steps, result.train_losses, lw=0.8, alpha=0.6, label="train (per update)")
        if result.evals:
            ax.plot([e["step"] for e in result.evals], [e["val"] for e in result.evals], "o-", label="validation")
        ax.set_xlabel("update")
        ax.set_ylabel("cross-entropy (nats/token)")
        ax.set_title(self.title)
        ax.legend()
        if self.handle is None:
            self.handle = display(fig, display_id=True)
        else:
            self.handle.update(fig)
        plt.close(fig)


def _dist_info() -> tuple[int, int]:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def _check_loss(total: torch.Tensor | float, step: int, cfg: TrainConfig) -> None:
    """Stop on a NaN or infinite training loss, naming the update (1-based) and the checkpoint kept."""
    value = float(total)
    if math.isfinite(value):
        return
    kept = (f"the checkpoint {cfg.checkpoint_path} from the last good save is kept (not overwritten)"
            if cfg.checkpoint_path else "no checkpoint was written (cfg.checkpoint_path is None)")
    raise FloatingPointError(
        f"training loss is {value} at step {step + 1}: stopping; {kept}. Usual causes: a learning rate too "
        "high (lower cfg.lr), no gradient clipping (cfg.grad_clip), bad inputs or targets in get_batch"
    )


def train(model: nn.Module, get_batch: GetBatch, cfg: TrainConfig, callback: Callable[[TrainResult], None] | None = None,
          resume: bool = False, meta: dict | None = None) -> TrainResult:
    """Train ``model`` (whose ``forward(x, y)`` returns ``(logits, loss)``) and return the history.

    With ``resume=True`` and an existing ``cfg.checkpoint_path`` the run continues from
    it exactly: weights, optimizer moments, step, batch order and dropout RNG are restored.
    ``callback(result)`` runs after every evaluation. ``meta`` is stored in checkpoints
    (e.g. the model config and vocabulary, so the file is self-describing).

    A NaN or infinite training loss stops the run with a ``FloatingPointError`` naming the
    step; no checkpoint is written after it, so ``cfg.checkpoint_path`` keeps the last good
    state (on the CPU the check comes before the update, so the model in memory is good too).
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be an nn.Module, got {type(model).__name__}")
    if not callable(get_batch):
        raise TypeError("get_batch must be callable as get_batch(split, generator)")
    if not isinstance(cfg, TrainConfig):
        raise TypeError(f"cfg must be a TrainConfig, got {type(cfg).__name__}")
    cfg.__post_init__()  # fields may have been changed since the config was made
    if resume and not cfg.checkpoint_path:
        raise ValueError("resume=True needs cfg.checkpoint_path")
    from .progress import tqdm  # in a saved notebook: the final line, not "0%"

    rank, world = _dist_info()
    device = torch.device(cfg.device) if cfg.device else _model_device(model)
    model.to(device)
    torch.manual_seed(cfg.seed)
    gen = torch.Generator().manual_seed(cfg.seed)  # batch order: the same on every process
    optimizer = configure_optimizer(model, cfg)
    result = TrainResult()
    if resume and Path(cfg.checkpoint_path).exists():
        ck = load_checkpoint(cfg.checkpoint_path, model, optimizer)
        lacking = [k for k in ("batch_rng", "torch_rng") if k not in ck["state"]]
        if lacking:
            raise ValueError(f"checkpoint {cfg.checkpoint_path} has no {' or '.join(lacking)} state, so the run cannot "
                             "resume exactly (it was not written by train(); train from scratch with resume=False)")
        try:
            gen.set_state(ck["state"]["batch_rng"])
            torch.set_rng_state(ck["state"]["torch_rng"])
        except (RuntimeError, TypeError) as err:
            raise ValueError(f"checkpoint {cfg.checkpoint_path} holds a damaged random-number state: {err}") from None
        hist = ck["meta"].get("history", {})
        if not isinstance(hist, dict):
            raise ValueError(f"checkpoint {cfg.checkpoint_path}: meta 'history' must be a dict, got {type(hist).__name__}")
        result.step, result.train_losses = hist.get("step", 0), hist.get("train_losses", [])
        result.evals, result.tokens = hist.get("evals", []), hist.get("tokens", 0)

    net: nn.Module = model
    if world > 1:
        from torch.nn.parallel import DistributedDataParallel as DDP

        net = DDP(model, device_ids=[device.index] if device.type == "cuda" else None)
    if cfg.compile:
        net = torch.compile(net)
    use_bf16 = cfg.dtype == "bfloat16"
    old_precision = torch.get_float32_matmul_precision()
    if cfg.tf32 and device.type == "cuda":
        torch.set_float32_matmul_precision("high")  # TF32 tensor cores for float32 matmuls

    def autocast():
        return torch.autocast(device.type, dtype=torch.bfloat16) if use_bf16 else contextlib.nullcontext()

    def shard(t: torch.Tensor) -> torch.Tensor:
        if world == 1:
            return t
        if t.shape[0] % world:
            raise ValueError(f"batch size {t.shape[0]} must be divisible by the {world} processes")
        n = t.shape[0] // world
        return t[rank * n:(rank + 1) * n]  # this process's slice of the global batch

    def evaluate() -> None:
        ev = {"step": result.step}
        for split in ("train", "val"):
            ev[split] = estimate_loss(model, get_batch, split, cfg.eval_batches, seed=cfg.seed + 1, autocast=autocast())
        result.evals.append(ev)
        if callback is not None and rank == 0:
            callback(result)

    def checkpoint() -> None:
        if not cfg.checkpoint_path or rank != 0:
            return
        history = {"step": result.step, "train_losses": result.train_losses, "evals": result.evals,
                   "tokens": result.tokens}
        save_checkpoint(cfg.checkpoint_path, model, optimizer,
                        state={"batch_rng": gen.get_state(), "torch_rng": torch.get_rng_state()},
                        meta={**(meta or {}), "history": history, "train_config": asdict(cfg)})

    last = cfg.max_steps if cfg.stop_after is None else min(cfg.max_steps, result.step + cfg.stop_after)
    bar = tqdm(total=last, initial=result.step, disable=not cfg.progress or rank != 0, desc="training")
    start = time.perf_counter()
    net.train()
    warmup_end = None
    while result.step < last:
        if cfg.schedule_by_time:
            now = time.perf_counter() - start
            if warmup_end is None and result.step >= cfg.warmup_steps:
                warmup_end = now
            lr = lr_at_time(result.step, now, warmup_end if warmup_end is not None else now, cfg)
        else:
            lr = lr_at(result.step, cfg)
        result.last_lr = lr
        for group in optimizer.param_groups:
            group["lr"] = lr
        total = 0.0
        for micro in range(cfg.grad_accum):
            x, y = get_batch("train", gen)
            x, y = shard(x).to(device), shard(y).to(device)  # batches made on the CPU follow the model
            sync = world == 1 or micro == cfg.grad_accum - 1
            # DDP all-reduces gradients in backward; no_sync skips that for all but the last
            # micro-batch. One context (entered once) covers forward and backward.
            ctx = contextlib.nullcontext() if sync or not hasattr(net, "no_sync") else net.no_sync()
            with ctx:
                with autocast():
                    loss = _loss_of(net, x, y) / cfg.grad_accum
                loss.backward()
            total += loss.detach()
            result.tokens += x.numel() * world
        if world == 1 and device.type == "cpu":
            _check_loss(total, result.step, cfg)  # before the update, so the weights stay good (free on the CPU)
        if cfg.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if world > 1:
            import torch.distributed as dist

            dist.all_reduce(total, op=dist.ReduceOp.SUM)
            total = total / world
        _check_loss(total, result.step, cfg)  # the value is read for the history anyway
        result.train_losses.append(float(total))
        result.step += 1
        bar.update(1)
        bar.set_postfix(loss=f"{result.train_losses[-1]:.3f}", lr=f"{lr:.2e}")
        out_of_time = cfg.max_seconds is not None and time.perf_counter() - start >= cfg.max_seconds
        if result.step % cfg.eval_interval == 0 or result.step == last or out_of_time:
            evaluate()
        if cfg.checkpoint_interval and result.step % cfg.checkpoint_interval == 0:
            checkpoint()
        if out_of_time:
            break
    bar.close()
    torch.set_float32_matmul_precision(old_precision)
    checkpoint()
    result.seconds = time.perf_counter() - start
    return result
