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

Default size: batch 2 x 1024 tokens x 768 dims x 12 heads (GPT-2 small's attention at
its full context; the explicit path then holds 2 x 12 x 1024 x 1024 scores, 100 MB);
``--batch 8`` is heavier; ``--small`` (and ``--quick`` / ``BENCH_QUICK=1``) uses
2 x 256 x 768 x 12. ``--device cuda --dtype bfloat16`` runs the same on a GPU.
Every time comes from ``benchmarks/_timing.py``: a warm-up run, then ``--reps`` repeats
with the variants alternating (forward order, then backward), medians and interquartile
ranges, ratios from paired medians, goals checked at the pessimistic end of the spread.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _timing import Ratio, Results, measure, print_machine, quick_mode, ratio, set_threads  # noqa: E402

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


def fwd_bwd(fn, x_grads: list[torch.Tensor]):
    """A callable that runs ``fn`` forward and backward (gradients cleared first)."""

    def run():
        for t in x_grads:
            t.grad = None
        fn().float().sum().backward()

    return run


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--small", action="store_true", help="batch 2 x 256 tokens instead of 2 x 1024")
    ap.add_argument("--batch", type=int, default=2, help="batch size at 1024 tokens")
    ap.add_argument("--device", default="cpu", help="cpu or cuda")
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--quick", action="store_true", help="the small size and 3 repeats (also BENCH_QUICK=1)")
    ap.add_argument("--mha-only-json", default=None, help=argparse.SUPPRESS)  # the child run, see below
    args = ap.parse_args(argv)
    quick = quick_mode(argv)
    if quick:
        args.small, args.reps = True, 3
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        ap.error("--device cuda but torch sees no CUDA GPU")
    sync = (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else None
    dtype = getattr(torch, args.dtype)
    if device.type == "cpu":
        set_threads()
    print_machine()
    B, T, D, H = (2, 256, 768, 12) if args.small else (args.batch, 1024, 768, 12)
    torch.manual_seed(0)
    m = MultiHeadAttention(D, H).to(device, dtype)
    x = torch.randn(B, T, D, device=device, dtype=dtype, requires_grad=True)
    params = [x, *m.parameters()]
    print(f"device={device} dtype={args.dtype}")
    print(f"MHA: batch {B} x {T} tokens x {D} dims x {H} heads, causal, forward+backward, {args.reps} repeats, "
          "alternating", flush=True)
    with torch.no_grad():
        torch.testing.assert_close(m(x, is_causal=True), bare_sdpa_mha(m, x), atol=1e-2, rtol=1e-2)
        torch.testing.assert_close(m(x, is_causal=True, return_attention=True)[0], bare_sdpa_mha(m, x),
                                   atol=1e-2, rtol=1e-2)
    t = measure(
        {
            "bare_sdpa": fwd_bwd(lambda: bare_sdpa_mha(m, x), params),
            "fast": fwd_bwd(lambda: m(x, is_causal=True), params),
            "explicit": fwd_bwd(lambda: m(x, is_causal=True, return_attention=True)[0], params),
        },
        repeats=args.reps, warmup=1, sync=sync,
    )
    for timing in t.values():
        print(f"  {timing}", flush=True)
    if args.mha_only_json:  # the child: hand the explicit/bare pairs back and stop
        r = ratio(t["explicit"], t["bare_sdpa"])
        Path(args.mha_only_json).write_text(json.dumps({"value": r.value, "spread": r.spread, "pairs": r.pairs,
                                                         "ratio_of_medians": r.ratio_of_medians}))
        return
    default_malloc = None
    if device.type == "cpu":
        # The same MHA measurement once more in a child process under glibc's default
        # allocator (every T x T buffer a fresh, kernel-zeroed mmap): reported beside the
        # steady-allocator ratio so the reader sees what the allocator is worth.
        out = Path(os.environ.get("TMPDIR", "/tmp")) / f"bench_attention_child_{os.getpid()}.json"
        cmd = [sys.executable, __file__, "--mha-only-json", str(out), "--reps", str(args.reps), "--batch", str(args.batch)]
        cmd += ["--small"] if args.small else []
        print("MHA again under glibc's default allocator (a child process):", flush=True)
        child = subprocess.run(cmd, env={**os.environ, "BENCH_ALLOCATOR": "default"}, capture_output=True, text=True)
        print("\n".join("  " + ln.strip() for ln in child.stdout.splitlines() if "median" in ln), flush=True)
        if child.returncode != 0:
            raise SystemExit(f"the default-allocator child run failed:\n{child.stderr[-2000:]}")
        d = json.loads(out.read_text())
        out.unlink()
        default_malloc = Ratio(d["value"], tuple(d["spread"]), d["pairs"], d["ratio_of_medians"])

    # Additive vs dot product: same q, k, v; d_h = d_k.
    Ba, Ta, dk = (4, 256, 64) if not args.small else (2, 128, 64)
    g = torch.Generator(device="cpu").manual_seed(1)
    mk = lambda *s: torch.randn(*s, generator=g).to(device, dtype).requires_grad_()  # noqa: E731
    q, k, v = mk(Ba, Ta, dk), mk(Ba, Ta, dk), mk(Ba, Ta, dk)
    Wq, Wk, w = mk(dk, dk), mk(dk, dk), mk(dk)
    leaves = [q, k, v, Wq, Wk, w]
    print(f"additive vs dot: batch {Ba} x {Ta} tokens, d_k = d_h = {dk}, forward+backward", flush=True)
    ta = measure(
        {
            "dot": fwd_bwd(lambda: scaled_dot_product_attention(q, k, v), leaves),
            "additive": fwd_bwd(lambda: additive_attention(q, k, v, Wq, Wk, w), leaves),
        },
        repeats=args.reps, warmup=1, sync=sync,
    )
    for timing in ta.values():
        print(f"  {timing}", flush=True)
    res = Results("bench_attention" if device.type == "cpu" else f"bench_attention_{device.type}", quick=quick)
    size = f"{B} x {T} x {D}, {H} heads"
    res.add("mha_fast_ratio_vs_sdpa", ratio(t["fast"], t["bare_sdpa"]), goal="<= 1.1", higher_is_better=False,
            reference="bare F.scaled_dot_product_attention",
            description=f"MultiHeadAttention (fused path) / the same projections around a bare SDPA, {size}")
    res.add("mha_explicit_ratio_vs_sdpa", ratio(t["explicit"], t["bare_sdpa"]), goal="<= 1.5",
            higher_is_better=False, reference="bare F.scaled_dot_product_attention",
            description=f"MultiHeadAttention(return_attention=True), the written-out path / bare SDPA, {size}")
    if default_malloc is not None:
        res.add("mha_explicit_ratio_vs_sdpa_default_malloc", default_malloc, higher_is_better=False,
                reference="bare F.scaled_dot_product_attention",
                description=f"the same ratio under glibc's default allocator (a fresh mmap per T x T buffer), {size}")
    res.add("additive_ratio_vs_dot", ratio(ta["additive"], ta["dot"]), higher_is_better=False,
            reference="scaled dot-product attention (explicit)",
            description=f"Bahdanau's additive attention / scaled dot-product, {Ba} x {Ta}, d = {dk}")
    res.finish()


if __name__ == "__main__":
    main()
