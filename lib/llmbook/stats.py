"""The book's one rule for comparing two results: a t interval of the difference.

Every chapter that says "A beats B" decides it the same way:

- **Paired** when the two results share their units: the same seeds (run *i* of A and run *i*
  of B start from the same seed and data order) or the same test items (two models scored on
  the same 500 tweets). The interval is built from the per-unit differences ``a_i - b_i``,
  which removes what the units have in common (an easy item is easy for both models).
- **Unpaired** otherwise: Welch's interval, with the Welch-Satterthwaite degrees of freedom.
- The interval uses Student's t with the degrees of freedom that the number of runs gives.
  With 3 seeds a 95 % interval is the mean difference +- 4.30 standard errors, not +- 2:
  two degrees of freedom leave the standard error itself very uncertain.
- The verdict is ``"higher"`` (or ``"lower"``) only when the whole interval lies above (or
  below) zero; an interval that holds zero is a ``"tie"``. A tie says the runs cannot tell
  the two apart, not that they are equal.

Decisions (which learning rate, which variant) are taken on validation data; the test split
is scored once, for the one number a chapter reports.

What this module leaves out: multiple-comparison corrections, bootstrap intervals, and tests
for proportions from a single run (a single run's accuracy on n items is handled as n paired
0/1 items, which the t interval treats well for the item counts the book uses).

The t quantile is computed here from the regularised incomplete beta function (a continued
fraction, as in Numerical Recipes §6.4), so the module needs only the standard library; the
tests compare it with ``scipy.stats``.

>>> r = compare([0.31, 0.35, 0.33], [0.20, 0.26, 0.21], paired=True)
>>> r.verdict, round(r.diff, 3), round(r.half_width, 3)
('higher', 0.107, 0.038)
>>> compare([0.31, 0.35, 0.33], [0.30, 0.36, 0.31], paired=True).verdict
'tie'
>>> round(t_quantile(0.975, 2), 3)
4.303
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Sequence, Union

Number = Union[int, float]

__all__ = ["Comparison", "Interval", "compare", "compare_to", "mean_interval", "t_quantile", "t_cdf"]


# ----------------------------------------------------------------------------------------
# Student's t distribution, from the regularised incomplete beta function
# ----------------------------------------------------------------------------------------

def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz's method)."""
    tiny, eps = 1e-300, 3e-16
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 10_000):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < eps:
            return h
    raise ArithmeticError("incomplete beta: continued fraction did not converge")


