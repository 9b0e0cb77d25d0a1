"""Train the chapter-4/5 toy Transformers on digit reversal and save small checkpoints.

    OMP_NUM_THREADS=1 python scripts/train_toy_transformer.py --which reverse    # ch04 model (sinusoidal)
    OMP_NUM_THREADS=1 python scripts/train_toy_transformer.py --which learned    # ch05 model (learned positions)
    OMP_NUM_THREADS=1 python scripts/train_toy_transformer.py --which ln-curves  # ch04 Post-LN vs Pre-LN, 3 seeds
    OMP_NUM_THREADS=1 python scripts/train_toy_transformer.py --which ln-curves --init xavier  # the same, Xavier init
    ATEN_CPU_CAPABILITY=avx2 OMP_NUM_THREADS=1 python scripts/train_toy_transformer.py --which label-smoothing --jobs 2  # ch04

Models: ``TransformerConfig.small(vocab_size=13, max_len=32)``, trained on reversal of
digit strings of length 1..8 by ONE call of ``llmbook.toy_seq2seq.train_seq2seq`` (one
Adam, one batch generator, lr 1e-3, a 100-step linear warm-up, then constant) for a fixed
``--steps`` updates; there is no early stopping. Chapter 4's live run uses the same
function and learning rate for 100 updates with a 50-step warm-up.


Held-out data is truly held out: ``training_sources`` replays the run's generator, and
every validation or test string that the run trains on is dropped (``drop_seen``).
- validation: up to 1,000 unseen strings drawn like the training data (seed 1234);
  exact match on it is recorded every 250 updates (the curve; it decides nothing);
- test: per length 1..8, up to 200 strings seen neither in training nor in validation
  (seed 2024), reported once at the end, per length (short lengths have few or no
  unseen strings: there are only 10^L of them and training draws ~16k per length).
Checkpoints are float32 safetensors (~1 MB), written atomically under data/checkpoints/,
with the command, steps, seed, curve and test figures in their metadata.

The ``ln-curves`` run trains 6+6-layer Post-LN and Pre-LN models with and without
warm-up, for seeds 0, 1, 2, and writes their loss curves to data/results/ch04_ln_curves.json
(the library's initialisation) or, with ``--init xavier``, to
data/results/ch04_ln_curves_xavier.json (every weight matrix re-drawn by
``llmbook.transformer.xavier_init`` right after the seeded model is built).
The ``label-smoothing`` run trains chapter 4's model (the ``reverse`` recipe) for
``--ls-steps`` updates (default 500) with label smoothing 0 and 0.1 (Vaswani et al. 2017,
section 5.4), seeds 0, 1, 2 (the two settings of a seed share the initialisation and the
batches), and writes to data/results/ch04_label_smoothing.json, per run: validation exact
match and validation cross-entropy (plain, per target token, teacher-forced; the
smoothed loss is what training minimises) on the unseen validation strings, and the
pooled test exact match on the unseen test strings.
Deterministic on the CPU given the seeds.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time

import torch
from safetensors.torch import save_file

from llmbook.device import default_device, seed_everything
from llmbook.toy_seq2seq import (VOCAB_SIZE, DigitTask, drop_seen, exact_match, make_batch, train_seq2seq,
                                 training_sources)
from llmbook.transformer import Transformer, TransformerConfig, xavier_init

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TASK = DigitTask("reverse", 1, 8)
BATCH, LR, WARMUP, EVAL_EVERY = 64, 1e-3, 100, 250
VAL_SEED, TEST_SEED, N_VAL, N_TEST_PER_LENGTH = 1234, 2024, 1000, 200
LN_SEEDS, LN_LR = (0, 1, 2), 2e-3
LS_SEEDS, LS_EPS = (0, 1, 2), (0.0, 0.1)


def toy_config(positional: str) -> TransformerConfig:
    return TransformerConfig.small(vocab_size=VOCAB_SIZE, max_len=32, positional=positional)


def ln_config(norm_first: bool) -> TransformerConfig:
    return TransformerConfig.small(vocab_size=VOCAB_SIZE, max_len=32, d_model=32, d_ff=64, n_heads=2,
                                   n_encoder_layers=6, n_decoder_layers=6, norm_first=norm_first)


def command_line() -> str:
    """The command as data/README.md writes it (``OMP_NUM_THREADS=1 python scripts/...``)."""
    env = "".join(f"{k}={os.environ[k]} " for k in ("ATEN_CPU_CAPABILITY", "OMP_NUM_THREADS") if k in os.environ)
    return env + shlex.join(["python", "scripts/train_toy_transformer.py", *sys.argv[1:]])


def save_atomic(tensors: dict, path: str, metadata: dict) -> None:
    tmp = path + ".tmp"
    save_file({k: v.detach().cpu().contiguous() for k, v in tensors.items()}, tmp,
              metadata={k: v if isinstance(v, str) else json.dumps(v) for k, v in metadata.items()})
    os.replace(tmp, path)


def heldout_sets(seen: set[str]) -> tuple[tuple[torch.Tensor, torch.Tensor], dict[int, tuple[torch.Tensor, torch.Tensor]]]:
    """(validation, {length: test}) with every training string removed, and test also disjoint from validation."""
    src, _, tgt = make_batch(TASK, 4 * N_VAL, torch.Generator().manual_seed(VAL_SEED))
    v_src, v_tgt = drop_seen(src, tgt, seen)
    val = (v_src[:N_VAL], v_tgt[:N_VAL])
    val_strings = {DigitTask.to_text(r) for r in val[0].tolist()}
    test = {}
    for length in range(TASK.min_len, TASK.max_len + 1):
        g = torch.Generator().manual_seed(TEST_SEED + length)
        src, _, tgt = make_batch(DigitTask(TASK.kind, length, length), 4 * N_TEST_PER_LENGTH, g)
        t_src, t_tgt = drop_seen(src, tgt, seen | val_strings)
        test[length] = (t_src[:N_TEST_PER_LENGTH], t_tgt[:N_TEST_PER_LENGTH])
    return val, test


def train_toy(positional: str, out: str, steps: int, seed: int, device: torch.device) -> None:
    seen = training_sources(TASK, steps, BATCH, seed)  # exactly the strings the run below trains on
    (v_src, v_tgt), test = heldout_sets(seen)
    seed_everything(seed)
    model = Transformer(toy_config(positional)).to(device)
    curve, t0 = [], time.time()

    def evaluate(step: int) -> None:
        model.eval()
        em = exact_match(model, v_src.to(device), v_tgt.to(device))
        model.train()
        curve.append([step, round(em, 4)])
        print(f"{positional}: step {step}, validation exact match {em:.3f} ({len(v_src)} unseen strings), "
              f"{time.time() - t0:.0f}s", flush=True)

    # ONE call: one Adam and one batch generator for the whole run.
    losses = train_seq2seq(model, TASK, steps, batch_size=BATCH, lr=LR, warmup=WARMUP, seed=seed, progress=False,
                           callback=evaluate, callback_every=EVAL_EVERY)
    model.eval()
    per_length = {}
    for length, (s, t) in test.items():
        per_length[length] = {"n": len(s), "exact_match": round(exact_match(model, s.to(device), t.to(device)), 4) if len(s) else None}
    n_all = sum(r["n"] for r in per_length.values())
    pooled = sum(r["n"] * r["exact_match"] for r in per_length.values() if r["n"]) / n_all
    print(f"{positional}: test exact match per length {per_length}; pooled {pooled:.4f} over {n_all}", flush=True)
    state = {k: v for k, v in model.state_dict().items() if k != "tgt_embed.weight"}  # shared with src_embed
    meta = {"command": command_line(), "steps": str(steps), "seed": str(seed), "split": "none",
            "data": f"synthetic: {TASK}; validation/test strings seen in training removed (training_sources + drop_seen)",
            "positional": positional, "val_curve": curve, "val_exact_match": str(curve[-1][1]),
            "test_exact_match_by_length": per_length, "test_exact_match": str(round(pooled, 4)), "test_n": str(n_all),
            "final_train_loss_20": str(round(sum(losses[-20:]) / 20, 4)),
            "recipe": f"train_seq2seq(steps={steps}, batch_size={BATCH}, lr={LR}, warmup={WARMUP}, seed={seed})"}
    save_atomic(state, out, meta)
    print("saved", out)


def ln_run(norm_first: bool, warmup: int, seed: int, steps: int, device: str, init: str = "default") -> list[float]:
    """One Post-LN or Pre-LN run: per-step training losses (each run seeds its own model and batches)."""
    torch.set_num_threads(1)
    seed_everything(seed)
    model = Transformer(ln_config(norm_first))
    if init == "xavier":
        xavier_init(model)  # draws from the seeded global generator: the same for both placements
    model = model.to(device)
    losses = train_seq2seq(model, TASK, steps, batch_size=BATCH, lr=LN_LR, warmup=warmup, seed=seed,
                           progress=False, clip=None)
    name = f"{'pre' if norm_first else 'post'}-LN, warm-up {warmup}"
    print(name, "seed", seed, "mean loss over the last 20 steps", round(sum(losses[-20:]) / 20, 4), flush=True)
    return [round(x, 4) for x in losses]


def ln_curves(out: str, steps: int, device: torch.device, jobs: int = 1, init: str = "default") -> None:
    runs = [(norm_first, warmup, seed) for norm_first in (False, True) for warmup in (0, 100) for seed in LN_SEEDS]
    if jobs > 1 and device.type == "cpu":  # independent, seeded runs: the same numbers in any order
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(max_workers=jobs) as pool:
            results = list(pool.map(ln_run, *zip(*runs), [steps] * len(runs), [str(device)] * len(runs),
                                    [init] * len(runs)))
    else:
        results = [ln_run(*r, steps, str(device), init) for r in runs]
    curves: dict[str, list[list[float]]] = {}
    for (norm_first, warmup, _), losses in zip(runs, results):
        curves.setdefault(f"{'pre' if norm_first else 'post'}-LN, warm-up {warmup}", []).append(losses)
    meta = {"command": command_line(), "steps": steps, "seeds": list(LN_SEEDS), "split": "none",
            "data": f"synthetic: {TASK}"}
    tmp = out + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"meta": meta, "steps": steps, "lr": LN_LR, "seeds": list(LN_SEEDS),
                   "config": "d_model=32, 6+6 layers, 2 heads, d_ff=64", "init": init, "curves": curves}, f)
    os.replace(tmp, out)
    print("saved", out)


def ls_run(eps: float, seed: int, steps: int, device: str) -> dict:
    """One run of chapter 4's recipe with label smoothing ``eps``: validation and test figures."""
    import torch.nn.functional as F

    from llmbook.toy_seq2seq import BOS, EOS, PAD

    torch.set_num_threads(1)
    seen = training_sources(TASK, steps, BATCH, seed)
    (v_src, v_tgt), test = heldout_sets(seen)
    seed_everything(seed)
    model = Transformer(toy_config("sinusoidal")).to(device)
    t0 = time.time()
    train_seq2seq(model, TASK, steps, batch_size=BATCH, lr=LR, warmup=WARMUP, seed=seed, progress=False,
                  label_smoothing=eps)
    model.eval()
    v_in = torch.cat([torch.full_like(v_tgt[:, :1], BOS), v_tgt[:, :-1]], dim=1)  # BOS, then the target shifted right
    v_in = v_in.masked_fill(v_in == EOS, PAD)  # EOS is never an input: padding after it, as make_batch does
    with torch.no_grad():
        logits = model(v_src.to(device), v_in.to(device))
        val_ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), v_tgt.to(device).reshape(-1), ignore_index=PAD).item()
    val_em = exact_match(model, v_src.to(device), v_tgt.to(device))
    n_all = sum(len(s) for s, _ in test.values())
    test_em = sum(len(s) * exact_match(model, s.to(device), t.to(device)) for s, t in test.values() if len(s)) / n_all
    print(f"label smoothing {eps}, seed {seed}: validation exact match {val_em:.4f}, cross-entropy {val_ce:.4f}; "
          f"test exact match {test_em:.4f} over {n_all} ({time.time() - t0:.0f}s)", flush=True)
    return {"val_exact_match": round(val_em, 4), "val_cross_entropy": round(val_ce, 4), "test_exact_match": round(test_em, 4),
            "n_val": len(v_src), "n_test": n_all}


