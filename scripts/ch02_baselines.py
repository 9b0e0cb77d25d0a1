"""Chapter 2's baseline table: feed-forward, RNN and LSTM character LMs, three seeds each.

Trains each model of ``notebooks/02_architectures.ipynb`` (``CharLMConfig.tiny``, 300
Adam steps of 64 windows of 64 characters, lr 1e-2, gradient clip 1.0) once per seed on
``load_splits("shakespeare").train`` and scores it in bits per character on *every*
non-overlapping 64-character window of the validation split (the rule of
``data/README.md``, which chapter 6 uses for its GPT), and once, at the end, on the same
windows of the test split. Writes ``data/results/ch02_baselines.json`` with a top-level
``meta`` object (command, steps, seeds, split, threads) and, per model, the per-seed
figures, their mean and standard error.

    OMP_NUM_THREADS=1 python scripts/ch02_baselines.py --out data/results/ch02_baselines.json

It took 27 minutes on one thread of a heavily shared 2-core machine (nine runs). The figures are reproducible bit for bit with the same
thread count and torch build (``meta.threads``, ``meta.torch``); with another thread count
the float sums run in another order and the bits per character can move in the 4th decimal.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path

import torch

from llmbook.charvocab import CharVocab
from llmbook.data import load_splits, load_text
from llmbook.device import default_device, seed_everything
from llmbook.rnn import CharLM, CharLMConfig, bits_per_char

COMMAND = "OMP_NUM_THREADS=1 python scripts/ch02_baselines.py --out data/results/ch02_baselines.json"
NAMES = {"ff": "feed-forward, window 8", "rnn": "SimpleRNN", "lstm": "LSTM"}
STEPS, BATCH, SEQ_LEN, LR, GRAD_CLIP, EVAL_EVERY = 300, 64, 64, 1e-2, 1.0, 50
EVAL_LEN = 64  # window length of the shared evaluation rule (= the chapter-6 GPT's context)
CURVE_STRIDE = 8  # learning curves use every 8th validation window (944 of 7,551), for speed
EVAL_RULE = ("every non-overlapping 64-character window of the split: inputs text[64k:64k+64], "
             "targets text[64k+1:64k+65], k < (len(text)-1)//64; each window starts from a zero state; "
             "vocabulary CharVocab.from_text(load_text('shakespeare')) (81 characters)")


def eval_windows(ids: torch.Tensor, length: int = EVAL_LEN) -> tuple[torch.Tensor, torch.Tensor]:
    """All non-overlapping windows of ``length`` ids and their next-id targets: (n, length) each."""
    n = (len(ids) - 1) // length
    return ids[: n * length].view(n, length), ids[1 : n * length + 1].view(n, length)


def random_batch(data: torch.Tensor, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """BATCH random windows of SEQ_LEN characters and their next characters (the notebook's ``batch``)."""
    start = torch.randint(0, len(data) - SEQ_LEN - 1, (BATCH,), generator=generator)
    x = torch.stack([data[s : s + SEQ_LEN] for s in start])
    y = torch.stack([data[s + 1 : s + SEQ_LEN + 1] for s in start])
    return x, y


def window_bits(model: CharLM, x: torch.Tensor, y: torch.Tensor) -> float:
    """Bits per character over every prediction of the windows (x, y), on the model's device."""
    device = next(model.parameters()).device
    return bits_per_char(model, x.to(device), y.to(device))


def train_one(kind: str, seed: int, train_ids, curve_x, curve_y, vocab_size: int, device: torch.device):
    """One model, one seed: the initial weights and the batches both come from ``seed``."""
    seed_everything(seed)
    config = CharLMConfig.tiny(vocab_size, kind)
    model = CharLM(config).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    gen = torch.Generator().manual_seed(seed)  # the same batches for every model of a seed
    curve = [(0, window_bits(model, curve_x, curve_y))]
    for step in range(1, STEPS + 1):
        x, y = random_batch(train_ids, gen)
        loss = model.loss(x.to(device), y.to(device))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), GRAD_CLIP)
        opt.step()
        if step % EVAL_EVERY == 0:
            curve.append((step, window_bits(model, curve_x, curve_y)))
    return model, config, curve


