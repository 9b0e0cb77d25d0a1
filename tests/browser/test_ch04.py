"""Chapter 4's BatchNorm vs LayerNorm explorer in a real browser."""

import pytest

pytestmark = pytest.mark.browser


def test_norm_explorer(lab):
    lab.open("tests/browser/fixtures/ch04_norm.ipynb")
    before = lab.view_png()
    lab.save_screenshot("ch04_before")
    lab.move_slider("batch_size", 8)  # 4 -> 12
    bigger = lab.view_png()
    assert bigger != before
    assert lab.error_text().strip() == ""

    lab.move_slider("padded_length", 8)  # 8 -> 16
    padded = lab.view_png()
    assert padded != bigger
    padded_src = lab.view_src()
    lab.save_screenshot("ch04_padded")

    lab.set_text("seed", "-1")
    assert "seed must be at least 0" in lab.error_text()
    assert lab.view_src() == padded_src  # the last good picture stays
    lab.set_text("seed", "3")
    assert lab.error_text().strip() == ""
    assert lab.view_png() != padded
