r"""FlashAttention's trick: softmax in one pass, attention without the T x T matrix.

Plain attention computes the scores ``S = q k^T`` (T x T), their softmax, then ``P v``:
its memory grows as T^2 (64 MiB per head in float32 at T = 4096). FlashAttention (Dao et
al. 2022, *FlashAttention: Fast and Memory-Efficient Exact Attention with IO-Awareness*)
never holds S: it walks over the keys and values in blocks and keeps, per query row,
three running quantities. The idea is the *online softmax* (Milakov & Gimelshein 2018,
*Online normalizer calculation for softmax*).

The recurrence. Softmax of ``x_1 .. x_n`` needs the maximum ``m`` (for stability) and the
normaliser ``l = sum_j exp(x_j - m)``, which seems to take two passes. Keep instead the
maximum and the normaliser *of the prefix seen so far*:

    m_i = max(m_{i-1}, x_i)
    l_i = l_{i-1} * exp(m_{i-1} - m_i) + exp(x_i - m_i)

(``m_0 = -inf``, ``l_0 = 0``). When the maximum moves up, every term already summed was
scaled by ``exp(-m_{i-1})`` and must now be scaled by ``exp(-m_i)``: multiplying the old
sum by ``exp(m_{i-1} - m_i) <= 1`` rescales all of them at once. After the last element
``l_n = sum_j exp(x_j - m_n)``, exactly the two-pass normaliser. Attention adds a third
quantity, the unnormalised output ``o_i = o_{i-1} * exp(m_{i-1} - m_i) + exp(x_i - m_i) v_i``,
rescaled the same way; the answer is ``o_n / l_n``. Processing a *block* of keys at a
time is the same recurrence with ``max`` and ``sum`` taken over the block.

* ``online_softmax(x)``: the recurrence on a vector, element by element (for reading).
* ``tiled_attention(q, k, v, causal, block_size, block_q=...)``: the recurrence over tiles,
  ``block_q`` queries x ``block_size`` keys (Dao et al. 2022, Algorithm 1: B_r x B_c); under a
  causal mask the tiles wholly in the future are skipped (about half the matrix products).
  Memory O(T * d + block_q * block_size) instead of O(T^2) in the forward pass (O(T * block_size)
  with all queries in one block). Autograd works through it, but autograd stores every tile's
  probabilities for the backward pass: T x S numbers again (half that, causal).
* ``flash_attention(q, k, v, causal, block_size, block_q=...)``: the same forward pass, with
  FlashAttention's backward (Dao et al. 2022, appendix B, Algorithm 4): it saves only
  the output O and per query row the softmax statistics, here as one number, the log of
  the normaliser ``L = m + log l`` (FlashAttention keeps m and l; FlashAttention-2, Dao 2023,
  keeps L), and recomputes each block's probabilities ``P = exp(S - L)`` in the backward
  pass. With ``D = rowsum(dO * O)``: ``dV = P^T dO``, ``dP = dO V^T``,
  ``dS = P * (dP - D)``, ``dQ = dS K * scale``, ``dK = dS^T Q * scale``, tile by tile (key
  blocks outside, query blocks inside, as Algorithm 4). Memory of forward plus backward:
  O(T * d + block_q * block_size). The price is computing the scores twice. Left out: the
  fused GPU kernel (each tile is a few PyTorch ops) and the choice of tile sizes from the
  on-chip memory M (the paper's B_c = ceil(M / 4d), B_r = min(B_c, d)).
* ``peak_memory_bytes(fn, *args)``: the peak of memory allocated while ``fn`` runs, on
  the CPU, from the PyTorch profiler's allocation records.
* ``hbm_accesses(T, d, M)``: the elements read from and written to the GPU's main memory
  (HBM) by standard attention and by FlashAttention's forward pass, counted as in Dao et al.
  2022 (Algorithms 0 and 1, Theorem 2), in closed form.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import sys
import tempfile
from typing import Callable

import torch

from llmbook.attention import _check_qkv, _check_scale

__all__ = ["online_softmax", "tiled_attention", "flash_attention", "naive_attention", "peak_memory_bytes",
           "hbm_accesses"]


def online_softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Softmax along ``dim`` in one pass, with a running maximum and a running sum.

    The loop is the recurrence of the module docstring, over the entries along ``dim``
    (every other index is a separate row, carried in parallel); a second step divides by
    the final sum (FlashAttention folds that into the output instead). Equal to
    ``torch.softmax(x, dim)`` up to rounding.

    >>> online_softmax(torch.tensor([1.0, 2.0, 3.0]))
    tensor([0.0900, 0.2447, 0.6652])
    >>> torch.allclose(online_softmax(torch.tensor([1000.0, 0.0])), torch.tensor([1.0, 0.0]))
    True
    >>> x = torch.randn(2, 5, 3)
    >>> torch.allclose(online_softmax(x, dim=1), torch.softmax(x, dim=1), atol=1e-6)
    True
    """
    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        raise TypeError(f"x must be a floating-point torch.Tensor, got "
                        f"{x.dtype if isinstance(x, torch.Tensor) else type(x).__name__}")
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise TypeError(f"dim must be an int, got {type(dim).__name__}")
    if x.dim() == 0 or not -x.dim() <= dim < x.dim():
        raise ValueError(f"dim={dim} is out of range for x of shape {tuple(x.shape)}")
    if x.shape[dim] == 0:
        raise ValueError(f"x must be non-empty along dim={dim}, got shape {tuple(x.shape)}")
    xs = x.movedim(dim, -1)  # (..., n): the softmax runs along the last axis
    m = torch.full(xs.shape[:-1], float("-inf"), dtype=x.dtype, device=x.device)  # running maximum per row
    l = torch.zeros(xs.shape[:-1], dtype=x.dtype, device=x.device)  # running sum of exp(x_j - m) per row
    for xi in xs.unbind(-1):
        m_new = torch.maximum(m, xi)
        l = l * torch.exp(m - m_new) + torch.exp(xi - m_new)
        m = m_new
    return (torch.exp(xs - m[..., None]) / l[..., None]).movedim(-1, dim)


