"""The toy task trains to its accuracy from a fixed seed (small enough for CI), and bad input."""

import pytest
import torch

from llmbook.device import seed_everything
from llmbook.toy_seq2seq import VOCAB_SIZE, DigitTask, exact_match, make_batch, train_seq2seq
from llmbook.transformer import Transformer, TransformerConfig


def test_reversal_reaches_99_percent():
    seed_everything(0)
    task = DigitTask("reverse", 1, 4)
    model = Transformer(TransformerConfig.small(vocab_size=VOCAB_SIZE, max_len=16))
    losses = train_seq2seq(model, task, steps=600, batch_size=64, lr=2e-3, warmup=50, seed=0, progress=False)
    assert losses[-1] < losses[0] / 10
    src, _, tgt = make_batch(task, 500, torch.Generator().manual_seed(1))
    assert exact_match(model, src, tgt) >= 0.99


def test_bad_input():
    with pytest.raises(ValueError, match="kind"):
        DigitTask("shuffle")
    with pytest.raises(ValueError, match="min_len"):
        DigitTask("reverse", 5, 2)
    with pytest.raises(ValueError, match="n"):
        make_batch(DigitTask(), 0)
    with pytest.raises(ValueError, match="steps"):
        train_seq2seq(Transformer(TransformerConfig.tiny(vocab_size=VOCAB_SIZE)), DigitTask(), 0)


def test_training_sources_replays_the_run_and_drop_seen_removes_them(monkeypatch):
    import llmbook.toy_seq2seq as ts

    task = DigitTask("reverse", 1, 3)
    recorded, calls = set(), []
    real = ts.make_batch

    def spy(*args, **kwargs):
        out = real(*args, **kwargs)
        recorded.update(DigitTask.to_text(r) for r in out[0].tolist())
        return out

    monkeypatch.setattr(ts, "make_batch", spy)
    model = Transformer(TransformerConfig.tiny(vocab_size=VOCAB_SIZE, max_len=8))
    ts.train_seq2seq(model, task, steps=6, batch_size=16, warmup=0, seed=3, progress=False,
                     callback=calls.append, callback_every=2)
    monkeypatch.setattr(ts, "make_batch", real)
    assert calls == [2, 4, 6]
    assert ts.training_sources(task, steps=6, batch_size=16, seed=3) == recorded
    src, _, tgt = make_batch(task, 400, torch.Generator().manual_seed(9))
    kept_src, kept_tgt = ts.drop_seen(src, tgt, recorded)
    kept = [DigitTask.to_text(r) for r in kept_src]
    assert len(kept) == len(set(kept)) and not set(kept) & recorded and len(kept_tgt) == len(kept)
    with pytest.raises(TypeError, match="seen"):
        ts.drop_seen(src, tgt, ["1"])
