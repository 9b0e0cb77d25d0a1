"""Chapter 7: MiniLM fully fine-tuned vs frozen MiniLM features + a linear head, three seeds.

    OMP_NUM_THREADS=1 python scripts/bert_finetune_ablation.py --jobs 9   # BERT's recipe, the nine runs at once
    OMP_NUM_THREADS=1 python scripts/bert_finetune_ablation.py            # the same numbers, one run after another (the committed file)
    OMP_NUM_THREADS=1 python scripts/bert_finetune_ablation.py --jobs 3 --epochs 1 --lrs 5e-5   # the older one-epoch recipe
    OMP_NUM_THREADS=1 python scripts/bert_finetune_ablation.py --skip-fine-tune   # the frozen-feature rows only

Data (the notebook's): 2,000 balanced training tweets (``balanced_subset(tweets.train, 1000)``);
the tweets' held-out part is cut into a balanced *validation* set (250 + 250,
``balanced_subset(tweets.val, 250)``) and a disjoint balanced *test* set (250 + 250 of the
rest, ``balanced_subset(rest, 250, seed=1)``), see ``tweet_splits``.

Rows, each over seeds 0, 1, 2:
    * MiniLM inside the book's BERT, every weight fine-tuned from the pooled [CLS]
      (``fine_tune(clf, wp, train, epochs=3, lr=lr, batch_size=16, max_len=32, seed=seed)``,
      ``fine_tune_run``), with BERT's fine-tuning recipe (Devlin et al. 2019, appendix A.3):
      batch 16, 3 epochs (inside BERT's 2 to 4), and the learning rate chosen from BERT's grid
      ``LEARNING_RATES`` = 5e-5, 3e-5, 2e-5 by the mean validation accuracy over the seeds.
      Every (learning rate, seed) run is trained and scored on validation; its weights wait in a
      checkpoint (``--work-dir``), and only the chosen learning rate's runs are scored on test;
    * the frozen MiniLM's pooled [CLS] vectors + a linear layer, and
    * the frozen MiniLM's *mean-pooled* token vectors + a linear layer (the vectors
      sentence-transformers trained all-MiniLM-L6-v2 to produce; the pooler took no part).
      Each probe is full-batch AdamW logistic regression (``llmbook.bert.linear_probe``) on features
      standardised with the training tweets' mean and standard deviation (``standardise``);
      its weight decay is chosen from ``WEIGHT_DECAYS`` on the validation set (mean over the
      seeds), and the file records whether the choice lies inside the grid (``bracketed``). Both kinds of
      vector come from one pass of the frozen encoder (``pooled_features(..., pooling=("cls", "mean"))``).
Decisions (learning rate, weight decay) use validation accuracy only; test accuracy is computed
once per seed, for the chosen setting, and stored with the per-tweet correctness (``test_correct``,
one character per test tweet) so that rows can be compared tweet by tweet (paired). Deterministic
for the seeds on one machine and kernel path (the file records ``cpu_capability``), with or
without ``--jobs``.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "lib"))

from llmbook.bert import (  # noqa: E402
    Bert,
    BertForSequenceClassification,
    balanced_subset,
    classify_correct,
    fine_tune,
    linear_probe,
    pooled_features,
)
from llmbook.data import load_sentiment  # noqa: E402
from llmbook.device import default_device, seed_everything  # noqa: E402
from llmbook.tokenizers.wordpiece import WordPiece  # noqa: E402

OUT = ROOT / "data" / "results" / "ch07_finetune_ablation.json"
COMMAND = "OMP_NUM_THREADS=1 python scripts/bert_finetune_ablation.py"
# The fine-tuning recipe, BERT's (Devlin et al. 2019, appendix A.3): batch 16 or 32, learning rate 5e-5, 3e-5 or
# 2e-5, 2 to 4 epochs, the best setting chosen on the development set. Here: batch 16, 3 epochs, the learning rate
# from BERT's three on validation. (An earlier version of this file used one epoch at 5e-5 with no choice, while
# each probe chose its weight decay from nine values: an unequal tuning budget.) One run of 3 epochs (375 steps)
# costs about 4 to 5 CPU minutes on one thread; nine runs (3 learning rates x 3 seeds) about 40.
EPOCHS, BATCH_SIZE = 3, 16
LEARNING_RATES = (5e-5, 3e-5, 2e-5)
# The probes' weight decays. AdamW's decay is decoupled: each step multiplies the weights by 1 - lr * wd, so with
# the probe's lr of 1e-2 values up to 1 / lr = 100 are meaningful. The grid reaches 30 so that the best value on
# validation lies inside it (a first grid that stopped at 10 saw the mean-pooled probe choose its edge, 10).
WEIGHT_DECAYS = (0.0, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0)


def tweet_splits(n_train_per_class: int = 1000, n_eval_per_class: int = 250):
    """(train, val, test): balanced tweet subsets; val and test are disjoint parts of the held-out tweets."""
    tweets = load_sentiment("tweets_en")
    train = balanced_subset(tweets.train, n_train_per_class)
    val = balanced_subset(tweets.val, n_eval_per_class)
    taken = set(val)
    rest = [x for x in tweets.val if x not in taken]
    test = balanced_subset(rest, n_eval_per_class, seed=1)
    return train, val, test


def standardise(f_train: torch.Tensor, *others: torch.Tensor) -> list[torch.Tensor]:
    """Every feature shifted and scaled to mean 0, standard deviation 1 *on the training rows*.

    The same shift and scale (from ``f_train`` only) is applied to ``others`` (validation,
    test), so nothing about the held-out tweets leaks into the probe. Without it, one weight
    decay means a different penalty for features of different scales.
    """
    mu = f_train.mean(0, keepdim=True)
    sd = f_train.std(0, keepdim=True).clamp_min(1e-6)
    return [(f - mu) / sd for f in (f_train, *others)]


def bits(correct: torch.Tensor) -> str:
    """Per-item correctness as a string of 0s and 1s (compact in the JSON)."""
    return "".join("1" if c else "0" for c in correct.tolist())


def probe_rows(feats: dict, ys: list, seeds, weight_decays=WEIGHT_DECAYS) -> dict:
    """For each kind of frozen features ``feats[name] = (train, val, test)``, standardised with the training
    rows' statistics: the probe's validation accuracy per weight decay and seed, the weight decay with the
    best mean validation accuracy (ties: the smaller), whether that choice lies inside the grid (not its
    largest value; 0, no decay, is the natural lower end), and that probe's validation and test accuracy per
    seed with its per-item test correctness (test computed once, for the chosen decay)."""
    def probe(f_tr, f_eval, y_eval, wd, seed):   # one bool per item of the eval set
        return linear_probe(f_tr, ys[0], f_eval, y_eval, seed=seed, weight_decay=wd, per_item=True).cpu()

    rows = {}
    for name, (f_tr, f_va, f_te) in feats.items():
        f_tr, f_va, f_te = standardise(f_tr, f_va, f_te)
        val_by_wd = {wd: [probe(f_tr, f_va, ys[1], wd, seed) for seed in seeds] for wd in weight_decays}
        by_wd = {repr(wd): [int(c.sum()) / len(c) for c in cs] for wd, cs in val_by_wd.items()}
        best_wd = max(weight_decays, key=lambda wd: (sum(by_wd[repr(wd)]), -wd))
        val_c = val_by_wd[best_wd]
        test_c = [probe(f_tr, f_te, ys[2], best_wd, seed) for seed in seeds]   # the test set, once per seed
        rows[name] = {"val_acc_by_weight_decay": by_wd, "weight_decay": best_wd,
                      "bracketed": best_wd < max(weight_decays),
                      "val_acc": [int(c.sum()) / len(c) for c in val_c],
                      "test_acc": [int(c.sum()) / len(c) for c in test_c],
                      "test_correct": [bits(c) for c in test_c]}
    return rows


def _minilm_classifier(device) -> BertForSequenceClassification:
    mini = Bert.from_pretrained_minilm()
    return BertForSequenceClassification(mini.config, bert=mini).to(device)


def fine_tune_run(seed: int, epochs: int, lr: float, work_dir: str, threads: int = 1, max_len: int = 32) -> dict:
    """MiniLM inside the book's BERT, every weight fine-tuned from the pooled [CLS], for one seed and learning rate.

    Scores the validation tweets only; the fine-tuned weights are saved to ``work_dir`` (``checkpoint(...)``) so that
    the test tweets are scored later, for the learning rate chosen on validation only. Returns the validation
    accuracy, the mean training loss of the last 20 steps, the number of steps and the wall-clock and CPU seconds.
    A run whose result and checkpoint are already in ``work_dir`` is not repeated (an interrupted sweep resumes).
    Loads its own data, so it can run in a separate process (``--jobs``) with the same result as in the main one.
    """
    ckpt = checkpoint(work_dir, seed, epochs, lr)
    done = ckpt.with_suffix(".json")
    if ckpt.exists() and done.exists():
        return json.loads(done.read_text())
    torch.set_num_threads(threads)
    device = default_device()
    t1, c1 = time.time(), time.process_time()
    tw_train, tw_val, _ = tweet_splits()
    wp = WordPiece.minilm()
    seed_everything(seed)
    clf = _minilm_classifier(device)
    losses = fine_tune(clf, wp, tw_train, epochs=epochs, lr=lr, batch_size=BATCH_SIZE, max_len=max_len, seed=seed)
    val_c = classify_correct(clf, wp, tw_val, max_len=max_len)
    torch.save(clf.state_dict(), ckpt)
    r = {"seed": seed, "lr": lr, "epochs": epochs, "val_acc": int(val_c.sum()) / len(val_c),
         "final_train_loss": sum(losses[-20:]) / len(losses[-20:]), "steps": len(losses),
         "seconds": round(time.time() - t1), "cpu_seconds": round(time.process_time() - c1)}
    done.write_text(json.dumps(r))
    return r


def checkpoint(work_dir: str, seed: int, epochs: int, lr: float) -> Path:
    return Path(work_dir) / f"minilm_ft_seed{seed}_ep{epochs}_lr{lr:g}.pt"


def score_test(seed: int, epochs: int, lr: float, work_dir: str, max_len: int = 32) -> torch.Tensor:
    """The test tweets scored once by the checkpoint of one (seed, learning rate) run: one bool per tweet."""
    device = default_device()
    _, _, tw_test = tweet_splits()
    clf = _minilm_classifier(device)
    clf.load_state_dict(torch.load(checkpoint(work_dir, seed, epochs, lr), map_location=device, weights_only=True))
    return classify_correct(clf, WordPiece.minilm(), tw_test, max_len=max_len)


def mean_se(xs: list[float]) -> tuple[float, float]:
    m = sum(xs) / len(xs)
    if len(xs) < 2:
        return m, float("nan")
    return m, math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1) / len(xs))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--epochs", type=int, default=EPOCHS)
    ap.add_argument("--lrs", type=float, nargs="+", default=list(LEARNING_RATES),
                    help="fine-tuning learning rates; the one with the best mean validation accuracy is kept")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--threads", type=int, default=1, help="torch threads per process")
    ap.add_argument("--jobs", type=int, default=1, help="fine-tune this many runs at once, one process each")
    ap.add_argument("--work-dir", default=str(Path(tempfile.gettempdir()) / "llmbook_ch07_finetune"),
                    help="the fine-tuned checkpoints wait here until the learning rate is chosen (resumable)")
    ap.add_argument("--skip-fine-tune", action="store_true", help="only the frozen-feature probes (smoke test)")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    if args.epochs < 1 or not args.lrs or any(lr <= 0 for lr in args.lrs):
        raise SystemExit("--epochs must be >= 1 and --lrs positive")
    torch.set_num_threads(args.threads)
    device = default_device()  # CUDA > MPS > CPU; LLMBOOK_DEVICE overrides
    t0 = time.time()
    tw_train, tw_val, tw_test = tweet_splits()
    wp = WordPiece.minilm()
    max_len = 32
    ys = [torch.tensor([y for _, y in d], device=device) for d in (tw_train, tw_val, tw_test)]
    runs = [(lr, seed) for lr in args.lrs for seed in args.seeds]
    if not args.skip_fine_tune:
        Path(args.work_dir).mkdir(parents=True, exist_ok=True)

    # The fine-tuning runs start first in worker processes (--jobs), so the probes below overlap them.
    pool = futures = None
    if not args.skip_fine_tune and args.jobs > 1:
        pool = ProcessPoolExecutor(max_workers=args.jobs, mp_context=multiprocessing.get_context("spawn"))
        futures = [pool.submit(fine_tune_run, seed, args.epochs, lr, args.work_dir, args.threads) for lr, seed in runs]

    frozen = Bert.from_pretrained_minilm().to(device)
    feats = {name: [] for name in ("cls", "mean")}
    for d in (tw_train, tw_val, tw_test):
        cls, mean = pooled_features(frozen, wp, d, max_len, pooling=("cls", "mean"))
        feats["cls"].append(cls)
        feats["mean"].append(mean)
    del frozen
    probes = probe_rows(feats, ys, args.seeds)
    for name, row in probes.items():
        print(f"frozen MiniLM ({name}) + linear head: weight decay {row['weight_decay']:g} (by validation), "
              f"val {mean_se(row['val_acc'])[0]:.3f}, test {mean_se(row['test_acc'])[0]:.3f} ({time.time() - t0:.0f} s)",
              flush=True)

    ft = {"val_acc_by_lr": {}, "lr": None, "bracketed": None, "val_acc": [], "test_acc": [], "test_correct": [],
          "final_train_loss": [], "steps": [], "seconds": [], "cpu_seconds": [], "runs": []}
    if not args.skip_fine_tune:
        if pool is not None:
            results = []
            for f in futures:
                results.append(f.result())
                r = results[-1]
                print(f"MiniLM fine-tuned, lr {r['lr']:g}, seed {r['seed']}: val {r['val_acc']:.3f} ({r['steps']} steps, "
                      f"{r['cpu_seconds']} CPU s, {r['seconds']} s; {time.time() - t0:.0f} s in all)", flush=True)
            pool.shutdown()
        else:
            results = [fine_tune_run(seed, args.epochs, lr, args.work_dir, args.threads) for lr, seed in runs]
        ft["runs"] = results
        ft["val_acc_by_lr"] = {repr(lr): [r["val_acc"] for r in results if r["lr"] == lr] for lr in args.lrs}
        # the learning rate with the best mean validation accuracy (ties: the larger, BERT's default 5e-5 first)
        best_lr = max(args.lrs, key=lambda lr: (sum(ft["val_acc_by_lr"][repr(lr)]), lr))
        ft["lr"] = best_lr
        # inside the grid: neither its smallest nor its largest value (with a single value: not bracketed)
        ft["bracketed"] = min(args.lrs) < best_lr < max(args.lrs)
        for seed in args.seeds:
            r = next(r for r in results if r["lr"] == best_lr and r["seed"] == seed)
            test_c = score_test(seed, args.epochs, best_lr, args.work_dir, max_len)    # the test tweets, once
            for k in ("val_acc", "final_train_loss", "steps", "seconds", "cpu_seconds"):
                ft[k].append(r[k])
            ft["test_acc"].append(int(test_c.sum()) / len(test_c))
            ft["test_correct"].append(bits(test_c))
            print(f"MiniLM fully fine-tuned, lr {best_lr:g} (by validation), seed {seed}: val {r['val_acc']:.3f}, "
                  f"test {ft['test_acc'][-1]:.3f}", flush=True)

    rows = {"MiniLM, fine-tuned": ft, "MiniLM frozen [CLS] + linear head": probes["cls"],
            "MiniLM frozen mean-pooled + linear head": probes["mean"]}
    summary = {}
    for name, row in rows.items():
        if row["test_acc"]:
            (vm, vs), (tm, ts) = mean_se(row["val_acc"]), mean_se(row["test_acc"])
            summary[name] = {"val_mean": vm, "val_se": vs, "test_mean": tm, "test_se": ts}
            print(f"{name:42s} val {vm:.3f} +- {vs:.3f}, test {tm:.3f} +- {ts:.3f}")
    result = {
        "meta": {"command": " ".join([COMMAND] + sys.argv[1:]),
                 "steps": f"{args.epochs} epochs of batch {BATCH_SIZE}", "seeds": args.seeds,
                 "split": "load_sentiment(tweets_en): balanced 1000+1000 train; its held-out part cut into "
                          "balanced 250+250 validation and a disjoint 250+250 test (tweet_splits)",
                 "decisions": "fine-tuning learning rate and probe weight decay by mean validation accuracy over the "
                              "seeds; test computed once per seed, for the chosen setting"},
        "n_train": len(tw_train), "n_val": len(tw_val), "n_test": len(tw_test), "epochs": args.epochs,
        "learning_rates": list(args.lrs), "lr": ft["lr"],
        "batch_size": BATCH_SIZE, "max_len": max_len, "seeds": args.seeds, "weight_decays": list(WEIGHT_DECAYS),
        "rows": rows, "summary": summary, "device": str(device), "torch": torch.__version__,
        "cpu_capability": torch.backends.cpu.get_cpu_capability(), "jobs": args.jobs,
        "seconds": round(time.time() - t0), "command": COMMAND,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=args.out.parent, prefix=args.out.name + ".")
    with os.fdopen(fd, "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")
    os.chmod(tmp, 0o644)
    os.replace(tmp, args.out)
    print(f"wrote {args.out} in {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
