"""Checkers for the book's exercises: the reader's own answer is tested, not the book's.

A reader cell holds a placeholder, ``answer = ...`` or a function whose body is
``return NotImplemented`` / ``...`` / ``raise NotImplementedError``; the next cell runs
``check("03.2", answer)``. The checker tests the answer against the library's reference on
fresh inputs (a new random seed every call, so one hard-coded case does not pass), prints a
one-line verdict and returns a :class:`Verdict`. It reports what passed, the first mismatch
(input, expected vs got) and a hint for the usual wrong answers (an off-by-one, a forgotten
``sqrt(d_k)``, a transposed matrix); it never prints the solution of a question.

Four kinds of exercise:

- ``derive``: write a formula as a function of its parameters; it is evaluated at fresh
  parameter values and compared with the library (with a relative tolerance);
- ``complete``: complete a function; called on fresh inputs, compared with the library;
- ``predict``: write the prediction before a run; the checker measures the value itself on
  fresh inputs (the property predicted holds for any input) and compares;
- ``widget``: report a value seen in a widget with the settings used; the checker
  recomputes it from the model the widget shows (passed as keyword arguments to ``check``).

A wrong answer never raises: an exception from the reader's function becomes a one-line
message. Only an unknown exercise id raises (``ValueError``), a mistake of the book.

>>> v = check("08c.2", ...)
08c.2 not attempted yet: replace the placeholder with your answer and run the cell again.
>>> v.passed, v.attempted
(False, False)
"""

from __future__ import annotations

import itertools
import math
import os
import random
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Callable, Optional, Sequence

import torch

__all__ = ["Verdict", "Exercise", "EXERCISES", "check", "list_exercises"]

KINDS = ("derive", "complete", "predict", "widget")
CHAPTERS = ("00", "01a", "01b", "01c", "02", "02b", "03", "04", "05", "06a", "06b", "06c", "07", "07b", "08a", "08b", "08c", "08d", "09")


@dataclass(frozen=True)
class Verdict:
    """What ``check`` found: ``passed``, the printed ``message``, and the inputs it tried."""

    exercise_id: str
    passed: bool
    message: str
    attempted: bool = True
    inputs: tuple = ()  # the fresh inputs tried, for the curious (and for the tests)

    def __bool__(self) -> bool:
        return self.passed

    def __repr__(self) -> str:
        return f"Verdict({self.exercise_id!r}, passed={self.passed})"


@dataclass(frozen=True)
class Exercise:
    """One exercise: its id ("03.2"), title, kind, chapter, and the checker."""

    id: str
    title: str
    kind: str
    chapter: str
    checker: Callable[..., "_Result"] = field(repr=False)
    placeholder: str = "answer = ..."  # what the reader's cell starts with


EXERCISES: dict[str, Exercise] = {}


def list_exercises(chapter: Optional[str] = None) -> list[Exercise]:
    """The registered exercises, in book order; only one chapter's if ``chapter`` is given.

    >>> [e.id for e in list_exercises("01b")]
    ['01b.1', '01b.2', '01b.3', '01b.4']
    """
    if chapter is not None and chapter not in CHAPTERS:
        raise ValueError(f"chapter must be one of {', '.join(CHAPTERS)}, got {chapter!r}")
    return [e for e in EXERCISES.values() if chapter is None or e.chapter == chapter]


# ---------------------------------------------------------------------- machinery

class _NotAttempted(Exception):
    pass


class _ReaderRaised(Exception):
    def __init__(self, exc: BaseException):
        super().__init__(exc)
        self.exc = exc


class _Fail(Exception):
    def __init__(self, what: str, hint: str = ""):
        super().__init__(what)
        self.what, self.hint = what, hint


@dataclass
class _Result:
    message: str
    inputs: tuple = ()


_counter = itertools.count()


def _fresh_rng() -> random.Random:
    # a new seed per call: a counter mixed with OS entropy, so no two calls share inputs
    return random.Random(int.from_bytes(os.urandom(8), "little") ^ (next(_counter) << 64))


def _is_placeholder(x: Any) -> bool:
    return x is Ellipsis or x is NotImplemented


def _call(fn: Callable, *args, **kwargs) -> Any:
    """Call the reader's function; placeholders and exceptions become control flow."""
    try:
        out = fn(*args, **kwargs)
    except NotImplementedError:
        raise _NotAttempted() from None
    except (_NotAttempted, _ReaderRaised, _Fail):
        raise  # already classified (a checker wrapping the reader's function)
    except Exception as e:  # the reader's bug, reported in one line
        raise _ReaderRaised(e) from None
    if _is_placeholder(out):
        raise _NotAttempted()
    return out


def _summ(x: Any) -> str:
    """A short description of a value for a mismatch message."""
    if isinstance(x, torch.Tensor):
        flat = x.detach().flatten()[:4].tolist()
        vals = ", ".join(f"{v:.4g}" if isinstance(v, float) else str(v) for v in flat)
        return f"tensor of shape {tuple(x.shape)} starting [{vals}{', ...' if x.numel() > 4 else ''}]"
    if isinstance(x, float):
        return f"{x:.6g}"
    r = repr(x)
    return r if len(r) <= 80 else r[:77] + "..."


def _close(got: Any, exp: Any, rel: float = 1e-6, abs_: float = 1e-9) -> bool:
    """Numbers within a relative tolerance; tensors of the same shape and close values; else ==."""
    if isinstance(exp, torch.Tensor):
        if not isinstance(got, torch.Tensor):
            try:
                got = torch.as_tensor(got, dtype=exp.dtype)
            except Exception:
                return False
        if got.shape != exp.shape:
            return False
        if exp.dtype == torch.bool:
            return bool(torch.equal(got.bool(), exp))
        return bool(torch.allclose(got.to(exp.dtype), exp, rtol=max(rel, 1e-5), atol=max(abs_, 1e-6)))
    if isinstance(exp, (tuple, list)) and not isinstance(exp, str):
        if not isinstance(got, (tuple, list)) or len(got) != len(exp):
            return False
        return all(_close(g, e, rel, abs_) for g, e in zip(got, exp))
    if isinstance(exp, (int, float, Fraction)) and not isinstance(exp, bool):
        if isinstance(got, bool) or not isinstance(got, (int, float, Fraction)):
            try:
                got = float(got)  # numpy / 0-d tensors
            except Exception:
                return False
        if math.isinf(float(exp)) or math.isinf(float(got)):
            return float(got) == float(exp)
        return math.isclose(float(got), float(exp), rel_tol=rel, abs_tol=abs_)
    return got == exp


Wrong = Sequence[tuple[Callable, str]]  # (a plausible wrong answer, the hint it deserves)


def _cases(answer: Any, ref: Callable, inputs: Sequence[tuple], wrong: Wrong = (), hint: str = "",
           name: str = "your function", rel: float = 1e-6, show: Callable[[tuple], str] = None,
           fmt: Callable[[Any], str] = _summ) -> _Result:
    """Call ``answer`` on every input, compare with ``ref``; raise _Fail at the first mismatch."""
    if _is_placeholder(answer):
        raise _NotAttempted()
    if not callable(answer):
        raise _Fail(f"expected a function, got {type(answer).__name__}",
                    "define the function of the exercise's cell and pass it (no parentheses)")
    show = show or (lambda args: ", ".join(_summ(a) for a in args))
    for n, args in enumerate(inputs):
        exp = ref(*args)
        got = _call(answer, *args)
        if not _close(got, exp, rel):
            h = hint
            for wrong_fn, wrong_hint in wrong:
                try:
                    if _close(got, wrong_fn(*args), rel):
                        h = wrong_hint
                        break
                except Exception:
                    continue
            passed = f" ({n} case{'s' if n != 1 else ''} passed before)" if n else ""
            raise _Fail(f"for {show(args)}: expected {fmt(exp)}, got {fmt(got)}{passed}", h)
    return _Result(f"{name} agrees with the library on {len(inputs)} fresh inputs", tuple(inputs))


def _prediction(answer: Any, measured: Any, inputs: tuple, wrong: Sequence[tuple[Any, str]] = (),
                hint: str = "", what: str = "the measurement", rel: float = 1e-6) -> _Result:
    """Compare a stored prediction with a value measured on fresh inputs (never printed on failure)."""
    if _is_placeholder(answer):
        raise _NotAttempted()
    if _close(_norm(answer), _norm(measured), rel):
        return _Result(f"your prediction matches {what}: {_summ(measured)}", inputs)
    h = hint
    for w, wh in wrong:
        if _close(_norm(answer), _norm(w), rel):
            h = wh
            break
    raise _Fail(f"your prediction {_summ(answer)} does not match {what}", h)


def _norm(x: Any) -> Any:
    """Case-insensitive strings, dict values normalised recursively."""
    if isinstance(x, str):
        return x.strip().lower()
    if isinstance(x, dict):
        return {k: _norm(v) for k, v in x.items()}
    return x


def _report(answer: Any, keys: Sequence[str]) -> dict:
    """A widget report must be a dict with the named settings and value."""
    if _is_placeholder(answer):
        raise _NotAttempted()
    if not isinstance(answer, dict):
        raise _Fail(f"expected a dict with keys {', '.join(keys)}, got {type(answer).__name__}",
                    "report the settings you used and the value you saw, e.g. {" + ", ".join(f"'{k}': ..." for k in keys) + "}")
    missing = [k for k in keys if k not in answer]
    if missing:
        raise _Fail(f"your report lacks {', '.join(missing)}", "report every setting the value depends on")
    if any(_is_placeholder(answer[k]) for k in keys):
        raise _NotAttempted()
    return answer


def _need(context: dict, name: str) -> Any:
    if name not in context:
        raise _Fail(f"this checker needs the widget's {name}: call check(..., {name}={name})",
                    "pass the object the widget was built from")
    return context[name]


def check(exercise_id: str, answer: Any, **context: Any) -> Verdict:
    """Check the reader's ``answer`` to exercise ``exercise_id``; print and return the verdict.

    ``context`` passes what a widget exercise recomputes from (``model=``, ``attentions=``).
    Raises ``ValueError`` only for an unknown ``exercise_id``.
    """
    if exercise_id not in EXERCISES:
        raise ValueError(f"exercise_id must be one of {', '.join(EXERCISES)}, got {exercise_id!r}")
    ex = EXERCISES[exercise_id]
    rng = _fresh_rng()
    try:
        if _is_placeholder(answer) or (isinstance(answer, dict) and any(_is_placeholder(v) for v in answer.values())):
            raise _NotAttempted()  # before any measurement: an untouched cell costs nothing
        res = ex.checker(answer, rng, context)
        v = Verdict(ex.id, True, f"{ex.id} passed: {res.message}.", True, res.inputs)
    except _NotAttempted:
        v = Verdict(ex.id, False, f"{ex.id} not attempted yet: replace the placeholder with your answer "
                                  "and run the cell again.", False)
    except _ReaderRaised as e:
        line = str(e.exc).strip().splitlines()[0] if str(e.exc).strip() else ""
        shapes = any(w in line.lower() for w in ("size", "shape", "dimension", "match"))
        hint = ("the shapes do not fit: check which matrix is transposed (k.transpose(-2, -1)) and "
                "that your code works for any batch and length, not only square inputs" if shapes else
                "call your function on a small input of your own and read the error there")
        v = Verdict(ex.id, False, f"{ex.id}: your function raised {type(e.exc).__name__}: {line[:200]}. Hint: {hint}.")
    except _Fail as f:
        msg = f"{ex.id} not yet: {f.what}."
        if f.hint:
            msg += f" Hint: {f.hint}."
        v = Verdict(ex.id, False, msg)
    print(v.message)
    return v


