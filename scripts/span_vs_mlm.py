"""BERT's masked-LM vs T5's span corruption at equal budget, on Shakespeare characters (chapter 7b).

Both models are the book's own and about the same size: a 4-layer BERT encoder with its
masked-LM head (``llmbook.objectives.BertMLM``) and a 2+2-layer pre-LN encoder-decoder from
chapter 4 (``llmbook.transformer.Transformer``), each trained for ``--steps`` AdamW updates on
the same random 64-character windows of ``load_splits("shakespeare").train`` with the same
schedule; only the corruption differs (``llmbook.objectives.train_denoiser``).

Evaluation: fill-in-the-blank on whole words (``blank_examples``): BERT gets one [MASK] per
hidden character (it is told the length) and fills them all at once; T5 gets one sentinel and
writes the word. Exact-match accuracy on ``--n-items`` blanks from the validation text for each
seed, and once on the test text; and, because a whole word is hard for a small character model,
character accuracy: the share of the hidden characters the answer gets right in place (an answer
of the wrong length scores only the places it has). Both scores compare the answer without the
spaces at its ends (pre-training spans cut across words, so T5 may write " word"). The first
``--n-show`` validation answers of each run are kept (as written and stripped), with the number of
distinct answers over all validation items (a model that ignores the context answers the same). Results (per seed, mean and standard error)
go to ``--out`` with a "meta" record (command, steps, seeds, split).

    OMP_NUM_THREADS=1 python scripts/span_vs_mlm.py --out data/results/ch07b_span_vs_mlm.json
    python scripts/span_vs_mlm.py --quick --out /tmp/span_vs_mlm.json     # a smoke test
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "lib"))

from llmbook.atomic import write_atomic  # noqa: E402
from llmbook.bert import BertConfig  # noqa: E402
from llmbook.data import load_splits  # noqa: E402
from llmbook.device import default_device  # noqa: E402
from llmbook.objectives import (BertMLM, SpanVocab, blank_examples, fill_blank_mlm,  # noqa: E402
                                fill_blank_span, train_denoiser)
from llmbook.transformer import Transformer, TransformerConfig  # noqa: E402


def build(kind: str, V: int, d: int):
    if kind == "mlm":
        return BertMLM(BertConfig(vocab_size=V, hidden_size=d, n_layers=4, n_heads=4, intermediate_size=4 * d,
                                  max_position=64, dropout=0.0, attention_dropout=0.0))
    return Transformer(TransformerConfig(src_vocab_size=V, tgt_vocab_size=V, d_model=d, n_heads=4,
                                         n_encoder_layers=2, n_decoder_layers=2, d_ff=4 * d, dropout=0.0,
                                         max_len=64, norm_first=True, activation="gelu"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--d-model", type=int, default=128)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--n-items", type=int, default=500)
    ap.add_argument("--n-show", type=int, default=10, help="validation answers kept per run")
    ap.add_argument("--quick", action="store_true", help="20 steps, 20 items, one seed (smoke test)")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    if args.quick:
        args.steps, args.n_items, args.seeds = 20, 20, [0]
    device = default_device()
    s = load_splits("shakespeare")
    vocab = SpanVocab(s.train + s.val + s.test)
    train = torch.tensor(vocab.encode(s.train))
    val_items = blank_examples(s.val, args.n_items, seed=1)
    test_items = blank_examples(s.test, args.n_items, seed=2)
    truth = lambda items: [w[a:a + n] for w, a, n in items]  # noqa: E731
    runs = {"mlm": [], "span": []}
    for seed in args.seeds:
        for kind in ("mlm", "span"):
            torch.manual_seed(seed)
            model = build(kind, len(vocab), args.d_model).to(device)
            t0 = time.time()
            losses = train_denoiser(model, kind, train, vocab, args.steps, seed=seed)
            fill = fill_blank_mlm if kind == "mlm" else fill_blank_span
            acc, char = {}, {}
            for part, items in (("val", val_items), ("test", test_items)):
                raw = fill(model, vocab, items)
                got = [a.strip() for a in raw]  # a word has no spaces at its ends
                if part == "val":
                    shown, shown_raw, distinct = got[:args.n_show], raw[:args.n_show], len(set(raw))
                acc[part] = sum(a == b for a, b in zip(got, truth(items))) / len(items)
                char[part] = sum(sum(x == y for x, y in zip(a, b)) for a, b in zip(got, truth(items))) / sum(
                    len(b) for b in truth(items))
            runs[kind].append({"seed": seed, "params": sum(p.numel() for p in model.parameters()),
                               "final_loss": sum(losses[-50:]) / len(losses[-50:]),
                               "val_exact": acc["val"], "test_exact": acc["test"],
                               "val_char": char["val"], "test_char": char["test"], "val_answers": shown,
                               "val_answers_raw": shown_raw, "val_distinct_answers": distinct,
                               "seconds": round(time.time() - t0, 1)})
            print(kind, runs[kind][-1], flush=True)
    summary = {}
    for kind, rs in runs.items():
        for part in ("val_exact", "test_exact", "val_char", "test_char"):
            v = [r[part] for r in rs]
            m = sum(v) / len(v)
            se = math.sqrt(sum((x - m) ** 2 for x in v) / (len(v) - 1) / len(v)) if len(v) > 1 else float("nan")
            summary[f"{kind}_{part}"] = {"mean": m, "se": se}
    cmd = "OMP_NUM_THREADS=1 python scripts/span_vs_mlm.py " + " ".join(sys.argv[1:])
    out = {"meta": {"command": cmd, "steps": args.steps, "seeds": args.seeds,
                    "split": "load_splits(shakespeare) 80/10/10"}, "runs": runs, "summary": summary}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(out, indent=1)
    write_atomic(args.out, lambda tmp: Path(tmp).write_text(text))
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
