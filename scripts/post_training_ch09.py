"""Chapter 9's measured tables: the chapter-6 character GPT taught to answer "Last word: <line>".

Starts from data/checkpoints/ch06_baby_shakespeare.safetensors (pre-trained on
``load_splits("shakespeare").train``). A question is a spoken line and its answer the line's last
word (``llmbook.line_tasks.last_word_questions``): every line of the training part is a training
question; validation and test are random samples of distinct lines of the other two parts
(``sample_questions``, leaving out the few lines that also occur in the training part), so held-out
questions are lines that neither pre-training nor fine-tuning saw. A reply is right when greedy decoding writes exactly the word and its newline
(``greedy_match``). Every accuracy is stored beside the two constant baselines
(``constant_baselines``) and the test replies are sorted into kinds (``kind_counts``).

Decisions are taken on validation, with seed 0:
- the learning rate of full fine-tuning (cosine decay to a tenth) from ``--lr-grid``; masked,
  unmasked and packed runs all use it (same budget, same schedule);
- the learning rate of LoRA (r=8, alpha=16 on every linear layer of the blocks) from ``--lora-lr-grid``;
- the learning rates of DPO and of its equal-budget baseline from ``--dpo-lr-grid``.
The chosen runs of the search are seed 0's runs. Every variant runs with seeds 0, 1, 2 (a seed fixes the batches, so runs of one seed see
the same questions in the same order and the comparisons are paired by seed); test is scored
once per run, at its end.

Runs, per seed: full fine-tuning, loss on the answer only (masked, padded batches); the same with
the loss on every character (unmasked); the same with the batch's questions packed into rows of 64
characters (packed); LoRA. Then, from the masked full model (the reference): preference pairs from its
own mistakes on ``--pair-questions`` training questions (the right word preferred to its wrong greedy
reply), DPO on them, and, as the equal-budget baseline, SFT on the pairs' right answers alone with the
same steps and batch size.

    OMP_NUM_THREADS=1 nice -n 10 python scripts/post_training_ch09.py --jobs 2 --out data/results/ch09_post_training.json
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "lib"))

from llmbook.charvocab import CharVocab  # noqa: E402
from llmbook.data import load_splits  # noqa: E402
from llmbook.gpt import GPT, GPTConfig  # noqa: E402
from llmbook.line_tasks import constant_baselines, kind_counts, last_word_questions, sample_questions  # noqa: E402
from llmbook.lora import apply_lora, trainable_parameters  # noqa: E402
from llmbook.post_training import (dpo_train, greedy_answers, greedy_match, pad_batch, sequence_logprobs,  # noqa: E402
                                   sft_batches, sft_example, sft_train, token_kl)
from llmbook.train import load_checkpoint  # noqa: E402

CKPT = ROOT / "data/checkpoints/ch06_baby_shakespeare.safetensors"
LORA_TARGETS = ["c_attn", "attn.c_proj", "c_fc", "mlp.c_proj"]
PACK_BLOCK = 64          # the model's context: packed rows fill it
SAMPLE_SEED = 0          # the held-out samples (validation and test are different parts of the corpus)


def load_base() -> tuple[GPT, CharVocab]:
    """The chapter-6 model; its config is a JSON object in the checkpoint's metadata (nothing is evaluated)."""
    meta = load_checkpoint(CKPT)["meta"]
    cfg = meta["gpt_config"]
    if not isinstance(cfg, dict):
        raise ValueError(f"{CKPT}: meta['gpt_config'] must be a JSON object, got {type(cfg).__name__}")
    model = GPT(GPTConfig(**cfg))
    load_checkpoint(CKPT, model)
    return model.eval(), CharVocab.from_json(meta["vocab"])


def questions(n_val: int, n_test: int) -> dict[str, list[tuple[str, str]]]:
    s = load_splits("shakespeare")
    q = {k: last_word_questions(getattr(s, k)) for k in ("train", "val", "test")}
    seen = {x for x, _ in q["train"]}   # a line that also occurs in training is not a held-out question
    q["val"] = sample_questions(q["val"], n_val, SAMPLE_SEED, exclude=seen)
    q["test"] = sample_questions(q["test"], n_test, SAMPLE_SEED, exclude=seen)
    return q


