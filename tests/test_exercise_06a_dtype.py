"""Exercise 06a.1 feeds float32 inputs, the dtype of chapter 6a's step 2, so a reader's matrix built as
step 2 builds it (torch.ones, float32) passes; one built in x.dtype passes too (issue 34 review)."""
import torch

from llmbook.exercises import check


def _float32_band(x, w):
    T = x.shape[-2]
    i = torch.arange(T)
    A = ((i[None, :] <= i[:, None]) & (i[None, :] > i[:, None] - w)).float()   # as step 2: float32
    return (A / A.sum(-1, keepdim=True)) @ x


def _dtype_band(x, w):
    T = x.shape[-2]
    i = torch.arange(T)
    A = ((i[None, :] <= i[:, None]) & (i[None, :] > i[:, None] - w)).to(x.dtype)
    return (A / A.sum(-1, keepdim=True)) @ x


def test_06a_1_accepts_a_float32_matrix_as_in_step_2():
    for _ in range(3):                      # fresh inputs each time
        assert check("06a.1", _float32_band).passed
        assert check("06a.1", _dtype_band).passed


def test_06a_1_still_rejects_the_whole_past():
    def whole_past(x, w):
        return _float32_band(x, x.shape[-2])
    assert not check("06a.1", whole_past).passed
