"""Greedy generation speed of the book's LLaMA (KV cache) vs transformers on SmolLM2-135M.

Both models are loaded from the same GGUF file in float32 on the CPU and generate the
same number of new tokens greedily from the same chat prompt (EOS ignored, so the
lengths match). The tokens themselves differ after the answer: where the model wants to
end its turn (token 2), transformers' ``min_new_tokens`` forbids that token and takes the
runner-up, while the book's ``generate`` without ``eos_id`` emits it and goes on. So the
check of the outputs is a separate run of both that stops at the end-of-turn token, and
those must be identical (``same_tokens_to_eos=True``). Prints, last, ``smollm2_tokens_per_s_cpu=`` and
``smollm2_generate_ratio_vs_hf=`` (book time / transformers time; target <= 1.0).

Timing follows ``benchmarks/_timing.py``: a warm-up run of each, then ``--repeats`` runs
alternating (A B B A ...), medians and interquartile ranges, the ratio from paired runs.

Usage: python benchmarks/bench_llama.py [--tokens 16] [--repeats 5] [--quick]
"""

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _timing import Results, measure, print_machine, quick_mode, ratio, set_threads, throughput  # noqa: E402

from llmbook.llama import generate, load_gguf, smollm2_path  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=16, help="new tokens to generate (each run; 12 timed runs)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="20 tokens, 3 repeats (also BENCH_QUICK=1)")
    args = ap.parse_args()
    quick = quick_mode()
    n, reps = (20, 3) if quick else (args.tokens, args.repeats)
    set_threads()
    print_machine()
    from transformers import LlamaForCausalLM

    p = smollm2_path()
    ours = load_gguf(p)
    hf = LlamaForCausalLM.from_pretrained(str(p.parent), gguf_file=p.name, torch_dtype=torch.float32).eval()
    # "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n"
    ids = torch.tensor([[1, 4093, 198, 1780, 314, 260, 3575, 282, 4649, 47, 2, 198, 1, 520, 9531, 198]])
    out = {}

    def run_ours():
        out["book"] = generate(ours, ids, n)[:, ids.shape[1]:]  # the new tokens

    @torch.no_grad()
    def run_hf():
        out["hf"] = hf.generate(ids, max_new_tokens=n, min_new_tokens=n, do_sample=False)

    print(f"greedy generation of {n} tokens from a {ids.shape[1]}-token prompt, {reps} runs each, alternating",
          flush=True)
    t = measure({"book": run_ours, "transformers": run_hf}, repeats=reps, warmup=1)
    print(f"  {t['book']}\n  {t['transformers']}", flush=True)
    a, b = out["book"], out["hf"]
    forced_prefix = next((i for i in range(n) if a[0, i] != b[0, ids.shape[1] + i]), n)
    eos = int(hf.generation_config.eos_token_id if isinstance(hf.generation_config.eos_token_id, int)
              else hf.generation_config.eos_token_id[0])
    a_eos = generate(ours, ids, n, eos_id=eos)[0, ids.shape[1]:]
    with torch.no_grad():
        b_eos = hf.generate(ids, max_new_tokens=n, do_sample=False)[0, ids.shape[1]:]
    same = torch.equal(a_eos[: len(b_eos)], b_eos) and int(b_eos[-1]) == eos
    print(f"timed outputs agree for {forced_prefix} tokens (then HF's min_new_tokens forbids the end-of-turn "
          f"token {eos})")
    print(f"stopping at token {eos}: book {a_eos[:len(b_eos)].tolist()} / transformers {b_eos.tolist()}")
    print(f"same_tokens_to_eos={same}")
    if not same:
        sys.exit("the book's LLaMA and transformers disagree before the end-of-turn token")
    res = Results("bench_llama", quick=quick)
    res.add("smollm2_tokens_per_s_cpu", throughput(n, t["book"]), unit="tokens/s", higher_is_better=True, digits=3,
            description=f"SmolLM2-135M greedy generation with the book's KV cache, {n} tokens")
    res.add("smollm2_generate_ratio_vs_hf", ratio(t["book"], t["transformers"]), goal="<= 1.0",
            higher_is_better=False, reference="transformers LlamaForCausalLM.generate",
            description=f"SmolLM2-135M greedy generation of {n} tokens, book time / transformers'")
    res.finish()


if __name__ == "__main__":
    main()
