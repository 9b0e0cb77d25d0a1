"""Checkers for the exercises of chapter 06b, registered on import (see :mod:`llmbook.exercises`)."""

from __future__ import annotations

import torch

from ._core import _cases, _Fail, _need, _prediction, _register, _report, _Result, _tgen


def _gpt_cfg(V, n_ctx, L, d):
    from ..gpt import GPTConfig
    return GPTConfig(vocab_size=V, block_size=n_ctx, n_layer=L, n_head=1, d_model=d, d_ff=4 * d)


@_register("06b.1", "GPT parameters from the formula", "derive",
           "def gpt_params(V, n_ctx, L, d):\n    return NotImplemented")
def _ex_06_1(answer, rng, ctx):
    from ..flops import param_count
    cases = [(rng.randint(50, 60000), rng.choice([64, 256, 1024, 2048]), rng.randint(1, 48), 64 * rng.randint(1, 40)) for _ in range(5)]
    return _cases(answer, lambda V, n, L, d: param_count(_gpt_cfg(V, n, L, d)), cases,
                  wrong=[(lambda V, n, L, d: V * d + n * d + L * (12 * d * d + 13 * d), "GPT-2 adds a final LayerNorm (2 d parameters)"),
                         (lambda V, n, L, d: V * d + L * (12 * d * d + 13 * d) + 2 * d, "count the learned position embeddings (n_ctx x d)"),
                         (lambda V, n, L, d: 2 * V * d + n * d + L * (12 * d * d + 13 * d) + 2 * d, "the output layer shares the token embedding matrix"),
                         (lambda V, n, L, d: V * d + n * d + L * 12 * d * d + 2 * d, "biases and LayerNorms add 13 d per layer")],
                  show=lambda a: f"V={a[0]}, n_ctx={a[1]}, L={a[2]}, d={a[3]}")


@_register("06b.2", "Tokens for a compute budget", "derive",
           "def tokens_for_budget(C, N):\n    return NotImplemented")
def _ex_06_2(answer, rng, ctx):
    from ..scaling import training_compute
    cases = [(10 ** rng.uniform(18, 25), 10 ** rng.uniform(6, 12)) for _ in range(5)]
    return _cases(answer, lambda C, N: C / training_compute(N, 1.0), cases,
                  wrong=[(lambda C, N: C / (2 * N), "2N FLOPs per token is the forward pass only; training adds a backward pass of 4N"),
                         (lambda C, N: C / N, "training costs about 6 N FLOPs per token"),
                         (lambda C, N: 6 * N * C, "solve C = 6 N D for D")],
                  show=lambda a: f"C={a[0]:.3g}, N={a[1]:.3g}")


@_register("06b.3", "Which tokens does top-p keep?", "complete",
           "def top_p_keep(probs, p):\n    return NotImplemented  # a bool tensor like probs")
def _ex_06_3(answer, rng, ctx):
    from ..sampling import kept_mask
    cases = []
    for _ in range(6):
        x = torch.rand(rng.randint(3, 10), generator=_tgen(rng)) ** 3 + 1e-3
        cases.append((x / x.sum(), round(rng.uniform(0.2, 0.95), 2)))
    cases.insert(0, (torch.tensor([0.05, 0.5, 0.1, 0.2, 0.15]), 0.8))
    def strict(probs, p):
        s, i = probs.sort(descending=True)
        keep = torch.zeros_like(probs, dtype=torch.bool)
        keep[i[s.cumsum(0) <= p]] = True
        keep[i[0]] = True
        return keep
    def sorted_order(probs, p):
        s, _ = probs.sort(descending=True)
        return (s.cumsum(0) - s) < p
    return _cases(answer, lambda probs, p: kept_mask(probs.log(), top_p=p), cases,
                  wrong=[(strict, "keep the token that makes the cumulative probability reach p, too"),
                         (sorted_order, "return the mask in the original order of the tokens, not sorted")],
                  hint="sort by probability, keep the smallest prefix whose total reaches p",
                  show=lambda a: f"probs {[round(v, 3) for v in a[0].tolist()]}, p={a[1]}")


@_register("06b.4", "The smallest frequency the arithmetic coder uses", "predict",
           "answer = ...  # the smallest integer frequency quantize_probs gives any character")
def _ex_06_4(answer, rng, ctx):
    from ..compression import quantize_probs
    p = [rng.random() for _ in range(rng.randint(3, 40))]
    for i in rng.sample(range(len(p)), 2):
        p[i] = 0.0  # characters the model calls impossible
    measured = int(quantize_probs(p).min())
    return _prediction(answer, measured, (p,), what="quantize_probs on a fresh distribution with zeros",
                       wrong=[(0, "a character of frequency 0 could never be encoded, so unlikely text would not round-trip")],
                       hint="the coder needs an interval of positive width for every character")


@_register("06b.5", "Report the number of kept tokens from the sampling explorer", "widget",
           "answer = {'prompt': ..., 'temperature': ..., 'top_k': ..., 'top_p': ..., 'n_kept': ...}")
def _ex_06_5(answer, rng, ctx):
    from ..sampling import kept_mask
    r = _report(answer, ["prompt", "temperature", "top_k", "top_p", "n_kept"])
    model, vocab = _need(ctx, "model"), _need(ctx, "vocab")
    k = None if r["top_k"] in (0, None) else int(r["top_k"])
    p = None if r["top_p"] is None or float(r["top_p"]) >= 1.0 else float(r["top_p"])
    ids = torch.tensor([vocab.encode(r["prompt"])], device=next(model.parameters()).device)
    with torch.no_grad():
        logits = model(ids)[0][0, -1].float().cpu()
    exp = int(kept_mask(logits, float(r["temperature"]), k, p).sum())
    if int(r["n_kept"]) == exp:
        return _Result(f"{exp} tokens stay in the running with these settings", (r,))
    h = ("that is the count without the top-p filter" if p is not None and int(r["n_kept"]) == int(kept_mask(logits, float(r["temperature"]), k, None).sum())
         else "count the coloured (kept) bars for exactly the settings you report")
    raise _Fail(f"{r['n_kept']} is {'too many' if int(r['n_kept']) > exp else 'too few'}", h)
