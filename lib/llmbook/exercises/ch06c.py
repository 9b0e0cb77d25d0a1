"""Checkers for the exercises of chapter 06c (decoding), registered on import (see :mod:`llmbook.exercises`)."""

from __future__ import annotations

import math
import random

import torch

from ._core import _call, _cases, _Fail, _is_placeholder, _NotAttempted, _prediction, _register, _Result, _tgen


def _walltime_speedup(alpha: float, k: int, c: float) -> float:
    """Leviathan et al. 2023, Theorem 3.8: tokens per round over the cost of a round in target passes."""
    from ..decoding import expected_tokens_per_round
    return expected_tokens_per_round(alpha, k) / (k * c + 1)


@_register("06c.1", "The wall-clock speed-up of a draft that is not free", "derive",
           "def speedup(alpha, k, c):\n    return NotImplemented")
def _ex_06c_1(answer, rng, ctx):
    cases = [(round(rng.uniform(0.05, 0.95), 3), rng.randint(1, 8), round(rng.uniform(0.0, 0.3), 3))
             for _ in range(4)] + [(1.0, rng.randint(1, 8), round(rng.uniform(0.01, 0.3), 3))]
    rng.shuffle(cases)
    tokens = lambda a, k: float(k + 1) if a == 1 else (1 - a ** (k + 1)) / (1 - a)
    return _cases(answer, _walltime_speedup, cases,
                  wrong=[(lambda a, k, c: tokens(a, k), "a round also pays for k draft steps: k c in target-pass units"),
                         (lambda a, k, c: tokens(a, k) / (k * c), "a round runs the target once as well: k c + 1"),
                         (lambda a, k, c: tokens(a, k) / ((k + 1) * c + 1),
                          "the draft runs k times per round, not k + 1 (the bonus token costs no draft step)"),
                         (lambda a, k, c: tokens(a, k) * (k * c + 1), "speed-up = tokens per round / cost per round")],
                  hint="plain decoding makes one token per target pass; a round makes (1 - alpha^(k+1)) / (1 - alpha) "
                       "tokens and costs k draft steps of c each plus one target pass",
                  show=lambda c: f"alpha={c[0]}, k={c[1]}, c={c[2]}")


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


def _eos_trap(rng: random.Random) -> torch.Tensor:
    """A bigram table where EOS (token 4) is the argmax after the prompt but a sure four-token line follows 1."""
    e = rng.uniform(0.52, 0.58)  # EOS at once scores log(e) / lp(1) <= -0.54 at any alpha ...
    sure = rng.uniform(0.98, 0.995)  # ... the line 1 2 3 EOS log((1 - e) sure^3) / lp(4) >= -0.51 at alpha 1.5
    T = torch.full((5, 5), 1e-9)
    T[0, 4], T[0, 1] = e, 1 - e
    T[1, 2], T[1, 4] = sure, 1 - sure
    T[2, 3], T[2, 4] = sure, 1 - sure
    T[3, 4], T[3, 3] = sure, 1 - sure
    T[4, :] = 0.2
    return T / T.sum(1, keepdim=True)


@_register("06c.3", "Is a beam of one greedy, and is a wider beam never worse?", "predict",
           "answer = {'width_1_no_eos': ..., 'width_1_eos_alpha': ..., 'width_4_never_worse': ...}")
def _ex_06c_3(answer, rng, ctx):
    from ..decoding import beam_search, greedy_decode
    g = _tgen(rng)
    same = True
    for _ in range(3):
        fn = _bigram_fn(torch.softmax(3 * torch.randn(12, 12, generator=g), -1))
        p = torch.tensor([rng.randrange(12)])
        same &= greedy_decode(fn, p, 6).tolist() == beam_search(fn, p, 6, beam_width=1).tokens.tolist()
    # With an EOS and alpha > 0: greedy stops at the EOS it prefers; does the width-1 beam?
    eos_fn = _bigram_fn(_eos_trap(rng))
    greedy_eos = greedy_decode(eos_fn, torch.tensor([0]), 1).tolist()  # [4]: the EOS
    same_eos = beam_search(eos_fn, torch.tensor([0]), 6, beam_width=1, length_penalty=1.5,
                           eos_id=4).tokens.tolist() == greedy_eos
    trap = _beam_trap(rng)
    fn = _bigram_fn(trap)
    greedy = greedy_decode(fn, torch.tensor([0]), 3).tolist()
    lp = lambda seq: sum(math.log(float(trap[x, y])) for x, y in zip([0] + seq, seq))
    never_worse = beam_search(fn, torch.tensor([0]), 3, beam_width=4).logprob >= lp(greedy) - 1e-9
    measured = {"width_1_no_eos": bool(same), "width_1_eos_alpha": bool(same_eos),
                "width_4_never_worse": bool(never_worse)}
    res = _prediction(answer, measured, (), what="beam search on three random models and two built to trap it",
                       wrong=[({"width_1_no_eos": True, "width_1_eos_alpha": False, "width_4_never_worse": True},
                               "a wide beam can prune the greedy path early, when its first step leads to a flat "
                               "branch, and end on a less probable sequence"),
                              ({"width_1_no_eos": True, "width_1_eos_alpha": True, "width_4_never_worse": False},
                               "a finished hypothesis leaves the beam, and the beam is refilled with the best "
                               "candidate that does not end: with alpha > 0 that one can end longer and score higher"),
                              ({"width_1_no_eos": False, "width_1_eos_alpha": False, "width_4_never_worse": False},
                               "without an end token a beam of one keeps the best extension at each step: "
                               "exactly greedy")],
                       hint="answer True or False for each")
    # The summary of the dict would be cut at its length limit: say each measured answer in words.
    return _Result("your prediction matches beam search on three random models and two built to trap it: "
                   f"(a) width 1 without an end token is greedy: {measured['width_1_no_eos']}; "
                   f"(b) width 1 with an end token and alpha = 1.5 is greedy cut at its end token: "
                   f"{measured['width_1_eos_alpha']}; (c) width 4 is never less probable than greedy: "
                   f"{measured['width_4_never_worse']}", res.inputs)


