"""Power-law fits on synthetic data, the Chinchilla rule of thumb, and the scaling sweep script."""

import importlib.util
import json
import math
from pathlib import Path

import numpy as np
import pytest

from llmbook.scaling import (CHINCHILLA_TOKENS_PER_PARAM, GPT3_PARAMS, GPT3_TRAIN_TOKENS, KAPLAN_ALPHA_N,
                             KAPLAN_N_C, best_rate, chinchilla_optimal, chinchilla_tokens, fit_power_law,
                             fit_power_law_offset, kaplan_loss, power_law, rate_to_bracket, training_compute)

ROOT = Path(__file__).resolve().parents[1]


def _load_sweep():
    spec = importlib.util.spec_from_file_location("scaling_sweep", ROOT / "scripts" / "scaling_sweep.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("a, alpha", [(5.0, 0.076), (12.0, 0.3), (0.7, 1.5)])
def test_fit_power_law_recovers_exact_exponent(a, alpha):
    n = np.logspace(3, 9, 7)
    fa, falpha = fit_power_law(n, a * n ** -alpha)
    assert falpha == pytest.approx(alpha, rel=1e-9)
    assert fa == pytest.approx(a, rel=1e-9)


def test_fit_power_law_with_noise():
    rng = np.random.default_rng(0)
    n = np.logspace(4, 8, 40)
    losses = 8.0 * n ** -0.12 * np.exp(rng.normal(0, 0.01, len(n)))  # 1% multiplicative noise
    a, alpha = fit_power_law(n, losses)
    assert abs(alpha - 0.12) < 0.01
    assert abs(math.log(a / 8.0)) < 0.15


def test_fit_power_law_offset_recovers_all_three():
    n = np.logspace(3, 7, 8)
    a, alpha, c = fit_power_law_offset(n, 20.0 * n ** -0.35 + 1.1, grid=5000)
    assert alpha == pytest.approx(0.35, abs=0.01)
    assert c == pytest.approx(1.1, abs=0.01)
    assert a == pytest.approx(20.0, rel=0.05)
    # Without the offset, the pure power law fits the same data with a smaller exponent.
    assert fit_power_law(n, 20.0 * n ** -0.35 + 1.1)[1] < 0.3


def test_power_law_and_kaplan():
    assert power_law(1e4, 3.0, 0.5) == pytest.approx(0.03)
    np.testing.assert_allclose(power_law([1.0, 4.0], 2.0, 0.5, c=1.0), [3.0, 2.0])
    assert kaplan_loss(KAPLAN_N_C) == pytest.approx(1.0)
    assert kaplan_loss(1e8) == pytest.approx((KAPLAN_N_C / 1e8) ** KAPLAN_ALPHA_N)
    # Ten times the parameters lowers the loss by 10^-0.076, about 16%.
    assert kaplan_loss(1e10) / kaplan_loss(1e9) == pytest.approx(10 ** -0.076)


def test_chinchilla_rule_of_thumb():
    assert CHINCHILLA_TOKENS_PER_PARAM == 20
    assert chinchilla_tokens(70e9) == pytest.approx(1.4e12)
    assert chinchilla_tokens(GPT3_PARAMS["175B"]) == pytest.approx(3.5e12)
    assert GPT3_TRAIN_TOKENS / GPT3_PARAMS["175B"] == pytest.approx(1.714, abs=1e-3)  # GPT-3: under 2 tokens/param
    assert training_compute(175e9, 300e9) == pytest.approx(3.15e23)
    n, d = chinchilla_optimal(training_compute(175e9, 300e9))
    assert d == pytest.approx(20 * n)
    assert 6 * n * d == pytest.approx(3.15e23)
    assert 50e9 < n < 55e9  # GPT-3's compute would be best spent on a ~51B model and ~1T tokens
    n2, _ = chinchilla_optimal(4 * 3.15e23)
    assert n2 == pytest.approx(2 * n)  # N grows as the square root of compute


@pytest.mark.parametrize("call, name", [
    (lambda: fit_power_law([1, 2], [1.0]), "same length"),
    (lambda: fit_power_law([1], [1.0]), "at least two"),
    (lambda: fit_power_law([5, 5], [1.0, 2.0]), "two different"),
    (lambda: fit_power_law([1, -2], [1.0, 2.0]), "params"),
    (lambda: fit_power_law([1, 2], [1.0, float("nan")]), "losses"),
    (lambda: fit_power_law_offset([1, 2], [1.0, 2.0]), "three"),
    (lambda: fit_power_law_offset([1, 2, 3], [3.0, 2.0, 1.0], grid=2), "grid"),
    (lambda: chinchilla_tokens(0), "n_params"),
    (lambda: chinchilla_tokens(1e9, tokens_per_param=-1), "tokens_per_param"),
    (lambda: chinchilla_optimal(-1.0), "compute"),
    (lambda: training_compute(1e9, 0), "tokens"),
    (lambda: kaplan_loss(0.0), "non_embedding_params"),
    (lambda: best_rate({}), "val_by_lr"),
    (lambda: best_rate({"x": 1.0}), "val_by_lr"),
    (lambda: best_rate({-0.1: 1.0}), "learning rates"),
    (lambda: best_rate({0.1: float("nan")}), "NaN"),
    (lambda: rate_to_bracket({0.1: 1.0}, factor=1.0), "factor"),
])
def test_bad_input(call, name):
    with pytest.raises(ValueError, match=name):
        call()


def test_rate_to_bracket_walks_out_of_the_grid_until_the_loss_turns_up():
    # A loss that is a parabola in log(lr) with its minimum at 0.01: doubling from 0.004 must stop
    # once the best rate has a worse one on each side.
    loss = lambda lr: (math.log(lr) - math.log(0.01)) ** 2
    tried = {lr: loss(lr) for lr in (0.001, 0.002, 0.004)}
    added = []
    while (nxt := rate_to_bracket(tried)) is not None:
        added.append(nxt)
        tried[nxt] = loss(nxt)
    assert added == [0.008, 0.016]
    assert best_rate(tried) == 0.008 and rate_to_bracket(tried) is None
    # The same from above: halving until the loss turns up again.
    tried = {lr: loss(lr) for lr in (0.08, 0.16)}
    while (nxt := rate_to_bracket(tried)) is not None:
        tried[nxt] = loss(nxt)
    assert sorted(tried) == [0.005, 0.01, 0.02, 0.04, 0.08, 0.16] and best_rate(tried) == 0.01
    # Keys as the sweep's JSON writes them (repr of the rate); a tie keeps the smaller rate.
    assert best_rate({"0.002": 1.0, "0.004": 1.0}) == 0.002
    assert rate_to_bracket({"0.002": 1.5, "0.004": 1.2, "0.008": 1.3}) is None


def test_sweep_bracket_and_resume(tmp_path):
    sweep = _load_sweep()
    out = tmp_path / "scaling.json"
    kw = dict(steps=4, batch_size=8, block_size=16, eval_batches=2, device="cpu", data_chars=100_000, log=lambda s: None)
    first = sweep.run_sweep([(1, 16)], out=out, lr_multipliers=(1.0, 2.0), **kw)
    assert first["complete"] and len(first["runs"][0]["val_loss_by_lr"]) == 2
    trained = []
    log = lambda line: trained.append(line) if line.startswith("  L1-d16 lr ") else None
    again = sweep.run_sweep([(1, 16)], out=out, lr_multipliers=(1.0, 2.0), bracket=5,
                            resume=json.loads(out.read_text()), **dict(kw, log=log))
    run = again["runs"][0]
    assert len(trained) == len(run["val_loss_by_lr"]) - 2     # the two recorded rates were not trained again
    for lr, val in first["runs"][0]["val_loss_by_lr"].items():
        assert run["val_loss_by_lr"][lr] == val               # and their losses are kept as recorded
    rates = {float(k): v for k, v in run["val_loss_by_lr"].items()}
    assert run["bracketed"] == (rate_to_bracket(rates) is None)
    assert run["bracketed"] or len(rates) == 2 + 5            # bracketed, or stopped at the cap
    assert run["lr"] == best_rate(rates) and run["val_loss"] == min(rates.values())
    assert math.isfinite(run["test_loss"]) and set(run["seconds_by_lr"]) == set(run["val_loss_by_lr"])
    assert again["meta"]["extended_by"] and json.loads(out.read_text()) == json.loads(json.dumps(again))
    # A rate trained fresh from the start gives the loss the resumed sweep recorded.
    newest = max(rates)
    alone = sweep.run_sweep([(1, 16)], lr_multipliers=(newest / 2e-3,), **kw)
    assert alone["runs"][0]["val_loss"] == rates[newest]
    with pytest.raises(ValueError, match="steps"):
        sweep.run_sweep([(1, 16)], resume=again, **dict(kw, steps=5))


def test_sweep_two_tiny_sizes(tmp_path):
    sweep = _load_sweep()
    out = tmp_path / "scaling.json"
    logged = []
    result = sweep.run_sweep([(1, 16), (2, 32)], steps=4, batch_size=8, block_size=16, eval_batches=2,
                             device="cpu", data_chars=100_000, out=out, log=logged.append)
    on_disk = json.loads(out.read_text())
    assert on_disk == json.loads(json.dumps(result))
    for key in ("device", "torch", "block_size", "batch_size", "steps", "vocab_size", "runs", "fit"):
        assert key in on_disk, key
    assert on_disk["device"] == "cpu"
    runs = on_disk["runs"]
    assert len(runs) == 2 and len(logged) == 2 * 3 + 2 + 1  # a line per learning rate, per size, and the fit
    assert on_disk["complete"] and on_disk["meta"]["split"] == "load_splits(shakespeare) 80/10/10"
    for run in runs:  # the kept learning rate is the one with the lowest validation loss
        assert len(run["val_loss_by_lr"]) == 3 and run["val_loss"] == min(run["val_loss_by_lr"].values())
        assert run["val_loss_by_lr"][repr(run["lr"])] == run["val_loss"] and math.isfinite(run["test_loss"])
    for run in runs:
        assert set(sweep.SCHEMA_KEYS) <= set(run)
        assert run["tokens"] == 4 * 8 * 16 and run["steps"] == 4
        assert 0 < run["non_embedding_params"] < run["params"]
        assert math.isfinite(run["val_loss"]) and 0 < run["val_loss"] < 6
        assert run["config"]["n_layer"] == run["n_layer"] and run["config"]["d_model"] == run["d_model"]
    assert runs[0]["non_embedding_params"] < runs[1]["non_embedding_params"]
    a, alpha = fit_power_law([r["non_embedding_params"] for r in runs], [r["val_loss"] for r in runs])
    assert on_disk["fit"]["alpha"] == pytest.approx(alpha, abs=1e-5)
    assert on_disk["fit"]["a"] == pytest.approx(a, rel=1e-4)
    # The fitted line passes through both points (two points, two unknowns).
    for r in runs:
        assert power_law(r["non_embedding_params"], a, alpha) == pytest.approx(r["val_loss"], rel=1e-6)


def test_sweep_same_seed_same_losses():
    sweep = _load_sweep()
    kw = dict(steps=3, batch_size=4, block_size=16, eval_batches=1, device="cpu", data_chars=50_000, log=lambda s: None)
    a = sweep.run_sweep([(1, 16)], **kw)
    b = sweep.run_sweep([(1, 16)], **kw)
    assert a["runs"][0]["val_loss"] == b["runs"][0]["val_loss"]
    assert "fit" not in a  # one size: nothing to fit


def test_sweep_bad_input():
    sweep = _load_sweep()
    with pytest.raises(ValueError, match="sizes"):
        sweep.run_sweep([], steps=1)
    with pytest.raises(ValueError, match="steps"):
        sweep.run_sweep([(1, 16)], steps=0)
    with pytest.raises(ValueError, match="d_model"):
        sweep.model_config(1, 20, 65, 16)
    with pytest.raises(ValueError, match="bracket"):
        sweep.run_sweep([(1, 16)], steps=1, bracket=-1)
    with pytest.raises(ValueError, match="resume"):
        sweep.run_sweep([(1, 16)], steps=1, resume=[1, 2])


def test_committed_sweep_result():
    path = ROOT / "data" / "results" / "ch08_scaling.json"
    if not path.exists():
        pytest.skip("data/results/ch08_scaling.json not made yet (scripts/scaling_sweep.py)")
    data = json.loads(path.read_text())
    runs = data["runs"]
    assert len(runs) >= 5
    n = [r["non_embedding_params"] for r in runs]
    assert n == sorted(n) and n[0] < 10_000 and n[-1] > 1_000_000
    assert len({r["tokens"] for r in runs}) == 1  # one token budget for every size
    a, alpha = fit_power_law(n, [r["val_loss"] for r in runs])
    assert data["fit"]["alpha"] == pytest.approx(alpha, abs=1e-4)
    assert alpha > 0  # bigger models reach a lower loss on the same budget
