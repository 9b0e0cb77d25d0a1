"""The machinery shared by every chapter's checkers: the verdict, the registry, ``check``,
and the helpers that compare a reader's answer with the library's (see :mod:`llmbook.exercises`)."""

from __future__ import annotations

import itertools
import math
import os
import random
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Callable, Optional, Sequence

import torch

KINDS = ("derive", "complete", "predict", "widget")
CHAPTERS = ("00", "01a", "01b", "01c", "02", "02b", "03", "03b", "04", "05", "06a", "06b", "06c", "07", "07b", "08a", "08b", "08c", "08d", "08e", "08f", "08g", "09")


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

    def _ipython_display_(self) -> None:
        # ``check`` has already printed the message; a check cell ends with ``check(...)``, and
        # without this Jupyter would echo the repr as a second, redundant line under it.
        pass


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