def _check_block(block_size: object) -> int:
    if isinstance(block_size, bool) or not isinstance(block_size, int):
        raise TypeError(f"block_size must be an int, got {type(block_size).__name__}")
    if block_size < 1:
        raise ValueError(f"block_size must be >= 1, got {block_size}")
    return block_size


def tiled_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                    block_size: int = 128, scale: float | None = None,
                    block_q: int | None = None) -> torch.Tensor:
    """softmax(q k^T * scale) v computed tile by tile: query blocks x key/value blocks (one pass).

    q (..., T, d), k (..., S, d), v (..., S, dv) -> (..., T, dv); the same result as
    ``F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)``. ``causal``
    lets query i see keys 0..i (the top-left-aligned mask SDPA uses, also when T != S).
    The keys come in blocks of ``block_size``, the queries in blocks of ``block_q`` rows
    (default: ``block_size``; ``block_q >= T`` takes all queries at once, the key-blocks-only
    version that Appendix A's ``flash_tiled_peak_mem_ratio`` measures). Per tile the scores
    are (..., block_q, block_size): the T x S matrix never exists. Under the causal mask a
    tile wholly in the future of its queries (first key after the last query) is skipped,
    and only tiles that cross the diagonal are masked.

    >>> q, k, v = torch.randn(2, 5, 4), torch.randn(2, 7, 4), torch.randn(2, 7, 3)
    >>> ref = torch.nn.functional.scaled_dot_product_attention(q, k, v)
    >>> torch.allclose(tiled_attention(q, k, v, block_size=3), ref, atol=1e-6)
    True
    """
    bs, scale, bq = _check_args(q, k, v, causal, block_size, scale, block_q)
    return _online_blocks(q, k, v, causal, bs, scale, want_lse=False, bq=bq)[0]