def encode_qa(vocab: CharVocab, q: str, a: str, mask: bool = True):
    ids, labels = sft_example(vocab.encode(q), vocab.encode(a + "\n"))
    return ids, (labels if mask else list(ids))


def hits(model, vocab, qs) -> str:
    """One character per question: 1 if greedy decoding writes the right word and stops, else 0."""
    ok = greedy_match(model, vocab.encode, [q for q, _ in qs], [a + "\n" for _, a in qs])
    return "".join("1" if v else "0" for v in ok.tolist())


def score(model, vocab, q, kinds: bool) -> dict:
    out = {}
    for split in ("val", "test"):
        h = hits(model, vocab, q[split])
        out[split] = {"accuracy": h.count("1") / len(h), "hits": h}
    if kinds:  # what the wrong test replies are
        replies = greedy_answers(model, vocab.encode, vocab.decode, [x for x, _ in q["test"]], max_new=16)
        out["test"]["kinds"] = kind_counts(replies, q["test"])
        out["test"]["distinct_replies"] = len(set(replies))
        out["test"]["replies"] = replies
    return out


# ------------------------------------------------------------------------------------------ work units

CTX: dict = {}   # base, vocab, questions, args: set once in the parent, inherited by forked workers


def unit_sft(kind: str, seed: int, lr: float) -> dict:
    """One SFT run: kind is full (masked, padded), unmasked, packed or lora."""
    torch.set_num_threads(1)
    base, vocab, q, args = CTX["base"], CTX["vocab"], CTX["q"], CTX["args"]
    data = [encode_qa(vocab, a, b, mask=kind != "unmasked") for a, b in q["train"]]
    pack = PACK_BLOCK if kind == "packed" else None
    torch.manual_seed(seed)
    model = copy.deepcopy(base)
    if kind == "lora":
        apply_lora(model, LORA_TARGETS, r=8, alpha=16)
    trainable, total = trainable_parameters(model)
    positions = sum(x.numel() for x, _ in sft_batches(data, args.steps, args.batch_size, seed, pack))
    t = time.time()
    losses = sft_train(model, data, args.steps, lr, args.batch_size, seed, min_lr=lr / 10, pack_block=pack)
    row = {"kind": kind, "seed": seed, "lr": lr, "trainable": trainable, "total": total,
           "adamw_state_numbers": 2 * trainable, "positions": positions, "seconds": round(time.time() - t, 1),
           "final_train_loss": sum(losses[-10:]) / 10, **score(model, vocab, q, kinds=True)}
    print(f"{kind:9s} seed {seed} lr {lr:g}: val {row['val']['accuracy']:.3f} test {row['test']['accuracy']:.3f} "
          f"({row['seconds']:.0f} s)", flush=True)
    if kind == "full":
        row["_state"] = {k: v.clone() for k, v in model.state_dict().items()}
    return row


def unit_pairs(seed: int, state: dict) -> dict:
    """Preference pairs from the reference's own mistakes: training questions and validation questions."""
    torch.set_num_threads(1)
    base, vocab, q, args = CTX["base"], CTX["vocab"], CTX["q"], CTX["args"]
    ref = copy.deepcopy(base)
    ref.load_state_dict(state)
    ref.eval()
    pool = sample_questions(q["train"], args.pair_questions, 1000 + seed)   # a fresh draw per seed
    out = {}
    for name, qs in (("train", pool), ("val", q["val"])):
        replies = greedy_answers(ref, vocab.encode, vocab.decode, [x for x, _ in qs], max_new=16)
        out[name] = [(x, a, r) for (x, a), r in zip(qs, replies) if r != a and r]   # (question, right, wrong reply)
    return out


@torch.no_grad()
def preference_report(policy, ref, vocab, triples) -> dict:
    """On held-out pairs: mean log-ratio log pi/pi_ref of the chosen and rejected answers, their margin,
    and the KL(pi || pi_ref) per answer token on the chosen answers."""
    xc, yc = pad_batch([encode_qa(vocab, x, a) for x, a, _ in triples], 0)
    xr, yr = pad_batch([encode_qa(vocab, x, r) for x, _, r in triples], 0)
    pol_c, ref_c = policy(xc)[0], ref(xc)[0]
    chosen = sequence_logprobs(pol_c, yc) - sequence_logprobs(ref_c, yc)
    rejected = sequence_logprobs(policy(xr)[0], yr) - sequence_logprobs(ref(xr)[0], yr)
    return {"chosen_logratio": float(chosen.mean()), "rejected_logratio": float(rejected.mean()),
            "margin": float((chosen - rejected).mean()), "kl_to_reference": float(token_kl(pol_c, ref_c, yc))}


