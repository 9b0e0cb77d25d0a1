"""Chapter 8e's induction-head runs: a two-layer and a one-layer attention-only model, three seeds each.

The notebook (``notebooks/08e_interpretability.ipynb``, section 1) trains seed 1 of the two-layer
model live with the same function and checks it against this file. Each run is
``llmbook.interp.train_induction``: an ``AttnOnlyTransformer`` (4 heads, width 64, no MLP, no
norm) trained for 2,000 AdamW updates (rate 3e-3, batch 64) on ``repeated_tokens`` (32 tokens from
a vocabulary of 32; the last n in [8, 16] repeat the n before them), with the loss on the repeated
half and every head's previous-token, duplicate-token, prefix-matching, copying and induction
scores recorded every 50 updates on a fixed batch of 256 sequences (``llmbook.interp.head_scores``).

After training, each two-layer model is scored again with one layer-0 head at a time silenced
(its output set to zero): the repeated-half loss and layer 1's prefix-matching and induction
scores without that head say which layer-0 head the induction head depends on.

    OMP_NUM_THREADS=1 ATEN_CPU_CAPABILITY=avx2 python scripts/induction_08e.py --out data/results/ch08e_induction.json

One process, one thread, the runs one after another (about 10 minutes on an idle core). Writes a
JSON file with a ``meta`` object (command, budget, threads, kernel path, torch, seconds) and
``runs``: for n_layer 2 and 1, one history per seed (two-layer runs also hold ``ablate_layer0``).
Bit-for-bit reproducible with the same thread count, kernel path and torch build.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import torch

from llmbook.interp import (INDUCTION_MODEL, INDUCTION_TASK, head_scores, repeated_tokens, seen_token_baseline,
                            train_induction)

COMMAND = "OMP_NUM_THREADS=1 ATEN_CPU_CAPABILITY=avx2 python scripts/induction_08e.py --out data/results/ch08e_induction.json"
SEEDS = (0, 1, 2)
SPLIT = "none"  # no corpus: synthetic data
DATA = "fresh random sequences for every update (generator seed 1000 + seed); scores on one fixed batch of 256 (generator seed 999)"
STEPS = 2000


def eval_batch() -> tuple[torch.Tensor, torch.Tensor]:
    """The fixed batch every score is measured on (the same one ``train_induction`` uses)."""
    return repeated_tokens(256, generator=torch.Generator().manual_seed(999), **INDUCTION_TASK)


def one_run(n_layer: int, seed: int, steps: int) -> dict:
    """One training run; for two layers, also the scores with each layer-0 head silenced in turn."""
    t = time.time()
    hist = train_induction(n_layer, seed, steps=steps)
    model = hist.pop("model")
    if n_layer == 2:
        x, n = eval_batch()
        hist["ablate_layer0"] = []
        for head in range(model.n_head):
            s = head_scores(model, x, n, ablate=[(0, head)])
            hist["ablate_layer0"].append({"head": head, "loss": s["loss"], "prefix": s["prefix"][1],
                                          "induction": s["induction"][1]})
    hist["seed"] = seed
    hist["seconds"] = round(time.time() - t)
    return hist


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="where to write the JSON results")
    ap.add_argument("--steps", type=int, default=STEPS, help="updates per run")
    args = ap.parse_args()
    torch.set_num_threads(1)
    t0 = time.time()
    runs: dict[str, list] = {"2": [], "1": []}
    for n_layer in (2, 1):
        for seed in SEEDS:
            hist = one_run(n_layer, seed, args.steps)
            runs[str(n_layer)].append(hist)
            print(f"n_layer {n_layer} seed {seed}: final repeated-half loss {hist['loss'][-1]:.3f} ({hist['seconds']} s)",
                  flush=True)
    x, n = eval_batch()
    out = {
        "meta": {
            "command": COMMAND, "steps": args.steps, "seeds": list(SEEDS), "task": INDUCTION_TASK,
            "split": SPLIT, "data": DATA,
            "model": INDUCTION_MODEL, "threads": torch.get_num_threads(),
            "kernel_path": os.environ.get("ATEN_CPU_CAPABILITY", "default for this CPU"),
            "torch": torch.__version__, "seconds": round(time.time() - t0),
            "seen_token_baseline": seen_token_baseline(x, n),
        },
        "runs": runs,
    }
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    print("wrote", args.out)


if __name__ == "__main__":
    main()
