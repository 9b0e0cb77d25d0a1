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


def test_explorer_shows_errors_inline():
    ex = positional_explorer(d_model=16, positions=16, dims="0")
    assert ex.last_error is None and len(ex.view.children) == 1
    ex.controls["dims"].value = "0, 99"
    assert isinstance(ex.last_error, ValueError) and "out of range" in ex.error.value
    ex.controls["dims"].value = "1"
    ex.controls["rope"].value = True
    assert ex.last_error is None
    plt.close("all")
