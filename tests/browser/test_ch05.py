"""Chapter 5's positional-encoding explorer in a real browser."""

import pytest

pytestmark = pytest.mark.browser


def test_positional_explorer(lab):
    lab.open("tests/browser/fixtures/ch05_positional.ipynb")
    before = lab.view_png()
    lab.save_screenshot("ch05_before")
    lab.move_slider("d_model", 4)  # 32 -> 48
    wider = lab.view_png()
    assert wider != before
    assert lab.error_text().strip() == ""

    lab.move_slider("base", -4)  # 10^4 -> 10^3
    smaller_base = lab.view_png()
    assert smaller_base != wider

    lab.toggle("rope")
    rope = lab.view_png()
    assert rope != smaller_base
    lab.save_screenshot("ch05_rope")

    lab.set_text("dims", "0, 999")
    assert "out of range" in lab.error_text()
    assert lab.view_png() == rope  # the last good picture stays
    lab.set_text("dims", "0, 2")
    assert lab.error_text().strip() == ""
