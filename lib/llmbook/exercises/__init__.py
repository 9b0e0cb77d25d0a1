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

from ._core import CHAPTERS, EXERCISES, Exercise, KINDS, Verdict, Wrong, check, list_exercises
# one module per chapter; importing it registers its checkers (in book order)
from . import ch00, ch01a, ch01b, ch01c, ch02, ch02b, ch03, ch03b, ch04, ch05, ch06a, ch06b, ch06c, ch07, ch07b, ch08a, ch08b, ch08c, ch08d, ch08e, ch08f, ch08g, ch09  # noqa: F401
from .ch00 import ALPHA_EN

__all__ = ["Verdict", "Exercise", "EXERCISES", "check", "list_exercises"]
