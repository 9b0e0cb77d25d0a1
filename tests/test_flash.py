"""Online softmax and tiled attention: equal to SDPA (values and gradients); peak memory."""

import pytest
import torch
import torch.nn.functional as F

from llmbook.flash import naive_attention, online_softmax, peak_memory_bytes, tiled_attention

# Tolerances: float64 results agree with SDPA to rounding (1e-12); float32 to 1e-5 relative
# and absolute (the tiled sum adds the same terms in a different order and rescales them).
TOL = {torch.float64: dict(rtol=1e-12, atol=1e-12), torch.float32: dict(rtol=1e-5, atol=1e-5)}


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_online_softmax_equals_softmax(dtype):
    g = torch.Generator().manual_seed(0)
    for n in (1, 2, 7, 50):
        x = (torch.randn(n, generator=g) * 10).to(dtype)
        torch.testing.assert_close(online_softmax(x), torch.softmax(x, 0), **TOL[dtype])
    big = torch.tensor([1000.0, 999.0, -1000.0], dtype=dtype)  # overflow without the running maximum
    torch.testing.assert_close(online_softmax(big), torch.softmax(big, 0), **TOL[dtype])
    assert torch.isfinite(online_softmax(big)).all()


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("T,S,block", [(16, 16, 4), (13, 13, 5), (10, 10, 64), (7, 7, 1), (9, 12, 4), (12, 5, 3)])
def test_tiled_equals_sdpa(dtype, causal, T, S, block):
    g = torch.Generator().manual_seed(T * 100 + S)
    q = torch.randn(2, 3, T, 8, generator=g, dtype=dtype)
    k = torch.randn(2, 3, S, 8, generator=g, dtype=dtype)
    v = torch.randn(2, 3, S, 6, generator=g, dtype=dtype)
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    torch.testing.assert_close(tiled_attention(q, k, v, causal=causal, block_size=block), ref, **TOL[dtype])
    torch.testing.assert_close(naive_attention(q, k, v, causal=causal), ref, **TOL[dtype])


def test_tiled_custom_scale_and_broadcast():
    g = torch.Generator().manual_seed(1)
    q = torch.randn(2, 4, 11, 8, generator=g, dtype=torch.float64)
    k = torch.randn(1, 4, 11, 8, generator=g, dtype=torch.float64)  # broadcast over the batch
    v = torch.randn(1, 4, 11, 8, generator=g, dtype=torch.float64)
    ref = F.scaled_dot_product_attention(q, k.expand(2, -1, -1, -1), v.expand(2, -1, -1, -1), scale=0.3)
    torch.testing.assert_close(tiled_attention(q, k, v, block_size=4, scale=0.3), ref, **TOL[torch.float64])


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("causal", [False, True])
def test_tiled_gradients_equal_sdpa(dtype, causal):
    g = torch.Generator().manual_seed(2)
    shapes = [(2, 2, 13, 8), (2, 2, 13, 8), (2, 2, 13, 5)]
    base = [torch.randn(*s, generator=g, dtype=dtype) for s in shapes]
    w = torch.randn(2, 2, 13, 5, generator=g, dtype=dtype)  # a random upstream gradient
    grads = []
    for fn in (lambda q, k, v: tiled_attention(q, k, v, causal=causal, block_size=4),
               lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=causal)):
        xs = [b.clone().requires_grad_(True) for b in base]
        (fn(*xs) * w).sum().backward()
        grads.append([x.grad for x in xs])
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b, **TOL[dtype])


def test_tiled_gradcheck():
    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(1, 6, 4, generator=g, dtype=torch.float64, requires_grad=True) for _ in range(3))
    assert torch.autograd.gradcheck(lambda q, k, v: tiled_attention(q, k, v, causal=True, block_size=4), (q, k, v))