def _register(id: str, title: str, kind: str, placeholder: str = "answer = ...") -> Callable:
    assert kind in KINDS and id.split(".")[0] in CHAPTERS and id not in EXERCISES
    def deco(fn: Callable) -> Callable:
        EXERCISES[id] = Exercise(id, title, kind, id.split(".")[0], fn, placeholder)
        return fn
    return deco


def _rand_text(rng: random.Random, alphabet: str, n: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def _tgen(rng: random.Random) -> torch.Generator:
    return torch.Generator().manual_seed(rng.randrange(2**62))


class _seeded:
    """Seed torch's global generator for building a fresh model, restoring the reader's state after."""

    def __init__(self, rng: random.Random):
        self.seed = rng.randrange(2**31)

    def __enter__(self):
        self._fork = torch.random.fork_rng(devices=[])
        self._fork.__enter__()
        torch.manual_seed(self.seed)

    def __exit__(self, *exc):
        return self._fork.__exit__(*exc)


# ====================================================================== chapter 00
ALPHA_EN = "abcdeht "


def _tiny_lm(rng: random.Random, order: int):
    from .ngram import CharNGramLM
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


# ====================================================================== chapter 01a
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
    from .tokenizers.bpe import merge_pair
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
    from .tokenizers.bpe import count_pairs
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
    from .tokenizers.bpe import count_pairs, merge_pair
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
    from .viz.bpe import bpe_trace, tokenizer_at
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


# ====================================================================== chapter 01b
@_register("01b.1", "A unigram likelihood as an exact fraction", "derive",
           "def likelihood(pieces):\n    return NotImplemented  # a Fraction")
def _ex_01b_1(answer, rng, ctx):
    from .tokenizers.unigram import piece_probabilities, segmentation_likelihood
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
    from .tokenizers.wordpiece import wordpiece_word
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
    from .tokenizers.unigram import viterbi
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


# ====================================================================== chapter 02
@_register("02.1", "Parameters of a recurrent layer", "derive",
           "def rnn_params(G, D, H):\n    return NotImplemented")
def _ex_02_1(answer, rng, ctx):
    from torch import nn
    cls = {1: nn.RNN, 3: nn.GRU, 4: nn.LSTM}
    def ref(G, D, H):
        return sum(p.numel() for p in cls[G](D, H).parameters())
    cases = [(rng.choice([1, 3, 4]), rng.randint(1, 40), rng.randint(1, 40)) for _ in range(6)]
    return _cases(answer, ref, cases,
                  wrong=[(lambda G, D, H: G * H * (D + H + 1), "PyTorch keeps two bias vectors per gate block (b_ih and b_hh)"),
                         (lambda G, D, H: G * H * (D + H), "count the biases too"),
                         (lambda G, D, H: H * (D + H + 2), "each of the G gate blocks has its own weights")],
                  show=lambda a: f"G={a[0]}, D={a[1]}, H={a[2]}")


@_register("02.2", "How far back can each model see?", "predict",
           "answer = {'ff': ..., 'rnn': ..., 'lstm': ...}  # True: the last prediction changes")
def _ex_02_2(answer, rng, ctx):
    from .rnn import CharLM, CharLMConfig
    if isinstance(answer, dict) and any(_is_placeholder(v) for v in answer.values()):
        raise _NotAttempted()
    T, back = rng.randint(24, 40), 20
    x0 = torch.randint(0, 10, (1, T), generator=_tgen(rng))
    x1 = x0.clone(); x1[0, -back] = (x1[0, -back] + 1) % 10
    measured = {}
    with torch.no_grad(), _seeded(rng):
        for kind in ("ff", "rnn", "lstm"):
            m = CharLM(CharLMConfig(10, kind=kind, d_embed=4, d_hidden=8, n_context=8)).eval()
            measured[kind] = bool((m(x1)[0, -1] - m(x0)[0, -1]).abs().max() > 0)
    return _prediction(answer, measured, (x0,), what="fresh untrained models (the property is in the equations, not the training)",
                       wrong=[({"ff": True, "rnn": True, "lstm": True}, "the feed-forward model sees only its window of 8 characters"),
                              ({"ff": False, "rnn": False, "lstm": False}, "a recurrent state carries every earlier character forward")],
                       hint="ask which models' last output is a function of character T-20")


@_register("02.3", "Why a bidirectional model cannot generate", "predict",
           "answer = {'forward_half': ..., 'backward_half': ...}  # True: position 0 changes")
def _ex_02_3(answer, rng, ctx):
    from .rnn import BidirectionalSequenceRNN
    if isinstance(answer, dict) and any(_is_placeholder(v) for v in answer.values()):
        raise _NotAttempted()
    H = rng.randint(3, 6)
    with _seeded(rng):
        bi = BidirectionalSequenceRNN(3, H, kind=rng.choice(["rnn", "gru", "lstm"]))
    seq = torch.randn(1, rng.randint(4, 8), 3, generator=_tgen(rng))
    seq2 = seq.clone(); seq2[0, -1] += 1.0
    with torch.no_grad():
        d = (bi(seq2) - bi(seq))[0, 0].abs()
    measured = {"forward_half": bool(d[:H].max() > 0), "backward_half": bool(d[H:].max() > 0)}
    return _prediction(answer, measured, (seq,), what="a fresh bidirectional RNN",
                       wrong=[({"forward_half": True, "backward_half": True}, "the forward RNN at position 0 has read only x_0"),
                              ({"forward_half": False, "backward_half": False}, "the backward RNN reaches position 0 last, after reading the whole sequence")],
                       hint="follow each direction's recurrence to position 0")


# ====================================================================== chapter 03
def _rand_attention(rng: random.Random, T: int) -> torch.Tensor:
    return torch.softmax(torch.randn(T, T, generator=_tgen(rng)) * 2, dim=-1)


@_register("03.1", "Temperature of attention", "predict",
           "answer = {'large_c': ..., 'small_c': ...}  # 'one-hot', 'uniform' or 'unchanged'")
def _ex_03_1(answer, rng, ctx):
    from .viz.attention import rescale_attention
    if isinstance(answer, dict) and any(_is_placeholder(v) for v in answer.values()):
        raise _NotAttempted()
    T = rng.randint(4, 9)
    scores = torch.randn(T, T, generator=_tgen(rng)) * 2
    # a clear winner per row (top score 1 above the next), so c = 1000 gives one-hot within 1e-3
    top = scores.argmax(-1, keepdim=True)
    scores = scores.scatter(-1, top, scores.max(-1, keepdim=True).values + 1.0)
    a = torch.softmax(scores, dim=-1)
    def kind(w):
        if torch.allclose(w, torch.nn.functional.one_hot(a.argmax(-1), T).to(w.dtype), atol=1e-3):
            return "one-hot"
        if torch.allclose(w, torch.full_like(w, 1 / T), atol=1e-3):
            return "uniform"
        return "unchanged"
    measured = {"large_c": kind(rescale_attention(a, 1000.0)), "small_c": kind(rescale_attention(a, 1e-4))}
    return _prediction(answer, measured, (a,), what="fresh attention rows rescaled by c = 1000 and c = 1e-4",
                       wrong=[({"large_c": "uniform", "small_c": "one-hot"}, "c multiplies the scores: a large c magnifies their differences"),
                              ({"large_c": "unchanged", "small_c": "unchanged"}, "softmax is not invariant to scaling its input, only to shifting it")],
                       hint="the answers are 'one-hot', 'uniform' or 'unchanged'")


@_register("03.2", "Scaled dot-product attention", "complete",
           "def attention(q, k, v):\n    return NotImplemented  # (B, T_q, d_v)")
def _ex_03_2(answer, rng, ctx):
    from .attention import scaled_dot_product_attention
    cases = []
    for _ in range(4):
        g = _tgen(rng)
        B, T, d = rng.randint(1, 3), rng.randint(3, 7), rng.randint(2, 9)
        d = T if rng.random() < 0.5 else d  # square scores matrices let a transposed key still run
        cases.append((torch.randn(B, T, d, generator=g), torch.randn(B, T, d, generator=g), torch.randn(B, T, rng.randint(2, 5), generator=g)))
    def no_scale(q, k, v):
        return torch.softmax(q @ k.transpose(-2, -1), -1) @ v
    def scale_d(q, k, v):
        return torch.softmax(q @ k.transpose(-2, -1) / q.shape[-1], -1) @ v
    def wrong_dim(q, k, v):
        return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), -2) @ v
    def untransposed(q, k, v):
        return torch.softmax(q @ k / math.sqrt(q.shape[-1]), -1) @ v
    return _cases(answer, lambda q, k, v: scaled_dot_product_attention(q, k, v), cases, rel=1e-5,
                  wrong=[(no_scale, "divide the scores by sqrt(d_k) before the softmax"),
                         (scale_d, "divide by sqrt(d_k), not by d_k"),
                         (wrong_dim, "the softmax runs over the keys, the last dimension of the scores"),
                         (untransposed, "scores are q @ k^T: transpose the last two dimensions of k")],
                  show=lambda a: f"q {tuple(a[0].shape)}, k {tuple(a[1].shape)}, v {tuple(a[2].shape)}")


@_register("03.3", "Memory of the attention weights", "derive",
           "def attn_bytes(B, H, T, bytes_per=4):\n    return NotImplemented")
def _ex_03_3(answer, rng, ctx):
    def ref(B, H, T, bytes_per):
        t = torch.empty(B, H, T, T, device="meta", dtype={2: torch.float16, 4: torch.float32, 8: torch.float64}[bytes_per])
        return t.nelement() * t.element_size()
    cases = [(rng.randint(1, 16), rng.randint(1, 16), rng.randint(2, 4096), rng.choice([2, 4, 8])) for _ in range(5)]
    return _cases(answer, ref, cases,
                  wrong=[(lambda B, H, T, b: B * T * T * b, "every head stores its own T x T matrix"),
                         (lambda B, H, T, b: B * H * T * b, "each of the T queries has a weight for each of the T keys"),
                         (lambda B, H, T, b: B * H * T * T * b * 8, "count bytes, not bits")],
                  show=lambda a: f"B={a[0]}, H={a[1]}, T={a[2]}, bytes_per={a[3]}")


