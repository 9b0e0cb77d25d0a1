"""The chapter-3 attention explorer in a real browser: every control re-draws the view."""

import pytest

pytestmark = pytest.mark.browser


def test_ch03_attention_explorer(lab):
    lab.open("tests/browser/fixtures/ch03_attention_explorer.ipynb")
    start = lab.view_png()
    lab.move_slider("scale", 10)  # 1.0 -> 2.0: sharper softmax
    sharper = lab.view_png()
    assert sharper != start
    lab.toggle("causal")
    causal = lab.view_png()
    assert causal != sharper
    lab.select("head", "head 1")
    one_head = lab.view_png()
    assert one_head != causal
    lab.select("layer", "layer 1")
    assert lab.view_png() != one_head
    lab.set_text("text", "attention is all you need")
    assert lab.view_png() != one_head
    lab.save_screenshot("ch03_attention_explorer")
    lab.set_text("text", "")
    assert "empty" in lab.error_text()
