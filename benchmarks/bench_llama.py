"""Greedy generation speed of the book's LLaMA (KV cache) vs transformers on SmolLM2-135M.

Both models are loaded from the same GGUF file in float32 on the CPU and generate the
same number of new tokens greedily from the same chat prompt (EOS ignored, so the
lengths match). Prints, last, ``smollm2_tokens_per_s_cpu=`` and
``smollm2_generate_ratio_vs_hf=`` (book time / transformers time; target <= 1.0).

Usage: python benchmarks/bench_llama.py [--tokens 100]
"""

import argparse
import time

import torch

from llmbook.llama import generate, load_gguf, smollm2_path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=100, help="new tokens to generate")
    n = ap.parse_args().tokens
    from transformers import LlamaForCausalLM

    p = smollm2_path()
    ours = load_gguf(p)
    hf = LlamaForCausalLM.from_pretrained(str(p.parent), gguf_file=p.name, torch_dtype=torch.float32).eval()
    # "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n"
    ids = torch.tensor([[1, 4093, 198, 1780, 314, 260, 3575, 282, 4649, 47, 2, 198, 1, 520, 9531, 198]])
    generate(ours, ids, 2)  # warm-up
    t0 = time.perf_counter()
    a = generate(ours, ids, n)
    t_ours = time.perf_counter() - t0
    with torch.no_grad():
        hf.generate(ids, max_new_tokens=2, do_sample=False)  # warm-up
        t0 = time.perf_counter()
        b = hf.generate(ids, max_new_tokens=n, min_new_tokens=n, do_sample=False)
        t_hf = time.perf_counter() - t0
    same = torch.equal(a[0], b[0, ids.shape[1]:])
    print(f"tokens={n} book_s={t_ours:.2f} hf_s={t_hf:.2f} same_tokens={same}")
    print(f"smollm2_tokens_per_s_cpu={n / t_ours:.2f}")
    print(f"smollm2_generate_ratio_vs_hf={t_ours / t_hf:.3f}")


if __name__ == "__main__":
    main()
