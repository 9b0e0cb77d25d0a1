"""Checkers for the exercises of chapter 01a, registered on import (see :mod:`llmbook.exercises`)."""

from __future__ import annotations

import random

from ._core import _cases, _Fail, _rand_text, _register, _report, _Result, _summ


def _overlapping_merge(seq, pair, new_id):
    out = []
    for i, x in enumerate(seq):
        if i + 1 < len(seq) and (seq[i], seq[i + 1]) == tuple(pair):
            out.append(new_id)
        elif not (i > 0 and (seq[i - 1], seq[i]) == tuple(pair)):
            out.append(x)
    return out


@_register("01a.1", "One merge step", "complete",
           "def one_merge(seq, pair, new_id):\n    return NotImplemented")
def _ex_01a_1(answer, rng, ctx):
    from ..tokenizers.bpe import merge_pair
    cases = [([rng.randint(1, 3) for _ in range(rng.randint(0, 16))], (rng.randint(1, 3), rng.randint(1, 3)), 99)
             for _ in range(30)]
    cases.insert(0, ([7, 7, 7, rng.randint(1, 3)], (7, 7), 99))
    def right_to_left(seq, pair, new_id):
        return merge_pair(seq[::-1], tuple(pair)[::-1], new_id)[::-1]
    return _cases(answer, merge_pair, cases,
                  wrong=[(_overlapping_merge, "occurrences must not overlap: after a merge, skip both ids"),
                         (right_to_left, "scan left to right: in [7, 7, 7] the first two ids merge")],
                  hint="walk i from 0; when (seq[i], seq[i+1]) is the pair, emit new_id and jump by 2")


def _zh_text(rng: random.Random, n: int) -> str:
    return _rand_text(rng, "今天气很好北京的人", n)


@_register("01a.2", "Byte pairs of a Chinese text (中文字节对)", "complete",
           "def byte_pair_counts(text):\n    return NotImplemented  # {(byte, byte): count}")
def _ex_01a_2(answer, rng, ctx):
    from ..tokenizers.bpe import count_pairs
    cases = [(_zh_text(rng, rng.randint(1, 8)),) for _ in range(6)]
    def char_pairs(text):
        return {(a, b): n for (a, b), n in count_pairs([(list(map(ord, text)), 1)]).items()}
    def fmt(d):
        return f"{len(d)} distinct pairs, {sum(d.values())} in all" if isinstance(d, dict) else _summ(d)
    return _cases(answer, lambda t: dict(count_pairs([(list(t.encode('utf-8')), 1)])), cases,
                  wrong=[(char_pairs, "count pairs of UTF-8 bytes (text.encode('utf-8')), not of characters: each of these characters is 3 bytes"),
                         (lambda t: dict(count_pairs([(list(t.encode('utf-8'))[::3], 1)])), "use every byte, not one per character")],
                  hint="every adjacent pair counts, overlapping ones too", fmt=fmt,
                  show=lambda a: f"text {a[0]!r}")


@_register("01a.3", "Counting the pairs of 'aaaa...'", "derive",
           "def aa_counts(n):\n    return NotImplemented  # (count of pair (a, a), tokens after merging it)")
def _ex_01a_3(answer, rng, ctx):
    from ..tokenizers.bpe import count_pairs, merge_pair
    def ref(n):
        ids = [97] * n
        return (count_pairs([(ids, 1)])[(97, 97)], len(merge_pair(ids, (97, 97), 256)))
    cases = [(rng.randint(2, 40),) for _ in range(5)]
    return _cases(answer, ref, cases,
                  wrong=[(lambda n: (n // 2, n - n // 2), "the count includes overlapping pairs; the merge does not overlap"),
                         (lambda n: (n - 1, n - (n - 1)), "a merge cannot use one 'a' twice: after merging, skip both ids")],
                  show=lambda a: f"n={a[0]}")


@_register("01a.4", "Report a token count from the BPE explorer", "widget",
           "answer = {'text': ..., 'level': ..., 'merges': ..., 'n_tokens': ...}")
def _ex_01a_4(answer, rng, ctx):
    from ..viz.bpe import bpe_trace, tokenizer_at
    r = _report(answer, ["text", "level", "merges", "n_tokens"])
    merges = int(r["merges"])
    tok = tokenizer_at(bpe_trace(r["text"], r["level"], max(300, merges)), merges)
    exp = len(tok.encode(r["text"]))
    if int(r["n_tokens"]) == exp:
        return _Result(f"{merges} merges learned on your text cut it into {exp} tokens", (r,))
    n0 = len(tokenizer_at(bpe_trace(r["text"], r["level"], 300), 0).encode(r["text"]))
    h = ("that is the count before any merge" if int(r["n_tokens"]) == n0 else
         "count the coloured spans for the text, level and merges you report")
    raise _Fail(f"{r['n_tokens']} tokens is {'too many' if int(r['n_tokens']) > exp else 'too few'}", h)
