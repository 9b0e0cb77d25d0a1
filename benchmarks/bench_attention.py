"""Speed of llmbook.attention against bare PyTorch, forward + backward.

Prints, last, one ``name=value`` per line:

- ``mha_fast_ratio_vs_sdpa``: ``MultiHeadAttention`` without weights requested (its fused
  ``F.scaled_dot_product_attention`` path) vs the same four projections wired by hand
  around a bare ``F.scaled_dot_product_attention`` (target <= 1.1);
- ``mha_explicit_ratio_vs_sdpa``: ``MultiHeadAttention(..., return_attention=True)``, the
  written-out teaching path, vs the same bare baseline (target <= 1.5);
- ``additive_ratio_vs_dot``: Bahdanau's additive attention vs scaled dot-product
  attention on the same q, k, v (both from llmbook, explicit), at a smaller size because
  the additive scores need a (B, Tq, Tk, d_h) tensor.

Default size: batch 8 x 1024 tokens x 768 dims x 12 heads (heavy on a CPU: a few GB
and minutes); ``--small`` uses 2 x 256 x 768 x 12. ``--device cuda --dtype bfloat16``
runs the same on a GPU. Times are medians over ``--reps`` interleaved repetitions.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))

from llmbook.attention import MultiHeadAttention, additive_attention, scaled_dot_product_attention  # noqa: E402


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def bare_sdpa_mha(m: MultiHeadAttention, x: torch.Tensor) -> torch.Tensor:
    """The baseline: the same projections, a bare F.sdpa, no checks, no mask handling."""
    B, T, D = x.shape
    H, hd = m.n_heads, m.head_dim
    q = m.q_proj(x).view(B, T, H, hd).transpose(1, 2)  # (B, H, T, hd)
    k = m.k_proj(x).view(B, T, H, hd).transpose(1, 2)
    v = m.v_proj(x).view(B, T, H, hd).transpose(1, 2)
    o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return m.out_proj(o.transpose(1, 2).reshape(B, T, D))


def timed(fn, device: torch.device) -> float:
    _sync(device)
    t0 = time.perf_counter()
    out = fn()
    out.float().sum().backward()
    _sync(device)
    return time.perf_counter() - t0


def bench(fns: dict, device: torch.device, reps: int, warmup: int = 1) -> dict:
    for _ in range(warmup):
        for fn in fns.values():
            timed(fn, device)
    times = {name: [] for name in fns}
    for _ in range(reps):  # interleaved so that background load hits every variant alike
        for name, fn in fns.items():
            times[name].append(timed(fn, device))
    return {name: statistics.median(ts) for name, ts in times.items()}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--small", action="store_true", help="batch 2 x 256 tokens instead of 8 x 1024")
    ap.add_argument("--device", default="cpu", help="cpu or cuda")
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        ap.error("--device cuda but torch sees no CUDA GPU")
    dtype = getattr(torch, args.dtype)
    B, T, D, H = (2, 256, 768, 12) if args.small else (8, 1024, 768, 12)
    torch.manual_seed(0)
    m = MultiHeadAttention(D, H).to(device, dtype)
    x = torch.randn(B, T, D, device=device, dtype=dtype, requires_grad=True)
    print(f"device={device} dtype={args.dtype} torch={torch.__version__} threads={torch.get_num_threads()}")
    print(f"MHA: batch {B} x {T} tokens x {D} dims x {H} heads, causal, forward+backward, median of {args.reps}")
    with torch.no_grad():
        torch.testing.assert_close(m(x, is_causal=True), bare_sdpa_mha(m, x), atol=1e-2, rtol=1e-2)
    t = bench(
        {
            "bare_sdpa": lambda: bare_sdpa_mha(m, x),
            "fast": lambda: m(x, is_causal=True),
            "explicit": lambda: m(x, is_causal=True, return_attention=True)[0],
        },
        device,
        args.reps,
    )
    for name, s in t.items():
        print(f"  {name:10s} {s * 1e3:9.1f} ms")

    # Additive vs dot product: same q, k, v; d_h = d_k.
    Ba, Ta, dk = (4, 256, 64) if not args.small else (2, 128, 64)
    g = torch.Generator(device="cpu").manual_seed(1)
    mk = lambda *s: torch.randn(*s, generator=g).to(device, dtype).requires_grad_()  # noqa: E731
    q, k, v = mk(Ba, Ta, dk), mk(Ba, Ta, dk), mk(Ba, Ta, dk)
    Wq, Wk, w = mk(dk, dk), mk(dk, dk), mk(dk)
    print(f"additive vs dot: batch {Ba} x {Ta} tokens, d_k = d_h = {dk}, forward+backward")
    ta = bench(
        {
            "dot": lambda: scaled_dot_product_attention(q, k, v),
            "additive": lambda: additive_attention(q, k, v, Wq, Wk, w),
        },
        device,
        args.reps,
    )
    for name, s in ta.items():
        print(f"  {name:10s} {s * 1e3:9.1f} ms")
    print(f"mha_fast_ratio_vs_sdpa={t['fast'] / t['bare_sdpa']:.3f}")
    print(f"mha_explicit_ratio_vs_sdpa={t['explicit'] / t['bare_sdpa']:.3f}")
    print(f"additive_ratio_vs_dot={ta['additive'] / ta['dot']:.3f}")


if __name__ == "__main__":
    main()
