"""llmbook.viz.positional: render function and explorer, without a browser."""

import matplotlib.pyplot as plt
import pytest

from llmbook.viz.positional import parse_dims, positional_explorer, positional_figure


@pytest.mark.parametrize("rope", [False, True])
def test_figure_panels(rope):
    fig = positional_figure(16, 100.0, 24, "0, 3", rope=rope)
    assert len(fig.axes) == 4
    assert "RoPE" in fig.axes[0].get_title() if rope else "sinusoidal" in fig.axes[0].get_title()
    assert len(fig.axes[2].lines) >= 2
    plt.close(fig)


def test_bad_input():
    with pytest.raises(ValueError, match="out of range"):
        parse_dims("0, 40", 32)
    with pytest.raises(ValueError, match="dims"):
        parse_dims("a, b", 32)
    with pytest.raises(ValueError, match="empty"):
        parse_dims(" ", 32)
    with pytest.raises(ValueError, match="d_model"):
        positional_figure(15, 10000.0, 20, "0")
    with pytest.raises(ValueError, match="positions"):
        positional_figure(16, 10000.0, 1, "0")
    with pytest.raises(ValueError, match="base"):
        positional_figure(16, 1.0, 20, "0")


def test_explorer_sends_the_table_once_and_dims_stay_in_the_browser():
    import numpy as np

    from llmbook.viz.positional import positional_data

    ex = positional_explorer(d_model=16, positions=16, dims="0")
    assert ex.last_error is None and len(ex.view.children) == 1
    front = ex.front
    table = np.array(front.spec["table"])
    assert table.shape == (16, 16) and front.spec["table_title"].startswith("sinusoidal")
    np.testing.assert_allclose(table, positional_data(16, 10000.0, 16)["table"].numpy(), rtol=1e-3, atol=1e-6)
    spec = front.spec
    ex.controls["dims"].value = "1, 5"  # display only: no new spec
    assert front.dims == "1, 5" and front.spec is spec and ex.values()["dims"] == "1, 5"
    with pytest.raises(ValueError, match="out of range"):
        ex.controls["dims"].value = "0, 99"  # checked against d_model when set from Python
    assert front.dims == "1, 5"
    ex.controls["rope"].value = True  # needs Python: a new table
    assert ex.last_error is None and front.spec["table_title"].startswith("RoPE")
    ex.controls["d_model"].value = 32
    assert np.array(front.spec["table"]).shape == (16, 32)
    # the static picture follows the browser's dims
    fig = ex.render(**ex.values())
    assert [ln.get_label() for ln in fig.axes[1].lines] == ["dim 1", "dim 5"]
    plt.close("all")


def test_dims_error_does_not_echo_a_long_input():
    with pytest.raises(ValueError, match="dims must be comma-separated integers") as info:
        parse_dims("x" * 5000, 32)
    assert len(str(info.value)) < 120
