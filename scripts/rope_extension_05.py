"""Chapter 5's RoPE context extension: reading 2x and 4x past the trained length by changing RoPE's frequencies.

The three RoPE models of ``scripts/extrapolation_05.py`` (chapter 6a's GPT, trained on
32-character windows of Shakespeare, seeds 0, 1, 2; the same recipe, so the same models) are
trained again and saved, then read on windows of 64 and 128 characters (2x and 4x the trained
length L = 32) with the frequencies of ``llmbook.positional.RopeScaling`` at s = 2 and s = 4:

- ``rope``: plain RoPE, the frequencies it was trained with (the baseline);
- ``pi``: position interpolation (Chen et al., 2023): every frequency divided by s;
- ``ntk``: NTK-aware scaling (bloc97, 2023): the base raised to base * s^(hd/(hd-2));
- ``ntk_by_parts``: YaRN's ramp alone (Peng et al., 2023, section 3.2), attention factor 1;
- ``yarn``: the ramp and YaRN's attention temperature, logits times (0.1 ln s + 1)^2.

Two readings of every model:

1. **No fine-tuning**: the trained weights with the new frequencies.
2. **A short fine-tune at the new length** (as Chen et al. and Peng et al. do, far longer
   relative to pre-training there): ``FT_STEPS`` AdamW updates at a constant learning rate
   ``FT_LR`` after ``FT_WARMUP`` warm-up updates, on random training windows of the new length,
   1,024 characters per update as in training (16 windows of 64, or 8 of 128). For a given seed
   every method sees the same batches, so the comparisons are paired; ``rope`` fine-tuned the
   same way is the baseline (Chen et al.'s "direct fine-tuning").

A third baseline needs no position trick: read only the last 32 characters before each
position (a sliding window of the trained length), so every prediction is made at a length the
model was trained at (``window32``). Its control for the fine-tuned table: plain RoPE
fine-tuned the same way at the trained length (32 windows of 32 per update, the same number of
updates and characters), then read with the window (``window32_finetuned``).

Evaluation: the 256 validation windows of ``scripts/extrapolation_05.py`` (seed 4321), cut to
their first 64 or 128 characters, each read from its first character. Per run the file stores
the loss at every position and its means at positions 0..31 ("within"), 32..L-1 ("beyond") and
0..L-1 ("all"). The test split is not used.

A long-range task (``--passkey``, added to the same file under "passkey"): five RoPE models
trained from scratch (seeds 0-4; 800 AdamW updates of 32 sequences, loss on the key only) on
32-symbol sequences of random filler (16 symbols) with a mark somewhere, the key right after it
and a query symbol last, whose answer is the key. The key is drawn from the filler symbols, so
it has no class of its own: only its place after the mark identifies it. Then their accuracy on
512 fresh sequences of 32, 64 and 128 symbols, the mark either in the first four positions (far
back) or in the last twelve, with each method's frequencies, and on the far sequences cut to
their last 32 symbols (the key is not in them: chance, 1/16).

    OMP_NUM_THREADS=1 python scripts/rope_extension_05.py
    OMP_NUM_THREADS=1 python scripts/rope_extension_05.py --passkey

writes ``data/results/ch05_rope_short.safetensors`` (the three trained models, 0.4 MB each;
keys ``seed<s>.<parameter>``) and ``data/results/ch05_rope_extension.json``. Deterministic given
the seeds, the thread count and the torch build; the trained models' losses are checked
against ``data/results/ch05_extrapolation.json`` (the same runs).
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import os
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from extrapolation_05 import (
    BATCH, EVAL_LEN, SEEDS, STEPS, TRAIN_LEN, PositionLM, eval_windows, load_data, per_position_loss, train_model,
)
from llmbook.checkpoint import load_state_checked, read_tensors, write_tensors
from llmbook.positional import RopeScaling
from llmbook.train import TrainConfig, random_windows, train

COMMAND = "OMP_NUM_THREADS=1 python scripts/rope_extension_05.py"
METHODS = ("rope", "pi", "ntk", "ntk_by_parts", "yarn")
LENGTHS = (64, 128)
FT_STEPS, FT_LR, FT_WARMUP = 100, 3e-4, 10  # FT_LR: the pre-training schedule's final learning rate
FT_TOKENS = BATCH * TRAIN_LEN  # characters per fine-tuning update, as in pre-training
FT_SEED_OFFSET = 1000  # fine-tuning batches of seed s are drawn with seed 1000 + s
CHECKPOINT = "data/results/ch05_rope_short.safetensors"
RESULTS = "data/results/ch05_rope_extension.json"


def scaling_for(method: str, factor: float) -> RopeScaling | None:
    """The ``RopeScaling`` of ``method`` at length ratio ``factor`` (None: plain RoPE)."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if method == "rope":
        return None
    if method == "pi":
        return RopeScaling("linear", factor)
    if method == "ntk":
        return RopeScaling("ntk", factor)
    return RopeScaling("yarn", factor, original_length=TRAIN_LEN,
                       attention_factor=1.0 if method == "ntk_by_parts" else None)


