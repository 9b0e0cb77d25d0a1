"""Checkers for the exercises of chapter 06a, registered on import (see :mod:`llmbook.exercises`)."""

from __future__ import annotations

import random

import torch

from ._core import _cases, _prediction, _register, _seeded, _tgen


def _window_average_ref(x: torch.Tensor, w: int) -> torch.Tensor:
    """Row t is the mean of rows max(0, t - w + 1) .. t (dim -2): a loop, the plainest definition."""
    T = x.shape[-2]
    return torch.stack([x[..., max(0, t - w + 1):t + 1, :].mean(dim=-2) for t in range(T)], dim=-2)


@_register("06a.1", "A sliding-window average as one matmul", "complete",
           "def window_average(x, w):\n    return NotImplemented  # x (..., T, C) -> (..., T, C)")
def _ex_06a_1(answer, rng, ctx):
    cases = []
    for i in range(5):
        g = _tgen(rng)
        T = rng.randint(4, 12)
        w = rng.randint(2, T - 1) if i < 3 else rng.randint(1, T + 3)  # the first three cut the window short
        shape = (rng.randint(1, 3), T, rng.randint(1, 5)) if i % 2 else (T, rng.randint(1, 5))
        # float32, torch's default and step 2's dtype: a matrix built with torch.ones or .float() fits x
        cases.append((torch.randn(*shape, generator=g, dtype=torch.float32), w))
    def divide_by_w(x, w):
        T = x.shape[-2]
        return torch.stack([x[..., max(0, t - w + 1):t + 1, :].sum(dim=-2) / w for t in range(T)], dim=-2)
    def one_too_many(x, w):
        return _window_average_ref(x, w + 1)
    def causal_average(x, w):
        return _window_average_ref(x, x.shape[-2])
    def future(x, w):
        return _window_average_ref(x.flip(-2), w).flip(-2)
    return _cases(answer, _window_average_ref, cases, rel=1e-6,
                  wrong=[(divide_by_w, "the first rows have fewer than w rows to average: divide each row by its own count"),
                         (one_too_many, "the window holds w rows: t - w + 1 .. t, the row itself included"),
                         (causal_average, "keep only the last w rows: a band below the diagonal, not the whole lower triangle"),
                         (future, "row t may see rows up to t only, never later ones (a lower band, not an upper one)")],
                  hint="row t averages rows t - w + 1 .. t (fewer near the start); check your output against a plain loop",
                  show=lambda a: f"x of shape {tuple(a[0].shape)}, w={a[1]}")


def _attention_param_count(d: int, h: int) -> int:
    from ..gpt import CausalSelfAttention, GPTConfig
    with torch.device("meta"):  # shapes only: no memory, no random numbers
        m = CausalSelfAttention(GPTConfig(vocab_size=2, block_size=2, n_layer=1, n_head=h, d_model=d, d_ff=4), 0)
    return sum(p.numel() for p in m.parameters())


@_register("06a.2", "Parameters of multi-head attention", "derive",
           "def attention_params(d_model, n_head):\n    return NotImplemented")
