"""Train the chapter-4/5 toy Transformers on digit reversal and save small checkpoints.

    .venv/bin/python scripts/train_toy_transformer.py --which reverse   # ch04 model (sinusoidal)
    .venv/bin/python scripts/train_toy_transformer.py --which learned   # ch05 model (learned positions)
    .venv/bin/python scripts/train_toy_transformer.py --which ln-curves # ch04 Post-LN vs Pre-LN curves

Models: ``TransformerConfig.small(vocab_size=13, max_len=32)``, trained on reversal of
digit strings of length 1..8, evaluated every 250 steps on 1000 held-out examples with
greedy decoding; training stops once exact match reaches 99.5% (or at --max-steps).
Checkpoints are float32 safetensors (~1 MB), written atomically under data/checkpoints/.
The ``ln-curves`` run trains 6+6-layer Post-LN and Pre-LN models with and without
warm-up and writes their loss curves to data/results/ch04_ln_curves.json.
Deterministic on the CPU given the seed; takes a few minutes on an idle 2-core machine.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import torch
from safetensors.torch import save_file

from llmbook.device import seed_everything
from llmbook.toy_seq2seq import VOCAB_SIZE, DigitTask, exact_match, make_batch, train_seq2seq
from llmbook.transformer import Transformer, TransformerConfig

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TASK = DigitTask("reverse", 1, 8)


def toy_config(positional: str) -> TransformerConfig:
    return TransformerConfig.small(vocab_size=VOCAB_SIZE, max_len=32, positional=positional)


def ln_config(norm_first: bool) -> TransformerConfig:
    return TransformerConfig.small(vocab_size=VOCAB_SIZE, max_len=32, d_model=32, d_ff=64, n_heads=2,
                                   n_encoder_layers=6, n_decoder_layers=6, norm_first=norm_first)


def save_atomic(tensors: dict, path: str, metadata: dict) -> None:
    tmp = path + ".tmp"
    save_file({k: v.contiguous() for k, v in tensors.items()}, tmp, metadata={k: str(v) for k, v in metadata.items()})
    os.replace(tmp, path)


def train_toy(positional: str, out: str, max_steps: int, seed: int = 0) -> None:
    seed_everything(seed)
    model = Transformer(toy_config(positional))
    src, _, tgt = make_batch(TASK, 1000, torch.Generator().manual_seed(1234))
    steps, em, t0 = 0, 0.0, time.time()
    while steps < max_steps:
        # one warm-up at the start; later chunks continue at the full learning rate
        train_seq2seq(model, TASK, 250, batch_size=64, lr=1e-3, warmup=100 if steps == 0 else 0, seed=seed + steps, progress=False)
        steps += 250
        em = exact_match(model, src, tgt)
        print(f"{positional}: step {steps}, held-out exact match {em:.3f}, {time.time() - t0:.0f}s", flush=True)
        if em >= 0.995:
            break
    state = {k: v for k, v in model.state_dict().items() if k != "tgt_embed.weight"}  # shared with src_embed
    save_atomic(state, out, {"positional": positional, "steps": steps, "heldout_exact_match": round(em, 4), "seed": seed})
    print("saved", out)


def ln_curves(out: str, steps: int) -> None:
    curves = {}
    for norm_first in (False, True):
        for warmup in (0, 100):
            seed_everything(0)
            model = Transformer(ln_config(norm_first))
            losses = train_seq2seq(model, TASK, steps, batch_size=64, lr=2e-3, warmup=warmup, seed=0, progress=False, clip=None)
            name = f"{'pre' if norm_first else 'post'}-LN, warm-up {warmup}"
            curves[name] = [round(x, 4) for x in losses]
            print(name, "final loss", sum(losses[-20:]) / 20, flush=True)
    tmp = out + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"steps": steps, "lr": 2e-3, "config": "d_model=32, 6+6 layers, 2 heads, d_ff=64", "curves": curves}, f)
    os.replace(tmp, out)
    print("saved", out)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--which", choices=["reverse", "learned", "ln-curves"], required=True)
    p.add_argument("--max-steps", type=int, default=4000)
    p.add_argument("--ln-steps", type=int, default=300)
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: leave the default)")
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    ck = os.path.join(ROOT, "data", "checkpoints")
    os.makedirs(ck, exist_ok=True)
    if args.which == "reverse":
        train_toy("sinusoidal", os.path.join(ck, "ch04_reverse_sinusoidal.safetensors"), args.max_steps)
    elif args.which == "learned":
        train_toy("learned", os.path.join(ck, "ch05_reverse_learned.safetensors"), args.max_steps)
    else:
        res = os.path.join(ROOT, "data", "results")
        os.makedirs(res, exist_ok=True)
        ln_curves(os.path.join(res, "ch04_ln_curves.json"), args.ln_steps)


if __name__ == "__main__":
    main()
