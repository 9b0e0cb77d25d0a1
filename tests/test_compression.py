"""Arithmetic coder: exact round trips, size close to the ideal -log2 p."""

import random

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from llmbook.compression import compress, decompress, gpt_predictor, ideal_bits, quantize_probs
from llmbook.gpt import GPT, GPTConfig


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(0, 5), max_size=300), st.lists(st.floats(0.0, 1.0), min_size=6, max_size=6))
def test_round_trip_any_sequence(symbols, weights):
    probs = [w + 1e-3 for w in weights]
    f = lambda prefix: probs  # noqa: E731
    assert decompress(compress(symbols, f), f) == symbols


def test_size_is_close_to_ideal():
    rng = random.Random(0)
    probs = [0.9] + [0.1 / 9] * 9
    f = lambda prefix: probs  # noqa: E731
    symbols = rng.choices(range(10), weights=probs, k=3000)
    data = compress(symbols, f)
    code_bits = (len(data) - 4) * 8
    assert code_bits <= ideal_bits(symbols, f) * 1.01 + 16


def test_round_trip_with_a_gpt_past_its_context():
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=20, block_size=8, n_layer=1, n_head=2, d_model=16, d_ff=32))
    rng = random.Random(1)
    symbols = [rng.randrange(20) for _ in range(30)]  # longer than block_size: the window slides
    data = compress(symbols, gpt_predictor(model))
    assert decompress(data, gpt_predictor(model)) == symbols


def test_quantize_and_bad_input():
    f = quantize_probs(torch.tensor([0.0, 1.0, 0.0]))
    assert f.sum() == 1 << 16 and (f >= 1).all()
    with pytest.raises(ValueError, match="probs"):
        quantize_probs([-0.1, 1.1])
    with pytest.raises(ValueError, match="symbol"):
        compress([7], lambda p: [0.5, 0.5])
    with pytest.raises(ValueError, match="data"):
        decompress(b"\x00", lambda p: [0.5, 0.5])


def test_quantize_a_batch_row_by_row():
    # A batch (..., V) is quantised row by row, each row exactly as a lone vector would be
    probs = torch.softmax(3 * torch.randn(2, 5, 81, generator=torch.Generator().manual_seed(0),
                                          dtype=torch.float64), -1)
    probs[0, 1] = 0.0
    probs[0, 1, 7] = 1.0                                       # a one-hot row
    batch = quantize_probs(probs)
    assert batch.shape == (2, 5, 81) and (batch.sum(-1) == 1 << 16).all() and batch.min() >= 1
    for i in range(2):
        for j in range(5):
            assert (batch[i, j] == quantize_probs(probs[i, j])).all()
    with pytest.raises(ValueError, match="probs sum to zero in some row"):
        quantize_probs([[0.5, 0.5], [0.0, 0.0]])
