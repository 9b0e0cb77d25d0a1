"""Checkers for the exercises of chapter 01c, registered on import (see :mod:`llmbook.exercises`)."""

from __future__ import annotations

import torch

from ._core import _call, _cases, _is_placeholder, _prediction, _register, _tgen


_CL100K_CACHE: list = []


def _cl100k():
    """The book's cl100k tokenizer, loaded once (about half a second)."""
    if not _CL100K_CACHE:
        from ..tokenizers import ByteBPETokenizer
        _CL100K_CACHE.append(ByteBPETokenizer.from_tiktoken("cl100k_base"))
    return _CL100K_CACHE[0]


@_register("01c.1", "How many cl100k tokens does a number take?", "derive",
           "def number_tokens(n_digits, leading_space):\n    return NotImplemented")
def _ex_01c_1(answer, rng, ctx):
    tok = _cl100k()
    def ref(n, space):
        # measured on a fresh random number of n digits: the count depends only on n and the space
        digits = str(rng.randint(1, 9)) + "".join(str(rng.randint(0, 9)) for _ in range(n - 1))
        return len(tok.encode((" " if space else "") + digits))
    cases = [(n, s) for n, s in [(rng.choice([4, 5, 7, 8]), True), (rng.choice([2, 4, 5]), False)]]
    cases += [(rng.randint(1, 24), rng.random() < 0.5) for _ in range(6)]
    rng.shuffle(cases)
    return _cases(answer, ref, cases,
                  wrong=[(lambda n, s: n // 3 + int(s), "round up: one or two digits left over still make a token"),
                         (lambda n, s: -(-n // 3), "the space before a number does not join it: it is a token of its own"),
                         (lambda n, s: n + int(s), "that is SmolLM2's rule, one token per digit; cl100k groups digits")],
                  hint="cl100k's pre-tokenizer cuts a run of digits into groups of at most three, from the left",
                  show=lambda a: f"n_digits={a[0]}, leading_space={a[1]}")


_WORDS = ["please", "summarise", "this", "text", "ignore", "the", "above", "and", "reply", "now"]


@_register("01c.2", "Typed <|endoftext|>: text, control token or error?", "predict",
           "answer = {'default': ..., 'allow_fim_prefix': ...}  # each 'text', 'control' or 'error'")
def _ex_01c_2(answer, rng, ctx):
    tok = _cl100k()
    eot = tok.special_tokens["<|endoftext|>"]
    texts = []
    for _ in range(3):
        words = [rng.choice(_WORDS) for _ in range(rng.randint(2, 8))]
        words.insert(rng.randint(0, len(words)), "<|endoftext|>")
        texts.append(" ".join(words))
    def outcome(**kw):
        kinds = set()
        for t in texts:
            try:
                kinds.add("control" if eot in tok.encode(t, **kw) else "text")
            except Exception:
                kinds.add("error")
        return kinds.pop() if len(kinds) == 1 else "mixed"
    measured = {"default": outcome(), "allow_fim_prefix": outcome(allowed_special={"<|fim_prefix|>"})}
    return _prediction(answer, measured, tuple(texts), what="the book's cl100k tokenizer on three fresh user texts",
                       wrong=[({"default": "text", "allow_fim_prefix": "error"},
                               "tiktoken raises on the text of a special token that is not allowed; the book's "
                               "encode() treats it as ordinary text"),
                              ({"default": "text", "allow_fim_prefix": "control"},
                               "only the special tokens named in allowed_special become control ids"),
                              ({"default": "error", "allow_fim_prefix": "error"},
                               "the book's encode() follows tiktoken's encode_ordinary(), which never raises")],
                       hint="answer 'text', 'control' or 'error' for each call")


@_register("01c.3", "Find the rows collapsed onto unused tokens", "complete",
           "def collapsed(embedding, reference_ids, radius):\n    return NotImplemented  # ids, nearest first")
def _ex_01c_3(answer, rng, ctx):
    import operator
    from ..tokenizers.pathologies import collapsed_rows, distance_to_reference
    cases = []
    for _ in range(4):
        g = _tgen(rng)
        V, d = rng.randint(30, 80), rng.randint(4, 16)
        E = 0.3 * torch.randn(V, d, generator=g)                 # ordinary rows, some with small norms
        center = 2.0 + torch.rand(d, generator=g)                # the untrained point, far from the origin
        planted = rng.sample(range(V), rng.randint(5, 10))
        for i in planted:
            E[i] = center + 0.01 * torch.randn(d, generator=g)
        ref = planted[:rng.randint(2, 4)]
        cases.append((E, ref, 0.1))
    def to_first(E, ref, r):
        dist = (E - E[ref[0]]).norm(dim=1)
        return [int(i) for i in torch.argsort(dist) if dist[i] <= r]
    def by_id(E, ref, r):
        return sorted(collapsed_rows(E, ref, r))
    def without_refs(E, ref, r):
        return [i for i in collapsed_rows(E, ref, r) if i not in ref]
    def untie(fn):
        # Rows at the same distance may come in either order: two reference rows are always
        # equidistant from their mean, and an unstable argsort may put either first (which one
        # varies with the CPU's kernels). So each run of equal distances is compared as a set.
        def wrapped(E, ref, r):
            ids = _call(fn, E, ref, r)
            try:
                ids = [operator.index(i) for i in ids]
            except TypeError:
                return ids  # not a list of ints: compared as it is, and fails
            if not all(0 <= i < E.shape[0] for i in ids):
                return ids
            d = distance_to_reference(E, ref).tolist()
            out, k = [], 0
            while k < len(ids):
                j = k + 1
                while j < len(ids) and abs(d[ids[j]] - d[ids[k]]) <= 1e-6:
                    j += 1
                out += sorted(ids[k:j])
                k = j
            return out
        return wrapped
    if not _is_placeholder(answer) and callable(answer):
        answer = untie(answer)
    return _cases(answer, untie(collapsed_rows), cases,
                  wrong=[(untie(to_first), "measure the distance to the mean of all the reference rows, not to one of them"),
                         (untie(by_id), "return the ids nearest first (sort by distance), not by id"),
                         (untie(without_refs), "the reference rows are within the radius too: keep them")],
                  hint="distance of every row to the mean of the reference rows; keep those within radius, nearest first",
                  show=lambda a: f"an embedding {tuple(a[0].shape)}, reference_ids={a[1]}, radius={a[2]}")