@_register("03.4", "No positions, no order", "predict",
           "answer = ...  # 'equivariant', 'invariant' or 'neither'")
def _ex_03_4(answer, rng, ctx):
    from .attention import MultiHeadAttention
    T = rng.randint(4, 9)
    with _seeded(rng):
        mha = MultiHeadAttention(8, 2).eval()
    x = torch.randn(1, T, 8, generator=_tgen(rng))
    perm = torch.randperm(T, generator=_tgen(rng))
    while torch.equal(perm, torch.arange(T)):
        perm = torch.randperm(T, generator=_tgen(rng))
    with torch.no_grad():
        y, yp = mha(x), mha(x[:, perm])
    measured = ("equivariant" if torch.allclose(yp, y[:, perm], atol=1e-5) else
                "invariant" if torch.allclose(yp, y, atol=1e-5) else "neither")
    return _prediction(answer, measured, (perm,), what="a fresh MultiHeadAttention on a random permutation",
                       wrong=[("invariant", "the outputs are permuted too: each output belongs to its own token"),
                              ("neither", "nothing in attention knows a token's position")],
                       hint="answer 'equivariant', 'invariant' or 'neither'")


def _attention_widget(answer, rng, ctx):
    r = _report(answer, ["layer", "head", "query", "key", "weight"])
    att = _need(ctx, "attentions")
    def weight(layer, head, query, key):
        t = att[layer]
        if isinstance(t, torch.Tensor) and t.dim() == 4:  # (B, H, T, T): the widget shows the first sequence
            t = t[0]
        return float(t[head][query][key])
    try:
        exp = weight(r["layer"], r["head"], r["query"], r["key"])
    except (IndexError, KeyError, TypeError):
        raise _Fail("the layer, head, query or key you report is outside the widget's range",
                    "indices count from 0, as the widget's sliders do") from None
    got = float(r["weight"])
    if abs(got - exp) <= 0.01:
        return _Result(f"query {r['query']} gives key {r['key']} weight {exp:.2f} in layer {r['layer']}, head {r['head']}", (r,))
    try:
        swapped = weight(r["layer"], r["head"], r["key"], r["query"])
    except Exception:
        swapped = None
    h = ("you read the transposed cell: rows are queries, columns are keys" if swapped is not None and abs(got - swapped) <= 0.01
         else "hover over the cell of that query row and key column, with the layer and head you report")
    raise _Fail(f"the weight you report ({got:.2f}) is {'too high' if got > exp else 'too low'}", h)


for _id in ("03.5", "07.6", "08a.5"):
    _register(_id, "Report an attention weight from the attention explorer", "widget",
              "answer = {'layer': ..., 'head': ..., 'query': ..., 'key': ..., 'weight': ...}")(_attention_widget)


# ====================================================================== chapter 04
@_register("04.1", "Parameters of one encoder layer", "derive",
           "def encoder_layer_params(d, d_ff):\n    return NotImplemented")
def _ex_04_1(answer, rng, ctx):
    from .transformer import EncoderLayer
    def ref(d, d_ff):  # small sizes built on the CPU (the meta device's first init is slow)
        return sum(p.numel() for p in EncoderLayer(d, 1, d_ff).parameters())
    cases = [(rng.randint(2, 96), rng.randint(2, 384)) for _ in range(5)]
    return _cases(answer, ref, cases,
                  wrong=[(lambda d, f: 4 * d * d + 2 * d * f, "every Linear layer has a bias, and each LayerNorm a gain and a shift"),
                         (lambda d, f: 4 * (d * d + d) + (d * f + f) + (f * d + d) + 2 * d, "each LayerNorm has 2 d parameters (gain a and shift b)"),
                         (lambda d, f: 4 * (d * d + d) + (d * f + f) + (f * d + d), "count the two LayerNorms")],
                  show=lambda a: f"d={a[0]}, d_ff={a[1]}")


@_register("04.2", "LayerNorm of a negated, shifted input", "predict",
           "answer = ...  # s in LN(alpha x + c) = s * LN(x) for alpha < 0")
def _ex_04_2(answer, rng, ctx):
    from .layers import LayerNorm
    ln = LayerNorm(16, eps=0.0).double()
    x = torch.randn(5, 16, dtype=torch.float64, generator=_tgen(rng))
    alpha, c = -rng.uniform(0.1, 50), rng.uniform(-10, 10)
    with torch.no_grad():
        a, b = ln(alpha * x + c), ln(x)
    measured = float((a * b).sum() / (b * b).sum())  # the s that best maps LN(x) to LN(alpha x + c)
    measured = round(measured, 6)
    return _prediction(answer, measured, ((alpha, c),), what=f"LayerNorm on fresh data with alpha = {alpha:.3g}",
                       wrong=[(1, "the mean absorbs c and the standard deviation absorbs |alpha|, but the sign stays"),
                              (alpha, "the standard deviation is positive whatever the sign of alpha")],
                       hint="divide out the mean and the standard deviation of alpha x + c")


@_register("04.3", "LayerNorm from scratch", "complete",
           "def layer_norm(x, eps=1e-5):\n    return NotImplemented  # over the last dimension, no gain or shift")
def _ex_04_3(answer, rng, ctx):
    from .layers import LayerNorm
    def ref(x, eps):
        with torch.no_grad():
            return LayerNorm(x.shape[-1], eps=eps).double()(x)
    cases = [(torch.randn(rng.randint(1, 4), rng.randint(2, 6), rng.randint(2, 12), dtype=torch.float64, generator=_tgen(rng)) * 3 + 1,
              rng.choice([1e-5, 0.1, 1.0])) for _ in range(4)]
    def unbiased(x, eps):
        return (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, keepdim=True, unbiased=True) + eps)
    def over_batch(x, eps):
        return (x - x.mean(0, keepdim=True)) / torch.sqrt(x.var(0, keepdim=True, unbiased=False) + eps)
    def eps_outside(x, eps):
        return (x - x.mean(-1, keepdim=True)) / (x.std(-1, keepdim=True, unbiased=False) + eps)
    return _cases(answer, ref, cases, rel=1e-6,
                  wrong=[(unbiased, "LayerNorm uses the biased variance (divide by D, not D - 1)"),
                         (over_batch, "normalise each token over its features (the last dimension), not over the batch"),
                         (eps_outside, "eps goes inside the square root: sqrt(var + eps)")],
                  show=lambda a: f"x of shape {tuple(a[0].shape)}, eps={a[1]}")


@_register("04.4", "The decoder must not see the future", "predict",
           "answer = ...  # the positions (0..6) whose logits change when input token 4 changes")
def _ex_04_4(answer, rng, ctx):
    from .gpt import GPT, GPTConfig
    with _seeded(rng):
        m = GPT(GPTConfig(vocab_size=11, block_size=8, n_layer=1, n_head=2, d_model=8, d_ff=16)).eval()
    a = torch.randint(0, 11, (1, 7), generator=_tgen(rng))
    b = a.clone(); b[0, 4] = (b[0, 4] + 1) % 11
    with torch.no_grad():
        d = (m(a)[0] - m(b)[0]).abs().amax(-1)[0]
    measured = [i for i in range(7) if float(d[i]) > 1e-6]
    if not _is_placeholder(answer) and not isinstance(answer, (list, tuple, range)):
        raise _Fail(f"expected a list of positions, got {type(answer).__name__}", "write e.g. [2, 3]")
    return _prediction(list(answer) if isinstance(answer, (tuple, range)) else answer, measured, (a,),
                       what="a fresh causal decoder",
                       wrong=[([4], "position 5 and 6 attend to position 4 too"),
                              ([5, 6], "position 4 sees its own input token"),
                              (list(range(7)), "a causal mask hides later positions from earlier ones")],
                       hint="position i attends to positions 0..i")


@_register("04.5", "Report BatchNorm's change from the normalisation explorer", "widget",
           "answer = {'batch_size': ..., 'padded_length': ..., 'seed': ..., 'bn_change': ...}")
def _ex_04_5(answer, rng, ctx):
    from .viz.norm import norm_stats
    r = _report(answer, ["batch_size", "padded_length", "seed", "bn_change"])
    s = norm_stats(int(r["batch_size"]), int(r["padded_length"]), int(r["seed"]))
    got = float(r["bn_change"])
    if abs(got - s["bn_change"]) <= 0.0015:
        return _Result(f"BatchNorm moves x0 by up to {s['bn_change']:.3f} in that batch, LayerNorm by {s['ln_change']:.1g}", (r,))
    h = ("that is LayerNorm's change; BatchNorm's is in the middle panel" if abs(got - s["ln_change"]) <= 0.0015
         else "read the 'max change' in the BatchNorm panel's title for the settings you report")
    raise _Fail(f"{got:.3f} is {'too high' if got > s['bn_change'] else 'too low'}", h)


# ====================================================================== chapter 05
@_register("05.1", "The length of a sinusoidal encoding", "derive",
           "def pe_norm2(d):\n    return NotImplemented  # ||PE(pos)||^2 for an even d")
def _ex_05_1(answer, rng, ctx):
    from .positional import sinusoidal_encoding
    cases = [(2 * rng.randint(1, 256), rng.randint(0, 5000)) for _ in range(5)]
    return _cases(lambda d, pos: _call(answer, d) if not _is_placeholder(answer) else NotImplemented,
                  lambda d, pos: round(float((sinusoidal_encoding(pos + 1, d).double()[pos] ** 2).sum()), 3), cases,
                  rel=1e-4, wrong=[(lambda d, p: d, "only half the entries are sines; sin^2 + cos^2 = 1 per pair"),
                                   (lambda d, p: 1, "each of the d/2 (sin, cos) pairs contributes 1"),
                                   (lambda d, p: math.sqrt(d / 2), "the exercise asks for the squared norm")],
                  show=lambda a: f"d={a[0]} (checked at position {a[1]})") if callable(answer) or _is_placeholder(answer) \
        else _cases(answer, None, ())


@_register("05.2", "Sinusoidal encodings from scratch", "complete",
           "def sinusoidal(n_positions, d_model, base=10000.0):\n    return NotImplemented  # (n_positions, d_model)")
