"""Chapter 4's BatchNorm vs LayerNorm explorer in a real browser (drawn in the browser from Python's data)."""

import re

import pytest

pytestmark = pytest.mark.browser


def _max_change(svg: str, name: str) -> float:
    return float(re.search(rf"{name}: max change ([0-9.]+)", svg).group(1))


def test_norm_explorer(lab):
    lab.open("tests/browser/fixtures/ch04_norm.ipynb")
    before = lab.view_svg()
    assert "a batch of 4 (seed 0)" in before and before.count("<circle") >= 2 * 8 * 12 + 2 * 12  # two scatter panels + the statistics
    assert _max_change(before, "LayerNorm") == 0.0
    lab.save_screenshot("ch04_before")
    lab.move_slider("batch_size", 8)  # 4 -> 12
    bigger = lab.wait_view_change(before)
    assert "a batch of 12 (seed 0)" in bigger
    assert lab.error_text().strip() == ""
    # a bigger batch: BatchNorm's output for x0 moves less; LayerNorm's never moves
    assert _max_change(bigger, "BatchNorm") < _max_change(before, "BatchNorm")
    assert _max_change(bigger, "LayerNorm") == 0.0

    lab.move_slider("padded_length", 8)  # 8 -> 16
    padded = lab.wait_view_change(bigger)
    assert "padded from 8 to 16" in padded
    assert _max_change(padded, "BatchNorm") > _max_change(bigger, "BatchNorm")
    lab.save_screenshot("ch04_padded")

    lab.set_text("seed", "-1")
    assert "seed must be at least 0" in lab.error_text()
    assert lab.view_svg() == padded  # the last good picture stays, greyed out
    assert lab.page.locator(".llmbook-front-stale").first.is_visible()
    lab.set_text("seed", "3")
    assert lab.error_text().strip() == ""
    reseeded = lab.wait_view_change(padded)
    assert "(seed 3)" in reseeded
