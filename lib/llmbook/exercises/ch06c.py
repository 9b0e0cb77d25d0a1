"""Checkers for the exercises of chapter 06c (decoding), registered on import (see :mod:`llmbook.exercises`)."""

from __future__ import annotations

import math
import random

import torch

from ._core import _cases, _prediction, _register, _tgen


@_register("06c.1", "Tokens per round of speculative decoding", "derive",
           "def tokens_per_round(alpha, k):\n    return NotImplemented")
def _ex_06c_1(answer, rng, ctx):
    from ..decoding import expected_tokens_per_round
    cases = [(round(rng.uniform(0.05, 0.95), 3), rng.randint(1, 8)) for _ in range(4)] + [(1.0, rng.randint(1, 8))]
    rng.shuffle(cases)
    return _cases(answer, expected_tokens_per_round, cases,
                  wrong=[(lambda a, k: float(k) if a == 1 else (1 - a ** k) / (1 - a),
                          "count the token the target always adds (the replacement or the bonus)"),
                         (lambda a, k: 1 + a * k, "acceptance stops at the first rejection: token i needs all i before it"),
                         (lambda a, k: a * k, "a round yields the accepted prefix plus one target token")],
                  hint="the round yields i + 1 tokens when exactly the first i drafted tokens are accepted",
                  show=lambda c: f"alpha={c[0]}, k={c[1]}")


def _target_passes_measured(n: int, k: int) -> int:
    from ..decoding import speculative_generate
    from ..llama import Llama, LlamaConfig
    torch.manual_seed(0)
    target = Llama(LlamaConfig.tiny()).eval()
    return speculative_generate(target, target, torch.tensor([[1, 2, 3]]), n, k=k, temperature=0).target_calls


@_register("06c.2", "Target passes with a perfect draft", "derive",
           "def target_passes(n, k):\n    return NotImplemented")
def _ex_06c_2(answer, rng, ctx):
    cases = [(rng.randint(1, 40), rng.randint(1, 6)) for _ in range(3)]
    k = rng.randint(1, 5)
    cases.append(((k + 1) * rng.randint(2, 5), k))   # a whole number of rounds
    rng.shuffle(cases)
    return _cases(answer, _target_passes_measured, cases,
                  wrong=[(lambda n, k: n // (k + 1), "round up: a last, shorter round still needs a pass"),
                         (lambda n, k: math.ceil(n / k), "a round with every draft accepted yields k + 1 tokens (the bonus)"),
                         (lambda n, k: n, "that is plain decoding: one pass per token")],
                  hint="each round costs one target pass and yields k + 1 tokens when every drafted token is accepted",
                  show=lambda c: f"n={c[0]}, k={c[1]}")


def _bigram_fn(table: torch.Tensor):
    logp = table.log()
    return lambda ids: logp[ids]


def _beam_trap(rng: random.Random) -> torch.Tensor:
    """A bigram table where greedy's first step leads to a flat branch that a beam of 4 prunes."""
    V = 40
    T = torch.full((V, V), 1e-6)
    a = rng.uniform(0.38, 0.45); b = rng.uniform(0.30, 0.34)
    T[0, 1], T[0, 2], T[0, 3] = a, b, 1 - a - b          # A (greedy), then B and C
    T[1, 4:14] = 0.09; T[1, 4] = 0.19                    # after A: flat, token 4 a little ahead
    T[2, 14], T[2, 15] = 0.5, 0.5                        # after B and C: two sure-ish tokens each
    T[3, 16], T[3, 17] = 0.5, 0.5
    T[4:14, 18] = 1.0                                    # after A's tokens: certain
    T[14:18, :] = 1.0 / V                                # after B's and C's: flat over everything
    T[18:, :] = 1.0 / V
    return T / T.sum(1, keepdim=True)


@_register("06c.3", "Is a wider beam never worse than greedy?", "predict",
           "answer = {'width_1_is_greedy': ..., 'width_4_never_worse': ...}")
def _ex_06c_3(answer, rng, ctx):
    from ..decoding import beam_search, greedy_decode
    g = _tgen(rng)
    same = True
    for _ in range(3):
        fn = _bigram_fn(torch.softmax(3 * torch.randn(12, 12, generator=g), -1))
        p = torch.tensor([rng.randrange(12)])
        same &= greedy_decode(fn, p, 6).tolist() == beam_search(fn, p, 6, beam_width=1).tokens.tolist()
    trap = _beam_trap(rng)
    fn = _bigram_fn(trap)
    greedy = greedy_decode(fn, torch.tensor([0]), 3).tolist()
    lp = lambda seq: sum(math.log(float(trap[x, y])) for x, y in zip([0] + seq, seq))
    never_worse = beam_search(fn, torch.tensor([0]), 3, beam_width=4).logprob >= lp(greedy) - 1e-9
    measured = {"width_1_is_greedy": bool(same), "width_4_never_worse": bool(never_worse)}
    return _prediction(answer, measured, (), what="beam search on three random models and one built to trap it",
                       wrong=[({"width_1_is_greedy": True, "width_4_never_worse": True},
                               "a wide beam can prune the greedy path early, when its first step leads to a flat "
                               "branch, and end on a less probable sequence"),
                              ({"width_1_is_greedy": False, "width_4_never_worse": False},
                               "a beam of one keeps the best extension at each step: exactly greedy")],
                       hint="answer True or False for each")
