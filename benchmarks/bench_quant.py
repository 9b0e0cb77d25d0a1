"""Quantized weights on a CPU: the memory they save and the speed a dequantise-on-the-fly matmul costs.

Side A is ``llmbook.quant.QuantLinear`` (the weight kept as GGUF Q4_1 or Q8_0 blocks, dequantised to
float32 at every call, then ``F.linear``); side B is ``nn.Linear`` with the float32 weight, on the same
input, in the same process. Shapes are SmolLM2-135M's feed-forward matrices (576 -> 1536, the gate,
and 1536 -> 576, the down projection), with a batch of 1 (one step of generation) and of 64 (a
prompt). Each timed sample is ``--inner`` calls, so that a sample lasts milliseconds.

Memory is counted, not timed (one run): SmolLM2's 210 block matrices as float32 and as Q4_1 blocks,
and the whole model with its block matrices as ``QuantLinear`` (``llmbook.quant.model_nbytes``; the
embedding stays float32 in the model).

Honest expectation: on a CPU this is *slower* than float32. PyTorch has no kernel that multiplies
from 4-bit blocks, so every call unpacks the codes and writes a float32 copy of the matrix before
the matmul: more memory traffic than the float32 weight, not less. Fused kernels (llama.cpp's CPU
dot products, GPU kernels that dequantise inside the matmul) are where the speed comes from; this
benchmark measures what the book's code costs, and says so in its ratios (time quantized / time
float32: above 1 is slower).

Timing follows ``benchmarks/_timing.py``: one torch thread (CPU time), a warm-up, alternating repeats,
medians and paired ratios. ``--quick`` (or BENCH_QUICK=1): a 256 -> 512 matrix, a random tiny LLaMA
for the memory, three repeats; a smoke test, not a measurement.

Usage: python benchmarks/bench_quant.py [--repeats 7] [--inner 20] [--quick]
"""

import argparse
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _timing import Results, measure, print_machine, quick_mode, ratio, set_threads  # noqa: E402

from llmbook.quant import GGUF_FORMATS, QuantLinear, gguf_dequantize, model_nbytes, quantizable_linears, quantize_linears  # noqa: E402


def timed_calls(layer: nn.Module, x: torch.Tensor, inner: int):
    def run():
        with torch.no_grad():
            for _ in range(inner):
                layer(x)
    return run


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--inner", type=int, default=20, help="calls per timed sample")
    ap.add_argument("--quick", action="store_true", help="small sizes, 3 repeats (also BENCH_QUICK=1)")
    args = ap.parse_args()
    quick = quick_mode()
    reps, inner = (3, 5) if quick else (args.repeats, args.inner)
    set_threads()
    print_machine()
    res = Results("bench_quant", quick=quick)

    # ------------------------------------------------------------------ memory (counted)
    if quick:
        from llmbook.llama import Llama, LlamaConfig
        torch.manual_seed(0)
        model, what = Llama(LlamaConfig.tiny()).eval(), "a random tiny LLaMA"
    else:
        from llmbook.llama import load_gguf
        model, what = load_gguf(), "SmolLM2-135M"
    mats = [lin.weight for _, lin in quantizable_linears(model)]
    n = sum(w.numel() for w in mats)
    fp32_mats, q41_mats = 4 * n, n // 32 * GGUF_FORMATS["Q4_1"].block_bytes
    fp32_model = model_nbytes(model)
    idx = torch.tensor([[1, 2, 3, 4, 5, 6, 7, 8]])
    with torch.no_grad():
        ref = model(idx)
        quantize_linears(model, "Q4_1")
        quantized = model(idx)
    q41_model = model_nbytes(model)
    print(f"{what}: {len(mats)} block matrices, {n:,} weights: float32 {fp32_mats:,} bytes, Q4_1 {q41_mats:,}; "
          f"the whole model {fp32_model:,} bytes -> {q41_model:,} (embedding kept in float32)")
    print(f"logits of the Q4_1 model vs float32: largest difference {float((quantized - ref).abs().max()):.3g}")
    res.add("quant_q4_1_block_matrices_memory_ratio", fp32_mats / q41_mats, unit="x", higher_is_better=True,
            description=f"{what}'s block matrices: float32 bytes / Q4_1 bytes (5 bits per weight)")
    res.add("quant_q4_1_model_memory_ratio", fp32_model / q41_model, unit="x", higher_is_better=True,
            description=f"{what} in memory: float32 / block matrices as QuantLinear(Q4_1), embedding float32")
    del model, ref, quantized

    # ------------------------------------------------------------------ speed (timed)
    shapes = [("256x512", 256, 512)] if quick else [("gate 576->1536", 576, 1536), ("down 1536->576", 1536, 576)]
    batches = (1, 8) if quick else (1, 64)
    g = torch.Generator().manual_seed(0)
    for label, d_in, d_out in shapes:
        lin = nn.Linear(d_in, d_out, bias=False)
        with torch.no_grad():
            lin.weight.copy_(torch.randn(d_out, d_in, generator=g) * 0.05)
        q41, q80 = QuantLinear.from_linear(lin, "Q4_1"), QuantLinear.from_linear(lin, "Q8_0")
        for B in batches:
            x = torch.randn(B, d_in, generator=g)
            with torch.no_grad():                     # the same numbers as a float32 layer with the dequantised weight
                for q, fmt in ((q41, "Q4_1"), (q80, "Q8_0")):
                    w = gguf_dequantize(q.blocks, fmt)
                    torch.testing.assert_close(q(x), F.linear(x, w), rtol=0, atol=0)
            print(f"{label}, batch {B}: {inner} calls per sample, {reps} samples each, alternating", flush=True)
            t = measure({"float32": timed_calls(lin, x, inner), "Q4_1": timed_calls(q41, x, inner),
                         "Q8_0": timed_calls(q80, x, inner)}, repeats=reps, warmup=1)
            for name in t:
                print(f"  {t[name]}")
            key = label.split()[0]
            for fmt in ("Q4_1", "Q8_0"):
                r = ratio(t[fmt], t["float32"])
                print(f"  {fmt} / float32: {r.value:.2f} (IQR {r.spread[0]:.2f}-{r.spread[1]:.2f})"
                      f"{'  slower' if r.value > 1 else ''}", flush=True)
                res.add(f"quant_{fmt.lower()}_matmul_{key}_b{B}_time_ratio_vs_fp32", r, higher_is_better=False,
                        reference="nn.Linear, float32 weight",
                        description=f"{label}, batch {B}: QuantLinear({fmt}) dequantising every call / float32 "
                                    f"(above 1: slower; no fused kernel on the CPU)")
    res.finish()


if __name__ == "__main__":
    main()
