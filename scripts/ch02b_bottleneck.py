"""Chapter 2b's bottleneck table: the RNN encoder-decoder without and with attention on reversal.

For each maximum length L in 4, 8 and 12, trains Cho et al. (2014)'s fixed-context GRU
encoder-decoder and Bahdanau et al. (2015)'s attention one (``llmbook.seq2seq_rnn``, the
same encoder, decoder and sizes; attention adds only the score's weights) on reversing
digit strings of length 1..L (``llmbook.toy_seq2seq.DigitTask``), with the same budget:
``STEPS`` Adam updates of 64 strings, lr 3e-3, 50 warm-up steps, gradient clip 1.0, for
seeds 0, 1, 2. Nothing is tuned, so there is no validation step: each run is scored once
on 500 random test strings of length exactly L, minus any string the run trained on
(``drop_seen``; about half of them for L = 4, where training sees many of the 10,000 strings): exact-match accuracy (the whole reversed string and EOS right).
For the attention runs it also records the alignment share: the share of output steps whose
largest attention weight falls on the mirrored source position (the anti-diagonal).
Writes ``data/results/ch02b_bottleneck.json`` with a top-level ``meta`` object (command,
steps, seeds, split, threads, kernel path) and, per length and model, the per-seed
accuracies, mean and standard error. The chapter compares the two models with
``llmbook.stats`` (paired: both models of a seed train on the same batches and are tested on
the same strings).

    ATEN_CPU_CAPABILITY=avx2 OMP_NUM_THREADS=1 python scripts/ch02b_bottleneck.py --out data/results/ch02b_bottleneck.json

The kernel path is pinned because the figures depend on it: torch's AVX2, AVX-512 and
no-SIMD kernels round differently, and a run that is still learning can end a few points
of exact match apart (the notebook's live run shows it). It takes about 9 minutes on one
thread of an idle machine; ``meta.seconds`` records the committed run, made on a busy one.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from pathlib import Path

import torch

from llmbook.seq2seq_rnn import Seq2SeqRNN, Seq2SeqRNNConfig
from llmbook.toy_seq2seq import BOS, EOS, DigitTask, drop_seen, exact_match, make_batch, train_seq2seq, training_sources

COMMAND = "ATEN_CPU_CAPABILITY=avx2 OMP_NUM_THREADS=1 python scripts/ch02b_bottleneck.py --out data/results/ch02b_bottleneck.json"
LENGTHS, SEEDS = (4, 8, 12), (0, 1, 2)
STEPS, BATCH, LR, WARMUP = 400, 64, 3e-3, 50
SIZES = dict(d_embed=16, d_hidden=48, d_attn=48)  # the notebook's live run uses the same sizes
N_TEST, TEST_SEED = 500, 10_000
n_tests: list[int] = []  # test strings left per run after drop_seen
shares: list[float] = []  # alignment share per attention run


def alignment_share(model: Seq2SeqRNN, src: torch.Tensor) -> float:
    """Share of output steps whose largest weight is on the mirrored source position.

    ``src`` holds strings of one length S; output step i should read source position S-1-i.
    """
    _, align = model.greedy_decode(src, BOS, EOS, src.shape[1], return_attention=True)  # (n, S, S)
    mirror = torch.arange(src.shape[1] - 1, -1, -1)
    return (align.argmax(-1) == mirror).float().mean().item()


def run(L: int, attention: bool, seed: int) -> float:
    task = DigitTask("reverse", 1, L)
    torch.manual_seed(seed)
    model = Seq2SeqRNN(Seq2SeqRNNConfig(attention=attention, **SIZES))
    train_seq2seq(model, task, STEPS, batch_size=BATCH, lr=LR, warmup=WARMUP, seed=seed, progress=False)
    # test on strings of the longest length L only (the hardest case; for L = 4 most shorter
    # strings were seen in training), minus those the run trained on
    src, _, tgt = make_batch(DigitTask("reverse", L, L), N_TEST, torch.Generator().manual_seed(TEST_SEED + L))
    src, tgt = drop_seen(src, tgt, training_sources(task, STEPS, BATCH, seed))
    n_tests.append(len(src))
    if attention:
        shares.append(alignment_share(model, src))
    return exact_match(model, src, tgt)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="data/results/ch02b_bottleneck.json")
    args = ap.parse_args()
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    rows = {}
    t0 = time.time()
    for L in LENGTHS:
        for name, att in (("no attention", False), ("attention", True)):
            accs = []
            for s in SEEDS:
                accs.append(run(L, att, s))
                print(f"  L={L} {name} seed {s}: {accs[-1]:.3f} ({time.time() - t0:.0f} s)", flush=True)
            mean = sum(accs) / len(accs)
            se = math.sqrt(sum((a - mean) ** 2 for a in accs) / (len(accs) - 1) / len(accs))
            rows.setdefault(str(L), {})[name] = {"per_seed": accs, "mean": mean, "se": se}
            rows[str(L)][name]["n_test_per_seed"] = n_tests[-len(SEEDS):]
            if att:
                rows[str(L)][name]["alignment_share_per_seed"] = shares[-len(SEEDS):]
            print(f"L={L:2d} {name:12s} exact match {mean:.3f} +- {se:.3f}  {accs}  ({time.time() - t0:.0f} s)", flush=True)
    out = {
        "meta": {
            "command": COMMAND, "steps": STEPS, "seeds": list(SEEDS), "batch": BATCH, "lr": LR,
            "split": "none",
            "data": "fresh random digit strings (DigitTask); test strings unseen in training (drop_seen)",
            "lengths": list(LENGTHS), "sizes": SIZES, "n_test": N_TEST, "test": "length exactly L, unseen in training", "threads": torch.get_num_threads(),
            "torch": torch.__version__, "kernel_path": torch.backends.cpu.get_cpu_capability(),
            "seconds": round(time.time() - t0),
        },
        "results": rows,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    print("wrote", args.out)


if __name__ == "__main__":
    main()
