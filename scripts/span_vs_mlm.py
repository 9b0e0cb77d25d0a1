"""BERT's masked LM vs T5's span corruption at equal budget, on Shakespeare characters (chapter 7b).

Both models are the book's own and about the same size: a 4-layer BERT encoder with its
masked-LM head (``llmbook.objectives.BertMLM``) and a 2+2-layer pre-LN encoder-decoder from
chapter 4 (``llmbook.transformer.Transformer``), each trained for ``--steps`` AdamW updates on
the same kind of random 64-character windows of ``load_splits("shakespeare").train`` with the
same batch size, learning rate and schedule; only the corruption differs
(``llmbook.objectives.train_denoiser``). The learning rate is shared, not tuned per model.

Evaluation by likelihood: each hidden character of a held-out window gets its negative
log-likelihood under the model, in bits. BERT sees one [MASK] per hidden character (it is told
where and how many) and predicts each on its own; the encoder-decoder sees one sentinel per
run of hidden characters and is scored teacher-forced on its target ``<X0> run0 <X1> ... [EOS]``;
the sentinels and [EOS] of that target (where each span ends, which BERT is told) are scored
apart. Three item sets of ``--n-items`` windows, on the validation text for every seed and once
on the test text:

* ``word``: one whole word of at least 3 letters hidden (``blank_examples``);
* ``span``: T5's pre-training corruption, 10 of 64 characters in 3 spans, the last at the end;
* ``mlm``: BERT's, 10 of 64 characters at random places.

Beside them the trivial baseline: the character frequencies of the training text, blind to
the context (``score_hidden_unigram``). For the word test the greedy answers are also kept:
exact match, character accuracy (the share of hidden characters right in place), the first
``--n-show`` answers and the number of distinct answers.

Each finished run is written to ``--out`` at once; started again with the same settings, the
script skips the runs already there (so a long run can be resumed).

    OMP_NUM_THREADS=1 python scripts/span_vs_mlm.py --steps 600 --out data/results/ch07b_span_vs_mlm.json
    python scripts/span_vs_mlm.py --quick --out /tmp/span_vs_mlm.json     # a smoke test
"""

from __future__ import annotations

import argparse
import json
import math
import re
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
from llmbook.objectives import (BertMLM, SpanVocab, blank_examples, corrupted_items, fill_blank_mlm,  # noqa: E402
                                fill_blank_span, score_hidden_mlm, score_hidden_span, score_hidden_unigram,
                                train_denoiser, word_items)
from llmbook.transformer import Transformer, TransformerConfig  # noqa: E402

LN2 = math.log(2)
ITEM_SEEDS = {"val": {"word": 1, "span": 3, "mlm": 4}, "test": {"word": 2, "span": 5, "mlm": 6}}


def build(kind: str, V: int, d: int):
    if kind == "mlm":
        return BertMLM(BertConfig(vocab_size=V, hidden_size=d, n_layers=4, n_heads=4, intermediate_size=4 * d,
                                  max_position=64, dropout=0.0, attention_dropout=0.0))
    return Transformer(TransformerConfig(src_vocab_size=V, tgt_vocab_size=V, d_model=d, n_heads=4,
                                         n_encoder_layers=2, n_decoder_layers=2, d_ff=4 * d, dropout=0.0,
                                         max_len=64, norm_first=True, activation="gelu"))


def item_sets(splits, n: int) -> dict:
    """{part: {test name: (window, hidden positions) items}} and the word test's raw items."""
    sets, words = {}, {}
    for part, text in (("val", splits.val), ("test", splits.test)):
        seeds = ITEM_SEEDS[part]
        words[part] = blank_examples(text, n, seed=seeds["word"])
        sets[part] = {"word": word_items(words[part]),
                      "span": corrupted_items(text, n, "span", seed=seeds["span"]),
                      "mlm": corrupted_items(text, n, "mlm", seed=seeds["mlm"])}
    return sets, words


def dumps(out: dict) -> str:
    """JSON with one line per list of numbers (the per-window scores), so the file stays readable."""
    text = json.dumps(out, indent=1)
    return re.sub(r"\[\s+([-0-9.e,\s]+?)\s+\]", lambda m: "[" + ", ".join(v.strip() for v in m.group(1).split(",")) + "]",
                  text)


