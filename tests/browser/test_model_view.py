"""The whole-model attention view in a real browser: choosing another head or layer opens that
thumbnail large (the picture changes), and the grid with its frame is re-drawn."""

import pytest

pytestmark = pytest.mark.browser


def test_model_view_selects_head_and_layer(lab):
    lab.open("tests/browser/fixtures/ch_model_view.ipynb")
    start = lab.view_png()  # a screenshot: the images' blob URLs change on every re-render
    assert len(start) > 5000
    lab.select("head", "head 3")
    head3 = lab.view_png()
    assert head3 != start
    lab.select("layer", "layer 2")
    layer2 = lab.view_png()
    assert layer2 not in (start, head3)
    lab.select("head", "head 0")
    assert lab.view_png() != layer2
    lab.save_screenshot("model_view")
