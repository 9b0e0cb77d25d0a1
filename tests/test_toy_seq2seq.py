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
    losses = train_seq2seq(model, task, steps=400, batch_size=64, lr=2e-3, warmup=50, seed=0, progress=False)
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
