"""Chapter 8a's attention explorer on SmolLM2-135M in a real browser: each control re-draws the view
from the real model, and an empty text shows an inline message."""

import pytest

pytestmark = pytest.mark.browser


def test_ch08_llama_attention_explorer(lab):
    lab.open("tests/browser/fixtures/ch08_llama_attention.ipynb")
    start = lab.view_png()
    lab.select("layer", "layer 16")
    layer16 = lab.view_png()
    assert layer16 != start
    lab.select("head", "head 3")
    head3 = lab.view_png()
    assert head3 != layer16
    lab.set_text("text", "Paris is the capital of France.")
    assert lab.view_png() != head3
    lab.save_screenshot("ch08_llama_attention")
    lab.set_text("text", "")
    assert "empty" in lab.error_text()
