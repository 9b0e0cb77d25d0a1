"""Chapter 6a's ablation table: the GPT grown in ``notebooks/06a_build_gpt.ipynb``, one idea removed at a time.

Every variant is ``llmbook.gpt.GPT`` at the notebook's sizes (2 layers, 4 heads, 64 wide,
a 32-character context, dropout 0.1), trained with the notebook's budget (300 AdamW
updates of 32 random 32-character windows of ``load_splits("shakespeare").train``, peak
learning rate 3e-3 after 30 warm-up updates, cosine to 3e-4) once per seed, and scored on
the notebook's fixed validation batches (``estimate_loss`` with ``EVAL_BATCHES`` batches
drawn with ``EVAL_SEED``). The seed sets the initial weights, the batch order and the
dropout masks. The test split is not touched: the notebook measures it once, for its own
final model.

Variants use ``GPTConfig`` switches where they exist (Post-LN, no scaled residual init,
no weight tying, no dropout) and change the built model otherwise (no positions: the
position table is zeroed and frozen; no residual: each block's two additions are dropped;
no LayerNorm: every LayerNorm, the final one included, becomes the identity).

    OMP_NUM_THREADS=1 python scripts/ablation_06a.py --out data/results/ch06a_ablation.json

Writes a JSON file with a top-level ``meta`` object (command, steps, seeds, split, sizes,
schedule, threads, torch) and, per variant, the validation loss of every seed, the mean
and the standard error. Bit-for-bit reproducible with the same thread count and torch build.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import tempfile
import time
import types
from pathlib import Path

import torch
import torch.nn as nn

from llmbook.charvocab import CharVocab
from llmbook.data import load_splits, load_text
from llmbook.device import seed_everything
from llmbook.gpt import GPT, GPTConfig
from llmbook.train import TrainConfig, estimate_loss, random_windows, train

COMMAND = "OMP_NUM_THREADS=1 python scripts/ablation_06a.py --out data/results/ch06a_ablation.json"
SIZES = dict(n_layer=2, n_head=4, d_model=64, d_ff=256, block_size=32, dropout=0.1)
STEPS, BATCH, LR, MIN_LR, WARMUP = 300, 32, 3e-3, 3e-4, 30
EVAL_BATCHES, EVAL_SEED = 60, 1234  # the fixed validation batches every model in the chapter is scored on
SEEDS = (0, 1, 2)

# name -> (what is removed, GPTConfig switches, surgery on the built model)
VARIANTS: dict[str, tuple[str, dict, str | None]] = {
    "full": ("nothing (the chapter's final model)", {}, None),
    "no_positions": ("position embeddings (zeroed and frozen)", {}, "no_positions"),
    "no_residual": ("residual connections (x = f(x) instead of x = x + f(x))", {}, "no_residual"),
    "no_layernorm": ("every LayerNorm (the final one too)", {}, "no_layernorm"),
    "post_ln": ("Pre-LN: LayerNorm after each addition, no final LayerNorm (GPT-1)", {"pre_norm": False, "final_norm": False}, None),
    "no_scaled_init": ("the 1/sqrt(2 n_layer) scaling of residual projections", {"scaled_residual_init": False}, None),
    "no_tying": ("weight tying (a separate output matrix)", {"tie_weights": False}, None),
    "no_dropout": ("dropout (p = 0.1 -> 0)", {"dropout": 0.0}, None),
}


def _block_without_residual(self, x, kv_cache=None, return_attention=False):
    """Block.forward with the two residual additions removed (Pre-LN order kept)."""
    a, w = self.attn(self.ln_1(x), kv_cache, return_attention)
    return self.mlp(self.ln_2(a)), w


def build(variant: str, vocab_size: int, seed: int) -> GPT:
    """The variant's model, initialised from ``seed``."""
    _, switches, surgery = VARIANTS[variant]
    seed_everything(seed)
    model = GPT(GPTConfig(vocab_size=vocab_size, **{**SIZES, **switches}))
    if surgery == "no_positions":
        model.wpe.weight.data.zero_()
        model.wpe.weight.requires_grad_(False)  # stays zero: configure_optimizer skips frozen tensors
    elif surgery == "no_residual":
        for block in model.blocks:
            block.forward = types.MethodType(_block_without_residual, block)
    elif surgery == "no_layernorm":
        for block in model.blocks:
            block.ln_1, block.ln_2 = nn.Identity(), nn.Identity()
        model.ln_f = nn.Identity()
    return model


def train_config(seed: int) -> TrainConfig:
    return TrainConfig(max_steps=STEPS, lr=LR, min_lr=MIN_LR, warmup_steps=WARMUP, eval_interval=50,
                       eval_batches=10, seed=seed, progress=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="data/results/ch06a_ablation.json")
    parser.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS))
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    args = parser.parse_args()

    splits = load_splits("shakespeare")
    vocab = CharVocab.from_text(load_text("shakespeare"))
    train_ids = torch.tensor(vocab.encode(splits.train))
    val_ids = torch.tensor(vocab.encode(splits.val))
    get_batch = random_windows(train_ids, val_ids, block_size=SIZES["block_size"], batch_size=BATCH)

    results = {}
    t_start = time.perf_counter()
    for name in args.variants:
        vals, curves = [], []
        for seed in args.seeds:
            t0 = time.perf_counter()
            model = build(name, len(vocab), seed)
            run = train(model, get_batch, train_config(seed))
            val = estimate_loss(model, get_batch, "val", EVAL_BATCHES, seed=EVAL_SEED)
            vals.append(val)
            curves.append([(e["step"], round(e["val"], 4)) for e in run.evals])
            print(f"{name:15s} seed {seed}: val {val:.4f} ({time.perf_counter() - t0:.0f} s)", flush=True)
        se = statistics.stdev(vals) / math.sqrt(len(vals)) if len(vals) > 1 else float("nan")
        results[name] = {"removed": VARIANTS[name][0], "switches": VARIANTS[name][1], "val": vals,
                         "mean": statistics.fmean(vals), "se": se, "curves": curves}

    out = {
        "meta": {
            "command": COMMAND,
            "script": "scripts/ablation_06a.py",
            "steps": STEPS,
            "seeds": list(args.seeds),
            "split": "load_splits(shakespeare) 80/10/10",
            "sizes": SIZES,
            "training": {"steps": STEPS, "batch": BATCH, "block_size": SIZES["block_size"], "lr": LR,
                         "min_lr": MIN_LR, "warmup_steps": WARMUP, "optimizer": "AdamW (llmbook.train defaults)"},
            "eval": f"estimate_loss(model, random_windows(train, val, 32, 32), 'val', {EVAL_BATCHES}, seed={EVAL_SEED}): "
                    "nats per character on fixed validation windows, the same for every model",
            "vocab": "CharVocab.from_text(load_text('shakespeare'))",
            "threads": torch.get_num_threads(),
            "torch": torch.__version__,
            "seconds": round(time.perf_counter() - t_start),
        },
        "variants": results,
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