def summarise(seed: int, losses: list[float]) -> dict:
    L = len(losses)
    return {"seed": seed, "within": round(sum(losses[:TRAIN_LEN]) / TRAIN_LEN, 5),
            "beyond": round(sum(losses[TRAIN_LEN:]) / (L - TRAIN_LEN), 5), "all": round(sum(losses) / L, 5),
            "per_position": [round(v, 4) for v in losses]}


@torch.no_grad()
def window_loss(model: PositionLM, windows: torch.Tensor, context: int = TRAIN_LEN, chunk: int = 2048) -> list[float]:
    """Mean loss at positions context..EVAL_LEN-1 when each is predicted from the last ``context`` characters only."""
    model.eval()
    sub = windows.unfold(1, context + 1, 1)[:, 1:]  # (N, EVAL_LEN - context, context + 1): one slice per position
    n_pos = sub.shape[1]
    flat = sub.reshape(-1, context + 1)  # row i * n_pos + j predicts position context + j of window i
    out = torch.empty(len(flat), dtype=torch.float64)
    for i in range(0, len(flat), chunk):
        x = flat[i:i + chunk]
        logits, _ = model(x[:, :-1])
        out[i:i + chunk] = F.cross_entropy(logits[:, -1], x[:, -1], reduction="none").double()
    return out.view(-1, n_pos).mean(0).tolist()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=RESULTS)
    parser.add_argument("--checkpoint", default=CHECKPOINT)
    parser.add_argument("--passkey", action="store_true",
                        help="only the long-range task: train passkey models and add their accuracies to --out")
    parser.add_argument("--reuse-checkpoint", action="store_true",
                        help="read the trained models from --checkpoint instead of training them again")
    args = parser.parse_args()
    if args.passkey:
        passkey_main(args.out)
        return

    t_start, c_start = time.perf_counter(), time.process_time()
    vocab, train_ids, val_ids = load_data()
    windows = eval_windows(val_ids)  # (256, EVAL_LEN + 1)
    get_batch = random_windows(train_ids, val_ids, block_size=TRAIN_LEN, batch_size=BATCH)

    models: dict[int, PositionLM] = {}
    if args.reuse_checkpoint:
        tensors, _ = read_tensors(args.checkpoint)
        for seed in SEEDS:
            models[seed] = PositionLM(len(vocab), "rope")
            prefix = f"seed{seed}."
            with torch.no_grad():  # lm_head.weight is tied to wte.weight: filled through it
                load_state_checked(models[seed], {k[len(prefix):]: v for k, v in tensors.items() if k.startswith(prefix)})
    else:
        for seed in SEEDS:
            t0 = time.perf_counter()
            models[seed] = train_model("rope", seed, STEPS, len(vocab), get_batch)
            print(f"trained rope seed {seed} ({time.perf_counter() - t0:.0f} s)", flush=True)
        tensors = {f"seed{seed}.{k}": v for seed, m in models.items() for k, v in m.state_dict().items()
                   if k != "lm_head.weight"}  # tied to wte.weight
        write_tensors(args.checkpoint, tensors, {
            "what": "chapter 5's RoPE models (scripts/extrapolation_05.py's PositionLM('rope')), seeds "
                    + ", ".join(map(str, SEEDS)) + "; lm_head.weight is tied to wte.weight",
            "recipe": json.dumps({"steps": STEPS, "train_len": TRAIN_LEN, "batch": BATCH}),
            "steps": str(STEPS), "seeds": json.dumps(list(SEEDS)),
            "split": "load_splits(shakespeare) 80/10/10; training only",
            "command": COMMAND})
        print("wrote", args.checkpoint)

    # the same runs as data/results/ch05_extrapolation.json's "rope" rows
    reference = {r["seed"]: r for r in json.load(open("data/results/ch05_extrapolation.json"))["positions"]["rope"]}
    train_check = []
    for seed, m in models.items():
        losses = per_position_loss(m, windows)
        w, b = sum(losses[:TRAIN_LEN]) / TRAIN_LEN, sum(losses[TRAIN_LEN:]) / (EVAL_LEN - TRAIN_LEN)
        train_check.append({"seed": seed, "within": round(w, 5), "beyond": round(b, 5),
                            "extrapolation_05": {"within": reference[seed]["within"], "beyond": reference[seed]["beyond"]}})
        print(f"seed {seed}: within {w:.5f} (extrapolation_05: {reference[seed]['within']}), "
              f"beyond {b:.5f} ({reference[seed]['beyond']})", flush=True)

    window32 = [{"seed": seed, "per_position": [round(v, 4) for v in window_loss(m, windows)]} for seed, m in models.items()]

    no_ft: dict = {}
    for L in LENGTHS:
        no_ft[str(L)] = {}
        for method in METHODS:
            runs = []
            for seed, m in models.items():
                m.rope_scaling = scaling_for(method, L / TRAIN_LEN)
                runs.append(summarise(seed, per_position_loss(m, windows[:, :L + 1])))
                m.rope_scaling = None
            no_ft[str(L)][method] = runs
            print(f"no fine-tune, length {L}, {method:12s}: beyond " + ", ".join(f"{r['beyond']:.4f}" for r in runs), flush=True)

    ft: dict = {}
    for L in LENGTHS:
        ft[str(L)] = {}
        ft_batch = FT_TOKENS // L
        for method in METHODS:
            runs = []
            for seed, m in models.items():
                t0 = time.perf_counter()
                tuned = copy.deepcopy(m)
                tuned.rope_scaling = scaling_for(method, L / TRAIN_LEN)
                get_long = random_windows(train_ids, val_ids, block_size=L, batch_size=ft_batch)
                train(tuned, get_long, TrainConfig(max_steps=FT_STEPS, lr=FT_LR, min_lr=FT_LR, warmup_steps=FT_WARMUP,
                                                   eval_interval=FT_STEPS, eval_batches=1, seed=FT_SEED_OFFSET + seed,
                                                   progress=False))
                runs.append(summarise(seed, per_position_loss(tuned, windows[:, :L + 1])))
                print(f"fine-tuned, length {L}, {method:12s} seed {seed}: beyond {runs[-1]['beyond']:.4f} "
                      f"({time.perf_counter() - t0:.0f} s)", flush=True)
            ft[str(L)][method] = runs

    window32_ft = []
    for seed, m in models.items():
        tuned = copy.deepcopy(m)
        train(tuned, get_batch, TrainConfig(max_steps=FT_STEPS, lr=FT_LR, min_lr=FT_LR, warmup_steps=FT_WARMUP,
                                            eval_interval=FT_STEPS, eval_batches=1, seed=FT_SEED_OFFSET + seed,
                                            progress=False))
        window32_ft.append({"seed": seed, "per_position": [round(v, 4) for v in window_loss(tuned, windows)]})
        print(f"fine-tuned at {TRAIN_LEN}, read with a window of {TRAIN_LEN}, seed {seed}: positions "
              f"{TRAIN_LEN}-{EVAL_LEN - 1} {sum(window32_ft[-1]['per_position']) / (EVAL_LEN - TRAIN_LEN):.4f}", flush=True)

    out = {
        "meta": {
            "command": COMMAND,
            "script": "scripts/rope_extension_05.py",
            "models": "scripts/extrapolation_05.py's PositionLM('rope'), trained with its recipe (train_model)",
            "checkpoint": args.checkpoint,
            "seeds": list(SEEDS),
            "steps": STEPS,  # the pre-training updates of each model (the fine-tunes: "finetune" below)
            "train_len": TRAIN_LEN,
            "lengths": list(LENGTHS),
            "methods": {m: (repr(scaling_for(m, 2.0)).replace("factor=2.0", "factor=L/32") if m != "rope" else "None")
                        for m in METHODS},
            "eval": {"windows": len(windows), "seed": "scripts/extrapolation_05.py's eval_windows (4321)",
                     "within": f"mean loss at positions 0..{TRAIN_LEN - 1}",
                     "beyond": f"mean loss at positions {TRAIN_LEN}..L-1", "all": "mean loss at positions 0..L-1"},
            "finetune": {"steps": FT_STEPS, "lr": FT_LR, "min_lr": FT_LR, "warmup_steps": FT_WARMUP,
                         "characters_per_update": FT_TOKENS, "batch": {str(L): FT_TOKENS // L for L in LENGTHS},
                         "seed": f"{FT_SEED_OFFSET} + model seed", "optimizer": "AdamW (llmbook.train defaults), fresh"},
            "window32": f"loss at positions {TRAIN_LEN}..{EVAL_LEN - 1}, each read from the {TRAIN_LEN} characters before it",
            "window32_finetuned": f"the same, after plain RoPE is fine-tuned like the others at length {TRAIN_LEN} "
                                  f"({BATCH} windows per update)",
            "split": "load_splits(shakespeare) 80/10/10; training and validation only",
            "threads": torch.get_num_threads(),
            "torch": torch.__version__,
            "seconds": round(time.perf_counter() - t_start),
            "cpu_seconds": round(time.process_time() - c_start),
        },
        "train_check": train_check,
        "window32": window32,
        "window32_finetuned": window32_ft,
        "no_finetune": no_ft,
        "finetune": ft,
    }
    path = Path(args.out)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        json.dump(out, f, indent=1)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)
    print("wrote", path)



