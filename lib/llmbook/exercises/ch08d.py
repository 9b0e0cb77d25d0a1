"""Checkers for the exercises of chapter 08d (evaluation beyond loss), registered on import (see :mod:`llmbook.exercises`)."""

from __future__ import annotations

import math
import random
from typing import Callable

from ._core import _call, _cases, _Fail, _prediction, _rand_text, _register


@_register("08d.1", "Bits per byte from a perplexity per token", "derive",
           "def bpb_from_perplexity(ppl, n_tokens, n_bytes):\n    return NotImplemented  # your formula here")
def _ex_08d_1(answer, rng, ctx):
    from ..evaluation import bits_per_byte
    cases = []
    for _ in range(5):
        n = rng.randint(10, 4000)  # a token covers 1.5 to 6 bytes, so tokens and bytes never coincide
        cases.append((rng.uniform(1.5, 300.0), n, int(n * rng.uniform(1.5, 6.0))))

    def ref(ppl, n_tokens, n_bytes):  # the library's bits per byte of the total NLL over a text of n_bytes bytes
        return bits_per_byte(n_tokens * math.log(ppl), "x" * n_bytes)
    return _cases(answer, ref, cases, rel=1e-6,
                  wrong=[(lambda p, n, b: math.log2(p), "that is bits per token: a token covers several bytes"),
                         (lambda p, n, b: n * math.log(p) / b, "that is nats per byte: a bit is ln 2 nats"),
                         (lambda p, n, b: math.log2(p) / b, "the text's total is n_tokens times the loss of one token"),
                         (lambda p, n, b: b * math.log2(p) / n, "share the text's total over its bytes, not its tokens"),
                         (lambda p, n, b: n * math.log(p) * math.log(2) / b, "to turn nats into bits, divide by ln 2")],
                  hint="perplexity is exp(loss per token in nats): total the loss over the text, in bits, and share it over the bytes",
                  show=lambda a: f"ppl={a[0]:.4g}, n_tokens={a[1]}, n_bytes={a[2]}")


_MC_ASCII, _MC_CJK = "abcdefghijklmnopqrstuvwxyz ", "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能下过子说产种面而方后多定行学法所民得经"


def _mc_case(rng: random.Random) -> tuple[list, list, list, str]:
    """A random item: 2-5 choices mixing English and Chinese, their summed log-probs, token counts, a normalisation."""
    choices: list[str] = []
    while len(choices) < rng.randint(2, 5):
        c = _rand_text(rng, _MC_ASCII, rng.randint(0, 12)) + _rand_text(rng, _MC_CJK, rng.randint(0, 6))
        if c.strip() and c not in choices:
            choices.append(c)
    n_tokens = [max(1, round(len(c.encode("utf-8")) / rng.uniform(1.5, 4.0))) for c in choices]
    logprobs = [-sum(rng.uniform(0.1, 5.0) for _ in range(n)) for n in n_tokens]  # longer choices: larger losses
    return choices, logprobs, n_tokens, rng.choice(["sum", "per_token", "per_byte"])


def _mc_pick(choices, logprobs, n_tokens, how) -> int:
    """What the library's ``choose`` picks from precomputed (log-prob, tokens) per choice."""
    from ..evaluation import MCItem, choose
    table = dict(zip(choices, zip(logprobs, n_tokens)))
    return choose(MCItem("context", tuple(choices), 0), lambda ctx, c: table[c], how)


