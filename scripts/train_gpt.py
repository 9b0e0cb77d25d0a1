"""Train a character-level GPT on Shakespeare from the command line.

The same model (``llmbook.gpt``) and loop (``llmbook.train``) the notebook uses. Runs on
one CPU, one GPU, or several processes under torchrun with DistributedDataParallel:

    # the checkpoint chapter 6 loads (the command in data/README.md; minutes on one CPU thread)
    OMP_NUM_THREADS=1 torchrun --standalone --nproc_per_node=4 scripts/train_gpt.py --preset baby --steps 1500 \\
        --lr 1.5e-3 --min-lr 1.5e-4 --out data/checkpoints/ch06_baby_shakespeare.safetensors

    # GPT-2 small shapes on a GPU, bf16 autocast and torch.compile
    python scripts/train_gpt.py --preset gpt2_small --block-size 1024 --batch-size 16 \\
        --device cuda --dtype bfloat16 --compile --steps 5000 --out runs/gpt2s.safetensors

    # two processes (gloo on CPUs, nccl on GPUs); --batch-size is the global batch
    torchrun --nproc_per_node=2 scripts/train_gpt.py --preset tiny --steps 5 --batch-size 8

``--batch-size`` is the global batch: each of N processes takes its 1/N slice, so a
run with N processes follows the same trajectory as one process (up to rounding).

Data: ``llmbook.data.load_splits("shakespeare")`` (every play cut 80/10/10 into train /
validation / test). Training draws random windows of the training part; the curves and
any decision use validation; with ``--out`` the finished model is scored once on
validation and once on test with the book's shared rule (every non-overlapping
64-character window: ``window_loss``), and both figures go into
the checkpoint's metadata with the exact command, steps, seed and split.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import sys
from dataclasses import asdict
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "lib"))  # run from a checkout without installing

from llmbook.charvocab import CharVocab  # noqa: E402
from llmbook.data import load_splits, load_text  # noqa: E402
from llmbook.device import default_device  # noqa: E402
from llmbook.gpt import GPT, GPTConfig  # noqa: E402
from llmbook.train import TrainConfig, random_windows, save_checkpoint, train  # noqa: E402

PRESETS = {
    "tiny": lambda v: GPTConfig.baby(v, n_layer=1, n_head=2, d_model=32, d_ff=64, block_size=16),
    "baby": lambda v: GPTConfig.baby(v),
    "gpt1": lambda v: GPTConfig.gpt1(vocab_size=v),
    "gpt2_small": lambda v: GPTConfig.gpt2_small(vocab_size=v),
    "gpt2_medium": lambda v: GPTConfig.gpt2_medium(vocab_size=v),
}


SPLIT = "load_splits(shakespeare) 80/10/10"
EVAL_LEN = 64  # window length of the book's shared evaluation rule (chapter 2 uses the same)


def shakespeare_splits(limit: int | None = None) -> tuple[CharVocab, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Character ids of ``load_splits("shakespeare")``: (vocab, train, validation, test).

    The vocabulary comes from the whole corpus (81 characters), so validation and test have
    no unknown characters. ``limit`` keeps only the first ``limit`` characters of each part (tests).
    """
    splits = load_splits("shakespeare")
    vocab = CharVocab.from_text(load_text("shakespeare"))
    ids = lambda s: torch.tensor(vocab.encode(s[:limit] if limit else s), dtype=torch.long)  # noqa: E731
    return vocab, ids(splits.train), ids(splits.val), ids(splits.test)


def shakespeare_chars(limit: int | None = None) -> tuple[CharVocab, torch.Tensor, torch.Tensor]:
    """(vocab, train ids, validation ids) of ``load_splits("shakespeare")``."""
    vocab, train_ids, val_ids, _ = shakespeare_splits(limit)
    return vocab, train_ids, val_ids