def bits_per_char(nats: list[list[float]]) -> list[float]:
    """Per item: the mean over its hidden characters, in bits."""
    return [round(sum(v) / len(v) / LN2, 4) for v in nats]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--d-model", type=int, default=128)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--n-items", type=int, default=500)
    ap.add_argument("--n-show", type=int, default=10, help="greedy validation answers kept per run")
    ap.add_argument("--quick", action="store_true", help="20 steps, 20 items, one seed (smoke test)")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    if args.quick:
        args.steps, args.n_items, args.seeds = 20, 20, [0]
    device = default_device()
    s = load_splits("shakespeare")
    vocab = SpanVocab(s.train + s.val + s.test)
    train = torch.tensor(vocab.encode(s.train))
    sets, words = item_sets(s, args.n_items)
    truth = {part: [w[a:a + n] for w, a, n in words[part]] for part in words}
    cmd = "OMP_NUM_THREADS=1 python scripts/span_vs_mlm.py " + " ".join(sys.argv[1:])
    meta = {"command": cmd, "steps": args.steps, "seeds": args.seeds, "d_model": args.d_model,
            "batch_size": 32, "block": 64, "lr": 2e-3, "n_items": args.n_items, "item_seeds": ITEM_SEEDS,
            "split": "load_splits(shakespeare) 80/10/10", "device": device.type}
    unigram = {part: {name: bits_per_char(score_hidden_unigram(s.train, items)) for name, items in tests.items()}
               for part, tests in sets.items()}
    out = {"meta": meta, "unigram": unigram, "runs": {"mlm": [], "span": []}}
    same = ("steps", "seeds", "d_model", "n_items", "item_seeds")
    if args.out.exists():  # resume: keep the runs made with the same settings
        old = json.loads(args.out.read_text())
        if all(old["meta"].get(k) == meta[k] for k in same):
            out["runs"] = old["runs"]
            print("resuming:", {k: [r["seed"] for r in v] for k, v in out["runs"].items()}, flush=True)

    def save():
        text = dumps(out)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(args.out, lambda tmp: Path(tmp).write_text(text))

    for seed in args.seeds:
        for kind in ("mlm", "span"):
            if any(r["seed"] == seed for r in out["runs"][kind]):
                continue
            torch.manual_seed(seed)
            model = build(kind, len(vocab), args.d_model).to(device)
            t0 = time.time()
            losses = train_denoiser(model, kind, train, vocab, args.steps, seed=seed)
            seconds = time.time() - t0
            run = {"seed": seed, "params": sum(p.numel() for p in model.parameters()),
                   "final_loss": sum(losses[-50:]) / len(losses[-50:]), "seconds": round(seconds, 1)}
            for part, tests in sets.items():
                for name, items in tests.items():
                    if kind == "mlm":
                        run[f"{part}_{name}_bits"] = bits_per_char(score_hidden_mlm(model, vocab, items))
                    else:
                        chars, layout = score_hidden_span(model, vocab, items)
                        run[f"{part}_{name}_bits"] = bits_per_char(chars)
                        # where the spans end: bits per item for the sentinels and [EOS]
                        run[f"{part}_{name}_layout_bits"] = sum(sum(v) for v in layout) / len(layout) / LN2
                # greedy answers on the word test (what the model writes, not what it believes)
                fill = fill_blank_mlm if kind == "mlm" else fill_blank_span
                raw = fill(model, vocab, words[part])
                got = [a.strip() for a in raw]  # a word has no spaces at its ends
                run[f"{part}_exact"] = sum(a == b for a, b in zip(got, truth[part])) / len(got)
                run[f"{part}_char"] = sum(sum(x == y for x, y in zip(a, b)) for a, b in zip(got, truth[part])) / sum(
                    len(b) for b in truth[part])
                if part == "val":
                    run["val_answers"], run["val_answers_raw"] = got[:args.n_show], raw[:args.n_show]
                    run["val_distinct_answers"] = len(set(raw))
            out["runs"][kind].append(run)
            out["runs"][kind].sort(key=lambda r: r["seed"])
            save()
            brief = {k: (round(sum(v) / len(v), 3) if isinstance(v, list) and k.endswith("bits") else v)
                     for k, v in run.items() if not k.startswith("val_answers")}
            print(kind, brief, flush=True)
    save()


if __name__ == "__main__":
    main()
