"""llmbook.stats, the book's one comparison rule, against scipy.stats."""

from __future__ import annotations

import math
import random

import pytest

scipy_stats = pytest.importorskip("scipy.stats")

from llmbook import stats


@pytest.mark.parametrize("df", [1, 2, 2.5, 3, 4, 7.3, 10, 30, 199, 1000])
@pytest.mark.parametrize("p", [0.5, 0.6, 0.9, 0.95, 0.975, 0.995, 0.025, 0.001])
def test_t_quantile_matches_scipy(p, df):
    assert stats.t_quantile(p, df) == pytest.approx(scipy_stats.t.ppf(p, df), rel=1e-9, abs=1e-10)


@pytest.mark.parametrize("df", [1, 2, 3.7, 12, 500])
@pytest.mark.parametrize("t", [-30.0, -4.3, -1.0, 0.0, 0.2, 2.0, 4.303, 50.0])
def test_t_cdf_matches_scipy(t, df):
    assert stats.t_cdf(t, df) == pytest.approx(scipy_stats.t.cdf(t, df), rel=1e-9, abs=1e-13)


def test_infinite_df_is_the_normal():
    assert stats.t_quantile(0.975, math.inf) == pytest.approx(scipy_stats.norm.ppf(0.975), rel=1e-9)


def _samples(seed, n, shift=0.0, noise=1.0):
    rng = random.Random(seed)
    return [rng.gauss(shift, noise) for _ in range(n)]


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("n", [2, 3, 5, 40])
def test_paired_interval_matches_scipy(seed, n):
    a = _samples(seed, n, 0.3)
    b = [x + e for x, e in zip(a, _samples(seed + 100, n, -0.2, 0.3))]
    r = stats.compare(a, b, paired=True)
    d = [x - y for x, y in zip(a, b)]
    lo, hi = scipy_stats.t.interval(0.95, n - 1, loc=sum(d) / n, scale=scipy_stats.sem(d))
    assert (r.low, r.high) == pytest.approx((lo, hi), rel=1e-9, abs=1e-12)
    res = scipy_stats.ttest_rel(a, b)
    # the interval excludes 0 exactly when the two-sided paired t-test rejects at 5 %
    assert (r.verdict != "tie") == (res.pvalue < 0.05)


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("na,nb", [(3, 3), (3, 5), (10, 4), (30, 30)])
def test_welch_interval_matches_scipy(seed, na, nb):
    a = _samples(seed, na, 0.5, 1.0)
    b = _samples(seed + 50, nb, 0.0, 2.0)
    r = stats.compare(a, b, paired=False)
    res = scipy_stats.ttest_ind(a, b, equal_var=False)
    ci = res.confidence_interval(0.95)
    assert (r.low, r.high) == pytest.approx((ci.low, ci.high), rel=1e-9, abs=1e-12)
    assert r.df == pytest.approx(res.df, rel=1e-12)
    assert (r.verdict != "tie") == (res.pvalue < 0.05)


def test_mean_interval_matches_scipy():
    x = _samples(3, 7, 1.0)
    iv = stats.mean_interval(x, confidence=0.9)
    lo, hi = scipy_stats.t.interval(0.9, 6, loc=sum(x) / 7, scale=scipy_stats.sem(x))
    assert (iv.low, iv.high) == pytest.approx((lo, hi), rel=1e-9)


def test_compare_to_a_constant_is_a_one_sample_test():
    a = [0.31, 0.35, 0.33, 0.29]
    r = stats.compare_to(a, 0.25)
    res = scipy_stats.ttest_1samp(a, 0.25)
    ci = res.confidence_interval(0.95)
    assert (r.low + 0.25, r.high + 0.25) == pytest.approx((ci.low, ci.high), rel=1e-9)
    assert r.verdict == "higher"
    # it says what it is: a one-sample interval, not a paired or a Welch one
    assert "one-sample t interval" in str(r)
    assert "paired" not in str(r) and "Welch" not in str(r)
    assert "paired t interval" in str(stats.compare(a, [0.2] * 4, paired=True))


def test_pairing_matters_when_units_share_their_difficulty():
    """Items differ a lot in difficulty; A beats B by a little on every one of them."""
    base = [0.2, 0.9, 0.5, 0.7, 0.1, 0.4]
    a = [x + 0.05 for x in base]
    assert stats.compare(a, base, paired=True).verdict == "higher"
    assert stats.compare(a, base, paired=False).verdict == "tie"


def test_three_seeds_use_t_with_two_degrees_of_freedom():
    a, b = [1.0, 1.2, 1.1], [0.0, 0.0, 0.0]
    r = stats.compare(a, b, paired=True)
    assert r.half_width == pytest.approx(4.302652729749 * r.se, rel=1e-9)


def test_verdicts_and_better():
    hi = stats.compare([2.0, 2.1, 2.2], [1.0, 1.1, 1.2], paired=True)
    assert hi.verdict == "higher"
    assert hi.better(higher_is_better=True, names=("A", "B")) == "A better"
    assert hi.better(higher_is_better=False, names=("A", "B")) == "B better"
    lo = stats.compare([1.0, 1.1, 1.2], [2.0, 2.1, 2.3], paired=True)
    assert lo.verdict == "lower"
    tie = stats.compare([1.0, 2.0, 1.5], [1.4, 1.6, 1.5], paired=True)
    assert tie.verdict == "tie" and tie.better() == "tie"
    assert "tie" in str(tie) and "paired" in str(tie)


def test_zero_spread_differences():
    r = stats.compare([1.0, 2.0, 3.0], [0.5, 1.5, 2.5], paired=True)
    assert r.half_width == 0.0 and r.verdict == "higher"
    same = stats.compare([1.0, 2.0], [1.0, 2.0], paired=True)
    assert same.verdict == "tie"


@pytest.mark.parametrize("call,match", [
    (lambda: stats.compare([1, 2], [1, 2, 3], paired=True), "as many values in a as in b"),
    (lambda: stats.compare([1], [2], paired=True), "at least 2 pairs"),
    (lambda: stats.compare([1], [2, 3], paired=False), "at least 2 values on each side"),
    (lambda: stats.compare([1, float("nan")], [2, 3], paired=False), "a holds NaN"),
    (lambda: stats.compare([1, 2], "ab", paired=False), "b must be a sequence of numbers"),
    (lambda: stats.compare([1, 2], [1, 2], paired=True, confidence=95), "confidence"),
    (lambda: stats.mean_interval([1.0]), "x needs at least 2 values"),
    (lambda: stats.t_quantile(1.0, 3), "p must be a probability"),
    (lambda: stats.t_quantile(0.9, 0), "df"),
    (lambda: stats.compare_to([1, 2], float("nan")), "value must be a number"),
])
def test_bad_input_names_the_parameter(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()


def test_paired_has_no_default():
    with pytest.raises(TypeError):
        stats.compare([1, 2], [1, 2])  # every call says whether its units are shared