def _ex_05_2(answer, rng, ctx):
    from .positional import sinusoidal_encoding
    cases = [(rng.randint(1, 60), 2 * rng.randint(1, 16), rng.choice([100.0, 10000.0])) for _ in range(4)]
    def halves(n, d, base):
        pe = sinusoidal_encoding(n, d, base)
        return torch.cat([pe[:, 0::2], pe[:, 1::2]], dim=1)
    def no_two(n, d, base):
        pos = torch.arange(n, dtype=torch.float64)[:, None]
        ang = pos * base ** (-torch.arange(0, d // 2, dtype=torch.float64) / d)
        pe = torch.empty(n, d, dtype=torch.float64); pe[:, 0::2] = torch.sin(ang); pe[:, 1::2] = torch.cos(ang)
        return pe.float()
    return _cases(answer, sinusoidal_encoding, cases, rel=1e-5,
                  wrong=[(halves, "interleave: even dimensions hold sines, odd dimensions cosines"),
                         (no_two, "the exponent is 2i / d for the pair i, not i / d")],
                  hint="PE[pos, 2i] = sin(pos / base^(2i/d)), PE[pos, 2i+1] = cos(pos / base^(2i/d))",
                  show=lambda a: f"n_positions={a[0]}, d_model={a[1]}, base={a[2]:g}")


@_register("05.3", "How many RoPE planes complete a turn?", "derive",
           "def planes_that_turn(head_dim, base, T):\n    return NotImplemented")
def _ex_05_3(answer, rng, ctx):
    from .positional import rope_inv_freq
    def ref(hd, base, T):
        return int((T * rope_inv_freq(hd, base).double() >= 2 * math.pi).sum())
    cases = [(64, 10000.0, 2048), (64, 100000.0, 2048)]
    cases += [(2 * rng.randint(2, 64), rng.choice([500.0, 10000.0, 1e5, 1e6]), rng.randint(10, 20000)) for _ in range(4)]
    rng.shuffle(cases)
    return _cases(answer, ref, cases,
                  wrong=[(lambda hd, b, T: int((T * rope_inv_freq(hd, b).double() >= 1).sum()), "a full turn is 2 pi radians, not 1"),
                         (lambda hd, b, T: int((T * b ** (-torch.arange(hd // 2, dtype=torch.float64) / hd) >= 2 * math.pi).sum()),
                          "plane i turns by base^(-2i/head_dim) per position")],
                  show=lambda a: f"head_dim={a[0]}, base={a[1]:g}, T={a[2]}")


@_register("05.4", "Does RoPE see only the offset?", "predict",
           "answer = ...  # True if q_m . k_n depends on m and n only through m - n")
def _ex_05_4(answer, rng, ctx):
    from .positional import apply_rope, rope_cache
    hd, shift = 2 * rng.randint(2, 16), rng.randint(1, 50)
    g = _tgen(rng)
    q, k = torch.randn(hd, dtype=torch.float64, generator=g), torch.randn(hd, dtype=torch.float64, generator=g)
    m, n = rng.randint(0, 40), rng.randint(0, 40)
    cos, sin = rope_cache(100, hd, dtype=torch.float64)
    def score(i, j):
        rq = apply_rope(q.expand(1, 1, 100, hd), cos, sin)[0, 0]  # (T, hd): q placed at every position
        rk = apply_rope(k.expand(1, 1, 100, hd), cos, sin)[0, 0]
        return float(rq[i] @ rk[j])
    # the angles are float32 (as in Hugging Face), so "equal" means to about 1e-5
    measured = math.isclose(score(m, n), score(m + shift, n + shift), rel_tol=1e-5, abs_tol=1e-5)
    return _prediction(answer, measured, ((m, n, shift),), what=f"fresh q, k at positions ({m}, {n}) and both shifted by {shift}",
                       wrong=[(False, "rotating both vectors by the same extra angle leaves their dot product unchanged")],
                       hint="answer True or False")


@_register("05.5", "Report a value from the positional-encoding explorer", "widget",
           "answer = {'d_model': ..., 'base': ..., 'position': ..., 'dim': ..., 'value': ...}")
def _ex_05_5(answer, rng, ctx):
    from .positional import sinusoidal_encoding
    r = _report(answer, ["d_model", "base", "position", "dim", "value"])
    d, pos, dim = int(r["d_model"]), int(r["position"]), int(r["dim"])
    if not 0 <= dim < d or pos < 0:
        raise _Fail(f"dimension {dim} or position {pos} is outside the table", "dimensions count from 0 to d_model - 1")
    pe = sinusoidal_encoding(pos + 2, d, float(r["base"]))
    exp, got = float(pe[pos, dim]), float(r["value"])
    if abs(got - exp) <= 0.02:
        return _Result(f"PE[{pos}, {dim}] = {exp:.3f} for d_model={d}, base={float(r['base']):g}", (r,))
    h = ("that is the neighbouring dimension (the sine and cosine of one pair): dimensions count from 0"
         if abs(got - float(pe[pos, dim ^ 1])) <= 0.02 else
         "that is the next position: positions count from 0" if abs(got - float(pe[pos + 1, dim])) <= 0.02 else
         "read the wave of that dimension at that position, with the d_model and base you report")
    raise _Fail(f"{got:.3f} is {'too high' if got > exp else 'too low'}", h)


# ====================================================================== chapter 06b
def _gpt_cfg(V, n_ctx, L, d):
    from .gpt import GPTConfig
    return GPTConfig(vocab_size=V, block_size=n_ctx, n_layer=L, n_head=1, d_model=d, d_ff=4 * d)


@_register("06b.1", "GPT parameters from the formula", "derive",
           "def gpt_params(V, n_ctx, L, d):\n    return NotImplemented")
def _ex_06_1(answer, rng, ctx):
    from .flops import param_count
    cases = [(rng.randint(50, 60000), rng.choice([64, 256, 1024, 2048]), rng.randint(1, 48), 64 * rng.randint(1, 40)) for _ in range(5)]
    return _cases(answer, lambda V, n, L, d: param_count(_gpt_cfg(V, n, L, d)), cases,
                  wrong=[(lambda V, n, L, d: V * d + n * d + L * (12 * d * d + 13 * d), "GPT-2 adds a final LayerNorm (2 d parameters)"),
                         (lambda V, n, L, d: V * d + L * (12 * d * d + 13 * d) + 2 * d, "count the learned position embeddings (n_ctx x d)"),
                         (lambda V, n, L, d: 2 * V * d + n * d + L * (12 * d * d + 13 * d) + 2 * d, "the output layer shares the token embedding matrix"),
                         (lambda V, n, L, d: V * d + n * d + L * 12 * d * d + 2 * d, "biases and LayerNorms add 13 d per layer")],
                  show=lambda a: f"V={a[0]}, n_ctx={a[1]}, L={a[2]}, d={a[3]}")


@_register("06b.2", "Tokens for a compute budget", "derive",
           "def tokens_for_budget(C, N):\n    return NotImplemented")
def _ex_06_2(answer, rng, ctx):
    from .scaling import training_compute
    cases = [(10 ** rng.uniform(18, 25), 10 ** rng.uniform(6, 12)) for _ in range(5)]
    return _cases(answer, lambda C, N: C / training_compute(N, 1.0), cases,
                  wrong=[(lambda C, N: C / (2 * N), "2N FLOPs per token is the forward pass only; training adds a backward pass of 4N"),
                         (lambda C, N: C / N, "training costs about 6 N FLOPs per token"),
                         (lambda C, N: 6 * N * C, "solve C = 6 N D for D")],
                  show=lambda a: f"C={a[0]:.3g}, N={a[1]:.3g}")


@_register("06b.3", "Which tokens does top-p keep?", "complete",
           "def top_p_keep(probs, p):\n    return NotImplemented  # a bool tensor like probs")
def _ex_06_3(answer, rng, ctx):
    from .sampling import kept_mask
    cases = []
    for _ in range(6):
        x = torch.rand(rng.randint(3, 10), generator=_tgen(rng)) ** 3 + 1e-3
        cases.append((x / x.sum(), round(rng.uniform(0.2, 0.95), 2)))
    cases.insert(0, (torch.tensor([0.05, 0.5, 0.1, 0.2, 0.15]), 0.8))
    def strict(probs, p):
        s, i = probs.sort(descending=True)
        keep = torch.zeros_like(probs, dtype=torch.bool)
        keep[i[s.cumsum(0) <= p]] = True
        keep[i[0]] = True
        return keep
    def sorted_order(probs, p):
        s, _ = probs.sort(descending=True)
        return (s.cumsum(0) - s) < p
    return _cases(answer, lambda probs, p: kept_mask(probs.log(), top_p=p), cases,
                  wrong=[(strict, "keep the token that makes the cumulative probability reach p, too"),
                         (sorted_order, "return the mask in the original order of the tokens, not sorted")],
                  hint="sort by probability, keep the smallest prefix whose total reaches p",
                  show=lambda a: f"probs {[round(v, 3) for v in a[0].tolist()]}, p={a[1]}")


@_register("06b.4", "The smallest frequency the arithmetic coder uses", "predict",
           "answer = ...  # the smallest integer frequency quantize_probs gives any character")
def _ex_06_4(answer, rng, ctx):
    from .compression import quantize_probs
    p = [rng.random() for _ in range(rng.randint(3, 40))]
    for i in rng.sample(range(len(p)), 2):
        p[i] = 0.0  # characters the model calls impossible
    measured = int(quantize_probs(p).min())
    return _prediction(answer, measured, (p,), what="quantize_probs on a fresh distribution with zeros",
                       wrong=[(0, "a character of frequency 0 could never be encoded, so unlikely text would not round-trip")],
                       hint="the coder needs an interval of positive width for every character")


@_register("06b.5", "Report the number of kept tokens from the sampling explorer", "widget",
           "answer = {'prompt': ..., 'temperature': ..., 'top_k': ..., 'top_p': ..., 'n_kept': ...}")
def _ex_06_5(answer, rng, ctx):
    from .sampling import kept_mask
    r = _report(answer, ["prompt", "temperature", "top_k", "top_p", "n_kept"])
    model, vocab = _need(ctx, "model"), _need(ctx, "vocab")
    k = None if r["top_k"] in (0, None) else int(r["top_k"])
    p = None if r["top_p"] is None or float(r["top_p"]) >= 1.0 else float(r["top_p"])
    ids = torch.tensor([vocab.encode(r["prompt"])], device=next(model.parameters()).device)
    with torch.no_grad():
        logits = model(ids)[0][0, -1].float().cpu()
    exp = int(kept_mask(logits, float(r["temperature"]), k, p).sum())
    if int(r["n_kept"]) == exp:
        return _Result(f"{exp} tokens stay in the running with these settings", (r,))
    h = ("that is the count without the top-p filter" if p is not None and int(r["n_kept"]) == int(kept_mask(logits, float(r["temperature"]), k, None).sum())
         else "count the coloured (kept) bars for exactly the settings you report")
    raise _Fail(f"{r['n_kept']} is {'too many' if int(r['n_kept']) > exp else 'too few'}", h)


# ====================================================================== chapter 07
@_register("07.1", "How many tokens does BERT replace by a random one?", "derive",
           "def random_fraction(mlm_probability, random_share):\n    return NotImplemented")
def _ex_07_1(answer, rng, ctx):
    # the exact expectation; tests/test_exercises.py checks it against mask_tokens' measured rate
    cases = [(round(rng.uniform(0.05, 0.4), 3), round(rng.uniform(0.05, 0.5), 3)) for _ in range(4)]
    return _cases(answer, lambda p, r: p * r, cases,
                  wrong=[(lambda p, r: r, "only the chosen mlm_probability of the tokens can be replaced at all"),
                         (lambda p, r: p * 0.8, "80 % of the chosen tokens become [MASK]; the random share is the other number"),
                         (lambda p, r: p, "that is every chosen token, [MASK] and unchanged ones included")],
                  show=lambda a: f"mlm_probability={a[0]}, random_share={a[1]}")


@_register("07.2", "Parameters of a BERT", "derive",
           "def bert_params(V, D, L, F, P):\n    return NotImplemented  # with 2 segments and the pooler")
def _ex_07_2(answer, rng, ctx):
    from .bert import Bert, BertConfig
    def ref(V, D, L, F, P):
        return Bert(BertConfig(vocab_size=V, hidden_size=D, n_layers=L, n_heads=1, intermediate_size=F, max_position=P)).num_parameters()
    cases = [(rng.randint(100, 3000), 8 * rng.randint(1, 8), rng.randint(1, 3), 16 * rng.randint(1, 16), rng.choice([64, 128])) for _ in range(4)]
    def layer(D, F):
        return 4 * (D * D + D) + (D * F + F) + (F * D + D) + 4 * D
    return _cases(answer, ref, cases,
                  wrong=[(lambda V, D, L, F, P: (V + P + 2) * D + 2 * D + L * layer(D, F), "count the pooler (a D x D layer with a bias on [CLS])"),
                         (lambda V, D, L, F, P: (V + P) * D + 2 * D + L * layer(D, F) + D * D + D, "count the two segment embeddings (2 x D)"),
                         (lambda V, D, L, F, P: (V + P + 2) * D + L * layer(D, F) + D * D + D, "the embeddings have their own LayerNorm (2 D)")],
                  show=lambda a: f"V={a[0]}, D={a[1]}, L={a[2]}, F={a[3]}, P={a[4]}")


def _zh_sentence(rng: random.Random) -> str:
    return "".join(rng.choice(["北京", "的", "秋天", "是", "最美", "季节", "我", "爱", "天气", "很好", "，"]) for _ in range(rng.randint(3, 9)))


@_register("07.3", "What can a masked Chinese character see? (遮盖的字能看到什么)", "complete",
           "def n_visible(sentence, masked, model):\n    return NotImplemented  # model is 'gpt' or 'bert'")
def _ex_07_3(answer, rng, ctx):
    from .gpt import causal_mask
    def ref(sentence, masked, model):
        T = len(sentence)  # one token per Chinese character
        mask = causal_mask(T, T) if model == "gpt" else torch.ones(T, T, dtype=torch.bool)
        return int(mask[masked].sum())
    cases = []
    for _ in range(6):
        s = _zh_sentence(rng)
        cases.append((s, rng.randrange(len(s)), rng.choice(["gpt", "bert"])))
    cases[0] = (cases[0][0], cases[0][1], "gpt")
    return _cases(answer, ref, cases,
                  wrong=[(lambda s, m, k: m if k == "gpt" else len(s), "a position also sees itself: count positions 0..masked"),
                         (lambda s, m, k: m + 1 if k == "gpt" else len(s) - 1, "BERT's masked position attends to every position, its own included"),
                         (lambda s, m, k: len(s.encode("utf-8")) if k == "bert" else m + 1, "one token per character, not per UTF-8 byte")],
                  show=lambda a: f"sentence {a[0]!r}, masked position {a[1]}, model {a[2]!r}")


def _tiny_bert(rng: random.Random, P: int = 512):
    from .bert import Bert, BertConfig
    with _seeded(rng):
        return Bert(BertConfig(vocab_size=50, hidden_size=8, n_layers=1, n_heads=2, intermediate_size=16, max_position=P,
                               dropout=0.0, attention_dropout=0.0)).eval()


@_register("07.4", "Inputs longer than the position table", "predict",
           "answer = ...  # the output length for 600 tokens with truncate=True (512 positions)")
def _ex_07_4(answer, rng, ctx):
    bert = _tiny_bert(rng)
    ids = torch.randint(1, 50, (1, 600), generator=_tgen(rng))
    with torch.no_grad():
        measured = int(bert(ids, truncate=True).last_hidden_state.shape[1])
    return _prediction(answer, measured, (ids,), what="a fresh BERT with MiniLM's position table",
                       wrong=[(600, "there is no position vector beyond the table: later tokens are cut off"),
                              (510, "truncation keeps the first 512 tokens, whatever they are")],
                       hint="how many rows does the position table have?")


@_register("07.5", "A segment id of 2", "predict",
           "answer = ...  # the name of the exception the book's Bert raises")
def _ex_07_5(answer, rng, ctx):
    bert = _tiny_bert(rng, 64)
    T = rng.randint(3, 20)
    ids = torch.randint(1, 50, (1, T), generator=_tgen(rng))
    try:
        bert(ids, torch.full((1, T), 2))
        measured = "no error"
    except Exception as e:
        measured = type(e).__name__
    if isinstance(answer, str):
        answer = answer.strip()
    return _prediction(answer, measured.lower(), (ids,), what="a fresh BERT given segment ids of 2",
                       wrong=[("indexerror", "the book's models validate their inputs and name the bad argument, before the embedding lookup fails"),
                              ("no error", "there are only two segment embeddings, for 0 and 1")],
                       hint="answer with an exception name such as 'TypeError', or 'no error'")


# ====================================================================== chapter 08a
def _llama_cfg(V, D, L, H, G, F):
    from .llama import LlamaConfig
    return LlamaConfig(vocab_size=V, d_model=D, n_layer=L, n_head=H, n_kv_head=G, d_ff=F)


@_register("08a.1", "LLaMA parameters by hand", "derive",
           "def llama_params(V, D, L, H, G, F):\n    return NotImplemented  # tied output layer, head_dim = D / H")
def _ex_08a_1(answer, rng, ctx):
    from .llama import Llama
    def ref(V, D, L, H, G, F):
        return Llama(_llama_cfg(V, D, L, H, G, F)).num_parameters()
    cases = []
    for _ in range(4):
        G = rng.randint(1, 3); H = G * rng.randint(1, 3); hd = 2 * rng.randint(1, 6)
        cases.append((rng.randint(100, 3000), H * hd, rng.randint(1, 3), H, G, 8 * rng.randint(1, 16)))
    def per_layer(D, H, G, F, kv=None):
        kv = D // H * G if kv is None else kv
        return 2 * D + 2 * D * D + 2 * D * kv + 3 * D * F
    return _cases(answer, ref, cases,
                  wrong=[(lambda V, D, L, H, G, F: 2 * V * D + L * per_layer(D, H, G, F) + D, "the output layer is tied to the embedding: count it once"),
                         (lambda V, D, L, H, G, F: V * D + L * per_layer(D, H, G, F, D) + D, "W_K and W_V map D to G head_dim (grouped-query attention), not to D"),
                         (lambda V, D, L, H, G, F: V * D + L * (2 * D * D + 2 * D * (D // H * G) + 3 * D * F), "each layer has two RMSNorm gains, and the model a final one"),
                         (lambda V, D, L, H, G, F: V * D + L * (2 * D + 2 * D * D + 2 * D * (D // H * G) + 2 * D * F) + D, "SwiGLU has three matrices (gate, up, down)")],
                  show=lambda a: f"V={a[0]}, D={a[1]}, L={a[2]}, H={a[3]}, G={a[4]}, F={a[5]}")


@_register("08a.2", "KV-cache bytes per token", "derive",
           "def kv_bytes_per_token(L, G, head_dim):\n    return NotImplemented  # float32")
def _ex_08a_2(answer, rng, ctx):
    from .llama import KVCache
    def ref(L, G, hd):
        cfg = _llama_cfg(100, 2 * G * hd, L, 2 * G, G, 8)
        n = 7
        return KVCache(cfg, 1, n, device="meta").nbytes() // n
    cases = [(rng.randint(1, 40), rng.randint(1, 8), 8 * rng.randint(1, 16)) for _ in range(5)]
    return _cases(answer, ref, cases,
                  wrong=[(lambda L, G, hd: L * G * hd * 4, "the cache holds keys and values: a factor 2"),
                         (lambda L, G, hd: 2 * L * G * hd, "a float32 number takes 4 bytes"),
                         (lambda L, G, hd: 2 * G * hd * 4, "every layer keeps its own cache")],
                  show=lambda a: f"L={a[0]}, G={a[1]}, head_dim={a[2]}")


@_register("08a.3", "RMSNorm from scratch", "complete",
           "def rms_norm(x, weight, eps=1e-5):\n    return NotImplemented")
def _ex_08a_3(answer, rng, ctx):
    from .llama import RMSNorm
    def ref(x, w, eps):
        n = RMSNorm(x.shape[-1], eps)
        with torch.no_grad():
            n.weight.copy_(w)
            return n(x)
    cases = []
    for _ in range(4):
        g = _tgen(rng); D = rng.randint(2, 16)
        cases.append((torch.randn(rng.randint(1, 3), rng.randint(1, 5), D, generator=g) * 2 + 0.5,
                      torch.rand(D, generator=g) + 0.5, rng.choice([1e-5, 1e-2, 0.5])))
    def centred(x, w, eps):
        xc = x - x.mean(-1, keepdim=True)
        return w * xc / torch.sqrt(xc.pow(2).mean(-1, keepdim=True) + eps)
    def no_sqrt(x, w, eps):
        return w * x / (x.pow(2).mean(-1, keepdim=True) + eps)
    def no_weight(x, w, eps):
        return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return _cases(answer, ref, cases, rel=1e-5,
                  wrong=[(centred, "RMSNorm does not subtract the mean: that is LayerNorm"),
                         (no_sqrt, "divide by the root of the mean square: sqrt(mean(x^2) + eps)"),
                         (no_weight, "multiply by the learned gain (weight) at the end")],
                  show=lambda a: f"x of shape {tuple(a[0].shape)}, eps={a[2]}")


@_register("08a.4", "How much smaller is SmolLM2's cache with GQA?", "predict",
           "answer = ...  # cache bytes with G = H, divided by cache bytes with SmolLM2's G")
def _ex_08a_4(answer, rng, ctx):
    import dataclasses
    from .llama import KVCache, LlamaConfig
    c = LlamaConfig()  # SmolLM2-135M's configuration
    n = rng.randint(1, 4096)
    measured = KVCache(dataclasses.replace(c, n_kv_head=c.n_head), 1, n, device="meta").nbytes() / KVCache(c, 1, n, device="meta").nbytes()
    return _prediction(answer, measured, (n,), what=f"KVCache.nbytes() for a fresh length of {n} tokens",
                       wrong=[(1 / measured, "multi-head attention caches more, so the ratio is above 1"),
                              (c.n_head, "the ratio is H / G: count the key/value heads of each model")],
                       hint="the cache stores G key heads and G value heads per layer")


# ====================================================================== chapter 08b
def _routing(rng: random.Random):
    n, T = rng.randint(2, 8), rng.randint(5, 40)
    g = _tgen(rng)
    probs = torch.softmax(torch.randn(T, n, generator=g), -1)
    idx = torch.randint(0, n, (T, 1), generator=g)
    f = [float((idx == i).float().mean()) for i in range(n)]
    P = probs.mean(0).tolist()
    return f, P, probs, idx, n


@_register("08b.1", "The load-balancing loss", "derive",
           "def aux_loss(f, P):\n    return NotImplemented  # f, P: lists, one entry per expert")
def _ex_08b_1(answer, rng, ctx):
    from .moe import load_balancing_loss
    cases, refs = [], {}
    for _ in range(5):
        f, P, probs, idx, n = _routing(rng)
        cases.append((f, P)); refs[id(f)] = float(load_balancing_loss(probs, idx, n))
    return _cases(answer, lambda f, P: refs[id(f)], cases, rel=1e-5,
                  wrong=[(lambda f, P: sum(a * b for a, b in zip(f, P)), "multiply by the number of experts n, so that balanced routing gives 1"),
                         (lambda f, P: sum(a * b for a, b in zip(f, P)) / len(f), "it is n times the sum, not the mean"),
                         (lambda f, P: len(f) * sum(a * a for a in f), "use the router's mean probabilities P as the second factor")],
                  show=lambda a: f"f={[round(x, 3) for x in a[0]]}, P={[round(x, 3) for x in a[1]]}")


@_register("08b.2", "Parameters of a mixture of experts", "derive",
           "def moe_counts(dense_total, L, d, d_ff, n_experts, k):\n    return NotImplemented  # (stored, used per token)")
def _ex_08b_2(answer, rng, ctx):
    from .gpt import GPT
    from .moe import MoEGPT, count_parameters
    def ref(dense, L, d, f, n, k):
        cfg = _gpt_cfg(97, 32, L, d).__class__(vocab_size=97, block_size=32, n_layer=L, n_head=1, d_model=d, d_ff=f)
        c = count_parameters(MoEGPT(cfg, n_experts=n, k=k))
        return (c["total"], c["active"])
    cases = []
    for _ in range(3):
        L, d, f = rng.randint(1, 3), 8 * rng.randint(1, 4), 16 * rng.randint(1, 4)
        n = rng.randint(2, 8); k = rng.randint(1, n)
        if True:
            dense = GPT(_gpt_cfg(97, 32, L, d).__class__(vocab_size=97, block_size=32, n_layer=L, n_head=1, d_model=d, d_ff=f)).num_parameters()
        cases.append((dense, L, d, f, n, k))
    def expert(d, f):
        return 2 * d * f + f + d
    return _cases(answer, ref, cases,
                  wrong=[(lambda D, L, d, f, n, k: (D + L * ((n - 1) * expert(d, f)), D + L * (k - 1) * expert(d, f)), "each layer also has a router of n x d weights"),
                         (lambda D, L, d, f, n, k: (D + L * ((n - 1) * expert(d, f) + n * d), D + L * (k * expert(d, f) + n * d)),
                          "the dense total already holds one expert: a token uses k - 1 more"),
                         (lambda D, L, d, f, n, k: (D + L * (n * expert(d, f) + n * d), D + L * (k * expert(d, f) + n * d)),
                          "the dense model's feed-forward layer becomes one of the n experts")],
                  hint="one expert holds 2 d d_ff + d_ff + d parameters",
                  show=lambda a: f"dense_total={a[0]}, L={a[1]}, d={a[2]}, d_ff={a[3]}, n_experts={a[4]}, k={a[5]}")


@_register("08b.3", "Does the router learn with k = 1?", "predict",
           "answer = {'normalized': ..., 'raw': ...}  # 'zero' or 'nonzero' router gradient")
def _ex_08b_3(answer, rng, ctx):
    from .gpt import GPTConfig
    from .moe import MoEGPT
    if isinstance(answer, dict) and any(_is_placeholder(v) for v in answer.values()):
        raise _NotAttempted()
    tiny = GPTConfig(vocab_size=13, block_size=8, n_layer=1, n_head=2, d_model=16, d_ff=32)
    x = torch.randint(0, 13, (2, 8), generator=_tgen(rng))
    y = torch.randint(0, 13, (2, 8), generator=_tgen(rng))
    grads, seed = {}, rng.randrange(2**31)
    for normalize in (True, False):
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            m = MoEGPT(tiny, n_experts=4, k=1, aux_loss_weight=0.0, normalize_gates=normalize)
        m(x, y)[1].backward()
        grads[normalize] = float(m.blocks[0].mlp.router.proj.weight.grad.abs().sum())
    # zero up to float32 rounding: autograd's 1/p - p/p^2 leaves about 1e-7 of the real gradient
    zero = grads[True] < 10 * torch.finfo(torch.float32).eps * grads[False]
    measured = {"normalized": "zero" if zero else "nonzero", "raw": "nonzero" if grads[False] > 0 else "zero"}
    return _prediction(answer, measured, (x,), what="a fresh one-layer MoE GPT",
                       wrong=[({"normalized": "nonzero", "raw": "nonzero"}, "with k = 1 the renormalised gate is p / p = 1 whatever the router says"),
                              ({"normalized": "zero", "raw": "zero"}, "Switch's gate is the raw probability p, which scales the expert's output")],
                       hint="answer 'zero' or 'nonzero' for each gate")


@_register("08b.4", "The kNN-LM alone", "predict",
           "answer = ...  # the loss at lambda = 1 when some true token has no neighbour: a number or 'inf'")
def _ex_08b_4(answer, rng, ctx):
    from .retrieval import mixture_loss
    n = rng.randint(5, 50)
    g = _tgen(rng)
    lm = -torch.rand(n, generator=g, dtype=torch.float64) * 3
    knn = -torch.rand(n, generator=g, dtype=torch.float64) * 3
    knn[rng.randrange(n)] = -math.inf  # no neighbour stored the true next token here
    measured = mixture_loss(lm, knn, 1.0)
    if isinstance(answer, str) and answer.strip().lower() in ("inf", "infinity", "+inf"):
        answer = math.inf
    return _prediction(answer, measured, (n,), what=f"mixture_loss on {n} fresh positions",
                       wrong=[(0, "a probability of exactly 0 has log-loss -log 0"),
                              (float(-lm.mean()), "at lambda = 1 the language model gets no weight at all")],
                       hint="what is -log p for p = 0?")


# ====================================================================== chapter 08c
@_register("08c.1", "The fraction of pairs a banded layer computes", "derive",
           "def banded_fraction(T, w):\n    return NotImplemented")
def _ex_08c_1(answer, rng, ctx):
    from .sparse_attention import attended_pairs
    cases = [(T, rng.randint(1, T)) for T in (rng.randint(2, 8192) for _ in range(5))]
    return _cases(answer, lambda T, w: attended_pairs(T, w) / attended_pairs(T), cases, rel=1e-9,
                  wrong=[(lambda T, w: w / T, "a dense causal layer computes T (T + 1) / 2 pairs, not T^2"),
                         (lambda T, w: T * w / (T * (T + 1) / 2), "the first w queries see fewer than w keys: 1, 2, ..., w"),
                         (lambda T, w: (w * (w - 1) // 2 + (T - w) * w) / (T * (T + 1) // 2), "query i sees i + 1 keys, itself included")],
                  show=lambda a: f"T={a[0]}, w={a[1]}")


@_register("08c.2", "Banded layers needed to reach the first token", "derive",
           "def layers_needed(T, w):\n    return NotImplemented")
def _ex_08c_2(answer, rng, ctx):
    from .sparse_attention import reach_length
    def ref(T, w):
        L = max(1, math.ceil((T - 1) / (w - 1)))
        # the smallest L: the library's reach (a T x T product per layer) confirms L and L - 1
        assert reach_length([w] * L, T) == T and (L == 1 or reach_length([w] * (L - 1), T) < T)
        return L
    cases = [(rng.randint(2, 100), rng.randint(4, 40)) for _ in range(4)] + [(101, 10)]  # 100 / 9 is not whole
    rng.shuffle(cases)
    return _cases(answer, ref, cases,
                  wrong=[(lambda T, w: math.ceil(T / w), "each banded layer widens the reach by w - 1 positions, not w"),
                         (lambda T, w: (T - 1) // (w - 1), "round up: a partial step still needs a whole layer"),
                         (lambda T, w: math.ceil(T / (w - 1)), "the token itself is already reached: solve L (w - 1) + 1 >= T")],
                  show=lambda a: f"T={a[0]}, w={a[1]}")


@_register("08c.3", "Parameters needed for a target loss", "derive",
           "def params_for_loss(L, a, alpha):\n    return NotImplemented")
def _ex_08c_3(answer, rng, ctx):
    from .scaling import power_law
    def ref(L, a, alpha):
        N = (a / L) ** (1 / alpha)
        assert math.isclose(float(power_law(N, a, alpha)), L, rel_tol=1e-9)  # the inverse of the library's law
        return N
    cases = [(rng.uniform(1.0, 3.0), rng.uniform(5, 50), rng.uniform(0.05, 0.4)) for _ in range(5)]
    return _cases(answer, ref, cases, rel=1e-6,
                  wrong=[(lambda L, a, al: (L / a) ** (1 / al), "L = a N^(-alpha), so N = (a / L)^(1 / alpha)"),
                         (lambda L, a, al: (a / L) ** al, "invert the power: the exponent becomes 1 / alpha"),
                         (lambda L, a, al: (a / L) ** (-1 / al), "the loss falls as N grows: the exponent of a / L is positive")],
                  show=lambda a: f"L={a[0]:.3f}, a={a[1]:.3f}, alpha={a[2]:.3f}")


@_register("08c.4", "Chinchilla's compute-optimal size", "derive",
           "def chinchilla(C):\n    return NotImplemented  # (parameters, tokens)")
def _ex_08c_4(answer, rng, ctx):
    from .scaling import chinchilla_optimal
    cases = [(10 ** rng.uniform(18, 26),) for _ in range(5)]
    return _cases(answer, chinchilla_optimal, cases, rel=1e-6,
                  wrong=[(lambda C: chinchilla_optimal(C)[::-1], "return (parameters, tokens): tokens are 20 times the parameters"),
                         (lambda C: (math.sqrt(C / 20), 20 * math.sqrt(C / 20)), "training costs C = 6 N D FLOPs"),
                         (lambda C: (C / 120, C / 6), "solve C = 6 N D together with D = 20 N: N = sqrt(C / 120)")],
                  show=lambda a: f"C={a[0]:.3g}")


@_register("08c.5", "A row-parallel linear layer", "complete",
           "def row_parallel(x, weight, bias, n_shards):\n    return NotImplemented")
def _ex_08c_5(answer, rng, ctx):
    from .parallel import row_parallel_linear
    cases = []
    for i in range(4):
        # the first two cases have 2 and 4 shards, so a per-shard bias or a lone shard shows
        g = _tgen(rng); n = (2, 4)[i] if i < 2 else rng.choice([1, 2, 4]); I = n * rng.randint(1, 8); O = rng.randint(1, 10)
        cases.append((torch.randn(rng.randint(1, 4), I, generator=g), torch.randn(O, I, generator=g), torch.randn(O, generator=g), n))
    def bias_per_shard(x, w, b, n):
        return sum(xs @ ws.T + b for xs, ws in zip(x.chunk(n, -1), w.chunk(n, 1)))
    def one_shard(x, w, b, n):
        return x.chunk(n, -1)[0] @ w.chunk(n, 1)[0].T + b
    def no_bias(x, w, b, n):
        return sum(xs @ ws.T for xs, ws in zip(x.chunk(n, -1), w.chunk(n, 1)))
    return _cases(answer, row_parallel_linear, cases, rel=1e-5,
                  wrong=[(bias_per_shard, "add the bias once, after the sum (the all-reduce), not on every shard"),
                         (one_shard, "one shard alone is a partial sum: add the products of all shards"),
                         (no_bias, "add the bias after the sum")],
                  hint="split x by its input features and W by its columns; sum the partial products",
                  show=lambda a: f"x {tuple(a[0].shape)}, weight {tuple(a[1].shape)}, n_shards={a[3]}")


# ====================================================================== chapter 08d (evaluation beyond loss)
@_register("08d.1", "Bits per byte from a perplexity per token", "derive",
           "def bpb_from_perplexity(ppl, n_tokens, n_bytes):\n    return NotImplemented  # your formula here")
def _ex_08d_1(answer, rng, ctx):
    from .evaluation import bits_per_byte
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
    from .evaluation import MCItem, choose
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
    measured = dict.fromkeys(keys, True)
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


# ====================================================================== chapter 06a
def _window_average_ref(x: torch.Tensor, w: int) -> torch.Tensor:
    """Row t is the mean of rows max(0, t - w + 1) .. t (dim -2): a loop, the plainest definition."""
    T = x.shape[-2]
    return torch.stack([x[..., max(0, t - w + 1):t + 1, :].mean(dim=-2) for t in range(T)], dim=-2)


@_register("06a.1", "A sliding-window average as one matmul", "complete",
           "def window_average(x, w):\n    return NotImplemented  # x (..., T, C) -> (..., T, C)")
def _ex_06a_1(answer, rng, ctx):
    cases = []
    for i in range(5):
        g = _tgen(rng)
        T = rng.randint(4, 12)
        w = rng.randint(2, T - 1) if i < 3 else rng.randint(1, T + 3)  # the first three cut the window short
        shape = (rng.randint(1, 3), T, rng.randint(1, 5)) if i % 2 else (T, rng.randint(1, 5))
        cases.append((torch.randn(*shape, generator=g, dtype=torch.float64), w))
    def divide_by_w(x, w):
        T = x.shape[-2]
        return torch.stack([x[..., max(0, t - w + 1):t + 1, :].sum(dim=-2) / w for t in range(T)], dim=-2)
    def one_too_many(x, w):
        return _window_average_ref(x, w + 1)
    def causal_average(x, w):
        return _window_average_ref(x, x.shape[-2])
    def future(x, w):
        return _window_average_ref(x.flip(-2), w).flip(-2)
    return _cases(answer, _window_average_ref, cases, rel=1e-6,
                  wrong=[(divide_by_w, "the first rows have fewer than w rows to average: divide each row by its own count"),
                         (one_too_many, "the window holds w rows: t - w + 1 .. t, the row itself included"),
                         (causal_average, "keep only the last w rows: a band below the diagonal, not the whole lower triangle"),
                         (future, "row t may see rows up to t only, never later ones (a lower band, not an upper one)")],
                  hint="row t averages rows t - w + 1 .. t (fewer near the start); check your output against a plain loop",
                  show=lambda a: f"x of shape {tuple(a[0].shape)}, w={a[1]}")


def _attention_param_count(d: int, h: int) -> int:
    from .gpt import CausalSelfAttention, GPTConfig
    with torch.device("meta"):  # shapes only: no memory, no random numbers
        m = CausalSelfAttention(GPTConfig(vocab_size=2, block_size=2, n_layer=1, n_head=h, d_model=d, d_ff=4), 0)
    return sum(p.numel() for p in m.parameters())


@_register("06a.2", "Parameters of multi-head attention", "derive",
           "def attention_params(d_model, n_head):\n    return NotImplemented")
def _ex_06a_2(answer, rng, ctx):
    heads = [4] + [rng.choice([1, 2, 3, 4, 6, 8, 12, 16]) for _ in range(4)]  # at least one case with several heads
    cases = [(h * rng.randint(1, 96), h) for h in heads]
    return _cases(answer, _attention_param_count, cases,
                  wrong=[(lambda d, h: 4 * d * d, "every Linear layer of the attention has a bias too"),
                         (lambda d, h: 3 * d * d + 3 * d, "after the heads are joined, an output projection (d_model x d_model, with bias) mixes them"),
                         (lambda d, h: h * (4 * d * d + 4 * d), "the heads split d_model between them: each has d_model / n_head columns"),
                         (lambda d, h: 3 * (d * (d // h) + d // h) + d * d + d, "count the queries, keys and values of all the heads, not of one")],
                  show=lambda a: f"d_model={a[0]}, n_head={a[1]}")


def _last_logits_after_shuffle(n_layer: int, rng: random.Random) -> tuple[float, int]:
    """Largest change of the last position's logits when the earlier tokens of a sequence are shuffled.

    A fresh GPT without positions (the table zeroed), float64, with weights large enough that
    attention is far from uniform.
    """
    from .gpt import GPT, GPTConfig
    g = _tgen(rng)
    T, V = rng.randint(6, 12), rng.randint(8, 20)
    with _seeded(rng):
        m = GPT(GPTConfig(vocab_size=V, block_size=T, n_layer=n_layer, n_head=2, d_model=16, d_ff=32)).double().eval()
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float64) * 0.5)
        m.wpe.weight.zero_()
        idx = torch.randint(V, (1, T), generator=g)
        while len(set(idx[0, :-1].tolist())) < 3:  # a prefix worth shuffling
            idx = torch.randint(V, (1, T), generator=g)
        perm = torch.randperm(T - 1, generator=g)
        while torch.equal(idx[0, :-1][perm], idx[0, :-1]):
            perm = torch.randperm(T - 1, generator=g)
        shuffled = torch.cat([idx[:, :-1][:, perm], idx[:, -1:]], dim=1)
        a, b = m(idx)[0][0, -1], m(shuffled)[0][0, -1]
    return float((a - b).abs().max()), T


@_register("06a.3", "Without positions, does the order of the past matter?", "predict",
           "answer = {'one_block': ..., 'two_blocks': ...}  # 'changed' or 'unchanged'")
def _ex_06a_3(answer, rng, ctx):
    measured, inputs = {}, []
    for key, n_layer in (("one_block", 1), ("two_blocks", 2)):
        for _ in range(5):  # a draw whose change is neither clearly zero nor clearly not is drawn again
            diff, T = _last_logits_after_shuffle(n_layer, rng)
            if diff < 1e-9 or diff > 1e-4:
                break
        measured[key] = "unchanged" if diff < 1e-9 else "changed"
        inputs.append((key, T, diff))
    if isinstance(answer, dict):
        answer = {k: ("unchanged" if v is False else "changed" if v is True else v) for k, v in answer.items()}
    return _prediction(answer, measured, tuple(inputs), what="fresh models without positions, prefix shuffled",
                       wrong=[({"one_block": "unchanged", "two_blocks": "unchanged"},
                               "in the second block, each earlier position carries what it saw up to itself; shuffling changes those prefixes"),
                              ({"one_block": "changed", "two_blocks": "changed"},
                               "in one block the last position takes a weighted sum whose weights depend on content only, and a sum ignores order"),
                              ({"one_block": "changed", "two_blocks": "unchanged"},
                               "start with one block: a weighted sum over the earlier positions, weights from content only")],
                       hint="answer with 'changed' or 'unchanged' for each model")


@_register("06a.4", "Dropout at training and at evaluation time", "predict",
           "answer = {'train_mode': ..., 'eval_mode': ...}  # True if two forward passes give equal logits")
def _ex_06a_4(answer, rng, ctx):
    from .gpt import GPT, GPTConfig
    g = _tgen(rng)
    V, T = rng.randint(8, 30), rng.randint(4, 16)
    with _seeded(rng):
        m = GPT(GPTConfig(vocab_size=V, block_size=T, n_layer=1, n_head=2, d_model=16, d_ff=32, dropout=0.1))
        idx = torch.randint(V, (2, T), generator=g)
        with torch.no_grad():
            m.train()
            train_equal = bool(torch.equal(m(idx)[0], m(idx)[0]))
            m.eval()
            eval_equal = bool(torch.equal(m(idx)[0], m(idx)[0]))
    measured = {"train_mode": train_equal, "eval_mode": eval_equal}
    return _prediction(answer, measured, ((V, T),), what="two forward passes of a fresh model with dropout 0.1",
                       wrong=[({"train_mode": True, "eval_mode": True}, "in training mode each pass draws a new random mask"),
                              ({"train_mode": False, "eval_mode": False}, "in evaluation mode dropout is switched off: nothing random is left"),
                              ({"train_mode": True, "eval_mode": False}, "dropout draws random masks while training and is off at evaluation")],
                       hint="answer True or False for each mode")


# ====================================================================== chapter 01c
_CL100K_CACHE: list = []


def _cl100k():
    """The book's cl100k tokenizer, loaded once (about half a second)."""
    if not _CL100K_CACHE:
        from .tokenizers import ByteBPETokenizer
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
    from .tokenizers.pathologies import collapsed_rows, distance_to_reference
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


# ---------------------------------------------------------------------- chapter 06c (decoding)
@_register("06c.1", "Tokens per round of speculative decoding", "derive",
           "def tokens_per_round(alpha, k):\n    return NotImplemented")
def _ex_06c_1(answer, rng, ctx):
    from .decoding import expected_tokens_per_round
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
    from .decoding import speculative_generate
    from .llama import Llama, LlamaConfig
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
    from .decoding import beam_search, greedy_decode
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


# ====================================================================== chapter 02b (Bahdanau attention)
def _additive_module(rng: random.Random, dq: int, dk: int, da: int):
    from .attention import AdditiveAttention
    with _seeded(rng):
        return AdditiveAttention(dq, dk, da)


@_register("02b.1", "Bahdanau's additive attention weights", "complete",
           "def additive_weights(query, keys, W, U, b, v):\n    return NotImplemented  # your code here")
def _ex_02b_1(answer, rng, ctx):
    cases = []
    for _ in range(4):
        g = _tgen(rng)
        dq, dk, da, S = rng.randint(1, 6), rng.randint(1, 6), rng.randint(2, 8), rng.randint(2, 9)
        cases.append((torch.randn(dq, generator=g), torch.randn(S, dk, generator=g), torch.randn(da, dq, generator=g),
                      torch.randn(da, dk, generator=g), torch.randn(da, generator=g), torch.randn(da, generator=g)))
    def ref(q, K, W, U, b, v):
        from .attention import AdditiveAttention
        att = AdditiveAttention(W.shape[1], U.shape[1], W.shape[0])
        with torch.no_grad():  # the library's W_q, W_k (bias b) and w are the exercise's W, U (b) and v
            att.W_q.weight.copy_(W), att.W_k.weight.copy_(U), att.W_k.bias.copy_(b), att.w.weight.copy_(v[None])
            return att(q[None], K[None], return_weights=True)[1][0]
    return _cases(answer, ref, cases, rel=1e-5,
                  wrong=[(lambda q, K, W, U, b, v: torch.softmax((W @ q + K @ U.T + b) @ v, -1),
                          "the score passes W q + U k_j + b through tanh before the dot product with v"),
                         (lambda q, K, W, U, b, v: torch.tanh(W @ q + K @ U.T + b) @ v,
                          "these are the scores e_j; the weights are their softmax over the keys"),
                         (lambda q, K, W, U, b, v: torch.softmax(torch.tanh(W @ q + K @ U.T + b), 0) @ v,
                          "take the softmax over the keys after scoring each key with v, not over the hidden units")],
                  hint="e_j = v . tanh(W q + U k_j + b), one score per key; then softmax over j",
                  show=lambda a: f"query of size {a[0].shape[0]}, {a[1].shape[0]} keys of size {a[1].shape[1]}, d_attn={a[2].shape[0]}")


@_register("02b.2", "Parameters of the additive score", "derive",
           "def additive_params(d_query, d_key, d_attn):\n    return NotImplemented")
def _ex_02b_2(answer, rng, ctx):
    cases = [(rng.randint(1, 300), rng.randint(1, 300), rng.randint(1, 300)) for _ in range(5)]
    def ref(dq, dk, da):
        return sum(p.numel() for p in _additive_module(rng, dq, dk, da).parameters())
    return _cases(answer, ref, cases,
                  wrong=[(lambda dq, dk, da: da * (dq + dk), "count the bias b and the vector v too"),
                         (lambda dq, dk, da: da * (dq + dk + 1), "v has d_attn numbers as well"),
                         (lambda dq, dk, da: da * (dq + dk) + 1, "b and v each have d_attn numbers")],
                  hint="W is d_attn x d_query, U is d_attn x d_key, plus the bias b and the vector v",
                  show=lambda a: f"d_query={a[0]}, d_key={a[1]}, d_attn={a[2]}")


@_register("02b.3", "Equal keys and a huge v", "predict",
           "answer = {'equal_keys': ..., 'large_v': ...}  # each 'uniform', 'one-hot' or 'unchanged'")
def _ex_02b_3(answer, rng, ctx):
    if isinstance(answer, dict) and any(_is_placeholder(v) for v in answer.values()):
        raise _NotAttempted()
    dq, dk, da, S = rng.randint(2, 6), rng.randint(2, 6), rng.randint(4, 8), rng.randint(3, 7)
    att = _additive_module(rng, dq, dk, da)
    g = _tgen(rng)
    for _ in range(50):  # keys whose two best scores differ clearly (no near tie for the huge v)
        q, K = torch.randn(1, dq, generator=g), 3 * torch.randn(1, S, dk, generator=g)
        with torch.no_grad():
            top2 = att(q, K, return_weights=True)[1][0].log().topk(2).values
        if top2[0] - top2[1] > 1e-2:
            break

    def kind(w: torch.Tensor, base: torch.Tensor) -> str:
        if (w - 1.0 / S).abs().max() < 1e-6:
            return "uniform"
        if w.max() > 0.99:
            return "one-hot"
        return "unchanged" if torch.allclose(w, base, atol=1e-6) else "other"
    with torch.no_grad():
        base = att(q, K, return_weights=True)[1]
        equal = att(q, K[:, :1].expand(1, S, dk).contiguous(), return_weights=True)[1]
        att.w.weight.mul_(1e4)  # chapter 2b's v: every score e_j multiplied by 10,000
        large = att(q, K, return_weights=True)[1]
    measured = {"equal_keys": kind(equal, base), "large_v": kind(large, base)}
    return _prediction(answer, measured, (q, K), what="a fresh additive attention on random keys",
                       wrong=[({"equal_keys": "unchanged", "large_v": "unchanged"},
                               "equal keys get equal scores, whatever the query; scaling v scales every score"),
                              ({"equal_keys": "uniform", "large_v": "uniform"},
                               "multiplying all scores by a large number sharpens the softmax onto the largest score"),
                              ({"equal_keys": "one-hot", "large_v": "one-hot"},
                               "with every key equal, no key can score higher than another")],
                       hint="answer 'uniform', 'one-hot' or 'unchanged' for each case")


# ====================================================================== chapter 09
@_register("09.1", "Labels for supervised fine-tuning", "complete",
           "def sft_labels(prompt_ids, answer_ids):\n    return NotImplemented  # your code here")
def _ex_09_1(answer, rng, ctx):
    from .post_training import sft_example
    cases = [([rng.randrange(1, 80) for _ in range(rng.randint(1, 12))],
              [rng.randrange(1, 80) for _ in range(rng.randint(1, 8))]) for _ in range(6)]
    return _cases(lambda p, a: list(_call(answer, list(p), list(a))), lambda p, a: sft_example(p, a)[1], cases,
                  wrong=[(lambda p, a: p + a, "the prompt's positions must carry no loss: -100 there"),
                         (lambda p, a: p + [-100] * len(a), "it is the other way round: the answer is learned, the prompt masked"),
                         (lambda p, a: [-100] * len(a), "one label per position of prompt + answer")],
                  hint="one label per token of prompt + answer: -100 where no loss is taken, the token id where it is",
                  show=lambda a: f"prompt_ids={a[0]}, answer_ids={a[1]}")


@_register("09.2", "Trainable numbers of one LoRA adapter", "derive",
           "def lora_trainable(d_in, d_out, r):\n    return NotImplemented  # your formula here")
def _ex_09_2(answer, rng, ctx):
    from torch import nn

    from .lora import LoRALinear
    cases = [(rng.randint(1, 64), rng.randint(1, 64), rng.randint(1, 8)) for _ in range(5)]

    def ref(d_in, d_out, r):
        with _seeded(rng):
            layer = LoRALinear(nn.Linear(d_in, d_out), r=r)
        return sum(p.numel() for p in layer.parameters() if p.requires_grad)
    return _cases(answer, ref, cases,
                  wrong=[(lambda i, o, r: i * o, "that is the frozen weight W; LoRA trains two thin matrices instead"),
                         (lambda i, o, r: r * i * o, "A is r x d_in and B is d_out x r: add their sizes"),
                         (lambda i, o, r: r * (i + o) + o, "the bias stays frozen with W")],
                  hint="count the numbers of A and of B",
                  show=lambda a: f"d_in={a[0]}, d_out={a[1]}, r={a[2]}")


@_register("09.3", "The log-probability of an answer", "complete",
           "def answer_logprob(logits, labels):\n    return NotImplemented  # your code here")
def _ex_09_3(answer, rng, ctx):
    from .post_training import IGNORE_INDEX, sequence_logprobs
    cases = []
    for _ in range(6):
        T, V = rng.randint(4, 10), rng.randint(5, 12)
        n_prompt = rng.randint(1, T - 2)
        logits = 2 * torch.randn(T, V, generator=_tgen(rng))
        labels = [IGNORE_INDEX] * n_prompt + [rng.randrange(V) for _ in range(T - n_prompt)]
        cases.append((logits, labels))

    def ref(logits, labels):
        return float(sequence_logprobs(logits[None], torch.tensor([labels]))[0])

    def unshifted(logits, labels):
        logp = logits.log_softmax(-1)
        return sum(float(logp[t, y]) for t, y in enumerate(labels) if y != IGNORE_INDEX)

    def mean(logits, labels):
        n = sum(y != IGNORE_INDEX for y in labels[1:])
        return ref(logits, labels) / n

    def raw(logits, labels):
        return sum(float(logits[t, y]) for t, y in enumerate(labels[1:]) if y != IGNORE_INDEX)
    return _cases(lambda lg, lb: float(_call(answer, lg.clone(), list(lb))), ref, cases, rel=1e-5,
                  wrong=[(unshifted, "position t predicts the next token: compare the logits at t with the label at t + 1"),
                         (lambda lg, lb: math.exp(ref(lg, lb)), "return the log-probability (a sum of logs), not the probability"),
                         (mean, "the answer's log-probability is the sum over its tokens, not the mean"),
                         (raw, "turn the logits into log-probabilities first (log_softmax over the vocabulary)")],
                  hint="log_softmax over the vocabulary, then add the entries of the labelled next tokens; skip -100",
                  show=lambda a: f"logits of shape {tuple(a[0].shape)}, labels={a[1]}")


# ====================================================================== chapter 07b (T5 and GLM objectives)
def _t5_counts(L: int, r: float, mu: float) -> tuple[int, int]:
    """(noise tokens, spans) of T5's layout when no clipping binds: round(L r), round(noise / mu)."""
    n_noise = int(round(L * r))
    return n_noise, int(round(n_noise / mu))


@_register("07b.1", "Lengths of T5's inputs and targets", "derive",
           "def t5_lengths(L, noise_density, mean_span_length):\n    return NotImplemented  # (len(inputs), len(targets))")
def _ex_07b_1(answer, rng, ctx):
    from .objectives import span_corruption
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
    from .objectives import glm_blank_infilling
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
    from .objectives import span_corruption
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