@torch.no_grad()
def window_loss(model: GPT, ids: torch.Tensor, length: int = EVAL_LEN, chunk: int = 512) -> float:
    """Mean loss (nats) over every prediction of all non-overlapping ``length``-id windows of ``ids``.

    The rule chapter 2 uses too: inputs ids[L k : L k + L], targets shifted by one, each window
    read from scratch, every prediction weighted equally.
    """
    n = (len(ids) - 1) // length
    x, y = ids[: n * length].view(n, length), ids[1 : n * length + 1].view(n, length)  # (n, L) each
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    distributed = torch.distributed.is_available() and torch.distributed.is_initialized()
    rank, world = (torch.distributed.get_rank(), torch.distributed.get_world_size()) if distributed else (0, 1)
    total = torch.zeros((), dtype=torch.float64)
    for i in range(rank * chunk, n, world * chunk):  # under torchrun each process takes every world-th chunk
        xb, yb = x[i : i + chunk].to(device), y[i : i + chunk].to(device)
        total += float(model(xb, yb)[1]) * yb.numel()
    if distributed:
        total = total.to(device)
        torch.distributed.all_reduce(total)
    model.train(was_training)
    return float(total) / y.numel()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--preset", choices=sorted(PRESETS), default="baby")
    p.add_argument("--block-size", type=int, default=None, help="context length (default: the preset's)")
    p.add_argument("--batch-size", type=int, default=12, help="global batch (sequences per update)")
    p.add_argument("--steps", type=int, default=2000, help="updates the schedule spans")
    p.add_argument("--stop-after", type=int, default=None, help="stop after this many updates (to test resume)")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--min-lr", type=float, default=1e-4)
    p.add_argument("--warmup", type=int, default=100)
    p.add_argument("--dropout", type=float, default=0.0)
    p.add_argument("--eval-interval", type=int, default=250)
    p.add_argument("--eval-batches", type=int, default=20)
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--device", default=None, help="default: llmbook.device.default_device() (CUDA > MPS > CPU)")
    p.add_argument("--dtype", choices=["float32", "bfloat16"], default=None,
                   help="default: TrainConfig.for_device (bfloat16 on CUDA, float32 elsewhere)")
    p.add_argument("--compile", action=argparse.BooleanOptionalAction, default=None,
                   help="default: TrainConfig.for_device (compiled on CUDA)")
    p.add_argument("--max-seconds", type=float, default=None)
    p.add_argument("--data-chars", type=int, default=None, help="use only the first N characters (tests)")
    p.add_argument("--out", default=None, help="final weights (model only, safetensors)")
    p.add_argument("--ckpt", default=None, help="resumable checkpoint (model + optimizer + RNG)")
    p.add_argument("--ckpt-interval", type=int, default=0, help="also write --ckpt every this many updates")
    p.add_argument("--resume", action="store_true")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--print-losses", action="store_true", help="print the per-update losses as JSON (rank 0)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    distributed = "WORLD_SIZE" in os.environ and int(os.environ["WORLD_SIZE"]) > 1
    device = args.device or str(default_device())
    if distributed:
        import torch.distributed as dist

        backend = "nccl" if device.startswith("cuda") else "gloo"
        dist.init_process_group(backend)
        if device.startswith("cuda"):
            local = int(os.environ.get("LOCAL_RANK", 0))
            torch.cuda.set_device(local)
            device = f"cuda:{local}"
    rank = int(os.environ.get("RANK", 0))
    if device.startswith("cuda"):
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True

    vocab, train_ids, val_ids, test_ids = shakespeare_splits(args.data_chars)
    config = PRESETS[args.preset](len(vocab))
    config.dropout = args.dropout
    if args.block_size:
        config.block_size = args.block_size
    torch.manual_seed(args.seed)
    model = GPT(config).to(device)
    get_batch = random_windows(train_ids, val_ids, config.block_size, args.batch_size, device)
    preset = TrainConfig.for_device(device)  # bf16, TF32 and compile on CUDA; float32 eager elsewhere
    cfg = TrainConfig(max_steps=args.steps, lr=args.lr, min_lr=args.min_lr, warmup_steps=args.warmup,
                      eval_interval=args.eval_interval, eval_batches=args.eval_batches, seed=args.seed,
                      device=device, dtype=args.dtype or preset.dtype, tf32=preset.tf32,
                      compile=preset.compile if args.compile is None else args.compile, progress=not args.no_progress,
                      checkpoint_path=args.ckpt, checkpoint_interval=args.ckpt_interval,
                      stop_after=args.stop_after, max_seconds=args.max_seconds)
    argv_used = sys.argv[1:] if argv is None else list(argv)
    threads = os.environ.get("OMP_NUM_THREADS")
    world = int(os.environ.get("WORLD_SIZE", 1))
    launcher = ["torchrun", "--standalone", f"--nproc_per_node={world}"] if distributed else ["python"]
    command = (f"OMP_NUM_THREADS={threads} " if threads else "") + shlex.join([*launcher, "scripts/train_gpt.py", *argv_used])
    meta = {"gpt_config": asdict(config), "vocab": vocab.to_json(), "corpus": "shakespeare (llmbook.data)",
            "split": SPLIT, "command": command, "steps": args.steps, "seed": args.seed}
    def report(r) -> None:  # one line per evaluation, for logs
        e = r.evals[-1]
        print(f"step {e['step']}: train {e['train']:.4f} val {e['val']:.4f}", flush=True)

    result = train(model, get_batch, cfg, callback=report, resume=args.resume, meta=meta)
    if args.out:  # every process scores its share of the windows
        scores, length = {}, min(EVAL_LEN, config.block_size)
        for name, ids in (("val", val_ids), ("test", test_ids)):  # test: reported once, decides nothing
            loss = window_loss(getattr(model, "module", model), ids, length)
            scores[f"{name}_loss"] = round(loss, 5)
            scores[f"{name}_bits_per_char"] = round(loss / math.log(2), 5)
        scores["eval"] = f"every non-overlapping {length}-character window of the split, each read from scratch"
    if rank == 0:
        if args.out:
            history = {"step": result.step, "evals": result.evals, "tokens": result.tokens, "seconds": result.seconds}
            print(f"final: val {scores['val_loss']:.4f} nats/char ({scores['val_bits_per_char']:.3f} bits), "
                  f"test {scores['test_loss']:.4f} ({scores['test_bits_per_char']:.3f} bits)", flush=True)
            save_checkpoint(args.out, model, meta={**meta, "history": history, "train_config": asdict(cfg), **scores})
        last = result.evals[-1] if result.evals else {}
        print(f"steps={result.step} params={model.num_parameters()} train_loss={last.get('train', float('nan')):.4f} "
              f"val_loss={last.get('val', float('nan')):.4f} seconds={result.seconds:.1f}", flush=True)
        if args.print_losses:
            print("LOSSES " + json.dumps(result.train_losses), flush=True)
    if distributed:
        import torch.distributed as dist

        # Every rank waits here before tearing gloo down: a rank that destroys the group while
        # its peer is still inside a collective or printing can abort the peer at exit
        # ("terminate called without an active exception", seen once on the CI machine).
        dist.barrier()
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