def _check_args(q, k, v, causal, block_size, scale, block_q=None) -> tuple[int, float, int]:
    _check_qkv(q, k, v)
    if not isinstance(causal, bool):
        raise TypeError(f"causal must be a bool, got {type(causal).__name__}")
    bs = _check_block(block_size)
    if block_q is None:
        bq = bs
    else:
        try:
            bq = _check_block(block_q)
        except (TypeError, ValueError) as e:
            raise type(e)(str(e).replace("block_size", "block_q")) from None
    scale = _check_scale(scale)
    return bs, (1.0 / math.sqrt(q.shape[-1]) if scale is None else scale), bq


def _query_block(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, bs: int, scale: float,
                 i0: int, want_lse: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The forward recurrence for the queries i0 .. i0 + len(q) - 1 over every key block they can see."""
    T, S = q.shape[-2], k.shape[-2]
    lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    qs = q * scale  # (..., Tq, d)
    m = q.new_full((*lead, T, 1), float("-inf"))  # running row maximum
    l = q.new_zeros((*lead, T, 1))  # running sum of exp(score - m)
    acc = q.new_zeros((*lead, T, v.shape[-1]))  # running unnormalised output
    rows = torch.arange(i0, i0 + T, device=q.device)[:, None]  # (Tq, 1) query positions
    for j in range(0, S, bs):
        if causal and j > i0 + T - 1:
            break  # this key block and every later one lie in the future of every query of the block
        kb, vb = k[..., j:j + bs, :], v[..., j:j + bs, :]  # (..., b, d), (..., b, dv)
        s = qs @ kb.transpose(-2, -1)  # (..., Tq, b)
        if causal and j + kb.shape[-2] - 1 > i0:  # the tile crosses the diagonal: mask its future part
            cols = torch.arange(j, j + kb.shape[-2], device=q.device)[None, :]  # (1, b) key positions
            s = s.masked_fill(cols > rows, float("-inf"))
        m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))  # (..., Tq, 1)
        # A row with no visible key so far keeps m = -inf; use 0 there so exp() gives 0, not nan.
        m_safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
        rescale = torch.exp(m - m_safe)  # exp(m_old - m_new) <= 1: re-weights what was summed
        p = torch.exp(s - m_safe)  # (..., Tq, b)
        l = l * rescale + p.sum(dim=-1, keepdim=True)
        acc = acc * rescale + p @ vb  # (..., Tq, dv)
        m = m_new
    lse = m + torch.log(l) if want_lse else None  # L = m + log l: every row sees key 0, so l > 0
    return acc / l, lse


def _online_blocks(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, bs: int,
                   scale: float, want_lse: bool = True, bq: int | None = None
                   ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The forward pass: (output (..., T, dv), log of the softmax normaliser (..., T, 1) or None)."""
    T = q.shape[-2]
    if bq is None or bq >= T:  # one query block: all rows at once
        return _query_block(q, k, v, causal, bs, scale, 0, want_lse)
    lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    out = q.new_empty((*lead, T, v.shape[-1]))
    lse = q.new_empty((*lead, T, 1)) if want_lse else None
    for i in range(0, T, bq):
        o_i, lse_i = _query_block(q[..., i:i + bq, :], k, v, causal, bs, scale, i, want_lse)
        out[..., i:i + bq, :] = o_i  # autograd follows the copy into the slice
        if want_lse:
            lse[..., i:i + bq, :] = lse_i
    return out, lse


def _causal_block(s: torch.Tensor, j: int, rows: torch.Tensor) -> torch.Tensor:
    """Scores of the key block starting at j with the future (key > query, rows (Tq, 1)) set to -inf."""
    cols = torch.arange(j, j + s.shape[-1], device=s.device)[None, :]  # (1, b)
    return s.masked_fill(cols > rows, float("-inf"))


class _FlashAttention(torch.autograd.Function):
    """Forward: the online recurrence. Backward: recompute each tile's P from the saved L."""

    @staticmethod
    def forward(ctx, q, k, v, causal: bool, bs: int, scale: float, bq: int):
        out, lse = _online_blocks(q, k, v, causal, bs, scale, bq=bq)
        ctx.save_for_backward(q, k, v, out, lse)  # no T x S tensor is saved
        ctx.causal, ctx.bs, ctx.scale, ctx.bq = causal, bs, scale, bq
        return out

    @staticmethod
    def backward(ctx, dout):
        q, k, v, out, lse = ctx.saved_tensors
        causal, bs, scale, bq = ctx.causal, ctx.bs, ctx.scale, ctx.bq
        T, S = q.shape[-2], k.shape[-2]
        D = (dout * out).sum(dim=-1, keepdim=True)  # (..., T, 1): rowsum(dO * O) = rowsum(P * dP)
        dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
        # FlashAttention's order (Dao et al. 2022, Algorithm 4): key blocks outside, query blocks inside;
        # dK_j and dV_j are summed over the query blocks, dQ_i over the key blocks.
        for j in range(0, min(S, T) if causal else S, bs):  # causal: keys after the last query get no gradient
            kb, vb = k[..., j:j + bs, :], v[..., j:j + bs, :]  # (..., b, d), (..., b, dv)
            first = j - j % bq if causal else 0  # causal: query blocks ending before key j see none of it
            for i in range(first, T, bq):
                qi, doi = q[..., i:i + bq, :], dout[..., i:i + bq, :]
                s = (qi @ kb.transpose(-2, -1)) * scale  # (..., Tq, b): the scores again
                if causal and j + kb.shape[-2] - 1 > i:
                    s = _causal_block(s, j, torch.arange(i, i + qi.shape[-2], device=q.device)[:, None])
                p = torch.exp(s - lse[..., i:i + bq, :])  # (..., Tq, b): the probabilities, recomputed
                dv[..., j:j + bs, :] += p.transpose(-2, -1) @ doi  # (..., b, dv)
                ds = p * (doi @ vb.transpose(-2, -1) - D[..., i:i + bq, :])  # (..., Tq, b): softmax's backward
                dq[..., i:i + bq, :] += (ds @ kb) * scale  # (..., Tq, d)
                dk[..., j:j + bs, :] += (ds.transpose(-2, -1) @ qi) * scale  # (..., b, d)
        return dq, dk, dv, None, None, None, None


def flash_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                    block_size: int = 128, scale: float | None = None,
                    block_q: int | None = None) -> torch.Tensor:
    """``tiled_attention`` with FlashAttention's recomputing backward pass.

    The values equal ``tiled_attention``'s (the same forward code, the same tiles); the
    gradients equal SDPA's. For the backward pass it keeps q, k, v, the output and one
    log-normaliser per query row, never a (T, S) tensor, and recomputes each tile's
    probabilities. q, k and v must have the same leading dimensions (no broadcasting).

    >>> q, k, v = (torch.randn(2, 6, 4, dtype=torch.float64, requires_grad=True) for _ in range(3))
    >>> flash_attention(q, k, v, causal=True, block_size=4).sum().backward()
    >>> q.grad.shape
    torch.Size([2, 6, 4])
    """
    bs, scale, bq = _check_args(q, k, v, causal, block_size, scale, block_q)
    if not (q.shape[:-2] == k.shape[:-2] == v.shape[:-2]):
        raise ValueError(f"q, k and v must have the same leading dimensions, got {tuple(q.shape[:-2])}, "
                         f"{tuple(k.shape[:-2])} and {tuple(v.shape[:-2])}")
    return _FlashAttention.apply(q, k, v, causal, bs, scale, bq)


