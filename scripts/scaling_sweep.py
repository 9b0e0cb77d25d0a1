"""Train several sizes of the chapter-6 GPT for the same number of tokens and record the losses.

Character-level Shakespeare (``llmbook.data.load_splits``: every play cut 80/10/10 into
train / validation / test), the chapter-6 model (``llmbook.gpt``) and training loop
(``llmbook.train``); every size sees the same batches in the same order and the same
token budget. Each size is trained at several learning rates (``--lr`` times each of
``--lr-multipliers``, default 0.5, 1, 2); the one with the lowest *validation* loss is
kept for that size, and only that model is evaluated on the *test* part. The power law
is fitted to the best validation loss per size. The result is a small JSON file that
chapter 8 fits a power law to (``llmbook.scaling.fit_power_law``):

    # the three-rate grid (about 20 minutes per learning rate on one idle CPU thread)
    OMP_NUM_THREADS=1 python scripts/scaling_sweep.py --out data/results/ch08_scaling.json

A best rate at the edge of the grid is not an optimum: ``--bracket K`` keeps trying the
next rate beyond the edge (twice the top rate, or half the bottom one) until the best
rate has a worse one on each side, at most K extra rates per size
(``llmbook.scaling.rate_to_bracket``). ``--resume`` reads the ``--out`` file first and
trains only the rates it lacks (the settings must match), so a grid can be widened
without re-training what it holds:

    # widen the committed grid until every size's best rate is bracketed
    OMP_NUM_THREADS=1 python scripts/scaling_sweep.py --bracket 4 --resume --out data/results/ch08_scaling.json

The file is rewritten after every trained rate (``"complete": false`` until every size
is done), so an interrupted sweep keeps what it finished and ``--resume`` continues it.

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
from dataclasses import asdict, fields
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "lib"))  # run from a checkout without installing

from llmbook.charvocab import CharVocab  # noqa: E402
from llmbook.data import load_splits  # noqa: E402
from llmbook.device import default_device, seed_everything  # noqa: E402
from llmbook.gpt import GPT, GPTConfig  # noqa: E402
from llmbook.scaling import best_rate, fit_power_law, rate_to_bracket  # noqa: E402
from llmbook.train import TrainConfig, estimate_loss, random_windows, train  # noqa: E402

# (n_layer, d_model); heads of width 16, feed-forward 4 d_model.
CPU_SIZES = [(2, 16), (2, 32), (3, 48), (4, 64), (4, 96), (4, 128), (6, 128)]
GPU_SIZES = CPU_SIZES + [(6, 192), (8, 256), (8, 384), (12, 512)]
QUICK_SIZES = [(1, 16), (2, 32)]
SCHEMA_KEYS = ("name", "n_layer", "d_model", "n_head", "params", "non_embedding_params", "tokens", "steps",
               "val_loss", "train_loss", "seconds", "config", "lr", "val_loss_by_lr", "test_loss", "bracketed")
# Settings that a resumed sweep must share with the file it extends.
RESUME_KEYS = ("vocab_size", "block_size", "batch_size", "steps", "lr", "seed", "eval_tokens", "corpus", "device")
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


def _check_resume(resume: dict, expected: dict) -> None:
    for key in RESUME_KEYS:
        if resume.get(key) != expected[key]:
            raise ValueError(f"resume: the file was made with {key} = {resume.get(key)!r}, "
                             f"this sweep uses {expected[key]!r}; a resumed sweep must use the same settings")


def _cpu_capability(device: torch.device) -> str:
    """The CPU kernel path torch uses (AVX2, AVX512, DEFAULT): the same seeded run differs between them."""
    if device.type != "cpu":
        return device.type
    try:
        return torch.backends.cpu.get_cpu_capability()
    except AttributeError:  # an old torch
        return "unknown"


def rerun_check(result: dict, size: tuple[int, int], device=None, log=print) -> dict:
    """Train one recorded (size, kept rate) of ``result`` again and return both validation losses.

    Run before widening a grid on another machine: the gap says how far the same seeded run
    lands from the recorded one there, which bounds how finely the widened grid can rank rates."""
    rec = next((r for r in result["runs"] if (r["n_layer"], r["d_model"]) == tuple(size)), None)
    if rec is None:
        raise ValueError(f"size: {size} is not in the result")
    again = run_sweep([tuple(size)], result["steps"], result["batch_size"], result["block_size"], result["lr"],
                      result["eval_tokens"] // (result["batch_size"] * result["block_size"]), device,
                      seed=result["seed"], log=log, lr_multipliers=(rec["lr"] / result["lr"],))
    now = again["runs"][0]
    return {"size": rec["name"], "lr": rec["lr"], "val_loss_recorded": rec["val_loss"], "val_loss_now": now["val_loss"],
            "cpu_capability_now": again["cpu_capability"], "torch_now": again["torch"]}


def _same_config(recorded: dict, config: GPTConfig) -> bool:
    """The recorded config equals ``config``; a field added to GPTConfig since the file was made must hold
    its default (the model the file describes is then the same)."""
    now = asdict(config)
    defaults = {f.name: f.default for f in fields(GPTConfig)}
    return all(recorded.get(k, defaults[k]) == v for k, v in now.items()) and set(recorded) <= set(now)


def run_sweep(sizes: list[tuple[int, int]], steps: int, batch_size: int = 32, block_size: int = 64,
              lr: float = 2e-3, eval_batches: int = 50, device: str | torch.device | None = None,
              data_chars: int | None = None, seed: int = 0, out: str | os.PathLike | None = None,
              progress: bool = False, log=print, lr_multipliers=LR_MULTIPLIERS, command: str | None = None,
              bracket: int = 0, resume: dict | None = None) -> dict:
    """Train GPTs per (n_layer, d_model) in ``sizes`` for ``steps`` updates of ``batch_size`` x ``block_size``
    tokens, one per learning rate ``lr * m`` for ``m`` in ``lr_multipliers``; keep the lowest validation
    loss per size, evaluate that model once on test; return (and write to ``out`` if given) a dict.

    ``bracket``: at most this many extra rates per size, each the next one beyond the edge of the
    grid (``llmbook.scaling.rate_to_bracket``), until the best rate is inside the grid.
    ``resume``: a result of an earlier call with the same settings; the rates it holds are not
    trained again, and a kept rate that stays best keeps its recorded test loss."""
    if not sizes:
        raise ValueError("sizes must list at least one (n_layer, d_model) pair")
    for name, value in (("steps", steps), ("batch_size", batch_size), ("block_size", block_size),
                        ("eval_batches", eval_batches)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    if isinstance(bracket, bool) or not isinstance(bracket, int) or bracket < 0:
        raise ValueError(f"bracket must be an int >= 0, got {bracket!r}")
    if not lr > 0:
        raise ValueError(f"lr must be > 0, got {lr}")
    if not lr_multipliers or any(not m > 0 for m in lr_multipliers):
        raise ValueError(f"lr_multipliers must be positive numbers, got {lr_multipliers!r}")
    if resume is not None and not isinstance(resume, dict):
        raise ValueError(f"resume must be a result dict of an earlier sweep, got {type(resume).__name__}")
    device = torch.device(device) if device is not None else default_device()
    splits = load_splits("shakespeare")
    vocab = CharVocab.from_text(splits.train + splits.val + splits.test)  # so no part has unknown characters
    parts = [splits.train, splits.val, splits.test]
    if data_chars:
        parts = [t[:data_chars] for t in parts]
    train_ids, val_ids, test_ids = (torch.tensor(vocab.encode(t), dtype=torch.long) for t in parts)
    get_batch = random_windows(train_ids, val_ids, block_size, batch_size, device)
    get_test = random_windows(train_ids, test_ids, block_size, batch_size, device)  # its "val" is the test part
    command = command or "OMP_NUM_THREADS=1 python scripts/scaling_sweep.py"
    out_obj = {
        "meta": {"command": command, "steps": steps,
                 "seed": seed, "split": "load_splits(shakespeare) 80/10/10",
                 "decisions": "learning rate per size by validation loss; the fit uses validation loss; "
                              "test loss measured once, for the chosen learning rate only"},
        "description": "chapter-6 GPTs of several sizes, character-level Shakespeare, equal token budget, "
                       "best of several learning rates per size (scripts/scaling_sweep.py)",
        "corpus": "shakespeare (llmbook.data.load_splits), train/validation/test 80/10/10 per play"
                  + (f", first {data_chars} characters of each part" if data_chars else ""),
        "vocab_size": len(vocab),
        "block_size": block_size, "batch_size": batch_size, "steps": steps, "lr": lr,
        "lr_multipliers": list(lr_multipliers), "bracket": bracket, "seed": seed,
        "eval_tokens": eval_batches * batch_size * block_size,
        "device": str(device), "torch": torch.__version__, "python": platform.python_version(),
        "threads": torch.get_num_threads(), "cpu_capability": _cpu_capability(device), "complete": False,
        "runs": [],
    }
    old_runs = {}
    if resume is not None:
        _check_resume(resume, out_obj)
        old_runs = {(r["n_layer"], r["d_model"]): r for r in resume["runs"]}
        # The file keeps how it was first made; each resumed call adds its command and its own rates.
        out_obj["meta"] = dict(resume["meta"])
        out_obj["meta"]["extended_by"] = list(resume["meta"].get("extended_by", [])) + [command]
        out_obj["lr_multipliers"] = sorted(set(resume.get("lr_multipliers", [])) | set(lr_multipliers))
        out_obj["bracket"] = max(bracket, resume.get("bracket", 0))
        for key in ("torch", "python", "threads", "cpu_capability"):   # of every call that trained something
            before = str(resume.get(key, "not recorded"))
            if before.split("; then ")[-1] != str(out_obj[key]):
                out_obj[key] = f"{before}; then {out_obj[key]}"
            else:
                out_obj[key] = resume[key]
        if "rerun_checks" in resume:
            out_obj["rerun_checks"] = resume["rerun_checks"]
        # Every size of the file stays in it from the start (an interrupted call loses nothing);
        # a size this call works on is replaced by its updated entry.
        out_obj["runs"] = list(old_runs.values())
    runs = out_obj["runs"]

    def save():
        runs.sort(key=lambda r: r["non_embedding_params"])
        done = [r for r in runs if r.get("test_loss") is not None]
        out_obj.pop("fit", None)
        if len({r["non_embedding_params"] for r in done}) >= 2:
            a, alpha = fit_power_law([r["non_embedding_params"] for r in done], [r["val_loss"] for r in done])
            out_obj["fit"] = {"law": "val_loss = a * non_embedding_params ** -alpha (best lr per size)",
                              "a": round(a, 5), "alpha": round(alpha, 5)}
        if out is not None:
            _write_json_atomic(Path(out), out_obj)

    def train_at(config: GPTConfig, run_lr: float):
        seed_everything(seed)
        model = GPT(config).to(device)
        # bf16 and TF32 on CUDA; no compile: many short runs would spend their time compiling.
        cfg = TrainConfig.for_device(device, compile=False, max_steps=steps, lr=run_lr, min_lr=run_lr / 10,
                                     warmup_steps=max(1, steps // 20), eval_interval=steps,
                                     eval_batches=eval_batches, seed=seed,  # device: the model's
                                     progress=progress)
        return model, train(model, get_batch, cfg)

    for n_layer, d_model in sizes:
        config = model_config(n_layer, d_model, len(vocab), block_size)
        old = old_runs.get((n_layer, d_model))
        if old is not None and not _same_config(old["config"], config):
            raise ValueError(f"resume: the recorded config of L{n_layer}-d{d_model} differs from this script's")
        if old is not None:
            run = dict(old, val_loss_by_lr=dict(old["val_loss_by_lr"]), seconds_by_lr=dict(old.get("seconds_by_lr", {})))
        else:
            shape = GPT(config)
            run = {"name": f"L{n_layer}-d{d_model}", "n_layer": n_layer, "d_model": d_model, "n_head": config.n_head,
                   "params": shape.num_parameters(), "non_embedding_params": shape.num_parameters(non_embedding=True),
                   "tokens": steps * batch_size * block_size, "steps": steps, "val_loss_by_lr": {},
                   "seconds_by_lr": {}, "test_loss": None, "config": asdict(config)}
        runs[:] = [r for r in runs if (r["n_layer"], r["d_model"]) != (n_layer, d_model)] + [run]
        best = None                                  # (rate, model, train result) of the best rate trained now
        todo, extra = [lr * m for m in lr_multipliers], 0
        while todo:
            run_lr = todo.pop(0)
            if repr(run_lr) not in run["val_loss_by_lr"]:
                model, result = train_at(config, run_lr)
                val = result.evals[-1]["val"]
                run["val_loss_by_lr"][repr(run_lr)] = round(val, 5)
                run["seconds_by_lr"][repr(run_lr)] = round(result.seconds, 2)
                log(f"  L{n_layer}-d{d_model} lr {run_lr:g}: val {val:.4f}, {result.seconds:.0f} s")
                if best is None or val < best[2].evals[-1]["val"]:
                    best = (run_lr, model, result)
                save()
            if not todo and extra < bracket:
                nxt = rate_to_bracket(run["val_loss_by_lr"])
                if nxt is not None:
                    todo.append(nxt)
                    extra += 1
        kept = best_rate(run["val_loss_by_lr"])
        run["bracketed"] = rate_to_bracket(run["val_loss_by_lr"]) is None
        if old is None or repr(kept) != repr(old["lr"]):     # a new kept rate: measure its model once on test
            if best is None or kept != best[0]:              # recorded by an interrupted call: train it again
                best = (kept, *train_at(config, kept))
            run_lr, model, result = best
            last = result.evals[-1]
            test = estimate_loss(model, get_test, "val", n_batches=eval_batches, seed=0)
            run.update({"tokens": result.tokens, "steps": result.step, "lr": run_lr,
                        "val_loss": round(last["val"], 5), "train_loss": round(last["train"], 5),
                        "test_loss": round(test, 5), "seconds": round(result.seconds, 2)})
        log(f"{run['name']:>9s}: {run['non_embedding_params']:>9,d} non-embedding params, best lr {run['lr']:g}"
            f"{'' if run['bracketed'] else ' (at the edge of the grid)'}, "
            f"val {run['val_loss']:.4f}, test {run['test_loss']:.4f} nats/char")
        save()
        if "fit" in out_obj and len(runs) >= 2:
            log(f"fit: L(N) = {out_obj['fit']['a']:.3f} N^-{out_obj['fit']['alpha']:.4f}")
    out_obj["complete"] = True
    save()
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
    p.add_argument("--bracket", type=int, default=0,
                   help="at most this many extra rates per size beyond the grid's edge, until the best is bracketed")
    p.add_argument("--resume", action="store_true",
                   help="read --out first and train only the rates it lacks (same settings required)")
    p.add_argument("--rerun-check", action="store_true",
                   help="with --resume: first re-train the first size at its recorded rate and record both losses")
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
    env = "".join(f"{k}={os.environ[k]} " for k in ("ATEN_CPU_CAPABILITY",) if k in os.environ)  # the kernel path
    command = env + "OMP_NUM_THREADS=1 python scripts/scaling_sweep.py " + " ".join(argv if argv is not None else sys.argv[1:])
    resume = None
    if args.resume:
        if not Path(args.out).exists():
            raise SystemExit(f"--resume: {args.out} does not exist")
        resume = json.loads(Path(args.out).read_text())
        if not args.sizes:   # by default the sizes of the file, smallest (cheapest) first
            sizes = [(r["n_layer"], r["d_model"]) for r in resume["runs"]]
    start = time.perf_counter()
    if args.rerun_check:
        if resume is None:
            raise SystemExit("--rerun-check needs --resume (it re-trains a size recorded in --out)")
        check = rerun_check(resume, sizes[0], device)
        print(f"rerun check {check['size']} at lr {check['lr']:g}: recorded {check['val_loss_recorded']:.5f}, "
              f"now {check['val_loss_now']:.5f} ({check['cpu_capability_now']})")
        resume["rerun_checks"] = resume.get("rerun_checks", []) + [check]
    run_sweep(sizes, steps, args.batch_size, args.block_size, args.lr, eval_batches, device, data_chars,
              args.seed, args.out, args.progress, lr_multipliers=tuple(args.lr_multipliers), command=command.strip(),
              bracket=args.bracket, resume=resume)
    print(f"wrote {args.out} in {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