# ---- the long-range task: a passkey placed far back (python scripts/rope_extension_05.py --passkey) ----
PK_FILLER = 16                         # filler symbols 0..15; the key is drawn from the same 16, so only the mark locates it
PK_MARK, PK_QUERY = 16, 17             # "the key follows" and "say the key"
PK_VOCAB = 18
PK_STEPS, PK_BATCH, PK_LR, PK_MIN_LR, PK_WARMUP = 800, 32, 3e-3, 3e-4, 30
PK_EVAL = 512                          # test sequences per length and placement
PK_EVAL_SEED = 777
PK_SEEDS = (0, 1, 2, 3, 4)


def passkey_batch(n: int, length: int, gen: torch.Generator, far: bool | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` sequences of ``length`` symbols: random filler, ``MARK key`` somewhere, ``QUERY`` last; the target is the key.

    ``far=None`` (training): the mark anywhere in 0..length-3; ``far=True``: in the first 4 positions (the key
    ``length - 3`` to ``length - 6`` back from the query); ``far=False``: within the last 12 positions."""
    x = torch.randint(0, PK_FILLER, (n, length), generator=gen)
    key = torch.randint(0, PK_FILLER, (n,), generator=gen)        # a filler symbol: only its place after the mark marks it out
    if far is None:
        pos = torch.randint(0, length - 2, (n,), generator=gen)
    elif far:
        pos = torch.randint(0, 4, (n,), generator=gen)
    else:
        pos = torch.randint(length - 12, length - 2, (n,), generator=gen)
    rows = torch.arange(n)
    x[rows, pos], x[rows, pos + 1], x[:, -1] = PK_MARK, key, PK_QUERY
    return x, key


def train_passkey(seed: int) -> PositionLM:
    """A RoPE ``PositionLM`` trained from scratch on passkeys of length ``TRAIN_LEN`` (loss on the key only)."""
    from llmbook.device import seed_everything
    seed_everything(seed)
    model = PositionLM(PK_VOCAB, "rope")
    opt = torch.optim.AdamW(model.parameters(), lr=PK_LR)
    gen = torch.Generator().manual_seed(seed)
    for step in range(PK_STEPS):
        warm = min(1.0, (step + 1) / PK_WARMUP)
        cos = 0.5 * (1 + math.cos(math.pi * step / PK_STEPS))
        for g in opt.param_groups:
            g["lr"] = warm * (PK_MIN_LR + (PK_LR - PK_MIN_LR) * cos)
        x, key = passkey_batch(PK_BATCH, TRAIN_LEN, gen)
        logits, _ = model(x)
        loss = F.cross_entropy(logits[:, -1], key)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return model.eval()


@torch.no_grad()
def passkey_accuracy(model: PositionLM, x: torch.Tensor, key: torch.Tensor, scaling: RopeScaling | None) -> float:
    model.rope_scaling = scaling
    pred = model(x)[0][:, -1].argmax(-1)
    model.rope_scaling = None
    return round((pred == key).double().mean().item(), 4)


def passkey_main(out_path: str) -> None:
    t_start, c_start = time.perf_counter(), time.process_time()
    gen = torch.Generator().manual_seed(PK_EVAL_SEED)
    tests = {L: {p: passkey_batch(PK_EVAL, L, gen, far=(p == "far")) for p in ("far", "near")}
             for L in (TRAIN_LEN,) + LENGTHS}
    runs = []
    for seed in PK_SEEDS:
        model = train_passkey(seed)
        run = {"seed": seed}
        for L, sets in tests.items():
            for place, (x, key) in sets.items():
                for method in METHODS:
                    if L == TRAIN_LEN and method != "rope":
                        continue
                    run[f"{L}/{place}/{method}"] = passkey_accuracy(model, x, key, scaling_for(method, L / TRAIN_LEN))
        for L in LENGTHS:                   # the trivial baseline: the last 32 symbols only (the key is not in them)
            x, key = tests[L]["far"]
            run[f"{L}/far/window32"] = passkey_accuracy(model, x[:, -TRAIN_LEN:], key, None)
        print(seed, run, flush=True)
        runs.append(run)
    path = Path(out_path)
    res = json.loads(path.read_text())
    res["passkey"] = {
        "meta": {"command": COMMAND + " --passkey", "task": passkey_batch.__doc__.split("\n")[0],
                 "vocab": {"filler": PK_FILLER, "keys": "the filler symbols", "mark": PK_MARK, "query": PK_QUERY},
                 "model": "scripts/extrapolation_05.py's PositionLM('rope'), trained from scratch",
                 "training": {"steps": PK_STEPS, "batch": PK_BATCH, "length": TRAIN_LEN, "lr": PK_LR, "min_lr": PK_MIN_LR,
                              "warmup_steps": PK_WARMUP, "loss": "cross-entropy on the key only", "optimizer": "AdamW"},
                 "eval": {"sequences": PK_EVAL, "seed": PK_EVAL_SEED, "far": "mark in positions 0..3",
                          "near": "mark in the last 12 positions", "chance": 1 / PK_FILLER, "seeds": list(PK_SEEDS),
                          "window32": "the far sequences cut to their last 32 symbols"},
                 "threads": torch.get_num_threads(), "torch": torch.__version__,
                 "seconds": round(time.perf_counter() - t_start), "cpu_seconds": round(time.process_time() - c_start)},
        "runs": runs,
    }
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        json.dump(res, f, indent=1)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)
    print("wrote", path, res["passkey"]["meta"]["cpu_seconds"], "CPU seconds")

if __name__ == "__main__":
    main()
