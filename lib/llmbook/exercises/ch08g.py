"""Checkers for the exercises of chapter 08g (retrieval-augmented generation), registered on import (see :mod:`llmbook.exercises`)."""

from __future__ import annotations

import random

from ._core import _cases, _prediction, _register, _Result

def _rrf_ref(rankings, k=60):
    """Reciprocal-rank fusion: each id scores the sum over rankings of 1 / (k + its rank, from 1)."""
    score: dict = {}
    for ranking in rankings:
        for r, i in enumerate(ranking, 1):
            score[i] = score.get(i, 0.0) + 1.0 / (k + r)
    return sorted(score, key=lambda i: (-score[i], i))


def _rrf_cases(rng: random.Random) -> list[tuple]:
    """Fresh rankings (lists of passage ids, best first) that overlap in part; some with ties."""
    cases = []
    for _ in range(8):
        pool = rng.sample(range(100), rng.randint(5, 12))
        rankings = tuple(tuple(rng.sample(pool, rng.randint(2, len(pool)))) for _ in range(rng.randint(2, 3)))
        cases.append((rankings, rng.choice([1, 5, 60])))
    a, b = rng.sample(range(100), 2)
    cases.append((((a, b), (b, a)), 60))                      # a tie: the smaller id first
    rng.shuffle(cases)
    return cases


@_register("08g.1", "Reciprocal-rank fusion", "complete",
           "def fuse(rankings, k=60):\n    return NotImplemented  # a list of ids, best first")
def _ex_08g_1(answer, rng, ctx):
    def from_zero(rankings, k=60):  # ranks counted from 0
        s: dict = {}
        for ranking in rankings:
            for r, i in enumerate(ranking):
                s[i] = s.get(i, 0.0) + 1.0 / (k + r)
        return sorted(s, key=lambda i: (-s[i], i))

    def best_rank(rankings, k=60):  # the best single rank, not a sum
        s: dict = {}
        for ranking in rankings:
            for r, i in enumerate(ranking, 1):
                s[i] = max(s.get(i, 0.0), 1.0 / (k + r))
        return sorted(s, key=lambda i: (-s[i], i))

    def no_ties(rankings, k=60):  # ties left in order of first appearance
        s: dict = {}
        for ranking in rankings:
            for r, i in enumerate(ranking, 1):
                s[i] = s.get(i, 0.0) + 1.0 / (k + r)
        return sorted(s, key=lambda i: -s[i])
    return _cases(answer, _rrf_ref, _rrf_cases(rng),
                  wrong=[(from_zero, "the first place is rank 1: its share is 1 / (k + 1)"),
                         (best_rank, "an id found by both rankings adds both shares: sum over rankings"),
                         (no_ties, "break a tie in the fused score by the smaller id")],
                  hint="add 1 / (k + rank) for every ranking an id appears in (rank 1 = first); sort by that sum, "
                       "highest first, smaller id first on a tie",
                  show=lambda a: f"rankings={[list(r) for r in a[0]]}, k={a[1]}")


def _recall_ref(ranks, kmax):
    """recall@1..kmax from the rank (1 = first) of each question's gold passage, None when not retrieved."""
    return [sum(r is not None and r <= k for r in ranks) / len(ranks) for k in range(1, kmax + 1)]


@_register("08g.2", "Recall at k from ranks", "complete",
           "def recall_curve(ranks, kmax):\n    return NotImplemented  # [recall@1, ..., recall@kmax]")
def _ex_08g_2(answer, rng, ctx):
    cases = []
    for _ in range(6):
        n, depth = rng.randint(5, 30), rng.randint(3, 8)
        ranks = tuple(rng.choice([None] + list(range(1, depth + 1))) for _ in range(n))
        cases.append((ranks, rng.randint(1, depth + 2)))
    cases.append(((None, None, None), 3))

    def zero_based(ranks, kmax):
        return [sum(r is not None and r < k for r in ranks) / len(ranks) for k in range(1, kmax + 1)]

    def over_found(ranks, kmax):
        found = [r for r in ranks if r is not None] or [0]
        return [sum(0 < r <= k for r in found) / len(found) for k in range(1, kmax + 1)]

    def exactly_k(ranks, kmax):
        return [sum(r == k for r in ranks) / len(ranks) for k in range(1, kmax + 1)]
    return _cases(answer, _recall_ref, cases,
                  wrong=[(zero_based, "rank 1 is the first place: the gold passage is in the top k when rank <= k"),
                         (over_found, "divide by all questions: a gold passage not retrieved is a miss, not left out"),
                         (exactly_k, "recall@k counts the gold passage anywhere in the top k, not only at place k")],
                  hint="recall@k = (questions whose gold rank is not None and <= k) / (all questions)",
                  show=lambda a: f"ranks={list(a[0])}, kmax={a[1]}")


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
                       wrong=[({"scores": "same", "ranking": "same"}, "the book's BM25 (and Lucene's) saturates the count of a word in the "
                                                                      "passage (k1) only; each query word occurrence adds its term once more "
                                                                      "(Robertson's full BM25 also saturates query counts, with k3)"),
                              ({"scores": "other", "ranking": "changes"}, "every passage's score is a sum over query words")],
                       hint="write the book's score(q, d) as a sum over the query's words, each occurrence counted")