def test_bad_inputs():
    q = torch.randn(1, 4, 8)
    with pytest.raises(ValueError, match="block_size"):
        tiled_attention(q, q, q, block_size=0)
    with pytest.raises(TypeError, match="block_size"):
        tiled_attention(q, q, q, block_size=2.0)
    with pytest.raises(ValueError, match="last dimension"):
        tiled_attention(q, torch.randn(1, 4, 7), torch.randn(1, 4, 8))
    with pytest.raises(ValueError, match="positions"):
        tiled_attention(q, q, torch.randn(1, 5, 8))
    with pytest.raises(TypeError, match="dtype"):
        tiled_attention(q, q.double(), q)
    with pytest.raises(TypeError, match="q must"):
        tiled_attention(q.long(), q, q)
    with pytest.raises(TypeError, match="causal"):
        tiled_attention(q, q, q, causal=1)
    with pytest.raises(ValueError, match="scale"):
        tiled_attention(q, q, q, scale=-1.0)
    with pytest.raises(ValueError, match="x must be non-empty along dim=-1"):
        online_softmax(torch.zeros(2, 0))
    with pytest.raises(TypeError, match="x must"):
        online_softmax(torch.tensor([1, 2]))
    with pytest.raises(TypeError, match="fn"):
        peak_memory_bytes(3)


def test_peak_memory_counts_allocations():
    n = 128
    one = n * n * 4
    # zeros, then a second tensor of the same size while the first is alive: 2 blocks at the peak.
    assert peak_memory_bytes(lambda: torch.zeros(n, n) + 1) // one == 2
    # Freed before the next allocation: the peak stays at one block (plus scalars).
    def chain():
        a = torch.zeros(n, n)
        del a
        return torch.zeros(n, n)
    assert peak_memory_bytes(chain) // one == 1


def test_tiled_peak_memory_grows_linearly_naive_quadratically():
    """At T = 256 -> 1024 (d = 32, block 64): naive grows ~16x (T x T), tiled ~4x (T x block)."""
    peaks = {}
    with torch.no_grad():
        for T in (256, 1024):
            q, k, v = (torch.randn(1, T, 32) for _ in range(3))
            peaks[T] = (peak_memory_bytes(naive_attention, q, k, v, causal=True),
                        peak_memory_bytes(tiled_attention, q, k, v, causal=True, block_size=64))
    naive_growth = peaks[1024][0] / peaks[256][0]
    tiled_growth = peaks[1024][1] / peaks[256][1]
    assert naive_growth > 12, peaks
    assert tiled_growth < 5, peaks
    assert peaks[1024][0] >= 2 * 1024 * 1024 * 4  # at least scores and weights, T x T float32 each
    assert peaks[1024][1] < peaks[1024][0] / 4


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("T,S,block", [(13, 13, 4), (16, 16, 16), (9, 12, 5), (12, 5, 3), (7, 7, 1)])
def test_flash_attention_values_and_gradients_equal_sdpa(dtype, causal, T, S, block):
    from llmbook.flash import flash_attention
    g = torch.Generator().manual_seed(T * 7 + S)
    base = [torch.randn(2, 3, T, 8, generator=g, dtype=dtype), torch.randn(2, 3, S, 8, generator=g, dtype=dtype),
            torch.randn(2, 3, S, 5, generator=g, dtype=dtype)]
    w = torch.randn(2, 3, T, 5, generator=g, dtype=dtype)
    outs, grads = [], []
    for fn in (lambda q, k, v: flash_attention(q, k, v, causal=causal, block_size=block),
               lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=causal)):
        xs = [b.clone().requires_grad_(True) for b in base]
        out = fn(*xs)
        (out * w).sum().backward()
        outs.append(out.detach())
        grads.append([x.grad for x in xs])
    torch.testing.assert_close(outs[0], outs[1], **TOL[dtype])
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b, **TOL[dtype])


def test_flash_attention_gradcheck_and_bad_input():
    from llmbook.flash import flash_attention
    g = torch.Generator().manual_seed(4)
    q, k, v = (torch.randn(1, 7, 4, generator=g, dtype=torch.float64, requires_grad=True) for _ in range(3))
    assert torch.autograd.gradcheck(lambda q, k, v: flash_attention(q, k, v, causal=True, block_size=3), (q, k, v))
    assert torch.autograd.gradcheck(lambda q, k, v: flash_attention(q, k, v, block_size=2, scale=0.7), (q, k, v))
    with pytest.raises(ValueError, match="leading dimensions"):
        flash_attention(torch.randn(2, 4, 8), torch.randn(1, 4, 8), torch.randn(1, 4, 8))
    with pytest.raises(ValueError, match="block_size"):
        flash_attention(q, k, v, block_size=0)