def label_smoothing_runs(out: str, steps: int, device: torch.device, jobs: int = 1) -> None:
    runs = [(eps, seed) for eps in LS_EPS for seed in LS_SEEDS]
    if jobs > 1 and device.type == "cpu":  # independent, seeded runs: the same numbers in any order
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(max_workers=jobs) as pool:
            results = list(pool.map(ls_run, *zip(*runs), [steps] * len(runs), [str(device)] * len(runs)))
    else:
        results = [ls_run(*r, steps, str(device)) for r in runs]
    per_eps: dict[str, dict[str, list]] = {}
    for (eps, _), r in zip(runs, results):
        d = per_eps.setdefault(str(eps), {})
        for k, v in r.items():
            d.setdefault(k, []).append(v)
    kernel = torch.backends.cpu.get_cpu_capability() if device.type == "cpu" else device.type
    meta = {"command": command_line(), "steps": steps, "seeds": list(LS_SEEDS), "kernel_path": kernel,
            "split": "none",
            "data": f"synthetic: {TASK}; validation/test strings seen in training removed (training_sources + drop_seen)",
            "recipe": f"train_seq2seq(steps={steps}, batch_size={BATCH}, lr={LR}, warmup={WARMUP}, seed=s, label_smoothing=eps)"}
    tmp = out + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"meta": meta, "results": per_eps}, f, indent=1)
    os.replace(tmp, out)
    print("saved", out)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--which", choices=["reverse", "learned", "ln-curves", "label-smoothing"], required=True)
    p.add_argument("--steps", type=int, default=2000, help="updates of the reverse/learned runs")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--ln-steps", type=int, default=150)
    p.add_argument("--ls-steps", type=int, default=500, help="updates of each label-smoothing run")
    p.add_argument("--device", default=None, help="default: llmbook.device.default_device()")
    p.add_argument("--jobs", type=int, default=1, help="ln-curves: CPU processes running the 12 runs (same results)")
    p.add_argument("--init", choices=["default", "xavier"], default="default",
                   help="ln-curves: the library's initialisation, or Xavier-uniform weight matrices")
    args = p.parse_args()
    device = torch.device(args.device) if args.device else default_device()
    ck = os.path.join(ROOT, "data", "checkpoints")
    os.makedirs(ck, exist_ok=True)
    if args.which == "reverse":
        train_toy("sinusoidal", os.path.join(ck, "ch04_reverse_sinusoidal.safetensors"), args.steps, args.seed, device)
    elif args.which == "learned":
        train_toy("learned", os.path.join(ck, "ch05_reverse_learned.safetensors"), args.steps, args.seed, device)
    elif args.which == "label-smoothing":
        label_smoothing_runs(os.path.join(ROOT, "data", "results", "ch04_label_smoothing.json"), args.ls_steps, device,
                             args.jobs)
    else:
        res = os.path.join(ROOT, "data", "results")
        os.makedirs(res, exist_ok=True)
        name = "ch04_ln_curves.json" if args.init == "default" else "ch04_ln_curves_xavier.json"
        ln_curves(os.path.join(res, name), args.ln_steps, device, args.jobs, args.init)


if __name__ == "__main__":
    main()
