"""Checkers for the exercises of chapter 07b (T5 and GLM objectives), registered on import (see :mod:`llmbook.exercises`)."""

from __future__ import annotations

import math

import torch

from ._core import _call, _cases, _Fail, _prediction, _register, _tgen


def _t5_counts(L: int, r: float, mu: float) -> tuple[int, int]:
    """(noise tokens, spans) of T5's layout when no clipping binds: round(L r), round(noise / mu)."""
    n_noise = int(round(L * r))
    return n_noise, int(round(n_noise / mu))


@_register("07b.1", "Lengths of T5's inputs and targets", "derive",
           "def t5_lengths(L, noise_density, mean_span_length):\n    return NotImplemented  # (len(inputs), len(targets))")
def _ex_07b_1(answer, rng, ctx):
    from ..objectives import span_corruption
    cases = []
    while len(cases) < 5:
        L, r, mu = rng.randint(20, 600), rng.choice([0.1, 0.15, 0.2, 0.3, 0.5]), rng.choice([2.0, 3.0, 5.0, 8.0])
        n_noise, n_spans = _t5_counts(L, r, mu)
        ties = abs((L * r) % 1 - 0.5) < 1e-6 or abs((n_noise / mu) % 1 - 0.5) < 1e-6  # round() conventions differ there
        if not ties and 1 <= n_spans <= min(n_noise, L - n_noise):
            cases.append((L, r, mu))

    def ref(L, r, mu):
        inp, tgt = span_corruption(torch.arange(L), list(range(L, 2 * L + 1)), r, mu, generator=_tgen(rng))
        return (len(inp), len(tgt))

    def counts(f):
        return lambda L, r, mu: f(L, *_t5_counts(L, r, mu))
    if not callable(answer):
        raise _Fail(f"expected a function, got {type(answer).__name__}", "define t5_lengths and pass it (no parentheses)")

    def as_tuple(*a):
        got = _call(answer, *a)
        return tuple(got) if isinstance(got, (list, tuple)) else got
    return _cases(as_tuple, ref, cases,
                  wrong=[(counts(lambda L, n, k: (L - n + k, n + k)), "the targets end with one more sentinel, after the last span"),
                         (counts(lambda L, n, k: (L - n, n)), "each span is replaced by one sentinel in the inputs and announced by it in the targets"),
                         (counts(lambda L, n, k: (L - n + k, n + 2 * k)), "a span is announced by one sentinel in the targets, not two")],
                  hint="count the noise tokens round(L * noise_density), the spans round(noise / mean_span_length), and the sentinels",
                  show=lambda a: f"L={a[0]}, noise_density={a[1]}, mean_span_length={a[2]}")


@_register("07b.2", "GLM's attention mask over Part A and Part B", "complete",
           "def glm_mask(n_a, n_b):\n    return NotImplemented  # (n_a + n_b, n_a + n_b) bool, True where query i may attend to key j")
def _ex_07b_2(answer, rng, ctx):
    from ..objectives import glm_blank_infilling
    masks = {}
    for i in range(6):  # real examples from the library: their Part A / Part B sizes and masks
        n = rng.randint(6, 40) if i else 6
        ex = glm_blank_infilling(torch.arange(n), n, n + 1, n + 2, generator=_tgen(rng))
        masks[(ex.n_context, len(ex.input_ids) - ex.n_context)] = ex.attention_mask

    def causal(a, b):
        return torch.ones(a + b, a + b).tril().bool()

    def a_sees_b(a, b):
        m = masks[(a, b)].clone()
        m[:a] = True
        return m

    def b_bidirectional(a, b):
        m = masks[(a, b)].clone()
        m[a:, a:] = True
        return m

    def b_not_itself(a, b):
        m = masks[(a, b)].clone()
        m[a:, a:] = torch.ones(b, b).tril(-1).bool()
        return m
    return _cases(answer, lambda a, b: masks[(a, b)], list(masks),
                  wrong=[(causal, "Part A is bidirectional: every token of A sees all of A, as in BERT"),
                         (a_sees_b, "Part A must not see Part B: B holds the spans A is missing"),
                         (b_bidirectional, "Part B is generated left to right: a token of B sees only the earlier tokens of B"),
                         (b_not_itself, "every token sees itself (the diagonal is allowed)")],
                  hint="rows are queries, columns keys: A sees A; B sees A and the tokens of B up to itself",
                  show=lambda a: f"n_a={a[0]}, n_b={a[1]}")


@_register("07b.3", "Where T5's spans can start and end", "predict",
           "answer = {'first_token': ..., 'last_token': ...}  # fraction of sequences with that token inside a span")
def _ex_07b_3(answer, rng, ctx):
    from ..objectives import span_corruption
    if not isinstance(answer, dict) or set(answer) != {"first_token", "last_token"}:
        raise _Fail("expected a dict {'first_token': fraction, 'last_token': fraction}",
                    "give one fraction between 0 and 1 for each of the two keys")
    first = last = 0
    n = 300
    for _ in range(n):
        L = rng.randint(8, 300)
        sent = list(range(L, 2 * L + 1))
        inp, _ = span_corruption(torch.arange(L), sent, rng.choice([0.1, 0.15, 0.3]), rng.choice([1.0, 3.0, 5.0]),
                                 generator=_tgen(rng))
        first += int(inp[0]) >= L  # the input starts with a sentinel: token 0 was removed
        last += int(inp[-1]) >= L
    measured = {"first_token": first / n, "last_token": last / n}
    return _prediction(answer, measured, (n,), what=f"{n} fresh corruptions",
                       wrong=[({"first_token": 0.15, "last_token": 0.15}, "the layout is not the same at the ends as in the middle: how do the runs alternate?"),
                              ({"first_token": 1, "last_token": 0}, "which kind of run does T5's layout start with?"),
                              ({"first_token": 0, "last_token": 0}, "the runs alternate and there are as many kept runs as spans: which kind is last?")],
                       hint="the runs alternate kept, noise, kept, noise, ...; look at noise_span_lengths")


def _glm_mean_span_ref(lam: float) -> float:
    return lam / (1 - math.exp(-lam))  # E[n | n >= 1] for n ~ Poisson(lam): E[n] / P(n >= 1)


@_register("07b.4", "The mean length of GLM's spans", "derive",
           "def glm_mean_span(lam):\n    return NotImplemented  # Poisson(lam), a draw of 0 drawn again")
def _ex_07b_4(answer, rng, ctx):
    cases = [(round(rng.uniform(0.3, 6.0), 3),) for _ in range(5)]
    return _cases(answer, _glm_mean_span_ref, cases, rel=1e-6,
                  wrong=[(lambda lam: lam, "a draw of 0 is drawn again, so the mean is above lambda"),
                         (lambda lam: lam * (1 - math.exp(-lam)), "conditioning on n >= 1 divides by P(n >= 1); it does not multiply"),
                         (lambda lam: lam + 1, "that is a Poisson shifted by one; here only the zeros are removed")],
                  hint="E[n | n >= 1] = E[n] / P(n >= 1), and E[n] gets nothing from n = 0",
                  show=lambda a: f"lam={a[0]}")
