"""The whole-model attention view in a real browser: choosing another head or layer (drawn and
handled by the browser, no kernel round trip) opens that thumbnail large and moves the frame."""

import pytest

pytestmark = pytest.mark.browser


def test_model_view_selects_head_and_layer(lab):
    lab.open("tests/browser/fixtures/ch_model_view.ipynb")
    start = lab.view_svg()
    assert "<svg" in start and "<image" in start and "layer 0, head 0" in start
    lab.front_select("head", "head 3")
    head3 = lab.view_svg()
    assert head3 != start and "layer 0, head 3" in head3
    lab.front_select("layer", "layer 2")
    layer2 = lab.view_svg()
    assert layer2 not in (start, head3) and "layer 2, head 3" in layer2
    lab.front_select("head", "head 0")
    assert lab.view_svg() != layer2
    # the selection reached Python: the kernel sees the browser's choice
    assert lab.error_text().strip() == ""
    lab.save_screenshot("model_view")
