"""Greedy generation speed of the book's LLaMA (KV cache) vs transformers on SmolLM2-135M.

Both models are loaded from the same GGUF file in float32 on the CPU and generate the
same number of new tokens greedily from the same chat prompt (EOS ignored, so the
lengths match). The tokens themselves differ after the answer: where the model wants to
end its turn (token 2), transformers' ``min_new_tokens`` forbids that token and takes the
runner-up, while the book's ``generate`` without ``eos_id`` emits it and goes on. So the
check of the outputs is a separate run of both that stops at the end-of-turn token, and
those must be identical (``same_tokens_to_eos=True``). Prints, last, ``smollm2_tokens_per_s_cpu=`` and
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
    forced_prefix = next((i for i in range(n) if a[0, i] != b[0, ids.shape[1] + i]), n)
    eos = int(hf.generation_config.eos_token_id if isinstance(hf.generation_config.eos_token_id, int)
              else hf.generation_config.eos_token_id[0])
    a_eos = generate(ours, ids, n, eos_id=eos)[0]
    with torch.no_grad():
        b_eos = hf.generate(ids, max_new_tokens=n, do_sample=False)[0, ids.shape[1]:]
    same = torch.equal(a_eos[: len(b_eos)], b_eos) and int(b_eos[-1]) == eos
    print(f"tokens={n} book_s={t_ours:.2f} hf_s={t_hf:.2f} timed outputs agree for {forced_prefix} tokens "
          f"(then HF's min_new_tokens forbids the end-of-turn token {eos})")
    print(f"stopping at token {eos}: book {a_eos[:len(b_eos)].tolist()} / transformers {b_eos.tolist()}")
    print(f"same_tokens_to_eos={same}")
    print(f"smollm2_tokens_per_s_cpu={n / t_ours:.2f}")
    print(f"smollm2_generate_ratio_vs_hf={t_ours / t_hf:.3f}")


if __name__ == "__main__":
    main()