def _betainc(a: float, b: float, x: float) -> float:
    """Regularised incomplete beta I_x(a, b) for 0 <= x <= 1."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = (math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                 + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _betacf(a, b, x) / a
    return 1.0 - math.exp(log_front) * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with ``df`` degrees of freedom (df > 0, may be fractional).

    >>> round(t_cdf(0.0, 5), 6), round(t_cdf(2.015048, 5), 4)
    (0.5, 0.95)
    """
    _check_df(df)
    if math.isinf(t):
        return 1.0 if t > 0 else 0.0
    tail = 0.5 * _betainc(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t > 0 else tail


def t_quantile(p: float, df: float) -> float:
    """The t with P(T <= t) = p, for Student's t with ``df`` degrees of freedom.

    Bisection on :func:`t_cdf` to about 1e-12; ``df = inf`` gives the normal quantile.

    >>> round(t_quantile(0.975, 1), 3), round(t_quantile(0.975, 30), 3)
    (12.706, 2.042)
    """
    if not (isinstance(p, (int, float)) and 0.0 < p < 1.0):
        raise ValueError(f"p must be a probability strictly between 0 and 1, got {p!r}")
    if math.isinf(df) and df > 0:
        return _normal_quantile(p)
    _check_df(df)
    if p == 0.5:
        return 0.0
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        lo, hi = hi, hi * 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12 * max(1.0, hi):
            break
    return 0.5 * (lo + hi)


def _normal_quantile(p: float) -> float:
    lo, hi = -40.0, 40.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if 0.5 * math.erfc(-mid / math.sqrt(2.0)) < p:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def _check_df(df: float) -> None:
    if not (isinstance(df, (int, float)) and df > 0 and not math.isnan(df)):
        raise ValueError(f"df (degrees of freedom) must be a positive number, got {df!r}")


# ----------------------------------------------------------------------------------------
# Intervals and the verdict
# ----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Interval:
    """A mean with its t interval: ``mean`` +- ``half_width`` at ``confidence``."""

    mean: float
    half_width: float
    se: float
    n: int
    df: float
    confidence: float

    @property
    def low(self) -> float:
        return self.mean - self.half_width

    @property
    def high(self) -> float:
        return self.mean + self.half_width

    def __str__(self) -> str:
        return f"{self.mean:.4g} +- {self.half_width:.2g} ({self.confidence:.0%} t interval, n={self.n})"


@dataclass(frozen=True)
class Comparison:
    """The difference ``a - b`` of two results, its t interval, and the verdict.

    ``verdict`` is ``"higher"`` when the whole interval is above zero (a is higher than b),
    ``"lower"`` when it is below, and ``"tie"`` when it holds zero. ``better(higher_is_better)``
    turns that into "a better" / "b better" / "tie".
    """

    diff: float
    half_width: float
    se: float
    n_a: int
    n_b: int
    df: float
    paired: bool
    confidence: float

    @property
    def low(self) -> float:
        return self.diff - self.half_width

    @property
    def high(self) -> float:
        return self.diff + self.half_width

    @property
    def verdict(self) -> str:
        if self.low > 0:
            return "higher"
        if self.high < 0:
            return "lower"
        return "tie"

    def better(self, higher_is_better: bool = True, names: tuple[str, str] = ("a", "b")) -> str:
        """``"<a> better"``, ``"<b> better"`` or ``"tie"``, for a metric where higher (or lower) is better."""
        v = self.verdict
        if v == "tie":
            return "tie"
        a_wins = (v == "higher") == higher_is_better
        return f"{names[0] if a_wins else names[1]} better"

    def __str__(self) -> str:
        kind = "one-sample" if self.n_b == 0 else ("paired" if self.paired else "Welch")
        return (f"{self.diff:+.4g} +- {self.half_width:.2g} "
                f"({self.confidence:.0%} {kind} t interval, df={self.df:.3g}): {self.verdict}")


def _values(x: Iterable[Number], name: str) -> list[float]:
    if isinstance(x, (str, bytes)):
        raise TypeError(f"{name} must be a sequence of numbers, got a string")
    try:
        vals = [float(v) for v in x]
    except (TypeError, ValueError) as e:
        raise TypeError(f"{name} must be a sequence of numbers: {e}") from None
    if any(math.isnan(v) or math.isinf(v) for v in vals):
        raise ValueError(f"{name} holds NaN or infinite values: {vals}")
    return vals


def _check_confidence(confidence: float) -> None:
    if not (isinstance(confidence, (int, float)) and 0.0 < confidence < 1.0):
        raise ValueError(f"confidence must be strictly between 0 and 1, got {confidence!r}")


def _mean_var(v: Sequence[float]) -> tuple[float, float]:
    m = math.fsum(v) / len(v)
    var = math.fsum((x - m) ** 2 for x in v) / (len(v) - 1)
    return m, var


def mean_interval(x: Iterable[Number], confidence: float = 0.95) -> Interval:
    """The mean of ``x`` with its t interval (n - 1 degrees of freedom); needs n >= 2.

    >>> str(mean_interval([1.0, 2.0, 3.0]))
    '2 +- 2.5 (95% t interval, n=3)'
    """
    _check_confidence(confidence)
    v = _values(x, "x")
    if len(v) < 2:
        raise ValueError(f"x needs at least 2 values for an interval, got {len(v)}")
    m, var = _mean_var(v)
    se = math.sqrt(var / len(v))
    df = len(v) - 1
    return Interval(m, t_quantile(0.5 + confidence / 2, df) * se, se, len(v), df, confidence)


def compare(a: Iterable[Number], b: Iterable[Number], *, paired: bool,
            confidence: float = 0.95) -> Comparison:
    """Compare results ``a`` and ``b`` (per seed or per item) by the t interval of ``a - b``.

    ``paired=True`` when ``a[i]`` and ``b[i]`` share their unit (the same seed, the same test
    item): the interval of the mean of the differences, with n - 1 degrees of freedom.
    ``paired=False`` otherwise: Welch's interval for the difference of the means. The
    argument has no default, so every call says which case it is.
    """
    _check_confidence(confidence)
    va, vb = _values(a, "a"), _values(b, "b")
    if paired:
        if len(va) != len(vb):
            raise ValueError(f"paired comparison needs as many values in a as in b, got {len(va)} and {len(vb)}")
        if len(va) < 2:
            raise ValueError(f"a and b need at least 2 pairs for an interval, got {len(va)}")
        iv = mean_interval([x - y for x, y in zip(va, vb)], confidence)
        return Comparison(iv.mean, iv.half_width, iv.se, len(va), len(vb), iv.df, True, confidence)
    if len(va) < 2 or len(vb) < 2:
        raise ValueError(f"an unpaired comparison needs at least 2 values on each side, got {len(va)} and {len(vb)}")
    ma, var_a = _mean_var(va)
    mb, var_b = _mean_var(vb)
    qa, qb = var_a / len(va), var_b / len(vb)
    se = math.sqrt(qa + qb)
    if se == 0.0:
        df = float(len(va) + len(vb) - 2)
    else:
        df = (qa + qb) ** 2 / (qa ** 2 / (len(va) - 1) + qb ** 2 / (len(vb) - 1))
    half = t_quantile(0.5 + confidence / 2, df) * se
    return Comparison(ma - mb, half, se, len(va), len(vb), df, False, confidence)


def compare_to(a: Iterable[Number], value: Number, confidence: float = 0.95) -> Comparison:
    """Compare results ``a`` with a fixed number (chance, a constant baseline's score).

    The one-sample interval of ``mean(a) - value`` with n - 1 degrees of freedom (``n_b`` is 0,
    and the comparison prints as a "one-sample t interval").

    >>> compare_to([0.31, 0.35, 0.33], 0.25).verdict
    'higher'
    """
    v = _values(a, "a")
    if not isinstance(value, (int, float)) or math.isnan(value):
        raise ValueError(f"value must be a number, got {value!r}")
    iv = mean_interval([x - float(value) for x in v], confidence)
    return Comparison(iv.mean, iv.half_width, iv.se, len(v), 0, iv.df, True, confidence)
