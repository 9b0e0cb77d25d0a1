"""Checkers for the exercises of chapter 05, registered on import (see :mod:`llmbook.exercises`)."""

from __future__ import annotations

import math

import torch

from ._core import _call, _cases, _Fail, _is_placeholder, _prediction, _register, _report, _Result, _tgen


@_register("05.1", "The length of a sinusoidal encoding", "derive",
           "def pe_norm2(d):\n    return NotImplemented  # ||PE(pos)||^2 for an even d")
def _ex_05_1(answer, rng, ctx):
    from ..positional import sinusoidal_encoding
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
    from ..positional import sinusoidal_encoding
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
    from ..positional import rope_inv_freq
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
    from ..positional import apply_rope, rope_cache
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
    from ..positional import sinusoidal_encoding
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


@_register("05.6", "NTK-aware scaling aimed at any plane", "derive",
           "def ntk_base(head_dim, base, s, plane):\n"
           "    return NotImplemented  # the base that divides plane `plane`'s frequency by exactly s")
def _ex_05_6(answer, rng, ctx):
    # w_j = base^(-2j/d); b'^(-2j/d) = base^(-2j/d) / s  <=>  b' = base * s^(d / (2j))
    def ref(hd, base, s, j):
        return base * s ** (hd / (2 * j))

    cases = []
    for _ in range(4):
        hd = 2 * rng.randint(4, 64)
        cases.append((hd, rng.choice([100.0, 10000.0, 500000.0]), rng.choice([2.0, 4.0, 8.0, 1.5]),
                      rng.randint(1, hd // 2 - 2)))                        # never the slowest plane
    hd = 2 * rng.randint(4, 64)
    cases.insert(rng.randint(1, 4), (hd, 10000.0, 4.0, hd // 2 - 1))       # the slowest plane: section 7's base
    return _cases(answer, ref, cases, rel=1e-6,
                  wrong=[(lambda hd, b, s, j: b * s ** (hd / (hd - 2)),
                          "that is the base of section 7, which divides the slowest plane (d/2 - 1) by s; "
                          "solve base'^(-2j/d) = base^(-2j/d) / s for the plane asked"),
                         (lambda hd, b, s, j: b * s,
                          "multiplying the base by s divides plane j by s^(2j/d), not by s"),
                         (lambda hd, b, s, j: b * s ** (2 * j / hd),
                          "the exponent is upside down: raise s to d / (2j)"),
                         (lambda hd, b, s, j: b / s ** (hd / (2 * j)),
                          "a smaller base speeds the planes up; dividing a frequency by s needs a larger base")],
                  hint="plane j turns by base^(-2j/head_dim) per position; find base' with base'^(-2j/head_dim) = that / s",
                  show=lambda a: f"head_dim={a[0]}, base={a[1]:g}, s={a[2]:g}, plane={a[3]}")
