"""Can GRPO improve the book's character GPT on addition within ~20 CPU minutes? (issue 27, chapter 10's risk)

Trains ``GPTConfig.baby`` (4 layers, 128 wide, 64 characters of context) from scratch by supervised
fine-tuning on addition problems (``llmbook.reasoning.Addition``, direct answer or column-by-column
scratchpad), stopped early on purpose so that it is right only part of the time, then runs GRPO from
that model: each step samples ``--group-size`` completions for each of ``--prompts`` training problems
at temperature 1, rewards 1 for a right answer (``grade``), turns the rewards into group-normalised
advantages (``group_advantages``) and takes one on-policy step on ``grpo_loss``. Before and after GRPO it
estimates held-out pass@1 and pass@k from ``--samples`` completions per test problem (``pass_at_k``) and
greedy accuracy, and it reports the share of groups whose rewards were all equal (they carry no signal).
One seed; decisions (difficulty, steps) were taken on the validation split, reported with ``--split val``.

    OMP_NUM_THREADS=1 nice -n 10 python scripts/grpo_feasibility.py --digits 3 --scratchpad --out /tmp/grpo.json
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))

from llmbook.checkpoint import load_state_checked, read_tensors, write_tensors  # noqa: E402
from llmbook.charvocab import CharVocab  # noqa: E402
from llmbook.gpt import GPT, GPTConfig  # noqa: E402
from llmbook.post_training import sft_example, sft_train  # noqa: E402
from llmbook.reasoning import (ADDITION_CHARS, LOSS_TYPES, STOP, Addition, addition_splits, completion_logprobs,  # noqa: E402
                               completion_mask, equal_reward_groups, grade, group_advantages, grpo_loss, pass_at_k)


def sample(model: GPT, vocab: CharVocab, problems: list[Addition], n: int, max_new: int, temperature: float,
           generator: torch.Generator, batch: int = 256) -> tuple[torch.Tensor, torch.Tensor, list[str]]:
    """n completions per problem (rows problem-major): prompt ids (B, P), completion ids (B, C), texts cut at STOP."""
    prompts = torch.tensor([vocab.encode(p.prompt) for p in problems for _ in range(n)])  # (B, P), one length
    outs = []
    for s in range(0, len(prompts), batch):
        outs.append(model.generate(prompts[s:s + batch], max_new, temperature=temperature, generator=generator)
                    [:, prompts.shape[1]:])
    comp = torch.cat(outs)  # (B, C)
    texts = [vocab.decode(row).split(STOP)[0] for row in comp]
    return prompts, comp, texts


def evaluate(model: GPT, vocab: CharVocab, problems: list[Addition], n: int, k: int, max_new: int,
             seed: int) -> dict[str, float]:
    g = torch.Generator().manual_seed(seed)
    _, _, texts = sample(model, vocab, problems, n, max_new, 1.0, g)
    right = [sum(grade(texts[i * n + j], p.answer) for j in range(n)) for i, p in enumerate(problems)]
    _, _, greedy = sample(model, vocab, problems, 1, max_new, 0.0, g)
    return {"pass@1": sum(pass_at_k(n, int(c), 1) for c in right) / len(problems),
            f"pass@{k}": sum(pass_at_k(n, int(c), k) for c in right) / len(problems),
            "greedy": sum(grade(t, p.answer) for t, p in zip(greedy, problems)) / len(problems),
            "never_right": sum(c == 0 for c in right) / len(problems)}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--digits", type=int, default=3)
    ap.add_argument("--scratchpad", action="store_true", help="targets add column by column before the answer")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--n-train", type=int, default=20000, help="training problems (at most all not held out)")
    ap.add_argument("--n-eval", type=int, default=200, help="held-out problems scored before and after GRPO")
    ap.add_argument("--split", choices=["val", "test"], default="test", help="the held-out split scored")
    ap.add_argument("--sft-steps", type=int, default=600)
    ap.add_argument("--sft-lr", type=float, default=2e-3)
    ap.add_argument("--sft-batch", type=int, default=64)
    ap.add_argument("--grpo-steps", type=int, default=100)
    ap.add_argument("--prompts", type=int, default=16, help="problems per GRPO step")
    ap.add_argument("--group-size", type=int, default=8, help="completions per problem (G)")
    ap.add_argument("--lr", type=float, default=1e-4, help="GRPO learning rate (AdamW)")
    ap.add_argument("--beta", type=float, default=0.0, help="k3 KL penalty to the SFT model")
    ap.add_argument("--loss-type", default="dr_grpo", choices=LOSS_TYPES)
    ap.add_argument("--no-scale", action="store_true", help="Dr. GRPO: advantages not divided by the group std")
    ap.add_argument("--samples", type=int, default=8, help="completions per held-out problem for pass@k")
    ap.add_argument("--load-sft", type=Path, help="start GRPO from this state dict instead of training SFT")
    ap.add_argument("--save-sft", type=Path, help="write the SFT model's state dict here")
    ap.add_argument("--out", type=Path, help="write the results as JSON here")
    args = ap.parse_args(argv)

    t0, c0 = time.perf_counter(), time.process_time()

    def clock() -> str:
        return f"[{time.process_time() - c0:6.0f} s CPU, {time.perf_counter() - t0:6.0f} s wall]"

    torch.manual_seed(args.seed)
    vocab = CharVocab(ADDITION_CHARS)
    pairs = 10 ** args.digits * (10 ** args.digits + 1) // 2  # distinct problems (a+b = b+a)
    n_train = min(args.n_train, pairs - 2 * args.n_eval)  # 2 digits: every problem not held out
    splits = addition_splits(args.digits, {"train": n_train, "val": args.n_eval, "test": args.n_eval}, args.seed)
    held = splits[args.split]
    max_new = len(Addition(10 ** args.digits - 1, 10 ** args.digits - 1, args.digits).target(args.scratchpad)) + 2
    model = GPT(GPTConfig.baby(vocab_size=len(vocab)))
    print(f"{args.digits}-digit addition, {'scratchpad' if args.scratchpad else 'direct'}; e.g. "
          f"{held[0].prompt}{held[0].target(args.scratchpad)!r}; {model.num_parameters():,} parameters", flush=True)

    if args.load_sft:
        tensors, _ = read_tensors(args.load_sft, name="--load-sft")   # safetensors: no pickle
        load_state_checked(model, tensors)
        sft_losses = []
    else:
        examples = [sft_example(vocab.encode(p.prompt), vocab.encode(p.target(args.scratchpad))) for p in splits["train"]]
        sft_losses = sft_train(model, examples, steps=args.sft_steps, lr=args.sft_lr, batch_size=args.sft_batch,
                               seed=args.seed, min_lr=args.sft_lr / 10)
        print(f"SFT {args.sft_steps} steps: loss {sft_losses[0]:.3f} -> {sft_losses[-1]:.3f} {clock()}", flush=True)
        if args.save_sft:
            # safetensors, written atomically; tied weights are cloned so each name owns its storage
            write_tensors(args.save_sft, {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()},
                          name="--save-sft")
    before = evaluate(model, vocab, held, args.samples, args.samples, max_new, seed=args.seed + 1)
    print(f"after SFT on {args.split}: {before} {clock()}", flush=True)

    reference = copy.deepcopy(model).eval() if args.beta > 0 else None
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.0)
    g = torch.Generator().manual_seed(args.seed + 2)
    pick = torch.Generator().manual_seed(args.seed + 3)
    stop_id = vocab.encode(STOP)[0]
    history = []
    for step in range(args.grpo_steps):
        idx = torch.randint(len(splits["train"]), (args.prompts,), generator=pick).tolist()
        problems = [splits["train"][i] for i in idx]
        prompt, comp, texts = sample(model, vocab, problems, args.group_size, max_new, 1.0, g)
        rewards = torch.tensor([grade(t, problems[i // args.group_size].answer) for i, t in enumerate(texts)])
        flat = equal_reward_groups(rewards, args.group_size).float().mean().item()
        adv = group_advantages(rewards, args.group_size, scale=not args.no_scale)
        model.train()
        logps = completion_logprobs(model, prompt, comp)
        ref = None
        if reference is not None:
            with torch.no_grad():
                ref = completion_logprobs(reference, prompt, comp)
        out = grpo_loss(logps, completion_mask(comp, stop_id), adv, ref_logps=ref, beta=args.beta,
                        loss_type=args.loss_type, max_completion_length=comp.shape[1])
        opt.zero_grad(set_to_none=True)
        out.loss.backward()
        opt.step()
        model.eval()
        history.append({"step": step, "reward": rewards.mean().item(), "equal_groups": flat, "kl": float(out.kl)})
        if step % 10 == 0 or step == args.grpo_steps - 1:
            print(f"GRPO step {step:4d}: mean reward {rewards.mean():.3f}, groups all-equal {flat:.2f}, "
                  f"kl {float(out.kl):.4f} {clock()}", flush=True)
    # --grpo-steps 0 (choosing the SFT budget): the model is unchanged, so is its score
    after = evaluate(model, vocab, held, args.samples, args.samples, max_new, seed=args.seed + 1) if history else before
    print(f"after GRPO on {args.split}: {after} {clock()}", flush=True)
    result = {"meta": {"command": "python scripts/grpo_feasibility.py " + " ".join(argv if argv is not None else sys.argv[1:]),
                       "seed": args.seed, "split": args.split, "steps": {"sft": args.sft_steps, "grpo": args.grpo_steps},
                       "args": {k: str(v) for k, v in vars(args).items()}},
              "before": before, "after": after, "sft_loss_last": sft_losses[-1] if sft_losses else None,
              "equal_groups_share": sum(h["equal_groups"] for h in history) / max(1, len(history)),
              "history": history, "cpu_s": time.process_time() - c0, "wall_s": time.perf_counter() - t0}
    if args.out:
        args.out.write_text(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
