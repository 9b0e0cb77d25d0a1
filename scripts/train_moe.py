"""Dense GPT vs mixture-of-experts GPT at equal active parameters, on Shakespeare characters.

Trains chapter 6's baby GPT (4 layers, 128 wide, feed-forward width 512) and MoE
versions of it whose tokens each use the same feed-forward width, with the same data,
schedule, seed and loop (``llmbook.train``), then measures every model's validation
loss on 100 fixed batches and its expert usage per layer, and writes a small JSON
file that chapter 8 plots:

    OMP_NUM_THREADS=1 python scripts/train_moe.py --steps 2000 --out data/results/ch08_moe.json

(about 22 minutes on one CPU core: three models, three seeds, about 2.5 minutes a run).
Data: ``load_splits("shakespeare")`` (every play cut 80/10/10). Curves and every comparison
use the validation part; the test part is measured once per run at the end and reported
alongside (never used for a decision).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "lib"))  # run from a checkout without installing

from llmbook.charvocab import CharVocab  # noqa: E402
from llmbook.data import load_splits  # noqa: E402
from llmbook.device import default_device, seed_everything  # noqa: E402
from llmbook.gpt import GPT, GPTConfig  # noqa: E402
from llmbook.moe import MoEGPT, count_parameters  # noqa: E402
from llmbook.train import TrainConfig, estimate_loss, random_windows, train  # noqa: E402

# name -> (n_experts, k, expert_d_ff, normalize_gates); None is the dense baseline.
# Active feed-forward width per token: 512 in all three.
MODELS = {
    "dense": None,
    "moe_8x256_top2": (8, 2, 256, True),
    "moe_4x512_top1": (4, 1, 512, False),  # Switch Transformer: one expert, gate = its raw probability
}


def build(name: str, config: GPTConfig, aux_loss_weight: float) -> GPT:
    spec = MODELS[name]
    if spec is None:
        return GPT(config)
    n_experts, k, d_ff, normalize = spec
    return MoEGPT(config, n_experts, k, expert_d_ff=d_ff, aux_loss_weight=aux_loss_weight, normalize_gates=normalize)


@torch.no_grad()
def expert_usage(model: MoEGPT, get_batch, n_batches: int, seed: int = 0) -> list[list[int]]:
    """Tokens routed to each expert of each MoE layer over ``n_batches`` fixed validation batches."""
    model.eval()
    g = torch.Generator().manual_seed(seed)
    total = None
    for _ in range(n_batches):
        x, _ = get_batch("val", g)
        model(x)
        counts = model.expert_counts()
        total = counts if total is None else total + counts
    return total.tolist()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--batch-size", type=int, default=12)
    p.add_argument("--lr", type=float, default=1.5e-3)
    p.add_argument("--min-lr", type=float, default=1.5e-4)
    p.add_argument("--warmup", type=int, default=100)
    p.add_argument("--aux-loss-weight", type=float, default=0.01)
    p.add_argument("--eval-interval", type=int, default=250)
    p.add_argument("--final-eval-batches", type=int, default=100)
    p.add_argument("--seeds", type=int, nargs="+", default=[1337, 1338, 1339], help="one run per seed and model")
    p.add_argument("--models", nargs="+", choices=sorted(MODELS), default=list(MODELS))
    p.add_argument("--out", default=None, help="JSON file for the results")
    args = p.parse_args(argv)

    splits = load_splits("shakespeare")
    vocab = CharVocab.from_text(splits.train + splits.val + splits.test)  # every character has an id
    train_ids = torch.tensor(vocab.encode(splits.train))
    val_ids = torch.tensor(vocab.encode(splits.val))
    test_ids = torch.tensor(vocab.encode(splits.test))
    config = GPTConfig.baby(len(vocab))
    device = default_device()  # CUDA > MPS > CPU; LLMBOOK_DEVICE overrides
    get_batch = random_windows(train_ids, val_ids, config.block_size, args.batch_size, device)
    get_test = random_windows(train_ids, test_ids, config.block_size, args.batch_size, device)  # its "val" is test
    command = "OMP_NUM_THREADS=1 python scripts/train_moe.py " + " ".join(argv if argv is not None else sys.argv[1:])
    results = {"meta": {"command": command, "steps": args.steps, "seeds": args.seeds,
                        "split": "load_splits(shakespeare) 80/10/10",
                        "decisions": "validation part; test part measured once per run, reported only"},
               "config": {k: v for k, v in vars(args).items() if k not in ("out", "models")},
               "device": str(device), "torch": torch.__version__, "threads": torch.get_num_threads(), "models": {}}
    for name in args.models:
        row = {"spec": MODELS[name], "val_loss_by_seed": {}, "test_loss_by_seed": {}}
        for i, seed in enumerate(args.seeds):
            seed_everything(seed)
            model = build(name, config, args.aux_loss_weight).to(device)
            cfg = TrainConfig.for_device(device, max_steps=args.steps, lr=args.lr, min_lr=args.min_lr, warmup_steps=args.warmup,
                              eval_interval=args.eval_interval, eval_batches=20, seed=seed,  # device: the model's
                              progress=False)
            t0 = time.perf_counter()
            run = train(model, get_batch, cfg, callback=lambda r: print(name, seed, r.evals[-1], flush=True))
            seconds = time.perf_counter() - t0
            val = estimate_loss(model, get_batch, "val", n_batches=args.final_eval_batches, seed=0)
            row["val_loss_by_seed"][str(seed)] = val
            row["test_loss_by_seed"][str(seed)] = estimate_loss(model, get_test, "val",
                                                                n_batches=args.final_eval_batches, seed=0)
            if i == 0:  # curves, usage and timing of the first seed
                row.update(parameters=count_parameters(model), evals=run.evals, seconds=round(seconds, 1))
                if isinstance(model, MoEGPT):
                    row["expert_usage"] = expert_usage(model, get_batch, args.final_eval_batches)
            print(f"{name} seed {seed}: val {val:.4f} nats/char, {row['parameters']}, {seconds:.0f} s", flush=True)
        row["val_loss"] = sum(row["val_loss_by_seed"].values()) / len(args.seeds)
        row["test_loss"] = sum(row["test_loss_by_seed"].values()) / len(args.seeds)
        results["models"][name] = row
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=out.parent, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump(results, f, indent=1)
        os.chmod(tmp, 0o644)  # mkstemp makes it private; results are for everyone to read
        os.replace(tmp, out)  # atomic: never a half-written file
    return 0


if __name__ == "__main__":
    sys.exit(main())
