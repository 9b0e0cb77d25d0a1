"""Checkers for the exercises of chapter 01b, registered on import (see :mod:`llmbook.exercises`)."""

from __future__ import annotations

import math
import random
from fractions import Fraction

from ._core import _cases, _Fail, _need, _rand_text, _register, _report, _Result


@_register("01b.1", "A unigram likelihood as an exact fraction", "derive",
           "def likelihood(pieces):\n    return NotImplemented  # a Fraction")
def _ex_01b_1(answer, rng, ctx):
    from ..tokenizers.unigram import piece_probabilities, segmentation_likelihood
    pool = ["b", "an", "a", "na", "ban", "n"]
    cases = [([rng.choice(pool) for _ in range(rng.randint(1, 7))],) for _ in range(6)]
    cases.insert(0, ([rng.choice(pool)] * 2 + [rng.choice(pool[3:])],))
    def uniform(pieces):
        return Fraction(1, len(set(pieces))) ** len(pieces)
    def distinct_only(pieces):
        p = piece_probabilities(pieces)
        return math.prod(p[x] for x in set(pieces))
    return _cases(answer, lambda s: segmentation_likelihood(s, piece_probabilities(s)), cases,
                  wrong=[(uniform, "estimate p(piece) = count(piece) / number of pieces, not 1 / number of distinct pieces"),
                         (distinct_only, "multiply one factor per piece of the segmentation, repeated pieces included")],
                  show=lambda a: f"segmentation {'|'.join(a[0])}")


@_register("01b.2", "WordPiece, longest match first", "complete",
           "def wordpiece(word, vocab):\n    return NotImplemented  # list of pieces")
def _ex_01b_2(answer, rng, ctx):
    from ..tokenizers.wordpiece import wordpiece_word
    cases = []
    for _ in range(12):
        starts = {_rand_text(rng, "abc", rng.randint(1, 3)) for _ in range(4)}
        conts = {"##" + _rand_text(rng, "abc", rng.randint(1, 3)) for _ in range(8)}
        word = _rand_text(rng, "abc", rng.randint(1, 6)) + ("z" if rng.random() < 0.15 else "")
        cases.append((word, starts | conts))
    cases.insert(0, ("unbelievablez", {"un", "##believ", "##bel", "##iev", "##able", "##ably", "##y", "##a", "##b", "##l"}))
    def partial_unk(word, vocab):
        out, i = [], 0
        while i < len(word):
            for j in range(len(word), i, -1):
                piece = word[i:j] if i == 0 else "##" + word[i:j]
                if piece in vocab:
                    out.append(piece); i = j; break
            else:
                out.append("[UNK]"); i += 1
        return out
    def shortest(word, vocab):
        out, i = [], 0
        while i < len(word):
            for j in range(i + 1, len(word) + 1):
                piece = word[i:j] if i == 0 else "##" + word[i:j]
                if piece in vocab:
                    out.append(piece); i = j; break
            else:
                return ["[UNK]"]
        return out
    return _cases(answer, wordpiece_word, cases,
                  wrong=[(partial_unk, "when no piece matches, the whole word becomes ['[UNK]'], not just the rest"),
                         (shortest, "take the longest piece in the vocabulary at each step, not the shortest")],
                  hint="pieces after the first carry the '##' prefix",
                  show=lambda a: f"word {a[0]!r} with a vocabulary of {len(a[1])} pieces")


def _zh_words(rng: random.Random) -> dict[str, float]:
    words = ["北京", "天气", "今天", "很好", "北京人", "京", "天", "气", "今", "很", "好", "北", "人", "的", "天气很好"]
    return {w: math.log(rng.uniform(0.01, 0.3)) for w in words}


@_register("01b.3", "The most likely segmentation of a Chinese sentence (中文分词)", "complete",
           "def best_segmentation(text, log_probs):\n    return NotImplemented  # list of pieces")
def _ex_01b_3(answer, rng, ctx):
    from ..tokenizers.unigram import viterbi
    cases = []
    for _ in range(8):
        lp = _zh_words(rng)
        text = "".join(rng.choice(["北京", "天气", "今天", "很好", "北京人", "的"]) for _ in range(rng.randint(1, 5)))
        cases.append((text, lp))
    def greedy(text, lp):
        out, i = [], 0
        while i < len(text):
            j = max(j for j in range(i + 1, len(text) + 1) if text[i:j] in lp)
            out.append(text[i:j]); i = j
        return out
    return _cases(answer, lambda t, lp: viterbi(t, lp)[0], cases,
                  wrong=[(greedy, "that is greedy longest match; the unigram model maximises the sum of log-probabilities over all segmentations"),
                         (lambda t, lp: list(t), "single characters are one candidate; compare every segmentation")],
                  hint="dynamic programming: best[i] = max over j < i of best[j] + log p(text[j:i])",
                  show=lambda a: f"text {a[0]!r}")


@_register("01b.4", "Report a token count from the tokenizer comparison", "widget",
           "answer = {'text': ..., 'tokenizer': ..., 'n_tokens': ...}")
def _ex_01b_4(answer, rng, ctx):
    r = _report(answer, ["text", "tokenizer", "n_tokens"])
    toks = _need(ctx, "tokenizers")
    if r["tokenizer"] not in toks:
        raise _Fail(f"no tokenizer named {r['tokenizer']!r}", f"use one of the names the widget shows: {', '.join(toks)}")
    exp = len(toks[r["tokenizer"]](r["text"]))
    if int(r["n_tokens"]) == exp:
        return _Result(f"{r['tokenizer']} cuts your text into {exp} tokens", (r,))
    h = ("that is the number of characters, not of tokens" if int(r["n_tokens"]) == len(r["text"])
         else "count the tokens of the row of that tokenizer, for exactly the text you report")
    raise _Fail(f"{r['n_tokens']} is {'too many' if int(r['n_tokens']) > exp else 'too few'}", h)
