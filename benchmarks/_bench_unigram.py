"""Unigram training time against SentencePiece's (Python EM + pruning vs C++).

``run()`` returns ``{"unigram_train_ratio_vs_sentencepiece": ...}``: our
``Unigram.train`` time / ``SentencePieceTrainer.train`` time, both single-threaded, on
~1 MB of Shakespeare at vocabulary 8,000 (target <= 20). It also reports the held-out
tokens per character of both (they should agree within 2%).
``benchmarks/bench_tokenizers.py`` prints these; run this file alone with
``python benchmarks/_bench_unigram.py``.
"""

from __future__ import annotations

import io
import time

N_CHARS = 1_000_000
VOCAB = 8_000


def run(n_chars: int = N_CHARS, vocab_size: int | None = None) -> dict[str, float]:
    """Time both trainers; ``vocab_size`` defaults to 8,000 (1,000 below 500k characters,
    where SentencePiece would refuse 8,000 as too many pieces for the text)."""
    import sentencepiece as spm

    if vocab_size is None:
        vocab_size = VOCAB if n_chars >= 500_000 else 1_000

    from llmbook.data import load_text, split_text
    from llmbook.tokenizers import Unigram

    train, held_out = split_text(load_text("shakespeare")[:n_chars], 0.1)
    lines = held_out.splitlines()

    t0 = time.perf_counter()
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
    t_sp = time.perf_counter() - t0

    t0 = time.perf_counter()
    ours = Unigram.train(train, vocab_size, progress=False)
    t_ours = time.perf_counter() - t0

    sp = spm.SentencePieceProcessor(model_proto=buf.getvalue())
    n = sum(len(line) for line in lines)
    tpc_sp = sum(len(sp.encode(line)) for line in lines) / n
    tpc_ours = sum(len(ours.encode(line)) for line in lines) / n
    return {
        "unigram_train_seconds": round(t_ours, 2),
        "sentencepiece_train_seconds": round(t_sp, 2),
        "unigram_tokens_per_char_vs_sentencepiece": round(tpc_ours / tpc_sp, 4),
        "unigram_train_ratio_vs_sentencepiece": round(t_ours / t_sp, 2),
    }


if __name__ == "__main__":
    for name, value in run().items():
        print(f"{name}={value}")