def unit_pref(kind: str, seed: int, lr: float, state: dict, pairs: dict) -> dict:
    """DPO on the pairs, or (kind "sft_on_chosen") SFT on their right answers with the same budget."""
    torch.set_num_threads(1)
    base, vocab, q, args = CTX["base"], CTX["vocab"], CTX["q"], CTX["args"]
    ref = copy.deepcopy(base)
    ref.load_state_dict(state)
    ref.eval()
    policy = copy.deepcopy(ref)
    train = [(encode_qa(vocab, x, a), encode_qa(vocab, x, r)) for x, a, r in pairs["train"]]
    t = time.time()
    torch.manual_seed(seed)
    if kind == "dpo":
        losses = dpo_train(policy, ref, train, args.dpo_steps, lr, beta=args.beta, batch_size=args.batch_size, seed=seed)
    else:
        losses = sft_train(policy, [c for c, _ in train], args.dpo_steps, lr, args.batch_size, seed)
    row = {"kind": kind, "seed": seed, "lr": lr, "pairs": len(train), "seconds": round(time.time() - t, 1),
           "losses": losses, **score(policy, vocab, q, kinds=True),
           "heldout_pairs": {"n": len(pairs["val"]), **preference_report(policy, ref, vocab, pairs["val"])}}
    print(f"{kind:13s} seed {seed} lr {lr:g}: val {row['val']['accuracy']:.3f} test {row['test']['accuracy']:.3f} "
          f"KL {row['heldout_pairs']['kl_to_reference']:.3f} ({row['seconds']:.0f} s)", flush=True)
    return row


def run_units(pool, fn, arglist):
    if pool is None:
        return [fn(*a) for a in arglist]
    return pool.starmap(fn, arglist)


