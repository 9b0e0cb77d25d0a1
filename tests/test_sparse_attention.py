"""Banded attention: pair counts against the masks, reach against real gradients, and a brute-force check."""

import math

import pytest
import torch

from llmbook.gpt import GPT, Block, GPTConfig, causal_mask
from llmbook.sparse_attention import attended_pairs, attention_flops, layer_windows, reach, reach_length


@pytest.mark.parametrize("T", [1, 2, 7, 64, 300])
@pytest.mark.parametrize("w", [None, 1, 3, 64, 500])
def test_attended_pairs_counts_the_mask(T, w):
    assert attended_pairs(T, w) == int(causal_mask(T, T, window=w).sum())
    assert attention_flops(T, 32, w) == 4 * 32 * attended_pairs(T, w)


def test_banded_cost_grows_linearly():
    w = 256
    ratio = [attended_pairs(2 * T, w) / attended_pairs(T, w) for T in (4096, 8192)]
    assert all(abs(r - 2) < 0.05 for r in ratio)  # linear in T
    assert attended_pairs(8192) / attended_pairs(4096) == pytest.approx(4, rel=1e-3)  # quadratic


def test_layer_windows():
    cfg = GPTConfig.baby(n_layer=5, sparse_pattern="alternating", local_window=3)
    assert layer_windows(cfg) == [None, 3, None, 3, None]
    assert layer_windows(GPTConfig.baby(n_layer=2)) == [None, None]
    with pytest.raises(TypeError, match="config"):
        layer_windows({"n_layer": 2})


@pytest.mark.parametrize("L, w", [(1, 4), (3, 4), (5, 2), (4, 7)])
def test_reach_of_banded_stack_closed_form(L, w):
    T = 40
    assert reach_length([w] * L, T) == min(T, L * (w - 1) + 1)
    assert reach_length([None] + [w] * L, T) == T


def _input_dependence(blocks, T, d):
    """Boolean (T, T): True where output i has a non-zero gradient with respect to input j."""
    torch.manual_seed(0)
    x = torch.randn(1, T, d, requires_grad=True)
    dep = torch.zeros(T, T, dtype=torch.bool)
    for i in range(T):
        h = x
        for b in blocks:
            h, _ = b(h)
        (g,) = torch.autograd.grad(h[0, i].sum(), x)
        dep[i] = g[0].abs().sum(-1) > 0
    return dep


def test_reach_matches_gradients_of_the_books_blocks():
    T, w = 12, 3
    cfg = GPTConfig.baby(vocab_size=10, n_layer=3, n_head=2, d_model=16, d_ff=32, block_size=T,
                         sparse_pattern="alternating", local_window=w)
    torch.manual_seed(0)
    banded = [Block(cfg, 1) for _ in range(3)]  # layer index 1 is banded in the alternating pattern
    assert all(b.attn.window == w for b in banded)
    assert torch.equal(_input_dependence(banded, T, 16), reach([w] * 3, T))
    mixed = [Block(cfg, i) for i in range(2)]  # dense then banded
    assert torch.equal(_input_dependence(mixed, T, 16), reach([None, w], T))


def _brute_force_banded(q, k, v, w):
    """Loop over queries: softmax over keys i-w+1..i only. q, k, v: (H, T, D)."""
    H, T, D = q.shape
    out = torch.zeros_like(q)
    for h in range(H):
        for i in range(T):
            keys = range(max(0, i - w + 1), i + 1)
            scores = torch.tensor([float(q[h, i] @ k[h, j]) / math.sqrt(D) for j in keys], dtype=torch.float64)
            p = torch.exp(scores - scores.max())
            p = p / p.sum()
            out[h, i] = sum(p[n] * v[h, j].double() for n, j in enumerate(keys)).to(q.dtype)
    return out


@pytest.mark.parametrize("return_attention", [False, True])
def test_banded_layer_equals_brute_force(return_attention):
    T, w, C, H = 10, 4, 16, 2
    cfg = GPTConfig.baby(vocab_size=10, n_layer=2, n_head=H, d_model=C, d_ff=32, block_size=T,
                         sparse_pattern="alternating", local_window=w)
    torch.manual_seed(1)
    model = GPT(cfg).eval()
    attn = model.blocks[1].attn
    assert attn.window == w
    x = torch.randn(1, T, C)
    with torch.no_grad():
        y, _ = attn(x, return_attention=return_attention)
        q, k, v = attn.c_attn(x).split(C, dim=2)
        split = lambda t: t.view(T, H, C // H).transpose(0, 1)  # (H, T, D)  # noqa: E731
        heads = _brute_force_banded(split(q), split(k), split(v), w)  # (H, T, D)
        expected = attn.c_proj(heads.transpose(0, 1).reshape(1, T, C))
    torch.testing.assert_close(y, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("call, name", [
    (lambda: attended_pairs(0), "seq_len"),
    (lambda: attended_pairs(5, window=0), "window"),
    (lambda: attention_flops(5, 0), "d_model"),
    (lambda: reach([2, 0], 5), "window"),
    (lambda: reach("ab", 5), "windows"),
    (lambda: reach([2], 0), "seq_len"),
])
def test_bad_input(call, name):
    with pytest.raises(ValueError, match=name):
        call()