def naive_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                    scale: float | None = None) -> torch.Tensor:
    """Attention that materialises the (..., T, S) scores and weights (the memory baseline).

    This is ``llmbook.attention.scaled_dot_product_attention`` with a causal mask when asked.
    """
    from llmbook.attention import causal_mask, scaled_dot_product_attention

    _check_qkv(q, k, v)
    mask = None
    if causal:
        T, S = q.shape[-2], k.shape[-2]
        mask = causal_mask(T, S, device=q.device)  # top-left aligned, as SDPA's is_causal
    return scaled_dot_product_attention(q, k, v, mask=mask, scale=scale)


@contextlib.contextmanager
def _quiet_stderr_fd():
    """Send file descriptor 2 to /dev/null for the duration (C++ log lines bypass sys.stderr)."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no real fd 2 (an embedded interpreter): nothing to silence
        yield
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def peak_memory_bytes(fn: Callable, *args, **kwargs) -> int:
    """Peak bytes allocated on the CPU while ``fn(*args, **kwargs)`` runs, above what existed before.

    How. PyTorch's CPU allocator has no peak counter (``torch.cuda.max_memory_allocated``
    exists only for CUDA), but the profiler with ``profile_memory=True`` records every
    allocation and free by PyTorch's CPU allocator, with its size, in time order. In
    torch 2.x those records are complete only in the exported trace (``[memory]`` events,
    ``Bytes`` positive for an allocation, negative for a free; the in-memory event list
    attributes allocations to operators and keeps only the frees as events), so the trace
    is written to a temporary file and read back. The peak is the maximum of the running
    sum. Counted: every tensor PyTorch allocates on the CPU, including the result and
    temporaries; not counted: the inputs (allocated before), memory outside PyTorch's
    allocator (Python objects, BLAS workspaces), and GPU memory. Runs ``fn`` once; its
    result is dropped.

    >>> peak_memory_bytes(lambda n: torch.zeros(n, n) + 1, 256) // 1024  # two 256 x 256 float32: 512 KiB
    512
    """
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    from torch.profiler import ProfilerActivity, profile

    prof = profile(activities=[ProfilerActivity.CPU], profile_memory=True)
    with _quiet_stderr_fd():  # the profiler's C++ side logs "profiler_start" / "profiler_stop" to fd 2
        prof.start()
    try:
        out = fn(*args, **kwargs)
        del out
    finally:
        with _quiet_stderr_fd():
            prof.stop()
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        prof.export_chrome_trace(path)
        with open(path) as f:
            events = json.load(f)["traceEvents"]
    finally:
        os.remove(path)
    mem = [e for e in events if e.get("name") == "[memory]" and e.get("args", {}).get("Device Type", 0) == 0]
    mem.sort(key=lambda e: e["ts"])
    total = peak = 0
    for e in mem:
        total += int(e["args"]["Bytes"])
        peak = max(peak, total)
    return peak


def hbm_accesses(T: int, d: int, M: int) -> dict[str, int]:
    """HBM reads plus writes, in elements, of one head's forward attention (Dao et al. 2022).

    ``T`` positions, head size ``d``, on-chip memory (SRAM) of ``M`` elements; no mask.
    Standard attention (the paper's Algorithm 0) reads Q, K and writes S, reads S and
    writes P, reads P, V and writes O: ``4 T d + 4 T^2``. FlashAttention (Algorithm 1) uses
    key blocks of ``B_c = ceil(M / 4d)`` and query blocks of ``B_r = min(B_c, d)``; it
    writes the initial O, l, m once, reads every K_j, V_j once, and for each of the
    ``ceil(T / B_c)`` key blocks reads Q, O, l, m and writes O, l, m whole:
    ``T d + 2 T + 2 T d + ceil(T / B_c) (3 T d + 4 T)``. ``B_r`` does not enter the count.
    Returns ``{"standard", "flash", "block_q", "block_k"}``.

    >>> hbm_accesses(1024, 64, 98_304)
    {'standard': 4456448, 'flash': 800768, 'block_q': 64, 'block_k': 384}
    """
    for name, v in (("T", T), ("d", d), ("M", M)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be an int >= 1, got {v!r}")
    block_k = -(-M // (4 * d))  # ceil(M / 4d): a tile of Q, K, V, O and S fits in SRAM
    block_q = min(block_k, d)
    standard = 4 * T * d + 4 * T * T
    flash = T * d + 2 * T + 2 * T * d + -(-T // block_k) * (3 * T * d + 4 * T)
    return {"standard": standard, "flash": flash, "block_q": block_q, "block_k": block_k}
