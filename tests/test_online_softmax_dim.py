"""online_softmax along any dim (issue 32): equal to torch.softmax, and the 1-D path unchanged."""

from __future__ import annotations

import pytest
import torch

from llmbook.flash import online_softmax


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_online_softmax_any_dim_equals_softmax(dtype):
    torch.manual_seed(0)
    x = torch.randn(3, 4, 5, dtype=dtype) * 20  # large spreads: the running maximum matters
    for dim in (0, 1, 2, -1, -2, -3):
        torch.testing.assert_close(online_softmax(x, dim=dim), torch.softmax(x, dim=dim))
    assert torch.equal(online_softmax(x), online_softmax(x, dim=2))


def test_rows_are_independent_and_1d_is_each_row():
    x = torch.randn(4, 6, dtype=torch.float64)
    x[1, 3] = 1e4  # one huge entry only in row 1
    out = online_softmax(x, dim=1)
    for i in range(4):
        torch.testing.assert_close(out[i], online_softmax(x[i]), rtol=0, atol=1e-15)
    torch.testing.assert_close(out.sum(dim=1), torch.ones(4, dtype=torch.float64))


def test_online_softmax_dim_bad_input():
    x = torch.randn(2, 3)
    with pytest.raises(ValueError, match=r"dim=2 is out of range for x of shape \(2, 3\)"):
        online_softmax(x, dim=2)
    with pytest.raises(TypeError, match="dim must be an int, got float"):
        online_softmax(x, dim=1.0)
    with pytest.raises(ValueError, match="out of range"):
        online_softmax(torch.tensor(1.0))
    with pytest.raises(ValueError, match="x must be non-empty along dim=0"):
        online_softmax(torch.zeros(0, 3), dim=0)