def mean_se(xs: list[float]) -> tuple[float, float]:
    m = sum(xs) / len(xs)
    var = sum((x - m) ** 2 for x in xs) / (len(xs) - 1)
    return m, math.sqrt(var / len(xs))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path("data/results/ch02_baselines.json"))
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    args = ap.parse_args(argv)
    if len(args.seeds) < 2:
        ap.error("--seeds needs at least two seeds for a standard error")

    device = default_device()
    splits = load_splits("shakespeare")
    vocab = CharVocab.from_text(load_text("shakespeare"))
    train_ids = torch.tensor(vocab.encode(splits.train))
    val_x, val_y = eval_windows(torch.tensor(vocab.encode(splits.val)))
    test_x, test_y = eval_windows(torch.tensor(vocab.encode(splits.test)))
    freq = torch.bincount(train_ids, minlength=len(vocab)).double() / len(train_ids)
    nz = freq[freq > 0]
    unigram_bits = -(nz * nz.log2()).sum().item()

    models = {}
    t0 = time.time()
    for kind in NAMES:
        runs = []
        for seed in args.seeds:
            model, config, curve = train_one(kind, seed, train_ids, val_x[::CURVE_STRIDE], val_y[::CURVE_STRIDE],
                                             len(vocab), device)
            runs.append(dict(seed=seed, val=window_bits(model, val_x, val_y), test=window_bits(model, test_x, test_y),
                             curve=[[s, round(b, 4)] for s, b in curve]))
            print(f"{kind:5s} seed {seed}: val {runs[-1]['val']:.4f}  test {runs[-1]['test']:.4f} bits/char "
                  f"({time.time() - t0:.0f} s)", flush=True)
        val_m, val_se = mean_se([r["val"] for r in runs])
        test_m, test_se = mean_se([r["test"] for r in runs])
        models[kind] = {
            "name": NAMES[kind],
            "parameters": sum(p.numel() for p in model.parameters()),
            "config": {k: getattr(config, k) for k in ("kind", "d_embed", "d_hidden", "n_context")},
            "val_bits_per_char": round(val_m, 4), "val_se": round(val_se, 4),
            "test_bits_per_char": round(test_m, 4), "test_se": round(test_se, 4),
            "seeds": [{"seed": r["seed"], "val_bits_per_char": round(r["val"], 4),
                       "test_bits_per_char": round(r["test"], 4), "curve": r["curve"]} for r in runs],
        }

    table = {
        "meta": {
            "command": COMMAND,
            "script": "scripts/ch02_baselines.py",
            "steps": STEPS,
            "seeds": list(args.seeds),
            "split": "load_splits(shakespeare) 80/10/10",
            "eval": EVAL_RULE,
            "eval_windows": {"val": len(val_x), "test": len(test_x), "length": EVAL_LEN},
            "curve": f"bits per character on every {CURVE_STRIDE}th validation window (val_x[::{CURVE_STRIDE}]), every {EVAL_EVERY} steps",
            "training": {"steps": STEPS, "batch": BATCH, "seq_len": SEQ_LEN, "optimizer": "Adam", "lr": LR,
                         "grad_clip": GRAD_CLIP, "eval_every": EVAL_EVERY, "device": device.type},
            "threads": torch.get_num_threads(),
            "torch": torch.__version__,
            "reproducibility": "bit for bit with the same thread count and torch build; "
                               "another thread count can move the 4th decimal (float sums in another order)",
        },
        "description": "Chapter 2 baselines: character LMs on Shakespeare, bits per character "
                       "(mean and standard error over seeds) on all 64-char windows of validation and test",
        "unigram_bits_per_char": round(unigram_bits, 4),
        "models": models,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=args.out.parent, suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        json.dump(table, f, indent=1, ensure_ascii=False)
        f.write("\n")
    os.replace(tmp, args.out)  # atomic: never a half-written file
    print(f"wrote {args.out} in {time.time() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
