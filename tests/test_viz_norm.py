"""llmbook.viz.norm: BatchNorm vs LayerNorm explorer, without a browser."""

import matplotlib.pyplot as plt
import pytest
import torch

from llmbook.viz.norm import norm_explorer, norm_figure, norm_stats


def test_layernorm_never_changes_batchnorm_does():
    small = norm_stats(batch_size=2, padded_length=8, seed=0)
    big = norm_stats(batch_size=64, padded_length=8, seed=0)
    padded = norm_stats(batch_size=64, padded_length=24, seed=0)
    for s in (small, big, padded):
        assert s["ln_change"] < 1e-12
    # BatchNorm's estimate improves with the batch size, and padding zeros pull it off again.
    assert big["bn_change"] < small["bn_change"]
    assert padded["bn_change"] > big["bn_change"]
    # Padding drags every per-feature mean towards zero by the fraction of padded positions.
    unpadded_mean = norm_stats(batch_size=64, padded_length=8, seed=0)["bn_mean"]
    assert torch.allclose(padded["bn_mean"], unpadded_mean * 8 / 24)


def test_batchnorm_matches_torch():
    s = norm_stats(batch_size=5, padded_length=11, seed=3)
    data = s["data"]
    x = data.batch(5, 11, 3)
    bn = torch.nn.BatchNorm1d(data.d_model, affine=False, dtype=torch.float64).train()
    want = bn(x.transpose(1, 2)).transpose(1, 2)[0, : data.length]
    assert torch.allclose(s["bn_out"], want, atol=1e-10)


def test_bad_input_names_the_parameter():
    with pytest.raises(ValueError, match="padded_length"):
        norm_stats(batch_size=4, padded_length=4)
    with pytest.raises(ValueError, match="batch_size"):
        norm_stats(batch_size=0)
    with pytest.raises(ValueError, match="seed"):
        norm_stats(seed=-1)
    with pytest.raises(ValueError, match="batch_size"):
        norm_stats(batch_size=1, padded_length=1, length=1)


def test_figure_and_explorer():
    fig = norm_figure(batch_size=3, padded_length=12, seed=1)
    assert len(fig.axes) == 3 and "LayerNorm" in fig.axes[2].get_title()
    plt.close(fig)
    ex = norm_explorer()
    assert ex.last_error is None and len(ex.view.children) == 1
    ex.controls["seed"].value = -1
    assert isinstance(ex.last_error, ValueError) and "seed" in ex.error.value
    ex.controls["seed"].value = 2
    assert ex.last_error is None and ex.error.value == ""
    plt.close("all")


def test_spec_matches_the_python_computation():
    from llmbook.viz.norm import REFERENCE_BATCH, norm_spec

    spec = norm_spec(batch_size=5, padded_length=12, seed=2)
    s = norm_stats(batch_size=5, padded_length=12, seed=2)
    assert spec["kind"] == "panels"
    assert spec["title"] == "The same sentence x0 in a batch of 5, padded from 8 to 12 (seed 2); points on the diagonal = unchanged"
    stats, bn, ln = spec["panels"]
    pop, est = stats["series"]
    torch.testing.assert_close(torch.tensor(pop["y"], dtype=torch.float64), s["data"].mu, rtol=1e-3, atol=1e-6)
    torch.testing.assert_close(torch.tensor(est["y"], dtype=torch.float64), s["bn_mean"], rtol=1e-3, atol=1e-6)
    torch.testing.assert_close(torch.tensor(est["yerr"], dtype=torch.float64), s["bn_std"], rtol=1e-3, atol=1e-6)
    for panel, key, name in [(bn, "bn", "BatchNorm"), (ln, "ln", "LayerNorm")]:
        (series,) = panel["series"]
        torch.testing.assert_close(torch.tensor(series["x"], dtype=torch.float64), s[f"{key}_ref"].flatten(), rtol=1e-3, atol=1e-6)
        torch.testing.assert_close(torch.tensor(series["y"], dtype=torch.float64), s[f"{key}_out"].flatten(), rtol=1e-3, atol=1e-6)
        assert panel["title"] == f"{name}: max change {s[f'{key}_change']:.3f}"
        assert panel["xlabel"] == f"output for x0 in a batch of {REFERENCE_BATCH}"
    # LayerNorm's points sit on the diagonal, BatchNorm's do not (batch of 5, padded)
    assert ln["series"][0]["x"] == ln["series"][0]["y"] and bn["series"][0]["x"] != bn["series"][0]["y"]
    # the static picture has the same titles
    fig = norm_figure(batch_size=5, padded_length=12, seed=2)
    assert [a.get_title() for a in fig.axes] == [p["title"] for p in spec["panels"]]
    assert fig._suptitle.get_text() == spec["title"]
    plt.close(fig)


def test_reference_is_computed_once_per_seed(monkeypatch):
    import llmbook.viz.norm as norm

    norm_stats(batch_size=4, padded_length=8, seed=7)
    calls = []
    real = norm._batchnorm
    monkeypatch.setattr(norm, "_batchnorm", lambda x, *a: (calls.append(x.shape[0]), real(x, *a))[1])
    for b in (5, 6, 7):
        norm_stats(batch_size=b, padded_length=8, seed=7)
    assert calls == [5, 6, 7]  # only this batch, never the reference batch of 2048 again
    norm_stats(batch_size=5, padded_length=8, seed=8)
    assert calls[-2:] == [norm.REFERENCE_BATCH, 5]  # a new seed: a new reference


def test_explorer_sends_a_spec_and_shows_errors():
    ex = norm_explorer(batch_size=4)
    assert ex.view.children == (ex.front,) and ex.front.spec["kind"] == "panels"
    ex.controls["batch_size"].value = 9
    assert "batch of 9" in ex.front.spec["title"] and ex.last_error is None
    before = ex.front.spec
    ex.controls["seed"].value = -1
    assert "seed must be at least 0" in str(ex.last_error) and ex.front.stale and ex.front.spec == before
    ex.controls["seed"].value = 1
    assert not ex.front.stale and "seed 1" in ex.front.spec["title"]
