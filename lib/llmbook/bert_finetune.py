"""Fine-tuning BERT and the feature-based alternative: the schedule, the loop, the evaluations.

The model is :mod:`llmbook.bert`; pre-training data is :mod:`llmbook.bert_data`. Every name
here is importable from ``llmbook.bert`` too, as before the split.

* ``linear_warmup_decay``: BERT's learning-rate schedule (linear warm-up, then linear decay).
* ``fine_tune`` a ``BertForSequenceClassification``; ``classify_accuracy`` and
  ``classify_correct`` (per item, for paired comparisons); ``balanced_subset`` for the
  sentiment data.
* The feature-based ablation: ``pooled_features`` of a frozen ``Bert`` (pooled [CLS] or mean of the
  token vectors) + ``linear_probe``.

``classify_correct`` and ``pooled_features`` share one batched evaluation loop (``_no_grad_batches``).
"""

from __future__ import annotations

import math
import random
from typing import Callable, Sequence

import torch
import torch.nn as nn
import torch.nn.functional as F

from llmbook.bert import Bert, BertForSequenceClassification, mean_pool
from llmbook.bert_data import batch_encode
from llmbook.device import model_device

__all__ = ["linear_warmup_decay", "classify_correct", "classify_accuracy", "fine_tune", "balanced_subset",
           "pooled_features", "linear_probe"]


# ---------------------------------------------------------------------------- learning-rate schedule
def linear_warmup_decay(optimizer: torch.optim.Optimizer, warmup_steps: int, total_steps: int, floor: float = 0.0) -> torch.optim.lr_scheduler.LambdaLR:
    """BERT's schedule: the rate rises linearly to its peak over ``warmup_steps``, then falls
    linearly to ``floor`` times the peak at ``total_steps``. Call ``.step()`` after each update.

    The factor at update ``s`` (0-based) is ``min((s + 1) / warmup, max(floor, (total - s) / (total - warmup)))``.
    A post-LN encoder trained without the warm-up, or at too high a peak, tends to get stuck
    predicting the most frequent token (chapter 7).

    >>> opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1.0)
    >>> sched = linear_warmup_decay(opt, warmup_steps=2, total_steps=6)
    >>> rates = []
    >>> for _ in range(6):
    ...     rates.append(round(opt.param_groups[0]["lr"], 3)); opt.step(); sched.step()
    >>> rates
    [0.5, 1.0, 1.0, 0.75, 0.5, 0.25]
    """
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError(f"optimizer must be a torch.optim.Optimizer, got {type(optimizer).__name__}")
    if isinstance(total_steps, bool) or not isinstance(total_steps, int) or total_steps < 1:
        raise ValueError(f"total_steps must be a positive int, got {total_steps!r}")
    if isinstance(warmup_steps, bool) or not isinstance(warmup_steps, int) or not 1 <= warmup_steps <= total_steps:
        raise ValueError(f"warmup_steps must be an int in [1, total_steps={total_steps}], got {warmup_steps!r}")
    if not isinstance(floor, (int, float)) or isinstance(floor, bool) or not 0.0 <= floor <= 1.0:
        raise ValueError(f"floor must be in [0, 1], got {floor!r}")
    decay = max(1, total_steps - warmup_steps)
    return torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min((s + 1) / warmup_steps, max(floor, (total_steps - s) / decay))
    )


# ---------------------------------------------------------------------------- fine-tuning
@torch.no_grad()
def _no_grad_batches(model: nn.Module, tokenizer, data: Sequence[tuple[str, int]], step: Callable,
                     max_len: int, batch_size: int) -> torch.Tensor | tuple[torch.Tensor, ...]:
    """``step(batch, chunk)`` on every batch of ``data``, in eval mode and without gradients; the results
    concatenated along dim 0 (a tuple of results, each concatenated, when ``step`` returns a tuple).

    ``batch`` is ``batch_encode``'s dict (``input_ids``, ``token_type_ids``, ``attention_mask``) of the
    texts of ``chunk`` (the next ``batch_size`` pairs of ``data``), on the model's device. The model's
    training mode is restored afterwards. The one evaluation loop of ``classify_correct`` and
    ``pooled_features``.
    """
    if len(data) == 0:
        raise ValueError("data is empty")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
    was_training = model.training
    model.eval()
    dev = model_device(model)
    outs = []
    try:
        for i in range(0, len(data), batch_size):
            chunk = data[i : i + batch_size]
            b = {k: v.to(dev) for k, v in batch_encode(tokenizer, [t for t, _ in chunk], max_len=max_len).items()}
            outs.append(step(b, chunk))   # results stay on the device: no sync per batch
    finally:
        model.train(was_training)
    if isinstance(outs[0], tuple):
        return tuple(torch.cat(parts) for parts in zip(*outs))
    return torch.cat(outs)


