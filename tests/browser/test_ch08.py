"""Chapter 8a's attention explorer on SmolLM2-135M in a real browser: layer and head switch in the
browser (no forward pass), typed text re-runs the model, Chinese tokens that split a character get
readable labels, and an empty text shows an inline message."""

import pytest

pytestmark = pytest.mark.browser


def test_ch08_llama_attention_explorer(lab):
    lab.open("tests/browser/fixtures/ch08_llama_attention.ipynb")
    start = lab.view_svg()
    lab.front_select("layer", "layer 16")
    layer16 = lab.view_svg()
    assert layer16 != start and "layer 16" in layer16
    lab.front_select("head", "head 3")
    head3 = lab.view_svg()
    assert head3 != layer16 and "head 3 of layer 16" in head3
    lab.set_text("text", "Paris is the capital of France.")
    paris = lab.wait_view_change(head3)  # Python: a new forward pass
    lab.set_text("text", "今天天气很好")  # byte-level tokens split these characters
    chinese = lab.wait_view_change(paris)
    assert "\ufffd" not in chinese and "今" in chinese
    lab.save_screenshot("ch08_llama_attention")
    lab.set_text("text", "")
    assert "empty" in lab.error_text()
