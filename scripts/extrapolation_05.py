"""Chapter 5's length test: which position scheme lets a model read past its training length.

One small decoder-only character model, trained five times with five ways of telling it
where a token is, then read on windows four times longer than any it was trained on.

The model is chapter 6a's GPT at its sizes (2 Pre-LN blocks, 4 heads, width 64, FFN 256,
tied output layer, N(0, 0.02) initialisation, no dropout); only the position scheme changes:

- ``learned``: a table of one trained vector per position (GPT-1, chapter 6a). It has a row
  for every position up to the evaluation length, but only rows 0..31 ever receive a
  gradient; the other rows keep their random start, shrunk a little by AdamW's weight
  decay (``llmbook.train`` decays every matrix).
- ``sinusoidal``: the fixed table of Vaswani et al. (2017), added to the token embeddings,
  scaled to their initial spread (0.02 per entry, root mean square).
- ``rope``: every query and key rotated by its position in every layer (Su et al., 2021;
  ``llmbook.positional.apply_rope``, base 10000).
- ``alibi``: nothing added to the embeddings; every attention score gets -m_h (i - j)
  (Press, Smith & Lewis, 2022; ``llmbook.positional.alibi_bias``).
- ``none``: the causal mask alone (a causal stack can still infer some order: chapter 6a,
  exercise 06a.3).

Training (the same for every scheme and seed): ``llmbook.train.train`` with AdamW, 600
updates of 32 random 32-character windows of ``load_splits("shakespeare").train``, peak
learning rate 3e-3 after 30 warm-up updates, cosine to 3e-4; the seed sets the weights and
the batches, so seed s of every scheme sees the same batches (the comparisons are paired).

Evaluation: 256 validation windows of 128 characters (drawn once, seed 4321), each read
from its first character. A causal model's prediction at position t sees only positions
0..t, so the loss at positions 0..31 is exactly the loss at the training length, and
positions 32..127 are the ones no training window had. The file stores, per scheme and
seed, the mean loss at positions 0..31 ("within") and 32..127 ("beyond") and the loss at
every position. The test split is not used.

    OMP_NUM_THREADS=1 python scripts/extrapolation_05.py --out data/results/ch05_extrapolation.json

Deterministic given the seeds, the thread count and the torch build. ``scripts/rope_extension_05.py``
reuses the model and the recipe (``train_model``) and sets ``PositionLM.rope_scaling`` to read the
RoPE runs past 32 characters with position interpolation, NTK-aware scaling and YaRN.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import tempfile
import time
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

from llmbook.charvocab import CharVocab
from llmbook.data import load_splits, load_text
from llmbook.device import seed_everything
from llmbook.positional import alibi_bias, apply_rope, rope_cache, sinusoidal_encoding
from llmbook.train import TrainConfig, random_windows, train

COMMAND = "OMP_NUM_THREADS=1 python scripts/extrapolation_05.py --out data/results/ch05_extrapolation.json"
POSITIONS = ("learned", "sinusoidal", "rope", "alibi", "none")
SIZES = dict(n_layer=2, n_head=4, d_model=64, d_ff=256)
TRAIN_LEN, EVAL_LEN = 32, 128
STEPS, BATCH, LR, MIN_LR, WARMUP = 600, 32, 3e-3, 3e-4, 30
N_EVAL_WINDOWS, EVAL_SEED = 256, 4321
SEEDS = (0, 1, 2)
INIT_STD = 0.02


class Block(nn.Module):
    """Pre-LN block: x + Attention(LN(x)), then x + FFN(LN(x)); RoPE or ALiBi inside the attention."""

    def __init__(self, d_model: int, n_head: int, d_ff: int):
        super().__init__()
        self.n_head = n_head
        self.ln_1, self.ln_2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(approximate="tanh"), nn.Linear(d_ff, d_model))

    def forward(self, x: torch.Tensor, rope: tuple | None, bias: torch.Tensor | None) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln_1(x)).split(C, dim=-1)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))  # (B, H, T, hd)
        if rope is not None:
            q, k = apply_rope(q, *rope), apply_rope(k, *rope)
        if bias is None:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)  # (H, T, T): causal -inf included
        x = x + self.proj(y.transpose(1, 2).reshape(B, T, C))
        return x + self.mlp(self.ln_2(x))


class PositionLM(nn.Module):
    """Chapter 6a's GPT with a switchable position scheme; ``forward(idx, targets)`` -> (logits, loss)."""

    def __init__(self, vocab_size: int, positional: str, max_len: int = EVAL_LEN):
        super().__init__()
        if positional not in POSITIONS:
            raise ValueError(f"positional must be one of {POSITIONS}, got {positional!r}")
        self.positional, self.max_len = positional, max_len
        self.rope_scaling = None  # a RopeScaling read past the trained length (scripts/rope_extension_05.py)
        d, h = SIZES["d_model"], SIZES["n_head"]
        self.wte = nn.Embedding(vocab_size, d)
        self.wpe = nn.Embedding(max_len, d) if positional == "learned" else None
        if positional == "sinusoidal":  # entries of RMS 0.02, the spread of the token embeddings
            self.register_buffer("pe", sinusoidal_encoding(max_len, d) * INIT_STD * math.sqrt(2), persistent=False)
        self.blocks = nn.ModuleList(Block(d, h, SIZES["d_ff"]) for _ in range(SIZES["n_layer"]))
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab_size, bias=False)
        self.lm_head.weight = self.wte.weight  # tied, as in chapter 6a
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=INIT_STD)
            if isinstance(m, nn.Linear) and m.bias is not None:
                nn.init.zeros_(m.bias)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None):
        T = idx.shape[1]
        if T > self.max_len:
            raise ValueError(f"idx has length {T} > max_len={self.max_len}")
        x = self.wte(idx)  # (B, T, C)
        if self.positional == "learned":
            x = x + self.wpe(torch.arange(T, device=idx.device))
        elif self.positional == "sinusoidal":
            x = x + self.pe[:T]
        hd = SIZES["d_model"] // SIZES["n_head"]
        rope = rope_cache(T, hd, device=idx.device, scaling=self.rope_scaling) if self.positional == "rope" else None
        bias = alibi_bias(T, SIZES["n_head"], device=idx.device) if self.positional == "alibi" else None
        for block in self.blocks:
            x = block(x, rope, bias)
        logits = self.lm_head(self.ln_f(x))  # (B, T, V)
        loss = None if targets is None else F.cross_entropy(logits.flatten(0, 1), targets.flatten())
        return logits, loss


