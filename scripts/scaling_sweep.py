"""Train several sizes of the chapter-6 GPT for the same number of tokens and record the losses.

Character-level Shakespeare (``llmbook.data.load_splits``: every play cut 80/10/10 into
train / validation / test), the chapter-6 model (``llmbook.gpt``) and training loop
(``llmbook.train``); every size sees the same batches in the same order and the same
token budget. Each size is trained at three learning rates (``--lr`` times each of
``--lr-multipliers``, default 0.5, 1, 2); the one with the lowest *validation* loss is
kept for that size, and only that model is evaluated once on the *test* part. The
power law is fitted to the best validation loss per size. The result is a small JSON
file that chapter 8 fits a power law to (``llmbook.scaling.fit_power_law``):

    # the committed result (about 20 minutes per learning rate on one idle CPU thread)
    OMP_NUM_THREADS=1 python scripts/scaling_sweep.py --out data/results/ch08_scaling.json

The file is rewritten after every size (``"complete": false`` until the last), so an
interrupted sweep leaves the sizes it finished.

    # a smoke run (two tiny sizes, a few updates)
    python scripts/scaling_sweep.py --quick --out /tmp/scaling_quick.json

On a GPU (``llmbook.device.default_device``) the default sweep adds larger sizes and
trains ten times as many tokens.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "lib"))  # run from a checkout without installing

from llmbook.charvocab import CharVocab  # noqa: E402
from llmbook.data import load_splits  # noqa: E402
from llmbook.device import default_device, seed_everything  # noqa: E402
from llmbook.gpt import GPT, GPTConfig  # noqa: E402
from llmbook.scaling import fit_power_law  # noqa: E402
from llmbook.train import TrainConfig, estimate_loss, random_windows, train  # noqa: E402

# (n_layer, d_model); heads of width 16, feed-forward 4 d_model.
CPU_SIZES = [(2, 16), (2, 32), (3, 48), (4, 64), (4, 96), (4, 128), (6, 128)]
GPU_SIZES = CPU_SIZES + [(6, 192), (8, 256), (8, 384), (12, 512)]
QUICK_SIZES = [(1, 16), (2, 32)]
SCHEMA_KEYS = ("name", "n_layer", "d_model", "n_head", "params", "non_embedding_params", "tokens", "steps",
               "val_loss", "train_loss", "seconds", "config", "lr", "val_loss_by_lr", "test_loss")
LR_MULTIPLIERS = (0.5, 1.0, 2.0)


def model_config(n_layer: int, d_model: int, vocab_size: int, block_size: int) -> GPTConfig:
    """A chapter-6 GPT of the given depth and width (heads of 16, feed-forward 4x)."""
    for name, value in (("n_layer", n_layer), ("d_model", d_model)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    if d_model % 16:
        raise ValueError(f"d_model must be a multiple of 16 (heads are 16 wide), got {d_model}")
    return GPTConfig.baby(vocab_size, n_layer=n_layer, n_head=d_model // 16, d_model=d_model, d_ff=4 * d_model,
                          block_size=block_size)


def _write_json_atomic(path: Path, obj: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(obj, f, indent=1)
            f.write("\n")
        os.chmod(tmp, 0o644)  # mkstemp makes the file private; a result table is for everyone
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def run_sweep(sizes: list[tuple[int, int]], steps: int, batch_size: int = 32, block_size: int = 64,
              lr: float = 2e-3, eval_batches: int = 50, device: str | torch.device | None = None,
              data_chars: int | None = None, seed: int = 0, out: str | os.PathLike | None = None,
              progress: bool = False, log=print, lr_multipliers=LR_MULTIPLIERS, command: str | None = None) -> dict:
    """Train GPTs per (n_layer, d_model) in ``sizes`` for ``steps`` updates of ``batch_size`` x ``block_size``
    tokens, one per learning rate ``lr * m`` for ``m`` in ``lr_multipliers``; keep the lowest validation
    loss per size, evaluate that model once on test; return (and write to ``out`` if given) a dict."""
    if not sizes:
        raise ValueError("sizes must list at least one (n_layer, d_model) pair")
    for name, value in (("steps", steps), ("batch_size", batch_size), ("block_size", block_size),
                        ("eval_batches", eval_batches)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    if not lr > 0:
        raise ValueError(f"lr must be > 0, got {lr}")
    if not lr_multipliers or any(not m > 0 for m in lr_multipliers):
        raise ValueError(f"lr_multipliers must be positive numbers, got {lr_multipliers!r}")
    device = torch.device(device) if device is not None else default_device()
    splits = load_splits("shakespeare")
    vocab = CharVocab.from_text(splits.train + splits.val + splits.test)  # so no part has unknown characters
    parts = [splits.train, splits.val, splits.test]
    if data_chars:
        parts = [t[:data_chars] for t in parts]
    train_ids, val_ids, test_ids = (torch.tensor(vocab.encode(t), dtype=torch.long) for t in parts)
    get_batch = random_windows(train_ids, val_ids, block_size, batch_size, device)
    get_test = random_windows(train_ids, test_ids, block_size, batch_size, device)  # its "val" is the test part
    out_obj = {
        "meta": {"command": command or "OMP_NUM_THREADS=1 python scripts/scaling_sweep.py", "steps": steps,
                 "seed": seed, "split": "load_splits(shakespeare) 80/10/10",
                 "decisions": "learning rate per size by validation loss; the fit uses validation loss; "
                              "test loss measured once, for the chosen learning rate only"},
        "description": "chapter-6 GPTs of several sizes, character-level Shakespeare, equal token budget, "
                       "best of three learning rates per size (scripts/scaling_sweep.py)",
        "corpus": "shakespeare (llmbook.data.load_splits), train/validation/test 80/10/10 per play"
                  + (f", first {data_chars} characters of each part" if data_chars else ""),
        "vocab_size": len(vocab),
        "block_size": block_size, "batch_size": batch_size, "steps": steps, "lr": lr,
        "lr_multipliers": list(lr_multipliers), "seed": seed,
        "eval_tokens": eval_batches * batch_size * block_size,
        "device": str(device), "torch": torch.__version__, "python": platform.python_version(),
        "threads": torch.get_num_threads(), "complete": False,
        "runs": [],
    }
    runs = out_obj["runs"]
    for n_layer, d_model in sizes:
        config = model_config(n_layer, d_model, len(vocab), block_size)
        best = None
        val_by_lr = {}
        for m in lr_multipliers:
            run_lr = lr * m
            seed_everything(seed)
            model = GPT(config).to(device)
            # bf16 and TF32 on CUDA; no compile: many short runs would spend their time compiling.
            cfg = TrainConfig.for_device(device, compile=False, max_steps=steps, lr=run_lr, min_lr=run_lr / 10, warmup_steps=max(1, steps // 20),
                              eval_interval=steps, eval_batches=eval_batches, seed=seed,  # device: the model's
                              progress=progress)
            result = train(model, get_batch, cfg)
            last = result.evals[-1]
            val_by_lr[repr(run_lr)] = round(last["val"], 5)
            log(f"  L{n_layer}-d{d_model} lr {run_lr:g}: val {last['val']:.4f}, {result.seconds:.0f} s")
            if best is None or last["val"] < best[1]["val"]:
                best = (run_lr, last, result, {k: v.detach().clone() for k, v in model.state_dict().items()})
        run_lr, last, result, state = best
        model = GPT(config).to(device)
        model.load_state_dict(state)
        test = estimate_loss(model, get_test, "val", n_batches=eval_batches, seed=0)
        run = {"name": f"L{n_layer}-d{d_model}", "n_layer": n_layer, "d_model": d_model, "n_head": config.n_head,
               "params": model.num_parameters(), "non_embedding_params": model.num_parameters(non_embedding=True),
               "tokens": result.tokens, "steps": result.step, "lr": run_lr, "val_loss_by_lr": val_by_lr,
               "val_loss": round(last["val"], 5), "train_loss": round(last["train"], 5),
               "test_loss": round(test, 5), "seconds": round(result.seconds, 2), "config": asdict(config)}
        runs.append(run)
        log(f"{run['name']:>9s}: {run['non_embedding_params']:>9,d} non-embedding params, best lr {run_lr:g}, "
            f"val {run['val_loss']:.4f}, test {run['test_loss']:.4f} nats/char")
        out_obj.pop("fit", None)
        if len({r["non_embedding_params"] for r in runs}) >= 2:
            a, alpha = fit_power_law([r["non_embedding_params"] for r in runs], [r["val_loss"] for r in runs])
            out_obj["fit"] = {"law": "val_loss = a * non_embedding_params ** -alpha (best lr per size)",
                              "a": round(a, 5), "alpha": round(alpha, 5)}
            log(f"fit: L(N) = {a:.3f} N^-{alpha:.4f}")
        out_obj["complete"] = len(runs) == len(sizes)
        if out is not None:
            _write_json_atomic(Path(out), out_obj)
    return out_obj


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="two tiny sizes, 20 updates, 200k characters (smoke test)")
    p.add_argument("--steps", type=int, default=None, help="updates per size (default 2000 on CPU, 10000 on GPU)")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--block-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=2e-3, help="the middle learning rate")
    p.add_argument("--lr-multipliers", type=float, nargs="+", default=list(LR_MULTIPLIERS),
                   help="learning rates tried per size, as multiples of --lr (best by validation is kept)")
    p.add_argument("--sizes", nargs="+", default=None,
                   help="sizes as LAYERSxWIDTH (e.g. 2x16 4x64); default: the CPU (or GPU) list")
    p.add_argument("--eval-batches", type=int, default=50)
    p.add_argument("--device", default=None, help="default: llmbook.device.default_device()")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=str(ROOT / "data" / "results" / "ch08_scaling.json"))
    p.add_argument("--progress", action="store_true", help="show a progress bar per size")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    device = torch.device(args.device) if args.device else default_device()
    on_gpu = device.type == "cuda"
    if on_gpu:
        torch.backends.cuda.matmul.allow_tf32 = False  # keep float32 numbers comparable with the CPU sweep
    if args.quick:
        sizes, steps, data_chars, eval_batches = QUICK_SIZES, args.steps or 20, 200_000, 2
    else:
        sizes, data_chars, eval_batches = (GPU_SIZES if on_gpu else CPU_SIZES), None, args.eval_batches
        steps = args.steps or (10_000 if on_gpu else 2000)
    if args.sizes:
        try:
            sizes = [tuple(int(v) for v in s.lower().split("x")) for s in args.sizes]
        except ValueError:
            raise SystemExit(f"--sizes: expected LAYERSxWIDTH such as 4x64, got {args.sizes}") from None
    command = "OMP_NUM_THREADS=1 python scripts/scaling_sweep.py " + " ".join(argv if argv is not None else sys.argv[1:])
    start = time.perf_counter()
    run_sweep(sizes, steps, args.batch_size, args.block_size, args.lr, eval_batches, device, data_chars,
              args.seed, args.out, args.progress, lr_multipliers=tuple(args.lr_multipliers), command=command.strip())
    print(f"wrote {args.out} in {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
