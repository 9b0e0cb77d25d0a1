"""Chapter 6b's fine-tuning comparison: GPT-1's recipe on tweet sentiment, four arms, five seeds.

The notebook (``notebooks/06b_gpt_family.ipynb``, section 8) builds the classifier in front of
the reader and runs one of these runs live; this script runs all of them, with the notebook's
code and budget:

* ``pretrained``: chapter 6's Shakespeare GPT (``data/checkpoints/ch06_baby_shakespeare.safetensors``)
  with two new embedding rows (start and extract tokens) and a linear head on the final hidden
  state at the extract token, trained on the classification loss L2;
* ``pretrained_aux``: the same with GPT-1's auxiliary language-modelling loss on the tweet,
  L3 = L2 + 0.5 L1 (Radford et al. 2018, section 3.2; lambda = 0.5 from section 4.1);
* ``scratch``: the same network from random weights, trained on L2;
* ``scratch_aux``: from random weights, trained on L3 (so the auxiliary loss is measured with and
  without pre-training: a 2 x 2 design).

Each run: 120 AdamW updates of 32 training tweets (``load_sentiment("tweets_en")``), peak
learning rate 1e-3 after 10 warm-up updates, cosine to 1e-4; tweets written as
``[start] text [extract]`` with characters outside the Shakespeare vocabulary dropped and
the text cut to 62 characters. The seed sets the head's (and, from scratch, the body's)
initial weights and the batch order; the seeds are shared across arms, so the arms compare
paired by seed. Scored once on the validation tweets (accuracy); the test tweets are not used.

    OMP_NUM_THREADS=1 ATEN_CPU_CAPABILITY=avx2 python scripts/finetune_06b.py --out data/results/ch06b_finetune.json

Writes a JSON file with a top-level ``meta`` object (command, budget, seeds, threads, kernel
path, torch) and, per arm, the validation accuracy of every seed, plus the majority-class
accuracy. Bit-for-bit reproducible with the same thread count, kernel path and torch build.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

from llmbook.charvocab import CharVocab
from llmbook.data import load_sentiment
from llmbook.device import seed_everything
from llmbook.gpt import GPT, GPTConfig
from llmbook.train import TrainConfig, load_checkpoint, train

ROOT = Path(__file__).resolve().parents[1]
CHECKPOINT = ROOT / "data/checkpoints/ch06_baby_shakespeare.safetensors"
COMMAND = ("OMP_NUM_THREADS=1 ATEN_CPU_CAPABILITY=avx2 python scripts/finetune_06b.py "
           "--out data/results/ch06b_finetune.json")
STEPS, BATCH, LR, MIN_LR, WARMUP, LM_WEIGHT = 120, 32, 1e-3, 1e-4, 10, 0.5
SEEDS = (0, 1, 2, 3, 4)
ARMS = {"pretrained": (True, 0.0), "pretrained_aux": (True, LM_WEIGHT), "scratch": (False, 0.0),
        "scratch_aux": (False, LM_WEIGHT)}


class GPTClassifier(nn.Module):
    """GPT body + a linear layer on the hidden state at the extract token; ``lm_weight`` > 0 adds L1."""

    def __init__(self, gpt: GPT, extract: int, n_classes: int = 2, lm_weight: float = 0.0):
        super().__init__()
        self.gpt, self.head, self.extract, self.lm_weight = gpt, nn.Linear(gpt.config.d_model, n_classes), extract, lm_weight

    def forward(self, idx, labels=None):
        h, _ = self.gpt.hidden_states(idx)                        # (B, T, C)
        at = (idx == self.extract).int().argmax(dim=1)            # (B,) position of the extract token
        logits = self.head(h[torch.arange(len(idx)), at])         # (B, n_classes)
        if labels is None:
            return logits, None
        loss = F.cross_entropy(logits, labels)                    # L2
        if self.lm_weight:
            # L1: predict each character of the tweet from the ones before it (not START, EXTRACT or padding)
            targets = idx[:, 1:].clone()                          # (B, T-1): position j predicts idx[:, j + 1]
            targets[torch.arange(1, idx.shape[1], device=idx.device)[None, :] >= at[:, None]] = -1
            lm_logits = h[:, :-1] @ self.gpt.wte.weight.T         # (B, T-1, V + 2): the tied output layer
            loss = loss + self.lm_weight * F.cross_entropy(lm_logits.flatten(0, 1), targets.flatten(), ignore_index=-1)
        return logits, loss


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="JSON file to write")
    args = ap.parse_args()
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))

    info = load_checkpoint(CHECKPOINT)
    meta = info["meta"]
    vocab = CharVocab.from_json(meta["vocab"])
    model = GPT(GPTConfig(**meta["gpt_config"]))
    load_checkpoint(CHECKPOINT, model)
    start, extract, ctx = len(vocab), len(vocab) + 1, model.config.block_size

    def encode_tweet(text):
        ids = [vocab.stoi[c] for c in text if c in vocab.stoi][: ctx - 2]
        return [start] + ids + [extract] + [0] * (ctx - 2 - len(ids))  # padding after EXTRACT is never seen (causal)

    def tensors(pairs):
        return torch.tensor([encode_tweet(t) for t, _ in pairs]), torch.tensor([y for _, y in pairs])

    tweets = load_sentiment("tweets_en")
    Xtr, Ytr = tensors(tweets.train)
    Xva, Yva = tensors(tweets.val)

    def tweet_batches(split, generator, batch_size=BATCH):
        X, Y = (Xtr, Ytr) if split == "train" else (Xva, Yva)
        i = torch.randint(len(X), (batch_size,), generator=generator)
        return X[i], Y[i]

    def make_classifier(pretrained, seed, lm_weight):
        seed_everything(seed)
        gpt = GPT(GPTConfig(**{**meta["gpt_config"], "vocab_size": len(vocab) + 2}))
        if pretrained:
            source = dict(model.named_parameters())
            with torch.no_grad():
                for name, p in gpt.named_parameters():
                    p[: source[name].shape[0]].copy_(source[name])  # the two new embedding rows keep their init
        return GPTClassifier(gpt, extract, lm_weight=lm_weight)

    @torch.no_grad()
    def accuracy(clf):
        clf.eval()
        pred = torch.cat([clf(Xva[i:i + 256])[0].argmax(-1) for i in range(0, len(Xva), 256)])
        return (pred == Yva).float().mean().item()

    t0 = time.time()
    results = {}
    for arm, (pretrained, lm_weight) in ARMS.items():
        results[arm] = []
        for seed in SEEDS:
            clf = make_classifier(pretrained, seed, lm_weight)
            train(clf, tweet_batches, TrainConfig(max_steps=STEPS, lr=LR, min_lr=MIN_LR, warmup_steps=WARMUP,
                                                  eval_interval=STEPS, eval_batches=4, progress=False, seed=seed))
            results[arm].append(round(accuracy(clf), 6))
            print(f"{arm:15s} seed {seed}: validation accuracy {results[arm][-1]:.4f}  ({time.time() - t0:.0f} s)",
                  flush=True)
    out = {
        "meta": {
            "command": COMMAND,
            "script": "scripts/finetune_06b.py",
            "checkpoint": "data/checkpoints/ch06_baby_shakespeare.safetensors",
            "split": "load_sentiment('tweets_en'): train for the updates, val for the accuracy; test unused",
            "steps": STEPS, "batch": BATCH, "lr": LR, "min_lr": MIN_LR, "warmup": WARMUP, "lm_weight": LM_WEIGHT,
            "seeds": list(SEEDS), "max_chars": ctx - 2,
            "threads": torch.get_num_threads(), "kernel_path": os.environ.get("ATEN_CPU_CAPABILITY", "(torch's choice)"),
            "torch": torch.__version__, "seconds": round(time.time() - t0),
        },
        "description": "Chapter 6b: GPT-1-style fine-tuning of the Shakespeare GPT on tweet sentiment, "
                       "validation accuracy per seed for four arms (pre-trained or not, auxiliary loss or not)",
        "majority_accuracy": round((Yva == 0).float().mean().item(), 6),
        "arms": {arm: {"pretrained": ARMS[arm][0], "lm_weight": ARMS[arm][1], "val_accuracy": accs}
                 for arm, accs in results.items()},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