def test_flash_backward_keeps_no_t_by_t_tensor():
    # Forward + backward peak memory: autograd through tiled_attention keeps every tile's
    # probabilities (the T x T causal half in all), so its peak grows about 4x when T doubles;
    # flash_attention recomputes them (one tile at a time): its peak grows 2x.
    from llmbook.flash import flash_attention
    d, block = 32, 64
    peaks = {}
    for T in (512, 1024):
        g = torch.Generator().manual_seed(0)
        base = [torch.randn(1, 1, T, d, generator=g) for _ in range(3)]

        def fwd_bwd(fn):
            xs = [b.clone().requires_grad_(True) for b in base]
            fn(*xs, causal=True, block_size=block).sum().backward()

        peaks[T] = {fn.__name__: peak_memory_bytes(fwd_bwd, fn) for fn in (tiled_attention, flash_attention)}
    # causal 64 x 64 tiles: 8 * 9 / 2 = 36 stored at T = 512, 16 * 17 / 2 = 136 at 1024 (x3.8), plus the
    # T x d tensors that only double: the stored probabilities make the growth well above flash's 2
    assert peaks[1024]["tiled_attention"] / peaks[512]["tiled_attention"] > 3.2
    # flash_attention: T x d tensors (x2 per doubling) plus a few 64 x 64 tiles whose size does not depend on T,
    # so the growth is linear, at most 2 (1.85 here, approaching 2 as T grows)
    assert 1.7 < peaks[1024]["flash_attention"] / peaks[512]["flash_attention"] <= 2.05
    assert peaks[1024]["flash_attention"] < 0.2 * peaks[1024]["tiled_attention"]


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("T,S,block,block_q", [(13, 13, 4, 3), (13, 13, 3, 5), (9, 16, 4, 2), (16, 9, 5, 4),
                                                (10, 10, 4, 100), (7, 7, 1, 1)])
def test_query_tiles_values_and_gradients_equal_sdpa(causal, T, S, block, block_q):
    # 2-D tiling: query blocks x key blocks, of unequal sizes, lengths not multiples of either
    from llmbook.flash import flash_attention
    g = torch.Generator().manual_seed(T * 31 + S + block_q)
    base = [torch.randn(2, 3, T, 8, generator=g, dtype=torch.float64),
            torch.randn(2, 3, S, 8, generator=g, dtype=torch.float64),
            torch.randn(2, 3, S, 5, generator=g, dtype=torch.float64)]
    w = torch.randn(2, 3, T, 5, generator=g, dtype=torch.float64)
    results = []
    for fn in (lambda q, k, v: tiled_attention(q, k, v, causal=causal, block_size=block, block_q=block_q),
               lambda q, k, v: flash_attention(q, k, v, causal=causal, block_size=block, block_q=block_q),
               lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=causal)):
        xs = [b.clone().requires_grad_(True) for b in base]
        out = fn(*xs)
        (out * w).sum().backward()
        results.append([out.detach()] + [x.grad for x in xs])
    for got in results[:2]:
        for a, b in zip(got, results[2]):
            torch.testing.assert_close(a, b, **TOL[torch.float64])


def test_causal_tiles_in_the_future_are_skipped():
    # counted by PyTorch's FLOP counter: n query blocks x n key blocks, n (n + 1) / 2 of them computed
    from torch.utils.flop_counter import FlopCounterMode
    T, d, b = 256, 16, 32
    q, k, v = (torch.randn(1, 1, T, d) for _ in range(3))
    flops = {}
    for causal in (False, True):
        with FlopCounterMode(display=False) as c:
            tiled_attention(q, k, v, causal=causal, block_size=b, block_q=b)
        flops[causal] = c.get_total_flops()
    n = T // b
    assert flops[False] == 4 * T * T * d
    assert flops[True] == n * (n + 1) // 2 * 4 * b * b * d


def test_block_q_checked_and_one_block_unchanged():
    q = torch.randn(1, 6, 4)
    with pytest.raises(ValueError, match="block_q"):
        tiled_attention(q, q, q, block_q=0)
    with pytest.raises(TypeError, match="block_q"):
        tiled_attention(q, q, q, block_q=1.5)
    # block_q >= T: all queries in one block, the same numbers as block_q = T
    torch.testing.assert_close(tiled_attention(q, q, q, causal=True, block_size=2, block_q=100),
                               tiled_attention(q, q, q, causal=True, block_size=2, block_q=6), rtol=0, atol=0)