def _ex_06a_2(answer, rng, ctx):
    heads = [4] + [rng.choice([1, 2, 3, 4, 6, 8, 12, 16]) for _ in range(4)]  # at least one case with several heads
    cases = [(h * rng.randint(1, 96), h) for h in heads]
    return _cases(answer, _attention_param_count, cases,
                  wrong=[(lambda d, h: 4 * d * d, "every Linear layer of the attention has a bias too"),
                         (lambda d, h: 3 * d * d + 3 * d, "after the heads are joined, an output projection (d_model x d_model, with bias) mixes them"),
                         (lambda d, h: h * (4 * d * d + 4 * d), "the heads split d_model between them: each has d_model / n_head columns"),
                         (lambda d, h: 3 * (d * (d // h) + d // h) + d * d + d, "count the queries, keys and values of all the heads, not of one")],
                  show=lambda a: f"d_model={a[0]}, n_head={a[1]}")


def _last_logits_after_shuffle(n_layer: int, rng: random.Random) -> tuple[float, int]:
    """Largest change of the last position's logits when the earlier tokens of a sequence are shuffled.

    A fresh GPT without positions (the table zeroed), float64, with weights large enough that
    attention is far from uniform.
    """
    from ..gpt import GPT, GPTConfig
    g = _tgen(rng)
    T, V = rng.randint(6, 12), rng.randint(8, 20)
    with _seeded(rng):
        m = GPT(GPTConfig(vocab_size=V, block_size=T, n_layer=n_layer, n_head=2, d_model=16, d_ff=32)).double().eval()
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float64) * 0.5)
        m.wpe.weight.zero_()
        idx = torch.randint(V, (1, T), generator=g)
        while len(set(idx[0, :-1].tolist())) < 3:  # a prefix worth shuffling
            idx = torch.randint(V, (1, T), generator=g)
        perm = torch.randperm(T - 1, generator=g)
        while torch.equal(idx[0, :-1][perm], idx[0, :-1]):
            perm = torch.randperm(T - 1, generator=g)
        shuffled = torch.cat([idx[:, :-1][:, perm], idx[:, -1:]], dim=1)
        a, b = m(idx)[0][0, -1], m(shuffled)[0][0, -1]
    return float((a - b).abs().max()), T


@_register("06a.3", "Without positions, does the order of the past matter?", "predict",
           "answer = {'one_block': ..., 'two_blocks': ...}  # 'changed' or 'unchanged'")
def _ex_06a_3(answer, rng, ctx):
    measured, inputs = {}, []
    for key, n_layer in (("one_block", 1), ("two_blocks", 2)):
        for _ in range(5):  # a draw whose change is neither clearly zero nor clearly not is drawn again
            diff, T = _last_logits_after_shuffle(n_layer, rng)
            if diff < 1e-9 or diff > 1e-4:
                break
        measured[key] = "unchanged" if diff < 1e-9 else "changed"
        inputs.append((key, T, diff))
    if isinstance(answer, dict):
        answer = {k: ("unchanged" if v is False else "changed" if v is True else v) for k, v in answer.items()}
    return _prediction(answer, measured, tuple(inputs), what="fresh models without positions, prefix shuffled",
                       wrong=[({"one_block": "unchanged", "two_blocks": "unchanged"},
                               "in the second block, each earlier position carries what it saw up to itself; shuffling changes those prefixes"),
                              ({"one_block": "changed", "two_blocks": "changed"},
                               "in one block the last position takes a weighted sum whose weights depend on content only, and a sum ignores order"),
                              ({"one_block": "changed", "two_blocks": "unchanged"},
                               "start with one block: a weighted sum over the earlier positions, weights from content only")],
                       hint="answer with 'changed' or 'unchanged' for each model")


@_register("06a.4", "Dropout at training and at evaluation time", "predict",
           "answer = {'train_mode': ..., 'eval_mode': ...}  # True if two forward passes give equal logits")
def _ex_06a_4(answer, rng, ctx):
    from ..gpt import GPT, GPTConfig
    g = _tgen(rng)
    V, T = rng.randint(8, 30), rng.randint(4, 16)
    with _seeded(rng):
        m = GPT(GPTConfig(vocab_size=V, block_size=T, n_layer=1, n_head=2, d_model=16, d_ff=32, dropout=0.1))
        idx = torch.randint(V, (2, T), generator=g)
        with torch.no_grad():
            m.train()
            train_equal = bool(torch.equal(m(idx)[0], m(idx)[0]))
            m.eval()
            eval_equal = bool(torch.equal(m(idx)[0], m(idx)[0]))
    measured = {"train_mode": train_equal, "eval_mode": eval_equal}
    return _prediction(answer, measured, ((V, T),), what="two forward passes of a fresh model with dropout 0.1",
                       wrong=[({"train_mode": True, "eval_mode": True}, "in training mode each pass draws a new random mask"),
                              ({"train_mode": False, "eval_mode": False}, "in evaluation mode dropout is switched off: nothing random is left"),
                              ({"train_mode": True, "eval_mode": False}, "dropout draws random masks while training and is off at evaluation")],
                       hint="answer True or False for each mode")
