"""Checkers for the exercises of chapter 00, registered on import (see :mod:`llmbook.exercises`)."""

from __future__ import annotations

import math
import random

import torch

from ._core import (_cases, _Fail, _is_placeholder, _need, _NotAttempted, _prediction, _rand_text,
    _register, _report, _Result)


ALPHA_EN = "abcdeht "


def _tiny_lm(rng: random.Random, order: int):
    from ..ngram import CharNGramLM
    # the text ends with a newline used nowhere else, so every queried history has a successor
    return CharNGramLM(order=order, alpha=rng.choice([0.5, 1.0])).fit(_rand_text(rng, ALPHA_EN, 300) + "\n")


@_register("00.1", "A trigram probability from counts", "complete",
           "def sequence_probability(lm, text):\n    return NotImplemented")
def _ex_00_1(answer, rng, ctx):
    cases = [(_tiny_lm(rng, 3), _rand_text(rng, ALPHA_EN.strip(), rng.randint(1, 5))) for _ in range(4)]
    def no_smoothing(lm, text):
        p = lm.count(text[0]) / lm.n_chars
        for i in range(1, len(text)):
            h = text[max(0, i - 2):i]
            p *= lm.count(h + text[i]) / max(lm.count(h), 1)
        return p
    def all_unigram(lm, text):
        V = len(lm.vocab)
        return math.prod((lm.count(c) + lm.alpha) / (lm.n_chars + lm.alpha * V) for c in text)
    return _cases(answer, lambda lm, t: lm.sequence_probability(t), cases, rel=1e-6,
                  wrong=[(no_smoothing, "add alpha to every count and alpha |V| to every denominator"),
                         (all_unigram, "x_2 is conditioned on x_1 (bigram) and x_3 on x_1 x_2 (trigram)")],
                  hint="p(x1) is the smoothed unigram, p(x2|x1) the smoothed bigram, p(x_i|x_{i-2}x_{i-1}) the trigram",
                  show=lambda a: f"a trigram model (alpha={a[0].alpha}) and text {a[1]!r}")


@_register("00.2", "Which models ignore the order of characters?", "predict",
           "answer = {'unigram': ..., 'bigram': ...}  # True: every permutation gets the same probability")
def _ex_00_2(answer, rng, ctx):
    if isinstance(answer, dict) and any(_is_placeholder(v) for v in answer.values()):
        raise _NotAttempted()
    text = _rand_text(rng, ALPHA_EN.strip(), 12)
    measured = {}
    for name, order in (("unigram", 1), ("bigram", 2)):
        lm = _tiny_lm(rng, order)
        p0 = lm.sequence_probability(text)
        shuffles = ["".join(rng.sample(text, len(text))) for _ in range(10)]
        measured[name] = all(math.isclose(lm.sequence_probability(s), p0, rel_tol=1e-9) for s in shuffles)
    return _prediction(answer, measured, (text,), what="ten random shuffles of a fresh string",
                       wrong=[({"unigram": True, "bigram": True}, "a bigram model multiplies p(x_i | x_{i-1}): which pairs are adjacent changes"),
                              ({"unigram": False, "bigram": False}, "a unigram probability is a product of p(x_i), and a product does not care about order")],
                       hint="write p(text) as a product and ask which factors a shuffle changes")


@_register("00.3", "Greedy decoding", "complete",
           "def greedy(lm, prompt, n):\n    return NotImplemented  # the n characters appended")
def _ex_00_3(answer, rng, ctx):
    def ref(lm, prompt, n):
        out = prompt
        for _ in range(n):
            chars, p = lm.prob_next(out)
            out += chars[int(torch.argmax(p))]
        return out[len(prompt):]
    cases = [(_tiny_lm(rng, 3), _rand_text(rng, ALPHA_EN.strip(), 3), rng.randint(3, 12)) for _ in range(3)]
    return _cases(answer, ref, cases,
                  wrong=[(lambda lm, p, n: p + ref(lm, p, n),
                          "return only the n new characters, not the prompt"),
                         (lambda lm, p, n: ref(lm, p, n - 1), "append exactly n characters")],
                  hint="at every step append the single most likely next character given everything so far",
                  show=lambda a: f"prompt {a[1]!r}, n={a[2]}")


@_register("00.4", "How many histories does an n-gram model have?", "derive",
           "def n_histories(V, n):\n    return NotImplemented")
def _ex_00_4(answer, rng, ctx):
    cases = [(rng.randint(2, 120), rng.randint(1, 7)) for _ in range(5)]
    return _cases(answer, lambda V, n: V ** (n - 1), cases,
                  wrong=[(lambda V, n: V ** n, "that counts n-grams; a history is the n - 1 characters before"),
                         (lambda V, n: V * (n - 1), "each of the n - 1 positions has V choices independently: multiply, do not add")],
                  show=lambda a: f"V={a[0]}, n={a[1]}")


@_register("00.5", "Report a probability from the next-character explorer", "widget",
           "answer = {'prompt': ..., 'temperature': ..., 'char': ..., 'prob': ...}")
def _ex_00_5(answer, rng, ctx):
    r = _report(answer, ["prompt", "temperature", "char", "prob"])
    lm = _need(ctx, "model")
    chars, p = lm.prob_next(r["prompt"], float(r["temperature"]))
    if r["char"] not in chars:
        raise _Fail(f"{r['char']!r} is not in the model's vocabulary", "copy the character as the bar shows it (a space is ' ')")
    exp = float(p[chars.index(r["char"])])
    got = float(r["prob"])
    if abs(got - exp) <= max(0.01, 0.05 * exp):
        return _Result(f"the model gives {r['char']!r} after {r['prompt'][-8:]!r} at T={r['temperature']} "
                       f"probability {exp:.3f}, as you read", (r,))
    at1 = float(lm.prob_next(r["prompt"], 1.0)[1][chars.index(r["char"])])
    h = ("that is the probability at temperature 1: set the slider before reading" if abs(got - at1) <= max(0.01, 0.05 * at1)
         and float(r["temperature"]) != 1.0 else "read the bar of that character with the prompt and temperature you report")
    raise _Fail(f"your value {got:.3f} is {'too high' if got > exp else 'too low'} for these settings", h)
