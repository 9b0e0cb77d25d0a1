"""Peak memory of attention: naive (the T x T matrix) vs FlashAttention-style tiling, on the CPU.

``llmbook.flash.naive_attention`` materialises the (T, T) scores and weights;
``llmbook.flash.tiled_attention`` walks over key/value blocks with a running max and
sum (the online softmax). The metric takes all queries in one block (``block_q = T``),
holding (T, block) scores at a time; the curve also measures FlashAttention's 2-D tiling
(query blocks x key blocks, block x block scores at a time). Peak memory is measured with
``llmbook.flash.peak_memory_bytes`` (the PyTorch profiler's CPU allocation records; the
inputs are not counted). One head, d = 64, float32, causal, block 128, no autograd.

Prints the peaks as T grows and, last, ``flash_tiled_peak_mem_ratio=`` (key-blocks tiled /
naive peak at T = 4096; target <= 0.25). Memory is deterministic, so each size is one run.

``--save-curve PATH`` also measures the 2-D tiled forward pass and forward plus backward
(autograd through the naive and the 2-D tiled attention, and ``llmbook.flash.flash_attention``
with the same tiles, which recomputes the probabilities in its backward pass) at T = 256 .. 4096 and writes every peak, in bytes, to
PATH (JSON with a ``meta`` record of the command); chapter 3b plots that file.

Usage: python benchmarks/bench_flash.py [--quick] [--save-curve data/results/ch03b_flash_memory.json]
"""

import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _timing import Results, print_machine, quick_mode, set_threads  # noqa: E402

from llmbook.flash import flash_attention, naive_attention, peak_memory_bytes, tiled_attention  # noqa: E402


def peaks(T: int, d: int = 64, block: int = 128, tiles: bool = False) -> tuple[int, ...]:
    """(naive, key blocks with all queries at once) peaks, and the 2-D tiled one if ``tiles``."""
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 1, T, d, generator=g) for _ in range(3))
    with torch.no_grad():
        naive = peak_memory_bytes(naive_attention, q, k, v, causal=True)
        keys = peak_memory_bytes(tiled_attention, q, k, v, causal=True, block_size=block, block_q=T)
        ref = naive_attention(q, k, v, causal=True)
        torch.testing.assert_close(tiled_attention(q, k, v, causal=True, block_size=block, block_q=T), ref,
                                   rtol=1e-4, atol=1e-5)
        if not tiles:
            return naive, keys
        both = peak_memory_bytes(tiled_attention, q, k, v, causal=True, block_size=block, block_q=block)
        torch.testing.assert_close(tiled_attention(q, k, v, causal=True, block_size=block, block_q=block), ref,
                                   rtol=1e-4, atol=1e-5)
    return naive, keys, both


def fwd_bwd_peaks(T: int, d: int = 64, block: int = 128) -> dict[str, int]:
    """Peak bytes of forward + backward (gradients of q, k, v) for each implementation."""
    g = torch.Generator().manual_seed(0)
    base = [torch.randn(1, 1, T, d, generator=g) for _ in range(3)]

    def run(fn, **kw):
        xs = [b.clone().requires_grad_(True) for b in base]
        fn(*xs, causal=True, **kw).sum().backward()

    return {"naive": peak_memory_bytes(run, naive_attention),
            "tiled_autograd": peak_memory_bytes(run, tiled_attention, block_size=block, block_q=block),
            "flash_recompute": peak_memory_bytes(run, flash_attention, block_size=block, block_q=block)}


def save_curve(path: str, d: int = 64, block: int = 128) -> None:
    sizes = [256, 512, 1024, 2048, 4096]
    rows = []
    print(f"{'T':>6} {'fwd naive':>10} {'fwd keys':>10} {'fwd tiles':>10} {'f+b naive':>10} {'f+b tiled':>10} "
          f"{'f+b flash':>10}  (MiB)")
    for T in sizes:
        naive, keys, tiles = peaks(T, d, block, tiles=True)
        fb = fwd_bwd_peaks(T, d, block)
        rows.append({"T": T, "forward": {"naive": naive, "key_blocks": keys, "tiles": tiles}, "forward_backward": fb})
        print(f"{T:>6} {naive / 2**20:>10.2f} {keys / 2**20:>10.2f} {tiles / 2**20:>10.2f} {fb['naive'] / 2**20:>10.2f} "
              f"{fb['tiled_autograd'] / 2**20:>10.2f} {fb['flash_recompute'] / 2**20:>10.2f}", flush=True)
    meta = {"command": "python benchmarks/bench_flash.py --save-curve " + path, "d": d, "block_size": block,
            "block_q": {"key_blocks": "T (all queries at once)", "tiles": block, "forward_backward": block},
            "dtype": "float32", "causal": True, "heads": 1, "batch": 1, "unit": "bytes",
            "measured_with": "llmbook.flash.peak_memory_bytes (PyTorch profiler CPU allocation records; inputs not counted)",
            "torch": torch.__version__, "steps": 0, "seed": 0, "split": "none"}  # no training, random inputs
    Path(path).write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")
    print("wrote", path)


def main() -> None:
    if "--save-curve" in sys.argv:
        i = sys.argv.index("--save-curve")
        if i + 1 >= len(sys.argv):
            raise SystemExit("--save-curve needs a path")
        set_threads()
        save_curve(sys.argv[i + 1])
        return
    quick = quick_mode()
    set_threads()
    print_machine()
    sizes = [512, 1024] if quick else [512, 1024, 2048, 4096]
    print(f"{'T':>6} {'naive MiB':>10} {'tiled MiB':>10} {'tiled/naive':>12}")
    ratio_at = {}
    for T in sizes:
        naive, tiled = peaks(T)
        ratio_at[T] = tiled / naive
        print(f"{T:>6} {naive / 2**20:>10.2f} {tiled / 2**20:>10.2f} {tiled / naive:>12.4f}", flush=True)
    T = sizes[-1]
    res = Results("bench_flash", quick=quick)
    res.add("flash_tiled_peak_mem_ratio", ratio_at[T], goal="<= 0.25", higher_is_better=False,
            reference="naive attention (T x T scores and weights)",
            description=f"peak CPU memory of tiled / naive causal attention at T = {T}, d = 64, block 128, "
                        "float32, one head (profiler allocation records)")
    res.finish()


if __name__ == "__main__":
    main()
