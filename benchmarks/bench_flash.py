"""Peak memory of attention: naive (the T x T matrix) vs FlashAttention-style tiling, on the CPU.

``llmbook.flash.naive_attention`` materialises the (T, T) scores and weights;
``llmbook.flash.tiled_attention`` walks over key/value blocks with a running max and
sum (the online softmax), holding (T, block) at a time. Peak memory is measured with
``llmbook.flash.peak_memory_bytes`` (the PyTorch profiler's CPU allocation records; the
inputs are not counted). One head, d = 64, float32, causal, block 128, no autograd.

Prints the peaks as T grows and, last, ``flash_tiled_peak_mem_ratio=`` (tiled / naive
peak at T = 4096; target <= 0.25). Memory is deterministic, so each size is one run.

Usage: python benchmarks/bench_flash.py [--quick]
"""

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _timing import Results, print_machine, quick_mode, set_threads  # noqa: E402

from llmbook.flash import naive_attention, peak_memory_bytes, tiled_attention  # noqa: E402


def peaks(T: int, d: int = 64, block: int = 128) -> tuple[int, int]:
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 1, T, d, generator=g) for _ in range(3))
    with torch.no_grad():
        naive = peak_memory_bytes(naive_attention, q, k, v, causal=True)
        tiled = peak_memory_bytes(tiled_attention, q, k, v, causal=True, block_size=block)
        torch.testing.assert_close(tiled_attention(q, k, v, causal=True, block_size=block),
                                   naive_attention(q, k, v, causal=True), rtol=1e-4, atol=1e-5)
    return naive, tiled


def main() -> None:
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
