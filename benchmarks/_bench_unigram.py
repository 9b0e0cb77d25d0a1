"""Unigram training time against SentencePiece's (Python EM + pruning vs C++).

``run()`` returns ``{"unigram_train_ratio_vs_sentencepiece": ...}``: our
``Unigram.train`` time / ``SentencePieceTrainer.train`` time, both single-threaded, on
~1 MB of Shakespeare at vocabulary 8,000 (target <= 20; sentencepiece refuses 8,000
pieces for half of that text). It also reports the held-out
tokens per character of both (they should agree within 2%).
``benchmarks/bench_tokenizers.py`` records these through ``add_results``; run this file
alone with ``python benchmarks/_bench_unigram.py [--quick]``.

Timing follows ``benchmarks/_timing.py``: one warm-up run of each trainer, then
``repeats`` runs alternating (A B B A ...), CPU time of this process (both trainers are
single-threaded), medians and interquartile ranges, the ratio from paired medians.
"""

from __future__ import annotations

import io
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _timing import Results, Timing, measure, quick_mode, ratio  # noqa: E402

N_CHARS = 1_000_000
VOCAB = 8_000


def measure_unigram(n_chars: int = N_CHARS, vocab_size: int | None = None, repeats: int = 5) -> dict:
    """Time both trainers (alternating); return their ``Timing``s, the ratio and tokens per character."""
    import sentencepiece as spm

    if vocab_size is None:
        vocab_size = VOCAB if n_chars >= 500_000 else 1_000

    from llmbook.data import load_text, split_text
    from llmbook.tokenizers import Unigram

    train, held_out = split_text(load_text("shakespeare")[:n_chars], 0.1)
    lines = held_out.splitlines()
    models: dict = {}

    def sp_train():
        buf = io.BytesIO()
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(train.splitlines()),
            model_writer=buf,
            vocab_size=vocab_size,
            model_type="unigram",
            normalization_rule_name="identity",
            character_coverage=1.0,
            num_threads=1,
            minloglevel=2,
        )
        models["sp"] = buf.getvalue()

    def ours_train():
        models["ours"] = Unigram.train(train, vocab_size, progress=False)

    t = measure({"ours": ours_train, "sentencepiece": sp_train}, repeats=repeats, warmup=1, clock=time.process_time)
    sp = spm.SentencePieceProcessor(model_proto=models["sp"])
    n = sum(len(line) for line in lines)
    tpc_sp = sum(len(sp.encode(line)) for line in lines) / n
    tpc_ours = sum(len(models["ours"].encode(line)) for line in lines) / n
    return {"ours": t["ours"], "sentencepiece": t["sentencepiece"], "ratio": ratio(t["ours"], t["sentencepiece"]),
            "tokens_per_char_ratio": tpc_ours / tpc_sp, "n_chars": n_chars, "vocab_size": vocab_size}


def add_results(res: Results, n_chars: int = N_CHARS, vocab_size: int | None = None, repeats: int = 5) -> None:
    m = measure_unigram(n_chars, vocab_size, repeats)
    ours: Timing = m["ours"]
    print(f"Unigram training, {m['n_chars']:,} characters, vocab {m['vocab_size']:,}:\n  {ours}\n  {m['sentencepiece']}\n"
          f"  held-out tokens per character, ours / sentencepiece: {m['tokens_per_char_ratio']:.4f}", flush=True)
    res.add("unigram_train_ratio_vs_sentencepiece", m["ratio"], goal="<= 20", higher_is_better=False,
            reference="sentencepiece (C++)",
            description=f"Unigram training time / sentencepiece's, {m['n_chars'] // 1000} k characters, "
                        f"vocab {m['vocab_size']:,}")
    res.add("unigram_tokens_per_char_vs_sentencepiece", m["tokens_per_char_ratio"], unit="ratio", digits=4,
            reference="sentencepiece (C++)",
            description="held-out tokens per character, ours / sentencepiece's (a quality check: ~1.0)")


def run(n_chars: int = N_CHARS, vocab_size: int | None = None, repeats: int = 5) -> dict[str, float]:
    """The numbers alone: median seconds of both trainers, tokens per character, the time ratio."""
    m = measure_unigram(n_chars, vocab_size, repeats)
    return {
        "unigram_train_seconds": round(m["ours"].median, 2),
        "sentencepiece_train_seconds": round(m["sentencepiece"].median, 2),
        "unigram_tokens_per_char_vs_sentencepiece": round(m["tokens_per_char_ratio"], 4),
        "unigram_train_ratio_vs_sentencepiece": round(m["ratio"].value, 2),
    }


if __name__ == "__main__":
    quick = quick_mode()
    for name, value in (run(n_chars=100_000, repeats=3) if quick else run()).items():
        print(f"{name}={value}")
