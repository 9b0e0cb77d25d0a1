"""Toy sequence-to-sequence tasks on digit strings, small enough to train a Transformer on a CPU.

Covers
------
- ``DigitTask``: reverse (or sort, or copy) a string of digits, e.g. "3141" -> "1413".
  Token ids: 0 PAD, 1 BOS, 2 EOS, 3..12 the digits 0..9 (vocabulary of 13).
- ``make_batch``: random examples as padded id tensors (source, decoder input = target
  shifted right with BOS first, decoder output = target followed by EOS).
- ``exact_match``: the share of examples whose greedy decoding equals the target exactly.
- ``train_seq2seq``: a plain Adam loop with linear warm-up and a progress bar.
- ``training_sources`` / ``drop_seen``: the source strings a ``train_seq2seq`` run saw
  (it replays the run's generator), and a filter that keeps only unseen, distinct test
  examples, so a "held-out" set is truly held out.

Leaves out: real data and tokenizers (chapter 1), the general training loop (chapter 6).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from .device import model_device

__all__ = ["DigitTask", "make_batch", "exact_match", "train_seq2seq", "training_sources", "drop_seen",
           "PAD", "BOS", "EOS", "VOCAB_SIZE"]

PAD, BOS, EOS = 0, 1, 2
DIGIT0 = 3  # id of the digit "0"
VOCAB_SIZE = 13


@dataclass(frozen=True)
class DigitTask:
    """Which mapping of digit strings to learn."""

    kind: str = "reverse"  # "reverse", "sort" or "copy"
    min_len: int = 1  # shortest source string
    max_len: int = 8  # longest source string

    def __post_init__(self) -> None:
        if self.kind not in ("reverse", "sort", "copy"):
            raise ValueError(f"kind must be 'reverse', 'sort' or 'copy', got {self.kind!r}")
        if not (isinstance(self.min_len, int) and isinstance(self.max_len, int) and 1 <= self.min_len <= self.max_len):
            raise ValueError(f"need 1 <= min_len <= max_len, got min_len={self.min_len}, max_len={self.max_len}")

    def target(self, digits: list[int]) -> list[int]:
        """The answer for one list of digits.

        >>> DigitTask("reverse").target([3, 1, 4])
        [4, 1, 3]
        >>> DigitTask("sort").target([3, 1, 4])
        [1, 3, 4]
        """
        if self.kind == "reverse":
            return digits[::-1]
        if self.kind == "sort":
            return sorted(digits)
        return list(digits)

    @staticmethod
    def to_text(ids: list[int] | torch.Tensor) -> str:
        """Ids -> digit string, stopping at EOS and skipping PAD/BOS.

        >>> DigitTask.to_text([1, 6, 4, 2, 0])
        '31'
        """
        out = []
        for i in (ids.tolist() if isinstance(ids, torch.Tensor) else ids):
            if i == EOS:
                break
            if i >= DIGIT0:
                out.append(str(i - DIGIT0))
        return "".join(out)


def make_batch(task: DigitTask, n: int, generator: torch.Generator | None = None):
    """``n`` random examples: (src (n, L), tgt_in (n, L+1), tgt_out (n, L+1)), padded with PAD.

    >>> src, tgt_in, tgt_out = make_batch(DigitTask("reverse", 3, 3), 1, torch.Generator().manual_seed(0))
    >>> DigitTask.to_text(src[0]), DigitTask.to_text(tgt_out[0])
    ('930', '039')
    >>> tgt_in[0].tolist()[0] == BOS and tgt_out[0].tolist()[-1] == EOS
    True
    """
    if not isinstance(task, DigitTask):
        raise TypeError(f"task must be a DigitTask, got {type(task).__name__}")
    if not isinstance(n, int) or n <= 0:
        raise ValueError(f"n must be a positive int, got {n!r}")
    lengths = torch.randint(task.min_len, task.max_len + 1, (n,), generator=generator)  # (n,)
    digits = torch.randint(0, 10, (n, task.max_len), generator=generator)  # (n, max_len)
    L = int(lengths.max())
    j = torch.arange(L)[None, :]  # (1, L) position index
    real = j < lengths[:, None]  # (n, L) True on the real (non-padding) positions
    d = digits[:, :L]
    if task.kind == "reverse":
        # position j of the answer is source position len-1-j (clamped where padding)
        t = d.gather(1, (lengths[:, None] - 1 - j).clamp(min=0))
    elif task.kind == "sort":
        t = torch.where(real, d, 10).sort(dim=1).values  # padding (10) sorts to the end
    else:
        t = d
    src = torch.where(real, d + DIGIT0, PAD)  # (n, L)
    t = torch.where(real, t + DIGIT0, PAD)  # (n, L)
    pad_col = torch.full((n, 1), PAD, dtype=torch.long)
    tgt_out = torch.cat([t, pad_col], dim=1)  # (n, L+1): target, then EOS
    tgt_out[torch.arange(n), lengths] = EOS
    tgt_in = torch.cat([torch.full((n, 1), BOS, dtype=torch.long), t], dim=1)  # target shifted right
    return src, tgt_in, tgt_out


@torch.no_grad()
def exact_match(model, src: torch.Tensor, tgt_out: torch.Tensor) -> float:
    """Share of rows whose greedy decoding (up to and including EOS) equals ``tgt_out``."""
    dev = model_device(model)
    src, tgt_out = src.to(dev), tgt_out.to(dev)  # batches made on the CPU follow the model
    pred = model.greedy_decode(src, BOS, EOS, max_new_tokens=tgt_out.shape[1])
    T = tgt_out.shape[1]
    if pred.shape[1] < T:
        pred = torch.cat([pred, torch.full((pred.shape[0], T - pred.shape[1]), PAD, dtype=pred.dtype, device=dev)], dim=1)
    return (pred[:, :T] == tgt_out).all(dim=1).float().mean().item()


def train_seq2seq(model, task: DigitTask, steps: int, batch_size: int = 64, lr: float = 1e-3, warmup: int = 100,
                  seed: int = 0, progress: bool = True, clip: float | None = 1.0,
                  callback=None, callback_every: int = 250, label_smoothing: float = 0.0) -> list[float]:
    """Train with Adam(0.9, 0.98), linear warm-up over ``warmup`` steps; return per-step losses.

    Cross-entropy on every non-PAD target position (teacher forcing: the decoder sees
    the true previous tokens); with ``label_smoothing`` = eps the target is 1 - eps on the
    right token plus eps spread evenly over the vocabulary (Vaswani et al. 2017, section
    5.4, use 0.1), and the returned losses are that smoothed cross-entropy. The batches
    come from one generator seeded with ``seed`` (``training_sources`` replays them). ``callback(step)``, if given, is called after
    every ``callback_every`` updates (one optimizer throughout; the callback must leave
    the model's weights alone). Batches are drawn on the CPU (a seed gives the same data
    on every machine) and moved to the model's device.
    """
    if not isinstance(steps, int) or steps <= 0:
        raise ValueError(f"steps must be a positive int, got {steps!r}")
    if not isinstance(warmup, int) or warmup < 0:
        raise ValueError(f"warmup must be a non-negative int, got {warmup!r}")
    if isinstance(label_smoothing, bool) or not isinstance(label_smoothing, (int, float)) or not 0 <= label_smoothing < 1:
        raise ValueError(f"label_smoothing must be a number in [0, 1), got {label_smoothing!r}")
    gen = torch.Generator().manual_seed(seed)
    dev = model_device(model)
    opt = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.98), eps=1e-9)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warmup) if warmup else 1.0)
    losses = []
    model.train()
    it = range(steps)
    if progress:
        from .progress import tqdm

        it = tqdm(it, desc="training", leave=False)
    for _ in it:
        src, tgt_in, tgt_out = (t.to(dev) for t in make_batch(task, batch_size, gen))
        logits = model(src, tgt_in)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1), ignore_index=PAD,
                               label_smoothing=float(label_smoothing))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if clip is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        sched.step()
        losses.append(loss.item())
        if callback is not None and len(losses) % callback_every == 0:
            callback(len(losses))
    model.eval()
    return losses


def training_sources(task: DigitTask, steps: int, batch_size: int = 64, seed: int = 0) -> set[str]:
    """Every source string that ``train_seq2seq(model, task, steps, batch_size, seed=seed)`` trains on.

    It replays the run's generator (one ``make_batch`` per update), so nothing has to be stored.

    >>> seen = training_sources(DigitTask("reverse", 1, 2), steps=3, batch_size=4)
    >>> len(seen) <= 12 and all(1 <= len(s) <= 2 for s in seen)
    True
    """
    if not isinstance(steps, int) or steps <= 0:
        raise ValueError(f"steps must be a positive int, got {steps!r}")
    gen = torch.Generator().manual_seed(seed)
    seen: set[str] = set()
    for _ in range(steps):
        src, _, _ = make_batch(task, batch_size, gen)
        seen.update(DigitTask.to_text(row) for row in src.tolist())
    return seen


def drop_seen(src: torch.Tensor, tgt_out: torch.Tensor, seen: set[str]) -> tuple[torch.Tensor, torch.Tensor]:
    """Keep the rows of (``src``, ``tgt_out``) whose source string is not in ``seen``, each string once.

    >>> src, _, tgt = make_batch(DigitTask("reverse", 3, 3), 4, torch.Generator().manual_seed(0))
    >>> first = DigitTask.to_text(src[0])
    >>> kept, _ = drop_seen(src, tgt, {first})
    >>> first in {DigitTask.to_text(r) for r in kept}, len(kept) <= 3
    (False, True)
    """
    if not isinstance(seen, (set, frozenset)):
        raise TypeError(f"seen must be a set of strings, got {type(seen).__name__}")
    if src.shape[0] != tgt_out.shape[0]:
        raise ValueError(f"src and tgt_out must have the same number of rows, got {src.shape[0]} and {tgt_out.shape[0]}")
    keep, taken = [], set()
    for i, row in enumerate(src.tolist()):
        text = DigitTask.to_text(row)
        if text not in seen and text not in taken:
            keep.append(i)
            taken.add(text)
    index = torch.tensor(keep, dtype=torch.long, device=src.device)
    return src[index], tgt_out[index]
