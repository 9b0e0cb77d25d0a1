"""llmbook.flash.hbm_accesses: the closed form equals a walk over Dao et al.'s loops (issue 26)."""
import math

import pytest

from llmbook.flash import hbm_accesses


def walk(T, d, M):
    """Add up what each line of Algorithms 0 and 1 (Dao et al. 2022) reads or writes."""
    standard = (2 * T * d + T * T) + (T * T + T * T) + (T * T + T * d + T * d)
    bc = math.ceil(M / (4 * d))
    br = min(bc, d)
    flash = T * d + 2 * T                                   # O, l, m initialised in HBM
    for j in range(0, T, bc):
        flash += 2 * min(bc, T - j) * d                     # K_j, V_j
        for i in range(0, T, br):
            rows = min(br, T - i)
            flash += (2 * rows * d + 2 * rows) + (rows * d + 2 * rows)   # read Q_i, O_i, l_i, m_i; write O_i, l_i, m_i
    return standard, flash, br, bc


@pytest.mark.parametrize("T, d, M", [(1, 1, 1), (7, 3, 10), (1000, 64, 98_304), (4096, 128, 98_304),
                                     (513, 64, 4096), (300, 16, 10**7)])
def test_closed_form_equals_the_loops(T, d, M):
    got = hbm_accesses(T, d, M)
    assert (got["standard"], got["flash"], got["block_q"], got["block_k"]) == walk(T, d, M)


def test_ratio_tends_to_4_bc_over_3d_plus_4():
    # long context: standard ~ 4 T^2, flash ~ (T / B_c)(3 T d + 4 T), ratio -> 4 B_c / (3d + 4) ~ M / 3d^2
    d, M = 64, 98_304
    ratios = [hbm_accesses(384 * n, d, M)["standard"] / hbm_accesses(384 * n, d, M)["flash"] for n in (4, 16, 64, 256)]
    assert ratios == sorted(ratios) and ratios[0] > 1
    assert ratios[-1] == pytest.approx(4 * 384 / (3 * d + 4), rel=0.01)


@pytest.mark.parametrize("kw, name", [(dict(T=0, d=64, M=10), "T"), (dict(T=8, d=2.0, M=10), "d"),
                                      (dict(T=8, d=4, M=True), "M")])
def test_bad_input_names_the_parameter(kw, name):
    with pytest.raises(ValueError, match=f"^{name} must"):
        hbm_accesses(**kw)
