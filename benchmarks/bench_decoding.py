"""Speculative decoding on SmolLM2-135M: wall-clock speed-up over plain greedy decoding on the CPU.

Target: SmolLM2-135M-Instruct through the book's ``Llama`` (KV cache), float32, one
thread. Draft: ``llmbook.decoding.NGramDraft`` (prompt lookup, Saxena 2023: propose the
token that followed the latest earlier occurrence of the last 1-3 tokens), which costs
nothing to run. The task is input-grounded on purpose: the chat prompt asks the model to
repeat a sentence, so most of the answer can be copied from the prompt, which is where
prompt lookup helps (summaries, edits, quoting); on free-form text its acceptance rate,
and so the speed-up, is far lower. Decoding is greedy (temperature 0), so the
speculative output must equal ``llmbook.llama.generate``'s token for token
(``same_tokens=True``; the script exits otherwise).

The other draft the chapter discusses, the target's own first layers with its final norm
and head (``truncated_draft``), is measured too, for its acceptance rate only: without
training for early exit (LayerSkip) those layers almost never predict the full model's
token, so it cannot speed anything up.

Prints, last, ``speculative_speedup=`` (greedy time / speculative time, paired runs;
target >= 1.5) and the acceptance rates. Timing follows ``benchmarks/_timing.py``.

Usage: python benchmarks/bench_decoding.py [--tokens 48] [--k 5] [--repeats 5] [--quick]
"""

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _timing import Results, measure, print_machine, quick_mode, ratio, set_threads  # noqa: E402

from llmbook.decoding import NGramDraft, speculative_generate, truncated_draft  # noqa: E402
from llmbook.llama import generate, load_gguf, load_tokenizer  # noqa: E402

TEXT = ("The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris, France. "
        "It is named after the engineer Gustave Eiffel, whose company designed and built the tower from 1887 to 1889.")


def prompt_ids(tok) -> torch.Tensor:
    msgs = [{"role": "user", "content": "Repeat this sentence exactly: " + TEXT}]
    ids = tok.apply_chat_template(msgs, add_generation_prompt=True, return_tensors="pt")
    if not isinstance(ids, torch.Tensor):  # newer transformers return a BatchEncoding
        ids = ids["input_ids"]
    return ids


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=48, help="new tokens per run")
    ap.add_argument("--k", type=int, default=5, help="drafted tokens per round")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--draft-layers", type=int, default=10, help="layers of the truncated draft (acceptance only)")
    ap.add_argument("--quick", action="store_true", help="16 tokens, 2 repeats (also BENCH_QUICK=1)")
    args = ap.parse_args()
    quick = quick_mode()
    n, reps = (16, 2) if quick else (args.tokens, args.repeats)
    set_threads()
    print_machine()
    model = load_gguf().eval()
    ids = prompt_ids(load_tokenizer())
    draft = NGramDraft(model.config.vocab_size, max_ngram=3)
    out = {}

    def run_greedy():
        out["greedy"] = generate(model, ids, n)[0, ids.shape[1]:]  # the new tokens

    def run_spec():
        out["spec"] = speculative_generate(model, draft, ids, n, k=args.k, temperature=0)

    print(f"greedy decoding of {n} tokens from a {ids.shape[1]}-token prompt, plain vs speculative "
          f"(n-gram draft, k={args.k}), {reps} runs each, alternating", flush=True)
    t = measure({"greedy": run_greedy, "speculative": run_spec}, repeats=reps, warmup=1)
    print(f"  {t['greedy']}\n  {t['speculative']}", flush=True)
    spec = out["spec"]
    same = torch.equal(spec.tokens, out["greedy"])
    print(f"same_tokens={same}; acceptance {spec.accepted}/{spec.proposed} = {spec.acceptance_rate:.3f}, "
          f"{spec.target_calls} target passes for {n} tokens")
    if not same:
        sys.exit("speculative greedy output differs from the target's greedy output")
    trunc = speculative_generate(model, truncated_draft(model, args.draft_layers), ids, min(n, 24), k=2,
                                 temperature=0)
    print(f"truncated draft ({args.draft_layers} of {model.config.n_layer} layers, k=2): acceptance "
          f"{trunc.accepted}/{trunc.proposed} = {trunc.acceptance_rate:.3f}", flush=True)
    res = Results("bench_decoding", quick=quick)
    res.add("speculative_speedup", ratio(t["greedy"], t["speculative"]), goal=">= 1.5", higher_is_better=True,
            reference="llmbook.llama.generate (greedy, KV cache)",
            description=f"SmolLM2-135M greedy, {n} tokens of a repeat-this-sentence answer: plain time / "
                        f"speculative time with the n-gram (prompt lookup) draft, k={args.k}")
    res.add("speculative_acceptance_rate", spec.acceptance_rate, unit="fraction", higher_is_better=True,
            description=f"drafted tokens accepted by the target, n-gram draft, k={args.k} (deterministic: one run)")
    res.add("truncated_draft_acceptance_rate", trunc.acceptance_rate, unit="fraction", higher_is_better=True,
            description=f"drafted tokens accepted, draft = first {args.draft_layers} layers + final norm + head, k=2")
    res.finish()


if __name__ == "__main__":
    main()
