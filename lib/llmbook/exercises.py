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
CHAPTERS = ("00", "01a", "01b", "02", "03", "04", "05", "06", "07", "08a", "08b", "08c")


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
        res = ex.checker(answer, rng, context)
        v = Verdict(ex.id, True, f"{ex.id} passed: {res.message}.", True, res.inputs)
    except _NotAttempted:
        v = Verdict(ex.id, False, f"{ex.id} not attempted yet: replace the placeholder with your answer "
                                  "and run the cell again.", False)
    except _ReaderRaised as e:
        line = str(e.exc).strip().splitlines()[0] if str(e.exc).strip() else ""
        v = Verdict(ex.id, False, f"{ex.id}: your function raised {type(e.exc).__name__}: {line}"[:300])
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
                  wrong=[(lambda lm, p, n: ref(lm, p, n + len(p))[len(p):] if False else p + ref(lm, p, n),
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