@torch.no_grad()
def per_position_loss(model: nn.Module, windows: torch.Tensor, chunk: int = 64) -> list[float]:
    """Mean cross-entropy at every position of ``windows`` (N, EVAL_LEN + 1), each read from its start."""
    model.eval()
    total = torch.zeros(windows.shape[1] - 1, dtype=torch.float64)
    for i in range(0, len(windows), chunk):
        w = windows[i:i + chunk]
        logits, _ = model(w[:, :-1])
        total += F.cross_entropy(logits.transpose(1, 2), w[:, 1:], reduction="none").double().sum(0).cpu()  # (T,)
    return (total / len(windows)).tolist()


def eval_windows(val_ids: torch.Tensor) -> torch.Tensor:
    g = torch.Generator().manual_seed(EVAL_SEED)
    starts = torch.randint(0, len(val_ids) - EVAL_LEN - 1, (N_EVAL_WINDOWS,), generator=g)
    return torch.stack([val_ids[s:s + EVAL_LEN + 1] for s in starts.tolist()])  # (N, EVAL_LEN + 1)


def load_data() -> tuple[CharVocab, torch.Tensor, torch.Tensor]:
    """The vocabulary and the encoded train and validation splits of Shakespeare."""
    splits = load_splits("shakespeare")
    vocab = CharVocab.from_text(load_text("shakespeare"))
    return vocab, torch.tensor(vocab.encode(splits.train)), torch.tensor(vocab.encode(splits.val))


def train_model(name: str, seed: int, steps: int, vocab_size: int, get_batch) -> PositionLM:
    """One run of the recipe above: the model of scheme ``name`` trained with seed ``seed``."""
    seed_everything(seed)
    model = PositionLM(vocab_size, name)
    cfg = TrainConfig(max_steps=steps, lr=LR, min_lr=MIN_LR, warmup_steps=WARMUP, eval_interval=steps,
                      eval_batches=4, seed=seed, progress=False)
    train(model, get_batch, cfg)
    return model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="data/results/ch05_extrapolation.json")
    parser.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS))
    parser.add_argument("--positions", nargs="+", default=list(POSITIONS), choices=list(POSITIONS))
    parser.add_argument("--steps", type=int, default=STEPS)
    args = parser.parse_args()

    vocab, train_ids, val_ids = load_data()
    get_batch = random_windows(train_ids, val_ids, block_size=TRAIN_LEN, batch_size=BATCH)
    windows = eval_windows(val_ids)

    results, t_start = {}, time.perf_counter()
    for name in args.positions:
        runs = []
        for seed in args.seeds:
            t0 = time.perf_counter()
            model = train_model(name, seed, args.steps, len(vocab), get_batch)
            losses = per_position_loss(model, windows)
            within = sum(losses[:TRAIN_LEN]) / TRAIN_LEN
            beyond = sum(losses[TRAIN_LEN:]) / (EVAL_LEN - TRAIN_LEN)
            runs.append({"seed": seed, "within": round(within, 5), "beyond": round(beyond, 5),
                         "per_position": [round(v, 4) for v in losses]})
            print(f"{name:10s} seed {seed}: positions 0-{TRAIN_LEN - 1} {within:.4f}, "
                  f"positions {TRAIN_LEN}-{EVAL_LEN - 1} {beyond:.4f} ({time.perf_counter() - t0:.0f} s)", flush=True)
        results[name] = runs

    out = {
        "meta": {
            "command": COMMAND,
            "script": "scripts/extrapolation_05.py",
            "steps": args.steps,
            "seeds": list(args.seeds),
            "split": "load_splits(shakespeare) 80/10/10; validation only",
            "sizes": SIZES,
            "training": {"steps": args.steps, "batch": BATCH, "length": TRAIN_LEN, "lr": LR, "min_lr": MIN_LR,
                         "warmup_steps": WARMUP, "optimizer": "AdamW (llmbook.train defaults)"},
            "eval": {"windows": N_EVAL_WINDOWS, "length": EVAL_LEN, "seed": EVAL_SEED,
                     "within": f"mean loss at positions 0..{TRAIN_LEN - 1}",
                     "beyond": f"mean loss at positions {TRAIN_LEN}..{EVAL_LEN - 1}"},
            "vocab": "CharVocab.from_text(load_text('shakespeare'))",
            "threads": torch.get_num_threads(),
            "torch": torch.__version__,
            "seconds": round(time.perf_counter() - t_start),
        },
        "positions": results,
    }
    path = Path(args.out)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        json.dump(out, f, indent=1)
    os.replace(tmp, path)
    print("wrote", path)


if __name__ == "__main__":
    main()
