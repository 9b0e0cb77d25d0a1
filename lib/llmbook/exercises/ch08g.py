"""Checkers for the exercises of chapter 08g (retrieval-augmented generation), registered on import (see :mod:`llmbook.exercises`)."""

from __future__ import annotations

import math
import random

from ._core import _cases, _prediction, _register, _Result

_NAMES = ["HERMIA", "LYSANDER", "DUKE SENIOR", "DUKE FREDERICK", "ROSALIND", "CELIA", "LE BEAU", "PUCK",
          "BOTTOM", "FIRST LORD", "JAQUES", "TOUCHSTONE"]


def _answer_cases(rng: random.Random) -> list[tuple]:
    """Fresh (answer, gold, names) triples covering what the grader forgives and what it does not."""
    names = rng.sample(_NAMES, 6) + ["DUKE SENIOR", "DUKE FREDERICK"]
    names = sorted(set(names))
    cases = []
    for _ in range(10):
        gold = rng.choice(names)
        other = rng.choice([n for n in names if n != gold])
        pretty = rng.choice([gold, gold.title(), gold.lower()])
        kind = rng.randrange(7)
        answer = [f"{pretty}", f"The character is {pretty}.", f"{pretty}!", f"{pretty} or {other.title()}",
                  f"{other.title()}", f"{pretty}s", f"  {pretty.upper()}:  "][kind]
        cases.append((answer, gold, tuple(names)))
    cases.append(("Duke Senior", "DUKE SENIOR", ("DUKE", "DUKE SENIOR", "CELIA")))  # a candidate inside the gold name
    cases.append(("Duke", "DUKE SENIOR", ("DUKE", "DUKE SENIOR", "CELIA")))          # half the name is not the name
    cases.append(("Hermione", "HERMIA", ("HERMIA", "CELIA")))                      # whole words only
    cases.append(("Celia, or else Rosalind", "CELIA", ("CELIA", "ROSALIND")))      # a list of guesses
    rng.shuffle(cases)
    return cases


@_register("08g.1", "A tolerant grader", "complete",
           "def grade(answer, gold, names):\n    return NotImplemented  # True or False")
def _ex_08g_1(answer, rng, ctx):
    from ..rag import grade_answer

    def ref(a, g, names):
        return grade_answer(a, g, names)

    def substring(a, g, names):  # gold anywhere, even inside a word
        return g.lower() in a.lower()

    def no_others(a, g, names):  # whole words, but a list of guesses passes
        return f" {' '.join(g.lower().split())} " in " " + " ".join("".join(c if c.isalpha() else " " for c in a.lower()).split()) + " "

    def exact(a, g, names):
        return a.strip() == g
    return _cases(answer, ref, _answer_cases(rng),
                  wrong=[(exact, "the model writes 'Rosalind' or 'The character is Rosalind.'; forgive case, punctuation and extra words"),
                         (substring, "match whole words: 'Hermione' does not name HERMIA"),
                         (no_others, "an answer that also names another candidate (a list of guesses) is not an answer; "
                                     "a candidate inside the gold name (DUKE in DUKE SENIOR) does not count against it")],
                  hint="lower-case, keep letters only, compare words; then reject answers naming another candidate",
                  show=lambda a: f"answer={a[0]!r}, gold={a[1]!r}, names={list(a[2])}")


@_register("08g.2", "One word's share of a BM25 score", "derive",
           "def term_score(tf, dl, avgdl, N, n, k1=1.5, b=0.75):\n    return NotImplemented  # a float")
def _ex_08g_2(answer, rng, ctx):
    from ..retrieval import BM25Index

    indexes, cases = {}, []
    for _ in range(5):
        # a fresh corpus: passage 0 holds the word "w" tf times in dl words; n - 1 other passages hold it once
        N, n = rng.randint(8, 40), rng.randint(1, 6)
        tf, dl = rng.randint(1, 4), rng.randint(5, 12)
        passages = [" ".join(["w"] * tf + ["x"] * (dl - tf))]
        passages += [" ".join(["w"] + ["y"] * rng.randint(1, 12)) for _ in range(n - 1)]
        passages += [" ".join(["z"] * rng.randint(2, 14)) for _ in range(N - n)]
        avgdl = sum(len(p.split()) for p in passages) / N
        case = (tf, dl, avgdl, N, n, round(rng.uniform(0.8, 2.0), 2), round(rng.uniform(0.3, 0.9), 2))
        indexes[case] = BM25Index(passages, k1=case[5], b=case[6])
        cases.append(case)

    def measured(tf, dl, avgdl, N, n, k1=1.5, b=0.75):  # the library's score of passage 0 for the query "w"
        return float(indexes[(tf, dl, avgdl, N, n, k1, b)].scores("w")[0, 0])
    return _cases(answer, measured, cases, rel=1e-6,
                  wrong=[(lambda tf, dl, avgdl, N, n, k1=1.5, b=0.75: math.log((N - n + 0.5) / (n + 0.5)) * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl)),
                          "that is the original idf, which turns negative for common words; the book's has 1 + inside the log"),
                         (lambda tf, dl, avgdl, N, n, k1=1.5, b=0.75: math.log(1 + (N - n + 0.5) / (n + 0.5)) * tf,
                          "the count saturates: tf (k1 + 1) / (tf + k1 (1 - b + b dl / avgdl)), not tf"),
                         (lambda tf, dl, avgdl, N, n, k1=1.5, b=0.75: math.log(1 + (N - n + 0.5) / (n + 0.5)) * tf * (k1 + 1) / (tf + k1),
                          "long passages are discounted: multiply k1 by (1 - b + b dl / avgdl)")],
                  hint="idf(w) times the saturated, length-normalised count",
                  show=lambda a: f"tf={a[0]}, dl={a[1]}, avgdl={a[2]:.4g}, N={a[3]}, n={a[4]}, k1={a[5]}, b={a[6]}")


@_register("08g.3", "Ask BM25 twice", "predict",
           "answer = {'scores': ..., 'ranking': ...}  # scores: 'same', 'double' or 'other'; ranking: 'same' or 'changes'")
def _ex_08g_3(answer, rng, ctx):
    import torch

    from ..retrieval import BM25Index
    words = ["cat", "dog", "bird", "fish", "moon", "sun", "star", "tree", "king", "queen"]
    passages = [" ".join(rng.choice(words) for _ in range(rng.randint(3, 12))) for _ in range(rng.randint(8, 20))]
    q = " ".join(rng.sample(words, rng.randint(2, 4)))
    bm = BM25Index(passages)
    once, twice = bm.scores(q)[0], bm.scores(f"{q} {q}")[0]
    if torch.allclose(twice, once):
        scores = "same"
    elif torch.allclose(twice, 2 * once):
        scores = "double"
    else:
        scores = "other"
    ranking = "same" if [h.index for h in bm.search(q, k=len(bm))[0]] == [h.index for h in bm.search(f"{q} {q}", k=len(bm))[0]] else "changes"
    return _prediction(answer, {"scores": scores, "ranking": ranking}, (q,), what=f"BM25 on {len(passages)} fresh passages",
                       wrong=[({"scores": "same", "ranking": "same"}, "BM25 saturates the count of a word in the passage (k1), "
                                                                      "not in the query: each query word occurrence adds its term once more"),
                              ({"scores": "other", "ranking": "changes"}, "every passage's score is a sum over query words")],
                       hint="write score(q, d) as a sum over the query's words")
