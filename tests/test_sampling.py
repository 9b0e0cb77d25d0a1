"""Sampling rules: kept sets, greedy, and bad arguments."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from llmbook.sampling import apply_temperature, kept_mask, sample_next, top_k_filter, top_p_filter


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), k=st.integers(1, 12), p=st.floats(0.05, 1.0), t=st.floats(0.3, 3.0))
def test_never_draws_outside_kept_set(seed, k, p, t):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(4, 12, generator=g) * 3
    keep = kept_mask(logits, t, k, p)
    ids = torch.stack([sample_next(logits, t, k, p, generator=g) for _ in range(50)], dim=-1)  # (4, 50)
    assert keep.gather(-1, ids).all()
    assert (keep.sum(-1) >= 1).all() and (keep.sum(-1) <= k).all()


def test_top_p_keeps_smallest_prefix_reaching_p():
    probs = torch.tensor([0.1, 0.4, 0.2, 0.3])
    kept = torch.isfinite(top_p_filter(probs.log(), 0.65))
    assert kept.tolist() == [False, True, False, True]  # 0.4 + 0.3 >= 0.65
    assert torch.isfinite(top_p_filter(probs.log(), 1.0)).all()
    assert torch.isfinite(top_p_filter(probs.log(), 1e-6)).sum() == 1


def test_top_k_and_temperature():
    logits = torch.tensor([[1.0, 5.0, 3.0, 4.0]])
    assert torch.isfinite(top_k_filter(logits, 2)).tolist() == [[False, True, False, True]]
    assert torch.isfinite(top_k_filter(logits, 99)).all()
    torch.testing.assert_close(apply_temperature(logits, 0.5), logits * 2)
    assert sample_next(logits, temperature=0).tolist() == [1]


def test_low_temperature_approaches_greedy():
    g = torch.Generator().manual_seed(0)
    logits = torch.tensor([1.0, 1.5, 0.2])
    draws = [int(sample_next(logits, 0.01, generator=g)) for _ in range(100)]
    assert set(draws) == {1}


@pytest.mark.parametrize("kwargs,match", [
    ({"temperature": -0.1}, "temperature"), ({"temperature": float("nan")}, "temperature"),
    ({"top_k": 0}, "top_k"), ({"top_k": 2.5}, "top_k"),
    ({"top_p": 0.0}, "top_p"), ({"top_p": 1.01}, "top_p"), ({"top_p": -1}, "top_p"),
])
def test_bad_arguments(kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        sample_next(torch.zeros(5), **kwargs)


def test_bad_logits():
    with pytest.raises(TypeError, match="logits"):
        sample_next([0.1, 0.2])
    with pytest.raises(TypeError, match="logits"):
        sample_next(torch.tensor([1, 2]))