def classify_correct(model: BertForSequenceClassification, tokenizer, data: Sequence[tuple[str, int]], max_len: int = 48, batch_size: int = 128) -> torch.Tensor:
    """One bool per ``(text, label)`` pair: did ``model`` predict the label? Shape (len(data),), on the model's device.

    Per-item results let two classifiers scored on the same items be compared item by item
    (a paired comparison, ``llmbook.stats.compare(..., paired=True)``).
    """
    def step(b: dict, chunk: Sequence[tuple[str, int]]) -> torch.Tensor:
        pred = model(b["input_ids"], b["token_type_ids"], b["attention_mask"]).argmax(-1)
        return pred == torch.tensor([y for _, y in chunk], device=pred.device)

    return _no_grad_batches(model, tokenizer, data, step, max_len, batch_size)


def classify_accuracy(model: BertForSequenceClassification, tokenizer, data: Sequence[tuple[str, int]], max_len: int = 48, batch_size: int = 128) -> float:
    """Accuracy of ``model`` on ``(text, label)`` pairs (the mean of ``classify_correct``)."""
    return int(classify_correct(model, tokenizer, data, max_len=max_len, batch_size=batch_size).sum()) / len(data)


def fine_tune(
    model: BertForSequenceClassification,
    tokenizer,
    train: Sequence[tuple[str, int]],
    epochs: int = 2,
    lr: float = 5e-5,
    batch_size: int = 32,
    max_len: int = 48,
    seed: int = 0,
    progress: bool = False,
) -> list[float]:
    """Fine-tune every parameter that requires a gradient with AdamW (linear decay, 10% warm-up).

    Returns the training loss of every step. Parameters with ``requires_grad=False``
    (a frozen encoder) stay as they are: that is the feature-extraction ablation.
    """
    if len(train) == 0:
        raise ValueError("train is empty")
    if not (isinstance(epochs, int) and epochs >= 1):
        raise ValueError(f"epochs must be a positive int, got {epochs!r}")
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ValueError("model has no trainable parameters")
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.01)
    steps = epochs * math.ceil(len(train) / batch_size)
    sched = linear_warmup_decay(opt, warmup_steps=max(1, steps // 10), total_steps=steps)
    rng = random.Random(seed)
    gen = torch.Generator().manual_seed(seed)
    dev = model_device(model)
    model.train()
    losses = []
    bar = None
    if progress:
        from .progress import tqdm

        bar = tqdm(total=steps, desc="fine-tune", leave=False)
    with torch.random.fork_rng():
        torch.manual_seed(int(torch.randint(0, 2**31 - 1, (1,), generator=gen)))  # dropout masks
        for _ in range(epochs):
            order = list(range(len(train)))
            rng.shuffle(order)
            for i in range(0, len(order), batch_size):
                chunk = [train[j] for j in order[i : i + batch_size]]
                b = {k: v.to(dev) for k, v in batch_encode(tokenizer, [t for t, _ in chunk], max_len=max_len).items()}
                logits = model(b["input_ids"], b["token_type_ids"], b["attention_mask"])
                loss = F.cross_entropy(logits, torch.tensor([y for _, y in chunk], device=dev))
                opt.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(params, 1.0)
                opt.step()
                sched.step()
                losses.append(loss.item())
                if bar is not None:
                    bar.update(1)
    if bar is not None:
        bar.close()
    model.eval()
    return losses


def balanced_subset(data: Sequence[tuple[str, int]], n_per_class: int, seed: int = 0) -> list[tuple[str, int]]:
    """``n_per_class`` random examples of label 0 and of label 1, shuffled (so chance is 50%).

    >>> data = [("a", 0), ("b", 0), ("c", 1), ("d", 1), ("e", 1)]
    >>> sorted(y for _, y in balanced_subset(data, 2))
    [0, 0, 1, 1]
    """
    if isinstance(n_per_class, bool) or not isinstance(n_per_class, int) or n_per_class < 1:
        raise ValueError(f"n_per_class must be a positive int, got {n_per_class!r}")
    rng = random.Random(seed)
    by = {0: [x for x in data if x[1] == 0], 1: [x for x in data if x[1] == 1]}
    for label, items in by.items():
        if len(items) < n_per_class:
            raise ValueError(f"n_per_class={n_per_class} but data has only {len(items)} examples of label {label}")
    out = rng.sample(by[0], n_per_class) + rng.sample(by[1], n_per_class)
    rng.shuffle(out)
    return out


_POOLINGS = ("cls", "mean")


def pooled_features(model: Bert, tokenizer, data: Sequence[tuple[str, int]], max_len: int = 48, batch_size: int = 128,
                    pooling: str | tuple[str, ...] = "cls") -> torch.Tensor | tuple[torch.Tensor, ...]:
    """The frozen encoder's sentence vectors, (len(data), D), for feature extraction.

    ``pooling="cls"``: the pooled [CLS] vector (what BERT's classifiers read); ``"mean"``: the mean of
    the token vectors over the attention mask (``mean_pool``, what sentence-transformers trained
    all-MiniLM-L6-v2 to produce). A tuple such as ``("cls", "mean")`` returns one tensor per entry,
    all from one pass over ``data``.
    """
    if not isinstance(model, Bert):
        raise TypeError(f"model must be a Bert encoder, got {type(model).__name__}")
    kinds = (pooling,) if isinstance(pooling, str) else tuple(pooling)
    if not kinds or any(k not in _POOLINGS for k in kinds):
        raise ValueError(f"pooling must be one of {_POOLINGS} or a tuple of them, got {pooling!r}")

    def step(b: dict, chunk: Sequence[tuple[str, int]]) -> tuple[torch.Tensor, ...]:
        out = model(**b)
        return tuple(out.pooled if k == "cls" else mean_pool(out.last_hidden_state, b["attention_mask"]) for k in kinds)

    feats = _no_grad_batches(model, tokenizer, data, step, max_len, batch_size)
    return feats[0] if isinstance(pooling, str) else feats


def linear_probe(
    f_train: torch.Tensor, y_train: torch.Tensor, f_val: torch.Tensor, y_val: torch.Tensor,
    steps: int = 300, lr: float = 1e-2, seed: int = 0, weight_decay: float = 0.01, per_item: bool = False,
    return_logits: bool = False,
) -> float | torch.Tensor:
    """Held-out accuracy of a linear layer (logistic regression) trained on frozen features.

    Full-batch AdamW (decoupled ``weight_decay``; 0.01 is AdamW's default) for ``steps`` steps
    from a seeded initialisation: BERT's feature-based approach, against which fine-tuning every
    weight is compared. With ``per_item=True``: one bool per row of ``f_val`` (did the probe predict
    its label?), on the features' device, for paired comparisons; the accuracy is its mean. With
    ``return_logits=True``: the trained layer's logits on ``f_val``, (N_val, n_classes), so that a probe
    written out elsewhere (chapter 7) can be checked against this one to a float tolerance.
    """
    if per_item and return_logits:
        raise ValueError("per_item and return_logits cannot both be True: choose one result")
    if f_train.dim() != 2 or f_val.dim() != 2 or f_train.shape[1] != f_val.shape[1]:
        raise ValueError(f"f_train and f_val must be (N, D) with the same D, got {tuple(f_train.shape)} and {tuple(f_val.shape)}")
    if len(y_train) != len(f_train) or len(y_val) != len(f_val):
        raise ValueError("y_train / y_val must have one label per feature row")
    if isinstance(weight_decay, bool) or not isinstance(weight_decay, (int, float)) or not weight_decay >= 0:
        raise ValueError(f"weight_decay must be a number >= 0, got {weight_decay!r}")
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        head = nn.Linear(f_train.shape[1], int(max(y_train.max(), y_val.max())) + 1)
    head = head.to(f_train.device)  # the probe trains where the features are
    y_train, y_val, f_val = y_train.to(f_train.device), y_val.to(f_train.device), f_val.to(f_train.device)
    opt = torch.optim.AdamW(head.parameters(), lr=lr, weight_decay=weight_decay)
    for _ in range(steps):
        loss = F.cross_entropy(head(f_train), y_train)
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        logits = head(f_val)  # (N_val, n_classes)
    if return_logits:
        return logits
    correct = logits.argmax(-1) == y_val
    return correct if per_item else correct.float().mean().item()
