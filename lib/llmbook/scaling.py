"""Scaling laws: power-law fits of loss against size, and the compute-optimal rule of thumb.

Covers: fitting L(N) = a N^(-alpha) by least squares in log-log space
(``fit_power_law``), the same with an irreducible loss c, L(N) = a N^(-alpha) + c
(``fit_power_law_offset``, a one-dimensional search over c with the log-space fit
inside), evaluating a fitted law (``power_law``), Kaplan et al.'s published L(N) for
non-embedding parameters (``kaplan_loss``), training compute C = 6 N D
(``training_compute``), and Chinchilla's rule of thumb of about 20 training tokens per
parameter (``chinchilla_tokens``, ``chinchilla_optimal``). A sweep compares sizes
fairly only if each size trains at its own best learning rate, so the module also says
when a grid of tried rates brackets its best one (``best_rate``, ``rate_to_bracket``).

Leaves out: the joint law L(N, D), compute-frontier (IsoFLOP) fits and a law for how
the best learning rate or batch size moves with size. The published constants below are quoted, not re-derived.

Papers: Kaplan et al. 2020, *Scaling Laws for Neural Language Models* (alpha_N = 0.076,
N_c = 8.8e13 non-embedding parameters, loss in nats per token on WebText2);
Brown et al. 2020, *Language Models are Few-Shot Learners* (GPT-3: eight sizes from
125M to 175B parameters, all trained on 300B tokens); Hoffmann et al. 2022, *Training
Compute-Optimal Large Language Models* (Chinchilla: 70B parameters on 1.4T tokens,
about 20 tokens per parameter).
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

__all__ = [
    "KAPLAN_ALPHA_N",
    "KAPLAN_N_C",
    "GPT3_PARAMS",
    "GPT3_TRAIN_TOKENS",
    "CHINCHILLA_TOKENS_PER_PARAM",
    "fit_power_law",
    "fit_power_law_offset",
    "power_law",
    "kaplan_loss",
    "training_compute",
    "chinchilla_tokens",
    "chinchilla_optimal",
    "best_rate",
    "rate_to_bracket",
]

# Kaplan et al. 2020, equation (1.1) / Table 5: L(N) = (N_c / N)^alpha_N for models
# trained to convergence, N counting non-embedding parameters.
KAPLAN_ALPHA_N = 0.076
KAPLAN_N_C = 8.8e13

# Brown et al. 2020, Table 2.1: the names and total parameter counts of the GPT-3 sweep;
# every model saw 300 billion training tokens.
GPT3_PARAMS: dict[str, float] = {
    "small": 125e6,
    "medium": 350e6,
    "large": 760e6,
    "xl": 1.3e9,
    "2.7B": 2.7e9,
    "6.7B": 6.7e9,
    "13B": 13e9,
    "175B": 175e9,
}
GPT3_TRAIN_TOKENS = 300e9

# Hoffmann et al. 2022: compute-optimal models see about 20 tokens per parameter.
CHINCHILLA_TOKENS_PER_PARAM = 20.0


def _check_positive(name: str, value: float) -> None:
    if not (isinstance(value, (int, float)) and value > 0):
        raise ValueError(f"{name} must be a positive number, got {value!r}")


def _positive_array(name: str, values: Sequence[float]) -> np.ndarray:
    try:
        arr = np.asarray(values, dtype=float)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{name} must be a sequence of numbers") from err
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise ValueError(f"{name} must hold finite positive numbers")
    return arr


def _check_pair(params: Sequence[float], losses: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    n = _positive_array("params", params)
    loss = _positive_array("losses", losses)
    if len(n) != len(loss):
        raise ValueError(f"params and losses must have the same length, got {len(n)} and {len(loss)}")
    if len(n) < 2:
        raise ValueError("params needs at least two sizes to fit a power law")
    if len(np.unique(n)) < 2:
        raise ValueError("params must hold at least two different sizes")
    return n, loss


def fit_power_law(params: Sequence[float], losses: Sequence[float]) -> tuple[float, float]:
    """Least-squares fit of L = a N^(-alpha) as a straight line in log-log space; returns (a, alpha).

    log L = log a - alpha log N, so alpha is minus the slope and a the exponential of
    the intercept.

    >>> a, alpha = fit_power_law([1e3, 1e4, 1e5], [5.0 * 1e3 ** -0.1, 5.0 * 1e4 ** -0.1, 5.0 * 1e5 ** -0.1])
    >>> round(a, 6), round(alpha, 6)
    (5.0, 0.1)
    """
    n, loss = _check_pair(params, losses)
    slope, intercept = np.polyfit(np.log(n), np.log(loss), 1)
    return float(math.exp(intercept)), float(-slope)


def fit_power_law_offset(params: Sequence[float], losses: Sequence[float],
                         grid: int = 2000) -> tuple[float, float, float]:
    """Fit L = a N^(-alpha) + c; returns (a, alpha, c) with 0 <= c < min(losses).

    For each trial c on a grid the remaining loss L - c is fitted as a pure power law in
    log space; the c with the smallest squared error in L is kept. Needs three or more sizes.

    >>> n = [1e3, 1e4, 1e5, 1e6]
    >>> a, alpha, c = fit_power_law_offset(n, [3.0 * x ** -0.3 + 1.2 for x in n])
    >>> round(alpha, 2), round(c, 2)
    (0.3, 1.2)
    """
    n, loss = _check_pair(params, losses)
    if len(n) < 3:
        raise ValueError("params needs at least three sizes to fit a power law with an offset")
    if isinstance(grid, bool) or not isinstance(grid, int) or grid < 10:
        raise ValueError(f"grid must be an int >= 10, got {grid!r}")
    best = None
    for c in np.linspace(0.0, loss.min(), grid, endpoint=False):
        slope, intercept = np.polyfit(np.log(n), np.log(loss - c), 1)
        pred = np.exp(intercept) * n ** slope + c
        err = float(np.sum((pred - loss) ** 2))
        if best is None or err < best[0]:
            best = (err, float(math.exp(intercept)), float(-slope), float(c))
    return best[1], best[2], best[3]


def power_law(params: float | Sequence[float], a: float, alpha: float, c: float = 0.0) -> np.ndarray | float:
    """Evaluate a N^(-alpha) + c.

    >>> power_law(100.0, 2.0, 0.5)
    0.2
    """
    for name, v in (("a", a), ("alpha", alpha), ("c", c)):
        if isinstance(v, bool) or not isinstance(v, (int, float, np.floating, np.integer)) or not math.isfinite(v):
            raise ValueError(f"{name} must be a finite number, got {v!r}")
    if not a > 0:
        raise ValueError(f"a must be > 0, got {a}")
    n = _positive_array("params", np.atleast_1d(params))
    out = a * n ** (-alpha) + c
    return float(out[0]) if np.ndim(params) == 0 else out


def kaplan_loss(non_embedding_params: float | Sequence[float]) -> np.ndarray | float:
    """Kaplan et al.'s L(N) = (N_c / N)^0.076 in nats per token (WebText2, converged models).

    >>> round(kaplan_loss(1e9), 3)
    2.376
    """
    n = _positive_array("non_embedding_params", np.atleast_1d(non_embedding_params))
    out = (KAPLAN_N_C / n) ** KAPLAN_ALPHA_N
    return float(out[0]) if np.ndim(non_embedding_params) == 0 else out


def training_compute(n_params: float, tokens: float) -> float:
    """Training FLOPs by the rule of thumb C = 6 N D (2 forward + 4 backward per weight per token).

    >>> f"{training_compute(175e9, 300e9):.2e}"
    '3.15e+23'
    """
    _check_positive("n_params", n_params)
    _check_positive("tokens", tokens)
    return 6.0 * float(n_params) * float(tokens)


def chinchilla_tokens(n_params: float, tokens_per_param: float = CHINCHILLA_TOKENS_PER_PARAM) -> float:
    """Compute-optimal training tokens for a model of ``n_params`` parameters (about 20 per parameter).

    >>> f"{chinchilla_tokens(175e9):.2e}"
    '3.50e+12'
    """
    _check_positive("n_params", n_params)
    _check_positive("tokens_per_param", tokens_per_param)
    return float(n_params) * float(tokens_per_param)


def chinchilla_optimal(compute: float, tokens_per_param: float = CHINCHILLA_TOKENS_PER_PARAM) -> tuple[float, float]:
    """Split a compute budget C into (N, D) with D = r N and C = 6 N D, so N = sqrt(C / 6r).

    >>> n, d = chinchilla_optimal(6 * 70e9 * 1.4e12)
    >>> round(n / 1e9), round(d / 1e12, 1)
    (70, 1.4)
    """
    _check_positive("compute", compute)
    _check_positive("tokens_per_param", tokens_per_param)
    n = math.sqrt(compute / (6.0 * tokens_per_param))
    return n, tokens_per_param * n


def _check_rates(val_by_lr: dict) -> dict[float, float]:
    if not isinstance(val_by_lr, dict) or not val_by_lr:
        raise ValueError("val_by_lr must be a non-empty dict {learning rate: validation loss}")
    out = {}
    for lr, loss in val_by_lr.items():
        try:
            lr_f, loss_f = float(lr), float(loss)
        except (TypeError, ValueError):
            raise ValueError(f"val_by_lr must map numbers to numbers, got {lr!r}: {loss!r}") from None
        if not (lr_f > 0 and math.isfinite(lr_f)):
            raise ValueError(f"val_by_lr: learning rates must be finite and > 0, got {lr!r}")
        if math.isnan(loss_f):
            raise ValueError(f"val_by_lr: the loss at learning rate {lr!r} is NaN")
        out[lr_f] = loss_f
    return out


def best_rate(val_by_lr: dict) -> float:
    """The learning rate with the lowest validation loss (keys may be numbers or strings such as "0.004").

    >>> best_rate({"0.001": 2.4, "0.002": 2.1, "0.004": 2.3})
    0.002
    """
    rates = _check_rates(val_by_lr)
    return min(sorted(rates), key=rates.get)


def rate_to_bracket(val_by_lr: dict, factor: float = 2.0) -> float | None:
    """The next learning rate to try so that the best one has a worse tried rate on each side, or None.

    A best rate at the top of the tried grid says nothing about still higher rates: the
    answer is the top rate times ``factor``. At the bottom, the bottom rate divided by
    ``factor``. A best rate strictly inside the grid is bracketed: None. With one rate
    tried, the answer is the next one up.

    >>> rate_to_bracket({0.001: 2.4, 0.002: 2.2, 0.004: 2.1})
    0.008
    >>> rate_to_bracket({0.001: 2.4, 0.002: 2.2, 0.004: 2.1, 0.008: 2.15}) is None
    True
    >>> rate_to_bracket({0.002: 2.0, 0.004: 2.1})
    0.001
    """
    rates = _check_rates(val_by_lr)
    if not (isinstance(factor, (int, float)) and factor > 1 and math.isfinite(factor)):
        raise ValueError(f"factor must be a finite number > 1, got {factor!r}")
    ordered = sorted(rates)
    best = best_rate(rates)
    if best == ordered[-1]:
        return ordered[-1] * factor
    if best == ordered[0]:
        return ordered[0] / factor
    return None