def best(rows: list[dict]) -> dict:
    """The row with the highest validation accuracy (ties: the smaller learning rate)."""
    return max(rows, key=lambda r: (r["val"]["accuracy"], -r["lr"]))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=300, help="SFT steps per run")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--lr-grid", type=float, nargs="+", default=[5e-4, 1e-3, 2e-3])
    ap.add_argument("--lora-lr-grid", type=float, nargs="+", default=[3e-3, 1e-2, 3e-2])
    ap.add_argument("--dpo-lr-grid", type=float, nargs="+", default=[1e-5, 3e-5, 1e-4, 3e-4])
    ap.add_argument("--dpo-steps", type=int, default=40)
    ap.add_argument("--beta", type=float, default=0.1)
    ap.add_argument("--pair-questions", type=int, default=1000, help="training questions the reference answers")
    ap.add_argument("--n-val", type=int, default=400)
    ap.add_argument("--n-test", type=int, default=400)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--jobs", type=int, default=1, help="worker processes (the numbers do not change)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    t0 = time.time()
    base, vocab = load_base()
    q = questions(args.n_val, args.n_test)
    CTX.update(base=base, vocab=vocab, q=q, args=args)
    train_answers = [a for _, a in q["train"]]
    baselines = {s: constant_baselines(train_answers, [a for _, a in q[s]]) for s in ("val", "test")}
    base_eval = score(base, vocab, q, kinds=True)
    print("baselines", baselines, "base", base_eval["val"]["accuracy"], base_eval["test"]["accuracy"], flush=True)
    pool = None
    if args.jobs > 1:
        import multiprocessing as mp

        pool = mp.get_context("fork").Pool(args.jobs)
    s0, rest = args.seeds[0], args.seeds[1:]
    # 1. learning rates, on validation with the first seed; the chosen runs are that seed's runs
    grid = run_units(pool, unit_sft, [("full", s0, lr) for lr in args.lr_grid]
                     + [("lora", s0, lr) for lr in args.lora_lr_grid])
    full_grid, lora_grid = grid[:len(args.lr_grid)], grid[len(args.lr_grid):]
    chosen_full, chosen_lora = best(full_grid), best(lora_grid)
    lr_full, lr_lora = chosen_full["lr"], chosen_lora["lr"]
    print(f"chosen on validation: full lr {lr_full:g}, LoRA lr {lr_lora:g}", flush=True)
    # 2. every variant, every seed
    units = [(k, s, lr_lora if k == "lora" else lr_full) for s in args.seeds
             for k in ("full", "unmasked", "packed", "lora") if not (s == s0 and k in ("full", "lora"))]
    sft_rows = [chosen_full, chosen_lora] + run_units(pool, unit_sft, units)
    states = {r["seed"]: r["_state"] for r in sft_rows if r["kind"] == "full"}
    # 3. preference pairs from each seed's full model, then the DPO / SFT-on-chosen learning rates on seed 0
    pairs = dict(zip(args.seeds, run_units(pool, unit_pairs, [(s, states[s]) for s in args.seeds])))
    pgrid = run_units(pool, unit_pref, [(k, s0, lr, states[s0], pairs[s0]) for k in ("dpo", "sft_on_chosen")
                                        for lr in args.dpo_lr_grid])
    n = len(args.dpo_lr_grid)
    chosen_dpo, chosen_soc = best(pgrid[:n]), best(pgrid[n:])
    lr_dpo, lr_soc = chosen_dpo["lr"], chosen_soc["lr"]
    print(f"chosen on validation: DPO lr {lr_dpo:g}, SFT-on-chosen lr {lr_soc:g}", flush=True)
    pref_rows = [chosen_dpo, chosen_soc] + run_units(
        pool, unit_pref, [(k, s, lr, states[s], pairs[s]) for s in rest
                          for k, lr in (("dpo", lr_dpo), ("sft_on_chosen", lr_soc))])
    for r in grid + sft_rows:
        r.pop("_state", None)
    if pool is not None:
        pool.close()
        pool.join()
    runs: dict[str, list[dict]] = {}
    for r in sft_rows + pref_rows:
        runs.setdefault(r["kind"], []).append(r)
    for rs in runs.values():
        rs.sort(key=lambda r: r["seed"])
    command = "OMP_NUM_THREADS=1 nice -n 10 python " + " ".join(
        ["scripts/post_training_ch09.py"] + [a.as_posix() if isinstance(a, Path) else a
                                             for a in (argv if argv is not None else sys.argv[1:])])
    result = {
        "meta": {"command": command, "steps": args.steps, "batch_size": args.batch_size, "seeds": args.seeds,
                 "schedule": "AdamW, cosine from lr to lr/10", "pack_block": PACK_BLOCK,
                 "split": "load_splits(shakespeare) 80/10/10", "task": "Last word: <line> -> the line's last word",
                 "sample_seed": SAMPLE_SEED, "n_questions": {k: len(v) for k, v in q.items()},
                 "lora": {"targets": LORA_TARGETS, "r": 8, "alpha": 16},
                 "grids": {"full": args.lr_grid, "lora": args.lora_lr_grid, "dpo": args.dpo_lr_grid},
                 "chosen_lr": {"full": lr_full, "unmasked": lr_full, "packed": lr_full, "lora": lr_lora,
                               "dpo": lr_dpo, "sft_on_chosen": lr_soc},
                 "dpo_steps": args.dpo_steps, "dpo_beta": args.beta, "pair_questions": args.pair_questions,
                 "base_checkpoint": CKPT.relative_to(ROOT).as_posix(), "wall_seconds": round(time.time() - t0),
                 "jobs": args.jobs},
        "baselines": baselines, "base": base_eval,
        "lr_search": {name: [{"lr": r["lr"], "val_accuracy": r["val"]["accuracy"]} for r in rows]
                      for name, rows in (("full", full_grid), ("lora", lora_grid), ("dpo", pgrid[:n]),
                                         ("sft_on_chosen", pgrid[n:]))},
        "runs": runs,
    }
    print(f"done in {time.time() - t0:.0f} s", flush=True)
    if args.out:
        from llmbook.atomic import write_atomic

        args.out.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(args.out, lambda tmp: Path(tmp).write_text(json.dumps(result, indent=1) + "\n"))


if __name__ == "__main__":
    main()