def _accept_reject_cases(rng: random.Random) -> list[tuple]:
    g = _tgen(rng)
    cases = []
    for k in (1, 3, 4, 5, 6):
        V = rng.randint(4, 9)
        p = torch.softmax(2 * torch.randn(k + 1, V, generator=g, dtype=torch.float64), -1)
        q = torch.softmax(2 * torch.randn(k, V, generator=g, dtype=torch.float64), -1)
        drafts = torch.multinomial(q, 1, generator=g)[:, 0]
        u = torch.rand(k, generator=g, dtype=torch.float64)
        cases.append((p, q, drafts, u))
    # every drafted token accepted (u = 0): the bonus token's distribution is p's last row
    p, q, drafts, _ = cases[-1]
    cases.append((p, q, drafts, torch.zeros_like(drafts, dtype=torch.float64)))
    # a rejection after an accepted token, whatever the tables: u just above the second ratio
    k, (p, q, drafts, u) = 3, cases[1]
    u = u.clone(); u[0] = 0.0
    u[1] = min(0.999, float(p[1, drafts[1]] / q[1, drafts[1]]) + 1e-3)
    cases.append((p, q, drafts, u))
    rng.shuffle(cases)
    return cases


def _as_count(n) -> int | None:
    """The reader's count as an int (a Python int or a one-element tensor), else None."""
    try:
        return int(n)
    except (TypeError, ValueError, RuntimeError):
        return None


def _same_step(got, exp) -> bool:
    if not (isinstance(got, tuple) and len(got) == 2):
        return False
    n, dist = got
    return _as_count(n) == exp[0] and isinstance(dist, torch.Tensor) and dist.shape == exp[1].shape and bool(
        torch.allclose(dist.double(), exp[1], atol=1e-9))


@_register("06c.4", "The accept/reject step for k drafted tokens", "complete",
           "def accept_reject(p, q, drafts, u):\n    return NotImplemented")
def _ex_06c_4(answer, rng, ctx):
    if _is_placeholder(answer):
        raise _NotAttempted()
    if not callable(answer):
        raise _Fail(f"expected a function, got {type(answer).__name__}", "pass accept_reject itself (no parentheses)")
    from ..decoding import accept_reject
    cases = _accept_reject_cases(rng)
    for i, (p, q, drafts, u) in enumerate(cases):
        exp = accept_reject(p, q, drafts, u)   # the rule speculative_generate itself runs
        got = _call(answer, p.clone(), q.clone(), drafts.clone(), u.clone())
        if _same_step(got, exp):
            continue
        k = drafts.numel()
        what = f"for k={k} drafted tokens ({i} cases passed before): expected {exp[0]} accepted"
        if not (isinstance(got, tuple) and len(got) == 2):
            raise _Fail(f"{what}, got {type(got).__name__}", "return a pair: (number accepted, distribution of the next token)")
        n, dist = got
        n = _as_count(n)
        if n != exp[0]:
            ratio = p[:k].gather(-1, drafts[:, None])[:, 0] / q.gather(-1, drafts[:, None])[:, 0]
            if n == int((u < ratio).sum()):
                h = "acceptance stops at the first rejection: count the accepted prefix, not every accepted token"
            elif n == int(torch.cumprod((u < p[:k].gather(-1, drafts[:, None])[:, 0]).long(), 0).sum()):
                h = "accept d_i with probability min(1, p_i(d_i) / q_i(d_i)): compare u with the ratio, not with p alone"
            else:
                h = "d_i is accepted when u_i < p_i(d_i) / q_i(d_i), left to right, until the first rejection"
            raise _Fail(f"{what}, got {n}", h)
        if exp[0] == k:
            h = "when all k are accepted the next token is the bonus token, drawn from the target's last row p[k]"
        elif isinstance(dist, torch.Tensor) and dist.shape == exp[1].shape and torch.allclose(
                dist.double(), p[exp[0]].double(), atol=1e-9):
            h = "after a rejection, draw from the residual norm(max(0, p - q)), not from p: p would count " \
                "the tokens the draft already offered twice"
        else:
            h = "the residual is max(0, p_n - q_n) at the rejected position n, divided by its sum"
        raise _Fail(f"{what} and the right next-token distribution; the distribution differs", h)
    return _Result(f"your step agrees with the library's rule on {len(cases)} fresh rounds "
                   "(with rejections, a full acceptance and the bonus token)",
                   tuple((d.numel(), [round(x, 6) for x in v.tolist()]) for _, _, d, v in cases))
