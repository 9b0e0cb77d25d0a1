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