def _mc_wrong() -> list[tuple[Callable, str]]:
    def normalised(length, best=max):
        def pick(ch, lp, n, how):
            scores = [lp[i] / length(ch, n, i, how) for i in range(len(ch))]
            return best(range(len(ch)), key=scores.__getitem__)
        return pick
    right = {"sum": lambda ch, n, i: 1, "per_token": lambda ch, n, i: n[i],
             "per_byte": lambda ch, n, i: len(ch[i].encode("utf-8"))}
    return [(normalised(lambda ch, n, i, how: len(ch[i]) if how == "per_byte" else right[how](ch, n, i)),
             "per byte counts UTF-8 bytes, not characters: a Chinese character is 3 bytes"),
            (normalised(lambda ch, n, i, how: right[how](ch, n, i), best=min),
             "log-probabilities are negative: the best choice has the largest score, the one closest to 0"),
            (normalised(lambda ch, n, i, how: 1), "divide each sum by the choice's length in the unit normalisation names"),
            (normalised(lambda ch, n, i, how: n[i] if how != "sum" else 1),
             "per_byte divides by the length of the choice's text in bytes, not by its tokens"),
            (lambda ch, lp, n, how: ch[_mc_pick(ch, lp, n, how)], "return the index of the choice, not its text")]


@_register("08d.2", "Pick a choice under a normalisation", "complete",
           "def pick(choices, logprobs, n_tokens, normalisation):\n    return NotImplemented  # the index of the chosen choice")
def _ex_08d_2(answer, rng, ctx):
    if not callable(answer):
        raise _Fail(f"expected a function, got {type(answer).__name__}", "define pick and pass it (no parentheses)")
    wrong = _mc_wrong()
    cases, caught = [], set()
    for _ in range(5000):  # fresh items until every usual mistake gives a wrong pick on at least one of them
        case = _mc_case(rng)
        exp = _mc_pick(*case)
        new = {k for k, (w, _) in enumerate(wrong) if w(*case) != exp} - caught
        if new or len(cases) < 6:
            cases.append(case)
            caught |= new
        if len(caught) == len(wrong) and len(cases) >= 6:
            break
    rng.shuffle(cases)
    return _cases(lambda *a: _call(answer, *(list(x) if isinstance(x, list) else x for x in a)), _mc_pick, cases,
                  wrong=wrong, hint="divide each summed log-probability by the choice's length in the unit asked for, then take the best",
                  show=lambda a: f"choices={a[0]}, logprobs={[round(v, 2) for v in a[1]]}, n_tokens={a[2]}, normalisation={a[3]!r}")


@_register("08d.3", "When can per-token scoring overturn the sum?", "predict",
           "answer = {'winner_longest': ..., 'winner_shortest': ...}  # True: per-token scoring always picks the sum's winner")
def _ex_08d_3(answer, rng, ctx):
    keys = {"winner_longest", "winner_shortest"}
    if not isinstance(answer, dict) or set(answer) != keys:
        raise _Fail("expected a dict {'winner_longest': True or False, 'winner_shortest': True or False}",
                    "True where per-token scoring always picks the sum's winner, False where it can pick another")
    if any(not isinstance(v, bool) for v in answer.values()):
        raise _Fail("each value must be True or False", "True: per-token scoring always agrees with the sum")
    draws = 3000
    measured = dict.fromkeys(sorted(keys), True)   # sorted: a set's order changes with PYTHONHASHSEED
    for _ in range(draws):  # random items: the property must hold for every one of them
        n = [rng.randint(1, 10) for _ in range(rng.randint(2, 5))]
        lp = [-sum(rng.uniform(0.05, 6.0) for _ in range(k)) for k in n]
        choices = [f"choice {i}" for i in range(len(n))]
        s, t = _mc_pick(choices, lp, n, "sum"), _mc_pick(choices, lp, n, "per_token")
        if n[s] == max(n) and t != s:
            measured["winner_longest"] = False
        if n[s] == min(n) and t != s:
            measured["winner_shortest"] = False
    return _prediction(answer, measured, (draws,), what=f"{draws} random items",
                       wrong=[({"winner_longest": True, "winner_shortest": True},
                               "a short winner's sum spread over few tokens can have a worse average than a longer choice's"),
                              ({"winner_longest": False, "winner_shortest": False},
                               "when the winner has the most tokens, dividing brings its score at least as close to 0 as any other's"),
                              ({"winner_longest": False, "winner_shortest": True}, "it is the other way round")],
                       hint="log-probabilities are negative: ask what dividing by more or fewer tokens does to each score")
