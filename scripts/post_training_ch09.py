"""Chapter 9's measured tables: the chapter-6 character GPT taught to answer "Who says: <line>?".

Starts from data/checkpoints/ch06_baby_shakespeare.safetensors (pre-trained on
``load_splits("shakespeare").train``). Questions come from the speeches of six speakers in
each part of the same split (``llmbook.post_training.speaker_questions``), so held-out
questions are lines neither pre-training nor fine-tuning saw. Answers are read as a
six-way choice (``score_answers``: the most likely speaker name).

Runs, for each seed: full fine-tuning with the prompt-masked loss; the same with the loss
on every token (unmasked); LoRA (r=8 on every linear layer of the blocks); DPO from the
masked full fine-tune on pairs (the speaker's name in title case preferred to it in
capitals). Validation numbers for every run; test numbers once, at the end of each run.
Learning rates are fixed in advance (full 1e-3, LoRA 3e-3, DPO 1e-3), not tuned.

    OMP_NUM_THREADS=1 python scripts/post_training_ch09.py --out data/results/ch09_post_training.json
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "lib"))

from llmbook.charvocab import CharVocab  # noqa: E402
from llmbook.data import load_splits  # noqa: E402
from llmbook.gpt import GPT, GPTConfig  # noqa: E402
from llmbook.lora import apply_lora, trainable_parameters  # noqa: E402
from llmbook.post_training import (causal_lm_loss, dpo_train, pad_batch, score_answers, sft_example,  # noqa: E402
                                   sft_train, speaker_questions, token_kl)
from llmbook.train import load_checkpoint  # noqa: E402

SPEAKERS = ["GLOUCESTER", "FALSTAFF", "HAMLET", "IAGO", "BRUTUS", "OTHELLO"]
TITLE = [s.title() for s in SPEAKERS]
CKPT = ROOT / "data/checkpoints/ch06_baby_shakespeare.safetensors"
LORA_TARGETS = ["c_attn", "attn.c_proj", "c_fc", "mlp.c_proj"]


def load_base() -> tuple[GPT, CharVocab]:
    import ast

    meta = load_checkpoint(CKPT)["meta"]
    cfg = meta["gpt_config"]
    cfg = cfg if isinstance(cfg, dict) else ast.literal_eval(cfg)
    model = GPT(GPTConfig(**cfg))
    load_checkpoint(CKPT, model)
    return model.eval(), CharVocab.from_json(meta["vocab"])


def task(n_val: int = 200, n_test: int = 300):
    """Questions of the three parts; validation and test thinned evenly to n_val and n_test (every k-th)."""
    s = load_splits("shakespeare")
    q = {k: speaker_questions(getattr(s, k), SPEAKERS) for k in ("train", "val", "test")}
    for k, n in (("val", n_val), ("test", n_test)):
        q[k] = q[k][::max(1, len(q[k]) // n)][:n]
    return q


def encode_qa(vocab, q, a, mask=True):
    ids, labels = sft_example(vocab.encode(q), vocab.encode(a + "\n"))
    return ids, (labels if mask else list(ids))


@torch.no_grad()
def evaluate(model, vocab, qs) -> dict:
    model.eval()
    scores = score_answers(model, vocab.encode, [q for q, _ in qs], [a + "\n" for a in SPEAKERS])
    gold = torch.tensor([SPEAKERS.index(a) for _, a in qs])
    x, y = pad_batch([encode_qa(vocab, q, a) for q, a in qs], 0)
    return {"accuracy": float((scores.argmax(1) == gold).float().mean()), "answer_loss": float(causal_lm_loss(model(x)[0], y))}


@torch.no_grad()
def evaluate_format(model, ref, vocab, qs) -> dict:
    """Constraint success (title case chosen among 12 answers), accuracy ignoring case, margin, KL to ref."""
    cands = [a + "\n" for a in SPEAKERS + TITLE]
    scores = score_answers(model, vocab.encode, [q for q, _ in qs], cands)
    pick = scores.argmax(1)
    gold = torch.tensor([SPEAKERS.index(a) for _, a in qs])
    chosen = [encode_qa(vocab, q, a.title()) for q, a in qs]
    rejected = [encode_qa(vocab, q, a) for q, a in qs]
    xc, yc = pad_batch(chosen, 0)
    xr, yr = pad_batch(rejected, 0)
    from llmbook.post_training import sequence_logprobs
    pol_c, ref_c = model(xc)[0], ref(xc)[0]
    margin = (sequence_logprobs(pol_c, yc) - sequence_logprobs(ref_c, yc)) - (
        sequence_logprobs(model(xr)[0], yr) - sequence_logprobs(ref(xr)[0], yr))
    return {"title_case_rate": float((pick >= len(SPEAKERS)).float().mean()),
            "accuracy_any_case": float((pick % len(SPEAKERS) == gold).float().mean()),
            "logratio_margin": float(margin.mean()),
            "kl_to_reference": float(token_kl(pol_c, ref_c, yc))}


def mean_se(xs):
    m = sum(xs) / len(xs)
    se = math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1) / len(xs)) if len(xs) > 1 else float("nan")
    return {"mean": m, "se": se, "values": xs}


def run_seed(seed: int, args, base: GPT, vocab: CharVocab, q: dict) -> dict:
    """Full (masked), unmasked and LoRA fine-tuning, then DPO from the full one: one seed."""
    torch.set_num_threads(1)
    data = {m: [encode_qa(vocab, a, b, m == "masked") for a, b in q["train"]] for m in ("masked", "unmasked")}
    pairs = [(encode_qa(vocab, a, b.title()), encode_qa(vocab, a, b)) for a, b in q["train"]]
    rows = {}
    for kind in ("full", "unmasked", "lora"):
        torch.manual_seed(seed)
        model = copy.deepcopy(base)
        if kind == "lora":
            apply_lora(model, LORA_TARGETS, r=8, alpha=16)
        trainable, total = trainable_parameters(model)
        t = time.time()
        losses = sft_train(model, data["unmasked" if kind == "unmasked" else "masked"], args.steps,
                           3e-3 if kind == "lora" else 1e-3, args.batch_size, seed)
        rows[kind] = {"seed": seed, "trainable": trainable, "total": total, "adamw_state_numbers": 2 * trainable,
                      "seconds": round(time.time() - t, 1), "final_train_loss": losses[-1],
                      "val": evaluate(model, vocab, q["val"]), "test": evaluate(model, vocab, q["test"])}
        print(kind, rows[kind], flush=True)
        if kind == "full":
            ref = model
    policy = copy.deepcopy(ref)
    before = {"val": evaluate_format(policy, ref, vocab, q["val"]), "test": evaluate_format(policy, ref, vocab, q["test"])}
    t = time.time()
    losses = dpo_train(policy, ref, pairs, args.dpo_steps, 1e-3, beta=0.1, batch_size=args.batch_size, seed=seed)
    rows["dpo"] = {"seed": seed, "seconds": round(time.time() - t, 1), "losses": losses[::5], "before": before,
                   "after": {"val": evaluate_format(policy, ref, vocab, q["val"]),
                             "test": evaluate_format(policy, ref, vocab, q["test"])}}
    print("dpo", rows["dpo"], flush=True)
    return rows


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=200, help="SFT steps per run")
    ap.add_argument("--dpo-steps", type=int, default=30)
    ap.add_argument("--n-val", type=int, default=200, help="validation questions (evenly thinned)")
    ap.add_argument("--n-test", type=int, default=300, help="test questions (evenly thinned)")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--jobs", type=int, default=1, help="processes, one seed each (the numbers do not change)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    torch.set_num_threads(max(1, torch.get_num_threads()))
    base, vocab = load_base()
    q = task(args.n_val, args.n_test)
    runs: dict[str, list[dict]] = {"full": [], "unmasked": [], "lora": [], "dpo": []}
    base_eval = {"val": evaluate(base, vocab, q["val"]), "test": evaluate(base, vocab, q["test"])}
    print("base", base_eval, flush=True)
    if args.jobs > 1:  # one process per seed: each seed's numbers do not depend on the others
        import multiprocessing as mp

        with mp.get_context("fork").Pool(args.jobs) as pool:
            per_seed = pool.starmap(run_seed, [(seed, args, base, vocab, q) for seed in args.seeds])
    else:
        per_seed = [run_seed(seed, args, base, vocab, q) for seed in args.seeds]
    for rows in per_seed:
        for k, row in rows.items():
            runs[k].append(row)
    summary = {k: {split: {m: mean_se([r[split][m] for r in rs]) for m in ("accuracy", "answer_loss")}
                   for split in ("val", "test")} for k, rs in runs.items() if k != "dpo"}
    summary["dpo"] = {when: {split: {m: mean_se([r[when][split][m] for r in runs["dpo"]])
                                     for m in ("title_case_rate", "accuracy_any_case", "logratio_margin", "kl_to_reference")}
                             for split in ("val", "test")} for when in ("before", "after")}
    command = "OMP_NUM_THREADS=1 python " + " ".join(["scripts/post_training_ch09.py"] + [a.as_posix() if isinstance(a, Path) else a for a in (argv if argv is not None else sys.argv[1:])])
    result = {"meta": {"command": command, "steps": args.steps, "dpo_steps": args.dpo_steps, "batch_size": args.batch_size,
                       "seeds": args.seeds, "split": "load_splits(shakespeare) 80/10/10", "speakers": SPEAKERS,
                       "n_questions": {k: len(v) for k, v in q.items()}, "lora": {"targets": LORA_TARGETS, "r": 8, "alpha": 16},
                       "lr": {"full": 1e-3, "unmasked": 1e-3, "lora": 3e-3, "dpo": 1e-3}, "dpo_beta": 0.1,
                       "base_checkpoint": CKPT.relative_to(ROOT).as_posix()},
              "base": base_eval, "runs": runs, "summary": summary}
    print(json.dumps(summary, indent=1))
    if args.out:
        from llmbook.atomic import write_atomic

        args.out.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(args.out, lambda tmp: Path(tmp).write_text(json.dumps(result, indent=1) + "\n"))


if __name__ == "__main__":
    main()
