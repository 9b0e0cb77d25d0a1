"""Chapter 8e's induction-head runs: a two-layer and a one-layer attention-only model, three seeds each.

The notebook (``notebooks/08e_interpretability.ipynb``, section 1) trains seed 1 of the two-layer
model live with the same function and checks it against this file. Each run is
``llmbook.interp.train_induction``: an ``AttnOnlyTransformer`` (4 heads, width 64, no MLP, no
norm) trained for 2,000 AdamW updates (rate 3e-3, batch 64) on ``repeated_tokens`` (32 tokens from
a vocabulary of 32; the last n in [8, 16] repeat the n before them), with the loss on the repeated
half and every head's previous-token, prefix-matching, copying and induction scores recorded every
50 updates on a fixed batch of 256 sequences.

    OMP_NUM_THREADS=1 ATEN_CPU_CAPABILITY=avx2 python scripts/induction_08e.py --workers 6 --out data/results/ch08e_induction.json

Writes a JSON file with a ``meta`` object (command, budget, threads, kernel path, torch, seconds)
and ``runs``: for n_layer 2 and 1, one history per seed. Bit-for-bit reproducible with the same
thread count, kernel path and torch build.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import time
from pathlib import Path

import torch

from llmbook.interp import INDUCTION_MODEL, INDUCTION_TASK, repeated_tokens, seen_token_baseline, train_induction

COMMAND = "OMP_NUM_THREADS=1 ATEN_CPU_CAPABILITY=avx2 python scripts/induction_08e.py --workers 6 --out data/results/ch08e_induction.json"
SEEDS = (0, 1, 2)
SPLIT = "none"  # no corpus: synthetic data
DATA = "fresh random sequences for every update (generator seed 1000 + seed); scores on one fixed batch of 256 (generator seed 999)"
STEPS = 2000


def one_run(n_layer: int, seed: int, steps: int) -> dict:
    """One training run on one thread (each run seeds itself, so running them in parallel changes nothing)."""
    torch.set_num_threads(1)
    t = time.time()
    hist = train_induction(n_layer, seed, steps=steps)
    hist.pop("model")
    hist["seed"] = seed
    hist["seconds"] = round(time.time() - t)
    return hist


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="where to write the JSON results")
    ap.add_argument("--steps", type=int, default=STEPS, help="updates per run")
    ap.add_argument("--workers", type=int, default=1, help="runs in parallel, one process (one thread) each")
    args = ap.parse_args()
    torch.set_num_threads(1)
    t0 = time.time()
    jobs = [(n_layer, seed) for n_layer in (2, 1) for seed in SEEDS]
    with concurrent.futures.ProcessPoolExecutor(max_workers=args.workers) as pool:
        done = list(pool.map(one_run, *zip(*jobs), [args.steps] * len(jobs)))
    runs: dict[str, list] = {"2": [], "1": []}
    for (n_layer, seed), hist in zip(jobs, done):
        runs[str(n_layer)].append(hist)
        print(f"n_layer {n_layer} seed {seed}: final repeated-half loss {hist['loss'][-1]:.3f} ({hist['seconds']} s)")
    x, n = repeated_tokens(256, generator=torch.Generator().manual_seed(999), **INDUCTION_TASK)
    out = {
        "meta": {
            "command": COMMAND, "steps": args.steps, "seeds": list(SEEDS), "task": INDUCTION_TASK,
            "split": SPLIT, "data": DATA,
            "model": INDUCTION_MODEL, "threads": torch.get_num_threads(),
            "kernel_path": os.environ.get("ATEN_CPU_CAPABILITY", "default for this CPU"),
            "torch": torch.__version__, "workers": args.workers, "seconds": round(time.time() - t0),
            "seen_token_baseline": seen_token_baseline(x, n),
        },
        "runs": runs,
    }
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    print("wrote", args.out)


if __name__ == "__main__":
    main()
